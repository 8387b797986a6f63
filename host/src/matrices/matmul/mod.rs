//! `doubles_matrix`, `matrix_mul_naive`, `matrix_mul_tiled`:
//! launchers over `ndarray` 2-D views, and their CPU references.
use ndarray::{Array2, ArrayView2, ArrayViewMut2, Zip};

use cuda_kernels_gpu::matmul::{
    BLOCK_2D, DOUBLES_MATRIX, MATRIX_MUL_NAIVE, MATRIX_MUL_TILED, MatmulParams, SGEMM_64,
    SGEMM_64_V4, SGEMM_128, SGEMM_128_V4, SgemmTile, TILED_MAX_OPERAND, double_element,
};

use crate::Gpu;
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::launch::LaunchConfig;
use crate::launch::{checked_elements, grid_exact};
use crate::memory::DeviceSlice;
use crate::timing::{PhaseTimers, Times, timed_result};
use crate::vectorized::PairLaunch;
use crate::vectorized::{VECTORIZED_BLOCK, VectorizedGrid, vectorized_grid};

mod reference;

pub use reference::*;

/// Which matrix-product kernel to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatmulKernel {
    /// `matrix_mul_naive`: one thread per element of C, operands read from
    /// global memory.
    Naive,
    /// `matrix_mul_tiled`: 128 × 128 tiles of C per block, k-tiles in
    /// shared memory, 8 × 8 register micro-tiles per thread; the launcher
    /// picks 16-byte loads and smaller tiles or split-k by shape and
    /// alignment ([`sgemm_choice`]).
    Tiled,
}

impl MatmulKernel {
    /// The PTX entry point (for `Tiled`, the general one, which also names
    /// the kernel in errors: the launch may use another `matrix_mul_tiled*`
    /// entry, see [`MatmulLaunch::entry`]).
    pub fn entry(self) -> &'static str {
        self.kernel().name()
    }

    /// The handle of [`MatmulKernel::entry`].
    pub fn kernel(self) -> Kernel<MatmulParams> {
        match self {
            MatmulKernel::Naive => MATRIX_MUL_NAIVE,
            MatmulKernel::Tiled => MATRIX_MUL_TILED,
        }
    }
}

/// Times of one matrix product.
#[derive(Debug, Clone, Copy)]
pub struct MatmulTiming {
    /// The kernel alone, from CUDA events.
    pub kernel_ms: f32,
    /// Copies in, kernel and copy out, from CUDA events.
    pub with_transfers_ms: f32,
}

/// The launch shape of a matrix product `m × k · k × n`, checked: grid,
/// block, dynamic shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatmulLaunch {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of A, rows of B.
    pub k: usize,
    /// Columns of B and C.
    pub n: usize,
    /// The PTX entry point launched.
    pub entry: Kernel<MatmulParams>,
    /// `(gridDim.x, gridDim.y)`.
    pub grid: (u32, u32),
    /// `gridDim.z`: the k-range splits (1, or 2 for split-k, which needs C
    /// zeroed before the launch).
    pub splits: u32,
    /// `(blockDim.x, blockDim.y)`.
    pub block: (u32, u32),
    /// Dynamic shared memory in bytes.
    pub smem: u32,
}

impl MatmulLaunch {
    /// The launch configuration: grid `(grid.0, grid.1, splits)`, block
    /// `(block.0, block.1, 1)`, [`Self::smem`] bytes of shared memory.
    pub fn config(&self) -> LaunchConfig {
        LaunchConfig {
            grid: (self.grid.0, self.grid.1, self.splits),
            block: (self.block.0, self.block.1, 1),
            shared_mem_bytes: self.smem,
        }
    }
}

/// The multiprocessor count [`matmul_launch`] plans for (an H100 SXM's);
/// [`Gpu::matmul_on_device`](crate::matrices::matmul::MatmulExt::matmul_on_device) plans for the GPU's own count.
pub const PLAN_SMS: u32 = 132;

/// Smallest `k` for which [`sgemm_choice`] splits the k-range in two.
pub const SPLIT_K_MIN: usize = 512;

/// Picks the tiled SGEMM entry and the number of k-splits for
/// `A (m × k) · B (k × n)` on a GPU of `sms` multiprocessors, where
/// `aligned` says whether A and B start on 16-byte boundaries:
/// - 16-byte loads ([`SGEMM_128_V4`], [`SGEMM_64_V4`]) when `aligned`,
///   `k % 4 == 0` and `n % 4 == 0`, 4-byte loads otherwise;
/// - the tile whose busiest multiprocessor computes the fewest elements of
///   C (`ceil(blocks / sms)` blocks of `bm·bn`), with 64 × 64 tiles only
///   when they cut that by more than 1/15 (a 64² block does the same work
///   more slowly than a 128² one; the measurements: `docs/tuning.md`). So
///   1024³ (64 tiles of 128² for 132 SMs: one block on 64 SMs, none on the
///   rest) takes 64² tiles (256 blocks, at most 2 per SM), and so do 1536³,
///   1792³ and 3072³; 2048³, 4000³ and 4096³ keep 128²;
/// - with 64 × 64 tiles, 2 k-splits when they give at most one block per
///   multiprocessor and `k ≥` [`SPLIT_K_MIN`]: a lone 64-thread block
///   cannot hide its own latencies. Two partial products added onto a zeroed
///   C give the same bits in either order, so the result stays
///   deterministic; more splits would not.
pub fn sgemm_choice(m: usize, k: usize, n: usize, sms: u32, aligned: bool) -> (SgemmTile, u32) {
    let vec = aligned && k.is_multiple_of(4) && n.is_multiple_of(4);
    let (big, small) = if vec {
        (SGEMM_128_V4, SGEMM_64_V4)
    } else {
        (SGEMM_128, SGEMM_64)
    };
    let sms = sms.max(1) as usize;
    let blocks = |t: SgemmTile| m.div_ceil(t.bm).saturating_mul(n.div_ceil(t.bn));
    // Elements of C on the busiest multiprocessor.
    let busiest = |t: SgemmTile| blocks(t).div_ceil(sms).saturating_mul(t.bm * t.bn);
    if busiest(small).saturating_mul(15) >= busiest(big).saturating_mul(14) {
        (big, 1)
    } else if blocks(small) <= sms && k >= SPLIT_K_MIN {
        (small, 2)
    } else {
        (small, 1)
    }
}

/// Checks the shapes of `A (m × k) · B (k × n)` for `kernel` and returns its
/// launch shape, planned for [`PLAN_SMS`] multiprocessors and 16-byte
/// aligned operands (see [`matmul_launch_for`]).
pub fn matmul_launch(
    kernel: MatmulKernel,
    a: (usize, usize),
    b: (usize, usize),
) -> Result<MatmulLaunch> {
    matmul_launch_for(kernel, a, b, PLAN_SMS, true)
}

/// Checks the shapes of `A (m × k) · B (k × n)` for `kernel` and returns its
/// launch shape on a GPU of `sms` multiprocessors (`aligned`: A and B start
/// on 16-byte boundaries; the tiled kernel's entry, tile and splits come
/// from [`sgemm_choice`]): inner dimensions must match, no dimension may
/// be 0, the element and byte counts of A, B and C must fit in `usize`, the
/// grid must fit the hardware limits (65,535 blocks along y), and for the
/// tiled kernel A and B must have at most `TILED_MAX_OPERAND` (≈ 2^32)
/// elements.
pub fn matmul_launch_for(
    kernel: MatmulKernel,
    a: (usize, usize),
    b: (usize, usize),
    sms: u32,
    aligned: bool,
) -> Result<MatmulLaunch> {
    let name = kernel.entry();
    let ((m, k), (k2, n)) = (a, b);
    if k != k2 {
        return Err(Error::invalid(
            name,
            format!("inner dimensions differ: A is {m}×{k}, B is {k2}×{n}"),
        ));
    }
    if m == 0 || k == 0 || n == 0 {
        return Err(Error::invalid(
            name,
            format!("empty matrix: A is {m}×{k}, B is {k2}×{n}"),
        ));
    }
    for dims in [[m, k, 4], [k, n, 4], [m, n, 4]] {
        checked_elements(name, &dims)?;
    }
    Ok(match kernel {
        MatmulKernel::Naive => MatmulLaunch {
            m,
            k,
            n,
            entry: kernel.kernel(),
            grid: (
                grid_exact(name, n, BLOCK_2D, "x")?,
                grid_exact(name, m, BLOCK_2D, "y")?,
            ),
            splits: 1,
            block: (BLOCK_2D, BLOCK_2D),
            smem: 0,
        },
        MatmulKernel::Tiled if m * k > TILED_MAX_OPERAND || k * n > TILED_MAX_OPERAND => {
            return Err(Error::invalid(
                name,
                format!(
                    "A ({m}×{k}) or B ({k}×{n}) has more than {TILED_MAX_OPERAND} elements, \
                     the most this kernel's 32-bit offsets reach (matrix_mul_naive has no such limit)"
                ),
            ));
        }
        MatmulKernel::Tiled => {
            let (tile, splits) = sgemm_choice(m, k, n, sms, aligned);
            MatmulLaunch {
                m,
                k,
                n,
                entry: tile.entry,
                grid: (
                    grid_exact(name, n, tile.bn as u32, "x")?,
                    grid_exact(name, m, tile.bm as u32, "y")?,
                ),
                splits,
                block: (tile.threads(), 1),
                smem: tile.smem_bytes(),
            }
        }
    })
}

/// The block `(columns, rows)` of the seed-shaped 2-D `doubles_matrix`,
/// whose grid limits [`doubles_matrix_launch`] keeps.
const SEED_DOUBLES_BLOCK: (u32, u32) = (32, 8);

/// The launch shape `(grid, block)` of `doubles_matrix` over `rows × cols`
/// with the default grid sizing: a 1-D vectorized map over the `rows * cols`
/// elements ([`vectorized_grid`], blocks of [`VECTORIZED_BLOCK`]). Errors on
/// an empty matrix, an element count whose bytes overflow, or a shape past
/// the seed's 2-D grid (more than 65,535 × 8 rows, or 2^31 − 1 blocks of 32
/// columns).
pub fn doubles_matrix_launch(rows: usize, cols: usize) -> Result<(u32, u32)> {
    const K: &str = DOUBLES_MATRIX.name();
    if rows == 0 || cols == 0 {
        return Err(Error::invalid(K, format!("empty matrix: {rows}×{cols}")));
    }
    checked_elements(K, &[rows, cols, 4])?;
    // The limits of the seed-shaped 2-D launch (blocks of 32 columns × 8
    // rows), kept so that the 1-D kernel refuses exactly the shapes it
    // refused (a 1 × 2^36 broadcast view would otherwise be copied in full).
    grid_exact(K, cols, SEED_DOUBLES_BLOCK.0, "x")?;
    grid_exact(K, rows, SEED_DOUBLES_BLOCK.1, "y")?;
    let grid = vectorized_grid(
        K,
        rows * cols,
        4,
        VECTORIZED_BLOCK,
        1,
        VectorizedGrid::Cover,
    )?;
    Ok((grid, VECTORIZED_BLOCK))
}

/// The matrix-multiplication launchers on a [`Gpu`].
pub trait MatmulExt {
    /// Doubles every element of `a` in place on the GPU (any rows ×
    /// cols; a 1-D vectorized map over the elements). Exact.
    ///
    /// Pass `array.view_mut()` for an owned `Array2`. A view that is not in
    /// standard layout (transposed, strided) is copied to a contiguous
    /// buffer, doubled there and copied back into the view.
    ///
    /// Errors (no launch) on an empty matrix or one past the limits of
    /// [`doubles_matrix_launch`] (more than 65,535 × 8 rows).
    fn doubles_matrix_in_place(&self, a: ArrayViewMut2<f32>) -> Result<()>;

    /// Queues `doubles_matrix` on [`Gpu::stream`] over a row-major `rows × cols` matrix
    /// already on the device, without synchronizing (for pipelines and
    /// benchmarks). The shape and the buffer length are checked. Safe under
    /// the [`_on_device` rule](Gpu#launchers-that-leave-work-in-flight-the-_on_device-rule).
    fn doubles_matrix_on_device(
        &self,
        a: &mut DeviceSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<()>;

    /// `doubles_matrix` on a copy: returns `2 * a`, leaving `a` alone.
    fn doubles_matrix(&self, a: ArrayView2<f32>) -> Result<Array2<f32>>;

    /// `C = A · B` with the naive kernel (one thread per element of C).
    ///
    /// Errors (no launch) when the inner dimensions differ, a matrix is
    /// empty, a size overflows or the grid would exceed the hardware limits.
    fn matrix_mul_naive(&self, a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Array2<f32>>;

    /// `C = A · B` with the tiled, register-blocked kernel (the fast
    /// path). Same contract as [`Gpu::matrix_mul_naive`](crate::matrices::matmul::MatmulExt::matrix_mul_naive).
    fn matrix_mul_tiled(&self, a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Array2<f32>>;

    /// `C = A · B` with the chosen kernel, on either backend.
    fn matmul(
        &self,
        kernel: MatmulKernel,
        a: ArrayView2<f32>,
        b: ArrayView2<f32>,
    ) -> Result<Array2<f32>>;

    /// `C = A · B` with the chosen kernel, with CUDA-event times of the
    /// kernel alone and with the transfers (GPU only:
    /// [`Error::NotOnSimulator`] on the simulator).
    fn matmul_timed(
        &self,
        kernel: MatmulKernel,
        a: ArrayView2<f32>,
        b: ArrayView2<f32>,
    ) -> Result<(Array2<f32>, MatmulTiming)>;

    /// Queues `C = A · B` on [`Gpu::stream`] over row-major buffers already
    /// on the device (`a`: m × k, `b`: k × n, `c`: m × n), without copies or
    /// synchronization (for pipelines and benchmarks). Shapes and buffer
    /// lengths are checked; the caller synchronizes before reading `c`.
    /// Safe under the [`_on_device` rule](Gpu#launchers-that-leave-work-in-flight-the-_on_device-rule).
    #[allow(clippy::too_many_arguments)]
    fn matmul_on_device(
        &self,
        kernel: MatmulKernel,
        a: &DeviceSlice<f32>,
        b: &DeviceSlice<f32>,
        c: &mut DeviceSlice<f32>,
        m: usize,
        k: usize,
        n: usize,
    ) -> Result<()>;
}

impl MatmulExt for Gpu {
    fn doubles_matrix_in_place(&self, mut a: ArrayViewMut2<f32>) -> Result<()> {
        const K: &str = DOUBLES_MATRIX.name();
        let (rows, cols) = a.dim();
        doubles_matrix_launch(rows, cols)?;
        self.bind()?;
        let mut d = match a.as_slice() {
            Some(s) => self.to_device(s),
            None => {
                let host = a.as_standard_layout();
                let s = host
                    .as_slice()
                    .ok_or_else(|| Error::invalid(K, "standard layout is not contiguous"))?;
                self.to_device(s)
            }
        }?;
        self.doubles_matrix_on_device(&mut d, rows, cols)?;
        self.synchronize(K)?;
        match a.as_slice_mut() {
            Some(s) => d.copy_to(s)?,
            None => {
                let mut out = vec![0.0f32; rows * cols];
                d.copy_to(&mut out[..])?;
                let out = ArrayView2::from_shape((rows, cols), &out[..])
                    .map_err(|e| Error::invalid(K, e.to_string()))?;
                a.assign(&out);
            }
        }
        Ok(())
    }

    fn doubles_matrix_on_device(
        &self,
        a: &mut DeviceSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        const K: &str = DOUBLES_MATRIX.name();
        doubles_matrix_launch(rows, cols)?;
        let (grid, block) = self.vectorized_launch(K, rows * cols, 4)?;
        if a.len() != rows * cols {
            return Err(Error::invalid(
                K,
                format!(
                    "buffer holds {} elements, {rows}×{cols} needs {}",
                    a.len(),
                    rows * cols
                ),
            ));
        }
        self.bind()?;
        let (cfg, stream) = (LaunchConfig::linear(grid, block), self.stream());
        // SAFETY: a holds rows * cols f32 (checked above, no overflow); the kernel's
        // grid-stride map covers exactly those elements with any 1-D grid.
        unsafe { self.launch(DOUBLES_MATRIX, cfg, stream, (a, rows, cols)) }
    }

    fn doubles_matrix(&self, a: ArrayView2<f32>) -> Result<Array2<f32>> {
        doubles_matrix_launch(a.nrows(), a.ncols())?;
        let mut out = a.to_owned();
        self.doubles_matrix_in_place(out.view_mut())?;
        Ok(out)
    }

    fn matrix_mul_naive(&self, a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Array2<f32>> {
        self.matmul(MatmulKernel::Naive, a, b)
    }

    fn matrix_mul_tiled(&self, a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Array2<f32>> {
        self.matmul(MatmulKernel::Tiled, a, b)
    }

    fn matmul(
        &self,
        kernel: MatmulKernel,
        a: ArrayView2<f32>,
        b: ArrayView2<f32>,
    ) -> Result<Array2<f32>> {
        self.matmul_with(kernel, a, b, false).map(|(c, _)| c)
    }

    fn matmul_timed(
        &self,
        kernel: MatmulKernel,
        a: ArrayView2<f32>,
        b: ArrayView2<f32>,
    ) -> Result<(Array2<f32>, MatmulTiming)> {
        let (c, times) = self.matmul_with(kernel, a, b, true)?;
        let (kernel_ms, with_transfers_ms) = timed_result(times, kernel.entry())?;
        Ok((
            c,
            MatmulTiming {
                kernel_ms,
                with_transfers_ms,
            },
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn matmul_on_device(
        &self,
        kernel: MatmulKernel,
        a: &DeviceSlice<f32>,
        b: &DeviceSlice<f32>,
        c: &mut DeviceSlice<f32>,
        m: usize,
        k: usize,
        n: usize,
    ) -> Result<()> {
        let name = kernel.entry();
        let aligned = [a.as_device_ptr().as_raw(), b.as_device_ptr().as_raw()]
            .iter()
            .all(|p| p.is_multiple_of(16));
        let sms = match kernel {
            MatmulKernel::Naive => PLAN_SMS,
            MatmulKernel::Tiled => self.multiprocessors(name)?,
        };
        let shape = matmul_launch_for(kernel, (m, k), (k, n), sms, aligned)?;
        check_product_buffers(name, (a.len(), b.len(), c.len()), (m, k, n))?;
        self.check_device(name, "a", a)?;
        self.check_device(name, "b", b)?;
        self.check_device(name, "c", c)?;
        self.bind()?;
        let stream = self.stream();
        let cfg = shape.config();
        if shape.splits > 1 {
            // Split-k blocks add their partial products onto C.
            // SAFETY: `c` is borrowed mutably and the memset is queued on the same
            // stream as the kernel that reads it.
            unsafe { c.set_zero_async(stream) }?;
        }
        // SAFETY: a, b, c hold m·k, k·n, m·n f32 (checked above, no overflow); `c` is
        // borrowed mutably so it aliases neither input; grid, block, shared memory and
        // (with splits) the zeroed C are what the entry's Safety section asks for
        // (matmul_launch_for); 16-byte entries only when a and b are aligned.
        unsafe { self.launch(shape.entry, cfg, stream, (a, b, c, m, k, n)) }
    }
}

/// The steps the launchers above share.
trait MatmulExtSteps {
    /// `C = A · B`, timed (`(kernel_ms, total_ms)`) or not.
    fn matmul_with(
        &self,
        kernel: MatmulKernel,
        a: ArrayView2<f32>,
        b: ArrayView2<f32>,
        timed: bool,
    ) -> Result<(Array2<f32>, Times)>;
}

impl MatmulExtSteps for Gpu {
    fn matmul_with(
        &self,
        kernel: MatmulKernel,
        a: ArrayView2<f32>,
        b: ArrayView2<f32>,
        timed: bool,
    ) -> Result<(Array2<f32>, Times)> {
        let name = kernel.entry();
        let shape = matmul_launch(kernel, a.dim(), b.dim())?;
        self.bind()?;
        let (a, b) = (a.as_standard_layout(), b.as_standard_layout());
        let (a, b) = match (a.as_slice(), b.as_slice()) {
            (Some(a), Some(b)) => (a, b),
            _ => return Err(Error::invalid(name, "standard layout is not contiguous")),
        };
        let timers = PhaseTimers::start(self, timed)?;
        let da = self.to_device(a)?;
        let db = self.to_device(b)?;
        // SAFETY: every element of C is written by the kernel before it is read
        // (split-k zeroes it first).
        let mut dc = unsafe { self.uninitialized::<f32>(shape.m * shape.n) }?;
        timers.kernel_start()?;
        self.matmul_on_device(kernel, &da, &db, &mut dc, shape.m, shape.k, shape.n)?;
        timers.kernel_stop()?;
        self.synchronize(name)?;
        let mut c = vec![0.0f32; shape.m * shape.n];
        dc.copy_to(&mut c[..])?;
        let times = timers.finish()?;
        let c = Array2::from_shape_vec((shape.m, shape.n), c)
            .map_err(|e| Error::invalid(name, e.to_string()))?;
        Ok((c, times))
    }
}

/// Checks that the buffers of a row-major product `C = A·B` hold exactly
/// `m·k`, `k·n` and `m·n` elements (`lens` = A, B, C): for every launcher of
/// a product over device buffers (ours, cuBLAS's).
pub fn check_product_buffers(
    name: &'static str,
    (a, b, c): (usize, usize, usize),
    (m, k, n): (usize, usize, usize),
) -> Result<()> {
    for (what, len, want) in [
        ("A", a, m.checked_mul(k)),
        ("B", b, k.checked_mul(n)),
        ("C", c, m.checked_mul(n)),
    ] {
        if Some(len) != want {
            return Err(Error::invalid(
                name,
                format!(
                    "buffer {what} holds {len} elements, the shape {m}×{k}·{k}×{n} needs {}",
                    want.map_or("more than usize::MAX".into(), |w| w.to_string())
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
