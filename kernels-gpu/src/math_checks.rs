//! The device-math check: the table of the functions of `device::math` with
//! the maximum error CUDA documents for each, and one kernel per float type
//! that evaluates any of them over an argument array. The
//! host (`cuda_kernels_host::math_checks`) runs them over at least 10^6
//! arguments per function and measures the worst error against a CPU
//! reference.
use crate::device::thread;
use eval::{eval_f32, eval_f64};

/// Declares the functions once: the [`MathFn`] variants, the
/// [`MATH_FUNCTIONS`] table, and the evaluation the check kernels dispatch
/// to. Per line: variant, name, arity, the documented maximum ulp
/// error `[f32, f64]`, and the `device::math` functions called.
macro_rules! math_functions {
    ($($variant:ident $name:literal $arity:tt [$ulp32:literal, $ulp64:literal] $f32:ident $f64:ident;)*) => {
        /// A function of `device::math`, numbered as the check kernels take it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u32)]
        pub enum MathFn {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
        }

        /// Every function the check covers, in [`MathFn`] order, with the
        /// maximum error CUDA documents for it (CUDA C++ Programming Guide,
        /// appendix "Mathematical Functions", tables of single- and
        /// double-precision standard library functions: compute capability
        /// 5.2 or higher, without `--use_fast_math`, `-prec-sqrt=true`). The
        /// error is in ulps between the correctly rounded result and the one
        /// returned. This is the one copy of that table in the code.
        pub const MATH_FUNCTIONS: &[MathFnInfo] = &[
            $(MathFnInfo {
                function: MathFn::$variant,
                name: $name,
                arity: $arity,
                max_ulp_f32: $ulp32,
                max_ulp_f64: $ulp64,
            },)*
        ];

        mod eval {
            use super::MathFn;
            use crate::device::math::*;

            #[inline(always)]
            fn sincos_sin_f32(x: f32) -> f32 {
                sincos_f32(x).0
            }
            #[inline(always)]
            fn sincos_cos_f32(x: f32) -> f32 {
                sincos_f32(x).1
            }
            #[inline(always)]
            fn sincos_sin_f64(x: f64) -> f64 {
                sincos_f64(x).0
            }
            #[inline(always)]
            fn sincos_cos_f64(x: f64) -> f64 {
                sincos_f64(x).1
            }

            /// `function(x)` or `function(x, y)` in f32.
            #[inline(always)]
            pub fn eval_f32(function: MathFn, x: f32, y: f32) -> f32 {
                match function {
                    $(MathFn::$variant => math_functions!(@call $arity, $f32, x, y),)*
                }
            }

            /// `function(x)` or `function(x, y)` in f64.
            #[inline(always)]
            pub fn eval_f64(function: MathFn, x: f64, y: f64) -> f64 {
                match function {
                    $(MathFn::$variant => math_functions!(@call $arity, $f64, x, y),)*
                }
            }
        }
    };
    (@call 1, $f:ident, $x:ident, $y:ident) => { $f($x) };
    (@call 2, $f:ident, $x:ident, $y:ident) => { $f($x, $y) };
}

math_functions! {
    Sqrt "sqrt" 1 [0, 0] sqrt_f32 sqrt_f64;
    Rsqrt "rsqrt" 1 [2, 1] rsqrt_f32 rsqrt_f64;
    Cbrt "cbrt" 1 [1, 1] cbrt_f32 cbrt_f64;
    Exp "exp" 1 [2, 1] exp_f32 exp_f64;
    Exp2 "exp2" 1 [2, 1] exp2_f32 exp2_f64;
    Expm1 "expm1" 1 [1, 1] expm1_f32 expm1_f64;
    Log "log" 1 [1, 1] log_f32 log_f64;
    Log2 "log2" 1 [1, 1] log2_f32 log2_f64;
    Log10 "log10" 1 [2, 1] log10_f32 log10_f64;
    Log1p "log1p" 1 [1, 1] log1p_f32 log1p_f64;
    Sin "sin" 1 [2, 2] sin_f32 sin_f64;
    Cos "cos" 1 [2, 2] cos_f32 cos_f64;
    Tan "tan" 1 [4, 2] tan_f32 tan_f64;
    SincosSin "sincos.sin" 1 [2, 2] sincos_sin_f32 sincos_sin_f64;
    SincosCos "sincos.cos" 1 [2, 2] sincos_cos_f32 sincos_cos_f64;
    Asin "asin" 1 [2, 2] asin_f32 asin_f64;
    Acos "acos" 1 [2, 2] acos_f32 acos_f64;
    Atan "atan" 1 [2, 2] atan_f32 atan_f64;
    Atan2 "atan2" 2 [3, 2] atan2_f32 atan2_f64;
    Sinh "sinh" 1 [3, 2] sinh_f32 sinh_f64;
    Cosh "cosh" 1 [2, 1] cosh_f32 cosh_f64;
    Tanh "tanh" 1 [2, 1] tanh_f32 tanh_f64;
    Erf "erf" 1 [2, 2] erf_f32 erf_f64;
    Erfc "erfc" 1 [4, 5] erfc_f32 erfc_f64;
    Pow "pow" 2 [4, 2] pow_f32 pow_f64;
    Hypot "hypot" 2 [3, 2] hypot_f32 hypot_f64;
    Floor "floor" 1 [0, 0] floor_f32 floor_f64;
    Ceil "ceil" 1 [0, 0] ceil_f32 ceil_f64;
    Round "round" 1 [0, 0] round_f32 round_f64;
    Trunc "trunc" 1 [0, 0] trunc_f32 trunc_f64;
    Fabs "fabs" 1 [0, 0] fabs_f32 fabs_f64;
    Fmin "fmin" 2 [0, 0] fmin_f32 fmin_f64;
    Fmax "fmax" 2 [0, 0] fmax_f32 fmax_f64;
    Fmod "fmod" 2 [0, 0] fmod_f32 fmod_f64;
}

/// One row of [`MATH_FUNCTIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MathFnInfo {
    /// The function.
    pub function: MathFn,
    /// Its name (`"sin"`; `"sincos.sin"` and `"sincos.cos"` for the two
    /// results of `sincos`).
    pub name: &'static str,
    /// 1 (`f(x)`) or 2 (`f(x, y)`).
    pub arity: u32,
    /// CUDA's documented maximum error of the f32 version, in ulps.
    pub max_ulp_f32: u32,
    /// CUDA's documented maximum error of the f64 version, in ulps.
    pub max_ulp_f64: u32,
}

// The table is in `MathFn` order, so a function's number indexes it.
const _: () = {
    let mut i = 0;
    while i < MATH_FUNCTIONS.len() {
        assert!(MATH_FUNCTIONS[i].function as usize == i);
        i += 1;
    }
};

impl MathFn {
    /// The function numbered `index` (the kernels' `function` argument).
    pub fn from_index(index: u32) -> Option<Self> {
        MATH_FUNCTIONS.get(index as usize).map(|f| f.function)
    }

    /// Its row of [`MATH_FUNCTIONS`].
    pub fn info(self) -> &'static MathFnInfo {
        &MATH_FUNCTIONS[self as usize]
    }
}

/// Threads per block of the check kernels.
pub const MATH_CHECK_BLOCK: u32 = 256;

/// The body of `math_f32_test` and `math_f64_test`: `out[i] = eval(f,
/// x[i], y[i])` for the function numbered `function`, grid-stride.
///
/// # Safety
/// As those kernels.
#[inline(always)]
unsafe fn check<T: Copy>(
    x: *const T,
    y: *const T,
    out: *mut T,
    n: usize,
    function: u32,
    eval: impl Fn(MathFn, T, T) -> T,
) {
    let Some(f) = MathFn::from_index(function) else {
        return;
    };
    for i in thread::grid_stride(n) {
        // SAFETY: i < n, the length of all three arrays.
        unsafe { *out.add(i) = eval(f, *x.add(i), *y.add(i)) };
    }
}

crate::device::kernels! {
    /// `out[i] = f(x[i])` or `f(x[i], y[i])` in f32 for the `device::math`
    /// function numbered `function` ([`MathFn`]); grid-stride.
    ///
    /// # Safety
    /// `x`, `y` and `out` hold `n` elements each on the device; `out`
    /// overlaps neither input. An unknown `function` writes nothing.
    pub fn math_f32_test(x: *const f32, y: *const f32, out: *mut f32, n: usize, function: u32) as MATH_F32_TEST {
        // SAFETY: this kernel's contract.
        unsafe { check(x, y, out, n, function, eval_f32) }
    }

    /// `out[i] = f(x[i])` or `f(x[i], y[i])` in f64 for the `device::math`
    /// function numbered `function` ([`MathFn`]); grid-stride.
    ///
    /// # Safety
    /// As `math_f32_test`, on f64.
    pub fn math_f64_test(x: *const f64, y: *const f64, out: *mut f64, n: usize, function: u32) as MATH_F64_TEST {
        // SAFETY: this kernel's contract.
        unsafe { check(x, y, out, n, function, eval_f64) }
    }
}
