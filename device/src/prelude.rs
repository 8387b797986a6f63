//! What a kernel body usually needs, in one `use`:
//! `use cuda_kernels_device::prelude::*;` brings the modules [`thread`],
//! [`sync`], [`warp`], [`atomic`] and [`math`], the float methods of
//! [`GpuFloat`] (`x.exp()`, `x.sqrt()`, `x.mul_add(a, b)` … in a `no_std`
//! kernel crate), the shared-memory atomics' traits, and the macros
//! [`kernels!`], [`shared_array!`], [`gpu_assert!`] and [`gpu_printf!`].
pub use crate::math::GpuFloat;
pub use crate::shared::{SharedArray, SharedAtomic, SharedAtomicAdd};
pub use crate::sync::sync_threads;
pub use crate::{atomic, math, sync, thread, warp};
pub use crate::{gpu_assert, gpu_printf, kernels, shared_array};
