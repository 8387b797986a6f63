//! Launchers of seed 003's streams and events demos: K12 `mult_ker`, K13 the
//! 200 arrays on the default stream versus one stream each, K14 events (one
//! kernel timed and queried; per-stream kernel durations).
//!
//! "The default stream" here is the [`Gpu`]'s own stream: `cust` 0.3.2 has no
//! handle for CUDA's NULL stream, and the `Gpu`'s stream is a *blocking*
//! stream, so it is ordered with the legacy default stream that the
//! synchronous copies (`cuMemcpyHtoD`/`DtoH`) use: copies and kernels run one
//! after the other, exactly as in the seed's serial version. The stream
//! version uses [`Lane`]s: non-blocking streams that own their page-locked host
//! buffer and device buffer (see [`crate::async_mem`] for why that is sound).
//!
//! # Where the stream version's speedup comes from
//! - **Copies overlap kernels, in both directions.** The GPU has separate
//!   copy engines for host→device and device→host; copies from page-locked
//!   memory are true DMA transfers that run while kernels of other streams
//!   compute. (The serial version copies from pageable memory, synchronously.)
//! - **Kernels of different streams run at the same time.** `mult_ker<<<1, 64>>>`
//!   is one block: it occupies a sliver of one SM (an H100 has 132, and runs up
//!   to 128 kernels at once), and it is latency-bound (each thread walks 16384
//!   elements, each a chain of 100 dependent float operations after a load),
//!   so 200 of them side by side take little longer than one.
//! - **But only as many at once as the driver has hardware queues.** Streams
//!   are mapped onto `CUDA_DEVICE_MAX_CONNECTIONS` hardware work queues
//!   (default 8, at most 32; read when the context is created), and work in
//!   one queue starts in order, so by default at most 8 of these kernels run
//!   at once. The measurements: `docs/tuning.md`. See [`hardware_queues`].
use std::time::Instant;

use cust::event::{Event, EventFlags, EventStatus};

use ndarray::{Array1, ArrayView1};

use cuda_kernels_gpu::streams::{MULT_KER, mult_ker_element};

use crate::Gpu;
use crate::async_mem::{Lane, mean_std};
use crate::error::{CudaResultExt, Error, Result};
use crate::launch::LaunchConfig;
use crate::launch::{MAX_GRID_X, check_block};
use crate::memory::{DeviceBuffer, DeviceSlice};
use crate::util::contiguous;

const K: &str = MULT_KER.name();

/// What the event-timed launchers are refused as on the simulator.
const EVENTS: &str = "CUDA events and concurrent streams";

/// The seed's launch shape for `mult_ker`: one block…
pub const SEED_GRID: u32 = 1;
/// …of 64 threads (few threads per kernel, so that kernels of different
/// streams can run side by side).
pub const SEED_BLOCK: u32 = 64;
/// The seed's launch of `mult_ker`: [`SEED_GRID`] × [`SEED_BLOCK`].
pub const SEED_LAUNCH: LaunchConfig = LaunchConfig::linear(SEED_GRID, SEED_BLOCK);

/// Checks a `mult_ker` launch: a non-empty array, 1 ≤ grid ≤ 2^31 − 1 blocks,
/// a legal block.
pub fn check_mult_ker(len: usize, grid: u32, block: u32) -> Result<()> {
    if len == 0 {
        return Err(Error::invalid(K, "empty array: nothing to launch"));
    }
    if grid == 0 || grid > MAX_GRID_X {
        return Err(Error::invalid(
            K,
            format!("grid of {grid} blocks; between 1 and {MAX_GRID_X}"),
        ));
    }
    check_block(K, (block, 1, 1))
}

/// CPU reference for `mult_ker`: the same [`mult_ker_element`] on every
/// element (the input itself where |x| < 2^127, ±∞ where |x| ≥ 2^127).
pub fn mult_ker_cpu(data: ArrayView1<f32>) -> Array1<f32> {
    data.mapv(mult_ker_element)
}

/// [`mult_ker_element`]'s result without its hundred operations, for
/// checking large batches quickly: `x` when |x| < 2^127 (both steps of every
/// round are exact), ±∞ when |x| ≥ 2^127 (`2x` overflows to ±∞, which
/// halving keeps), NaN for NaN. A unit test compares it with
/// [`mult_ker_element`] over every sign and exponent.
pub fn mult_ker_expected(x: f32) -> f32 {
    if x.is_finite() && x.abs() >= LARGE {
        f32::INFINITY.copysign(x)
    } else {
        x
    }
}

/// 2^127: from here on `mult_ker` turns a finite value into ±∞.
const LARGE: f32 = f32::from_bits(254 << 23);

/// Checks `mult_ker`'s `output` against its `input`: the first index where
/// the output is not [`mult_ker_expected`] of the input, bit for bit (any
/// NaN equals any NaN), or where the lengths part.
pub fn check_mult_ker_output(input: &[f32], output: &[f32]) -> Option<usize> {
    if input.len() != output.len() {
        return Some(input.len().min(output.len()));
    }
    input.iter().zip(output).position(|(&x, &y)| {
        let want = mult_ker_expected(x);
        want.to_bits() != y.to_bits() && !(want.is_nan() && y.is_nan())
    })
}

/// Whether two float slices are equal bit for bit; the first differing
/// index otherwise.
pub fn first_difference(got: &[f32], expected: &[f32]) -> Option<usize> {
    if got.len() != expected.len() {
        return Some(got.len().min(expected.len()));
    }
    got.iter()
        .zip(expected)
        .position(|(g, e)| g.to_bits() != e.to_bits())
}

/// The `mult_ker` launchers on a [`Gpu`].
pub trait MultKerExt {
    /// K12: copies `data` in, runs `mult_ker<<<grid, block>>>` on it, copies
    /// it back (values of magnitude ≥ 2^127 become ±∞, the others stay). The seed's shape is
    /// `(SEED_GRID, SEED_BLOCK)`; any shape covers any length.
    fn mult_ker(&self, data: ArrayView1<f32>, grid: u32, block: u32) -> Result<Array1<f32>>;

    /// Queues `mult_ker<<<grid, block>>>` on [`Gpu::stream`] over data already
    /// on the device, in place, without synchronizing. Safe under the
    /// [`_on_device` rule](Gpu#launchers-that-leave-work-in-flight-the-_on_device-rule).
    fn mult_ker_on_device(&self, data: &mut DeviceSlice<f32>, grid: u32, block: u32) -> Result<()>;

    /// K14 (a): one `mult_ker<<<1, 64>>>` over `data` between a start and an
    /// end event on [`Gpu::stream`]; the events are queried right after the
    /// launch, then the end event is synchronized and both are queried again.
    fn mult_ker_events(&self, data: ArrayView1<f32>) -> Result<(Array1<f32>, EventsReport)>;
}

impl MultKerExt for Gpu {
    fn mult_ker(&self, data: ArrayView1<f32>, grid: u32, block: u32) -> Result<Array1<f32>> {
        check_mult_ker(data.len(), grid, block)?;
        self.bind()?;
        let mut buf = self.to_device(&contiguous(&data))?;
        let launched = self.mult_ker_on_device(&mut buf, grid, block);
        settle(self, buf, launched, |buf, ()| {
            let mut out = vec![0.0f32; data.len()];
            buf.copy_to(&mut out[..])?;
            Ok(Array1::from(out))
        })
    }

    fn mult_ker_on_device(&self, data: &mut DeviceSlice<f32>, grid: u32, block: u32) -> Result<()> {
        check_mult_ker(data.len(), grid, block)?;
        self.bind()?;
        let (cfg, stream) = (LaunchConfig::linear(grid, block), self.stream());
        // SAFETY: `data` holds data.len() f32 (its own length) and is exclusively
        // borrowed; once the borrow ends, safe code can neither read nor free it
        // before the kernel is done (the `_on_device` rule in `Gpu`'s docs).
        let len = data.len();
        unsafe { self.launch(MULT_KER, cfg, stream, (data, len)) }
    }

    fn mult_ker_events(&self, data: ArrayView1<f32>) -> Result<(Array1<f32>, EventsReport)> {
        check_mult_ker(data.len(), SEED_GRID, SEED_BLOCK)?;
        self.require_cuda(EVENTS)?;
        self.bind()?;
        let stream = self.stream();
        let cust_stream = stream.as_cust()?;
        let buf = self.to_device(&contiguous(&data))?;
        let (ptr, len) = (buf.as_device_ptr(), buf.len());
        let queued = (|| {
            let start = Event::new(EventFlags::DEFAULT).during(K, "cuEventCreate")?;
            let end = Event::new(EventFlags::DEFAULT).during(K, "cuEventCreate")?;
            start.record(cust_stream).during(K, "cuEventRecord")?;
            // SAFETY: `buf` holds len f32 and is used by nothing else; `settle` below
            // synchronizes the stream before it is read or freed.
            unsafe { self.launch(MULT_KER, SEED_LAUNCH, stream, (ptr, len)) }?;
            end.record(cust_stream).during(K, "cuEventRecord")?;
            let done = |e: &Event| {
                e.query()
                    .map(|s| s == EventStatus::Ready)
                    .during(K, "cuEventQuery")
            };
            let (start_after_launch, end_after_launch) = (done(&start)?, done(&end)?);
            end.synchronize().during(K, "cuEventSynchronize")?;
            let (start_after_sync, end_after_sync) = (done(&start)?, done(&end)?);
            Ok(EventsReport {
                start_done_after_launch: start_after_launch,
                end_done_after_launch: end_after_launch,
                start_done_after_sync: start_after_sync,
                end_done_after_sync: end_after_sync,
                kernel_ms: end
                    .elapsed_time_f32(&start)
                    .during(K, "cuEventElapsedTime")?,
            })
        })();
        settle(self, buf, queued, |buf, report| {
            let mut out = vec![0.0f32; len];
            buf.copy_to(&mut out[..])?;
            Ok((Array1::from(out), report))
        })
    }
}

/// Synchronizes [`Gpu::stream`] after work was queued on `buf` (`queued` is
/// how queueing went), then hands `buf` to `then`. If the stream cannot be
/// synchronized (a kernel fault), `buf` is leaked instead of freed: it might
/// still be in use.
fn settle<Q, T>(
    gpu: &Gpu,
    mut buf: DeviceBuffer<f32>,
    queued: Result<Q>,
    then: impl FnOnce(&mut DeviceBuffer<f32>, Q) -> Result<T>,
) -> Result<T> {
    if let Err(e) = gpu.synchronize(K) {
        std::mem::forget(buf);
        return Err(queued.err().unwrap_or(e));
    }
    then(&mut buf, queued?)
}

/// What K14 (a) saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventsReport {
    /// `start.query()` right after the launch (the seed prints "Has the kernel
    /// started yet?").
    pub start_done_after_launch: bool,
    /// `end.query()` right after the launch (normally false: still running).
    pub end_done_after_launch: bool,
    /// `start.query()` after `end.synchronize()` (true).
    pub start_done_after_sync: bool,
    /// `end.query()` after `end.synchronize()` (true).
    pub end_done_after_sync: bool,
    /// Milliseconds between the two events (the kernel's duration).
    pub kernel_ms: f32,
}

/// The `mult_ker` launch on a lane of `f32` buffers.
pub trait LaneMultKerExt {
    /// Queues `mult_ker<<<grid, block>>>` on device buffer `dev`, in place, on
    /// the lane's stream.
    fn mult_ker(&mut self, dev: usize, grid: u32, block: u32) -> Result<()>;
}

impl<const D: usize> LaneMultKerExt for Lane<'_, f32, D> {
    fn mult_ker(&mut self, dev: usize, grid: u32, block: u32) -> Result<()> {
        let len = self.len();
        check_mult_ker(len, grid, block)?;
        let (gpu, stream, ptrs) = self.launch_target()?;
        let ptr = *ptrs.get(dev).ok_or_else(|| {
            Error::invalid(
                K,
                format!("device buffer {dev} does not exist (the lane has {D})"),
            )
        })?;
        let cfg = LaunchConfig::linear(grid, block);
        // SAFETY: the lane's buffers hold `len` f32 each and are used only by the lane's
        // stream, which the lane synchronizes before freeing them (async_mem, points 1-4).
        unsafe { gpu.launch(MULT_KER, cfg, stream, (ptr, len)) }
    }
}

/// Times of one 200-array run.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchTiming {
    /// Host wall-clock milliseconds from the first copy queued to the last
    /// result on the host (the seed's `time()` difference).
    pub wall_ms: f64,
    /// The same span measured by CUDA events on the GPU.
    pub gpu_ms: f64,
    /// Each kernel's duration from its stream's start and end events (the
    /// stream version only; empty for the serial one).
    pub kernel_ms: Vec<f32>,
    /// When the first kernel's start event and the last kernel's end event
    /// completed, in milliseconds from the start of the run (the stream
    /// version only).
    pub kernel_window_ms: Option<(f64, f64)>,
    /// The first array (and element) whose output is not `mult_ker`'s
    /// result on its input ([`check_mult_ker_output`]).
    pub first_mismatch: Option<(usize, usize)>,
}

impl BatchTiming {
    /// Mean and standard deviation of [`BatchTiming::kernel_ms`].
    pub fn kernel_mean_std(&self) -> Option<(f64, f64)> {
        mean_std(&self.kernel_ms)
    }
}

fn check_batch(inputs: &[Vec<f32>]) -> Result<usize> {
    let Some(first) = inputs.first() else {
        return Err(Error::invalid(K, "0 arrays: nothing to run"));
    };
    let len = first.len();
    if len == 0 {
        return Err(Error::invalid(K, "arrays of length 0: nothing to run"));
    }
    if let Some(i) = inputs.iter().position(|a| a.len() != len) {
        return Err(Error::invalid(
            K,
            format!(
                "array {i} has {} elements, array 0 has {len}",
                inputs[i].len()
            ),
        ));
    }
    Ok(len)
}

/// K13, serial version: the arrays in pageable host memory, their device
/// buffers, and [`SerialBatch::run`], which copies all in, launches
/// `mult_ker<<<1, 64>>>` on each, and copies all out, everything on the
/// `Gpu`'s (blocking) stream and the legacy default stream.
pub struct SerialBatch<'g, 'a> {
    gpu: &'g Gpu,
    inputs: &'a [Vec<f32>],
    device: Vec<DeviceBuffer<f32>>,
    outputs: Vec<Vec<f32>>,
}

impl<'g, 'a> SerialBatch<'g, 'a> {
    /// Allocates a device buffer per array (not timed: allocation is the
    /// same in both versions).
    pub fn new(gpu: &'g Gpu, inputs: &'a [Vec<f32>]) -> Result<Self> {
        let len = check_batch(inputs)?;
        gpu.require_cuda(EVENTS)?;
        gpu.bind()?;
        let device = (0..inputs.len())
            .map(|_| gpu.zeroed(len))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            gpu,
            inputs,
            device,
            outputs: vec![vec![0.0; len]; inputs.len()],
        })
    }

    /// One run: all copies in, all kernels, all copies out; checks every
    /// output against `mult_ker`'s result on its input.
    pub fn run(&mut self) -> Result<BatchTiming> {
        let gpu = self.gpu;
        gpu.bind()?;
        let stream = gpu.stream().as_cust()?;
        let start = Event::new(EventFlags::DEFAULT).during(K, "cuEventCreate")?;
        let end = Event::new(EventFlags::DEFAULT).during(K, "cuEventCreate")?;
        let t = Instant::now();
        start.record(stream).during(K, "cuEventRecord")?;
        for (buf, input) in self.device.iter_mut().zip(self.inputs) {
            buf.copy_from(&input[..])?;
        }
        for buf in &mut self.device {
            gpu.mult_ker_on_device(buf, SEED_GRID, SEED_BLOCK)?;
        }
        gpu.synchronize(K)?;
        for (buf, out) in self.device.iter().zip(&mut self.outputs) {
            buf.copy_to(&mut out[..])?;
        }
        end.record(stream).during(K, "cuEventRecord")?;
        end.synchronize().during(K, "cuEventSynchronize")?;
        let wall_ms = t.elapsed().as_secs_f64() * 1e3;
        let gpu_ms = end
            .elapsed_time_f32(&start)
            .during(K, "cuEventElapsedTime")? as f64;
        let first_mismatch = self
            .outputs
            .iter()
            .zip(self.inputs)
            .enumerate()
            .find_map(|(k, (o, i))| check_mult_ker_output(i, o).map(|e| (k, e)));
        Ok(BatchTiming {
            wall_ms,
            gpu_ms,
            kernel_ms: Vec::new(),
            kernel_window_ms: None,
            first_mismatch,
        })
    }

    /// The outputs of the last run.
    pub fn outputs(&self) -> &[Vec<f32>] {
        &self.outputs
    }
}

impl Drop for SerialBatch<'_, '_> {
    fn drop(&mut self) {
        // A run that failed half-way may have left kernels queued on the buffers.
        if self.gpu.synchronize(K).is_err() {
            std::mem::forget(std::mem::take(&mut self.device));
        }
    }
}

/// The order in which [`StreamBatch`] queues its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssueOrder {
    /// All copies in, then all kernels, then all copies out (the seed's
    /// three loops).
    BreadthFirst,
    /// Lane by lane: copy in, kernel, copy out.
    DepthFirst,
}

/// K13 + K14 (b), stream version: one [`Lane`] per array (its own
/// non-blocking stream, page-locked host buffer and device buffer) and four
/// events per lane: begin, kernel start, kernel end, end.
pub struct StreamBatch<'g, 'a> {
    inputs: &'a [Vec<f32>],
    lanes: Vec<Lane<'g, f32, 1>>,
    events: Vec<[Event; 4]>,
}

impl<'g, 'a> StreamBatch<'g, 'a> {
    /// Creates the lanes and fills their page-locked buffers with the inputs
    /// (not timed).
    pub fn new(gpu: &'g Gpu, inputs: &'a [Vec<f32>]) -> Result<Self> {
        check_batch(inputs)?;
        gpu.require_cuda(EVENTS)?;
        let lanes = inputs
            .iter()
            .map(|a| Lane::from_host(gpu, a))
            .collect::<Result<Vec<_>>>()?;
        let event = || Event::new(EventFlags::DEFAULT).during(K, "cuEventCreate");
        let events = (0..inputs.len())
            .map(|_| Ok([event()?, event()?, event()?, event()?]))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            inputs,
            lanes,
            events,
        })
    }

    /// One run, queued breadth-first as in the seed: every lane's copy in,
    /// then every lane's kernel between its start and end events, then every
    /// lane's copy out; then the host waits for each lane and checks its
    /// output against `mult_ker`'s result on its input.
    pub fn run(&mut self) -> Result<BatchTiming> {
        self.run_with(IssueOrder::BreadthFirst)
    }

    /// One run with the chosen issue order.
    pub fn run_with(&mut self, order: IssueOrder) -> Result<BatchTiming> {
        let t = Instant::now();
        match order {
            IssueOrder::BreadthFirst => {
                for (lane, [begin, ..]) in self.lanes.iter_mut().zip(&self.events) {
                    lane.record(begin)?;
                    lane.upload(0)?;
                }
                for (lane, [_, k_start, k_end, _]) in self.lanes.iter_mut().zip(&self.events) {
                    lane.record(k_start)?;
                    lane.mult_ker(0, SEED_GRID, SEED_BLOCK)?;
                    lane.record(k_end)?;
                }
                for (lane, [.., end]) in self.lanes.iter_mut().zip(&self.events) {
                    lane.download(0)?;
                    lane.record(end)?;
                }
            }
            IssueOrder::DepthFirst => {
                for (lane, [begin, k_start, k_end, end]) in self.lanes.iter_mut().zip(&self.events)
                {
                    lane.record(begin)?;
                    lane.upload(0)?;
                    lane.record(k_start)?;
                    lane.mult_ker(0, SEED_GRID, SEED_BLOCK)?;
                    lane.record(k_end)?;
                    lane.download(0)?;
                    lane.record(end)?;
                }
            }
        }
        for lane in &self.lanes {
            lane.synchronize()?;
        }
        // The seed stops its clock here too, before it checks the outputs.
        let wall_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut first_mismatch = None;
        for (k, (lane, input)) in self.lanes.iter().zip(self.inputs).enumerate() {
            let out = lane.host()?;
            if first_mismatch.is_none() {
                first_mismatch = check_mult_ker_output(input, out).map(|e| (k, e));
            }
        }
        // The GPU span: from the earliest begin event to the latest end event, all
        // measured from lane 0's begin (events of different streams of one context
        // share a clock).
        let origin = &self.events[0][0];
        let since = |e: &Event| e.elapsed_time_f32(origin).during(K, "cuEventElapsedTime");
        let (mut first, mut last) = (0.0f32, 0.0f32);
        let mut kernel_ms = Vec::with_capacity(self.lanes.len());
        let mut window = (f32::INFINITY, f32::NEG_INFINITY);
        for [begin, k_start, k_end, end] in &self.events {
            first = first.min(since(begin)?);
            last = last.max(since(end)?);
            window.0 = window.0.min(since(k_start)?);
            window.1 = window.1.max(since(k_end)?);
            kernel_ms.push(
                k_end
                    .elapsed_time_f32(k_start)
                    .during(K, "cuEventElapsedTime")?,
            );
        }
        Ok(BatchTiming {
            wall_ms,
            gpu_ms: (last - first) as f64,
            kernel_ms,
            kernel_window_ms: Some(((window.0 - first) as f64, (window.1 - first) as f64)),
            first_mismatch,
        })
    }

    /// The lanes (their host buffers hold the outputs of the last run).
    pub fn lanes(&self) -> &[Lane<'g, f32, 1>] {
        &self.lanes
    }
}

/// The number of hardware work queues the driver gives a context: the
/// environment variable `CUDA_DEVICE_MAX_CONNECTIONS` (1 to 32), read when the
/// context is created, default 8. Streams are mapped onto these queues, and
/// work in one queue runs in order: with the default, at most 8 of the
/// one-block `mult_ker` kernels of different streams run at once, even though
/// the GPU has room for 128.
pub fn hardware_queues() -> u32 {
    queues_from(std::env::var("CUDA_DEVICE_MAX_CONNECTIONS").ok().as_deref())
}

fn queues_from(value: Option<&str>) -> u32 {
    value
        .and_then(|v| v.trim().parse::<u32>().ok())
        .map_or(8, |v| v.clamp(1, 32))
}

/// How often [`randn_arrays`] puts a large value (one that `mult_ker`
/// changes) into an array: every `LARGE_EVERY`-th element, and the last.
pub const LARGE_EVERY: usize = 61;

/// `count` arrays of `len` f32 for `mult_ker`, reproducible from `seed`:
/// standard normal (the seed's `np.random.randn(array_len).astype('float32')`),
/// except every [`LARGE_EVERY`]-th element and the last one of each array,
/// which are large, |x| in [2^127, 2^128) with a random sign. `mult_ker`
/// returns every other value unchanged but turns these into ±∞ (`2x`
/// overflows), so its effect is visible in every array and at its very end:
/// a launch that did nothing, a stream that was skipped, or the seed's
/// dropped tail (the last `len % 64` elements) fails the check against the
/// CPU reference.
pub fn randn_arrays(count: usize, len: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = crate::util::Rng::new(seed);
    (0..count)
        .map(|_| {
            (0..len)
                .map(|i| {
                    if (i + 1) % LARGE_EVERY == 0 || i + 1 == len {
                        // Exponent field 254 (2^127), a random mantissa and sign.
                        let bits = rng.next_u64();
                        f32::from_bits((bits as u32 & 0x807f_ffff) | (254 << 23))
                    } else {
                        rng.normal() as f32
                    }
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn cpu_reference_is_the_identity_below_2_127() {
        let tiny = f32::from_bits(1); // the smallest subnormal
        let big = f32::MAX / 2.0; // 2x still finite
        let a = array![
            0.0f32,
            -0.0,
            1.5,
            -3.25e-20,
            tiny,
            -tiny,
            big,
            1e30,
            f32::MIN_POSITIVE
        ];
        let out = mult_ker_cpu(a.view());
        assert_eq!(
            first_difference(out.as_slice().unwrap(), a.as_slice().unwrap()),
            None
        );
        let large = array![f32::MAX, -f32::MAX, 2f32.powi(127), -2f32.powi(127)];
        let out = mult_ker_cpu(large.view());
        assert_eq!(
            out,
            array![f32::INFINITY, -f32::INFINITY, f32::INFINITY, -f32::INFINITY]
        );
    }

    #[test]
    fn expected_equals_the_element_function_for_every_exponent() {
        let mut rng = crate::util::Rng::new(1);
        for sign in 0..2u32 {
            for exp in 0..256u32 {
                let mut mantissas = vec![0, 1, 0x40_0000, 0x7f_ffff];
                mantissas.extend((0..64).map(|_| rng.next_u64() as u32 & 0x7f_ffff));
                for m in mantissas {
                    let x = f32::from_bits(sign << 31 | exp << 23 | m);
                    let (want, got) = (mult_ker_element(x), mult_ker_expected(x));
                    assert!(
                        want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()),
                        "{x:e}: element {want:e}, expected {got:e}"
                    );
                }
            }
        }
        assert_eq!(LARGE, 2f32.powi(127));
    }

    #[test]
    fn inputs_make_every_skipped_launch_visible() {
        for len in [1usize, 63, 64, 65, 1000, (1 << 16) + 3] {
            let inputs = randn_arrays(3, len, len as u64);
            for input in &inputs {
                let out = mult_ker_cpu(ArrayView1::from(input)).to_vec();
                assert_eq!(check_mult_ker_output(input, &out), None);
                // A launch that did nothing (or a skipped stream): caught.
                assert!(check_mult_ker_output(input, input).is_some());
                // The seed's dropped tail: the last len % 64 elements untouched
                // (for len < 64 that is all of them).
                let kept = len / 64 * 64;
                if kept < len {
                    let mut dropped = out.clone();
                    dropped[kept..].copy_from_slice(&input[kept..]);
                    let caught = check_mult_ker_output(input, &dropped);
                    assert!(caught.is_some_and(|i| i >= kept), "len {len}: {caught:?}");
                }
                // A large value at the end, in the tail whatever the block.
                assert!(input[len - 1].abs() >= LARGE);
                assert!(input.iter().all(|x| x.is_finite()));
            }
        }
        // Every stream's array differs from the next.
        let inputs = randn_arrays(2, 100, 7);
        assert_ne!(inputs[0], inputs[1]);
    }

    #[test]
    fn shapes_are_checked_before_launch() {
        assert!(check_mult_ker(10, SEED_GRID, SEED_BLOCK).is_ok());
        assert!(check_mult_ker(0, 1, 64).is_err());
        assert!(check_mult_ker(10, 0, 64).is_err());
        assert!(check_mult_ker(10, 1, 0).is_err());
        assert!(check_mult_ker(10, 1, 2048).is_err());
    }

    #[test]
    fn batches_are_checked() {
        assert!(check_batch(&[]).is_err());
        assert!(check_batch(&[vec![]]).is_err());
        assert!(check_batch(&[vec![1.0], vec![1.0, 2.0]]).is_err());
        assert_eq!(check_batch(&[vec![1.0; 3], vec![2.0; 3]]).unwrap(), 3);
    }

    #[test]
    fn hardware_queue_count() {
        assert_eq!(queues_from(None), 8);
        assert_eq!(queues_from(Some("32")), 32);
        assert_eq!(queues_from(Some("64")), 32);
        assert_eq!(queues_from(Some("x")), 8);
    }

    #[test]
    fn differences_are_found_bitwise() {
        assert_eq!(first_difference(&[1.0, 2.0], &[1.0, 2.0]), None);
        assert_eq!(first_difference(&[1.0, 0.0], &[1.0, -0.0]), Some(1));
        assert_eq!(first_difference(&[1.0], &[1.0, 2.0]), Some(1));
    }
}
