//! CUDA-event timing (what the seeds do with `cuda.Event()` and OpenCL's
//! profiling events).
use cust::event::{Event, EventFlags};
use cust::stream::Stream;

use crate::error::{CudaResultExt, Result};

/// A start/stop pair of CUDA events recorded on a stream.
pub struct GpuTimer {
    start: Event,
    stop: Event,
}

impl GpuTimer {
    /// Two fresh events (the context must be current).
    pub fn new() -> Result<Self> {
        Ok(Self {
            start: Event::new(EventFlags::DEFAULT).during("timer", "cuEventCreate")?,
            stop: Event::new(EventFlags::DEFAULT).during("timer", "cuEventCreate")?,
        })
    }

    /// Records the start event on `stream`.
    pub fn start(&self, stream: &Stream) -> Result<()> {
        self.start.record(stream).during("timer", "cuEventRecord")
    }

    /// Records the stop event on `stream`.
    pub fn stop(&self, stream: &Stream) -> Result<()> {
        self.stop.record(stream).during("timer", "cuEventRecord")
    }

    /// Waits for the stop event and returns the milliseconds between the two.
    pub fn elapsed_ms(&self) -> Result<f32> {
        self.stop
            .synchronize()
            .during("timer", "cuEventSynchronize")?;
        self.stop
            .elapsed_time_f32(&self.start)
            .during("timer", "cuEventElapsedTime")
    }

    /// Times what `work` queues on `stream`, in milliseconds.
    pub fn time<T>(stream: &Stream, work: impl FnOnce() -> Result<T>) -> Result<(T, f32)> {
        let timer = Self::new()?;
        timer.start(stream)?;
        let value = work()?;
        timer.stop(stream)?;
        Ok((value, timer.elapsed_ms()?))
    }
}

/// The median of a list of times (sorts it).
pub fn median(times: &mut [f32]) -> f32 {
    if times.is_empty() {
        return f32::NAN;
    }
    times.sort_by(|a, b| a.total_cmp(b));
    times[times.len() / 2]
}
