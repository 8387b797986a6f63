//! The device math functions: their PTX is self-contained, the simulator's
//! table, and the GPU within CUDA's error bounds.
use super::*;

/// libdevice is linked in and inlined: the PTX calls no `__nv_*` function,
/// keeps no `__nvvm_reflect` query, and declares no external function but
/// `vprintf` (so the driver has nothing to resolve).
pub(super) fn math_ptx_is_self_contained() -> Result<(), Failed> {
    let ptx = cuda_kernels::PTX;
    let externs: Vec<&str> = ptx
        .lines()
        .filter(|l| l.contains(".extern .func") && !l.contains("vprintf"))
        .collect();
    ensure(externs.is_empty(), || {
        format!("external functions: {externs:?}")
    })?;
    ensure(!ptx.contains("__nvvm_reflect"), || {
        "an unresolved __nvvm_reflect".into()
    })?;
    let calls: Vec<&str> = ptx
        .lines()
        .filter(|l| l.trim_start().starts_with("call") && l.contains("__nv_"))
        .collect();
    ensure(calls.is_empty(), || {
        format!("calls into libdevice: {calls:?}")
    })
}

/// The rows of `Gpu::math_accuracy_table` on the simulator: the edge
/// values and the first of the random arguments, 2^15 in all per function
/// and type.
fn simulated_math_table(gpu: &Gpu) -> Result<Vec<cuda_kernels::math_checks::MathAccuracy>, Failed> {
    use cuda_kernels::math_checks::{MATH_FUNCTIONS, MathFloat, math_arguments, measure};
    fn rows<T: MathFloat>(
        gpu: &Gpu,
        out: &mut Vec<cuda_kernels::math_checks::MathAccuracy>,
    ) -> Result<(), Failed> {
        for info in MATH_FUNCTIONS {
            let (mut x, mut y) = math_arguments::<T>(info.function, 1);
            x.truncate(1 << 15);
            y.truncate(1 << 15);
            let got = gpu.math_eval(info.function, &x, &y).map_err(fail)?;
            out.push(measure(info.function, &x, &y, &got));
        }
        Ok(())
    }
    let mut out = Vec::new();
    rows::<f32>(gpu, &mut out)?;
    rows::<f64>(gpu, &mut out)?;
    Ok(out)
}

/// Every `device::math` function, f32 and f64, over 2^20 arguments (2^15 on
/// the simulator) and the edge values, within the ulp bound CUDA documents (see
/// `cuda_kernels::math_checks`). Prints the measured table (and writes it
/// to `$CUDA_KERNELS_MATH_TABLE` when set). Under compute-sanitizer: every
/// function on the edge values only.
pub(super) fn device_math_within_cuda_bounds(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::math_checks::{MATH_FUNCTIONS, MathFloat, accuracy_markdown};
    if crate::common::under_sanitizer() {
        for info in MATH_FUNCTIONS {
            let x = f64::edges();
            gpu.math_eval(info.function, &x, &x).map_err(fail)?;
            let x = f32::edges();
            gpu.math_eval(info.function, &x, &x).map_err(fail)?;
        }
        return Ok(());
    }
    let rows = if crate::common::simulated(gpu) {
        simulated_math_table(gpu)?
    } else {
        gpu.math_accuracy_table().map_err(fail)?
    };
    let table = accuracy_markdown(&rows);
    eprintln!("{table}");
    for r in &rows {
        if let Some([x, y, got, want]) = r.worst_case {
            eprintln!(
                "worst {} {} {} ulp (allowed {}): x={x:e} ({:#018x}) y={y:e} ({:#018x}) gpu={got:e} ({:#018x}) reference={want:e} ({:#018x})",
                r.ty,
                r.name(),
                r.worst_ulp,
                r.allowed_ulp,
                x.to_bits(),
                y.to_bits(),
                got.to_bits(),
                want.to_bits()
            );
        }
    }
    if let Some(path) = std::env::var_os("CUDA_KERNELS_MATH_TABLE") {
        std::fs::write(path, &table).map_err(fail)?;
    }
    let over: Vec<String> = rows
        .iter()
        .filter(|r| !r.within_bound())
        .map(|r| {
            format!(
                "{} {}: {} ulp > {}",
                r.ty,
                r.name(),
                r.worst_ulp,
                r.allowed_ulp
            )
        })
        .collect();
    ensure(over.is_empty(), || format!("over CUDA's bound: {over:?}"))
}
