//! Arithmetic instructions that rustc does not emit by itself.
//!
//! Rust never contracts `a * b + c` into a fused multiply-add (it would
//! change results), and `f32::mul_add` lives in `std`, which kernels do not
//! have: [`fma_f32`] asks for `fma.rn.f32` explicitly (`FFMA` in SASS, one
//! instruction and one rounding). On the host it is `f32::mul_add`, the same
//! result.
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// `a * b + c` with a single rounding (`fma.rn.f32`), the same result as
/// `f32::mul_add` on the host.
#[inline(always)]
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(not(target_arch = "nvptx64"))]
    return a.mul_add(b, c);
    #[cfg(target_arch = "nvptx64")]
    {
        let d: u32;
        // SAFETY: a register-only arithmetic instruction.
        unsafe {
            asm!(
                "fma.rn.f32 {d}, {a}, {b}, {c};",
                d = out(reg32) d,
                a = in(reg32) a.to_bits(), b = in(reg32) b.to_bits(), c = in(reg32) c.to_bits(),
                options(nostack, nomem, pure, preserves_flags),
            );
        }
        f32::from_bits(d)
    }
}

/// `a * b + c` with a single rounding (`fma.rn.f64`), the same result as
/// `f64::mul_add` on the host.
#[inline(always)]
pub fn fma_f64(a: f64, b: f64, c: f64) -> f64 {
    #[cfg(not(target_arch = "nvptx64"))]
    return a.mul_add(b, c);
    #[cfg(target_arch = "nvptx64")]
    {
        let d: u64;
        // SAFETY: a register-only arithmetic instruction.
        unsafe {
            asm!(
                "fma.rn.f64 {d}, {a}, {b}, {c};",
                d = out(reg64) d,
                a = in(reg64) a.to_bits(), b = in(reg64) b.to_bits(), c = in(reg64) c.to_bits(),
                options(nostack, nomem, pure, preserves_flags),
            );
        }
        f64::from_bits(d)
    }
}
