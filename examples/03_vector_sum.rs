//! PyOpenCL's `vectorSum`: add two vectors of random integers.
//!
//! `cargo run --example 03_vector_sum`
use cuda_kernels::ndarray::Array1;
use cuda_kernels::prelude::*;
use cuda_kernels::util::Rng;

fn main() -> Result<(), cuda_kernels::Error> {
    let mut rng = Rng::new(1);
    let a: Array1<i32> = (0..100).map(|_| rng.below(100) as i32).collect();
    let b: Array1<i32> = (0..100).map(|_| rng.below(100) as i32).collect();
    let gpu = cuda_kernels::gpu()?;
    let res = gpu.vector_sum_i32(a.view(), b.view())?;
    println!("a = {a}\nb = {b}\na + b = {res}");
    Ok(())
}
