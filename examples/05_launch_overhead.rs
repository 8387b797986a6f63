//! The cgo benchmark, on our side of the fence: what a kernel
//! launch costs, launching an empty kernel synchronously and pipelined.
//!
//! `cargo run --release --example 05_launch_overhead`
use cuda_kernels::prelude::*;

fn main() -> Result<(), cuda_kernels::Error> {
    let gpu = cuda_kernels::gpu()?;
    let rates = gpu.launch_overhead(10_000)?;
    println!(
        "empty_kernel: {:.0} launches/s synchronous ({:.1} µs each), {:.0} launches/s pipelined ({:.1} µs each)",
        rates.synchronous_per_s,
        1e6 / rates.synchronous_per_s,
        rates.pipelined_per_s,
        1e6 / rates.pipelined_per_s
    );
    Ok(())
}
