//! `multiply`: `c[i] = a[i] * b[i]` on f32, on the
//! vectorized grid-stride map of [`crate::bandwidth`].
//!
//! The seed computes its index as `threadIdx.x * blockDim.x + threadIdx.x`,
//! which hands every block the same elements; here the index is the correct
//! `blockIdx.x * blockDim.x + threadIdx.x` with stride
//! `blockDim.x * gridDim.x` (`device::thread::grid_stride`).
//!
//! `vector_sum_i32` (PyOpenCL's `vectorSum`) and `empty_kernel` live here
//! too: they are the same one-line shape.

/// The per-element function shared by the kernel and the CPU reference.
#[inline(always)]
pub fn multiply_element(a: f32, b: f32) -> f32 {
    a * b
}

/// The per-element function of `vector_sum_i32`: a wrapping sum, the same on
/// the GPU (`add.s32`) and the CPU.
#[inline(always)]
pub fn vector_sum_element(a: i32, b: i32) -> i32 {
    a.wrapping_add(b)
}

use crate::bandwidth::device::map;

crate::device::kernels! {
    /// `c[i] = a[i] * b[i]` for `i < n`: 16-byte vectors, with an
    /// element-wise head and tail (any 1-D grid covers any n).
    ///
    /// # Safety
    /// `a`, `b` and `c` point to at least `n` f32 each on the device; `c`
    /// does not overlap `a` or `b`.
    pub fn multiply(
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        n: usize,
    ) as MULTIPLY {
        // SAFETY: all three hold n f32 (host-checked); c overlaps neither input.
        unsafe {
            map::<f32, 4, 2, 1>([a, b], [c], 1, n, |&[x, y], [z]| {
                *z = multiply_element(x, y)
            })
        };
    }

    /// `res[i] = a[i] + b[i]` (wrapping) for `i < n`, on the same
    /// vectorized map as `multiply`.
    ///
    /// # Safety
    /// `a`, `b` and `res` point to at least `n` i32 each; `res` overlaps
    /// neither input.
    pub fn vector_sum_i32(
        a: *const i32,
        b: *const i32,
        res: *mut i32,
        n: usize,
    ) as VECTOR_SUM_I32 {
        // SAFETY: all three hold n i32 (host-checked); res overlaps neither input.
        unsafe {
            map::<i32, 4, 2, 1>([a, b], [res], 1, n, |&[x, y], [z]| {
                *z = vector_sum_element(x, y)
            })
        };
    }

    /// Does nothing: it measures what a launch itself costs.
    ///
    /// # Safety
    /// None; `unsafe` only because every entry point is.
    pub fn empty_kernel() as EMPTY_KERNEL {}
}
