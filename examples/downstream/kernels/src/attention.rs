//! A user's tensor-core kernel: one 64 × 64 tile of attention weights,
//! `P = softmax_rows(scale · Q·Kᵀ)`, with `Q` and `K` 64 × 64 bf16
//! (row-major, one row per query or key, the head dimension along the row)
//! and `S = Q·Kᵀ` accumulated in f32 by `mma.sync.m16n8k16` (the device
//! crate's [`mma_m16n8k16`]).
//!
//! One block of four warps; warp `w` owns the score rows `16w .. 16w + 16`:
//! eight 16 × 8 accumulator tiles across the 64 keys, each the sum of four
//! k-steps of 16 over the head dimension. The fragments come straight from
//! global memory through the device crate's layouts ([`FragA::from_fn`],
//! [`FragB::from_fn`]: `B[k][n] = K[n][k]` is the `.col` operand, K's rows
//! as they are). In the accumulator layout ([`C_M16N8`]) a row's values lie
//! in the four lanes of one `lane / 4` group, so the row's maximum and sum
//! are combined with two XOR shuffles.
//!
//! Built only for sm_80 and later (the app's `build.rs` asks the builder for
//! sm_80 and sm_90a cubins): the portable sm_70 PTX has no `attention_tile`,
//! and the host launches it only from a cubin of sm_80 or later, or on the
//! simulator, which runs the same body with the fragment layouts modelled.
// The kernel's parameter types are named in every build (its handle's
// signature), its body only where it is compiled.
use cuda_kernels_device::float16::bf16;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
use cuda_kernels_device::{
    mma::{C_M16N8, FragA, FragB, mma_m16n8k16},
    prelude::*,
    warp,
};

/// Queries and keys of the tile (rows of `Q`, `K` and `P`).
pub const ATTENTION_TILE: usize = 64;
/// The head dimension (columns of `Q` and `K`).
pub const HEAD_DIM: usize = 64;
/// Threads per block of `attention_tile`: one warp per 16 query rows. The
/// host launches one block of exactly this many.
pub const ATTENTION_THREADS: u32 = 32 * (ATTENTION_TILE / 16) as u32;

cuda_kernels_device::kernels! {
    /// `p[i][j] = e^(s[i][j] − m_i) / Σ_j' e^(s[i][j'] − m_i)` with
    /// `s = scale · Σ_d q[i][d]·k[j][d]` (bf16 products exact, summed in
    /// f32 by the tensor cores) and `m_i` row `i`'s maximum; `p` is f32,
    /// 64 × 64 row-major.
    ///
    /// # Safety
    /// `q` and `k` hold `ATTENTION_TILE · HEAD_DIM` bf16 and `p`
    /// `ATTENTION_TILE²` f32 on the device, `p` overlapping neither; one
    /// block of `(ATTENTION_THREADS, 1, 1)` (host-checked).
    #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
    pub fn attention_tile(q: *const bf16, k: *const bf16, p: *mut f32, scale: f32) as ATTENTION_TILE_KERNEL {
        // 8-wide accumulator tiles across the keys.
        const N_TILES: usize = ATTENTION_TILE / 8;
        let lane = thread::thread_idx_x() % 32;
        let row0 = (thread::thread_idx_x() / 32) as usize * 16;
        let mut acc = [[0.0f32; 4]; N_TILES];
        for k0 in (0..HEAD_DIM).step_by(16) {
            // SAFETY: row0 + r < ATTENTION_TILE and k0 + c < HEAD_DIM: in q.
            let a = FragA::from_fn(lane, |r, c| unsafe {
                *q.add((row0 + r as usize) * HEAD_DIM + k0 + c as usize)
            });
            for (nt, acc) in acc.iter_mut().enumerate() {
                // SAFETY: key nt·8 + n < ATTENTION_TILE, k0 + kk < HEAD_DIM: in k.
                let b = FragB::from_fn(lane, |kk, n| unsafe {
                    *k.add((nt * 8 + n as usize) * HEAD_DIM + k0 + kk as usize)
                });
                *acc = mma_m16n8k16(a, b, *acc);
            }
        }
        // Elements 0, 1 of each tile are on the lane's first row, 2, 3 on
        // its second (C_M16N8: the row is g + 8·(e / 2), g = lane / 4).
        let mut max = [f32::NEG_INFINITY; 2];
        for acc in &mut acc {
            for (e, s) in acc.iter_mut().enumerate() {
                *s *= scale;
                max[e / 2] = max[e / 2].max(*s);
            }
        }
        // The four lanes of a group hold the row between them.
        let group_max = |m: f32| {
            let m = m.max(warp::shuffle_xor(m, 1));
            m.max(warp::shuffle_xor(m, 2))
        };
        let max = [group_max(max[0]), group_max(max[1])];
        let mut sum = [0.0f32; 2];
        for acc in &mut acc {
            for (e, s) in acc.iter_mut().enumerate() {
                *s = (*s - max[e / 2]).exp();
                sum[e / 2] += *s;
            }
        }
        let group_sum = |s: f32| {
            let s = s + warp::shuffle_xor(s, 1);
            s + warp::shuffle_xor(s, 2)
        };
        let sum = [group_sum(sum[0]), group_sum(sum[1])];
        for (nt, acc) in acc.iter().enumerate() {
            for (e, s) in acc.iter().enumerate() {
                let (r, c) = C_M16N8.coord(lane, e as u32);
                // SAFETY: row0 + r < ATTENTION_TILE and nt·8 + c <
                // ATTENTION_TILE: in p, which this lane alone writes there.
                unsafe {
                    *p.add((row0 + r as usize) * ATTENTION_TILE + nt * 8 + c as usize) =
                        *s / sum[e / 2];
                }
            }
        }
    }
}
