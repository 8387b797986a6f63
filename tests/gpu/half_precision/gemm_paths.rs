//! Which GEMM path each (layout, input, output) takes, written out by hand
//! per device: the test runs each case through `gemm_on_device` and
//! compares the path it reports with this table. The expectation is the
//! table, never `gemm_path` itself: a missing sm_90a cubin, a regressed
//! `wgmma_fits` or a dispatcher that stopped choosing wgmma fails here
//! (issue 40, item 7), where every value test would still pass on
//! mma.sync.
use cuda_kernels::Gpu;
use cuda_kernels::matrices::{GEMM_PATH_ENV, GemmInput, GemmOutput, GemmPath, GemmShape, Op};
use cuda_kernels::prelude::*;
use half::{bf16, f16};
use libtest_mimic::Failed;

use crate::common::fail;

use GemmPath::{CudaCore as Cc, MmaSync as Mma, Wgmma as Wg};

/// The devices the table has a column for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Device {
    /// The simulator (it models neither wgmma nor TMA).
    Simulator,
    /// sm_70 to sm_75 (the CUDA cores).
    Sm70,
    /// sm_80 to sm_89 (mma.sync, no wgmma).
    Sm80,
    /// sm_90 (Hopper, the sm_90a cubin).
    Sm90,
}

/// A case: the layout (`"NN"`, …), input type, output type, whether the
/// operands are 16-byte aligned, and the path on the simulator, on sm_70
/// to sm_75 (no mma.sync kernels: the CUDA cores), on sm_80 to sm_89, on
/// sm_90.
type Row = (
    &'static str,
    &'static str,
    &'static str,
    bool,
    [GemmPath; 4],
);

/// The table, at 128 × 256 × 64 with tight leading dimensions; unaligned:
/// A read from one element past a 16-byte boundary, staged into aligned
/// rows for the tensor-core paths (tf32 in a layout other than NT staged
/// transposed for wgmma).
#[rustfmt::skip]
const TABLE: &[Row] = &[
    // layout, input, output, aligned, [simulator, sm_70, sm_80, sm_90]
    ("NN", "bf16", "f32",  true, [Mma, Cc, Mma, Wg]),
    ("NT", "bf16", "f32",  true, [Mma, Cc, Mma, Wg]),
    ("TN", "bf16", "f32",  true, [Mma, Cc, Mma, Wg]),
    ("TT", "bf16", "f32",  true, [Mma, Cc, Mma, Wg]),
    ("NN", "bf16", "bf16", true, [Mma, Cc, Mma, Wg]),
    ("NT", "bf16", "bf16", true, [Mma, Cc, Mma, Wg]),
    ("TN", "bf16", "bf16", true, [Mma, Cc, Mma, Wg]),
    ("TT", "bf16", "bf16", true, [Mma, Cc, Mma, Wg]),
    ("NN", "f16",  "f32",  true, [Mma, Cc, Mma, Wg]),
    ("NT", "f16",  "f32",  true, [Mma, Cc, Mma, Wg]),
    ("TN", "f16",  "f32",  true, [Mma, Cc, Mma, Wg]),
    ("TT", "f16",  "f32",  true, [Mma, Cc, Mma, Wg]),
    ("NN", "f16",  "f16",  true, [Mma, Cc, Mma, Wg]),
    ("NT", "f16",  "f16",  true, [Mma, Cc, Mma, Wg]),
    ("TN", "f16",  "f16",  true, [Mma, Cc, Mma, Wg]),
    ("TT", "f16",  "f16",  true, [Mma, Cc, Mma, Wg]),
    ("NN", "tf32", "f32",  true, [Mma, Cc, Mma, Wg]),
    ("NT", "tf32", "f32",  true, [Mma, Cc, Mma, Wg]),
    ("TN", "tf32", "f32",  true, [Mma, Cc, Mma, Wg]),
    ("TT", "tf32", "f32",  true, [Mma, Cc, Mma, Wg]),
    ("NN", "bf16", "f32",  false, [Mma, Cc, Mma, Wg]),
    ("NT", "bf16", "bf16", false, [Mma, Cc, Mma, Wg]),
    ("TN", "f16",  "f32",  false, [Mma, Cc, Mma, Wg]),
    ("TT", "f16",  "f16",  false, [Mma, Cc, Mma, Wg]),
    ("NT", "tf32", "f32",  false, [Mma, Cc, Mma, Wg]),
    ("NN", "tf32", "f32",  false, [Mma, Cc, Mma, Wg]),
];

/// The path one case takes on `gpu`.
fn path<I: GemmInput, O: GemmOutput<I>>(
    gpu: &Gpu,
    layout: &str,
    aligned: bool,
) -> Result<GemmPath, Failed> {
    let op = |c: u8| if c == b'N' { Op::N } else { Op::T };
    let l = layout.as_bytes();
    let (m, n, k) = (128, 256, 64);
    let shape = GemmShape::with_ops(m, n, k, op(l[0]), op(l[1]));
    let a = gpu.zeroed::<I::Dev>(m * k + 1).map_err(fail)?;
    let b = gpu.zeroed::<I::Dev>(k * n).map_err(fail)?;
    let mut c = gpu.zeroed::<O::Dev>(m * n).map_err(fail)?;
    let from = usize::from(!aligned);
    let a = a.index(from..from + m * k);
    let taken = gpu
        .gemm_on_device::<I, O>(&shape, 1.0, &a, &b, 0.0, &mut c)
        .map_err(fail)?;
    gpu.synchronize("gemm").map_err(fail)?;
    Ok(taken)
}

pub(super) fn gemm_takes_the_tabled_path(gpu: &Gpu) -> Result<(), Failed> {
    if let Ok(forced) = std::env::var(GEMM_PATH_ENV) {
        eprintln!("{GEMM_PATH_ENV}={forced} forces the path: the table does not apply");
        return Ok(());
    }
    let device = if gpu.is_simulated() {
        Device::Simulator
    } else {
        match gpu.device_info().map_err(fail)?.compute_capability {
            (9, 0) => Device::Sm90,
            (7, _) => Device::Sm70,
            (8, _) => Device::Sm80,
            other => {
                return Err(
                    format!("no column of the table for compute capability {other:?}").into(),
                );
            }
        }
    };
    let column = match device {
        Device::Simulator => 0,
        Device::Sm70 => 1,
        Device::Sm80 => 2,
        Device::Sm90 => 3,
    };
    let mut wrong = Vec::new();
    for &(layout, input, output, aligned, paths) in TABLE {
        let taken = match (input, output) {
            ("bf16", "f32") => path::<bf16, f32>(gpu, layout, aligned),
            ("bf16", "bf16") => path::<bf16, bf16>(gpu, layout, aligned),
            ("f16", "f32") => path::<f16, f32>(gpu, layout, aligned),
            ("f16", "f16") => path::<f16, f16>(gpu, layout, aligned),
            ("tf32", "f32") => path::<f32, f32>(gpu, layout, aligned),
            other => return Err(format!("no GEMM for {other:?}").into()),
        }?;
        let want = paths[column];
        if taken != want {
            wrong.push(format!(
                "{layout} {input} → {output}{}: took {}, the table says {} on {device:?}",
                if aligned { "" } else { " (unaligned)" },
                taken.name(),
                want.name()
            ));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} cases:\n  {}",
            wrong.len(),
            TABLE.len(),
            wrong.join("\n  ")
        )
        .into())
    }
}
