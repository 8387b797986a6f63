//! The GEMM family's benchmark (`cuda-kernels bench`, part `gemm`): a table
//! of cases ([`GEMM_CASES`]) over every layout (NN, NT, TN, TT), input type
//! (bf16, f16, tf32) and output type (f32 or the 16-bit input type), square
//! sizes from 2048³ to 8192³, operands that are not 16-byte aligned (tight
//! leading dimensions of 4097, an A stored 8192 × 257), and a shape table
//! across deep k, skinny and non-square products and sizes just past a tile
//! multiple. Each case runs on the path the device takes (named in the row:
//! `CUDA_KERNELS_GEMM_PATH` forces one) and against `cublasGemmEx`
//! (`CUBLAS_COMPUTE_32F`, `…_FAST_TF32`) in the same layout and types, on
//! the same buffers and stream. Every element of both results is checked
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
use crate::{Gpu, Result};
use cuda_kernels::prelude::*;

/// The element types of a case: inputs and output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GemmTypes {
    /// bf16 inputs, f32 output.
    Bf16F32,
    /// f16 inputs, f32 output.
    F16F32,
    /// f32 inputs multiplied as tf32, f32 output.
    Tf32F32,
    /// bf16 inputs and output.
    Bf16Bf16,
    /// f16 inputs and output.
    F16F16,
}

impl GemmTypes {
    /// The input type's name (`bf16`, `f16`, `tf32`).
    pub fn input(self) -> &'static str {
        match self {
            Bf16F32 | Bf16Bf16 => "bf16",
            F16F32 | F16F16 => "f16",
            Tf32F32 => "tf32",
        }
    }

    /// The output type's name (`f32`, `bf16`, `f16`).
    pub fn output(self) -> &'static str {
        match self {
            Bf16F32 | F16F32 | Tf32F32 => "f32",
            Bf16Bf16 => "bf16",
            F16F16 => "f16",
        }
    }
}

/// The environment variable that picks cases of the table: a
/// comma-separated list of substrings of the rows' size column (`8192³ NN`,
/// `bf16 → bf16`); every case when unset.
pub const GEMM_CASES_ENV: &str = "CUDA_KERNELS_GEMM_CASES";

/// One timed GEMM of the table.
#[derive(Debug, Clone, Copy)]
pub struct GemmCase {
    /// The group the row belongs to (the README's table heading).
    pub group: &'static str,
    /// Element types.
    pub types: GemmTypes,
    /// How A and B are stored.
    pub ops: (Op, Op),
    /// `(m, n, k)`.
    pub mnk: (usize, usize, usize),
    /// Elements added to each stored row of A, B and C (0: tight): the
    /// padded twin of a tight case, whose speed the tight one is held to.
    pub pad: usize,
}

const fn case(
    group: &'static str,
    types: GemmTypes,
    ops: (Op, Op),
    mnk: (usize, usize, usize),
) -> GemmCase {
    GemmCase {
        group,
        types,
        ops,
        mnk,
        pad: 0,
    }
}

use GemmTypes::*;
use Op::{N, T};

/// Every case the bench times, in order.
pub const GEMM_CASES: &[GemmCase] = &[
    case("square NT", Bf16F32, (N, T), (2048, 2048, 2048)),
    case("square NT", Bf16F32, (N, T), (4096, 4096, 4096)),
    case("square NT", Bf16F32, (N, T), (8192, 8192, 8192)),
    case("square NT", F16F32, (N, T), (2048, 2048, 2048)),
    case("square NT", F16F32, (N, T), (4096, 4096, 4096)),
    case("square NT", F16F32, (N, T), (8192, 8192, 8192)),
    case("square NT", Tf32F32, (N, T), (2048, 2048, 2048)),
    case("square NT", Tf32F32, (N, T), (4096, 4096, 4096)),
    case("square NT", Tf32F32, (N, T), (8192, 8192, 8192)),
    case("layouts", Bf16F32, (N, N), (4096, 4096, 4096)),
    case("layouts", Bf16F32, (N, N), (8192, 8192, 8192)),
    case("layouts", Bf16F32, (T, N), (4096, 4096, 4096)),
    case("layouts", Bf16F32, (T, N), (8192, 8192, 8192)),
    case("layouts", Bf16F32, (T, T), (4096, 4096, 4096)),
    case("layouts", Bf16F32, (T, T), (8192, 8192, 8192)),
    case("layouts", F16F32, (N, N), (4096, 4096, 4096)),
    case("layouts", F16F32, (N, N), (8192, 8192, 8192)),
    case("layouts", F16F32, (T, N), (4096, 4096, 4096)),
    case("layouts", F16F32, (T, N), (8192, 8192, 8192)),
    case("layouts", F16F32, (T, T), (4096, 4096, 4096)),
    case("layouts", F16F32, (T, T), (8192, 8192, 8192)),
    case("layouts", Tf32F32, (N, N), (4096, 4096, 4096)),
    case("layouts", Tf32F32, (T, N), (4096, 4096, 4096)),
    case("layouts", Tf32F32, (T, T), (4096, 4096, 4096)),
    case("16-bit output", Bf16Bf16, (N, T), (4096, 4096, 4096)),
    case("16-bit output", Bf16Bf16, (N, T), (8192, 8192, 8192)),
    case("16-bit output", Bf16Bf16, (N, N), (4096, 4096, 4096)),
    case("16-bit output", Bf16Bf16, (N, N), (8192, 8192, 8192)),
    case("16-bit output", F16F16, (N, T), (4096, 4096, 4096)),
    case("16-bit output", F16F16, (N, T), (8192, 8192, 8192)),
    case("16-bit output", F16F16, (N, N), (4096, 4096, 4096)),
    case("16-bit output", F16F16, (N, N), (8192, 8192, 8192)),
    case("alignment", Bf16F32, (N, N), (4097, 4097, 4097)),
    GemmCase {
        pad: 7,
        ..case("alignment", Bf16F32, (N, N), (4097, 4097, 4097))
    },
    case("alignment", Bf16F32, (T, N), (257, 8192, 8192)),
    case("alignment", Bf16F32, (T, T), (257, 8192, 8192)),
    case("shapes", Bf16F32, (N, N), (1024, 1024, 16384)),
    case("shapes", Bf16F32, (N, N), (512, 512, 16384)),
    case("shapes", Bf16F32, (N, N), (2048, 2048, 16384)),
    case("shapes", Bf16F32, (N, N), (256, 4096, 32768)),
    case("shapes", Bf16F32, (N, N), (256, 8192, 8192)),
    case("shapes", Bf16F32, (N, N), (8192, 256, 8192)),
    case("shapes", Bf16F32, (N, N), (512, 4096, 4096)),
    case("shapes", Bf16F32, (N, N), (8192, 8192, 512)),
    case("shapes", Bf16F32, (N, N), (8192, 2048, 4096)),
    case("shapes", Bf16F32, (N, N), (3072, 8192, 1024)),
    case("shapes", Bf16F32, (N, N), (2049, 2056, 2048)),
    case("shapes", Bf16F32, (N, N), (4160, 4160, 4160)),
];

/// Freivalds projections per result (each one pass over C).
const PROJECTIONS: usize = 4;

/// Elements of C checked exactly per result (the projections check every
/// row; each exact element costs a strided pass over k).
const SAMPLES: usize = 2_048;

impl GemmCase {
    /// The shape: tight leading dimensions plus [`GemmCase::pad`].
    pub fn shape(&self) -> GemmShape {
        let (m, n, k) = self.mnk;
        let mut shape = GemmShape::with_ops(m, n, k, self.ops.0, self.ops.1);
        shape.lda += self.pad;
        shape.ldb += self.pad;
        shape.ldc += self.pad;
        shape.stride_a = shape.a_stored().0 * shape.lda;
        shape.stride_b = shape.b_stored().0 * shape.ldb;
        shape.stride_c = m * shape.ldc;
        shape
    }

    /// The row's size column: `m×n×k NT bf16 → f32` (and the padding).
    pub fn label(&self) -> String {
        let (input, output) = (self.types.input(), self.types.output());
        let (m, n, k) = self.mnk;
        let size = if m == n && n == k {
            format!("{m}³")
        } else {
            format!("{m}×{n}×{k}")
        };
        let pad = if self.pad > 0 {
            format!(", ld +{}", self.pad)
        } else {
            String::new()
        };
        format!(
            "{size} {:?}{:?} {input} → {output}{pad}",
            self.ops.0, self.ops.1
        )
    }
}

/// `c` checked by `verifier` (see the module docs).
fn full_check<I: GemmInput, O: GemmOutput<I>>(verifier: &GemmVerifier<'_, I>, c: &[O]) -> Check {
    match verifier.check::<O>(c, SAMPLES) {
        Ok(v) => Check::Pass(format!(
            "every row in {} projections (worst {:.2} of the bound), {} elements exact",
            v.projections, v.worst_ratio, v.samples
        )),
        Err(e) => Check::Fail(e.to_string()),
    }
}

/// Times one case of `I` inputs and `O` output, ours and cuBLAS's, each
/// result checked; pushes a record for each.
fn bench_case<I: GemmInput, O: GemmOutput<I>>(
    gpu: &Gpu,
    cublas: Option<&Cublas>,
    case: &GemmCase,
    from: impl Fn(f32) -> I,
    records: &mut Vec<BenchRecord>,
    rng: &mut Rng,
) -> Result<()> {
    let shape = case.shape();
    let (m, n, k) = case.mnk;
    let Some((ea, eb, ec)) = shape.extents() else {
        return Ok(());
    };
    let a: Vec<I> = (0..ea)
        .map(|_| from(rng.uniform() as f32 * 2.0 - 1.0))
        .collect();
    let b: Vec<I> = (0..eb)
        .map(|_| from(rng.uniform() as f32 * 2.0 - 1.0))
        .collect();
    let da = gpu.to_device(&a.iter().map(|v| v.to_dev()).collect::<Vec<_>>())?;
    let db = gpu.to_device(&b.iter().map(|v| v.to_dev()).collect::<Vec<_>>())?;
    let mut dc = gpu.zeroed::<O::Dev>(ec)?;
    let verifier = GemmVerifier::new(&shape, &a, &b, PROJECTIONS, rng.next_u64())
        .map_err(|e| crate::Error::invalid("gemm bench", e.to_string()))?;
    let tflops = |ms: f64| 2.0 * (m * n * k) as f64 / (ms * 1e9);
    let reps = if m * n * k >= 1 << 39 { 5 } else { 20 };
    let label = case.label();
    let checked = |dc: &mut crate::DeviceBuffer<O::Dev>| -> Result<Check> {
        let c: Vec<O> = dc.to_vec()?.into_iter().map(O::from_dev).collect();
        dc.set_zero()?;
        Ok(full_check(&verifier, &c))
    };
    let reference = match cublas {
        Some(cb) => {
            let ms = median_gpu_ms(gpu, 2, reps, || {
                cb.gemm_ex::<I, O>(&shape, 1.0, &da, &db, 0.0, &mut dc)
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
        path = Some(gpu.gemm_on_device::<I, O>(&shape, 1.0, &da, &db, 0.0, &mut dc)?);
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
    let cublas = cublas.as_ref();
    let mut rng = Rng::new(21);
    let rng = &mut rng;
    let only = std::env::var(GEMM_CASES_ENV).ok();
    let cases: Vec<&GemmCase> = GEMM_CASES
        .iter()
        .filter(|c| {
            only.as_deref().is_none_or(|only| {
                let label = c.label();
                only.split(',').any(|part| label.contains(part.trim()))
            })
        })
        .collect();
    for (i, case) in cases.iter().enumerate() {
        eprintln!(
            "[gemm {}/{}] {}: {}",
            i + 1,
            cases.len(),
            case.group,
            case.label()
        );
        let (bf, hf) = (half::bf16::from_f32, half::f16::from_f32);
        match case.types {
            Bf16F32 => bench_case::<half::bf16, f32>(gpu, cublas, case, bf, records, rng),
            F16F32 => bench_case::<half::f16, f32>(gpu, cublas, case, hf, records, rng),
            Tf32F32 => bench_case::<f32, f32>(gpu, cublas, case, |x| x, records, rng),
            Bf16Bf16 => bench_case::<half::bf16, half::bf16>(gpu, cublas, case, bf, records, rng),
            F16F16 => bench_case::<half::f16, half::f16>(gpu, cublas, case, hf, records, rng),
        }?;
    }
    Ok(())
}
