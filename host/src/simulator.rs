//! The simulator backend of [`Gpu`](crate::Gpu): what the host crate asks of
//! `cuda_kernels_device::sim` (launches, memory, the simulated device's
//! limits), and its errors turned into this crate's [`Error`].
//!
//! The simulator runs the kernels' own Rust bodies on the CPU, every thread
//! of a launch before the launch returns (see `docs/simulator.md`). It stands
//! in for an NVIDIA H100: the same limits on launch shapes, and the device
//! query ([`device_info`]) reports them.
use std::ffi::c_void;

use cuda_kernels_device::sim::{self, Entry, LaunchShape, Limits, SimError};
use cust::error::CudaError;

use crate::device_info::DeviceInfo;
use crate::error::{Error, Result};
use crate::kernel::LaunchConfig;

/// What [`Gpu::name`](crate::Gpu::name) says on the simulator.
pub const NAME: &str = "CUDA-kernels simulator (NVIDIA H100 limits)";

/// The simulated device's limits (an H100's).
pub const LIMITS: Limits = Limits::H100;

/// Multiprocessors of the simulated device (an H100 SXM's), which the
/// launchers size their grids by as they do on a GPU.
pub const MULTIPROCESSORS: u32 = 132;

/// Resident threads per multiprocessor on the simulated device (an H100's),
/// for the occupancy the reductions size their grids by.
pub const THREADS_PER_MULTIPROCESSOR: u32 = 2048;

/// Resident blocks per multiprocessor on the simulated device (an H100's).
pub const BLOCKS_PER_MULTIPROCESSOR: u32 = 32;

/// Shared memory per multiprocessor on the simulated device (an H100's
/// 228 KiB).
pub const SHARED_PER_MULTIPROCESSOR: u32 = 228 * 1024;

/// The alignment of a simulated buffer's start, in bytes (the widest load a
/// kernel makes: a 16-byte vector; `cudaMalloc`'s 256 bytes include it).
pub const BUFFER_ALIGN: usize = 16;

/// A simulated device buffer (the simulator's memory, with guard pages).
pub(crate) struct Allocation(sim::memory::Allocation);

impl Allocation {
    /// `bytes` (> 0) of zeroed simulated device memory for elements of
    /// `align`-byte alignment (the element size is a multiple of it),
    /// labelled `label` in the simulator's reports.
    pub(crate) fn new(bytes: usize, element_size: usize, label: &str) -> Result<Self> {
        sim::memory::Allocation::new(bytes, element_size, label)
            .map(Self)
            .map_err(|e| from_sim("device memory", e))
    }

    /// The buffer's first byte, which kernels see as its device address.
    pub(crate) fn address(&self) -> usize {
        self.0.ptr() as usize
    }
}

/// Runs `entry` on every thread of a launch of `cfg`, to completion, and
/// turns what the simulator reports into this crate's errors
/// ([`from_sim`]).
///
/// # Safety
/// `params` holds a pointer to each of the kernel's parameter values, of
/// its parameter types, in order, and the kernel's `# Safety` contract holds
/// for them.
pub(crate) unsafe fn launch(
    kernel: &'static str,
    cfg: LaunchConfig,
    entry: Entry,
    params: &[*mut c_void],
) -> Result<()> {
    // SAFETY: the caller's contract, forwarded.
    unsafe { sim::launch(kernel, shape(cfg), entry, params) }.map_err(|e| from_sim(kernel, e))
}

/// Refuses `cfg` for `kernel` when it exceeds `limits` (a CUDA device's
/// own, or the simulated H100's): [`Error::LaunchRefused`] naming the limit,
/// the same error on both backends.
pub(crate) fn check_launch_shape(
    kernel: &'static str,
    cfg: LaunchConfig,
    limits: &Limits,
) -> Result<()> {
    sim::check_launch_shape(kernel, &shape(cfg), limits, false).map_err(|e| from_sim(kernel, e))
}

/// The simulator's form of a launch configuration.
fn shape(cfg: LaunchConfig) -> LaunchShape {
    LaunchShape {
        grid: cfg.grid.into(),
        block: cfg.block.into(),
        dynamic_shared_bytes: cfg.shared_mem_bytes,
    }
}

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
        detail @ SimError::BarrierDivergence { .. } => Error::BarrierDivergence { kernel, detail },
        detail @ SimError::OutOfBounds { .. } => Error::OutOfBounds { kernel, detail },
        detail => Error::Simulator { kernel, detail },
    }
}

/// The largest number of blocks of `block` threads with `shared_bytes` of
/// dynamic shared memory each that the simulated device keeps resident on
/// one multiprocessor (what the occupancy API answers on an H100, registers
/// aside), at least 1.
pub fn resident_blocks(block: u32, shared_bytes: u32) -> u32 {
    let by_threads = THREADS_PER_MULTIPROCESSOR / block.max(1);
    let by_shared = SHARED_PER_MULTIPROCESSOR
        .checked_div(shared_bytes)
        .unwrap_or(u32::MAX);
    by_threads
        .min(by_shared)
        .clamp(1, BLOCKS_PER_MULTIPROCESSOR)
}

/// The device query of the simulated device: an H100's limits (compute
/// capability 9.0, 132 multiprocessors, 48 KiB of shared memory per block
/// without opt-in, 1024 threads per block, warps of 32). Memory size,
/// clocks and bus width are an H100 SXM's nominal values; the simulator
/// itself uses the host's memory.
pub fn device_info() -> DeviceInfo {
    DeviceInfo {
        ordinal: 0,
        name: NAME.to_string(),
        compute_capability: (9, 0),
        total_memory: 80 * 1024 * 1024 * 1024,
        clock_rate_khz: 1_980_000,
        multiprocessors: MULTIPROCESSORS as i32,
        shared_memory_per_block: LIMITS.shared_per_block as i32,
        total_constant_memory: 64 * 1024,
        max_threads_per_block: LIMITS.max_threads_per_block as i32,
        warp_size: 32,
        l2_cache_bytes: 50 * 1024 * 1024,
        memory_bus_width: 5120,
        memory_clock_khz: 2_619_000,
        pci_bus_id: "none (simulated)".into(),
        unusable: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occupancy_of_the_simulated_h100() {
        // The reductions' blocks of 1024 threads: 2 per SM (264 blocks on 132 SMs).
        assert_eq!(resident_blocks(1024, 0), 2);
        assert_eq!(resident_blocks(256, 0), 8);
        assert_eq!(resident_blocks(32, 0), 32);
        assert_eq!(resident_blocks(128, 100 * 1024), 2);
        assert_eq!(resident_blocks(0, 0), 32);
    }

    #[test]
    fn sim_errors_become_typed_errors() {
        let at = sim::SimThread {
            block: [1, 0, 0],
            thread: [2, 0, 0],
        };
        let e = from_sim(
            "k",
            SimError::Fault {
                kernel: "k",
                file: "f.rs".into(),
                line: 3,
                column: 4,
                at,
                message: "boom".into(),
            },
        );
        assert!(
            matches!(
                &e,
                Error::DeviceFault {
                    kernel: "k",
                    line: 3,
                    block: [1, 0, 0],
                    thread: [2, 0, 0],
                    source: None,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("stays usable"), "{e}");
        let e = from_sim(
            "k",
            SimError::LaunchRefused {
                kernel: "k",
                reason: "too big".into(),
            },
        );
        assert!(matches!(
            e,
            Error::LaunchRefused {
                kernel: "k",
                source: CudaError::InvalidValue,
                ..
            }
        ));
        let e = from_sim(
            "k",
            SimError::OutOfBounds {
                kernel: "k",
                buffer: "buffer f32".into(),
                index: 7,
                len: 7,
                at,
            },
        );
        assert!(matches!(e, Error::OutOfBounds { kernel: "k", .. }));
        assert!(e.to_string().contains("index 7"), "{e}");
    }
}
