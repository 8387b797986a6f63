//! The host side of `cuda-kernels`: load the PTX built from `kernels-gpu`,
//! launch its kernels on `ndarray` data, time them, and compare them with CPU
//! references.
//!
//! Most users depend on the root crate `cuda-kernels`, which embeds the PTX
//! and re-exports everything here; `cuda_kernels::gpu()` opens device 0 with it.
//!
//! Layout, one module per kernel family:
//! - [`gpu`]: [`Gpu`], the context-owning handle (device, primary context,
//!   module, stream); every launcher is a method on it;
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
pub mod dynlib;
pub mod error;
pub mod gpu;
pub mod hello;
pub mod image;
pub mod launch;
pub mod life;
pub mod mandelbrot;
pub mod math_checks;
pub mod matrices;
pub mod multiply;
pub mod reduce;
pub mod streams;
pub mod timing;
pub mod util;

pub use error::{CudaResultExt, Error, Result};
pub use gpu::{Gpu, init};
pub use image::{Cubin, Images, LoadedImage};

/// Re-export of `cust`, for users who go beyond the launchers.
pub use cust;
/// Re-export of `ndarray`, the array type of every launcher.
pub use ndarray;

/// Every PTX entry point the host asks for, family by family. The offline
/// PTX check asserts that each one is in the built PTX.
pub fn entry_points() -> Vec<&'static str> {
    [
        multiply::ENTRY_POINTS,
        device_checks::ENTRY_POINTS,
        hello::ENTRY_POINTS,
        matrices::ENTRY_POINTS,
        reduce::ENTRY_POINTS,
        mandelbrot::ENTRY_POINTS,
        streams::ENTRY_POINTS,
        life::ENTRY_POINTS,
        math_checks::ENTRY_POINTS,
    ]
    .concat()
}
