//! The seed's family: `mult_ker` (any length and launch shape, against
//! the CPU reference on inputs it changes), the serial and per-stream
//! batches, events, lanes (page-locked buffers and streams),
//! Conway's Game of Life on concurrent streams against the CPU,
//! contexts made by hand and one per host thread, and the wrong-thread error
//!; their properties (random inputs and shapes against the CPU), a
//! CPU-only check that the PTX keeps the 100 operations of `mult_ker`, and
//! refusals of bad input (the checks without a GPU, every launcher).
use std::fmt::{self, Debug};
use std::sync::mpsc;

use cuda_kernels::async_mem::Lane;
use cuda_kernels::contexts::{ThreadContext, manual_context_roundtrip, threads_mult_ker};

use cuda_kernels::kernels::streams::MULT_KER;
use cuda_kernels::launch::MAX_GRID_X;
use cuda_kernels::life::{
    LifeKernel, LifeSims, check_lattice, life_cpu, life_grid, life_step_cpu, random_lattice,
};
use cuda_kernels::ndarray::{Array1, Array2, ArrayView1, array, s};
use cuda_kernels::streams::{
    IssueOrder, SEED_BLOCK, SEED_GRID, SerialBatch, StreamBatch, check_mult_ker,
    check_mult_ker_output, first_difference, mult_ker_cpu, randn_arrays,
};
use cuda_kernels::util::Rng;
use cuda_kernels::{Error, Gpu, PTX};
use libtest_mimic::{Failed, Trial};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::common::{AWKWARD_LENGTHS, ensure, fail, sized};
use crate::support::cases::{Cases, Want, equal, m, require};
use crate::support::props::{Draw, all_same, brief, case_err, check, length};
use crate::support::{PTX_GARBAGE, PTX_WITHOUT_KERNEL, huge1, huge2, ptx_entry};
use cuda_kernels::prelude::*;

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        cpu!(mult_ker_ptx_keeps_all_operations),
        kernel!(mult_ker_matches_cpu_for_any_length),
        hardware!("streams, timings", batches_match_cpu),
        hardware!("events, timings", events_are_ordered),
        kernel!(lane_copies),
        hardware_alone!(
            "stream concurrency",
            lane_overlaps_the_legacy_default_stream
        ),
        kernel!(life_equals_cpu_after_200_steps),
        kernel!(life_any_size_equals_cpu),
        kernel!(life_fast_kernel_edges),
        hardware!("contexts", manual_context_round_trip),
        hardware!("contexts", ten_threads_with_own_contexts),
        hardware!("contexts", wrong_thread_is_a_typed_error),
        hardware!("contexts", thread_context_rebinds_after_gpu),
        kernel!(mult_ker_agrees_with_cpu),
        kernel!(life_agrees_with_cpu),
        cpu!(check_refusals),
        kernel!(refusals),
        hardware!("events, streams, timings", event_and_batch_refusals),
        kernel!(life_refusals),
        hardware!("contexts", context_refusals),
    ]
}

// ---------------------------------------------------------------------------
// Correctness.

fn reason<T>(r: cuda_kernels::Result<T>) -> String {
    match r {
        Err(Error::InvalidInput { reason, .. }) => reason,
        Err(e) => format!("another error: {e}"),
        Ok(_) => "no error".into(),
    }
}

/// The `mult_ker` entry in the embedded PTX still has its 50 × 2 float
/// operations (the compiler did not fold `x * 2 / 2` away).
fn mult_ker_ptx_keeps_all_operations() -> Result<(), Failed> {
    let ops = ptx_entry("mult_ker")?
        .lines()
        .filter(|l| {
            let op = l.trim_start();
            ["add.", "mul.", "div.", "fma."]
                .iter()
                .any(|p| op.starts_with(p))
                && op
                    .split_whitespace()
                    .next()
                    .is_some_and(|o| o.ends_with(".f32"))
        })
        .count();
    ensure(ops >= 100, || {
        format!("only {ops} f32 operations in mult_ker: the loop was folded")
    })
}

/// `mult_ker` equals `mult_ker_cpu` at every awkward length and launch
/// shape, on the inputs of `randn_arrays`, which it changes (a value of
/// magnitude ≥ 2^127 every 61 elements and at the end becomes ±∞): an
/// output equal to the input (a launch that did nothing) or a dropped tail
/// would fail. Plus edge values: subnormals, signed zeros, the largest
/// values that stay, the smallest that become ±∞, infinities and NaN.
fn mult_ker_matches_cpu_for_any_length(gpu: &Gpu) -> Result<(), Failed> {
    for &n in AWKWARD_LENGTHS {
        let data: Array1<f32> = randn_arrays(1, n, n as u64).remove(0).into();
        let input = data.as_slice().ok_or("contiguous")?;
        let expected = mult_ker_cpu(data.view());
        ensure(check_mult_ker_output(input, input).is_some(), || {
            format!("n = {n}: the input equals the expected output")
        })?;
        for (grid, block) in [(SEED_GRID, SEED_BLOCK), (3, 100), (1024, 256)] {
            let out = gpu.mult_ker(data.view(), grid, block).map_err(fail)?;
            ensure(
                first_difference(
                    out.as_slice().ok_or("contiguous")?,
                    expected.as_slice().ok_or("contiguous")?,
                )
                .is_none(),
                || format!("n = {n}, <<<{grid}, {block}>>>: output differs from the CPU reference"),
            )?;
        }
    }
    let below = f32::from_bits((254 << 23) - 1); // the largest below 2^127
    let large = f32::from_bits(254 << 23); // 2^127
    let edge = array![
        f32::from_bits(1),
        -f32::from_bits(1),
        -0.0,
        0.0,
        1e30,
        -1.7e38,
        f32::MIN_POSITIVE,
        below,
        -below,
        large,
        -large,
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN
    ];
    let out = gpu.mult_ker(edge.view(), 1, 64).map_err(fail)?;
    let cpu = mult_ker_cpu(edge.view());
    let (got, want) = (
        out.as_slice().ok_or("contiguous")?,
        cpu.as_slice().ok_or("contiguous")?,
    );
    ensure(
        got.iter()
            .zip(want)
            .all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan())),
        || format!("edge values: GPU {out}, CPU {cpu}"),
    )?;
    ensure(
        want[..9] == edge.as_slice().ok_or("contiguous")?[..9]
            && want[9..14]
                == [
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                    f32::INFINITY,
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                ][..],
        || format!("the CPU reference on edge values: {cpu}"),
    )
}

/// The serial and per-stream batches (24 arrays of 65,537, each with values
/// that `mult_ker` changes, in its tail too): every output equals the CPU
/// reference (`first_mismatch`, and the lanes' host buffers checked here).
fn batches_match_cpu(gpu: &Gpu) -> Result<(), Failed> {
    let inputs = randn_arrays(24, 65_537, 5);
    let serial = SerialBatch::new(gpu, &inputs)
        .map_err(fail)?
        .run()
        .map_err(fail)?;
    ensure(serial.first_mismatch.is_none(), || {
        format!("serial: {serial:?}")
    })?;
    let mut batch = StreamBatch::new(gpu, &inputs).map_err(fail)?;
    for order in [IssueOrder::BreadthFirst, IssueOrder::DepthFirst] {
        let t = batch.run_with(order).map_err(fail)?;
        ensure(t.first_mismatch.is_none(), || {
            format!("streams: {:?}", t.first_mismatch)
        })?;
        ensure(t.kernel_ms.len() == inputs.len(), || {
            "one kernel time per stream".into()
        })?;
        let longest = t.kernel_ms.iter().cloned().fold(0.0f32, f32::max) as f64;
        ensure(
            t.kernel_ms.iter().all(|&k| k > 0.0) && t.gpu_ms >= longest && t.wall_ms > 0.0,
            || {
                format!(
                    "times out of order: span {} ms, kernels {:?}",
                    t.gpu_ms, t.kernel_ms
                )
            },
        )?;
        ensure(t.kernel_mean_std().is_some(), || "no mean".into())?;
    }
    for (k, (lane, input)) in batch.lanes().iter().zip(&inputs).enumerate() {
        let want = mult_ker_cpu(ArrayView1::from(input));
        ensure(
            lane.host().map_err(fail)? == want.as_slice().ok_or("contiguous")?,
            || format!("lane {k}'s host buffer differs from the CPU reference"),
        )?;
        ensure(lane.host().map_err(fail)? != &input[..], || {
            format!("lane {k}: the output equals the input")
        })?;
    }
    Ok(())
}

fn events_are_ordered(gpu: &Gpu) -> Result<(), Failed> {
    let data: Array1<f32> = randn_arrays(1, 1 << 22, 9).remove(0).into();
    let (out, ev) = gpu.mult_ker_events(data.view()).map_err(fail)?;
    ensure(out == mult_ker_cpu(data.view()), || {
        "output differs from the CPU reference".into()
    })?;
    ensure(ev.start_done_after_sync && ev.end_done_after_sync, || {
        format!("events not complete after end.synchronize(): {ev:?}")
    })?;
    ensure(ev.kernel_ms > 0.0, || format!("kernel time {ev:?}"))?;
    eprintln!(
        "events: right after launch start={} end={}; kernel {:.3} ms",
        ev.start_done_after_launch, ev.end_done_after_launch, ev.kernel_ms
    );
    Ok(())
}

fn lane_copies(gpu: &Gpu) -> Result<(), Failed> {
    // Values mult_ker keeps, and at the end one it turns into +∞.
    let mut data: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    data[999] = f32::MAX;
    let mut changed = data.clone();
    changed[999] = f32::INFINITY;
    let mut lane = Lane::<f32, 2>::from_host(gpu, &data).map_err(fail)?;
    lane.upload(0).map_err(fail)?;
    lane.copy_on_device(0, 1).map_err(fail)?;
    lane.host_mut().map_err(fail)?.fill(-1.0);
    lane.mult_ker(1, 1, 64).map_err(fail)?;
    lane.download(1).map_err(fail)?;
    ensure(lane.host().map_err(fail)? == &changed[..], || {
        "round trip via buffer 1 with mult_ker".into()
    })?;
    // Buffer 0 still holds the data; buffer 1 gets the host's -1s.
    lane.host_mut().map_err(fail)?.fill(-1.0);
    lane.upload(1).map_err(fail)?;
    lane.download(0).map_err(fail)?;
    ensure(lane.host().map_err(fail)? == &data[..], || {
        "buffer 0".into()
    })?;
    lane.download(1).map_err(fail)?;
    ensure(
        lane.host().map_err(fail)?.iter().all(|&v| v == -1.0),
        || "buffer 1".into(),
    )?;
    // A lane may be dropped with work in flight: Drop waits for it.
    lane.mult_ker(0, 1, 64).map_err(fail)?;
    lane.download(0).map_err(fail)?;
    drop(lane);
    Ok(())
}

fn starts(sims: usize, n: usize, seed: u64) -> Vec<Array2<i32>> {
    let mut rng = Rng::new(seed);
    (0..sims)
        .map(|_| random_lattice(n, 0.25, &mut rng))
        .collect()
}

fn run_life(gpu: &Gpu, lattices: &[Array2<i32>], steps: usize) -> Result<(), Failed> {
    let n = lattices[0].nrows();
    let mut sims = LifeSims::new(gpu, lattices).map_err(fail)?;
    for step in 1..=steps {
        sims.frame().map_err(fail)?;
        if step == 1 || step == steps {
            for (k, l) in lattices.iter().enumerate() {
                let expected = life_cpu(l.view(), step).map_err(fail)?;
                ensure(sims.lattice(k).map_err(fail)? == expected, || {
                    format!("N = {n}, simulation {k}, step {step}: GPU differs from CPU")
                })?;
            }
        }
    }
    Ok(())
}

/// A lane's stream is non-blocking (issue 11, item 8): work queued on a lane
/// after a long kernel on the legacy default stream (the NULL stream)
/// finishes, on the GPU's clock, before that kernel does. The control: the
/// same kind of work on a blocking stream (`cust`'s `Stream::new`, which drops
/// `NON_BLOCKING`) finishes after it, so the check can fail.
///
/// It runs while no other GPU trial does (`hardware_alone!`): other trials
/// allocate, free and copy meanwhile, and CUDA orders such calls with the
/// work of every stream (implicit synchronization), which delays the lane's
/// work behind the long kernel (seen on the H100: alone the lane ended at
/// 0.05 ms against 141.5 ms, beside the other tests at 145.3 ms).
fn lane_overlaps_the_legacy_default_stream(gpu: &Gpu) -> Result<(), Failed> {
    use std::ffi::c_void;

    const REPORT: &str = "from the legacy-stream kernel's start";
    use cuda_kernels::cust::function::Function;
    use cuda_kernels::cust::memory::{CopyDestination, DeviceBuffer};
    use cuda_kernels::cust::stream::{Stream, StreamFlags};
    use cuda_kernels::cust::sys::{self as cu, CUevent, CUresult, CUstream};

    fn check(r: CUresult, what: &str) -> Result<(), Failed> {
        ensure(r == CUresult::CUDA_SUCCESS, || format!("{what}: {r:?}"))
    }
    /// A raw event (cust's `Event` cannot be recorded on the NULL stream).
    struct RawEvent(CUevent);
    impl RawEvent {
        fn new() -> Result<Self, Failed> {
            let mut e: CUevent = std::ptr::null_mut();
            // SAFETY: `e` is a valid place for the new handle.
            check(unsafe { cu::cuEventCreate(&mut e, 0) }, "cuEventCreate")?;
            Ok(Self(e))
        }
        fn record(&self, stream: CUstream) -> Result<(), Failed> {
            // SAFETY: a live event and a live stream (or NULL) of the current context.
            check(
                unsafe { cu::cuEventRecord(self.0, stream) },
                "cuEventRecord",
            )
        }
        /// Milliseconds from `start` to this event, after waiting for it.
        fn ms_since(&self, start: &RawEvent) -> Result<f64, Failed> {
            let mut ms = 0.0f32;
            // SAFETY: live events, both recorded.
            unsafe {
                check(cu::cuEventSynchronize(self.0), "cuEventSynchronize")?;
                check(
                    cu::cuEventElapsedTime(&mut ms, start.0, self.0),
                    "cuEventElapsedTime",
                )?;
            }
            Ok(ms as f64)
        }
    }
    impl Drop for RawEvent {
        fn drop(&mut self) {
            // SAFETY: created by cuEventCreate, destroyed once (pending is allowed).
            unsafe { cu::cuEventDestroy_v2(self.0) };
        }
    }
    /// Queues `mult_ker<<<1, 64>>>` over `buf` on the raw stream `stream`.
    fn mult_ker_raw(
        f: &Function,
        buf: &mut DeviceBuffer<f32>,
        stream: CUstream,
    ) -> Result<(), Failed> {
        let mut ptr = buf.as_device_ptr();
        let mut len = buf.len();
        let mut params = [
            &mut ptr as *mut _ as *mut c_void,
            &mut len as *mut usize as *mut c_void,
        ];
        // SAFETY: mult_ker(array: *mut f32, array_len: usize) over `buf`, which holds
        // `len` f32 and is dropped only after the context is synchronized below;
        // cuLaunchKernel copies the parameter values before it returns.
        let r = unsafe {
            cu::cuLaunchKernel(
                f.to_raw(),
                1,
                1,
                1,
                64,
                1,
                1,
                0,
                stream,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        check(r, "cuLaunchKernel")
    }

    let legacy: CUstream = std::ptr::null_mut();
    let f = gpu.function(MULT_KER.name()).map_err(fail)?;
    // One block walking 2^24 elements: about 100 ms on an H100.
    let mut long = DeviceBuffer::<f32>::zeroed(1 << 24).map_err(fail)?;
    let data: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    let mut lane = Lane::<f32, 1>::from_host(gpu, &data).map_err(fail)?;
    let flags = lane
        .stream()
        .as_cust()
        .map_err(fail)?
        .get_flags()
        .map_err(fail)?;
    ensure(flags.contains(StreamFlags::NON_BLOCKING), || {
        format!("the lane's stream has flags {flags:?}")
    })?;
    let blocking = Stream::new(StreamFlags::NON_BLOCKING, None).map_err(fail)?;
    ensure(
        !blocking
            .get_flags()
            .map_err(fail)?
            .contains(StreamFlags::NON_BLOCKING),
        || "cust kept NON_BLOCKING: the control no longer tests a blocking stream".into(),
    )?;
    let mut small = DeviceBuffer::from_slice(&data).map_err(fail)?;
    let (begin, legacy_end) = (RawEvent::new()?, RawEvent::new()?);
    let (lane_end, blocking_end) = (RawEvent::new()?, RawEvent::new()?);

    // The long kernel on the legacy stream, then the lane's copy in, mult_ker
    // and copy out, then a short kernel on the blocking stream.
    begin.record(legacy)?;
    mult_ker_raw(&f, &mut long, legacy)?;
    legacy_end.record(legacy)?;
    lane.upload(0).map_err(fail)?;
    lane.mult_ker(0, 1, 64).map_err(fail)?;
    lane.download(0).map_err(fail)?;
    lane_end.record(lane.stream().as_cust().map_err(fail)?.as_inner())?;
    mult_ker_raw(&f, &mut small, blocking.as_inner())?;
    blocking_end.record(blocking.as_inner())?;

    let legacy_ms = legacy_end.ms_since(&begin)?;
    let lane_ms = lane_end.ms_since(&begin)?;
    let blocking_ms = blocking_end.ms_since(&begin)?;
    // SAFETY: waits for all work of the current context (the long kernel included).
    check(unsafe { cu::cuCtxSynchronize() }, "cuCtxSynchronize")?;
    ensure(lane.host().map_err(fail)? == &data[..], || {
        "the lane's data changed".into()
    })?;
    let mut back = vec![0.0f32; data.len()];
    small.copy_to(&mut back[..]).map_err(fail)?;
    ensure(back == data, || "the control's data changed".into())?;
    eprintln!(
        "{REPORT}: it ends at {legacy_ms:.2} ms, the lane's work \
         at {lane_ms:.3} ms, the blocking stream's at {blocking_ms:.2} ms"
    );
    ensure(lane_ms < legacy_ms, || {
        format!(
            "the lane waited for the legacy default stream: its work ended at {lane_ms:.3} ms, \
             the legacy kernel at {legacy_ms:.2} ms"
        )
    })?;
    ensure(blocking_ms >= legacy_ms, || {
        format!(
            "control: work on a blocking stream ended at {blocking_ms:.2} ms, before the legacy \
             kernel ({legacy_ms:.2} ms): the test cannot tell the two apart"
        )
    })
}

fn life_equals_cpu_after_200_steps(gpu: &Gpu) -> Result<(), Failed> {
    run_life(gpu, &starts(4, 128, 1), 200)
}

fn life_any_size_equals_cpu(gpu: &Gpu) -> Result<(), Failed> {
    for (n, steps) in [(1, 3), (2, 5), (33, 60), (100, 100), (257, 20)] {
        run_life(gpu, &starts(2, n, n as u64), steps)?;
    }
    Ok(())
}

/// `conway_fast` (the default) and `conway_ker` on lattices of 1, 2, 3, 4,
/// 5, 8, 31, 32, 33, 64, 127, 129 and 4097 (on the simulator 513) cells a
/// side (random, and a glider across the wrap-around corner): three steps,
/// each exactly the CPU reference's lattice, for both kernels.
fn life_fast_kernel_edges(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(4097);
    let largest = sized(gpu, 4097, 513);
    for n in [1usize, 2, 3, 4, 5, 8, 31, 32, 33, 64, 127, 129, largest] {
        let mut corner = Array2::<i32>::zeros((n, n));
        for (r, c) in [(0, 1), (1, 2), (2, 0), (2, 1), (2, 2)] {
            corner[[(r + n - 1) % n, (c + n - 1) % n]] = 1;
        }
        for start in [random_lattice(n, 0.3, &mut rng), corner] {
            let steps = if n > 1000 { 2 } else { 3 };
            let mut expected = start.clone();
            let mut sims = [LifeKernel::Fast, LifeKernel::Seed]
                .into_iter()
                .map(|k| LifeSims::with_kernel(gpu, std::slice::from_ref(&start), k))
                .collect::<Result<Vec<_>, _>>()
                .map_err(fail)?;
            for step in 1..=steps {
                expected = life_step_cpu(expected.view()).map_err(fail)?;
                for sim in &mut sims {
                    sim.frame().map_err(fail)?;
                    let got = sim.lattice(0).map_err(fail)?;
                    ensure(got == expected.view(), || {
                        format!(
                            "{:?}, n = {n}, step {step}: GPU and CPU differ",
                            sim.kernel()
                        )
                    })?;
                }
            }
        }
    }
    ensure(
        LifeSims::new(gpu, &[Array2::zeros((2, 2))])
            .map_err(fail)?
            .kernel()
            == LifeKernel::Fast,
        || "LifeSims::new runs conway_fast".into(),
    )
}

fn manual_context_round_trip(_gpu: &Gpu) -> Result<(), Failed> {
    let back = manual_context_roundtrip(&[1.0, 2.0, 3.0]).map_err(fail)?;
    ensure(back == [1.0, 2.0, 3.0], || format!("got {back:?}"))
}

fn ten_threads_with_own_contexts(_gpu: &Gpu) -> Result<(), Failed> {
    let inputs = randn_arrays(10, 1 << 20, 11);
    let outputs = threads_mult_ker(cuda_kernels::IMAGES, &inputs).map_err(fail)?;
    ensure(outputs.len() == 10, || "ten results".into())?;
    for (k, (o, i)) in outputs.iter().zip(&inputs).enumerate() {
        ensure(check_mult_ker_output(i, o).is_none(), || {
            format!("thread {k} differs from the CPU reference")
        })?;
    }
    Ok(())
}

fn wrong_thread_is_a_typed_error(_gpu: &Gpu) -> Result<(), Failed> {
    let (to_main, from_thread) = mpsc::channel();
    let (to_thread, from_main) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || -> Result<(), String> {
        let ctx = ThreadContext::new().map_err(|e| e.to_string())?;
        let handle = ctx.handle();
        to_main.send(handle.clone()).map_err(|e| e.to_string())?;
        // Wait until the main thread has tried to use the context.
        from_main.recv().map_err(|e| e.to_string())?;
        handle.bind().map_err(|e| format!("owner thread: {e}"))?;
        ctx.copy_roundtrip(&[4.0]).map_err(|e| e.to_string())?;
        ctx.destroy().map_err(|e| e.to_string())?;
        let r = reason(handle.bind());
        if !r.contains("destroyed") {
            return Err(format!("bind after destroy: {r}"));
        }
        Ok(())
    });
    let handle = from_thread.recv().map_err(fail)?;
    let r = reason(handle.bind());
    let _ = to_thread.send(());
    ensure(r.contains("wrong thread"), || format!("main thread: {r}"))?;
    worker
        .join()
        .map_err(|_| fail("worker panicked"))?
        .map_err(fail)?;
    ensure(!handle.is_alive(), || "handle still alive".into())
}

fn thread_context_rebinds_after_gpu(gpu: &Gpu) -> Result<(), Failed> {
    let data = randn_arrays(1, 5000, 21).remove(0);
    let ctx = ThreadContext::with_module(cuda_kernels::PTX).map_err(fail)?;
    // Using the primary context in between makes it current on this thread.
    let via_gpu = gpu
        .mult_ker(Array1::from(data.clone()).view(), 1, 64)
        .map_err(fail)?;
    let via_ctx = ctx.mult_ker(&data).map_err(fail)?;
    ctx.destroy().map_err(fail)?;
    let want = mult_ker_cpu(ArrayView1::from(&data)).to_vec();
    ensure(via_gpu.to_vec() == want && via_ctx == want, || {
        "outputs differ from the CPU reference".into()
    })
}

// ---------------------------------------------------------------------------
// Properties.

struct MultKerCase {
    data: Vec<f32>,
    grid: u32,
    block: u32,
}

impl Debug for MultKerCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "<<<{}, {}>>> over {}",
            self.grid,
            self.block,
            brief(&self.data)
        )
    }
}

/// Any f32 but NaN: every sign, exponent field 0..=254 (zeros, subnormals,
/// and 2^127 and above, which `mult_ker` turns into ±∞) and mantissa, and
/// ±∞ (exponent field 255).
fn f32_any_but_nan() -> impl Strategy<Value = f32> {
    (any::<bool>(), 0u32..=255, 0u32..1 << 23).prop_map(|(negative, exp, mantissa)| {
        let mantissa = if exp == 255 { 0 } else { mantissa };
        f32::from_bits(((negative as u32) << 31) | (exp << 23) | mantissa)
    })
}

fn mult_ker_cases() -> impl Strategy<Value = MultKerCase> {
    let params = (length(1, 100_000), 1..=2048u32, 1..=1024u32);
    params.prop_perturb(|(n, grid, block), rng| {
        let mut data = Draw::new(rng).vec(&f32_any_but_nan(), n);
        // The last element is one that mult_ker changes (2^127 · 1.5 → +∞).
        data[n - 1] = f32::from_bits((254 << 23) | (1 << 22));
        MultKerCase { data, grid, block }
    })
}

/// Random length 1..=100 000, grid 1..=2048, block 1..=1024, any f32 but NaN
/// (subnormals, values ≥ 2^127 and infinities included; the last element
/// always one that becomes +∞): `mult_ker`'s output equals `mult_ker_cpu`
/// bit for bit, and differs from its input (48 cases).
fn mult_ker_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(48, mult_ker_cases(), |c| {
        let data = Array1::from(c.data);
        let got = gpu
            .mult_ker(data.view(), c.grid, c.block)
            .map_err(case_err)?;
        all_same("mult_ker vs mult_ker_cpu", &got, &mult_ker_cpu(data.view()))?;
        prop_assert!(
            got[data.len() - 1] == f32::INFINITY,
            "the last element stayed {}",
            got[data.len() - 1]
        );
        Ok(())
    })
}

struct LifeCase {
    lattices: Vec<Array2<i32>>,
    densities: Vec<f64>,
    steps: usize,
}

impl Debug for LifeCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.lattices[0].nrows();
        write!(f, "N = {n}, {} steps, ", self.steps)?;
        for (l, p) in self.lattices.iter().zip(&self.densities) {
            let alive = l.iter().filter(|&&v| v == 1).count();
            if n <= 8 {
                write!(
                    f,
                    "[density {p:.3}: {:?}] ",
                    l.outer_iter().collect::<Vec<_>>()
                )?;
            } else {
                write!(f, "[density {p:.3}: {alive} alive] ")?;
            }
        }
        Ok(())
    }
}

fn life_cases() -> impl Strategy<Value = LifeCase> {
    let params = (
        1..=150usize,
        1..=30usize,
        prop::collection::vec(0.0f64..=1.0, 1..=3),
    );
    params.prop_perturb(|(n, steps, densities), rng| {
        let mut d = Draw::new(rng);
        let lattices = densities
            .iter()
            .map(|&p| {
                let cells = d.vec(&prop::bool::weighted(p), n * n);
                Array2::from_shape_fn((n, n), |(r, c)| cells[r * n + c] as i32)
            })
            .collect();
        LifeCase {
            lattices,
            densities,
            steps,
        }
    })
}

/// Random N in 1..=150, 1..=3 simulations on their own streams, each with a
/// random density in [0, 1], 1..=30 steps: after every frame, each
/// simulation's lattice equals the CPU reference's (`life_step_cpu`, step by
/// step) (32 cases).
fn life_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(32, life_cases(), |c| {
        let n = c.lattices[0].nrows();
        let mut sims = LifeSims::new(gpu, &c.lattices).map_err(case_err)?;
        let mut cpu = c.lattices.clone();
        for step in 1..=c.steps {
            sims.frame().map_err(case_err)?;
            for (k, want) in cpu.iter_mut().enumerate() {
                *want = life_step_cpu(want.view()).map_err(case_err)?;
                let got = sims.lattice(k).map_err(case_err)?;
                if let Some(((r, col), _)) = got.indexed_iter().find(|&(i, v)| *v != want[i]) {
                    return Err(TestCaseError::fail(format!(
                        "N = {n}, simulation {k}, step {step}: cell ({r}, {col}) is {} on the GPU, {} on the CPU",
                        got[(r, col)],
                        want[(r, col)]
                    )));
                }
            }
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------
// Refusals.

fn check_refusals() -> Result<(), Failed> {
    let mut t = Cases::new("streams::check_refusals");
    let mk = "mult_ker";
    for (case, len, grid, block) in [
        ("empty", 0, 1, 64),
        ("grid 0", 10, 0, 64),
        ("grid 2^31", 10, MAX_GRID_X + 1, 64),
        ("grid u32::MAX", 10, u32::MAX, 64),
        ("block 0", 10, 1, 0),
        ("block 1025", 10, 1, 1025),
        ("2^32 elements, grid 0", 1 << 32, 0, 64),
    ] {
        t.refuse(
            &format!("check_mult_ker: {case}"),
            Want::Invalid(mk),
            || check_mult_ker(len, grid, block),
        );
    }
    t.works(
        "check_mult_ker: 2^32 elements, grid 2^31 − 1 of 1024",
        || check_mult_ker(1 << 32, MAX_GRID_X, 1024).map_err(m),
    );
    t.works("mult_ker_cpu: one element is the identity", || {
        equal(
            "out",
            mult_ker_cpu(ArrayView1::from(&[1.5f32])).to_vec(),
            vec![1.5],
        )
    });
    let c = "conway_ker";
    for (case, n) in [
        ("0", 0),
        ("65,535 × 32 + 1 (65,536 blocks along y)", 65_535 * 32 + 1),
        ("2^32 (n² × 4 overflows)", 1 << 32),
        ("usize::MAX", usize::MAX),
    ] {
        t.refuse(&format!("life_grid: {case}"), Want::Invalid(c), || {
            life_grid(n)
        });
    }
    t.works("life_grid: 1", || {
        equal("grid", life_grid(1).map_err(m)?, (1, 1))
    });
    let zero = [0i32];
    let two = [2i32];
    t.refuse("check_lattice: 0 × 0", Want::Invalid(c), || {
        check_lattice(Array2::<i32>::zeros((0, 0)).view())
    });
    t.refuse("check_lattice: 3 × 4", Want::Invalid(c), || {
        check_lattice(Array2::<i32>::zeros((3, 4)).view())
    });
    t.refuse("check_lattice: a cell of 2", Want::Invalid(c), || {
        check_lattice(huge2(&two, 2, 2))
    });
    t.refuse("check_lattice: a cell of -1", Want::Invalid(c), || {
        check_lattice(Array2::from_elem((2, 2), -1).view())
    });
    t.refuse(
        "check_lattice: 2,097,121² broadcast (past the grid)",
        Want::Invalid(c),
        || check_lattice(huge2(&zero, 65_535 * 32 + 1, 65_535 * 32 + 1)),
    );
    t.refuse(
        "check_lattice: 2^32 × 1 broadcast (not square)",
        Want::Invalid(c),
        || check_lattice(huge2(&zero, 1 << 32, 1)),
    );
    t.refuse("life_step_cpu: 0 × 0", Want::Invalid(c), || {
        life_step_cpu(Array2::<i32>::zeros((0, 0)).view())
    });
    t.works(
        "life_cpu: one live cell dies (it is its own 8 neighbours)",
        || {
            equal(
                "step",
                life_cpu(Array2::from_elem((1, 1), 1).view(), 1).map_err(m)?,
                Array2::zeros((1, 1)),
            )
        },
    );
    let k = "context";
    t.refuse("threads_mult_ker: no arrays", Want::Invalid(k), || {
        threads_mult_ker(PTX, &[])
    });
    t.refuse("threads_mult_ker: an empty array", Want::Invalid(k), || {
        threads_mult_ker(PTX, &[vec![1.0], vec![]])
    });
    t.refuse("threads_mult_ker: PTX with a NUL", Want::Invalid(k), || {
        threads_mult_ker("a\0b", &[vec![1.0]])
    });
    t.finish()
}

fn refusals(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("streams::refusals");
    let k = "mult_ker";
    let e = Array1::<f32>::zeros(0);
    let one = [1.75f32];
    let data: Array1<f32> = (0..300).map(|i| i as f32 * 0.5 - 20.0).collect();
    for (case, v, grid, block) in [
        ("empty", e.view(), 1, 64),
        ("grid 0", data.view(), 0, 64),
        ("grid 2^31", data.view(), MAX_GRID_X + 1, 64),
        ("grid u32::MAX", data.view(), u32::MAX, 64),
        ("block 0", data.view(), 1, 0),
        ("block 1025", data.view(), 1, 1025),
        (
            "2^32 broadcast elements, grid 0 (refused before any copy)",
            huge1(&one, 1 << 32),
            0,
            64,
        ),
    ] {
        t.refuse(&format!("mult_ker: {case}"), Want::Invalid(k), || {
            gpu.mult_ker(v, grid, block)
        });
    }
    for (case, v, grid, block) in [
        ("one element", ArrayView1::from(&one), 1, 64),
        (
            "one element, block 1024 × 3",
            ArrayView1::from(&one),
            3,
            1024,
        ),
        ("negative stride", data.slice(s![..;-1]), 2, 32),
        ("step 3", data.slice(s![..;3]), 1, 1),
    ] {
        t.works(&format!("mult_ker: {case}"), || {
            equal(
                "out",
                gpu.mult_ker(v, grid, block).map_err(m)?,
                mult_ker_cpu(v),
            )
        });
    }
    let mut d0 = gpu.to_device::<f32>(&[]).map_err(crate::common::fail)?;
    let mut d1 = gpu.to_device(&[2.5f32]).map_err(crate::common::fail)?;
    t.refuse("mult_ker_on_device: empty buffer", Want::Invalid(k), || {
        gpu.mult_ker_on_device(&mut d0, 1, 64)
    });
    t.refuse("mult_ker_on_device: grid 0", Want::Invalid(k), || {
        gpu.mult_ker_on_device(&mut d1, 0, 64)
    });
    t.works("mult_ker_on_device: one element", || {
        let launched = gpu.mult_ker_on_device(&mut d1, 1, 64);
        gpu.synchronize(k).map_err(m)?;
        launched.map_err(m)?;
        let mut out = [0.0f32];
        d1.copy_to(&mut out[..]).map_err(m)?;
        equal("out", out, [2.5])
    });
    // Lanes.
    let lane = "lane";
    t.refuse("Lane::new: length 0", Want::Invalid(lane), || {
        Lane::<f32, 1>::new(gpu, 0)
    });
    t.refuse("Lane::new: no device buffer", Want::Invalid(lane), || {
        Lane::<f32, 0>::new(gpu, 4)
    });
    t.refuse("Lane::from_host: empty", Want::Invalid(lane), || {
        Lane::<f32, 2>::from_host(gpu, &[])
    });
    match Lane::<f32, 2>::from_host(gpu, &[3.0]) {
        Err(err) => t.works("Lane::from_host: one element", || Err(m(err))),
        Ok(mut ln) => {
            t.refuse("Lane::upload: buffer 2 of 2", Want::Invalid(lane), || {
                ln.upload(2)
            });
            t.refuse(
                "Lane::download: buffer usize::MAX",
                Want::Invalid(lane),
                || ln.download(usize::MAX),
            );
            t.refuse(
                "Lane::copy_on_device: onto itself",
                Want::Invalid(lane),
                || ln.copy_on_device(1, 1),
            );
            t.refuse(
                "Lane::copy_on_device: to buffer 5",
                Want::Invalid(lane),
                || ln.copy_on_device(0, 5),
            );
            t.refuse(
                "Lane::copy_on_device: from buffer 5",
                Want::Invalid(lane),
                || ln.copy_on_device(5, 0),
            );
            t.refuse("Lane::mult_ker: buffer 2", Want::Invalid(k), || {
                ln.mult_ker(2, 1, 64)
            });
            t.refuse("Lane::mult_ker: grid 0", Want::Invalid(k), || {
                ln.mult_ker(0, 0, 64)
            });
            t.refuse("Lane::mult_ker: block 2048", Want::Invalid(k), || {
                ln.mult_ker(0, 1, 2048)
            });
            t.works(
                "Lane: one element, upload, copy, mult_ker, download",
                || {
                    ln.upload(0).map_err(m)?;
                    ln.copy_on_device(0, 1).map_err(m)?;
                    ln.mult_ker(1, 1, 64).map_err(m)?;
                    ln.download(1).map_err(m)?;
                    equal("host", ln.host().map_err(m)?.to_vec(), vec![3.0])
                },
            );
        }
    }
    t.finish()
}

fn event_and_batch_refusals(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("streams::event_and_batch_refusals");
    let k = "mult_ker";
    let e = Array1::<f32>::zeros(0);
    let one = [1.75f32];
    t.refuse("mult_ker_events: empty", Want::Invalid(k), || {
        gpu.mult_ker_events(e.view())
    });
    t.works("mult_ker_events: one element", || {
        equal(
            "out",
            gpu.mult_ker_events(ArrayView1::from(&one))
                .map_err(m)?
                .0
                .to_vec(),
            vec![1.75],
        )
    });
    // Batches.
    for (case, inputs) in [
        ("no arrays", vec![]),
        ("an empty array", vec![vec![]]),
        ("lengths differ", vec![vec![1.0f32], vec![1.0, 2.0]]),
    ] {
        t.refuse(
            &format!("SerialBatch::new: {case}"),
            Want::Invalid(k),
            || SerialBatch::new(gpu, &inputs).map(drop),
        );
        t.refuse(
            &format!("StreamBatch::new: {case}"),
            Want::Invalid(k),
            || StreamBatch::new(gpu, &inputs).map(drop),
        );
    }
    let single = vec![vec![-0.0f32]];
    t.works("SerialBatch: one array of one element", || {
        let mut b = SerialBatch::new(gpu, &single).map_err(m)?;
        let r = b.run().map_err(m)?;
        equal("mismatch", r.first_mismatch, None)
    });
    for order in [IssueOrder::BreadthFirst, IssueOrder::DepthFirst] {
        t.works(
            &format!("StreamBatch ({order:?}): one array of one element"),
            || {
                let mut b = StreamBatch::new(gpu, &single).map_err(m)?;
                let r = b.run_with(order).map_err(m)?;
                equal("mismatch", r.first_mismatch, None)?;
                equal("kernels", r.kernel_ms.len(), 1)
            },
        );
    }
    t.finish()
}

fn life_refusals(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("streams::life_refusals");
    let c = "conway_ker";
    let sq = |n: usize| Array2::<i32>::zeros((n, n));
    for (case, lattices) in [
        ("no lattice", vec![]),
        ("0 × 0", vec![sq(0)]),
        ("3 × 4", vec![Array2::zeros((3, 4))]),
        ("a cell of 2", vec![Array2::from_elem((2, 2), 2)]),
        ("a cell of -1", vec![Array2::from_elem((2, 2), -1)]),
        ("sizes differ", vec![sq(8), sq(9)]),
        (
            "the second lattice is bad",
            vec![sq(4), Array2::from_elem((4, 4), 7)],
        ),
    ] {
        t.refuse(&format!("LifeSims::new: {case}"), Want::Invalid(c), || {
            LifeSims::new(gpu, &lattices).map(drop)
        });
    }
    t.works("LifeSims::new: a non-square lattice says so", || {
        let r = reason(LifeSims::new(gpu, &[Array2::zeros((8, 9))]));
        require(r.contains("square"), || format!("reason: {r}"))
    });
    let glider = {
        let mut l = sq(6);
        for (r, col) in [(0, 1), (1, 2), (2, 0), (2, 1), (2, 2)] {
            l[[r, col]] = 1;
        }
        l
    };
    for (case, start) in [
        ("1 × 1, alive", Array2::from_elem((1, 1), 1)),
        (
            "2 × 2",
            Array2::from_shape_vec((2, 2), vec![1, 0, 1, 1]).unwrap_or_else(|_| sq(2)),
        ),
        ("transposed (Fortran order)", glider.clone().reversed_axes()),
        (
            "negative strides",
            glider.clone().slice_move(s![..;-1, ..;-1]),
        ),
    ] {
        t.works(&format!("LifeSims: {case}"), || {
            let mut sims = LifeSims::new(gpu, std::slice::from_ref(&start)).map_err(m)?;
            for step in 1..=3 {
                sims.frame().map_err(m)?;
                equal(
                    &format!("step {step}"),
                    sims.lattice(0).map_err(m)?.to_owned(),
                    life_cpu(start.view(), step).map_err(m)?,
                )?;
            }
            Ok(())
        });
    }
    t.works("LifeSims::lattice: simulation 1 of 1 refused", || {
        let sims = LifeSims::new(gpu, &[sq(2)]).map_err(m)?;
        match sims.lattice(1) {
            Err(Error::InvalidInput {
                kernel: "conway_ker",
                ..
            }) => Ok(()),
            r => Err(format!("got {r:?}")),
        }
    });
    match Lane::<i32, 2>::new(gpu, 4) {
        Err(e) => t.works("Lane<i32, 2>::new(4)", || Err(m(e))),
        Ok(mut ln) => {
            for (case, n, src, dst) in [
                ("n = 0", 0, 0, 1),
                ("3 × 3 in 4 cells", 3, 0, 1),
                ("in place", 2, 1, 1),
                ("source buffer 2", 2, 2, 1),
                ("destination buffer 7", 2, 0, 7),
                (
                    "n = 2,097,121 (65,536 blocks along y)",
                    65_535 * 32 + 1,
                    0,
                    1,
                ),
                ("n = 2^32 (n² overflows)", 1 << 32, 0, 1),
            ] {
                t.refuse(
                    &format!("Lane::conway_step: {case}"),
                    Want::Invalid(c),
                    || ln.conway_step(n, src, dst),
                );
            }
        }
    }
    t.works("Lane::conway_step: one live cell dies", || {
        let mut ln = Lane::<i32, 2>::from_host(gpu, &[1]).map_err(m)?;
        ln.upload(0).map_err(m)?;
        ln.conway_step(1, 0, 1).map_err(m)?;
        ln.download(1).map_err(m)?;
        equal("cell", ln.host().map_err(m)?.to_vec(), vec![0])
    });
    t.refuse(
        "Lane<i32, 1>::conway_step: no second buffer",
        Want::Invalid(c),
        || {
            let mut ln = Lane::<i32, 1>::new(gpu, 1)?;
            ln.conway_step(1, 0, 1)
        },
    );
    t.finish()
}

fn context_refusals(_gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("streams::context_refusals");
    let k = "context";
    t.refuse("manual_context_roundtrip: empty", Want::Invalid(k), || {
        manual_context_roundtrip(&[])
    });
    t.works("manual_context_roundtrip: one element", || {
        equal(
            "back",
            manual_context_roundtrip(&[-3.5]).map_err(m)?,
            vec![-3.5],
        )
    });
    match ThreadContext::new() {
        Err(e) => t.works("ThreadContext::new", || Err(m(e))),
        Ok(mut ctx) => {
            t.refuse(
                "ThreadContext::copy_roundtrip: empty",
                Want::Invalid(k),
                || ctx.copy_roundtrip(&[]),
            );
            t.works("ThreadContext::copy_roundtrip: one element", || {
                equal("back", ctx.copy_roundtrip(&[1.0]).map_err(m)?, vec![1.0])
            });
            t.refuse(
                "ThreadContext::mult_ker: no module loaded",
                Want::Invalid(k),
                || ctx.mult_ker(&[1.0]),
            );
            t.refuse(
                "ThreadContext::load_module: corrupt PTX",
                Want::ModuleLoad,
                || ctx.load_module(PTX_GARBAGE),
            );
            t.refuse(
                "ThreadContext::load_module: empty PTX",
                Want::ModuleLoad,
                || ctx.load_module(""),
            );
            t.refuse(
                "ThreadContext::load_module: PTX with a NUL",
                Want::Invalid("module"),
                || ctx.load_module("a\0b"),
            );
            t.refuse("ThreadContext::load_cubin: empty", Want::Cuda(k), || {
                ctx.load_cubin(&[])
            });
            t.refuse(
                "ThreadContext::load_cubin: not a cubin",
                Want::Cuda(k),
                || ctx.load_cubin(b"this is not an ELF image"),
            );
            t.works("ThreadContext::load_module: PTX without mult_ker", || {
                ctx.load_module(PTX_WITHOUT_KERNEL).map_err(m)
            });
            t.refuse(
                "ThreadContext::mult_ker: module without mult_ker",
                Want::NotFound("mult_ker"),
                || ctx.mult_ker(&[1.0]),
            );
            t.works("ThreadContext::load_module: the crate's PTX", || {
                ctx.load_module(PTX).map_err(m)
            });
            t.refuse(
                "ThreadContext::mult_ker: empty",
                Want::Invalid("mult_ker"),
                || ctx.mult_ker(&[]),
            );
            t.works("ThreadContext::mult_ker: one element", || {
                equal("out", ctx.mult_ker(&[0.125]).map_err(m)?, vec![0.125])
            });
            let handle = ctx.handle();
            t.refuse(
                "ContextHandle::bind: from another thread",
                Want::Invalid(k),
                || {
                    let h = handle.clone();
                    std::thread::scope(|s| s.spawn(move || h.bind()).join())
                        .unwrap_or_else(|_| Err(Error::invalid("test", "the thread panicked")))
                },
            );
            t.works("ThreadContext::destroy", || ctx.destroy().map_err(m));
            t.refuse(
                "ContextHandle::bind: after destroy",
                Want::Invalid(k),
                || handle.bind(),
            );
        }
    }
    // (No arrays, an empty array and a PTX with a NUL are in `check_refusals`.)
    t.refuse("threads_mult_ker: corrupt PTX", Want::Cuda(k), || {
        threads_mult_ker(PTX_GARBAGE, &[vec![1.0]])
    });
    t.refuse(
        "threads_mult_ker: PTX without mult_ker",
        Want::NotFound("mult_ker"),
        || threads_mult_ker(PTX_WITHOUT_KERNEL, &[vec![1.0]]),
    );
    t.works("threads_mult_ker: one thread, one element", || {
        equal(
            "out",
            threads_mult_ker(PTX, &[vec![9.0]]).map_err(m)?,
            vec![vec![9.0]],
        )
    });
    t.finish()
}
