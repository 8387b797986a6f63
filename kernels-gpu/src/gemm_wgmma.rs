//! The Hopper GEMM (sm_90a): `C = alpha · op(A) · op(B) + beta · C` per
//! batch in the GEMM family's four layouts (NN, NT, TN, TT: each operand
//! stored as the product reads it or transposed), 16-bit floats (bf16, f16)
//! or f32 read as tf32 (NT only: wgmma reads tf32 K-major alone), f32
//! accumulation, C `m × n` row-major in f32 or the 16-bit input type.
//!
//! An operand read along k (A stored `m × k`, B stored `n × k`: K-major) is
//! loaded by one TMA box of 64 k-elements (128 bytes) by its tile's rows; an
//! operand stored the other way (A `k × m`, B `k × n`: MN-major) by boxes of
//! 64 rows-or-columns (128 bytes) by 64 k, two for A's 128 rows and four for
//! B's 256 columns, which wgmma reads with its transpose flag through
//! [`sw128_mn_descriptor`]s. The bytes a stage holds are the same either way.
//!
//! One block computes a 128 × 256 tile of C (the `gemm_wgmma_n128_*`
//! entries a 128 × 128 one, in a ring of [`STAGES_NARROW`] stages: [`Tile`];
//! the host's plan picks the width) with three warpgroups:
//! - warpgroup 0, the producer: one thread issues TMA loads of A's 128 × 64
//!   (tf32: 128 × 32) and B's 256 × 64 slab into a ring of [`STAGES`]
//!   stages of shared memory, with the 128-byte swizzle, each stage's *full*
//!   barrier counting its bytes; the warpgroup gives up registers
//!   (`setmaxnreg.dec` to 40);
//! - warpgroups 1 and 2, the consumers (`setmaxnreg.inc` to 232): each runs
//!   `wgmma m64n256` over its 64 rows of the tile, four k steps a stage,
//!   128 f32 accumulators a thread, then frees the stage (its *empty*
//!   barrier) for the producer.
//!
//! Edges: the TMA boxes past m, n or k are filled with zeros (so any m, n, k
//! work; the k tail multiplies zeros), and the epilogue stores only the
//! elements inside C. The tensor maps (made on the host with
//! `cuTensorMapEncodeTiled`, 3-D: k, rows, batch) carry the operands'
//! shapes, leading dimensions and batch strides; the host keeps them in a
//! slot of the module's [`TENSOR_MAPS_SYMBOL`] (written by a copy on the
//! launch's stream when the operands are new, reused as they are
//! otherwise), and the producer fences them in
//! (`hopper::acquire_tensor_map`) before its first TMA load.
//!
//! Entry points exist in the sm_90a build only (`lib.rs` gates this module
//! on `target_feature = "sm_90a"` for nvptx64); on the host the bodies are
//! compiled for the simulator, which models wgmma, TMA and mbarrier
//! (`device::sim`), so the same code runs there.
use crate::device::float16::{bf16, f16};
use crate::device::hopper::{
    self, Bf16, F16, MBarrier, N128_ACCUMULATORS, N256_ACCUMULATORS, Tf32, WgmmaInput,
    sw128_descriptor, sw128_mn_descriptor,
};
use crate::device::{kernel, shared, sync, thread, warp};
use crate::gemm::{GemmOutput, epilogue, store_c, store_c_pair};

/// Rows of C a block computes.
pub const BLOCK_M: u32 = 128;
/// Columns of C a block of the wide entries (`gemm_wgmma_*`) computes.
pub const BLOCK_N: u32 = 256;
/// Columns of C a block of the narrow entries (`gemm_wgmma_n128_*`)
/// computes: half the tiles' area, twice their count, for problems whose
/// 128 × 256 tiles fill the GPU badly (the host's plan chooses).
pub const BLOCK_N_NARROW: u32 = 128;
/// Bytes of each operand row a stage holds (64 16-bit or 32 f32 elements:
/// one 128-byte swizzle row).
pub const ROW_BYTES: u32 = 128;
/// Stages of the shared-memory ring of the wide tile (48 KiB each).
pub const STAGES: u32 = 4;
/// Stages of the shared-memory ring of the narrow tile (32 KiB each): as
/// many as fit in the same shared memory.
pub const STAGES_NARROW: u32 = 6;
/// Threads of a block: a producer and two consumer warpgroups.
pub const THREADS: u32 = 384;
/// Bytes of A in one stage.
const A_STAGE_BYTES: u32 = BLOCK_M * ROW_BYTES;
/// Bytes of one stage (A then B) of a tile `bn` columns wide.
const fn stage_bytes(bn: u32) -> u32 {
    A_STAGE_BYTES + bn * ROW_BYTES
}
/// Rows of C one epilogue box holds: a consumer's 64 rows.
pub const C_BOX_ROWS: u32 = 64;
/// Bytes of one row of an epilogue box (one 128-byte swizzle row: 32 f32
/// or 64 16-bit columns of C).
pub const C_BOX_ROW_BYTES: u32 = 128;
/// Bytes of one epilogue buffer: a box of C.
const C_BUFFER_BYTES: u32 = C_BOX_ROWS * C_BOX_ROW_BYTES;
/// Epilogue buffers: two per consumer (one filled while the other's box is
/// stored).
const C_BUFFERS: u32 = 4;
/// Dynamic shared memory a block of a tile `bn` columns wide with `stages`
/// stages needs: the ring (1024-byte aligned, for the swizzle: up to 1024
/// bytes are skipped to align it), the epilogue's buffers and the 2
/// barriers of each stage.
const fn shared_bytes(bn: u32, stages: u32) -> u32 {
    1024 + stages * stage_bytes(bn) + C_BUFFERS * C_BUFFER_BYTES + 2 * stages * 8
}
/// Dynamic shared memory every entry is launched with: the larger of the
/// two tiles' needs (the wide 230,464 bytes, the narrow 230,496).
pub const SHARED_BYTES: u32 = {
    let (wide, narrow) = (
        shared_bytes(BLOCK_N, STAGES),
        shared_bytes(BLOCK_N_NARROW, STAGES_NARROW),
    );
    if wide > narrow { wide } else { narrow }
};
// An SM's opt-in shared memory on sm_90: 227 KiB.
const _: () = assert!(SHARED_BYTES <= 227 * 1024);
/// The k steps of one stage (each reads 32 bytes of every K-major row, or
/// 16 rows of an MN-major box).
const K_STEPS: u32 = ROW_BYTES / 32;
/// Rows (or columns) of an MN-major operand one TMA box holds: one
/// 128-byte swizzle row of 16-bit elements.
pub const MN_BOX: u32 = 64;
/// Bytes of one MN-major box: [`MN_BOX`] elements by the 64 k of a stage.
const MN_BOX_BYTES: u32 = MN_BOX * ROW_BYTES;
/// Registers a thread at launch (`.maxnreg`): the most that lets
/// [`THREADS`] threads share an SM's 65,536 (a multiple of 8); `setmaxnreg`
/// then moves them from the producer to the consumers.
pub const MAX_REGISTERS: u32 = (65_536 / THREADS) & !7;

/// Tensor maps a slot of [`TENSOR_MAPS_SYMBOL`] holds: A's, B's and C's.
pub const MAPS_PER_SLOT: usize = 3;

/// The name of the module's global that holds the tensor maps of the
/// launches: [`TENSOR_MAP_SLOTS`] slots of [`MAPS_PER_SLOT`] maps (A's, B's,
/// then C's, which only a launch that stores through TMA reads). The
/// host keeps a table of what each slot holds, writes a slot (a copy on the
/// launch's stream) only for operands it does not hold yet, and passes the
/// addresses of the launch's slot.
pub const TENSOR_MAPS_SYMBOL: &str = "GEMM_WGMMA_TENSOR_MAPS";

/// The slots of [`TENSOR_MAPS_SYMBOL`]: the operand pairs whose maps stay on
/// the device at once.
pub const TENSOR_MAP_SLOTS: usize = 64;

/// The host's slots of tensor maps ([`TENSOR_MAPS_SYMBOL`]).
#[cfg(target_arch = "nvptx64")]
#[unsafe(no_mangle)]
pub static mut GEMM_WGMMA_TENSOR_MAPS: [[hopper::TensorMap; MAPS_PER_SLOT]; TENSOR_MAP_SLOTS] =
    [[hopper::TensorMap([0; 16]); MAPS_PER_SLOT]; TENSOR_MAP_SLOTS];

/// A block's tile width: [`BLOCK_N`] (`Tile<256>`) or [`BLOCK_N_NARROW`]
/// (`Tile<128>`), with what depends on it: the ring's stages, the
/// consumers' accumulators (an m64n256 or m64n128 fragment) and their wgmma.
pub struct Tile<const BN: u32>;

/// What a tile width fixes (see [`Tile`]).
pub trait TileWidth {
    /// Columns of C a block computes.
    const BN: u32;
    /// Stages of the shared-memory ring.
    const STAGES: u32;
    /// A consumer thread's accumulators.
    type Acc;
    /// Zeroed accumulators.
    fn zero() -> Self::Acc;
    /// [`hopper::fence_accumulators`] on them.
    fn fence(acc: &mut Self::Acc);
    /// One k step of the consumer's wgmma (`m64n{BN}`).
    ///
    /// # Safety
    /// As [`WgmmaInput::mma_m64n256`].
    unsafe fn mma<T: WgmmaInput, const A_MN: bool, const B_MN: bool>(
        acc: &mut Self::Acc,
        a: u64,
        b: u64,
    );
    /// Calls `f(i, [acc[i], acc[i + 1]])` for each even `i`, in order, with
    /// constant indices (straight-line code once inlined: the fragment
    /// stays in registers, never indexed at run time).
    fn for_each_pair(acc: &Self::Acc, f: impl FnMut(u32, [f32; 2]));
}

macro_rules! pairs_of {
    ($acc:ident, $f:ident; $($i:literal)*) => {
        $(if ($i as u32).is_multiple_of(2) {
            $f($i, [$acc[$i], $acc[($i + 1) % $acc.len()]]);
        })*
    };
}

/// The [`TileWidth`] of `Tile<$bn>`: its constants, accumulator array,
/// wgmma and index list (one impl per width, the same body).
macro_rules! tile_width {
    ($bn:literal: $width:expr, $stages:expr, $acc:ident, $mma:ident, $indices:ident) => {
        impl TileWidth for Tile<$bn> {
            const BN: u32 = $width;
            const STAGES: u32 = $stages;
            type Acc = [f32; $acc];
            #[inline(always)]
            fn zero() -> Self::Acc {
                [0.0; $acc]
            }
            #[inline(always)]
            fn fence(acc: &mut Self::Acc) {
                hopper::fence_accumulators(acc);
            }
            #[inline(always)]
            unsafe fn mma<T: WgmmaInput, const A_MN: bool, const B_MN: bool>(
                acc: &mut Self::Acc,
                a: u64,
                b: u64,
            ) {
                // SAFETY: the caller's promise.
                unsafe { T::$mma::<A_MN, B_MN>(acc, a, b) }
            }
            #[inline(always)]
            fn for_each_pair(acc: &Self::Acc, mut f: impl FnMut(u32, [f32; 2])) {
                crate::device::$indices!(pairs_of!(acc, f));
            }
        }
    };
}
tile_width!(256: BLOCK_N, STAGES, N256_ACCUMULATORS, mma_m64n256, with_n256_indices);
tile_width!(128: BLOCK_N_NARROW, STAGES_NARROW, N128_ACCUMULATORS, mma_m64n128, with_n128_indices);

/// The block's tile of `C = alpha · op(A) · op(B) + beta · C`, A MN-major
/// (stored `k × m`) when `A_MN`, B MN-major (stored `k × n`) when `B_MN`.
///
/// Persistent: the grid's blocks walk the `units` work units (tile of C,
/// split of k, batch; tiles fastest) in steps of the grid's size, the
/// producer running on into the next unit's stages while the consumers
/// store the last one's tile, so a tile's prologue hides under the previous
/// tile's epilogue.
///
/// Split k: unit `(tile, split, batch)` multiplies the `k_chunk`
/// k-elements from `split · k_chunk` (the last split fewer) and stores its
/// tile to `c + split · c_split_stride`; with one split (`k_chunk ≥ k`) that
/// is the whole product. (The host reduces the splits' f32 partial
/// products.)
///
/// The epilogue: with a tensor map of C (`c_map` not null: `beta = 0`),
/// each consumer writes its 64 rows of the tile to shared
/// memory a box of 128-byte rows at a time (32 f32 or 64 16-bit columns,
/// swizzled as the map's 128-byte swizzle), and one of its threads stores
/// the box with TMA, asynchronously: two buffers a consumer, so the stores
/// drain under the next box's writes and the next tile's products, and TMA
/// leaves out what lies past m and n. Without one, each thread stores its
/// fragment straight to C (pairs of adjacent columns where aligned), reading
/// C when `beta ≠ 0`.
///
/// # Safety
/// Launched with [`THREADS`] threads a block, [`SHARED_BYTES`] of dynamic
/// shared memory, a 1-D grid, `units = ceil(m / 128) · ceil(n / BN) ·
/// splits · batches` where `splits = ceil(k / k_chunk)`, `k_chunk` a
/// multiple of the k of a stage, `group_m ≥ 1`;
/// `a_map` and `b_map` point to tensor maps (`CUtensorMap`, 16 words, 64-byte
/// aligned, in global memory), 128-byte swizzle, zero fill, of A and B:
/// K-major `k × rows × batches` with box `ROW_BYTES / T::BYTES × rows × 1`
/// (rows 128 for A, `BN` for B), or MN-major `rows × k × batches` with box
/// `64 × 64 × 1`; `c` holds, for each split, `batches` blocks of
/// `c_batch_stride` elements, each `m` rows of `ldc ≥ n`, the splits
/// `c_split_stride` elements apart and not overlapping; `c_map` is null, or
/// (with `beta = 0`) points to a tensor map of C, `n × m × (splits ·
/// batches)` of `O` with row stride `ldc` and third-dimension stride
/// `c_batch_stride` (so with several splits `c_split_stride = batches ·
/// c_batch_stride`: split `s` of batch `b` is its plane `s · batches + b`),
/// box `C_BOX_ROW_BYTES / size_of::<O>() × C_BOX_ROWS × 1`, 128-byte
/// swizzle, at `c`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn gemm<T: WgmmaInput, O: GemmOutput, const A_MN: bool, const B_MN: bool, const BN: u32>(
    a_map: *const u64,
    b_map: *const u64,
    c: *mut O,
    m: u32,
    n: u32,
    k: u32,
    ldc: u32,
    c_batch_stride: u64,
    alpha: f32,
    beta: f32,
    group_m: u32,
    k_chunk: u32,
    c_split_stride: u64,
    units: u32,
    c_map: *const u64,
) where
    Tile<BN>: TileWidth,
{
    kernel::max_registers::<MAX_REGISTERS>();
    const { assert!(shared_bytes(BN, Tile::<BN>::STAGES) <= SHARED_BYTES) };
    let stages = Tile::<BN>::STAGES;
    let stage_bytes = stage_bytes(BN);
    let ring = (shared::dynamic_shared_address() + 1023) & !1023;
    let a_tile = |s: u32| ring + s * stage_bytes;
    let b_tile = |s: u32| ring + s * stage_bytes + A_STAGE_BYTES;
    let c_buffers = ring + stages * stage_bytes;
    let barriers = c_buffers + C_BUFFERS * C_BUFFER_BYTES;
    // SAFETY: 2 · stages 8-byte barriers after the ring, inside SHARED_BYTES;
    // initialised below before the block barrier, used only after it.
    let full = |s: u32| unsafe { MBarrier::at(barriers + 8 * s) };
    // SAFETY: as above.
    let empty = |s: u32| unsafe { MBarrier::at(barriers + 8 * (stages + s)) };

    let tid = thread::thread_idx_x();
    // Broadcast from lane 0 so that the compiler knows it is warp-uniform
    // (else ptxas serialises the wgmma of a branch it thinks divergent).
    let warpgroup = warp::shuffle_idx(tid / 128, 0);
    if tid == 0 {
        for s in 0..stages {
            full(s).init(1);
            empty(s).init(2);
        }
        hopper::fence_barrier_init();
    }
    sync::sync_threads();

    let k_per_stage = ROW_BYTES / T::BYTES;
    let splits = k.div_ceil(k_chunk);
    let (tiles_m, tiles_n) = (m.div_ceil(BLOCK_M), n.div_ceil(BN));
    // A work unit's tile (in a grouped order: the units that run together
    // cover `group_m` tile rows and as many columns, not whole rows of C, so
    // that their slabs of A and B stay in L2), its first k and k-tiles, and
    // its batch.
    let unit = |u: u32| {
        let tiles = tiles_m * tiles_n;
        let (tile, rest) = (u % tiles, u / tiles);
        let (split, batch) = (rest % splits, rest / splits);
        let group = tile / (group_m * tiles_n);
        let first_m = group * group_m;
        let rows_in_group = (tiles_m - first_m).min(group_m);
        let tile_m = first_m + tile % rows_in_group;
        let tile_n = (tile % (group_m * tiles_n)) / rows_in_group;
        let k_first = split * k_chunk;
        let k_tiles = (k - k_first).min(k_chunk).div_ceil(k_per_stage);
        (
            tile_m * BLOCK_M,
            tile_n * BN,
            split,
            batch,
            k_first,
            k_tiles,
        )
    };
    let (first_unit, unit_step) = (thread::block_idx_x(), thread::grid_dim_x());
    // The batches (C's map holds the splits' planes after one another, each
    // `batches` deep).
    let batches = units / (tiles_m * tiles_n * splits);
    // Adjacent columns of C are stored as one aligned pair when every pair
    // of the launch is aligned: C's start, ldc and both strides even (in
    // elements) and C aligned to a pair.
    let pairs = ldc.is_multiple_of(2)
        && c_batch_stride.is_multiple_of(2)
        && c_split_stride.is_multiple_of(2)
        && (c as usize).is_multiple_of(2 * core::mem::size_of::<O>());

    if warpgroup == 0 {
        hopper::setmaxnreg_dec::<40>();
        if tid == 0 {
            let (a_map, b_map) = (a_map as u64, b_map as u64);
            // SAFETY: the launch's contract: both are tensor maps in global
            // memory, written by the host before the launch.
            unsafe {
                hopper::acquire_tensor_map(a_map);
                hopper::acquire_tensor_map(b_map);
                hopper::prefetch_tensor_map(a_map);
                hopper::prefetch_tensor_map(b_map);
            }
            // One count of stages across the block's units: the ring's
            // phases run on from unit to unit.
            let mut it = 0u32;
            let mut u = first_unit;
            while u < units {
                let (row0, col0, _, batch, k_first, k_tiles) = unit(u);
                for kt in 0..k_tiles {
                    let s = it % stages;
                    let round = it / stages;
                    if round > 0 {
                        // The consumers freed this stage's previous round.
                        empty(s).wait((round - 1) & 1);
                    }
                    full(s).arrive_expect_tx(stage_bytes);
                    let kc = (k_first + kt * k_per_stage) as i32;
                    let z = batch as i32;
                    // SAFETY: tensor maps (the launch's contract); the stage
                    // is free (its empty phase completed), 1024-byte aligned.
                    unsafe {
                        if A_MN {
                            for j in 0..BLOCK_M / MN_BOX {
                                let r = (row0 + j * MN_BOX) as i32;
                                let dst = a_tile(s) + j * MN_BOX_BYTES;
                                hopper::tma_load_3d(dst, a_map, &full(s), r, kc, z);
                            }
                        } else {
                            hopper::tma_load_3d(a_tile(s), a_map, &full(s), kc, row0 as i32, z);
                        }
                        if B_MN {
                            for j in 0..BN / MN_BOX {
                                let col = (col0 + j * MN_BOX) as i32;
                                let dst = b_tile(s) + j * MN_BOX_BYTES;
                                hopper::tma_load_3d(dst, b_map, &full(s), col, kc, z);
                            }
                        } else {
                            hopper::tma_load_3d(b_tile(s), b_map, &full(s), kc, col0 as i32, z);
                        }
                    }
                    it += 1;
                }
                u += unit_step;
            }
        }
        return;
    }

    hopper::setmaxnreg_inc::<232>();
    let consumer = warpgroup - 1;
    let t = tid % 128;
    let (warp, lane) = (t / 32, t % 32);
    let tma_c = !c_map.is_null();
    if tma_c && t == 0 {
        // SAFETY: the launch's contract: a tensor map in global memory.
        unsafe { hopper::acquire_tensor_map(c_map as u64) };
    }
    let mut it = 0u32;
    let mut u = first_unit;
    while u < units {
        let (row0, col0, split, batch, _, k_tiles) = unit(u);
        let mut acc = Tile::<BN>::zero();
        for kt in 0..k_tiles {
            let s = it % stages;
            full(s).wait((it / stages) & 1);
            Tile::<BN>::fence(&mut acc);
            hopper::wgmma_fence();
            // The consumer's 64 rows of A: 64 K-major rows of 128 bytes, or
            // the consumer's MN-major box; either way 8 KiB into the tile.
            let a = a_tile(s) + consumer * 64 * ROW_BYTES;
            for step in 0..K_STEPS {
                let da = if A_MN {
                    sw128_mn_descriptor(a + 16 * ROW_BYTES * step, MN_BOX_BYTES)
                } else {
                    sw128_descriptor(a + 32 * step)
                };
                let db = if B_MN {
                    sw128_mn_descriptor(b_tile(s) + 16 * ROW_BYTES * step, MN_BOX_BYTES)
                } else {
                    sw128_descriptor(b_tile(s) + 32 * step)
                };
                // SAFETY: the whole warpgroup issues it after the fence; the
                // stage's tiles landed (full phase) and stay until it is
                // freed, after the wait below.
                unsafe { Tile::<BN>::mma::<T, A_MN, B_MN>(&mut acc, da, db) };
            }
            hopper::wgmma_commit_group();
            // One group stays in flight: the previous stage's is done, so
            // that stage goes back to the producer.
            hopper::wgmma_wait_group::<1>();
            Tile::<BN>::fence(&mut acc);
            if kt > 0 && t == 0 {
                empty((it - 1) % stages).arrive();
            }
            it += 1;
        }
        hopper::wgmma_wait_group::<0>();
        Tile::<BN>::fence(&mut acc);
        // The unit's last stage goes back too: the producer is already
        // filling the next unit's stages while this tile is stored.
        if t == 0 {
            empty((it - 1) % stages).arrive();
        }

        if tma_c {
            // SAFETY: the launch's contract (a map of C's planes, beta 0);
            // the buffers lie inside SHARED_BYTES, 1024-byte aligned.
            unsafe {
                store_tile_tma::<O, BN>(
                    &acc,
                    c_map as u64,
                    c_buffers + consumer * 2 * C_BUFFER_BYTES,
                    (col0, row0 + consumer * C_BOX_ROWS, split * batches + batch),
                    alpha,
                    consumer,
                )
            };
            u += unit_step;
            continue;
        }
        // The epilogue: each thread's fragment (see `device::hopper`) to C,
        // pair by pair of adjacent columns with constant indices
        // (straight-line code: the fragment stays in registers).
        let row = row0 + consumer * 64 + warp * 16 + lane / 4;
        let col = col0 + 2 * (lane % 4);
        // SAFETY: the split's and the batch's block of C (the launch's
        // contract).
        let c = unsafe {
            c.add(
                split as usize * c_split_stride as usize + batch as usize * c_batch_stride as usize,
            )
        };
        let store = |i: u32, v: [f32; 2]| {
            // Accumulators i and i + 1 (i even): slab i / 4, the row 8
            // below for i % 4 ≥ 2, two adjacent columns.
            let r = row + 8 * ((i / 2) % 2);
            let cc = col + 8 * (i / 4);
            if r >= m {
                return;
            }
            // SAFETY: r < m and each element stored is < n ≤ ldc: inside the
            // batch's C, which only this thread writes; a pair store only
            // when the pair is aligned (`pairs`: cc even, C, ldc and the
            // strides even).
            unsafe {
                let at = c.add(r as usize * ldc as usize + cc as usize);
                if pairs && cc + 1 < n {
                    store_c_pair(at, v, alpha, beta);
                } else {
                    if cc < n {
                        store_c(at, v[0], alpha, beta);
                    }
                    if cc + 1 < n {
                        store_c(at.add(1), v[1], alpha, beta);
                    }
                }
            }
        };
        Tile::<BN>::for_each_pair(&acc, store);
        u += unit_step;
    }
    if tma_c && t == 0 {
        // The last boxes' stores are complete before the block's shared
        // memory goes.
        hopper::bulk_wait_group::<0>();
    }
}

/// The TMA epilogue of one consumer: its 64 × `BN` part of the tile, `acc`
/// (see `device::hopper` for the fragment), times `alpha`, to C at `(col,
/// row, batch)` through `c_map`, box by box through the consumer's two
/// buffers at `buffers` (see [`gemm`]).
///
/// # Safety
/// Called by all 128 threads of consumer `consumer` (named barrier
/// `1 + consumer`); `c_map` is a tensor map of C as [`gemm`] says;
/// `buffers` is 2 · `C_BUFFER_BYTES` of shared memory, 1024-byte aligned,
/// that only this consumer uses.
#[inline(always)]
unsafe fn store_tile_tma<O: GemmOutput, const BN: u32>(
    acc: &<Tile<BN> as TileWidth>::Acc,
    c_map: u64,
    buffers: u32,
    (col0, row0, batch): (u32, u32, u32),
    alpha: f32,
    consumer: u32,
) where
    Tile<BN>: TileWidth,
{
    // Through `black_box`: the addresses below depend on the thread alone,
    // and the compiler would otherwise compute them before the main loop
    // and keep them live (spilled) across it.
    let t = core::hint::black_box(thread::thread_idx_x()) % 128;
    let (warp, lane) = (t / 32, t % 32);
    let size = core::mem::size_of::<O>() as u32;
    // Columns of a box, and the accumulators of a thread in one box (4 for
    // each 8 columns).
    let box_cols = C_BOX_ROW_BYTES / size;
    let per_box = box_cols / 2;
    let sync = || {
        // SAFETY: the consumer's 128 threads all reach each call (the
        // caller's contract); no other warp uses this barrier.
        unsafe { hopper::named_barrier_sync(1 + consumer, 128) }
    };
    let store_pair = |i: u32, v: [f32; 2]| {
        // Accumulators i and i + 1 (i even): row `lane / 4` of the warp's
        // 16 (8 below for i % 4 ≥ 2), columns 8 · (i / 4) + 2 · (lane % 4)
        // and the next.
        let j = i / per_box;
        let buffer = buffers + (j % 2) * C_BUFFER_BYTES;
        if i.is_multiple_of(per_box) {
            // The box stored from this buffer two boxes ago has been read.
            if t == 0 {
                hopper::bulk_wait_group_read::<1>();
            }
            sync();
        }
        let row = warp * 16 + lane / 4 + 8 * ((i / 2) % 2);
        let byte = ((8 * (i / 4)) % box_cols + 2 * (lane % 4)) * size;
        // The 128-byte swizzle: 16-byte chunk `c` of row `r` at `c ^ r % 8`.
        let at = buffer + row * C_BOX_ROW_BYTES + ((byte / 16) ^ (row % 8)) * 16 + byte % 16;
        let pair = O::pack(
            O::from_f32(epilogue(v[0], alpha, 0.0, 0.0)),
            O::from_f32(epilogue(v[1], alpha, 0.0, 0.0)),
        );
        // SAFETY: inside this consumer's buffer (row < 64, byte < 128),
        // aligned to the pair; the barrier above ordered the last reader.
        unsafe { O::store_shared_pair(at, pair) };
        if (i + 2).is_multiple_of(per_box) {
            hopper::fence_proxy_async_shared();
            sync();
            if t == 0 {
                // SAFETY: the box is written and fenced (barrier above);
                // the caller's map of C.
                unsafe {
                    hopper::tma_store_3d(
                        c_map,
                        buffer,
                        (col0 + j * box_cols) as i32,
                        row0 as i32,
                        batch as i32,
                    )
                };
                hopper::bulk_commit_group();
            }
        }
    };
    Tile::<BN>::for_each_pair(acc, store_pair);
}

/// The entry points, one per input type, output type and layout, each
/// `gemm::<T, O, A_MN, B_MN>` (see the module): declared once here, with
/// the parameters they share. Layouts are named as the GEMM family names
/// them: NT is A stored `m × k` and B stored `n × k` (both K-major), NN has
/// B stored `k × n`, TN and TT have A stored `k × m`.
macro_rules! gemm_wgmma_entries {
    ($($name:ident as $handle:ident: $t:ty => $o:ty, $a_mn:literal, $b_mn:literal, $bn:literal;)*) => {
        crate::device::kernels! {
            list KERNELS;
            $(
                #[doc = concat!("`C = alpha · op(A) · op(B) + beta · C`, ", stringify!($t),
                    " inputs through their tensor maps, f32 accumulation, ", stringify!($o),
                    " C; A MN-major: ", stringify!($a_mn), ", B MN-major: ", stringify!($b_mn),
                    ", tiles 128 × ", stringify!($bn), " (see the module).")]
                ///
                /// # Safety
                /// As the module's `gemm`: the launch shape, tensor maps and C.
                pub fn $name(
                    a_map: *const u64,
                    b_map: *const u64,
                    c: *mut $o,
                    m: u32,
                    n: u32,
                    k: u32,
                    ldc: u32,
                    c_batch_stride: u64,
                    alpha: f32,
                    beta: f32,
                    group_m: u32,
                    k_chunk: u32,
                    c_split_stride: u64,
                    units: u32,
                    c_map: *const u64,
                ) as $handle {
                    // SAFETY: the entry's contract.
                    unsafe {
                        gemm::<$t, $o, $a_mn, $b_mn, $bn>(
                            a_map, b_map, c, m, n, k, ldc, c_batch_stride, alpha, beta, group_m,
                            k_chunk, c_split_stride, units, c_map,
                        )
                    }
                }
            )*
        }
    };
}

gemm_wgmma_entries! {
    gemm_wgmma_bf16_f32_nn as GEMM_WGMMA_BF16_F32_NN: Bf16 => f32, false, true, 256;
    gemm_wgmma_bf16_f32_nt as GEMM_WGMMA_BF16_F32_NT: Bf16 => f32, false, false, 256;
    gemm_wgmma_bf16_f32_tn as GEMM_WGMMA_BF16_F32_TN: Bf16 => f32, true, true, 256;
    gemm_wgmma_bf16_f32_tt as GEMM_WGMMA_BF16_F32_TT: Bf16 => f32, true, false, 256;
    gemm_wgmma_bf16_bf16_nn as GEMM_WGMMA_BF16_BF16_NN: Bf16 => bf16, false, true, 256;
    gemm_wgmma_bf16_bf16_nt as GEMM_WGMMA_BF16_BF16_NT: Bf16 => bf16, false, false, 256;
    gemm_wgmma_bf16_bf16_tn as GEMM_WGMMA_BF16_BF16_TN: Bf16 => bf16, true, true, 256;
    gemm_wgmma_bf16_bf16_tt as GEMM_WGMMA_BF16_BF16_TT: Bf16 => bf16, true, false, 256;
    gemm_wgmma_f16_f32_nn as GEMM_WGMMA_F16_F32_NN: F16 => f32, false, true, 256;
    gemm_wgmma_f16_f32_nt as GEMM_WGMMA_F16_F32_NT: F16 => f32, false, false, 256;
    gemm_wgmma_f16_f32_tn as GEMM_WGMMA_F16_F32_TN: F16 => f32, true, true, 256;
    gemm_wgmma_f16_f32_tt as GEMM_WGMMA_F16_F32_TT: F16 => f32, true, false, 256;
    gemm_wgmma_f16_f16_nn as GEMM_WGMMA_F16_F16_NN: F16 => f16, false, true, 256;
    gemm_wgmma_f16_f16_nt as GEMM_WGMMA_F16_F16_NT: F16 => f16, false, false, 256;
    gemm_wgmma_f16_f16_tn as GEMM_WGMMA_F16_F16_TN: F16 => f16, true, true, 256;
    gemm_wgmma_f16_f16_tt as GEMM_WGMMA_F16_F16_TT: F16 => f16, true, false, 256;
    gemm_wgmma_tf32_f32_nt as GEMM_WGMMA_TF32_F32_NT: Tf32 => f32, false, false, 256;
    // The narrow tile (128 × 128): 16-bit inputs, f32 C.
    gemm_wgmma_n128_bf16_f32_nn as GEMM_WGMMA_N128_BF16_F32_NN: Bf16 => f32, false, true, 128;
    gemm_wgmma_n128_bf16_f32_nt as GEMM_WGMMA_N128_BF16_F32_NT: Bf16 => f32, false, false, 128;
    gemm_wgmma_n128_bf16_f32_tn as GEMM_WGMMA_N128_BF16_F32_TN: Bf16 => f32, true, true, 128;
    gemm_wgmma_n128_bf16_f32_tt as GEMM_WGMMA_N128_BF16_F32_TT: Bf16 => f32, true, false, 128;
    gemm_wgmma_n128_f16_f32_nn as GEMM_WGMMA_N128_F16_F32_NN: F16 => f32, false, true, 128;
    gemm_wgmma_n128_f16_f32_nt as GEMM_WGMMA_N128_F16_F32_NT: F16 => f32, false, false, 128;
    gemm_wgmma_n128_f16_f32_tn as GEMM_WGMMA_N128_F16_F32_TN: F16 => f32, true, true, 128;
    gemm_wgmma_n128_f16_f32_tt as GEMM_WGMMA_N128_F16_F32_TT: F16 => f32, true, false, 128;
}

/// The parameters every entry takes, `O` its output element: the two tensor
/// maps' addresses, C, m, n, k, ldc, C's batch stride, alpha, beta, the
/// tile rows of a group of the grouped tile order, the k of a split, the
/// elements between the splits' outputs, the work units (tiles · splits
/// · batches) the grid's blocks walk and C's tensor map (or null).
pub type WgmmaParams<O> = (
    *const u64,
    *const u64,
    *mut O,
    u32,
    u32,
    u32,
    u32,
    u64,
    f32,
    f32,
    u32,
    u32,
    u64,
    u32,
    *const u64,
);
