//! The Hopper wgmma GEMM (sm_90a) in every layout: checked, then timed with
//! CUDA events.
//!
//! Checks: inputs that are small multiples of 1/8 (exact in bf16, f16 and
//! tf32, so every product and every f32 partial sum is exact for k < 2^17):
//! with f32 output the result must equal the f64 reference exactly, at
//! shapes with edges in m, n and k, with alpha and beta, and strided
//! batches (and 1000³ in NT), for NN, NT, TN and TT (tf32: NT, the one layout wgmma reads
//! it in); with 16-bit output it must equal the reference rounded once.
//! Timings: bf16 and f16 at 2048³, 4096³, 8192³ in each layout, and tf32 NT
//! at 4096³, TFLOP/s of the median of 20 launches after 3 warm-ups.
//!
//! `cargo run --release --example wgmma_gemm [sizes…]` (`0`: checks only);
//! `WGMMA_CASES=bf16,tf32` runs those input types only, `WGMMA_GROUP_M=8`
//! sets the grouped tile order's rows.
use cuda_kernels::gemm_wgmma::WgmmaGemmExt;
use cuda_kernels::matrices::{GemmInput, GemmOutput, GemmShape, Op};
use cuda_kernels::timing::{GpuTimer, median};
use cuda_kernels::util::Rng;
use half::{bf16, f16};

const LAYOUTS: [(Op, Op); 4] = [
    (Op::N, Op::N),
    (Op::N, Op::T),
    (Op::T, Op::N),
    (Op::T, Op::T),
];

/// Whether `WGMMA_CASES` asks for the input type `name`.
fn wanted(name: &str) -> bool {
    let cases = std::env::var("WGMMA_CASES").unwrap_or_default();
    cases.is_empty() || cases.split(',').any(|c| c.eq_ignore_ascii_case(name))
}

/// Elements a buffer of `(rows, cols)` matrices with leading dimension `ld`
/// and batch stride `stride` spans.
fn span(shape: &GemmShape, (rows, cols): (usize, usize), ld: usize, stride: usize) -> usize {
    (shape.batches - 1) * stride + (rows - 1) * ld + cols
}

/// Runs one case through the wgmma plan and compares it with the exact
/// reference (rounded once to the output type); returns the number of
/// elements that differ.
fn check<I: GemmInput, O: GemmOutput<I>>(
    gpu: &cuda_kernels::Gpu,
    rng: &mut Rng,
    shape: &GemmShape,
    alpha: f32,
    beta: f32,
    from: impl Fn(f32) -> I,
    out: impl Fn(f32) -> O,
) -> cuda_kernels::Result<usize> {
    let s = *shape;
    let mut value = || (rng.below(17) as f32 - 8.0) / 8.0;
    let a: Vec<f32> = (0..span(&s, s.a_stored(), s.lda, s.stride_a))
        .map(|_| value())
        .collect();
    let b: Vec<f32> = (0..span(&s, s.b_stored(), s.ldb, s.stride_b))
        .map(|_| value())
        .collect();
    let c0: Vec<f32> = (0..span(&s, (s.m, s.n), s.ldc, s.stride_c))
        .map(|_| value())
        .collect();
    let da = gpu.to_device(&a.iter().map(|&v| from(v).to_dev()).collect::<Vec<_>>())?;
    let db = gpu.to_device(&b.iter().map(|&v| from(v).to_dev()).collect::<Vec<_>>())?;
    let c0o: Vec<O::Dev> = c0.iter().map(|&v| out(v).to_dev()).collect();
    let mut c = gpu.to_device(&c0o)?;
    gpu.gemm_wgmma_plan::<I, O>(&s, alpha, &da, &db, beta, &mut c)?
        .launch()?;
    gpu.synchronize("gemm_wgmma")?;
    let got: Vec<f64> = c
        .to_vec()?
        .into_iter()
        .map(|d| O::from_dev(d).to_f64())
        .collect();
    let at_a = |i: usize, p: usize| match s.op_a {
        Op::N => i * s.lda + p,
        Op::T => p * s.lda + i,
    };
    let at_b = |p: usize, j: usize| match s.op_b {
        Op::N => p * s.ldb + j,
        Op::T => j * s.ldb + p,
    };
    let mut wrong = 0;
    for batch in 0..s.batches {
        for i in 0..s.m {
            for j in 0..s.n {
                let mut dot = 0f64;
                for p in 0..s.k {
                    dot += f64::from(a[batch * s.stride_a + at_a(i, p)])
                        * f64::from(b[batch * s.stride_b + at_b(p, j)]);
                }
                let at = batch * s.stride_c + i * s.ldc + j;
                let exact = f64::from(alpha) * dot + f64::from(beta) * f64::from(c0[at]);
                // Exact in f32 (small multiples of 1/8), then rounded once.
                let want = out(exact as f32).to_f64();
                if got[at] != want {
                    if wrong < 5 {
                        println!("  [{batch}][{i}][{j}] = {} want {want}", got[at]);
                    }
                    wrong += 1;
                }
            }
            // Outside the m × n block of each row, C is untouched.
            if i + 1 < s.m || batch + 1 < s.batches {
                for j in s.n..s.ldc {
                    let at = batch * s.stride_c + i * s.ldc + j;
                    if at < got.len() && got[at] != out(c0[at]).to_f64() {
                        wrong += 1;
                    }
                }
            }
        }
    }
    Ok(wrong)
}

/// The check's shapes for one layout: a single tile, edges in every
/// dimension, a large square, and padded leading dimensions with 3 strided
/// batches.
fn shapes(op_a: Op, op_b: Op) -> Vec<(GemmShape, f32, f32)> {
    // The plan reads its operands through TMA, which needs 16-byte rows: the
    // stored rows are rounded up to 8 elements (A stored k × m for m = 300
    // in TN would otherwise be refused; `gemm_on_device` stages such
    // operands instead).
    let with = |m, n, k| {
        let mut s = GemmShape::with_ops(m, n, k, op_a, op_b);
        s.lda = s.a_stored().1.next_multiple_of(8);
        s.ldb = s.b_stored().1.next_multiple_of(8);
        s.stride_a = s.a_stored().0 * s.lda;
        s.stride_b = s.b_stored().0 * s.ldb;
        s
    };
    let mut padded = with(130, 270, 96);
    // Padded past the row, still whole 16-byte rows (TMA's rule).
    padded.lda = padded.a_stored().1.next_multiple_of(8) + 8;
    padded.ldb = padded.b_stored().1.next_multiple_of(8) + 16;
    padded.ldc = 280;
    padded.batches = 3;
    padded.stride_a = padded.a_stored().0 * padded.lda + 8;
    padded.stride_b = padded.b_stored().0 * padded.ldb + 16;
    padded.stride_c = 130 * 280 + 5;
    let mut shapes = vec![
        (with(128, 256, 64), 1.0, 0.0),
        (with(300, 520, 200), 1.5, 0.5),
        (padded, -0.5, 2.0),
    ];
    // A large square in the layout the kernel was first written for (the
    // CPU's f64 reference takes seconds a case).
    if (op_a, op_b) == (Op::N, Op::T) {
        shapes.push((with(1000, 1000, 1000), 1.0, 0.0));
    }
    shapes
}

fn checks(gpu: &cuda_kernels::Gpu, rng: &mut Rng) -> cuda_kernels::Result<usize> {
    let mut failed = 0;
    let mut report = |what: String, wrong: usize| {
        println!(
            "check {what}: {}",
            if wrong == 0 {
                "exact".to_string()
            } else {
                format!("{wrong} WRONG")
            }
        );
        failed += usize::from(wrong > 0);
    };
    for (op_a, op_b) in LAYOUTS {
        for (s, alpha, beta) in shapes(op_a, op_b) {
            let what = |t: &str| {
                format!(
                    "{t} {op_a:?}{op_b:?} m {} n {} k {} batches {} alpha {alpha} beta {beta}",
                    s.m, s.n, s.k, s.batches
                )
            };
            if wanted("bf16") {
                let w = check(gpu, rng, &s, alpha, beta, bf16::from_f32, |x| x)?;
                report(what("bf16 -> f32"), w);
                let w = check(gpu, rng, &s, alpha, beta, bf16::from_f32, bf16::from_f32)?;
                report(what("bf16 -> bf16"), w);
            }
            if wanted("f16") {
                let w = check(gpu, rng, &s, alpha, beta, f16::from_f32, |x| x)?;
                report(what("f16 -> f32"), w);
                let w = check(gpu, rng, &s, alpha, beta, f16::from_f32, f16::from_f32)?;
                report(what("f16 -> f16"), w);
            }
            if wanted("tf32") && (op_a, op_b) == (Op::N, Op::T) {
                let w = check(gpu, rng, &s, alpha, beta, |x| x, |x| x)?;
                report(what("tf32 -> f32"), w);
            }
        }
    }
    Ok(failed)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let gpu = cuda_kernels::gpu()?;
    println!("device: {}, image: {}", gpu.name()?, gpu.image());
    let mut rng = Rng::new(21);
    let failed = checks(&gpu, &mut rng)?;
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = match sizes.as_slice() {
        [0] => vec![],
        [] => vec![2048, 4096, 8192],
        _ => sizes,
    };
    for &n in &sizes {
        for (op_a, op_b) in LAYOUTS {
            let shape = GemmShape::with_ops(n, n, n, op_a, op_b);
            if wanted("bf16") {
                let ms = time::<bf16>(&gpu, &mut rng, &shape, bf16::from_f32)?;
                print_time("bf16", &shape, ms);
            }
            if wanted("f16") {
                let ms = time::<f16>(&gpu, &mut rng, &shape, f16::from_f32)?;
                print_time("f16", &shape, ms);
            }
            if wanted("tf32") && n == 4096 && (op_a, op_b) == (Op::N, Op::T) {
                let ms = time::<f32>(&gpu, &mut rng, &shape, |x| x)?;
                print_time("tf32", &shape, ms);
            }
        }
    }
    if failed > 0 {
        return Err(format!("{failed} checks failed").into());
    }
    Ok(())
}

fn print_time(input: &str, s: &GemmShape, ms: f32) {
    let flops = 2.0 * s.m as f64 * s.n as f64 * s.k as f64;
    let tflops = flops / (f64::from(ms) * 1e-3) / 1e12;
    println!(
        "time {input} {:?}{:?} {}x{}x{}: {ms:.4} ms, {tflops:.1} TFLOP/s",
        s.op_a, s.op_b, s.m, s.n, s.k
    );
}

/// The median time of 20 launches of the plan (f32 output, normal inputs).
fn time<I: GemmInput>(
    gpu: &cuda_kernels::Gpu,
    rng: &mut Rng,
    shape: &GemmShape,
    from: impl Fn(f32) -> I,
) -> cuda_kernels::Result<f32>
where
    f32: GemmOutput<I, Dev = f32>,
{
    let data = |len: usize, rng: &mut Rng| -> Vec<I::Dev> {
        (0..len)
            .map(|_| from(rng.normal() as f32).to_dev())
            .collect()
    };
    let (ar, ac) = shape.a_stored();
    let (br, bc) = shape.b_stored();
    let a = gpu.to_device(&data(ar * ac, rng))?;
    let b = gpu.to_device(&data(br * bc, rng))?;
    let mut c = gpu.zeroed::<f32>(shape.m * shape.n)?;
    let mut gemm = gpu.gemm_wgmma_plan::<I, f32>(shape, 1.0, &a, &b, 0.0, &mut c)?;
    if let Some(g) = std::env::var("WGMMA_GROUP_M")
        .ok()
        .and_then(|g| g.parse().ok())
    {
        gemm.set_group_m(g);
    }
    for _ in 0..3 {
        gemm.launch()?;
    }
    gpu.synchronize("gemm_wgmma")?;
    let timer = GpuTimer::on(gpu)?;
    let mut times = Vec::new();
    for _ in 0..20 {
        timer.start(gpu.stream())?;
        gemm.launch()?;
        timer.stop(gpu.stream())?;
        times.push(timer.elapsed_ms()?);
    }
    Ok(median(&mut times))
}
