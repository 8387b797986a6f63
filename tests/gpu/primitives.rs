//! The device layer's shared-memory atomics and warp primitives
//! (`syncwarp`, `activemask`, `match_any_sync`, `match_all_sync`), each
//! kernel of `kernels-gpu/src/device_checks.rs` launched through its handle
//! and checked against values computed here from the kernels' documented
//! formulas; and a misaligned shared-memory atomic, a located fault.
use std::process::ExitCode;

use cuda_kernels::kernels::device_checks::{
    ATOMICS_BLOCK, ATOMICS_RESULTS, MATCH_BLOCK, MATCH_ROWS, SHARED_ATOMIC_MISALIGNED,
    SHARED_ATOMICS_TEST, WARP_MATCH_TEST,
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
