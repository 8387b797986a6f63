//! Reference measurements that benchmarks report ratios against.

use crate::Gpu;
use crate::error::{Error, Result};
use crate::timing::{GpuTimer, median};

/// Bandwidth of a device-to-device copy of `bytes` bytes, in GB/s counting
/// bytes read plus bytes written (the way kernel bandwidths here are
/// counted): median of `reps` copies after one warm-up. The copy is checked:
/// the source holds a non-zero pattern, the destination starts zeroed, and
/// every word copied back must be the pattern (an error otherwise). GPU
/// only ([`Error::NotOnSimulator`] on the simulator: a timing).
pub fn device_copy_gbps(gpu: &Gpu, bytes: usize, reps: usize) -> Result<f64> {
    const K: &str = "device copy";
    const PATTERN: u32 = 0x5EED_C0DE;
    gpu.require_cuda("bandwidth timing")?;
    gpu.bind()?;
    let n = bytes / 4;
    let mut src = gpu.zeroed::<u32>(n)?;
    src.set_32(PATTERN)?;
    let mut dst = gpu.zeroed::<u32>(n)?;
    let stream = gpu.stream();
    let mut times = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let ((), ms) = GpuTimer::time(stream, || {
            // SAFETY: both buffers live until the stream is synchronized below (elapsed_ms waits).
            unsafe { dst.async_copy_from_device(&src, stream) }
        })?;
        if rep > 0 {
            times.push(ms);
        }
    }
    gpu.synchronize(K)?;
    let mut copied = vec![0u32; n];
    dst.copy_to(&mut copied[..])?;
    if let Some(i) = copied.iter().position(|&w| w != PATTERN) {
        return Err(Error::invalid(
            K,
            format!(
                "word {i} of {n} is {:#x} after the copy, not {PATTERN:#x}",
                copied[i]
            ),
        ));
    }
    Ok(gb_per_s(2 * n * 4, median(&mut times)))
}

/// `bytes` moved in `ms` milliseconds, in GB/s (10^9 bytes per second).
pub fn gb_per_s(bytes: usize, ms: f32) -> f64 {
    bytes as f64 / (ms as f64 * 1e-3) / 1e9
}
