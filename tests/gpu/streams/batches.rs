//! The serial and per-stream batches, events, lanes (page-locked buffers and
//! streams): against the CPU, their order and overlap, and their refusals.
use super::*;

/// The serial and per-stream batches (24 arrays of 65,537, each with values
/// that `mult_ker` changes, in its tail too): every output equals the CPU
/// reference (`first_mismatch`, and the lanes' host buffers checked here).
pub(super) fn batches_match_cpu(gpu: &Gpu) -> Result<(), Failed> {
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

pub(super) fn events_are_ordered(gpu: &Gpu) -> Result<(), Failed> {
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

pub(super) fn lane_copies(gpu: &Gpu) -> Result<(), Failed> {
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
pub(super) fn lane_overlaps_the_legacy_default_stream(gpu: &Gpu) -> Result<(), Failed> {
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

pub(super) fn event_and_batch_refusals(gpu: &Gpu) -> Result<(), Failed> {
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
