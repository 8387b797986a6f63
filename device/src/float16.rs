//! 16-bit floats: [`f16`](struct@f16) (IEEE binary16) and [`bf16`] (bfloat16), their
//! packed pairs [`f16x2`] and [`bf16x2`], conversions from and to f32, and
//! arithmetic with the GPU's rounding and NaNs.
//!
//! Both types are `#[repr(transparent)]` over their `u16` bits, the layout of
//! the `half` crate's `half::f16` and `half::bf16` that the host uses (on the
//! host, with this crate's feature `half` — or the runtime's, which turns it
//! on — `From` converts between them, bit for bit; without it, `narrow` and
//! `widen` go through f32, and `from_bits`/`to_bits` carry the bits). They
//! are not `half`'s
//! types themselves: `half` builds for nvptx64 without `std`, but cust's
//! `DeviceCopy` (which a device buffer's element needs) is implemented only
//! for `half` 1.x, and neither crate here may implement it for `half` 2's
//! types.
//!
//! | operation | sm_80 and later | sm_70 (the portable PTX) | simulator |
//! |---|---|---|---|
//! | f32 → f16 | `cvt.rn.f16.f32` | the same | the same bits, in software |
//! | f32 → bf16 | `cvt.rn.bf16.f32` | the integer round-to-nearest-even | the same bits |
//! | f16 → f32 | `cvt.f32.f16` | the same | the same bits |
//! | bf16 → f32 | the 16-bit shift (what `cvt.f32.bf16` does) | the same | the same bits |
//! | `f16x2` `fma` | `fma.rn.f16x2` | the same | the exact fma, rounded once |
//! | `bf16x2` `fma` | `fma.rn.bf16x2` | the exact fma in software | the same |
//! | `min`, `max` | `min.f16x2`, `min.bf16x2`, … | in f32 (exact) | the same bits |
//! | `f16x2` `+ − ×` | `add.rn.f16x2`, `sub.rn.f16x2`, `mul.rn.f16x2` | the same | each element through f32, rounded once |
//! | `bf16x2` `+ − ×` | `fma.rn.bf16x2` with a factor ±1 or an addend −0 | each element through f32 | the same |
//! | `÷` of a pair | each element through f32 | the same | the same |
//! | comparisons | in f32 (exact) | the same | the same |
//!
//! NaNs: every conversion to a 16-bit type and every packed operation gives
//! the canonical NaN `0x7fff` for a NaN result, and f16 → f32 the canonical
//! f32 NaN `0x7fffffff` (the GPU's, measured on an H100; see
//! `tests/gpu/half.rs`). `min`/`max` return the other operand when one is
//! NaN, and treat −0 as less than +0.
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// The canonical NaN of both 16-bit types, the bits the GPU gives a NaN
/// result.
pub const NAN_BITS_16: u16 = 0x7fff;
/// The canonical f32 NaN, the bits `cvt.f32.f16` gives a NaN.
pub const NAN_BITS_32: u32 = 0x7fff_ffff;

/// One packed PTX instruction `op d, a, b, c;` over 32-bit registers.
#[cfg(target_arch = "nvptx64")]
macro_rules! packed3 {
    ($op:literal, $a:expr, $b:expr, $c:expr) => {{
        let d: u32;
        // SAFETY: a register-only arithmetic instruction.
        unsafe {
            asm!(concat!($op, " {d}, {a}, {b}, {c};"), d = out(reg32) d,
                 a = in(reg32) $a, b = in(reg32) $b, c = in(reg32) $c,
                 options(nostack, nomem, pure, preserves_flags));
        }
        d
    }};
}

/// One packed PTX instruction `op d, a, b;` over 32-bit registers.
#[cfg(target_arch = "nvptx64")]
macro_rules! packed2 {
    ($op:literal, $a:expr, $b:expr) => {{
        let d: u32;
        // SAFETY: a register-only arithmetic instruction.
        unsafe {
            asm!(concat!($op, " {d}, {a}, {b};"), d = out(reg32) d,
                 a = in(reg32) $a, b = in(reg32) $b,
                 options(nostack, nomem, pure, preserves_flags));
        }
        d
    }};
}

macro_rules! float16 {
    ($(#[$doc:meta])* $name:ident, $half:ident, $x2:ident) => {
        $(#[$doc])*
        #[allow(non_camel_case_types)]
        #[repr(transparent)]
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
        pub struct $name(u16);

        impl $name {
            /// The value with these bits.
            #[inline(always)]
            pub const fn from_bits(bits: u16) -> Self {
                Self(bits)
            }

            /// The bits.
            #[inline(always)]
            pub const fn to_bits(self) -> u16 {
                self.0
            }

            /// Zero.
            pub const ZERO: Self = Self(0);
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{}({:#06x} = {})", stringify!($name), self.0, self.widen())
            }
        }

        #[cfg(all(not(target_arch = "nvptx64"), feature = "half"))]
        impl From<half::$half> for $name {
            fn from(x: half::$half) -> Self {
                Self(x.to_bits())
            }
        }

        #[cfg(all(not(target_arch = "nvptx64"), feature = "half"))]
        impl From<$name> for half::$half {
            fn from(x: $name) -> Self {
                half::$half::from_bits(x.0)
            }
        }

        // SAFETY: a plain u16 (repr(transparent)): no pointers, any bits valid.
        #[cfg(not(target_arch = "nvptx64"))]
        unsafe impl cust_core::DeviceCopy for $name {}
        // SAFETY: as above: every bit pattern is a value, and zero is zero.
        #[cfg(not(target_arch = "nvptx64"))]
        unsafe impl bytemuck::Zeroable for $name {}
        // SAFETY: as above, with no padding.
        #[cfg(not(target_arch = "nvptx64"))]
        unsafe impl bytemuck::Pod for $name {}

        #[doc = concat!("Two [`", stringify!($name), "`](struct@", stringify!($name), ") in one 32-bit register: element 0 in the low half (the `.",
            stringify!($x2), "` operand of PTX's packed instructions).")]
        #[allow(non_camel_case_types)]
        #[repr(transparent)]
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Debug)]
        pub struct $x2(u32);

        impl $x2 {
            /// The pair `(lo, hi)`.
            #[inline(always)]
            pub const fn new(lo: $name, hi: $name) -> Self {
                Self(lo.0 as u32 | (hi.0 as u32) << 16)
            }

            /// The pair with these 32 bits (element 0 in the low half).
            #[inline(always)]
            pub const fn from_bits(bits: u32) -> Self {
                Self(bits)
            }

            /// The 32 bits.
            #[inline(always)]
            pub const fn to_bits(self) -> u32 {
                self.0
            }

            /// Element 0.
            #[inline(always)]
            pub const fn lo(self) -> $name {
                $name(self.0 as u16)
            }

            /// Element 1.
            #[inline(always)]
            pub const fn hi(self) -> $name {
                $name((self.0 >> 16) as u16)
            }

            /// Both elements as f32.
            #[inline(always)]
            pub fn widen(self) -> [f32; 2] {
                [self.lo().widen(), self.hi().widen()]
            }

            /// Both elements rounded from f32 (nearest, ties to even).
            #[inline(always)]
            pub fn narrow(x: [f32; 2]) -> Self {
                Self::new($name::narrow(x[0]), $name::narrow(x[1]))
            }

            /// Per element `self < other` (false with a NaN).
            #[inline(always)]
            pub fn lt(self, other: Self) -> [bool; 2] {
                let (a, b) = (self.widen(), other.widen());
                [a[0] < b[0], a[1] < b[1]]
            }

            /// Per element `self <= other` (false with a NaN).
            #[inline(always)]
            pub fn le(self, other: Self) -> [bool; 2] {
                let (a, b) = (self.widen(), other.widen());
                [a[0] <= b[0], a[1] <= b[1]]
            }

            /// Per element `self == other` (false with a NaN; −0 == +0).
            #[inline(always)]
            pub fn eq(self, other: Self) -> [bool; 2] {
                let (a, b) = (self.widen(), other.widen());
                [a[0] == b[0], a[1] == b[1]]
            }
        }

        impl $name {
            /// `self * b + c` with one rounding (nearest, ties to even).
            #[inline(always)]
            pub fn fma(self, b: Self, c: Self) -> Self {
                $x2::new(self, self).fma($x2::new(b, b), $x2::new(c, c)).lo()
            }

            /// The smaller (the other when one is NaN; −0 < +0).
            #[inline(always)]
            pub fn min(self, other: Self) -> Self {
                $x2::new(self, self).min($x2::new(other, other)).lo()
            }

            /// The larger (the other when one is NaN; +0 > −0).
            #[inline(always)]
            pub fn max(self, other: Self) -> Self {
                $x2::new(self, self).max($x2::new(other, other)).lo()
            }
        }

        float16_arith!($name: Add add +, Sub sub -, Mul mul *, Div div /);

        impl core::ops::Div for $x2 {
            type Output = Self;
            /// Per element `self / rhs`, rounded once (through f32: no
            /// packed division exists).
            #[inline(always)]
            fn div(self, rhs: Self) -> Self {
                Self::new(self.lo() / rhs.lo(), self.hi() / rhs.hi())
            }
        }

        impl core::ops::Neg for $x2 {
            type Output = Self;
            /// Both sign bits flipped (NaNs included), like `neg.f16x2`.
            #[inline(always)]
            fn neg(self) -> Self {
                Self(self.0 ^ 0x8000_8000)
            }
        }

        impl core::ops::Neg for $name {
            type Output = Self;
            /// The sign bit flipped (NaN included), like `neg.f16`.
            #[inline(always)]
            fn neg(self) -> Self {
                Self(self.0 ^ 0x8000)
            }
        }
    };
}

/// `+ − × ÷` of a 16-bit type: both operands widened to f32 (exact), the f32
/// operation, one rounding to the 16-bit type. The f32 result is the exact
/// one rounded to 24 bits, and 24 ≥ 2p + 2 for p = 11 (f16) and 8 (bf16),
/// so the second rounding gives the exactly rounded result (Figueroa, "When
/// is double rounding innocuous?", 1995): the bits of `add.rn.f16` & co.,
/// with the canonical NaN `0x7fff`.
macro_rules! float16_arith {
    ($name:ident: $($trait:ident $method:ident $op:tt),*) => {$(
        impl core::ops::$trait for $name {
            type Output = Self;
            #[doc = concat!("`self ", stringify!($op), " rhs`, rounded once (nearest, ties to even).")]
            #[inline(always)]
            fn $method(self, rhs: Self) -> Self {
                Self::narrow(self.widen() $op rhs.widen())
            }
        }
    )*};
}

float16!(
    /// IEEE 754 binary16: 1 sign, 5 exponent, 10 fraction bits; the bits of
    /// `half::f16`.
    f16, f16, f16x2
);
float16!(
    /// bfloat16: the upper 16 bits of an f32 (1 sign, 8 exponent, 7
    /// fraction bits); the bits of `half::bf16`.
    bf16, bf16, bf16x2
);

impl f16 {
    /// f32 → f16, nearest, ties to even (`cvt.rn.f16.f32`).
    #[inline(always)]
    pub fn narrow(x: f32) -> Self {
        #[cfg(not(target_arch = "nvptx64"))]
        return Self(soft::f32_to_f16(x));
        #[cfg(target_arch = "nvptx64")]
        {
            let h: u16;
            // SAFETY: a register-only conversion.
            unsafe {
                asm!("cvt.rn.f16.f32 {h}, {x};", h = out(reg16) h, x = in(reg32) x.to_bits(),
                     options(nostack, nomem, pure, preserves_flags));
            }
            Self(h)
        }
    }

    /// f16 → f32, exact (`cvt.f32.f16`).
    #[inline(always)]
    pub fn widen(self) -> f32 {
        #[cfg(not(target_arch = "nvptx64"))]
        return f32::from_bits(soft::f16_to_f32(self.0));
        #[cfg(target_arch = "nvptx64")]
        {
            let x: u32;
            // SAFETY: a register-only conversion.
            unsafe {
                asm!("cvt.f32.f16 {x}, {h};", x = out(reg32) x, h = in(reg16) self.0,
                     options(nostack, nomem, pure, preserves_flags));
            }
            f32::from_bits(x)
        }
    }
}

impl bf16 {
    /// f32 → bf16, nearest, ties to even (`cvt.rn.bf16.f32` on sm_80 and
    /// later; the same bits from integer arithmetic on sm_70 and the
    /// simulator).
    #[inline(always)]
    pub fn narrow(x: f32) -> Self {
        #[cfg(all(target_arch = "nvptx64", target_feature = "sm_80"))]
        {
            let h: u16;
            // SAFETY: a register-only conversion.
            unsafe {
                asm!("cvt.rn.bf16.f32 {h}, {x};", h = out(reg16) h, x = in(reg32) x.to_bits(),
                     options(nostack, nomem, pure, preserves_flags));
            }
            Self(h)
        }
        #[cfg(not(all(target_arch = "nvptx64", target_feature = "sm_80")))]
        Self(soft::f32_to_bf16(x))
    }

    /// bf16 → f32, exact: the bits shifted up 16 (what `cvt.f32.bf16`
    /// does, on every architecture).
    #[inline(always)]
    pub fn widen(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

impl f16x2 {
    /// Per element `self * b + c`, one rounding each (`fma.rn.f16x2`).
    #[inline(always)]
    pub fn fma(self, b: Self, c: Self) -> Self {
        #[cfg(target_arch = "nvptx64")]
        {
            Self(packed3!("fma.rn.f16x2", self.0, b.0, c.0))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        Self::soft_fma(self, b, c)
    }
}

impl bf16x2 {
    /// Per element `self * b + c`, one rounding each (`fma.rn.bf16x2` on
    /// sm_80 and later, the exact fma in software on sm_70).
    #[inline(always)]
    pub fn fma(self, b: Self, c: Self) -> Self {
        #[cfg(all(target_arch = "nvptx64", target_feature = "sm_80"))]
        {
            Self(packed3!("fma.rn.bf16x2", self.0, b.0, c.0))
        }
        #[cfg(not(all(target_arch = "nvptx64", target_feature = "sm_80")))]
        Self::soft_fma(self, b, c)
    }
}

/// `+ − ×` of a packed pair, per element, each rounded once (nearest, ties
/// to even): the bits of the 16-bit type's own operation, NaN canonical.
/// `$packed` computes it where the target has the packed instruction; the
/// other targets (and the simulator) compute each element alone.
macro_rules! packed_arith {
    ($x2:ident, $cfg:meta: $($trait:ident $method:ident $op:tt => |$a:ident, $b:ident| $packed:expr),*) => {$(
        impl core::ops::$trait for $x2 {
            type Output = Self;
            #[doc = concat!("Per element `self ", stringify!($op), " rhs`, rounded once.")]
            #[inline(always)]
            fn $method(self, rhs: Self) -> Self {
                #[cfg($cfg)]
                {
                    let ($a, $b) = (self.0, rhs.0);
                    Self($packed)
                }
                #[cfg(not($cfg))]
                Self::new(self.lo() $op rhs.lo(), self.hi() $op rhs.hi())
            }
        }
    )*};
}

// f16x2: the packed instructions of every GPU target (sm_53 and later).
packed_arith!(f16x2, target_arch = "nvptx64":
    Add add + => |a, b| packed2!("add.rn.f16x2", a, b),
    Sub sub - => |a, b| packed2!("sub.rn.f16x2", a, b),
    Mul mul * => |a, b| packed2!("mul.rn.f16x2", a, b));

/// `1.0` in both halves of a `bf16x2`.
#[cfg(all(target_arch = "nvptx64", target_feature = "sm_80"))]
const BF16X2_ONE: u32 = 0x3f80_3f80;
/// `-1.0` in both halves of a `bf16x2`.
#[cfg(all(target_arch = "nvptx64", target_feature = "sm_80"))]
const BF16X2_MINUS_ONE: u32 = 0xbf80_bf80;
/// `-0.0` in both halves of a `bf16x2`.
#[cfg(all(target_arch = "nvptx64", target_feature = "sm_80"))]
const BF16X2_MINUS_ZERO: u32 = 0x8000_8000;

// bf16x2 on sm_80 and later: `fma.rn.bf16x2` with an exact factor or
// addend (`a·1 + b`, `b·(−1) + a`, `a·b + (−0)`: one rounding of the exact
// sum, difference or product, and −0 as the addend keeps a zero product's
// sign), as CUDA's own `__hadd2`/`__hsub2`/`__hmul2` do on sm_80.
packed_arith!(bf16x2, all(target_arch = "nvptx64", target_feature = "sm_80"):
    Add add + => |a, b| packed3!("fma.rn.bf16x2", a, BF16X2_ONE, b),
    Sub sub - => |a, b| packed3!("fma.rn.bf16x2", b, BF16X2_MINUS_ONE, a),
    Mul mul * => |a, b| packed3!("fma.rn.bf16x2", a, b, BF16X2_MINUS_ZERO));

macro_rules! min_max {
    ($x2:ident, $elem:ident, $min:literal, $max:literal) => {
        impl $x2 {
            #[allow(dead_code)]
            fn soft_fma(a: Self, b: Self, c: Self) -> Self {
                let one = |a: $elem, b: $elem, c: $elem| {
                    $elem::narrow_exact(soft::fma_exact(a.widen(), b.widen(), c.widen()))
                };
                Self::new(one(a.lo(), b.lo(), c.lo()), one(a.hi(), b.hi(), c.hi()))
            }

            /// Per element the smaller (the other when one is NaN, the
            /// canonical NaN when both are; −0 < +0): `min` of PTX.
            #[inline(always)]
            pub fn min(self, other: Self) -> Self {
                #[cfg(all(target_arch = "nvptx64", target_feature = "sm_80"))]
                return Self(packed2!($min, self.0, other.0));
                #[cfg(not(all(target_arch = "nvptx64", target_feature = "sm_80")))]
                {
                    let (a, b) = (self.widen(), other.widen());
                    Self::narrow([soft::min(a[0], b[0]), soft::min(a[1], b[1])])
                }
            }

            /// Per element the larger (the other when one is NaN, the
            /// canonical NaN when both are; +0 > −0): `max` of PTX.
            #[inline(always)]
            pub fn max(self, other: Self) -> Self {
                #[cfg(all(target_arch = "nvptx64", target_feature = "sm_80"))]
                return Self(packed2!($max, self.0, other.0));
                #[cfg(not(all(target_arch = "nvptx64", target_feature = "sm_80")))]
                {
                    let (a, b) = (self.widen(), other.widen());
                    Self::narrow([soft::max(a[0], b[0]), soft::max(a[1], b[1])])
                }
            }
        }
    };
}
min_max!(f16x2, f16, "min.f16x2", "max.f16x2");
min_max!(bf16x2, bf16, "min.bf16x2", "max.bf16x2");

impl f16 {
    /// The exact value `x` (an f64 within f16's reach after one f32 round
    /// to odd) rounded to f16.
    #[allow(dead_code)]
    fn narrow_exact(x: soft::Exact) -> Self {
        Self(soft::f32_to_f16(x.round_to_odd_f32()))
    }
}

impl bf16 {
    #[allow(dead_code)]
    fn narrow_exact(x: soft::Exact) -> Self {
        Self(soft::f32_to_bf16(x.round_to_odd_f32()))
    }
}

/// The software conversions and the exact fma: the simulator's
/// instructions, and sm_70's where it has none. Pure integer and f64
/// arithmetic, the same bits as the GPU's instructions.
pub mod soft {
    use super::{NAN_BITS_16, NAN_BITS_32};

    /// f32 → bf16, nearest, ties to even; NaN → `0x7fff`. Adding `0x7fff`
    /// plus the kept part's lowest bit to the bits rounds the upper half to
    /// nearest even (a carry into the exponent is the next binade, or
    /// infinity: both right).
    pub fn f32_to_bf16(x: f32) -> u16 {
        if x.is_nan() {
            return NAN_BITS_16;
        }
        let bits = x.to_bits();
        ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
    }

    /// f32 → f16, nearest, ties to even, with f16's subnormals, overflow to
    /// infinity; NaN → `0x7fff`.
    pub fn f32_to_f16(x: f32) -> u16 {
        if x.is_nan() {
            return NAN_BITS_16;
        }
        let bits = x.to_bits();
        let sign = ((bits >> 16) & 0x8000) as u16;
        let abs = bits & 0x7fff_ffff;
        // At or past 65520 (the midpoint of the largest f16 and 2^16): infinity.
        if abs >= 0x477f_f000 {
            return sign | 0x7c00;
        }
        // Below 2^-25: zero (2^-25 itself, the midpoint of 0 and the smallest
        // subnormal, ties to the even 0).
        if abs <= 0x3300_0000 {
            return sign;
        }
        let exp = (abs >> 23) as i32 - 127;
        let mant = (abs & 0x7f_ffff) | 0x80_0000; // 24 bits, 1.23
        // Bits of the 24-bit significand dropped: 13 for a normal f16
        // (exponent >= -14), more for a subnormal.
        let shift = if exp >= -14 {
            13
        } else {
            13 + (-14 - exp) as u32
        };
        let kept = mant >> shift;
        let rest = mant & ((1 << shift) - 1);
        let half = 1 << (shift - 1);
        let rounded = kept + u32::from(rest > half || (rest == half && kept & 1 == 1));
        let value = if exp >= -14 {
            // The implicit bit moves into the exponent field; a carry out of
            // the significand is the next binade, exactly as the addition does.
            (((exp + 14) as u32) << 10) + rounded
        } else {
            rounded
        };
        sign | value as u16
    }

    /// f16 → f32, exact; NaN → `0x7fffffff`.
    pub fn f16_to_f32(h: u16) -> u32 {
        let sign = ((h & 0x8000) as u32) << 16;
        let exp = (h >> 10) & 0x1f;
        let frac = (h & 0x3ff) as u32;
        match exp {
            0x1f if frac != 0 => NAN_BITS_32,
            0x1f => sign | 0x7f80_0000,
            0 if frac == 0 => sign,
            0 => {
                // Subnormal: frac · 2^-24, exact in f32.
                sign | (frac as f32 * f32::from_bits(0x3380_0000)).to_bits()
            }
            _ => sign | ((exp as u32 + 112) << 23) | frac << 13,
        }
    }

    /// PTX's `min`: the other operand when one is NaN, NaN when both are,
    /// and −0 < +0.
    pub fn min(a: f32, b: f32) -> f32 {
        match (a.is_nan(), b.is_nan()) {
            (true, true) => f32::NAN,
            (true, false) => b,
            (false, true) => a,
            _ if a == b => f32::from_bits(a.to_bits() | b.to_bits()),
            _ => {
                if a < b {
                    a
                } else {
                    b
                }
            }
        }
    }

    /// PTX's `max`: the other operand when one is NaN, NaN when both are,
    /// and +0 > −0.
    pub fn max(a: f32, b: f32) -> f32 {
        match (a.is_nan(), b.is_nan()) {
            (true, true) => f32::NAN,
            (true, false) => b,
            (false, true) => a,
            _ if a == b => f32::from_bits(a.to_bits() & b.to_bits()),
            _ => {
                if a > b {
                    a
                } else {
                    b
                }
            }
        }
    }

    /// An exact real `sum + err` (`err` the rounding error of `sum` in f64,
    /// from TwoSum), or NaN.
    #[derive(Clone, Copy, Debug)]
    pub struct Exact {
        sum: f64,
        err: f64,
    }

    /// `a * b + c` exactly, for `a`, `b`, `c` widened from a 16-bit type:
    /// the product of two 11-bit (or 8-bit) significands is exact in f64,
    /// and TwoSum gives the sum's rounding error exactly.
    pub fn fma_exact(a: f32, b: f32, c: f32) -> Exact {
        let p = a as f64 * b as f64;
        let c = c as f64;
        let sum = p + c;
        if !sum.is_finite() {
            return Exact { sum, err: 0.0 };
        }
        let pv = sum - c;
        let cv = sum - pv;
        let err = (p - pv) + (c - cv);
        Exact { sum, err }
    }

    impl Exact {
        /// The value rounded to f32 with round-to-odd (toward zero, the
        /// last bit set when inexact): a later round to nearest to a type of
        /// 2 or more bits fewer is then the value's own round to nearest.
        /// NaN stays NaN, infinity infinity.
        pub fn round_to_odd_f32(self) -> f32 {
            let Exact { sum, err } = self;
            if !sum.is_finite() {
                return sum as f32;
            }
            // Toward zero in f64 first: `sum` is the exact value rounded to
            // nearest, so step back when it went past (err on the other side).
            let mut t = sum;
            if err != 0.0 && (err > 0.0) != (sum > 0.0) && sum != 0.0 {
                t = f64::from_bits(t.to_bits() - 1);
            }
            let inexact64 = err != 0.0;
            let sign = t.is_sign_negative();
            let mag = f64::from_bits(t.to_bits() & !(1 << 63));
            let mut r = mag as f32; // nearest
            if r.is_infinite() || r as f64 > mag {
                r = f32::from_bits(r.to_bits() - 1); // toward zero
            }
            let inexact = inexact64 || (r as f64) != mag;
            let mut bits = r.to_bits();
            if inexact {
                bits |= 1;
            }
            let r = f32::from_bits(bits);
            if sign { -r } else { r }
        }
    }
}
