//! GPU kernels in plain Rust, compiled to PTX by the workspace's `build.rs`.
//!
//! On `nvptx64-nvidia-cuda` this crate is `#![no_std]`: the `device` layer
//! (our stand-in for `cuda_std`) wraps thread indices, barriers, shared memory,
//! warp shuffles, atomics and `vprintf`, and each kernel family lives in its own
//! module with its `extern "ptx-kernel"` entry points.
//!
//! On the host the same crate compiles as an ordinary library without the entry
//! points: what remains are the *per-element functions* (a Mandelbrot point, a
//! Game-of-Life cell, a reduction operator…) that the GPU kernel and the CPU
//! reference share, so both sides compute with the very same Rust code.
//!
//! Conventions for entry points:
//! - `#[unsafe(no_mangle)] pub unsafe extern "ptx-kernel" fn name(...)`, the
//!   name being the PTX entry point the host asks for;
//! - parameters are raw pointers, lengths and scalars, in the order
//!   inputs, outputs, scalars; no slices or structs by value;
//! - sizes are validated once by the host launcher (the `# Safety` section of
//!   each kernel says what it relies on), so kernels use unchecked accesses.
#![warn(missing_docs)]
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, stdarch_nvptx, asm_experimental_arch)
)]

#[cfg(target_arch = "nvptx64")]
pub mod device;

pub mod bandwidth;
pub mod device_checks;
pub mod elementwise;
pub mod fault;
pub mod hello;
pub mod life;
pub mod mandelbrot;
pub mod matmul;
pub mod multiply;
pub mod reduce;
pub mod streams;

/// On panic (an out-of-bounds index, a failed `gpu_assert!`…) records the
/// source location, block and thread for the host ([`fault`]) and traps: the
/// kernel stops and the host gets a described error at its next
/// synchronization. (`loop {}` would hang the GPU instead.)
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    match info.location() {
        Some(l) => device::fault::fail(l.file(), l.line(), l.column(), "panic"),
        None => device::fault::fail("<unknown>", 0, 0, "panic"),
    }
}
