//! A kernel that fails on purpose with `gpu_assert!`: the host's error says
//! which kernel, file, line, block and thread. (The CUDA context is unusable
//! afterwards, as after any trap: this program ends right after.)
//!
//! `cargo run --example 06_device_fault`
use cuda_kernels::prelude::*;

fn main() -> Result<(), cuda_kernels::Error> {
    let gpu = cuda_kernels::gpu()?;
    match gpu.fault_test(1, 7) {
        Err(e) => println!("the kernel failed, as it should:\n  {e}"),
        Ok(()) => println!("unexpected: the kernel did not fail"),
    }
    Ok(())
}
