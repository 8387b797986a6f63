//! Thread, block and grid indices and dimensions (CUDA's `threadIdx`,
//! `blockIdx`, `blockDim`, `gridDim`), the global 1-D index and grid-stride
//! loops.
//!
//! The special registers are always readable on the device; the
//! `core::arch::nvptx` intrinsics are `unsafe` only because they exist solely
//! on that target. On the host the simulator keeps them per simulated
//! thread (calling these outside a simulated kernel panics).
#[cfg(target_arch = "nvptx64")]
use core::arch::nvptx;

macro_rules! special_registers {
    ($($(#[$doc:meta])* $name:ident => $intrinsic:ident, $field:ident[$axis:literal];)*) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub fn $name() -> u32 {
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: reading a PTX special register has no preconditions.
            return unsafe { nvptx::$intrinsic() as u32 };
            #[cfg(not(target_arch = "nvptx64"))]
            return crate::sim::current().$field[$axis];
        }
    )*};
}

special_registers! {
    /// `threadIdx.x`
    thread_idx_x => _thread_idx_x, thread[0];
    /// `threadIdx.y`
    thread_idx_y => _thread_idx_y, thread[1];
    /// `threadIdx.z`
    thread_idx_z => _thread_idx_z, thread[2];
    /// `blockIdx.x`
    block_idx_x => _block_idx_x, block[0];
    /// `blockIdx.y`
    block_idx_y => _block_idx_y, block[1];
    /// `blockIdx.z`
    block_idx_z => _block_idx_z, block[2];
    /// `blockDim.x`
    block_dim_x => _block_dim_x, block_dim[0];
    /// `blockDim.y`
    block_dim_y => _block_dim_y, block_dim[1];
    /// `blockDim.z`
    block_dim_z => _block_dim_z, block_dim[2];
    /// `gridDim.x`
    grid_dim_x => _grid_dim_x, grid_dim[0];
    /// `gridDim.y`
    grid_dim_y => _grid_dim_y, grid_dim[1];
    /// `gridDim.z`
    grid_dim_z => _grid_dim_z, grid_dim[2];
}

/// The global 1-D thread index, `blockIdx.x * blockDim.x + threadIdx.x`,
/// computed in 64 bits so that it cannot wrap for any legal launch.
///
/// (The seed writes `threadIdx.x * blockDim.x + threadIdx.x`, which gives
/// every block the same indices; this is the correct form.)
#[inline(always)]
pub fn index_1d() -> usize {
    block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize
}

/// The global 2-D thread index `(x, y)`: x = column, y = row.
#[inline(always)]
pub fn index_2d() -> (usize, usize) {
    (
        block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize,
        block_idx_y() as usize * block_dim_y() as usize + thread_idx_y() as usize,
    )
}

/// The number of threads in the whole 1-D grid, `blockDim.x * gridDim.x`:
/// the stride of a grid-stride loop.
#[inline(always)]
pub fn grid_size_1d() -> usize {
    block_dim_x() as usize * grid_dim_x() as usize
}

/// The indices `index_1d(), index_1d() + grid_size_1d(), …` below `len`.
///
/// ```
/// use cuda_kernels_device::{kernels, thread};
/// kernels! {
///     /// `out[i] = 2 inp[i]` for `i < n`.
///     ///
///     /// # Safety
///     /// `inp` and `out` hold `n` f32.
///     pub fn double(inp: *const f32, out: *mut f32, n: usize) as DOUBLE {
///         for i in thread::grid_stride(n) {
///             // SAFETY: i < n, the length of both buffers.
///             unsafe { *out.add(i) = *inp.add(i) * 2.0 };
///         }
///     }
/// }
/// # fn main() {}
/// ```
#[inline(always)]
pub fn grid_stride(len: usize) -> GridStride {
    GridStride {
        next: index_1d(),
        stride: grid_size_1d(),
        len,
    }
}

/// Iterator returned by [`grid_stride`]. A plain loop (no `StepBy`), so it
/// compiles to a compare, an add and a branch.
pub struct GridStride {
    next: usize,
    stride: usize,
    len: usize,
}

impl Iterator for GridStride {
    type Item = usize;
    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        if self.next < self.len {
            let i = self.next;
            self.next += self.stride;
            Some(i)
        } else {
            None
        }
    }
}
