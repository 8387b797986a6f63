//! Device-wide inclusive and exclusive scan (prefix sums, and any
//! [`ReduceOp`]) in a single pass with decoupled look-back (Merrill and
//! Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back",
//! 2016; CUB's `DeviceScan`), built from the device crate's block
//! collectives. [`scan_kernels!`](crate::scan_kernels) instantiates the one
//! generic body per operation and element type, entry points
//! `scan_<op>_<type>`:
//!
//! | op | entry points |
//! |---|---|
//! | [`Sum`] | `scan_sum_{i32,u32,i64,u64,f32,f64}` |
//! | [`Min`] | `scan_min_{i32,u32,i64,u64,f32,f64}` |
//! | [`Max`] | `scan_max_{i32,u32,i64,u64,f32,f64}` |
//!
//! A user's operation is declared as for the reduce family (a
//! [`ReduceOp`]), then `scan_kernels!(MyOp, "my_op": f32);`.
//!
//! # The algorithm (one launch, one block per tile of [`tile`] elements)
//! 1. Thread 0 draws the block's tile number from a global counter
//!    (`atomicAdd`), so tiles are numbered in the order blocks *start*, not
//!    by `blockIdx`.
//! 2. The block copies the tile into shared memory (`stage_tile`:
//!    `cp.async`, 16-byte chunks, no register holds the data in flight), and
//!    each thread scans its row of [`BYTES_PER_THREAD`] consecutive bytes
//!    there, in place.
//! 3. The block's exclusive scan of the threads' totals
//!    (`TempStorage::exclusive_scan_with_prefix`) calls the look-back in
//!    warp 0: it publishes the tile's aggregate (flag `AGGREGATE`; tile 0
//!    publishes its inclusive prefix at once, see below), finds the
//!    nearest earlier tile whose inclusive prefix is published (flag
//!    `INCLUSIVE`; 32 tiles per step, waiting while any of them is still
//!    empty; a 32-bit element comes with its flag in one 64-bit word, so a
//!    step is one load per lane), combines that prefix with the aggregates
//!    of the tiles between *left to right*, and publishes the tile's own
//!    inclusive prefix.
//! 4. Each warp combines its threads' prefixes with their rows and writes
//!    them out coalesced, 16 bytes a lane.
//!
//! # Forward progress (why the look-back cannot deadlock)
//! A tile waits only for tiles with smaller numbers. Numbers are drawn by
//! blocks that are already running, so every tile a block waits for belongs
//! to a block that is resident and, by induction, never waits for a later
//! one; the GPU runs a resident block to completion. Numbering by
//! `blockIdx` instead would not be safe: the hardware may start block 1000
//! while block 999 has no multiprocessor yet, and if every resident block
//! waits for 999, none ever ends. The simulator keeps the same rule: it runs
//! each block to completion on one OS thread (`CUDA_KERNELS_SIM_THREADS`
//! blocks at a time), or several resident blocks in turns, out of order
//! (`CUDA_KERNELS_SIM_SCHEDULE=interleaved`, where the look-back's wait
//! runs), and a block's tile was drawn when it started, so the tiles it
//! waits for are held by blocks that are running or done.
//!
//! The window also must not move past tile 0: it moves back when its 32
//! tiles published aggregates only, so tile 0's flag goes from `EMPTY`
//! straight to `INCLUSIVE`. (When tile 0 published its aggregate first, the
//! H100's concurrent tiles saw that flag, moved their window below tile 0
//! and waited for ever on words past the state; on the simulator, where
//! blocks run whole on one OS thread, tile 0 was always done first.)
//!
//! # Determinism
//! The same input gives the same bits on every run, floats included. A
//! tile's inclusive prefix is, by construction, `((I_j ⊕ A_{j+1}) ⊕ A_{j+2})
//! ⊕ … ⊕ A_t` for whichever published prefix `I_j` the look-back finds,
//! which is exactly the left fold `I_t = I_{t−1} ⊕ A_t` unrolled: the value
//! does not depend on how far the look-back had to go. Inside a tile the
//! order is fixed by the block size. So the results differ from a
//! sequential CPU scan of floats by rounding (the order is a tree inside a
//! tile and a chain across tiles), but never from run to run.
use crate::device::atomic;
use crate::device::collectives::block::{self, TempStorage};
use crate::device::shared::{SharedArray, SharedScalar};
use crate::device::sync::sync_threads;
use crate::device::thread::thread_idx_x;
use crate::device::warp::{self, lane_id};

pub use crate::device::collectives::{Max, Min, ReduceOp, Sum};
pub use crate::reduce::body::DeviceElement;

/// Threads per block of the tiled kernels (scan and select), for every
/// element type.
pub const THREADS: u32 = 256;

/// The bytes of a tile each thread owns: one row of the staged tile, which
/// the thread scans (or tests) sequentially. 32 elements of 32 bits, or 16
/// of 64.
pub const BYTES_PER_THREAD: usize = 128;

/// Elements per tile (one block's share) of `T`: [`THREADS`] rows of
/// [`BYTES_PER_THREAD`], 32 KB, so 8,192 32-bit or 4,096 64-bit elements.
/// Each tile costs a look-back, so bigger tiles go faster (on the H100, 128,
/// 256 and 512 threads of 16 elements scanned 2^28 i32 at 0.52, 0.77 and
/// 0.80 of a device copy); 32 KB a tile lets six blocks share a
/// multiprocessor's shared memory.
pub const fn tile<T>() -> usize {
    THREADS as usize * BYTES_PER_THREAD / core::mem::size_of::<T>()
}

/// Elements each thread owns in a tile of `T`: 32 or 16.
pub const fn items_per_thread<T>() -> usize {
    BYTES_PER_THREAD / core::mem::size_of::<T>()
}

/// The smallest tile of any element type (4,096, of 64-bit elements): a
/// tile state with room for `len` elements in tiles of this size has room
/// for them in any element's tiles.
pub const MIN_TILE: usize = tile::<u64>();

/// The bytes of a staged tile.
const STAGED_BYTES: usize = THREADS as usize * BYTES_PER_THREAD;

/// A tile's flag before it published anything.
const EMPTY: u32 = 0;
/// The tile's aggregate (the combination of its own elements) is published
/// (never tile 0's: it publishes its inclusive prefix at once).
const AGGREGATE: u32 = 1;
/// The tile's inclusive prefix (everything up to and including it) is
/// published.
const INCLUSIVE: u32 = 2;

/// Lanes of a warp, and tiles of a look-back window.
pub(crate) const WARP: usize = warp::WARP_SIZE as usize;

/// The parameters of every `scan_*` entry point: `(input, output, n, init,
/// exclusive, state, aggregates, inclusives)`.
pub type ScanParams<T> = (*const T, *mut T, usize, T, u32, *mut u32, *mut T, *mut T);

/// Maps an (operation, element type) pair to its scan entry point.
/// Implemented by [`scan_kernels!`](crate::scan_kernels) only.
///
/// # Safety
/// [`KERNEL`](Self::KERNEL) is the handle of the entry point generated by
/// [`scan_kernels!`](crate::scan_kernels) for exactly this operation and
/// `T`, with the parameters [`ScanParams<T>`].
pub unsafe trait ScanKernel<T>: ReduceOp<T> {
    /// The entry point's handle.
    const KERNEL: crate::device::kernel::Kernel<ScanParams<T>>;
    /// Its name, `scan_<op>_<type>`.
    const ENTRY: &'static str = Self::KERNEL.name();
}

/// Instantiates the scan kernel for operations and element types:
/// `scan_kernels! { Op, "name": i32, f64, …; … }` emits the entry points
/// `scan_<name>_<t>` (on nvptx64), `impl ScanKernel<t> for Op` (everywhere;
/// on the host its handle carries the body for the simulator) and the list
/// `SCAN_KERNELS`. Each type must be a [`DeviceElement`].
///
/// Each entry point has the parameters [`ScanParams`] and these safety
/// requirements, guaranteed by the host launcher:
/// - `input` has `n` readable elements, `output` `n` writable ones, not
///   overlapping (or the same: a scan in place is allowed);
/// - the grid is `n.div_ceil(tile::<T>())` blocks of [`THREADS`] threads
///   (1-D);
/// - `state` is 8-byte aligned and has `2 + 2·tiles` words, all 0 at launch
///   (the tile counter, a pad, and one 64-bit word per tile, see
///   [`TileState`]); `aggregates` and `inclusives` have `tiles` elements;
///   none of them is used by a concurrent launch;
/// - `exclusive` is 0 (inclusive scan) or 1 (exclusive scan).
#[macro_export]
macro_rules! scan_kernels {
    ($($op:ty, $name:literal: $($t:ident),+);+ $(;)?) => {
        /// The PTX entry points of the scans, in declaration order.
        pub const SCAN_KERNELS: &[&str] = &[$($(concat!("scan_", $name, "_", stringify!($t)),)+)+];
        $($($crate::scan_kernels!(@one $op, $name: $t);)+)+
    };
    (@one $op:ty, $name:literal: $t:ident) => {
        const _: () = {
            $crate::__family_entry! {
                concat!("scan_", $name, "_", stringify!($t))
                    => HANDLE: $crate::scan::ScanParams<$t>,
                /// The scan kernel for this operation and element type (see
                /// `scan_kernels!` for the parameters).
                ///
                /// # Safety
                /// The requirements listed in `scan_kernels!`, guaranteed by
                /// the host launcher.
                kernel(
                    input: *const $t,
                    output: *mut $t,
                    n: usize,
                    init: $t,
                    exclusive: u32,
                    state: *mut u32,
                    aggregates: *mut $t,
                    inclusives: *mut $t,
                ) {
                    // SAFETY: forwarded from this entry point's contract.
                    unsafe {
                        $crate::scan::scan::<$t, $op, { $crate::scan::tile::<$t>() }>(
                            input, output, n, init, exclusive, state, aggregates, inclusives,
                        )
                    }
                }
            }

            // SAFETY: HANDLE is the entry point emitted just above, for
            // exactly ($op, $t), with the parameters ScanParams<$t>.
            unsafe impl $crate::scan::ScanKernel<$t> for $op {
                const KERNEL: $crate::device::kernel::Kernel<$crate::scan::ScanParams<$t>> = HANDLE;
            }
        };
    };
}

/// The built-in scans (see the [module docs](self)).
#[cfg(feature = "builtin-kernels")]
pub mod built_in {
    use super::{Max, Min, Sum};

    scan_kernels! {
        Sum, "sum": i32, u32, i64, u64, f32, f64;
        Min, "min": i32, u32, i64, u64, f32, f64;
        Max, "max": i32, u32, i64, u64, f32, f64;
    }
}

/// Where the look-back of a tiled single-pass kernel keeps the tiles'
/// published values: one 64-bit word per tile, `EMPTY` (0) at launch.
///
/// - A 32-bit element ([`DeviceElement::PACKED`]) is published with its
///   flag in one atomic store: the flag in the word's high half, the value's
///   bits in the low half. One relaxed 64-bit load reads both.
/// - A 64-bit element goes to `aggregates[t]` or `inclusives[t]`, then the
///   flag to the word's low half with a release store; a reader acquires
///   the flag, then reads the value.
#[derive(Clone, Copy)]
pub struct TileState<T> {
    /// One word per tile, 8-byte aligned, 0 at launch.
    pub words: *mut u64,
    /// Each tile's aggregate (64-bit elements), valid once its flag is
    /// `AGGREGATE`.
    pub aggregates: *mut T,
    /// Each tile's inclusive prefix (64-bit elements), valid once its flag
    /// is `INCLUSIVE`.
    pub inclusives: *mut T,
}

impl<T: DeviceElement> TileState<T> {
    /// The state of the `state` parameter of a tiled kernel: word 0 is the
    /// tile counter ([`draw_tile`]), word 1 pads, and the tiles' 64-bit words
    /// follow.
    ///
    /// # Safety
    /// `state` is 8-byte aligned and has `2 + 2·tiles` words.
    #[inline(always)]
    pub unsafe fn new(state: *mut u32, aggregates: *mut T, inclusives: *mut T) -> Self {
        Self {
            // SAFETY: within the state, 8-byte aligned (the caller's contract).
            words: unsafe { state.add(2) }.cast::<u64>(),
            aggregates,
            inclusives,
        }
    }

    /// Tile `tile`'s flag and value: its inclusive prefix when the flag is
    /// `INCLUSIVE`, its aggregate when `AGGREGATE`, `Op::identity()` when
    /// `EMPTY`.
    ///
    /// # Safety
    /// `tile` is within the state.
    #[inline(always)]
    unsafe fn load<Op: ReduceOp<T>>(&self, tile: usize) -> (u32, T) {
        if T::PACKED {
            // SAFETY: the tile's word, written only by atomic stores.
            let word = unsafe { atomic::load_relaxed_u64(self.words.add(tile)) };
            let flag = (word >> 32) as u32;
            let value = if flag == EMPTY {
                Op::identity()
            } else {
                T::from_word(word as u32)
            };
            (flag, value)
        } else {
            // SAFETY: the flag half of the tile's word; the value it guards
            // was written before its release.
            unsafe {
                let flag = atomic::load_acquire_u32(self.words.add(tile).cast::<u32>());
                let value = match flag {
                    INCLUSIVE => T::load_l2(self.inclusives.add(tile)),
                    AGGREGATE => T::load_l2(self.aggregates.add(tile)),
                    _ => Op::identity(),
                };
                (flag, value)
            }
        }
    }

    /// Publishes `value` as tile `tile`'s `flag` (`AGGREGATE` or
    /// `INCLUSIVE`).
    ///
    /// # Safety
    /// `tile` is this block's own tile; one thread calls it, once per flag.
    #[inline(always)]
    unsafe fn publish(&self, tile: usize, value: T, flag: u32) {
        // SAFETY: this block's word and values.
        unsafe {
            if T::PACKED {
                let word = (flag as u64) << 32 | value.to_word() as u64;
                atomic::store_relaxed_u64(self.words.add(tile), word);
            } else {
                let values = if flag == INCLUSIVE {
                    self.inclusives
                } else {
                    self.aggregates
                };
                *values.add(tile) = value;
                atomic::store_release_u32(self.words.add(tile).cast::<u32>(), flag);
            }
        }
    }

    /// Lane `l`'s tile of the window ending at `end`, `end − 32 + l`: its
    /// flag and value ([`load`](Self::load)); a lane before tile 0 reads an
    /// aggregate of the identity.
    ///
    /// # Safety
    /// `end` is at most the state's tiles.
    #[inline(always)]
    unsafe fn read_window<Op: ReduceOp<T>>(&self, end: usize) -> (u32, T) {
        let lane = lane_id() as usize;
        if lane + end >= WARP {
            // SAFETY: end − 32 + lane < end, within the state.
            unsafe { self.load::<Op>(end + lane - WARP) }
        } else {
            (AGGREGATE, Op::identity())
        }
    }

    /// The decoupled look-back of tile `tile` with aggregate `aggregate`,
    /// called by the 32 lanes of one warp: publishes the aggregate, waits
    /// for and combines the prefix of the tiles before (see the [module
    /// docs](self)), publishes the inclusive prefix, and returns the
    /// exclusive prefix (`init` for tile 0) in every lane.
    ///
    /// # Safety
    /// The state has room for `tile + 1` tiles and is this launch's alone;
    /// tiles are numbered in the order blocks start (the forward-progress
    /// rule of the module docs); each tile calls it once.
    #[inline(always)]
    pub unsafe fn look_back<Op: ReduceOp<T>>(&self, tile: usize, aggregate: T, init: T) -> T {
        let lane = lane_id() as usize;
        if tile == 0 {
            // Tile 0's flag goes from EMPTY straight to INCLUSIVE: a window
            // that saw it as AGGREGATE would move back past the first tile
            // (tiles after it run concurrently and look at once; on the H100
            // they saw the aggregate between the two publications, moved
            // their window below tile 0 and waited on memory past the
            // state for ever).
            if lane == 0 {
                // SAFETY: tile 0 is this block's; one writer.
                unsafe { self.publish(0, Op::combine(init, aggregate), INCLUSIVE) };
            }
            return init;
        }
        if lane == 0 {
            // SAFETY: as above.
            unsafe { self.publish(tile, aggregate, AGGREGATE) };
        }
        // Back, one window of 32 tiles per step, to the first window with no
        // empty tile and an inclusive prefix. It never moves past tile 0,
        // whose flag is EMPTY or INCLUSIVE, never AGGREGATE.
        // The windows of aggregates passed on the way are kept (the first
        // `KEPT_WINDOWS` of them, each lane its own tile's value in shared
        // memory), so the way forward reads them from there, not again
        // from global memory.
        let kept = kept_windows::<T>();
        let mut depth = 0;
        let mut end = tile;
        let mut window = loop {
            // SAFETY: the window ends at `tile` or before.
            let (status, value) = unsafe { self.read_window::<Op>(end) };
            if warp::any(status == EMPTY) {
                continue;
            }
            if warp::any(status == INCLUSIVE) {
                break (status, value);
            }
            if depth < KEPT_WINDOWS {
                // SAFETY: within the array; this lane's own slot.
                unsafe { kept.store(depth * WARP + lane, value) };
            }
            depth += 1;
            end -= WARP;
        };
        // Then forward, left to right, from the nearest inclusive prefix:
        // ((I_j ⊕ A_{j+1}) ⊕ …) ⊕ A_{tile−1}. The windows after the first
        // are read again (the same lane reads the same tile, so it sees the
        // same flag or a later one); a window that now holds an inclusive
        // prefix starts again from its last one, which is the same value
        // (the module docs' determinism). The first window holds one, so
        // the prefix it starts from is never used.
        let mut prefix = Op::identity();
        loop {
            prefix = fold_window::<T, Op>(prefix, window);
            if end == tile {
                break;
            }
            end += WARP;
            depth -= 1;
            window = if depth < KEPT_WINDOWS {
                // SAFETY: written by this lane on the way back, at this depth.
                (AGGREGATE, unsafe { kept.load(depth * WARP + lane) })
            } else {
                // SAFETY: as above; every tile of this window was seen published.
                unsafe { self.read_window::<Op>(end) }
            };
        }
        if lane == 0 {
            // SAFETY: this block's tile; one writer.
            unsafe { self.publish(tile, Op::combine(prefix, aggregate), INCLUSIVE) };
        }
        prefix
    }
}

/// Folds a window read ([`TileState::read_window`]: lane `l`'s flag and
/// value) into `prefix`, left to right: from its first tile, or, when it
/// holds inclusive prefixes, from its last one (whose value replaces
/// `prefix`) on. The same in every lane.
#[inline(always)]
fn fold_window<T: DeviceElement, Op: ReduceOp<T>>(prefix: T, (status, value): (u32, T)) -> T {
    let inclusive = warp::ballot(status == INCLUSIVE);
    if inclusive == 0 {
        return fold_lanes::<T, Op>(prefix, value, 0);
    }
    let last = WARP - 1 - inclusive.leading_zeros() as usize;
    fold_lanes::<T, Op>(warp::shuffle_idx(value, last as u32), value, last + 1)
}

/// `prefix ⊕ v_from ⊕ … ⊕ v_31`, left to right, where `v_k` is lane `k`'s
/// `value`; the same in every lane. Eight shuffles at a time, which do not
/// depend on each other, then their combines: only the combines form a
/// chain, and all 32 shuffles at once would hold 24 registers more in every
/// thread of the kernel.
#[inline(always)]
fn fold_lanes<T: DeviceElement, Op: ReduceOp<T>>(mut prefix: T, value: T, from: usize) -> T {
    const BATCH: usize = 8;
    for first in (0..WARP).step_by(BATCH) {
        if from < first + BATCH {
            let v: [T; BATCH] =
                core::array::from_fn(|i| warp::shuffle_idx(value, (first + i) as u32));
            for (i, &v) in v.iter().enumerate() {
                if from <= first + i {
                    prefix = Op::combine(prefix, v);
                }
            }
        }
    }
    prefix
}

/// Draws this block's tile number from `counter` (thread 0, broadcast
/// through shared memory): tiles are numbered in the order blocks start.
///
/// # Safety
/// `counter` is a global `u32` of this launch alone; every thread of the
/// block calls it once.
#[inline(always)]
pub unsafe fn draw_tile(counter: *mut u32) -> usize {
    let slot = crate::shared_array!(scan_tile_number: [u32; 1]);
    if thread_idx_x() == 0 {
        // SAFETY: `counter` is this launch's; index 0 of a 1-element array,
        // written by thread 0 alone.
        unsafe { slot.store(0, atomic::fetch_add_u32(counter, 1)) };
    }
    sync_threads();
    // SAFETY: written before the barrier, never written again.
    unsafe { slot.load(0) as usize }
}

/// Where a tiled kernel stages its tile ([`stage_tile`], [`staged_index`]):
/// 32 KB of shared memory, as 32- or 64-bit words for `T`.
#[inline(always)]
pub(crate) fn staging<T: DeviceElement, const TILE: usize>() -> SharedArray<T, TILE> {
    const { assert!(TILE == tile::<T>(), "a tile of T") };
    let address = if small::<T>() {
        crate::shared_array!(tile_staged_4: [u32; STAGED_BYTES / 4]).address()
    } else {
        crate::shared_array!(tile_staged_8: [u64; STAGED_BYTES / 8]).address()
    };
    // SAFETY: a tile of T is 32 KB, the array chosen by `small`, aligned to
    // 16 bytes; shared for the whole kernel.
    unsafe { SharedArray::from_shared_address(address) }
}

/// Whether `T` fits a 32-bit shared word (else a 64-bit one). Known at
/// compile time, so a kernel declares only the array its type needs.
#[inline(always)]
const fn small<T>() -> bool {
    const { assert!(core::mem::size_of::<T>() <= 8 && core::mem::align_of::<T>() <= 8) };
    core::mem::size_of::<T>() <= 4 && core::mem::align_of::<T>() <= 4
}

/// How many windows of aggregates the look-back keeps on its way back.
const KEPT_WINDOWS: usize = 8;

/// Where the look-back keeps them: one value per tile, of up to 8 bytes.
#[inline(always)]
fn kept_windows<T: DeviceElement>() -> SharedArray<T, KEPT> {
    let address = if small::<T>() {
        crate::shared_array!(scan_kept_windows_4: [u32; KEPT]).address()
    } else {
        crate::shared_array!(scan_kept_windows_8: [u64; KEPT]).address()
    };
    // SAFETY: as for `staging`.
    unsafe { SharedArray::from_shared_address(address) }
}

/// Slots in [`kept_windows`].
const KEPT: usize = KEPT_WINDOWS * WARP;

/// The block collective's storage of the tiled kernels (scan and select),
/// for their blocks of [`THREADS`].
#[inline(always)]
pub fn tile_storage<T: DeviceElement>() -> TempStorage<T, { THREADS as usize }> {
    TempStorage::new(crate::shared_array!(
        tile_block_slots: [block::Slot; block::storage_len(THREADS as usize)]
    ))
}

/// The bytes of one staging copy (`cp.async`), and of one 16-byte column of
/// the staged tile.
pub(crate) const CHUNK: usize = 16;

/// The chunks a scan thread owns: one 128-byte row of the staged tile.
pub(crate) const CHUNKS_PER_THREAD: usize = BYTES_PER_THREAD / CHUNK;

/// Where chunk `chunk` of a tile is staged: in its row (the thread that owns
/// it), its column XOR the row's low three bits. The eight lanes that a
/// 16-byte shared access serves at a time (consecutive threads, each its own
/// chunk `v`) then hit eight distinct columns, and a warp reading 32
/// consecutive 32-bit elements (one row) or 16 consecutive 64-bit ones
/// hits 32 distinct banks: no bank conflicts either way.
#[inline(always)]
fn staged_chunk(chunk: usize) -> usize {
    chunk ^ ((chunk / CHUNKS_PER_THREAD) % CHUNKS_PER_THREAD)
}

/// The shared-window address of chunk `chunk` of the tile staged in
/// `staged` ([`staged_chunk`]): 16-byte aligned.
#[inline(always)]
pub(crate) fn staged_chunk_address<T: DeviceElement, const TILE: usize>(
    staged: SharedArray<T, TILE>,
    chunk: usize,
) -> u32 {
    staged.address() + (staged_chunk(chunk) * CHUNK) as u32
}

/// Elements of `T` in one 16-byte chunk: 4 or 2.
pub(crate) const fn items_per_chunk<T>() -> usize {
    CHUNK / core::mem::size_of::<T>()
}

/// Where element `e` of a tile of `T` is staged ([`staged_chunk`]).
#[inline(always)]
pub(crate) fn staged_index<T>(e: usize) -> usize {
    let per = items_per_chunk::<T>();
    staged_chunk(e / per) * per + e % per
}

/// Copies `input[..valid]`, one tile, into `staged` (see [`staged_chunk`]),
/// then waits for the whole block's copies: `cp.async` (sm_80 and later)
/// straight from global to shared memory, so the data in flight holds no
/// registers, 16-byte chunks issued by consecutive threads (512 contiguous
/// bytes a warp instruction), or one element per copy when `input` is not
/// 16-byte aligned. On sm_70, plain loads and stores one element at a time.
///
/// # Safety
/// `input` has `valid ≤ TILE` readable elements; every thread of a block of
/// [`THREADS`] calls it; nothing else uses `staged` until it returns.
#[inline(always)]
pub(crate) unsafe fn stage_tile<T: DeviceElement, const TILE: usize>(
    staged: SharedArray<T, TILE>,
    input: *const T,
    valid: usize,
) {
    let t = thread_idx_x() as usize;
    let threads = THREADS as usize;
    let ipt = items_per_thread::<T>();
    #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
    {
        let size = core::mem::size_of::<T>();
        use crate::device::mma::{
            cp_async_4, cp_async_8, cp_async_16, cp_async_commit, cp_async_wait,
        };
        if (input as usize).is_multiple_of(CHUNK) {
            let bytes = valid * size;
            for k in 0..CHUNKS_PER_THREAD {
                let chunk = k * threads + t;
                let offset = chunk * CHUNK;
                if offset < bytes {
                    let dst = staged_chunk_address(staged, chunk);
                    // SAFETY: both 16-byte aligned (the tile starts at a
                    // multiple of 32 KB of an aligned input); the bytes read
                    // are below `valid` elements; the chunk is this thread's
                    // alone until the wait below.
                    unsafe {
                        cp_async_16(
                            dst,
                            input.cast::<u8>().add(offset),
                            (bytes - offset).min(CHUNK) as u32,
                        )
                    };
                }
            }
        } else {
            for k in 0..ipt {
                let e = k * threads + t;
                if e < valid {
                    let dst = staged.element_address(staged_index::<T>(e));
                    // SAFETY: element e < valid, aligned to its size on both
                    // sides; its slot is this thread's alone until the wait.
                    unsafe {
                        let src = input.add(e).cast::<u8>();
                        if size == 4 {
                            cp_async_4(dst, src, 4)
                        } else {
                            cp_async_8(dst, src, 8)
                        }
                    }
                }
            }
        }
        cp_async_commit();
        cp_async_wait::<0>();
    }
    #[cfg(all(target_arch = "nvptx64", not(target_feature = "sm_80")))]
    for k in 0..ipt {
        let e = k * threads + t;
        if e < valid {
            // SAFETY: element e < valid; its slot is this thread's alone.
            unsafe { staged.store(staged_index::<T>(e), *input.add(e)) };
        }
    }
    sync_threads();
}

/// The scan of `input[..n]` into `output` (inclusive, or exclusive when
/// `exclusive != 0`), starting from `init`: see the [module docs](self).
///
/// # Safety
/// The requirements of [`scan_kernels!`](crate::scan_kernels).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn scan<T: DeviceElement, Op: ReduceOp<T>, const TILE: usize>(
    input: *const T,
    output: *mut T,
    n: usize,
    init: T,
    exclusive: u32,
    state: *mut u32,
    aggregates: *mut T,
    inclusives: *mut T,
) {
    // SAFETY: state[0] is the launch's tile counter.
    let tile = unsafe { draw_tile(state) };
    let start = tile * TILE;
    let valid = (n - start).min(TILE);
    // SAFETY: tile < tiles = n.div_ceil(TILE), so start < n and `valid`
    // elements follow it in both buffers.
    let (input, output) = unsafe { (input.add(start), output.add(start)) };
    let staged = staging::<T, TILE>();
    // SAFETY: `valid` elements at `input`; the whole block calls it.
    unsafe { stage_tile(staged, input, valid) };
    let t = thread_idx_x() as usize;
    let per = items_per_chunk::<T>();
    let ipt = items_per_thread::<T>();
    if valid < TILE {
        // The items past `valid` in this thread's row become the identity
        // (the row is this thread's alone from here on).
        for i in 0..ipt {
            if t * ipt + i >= valid {
                // SAFETY: within the tile; this thread's own row.
                unsafe { staged.store(staged_index::<T>(t * ipt + i), Op::identity()) };
            }
        }
    }
    // Each thread scans its row in place, 16 bytes at a time: slot i of the
    // row becomes the combination of items 0..=i (inclusive scan) or 0..i
    // (exclusive: the identity in slot 0).
    let mut running = Op::identity();
    for v in 0..CHUNKS_PER_THREAD {
        let address = staged_chunk_address(staged, t * CHUNKS_PER_THREAD + v);
        // SAFETY: this thread's own chunk, 16-byte aligned, staged before
        // the barrier in `stage_tile`.
        let mut words = unsafe { <[u32; 4]>::load_shared(address) };
        for j in 0..per {
            let x = chunk_item::<T>(&words, j);
            let before = running;
            running = Op::combine(running, x);
            set_chunk_item(&mut words, j, if exclusive == 0 { running } else { before });
        }
        // SAFETY: as above.
        unsafe { <[u32; 4]>::store_shared(address, words) };
    }
    // SAFETY: state is 8-byte aligned with 2 + 2·tiles words.
    let tiles = unsafe { TileState::new(state, aggregates, inclusives) };
    // SAFETY: every thread gets here; the state is this launch's and tiles
    // are drawn in start order. Its barriers also publish the rows above.
    let (prefix, _) = unsafe {
        tile_storage::<T>()
            .exclusive_scan_with_prefix::<Op>(running, |a| tiles.look_back::<Op>(tile, a, init))
    };
    // Each warp writes its threads' rows, which are consecutive in the
    // tile, coalesced: lane l chunk 32·k + l of the warp's part, the owner's
    // prefix combined with each slot, one 16-byte store (512 contiguous
    // bytes a warp instruction). Each thread storing its own row wrote half
    // sectors, twice the L2 write requests (ncu, H100).
    let lane = t % WARP;
    let part = (t / WARP) * WARP * CHUNKS_PER_THREAD;
    let aligned = (output as usize).is_multiple_of(CHUNK);
    crate::device::unroll!(k in CHUNKS_PER_THREAD => {
        let q = k * WARP + lane;
        let owner_prefix = warp::shuffle_idx(prefix, (q / CHUNKS_PER_THREAD) as u32);
        let chunk = part + q;
        let first = chunk * per;
        if first < valid {
            let address = staged_chunk_address(staged, chunk);
            // SAFETY: a chunk of a row of this warp, scanned before the
            // block scan's barriers; 16-byte aligned.
            let mut words = unsafe { <[u32; 4]>::load_shared(address) };
            for j in 0..per {
                let starts_row = j == 0 && q.is_multiple_of(CHUNKS_PER_THREAD);
                let slot = chunk_item::<T>(&words, j);
                let out = if exclusive != 0 && starts_row {
                    owner_prefix
                } else {
                    Op::combine(owner_prefix, slot)
                };
                set_chunk_item(&mut words, j, out);
            }
            if aligned && first + per <= valid {
                // SAFETY: elements first..first + per < valid, 16-byte
                // aligned (the tile starts at a multiple of 32 KB); written
                // by this lane alone.
                unsafe { crate::device::load::store_v4(output.add(first).cast(), words) };
            } else {
                for j in 0..per {
                    if first + j < valid {
                        // SAFETY: element first + j < valid, this lane's alone.
                        unsafe { *output.add(first + j) = chunk_item::<T>(&words, j) };
                    }
                }
            }
        }
    });
}

/// Item `j` of the `T`s packed in 16 bytes (in memory order).
#[inline(always)]
pub(crate) fn chunk_item<T: DeviceElement>(words: &[u32; 4], j: usize) -> T {
    const { assert!(CHUNK.is_multiple_of(core::mem::size_of::<T>())) };
    debug_assert!(j < items_per_chunk::<T>());
    // SAFETY: j·size + size ≤ 16, within the words; T is any bit pattern of
    // a DeviceElement (integers and floats).
    unsafe { words.as_ptr().cast::<T>().add(j).read_unaligned() }
}

/// Replaces item `j` of the `T`s packed in 16 bytes.
#[inline(always)]
fn set_chunk_item<T: DeviceElement>(words: &mut [u32; 4], j: usize, value: T) {
    debug_assert!(j < items_per_chunk::<T>());
    // SAFETY: as in `chunk_item`.
    unsafe { words.as_mut_ptr().cast::<T>().add(j).write_unaligned(value) }
}
