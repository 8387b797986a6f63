//! Device math: f32 and f64 elementary functions from NVIDIA's libdevice.
//!
//! Each function is a thin `#[inline(always)]` wrapper over libdevice's
//! `__nv_*` function of the same name (`sin_f32` → `__nv_sinf`, `sin_f64` →
//! `__nv_sin`), the implementation CUDA C++'s `sinf`/`sin` use. The kernel
//! crate's nvptx64 build links `libdevice.10.bc`, as this repository's
//! `build.rs` does (the bitcode linker pulls in only the functions a kernel
//! references, and LLVM inlines them; a kernel crate that never calls this
//! module needs no libdevice), so the PTX
//! is self-contained: no `.extern .func`, nothing for the driver to resolve.
//! libdevice runs with IEEE behaviour here, as under `nvcc` without
//! `--use_fast_math`: subnormals are kept (no flush-to-zero), divisions are
//! correctly rounded (`div.rn`), and so are `sqrt_f32` and `sqrt_f64`.
//!
//! Accuracy: each function's maximum error, in ulps, is the bound the CUDA
//! C++ Programming Guide documents for it (its appendix on mathematical
//! functions); the table, and the worst error measured on a GPU, are in
//! `cuda_kernels_gpu::math_checks::MATH_FUNCTIONS` and `docs/device-layer.md`.
//!
//! Names follow the device layer's `fma_f32`: `<function>_<type>`.
//!
//! # On the host
//! The simulator computes each function with Rust's `std` (`f32::sin`…,
//! which call the platform's libm: glibc on Linux) and glibc's `erf`/`erfc`
//! family; `rsqrt` is `1 / sqrt`. Square roots, `fma`, `floor`, `ceil`,
//! `round`, `trunc`, `fabs`, `fmin`, `fmax` and `fmod` are exact on both
//! sides and agree bit for bit; the transcendental functions are each
//! faithfully rounded or better on both sides, but they are different
//! implementations: results may differ from libdevice's in the last ulp or
//! two (within the documented bounds). Compare simulated and GPU results of
//! kernels that call them with a tolerance.
//!
//! One exception: [`sqrt_f32`] is the `sqrt.rn.f32` instruction, not
//! `__nv_sqrtf`. libdevice picks its f32 square root with
//! `__nvvm_reflect("__CUDA_PREC_SQRT")`, which `nvcc` sets to 1 (IEEE,
//! `-prec-sqrt=true`) but LLVM's reflect pass, run by the bitcode linker
//! without a way to set it, answers 0: `__nv_sqrtf` would be
//! `sqrt.approx.f32`. (Other libdevice functions that take a square root
//! internally use that approximate one; their measured errors include it.)

// SAFETY (for every `safe fn` below): libdevice's math functions are pure
// functions of their arguments, defined for every input (NaN, ±∞ and
// subnormals included), that touch no memory; calling one is safe. The two
// `sincos` functions write through their pointer arguments and stay unsafe.
#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    safe fn __nv_rsqrtf(x: f32) -> f32;
    safe fn __nv_cbrtf(x: f32) -> f32;
    safe fn __nv_expf(x: f32) -> f32;
    safe fn __nv_exp2f(x: f32) -> f32;
    safe fn __nv_expm1f(x: f32) -> f32;
    safe fn __nv_logf(x: f32) -> f32;
    safe fn __nv_log2f(x: f32) -> f32;
    safe fn __nv_log10f(x: f32) -> f32;
    safe fn __nv_log1pf(x: f32) -> f32;
    safe fn __nv_sinf(x: f32) -> f32;
    safe fn __nv_cosf(x: f32) -> f32;
    safe fn __nv_tanf(x: f32) -> f32;
    safe fn __nv_asinf(x: f32) -> f32;
    safe fn __nv_acosf(x: f32) -> f32;
    safe fn __nv_atanf(x: f32) -> f32;
    safe fn __nv_sinhf(x: f32) -> f32;
    safe fn __nv_coshf(x: f32) -> f32;
    safe fn __nv_tanhf(x: f32) -> f32;
    safe fn __nv_erff(x: f32) -> f32;
    safe fn __nv_erfcf(x: f32) -> f32;
    safe fn __nv_floorf(x: f32) -> f32;
    safe fn __nv_ceilf(x: f32) -> f32;
    safe fn __nv_roundf(x: f32) -> f32;
    safe fn __nv_truncf(x: f32) -> f32;
    safe fn __nv_fabsf(x: f32) -> f32;
    safe fn __nv_atan2f(y: f32, x: f32) -> f32;
    safe fn __nv_powf(x: f32, y: f32) -> f32;
    safe fn __nv_hypotf(x: f32, y: f32) -> f32;
    safe fn __nv_fminf(x: f32, y: f32) -> f32;
    safe fn __nv_fmaxf(x: f32, y: f32) -> f32;
    safe fn __nv_fmodf(x: f32, y: f32) -> f32;
    fn __nv_sincosf(x: f32, sin: *mut f32, cos: *mut f32);
    safe fn __nv_sqrt(x: f64) -> f64;
    safe fn __nv_rsqrt(x: f64) -> f64;
    safe fn __nv_cbrt(x: f64) -> f64;
    safe fn __nv_exp(x: f64) -> f64;
    safe fn __nv_exp2(x: f64) -> f64;
    safe fn __nv_expm1(x: f64) -> f64;
    safe fn __nv_log(x: f64) -> f64;
    safe fn __nv_log2(x: f64) -> f64;
    safe fn __nv_log10(x: f64) -> f64;
    safe fn __nv_log1p(x: f64) -> f64;
    safe fn __nv_sin(x: f64) -> f64;
    safe fn __nv_cos(x: f64) -> f64;
    safe fn __nv_tan(x: f64) -> f64;
    safe fn __nv_asin(x: f64) -> f64;
    safe fn __nv_acos(x: f64) -> f64;
    safe fn __nv_atan(x: f64) -> f64;
    safe fn __nv_sinh(x: f64) -> f64;
    safe fn __nv_cosh(x: f64) -> f64;
    safe fn __nv_tanh(x: f64) -> f64;
    safe fn __nv_erf(x: f64) -> f64;
    safe fn __nv_erfc(x: f64) -> f64;
    safe fn __nv_floor(x: f64) -> f64;
    safe fn __nv_ceil(x: f64) -> f64;
    safe fn __nv_round(x: f64) -> f64;
    safe fn __nv_trunc(x: f64) -> f64;
    safe fn __nv_fabs(x: f64) -> f64;
    safe fn __nv_atan2(y: f64, x: f64) -> f64;
    safe fn __nv_pow(x: f64, y: f64) -> f64;
    safe fn __nv_hypot(x: f64, y: f64) -> f64;
    safe fn __nv_fmin(x: f64, y: f64) -> f64;
    safe fn __nv_fmax(x: f64, y: f64) -> f64;
    safe fn __nv_fmod(x: f64, y: f64) -> f64;
    fn __nv_sincos(x: f64, sin: *mut f64, cos: *mut f64);
}

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// Square root, correctly rounded (`sqrt.rn.f32`), f32: the same result as
/// `f32::sqrt` on the host. (See the module docs for why not `__nv_sqrtf`.)
#[inline(always)]
pub fn sqrt_f32(x: f32) -> f32 {
    #[cfg(not(target_arch = "nvptx64"))]
    return crate::sim::gpu_nan_f32(x.sqrt());
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a register-only arithmetic instruction.
        unsafe {
            asm!(
                "sqrt.rn.f32 {r}, {x};",
                r = out(reg32) r,
                x = in(reg32) x.to_bits(),
                options(nostack, nomem, pure, preserves_flags),
            );
        }
        f32::from_bits(r)
    }
}

macro_rules! unary {
    ($($(#[$doc:meta])* $name:ident => $nv:ident: $t:ty;)*) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(x: $t) -> $t {
            #[cfg(not(target_arch = "nvptx64"))]
            return host::GpuNan::gpu_nan(host::$name(x), x, x);
            #[cfg(target_arch = "nvptx64")]
            return $nv(x);
        }
    )*};
}

macro_rules! binary {
    ($($(#[$doc:meta])* $name:ident($a:ident, $b:ident) => $nv:ident: $t:ty;)*) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub fn $name($a: $t, $b: $t) -> $t {
            #[cfg(not(target_arch = "nvptx64"))]
            return host::GpuNan::gpu_nan(host::$name($a, $b), $a, $b);
            #[cfg(target_arch = "nvptx64")]
            return $nv($a, $b);
        }
    )*};
}

unary! {
    /// Reciprocal square root, 1/√x, f32 (libdevice `__nv_rsqrtf`).
    rsqrt_f32 => __nv_rsqrtf: f32;
    /// Cube root, f32 (libdevice `__nv_cbrtf`).
    cbrt_f32 => __nv_cbrtf: f32;
    /// Eˣ, f32 (libdevice `__nv_expf`).
    exp_f32 => __nv_expf: f32;
    /// 2ˣ, f32 (libdevice `__nv_exp2f`).
    exp2_f32 => __nv_exp2f: f32;
    /// Eˣ − 1, accurate near x = 0, f32 (libdevice `__nv_expm1f`).
    expm1_f32 => __nv_expm1f: f32;
    /// Natural logarithm, f32 (libdevice `__nv_logf`).
    log_f32 => __nv_logf: f32;
    /// Base-2 logarithm, f32 (libdevice `__nv_log2f`).
    log2_f32 => __nv_log2f: f32;
    /// Base-10 logarithm, f32 (libdevice `__nv_log10f`).
    log10_f32 => __nv_log10f: f32;
    /// Ln(1 + x), accurate near x = 0, f32 (libdevice `__nv_log1pf`).
    log1p_f32 => __nv_log1pf: f32;
    /// Sine (radians; full argument reduction, accurate for huge x), f32 (libdevice `__nv_sinf`).
    sin_f32 => __nv_sinf: f32;
    /// Cosine (radians; full argument reduction, accurate for huge x), f32 (libdevice `__nv_cosf`).
    cos_f32 => __nv_cosf: f32;
    /// Tangent (radians; full argument reduction, accurate for huge x), f32 (libdevice `__nv_tanf`).
    tan_f32 => __nv_tanf: f32;
    /// Arc sine, in [−π/2, π/2]; NaN outside [−1, 1], f32 (libdevice `__nv_asinf`).
    asin_f32 => __nv_asinf: f32;
    /// Arc cosine, in [0, π]; NaN outside [−1, 1], f32 (libdevice `__nv_acosf`).
    acos_f32 => __nv_acosf: f32;
    /// Arc tangent, in [−π/2, π/2], f32 (libdevice `__nv_atanf`).
    atan_f32 => __nv_atanf: f32;
    /// Hyperbolic sine, f32 (libdevice `__nv_sinhf`).
    sinh_f32 => __nv_sinhf: f32;
    /// Hyperbolic cosine, f32 (libdevice `__nv_coshf`).
    cosh_f32 => __nv_coshf: f32;
    /// Hyperbolic tangent, f32 (libdevice `__nv_tanhf`).
    tanh_f32 => __nv_tanhf: f32;
    /// Error function, f32 (libdevice `__nv_erff`).
    erf_f32 => __nv_erff: f32;
    /// Complementary error function, 1 − erf(x), accurate for large x, f32 (libdevice `__nv_erfcf`).
    erfc_f32 => __nv_erfcf: f32;
    /// Largest integer ≤ x, f32 (libdevice `__nv_floorf`).
    floor_f32 => __nv_floorf: f32;
    /// Smallest integer ≥ x, f32 (libdevice `__nv_ceilf`).
    ceil_f32 => __nv_ceilf: f32;
    /// Nearest integer, halfway cases away from zero (like `f32::round`), f32 (libdevice `__nv_roundf`).
    round_f32 => __nv_roundf: f32;
    /// Integer part, rounded toward zero, f32 (libdevice `__nv_truncf`).
    trunc_f32 => __nv_truncf: f32;
    /// Absolute value, f32 (libdevice `__nv_fabsf`).
    fabs_f32 => __nv_fabsf: f32;
}

binary! {
    /// `atan2(y, x)`: arc tangent of y/x in [−π, π], the quadrant from the signs of both, f32 (libdevice `__nv_atan2f`).
    atan2_f32(y, x) => __nv_atan2f: f32;
    /// `pow(x, y)`: xʸ, f32 (libdevice `__nv_powf`).
    pow_f32(x, y) => __nv_powf: f32;
    /// `hypot(x, y)`: √(x² + y²) without undue overflow or underflow, f32 (libdevice `__nv_hypotf`).
    hypot_f32(x, y) => __nv_hypotf: f32;
    /// `fmin(x, y)`: the smaller argument; the other one when one is NaN, f32 (libdevice `__nv_fminf`).
    fmin_f32(x, y) => __nv_fminf: f32;
    /// `fmax(x, y)`: the larger argument; the other one when one is NaN, f32 (libdevice `__nv_fmaxf`).
    fmax_f32(x, y) => __nv_fmaxf: f32;
    /// `fmod(x, y)`: remainder of x / y rounded toward zero (the sign of x), exact, f32 (libdevice `__nv_fmodf`).
    fmod_f32(x, y) => __nv_fmodf: f32;
}

unary! {
    /// Square root, correctly rounded, f64 (libdevice `__nv_sqrt`).
    sqrt_f64 => __nv_sqrt: f64;
    /// Reciprocal square root, 1/√x, f64 (libdevice `__nv_rsqrt`).
    rsqrt_f64 => __nv_rsqrt: f64;
    /// Cube root, f64 (libdevice `__nv_cbrt`).
    cbrt_f64 => __nv_cbrt: f64;
    /// Eˣ, f64 (libdevice `__nv_exp`).
    exp_f64 => __nv_exp: f64;
    /// 2ˣ, f64 (libdevice `__nv_exp2`).
    exp2_f64 => __nv_exp2: f64;
    /// Eˣ − 1, accurate near x = 0, f64 (libdevice `__nv_expm1`).
    expm1_f64 => __nv_expm1: f64;
    /// Natural logarithm, f64 (libdevice `__nv_log`).
    log_f64 => __nv_log: f64;
    /// Base-2 logarithm, f64 (libdevice `__nv_log2`).
    log2_f64 => __nv_log2: f64;
    /// Base-10 logarithm, f64 (libdevice `__nv_log10`).
    log10_f64 => __nv_log10: f64;
    /// Ln(1 + x), accurate near x = 0, f64 (libdevice `__nv_log1p`).
    log1p_f64 => __nv_log1p: f64;
    /// Sine (radians; full argument reduction, accurate for huge x), f64 (libdevice `__nv_sin`).
    sin_f64 => __nv_sin: f64;
    /// Cosine (radians; full argument reduction, accurate for huge x), f64 (libdevice `__nv_cos`).
    cos_f64 => __nv_cos: f64;
    /// Tangent (radians; full argument reduction, accurate for huge x), f64 (libdevice `__nv_tan`).
    tan_f64 => __nv_tan: f64;
    /// Arc sine, in [−π/2, π/2]; NaN outside [−1, 1], f64 (libdevice `__nv_asin`).
    asin_f64 => __nv_asin: f64;
    /// Arc cosine, in [0, π]; NaN outside [−1, 1], f64 (libdevice `__nv_acos`).
    acos_f64 => __nv_acos: f64;
    /// Arc tangent, in [−π/2, π/2], f64 (libdevice `__nv_atan`).
    atan_f64 => __nv_atan: f64;
    /// Hyperbolic sine, f64 (libdevice `__nv_sinh`).
    sinh_f64 => __nv_sinh: f64;
    /// Hyperbolic cosine, f64 (libdevice `__nv_cosh`).
    cosh_f64 => __nv_cosh: f64;
    /// Hyperbolic tangent, f64 (libdevice `__nv_tanh`).
    tanh_f64 => __nv_tanh: f64;
    /// Error function, f64 (libdevice `__nv_erf`).
    erf_f64 => __nv_erf: f64;
    /// Complementary error function, 1 − erf(x), accurate for large x, f64 (libdevice `__nv_erfc`).
    erfc_f64 => __nv_erfc: f64;
    /// Largest integer ≤ x, f64 (libdevice `__nv_floor`).
    floor_f64 => __nv_floor: f64;
    /// Smallest integer ≥ x, f64 (libdevice `__nv_ceil`).
    ceil_f64 => __nv_ceil: f64;
    /// Nearest integer, halfway cases away from zero (like `f32::round`), f64 (libdevice `__nv_round`).
    round_f64 => __nv_round: f64;
    /// Integer part, rounded toward zero, f64 (libdevice `__nv_trunc`).
    trunc_f64 => __nv_trunc: f64;
    /// Absolute value, f64 (libdevice `__nv_fabs`).
    fabs_f64 => __nv_fabs: f64;
}

binary! {
    /// `atan2(y, x)`: arc tangent of y/x in [−π, π], the quadrant from the signs of both, f64 (libdevice `__nv_atan2`).
    atan2_f64(y, x) => __nv_atan2: f64;
    /// `pow(x, y)`: xʸ, f64 (libdevice `__nv_pow`).
    pow_f64(x, y) => __nv_pow: f64;
    /// `hypot(x, y)`: √(x² + y²) without undue overflow or underflow, f64 (libdevice `__nv_hypot`).
    hypot_f64(x, y) => __nv_hypot: f64;
    /// `fmin(x, y)`: the smaller argument; the other one when one is NaN, f64 (libdevice `__nv_fmin`).
    fmin_f64(x, y) => __nv_fmin: f64;
    /// `fmax(x, y)`: the larger argument; the other one when one is NaN, f64 (libdevice `__nv_fmax`).
    fmax_f64(x, y) => __nv_fmax: f64;
    /// `fmod(x, y)`: remainder of x / y rounded toward zero (the sign of x), exact, f64 (libdevice `__nv_fmod`).
    fmod_f64(x, y) => __nv_fmod: f64;
}

/// Sine and cosine of `x` together, `(sin x, cos x)`, f32 (libdevice
/// `__nv_sincosf`: one argument reduction for both).
#[inline(always)]
pub fn sincos_f32(x: f32) -> (f32, f32) {
    #[cfg(not(target_arch = "nvptx64"))]
    return {
        let (s, c) = x.sin_cos();
        (crate::sim::gpu_nan_f32(s), crate::sim::gpu_nan_f32(c))
    };
    #[cfg(target_arch = "nvptx64")]
    {
        let (mut s, mut c) = (0.0, 0.0);
        // SAFETY: both pointers are to live locals of the right type, written once.
        unsafe { __nv_sincosf(x, &mut s, &mut c) };
        (s, c)
    }
}

/// Sine and cosine of `x` together, `(sin x, cos x)`, f64 (libdevice
/// `__nv_sincos`: one argument reduction for both).
#[inline(always)]
pub fn sincos_f64(x: f64) -> (f64, f64) {
    #[cfg(not(target_arch = "nvptx64"))]
    return x.sin_cos();
    #[cfg(target_arch = "nvptx64")]
    {
        let (mut s, mut c) = (0.0, 0.0);
        // SAFETY: both pointers are to live locals of the right type, written once.
        unsafe { __nv_sincos(x, &mut s, &mut c) };
        (s, c)
    }
}

/// `std`'s float methods in kernels: `x.exp()`, `x.sin()`, `x.sqrt()`,
/// `x.mul_add(a, b)` and the rest, on `f32` and `f64` (Rust-CUDA's
/// `GpuFloat`). `core` has none of them, so in a `no_std` kernel crate
/// `(x - m).exp()` needs this trait in scope: `use
/// cuda_kernels_device::prelude::*;` (or `math::GpuFloat`).
///
/// Each method is this module's function of the same meaning (`exp` is
/// [`exp_f32`], libdevice's `__nv_expf` on the GPU; `mul_add` is
/// [`fma_f32`](crate::arith::fma_f32), `fma.rn`). On the host, though,
/// `x.exp()` on an `f32` is `std`'s inherent method (Rust prefers an
/// inherent method to a trait's wherever both exist), which is what
/// [`exp_f32`] computes on the host too, but for the bits of a NaN result:
/// `std`'s are the host's NaN, this module's the GPU's (f32: its canonical
/// NaN `0x7fff_ffff`; f64: the NaN operand's payload). Where a kernel's NaN
/// bits must be the GPU's on the simulator as well, call the function
/// ([`exp_f32`]) or the trait's method by path (`GpuFloat::exp(x)`); only
/// `rsqrt`, which `std` lacks, is this trait's everywhere. Accuracy: as the
/// module docs say, per function.
///
/// ```
/// use cuda_kernels_device::prelude::*;
///
/// fn softmax_term(x: f32, max: f32) -> f32 {
///     (x - max).exp()
/// }
/// assert_eq!(softmax_term(1.0, 1.0), 1.0);
/// assert_eq!(GpuFloat::mul_add(2.0f64, 3.0, 1.0), 7.0);
/// // The GPU's NaN through the trait's path on the host too:
/// assert_eq!(GpuFloat::sqrt(-1.0f32).to_bits(), 0x7fff_ffff);
/// assert_eq!(GpuFloat::sqrt(-1.0f32).to_bits(), math::sqrt_f32(-1.0).to_bits());
/// ```
pub trait GpuFloat: Copy {
    /// √x, correctly rounded.
    fn sqrt(self) -> Self;
    /// 1/√x.
    fn rsqrt(self) -> Self;
    /// ∛x.
    fn cbrt(self) -> Self;
    /// eˣ.
    fn exp(self) -> Self;
    /// 2ˣ.
    fn exp2(self) -> Self;
    /// eˣ − 1, accurate near 0.
    fn exp_m1(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// Base-2 logarithm.
    fn log2(self) -> Self;
    /// Base-10 logarithm.
    fn log10(self) -> Self;
    /// ln(1 + x), accurate near 0.
    fn ln_1p(self) -> Self;
    /// Sine (radians).
    fn sin(self) -> Self;
    /// Cosine (radians).
    fn cos(self) -> Self;
    /// Tangent (radians).
    fn tan(self) -> Self;
    /// `(sin x, cos x)`, one argument reduction.
    fn sin_cos(self) -> (Self, Self);
    /// Arc sine.
    fn asin(self) -> Self;
    /// Arc cosine.
    fn acos(self) -> Self;
    /// Arc tangent.
    fn atan(self) -> Self;
    /// Arc tangent of `self / x`, in the quadrant of the signs of both.
    fn atan2(self, x: Self) -> Self;
    /// Hyperbolic sine.
    fn sinh(self) -> Self;
    /// Hyperbolic cosine.
    fn cosh(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// Error function.
    fn erf(self) -> Self;
    /// Complementary error function, 1 − erf(x).
    fn erfc(self) -> Self;
    /// Largest integer ≤ x.
    fn floor(self) -> Self;
    /// Smallest integer ≥ x.
    fn ceil(self) -> Self;
    /// Nearest integer, halfway cases away from zero.
    fn round(self) -> Self;
    /// Integer part.
    fn trunc(self) -> Self;
    /// xʸ.
    fn powf(self, y: Self) -> Self;
    /// √(x² + y²) without undue overflow.
    fn hypot(self, y: Self) -> Self;
    /// `self * a + b` with one rounding.
    fn mul_add(self, a: Self, b: Self) -> Self;
}

macro_rules! gpu_float {
    ($t:ty: sqrt $sqrt:ident, rsqrt $rsqrt:ident, sincos $sincos:ident, fma $fma:path;
     $($method:ident => $fun:ident),*; $($method2:ident => $fun2:ident),*) => {
        impl GpuFloat for $t {
            #[inline(always)]
            fn sqrt(self) -> $t {
                $sqrt(self)
            }
            #[inline(always)]
            fn rsqrt(self) -> $t {
                $rsqrt(self)
            }
            #[inline(always)]
            fn sin_cos(self) -> ($t, $t) {
                $sincos(self)
            }
            #[inline(always)]
            fn mul_add(self, a: $t, b: $t) -> $t {
                $fma(self, a, b)
            }
            $(
                #[inline(always)]
                fn $method(self) -> $t {
                    $fun(self)
                }
            )*
            $(
                #[inline(always)]
                fn $method2(self, y: $t) -> $t {
                    $fun2(self, y)
                }
            )*
        }
    };
}

gpu_float!(f32: sqrt sqrt_f32, rsqrt rsqrt_f32, sincos sincos_f32, fma crate::arith::fma_f32;
    cbrt => cbrt_f32, exp => exp_f32, exp2 => exp2_f32, exp_m1 => expm1_f32, ln => log_f32,
    log2 => log2_f32, log10 => log10_f32, ln_1p => log1p_f32, sin => sin_f32, cos => cos_f32,
    tan => tan_f32, asin => asin_f32, acos => acos_f32, atan => atan_f32, sinh => sinh_f32,
    cosh => cosh_f32, tanh => tanh_f32, erf => erf_f32, erfc => erfc_f32, floor => floor_f32,
    ceil => ceil_f32, round => round_f32, trunc => trunc_f32;
    atan2 => atan2_f32, powf => pow_f32, hypot => hypot_f32);
gpu_float!(f64: sqrt sqrt_f64, rsqrt rsqrt_f64, sincos sincos_f64, fma crate::arith::fma_f64;
    cbrt => cbrt_f64, exp => exp_f64, exp2 => exp2_f64, exp_m1 => expm1_f64, ln => log_f64,
    log2 => log2_f64, log10 => log10_f64, ln_1p => log1p_f64, sin => sin_f64, cos => cos_f64,
    tan => tan_f64, asin => asin_f64, acos => acos_f64, atan => atan_f64, sinh => sinh_f64,
    cosh => cosh_f64, tanh => tanh_f64, erf => erf_f64, erfc => erfc_f64, floor => floor_f64,
    ceil => ceil_f64, round => round_f64, trunc => trunc_f64;
    atan2 => atan2_f64, powf => pow_f64, hypot => hypot_f64);

/// The host's implementations (see the module docs).
#[cfg(not(target_arch = "nvptx64"))]
mod host {
    /// A NaN result `r` of a function of `x` (and `y`; `x` again for a
    /// function of one argument) as the GPU gives it (measured on an H100):
    /// f32, its canonical NaN; f64, `y` quieted when it is a NaN, else `x`
    /// quieted when it is one (its sign kept: `fabs` of a negative NaN stays
    /// negative), else `r` (an invalid operation: the host's
    /// `0xfff8_0000_0000_0000`, as the GPU's).
    pub trait GpuNan: Sized {
        fn gpu_nan(r: Self, x: Self, y: Self) -> Self;
    }
    impl GpuNan for f32 {
        fn gpu_nan(r: f32, _: f32, _: f32) -> f32 {
            crate::sim::gpu_nan_f32(r)
        }
    }
    impl GpuNan for f64 {
        fn gpu_nan(r: f64, x: f64, y: f64) -> f64 {
            let quiet = |v: f64| f64::from_bits(v.to_bits() | 1 << 51);
            if !r.is_nan() {
                r
            } else if y.is_nan() {
                quiet(y)
            } else if x.is_nan() {
                quiet(x)
            } else {
                r
            }
        }
    }

    // SAFETY (for every `safe fn`): glibc's libm functions are pure functions
    // of their argument, defined for every input, that touch no memory.
    unsafe extern "C" {
        safe fn erff(x: f32) -> f32;
        safe fn erfcf(x: f32) -> f32;
        safe fn erf(x: f64) -> f64;
        safe fn erfc(x: f64) -> f64;
    }

    macro_rules! std_math {
        ($t:ty: $($name:ident => $method:ident),* $(,)?) => {$(
            pub fn $name(x: $t) -> $t {
                x.$method()
            }
        )*};
    }
    std_math!(f32: cbrt_f32 => cbrt, exp_f32 => exp, exp2_f32 => exp2, expm1_f32 => exp_m1,
        log_f32 => ln, log2_f32 => log2, log10_f32 => log10, log1p_f32 => ln_1p,
        sin_f32 => sin, cos_f32 => cos, tan_f32 => tan, asin_f32 => asin, acos_f32 => acos,
        atan_f32 => atan, sinh_f32 => sinh, cosh_f32 => cosh, tanh_f32 => tanh,
        floor_f32 => floor, ceil_f32 => ceil, round_f32 => round, trunc_f32 => trunc,
        fabs_f32 => abs);
    std_math!(f64: sqrt_f64 => sqrt, cbrt_f64 => cbrt, exp_f64 => exp, exp2_f64 => exp2,
        expm1_f64 => exp_m1, log_f64 => ln, log2_f64 => log2, log10_f64 => log10,
        log1p_f64 => ln_1p, sin_f64 => sin, cos_f64 => cos, tan_f64 => tan, asin_f64 => asin,
        acos_f64 => acos, atan_f64 => atan, sinh_f64 => sinh, cosh_f64 => cosh,
        tanh_f64 => tanh, floor_f64 => floor, ceil_f64 => ceil, round_f64 => round,
        trunc_f64 => trunc, fabs_f64 => abs);

    macro_rules! std_math2 {
        ($t:ty: $($name:ident => $method:ident),* $(,)?) => {$(
            pub fn $name(x: $t, y: $t) -> $t {
                x.$method(y)
            }
        )*};
    }
    std_math2!(f32: atan2_f32 => atan2, pow_f32 => powf, hypot_f32 => hypot);
    std_math2!(f64: atan2_f64 => atan2, pow_f64 => powf, hypot_f64 => hypot);

    /// `fmin` and `fmax` as the GPU computes them: −0 below +0 (the GPU's
    /// `min`/`max`: `fmin(-0, +0)` is −0 in either order, where the host's
    /// `min` gives its first operand).
    macro_rules! gpu_min_max_mod {
        ($t:ty: $fmin:ident, $fmax:ident, $fmod:ident) => {
            pub fn $fmin(x: $t, y: $t) -> $t {
                if x == 0.0 && y == 0.0 {
                    if x.is_sign_negative() { x } else { y }
                } else {
                    x.min(y)
                }
            }
            pub fn $fmax(x: $t, y: $t) -> $t {
                if x == 0.0 && y == 0.0 {
                    if x.is_sign_positive() { x } else { y }
                } else {
                    x.max(y)
                }
            }
            pub fn $fmod(x: $t, y: $t) -> $t {
                x % y
            }
        };
    }
    gpu_min_max_mod!(f32: fmin_f32, fmax_f32, fmod_f32);
    gpu_min_max_mod!(f64: fmin_f64, fmax_f64, fmod_f64);

    pub fn rsqrt_f32(x: f32) -> f32 {
        1.0 / x.sqrt()
    }
    pub fn rsqrt_f64(x: f64) -> f64 {
        1.0 / x.sqrt()
    }
    pub fn erf_f32(x: f32) -> f32 {
        erff(x)
    }
    pub fn erfc_f32(x: f32) -> f32 {
        erfcf(x)
    }
    pub fn erf_f64(x: f64) -> f64 {
        erf(x)
    }
    pub fn erfc_f64(x: f64) -> f64 {
        erfc(x)
    }
}
