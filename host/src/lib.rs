//! The catalogue of `cuda-kernels`: the seed kernels' launchers over
//! `ndarray` data, their CPU references and checks, one module per kernel
//! family, on the runtime ([`cuda_kernels_runtime`], re-exported here:
//! `Gpu`, memory, streams, images, the typed launch, the simulator).
//!
//! Most users depend on the root crate `cuda-kernels`, which embeds the PTX
//! and re-exports everything here; `cuda_kernels::gpu()` opens device 0 with
//! it (or the simulator, with `CUDA_KERNELS_SIM=1`).
//!
//! The launchers are extension traits of [`Gpu`], one per family
//! ([`multiply::MultiplyExt`], [`reduce::ReduceExt`], …): bring them into
//! scope with `use cuda_kernels::prelude::*;` ([`prelude`]). The checks of
//! the device layer that only the test suite runs (math, 16-bit floats,
//! device primitives, simulator fidelity) are behind the `checks` feature.
#![warn(missing_docs)]
pub mod bench;
pub mod contexts;
pub mod cublas;
#[cfg(feature = "checks")]
pub mod device_checks;
#[cfg(feature = "checks")]
pub mod fidelity;
#[cfg(feature = "checks")]
pub mod float16_checks;
pub mod gemm_wgmma;
pub mod graphs;
pub mod hello;
pub mod histogram;
pub mod life;
pub mod mandelbrot;
#[cfg(feature = "checks")]
pub mod math_checks;
pub mod matrices;
pub mod multi_gpu;
pub mod multiply;
pub mod reduce;
pub mod scan;
pub mod select;
pub mod sort;
pub mod streams;
pub mod util;
pub mod vectorized;

// The runtime's modules, under the paths they had when they lived here.
pub use cuda_kernels_runtime::{
    async_mem, device_id, device_info, devices, dynlib, embedded_images, error, gpu, graph, image,
    kernel, launch, memory, nccl, peer, ptx_entry_points, simulator, timing,
};

pub use error::{CudaResultExt, Error, Result};
pub use gpu::{Gpu, SIM_ENV, init, sim_requested};
pub use graph::{Branch, Capture, Graph, GraphExec, Held, KernelNode, Update};
pub use image::{Cubin, Images, KernelResources, LoadedImage};
pub use kernel::{Kernel, KernelArgs, KernelParam};
pub use launch::LaunchConfig;
pub use matrices::ElementwiseArgs;
pub use memory::{DeviceBuffer, DeviceId, DeviceSlice, DeviceView, DeviceViewMut, Stream};

/// Re-export of `cust`, for users who go beyond the launchers.
pub use cust;
/// Re-export of `ndarray`, the array type of every launcher.
pub use ndarray;

/// The launchers of every kernel family, as extension traits of [`Gpu`]:
/// `use cuda_kernels::prelude::*;` makes `gpu.multiply(…)`, `gpu.reduce(…)`
/// and the rest callable.
pub mod prelude {
    pub use crate::BuiltinSimulator;
    #[cfg(feature = "checks")]
    pub use crate::device_checks::DeviceChecks;
    #[cfg(feature = "checks")]
    pub use crate::fidelity::FidelityChecks;
    #[cfg(feature = "checks")]
    pub use crate::float16_checks::Float16Checks;
    pub use crate::gemm_wgmma::WgmmaGemmExt;
    pub use crate::hello::HelloExt;
    pub use crate::life::LaneLifeExt;
    pub use crate::mandelbrot::MandelbrotExt;
    #[cfg(feature = "checks")]
    pub use crate::math_checks::MathChecks;
    pub use crate::matrices::elementwise::{ElementwiseExt, NamedElementwiseExt};
    pub use crate::matrices::gemm::GemmExt;
    pub use crate::matrices::gufunc::GufuncExt;
    pub use crate::matrices::matmul::MatmulExt;
    pub use crate::multi_gpu::mandelbrot::MandelbrotRowsExt;
    pub use crate::multiply::{LaunchOverheadExt, MultiplyExt};
    pub use crate::reduce::ReduceExt;
    #[cfg(feature = "checks")]
    pub use crate::reduce::primitives::WarpPrimitiveChecks;
    pub use crate::streams::{LaneMultKerExt, MultKerExt};
}

/// The simulator running this catalogue's kernels (the `cuda-kernels-gpu`
/// crate's image), as `Gpu` constructors.
pub trait BuiltinSimulator: Sized {
    /// The CPU simulator, standing in for an H100, running the catalogue's
    /// kernels ([`Gpu::simulator_of_crate`] of `cuda_kernels_gpu`): its
    /// own Rust code, every thread of a launch, before the launch returns.
    fn simulator() -> Result<Self>;

    /// Simulated device `ordinal` running the catalogue's kernels: a
    /// simulator like [`BuiltinSimulator::simulator`] (which is simulated
    /// device 0) whose buffers and streams are its own, so that handing them
    /// to another device's launcher is [`Error::WrongDevice`].
    fn simulated_device(ordinal: u32) -> Result<Self>;
}

impl BuiltinSimulator for Gpu {
    fn simulator() -> Result<Self> {
        Self::simulated_device(0)
    }

    fn simulated_device(ordinal: u32) -> Result<Self> {
        Ok(Gpu::simulated_device_of_crate(
            ordinal,
            cuda_kernels_gpu::IMAGE,
        ))
    }
}

/// Every PTX entry point of the kernel crate: its generated list
/// ([`cuda_kernels_gpu::KERNELS`], one `kernels!` declaration per kernel).
/// The offline PTX check asserts that each one is in the built PTX.
pub fn entry_points() -> &'static [&'static str] {
    cuda_kernels_gpu::KERNELS
}
