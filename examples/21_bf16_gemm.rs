//! Issue 21: a bf16 GEMM on the tensor cores, `C = alpha · A · Bᵀ + beta · C`
//! with f32 accumulation, from ndarray views (`b.t()` is read as stored: the
//! NT layout, no copy of its layout), checked against the f64 reference and
//! its error bound; the path taken is printed (`mma_sync` on sm_80 and later
//! and on the simulator, `cuda_core` elsewhere; `CUDA_KERNELS_GEMM_PATH`
//! forces one).
//!
//! `cargo run --release --example 21_bf16_gemm`
use cuda_kernels::matrices::{gemm_check, gemm_reference};
use cuda_kernels::ndarray::Array2;
use cuda_kernels::prelude::*;
use cuda_kernels::util::Rng;
use half::bf16;

fn main() -> Result<(), cuda_kernels::Error> {
    let mut rng = Rng::new(21);
    let mut random = |rows, cols| {
        Array2::from_shape_simple_fn((rows, cols), || bf16::from_f32(rng.normal() as f32))
    };
    // Sizes that are not multiples of the 128 × 128 block.
    let (m, n, k) = (300, 200, 264);
    let a = random(m, k);
    let b_stored = random(n, k); // B stored n × k: the product reads b_stored.t()
    let mut c = Array2::from_shape_simple_fn((m, n), || bf16::from_f32(0.5));
    let c0 = c.clone();

    let gpu = cuda_kernels::gpu()?;
    let path = gpu.gemm(2.0, a.view(), b_stored.t(), -1.0, c.view_mut())?;

    let reference = gemm_reference(2.0, a.view(), b_stored.t(), -1.0, c0.view());
    match gemm_check(c.view(), &reference, |v| v.to_f64()) {
        None => println!(
            "{m}×{k}·({n}×{k})ᵀ bf16 → bf16 on the {} path: every element within the f64 bound",
            path.name()
        ),
        Some((i, j, got, exact, bound)) => {
            panic!("C[{i}][{j}] = {got}, exact {exact}, bound {bound}")
        }
    }
    Ok(())
}
