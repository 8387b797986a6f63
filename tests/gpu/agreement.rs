//! The simulator against the GPU: every kernel, through its launcher, on the
//! GPU and on the simulator with the same inputs at the suite's hidden odd
//! sizes (1, 31, 257, 1000, 65,537, 2^20 + 3 and the like), and the two
//! results compared. Equal bit for bit: the integer kernels, Mandelbrot,
//! Life, `mult_ker`, the elementwise kernels, the warp, atomic, load and
//! block-tree primitives, and the float reductions (the simulator keeps the
//! GPU's summation order: the same grid, the same tree). Within their
//! documented bounds on both (and how many elements differ, printed): the
//! matrix products, naive and tiled, and the math functions (libdevice on
//! the GPU, the host's implementation on the simulator).
//!
//! These are hardware-only tests (they need both): ignored without a GPU.
//! The GPU is the trial's; the simulator is the harness's shared one, which
//! stands in for an H100 (132 multiprocessors); the reductions, whose
//! launch shape depends on the count, run on both with the GPU's own shape,
//! so that their bit-for-bit agreement holds on any GPU.
use std::fmt::Debug;

use cuda_kernels::Gpu;
use cuda_kernels::life::{LifeKernel, LifeSims, random_lattice};
use cuda_kernels::mandelbrot::linspace_f32;
use cuda_kernels::math_checks::{MATH_FUNCTIONS, MathFloat, math_arguments, measure};
use cuda_kernels::matrices::{MatmulKernel, MatmulReference};
use cuda_kernels::multiply::multiply_inputs;
use cuda_kernels::ndarray::{Array1, Array2, ArrayD, IxDyn};
use cuda_kernels::reduce::{Max, Min, Product, ReduceKernel, Sum, Xor};
use cuda_kernels::streams::{SEED_BLOCK, SEED_GRID, randn_arrays};
use cuda_kernels::util::Rng;
use libtest_mimic::{Failed, Trial};

use crate::common::{fail, shared_simulator};
use crate::support::props::Draw;
use crate::support::{Elem, first_unlike_as};
use cuda_kernels::prelude::*;

/// What every trial here is about (the reason it gives without a GPU).
macro_rules! agree {
    ($body:ident) => {
        hardware!("simulator–GPU agreement", $body)
    };
}

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        agree!(foundation_kernels_agree),
        agree!(matrix_kernels_agree),
        agree!(sgemm_within_bounds_on_both),
        agree!(reductions_agree),
        agree!(primitives_agree),
        agree!(mandelbrot_agrees),
        agree!(streams_and_life_agree),
        agree!(math_within_bounds_on_both),
    ]
}

/// The hidden odd lengths of the 1-D kernels.
const LENGTHS: &[usize] = &[1, 2, 31, 255, 257, 1000, 4097, 65_537, (1 << 20) + 3];

/// `run` on the GPU and on the simulator: (GPU's result, simulator's).
fn both<T>(gpu: &Gpu, run: impl Fn(&Gpu) -> cuda_kernels::Result<T>) -> Result<(T, T), Failed> {
    let sim = shared_simulator().map_err(Failed::from)?;
    let on_gpu = run(gpu).map_err(|e| fail(format!("on the GPU: {e}")))?;
    let on_sim = run(&sim).map_err(|e| fail(format!("on the simulator: {e}")))?;
    Ok((on_gpu, on_sim))
}

/// `Err` naming `what` and the first element where the GPU's and the
/// simulator's results differ (floats: bit for bit, or both NaN).
fn identical<'a, T: Elem + 'a>(
    what: &str,
    on_gpu: impl IntoIterator<Item = &'a T>,
    on_sim: impl IntoIterator<Item = &'a T>,
) -> Result<(), Failed> {
    first_unlike_as(["GPU", "simulator"], on_gpu, on_sim).map_err(|e| format!("{what}: {e}").into())
}

/// `Err` naming `what` unless the two values are equal.
fn equal<T: PartialEq + Debug>(what: &str, on_gpu: T, on_sim: T) -> Result<(), Failed> {
    if on_gpu == on_sim {
        Ok(())
    } else {
        Err(format!("{what}: GPU {on_gpu:?}, simulator {on_sim:?}").into())
    }
}

fn foundation_kernels_agree(gpu: &Gpu) -> Result<(), Failed> {
    for &n in LENGTHS {
        let (a, b) = multiply_inputs(n, n as u64);
        let (g, s) = both(gpu, |d| d.multiply(a.view(), b.view()))?;
        identical(&format!("multiply, n = {n}"), &g, &s)?;
        let ai: Array1<i32> = (0..n as i32).map(|i| i.wrapping_mul(7919)).collect();
        let bi: Array1<i32> = (0..n as i32).map(|i| i32::MAX - i).collect();
        let (g, s) = both(gpu, |d| d.vector_sum_i32(ai.view(), bi.view()))?;
        identical(&format!("vector_sum_i32, n = {n}"), &g, &s)?;
        let (g, s) = both(gpu, |d| d.block_reverse_i32(ai.view()))?;
        identical(&format!("block_reverse_i32, n = {n}"), &g, &s)?;
    }
    Ok(())
}

fn random_matrix(rows: usize, cols: usize, rng: &mut Rng) -> Array2<f32> {
    Array2::from_shape_simple_fn((rows, cols), || rng.normal() as f32)
}

/// The shapes (m, k, n) of the matrix kernels: 1, odd, not a multiple of any
/// tile, tall, wide, and one at the tiles' size.
const SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (3, 5, 7),
    (33, 17, 65),
    (129, 257, 31),
    (257, 63, 129),
    (128, 128, 128),
];

fn matrix_kernels_agree(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(13);
    for &(m, k, n) in SHAPES {
        let a = random_matrix(m, k.max(n), &mut rng);
        let (g, s) = both(gpu, |d| d.doubles_matrix(a.view()))?;
        identical(&format!("doubles_matrix {m}×{}", k.max(n)), &g, &s)?;
    }
    for &n in LENGTHS {
        let x: Array1<f32> = (0..n).map(|_| rng.normal() as f32).collect();
        let y: Array1<f32> = (0..n).map(|_| rng.normal() as f32).collect();
        let (g, s) = both(gpu, |d| {
            let mut c = Array1::<f32>::zeros(n);
            d.elementwise_sum(x.view(), y.view(), c.view_mut())?;
            Ok(c)
        })?;
        identical(&format!("elementwise_sum f32, n = {n}"), &g, &s)?;
        let xi = x.mapv(|v| (v * 1e6) as i64);
        let (g, s) = both(gpu, |d| {
            let mut c = Array1::<i64>::zeros(n);
            d.elementwise_sum(xi.view(), xi.view(), c.view_mut())?;
            Ok(c)
        })?;
        identical(&format!("elementwise_sum i64, n = {n}"), &g, &s)?;
        let (g, s) = both(gpu, |d| {
            let mut out = y.clone();
            d.elementwise_saxpy(x.view(), out.view_mut(), 2.5f32)?;
            Ok(out)
        })?;
        identical(&format!("elementwise_saxpy f32, n = {n}"), &g, &s)?;
        let (a, b, t) = (
            x.mapv(f64::from),
            y.mapv(f64::from),
            Array1::from_iter((0..n).map(|_| rng.uniform())),
        );
        let (g, s) = both(gpu, |d| {
            let mut out = Array1::<f64>::zeros(n);
            d.elementwise_lerp(a.view(), b.view(), t.view(), out.view_mut())?;
            Ok(out)
        })?;
        identical(&format!("elementwise_lerp f64, n = {n}"), &g, &s)?;
    }
    for &n in &[1usize, 257, 10_001] {
        let a: Array1<f32> = (0..n).map(|_| rng.uniform() as f32).collect();
        let b: Array1<f32> = (0..n).map(|_| rng.uniform() as f32).collect();
        let (g, s) = both(gpu, |d| d.vector_sum_repeat(a.view(), b.view(), 1000))?;
        identical(&format!("vector_sum_repeat, n = {n}"), &g, &s)?;
    }
    for (sa, sb) in [
        (vec![10, 10], vec![10, 10]),
        (vec![3, 7, 5], vec![5, 9]),
        (vec![2, 1, 33, 17], vec![3, 17, 31]),
    ] {
        let a = ArrayD::from_shape_simple_fn(IxDyn(&sa), || rng.below(1000) as i64 - 500);
        let b = ArrayD::from_shape_simple_fn(IxDyn(&sb), || rng.below(1000) as i64 - 500);
        let (g, s) = both(gpu, |d| d.gufunc_matmul_i64(a.view(), b.view()))?;
        identical(&format!("gufunc_matmul_i64 {sa:?}·{sb:?}"), &g, &s)?;
    }
    Ok(())
}

/// The tiled SGEMM (every tile choice the shapes reach) and the naive
/// kernel: each within its bound of the exact product on both; prints how
/// many elements differ between the two.
fn sgemm_within_bounds_on_both(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(17);
    for &(m, k, n) in SHAPES.iter().chain(&[(256, 256, 256), (1000, 31, 999)]) {
        let a = random_matrix(m, k, &mut rng);
        let b = random_matrix(k, n, &mut rng);
        let reference = MatmulReference::new(a.view(), b.view()).map_err(fail)?;
        for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
            let what = format!("{kernel:?} {m}×{k}·{k}×{n}");
            let (g, s) = both(gpu, |d| match kernel {
                MatmulKernel::Naive => d.matrix_mul_naive(a.view(), b.view()),
                MatmulKernel::Tiled => d.matrix_mul_tiled(a.view(), b.view()),
            })?;
            for (backend, c) in [("GPU", &g), ("simulator", &s)] {
                let check = reference.check(c.view()).map_err(fail)?;
                if !check.passed() {
                    return Err(format!("{what} on the {backend}: {check:?}").into());
                }
            }
            let differ = g.iter().zip(&s).filter(|(x, y)| !x.same(**y)).count();
            eprintln!(
                "{what}: GPU and simulator differ in {differ} of {} elements",
                g.len()
            );
        }
    }
    Ok(())
}

fn reductions_agree(gpu: &Gpu) -> Result<(), Failed> {
    /// On both backends with the GPU's own launch shape (its real
    /// multiprocessor count and occupancy), which the simulator then keeps.
    fn op<Op: ReduceKernel<T>, T: Elem>(gpu: &Gpu, data: &Array1<T>) -> Result<(), Failed> {
        let host = data.as_slice().unwrap_or(&[]);
        let (grid, block) = gpu.reduce_launch_shape::<Op, T>(host.len()).map_err(fail)?;
        let (g, s) = both(gpu, |d| {
            let input = d.to_device(host)?;
            let mut scratch = d.reduce_scratch::<T>()?;
            d.reduce_on_device_shaped::<Op, T>(&input, None, &mut scratch, grid, block)?;
            scratch.result(d)
        })?;
        identical(
            &format!("{} over {} ({grid}×{block})", Op::ENTRY, data.len()),
            [&g],
            [&s],
        )
    }
    fn for_type<T: Elem>(gpu: &Gpu, seed: u64) -> Result<(), Failed>
    where
        Sum: ReduceKernel<T>,
        Product: ReduceKernel<T>,
        Min: ReduceKernel<T>,
        Max: ReduceKernel<T>,
    {
        for &n in LENGTHS.iter().chain(&[1_000_003]) {
            let mut d = Draw::seeded(seed ^ n as u64);
            // Sums of arbitrary floats: the rounding depends on the order,
            // which the simulator keeps.
            let sums = Array1::from(d.vec(&T::sum_value(false), n));
            let prods = Array1::from(T::product_values(&mut d, n));
            let any = Array1::from(d.vec(&T::any_value(), n));
            op::<Sum, T>(gpu, &sums)?;
            op::<Product, T>(gpu, &prods)?;
            op::<Min, T>(gpu, &any)?;
            op::<Max, T>(gpu, &any)?;
        }
        Ok(())
    }
    for_type::<i32>(gpu, 1)?;
    for_type::<i64>(gpu, 2)?;
    for_type::<f32>(gpu, 3)?;
    for_type::<f64>(gpu, 4)?;
    let mut d = Draw::seeded(5);
    for &n in LENGTHS {
        let xs = Array1::from(d.vec(&i64::any_value(), n));
        op::<Xor, i64>(gpu, &xs)?;
    }
    Ok(())
}

fn primitives_agree(gpu: &Gpu) -> Result<(), Failed> {
    for (blocks, tpb) in [(1u32, 32u32), (3, 128), (5, 1024)] {
        let (g, s) = both(gpu, |d| d.warp_primitives_test(blocks, tpb))?;
        equal(
            &format!("warp rows32 <<<{blocks}, {tpb}>>>"),
            &g.rows32,
            &s.rows32,
        )?;
        equal(
            &format!("warp rows64 <<<{blocks}, {tpb}>>>"),
            &g.rows64,
            &s.rows64,
        )?;
    }
    // Atomics: the tickets' order depends on the schedule; the totals do not.
    let n = 100_003;
    let (g, s) = both(gpu, |d| d.atomic_primitives_test(n))?;
    equal(
        "atomic counters",
        g.counters[..3].to_vec(),
        s.counters[..3].to_vec(),
    )?;
    equal("atomic signed", g.signed, s.signed)?;
    equal("atomic sum f32", g.sum_f32.to_bits(), s.sum_f32.to_bits())?;
    equal("atomic sum f64", g.sum_f64.to_bits(), s.sum_f64.to_bits())?;
    equal("atomic sum u64", g.sum_u64, s.sum_u64)?;
    let (mut gt, mut st) = (g.tickets, s.tickets);
    gt.sort_unstable();
    st.sort_unstable();
    equal("atomic tickets (sorted)", gt, st)?;
    let input: Vec<u32> = (0..4 * 70_001u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let (g, s) = both(gpu, |d| d.load_primitives_test(&input))?;
    equal("wide loads", g, s)?;
    for tpb in [32u32, 96, 480, 1024] {
        let input: Vec<i64> = (0..7 * tpb as i64)
            .map(|i| (i - 1000) * 1_000_003)
            .collect();
        let (g, s) = both(gpu, |d| d.block_reduce_test(&input, tpb))?;
        equal(&format!("block_reduce_test, block {tpb}"), g, s)?;
    }
    Ok(())
}

fn mandelbrot_agrees(gpu: &Gpu) -> Result<(), Failed> {
    for (low, high, n, iters, bound) in [
        (-2.0f32, 2.0f32, 1usize, 256i32, 2.0f32),
        (-2.0, 2.0, 33, 256, 2.0),
        (-2.0, 2.0, 181, 256, 2.0),
        (-2.0, 2.0, 512, 256, 2.0),
        (-1.5, 0.5, 257, 1000, 2.0),
        (-0.75, -0.74, 129, 5000, 2.0),
        (-2.0, 2.0, 1000, 64, 4.0),
    ] {
        let lattice = linspace_f32(low, high, n);
        let (g, s) = both(gpu, |d| d.mandelbrot(lattice.view(), iters, bound))?;
        identical(
            &format!("mandelbrot [{low}, {high}] n = {n}, {iters} iterations"),
            &g,
            &s,
        )?;
    }
    Ok(())
}

fn streams_and_life_agree(gpu: &Gpu) -> Result<(), Failed> {
    for n in [1usize, 4097, 65_537] {
        let data = Array1::from(randn_arrays(1, n, n as u64).remove(0));
        let (g, s) = both(gpu, |d| d.mult_ker(data.view(), SEED_GRID, SEED_BLOCK))?;
        identical(&format!("mult_ker, n = {n}"), &g, &s)?;
    }
    let mut rng = Rng::new(29);
    for n in [1usize, 2, 31, 33, 64, 129, 257] {
        let start = random_lattice(n, 0.3, &mut rng);
        for kernel in [LifeKernel::Fast, LifeKernel::Seed] {
            let (g, s) = both(gpu, |d| {
                let mut sims = LifeSims::with_kernel(d, std::slice::from_ref(&start), kernel)?;
                for _ in 0..20 {
                    sims.frame()?;
                }
                Ok(sims.lattice(0)?.to_owned())
            })?;
            identical(&format!("Life {kernel:?} N = {n}, 20 steps"), &g, &s)?;
        }
    }
    Ok(())
}

/// Every math function, f32 and f64, on the edge values and 10^5 random
/// arguments: within CUDA's bound on both; prints how many results differ.
fn math_within_bounds_on_both(gpu: &Gpu) -> Result<(), Failed> {
    fn for_type<T: MathFloat + Elem>(gpu: &Gpu) -> Result<(), Failed> {
        for info in MATH_FUNCTIONS {
            let (mut x, mut y) = math_arguments::<T>(info.function, 3);
            x.truncate(100_000);
            y.truncate(100_000);
            let (g, s) = both(gpu, |d| d.math_eval(info.function, &x, &y))?;
            for (backend, got) in [("GPU", &g), ("simulator", &s)] {
                let r = measure(info.function, &x, &y, got);
                if !r.within_bound() {
                    return Err(format!(
                        "{} {} on the {backend}: {} ulp > {}",
                        r.ty,
                        r.name(),
                        r.worst_ulp,
                        r.allowed_ulp
                    )
                    .into());
                }
            }
            let differ = g.iter().zip(&s).filter(|(a, b)| !a.same(**b)).count();
            eprintln!(
                "{:?} {}: GPU and simulator differ in {differ} of {} results",
                info.function,
                std::any::type_name::<T>(),
                g.len()
            );
        }
        Ok(())
    }
    for_type::<f32>(gpu)?;
    for_type::<f64>(gpu)
}
