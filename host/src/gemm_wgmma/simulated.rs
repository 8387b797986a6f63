//! The wgmma GEMM on the simulator: its tensor maps in the simulator's
//! format (the same `cuTensorMapEncodeTiled` arguments, checked as the
//! driver checks them, kept readable: `device::sim::encode_tiled`), in a
//! buffer of the launch's own, and the launch through [`Gpu::launch`]
//! (which runs the kernel's own code on the simulator).
use std::ffi::{c_int, c_void};

use cuda_kernels_gpu::device::kernel::Kernel;
use cuda_kernels_gpu::device::sim::{TiledMap, encode_tiled as sim_encode};
use cuda_kernels_gpu::gemm_wgmma::{MAPS_PER_SLOT, SHARED_BYTES};
use cust::sys as cu;

use super::{EncodeTiled, TensorMap, WgmmaParams};
use crate::KernelArgs;
use crate::error::Result;
use crate::gpu::Gpu;
use crate::launch::LaunchConfig;

/// [`EncodeTiled`] for the simulator: the driver's signature and argument
/// checks, the simulator's map.
pub(super) const ENCODE_TILED: EncodeTiled = encode_tiled;

/// `cuTensorMapEncodeTiled` on the simulator: writes `map` in the
/// simulator's format; `CUDA_ERROR_INVALID_VALUE` for the arguments the
/// driver refuses.
///
/// # Safety
/// As the driver's: `map` is writable, each array holds `rank` values
/// (`strides` `rank - 1`).
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn encode_tiled(
    map: *mut TensorMap,
    data_type: c_int,
    rank: u32,
    address: *mut c_void,
    dims: *const u64,
    strides: *const u64,
    boxes: *const u32,
    element_strides: *const u32,
    interleave: c_int,
    swizzle: c_int,
    l2_promotion: c_int,
    oob_fill: c_int,
) -> cu::CUresult {
    if !(1..=5).contains(&rank) {
        return cu::CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    let r = rank as usize;
    let mut m = TiledMap {
        data_type: data_type as u32,
        rank,
        global_address: address as u64,
        dims: [0; 5],
        strides: [0; 4],
        box_dims: [0; 5],
        element_strides: [0; 5],
        interleave: interleave as u32,
        swizzle: swizzle as u32,
        l2_promotion: l2_promotion as u32,
        oob_fill: oob_fill as u32,
    };
    // SAFETY: the caller's promise: `rank` values each (strides one fewer).
    unsafe {
        m.dims[..r].copy_from_slice(std::slice::from_raw_parts(dims, r));
        m.strides[..r - 1].copy_from_slice(std::slice::from_raw_parts(strides, r - 1));
        m.box_dims[..r].copy_from_slice(std::slice::from_raw_parts(boxes, r));
        m.element_strides[..r].copy_from_slice(std::slice::from_raw_parts(element_strides, r));
    }
    match sim_encode(&m) {
        Ok(encoded) => {
            // SAFETY: the caller's promise: `map` is writable.
            unsafe { map.write(encoded) };
            cu::CUresult::CUDA_SUCCESS
        }
        Err(_) => cu::CUresult::CUDA_ERROR_INVALID_VALUE,
    }
}

/// Launches `kernel` on the simulator with `maps` (A's, B's and C's, made
/// by the plan or for this launch) in a buffer of this launch and `args(a_map)`, the kernel's
/// arguments for the maps at `a_map` and after it.
///
/// # Safety
/// As the CUDA launch in `launch_tiles`: the arguments `args` makes are the
/// kernel's contract for `cfg`.
pub(super) unsafe fn launch<T, A: KernelArgs<WgmmaParams<T>>>(
    gpu: &Gpu,
    kernel: Kernel<WgmmaParams<T>>,
    cfg: LaunchConfig,
    maps: &[TensorMap; MAPS_PER_SLOT],
    args: impl FnOnce(u64) -> A,
) -> Result<()> {
    let words: Vec<u64> = maps.iter().flat_map(|m| m.0).collect();
    let held = gpu.to_device(&words)?;
    gpu.allow_dynamic_shared(kernel, SHARED_BYTES)?;
    let a_map = held.as_device_ptr().as_raw();
    // SAFETY: the caller's promise; the maps' buffer lives until the
    // simulated launch has run (it is synchronous).
    unsafe { gpu.launch(kernel, cfg, gpu.stream(), args(a_map)) }
}
