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
