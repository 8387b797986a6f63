//! The host side of `cuda-kernels`: load the PTX built from `kernels-gpu`,
//! launch its kernels on `ndarray` data, time them, and compare them with CPU
//! references; or run the very same kernels' Rust code on the CPU simulator.
//!
//! Most users depend on the root crate `cuda-kernels`, which embeds the PTX
//! and re-exports everything here; `cuda_kernels::gpu()` opens device 0 with
//! it (or the simulator, with `CUDA_KERNELS_SIM=1`).
//!
//! Layout, one module per kernel family:
//! - [`gpu`]: [`Gpu`], a CUDA device (primary context, module, stream) or the
//!   simulator ([`Gpu::simulator`]); every launcher is a method on it;
//! - [`memory`]: device buffers and slices and streams, on either backend;
//! - [`simulator`]: the simulator backend (limits, errors);
//! - [`error`]: the one error type, naming the kernel and the reason;
//! - [`launch`]: launch-shape checks done before any pointer reaches a kernel;
//! - [`timing`]: CUDA-event timers; [`bench`](mod@bench): reference bandwidths;
//! - [`device_info`]: the device query (K2);
//! - [`multiply`] (K1, K6, K19), [`hello`] (K17), and the other families.
#![warn(missing_docs)]
pub mod async_mem;
pub mod bench;
pub mod contexts;
pub mod cublas;
pub mod device_checks;
pub mod device_info;
pub mod devices;
pub mod dynlib;
pub mod error;
pub mod fidelity;
pub mod float16_checks;
pub mod gemm_wgmma;
pub mod gpu;
pub mod hello;
pub mod image;
pub mod kernel;
pub mod launch;
pub mod life;
pub mod mandelbrot;
pub mod math_checks;
pub mod matrices;
pub mod memory;
pub mod multi_gpu;
pub mod multiply;
pub mod peer;
pub mod reduce;
pub mod scan;
pub mod select;
pub mod simulator;
pub mod streams;
pub mod timing;
pub mod util;

pub use error::{CudaResultExt, Error, Result};
pub use gpu::{Gpu, SIM_ENV, init, sim_requested};
pub use image::{Cubin, Images, KernelResources, LoadedImage};
pub use kernel::{ElementwiseArgs, Kernel, KernelArgs, KernelParam, LaunchConfig};
pub use memory::{DeviceBuffer, DeviceId, DeviceSlice, Stream};

/// Re-export of `cust`, for users who go beyond the launchers.
pub use cust;
/// Re-export of `ndarray`, the array type of every launcher.
pub use ndarray;

/// Every PTX entry point of the kernel crate: its generated list
/// ([`cuda_kernels_gpu::KERNELS`], one `kernels!` declaration per kernel).
/// The offline PTX check asserts that each one is in the built PTX.
pub fn entry_points() -> &'static [&'static str] {
    cuda_kernels_gpu::KERNELS
}
