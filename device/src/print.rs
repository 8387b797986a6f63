//! Device-side formatted printing through CUDA's `vprintf` system call
//! (what `printf` in CUDA C compiles to).
//!
//! ```
//! use cuda_kernels_device::{gpu_printf, kernels, thread::{block_idx_x, thread_idx_x}};
//! kernels! {
//!     /// Prints each thread's `x`.
//!     ///
//!     /// # Safety
//!     /// None needed.
//!     pub fn show(x: f32) as SHOW {
//!         gpu_printf!("thread %u of block %u: x = %f\n", thread_idx_x(), block_idx_x(), x);
//!     }
//! }
//! # fn main() {}
//! ```
//! The format string follows C `printf`. Arguments are laid out as `vprintf`
//! expects them: each at its natural alignment, `f32` promoted to `f64` (as C
//! varargs do), so use `%d`/`%u`/`%x` for 32-bit integers, `%ld`/`%lu` for
//! 64-bit ones and `usize`, `%f`/`%e`/`%g` for floats, `%p` for pointers.
//! At most 64 bytes of arguments. The output appears on the host's stdout when
//! the host next synchronizes with the device.
//!
//! On the host, the simulator formats the same C format string with the same
//! packed arguments (the conversions `%d %i %u %x %X %o %c %s %p %f %e %g
//! %%` and their upper-case forms, with flags, width, precision and the
//! `hh h l ll z` length modifiers) and writes each block's text to stdout
//! when the block ends, in block order.
#[cfg(target_arch = "nvptx64")]
use core::arch::nvptx;

/// The argument buffer handed to `vprintf`.
#[repr(C, align(8))]
pub struct PrintfArgs {
    bytes: [u8; 64],
    len: usize,
}

/// A value `gpu_printf!` can pass: written at its natural alignment, as
/// `vprintf` reads it.
pub trait PrintfArg {
    /// Appends `self` to the argument buffer.
    fn push_to(self, args: &mut PrintfArgs);
}

impl PrintfArgs {
    /// An empty buffer.
    #[inline(always)]
    pub const fn new() -> Self {
        Self {
            bytes: [0; 64],
            len: 0,
        }
    }

    #[inline(always)]
    fn push_bytes<const W: usize>(&mut self, value: [u8; W]) {
        let start = self.len.div_ceil(W) * W;
        // Byte by byte through `get_mut`: no panic path (and so no
        // formatting code) in the kernel, whatever the optimiser proves.
        if start
            .checked_add(W)
            .is_some_and(|end| end <= self.bytes.len())
        {
            for (k, b) in value.into_iter().enumerate() {
                if let Some(d) = self.bytes.get_mut(start + k) {
                    *d = b;
                }
            }
            self.len = start + W;
        }
    }

    /// The buffer's address for `vprintf`.
    #[inline(always)]
    pub fn as_ptr(&self) -> *const core::ffi::c_void {
        self.bytes.as_ptr().cast()
    }
}

impl Default for PrintfArgs {
    fn default() -> Self {
        Self::new()
    }
}

macro_rules! printf_arg {
    ($($t:ty => $as:ty),*) => {$(
        impl PrintfArg for $t {
            #[inline(always)]
            fn push_to(self, args: &mut PrintfArgs) {
                args.push_bytes((self as $as).to_ne_bytes());
            }
        }
    )*};
}
printf_arg!(i32 => i32, u32 => u32, i64 => i64, u64 => u64, usize => u64, isize => i64,
            f32 => f64, f64 => f64, u8 => u32, i8 => i32, u16 => u32, i16 => i32);

impl<T> PrintfArg for *const T {
    #[inline(always)]
    fn push_to(self, args: &mut PrintfArgs) {
        args.push_bytes((self as usize as u64).to_ne_bytes());
    }
}

impl<T> PrintfArg for *mut T {
    #[inline(always)]
    fn push_to(self, args: &mut PrintfArgs) {
        args.push_bytes((self as usize as u64).to_ne_bytes());
    }
}

/// Calls `vprintf` with a NUL-terminated format and an argument buffer.
///
/// # Safety
/// `format` is NUL-terminated and its conversions match the buffer's layout.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn vprintf(format: *const u8, args: &PrintfArgs) -> i32 {
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: forwarded from the caller.
    return unsafe { crate::sim::printf::vprintf(format, &args.bytes[..args.len]) };
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: forwarded from the caller; the buffer outlives the call.
    return unsafe { nvptx::vprintf(format, args.as_ptr()) };
}

/// C-style `printf` from a kernel: `gpu_printf!("x = %d\n", x)`. See the
/// [module docs](self) for the argument rules.
#[macro_export]
macro_rules! gpu_printf {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {{
        #[allow(unused_mut)]
        let mut args = $crate::print::PrintfArgs::new();
        $( $crate::print::PrintfArg::push_to($arg, &mut args); )*
        // SAFETY: the format is a NUL-terminated literal; each argument was
        // laid out at its natural alignment, as vprintf reads it.
        unsafe { $crate::print::vprintf(concat!($fmt, "\0").as_ptr(), &args) }
    }};
}
