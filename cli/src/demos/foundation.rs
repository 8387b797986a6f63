//! The foundation demos: `multiply`, `vector_sum_i32`, `hello_kernel`, and
//! the launch overhead.
use std::path::Path;

use ndarray::Array1;

use super::{
    BenchRecord, Check, Report, Row, cpu_time, exact_check, gpu_time, hardware_gpu, hardware_only,
    no_gpu, sized,
};
use crate::bench::gb_per_s;
use crate::multiply::{MemoryMode, multiply_cpu, multiply_inputs, vector_sum_i32_cpu};
use crate::util::Rng;
use crate::{Gpu, Result};
use cuda_kernels::prelude::*;

/// The foundation subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// c = a * b on f32, device buffers and unified memory.
    Multiply {
        /// Elements (default 2^20, the seed's).
        #[arg(long, default_value_t = 1 << 20)]
        n: usize,
    },
    /// res = a + b on 100 random i32 in 0..99 (PyOpenCL's vector sum).
    VectorSum {
        /// Elements.
        #[arg(long, default_value_t = 100)]
        n: usize,
    },
    /// "Hello World From GPU!" from <<<blocks, threads>>>.
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
    /// Empty-kernel launch rate, synchronous and pipelined.
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
    multiply(gpu, sized(gpu, 1 << 20, (1 << 18) + 3), report)?;
    vector_sum(gpu, 100, report)?;
    hello(gpu, 1, 3, false, report)?;
    overhead(gpu, 20_000, report)
}

/// The device query, as `cuda-kernels info` prints it.
fn device_query(gpu: Option<&Gpu>, report: &mut Report) -> Result<()> {
    if let Err(check) = hardware_gpu(gpu, "the CUDA devices") {
        report.push(Row::new("device query", "-", check));
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
    if gpu.is_simulated() {
        let c = gpu.multiply(a.view(), b.view())?;
        let mut row = Row::new("multiply", size.clone(), exact_check(&c, &expected));
        row.cpu_ms = Some(cpu_ms);
        report.push(row);
        let check = hardware_only("unified memory");
        report.push(Row::new("multiply (unified memory)", size, check));
        return Ok(());
    }
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
        let (res, ms) = gpu_time(gpu, || gpu.vector_sum_i32(a.view(), b.view()))?;
        row.gpu_ms = ms;
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
    let ((), printed) = capture_stdout(|| gpu.hello(blocks, threads, indexed))?;
    print!("{printed}");
    println!("kernel ran: hello_kernel<<<{blocks}, {threads}>>> finished");
    let want = blocks as usize * threads as usize;
    let lines = printed
        .lines()
        .filter(|l| {
            if indexed {
                l.starts_with("Hello from thread ")
            } else {
                *l == "Hello World From GPU!"
            }
        })
        .count();
    let check = if lines == want {
        Check::Pass(format!("{lines} lines printed, counted"))
    } else {
        Check::Fail(format!("{lines} hello lines printed, {want} expected"))
    };
    report.push(Row::new("hello_kernel", size, check));
    Ok(())
}

/// Runs `f` with this process's standard output (file descriptor 1, where
/// the driver writes device `printf` and the simulator `print!`s) going to
/// a temporary file, and returns `f`'s result and what it wrote.
fn capture_stdout<R>(f: impl FnOnce() -> Result<R>) -> Result<(R, String)> {
    use std::io::{Read, Seek, Write};
    use std::os::fd::AsRawFd;
    let io = |what: &'static str| {
        move |e: std::io::Error| crate::Error::Io {
            what: format!("capturing the hello lines: {what}"),
            source: e,
        }
    };
    let mut file = tempfile_in_tmp().map_err(io("a temporary file"))?;
    let _ = std::io::stdout().flush();
    // SAFETY: dup of the process's fd 1, checked below.
    let saved = unsafe { libc::dup(1) };
    if saved < 0 {
        return Err(io("dup(1)")(std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors are open; fd 1 now names the file.
    unsafe { libc::dup2(file.as_raw_fd(), 1) };
    let result = f();
    let _ = std::io::stdout().flush();
    // SAFETY: `saved` is the original fd 1, restored, then closed once.
    unsafe {
        libc::dup2(saved, 1);
        libc::close(saved);
    }
    let result = result?;
    let mut text = String::new();
    file.rewind().map_err(io("rewind"))?;
    file.read_to_string(&mut text).map_err(io("read"))?;
    Ok((result, text))
}

/// A new file in the temporary folder, already unlinked.
fn tempfile_in_tmp() -> std::io::Result<std::fs::File> {
    let path = std::env::temp_dir().join(format!(
        "cuda-kernels-hello-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}

fn overhead(gpu: Option<&Gpu>, launches: usize, report: &mut Report) -> Result<()> {
    let size = format!("{launches} launches");
    let gpu = match hardware_gpu(gpu, "launch timings") {
        Ok(gpu) => gpu,
        Err(check) => {
            report.push(Row::new("empty_kernel launch rate", size, check));
            return Ok(());
        }
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
        records.push(BenchRecord::new(
            format!("empty_kernel ({label})"),
            "20000 launches",
            1e3 / rate,
            "launches/s",
            rate,
            Check::Skipped("no output: a launch rate".into()),
        ));
    }
    let t = gpu.typed_launch_overhead(20_000, 5)?;
    for (label, rate) in [
        ("typed Gpu::launch", t.typed_per_s),
        ("bare cuLaunchKernel", t.bare_per_s),
    ] {
        records.push(BenchRecord::new(
            format!("empty_kernel pipelined, {label}"),
            "20000 launches, best of 5 alternating rounds",
            1e3 / rate,
            "launches/s",
            rate,
            Check::Skipped(format!(
                "typed launch vs bare cuLaunchKernel: typed costs {:+.1}% (target ≤ 5%)",
                100.0 * t.overhead()
            )),
        ));
    }
    c_abi_call_overhead(records);
    cold_start(gpu, records)
}

/// `cuda-kernels cold-start` (hidden): opens the GPU and prints one line,
/// the milliseconds `crate::gpu()` took and the image it loaded, for
/// the bench's cold-start rows to read.
pub fn cold_start_probe() -> Result<()> {
    let (gpu, ms) = cpu_time(crate::gpu);
    println!("{ms:.3}\t{}", gpu?.image());
    Ok(())
}

/// Issue 14: the first `Gpu` of a new process with an empty driver JIT cache
/// (`CUDA_CACHE_PATH` a fresh folder), loading the embedded cubin and, with
/// `CUDA_KERNELS_FORCE_PTX=1`, JIT-compiling the PTX; the median of 3 runs
/// of `cuda-kernels cold-start` each. Fails when the probe fails, when the
/// forced run did not load the PTX, or when the other run did not load the
/// image this process loaded.
fn cold_start(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    use crate::image::FORCE_PTX_VAR;
    let io = |what: String| {
        move |source| crate::Error::Io {
            what: format!("cold start: {what}"),
            source,
        }
    };
    let exe = std::env::current_exe().map_err(io("finding this program".into()))?;
    let mut medians = Vec::new();
    for force_ptx in [false, true] {
        let mut times = Vec::new();
        let mut image = String::new();
        for run in 0..3 {
            let cache = std::env::temp_dir().join(format!(
                "cuda-kernels-cold-{}-{force_ptx}-{run}",
                std::process::id()
            ));
            std::fs::create_dir_all(&cache).map_err(io(format!("creating {}", cache.display())))?;
            let mut cmd = std::process::Command::new(&exe);
            cmd.arg("cold-start").env("CUDA_CACHE_PATH", &cache);
            if force_ptx {
                cmd.env(FORCE_PTX_VAR, "1");
            } else {
                cmd.env_remove(FORCE_PTX_VAR);
            }
            let out = cmd.output();
            let _ = std::fs::remove_dir_all(&cache);
            let out = out.map_err(io(format!("running {}", exe.display())))?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            let parsed = stdout
                .lines()
                .last()
                .and_then(|l| l.split_once('\t'))
                .and_then(|(ms, img)| Some((ms.parse::<f64>().ok()?, img.to_string())));
            let Some((ms, img)) = parsed.filter(|_| out.status.success()) else {
                return Err(io("the probe failed".into())(std::io::Error::other(
                    format!(
                        "{:?}: {stdout}{}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr)
                    ),
                )));
            };
            times.push(ms);
            image = img;
        }
        let expected = if force_ptx {
            "PTX".to_string()
        } else {
            gpu.image().to_string()
        };
        if !image.starts_with(&expected) {
            return Err(io("wrong image".into())(std::io::Error::other(format!(
                "the probe loaded {image}, expected {expected}"
            ))));
        }
        times.sort_by(f64::total_cmp);
        medians.push((times[times.len() / 2], image));
    }
    let jit_ms = medians[1].0;
    for (ms, image) in medians {
        let jit = image.starts_with("PTX");
        let record = BenchRecord::new(
            format!("first Gpu ({})", image.split(" (").next().unwrap_or("")),
            "empty JIT cache",
            ms,
            "ms",
            ms,
            Check::Pass(format!("the probe loaded {image}")),
        );
        records.push(if jit {
            record
        } else {
            record.against("PTX JIT start", ms / jit_ms)
        });
    }
    Ok(())
}

/// The check of every device-copy reference row ([`device_copy_gbps`](crate::bench::device_copy_gbps)
/// fails the run when a copy is wrong).
pub const COPY_CHECKED: &str = "every word copied back equals the source";

/// "2^20" for powers of two, the number otherwise.
pub fn size_label(n: usize) -> String {
    if n.is_power_of_two() && n >= 1024 {
        format!("2^{}", n.trailing_zeros())
    } else {
        n.to_string()
    }
}

/// The other half of the cgo benchmark: one call across the C ABI
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
    let check = match lib.first_status_string_mismatch() {
        None => Check::Pass("every status string equals the Rust one".into()),
        Some(code) => Check::Fail(format!("cuda_kernels_status_string({code}) differs")),
    };
    records.push(
        BenchRecord::new(
            "C ABI call (dlsym'd pointer)",
            format!("{calls} calls"),
            through_c * 1e-6,
            "ns/call",
            through_c,
            check,
        )
        .against("direct Rust call", through_c / direct.max(1e-3)),
    );
    records.push(BenchRecord::new(
        "direct Rust call",
        format!("{calls} calls"),
        direct * 1e-6,
        "ns/call",
        direct,
        Check::Skipped("the reference itself (status::describe)".into()),
    ));
}
