//! "Hello World From GPU!" from three GPU threads, through the
//! device layer's `vprintf`; then each thread's indices with formatted output.
//!
//! `cargo run --example 04_hello`
use cuda_kernels::prelude::*;

fn main() -> Result<(), cuda_kernels::Error> {
    let gpu = cuda_kernels::gpu()?;
    gpu.hello(1, 3, false)?; // <<<1, 3>>>: three lines, printed at the synchronization
    println!("the kernel ran");
    gpu.hello(2, 2, true)?; // "Hello from thread t of block b (global index i)"
    Ok(())
}
