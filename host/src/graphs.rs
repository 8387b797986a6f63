//! Launch-bound work as CUDA graphs (issue 46, [`crate::graph`]): the same
//! launches queued one by one on [`Gpu::stream`] and captured once into a
//! graph that is replayed, each timed with CUDA events on a GPU (untimed on
//! the simulator), each result returned for the caller to check against the
//! CPU references here:
//! - [`dependent_launches`]: a chain of small launches, each reading what
//!   the one before wrote (`x ← x + d` with `vector_sum_i32`, between two
//!   buffers in turn);
//! - [`life_steps`]: Life steps (`conway_fast`), one launch a step against
//!   replays of a graph of many steps.
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

use cuda_kernels_gpu::life::CONWAY_FAST;
use cuda_kernels_gpu::multiply::VECTOR_SUM_I32;
use ndarray::{Array2, ArrayView2};

use crate::life::{LifeKernel, check_lattice, fast_shape, life_launch};
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
fn timed(
    gpu: &Gpu,
    reps: usize,
    mut work: impl FnMut(Phase) -> Result<()>,
) -> Result<Option<f32>> {
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
    let graph = capture.end()?;
    let capture_ms = started.elapsed().as_secs_f64() * 1e3;
    let nodes = graph.len();
    let started = Instant::now();
    let mut exec = graph.instantiate()?;
    let instantiate_ms = started.elapsed().as_secs_f64() * 1e3;
    let graph_ms = timed(gpu, reps, |phase| match phase {
        Phase::Reset => exec.buffer_mut(a)?.copy_from(x),
        Phase::Queue => exec.launch(gpu.stream()),
    })?;
    let replayed = exec.buffer(a)?.to_vec()?;
    Ok(GraphRun {
        times: GraphTimes {
            stream_ms,
            graph_ms,
            capture_ms,
            instantiate_ms,
            nodes,
        },
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
    let launch = life_launch(LifeKernel::Fast, n, fast_shape())?;
    let (cfg, rows) = (launch.config(), launch.rows);
    let cells = lattice.as_standard_layout().iter().copied().collect::<Vec<_>>();
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
    let graph = capture.end()?;
    let capture_ms = started.elapsed().as_secs_f64() * 1e3;
    let nodes = graph.len();
    let started = Instant::now();
    let mut exec = graph.instantiate()?;
    let instantiate_ms = started.elapsed().as_secs_f64() * 1e3;
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
        times: GraphTimes {
            stream_ms,
            graph_ms,
            capture_ms,
            instantiate_ms,
            nodes,
        },
        streamed,
        replayed,
    })
}
