//! Device faults, run in a child process: a misaligned vector access,
//! runaway recursion.
use super::*;

/// Runs fault case `kernel` in a child process: its `FAULT:` line.
fn fault_in_child(gpu: &Gpu, kernel: CaseKernel) -> Result<String, Failed> {
    let out = child(gpu, FAULT_CHILD, kernel.name())?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    stdout
        .lines()
        .find(|l| l.starts_with("FAULT: ") || (!simulated(gpu) && l.starts_with("RAN: ")))
        .map(str::to_string)
        .ok_or_else(|| format!("{}: no fault: {stdout}", kernel.name()).into())
}

/// `ld.shared.v4` 4 bytes past 16-byte alignment, undefined in the PTX ISA
/// (accesses must be naturally aligned): the simulator reports a located
/// fault; an H100 ran this one (reading the 16 bytes at the address), so on
/// the GPU it only has to end.
pub(super) fn misaligned_vector_access_faults(gpu: &Gpu) -> Result<(), Failed> {
    let line = fault_in_child(gpu, k::FID_MISALIGNED_SHARED_V4)?;
    eprintln!("{line}");
    if simulated(gpu) {
        ensure(
            line.contains("fidelity.rs:") && line.contains("misaligned"),
            || format!("expected a located misaligned-address fault: {line}"),
        )
    } else {
        Ok(())
    }
}

/// `ldmatrix` whose row addresses are 8 bytes past 16-byte alignment: a
/// fault on both (the GPU's `MisalignedAddress`; the simulator's located
/// "misaligned address", naming the kernel's line).
pub(super) fn misaligned_ldmatrix_faults(gpu: &Gpu) -> Result<(), Failed> {
    let line = fault_in_child(gpu, k::FID_MISALIGNED_LDMATRIX)?;
    eprintln!("{line}");
    ensure(line.starts_with("FAULT: "), || {
        format!("expected a fault: {line}")
    })?;
    if simulated(gpu) {
        ensure(
            line.contains("fidelity.rs:") && line.contains("misaligned"),
            || format!("expected a located misaligned-address fault: {line}"),
        )
    } else {
        Ok(())
    }
}

/// Runaway recursion is a fault on both: 100,000 levels of a 256-byte
/// frame overflow the GPU's stack (`cudaLimitStackSize`) and the
/// simulator's 1 MiB thread stack. 200 levels overflow only the GPU's
/// default 1 KiB (a known difference, `docs/simulator.md`): the simulator
/// runs them.
pub(super) fn runaway_recursion_faults(gpu: &Gpu) -> Result<(), Failed> {
    let line = fault_in_child(gpu, k::FID_DEEP_RECURSION)?;
    eprintln!("{line}");
    if simulated(gpu) {
        ensure(line.contains("stack overflow"), || line.clone())?;
        gpu.fidelity_case(case_of(k::FID_RUNAWAY_RECURSION, None))
            .map(drop)
            .map_err(fail)
    } else {
        let shallow = fault_in_child(gpu, k::FID_RUNAWAY_RECURSION)?;
        eprintln!("{shallow}");
        Ok(())
    }
}
