//! The device-math check: every function of `cuda_kernels_gpu::device::math`
//! (f32 and f64) run on the GPU over at least 10^6 arguments, edge values
//! included, and its worst error measured in ulps against a CPU reference,
//! next to the bound CUDA documents for it
//! ([`MATH_FUNCTIONS`]).
//!
//! # Arguments
//! For each function: the edge values (±0, ±∞, NaN, the smallest and
//! largest subnormals, the smallest normal, the largest finite value, ±1,
//! halves for the rounding functions, huge arguments such as 10^30 and the
//! largest finite value for the trigonometric functions, the overflow and
//! underflow thresholds of `exp`; for two-argument functions every pair of
//! them), then [`RANDOM_ARGUMENTS`] random ones: a third uniform over all bit
//! patterns (every exponent, subnormals and NaNs included), a third uniform
//! over the function's main domain, a third log-uniform in magnitude
//! (2^−40 … 2^40, either sign).
//!
//! # Reference and error
//! The reference is the `libm` crate (a pure-Rust port of musl's libm, so
//! the same numbers on every host), evaluated in f64:
//! - **f32**: the f64 value rounded to f32 is the correctly rounded result
//!   (libm's f64 error, under an f64 ulp, is 2^−29 of an f32 ulp: it can
//!   only matter for a value that close to a rounding boundary). The error is
//!   what CUDA's tables state: ulps between the GPU's result and the
//!   correctly rounded one. Allowed: exactly the documented bound.
//! - **f64**: libm's f64 result is not correctly rounded, and musl states no
//!   bounds; re-evaluated with 100-digit arithmetic (mpmath) at the worst
//!   cases of the H100 run, it was up to 2 ulps off (`tanh` at
//!   −0.2283048414290122, `erfc` at 23.007472542292124), and `rsqrt` is
//!   `1 / sqrt`, two roundings. The error is measured against it, and the
//!   allowed error is the documented bound + 2, the reference's own error.
//!   (A wrong kernel is off by far more; the published table gives, next to
//!   each measured value, the GPU's true error at that argument.)
//!
//! NaN against NaN is no error; NaN against a number is an unbounded one.
//! +0 and −0 count as equal. Infinity is the value after the largest finite
//! one (so `exp` returning ∞ where the rounded result is the largest finite
//! value is 1 ulp).
use std::fmt::Debug;

use cust::memory::bytemuck::Zeroable;

use cuda_kernels_gpu::math_checks::{MATH_CHECK_BLOCK, MATH_F32_TEST, MATH_F64_TEST};
pub use cuda_kernels_gpu::math_checks::{MATH_FUNCTIONS, MathFn, MathFnInfo};

use crate::Gpu;
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::launch::LaunchConfig;
use crate::launch::grid_1d_capped;
use crate::util::Rng;

/// Random arguments per function, on top of the edge values.
pub const RANDOM_ARGUMENTS: usize = 1 << 20;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// `f32` or `f64`: the types `device::math` has functions for (sealed: its
/// `KERNEL` is the kernel that the launch trusts).
pub trait MathFloat: sealed::Sealed + Zeroable + crate::reduce::Element {
    /// The check kernel for this type.
    const KERNEL: Kernel<(*const Self, *const Self, *mut Self, usize, u32)>;
    /// Ulps the check allows beyond CUDA's documented bound: the reference's
    /// own error (module docs).
    const REFERENCE_SLACK: u32;
    /// CUDA's documented maximum error of `info`'s function for this type.
    fn documented_ulp(info: &MathFnInfo) -> u32;
    /// The reference result of `function(x, y)` (module docs).
    fn reference(function: MathFn, x: Self, y: Self) -> Self;
    /// Ulps between `a` and `b` (0 for two NaNs, `u64::MAX` for a NaN and a
    /// number).
    fn ulps(a: Self, b: Self) -> u64;
    /// The value as an f64 (for reports).
    fn to_f64(self) -> f64;
    /// The value nearest `v`.
    fn from_f64(v: f64) -> Self;
    /// A value with these bits (the low 32 for f32).
    fn from_random_bits(bits: u64) -> Self;
    /// The edge values of this type (module docs).
    fn edges() -> Vec<Self>;
}

/// Ulps between two values given as "ordered" integers (the sign-magnitude
/// bit pattern made monotonic), NaNs aside.
fn ordered_distance(a: i64, b: i64, a_nan: bool, b_nan: bool) -> u64 {
    match (a_nan, b_nan) {
        (true, true) => 0,
        (false, false) => a.abs_diff(b),
        _ => u64::MAX,
    }
}

/// Edge values shared by both types (each type adds its own limits).
const COMMON_EDGES: &[f64] = &[
    0.0,
    1.0,
    0.5,
    1.5,
    2.0,
    2.5,
    3.0,
    10.0,
    0.1,
    std::f64::consts::PI,
    std::f64::consts::FRAC_PI_2,
    std::f64::consts::FRAC_PI_4,
    1e-10,
    1e-30,
    1e10,
    1e20,
    1e30,
    88.72,
    89.0,
    103.97,
    149.0,
    709.78,
    745.2,
    1e300,
];

/// Sign-symmetric edge list: each value, its negation, ±∞ and NaN.
fn with_signs<T: MathFloat>(values: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for v in values {
        out.push(v);
        out.push(T::from_f64(-v.to_f64()));
    }
    out.extend([
        T::from_f64(f64::INFINITY),
        T::from_f64(f64::NEG_INFINITY),
        T::from_f64(f64::NAN),
    ]);
    out
}

impl MathFloat for f32 {
    const KERNEL: Kernel<(*const f32, *const f32, *mut f32, usize, u32)> = MATH_F32_TEST;
    const REFERENCE_SLACK: u32 = 0;
    fn documented_ulp(info: &MathFnInfo) -> u32 {
        info.max_ulp_f32
    }
    fn reference(function: MathFn, x: f32, y: f32) -> f32 {
        reference_f64(function, x as f64, y as f64) as f32
    }
    fn ulps(a: f32, b: f32) -> u64 {
        let ordered = |v: f32| {
            let bits = v.to_bits();
            let magnitude = (bits & 0x7fff_ffff) as i64;
            if bits >> 31 == 1 {
                -magnitude
            } else {
                magnitude
            }
        };
        ordered_distance(ordered(a), ordered(b), a.is_nan(), b.is_nan())
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn from_random_bits(bits: u64) -> f32 {
        f32::from_bits(bits as u32)
    }
    fn edges() -> Vec<f32> {
        let limits = [
            f32::from_bits(1),
            f32::from_bits(0x007f_ffff),
            f32::MIN_POSITIVE,
            f32::MAX,
            f32::EPSILON,
            1.0 + f32::EPSILON,
            1.0 - f32::EPSILON / 2.0,
            0.5 - f32::EPSILON / 4.0,
            8_388_607.5,
        ];
        let common = COMMON_EDGES.iter().map(|&v| v as f32);
        with_signs(common.chain(limits).filter(|v| v.is_finite()))
    }
}

impl MathFloat for f64 {
    const KERNEL: Kernel<(*const f64, *const f64, *mut f64, usize, u32)> = MATH_F64_TEST;
    const REFERENCE_SLACK: u32 = 2;
    fn documented_ulp(info: &MathFnInfo) -> u32 {
        info.max_ulp_f64
    }
    fn reference(function: MathFn, x: f64, y: f64) -> f64 {
        reference_f64(function, x, y)
    }
    fn ulps(a: f64, b: f64) -> u64 {
        let ordered = |v: f64| {
            let bits = v.to_bits();
            let magnitude = (bits & 0x7fff_ffff_ffff_ffff) as i64;
            if bits >> 63 == 1 {
                -magnitude
            } else {
                magnitude
            }
        };
        ordered_distance(ordered(a), ordered(b), a.is_nan(), b.is_nan())
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn from_random_bits(bits: u64) -> f64 {
        f64::from_bits(bits)
    }
    fn edges() -> Vec<f64> {
        let limits = [
            f64::from_bits(1),
            f64::from_bits(0x000f_ffff_ffff_ffff),
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::EPSILON,
            1.0 + f64::EPSILON,
            1.0 - f64::EPSILON / 2.0,
            0.5 - f64::EPSILON / 4.0,
            4_503_599_627_370_495.5,
            1e22,
            1e308,
        ];
        with_signs(COMMON_EDGES.iter().copied().chain(limits))
    }
}

/// The f64 reference of every function (`libm` crate). For `atan2` the
/// first argument is `y`.
pub fn reference_f64(function: MathFn, x: f64, y: f64) -> f64 {
    use MathFn::*;
    match function {
        Sqrt => libm::sqrt(x),
        Rsqrt => 1.0 / libm::sqrt(x),
        Cbrt => libm::cbrt(x),
        Exp => libm::exp(x),
        Exp2 => libm::exp2(x),
        Expm1 => libm::expm1(x),
        Log => libm::log(x),
        Log2 => libm::log2(x),
        Log10 => libm::log10(x),
        Log1p => libm::log1p(x),
        Sin | SincosSin => libm::sin(x),
        Cos | SincosCos => libm::cos(x),
        Tan => libm::tan(x),
        Asin => libm::asin(x),
        Acos => libm::acos(x),
        Atan => libm::atan(x),
        Atan2 => libm::atan2(x, y),
        Sinh => libm::sinh(x),
        Cosh => libm::cosh(x),
        Tanh => libm::tanh(x),
        Erf => libm::erf(x),
        Erfc => libm::erfc(x),
        Pow => libm::pow(x, y),
        Hypot => libm::hypot(x, y),
        Floor => libm::floor(x),
        Ceil => libm::ceil(x),
        Round => libm::round(x),
        Trunc => libm::trunc(x),
        Fabs => libm::fabs(x),
        Fmin => libm::fmin(x, y),
        Fmax => libm::fmax(x, y),
        Fmod => libm::fmod(x, y),
    }
}

/// The main domain of a function, `[lo, hi]`, for a third of the random
/// first arguments (`x`), and for the second ones (`y`) of two-argument
/// functions.
fn domain(function: MathFn) -> ((f64, f64), (f64, f64)) {
    use MathFn::*;
    let x = match function {
        Sqrt | Rsqrt => (0.0, 100.0),
        Cbrt => (-1000.0, 1000.0),
        Exp | Sinh | Cosh => (-100.0, 100.0),
        Exp2 => (-160.0, 140.0),
        Expm1 | Log1p | Asin | Acos => (-1.0, 1.0),
        Log | Log2 | Log10 => (0.0, 10.0),
        Sin | Cos | Tan | SincosSin | SincosCos => (-100.0, 100.0),
        Atan | Tanh | Atan2 | Floor | Ceil | Round | Trunc | Fabs | Fmin | Fmax => (-10.0, 10.0),
        Erf => (-5.0, 5.0),
        Erfc => (-5.0, 30.0),
        Pow => (0.0, 10.0),
        Hypot | Fmod => (-1000.0, 1000.0),
    };
    let y = match function {
        Pow => (-40.0, 40.0),
        _ => (-10.0, 10.0),
    };
    (x, y)
}

/// One random argument of the mix in the module docs.
fn random_argument<T: MathFloat>(rng: &mut Rng, k: usize, (lo, hi): (f64, f64)) -> T {
    match k % 3 {
        0 => T::from_random_bits(rng.next_u64()),
        1 => T::from_f64(lo + (hi - lo) * rng.uniform()),
        _ => {
            let magnitude = (2.0f64).powf(-40.0 + 80.0 * rng.uniform());
            T::from_f64(if rng.below(2) == 0 {
                magnitude
            } else {
                -magnitude
            })
        }
    }
}

/// The arguments the check uses for `function` (module docs): `(x, y)`,
/// `y` all zero for one-argument functions. Reproducible from `seed`.
pub fn math_arguments<T: MathFloat>(function: MathFn, seed: u64) -> (Vec<T>, Vec<T>) {
    let edges = T::edges();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    if function.info().arity == 2 {
        for &a in &edges {
            for &b in &edges {
                x.push(a);
                y.push(b);
            }
        }
    } else {
        x.extend_from_slice(&edges);
        y.resize(edges.len(), T::default());
    }
    let (x_domain, y_domain) = domain(function);
    let mut rng = Rng::new(seed ^ (function as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    for k in 0..RANDOM_ARGUMENTS {
        x.push(random_argument(&mut rng, k, x_domain));
        y.push(if function.info().arity == 2 {
            random_argument(&mut rng, k / 3, y_domain)
        } else {
            T::default()
        });
    }
    (x, y)
}

/// What the check measured for one function and type.
#[derive(Debug, Clone, PartialEq)]
pub struct MathAccuracy {
    /// The function.
    pub function: MathFn,
    /// `"f32"` or `"f64"`.
    pub ty: &'static str,
    /// CUDA's documented maximum error, in ulps.
    pub documented_ulp: u32,
    /// What the check allows: the documented bound plus the reference's own
    /// error (0 for f32, 2 for f64).
    pub allowed_ulp: u32,
    /// The largest error seen (`u64::MAX`: a NaN where a number was due, or
    /// the reverse).
    pub worst_ulp: u64,
    /// Where: `(x, y, GPU result, reference)`, as f64 (`None` when every
    /// result was exact).
    pub worst_case: Option<[f64; 4]>,
    /// How many arguments were checked.
    pub arguments: usize,
}

impl MathAccuracy {
    /// Whether the worst error is within [`MathAccuracy::allowed_ulp`].
    pub fn within_bound(&self) -> bool {
        self.worst_ulp <= self.allowed_ulp as u64
    }

    /// The function's name (`"sin"`).
    pub fn name(&self) -> &'static str {
        self.function.info().name
    }
}

/// Measures `got` (the GPU's `function(x, y)`) against the reference, over
/// all host threads.
pub fn measure<T: MathFloat>(function: MathFn, x: &[T], y: &[T], got: &[T]) -> MathAccuracy {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = x.len().div_ceil(threads).max(1);
    let worst = std::thread::scope(|s| {
        let handles: Vec<_> = x
            .chunks(chunk)
            .zip(y.chunks(chunk))
            .zip(got.chunks(chunk))
            .map(|((xs, ys), gs)| {
                s.spawn(move || {
                    let mut worst: Option<(u64, [f64; 4])> = None;
                    for ((&a, &b), &g) in xs.iter().zip(ys).zip(gs) {
                        let r = T::reference(function, a, b);
                        let u = T::ulps(g, r);
                        if u > 0 && worst.is_none_or(|(w, _)| u > w) {
                            worst = Some((u, [a.to_f64(), b.to_f64(), g.to_f64(), r.to_f64()]));
                        }
                    }
                    worst
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().ok().flatten())
            .max_by_key(|(u, _)| *u)
    });
    let info = function.info();
    let documented = T::documented_ulp(info);
    MathAccuracy {
        function,
        ty: T::NAME,
        documented_ulp: documented,
        allowed_ulp: documented + T::REFERENCE_SLACK,
        worst_ulp: worst.map_or(0, |(u, _)| u),
        worst_case: worst.map(|(_, case)| case),
        arguments: x.len(),
    }
}

/// The device-math checks on a [`Gpu`].
pub trait MathChecks {
    /// `out[i] = function(x[i])`, or `function(x[i], y[i])` for a
    /// two-argument function, computed on the GPU by `device::math` (the
    /// check kernel `math_f32_test` or `math_f64_test`). `y` is ignored by
    /// one-argument functions but must have `x`'s length.
    fn math_eval<T: MathFloat>(&self, function: MathFn, x: &[T], y: &[T]) -> Result<Vec<T>>;

    /// Runs the check (module docs) for `function` in type `T`.
    fn math_accuracy<T: MathFloat>(&self, function: MathFn) -> Result<MathAccuracy>;

    /// The check for every function of [`MATH_FUNCTIONS`], f32 then f64.
    fn math_accuracy_table(&self) -> Result<Vec<MathAccuracy>>;
}

impl MathChecks for Gpu {
    fn math_eval<T: MathFloat>(&self, function: MathFn, x: &[T], y: &[T]) -> Result<Vec<T>> {
        let k = T::KERNEL.name();
        if x.len() != y.len() {
            return Err(Error::invalid(
                k,
                format!("x has {} elements, y has {}", x.len(), y.len()),
            ));
        }
        let n = x.len();
        let grid = grid_1d_capped(k, n, MATH_CHECK_BLOCK)?;
        self.bind()?;
        let stream = self.stream();
        let dx = self.to_device(x)?;
        let dy = self.to_device(y)?;
        let mut dout = self.zeroed::<T>(n)?;
        let index = function as u32;
        // SAFETY: dx, dy and dout hold n elements of T each and are distinct; the
        // kernel is the one for T (MathFloat is sealed); `index` names a function
        // of the table the kernel was built from (MathFn). The buffers live until
        // the synchronization below.
        unsafe {
            let args = (&dx, &dy, &mut dout, n, index);
            self.launch(
                T::KERNEL,
                LaunchConfig::linear(grid, MATH_CHECK_BLOCK),
                stream,
                args,
            )
        }?;
        self.synchronize(k)?;
        let mut out = vec![T::default(); n];
        dout.copy_to(&mut out[..])?;
        Ok(out)
    }

    fn math_accuracy<T: MathFloat>(&self, function: MathFn) -> Result<MathAccuracy> {
        let (x, y) = math_arguments::<T>(function, 1);
        let got = self.math_eval(function, &x, &y)?;
        Ok(measure(function, &x, &y, &got))
    }

    fn math_accuracy_table(&self) -> Result<Vec<MathAccuracy>> {
        let mut rows = Vec::with_capacity(2 * MATH_FUNCTIONS.len());
        for info in MATH_FUNCTIONS {
            rows.push(self.math_accuracy::<f32>(info.function)?);
        }
        for info in MATH_FUNCTIONS {
            rows.push(self.math_accuracy::<f64>(info.function)?);
        }
        Ok(rows)
    }
}

/// The table as Markdown: one row per function, its f32 and f64 documented
/// bounds and measured worst errors (`rows` as from
/// [`Gpu::math_accuracy_table`](crate::math_checks::MathChecks::math_accuracy_table)).
pub fn accuracy_markdown(rows: &[MathAccuracy]) -> String {
    let cell = |ty: &str, function: MathFn| {
        rows.iter()
            .find(|r| r.ty == ty && r.function == function)
            .map_or(("–".to_string(), "–".to_string()), |r| {
                let worst = if r.worst_ulp == u64::MAX {
                    "NaN mismatch".to_string()
                } else {
                    r.worst_ulp.to_string()
                };
                (r.documented_ulp.to_string(), worst)
            })
    };
    let mut out = String::from(
        "| function | f32: CUDA's bound | f32: measured | f64: CUDA's bound | f64: measured (vs libm) |\n\
         |---|---|---|---|---|\n",
    );
    for info in MATH_FUNCTIONS {
        let (b32, m32) = cell("f32", info.function);
        let (b64, m64) = cell("f64", info.function);
        out.push_str(&format!(
            "| `{}` | {b32} | {m32} | {b64} | {m64} |\n",
            info.name
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulps_count_representable_steps() {
        assert_eq!(f32::ulps(1.0, 1.0), 0);
        assert_eq!(f32::ulps(1.0, f32::from_bits(1.0f32.to_bits() + 3)), 3);
        assert_eq!(f32::ulps(0.0, -0.0), 0);
        assert_eq!(f32::ulps(f32::from_bits(1), -f32::from_bits(1)), 2);
        assert_eq!(f32::ulps(f32::MAX, f32::INFINITY), 1);
        assert_eq!(f32::ulps(f32::NAN, f32::NAN), 0);
        assert_eq!(f32::ulps(f32::NAN, 1.0), u64::MAX);
        assert_eq!(f64::ulps(-1.0, -1.0 - f64::EPSILON), 1);
        assert_eq!(
            f64::ulps(f64::NEG_INFINITY, f64::INFINITY),
            2 * 0x7ff0_0000_0000_0000
        );
    }

    #[test]
    fn arguments_cover_edges_and_a_million_values() {
        for info in MATH_FUNCTIONS {
            let (x, y) = math_arguments::<f32>(info.function, 1);
            assert_eq!(x.len(), y.len());
            assert!(x.len() >= 1_000_000, "{}: {}", info.name, x.len());
            for edge in [0.0f32, -0.0, f32::INFINITY, f32::from_bits(1), f32::MAX] {
                assert!(x.iter().any(|v| v.to_bits() == edge.to_bits()), "{edge}");
            }
            assert!(x.iter().any(|v| v.is_nan()));
            assert!(x.iter().any(|&v| v.abs() >= 1e30 && v.is_finite()));
        }
        let (x, _) = math_arguments::<f64>(MathFn::Sin, 1);
        assert!(x.contains(&1e300) && x.contains(&f64::MAX));
    }

    #[test]
    fn the_reference_agrees_with_std_on_easy_values() {
        assert_eq!(f32::reference(MathFn::Sqrt, 2.0, 0.0), 2.0f32.sqrt());
        assert_eq!(f64::reference(MathFn::Atan2, 1.0, -1.0), 1.0f64.atan2(-1.0));
        assert_eq!(f32::reference(MathFn::Round, -2.5, 0.0), -3.0);
        assert_eq!(f64::reference(MathFn::Fmod, 7.5, 2.0), 1.5);
        assert_eq!(f32::reference(MathFn::Rsqrt, 4.0, 0.0), 0.5);
    }

    /// The check catches a result off by one ulp more than allowed, and a
    /// NaN where a number is due (the injected-error test).
    #[test]
    fn measure_catches_an_error_beyond_the_bound() {
        let function = MathFn::Sin;
        let x: Vec<f32> = (0..1000).map(|i| i as f32 * 0.01).collect();
        let y = vec![0.0f32; x.len()];
        let exact: Vec<f32> = x
            .iter()
            .map(|&v| f32::reference(function, v, 0.0))
            .collect();
        let clean = measure(function, &x, &y, &exact);
        assert_eq!((clean.worst_ulp, clean.worst_case), (0, None));
        assert!(clean.within_bound());

        let mut off = exact.clone();
        let bound = function.info().max_ulp_f32;
        off[500] = f32::from_bits(off[500].to_bits() + bound + 1);
        let caught = measure(function, &x, &y, &off);
        assert_eq!(caught.worst_ulp, bound as u64 + 1);
        assert!(!caught.within_bound());
        assert_eq!(caught.worst_case.map(|c| c[0]), Some(x[500] as f64));

        let mut nan = exact;
        nan[7] = f32::NAN;
        assert_eq!(measure(function, &x, &y, &nan).worst_ulp, u64::MAX);
    }

    #[test]
    fn markdown_has_a_row_per_function() {
        let row = MathAccuracy {
            function: MathFn::Erfc,
            ty: "f64",
            documented_ulp: 5,
            allowed_ulp: 7,
            worst_ulp: 3,
            worst_case: None,
            arguments: 1,
        };
        let md = accuracy_markdown(&[row]);
        assert_eq!(md.lines().count(), 2 + MATH_FUNCTIONS.len());
        assert!(md.contains("| `erfc` | – | – | 5 | 3 |"));
    }
}
