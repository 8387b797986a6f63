//! Test kernels of the device crate's warp and block collectives
//! (`device::collectives`), one per collective kind and element type, and a
//! misuse that must fault, and the tiled kernels' look-back over a state
//! filled in by hand: launched by `tests/gpu/collectives.rs`, which
//! checks them against the collectives' definitions.
use crate::device::collectives::block::{self, TempStorage};
use crate::device::collectives::{Max, Min, ReduceOp, Sum, warp};
use crate::device::float16::{bf16, f16};
use crate::device::shared::SharedScalar;
use crate::device::thread::{block_dim_x, grid_dim_x, index_1d, thread_idx_x};
use crate::device::warp::{Shuffle, lane_id};
use crate::scan::{DeviceElement, TileState};

/// Rows the warp check writes per thread: reduce, inclusive scan, exclusive
/// scan, the exclusive scan's aggregate.
pub const WARP_ROWS: usize = 4;
/// Rows the block check writes per thread: reduce, inclusive scan and its
/// aggregate, exclusive scan and its aggregate, exclusive and inclusive scan
/// after the prefix.
pub const BLOCK_ROWS: usize = 7;
/// The largest block of the block check (its storage's `THREADS`).
pub const BLOCK_CHECK_THREADS: usize = 256;
/// Items per thread of the load/store check.
pub const LOAD_ITEMS: usize = 4;
/// The block of the misuse kernel's storage: launches of other sizes fault.
pub const MISUSE_THREADS: usize = 64;

/// A type the checks instantiate for, with the built-in operations.
pub trait Checked: Copy + Shuffle + SharedScalar
where
    Sum: ReduceOp<Self>,
    Min: ReduceOp<Self>,
    Max: ReduceOp<Self>,
{
}
impl<T: Copy + Shuffle + SharedScalar> Checked for T
where
    Sum: ReduceOp<T>,
    Min: ReduceOp<T>,
    Max: ReduceOp<T>,
{
}

/// The warp rows of one thread with `Op`, for the lanes of `mask`.
#[inline(always)]
unsafe fn warp_rows<Op: ReduceOp<T>, T: Copy + Shuffle>(input: *const T, out: *mut T, mask: u32) {
    let g = index_1d();
    let threads = grid_dim_x() as usize * block_dim_x() as usize;
    if mask & (1 << lane_id()) == 0 {
        return;
    }
    // SAFETY: one input and WARP_ROWS outputs per thread.
    unsafe {
        let v = *input.add(g);
        let (excl, total) = warp::exclusive_scan_sync::<Op, T>(mask, v);
        *out.add(g) = warp::reduce_sync::<Op, T>(mask, v);
        *out.add(threads + g) = warp::inclusive_scan_sync::<Op, T>(mask, v);
        *out.add(2 * threads + g) = excl;
        *out.add(3 * threads + g) = total;
    }
}

/// The warp check: for the lanes of `mask`, rows [`WARP_ROWS`] of
/// `out` (`out[r · threads + g]`) with the operation `op` (0 sum, 1 min,
/// 2 max); the other lanes write nothing.
///
/// # Safety
/// `input` has one element per thread, `out` `WARP_ROWS` per thread; blocks
/// of a multiple of 32 threads.
#[inline(always)]
pub unsafe fn warp_check<T: Checked>(input: *const T, out: *mut T, mask: u32, op: u32)
where
    Sum: ReduceOp<T>,
    Min: ReduceOp<T>,
    Max: ReduceOp<T>,
{
    // SAFETY: forwarded.
    unsafe {
        match op {
            0 => warp_rows::<Sum, T>(input, out, mask),
            1 => warp_rows::<Min, T>(input, out, mask),
            _ => warp_rows::<Max, T>(input, out, mask),
        }
    }
}

#[inline(always)]
unsafe fn block_rows<Op: ReduceOp<T>, T: Copy + Shuffle + SharedScalar>(
    input: *const T,
    out: *mut T,
) {
    let storage: TempStorage<T, BLOCK_CHECK_THREADS> = TempStorage::new(crate::shared_array!(
        collective_check_slots: [block::Slot; block::storage_len(BLOCK_CHECK_THREADS)]
    ));
    let g = index_1d();
    let threads = grid_dim_x() as usize * block_dim_x() as usize;
    // SAFETY: one input per thread and the prefix after them; BLOCK_ROWS
    // outputs per thread; every thread calls each collective.
    unsafe {
        let v = *input.add(g);
        let prefix = *input.add(threads);
        let row = |r: usize, x: T| *out.add(r * threads + g) = x;
        row(0, storage.reduce::<Op>(v));
        let (incl, a) = storage.inclusive_scan::<Op>(v);
        row(1, incl);
        row(2, a);
        let (excl, a) = storage.exclusive_scan::<Op>(v);
        row(3, excl);
        row(4, a);
        row(5, storage.exclusive_scan_with_prefix::<Op>(v, |_| prefix).0);
        row(6, storage.inclusive_scan_with_prefix::<Op>(v, |_| prefix).0);
    }
}

/// The block check: rows [`BLOCK_ROWS`] per thread with the operation `op`
/// (0 sum, 1 min, 2 max), the prefix being `input[threads]`.
///
/// # Safety
/// `input` has one element per thread and one more, `out` `BLOCK_ROWS` per
/// thread; 1-D blocks (their size is checked by the collectives).
#[inline(always)]
pub unsafe fn block_check<T: Checked>(input: *const T, out: *mut T, op: u32)
where
    Sum: ReduceOp<T>,
    Min: ReduceOp<T>,
    Max: ReduceOp<T>,
{
    // SAFETY: forwarded.
    unsafe {
        match op {
            0 => block_rows::<Sum, T>(input, out),
            1 => block_rows::<Min, T>(input, out),
            _ => block_rows::<Max, T>(input, out),
        }
    }
}

/// Maps an element type to its check kernels. Implemented by the macro
/// below only.
///
/// # Safety
/// The handles are this module's kernels for `Self`.
pub unsafe trait CollectiveCheck: Sized {
    /// `warp_collectives_check_<t>(input, out, mask, op)`.
    const WARP: crate::device::kernel::Kernel<(*const Self, *mut Self, u32, u32)>;
    /// `block_collectives_check_<t>(input, out, op)`.
    const BLOCK: crate::device::kernel::Kernel<(*const Self, *mut Self, u32)>;
}

macro_rules! collective_checks {
    ($($t:ident),*) => {
        /// The entry points of the warp and block checks.
        pub const KERNELS: &[&str] = &[
            $(concat!("warp_collectives_check_", stringify!($t)),
              concat!("block_collectives_check_", stringify!($t)),)*
        ];
        $(const _: () = {
            crate::__family_entry! {
                concat!("warp_collectives_check_", stringify!($t))
                    => WARP: (*const $t, *mut $t, u32, u32),
                /// [`warp_check`] for this type.
                ///
                /// # Safety
                /// As for [`warp_check`].
                warp_kernel(input: *const $t, out: *mut $t, mask: u32, op: u32) {
                    // SAFETY: forwarded.
                    unsafe { warp_check::<$t>(input, out, mask, op) }
                }
            }
            crate::__family_entry! {
                concat!("block_collectives_check_", stringify!($t))
                    => BLOCK: (*const $t, *mut $t, u32),
                /// [`block_check`] for this type.
                ///
                /// # Safety
                /// As for [`block_check`].
                block_kernel(input: *const $t, out: *mut $t, op: u32) {
                    // SAFETY: forwarded.
                    unsafe { block_check::<$t>(input, out, op) }
                }
            }
            // SAFETY: the handles just above, for this type.
            unsafe impl CollectiveCheck for $t {
                const WARP: crate::device::kernel::Kernel<(*const $t, *mut $t, u32, u32)> = WARP;
                const BLOCK: crate::device::kernel::Kernel<(*const $t, *mut $t, u32)> = BLOCK;
            }
        };)*
    };
}
collective_checks!(i32, u32, i64, u64, f32, f64, f16, bf16);

crate::device::kernels! {
    list LOAD_STORE_KERNELS;

    /// Three copies of the first `valid` u32 of `input` through the block
    /// loads and stores (`LOAD_ITEMS` items per thread, one block): row 0
    /// blocked load then blocked store, row 1 striped load then striped
    /// store (both the identity), row 2 striped load then blocked store (so
    /// `row2[t·ITEMS + i] = input[t + i·blockDim.x]`); `out` rows are
    /// `blockDim.x · LOAD_ITEMS` long, untouched past `valid`.
    ///
    /// # Safety
    /// `input` has `valid` elements, `valid ≤ blockDim.x · LOAD_ITEMS`; `out`
    /// has 3 rows; one block.
    pub fn block_load_store_check(input: *const u32, out: *mut u32, valid: usize) as BLOCK_LOAD_STORE_CHECK {
        let row = block_dim_x() as usize * LOAD_ITEMS;
        // SAFETY: `valid` readable elements; each row `row` long.
        unsafe {
            let b: [u32; LOAD_ITEMS] = block::load_blocked(input, valid, 0);
            block::store_blocked(out, valid, b);
            let s: [u32; LOAD_ITEMS] = block::load_striped(input, valid, u32::MAX);
            block::store_striped(out.add(row), valid, s);
            block::store_blocked(out.add(2 * row), row, s);
        }
    }

    /// A block reduce with storage for `MISUSE_THREADS` threads: launched
    /// with another block size that is not a multiple of 32 or larger, it is
    /// the collective's located fault; with a fitting one `out[0]` gets the
    /// block's thread count.
    ///
    /// # Safety
    /// `out` holds one u32.
    pub fn block_collective_misuse(out: *mut u32) as BLOCK_COLLECTIVE_MISUSE {
        let storage = crate::device::block_storage!(misuse_storage: u32, MISUSE_THREADS);
        // SAFETY: every thread calls it; the storage is this kernel's.
        let n = unsafe { storage.reduce::<Sum>(1) };
        if thread_idx_x() == 0 {
            // SAFETY: one element.
            unsafe { *out = n };
        }
    }
}

crate::device::kernels! {
    list LOOK_BACK_KERNELS;

    /// Tile `tile`'s decoupled look-back ([`TileState::look_back`] with
    /// [`Sum`] from 0) over a state the host filled in, run by one warp: the
    /// exclusive prefix it returns goes to `out[0]`, and it publishes the
    /// tile's inclusive prefix in the state. A 32-bit element, so the
    /// packed words.
    ///
    /// # Safety
    /// `state`, `aggregates` and `inclusives` are a tiled launch's state with
    /// more than `tile` tiles, every tile before `tile` published (the
    /// look-back waits for ever on an empty one); `out` holds one element;
    /// one block of 32 threads.
    pub fn look_back_check_f32(
        state: *mut u32,
        aggregates: *mut f32,
        inclusives: *mut f32,
        tile: usize,
        aggregate: f32,
        out: *mut f32,
    ) as LOOK_BACK_CHECK_F32 {
        // SAFETY: forwarded from this entry point's contract.
        unsafe { look_back_check(state, aggregates, inclusives, tile, aggregate, out) }
    }

    /// [`look_back_check_f32`] for a 64-bit element: flags released after
    /// values in arrays of their own.
    ///
    /// # Safety
    /// As for [`look_back_check_f32`].
    pub fn look_back_check_f64(
        state: *mut u32,
        aggregates: *mut f64,
        inclusives: *mut f64,
        tile: usize,
        aggregate: f64,
        out: *mut f64,
    ) as LOOK_BACK_CHECK_F64 {
        // SAFETY: forwarded from this entry point's contract.
        unsafe { look_back_check(state, aggregates, inclusives, tile, aggregate, out) }
    }
}

/// The body of the `look_back_check_*` kernels.
///
/// # Safety
/// As for [`look_back_check_f32`].
#[inline(always)]
unsafe fn look_back_check<T: DeviceElement>(
    state: *mut u32,
    aggregates: *mut T,
    inclusives: *mut T,
    tile: usize,
    aggregate: T,
    out: *mut T,
) where
    Sum: ReduceOp<T>,
{
    // SAFETY: the state of the contract; one warp calls the look-back once.
    unsafe {
        let tiles = TileState::new(state, aggregates, inclusives);
        let prefix = tiles.look_back::<Sum>(tile, aggregate, <Sum as ReduceOp<T>>::identity());
        if lane_id() == 0 {
            *out = prefix;
        }
    }
}
