//! The simulator backend of [`Gpu`](crate::Gpu): what the host crate asks of
//! `cuda_kernels_device::sim` (launches, memory, the simulated device's
//! limits), and its errors turned into this crate's [`Error`].
//!
//! The simulator runs the kernels' own Rust bodies on the CPU, every thread
//! of a launch before the launch returns (see `docs/simulator.md`). It stands
//! in for an NVIDIA H100: the same limits on launch shapes, and the device
//! query ([`device_info::simulated`](crate::device_info::simulated))
//! reports them.
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Mutex;

use cuda_kernels_device::sim::{self, Entry, Limits, SimOptions};
use cust::error::CudaError;

use crate::error::{Error, Result};
use crate::launch::LaunchConfig;

/// What [`Gpu::name`](crate::Gpu::name) says on the simulator.
pub const NAME: &str = "CUDA-kernels simulator (NVIDIA H100 limits)";

/// The simulated device's limits (an H100's, defined once in the device
/// crate): launch shapes, multiprocessors and occupancy.
pub const LIMITS: Limits = Limits::H100;

/// The alignment of a simulated buffer's start, in bytes (the widest load a
/// kernel makes: a 16-byte vector; `cudaMalloc`'s 256 bytes include it).
pub const BUFFER_ALIGN: usize = 16;

/// The environment variable that sets the simulated device's memory, in
/// bytes, or with a suffix `K`, `M`, `G` or `T` (binary: `80G` is 80 GiB).
/// Unset: [`DEFAULT_MEMORY_BYTES`].
pub const MEMORY_ENV: &str = "CUDA_KERNELS_SIM_MEMORY";

/// The simulated device's memory when [`MEMORY_ENV`] is unset: an H100's
/// 80 GiB.
pub const DEFAULT_MEMORY_BYTES: usize = 80 << 30;

/// The memory of each simulated device: [`MEMORY_ENV`] when set (an
/// unreadable value is [`Error::InvalidInput`] naming the variable), else
/// [`DEFAULT_MEMORY_BYTES`].
pub fn memory_bytes() -> Result<usize> {
    match std::env::var(MEMORY_ENV) {
        Err(_) => Ok(DEFAULT_MEMORY_BYTES),
        Ok(text) => parse_memory(&text).ok_or_else(|| {
            Error::invalid(
                "device memory",
                format!("{MEMORY_ENV}={text:?} is not a size in bytes like 8589934592 or 8G"),
            )
        }),
    }
}

/// `text` as bytes: digits, optionally followed by `K`, `M`, `G` or `T`
/// (powers of 1024); `None` for anything else, 0 and overflow included.
fn parse_memory(text: &str) -> Option<usize> {
    let text = text.trim();
    let (digits, shift) = match text.as_bytes().last()? {
        b'K' | b'k' => (&text[..text.len() - 1], 10),
        b'M' | b'm' => (&text[..text.len() - 1], 20),
        b'G' | b'g' => (&text[..text.len() - 1], 30),
        b'T' | b't' => (&text[..text.len() - 1], 40),
        _ => (text, 0),
    };
    let n: usize = digits.parse().ok().filter(|&n| n > 0)?;
    n.checked_mul(1usize << shift)
}

/// Bytes allocated on each simulated device, by ordinal.
static IN_USE: Mutex<BTreeMap<u32, usize>> = Mutex::new(BTreeMap::new());

/// A simulated device buffer (the simulator's memory, with guard pages),
/// counted against its device's memory ([`memory_bytes`]).
pub(crate) struct Allocation {
    memory: sim::memory::Allocation,
    ordinal: u32,
}

impl Allocation {
    /// `bytes` (> 0) of zeroed memory of simulated device `ordinal` for
    /// elements of `element_size` bytes, labelled `label` in the simulator's
    /// reports. Past the device's
    /// memory it is the GPU's error: [`Error::Cuda`] of `cuMemAlloc` with
    /// `CUDA_ERROR_OUT_OF_MEMORY`.
    pub(crate) fn new(
        bytes: usize,
        element_size: usize,
        label: &str,
        ordinal: u32,
    ) -> Result<Self> {
        let capacity = memory_bytes()?;
        {
            let mut in_use = IN_USE.lock().unwrap_or_else(|e| e.into_inner());
            let used = in_use.entry(ordinal).or_default();
            match used.checked_add(bytes) {
                Some(total) if total <= capacity => *used = total,
                _ => {
                    return Err(Error::Cuda {
                        kernel: "device memory",
                        operation: "cuMemAlloc",
                        source: CudaError::OutOfMemory,
                    });
                }
            }
        }
        let release = |e| {
            Self::release(ordinal, bytes);
            Error::from_sim("device memory", e)
        };
        let memory = sim::memory::Allocation::new(bytes, element_size, label).map_err(release)?;
        Ok(Self { memory, ordinal })
    }

    /// Gives `bytes` of simulated device `ordinal` back.
    fn release(ordinal: u32, bytes: usize) {
        let mut in_use = IN_USE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(used) = in_use.get_mut(&ordinal) {
            *used = used.saturating_sub(bytes);
        }
    }

    /// The buffer's first byte, which kernels see as its device address.
    pub(crate) fn address(&self) -> usize {
        self.memory.ptr() as usize
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        Self::release(self.ordinal, self.memory.len_bytes());
    }
}

/// What is set per simulated device, as a CUDA context's limits are set per
/// context: the printf FIFO's size and the order of threads.
#[derive(Clone, Copy)]
struct DeviceSettings {
    /// `cudaLimitPrintfFifoSize` ([`Gpu::set_printf_fifo_bytes`](crate::Gpu::set_printf_fifo_bytes)).
    printf_fifo_bytes: usize,
    /// The seed that shuffles the order of threads ([`set_seed`]); `None`:
    /// `CUDA_KERNELS_SIM_SEED`'s, else the fixed order.
    seed: Option<u64>,
}

impl Default for DeviceSettings {
    fn default() -> Self {
        Self {
            printf_fifo_bytes: sim::PRINTF_FIFO_BYTES,
            seed: None,
        }
    }
}

/// The settings of each simulated device that were changed, by ordinal.
static SETTINGS: Mutex<BTreeMap<u32, DeviceSettings>> = Mutex::new(BTreeMap::new());

/// Simulated device `ordinal`'s settings, changed by `change`; returns them.
fn settings(ordinal: u32, change: impl FnOnce(&mut DeviceSettings)) -> DeviceSettings {
    let mut all = SETTINGS.lock().unwrap_or_else(|e| e.into_inner());
    let s = all.entry(ordinal).or_default();
    change(s);
    *s
}

/// The smallest printf FIFO a CUDA context takes: a smaller
/// `cudaLimitPrintfFifoSize` reads back as this (an H100, driver
/// 580.159.04: 8 KiB set, 524,288 bytes read back).
pub const PRINTF_FIFO_MIN_BYTES: usize = 512 << 10;

/// Sets simulated device `ordinal`'s printf FIFO to `bytes`, or to
/// [`PRINTF_FIFO_MIN_BYTES`] when that is larger, as the driver does (what
/// [`Gpu::set_printf_fifo_bytes`](crate::Gpu::set_printf_fifo_bytes) does on the simulator).
pub(crate) fn set_printf_fifo_bytes(ordinal: u32, bytes: usize) {
    settings(ordinal, |s| {
        s.printf_fifo_bytes = bytes.max(PRINTF_FIFO_MIN_BYTES)
    });
}

/// Simulated device `ordinal`'s printf FIFO, in bytes.
pub(crate) fn printf_fifo_bytes(ordinal: u32) -> usize {
    settings(ordinal, |_| {}).printf_fifo_bytes
}

/// Runs simulated device `ordinal`'s later launches with the order of
/// threads shuffled by `seed` (as `CUDA_KERNELS_SIM_SEED` does for the whole
/// process, which this overrides for this device), or in the fixed order
/// again for `None` with no such variable (what
/// [`Gpu::set_simulator_seed`](crate::Gpu::set_simulator_seed) does).
pub(crate) fn set_seed(ordinal: u32, seed: Option<u64>) {
    settings(ordinal, |s| s.seed = seed);
}

/// Runs `entry` on every thread of a launch of `cfg` on simulated device
/// `ordinal` (with its settings), to completion, and turns what the
/// simulator reports into this crate's errors ([`Error::from_sim`]);
/// `shared_opt_in`: the kernel was allowed its dynamic shared memory past
/// 48 KB ([`Gpu::allow_dynamic_shared`](crate::Gpu::allow_dynamic_shared)).
///
/// # Safety
/// `params` holds a pointer to each of the kernel's parameter values, of
/// its parameter types, in order, and the kernel's `# Safety` contract holds
/// for them.
pub(crate) unsafe fn launch(
    kernel: &'static str,
    ordinal: u32,
    cfg: LaunchConfig,
    shared_opt_in: bool,
    entry: Entry,
    params: &[*mut c_void],
) -> Result<()> {
    let set = settings(ordinal, |_| {});
    let env = SimOptions::from_env();
    let options = SimOptions {
        printf_fifo_bytes: set.printf_fifo_bytes,
        seed: set.seed.or(env.seed),
        shared_opt_in,
        ..env
    };
    // SAFETY: the caller's contract, forwarded.
    unsafe { sim::launch_with(kernel, cfg.shape(), entry, params, &options) }
        .map_err(|e| Error::from_sim(kernel, e))
}

/// The largest number of blocks of `block` threads with `shared_bytes` of
/// dynamic shared memory each that the simulated device keeps resident on
/// one multiprocessor (what the occupancy API answers on an H100, registers
/// aside), at least 1.
pub fn resident_blocks(block: u32, shared_bytes: u32) -> u32 {
    let by_threads = LIMITS.threads_per_multiprocessor / block.max(1);
    let by_shared = LIMITS
        .shared_per_multiprocessor
        .checked_div(shared_bytes)
        .unwrap_or(u32::MAX);
    by_threads
        .min(by_shared)
        .clamp(1, LIMITS.blocks_per_multiprocessor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuda_kernels_device::sim::SimError;

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
        let e = Error::from_sim(
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
        let e = Error::from_sim(
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
        let e = Error::from_sim(
            "k",
            SimError::OutOfBounds {
                kernel: "k",
                buffer: "buffer f32".into(),
                index: 7,
                len: 7,
                at,
                site: None,
            },
        );
        assert!(matches!(e, Error::OutOfBounds { kernel: "k", .. }));
        assert!(e.to_string().contains("index 7"), "{e}");
    }

    #[test]
    fn memory_sizes_read_with_binary_suffixes() {
        assert_eq!(parse_memory("80G"), Some(80 << 30));
        assert_eq!(parse_memory(" 4096 "), Some(4096));
        assert_eq!(parse_memory("1t"), Some(1 << 40));
        assert_eq!(parse_memory("2M"), Some(2 << 20));
        for bad in ["", "G", "0", "-1", "1.5G", "abc", "99999999999999999999T"] {
            assert_eq!(parse_memory(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn allocations_past_the_simulated_memory_are_out_of_memory() {
        // A device of its own, so that other tests' buffers do not count.
        let ordinal = 1000;
        let oom = Allocation::new(DEFAULT_MEMORY_BYTES + 16, 4, "f32", ordinal);
        assert!(
            matches!(
                oom,
                Err(Error::Cuda {
                    operation: "cuMemAlloc",
                    source: CudaError::OutOfMemory,
                    ..
                })
            ),
            "{:?}",
            oom.err()
        );
        // Allocations add up, and a freed one gives its bytes back.
        let half = DEFAULT_MEMORY_BYTES / 2;
        let a = Allocation::new(half, 1, "u8", ordinal).expect("40 GiB of address space");
        let b = Allocation::new(half, 1, "u8", ordinal).expect("the other 40 GiB");
        assert!(Allocation::new(16, 1, "u8", ordinal).is_err());
        drop(b);
        drop(Allocation::new(16, 1, "u8", ordinal).expect("16 bytes after a free"));
        drop(a);
    }
}
