//! The reduction's CPU side: the start value, the sequential reference
//! [`reduce_cpu`] and the compensated sum [`accurate_sum`].
use ndarray::ArrayView1;

use super::{Element, Input, ReduceKernel, fold};
use crate::error::{Error, Result};

/// The value the reduction starts from: `init`, or the identity; an error
/// for an empty input without `init` when the operation has no meaningful
/// empty result (min, max).
pub fn start_value<Op: ReduceKernel<T, T::Acc>, T: Input>(
    n: usize,
    init: Option<T::Acc>,
) -> Result<T::Acc> {
    match init {
        Some(v) => Ok(v),
        None if n == 0 && !Op::DEFINED_ON_EMPTY => Err(Error::invalid(
            Op::ENTRY,
            format!(
                "empty input and no initial value: {} of nothing is undefined (pass an initial value)",
                Op::NAME
            ),
        )),
        None => Ok(Op::identity()),
    }
}

/// CPU reference for [`Gpu::reduce`](crate::reduce::ReduceExt::reduce): a sequential left fold from `init`
/// (or the identity) with the very same `combine` the kernel uses ([`fold`]). Same errors as
/// the GPU: min/max of an empty input without `init` are refused.
///
/// ```
/// use cuda_kernels_host::reduce::{reduce_cpu, Sum, Min};
/// let a = ndarray::Array1::from_iter(1..=10_000i64);
/// assert_eq!(reduce_cpu::<Sum, i64>(a.view(), None).unwrap(), 50_005_000);
/// assert!(reduce_cpu::<Min, i64>(a.slice(ndarray::s![..0]), None).is_err());
/// ```
pub fn reduce_cpu<Op: ReduceKernel<T>, T: Element>(
    input: ArrayView1<T>,
    init: Option<T>,
) -> Result<T> {
    start_value::<Op, T>(input.len(), init)?;
    fold::<T, Op>(input.iter().copied(), init)
        .ok_or_else(|| Error::invalid(Op::ENTRY, "empty input and no initial value"))
}

/// `Σ x` in f64 with Neumaier's compensated summation: accurate to a few
/// units in the last place of f64, far below any f32 or f64 summation-order
/// error, so it serves as the exact reference for float sums in any order.
///
/// ```
/// let xs = [1e16, 1.0, -1e16];
/// assert_eq!(cuda_kernels_host::reduce::accurate_sum(xs.iter().copied()), 1.0);
/// ```
pub fn accurate_sum(xs: impl Iterator<Item = f64>) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    for x in xs {
        let t = s + x;
        c += if s.abs() >= x.abs() {
            (s - t) + x
        } else {
            (x - t) + s
        };
        s = t;
    }
    s + c
}
