//! `C = A·B` in f32 with the naive kernel (one thread per
//! element of C, operands from global memory) and the tiled kernel (tiles of
//! A and B in shared memory, an 8 × 8 register micro-tile per thread),
//! checked against ndarray's `dot` as the seed checks against `numpy.dot`;
//! then both timed with CUDA events at 1024³.
//!
//! `cargo run --release --example 08_matmul`
use cuda_kernels::matrices::{MatmulKernel, allclose, check_matmul};
use cuda_kernels::ndarray::Array2;
use cuda_kernels::prelude::*;
use cuda_kernels::util::Rng;

fn main() -> Result<(), cuda_kernels::Error> {
    let mut rng = Rng::new(4);
    let mut randn = |rows, cols| Array2::from_shape_simple_fn((rows, cols), || rng.normal() as f32);
    // Sizes that are not multiples of any tile.
    let (a, b) = (randn(300, 200), randn(200, 500));
    let expected = a.dot(&b);

    let gpu = cuda_kernels::gpu()?;
    let naive = gpu.matrix_mul_naive(a.view(), b.view())?;
    let tiled = gpu.matrix_mul_tiled(a.view(), b.view())?;
    for (name, c) in [("naive", &naive), ("tiled", &tiled)] {
        // The seed's np.allclose, and the check the tests use: allclose widened
        // by the rounding error any f32 dot product of length k may have.
        let close = allclose(c.view(), expected.view()).is_none();
        let check = check_matmul(c.view(), a.view(), b.view())?;
        assert!(check.passed(), "{name}: {check:?}");
        println!(
            "{name}: np.allclose(c_gpu, a.dot(b)) = {close}, max |error| vs f64 = {:.1e}",
            check.max_abs_error
        );
    }

    // Timing: the kernel alone and with the copies, from CUDA events.
    let (a, b) = (randn(1024, 1024), randn(1024, 1024));
    for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
        gpu.matmul_timed(kernel, a.view(), b.view())?; // warm-up
        let (_, t) = gpu.matmul_timed(kernel, a.view(), b.view())?;
        let gflops = 2.0 * 1024f64.powi(3) / (t.kernel_ms as f64 * 1e6);
        println!(
            "{}: 1024³ in {:.3} ms ({gflops:.0} GFLOP/s), {:.3} ms with the copies",
            kernel.entry(),
            t.kernel_ms,
            t.with_transfers_ms
        );
    }
    Ok(())
}
