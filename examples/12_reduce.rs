//! Numba's `@cuda.reduce`: a parallel reduction, generic over
//! the operation (`Sum`, `Product`, `Min`, `Max`, and `Xor`, declared the
//! way a user declares one) and the element type (i32, i64, f32, f64), with
//! an optional initial value like Numba's `init=`.
//!
//! An operation is a type implementing `ReduceOp` (an identity and a
//! `combine`), instantiated with `reduce_kernels!` in `kernels-gpu`, where
//! the PTX is built from: see the docs of `cuda_kernels::kernels::reduce`
//! ("Declaring another operation"). `gpu.reduce::<YourOp, T>` then works
//! with no host code.
//!
//! `cargo run --example 12_reduce`
use cuda_kernels::ndarray::Array1;
use cuda_kernels::prelude::*;
use cuda_kernels::reduce::{Max, Min, Sum, Xor, reduce_cpu};
use cuda_kernels::util::Rng;

fn main() -> Result<(), cuda_kernels::Error> {
    let gpu = cuda_kernels::gpu()?;

    // The seed: the sum of 1..=10000 as i64.
    let a = Array1::from_iter(1..=10_000i64);
    let result = gpu.reduce::<Sum, i64>(a.view(), None)?;
    println!("result = {result}");
    assert_eq!(result, 50_005_000);

    // `init` is combined with the result.
    assert_eq!(gpu.reduce::<Sum, i64>(a.view(), Some(5))?, 50_005_005);
    assert_eq!(gpu.reduce::<Max, i64>(a.view(), Some(20_000))?, 20_000);
    // In f64 every partial sum of these integers is exact, whatever the order.
    let af = a.mapv(|x| x as f64);
    assert_eq!(gpu.reduce::<Sum, f64>(af.view(), None)?, 50_005_000.0);

    // Min and max of a million random f32 are exact: compare with the CPU fold.
    let mut rng = Rng::new(10);
    let x: Array1<f32> = (0..1_000_003).map(|_| rng.normal() as f32).collect();
    let (lo, hi) = (
        gpu.reduce::<Min, f32>(x.view(), None)?,
        gpu.reduce::<Max, f32>(x.view(), None)?,
    );
    assert_eq!(lo, reduce_cpu::<Min, f32>(x.view(), None)?);
    assert_eq!(hi, reduce_cpu::<Max, f32>(x.view(), None)?);
    println!("min = {lo}, max = {hi} over {} values", x.len());

    // The user-declared operation, bitwise xor, on i32.
    let bits: Array1<i32> = (0..100_000).map(|_| rng.below(1 << 30) as i32).collect();
    let xor = gpu.reduce::<Xor, i32>(bits.view(), None)?;
    assert_eq!(xor, bits.iter().fold(0, |acc, b| acc ^ b));
    println!("xor of {} values = {xor:#010x}", bits.len());

    // An empty input: the identity for a sum, an error (no launch) for min.
    let empty = Array1::<i64>::zeros(0);
    assert_eq!(gpu.reduce::<Sum, i64>(empty.view(), None)?, 0);
    assert!(gpu.reduce::<Min, i64>(empty.view(), None).is_err());
    Ok(())
}
