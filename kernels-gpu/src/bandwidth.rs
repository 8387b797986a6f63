//! The vectorized 1-D map that every bandwidth-bound kernel runs on
//! (`multiply`, `vector_sum_i32`, `doubles_matrix` and every generated
//! `elementwise_*` kernel): each thread moves whole 16-byte vectors
//! (`ld.global.v4.b32` / `st.global.v4.b32`, or `.v2` of 64-bit elements),
//! with [`UNROLL`] vectors of loads in flight before the first store.
//!
//! Device buffers may be sub-slices that start at any element, so the
//! arrays of one call are split into
//! - a **head** of the elements before the first 128-byte boundary (a cache
//!   line: then every warp's vectors fill whole lines and 32-byte sectors),
//!   or before the first 16-byte boundary when the arrays agree only modulo
//!   16, handled one element per thread;
//! - a **body** of whole 16-byte vectors;
//! - a **tail** of the last elements that fill no whole vector;
//!
//! which works when every array of the call has the same address modulo
//! 16 ([`split`]); when they disagree, no vector can be aligned for all of
//! them, and the whole range is mapped one element at a time (still
//! [`UNROLL`] elements in flight).
//!
//! The split is a plain function, shared with the host's unit tests.

/// Bytes of one vector access (`ld.global.v4.b32`).
pub const VECTOR_BYTES: usize = 16;
/// Bytes of a cache line, the alignment the body starts at when every array
/// of a call agrees modulo it.
pub const LINE_BYTES: usize = 128;
/// Vectors (or, on the element path, elements) a thread loads before it
/// stores the first result of a grid-stride step.
pub const UNROLL: usize = 4;

/// How [`split`] cuts `n` elements for vector access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// Elements before the body's first boundary (one per thread: at most
    /// 127 bytes' worth, fewer than 32 elements of 4 bytes).
    pub head: usize,
    /// Whole 16-byte vectors after the head.
    pub vectors: usize,
    /// Elements after the last whole vector (one per thread).
    pub tail: usize,
}

/// Splits `n` elements of `size` bytes (1, 2, 4, 8 or 16) that start at the
/// byte addresses `addrs` (one per array of the call) into head, vectors and
/// tail, or `None` when the arrays' addresses differ modulo 16 (or one is not
/// aligned to its element), so that no element path can be aligned for all.
/// The body starts at a 128-byte boundary of every array when they all agree
/// modulo 128, else at a 16-byte one.
pub fn split(addrs: impl Iterator<Item = usize> + Clone, size: usize, n: usize) -> Option<Split> {
    if size == 0 || !VECTOR_BYTES.is_multiple_of(size) {
        return None;
    }
    let first = addrs.clone().next()?;
    let agree = |m: usize| addrs.clone().all(|a| a % m == first % m);
    if !(first % size == 0 && agree(VECTOR_BYTES)) {
        return None;
    }
    let align = if agree(LINE_BYTES) {
        LINE_BYTES
    } else {
        VECTOR_BYTES
    };
    let per_vector = VECTOR_BYTES / size;
    let head = ((align - first % align) % align / size).min(n);
    let rest = n - head;
    Some(Split {
        head,
        vectors: rest / per_vector,
        tail: rest % per_vector,
    })
}

/// How an element type sits in the registers of the vector path: as
/// [`Words`](Lanes::Word), each holding one element (`f32`, `i64`, …) or a
/// packed pair (`f16` and `bf16` as [`f16x2`](crate::device::float16::f16x2)
/// and [`bf16x2`](crate::device::float16::bf16x2), on which one packed
/// instruction does two elements' work). The map applies its function to
/// whole words; an element of the head or tail goes through
/// [`splat`](Lanes::splat) and [`first`](Lanes::first).
///
/// # Safety
/// `Word`'s bytes are `size_of::<Word>() / size_of::<Self>()` consecutive
/// elements in memory order, its size divides 16, it is aligned to at most
/// its size, and a function applied to `splat(x)` gives in its first
/// element what it gives for `x` alone (each lane is computed on its own).
pub unsafe trait Lanes: Copy + Default {
    /// One register's worth of elements.
    type Word: Copy + Default;
    /// `x` in every element of a word.
    fn splat(self) -> Self::Word;
    /// The first element of a word.
    fn first(word: Self::Word) -> Self;
}

macro_rules! lanes_one {
    ($($t:ty),*) => {$(
        // SAFETY: the word is the element itself.
        unsafe impl Lanes for $t {
            type Word = $t;
            #[inline(always)]
            fn splat(self) -> $t {
                self
            }
            #[inline(always)]
            fn first(word: $t) -> $t {
                word
            }
        }
    )*};
}
lanes_one!(i8, u8, i16, u16, i32, u32, i64, u64, f32, f64);

macro_rules! lanes_pair {
    ($($t:ident => $x2:ident),*) => {$(
        // SAFETY: a `repr(transparent)` u32 holding element 0 in its low
        // half, the element at the lower address (little-endian); the
        // packed operations work on each half alone.
        unsafe impl Lanes for crate::device::float16::$t {
            type Word = crate::device::float16::$x2;
            #[inline(always)]
            fn splat(self) -> Self::Word {
                crate::device::float16::$x2::new(self, self)
            }
            #[inline(always)]
            fn first(word: Self::Word) -> Self {
                word.lo()
            }
        }
    )*};
}
lanes_pair!(f16 => f16x2, bf16 => bf16x2);

/// The vectorized map itself: on nvptx64 the kernels' code, on the host the
/// same code run by the simulator.
pub mod device {
    use super::{Lanes, Split, UNROLL, split};
    use crate::device::thread;
    use core::array::from_fn;

    /// A value read or written as one aligned 16-byte access.
    #[repr(C, align(16))]
    #[derive(Clone, Copy)]
    struct Aligned<A>(A);

    /// The arrays of one map: `ins` are read, `outs[..first_inout]` are
    /// written only (they start at `Word::default()` in `f`),
    /// `outs[first_inout..]` are read and written.
    struct Arrays<T, const NI: usize, const NO: usize> {
        ins: [*const T; NI],
        outs: [*mut T; NO],
        first_inout: usize,
    }

    /// The words of one 16-byte vector of every array.
    type Vectors<W, const L: usize, const NI: usize, const NO: usize> =
        ([[W; L]; NI], [[W; L]; NO]);

    impl<T: Lanes, const NI: usize, const NO: usize> Arrays<T, NI, NO> {
        /// The `L` words of the 16-byte vector at element `e` of every input
        /// and in-out array (one `ld.global.v4`/`.v2` each).
        ///
        /// # Safety
        /// The vector lies within every array and `e` is a 16-byte boundary
        /// of each; `L * size_of::<T::Word>() == 16`.
        #[inline(always)]
        unsafe fn load_vector<const L: usize>(&self, e: usize) -> Vectors<T::Word, L, NI, NO> {
            // SAFETY (both): the caller's contract.
            let read = |p: *const T| unsafe { (*(p.add(e) as *const Aligned<[T::Word; L]>)).0 };
            let ins = from_fn(|a| read(self.ins[a]));
            let outs = from_fn(|b| {
                if b >= self.first_inout {
                    read(self.outs[b])
                } else {
                    [T::Word::default(); L]
                }
            });
            (ins, outs)
        }

        /// Applies `f` to each word of the vectors and stores the outputs.
        ///
        /// # Safety
        /// As for [`Arrays::load_vector`]; only this thread touches the
        /// vector.
        #[inline(always)]
        unsafe fn store_vector<const L: usize>(
            &self,
            e: usize,
            (ins, mut outs): Vectors<T::Word, L, NI, NO>,
            f: &impl Fn(&[T::Word; NI], &mut [T::Word; NO]),
        ) {
            for j in 0..L {
                let x: [T::Word; NI] = from_fn(|a| ins[a][j]);
                let mut y: [T::Word; NO] = from_fn(|b| outs[b][j]);
                f(&x, &mut y);
                for b in 0..NO {
                    outs[b][j] = y[b];
                }
            }
            // By index: an array iterator here keeps the pointers in local
            // memory.
            #[allow(clippy::needless_range_loop)]
            for b in 0..NO {
                // SAFETY: the caller's contract.
                unsafe { *(self.outs[b].add(e) as *mut Aligned<[T::Word; L]>) = Aligned(outs[b]) };
            }
        }

        /// Element `e` of every input and in-out array, each in every lane
        /// of a word.
        ///
        /// # Safety
        /// `e < n`.
        #[inline(always)]
        unsafe fn load_element(&self, e: usize) -> ([T::Word; NI], [T::Word; NO]) {
            // SAFETY (both): e < n, the length of every array.
            let ins = from_fn(|a| unsafe { *self.ins[a].add(e) }.splat());
            let outs = from_fn(|b| {
                if b >= self.first_inout {
                    unsafe { *self.outs[b].add(e) }.splat()
                } else {
                    T::Word::default()
                }
            });
            (ins, outs)
        }

        /// Applies `f` to the words of one element and stores the first
        /// lane of each output.
        ///
        /// # Safety
        /// `e < n`; only this thread touches element `e`.
        #[inline(always)]
        unsafe fn store_element(
            &self,
            e: usize,
            (ins, mut outs): ([T::Word; NI], [T::Word; NO]),
            f: &impl Fn(&[T::Word; NI], &mut [T::Word; NO]),
        ) {
            f(&ins, &mut outs);
            // By index, as in `store_vector`.
            #[allow(clippy::needless_range_loop)]
            for b in 0..NO {
                // SAFETY: the caller's contract.
                unsafe { *self.outs[b].add(e) = T::first(outs[b]) };
            }
        }

        /// Elements `base .. base + count`, one per thread (grid-stride: the
        /// head and the tail, a few elements).
        ///
        /// # Safety
        /// `base + count <= n`.
        #[inline(always)]
        unsafe fn each_element(
            &self,
            base: usize,
            count: usize,
            f: &impl Fn(&[T::Word; NI], &mut [T::Word; NO]),
        ) {
            let mut i = thread::index_1d();
            while i < count {
                // SAFETY: base + i < base + count <= n; element i is this thread's.
                unsafe { self.store_element(base + i, self.load_element(base + i), f) };
                i += thread::grid_size_1d();
            }
        }
    }

    /// Grid-stride over `units` units (vectors or elements): [`UNROLL`]
    /// units loaded (`load(u)`) before the first is stored (`store(u, …)`).
    #[inline(always)]
    fn grid_stride<X>(units: usize, load: impl Fn(usize) -> X, store: impl Fn(usize, X)) {
        let stride = thread::grid_size_1d();
        let mut u = thread::index_1d();
        while u + (UNROLL - 1) * stride < units {
            let loaded: [X; UNROLL] = from_fn(|k| load(u + k * stride));
            for (k, l) in loaded.into_iter().enumerate() {
                store(u + k * stride, l);
            }
            u += UNROLL * stride;
        }
        while u < units {
            store(u, load(u));
            u += stride;
        }
    }

    /// Runs `f` on every index `i < n` of a 1-D launch, a word of
    /// [`Lanes`] at a time: `f(ins, outs)` gets the words of each `ins`
    /// array and of each `outs` array (`Word::default()` for the first
    /// `first_inout` outputs, which are written only; the current values for
    /// the rest, which are in-out), and its `outs` are stored back. `L` is
    /// the words per 16-byte vector (`16 / size_of::<T::Word>()`). In the
    /// head and the tail, and when the arrays disagree modulo 16, each
    /// element runs alone, [`splat`](Lanes::splat) over its word.
    ///
    /// Thread mapping: any 1-D grid; the first threads take the head and the
    /// tail, the body is a grid-stride loop over vectors.
    ///
    /// # Safety
    /// Every array holds `n` elements of `T` on the device, each aligned to
    /// `T`; the `outs` arrays overlap no other array; nothing else writes
    /// any of them during the launch; `L * size_of::<T::Word>() == 16`.
    #[inline(always)]
    pub unsafe fn map<T: Lanes, const L: usize, const NI: usize, const NO: usize>(
        ins: [*const T; NI],
        outs: [*mut T; NO],
        first_inout: usize,
        n: usize,
        f: impl Fn(&[T::Word; NI], &mut [T::Word; NO]),
    ) {
        let arrays = Arrays {
            ins,
            outs,
            first_inout,
        };
        let addrs = ins
            .iter()
            .map(|&p| p as usize)
            .chain(outs.iter().map(|&p| p as usize));
        let per_vector = L * core::mem::size_of::<T::Word>() / core::mem::size_of::<T>();
        let (arrays, f) = (&arrays, &f);
        match split(addrs, core::mem::size_of::<T>(), n) {
            Some(Split {
                head,
                vectors,
                tail,
            }) if per_vector > 1 => {
                // SAFETY (all three): head + vectors * per_vector + tail == n;
                // the body starts at a 16-byte boundary of every array
                // (split); each element belongs to one thread.
                unsafe { arrays.each_element(0, head, f) };
                grid_stride(
                    vectors,
                    |u| unsafe { arrays.load_vector::<L>(head + u * per_vector) },
                    |u, v| unsafe { arrays.store_vector::<L>(head + u * per_vector, v, f) },
                );
                unsafe { arrays.each_element(head + vectors * per_vector, tail, f) };
            }
            // SAFETY: n elements, one thread each.
            _ => grid_stride(
                n,
                |e| unsafe { arrays.load_element(e) },
                |e, v| unsafe { arrays.store_element(e, v, f) },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(addrs: &[usize], size: usize, n: usize) -> Option<(usize, usize, usize)> {
        split(addrs.iter().copied(), size, n).map(|s| (s.head, s.vectors, s.tail))
    }

    #[test]
    fn element_sizes_that_do_not_divide_a_vector_are_refused() {
        // At an address aligned to the element, so that only the size refuses.
        for size in [0, 3, 5, 6, 12, 32] {
            assert_eq!(cut(&[size * 0x1000], size, 96), None, "size {size}");
        }
        for size in [1, 2, 4, 8, 16] {
            assert!(cut(&[0x1000], size, 96).is_some(), "size {size}");
        }
    }

    #[test]
    fn aligned_arrays_have_no_head() {
        assert_eq!(cut(&[0x1000, 0x2000], 4, 10), Some((0, 2, 2)));
        assert_eq!(cut(&[0x1000], 8, 5), Some((0, 2, 1)));
    }

    #[test]
    fn heads_reach_the_next_line_when_every_array_agrees_modulo_128() {
        for (offset, head) in [(4, 31), (8, 30), (12, 29), (16, 28), (124, 1)] {
            let s = cut(&[0x1000 + offset, 0x3000 + offset], 4, 1000).unwrap();
            assert_eq!(s.0, head, "offset {offset}");
            assert_eq!(s.0 + 4 * s.1 + s.2, 1000);
        }
        assert_eq!(cut(&[0x1008], 8, 100), Some((15, 42, 1)));
    }

    #[test]
    fn heads_reach_the_next_vector_when_arrays_agree_only_modulo_16() {
        for (offset, head) in [(4, 3), (8, 2), (12, 1)] {
            let s = cut(&[0x1000 + offset, 0x3010 + offset], 4, 100).unwrap();
            assert_eq!(s.0, head, "offset {offset}");
            assert_eq!(s.0 + 4 * s.1 + s.2, 100);
        }
    }

    #[test]
    fn short_ranges_are_all_head_or_tail() {
        for n in 0..=33usize {
            for offset in [0usize, 4, 8, 12, 64, 124] {
                let s = cut(&[0x100 + offset], 4, n).unwrap();
                assert_eq!(s.0 + 4 * s.1 + s.2, n, "n {n} offset {offset}");
                assert!(s.0 < 32 && s.2 <= 3);
            }
        }
        assert_eq!(cut(&[0x104], 4, 2).unwrap().0, 2);
    }

    #[test]
    fn disagreeing_or_unaligned_arrays_take_the_element_path() {
        assert_eq!(cut(&[0x1000, 0x2004], 4, 100), None);
        assert_eq!(cut(&[0x1002], 4, 100), None);
        assert_eq!(cut(&[0x1000], 3, 100), None);
        assert_eq!(cut(&[0x1000], 0, 100), None);
        assert_eq!(cut(&[], 4, 100), None);
    }
}
