//! `mandelbrot_ker` (every launch path launches it, the C ABI too): one thread per
//! point of a `size × size` lattice, 1 in the graph where the orbit of 0
//! under `z ↦ z² + c` stays within the bound for `max_iters` iterations, 0
//! where it escapes.
//!
//! Single source: [`mandelbrot_point`] (the iteration) and
//! [`lattice_indices`] (the thread → point mapping) are plain functions
//! compiled for the GPU kernel and for the host's CPU reference alike, so the
//! two graphs are identical bit for bit.
//!
//! The iteration is the seed's, written with explicit fused multiply-adds
//! ([`fma`]) where `nvcc` contracts the seed's expressions by default: the
//! NVPTX backend, as rustc drives it, never contracts on its own (it emits
//! `mul.rn`/`add.rn`), and the host computes the same fused operation with
//! `f32::mul_add`, so both sides round identically.

use core::num::NonZeroU32;

/// `a * b + c` with a single rounding (IEEE 754 fusedMultiplyAdd), the same
/// on the GPU (`fma.rn.f32`) and on the host (`f32::mul_add`).
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    crate::device::arith::fma_f32(a, b, c)
}

/// The Mandelbrot test of one point `c = c_re + i·c_im`, as the seed's
/// `mandelbrot_ker` does it: `z = 0`; `max_iters` times `z = z² + c`, and
/// as soon as `|z|² > upper_bound_squared` the point has escaped (0.0);
/// otherwise it is in the set (1.0). A negative `max_iters` runs no
/// iteration (as the seed's `for (k = 0; k < max_iters; k++)`), giving 1.0.
#[inline(always)]
pub fn mandelbrot_point(c_re: f32, c_im: f32, max_iters: i32, upper_bound_squared: f32) -> f32 {
    let mut z = (0.0f32, 0.0f32);
    // Unrolled by four (the escape test still runs after every step, so the
    // result is the same as the plain loop's): fewer counter updates and
    // branches per step on the GPU.
    let mut left = max_iters;
    while left >= 4 {
        if escapes(&mut z, c_re, c_im, upper_bound_squared)
            || escapes(&mut z, c_re, c_im, upper_bound_squared)
            || escapes(&mut z, c_re, c_im, upper_bound_squared)
            || escapes(&mut z, c_re, c_im, upper_bound_squared)
        {
            return 0.0;
        }
        left -= 4;
    }
    while left > 0 {
        if escapes(&mut z, c_re, c_im, upper_bound_squared) {
            return 0.0;
        }
        left -= 1;
    }
    1.0
}

/// One step of the seed's iteration, `z = z² + c`, then whether
/// `|z|² > upper_bound_squared`.
#[inline(always)]
fn escapes(z: &mut (f32, f32), c_re: f32, c_im: f32, upper_bound_squared: f32) -> bool {
    let (z_re, z_im) = *z;
    // temp = z_re*z_re - z_im*z_im + c_re; z_im = 2*z_re*z_im + c_im
    let temp = fma(z_re, z_re, -(z_im * z_im)) + c_re;
    let z_im = fma(2.0 * z_re, z_im, c_im);
    *z = (temp, z_im);
    // |z|² = z_re*z_re + z_im*z_im
    fma(temp, temp, z_im * z_im) > upper_bound_squared
}

/// The lattice indices of thread `tid` in a `size × size` graph (the seed's
/// mapping): `i = tid % size` picks the real part `lattice[i]`,
/// `j = size − 1 − tid / size` the imaginary part `lattice[j]`, so row 0 of
/// the row-major graph is the top of the picture (largest imaginary part).
///
/// Requires `tid < size²` (then both indices are below `size`).
#[inline(always)]
pub fn lattice_indices(tid: u32, size: NonZeroU32) -> (u32, u32) {
    (tid % size, size.get() - 1 - tid / size)
}

use crate::device::thread;

crate::device::kernels! {
    /// The seed's kernel: `graph[tid]` = [`mandelbrot_point`] of
    /// `lattice[i] + i·lattice[j]` with `(i, j)` = [`lattice_indices`]`(tid,
    /// lattice_size)`, for every `tid < lattice_size²`; threads beyond that do
    /// nothing. 1-D grid of 1-D blocks (the seed uses blocks of 32).
    ///
    /// The seed first stores 1 and then, on escape, 0; here the one final
    /// value is stored once (the same graph, one store fewer).
    ///
    /// # Safety
    /// The host guarantees: `0 < lattice_size` and `lattice_size²` fits in
    /// i32 (so every index below is exact in u32); `lattice` points to
    /// `lattice_size` f32 on the device; `graph` points to `lattice_size²`
    /// f32 on the device, overlapping `lattice` nowhere; the launch has fewer
    /// than 2³² threads.
    pub fn mandelbrot_ker(
        lattice: *const f32,
        graph: *mut f32,
        max_iters: i32,
        upper_bound_squared: f32,
        lattice_size: i32,
    ) as MANDELBROT_KER {
        let Some(size) = NonZeroU32::new(lattice_size as u32) else {
            return;
        };
        // 32-bit index, as the seed's `int tid`: cheaper division below, and
        // exact because the launch has fewer than 2^32 threads.
        let tid = thread::block_idx_x() * thread::block_dim_x() + thread::thread_idx_x();
        if tid < size.get() * size.get() {
            let (i, j) = lattice_indices(tid, size);
            // SAFETY: i, j < size, the length of `lattice` (host-checked).
            let (c_re, c_im) = unsafe { (*lattice.add(i as usize), *lattice.add(j as usize)) };
            let value = mandelbrot_point(c_re, c_im, max_iters, upper_bound_squared);
            // SAFETY: tid < size², the length of `graph` (host-checked).
            unsafe { *graph.add(tid as usize) = value };
        }
    }

    /// Rows `row0 .. row0 + rows` of [`mandelbrot_ker`]'s graph (one
    /// device's band of a graph split across several GPUs): `graph[t]` is
    /// the full graph's element `row0 · lattice_size + t`, computed from the
    /// same [`lattice_indices`] and [`mandelbrot_point`], so every band is
    /// bit for bit the full graph's rows. 1-D grid of 1-D blocks.
    ///
    /// # Safety
    /// As [`mandelbrot_ker`], except that `graph` points to `rows ·
    /// lattice_size` f32; also `0 <= row0`, `0 < rows` and `row0 + rows <=
    /// lattice_size`.
    pub fn mandelbrot_rows(
        lattice: *const f32,
        graph: *mut f32,
        max_iters: i32,
        upper_bound_squared: f32,
        lattice_size: i32,
        row0: i32,
        rows: i32,
    ) as MANDELBROT_ROWS {
        let Some(size) = NonZeroU32::new(lattice_size as u32) else {
            return;
        };
        let tid = thread::block_idx_x() * thread::block_dim_x() + thread::thread_idx_x();
        // Exact in u32: rows · size <= size² < 2^31 (host-checked).
        if tid < rows as u32 * size.get() {
            let (i, j) = lattice_indices(row0 as u32 * size.get() + tid, size);
            // SAFETY: i, j < size, the length of `lattice` (host-checked).
            let (c_re, c_im) = unsafe { (*lattice.add(i as usize), *lattice.add(j as usize)) };
            let value = mandelbrot_point(c_re, c_im, max_iters, upper_bound_squared);
            // SAFETY: tid < rows · size, the length of `graph` (host-checked).
            unsafe { *graph.add(tid as usize) = value };
        }
    }
}
