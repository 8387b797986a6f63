//! Block-shared memory (CUDA's `__shared__`).
//!
//! Rust cannot name PTX's `.shared` address space, so shared arrays are
//! declared in PTX (`global_asm!`) and reached through their 32-bit address
//! in the shared window. Loads and stores go through `ld.shared`/`st.shared`
//! (`LDS`/`STS` in SASS); a generic pointer would compile to slower generic
//! `LD`/`ST`.
//!
//! Static arrays:
//! ```ignore
//! use cuda_kernels_device::{shared_array, sync::sync_threads};
//! let tile = shared_array!(matmul_tile_a: [f32; 32 * 32]);
//! // SAFETY: i < 32 * 32.
//! unsafe { tile.store(i, x) };
//! sync_threads();
//! let y = unsafe { tile.load(j) };
//! ```
//! The name becomes a module-scope PTX symbol: it must be unique in the crate
//! (a duplicate is a `ptxas` error, caught by the offline PTX check), and the
//! size must be a constant.
//!
//! Dynamic shared memory, sized by the launch's shared-memory bytes, is
//! [`dynamic_shared_address`].
//!
//! On the host, the simulator gives each block its own shared memory: the
//! dynamic bytes first, then each static array where it is first declared
//! (the same address for every thread of the block; the launch's budget
//! counts them). Addresses are byte offsets into it; every load and store is
//! bounds-checked (a fault past the end) and checked for races between the
//! block's threads (see the `sim` module).
#[cfg(target_arch = "nvptx64")]
use core::arch::{asm, global_asm};
use core::marker::PhantomData;

/// A value that can live in shared memory: moved as 32- or 64-bit words.
pub trait SharedScalar: Copy {
    /// Loads from a shared-window address.
    ///
    /// # Safety
    /// `addr` is a shared-window address of a live, aligned value of `Self`.
    unsafe fn load_shared(addr: u32) -> Self;
    /// Stores to a shared-window address.
    ///
    /// # Safety
    /// `addr` is a shared-window address of a live, aligned slot of `Self`.
    unsafe fn store_shared(addr: u32, value: Self);
}

#[cfg(target_arch = "nvptx64")]
macro_rules! shared_scalar {
    ($bits:ty, $reg:ident, $ld:literal, $st:literal: $($t:ty),*) => {$(
        impl SharedScalar for $t {
            #[inline(always)]
            unsafe fn load_shared(addr: u32) -> Self {
                let bits: $bits;
                // SAFETY: the caller guarantees addr is a valid shared slot.
                unsafe {
                    asm!(concat!($ld, " {v}, [{a}];"), v = out($reg) bits, a = in(reg32) addr,
                         options(nostack, readonly, preserves_flags));
                }
                <$t>::from_ne_bytes(bits.to_ne_bytes())
            }
            #[inline(always)]
            unsafe fn store_shared(addr: u32, value: Self) {
                let bits = <$bits>::from_ne_bytes(value.to_ne_bytes());
                // SAFETY: the caller guarantees addr is a valid shared slot.
                unsafe {
                    asm!(concat!($st, " [{a}], {v};"), a = in(reg32) addr, v = in($reg) bits,
                         options(nostack, preserves_flags));
                }
            }
        }
    )*};
}
#[cfg(not(target_arch = "nvptx64"))]
macro_rules! shared_scalar {
    ($bits:ty, $reg:ident, $ld:literal, $st:literal: $($t:ty),*) => {$(
        impl SharedScalar for $t {
            #[inline(always)]
            #[track_caller]
            unsafe fn load_shared(addr: u32) -> Self {
                crate::sim::shared_load(addr)
            }
            #[inline(always)]
            #[track_caller]
            unsafe fn store_shared(addr: u32, value: Self) {
                crate::sim::shared_store(addr, value)
            }
        }
    )*};
}
shared_scalar!(u32, reg32, "ld.shared.b32", "st.shared.b32": u32, i32, f32);
shared_scalar!(u64, reg64, "ld.shared.b64", "st.shared.b64": u64, i64, f64);

/// A typed view of `N` elements of block-shared memory, by shared-window
/// address. Copyable: every thread of the block holds the same address.
#[derive(Clone, Copy)]
pub struct SharedArray<T, const N: usize> {
    base: u32,
    _t: PhantomData<T>,
}

impl<T: SharedScalar, const N: usize> SharedArray<T, N> {
    /// Wraps a shared-window address.
    ///
    /// # Safety
    /// `base` is the shared-window address of at least `N` aligned `T`s that
    /// live for the whole kernel (what [`shared_array!`](crate::shared_array) declares).
    #[inline(always)]
    pub unsafe fn from_shared_address(base: u32) -> Self {
        Self {
            base,
            _t: PhantomData,
        }
    }

    /// The shared-window address of element 0.
    #[inline(always)]
    pub fn address(&self) -> u32 {
        self.base
    }

    /// Number of elements.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        N
    }

    /// Whether the array is empty.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        N == 0
    }

    /// Reads element `i` (`ld.shared`).
    ///
    /// # Safety
    /// `i < N`, and no other thread writes element `i` concurrently (separate
    /// the write and this read by [`sync_threads`](super::sync::sync_threads)).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load(&self, i: usize) -> T {
        // SAFETY: i < N by the caller; the array lives for the kernel.
        unsafe { T::load_shared(self.base + (i * core::mem::size_of::<T>()) as u32) }
    }

    /// Writes element `i` (`st.shared`).
    ///
    /// # Safety
    /// `i < N`, and no other thread reads or writes element `i` concurrently.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store(&self, i: usize, value: T) {
        // SAFETY: i < N by the caller; the array lives for the kernel.
        unsafe { T::store_shared(self.base + (i * core::mem::size_of::<T>()) as u32, value) }
    }
}

/// Declares a static block-shared array of a constant size and evaluates to a
/// [`SharedArray`] view of it: `shared_array!(name: [T; N])`.
///
/// `name` becomes a PTX symbol at module scope, aligned to 16 bytes; it must
/// be unique in the crate. Its contents are undefined at kernel start. `T`
/// and `N` may name items of the enclosing module (constants, types), not
/// local variables or generic parameters: the size is fixed in the PTX.
///
/// On the host, the simulator places the array in the block's shared memory
/// where it is first declared in the launch (16-byte aligned).
#[macro_export]
macro_rules! shared_array {
    ($name:ident : [$t:ty; $n:expr]) => {{
        // `global_asm!` is only allowed where items are, so it sits in a module
        // of the array's name (which also keeps two arrays of one name apart
        // in Rust; in PTX the name must be unique anyway).
        #[cfg(target_arch = "nvptx64")]
        #[allow(non_snake_case, dead_code)]
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            ::core::arch::global_asm!(
                concat!(".shared .align 16 .b8 ", stringify!($name), "[{bytes}];"),
                bytes = const ::core::mem::size_of::<$t>() * ($n),
            );
        }
        let base: u32;
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: `mov` of a symbol's address has no side effects.
        unsafe {
            ::core::arch::asm!(
                concat!("mov.u32 {r}, ", stringify!($name), ";"),
                r = out(reg32) base,
                options(nostack, nomem, pure, preserves_flags),
            );
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            // The array's identity in the launch: the address of a static of its own.
            static KEY: &str = concat!(module_path!(), "::", stringify!($name));
            base = $crate::sim::static_shared(
                &KEY as *const &str as usize,
                stringify!($name),
                ::core::mem::size_of::<$t>() * ($n),
            );
        }
        // SAFETY: `base` addresses the array declared just above, N * size_of::<T>() bytes.
        unsafe { $crate::shared::SharedArray::<$t, { $n }>::from_shared_address(base) }
    }};
}

#[cfg(target_arch = "nvptx64")]
global_asm!(".extern .shared .align 16 .b8 __cuda_kernels_dyn_smem[];");

/// The shared-window address of the launch's dynamic shared memory (the
/// `shared_mem_bytes` of the launch), aligned to 16 bytes.
///
/// Wrap it with [`SharedArray::from_shared_address`] for a typed view; the
/// host launcher must pass at least `N * size_of::<T>()` bytes.
#[inline(always)]
pub fn dynamic_shared_address() -> u32 {
    #[cfg(not(target_arch = "nvptx64"))]
    return crate::sim::dynamic_shared();
    #[cfg(target_arch = "nvptx64")]
    {
        let base: u32;
        // SAFETY: `mov` of a symbol's address has no side effects.
        unsafe {
            asm!("mov.u32 {r}, __cuda_kernels_dyn_smem;", r = out(reg32) base,
                 options(nostack, nomem, pure, preserves_flags));
        }
        base
    }
}
