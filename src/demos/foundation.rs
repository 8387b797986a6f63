//! The foundation demos: K1 `multiply`, K6 `vector_sum_i32`, K17
//! `hello_kernel`, K19 launch overhead.
use std::path::Path;

use ndarray::Array1;

use super::{BenchRecord, Check, Report, Row, cpu_time, exact_check, no_gpu};
use crate::bench::gb_per_s;
use crate::multiply::{MemoryMode, multiply_cpu, vector_sum_i32_cpu};
use crate::timing::GpuTimer;
use crate::util::Rng;
use crate::{Gpu, Result};

/// The foundation subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// K1: c = a * b on f32 (seed 000), device buffers and unified memory.
    Multiply {
        /// Elements (default 2^20, the seed's).
        #[arg(long, default_value_t = 1 << 20)]
        n: usize,
    },
    /// K6: res = a + b on 100 random i32 in 0..99 (seed 001, PyOpenCL).
    VectorSum {
        /// Elements.
        #[arg(long, default_value_t = 100)]
        n: usize,
    },
    /// K17: "Hello World From GPU!" from <<<blocks, threads>>> (seed 004).
    Hello {
        /// Blocks.
        #[arg(long, default_value_t = 1)]
        blocks: u32,
        /// Threads per block.
        #[arg(long, default_value_t = 3)]
        threads: u32,
        /// Print each thread's indices (formatted device printf).
        #[arg(long)]
        indexed: bool,
    },
    /// K19: empty-kernel launch rate, synchronous and pipelined.
    Overhead {
        /// Launches per measurement.
        #[arg(long, default_value_t = 20_000)]
        launches: usize,
    },
}

/// Runs one foundation subcommand.
pub fn run(cmd: &Command, gpu: Option<&Gpu>, report: &mut Report) -> Result<()> {
    match *cmd {
        Command::Multiply { n } => multiply(gpu, n, report),
        Command::VectorSum { n } => vector_sum(gpu, n, report),
        Command::Hello {
            blocks,
            threads,
            indexed,
        } => hello(gpu, blocks, threads, indexed, report),
        Command::Overhead { launches } => overhead(gpu, launches, report),
    }
}

/// The foundation part of `cuda-kernels demo`.
pub fn run_all(gpu: Option<&Gpu>, _out_dir: &Path, report: &mut Report) -> Result<()> {
    device_query(gpu, report)?;
    multiply(gpu, 1 << 20, report)?;
    vector_sum(gpu, 100, report)?;
    hello(gpu, 1, 3, false, report)?;
    overhead(gpu, 20_000, report)
}

/// K2: the device query, as `cuda-kernels info` prints it.
fn device_query(gpu: Option<&Gpu>, report: &mut Report) -> Result<()> {
    if gpu.is_none() {
        report.push(Row::new("device query", "-", no_gpu()));
        return Ok(());
    }
    let (driver, devices) = crate::device_info::query_devices()?;
    println!("CUDA driver {driver}, {} device(s)", devices.len());
    for d in &devices {
        println!("{d}");
    }
    let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
    report.push(Row::new(
        "device query",
        format!("{} device(s)", devices.len()),
        Check::Pass(names.join(", ")),
    ));
    Ok(())
}

/// The seed's inputs: `rand() % 10` as f32.
pub fn multiply_inputs(n: usize, seed: u64) -> (Array1<f32>, Array1<f32>) {
    let mut rng = Rng::new(seed);
    let a = (0..n).map(|_| rng.below(10) as f32).collect();
    let b = (0..n).map(|_| rng.below(10) as f32).collect();
    (a, b)
}

fn multiply(gpu: Option<&Gpu>, n: usize, report: &mut Report) -> Result<()> {
    let (a, b) = multiply_inputs(n, 0);
    let (expected, cpu_ms) = cpu_time(|| multiply_cpu(a.view(), b.view()));
    let expected = expected?;
    let size = size_label(n);
    let Some(gpu) = gpu else {
        let mut row = Row::new("multiply (CPU only)", size, no_gpu());
        row.cpu_ms = Some(cpu_ms);
        report.push(row);
        return Ok(());
    };
    for (label, mode) in [
        ("multiply", MemoryMode::Device),
        ("multiply (unified memory)", MemoryMode::Unified),
    ] {
        let (c, t) = gpu.multiply_timed(a.view(), b.view(), mode)?;
        let check = exact_check(&c, &expected);
        report.push(Row {
            kernel: label.into(),
            size: size.clone(),
            gpu_ms: Some(t.kernel_ms as f64),
            cpu_ms: Some(cpu_ms),
            throughput: Some(format!("{:.0} GB/s", gb_per_s(12 * n, t.kernel_ms))),
            check: check.clone(),
        });
        report.push(Row {
            kernel: format!("{label} + transfers"),
            size: size.clone(),
            gpu_ms: Some(t.with_transfers_ms as f64),
            cpu_ms: Some(cpu_ms),
            throughput: None,
            check,
        });
    }
    Ok(())
}

fn vector_sum(gpu: Option<&Gpu>, n: usize, report: &mut Report) -> Result<()> {
    let mut rng = Rng::new(6);
    let a: Array1<i32> = (0..n).map(|_| rng.below(100) as i32).collect();
    let b: Array1<i32> = (0..n).map(|_| rng.below(100) as i32).collect();
    let (expected, cpu_ms) = cpu_time(|| vector_sum_i32_cpu(a.view(), b.view()));
    let expected = expected?;
    let mut row = Row::new("vector_sum_i32", size_label(n), no_gpu());
    row.cpu_ms = Some(cpu_ms);
    if let Some(gpu) = gpu {
        let (res, ms) = GpuTimer::time(gpu.stream(), || gpu.vector_sum_i32(a.view(), b.view()))?;
        row.gpu_ms = Some(ms as f64);
        row.check = exact_check(&res, &expected);
        if n <= 100 {
            println!("a   = {a}\nb   = {b}\na+b = {res}");
        }
    }
    report.push(row);
    Ok(())
}

fn hello(
    gpu: Option<&Gpu>,
    blocks: u32,
    threads: u32,
    indexed: bool,
    report: &mut Report,
) -> Result<()> {
    let size = format!("<<<{blocks}, {threads}>>>");
    let Some(gpu) = gpu else {
        report.push(Row::new("hello_kernel", size, no_gpu()));
        return Ok(());
    };
    use std::io::Write;
    let _ = std::io::stdout().flush();
    gpu.hello(blocks, threads, indexed)?;
    println!("kernel ran: hello_kernel<<<{blocks}, {threads}>>> finished");
    report.push(Row::new(
        "hello_kernel",
        size,
        Check::Pass(format!("{} lines printed", blocks * threads)),
    ));
    Ok(())
}

fn overhead(gpu: Option<&Gpu>, launches: usize, report: &mut Report) -> Result<()> {
    let Some(gpu) = gpu else {
        report.push(Row::new(
            "empty_kernel launch rate",
            format!("{launches} launches"),
            no_gpu(),
        ));
        return Ok(());
    };
    let rates = gpu.launch_overhead(launches)?;
    for (label, rate) in [
        ("synchronous", rates.synchronous_per_s),
        ("pipelined", rates.pipelined_per_s),
    ] {
        let mut row = Row::new(
            format!("empty_kernel ({label})"),
            format!("{launches} launches"),
            Check::Pass("ran".into()),
        );
        row.gpu_ms = Some(1e3 / rate);
        row.throughput = Some(format!("{:.0} launches/s", rate));
        report.push(row);
    }
    Ok(())
}

/// The foundation part of `cuda-kernels bench`: `multiply` at 2^26 against a
/// device-to-device copy of the same bytes, and the launch rates.
pub fn bench(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    gpu.bind()?;
    let rates = gpu.launch_overhead(20_000)?;
    for (label, rate) in [
        ("synchronous", rates.synchronous_per_s),
        ("pipelined", rates.pipelined_per_s),
    ] {
        records.push(BenchRecord {
            kernel: format!("empty_kernel ({label})"),
            size: "20000 launches".into(),
            median_ms: 1e3 / rate,
            metric: "launches/s".into(),
            value: rate,
            reference: None,
            ratio: None,
        });
    }
    c_abi_call_overhead(records);
    Ok(())
}

/// "2^20" for powers of two, the number otherwise.
pub fn size_label(n: usize) -> String {
    if n.is_power_of_two() && n >= 1024 {
        format!("2^{}", n.trailing_zeros())
    } else {
        n.to_string()
    }
}

/// K19, the other half of seed 000's cgo benchmark: one call across the C ABI
/// (`cuda_kernels_status_string` through a `dlsym`'d pointer into
/// `libcuda_kernels_capi.so`) against the same work as a direct Rust call.
/// Skipped, with a note, when the library is not built.
fn c_abi_call_overhead(records: &mut Vec<BenchRecord>) {
    use crate::mandelbrot::c_abi::CAbiLibrary;
    let Some(lib) = CAbiLibrary::find().and_then(|p| CAbiLibrary::open(p).ok()) else {
        eprintln!("note: libcuda_kernels_capi.so not found: C ABI call overhead skipped");
        return;
    };
    let calls = 10_000_000;
    let (through_c, direct) = lib.call_overhead_ns(calls);
    for (kernel, ns, reference) in [
        (
            "C ABI call (dlsym'd pointer)",
            through_c,
            Some("direct Rust call"),
        ),
        ("direct Rust call", direct, None),
    ] {
        records.push(BenchRecord {
            kernel: kernel.into(),
            size: format!("{calls} calls"),
            median_ms: ns * 1e-6,
            metric: "ns/call".into(),
            value: ns,
            reference: reference.map(Into::into),
            ratio: reference.map(|_| through_c / direct.max(1e-3)),
        });
    }
}
