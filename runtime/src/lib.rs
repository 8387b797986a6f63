//! The runtime of `cuda-kernels`: what a program needs to launch kernels
//! written in Rust (its own, declared with `kernels!`, or the catalogue's),
//! and nothing of the catalogue itself.
//!
//! - [`gpu`]: [`Gpu`], a CUDA device (primary context, loaded image,
//!   default stream, launch limits, multiprocessors) or the CPU simulator
//!   ([`Gpu::simulator_of`]);
//! - [`device_id`]: which device memory and streams belong to;
//! - [`memory`]: device buffers and slices and streams, on either backend;
//!   [`async_mem`]: page-locked host memory and non-blocking streams;
//! - [`kernel`]: the typed launch ([`Gpu::launch`]) of a [`Kernel`] handle;
//! - [`launch`]: [`LaunchConfig`] and the launch-shape checks done before
//!   any pointer reaches a kernel;
//! - [`image`]: PTX and cubins ([`Images`], [`embedded_images!`]);
//! - [`simulator`]: the simulator backend (the simulated H100's limits);
//! - [`error`]: the one error type, naming the kernel and the reason;
//! - [`devices`], [`device_info`]: device listing and properties;
//!   [`peer`]: copies between devices; [`timing`]: CUDA-event timers;
//!   [`dynlib`]: `dlopen` for the driver-level paths.
//!
//! From a `kernels!` declaration to a launch:
//! ```no_run
//! # mod k { cuda_kernels_device::kernels! {
//! #     /// `x[i] *= 2` for `i < n`.
//! #     ///
//! #     /// # Safety
//! #     /// `x` holds `n` f32.
//! #     pub fn double(x: *mut f32, n: usize) as DOUBLE {
//! #         for i in cuda_kernels_device::thread::grid_stride(n) {
//! #             // SAFETY: i < n.
//! #             unsafe { *x.add(i) *= 2.0 };
//! #         }
//! #     }
//! # } }
//! use cuda_kernels_runtime::{Gpu, LaunchConfig, Result};
//! // const IMAGES: Images<'static> = embedded_images!("kernels"); // from build.rs
//! fn run(gpu: &Gpu) -> Result<Vec<f32>> {
//!     let mut x = gpu.to_device(&[1.0f32, 2.0, 3.0])?;
//!     let n = x.len();
//!     // SAFETY: x holds n f32, and nothing else uses it during the launch.
//!     unsafe { gpu.launch(k::DOUBLE, LaunchConfig::linear(1, 256), gpu.stream(), (&mut x, n))? };
//!     gpu.synchronize(k::DOUBLE.name())?;
//!     x.to_vec()
//! }
//! ```
#![warn(missing_docs)]
pub mod async_mem;
pub mod device_id;
pub mod device_info;
pub mod devices;
pub mod dynlib;
pub mod error;
pub mod gpu;
pub mod image;
pub mod kernel;
pub mod launch;
pub mod memory;
pub mod peer;
pub mod simulator;
pub mod timing;

pub use error::{CudaResultExt, Error, Result};
pub use gpu::{Gpu, SIM_ENV, init, sim_requested};
pub use image::{Cubin, Images, KernelResources, LoadedImage};
pub use kernel::{Kernel, KernelArgs, KernelParam};
pub use launch::LaunchConfig;
pub use memory::{DeviceBuffer, DeviceId, DeviceSlice, Stream};

/// Re-export of `cust`, for users who go beyond the launchers.
pub use cust;

/// The `.entry` names in a PTX text, in order.
pub fn ptx_entry_points(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .filter_map(|l| l.trim_start().strip_prefix(".visible .entry "))
        .filter_map(|rest| rest.split(['(', ' ']).next())
        .collect()
}
