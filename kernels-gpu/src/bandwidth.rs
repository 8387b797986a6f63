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

/// The vectorized map itself: on nvptx64 the kernels' code, on the host the
/// same code run by the simulator.
pub mod device {
    use super::{Split, UNROLL, split};
    use crate::device::thread;
    use core::array::from_fn;

    /// A value read or written as one aligned 16-byte access.
    #[repr(C, align(16))]
    #[derive(Clone, Copy)]
    struct Aligned<A>(A);

    /// `W` consecutive elements from `p + e` (one access when `W > 1`).
    ///
    /// # Safety
    /// `p + e .. p + e + W` is readable; when `W > 1`, `p + e` is 16-byte
    /// aligned and `W * size_of::<T>() == 16`.
    #[inline(always)]
    unsafe fn read<T: Copy, const W: usize>(p: *const T, e: usize) -> [T; W] {
        // SAFETY: the caller's contract.
        unsafe {
            if W == 1 {
                from_fn(|_| *p.add(e))
            } else {
                (*(p.add(e) as *const Aligned<[T; W]>)).0
            }
        }
    }

    /// Writes `W` consecutive elements at `p + e` (one access when `W > 1`).
    ///
    /// # Safety
    /// As for [`read`], writable, and no other thread writes there.
    #[inline(always)]
    unsafe fn write<T: Copy, const W: usize>(p: *mut T, e: usize, v: [T; W]) {
        // SAFETY: the caller's contract.
        unsafe {
            if W == 1 {
                *p.add(e) = v[0];
            } else {
                *(p.add(e) as *mut Aligned<[T; W]>) = Aligned(v);
            }
        }
    }

    /// The arrays of one map: `ins` are read, `outs[..first_inout]` are
    /// written only (they start at `T::default()` in `f`),
    /// `outs[first_inout..]` are read and written.
    struct Arrays<T, const NI: usize, const NO: usize> {
        ins: [*const T; NI],
        outs: [*mut T; NO],
        first_inout: usize,
    }

    /// The values of `W` consecutive elements of every array.
    type Loaded<T, const W: usize, const NI: usize, const NO: usize> = ([[T; W]; NI], [[T; W]; NO]);

    impl<T: Copy + Default, const NI: usize, const NO: usize> Arrays<T, NI, NO> {
        /// Loads elements `e .. e + W` of every input and in-out array.
        ///
        /// # Safety
        /// `e + W <= n` (every array holds `n` elements); alignment as for
        /// [`read`].
        #[inline(always)]
        unsafe fn load<const W: usize>(&self, e: usize) -> Loaded<T, W, NI, NO> {
            // SAFETY: the caller's contract.
            let ins = from_fn(|a| unsafe { read::<T, W>(self.ins[a], e) });
            let outs = from_fn(|b| {
                if b >= self.first_inout {
                    // SAFETY: as above.
                    unsafe { read::<T, W>(self.outs[b], e) }
                } else {
                    [T::default(); W]
                }
            });
            (ins, outs)
        }

        /// Applies `f` to each of the `W` elements and stores the outputs.
        ///
        /// # Safety
        /// As for [`Arrays::load`]; only this thread touches `e .. e + W`.
        #[inline(always)]
        unsafe fn store<const W: usize>(
            &self,
            e: usize,
            (ins, mut outs): Loaded<T, W, NI, NO>,
            f: &impl Fn(&[T; NI], &mut [T; NO]),
        ) {
            for j in 0..W {
                let x: [T; NI] = from_fn(|a| ins[a][j]);
                let mut y: [T; NO] = from_fn(|b| outs[b][j]);
                f(&x, &mut y);
                for b in 0..NO {
                    outs[b][j] = y[b];
                }
            }
            for (&out, &values) in self.outs.iter().zip(outs.iter()) {
                // SAFETY: the caller's contract.
                unsafe { write::<T, W>(out, e, values) };
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
            f: &impl Fn(&[T; NI], &mut [T; NO]),
        ) {
            let mut i = thread::index_1d();
            while i < count {
                // SAFETY: base + i < base + count <= n; element i is this thread's.
                unsafe { self.store::<1>(base + i, self.load::<1>(base + i), f) };
                i += thread::grid_size_1d();
            }
        }

        /// Grid-stride over `units` units of `W` elements starting at element
        /// `base`: [`UNROLL`] units loaded before the first is stored.
        ///
        /// # Safety
        /// `base + units * W <= n`; when `W > 1`, `base` is a vector
        /// boundary of every array.
        #[inline(always)]
        unsafe fn grid_stride<const W: usize>(
            &self,
            base: usize,
            units: usize,
            f: &impl Fn(&[T; NI], &mut [T; NO]),
        ) {
            let stride = thread::grid_size_1d();
            let mut u = thread::index_1d();
            while u + (UNROLL - 1) * stride < units {
                // SAFETY: every unit u + k * stride < units (checked above).
                let loaded: [Loaded<T, W, NI, NO>; UNROLL] =
                    from_fn(|k| unsafe { self.load::<W>(base + (u + k * stride) * W) });
                for (k, l) in loaded.into_iter().enumerate() {
                    // SAFETY: as above; unit u + k * stride is this thread's alone.
                    unsafe { self.store::<W>(base + (u + k * stride) * W, l, f) };
                }
                u += UNROLL * stride;
            }
            while u < units {
                let e = base + u * W;
                // SAFETY: u < units; the unit is this thread's alone.
                unsafe { self.store::<W>(e, self.load::<W>(e), f) };
                u += stride;
            }
        }
    }

    /// Runs `f` on every index `i < n` of a 1-D launch: `f(ins, outs)` gets
    /// element `i` of each `ins` array and of each `outs` array
    /// (`T::default()` for the first `first_inout` outputs, which are
    /// written only; the current value for the rest, which are in-out), and
    /// its `outs` are stored back. `L` is the elements per 16-byte vector
    /// (`16 / size_of::<T>()`).
    ///
    /// Thread mapping: any 1-D grid; the first threads take the head and the
    /// tail, the body is a grid-stride loop over vectors.
    ///
    /// # Safety
    /// Every array holds `n` elements of `T` on the device, each aligned to
    /// `T`; the `outs` arrays overlap no other array; nothing else writes
    /// any of them during the launch; `L * size_of::<T>() == 16`.
    #[inline(always)]
    pub unsafe fn map<T: Copy + Default, const L: usize, const NI: usize, const NO: usize>(
        ins: [*const T; NI],
        outs: [*mut T; NO],
        first_inout: usize,
        n: usize,
        f: impl Fn(&[T; NI], &mut [T; NO]),
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
        let parts = split(addrs, core::mem::size_of::<T>(), n);
        match parts {
            Some(Split {
                head,
                vectors,
                tail,
            }) if L > 1 => {
                // SAFETY (all three): head + vectors * L + tail == n; the body
                // starts at a 16-byte boundary of every array (split); each
                // element belongs to one thread.
                unsafe { arrays.each_element(0, head, &f) };
                unsafe { arrays.grid_stride::<L>(head, vectors, &f) };
                unsafe { arrays.each_element(head + vectors * L, tail, &f) };
            }
            // SAFETY: n elements, one thread each.
            _ => unsafe { arrays.grid_stride::<1>(0, n, &f) },
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
