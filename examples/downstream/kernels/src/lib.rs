//! A user's kernel crate, built for nvptx64 by the app's `build.rs` with
//! `cuda-kernels-builder`:
//! - [`SOFTMAX_ROWS`], a hand-written kernel declared with
//!   `cuda_kernels_device::kernels!`: one block per row, shared memory,
//!   barriers and libdevice's `expf`;
//! - [`leaky_relu`], an elementwise op declared with
//!   `cuda_kernels_gpu::elementwise!` (entry points
//!   `elementwise_leaky_relu_f32` and `_f64`);
//! - [`MaxAbs`], a reduction declared with `cuda_kernels_gpu::reduce_kernels!`
//!   under its own name (entry points `reduce_max_abs_f32` and `_f64`);
//! - [`HISTOGRAM`], a byte histogram in shared memory: each block counts
//!   with shared-memory atomics, then adds its counts to the global ones;
//! - [`BIN_STARTS`], where each bin of a histogram starts in sorted order:
//!   the exclusive prefix sum of the counts, one block scan
//!   (`cuda_kernels_device::collectives`).
//! - [`attention`], a tile of attention weights on the tensor cores
//!   (`mma.sync`, sm_80 and later builds only).
//!
//! On the host the same crate is an ordinary library: the per-element
//! functions ([`softmax_term`], [`leaky_relu`]'s body, [`MaxAbs`]'s
//! `combine`) that the app's CPU reference calls, so that GPU and CPU compute
//! with the same code, and every kernel's body, which the kernels' handles
//! carry for the CPU simulator.
#![warn(missing_docs)]
#![cfg_attr(target_arch = "nvptx64", no_std)]
// abi_ptx: `extern "ptx-kernel"`; asm_experimental_arch: `shared_array!`,
// which expands here. The builder's inner build sets RUSTC_BOOTSTRAP=1 for
// them.
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

use cuda_kernels_device::prelude::*;
use cuda_kernels_gpu::reduce::ReduceOp;

pub mod attention;

/// Threads per block of `softmax_rows`: the host launches exactly this many.
pub const SOFTMAX_BLOCK: u32 = 256;

/// The PTX entry point of the softmax kernel (its handle's name).
pub const SOFTMAX_ENTRY: &str = SOFTMAX_ROWS.name();

/// One softmax term, `e^(x − max)`: the kernel's and the CPU reference's
/// per-element function (`max` is the row's maximum, so the term is in
/// `[0, 1]` and cannot overflow).
#[inline(always)]
pub fn softmax_term(x: f32, max: f32) -> f32 {
    // `GpuFloat::exp` (the prelude's): libdevice's `__nv_expf` on the device
    // (at most 2 ulps from the exact value, CUDA's documented bound), the
    // standard library's on the host.
    (x - max).exp()
}

cuda_kernels_gpu::elementwise! {
    /// Leaky ReLU, `y = x` where `x > 0`, else `alpha·x`: one rounding, so
    /// the GPU and the CPU agree exactly.
    leaky_relu => leaky_relu<T: f32, f64>
        (in [x] out [y] inout [] scalar [alpha]) { *y = if x > 0.0 { x } else { alpha * x }; }
}

/// The largest magnitude, `max |x|`: `combine(a, b) = max(|a|, |b|)` is
/// associative and commutative, and its identity 0 is neutral on the
/// magnitudes it produces. Exact: no rounding anywhere.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaxAbs;

macro_rules! max_abs {
    ($($t:ident),*) => {$(
        impl ReduceOp<$t> for MaxAbs {
            const NAME: &'static str = "max_abs";
            #[inline(always)]
            fn identity() -> $t {
                0.0
            }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t {
                a.abs().max(b.abs())
            }
        }
    )*};
}
max_abs!(f32, f64);

// The entry points `reduce_max_abs_f32` and `reduce_max_abs_f64`, and
// `MaxAbs: ReduceKernel<f32>`/`<f64>` for the host's `Gpu::reduce`.
cuda_kernels_gpu::reduce_kernels!(MaxAbs, "max_abs": f32, f64);

use cuda_kernels_device::shared::SharedArray;

const BLOCK: usize = SOFTMAX_BLOCK as usize;

/// Combines every thread's `value` with `op` in a shared-memory tree;
/// every thread gets the block's result.
///
/// # Safety
/// `blockDim.x == BLOCK`, `t` is the thread's index, and every thread of
/// the block calls it (it has barriers).
#[inline(always)]
unsafe fn block_reduce(
    scratch: SharedArray<f32, BLOCK>,
    t: usize,
    value: f32,
    op: impl Fn(f32, f32) -> f32,
) -> f32 {
    // SAFETY: t < BLOCK (blockDim.x == BLOCK); slot t is this thread's.
    unsafe { scratch.store(t, value) };
    sync_threads();
    let mut half = BLOCK / 2;
    while half > 0 {
        if t < half {
            // SAFETY: t + half < BLOCK; slots t and t + half were written
            // before the last barrier, and only this thread writes slot t
            // until the next one.
            unsafe { scratch.store(t, op(scratch.load(t), scratch.load(t + half))) };
        }
        sync_threads();
        half /= 2;
    }
    // SAFETY: slot 0 was written before the last barrier.
    let result = unsafe { scratch.load(0) };
    // Slot 0 is read by all before the next reduction overwrites it.
    sync_threads();
    result
}

// The hand-written kernel: the entry point on nvptx64, its handle
// `SOFTMAX_ROWS` and the list `KERNELS` everywhere (on the host the handle
// carries the same body for the simulator).
cuda_kernels_device::kernels! {
    /// Row-wise softmax of a `rows × cols` row-major matrix:
    /// `y[r][c] = e^(x[r][c] − m) / Σ_c' e^(x[r][c'] − m)`, `m` the row's
    /// maximum. One block per row (grid-stride over rows); each thread
    /// strides over the row's columns, and the block combines the threads'
    /// maxima and sums in shared memory.
    ///
    /// # Safety
    /// `x` and `y` hold `rows · cols` f32 on the device, `y` overlaps no
    /// part of `x`, and `blockDim = (SOFTMAX_BLOCK, 1, 1)` (host-checked).
    pub fn softmax_rows(
        x: *const f32,
        y: *mut f32,
        rows: usize,
        cols: usize,
    ) as SOFTMAX_ROWS {
        let scratch = shared_array!(softmax_scratch: [f32; BLOCK]);
        let t = thread::thread_idx_x() as usize;
        // The row depends on the block only: every thread of a block runs the
        // same iterations, so the barriers are uniform.
        let mut row = thread::block_idx_x() as usize;
        while row < rows {
            // SAFETY: row < rows, so the row's cols elements are in bounds.
            let (xr, yr) = unsafe { (x.add(row * cols), y.add(row * cols)) };
            let columns = || (t..cols).step_by(BLOCK);
            // SAFETY: every c of `columns` is < cols, within the row.
            let max = columns().fold(f32::NEG_INFINITY, |m, c| m.max(unsafe { *xr.add(c) }));
            // SAFETY: blockDim.x == BLOCK; every thread of the block gets here.
            let max = unsafe { block_reduce(scratch, t, max, f32::max) };
            // SAFETY: every c of `columns` is < cols, within the row.
            let sum = columns().fold(0.0, |s, c| s + softmax_term(unsafe { *xr.add(c) }, max));
            // SAFETY: blockDim.x == BLOCK; every thread of the block gets here.
            let sum = unsafe { block_reduce(scratch, t, sum, |a, b| a + b) };
            for c in columns() {
                // SAFETY: c < cols, within the row; y overlaps no part of x,
                // and this thread alone writes element c.
                unsafe { *yr.add(c) = softmax_term(*xr.add(c), max) / sum };
            }
            row += thread::grid_dim_x() as usize;
        }
    }
}

/// Bins of [`HISTOGRAM`]: one per byte value.
pub const BINS: usize = 256;

cuda_kernels_device::kernels! {
    /// `hist[b] += |{i < n : x[i] = b}|`: each block counts its grid-stride
    /// share in shared memory, then adds its counts to `hist`.
    ///
    /// # Safety
    /// `x` holds `n` bytes and `hist` [`BINS`] u32 on the device.
    pub fn histogram(x: *const u8, n: usize, hist: *mut u32) as HISTOGRAM {
        let counts = shared_array!(histogram_counts: [u32; BINS]);
        let bins = || (thread::thread_idx_x() as usize..BINS).step_by(thread::block_dim_x() as usize);
        for b in bins() {
            // SAFETY: b < BINS; each thread clears its own bins.
            unsafe { counts.store(b, 0) };
        }
        sync_threads();
        for i in thread::grid_stride(n) {
            // SAFETY: i < n, and a byte is < BINS; the bins are updated atomically.
            unsafe { counts.fetch_add(*x.add(i) as usize, 1) };
        }
        sync_threads();
        for b in bins() {
            // SAFETY: b < BINS, the length of `hist`; counted before the barrier.
            unsafe { atomic::fetch_add_u32(hist.add(b), counts.load(b)) };
        }
    }
}

cuda_kernels_device::kernels! {
    /// `starts[b] = hist[0] + … + hist[b − 1]`: where bin `b`'s values start
    /// once sorted (a counting sort's offsets). One block of [`BINS`]
    /// threads, one bin each, through the device crate's block scan.
    ///
    /// # Safety
    /// `hist` and `starts` hold [`BINS`] u32; one block of [`BINS`] threads
    /// (another size is the block scan's located fault).
    pub fn bin_starts(hist: *const u32, starts: *mut u32) as BIN_STARTS {
        use cuda_kernels_device::collectives::Sum;
        let storage = cuda_kernels_device::block_storage!(bin_starts_storage: u32, BINS);
        let b = (thread::thread_idx_x() as usize).min(BINS - 1);
        // SAFETY: b < BINS, the length of `hist`.
        let count = unsafe { *hist.add(b) };
        // SAFETY: every thread of the block calls it; the storage is this kernel's.
        let (start, _total) = unsafe { storage.exclusive_scan::<Sum>(count) };
        // SAFETY: b < BINS, one thread per bin.
        unsafe { *starts.add(b) = start };
    }
}
