//! What the families' tests share: the one element trait of the tests
//! ([`Elem`]), PTX texts and files for the loading tests, zero-stride views
//! of huge logical sizes, the property-test runner ([`props`]) and the
//! refusal tables ([`cases`]).
pub mod cases;
pub mod props;

use std::fmt::{Debug, Display};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use cuda_kernels::PTX;
use cuda_kernels::ndarray::{ArrayView1, ArrayView2, ArrayViewD, Ix1, Ix2, IxDyn, ShapeBuilder};
use cuda_kernels::reduce::Element;
use libtest_mimic::Failed;
use proptest::prelude::*;

use props::{Draw, f32_no_nan, f64_no_nan};

// ---------------------------------------------------------------------------
// The element types of the tests.

/// An element type of the tests (`i32`, `i64`, `f32`, `f64`): its test
/// values per operation and how results of the GPU and the CPU compare.
pub trait Elem: Element + Display + Debug {
    /// The unit roundoff (floats), or `None` (integers: exact arithmetic).
    const UNIT_ROUNDOFF: Option<f64>;
    /// Values that change a min, a max or a sum if a kernel read them: put
    /// around device slices.
    const LOWEST: Self;
    /// See [`Elem::LOWEST`].
    const HIGHEST: Self;
    /// See [`Elem::LOWEST`].
    const BIG: Self;
    /// A small integer of this type.
    fn of(v: i8) -> Self;
    /// As f64.
    fn to_f64(self) -> f64;
    /// From f64 (`as`: rounded, or truncated and saturated).
    fn from_f64(x: f64) -> Self;
    /// Equality of results computed by the same operations on the GPU and
    /// the CPU: integers equal; floats equal bit for bit, or both NaN (the
    /// GPU and the host write different NaN bit patterns, e.g. for ∞ − ∞).
    fn same(self, other: Self) -> bool;
    /// Sum inputs: integers any value (sums wrap, exactly, in any order);
    /// floats in [-1000, 1000), or with `exact` integers in -8..=8 (every
    /// partial sum of up to 2^20 of them is an integer below 2^24).
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
}

/// The conversions every [`Elem`] has.
macro_rules! conversions {
    ($t:ident) => {
        fn of(v: i8) -> Self {
            v.into()
        }
        fn to_f64(self) -> f64 {
            self as f64
        }
        fn from_f64(x: f64) -> Self {
            x as $t
        }
    };
}

macro_rules! elem_int {
    ($($t:ident),*) => {$(
        impl Elem for $t {
            const UNIT_ROUNDOFF: Option<f64> = None;
            const LOWEST: Self = $t::MIN;
            const HIGHEST: Self = $t::MAX;
            const BIG: Self = 0x5555_5555;
            conversions!($t);
            fn same(self, other: Self) -> bool {
                self == other
            }
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
        }
    )*};
}
elem_int!(i32, i64);

macro_rules! elem_float {
    ($($t:ident: $no_nan:ident),*) => {$(
        impl Elem for $t {
            const UNIT_ROUNDOFF: Option<f64> = Some($t::EPSILON as f64 / 2.0);
            const LOWEST: Self = $t::NEG_INFINITY;
            const HIGHEST: Self = $t::INFINITY;
            const BIG: Self = 1e6;
            conversions!($t);
            fn same(self, other: Self) -> bool {
                self.to_bits() == other.to_bits() || (self.is_nan() && other.is_nan())
            }
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
        }
    )*};
}
elem_float!(f32: f32_no_nan, f64: f64_no_nan);

/// `Err` naming the first index where `got` (the GPU's) and `want` (the
/// CPU's) differ ([`Elem::same`]) or their lengths do.
pub fn first_unlike<'a, T: Elem + 'a>(
    got: impl IntoIterator<Item = &'a T>,
    want: impl IntoIterator<Item = &'a T>,
) -> Result<(), String> {
    first_unlike_as(["GPU", "CPU"], got, want)
}

/// [`first_unlike`] with the names of the two sides.
pub fn first_unlike_as<'a, T: Elem + 'a>(
    names: [&str; 2],
    got: impl IntoIterator<Item = &'a T>,
    want: impl IntoIterator<Item = &'a T>,
) -> Result<(), String> {
    let (got, want): (Vec<T>, Vec<T>) = (
        got.into_iter().copied().collect(),
        want.into_iter().copied().collect(),
    );
    if got.len() != want.len() {
        return Err(format!("lengths differ: {} and {}", got.len(), want.len()));
    }
    match (0..got.len()).find(|&i| !got[i].same(want[i])) {
        None => Ok(()),
        Some(i) => Err(format!(
            "element {i} differs: {} {:?}, {} {:?}",
            names[0], got[i], names[1], want[i]
        )),
    }
}

// ---------------------------------------------------------------------------
// PTX texts and files.

/// Valid PTX with one kernel, none of this crate's.
pub const PTX_WITHOUT_KERNEL: &str = ".version 6.0\n.target sm_70\n.address_size 64\n\n.visible .entry something_else()\n{\n\tret;\n}\n";
/// A valid header and a body that is not PTX.
pub const PTX_GARBAGE: &str =
    ".version 6.0\n.target sm_70\n.address_size 64\n\nthis is not ptx at all {";

/// Runs this test binary again with `var=1` set, on the backend of `gpu`
/// (`CUDA_KERNELS_SIM=1` set for the simulator, removed for the GPU), and
/// returns what it did: for tests that need a process of their own (device
/// printf on stdout, a fault that ruins the context). `main` dispatches on
/// the variable before any trial starts; the child opens its `Gpu` with
/// `cuda_kernels::gpu()`.
pub fn rerun_self(gpu: &cuda_kernels::Gpu, var: &str) -> Result<std::process::Output, Failed> {
    let exe = std::env::current_exe().map_err(|e| Failed::from(e.to_string()))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.env(var, "1");
    if crate::common::simulated(gpu) {
        cmd.env(crate::common::SIM, "1");
    } else {
        cmd.env_remove(crate::common::SIM);
    }
    cmd.output()
        .map_err(|e| Failed::from(format!("re-running the test binary: {e}")))
}

/// Re-runs this test binary with `var` set (see [`rerun_self`]) and checks
/// that the child succeeded and printed each of `needles`.
pub fn rerun_self_printing(
    gpu: &cuda_kernels::Gpu,
    var: &str,
    needles: &[&str],
) -> Result<(), Failed> {
    let out = rerun_self(gpu, var)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    crate::common::ensure(out.status.success(), || {
        format!("child: {stdout} {}", String::from_utf8_lossy(&out.stderr))
    })?;
    for needle in needles {
        crate::common::ensure(stdout.contains(needle), || {
            format!("{needle:?} not in {stdout:?}")
        })?;
    }
    Ok(())
}

/// The crate's PTX cut right after the opening brace of the first kernel
/// body: the braces do not balance, whatever the PTX holds.
pub fn truncated_ptx() -> String {
    let entry = PTX.find(".visible .entry").unwrap_or(0);
    let brace = PTX[entry..].find('{').map_or(PTX.len(), |i| entry + i + 1);
    PTX[..brace].to_string()
}

/// The body of entry point `name` in the crate's PTX (up to its closing
/// brace).
pub fn ptx_entry(name: &str) -> Result<&'static str, Failed> {
    let start = PTX
        .find(&format!(".entry {name}("))
        .ok_or_else(|| format!("{name} not in the PTX"))?;
    let rest = &PTX[start..];
    let end = rest.find("\n}").ok_or("unterminated entry")?;
    Ok(&rest[..end])
}

/// A file in the temporary folder, removed on drop.
pub struct TempFile(pub PathBuf);

impl TempFile {
    /// Writes `bytes` to a file named after this process, a counter (tests
    /// run in parallel threads) and `name`.
    pub fn new(name: &str, bytes: &[u8]) -> Result<Self, String> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "cuda-kernels-test-{}-{k}-{name}",
            std::process::id()
        ));
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self(path))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A path that does not exist.
pub fn missing_path() -> PathBuf {
    std::env::temp_dir().join(format!(
        "cuda-kernels-test-{}-no-such-file.ptx",
        std::process::id()
    ))
}

// ---------------------------------------------------------------------------
// Zero-stride views: any logical size over one element of memory.

/// A 1-D view of `n` copies of `one[0]`.
pub fn huge1<T>(one: &[T], n: usize) -> ArrayView1<'_, T> {
    ArrayView1::from_shape(Ix1(n).strides(Ix1(0)), one).expect("a zero-stride 1-D view")
}

/// A `rows × cols` view of copies of `one[0]`.
pub fn huge2<T>(one: &[T], rows: usize, cols: usize) -> ArrayView2<'_, T> {
    ArrayView2::from_shape(Ix2(rows, cols).strides(Ix2(0, 0)), one).expect("a zero-stride 2-D view")
}

/// An n-D view of `shape` copies of `one[0]`.
pub fn huged<'a, T>(one: &'a [T], shape: &[usize]) -> ArrayViewD<'a, T> {
    let zeros = vec![0; shape.len()];
    ArrayViewD::from_shape(IxDyn(shape).strides(IxDyn(&zeros)), one)
        .expect("a zero-stride n-D view")
}
