//! The host side of [`crate::atomic`]: the host's atomics on the same
//! memory, relaxed (as PTX's `atom` without `.sem`), each followed by
//! [`global_access`] (a point where the interleaved schedule lets another
//! block run).
use super::global_access;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::Relaxed};

macro_rules! rmw {
    ($($name:ident: $t:ty, $atomic:ty, $method:ident;)*) => {$(
        /// # Safety
        /// `ptr` is a live, aligned value only accessed atomically meanwhile.
        pub(crate) unsafe fn $name(ptr: *mut $t, value: $t) -> $t {
            // SAFETY: forwarded from the caller.
            let old = unsafe { <$atomic>::from_ptr(ptr) }.$method(value, Relaxed);
            global_access(true);
            old
        }
    )*};
}

rmw! {
    fetch_add_u32: u32, AtomicU32, fetch_add;
    fetch_add_u64: u64, AtomicU64, fetch_add;
    fetch_max_u32: u32, AtomicU32, fetch_max;
    fetch_min_u32: u32, AtomicU32, fetch_min;
    fetch_max_i32: i32, AtomicI32, fetch_max;
    fetch_min_i32: i32, AtomicI32, fetch_min;
    exchange_u32: u32, AtomicU32, swap;
}

/// # Safety
/// As for [`fetch_add_u32`].
pub(crate) unsafe fn compare_exchange_u32(ptr: *mut u32, current: u32, new: u32) -> u32 {
    // SAFETY: forwarded from the caller.
    let a = unsafe { AtomicU32::from_ptr(ptr) };
    let old = match a.compare_exchange(current, new, Relaxed, Relaxed) {
        Ok(v) | Err(v) => v,
    };
    global_access(true);
    old
}

/// `atom.add.f32`: subnormal inputs and results flushed to zero of their
/// sign, a NaN result the canonical NaN (PTX ISA, `atom`), as a
/// compare-exchange loop.
///
/// # Safety
/// As for [`fetch_add_u32`].
pub(crate) unsafe fn fetch_add_f32(ptr: *mut f32, value: f32) -> f32 {
    let flush = |x: f32| {
        if x.is_subnormal() {
            0f32.copysign(x)
        } else {
            x
        }
    };
    // SAFETY: forwarded from the caller; the float and its bits have one
    // size and alignment.
    let a = unsafe { AtomicU32::from_ptr(ptr.cast()) };
    let old = a.fetch_update(Relaxed, Relaxed, |bits| {
        let sum = flush(flush(f32::from_bits(bits)) + flush(value));
        Some(super::gpu_nan_f32(sum).to_bits())
    });
    global_access(true);
    match old {
        Ok(v) | Err(v) => f32::from_bits(v),
    }
}

/// `atom.add.f64`: subnormals kept, a NaN result as the host gives it (as
/// the GPU does: an operand's payload, else `0xfff8_0000_0000_0000`), as a
/// compare-exchange loop.
///
/// # Safety
/// As for [`fetch_add_u32`].
pub(crate) unsafe fn fetch_add_f64(ptr: *mut f64, value: f64) -> f64 {
    // SAFETY: as in `fetch_add_f32`.
    let a = unsafe { AtomicU64::from_ptr(ptr.cast()) };
    let old = a.fetch_update(Relaxed, Relaxed, |bits| {
        Some((f64::from_bits(bits) + value).to_bits())
    });
    global_access(true);
    match old {
        Ok(v) | Err(v) => f64::from_bits(v),
    }
}
