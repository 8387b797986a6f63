//! A user's program on cuda-kernels' runtime: it launches the kernels of its own
//! kernel crate (`../kernels`, built to PTX and cubins by `build.rs`) and
//! prints each result next to its CPU reference, computed with the same
//! per-element functions. Without a GPU (or with `CUDA_KERNELS_SIM=1`) the
//! same kernels run on the CPU simulator: the kernel crate's own Rust code,
//! compiled for the host, checked the same way. Exits 1 on a mismatch.
use std::fmt::Display;
use std::process::ExitCode;

mod attention;
mod families;

use cuda_kernels_gpu::elementwise::Elementwise;
use cuda_kernels_runtime::cust::memory::DeviceCopy;
use cuda_kernels_runtime::cust::memory::bytemuck::Pod;
use cuda_kernels_runtime::{Error, Gpu, Images, In, InOut, LaunchConfig, Result};
use downstream_kernels::{
    BIN_STARTS, BINS, HISTOGRAM, MaxAbs, SOFTMAX_BLOCK, SOFTMAX_ENTRY, SOFTMAX_ROWS, leaky_relu,
    softmax_term,
};
use families::{elementwise_unary, elementwise_unary_cpu, reduce, reduce_cpu};
use ndarray::{Array2, ArrayView2};

/// This program's kernels: the PTX and cubins `build.rs` wrote.
const IMAGES: Images<'static> = cuda_kernels_runtime::embedded_images!("downstream");

/// Elements of the elementwise and reduction inputs.
const N: usize = 1 << 20;
/// The softmax input's shape: a row length that is not a multiple of the
/// block, so every thread's last stride is partial.
const ROWS: usize = 512;
const COLS: usize = 1000;

/// This program's kernels on device 0, or on the simulator when
/// `CUDA_KERNELS_SIM=1` asks for it or there is no GPU (saying so).
fn open() -> Result<Gpu> {
    let gpu = Gpu::from_images_or_simulator(&IMAGES)?;
    if !gpu.is_simulated() {
        return Ok(gpu);
    }
    println!(
        "Built: {} bytes of PTX with the entry points {}, and {} cubin(s); \
         SIMULATED: the same kernels' Rust code runs on the CPU, no GPU timings.",
        IMAGES.ptx.len(),
        cuda_kernels_runtime::ptx_entry_points(IMAGES.ptx).join(", "),
        IMAGES.cubins.len()
    );
    // The simulator stands for a GPU with these images: it runs this
    // program's kernel crate, as the GPU would, and no other crate's.
    Ok(gpu)
}

fn main() -> ExitCode {
    let gpu = match open() {
        Ok(gpu) => gpu,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(&gpu) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("MISMATCH: a GPU result differs from its CPU reference");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One line of the table: what ran, the GPU's result, the CPU reference's,
/// and how they were compared. Returns whether they agree.
fn row(what: &str, gpu: impl Display, cpu: impl Display, check: &str, ok: bool) -> bool {
    let verdict = if ok { "ok" } else { "MISMATCH" };
    println!("{what:<34} {gpu:>16} {cpu:>16}  {check} {verdict}");
    ok
}

/// `n` values in `[-8, 8)` from a fixed xorshift sequence.
fn inputs(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 16.0 - 8.0
        })
        .collect()
}

/// Runs every kernel and compares it with its CPU reference.
fn run(gpu: &Gpu) -> Result<bool> {
    println!("{} ({})", gpu.name()?, gpu.image());
    let backend = if gpu.is_simulated() {
        "simulator"
    } else {
        "GPU"
    };
    println!(
        "{:<34} {:>16} {:>16}  check",
        "kernel", backend, "CPU reference"
    );
    let mut ok = true;

    // reduce_max_abs: exact (no rounding anywhere). The first input is
    // issue 12's: the built-in `max` gave 3 for it.
    let small = [-9.0f32, 2.0, 3.0];
    let (g, c) = (
        reduce::<MaxAbs, f32>(gpu, &small)?,
        reduce_cpu::<MaxAbs, f32>(&small)?,
    );
    ok &= row(
        "reduce_max_abs_f32 [-9, 2, 3]",
        g,
        c,
        "exact",
        g == c && g == 9.0,
    );
    let x = inputs(N, 1);
    let (g, c) = (
        reduce::<MaxAbs, f32>(gpu, &x)?,
        reduce_cpu::<MaxAbs, f32>(&x)?,
    );
    ok &= row("reduce_max_abs_f32 (2^20)", g, c, "exact", g == c);
    let x64: Vec<f64> = x.iter().map(|&v| f64::from(v) * -1.5).collect();
    let (g, c) = (
        reduce::<MaxAbs, f64>(gpu, &x64)?,
        reduce_cpu::<MaxAbs, f64>(&x64)?,
    );
    ok &= row("reduce_max_abs_f64 (2^20)", g, c, "exact", g == c);

    // elementwise_leaky_relu: exact (one rounding, the same on both sides).
    ok &= check_leaky_relu(gpu, &x, 0.01)?;
    ok &= check_leaky_relu(gpu, &x64, 0.2)?;

    // softmax_rows: bounded. Both sides compute the same arguments x − max
    // (max is exact); the terms differ by libdevice's expf (≤ 2 ulps) against
    // the host's (≤ 1 ulp), and the sums by their order: sequential on the
    // CPU (≤ (COLS − 1)·u relative), strided then a tree on the GPU
    // (≤ (COLS/BLOCK + 8)·u), then one division each; u = 2^-24.
    let x = Array2::from_shape_vec((ROWS, COLS), inputs(ROWS * COLS, 2))
        .map_err(|e| Error::invalid(SOFTMAX_ENTRY, e.to_string()))?;
    let g = softmax_gpu(gpu, x.view())?;
    let c = softmax_cpu(x.view());
    let u = f64::from(f32::EPSILON) / 2.0;
    let bound = (COLS + COLS.div_ceil(SOFTMAX_BLOCK as usize) + 16) as f64 * u;
    let worst = g
        .iter()
        .zip(&c)
        .map(|(&a, &b)| ((f64::from(a) - f64::from(b)) / f64::from(b)).abs())
        .fold(0.0, f64::max);
    ok &= row(
        &format!("softmax_rows {ROWS}×{COLS}, y[7][123]"),
        g[[7, 123]],
        c[[7, 123]],
        &format!("worst relative error {worst:.2e} ≤ {bound:.2e}:"),
        worst <= bound,
    );

    // histogram: exact (integer counts, in any order).
    let bytes: Vec<u8> = inputs(N, 3)
        .iter()
        .map(|v| (v.abs() * 31.0) as u8)
        .collect();
    let (g, c) = (histogram_gpu(gpu, &bytes)?, histogram_cpu(&bytes));
    ok &= row("histogram (2^20 bytes), bin 7", g[7], c[7], "exact", g == c);

    // bin_starts: the exclusive prefix sum of the counts (a block scan), exact.
    let (gs, cs) = (bin_starts_gpu(gpu, &c)?, bin_starts_cpu(&c));
    ok &= row(
        "bin_starts (block scan), bin 200",
        gs[200],
        cs[200],
        "exact",
        gs == cs,
    );
    // attention_tile: bf16 Q·Kᵀ on the tensor cores, then a row softmax,
    // against f64 within the bound derived in attention.rs.
    ok &= attention::check(gpu)?;
    Ok(ok)
}

/// The CPU reference of `histogram`: each byte counted in its bin.
fn histogram_cpu(x: &[u8]) -> Vec<u32> {
    let mut hist = vec![0u32; BINS];
    for &b in x {
        hist[usize::from(b)] += 1;
    }
    hist
}

/// The CPU reference of `bin_starts`: the counts before each bin.
fn bin_starts_cpu(hist: &[u32]) -> Vec<u32> {
    hist.iter()
        .scan(0u32, |before, &h| {
            let start = *before;
            *before += h;
            Some(start)
        })
        .collect()
}

/// `bin_starts` of `hist` (BINS counts) on the GPU: one block of BINS threads.
fn bin_starts_gpu(gpu: &Gpu, hist: &[u32]) -> Result<Vec<u32>> {
    let counts = gpu.to_device(hist)?;
    let mut starts = gpu.zeroed::<u32>(BINS)?;
    let cfg = LaunchConfig::linear(1, BINS as u32);
    // SAFETY: both buffers hold BINS u32; one block of BINS threads.
    unsafe { gpu.launch(BIN_STARTS, cfg, gpu.stream(), (&counts, &mut starts)) }?;
    gpu.synchronize(BIN_STARTS.name())?;
    starts.to_vec()
}

/// The byte histogram of `x` with the kernel crate's `histogram`, launched
/// on the host slices (copied in, and the counts back, in one call).
fn histogram_gpu(gpu: &Gpu, x: &[u8]) -> Result<Vec<u32>> {
    let mut hist = vec![0u32; BINS];
    // Enough blocks to fill a GPU; each grid-strides over its share.
    let cfg = LaunchConfig::linear(x.len().div_ceil(4096).clamp(1, 1024) as u32, 256);
    // SAFETY: `x` holds x.len() bytes and `hist` BINS u32 (the handle
    // checks the parameter types: x: *const u8, n, hist: *mut u32).
    unsafe { gpu.launch_host(HISTOGRAM, cfg, (In(x), x.len(), InOut(&mut hist))) }?;
    Ok(hist)
}

/// Runs `leaky_relu` for `T` on the GPU and in its CPU reference, and
/// compares every element's bits (f32 and f64 convert to f64 exactly).
fn check_leaky_relu<T>(gpu: &Gpu, x: &[T], alpha: T) -> Result<bool>
where
    T: DeviceCopy + Pod + Default + Display + Into<f64> + std::iter::Sum,
    leaky_relu: Elementwise<T>,
{
    let g = elementwise_unary::<leaky_relu, T>(gpu, x, alpha)?;
    let c = elementwise_unary_cpu::<leaky_relu, T>(x, alpha);
    let bits = |v: &T| Into::<f64>::into(*v).to_bits();
    let differ = g.iter().zip(&c).filter(|(a, b)| bits(a) != bits(b)).count();
    Ok(row(
        &format!("{} (2^20)", <leaky_relu as Elementwise<T>>::ENTRY),
        format!("Σ {:.4}", g.iter().copied().sum::<T>()),
        format!("Σ {:.4}", c.iter().copied().sum::<T>()),
        &format!("exact: {differ} of {} differ", x.len()),
        differ == 0,
    ))
}

/// The CPU reference of `softmax_rows`: the same terms, summed left to right.
fn softmax_cpu(x: ArrayView2<f32>) -> Array2<f32> {
    let mut y = x.to_owned();
    for mut row in y.rows_mut() {
        let max = row.fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        row.mapv_inplace(|v| softmax_term(v, max));
        let sum: f32 = row.iter().sum();
        row.mapv_inplace(|t| t / sum);
    }
    y
}

/// Row-wise softmax of `x` with the kernel crate's `softmax_rows`, launched
/// with the typed `Gpu::launch` through its handle `SOFTMAX_ROWS`.
fn softmax_gpu(gpu: &Gpu, x: ArrayView2<f32>) -> Result<Array2<f32>> {
    const K: &str = SOFTMAX_ENTRY;
    let (rows, cols) = x.dim();
    if rows == 0 || cols == 0 {
        return Err(Error::invalid(K, format!("empty matrix {rows}×{cols}")));
    }
    let host: Vec<f32> = x.iter().copied().collect();
    let input = gpu.to_device(&host)?;
    let mut output = gpu.zeroed::<f32>(rows * cols)?;
    // One block per row, grid-stride beyond the grid's limit.
    let cfg = LaunchConfig::linear(rows.min(65_535) as u32, SOFTMAX_BLOCK);
    // SAFETY: both buffers hold rows·cols f32 (the handle checks the
    // parameter types, x: *const f32, y: *mut f32, rows, cols) and are
    // distinct allocations, and the block is (SOFTMAX_BLOCK, 1, 1), as its
    // `# Safety` asks.
    unsafe {
        gpu.launch(
            SOFTMAX_ROWS,
            cfg,
            gpu.stream(),
            (&input, &mut output, rows, cols),
        )
    }?;
    gpu.synchronize(K)?;
    Array2::from_shape_vec((rows, cols), output.to_vec()?)
        .map_err(|e| Error::invalid(K, e.to_string()))
}
