//! The kernels, in plain Rust: built for the GPU by the app's `build.rs`,
//! and for the host as a library (the handles, and the bodies the CPU
//! simulator runs).
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

use cuda_kernels_device::prelude::*;

cuda_kernels_device::kernels! {
    /// `y[i] = a · x[i] + y[i]` for every `i < n`.
    ///
    /// # Safety
    /// `x` and `y` hold `n` f32 on the device.
    pub fn saxpy(a: f32, x: *const f32, y: *mut f32, n: usize) as SAXPY {
        for i in thread::grid_stride(n) {
            // SAFETY: i < n, the length of both.
            unsafe { *y.add(i) += a * *x.add(i) };
        }
    }
}
