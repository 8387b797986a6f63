//! K9 `gufunc_matmul_i64`: batched int64 matrix product with NumPy
//! generalized-ufunc semantics, `(m,n),(n,p)->(m,p)` (seed 001's Numba
//! `@guvectorize(['void(int64[:,:], int64[:,:], int64[:,:])'],
//! '(m,n),(n,p)->(m,p)')`).
//!
//! `A[..., m, n] · B[..., n, p] → C[..., m, p]`: the last two axes are the
//! core (matrix) dimensions, the leading ones are batch dimensions,
//! broadcast against each other by NumPy's rules (aligned from the right;
//! each pair equal, or one of them 1; missing leading axes count as 1).
//! Broadcast inputs are not copied: the kernel gets, per output matrix, the
//! offset of the A and B matrices it uses.
//!
//! Arithmetic wraps on overflow (two's complement), as NumPy's int64 matmul
//! does in practice and as the GPU's 64-bit multiply-add does; the CPU
//! reference uses the same per-step function
//! ([`cuda_kernels_gpu::matmul::mul_add_i64`]).
use ndarray::{ArrayD, ArrayViewD, IxDyn};

use cuda_kernels_gpu::matmul::{GUFUNC_MATMUL_I64, GUFUNC_THREADS, mul_add_i64};

use crate::Gpu;
use crate::error::{Error, Result};
use crate::launch::LaunchConfig;
use crate::launch::{checked_elements, grid_1d_capped};

const K: &str = GUFUNC_MATMUL_I64.name();

/// The checked plan of one gufunc call: output shape, core sizes, and for
/// each output matrix the element offsets of the A and B matrices it uses
/// (inputs in standard layout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GufuncPlan {
    /// Shape of C: the broadcast batch shape, then `m, p`.
    pub out_shape: Vec<usize>,
    /// Rows of each A matrix.
    pub m: usize,
    /// Columns of A, rows of B.
    pub n: usize,
    /// Columns of each B matrix.
    pub p: usize,
    /// Offset (in elements) of the A matrix of each output matrix.
    pub a_offsets: Vec<usize>,
    /// Offset (in elements) of the B matrix of each output matrix.
    pub b_offsets: Vec<usize>,
}

impl GufuncPlan {
    /// Number of output matrices (the product of the batch shape).
    pub fn batch(&self) -> usize {
        self.a_offsets.len()
    }
}

/// Plans `A (a_shape) · B (b_shape)` with gufunc signature
/// `(m,n),(n,p)->(m,p)`: checks that both have at least 2 axes, that the
/// core dimensions agree (`n`), that no dimension is 0, that the batch
/// shapes broadcast, and that no element count overflows; then computes the
/// per-matrix offsets.
pub fn gufunc_plan(a_shape: &[usize], b_shape: &[usize]) -> Result<GufuncPlan> {
    if a_shape.len() < 2 || b_shape.len() < 2 {
        return Err(Error::invalid(
            K,
            format!(
                "both operands need at least 2 axes (m,n),(n,p); got shapes {a_shape:?} and {b_shape:?}"
            ),
        ));
    }
    let (a_batch, a_core) = a_shape.split_at(a_shape.len() - 2);
    let (b_batch, b_core) = b_shape.split_at(b_shape.len() - 2);
    let (m, n, n2, p) = (a_core[0], a_core[1], b_core[0], b_core[1]);
    if n != n2 {
        return Err(Error::invalid(
            K,
            format!(
                "core dimensions differ: A is (…, {m}, {n}), B is (…, {n2}, {p}) (signature (m,n),(n,p)->(m,p))"
            ),
        ));
    }
    if a_shape.contains(&0) || b_shape.contains(&0) {
        return Err(Error::invalid(
            K,
            format!("empty operand: shapes {a_shape:?} and {b_shape:?}"),
        ));
    }
    // NumPy broadcasting of the batch axes, aligned from the right.
    let nd = a_batch.len().max(b_batch.len());
    let dim = |s: &[usize], i: usize| -> usize {
        // Axis i of the nd-axis broadcast shape, 1 where `s` is shorter.
        (i + s.len()).checked_sub(nd).map_or(1, |j| s[j])
    };
    let mut batch_shape = Vec::with_capacity(nd);
    for i in 0..nd {
        let (x, y) = (dim(a_batch, i), dim(b_batch, i));
        if x != y && x != 1 && y != 1 {
            return Err(Error::invalid(
                K,
                format!(
                    "batch shapes {a_batch:?} and {b_batch:?} cannot be broadcast together (axis {i}: {x} vs {y})"
                ),
            ));
        }
        batch_shape.push(x.max(y));
    }
    let batch = checked_elements(K, &batch_shape)?;
    checked_elements(K, &[batch, m, p, 8])?;
    checked_elements(K, &[batch, 2, 8])?;
    checked_elements(K, &[checked_elements(K, a_shape)?, 8])?;
    checked_elements(K, &[checked_elements(K, b_shape)?, 8])?;
    // Offsets: walk the output batch indices in row-major order, keeping
    // each operand's matrix index (its own batch axes, 0 on broadcast ones).
    let strides = |s: &[usize]| -> Vec<usize> {
        // Matrix-index stride of each of the nd axes (0 where broadcast).
        let mut out = vec![0; nd];
        let mut acc = 1;
        for i in (0..nd).rev() {
            let d = dim(s, i);
            out[i] = if d == 1 { 0 } else { acc };
            acc *= d;
        }
        out
    };
    let (sa, sb) = (strides(a_batch), strides(b_batch));
    let mut index = vec![0usize; nd];
    let mut a_offsets = Vec::with_capacity(batch);
    let mut b_offsets = Vec::with_capacity(batch);
    for _ in 0..batch {
        let ia: usize = index.iter().zip(&sa).map(|(i, s)| i * s).sum();
        let ib: usize = index.iter().zip(&sb).map(|(i, s)| i * s).sum();
        a_offsets.push(ia * m * n);
        b_offsets.push(ib * n * p);
        for ax in (0..nd).rev() {
            index[ax] += 1;
            if index[ax] < batch_shape[ax] {
                break;
            }
            index[ax] = 0;
        }
    }
    let mut out_shape = batch_shape;
    out_shape.extend([m, p]);
    Ok(GufuncPlan {
        out_shape,
        m,
        n,
        p,
        a_offsets,
        b_offsets,
    })
}

/// The generalized-ufunc launchers on a [`Gpu`].
pub trait GufuncExt {
    /// K9: `C[..., m, p] = A[..., m, n] · B[..., n, p]` over int64 with
    /// NumPy gufunc semantics and batch broadcasting (see the
    /// [module documentation](self)); wrapping arithmetic. Views in any
    /// layout are copied to standard layout first.
    ///
    /// Errors (no launch) on fewer than 2 axes, core dimensions that differ,
    /// empty operands, batch shapes that do not broadcast, or sizes that
    /// overflow.
    fn gufunc_matmul_i64(&self, a: ArrayViewD<i64>, b: ArrayViewD<i64>) -> Result<ArrayD<i64>>;
}

impl GufuncExt for Gpu {
    fn gufunc_matmul_i64(&self, a: ArrayViewD<i64>, b: ArrayViewD<i64>) -> Result<ArrayD<i64>> {
        let plan = gufunc_plan(a.shape(), b.shape())?;
        let total = plan.batch() * plan.m * plan.p;
        let grid = grid_1d_capped(K, total, GUFUNC_THREADS)?;
        self.bind()?;
        let stream = self.stream();
        let (a, b) = (a.as_standard_layout(), b.as_standard_layout());
        let (a, b) = match (a.as_slice(), b.as_slice()) {
            (Some(a), Some(b)) => (a, b),
            _ => return Err(Error::invalid(K, "standard layout is not contiguous")),
        };
        let da = self.to_device(a)?;
        let db = self.to_device(b)?;
        let dao = self.to_device(&plan.a_offsets)?;
        let dbo = self.to_device(&plan.b_offsets)?;
        // SAFETY: written in full by the kernel (every output index) before it is read.
        let mut dc = unsafe { self.uninitialized::<i64>(total) }?;
        let (batch, m, n, p) = (plan.batch(), plan.m, plan.n, plan.p);
        // SAFETY: the plan's offsets locate m×n (n×p) matrices inside A (B) in standard
        // layout; dc holds batch·m·p i64 and overlaps nothing; sizes were checked for
        // overflow; the kernel grid-strides, so any grid covers it.
        unsafe {
            let args = (&da, &db, &dao, &dbo, &mut dc, batch, m, n, p);
            self.launch(
                GUFUNC_MATMUL_I64,
                LaunchConfig::linear(grid, GUFUNC_THREADS),
                stream,
                args,
            )
        }?;
        self.synchronize(K)?;
        let mut c = vec![0i64; total];
        dc.copy_to(&mut c[..])?;
        ArrayD::from_shape_vec(IxDyn(&plan.out_shape), c)
            .map_err(|e| Error::invalid(K, e.to_string()))
    }
}

/// CPU reference for K9: the same plan, the same wrapping per-step
/// function, three loops per output matrix (the seed's `matmul` body).
pub fn gufunc_matmul_i64_cpu(a: ArrayViewD<i64>, b: ArrayViewD<i64>) -> Result<ArrayD<i64>> {
    let plan = gufunc_plan(a.shape(), b.shape())?;
    let (a, b) = (a.as_standard_layout(), b.as_standard_layout());
    let (a, b) = match (a.as_slice(), b.as_slice()) {
        (Some(a), Some(b)) => (a, b),
        _ => return Err(Error::invalid(K, "standard layout is not contiguous")),
    };
    let (m, n, p) = (plan.m, plan.n, plan.p);
    let mut c = vec![0i64; plan.batch() * m * p];
    for (z, (ao, bo)) in plan.a_offsets.iter().zip(&plan.b_offsets).enumerate() {
        for i in 0..m {
            for j in 0..p {
                let mut acc = 0i64;
                for q in 0..n {
                    acc = mul_add_i64(acc, a[ao + i * n + q], b[bo + q * p + j]);
                }
                c[z * m * p + i * p + j] = acc;
            }
        }
    }
    ArrayD::from_shape_vec(IxDyn(&plan.out_shape), c).map_err(|e| Error::invalid(K, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array, Array2, Axis};

    #[test]
    fn plans_broadcast_like_numpy() {
        let p = gufunc_plan(&[2, 3, 4], &[4, 5]).unwrap();
        assert_eq!(p.out_shape, vec![2, 3, 5]);
        assert_eq!(p.a_offsets, vec![0, 12]);
        assert_eq!(p.b_offsets, vec![0, 0]);
        let p = gufunc_plan(&[3, 1, 2, 2], &[4, 2, 2]).unwrap();
        assert_eq!(p.out_shape, vec![3, 4, 2, 2]);
        assert_eq!(p.batch(), 12);
        assert_eq!(&p.a_offsets[..5], &[0, 0, 0, 0, 4]);
        assert_eq!(&p.b_offsets[..5], &[0, 4, 8, 12, 0]);
    }

    #[test]
    fn plans_refuse_bad_shapes() {
        assert!(gufunc_plan(&[3], &[3, 3]).is_err());
        assert!(gufunc_plan(&[2, 3], &[4, 5]).is_err());
        assert!(gufunc_plan(&[2, 2, 3], &[3, 3, 5]).is_err());
        assert!(gufunc_plan(&[0, 3], &[3, 5]).is_err());
        assert!(gufunc_plan(&[usize::MAX, 2, 2, 3], &[3, 3, 2]).is_err());
    }

    #[test]
    fn cpu_reference_matches_dot() {
        let a = Array::from_shape_fn((2, 3, 4), |(z, i, j)| (z * 12 + i * 4 + j) as i64 - 7);
        let b = Array::from_shape_fn((4, 5), |(i, j)| (i * 5 + j) as i64 % 7 - 3);
        let c = gufunc_matmul_i64_cpu(a.view().into_dyn(), b.view().into_dyn()).unwrap();
        for z in 0..2 {
            let az: Array2<i64> = a.index_axis(Axis(0), z).to_owned();
            assert_eq!(c.index_axis(Axis(0), z), az.dot(&b).into_dyn());
        }
        // Wrapping, as on the GPU.
        let big = Array::from_elem((1, 2), i64::MAX).into_dyn();
        let two = Array::from_elem((2, 1), 2i64).into_dyn();
        let c = gufunc_matmul_i64_cpu(big.view(), two.view()).unwrap();
        assert_eq!(c[[0, 0]], i64::MAX.wrapping_mul(2).wrapping_mul(2));
    }
}
