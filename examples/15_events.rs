//! CUDA events. A start and an end event around one kernel:
//! queried right after the launch (the kernel is still running), then after
//! `end.synchronize()`, and the time between them. Then events recorded by
//! hand on a stream of your own (a `Lane`), and `GpuTimer` around any
//! launcher.
//!
//! `cargo run --release --example 15_events`
use cuda_kernels::CudaResultExt;
use cuda_kernels::async_mem::Lane;
use cuda_kernels::cust::event::{Event, EventFlags};
use cuda_kernels::ndarray::Array1;
use cuda_kernels::prelude::*;
use cuda_kernels::streams::{SEED_BLOCK, SEED_GRID, mult_ker_cpu, randn_arrays};
use cuda_kernels::timing::GpuTimer;

fn main() -> Result<(), cuda_kernels::Error> {
    let gpu = cuda_kernels::gpu()?;
    let host = randn_arrays(1, 1 << 22, 14).remove(0);
    let data = Array1::from(host.clone());

    // The seed's demo: mult_ker<<<1, 64>>> between two events.
    let (out, ev) = gpu.mult_ker_events(data.view())?;
    let expected = mult_ker_cpu(data.view());
    assert_eq!(out, expected);
    println!("Has the kernel started yet? {}", ev.start_done_after_launch);
    println!("Has the kernel ended yet? {}", ev.end_done_after_launch);
    println!("(end_event.synchronize())");
    println!("Has the kernel started yet? {}", ev.start_done_after_sync);
    println!("Has the kernel ended yet? {}", ev.end_done_after_sync);
    println!("Kernel execution time in milliseconds: {:.3}", ev.kernel_ms);
    assert!(ev.start_done_after_sync && ev.end_done_after_sync);

    // The same by hand, on a lane: a stream that owns its page-locked host
    // buffer and its device buffer, so async copies need no unsafe code.
    let event = || Event::new(EventFlags::DEFAULT).during("15_events", "cuEventCreate");
    let (start, end) = (event()?, event()?);
    let mut lane = Lane::<f32, 1>::from_host(&gpu, &host)?;
    lane.upload(0)?;
    lane.record(&start)?;
    lane.mult_ker(0, SEED_GRID, SEED_BLOCK)?;
    lane.record(&end)?;
    lane.download(0)?;
    assert_eq!(lane.host()?, expected.as_slice().unwrap_or(&[])); // waits for the stream
    let ms = end
        .elapsed_time_f32(&start)
        .during("15_events", "cuEventElapsedTime")?;
    println!("on a lane: {ms:.3} ms");

    // GpuTimer: events around whatever a closure queues on a stream.
    let (squares, ms) = GpuTimer::time(gpu.stream(), || gpu.multiply(data.view(), data.view()))?;
    println!(
        "multiply of {} elements, with the copies: {ms:.3} ms",
        squares.len()
    );
    Ok(())
}
