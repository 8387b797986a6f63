//! The seed demos behind the `cuda-kernels` command, one module per kernel
//! family. Each demo runs on the GPU when there is one, or on the CPU
//! simulator (without a GPU, with `--sim`, or with `CUDA_KERNELS_SIM=1`: the
//! kernels' own code, at sizes that finish in seconds, untimed), always
//! computes the CPU reference, and adds rows to a [`Report`] (the results
//! table). On the simulator, a demo about the hardware itself (the device
//! query, unified memory, launch rates, streams' concurrency, events,
//! contexts, the driver-API and C ABI paths) adds a row saying it was not
//! run ([`hardware_only`]).
//!
//! A family module offers:
//! - `Command`: its subcommands (flattened into the CLI);
//! - `run(cmd, gpu, report)`: runs one of them;
//! - `run_all(gpu, out_dir, report)`: its part of `cuda-kernels demo`;
//! - `bench(gpu, records)`: its part of `cuda-kernels bench`.
use std::fmt::Write as _;
use std::path::Path;

use ndarray::{ArrayBase, Data, Dimension};

use crate::{Gpu, Result};

pub mod bandwidth;
pub mod bench_table;
pub mod collectives;
pub mod foundation;
pub mod gemm;
pub mod graphs;
pub mod histogram;
pub mod mandelbrot;
pub mod matrices;
pub mod multi;
pub mod ranks;
pub mod reduce;
pub mod sort;
pub mod streams;

/// How a GPU result compared with the CPU reference (in JSON:
/// `{"outcome": "pass" | "fail" | "skipped", "detail": "…"}`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", content = "detail", rename_all = "lowercase")]
pub enum Check {
    /// Matches (with how: "exact", "allclose", a max error…).
    Pass(String),
    /// Does not match, and why.
    Fail(String),
    /// Not compared (no GPU), and why.
    Skipped(String),
}

/// One line of the results table.
#[derive(Debug, Clone)]
pub struct Row {
    /// Kernel or technique.
    pub kernel: String,
    /// Problem size, as people say it ("2^20", "4096×4096").
    pub size: String,
    /// GPU time in milliseconds (kernel time unless the note says otherwise).
    pub gpu_ms: Option<f64>,
    /// CPU reference time in milliseconds.
    pub cpu_ms: Option<f64>,
    /// Effective bandwidth or GFLOP/s, with its unit.
    pub throughput: Option<String>,
    /// The correctness check.
    pub check: Check,
}

impl Row {
    /// A row with only a name, a size and a check.
    pub fn new(kernel: impl Into<String>, size: impl Into<String>, check: Check) -> Self {
        Self {
            kernel: kernel.into(),
            size: size.into(),
            gpu_ms: None,
            cpu_ms: None,
            throughput: None,
            check,
        }
    }
}

/// The results table of a run.
#[derive(Debug, Default)]
pub struct Report {
    /// Rows in the order the demos ran.
    pub rows: Vec<Row>,
    /// Whether the kernels ran on the simulator: rows get `[sim]` after the
    /// kernel's name and no GPU time or throughput.
    pub simulated: bool,
}

impl Report {
    /// A report for a run on `gpu` (the simulator's: see [`Report::simulated`]).
    pub fn for_gpu(gpu: Option<&Gpu>) -> Self {
        Self {
            rows: Vec::new(),
            simulated: simulated(gpu),
        }
    }

    /// Adds a row (on the simulator: marked `[sim]`, its GPU time and
    /// throughput dropped, so that no simulated time can pass for a GPU's).
    pub fn push(&mut self, mut row: Row) {
        if self.simulated {
            row.gpu_ms = None;
            row.throughput = None;
            if !matches!(row.check, Check::Skipped(_)) {
                row.kernel.push_str(" [sim]");
            }
        }
        self.rows.push(row);
    }

    /// Whether any check failed.
    pub fn any_failed(&self) -> bool {
        self.rows.iter().any(|r| matches!(r.check, Check::Fail(_)))
    }

    /// The table as aligned text.
    pub fn to_table(&self) -> String {
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
        let mut cells = vec![[
            "kernel".to_string(),
            "size".into(),
            if self.simulated {
                "GPU ms (none: simulated)".into()
            } else {
                "GPU ms".into()
            },
            "CPU ms".into(),
            "speedup".into(),
            "throughput".into(),
            "check".into(),
        ]];
        for r in &self.rows {
            let speedup = match (r.gpu_ms, r.cpu_ms) {
                (Some(g), Some(c)) if g > 0.0 => format!("{:.1}x", c / g),
                _ => "-".into(),
            };
            let check = match &r.check {
                Check::Pass(s) => format!("ok ({s})"),
                Check::Fail(s) => format!("FAILED: {s}"),
                Check::Skipped(s) => format!("skipped: {s}"),
            };
            cells.push([
                r.kernel.clone(),
                r.size.clone(),
                ms(r.gpu_ms),
                ms(r.cpu_ms),
                speedup,
                r.throughput.clone().unwrap_or_else(|| "-".into()),
                check,
            ]);
        }
        let widths: Vec<usize> = (0..7)
            .map(|c| {
                cells
                    .iter()
                    .map(|row| row[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for (i, row) in cells.iter().enumerate() {
            let line: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}", w = *w))
                .collect();
            let _ = writeln!(out, "{}", line.join("  ").trim_end());
            if i == 0 {
                let _ = writeln!(
                    out,
                    "{}",
                    widths
                        .iter()
                        .map(|w| "-".repeat(*w))
                        .collect::<Vec<_>>()
                        .join("  ")
                );
            }
        }
        out
    }
}

/// One benchmark measurement, for `cuda-kernels bench` (JSON and table).
///
/// Every record carries the check of the result it timed ([`Check`]): a
/// record cannot be built without one, and `cuda-kernels bench` fails (exit
/// status 1, naming each failed row and its error) when any check failed,
/// and never reports a ratio for such a row. [`Check::Skipped`] is for rows
/// with no result to check (an empty kernel's launch rate).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct BenchRecord {
    /// Kernel.
    pub kernel: String,
    /// Size.
    pub size: String,
    /// Median time in milliseconds.
    pub median_ms: f64,
    /// The metric's name and unit ("GB/s", "GFLOP/s", "launches/s").
    pub metric: String,
    /// The metric's value.
    pub value: f64,
    /// What the ratio is against ("device copy", "cuBLAS", …), or why there
    /// is no reference ("cuBLAS missing: …").
    pub reference: Option<String>,
    /// value / reference value, measured in the same run; `None` when the
    /// check failed.
    pub ratio: Option<f64>,
    /// The check of the timed result against its CPU reference.
    pub check: Check,
}

impl BenchRecord {
    /// A record without a reference.
    pub fn new(
        kernel: impl Into<String>,
        size: impl Into<String>,
        median_ms: f64,
        metric: impl Into<String>,
        value: f64,
        check: Check,
    ) -> Self {
        Self {
            kernel: kernel.into(),
            size: size.into(),
            median_ms,
            metric: metric.into(),
            value,
            reference: None,
            ratio: None,
            check,
        }
    }

    /// The record with a reference and the ratio to it (dropped if the
    /// check failed: a wrong result has no ratio).
    pub fn against(mut self, reference: impl Into<String>, ratio: f64) -> Self {
        self.reference = Some(reference.into());
        self.ratio = (!self.failed()).then_some(ratio);
        self
    }

    /// Whether the check failed.
    pub fn failed(&self) -> bool {
        matches!(self.check, Check::Fail(_))
    }
}

/// The failed records of a bench run, one line each (row and error), or
/// `None` when every check passed or had nothing to check.
pub fn bench_failures(records: &[BenchRecord]) -> Option<String> {
    let lines: Vec<String> = records
        .iter()
        .filter_map(|r| match &r.check {
            Check::Fail(why) => Some(format!("{} ({}): {why}", r.kernel, r.size)),
            _ => None,
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// The median GPU time in ms (CUDA events on [`Gpu::stream`]) of `reps`
/// runs of `work`, after `warm_up` untimed ones: every bench's timing loop.
pub fn median_gpu_ms(
    gpu: &Gpu,
    warm_up: usize,
    reps: usize,
    mut work: impl FnMut() -> Result<()>,
) -> Result<f32> {
    let mut times = Vec::with_capacity(reps);
    for rep in 0..warm_up + reps {
        let ((), ms) = crate::timing::GpuTimer::time(gpu.stream(), &mut work)?;
        if rep >= warm_up {
            times.push(ms);
        }
    }
    Ok(crate::timing::median(&mut times))
}

/// Whether `gpu` is the CPU simulator.
pub fn simulated(gpu: Option<&Gpu>) -> bool {
    gpu.is_some_and(Gpu::is_simulated)
}

/// A demo's size: `full` on a GPU (and for the CPU reference alone),
/// `on_simulator` on the simulator, where the kernels run on the CPU.
pub fn sized(gpu: Option<&Gpu>, full: usize, on_simulator: usize) -> usize {
    if simulated(gpu) { on_simulator } else { full }
}

/// `work`'s result and the GPU time of what it queued on [`Gpu::stream`], in
/// ms (CUDA events); on the simulator `work` runs untimed (`None`).
pub fn gpu_time<T>(gpu: &Gpu, work: impl FnOnce() -> Result<T>) -> Result<(T, Option<f64>)> {
    if gpu.is_simulated() {
        return Ok((work()?, None));
    }
    let (value, ms) = crate::timing::GpuTimer::time(gpu.stream(), work)?;
    Ok((value, Some(f64::from(ms))))
}

/// The check of a demo about the hardware itself (`what`), which the
/// simulator does not run.
pub fn hardware_only(what: &str) -> Check {
    Check::Skipped(format!("hardware-only ({what}): not run on the simulator"))
}

/// The CUDA GPU for a demo about the hardware itself (`what`), or the check
/// its rows get instead: [`no_gpu`], or [`hardware_only`] on the simulator.
pub fn hardware_gpu<'g>(gpu: Option<&'g Gpu>, what: &str) -> std::result::Result<&'g Gpu, Check> {
    match gpu {
        None => Err(no_gpu()),
        Some(gpu) if gpu.is_simulated() => Err(hardware_only(what)),
        Some(gpu) => Ok(gpu),
    }
}

/// Milliseconds a closure takes on the CPU, with its result.
pub fn cpu_time<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = std::time::Instant::now();
    let v = f();
    (v, t.elapsed().as_secs_f64() * 1e3)
}

/// `Check::Pass("exact")` when `got` equals `expected` element for element,
/// else a `Check::Fail` naming the shapes or the first differing element
/// (in logical, row-major order).
pub fn exact_check<T, S1, S2, D>(got: &ArrayBase<S1, D>, expected: &ArrayBase<S2, D>) -> Check
where
    T: PartialEq + std::fmt::Debug,
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
    D: Dimension,
{
    if got.shape() != expected.shape() {
        return Check::Fail(format!("shape {:?} vs {:?}", got.shape(), expected.shape()));
    }
    match got
        .iter()
        .zip(expected.iter())
        .enumerate()
        .find(|(_, (g, e))| g != e)
    {
        None => Check::Pass("exact".into()),
        Some((i, (g, e))) => Check::Fail(format!("element {i}: {g:?} vs {e:?}")),
    }
}

/// `Check::Skipped` for a run without a GPU.
pub fn no_gpu() -> Check {
    Check::Skipped("no GPU".into())
}

/// Runs every family's demos in order (`cuda-kernels demo`), with progress
/// on stderr.
pub fn run_all(gpu: Option<&Gpu>, out_dir: &Path, report: &mut Report) -> Result<()> {
    type Family = fn(Option<&Gpu>, &Path, &mut Report) -> Result<()>;
    let families: [(&str, Family); 5] = [
        (
            "foundation: multiply, vector_sum_i32, hello_kernel, launch overhead",
            foundation::run_all,
        ),
        (
            "matrices: doubles_matrix, matmul, elementwise, vector_sum_repeat, gufunc",
            matrices::run_all,
        ),
        ("reduce: generic reductions", reduce::run_all),
        ("mandelbrot: four launch paths", mandelbrot::run_all),
        (
            "streams: streams, events, contexts, Game of Life",
            streams::run_all,
        ),
    ];
    for (i, (name, run)) in families.iter().enumerate() {
        eprintln!("[{}/{}] {name} …", i + 1, families.len());
        let rows = report.rows.len();
        let (result, ms) = cpu_time(|| run(gpu, out_dir, report));
        result?;
        eprintln!(
            "[{}/{}] done in {:.1} s ({} results)",
            i + 1,
            families.len(),
            ms / 1e3,
            report.rows.len() - rows
        );
    }
    Ok(())
}

/// Runs every family's benchmarks (`cuda-kernels bench`). Each family's
/// `bench` pushes [`BenchRecord`]s, each with the check of what it timed;
/// a failed check does not stop the run (the other rows are still
/// measured), [`bench_failures`] lists them afterwards. As a last guard,
/// no failed record keeps a ratio.
pub fn bench_all(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    type Family = fn(&Gpu, &mut Vec<BenchRecord>) -> Result<()>;
    let families: [(&str, Family); 11] = [
        ("foundation", foundation::bench),
        ("gemm", gemm::bench),
        ("bandwidth", bandwidth::bench),
        ("matrices", matrices::bench),
        ("reduce", reduce::bench),
        ("collectives", collectives::bench),
        ("sort", sort::bench),
        ("histogram", histogram::bench),
        ("mandelbrot", mandelbrot::bench),
        ("streams", streams::bench),
        ("graphs", graphs::bench),
    ];
    for (name, bench) in families {
        if !(bench_selected(name) || (name == "streams" && bench_selected("life"))) {
            continue;
        }
        let (result, ms) = cpu_time(|| bench(gpu, records));
        result?;
        eprintln!("bench {name}: done in {:.1} s", ms / 1e3);
    }
    for r in records.iter_mut().filter(|r| r.failed()) {
        r.ratio = None;
    }
    Ok(())
}

/// The environment variable that limits `bench` to some parts, as a
/// comma-separated list of `foundation`, `gemm`, `bandwidth`, `matrices`, `reduce`, `collectives`, `sort`,
/// `histogram`, `mandelbrot`, `streams`, `life`, `graphs` (for tuning runs; unset: all).
pub const BENCH_ONLY_ENV: &str = "CUDA_KERNELS_BENCH_ONLY";

/// Whether [`BENCH_ONLY_ENV`] selects the bench part `name`.
pub fn bench_selected(name: &str) -> bool {
    std::env::var(BENCH_ONLY_ENV).map_or(true, |only| only.split(',').any(|p| p.trim() == name))
}
