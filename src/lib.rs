//! # cuda-kernels
//!
//! CUDA kernels written in plain Rust (`kernels-gpu`, `#![no_std]`), compiled
//! to PTX by this crate's `build.rs` with rustc's own NVPTX backend, embedded
//! here, and launched through `cust` with `ndarray` inputs and outputs.
//!
//! ```no_run
//! use cuda_kernels::ndarray::array;
//! # fn main() -> cuda_kernels::Result<()> {
//! let gpu = cuda_kernels::gpu()?; // device 0, with the embedded PTX loaded
//! let c = gpu.multiply(array![1.0f32, 2.0].view(), array![3.0f32, 4.0].view())?;
//! assert_eq!(c, array![3.0, 8.0]);
//! # Ok(()) }
//! ```
//!
//! Everything of the host crate is re-exported: [`Gpu`] and its launchers,
//! [`Error`], the CPU references, timing helpers. The command-line program
//! `cuda-kernels` runs the demos ([`demos`]) and the benchmarks.
#![warn(missing_docs)]
pub use cuda_kernels_gpu as kernels;
pub use cuda_kernels_host::*;

pub mod demos;

/// The PTX of every kernel, built from `kernels-gpu` at compile time.
pub const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/kernels.ptx"));

/// The GPU architecture the embedded PTX targets (`CUDA_KERNELS_ARCH` at build
/// time, default `sm_70`).
pub const PTX_ARCH: &str = env!("CUDA_KERNELS_ARCH_BUILT");

/// Opens device 0 and loads the embedded [`PTX`].
///
/// Errors with [`Error::NoDriver`] or [`Error::NoDevice`] on a machine
/// without a usable GPU.
pub fn gpu() -> Result<Gpu> {
    Gpu::from_ptx(PTX)
}

/// The `.entry` names in a PTX text, in order.
pub fn ptx_entry_points(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .filter_map(|l| l.trim_start().strip_prefix(".visible .entry "))
        .filter_map(|rest| rest.split(['(', ' ']).next())
        .collect()
}
