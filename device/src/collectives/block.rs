//! Block collectives: reduce and scan of one value per thread over a whole
//! block (CUB's `BlockReduce` and `BlockScan`, with its prefix callback for
//! device-wide scans), and loads and stores of several items per thread in
//! the blocked and striped arrangements (`BlockLoad`, `BlockStore`).
//!
//! # Shared memory: [`TempStorage`]
//! A reduce or scan needs one shared slot per warp and one for a prefix: a
//! [`TempStorage<T, THREADS>`] is that memory for blocks of up to `THREADS`
//! threads, [`TempStorage::LEN`] slots of 8 bytes (a [`Slot`] each, whatever
//! `T`: so a kernel generic over `T` can declare it, and 16-bit values of
//! two warps never share a word). Make it from a shared array of at least
//! that many slots (a shorter one, or a `THREADS` that is not a multiple of
//! 32 in 32..=1024, does not compile), most simply with
//! [`block_storage!`](crate::block_storage):
//! ```
//! use cuda_kernels_device::collectives::{Sum, block};
//! use cuda_kernels_device::{block_storage, kernels, thread};
//!
//! const THREADS: usize = 256;
//! kernels! {
//!     /// `out[i]` = the sum of `x` over threads `0..=i` of its block;
//!     /// `totals[b]` = block `b`'s sum.
//!     ///
//!     /// # Safety
//!     /// One u32 per thread in `x` and `out`, one per block in `totals`;
//!     /// blocks of at most 256 threads, a multiple of 32.
//!     pub fn block_prefix_sums(x: *const u32, out: *mut u32, totals: *mut u32) as BLOCK_PREFIX_SUMS {
//!         let storage = block_storage!(prefix_sums_storage: u32, THREADS);
//!         let i = thread::index_1d();
//!         // SAFETY: one value per thread.
//!         let v = unsafe { *x.add(i) };
//!         // SAFETY: every thread of the block calls it; nothing else uses `storage`.
//!         let (prefix, total) = unsafe { storage.inclusive_scan::<Sum>(v) };
//!         // SAFETY: one slot per thread, one per block.
//!         unsafe {
//!             *out.add(i) = prefix;
//!             if thread::thread_idx_x() == 0 {
//!                 *totals.add(thread::block_idx_x() as usize) = total;
//!             }
//!         }
//!     }
//! }
//! # fn main() {}
//! ```
//! Every reduce and scan checks the launch when called: a block whose size
//! is not a multiple of 32, that is larger than the storage's `THREADS`
//! (too little shared memory for it), or not one-dimensional, is a located
//! fault at the caller's file and line, on the GPU (a trap whose record the
//! host reads) and on the simulator alike.
//!
//! # Order of the combinations
//! Fixed by the block size alone, so float results are the same bits on
//! every run: each warp reduces or scans its lanes (see
//! [`warp`](super::warp)), lane 0 of each warp stores the warp's aggregate
//! in its slot, and after a barrier every warp scans or reduces the slots
//! the same way (so every thread gets the same aggregate). Each call ends
//! with a barrier: the storage can be used again right away.
//!
//! # Loads and stores
//! [`load_blocked`] gives thread `t` items `t·IPT .. (t+1)·IPT` of a tile
//! (what a thread scans sequentially before a block scan), as 16-byte
//! vectors when the tile is whole and aligned and `IPT · size_of::<T>()` is
//! a multiple of 16; [`load_striped`] gives it items `t, t + blockDim.x,
//! …` (coalesced one item at a time). [`store_blocked`] and
//! [`store_striped`] write them back the same ways.
use core::marker::PhantomData;

use super::{ReduceOp, warp as warp_collectives};
use crate::shared::{SharedArray, SharedScalar};
use crate::sync::sync_threads;
use crate::thread::{block_dim_x, block_dim_y, block_dim_z, thread_idx_x};
use crate::warp::{Shuffle, WARP_SIZE, shuffle_idx};
use core::mem::size_of;

/// The shared memory of a block reduce or scan of `T`, for blocks of up to
/// `THREADS` threads: [`LEN`](Self::LEN) [`Slot`]s (see the [module
/// docs](self)). Copyable: every thread holds the same address.
#[derive(Clone, Copy)]
pub struct TempStorage<T, const THREADS: usize> {
    base: u32,
    _t: PhantomData<T>,
}

/// Declares the shared memory of a block collective for blocks of up to
/// `threads` threads and evaluates to its [`TempStorage`]:
/// `block_storage!(name: T, THREADS)`. `name` becomes a PTX symbol (unique
/// in the crate), `T` and `THREADS` must name items, not generic parameters
/// (as for [`shared_array!`](crate::shared_array)).
#[macro_export]
macro_rules! block_storage {
    ($name:ident : $t:ty, $threads:expr) => {
        $crate::collectives::block::TempStorage::<$t, { $threads }>::new($crate::shared_array!(
            $name: [$crate::collectives::block::Slot; $crate::collectives::block::storage_len($threads)]
        ))
    };
}

/// One slot of a [`TempStorage`]: 8 bytes, room for any value the
/// collectives move (at most 64 bits).
pub type Slot = u64;

/// [`TempStorage::LEN`] for blocks of `threads` threads: one slot per warp
/// and one for the prefix.
pub const fn storage_len(threads: usize) -> usize {
    threads / WARP_SIZE as usize + 1
}

/// A located fault at the caller's file and line.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[track_caller]
#[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
fn fail_here(message: &str) -> ! {
    let at = core::panic::Location::caller();
    crate::fault::fail(at.file(), at.line(), at.column(), message)
}

impl<T: SharedScalar + Shuffle, const THREADS: usize> TempStorage<T, THREADS> {
    /// [`Slot`]s the storage holds: [`storage_len(THREADS)`](storage_len).
    pub const LEN: usize = storage_len(THREADS);

    /// The storage in `array`, which must hold at least [`LEN`](Self::LEN)
    /// slots (checked when compiled, as are `THREADS`, a multiple of 32 in
    /// 32..=1024, and `T`, at most 8 bytes).
    #[inline(always)]
    pub fn new<const N: usize>(array: SharedArray<Slot, N>) -> Self {
        const {
            assert!(
                THREADS >= 32 && THREADS <= 1024 && THREADS.is_multiple_of(32),
                "block collective: THREADS must be a multiple of 32 in 32..=1024"
            );
            assert!(
                N >= storage_len(THREADS),
                "block collective: the shared array is shorter than TempStorage::LEN"
            );
            assert!(
                core::mem::size_of::<T>() <= 8,
                "block collective: values of at most 8 bytes"
            );
        }
        Self {
            base: array.address(),
            _t: PhantomData,
        }
    }

    /// The storage at a shared-window address (in dynamic shared memory,
    /// which no static array describes).
    ///
    /// # Safety
    /// `base` is the 8-byte aligned shared-window address of
    /// [`LEN`](Self::LEN) live [`Slot`]s that nothing else uses during the
    /// collectives.
    #[inline(always)]
    pub unsafe fn from_shared_address(base: u32) -> Self {
        const {
            assert!(
                THREADS >= 32 && THREADS <= 1024 && THREADS.is_multiple_of(32),
                "block collective: THREADS must be a multiple of 32 in 32..=1024"
            );
            assert!(
                core::mem::size_of::<T>() <= 8,
                "block collective: values of at most 8 bytes"
            );
        }
        Self {
            base,
            _t: PhantomData,
        }
    }

    /// Slot `i` read as a `T`.
    ///
    /// # Safety
    /// `i < LEN`; no other thread writes the slot concurrently.
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    unsafe fn load(&self, i: usize) -> T {
        // SAFETY: slot i of the storage (8 bytes ≥ size_of::<T>(), 8-aligned).
        unsafe { T::load_shared(self.base + (i * size_of::<Slot>()) as u32) }
    }

    /// Writes a `T` into slot `i`.
    ///
    /// # Safety
    /// `i < LEN`; no other thread reads or writes the slot concurrently.
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    unsafe fn store(&self, i: usize, value: T) {
        // SAFETY: as in `load`.
        unsafe { T::store_shared(self.base + (i * size_of::<Slot>()) as u32, value) }
    }

    /// The fault of the [module docs](self) when the block does not fit.
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    fn check_launch() {
        let threads = block_dim_x();
        if !threads.is_multiple_of(WARP_SIZE) {
            fail_here("block collective: block size not a multiple of 32");
        }
        if threads as usize > THREADS {
            fail_here("block collective: too little shared memory for the block");
        }
        if block_dim_y() != 1 || block_dim_z() != 1 {
            fail_here("block collective: the block is not one-dimensional");
        }
    }

    /// The combination of every thread's `value` with `Op`, returned to
    /// every thread (the same bits everywhere).
    ///
    /// # Safety
    /// Every thread of the block calls it (it holds barriers), and nothing
    /// else uses the storage meanwhile.
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    pub unsafe fn reduce<Op: ReduceOp<T>>(&self, value: T) -> T {
        Self::check_launch();
        let tid = thread_idx_x();
        let (lane, warp) = (tid % WARP_SIZE, tid / WARP_SIZE);
        let warps = block_dim_x() / WARP_SIZE;
        let v = warp_collectives::reduce::<Op, T>(value);
        if lane == 0 {
            // SAFETY: warp < warps ≤ THREADS / 32 < LEN; one writer per slot.
            unsafe { self.store(warp as usize, v) };
        }
        sync_threads();
        let s = if lane < warps {
            // SAFETY: lane < warps, written before the barrier.
            unsafe { self.load(lane as usize) }
        } else {
            Op::identity()
        };
        let total = warp_collectives::reduce::<Op, T>(s);
        sync_threads();
        total
    }

    /// The exclusive prefix of `value` over the threads before this one,
    /// `(exclusive, aggregate)`: thread 0 gets the identity, every thread
    /// the block's aggregate.
    ///
    /// # Safety
    /// As for [`reduce`](Self::reduce).
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    pub unsafe fn exclusive_scan<Op: ReduceOp<T>>(&self, value: T) -> (T, T) {
        // SAFETY: forwarded.
        let (exclusive, aggregate) = unsafe { self.scan_in_block::<Op>(value) };
        sync_threads();
        (exclusive.unwrap_or_else(Op::identity), aggregate)
    }

    /// The inclusive prefix of `value` over the threads up to this one,
    /// `(inclusive, aggregate)`.
    ///
    /// # Safety
    /// As for [`reduce`](Self::reduce).
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    pub unsafe fn inclusive_scan<Op: ReduceOp<T>>(&self, value: T) -> (T, T) {
        // SAFETY: forwarded.
        let (exclusive, aggregate) = unsafe { self.scan_in_block::<Op>(value) };
        sync_threads();
        (after(exclusive, value, Op::combine), aggregate)
    }

    /// [`exclusive_scan`](Self::exclusive_scan) after a prefix: the 32
    /// lanes of warp 0 call `prefix(aggregate)` with the block's aggregate
    /// (so it may use warp collectives, as a device-wide scan's look-back
    /// does); lane 0's return value `p` is combined before every thread's
    /// prefix. Returns `(p ⊕ exclusive, aggregate)`: thread 0 gets `p`.
    /// Every thread passes a block barrier after `prefix` has returned and
    /// before this returns, so what `prefix` wrote to shared memory is
    /// visible to every thread then.
    ///
    /// # Safety
    /// As for [`reduce`](Self::reduce).
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    pub unsafe fn exclusive_scan_with_prefix<Op: ReduceOp<T>>(
        &self,
        value: T,
        prefix: impl FnOnce(T) -> T,
    ) -> (T, T) {
        // SAFETY: forwarded.
        let (exclusive, aggregate) = unsafe { self.scan_in_block::<Op>(value) };
        let prefix_slot = Self::LEN - 1;
        if thread_idx_x() < WARP_SIZE {
            let p = prefix(aggregate);
            if thread_idx_x() == 0 {
                // SAFETY: the prefix slot, written by thread 0 alone; every
                // thread read the warp slots before `scan_in_block`'s barrier.
                unsafe { self.store(prefix_slot, p) };
            }
        }
        sync_threads();
        // SAFETY: written before the barrier.
        let p = unsafe { self.load(prefix_slot) };
        sync_threads();
        let exclusive = match exclusive {
            Some(e) => Op::combine(p, e),
            None => p,
        };
        (exclusive, aggregate)
    }

    /// [`inclusive_scan`](Self::inclusive_scan) after a prefix, as for
    /// [`exclusive_scan_with_prefix`](Self::exclusive_scan_with_prefix):
    /// returns `(p ⊕ inclusive, aggregate)`.
    ///
    /// # Safety
    /// As for [`reduce`](Self::reduce).
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    pub unsafe fn inclusive_scan_with_prefix<Op: ReduceOp<T>>(
        &self,
        value: T,
        prefix: impl FnOnce(T) -> T,
    ) -> (T, T) {
        // SAFETY: forwarded.
        let (exclusive, aggregate) =
            unsafe { self.exclusive_scan_with_prefix::<Op>(value, prefix) };
        (Op::combine(exclusive, value), aggregate)
    }

    /// The scan without the final barrier: this thread's exclusive prefix
    /// (`None` for thread 0: nothing before it, so no identity is combined
    /// in, which keeps `-0.0` and NaN payloads intact) and the aggregate.
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    unsafe fn scan_in_block<Op: ReduceOp<T>>(&self, value: T) -> (Option<T>, T) {
        Self::check_launch();
        let tid = thread_idx_x();
        let (lane, warp) = (tid % WARP_SIZE, tid / WARP_SIZE);
        let warps = block_dim_x() / WARP_SIZE;
        let (in_warp, warp_total) = warp_collectives::exclusive_scan::<Op, T>(value);
        if lane == 0 {
            // SAFETY: warp < warps < LEN; one writer per slot.
            unsafe { self.store(warp as usize, warp_total) };
        }
        sync_threads();
        let s = if lane < warps {
            // SAFETY: lane < warps, written before the barrier.
            unsafe { self.load(lane as usize) }
        } else {
            Op::identity()
        };
        let (before_warps, aggregate) = warp_collectives::exclusive_scan::<Op, T>(s);
        let before_warp = shuffle_idx(before_warps, warp);
        let exclusive = match (warp, lane) {
            (0, 0) => None,
            (0, _) => Some(in_warp),
            (_, 0) => Some(before_warp),
            _ => Some(Op::combine(before_warp, in_warp)),
        };
        (exclusive, aggregate)
    }
}

/// `combine(before, value)`, or `value` when nothing is before it.
#[inline(always)]
fn after<T>(before: Option<T>, value: T, combine: impl Fn(T, T) -> T) -> T {
    match before {
        Some(b) => combine(b, value),
        None => value,
    }
}

/// 16 bytes, aligned: one vector load or store.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Vector([u32; 4]);

/// Whether thread `t`'s `IPT` items at `tile + t·IPT` can move as whole
/// 16-byte vectors: the tile is whole, aligned, and a thread's items are a
/// whole number of vectors.
#[inline(always)]
fn vectorised<T, const IPT: usize>(tile: usize, valid: usize) -> bool {
    let bytes = IPT * core::mem::size_of::<T>();
    bytes.is_multiple_of(16) && tile.is_multiple_of(16) && valid >= block_dim_x() as usize * IPT
}

/// The blocked arrangement: thread `t` gets items `t·IPT .. (t+1)·IPT` of
/// `tile`, those at or past `valid` as `fill`. As 16-byte vectors when
/// `tile` is 16-byte aligned, the block's `blockDim.x · IPT` items are all
/// valid, and `IPT · size_of::<T>()` is a multiple of 16; one item at a
/// time otherwise.
///
/// # Safety
/// `tile` points to `valid` readable items of global memory (no other
/// thread writes them during the load).
#[inline(always)]
pub unsafe fn load_blocked<T: Copy, const IPT: usize>(
    tile: *const T,
    valid: usize,
    fill: T,
) -> [T; IPT] {
    let first = thread_idx_x() as usize * IPT;
    let mut items = [fill; IPT];
    if vectorised::<T, IPT>(tile as usize, valid) {
        let vectors = IPT * core::mem::size_of::<T>() / 16;
        // SAFETY: tile + first is 16-byte aligned (tile is, and first·size is
        // a multiple of 16) and its IPT items are valid (the whole tile is).
        let src = unsafe { tile.add(first) }.cast::<Vector>();
        let dst = items.as_mut_ptr().cast::<Vector>();
        for v in 0..vectors {
            // SAFETY: v < vectors, within the thread's items on both sides;
            // `items` is only element-aligned, hence the unaligned write.
            unsafe { dst.add(v).write_unaligned(*src.add(v)) };
        }
    } else {
        for (i, item) in items.iter_mut().enumerate() {
            if first + i < valid {
                // SAFETY: first + i < valid.
                *item = unsafe { *tile.add(first + i) };
            }
        }
    }
    items
}

/// Writes the blocked arrangement back ([`load_blocked`]'s layout): item
/// `i` of thread `t` to `tile[t·IPT + i]` when that is below `valid`, as
/// 16-byte vectors under the same conditions.
///
/// # Safety
/// `tile` points to `valid` writable items of global memory that no other
/// thread reads or writes during the store.
#[inline(always)]
pub unsafe fn store_blocked<T: Copy, const IPT: usize>(
    tile: *mut T,
    valid: usize,
    items: [T; IPT],
) {
    let first = thread_idx_x() as usize * IPT;
    if vectorised::<T, IPT>(tile as usize, valid) {
        let vectors = IPT * core::mem::size_of::<T>() / 16;
        // SAFETY: as in `load_blocked`.
        let dst = unsafe { tile.add(first) }.cast::<Vector>();
        let src = items.as_ptr().cast::<Vector>();
        for v in 0..vectors {
            // SAFETY: as in `load_blocked`.
            unsafe { *dst.add(v) = src.add(v).read_unaligned() };
        }
    } else {
        for (i, item) in items.into_iter().enumerate() {
            if first + i < valid {
                // SAFETY: first + i < valid.
                unsafe { *tile.add(first + i) = item };
            }
        }
    }
}

/// The striped arrangement: thread `t` gets items `t + i·blockDim.x` of
/// `tile` for `i < IPT` (each load coalesced across the warp), those at or
/// past `valid` as `fill`.
///
/// # Safety
/// As for [`load_blocked`].
#[inline(always)]
pub unsafe fn load_striped<T: Copy, const IPT: usize>(
    tile: *const T,
    valid: usize,
    fill: T,
) -> [T; IPT] {
    let (t, stride) = (thread_idx_x() as usize, block_dim_x() as usize);
    let mut items = [fill; IPT];
    for (i, item) in items.iter_mut().enumerate() {
        let at = t + i * stride;
        if at < valid {
            // SAFETY: at < valid.
            *item = unsafe { *tile.add(at) };
        }
    }
    items
}

/// Writes the striped arrangement back ([`load_striped`]'s layout).
///
/// # Safety
/// As for [`store_blocked`].
#[inline(always)]
pub unsafe fn store_striped<T: Copy, const IPT: usize>(
    tile: *mut T,
    valid: usize,
    items: [T; IPT],
) {
    let (t, stride) = (thread_idx_x() as usize, block_dim_x() as usize);
    for (i, item) in items.into_iter().enumerate() {
        let at = t + i * stride;
        if at < valid {
            // SAFETY: at < valid.
            unsafe { *tile.add(at) = item };
        }
    }
}
