//! The GEMM family's benchmark (`cuda-kernels bench`, part `gemm`): bf16 and
//! f16 (f32 output) and tf32 at 2048³, 4096³ and 8192³, NT (B stored
//! `n × k`), on the path the
//! device takes (named in the row: `CUDA_KERNELS_GEMM_PATH` forces one),
//! each against `cublasGemmEx` (`CUBLAS_COMPUTE_32F`, `…_FAST_TF32`) on the
//! same buffers and stream. Every element of both results is checked
//! ([`GemmVerifier`]): Freivalds projections of every row within the f32
//! accumulation's error model, and exact f64 elements at random within the
//! rigorous bound (a full f64 product at 8192³ would take the CPU minutes;
//! the 512 samples this replaced passed a dropped k-slab at 8192³ in half
//! of the runs, issue 40 item 6).
use super::{BenchRecord, Check, median_gpu_ms};
use crate::cublas::Cublas;
use crate::matrices::gemm_verify::GemmVerifier;
use crate::matrices::{GemmInput, GemmOutput, GemmShape, Op};
use crate::util::Rng;
use crate::{DeviceBuffer, Gpu, Result};
use cuda_kernels::prelude::*;

/// The sizes timed.
pub const GEMM_SIZES: [usize; 3] = [2048, 4096, 8192];

/// Freivalds projections per result (each one pass over C).
const PROJECTIONS: usize = 4;

/// Elements of C checked exactly per result.
const SAMPLES: usize = 16_384;

/// `c` checked by `verifier` (see the module docs).
fn full_check<I: GemmInput>(verifier: &GemmVerifier<'_, I>, c: &[f32]) -> Check
where
    f32: GemmOutput<I>,
{
    match verifier.check::<f32>(c, SAMPLES) {
        Ok(v) => Check::Pass(format!(
            "every row in {} projections (worst {:.2} of the bound), {} elements exact",
            v.projections, v.worst_ratio, v.samples
        )),
        Err(e) => Check::Fail(e.to_string()),
    }
}

fn bench_type<I: GemmInput>(
    gpu: &Gpu,
    cublas: Option<&Cublas>,
    from: impl Fn(f32) -> I,
    records: &mut Vec<BenchRecord>,
    rng: &mut Rng,
) -> Result<()>
where
    f32: GemmOutput<I, Dev = f32>,
{
    for size in GEMM_SIZES {
        let (m, n, k) = (size, size, size);
        let a: Vec<I> = (0..m * k)
            .map(|_| from(rng.uniform() as f32 * 2.0 - 1.0))
            .collect();
        let b: Vec<I> = (0..k * n)
            .map(|_| from(rng.uniform() as f32 * 2.0 - 1.0))
            .collect();
        let da = gpu.to_device(&a.iter().map(|v| v.to_dev()).collect::<Vec<_>>())?;
        let db = gpu.to_device(&b.iter().map(|v| v.to_dev()).collect::<Vec<_>>())?;
        let mut dc: DeviceBuffer<f32> = gpu.zeroed(m * n)?;
        // NT (A m × k, B stored n × k): the layout the wgmma kernel reads
        // (the device's path on an H100); cuBLAS gets the same.
        let shape = GemmShape::with_ops(m, n, k, Op::N, Op::T);
        let verifier = match GemmVerifier::new(&shape, &a, &b, PROJECTIONS, rng.next_u64()) {
            Ok(v) => v,
            Err(e) => return Err(crate::Error::invalid("gemm bench", e.to_string())),
        };
        let tflops = |ms: f64| 2.0 * (m * n * k) as f64 / (ms * 1e9);
        let reps = if size >= 8192 { 5 } else { 20 };
        let label = format!("{size}³ {} → f32", I::NAME);
        let checked = |dc: &mut DeviceBuffer<f32>| -> Result<Check> {
            let mut c = vec![0f32; m * n];
            dc.copy_to(&mut c[..])?;
            dc.set_32(0)?;
            Ok(full_check(&verifier, &c))
        };
        let reference = match cublas {
            Some(cb) => {
                let ms = median_gpu_ms(gpu, 2, reps, || {
                    cb.gemm_ex::<I, f32>(&shape, 1.0, &da, &db, 0.0, &mut dc)
                })? as f64;
                let check = checked(&mut dc)?;
                let name = format!("cuBLAS GemmEx {}", I::NAME);
                let record = BenchRecord::new(&name, &label, ms, "TFLOP/s", tflops(ms), check);
                let ok = !record.failed();
                records.push(record);
                ok.then_some((name, tflops(ms)))
            }
            None => None,
        };
        let mut path = None;
        let ms = median_gpu_ms(gpu, 2, reps, || {
            path = Some(gpu.gemm_on_device::<I, f32>(&shape, 1.0, &da, &db, 0.0, &mut dc)?);
            Ok(())
        })? as f64;
        let check = checked(&mut dc)?;
        let kernel = format!(
            "gemm {} ({})",
            I::NAME,
            path.map_or("no path", |p| p.name())
        );
        let record = BenchRecord::new(&kernel, &label, ms, "TFLOP/s", tflops(ms), check);
        records.push(match reference {
            Some((name, r)) => record.against(&name, tflops(ms) / r),
            None => BenchRecord {
                reference: Some("cuBLAS missing or wrong".into()),
                ..record
            },
        });
    }
    Ok(())
}

/// The GEMM part of `cuda-kernels bench` (see the module docs).
pub fn bench(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    gpu.bind()?;
    let cublas = match Cublas::find() {
        Ok(lib) => Some(Cublas::new(gpu, lib)?),
        Err(why) => {
            eprintln!("note: cuBLAS missing, GEMM ratios not measured: {why}");
            None
        }
    };
    let mut rng = Rng::new(21);
    bench_type(
        gpu,
        cublas.as_ref(),
        half::bf16::from_f32,
        records,
        &mut rng,
    )?;
    bench_type(gpu, cublas.as_ref(), half::f16::from_f32, records, &mut rng)?;
    bench_type(gpu, cublas.as_ref(), |x| x, records, &mut rng)
}
