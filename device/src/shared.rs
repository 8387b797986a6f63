//! Block-shared memory (CUDA's `__shared__`).
//!
//! Rust cannot name PTX's `.shared` address space, so shared arrays are
//! declared in PTX (`global_asm!`) and reached through their 32-bit address
//! in the shared window. Loads and stores go through `ld.shared`/`st.shared`
//! (`LDS`/`STS` in SASS); a generic pointer would compile to slower generic
//! `LD`/`ST`.
//!
//! Static arrays:
//! ```
//! use cuda_kernels_device::prelude::*;
//! kernels! {
//!     /// Each block of 1024 threads reverses its values of `x` through a tile.
//!     ///
//!     /// # Safety
//!     /// `x` holds 1024 f32 per block; blocks of 1024 threads.
//!     pub fn reverse(x: *mut f32) as REVERSE {
//!         let tile = shared_array!(matmul_tile_a: [f32; 32 * 32]);
//!         let (i, j) = (thread::thread_idx_x() as usize, 1023 - thread::thread_idx_x() as usize);
//!         // SAFETY: the block's 1024 values.
//!         let x = unsafe { x.add(thread::block_idx_x() as usize * 1024) };
//!         // SAFETY: i < 32 * 32.
//!         unsafe { tile.store(i, *x.add(i)) };
//!         sync_threads();
//!         // SAFETY: j < 32 * 32, written before the barrier.
//!         let y = unsafe { tile.load(j) };
//!         // SAFETY: i < 1024, this thread's value.
//!         unsafe { *x.add(i) = y };
//!     }
//! }
//! # fn main() {}
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
            #[cfg_attr(target_arch = "nvptx64", inline(always))]
            #[track_caller]
            #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
            unsafe fn load_shared(addr: u32) -> Self {
                crate::sim::shared_load(addr)
            }
            #[cfg_attr(target_arch = "nvptx64", inline(always))]
            #[track_caller]
            #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
            unsafe fn store_shared(addr: u32, value: Self) {
                crate::sim::shared_store(addr, value)
            }
        }
    )*};
}
shared_scalar!(u32, reg32, "ld.shared.b32", "st.shared.b32": u32, i32, f32);
shared_scalar!(u64, reg64, "ld.shared.b64", "st.shared.b64": u64, i64, f64);

/// The 16-bit floats, moved as their bits (`ld.shared.b16`/`st.shared.b16`).
macro_rules! shared_scalar16 {
    ($($t:ident),*) => {$(
        impl SharedScalar for crate::float16::$t {
            #[cfg_attr(target_arch = "nvptx64", inline(always))]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
            unsafe fn load_shared(addr: u32) -> Self {
                #[cfg(not(target_arch = "nvptx64"))]
                return crate::sim::shared_load(addr);
                #[cfg(target_arch = "nvptx64")]
                {
                    let bits: u16;
                    // SAFETY: the caller guarantees addr is a valid shared slot.
                    unsafe {
                        asm!("ld.shared.b16 {v}, [{a}];", v = out(reg16) bits, a = in(reg32) addr,
                             options(nostack, readonly, preserves_flags));
                    }
                    Self::from_bits(bits)
                }
            }
            #[cfg_attr(target_arch = "nvptx64", inline(always))]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
            unsafe fn store_shared(addr: u32, value: Self) {
                #[cfg(not(target_arch = "nvptx64"))]
                crate::sim::shared_store(addr, value);
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: the caller guarantees addr is a valid shared slot.
                unsafe {
                    asm!("st.shared.b16 [{a}], {v};", a = in(reg32) addr, v = in(reg16) value.to_bits(),
                         options(nostack, preserves_flags));
                }
            }
        }
    )*};
}
shared_scalar16!(f16, bf16);

/// Sixteen bytes as four 32-bit words (`ld.shared.v4.b32`/`st.shared.v4.b32`,
/// CUDA's `uint4`): the widest access a thread makes, one instruction for
/// what would be four. The address must be 16-byte aligned (a located fault
/// otherwise, on the GPU and on the simulator). A warp's 16-byte accesses
/// are served eight lanes at a time, so they are free of bank conflicts when
/// each group of eight lanes touches eight distinct 16-byte columns of a
/// 128-byte row.
impl SharedScalar for [u32; 4] {
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
    unsafe fn load_shared(addr: u32) -> Self {
        #[cfg(not(target_arch = "nvptx64"))]
        return crate::sim::shared_load(addr);
        #[cfg(target_arch = "nvptx64")]
        {
            let (a, b, c, d): (u32, u32, u32, u32);
            // SAFETY: the caller guarantees addr is a valid, aligned shared slot.
            unsafe {
                asm!("ld.shared.v4.b32 {{{a}, {b}, {c}, {d}}}, [{p}];",
                     a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
                     p = in(reg32) addr, options(nostack, readonly, preserves_flags));
            }
            [a, b, c, d]
        }
    }
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
    unsafe fn store_shared(addr: u32, value: Self) {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::sim::shared_store(addr, value);
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller guarantees addr is a valid, aligned shared slot.
        unsafe {
            let [a, b, c, d] = value;
            asm!("st.shared.v4.b32 [{p}], {{{a}, {b}, {c}, {d}}};",
                 p = in(reg32) addr, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c,
                 d = in(reg32) d, options(nostack, preserves_flags));
        }
    }
}

/// A [`SharedScalar`] with atomic addition on shared memory (CUDA's
/// `atomicAdd` on a `__shared__` address): `u32`, `i32`, `u64`, `i64`, `f32`,
/// `f64`, as `atom.shared.add.*`.
///
/// Atomic with respect to every other atomic on the same location from the
/// threads of the block (`.cta` scope is all shared memory has), relaxed:
/// they order nothing else (put a [`sync_threads`](super::sync::sync_threads)
/// between the atomics and the plain reads of their result). A plain load or
/// store of the same location by another thread, with no barrier between,
/// is a race (the simulator reports it).
///
/// The address must be aligned to the type's size: a misaligned one is a
/// located fault (file, line, block and thread), on the GPU and on the
/// simulator.
pub trait SharedAtomicAdd: SharedScalar {
    /// Adds `value` to the `Self` at shared-window address `addr` (wrapping
    /// for integers; round to nearest even for floats) and returns the
    /// previous value.
    ///
    /// # Safety
    /// `addr` is a shared-window address of a live `Self`.
    unsafe fn shared_fetch_add(addr: u32, value: Self) -> Self;
}

/// A [`SharedAtomicAdd`] integer (`u32`, `i32`, `u64`, `i64`) with the other
/// atomic operations on shared memory: CUDA's `atomicMin`, `atomicMax`,
/// `atomicAnd`, `atomicOr`, `atomicXor`, `atomicExch` and `atomicCAS`, as
/// `atom.shared.*`. Each returns the previous value; ordering and alignment
/// as for [`SharedAtomicAdd`].
pub trait SharedAtomic: SharedAtomicAdd + Eq {
    /// Stores the smaller of the value at `addr` and `value`.
    ///
    /// # Safety
    /// `addr` is a shared-window address of a live `Self`.
    unsafe fn shared_fetch_min(addr: u32, value: Self) -> Self;
    /// Stores the larger of the value at `addr` and `value`.
    ///
    /// # Safety
    /// As for [`shared_fetch_min`](Self::shared_fetch_min).
    unsafe fn shared_fetch_max(addr: u32, value: Self) -> Self;
    /// Stores the bitwise and of the value at `addr` and `value`.
    ///
    /// # Safety
    /// As for [`shared_fetch_min`](Self::shared_fetch_min).
    unsafe fn shared_fetch_and(addr: u32, value: Self) -> Self;
    /// Stores the bitwise or of the value at `addr` and `value`.
    ///
    /// # Safety
    /// As for [`shared_fetch_min`](Self::shared_fetch_min).
    unsafe fn shared_fetch_or(addr: u32, value: Self) -> Self;
    /// Stores the bitwise exclusive or of the value at `addr` and `value`.
    ///
    /// # Safety
    /// As for [`shared_fetch_min`](Self::shared_fetch_min).
    unsafe fn shared_fetch_xor(addr: u32, value: Self) -> Self;
    /// Stores `value`.
    ///
    /// # Safety
    /// As for [`shared_fetch_min`](Self::shared_fetch_min).
    unsafe fn shared_exchange(addr: u32, value: Self) -> Self;
    /// Stores `new` if the value at `addr` is `current`; the returned
    /// previous value equals `current` exactly when the store happened.
    ///
    /// # Safety
    /// As for [`shared_fetch_min`](Self::shared_fetch_min).
    unsafe fn shared_compare_exchange(addr: u32, current: Self, new: Self) -> Self;
}

/// Ends the thread with a located fault when `addr` is not aligned to `T`
/// (the GPU's `atom.shared` would raise an unlocated misaligned-address
/// error instead).
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[track_caller]
#[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
fn check_atomic_alignment<T>(addr: u32) {
    if !addr.is_multiple_of(core::mem::size_of::<T>() as u32) {
        let at = core::panic::Location::caller();
        crate::fault::fail(
            at.file(),
            at.line(),
            at.column(),
            "misaligned shared-memory atomic",
        );
    }
}

/// One shared-memory atomic: the alignment check, then `atom.shared.<op>`
/// on the GPU or the simulator's read-modify-write (`$host`, a closure from
/// the old value to the new one).
macro_rules! shared_rmw {
    ($t:ty, $reg:ident, $instr:expr, $addr:ident, $value:ident, $host:expr) => {{
        check_atomic_alignment::<$t>($addr);
        #[cfg(not(target_arch = "nvptx64"))]
        return crate::sim::shared_rmw::<$t>($addr, $host);
        #[cfg(target_arch = "nvptx64")]
        {
            let old: $t;
            // SAFETY: the caller guarantees `addr` is a live shared slot of
            // this type; its alignment was checked above.
            unsafe {
                asm!(
                    concat!($instr, " {o}, [{a}], {v};"),
                    o = out($reg) old,
                    a = in(reg32) $addr,
                    v = in($reg) $value,
                    options(nostack, preserves_flags),
                );
            }
            old
        }
    }};
}

macro_rules! shared_atomic_add {
    ($($t:ty, $reg:ident, $instr:literal, $host_add:expr;)*) => {$(
        impl SharedAtomicAdd for $t {
            #[cfg_attr(target_arch = "nvptx64", inline(always))]
            #[track_caller]
            #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
            unsafe fn shared_fetch_add(addr: u32, value: $t) -> $t {
                shared_rmw!($t, $reg, $instr, addr, value, |old: $t| $host_add(old, value))
            }
        }
    )*};
}

shared_atomic_add! {
    u32, reg32, "atom.shared.add.u32", u32::wrapping_add;
    i32, reg32, "atom.shared.add.s32", i32::wrapping_add;
    u64, reg64, "atom.shared.add.u64", u64::wrapping_add;
    // PTX has no `atom.add.s64`: in two's complement u64's is the same.
    i64, reg64, "atom.shared.add.u64", i64::wrapping_add;
    f32, reg32, "atom.shared.add.f32", <f32 as core::ops::Add>::add;
    f64, reg64, "atom.shared.add.f64", <f64 as core::ops::Add>::add;
}

macro_rules! shared_atomic_int {
    ($($t:ty, $reg:ident, $signed:literal, $bits:literal;)*) => {$(
        impl SharedAtomic for $t {
            #[cfg_attr(target_arch = "nvptx64", inline(always))]
            #[track_caller]
            #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
            unsafe fn shared_fetch_min(addr: u32, value: $t) -> $t {
                shared_rmw!($t, $reg, concat!("atom.shared.min.", $signed), addr, value,
                            |old: $t| old.min(value))
            }
            #[cfg_attr(target_arch = "nvptx64", inline(always))]
            #[track_caller]
            #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
            unsafe fn shared_fetch_max(addr: u32, value: $t) -> $t {
                shared_rmw!($t, $reg, concat!("atom.shared.max.", $signed), addr, value,
                            |old: $t| old.max(value))
            }
            #[cfg_attr(target_arch = "nvptx64", inline(always))]
            #[track_caller]
            #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
            unsafe fn shared_fetch_and(addr: u32, value: $t) -> $t {
                shared_rmw!($t, $reg, concat!("atom.shared.and.", $bits), addr, value,
                            |old: $t| old & value)
            }
            #[cfg_attr(target_arch = "nvptx64", inline(always))]
            #[track_caller]
            #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
            unsafe fn shared_fetch_or(addr: u32, value: $t) -> $t {
                shared_rmw!($t, $reg, concat!("atom.shared.or.", $bits), addr, value,
                            |old: $t| old | value)
            }
            #[cfg_attr(target_arch = "nvptx64", inline(always))]
            #[track_caller]
            #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
            unsafe fn shared_fetch_xor(addr: u32, value: $t) -> $t {
                shared_rmw!($t, $reg, concat!("atom.shared.xor.", $bits), addr, value,
                            |old: $t| old ^ value)
            }
            #[cfg_attr(target_arch = "nvptx64", inline(always))]
            #[track_caller]
            #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
            unsafe fn shared_exchange(addr: u32, value: $t) -> $t {
                shared_rmw!($t, $reg, concat!("atom.shared.exch.", $bits), addr, value,
                            |_: $t| value)
            }
            #[cfg_attr(target_arch = "nvptx64", inline(always))]
            #[track_caller]
            #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
            unsafe fn shared_compare_exchange(addr: u32, current: $t, new: $t) -> $t {
                check_atomic_alignment::<$t>(addr);
                #[cfg(not(target_arch = "nvptx64"))]
                return crate::sim::shared_rmw::<$t>(addr, |old: $t| {
                    if old == current { new } else { old }
                });
                #[cfg(target_arch = "nvptx64")]
                {
                    let old: $t;
                    // SAFETY: as in `shared_rmw!`.
                    unsafe {
                        asm!(
                            concat!("atom.shared.cas.", $bits, " {o}, [{a}], {c}, {n};"),
                            o = out($reg) old,
                            a = in(reg32) addr,
                            c = in($reg) current,
                            n = in($reg) new,
                            options(nostack, preserves_flags),
                        );
                    }
                    old
                }
            }
        }
    )*};
}

shared_atomic_int! {
    u32, reg32, "u32", "b32";
    i32, reg32, "s32", "b32";
    u64, reg64, "u64", "b64";
    i64, reg64, "s64", "b64";
}

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

    /// The shared-window address of element `i` (not checked against `N`).
    #[inline(always)]
    pub fn element_address(&self, i: usize) -> u32 {
        self.base + (i * core::mem::size_of::<T>()) as u32
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
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
    pub unsafe fn load(&self, i: usize) -> T {
        // SAFETY: i < N by the caller; the array lives for the kernel.
        unsafe { T::load_shared(self.element_address(i)) }
    }

    /// Writes element `i` (`st.shared`).
    ///
    /// # Safety
    /// `i < N`, and no other thread reads or writes element `i` concurrently.
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
    pub unsafe fn store(&self, i: usize, value: T) {
        // SAFETY: i < N by the caller; the array lives for the kernel.
        unsafe { T::store_shared(self.element_address(i), value) }
    }
}

impl<T: SharedAtomicAdd, const N: usize> SharedArray<T, N> {
    /// `atomicAdd` on element `i`: adds `value` and returns the previous
    /// value (see [`SharedAtomicAdd`] for what it orders).
    ///
    /// # Safety
    /// `i < N`; no other thread reads or writes element `i` without an
    /// atomic meanwhile (separate plain accesses by a barrier).
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    pub unsafe fn fetch_add(&self, i: usize, value: T) -> T {
        // SAFETY: i < N by the caller; the array lives for the kernel.
        unsafe { T::shared_fetch_add(self.element_address(i), value) }
    }
}

/// `atom.shared.add.u32` at an address that is 4-byte aligned by
/// construction (an element of a `SharedArray<u32, _>`), without the
/// alignment check of [`SharedArray::fetch_add`], whose fault path, once per
/// atomic of an unrolled loop or a hot one, costs a branch each (and keeps
/// `ptxas` from predicating the atomic). The simulator checks it still.
///
/// # Safety
/// `addr` is a live, aligned u32 of shared memory.
#[inline(always)]
pub(crate) unsafe fn shared_add_aligned_u32(addr: u32, value: u32) -> u32 {
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the caller's contract.
    return unsafe { <u32 as SharedAtomicAdd>::shared_fetch_add(addr, value) };
    #[cfg(target_arch = "nvptx64")]
    {
        let old: u32;
        // SAFETY: the caller guarantees a live, aligned shared u32.
        unsafe {
            core::arch::asm!(
                "atom.shared.add.u32 {o}, [{a}], {v};",
                o = out(reg32) old,
                a = in(reg32) addr,
                v = in(reg32) value,
                options(nostack, preserves_flags),
            );
        }
        old
    }
}

/// The [`SharedAtomic`] operations on an element of a [`SharedArray`].
macro_rules! shared_array_atomics {
    ($($(#[$doc:meta])* $method:ident => $op:ident;)*) => {
        impl<T: SharedAtomic, const N: usize> SharedArray<T, N> {
            $(
                $(#[$doc])*
                ///
                /// # Safety
                /// As for [`fetch_add`](Self::fetch_add).
                #[cfg_attr(target_arch = "nvptx64", inline(always))]
                #[track_caller]
                #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
                pub unsafe fn $method(&self, i: usize, value: T) -> T {
                    // SAFETY: i < N by the caller; the array lives for the kernel.
                    unsafe { T::$op(self.element_address(i), value) }
                }
            )*

            /// `atomicCAS` on element `i`: stores `new` if it holds `current`;
            /// returns the previous value (equal to `current` exactly when stored).
            ///
            /// # Safety
            /// As for [`fetch_add`](Self::fetch_add).
            #[cfg_attr(target_arch = "nvptx64", inline(always))]
            #[track_caller]
            #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
            pub unsafe fn compare_exchange(&self, i: usize, current: T, new: T) -> T {
                // SAFETY: i < N by the caller; the array lives for the kernel.
                unsafe { T::shared_compare_exchange(self.element_address(i), current, new) }
            }
        }
    };
}

shared_array_atomics! {
    /// `atomicMin` on element `i`; returns the previous value.
    fetch_min => shared_fetch_min;
    /// `atomicMax` on element `i`; returns the previous value.
    fetch_max => shared_fetch_max;
    /// `atomicAnd` on element `i`; returns the previous value.
    fetch_and => shared_fetch_and;
    /// `atomicOr` on element `i`; returns the previous value.
    fetch_or => shared_fetch_or;
    /// `atomicXor` on element `i`; returns the previous value.
    fetch_xor => shared_fetch_xor;
    /// `atomicExch` on element `i`: stores `value`, returns the previous one.
    exchange => shared_exchange;
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
