//! The matrices demos (seed 001): K3 `doubles_matrix`, K4/K5 matrix
//! products, K7 elementwise kernels, K8 the CPU-vs-GPU evaluation, K9 the
//! int64 gufunc matmul; and their benchmarks.
use std::path::Path;

use ndarray::{Array1, Array2, ArrayD, IxDyn};

use super::{BenchRecord, Check, Report, Row, cpu_time, exact_check, no_gpu};

use crate::cust::memory::DeviceBuffer;
use crate::matrices::kernels::{lerp, saxpy, sum};
use crate::matrices::{
    MatmulKernel, allclose, check_matmul, doubles_matrix_cpu, elementwise_cpu,
    gufunc_matmul_i64_cpu, matmul_cpu, vector_sum_repeat_cpu,
};
use crate::timing::{GpuTimer, median};
use crate::util::Rng;
use crate::{CudaResultExt, Gpu, Result};

/// The matrices subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// K3: doubles a rows × cols f32 matrix in place, 2-D blocks (seed 001's 5×5).
    DoublesMatrix {
        /// Rows.
        #[arg(long, default_value_t = 5)]
        rows: usize,
        /// Columns.
        #[arg(long, default_value_t = 5)]
        cols: usize,
    },
    /// K4/K5: C = A·B on f32 with the naive and the tiled kernel (seed 001's 5×5).
    Matmul {
        /// Rows of A.
        #[arg(long, default_value_t = 5)]
        m: usize,
        /// Columns of A = rows of B (default: m).
        #[arg(long)]
        k: Option<usize>,
        /// Columns of B (default: m).
        #[arg(long)]
        n: Option<usize>,
    },
    /// K7: elementwise kernels from an expression: c = a + b on i32 (the
    /// seed's), saxpy and a three-array lerp on f32.
    Elementwise {
        /// Elements of the i32 sum (the seed's 100); saxpy and lerp use 2^20.
        #[arg(long, default_value_t = 100)]
        n: usize,
    },
    /// K8: CPU vs GPU, every element summed `repeats` times (seed 001).
    VectorSumRepeat {
        /// Elements.
        #[arg(long, default_value_t = 10_000)]
        n: usize,
        /// Repetitions per element.
        #[arg(long, default_value_t = 10_000)]
        repeats: u32,
    },
    /// K9: int64 gufunc matmul (m,n),(n,p)->(m,p) on randint(10) matrices.
    GufuncMatmul {
        /// Matrix size (the seed's 10).
        #[arg(long, default_value_t = 10)]
        dim: usize,
        /// Batch shape of A (B gets the last axis only, to show broadcasting).
        #[arg(long, value_delimiter = ',')]
        batch: Vec<usize>,
    },
}

/// Runs one matrices subcommand.
pub fn run(cmd: &Command, gpu: Option<&Gpu>, report: &mut Report) -> Result<()> {
    match cmd {
        Command::DoublesMatrix { rows, cols } => doubles(gpu, *rows, *cols, report),
        Command::Matmul { m, k, n } => matmul(gpu, *m, k.unwrap_or(*m), n.unwrap_or(*m), report),
        Command::Elementwise { n } => elementwise(gpu, *n, report),
        Command::VectorSumRepeat { n, repeats } => repeat(gpu, *n, *repeats, report),
        Command::GufuncMatmul { dim, batch } => gufunc(gpu, *dim, batch, report),
    }
}

/// The matrices part of `cuda-kernels demo`: the seed-sized demos, plus a
/// 1024³ product to show the two kernels apart.
pub fn run_all(gpu: Option<&Gpu>, _out_dir: &Path, report: &mut Report) -> Result<()> {
    doubles(gpu, 5, 5, report)?;
    matmul(gpu, 5, 5, 5, report)?;
    matmul(gpu, 1024, 1024, 1024, report)?;
    elementwise(gpu, 100, report)?;
    repeat(gpu, 10_000, 10_000, report)?;
    gufunc(gpu, 10, &[], report)
}

fn randn2(rows: usize, cols: usize, rng: &mut Rng) -> Array2<f32> {
    Array2::from_shape_simple_fn((rows, cols), || rng.normal() as f32)
}

fn doubles(gpu: Option<&Gpu>, rows: usize, cols: usize, report: &mut Report) -> Result<()> {
    let mut rng = Rng::new(3);
    let a = randn2(rows, cols, &mut rng);
    let (expected, cpu_ms) = cpu_time(|| doubles_matrix_cpu(a.view()));
    let small = rows * cols <= 64;
    if small {
        println!("ORIGINAL MATRIX\n{a}");
    }
    let mut row = Row::new(
        "doubles_matrix (+ transfers)",
        format!("{rows}×{cols}"),
        no_gpu(),
    );
    row.cpu_ms = Some(cpu_ms);
    if let Some(gpu) = gpu {
        let mut doubled = a.clone();
        let ((), ms) = GpuTimer::time(gpu.stream(), || {
            gpu.doubles_matrix_in_place(doubled.view_mut())
        })?;
        if small {
            println!("DOUBLED MATRIX AFTER GPU EXECUTION\n{doubled}");
        }
        row.gpu_ms = Some(ms as f64);
        row.check = exact_check(&doubled, &expected);
    }
    report.push(row);
    Ok(())
}

fn matmul(gpu: Option<&Gpu>, m: usize, k: usize, n: usize, report: &mut Report) -> Result<()> {
    let mut rng = Rng::new(4);
    let a = randn2(m, k, &mut rng);
    let b = randn2(k, n, &mut rng);
    let (c_cpu, cpu_ms) = cpu_time(|| matmul_cpu(a.view(), b.view()));
    let c_cpu = c_cpu?;
    let size = format!("{m}×{k}·{k}×{n}");
    let small = m * k <= 64 && k * n <= 64;
    if small {
        println!(
            "{}\nMatrix A:\n{a}\n{}\nMatrix B:\n{b}",
            "-".repeat(80),
            "-".repeat(80)
        );
    }
    let Some(gpu) = gpu else {
        let mut row = Row::new("matrix_mul (CPU only)", size, no_gpu());
        row.cpu_ms = Some(cpu_ms);
        report.push(row);
        return Ok(());
    };
    let flop = 2.0 * m as f64 * k as f64 * n as f64;
    for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
        // Warm-up, then the timed run.
        gpu.matmul_timed(kernel, a.view(), b.view())?;
        let (c, t) = gpu.matmul_timed(kernel, a.view(), b.view())?;
        if small {
            println!("{}\nMatrix C ({}):\n{c}", "-".repeat(80), kernel.entry());
        }
        let seed_allclose = allclose(c.view(), c_cpu.view()).is_none();
        let chk = check_matmul(c.view(), a.view(), b.view())?;
        println!(
            "{}: np.allclose(c_cpu, c_gpu) = {seed_allclose}; max |error| vs f64 = {:.3e}",
            kernel.entry(),
            chk.max_abs_error
        );
        let check = if chk.passed() {
            Check::Pass(format!(
                "allclose{} (max err {:.1e})",
                if seed_allclose { "" } else { " + k·u·|A||B|" },
                chk.max_abs_error
            ))
        } else {
            Check::Fail(format!("{chk:?}"))
        };
        report.push(Row {
            kernel: kernel.entry().into(),
            size: size.clone(),
            gpu_ms: Some(t.kernel_ms as f64),
            cpu_ms: Some(cpu_ms),
            throughput: Some(format!("{:.1} GFLOP/s", flop / (t.kernel_ms as f64 * 1e6))),
            check,
        });
    }
    Ok(())
}

fn elementwise(gpu: Option<&Gpu>, n: usize, report: &mut Report) -> Result<()> {
    let mut rng = Rng::new(7);
    // The seed's demo: c = a + b on randint(100) i32.
    let a: Array1<i32> = (0..n).map(|_| rng.below(100) as i32).collect();
    let b: Array1<i32> = (0..n).map(|_| rng.below(100) as i32).collect();
    let mut expected = Array1::<i32>::zeros(n);
    let (r, cpu_ms) = cpu_time(|| {
        elementwise_cpu::<sum, i32>(&[a.view(), b.view()], &mut [expected.view_mut()], &[])
    });
    r?;
    let mut row = Row::new("elementwise_sum_i32 (+ transfers)", n.to_string(), no_gpu());
    row.cpu_ms = Some(cpu_ms);
    if let Some(gpu) = gpu {
        let mut c = Array1::<i32>::zeros(n);
        let ((), ms) = GpuTimer::time(gpu.stream(), || {
            gpu.elementwise_sum(a.view(), b.view(), c.view_mut())
        })?;
        println!("ELEMENTWISE SUM OF TWO VECTORS\nVECTOR LENGTH = {n}");
        if n <= 100 {
            println!("INPUT VECTOR A\n{a}\nINPUT VECTOR B\n{b}\nOUTPUT VECTOR RESULT A + B\n{c}");
        }
        row.gpu_ms = Some(ms as f64);
        row.check = exact_check(&c, &expected);
    }
    report.push(row);

    // saxpy and a three-array expression, on 2^20 f32.
    let m = 1usize << 20;
    let x: Array1<f32> = (0..m).map(|_| rng.normal() as f32).collect();
    let y0: Array1<f32> = (0..m).map(|_| rng.normal() as f32).collect();
    let t: Array1<f32> = (0..m).map(|_| rng.uniform() as f32).collect();
    let mut y_cpu = y0.clone();
    let (r, saxpy_cpu_ms) =
        cpu_time(|| elementwise_cpu::<saxpy, f32>(&[x.view()], &mut [y_cpu.view_mut()], &[2.0]));
    r?;
    let mut lerp_cpu = Array1::<f32>::zeros(m);
    let (r, lerp_cpu_ms) = cpu_time(|| {
        elementwise_cpu::<lerp, f32>(
            &[x.view(), y0.view(), t.view()],
            &mut [lerp_cpu.view_mut()],
            &[],
        )
    });
    r?;
    let mut saxpy_row = Row::new("elementwise_saxpy_f32 (+ transfers)", "2^20", no_gpu());
    saxpy_row.cpu_ms = Some(saxpy_cpu_ms);
    let mut lerp_row = Row::new("elementwise_lerp_f32 (+ transfers)", "2^20", no_gpu());
    lerp_row.cpu_ms = Some(lerp_cpu_ms);
    if let Some(gpu) = gpu {
        let mut y = y0.clone();
        let ((), ms) = GpuTimer::time(gpu.stream(), || {
            gpu.elementwise_saxpy(x.view(), y.view_mut(), 2.0f32)
        })?;
        saxpy_row.gpu_ms = Some(ms as f64);
        saxpy_row.check = exact_check(&y, &y_cpu);
        let mut out = Array1::<f32>::zeros(m);
        let ((), ms) = GpuTimer::time(gpu.stream(), || {
            gpu.elementwise_lerp(x.view(), y0.view(), t.view(), out.view_mut())
        })?;
        lerp_row.gpu_ms = Some(ms as f64);
        lerp_row.check = exact_check(&out, &lerp_cpu);
    }
    report.push(saxpy_row);
    report.push(lerp_row);
    Ok(())
}

fn repeat(gpu: Option<&Gpu>, n: usize, repeats: u32, report: &mut Report) -> Result<()> {
    let mut rng = Rng::new(10);
    let a: Array1<f32> = (0..n).map(|_| rng.uniform() as f32).collect();
    let b: Array1<f32> = (0..n).map(|_| rng.uniform() as f32).collect();
    let (c_cpu, cpu_ms) = cpu_time(|| vector_sum_repeat_cpu(a.view(), b.view(), repeats));
    let c_cpu = c_cpu?;
    println!("CPU Time: {} s", cpu_ms / 1e3);
    let size = format!("{n} × {repeats} repeats");
    let Some(gpu) = gpu else {
        let mut row = Row::new("vector_sum_repeat (CPU only)", size, no_gpu());
        row.cpu_ms = Some(cpu_ms);
        report.push(row);
        return Ok(());
    };
    let (c, t) = gpu.vector_sum_repeat(a.view(), b.view(), repeats)?;
    println!("GPU Kernel evaluation Time: {} s", t.kernel_ms / 1e3);
    println!("GPU Time: {} s", t.with_transfers_ms / 1e3);
    let norm = (&c - &c_cpu).mapv(|d| f64::from(d).powi(2)).sum().sqrt();
    println!("la.norm(cpu_result - gpu_result) = {norm}");
    let check = if norm < 1e-5 {
        Check::Pass(format!("‖cpu − gpu‖ = {norm} < 1e-5"))
    } else {
        Check::Fail(format!("‖cpu − gpu‖ = {norm}"))
    };
    let sums = n as f64 * f64::from(repeats);
    report.push(Row {
        kernel: "vector_sum_repeat".into(),
        size: size.clone(),
        gpu_ms: Some(t.kernel_ms as f64),
        cpu_ms: Some(cpu_ms),
        throughput: Some(format!("{:.1} Gsums/s", sums / (t.kernel_ms as f64 * 1e6))),
        check: check.clone(),
    });
    report.push(Row {
        kernel: "vector_sum_repeat + transfers".into(),
        size,
        gpu_ms: Some(t.with_transfers_ms as f64),
        cpu_ms: Some(cpu_ms),
        throughput: None,
        check,
    });
    Ok(())
}

fn gufunc(gpu: Option<&Gpu>, dim: usize, batch: &[usize], report: &mut Report) -> Result<()> {
    let mut rng = Rng::new(12);
    let mut a_shape = batch.to_vec();
    a_shape.extend([dim, dim]);
    let a = ArrayD::from_shape_simple_fn(IxDyn(&a_shape), || rng.below(10) as i64);
    let b = ArrayD::from_shape_simple_fn(IxDyn(&[dim, dim]), || rng.below(10) as i64);
    let (c_cpu, cpu_ms) = cpu_time(|| gufunc_matmul_i64_cpu(a.view(), b.view()));
    let c_cpu = c_cpu?;
    let small = a.len() <= 400;
    if small {
        println!("INPUT MATRIX A\n:\n{a}\nINPUT MATRIX B\n:\n{b}");
    }
    let mut row = Row::new(
        "gufunc_matmul_i64 (+ transfers)",
        format!("{a_shape:?}·[{dim}, {dim}]"),
        no_gpu(),
    );
    row.cpu_ms = Some(cpu_ms);
    if let Some(gpu) = gpu {
        let (c, ms) = GpuTimer::time(gpu.stream(), || gpu.gufunc_matmul_i64(a.view(), b.view()))?;
        if small {
            println!("RESULT MATRIX C = A*B\n:\n{c}");
        }
        row.gpu_ms = Some(ms as f64);
        row.check = exact_check(&c, &c_cpu);
    }
    report.push(row);
    Ok(())
}

/// Median kernel time of `reps` runs of `work` after one warm-up.
fn median_ms(gpu: &Gpu, reps: usize, mut work: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut times = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let ((), ms) = GpuTimer::time(gpu.stream(), &mut work)?;
        if rep > 0 {
            times.push(ms);
        }
    }
    Ok(median(&mut times) as f64)
}

/// The environment variable through which a cuBLAS SGEMM measurement at
/// 4096³ (GFLOP/s, TF32 off, timed in the same session by the caller, e.g.
/// with PyTorch) can be handed to `bench`, which then reports
/// `matrix_mul_tiled`'s ratio to it.
pub const CUBLAS_SGEMM_ENV: &str = "CUDA_KERNELS_CUBLAS_SGEMM_4096_GFLOPS";

/// The matrices part of `cuda-kernels bench`: the naive and tiled products
/// at 1024³ and 4096³ (and 4000³, not a multiple of the tile), the gufunc on
/// a batch of 10×10 matrices, and
/// `vector_sum_repeat` at the seed's size.
pub fn bench(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    gpu.bind()?;
    let mut rng = Rng::new(5);
    let cublas = std::env::var(CUBLAS_SGEMM_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok());
    for (size, kernels, reps) in [
        (
            1024usize,
            &[MatmulKernel::Naive, MatmulKernel::Tiled][..],
            20,
        ),
        (4096, &[MatmulKernel::Naive, MatmulKernel::Tiled][..], 5),
        (4000, &[MatmulKernel::Tiled][..], 5),
    ] {
        let n = size * size;
        let a: Vec<f32> = (0..n).map(|_| rng.normal() as f32).collect();
        let da = DeviceBuffer::from_slice(&a).during("bench", "copy A")?;
        let db = DeviceBuffer::from_slice(&a).during("bench", "copy B")?;
        let mut dc = DeviceBuffer::<f32>::zeroed(n).during("bench", "allocate C")?;
        for &kernel in kernels {
            let reps = if kernel == MatmulKernel::Tiled {
                reps * 4
            } else {
                reps
            };
            let ms = median_ms(gpu, reps, || {
                gpu.matmul_on_device(kernel, &da, &db, &mut dc, size, size, size)
            })?;
            let gflops = 2.0 * (size as f64).powi(3) / (ms * 1e6);
            let with_ref = size == 4096 && kernel == MatmulKernel::Tiled;
            records.push(BenchRecord {
                kernel: kernel.entry().into(),
                size: format!("{size}³ f32"),
                median_ms: ms,
                metric: "GFLOP/s".into(),
                value: gflops,
                reference: cublas
                    .filter(|_| with_ref)
                    .map(|_| "cuBLAS SGEMM (TF32 off)".into()),
                ratio: cublas.filter(|_| with_ref).map(|c| gflops / c),
            });
        }
    }

    // The bandwidth-bound kernels (saxpy, sum, doubles_matrix, …) are in
    // the bandwidth module's rows.

    // The gufunc on 4096 matrices of 10×10 (including transfers).
    let a = ArrayD::from_shape_simple_fn(IxDyn(&[4096, 10, 10]), || rng.below(10) as i64);
    let b = ArrayD::from_shape_simple_fn(IxDyn(&[10, 10]), || rng.below(10) as i64);
    let ms = median_ms(gpu, 10, || {
        gpu.gufunc_matmul_i64(a.view(), b.view()).map(|_| ())
    })?;
    records.push(BenchRecord {
        kernel: "gufunc_matmul_i64 (+ transfers)".into(),
        size: "4096×10×10 · 10×10".into(),
        median_ms: ms,
        metric: "Gop/s".into(),
        value: 2.0 * 4096.0 * 1000.0 / (ms * 1e6),
        reference: None,
        ratio: None,
    });

    // The seed's evaluation kernel.
    let a: Array1<f32> = (0..10_000).map(|_| rng.uniform() as f32).collect();
    let mut times = Vec::new();
    for rep in 0..6 {
        let (_, t) = gpu.vector_sum_repeat(a.view(), a.view(), 10_000)?;
        if rep > 0 {
            times.push(t.kernel_ms);
        }
    }
    let ms = median(&mut times) as f64;
    records.push(BenchRecord {
        kernel: "vector_sum_repeat".into(),
        size: "10000 × 10000 repeats".into(),
        median_ms: ms,
        metric: "Gsums/s".into(),
        value: 1e8 / (ms * 1e6),
        reference: None,
        ratio: None,
    });
    Ok(())
}
