//! Launch-bound work as CUDA graphs (issue 46, [`crate::graph`]): the same
//! launches queued one by one on [`Gpu::stream`] and captured once into a
//! graph that is replayed, each timed with CUDA events on a GPU (untimed on
//! the simulator), each result returned for the caller to check against the
//! CPU references here:
//! - [`dependent_launches`]: a chain of small launches, each reading what
//!   the one before wrote (`x ← x + d` with `vector_sum_i32`, between two
//!   buffers in turn);
//! - [`life_steps`]: Life steps (`conway_fast`), one launch a step against
//!   replays of a graph of many steps;
//! - [`conjugate_gradient`]: a conjugate-gradient solve of the 2-D
//!   Laplacian (`cuda_kernels_gpu::cg`: the stencil, deterministic dot
//!   products, the updates with α and β read on the device), seven launches
//!   an iteration, against [`conjugate_gradient_cpu`].
//!
//! ```
//! # fn main() -> cuda_kernels_host::Result<()> {
//! use cuda_kernels_host::graphs::{dependent_launches, dependent_sums_cpu};
//! # use cuda_kernels_host::BuiltinSimulator;
//! let gpu = cuda_kernels_host::Gpu::simulator()?; // or cuda_kernels::gpu()?
//! let x: Vec<i32> = (0..100).collect();
//! let d = vec![3; 100];
//! let run = dependent_launches(&gpu, &x, &d, 10, 1)?;
//! assert_eq!(run.replayed, dependent_sums_cpu(&x, &d, 10));
//! assert_eq!(run.streamed, run.replayed);
//! assert_eq!(run.times.nodes, 10);
//! # Ok(()) }
//! ```
use std::time::Instant;

use cuda_kernels_gpu::cg::{
    CG_BLOCK, CG_DOT_FINAL, CG_DOT_PARTIAL, CG_LAPLACIAN, CG_UPDATE_P, CG_UPDATE_XR,
};
use cuda_kernels_gpu::life::CONWAY_FAST;
use cuda_kernels_gpu::multiply::VECTOR_SUM_I32;
use ndarray::{Array2, ArrayView2};

use crate::graph::{Capture, GraphExec, Held, ParamTuple};
use crate::kernel::{Kernel, KernelArgs, KernelParam};
use crate::life::{LifeKernel, check_lattice, fast_shape_for, life_launch};
use crate::timing::{GpuTimer, median};
use crate::{DeviceBuffer, Error, Gpu, LaunchConfig, Result};

/// What a comparison measured.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphTimes {
    /// The median milliseconds (CUDA events) of the work launched one
    /// launch at a time; `None` on the simulator.
    pub stream_ms: Option<f32>,
    /// The median milliseconds of the same work as graph replays; `None` on
    /// the simulator.
    pub graph_ms: Option<f32>,
    /// Host milliseconds from `begin_capture` to `end`.
    pub capture_ms: f64,
    /// Host milliseconds of `instantiate`.
    pub instantiate_ms: f64,
    /// The launches, copies and memsets in the graph.
    pub nodes: usize,
}

impl GraphTimes {
    /// How many times faster the graph ran: `stream_ms / graph_ms`, when
    /// both were timed.
    pub fn speedup(&self) -> Option<f64> {
        Some(f64::from(self.stream_ms?) / f64::from(self.graph_ms?))
    }
}

/// What building a graph cost: [`GraphTimes`]' fields beside the medians.
struct Built {
    capture_ms: f64,
    instantiate_ms: f64,
    nodes: usize,
}

impl Built {
    /// The comparison's times, with the medians of both ways.
    fn times(self, stream_ms: Option<f32>, graph_ms: Option<f32>) -> GraphTimes {
        GraphTimes {
            stream_ms,
            graph_ms,
            capture_ms: self.capture_ms,
            instantiate_ms: self.instantiate_ms,
            nodes: self.nodes,
        }
    }
}

/// Ends `capture` (begun at `started`) and instantiates its graph, timing
/// both on the host.
fn end_and_instantiate(capture: Capture<'_>, started: Instant) -> Result<(GraphExec<'_>, Built)> {
    let graph = capture.end()?;
    let capture_ms = started.elapsed().as_secs_f64() * 1e3;
    let nodes = graph.len();
    let started = Instant::now();
    let exec = graph.instantiate()?;
    let instantiate_ms = started.elapsed().as_secs_f64() * 1e3;
    Ok((
        exec,
        Built {
            capture_ms,
            instantiate_ms,
            nodes,
        },
    ))
}

/// Both results of a comparison, and its times.
#[derive(Debug, Clone)]
pub struct GraphRun<T> {
    /// The times.
    pub times: GraphTimes,
    /// The result of the launches queued one at a time.
    pub streamed: T,
    /// The result of the graph replays.
    pub replayed: T,
}

/// What [`timed`] asks of the work.
#[derive(Clone, Copy)]
enum Phase {
    /// Put the inputs back (untimed).
    Reset,
    /// Queue the work on [`Gpu::stream`] (timed).
    Queue,
}

/// Runs `work` (`Phase::Reset`, then `Phase::Queue`) `reps + 1` times, the
/// first a warm-up; the median of the timed runs in milliseconds on a GPU
/// (CUDA events around the queueing alone), `None` on the simulator.
fn timed(gpu: &Gpu, reps: usize, mut work: impl FnMut(Phase) -> Result<()>) -> Result<Option<f32>> {
    let timer = (!gpu.is_simulated())
        .then(|| GpuTimer::on(gpu))
        .transpose()?;
    let mut times = Vec::with_capacity(reps);
    for rep in 0..=reps {
        work(Phase::Reset)?;
        match &timer {
            Some(t) => {
                t.start(gpu.stream())?;
                work(Phase::Queue)?;
                t.stop(gpu.stream())?;
                let ms = t.elapsed_ms()?;
                if rep > 0 {
                    times.push(ms);
                }
            }
            None => work(Phase::Queue)?,
        }
    }
    Ok((!times.is_empty()).then(|| median(&mut times)))
}

/// `x + k·d` element by element, wrapping: the CPU reference of `k` steps
/// `x ← x + d`.
pub fn dependent_sums_cpu(x: &[i32], d: &[i32], k: usize) -> Vec<i32> {
    let k = k as i32;
    x.iter()
        .zip(d)
        .map(|(&x, &d)| x.wrapping_add(d.wrapping_mul(k)))
        .collect()
}

/// The one-block-per-256 launch of `vector_sum_i32` over `n` elements.
fn sum_config(n: usize) -> LaunchConfig {
    LaunchConfig::linear(n.div_ceil(256) as u32, 256)
}

/// `launches` dependent launches of `vector_sum_i32` (`x ← x + d`, from one
/// buffer into the other and back; `launches` even), queued one by one on
/// [`Gpu::stream`] and as one captured graph replayed once, each `reps`
/// times after a warm-up (the buffer reset to `x` before each). Both
/// results are of the last run: `x + launches·d`
/// ([`dependent_sums_cpu`]). `x` and `d` of one nonzero length.
pub fn dependent_launches(
    gpu: &Gpu,
    x: &[i32],
    d: &[i32],
    launches: usize,
    reps: usize,
) -> Result<GraphRun<Vec<i32>>> {
    const K: &str = "dependent launches";
    let n = x.len();
    if n == 0 || d.len() != n || launches == 0 || !launches.is_multiple_of(2) {
        return Err(Error::invalid(
            K,
            format!(
                "x and d of one nonzero length ({n}, {}) and an even number of launches ({launches})",
                d.len()
            ),
        ));
    }
    let cfg = sum_config(n);
    let d = gpu.to_device(d)?;
    // One launch at a time.
    let mut s = [gpu.to_device(x)?, gpu.zeroed::<i32>(n)?];
    let stream_ms = timed(gpu, reps, |phase| match phase {
        Phase::Reset => s[0].copy_from(x),
        Phase::Queue => {
            for step in 0..launches {
                let (head, tail) = s.split_at_mut(1);
                let (src, dst) = if step % 2 == 0 {
                    (&head[0], &mut tail[0])
                } else {
                    (&tail[0], &mut head[0])
                };
                // SAFETY: src, d and dst hold n i32; dst overlaps neither input.
                unsafe { gpu.launch(VECTOR_SUM_I32, cfg, gpu.stream(), (src, &d, dst, n))? };
            }
            Ok(())
        }
    })?;
    let streamed = s[0].to_vec()?;
    // The graph.
    let (a, b) = (gpu.to_device(x)?, gpu.zeroed::<i32>(n)?);
    let started = Instant::now();
    let mut capture = gpu.begin_capture()?;
    let (a, b) = (capture.hold(a)?, capture.hold(b)?);
    for step in 0..launches {
        let (src, dst) = if step % 2 == 0 { (a, b) } else { (b, a) };
        // SAFETY: as above.
        unsafe { capture.launch(VECTOR_SUM_I32, cfg, (src, &d, dst, n))? };
    }
    let (mut exec, built) = end_and_instantiate(capture, started)?;
    let graph_ms = timed(gpu, reps, |phase| match phase {
        Phase::Reset => exec.buffer_mut(a)?.copy_from(x),
        Phase::Queue => exec.launch(gpu.stream()),
    })?;
    let replayed = exec.buffer(a)?.to_vec()?;
    Ok(GraphRun {
        times: built.times(stream_ms, graph_ms),
        streamed,
        replayed,
    })
}

/// `steps` Life steps of `lattice` (square, 0/1 cells) with `conway_fast`:
/// one launch a step on [`Gpu::stream`], and `steps / per_graph` replays of
/// a graph of `per_graph` steps (`per_graph` even, dividing `steps`), each
/// `reps` times after a warm-up, from `lattice` each time. Both results
/// are the lattice after `steps` steps (the CPU's is
/// [`life_cpu`](crate::life::life_cpu)).
pub fn life_steps(
    gpu: &Gpu,
    lattice: ArrayView2<i32>,
    steps: usize,
    per_graph: usize,
    reps: usize,
) -> Result<GraphRun<Array2<i32>>> {
    let name = CONWAY_FAST.name();
    let n = check_lattice(lattice)?;
    if per_graph == 0 || !per_graph.is_multiple_of(2) || !steps.is_multiple_of(per_graph) {
        return Err(Error::invalid(
            name,
            format!("graphs of {per_graph} steps (even) must make up {steps} steps"),
        ));
    }
    let sms = gpu.multiprocessors(name)?;
    let launch = life_launch(LifeKernel::Fast, n, fast_shape_for(n, sms))?;
    let (cfg, rows) = (launch.config(), launch.rows);
    let cells = lattice
        .as_standard_layout()
        .iter()
        .copied()
        .collect::<Vec<_>>();
    let to_lattice = |v: Vec<i32>| {
        Array2::from_shape_vec((n, n), v).map_err(|e| Error::invalid(name, e.to_string()))
    };
    // One launch a step.
    let mut s: [DeviceBuffer<i32>; 2] = [gpu.to_device(&cells)?, gpu.zeroed(n * n)?];
    let stream_ms = timed(gpu, reps, |phase| match phase {
        Phase::Reset => s[0].copy_from(&cells),
        Phase::Queue => {
            for step in 0..steps {
                let (head, tail) = s.split_at_mut(1);
                let (src, dst) = if step % 2 == 0 {
                    (&head[0], &mut tail[0])
                } else {
                    (&tail[0], &mut head[0])
                };
                // SAFETY: both lattices hold n² i32 and differ; the grid
                // covers the lattice (life_launch), rows ≥ 1.
                unsafe { gpu.launch(CONWAY_FAST, cfg, gpu.stream(), (src, dst, n, rows))? };
            }
            Ok(())
        }
    })?;
    let streamed = to_lattice(s[0].to_vec()?)?;
    // Graphs of `per_graph` steps.
    let (x, y) = (gpu.to_device(&cells)?, gpu.zeroed::<i32>(n * n)?);
    let started = Instant::now();
    let mut capture = gpu.begin_capture()?;
    let (x, y) = (capture.hold(x)?, capture.hold(y)?);
    for step in 0..per_graph {
        let (src, dst) = if step % 2 == 0 { (x, y) } else { (y, x) };
        // SAFETY: as above.
        unsafe { capture.launch(CONWAY_FAST, cfg, (src, dst, n, rows))? };
    }
    let (mut exec, built) = end_and_instantiate(capture, started)?;
    let graph_ms = timed(gpu, reps, |phase| match phase {
        Phase::Reset => exec.buffer_mut(x)?.copy_from(&cells),
        Phase::Queue => {
            for _ in 0..steps / per_graph {
                exec.launch(gpu.stream())?;
            }
            Ok(())
        }
    })?;
    let replayed = to_lattice(exec.buffer(x)?.to_vec()?)?;
    Ok(GraphRun {
        times: built.times(stream_ms, graph_ms),
        streamed,
        replayed,
    })
}

/// Where [`queue_cg`] sends its launches: [`Gpu::stream`] one at a time, or
/// a capture.
trait Launcher {
    /// Queues or records `kernel` with `cfg` and `args`.
    ///
    /// # Safety
    /// As [`Gpu::launch`].
    unsafe fn go<P: ParamTuple, A: KernelArgs<P> + 'static>(
        &mut self,
        kernel: Kernel<P>,
        cfg: LaunchConfig,
        args: A,
    ) -> Result<()>;
}

/// Launches on [`Gpu::stream`], one at a time.
struct OnStream<'g>(&'g Gpu);

impl Launcher for OnStream<'_> {
    unsafe fn go<P: ParamTuple, A: KernelArgs<P> + 'static>(
        &mut self,
        kernel: Kernel<P>,
        cfg: LaunchConfig,
        args: A,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.0.launch(kernel, cfg, self.0.stream(), args) }
    }
}

impl Launcher for Capture<'_> {
    unsafe fn go<P: ParamTuple, A: KernelArgs<P> + 'static>(
        &mut self,
        kernel: Kernel<P>,
        cfg: LaunchConfig,
        args: A,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.launch(kernel, cfg, args) }.map(drop)
    }
}

/// Blocks of the first pass of a dot product (the second sums their
/// partials): a fixed grid, so that the sums are the same bits every run.
const DOT_BLOCKS: usize = 256;

/// The vectors and scalars of a solve, as device addresses or a graph's
/// held buffers.
#[derive(Clone, Copy)]
struct CgBuffers<H> {
    x: H,
    r: H,
    p: H,
    ap: H,
    /// `DOT_BLOCKS` partial sums.
    partial: H,
    /// `p·Ap`.
    pap: H,
    /// `r·r`, this iteration's and the next's (in turn).
    rr: [H; 2],
}

/// Queues a solve: `rr[0] = r·r`, then `iterations` times `ap = A p`,
/// `pap = p·ap`, `x += α p`, `r −= α ap` (α = rr/pap), `rr' = r·r`,
/// `p = r + β p` (β = rr'/rr); the last `r·r` lands in
/// `rr[iterations % 2]`.
///
/// # Safety
/// `x`, `r`, `p` and `ap` hold `m²` f32, `partial` [`DOT_BLOCKS`], the
/// scalars one each, all distinct and alive until the work has run.
unsafe fn queue_cg<H>(
    to: &mut impl Launcher,
    b: CgBuffers<H>,
    m: usize,
    iterations: usize,
) -> Result<()>
where
    H: KernelParam<*const f32> + KernelParam<*mut f32> + Copy + 'static,
{
    let n = m * m;
    let wide = LaunchConfig::linear(n.div_ceil(CG_BLOCK) as u32, CG_BLOCK as u32);
    let partial_cfg = LaunchConfig::linear(DOT_BLOCKS as u32, CG_BLOCK as u32);
    let final_cfg = LaunchConfig::linear(1, CG_BLOCK as u32);
    // SAFETY (every launch below): the buffers' sizes are the caller's
    // contract; outputs overlap no input of their launch (distinct
    // buffers); the dot products run on blocks of CG_BLOCK threads.
    let dot = |to: &mut _, x: H, y: H, out: H| -> Result<()> {
        unsafe { Launcher::go(to, CG_DOT_PARTIAL, partial_cfg, (x, y, b.partial, n))? };
        unsafe { Launcher::go(to, CG_DOT_FINAL, final_cfg, (b.partial, out, DOT_BLOCKS)) }
    };
    dot(to, b.r, b.r, b.rr[0])?;
    for it in 0..iterations {
        let (cur, next) = (b.rr[it % 2], b.rr[(it + 1) % 2]);
        unsafe { to.go(CG_LAPLACIAN, wide, (b.p, b.ap, m))? };
        dot(to, b.p, b.ap, b.pap)?;
        unsafe { to.go(CG_UPDATE_XR, wide, (b.x, b.r, b.p, b.ap, cur, b.pap, n))? };
        dot(to, b.r, b.r, next)?;
        unsafe { to.go(CG_UPDATE_P, wide, (b.p, b.r, next, cur, n))? };
    }
    Ok(())
}

/// What a conjugate-gradient solve leaves: the solution and `r·r`.
#[derive(Debug, Clone, PartialEq)]
pub struct CgState {
    /// The iterate after the last iteration.
    pub x: Vec<f32>,
    /// `r·r` of its residual (as the solver updates it).
    pub rr: f32,
}

impl CgState {
    /// Whether `other` is the same bits (the iterate and `r·r`).
    pub fn same_bits(&self, other: &CgState) -> bool {
        self.rr.to_bits() == other.rr.to_bits()
            && self.x.len() == other.x.len()
            && self
                .x
                .iter()
                .zip(&other.x)
                .all(|(p, q)| p.to_bits() == q.to_bits())
    }

    /// How far this solve is from the f64 reference `(want, want_rr)`
    /// ([`conjugate_gradient_cpu`]): the iterate's relative error in the
    /// 2-norm and `r·r`'s relative error (infinite for an iterate of
    /// another length).
    pub fn errors(&self, want: &[f64], want_rr: f64) -> (f64, f64) {
        if self.x.len() != want.len() {
            return (f64::INFINITY, f64::INFINITY);
        }
        let norm = |v: &mut dyn Iterator<Item = f64>| v.map(|x| x * x).sum::<f64>().sqrt();
        let err = norm(&mut self.x.iter().zip(want).map(|(&g, w)| f64::from(g) - w));
        let x_err = err / norm(&mut want.iter().copied()).max(f64::MIN_POSITIVE);
        let rr_err = (f64::from(self.rr) - want_rr).abs() / want_rr.abs().max(f64::MIN_POSITIVE);
        (x_err, rr_err)
    }
}

/// The largest relative error tolerated of an f32 solve against the f64
/// one ([`CgState::errors`]), for the iterate and for `r·r`.
pub const CG_TOLERANCE: f64 = 1e-3;

/// `iterations` conjugate-gradient iterations for `A x = b`, `A` the 5-point
/// Laplacian of the `m`×`m` grid (`b` of `m²` values; `x₀ = 0`), in f32
/// with the scalars on the device: seven launches an iteration queued one
/// at a time on [`Gpu::stream`], and the same launches captured into one
/// graph replayed once; each `reps` times after a warm-up, from `x₀`. The
/// two results are the same bits (the same kernels, grids and order).
pub fn conjugate_gradient(
    gpu: &Gpu,
    b: &[f32],
    m: usize,
    iterations: usize,
    reps: usize,
) -> Result<GraphRun<CgState>> {
    const K: &str = "conjugate gradient";
    let n = m
        .checked_mul(m)
        .filter(|&n| n > 0 && n == b.len())
        .ok_or_else(|| {
            Error::invalid(
                K,
                format!("b holds {} values, not m² for m = {m} (m > 0)", b.len()),
            )
        })?;
    let alloc = |len| gpu.zeroed::<f32>(len);
    let make = || -> Result<CgBuffers<DeviceBuffer<f32>>> {
        Ok(CgBuffers {
            x: alloc(n)?,
            r: gpu.to_device(b)?,
            p: gpu.to_device(b)?,
            ap: alloc(n)?,
            partial: alloc(DOT_BLOCKS)?,
            pap: alloc(1)?,
            rr: [alloc(1)?, alloc(1)?],
        })
    };
    let rr_at = iterations % 2;
    // One launch at a time, over the buffers' addresses.
    let mut s = make()?;
    let stream_ms = timed(gpu, reps, |phase| match phase {
        Phase::Reset => {
            s.x.set_zero()?;
            s.r.copy_from(b)?;
            s.p.copy_from(b)
        }
        Phase::Queue => {
            let ptr = |buf: &DeviceBuffer<f32>| buf.as_device_ptr();
            let raw = CgBuffers {
                x: ptr(&s.x),
                r: ptr(&s.r),
                p: ptr(&s.p),
                ap: ptr(&s.ap),
                partial: ptr(&s.partial),
                pap: ptr(&s.pap),
                rr: [ptr(&s.rr[0]), ptr(&s.rr[1])],
            };
            // SAFETY: the buffers have the sizes queue_cg needs, are
            // distinct, and outlive the work (read back below, after it).
            unsafe { queue_cg(&mut OnStream(gpu), raw, m, iterations) }
        }
    })?;
    let streamed = CgState {
        x: s.x.to_vec()?,
        rr: s.rr[rr_at].to_vec()?[0],
    };
    // One graph.
    let g = make()?;
    let started = Instant::now();
    let mut capture = gpu.begin_capture()?;
    let mut hold = |buf| -> Result<Held<f32>> { capture.hold(buf) };
    let held = CgBuffers {
        x: hold(g.x)?,
        r: hold(g.r)?,
        p: hold(g.p)?,
        ap: hold(g.ap)?,
        partial: hold(g.partial)?,
        pap: hold(g.pap)?,
        rr: {
            let [a, b] = g.rr;
            [hold(a)?, hold(b)?]
        },
    };
    // SAFETY: the graph holds every buffer, of the sizes queue_cg needs.
    unsafe { queue_cg(&mut capture, held, m, iterations)? };
    let (mut exec, built) = end_and_instantiate(capture, started)?;
    let graph_ms = timed(gpu, reps, |phase| match phase {
        Phase::Reset => {
            exec.buffer_mut(held.x)?.set_zero()?;
            exec.buffer_mut(held.r)?.copy_from(b)?;
            exec.buffer_mut(held.p)?.copy_from(b)
        }
        Phase::Queue => exec.launch(gpu.stream()),
    })?;
    let replayed = CgState {
        x: exec.buffer(held.x)?.to_vec()?,
        rr: exec.buffer(held.rr[rr_at])?.to_vec()?[0],
    };
    Ok(GraphRun {
        times: built.times(stream_ms, graph_ms),
        streamed,
        replayed,
    })
}

/// The CPU reference of [`conjugate_gradient`], in f64, from the textbook
/// iteration (`x₀ = 0`, `r₀ = p₀ = b`; `α = r·r / p·Ap`, `x += α p`,
/// `r −= α Ap`, `β = r'·r' / r·r`, `p = r' + β p`), with `A` the 5-point
/// Laplacian of the `m`×`m` grid applied as a stencil: the iterate and
/// `r·r` after `iterations` iterations.
pub fn conjugate_gradient_cpu(b: &[f32], m: usize, iterations: usize) -> (Vec<f64>, f64) {
    let n = b.len();
    let apply = |p: &[f64]| -> Vec<f64> {
        (0..n)
            .map(|k| {
                let (i, j) = (k / m, k % m);
                let at = |ok: bool, q: usize| if ok { p[q] } else { 0.0 };
                4.0 * p[k]
                    - at(i > 0, k.wrapping_sub(m))
                    - at(i + 1 < m, k + m)
                    - at(j > 0, k.wrapping_sub(1))
                    - at(j + 1 < m, k + 1)
            })
            .collect()
    };
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let mut x = vec![0.0; n];
    let mut r: Vec<f64> = b.iter().map(|&v| f64::from(v)).collect();
    let mut p = r.clone();
    let mut rr = dot(&r, &r);
    for _ in 0..iterations {
        let ap = apply(&p);
        let alpha = rr / dot(&p, &ap);
        for k in 0..n {
            x[k] += alpha * p[k];
            r[k] -= alpha * ap[k];
        }
        let rr_new = dot(&r, &r);
        let beta = rr_new / rr;
        for k in 0..n {
            p[k] = r[k] + beta * p[k];
        }
        rr = rr_new;
    }
    (x, rr)
}
