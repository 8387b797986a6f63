//! CUDA graphs (issue 46): launch-bound work captured once and replayed,
//! against the same launches queued one at a time. Three workloads, each
//! checked against the CPU both ways:
//! - 1,000 dependent launches of a small kernel (`x ← x + d`);
//! - Life 256² × 1,000 steps, as ten replays of a graph of 100 steps;
//! - 50 conjugate-gradient iterations on the 512² Laplacian, the scalars on
//!   the device (seven launches an iteration), both ways the same bits.
//!
//! On a GPU it prints the times (CUDA events) and the speedups; on the
//! simulator (`CUDA_KERNELS_SIM=1`) it runs smaller sizes, untimed.
//!
//! `cargo run --release --example 23_graphs`
use cuda_kernels::graphs::{
    CG_TOLERANCE, GraphTimes, conjugate_gradient, conjugate_gradient_cpu, dependent_launches,
    dependent_sums_cpu, life_steps,
};
use cuda_kernels::life::{life_cpu, random_lattice};
use cuda_kernels::util::Rng;
use cuda_kernels::{Error, Result};

/// One line of times: both ways, the speedup, the capture's cost.
fn report(what: &str, t: &GraphTimes) {
    match (t.stream_ms, t.graph_ms, t.speedup()) {
        (Some(s), Some(g), Some(x)) => println!(
            "{what}: one launch at a time {s:.3} ms, graph {g:.3} ms: {x:.2}× \
             (capture {:.3} ms + instantiate {:.3} ms, {} nodes)",
            t.capture_ms, t.instantiate_ms, t.nodes
        ),
        _ => println!(
            "{what}: same result both ways ({} nodes; untimed on the simulator)",
            t.nodes
        ),
    }
}

/// `Err` naming `what` unless `ok`.
fn check(ok: bool, what: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::invalid("23_graphs", format!("{what}: wrong result")))
    }
}

fn main() -> Result<()> {
    let gpu = cuda_kernels::gpu()?;
    let sim = gpu.is_simulated();
    let reps = if sim { 0 } else { 10 };

    let (len, launches) = (256, if sim { 100 } else { 1000 });
    let x: Vec<i32> = (0..len).collect();
    let d: Vec<i32> = (0..len).map(|i| i % 7 - 3).collect();
    let run = dependent_launches(&gpu, &x, &d, launches as usize, reps)?;
    let want = dependent_sums_cpu(&x, &d, launches as usize);
    check(
        run.streamed == want && run.replayed == want,
        "dependent launches",
    )?;
    report(&format!("{launches} dependent launches"), &run.times);

    let (n, steps, per_graph) = if sim { (48, 40, 10) } else { (256, 1000, 100) };
    let lattice = random_lattice(n, 0.25, &mut Rng::new(46));
    let run = life_steps(&gpu, lattice.view(), steps, per_graph, reps)?;
    let want = life_cpu(lattice.view(), steps)?;
    check(run.streamed == want && run.replayed == want, "Life")?;
    report(&format!("Life {n}² × {steps} steps"), &run.times);

    let (m, iterations) = if sim { (32, 20) } else { (512, 50) };
    let mut rng = Rng::new(4646);
    let b: Vec<f32> = (0..m * m).map(|_| rng.uniform() as f32).collect();
    let run = conjugate_gradient(&gpu, &b, m, iterations, reps)?;
    let (want, want_rr) = conjugate_gradient_cpu(&b, m, iterations);
    let (x_err, rr_err) = run.replayed.errors(&want, want_rr);
    check(
        run.streamed.same_bits(&run.replayed) && x_err <= CG_TOLERANCE && rr_err <= CG_TOLERANCE,
        "conjugate gradient",
    )?;
    report(&format!("CG {m}² × {iterations} iterations"), &run.times);
    println!(
        "CG: r·r = {:e} (f64 solve {want_rr:e}), x within {x_err:.1e} of the f64 solve",
        run.replayed.rr
    );
    Ok(())
}
