//! Double every element of a matrix in place on the GPU, one
//! thread per element in a 2-D grid of 32 × 8 blocks; checked against the CPU.
//!
//! `cargo run --example 07_doubles_matrix`
use cuda_kernels::matrices::doubles_matrix_cpu;
use cuda_kernels::ndarray::Array2;
use cuda_kernels::prelude::*;
use cuda_kernels::util::Rng;

fn main() -> Result<(), cuda_kernels::Error> {
    // The seed's 5 × 5 matrix of standard-normal f32.
    let mut rng = Rng::new(3);
    let a = Array2::from_shape_simple_fn((5, 5), || rng.normal() as f32);

    let gpu = cuda_kernels::gpu()?;
    let mut doubled = a.clone();
    gpu.doubles_matrix_in_place(doubled.view_mut())?; // copy in, kernel, copy back
    assert_eq!(doubled, doubles_matrix_cpu(a.view()));
    println!("original matrix\n{a}\ndoubled on the GPU\n{doubled}");

    // Any shape (the kernel bounds-checks the partial blocks at the edges), and
    // views in any layout: here a transposed 1000 × 37 view, doubled into a new
    // matrix.
    let tall = Array2::from_shape_simple_fn((37, 1000), || rng.normal() as f32);
    let twice = gpu.doubles_matrix(tall.t())?;
    assert_eq!(twice, doubles_matrix_cpu(tall.t()));
    println!("a {:?} transposed view: same as the CPU", twice.dim());
    Ok(())
}
