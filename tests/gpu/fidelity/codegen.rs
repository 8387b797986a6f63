//! Cases with their own checks about the code the compilers make: NaN bits of
//! plain arithmetic, ptxas's narrowing store, the register file as a launch
//! limit.
use super::*;

/// NaN results of plain arithmetic (`a - b`, `-x`, `x.abs()` in kernel
/// code): the GPU's bits exactly; on the simulator, which runs that code as
/// the host's own arithmetic, the same words where they are not NaN and a
/// NaN where the GPU gives one (a known difference, `docs/simulator.md`).
pub(super) fn nan_bits_of_plain_arithmetic(gpu: &Gpu) -> Result<(), Failed> {
    let got = gpu
        .fidelity_case(case_of(k::FID_NAN_ARITHMETIC, None))
        .map_err(fail)?;
    let want = nan_arithmetic();
    if !simulated(gpu) {
        return same_words("fid_nan_arithmetic", &got, &want);
    }
    // The f32 results: a NaN; the f64 ones (9–12) and a moved NaN (8):
    // exactly, as the host's f64 NaNs follow the GPU's rules.
    let f32_slots = [0, 1, 2, 3, 4, 5, 6, 7, 13, 14, 15, 16];
    let mut bad = Vec::new();
    for i in f32_slots {
        if !f32::from_bits(got[i]).is_nan() {
            bad.push(format!("[{i}] {:#x} is not a NaN", got[i]));
        }
    }
    for i in 8..13 {
        if got[i] != want[i] {
            bad.push(format!("[{i}] {:#x}, want {:#x}", got[i], want[i]));
        }
    }
    ensure(bad.is_empty(), || bad.join(", "))
}

/// The miscompilation of `docs/known-issues.md`, reproduced: the PTX of
/// `fid_f64_low_word` with its narrowing written as LLVM has emitted it
/// elsewhere, `st.global.b32 [addr], %rd` of the 64-bit register that
/// `cvt.f64.f32` wrote. ptxas (12.9, 13.0) and the driver's JIT compile the
/// store as `F2I.U32.F64.TRUNC` (seen on an H100, driver 580.159.04): the
/// lanes get `trunc(lane + 0.3)` instead of the low word. Known wrong until
/// fixed upstream (the test says so when a toolchain gets it right).
pub(super) fn ptxas_miscompiles_a_narrowing_store(_: &Gpu) -> Result<(), Failed> {
    let module = Gpu::from_ptx(F64_LOW_WORD_ST64_PTX).map_err(fail)?;
    let got = module
        .fidelity_case(case_of(k::FID_F64_LOW_WORD, None))
        .map_err(fail)?;
    let right: Vec<u32> = (0..32).map(|l| lane_f64_bits(l) as u32).collect();
    if got == right {
        eprintln!("the narrowing store is now compiled right: update docs/known-issues.md");
        return Ok(());
    }
    let known_wrong: Vec<u32> = (0..32).collect();
    same_words("the narrowing store (known wrong)", &got, &known_wrong)
}

/// The same PTX through the builder's rewrite
/// (`cuda_kernels_builder::ptx::mend_narrowing_stores`, which every kernel
/// build runs): the store reads an explicit `cvt.u32.u64` of the register,
/// and the GPU gives the low words.
pub(super) fn the_builders_rewrite_mends_the_narrowing_store(_: &Gpu) -> Result<(), Failed> {
    let mended = cuda_kernels_builder::ptx::mend_narrowing_stores(F64_LOW_WORD_ST64_PTX);
    ensure(mended.functions == [k::FID_F64_LOW_WORD.name()], || {
        format!("rewritten: {:?}", mended.functions)
    })?;
    ensure(mended.text.contains("cvt.u32.u64"), || mended.text.clone())?;
    let module = Gpu::from_ptx(&mended.text).map_err(fail)?;
    let got = module
        .fidelity_case(case_of(k::FID_F64_LOW_WORD, None))
        .map_err(fail)?;
    same_words("the narrowing store, rewritten", &got, &f64_low_word())
}

/// How long `fid_barrier_after_partial_stores` may take before the test
/// calls it hung (it takes microseconds; the child's start and the
/// context's creation, a second or two).
const HANG_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// Issue 40's kernel whose duplicated aligned barrier hung an H200, run in
/// a child process with a watchdog (a hang kills the child and fails the
/// test instead of blocking the run): it finishes with the words of its
/// formula on both backends.
pub(super) fn barrier_after_partial_stores_finishes(gpu: &Gpu) -> Result<(), Failed> {
    use std::io::Read;
    let name = k::FID_BARRIER_AFTER_PARTIAL_STORES.name();
    let exe = std::env::current_exe().map_err(fail)?;
    let mut cmd = std::process::Command::new(exe);
    cmd.env(FAULT_CHILD, name)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    if simulated(gpu) {
        cmd.env(crate::common::SIM, "1");
    } else {
        cmd.env_remove(crate::common::SIM);
    }
    let mut child = cmd.spawn().map_err(fail)?;
    let start = std::time::Instant::now();
    loop {
        if child.try_wait().map_err(fail)?.is_some() {
            break;
        }
        if start.elapsed() > HANG_AFTER {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{name} hung: killed after {} s", HANG_AFTER.as_secs()).into());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut stdout).map_err(fail)?;
    }
    let got = ran_words(&stdout).ok_or_else(|| format!("{name}: no result: {stdout}"))?;
    same_words(name, &got, &barrier_after_partial_stores())
}

/// The words of a child's `RAN: [1a, 2b, …]` line (`{:x?}` of a `Vec<u32>`).
fn ran_words(stdout: &str) -> Option<Vec<u32>> {
    let list = stdout.lines().find_map(|l| l.strip_prefix("RAN: "))?;
    let inner = list.trim().strip_prefix('[')?.strip_suffix(']')?;
    inner
        .split(',')
        .map(|w| u32::from_str_radix(w.trim(), 16).ok())
        .collect()
}

/// The reproduction's PTX (`docs/known-issues.md`): hand-written from
/// `fid_f64_low_word`'s, its first line the image mark of that kernel's crate
/// (`cuda_kernels_gpu`), so that the kernel's handle launches on it.
const F64_LOW_WORD_ST64_PTX: &str = include_str!("../support/f64_low_word_st64.ptx");

/// 96 live values per thread: with 1024 threads the block needs more
/// registers than a multiprocessor's 65,536, which the launch refuses
/// (`CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES`) on both backends; with 64 threads
/// it runs.
pub(super) fn register_file_is_a_launch_limit(gpu: &Gpu) -> Result<(), Failed> {
    let r = gpu.fidelity_case(case_of(k::FID_REGISTER_HUNGRY, Some(1024)));
    ensure(
        matches!(&r, Err(e) if format!("{e:?}").contains("OutOfResources")),
        || format!("1024 threads: expected LaunchOutOfResources, got {r:?}"),
    )?;
    let got = gpu
        .fidelity_case(case_of(k::FID_REGISTER_HUNGRY, Some(64)))
        .map_err(fail)?;
    let mut want: Vec<u32> = (0..64).map(register_hungry_sum).collect();
    want.resize(1024, 0);
    same_words("fid_register_hungry, 64 threads", &got, &want)
}

/// Thread `t`'s word of `fid_register_hungry`: `x[k] = t · (k + 1)` rotated
/// left by `k`, `k < 96`; four rounds of `x[k] = x[k] · (x[k + 1] | 1) ^
/// x[k + 2]` for `k < 94` in order, then `x[94] ·= x[95] | 1`, `x[95] +=
/// x[94]`; then `s = rotl(s, 1) ^ x[k]` over all.
fn register_hungry_sum(t: u32) -> u32 {
    let mut x: Vec<u32> = (0..96u32)
        .map(|k| t.wrapping_mul(k + 1).rotate_left(k))
        .collect();
    for _ in 0..4 {
        for k in 0..94 {
            x[k] = x[k].wrapping_mul(x[k + 1] | 1) ^ x[k + 2];
        }
        x[94] = x[94].wrapping_mul(x[95] | 1);
        x[95] = x[95].wrapping_add(x[94]);
    }
    x.iter().fold(0, |s, &v| s.rotate_left(1) ^ v)
}
