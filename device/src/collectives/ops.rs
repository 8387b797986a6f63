//! The operations the collectives combine with: [`ReduceOp`] (an
//! associative operation with a neutral element) and the built-in [`Sum`],
//! [`Min`] and [`Max`] for `i32`, `u32`, `i64`, `u64`, `f32`, `f64`, and the
//! 16-bit floats [`f16`](struct@f16) and [`bf16`].
use crate::float16::{bf16, f16};

/// An associative binary operation with a neutral element, for values of
/// type `T`: what every collective (warp and block reduce and scan, the
/// device-wide reduction and scan) combines with.
///
/// The collectives here combine in a fixed order that depends only on the
/// launch shape, never on timing, so float results are the same bits on
/// every run. Scans keep the order of their operands (`combine(earlier,
/// later)`), so `combine` need not be commutative for a scan; a reduction
/// over a grid (the `reduce` kernel family) regroups and reorders, so an
/// operation used there must be commutative too.
///
/// ```
/// use cuda_kernels_device::collectives::ReduceOp;
/// /// The larger magnitude: a user's operation.
/// struct MaxAbs;
/// impl ReduceOp<f32> for MaxAbs {
///     const NAME: &'static str = "max_abs";
///     fn identity() -> f32 { 0.0 }
///     fn combine(a: f32, b: f32) -> f32 { a.abs().max(b.abs()) }
/// }
/// assert_eq!(MaxAbs::combine(-3.0, 2.0), 3.0);
/// ```
pub trait ReduceOp<T> {
    /// The operation's name in entry points (`reduce_<NAME>_<type>`,
    /// `scan_<NAME>_<type>`) and messages.
    const NAME: &'static str;

    /// Whether reducing an empty input without an initial value is defined
    /// (as [`identity`](Self::identity)). `false` for [`Min`] and [`Max`],
    /// whose identities are sentinels (`+∞`, `i32::MAX`) rather than
    /// meaningful results.
    const DEFINED_ON_EMPTY: bool = true;

    /// The neutral element: `combine(identity(), x) == x == combine(x,
    /// identity())` for every `x`.
    fn identity() -> T;

    /// Combines two values. Must be associative.
    fn combine(a: T, b: T) -> T;
}

/// Sum: identity 0; integers wrap on overflow; 16-bit floats are added in
/// f32 and rounded back to their type at every step (as `__hadd` does).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sum;

/// Minimum. Floats use `f32::min`/`f64::min` (PTX `min.f32`): a NaN is
/// ignored, so an input of only NaNs gives the identity, `+∞`. Not defined
/// on an empty input without an initial value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Min;

/// Maximum. Floats use `f32::max`/`f64::max` (PTX `max.f32`): a NaN is
/// ignored, so an input of only NaNs gives the identity, `−∞`. Not defined
/// on an empty input without an initial value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Max;

macro_rules! int_ops {
    ($($t:ty),*) => {$(
        impl ReduceOp<$t> for Sum {
            const NAME: &'static str = "sum";
            #[inline(always)]
            fn identity() -> $t { 0 }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { a.wrapping_add(b) }
        }
        impl ReduceOp<$t> for Min {
            const NAME: &'static str = "min";
            const DEFINED_ON_EMPTY: bool = false;
            #[inline(always)]
            fn identity() -> $t { <$t>::MAX }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { if b < a { b } else { a } }
        }
        impl ReduceOp<$t> for Max {
            const NAME: &'static str = "max";
            const DEFINED_ON_EMPTY: bool = false;
            #[inline(always)]
            fn identity() -> $t { <$t>::MIN }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { if b > a { b } else { a } }
        }
    )*};
}
int_ops!(i32, u32, i64, u64);

macro_rules! float_ops {
    ($($t:ident),*) => {$(
        impl ReduceOp<$t> for Sum {
            const NAME: &'static str = "sum";
            #[inline(always)]
            fn identity() -> $t { 0.0 }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { a + b }
        }
        impl ReduceOp<$t> for Min {
            const NAME: &'static str = "min";
            const DEFINED_ON_EMPTY: bool = false;
            #[inline(always)]
            fn identity() -> $t { $t::INFINITY }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { a.min(b) }
        }
        impl ReduceOp<$t> for Max {
            const NAME: &'static str = "max";
            const DEFINED_ON_EMPTY: bool = false;
            #[inline(always)]
            fn identity() -> $t { $t::NEG_INFINITY }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { a.max(b) }
        }
    )*};
}
float_ops!(f32, f64);

macro_rules! half_ops {
    ($($t:ident),*) => {$(
        impl ReduceOp<$t> for Sum {
            const NAME: &'static str = "sum";
            #[inline(always)]
            fn identity() -> $t { $t::ZERO }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { $t::narrow(a.widen() + b.widen()) }
        }
        impl ReduceOp<$t> for Min {
            const NAME: &'static str = "min";
            const DEFINED_ON_EMPTY: bool = false;
            #[inline(always)]
            fn identity() -> $t { $t::narrow(f32::INFINITY) }
            /// The smaller, NaN ignored (one of the operands, exactly).
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t {
                if b.widen() < a.widen() || a.widen().is_nan() { b } else { a }
            }
        }
        impl ReduceOp<$t> for Max {
            const NAME: &'static str = "max";
            const DEFINED_ON_EMPTY: bool = false;
            #[inline(always)]
            fn identity() -> $t { $t::narrow(f32::NEG_INFINITY) }
            /// The larger, NaN ignored (one of the operands, exactly).
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t {
                if b.widen() > a.widen() || a.widen().is_nan() { b } else { a }
            }
        }
    )*};
}
half_ops!(f16, bf16);
