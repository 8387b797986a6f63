//! The GEMM family: `C = alpha · op(A) · op(B) + beta · C` with f32
//! accumulation, for bf16 and f16 inputs (output f32 or the input type) and
//! tf32 from f32 inputs, over strided batches, on the tensor cores where the
//! device has them ([`GemmPath`]); the ndarray API ([`Gpu::gemm`](crate::matrices::gemm::GemmExt::gemm)), the
//! on-device API ([`Gpu::gemm_on_device`](crate::matrices::gemm::GemmExt::gemm_on_device)), and the CPU reference in f64
//! with its proven error bound ([`gemm_check`]).
//!
//! Layouts: an operand is N (row-major as the product reads it) or T (stored
//! transposed); the ndarray API takes a transposed view (`a.t()` of a
//! row-major array) as T without a copy of its layout, so NN, NT, TN and TT
//! are all one call.
use cuda_kernels_device::float16 as dev;
use cuda_kernels_gpu::gemm::{
    BLOCK_M, BLOCK_N, GEMM_MMA_BF16_BF16, GEMM_MMA_BF16_F32, GEMM_MMA_F16_F16, GEMM_MMA_F16_F32,
    GEMM_MMA_TF32_F32, GEMM_SIMT_BF16_BF16, GEMM_SIMT_BF16_F32, GEMM_SIMT_F16_F16,
    GEMM_SIMT_F16_F32, GEMM_SIMT_F32_F32, GemmParams, MMA_SMEM_BYTES, MMA_THREADS, SIMT_BLOCK,
    TRANS_A, TRANS_B,
};
use cust::memory::DeviceCopy;
use cust::memory::bytemuck::Pod;
use ndarray::{Array2, ArrayView2, ArrayViewMut2};

use crate::Gpu;
use crate::error::{Error, Result};
use crate::gemm_wgmma::{WgmmaGemmExt, WgmmaInput, wgmma_kernel};
use crate::kernel::Kernel;
use crate::launch::{LaunchConfig, MAX_GRID_YZ};
use crate::memory::DeviceSlice;
use cuda_kernels_gpu::gemm_wgmma::{
    GEMM_WGMMA_BF16_BF16_NN, GEMM_WGMMA_BF16_BF16_NT, GEMM_WGMMA_BF16_BF16_TN,
    GEMM_WGMMA_BF16_BF16_TT, GEMM_WGMMA_BF16_F32_NN, GEMM_WGMMA_BF16_F32_NT,
    GEMM_WGMMA_BF16_F32_TN, GEMM_WGMMA_BF16_F32_TT, GEMM_WGMMA_F16_F16_NN, GEMM_WGMMA_F16_F16_NT,
    GEMM_WGMMA_F16_F16_TN, GEMM_WGMMA_F16_F16_TT, GEMM_WGMMA_F16_F32_NN, GEMM_WGMMA_F16_F32_NT,
    GEMM_WGMMA_F16_F32_TN, GEMM_WGMMA_F16_F32_TT, GEMM_WGMMA_TF32_F32_NT, WgmmaParams,
};

/// The environment variable that forces a [`GemmPath`]: `wgmma`,
/// `mma_sync` or `cuda_core`.
pub const GEMM_PATH_ENV: &str = "CUDA_KERNELS_GEMM_PATH";

/// Which kernel computes a GEMM. Chosen by device ([`Gpu::gemm_path`](crate::matrices::gemm::GemmExt::gemm_path)):
/// wgmma on sm_90, mma.sync on sm_80 and later, the CUDA cores elsewhere
/// and for operands that are not 16-byte aligned; [`GEMM_PATH_ENV`] forces
/// one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GemmPath {
    /// Hopper's `wgmma.mma_async` (sm_90a).
    Wgmma,
    /// `mma.sync` on the tensor cores (sm_80 and later).
    MmaSync,
    /// f32 fmas on the CUDA cores (any GPU).
    CudaCore,
}

impl GemmPath {
    /// Its name, as [`GEMM_PATH_ENV`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Wgmma => "wgmma",
            Self::MmaSync => "mma_sync",
            Self::CudaCore => "cuda_core",
        }
    }

    /// The path [`GEMM_PATH_ENV`] forces, if set (an unknown name is an
    /// error naming the kernel).
    pub fn forced(kernel: &'static str) -> Result<Option<Self>> {
        let Some(value) = std::env::var_os(GEMM_PATH_ENV) else {
            return Ok(None);
        };
        let value = value.to_string_lossy();
        [Self::Wgmma, Self::MmaSync, Self::CudaCore]
            .into_iter()
            .find(|p| p.name() == value)
            .map(Some)
            .ok_or_else(|| {
                Error::invalid(
                    kernel,
                    format!("{GEMM_PATH_ENV}={value}: expected wgmma, mma_sync or cuda_core"),
                )
            })
    }
}

/// How an operand is stored: as the product reads it (N, row-major) or
/// transposed (T).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Row-major `rows × cols` of `op(X)`.
    N,
    /// `op(X)` stored transposed: row-major `cols × rows`.
    T,
}

/// The shape of a (batched) GEMM over device buffers: `op(A)` is `m × k`,
/// `op(B)` is `k × n`, C is `m × n` with leading dimension `ldc`; batch `i`
/// starts `i · stride_*` elements into each buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GemmShape {
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// The inner dimension.
    pub k: usize,
    /// How A is stored.
    pub op_a: Op,
    /// How B is stored.
    pub op_b: Op,
    /// Elements between rows of A as stored.
    pub lda: usize,
    /// Elements between rows of B as stored.
    pub ldb: usize,
    /// Elements between rows of C.
    pub ldc: usize,
    /// Products in the batch.
    pub batches: usize,
    /// Elements between the batch's A matrices.
    pub stride_a: usize,
    /// Elements between the batch's B matrices.
    pub stride_b: usize,
    /// Elements between the batch's C matrices.
    pub stride_c: usize,
}

impl GemmShape {
    /// One dense product `m × k · k × n`, all three row-major (NN).
    pub fn dense(m: usize, n: usize, k: usize) -> Self {
        Self::with_ops(m, n, k, Op::N, Op::N)
    }

    /// One dense product with these storage orders (tight leading
    /// dimensions).
    pub fn with_ops(m: usize, n: usize, k: usize, op_a: Op, op_b: Op) -> Self {
        let lda = if op_a == Op::N { k } else { m };
        let ldb = if op_b == Op::N { n } else { k };
        Self {
            m,
            n,
            k,
            op_a,
            op_b,
            lda,
            ldb,
            ldc: n,
            batches: 1,
            stride_a: m * k,
            stride_b: k * n,
            stride_c: m * n,
        }
    }

    /// Rows and columns of A as stored.
    pub fn a_stored(&self) -> (usize, usize) {
        match self.op_a {
            Op::N => (self.m, self.k),
            Op::T => (self.k, self.m),
        }
    }

    /// Rows and columns of B as stored.
    pub fn b_stored(&self) -> (usize, usize) {
        match self.op_b {
            Op::N => (self.k, self.n),
            Op::T => (self.n, self.k),
        }
    }

    /// The elements each buffer must hold: `(A, B, C)`.
    pub fn extents(&self) -> Option<(usize, usize, usize)> {
        let extent = |(rows, cols): (usize, usize), ld: usize, stride: usize| {
            let one = (rows - 1).checked_mul(ld)?.checked_add(cols)?;
            stride.checked_mul(self.batches - 1)?.checked_add(one)
        };
        Some((
            extent(self.a_stored(), self.lda, self.stride_a)?,
            extent(self.b_stored(), self.ldb, self.stride_b)?,
            extent((self.m, self.n), self.ldc, self.stride_c)?,
        ))
    }

    /// Checks the shape for `kernel` and buffers of `lens` elements: no zero
    /// dimension, leading dimensions at least a row, every dimension and
    /// leading dimension below 2^31 (the kernels' 32-bit index limit), the
    /// buffers long enough, and the grid within the hardware's limits.
    pub fn check(&self, kernel: &'static str, lens: (usize, usize, usize)) -> Result<()> {
        let bad = |reason: String| Err(Error::invalid(kernel, reason));
        if self.m == 0 || self.n == 0 || self.k == 0 || self.batches == 0 {
            return bad(format!(
                "a zero dimension: m = {}, n = {}, k = {}, batches = {}",
                self.m, self.n, self.k, self.batches
            ));
        }
        let (a_cols, b_cols) = (self.a_stored().1, self.b_stored().1);
        for (name, ld, row) in [
            ("lda", self.lda, a_cols),
            ("ldb", self.ldb, b_cols),
            ("ldc", self.ldc, self.n),
        ] {
            if ld < row {
                return bad(format!("{name} = {ld} is shorter than a row of {row}"));
            }
        }
        const LIMIT: usize = i32::MAX as usize;
        for (name, v) in [
            ("m", self.m),
            ("n", self.n),
            ("k", self.k),
            ("lda", self.lda),
            ("ldb", self.ldb),
            ("ldc", self.ldc),
        ] {
            if v > LIMIT {
                return bad(format!("{name} = {v} is past the 32-bit limit {LIMIT}"));
            }
        }
        let limit = MAX_GRID_YZ as usize;
        if self.batches > limit || self.m.div_ceil(BLOCK_M) > limit {
            return bad(format!(
                "{} batches of {} rows are past the grid's limits ({limit} batches, {limit} blocks of {BLOCK_M} rows)",
                self.batches, self.m
            ));
        }
        let Some((ea, eb, ec)) = self.extents() else {
            return bad("the buffers' extents overflow usize".into());
        };
        for (name, need, len) in [("A", ea, lens.0), ("B", eb, lens.1), ("C", ec, lens.2)] {
            if len < need {
                return bad(format!(
                    "{name} holds {len} elements, the shape reaches {need}"
                ));
            }
        }
        Ok(())
    }

    fn flags(&self) -> u32 {
        (if self.op_a == Op::T { TRANS_A } else { 0 })
            | (if self.op_b == Op::T { TRANS_B } else { 0 })
    }
}

/// A GEMM input element on the host (`half::bf16`, `half::f16`, or f32 for
/// tf32), with its device twin.
pub trait GemmInput: Copy + 'static {
    /// The device crate's type of the same bits.
    type Dev: DeviceCopy + Pod + Copy + 'static;
    /// The name in kernel names and reports (`bf16`, `f16`, `tf32`).
    const NAME: &'static str;
    /// Significand bits the product sees (8, 11, and 11 for tf32).
    const PRECISION: i32;
    /// Its element type for the wgmma kernel.
    const WGMMA: WgmmaInput;
    /// The device twin.
    fn to_dev(self) -> Self::Dev;
    /// The exact value.
    fn to_f64(self) -> f64;
}

/// An output element for inputs `I`: f32, or the input type itself. Mixed
/// element types (bf16 inputs, f16 output) have no implementation and do
/// not compile.
pub trait GemmOutput<I: GemmInput>: Copy + 'static {
    /// The device crate's type of the same bits.
    type Dev: DeviceCopy + Pod + Copy + 'static;
    /// Its name (`f32`, `bf16`, `f16`).
    const NAME: &'static str;
    /// Significand bits of the output (24 for f32).
    const PRECISION: i32;
    /// The CUDA-core kernel.
    const SIMT: Kernel<GemmParams<I::Dev, Self::Dev>>;
    /// The mma.sync kernel.
    const MMA: Kernel<GemmParams<I::Dev, Self::Dev>>;
    /// The wgmma kernels (sm_90a) by layout, NN, NT, TN, TT
    /// ([`layout_index`](crate::gemm_wgmma::layout_index)); `None` where
    /// wgmma cannot read the layout (tf32 is K-major only: NT).
    const WGMMA: [Option<Kernel<WgmmaParams<Self::Dev>>>; 4];
    /// The device twin.
    fn to_dev(self) -> Self::Dev;
    /// From the device twin.
    fn from_dev(d: Self::Dev) -> Self;
    /// The exact value.
    fn to_f64(self) -> f64;
}

macro_rules! gemm_types {
    ($($host:ty => $dev:ty, $name:literal, $p:literal, $wgmma:ident, $to_dev:expr, $to_f64:expr;)*) => {$(
        impl GemmInput for $host {
            type Dev = $dev;
            const NAME: &'static str = $name;
            const PRECISION: i32 = $p;
            const WGMMA: WgmmaInput = WgmmaInput::$wgmma;
            fn to_dev(self) -> $dev {
                $to_dev(self)
            }
            fn to_f64(self) -> f64 {
                $to_f64(self)
            }
        }
    )*};
}
gemm_types! {
    half::bf16 => dev::bf16, "bf16", 8, Bf16, dev::bf16::from, |x: half::bf16| x.to_f64();
    half::f16 => dev::f16, "f16", 11, F16, dev::f16::from, |x: half::f16| x.to_f64();
    f32 => f32, "tf32", 11, Tf32, |x| x, |x: f32| x as f64;
}

macro_rules! gemm_outputs {
    ($($in:ty => $out:ty, $dev:ty, $name:literal, $p:literal, $simt:ident, $mma:ident, $wgmma:expr, $from:expr;)*) => {$(
        impl GemmOutput<$in> for $out {
            type Dev = $dev;
            const NAME: &'static str = $name;
            const PRECISION: i32 = $p;
            const SIMT: Kernel<GemmParams<<$in as GemmInput>::Dev, $dev>> = $simt;
            const MMA: Kernel<GemmParams<<$in as GemmInput>::Dev, $dev>> = $mma;
            const WGMMA: [Option<Kernel<WgmmaParams<$dev>>>; 4] = $wgmma;
            fn to_dev(self) -> $dev {
                <$dev>::from(self)
            }
            fn from_dev(d: $dev) -> Self {
                $from(d)
            }
            fn to_f64(self) -> f64 {
                f64::from(self)
            }
        }
    )*};
}
gemm_outputs! {
    half::bf16 => f32, f32, "f32", 24, GEMM_SIMT_BF16_F32, GEMM_MMA_BF16_F32,
        [Some(GEMM_WGMMA_BF16_F32_NN), Some(GEMM_WGMMA_BF16_F32_NT), Some(GEMM_WGMMA_BF16_F32_TN), Some(GEMM_WGMMA_BF16_F32_TT)],
        |d| d;
    half::bf16 => half::bf16, dev::bf16, "bf16", 8, GEMM_SIMT_BF16_BF16, GEMM_MMA_BF16_BF16,
        [Some(GEMM_WGMMA_BF16_BF16_NN), Some(GEMM_WGMMA_BF16_BF16_NT), Some(GEMM_WGMMA_BF16_BF16_TN), Some(GEMM_WGMMA_BF16_BF16_TT)],
        half::bf16::from;
    half::f16 => f32, f32, "f32", 24, GEMM_SIMT_F16_F32, GEMM_MMA_F16_F32,
        [Some(GEMM_WGMMA_F16_F32_NN), Some(GEMM_WGMMA_F16_F32_NT), Some(GEMM_WGMMA_F16_F32_TN), Some(GEMM_WGMMA_F16_F32_TT)],
        |d| d;
    half::f16 => half::f16, dev::f16, "f16", 11, GEMM_SIMT_F16_F16, GEMM_MMA_F16_F16,
        [Some(GEMM_WGMMA_F16_F16_NN), Some(GEMM_WGMMA_F16_F16_NT), Some(GEMM_WGMMA_F16_F16_TN), Some(GEMM_WGMMA_F16_F16_TT)],
        half::f16::from;
    f32 => f32, f32, "f32", 24, GEMM_SIMT_F32_F32, GEMM_MMA_TF32_F32,
        [None, Some(GEMM_WGMMA_TF32_F32_NT), None, None],
        |d| d;
}

/// A host operand as the kernels read it: its elements as stored, and how.
struct Operand<D> {
    data: Vec<D>,
    op: Op,
    ld: usize,
}

/// `x` (the operand `op(X)`, `rows × cols`) as stored: a transposed view of
/// a row-major array (column-major) is T without reordering, anything else
/// is copied row-major as N.
fn operand<I: GemmInput>(x: ArrayView2<I>) -> Operand<I::Dev> {
    let (rows, cols) = x.dim();
    if !x.is_standard_layout() && x.t().is_standard_layout() {
        Operand {
            data: x.t().iter().map(|v| v.to_dev()).collect(),
            op: Op::T,
            ld: rows.max(1),
        }
    } else {
        Operand {
            data: x.iter().map(|v| v.to_dev()).collect(),
            op: Op::N,
            ld: cols.max(1),
        }
    }
}

/// The GEMM launchers on a [`Gpu`].
pub trait GemmExt {
    /// The path a GEMM of `shape` takes on this device: the forced one
    /// ([`GEMM_PATH_ENV`]) if set, else wgmma on sm_90 when the wgmma kernel
    /// fits it ([`Gpu::wgmma_fits`](crate::matrices::gemm::GemmExt::wgmma_fits)), mma.sync on sm_80 and later (and on
    /// the simulator), the CUDA cores elsewhere or when `aligned` is false
    /// (an operand's start or leading dimension not a multiple of 16 bytes).
    fn gemm_path<I: GemmInput, O: GemmOutput<I>>(
        &self,
        shape: &GemmShape,
        aligned: bool,
    ) -> Result<GemmPath>;

    /// Whether the wgmma kernel (`gemm_wgmma_*`, sm_90a) computes a GEMM of
    /// `shape`, or why not: a GPU (not the simulator, which does not model
    /// wgmma and TMA) whose loaded image has it (the sm_90a cubin), a layout
    /// wgmma reads (every layout for 16-bit inputs, f32 or 16-bit output;
    /// NT alone for tf32, which wgmma reads K-major only), operands 16-byte
    /// aligned (TMA's rule).
    fn wgmma_fits<I: GemmInput, O: GemmOutput<I>>(
        &self,
        shape: &GemmShape,
        aligned: bool,
    ) -> std::result::Result<(), String>;

    /// `C = alpha · op(A) · op(B) + beta · C` over device buffers, queued on
    /// [`Gpu::stream`]; the path taken is returned. Every size, leading
    /// dimension, batch stride and buffer length is checked first
    /// ([`GemmShape::check`]). Operands whose start or leading dimension is
    /// not a multiple of 16 bytes take the CUDA-core path.
    /// Safe under the [`_on_device` rule](Gpu#launchers-that-leave-work-in-flight-the-_on_device-rule).
    #[allow(clippy::too_many_arguments)]
    fn gemm_on_device<I: GemmInput, O: GemmOutput<I>>(
        &self,
        shape: &GemmShape,
        alpha: f32,
        a: &DeviceSlice<I::Dev>,
        b: &DeviceSlice<I::Dev>,
        beta: f32,
        c: &mut DeviceSlice<O::Dev>,
    ) -> Result<GemmPath>;

    /// `C = alpha · A · B + beta · C` on the device, in place in `c`; the path
    /// taken is returned. `a` (`m × k`) and `b` (`k × n`) may be transposed
    /// views (`x.t()` of a row-major array: read as stored, T) or any other
    /// layout (copied row-major first). Errors (no launch) when the inner
    /// dimensions differ, C's shape is not `m × n`, a dimension is zero or
    /// past the 32-bit limits.
    fn gemm<I: GemmInput, O: GemmOutput<I>>(
        &self,
        alpha: f32,
        a: ArrayView2<I>,
        b: ArrayView2<I>,
        beta: f32,
        c: ArrayViewMut2<O>,
    ) -> Result<GemmPath>;

    /// `A · B` as a new `m × n` array (alpha 1, beta 0), and the path taken.
    fn gemm_product<I: GemmInput, O: GemmOutput<I> + Default>(
        &self,
        a: ArrayView2<I>,
        b: ArrayView2<I>,
    ) -> Result<(Array2<O>, GemmPath)>;
}

impl GemmExt for Gpu {
    fn gemm_path<I: GemmInput, O: GemmOutput<I>>(
        &self,
        shape: &GemmShape,
        aligned: bool,
    ) -> Result<GemmPath> {
        let name = O::MMA.name();
        let wgmma = self.wgmma_fits::<I, O>(shape, aligned);
        if let Some(forced) = GemmPath::forced(name)? {
            return match forced {
                GemmPath::MmaSync if !aligned => Err(Error::invalid(
                    name,
                    format!("{GEMM_PATH_ENV}=mma_sync with operands not 16-byte aligned"),
                )),
                GemmPath::Wgmma => wgmma
                    .map(|()| GemmPath::Wgmma)
                    .map_err(|why| Error::invalid(name, format!("{GEMM_PATH_ENV}=wgmma: {why}"))),
                GemmPath::MmaSync if !self.has_kernel(O::MMA.name()) => Err(Error::invalid(
                    name,
                    format!(
                        "{GEMM_PATH_ENV}=mma_sync: the loaded image ({}) has no {name} (sm_80 and later builds only)",
                        self.image()
                    ),
                )),
                path => Ok(path),
            };
        }
        Ok(if wgmma.is_ok() {
            GemmPath::Wgmma
        } else if aligned && self.has_kernel(O::MMA.name()) {
            GemmPath::MmaSync
        } else {
            GemmPath::CudaCore
        })
    }

    fn wgmma_fits<I: GemmInput, O: GemmOutput<I>>(
        &self,
        shape: &GemmShape,
        aligned: bool,
    ) -> std::result::Result<(), String> {
        let kernel = wgmma_kernel::<I, O>(shape)?.name();
        if self.is_simulated() {
            Err("the simulator does not model wgmma or TMA".into())
        } else if !aligned {
            Err("operands not 16-byte aligned (TMA's rule)".into())
        } else if !self.has_kernel(kernel) {
            Err(format!(
                "the loaded image ({}) has no {kernel} (the sm_90a cubin only)",
                self.image()
            ))
        } else {
            Ok(())
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn gemm_on_device<I: GemmInput, O: GemmOutput<I>>(
        &self,
        shape: &GemmShape,
        alpha: f32,
        a: &DeviceSlice<I::Dev>,
        b: &DeviceSlice<I::Dev>,
        beta: f32,
        c: &mut DeviceSlice<O::Dev>,
    ) -> Result<GemmPath> {
        let name = O::MMA.name();
        shape.check(name, (a.len(), b.len(), c.len()))?;
        self.check_device(name, "a", a)?;
        self.check_device(name, "b", b)?;
        self.check_device(name, "c", c)?;
        let size = size_of::<I::Dev>();
        let aligned = [a.as_device_ptr().as_raw(), b.as_device_ptr().as_raw()]
            .iter()
            .all(|p| p.is_multiple_of(16))
            && [shape.lda, shape.ldb, shape.stride_a, shape.stride_b]
                .iter()
                .all(|ld| ld.checked_mul(size).is_some_and(|b| b.is_multiple_of(16)));
        let path = self.gemm_path::<I, O>(shape, aligned)?;
        if path == GemmPath::Wgmma {
            self.gemm_wgmma_plan::<I, O>(shape, alpha, a, b, beta, c)?
                .launch()?;
            return Ok(path);
        }
        let (kernel, cfg) = match path {
            GemmPath::MmaSync => (
                O::MMA,
                LaunchConfig {
                    grid: (
                        shape.n.div_ceil(BLOCK_N) as u32,
                        shape.m.div_ceil(BLOCK_M) as u32,
                        shape.batches as u32,
                    ),
                    block: (MMA_THREADS, 1, 1),
                    shared_mem_bytes: MMA_SMEM_BYTES,
                },
            ),
            _ => {
                let side = SIMT_BLOCK as usize;
                if shape.m.div_ceil(side) > MAX_GRID_YZ as usize {
                    return Err(Error::invalid(
                        O::SIMT.name(),
                        format!(
                            "m = {} is past the CUDA-core grid's {MAX_GRID_YZ} blocks of {side}",
                            shape.m
                        ),
                    ));
                }
                (
                    O::SIMT,
                    LaunchConfig {
                        grid: (
                            shape.n.div_ceil(side) as u32,
                            shape.m.div_ceil(side) as u32,
                            shape.batches as u32,
                        ),
                        block: (SIMT_BLOCK, SIMT_BLOCK, 1),
                        shared_mem_bytes: 0,
                    },
                )
            }
        };
        self.bind()?;
        let stream = self.stream();
        let s = shape;
        // SAFETY: the shape was checked against the buffers' lengths (every
        // element the kernel reaches is inside them, indices below 2^31); `c` is
        // borrowed mutably so it aliases neither input; the mma.sync path only
        // with 16-byte aligned operands and leading dimensions; the grid, block
        // and shared memory are what the entry's Safety section asks for.
        unsafe {
            self.launch(
                kernel,
                cfg,
                stream,
                (
                    a,
                    b,
                    c,
                    s.m as u32,
                    s.n as u32,
                    s.k as u32,
                    s.lda as u32,
                    s.ldb as u32,
                    s.ldc as u32,
                    s.stride_a as u64,
                    s.stride_b as u64,
                    s.stride_c as u64,
                    alpha,
                    beta,
                    s.flags(),
                ),
            )
        }?;
        Ok(path)
    }

    fn gemm<I: GemmInput, O: GemmOutput<I>>(
        &self,
        alpha: f32,
        a: ArrayView2<I>,
        b: ArrayView2<I>,
        beta: f32,
        mut c: ArrayViewMut2<O>,
    ) -> Result<GemmPath> {
        let name = O::MMA.name();
        let ((m, ka), (kb, n)) = (a.dim(), b.dim());
        if ka != kb {
            return Err(Error::invalid(
                name,
                format!("inner dimensions differ: A is {m} × {ka}, B is {kb} × {n}"),
            ));
        }
        if c.dim() != (m, n) {
            return Err(Error::invalid(
                name,
                format!("C is {:?}, the product is {m} × {n}", c.dim()),
            ));
        }
        let (oa, ob) = (operand(a), operand(b));
        let mut shape = GemmShape::with_ops(m, n, ka, oa.op, ob.op);
        (shape.lda, shape.ldb) = (oa.ld, ob.ld);
        shape.check(name, (oa.data.len(), ob.data.len(), m * n))?;
        self.bind()?;
        let da = self.to_device(&oa.data)?;
        let db = self.to_device(&ob.data)?;
        let host_c: Vec<O::Dev> = c.iter().map(|v| v.to_dev()).collect();
        let mut dc = self.to_device(&host_c)?;
        let path = self.gemm_on_device::<I, O>(&shape, alpha, &da, &db, beta, &mut dc)?;
        self.synchronize(name)?;
        let mut out = host_c;
        dc.copy_to(&mut out[..])?;
        for (dst, src) in c.iter_mut().zip(out) {
            *dst = O::from_dev(src);
        }
        Ok(path)
    }

    fn gemm_product<I: GemmInput, O: GemmOutput<I> + Default>(
        &self,
        a: ArrayView2<I>,
        b: ArrayView2<I>,
    ) -> Result<(Array2<O>, GemmPath)> {
        let mut c = Array2::from_elem((a.nrows(), b.ncols()), O::default());
        let path = self.gemm(1.0, a, b, 0.0, c.view_mut())?;
        Ok((c, path))
    }
}

/// The steps the launchers above share.
trait GemmExtSteps {
    /// Whether the loaded module has the entry point `name` (the simulator
    /// has every kernel).
    fn has_kernel(&self, name: &str) -> bool;
}

impl GemmExtSteps for Gpu {
    fn has_kernel(&self, name: &str) -> bool {
        self.is_simulated() || self.function(name).is_ok()
    }
}

/// The exact `alpha · A · B + beta · C` in f64, and for each element the
/// bound its f32-accumulated, rounded result must stay within: with
/// `u = 2^-23` (one rounding of an f32 sum, the tensor cores' truncation
/// included), inputs rounded by `e_in` (tf32: `2^-11` each, 16-bit: exact),
/// the sum of `k` exact-in-f32 products in any order is within
/// `γ_k · Σ|a·b|` (Higham, Theorem 4.4, `γ_k = k·u / (1 − k·u)`); the
/// epilogue adds one rounding of `alpha · acc` and of the fma with
/// `beta · c`, and the output its own rounding (`2^-p_out` of the result).
#[derive(Debug, Clone)]
pub struct GemmReference {
    /// The exact result.
    pub exact: Array2<f64>,
    /// The bound per element.
    pub bound: Array2<f64>,
}

/// The CPU reference of [`Gpu::gemm`](crate::matrices::gemm::GemmExt::gemm) from the formula, with its error
/// bound (see [`GemmReference`]).
pub fn gemm_reference<I: GemmInput, O: GemmOutput<I>>(
    alpha: f32,
    a: ArrayView2<I>,
    b: ArrayView2<I>,
    beta: f32,
    c: ArrayView2<O>,
) -> GemmReference {
    let ((m, k), n) = (a.dim(), b.ncols());
    let (alpha, beta) = (alpha as f64, beta as f64);
    let mut exact = Array2::zeros((m, n));
    let mut bound = Array2::zeros((m, n));
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut abs) = (0.0, 0.0);
            for kk in 0..k {
                let p = a[(i, kk)].to_f64() * b[(kk, j)].to_f64();
                s += p;
                abs += p.abs();
            }
            let cv = if beta == 0.0 {
                0.0
            } else {
                beta * c[(i, j)].to_f64()
            };
            exact[(i, j)] = alpha * s + cv;
            bound[(i, j)] = gemm_element_bound::<I, O>(k, alpha, s, abs, cv);
        }
    }
    GemmReference { exact, bound }
}

/// The bound of [`GemmReference`] for one element: `s = Σ a·b` and
/// `abs = Σ |a·b|` over `k` products, `cv = beta · c` (the model is
/// [`GemmReference`]'s).
pub fn gemm_element_bound<I: GemmInput, O: GemmOutput<I>>(
    k: usize,
    alpha: f64,
    s: f64,
    abs: f64,
    cv: f64,
) -> f64 {
    let u = 2f64.powi(-23);
    let gamma = (k as f64 * u) / (1.0 - k as f64 * u);
    let e_in = if I::NAME == "tf32" {
        2.0 * 2f64.powi(-10) + 2f64.powi(-20)
    } else {
        0.0
    };
    let u_out = 2f64.powi(-O::PRECISION);
    let r = alpha * s + cv;
    let acc_err = (gamma + e_in * (1.0 + gamma)) * abs * alpha.abs();
    let epi = 2.0 * u * (alpha * s).abs() + 2.0 * u * cv.abs();
    let tiny = f64::from(f32::MIN_POSITIVE) * (k as f64 + 2.0);
    acc_err + epi + u_out * (r.abs() + acc_err + epi) + tiny
}

/// The first element of `got` outside the reference's bound, as `(row,
/// col, got, exact, bound)`; NaN must meet NaN and an infinity the same
/// infinity.
pub fn gemm_check<O: Copy, F: Fn(O) -> f64>(
    got: ArrayView2<O>,
    reference: &GemmReference,
    to_f64: F,
) -> Option<(usize, usize, f64, f64, f64)> {
    for ((i, j), &g) in got.indexed_iter() {
        let (g, e, bnd) = (to_f64(g), reference.exact[(i, j)], reference.bound[(i, j)]);
        let ok = if e.is_nan() || g.is_nan() {
            e.is_nan() && g.is_nan()
        } else if e.is_infinite() || g.is_infinite() {
            e == g
        } else {
            (g - e).abs() <= bnd
        };
        if !ok {
            return Some((i, j, g, e, bnd));
        }
    }
    None
}
