//! CUDA graphs (issue 46, `cuda_kernels::graph`): a capture of typed
//! launches, copies and memsets replays to the same values as the same
//! launches queued one by one and as the CPU formula; a launch's arguments
//! change between replays (new scalars, new buffers of the same shape, a
//! whole new graph); buffers of another shape, graph or device, a stream of
//! another device and every call that a graph cannot hold are refused with
//! typed errors, after which the device works on; a graph keeps the
//! buffers it writes alive by itself. On the simulator the replay runs
//! through the simulator's launch, with its checks (an access past a
//! buffer inside a replay is caught there).
use cuda_kernels::graph::{Branch, Held, Update};
use cuda_kernels::graphs::{CG_TOLERANCE, conjugate_gradient, conjugate_gradient_cpu};
use cuda_kernels::kernels::life::CONWAY_FAST;
use cuda_kernels::kernels::multiply::{MULTIPLY, VECTOR_SUM_I32};
use cuda_kernels::life::{LifeKernel, fast_shape, life_cpu, life_launch, random_lattice};
use cuda_kernels::prelude::*;
use cuda_kernels::util::Rng;
use cuda_kernels::{Error, Gpu, LaunchConfig};
use libtest_mimic::{Failed, Trial};

use crate::common::{ensure, fail, sized};

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        kernel!(replay_equals_stream_launches),
        kernel!(copies_and_memsets_replay_in_order),
        kernel!(forked_branches_join),
        kernel!(life_graph_equals_per_step_launches),
        kernel!(set_args_takes_new_scalars_and_buffers),
        kernel!(update_takes_a_new_graph),
        kernel!(uncapturable_calls_are_refused),
        kernel!(other_devices_and_graphs_are_refused),
        kernel!(a_graph_keeps_its_buffers_alive),
        kernel!(a_replay_is_checked_like_a_launch),
        kernel!(conjugate_gradient_graph_equals_stream_launches),
    ]
}

/// A 1-D launch over `n` elements, 256 threads a block.
fn linear(n: usize) -> LaunchConfig {
    LaunchConfig::linear(n.div_ceil(256) as u32, 256)
}

/// `x[i] = i` and increments `d[i] = (i mod 7) − 3`.
fn chain_inputs(n: usize) -> (Vec<i32>, Vec<i32>) {
    let x = (0..n as i32).collect();
    let d = (0..n as i32).map(|i| i % 7 - 3).collect();
    (x, d)
}

/// The CPU formula of `k` steps `x ← x + d`.
fn chain_cpu(x: &[i32], d: &[i32], k: usize) -> Vec<i32> {
    x.iter()
        .zip(d)
        .map(|(&x, &d)| x.wrapping_add(d.wrapping_mul(k as i32)))
        .collect()
}

/// `Err` naming `what` and the first element where `got` and `want` differ.
fn same<T: PartialEq + std::fmt::Debug>(what: &str, got: &[T], want: &[T]) -> Result<(), Failed> {
    ensure(got.len() == want.len(), || {
        format!("{what}: {} elements, wanted {}", got.len(), want.len())
    })?;
    match got.iter().zip(want).position(|(g, w)| g != w) {
        None => Ok(()),
        Some(i) => Err(fail(format!(
            "{what}[{i}] = {:?}, wanted {:?}",
            got[i], want[i]
        ))),
    }
}

/// `k` launches `x ← x + d` captured over the held buffers `a` and `b` in
/// turn (`k` even: the result lands in `a`), reading the borrowed `d`.
fn capture_chain<'a>(
    gpu: &'a Gpu,
    x: Vec<i32>,
    d: &'a cuda_kernels::DeviceBuffer<i32>,
    k: usize,
) -> Result<(cuda_kernels::GraphExec<'a>, Held<i32>), Failed> {
    let n = x.len();
    let a = gpu.to_device(&x).map_err(fail)?;
    let b = gpu.zeroed::<i32>(n).map_err(fail)?;
    let mut c = gpu.begin_capture().map_err(fail)?;
    let (a, b) = (c.hold(a).map_err(fail)?, c.hold(b).map_err(fail)?);
    for step in 0..k {
        let (src, dst) = if step % 2 == 0 { (a, b) } else { (b, a) };
        // SAFETY: src, d and dst hold n i32; dst overlaps neither input.
        unsafe { c.launch(VECTOR_SUM_I32, linear(n), (src, d, dst, n)) }.map_err(fail)?;
    }
    ensure(c.len() == k, || {
        format!("{} operations captured, wanted {k}", c.len())
    })?;
    let exec = c.end().map_err(fail)?.instantiate().map_err(fail)?;
    Ok((exec, a))
}

/// `k` dependent launches captured once and replayed `r` times (on the
/// ordering stream, then on a new stream, which joins it) give the values
/// of the same `r k` launches queued one by one, and the CPU formula's.
fn replay_equals_stream_launches(gpu: &Gpu) -> Result<(), Failed> {
    let n = sized(gpu, (1 << 16) + 3, 1000);
    let (k, r) = (sized(gpu, 100, 20), 3);
    let (x, d) = chain_inputs(n);
    let d_dev = gpu.to_device(&d).map_err(fail)?;
    // One by one.
    let mut s = [
        gpu.to_device(&x).map_err(fail)?,
        gpu.zeroed::<i32>(n).map_err(fail)?,
    ];
    for step in 0..r * k {
        let (head, tail) = s.split_at_mut(1);
        let (src, dst) = if step % 2 == 0 {
            (&head[0], &mut tail[0])
        } else {
            (&tail[0], &mut head[0])
        };
        // SAFETY: as in capture_chain.
        unsafe {
            gpu.launch(
                VECTOR_SUM_I32,
                linear(n),
                gpu.stream(),
                (src, &d_dev, dst, n),
            )
        }
        .map_err(fail)?;
    }
    let streamed = s[0].to_vec().map_err(fail)?;
    // Captured and replayed.
    let (mut exec, a) = capture_chain(gpu, x.clone(), &d_dev, k)?;
    let other = gpu.new_stream().map_err(fail)?;
    for replay in 0..r {
        let stream = if replay + 1 == r {
            &other
        } else {
            gpu.stream()
        };
        exec.launch(stream).map_err(fail)?;
    }
    let replayed = exec.buffer(a).map_err(fail)?.to_vec().map_err(fail)?;
    let want = chain_cpu(&x, &d, r * k);
    same("one launch at a time", &streamed, &want)?;
    same("replayed graph", &replayed, &want)?;
    exec.synchronize().map_err(fail)
}

/// A graph of a memset, copies and a launch replays them in order: `b = 0;
/// b = a; c = a · b; a = c; e = input`, twice, gives `a = c = a₀⁴` and
/// `e = a₀`; a copy onto itself or of another length is refused.
fn copies_and_memsets_replay_in_order(gpu: &Gpu) -> Result<(), Failed> {
    let n = sized(gpu, 4099, 515);
    let a0: Vec<f32> = (0..n).map(|i| [0.5, 1.5, 2.0, -1.0][i % 4]).collect();
    let (a, b, c) = (
        gpu.to_device(&a0).map_err(fail)?,
        gpu.to_device(&vec![7.0f32; n]).map_err(fail)?,
        gpu.zeroed::<f32>(n).map_err(fail)?,
    );
    let input = gpu.to_device(&a0).map_err(fail)?;
    let (e, short) = (
        gpu.zeroed::<f32>(n).map_err(fail)?,
        gpu.zeroed::<f32>(n - 1).map_err(fail)?,
    );
    let mut cap = gpu.begin_capture().map_err(fail)?;
    let (a, b, c) = (
        cap.hold(a).map_err(fail)?,
        cap.hold(b).map_err(fail)?,
        cap.hold(c).map_err(fail)?,
    );
    let (e, d_short) = (cap.hold(e).map_err(fail)?, cap.hold(short).map_err(fail)?);
    cap.set_zero(b).map_err(fail)?;
    cap.copy(b, a).map_err(fail)?;
    let refused = cap.copy(b, b);
    ensure(
        matches!(&refused, Err(Error::InvalidInput { reason, .. }) if reason.contains("the source is the destination")),
        || format!("a copy onto itself: {refused:?}"),
    )?;
    let refused = cap.copy(c, d_short);
    ensure(matches!(refused, Err(Error::InvalidInput { .. })), || {
        format!("a copy of another length: {refused:?}")
    })?;
    // SAFETY: a, b and c hold n f32; c overlaps neither input.
    unsafe { cap.launch(MULTIPLY, linear(n), (a, b, c, n)) }.map_err(fail)?;
    cap.copy(a, c).map_err(fail)?;
    // A copy from a borrowed input (read-only, for the graph's lifetime) into
    // a held buffer: `e = a₀` at every replay's end.
    cap.copy_from_borrowed(e, &input).map_err(fail)?;
    let mut exec = cap.end().map_err(fail)?.instantiate().map_err(fail)?;
    ensure(exec.graph().len() == 5, || format!("{:?}", exec.graph()))?;
    exec.launch(gpu.stream()).map_err(fail)?;
    let once: Vec<f32> = a0.iter().map(|v| v * v).collect();
    same(
        "a after one replay",
        &exec.buffer(a).map_err(fail)?.to_vec().map_err(fail)?,
        &once,
    )?;
    exec.launch(gpu.stream()).map_err(fail)?;
    let twice: Vec<f32> = once.iter().map(|v| v * v).collect();
    same(
        "a after two",
        &exec.buffer(a).map_err(fail)?.to_vec().map_err(fail)?,
        &twice,
    )?;
    same(
        "c after two",
        &exec.buffer(c).map_err(fail)?.to_vec().map_err(fail)?,
        &twice,
    )?;
    same(
        "b after two",
        &exec.buffer(b).map_err(fail)?.to_vec().map_err(fail)?,
        &once,
    )?;
    same(
        "e, from the borrowed input",
        &exec.buffer(e).map_err(fail)?.to_vec().map_err(fail)?,
        &a0,
    )
}

/// Life on a torus: `steps` steps captured once (`conway_fast`, the two
/// lattices held by the graph) and replayed `r` times equal `r · steps`
/// launches queued one by one and the CPU's lattice.
fn life_graph_equals_per_step_launches(gpu: &Gpu) -> Result<(), Failed> {
    let n = sized(gpu, 256, 40);
    let (steps, r) = (sized(gpu, 100, 6), sized(gpu, 3, 2));
    let lattice = random_lattice(n, 0.3, &mut Rng::new(46));
    let cells = lattice
        .as_standard_layout()
        .to_owned()
        .into_raw_vec_and_offset()
        .0;
    let launch = life_launch(LifeKernel::Fast, n, fast_shape()).map_err(fail)?;
    let (cfg, rows) = (launch.config(), launch.rows);
    // One launch a step.
    let mut s = [
        gpu.to_device(&cells).map_err(fail)?,
        gpu.zeroed::<i32>(n * n).map_err(fail)?,
    ];
    for step in 0..r * steps {
        let (head, tail) = s.split_at_mut(1);
        let (src, dst) = if step % 2 == 0 {
            (&head[0], &mut tail[0])
        } else {
            (&tail[0], &mut head[0])
        };
        // SAFETY: both lattices hold n² i32 and differ; the grid covers the lattice.
        unsafe { gpu.launch(CONWAY_FAST, cfg, gpu.stream(), (src, dst, n, rows)) }.map_err(fail)?;
    }
    let stepped = s[0].to_vec().map_err(fail)?;
    // A graph of `steps` steps.
    let (x, y) = (
        gpu.to_device(&cells).map_err(fail)?,
        gpu.zeroed::<i32>(n * n).map_err(fail)?,
    );
    // Through the closure form of a capture.
    let (graph, x) = gpu
        .capture(|cap| {
            let (x, y) = (cap.hold(x)?, cap.hold(y)?);
            for step in 0..steps {
                let (src, dst) = if step % 2 == 0 { (x, y) } else { (y, x) };
                // SAFETY: as above.
                unsafe { cap.launch(CONWAY_FAST, cfg, (src, dst, n, rows)) }?;
            }
            Ok(x)
        })
        .map_err(fail)?;
    let mut exec = graph.instantiate().map_err(fail)?;
    for _ in 0..r {
        exec.launch(gpu.stream()).map_err(fail)?;
    }
    let replayed = exec.buffer(x).map_err(fail)?.to_vec().map_err(fail)?;
    let want = life_cpu(lattice.view(), r * steps).map_err(fail)?;
    let want = want
        .as_standard_layout()
        .to_owned()
        .into_raw_vec_and_offset()
        .0;
    same("Life, one launch a step", &stepped, &want)?;
    same("Life, replayed graphs", &replayed, &want)
}

/// `set_args` changes one launch's arguments for later replays: a new
/// buffer of increments (held by the executable), then a smaller `n` (a
/// new scalar: only the first half changes); each says how it was done.
/// A buffer of another length is refused before anything changes.
fn set_args_takes_new_scalars_and_buffers(gpu: &Gpu) -> Result<(), Failed> {
    let n = sized(gpu, 1 << 14, 300);
    let (x, d) = chain_inputs(n);
    let d_dev = gpu.to_device(&d).map_err(fail)?;
    let d2: Vec<i32> = d.iter().map(|v| v * 10 + 1).collect();
    let d2_dev = gpu.to_device(&d2).map_err(fail)?;
    let short = gpu.zeroed::<i32>(n - 1).map_err(fail)?;
    let (a, b) = (
        gpu.to_device(&x).map_err(fail)?,
        gpu.zeroed::<i32>(n).map_err(fail)?,
    );
    let mut cap = gpu.begin_capture().map_err(fail)?;
    let (a, b) = (cap.hold(a).map_err(fail)?, cap.hold(b).map_err(fail)?);
    // SAFETY: a, d and b hold n i32; b overlaps neither input.
    let there =
        unsafe { cap.launch(VECTOR_SUM_I32, linear(n), (a, &d_dev, b, n)) }.map_err(fail)?;
    // SAFETY: as above, back into a.
    let back = unsafe { cap.launch(VECTOR_SUM_I32, linear(n), (b, &d_dev, a, n)) }.map_err(fail)?;
    let mut exec = cap.end().map_err(fail)?.instantiate().map_err(fail)?;
    exec.launch(gpu.stream()).map_err(fail)?;
    let mut want = chain_cpu(&x, &d, 2);
    same(
        "before any update",
        &exec.buffer(a).map_err(fail)?.to_vec().map_err(fail)?,
        &want,
    )?;
    // A new buffer of increments for both launches: a += d2 twice.
    let d2_held = exec.hold(d2_dev).map_err(fail)?;
    let mut how = Vec::new();
    // SAFETY: as above, with d2 (n i32) for d.
    how.push(unsafe { exec.set_args(there, (a, d2_held, b, n)) }.map_err(fail)?);
    // SAFETY: as above.
    how.push(unsafe { exec.set_args(back, (b, d2_held, a, n)) }.map_err(fail)?);
    exec.launch(gpu.stream()).map_err(fail)?;
    want = chain_cpu(&want, &d2, 2);
    same(
        "after new buffers",
        &exec.buffer(a).map_err(fail)?.to_vec().map_err(fail)?,
        &want,
    )?;
    // A new scalar: only the first half of a changes.
    let half = n / 2;
    // SAFETY: as above; half < n.
    how.push(unsafe { exec.set_args(there, (a, d2_held, b, half)) }.map_err(fail)?);
    // SAFETY: as above.
    how.push(unsafe { exec.set_args(back, (b, d2_held, a, half)) }.map_err(fail)?);
    exec.launch(gpu.stream()).map_err(fail)?;
    let head = chain_cpu(&want[..half], &d2[..half], 2);
    want[..half].copy_from_slice(&head);
    same(
        "after a new n",
        &exec.buffer(a).map_err(fail)?.to_vec().map_err(fail)?,
        &want,
    )?;
    if gpu.is_simulated() {
        ensure(how.iter().all(|h| *h == Update::InPlace), || {
            format!("{how:?}")
        })?;
    } else {
        println!("set_args on the GPU: {how:?}");
    }
    // Another length: refused, and the graph is unchanged.
    // SAFETY: refused before anything is set.
    let refused = unsafe { exec.set_args(there, (a, &short, b, n)) };
    ensure(
        matches!(&refused, Err(Error::InvalidInput { reason, .. }) if reason.contains("same shape")),
        || format!("a buffer of n − 1 elements: {refused:?}"),
    )?;
    exec.launch(gpu.stream()).map_err(fail)?;
    let head = chain_cpu(&want[..half], &d2[..half], 2);
    want[..half].copy_from_slice(&head);
    same(
        "after the refusal",
        &exec.buffer(a).map_err(fail)?.to_vec().map_err(fail)?,
        &want,
    )
}

/// `update` replaces the whole graph: the same launches over other
/// buffers in place (where the driver takes it), another topology by
/// instantiating again; the values follow the new graph either way.
fn update_takes_a_new_graph(gpu: &Gpu) -> Result<(), Failed> {
    let n = sized(gpu, 5000, 200);
    let (x, d) = chain_inputs(n);
    let d_dev = gpu.to_device(&d).map_err(fail)?;
    let (mut exec, a) = capture_chain(gpu, x.clone(), &d_dev, 2)?;
    exec.launch(gpu.stream()).map_err(fail)?;
    // The same two launches over new buffers.
    let (graph2, a2) = capture_chain_graph(gpu, vec![5; n], &d_dev, 2)?;
    let how = exec.update(graph2).map_err(fail)?;
    if gpu.is_simulated() {
        ensure(how == Update::InPlace, || format!("{how:?}"))?;
    } else {
        println!("update with the same topology on the GPU: {how:?}");
    }
    exec.launch(gpu.stream()).map_err(fail)?;
    same(
        "the new graph's buffer",
        &exec.buffer(a2).map_err(fail)?.to_vec().map_err(fail)?,
        &chain_cpu(&vec![5; n], &d, 2),
    )?;
    same(
        "the old graph's buffer, untouched since",
        &exec.buffer(a).map_err(fail)?.to_vec().map_err(fail)?,
        &chain_cpu(&x, &d, 2),
    )?;
    // Another topology: four launches.
    let (graph4, a4) = capture_chain_graph(gpu, vec![-1; n], &d_dev, 4)?;
    let how = exec.update(graph4).map_err(fail)?;
    ensure(matches!(how, Update::Reinstantiated { .. }), || {
        format!("four launches for two: {how:?}")
    })?;
    exec.launch(gpu.stream()).map_err(fail)?;
    same(
        "after a new topology",
        &exec.buffer(a4).map_err(fail)?.to_vec().map_err(fail)?,
        &chain_cpu(&vec![-1; n], &d, 4),
    )
}

/// [`capture_chain`] without instantiating.
fn capture_chain_graph<'a>(
    gpu: &'a Gpu,
    x: Vec<i32>,
    d: &'a cuda_kernels::DeviceBuffer<i32>,
    k: usize,
) -> Result<(cuda_kernels::Graph<'a>, Held<i32>), Failed> {
    let n = x.len();
    let a = gpu.to_device(&x).map_err(fail)?;
    let b = gpu.zeroed::<i32>(n).map_err(fail)?;
    let mut c = gpu.begin_capture().map_err(fail)?;
    let (a, b) = (c.hold(a).map_err(fail)?, c.hold(b).map_err(fail)?);
    for step in 0..k {
        let (src, dst) = if step % 2 == 0 { (a, b) } else { (b, a) };
        // SAFETY: src, d and dst hold n i32; dst overlaps neither input.
        unsafe { c.launch(VECTOR_SUM_I32, linear(n), (src, d, dst, n)) }.map_err(fail)?;
    }
    Ok((c.end().map_err(fail)?, a))
}

/// What a test of a refused call does inside a capture.
type Refused = fn(&Gpu, &mut cuda_kernels::DeviceBuffer<f32>) -> cuda_kernels::Result<()>;

/// Each call a graph cannot hold, made during a capture, is
/// `Error::NotCapturable` naming it; `end` then fails with the same call;
/// afterwards the device works (a launch and a copy give the right values),
/// and a capture dropped without `end` leaves nothing behind.
fn uncapturable_calls_are_refused(gpu: &Gpu) -> Result<(), Failed> {
    let n = 1000;
    let calls: [(&str, Refused); 11] = [
        ("cuMemAlloc", |g, _| g.zeroed::<f32>(4).map(drop)),
        ("cuMemAlloc", |g, _| g.to_device(&[1.0f32]).map(drop)),
        ("DeviceSlice::copy_to", |_, b| b.to_vec().map(drop)),
        ("DeviceSlice::copy_from", |_, b| {
            b.copy_from(&vec![0.0; 1000])
        }),
        ("DeviceSlice::set_zero", |_, b| b.set_zero()),
        ("DeviceSlice::set_32", |_, b| b.set_32(0)),
        ("Gpu::synchronize", |g, _| g.synchronize("graphs")),
        ("Stream::synchronize", |g, _| g.stream().synchronize()),
        ("Gpu::launch", |g, b| {
            let (p, n) = (b.as_device_ptr(), b.len());
            // SAFETY: b holds n f32, written in place (an elementwise map).
            unsafe { g.launch(MULTIPLY, linear(n), g.stream(), (p, p, p, n)) }
        }),
        ("Gpu::launch", |g, b| g.mult_ker_on_device(b, 1, 64)),
        ("Gpu::begin_capture", |g, _| g.begin_capture().map(drop)),
    ];
    let mut loose = gpu.to_device(&vec![1.0f32; n]).map_err(fail)?;
    for (name, call) in calls {
        let a = gpu.to_device(&vec![2.0f32; n]).map_err(fail)?;
        let c = gpu.zeroed::<f32>(n).map_err(fail)?;
        let mut cap = gpu.begin_capture().map_err(fail)?;
        let (a, c) = (cap.hold(a).map_err(fail)?, cap.hold(c).map_err(fail)?);
        // SAFETY: a and c hold n f32; c overlaps no input.
        unsafe { cap.launch(MULTIPLY, linear(n), (a, a, c, n)) }.map_err(fail)?;
        let got = call(gpu, &mut loose);
        ensure(
            matches!(&got, Err(Error::NotCapturable { call }) if call.contains(name)),
            || format!("{name} during a capture: {got:?}"),
        )?;
        let ended = cap.end();
        ensure(
            matches!(&ended, Err(Error::NotCapturable { call }) if call.contains(name)),
            || format!("end after {name}: {ended:?}"),
        )?;
        // The device and the stream work on.
        let b = gpu.to_device(&vec![3.0f32; n]).map_err(fail)?;
        let mut out = gpu.zeroed::<f32>(n).map_err(fail)?;
        gpu.multiply_on_device(&loose, &b, &mut out).map_err(fail)?;
        same(
            &format!("a launch after {name}"),
            &out.to_vec().map_err(fail)?,
            &vec![3.0; n],
        )?;
    }
    // A buffer freed during a capture (the driver refuses cuMemFree then).
    let doomed = gpu.zeroed::<f32>(n).map_err(fail)?;
    let cap = gpu.begin_capture().map_err(fail)?;
    drop(doomed);
    let ended = cap.end();
    ensure(
        matches!(&ended, Err(Error::NotCapturable { call }) if call.contains("cuMemFree")),
        || format!("end after a buffer dropped during the capture: {ended:?}"),
    )?;
    // Abandoned by its drop: nothing is refused afterwards.
    let a = gpu.to_device(&vec![2.0f32; n]).map_err(fail)?;
    {
        let mut cap = gpu.begin_capture().map_err(fail)?;
        let a = cap.hold(a).map_err(fail)?;
        // SAFETY: a holds n f32, written in place (an elementwise map).
        unsafe { cap.launch(MULTIPLY, linear(n), (a, a, a, n)) }.map_err(fail)?;
    }
    ensure(loose.to_vec().map_err(fail)? == vec![1.0; n], || {
        "loose changed".into()
    })?;
    gpu.synchronize("graphs").map_err(fail)
}

/// A stream of another device, a buffer of another device held or passed,
/// a held buffer of another graph and a node of another graph are refused.
fn other_devices_and_graphs_are_refused(gpu: &Gpu) -> Result<(), Failed> {
    let n = 256;
    let other = Gpu::simulated_device(7).map_err(fail)?;
    let (x, d) = chain_inputs(n);
    let d_dev = gpu.to_device(&d).map_err(fail)?;
    let (mut exec, a) = capture_chain(gpu, x.clone(), &d_dev, 2)?;
    let got = exec.launch(other.stream());
    ensure(
        matches!(
            got,
            Err(Error::WrongDevice {
                argument: "stream",
                ..
            })
        ),
        || format!("a replay on another device's stream: {got:?}"),
    )?;
    let foreign = other.to_device(&x).map_err(fail)?;
    let got = exec.hold(other.to_device(&x).map_err(fail)?);
    ensure(matches!(got, Err(Error::WrongDevice { .. })), || {
        format!("holding another device's buffer: {got:?}")
    })?;
    let (mut exec2, a2) = capture_chain(gpu, x.clone(), &d_dev, 2)?;
    let b = gpu.zeroed::<i32>(n).map_err(fail)?;
    let mut cap = gpu.begin_capture().map_err(fail)?;
    let b = cap.hold(b).map_err(fail)?;
    // SAFETY: refused before anything is recorded.
    let got = unsafe { cap.launch(VECTOR_SUM_I32, linear(n), (a2, &d_dev, b, n)) };
    ensure(
        matches!(&got, Err(Error::InvalidInput { reason, .. }) if reason.contains("another graph")),
        || format!("another graph's held buffer: {got:?}"),
    )?;
    // SAFETY: refused before anything is recorded.
    let got = unsafe { cap.launch(VECTOR_SUM_I32, linear(n), (b, &foreign, b, n)) };
    ensure(matches!(got, Err(Error::WrongDevice { .. })), || {
        format!("another device's buffer: {got:?}")
    })?;
    // SAFETY: b and d hold n i32 (b read and written in place, elementwise).
    let node = unsafe { cap.launch(VECTOR_SUM_I32, linear(n), (b, &d_dev, b, n)) }.map_err(fail)?;
    let graph = cap.end().map_err(fail)?;
    // SAFETY: refused before anything is set.
    let got = unsafe { exec.set_args(node, (a, &d_dev, a, n)) };
    ensure(
        matches!(&got, Err(Error::InvalidInput { reason, .. }) if reason.contains("not a launch of this")),
        || format!("another graph's node: {got:?}"),
    )?;
    let got = exec.buffer(a2);
    ensure(got.is_err(), || "another executable's buffer".into())?;
    drop(graph);
    exec2.launch(gpu.stream()).map_err(fail)?;
    exec.launch(gpu.stream()).map_err(fail)?;
    same(
        "after the refusals",
        &exec.buffer(a).map_err(fail)?.to_vec().map_err(fail)?,
        &chain_cpu(&x, &d, 2),
    )
}

/// The buffers a graph writes are its own: nothing else names them after
/// the capture, and the graph replays over them later, from another
/// thread too (an executable is `Send`).
fn a_graph_keeps_its_buffers_alive(gpu: &Gpu) -> Result<(), Failed> {
    let n = sized(gpu, 1 << 18, 333);
    let (x, d) = chain_inputs(n);
    let d_dev = gpu.to_device(&d).map_err(fail)?;
    let (mut exec, a) = capture_chain(gpu, x.clone(), &d_dev, 4)?;
    // Churn the allocator: freed memory reused elsewhere must not be the graph's.
    for _ in 0..4 {
        let junk = gpu.to_device(&vec![-7i32; n]).map_err(fail)?;
        drop(junk);
    }
    let keep = gpu.to_device(&vec![9i32; n]).map_err(fail)?;
    std::thread::scope(|s| {
        s.spawn(|| -> Result<(), Failed> {
            exec.launch(gpu.stream()).map_err(fail)?;
            exec.launch(gpu.stream()).map_err(fail)
        })
        .join()
        .map_err(|_| fail("the replaying thread panicked"))?
    })?;
    same(
        "after replays on another thread",
        &exec.buffer(a).map_err(fail)?.to_vec().map_err(fail)?,
        &chain_cpu(&x, &d, 8),
    )?;
    same(
        "a buffer allocated after",
        &keep.to_vec().map_err(fail)?,
        &vec![9; n],
    )
}

/// On the simulator a replay runs every launch through the simulator's
/// checks: a captured launch whose `n` exceeds its buffers is reported as
/// an access past a buffer, naming the kernel, at the replay (on a GPU the
/// same launch would be undefined, so this runs on the simulator only).
fn a_replay_is_checked_like_a_launch(gpu: &Gpu) -> Result<(), Failed> {
    if !gpu.is_simulated() {
        return Ok(());
    }
    let n = 300;
    let (x, d) = chain_inputs(n);
    let d_dev = gpu.to_device(&d).map_err(fail)?;
    let (a, b) = (
        gpu.to_device(&x).map_err(fail)?,
        gpu.zeroed::<i32>(n).map_err(fail)?,
    );
    let mut cap = gpu.begin_capture().map_err(fail)?;
    let (a, b) = (cap.hold(a).map_err(fail)?, cap.hold(b).map_err(fail)?);
    // SAFETY: deliberately not: n + 64 past buffers of n, which the
    // simulator catches (its guard pages) instead of touching them.
    unsafe { cap.launch(VECTOR_SUM_I32, linear(n + 64), (a, &d_dev, b, n + 64)) }.map_err(fail)?;
    let mut exec = cap.end().map_err(fail)?.instantiate().map_err(fail)?;
    let got = exec.launch(gpu.stream());
    ensure(
        matches!(&got, Err(Error::OutOfBounds { kernel, .. }) if *kernel == VECTOR_SUM_I32.name()),
        || format!("a replay past a buffer: {got:?}"),
    )
}

/// A conjugate-gradient solve of the 2-D Laplacian (seven launches an
/// iteration, the scalars on the device) captured into one graph gives the
/// same bits as its launches queued one at a time, within 10⁻³ of the f64
/// solve from the textbook iteration.
fn conjugate_gradient_graph_equals_stream_launches(gpu: &Gpu) -> Result<(), Failed> {
    let (m, iterations) = (sized(gpu, 128, 12), sized(gpu, 50, 10));
    let mut rng = Rng::new(46);
    let b: Vec<f32> = (0..m * m).map(|_| rng.uniform() as f32).collect();
    let run = conjugate_gradient(gpu, &b, m, iterations, 1).map_err(fail)?;
    ensure(run.times.nodes == 7 * iterations + 2, || {
        format!("{} nodes for {iterations} iterations", run.times.nodes)
    })?;
    ensure(run.streamed.same_bits(&run.replayed), || {
        "the graph's solve differs from the stream's".into()
    })?;
    let (want, want_rr) = conjugate_gradient_cpu(&b, m, iterations);
    let (x_err, rr_err) = run.replayed.errors(&want, want_rr);
    ensure(x_err <= CG_TOLERANCE && rr_err <= CG_TOLERANCE, || {
        format!(
            "x off by {x_err:.1e}, r·r by {rr_err:.1e} (r·r {} vs {want_rr})",
            run.replayed.rr
        )
    })?;
    // And the solve is not a no-op: CG lowers the energy ½ xᵀAx − bᵀx (A
    // the 5-point Laplacian with zero boundaries) at every step, so the last
    // iterate's is below the first's. (Not the residual: r·r of CG is not
    // monotone, and on a 128² grid after 50 steps it is above b·b.)
    let energy = |x: &[f64]| {
        let at = |i: usize, j: usize| x[i * m + j];
        let mut e = 0.0;
        for i in 0..m {
            for j in 0..m {
                let mut ax = 4.0 * at(i, j);
                if i > 0 {
                    ax -= at(i - 1, j);
                }
                if i + 1 < m {
                    ax -= at(i + 1, j);
                }
                if j > 0 {
                    ax -= at(i, j - 1);
                }
                if j + 1 < m {
                    ax -= at(i, j + 1);
                }
                e += 0.5 * at(i, j) * ax - f64::from(b[i * m + j]) * at(i, j);
            }
        }
        e
    };
    let (first, _) = conjugate_gradient_cpu(&b, m, 1);
    let (e1, e) = (energy(&first), energy(&want));
    ensure(e < e1 && e1 < 0.0, || {
        format!("energy {e} after {iterations} steps, {e1} after one")
    })
}

/// A branch forked from the main chain runs beside it and is joined back:
/// `y = x + d` on a branch and `z = x + x` on the main chain, then
/// `w = y + z` after the join, replayed twice. Copies and memsets while a
/// branch is open, and work on a joined branch, are refused; `end` joins a
/// branch left open.
fn forked_branches_join(gpu: &Gpu) -> Result<(), Failed> {
    let n = sized(gpu, 1 << 15, 700);
    let (x, d) = chain_inputs(n);
    let x_dev = gpu.to_device(&x).map_err(fail)?;
    let d_dev = gpu.to_device(&d).map_err(fail)?;
    let (y, z, w) = (
        gpu.zeroed::<i32>(n).map_err(fail)?,
        gpu.zeroed::<i32>(n).map_err(fail)?,
        gpu.zeroed::<i32>(n).map_err(fail)?,
    );
    let mut cap = gpu.begin_capture().map_err(fail)?;
    let (y, z, w) = (
        cap.hold(y).map_err(fail)?,
        cap.hold(z).map_err(fail)?,
        cap.hold(w).map_err(fail)?,
    );
    let side = cap.fork().map_err(fail)?;
    cap.switch_to(side).map_err(fail)?;
    // SAFETY: x, d and y hold n i32; y is written by this branch alone.
    unsafe { cap.launch(VECTOR_SUM_I32, linear(n), (&x_dev, &d_dev, y, n)) }.map_err(fail)?;
    let refused = cap.set_zero(w);
    ensure(
        matches!(&refused, Err(Error::InvalidInput { reason, .. }) if reason.contains("branch is open")),
        || format!("a memset with a branch open: {refused:?}"),
    )?;
    cap.switch_to(Branch::MAIN).map_err(fail)?;
    // SAFETY: x and z hold n i32; z is written by the main chain alone.
    unsafe { cap.launch(VECTOR_SUM_I32, linear(n), (&x_dev, &x_dev, z, n)) }.map_err(fail)?;
    cap.join(side).map_err(fail)?;
    let refused = cap.switch_to(side);
    ensure(matches!(refused, Err(Error::InvalidInput { .. })), || {
        format!("a joined branch: {refused:?}")
    })?;
    // SAFETY: y, z and w hold n i32; w overlaps neither input.
    unsafe { cap.launch(VECTOR_SUM_I32, linear(n), (y, z, w, n)) }.map_err(fail)?;
    // A branch left open with work on it: `end` joins it.
    let tail = cap.fork().map_err(fail)?;
    cap.switch_to(tail).map_err(fail)?;
    // SAFETY: y and d hold n i32; y is written again only here, after the
    // join that ordered its readers before.
    unsafe { cap.launch(VECTOR_SUM_I32, linear(n), (&d_dev, &d_dev, y, n)) }.map_err(fail)?;
    let mut exec = cap.end().map_err(fail)?.instantiate().map_err(fail)?;
    for _ in 0..2 {
        exec.launch(gpu.stream()).map_err(fail)?;
    }
    let want: Vec<i32> = x.iter().zip(&d).map(|(&x, &d)| (x + d) + (x + x)).collect();
    same(
        "w = (x + d) + (x + x)",
        &exec.buffer(w).map_err(fail)?.to_vec().map_err(fail)?,
        &want,
    )?;
    let twice_d: Vec<i32> = d.iter().map(|&d| d + d).collect();
    same(
        "y after the open branch",
        &exec.buffer(y).map_err(fail)?.to_vec().map_err(fail)?,
        &twice_d,
    )
}
