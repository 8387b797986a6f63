//! Running a case: its kernel on `gpu`, its words compared with the expected
//! ones, and the cases undefined on the hardware.
use super::*;

/// The table's case of `kernel` (with `block` threads in x, when given).
pub(super) fn case_of(kernel: CaseKernel, block: Option<u32>) -> &'static FidelityCase {
    FIDELITY_CASES
        .iter()
        .find(|c| c.kernel.name() == kernel.name() && block.is_none_or(|b| c.block[0] == b))
        .expect("a fidelity case of the table")
}

/// `Err` listing every word of `got` that differs from `want`, in hex.
pub(super) fn same_words(what: &str, got: &[u32], want: &[u32]) -> Result<(), Failed> {
    if got == want {
        return Ok(());
    }
    let diffs: Vec<String> = got
        .iter()
        .zip(want)
        .enumerate()
        .filter(|(_, (g, w))| g != w)
        .map(|(i, (g, w))| format!("[{i}] {g:#010x} want {w:#010x}"))
        .collect();
    Err(format!(
        "{what}: {} of {} words differ: {}\n  got: {got:#x?}",
        diffs.len(),
        want.len(),
        diffs.join(", ")
    )
    .into())
}

pub(super) fn check_case(gpu: &Gpu, kernel: CaseKernel, want: &[u32]) -> Result<(), Failed> {
    let got = gpu.fidelity_case(case_of(kernel, None)).map_err(fail)?;
    same_words(kernel.name(), &got, want)
}

pub(super) fn undefined_case(
    gpu: &Gpu,
    kernel: CaseKernel,
    what: &str,
    on_gpu: bool,
) -> Result<(), Failed> {
    if !simulated(gpu) && !on_gpu {
        eprintln!("{}: {what}: not launched on the GPU", kernel.name());
        return Ok(());
    }
    let r = gpu.fidelity_case(case_of(kernel, None));
    if simulated(gpu) {
        match r {
            Err(e) => {
                eprintln!("{}: {what}: {e}", kernel.name());
                Ok(())
            }
            Ok(w) => Err(format!(
                "{}: {what}, but the simulator ran it: {w:x?}",
                kernel.name()
            )
            .into()),
        }
    } else {
        r.map(|w| eprintln!("{}: {what}: the GPU gave {:x?}", kernel.name(), &w[..8]))
            .map_err(fail)
    }
}
