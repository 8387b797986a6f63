//! Atomic read-modify-write operations on global memory (CUDA's
//! `atomicAdd`, `atomicMax`, `atomicExch`, `atomicCAS`…), as inline
//! `atom.global.*` PTX.
//!
//! Each returns the value the location held before the operation. They are
//! *relaxed* at GPU scope (PTX's default for `atom` without `.sem`): atomic
//! with respect to every other atomic on the same location from any thread
//! of the device, but they order nothing else. Where other memory accesses
//! must be ordered around them (publish data, then bump a counter; see the
//! counter, then read the data), put
//! [`thread_fence`](super::sync::thread_fence) (`membar.gl`) before the
//! publishing atomic and after the observing one, as the reduction's
//! last-block-done step does.
//!
//! ```
//! use cuda_kernels_device::prelude::*;
//! kernels! {
//!     /// Thread `i` draws a ticket from `counter` into `tickets[i]`.
//!     ///
//!     /// # Safety
//!     /// `counter` points to a u32, `tickets` to one u32 per thread.
//!     pub fn draw(counter: *mut u32, tickets: *mut u32) as DRAW {
//!         // SAFETY: `counter` points to a live, aligned u32 in global memory.
//!         let ticket = unsafe { atomic::fetch_add_u32(counter, 1) };
//!         // SAFETY: one slot per thread.
//!         unsafe { *tickets.add(thread::index_1d()) = ticket };
//!     }
//! }
//! # fn main() {}
//! ```
//!
//! (`core::sync::atomic` types lower to the same instructions, but rustc's
//! orderings are not fully honoured on nvptx; these functions say exactly
//! what they do.)
//!
//! On the host they are the host's atomics on the same memory
//! (`AtomicU32::from_ptr`…, relaxed; the float additions a compare-exchange
//! loop), so they stay correct when the simulator runs blocks on several OS
//! threads. Under the simulator's interleaved schedule each is also a point
//! where another block may run (after a store or read-modify-write, before
//! a load; `docs/simulator.md`).
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

macro_rules! atomic_rmw {
    ($(#[$doc:meta])* $name:ident, $t:ty, $reg:ident, $instr:literal) => {
        $(#[$doc])*
        ///
        /// Returns the previous value. Relaxed, GPU scope (see the
        /// [module docs](self) for ordering).
        ///
        /// # Safety
        /// `ptr` points to a live, naturally aligned value in global memory
        /// (not shared or local memory) that every concurrent access to
        /// reaches only through atomics or after a barrier/fence.
        #[inline(always)]
        pub unsafe fn $name(ptr: *mut $t, value: $t) -> $t {
            #[cfg(not(target_arch = "nvptx64"))]
            // SAFETY: the caller guarantees `ptr` is a valid, aligned global address.
            return unsafe { crate::sim::atomic::$name(ptr, value) };
            #[cfg(target_arch = "nvptx64")]
            {
                let old: $t;
                // SAFETY: the caller guarantees `ptr` is a valid global address.
                unsafe {
                    asm!(
                        concat!($instr, " {o}, [{p}], {v};"),
                        o = out($reg) old,
                        p = in(reg64) ptr,
                        v = in($reg) value,
                        options(nostack, preserves_flags),
                    );
                }
                old
            }
        }
    };
}

atomic_rmw!(
    /// `atomicAdd` on a `u32` (wrapping).
    fetch_add_u32, u32, reg32, "atom.global.add.u32"
);
atomic_rmw!(
    /// `atomicAdd` on a `u64` (wrapping).
    fetch_add_u64, u64, reg64, "atom.global.add.u64"
);
atomic_rmw!(
    /// `atomicAdd` on an `f32` (round to nearest even; the order of
    /// concurrent additions, and so the rounding, is unspecified).
    fetch_add_f32, f32, reg32, "atom.global.add.f32"
);
atomic_rmw!(
    /// `atomicAdd` on an `f64` (sm_60 and later).
    fetch_add_f64, f64, reg64, "atom.global.add.f64"
);
atomic_rmw!(
    /// `atomicMax` on a `u32`.
    fetch_max_u32, u32, reg32, "atom.global.max.u32"
);
atomic_rmw!(
    /// `atomicMin` on a `u32`.
    fetch_min_u32, u32, reg32, "atom.global.min.u32"
);
atomic_rmw!(
    /// `atomicMax` on an `i32`.
    fetch_max_i32, i32, reg32, "atom.global.max.s32"
);
atomic_rmw!(
    /// `atomicMin` on an `i32`.
    fetch_min_i32, i32, reg32, "atom.global.min.s32"
);
atomic_rmw!(
    /// `atomicExch` on a `u32`: stores `value`.
    exchange_u32, u32, reg32, "atom.global.exch.b32"
);

/// `atomicCAS` on a `u32`: if `*ptr == current`, stores `new`. Returns the
/// previous value (equal to `current` exactly when the store happened).
/// Relaxed, GPU scope.
///
/// # Safety
/// As for [`fetch_add_u32`]: `ptr` is a live, aligned `u32` in global memory.
#[inline(always)]
pub unsafe fn compare_exchange_u32(ptr: *mut u32, current: u32, new: u32) -> u32 {
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the caller guarantees `ptr` is a valid, aligned global address.
    return unsafe { crate::sim::atomic::compare_exchange_u32(ptr, current, new) };
    #[cfg(target_arch = "nvptx64")]
    {
        let old: u32;
        // SAFETY: the caller guarantees `ptr` is a valid global address.
        unsafe {
            asm!(
                "atom.global.cas.b32 {o}, [{p}], {c}, {n};",
                o = out(reg32) old,
                p = in(reg64) ptr,
                c = in(reg32) current,
                n = in(reg32) new,
                options(nostack, preserves_flags),
            );
        }
        old
    }
}

/// `ld.acquire.gpu.b32`: reads a `u32` that another block publishes with
/// [`store_release_u32`]; the writes that block made before its release
/// are visible to this thread's reads after this load, once it sees the
/// released value (a flag of a decoupled look-back).
///
/// # Safety
/// `ptr` points to a live, aligned `u32` in global memory that concurrent
/// threads access only through atomics or these two functions.
#[inline(always)]
pub unsafe fn load_acquire_u32(ptr: *const u32) -> u32 {
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::global_access(false);
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the caller guarantees a valid, aligned u32 accessed atomically.
    return unsafe { std::sync::atomic::AtomicU32::from_ptr(ptr.cast_mut()) }
        .load(std::sync::atomic::Ordering::Acquire);
    #[cfg(target_arch = "nvptx64")]
    {
        let v: u32;
        // SAFETY: the caller guarantees a valid global address.
        unsafe {
            asm!("ld.acquire.gpu.global.b32 {v}, [{p}];", v = out(reg32) v, p = in(reg64) ptr,
                 options(nostack, preserves_flags));
        }
        v
    }
}

/// `st.release.gpu.b32`: stores `value` after every earlier write of this
/// thread is visible GPU-wide (see [`load_acquire_u32`]).
///
/// # Safety
/// As for [`load_acquire_u32`].
#[inline(always)]
pub unsafe fn store_release_u32(ptr: *mut u32, value: u32) {
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // SAFETY: the caller guarantees a valid, aligned u32 accessed atomically.
        unsafe { std::sync::atomic::AtomicU32::from_ptr(ptr) }
            .store(value, std::sync::atomic::Ordering::Release);
        crate::sim::global_access(true);
    }
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller guarantees a valid global address.
    unsafe {
        asm!("st.release.gpu.global.b32 [{p}], {v};", p = in(reg64) ptr, v = in(reg32) value,
             options(nostack, preserves_flags));
    }
}

/// `ld.relaxed.gpu.b64`: reads a `u64` atomically (all 64 bits from one
/// store), ordering nothing else: a word that carries its own payload, as a
/// look-back's flag and 32-bit value packed together.
///
/// # Safety
/// `ptr` points to a live, 8-byte aligned `u64` in global memory that
/// concurrent threads access only through atomics or these functions.
#[inline(always)]
pub unsafe fn load_relaxed_u64(ptr: *const u64) -> u64 {
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::global_access(false);
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the caller guarantees a valid, aligned u64 accessed atomically.
    return unsafe { std::sync::atomic::AtomicU64::from_ptr(ptr.cast_mut()) }
        .load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(target_arch = "nvptx64")]
    {
        let v: u64;
        // SAFETY: the caller guarantees a valid global address.
        unsafe {
            asm!("ld.relaxed.gpu.global.b64 {v}, [{p}];", v = out(reg64) v, p = in(reg64) ptr,
                 options(nostack, preserves_flags));
        }
        v
    }
}

/// `st.relaxed.gpu.b64`: stores a `u64` atomically (see
/// [`load_relaxed_u64`]), ordering nothing else.
///
/// # Safety
/// As for [`load_relaxed_u64`].
#[inline(always)]
pub unsafe fn store_relaxed_u64(ptr: *mut u64, value: u64) {
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // SAFETY: the caller guarantees a valid, aligned u64 accessed atomically.
        unsafe { std::sync::atomic::AtomicU64::from_ptr(ptr) }
            .store(value, std::sync::atomic::Ordering::Relaxed);
        crate::sim::global_access(true);
    }
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller guarantees a valid global address.
    unsafe {
        asm!("st.relaxed.gpu.global.b64 [{p}], {v};", p = in(reg64) ptr, v = in(reg64) value,
             options(nostack, preserves_flags));
    }
}
