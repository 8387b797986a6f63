//! GPU tests of seed 003's family: `mult_ker` (exact, any length and shape),
//! the serial and per-stream batches, events, lanes (page-locked buffers and
//! streams) and their misuse errors, Conway's Game of Life on concurrent
//! streams against the CPU, contexts made by hand and one per host thread,
//! and the wrong-thread error. Plus CPU-only checks: the PTX keeps the 100
//! operations of `mult_ker`, and bad inputs are refused before any GPU call.
mod common;

use std::process::ExitCode;
use std::sync::mpsc;

use common::{AWKWARD_LENGTHS, cpu_test, ensure, fail, gpu_test, run};
use cuda_kernels::async_mem::Lane;
use cuda_kernels::contexts::{ThreadContext, manual_context_roundtrip, threads_mult_ker};
use cuda_kernels::life::{
    LifeKernel, LifeSims, check_lattice, life_cpu, life_step_cpu, random_lattice,
};
use cuda_kernels::ndarray::{Array1, Array2, array};
use cuda_kernels::streams::{
    IssueOrder, SEED_BLOCK, SEED_GRID, SerialBatch, StreamBatch, first_difference, mult_ker_cpu,
    randn_arrays,
};
use cuda_kernels::util::Rng;
use cuda_kernels::{Error, Gpu};
use libtest_mimic::Failed;

/// `conway_fast` (the default) and `conway_ker` on lattices of 1, 2, 3, 4,
/// 5, 8, 31, 32, 33, 64, 127, 129 and 4097 cells a side (random, and a
/// glider across the wrap-around corner): three steps, each exactly the CPU
/// reference's lattice, for both kernels.
fn life_fast_kernel_edges(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(4097);
    for n in [1usize, 2, 3, 4, 5, 8, 31, 32, 33, 64, 127, 129, 4097] {
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

fn main() -> ExitCode {
    run(vec![
        gpu_test("life_fast_kernel_edges", life_fast_kernel_edges),
        cpu_test(
            "mult_ker_ptx_keeps_all_operations",
            mult_ker_ptx_keeps_all_operations,
        ),
        cpu_test(
            "bad_counts_are_refused_without_a_gpu",
            bad_counts_are_refused_without_a_gpu,
        ),
        gpu_test(
            "mult_ker_is_exact_for_any_length",
            mult_ker_is_exact_for_any_length,
        ),
        gpu_test("mult_ker_refuses_bad_shapes", mult_ker_refuses_bad_shapes),
        gpu_test("batches_preserve_every_array", batches_preserve_every_array),
        gpu_test("batches_refuse_bad_input", batches_refuse_bad_input),
        gpu_test("events_are_ordered", events_are_ordered),
        gpu_test("lane_copies_and_misuse", lane_copies_and_misuse),
        gpu_test(
            "life_equals_cpu_after_200_steps",
            life_equals_cpu_after_200_steps,
        ),
        gpu_test("life_any_size_equals_cpu", life_any_size_equals_cpu),
        gpu_test("life_refuses_bad_input", life_refuses_bad_input),
        gpu_test("manual_context_round_trip", manual_context_round_trip),
        gpu_test(
            "ten_threads_with_own_contexts",
            ten_threads_with_own_contexts,
        ),
        gpu_test(
            "wrong_thread_is_a_typed_error",
            wrong_thread_is_a_typed_error,
        ),
        gpu_test(
            "thread_context_rebinds_after_gpu",
            thread_context_rebinds_after_gpu,
        ),
    ])
}

fn invalid<T>(r: cuda_kernels::Result<T>) -> bool {
    matches!(r, Err(Error::InvalidInput { .. }))
}

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
    let ptx = cuda_kernels::PTX;
    let start = ptx
        .find(".entry mult_ker(")
        .ok_or_else(|| fail("no mult_ker entry in the PTX"))?;
    let body = &ptx[start..];
    let body = &body[..body.find("\n}").unwrap_or(body.len())];
    let ops = body
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

fn bad_counts_are_refused_without_a_gpu() -> Result<(), Failed> {
    ensure(invalid(threads_mult_ker(cuda_kernels::PTX, &[])), || {
        "0 threads accepted".into()
    })?;
    ensure(
        check_lattice(Array2::<i32>::zeros((0, 0)).view()).is_err(),
        || "lattice size 0 accepted".into(),
    )?;
    ensure(
        check_lattice(Array2::<i32>::zeros((4, 5)).view()).is_err(),
        || "non-square lattice accepted".into(),
    )
}

fn mult_ker_is_exact_for_any_length(gpu: &Gpu) -> Result<(), Failed> {
    for &n in AWKWARD_LENGTHS {
        let data: Array1<f32> = randn_arrays(1, n, n as u64).remove(0).into();
        for (grid, block) in [(SEED_GRID, SEED_BLOCK), (3, 100), (1024, 256)] {
            let out = gpu.mult_ker(data.view(), grid, block).map_err(fail)?;
            ensure(
                first_difference(out.as_slice().unwrap(), data.as_slice().unwrap()).is_none(),
                || format!("n = {n}, <<<{grid}, {block}>>>: output differs from input"),
            )?;
        }
    }
    // Edge values: subnormals, signed zero, large magnitudes.
    let edge = array![
        f32::from_bits(1),
        -0.0,
        0.0,
        1e30,
        -1.7e38,
        f32::MIN_POSITIVE
    ];
    let out = gpu.mult_ker(edge.view(), 1, 64).map_err(fail)?;
    let cpu = mult_ker_cpu(edge.view());
    ensure(
        first_difference(out.as_slice().unwrap(), edge.as_slice().unwrap()).is_none()
            && first_difference(cpu.as_slice().unwrap(), edge.as_slice().unwrap()).is_none(),
        || format!("edge values changed: GPU {out}, CPU {cpu}"),
    )
}

fn mult_ker_refuses_bad_shapes(gpu: &Gpu) -> Result<(), Failed> {
    let a = Array1::<f32>::zeros(10);
    let e = Array1::<f32>::zeros(0);
    ensure(invalid(gpu.mult_ker(e.view(), 1, 64)), || "empty".into())?;
    ensure(invalid(gpu.mult_ker(a.view(), 0, 64)), || "grid 0".into())?;
    ensure(invalid(gpu.mult_ker(a.view(), 1, 0)), || "block 0".into())?;
    ensure(invalid(gpu.mult_ker(a.view(), 1, 2048)), || {
        "block 2048".into()
    })?;
    ensure(invalid(gpu.mult_ker_events(e.view())), || {
        "events, empty".into()
    })
}

fn batches_preserve_every_array(gpu: &Gpu) -> Result<(), Failed> {
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
    for (lane, input) in batch.lanes().iter().zip(&inputs) {
        ensure(lane.host().map_err(fail)? == &input[..], || {
            "lane host".into()
        })?;
    }
    Ok(())
}

fn batches_refuse_bad_input(gpu: &Gpu) -> Result<(), Failed> {
    let none: Vec<Vec<f32>> = Vec::new();
    ensure(invalid(SerialBatch::new(gpu, &none)), || {
        "0 arrays (serial)".into()
    })?;
    ensure(invalid(StreamBatch::new(gpu, &none)), || {
        "0 arrays (streams)".into()
    })?;
    let empty = vec![Vec::new(); 3];
    ensure(invalid(StreamBatch::new(gpu, &empty)), || {
        "empty arrays".into()
    })?;
    let ragged = vec![vec![1.0; 4], vec![1.0; 5]];
    ensure(invalid(SerialBatch::new(gpu, &ragged)), || "ragged".into())
}

fn events_are_ordered(gpu: &Gpu) -> Result<(), Failed> {
    let data: Array1<f32> = randn_arrays(1, 1 << 22, 9).remove(0).into();
    let (out, ev) = gpu.mult_ker_events(data.view()).map_err(fail)?;
    ensure(out == data, || "output differs".into())?;
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

fn lane_copies_and_misuse(gpu: &Gpu) -> Result<(), Failed> {
    ensure(invalid(Lane::<f32, 1>::new(gpu, 0)), || "length 0".into())?;
    ensure(invalid(Lane::<f32, 0>::new(gpu, 4)), || {
        "no device buffer".into()
    })?;
    let data: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    let mut lane = Lane::<f32, 2>::from_host(gpu, &data).map_err(fail)?;
    ensure(invalid(lane.upload(2)), || "upload to buffer 2".into())?;
    ensure(invalid(lane.copy_on_device(1, 1)), || {
        "copy onto itself".into()
    })?;
    ensure(invalid(lane.mult_ker(5, 1, 64)), || {
        "mult_ker on buffer 5".into()
    })?;
    lane.upload(0).map_err(fail)?;
    lane.copy_on_device(0, 1).map_err(fail)?;
    lane.host_mut().map_err(fail)?.fill(-1.0);
    lane.mult_ker(1, 1, 64).map_err(fail)?;
    lane.download(1).map_err(fail)?;
    ensure(lane.host().map_err(fail)? == &data[..], || {
        "round trip via buffer 1".into()
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

fn life_equals_cpu_after_200_steps(gpu: &Gpu) -> Result<(), Failed> {
    run_life(gpu, &starts(4, 128, 1), 200)
}

fn life_any_size_equals_cpu(gpu: &Gpu) -> Result<(), Failed> {
    for (n, steps) in [(1, 3), (2, 5), (33, 60), (100, 100), (257, 20)] {
        run_life(gpu, &starts(2, n, n as u64), steps)?;
    }
    Ok(())
}

fn life_refuses_bad_input(gpu: &Gpu) -> Result<(), Failed> {
    ensure(invalid(LifeSims::new(gpu, &[])), || "0 simulations".into())?;
    ensure(
        invalid(LifeSims::new(gpu, &[Array2::zeros((0, 0))])),
        || "size 0".into(),
    )?;
    let r = reason(LifeSims::new(gpu, &[Array2::zeros((8, 9))]));
    ensure(r.contains("square"), || format!("non-square: {r}"))?;
    ensure(
        invalid(LifeSims::new(gpu, &[array![[0, 3], [1, 0]]])),
        || "cell 3".into(),
    )?;
    let mixed = [Array2::zeros((8, 8)), Array2::zeros((9, 9))];
    ensure(invalid(LifeSims::new(gpu, &mixed)), || "mixed sizes".into())?;
    let mut lane = Lane::<i32, 2>::new(gpu, 64).map_err(fail)?;
    ensure(invalid(lane.conway_step(9, 0, 1)), || {
        "9×9 in 64 cells".into()
    })?;
    ensure(invalid(lane.conway_step(8, 0, 0)), || "in place".into())?;
    ensure(invalid(lane.conway_step(0, 0, 1)), || "n = 0".into())?;
    lane.conway_step(8, 0, 1).map_err(fail)
}

fn manual_context_round_trip(_gpu: &Gpu) -> Result<(), Failed> {
    let back = manual_context_roundtrip(&[1.0, 2.0, 3.0]).map_err(fail)?;
    ensure(back == [1.0, 2.0, 3.0], || format!("got {back:?}"))
}

fn ten_threads_with_own_contexts(_gpu: &Gpu) -> Result<(), Failed> {
    let inputs = randn_arrays(10, 1 << 20, 11);
    let outputs = threads_mult_ker(cuda_kernels::PTX, &inputs).map_err(fail)?;
    ensure(outputs.len() == 10, || "ten results".into())?;
    for (k, (o, i)) in outputs.iter().zip(&inputs).enumerate() {
        ensure(first_difference(o, i).is_none(), || {
            format!("thread {k} differs")
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
    let bare = ThreadContext::new().map_err(fail)?;
    ensure(invalid(bare.mult_ker(&data)), || {
        "mult_ker without a module".into()
    })?;
    bare.destroy().map_err(fail)?;
    let ctx = ThreadContext::with_module(cuda_kernels::PTX).map_err(fail)?;
    // Using the primary context in between makes it current on this thread.
    let via_gpu = gpu
        .mult_ker(Array1::from(data.clone()).view(), 1, 64)
        .map_err(fail)?;
    let via_ctx = ctx.mult_ker(&data).map_err(fail)?;
    ensure(invalid(ctx.mult_ker(&[])), || "empty array".into())?;
    ctx.destroy().map_err(fail)?;
    ensure(via_gpu.to_vec() == data && via_ctx == data, || {
        "outputs differ".into()
    })
}
