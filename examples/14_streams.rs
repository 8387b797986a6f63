//! `mult_ker`, a deliberately slow one-block kernel
//! that returns its input except for values of magnitude ≥ 2^127 (they
//! become ±∞: the inputs hold some in every array), run over a batch of arrays first on the
//! default stream (copy, kernel, copy, one after the other), then with one
//! stream per array, where copies overlap kernels and the kernels of
//! different streams run side by side.
//!
//! At most `CUDA_DEVICE_MAX_CONNECTIONS` kernels (default 8, at most 32)
//! run at once: try `CUDA_DEVICE_MAX_CONNECTIONS=32 cargo run --release
//! --example 14_streams`.
//!
//! `cargo run --release --example 14_streams`
use cuda_kernels::ndarray::Array1;
use cuda_kernels::prelude::*;
use cuda_kernels::streams::{
    SEED_BLOCK, SEED_GRID, SerialBatch, StreamBatch, hardware_queues, mult_ker_cpu, randn_arrays,
};

fn main() -> Result<(), cuda_kernels::Error> {
    let gpu = cuda_kernels::gpu()?;

    // One array, mult_ker<<<1, 64>>> (the large values become ±∞).
    let data: Array1<f32> = randn_arrays(1, 1 << 16, 12).remove(0).into();
    let out = gpu.mult_ker(data.view(), SEED_GRID, SEED_BLOCK)?;
    assert_eq!(out, mult_ker_cpu(data.view()));

    // A batch: the seed runs 200 arrays of 2^20; 32 of 2^18 show the same.
    let inputs = randn_arrays(32, 1 << 18, 13);
    let serial = SerialBatch::new(&gpu, &inputs)?.run()?;
    let streamed = StreamBatch::new(&gpu, &inputs)?.run()?;
    // Each run checks every output against mult_ker's result on its input.
    assert_eq!(serial.first_mismatch, None);
    assert_eq!(streamed.first_mismatch, None);

    println!("default stream:    {:7.1} ms", serial.wall_ms);
    println!(
        "{} streams:        {:7.1} ms ({:.1}× faster; {} hardware queues)",
        inputs.len(),
        streamed.wall_ms,
        serial.wall_ms / streamed.wall_ms,
        hardware_queues()
    );
    Ok(())
}
