//! The matrices demos: `doubles_matrix`, the matrix products, elementwise
//! kernels, the CPU-vs-GPU evaluation, the int64 gufunc matmul; and their
//! benchmarks.
use std::path::Path;

use ndarray::{Array1, Array2, ArrayD, IxDyn};

use super::foundation::size_label;
use super::{
    BenchRecord, Check, Report, Row, cpu_time, exact_check, gpu_time, median_gpu_ms, no_gpu, sized,
};
use crate::DeviceBuffer;
use crate::cublas::Cublas;
use crate::matrices::kernels::{lerp, saxpy, sum};
use crate::matrices::{
    MatmulKernel, MatmulReference, allclose, check_matmul, doubles_matrix_cpu, elementwise_cpu,
    gufunc_matmul_i64_cpu, matmul_cpu, vector_sum_repeat_cpu,
};
use crate::timing::median;
use crate::util::Rng;
use crate::{Gpu, Result};
use cuda_kernels::prelude::*;

/// The matrices subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Doubles a rows × cols f32 matrix in place, 2-D blocks (the seed's 5×5).
    DoublesMatrix {
        /// Rows.
        #[arg(long, default_value_t = 5)]
        rows: usize,
        /// Columns.
        #[arg(long, default_value_t = 5)]
        cols: usize,
    },
    /// C = A·B on f32 with the naive and the tiled kernel (the seed's 5×5).
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
    /// Elementwise kernels from an expression: c = a + b on i32 (the
    /// seed's), saxpy and a three-array lerp on f32.
    Elementwise {
        /// Elements of the i32 sum (the seed's 100); saxpy and lerp use 2^20.
        #[arg(long, default_value_t = 100)]
        n: usize,
    },
    /// CPU vs GPU, every element summed `repeats` times.
    VectorSumRepeat {
        /// Elements.
        #[arg(long, default_value_t = 10_000)]
        n: usize,
        /// Repetitions per element.
        #[arg(long, default_value_t = 10_000)]
        repeats: u32,
    },
    /// Int64 gufunc matmul (m,n),(n,p)->(m,p) on randint(10) matrices.
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
    let m = sized(gpu, 1024, 129);
    matmul(gpu, m, m, m, report)?;
    elementwise(gpu, 100, report)?;
    repeat(gpu, 10_000, sized(gpu, 10_000, 100) as u32, report)?;
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
        let ((), ms) = gpu_time(gpu, || gpu.doubles_matrix_in_place(doubled.view_mut()))?;
        if small {
            println!("DOUBLED MATRIX AFTER GPU EXECUTION\n{doubled}");
        }
        row.gpu_ms = ms;
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
        // Warm-up, then the timed run (on the simulator: one untimed run).
        let (c, kernel_ms) = if gpu.is_simulated() {
            let c = match kernel {
                MatmulKernel::Naive => gpu.matrix_mul_naive(a.view(), b.view())?,
                MatmulKernel::Tiled => gpu.matrix_mul_tiled(a.view(), b.view())?,
            };
            (c, None)
        } else {
            gpu.matmul_timed(kernel, a.view(), b.view())?;
            let (c, t) = gpu.matmul_timed(kernel, a.view(), b.view())?;
            (c, Some(f64::from(t.kernel_ms)))
        };
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
                "{}within the √k bound (max err {:.1e})",
                if seed_allclose { "allclose, " } else { "" },
                chk.max_abs_error
            ))
        } else {
            Check::Fail(format!("{chk:?}"))
        };
        report.push(Row {
            kernel: kernel.entry().into(),
            size: size.clone(),
            gpu_ms: kernel_ms,
            cpu_ms: Some(cpu_ms),
            throughput: kernel_ms.map(|ms| format!("{:.1} GFLOP/s", flop / (ms * 1e6))),
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
        let ((), ms) = gpu_time(gpu, || {
            gpu.elementwise_sum(a.view(), b.view(), c.view_mut())
        })?;
        println!("ELEMENTWISE SUM OF TWO VECTORS\nVECTOR LENGTH = {n}");
        if n <= 100 {
            println!("INPUT VECTOR A\n{a}\nINPUT VECTOR B\n{b}\nOUTPUT VECTOR RESULT A + B\n{c}");
        }
        row.gpu_ms = ms;
        row.check = exact_check(&c, &expected);
    }
    report.push(row);

    // saxpy and a three-array expression, on 2^20 f32.
    let m = sized(gpu, 1 << 20, (1 << 18) + 3);
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
    let size = size_label(m);
    let mut saxpy_row = Row::new("elementwise_saxpy_f32 (+ transfers)", &size, no_gpu());
    saxpy_row.cpu_ms = Some(saxpy_cpu_ms);
    let mut lerp_row = Row::new("elementwise_lerp_f32 (+ transfers)", size, no_gpu());
    lerp_row.cpu_ms = Some(lerp_cpu_ms);
    if let Some(gpu) = gpu {
        let mut y = y0.clone();
        let ((), ms) = gpu_time(gpu, || {
            gpu.elementwise_saxpy(x.view(), y.view_mut(), 2.0f32)
        })?;
        saxpy_row.gpu_ms = ms;
        saxpy_row.check = exact_check(&y, &y_cpu);
        let mut out = Array1::<f32>::zeros(m);
        let ((), ms) = gpu_time(gpu, || {
            gpu.elementwise_lerp(x.view(), y0.view(), t.view(), out.view_mut())
        })?;
        lerp_row.gpu_ms = ms;
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
    if gpu.is_simulated() {
        let c = gpu.vector_sum_repeat(a.view(), b.view(), repeats)?;
        let norm = (&c - &c_cpu).mapv(|d| f64::from(d).powi(2)).sum().sqrt();
        println!("la.norm(cpu_result - gpu_result) = {norm} (simulated)");
        let mut row = Row::new("vector_sum_repeat", size, repeat_check(&c, &c_cpu));
        row.cpu_ms = Some(cpu_ms);
        report.push(row);
        return Ok(());
    }
    let (c, t) = gpu.vector_sum_repeat_timed(a.view(), b.view(), repeats)?;
    println!("GPU Kernel evaluation Time: {} s", t.kernel_ms / 1e3);
    println!("GPU Time: {} s", t.with_transfers_ms / 1e3);
    let norm = (&c - &c_cpu).mapv(|d| f64::from(d).powi(2)).sum().sqrt();
    println!("la.norm(cpu_result - gpu_result) = {norm}");
    let check = repeat_check(&c, &c_cpu);
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
        let (c, ms) = gpu_time(gpu, || gpu.gufunc_matmul_i64(a.view(), b.view()))?;
        if small {
            println!("RESULT MATRIX C = A*B\n:\n{c}");
        }
        row.gpu_ms = ms;
        row.check = exact_check(&c, &c_cpu);
    }
    report.push(row);
    Ok(())
}

/// One SGEMM size `bench` measures: C (m × n) = A (m × k) · B (k × n) on
/// f32, with the kernels to time (each against cuBLAS at the same size when
/// the library is there) and the repetitions (the tiled kernel gets 4×).
/// To add a size or a kernel, add a line to [`SGEMM_CASES`].
#[derive(Debug, Clone, Copy)]
pub struct SgemmCase {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of A = rows of B.
    pub k: usize,
    /// Columns of B and C.
    pub n: usize,
    /// The kernels timed.
    pub kernels: &'static [MatmulKernel],
    /// Timed repetitions (after one warm-up).
    pub reps: usize,
}

/// The SGEMM sizes of `cuda-kernels bench`: 1024³ (64 tiles of 128², fewer
/// than an H100's 132 SMs), 4000³ (not a multiple of the tile) and 4096³.
pub const SGEMM_CASES: &[SgemmCase] = &[
    SgemmCase {
        m: 1024,
        k: 1024,
        n: 1024,
        kernels: &[MatmulKernel::Naive, MatmulKernel::Tiled],
        reps: 20,
    },
    SgemmCase {
        m: 4000,
        k: 4000,
        n: 4000,
        kernels: &[MatmulKernel::Tiled],
        reps: 5,
    },
    SgemmCase {
        m: 4096,
        k: 4096,
        n: 4096,
        kernels: &[MatmulKernel::Naive, MatmulKernel::Tiled],
        reps: 5,
    },
];

/// How cuBLAS's SGEMM rows are named, and what the kernels' ratios are to.
pub const CUBLAS_SGEMM: &str = "cuBLAS SGEMM (TF32 off)";

/// The SGEMM part of `cuda-kernels bench`: each case's kernels and cuBLAS
/// (loaded with `dlopen`, when the machine has it) timed on the same device
/// buffers, each result copied back and checked against the exact product
/// ([`MatmulReference`], computed once per case).
fn bench_sgemm(gpu: &Gpu, rng: &mut Rng, records: &mut Vec<BenchRecord>) -> Result<()> {
    let cublas = match Cublas::find() {
        Ok(lib) => {
            let c = Cublas::new(gpu, lib)?;
            eprintln!(
                "cuBLAS: {}{}",
                c.path().display(),
                if Cublas::tf32_override() {
                    " (warning: NVIDIA_TF32_OVERRIDE=1 turns TF32 on)"
                } else {
                    ""
                }
            );
            Some(c)
        }
        Err(why) => {
            eprintln!("note: cuBLAS missing, SGEMM ratios not measured: {why}");
            None
        }
    };
    for case in SGEMM_CASES {
        let SgemmCase { m, k, n, reps, .. } = *case;
        let a = randn2(m, k, rng);
        let b = randn2(k, n, rng);
        let da = gpu.to_device(a.as_slice().unwrap_or(&[]))?;
        let db = gpu.to_device(b.as_slice().unwrap_or(&[]))?;
        let mut dc = gpu.zeroed::<f32>(m * n)?;
        let (reference, ref_ms) = cpu_time(|| MatmulReference::new(a.view(), b.view()));
        let reference = reference?;
        eprintln!(
            "SGEMM {m}×{k}·{k}×{n}: exact reference in {:.1} s",
            ref_ms / 1e3
        );
        let size = if m == k && k == n {
            format!("{m}³ f32")
        } else {
            format!("{m}×{k}·{k}×{n} f32")
        };
        let gflops = |ms: f64| 2.0 * (m * k * n) as f64 / (ms * 1e6);
        // Copies C back, zeroes it (so that a kernel that writes nothing
        // cannot pass on the previous one's result), checks it.
        let checked = |dc: &mut DeviceBuffer<f32>| -> Result<Check> {
            let mut c = Array2::<f32>::zeros((m, n));
            dc.copy_to(c.as_slice_mut().unwrap_or(&mut []))?;
            dc.set_32(0)?;
            let chk = reference.check(c.view())?;
            Ok(if chk.passed() {
                Check::Pass(format!(
                    "max err {:.1e}, {:.3} of the √k bound",
                    chk.max_abs_error, chk.worst_ratio
                ))
            } else {
                Check::Fail(format!("{chk:?}"))
            })
        };
        let cublas_gflops = match &cublas {
            Some(cb) => {
                let ms = median_gpu_ms(gpu, 1, reps * 4, || {
                    cb.sgemm_row_major(&da, &db, &mut dc, m, k, n)
                })? as f64;
                let check = checked(&mut dc)?;
                let record =
                    BenchRecord::new(CUBLAS_SGEMM, &size, ms, "GFLOP/s", gflops(ms), check);
                let ok = !record.failed();
                records.push(record);
                // A wrong cuBLAS result is no reference.
                ok.then_some(gflops(ms))
            }
            None => None,
        };
        for &kernel in case.kernels {
            let reps = if kernel == MatmulKernel::Tiled {
                reps * 4
            } else {
                reps
            };
            let ms = median_gpu_ms(gpu, 1, reps, || {
                gpu.matmul_on_device(kernel, &da, &db, &mut dc, m, k, n)
            })? as f64;
            let check = checked(&mut dc)?;
            let record = BenchRecord::new(kernel.entry(), &size, ms, "GFLOP/s", gflops(ms), check);
            records.push(match (&cublas, cublas_gflops) {
                (_, Some(reference)) => record.against(CUBLAS_SGEMM, gflops(ms) / reference),
                (None, _) => BenchRecord {
                    reference: Some("cuBLAS missing".into()),
                    ..record
                },
                (Some(_), None) => BenchRecord {
                    reference: Some("cuBLAS result wrong".into()),
                    ..record
                },
            });
        }
    }
    Ok(())
}

/// The matrices part of `cuda-kernels bench`: the SGEMM cases
/// ([`SGEMM_CASES`], against cuBLAS), saxpy and the f32 sum at 2^26 and
/// `doubles_matrix` at 8192² against a device-to-device copy of the same
/// bytes, the gufunc on a batch of 10×10 matrices, and `vector_sum_repeat`
/// at the seed's size; every result checked (exactly, except the products:
/// within [`MatmulReference`]'s bound).
pub fn bench(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    gpu.bind()?;
    let mut rng = Rng::new(5);
    bench_sgemm(gpu, &mut rng, records)?;

    // The bandwidth-bound kernels (saxpy, sum, doubles_matrix, …) are in
    // the bandwidth module's rows.

    // The gufunc on 4096 matrices of 10×10 (including transfers).
    let a = ArrayD::from_shape_simple_fn(IxDyn(&[4096, 10, 10]), || rng.below(10) as i64);
    let b = ArrayD::from_shape_simple_fn(IxDyn(&[10, 10]), || rng.below(10) as i64);
    let mut last = None;
    let ms = median_gpu_ms(gpu, 1, 10, || {
        last = Some(gpu.gufunc_matmul_i64(a.view(), b.view())?);
        Ok(())
    })? as f64;
    let expected = gufunc_matmul_i64_cpu(a.view(), b.view())?;
    let check = match last {
        Some(c) => exact_check(&c, &expected),
        None => Check::Fail("no result".into()),
    };
    records.push(BenchRecord::new(
        "gufunc_matmul_i64 (+ transfers)",
        "4096×10×10 · 10×10",
        ms,
        "Gop/s",
        2.0 * 4096.0 * 1000.0 / (ms * 1e6),
        check,
    ));

    // The seed's evaluation kernel.
    let a: Array1<f32> = (0..10_000).map(|_| rng.uniform() as f32).collect();
    let mut times = Vec::new();
    let mut last = None;
    for rep in 0..6 {
        let (c, t) = gpu.vector_sum_repeat_timed(a.view(), a.view(), 10_000)?;
        if rep > 0 {
            times.push(t.kernel_ms);
        }
        last = Some(c);
    }
    let ms = median(&mut times) as f64;
    let expected = vector_sum_repeat_cpu(a.view(), a.view(), 10_000)?;
    let check = match last {
        Some(c) => repeat_check(&c, &expected),
        None => Check::Fail("no result".into()),
    };
    records.push(BenchRecord::new(
        "vector_sum_repeat",
        "10000 × 10000 repeats",
        ms,
        "Gsums/s",
        1e8 / (ms * 1e6),
        check,
    ));
    Ok(())
}

/// The seed's check of `vector_sum_repeat`: ‖cpu − gpu‖₂ < 1e-5.
fn repeat_check(got: &Array1<f32>, expected: &Array1<f32>) -> Check {
    let norm = (got - expected).mapv(|d| f64::from(d).powi(2)).sum().sqrt();
    if norm < 1e-5 {
        Check::Pass(format!("‖cpu − gpu‖ = {norm} < 1e-5"))
    } else {
        Check::Fail(format!("‖cpu − gpu‖ = {norm}"))
    }
}
