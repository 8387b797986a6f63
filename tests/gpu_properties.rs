//! Property tests: GPU and CPU agree on random shapes and values, for every
//! kernel family (proptest's runner driven by hand, so that each property is
//! one GPU trial, ignored with the reason where there is no GPU).
//!
//! Shapes and parameters are proptest strategies and shrink as usual. The
//! values of large inputs are drawn from proptest element strategies with the
//! case's own RNG ([`Draw`], inside `prop_perturb`): when the shape shrinks
//! they are drawn again from the same RNG (values are not shrunk one by one,
//! which would take a GPU launch per element), and failure reports show them
//! abridged. Each run uses a fresh seed, printed on failure;
//! `PROPTEST_RNG_SEED=<seed>` replays it.
mod common;

use std::collections::hash_map::RandomState;
use std::fmt::{self, Debug, Display};
use std::hash::{BuildHasher, Hasher};
use std::process::ExitCode;

use common::{cpu_test, fail, gpu_test, under_sanitizer};
use cuda_kernels::Gpu;
use cuda_kernels::cust::memory::DeviceBuffer;
use cuda_kernels::life::{LifeSims, life_step_cpu};
use cuda_kernels::mandelbrot::{
    first_difference as graph_difference, linspace_f32, mandelbrot_cpu,
};
use cuda_kernels::matrices::kernels::{lerp, saxpy, sum};
use cuda_kernels::matrices::{
    Elementwise, ElementwiseElement, MatmulKernel, check_matmul, doubles_matrix_cpu,
    elementwise_cpu, gufunc_matmul_i64_cpu, matmul_cpu,
};
use cuda_kernels::multiply::{multiply_cpu, vector_sum_i32_cpu};
use cuda_kernels::ndarray::{
    Array1, Array2, Array3, ArrayD, ArrayView1, ArrayViewMut1, Axis, IxDyn,
};
use cuda_kernels::reduce::{
    Element, Max, Min, Product, ReduceKernel, Sum, Xor, accurate_sum, float_sum_tolerance,
    reduce_cpu,
};
use cuda_kernels::streams::mult_ker_cpu;
use libtest_mimic::Failed;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRng, TestRunner};

/// One trial per (operation, type): `reduce_<op>_<type>_agrees_with_cpu`.
macro_rules! reduce_trials {
    ($($op:ident $name:literal: $($t:ident),+;)*) => {
        vec![$($(
            gpu_test(
                concat!("reduce_", $name, "_", stringify!($t), "_agrees_with_cpu"),
                reduce_agrees::<$op, $t>,
            ),
        )+)*]
    };
}

fn main() -> ExitCode {
    let mut trials = vec![
        gpu_test("multiply_agrees_with_cpu", multiply_agrees_with_cpu),
        gpu_test(
            "vector_sum_i32_agrees_with_cpu",
            vector_sum_i32_agrees_with_cpu,
        ),
        gpu_test(
            "doubles_matrix_agrees_with_cpu",
            doubles_matrix_agrees_with_cpu,
        ),
        gpu_test("matmul_naive_agrees_with_cpu", |gpu| {
            matmul_agrees_with_cpu(gpu, MatmulKernel::Naive)
        }),
        gpu_test("matmul_tiled_agrees_with_cpu", |gpu| {
            matmul_agrees_with_cpu(gpu, MatmulKernel::Tiled)
        }),
        gpu_test(
            "elementwise_sum_agrees_with_cpu",
            elementwise_sum_agrees_with_cpu,
        ),
        gpu_test(
            "elementwise_saxpy_agrees_with_cpu",
            elementwise_saxpy_agrees_with_cpu,
        ),
        gpu_test(
            "elementwise_lerp_agrees_with_cpu",
            elementwise_lerp_agrees_with_cpu,
        ),
        gpu_test(
            "gufunc_matmul_i64_agrees_with_cpu",
            gufunc_matmul_i64_agrees_with_cpu,
        ),
        cpu_test("gufunc_references_agree", gufunc_references_agree),
    ];
    trials.extend(reduce_trials!(
        Sum "sum": i32, i64, f32, f64;
        Product "product": i32, i64, f32, f64;
        Min "min": i32, i64, f32, f64;
        Max "max": i32, i64, f32, f64;
        Xor "xor": i32, i64;
    ));
    trials.extend([
        gpu_test("mandelbrot_agrees_with_cpu", mandelbrot_agrees_with_cpu),
        gpu_test("mult_ker_agrees_with_cpu", mult_ker_agrees_with_cpu),
        gpu_test("life_agrees_with_cpu", life_agrees_with_cpu),
    ]);
    common::run(trials)
}

// ---------------------------------------------------------------------------
// The runner and its helpers.

/// Runs `cases` random cases of a property; a counterexample fails the trial
/// with proptest's shrunk input and the seed that replays the run.
///
/// The seed is `PROPTEST_RNG_SEED` when set, a fresh random one otherwise.
/// Shrinking stops after 512 steps or 20 s (every step launches kernels); no
/// failure persistence files. Under compute-sanitizer (scripts/sanitize.sh,
/// which gives each test binary 240 s) an eighth of the cases run.
fn check<S: Strategy>(
    cases: u32,
    strategy: S,
    property: impl Fn(S::Value) -> Result<(), TestCaseError>,
) -> Result<(), Failed> {
    let cases = if under_sanitizer() {
        cases.div_ceil(8)
    } else {
        cases
    };
    let mut config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 512,
        max_shrink_time: 20_000,
        ..Config::default()
    };
    let seed = match config.rng_seed {
        RngSeed::Fixed(seed) => seed,
        RngSeed::Random => RandomState::new().build_hasher().finish(),
    };
    config.rng_seed = RngSeed::Fixed(seed);
    let mut runner = TestRunner::new(config);
    runner
        .run(&strategy, property)
        .map_err(|e| fail(format!("{e}\n(replay with PROPTEST_RNG_SEED={seed})")))
}

fn gpu_err(e: cuda_kernels::Error) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

/// Draws values from proptest strategies with one case's RNG (the `TestRng`
/// that `prop_perturb` hands over): the same RNG state gives the same values,
/// so a case replays.
struct Draw(TestRunner);

impl Draw {
    fn new(rng: TestRng) -> Self {
        Self(TestRunner::new_with_rng(Config::default(), rng))
    }

    /// One value of `s` (its first, unshrunk value).
    fn one<S: Strategy>(&mut self, s: &S) -> S::Value {
        s.new_tree(&mut self.0)
            .expect("the element strategies here never reject")
            .current()
    }

    /// `n` values of `s`.
    fn vec<S: Strategy>(&mut self, s: &S, n: usize) -> Vec<S::Value> {
        (0..n).map(|_| self.one(s)).collect()
    }
}

/// Lengths of 1-D inputs in `min..=max`: a third of the cases at most 64
/// (vector, warp and tail edges), a third at most 4096, a third anywhere.
fn length(min: usize, max: usize) -> impl Strategy<Value = usize> + Clone {
    prop_oneof![min..=max.min(64), min..=max.min(4096), min..=max]
}

/// A slice abridged for failure reports: all of it up to 16 values, else the
/// first and last few and the length.
fn brief<T: Debug>(xs: &[T]) -> String {
    if xs.len() <= 16 {
        format!("{xs:?}")
    } else {
        let n = xs.len();
        format!(
            "[{:?}, {:?}, {:?}, {:?}, …, {:?}, {:?}] ({n} values)",
            xs[0],
            xs[1],
            xs[2],
            xs[3],
            xs[n - 2],
            xs[n - 1]
        )
    }
}

/// Equality of results computed by the same operations on the GPU and the
/// CPU: integers equal; floats equal bit for bit, or both NaN (the GPU and
/// the host write different NaN bit patterns, e.g. for ∞ − ∞).
trait Same: Copy + Debug {
    fn same(self, other: Self) -> bool;
}

impl Same for i32 {
    fn same(self, other: Self) -> bool {
        self == other
    }
}

impl Same for i64 {
    fn same(self, other: Self) -> bool {
        self == other
    }
}

impl Same for f32 {
    fn same(self, other: Self) -> bool {
        self.to_bits() == other.to_bits() || (self.is_nan() && other.is_nan())
    }
}

impl Same for f64 {
    fn same(self, other: Self) -> bool {
        self.to_bits() == other.to_bits() || (self.is_nan() && other.is_nan())
    }
}

/// `Err` naming the first index where `got` and `want` differ (or their
/// lengths do).
fn all_same<'a, T: Same + 'a>(
    what: &str,
    got: impl IntoIterator<Item = &'a T>,
    want: impl IntoIterator<Item = &'a T>,
) -> Result<(), TestCaseError> {
    let (got, want): (Vec<T>, Vec<T>) = (
        got.into_iter().copied().collect(),
        want.into_iter().copied().collect(),
    );
    prop_assert_eq!(got.len(), want.len(), "{}: lengths differ", what);
    if let Some(i) = (0..got.len()).find(|&i| !got[i].same(want[i])) {
        return Err(TestCaseError::fail(format!(
            "{what}: element {i} differs: GPU {:?}, CPU {:?}",
            got[i], want[i]
        )));
    }
    Ok(())
}

/// Any f32 but NaN, either sign: 40 % of the values uniform in
/// [-1000, 1000), 40 % with a uniform random exponent field 0..=254 and
/// mantissa (every magnitude from subnormal to the largest finite), 10 %
/// zeros, 10 % infinities. (Cut from one random u64: `prop_oneof!`, tuples
/// and proptest's float classes take microseconds per value in a debug
/// build, too slow for 10^5 values.)
fn f32_no_nan() -> impl Strategy<Value = f32> + Clone {
    any::<u64>().prop_map(|r| {
        let negative = (r >> 8) & 1 == 1;
        let exp = ((r >> 9) % 255) as u32;
        let mantissa = ((r >> 17) & 0x7f_ffff) as u32;
        let sign = if negative { -1.0 } else { 1.0 };
        match r % 10 {
            0..=3 => (r >> 40) as f32 / (1u64 << 24) as f32 * 2000.0 - 1000.0,
            4..=7 => f32::from_bits(((negative as u32) << 31) | (exp << 23) | mantissa),
            8 => sign * 0.0,
            _ => sign * f32::INFINITY,
        }
    })
}

/// Any f64 but NaN, drawn as [`f32_no_nan`] draws f32 (exponent field
/// 0..=2046), from two random u64.
fn f64_no_nan() -> impl Strategy<Value = f64> + Clone {
    any::<(u64, u64)>().prop_map(|(r, bits)| {
        let negative = (r >> 8) & 1 == 1;
        let exp = (r >> 9) % 2047;
        let mantissa = bits & ((1 << 52) - 1);
        let sign = if negative { -1.0 } else { 1.0 };
        match r % 10 {
            0..=3 => (bits >> 11) as f64 / (1u64 << 53) as f64 * 2000.0 - 1000.0,
            4..=7 => f64::from_bits(((negative as u64) << 63) | (exp << 52) | mantissa),
            8 => sign * 0.0,
            _ => sign * f64::INFINITY,
        }
    })
}

// ---------------------------------------------------------------------------
// Foundation: multiply (K1) and vector_sum_i32.

/// Two equally long arrays.
struct Pair<T> {
    a: Vec<T>,
    b: Vec<T>,
}

impl<T: Debug> Debug for Pair<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a = {}, b = {}", brief(&self.a), brief(&self.b))
    }
}

fn pairs<S: Strategy + 'static>(
    len: impl Strategy<Value = usize>,
    elem: S,
) -> impl Strategy<Value = Pair<S::Value>> {
    len.prop_perturb(move |n, rng| {
        let mut d = Draw::new(rng);
        Pair {
            a: d.vec(&elem, n),
            b: d.vec(&elem, n),
        }
    })
}

/// Random length 1..5000, values in [-1000, 1000): `multiply` equals
/// `multiply_cpu` exactly (64 cases).
fn multiply_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(64, pairs(1..5000usize, -1e3f32..1e3), |p| {
        let (a, b) = (Array1::from(p.a), Array1::from(p.b));
        let c = gpu.multiply(a.view(), b.view()).map_err(gpu_err)?;
        let want = multiply_cpu(a.view(), b.view()).map_err(gpu_err)?;
        all_same("multiply", &c, &want)
    })
}

/// Random length 1..5000, any i32 (sums wrap): `vector_sum_i32` equals its
/// CPU reference exactly (64 cases).
fn vector_sum_i32_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(64, pairs(1..5000usize, any::<i32>()), |p| {
        let (a, b) = (Array1::from(p.a), Array1::from(p.b));
        let r = gpu.vector_sum_i32(a.view(), b.view()).map_err(gpu_err)?;
        let want = vector_sum_i32_cpu(a.view(), b.view()).map_err(gpu_err)?;
        all_same("vector_sum_i32", &r, &want)
    })
}

// ---------------------------------------------------------------------------
// Matrices: doubles_matrix (K3), matmul (K4, K5), elementwise (K7), gufunc (K9).

fn matrix(rows: usize, cols: usize, values: Vec<f32>) -> Array2<f32> {
    Array2::from_shape_vec((rows, cols), values).expect("rows × cols values")
}

struct DoublesCase {
    a: Array2<f32>,
    /// Double in place through a transposed (column-major) view.
    transposed: bool,
}

impl Debug for DoublesCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} matrix, in place transposed: {}, values {}",
            self.a.dim(),
            self.transposed,
            brief(self.a.as_slice().unwrap_or(&[]))
        )
    }
}

fn doubles_cases() -> impl Strategy<Value = DoublesCase> {
    let shapes = (1..=300usize, 1..=300usize, any::<bool>());
    shapes.prop_perturb(|(rows, cols, transposed), rng| DoublesCase {
        a: matrix(rows, cols, Draw::new(rng).vec(&f32_no_nan(), rows * cols)),
        transposed,
    })
}

/// Random rows × cols in 1..=300, any f32 but NaN: `doubles_matrix` (copy)
/// and `doubles_matrix_in_place` (through a standard or a transposed view)
/// equal `doubles_matrix_cpu` bit for bit (32 cases).
fn doubles_matrix_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(32, doubles_cases(), |c| {
        let want = doubles_matrix_cpu(c.a.view());
        let got = gpu.doubles_matrix(c.a.view()).map_err(gpu_err)?;
        all_same("doubles_matrix (copy)", &got, &want)?;
        if c.transposed {
            // A column-major copy of A, doubled through its (row-major) transpose.
            let mut t = c.a.t().as_standard_layout().into_owned();
            gpu.doubles_matrix_in_place(t.view_mut().reversed_axes())
                .map_err(gpu_err)?;
            all_same("doubles_matrix (in place, transposed)", t.t(), &want)
        } else {
            let mut a = c.a.clone();
            gpu.doubles_matrix_in_place(a.view_mut()).map_err(gpu_err)?;
            all_same("doubles_matrix (in place)", &a, &want)
        }
    })
}

struct MatmulCase {
    a: Array2<f32>,
    b: Array2<f32>,
    /// Small integers (exact products) rather than floats in [-1, 1).
    integers: bool,
    /// Pass A (B) as the transposed view of a column-major copy.
    a_transposed: bool,
    b_transposed: bool,
}

impl Debug for MatmulCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "A {:?}{} · B {:?}{}, {}, A = {}, B = {}",
            self.a.dim(),
            if self.a_transposed { " (view)" } else { "" },
            self.b.dim(),
            if self.b_transposed { " (view)" } else { "" },
            if self.integers {
                "integers in -8..=8"
            } else {
                "floats in [-1, 1)"
            },
            brief(self.a.as_slice().unwrap_or(&[])),
            brief(self.b.as_slice().unwrap_or(&[]))
        )
    }
}

fn matmul_cases() -> impl Strategy<Value = MatmulCase> {
    let params = (
        1..=200usize,
        1..=200usize,
        1..=200usize,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    );
    params.prop_perturb(|(m, k, n, integers, a_t, b_t), rng| {
        let mut d = Draw::new(rng);
        let values: BoxedStrategy<f32> = if integers {
            (-8i8..=8).prop_map(f32::from).boxed()
        } else {
            (-1.0f32..1.0).boxed()
        };
        MatmulCase {
            a: matrix(m, k, d.vec(&values, m * k)),
            b: matrix(k, n, d.vec(&values, k * n)),
            integers,
            a_transposed: a_t,
            b_transposed: b_t,
        }
    })
}

/// Random m, k, n in 1..=200; values either integers in -8..=8 (every sum is
/// an integer below 2^24, so exact in any order) or floats in [-1, 1); each
/// operand either row-major or a transposed column-major view. Integers: the
/// product equals `matmul_cpu` exactly; floats: within `check_matmul`'s
/// tolerance (the one gpu_matrices uses: NumPy's allclose plus k·2⁻²⁴·|A||B|)
/// (32 cases per kernel).
fn matmul_agrees_with_cpu(gpu: &Gpu, kernel: MatmulKernel) -> Result<(), Failed> {
    check(32, matmul_cases(), |c| {
        let a_col = c.a.t().as_standard_layout().into_owned();
        let b_col = c.b.t().as_standard_layout().into_owned();
        let a = if c.a_transposed {
            a_col.t()
        } else {
            c.a.view()
        };
        let b = if c.b_transposed {
            b_col.t()
        } else {
            c.b.view()
        };
        let (got, _) = gpu.matmul_timed(kernel, a, b).map_err(gpu_err)?;
        if c.integers {
            let want = matmul_cpu(c.a.view(), c.b.view()).map_err(gpu_err)?;
            all_same(&format!("{kernel:?} (integers)"), &got, &want)
        } else {
            let chk = check_matmul(got.view(), c.a.view(), c.b.view()).map_err(gpu_err)?;
            prop_assert!(chk.passed(), "{:?} (floats): {:?}", kernel, chk);
            Ok(())
        }
    })
}

/// Runs elementwise kernel `K` on the GPU and with `elementwise_cpu` on the
/// same inputs, `outputs` holding the initial `out` and `inout` arrays, and
/// compares every output.
fn elementwise_same<K: Elementwise<T>, T: ElementwiseElement + Same>(
    gpu: &Gpu,
    inputs: &[&[T]],
    outputs: &[&[T]],
    scalars: &[T],
) -> Result<(), TestCaseError> {
    let ins: Vec<ArrayView1<T>> = inputs.iter().map(|a| ArrayView1::from(*a)).collect();
    let mut got: Vec<Array1<T>> = outputs.iter().map(|a| Array1::from(a.to_vec())).collect();
    let mut want = got.clone();
    {
        let mut views: Vec<ArrayViewMut1<T>> = got.iter_mut().map(|a| a.view_mut()).collect();
        gpu.elementwise::<K, T>(&ins, &mut views, scalars)
            .map_err(gpu_err)?;
    }
    {
        let mut views: Vec<ArrayViewMut1<T>> = want.iter_mut().map(|a| a.view_mut()).collect();
        elementwise_cpu::<K, T>(&ins, &mut views, scalars).map_err(gpu_err)?;
    }
    for (j, (g, w)) in got.iter().zip(&want).enumerate() {
        all_same(&format!("{} output {j}", K::ENTRY), g, w)?;
    }
    Ok(())
}

/// Arrays of one length for each element type, and scalars.
struct Arrays {
    i32s: Vec<Vec<i32>>,
    i64s: Vec<Vec<i64>>,
    f32s: Vec<Vec<f32>>,
    f64s: Vec<Vec<f64>>,
    scalar32: f32,
    scalar64: f64,
}

impl Debug for Arrays {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |xs: Vec<String>| xs.join(", ");
        write!(
            f,
            "length {}; i32 [{}]; i64 [{}]; f32 [{}]; f64 [{}]; scalars {:?}, {:?}",
            self.f32s.first().map_or(0, Vec::len),
            show(self.i32s.iter().map(|a| brief(a)).collect()),
            show(self.i64s.iter().map(|a| brief(a)).collect()),
            show(self.f32s.iter().map(|a| brief(a)).collect()),
            show(self.f64s.iter().map(|a| brief(a)).collect()),
            self.scalar32,
            self.scalar64
        )
    }
}

/// `count` arrays of each type (integers: half the range, so that sums do
/// not overflow; floats: anything but NaN), of one random length in
/// 1..=100 000.
fn arrays(count: usize, with_ints: bool) -> impl Strategy<Value = Arrays> {
    length(1, 100_000).prop_perturb(move |n, rng| {
        let mut d = Draw::new(rng);
        let ints = if with_ints { count } else { 0 };
        let i32s = (0..ints)
            .map(|_| d.vec(&(i32::MIN / 2..=i32::MAX / 2), n))
            .collect();
        let i64s = (0..ints)
            .map(|_| d.vec(&(i64::MIN / 2..=i64::MAX / 2), n))
            .collect();
        let f32s = (0..count).map(|_| d.vec(&f32_no_nan(), n)).collect();
        let f64s = (0..count).map(|_| d.vec(&f64_no_nan(), n)).collect();
        Arrays {
            i32s,
            i64s,
            f32s,
            f64s,
            scalar32: d.one(&f32_no_nan()),
            scalar64: d.one(&f64_no_nan()),
        }
    })
}

/// Random length 1..=100 000; i32/i64 in half their range, f32/f64 anything
/// but NaN: `elementwise_sum_<T>` equals `elementwise_cpu::<sum, T>` for all
/// four types, bit for bit (NaN = NaN) (32 cases).
fn elementwise_sum_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(32, arrays(2, true), |a| {
        let n = a.f32s[0].len();
        elementwise_same::<sum, i32>(gpu, &[&a.i32s[0], &a.i32s[1]], &[&vec![0; n]], &[])?;
        elementwise_same::<sum, i64>(gpu, &[&a.i64s[0], &a.i64s[1]], &[&vec![0; n]], &[])?;
        elementwise_same::<sum, f32>(gpu, &[&a.f32s[0], &a.f32s[1]], &[&vec![0.0; n]], &[])?;
        elementwise_same::<sum, f64>(gpu, &[&a.f64s[0], &a.f64s[1]], &[&vec![0.0; n]], &[])
    })
}

/// Random length 1..=100 000, x, y and a anything but NaN: saxpy (y in
/// place) equals `elementwise_cpu::<saxpy, T>` for f32 and f64, bit for bit
/// (NaN = NaN) (32 cases).
fn elementwise_saxpy_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(32, arrays(2, false), |a| {
        elementwise_same::<saxpy, f32>(gpu, &[&a.f32s[0]], &[&a.f32s[1]], &[a.scalar32])?;
        elementwise_same::<saxpy, f64>(gpu, &[&a.f64s[0]], &[&a.f64s[1]], &[a.scalar64])
    })
}

/// Random length 1..=100 000, a, b and t anything but NaN: lerp equals
/// `elementwise_cpu::<lerp, T>` for f32 and f64, bit for bit (NaN = NaN)
/// (32 cases).
fn elementwise_lerp_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(32, arrays(3, false), |a| {
        let n = a.f32s[0].len();
        let (x, y, z) = (&a.f32s[0], &a.f32s[1], &a.f32s[2]);
        elementwise_same::<lerp, f32>(gpu, &[x, y, z], &[&vec![0.0; n]], &[])?;
        let (x, y, z) = (&a.f64s[0], &a.f64s[1], &a.f64s[2]);
        elementwise_same::<lerp, f64>(gpu, &[x, y, z], &[&vec![0.0; n]], &[])
    })
}

struct GufuncCase {
    a: ArrayD<i64>,
    b: ArrayD<i64>,
}

impl Debug for GufuncCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "A {:?} · B {:?}, A = {}, B = {}",
            self.a.shape(),
            self.b.shape(),
            brief(self.a.as_slice().unwrap_or(&[])),
            brief(self.b.as_slice().unwrap_or(&[]))
        )
    }
}

/// The batch shape of one operand: the last `axes` of the broadcast batch
/// shape `batch`, each kept or set to 1.
fn operand_batch(batch: &[usize], axes: usize, keep: &[bool]) -> Vec<usize> {
    let skip = batch.len() - axes.min(batch.len());
    (skip..batch.len())
        .map(|i| if keep[i] { batch[i] } else { 1 })
        .collect()
}

/// `C = A · B` with NumPy broadcasting, independently of the crate's plan:
/// both operands broadcast by ndarray to the common batch shape, one
/// `ndarray` dot per matrix.
fn gufunc_reference(a: &ArrayD<i64>, b: &ArrayD<i64>) -> ArrayD<i64> {
    let (sa, sb) = (a.shape(), b.shape());
    let (ba, bb) = (&sa[..sa.len() - 2], &sb[..sb.len() - 2]);
    let nd = ba.len().max(bb.len());
    let dim = |s: &[usize], i: usize| (i + s.len()).checked_sub(nd).map_or(1, |j| s[j]);
    let batch: Vec<usize> = (0..nd).map(|i| dim(ba, i).max(dim(bb, i))).collect();
    let count: usize = batch.iter().product();
    let (m, n, p) = (sa[sa.len() - 2], sa[sa.len() - 1], sb[sb.len() - 1]);
    let full = |core: [usize; 2]| -> Vec<usize> { batch.iter().copied().chain(core).collect() };
    let stack = |x: &ArrayD<i64>, rows: usize, cols: usize| {
        x.broadcast(IxDyn(&full([rows, cols])))
            .expect("the batch shapes broadcast")
            .as_standard_layout()
            .into_owned()
            .into_shape_with_order((count, rows, cols))
            .expect("count × rows × cols")
    };
    let (a3, b3) = (stack(a, m, n), stack(b, n, p));
    let mut c = Array3::<i64>::zeros((count, m, p));
    for z in 0..count {
        c.index_axis_mut(Axis(0), z)
            .assign(&a3.index_axis(Axis(0), z).dot(&b3.index_axis(Axis(0), z)));
    }
    c.into_shape_with_order(IxDyn(&full([m, p])))
        .expect("batch × m × p")
}

fn gufunc_cases() -> impl Strategy<Value = GufuncCase> {
    let params = (
        prop::collection::vec(1..=4usize, 0..=3),
        (0..=3usize, 0..=3usize),
        (
            prop::collection::vec(any::<bool>(), 3),
            prop::collection::vec(any::<bool>(), 3),
        ),
        (1..=12usize, 1..=12usize, 1..=12usize),
    );
    params.prop_perturb(
        |(batch, (axes_a, axes_b), (keep_a, keep_b), (m, n, p)), rng| {
            let mut d = Draw::new(rng);
            let mut shape_a = operand_batch(&batch, axes_a, &keep_a);
            let mut shape_b = operand_batch(&batch, axes_b, &keep_b);
            shape_a.extend([m, n]);
            shape_b.extend([n, p]);
            let values = -100i64..=100;
            let mut operand = |shape: Vec<usize>| {
                let len = shape.iter().product();
                ArrayD::from_shape_vec(IxDyn(&shape), d.vec(&values, len)).expect("shape")
            };
            let a = operand(shape_a);
            let b = operand(shape_b);
            GufuncCase { a, b }
        },
    )
}

/// Random batch shapes that broadcast (up to 3 batch axes of 1..=4; each
/// operand has the last 0..=3 of them, each kept or 1), m, n, p in 1..=12,
/// values in -100..=100: `gufunc_matmul_i64` equals `gufunc_matmul_i64_cpu`
/// and an independent ndarray broadcast-and-dot, exactly (48 cases).
fn gufunc_matmul_i64_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(48, gufunc_cases(), |c| {
        let got = gpu
            .gufunc_matmul_i64(c.a.view(), c.b.view())
            .map_err(gpu_err)?;
        let cpu = gufunc_matmul_i64_cpu(c.a.view(), c.b.view()).map_err(gpu_err)?;
        let reference = gufunc_reference(&c.a, &c.b);
        prop_assert_eq!(got.shape(), reference.shape());
        prop_assert_eq!(cpu.shape(), reference.shape());
        all_same("gufunc vs gufunc_matmul_i64_cpu", &got, &cpu)?;
        all_same("gufunc vs broadcast dot", &got, &reference)
    })
}

/// CPU only: on the gufunc property's random cases, its independent
/// broadcast-and-dot reference equals `gufunc_matmul_i64_cpu` (so that a
/// disagreement in the GPU trial points at the GPU, not at the test) (48
/// cases).
fn gufunc_references_agree() -> Result<(), Failed> {
    check(48, gufunc_cases(), |c| {
        let cpu = gufunc_matmul_i64_cpu(c.a.view(), c.b.view()).map_err(gpu_err)?;
        let reference = gufunc_reference(&c.a, &c.b);
        prop_assert_eq!(cpu.shape(), reference.shape());
        all_same("gufunc_matmul_i64_cpu vs broadcast dot", &cpu, &reference)
    })
}

// ---------------------------------------------------------------------------
// Reduce (K10): every operation × type.

/// An element type of the reductions, with the test values of each
/// operation.
trait PropElem: Element + Same + Display {
    /// The unit roundoff (floats), or `None` (integers: exact arithmetic).
    const UNIT_ROUNDOFF: Option<f64>;
    /// Values that change a min, a max or a sum if the kernel read them:
    /// put around the device slice.
    const LOWEST: Self;
    const HIGHEST: Self;
    const BIG: Self;
    /// Sum inputs: integers any value (sums wrap, exactly, in any order);
    /// floats in [-1000, 1000), or with `exact` integers in -8..=8 (every
    /// partial sum of up to 100 000 is an integer below 2^24).
    fn sum_value(exact: bool) -> BoxedStrategy<Self>;
    /// `n` product inputs whose products are exact in any order: integers
    /// any odd value (the wrapping product does not collapse to 0); floats
    /// ±1 with at most 64 of them ±2 or ±0.5.
    fn product_values(d: &mut Draw, n: usize) -> Vec<Self>;
    /// A product's initial value (floats: an integer in -100..=100, exact
    /// times any power of two the data can make).
    fn product_init() -> BoxedStrategy<Self>;
    /// Min, max and xor inputs: any value (floats: anything but NaN).
    fn any_value() -> BoxedStrategy<Self>;
    fn to_f64(self) -> f64;
}

macro_rules! prop_int {
    ($($t:ident),*) => {$(
        impl PropElem for $t {
            const UNIT_ROUNDOFF: Option<f64> = None;
            const LOWEST: Self = $t::MIN;
            const HIGHEST: Self = $t::MAX;
            const BIG: Self = 0x5555_5555;
            fn sum_value(_exact: bool) -> BoxedStrategy<Self> {
                any::<$t>().boxed()
            }
            fn product_values(d: &mut Draw, n: usize) -> Vec<Self> {
                d.vec(&any::<$t>().prop_map(|x| x | 1), n)
            }
            fn product_init() -> BoxedStrategy<Self> {
                any::<$t>().boxed()
            }
            fn any_value() -> BoxedStrategy<Self> {
                any::<$t>().boxed()
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}
prop_int!(i32, i64);

macro_rules! prop_float {
    ($($t:ident: $no_nan:ident),*) => {$(
        impl PropElem for $t {
            const UNIT_ROUNDOFF: Option<f64> = Some($t::EPSILON as f64 / 2.0);
            const LOWEST: Self = $t::NEG_INFINITY;
            const HIGHEST: Self = $t::INFINITY;
            const BIG: Self = 1e6;
            fn sum_value(exact: bool) -> BoxedStrategy<Self> {
                if exact {
                    (-8i8..=8).prop_map($t::from).boxed()
                } else {
                    (-1e3 as $t..1e3 as $t).boxed()
                }
            }
            fn product_values(d: &mut Draw, n: usize) -> Vec<Self> {
                let mut xs: Vec<$t> = d
                    .vec(&any::<bool>(), n)
                    .into_iter()
                    .map(|negative| if negative { -1.0 } else { 1.0 })
                    .collect();
                let others = d.one(&(0..=64usize)).min(n);
                for _ in 0..others {
                    let at = d.one(&(0..n));
                    xs[at] *= if d.one(&any::<bool>()) { 2.0 } else { 0.5 };
                }
                xs
            }
            fn product_init() -> BoxedStrategy<Self> {
                (-100i8..=100).prop_map($t::from).boxed()
            }
            fn any_value() -> BoxedStrategy<Self> {
                $no_nan().boxed()
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}
prop_float!(f32: f32_no_nan, f64: f64_no_nan);

/// A reduction's test inputs and how its results are judged.
trait ReduceProp<T: PropElem>: ReduceKernel<T> {
    /// `n` inputs and a candidate initial value.
    fn draw(d: &mut Draw, n: usize, exact: bool) -> (Vec<T>, T);
    /// What the kernel must not read: the value put around the device slice.
    fn poison() -> T;
    /// Whether the GPU result must equal the CPU reference exactly.
    fn exact(_values_exact: bool) -> bool {
        true
    }
}

impl<T: PropElem> ReduceProp<T> for Sum
where
    Sum: ReduceKernel<T>,
{
    fn draw(d: &mut Draw, n: usize, exact: bool) -> (Vec<T>, T) {
        let s = T::sum_value(exact);
        (d.vec(&s, n), d.one(&s))
    }
    fn poison() -> T {
        T::BIG
    }
    fn exact(values_exact: bool) -> bool {
        values_exact || T::UNIT_ROUNDOFF.is_none()
    }
}

impl<T: PropElem> ReduceProp<T> for Product
where
    Product: ReduceKernel<T>,
{
    fn draw(d: &mut Draw, n: usize, _exact: bool) -> (Vec<T>, T) {
        let xs = T::product_values(d, n);
        (xs, d.one(&T::product_init()))
    }
    fn poison() -> T {
        T::default()
    }
}

impl<T: PropElem> ReduceProp<T> for Min
where
    Min: ReduceKernel<T>,
{
    fn draw(d: &mut Draw, n: usize, _exact: bool) -> (Vec<T>, T) {
        let s = T::any_value();
        (d.vec(&s, n), d.one(&s))
    }
    fn poison() -> T {
        T::LOWEST
    }
}

impl<T: PropElem> ReduceProp<T> for Max
where
    Max: ReduceKernel<T>,
{
    fn draw(d: &mut Draw, n: usize, _exact: bool) -> (Vec<T>, T) {
        let s = T::any_value();
        (d.vec(&s, n), d.one(&s))
    }
    fn poison() -> T {
        T::HIGHEST
    }
}

impl<T: PropElem> ReduceProp<T> for Xor
where
    Xor: ReduceKernel<T>,
{
    fn draw(d: &mut Draw, n: usize, _exact: bool) -> (Vec<T>, T) {
        let s = T::any_value();
        (d.vec(&s, n), d.one(&s))
    }
    fn poison() -> T {
        T::BIG
    }
}

struct ReduceCase<T> {
    data: Vec<T>,
    init: Option<T>,
    /// Where the data starts in the device buffer (elements): 1..=3 start
    /// off the 16-byte boundary.
    offset: usize,
    /// Float sums: small integers (exact) rather than [-1000, 1000).
    exact_values: bool,
}

impl<T: Debug> Debug for ReduceCase<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "n = {}, init = {:?}, device offset = {}, exact values: {}, data = {}",
            self.data.len(),
            self.init,
            self.offset,
            self.exact_values,
            brief(&self.data)
        )
    }
}

fn reduce_cases<Op: ReduceProp<T>, T: PropElem>() -> impl Strategy<Value = ReduceCase<T>> {
    let params = (length(0, 99_999), any::<bool>(), 0..=3usize, any::<bool>());
    params.prop_perturb(|(n, with_init, offset, exact_values), rng| {
        let (data, init) = Op::draw(&mut Draw::new(rng), n, exact_values);
        // Min and max of nothing are undefined: such a case gets its initial value.
        let with_init = with_init || (n == 0 && !Op::DEFINED_ON_EMPTY);
        ReduceCase {
            data,
            init: with_init.then_some(init),
            offset,
            exact_values,
        }
    })
}

/// Random length 0..100 000 (a third ≤ 64, a third ≤ 4096), an initial
/// value or none (always one for min/max of nothing, which is undefined),
/// the data at offset 0..=3 of a device buffer padded with values that
/// would change the result. Each case reduces on the GPU twice, from the
/// host array (`reduce`) and from the device slice (`reduce_device`, which
/// launches even for an empty input), and compares both with `reduce_cpu`:
/// exactly, except float sums of values in [-1000, 1000), which must be
/// within `float_sum_tolerance` (the GPU's tree, one level more for the
/// initial value) of the exact sum, and within that plus the sequential
/// bound of the CPU result (32 cases per operation and type).
fn reduce_agrees<Op: ReduceProp<T>, T: PropElem>(gpu: &Gpu) -> Result<(), Failed> {
    gpu.bind().map_err(fail)?;
    check(32, reduce_cases::<Op, T>(), |c| {
        let n = c.data.len();
        let data = Array1::from(c.data.clone());
        let cpu = reduce_cpu::<Op, T>(data.view(), c.init).map_err(gpu_err)?;
        let host = gpu.reduce::<Op, T>(data.view(), c.init).map_err(gpu_err)?;
        let mut padded = vec![Op::poison(); c.offset];
        padded.extend_from_slice(&c.data);
        padded.extend([Op::poison(); 4]);
        let buf =
            DeviceBuffer::from_slice(&padded).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let slice = buf.index(c.offset..c.offset + n);
        let device = gpu
            .reduce_device::<Op, T>(&slice, c.init)
            .map_err(gpu_err)?;
        if Op::exact(c.exact_values) {
            prop_assert!(
                host == cpu && device == cpu,
                "{}: GPU {} (from the host), {} (from the device), CPU {}",
                Op::ENTRY,
                host,
                device,
                cpu
            );
            return Ok(());
        }
        let u = T::UNIT_ROUNDOFF.expect("inexact results are float sums");
        let init = c.init.map_or(0.0, T::to_f64);
        let exact = accurate_sum(c.data.iter().map(|x| x.to_f64()).chain([init]));
        let sum_abs: f64 = c.data.iter().map(|x| x.to_f64().abs()).sum::<f64>() + init.abs();
        let (grid, block) = gpu.reduce_launch_shape::<Op, T>(n).map_err(gpu_err)?;
        let threads = grid as usize * block as usize;
        // n + threads: one more level for the initial value.
        let tol = float_sum_tolerance(n + threads, threads, sum_abs, u);
        let cpu_tol = float_sum_tolerance(n + 1, 1, sum_abs, u);
        for (what, got) in [("from the host", host), ("from the device", device)] {
            let got = got.to_f64();
            prop_assert!(
                (got - exact).abs() <= tol && (got - cpu.to_f64()).abs() <= tol + cpu_tol,
                "{} {}: GPU {}, exact {}, CPU {}: |GPU − exact| {:.3e} (tol {:.3e})",
                Op::ENTRY,
                what,
                got,
                exact,
                cpu,
                (got - exact).abs(),
                tol
            );
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------
// Mandelbrot (K11).

/// Random breadth 1..=200, max_iters 1..=300, low and high in [-2.5, 2.5)
/// (either order), escape radius in [0.5, 4), block 1..=1024: the graph of
/// `mandelbrot` (the seed's blocks of 32) and of `mandelbrot_timed` (that
/// block) equal `mandelbrot_cpu` bit for bit (32 cases).
fn mandelbrot_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    let params = (
        1..=200usize,
        1..=300i32,
        -2.5f32..2.5,
        -2.5f32..2.5,
        0.5f32..4.0,
        1..=1024u32,
    );
    check(32, params, |(n, iters, low, high, bound, block)| {
        let lattice = linspace_f32(low, high, n);
        let want = mandelbrot_cpu(lattice.view(), iters, bound).map_err(gpu_err)?;
        let got = gpu
            .mandelbrot(lattice.view(), iters, bound)
            .map_err(gpu_err)?;
        if let Some(d) = graph_difference(got.view(), want.view()) {
            return Err(TestCaseError::fail(format!("mandelbrot: {d}")));
        }
        let (got, _) = gpu
            .mandelbrot_timed(lattice.view(), iters, bound, block)
            .map_err(gpu_err)?;
        if let Some(d) = graph_difference(got.view(), want.view()) {
            return Err(TestCaseError::fail(format!("mandelbrot_timed: {d}")));
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------
// Streams (K12 mult_ker) and Life (K15).

struct MultKerCase {
    data: Vec<f32>,
    grid: u32,
    block: u32,
}

impl Debug for MultKerCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "<<<{}, {}>>> over {}",
            self.grid,
            self.block,
            brief(&self.data)
        )
    }
}

/// Any finite f32 below 2^127 in magnitude (so that 2x does not overflow):
/// every sign, exponent field 0..=253 (zeros and subnormals included) and
/// mantissa.
fn f32_below_2_127() -> impl Strategy<Value = f32> {
    (any::<bool>(), 0u32..=253, 0u32..1 << 23).prop_map(|(negative, exp, mantissa)| {
        f32::from_bits(((negative as u32) << 31) | (exp << 23) | mantissa)
    })
}

fn mult_ker_cases() -> impl Strategy<Value = MultKerCase> {
    let params = (length(1, 100_000), 1..=2048u32, 1..=1024u32);
    params.prop_perturb(|(n, grid, block), rng| MultKerCase {
        data: Draw::new(rng).vec(&f32_below_2_127(), n),
        grid,
        block,
    })
}

/// Random length 1..=100 000, grid 1..=2048, block 1..=1024, any finite f32
/// below 2^127 (subnormals included): `mult_ker`'s output equals its input
/// and `mult_ker_cpu` bit for bit (48 cases).
fn mult_ker_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(48, mult_ker_cases(), |c| {
        let data = Array1::from(c.data);
        let got = gpu
            .mult_ker(data.view(), c.grid, c.block)
            .map_err(gpu_err)?;
        all_same("mult_ker vs its input", &got, &data)?;
        all_same("mult_ker vs mult_ker_cpu", &got, &mult_ker_cpu(data.view()))
    })
}

struct LifeCase {
    lattices: Vec<Array2<i32>>,
    densities: Vec<f64>,
    steps: usize,
}

impl Debug for LifeCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.lattices[0].nrows();
        write!(f, "N = {n}, {} steps, ", self.steps)?;
        for (l, p) in self.lattices.iter().zip(&self.densities) {
            let alive = l.iter().filter(|&&v| v == 1).count();
            if n <= 8 {
                write!(
                    f,
                    "[density {p:.3}: {:?}] ",
                    l.outer_iter().collect::<Vec<_>>()
                )?;
            } else {
                write!(f, "[density {p:.3}: {alive} alive] ")?;
            }
        }
        Ok(())
    }
}

fn life_cases() -> impl Strategy<Value = LifeCase> {
    let params = (
        1..=150usize,
        1..=30usize,
        prop::collection::vec(0.0f64..=1.0, 1..=3),
    );
    params.prop_perturb(|(n, steps, densities), rng| {
        let mut d = Draw::new(rng);
        let lattices = densities
            .iter()
            .map(|&p| {
                let cells = d.vec(&prop::bool::weighted(p), n * n);
                Array2::from_shape_fn((n, n), |(r, c)| cells[r * n + c] as i32)
            })
            .collect();
        LifeCase {
            lattices,
            densities,
            steps,
        }
    })
}

/// Random N in 1..=150, 1..=3 simulations on their own streams, each with a
/// random density in [0, 1], 1..=30 steps: after every frame, each
/// simulation's lattice equals the CPU reference's (`life_step_cpu`, step by
/// step) (32 cases).
fn life_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(32, life_cases(), |c| {
        let n = c.lattices[0].nrows();
        let mut sims = LifeSims::new(gpu, &c.lattices).map_err(gpu_err)?;
        let mut cpu = c.lattices.clone();
        for step in 1..=c.steps {
            sims.frame().map_err(gpu_err)?;
            for (k, want) in cpu.iter_mut().enumerate() {
                *want = life_step_cpu(want.view()).map_err(gpu_err)?;
                let got = sims.lattice(k).map_err(gpu_err)?;
                if let Some(((r, col), _)) = got.indexed_iter().find(|&(i, v)| *v != want[i]) {
                    return Err(TestCaseError::fail(format!(
                        "N = {n}, simulation {k}, step {step}: cell ({r}, {col}) is {} on the GPU, {} on the CPU",
                        got[(r, col)],
                        want[(r, col)]
                    )));
                }
            }
        }
        Ok(())
    })
}
