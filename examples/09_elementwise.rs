//! PyCUDA's `ElementwiseKernel`: elementwise kernels declared
//! from an expression. The declarations are in `kernels-gpu/src/elementwise.rs`
//! (`sum`: `c = a + b`, `saxpy`: `y = a·x + y`, `lerp`: `out = a + t·(b − a)`);
//! each gets a PTX entry point per element type and a typed launcher on `Gpu`.
//!
//! Declaring your own is one entry in that list, then a rebuild: see the docs
//! of `cuda_kernels::matrices::elementwise` ("Adding your own kernel", `cargo
//! doc --open`) and `docs/adding-a-kernel.md`.
//!
//! `cargo run --example 09_elementwise`
use cuda_kernels::matrices::elementwise_cpu;
use cuda_kernels::matrices::kernels::{lerp, saxpy};
use cuda_kernels::ndarray::Array1;
use cuda_kernels::prelude::*;

fn main() -> Result<(), cuda_kernels::Error> {
    let gpu = cuda_kernels::gpu()?;

    // The seed's `elementwiseSum(a, b, c)` on i32.
    let a: Array1<i32> = (0..100).collect();
    let b: Array1<i32> = (0..100).map(|i| 1000 - 3 * i).collect();
    let mut c = Array1::<i32>::zeros(100);
    gpu.elementwise_sum(a.view(), b.view(), c.view_mut())?;
    assert_eq!(c, &a + &b);
    println!("a + b = {}", c.slice(cuda_kernels::ndarray::s![..8]));

    // saxpy: `y` is an `inout` array, updated in place; 2.0 is the scalar `a`.
    let n = 1 << 20;
    let x: Array1<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.001).collect();
    let mut y: Array1<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let mut y_cpu = y.clone();
    gpu.elementwise_saxpy(x.view(), y.view_mut(), 2.0f32)?;
    // The CPU reference runs the very same per-element function.
    elementwise_cpu::<saxpy, f32>(&[x.view()], &mut [y_cpu.view_mut()], &[2.0])?;
    assert_eq!(y, y_cpu);

    // The generic launcher, for any declared kernel and element type: lerp on f64.
    let (lo, hi) = (Array1::<f64>::zeros(n), Array1::<f64>::from_elem(n, 10.0));
    let t = Array1::linspace(0.0, 1.0, n);
    let mut out = Array1::<f64>::zeros(n);
    gpu.elementwise::<lerp, f64>(
        &[lo.view(), hi.view(), t.view()],
        &mut [out.view_mut()],
        &[],
    )?;
    let mut out_cpu = Array1::<f64>::zeros(n);
    elementwise_cpu::<lerp, f64>(
        &[lo.view(), hi.view(), t.view()],
        &mut [out_cpu.view_mut()],
        &[],
    )?;
    assert_eq!(out, out_cpu);
    println!("saxpy and lerp on 2^20 elements: equal to the CPU, bit for bit");
    Ok(())
}
