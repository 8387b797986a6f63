//! The mandelbrot demos: `mandelbrot_ker` by its four launch paths (the C
//! ABI library among them) and with explicit context synchronization, every graph compared with the CPU reference (they must be
//! identical), the picture written as a PNG.
use std::path::{Path, PathBuf};
use std::time::Instant;

use ndarray::{Array1, Array2, ArrayView2};

use super::{BenchRecord, Check, Report, Row, cpu_time, hardware_only, median_gpu_ms, no_gpu};
use crate::mandelbrot::c_abi::{CAbiLibrary, LIBRARY_NAME};
use crate::mandelbrot::driver_api::{PtxSource, mandelbrot_driver_api_timed};
use crate::mandelbrot::{
    BLOCK, KERNEL, MandelbrotParams, count_inside, first_difference, graph_crc32, mandelbrot_cpu,
};
use crate::timing::median;
use crate::{Error, Gpu, Result};
use cuda_kernels::prelude::*;

/// The mandelbrot subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// The Mandelbrot set by the chosen launch path(s),
    /// compared with the CPU reference, written as a PNG.
    Mandelbrot {
        /// Points along each axis (the seed's `breadth`).
        #[arg(long, default_value_t = 512)]
        size: usize,
        /// Iterations (the seed's `max_iters`).
        #[arg(long, default_value_t = 256)]
        iters: i32,
        /// Smallest real and imaginary part.
        #[arg(long, default_value_t = -2.0, allow_hyphen_values = true)]
        low: f32,
        /// Largest real and imaginary part.
        #[arg(long, default_value_t = 2.0, allow_hyphen_values = true)]
        high: f32,
        /// Escape radius (not squared).
        #[arg(long, default_value_t = 2.0)]
        upper_bound: f32,
        /// The PNG to write.
        #[arg(long, default_value = "mandelbrot.png")]
        out: PathBuf,
        /// Which launch path(s) to run.
        #[arg(long, value_enum, default_value_t = LaunchPath::All)]
        path: LaunchPath,
        /// PTX file for the ptx-file and driver-api paths (default: the
        /// embedded PTX written to a temporary file, as `cuda-kernels ptx
        /// --out` writes it).
        #[arg(long)]
        ptx: Option<PathBuf>,
        /// The C ABI library for the c-abi path (default: $CUDA_KERNELS_CAPI,
        /// or libcuda_kernels_capi.so next to this program).
        #[arg(long)]
        capi_lib: Option<PathBuf>,
    },
}

/// The launch paths of the Mandelbrot kernel, plus explicit synchronization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LaunchPath {
    /// `Gpu::mandelbrot` with the embedded PTX.
    HighLevel,
    /// `Gpu::from_ptx_file`, then `Gpu::mandelbrot`.
    PtxFile,
    /// The raw driver API, call by call (a context per call, as the seed).
    DriverApi,
    /// `launch_mandelbrot` of libcuda_kernels_capi.so, through dlopen.
    CAbi,
    /// Async copies and a context synchronization after each step.
    ExplicitSync,
    /// All of the above.
    All,
}

impl LaunchPath {
    /// The single paths, in the order `All` runs them.
    pub const SINGLE: [LaunchPath; 5] = [
        LaunchPath::HighLevel,
        LaunchPath::PtxFile,
        LaunchPath::DriverApi,
        LaunchPath::CAbi,
        LaunchPath::ExplicitSync,
    ];

    /// The name the command line uses.
    pub fn name(self) -> &'static str {
        match self {
            LaunchPath::HighLevel => "high-level",
            LaunchPath::PtxFile => "ptx-file",
            LaunchPath::DriverApi => "driver-api",
            LaunchPath::CAbi => "c-abi",
            LaunchPath::ExplicitSync => "explicit-sync",
            LaunchPath::All => "all",
        }
    }

    /// What hardware the path is about, where the simulator cannot take it.
    pub fn hardware(self) -> Option<&'static str> {
        match self {
            LaunchPath::PtxFile => Some("the driver's PTX loader"),
            LaunchPath::DriverApi => Some("the raw driver-API path"),
            LaunchPath::CAbi => Some("the C ABI"),
            LaunchPath::HighLevel | LaunchPath::ExplicitSync | LaunchPath::All => None,
        }
    }
}

/// Options of one demo run.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// The seed's parameters.
    pub params: MandelbrotParams,
    /// The PNG to write.
    pub out: PathBuf,
    /// The path(s) to run.
    pub path: LaunchPath,
    /// A PTX file for the ptx-file and driver-api paths.
    pub ptx: Option<PathBuf>,
    /// The C ABI library.
    pub capi_lib: Option<PathBuf>,
}

/// Runs one mandelbrot subcommand.
pub fn run(cmd: &Command, gpu: Option<&Gpu>, report: &mut Report) -> Result<()> {
    let Command::Mandelbrot {
        size,
        iters,
        low,
        high,
        upper_bound,
        ref out,
        path,
        ref ptx,
        ref capi_lib,
    } = *cmd;
    let options = DemoOptions {
        params: MandelbrotParams {
            breadth: size,
            low,
            high,
            max_iters: iters,
            upper_bound,
        },
        out: out.clone(),
        path,
        ptx: ptx.clone(),
        capi_lib: capi_lib.clone(),
    };
    demo(gpu, &options, report)
}

/// The mandelbrot part of `cuda-kernels demo`: the seed's picture by every
/// path, written to `out_dir/mandelbrot.png`.
pub fn run_all(gpu: Option<&Gpu>, out_dir: &Path, report: &mut Report) -> Result<()> {
    let options = DemoOptions {
        params: MandelbrotParams::default(),
        out: out_dir.join("mandelbrot.png"),
        path: LaunchPath::All,
        ptx: None,
        capi_lib: None,
    };
    demo(gpu, &options, report)
}

/// A PTX file for the ptx-file and driver-api paths: the user's, or the
/// embedded PTX written to a temporary file (removed on drop).
struct PtxFile {
    path: PathBuf,
    temporary: bool,
}

impl PtxFile {
    fn new(user: Option<&Path>) -> Result<Self> {
        if let Some(p) = user {
            return Ok(Self {
                path: p.to_path_buf(),
                temporary: false,
            });
        }
        let path = std::env::temp_dir().join(format!(
            "cuda-kernels-mandelbrot-{}.ptx",
            std::process::id()
        ));
        std::fs::write(&path, crate::PTX).map_err(|source| Error::Io {
            what: format!("writing {}", path.display()),
            source,
        })?;
        Ok(Self {
            path,
            temporary: true,
        })
    }
}

impl Drop for PtxFile {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// One path's result: the graph, the wall-clock time of the call, the kernel
/// time when the path measures it, and a note.
struct PathRun {
    graph: Array2<f32>,
    wall_ms: f64,
    kernel_ms: Option<f64>,
    note: String,
}

fn demo(gpu: Option<&Gpu>, o: &DemoOptions, report: &mut Report) -> Result<()> {
    let p = o.params;
    let lattice = p.lattice();
    let size = format!("{0}×{0}, {1} iters", p.breadth, p.max_iters);
    let (expected, cpu_ms) =
        cpu_time(|| mandelbrot_cpu(lattice.view(), p.max_iters, p.upper_bound));
    let expected = expected?;
    println!(
        "CPU reference: {:.1} ms, {} points inside, graph crc32 {:#010x}",
        cpu_ms,
        count_inside(expected.view()),
        graph_crc32(expected.view())
    );
    let paths: Vec<LaunchPath> = if o.path == LaunchPath::All {
        LaunchPath::SINGLE.to_vec()
    } else {
        vec![o.path]
    };
    let mut picture = None;
    let Some(gpu) = gpu else {
        for path in paths {
            let mut row = Row::new(format!("{KERNEL} ({})", path.name()), &size, no_gpu());
            row.cpu_ms = Some(cpu_ms);
            report.push(row);
        }
        write_png(&o.out, expected.view())?;
        println!("wrote {} (CPU reference)", o.out.display());
        return Ok(());
    };
    for path in paths {
        let label = format!("{KERNEL} ({})", path.name());
        if let Some(what) = path.hardware().filter(|_| gpu.is_simulated()) {
            report.push(Row::new(&label, &size, hardware_only(what)));
            continue;
        }
        let mut row = Row::new(&label, &size, Check::Pass(String::new()));
        row.cpu_ms = Some(cpu_ms);
        match run_path(gpu, path, &lattice, o) {
            Ok(Some(r)) if gpu.is_simulated() => {
                println!("{:<14} simulated", path.name());
                row.check = graph_check(r.graph.view(), expected.view());
                picture.get_or_insert(r.graph);
            }
            Ok(Some(r)) => {
                println!(
                    "{:<14} {:>9.3} ms per call{}{}",
                    path.name(),
                    r.wall_ms,
                    r.kernel_ms
                        .map_or(String::new(), |k| format!(", kernel {k:.3} ms")),
                    if r.note.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", r.note)
                    }
                );
                row.gpu_ms = Some(r.kernel_ms.unwrap_or(r.wall_ms));
                row.throughput = Some(format!("{:.3} ms per call", r.wall_ms));
                row.check = match first_difference(r.graph.view(), expected.view()) {
                    None => Check::Pass(format!(
                        "identical to CPU, {} inside",
                        count_inside(r.graph.view())
                    )),
                    Some(d) => Check::Fail(format!("differs from CPU at {d}")),
                };
                if picture.is_none() {
                    picture = Some(r.graph);
                }
            }
            Ok(None) => {
                row.check = Check::Skipped(format!(
                    "{LIBRARY_NAME} not found (cargo build --release -p cuda-kernels-capi, or --capi-lib)"
                ));
            }
            Err(e) => row.check = Check::Fail(e),
        }
        report.push(row);
    }
    let graph = picture.unwrap_or(expected);
    write_png(&o.out, graph.view())?;
    println!(
        "wrote {} (graph crc32 {:#010x})",
        o.out.display(),
        graph_crc32(graph.view())
    );
    Ok(())
}

/// Runs one path; `Ok(None)` when the C ABI library is not there; `Err`
/// with the message when the path fails.
fn run_path(
    gpu: &Gpu,
    path: LaunchPath,
    lattice: &Array1<f32>,
    o: &DemoOptions,
) -> std::result::Result<Option<PathRun>, String> {
    let (iters, ub) = (o.params.max_iters, o.params.upper_bound);
    let t = Instant::now();
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let run = match path {
        LaunchPath::HighLevel if gpu.is_simulated() => PathRun {
            graph: gpu
                .mandelbrot(lattice.view(), iters, ub)
                .map_err(|e| e.to_string())?,
            wall_ms: ms(t),
            kernel_ms: None,
            note: "simulated".into(),
        },
        LaunchPath::HighLevel => {
            let (graph, timing) = gpu
                .mandelbrot_timed(lattice.view(), iters, ub, BLOCK)
                .map_err(|e| e.to_string())?;
            PathRun {
                graph,
                wall_ms: ms(t),
                kernel_ms: Some(timing.kernel_ms as f64),
                note: format!("{:.3} ms with transfers", timing.with_transfers_ms),
            }
        }
        LaunchPath::PtxFile => {
            let file = PtxFile::new(o.ptx.as_deref()).map_err(|e| e.to_string())?;
            let from_file = Gpu::from_ptx_file(&file.path).map_err(|e| e.to_string())?;
            let load_ms = ms(t);
            let t = Instant::now();
            let (graph, timing) = from_file
                .mandelbrot_timed(lattice.view(), iters, ub, BLOCK)
                .map_err(|e| e.to_string())?;
            PathRun {
                graph,
                wall_ms: ms(t),
                kernel_ms: Some(timing.kernel_ms as f64),
                note: format!(
                    "module loaded from {} in {load_ms:.1} ms",
                    file.path.display()
                ),
            }
        }
        LaunchPath::DriverApi => {
            let file = PtxFile::new(o.ptx.as_deref()).map_err(|e| e.to_string())?;
            let t = Instant::now();
            let (graph, phases) =
                mandelbrot_driver_api_timed(PtxSource::File(&file.path), lattice.view(), iters, ub)
                    .map_err(|e| e.to_string())?;
            PathRun {
                graph,
                wall_ms: ms(t),
                kernel_ms: None,
                note: format!(
                    "cuInit…cuModuleGetFunction {:.1} ms, alloc…copy out {:.3} ms, free…cuCtxDestroy {:.1} ms",
                    phases.setup_ms, phases.run_ms, phases.teardown_ms
                ),
            }
        }
        LaunchPath::CAbi => {
            let Some(lib_path) = o.capi_lib.clone().or_else(CAbiLibrary::find) else {
                return Ok(None);
            };
            let lib = CAbiLibrary::open(&lib_path).map_err(|e| e.to_string())?;
            let t = Instant::now();
            let graph = lib
                .mandelbrot(lattice.view(), iters, ub)
                .map_err(|e| e.to_string())?;
            PathRun {
                graph,
                wall_ms: ms(t),
                kernel_ms: None,
                note: format!("{} (first call opens its GPU)", lib_path.display()),
            }
        }
        LaunchPath::ExplicitSync => {
            let graph = gpu
                .mandelbrot_explicit_sync(lattice.view(), iters, ub)
                .map_err(|e| e.to_string())?;
            PathRun {
                graph,
                wall_ms: ms(t),
                kernel_ms: None,
                note: String::new(),
            }
        }
        LaunchPath::All => return Err("`all` is not a single path".into()),
    };
    Ok(Some(run))
}

/// Writes a graph as an RGB PNG in the two colours matplotlib's default
/// colour map gives the seed's `imshow`: yellow inside the set, dark purple
/// outside; row 0 at the top.
pub fn write_png(path: &Path, graph: ArrayView2<f32>) -> Result<()> {
    const INSIDE: [u8; 3] = [253, 231, 37];
    const OUTSIDE: [u8; 3] = [68, 1, 84];
    let (h, w) = graph.dim();
    let io = |e: std::io::Error| Error::Io {
        what: format!("writing {}", path.display()),
        source: e,
    };
    let png_err = |e: png::EncodingError| io(std::io::Error::other(e));
    let data: Vec<u8> = graph
        .iter()
        .flat_map(|&v| if v == 1.0 { INSIDE } else { OUTSIDE })
        .collect();
    let file = std::fs::File::create(path).map_err(io)?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), w as u32, h as u32);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(png_err)?;
    writer.write_image_data(&data).map_err(png_err)?;
    writer.finish().map_err(png_err)
}

/// The mandelbrot part of `cuda-kernels bench`:
/// - `mandelbrot_ker` alone at 4096×4096, 256 iterations, blocks of 32 (the
///   seed's shape) and of 256: median of CUDA-event times after warm-up;
/// - what each launch path costs per call at the seed's 512×512 (wall clock,
///   median), as a ratio to the high-level path.
pub fn bench(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    let big = MandelbrotParams {
        breadth: 4096,
        ..MandelbrotParams::default()
    };
    let lattice = big.lattice();
    let expected = mandelbrot_cpu(lattice.view(), big.max_iters, big.upper_bound)?;
    for block in [BLOCK, 256] {
        let (ms, graph) = kernel_median_ms(gpu, &big, block, 10)?;
        let points = (big.breadth * big.breadth) as f64;
        records.push(BenchRecord::new(
            format!("{KERNEL} (block {block})"),
            "4096×4096, 256 iters",
            ms,
            "Mpoints/s",
            points / (ms * 1e-3) / 1e6,
            graph_check(graph.view(), expected.view()),
        ));
    }
    path_overheads(gpu, &MandelbrotParams::default(), records)
}

/// A GPU graph against the CPU's: identical, point for point.
fn graph_check(got: ArrayView2<f32>, expected: ArrayView2<f32>) -> Check {
    match first_difference(got, expected) {
        None => Check::Pass(format!("identical to CPU, {} inside", count_inside(got))),
        Some(d) => Check::Fail(format!("differs from CPU at {d}")),
    }
}

/// Median kernel time (CUDA events) of `reps` launches after two warm-ups,
/// and the graph the timed launches wrote.
pub fn kernel_median_ms(
    gpu: &Gpu,
    p: &MandelbrotParams,
    block: u32,
    reps: usize,
) -> Result<(f64, Array2<f32>)> {
    gpu.bind()?;
    let lattice = p.lattice();
    let n = p.breadth;
    let d_lattice = gpu.to_device(lattice.as_slice().unwrap_or(&[]))?;
    let mut d_graph = gpu.zeroed::<f32>(n * n)?;
    let ms = median_gpu_ms(gpu, 2, reps, || {
        gpu.mandelbrot_on_device(&d_lattice, &mut d_graph, p.max_iters, p.upper_bound, block)
    })?;
    gpu.synchronize(KERNEL)?;
    let mut graph = Array2::<f32>::zeros((n, n));
    d_graph.copy_to(graph.as_slice_mut().unwrap_or(&mut []))?;
    Ok((ms as f64, graph))
}

/// Median wall-clock ms per call of each launch path at `p`.
fn path_overheads(gpu: &Gpu, p: &MandelbrotParams, records: &mut Vec<BenchRecord>) -> Result<()> {
    let lattice = p.lattice();
    let (iters, ub) = (p.max_iters, p.upper_bound);
    let size = format!("{0}×{0}, {1} iters", p.breadth, p.max_iters);
    let reps = 20;
    let expected = mandelbrot_cpu(lattice.view(), iters, ub)?;
    // Each path's median wall-clock ms per call, and the check of its last
    // graph.
    let median_of =
        |reps: usize, f: &mut dyn FnMut() -> Result<Array2<f32>>| -> Result<(f64, Check)> {
            f()?; // warm-up
            let mut times = Vec::with_capacity(reps);
            let mut last = None;
            for _ in 0..reps {
                let t = Instant::now();
                last = Some(f()?);
                times.push((t.elapsed().as_secs_f64() * 1e3) as f32);
            }
            let check = match &last {
                Some(g) => graph_check(g.view(), expected.view()),
                None => Check::Fail("no result".into()),
            };
            Ok((median(&mut times) as f64, check))
        };
    let high = median_of(reps, &mut || gpu.mandelbrot(lattice.view(), iters, ub))?;
    let file = PtxFile::new(None)?;
    let t = Instant::now();
    let from_file = Gpu::from_ptx_file(&file.path)?;
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    let ptx_file = median_of(reps, &mut || {
        from_file.mandelbrot(lattice.view(), iters, ub)
    })?;
    drop(from_file);
    let explicit = median_of(reps, &mut || {
        gpu.mandelbrot_explicit_sync(lattice.view(), iters, ub)
    })?;
    let mut phases = Vec::new();
    let driver = median_of(5, &mut || {
        let (g, t) =
            mandelbrot_driver_api_timed(PtxSource::File(&file.path), lattice.view(), iters, ub)?;
        phases.push(t);
        Ok(g)
    })?;
    let c_abi = match CAbiLibrary::find().map(CAbiLibrary::open) {
        Some(Ok(lib)) => Some(median_of(reps, &mut || {
            lib.mandelbrot(lattice.view(), iters, ub)
                .map_err(|e| Error::invalid("launch_mandelbrot (C ABI)", e.to_string()))
        })?),
        Some(Err(e)) => {
            eprintln!("note: the C ABI path is not measured: {e}");
            None
        }
        None => {
            eprintln!("note: the C ABI path is not measured: {LIBRARY_NAME} not found");
            None
        }
    };
    let high_ms = high.0;
    let mut push = |what: String, (ms, check): (f64, Check)| {
        records.push(
            BenchRecord::new(what, size.clone(), ms, "ms/call", ms, check)
                .against("high-level", ms / high_ms),
        )
    };
    push("mandelbrot path high-level".into(), high);
    let ptx_file_check = ptx_file.1.clone();
    push("mandelbrot path ptx-file".into(), ptx_file);
    push("mandelbrot path explicit-sync".into(), explicit);
    if let Some(r) = c_abi {
        push("mandelbrot path c-abi".into(), r);
    }
    let driver_check = driver.1.clone();
    push("mandelbrot path driver-api".into(), driver);
    let mid = |f: fn(&crate::mandelbrot::driver_api::DriverApiTiming) -> f64| {
        let mut v: Vec<f32> = phases.iter().map(|t| f(t) as f32).collect();
        median(&mut v) as f64
    };
    // The phases of the driver-API path: its graphs were checked above.
    let phase = |ms: f64| (ms, driver_check.clone());
    push(
        "  driver-api: cuInit…cuModuleGetFunction".into(),
        phase(mid(|t| t.setup_ms)),
    );
    push(
        "  driver-api: alloc…copy out".into(),
        phase(mid(|t| t.run_ms)),
    );
    push(
        "  driver-api: free…cuCtxDestroy".into(),
        phase(mid(|t| t.teardown_ms)),
    );
    push(
        "  ptx-file: Gpu::from_ptx_file (once)".into(),
        (load_ms, ptx_file_check),
    );
    Ok(())
}
