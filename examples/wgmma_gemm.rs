//! The Hopper wgmma GEMM (sm_90a): checked, then timed with CUDA events.
//!
//! Checks: bf16, f16 and tf32 inputs that are small multiples of 1/8 (exact
//! in every input type, so every product and every f32 partial sum is exact
//! for k < 2^17): the result must equal the f64 reference exactly, at shapes
//! with edges in m, n and k, with alpha and beta, and strided batches.
//! Timings: `cuda-kernels`' kernel at 2048³, 4096³, 8192³ (bf16, f16) and
//! 4096³ (tf32), TFLOP/s of the median of 20 launches after 3 warm-ups.
//!
//! `cargo run --release --example wgmma_gemm [sizes…]` (`0`: checks only);
//! `WGMMA_CASES=Bf16,Tf32` runs those input types only, `WGMMA_GROUP_M=8`
//! sets the grouped tile order's rows.
use cuda_kernels::gemm_wgmma::{WgmmaInput, WgmmaShape};
use cuda_kernels::prelude::*;
use cuda_kernels::timing::{GpuTimer, median};
use cuda_kernels::util::Rng;

/// The bits of `v` (a small multiple of 1/8, |v| ≤ 1: exact) as `input`'s
/// 16-bit word; tf32 operands are f32 and not converted.
fn bits16(input: WgmmaInput, v: f32) -> u16 {
    let b = v.to_bits();
    match input {
        WgmmaInput::Bf16 => (b >> 16) as u16,
        _ if v == 0.0 => 0,
        _ => {
            let sign = ((b >> 31) as u16) << 15;
            let exp = ((b >> 23) & 0xFF) as i32 - 127 + 15;
            sign | ((exp as u16) << 10) | ((b >> 13) & 0x3FF) as u16
        }
    }
}

struct Case {
    input: WgmmaInput,
    shape: WgmmaShape,
    alpha: f32,
    beta: f32,
}

/// Runs one case and compares it with the exact reference; returns the
/// number of elements that differ.
fn check(gpu: &cuda_kernels::Gpu, rng: &mut Rng, case: &Case) -> cuda_kernels::Result<usize> {
    let s = case.shape;
    let len = |rows: usize, ld: usize, stride: usize| (s.batches - 1) * stride + rows * ld;
    let mut value = || (rng.below(17) as f32 - 8.0) / 8.0;
    let a: Vec<f32> = (0..len(s.m, s.lda, s.a_batch_stride))
        .map(|_| value())
        .collect();
    let b: Vec<f32> = (0..len(s.n, s.ldb, s.b_batch_stride))
        .map(|_| value())
        .collect();
    let c0: Vec<f32> = (0..len(s.m, s.ldc, s.c_batch_stride))
        .map(|_| value())
        .collect();
    let mut c = gpu.to_device(&c0)?;
    match case.input {
        WgmmaInput::Tf32 => {
            let (da, db) = (gpu.to_device(&a)?, gpu.to_device(&b)?);
            gpu.gemm_wgmma(case.input, &da, &db, &mut c, &s, case.alpha, case.beta)?;
        }
        input => {
            let to16 = |x: &[f32]| x.iter().map(|&v| bits16(input, v)).collect::<Vec<_>>();
            let (da, db) = (gpu.to_device(&to16(&a))?, gpu.to_device(&to16(&b))?);
            gpu.gemm_wgmma(case.input, &da, &db, &mut c, &s, case.alpha, case.beta)?;
        }
    }
    let mut got = vec![0f32; c.len()];
    c.copy_to(&mut got)?;
    let mut wrong = 0;
    for batch in 0..s.batches {
        for i in 0..s.m {
            for j in 0..s.n {
                let mut dot = 0f64;
                for p in 0..s.k {
                    let bj = j * s.ldb + p;
                    dot += f64::from(a[batch * s.a_batch_stride + i * s.lda + p])
                        * f64::from(b[batch * s.b_batch_stride + bj]);
                }
                let at = batch * s.c_batch_stride + i * s.ldc + j;
                let want = f64::from(case.alpha) * dot + f64::from(case.beta) * f64::from(c0[at]);
                if f64::from(got[at]) != want {
                    if wrong < 5 {
                        println!("  [{batch}][{i}][{j}] = {} want {want}", got[at]);
                    }
                    wrong += 1;
                }
            }
        }
        // Outside the m × n block of each row, C is untouched.
        for i in 0..s.m {
            for j in s.n..s.ldc {
                let at = batch * s.c_batch_stride + i * s.ldc + j;
                if got[at] != c0[at] {
                    wrong += 1;
                }
            }
        }
    }
    Ok(wrong)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let gpu = cuda_kernels::gpu()?;
    println!("device: {}, image: {}", gpu.name()?, gpu.image());
    let mut rng = Rng::new(21);
    let mut failed = 0;
    for input in [WgmmaInput::Bf16, WgmmaInput::F16, WgmmaInput::Tf32] {
        let cases = std::env::var("WGMMA_CASES").unwrap_or_default();
        let name = format!("{input:?}");
        if !cases.is_empty() && !cases.split(',').any(|c| name.starts_with(c)) {
            continue;
        }
        let edge = WgmmaShape::dense(300, 520, 200);
        let mut padded = WgmmaShape::dense(130, 270, 96);
        padded.lda = 104;
        padded.ldb = 112;
        padded.ldc = 280;
        padded.batches = 3;
        padded.a_batch_stride = 130 * 104 + 8;
        padded.b_batch_stride = 270 * 112 + 16;
        padded.c_batch_stride = 130 * 280 + 5;
        for (shape, alpha, beta) in [
            (WgmmaShape::dense(128, 256, 64), 1.0, 0.0),
            (edge, 1.5, 0.5),
            (WgmmaShape::dense(1000, 1000, 1000), 1.0, 0.0),
            (padded, -0.5, 2.0),
        ] {
            let case = Case {
                input,
                shape,
                alpha,
                beta,
            };
            let wrong = check(&gpu, &mut rng, &case)?;
            println!(
                "check {input:?} m {} n {} k {} batches {} alpha {alpha} beta {beta}: {}",
                shape.m,
                shape.n,
                shape.k,
                shape.batches,
                if wrong == 0 {
                    "exact".to_string()
                } else {
                    format!("{wrong} WRONG")
                }
            );
            failed += usize::from(wrong > 0);
        }
    }

    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let no_timing = sizes == [0];
    let sizes = if sizes.is_empty() {
        vec![2048, 4096, 8192]
    } else {
        sizes
    };
    for input in [WgmmaInput::Bf16, WgmmaInput::F16, WgmmaInput::Tf32] {
        let cases = std::env::var("WGMMA_CASES").unwrap_or_default();
        let name = format!("{input:?}");
        if !cases.is_empty() && !cases.split(',').any(|c| name.starts_with(c)) {
            continue;
        }
        for &n in &sizes {
            if no_timing || input == WgmmaInput::Tf32 && n != 4096 {
                continue;
            }
            let shape = WgmmaShape::dense(n, n, n);
            let mut c = gpu.zeroed::<f32>(n * n)?;
            let ms = if input == WgmmaInput::Tf32 {
                let a: Vec<f32> = (0..n * n).map(|_| rng.normal() as f32).collect();
                let (da, db) = (gpu.to_device(&a)?, gpu.to_device(&a)?);
                time(&gpu, input, &da, &db, &mut c, &shape)?
            } else {
                let a: Vec<u16> = (0..n * n)
                    .map(|_| bits16(input, (rng.below(17) as f32 - 8.0) / 8.0))
                    .collect();
                let (da, db) = (gpu.to_device(&a)?, gpu.to_device(&a)?);
                time(&gpu, input, &da, &db, &mut c, &shape)?
            };
            let tflops = 2.0 * (n as f64).powi(3) / (f64::from(ms) * 1e-3) / 1e12;
            println!("time {input:?} {n}^3: {ms:.4} ms, {tflops:.1} TFLOP/s");
        }
    }
    if failed > 0 {
        return Err(format!("{failed} checks failed").into());
    }
    Ok(())
}

fn time<T: cuda_kernels::cust::memory::DeviceCopy>(
    gpu: &cuda_kernels::Gpu,
    input: WgmmaInput,
    a: &cuda_kernels::memory::DeviceSlice<T>,
    b: &cuda_kernels::memory::DeviceSlice<T>,
    c: &mut cuda_kernels::memory::DeviceSlice<f32>,
    shape: &WgmmaShape,
) -> cuda_kernels::Result<f32> {
    let mut gemm = gpu.gemm_wgmma_plan(input, a, b, c, shape, 1.0, 0.0)?;
    if let Some(g) = std::env::var("WGMMA_GROUP_M")
        .ok()
        .and_then(|g| g.parse().ok())
    {
        gemm.set_group_m(g);
    }
    for _ in 0..3 {
        gemm.launch(gpu)?;
    }
    gpu.synchronize("gemm_wgmma")?;
    let timer = GpuTimer::on(gpu)?;
    let mut times = Vec::new();
    for _ in 0..20 {
        timer.start(gpu.stream())?;
        gemm.launch(gpu)?;
        timer.stop(gpu.stream())?;
        times.push(timer.elapsed_ms()?);
    }
    Ok(median(&mut times))
}
