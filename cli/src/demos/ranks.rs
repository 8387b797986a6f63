//! `cuda-kernels multi`: the multi-device launchers on both backends (peer
//! copies, NCCL) in one process, a host thread per device, each result
//! checked against the CPU; or, with `--ranks N`, N processes on one
//! machine, one GPU each, joined by NCCL (`multi_gpu::ranks`; on the
//! simulator, simulated devices joined through a hub), each rank checking
//! its part and rank 0 the whole against one GPU's run.
use std::process::{Command, ExitCode};
use std::time::Duration;

use crate::life::{life_cpu, random_lattice};
use crate::mandelbrot::{MandelbrotParams, first_difference, mandelbrot_cpu};
use crate::matrices::check_matmul;
use crate::multi_gpu::Backend;
use crate::multi_gpu::life::life_with;
use crate::multi_gpu::mandelbrot::mandelbrot_with;
use crate::multi_gpu::matmul::matmul_with;
use crate::multi_gpu::ranks::{IdTransport, JobSizes, Launch, launcher_or_rank};
use crate::multi_gpu::reduce::reduce_with;
use crate::reduce::{Sum, reduce_cpu};
use crate::util::Rng;
use crate::{BuiltinSimulator, Error, Gpu, Result};

const K: &str = "cuda-kernels multi";

/// Runs `multi`: a rank of a job when the launcher's environment says so,
/// else the launcher of `ranks` processes ([`launcher_or_rank`]), else
/// both backends (or `backend`) in this process. `Ok(FAILURE)` when a check or a rank failed.
pub fn run(
    sim: bool,
    backend: Option<Backend>,
    ranks: Option<usize>,
    transport: IdTransport,
    kill: Option<(usize, Duration)>,
) -> Result<ExitCode> {
    let simulated = sim || crate::devices::device_count() == 0;
    let exe = std::env::current_exe().map_err(|source| Error::Io {
        what: "this program's path".into(),
        source,
    })?;
    let command = |_| {
        let mut c = Command::new(&exe);
        c.arg("multi");
        if sim {
            c.arg("--sim");
        }
        c
    };
    let job = ranks.map(|ranks| Launch {
        transport,
        kill,
        ..Launch::new(ranks)
    });
    match launcher_or_rank(
        job.as_ref(),
        simulated,
        |r| crate::rank_gpu(r, simulated),
        command,
    )? {
        Some(true) => return Ok(ExitCode::SUCCESS),
        Some(false) => return Ok(ExitCode::FAILURE),
        None => {}
    }
    let gpus: Vec<Gpu> = if simulated {
        (0..3).map(Gpu::simulated_device).collect::<Result<_>>()?
    } else {
        crate::all_gpus()?
    };
    let list: Vec<&Gpu> = gpus.iter().collect();
    println!("devices: {}", crate::multi_gpu::labels(&list).join(", "));
    let sizes = if simulated {
        JobSizes::SIMULATOR
    } else {
        JobSizes::GPU
    };
    let backends = match backend {
        Some(b) => vec![b],
        None => Backend::ALL.to_vec(),
    };
    for b in backends {
        for line in threads(b, &list, &sizes)? {
            println!("{}: {line}", b.name());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The four workloads on `gpus` with `backend`, each checked against the
/// CPU (a failed check is an error saying what differs).
fn threads(backend: Backend, gpus: &[&Gpu], sizes: &JobSizes) -> Result<Vec<String>> {
    let refuse = |what: String| Err(Error::invalid(K, format!("{}: {what}", backend.name())));
    let mut lines = Vec::new();
    let mut rng = Rng::new(24);
    let ints =
        ndarray::Array1::from_shape_simple_fn(sizes.reduce, || rng.below(2001) as i64 - 1000);
    let got = reduce_with::<Sum, i64>(backend, gpus, ints.view(), None)?;
    let want = reduce_cpu::<Sum, i64>(ints.view(), None)?;
    if got != want {
        return refuse(format!("reduce {got}, the CPU's {want}"));
    }
    lines.push(format!("reduce of {} i64 = {got} (the CPU's)", ints.len()));
    let (m, k, n) = sizes.matmul;
    let a = ndarray::Array2::from_shape_simple_fn((m, k), || rng.uniform() as f32 - 0.5);
    let b = ndarray::Array2::from_shape_simple_fn((k, n), || rng.uniform() as f32 - 0.5);
    let c = matmul_with(backend, gpus, a.view(), b.view())?;
    let check = check_matmul(c.view(), a.view(), b.view())?;
    if !check.passed() {
        return refuse(format!("SGEMM {check:?}"));
    }
    lines.push(format!("SGEMM {m}×{k}·{k}×{n} within the bound"));
    let p = MandelbrotParams {
        breadth: sizes.mandelbrot,
        ..MandelbrotParams::default()
    };
    let lattice = p.lattice();
    let graph = mandelbrot_with(backend, gpus, lattice.view(), p.max_iters, p.upper_bound)?;
    let want = mandelbrot_cpu(lattice.view(), p.max_iters, p.upper_bound)?;
    if let Some(d) = first_difference(graph.view(), want.view()) {
        return refuse(format!("Mandelbrot differs from the CPU's at {d}"));
    }
    lines.push(format!("Mandelbrot {0}×{0} equals the CPU's", p.breadth));
    let (side, steps) = sizes.life;
    let cells = random_lattice(side, 0.3, &mut rng);
    if life_with(backend, gpus, cells.view(), steps)? != life_cpu(cells.view(), steps)? {
        return refuse(format!("Life {side}² × {steps} differs from the CPU's"));
    }
    lines.push(format!("Life {side}² × {steps} equals the CPU's"));
    Ok(lines)
}
