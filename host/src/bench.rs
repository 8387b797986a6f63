//! Reference measurements that benchmarks report ratios against.
use cust::memory::{AsyncCopyDestination, DeviceBuffer};

use crate::Gpu;
use crate::error::{CudaResultExt, Result};
use crate::timing::{GpuTimer, median};

/// Bandwidth of a device-to-device copy of `bytes` bytes, in GB/s counting
/// bytes read plus bytes written (the way kernel bandwidths here are
/// counted): median of `reps` copies after one warm-up.
pub fn device_copy_gbps(gpu: &Gpu, bytes: usize, reps: usize) -> Result<f64> {
    const K: &str = "device copy";
    gpu.bind()?;
    let n = bytes / 4;
    let src = DeviceBuffer::<u32>::zeroed(n).during(K, "allocate")?;
    let mut dst = DeviceBuffer::<u32>::zeroed(n).during(K, "allocate")?;
    let stream = gpu.stream();
    let mut times = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let ((), ms) = GpuTimer::time(stream, || {
            // SAFETY: both buffers live until the stream is synchronized below (elapsed_ms waits).
            unsafe { dst.async_copy_from(&src, stream) }.during(K, "cuMemcpyDtoDAsync")
        })?;
        if rep > 0 {
            times.push(ms);
        }
    }
    gpu.synchronize(K)?;
    Ok(gb_per_s(2 * n * 4, median(&mut times)))
}

/// `bytes` moved in `ms` milliseconds, in GB/s (10^9 bytes per second).
pub fn gb_per_s(bytes: usize, ms: f32) -> f64 {
    bytes as f64 / (ms as f64 * 1e-3) / 1e9
}
