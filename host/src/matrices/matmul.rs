//! K3 `doubles_matrix`, K4 `matrix_mul_naive`, K5 `matrix_mul_tiled`:
//! launchers over `ndarray` 2-D views, and their CPU references.
use cust::launch;
use cust::memory::{CopyDestination, DeviceBuffer, DeviceSlice};
use ndarray::{Array2, ArrayView2, ArrayViewMut2, Zip};

use cuda_kernels_gpu::matmul::{
    BLOCK_2D, TILED_BM, TILED_BN, TILED_MAX_OPERAND, TILED_SMEM_BYTES, TILED_THREADS,
    double_element,
};

use crate::Gpu;
use crate::error::{CudaResultExt, Error, Result};
use crate::launch::{
    VECTORIZED_BLOCK, VectorizedGrid, checked_elements, grid_exact, vectorized_grid,
};
use crate::timing::GpuTimer;

/// Which matrix-product kernel to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatmulKernel {
    /// K4 `matrix_mul_naive`: one thread per element of C, operands read from
    /// global memory.
    Naive,
    /// K5 `matrix_mul_tiled`: 128 × 128 tiles of C per block, k-tiles in
    /// shared memory, 8 × 8 register micro-tiles per thread.
    Tiled,
}

impl MatmulKernel {
    /// The PTX entry point.
    pub fn entry(self) -> &'static str {
        match self {
            MatmulKernel::Naive => "matrix_mul_naive",
            MatmulKernel::Tiled => "matrix_mul_tiled",
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
    /// `(gridDim.x, gridDim.y)`.
    pub grid: (u32, u32),
    /// `(blockDim.x, blockDim.y)`.
    pub block: (u32, u32),
    /// Dynamic shared memory in bytes.
    pub smem: u32,
}

/// Checks the shapes of `A (m × k) · B (k × n)` for `kernel` and returns its
/// launch shape: inner dimensions must match, no dimension may be 0, the
/// element and byte counts of A, B and C must fit in `usize`, the grid
/// must fit the hardware limits (65,535 blocks along y), and for the tiled
/// kernel A and B must have at most `TILED_MAX_OPERAND` (≈ 2^32) elements.
pub fn matmul_launch(
    kernel: MatmulKernel,
    a: (usize, usize),
    b: (usize, usize),
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
            grid: (
                grid_exact(name, n, BLOCK_2D, "x")?,
                grid_exact(name, m, BLOCK_2D, "y")?,
            ),
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
        MatmulKernel::Tiled => MatmulLaunch {
            m,
            k,
            n,
            grid: (
                grid_exact(name, n, TILED_BN as u32, "x")?,
                grid_exact(name, m, TILED_BM as u32, "y")?,
            ),
            block: (TILED_THREADS, 1),
            smem: TILED_SMEM_BYTES,
        },
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
    const K: &str = "doubles_matrix";
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

impl Gpu {
    /// K3: doubles every element of `a` in place on the GPU (any rows ×
    /// cols; a 1-D vectorized map over the elements). Exact.
    ///
    /// Pass `array.view_mut()` for an owned `Array2`. A view that is not in
    /// standard layout (transposed, strided) is copied to a contiguous
    /// buffer, doubled there and copied back into the view.
    ///
    /// Errors (no launch) on an empty matrix or one past the limits of
    /// [`doubles_matrix_launch`] (more than 65,535 × 8 rows).
    pub fn doubles_matrix_in_place(&self, mut a: ArrayViewMut2<f32>) -> Result<()> {
        const K: &str = "doubles_matrix";
        let (rows, cols) = a.dim();
        doubles_matrix_launch(rows, cols)?;
        self.bind()?;
        let mut d = match a.as_slice() {
            Some(s) => DeviceBuffer::from_slice(s),
            None => {
                let host = a.as_standard_layout();
                let s = host
                    .as_slice()
                    .ok_or_else(|| Error::invalid(K, "standard layout is not contiguous"))?;
                DeviceBuffer::from_slice(s)
            }
        }
        .during(K, "copy a to the device")?;
        self.doubles_matrix_on_device(&mut d, rows, cols)?;
        self.synchronize(K)?;
        match a.as_slice_mut() {
            Some(s) => d.copy_to(s).during(K, "copy a to the host")?,
            None => {
                let mut out = vec![0.0f32; rows * cols];
                d.copy_to(&mut out[..]).during(K, "copy a to the host")?;
                let out = ArrayView2::from_shape((rows, cols), &out[..])
                    .map_err(|e| Error::invalid(K, e.to_string()))?;
                a.assign(&out);
            }
        }
        Ok(())
    }

    /// Queues K3 on [`Gpu::stream`] over a row-major `rows × cols` matrix
    /// already on the device, without synchronizing (for pipelines and
    /// benchmarks). The shape and the buffer length are checked.
    pub fn doubles_matrix_on_device(
        &self,
        a: &mut DeviceSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        const K: &str = "doubles_matrix";
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
        let f = self.function(K)?;
        let stream = self.stream();
        // SAFETY: a holds rows * cols f32 (checked above, no overflow); the kernel's
        // grid-stride map covers exactly those elements with any 1-D grid.
        unsafe { launch!(f<<<grid, block, 0, stream>>>(a.as_device_ptr(), rows, cols)) }
            .during(K, "launch")
    }

    /// K3 on a copy: returns `2 * a`, leaving `a` alone.
    pub fn doubles_matrix(&self, a: ArrayView2<f32>) -> Result<Array2<f32>> {
        doubles_matrix_launch(a.nrows(), a.ncols())?;
        let mut out = a.to_owned();
        self.doubles_matrix_in_place(out.view_mut())?;
        Ok(out)
    }

    /// K4: `C = A · B` with the naive kernel (one thread per element of C).
    ///
    /// Errors (no launch) when the inner dimensions differ, a matrix is
    /// empty, a size overflows or the grid would exceed the hardware limits.
    pub fn matrix_mul_naive(&self, a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Array2<f32>> {
        self.matmul_timed(MatmulKernel::Naive, a, b).map(|(c, _)| c)
    }

    /// K5: `C = A · B` with the tiled, register-blocked kernel (the fast
    /// path). Same contract as [`Gpu::matrix_mul_naive`].
    pub fn matrix_mul_tiled(&self, a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Array2<f32>> {
        self.matmul_timed(MatmulKernel::Tiled, a, b).map(|(c, _)| c)
    }

    /// `C = A · B` with the chosen kernel, with CUDA-event times of the
    /// kernel alone and with the transfers.
    pub fn matmul_timed(
        &self,
        kernel: MatmulKernel,
        a: ArrayView2<f32>,
        b: ArrayView2<f32>,
    ) -> Result<(Array2<f32>, MatmulTiming)> {
        let name = kernel.entry();
        let shape = matmul_launch(kernel, a.dim(), b.dim())?;
        self.bind()?;
        let stream = self.stream();
        let (a, b) = (a.as_standard_layout(), b.as_standard_layout());
        let (a, b) = match (a.as_slice(), b.as_slice()) {
            (Some(a), Some(b)) => (a, b),
            _ => return Err(Error::invalid(name, "standard layout is not contiguous")),
        };
        let total = GpuTimer::new()?;
        let timer = GpuTimer::new()?;
        total.start(stream)?;
        let da = DeviceBuffer::from_slice(a).during(name, "copy A to the device")?;
        let db = DeviceBuffer::from_slice(b).during(name, "copy B to the device")?;
        // SAFETY: every element of C is written by the kernel before it is read.
        let mut dc = unsafe { DeviceBuffer::<f32>::uninitialized(shape.m * shape.n) }
            .during(name, "allocate C")?;
        timer.start(stream)?;
        self.matmul_on_device(kernel, &da, &db, &mut dc, shape.m, shape.k, shape.n)?;
        timer.stop(stream)?;
        self.synchronize(name)?;
        let mut c = vec![0.0f32; shape.m * shape.n];
        dc.copy_to(&mut c[..]).during(name, "copy C to the host")?;
        total.stop(stream)?;
        let timing = MatmulTiming {
            kernel_ms: timer.elapsed_ms()?,
            with_transfers_ms: total.elapsed_ms()?,
        };
        let c = Array2::from_shape_vec((shape.m, shape.n), c)
            .map_err(|e| Error::invalid(name, e.to_string()))?;
        Ok((c, timing))
    }

    /// Queues `C = A · B` on [`Gpu::stream`] over row-major buffers already
    /// on the device (`a`: m × k, `b`: k × n, `c`: m × n), without copies or
    /// synchronization (for pipelines and benchmarks). Shapes and buffer
    /// lengths are checked; the caller synchronizes before reading `c`.
    #[allow(clippy::too_many_arguments)]
    pub fn matmul_on_device(
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
        let shape = matmul_launch(kernel, (m, k), (k, n))?;
        for (what, len, want) in [
            ("A", a.len(), m * k),
            ("B", b.len(), k * n),
            ("C", c.len(), m * n),
        ] {
            if len != want {
                return Err(Error::invalid(
                    name,
                    format!("buffer {what} holds {len} elements, the shape needs {want}"),
                ));
            }
        }
        self.bind()?;
        let f = self.function(name)?;
        let stream = self.stream();
        let (grid, block, smem) = (shape.grid, shape.block, shape.smem);
        // SAFETY: a, b, c hold m·k, k·n, m·n f32 (checked above, no overflow); `c` is
        // borrowed mutably so it aliases neither input; grid, block and shared memory are
        // the shape the kernel's Safety section asks for (matmul_launch).
        unsafe {
            launch!(f<<<grid, block, smem, stream>>>(
                a.as_device_ptr(), b.as_device_ptr(), c.as_device_ptr(), m, k, n))
        }
        .during(name, "launch")
    }
}

/// CPU reference for K3: `2 * a`, element by element with the kernel's own
/// per-element function.
pub fn doubles_matrix_cpu(a: ArrayView2<f32>) -> Array2<f32> {
    a.mapv(double_element)
}

/// CPU reference for K4/K5 in f32: ndarray's `dot` (what the seed compares
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

/// Compares an f32 product `got = A·B` with the f64 reference, element by
/// element, with the tolerance
/// `1e-8 + 1e-5·|y| + k·2⁻²⁴·(|A|·|B|)ᵢⱼ`:
/// NumPy's `allclose` (the seed's check) loosened by the classic bound on
/// the rounding error of an f32 dot product of length `k` computed in any
/// order (Higham, γ_k ≈ k·u with u = 2⁻²⁴). The extra term matters for
/// large `k` and for elements that nearly cancel, where even two correct f32
/// results differ by more than `1e-5` relative.
pub fn check_matmul(
    got: ArrayView2<f32>,
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
) -> Result<MatmulCheck> {
    let exact = matmul_cpu_f64(a, b)?;
    let bound = a
        .mapv(|x| (x as f64).abs())
        .dot(&b.mapv(|x| (x as f64).abs()));
    if got.dim() != exact.dim() {
        return Err(Error::invalid(
            "matmul check",
            format!("result is {:?}, expected {:?}", got.dim(), exact.dim()),
        ));
    }
    let gamma = a.ncols() as f64 * f64::from(f32::EPSILON) / 2.0;
    let mut check = MatmulCheck {
        max_abs_error: 0.0,
        worst_ratio: 0.0,
        worst_at: (0, 0),
    };
    Zip::indexed(&got)
        .and(&exact)
        .and(&bound)
        .for_each(|(i, j), &x, &y, &s| {
            let err = (x as f64 - y).abs();
            let tol = 1e-8 + 1e-5 * y.abs() + gamma * s;
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
        let l = matmul_launch(MatmulKernel::Tiled, (129, 7), (7, 300)).unwrap();
        assert_eq!(
            (l.grid, l.block, l.smem),
            ((3, 2), (256, 1), TILED_SMEM_BYTES)
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
