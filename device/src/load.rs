//! Global-memory loads with explicit width and cache behaviour, for the
//! bandwidth-bound kernels:
//!
//! - [`load_nc_v4`]: one 128-bit `ld.global.nc.v4.b32` through the read-only
//!   (non-coherent) data cache, CUDA's `__ldg` on a `uint4`: the widest load
//!   a thread can issue, so a warp moves 512 bytes per instruction;
//! - [`store_v4`]: one 128-bit `st.global.v4.b32`, the store's counterpart
//!   (a warp writes 512 bytes per instruction);
//! - [`load_cg_b32`] / [`load_cg_b64`]: `ld.global.cg`, cached in L2 only,
//!   bypassing the (incoherent) L1: for reading what *other blocks of the
//!   same launch* wrote, after a fence (the reduction's last block reads
//!   the other blocks' partial results this way).
//!
//! ```
//! use cuda_kernels_device::{kernels, load, thread};
//! kernels! {
//!     /// `out[i] = ` the sum of the four words at `v`.
//!     ///
//!     /// # Safety
//!     /// `v` is 16-byte aligned, 16 bytes no thread writes; `out` one u32 per thread.
//!     pub fn sum4(v: *const [u32; 4], out: *mut u32) as SUM4 {
//!         // SAFETY: `v` is 16-byte aligned and points to 16 readable bytes that no
//!         // thread writes during this launch.
//!         let [a, b, c, d] = unsafe { load::load_nc_v4(v) };
//!         // SAFETY: one slot per thread.
//!         unsafe { *out.add(thread::index_1d()) = a + b + c + d };
//!     }
//! }
//! # fn main() {}
//! ```
//! On the host these are plain reads (the 16-byte one unaligned: simulated
//! buffers end at a guard page, so their start is only element-aligned; see
//! `sim::memory`).
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// Loads 16 bytes as four 32-bit words with `ld.global.nc.v4.b32` (the
/// read-only data cache). Reinterpret the words as the element type
/// (`f32::from_bits`, or pairs of words for 64-bit elements, low word first).
///
/// # Safety
/// `ptr` is 16-byte aligned and points to 16 readable bytes of global memory
/// that nothing writes while the kernel runs (the non-coherent cache may
/// return stale data for memory written during the launch).
#[inline(always)]
pub unsafe fn load_nc_v4(ptr: *const [u32; 4]) -> [u32; 4] {
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the caller's contract, as on the GPU (alignment aside).
    return unsafe { crate::sim::read_global(ptr) };
    #[cfg(target_arch = "nvptx64")]
    {
        let (a, b, c, d): (u32, u32, u32, u32);
        // SAFETY: the caller guarantees alignment, extent and read-only-ness.
        unsafe {
            asm!(
                "ld.global.nc.v4.b32 {{{a}, {b}, {c}, {d}}}, [{p}];",
                a = out(reg32) a,
                b = out(reg32) b,
                c = out(reg32) c,
                d = out(reg32) d,
                p = in(reg64) ptr,
                options(nostack, readonly, pure, preserves_flags),
            );
        }
        [a, b, c, d]
    }
}

/// Stores 16 bytes as four 32-bit words with one `st.global.v4.b32` (the
/// words of the element type, as for [`load_nc_v4`]). A 16-byte Rust value
/// written through a pointer may be split into two 8-byte stores; this one
/// is not.
///
/// # Safety
/// `ptr` is 16-byte aligned and points to 16 writable bytes of global
/// memory that no other thread reads or writes during the store.
#[inline(always)]
pub unsafe fn store_v4(ptr: *mut [u32; 4], value: [u32; 4]) {
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the caller's contract, as on the GPU (alignment aside).
    return unsafe { ptr.write_unaligned(value) };
    #[cfg(target_arch = "nvptx64")]
    {
        let [a, b, c, d] = value;
        // SAFETY: the caller guarantees alignment, extent and exclusivity.
        unsafe {
            asm!(
                "st.global.v4.b32 [{p}], {{{a}, {b}, {c}, {d}}};",
                p = in(reg64) ptr,
                a = in(reg32) a,
                b = in(reg32) b,
                c = in(reg32) c,
                d = in(reg32) d,
                options(nostack, preserves_flags),
            );
        }
    }
}

/// Loads a 32-bit word with `ld.global.cg` (L2 only, not L1).
///
/// # Safety
/// `ptr` is 4-byte aligned and points to a readable word of global memory;
/// if another block wrote it during this launch, that write was published
/// (fence, then an atomic this thread observed, then a fence on this side).
#[inline(always)]
pub unsafe fn load_cg_b32(ptr: *const u32) -> u32 {
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the caller's contract, as on the GPU (alignment aside).
    return unsafe { crate::sim::read_global(ptr) };
    #[cfg(target_arch = "nvptx64")]
    {
        let v: u32;
        // SAFETY: the caller guarantees a valid, aligned global address.
        unsafe {
            asm!(
                "ld.global.cg.b32 {v}, [{p}];",
                v = out(reg32) v,
                p = in(reg64) ptr,
                options(nostack, readonly, preserves_flags),
            );
        }
        v
    }
}

/// Loads a 64-bit word with `ld.global.cg` (L2 only, not L1).
///
/// # Safety
/// As for [`load_cg_b32`], with 8-byte alignment.
#[inline(always)]
pub unsafe fn load_cg_b64(ptr: *const u64) -> u64 {
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the caller's contract, as on the GPU (alignment aside).
    return unsafe { crate::sim::read_global(ptr) };
    #[cfg(target_arch = "nvptx64")]
    {
        let v: u64;
        // SAFETY: the caller guarantees a valid, aligned global address.
        unsafe {
            asm!(
                "ld.global.cg.b64 {v}, [{p}];",
                v = out(reg64) v,
                p = in(reg64) ptr,
                options(nostack, readonly, preserves_flags),
            );
        }
        v
    }
}
