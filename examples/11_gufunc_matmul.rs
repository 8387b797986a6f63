//! Numba's `@guvectorize` with signature
//! `(m,n),(n,p)->(m,p)`): a batched int64 matrix product with NumPy's
//! broadcasting of the leading (batch) axes; broadcast inputs are not copied.
//!
//! `cargo run --example 11_gufunc_matmul`
use cuda_kernels::matrices::gufunc_matmul_i64_cpu;
use cuda_kernels::ndarray::{ArrayD, IxDyn};
use cuda_kernels::prelude::*;
use cuda_kernels::util::Rng;

fn main() -> Result<(), cuda_kernels::Error> {
    let mut rng = Rng::new(12);
    let mut randint =
        |shape: &[usize]| ArrayD::from_shape_simple_fn(IxDyn(shape), || rng.below(10) as i64);

    let gpu = cuda_kernels::gpu()?;

    // The seed: two 10 × 10 matrices of randint(10).
    let (a, b) = (randint(&[10, 10]), randint(&[10, 10]));
    let c = gpu.gufunc_matmul_i64(a.view(), b.view())?;
    assert_eq!(c, gufunc_matmul_i64_cpu(a.view(), b.view())?);
    println!("C = A·B\n{c}");

    // A batch of 3 matrices times one matrix: B is broadcast over the batch.
    let (a, b) = (randint(&[3, 4, 5]), randint(&[5, 2]));
    let c = gpu.gufunc_matmul_i64(a.view(), b.view())?;
    assert_eq!(c.shape(), &[3, 4, 2]);
    assert_eq!(c, gufunc_matmul_i64_cpu(a.view(), b.view())?);

    // Both sides broadcast: (2, 1, 4, 5) · (6, 5, 3) -> (2, 6, 4, 3).
    let (a, b) = (randint(&[2, 1, 4, 5]), randint(&[6, 5, 3]));
    let c = gpu.gufunc_matmul_i64(a.view(), b.view())?;
    assert_eq!(c.shape(), &[2, 6, 4, 3]);
    assert_eq!(c, gufunc_matmul_i64_cpu(a.view(), b.view())?);
    println!(
        "(2, 1, 4, 5) · (6, 5, 3) -> {:?}: same as the CPU",
        c.shape()
    );

    // Shapes that do not broadcast are refused before anything is launched.
    match gpu.gufunc_matmul_i64(randint(&[2, 4, 5]).view(), randint(&[3, 5, 3]).view()) {
        Err(e @ cuda_kernels::Error::InvalidInput { .. }) => {
            println!("refused, as it should be: {e}")
        }
        other => panic!("(2, 4, 5) · (3, 5, 3) should be refused, got {other:?}"),
    }
    Ok(())
}
