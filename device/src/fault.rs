//! Located faults: the device-fault record shared by the GPU and the host,
//! and (on nvptx64) `gpu_assert!`, `fail` and the panic handler that fill it.
//!
//! When a kernel panics (an out-of-bounds slice index, an overflow check, an
//! explicit `gpu_assert!`), the device layer writes where it happened into a
//! [`FaultRecord`] in page-locked host memory and then traps. A trap leaves
//! the CUDA context unusable (device memory can no longer be read), which is
//! why the record lives in host memory: the host reads it after the failed
//! synchronization and reports the kernel, file, line, block and thread.
//!
//! Only the first faulting thread of a module's lifetime writes the record.
//!
//! The record and its constants compile on every target: the host side reads
//! the record with this very type. On the host, [`fail`] and `gpu_assert!`
//! end the simulated thread and the launch returns the fault.

#[cfg(target_arch = "nvptx64")]
mod trap;
#[cfg(target_arch = "nvptx64")]
pub use trap::fail;

/// Records where the current simulated thread failed and ends it: the
/// launch returns the fault (`sim::SimError::Fault`). Outside a simulated
/// kernel, a panic with the same text.
#[cfg(not(target_arch = "nvptx64"))]
#[cold]
pub fn fail(file: &str, line: u32, column: u32, message: &str) -> ! {
    crate::sim::fail(file, line, column, message)
}

/// `assert!` for kernels: if the condition is false, records the kernel's
/// file, line, block and thread with the message for the host, and traps
/// (on the host: the simulated launch returns the fault).
///
/// ```
/// use cuda_kernels_device::prelude::*;
/// kernels! {
///     /// Fails, located, in a thread past `n`.
///     ///
///     /// # Safety
///     /// None needed.
///     pub fn check(n: usize) as CHECK {
///         let i = thread::index_1d();
///         gpu_assert!(i < n, "index past the end");
///     }
/// }
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! gpu_assert {
    ($cond:expr, $msg:literal $(,)?) => {
        if !$cond {
            $crate::fault::fail(file!(), line!(), column!(), $msg)
        }
    };
    ($cond:expr $(,)?) => {
        $crate::gpu_assert!($cond, concat!("assertion failed: ", stringify!($cond)))
    };
}

/// Bytes of the file name kept (the end of the path when longer).
pub const FAULT_FILE_BYTES: usize = 96;
/// Bytes of the message kept.
pub const FAULT_MESSAGE_BYTES: usize = 64;

/// The PTX symbol (a `.global .u64`) holding the record's device address;
/// 0 means "no record": the fault still traps, it is only not described.
pub const FAULT_POINTER_SYMBOL: &str = "CUDA_KERNELS_FAULT_RECORD";

/// Where a kernel failed. `#[repr(C)]`, identical on both sides.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FaultRecord {
    /// 0 while nothing happened; 1 once the record below is complete.
    pub written: u32,
    /// Source line.
    pub line: u32,
    /// Source column.
    pub column: u32,
    /// `threadIdx` (x, y, z) of the faulting thread.
    pub thread: [u32; 3],
    /// `blockIdx` (x, y, z) of the faulting thread.
    pub block: [u32; 3],
    /// Valid bytes in `file`.
    pub file_len: u32,
    /// Valid bytes in `message`.
    pub message_len: u32,
    /// The source file (UTF-8, possibly cut at the front).
    pub file: [u8; FAULT_FILE_BYTES],
    /// The message (UTF-8, possibly cut at the end).
    pub message: [u8; FAULT_MESSAGE_BYTES],
}

impl FaultRecord {
    /// An empty record (`written == 0`).
    pub const EMPTY: FaultRecord = FaultRecord {
        written: 0,
        line: 0,
        column: 0,
        thread: [0; 3],
        block: [0; 3],
        file_len: 0,
        message_len: 0,
        file: [0; FAULT_FILE_BYTES],
        message: [0; FAULT_MESSAGE_BYTES],
    };

    /// The file name as text.
    pub fn file(&self) -> &str {
        let n = (self.file_len as usize).min(FAULT_FILE_BYTES);
        core::str::from_utf8(&self.file[..n]).unwrap_or("<non-UTF-8 file name>")
    }

    /// The message as text.
    pub fn message(&self) -> &str {
        let n = (self.message_len as usize).min(FAULT_MESSAGE_BYTES);
        core::str::from_utf8(&self.message[..n]).unwrap_or("<non-UTF-8 message>")
    }
}
