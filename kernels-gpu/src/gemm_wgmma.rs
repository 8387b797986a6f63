//! The Hopper GEMM (sm_90a): `C = alpha · A · Bᵀ + beta · C` per batch, A
//! `m × k` and B `n × k` both K-major (rows along k) in 16-bit floats (bf16,
//! f16) or f32 read as tf32, f32 accumulation, C `m × n` f32 row-major.
//!
//! One block computes a 128 × 256 tile of C with three warpgroups:
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
//! shapes, leading dimensions and batch strides; the host copies them into
//! the module's [`TENSOR_MAPS_SYMBOL`] on the launch's stream before each
//! launch (no allocation, no wait), and the producer fences them in
//! (`hopper::acquire_tensor_map`) before its first TMA load.
//!
//! Entry points exist in the sm_90a build only (`lib.rs` gates this module
//! on `target_feature = "sm_90a"` for nvptx64); on the host the bodies are
//! compiled for the simulator, which does not model wgmma or TMA (the host
//! launcher refuses them there).
use crate::device::hopper::{
    self, Bf16, F16, MBarrier, N256_ACCUMULATORS, Tf32, WgmmaInput, sw128_descriptor,
};
use crate::device::{kernel, shared, sync, thread, warp};

/// Rows of C a block computes.
pub const BLOCK_M: u32 = 128;
/// Columns of C a block computes.
pub const BLOCK_N: u32 = 256;
/// Bytes of each operand row a stage holds (64 16-bit or 32 f32 elements:
/// one 128-byte swizzle row).
pub const ROW_BYTES: u32 = 128;
/// Stages of the shared-memory ring.
pub const STAGES: u32 = 4;
/// Threads of a block: a producer and two consumer warpgroups.
pub const THREADS: u32 = 384;
/// Bytes of A in one stage.
const A_STAGE_BYTES: u32 = BLOCK_M * ROW_BYTES;
/// Bytes of one stage (A then B).
const STAGE_BYTES: u32 = A_STAGE_BYTES + BLOCK_N * ROW_BYTES;
/// Dynamic shared memory a block needs: the ring (1024-byte aligned, for the
/// swizzle: up to 1024 bytes are skipped to align it) and the 2 barriers of
/// each stage.
pub const SHARED_BYTES: u32 = 1024 + STAGES * STAGE_BYTES + 2 * STAGES * 8;
/// The k steps of one stage (each reads 32 bytes of every row).
const K_STEPS: u32 = ROW_BYTES / 32;
/// Registers a thread at launch (`.maxnreg`): the most that lets
/// [`THREADS`] threads share an SM's 65,536 (a multiple of 8); `setmaxnreg`
/// then moves them from the producer to the consumers.
pub const MAX_REGISTERS: u32 = (65_536 / THREADS) & !7;

/// The name of the module's global that holds the tensor maps of the next
/// launch (A's, then B's): the host writes them with a copy on the launch's
/// stream, so each launch reads its own, and passes their addresses.
pub const TENSOR_MAPS_SYMBOL: &str = "GEMM_WGMMA_TENSOR_MAPS";

/// The tensor maps of the next launch ([`TENSOR_MAPS_SYMBOL`]).
#[cfg(target_arch = "nvptx64")]
#[unsafe(no_mangle)]
pub static mut GEMM_WGMMA_TENSOR_MAPS: [hopper::TensorMap; 2] = [hopper::TensorMap([0; 16]); 2];

/// The block's tile of `C = alpha · A · Bᵀ + beta · C`.
///
/// # Safety
/// Launched with [`THREADS`] threads a block, [`SHARED_BYTES`] of dynamic
/// shared memory, a grid of `(ceil(m / 128) · ceil(n / 256), 1, batches)`,
/// `group_m ≥ 1`;
/// `a_map` and `b_map` point to tensor maps (`CUtensorMap`, 16 words, 64-byte
/// aligned, in global memory) of A (`k × m × batches`, box
/// `ROW_BYTES / T::BYTES × 128 × 1`) and B (`k × n × batches`, box
/// `… × 256 × 1`), 128-byte swizzle, zero fill; `c` holds `batches` blocks of
/// `c_batch_stride` f32, each `m` rows of `ldc ≥ n`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn gemm<T: WgmmaInput>(
    a_map: *const u64,
    b_map: *const u64,
    c: *mut f32,
    m: u32,
    n: u32,
    k: u32,
    ldc: u32,
    c_batch_stride: u64,
    alpha: f32,
    beta: f32,
    group_m: u32,
) {
    kernel::max_registers::<MAX_REGISTERS>();
    let ring = (shared::dynamic_shared_address() + 1023) & !1023;
    let a_tile = |s: u32| ring + s * STAGE_BYTES;
    let b_tile = |s: u32| ring + s * STAGE_BYTES + A_STAGE_BYTES;
    let barriers = ring + STAGES * STAGE_BYTES;
    // SAFETY: 2 · STAGES 8-byte barriers after the ring, inside SHARED_BYTES;
    // initialised below before the block barrier, used only after it.
    let full = |s: u32| unsafe { MBarrier::at(barriers + 8 * s) };
    // SAFETY: as above.
    let empty = |s: u32| unsafe { MBarrier::at(barriers + 8 * (STAGES + s)) };

    let tid = thread::thread_idx_x();
    // Broadcast from lane 0 so that the compiler knows it is warp-uniform
    // (else ptxas serialises the wgmma of a branch it thinks divergent).
    let warpgroup = warp::shuffle_idx(tid / 128, 0);
    if tid == 0 {
        for s in 0..STAGES {
            full(s).init(1);
            empty(s).init(2);
        }
        hopper::fence_barrier_init();
    }
    sync::sync_threads();

    let k_per_stage = ROW_BYTES / T::BYTES;
    let k_tiles = k.div_ceil(k_per_stage);
    // The block's tile, in a grouped order: the blocks that run together
    // cover `group_m` tile rows and as many columns, not whole rows of C, so
    // that their slabs of A and B stay in L2.
    let (tiles_m, tiles_n) = (m.div_ceil(BLOCK_M), n.div_ceil(BLOCK_N));
    let tile = thread::block_idx_x();
    let group = tile / (group_m * tiles_n);
    let first_m = group * group_m;
    let rows_in_group = (tiles_m - first_m).min(group_m);
    let tile_m = first_m + tile % rows_in_group;
    let tile_n = (tile % (group_m * tiles_n)) / rows_in_group;
    let row0 = tile_m * BLOCK_M;
    let col0 = tile_n * BLOCK_N;
    let batch = thread::block_idx_z();

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
            for kt in 0..k_tiles {
                let s = kt % STAGES;
                let round = kt / STAGES;
                if round > 0 {
                    // The consumers freed this stage's previous round.
                    empty(s).wait((round - 1) & 1);
                }
                full(s).arrive_expect_tx(STAGE_BYTES);
                let kc = (kt * k_per_stage) as i32;
                // SAFETY: tensor maps (the launch's contract); the stage is
                // free (its empty phase completed), 1024-byte aligned.
                unsafe {
                    hopper::tma_load_3d(a_tile(s), a_map, &full(s), kc, row0 as i32, batch as i32);
                    hopper::tma_load_3d(b_tile(s), b_map, &full(s), kc, col0 as i32, batch as i32);
                }
            }
        }
        return;
    }

    hopper::setmaxnreg_inc::<232>();
    let consumer = warpgroup - 1;
    let mut acc = [0f32; N256_ACCUMULATORS];
    for kt in 0..k_tiles {
        let s = kt % STAGES;
        full(s).wait((kt / STAGES) & 1);
        hopper::fence_accumulators(&mut acc);
        hopper::wgmma_fence();
        let a = a_tile(s) + consumer * 64 * ROW_BYTES;
        for step in 0..K_STEPS {
            // SAFETY: the whole warpgroup issues it after the fence; the
            // stage's tiles landed (full phase) and stay until it is freed,
            // after the wait below.
            unsafe {
                T::mma_m64n256(
                    &mut acc,
                    sw128_descriptor(a + 32 * step),
                    sw128_descriptor(b_tile(s) + 32 * step),
                )
            };
        }
        hopper::wgmma_commit_group();
        // One group stays in flight: the previous stage's is done, so that
        // stage goes back to the producer.
        hopper::wgmma_wait_group::<1>();
        hopper::fence_accumulators(&mut acc);
        if kt > 0 && tid.is_multiple_of(128) {
            empty((kt - 1) % STAGES).arrive();
        }
    }
    hopper::wgmma_wait_group::<0>();
    hopper::fence_accumulators(&mut acc);

    // The epilogue: each thread's fragment (see `device::hopper`) to C,
    // element by element with constant indices (straight-line code: the
    // fragment stays in registers).
    let t = tid % 128;
    let (warp, lane) = (t / 32, t % 32);
    let row = row0 + consumer * 64 + warp * 16 + lane / 4;
    let col = col0 + 2 * (lane % 4);
    // SAFETY: the batch's block of C (the launch's contract).
    let c = unsafe { c.add(batch as usize * c_batch_stride as usize) };
    let store = |i: u32, v: f32| {
        // Accumulator i: slab i / 4, the row 8 below for i % 4 ≥ 2, the
        // odd column for odd i.
        let r = row + 8 * ((i / 2) % 2);
        let cc = col + 8 * (i / 4) + i % 2;
        if r < m && cc < n {
            // SAFETY: r < m, cc < n ≤ ldc: inside the batch's C.
            unsafe {
                let p = c.add(r as usize * ldc as usize + cc as usize);
                *p = if beta == 0.0 {
                    alpha * v
                } else {
                    alpha * v + beta * *p
                };
            }
        }
    };
    macro_rules! store_all {
        (; $($i:literal)*) => { $(store($i, acc[$i]);)* };
    }
    crate::device::with_n256_indices!(store_all!());
}

/// The entry points, one per input type, each `gemm::<T>` (see the
/// module): declared once here, with the parameters they share.
macro_rules! gemm_wgmma_entries {
    ($($(#[doc = $doc:literal])* $name:ident as $handle:ident: $t:ty;)*) => {
        crate::device::kernels! {
            list KERNELS;
            $(
                $(#[doc = $doc])*
                ///
                /// # Safety
                /// As the module's `gemm`: the launch shape, tensor maps and C.
                pub fn $name(
                    a_map: *const u64,
                    b_map: *const u64,
                    c: *mut f32,
                    m: u32,
                    n: u32,
                    k: u32,
                    ldc: u32,
                    c_batch_stride: u64,
                    alpha: f32,
                    beta: f32,
                    group_m: u32,
                ) as $handle {
                    // SAFETY: the entry's contract.
                    unsafe {
                        gemm::<$t>(a_map, b_map, c, m, n, k, ldc, c_batch_stride, alpha, beta, group_m)
                    }
                }
            )*
        }
    };
}

gemm_wgmma_entries! {
    /// `C = alpha · A · Bᵀ + beta · C` for bf16 A (`m × k`) and B (`n × k`)
    /// through their tensor maps, f32 accumulation and C (see the module).
    gemm_wgmma_bf16 as GEMM_WGMMA_BF16: Bf16;
    /// As `gemm_wgmma_bf16`, for f16 A and B.
    gemm_wgmma_f16 as GEMM_WGMMA_F16: F16;
    /// As `gemm_wgmma_bf16`, for f32 A and B multiplied as tf32 (32
    /// elements of k a stage).
    gemm_wgmma_tf32 as GEMM_WGMMA_TF32: Tf32;
}
