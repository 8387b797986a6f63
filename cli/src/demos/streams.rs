//! The streams demos: `mult_ker`, 200 arrays on the default stream versus
//! one stream each, events, contexts and host threads, Conway's Game of Life
//! on four concurrent streams (an animated GIF).
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ndarray::{Array1, Array2, ArrayView2};

use super::foundation::size_label;
use super::{
    BenchRecord, Check, Report, Row, cpu_time, exact_check, gpu_time, hardware_gpu, no_gpu, sized,
};
use crate::async_mem::Lane;
use crate::bench::{device_copy_gbps, gb_per_s};
use crate::contexts::{manual_context_roundtrip, threads_mult_ker};
use crate::life::{LifeKernel, LifeSims, life_cpu, life_step_cpu, random_lattice};
use crate::streams::{
    BatchTiming, IssueOrder, SEED_BLOCK, SEED_GRID, SerialBatch, StreamBatch,
    check_mult_ker_output, first_difference, hardware_queues, mult_ker_cpu, randn_arrays,
};
use crate::timing::{GpuTimer, median};
use crate::util::Rng;
use crate::{Error, Gpu, Result};
use cuda_kernels::prelude::*;

/// The streams subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// mult_ker (50 × `x *= 2; x /= 2`) on randn data.
    MultKer {
        /// Elements.
        #[arg(long, default_value_t = 1 << 20)]
        len: usize,
        /// Blocks (the seed's 1).
        #[arg(long, default_value_t = SEED_GRID)]
        grid: u32,
        /// Threads per block (the seed's 64).
        #[arg(long, default_value_t = SEED_BLOCK)]
        block: u32,
    },
    /// Arrays on the default stream, then one stream each;
    /// totals, speedup, per-stream kernel durations.
    Streams {
        /// Arrays (the seed's 200).
        #[arg(long, default_value_t = 200)]
        arrays: usize,
        /// Elements per array (the seed's 1024²).
        #[arg(long, default_value_t = 1 << 20)]
        len: usize,
        /// Queue lane by lane (copy in, kernel, copy out) instead of the
        /// seed's three loops (all copies in, all kernels, all copies out).
        #[arg(long)]
        depth_first: bool,
    },
    /// One mult_ker<<<1, 64>>> between two events; query, sync, time.
    Events {
        /// Elements (the seed's 100·1024²).
        #[arg(long, default_value_t = 100 << 20)]
        len: usize,
    },
    /// A context made by hand; host threads with a context each.
    Contexts {
        /// Host threads (the seed's 10).
        #[arg(long, default_value_t = 10)]
        threads: usize,
        /// Elements per thread's array (the seed's 1024²).
        #[arg(long, default_value_t = 1 << 20)]
        len: usize,
    },
    /// Game of Life simulations in concurrent streams, as an animated GIF.
    Life {
        /// Lattice size N (N×N cells).
        #[arg(long, default_value_t = 128)]
        n: usize,
        /// Simulations, one stream each (the seed's 4).
        #[arg(long, default_value_t = 4)]
        sims: usize,
        /// Frames (steps).
        #[arg(long, default_value_t = 200)]
        steps: usize,
        /// Pixels per cell in the GIF.
        #[arg(long, default_value_t = 1)]
        scale: usize,
        /// The GIF to write.
        #[arg(long, default_value = "life.gif")]
        out: PathBuf,
        /// The step kernel (both give the same lattices).
        #[arg(long, value_enum, default_value_t = LifeKernelName::Fast)]
        kernel: LifeKernelName,
    },
}

/// A Life step kernel, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LifeKernelName {
    /// `conway_fast`: four cells of a row by a strip of rows per thread.
    Fast,
    /// `conway_ker`: the seed's one thread per cell.
    Seed,
}

impl From<LifeKernelName> for LifeKernel {
    fn from(k: LifeKernelName) -> Self {
        match k {
            LifeKernelName::Fast => LifeKernel::Fast,
            LifeKernelName::Seed => LifeKernel::Seed,
        }
    }
}

/// Runs one streams subcommand.
pub fn run(cmd: &Command, gpu: Option<&Gpu>, report: &mut Report) -> Result<()> {
    match *cmd {
        Command::MultKer { len, grid, block } => mult_ker(gpu, len, grid, block, report),
        Command::Streams {
            arrays,
            len,
            depth_first,
        } => {
            let order = if depth_first {
                IssueOrder::DepthFirst
            } else {
                IssueOrder::BreadthFirst
            };
            streams(gpu, arrays, len, order, report)
        }
        Command::Events { len } => events(gpu, len, report),
        Command::Contexts { threads, len } => contexts(gpu, threads, len, report),
        Command::Life {
            n,
            sims,
            steps,
            scale,
            ref out,
            kernel,
        } => life(gpu, n, sims, steps, scale, out, kernel.into(), report),
    }
}

/// The streams part of `cuda-kernels demo`: every demo at the seed's sizes,
/// the GIF into `out_dir/life.gif`.
pub fn run_all(gpu: Option<&Gpu>, out_dir: &Path, report: &mut Report) -> Result<()> {
    let n = sized(gpu, 1 << 20, 1 << 16);
    mult_ker(gpu, n, SEED_GRID, SEED_BLOCK, report)?;
    mult_ker(gpu, n + 3, SEED_GRID, SEED_BLOCK, report)?;
    streams(gpu, 200, 1 << 20, IssueOrder::BreadthFirst, report)?;
    events(gpu, 100 << 20, report)?;
    contexts(gpu, 10, 1 << 20, report)?;
    life(
        gpu,
        128,
        4,
        sized(gpu, 200, 100),
        1,
        &out_dir.join("life.gif"),
        LifeKernel::default(),
        report,
    )
}

/// The verdict on a first differing element, if any (the inputs of
/// `randn_arrays` hold values that `mult_ker` turns into ±∞, in every array
/// and at its end, so that output == input is a failure).
fn exact(first_difference: Option<usize>, what: &str) -> Check {
    match first_difference {
        None => Check::Pass(format!("output == {what}, bit for bit")),
        Some(i) => Check::Fail(format!("element {i} differs from {what}")),
    }
}

fn mult_ker(
    gpu: Option<&Gpu>,
    len: usize,
    grid: u32,
    block: u32,
    report: &mut Report,
) -> Result<()> {
    let data: Array1<f32> = randn_arrays(1, len, 12).remove(0).into();
    let (expected, cpu_ms) = cpu_time(|| mult_ker_cpu(data.view()));
    let name = format!("mult_ker <<<{grid}, {block}>>> + copies");
    let mut row = Row::new(name, size_label(len), no_gpu());
    row.cpu_ms = Some(cpu_ms);
    if let Some(gpu) = gpu {
        gpu.bind()?;
        let (out, ms) = gpu_time(gpu, || gpu.mult_ker(data.view(), grid, block))?;
        row.gpu_ms = ms;
        row.check = exact(
            first_difference(
                out.as_slice().unwrap_or(&[]),
                expected.as_slice().unwrap_or(&[]),
            ),
            "the CPU reference",
        );
    }
    report.push(row);
    Ok(())
}

fn streams(
    gpu: Option<&Gpu>,
    arrays: usize,
    len: usize,
    order: IssueOrder,
    report: &mut Report,
) -> Result<()> {
    let size = format!("{arrays} × {}", size_label(len));
    let gpu = match hardware_gpu(gpu, "streams' concurrency") {
        Ok(gpu) => gpu,
        Err(check) => {
            for name in ["mult_ker, default stream", "mult_ker, one stream per array"] {
                report.push(Row::new(name, size.clone(), check.clone()));
            }
            return Ok(());
        }
    };
    let inputs = randn_arrays(arrays, len, 13);
    let serial = SerialBatch::new(gpu, &inputs)?.run()?;
    println!(
        "default stream: total time {:.3} s ({:.1} ms on the GPU's clock)",
        serial.wall_ms / 1e3,
        serial.gpu_ms
    );
    let streamed = StreamBatch::new(gpu, &inputs)?.run_with(order)?;
    let speedup = serial.wall_ms / streamed.wall_ms;
    println!(
        "{arrays} streams: total time {:.3} s ({:.1} ms on the GPU's clock): {speedup:.1}× faster",
        streamed.wall_ms / 1e3,
        streamed.gpu_ms
    );
    let (mean, std) = streamed.kernel_mean_std().unwrap_or((f64::NAN, f64::NAN));
    println!("Mean kernel duration (milliseconds): {mean:.3}");
    println!("Mean kernel standard deviation (milliseconds): {std:.3}");
    if let Some((a, b)) = streamed.kernel_window_ms {
        println!(
            "kernels ({order:?}): first start event at {a:.1} ms, last end event at {b:.1} ms"
        );
    }
    let busy: f64 = streamed.kernel_ms.iter().map(|&k| k as f64).sum();
    println!(
        "overlap: {busy:.1} ms of kernel events in a {:.1} ms span ({:.1} at once on average; \
         in breadth-first order a kernel's events also count its wait for a hardware queue)",
        streamed.gpu_ms,
        busy / streamed.gpu_ms
    );
    let queues = hardware_queues();
    println!(
        "hardware queues: {queues} (CUDA_DEVICE_MAX_CONNECTIONS, default 8, at most 32): \
         at most {queues} of these one-block kernels run at once"
    );
    let check = |t: &BatchTiming| match t.first_mismatch {
        None => Check::Pass("every output == mult_ker's result on its input".into()),
        Some((a, e)) => Check::Fail(format!("array {a}, element {e} differs")),
    };
    let mut row = Row::new("mult_ker, default stream", size.clone(), check(&serial));
    row.gpu_ms = Some(serial.wall_ms);
    report.push(row);
    let mut row = Row::new(
        "mult_ker, one stream per array",
        size.clone(),
        check(&streamed),
    );
    row.gpu_ms = Some(streamed.wall_ms);
    row.throughput = Some(format!("{speedup:.1}× the default stream"));
    report.push(row);
    let mut row = Row::new(
        "mult_ker kernel duration (events)",
        format!("{arrays} streams"),
        check(&streamed),
    );
    row.gpu_ms = Some(mean);
    row.throughput = Some(format!("σ = {std:.3} ms"));
    report.push(row);
    Ok(())
}

fn events(gpu: Option<&Gpu>, len: usize, report: &mut Report) -> Result<()> {
    let size = size_label(len);
    let gpu = match hardware_gpu(gpu, "events") {
        Ok(gpu) => gpu,
        Err(check) => {
            report.push(Row::new("mult_ker <<<1, 64>>> between events", size, check));
            return Ok(());
        }
    };
    let data: Array1<f32> = randn_arrays(1, len, 14).remove(0).into();
    let (out, ev) = gpu.mult_ker_events(data.view())?;
    println!("Has the kernel started yet? {}", ev.start_done_after_launch);
    println!("Has the kernel ended yet? {}", ev.end_done_after_launch);
    println!("(end_event.synchronize())");
    println!("Has the kernel started yet? {}", ev.start_done_after_sync);
    println!("Has the kernel ended yet? {}", ev.end_done_after_sync);
    println!("Kernel execution time in milliseconds: {:.3}", ev.kernel_ms);
    let mut check = exact(
        check_mult_ker_output(
            data.as_slice().unwrap_or(&[]),
            out.as_slice().unwrap_or(&[]),
        ),
        "mult_ker's result on the input",
    );
    if !(ev.start_done_after_sync && ev.end_done_after_sync) {
        check = Check::Fail("an event is not complete after end.synchronize()".into());
    }
    let mut row = Row::new("mult_ker <<<1, 64>>> between events", size, check);
    row.gpu_ms = Some(ev.kernel_ms as f64);
    row.throughput = Some(format!(
        "queried right after launch: start {}, end {}",
        ev.start_done_after_launch, ev.end_done_after_launch
    ));
    report.push(row);
    Ok(())
}

fn contexts(gpu: Option<&Gpu>, threads: usize, len: usize, report: &mut Report) -> Result<()> {
    let size = format!("{threads} threads × {}", size_label(len));
    if let Err(check) = hardware_gpu(gpu, "contexts") {
        report.push(Row::new(
            "manual context: [1, 2, 3] round trip",
            "3",
            check.clone(),
        ));
        report.push(Row::new(
            "mult_ker, one context per host thread",
            size,
            check,
        ));
        return Ok(());
    }
    let sent = [1.0f32, 2.0, 3.0];
    let back = manual_context_roundtrip(&sent)?;
    println!("manual context: sent {sent:?}, got back {back:?}");
    report.push(Row::new(
        "manual context: [1, 2, 3] round trip",
        "3",
        exact(first_difference(&back, &sent), "what was sent"),
    ));
    let inputs = randn_arrays(threads, len, 15);
    let t = Instant::now();
    let outputs = threads_mult_ker(crate::IMAGES, &inputs)?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let check = match outputs
        .iter()
        .zip(&inputs)
        .position(|(o, i)| check_mult_ker_output(i, o).is_some())
    {
        None => Check::Pass(format!(
            "{threads} threads joined, every output == mult_ker's result on its input"
        )),
        Some(k) => Check::Fail(format!("thread {k}'s output differs")),
    };
    let mut row = Row::new("mult_ker, one context per host thread", size, check);
    row.gpu_ms = Some(ms);
    row.throughput = Some("wall time incl. context creation and module JIT".into());
    report.push(row);
    Ok(())
}

/// Writes the animated GIF: the simulations side by side, 2-pixel gaps,
/// viridis' two ends for dead and alive (matplotlib's `imshow` default).
struct LifeGif {
    encoder: gif::Encoder<BufWriter<File>>,
    width: u16,
    height: u16,
    scale: usize,
    path: PathBuf,
}

const GAP: usize = 2;

fn gif_error(path: &Path, e: gif::EncodingError) -> Error {
    Error::Io {
        what: format!("writing {}", path.display()),
        source: std::io::Error::other(e),
    }
}

impl LifeGif {
    fn create(path: &Path, n: usize, sims: usize, scale: usize) -> Result<Self> {
        const K: &str = "life GIF";
        if scale == 0 {
            return Err(Error::invalid(K, "scale 0"));
        }
        let too_big = || Error::invalid(K, "the animation is over 65535 pixels wide or high");
        let width = sims
            .checked_mul(n * scale)
            .and_then(|w| w.checked_add(GAP * sims.saturating_sub(1)))
            .and_then(|w| u16::try_from(w).ok())
            .ok_or_else(too_big)?;
        let height = n
            .checked_mul(scale)
            .and_then(|h| u16::try_from(h).ok())
            .ok_or_else(too_big)?;
        let file = File::create(path).map_err(|source| Error::Io {
            what: format!("creating {}", path.display()),
            source,
        })?;
        let palette = [68, 1, 84, 253, 231, 37, 255, 255, 255];
        let mut encoder = gif::Encoder::new(BufWriter::new(file), width, height, &palette)
            .map_err(|e| gif_error(path, e))?;
        encoder
            .set_repeat(gif::Repeat::Infinite)
            .map_err(|e| gif_error(path, e))?;
        Ok(Self {
            encoder,
            width,
            height,
            scale,
            path: path.to_path_buf(),
        })
    }

    fn frame(&mut self, panels: &[ArrayView2<i32>]) -> Result<()> {
        let (w, s) = (self.width as usize, self.scale);
        let mut pixels = vec![2u8; w * self.height as usize];
        let mut x0 = 0;
        for panel in panels {
            for ((r, c), &v) in panel.indexed_iter() {
                for dy in 0..s {
                    let row = (r * s + dy) * w + x0 + c * s;
                    pixels[row..row + s].fill((v == 1) as u8);
                }
            }
            x0 += panel.ncols() * s + GAP;
        }
        let mut frame = gif::Frame::from_indexed_pixels(self.width, self.height, pixels, None);
        frame.delay = 5;
        self.encoder
            .write_frame(&frame)
            .map_err(|e| gif_error(&self.path, e))
    }
}

#[allow(clippy::too_many_arguments)]
fn life(
    gpu: Option<&Gpu>,
    n: usize,
    sims: usize,
    steps: usize,
    scale: usize,
    out: &Path,
    kernel: LifeKernel,
    report: &mut Report,
) -> Result<()> {
    let k = kernel.entry();
    let label = format!("{k}, one stream per simulation");
    if sims == 0 {
        return Err(Error::invalid(k, "0 simulations: nothing to run"));
    }
    let mut rng = Rng::new(15);
    let starts: Vec<Array2<i32>> = (0..sims)
        .map(|_| random_lattice(n, 0.25, &mut rng))
        .collect();
    let size = format!("{sims} × {n}², {steps} steps");
    let mut gif = LifeGif::create(out, n, sims, scale)?;
    gif.frame(&starts.iter().map(|l| l.view()).collect::<Vec<_>>())?;
    let Some(gpu) = gpu else {
        // CPU reference only: the same animation, computed on the host.
        let (frames, cpu_ms) = cpu_time(|| -> Result<()> {
            let mut current = starts.clone();
            for _ in 0..steps {
                for l in current.iter_mut() {
                    *l = life_step_cpu(l.view())?;
                }
                let views: Vec<_> = current.iter().map(|l| l.view()).collect();
                gif.frame(&views)?;
            }
            Ok(())
        });
        frames?;
        println!("wrote {} (CPU reference frames)", out.display());
        let mut row = Row::new(label, size, no_gpu());
        row.cpu_ms = Some(cpu_ms);
        report.push(row);
        return Ok(());
    };
    let (expected, cpu_ms) = cpu_time(|| {
        starts
            .iter()
            .map(|l| life_cpu(l.view(), steps))
            .collect::<Result<Vec<_>>>()
    });
    let expected = expected?;
    let mut sim = LifeSims::with_kernel(gpu, &starts, kernel)?;
    let mut ms = 0.0;
    for _ in 0..steps {
        let t = Instant::now();
        sim.frame()?;
        let views = (0..sims)
            .map(|k| sim.lattice(k))
            .collect::<Result<Vec<_>>>()?;
        ms += t.elapsed().as_secs_f64() * 1e3;
        gif.frame(&views)?;
    }
    let mismatch = (0..sims).find(|&k| sim.lattice(k).map_or(true, |l| l != expected[k]));
    let check = match mismatch {
        None => Check::Pass(format!("all {sims} equal the CPU after {steps} steps")),
        Some(k) => Check::Fail(format!("simulation {k} differs from the CPU")),
    };
    println!(
        "wrote {} ({} frames of {sims} panels)",
        out.display(),
        steps + 1
    );
    let mut row = Row::new(label, size, check);
    row.gpu_ms = Some(ms);
    row.cpu_ms = Some(cpu_ms);
    row.throughput = Some(format!(
        "{:.1} µs per frame of {sims} (wall, GIF encoding excluded)",
        ms * 1e3 / steps.max(1) as f64
    ));
    report.push(row);
    Ok(())
}

/// The streams part of `cuda-kernels bench`: the 200-array demo (default
/// stream against one stream per array, CUDA-event spans, median of 3 after
/// a warm-up) and both Life kernels at N = 4096 against a device-to-device
/// copy of the lattice.
pub fn bench(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    if super::bench_selected("streams") {
        bench_streams(gpu, records)?;
    }
    if super::bench_selected("life") {
        bench_life(gpu, 4096, records)?;
    }
    Ok(())
}

fn bench_streams(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    let (arrays, len, reps) = (200, 1 << 20, 3);
    let inputs = randn_arrays(arrays, len, 16);
    let size = format!("{arrays} × 2^20 f32, {} queues", hardware_queues());
    // The first wrong output of any timed run, per issue order.
    let mut wrong: [Option<String>; 3] = [None, None, None];
    let mut note = |slot: usize, m: Option<(usize, usize)>| {
        if let Some((a, e)) = m {
            wrong[slot].get_or_insert(format!(
                "array {a} element {e} differs from the CPU's mult_ker"
            ));
        }
    };
    let mut serial = SerialBatch::new(gpu, &inputs)?;
    let mut serial_ms = Vec::new();
    for rep in 0..=reps {
        let t = serial.run()?;
        note(0, t.first_mismatch);
        if rep > 0 {
            serial_ms.push(t.gpu_ms as f32);
        }
    }
    drop(serial);
    let mut streamed = StreamBatch::new(gpu, &inputs)?;
    let (mut stream_ms, mut depth_ms, mut kernel_means) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..=reps {
        let t = streamed.run_with(IssueOrder::BreadthFirst)?;
        let d = streamed.run_with(IssueOrder::DepthFirst)?;
        note(1, t.first_mismatch);
        note(2, d.first_mismatch);
        if rep > 0 {
            stream_ms.push(t.gpu_ms as f32);
            depth_ms.push(d.gpu_ms as f32);
            kernel_means.push(d.kernel_mean_std().map_or(f32::NAN, |(m, _)| m as f32));
        }
    }
    let check = |slot: usize| match &wrong[slot] {
        None => Check::Pass("every output equals the CPU's mult_ker".into()),
        Some(why) => Check::Fail(why.clone()),
    };
    let (s, p) = (median(&mut serial_ms) as f64, median(&mut stream_ms) as f64);
    let per_s = |ms: f64| arrays as f64 / (ms * 1e-3);
    records.push(BenchRecord::new(
        "mult_ker batch, default stream",
        &size,
        s,
        "arrays/s",
        per_s(s),
        check(0),
    ));
    records.push(
        BenchRecord::new(
            "mult_ker batch, 200 streams",
            &size,
            p,
            "arrays/s",
            per_s(p),
            check(1),
        )
        .against("default stream (speedup)", s / p),
    );
    let d = median(&mut depth_ms) as f64;
    records.push(
        BenchRecord::new(
            "mult_ker batch, 200 streams, depth-first",
            &size,
            d,
            "arrays/s",
            per_s(d),
            check(2),
        )
        .against("default stream (speedup)", s / d),
    );
    let kernel_mean = median(&mut kernel_means) as f64;
    records.push(BenchRecord::new(
        "mult_ker<<<1, 64>>> in its stream",
        "2^20 f32",
        kernel_mean,
        "GB/s",
        gb_per_s(8 * len, kernel_mean as f32),
        check(2),
    ));
    Ok(())
}

fn bench_life(gpu: &Gpu, n: usize, records: &mut Vec<BenchRecord>) -> Result<()> {
    let reps = 20;
    let start = random_lattice(n, 0.25, &mut Rng::new(17));
    let bytes = 2 * 4 * n * n;
    let copy = device_copy_gbps(gpu, 4 * n * n, reps)?;
    let size = format!("{n}² i32");
    records.push(BenchRecord::new(
        "device copy (Life lattice)",
        &size,
        bytes as f64 / (copy * 1e9) * 1e3,
        "GB/s",
        copy,
        Check::Pass(super::foundation::COPY_CHECKED.into()),
    ));
    let expected = life_step_cpu(start.view())?;
    for kernel in [LifeKernel::Fast, LifeKernel::Seed] {
        let name = kernel.entry();
        let mut lane = Lane::<i32, 2>::from_host(gpu, start.as_slice().unwrap_or(&[]))?;
        lane.upload(0)?;
        let mut times = Vec::with_capacity(reps);
        for rep in 0..=reps {
            let (src, dst) = if rep % 2 == 0 { (0, 1) } else { (1, 0) };
            gpu.bind()?;
            let timer = GpuTimer::new()?;
            timer.start(lane.stream())?;
            lane.life_step(kernel, n, src, dst)?;
            timer.stop(lane.stream())?;
            let ms = timer.elapsed_ms()?;
            if rep > 0 {
                times.push(ms);
            }
        }
        // The check: one step from the start lattice, exactly the CPU's.
        lane.upload(0)?;
        lane.life_step(kernel, n, 0, 1)?;
        lane.download(1)?;
        let got = ArrayView2::from_shape((n, n), lane.host()?)
            .map_err(|e| Error::invalid(name, e.to_string()))?;
        let check = exact_check(&got, &expected);
        let ms = median(&mut times);
        let gbps = gb_per_s(bytes, ms);
        let cells = (n * n) as f64 / (ms as f64 * 1e-3);
        records.push(
            BenchRecord::new(
                format!("{name} (one step)"),
                &size,
                ms as f64,
                "GB/s",
                gbps,
                check.clone(),
            )
            .against("device copy", gbps / copy),
        );
        records.push(BenchRecord::new(
            format!("{name} cell updates"),
            &size,
            ms as f64,
            "Gcells/s",
            cells / 1e9,
            check,
        ));
    }
    Ok(())
}
