//! The crate's one error type: every failure names the kernel (or the host
//! operation) and the reason.
use std::path::PathBuf;

use cust::error::CudaError;

/// What went wrong, and where.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The CUDA driver library is there but cannot be initialised (no kernel
    /// driver loaded, a driver too old for this program, …).
    #[error("no CUDA driver: {reason}")]
    NoDriver {
        /// What `cuInit` said.
        reason: String,
    },
    /// The driver works but there is no CUDA device.
    #[error("no CUDA device: {reason}")]
    NoDevice {
        /// What the driver said.
        reason: String,
    },
    /// The input was refused before any pointer reached a kernel: wrong or
    /// mismatched shapes, empty input, sizes that overflow, bad parameters.
    #[error("{kernel}: {reason}")]
    InvalidInput {
        /// The kernel or host function that refused it.
        kernel: &'static str,
        /// Why.
        reason: String,
    },
    /// A function of a library loaded at run time (cuBLAS) returned an
    /// error status.
    #[error("{library}: {function} returned status {status} ({name})")]
    Library {
        /// The library.
        library: &'static str,
        /// The function.
        function: &'static str,
        /// Its status code.
        status: i32,
        /// The status code's name.
        name: &'static str,
    },
    /// A CUDA driver call failed.
    #[error("{kernel}: {operation} failed: {source}")]
    Cuda {
        /// The kernel or host function that made the call.
        kernel: &'static str,
        /// The operation (`launch`, `synchronize`, `copy to device`, …).
        operation: &'static str,
        /// The driver's error.
        #[source]
        source: CudaError,
    },
    /// A kernel failed on the device (a panic or a failed `gpu_assert!`), and
    /// the device layer recorded where. After this the CUDA context is
    /// unusable: every later call fails; restart the process to use the GPU
    /// again (the driver's rule for sticky launch errors).
    #[error(
        "{kernel}: the kernel failed at {file}:{line}:{column} in block {block:?}, thread {thread:?}: \
         {message} ({source}); the CUDA context is now unusable: restart the process to use the GPU again"
    )]
    DeviceFault {
        /// The kernel (as named by the host call that synchronized).
        kernel: &'static str,
        /// Source file of the failing code.
        file: String,
        /// Source line.
        line: u32,
        /// Source column.
        column: u32,
        /// `blockIdx` of the failing thread.
        block: [u32; 3],
        /// `threadIdx` of the failing thread.
        thread: [u32; 3],
        /// The assertion's message, or "panic".
        message: String,
        /// What the driver reported.
        #[source]
        source: CudaError,
    },
    /// A PTX file could not be read.
    #[error("PTX file {path}: {source}")]
    PtxFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The driver refused the PTX module.
    #[error("loading the PTX module failed ({details}): {source}")]
    ModuleLoad {
        /// The PTX's `.version` and `.target`, and the driver version.
        details: String,
        /// The driver's error.
        #[source]
        source: CudaError,
    },
    /// A file the host reads or writes (an image, a report) failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being read or written.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A device ordinal that names no device, or a device that cannot be
    /// used (a compute capability below the PTX's target, a device in
    /// prohibited compute mode).
    #[error("device {ordinal}: {reason}; the devices there are: {devices}")]
    NoSuchDevice {
        /// The ordinal asked for.
        ordinal: u32,
        /// Why it cannot be opened.
        reason: String,
        /// Every device of the machine, `ordinal: name`, and whether usable.
        devices: String,
    },
    /// Memory, a stream or an event of one device used with another device's
    /// [`Gpu`](crate::Gpu): refused before any driver call.
    #[error("{kernel}: {what} belongs to {belongs_to}, but was used with {used_with}")]
    WrongDevice {
        /// The launcher or copy that refused it.
        kernel: &'static str,
        /// What was passed (`input buffer`, `stream`, …).
        what: String,
        /// The device it belongs to.
        belongs_to: String,
        /// The device it was used with.
        used_with: String,
    },
    /// One device of a multi-device job failed; the job stopped on every
    /// device, joined all its threads and reports the first failure.
    #[error("{job} on {device}: {source}")]
    OnDevice {
        /// The multi-device job.
        job: &'static str,
        /// The device that failed (`device 1 (NVIDIA H200)`).
        device: String,
        /// What went wrong there.
        #[source]
        source: Box<Error>,
    },
    /// The loaded module has no entry point of this name.
    #[error("kernel `{name}` is not in the loaded PTX module")]
    KernelNotFound {
        /// The entry point asked for.
        name: String,
    },
}

/// `Result` with the crate's [`enum@Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::InvalidInput`] for `kernel`.
    pub fn invalid(kernel: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidInput {
            kernel,
            reason: reason.into(),
        }
    }

    /// Whether this error means "there is no GPU to run on" (no driver or no
    /// device), as opposed to a failure on a working GPU.
    pub fn is_no_gpu(&self) -> bool {
        matches!(self, Error::NoDriver { .. } | Error::NoDevice { .. })
    }
}

/// Attaches the kernel and the operation to a `cust` result.
pub trait CudaResultExt<T> {
    /// Maps a `CudaError` to [`Error::Cuda`] for `kernel` and `operation`.
    fn during(self, kernel: &'static str, operation: &'static str) -> Result<T>;
}

impl<T> CudaResultExt<T> for Result<T, CudaError> {
    fn during(self, kernel: &'static str, operation: &'static str) -> Result<T> {
        self.map_err(|source| Error::Cuda {
            kernel,
            operation,
            source,
        })
    }
}
