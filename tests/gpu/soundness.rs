//! Safe code cannot reach freed memory or race (issue 40, items 1 and 2):
//! a buffer keeps its device's context (and so its memory) alive after the
//! last `Gpu` of the device drops; the `_on_device` launchers of two `Gpu`s
//! of one device share the device's ordering stream; a collective on a
//! stream that is not the ordering stream starts after the work queued
//! there and is seen by the launches and copies queued after it (`to_vec`
//! included). Each test failed before the change on a GPU: the write through
//! the stale buffer landed in the fresh one; the second `Gpu`'s reduction,
//! or the collective, ran before the kernel that wrote its input.
//!
//! The ordering tests widen the window a race needs: a slow kernel
//! (`mult_ker` over 2^24 elements with one block of 64 threads) goes first
//! on the ordering stream, so work on another stream that does not wait for
//! it would run long before the kernel that writes its input. On the
//! simulator every launch and collective finishes before it returns, and
//! the tests check the same values.
use std::process::ExitCode;

use cuda_kernels::async_mem::Lane;
use cuda_kernels::nccl::{Communicator, ReduceOp};
use cuda_kernels::prelude::*;
use cuda_kernels::reduce::Sum;
use cuda_kernels::{Gpu, Stream};
use libtest_mimic::{Failed, Trial};

use crate::common::{ensure, fail, sized};
use crate::support::rerun_self_printing;

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        kernel!(a_buffer_outlives_its_gpu),
        kernel!(on_device_launchers_of_two_gpus_are_ordered),
        kernel!(a_collective_on_a_new_stream_is_ordered),
        kernel!(a_collective_on_a_lane_stream_is_ordered),
    ]
}

/// The variable that makes this binary the child of
/// [`a_buffer_outlives_its_gpu`].
const OUTLIVES_CHILD: &str = "CUDA_KERNELS_TEST_BUFFER_OUTLIVES_GPU_CHILD";

/// What the child prints when every value was right.
const OUTLIVES_OK: &str = "OUTLIVES: every value right";

/// The child processes of this family (this binary again, with a variable
/// set): `Some(exit code)` in a child, `None` otherwise.
pub fn child_process() -> Option<ExitCode> {
    std::env::var_os(OUTLIVES_CHILD)?;
    Some(match outlives_sequence() {
        Ok(()) => {
            println!("{OUTLIVES_OK}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("OUTLIVES: {e}");
            ExitCode::FAILURE
        }
    })
}

/// The sequence, in a process where no other `Gpu` holds the
/// device's context: a buffer made on a `Gpu` that then drops (the last one
/// of the device), a second `Gpu` and a buffer of its own, a write through
/// the first buffer. The write must land in the first buffer's memory, not
/// in the second's (which the driver could have placed at the same address
/// had the context been released); dropping the first buffer must not free
/// the second's memory either.
fn outlives_sequence() -> Result<(), String> {
    let n = 1 << 20;
    let e = |e: cuda_kernels::Error| e.to_string();
    let mut stale = {
        let g = cuda_kernels::gpu().map_err(e)?;
        g.to_device(&vec![1f32; n]).map_err(e)?
    };
    let g2 = cuda_kernels::gpu().map_err(e)?;
    let fresh = g2.to_device(&vec![2f32; n]).map_err(e)?;
    stale.copy_from(&vec![3f32; n]).map_err(e)?;
    let all = |v: &[f32], x: f32| v.iter().position(|&y| y != x);
    let check = |what: &str, v: Vec<f32>, x: f32| match all(&v, x) {
        None => Ok(()),
        Some(i) => Err(format!("{what}[{i}] = {}, wanted {x}", v[i])),
    };
    check(
        "fresh after the write through stale",
        fresh.to_vec().map_err(e)?,
        2.0,
    )?;
    check("stale after its write", stale.to_vec().map_err(e)?, 3.0)?;
    drop(stale);
    let next = g2.to_device(&vec![4f32; n]).map_err(e)?;
    check("fresh after stale dropped", fresh.to_vec().map_err(e)?, 2.0)?;
    check("the next allocation", next.to_vec().map_err(e)?, 4.0)?;
    // And the second Gpu's kernels still run over its buffers.
    let a = g2.to_device(&vec![1.5f32; n]).map_err(e)?;
    let mut c = g2.zeroed::<f32>(n).map_err(e)?;
    g2.multiply_on_device(&a, &fresh, &mut c).map_err(e)?;
    check("c = 1.5 · fresh", c.to_vec().map_err(e)?, 3.0)
}

/// Item 1: the sequence gets the right values (in a child process of
/// its own, so that the harness's shared `Gpu` does not keep the context
/// alive and hide the fault).
fn a_buffer_outlives_its_gpu(gpu: &Gpu) -> Result<(), Failed> {
    rerun_self_printing(gpu, OUTLIVES_CHILD, &[OUTLIVES_OK])
}

/// A second `Gpu` of `gpu`'s device: a CUDA `Gpu` of the same ordinal (the
/// same primary context), or the simulator (simulated device 0 again).
fn second_gpu(gpu: &Gpu) -> Result<Gpu, Failed> {
    if gpu.is_simulated() {
        cuda_kernels::simulator().map_err(fail)
    } else {
        cuda_kernels::gpu_on(gpu.ordinal()).map_err(fail)
    }
}

/// The input and scratch of an ordering test: `a` and `b` (1.5 and 2.0 in
/// every element, so `a · b` = 3 exactly), `x` for `a · b`, `r` for what
/// the collective or the second `Gpu` makes of it, and the slow kernel's
/// buffer. All allocated (and zeroed) before the slow kernel is queued: a
/// memset on the legacy default stream would wait for it.
struct Inputs {
    n: usize,
    a: cuda_kernels::DeviceBuffer<f32>,
    b: cuda_kernels::DeviceBuffer<f32>,
    x: cuda_kernels::DeviceBuffer<f32>,
    r: cuda_kernels::DeviceBuffer<f32>,
    slow: cuda_kernels::DeviceBuffer<f32>,
}

impl Inputs {
    fn new(gpu: &Gpu) -> Result<Self, Failed> {
        let n = sized(gpu, 1 << 20, 4099);
        Ok(Self {
            n,
            a: gpu.to_device(&vec![1.5f32; n]).map_err(fail)?,
            b: gpu.to_device(&vec![2.0f32; n]).map_err(fail)?,
            x: gpu.zeroed(n).map_err(fail)?,
            r: gpu.zeroed(n).map_err(fail)?,
            slow: gpu
                .to_device(&vec![1.0f32; sized(gpu, 1 << 24, 64)])
                .map_err(fail)?,
        })
    }

    /// Queues the slow kernel, then `x = a · b`, on `gpu`'s stream (the
    /// device's ordering stream), and returns at once.
    fn queue_slow_then_x(&mut self, gpu: &Gpu) -> Result<(), Failed> {
        gpu.synchronize("soundness").map_err(fail)?;
        gpu.mult_ker_on_device(&mut self.slow, 1, 64)
            .map_err(fail)?;
        gpu.multiply_on_device(&self.a, &self.b, &mut self.x)
            .map_err(fail)
    }
}

/// Checks that every element of `got` is 3 (`a · b`).
fn all_three(what: &str, got: &[f32]) -> Result<(), Failed> {
    match got.iter().position(|&v| v != 3.0) {
        None => Ok(()),
        Some(i) => Err(fail(format!(
            "{what}[{i}] = {} (wanted 3 = 1.5 · 2): it ran before the kernel that wrote its input",
            got[i]
        ))),
    }
}

/// What reads the collective's result first, while the collective may
/// still be waiting for the slow kernel: the host, or a launcher on the
/// ordering stream.
#[derive(Clone, Copy)]
enum Reader {
    /// `r.to_vec()` (a copy on the legacy default stream).
    ToVec,
    /// `reduce_on_device` of `r` (on the ordering stream).
    OnDevice,
}

/// Checks that `sum`, a sum of `n` threes, is `3 n` (exact: integers below
/// 2^24).
fn sum_is_three_n(what: &str, sum: f32, n: usize) -> Result<(), Failed> {
    ensure(sum == (3 * n) as f32, || {
        format!(
            "{what}: the sum is {sum}, wanted {}: it ran before the kernel that wrote its input",
            3 * n
        )
    })
}

/// Item 2, two `Gpu`s of one device: the second `Gpu`'s `reduce_on_device`
/// of `x` runs after the first `Gpu`'s `multiply_on_device` that writes it.
fn on_device_launchers_of_two_gpus_are_ordered(gpu: &Gpu) -> Result<(), Failed> {
    let g2 = second_gpu(gpu)?;
    ensure(g2.device_id() == gpu.device_id(), || {
        format!("{} and {} differ", g2.device_id(), gpu.device_id())
    })?;
    let mut inputs = Inputs::new(gpu)?;
    let mut scratch = g2.reduce_scratch::<f32>().map_err(fail)?;
    inputs.queue_slow_then_x(gpu)?;
    g2.reduce_on_device::<Sum, f32>(&inputs.x, None, &mut scratch)
        .map_err(fail)?;
    let sum = scratch.result(&g2).map_err(fail)?;
    sum_is_three_n(
        "the second Gpu's reduce_on_device of x after the first's multiply_on_device",
        sum,
        inputs.n,
    )?;
    all_three("x", &inputs.x.to_vec().map_err(fail)?)
}

/// A collective of a one-rank communicator on `gpu` (`r = x`, an all-reduce
/// of one rank) on `stream`, queued after the slow kernel and `x = a · b` on
/// the ordering stream; then `reader` reads `r` at once and must see the
/// collective's result; then the other reader checks it too.
fn collective_on(
    gpu: &Gpu,
    stream: &Stream,
    inputs: &mut Inputs,
    reader: Reader,
) -> Result<(), Failed> {
    let comm = Communicator::all_devices(&[gpu])
        .map_err(fail)?
        .pop()
        .ok_or_else(|| fail("no communicator"))?;
    let mut scratch = gpu.reduce_scratch::<f32>().map_err(fail)?;
    inputs.queue_slow_then_x(gpu)?;
    comm.all_reduce(&inputs.x, &mut inputs.r, ReduceOp::Sum, stream)
        .map_err(fail)?;
    let mut reduce = || -> Result<(), Failed> {
        gpu.reduce_on_device::<Sum, f32>(&inputs.r, None, &mut scratch)
            .map_err(fail)?;
        let sum = scratch.result(gpu).map_err(fail)?;
        sum_is_three_n("reduce_on_device of r after the collective", sum, inputs.n)
    };
    let checked = match reader {
        Reader::ToVec => inputs
            .r
            .to_vec()
            .map_err(fail)
            .and_then(|r| all_three("r.to_vec() after the collective", &r))
            .and_then(|()| reduce()),
        Reader::OnDevice => reduce().and_then(|()| {
            all_three(
                "r.to_vec() after the collective",
                &inputs.r.to_vec().map_err(fail)?,
            )
        }),
    };
    comm.synchronize(stream).map_err(fail)?;
    checked
}

/// Item 2, NCCL on a `Gpu::new_stream` stream (blocking, but not the
/// ordering stream), read first by `reduce_on_device`.
fn a_collective_on_a_new_stream_is_ordered(gpu: &Gpu) -> Result<(), Failed> {
    let mut inputs = Inputs::new(gpu)?;
    let stream = gpu.new_stream().map_err(fail)?;
    ensure(gpu.is_simulated() || !stream.is_ordering(), || {
        "a new stream is the ordering stream".into()
    })?;
    collective_on(gpu, &stream, &mut inputs, Reader::OnDevice)
}

/// Item 2, NCCL on a [`Lane`]'s non-blocking stream (which the legacy
/// default stream's copies do not wait for by themselves), read first by
/// `r.to_vec()`.
fn a_collective_on_a_lane_stream_is_ordered(gpu: &Gpu) -> Result<(), Failed> {
    let mut inputs = Inputs::new(gpu)?;
    let lane = Lane::<f32, 1>::new(gpu, 1).map_err(fail)?;
    lane.stream().synchronize().map_err(fail)?;
    collective_on(gpu, lane.stream(), &mut inputs, Reader::ToVec)
}
