//! CUDA-event timing (what the seeds do with `cuda.Event()` and OpenCL's
//! profiling events). GPU only: on the simulator a timer is
//! [`Error::NotOnSimulator`] (the simulator's
//! times would say nothing about a GPU's).
use cust::event::{Event, EventFlags};

use crate::Gpu;
use crate::error::{CudaResultExt, Error, Result};
use crate::memory::{DeviceContext, DeviceId, Stream};
use std::sync::Arc;

/// What a timer on the simulator is refused as.
const TIMING: &str = "CUDA-event timing";

/// A start/stop pair of CUDA events recorded on a stream.
pub struct GpuTimer {
    start: Event,
    stop: Event,
    /// The device whose context the events were made in, when known
    /// ([`GpuTimer::on`]): a stream of another device is refused.
    device: Option<DeviceId>,
    /// The context the events live in, held until they are destroyed (the
    /// fields drop in order), when it is one of a device's
    /// [`DeviceContext`]s.
    _context: Option<Arc<DeviceContext>>,
}

/// The `cust` stream of `stream`, or [`Error::NotOnSimulator`].
fn cuda_stream(stream: &Stream) -> Result<&cust::stream::Stream> {
    stream
        .as_cust()
        .map_err(|_| Error::NotOnSimulator { what: TIMING })
}

impl GpuTimer {
    /// Two fresh events (the context must be current; when it is a
    /// device's [`DeviceContext`], the timer holds it).
    pub fn new() -> Result<Self> {
        Ok(Self {
            start: Event::new(EventFlags::DEFAULT).during("timer", "cuEventCreate")?,
            stop: Event::new(EventFlags::DEFAULT).during("timer", "cuEventCreate")?,
            device: None,
            _context: DeviceContext::current(),
        })
    }

    /// Two fresh events in `gpu`'s context ([`Error::NotOnSimulator`] on
    /// the simulator).
    pub fn on(gpu: &Gpu) -> Result<Self> {
        gpu.require_cuda(TIMING)?;
        gpu.bind()?;
        Ok(Self {
            start: Event::new(EventFlags::DEFAULT).during("timer", "cuEventCreate")?,
            stop: Event::new(EventFlags::DEFAULT).during("timer", "cuEventCreate")?,
            device: Some(gpu.device_id()),
            _context: Some(Arc::clone(gpu.device_context()?)),
        })
    }

    /// The `cust` stream of `stream`, refused when it belongs to another
    /// device than the timer's events ([`Error::WrongDevice`]).
    fn stream<'s>(&self, stream: &'s Stream) -> Result<&'s cust::stream::Stream> {
        match self.device {
            Some(expected) if stream.device() != expected => Err(Error::WrongDevice {
                kernel: "timer",
                argument: "stream",
                expected,
                found: stream.device(),
            }),
            _ => cuda_stream(stream),
        }
    }

    /// Records the start event on `stream`.
    pub fn start(&self, stream: &Stream) -> Result<()> {
        self.start
            .record(self.stream(stream)?)
            .during("timer", "cuEventRecord")
    }

    /// Records the stop event on `stream`.
    pub fn stop(&self, stream: &Stream) -> Result<()> {
        self.stop
            .record(self.stream(stream)?)
            .during("timer", "cuEventRecord")
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

    /// Times what `work` queues on `stream`, in milliseconds
    /// ([`Error::NotOnSimulator`] for the simulator's stream, before `work`
    /// runs).
    pub fn time<T>(stream: &Stream, work: impl FnOnce() -> Result<T>) -> Result<(T, f32)> {
        cuda_stream(stream)?;
        let timer = Self::new()?;
        timer.start(stream)?;
        let value = work()?;
        timer.stop(stream)?;
        Ok((value, timer.elapsed_ms()?))
    }
}

/// What a launcher that can run timed measured: `(kernel_ms, total_ms)`,
/// or `None` untimed.
pub type Times = Option<(f32, f32)>;

/// The timers of a launcher that can run timed (on a GPU) or untimed (its
/// plain form, on either backend): around the whole call (copies included)
/// and around the kernel alone, or none.
pub struct PhaseTimers<'s> {
    timers: Option<(GpuTimer, GpuTimer)>,
    stream: &'s Stream,
}

impl<'s> PhaseTimers<'s> {
    /// Timers on `gpu`'s stream when `timed` ([`Error::NotOnSimulator`] on
    /// the simulator), none otherwise; starts the total.
    pub fn start(gpu: &'s Gpu, timed: bool) -> Result<Self> {
        let timers = if timed {
            let total = GpuTimer::on(gpu)?;
            total.start(gpu.stream())?;
            Some((total, GpuTimer::on(gpu)?))
        } else {
            None
        };
        Ok(Self {
            timers,
            stream: gpu.stream(),
        })
    }

    /// Records the kernel's start.
    pub fn kernel_start(&self) -> Result<()> {
        match &self.timers {
            Some((_, kernel)) => kernel.start(self.stream),
            None => Ok(()),
        }
    }

    /// Records the kernel's end.
    pub fn kernel_stop(&self) -> Result<()> {
        match &self.timers {
            Some((_, kernel)) => kernel.stop(self.stream),
            None => Ok(()),
        }
    }

    /// Records the end of the whole call and returns `(kernel_ms,
    /// total_ms)`, or `None` untimed.
    pub fn finish(self) -> Result<Times> {
        match &self.timers {
            Some((total, kernel)) => {
                total.stop(self.stream)?;
                Ok(Some((kernel.elapsed_ms()?, total.elapsed_ms()?)))
            }
            None => Ok(None),
        }
    }
}

/// The times of a timed run: what [`PhaseTimers::finish`] gave, which a
/// timed run always has.
pub fn timed_result(times: Times, kernel: &'static str) -> Result<(f32, f32)> {
    times.ok_or_else(|| Error::invalid(kernel, "a timed run returned no times"))
}

/// The median of a list of times (sorts it).
pub fn median(times: &mut [f32]) -> f32 {
    if times.is_empty() {
        return f32::NAN;
    }
    times.sort_by(|a, b| a.total_cmp(b));
    times[times.len() / 2]
}
