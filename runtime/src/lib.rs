//! The runtime of `cuda-kernels`: what a program needs to launch kernels
//! written in Rust (its own, declared with `kernels!`, or the catalogue's),
//! and nothing of the catalogue itself.
//!
//! - [`gpu`]: [`Gpu`], a CUDA device (primary context, loaded image,
//!   default stream, launch limits, multiprocessors) or the CPU simulator
//!   ([`Gpu::simulator_of`]);
//! - [`device_id`]: which device memory and streams belong to;
//!   [`device_context`]: the one context and ordering stream of each CUDA
//!   device, which every resource made there holds;
//! - [`memory`]: device buffers and slices and streams, on either backend;
//!   [`async_mem`]: page-locked host memory and non-blocking streams;
//! - [`kernel`]: the typed launch ([`Gpu::launch`]) of a [`Kernel`] handle;
//!   [`host_launch`]: the same on host slices, copied in and out in one
//!   call ([`Gpu::launch_host`]);
//! - [`graph`]: CUDA graphs: a capture of typed launches, copies and
//!   memsets ([`Gpu::begin_capture`]), replayed many times
//!   ([`GraphExec::launch`]), their arguments updated;
//! - [`launch`]: [`LaunchConfig`] and the launch-shape checks done before
//!   any pointer reaches a kernel;
//! - [`image`]: PTX and cubins ([`Images`], [`embedded_images!`]);
//! - [`simulator`]: the simulator backend (the simulated H100's limits);
//! - [`error`]: the one error type, naming the kernel and the reason;
//! - [`devices`], [`device_info`]: device listing and properties;
//!   [`peer`]: copies between devices; [`timing`]: CUDA-event timers;
//!   [`dynlib`]: `dlopen` for the driver-level paths;
//! - [`nccl`]: collectives between devices and processes (NCCL, loaded at
//!   run time, or between simulated devices).
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
/// Calls the macro `$m` once per tuple arity a launch takes (0 to 15
/// arguments), with each element's argument type, parameter type and index
/// (`A0 P0 0, A1 P1 1`): the typed launch's tuples and the host launch's.
macro_rules! for_each_arity {
    ($m:ident) => {
        $m!();
        $m!(A0 P0 0);
        $m!(A0 P0 0, A1 P1 1);
        $m!(A0 P0 0, A1 P1 1, A2 P2 2);
        $m!(A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3);
        $m!(A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4);
        $m!(A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5);
        $m!(A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5, A6 P6 6);
        $m!(A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5, A6 P6 6, A7 P7 7);
        $m!(A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5, A6 P6 6, A7 P7 7, A8 P8 8);
        $m!(A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5, A6 P6 6, A7 P7 7, A8 P8 8, A9 P9 9);
        $m!(A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5, A6 P6 6, A7 P7 7, A8 P8 8, A9 P9 9, A10 P10 10);
        $m!(A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5, A6 P6 6, A7 P7 7, A8 P8 8, A9 P9 9, A10 P10 10, A11 P11 11);
        $m!(A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5, A6 P6 6, A7 P7 7, A8 P8 8, A9 P9 9, A10 P10 10, A11 P11 11, A12 P12 12);
        $m!(A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5, A6 P6 6, A7 P7 7, A8 P8 8, A9 P9 9, A10 P10 10, A11 P11 11, A12 P12 12, A13 P13 13);
        $m!(A0 P0 0, A1 P1 1, A2 P2 2, A3 P3 3, A4 P4 4, A5 P5 5, A6 P6 6, A7 P7 7, A8 P8 8, A9 P9 9, A10 P10 10, A11 P11 11, A12 P12 12, A13 P13 13, A14 P14 14);
    };
}

pub mod async_mem;
pub mod device_context;
pub mod device_id;
pub mod device_info;
pub mod devices;
pub mod dynlib;
pub mod error;
pub mod gpu;
pub mod graph;
pub mod host_launch;
pub mod image;
pub mod kernel;
pub mod launch;
pub mod memory;
pub mod nccl;
pub mod peer;
pub mod simulator;
pub mod timing;

pub use error::{CudaResultExt, Error, Result};
pub use gpu::{Gpu, SIM_ENV, init, sim_requested};
pub use graph::{Branch, Capture, Graph, GraphExec, Held, KernelNode, Update};
pub use host_launch::{In, InOut};
pub use image::{Cubin, Images, KernelResources, LoadedImage};
pub use kernel::{Kernel, KernelArgs, KernelParam};
pub use launch::LaunchConfig;
pub use memory::{
    DeviceBuffer, DeviceContext, DeviceId, DeviceSlice, DeviceView, DeviceViewMut, Stream,
};

/// The device layer (`cuda-kernels-device`), re-exported so that a host
/// program names the types it shares with its kernels without a second
/// dependency: [`f16`](struct@f16) and [`bf16`] (`device::float16`), the mma
/// fragments (`device::mma`), `kernels!`.
pub use cuda_kernels_device as device;
pub use cuda_kernels_device::float16::{bf16, f16};
/// Re-export of `cust`, for users who go beyond the launchers.
pub use cust;

/// The `.entry` names in a PTX text, in order.
pub fn ptx_entry_points(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .filter_map(|l| l.trim_start().strip_prefix(".visible .entry "))
        .filter_map(|rest| rest.split(['(', ' ']).next())
        .collect()
}
