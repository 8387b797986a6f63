//! `cuda-kernels`: the command-line program. Runs the seed demos, the
//! benchmarks, the device query, and prints the embedded PTX.
//!
//! It is a crate of its own (`cuda-kernels-cli`) so that the library
//! `cuda-kernels` pulls in none of what only the program needs (clap, png,
//! gif, serde).
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
// The library's items at this crate's root: the demos name them `crate::…`.
use cuda_kernels::prelude::*;
use cuda_kernels::*;
use demos::Report;

mod demos;
mod docs_tables;

#[derive(Parser)]
#[command(
    name = "cuda-kernels",
    version,
    about = "CUDA kernels written in Rust: demos, benchmarks, device query"
)]
struct Cli {
    /// The CUDA device to run on (its ordinal; `info` lists them).
    #[arg(long, global = true, value_name = "N")]
    device: Option<u32>,
    /// Run the kernels on the CPU simulator (as `CUDA_KERNELS_SIM=1` does):
    /// the kernels' own code, checked against the CPU references, at sizes
    /// that finish in seconds, with no GPU timings. Without a GPU the demos
    /// use the simulator anyway.
    #[arg(long, global = true)]
    sim: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The device query (exits non-zero when there is no CUDA device;
    /// with `--sim`, the simulated device's limits).
    Info,
    /// Prints the embedded PTX, or writes it to a file.
    Ptx {
        /// Write the PTX here instead of printing it.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print only the entry points and the target.
        #[arg(long)]
        summary: bool,
    },
    /// Runs every demo in sequence and prints the results table.
    Demo {
        /// Where images go.
        #[arg(long, default_value = "out")]
        out_dir: PathBuf,
    },
    /// Runs the benchmarks (GPU only): a table, and JSON with --json.
    /// Every row's result is checked; exits 1, naming the failed rows, when
    /// a check failed. On the simulator (`--sim`, `CUDA_KERNELS_SIM=1`) it
    /// says that timings need a GPU and exits 0, measuring nothing.
    Bench {
        /// Write the run (device, records) as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Only the multi-device rows: scaling from 1 to N devices (SGEMM,
        /// Mandelbrot, Life, reduce) and copies between devices.
        #[arg(long)]
        multi: bool,
        /// The devices of --multi, as ordinals (default: every usable one;
        /// one listed twice runs two bands on it).
        #[arg(long, value_delimiter = ',', requires = "multi")]
        devices: Option<Vec<u32>>,
    },
    /// The multi-device launchers on both backends (peer copies, NCCL) in
    /// one process, every result checked; with `--ranks N`, N processes on
    /// this machine, one GPU each, joined by NCCL (on the simulator,
    /// simulated devices joined through a hub on loopback).
    Multi {
        /// One backend only: `peer` or `nccl`.
        #[arg(long)]
        backend: Option<cuda_kernels::multi_gpu::Backend>,
        /// Start this many rank processes (one GPU each).
        #[arg(long)]
        ranks: Option<usize>,
        /// How the launcher passes the unique id: `tcp` (loopback), `env`
        /// or `file:PATH`.
        #[arg(long, default_value = "tcp")]
        id: cuda_kernels::multi_gpu::ranks::IdTransport,
        /// Fault injection: kill this rank's process (with --ranks) after
        /// --kill-after-ms; the others must end with an error by their
        /// deadline (`CUDA_KERNELS_NCCL_TIMEOUT_MS`), not hang.
        #[arg(long, requires = "ranks")]
        kill_rank: Option<usize>,
        /// When --kill-rank kills, in milliseconds after the start.
        #[arg(long, default_value_t = 0, requires = "kill_rank")]
        kill_after_ms: u64,
    },
    /// Renders the README's performance table (Markdown) from a bench JSON.
    BenchTable {
        /// The JSON written by `bench --json`.
        #[arg(long)]
        json: PathBuf,
        /// Replace the table between the markers in this file (README.md)
        /// instead of printing it.
        #[arg(long)]
        readme: Option<PathBuf>,
    },
    /// Renders every generated table of README.md and docs/*.md again from
    /// its source (the bench JSON its first line names; the built-in
    /// kernels' lists); run from the repository root.
    DocsTables {
        /// Write nothing: exit 1 naming the files whose tables are out of
        /// date.
        #[arg(long)]
        check: bool,
    },
    /// Opens the GPU and prints the milliseconds it took and the image loaded
    /// (for the bench's cold-start rows).
    #[command(hide = true)]
    ColdStart,
    #[command(flatten)]
    Foundation(demos::foundation::Command),
    #[command(flatten)]
    Matrices(demos::matrices::Command),
    #[command(flatten)]
    Reduce(demos::reduce::Command),
    #[command(flatten)]
    Mandelbrot(demos::mandelbrot::Command),
    #[command(flatten)]
    Streams(demos::streams::Command),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(
        cli.command,
        cli.sim || cuda_kernels::sim_requested(),
        cli.device,
    ) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            ExitCode::FAILURE
        }
    }
}

/// What a simulated run says, at its start and under its table.
const SIMULATED: &str = "SIMULATED: every kernel ran on the CPU simulator (the kernels' own Rust \
code), each result checked against its CPU reference; no GPU timings";

/// The GPU of `--device N` (device 0 without it; simulated device N with
/// `sim`).
fn chosen_gpu(sim: bool, device: Option<u32>) -> Result<Gpu, Error> {
    match (sim, device) {
        (true, None) => cuda_kernels::simulator(),
        (true, Some(n)) => Gpu::simulated_device(n),
        (false, None) => cuda_kernels::cuda_gpu(),
        (false, Some(n)) => cuda_kernels::gpu_on(n),
    }
}

/// Opens the GPU for a demo (`--device N`, else device 0), or the simulator
/// when `sim` is asked for or there is no GPU, printing first the line that
/// names the backend and why (`backend: GPU 0 (…)`, `backend: simulator
/// (no CUDA device: …)`); `None` (the CPU references alone) only if the
/// simulator does not open either. A GPU that is there but unusable (a
/// broken driver, …) is an error: nothing is silently simulated.
fn open_gpu(sim: bool, device: Option<u32>) -> Result<Option<Gpu>, Error> {
    let why = if sim {
        "--sim or CUDA_KERNELS_SIM=1".to_string()
    } else {
        match chosen_gpu(false, device) {
            Ok(gpu) => {
                println!("{}", gpu.backend_line(""));
                return Ok(Some(gpu));
            }
            Err(e) if e.is_no_gpu() => e.to_string(),
            Err(e) => return Err(e),
        }
    };
    match chosen_gpu(true, device) {
        Ok(gpu) => {
            println!("{}", gpu.backend_line(&why));
            eprintln!(
                "notice: SIMULATED: the kernels run on the CPU simulator (their own Rust code), \
                 each result checked against its CPU reference; no GPU timings"
            );
            Ok(Some(gpu))
        }
        Err(e) => {
            println!("backend: none ({why}; the simulator did not open: {e}): CPU references only");
            Ok(None)
        }
    }
}

/// The GEMM path (`matrices::GemmPath`) each layout of a bf16 product with
/// f32 output and 16-byte aligned operands takes on `gpu`, for `info`.
fn gemm_paths(gpu: &Gpu) -> Result<String, Error> {
    use cuda_kernels::matrices::{GemmShape, Op};
    let mut parts = Vec::new();
    for (op_a, op_b) in [
        (Op::N, Op::N),
        (Op::N, Op::T),
        (Op::T, Op::N),
        (Op::T, Op::T),
    ] {
        let shape = GemmShape::with_ops(256, 256, 256, op_a, op_b);
        let path = gpu.gemm_path::<half::bf16, f32>(&shape)?;
        parts.push(format!("{op_a:?}{op_b:?} {}", path.name()));
    }
    Ok(format!(
        "GEMM path (bf16 → f32, aligned operands; {} forces one): {}",
        cuda_kernels::matrices::GEMM_PATH_ENV,
        parts.join(", ")
    ))
}

/// A demo command: runs on the GPU or the simulator (`None`: the CPU
/// references alone) and adds its rows to the report.
type Demo = Box<dyn FnOnce(Option<&Gpu>, &mut Report) -> Result<(), Error>>;

fn run(command: Command, sim: bool, device: Option<u32>) -> Result<ExitCode, Error> {
    let demo: Demo = match command {
        Command::Info if sim => {
            let gpu = chosen_gpu(true, device)?;
            println!("{}", gpu.device_info()?);
            println!("{}", gemm_paths(&gpu)?);
            println!("SIMULATED: the CPU simulator's device (an H100's limits); no GPU was used");
            return Ok(ExitCode::SUCCESS);
        }
        Command::Info => {
            let (driver, devices) = cuda_kernels::device_info::query_devices()?;
            println!("CUDA driver version {driver}; {} device(s)", devices.len());
            for d in devices {
                println!("{d}");
            }
            let gpu = chosen_gpu(false, device)?;
            println!("kernels loaded on {} from: {}", gpu.label(), gpu.image());
            println!("{}", gemm_paths(&gpu)?);
            return Ok(ExitCode::SUCCESS);
        }
        Command::Ptx { out, summary } => {
            if summary {
                let entries = cuda_kernels::ptx_entry_points(cuda_kernels::PTX);
                println!(
                    "PTX for {}: {} bytes, {} entry points",
                    cuda_kernels::PTX_ARCH,
                    cuda_kernels::PTX.len(),
                    entries.len()
                );
                for e in entries {
                    println!("  {e}");
                }
                let cubins: Vec<_> = cuda_kernels::CUBINS
                    .iter()
                    .map(|c| format!("sm_{} ({} bytes)", c.sm, c.image.len()))
                    .collect();
                if cubins.is_empty() {
                    println!("cubins: none (built without ptxas): every GPU JIT-compiles the PTX");
                } else {
                    println!("cubins: {}", cubins.join(", "));
                }
            } else if let Some(path) = out {
                write_file(&path, cuda_kernels::PTX)?;
                eprintln!(
                    "wrote {} ({} bytes)",
                    path.display(),
                    cuda_kernels::PTX.len()
                );
            } else {
                print!("{}", cuda_kernels::PTX);
            }
            return Ok(ExitCode::SUCCESS);
        }
        Command::Multi {
            backend,
            ranks,
            id,
            kill_rank,
            kill_after_ms,
        } => {
            let kill = kill_rank.map(|r| (r, std::time::Duration::from_millis(kill_after_ms)));
            return demos::ranks::run(sim, backend, ranks, id, kill);
        }
        Command::Bench { .. } if sim => {
            eprintln!("bench needs a GPU: no timings on the simulator (nothing measured)");
            return Ok(ExitCode::SUCCESS);
        }
        Command::Bench {
            json,
            multi,
            devices,
        } => {
            // A rank process of `bench --multi`'s job of rank processes
            // (the launcher set its place in the environment).
            if multi {
                let timeout = cuda_kernels::nccl::default_timeout();
                if let Some(env) = cuda_kernels::multi_gpu::ranks::RankEnv::from_env(timeout)? {
                    return demos::multi::rank_process(&env);
                }
            }
            let mut records = Vec::new();
            let device = if multi {
                let gpus = match devices {
                    None => cuda_kernels::all_gpus()?,
                    Some(list) => list
                        .into_iter()
                        .map(cuda_kernels::gpu_on)
                        .collect::<Result<_, _>>()?,
                };
                let gpus: Vec<&Gpu> = gpus.iter().collect();
                let line = demos::multi::device_line(&gpus);
                eprintln!("GPUs: {line}");
                demos::multi::bench(&gpus, &demos::multi::Sizes::FULL, &mut records)?;
                line
            } else {
                let gpu = chosen_gpu(false, device).inspect_err(|e| {
                    if e.is_no_gpu() {
                        eprintln!(
                            "note: bench needs a GPU (the simulator has no timings); \
                             `cuda-kernels demo` runs every kernel on the simulator"
                        );
                    }
                })?;
                let name = gpu.name()?;
                eprintln!("GPU: {}", gpu.label());
                demos::bench_all(&gpu, &mut records)?;
                name
            };
            let run = demos::bench_table::BenchRun::new(device, records, multi);
            print!("{}", run.to_text());
            if let Some(path) = json {
                let text = serde_json::to_string_pretty(&run).map_err(|e| {
                    Error::invalid("bench", format!("cannot encode the records: {e}"))
                })?;
                write_file(&path, &text)?;
                eprintln!("wrote {}", path.display());
            }
            return Ok(match demos::bench_failures(&run.records) {
                None => ExitCode::SUCCESS,
                Some(failures) => {
                    eprintln!(
                        "error: wrong results in the benchmark (no ratio reported for them):\n{failures}"
                    );
                    ExitCode::FAILURE
                }
            });
        }
        Command::BenchTable { json, readme } => {
            let read = |path: &PathBuf| {
                std::fs::read_to_string(path).map_err(|source| Error::Io {
                    what: format!("reading {}", path.display()),
                    source,
                })
            };
            let run: demos::bench_table::BenchRun = serde_json::from_str(&read(&json)?)
                .map_err(|e| Error::invalid("bench-table", format!("{}: {e}", json.display())))?;
            let file = readme
                .as_ref()
                .map_or("FILE".into(), |p| p.display().to_string());
            let table = run.to_markdown(&demos::bench_table::command(
                &json.display().to_string(),
                &file,
            ));
            match readme {
                None => print!("{table}"),
                Some(path) => {
                    let text = demos::bench_table::replace_between_markers(&read(&path)?, &table)
                        .map_err(|e| {
                        Error::invalid("bench-table", format!("{}: {e}", path.display()))
                    })?;
                    write_file(&path, &text)?;
                    eprintln!("updated the table in {}", path.display());
                }
            }
            return Ok(ExitCode::SUCCESS);
        }
        Command::DocsTables { check } => {
            return match docs_tables::run(std::path::Path::new("."), check) {
                Ok(written) => {
                    for path in written {
                        eprintln!("updated the tables in {}", path.display());
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    Ok(ExitCode::FAILURE)
                }
            };
        }
        Command::Demo { out_dir } => {
            std::fs::create_dir_all(&out_dir).map_err(|source| Error::Io {
                what: format!("creating {}", out_dir.display()),
                source,
            })?;
            Box::new(move |gpu, report| {
                if report.simulated {
                    println!(
                        "SIMULATED: every demo runs on the CPU simulator, at sizes that finish \
                         in seconds; no GPU timings\n{}",
                        ptx_summary_line()
                    );
                }
                demos::run_all(gpu, &out_dir, report)
            })
        }
        Command::ColdStart => {
            demos::foundation::cold_start_probe()?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Foundation(cmd) => Box::new(move |gpu, r| demos::foundation::run(&cmd, gpu, r)),
        Command::Matrices(cmd) => Box::new(move |gpu, r| demos::matrices::run(&cmd, gpu, r)),
        Command::Reduce(cmd) => Box::new(move |gpu, r| demos::reduce::run(&cmd, gpu, r)),
        Command::Mandelbrot(cmd) => Box::new(move |gpu, r| demos::mandelbrot::run(&cmd, gpu, r)),
        Command::Streams(cmd) => Box::new(move |gpu, r| demos::streams::run(&cmd, gpu, r)),
    };
    let gpu = open_gpu(sim, device)?;
    let mut report = Report::for_gpu(gpu.as_ref());
    demo(gpu.as_ref(), &mut report)?;
    print!("\n{}", report.to_table());
    if report.simulated {
        println!("{SIMULATED}");
    }
    Ok(if report.any_failed() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Writes `text` to `path`, naming the file in the error.
fn write_file(path: &std::path::Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(|source| Error::Io {
        what: format!("writing {}", path.display()),
        source,
    })
}

fn ptx_summary_line() -> String {
    let entries = cuda_kernels::ptx_entry_points(cuda_kernels::PTX);
    format!(
        "embedded PTX: {} bytes for {}, {} entry points: {}",
        cuda_kernels::PTX.len(),
        cuda_kernels::PTX_ARCH,
        entries.len(),
        entries.join(", ")
    )
}
