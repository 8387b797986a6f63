//! Warp collectives over a [`ReduceOp`]: reduce, inclusive scan and
//! exclusive scan of one value per lane (CUB's `WarpReduce` and
//! `WarpScan`), built from the shuffles of [`crate::warp`].
//!
//! Each function without `_sync` is a collective of all 32 lanes (every
//! lane calls it, as for the shuffles). Each `_sync` variant takes a member
//! mask, as the shuffles do, of one contiguous run of lanes (`0x0000_ffff`,
//! `0x00ff_ff00`; the lanes of a partial last warp are such a run): only
//! those lanes call it, each with the same mask, and they combine among
//! themselves in lane order. A mask that is empty or not one run is a
//! located fault (at the caller's file and line), on the GPU and on the
//! simulator alike: a shuffle from a lane outside the mask would give an
//! undefined value.
//!
//! The order of the combinations is fixed (below), so float results are the
//! same bits on every run:
//! - reduce: a `shfl.sync.down` tree, distances 16, 8, 4, 2, 1 (lane `i`
//!   combines `(x_i, x_{i+d})` when `i + d` is in the run); the first lane's
//!   result is broadcast, so every lane returns the same bits;
//! - scans: Kogge–Stone with `shfl.sync.up`, distances 1, 2, 4, 8, 16 (lane
//!   `i` combines `(x_{i−d}, x_i)`), order-preserving (no commutativity
//!   needed).
//!
//! ```
//! use cuda_kernels_device::collectives::{Sum, warp};
//! use cuda_kernels_device::{kernels, thread};
//! kernels! {
//!     /// `out[i]` = the sum of `x` over lanes `0..=lane` of `i`'s warp.
//!     ///
//!     /// # Safety
//!     /// One i32 per thread in `x` and `out`; blocks of a multiple of 32.
//!     pub fn warp_prefix_sums(x: *const i32, out: *mut i32) as WARP_PREFIX_SUMS {
//!         let i = thread::index_1d();
//!         // SAFETY: one value per thread.
//!         let v = unsafe { *x.add(i) };
//!         let prefix = warp::inclusive_scan::<Sum, i32>(v);
//!         // SAFETY: one slot per thread.
//!         unsafe { *out.add(i) = prefix };
//!     }
//! }
//! # fn main() {}
//! ```
use super::ReduceOp;
use crate::warp::{
    FULL_MASK, Shuffle, WARP_SIZE, lane_id, shuffle_down_sync, shuffle_idx_sync, shuffle_up_sync,
};

/// The lanes of `mask` as (first lane, number of lanes); a located fault at
/// the caller when `mask` is empty or not one contiguous run.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[track_caller]
#[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
fn run_of(mask: u32) -> (u32, u32) {
    let first = mask.trailing_zeros();
    let len = (mask.checked_shr(first).unwrap_or(0)).trailing_ones();
    if mask == 0 || (mask as u64) >> first >> len != 0 {
        let at = core::panic::Location::caller();
        crate::fault::fail(
            at.file(),
            at.line(),
            at.column(),
            "warp collective: mask not one run of lanes",
        );
    }
    (first, len)
}

/// The combination of every lane's `value` with `Op` (a `shfl.sync.down`
/// tree; see the [module docs](self)), returned to every lane.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[track_caller]
#[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
pub fn reduce<Op: ReduceOp<T>, T: Shuffle>(value: T) -> T {
    reduce_sync::<Op, T>(FULL_MASK, value)
}

/// [`reduce`] over the lanes of `mask` (one contiguous run).
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[track_caller]
#[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
pub fn reduce_sync<Op: ReduceOp<T>, T: Shuffle>(mask: u32, value: T) -> T {
    let (first, len) = run_of(mask);
    let rank = lane_id().wrapping_sub(first);
    let mut x = value;
    let mut d = WARP_SIZE / 2;
    while d > 0 {
        let y = shuffle_down_sync(mask, x, d);
        if rank + d < len {
            x = Op::combine(x, y);
        }
        d /= 2;
    }
    shuffle_idx_sync(mask, x, first)
}

/// The inclusive prefix of `value` with `Op` over the lanes up to this one:
/// `x_0 ⊕ x_1 ⊕ … ⊕ x_lane`.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[track_caller]
#[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
pub fn inclusive_scan<Op: ReduceOp<T>, T: Shuffle>(value: T) -> T {
    inclusive_scan_sync::<Op, T>(FULL_MASK, value)
}

/// [`inclusive_scan`] over the lanes of `mask` (one contiguous run; the
/// first lane of the run is the scan's first).
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[track_caller]
#[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
pub fn inclusive_scan_sync<Op: ReduceOp<T>, T: Shuffle>(mask: u32, value: T) -> T {
    let (first, _) = run_of(mask);
    let rank = lane_id().wrapping_sub(first);
    let mut x = value;
    let mut d = 1;
    while d < WARP_SIZE {
        let y = shuffle_up_sync(mask, x, d);
        if rank >= d {
            x = Op::combine(y, x);
        }
        d *= 2;
    }
    x
}

/// The exclusive prefix of `value` with `Op` (the identity in the first
/// lane, `x_0 ⊕ … ⊕ x_{lane−1}` in the others) and the warp's aggregate
/// (the combination of all lanes), as `(exclusive, aggregate)`.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[track_caller]
#[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
pub fn exclusive_scan<Op: ReduceOp<T>, T: Shuffle>(value: T) -> (T, T) {
    exclusive_scan_sync::<Op, T>(FULL_MASK, value)
}

/// [`exclusive_scan`] over the lanes of `mask` (one contiguous run).
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[track_caller]
#[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
pub fn exclusive_scan_sync<Op: ReduceOp<T>, T: Shuffle>(mask: u32, value: T) -> (T, T) {
    let (first, len) = run_of(mask);
    let inclusive = inclusive_scan_sync::<Op, T>(mask, value);
    let before = shuffle_up_sync(mask, inclusive, 1);
    let exclusive = if lane_id() == first {
        Op::identity()
    } else {
        before
    };
    (
        exclusive,
        shuffle_idx_sync(mask, inclusive, first + len - 1),
    )
}
