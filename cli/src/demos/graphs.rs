//! The CUDA graphs' bench part (`CUDA_KERNELS_BENCH_ONLY=graphs`, issue
//! 46): 1,000 dependent small launches queued one by one against one
//! replayed graph, and Life 256² for 1,000 steps one launch a step against
//! ten replays of a graph of 100 steps, 50 conjugate-gradient iterations
//! on the 512² Laplacian queued one launch at a time against one replayed
//! graph; each result checked against the CPU (exactly for the first two,
//! the CG solution within 10⁻³ of the f64 solve's and the two ways' bits
//! equal), and the host cost of capturing and instantiating each graph.
use super::{BenchRecord, Check, exact_check};
use crate::graphs::{
    CG_TOLERANCE, CgState, GraphRun, GraphTimes, conjugate_gradient, conjugate_gradient_cpu,
    dependent_launches, dependent_sums_cpu, life_steps,
};
use crate::life::{life_cpu, random_lattice};
use crate::util::Rng;
use crate::{Gpu, Result};

/// Timed runs per row (after a warm-up); the median is reported.
const REPS: usize = 10;

/// Launches in the dependent chain.
const LAUNCHES: usize = 1000;

/// Elements each launch of the chain adds (one block of 256 threads).
const CHAIN_LEN: usize = 256;

/// The Life lattice's side, its steps and the steps per graph.
const LIFE: (usize, usize, usize) = (256, 1000, 100);

/// The conjugate-gradient solve's grid side and iterations.
const CG: (usize, usize) = (512, 50);

/// The graphs part of `cuda-kernels bench`.
pub fn bench(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    let x: Vec<i32> = (0..CHAIN_LEN as i32).collect();
    let d: Vec<i32> = (0..CHAIN_LEN as i32).map(|i| i % 7 - 3).collect();
    let run = dependent_launches(gpu, &x, &d, LAUNCHES, REPS)?;
    let want = dependent_sums_cpu(&x, &d, LAUNCHES);
    let check = |got: &Vec<i32>| exact_check(&ndarray::aview1(got), &ndarray::aview1(&want));
    push(
        records,
        "vector_sum_i32, dependent",
        &format!("{LAUNCHES} launches of {CHAIN_LEN} i32"),
        &run,
        LAUNCHES,
        (check(&run.streamed), check(&run.replayed)),
        2.5,
    );
    let (n, steps, per_graph) = LIFE;
    let lattice = random_lattice(n, 0.25, &mut Rng::new(46));
    let run = life_steps(gpu, lattice.view(), steps, per_graph, REPS)?;
    let want = life_cpu(lattice.view(), steps)?;
    push(
        records,
        "conway_fast, Life",
        &format!("{n}² × {steps} steps ({per_graph} a graph)"),
        &run,
        steps,
        (
            exact_check(&run.streamed, &want),
            exact_check(&run.replayed, &want),
        ),
        2.0,
    );
    let (m, iterations) = CG;
    let mut rng = Rng::new(4646);
    let b: Vec<f32> = (0..m * m).map(|_| rng.uniform() as f32).collect();
    let run = conjugate_gradient(gpu, &b, m, iterations, REPS)?;
    let (want, want_rr) = conjugate_gradient_cpu(&b, m, iterations);
    let check = |got: &CgState| cg_check(got, &want, want_rr);
    let streamed = check(&run.streamed);
    let replayed = match check(&run.replayed) {
        Check::Pass(how) if run.streamed.same_bits(&run.replayed) => {
            Check::Pass(format!("{how}; the same bits as one launch at a time"))
        }
        Check::Pass(_) => Check::Fail("the graph's result differs from the stream's".into()),
        other => other,
    };
    push(
        records,
        "conjugate gradient, 2-D Laplacian",
        &format!("{m}² × {iterations} iterations (7 launches each)"),
        &run,
        7 * iterations + 2,
        (streamed, replayed),
        1.5,
    );
    Ok(())
}

/// The f32 solve `got` against the f64 reference: the iterate's relative
/// 2-norm error and `r·r`'s relative error, both within [`CG_TOLERANCE`].
fn cg_check(got: &CgState, want: &[f64], want_rr: f64) -> Check {
    let (x_err, rr_err) = got.errors(want, want_rr);
    if x_err <= CG_TOLERANCE && rr_err <= CG_TOLERANCE {
        Check::Pass(format!(
            "x within {x_err:.1e} (2-norm, relative) and r·r within {rr_err:.1e} of the f64 solve"
        ))
    } else {
        Check::Fail(format!(
            "x off by {x_err:.1e} (2-norm, relative), r·r by {rr_err:.1e}, of the f64 solve \
             (tolerance {CG_TOLERANCE:.0e})"
        ))
    }
}
/// The rows of one comparison: one launch at a time, the graph replays
/// (against the first, with the target), and the host cost of
/// capture and instantiation.
fn push<T>(
    records: &mut Vec<BenchRecord>,
    kernel: &str,
    size: &str,
    run: &GraphRun<T>,
    launches: usize,
    (streamed, replayed): (Check, Check),
    target: f64,
) {
    let GraphTimes {
        stream_ms,
        graph_ms,
        capture_ms,
        instantiate_ms,
        nodes,
    } = run.times;
    let per_s = |ms: f32| launches as f64 / (f64::from(ms) * 1e-3);
    if let Some(ms) = stream_ms {
        records.push(BenchRecord::new(
            format!("{kernel}: one launch at a time"),
            size,
            f64::from(ms),
            "launches/s",
            per_s(ms),
            streamed,
        ));
    }
    if let (Some(ms), Some(speedup)) = (graph_ms, run.times.speedup()) {
        records.push(
            BenchRecord::new(
                format!("{kernel}: replayed CUDA graph"),
                size,
                f64::from(ms),
                "launches/s",
                per_s(ms),
                replayed.clone(),
            )
            .against(
                format!("one launch at a time (speedup; target ≥ {target}×)"),
                speedup,
            ),
        );
    }
    records.push(BenchRecord::new(
        format!("{kernel}: capture + instantiate"),
        format!("{nodes} nodes: capture {capture_ms:.3} ms, instantiate {instantiate_ms:.3} ms"),
        capture_ms + instantiate_ms,
        "host ms",
        capture_ms + instantiate_ms,
        replayed,
    ));
}
