//! The reduce demos: Numba's `@cuda.reduce`.
//!
//! `cuda-kernels reduce` runs the seed: the sum of `1..=10000` as i64,
//! printed as the seed prints it (`result = 50005000`). `--op`, `--dtype`,
//! `--n` and `--init` pick another reduction of `1..=n`.
use std::fmt::{Display, Write as _};
use std::path::Path;
use std::str::FromStr;

use ndarray::Array1;

use super::foundation::size_label;
use super::{BenchRecord, Check, Report, Row, cpu_time, median_gpu_ms, no_gpu, sized};
use crate::DeviceBuffer;
use crate::bench::{device_copy_gbps, gb_per_s};
use crate::reduce::{
    Element, Input, Max, Min, Product, ReduceKernel, ReduceOrder, ReduceScratch, Sum, Xor,
    accurate_sum, float_sum_tolerance, reduce_cpu, reduce_in_gpu_order,
};
use crate::timing::{GpuTimer, median};
use crate::util::Rng;
use crate::{Error, Gpu, Result};
use cuda_kernels::prelude::*;

/// The reduce subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// A parallel reduction of 1..=n (Numba's @cuda.reduce);
    /// by default the seed's sum of 1..=10000 as i64 (= 50005000).
    Reduce {
        /// The operation.
        #[arg(long, value_enum, default_value_t = OpName::Sum)]
        op: OpName,
        /// The element type.
        #[arg(long, value_enum, default_value_t = DType::I64)]
        dtype: DType,
        /// Elements: the input is 1, 2, …, n.
        #[arg(long, default_value_t = 10_000)]
        n: usize,
        /// Initial value combined with the result (Numba's `init=`).
        #[arg(long, allow_hyphen_values = true)]
        init: Option<String>,
    },
}

/// A reduction operation, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OpName {
    /// Sum (integers wrap).
    Sum,
    /// Product (integers wrap).
    Product,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Bitwise xor (integers only; the user-declared example).
    Xor,
}

/// An element type, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DType {
    /// 32-bit integer.
    I32,
    /// 64-bit integer.
    I64,
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
}

/// What the demos need of an element type beyond [`Element`].
pub trait DemoElement: Element + Display + FromStr {
    /// `i` converted (wrapping for i32, rounded for f32).
    fn from_i64(i: i64) -> Self;
    /// A random value: integers in -1000..1000, floats uniform in [-1, 1).
    fn random(rng: &mut Rng) -> Self;
    /// The value as f64 (for tolerances).
    fn to_f64(self) -> f64;
    /// Unit roundoff for floats; `None` for integers (exact results).
    const UNIT_ROUNDOFF: Option<f64>;
}

macro_rules! demo_int {
    ($($t:ty),*) => {$(
        impl DemoElement for $t {
            fn from_i64(i: i64) -> Self { i as $t }
            fn random(rng: &mut Rng) -> Self { rng.below(2000) as $t - 1000 }
            fn to_f64(self) -> f64 { self as f64 }
            const UNIT_ROUNDOFF: Option<f64> = None;
        }
    )*};
}
macro_rules! demo_float {
    ($($t:ident),*) => {$(
        impl DemoElement for $t {
            fn from_i64(i: i64) -> Self { i as $t }
            fn random(rng: &mut Rng) -> Self { (rng.uniform() * 2.0 - 1.0) as $t }
            fn to_f64(self) -> f64 { self as f64 }
            const UNIT_ROUNDOFF: Option<f64> = Some($t::EPSILON as f64 / 2.0);
        }
    )*};
}
demo_int!(i32, i64);
demo_float!(f32, f64);

/// Runs one reduce subcommand.
pub fn run(cmd: &Command, gpu: Option<&Gpu>, report: &mut Report) -> Result<()> {
    let Command::Reduce {
        op,
        dtype,
        n,
        ref init,
    } = *cmd;
    dispatch(gpu, op, dtype, n, init.as_deref(), true, report)
}

/// Runs `op` over `1..=n` of `dtype`, printing the seed's lines when
/// `print` is set.
fn dispatch(
    gpu: Option<&Gpu>,
    op: OpName,
    dtype: DType,
    n: usize,
    init: Option<&str>,
    print: bool,
    report: &mut Report,
) -> Result<()> {
    macro_rules! go {
        ($op:ty, $t:ty) => {{
            let init = parse_init::<$t>(init)?;
            let data: Array1<$t> = (1..=n as i64).map(<$t>::from_i64).collect();
            reduce_demo::<$op, $t>(gpu, &data, init, print, report)
        }};
    }
    match (op, dtype) {
        (OpName::Sum, DType::I32) => go!(Sum, i32),
        (OpName::Sum, DType::I64) => go!(Sum, i64),
        (OpName::Sum, DType::F32) => go!(Sum, f32),
        (OpName::Sum, DType::F64) => go!(Sum, f64),
        (OpName::Product, DType::I32) => go!(Product, i32),
        (OpName::Product, DType::I64) => go!(Product, i64),
        (OpName::Product, DType::F32) => go!(Product, f32),
        (OpName::Product, DType::F64) => go!(Product, f64),
        (OpName::Min, DType::I32) => go!(Min, i32),
        (OpName::Min, DType::I64) => go!(Min, i64),
        (OpName::Min, DType::F32) => go!(Min, f32),
        (OpName::Min, DType::F64) => go!(Min, f64),
        (OpName::Max, DType::I32) => go!(Max, i32),
        (OpName::Max, DType::I64) => go!(Max, i64),
        (OpName::Max, DType::F32) => go!(Max, f32),
        (OpName::Max, DType::F64) => go!(Max, f64),
        (OpName::Xor, DType::I32) => go!(Xor, i32),
        (OpName::Xor, DType::I64) => go!(Xor, i64),
        (OpName::Xor, DType::F32 | DType::F64) => Err(Error::invalid(
            "reduce",
            "xor is declared for i32 and i64 only",
        )),
    }
}

fn parse_init<T: DemoElement>(init: Option<&str>) -> Result<Option<T>> {
    init.map(|s| {
        s.trim().parse::<T>().map_err(|_| {
            Error::invalid("reduce", format!("--init {s:?} is not a valid {}", T::NAME))
        })
    })
    .transpose()
}

/// The seed's way of printing a long vector: `[ 1 2 3 ... 9998 9999 10000]`.
pub fn numpy_style<T: Display>(data: &[T]) -> String {
    let join = |xs: &[T]| {
        xs.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    if data.len() <= 6 {
        format!("[ {}]", join(data))
    } else {
        format!(
            "[ {} ... {}]",
            join(&data[..3]),
            join(&data[data.len() - 3..])
        )
    }
}

/// Whether a GPU result is right. Where the order of operations cannot
/// matter (integer operations, which wrap, and min/max of any type) it must
/// equal the sequential CPU fold `expected`, which knows nothing of the
/// kernel. Float sums and products must equal, bits included, the kernel's
/// order of operations emulated on the CPU ([`reduce_in_gpu_order`] with the
/// launch's `order`), and a float sum must also lie within the worst-case
/// bound for that order ([`float_sum_tolerance`]) of the accurate sum.
fn compare<Op: ReduceKernel<T>, T: DemoElement>(
    got: T,
    expected: T,
    data: &[T],
    init: Option<T>,
    order: ReduceOrder,
) -> Result<Check> {
    let same = |a: T, b: T| a == b || (a.to_f64().is_nan() && b.to_f64().is_nan());
    if T::UNIT_ROUNDOFF.is_none() || matches!(Op::NAME, "min" | "max") {
        return Ok(if same(got, expected) {
            Check::Pass("exact: equal to the sequential CPU fold".into())
        } else {
            Check::Fail(format!("{got} vs the sequential CPU fold {expected}"))
        });
    }
    let want = reduce_in_gpu_order::<Op, T>(data, init, order)?;
    let in_order = same(got, want);
    let mut why = if in_order {
        format!("exact in the kernel's order; sequential CPU fold {expected}")
    } else {
        format!(
            "{got} vs {want} (the kernel's order, {}×{} threads, emulated); sequential CPU fold {expected}",
            order.grid, order.block
        )
    };
    let mut within = true;
    if let (Some(u), "sum") = (T::UNIT_ROUNDOFF, Op::NAME) {
        let exact = accurate_sum(data.iter().map(|x| x.to_f64()));
        let sum_abs = data.iter().map(|x| x.to_f64().abs()).sum::<f64>();
        let tol = float_sum_tolerance(data.len(), order.grid * order.block, sum_abs, u);
        let off = (got.to_f64() - exact).abs();
        within = off <= tol;
        let _ = write!(
            why,
            "; |Δ| from the accurate sum {off:.2e} (bound {tol:.2e})"
        );
    }
    Ok(if in_order && within {
        Check::Pass(why)
    } else {
        Check::Fail(why)
    })
}

/// One reduction: CPU reference, GPU result and kernel time, a report row.
fn reduce_demo<Op: ReduceKernel<T>, T: DemoElement>(
    gpu: Option<&Gpu>,
    data: &Array1<T>,
    init: Option<T>,
    print: bool,
    report: &mut Report,
) -> Result<()> {
    let n = data.len();
    let slice = data.as_slice().unwrap_or(&[]);
    let label = Op::ENTRY;
    let size = size_label(n);
    if print {
        println!("vector to reduce = {}", numpy_style(slice));
    }
    let (expected, cpu_ms) = cpu_time(|| reduce_cpu::<Op, T>(data.view(), init));
    let expected = expected?;
    let Some(gpu) = gpu else {
        if print {
            println!("result = {expected} (CPU reference; no GPU)");
        }
        let mut row = Row::new(format!("{label} (CPU only)"), size, no_gpu());
        row.cpu_ms = Some(cpu_ms);
        report.push(row);
        return Ok(());
    };
    let got = gpu.reduce::<Op, T>(data.view(), init)?;
    if print {
        println!("result = {got}");
    }
    let order = ReduceOrder::aligned(gpu.reduce_launch_shape::<Op, T>(n)?);
    let check = compare::<Op, T>(got, expected, slice, init, order)?;
    let mut row = Row::new(label, size, check);
    row.cpu_ms = Some(cpu_ms);
    if n > 0 && !gpu.is_simulated() {
        let device = gpu.to_device(slice)?;
        let mut scratch = gpu.reduce_scratch::<T>()?;
        let ms = time_reduce::<Op, T>(gpu, &device, &mut scratch, 5, 3)?;
        let again = scratch.result(gpu)?;
        if again != got {
            row.check = Check::Fail(format!("timed runs gave {again}, first run {got}"));
        }
        row.gpu_ms = Some(ms);
        row.throughput = Some(format!(
            "{:.0} GB/s",
            gb_per_s(n * size_of::<T>(), ms as f32)
        ));
    }
    report.push(row);
    Ok(())
}

/// Median kernel time in ms of `reps` measurements (after one warm-up),
/// each timing `batch` back-to-back launches between two CUDA events and
/// dividing by `batch` (so the host's per-launch work overlaps the GPU's).
pub fn time_reduce<Op: ReduceKernel<T, T::Acc>, T: Input>(
    gpu: &Gpu,
    input: &DeviceBuffer<T>,
    scratch: &mut ReduceScratch<T::Acc>,
    reps: usize,
    batch: usize,
) -> Result<f64> {
    let batch = batch.max(1);
    let ms = median_gpu_ms(gpu, 1, reps, || {
        for _ in 0..batch {
            gpu.reduce_on_device::<Op, T>(input, None, scratch)?;
        }
        Ok(())
    })?;
    // Division by the batch keeps the order, so this is the median per launch.
    Ok((ms / batch as f32) as f64)
}

/// The reduce part of `cuda-kernels demo`: the seed, a few operations and
/// types at awkward and large sizes on random data, and the refusal of min
/// of nothing.
pub fn run_all(gpu: Option<&Gpu>, _out_dir: &Path, report: &mut Report) -> Result<()> {
    dispatch(gpu, OpName::Sum, DType::I64, 10_000, None, true, report)?;
    for n in [1usize, 1_000_003, sized(gpu, 1 << 24, (1 << 20) + 3)] {
        random_demo::<Sum, f32>(gpu, n, 1, report)?;
        random_demo::<Max, f32>(gpu, n, 2, report)?;
        random_demo::<Sum, i32>(gpu, n, 3, report)?;
        random_demo::<Min, i64>(gpu, n, 4, report)?;
        random_demo::<Sum, f64>(gpu, n, 5, report)?;
    }
    let empty: Vec<f32> = Vec::new();
    let refused = match gpu {
        Some(gpu) => gpu.reduce_slice::<Min, f32>(&empty, None),
        None => reduce_cpu::<Min, f32>(Array1::from(empty).view(), None),
    };
    report.push(Row::new(
        if gpu.is_some() {
            "reduce_min_f32 of nothing, no init"
        } else {
            "reduce_min_f32 of nothing, no init (CPU only)"
        },
        "0",
        match refused {
            Err(Error::InvalidInput { reason, .. }) => Check::Pass(format!("refused: {reason}")),
            Err(e) => Check::Fail(format!("wrong error: {e}")),
            Ok(v) => Check::Fail(format!("returned {v} instead of an error")),
        },
    ));
    Ok(())
}

fn random_demo<Op: ReduceKernel<T>, T: DemoElement>(
    gpu: Option<&Gpu>,
    n: usize,
    seed: u64,
    report: &mut Report,
) -> Result<()> {
    let mut rng = Rng::new(seed ^ n as u64);
    let data: Array1<T> = (0..n).map(|_| T::random(&mut rng)).collect();
    reduce_demo::<Op, T>(gpu, &data, None, false, report)
}

/// The reduce part of `cuda-kernels bench`: sum, min and max of 2^28 f32
/// and sums of 2^28 i64 and f64, as bytes read per second against a
/// device-to-device copy of the f32 input's size measured in the same run
/// (its GB/s count bytes read plus written, so a reduction that reads at
/// copy speed scores 1.0). Every timed result is checked exactly against
/// the kernel's order emulated on the CPU ([`reduce_in_gpu_order`]).
pub fn bench(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    const N: usize = 1 << 28;
    gpu.bind()?;
    let copy = device_copy_gbps(gpu, N * 4, REPS)?;
    records.push(BenchRecord::new(
        "device copy (reduce reference)",
        format!("{} MB", N * 4 / 1_000_000),
        (2 * N * 4) as f64 / (copy * 1e9) * 1e3,
        "GB/s",
        copy,
        Check::Pass(super::foundation::COPY_CHECKED.into()),
    ));
    // Besides the default launch shape, shapes around it for the f32 sum
    // (the record's name says grid x block).
    bench_type::<f32>(gpu, N, copy, records, |t| {
        let mut out: Timed = vec![t.run::<Sum>()?, t.run::<Min>()?, t.run::<Max>()?];
        out.extend(t.sweep(&[(8, 256), (4, 256), (2, 512), (4, 512), (1, 1024)])?);
        Ok(out)
    })?;
    bench_type::<i64>(gpu, N, copy, records, |t| {
        let mut out: Timed = vec![t.run::<Sum>()?];
        out.extend(t.sweep(&[(8, 256), (1, 1024)])?);
        Ok(out)
    })?;
    bench_type::<f64>(gpu, N, copy, records, |t| Ok(vec![t.run::<Sum>()?]))?;
    bench_bf16_sum(gpu, records)
}

/// `reduce_sum_bf16` (f32 accumulation) over 2^27 bf16 in [-1, 1), against
/// a device copy of the same bytes measured just before it; the timed
/// launches' result checked against the f64 sum within the proven bound of
/// the launch's summation depth (`float_sum_tolerance` with f32's unit
/// roundoff: each bf16 is exact in f32, so only the f32 additions round).
fn bench_bf16_sum(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    use crate::kernels::device::float16::bf16;
    const N: usize = 1 << 27;
    let bytes = N * size_of::<bf16>();
    let copy = device_copy_gbps(gpu, bytes, REPS)?;
    let mut rng = Rng::new(27);
    let host: Vec<bf16> = (0..N)
        .map(|_| bf16::narrow((rng.uniform() * 2.0 - 1.0) as f32))
        .collect();
    let device = gpu.to_device(&host)?;
    let mut scratch = gpu.reduce_scratch::<f32>()?;
    let ms = time_reduce::<Sum, bf16>(gpu, &device, &mut scratch, REPS, BATCH)?;
    let got = f64::from(scratch.result(gpu)?);
    let exact = accurate_sum(host.iter().map(|x| f64::from(x.widen())));
    let sum_abs: f64 = host.iter().map(|x| f64::from(x.widen()).abs()).sum();
    let (grid, block) = gpu.reduce_launch_shape::<Sum, bf16>(N)?;
    let bound = float_sum_tolerance(N, (grid * block) as usize, sum_abs, 2f64.powi(-24));
    let error = (got - exact).abs();
    let check = if error <= bound {
        Check::Pass(format!("|error| {error:.2e} ≤ bound {bound:.2e}"))
    } else {
        Check::Fail(format!(
            "got {got}, f64 sum {exact}: |error| {error:.2e} > bound {bound:.2e}"
        ))
    };
    let bw = gb_per_s(bytes, ms as f32);
    records.push(
        BenchRecord::new("reduce_sum_bf16", "2^27 bf16", ms, "GB/s read", bw, check)
            .against("device copy", bw / copy),
    );
    Ok(())
}

const REPS: usize = 20;
const BATCH: usize = 5;

/// (operation, possibly with " [grid x block]", median ms, check).
type Timed = Vec<(String, f64, Check)>;

/// One element type's input, on the device and on the host (for the
/// checks), and the scratch the timed launches write into.
struct TypeBench<'g, T: DemoElement> {
    gpu: &'g Gpu,
    host: Vec<T>,
    device: DeviceBuffer<T>,
    scratch: ReduceScratch<T>,
}

impl<T: DemoElement> TypeBench<'_, T> {
    /// Times `Op` with the default launch shape and checks the timed
    /// launches' result.
    fn run<Op: ReduceKernel<T>>(&mut self) -> Result<(String, f64, Check)> {
        let ms = time_reduce::<Op, T>(self.gpu, &self.device, &mut self.scratch, REPS, BATCH)?;
        let got = self.scratch.result(self.gpu)?;
        let shape = self.gpu.reduce_launch_shape::<Op, T>(self.host.len())?;
        let check = self.check::<Op>(got, ReduceOrder::aligned(shape))?;
        Ok((Op::NAME.into(), ms, check))
    }

    /// Times the sum with other launch shapes, `(blocks per SM, block)`
    /// each, checking each shape's result against its own emulated order:
    /// named `sum [grid x block]`.
    fn sweep(&mut self, shapes: &[(u32, u32)]) -> Result<Timed>
    where
        Sum: ReduceKernel<T>,
    {
        let sms = self.gpu.multiprocessors("reduce")?;
        let mut out = Timed::new();
        for &(per_sm, block) in shapes {
            let grid = (per_sm * sms).min(self.scratch.capacity() as u32);
            let mut times = Vec::new();
            for rep in 0..=REPS {
                let ((), ms) = GpuTimer::time(self.gpu.stream(), || {
                    for _ in 0..BATCH {
                        self.gpu.reduce_on_device_shaped::<Sum, T>(
                            &self.device,
                            None,
                            &mut self.scratch,
                            grid,
                            block,
                        )?;
                    }
                    Ok(())
                })?;
                if rep > 0 {
                    times.push(ms / BATCH as f32);
                }
            }
            let got = self.scratch.result(self.gpu)?;
            let check = self.check::<Sum>(got, ReduceOrder::aligned((grid, block)))?;
            out.push((
                format!("sum [{grid}x{block}]"),
                median(&mut times) as f64,
                check,
            ));
        }
        Ok(out)
    }

    fn check<Op: ReduceKernel<T>>(&self, got: T, order: ReduceOrder) -> Result<Check> {
        let expected = reduce_cpu::<Op, T>(ndarray::ArrayView1::from(&self.host[..]), None)?;
        compare::<Op, T>(got, expected, &self.host, None, order)
    }
}

fn bench_type<T: DemoElement>(
    gpu: &Gpu,
    n: usize,
    copy_gbps: f64,
    records: &mut Vec<BenchRecord>,
    run: impl Fn(&mut TypeBench<'_, T>) -> Result<Timed>,
) -> Result<()> {
    let mut rng = Rng::new(28);
    let host: Vec<T> = (0..n).map(|_| T::random(&mut rng)).collect();
    let device = gpu.to_device(&host)?;
    let scratch = gpu.reduce_scratch::<T>()?;
    let mut t = TypeBench {
        gpu,
        host,
        device,
        scratch,
    };
    for (op, ms, check) in run(&mut t)? {
        let bw = gb_per_s(n * size_of::<T>(), ms as f32);
        // `op` is "sum", or "sum [grid x block]" for the shape sweep.
        let (op, shape) = op.split_once(' ').unwrap_or((op.as_str(), ""));
        let kernel = format!("reduce_{op}_{} {shape}", T::NAME);
        records.push(
            BenchRecord::new(
                kernel.trim_end(),
                format!("2^{} {}", n.trailing_zeros(), T::NAME),
                ms,
                "GB/s read",
                bw,
                check,
            )
            .against("device copy", bw / copy_gbps),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_the_seed() {
        let a: Vec<i64> = (1..=10_000).collect();
        assert_eq!(numpy_style(&a), "[ 1 2 3 ... 9998 9999 10000]");
        assert_eq!(numpy_style(&[1, 2]), "[ 1 2]");
    }

    #[test]
    fn seed_demo_runs_without_a_gpu() {
        let mut report = Report::default();
        dispatch(
            None,
            OpName::Sum,
            DType::I64,
            10_000,
            None,
            false,
            &mut report,
        )
        .unwrap();
        assert_eq!(report.rows.len(), 1);
        assert!(matches!(report.rows[0].check, Check::Skipped(_)));
    }

    #[test]
    fn bad_init_and_xor_on_floats_are_errors() {
        let mut report = Report::default();
        assert!(
            dispatch(
                None,
                OpName::Sum,
                DType::I32,
                10,
                Some("x"),
                false,
                &mut report
            )
            .is_err()
        );
        assert!(dispatch(None, OpName::Xor, DType::F32, 10, None, false, &mut report).is_err());
        assert!(dispatch(None, OpName::Min, DType::F64, 0, None, false, &mut report).is_err());
        dispatch(
            None,
            OpName::Min,
            DType::F64,
            0,
            Some("-2.5"),
            false,
            &mut report,
        )
        .unwrap();
    }

    #[test]
    fn comparison_is_exact_in_the_kernels_order() {
        let data = vec![0.1f32; 1000];
        let order = ReduceOrder {
            grid: 2,
            block: 64,
            head: 0,
        };
        let gpu_like = reduce_in_gpu_order::<Sum, f32>(&data, None, order).unwrap();
        let sequential = data.iter().sum::<f32>();
        assert!(matches!(
            compare::<Sum, f32>(gpu_like, sequential, &data, None, order).unwrap(),
            Check::Pass(_)
        ));
        // One element lost, or one ulp off: both fail.
        let lost = reduce_in_gpu_order::<Sum, f32>(&data[1..], None, order).unwrap();
        for wrong in [lost, f32::from_bits(gpu_like.to_bits() + 1)] {
            let c = compare::<Sum, f32>(wrong, sequential, &data, None, order).unwrap();
            assert!(matches!(c, Check::Fail(_)), "{c:?}");
        }
        assert!(matches!(
            compare::<Min, f32>(0.1, 0.1, &data, None, order).unwrap(),
            Check::Pass(_)
        ));
        // Integer and min/max results are judged by the sequential fold
        // alone, whatever the emulation of the kernel's order says.
        let ints: Vec<i32> = (0..1000).map(|i| i * 7 - 3000).collect();
        let fold = ints.iter().fold(0i32, |a, &b| a.wrapping_add(b));
        assert!(matches!(
            compare::<Sum, i32>(fold, fold, &ints, None, order).unwrap(),
            Check::Pass(_)
        ));
        let c = compare::<Sum, i32>(fold + 1, fold, &ints, None, order).unwrap();
        assert!(matches!(c, Check::Fail(_)), "{c:?}");
        let c = compare::<Max, f32>(0.2, 0.1, &data, None, order).unwrap();
        assert!(matches!(c, Check::Fail(_)), "{c:?}");
    }
}
