//! The collectives (issue 22): the device crate's warp and block reduce and
//! scan through the test kernels of `kernels-gpu/src/collective_checks.rs`
//! (every element type, operation, partial masks and block sizes, against
//! the definitions computed here), the block loads and stores, a misused
//! block collective as a located fault, and the device-wide scan and
//! selection families against sequential CPU references on random, sorted,
//! reverse-sorted, all-equal, NaN-containing and odd-length inputs.
use std::fmt::Debug;
use std::process::ExitCode;

use cuda_kernels::kernels::collective_checks::{
    BLOCK_CHECK_THREADS, BLOCK_COLLECTIVE_MISUSE, BLOCK_LOAD_STORE_CHECK, BLOCK_ROWS,
    CollectiveCheck, LOAD_ITEMS, LOOK_BACK_CHECK_F32, LOOK_BACK_CHECK_F64, WARP_ROWS,
};
use cuda_kernels::kernels::device::float16::{bf16, f16};
use cuda_kernels::ndarray::Array1;
use cuda_kernels::scan::{self, Max, Min, ReduceOp, ScanKernel, ScanKind, Sum};
use cuda_kernels::select::{self, NonZero};
use cuda_kernels::util::Rng;
use cuda_kernels::{DeviceBuffer, Error, Gpu, LaunchConfig};
use libtest_mimic::{Failed, Trial};

use crate::common::{ensure, fail, simulated};
use crate::support::rerun_self_printing;

const NOT_WARPS_CHILD: &str = "CUDA_KERNELS_TEST_BLOCK_NOT_WARPS_CHILD";
const TOO_BIG_CHILD: &str = "CUDA_KERNELS_TEST_BLOCK_TOO_BIG_CHILD";

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        kernel!(warp_collectives_every_type_op_and_mask),
        kernel!(block_collectives_every_type_op_and_block_size),
        kernel!(block_loads_and_stores_arrangements),
        kernel!(block_size_not_a_multiple_of_32_is_a_located_fault),
        kernel!(block_larger_than_its_storage_is_a_located_fault),
        kernel!(scan_every_type_and_op_matches_cpu),
        kernel!(scan_of_floats_is_deterministic),
        kernel!(scan_exclusive_from_init),
        kernel!(scan_on_device_of_views_at_every_alignment),
        kernel!(scan_refuses_bad_input),
        kernel!(select_by_predicate_and_flags_matches_cpu),
        kernel!(select_refuses_bad_input),
        kernel!(scan_and_select_cross_64_tiles_every_type),
        kernel!(look_back_gives_the_left_fold_wherever_it_stops),
    ]
}

/// In a child process of the two fault tests (a trap ruins the CUDA
/// context): launch the misuse kernel with a block of 48 threads (not a
/// multiple of 32) or 128 (larger than its storage) and print the error.
pub fn child_process() -> Option<ExitCode> {
    let threads = if std::env::var_os(NOT_WARPS_CHILD).is_some() {
        48
    } else if std::env::var_os(TOO_BIG_CHILD).is_some() {
        128
    } else {
        return None;
    };
    let Ok(gpu) = cuda_kernels::gpu() else {
        return Some(ExitCode::FAILURE);
    };
    let run = || -> cuda_kernels::Result<()> {
        let mut out = gpu.zeroed::<u32>(1)?;
        // SAFETY: `out` holds the one u32 the kernel writes.
        unsafe {
            gpu.launch(
                BLOCK_COLLECTIVE_MISUSE,
                LaunchConfig::linear(1, threads),
                gpu.stream(),
                (&mut out,),
            )
        }?;
        gpu.synchronize(BLOCK_COLLECTIVE_MISUSE.name())
    };
    Some(match run() {
        Err(e @ Error::DeviceFault { .. }) => {
            println!("FAULT: {e}");
            ExitCode::SUCCESS
        }
        other => {
            println!("expected DeviceFault, got {other:?}");
            ExitCode::FAILURE
        }
    })
}

fn block_size_not_a_multiple_of_32_is_a_located_fault(gpu: &Gpu) -> Result<(), Failed> {
    rerun_self_printing(
        gpu,
        NOT_WARPS_CHILD,
        &[
            "block_collective_misuse: the kernel failed at",
            "collective_checks.rs:",
            "block collective: block size not a multiple of 32",
        ],
    )
}

fn block_larger_than_its_storage_is_a_located_fault(gpu: &Gpu) -> Result<(), Failed> {
    rerun_self_printing(
        gpu,
        TOO_BIG_CHILD,
        &[
            "block_collective_misuse: the kernel failed at",
            "collective_checks.rs:",
            "block collective: too little shared memory for the block",
        ],
    )
}

/// An element type of the checks: built from small integers (so sums are
/// exact in every order), with a NaN for the float types, compared so that
/// NaN equals NaN and `-0.0` differs from `0.0`.
trait Value: Copy + Debug + Send + Sync + 'static {
    /// The check values are `0..SMALL`: a block's sum of them (256 threads)
    /// is exact in the type (bf16 holds the integers up to 256 only).
    const SMALL: u64 = 8;
    /// The integers up to this magnitude are exact in the type.
    const EXACT_INTEGERS: u64 = u64::MAX;
    fn from_small(x: i64) -> Self;
    fn nan() -> Option<Self>;
    /// By the printed value (the 16-bit types; the others compare directly:
    /// the device-wide checks compare tens of millions of elements).
    fn same(self, other: Self) -> bool {
        format!("{self:?}") == format!("{other:?}")
    }
}

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl Value for $t {
            fn from_small(x: i64) -> Self { x as $t }
            fn nan() -> Option<Self> { None }
            fn same(self, other: Self) -> bool { self == other }
        }
    )*};
}
int_value!(i32, u32, i64, u64);
macro_rules! float_value {
    ($($t:ident),*) => {$(
        impl Value for $t {
            const EXACT_INTEGERS: u64 = 1 << $t::MANTISSA_DIGITS;
            fn from_small(x: i64) -> Self { x as $t }
            fn nan() -> Option<Self> { Some($t::NAN) }
            fn same(self, other: Self) -> bool {
                self.to_bits() == other.to_bits() || (self.is_nan() && other.is_nan())
            }
        }
    )*};
}
float_value!(f32, f64);
macro_rules! half_value {
    ($($t:ident: $small:literal, $exact:literal),*) => {$(
        impl Value for $t {
            const SMALL: u64 = $small;
            const EXACT_INTEGERS: u64 = $exact;
            fn from_small(x: i64) -> Self { $t::narrow(x as f32) }
            fn nan() -> Option<Self> { Some($t::narrow(f32::NAN)) }
        }
    )*};
}
half_value!(f16: 8, 2048, bf16: 2, 256);

/// A type the warp and block check kernels exist for.
trait Checked:
    Value
    + CollectiveCheck
    + cuda_kernels::cust::memory::DeviceCopy
    + cuda_kernels::cust::memory::bytemuck::Zeroable
{
}
impl<T> Checked for T where
    T: Value
        + CollectiveCheck
        + cuda_kernels::cust::memory::DeviceCopy
        + cuda_kernels::cust::memory::bytemuck::Zeroable
{
}

/// `x_0 ⊕ … ⊕ x_{k−1}`, left to right (the identity for none).
fn fold<Op: ReduceOp<T>, T: Copy>(xs: &[T]) -> T {
    xs.iter().fold(Op::identity(), |a, &x| Op::combine(a, x))
}

/// Values for `threads` threads: small, with a NaN at a few places when
/// `with_nan` (floats).
fn values<T: Value>(rng: &mut Rng, threads: usize, with_nan: bool) -> Vec<T> {
    (0..threads)
        .map(|i| match T::nan() {
            Some(nan) if with_nan && i % 37 == 5 => nan,
            _ => T::from_small(rng.below(T::SMALL) as i64),
        })
        .collect()
}

fn check_same<T: Value>(what: &str, got: T, want: T) -> Result<(), Failed> {
    ensure(got.same(want), || {
        format!("{what}: got {got:?}, want {want:?}")
    })
}

fn warp_op<Op: ReduceOp<T>, T: Checked>(gpu: &Gpu, op: u32, rng: &mut Rng) -> Result<(), Failed> {
    let (grid, block) = (2usize, 64usize);
    let threads = grid * block;
    let sentinel = T::from_small(99);
    for mask in [u32::MAX, 0xffff, 0x00ff_ff00, 0x8000_0000, 0x7fff_ffff, 0x1] {
        for with_nan in [false, true] {
            let input = values::<T>(rng, threads, with_nan);
            let din = gpu.to_device(&input).map_err(fail)?;
            let mut out = gpu
                .to_device(&vec![sentinel; WARP_ROWS * threads])
                .map_err(fail)?;
            // SAFETY: one input and WARP_ROWS outputs per thread; blocks of 64.
            unsafe {
                gpu.launch(
                    T::WARP,
                    LaunchConfig::linear(grid as u32, block as u32),
                    gpu.stream(),
                    (&din, &mut out, mask, op),
                )
            }
            .map_err(fail)?;
            gpu.synchronize(T::WARP.name()).map_err(fail)?;
            let got = out.to_vec().map_err(fail)?;
            for g in 0..threads {
                let (warp, lane) = (g / 32, g % 32);
                let what = |r: &str| {
                    format!(
                        "{} mask {mask:#x} nan {with_nan} thread {g}: {r}",
                        T::WARP.name()
                    )
                };
                if mask & (1 << lane) == 0 {
                    for r in 0..WARP_ROWS {
                        check_same(&what("untouched"), got[r * threads + g], sentinel)?;
                    }
                    continue;
                }
                let run: Vec<T> = (0..32)
                    .filter(|l| mask & (1 << l) != 0)
                    .map(|l| input[warp * 32 + l])
                    .collect();
                let rank = (0..lane).filter(|l| mask & (1 << l) != 0).count();
                let total = fold::<Op, T>(&run);
                check_same(&what("reduce"), got[g], total)?;
                check_same(
                    &what("inclusive"),
                    got[threads + g],
                    fold::<Op, T>(&run[..=rank]),
                )?;
                check_same(
                    &what("exclusive"),
                    got[2 * threads + g],
                    fold::<Op, T>(&run[..rank]),
                )?;
                check_same(&what("aggregate"), got[3 * threads + g], total)?;
            }
        }
    }
    Ok(())
}

fn warp_type<T: Checked>(gpu: &Gpu, rng: &mut Rng) -> Result<(), Failed>
where
    Sum: ReduceOp<T>,
    Min: ReduceOp<T>,
    Max: ReduceOp<T>,
{
    warp_op::<Sum, T>(gpu, 0, rng)?;
    warp_op::<Min, T>(gpu, 1, rng)?;
    warp_op::<Max, T>(gpu, 2, rng)
}

fn warp_collectives_every_type_op_and_mask(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(22);
    warp_type::<i32>(gpu, &mut rng)?;
    warp_type::<u32>(gpu, &mut rng)?;
    warp_type::<i64>(gpu, &mut rng)?;
    warp_type::<u64>(gpu, &mut rng)?;
    warp_type::<f32>(gpu, &mut rng)?;
    warp_type::<f64>(gpu, &mut rng)?;
    warp_type::<f16>(gpu, &mut rng)?;
    warp_type::<bf16>(gpu, &mut rng)
}

fn block_op<Op: ReduceOp<T>, T: Checked>(gpu: &Gpu, op: u32, rng: &mut Rng) -> Result<(), Failed> {
    for block in [32usize, 96, BLOCK_CHECK_THREADS] {
        for with_nan in [false, true] {
            let grid = 2;
            let threads = grid * block;
            let input = values::<T>(rng, threads + 1, with_nan);
            let prefix = input[threads];
            let din = gpu.to_device(&input).map_err(fail)?;
            let mut out = gpu
                .to_device(&vec![T::from_small(0); BLOCK_ROWS * threads])
                .map_err(fail)?;
            // SAFETY: one input per thread plus the prefix, BLOCK_ROWS outputs
            // per thread; 1-D blocks.
            unsafe {
                gpu.launch(
                    T::BLOCK,
                    LaunchConfig::linear(grid as u32, block as u32),
                    gpu.stream(),
                    (&din, &mut out, op),
                )
            }
            .map_err(fail)?;
            gpu.synchronize(T::BLOCK.name()).map_err(fail)?;
            let got = out.to_vec().map_err(fail)?;
            for g in 0..threads {
                let (b, t) = (g / block, g % block);
                let xs = &input[b * block..(b + 1) * block];
                let what = |r: &str| {
                    format!(
                        "{} block {block} nan {with_nan} thread {g}: {r}",
                        T::BLOCK.name()
                    )
                };
                let total = fold::<Op, T>(xs);
                let excl = fold::<Op, T>(&xs[..t]);
                let incl = fold::<Op, T>(&xs[..=t]);
                let row = |r: usize| got[r * threads + g];
                check_same(&what("reduce"), row(0), total)?;
                check_same(&what("inclusive"), row(1), incl)?;
                check_same(&what("inclusive aggregate"), row(2), total)?;
                check_same(&what("exclusive"), row(3), excl)?;
                check_same(&what("exclusive aggregate"), row(4), total)?;
                let with_prefix = if t == 0 {
                    prefix
                } else {
                    Op::combine(prefix, excl)
                };
                check_same(&what("exclusive after prefix"), row(5), with_prefix)?;
                check_same(
                    &what("inclusive after prefix"),
                    row(6),
                    Op::combine(with_prefix, xs[t]),
                )?;
            }
        }
    }
    Ok(())
}

fn block_type<T: Checked>(gpu: &Gpu, rng: &mut Rng) -> Result<(), Failed>
where
    Sum: ReduceOp<T>,
    Min: ReduceOp<T>,
    Max: ReduceOp<T>,
{
    block_op::<Sum, T>(gpu, 0, rng)?;
    block_op::<Min, T>(gpu, 1, rng)?;
    block_op::<Max, T>(gpu, 2, rng)
}

fn block_collectives_every_type_op_and_block_size(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(23);
    block_type::<i32>(gpu, &mut rng)?;
    block_type::<u32>(gpu, &mut rng)?;
    block_type::<i64>(gpu, &mut rng)?;
    block_type::<u64>(gpu, &mut rng)?;
    block_type::<f32>(gpu, &mut rng)?;
    block_type::<f64>(gpu, &mut rng)?;
    block_type::<f16>(gpu, &mut rng)?;
    block_type::<bf16>(gpu, &mut rng)
}

fn block_loads_and_stores_arrangements(gpu: &Gpu) -> Result<(), Failed> {
    let block = 64usize;
    let row = block * LOAD_ITEMS;
    let source: Vec<u32> = (0..row as u32 + 1).map(|i| 1000 + i).collect();
    let all = gpu.to_device(&source).map_err(fail)?;
    // Aligned and whole (the vector path), aligned and partial, and
    // misaligned by one element (the one-item path).
    for (offset, valid) in [(0usize, row), (0, row - 5), (1, row)] {
        let input = all.index(offset..offset + valid);
        let mut out = gpu.to_device(&vec![0u32; 3 * row]).map_err(fail)?;
        // SAFETY: `valid` elements in, three rows of `row` out; one block.
        unsafe {
            gpu.launch(
                BLOCK_LOAD_STORE_CHECK,
                LaunchConfig::linear(1, block as u32),
                gpu.stream(),
                (&input, &mut out, valid),
            )
        }
        .map_err(fail)?;
        gpu.synchronize(BLOCK_LOAD_STORE_CHECK.name())
            .map_err(fail)?;
        let got = out.to_vec().map_err(fail)?;
        let x = &source[offset..offset + valid];
        for i in 0..row {
            let what = format!("offset {offset} valid {valid} item {i}");
            let copy = if i < valid { x[i] } else { 0 };
            ensure(got[i] == copy, || format!("blocked {what}: {}", got[i]))?;
            ensure(got[row + i] == copy, || {
                format!("striped {what}: {}", got[row + i])
            })?;
            let (t, k) = (i / LOAD_ITEMS, i % LOAD_ITEMS);
            let at = t + k * block;
            let want = if at < valid { x[at] } else { u32::MAX };
            ensure(got[2 * row + i] == want, || {
                format!(
                    "striped into blocked {what}: {} want {want}",
                    got[2 * row + i]
                )
            })?;
        }
    }
    Ok(())
}

/// Input lengths of the device-wide tests: around the tiles of 4096
/// (64-bit elements) and 8192 elements (32-bit), odd ones, and on a GPU
/// longer ones.
fn lengths(gpu: &Gpu) -> Vec<usize> {
    const T: usize = scan::MIN_TILE;
    let mut v = vec![
        1,
        2,
        31,
        T - 1,
        T,
        T + 1,
        2 * T - 1,
        2 * T,
        2 * T + 1,
        3 * T + 17,
        40_001,
    ];
    if !simulated(gpu) {
        v.extend([(1 << 20) + 3, 10_000_019]);
    }
    v
}

/// The inputs of the device-wide tests: random, sorted, reverse-sorted,
/// all-equal and (floats) NaN-containing, of small integer values so that
/// float sums are exact in any order.
fn inputs<T: Value>(n: usize, rng: &mut Rng) -> Vec<(&'static str, Vec<T>)> {
    // Values in -amp..=amp, amp at most 100 and small enough that every
    // prefix sum (at most n·amp in magnitude) is an exact integer in T.
    let amp = (T::EXACT_INTEGERS / n.max(1) as u64).clamp(1, 100) as i64;
    let random: Vec<i64> = (0..n)
        .map(|_| rng.below(2 * amp as u64 + 1) as i64 - amp)
        .collect();
    let mut sorted = random.clone();
    sorted.sort();
    let mut v = vec![
        ("random", random.iter().map(|&x| T::from_small(x)).collect()),
        ("sorted", sorted.iter().map(|&x| T::from_small(x)).collect()),
        (
            "reverse-sorted",
            sorted.iter().rev().map(|&x| T::from_small(x)).collect(),
        ),
        ("all-equal", vec![T::from_small(amp.min(3)); n]),
    ];
    if let Some(nan) = T::nan() {
        let mut with_nan: Vec<T> = random.iter().map(|&x| T::from_small(x)).collect();
        for i in (n / 3..n).step_by(5000) {
            with_nan[i] = nan;
        }
        v.push(("NaN-containing", with_nan));
    }
    v
}

fn scan_matches<Op: ScanKernel<T>, T: Value + scan::Element>(
    gpu: &Gpu,
    rng: &mut Rng,
) -> Result<(), Failed> {
    for n in lengths(gpu) {
        for (name, input) in inputs::<T>(n, rng) {
            for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
                let got =
                    scan::scan::<Op, T>(gpu, Array1::from_vec(input.clone()).view(), kind, None)
                        .map_err(fail)?;
                let want = scan::scan_cpu::<Op, T>(&input, kind, None);
                ensure(got.len() == n, || {
                    format!("{}: length {}", Op::ENTRY, got.len())
                })?;
                if let Some(i) = (0..n).find(|&i| !got[i].same(want[i])) {
                    return Err(Failed::from(format!(
                        "{} {kind:?} {name} n={n}: element {i} is {:?}, want {:?}",
                        Op::ENTRY,
                        got[i],
                        want[i]
                    )));
                }
            }
        }
    }
    Ok(())
}

fn scan_type<T: Value + scan::Element>(gpu: &Gpu, rng: &mut Rng) -> Result<(), Failed>
where
    Sum: ScanKernel<T>,
    Min: ScanKernel<T>,
    Max: ScanKernel<T>,
{
    scan_matches::<Sum, T>(gpu, rng)?;
    scan_matches::<Min, T>(gpu, rng)?;
    scan_matches::<Max, T>(gpu, rng)
}

fn scan_every_type_and_op_matches_cpu(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(24);
    scan_type::<i32>(gpu, &mut rng)?;
    scan_type::<u32>(gpu, &mut rng)?;
    scan_type::<i64>(gpu, &mut rng)?;
    scan_type::<u64>(gpu, &mut rng)?;
    scan_type::<f32>(gpu, &mut rng)?;
    scan_type::<f64>(gpu, &mut rng)
}

fn scan_of_floats_is_deterministic(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(25);
    let n = if simulated(gpu) {
        5 * scan::tile::<f32>() + 3
    } else {
        5_000_011
    };
    let x: Array1<f32> = (0..n).map(|_| rng.normal() as f32).collect();
    let first = scan::inclusive_scan::<Sum, f32>(gpu, x.view()).map_err(fail)?;
    let want = scan::scan_cpu::<Sum, f64>(
        &x.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        ScanKind::Inclusive,
        None,
    );
    let scale: f64 = x.iter().map(|&v| (v as f64).abs()).sum();
    for run in 0..3 {
        let again = scan::inclusive_scan::<Sum, f32>(gpu, x.view()).map_err(fail)?;
        if let Some(i) = (0..n).find(|&i| first[i].to_bits() != again[i].to_bits()) {
            return Err(Failed::from(format!(
                "run {run}: element {i} is {} then {}",
                first[i], again[i]
            )));
        }
    }
    // Rounding only: each prefix within a few ulps of the magnitudes summed.
    let tolerance = scale * f32::EPSILON as f64 * 64.0;
    if let Some(i) = (0..n).find(|&i| (first[i] as f64 - want[i]).abs() > tolerance) {
        return Err(Failed::from(format!(
            "element {i}: {} vs the f64 reference {}",
            first[i], want[i]
        )));
    }
    Ok(())
}

fn scan_exclusive_from_init(gpu: &Gpu) -> Result<(), Failed> {
    let x = Array1::from_iter(1..=10_000i64);
    let got = scan::exclusive_scan::<Sum, i64>(gpu, x.view(), Some(100)).map_err(fail)?;
    ensure(
        got[0] == 100 && got[9_999] == 100 + 9_999 * 10_000 / 2,
        || format!("{} {}", got[0], got[9_999]),
    )?;
    let got = scan::exclusive_scan::<Max, i32>(
        gpu,
        Array1::from_vec(vec![3, 1, 4, 1, 5]).view(),
        Some(2),
    )
    .map_err(fail)?;
    ensure(got.to_vec() == [2, 3, 3, 4, 4], || format!("{got}"))
}

/// `scan_on_device` of views that start 0 to 3 elements into their buffers
/// (the 16-byte copies of whole aligned tiles, the per-element copies of a
/// misaligned input, the per-element stores to a misaligned output), over
/// two whole tiles and a partial one.
fn scan_views<T: Value + scan::Element>(gpu: &Gpu, rng: &mut Rng) -> Result<(), Failed>
where
    Sum: ScanKernel<T>,
{
    let n = 2 * scan::tile::<T>() + 37;
    let host: Vec<T> = (0..n + 3)
        .map(|_| T::from_small(rng.below(21) as i64 - 10))
        .collect();
    let input = gpu.to_device(&host).map_err(fail)?;
    let mut scratch = scan::TileScratch::new(gpu, n).map_err(fail)?;
    for (from, to) in [(0, 0), (1, 0), (0, 3), (2, 1), (3, 2)] {
        let mut output = gpu
            .to_device(&vec![T::from_small(0); n + 3])
            .map_err(fail)?;
        for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
            scan::scan_on_device::<Sum, T>(
                gpu,
                &input.index(from..from + n),
                &mut output.index_mut(to..to + n),
                kind,
                None,
                &mut scratch,
            )
            .map_err(fail)?;
            let got = output.to_vec().map_err(fail)?;
            let want = scan::scan_cpu::<Sum, T>(&host[from..from + n], kind, None);
            if let Some(i) = (0..n).find(|&i| !got[to + i].same(want[i])) {
                return Err(Failed::from(format!(
                    "{} {kind:?} input at +{from}, output at +{to}: element {i} is {:?}, want {:?}",
                    <Sum as ScanKernel<T>>::ENTRY,
                    got[to + i],
                    want[i]
                )));
            }
        }
    }
    Ok(())
}

fn scan_on_device_of_views_at_every_alignment(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(27);
    scan_views::<i32>(gpu, &mut rng)?;
    scan_views::<f32>(gpu, &mut rng)?;
    scan_views::<u64>(gpu, &mut rng)?;
    scan_views::<f64>(gpu, &mut rng)
}

fn scan_refuses_bad_input(gpu: &Gpu) -> Result<(), Failed> {
    let empty =
        scan::inclusive_scan::<Sum, f32>(gpu, Array1::<f32>::zeros(0).view()).map_err(fail)?;
    ensure(empty.is_empty(), || format!("empty input gave {empty}"))?;
    let input = gpu.to_device(&[1i32; 10]).map_err(fail)?;
    let mut short = gpu.to_device(&[0i32; 9]).map_err(fail)?;
    let mut scratch = scan::TileScratch::<i32>::new(gpu, 10).map_err(fail)?;
    let r = scan::scan_on_device::<Sum, i32>(
        gpu,
        &input,
        &mut short,
        ScanKind::Inclusive,
        None,
        &mut scratch,
    );
    ensure(
        matches!(
            &r,
            Err(Error::InvalidInput {
                kernel: "scan_sum_i32",
                ..
            })
        ),
        || format!("short output: {r:?}"),
    )?;
    let big = gpu
        .to_device(&vec![1i32; scan::MIN_TILE + 1])
        .map_err(fail)?;
    let mut out = gpu
        .to_device(&vec![0i32; scan::MIN_TILE + 1])
        .map_err(fail)?;
    let r = scan::scan_on_device::<Sum, i32>(
        gpu,
        &big,
        &mut out,
        ScanKind::Inclusive,
        None,
        &mut scratch,
    );
    ensure(
        matches!(
            &r,
            Err(Error::InvalidInput {
                kernel: "scan_sum_i32",
                ..
            })
        ),
        || format!("scratch too small: {r:?}"),
    )?;
    let r = scan::check_len("scan_sum_i32", scan::MAX_LEN + 1);
    ensure(
        matches!(
            &r,
            Err(Error::InvalidInput {
                kernel: "scan_sum_i32",
                ..
            })
        ),
        || format!("past MAX_LEN: {r:?}"),
    )?;
    ensure(
        scan::check_len("scan_sum_i32", scan::MAX_LEN).is_ok(),
        || "MAX_LEN refused".into(),
    )
}

fn select_matches<T: Value + scan::Element>(gpu: &Gpu, rng: &mut Rng) -> Result<(), Failed>
where
    NonZero: select::SelectKernel<T>,
    select::ByFlags: select::SelectKernel<T>,
{
    for n in lengths(gpu) {
        let half: Vec<T> = (0..n)
            .map(|_| T::from_small(rng.below(2) as i64 * (1 + rng.below(50) as i64)))
            .collect();
        let mut cases = vec![
            ("half kept", half.clone()),
            ("none kept", vec![T::from_small(0); n]),
            ("all kept", vec![T::from_small(7); n]),
        ];
        if let Some(nan) = T::nan() {
            let mut with_nan = half.clone();
            for i in (0..n).step_by(7) {
                with_nan[i] = nan;
            }
            cases.push(("NaN-containing", with_nan));
        }
        for (name, input) in cases {
            let zero = T::from_small(0);
            let got = select::select::<NonZero, T>(gpu, Array1::from_vec(input.clone()).view())
                .map_err(fail)?;
            let want =
                select::select_cpu(&input, |_, x| !x.same(zero) && format!("{x:?}") != "-0.0");
            ensure(
                got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| a.same(*b)),
                || {
                    format!(
                        "select_nonzero {name} n={n}: {} kept, want {}",
                        got.len(),
                        want.len()
                    )
                },
            )?;
            let flags: Vec<bool> = (0..n).map(|i| (i * 7 + n) % 3 == 0).collect();
            let got = select::select_flagged(
                gpu,
                Array1::from_vec(input.clone()).view(),
                Array1::from_vec(flags.clone()).view(),
            )
            .map_err(fail)?;
            let want = select::select_cpu(&input, |i, _| flags[i]);
            ensure(
                got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| a.same(*b)),
                || {
                    format!(
                        "select_flagged {name} n={n}: {} kept, want {}",
                        got.len(),
                        want.len()
                    )
                },
            )?;
        }
    }
    Ok(())
}

fn select_by_predicate_and_flags_matches_cpu(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(26);
    select_matches::<i32>(gpu, &mut rng)?;
    select_matches::<u32>(gpu, &mut rng)?;
    select_matches::<i64>(gpu, &mut rng)?;
    select_matches::<u64>(gpu, &mut rng)?;
    select_matches::<f32>(gpu, &mut rng)?;
    select_matches::<f64>(gpu, &mut rng)
}

/// Inclusive and exclusive sums and both selections of `64 · tile + 5`
/// elements (65 tiles: the look-back runs a chain of 64 predecessors, the
/// tile counter past 64) against the CPU reference, element for element.
fn cross_64_tiles<T: Value + scan::Element>(gpu: &Gpu, rng: &mut Rng) -> Result<(), Failed>
where
    Sum: ScanKernel<T>,
    NonZero: select::SelectKernel<T>,
    select::ByFlags: select::SelectKernel<T>,
{
    let n = 64 * scan::tile::<T>() + 5;
    // 0, 1 or 2: every prefix sum exact in every type (below 2^24).
    let input: Vec<T> = (0..n).map(|_| T::from_small(rng.below(3) as i64)).collect();
    let same = |what: &str, got: &[T], want: &[T]| {
        ensure(got.len() == want.len(), || {
            format!(
                "{what} n = {n}: {} elements, want {}",
                got.len(),
                want.len()
            )
        })?;
        match (0..want.len()).find(|&i| !got[i].same(want[i])) {
            None => Ok(()),
            Some(i) => Err(Failed::from(format!(
                "{what} n = {n}: element {i} (tile {}) is {:?}, want {:?}",
                i / scan::tile::<T>(),
                got[i],
                want[i]
            ))),
        }
    };
    let x = Array1::from_vec(input.clone());
    for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
        let got = scan::scan::<Sum, T>(gpu, x.view(), kind, None).map_err(fail)?;
        let want = scan::scan_cpu::<Sum, T>(&input, kind, None);
        same(
            &format!("{} {kind:?}", <Sum as ScanKernel<T>>::ENTRY),
            got.as_slice().unwrap_or(&[]),
            &want,
        )?;
    }
    let zero = T::from_small(0);
    let got = select::select::<NonZero, T>(gpu, x.view()).map_err(fail)?;
    let want = select::select_cpu(&input, |_, v| !v.same(zero));
    same("select_nonzero", got.as_slice().unwrap_or(&[]), &want)?;
    let flags: Vec<bool> = (0..n).map(|i| (i * 7 + 3) % 5 < 2).collect();
    let got = select::select_flagged(gpu, x.view(), Array1::from_vec(flags.clone()).view())
        .map_err(fail)?;
    let want = select::select_cpu(&input, |i, _| flags[i]);
    same("select_flagged", got.as_slice().unwrap_or(&[]), &want)
}

fn scan_and_select_cross_64_tiles_every_type(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(64);
    cross_64_tiles::<i32>(gpu, &mut rng)?;
    cross_64_tiles::<u32>(gpu, &mut rng)?;
    cross_64_tiles::<i64>(gpu, &mut rng)?;
    cross_64_tiles::<u64>(gpu, &mut rng)?;
    cross_64_tiles::<f32>(gpu, &mut rng)?;
    cross_64_tiles::<f64>(gpu, &mut rng)
}

fn select_refuses_bad_input(gpu: &Gpu) -> Result<(), Failed> {
    let x = Array1::from_vec(vec![1i32, 0, 2]);
    let r = select::select_flagged(gpu, x.view(), Array1::from_vec(vec![true]).view());
    ensure(
        matches!(
            &r,
            Err(Error::InvalidInput {
                kernel: "select_flagged_i32",
                ..
            })
        ),
        || format!("flags of another length: {r:?}"),
    )?;
    let empty =
        select::select::<NonZero, i32>(gpu, Array1::<i32>::zeros(0).view()).map_err(fail)?;
    ensure(empty.is_empty(), || format!("empty input gave {empty}"))?;
    let input = gpu.to_device(&[1i32; 10]).map_err(fail)?;
    let mut out = gpu.to_device(&[0i32; 10]).map_err(fail)?;
    let mut scratch = select::SelectScratch::new(gpu, 10).map_err(fail)?;
    let r =
        select::select_on_device::<select::ByFlags, i32>(gpu, &input, None, &mut out, &mut scratch);
    ensure(
        matches!(
            &r,
            Err(Error::InvalidInput {
                kernel: "select_flagged_i32",
                ..
            })
        ),
        || format!("flags missing: {r:?}"),
    )
}

/// A tile's flags in the tiled kernels' state (`scan::TileState`).
const AGGREGATE: u32 = 1;
const INCLUSIVE: u32 = 2;

/// An element of the look-back check: how a tile's flag and value sit in
/// the state (`scan::TileState`'s layout, written out here from its docs).
trait LookBackElement: Copy + Debug + PartialEq + std::ops::Add<Output = Self> {
    fn from_f64(x: f64) -> Self;
    fn bits(self) -> u64;
    /// Writes tile `t`'s flag and value into the host copies of the state.
    fn put(
        state: &mut [u32],
        aggregates: &mut [Self],
        inclusives: &mut [Self],
        t: usize,
        flag: u32,
        value: Self,
    );
    /// Tile `t`'s flag and value in the host copies of the state.
    fn get(state: &[u32], aggregates: &[Self], inclusives: &[Self], t: usize) -> (u32, Self);
}

impl LookBackElement for f32 {
    fn from_f64(x: f64) -> Self {
        x as f32
    }
    fn bits(self) -> u64 {
        self.to_bits().into()
    }
    /// Packed: the value's bits in the word's low half, the flag in the high.
    fn put(state: &mut [u32], _: &mut [f32], _: &mut [f32], t: usize, flag: u32, value: f32) {
        state[2 + 2 * t] = value.to_bits();
        state[3 + 2 * t] = flag;
    }
    fn get(state: &[u32], _: &[f32], _: &[f32], t: usize) -> (u32, f32) {
        (state[3 + 2 * t], f32::from_bits(state[2 + 2 * t]))
    }
}

impl LookBackElement for f64 {
    fn from_f64(x: f64) -> Self {
        x
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
    /// The flag in the word's low half, the value in an array of its own.
    fn put(
        state: &mut [u32],
        aggregates: &mut [f64],
        inclusives: &mut [f64],
        t: usize,
        flag: u32,
        value: f64,
    ) {
        state[2 + 2 * t] = flag;
        let values = if flag == INCLUSIVE {
            inclusives
        } else {
            aggregates
        };
        values[t] = value;
    }
    fn get(state: &[u32], aggregates: &[f64], inclusives: &[f64], t: usize) -> (u32, f64) {
        let flag = state[2 + 2 * t];
        (
            flag,
            if flag == INCLUSIVE {
                inclusives[t]
            } else {
                aggregates[t]
            },
        )
    }
}

/// A launch of a `look_back_check_*` kernel: (state, aggregates,
/// inclusives, tile, aggregate, out).
type LookBackLaunch<'a, T> = &'a dyn Fn(
    &mut DeviceBuffer<u32>,
    &mut DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    usize,
    T,
    &mut DeviceBuffer<T>,
) -> Result<(), Error>;

/// The tiled kernels' look-back (`scan::TileState::look_back`, through the
/// `look_back_check_*` kernels) on states filled in by hand, for a packed
/// (f32) and an unpacked (f64) element: the nearest inclusive prefix in the
/// first window, several windows back (so it walks back, then reads the
/// windows after it again), or only tile 0's. Wherever it stops, the
/// exclusive prefix is the left fold `((a_0 + a_1) + …) + a_{t−1}` of the
/// aggregates, bit for bit (the values span twelve orders of magnitude, so
/// another order of additions gives other bits), and the tile publishes
/// `prefix + aggregate` as its inclusive prefix.
fn look_back_gives_the_left_fold_wherever_it_stops(gpu: &Gpu) -> Result<(), Failed> {
    look_back_cases::<f32>(gpu, &|s, a, i, tile, agg, out| {
        // SAFETY: a state of `tile + 1` tiles, every tile before `tile`
        // published; one element out; one warp.
        unsafe {
            gpu.launch(
                LOOK_BACK_CHECK_F32,
                LaunchConfig::linear(1, 32),
                gpu.stream(),
                (s, a, i, tile, agg, out),
            )
        }
    })?;
    look_back_cases::<f64>(gpu, &|s, a, i, tile, agg, out| {
        // SAFETY: as above.
        unsafe {
            gpu.launch(
                LOOK_BACK_CHECK_F64,
                LaunchConfig::linear(1, 32),
                gpu.stream(),
                (s, a, i, tile, agg, out),
            )
        }
    })
}

fn look_back_cases<T>(gpu: &Gpu, launch: LookBackLaunch<'_, T>) -> Result<(), Failed>
where
    T: LookBackElement
        + cuda_kernels::cust::memory::DeviceCopy
        + cuda_kernels::cust::memory::bytemuck::Zeroable,
{
    // (tile, the earlier tiles that published their inclusive prefix; tile
    // 0 always has).
    let cases: &[(usize, &[usize])] = &[
        (1, &[]),
        (2, &[]),
        (31, &[]),
        (32, &[]),
        (33, &[]),
        (100, &[]),
        (100, &[50]),
        (127, &[]),
        (128, &[]),
        (129, &[]),
        (130, &[1]),
        (200, &[72]),
        (200, &[71]),
        (256, &[127, 128]),
        (300, &[100, 171]),
        (300, &[5, 170, 171]),
        (1000, &[]),
        (1000, &[500, 700]),
    ];
    let mut rng = Rng::new(0x100c_bac4);
    for &(tile, inclusive_at) in cases {
        let what = format!(
            "{} tile {tile}, inclusive prefixes at 0 and {inclusive_at:?}",
            std::any::type_name::<T>()
        );
        let aggregates_in: Vec<T> = (0..=tile)
            .map(|_| T::from_f64((rng.uniform() - 0.3) * 10f64.powi(rng.below(13) as i32 - 6)))
            .collect();
        let mut state = vec![0u32; 2 + 2 * (tile + 1)];
        let zero = T::from_f64(0.0);
        let (mut aggregates, mut inclusives) = (vec![zero; tile + 1], vec![zero; tile + 1]);
        let mut fold = zero;
        for (t, &a) in aggregates_in[..tile].iter().enumerate() {
            fold = fold + a;
            if t == 0 || inclusive_at.contains(&t) {
                T::put(
                    &mut state,
                    &mut aggregates,
                    &mut inclusives,
                    t,
                    INCLUSIVE,
                    fold,
                );
            } else {
                T::put(
                    &mut state,
                    &mut aggregates,
                    &mut inclusives,
                    t,
                    AGGREGATE,
                    a,
                );
            }
        }
        let (mut ds, mut da, mut di) = (
            gpu.to_device(&state).map_err(fail)?,
            gpu.to_device(&aggregates).map_err(fail)?,
            gpu.to_device(&inclusives).map_err(fail)?,
        );
        let mut out = gpu.to_device(&[zero]).map_err(fail)?;
        launch(
            &mut ds,
            &mut da,
            &mut di,
            tile,
            aggregates_in[tile],
            &mut out,
        )
        .map_err(fail)?;
        gpu.synchronize("look_back_check").map_err(fail)?;
        let got = out.to_vec().map_err(fail)?[0];
        ensure(got.bits() == fold.bits(), || {
            format!("{what}: prefix {got:?}, want {fold:?}")
        })?;
        let (state, aggregates, inclusives) = (
            ds.to_vec().map_err(fail)?,
            da.to_vec().map_err(fail)?,
            di.to_vec().map_err(fail)?,
        );
        let (flag, published) = T::get(&state, &aggregates, &inclusives, tile);
        let want = fold + aggregates_in[tile];
        ensure(flag == INCLUSIVE && published.bits() == want.bits(), || {
            format!("{what}: published flag {flag} value {published:?}, want {INCLUSIVE} {want:?}")
        })?;
    }
    Ok(())
}
