//! GPU tests of the reduce family (K10): every operation over every type at
//! awkward lengths, initial values, empty inputs, misaligned device slices,
//! float sums against an accurate reference within the order-aware bound,
//! scratch reuse, the user-declared `Xor`, more than 2^31 elements, and each
//! device primitive (shuffles and votes, atomics, wide loads, the block tree)
//! through its own test kernel.
mod common;

use std::fmt::Display;
use std::process::ExitCode;

use common::{ensure, fail, gpu_test, run, shared_gpu};
use cuda_kernels::Error;
use cuda_kernels::Gpu;
use cuda_kernels::cust::memory::{CopyDestination, DeviceBuffer, mem_get_info};
use cuda_kernels::ndarray::{Array1, s};
use cuda_kernels::reduce::{
    Element, Max, Min, Product, ReduceKernel, Sum, Xor, accurate_sum, float_sum_tolerance,
    reduce_cpu,
};
use cuda_kernels::util::Rng;
use libtest_mimic::{Completion, Failed, Trial};

/// Lengths around every boundary the kernel has: the 16-byte vector (4 or 2
/// elements), the unroll (4 vectors), the warp, the block (1024 threads;
/// 256 in earlier shapes), one vector per thread of a block (2048 or 4096
/// elements), many blocks, and past the resident grid (a grid-stride loop).
#[rustfmt::skip]
const LENGTHS: &[usize] = &[
    1, 2, 3, 4, 5, 7, 8, 9, 31, 32, 33, 255, 256, 257, 1000, 1023, 1024, 1025, 2047, 2049,
    4095, 4097, 65_537, 1_000_003, (1 << 20) + 3,
];

fn main() -> ExitCode {
    run(vec![
        gpu_test("seed_sum_of_1_to_10000_is_50005000", seed_sum),
        gpu_test(
            "every_op_and_type_matches_cpu_at_awkward_lengths",
            every_op_and_type,
        ),
        gpu_test("initial_values_are_combined", initial_values),
        gpu_test("empty_inputs_give_init_identity_or_error", empty_inputs),
        gpu_test("misaligned_device_slices", misaligned_device_slices),
        gpu_test(
            "float_sums_within_order_tolerance",
            float_sums_within_tolerance,
        ),
        gpu_test("integer_sums_wrap_like_cpu", integer_sums_wrap),
        gpu_test("strided_views", strided_views),
        gpu_test("scratch_reuse_resets_the_counter", scratch_reuse),
        gpu_test("user_declared_xor", user_declared_xor),
        gpu_test("warp_shuffles_and_votes", warp_shuffles_and_votes),
        gpu_test("atomics", atomics),
        gpu_test("wide_and_l2_loads", wide_loads),
        gpu_test("block_reduce_tree", block_reduce_tree),
        beyond_2_31_trial(),
    ])
}

/// Test data per element type.
trait TestElem: Element + Display {
    /// Values whose sums are exact in any order for these lengths (small
    /// integers for floats: every partial sum is an integer below 2^24);
    /// any value for integers (sums wrap, exactly, in any order).
    fn for_sum(rng: &mut Rng) -> Self;
    /// Values whose products are exact in any order: ±1 and, at most 64
    /// times over the whole input, 2 or 0.5 (floats); odd values (integers:
    /// the product wraps but does not collapse to 0).
    fn for_product(rng: &mut Rng, i: usize, n: usize) -> Self;
    /// Any value (floats: uniform in [-1e3, 1e3)).
    fn any(rng: &mut Rng) -> Self;
    /// As f64.
    fn f(self) -> f64;
}

macro_rules! test_int {
    ($($t:ty),*) => {$(
        impl TestElem for $t {
            fn for_sum(rng: &mut Rng) -> Self { rng.next_u64() as $t }
            fn for_product(rng: &mut Rng, _i: usize, _n: usize) -> Self { (rng.next_u64() | 1) as $t }
            fn any(rng: &mut Rng) -> Self { rng.next_u64() as $t }
            fn f(self) -> f64 { self as f64 }
        }
    )*};
}
macro_rules! test_float {
    ($($t:ty),*) => {$(
        impl TestElem for $t {
            fn for_sum(rng: &mut Rng) -> Self { (rng.below(17) as i64 - 8) as $t }
            fn for_product(rng: &mut Rng, i: usize, n: usize) -> Self {
                let sign = if rng.below(2) == 0 { 1.0 } else { -1.0 };
                if i % (n / 64 + 1) == 0 {
                    sign * if rng.below(2) == 0 { 2.0 } else { 0.5 }
                } else {
                    sign
                }
            }
            fn any(rng: &mut Rng) -> Self { ((rng.uniform() * 2.0 - 1.0) * 1e3) as $t }
            fn f(self) -> f64 { self as f64 }
        }
    )*};
}
test_int!(i32, i64);
test_float!(f32, f64);

/// GPU and CPU agree exactly on `data` (with and without `init`).
fn same<Op: ReduceKernel<T>, T: TestElem>(
    gpu: &Gpu,
    data: &Array1<T>,
    init: Option<T>,
) -> Result<(), Failed> {
    let got = gpu.reduce::<Op, T>(data.view(), init).map_err(fail)?;
    let expected = reduce_cpu::<Op, T>(data.view(), init).map_err(fail)?;
    ensure(got == expected, || {
        format!(
            "{} over {} elements (init {init:?}): GPU {got}, CPU {expected}",
            Op::ENTRY,
            data.len()
        )
    })
}

fn seed_sum(gpu: &Gpu) -> Result<(), Failed> {
    let a = Array1::from_iter(1..=10_000i64);
    let got = gpu.reduce::<Sum, i64>(a.view(), None).map_err(fail)?;
    ensure(got == 50_005_000, || format!("got {got}"))
}

fn every_op_and_type(gpu: &Gpu) -> Result<(), Failed> {
    fn for_type<T: TestElem>(gpu: &Gpu, seed: u64) -> Result<(), Failed>
    where
        Sum: ReduceKernel<T>,
        Product: ReduceKernel<T>,
        Min: ReduceKernel<T>,
        Max: ReduceKernel<T>,
    {
        for &n in LENGTHS {
            let mut rng = Rng::new(seed ^ n as u64);
            let sums: Array1<T> = (0..n).map(|_| T::for_sum(&mut rng)).collect();
            let prods: Array1<T> = (0..n).map(|i| T::for_product(&mut rng, i, n)).collect();
            let any: Array1<T> = (0..n).map(|_| T::any(&mut rng)).collect();
            same::<Sum, T>(gpu, &sums, None)?;
            same::<Product, T>(gpu, &prods, None)?;
            same::<Min, T>(gpu, &any, None)?;
            same::<Max, T>(gpu, &any, None)?;
        }
        Ok(())
    }
    for_type::<i32>(gpu, 1)?;
    for_type::<i64>(gpu, 2)?;
    for_type::<f32>(gpu, 3)?;
    for_type::<f64>(gpu, 4)
}

fn initial_values(gpu: &Gpu) -> Result<(), Failed> {
    let a: Array1<i64> = Array1::from_iter(1..=1000);
    let cases = [
        (
            gpu.reduce::<Sum, i64>(a.view(), Some(-500_500))
                .map_err(fail)?,
            0,
        ),
        (
            gpu.reduce::<Max, i64>(a.view(), Some(5000)).map_err(fail)?,
            5000,
        ),
        (
            gpu.reduce::<Max, i64>(a.view(), Some(5)).map_err(fail)?,
            1000,
        ),
        (
            gpu.reduce::<Min, i64>(a.view(), Some(-1)).map_err(fail)?,
            -1,
        ),
        (
            gpu.reduce::<Product, i64>(a.slice(s![..5]), Some(2))
                .map_err(fail)?,
            240,
        ),
    ];
    for (i, (got, want)) in cases.into_iter().enumerate() {
        ensure(got == want, || format!("case {i}: {got} vs {want}"))?;
    }
    let x = Array1::from(vec![1.5f32, -2.0, 4.0]);
    same::<Sum, f32>(gpu, &x, Some(100.0))?;
    same::<Min, f32>(gpu, &x, Some(-3.0))?;
    same::<Max, f64>(gpu, &x.mapv(f64::from), Some(f64::NEG_INFINITY))
}

fn empty_inputs(gpu: &Gpu) -> Result<(), Failed> {
    // This thread allocates through cust directly below: make the context current.
    gpu.bind().map_err(fail)?;
    let e32: Vec<f32> = Vec::new();
    ensure(
        gpu.reduce_slice::<Sum, f32>(&e32, None).map_err(fail)? == 0.0,
        || "sum of nothing".into(),
    )?;
    ensure(
        gpu.reduce_slice::<Product, f32>(&e32, None).map_err(fail)? == 1.0,
        || "product of nothing".into(),
    )?;
    ensure(
        gpu.reduce_slice::<Min, f32>(&e32, Some(7.0))
            .map_err(fail)?
            == 7.0,
        || "min with init".into(),
    )?;
    for r in [
        gpu.reduce_slice::<Min, f32>(&e32, None),
        gpu.reduce_slice::<Max, f32>(&e32, None),
    ] {
        match r {
            Err(Error::InvalidInput { kernel, .. }) if kernel.starts_with("reduce_m") => {}
            other => {
                return Err(
                    format!("min/max of nothing: expected InvalidInput, got {other:?}").into(),
                );
            }
        }
    }
    // On the device, an empty slice launches: the kernel itself returns init / identity.
    let buf = DeviceBuffer::from_slice(&[1i64, 2, 3]).map_err(fail)?;
    let empty = buf.index(1..1);
    ensure(
        gpu.reduce_device::<Sum, i64>(&empty, None).map_err(fail)? == 0,
        || "device sum of nothing".into(),
    )?;
    ensure(
        gpu.reduce_device::<Sum, i64>(&empty, Some(42))
            .map_err(fail)?
            == 42,
        || "device init".into(),
    )?;
    ensure(
        gpu.reduce_device::<Max, i64>(&empty, Some(-9))
            .map_err(fail)?
            == -9,
        || "device max init".into(),
    )?;
    match gpu.reduce_device::<Max, i64>(&empty, None) {
        Err(Error::InvalidInput {
            kernel: "reduce_max_i64",
            ..
        }) => Ok(()),
        other => Err(format!("device max of nothing: expected InvalidInput, got {other:?}").into()),
    }
}

fn misaligned_device_slices(gpu: &Gpu) -> Result<(), Failed> {
    fn for_type<T: TestElem>(gpu: &Gpu) -> Result<(), Failed>
    where
        Sum: ReduceKernel<T>,
        Min: ReduceKernel<T>,
    {
        gpu.bind().map_err(fail)?;
        let mut rng = Rng::new(99);
        let host: Vec<T> = (0..100_000).map(|_| T::for_sum(&mut rng)).collect();
        let dev = DeviceBuffer::from_slice(&host).map_err(fail)?;
        for start in 0..5 {
            for len in [0usize, 1, 2, 3, 5, 6, 7, 8, 9, 63, 64, 65, 4099, 99_990] {
                let part = dev.index(start..start + len);
                let h = Array1::from(host[start..start + len].to_vec());
                let got = gpu.reduce_device::<Sum, T>(&part, None).map_err(fail)?;
                let want = reduce_cpu::<Sum, T>(h.view(), None).map_err(fail)?;
                ensure(got == want, || {
                    format!("{} sum [{start}..+{len}]: {got} vs {want}", T::NAME)
                })?;
                if len > 0 {
                    let got = gpu.reduce_device::<Min, T>(&part, None).map_err(fail)?;
                    let want = reduce_cpu::<Min, T>(h.view(), None).map_err(fail)?;
                    ensure(got == want, || {
                        format!("{} min [{start}..+{len}]: {got} vs {want}", T::NAME)
                    })?;
                }
            }
        }
        Ok(())
    }
    for_type::<i32>(gpu)?;
    for_type::<i64>(gpu)?;
    for_type::<f32>(gpu)?;
    for_type::<f64>(gpu)
}

fn float_sums_within_tolerance(gpu: &Gpu) -> Result<(), Failed> {
    fn for_type<T: TestElem>(gpu: &Gpu, u: f64) -> Result<(), Failed>
    where
        Sum: ReduceKernel<T>,
    {
        for n in [1000usize, (1 << 20) + 3, 1 << 24] {
            let mut rng = Rng::new(n as u64);
            let data: Array1<T> = (0..n).map(|_| T::any(&mut rng)).collect();
            let got = gpu.reduce::<Sum, T>(data.view(), None).map_err(fail)?.f();
            let exact = accurate_sum(data.iter().map(|x| x.f()));
            let sum_abs: f64 = data.iter().map(|x| x.f().abs()).sum();
            let (grid, block) = gpu.reduce_launch_shape::<Sum, T>(n).map_err(fail)?;
            let tol = float_sum_tolerance(n, (grid * block) as usize, sum_abs, u);
            let cpu = reduce_cpu::<Sum, T>(data.view(), None).map_err(fail)?.f();
            ensure((got - exact).abs() <= tol, || {
                format!(
                    "{} n = {n}: GPU {got}, exact {exact}, |Δ| {:.3e} > tol {tol:.3e} (CPU sequential |Δ| {:.3e})",
                    T::NAME,
                    (got - exact).abs(),
                    (cpu - exact).abs()
                )
            })?;
        }
        Ok(())
    }
    for_type::<f32>(gpu, f32::EPSILON as f64 / 2.0)?;
    for_type::<f64>(gpu, f64::EPSILON / 2.0)
}

fn integer_sums_wrap(gpu: &Gpu) -> Result<(), Failed> {
    let a = Array1::from(vec![i32::MAX; 1001]);
    let got = gpu.reduce::<Sum, i32>(a.view(), None).map_err(fail)?;
    ensure(got == i32::MAX.wrapping_mul(1001), || format!("i32 {got}"))?;
    let b = Array1::from(vec![i64::MIN + 3; 777]);
    same::<Sum, i64>(gpu, &b, None)?;
    same::<Product, i64>(gpu, &b, Some(3))
}

fn strided_views(gpu: &Gpu) -> Result<(), Failed> {
    let a: Array1<f64> = (0..10_001).map(|i| (i % 97) as f64).collect();
    for v in [
        a.slice(s![..;3]),
        a.slice(s![..;-2]),
        a.slice(s![5..9000;7]),
    ] {
        let got = gpu.reduce::<Sum, f64>(v, None).map_err(fail)?;
        let want = reduce_cpu::<Sum, f64>(v, None).map_err(fail)?;
        ensure(got == want, || format!("{got} vs {want}"))?;
    }
    Ok(())
}

fn scratch_reuse(gpu: &Gpu) -> Result<(), Failed> {
    gpu.bind().map_err(fail)?;
    let mut scratch = gpu.reduce_scratch::<i32>().map_err(fail)?;
    let host: Vec<i32> = (0..3_000_000).map(|i| (i % 1000) - 500).collect();
    let dev = DeviceBuffer::from_slice(&host).map_err(fail)?;
    for (k, len) in [3_000_000usize, 1, 70_000, 2_999_999, 256, 0, 3_000_000]
        .into_iter()
        .enumerate()
    {
        let part = dev.index(k..k + len.min(host.len() - k));
        let want: i32 = host[k..k + part.len()]
            .iter()
            .fold(0i32, |a, &b| a.wrapping_add(b));
        for _ in 0..3 {
            gpu.reduce_on_device::<Sum, i32>(&part, None, &mut scratch)
                .map_err(fail)?;
        }
        let got = scratch.result(gpu).map_err(fail)?;
        ensure(got == want, || {
            format!("launch {k} (len {}): {got} vs {want}", part.len())
        })?;
    }
    Ok(())
}

fn user_declared_xor(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(5);
    for &n in LENGTHS {
        let a: Array1<i32> = (0..n).map(|_| rng.next_u64() as i32).collect();
        same::<Xor, i32>(gpu, &a, None)?;
        let b: Array1<i64> = (0..n).map(|_| rng.next_u64() as i64).collect();
        same::<Xor, i64>(gpu, &b, Some(0x5555))?;
    }
    Ok(())
}

fn warp_shuffles_and_votes(gpu: &Gpu) -> Result<(), Failed> {
    let (blocks, tpb) = (3u32, 128u32);
    let r = gpu.warp_primitives_test(blocks, tpb).map_err(fail)?;
    let threads = (blocks * tpb) as usize;
    let x = |g: usize| (g as u32).wrapping_mul(3).wrapping_add(1);
    let y = |g: usize| ((g as u64) << 33) | g as u64;
    for g in 0..threads {
        let lane = g % 32;
        let base = g - lane;
        let down = if lane + 1 < 32 { g + 1 } else { g };
        let up = if lane >= 3 { g - 3 } else { g };
        let xor = base + (lane ^ 5);
        let idx = base + 7;
        let want32 = [x(down), x(up), x(xor), x(idx), lane as u32];
        let want64 = [y(down), y(up), y(xor), y(idx)];
        for (row, w) in want32.iter().enumerate() {
            ensure(r.rows32[row][g] == *w, || {
                format!("32-bit row {row}, thread {g}: {} vs {w}", r.rows32[row][g])
            })?;
        }
        for (row, w) in want64.iter().enumerate() {
            ensure(r.rows64[row][g] == *w, || {
                format!("64-bit row {row}, thread {g}: {} vs {w}", r.rows64[row][g])
            })?;
        }
        let warp_sum32 = (base..base + 32).fold(0u32, |a, h| a.wrapping_add(x(h)));
        let warp_sum64 = (base..base + 32).fold(0u64, |a, h| a.wrapping_add(y(h)));
        if lane == 0 {
            ensure(r.rows32[5][g] == warp_sum32, || {
                format!("warp::reduce u32 at {g}")
            })?;
            ensure(r.rows64[4][g] == warp_sum64, || {
                format!("warp::reduce u64 at {g}")
            })?;
        }
        ensure(r.rows32[6][g] == warp_sum32, || {
            format!("warp::all_reduce u32 at {g}")
        })?;
        ensure(r.rows64[5][g] == warp_sum64, || {
            format!("warp::all_reduce u64 at {g}")
        })?;
        let ballot = (0..32).fold(
            0u32,
            |m, l| if x(base + l) % 3 == 0 { m | 1 << l } else { m },
        );
        ensure(r.rows32[7][g] == ballot, || {
            format!("ballot at {g}: {:#x} vs {ballot:#x}", r.rows32[7][g])
        })?;
        let any = (base..base + 32).any(|h| h % 64 == 5) as u64;
        ensure(r.rows64[6][g] == any, || format!("any at {g}"))?;
        ensure(r.rows64[7][g] == 1, || format!("all at {g}"))?;
    }
    Ok(())
}

fn atomics(gpu: &Gpu) -> Result<(), Failed> {
    let n = 100_003usize;
    let r = gpu.atomic_primitives_test(n).map_err(fail)?;
    let mut seen = vec![false; n];
    for &t in &r.tickets {
        ensure((t as usize) < n && !seen[t as usize], || {
            format!("ticket {t} out of range or repeated")
        })?;
        seen[t as usize] = true;
    }
    let c = r.counters;
    ensure(c[0] == n as u32, || format!("add counter {}", c[0]))?;
    ensure(c[1] == n as u32 - 1 && c[2] == 0, || {
        format!("max/min {} {}", c[1], c[2])
    })?;
    ensure((c[3] as usize) < n, || format!("exchange left {}", c[3]))?;
    ensure(c[4] >= 1 && c[4] as usize <= n && c[5] == 1, || {
        format!("cas target {} winners {}", c[4], c[5])
    })?;
    let half = (n / 2) as i32;
    ensure(r.signed == [n as i32 - 1 - half, -half], || {
        format!("signed max/min {:?}", r.signed)
    })?;
    // 100003 additions of 1.0 are exact in f32 (below 2^24); 0.5s are exact in f64.
    ensure(r.sum_f32 == n as f32, || format!("f32 sum {}", r.sum_f32))?;
    ensure(r.sum_f64 == n as f64 * 0.5, || {
        format!("f64 sum {}", r.sum_f64)
    })?;
    ensure(r.sum_u64 == (n as u64 * (n as u64 - 1)) / 2, || {
        format!("u64 sum {}", r.sum_u64)
    })
}

fn wide_loads(gpu: &Gpu) -> Result<(), Failed> {
    let input: Vec<u32> = (0..4 * 70_001u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let (nc, cg) = gpu.load_primitives_test(&input).map_err(fail)?;
    ensure(nc == input, || "ld.global.nc.v4 copy differs".into())?;
    ensure(cg == input, || "ld.global.cg copy differs".into())
}

fn block_reduce_tree(gpu: &Gpu) -> Result<(), Failed> {
    for tpb in [32u32, 64, 96, 256, 480, 1024] {
        let blocks = 7usize;
        let input: Vec<i64> = (0..blocks * tpb as usize)
            .map(|i| (i as i64 - 1000) * 1_000_003)
            .collect();
        let got = gpu.block_reduce_test(&input, tpb).map_err(fail)?;
        let want: Vec<i64> = input.chunks(tpb as usize).map(|c| c.iter().sum()).collect();
        ensure(got == want, || format!("block {tpb}: {got:?} vs {want:?}"))?;
    }
    Ok(())
}

/// More than 2^31 elements (2^31 + 5 i32, 8.6 GB): ignored, with the
/// reason, where the GPU has too little free memory.
fn beyond_2_31_trial() -> Trial {
    Trial::ignorable_test("more_than_2_31_elements", || {
        let gpu = match shared_gpu() {
            Ok(g) => g,
            Err(reason) => return Ok(Completion::ignored_with(reason)),
        };
        let n = (1usize << 31) + 5;
        let bytes = n * 4;
        gpu.bind().map_err(fail)?;
        let (free, _) = mem_get_info().map_err(fail)?;
        if free < bytes + (512 << 20) {
            return Ok(Completion::ignored_with(format!(
                "needs {:.1} GB of free GPU memory, {:.1} GB free",
                bytes as f64 / 1e9,
                free as f64 / 1e9
            )));
        }
        beyond_2_31(&gpu, n).map(|()| Completion::Completed)
    })
    .with_kind("gpu")
}

fn beyond_2_31(gpu: &Gpu, n: usize) -> Result<(), Failed> {
    // SAFETY (of the test): every element is written by set_32 before use.
    let mut buf = unsafe { DeviceBuffer::<i32>::uninitialized(n) }.map_err(fail)?;
    buf.set_32(1).map_err(fail)?;
    // Distinct values past 2^31: a minimum, a maximum, and a tail.
    let specials: [(usize, i32); 4] = [(1 << 31, 99), ((1 << 31) + 2, -5), (n - 1, 7), (3, 2)];
    for &(i, v) in &specials {
        let mut one = buf.index(i..i + 1);
        one.copy_from(&[v][..]).map_err(fail)?;
    }
    let extra: i64 = specials.iter().map(|&(_, v)| v as i64 - 1).sum();
    let want = (n as i64 + extra) as i32; // wraps like the GPU's i32 sum
    let got = gpu.reduce_device::<Sum, i32>(&buf, None).map_err(fail)?;
    ensure(got == want, || format!("sum: {got} vs {want}"))?;
    let got = gpu.reduce_device::<Min, i32>(&buf, None).map_err(fail)?;
    ensure(got == -5, || format!("min: {got}"))?;
    let got = gpu.reduce_device::<Max, i32>(&buf, None).map_err(fail)?;
    ensure(got == 99, || format!("max: {got}"))?;
    // Misaligned start (head elements) at this size too: drops element 0 (a 1).
    let tail = buf.index(1..);
    let got = gpu.reduce_device::<Sum, i32>(&tail, None).map_err(fail)?;
    ensure(got == want.wrapping_sub(1), || {
        format!("sum from 1: {got} vs {}", want.wrapping_sub(1))
    })?;
    let got = gpu
        .reduce_device::<Sum, i32>(&buf, Some(-100))
        .map_err(fail)?;
    ensure(got == want.wrapping_sub(100), || {
        format!("sum with init: {got}")
    })
}
