//! The matrix products on the simulator and their CPU reference.
use super::*;

/// `C = A · B` in f64 from f32 operands.
pub(super) fn matmul_cpu(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let x = a[i * k + p] as f64;
            for j in 0..n {
                c[i * n + j] += x * b[p * n + j] as f64;
            }
        }
    }
    c
}

pub(super) fn assert_close(got: &[f32], want: &[f64], k: usize, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    // Operands in [-1, 1): each product and partial sum is below k in
    // magnitude; f32 rounding of a length-k dot product stays below k·ε·k.
    let tol = 1e-6 * (k * k) as f64 + 1e-5;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= tol,
            "{what}: element {i}: {g} vs {w}"
        );
    }
}

/// Launches the matrix product `kernel` on copies of the `m × k` matrix
/// `a` and the `k × n` matrix `b` with `shape`, into a zeroed C: C and the
/// launch's time in seconds.
pub(super) fn matmul_sim(
    kernel: Kernel<matmul::MatmulParams>,
    shape: LaunchShape,
    a: &[f32],
    b: &[f32],
    (m, k, n): (usize, usize, usize),
) -> (Vec<f32>, f64) {
    let (da, db, dc) = (Buf::from(a), Buf::from(b), Buf::<f32>::zeroed(m * n));
    if kernel == matmul::SGEMM_128_V4.entry || kernel == matmul::SGEMM_64_V4.entry {
        // 16-byte loads: their byte lengths are multiples of 16 and a buffer
        // ends at a page.
        assert!((da.ptr() as usize | db.ptr() as usize).is_multiple_of(16));
    }
    let t = Instant::now();
    // SAFETY: A m×k, B k×n, C m×n (zeroed, for split-k), C apart from both;
    // the callers' shapes satisfy the tiles' conditions.
    unsafe {
        launch(
            kernel,
            shape,
            (
                da.ptr().cast_const(),
                db.ptr().cast_const(),
                dc.ptr(),
                m,
                k,
                n,
            ),
        )
    }
    .unwrap();
    let seconds = t.elapsed().as_secs_f64();
    (dc.to_vec(), seconds)
}

/// The launch of `tile` for an `m × n` C with `splits` k-splits.
pub(super) fn tile_shape(tile: matmul::SgemmTile, m: usize, n: usize, splits: u32) -> LaunchShape {
    let grid = [
        n.div_ceil(tile.bn) as u32,
        m.div_ceil(tile.bm) as u32,
        splits,
    ];
    shape(grid, [tile.threads(), 1, 1], tile.smem_bytes())
}
