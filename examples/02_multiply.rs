//! `c[i] = a[i] * b[i]` on the GPU, checked against the CPU,
//! with device buffers and with unified (managed) memory.
//!
//! `cargo run --release --example 02_multiply`
use cuda_kernels::multiply::{MemoryMode, multiply_cpu};
use cuda_kernels::ndarray::Array1;
use cuda_kernels::prelude::*;

fn main() -> Result<(), cuda_kernels::Error> {
    let n = 1 << 20;
    // The seed's inputs: rand() % 10.
    let a: Array1<f32> = (0..n).map(|i| (i * 7 % 10) as f32).collect();
    let b: Array1<f32> = (0..n).map(|i| (i * 3 % 10) as f32).collect();

    let gpu = cuda_kernels::gpu()?; // device 0, embedded PTX loaded
    let c = gpu.multiply(a.view(), b.view())?;
    assert_eq!(c, multiply_cpu(a.view(), b.view())?);

    let (c2, t) = gpu.multiply_timed(a.view(), b.view(), MemoryMode::Unified)?;
    assert_eq!(c2, c);
    println!(
        "c[..5] = {}; unified-memory kernel {:.3} ms",
        c.slice(cuda_kernels::ndarray::s![..5]),
        t.kernel_ms
    );
    Ok(())
}
