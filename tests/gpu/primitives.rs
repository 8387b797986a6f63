//! The device layer's shared-memory atomics and warp primitives
//! (`syncwarp`, `activemask`, `match_any_sync`, `match_all_sync`), each
//! kernel of `kernels-gpu/src/device_checks.rs` launched through its handle
//! and checked against values computed here from the kernels' documented
//! formulas; a misaligned shared-memory atomic, a located fault; and the
//! float methods of `GpuFloat`, each the `math` function of its meaning.
use std::process::ExitCode;

use cuda_kernels::kernels::device_checks::{
    ATOMICS_BLOCK, ATOMICS_RESULTS, GPU_FLOAT_ROWS, GPU_FLOAT_TEST_F32, GPU_FLOAT_TEST_F64,
    MATCH_BLOCK, MATCH_ROWS, SHARED_ATOMIC_MISALIGNED, SHARED_ATOMICS_TEST, WARP_MATCH_TEST,
};
use cuda_kernels::{Error, Gpu, LaunchConfig};
use libtest_mimic::{Failed, Trial};

use crate::common::{ensure, fail};
use crate::support::rerun_self_printing;

const MISALIGNED_CHILD: &str = "CUDA_KERNELS_TEST_MISALIGNED_CHILD";

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        kernel!(shared_atomics_match_their_formulas),
        kernel!(misaligned_shared_atomic_is_a_located_fault),
        kernel!(warp_match_activemask_and_syncwarp),
        kernel!(gpu_float_methods_are_the_math_functions),
    ]
}

/// In a child process of `misaligned_shared_atomic_is_a_located_fault` (a
/// trap ruins the process's CUDA context): launch the misaligned atomic and
/// print the error.
pub fn child_process() -> Option<ExitCode> {
    std::env::var_os(MISALIGNED_CHILD)?;
    let Ok(gpu) = cuda_kernels::gpu() else {
        return Some(ExitCode::FAILURE);
    };
    let run = || -> cuda_kernels::Result<()> {
        let mut out = gpu.zeroed::<u32>(1)?;
        // SAFETY: `out` holds the one u32 the kernel may write.
        unsafe {
            gpu.launch(
                SHARED_ATOMIC_MISALIGNED,
                LaunchConfig::linear(1, 32),
                gpu.stream(),
                (&mut out,),
            )
        }?;
        gpu.synchronize(SHARED_ATOMIC_MISALIGNED.name())
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

fn shared_atomics_match_their_formulas(gpu: &Gpu) -> Result<(), Failed> {
    const T: usize = ATOMICS_BLOCK;
    let mut out = gpu.zeroed::<u64>(ATOMICS_RESULTS).map_err(fail)?;
    let mut per_thread = gpu.zeroed::<u32>(3 * T).map_err(fail)?;
    // SAFETY: the buffers have the lengths the kernel's contract asks; one
    // block of ATOMICS_BLOCK threads.
    unsafe {
        gpu.launch(
            SHARED_ATOMICS_TEST,
            LaunchConfig::linear(1, T as u32),
            gpu.stream(),
            (&mut out, &mut per_thread),
        )
    }
    .map_err(fail)?;
    gpu.synchronize(SHARED_ATOMICS_TEST.name()).map_err(fail)?;
    let got = out.to_vec().map_err(fail)?;
    let threads = per_thread.to_vec().map_err(fail)?;

    let ts = 0..T as u64;
    let spread = |t: u64| 1000 + (37 * t + 11) % 256;
    let (exchanged_last, cas_last) = (got[6], got[7]);
    let want = [
        T as u64,
        ts.clone().map(spread).min().unwrap_or(0),
        ts.clone().map(spread).max().unwrap_or(0),
        u64::from(!0xffff_u32),
        0xf_ffff,
        ts.clone()
            .fold(0u32, |x, t| x ^ (t as u32).wrapping_mul(t as u32))
            .into(),
        exchanged_last,
        cas_last,
        ts.clone().map(|t| t as i64 - 200).sum::<i64>() as u64,
        ts.clone().map(|t| 100 - t as i64).min().unwrap_or(0) as u64,
        ts.clone().map(|t| 3 * t as i64 - 400).max().unwrap_or(0) as u64,
        ts.clone().map(|t| t << 33).sum(),
        ts.clone().map(|t| (t ^ 0x55) << 40).min().unwrap_or(0),
        ts.clone().map(|t| (t ^ 0x55) << 40).max().unwrap_or(0),
        u64::MAX,
        ts.clone().map(|t| -(t as i64) << 35).sum::<i64>() as u64,
        ts.clone()
            .map(|t| -(t as i64) * 1_000_000_007)
            .min()
            .unwrap_or(0) as u64,
        ts.clone().map(|t| 3 * t as i64 - 1000).max().unwrap_or(0) as u64,
        u64::from((0.5 * T as f32).to_bits())
            | u64::from((ts.clone().sum::<u64>() as f32).to_bits()) << 32,
        (0.25 * T as f64).to_bits(),
    ];
    ensure(got == want, || {
        format!("final values\n got  {got:x?}\n want {want:x?}")
    })?;
    // Every ticket drawn once.
    let mut tickets = threads[..T].to_vec();
    tickets.sort_unstable();
    ensure(tickets.iter().copied().eq(0..T as u32), || {
        format!("tickets are not 0..{T}: {tickets:?}")
    })?;
    // The exchanges' previous values and the last value: 0 and every t + 1.
    let mut chain = threads[T..2 * T].to_vec();
    chain.push(exchanged_last as u32);
    chain.sort_unstable();
    ensure(chain.iter().copied().eq(0..=T as u32), || {
        format!("exchange chain is not 0..={T}: {chain:?}")
    })?;
    // One compare-exchange won (saw 0 and stored its t + 1); the others saw that.
    let cas = &threads[2 * T..];
    let winners: Vec<usize> = (0..T).filter(|&t| cas[t] == 0).collect();
    ensure(
        winners.len() == 1
            && cas_last == winners[0] as u64 + 1
            && cas.iter().all(|&v| v == 0 || u64::from(v) == cas_last),
        || format!("compare-exchange: winners {winners:?}, last {cas_last}, seen {cas:?}"),
    )
}

fn misaligned_shared_atomic_is_a_located_fault(gpu: &Gpu) -> Result<(), Failed> {
    rerun_self_printing(
        gpu,
        MISALIGNED_CHILD,
        &[
            "shared_atomic_misaligned: the kernel failed at",
            "device_checks.rs:",
            "misaligned shared-memory atomic",
        ],
    )
}

/// `warp_match_test`'s words: one block of `MATCH_BLOCK` threads.
pub fn warp_match_words(gpu: &Gpu) -> cuda_kernels::Result<Vec<u32>> {
    let mut out = gpu.zeroed::<u32>(MATCH_ROWS * MATCH_BLOCK)?;
    // SAFETY: `out` holds MATCH_ROWS · MATCH_BLOCK u32; one block of MATCH_BLOCK threads.
    unsafe {
        gpu.launch(
            WARP_MATCH_TEST,
            LaunchConfig::linear(1, MATCH_BLOCK as u32),
            gpu.stream(),
            (&mut out,),
        )
    }?;
    gpu.synchronize(WARP_MATCH_TEST.name())?;
    out.to_vec()
}

fn warp_match_activemask_and_syncwarp(gpu: &Gpu) -> Result<(), Failed> {
    let got = warp_match_words(gpu).map_err(fail)?;
    let lanes_where =
        |f: &dyn Fn(u32) -> bool| (0..32).filter(|&k| f(k)).fold(0u32, |m, k| m | 1 << k);
    for t in 0..MATCH_BLOCK {
        let l = t as u32 % 32;
        let want = [
            u32::MAX,
            0xf << (l / 4 * 4),
            u32::MAX,
            0,
            lanes_where(&|k| k % 3 == l % 3),
            u32::MAX,
            if l < 10 { 0x3ff } else { 0 },
            5 * (t as u32 ^ 1),
        ];
        let row: Vec<u32> = (0..MATCH_ROWS).map(|r| got[r * MATCH_BLOCK + t]).collect();
        ensure(row == want, || {
            format!("thread {t}: got {row:x?}, want {want:x?}")
        })?;
    }
    Ok(())
}

// SAFETY (for both): glibc's libm functions, pure functions of their argument.
unsafe extern "C" {
    safe fn erf(x: f64) -> f64;
    safe fn erfc(x: f64) -> f64;
}

/// `gpu_float_test_*`'s row `r` computed in f64 from its formula, for
/// arguments `(x, y, z)`.
fn gpu_float_reference(r: usize, x: f64, y: f64, z: f64) -> f64 {
    let rows = [
        x.sqrt(),
        1.0 / x.sqrt(),
        x.cbrt(),
        x.exp(),
        x.exp2(),
        x.exp_m1(),
        x.ln(),
        x.log2(),
        x.log10(),
        x.ln_1p(),
        x.sin(),
        x.cos(),
        x.tan(),
        x.asin(),
        x.acos(),
        x.atan(),
        x.atan2(y),
        x.sinh(),
        x.cosh(),
        x.tanh(),
        erf(x),
        erfc(x),
        x.floor(),
        x.ceil(),
        x.round(),
        x.trunc(),
        x.powf(y),
        x.hypot(y),
        x.sin(),
        x.cos(),
        x.mul_add(y, z),
    ];
    rows[r]
}

/// The arguments of the `GpuFloat` test: edges (signed zeros, ±1, halves
/// for the roundings, a subnormal f32, ±∞, NaN, a huge sine argument) and
/// seeded ones in (−20, 20).
fn gpu_float_arguments() -> Vec<f64> {
    let edges = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.5,
        -2.5,
        4.0,
        0.1,
        10.0,
        -10.0,
        100.0,
        -100.0,
        1e-3,
        3.0,
        1e30,
        -7.25,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-40,
        0.75,
        std::f64::consts::FRAC_PI_2,
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let seeded = (0..40).map(move |_| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        ((state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 40.0
    });
    edges.into_iter().chain(seeded).collect()
}

/// Whether `got` is `want` (NaN for NaN, ∞ for ∞) within `rel` of it, or
/// `abs` (for results near the subnormals).
fn near(got: f64, want: f64, rel: f64, abs: f64) -> bool {
    if want.is_nan() || want.is_infinite() {
        got.is_nan() == want.is_nan() && (want.is_nan() || got == want)
    } else {
        (got - want).abs() <= rel * want.abs() + abs
    }
}

/// Checks one type's results: each method's bits equal its function's, and
/// both near the f64 formula (`round` rounds the formula's value to the
/// type).
fn check_gpu_float(
    ty: &str,
    xs: &[f64],
    got: &[f64],
    bits: impl Fn(f64) -> u64,
    round: impl Fn(f64) -> f64,
    (rel, abs): (f64, f64),
) -> Result<(), Failed> {
    let n = xs.len();
    for i in 0..n {
        let (x, y, z) = (xs[i], xs[(i + 1) % n], xs[(i + 2) % n]);
        for r in 0..GPU_FLOAT_ROWS {
            let k = 2 * (i * GPU_FLOAT_ROWS + r);
            let (by_method, by_function) = (got[k], got[k + 1]);
            let want = round(gpu_float_reference(r, x, y, z));
            ensure(bits(by_method) == bits(by_function), || {
                format!(
                    "{ty} row {r} of ({x}, {y}, {z}): the method gave {by_method:e}, the \
                     function {by_function:e}"
                )
            })?;
            ensure(near(by_method, want, rel, abs), || {
                format!("{ty} row {r} of ({x}, {y}, {z}): {by_method:e}, the formula {want:e}")
            })?;
        }
    }
    Ok(())
}

fn gpu_float_methods_are_the_math_functions(gpu: &Gpu) -> Result<(), Failed> {
    let xs = gpu_float_arguments();
    let n = xs.len();
    let config = LaunchConfig::linear(n.div_ceil(32) as u32, 32);

    let x32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
    let dx = gpu.to_device(&x32).map_err(fail)?;
    let mut out = gpu.zeroed::<f32>(2 * n * GPU_FLOAT_ROWS).map_err(fail)?;
    // SAFETY: `dx` holds n f32, `out` 2 · n · GPU_FLOAT_ROWS.
    unsafe { gpu.launch(GPU_FLOAT_TEST_F32, config, gpu.stream(), (&dx, n, &mut out)) }
        .map_err(fail)?;
    gpu.synchronize(GPU_FLOAT_TEST_F32.name()).map_err(fail)?;
    let got: Vec<f64> = out
        .to_vec()
        .map_err(fail)?
        .into_iter()
        .map(f64::from)
        .collect();
    let xs32: Vec<f64> = x32.iter().copied().map(f64::from).collect();
    check_gpu_float(
        "f32",
        &xs32,
        &got,
        |v| u64::from((v as f32).to_bits()),
        |v| f64::from(v as f32),
        (1e-5, 1e-38),
    )?;

    let dx = gpu.to_device(&xs).map_err(fail)?;
    let mut out = gpu.zeroed::<f64>(2 * n * GPU_FLOAT_ROWS).map_err(fail)?;
    // SAFETY: `dx` holds n f64, `out` 2 · n · GPU_FLOAT_ROWS.
    unsafe { gpu.launch(GPU_FLOAT_TEST_F64, config, gpu.stream(), (&dx, n, &mut out)) }
        .map_err(fail)?;
    gpu.synchronize(GPU_FLOAT_TEST_F64.name()).map_err(fail)?;
    let got = out.to_vec().map_err(fail)?;
    check_gpu_float("f64", &xs, &got, f64::to_bits, |v| v, (1e-12, 1e-300))
}
