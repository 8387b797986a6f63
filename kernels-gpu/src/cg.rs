//! Conjugate gradient on the 2-D Laplacian, in f32, with every scalar of
//! the iteration (`r·r`, `p·Ap`, α, β) kept on the device so that a whole
//! solve is a sequence of launches with no host round trip: what a CUDA
//! graph replays (issue 46, `cuda_kernels::graphs::conjugate_gradient`).
//!
//! The matrix is the 5-point Laplacian of an `m`×`m` grid with zero
//! (Dirichlet) boundary: `(A p)[i, j] = 4 p[i, j] − p[i−1, j] − p[i+1, j] −
//! p[i, j−1] − p[i, j+1]`, the neighbours outside the grid taken as 0;
//! symmetric positive definite, applied without storing it.
//!
//! The dot products are deterministic: each block of [`CG_BLOCK`] threads
//! sums a grid-stride share and reduces it in shared memory in a fixed tree
//! (`cg_dot_partial`), then one block sums the blocks' partials in a fixed
//! order (`cg_dot_final`); with the same grid, the same inputs give the same
//! bits on every run.

/// Threads per block of the dot products (both kernels need exactly this).
pub const CG_BLOCK: usize = 256;

use crate::device::shared::SharedArray;
use crate::device::sync::sync_threads;
use crate::device::thread;
use crate::shared_array;

/// The sum of every thread's `s` in the block, in a fixed tree over `tile`
/// (slot `t` pairs with `t + half`, half = 128, 64, …, 1): the same bits on
/// every run. Every thread of the block calls it; thread 0's result is the
/// sum (the others' are partial).
#[inline(always)]
fn block_tree_sum(tile: &SharedArray<f32, CG_BLOCK>, t: usize, s: f32) -> f32 {
    // SAFETY: t < CG_BLOCK (the block's size), the tile's length.
    unsafe { tile.store(t, s) };
    sync_threads();
    let mut half = CG_BLOCK / 2;
    while half > 0 {
        if t < half {
            // SAFETY: t + half < CG_BLOCK; slots t and t + half were written
            // before the last barrier and only thread t writes t.
            unsafe { tile.store(t, tile.load(t) + tile.load(t + half)) };
        }
        sync_threads();
        half /= 2;
    }
    // SAFETY: slot 0, written before the last barrier.
    unsafe { tile.load(0) }
}

crate::device::kernels! {
    /// `ap = A p` for the 5-point Laplacian of the `m`×`m` grid (zero
    /// boundary), grid-stride over the `m²` points.
    ///
    /// # Safety
    /// `p` and `ap` hold `m²` f32 each (`m²` does not overflow) and do not
    /// overlap.
    pub fn cg_laplacian(p: *const f32, ap: *mut f32, m: usize) as CG_LAPLACIAN {
        for k in thread::grid_stride(m * m) {
            let (i, j) = (k / m, k % m);
            // SAFETY: k < m², and each neighbour read is inside the grid
            // (checked), so below m²; one thread writes ap[k].
            unsafe {
                let mut s = 4.0 * *p.add(k);
                if i > 0 {
                    s -= *p.add(k - m);
                }
                if i + 1 < m {
                    s -= *p.add(k + m);
                }
                if j > 0 {
                    s -= *p.add(k - 1);
                }
                if j + 1 < m {
                    s -= *p.add(k + 1);
                }
                *ap.add(k) = s;
            }
        }
    }

    /// `partial[block] = Σ x[i] y[i]` over the block's grid-stride share
    /// of `i < n`, reduced in shared memory in a fixed tree.
    ///
    /// # Safety
    /// `x` and `y` hold `n` f32; `partial` holds `gridDim.x` f32 and
    /// overlaps neither; blocks of [`CG_BLOCK`] threads.
    pub fn cg_dot_partial(x: *const f32, y: *const f32, partial: *mut f32, n: usize) as CG_DOT_PARTIAL {
        let tile = shared_array!(cg_dot_tile: [f32; CG_BLOCK]);
        let t = thread::thread_idx_x() as usize;
        let mut s = 0.0f32;
        for i in thread::grid_stride(n) {
            // SAFETY: i < n, the length of x and y.
            s += unsafe { *x.add(i) * *y.add(i) };
        }
        let sum = block_tree_sum(&tile, t, s);
        if t == 0 {
            // SAFETY: the block's index is below gridDim.x, partial's length.
            unsafe { *partial.add(thread::block_idx_x() as usize) = sum };
        }
    }

    /// `out[0] = Σ partial[i]` for `i < count`, by one block: thread `t`
    /// sums `t, t + CG_BLOCK, …` in order, then a fixed tree.
    ///
    /// # Safety
    /// `partial` holds `count` f32 and `out` one, not overlapping; one
    /// block of [`CG_BLOCK`] threads.
    pub fn cg_dot_final(partial: *const f32, out: *mut f32, count: usize) as CG_DOT_FINAL {
        let tile = shared_array!(cg_final_tile: [f32; CG_BLOCK]);
        let t = thread::thread_idx_x() as usize;
        let mut s = 0.0f32;
        let mut i = t;
        while i < count {
            // SAFETY: i < count, partial's length.
            s += unsafe { *partial.add(i) };
            i += CG_BLOCK;
        }
        let sum = block_tree_sum(&tile, t, s);
        if t == 0 {
            // SAFETY: out holds one f32.
            unsafe { *out = sum };
        }
    }

    /// With `α = rr[0] / pap[0]`: `x += α p`, `r −= α ap`, grid-stride
    /// over `n`.
    ///
    /// # Safety
    /// `x`, `r`, `p` and `ap` hold `n` f32, `rr` and `pap` one each; `x`
    /// and `r` overlap nothing.
    pub fn cg_update_xr(
        x: *mut f32,
        r: *mut f32,
        p: *const f32,
        ap: *const f32,
        rr: *const f32,
        pap: *const f32,
        n: usize,
    ) as CG_UPDATE_XR {
        // SAFETY: rr and pap hold one f32 each, written by earlier launches.
        let alpha = unsafe { *rr / *pap };
        for i in thread::grid_stride(n) {
            // SAFETY: i < n; one thread per i.
            unsafe {
                *x.add(i) += alpha * *p.add(i);
                *r.add(i) -= alpha * *ap.add(i);
            }
        }
    }

    /// With `β = rr_new[0] / rr_old[0]`: `p = r + β p`, grid-stride over
    /// `n`.
    ///
    /// # Safety
    /// `p` and `r` hold `n` f32, `rr_new` and `rr_old` one each; `p`
    /// overlaps nothing.
    pub fn cg_update_p(
        p: *mut f32,
        r: *const f32,
        rr_new: *const f32,
        rr_old: *const f32,
        n: usize,
    ) as CG_UPDATE_P {
        // SAFETY: one f32 each, written by earlier launches.
        let beta = unsafe { *rr_new / *rr_old };
        for i in thread::grid_stride(n) {
            // SAFETY: i < n; one thread per i.
            unsafe { *p.add(i) = *r.add(i) + beta * *p.add(i) };
        }
    }
}
