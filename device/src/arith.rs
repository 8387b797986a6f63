//! Arithmetic instructions that rustc does not emit by itself.
//!
//! Rust never contracts `a * b + c` into a fused multiply-add (it would
//! change results), and `f32::mul_add` lives in `std`, which kernels do not
//! have: [`fma_f32`] asks for `fma.rn.f32` explicitly (`FFMA` in SASS, one
//! instruction and one rounding). On the host it is `f32::mul_add`, the same
//! result.
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

macro_rules! fma {
    ($(#[$doc:meta])* $name:ident, $t:ty, $bits:ty, $reg:ident, $instr:literal, $gpu_nan:path) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(a: $t, b: $t, c: $t) -> $t {
            #[cfg(not(target_arch = "nvptx64"))]
            // The GPU's NaN bits (the simulator's rule for float results).
            return $gpu_nan(a.mul_add(b, c));
            #[cfg(target_arch = "nvptx64")]
            {
                let d: $bits;
                // SAFETY: a register-only arithmetic instruction.
                unsafe {
                    asm!(
                        concat!($instr, " {d}, {a}, {b}, {c};"),
                        d = out($reg) d,
                        a = in($reg) a.to_bits(), b = in($reg) b.to_bits(), c = in($reg) c.to_bits(),
                        options(nostack, nomem, pure, preserves_flags),
                    );
                }
                <$t>::from_bits(d)
            }
        }
    };
}

fma!(
    /// `a * b + c` with a single rounding (`fma.rn.f32`), the same result as
    /// `f32::mul_add` on the host.
    fma_f32, f32, u32, reg32, "fma.rn.f32", crate::sim::gpu_nan_f32
);
fma!(
    /// `a * b + c` with a single rounding (`fma.rn.f64`), the same result as
    /// `f64::mul_add` on the host.
    fma_f64, f64, u64, reg64, "fma.rn.f64", core::convert::identity
);

/// The low and the high 32-bit words of `x`'s bits, as `(low, high)`
/// (`mov.b64 {lo, hi}`): the same as `(x.to_bits() as u32, (x.to_bits() >>
/// 32) as u32)`, which the GPU build gets wrong for the low word when `x` is
/// a converted f32 (see `docs/known-issues.md`). Use this in kernels.
#[inline(always)]
pub fn f64_halves(x: f64) -> (u32, u32) {
    #[cfg(not(target_arch = "nvptx64"))]
    return (x.to_bits() as u32, (x.to_bits() >> 32) as u32);
    #[cfg(target_arch = "nvptx64")]
    {
        let (lo, hi): (u32, u32);
        // SAFETY: a register-only move.
        unsafe {
            asm!(
                "mov.b64 {{{lo}, {hi}}}, {x};",
                lo = out(reg32) lo,
                hi = out(reg32) hi,
                x = in(reg64) x.to_bits(),
                options(nostack, nomem, pure, preserves_flags),
            );
        }
        (lo, hi)
    }
}
