//! The generic reduction kernel body, instantiated per
//! operation and element type by [`reduce_kernels!`](crate::reduce_kernels),
//! and the block-level tree step it is built from.
use crate::device::collectives::block::{self, TempStorage};
use crate::device::shared::{SharedArray, SharedScalar, dynamic_shared_address};
use crate::device::sync::{sync_threads, thread_fence};
use crate::device::thread::{
    block_dim_x, block_idx_x, grid_dim_x, grid_size_1d, index_1d, thread_idx_x,
};
use crate::device::warp::Shuffle;
use crate::device::{atomic, load};

use super::{ReduceOp, SHARED_BYTES, UNROLL};
use crate::device::float16::{bf16, f16};

/// Byte offset, in the dynamic shared memory, of the last-block flag (after
/// the block collective's storage, [`block_storage`]).
const FLAG_OFFSET: u32 = (block::storage_len(MAX_THREADS) * 8) as u32;
const _: () = assert!(FLAG_OFFSET as usize + 4 <= SHARED_BYTES as usize);

/// An accumulator type of the reduction kernel: it crosses lanes
/// ([`Shuffle`]), lives in shared memory ([`SharedScalar`]), and its block
/// partials are read back through L2.
pub trait DeviceElement: Copy + Shuffle + SharedScalar {
    /// Loads one element through L2 only (`ld.global.cg`).
    ///
    /// # Safety
    /// As for [`load::load_cg_b32`]: a valid, aligned global address whose
    /// writes by other blocks were published before this thread's fence.
    unsafe fn load_l2(ptr: *const Self) -> Self;

    /// Whether a tiled look-back (scan, selection) publishes the element in
    /// the low half of its tile's 64-bit state word, beside the flag, with
    /// one atomic store (32-bit elements). Wider elements are published in
    /// arrays of their own, behind the flag.
    const PACKED: bool;

    /// The element's 32 bits (called only when [`PACKED`](Self::PACKED)).
    fn to_word(self) -> u32;

    /// The element from [`to_word`](Self::to_word)'s bits (called only when
    /// [`PACKED`](Self::PACKED)).
    fn from_word(word: u32) -> Self;
}

/// An element type the reduction kernel reads, combined as accumulator type
/// `A`: the accumulator type itself, or a 16-bit float widened (exactly) to
/// f32. Read in 16-byte vectors.
pub trait ReduceInput<A>: Copy {
    /// Elements per 16-byte vector.
    const PER_VEC: usize;

    /// The element as an accumulator value (exact).
    fn widen(self) -> A;

    /// Combines the elements of one 16-byte vector (given as its four 32-bit
    /// words, in memory order) pairwise with `Op`, in `A`.
    fn combine_vec<Op: ReduceOp<A>>(words: [u32; 4]) -> A;
}

macro_rules! element32 {
    ($($t:ty),*) => {$(
        impl ReduceInput<$t> for $t {
            const PER_VEC: usize = 4;
            #[inline(always)]
            fn widen(self) -> $t {
                self
            }
            #[inline(always)]
            fn combine_vec<Op: ReduceOp<Self>>(w: [u32; 4]) -> Self {
                let x = w.map(|w| <$t>::from_ne_bytes(w.to_ne_bytes()));
                Op::combine(Op::combine(x[0], x[1]), Op::combine(x[2], x[3]))
            }
        }
        impl DeviceElement for $t {
            #[inline(always)]
            unsafe fn load_l2(ptr: *const Self) -> Self {
                // SAFETY: forwarded from the caller.
                let w = unsafe { load::load_cg_b32(ptr.cast()) };
                <$t>::from_ne_bytes(w.to_ne_bytes())
            }
            const PACKED: bool = true;
            #[inline(always)]
            fn to_word(self) -> u32 {
                u32::from_ne_bytes(self.to_ne_bytes())
            }
            #[inline(always)]
            fn from_word(word: u32) -> Self {
                <$t>::from_ne_bytes(word.to_ne_bytes())
            }
        }
    )*};
}
macro_rules! element64 {
    ($($t:ty),*) => {$(
        impl ReduceInput<$t> for $t {
            const PER_VEC: usize = 2;
            #[inline(always)]
            fn widen(self) -> $t {
                self
            }
            #[inline(always)]
            fn combine_vec<Op: ReduceOp<Self>>(w: [u32; 4]) -> Self {
                let lo = <$t>::from_ne_bytes((w[0] as u64 | (w[1] as u64) << 32).to_ne_bytes());
                let hi = <$t>::from_ne_bytes((w[2] as u64 | (w[3] as u64) << 32).to_ne_bytes());
                Op::combine(lo, hi)
            }
        }
        impl DeviceElement for $t {
            #[inline(always)]
            unsafe fn load_l2(ptr: *const Self) -> Self {
                // SAFETY: forwarded from the caller.
                let w = unsafe { load::load_cg_b64(ptr.cast()) };
                <$t>::from_ne_bytes(w.to_ne_bytes())
            }
            const PACKED: bool = false;
            fn to_word(self) -> u32 {
                unreachable!("a 64-bit element is not packed in a look-back word")
            }
            fn from_word(_: u32) -> Self {
                unreachable!("a 64-bit element is not packed in a look-back word")
            }
        }
    )*};
}
element32!(i32, u32, f32);
element64!(i64, u64, f64);

macro_rules! element16 {
    ($($t:ident),*) => {$(
        impl ReduceInput<f32> for $t {
            const PER_VEC: usize = 8;
            #[inline(always)]
            fn widen(self) -> f32 {
                $t::widen(self)
            }
            /// The eight elements (element 0 in the low half of word 0)
            /// widened, then combined pairwise: `((x0 x1)(x2 x3))((x4
            /// x5)(x6 x7))`.
            #[inline(always)]
            fn combine_vec<Op: ReduceOp<f32>>(w: [u32; 4]) -> f32 {
                let x: [f32; 8] =
                    core::array::from_fn(|i| $t::from_bits((w[i / 2] >> (16 * (i % 2))) as u16).widen());
                let c = Op::combine;
                c(c(c(x[0], x[1]), c(x[2], x[3])), c(c(x[4], x[5]), c(x[6], x[7])))
            }
        }
    )*};
}
element16!(f16, bf16);

/// Most threads of a block the kernels run with: the block collective's
/// storage is sized for it.
const MAX_THREADS: usize = 1024;

/// The block collective's storage, at the start of the dynamic shared
/// memory.
///
/// # Safety
/// The launch has at least [`SHARED_BYTES`] of dynamic shared memory (which
/// holds `TempStorage::LEN` slots of up to 8 bytes before `FLAG_OFFSET`).
#[inline(always)]
pub unsafe fn block_storage<T: DeviceElement>() -> TempStorage<T, MAX_THREADS> {
    // SAFETY: the caller's guarantee; the dynamic shared memory is aligned to
    // 16 and nothing else lives below FLAG_OFFSET.
    unsafe { TempStorage::from_shared_address(dynamic_shared_address()) }
}

/// The reduction of `input[..n]` (each element widened to the accumulator
/// type `T`), combined with `init`, written to `*out`: see the [module docs
/// of `reduce`](super) for the algorithm and the order of operations.
///
/// # Safety
/// The requirements of [`reduce_kernels!`](crate::reduce_kernels): `input`
/// has `n` elements, read-only during the launch; `partials` has at least
/// `gridDim.x` elements; `*counter` is 0 at launch and used by no concurrent
/// launch; `out` is one element; no overlaps; `blockDim.x` a multiple of 32;
/// the launch has [`SHARED_BYTES`] of dynamic shared memory.
#[inline(always)]
pub unsafe fn reduce<I: ReduceInput<T>, T: DeviceElement, Op: ReduceOp<T>>(
    input: *const I,
    partials: *mut T,
    counter: *mut u32,
    out: *mut T,
    n: usize,
    init: T,
) {
    let gtid = index_1d();
    let threads = grid_size_1d();
    let size = core::mem::size_of::<I>();

    // Split the input into an unaligned head (< PER_VEC elements up to the
    // first 16-byte boundary), whole 16-byte vectors, and a tail
    // (< PER_VEC elements). Elements are naturally aligned, so the head is
    // a whole number of elements.
    let head = ((16 - (input as usize) % 16) % 16 / size).min(n);
    let vectors = (n - head) / I::PER_VEC;
    let tail_start = head + vectors * I::PER_VEC;

    let mut acc = Op::identity();
    if gtid < head {
        // SAFETY: gtid < head ≤ n.
        acc = Op::combine(acc, unsafe { *input.add(gtid) }.widen());
    }
    if gtid < n - tail_start {
        // SAFETY: tail_start + gtid < n.
        acc = Op::combine(acc, unsafe { *input.add(tail_start + gtid) }.widen());
    }

    // SAFETY: input + head is 16-byte aligned (by the choice of head) and
    // `vectors` whole vectors follow it within the n elements.
    let vecs = unsafe { input.add(head) }.cast::<[u32; 4]>();
    let mut accs = [Op::identity(); UNROLL];
    let mut i = gtid;
    while i + (UNROLL - 1) * threads < vectors {
        // All loads first, so that UNROLL of them are in flight at once.
        let mut words = [[0u32; 4]; UNROLL];
        for (u, word) in words.iter_mut().enumerate() {
            // SAFETY: i + u·threads < vectors (loop condition); the input is
            // read-only during the launch, so the non-coherent cache is valid.
            *word = unsafe { load::load_nc_v4(vecs.add(i + u * threads)) };
        }
        for u in 0..UNROLL {
            accs[u] = Op::combine(accs[u], I::combine_vec::<Op>(words[u]));
        }
        i += UNROLL * threads;
    }
    while i < vectors {
        // SAFETY: i < vectors.
        let w = unsafe { load::load_nc_v4(vecs.add(i)) };
        accs[0] = Op::combine(accs[0], I::combine_vec::<Op>(w));
        i += threads;
    }
    acc = Op::combine(
        acc,
        Op::combine(Op::combine(accs[0], accs[1]), Op::combine(accs[2], accs[3])),
    );

    // SAFETY: the launch has SHARED_BYTES of dynamic shared memory; every
    // thread of the block gets here.
    let block_total = unsafe { block_storage::<T>().reduce::<Op>(acc) };

    // Last block done: publish this block's partial, take a ticket.
    // SAFETY: the flag word lies at FLAG_OFFSET < SHARED_BYTES, past the slots.
    let flag: SharedArray<u32, 1> =
        unsafe { SharedArray::from_shared_address(dynamic_shared_address() + FLAG_OFFSET) };
    let tid = thread_idx_x();
    let blocks = grid_dim_x();
    if tid == 0 {
        let block = block_idx_x() as usize;
        // SAFETY: block < gridDim.x ≤ the length of `partials`.
        unsafe { *partials.add(block) = block_total };
        // Make the partial visible device-wide before the ticket is taken.
        thread_fence();
        // SAFETY: `counter` is a valid global u32 used only by this launch.
        let ticket = unsafe { atomic::fetch_add_u32(counter, 1) };
        // SAFETY: index 0 of a 1-element array; only thread 0 writes it.
        unsafe { flag.store(0, (ticket == blocks - 1) as u32) };
    }
    sync_threads();
    // SAFETY: written by thread 0 before the barrier; read-only now.
    let is_last = unsafe { flag.load(0) } != 0;
    if is_last {
        // Every other block fenced before its ticket; this fence orders our
        // reads of their partials after our observation of the last ticket.
        thread_fence();
        let mut acc = Op::identity();
        let mut b = tid;
        while b < blocks {
            // SAFETY: b < gridDim.x; written and published by block b.
            acc = Op::combine(acc, unsafe { T::load_l2(partials.add(b as usize)) });
            b += block_dim_x();
        }
        // SAFETY: as for the first call (`is_last` is the same in the
        // whole block).
        let total = unsafe { block_storage::<T>().reduce::<Op>(acc) };
        if tid == 0 {
            // SAFETY: `out` is one writable element; `counter` is ours and
            // every block has taken its ticket, so resetting it races with
            // nothing and leaves it 0 for the next launch.
            unsafe {
                *out = Op::combine(init, total);
                *counter = 0;
            }
        }
    }
}
