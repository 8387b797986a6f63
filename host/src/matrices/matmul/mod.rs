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
        for slice in [a, b, &*c] {
            self.check_device(name, slice)?;
        }
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

/// CPU reference for `doubles_matrix`: `2 * a`, element by element with the kernel's own
/// per-element function.
pub fn doubles_matrix_cpu(a: ArrayView2<f32>) -> Array2<f32> {
    a.mapv(double_element)
}

/// CPU reference for the matrix products in f32: ndarray's `dot` (what the seed compares
/// with, `numpy.dot`). Errors when the inner dimensions differ.
pub fn matmul_cpu(a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Array2<f32>> {
    if a.ncols() != b.nrows() {
        return Err(Error::invalid(
            "matmul (CPU)",
            format!("inner dimensions differ: {:?} · {:?}", a.dim(), b.dim()),
        ));
    }
    Ok(a.dot(&b))
}

/// CPU reference in f64 (inputs widened exactly), for comparisons at large
/// `k` where two f32 results differ by their own rounding errors.
pub fn matmul_cpu_f64(a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Array2<f64>> {
    if a.ncols() != b.nrows() {
        return Err(Error::invalid(
            "matmul (CPU f64)",
            format!("inner dimensions differ: {:?} · {:?}", a.dim(), b.dim()),
        ));
    }
    Ok(a.mapv(f64::from).dot(&b.mapv(f64::from)))
}

/// `numpy.allclose(got, expected)` with NumPy's default tolerances:
/// `|x − y| ≤ 1e-8 + 1e-5·|y|` for every element. Returns the first
/// offending index, or `None` when all are close (and the shapes agree).
pub fn allclose(got: ArrayView2<f32>, expected: ArrayView2<f32>) -> Option<(usize, usize)> {
    if got.dim() != expected.dim() {
        return Some((usize::MAX, usize::MAX));
    }
    Zip::indexed(&got)
        .and(&expected)
        .fold(None, |first, (i, j), &x, &y| {
            first.or_else(|| {
                let ok = ((x as f64) - (y as f64)).abs() <= 1e-8 + 1e-5 * (y as f64).abs();
                (!ok).then_some((i, j))
            })
        })
}

/// How a GPU product compares with the exact (f64) one.
#[derive(Debug, Clone, Copy)]
pub struct MatmulCheck {
    /// Largest `|gpu − exact|`.
    pub max_abs_error: f64,
    /// Largest error as a fraction of its allowed tolerance (≤ 1 passes).
    pub worst_ratio: f64,
    /// The element where that happens.
    pub worst_at: (usize, usize),
}

impl MatmulCheck {
    /// Whether every element is within tolerance.
    pub fn passed(&self) -> bool {
        self.worst_ratio <= 1.0
    }
}

/// The probability, per check of a whole product, that a correct result
/// fails [`check_matmul`] under the probabilistic model of rounding errors
/// (2⁻⁴⁰, about one in 10¹²).
pub const MATMUL_CHECK_FALSE_ALARM: f64 = 1.0 / (1u64 << 40) as f64;

/// The exact (f64) product of two f32 matrices and the tolerance of each
/// element of an f32 result, computed once to check several results of the
/// same product (a kernel, cuBLAS) with [`MatmulReference::check`].
///
/// The tolerance of element `(i, j)` is Higham and Mary's probabilistic
/// bound for an f32 dot product of length `k` computed in *any* order, with
/// or without fused multiply-adds ("A New Approach to Probabilistic Rounding
/// Error Analysis", SIAM J. Sci. Comput. 41(5), 2019, Thm. 3.1):
///
/// `|ĉᵢⱼ − cᵢⱼ| ≤ γ̃ₖ(λ)·(|A||B|)ᵢⱼ`, `γ̃ₖ(λ) = exp(λ√k·u + k·u²/(1−u)) − 1 ≈ λ√k·u`,
///
/// `u = 2⁻²⁴`, which fails with probability at most `2k·exp(−λ²(1−u)²/2)`
/// per element when rounding errors are independent and mean-zero (what
/// they are on any data but contrived, e.g. long runs of one inexact value).
/// `λ` is chosen so that the chance of a false alarm anywhere in the
/// `m × n` result is [`MATMUL_CHECK_FALSE_ALARM`]: `λ = √(2·ln(2kmn/p))/(1−u)`,
/// about 10 at 4096³. Against the deterministic worst case `k·u·(|A||B|)ᵢⱼ`
/// (the old check) this is `√k/λ` tighter, 6× at k = 4096: the error that
/// rounding actually shows grows like `√k`, a lost k-slab or a lost term
/// does not shrink. Measured on random data (unit tests): correct results
/// in sequential, FMA, pairwise and blocked order stay below 1/4 of the
/// bound (1/14 on positive data in sequential order, the worst), while one 8-wide k-slab dropped from an element at k = 4096 is
/// caught in about 97% of the elements (the old bound: about 80%), one
/// dropped term in about 81% (the old bound: 30%). Plus
/// `k·2⁻¹⁴⁹` for f32 underflow.
#[derive(Debug, Clone)]
pub struct MatmulReference {
    exact: Array2<f64>,
    tolerance: Array2<f64>,
}

impl MatmulReference {
    /// The exact product `A·B` and each element's tolerance.
    pub fn new(a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Self> {
        if a.ncols() != b.nrows() {
            return Err(Error::invalid(
                "matmul check",
                format!("inner dimensions differ: {:?} · {:?}", a.dim(), b.dim()),
            ));
        }
        let (m, k, n) = (a.nrows(), a.ncols(), b.ncols());
        let wide = |x: &f32| f64::from(*x);
        let (a64, b64) = (a.map(wide), b.map(wide));
        let exact = parallel_dot(a64.view(), b64.view());
        let u = f64::from(f32::EPSILON) / 2.0;
        let kf = k.max(1) as f64;
        let cases = 2.0 * kf * (m.max(1) * n.max(1)) as f64 / MATMUL_CHECK_FALSE_ALARM;
        let lambda = (2.0 * cases.ln()).sqrt() / (1.0 - u);
        let gamma = (lambda * kf.sqrt() * u + kf * u * u / (1.0 - u)).exp_m1();
        let underflow = kf * f64::from(f32::from_bits(1));
        let tolerance = parallel_dot(a64.mapv(f64::abs).view(), b64.mapv(f64::abs).view())
            .mapv(|s| gamma * s + underflow);
        Ok(Self { exact, tolerance })
    }

    /// The exact product.
    pub fn exact(&self) -> &Array2<f64> {
        &self.exact
    }

    /// Compares `got` with the exact product, element by element, within
    /// each element's tolerance (NaN never passes).
    pub fn check(&self, got: ArrayView2<f32>) -> Result<MatmulCheck> {
        if got.dim() != self.exact.dim() {
            return Err(Error::invalid(
                "matmul check",
                format!("result is {:?}, expected {:?}", got.dim(), self.exact.dim()),
            ));
        }
        let mut check = MatmulCheck {
            max_abs_error: 0.0,
            worst_ratio: 0.0,
            worst_at: (0, 0),
        };
        Zip::indexed(&got)
            .and(&self.exact)
            .and(&self.tolerance)
            .for_each(|(i, j), &x, &y, &tol| {
                let err = (f64::from(x) - y).abs();
                let ratio = if err.is_nan() {
                    f64::INFINITY
                } else {
                    err / tol
                };
                check.max_abs_error = check.max_abs_error.max(err);
                if ratio > check.worst_ratio {
                    check.worst_ratio = ratio;
                    check.worst_at = (i, j);
                }
            });
        Ok(check)
    }
}

/// `a · b` in f64 with the rows of `a` split over the CPU's cores (the
/// checks of the bench's 4096³ products would take half a minute each on
/// one core).
fn parallel_dot(a: ArrayView2<f64>, b: ArrayView2<f64>) -> Array2<f64> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let rows = a.nrows().div_ceil(threads).max(64);
    let mut out = Array2::<f64>::zeros((a.nrows(), b.ncols()));
    std::thread::scope(|scope| {
        for (a_rows, mut out_rows) in a
            .axis_chunks_iter(ndarray::Axis(0), rows)
            .zip(out.axis_chunks_iter_mut(ndarray::Axis(0), rows))
        {
            scope.spawn(move || out_rows.assign(&a_rows.dot(&b)));
        }
    });
    out
}

/// Compares an f32 product `got = A·B` with the f64 reference, element by
/// element, within the probabilistic rounding bound of [`MatmulReference`]
/// (`≈ λ√k·2⁻²⁴·(|A||B|)ᵢⱼ`, `λ ≈ 10`, any summation order). To check
/// several results of one product, build the [`MatmulReference`] once.
pub fn check_matmul(
    got: ArrayView2<f32>,
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
) -> Result<MatmulCheck> {
    MatmulReference::new(a, b)?.check(got)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn shapes_are_checked_before_launch() {
        for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
            assert!(matmul_launch(kernel, (2, 3), (4, 5)).is_err());
            assert!(matmul_launch(kernel, (0, 3), (3, 5)).is_err());
            assert!(matmul_launch(kernel, (2, 0), (0, 5)).is_err());
            assert!(matmul_launch(kernel, (usize::MAX / 2, 3), (3, 5)).is_err());
        }
        // 6 tiles of 128² for 132 SMs: 64² tiles, k too short to split; 7 % 4 != 0:
        // 4-byte loads.
        let l = matmul_launch(MatmulKernel::Tiled, (129, 7), (7, 300)).unwrap();
        assert_eq!(
            (l.entry.name(), l.grid, l.splits, l.block, l.smem),
            (
                "matrix_mul_tiled_64",
                (5, 3),
                1,
                (64, 1),
                SGEMM_64.smem_bytes()
            )
        );
        // 256 tiles of 128², aligned and k, n multiples of 4.
        let l = matmul_launch(MatmulKernel::Tiled, (2048, 64), (64, 2048)).unwrap();
        assert_eq!(
            (l.entry.name(), l.grid, l.splits, l.block, l.smem),
            (
                "matrix_mul_tiled_v4",
                (16, 16),
                1,
                (256, 1),
                SGEMM_128_V4.smem_bytes()
            )
        );
        // The same, misaligned: 4-byte loads.
        let l = matmul_launch_for(MatmulKernel::Tiled, (2048, 64), (64, 2048), 132, false);
        assert_eq!(l.unwrap().entry.name(), "matrix_mul_tiled");
        // Split-k.
        let l = matmul_launch(MatmulKernel::Tiled, (65, 4097), (4097, 3)).unwrap();
        assert_eq!(
            (l.entry.name(), l.grid, l.splits),
            ("matrix_mul_tiled_64", (1, 2), 2)
        );
        let l = matmul_launch(MatmulKernel::Naive, (17, 7), (7, 16)).unwrap();
        assert_eq!((l.grid, l.block), ((1, 2), (16, 16)));
        // 65,536 blocks along y is one too many.
        assert!(matmul_launch(MatmulKernel::Naive, (65_536 * 16, 1), (1, 1)).is_err());
        assert!(matmul_launch(MatmulKernel::Naive, (65_535 * 16, 1), (1, 1)).is_ok());
        assert!(matmul_launch(MatmulKernel::Tiled, (65_536 * 128, 1), (1, 1)).is_err());
        // 2^32 elements in A: beyond the tiled kernel's 32-bit offsets only.
        assert!(matmul_launch(MatmulKernel::Tiled, (1 << 16, 1 << 16), (1 << 16, 1)).is_err());
        assert!(matmul_launch(MatmulKernel::Naive, (1 << 16, 1 << 16), (1 << 16, 1)).is_ok());
    }

    /// An m×k and a k×n matrix: standard normal, or uniform in [0, 1)
    /// (all terms positive: partial sums grow like k, the hard case).
    fn operands(
        m: usize,
        k: usize,
        n: usize,
        positive: bool,
        seed: u64,
    ) -> (Array2<f32>, Array2<f32>) {
        let mut rng = crate::util::Rng::new(seed);
        let mut draw = |_| {
            if positive {
                rng.uniform() as f32
            } else {
                rng.normal() as f32
            }
        };
        (
            Array2::from_shape_fn((m, k), &mut draw),
            Array2::from_shape_fn((k, n), &mut draw),
        )
    }

    /// `A·B` in f32 with each dot product's terms `a[i, l]·b[l, j]` (l in
    /// `keep`) summed by `sum`.
    fn product_with(
        a: &Array2<f32>,
        b: &Array2<f32>,
        keep: impl Fn(usize) -> bool,
        sum: impl Fn(&[f32], &[f32]) -> f32,
    ) -> Array2<f32> {
        Array2::from_shape_fn((a.nrows(), b.ncols()), |(i, j)| {
            let (x, y): (Vec<f32>, Vec<f32>) = (0..a.ncols())
                .filter(|&l| keep(l))
                .map(|l| (a[[i, l]], b[[l, j]]))
                .unzip();
            sum(&x, &y)
        })
    }

    fn sequential(x: &[f32], y: &[f32]) -> f32 {
        x.iter().zip(y).fold(0.0f32, |s, (a, b)| s + a * b)
    }
    fn sequential_fma(x: &[f32], y: &[f32]) -> f32 {
        x.iter().zip(y).fold(0.0f32, |s, (a, b)| a.mul_add(*b, s))
    }
    fn pairwise(x: &[f32], y: &[f32]) -> f32 {
        match x.len() {
            0 => 0.0,
            1 => x[0] * y[0],
            n => pairwise(&x[..n / 2], &y[..n / 2]) + pairwise(&x[n / 2..], &y[n / 2..]),
        }
    }
    /// k-slabs of 8 summed with FMAs, then the slabs' sums in sequence (a
    /// tiled kernel's order).
    fn blocked(x: &[f32], y: &[f32]) -> f32 {
        x.chunks(8)
            .zip(y.chunks(8))
            .map(|(x, y)| sequential_fma(x, y))
            .fold(0.0f32, |s, t| s + t)
    }

    #[test]
    fn matmul_check_passes_correct_orders_with_room_to_spare() {
        for positive in [false, true] {
            let (a, b) = operands(16, 4096, 16, positive, 41);
            let reference = MatmulReference::new(a.view(), b.view()).unwrap();
            type Dot = fn(&[f32], &[f32]) -> f32;
            let orders: [(&str, Dot); 4] = [
                ("sequential", sequential),
                ("sequential FMA", sequential_fma),
                ("pairwise", pairwise),
                ("blocked", blocked),
            ];
            for (name, dot) in orders {
                let c = product_with(&a, &b, |_| true, dot);
                let chk = reference.check(c.view()).unwrap();
                println!(
                    "{name} (positive: {positive}): worst ratio {:.4}",
                    chk.worst_ratio
                );
                assert!(
                    chk.worst_ratio < 0.25,
                    "{name} (positive: {positive}): {chk:?}"
                );
            }
            let chk = reference.check(a.dot(&b).view()).unwrap();
            assert!(chk.worst_ratio < 0.25, "ndarray's dot: {chk:?}");
        }
    }

    #[test]
    fn matmul_check_catches_a_dropped_slab_or_term_at_k_4096() {
        let (m, k, n) = (24, 4096, 24);
        let (a, b) = operands(m, k, n, false, 7);
        let reference = MatmulReference::new(a.view(), b.view()).unwrap();
        // The old elementwise bound k·u·(|A||B|)ᵢⱼ, for the relation.
        let old = a
            .mapv(|x| f64::from(x).abs())
            .dot(&b.mapv(|x| f64::from(x).abs()))
            * (k as f64 * 2f64.powi(-24));
        let caught = |c: &Array2<f32>| -> (usize, usize) {
            let mut new_caught = 0;
            let mut old_caught = 0;
            for ((i, j), &x) in c.indexed_iter() {
                let one = ndarray::arr2(&[[x]]);
                let err = (f64::from(x) - reference.exact()[[i, j]]).abs();
                let sub = MatmulReference {
                    exact: ndarray::arr2(&[[reference.exact()[[i, j]]]]),
                    tolerance: ndarray::arr2(&[[reference.tolerance[[i, j]]]]),
                };
                new_caught += usize::from(!sub.check(one.view()).unwrap().passed());
                old_caught += usize::from(err > old[[i, j]]);
            }
            (new_caught, old_caught)
        };
        // One 8-wide k-slab (l in 2048..2056) dropped from every element.
        let slab = product_with(&a, &b, |l| !(2048..2056).contains(&l), blocked);
        assert!(!reference.check(slab.view()).unwrap().passed());
        let (new, old) = caught(&slab);
        let total = m * n;
        println!("slab dropped: caught in {new} of {total} elements (old bound: {old})");
        assert!(new * 100 >= total * 95, "slab caught in {new} of {total}");
        assert!(
            old * 100 <= total * 90,
            "the old bound caught it in {old} of {total}"
        );
        // One term (l = 1000) dropped from every element.
        let term = product_with(&a, &b, |l| l != 1000, blocked);
        assert!(!reference.check(term.view()).unwrap().passed());
        let (new, old) = caught(&term);
        println!("term dropped: caught in {new} of {total} elements (old bound: {old})");
        assert!(new > old, "term: new {new}, old {old} of {total}");
        assert!(new * 100 >= total * 80, "term caught in {new} of {total}");
        // A single element with a slab dropped fails the whole check.
        let mut one = product_with(&a, &b, |_| true, blocked);
        one[[5, 7]] = slab[[5, 7]];
        let chk = reference.check(one.view()).unwrap();
        assert!(!chk.passed() && chk.worst_at == (5, 7), "{chk:?}");
    }

    #[test]
    fn sgemm_tile_selection() {
        let pick = |m, k, n, sms, aligned| {
            let (t, s) = sgemm_choice(m, k, n, sms, aligned);
            (t.entry.name(), s)
        };
        // 4096³ and 4000³: 1024 tiles of 128², 8 per SM (64²: 32 per SM, no gain).
        assert_eq!(
            pick(4096, 4096, 4096, 132, true),
            ("matrix_mul_tiled_v4", 1)
        );
        assert_eq!(
            pick(4000, 4000, 4000, 132, true),
            ("matrix_mul_tiled_v4", 1)
        );
        assert_eq!(
            pick(2048, 2048, 2048, 132, true),
            ("matrix_mul_tiled_v4", 1)
        );
        // 1024³: 64 tiles of 128² for 132 SMs, 256 of 64² (2 per SM), no split.
        assert_eq!(
            pick(1024, 1024, 1024, 132, true),
            ("matrix_mul_tiled_64_v4", 1)
        );
        // On a GPU with 64 SMs, 1024³ fills them with 128² tiles.
        assert_eq!(pick(1024, 1024, 1024, 64, true), ("matrix_mul_tiled_v4", 1));
        // 1536³: 144 tiles of 128² (2 on 12 SMs: 32768 elements) against 576 of
        // 64² (5 per SM: 20480): 64². 1408³: 121 against 484, 16384 both: 128².
        assert_eq!(pick(1536, 64, 1536, 132, true).0, "matrix_mul_tiled_64_v4");
        assert_eq!(pick(1792, 64, 1792, 132, true).0, "matrix_mul_tiled_64_v4");
        assert_eq!(pick(1408, 64, 1408, 132, true).0, "matrix_mul_tiled_v4");
        assert_eq!(pick(1280, 64, 1280, 132, true).0, "matrix_mul_tiled_v4");
        // 3072³: 576 tiles of 128² (5 on the busiest SM: 81920 elements) against
        // 2304 of 64² (18: 73728, 10% fewer): 64². 4000³: 1024 against 3969,
        // 131072 against 126976 (3% fewer): 128².
        assert_eq!(pick(3072, 64, 3072, 132, true).0, "matrix_mul_tiled_64_v4");
        assert_eq!(pick(4000, 64, 4000, 132, true).0, "matrix_mul_tiled_v4");
        // The margin: 64² must beat 128² by more than 1/15.
        // 8 × 8 tiles of 128² on 16 SMs: 4 each (65536); 64²: 16 each (65536).
        assert_eq!(pick(1024, 64, 1024, 16, true).0, "matrix_mul_tiled_v4");
        // Any of k % 4, n % 4 or alignment off: 4-byte loads.
        assert_eq!(pick(4096, 4095, 4096, 132, true).0, "matrix_mul_tiled");
        assert_eq!(pick(4096, 4096, 4094, 132, true).0, "matrix_mul_tiled");
        assert_eq!(pick(4096, 4096, 4096, 132, false).0, "matrix_mul_tiled");
        assert_eq!(pick(1024, 1024, 1021, 132, true).0, "matrix_mul_tiled_64");
        // Split-k: at most one 64² tile per SM and k ≥ SPLIT_K_MIN.
        assert_eq!(pick(65, 4097, 3, 132, true), ("matrix_mul_tiled_64", 2));
        assert_eq!(
            pick(512, 4096, 512, 132, true),
            ("matrix_mul_tiled_64_v4", 2)
        );
        assert_eq!(
            pick(576, 1024, 576, 132, true),
            ("matrix_mul_tiled_64_v4", 2)
        );
        assert_eq!(pick(512, SPLIT_K_MIN, 512, 132, true).1, 2);
        assert_eq!(pick(512, SPLIT_K_MIN - 1, 512, 132, true).1, 1);
        // 12 × 11 = 132 tiles of 64²: split; 12 × 12 = 144: none.
        assert_eq!(
            pick(768, 4096, 704, 132, true),
            ("matrix_mul_tiled_64_v4", 2)
        );
        assert_eq!(
            pick(768, 4096, 768, 132, true),
            ("matrix_mul_tiled_64_v4", 1)
        );
        assert_eq!(pick(127, 333, 65, 132, true), ("matrix_mul_tiled_64", 1));
        // One tile: the small one (a quarter of the work on the busiest SM).
        assert_eq!(pick(1, 1, 1, 132, true), ("matrix_mul_tiled_64", 1));
        // A zero SM count (never reported) is treated as one.
        assert_eq!(pick(1, 1, 1, 0, true), ("matrix_mul_tiled_64", 1));
        assert_eq!(pick(256, 64, 256, 0, true), ("matrix_mul_tiled_v4", 1));
    }

    #[test]
    fn doubles_matrix_shapes() {
        assert_eq!(doubles_matrix_launch(5, 5).unwrap(), (1, 256));
        // 8192²: 2^24 vectors of 4, 1024 per block of 256 threads.
        assert_eq!(doubles_matrix_launch(8192, 8192).unwrap(), (1 << 14, 256));
        assert_eq!(doubles_matrix_launch(8191, 8193).unwrap(), (1 << 14, 256));
        assert!(doubles_matrix_launch(0, 5).is_err());
        assert!(doubles_matrix_launch(2_000_000, 1).is_err());
        assert!(doubles_matrix_launch(65_535 * 8, 1).is_ok());
        assert!(doubles_matrix_launch(usize::MAX, 2).is_err());
    }

    #[test]
    fn cpu_references() {
        let a = array![[1.0f32, 2.0], [3.0, 4.0]];
        let b = array![[5.0f32, 6.0], [7.0, 8.0]];
        assert_eq!(doubles_matrix_cpu(a.view()), array![[2.0, 4.0], [6.0, 8.0]]);
        let c = matmul_cpu(a.view(), b.view()).unwrap();
        assert_eq!(c, array![[19.0, 22.0], [43.0, 50.0]]);
        assert!(allclose(c.view(), c.view()).is_none());
        assert!(check_matmul(c.view(), a.view(), b.view()).unwrap().passed());
        let mut off = c.clone();
        off[[1, 0]] += 0.01;
        assert_eq!(allclose(off.view(), c.view()), Some((1, 0)));
        let chk = check_matmul(off.view(), a.view(), b.view()).unwrap();
        assert!(!chk.passed());
        assert_eq!(chk.worst_at, (1, 0));
        assert!(matmul_cpu(a.view(), b.t().slice(ndarray::s![..1, ..])).is_err());
    }
}
