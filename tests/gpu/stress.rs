//! Stress: 16 host threads × 1,000 launches each, mixing kernels, the shared
//! stream and per-thread streams, on one `Gpu`; no error, and the device's free
//! memory after equals before (nothing leaked).
use cuda_kernels::cust::memory::{
    AsyncCopyDestination, CopyDestination, DeviceBuffer, mem_get_info,
};
use cuda_kernels::cust::stream::{Stream, StreamFlags};
use cuda_kernels::multiply::multiply_cpu;
use cuda_kernels::ndarray::Array1;
use cuda_kernels::{CudaResultExt, Gpu, Result};
use libtest_mimic::{Failed, Trial};

use crate::common::{ensure, fail};
use cuda_kernels::prelude::*;

const THREADS: usize = 16;
const LAUNCHES: usize = 1000;

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![hardware_alone!(
        "device-wide free memory, per-thread streams",
        threads_x_launches_no_error_no_leak
    )]
}

fn worker(gpu: &Gpu, id: usize) -> Result<()> {
    gpu.bind()?;
    // A blocking stream: `DeviceBuffer::zeroed` below sets memory on the legacy
    // default stream, which a blocking stream waits for.
    let stream = Stream::new(StreamFlags::DEFAULT, None).during("stress", "cuStreamCreate")?;
    for i in 0..LAUNCHES {
        let n = 1 + (id * 7919 + i * 104_729) % 4096;
        let a: Array1<f32> = (0..n).map(|k| ((k + i) % 10) as f32).collect();
        match i % 3 {
            // A launcher with its own copies, on the Gpu's stream.
            0 => {
                let c = gpu.multiply(a.view(), a.view())?;
                if c != multiply_cpu(a.view(), a.view())? {
                    return Err(cuda_kernels::Error::invalid(
                        "stress",
                        format!("thread {id} launch {i}: wrong result"),
                    ));
                }
            }
            // Integer kernel through its launcher.
            1 => {
                let x: Array1<i32> = (0..n as i32).collect();
                let got = gpu.vector_sum_i32(x.view(), x.view())?;
                // The seed's formula, res = a + b, written out here.
                if got.iter().zip(&x).any(|(&r, &v)| r != v + v) {
                    return Err(cuda_kernels::Error::invalid(
                        "stress",
                        format!("thread {id} launch {i}: wrong vector_sum_i32 result"),
                    ));
                }
            }
            // Device-resident data and an async copy on this thread's own stream.
            _ => {
                let src = DeviceBuffer::from_slice(a.as_slice().unwrap_or(&[]))
                    .during("stress", "copy")?;
                let mut dst = DeviceBuffer::<f32>::zeroed(n).during("stress", "alloc")?;
                // SAFETY: both buffers outlive the stream synchronization just below.
                unsafe { dst.async_copy_from(&src, &stream) }.during("stress", "async copy")?;
                stream.synchronize().during("stress", "synchronize")?;
                let mut back = vec![0.0f32; n];
                dst.copy_to(&mut back[..]).during("stress", "copy back")?;
                if back != a.to_vec() {
                    return Err(cuda_kernels::Error::invalid(
                        "stress",
                        format!("thread {id} copy {i}: wrong data"),
                    ));
                }
            }
        }
    }
    Ok(())
}

fn all_threads(gpu: &Gpu) -> Result<(), Failed> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|id| s.spawn(move || worker(gpu, id)))
            .collect();
        handles
            .into_iter()
            .enumerate()
            .try_for_each(|(id, h)| match h.join() {
                Ok(r) => r.map_err(fail),
                Err(_) => Err(Failed::from(format!("thread {id} panicked"))),
            })
    })
}

/// The first 16-thread pass is a warm-up: the driver keeps some memory for
/// threads and streams it has seen (6 MiB after the first pass on the H100),
/// so the leak check compares free memory around the second pass. The free
/// memory is the whole device's, so this trial runs alone
/// (`hardware_alone!`).
fn threads_x_launches_no_error_no_leak(gpu: &Gpu) -> Result<(), Failed> {
    all_threads(gpu)?;
    gpu.bind().map_err(fail)?;
    let (free_before, _) = mem_get_info().map_err(fail)?;
    all_threads(gpu)?;
    gpu.bind().map_err(fail)?;
    let (free_after, _) = mem_get_info().map_err(fail)?;
    ensure(free_after == free_before, || {
        format!("device free memory {free_before} before, {free_after} after")
    })
}
