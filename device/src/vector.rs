//! 128-bit (vector) accesses to block-shared memory: `ld.shared.v4.f32` and
//! `st.shared.v4.f32` (`LDS.128`/`STS.128` in SASS).
//!
//! A register-blocked GEMM reads four consecutive floats of a shared tile at
//! a time; one 128-bit load instead of four 32-bit ones quarters the
//! shared-memory instructions of its inner loop.
//!
//! Addresses are shared-window addresses (see [`shared`](super::shared)):
//! [`SharedArray::address`](super::shared::SharedArray::address) plus a byte
//! offset.
//!
//! On the host they are the simulator's bounds- and race-checked shared
//! accesses.
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// Loads four consecutive `f32` from shared memory (`ld.shared.v4.f32`).
///
/// # Safety
/// `addr` is a shared-window address, 16-byte aligned, of four live `f32`
/// that no other thread writes concurrently.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub unsafe fn load_shared_f32x4(addr: u32) -> [f32; 4] {
    #[cfg(not(target_arch = "nvptx64"))]
    return crate::sim::shared_load(addr);
    #[cfg(target_arch = "nvptx64")]
    {
        let (x, y, z, w): (u32, u32, u32, u32);
        // SAFETY: the caller guarantees an aligned, valid shared address.
        unsafe {
            asm!(
                "ld.shared.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];",
                x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w,
                a = in(reg32) addr,
                options(nostack, readonly, preserves_flags),
            );
        }
        [
            f32::from_bits(x),
            f32::from_bits(y),
            f32::from_bits(z),
            f32::from_bits(w),
        ]
    }
}

/// Stores four consecutive `f32` to shared memory (`st.shared.v4.f32`).
///
/// # Safety
/// `addr` is a shared-window address, 16-byte aligned, of four live `f32`
/// slots that no other thread reads or writes concurrently.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub unsafe fn store_shared_f32x4(addr: u32, v: [f32; 4]) {
    #[cfg(not(target_arch = "nvptx64"))]
    return crate::sim::shared_store(addr, v);
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: the caller guarantees an aligned, valid shared address.
        unsafe {
            asm!(
                "st.shared.v4.f32 [{a}], {{{x}, {y}, {z}, {w}}};",
                a = in(reg32) addr,
                x = in(reg32) v[0].to_bits(), y = in(reg32) v[1].to_bits(),
                z = in(reg32) v[2].to_bits(), w = in(reg32) v[3].to_bits(),
                options(nostack, preserves_flags),
            );
        }
    }
}

/// Stores one `f32` to shared memory (`st.shared.f32`) at a shared-window
/// address (for tiles addressed by byte offset rather than through a
/// [`SharedArray`](super::shared::SharedArray)).
///
/// # Safety
/// `addr` is a shared-window address, 4-byte aligned, of a live `f32` slot
/// that no other thread reads or writes concurrently.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub unsafe fn store_shared_f32(addr: u32, v: f32) {
    #[cfg(not(target_arch = "nvptx64"))]
    return crate::sim::shared_store(addr, v);
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: the caller guarantees an aligned, valid shared address.
        unsafe {
            asm!(
                "st.shared.f32 [{a}], {v};",
                a = in(reg32) addr, v = in(reg32) v.to_bits(),
                options(nostack, preserves_flags),
            );
        }
    }
}

/// Stores one 32-bit word to shared memory (`st.shared.b32`) at a
/// shared-window address (two 16-bit elements packed, for instance).
///
/// # Safety
/// `addr` is a shared-window address, 4-byte aligned, of a live 4-byte
/// slot that no other thread reads or writes concurrently.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub unsafe fn store_shared_b32(addr: u32, v: u32) {
    #[cfg(not(target_arch = "nvptx64"))]
    return crate::sim::shared_store(addr, v);
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: the caller guarantees an aligned, valid shared address.
        unsafe {
            asm!(
                "st.shared.b32 [{a}], {v};",
                a = in(reg32) addr, v = in(reg32) v,
                options(nostack, preserves_flags),
            );
        }
    }
}

/// Stores one 64-bit word to shared memory (`st.shared.b64`) at a
/// shared-window address (two `f32` packed, for instance).
///
/// # Safety
/// `addr` is a shared-window address, 8-byte aligned, of a live 8-byte
/// slot that no other thread reads or writes concurrently.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub unsafe fn store_shared_b64(addr: u32, v: u64) {
    #[cfg(not(target_arch = "nvptx64"))]
    return crate::sim::shared_store(addr, v);
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: the caller guarantees an aligned, valid shared address.
        unsafe {
            asm!(
                "st.shared.b64 [{a}], {v};",
                a = in(reg32) addr, v = in(reg64) v,
                options(nostack, preserves_flags),
            );
        }
    }
}
