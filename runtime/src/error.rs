//! The crate's one error type: every failure names the kernel (or the host
//! operation) and the reason.
use std::path::PathBuf;

use cust::error::CudaError;

use cuda_kernels_device::sim::SimError;

use crate::device_id::DeviceId;

/// What went wrong, and where.
#[derive(Debug)]
pub enum Error {
    /// No NVIDIA kernel driver is loaded (the driver library, if any, could
    /// not open a GPU and there is none to open): "no GPU".
    NoDriver {
        /// What `cuInit` said, and that no kernel driver is loaded.
        reason: String,
    },
    /// The NVIDIA kernel driver is loaded but the CUDA driver failed to open
    /// a GPU (a driver too old or mismatched, a failing device count, …): a
    /// GPU that is there but unusable, never "no GPU".
    DriverFailed {
        /// The driver call (`cuInit`, `cuDeviceGetCount`).
        call: &'static str,
        /// Its result code.
        code: i32,
        /// The call and what the driver says the code means.
        said: String,
    },
    /// The driver works but there is no CUDA device.
    NoDevice {
        /// What the driver said.
        reason: String,
    },
    /// The input was refused before any pointer reached a kernel: wrong or
    /// mismatched shapes, empty input, sizes that overflow, bad parameters.
    InvalidInput {
        /// The kernel or host function that refused it.
        kernel: &'static str,
        /// Why.
        reason: String,
    },
    /// A function of a library loaded at run time (cuBLAS) returned an
    /// error status.
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
    Cuda {
        /// The kernel or host function that made the call.
        kernel: &'static str,
        /// The operation (`launch`, `synchronize`, `copy to device`, …).
        operation: &'static str,
        /// The driver's error.
        source: CudaError,
    },
    /// A kernel failed on the device (a panic or a failed `gpu_assert!`), and
    /// the device layer recorded where. On a CUDA GPU the context is then
    /// unusable: every later call fails; restart the process to use the GPU
    /// again (the driver's rule for sticky launch errors). On the simulator
    /// (`source` is `None`: no driver was involved) nothing needs a restart.
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
        /// What the driver reported (on a GPU: `LaunchFailed` for the trap
        /// that ends a faulting kernel); `None` on the simulator.
        source: Option<CudaError>,
    },
    /// Memory or a stream of one device was passed to another device's
    /// launcher or copy.
    WrongDevice {
        /// The kernel or operation that refused it.
        kernel: &'static str,
        /// The argument that holds it (`values`, `stream`, `argument 3`).
        argument: &'static str,
        /// The device the call runs on.
        expected: DeviceId,
        /// The device the memory or stream belongs to.
        found: DeviceId,
    },
    /// A feature of the hardware itself was asked of the simulator.
    NotOnSimulator {
        /// The feature (`CUDA-event timing`, `a CUDA context`, …).
        what: &'static str,
    },
    /// The simulator was asked to launch a kernel handle that carries no
    /// host entry (one made from a bare name with `Kernel::new`).
    NoSimEntry {
        /// The kernel's entry name.
        kernel: &'static str,
    },
    /// The simulator refused a launch whose shape exceeds the simulated
    /// device's limits (more than 1024 threads per block, a grid past its
    /// limits, more shared memory than a block may have), as a GPU refuses
    /// it: `source` is the driver error the GPU gives for it.
    LaunchRefused {
        /// The kernel.
        kernel: &'static str,
        /// Which limit the shape exceeds.
        reason: String,
        /// What a GPU's `cuLaunchKernel` returns for it (`InvalidValue`).
        source: CudaError,
    },
    /// The simulator saw two threads of one block touch the same
    /// shared-memory word between two barriers, at least one of them writing
    /// (`detail` names the offset, both threads and the barrier interval).
    SharedRace {
        /// The kernel.
        kernel: &'static str,
        /// The simulator's report.
        detail: SimError,
    },
    /// The simulator saw threads of a block wait at a barrier (or a warp
    /// collective) that the others never reach: reported instead of a hang.
    BarrierDivergence {
        /// The kernel.
        kernel: &'static str,
        /// The simulator's report: which threads wait where.
        detail: SimError,
    },
    /// The simulator saw a thread read or write past a simulated device
    /// buffer (the buffer, the element index and the thread are in `detail`).
    OutOfBounds {
        /// The kernel.
        kernel: &'static str,
        /// The simulator's report.
        detail: SimError,
    },
    /// Any other failure the simulator reported (a warp collective misused,
    /// its own memory failing).
    Simulator {
        /// The kernel or operation.
        kernel: &'static str,
        /// The simulator's report.
        detail: SimError,
    },
    /// A PTX file could not be read.
    PtxFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The driver refused the PTX module.
    ModuleLoad {
        /// The PTX's `.version` and `.target`, and the driver version.
        details: String,
        /// The driver's error.
        source: CudaError,
    },
    /// A file the host reads or writes (an image, a report) failed.
    Io {
        /// What was being read or written.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A device ordinal that names no device, or a device that cannot be
    /// used (a compute capability below the PTX's target, a device in
    /// prohibited compute mode).
    NoSuchDevice {
        /// The ordinal asked for.
        ordinal: u32,
        /// Why it cannot be opened.
        reason: String,
        /// Every device of the machine, `ordinal: name`, and whether usable.
        devices: String,
    },
    /// One device of a multi-device job failed; the job stopped on every
    /// device, joined all its threads and reports the first failure.
    OnDevice {
        /// The multi-device job.
        job: &'static str,
        /// The device that failed (`device 1 (NVIDIA H200)`).
        device: String,
        /// What went wrong there.
        source: Box<Error>,
    },
    /// A library loaded at run time (NCCL) could not be loaded: none of the
    /// places it was looked for has it.
    LibraryMissing {
        /// The library's name (`libnccl.so.2`).
        library: &'static str,
        /// What each place it was looked for said.
        tried: String,
    },
    /// An NCCL call failed: its result, what `ncclGetErrorString` says of
    /// it and what `ncclGetLastError` says happened.
    Nccl {
        /// The NCCL function.
        call: &'static str,
        /// Its `ncclResult_t`.
        code: i32,
        /// The result's name (`ncclInvalidArgument`).
        name: &'static str,
        /// `ncclGetErrorString`.
        text: String,
        /// `ncclGetLastError` (empty when NCCL recorded none).
        last: String,
    },
    /// A collective (or the set-up of a communicator) did not finish by its
    /// deadline: a peer died or called another collective. The communicator
    /// was aborted (`ncclCommAbort`) and is unusable from now on.
    CollectiveTimeout {
        /// The collective or set-up step.
        operation: &'static str,
        /// This rank.
        rank: usize,
        /// The communicator's ranks.
        ranks: usize,
        /// How long it waited.
        waited: std::time::Duration,
    },
    /// A communicator was used after it was aborted (by a deadline, an
    /// error or the caller), or a peer it needed was aborted.
    CommunicatorAborted {
        /// The collective that was refused.
        operation: &'static str,
        /// This rank.
        rank: usize,
        /// Which communicator was aborted, and why.
        reason: String,
    },
    /// The loaded module has no entry point of this name, or the kernel
    /// handle was declared in a crate other than the one the loaded image
    /// was built from (a kernel of the same name there is not this one).
    KernelNotFound {
        /// The entry point asked for.
        name: String,
        /// Why: no entry point of that name, or the handle's crate and the
        /// image's.
        reason: String,
    },
    /// A call that cannot be recorded into a CUDA graph was made on the
    /// thread of a capture in progress ([`Gpu::begin_capture`](crate::Gpu::begin_capture)):
    /// a synchronous copy or memset, an allocation, a synchronization, a
    /// launch outside the capture. It was refused before it reached the
    /// driver; the capture is abandoned when it ends (its `end` returns this
    /// error too), and the device and every stream stay usable.
    NotCapturable {
        /// The refused call (`cuMemAlloc (Gpu::zeroed, Gpu::to_device)`, …).
        call: &'static str,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::NoDriver { reason } => write!(f, "no CUDA driver: {reason}"),
            Error::DriverFailed { said, .. } => {
                write!(f, "a CUDA GPU is present but its driver failed: {said}")
            }
            Error::NoDevice { reason } => write!(f, "no CUDA device: {reason}"),
            Error::InvalidInput { kernel, reason } => write!(f, "{kernel}: {reason}"),
            Error::Library {
                library,
                function,
                status,
                name,
            } => write!(f, "{library}: {function} returned status {status} ({name})"),
            Error::Cuda {
                kernel,
                operation,
                source,
            } => write!(f, "{kernel}: {operation} failed: {source}"),
            Error::DeviceFault {
                kernel,
                file,
                line,
                column,
                block,
                thread,
                message,
                source,
            } => write!(
                f,
                "{kernel}: the kernel failed at {file}:{line}:{column} in block {block:?}, \
                 thread {thread:?}: {message}{}",
                fault_consequence(source)
            ),
            Error::WrongDevice {
                kernel,
                argument,
                expected,
                found,
            } => write!(
                f,
                "{kernel}: {argument} is memory or a stream of {found}, but this is {expected}"
            ),
            Error::NotOnSimulator { what } => {
                write!(f, "{what} needs a CUDA GPU: the simulator does not have it")
            }
            Error::NotCapturable { call } => write!(
                f,
                "{call} cannot be captured into a CUDA graph: refused during a capture, \
                 which is abandoned (the device and its streams stay usable); make the call \
                 before the capture or after it ends"
            ),
            Error::NoSimEntry { kernel } => write!(
                f,
                "{kernel}: this kernel handle has no host entry (made from a bare name with \
                 Kernel::new?), so the simulator cannot run it; declare the kernel with kernels!"
            ),
            Error::LaunchRefused { kernel, reason, .. } => {
                write!(f, "{kernel}: launch refused: {reason}")
            }
            Error::SharedRace { kernel, detail }
            | Error::BarrierDivergence { kernel, detail }
            | Error::OutOfBounds { kernel, detail }
            | Error::Simulator { kernel, detail } => f.write_str(&with_kernel(kernel, detail)),
            Error::PtxFile { path, source } => {
                write!(f, "PTX file {}: {source}", path.display())
            }
            Error::ModuleLoad { details, source } => {
                write!(f, "loading the PTX module failed ({details}): {source}")
            }
            Error::Io { what, source } => write!(f, "{what}: {source}"),
            Error::NoSuchDevice {
                ordinal,
                reason,
                devices,
            } => write!(
                f,
                "device {ordinal}: {reason}; the devices there are: {devices}"
            ),
            Error::OnDevice {
                job,
                device,
                source,
            } => write!(f, "{job} on {device}: {source}"),
            Error::LibraryMissing { library, tried } => write!(
                f,
                "{library} could not be loaded (it is opened at run time): {tried}"
            ),
            Error::Nccl {
                call,
                code,
                name,
                text,
                last,
            } => write!(
                f,
                "NCCL: {call} returned {code} ({name}: {text}); last error: {last}"
            ),
            Error::CollectiveTimeout {
                operation,
                rank,
                ranks,
                waited,
            } => write!(
                f,
                "{operation} on rank {rank} of {ranks}: not finished after {waited:?} (the \
                 deadline); the communicator was aborted"
            ),
            Error::CommunicatorAborted {
                operation,
                rank,
                reason,
            } => write!(f, "{operation} on rank {rank}: {reason}"),
            Error::KernelNotFound { name, reason } => {
                write!(f, "kernel `{name}` is not in the loaded module: {reason}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Cuda { source, .. }
            | Error::LaunchRefused { source, .. }
            | Error::ModuleLoad { source, .. }
            | Error::DeviceFault {
                source: Some(source),
                ..
            } => Some(source),
            Error::PtxFile { source, .. } | Error::Io { source, .. } => Some(source),
            Error::OnDevice { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// The simulator's report, which names the kernel itself (but for its own
/// memory failures), prefixed with `kernel` only where it does not: the
/// kernel's name once.
fn with_kernel(kernel: &str, detail: &SimError) -> String {
    let text = detail.to_string();
    if text.starts_with(&format!("{kernel}: ")) {
        text
    } else {
        format!("{kernel}: {text}")
    }
}

/// The end of a [`Error::DeviceFault`] message: the driver's error and the
/// restart a GPU needs, or that the simulator needs none.
fn fault_consequence(source: &Option<CudaError>) -> String {
    match source {
        Some(e) => format!(
            " ({e}); the CUDA context is now unusable: restart the process to use the GPU again"
        ),
        None => " (on the simulator, which stays usable)".into(),
    }
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

    /// An [`Error::KernelNotFound`]: the module has no entry point `name`.
    pub fn not_found(name: &str) -> Self {
        Error::KernelNotFound {
            name: name.to_string(),
            reason: "the module has no entry point of that name".into(),
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

impl Error {
    /// This crate's error for what the simulator reported about `kernel`: a
    /// fault is [`Error::DeviceFault`] as on a GPU (with no driver error); a
    /// refused launch [`Error::LaunchRefused`] with the error the GPU gives
    /// (`CUDA_ERROR_INVALID_VALUE`); the findings only a simulator makes have
    /// their own variants.
    pub(crate) fn from_sim(kernel: &'static str, e: SimError) -> Error {
        match e {
            SimError::Fault {
                file,
                line,
                column,
                at,
                message,
                ..
            } => Error::DeviceFault {
                kernel,
                file,
                line,
                column,
                block: at.block,
                thread: at.thread,
                message,
                source: None,
            },
            SimError::LaunchRefused { reason, .. } => Error::LaunchRefused {
                kernel,
                reason,
                source: CudaError::InvalidValue,
            },
            detail @ SimError::SharedRace { .. } => Error::SharedRace { kernel, detail },
            detail @ SimError::BarrierDivergence { .. } => {
                Error::BarrierDivergence { kernel, detail }
            }
            detail @ SimError::OutOfBounds { .. } => Error::OutOfBounds { kernel, detail },
            detail => Error::Simulator { kernel, detail },
        }
    }
}

/// `Ok` for `CUDA_SUCCESS`, else [`Error::Cuda`] naming `kernel` and the
/// driver call `operation`: the one check of a raw driver call's result.
pub fn check_driver(
    r: cust::sys::CUresult,
    kernel: &'static str,
    operation: &'static str,
) -> Result<()> {
    if r == cust::sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::Cuda {
            kernel,
            operation,
            source: cuda_error(r),
        })
    }
}

/// The `cust` error for a raw `CUresult` (cust's own conversion is private):
/// the variant with the same number, `UnknownError` for numbers cust does not
/// know.
pub fn cuda_error(r: cust::sys::CUresult) -> CudaError {
    let code = r as i32 as u32;
    ALL_ERRORS
        .iter()
        .copied()
        .find(|e| *e as u32 == code)
        .unwrap_or(CudaError::UnknownError)
}

/// Every driver error `cust` 0.3.2 names, by number.
const ALL_ERRORS: &[CudaError] = {
    use CudaError::*;
    &[
        InvalidValue,
        OutOfMemory,
        NotInitialized,
        Deinitialized,
        ProfilerDisabled,
        ProfilerNotInitialized,
        ProfilerAlreadyStarted,
        ProfilerAlreadyStopped,
        NoDevice,
        InvalidDevice,
        InvalidImage,
        InvalidContext,
        ContextAlreadyCurrent,
        MapFailed,
        UnmapFailed,
        ArrayIsMapped,
        AlreadyMapped,
        NoBinaryForGpu,
        AlreadyAcquired,
        NotMapped,
        NotMappedAsArray,
        NotMappedAsPointer,
        EccUncorrectable,
        UnsupportedLimit,
        ContextAlreadyInUse,
        PeerAccessUnsupported,
        InvalidPtx,
        InvalidGraphicsContext,
        NvlinkUncorrectable,
        InvalidSource,
        FileNotFound,
        SharedObjectSymbolNotFound,
        SharedObjectInitFailed,
        OperatingSystemError,
        InvalidHandle,
        NotFound,
        NotReady,
        IllegalAddress,
        LaunchOutOfResources,
        LaunchTimeout,
        LaunchIncompatibleTexturing,
        PeerAccessAlreadyEnabled,
        PeerAccessNotEnabled,
        PrimaryContextActive,
        ContextIsDestroyed,
        AssertError,
        TooManyPeers,
        HostMemoryAlreadyRegistered,
        HostMemoryNotRegistered,
        HardwareStackError,
        IllegalInstruction,
        MisalignedAddress,
        InvalidAddressSpace,
        InvalidProgramCounter,
        LaunchFailed,
        NotPermitted,
        NotSupported,
        UnknownError,
    ]
};

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(source: Option<CudaError>) -> Error {
        Error::DeviceFault {
            kernel: "k",
            file: "kernels-gpu/src/hello.rs".into(),
            line: 22,
            column: 9,
            block: [1, 0, 0],
            thread: [2, 0, 0],
            message: "boom".into(),
            source,
        }
    }

    #[test]
    fn a_fault_says_whether_a_restart_is_needed() {
        let gpu = fault(Some(CudaError::LaunchFailed)).to_string();
        assert!(gpu.contains("hello.rs:22:9 in block [1, 0, 0], thread [2, 0, 0]: boom ("));
        assert!(gpu.contains("restart the process"), "{gpu}");
        let sim = fault(None).to_string();
        assert!(
            sim.ends_with("boom (on the simulator, which stays usable)"),
            "{sim}"
        );
        assert!(std::error::Error::source(&fault(None)).is_none());
        assert!(std::error::Error::source(&fault(Some(CudaError::LaunchFailed))).is_some());
    }

    #[test]
    fn a_simulator_finding_names_the_kernel_once() {
        let divergence = SimError::BarrierDivergence {
            kernel: "stencil",
            block: [0, 0, 0],
            stuck: Vec::new(),
        };
        let e = Error::BarrierDivergence {
            kernel: "stencil",
            detail: divergence,
        };
        assert!(
            e.to_string().starts_with("stencil: barrier divergence"),
            "{e}"
        );
        assert!(!e.to_string().contains("stencil: stencil"), "{e}");
        let memory = SimError::Memory {
            what: "mapping".into(),
            reason: "no memory".into(),
        };
        let e = Error::Simulator {
            kernel: "stencil",
            detail: memory,
        };
        assert_eq!(
            e.to_string(),
            "stencil: simulator memory: mapping: no memory"
        );
    }

    #[test]
    fn new_variants_name_the_kernel_or_feature() {
        let (a, b) = (
            DeviceId::Simulator { ordinal: 0 },
            DeviceId::Cuda {
                ordinal: 1,
                context: 0x10,
            },
        );
        let e = Error::WrongDevice {
            kernel: "multiply",
            argument: "b",
            expected: a,
            found: b,
        };
        assert_eq!(
            e.to_string(),
            "multiply: b is memory or a stream of CUDA device 1 (context 0x10), \
             but this is simulated device 0"
        );
        let e = Error::NotOnSimulator { what: "cuBLAS" };
        assert!(e.to_string().starts_with("cuBLAS needs a CUDA GPU"));
        let e = Error::NoSimEntry { kernel: "multiply" };
        assert!(
            e.to_string()
                .starts_with("multiply: this kernel handle has no host entry")
        );
        assert!(!e.is_no_gpu());
    }
}
