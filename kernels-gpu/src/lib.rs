//! GPU kernels in plain Rust, compiled to PTX by the workspace's `build.rs`.
//!
//! On `nvptx64-nvidia-cuda` this crate is `#![no_std]`: the device layer
//! (the crate `cuda-kernels-device`, our stand-in for `cuda_std`, re-exported
//! as [`device`]) wraps thread indices, barriers, shared memory, warp
//! shuffles, atomics and `vprintf`, and gives the panic handler; each kernel
//! family lives in its own module with its `extern "ptx-kernel"` entry points.
//!
//! On the host the same crate compiles as an ordinary library: the
//! *per-element functions* (a Mandelbrot point, a Game-of-Life cell, a
//! reduction operator…) that the GPU kernel and the CPU reference share, so
//! both sides compute with the very same Rust code, and every kernel body,
//! compiled against the device layer's host side: each kernel's handle
//! carries its body as a host entry (`Kernel::sim_entry`), which the CPU
//! simulator (`device::sim`, host only) runs with CUDA's execution model. Only the entry points themselves (`extern "ptx-kernel"`, their
//! export names) are nvptx64's alone.
//!
//! Conventions for entry points:
//! - each is declared once, in a [`device::kernels!`] block (or by a family
//!   macro, `elementwise!`, `reduce_kernels!`): that declaration is the
//!   `#[unsafe(no_mangle)] pub unsafe extern "ptx-kernel" fn name(...)` on
//!   nvptx64, the typed host handle (`NAME: Kernel<(params…)>`) everywhere
//!   (on the host with the body as its simulator entry), and the name's
//!   place in [`KERNELS`];
//! - parameters are raw pointers, lengths and scalars, in the order
//!   inputs, outputs, scalars; no slices or structs by value;
//! - sizes are validated once by the host launcher (the `# Safety` section of
//!   each kernel says what it relies on), so kernels use unchecked accesses.
//!
//! # In a user's kernel crate
//! A kernel crate of its own uses [`elementwise!`], [`reduce_kernels!`] and
//! their traits from here, with `default-features = false`: the default
//! feature `builtin-kernels` compiles this crate's own kernels: their entry
//! points for nvptx64, which a `cdylib` would export next to the user's (its
//! PTX would hold every kernel below), and their host entries for the
//! simulator. Without it this crate is the macros' support code
//! ([`bandwidth`], [`elementwise`](mod@elementwise), [`reduce`]) alone, on
//! both targets: a user's build does not compile the built-in kernels.
#![warn(missing_docs)]
#![cfg_attr(target_arch = "nvptx64", no_std)]
// abi_ptx: the entry points; asm_experimental_arch: `shared_array!`, which
// expands here. No stdarch_nvptx: the kernels reach the hardware only through
// the device layer, never through `core::arch::nvptx`.
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

/// The device layer (our `cuda_std`), so that kernels write `crate::device::…`.
pub use cuda_kernels_device as device;
pub use cuda_kernels_device::{gpu_assert, gpu_printf, shared_array};

pub mod bandwidth;
#[cfg(feature = "builtin-kernels")]
pub mod cg;
#[cfg(feature = "builtin-kernels")]
pub mod collective_checks;
#[cfg(feature = "builtin-kernels")]
pub mod device_checks;
pub mod elementwise;
#[cfg(feature = "builtin-kernels")]
pub mod float16_checks;
#[cfg(feature = "builtin-kernels")]
pub mod gemm;
// Hopper's wgmma GEMM: in the sm_90a build alone on nvptx64 (its list,
// `gemm_wgmma::KERNELS`, is not in `KERNELS`, which the portable PTX holds).
#[cfg(feature = "builtin-kernels")]
pub mod fidelity;
#[cfg(all(
    feature = "builtin-kernels",
    any(not(target_arch = "nvptx64"), target_feature = "sm_90a")
))]
pub mod gemm_wgmma;
#[cfg(feature = "builtin-kernels")]
pub mod hello;
#[cfg(feature = "builtin-kernels")]
pub mod histogram;
#[cfg(feature = "builtin-kernels")]
pub mod life;
#[cfg(feature = "builtin-kernels")]
pub mod mandelbrot;
#[cfg(feature = "builtin-kernels")]
pub mod math_checks;
#[cfg(feature = "builtin-kernels")]
pub mod matmul;
#[cfg(feature = "builtin-kernels")]
pub mod multiply;
pub mod reduce;
pub mod scan;
pub mod select;
#[cfg(feature = "builtin-kernels")]
pub mod sort;
#[cfg(feature = "builtin-kernels")]
pub mod streams;

/// The image this crate's kernels are built into: its library name, which
/// every handle declared here carries (`Kernel::image`) and which
/// cuda-kernels-builder writes into the PTX built from it. A `Gpu` of the
/// built-in kernels (and `Gpu::simulator()`) launches only handles of it.
pub const IMAGE: &str = env!("CARGO_CRATE_NAME");

/// Declares [`KERNELS`] and [`KERNEL_LISTS`] from one list of the kernel
/// families' generated lists, so that the two cannot disagree.
macro_rules! kernel_lists {
    ($($list:path),* $(,)?) => {
        /// Every PTX entry point of this crate, each family's generated list
        /// joined once here; the build fails if two kernels share an entry
        /// name. The host's tests check this list against the built PTX. (It
        /// exists with the feature `builtin-kernels` only, as the kernels do.)
        #[cfg(feature = "builtin-kernels")]
        pub const KERNELS: &[&str] = device::kernel_list!($($list),*);

        /// The lists [`KERNELS`] joins, each with its path in this crate
        /// (`"multiply::KERNELS"`, …), in the same order: the table of entry
        /// points in `docs/seeds.md` is generated from it.
        #[cfg(feature = "builtin-kernels")]
        pub const KERNEL_LISTS: &[(&str, &[&str])] = &[$((stringify!($list), $list)),*];
    };
}

kernel_lists!(
    multiply::KERNELS,
    device_checks::KERNELS,
    hello::KERNELS,
    elementwise::ELEMENTWISE_KERNELS,
    elementwise::REPEAT_KERNELS,
    matmul::KERNELS,
    matmul::SGEMM_KERNELS,
    gemm::GEMM_KERNELS,
    gemm::STAGE_KERNELS,
    gemm::SPLIT_REDUCE_KERNELS,
    float16_checks::KERNELS,
    reduce::built_in::REDUCE_KERNELS,
    reduce::primitive_tests::KERNELS,
    scan::built_in::SCAN_KERNELS,
    collective_checks::KERNELS,
    collective_checks::LOAD_STORE_KERNELS,
    collective_checks::LOOK_BACK_KERNELS,
    select::built_in::SELECT_KERNELS,
    mandelbrot::KERNELS,
    streams::KERNELS,
    life::KERNELS,
    math_checks::KERNELS,
    fidelity::FIDELITY_KERNELS,
    sort::SORT_KERNELS,
    histogram::HISTOGRAM_KERNELS,
    cg::KERNELS,
);
