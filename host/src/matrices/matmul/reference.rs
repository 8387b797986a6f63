//! The CPU references of `doubles_matrix` and the matrix products, and the
//! check of a product against the f64 reference.
use super::*;

/// CPU reference for `doubles_matrix`: `2 * a`, element by element with the kernel's own
/// per-element function.
pub fn doubles_matrix_cpu(a: ArrayView2<f32>) -> Array2<f32> {
    a.mapv(double_element)
}

/// CPU reference for the matrix products in f32: ndarray's `dot` (what the seed compares
/// with, `numpy.dot`). Errors when the inner dimensions differ.
pub fn matmul_cpu(a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Array2<f32>> {
    if a.ncols() != b.nrows() {
        return Err(Error::invalid(
            "matmul (CPU)",
            format!("inner dimensions differ: {:?} · {:?}", a.dim(), b.dim()),
        ));
    }
    Ok(a.dot(&b))
}

/// CPU reference in f64 (inputs widened exactly), for comparisons at large
/// `k` where two f32 results differ by their own rounding errors.
pub fn matmul_cpu_f64(a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Array2<f64>> {
    if a.ncols() != b.nrows() {
        return Err(Error::invalid(
            "matmul (CPU f64)",
            format!("inner dimensions differ: {:?} · {:?}", a.dim(), b.dim()),
        ));
    }
    Ok(a.mapv(f64::from).dot(&b.mapv(f64::from)))
}

/// `numpy.allclose(got, expected)` with NumPy's default tolerances:
/// `|x − y| ≤ 1e-8 + 1e-5·|y|` for every element. Returns the first
/// offending index, or `None` when all are close (and the shapes agree).
pub fn allclose(got: ArrayView2<f32>, expected: ArrayView2<f32>) -> Option<(usize, usize)> {
    if got.dim() != expected.dim() {
        return Some((usize::MAX, usize::MAX));
    }
    Zip::indexed(&got)
        .and(&expected)
        .fold(None, |first, (i, j), &x, &y| {
            first.or_else(|| {
                let ok = ((x as f64) - (y as f64)).abs() <= 1e-8 + 1e-5 * (y as f64).abs();
                (!ok).then_some((i, j))
            })
        })
}

/// How a GPU product compares with the exact (f64) one.
#[derive(Debug, Clone, Copy)]
pub struct MatmulCheck {
    /// Largest `|gpu − exact|`.
    pub max_abs_error: f64,
    /// Largest error as a fraction of its allowed tolerance (≤ 1 passes).
    pub worst_ratio: f64,
    /// The element where that happens.
    pub worst_at: (usize, usize),
}

impl MatmulCheck {
    /// Whether every element is within tolerance.
    pub fn passed(&self) -> bool {
        self.worst_ratio <= 1.0
    }
}

/// The probability, per check of a whole product, that a correct result
/// fails [`check_matmul`] under the probabilistic model of rounding errors
/// (2⁻⁴⁰, about one in 10¹²).
pub const MATMUL_CHECK_FALSE_ALARM: f64 = 1.0 / (1u64 << 40) as f64;

/// The exact (f64) product of two f32 matrices and the tolerance of each
/// element of an f32 result, computed once to check several results of the
/// same product (a kernel, cuBLAS) with [`MatmulReference::check`].
///
/// The tolerance of element `(i, j)` is Higham and Mary's probabilistic
/// bound for an f32 dot product of length `k` computed in *any* order, with
/// or without fused multiply-adds ("A New Approach to Probabilistic Rounding
/// Error Analysis", SIAM J. Sci. Comput. 41(5), 2019, Thm. 3.1):
///
/// `|ĉᵢⱼ − cᵢⱼ| ≤ γ̃ₖ(λ)·(|A||B|)ᵢⱼ`, `γ̃ₖ(λ) = exp(λ√k·u + k·u²/(1−u)) − 1 ≈ λ√k·u`,
///
/// `u = 2⁻²⁴`, which fails with probability at most `2k·exp(−λ²(1−u)²/2)`
/// per element when rounding errors are independent and mean-zero (what
/// they are on any data but contrived, e.g. long runs of one inexact value).
/// `λ` is chosen so that the chance of a false alarm anywhere in the
/// `m × n` result is [`MATMUL_CHECK_FALSE_ALARM`]: `λ = √(2·ln(2kmn/p))/(1−u)`,
/// about 10 at 4096³. Against the deterministic worst case `k·u·(|A||B|)ᵢⱼ`
/// (the old check) this is `√k/λ` tighter, 6× at k = 4096: the error that
/// rounding actually shows grows like `√k`, a lost k-slab or a lost term
/// does not shrink. Measured on random data (unit tests): correct results
/// in sequential, FMA, pairwise and blocked order stay below 1/4 of the
/// bound (1/14 on positive data in sequential order, the worst), while one 8-wide k-slab dropped from an element at k = 4096 is
/// caught in about 97% of the elements (the old bound: about 80%), one
/// dropped term in about 81% (the old bound: 30%). Plus
/// `k·2⁻¹⁴⁹` for f32 underflow.
#[derive(Debug, Clone)]
pub struct MatmulReference {
    pub(super) exact: Array2<f64>,
    pub(super) tolerance: Array2<f64>,
}

impl MatmulReference {
    /// The exact product `A·B` and each element's tolerance.
    pub fn new(a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Self> {
        if a.ncols() != b.nrows() {
            return Err(Error::invalid(
                "matmul check",
                format!("inner dimensions differ: {:?} · {:?}", a.dim(), b.dim()),
            ));
        }
        let (m, k, n) = (a.nrows(), a.ncols(), b.ncols());
        let wide = |x: &f32| f64::from(*x);
        let (a64, b64) = (a.map(wide), b.map(wide));
        let exact = parallel_dot(a64.view(), b64.view());
        let u = f64::from(f32::EPSILON) / 2.0;
        let kf = k.max(1) as f64;
        let cases = 2.0 * kf * (m.max(1) * n.max(1)) as f64 / MATMUL_CHECK_FALSE_ALARM;
        let lambda = (2.0 * cases.ln()).sqrt() / (1.0 - u);
        let gamma = (lambda * kf.sqrt() * u + kf * u * u / (1.0 - u)).exp_m1();
        let underflow = kf * f64::from(f32::from_bits(1));
        let tolerance = parallel_dot(a64.mapv(f64::abs).view(), b64.mapv(f64::abs).view())
            .mapv(|s| gamma * s + underflow);
        Ok(Self { exact, tolerance })
    }

    /// The exact product.
    pub fn exact(&self) -> &Array2<f64> {
        &self.exact
    }

    /// Compares `got` with the exact product, element by element, within
    /// each element's tolerance (NaN never passes).
    pub fn check(&self, got: ArrayView2<f32>) -> Result<MatmulCheck> {
        if got.dim() != self.exact.dim() {
            return Err(Error::invalid(
                "matmul check",
                format!("result is {:?}, expected {:?}", got.dim(), self.exact.dim()),
            ));
        }
        let mut check = MatmulCheck {
            max_abs_error: 0.0,
            worst_ratio: 0.0,
            worst_at: (0, 0),
        };
        Zip::indexed(&got)
            .and(&self.exact)
            .and(&self.tolerance)
            .for_each(|(i, j), &x, &y, &tol| {
                let err = (f64::from(x) - y).abs();
                let ratio = if err.is_nan() {
                    f64::INFINITY
                } else {
                    err / tol
                };
                check.max_abs_error = check.max_abs_error.max(err);
                if ratio > check.worst_ratio {
                    check.worst_ratio = ratio;
                    check.worst_at = (i, j);
                }
            });
        Ok(check)
    }
}

/// `a · b` in f64 with the rows of `a` split over the CPU's cores (the
/// checks of the bench's 4096³ products would take half a minute each on
/// one core).
fn parallel_dot(a: ArrayView2<f64>, b: ArrayView2<f64>) -> Array2<f64> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let rows = a.nrows().div_ceil(threads).max(64);
    let mut out = Array2::<f64>::zeros((a.nrows(), b.ncols()));
    std::thread::scope(|scope| {
        for (a_rows, mut out_rows) in a
            .axis_chunks_iter(ndarray::Axis(0), rows)
            .zip(out.axis_chunks_iter_mut(ndarray::Axis(0), rows))
        {
            scope.spawn(move || out_rows.assign(&a_rows.dot(&b)));
        }
    });
    out
}

/// Compares an f32 product `got = A·B` with the f64 reference, element by
/// element, within the probabilistic rounding bound of [`MatmulReference`]
/// (`≈ λ√k·2⁻²⁴·(|A||B|)ᵢⱼ`, `λ ≈ 10`, any summation order). To check
/// several results of one product, build the [`MatmulReference`] once.
pub fn check_matmul(
    got: ArrayView2<f32>,
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
) -> Result<MatmulCheck> {
    MatmulReference::new(a, b)?.check(got)
}
