//! A job of several processes on one machine, one GPU each, joined by NCCL:
//! the code path that would run with one process per node. The launcher
//! ([`launch`]) makes the communicator's unique id, starts the rank
//! processes with their rank in the environment and passes the id on (by
//! loopback TCP, an environment variable or a file: [`IdTransport`]); each
//! rank reads its place from the environment ([`RankEnv::from_env`]), joins
//! ([`Communicator::init_rank`]) and runs [`rank_job`]: the multi-device
//! launchers' rank functions on its share, each rank checking its part
//! against the CPU and rank 0 the whole against one GPU's run.
//!
//! On the simulator the launcher serves a simulated clique's hub
//! ([`SimHub`]) and the rank processes join it over loopback: the same
//! path, with simulated devices. A rank process killed in the middle
//! ([`Launch::kill`]) makes the others fail at once (the hub sees its
//! connection close) or by their deadline, never hang.
use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ndarray::{Array1, Array2, s};

use super::life::life_rank;
use super::mandelbrot::mandelbrot_rank;
use super::matmul::matmul_rank;
use super::reduce::reduce_rank;
use super::split_rows;
use crate::Gpu;
use crate::error::{Error, Result};
use crate::life::{life_cpu, random_lattice};
use crate::mandelbrot::{MandelbrotExt, MandelbrotParams, first_difference, mandelbrot_cpu};
use crate::matrices::check_matmul;
use crate::matrices::matmul::MatmulExt;
use crate::nccl::{Communicator, SimHub, UniqueId};
use crate::reduce::{ReduceExt, Sum, reduce_cpu};
use crate::util::Rng;

const K: &str = "multi-process job";

/// This process's rank (`0..ranks`), set by the launcher.
pub const RANK_ENV: &str = "CUDA_KERNELS_RANK";
/// The job's number of ranks, set by the launcher.
pub const RANKS_ENV: &str = "CUDA_KERNELS_RANKS";
/// The unique id as hex ([`IdTransport::Env`]).
pub const ID_ENV: &str = "CUDA_KERNELS_NCCL_ID";
/// The file holding the unique id ([`IdTransport::File`]).
pub const ID_FILE_ENV: &str = "CUDA_KERNELS_NCCL_ID_FILE";
/// The loopback address that serves the unique id ([`IdTransport::Tcp`]).
pub const ID_ADDR_ENV: &str = "CUDA_KERNELS_NCCL_ID_ADDR";

/// How the launcher passes the unique id to the ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdTransport {
    /// A TCP connection on loopback that the launcher serves.
    Tcp,
    /// The environment variable [`ID_ENV`], as hex.
    Env,
    /// A file the launcher writes ([`ID_FILE_ENV`] names it).
    File(PathBuf),
}

impl std::str::FromStr for IdTransport {
    type Err = Error;

    /// `tcp`, `env` or `file:PATH`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "tcp" => Ok(Self::Tcp),
            "env" => Ok(Self::Env),
            _ => s
                .strip_prefix("file:")
                .map(|p| Self::File(PathBuf::from(p)))
                .ok_or_else(|| {
                    Error::invalid(K, format!("id transport {s:?}: tcp, env or file:PATH"))
                }),
        }
    }
}

/// What one rank process ended with.
#[derive(Debug)]
pub struct RankOutcome {
    /// Its rank.
    pub rank: usize,
    /// Whether it exited with success (`false` for a failure, a crash or a
    /// kill at the deadline).
    pub succeeded: bool,
    /// How it ended, in words (`exit status: 0`, `killed at the deadline`).
    pub ended: String,
    /// Its standard output and error.
    pub output: String,
}

/// How a job's rank processes are started.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The number of rank processes.
    pub ranks: usize,
    /// How the unique id reaches them.
    pub transport: IdTransport,
    /// How long the launcher waits for them before it kills the rest: give
    /// them longer than their own deadline
    /// ([`TIMEOUT_ENV`](crate::nccl::TIMEOUT_ENV)), so that a rank that
    /// waits for a dead peer reports its typed error first.
    pub timeout: Duration,
    /// Fault injection: kill rank `.0`'s process `.1` after the start (as a
    /// crash would end it), to see the others end by their deadline.
    pub kill: Option<(usize, Duration)>,
}

impl Launch {
    /// `ranks` processes, the id by loopback TCP, twice the ranks' deadline
    /// and half a minute for the launcher's, nothing killed.
    pub fn new(ranks: usize) -> Self {
        Launch {
            ranks,
            transport: IdTransport::Tcp,
            timeout: crate::nccl::default_timeout() * 2 + Duration::from_secs(30),
            kill: None,
        }
    }
}

/// Starts `job.ranks` processes, `command(rank)` each (the launcher sets
/// the rank, the rank count and the id's transport in their environment),
/// passes them `id` by `job.transport`, and waits for all of them up to
/// `job.timeout` (then kills the rest). Returns every rank's outcome, in
/// rank order; an error only when the job could not be started.
///
/// A simulated id without a hub ([`UniqueId::simulated`]) joins threads of
/// one process only: more than one rank process is [`Error::InvalidInput`]
/// (a hub's id, [`SimHub`], joins processes).
pub fn launch(
    job: &Launch,
    id: &UniqueId,
    command: impl Fn(usize) -> Command,
) -> Result<Vec<RankOutcome>> {
    let (ranks, transport, timeout) = (job.ranks, &job.transport, job.timeout);
    if ranks == 0 {
        return Err(Error::invalid(K, "0 ranks: a job needs at least one"));
    }
    if id.is_simulated() && id.hub_port().is_none() && ranks > 1 {
        return Err(Error::invalid(
            K,
            format!(
                "{ranks} rank processes with a simulated id without a hub: such a clique \
                 joins threads of one process (start a SimHub for processes)"
            ),
        ));
    }
    if let Some((rank, _)) = job.kill
        && rank >= ranks
    {
        return Err(Error::invalid(
            K,
            format!("kill rank {rank}: not a rank of 0..{ranks}"),
        ));
    }
    let listener = match transport {
        IdTransport::Tcp => Some(
            TcpListener::bind("127.0.0.1:0").map_err(|source| Error::Io {
                what: "the unique id's loopback listener".into(),
                source,
            })?,
        ),
        IdTransport::File(path) => {
            id.write_file(path)?;
            None
        }
        IdTransport::Env => None,
    };
    let addr = listener
        .as_ref()
        .map(|l| l.local_addr())
        .transpose()
        .map_err(|source| Error::Io {
            what: "the unique id's loopback listener".into(),
            source,
        })?;
    let mut children: Vec<Child> = Vec::with_capacity(ranks);
    for rank in 0..ranks {
        let mut c = command(rank);
        c.env(RANK_ENV, rank.to_string())
            .env(RANKS_ENV, ranks.to_string())
            .env_remove(ID_ENV)
            .env_remove(ID_FILE_ENV)
            .env_remove(ID_ADDR_ENV)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match transport {
            IdTransport::Tcp => {
                c.env(ID_ADDR_ENV, addr.map(|a| a.to_string()).unwrap_or_default());
            }
            IdTransport::Env => {
                c.env(ID_ENV, id.to_hex());
            }
            IdTransport::File(path) => {
                c.env(ID_FILE_ENV, path);
            }
        }
        match c.spawn() {
            Ok(child) => children.push(child),
            Err(source) => {
                for mut started in children {
                    let _ = started.kill();
                    let _ = started.wait();
                }
                return Err(Error::Io {
                    what: format!("starting rank {rank}"),
                    source,
                });
            }
        }
    }
    let since = Instant::now();
    let stop_serving = Arc::new(AtomicBool::new(false));
    let served = listener.map(|l| {
        let (id, stop) = (id.clone(), stop_serving.clone());
        std::thread::spawn(move || id.serve_tcp(&l, ranks, timeout, &stop))
    });
    // Read each child's output on a thread of its own (a full pipe would
    // stop it), and wait for every child until the deadline.
    let readers: Vec<_> = children
        .iter_mut()
        .map(|c| {
            let (out, err) = (c.stdout.take(), c.stderr.take());
            std::thread::spawn(move || {
                let mut text = String::new();
                if let Some(mut o) = out {
                    let _ = o.read_to_string(&mut text);
                }
                if let Some(mut e) = err {
                    let _ = e.read_to_string(&mut text);
                }
                text
            })
        })
        .collect();
    let mut ended: Vec<Option<(bool, String)>> = vec![None; ranks];
    let mut killed = vec![false; ranks];
    while ended.iter().any(Option::is_none) {
        for (rank, child) in children.iter_mut().enumerate() {
            if ended[rank].is_some() {
                continue;
            }
            match child.try_wait() {
                Ok(Some(status)) if killed[rank] => {
                    ended[rank] = Some((false, format!("killed as asked ({status})")));
                }
                Ok(Some(status)) => ended[rank] = Some((status.success(), status.to_string())),
                Ok(None)
                    if job
                        .kill
                        .is_some_and(|(r, after)| r == rank && since.elapsed() >= after)
                        && !killed[rank] =>
                {
                    let _ = child.kill();
                    killed[rank] = true;
                }
                Ok(None) if since.elapsed() > timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    ended[rank] = Some((false, format!("killed at the deadline ({timeout:?})")));
                }
                Ok(None) => {}
                Err(e) => ended[rank] = Some((false, format!("could not be waited for: {e}"))),
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if let Some(server) = served {
        // Every rank has ended: one that never fetched the id has its own
        // error, reported below.
        stop_serving.store(true, Ordering::Relaxed);
        let _ = server.join();
    }
    Ok(readers
        .into_iter()
        .zip(ended)
        .enumerate()
        .map(|(rank, (reader, ended))| {
            let (succeeded, ended) = ended.unwrap_or((false, "unknown".into()));
            RankOutcome {
                rank,
                succeeded,
                ended,
                output: reader.join().unwrap_or_default(),
            }
        })
        .collect())
}

/// The launcher's side of a job ([`launch`]), one device each: refuses
/// more ranks than devices, makes the id (NCCL's; on the simulator, a
/// [`SimHub`]'s, which this process serves until the job ends) and starts
/// the ranks.
pub fn launch_job(
    job: &Launch,
    simulated: bool,
    command: impl Fn(usize) -> Command,
) -> Result<Vec<RankOutcome>> {
    if simulated {
        let hub = SimHub::start(job.ranks)?;
        return launch(job, hub.id(), command);
    }
    let count = crate::devices::device_count() as usize;
    if job.ranks > count {
        return Err(Error::invalid(
            K,
            format!(
                "{} ranks, one GPU each, but the machine has {count} GPUs",
                job.ranks
            ),
        ));
    }
    launch(job, &UniqueId::nccl()?, command)
}

/// A rank process's side of a job: joins the job `env` describes on the
/// device `open(rank)` gives, runs [`rank_job`] (at the simulator's sizes
/// on a simulated device) and returns its lines.
pub fn run_rank(
    env: &RankEnv,
    timeout: Duration,
    open: impl Fn(usize) -> Result<Gpu>,
) -> Result<Vec<String>> {
    let gpu = open(env.rank)?;
    let comm = Communicator::init_rank(&gpu, &env.id, env.rank, env.ranks, timeout)?;
    let sizes = if gpu.is_simulated() {
        JobSizes::SIMULATOR
    } else {
        JobSizes::GPU
    };
    rank_job(&comm, &gpu, &sizes)
}

/// A program that is both a job's launcher and its ranks (the example,
/// `cuda-kernels multi`): as a rank (the launcher's environment set), joins
/// and runs [`run_rank`] on `open(rank)`, printing its lines; else with a
/// `job`, launches its copies of `command(rank)` ([`launch_job`]) and prints
/// their outcomes ([`print_outcomes`]). Whether every check passed; `None`
/// when neither (no rank, no job).
pub fn launcher_or_rank(
    job: Option<&Launch>,
    simulated: bool,
    open: impl Fn(usize) -> Result<Gpu>,
    command: impl Fn(usize) -> Command,
) -> Result<Option<bool>> {
    let timeout = crate::nccl::default_timeout();
    if let Some(env) = RankEnv::from_env(timeout)? {
        for line in run_rank(&env, timeout, open)? {
            println!("rank {}: {line}", env.rank);
        }
        return Ok(Some(true));
    }
    let Some(job) = job else {
        return Ok(None);
    };
    println!(
        "{} rank processes ({}), the id by {:?}",
        job.ranks,
        if simulated {
            "simulated devices, joined through a hub"
        } else {
            "one GPU each"
        },
        job.transport
    );
    let outcomes = launch_job(job, simulated, command)?;
    Ok(Some(print_outcomes(&outcomes)))
}

/// Prints every rank's output and how it ended, then whether every rank
/// passed; returns that.
pub fn print_outcomes(outcomes: &[RankOutcome]) -> bool {
    let mut passed = true;
    for o in outcomes {
        print!("{}", o.output);
        println!("rank {}: {}", o.rank, o.ended);
        passed &= o.succeeded;
    }
    println!(
        "{}",
        if passed {
            "every rank passed"
        } else {
            "a rank failed"
        }
    );
    passed
}

/// A rank process's place in its job, from the launcher's environment.
#[derive(Debug, Clone)]
pub struct RankEnv {
    /// This rank.
    pub rank: usize,
    /// The job's ranks.
    pub ranks: usize,
    /// The communicator's unique id.
    pub id: UniqueId,
}

impl RankEnv {
    /// `None` when this process is not a rank of a job ([`RANK_ENV`]
    /// unset); the rank, the rank count and the id (fetched from the
    /// transport the environment names, waiting up to `timeout`) otherwise.
    /// A rank outside `0..ranks`, an unparsable number, a missing or
    /// corrupt id are errors.
    pub fn from_env(timeout: Duration) -> Result<Option<Self>> {
        let Ok(rank) = std::env::var(RANK_ENV) else {
            return Ok(None);
        };
        let number = |var: &str, text: &str| {
            text.trim()
                .parse::<usize>()
                .map_err(|e| Error::invalid(K, format!("{var}={text:?}: {e}")))
        };
        let rank = number(RANK_ENV, &rank)?;
        let ranks = number(
            RANKS_ENV,
            &std::env::var(RANKS_ENV).map_err(|e| {
                Error::invalid(K, format!("{RANK_ENV} is set but {RANKS_ENV}: {e}"))
            })?,
        )?;
        if rank >= ranks {
            return Err(Error::invalid(
                K,
                format!("rank {rank} of {ranks}: a rank must be in 0..{ranks}"),
            ));
        }
        let id = if let Ok(addr) = std::env::var(ID_ADDR_ENV) {
            let addr = addr
                .parse()
                .map_err(|e| Error::invalid(K, format!("{ID_ADDR_ENV}={addr:?}: {e}")))?;
            UniqueId::fetch_tcp(addr, timeout)?
        } else if let Ok(path) = std::env::var(ID_FILE_ENV) {
            UniqueId::wait_for_file(std::path::Path::new(&path), timeout)?
        } else {
            UniqueId::from_env(ID_ENV)?
        };
        Ok(Some(Self { rank, ranks, id }))
    }
}

/// The sizes of [`rank_job`]'s workloads.
#[derive(Debug, Clone, Copy)]
pub struct JobSizes {
    /// Elements reduced.
    pub reduce: usize,
    /// SGEMM `m`, `k`, `n`.
    pub matmul: (usize, usize, usize),
    /// Mandelbrot points along each axis.
    pub mandelbrot: usize,
    /// Life lattice side and steps.
    pub life: (usize, usize),
}

impl JobSizes {
    /// Sizes that finish in seconds on a GPU.
    pub const GPU: JobSizes = JobSizes {
        reduce: (1 << 24) + 3,
        matmul: (1031, 517, 263),
        mandelbrot: 1024,
        life: (512, 50),
    };
    /// Sizes that finish in seconds on the simulator.
    pub const SIMULATOR: JobSizes = JobSizes {
        reduce: 20_011,
        matmul: (37, 20, 9),
        mandelbrot: 67,
        life: (67, 9),
    };
}

/// One rank's work in a job of processes: reduce (sum of i64), SGEMM,
/// Mandelbrot and Life through the multi-device launchers' rank functions
/// on `comm`. Each rank checks its own part against the CPU (its band of
/// rows, its total); rank 0 also checks the whole against one GPU's run.
/// Returns one line per check passed; a failed check is
/// [`Error::InvalidInput`] saying what differs.
pub fn rank_job(comm: &Communicator, gpu: &Gpu, sizes: &JobSizes) -> Result<Vec<String>> {
    let (rank, ranks) = (comm.rank(), comm.ranks());
    let refuse = |what: String| Err(Error::invalid(K, format!("rank {rank}: {what}")));
    let mut lines = Vec::new();
    let mut rng = Rng::new(24);
    // Every rank makes the same data from the same seed.
    let ints = Array1::from_shape_simple_fn(sizes.reduce, || rng.below(2001) as i64 - 1000);
    let (m, k, n) = sizes.matmul;
    let a = Array2::from_shape_simple_fn((m, k), || rng.uniform() as f32 - 0.5);
    let b = Array2::from_shape_simple_fn((k, n), || rng.uniform() as f32 - 0.5);
    let (side, steps) = sizes.life;
    let cells = random_lattice(side, 0.3, &mut rng);

    let shares = split_rows(K, ints.len(), ranks)?;
    let total = reduce_rank::<Sum, i64>(
        comm,
        gpu,
        &ints.as_slice().unwrap_or(&[])[shares[rank].clone()],
    )?;
    let want = reduce_cpu::<Sum, i64>(ints.view(), None)?;
    if total != want {
        return refuse(format!("reduce: total {total}, the CPU's {want}"));
    }
    lines.push(format!("reduce of {} i64: {total} (the CPU's)", ints.len()));
    if rank == 0 {
        let one = gpu.reduce::<Sum, i64>(ints.view(), None)?;
        if one != total {
            return refuse(format!("reduce: {total}, one GPU's {one}"));
        }
        lines.push("reduce: the whole equals one GPU's".into());
    }

    let c = matmul_rank(comm, gpu, a.view(), b.view())?;
    let band = split_rows(K, m, ranks)?[rank].clone();
    let check = check_matmul(
        c.slice(s![band.clone(), ..]),
        a.slice(s![band.clone(), ..]),
        b.view(),
    )?;
    if !check.passed() {
        return refuse(format!("SGEMM rows {band:?}: {check:?}"));
    }
    lines.push(format!(
        "SGEMM {m}×{k}·{k}×{n}: rows {band:?} within the bound"
    ));
    if rank == 0 {
        let one = gpu.matrix_mul_tiled(a.view(), b.view())?;
        if one != c {
            return refuse("SGEMM: the whole differs from one GPU's product".into());
        }
        lines.push("SGEMM: the whole equals one GPU's, bit for bit".into());
    }

    let params = MandelbrotParams {
        breadth: sizes.mandelbrot,
        ..MandelbrotParams::default()
    };
    let lattice = params.lattice();
    let graph = mandelbrot_rank(
        comm,
        gpu,
        lattice.view(),
        params.max_iters,
        params.upper_bound,
    )?;
    let want = mandelbrot_cpu(lattice.view(), params.max_iters, params.upper_bound)?;
    let rows = split_rows(K, params.breadth, ranks)?[rank].clone();
    if let Some(d) = first_difference(
        graph.slice(s![rows.clone(), ..]),
        want.slice(s![rows.clone(), ..]),
    ) {
        return refuse(format!(
            "Mandelbrot rows {rows:?} differ from the CPU's at {d}"
        ));
    }
    lines.push(format!(
        "Mandelbrot {0}×{0}: rows {rows:?} equal the CPU's",
        params.breadth
    ));
    if rank == 0 {
        let one = gpu.mandelbrot(lattice.view(), params.max_iters, params.upper_bound)?;
        if let Some(d) = first_difference(graph.view(), one.view()) {
            return refuse(format!(
                "Mandelbrot: the whole differs from one GPU's at {d}"
            ));
        }
        lines.push("Mandelbrot: the whole equals one GPU's".into());
    }

    let got = life_rank(comm, gpu, cells.view(), steps, None)?;
    let want = life_cpu(cells.view(), steps)?;
    let rows = split_rows(K, side, ranks)?[rank].clone();
    if got.slice(s![rows.clone(), ..]) != want.slice(s![rows.clone(), ..]) {
        return refuse(format!("Life rows {rows:?} differ from the CPU's"));
    }
    lines.push(format!(
        "Life {side}² × {steps}: rows {rows:?} equal the CPU's"
    ));
    if rank == 0 {
        let one = super::life::life(&[gpu], cells.view(), steps)?;
        if one != got {
            return refuse("Life: the whole differs from one GPU's".into());
        }
        lines.push("Life: the whole equals one GPU's".into());
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BuiltinSimulator;

    /// The rank job on a simulated clique of one (what a rank process runs
    /// on the simulator), and on three ranks as threads (what processes
    /// would run on GPUs): every check passes.
    #[test]
    fn the_rank_job_passes_on_simulated_ranks() -> Result<()> {
        let gpus: Vec<Gpu> = (0..3).map(Gpu::simulated_device).collect::<Result<_>>()?;
        for p in [1, 3] {
            let refs: Vec<&Gpu> = gpus.iter().take(p).collect();
            let comms = Communicator::all_devices(&refs)?;
            let lines = std::thread::scope(|s| {
                let handles: Vec<_> = comms
                    .into_iter()
                    .zip(&refs)
                    .map(|(comm, gpu)| s.spawn(move || rank_job(&comm, gpu, &JobSizes::SIMULATOR)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err(Error::invalid(K, "panicked")))
                    })
                    .collect::<Result<Vec<_>>>()
            })?;
            assert_eq!(lines[0].len(), 8, "{lines:?}");
            assert!(lines.iter().skip(1).all(|l| l.len() == 4), "{lines:?}");
        }
        Ok(())
    }

    #[test]
    fn a_local_simulated_id_cannot_join_processes() {
        let e = launch(&Launch::new(2), &UniqueId::simulated(), |_| {
            Command::new("true")
        })
        .unwrap_err();
        assert!(e.to_string().contains("without a hub"), "{e}");
        let mut job = Launch::new(2);
        job.kill = Some((2, Duration::ZERO));
        let hub = SimHub::start(2).unwrap();
        let e = launch(&job, hub.id(), |_| Command::new("true")).unwrap_err();
        assert!(e.to_string().contains("kill rank 2"), "{e}");
        assert!("file:/tmp/x".parse::<IdTransport>().is_ok());
        assert!("udp".parse::<IdTransport>().is_err());
    }
}
