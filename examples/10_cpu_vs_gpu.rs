//! CPU versus GPU: every element of `c = a + b`
//! computed `repeats` times, on the CPU and on the GPU, with the GPU timed
//! by CUDA events (the kernel alone, and with the copies).
//!
//! `cargo run --release --example 10_cpu_vs_gpu`
use std::time::Instant;

use cuda_kernels::matrices::vector_sum_repeat_cpu;
use cuda_kernels::ndarray::Array1;
use cuda_kernels::prelude::*;
use cuda_kernels::util::Rng;

fn main() -> Result<(), cuda_kernels::Error> {
    // The seed runs 10,000 elements × 10,000 repeats; fewer repeats keep the
    // CPU side short.
    let (n, repeats) = (10_000, 2_000);
    let mut rng = Rng::new(10);
    let a: Array1<f32> = (0..n).map(|_| rng.uniform() as f32).collect();
    let b: Array1<f32> = (0..n).map(|_| rng.uniform() as f32).collect();

    let gpu = cuda_kernels::gpu()?;
    let t = Instant::now();
    let c_cpu = vector_sum_repeat_cpu(a.view(), b.view(), repeats)?;
    println!("CPU Time: {:.4} s", t.elapsed().as_secs_f64());

    let (c, timing) = gpu.vector_sum_repeat_timed(a.view(), b.view(), repeats)?;
    println!(
        "GPU Kernel evaluation Time: {:.4} s",
        timing.kernel_ms / 1e3
    );
    println!("GPU Time: {:.4} s", timing.with_transfers_ms / 1e3);

    // One f32 addition per element, the same on both sides: equal, not merely close.
    let norm = (&c - &c_cpu).mapv(|d| d * d).sum().sqrt();
    println!("la.norm(cpu_result - gpu_result) = {norm}");
    assert_eq!(c, c_cpu);
    Ok(())
}
