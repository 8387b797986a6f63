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
    GEMM_SIMT_F16_F32, GEMM_SIMT_F32_F32, GEMM_SPLIT_REDUCE_BF16, GEMM_SPLIT_REDUCE_F16,
    GEMM_SPLIT_REDUCE_F32, GEMM_STAGE_B16, GEMM_STAGE_B32, GEMM_STAGE_TRANSPOSED_B32, GemmParams,
    MMA_SMEM_BYTES, MMA_THREADS, SIMT_BLOCK, STAGE_CHUNK_BYTES, STAGE_THREADS, STAGE_TILE,
    STAGE_TILE_ROWS, SplitReduceParams, StageParams, TRANS_A, TRANS_B,
};
use cust::memory::DeviceCopy;
use cust::memory::DevicePointer;
use cust::memory::bytemuck::{Pod, Zeroable};
use ndarray::{Array2, ArrayView2, ArrayViewMut2};

use crate::Gpu;
use crate::error::{Error, Result};
use crate::gemm_wgmma::{WgmmaGemmExt, WgmmaInput, wgmma_kernel};
use crate::kernel::Kernel;
use crate::launch::{LaunchConfig, MAX_GRID_YZ};
use crate::memory::{DeviceBuffer, DeviceSlice};
use cuda_kernels_gpu::gemm_wgmma::{
    GEMM_WGMMA_BF16_BF16_NN, GEMM_WGMMA_BF16_BF16_NT, GEMM_WGMMA_BF16_BF16_TN,
    GEMM_WGMMA_BF16_BF16_TT, GEMM_WGMMA_BF16_F32_NN, GEMM_WGMMA_BF16_F32_NT,
    GEMM_WGMMA_BF16_F32_TN, GEMM_WGMMA_BF16_F32_TT, GEMM_WGMMA_F16_F16_NN, GEMM_WGMMA_F16_F16_NT,
    GEMM_WGMMA_F16_F16_TN, GEMM_WGMMA_F16_F16_TT, GEMM_WGMMA_F16_F32_NN, GEMM_WGMMA_F16_F32_NT,
    GEMM_WGMMA_F16_F32_TN, GEMM_WGMMA_F16_F32_TT, GEMM_WGMMA_N128_BF16_F32_NN,
    GEMM_WGMMA_N128_BF16_F32_NT, GEMM_WGMMA_N128_BF16_F32_TN, GEMM_WGMMA_N128_BF16_F32_TT,
    GEMM_WGMMA_N128_F16_F32_NN, GEMM_WGMMA_N128_F16_F32_NT, GEMM_WGMMA_N128_F16_F32_TN,
    GEMM_WGMMA_N128_F16_F32_TT, GEMM_WGMMA_TF32_F32_NT, WgmmaParams,
};
use std::sync::Mutex;

/// The environment variable that forces a [`GemmPath`]: `wgmma`,
/// `mma_sync` or `cuda_core`.
pub const GEMM_PATH_ENV: &str = "CUDA_KERNELS_GEMM_PATH";

/// Which kernel computes a GEMM. Chosen by device ([`Gpu::gemm_path`](crate::matrices::gemm::GemmExt::gemm_path)):
/// wgmma on sm_90, mma.sync on sm_80 and later, the CUDA cores on GPUs
/// without tensor cores (operands that are not 16-byte aligned are staged
/// for the tensor cores); [`GEMM_PATH_ENV`] forces one.
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
        let paths = [Self::Wgmma, Self::MmaSync, Self::CudaCore].map(|p| (p.name(), p));
        crate::util::env_choice(GEMM_PATH_ENV, &paths).map_err(|why| Error::invalid(kernel, why))
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
pub trait GemmInput: Copy + Send + Sync + 'static {
    /// The device crate's type of the same bits.
    type Dev: DeviceCopy + Pod + Copy + Send + Sync + 'static;
    /// The name in kernel names and reports (`bf16`, `f16`, `tf32`).
    const NAME: &'static str;
    /// Significand bits the product sees (8, 11, and 11 for tf32).
    const PRECISION: i32;
    /// Its element type for the wgmma kernel.
    const WGMMA: WgmmaInput;
    /// The wgmma kernels (sm_90a) with f32 output by layout (NN, NT, TN,
    /// TT; `None` where wgmma cannot read the layout): the f32 output's
    /// [`GemmOutput::WGMMA`], and every output's split-k partial products.
    const WGMMA_F32: [Option<Kernel<WgmmaParams<f32>>>; 4];
    /// The wgmma kernels of 128 × 128 tiles with f32 output by layout
    /// (`gemm_wgmma_n128_*`: 16-bit inputs; `None` for tf32), which the
    /// plan picks where they fill the GPU better
    /// ([`choose_tile_n`](crate::gemm_wgmma::choose_tile_n)).
    const WGMMA_N128_F32: [Option<Kernel<WgmmaParams<f32>>>; 4];
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
    /// The wgmma kernels of 128 × 128 tiles by layout: f32 output of 16-bit
    /// inputs only ([`GemmInput::WGMMA_N128_F32`]); `None` elsewhere.
    const WGMMA_N128: [Option<Kernel<WgmmaParams<Self::Dev>>>; 4];
    /// The split-k reduction into this output type.
    const SPLIT_REDUCE: Kernel<SplitReduceParams<Self::Dev>>;
    /// The device twin.
    fn to_dev(self) -> Self::Dev;
    /// From the device twin.
    fn from_dev(d: Self::Dev) -> Self;
    /// The exact value.
    fn to_f64(self) -> f64;
}

macro_rules! gemm_types {
    ($($host:ty => $dev:ty, $name:literal, $p:literal, $wgmma:ident, $f32:expr, $n128:expr, $to_dev:expr, $to_f64:expr;)*) => {$(
        impl GemmInput for $host {
            type Dev = $dev;
            const NAME: &'static str = $name;
            const PRECISION: i32 = $p;
            const WGMMA: WgmmaInput = WgmmaInput::$wgmma;
            const WGMMA_F32: [Option<Kernel<WgmmaParams<f32>>>; 4] = $f32;
            const WGMMA_N128_F32: [Option<Kernel<WgmmaParams<f32>>>; 4] = $n128;
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
    half::bf16 => dev::bf16, "bf16", 8, Bf16,
        [Some(GEMM_WGMMA_BF16_F32_NN), Some(GEMM_WGMMA_BF16_F32_NT), Some(GEMM_WGMMA_BF16_F32_TN), Some(GEMM_WGMMA_BF16_F32_TT)],
        [Some(GEMM_WGMMA_N128_BF16_F32_NN), Some(GEMM_WGMMA_N128_BF16_F32_NT), Some(GEMM_WGMMA_N128_BF16_F32_TN), Some(GEMM_WGMMA_N128_BF16_F32_TT)],
        dev::bf16::from, |x: half::bf16| x.to_f64();
    half::f16 => dev::f16, "f16", 11, F16,
        [Some(GEMM_WGMMA_F16_F32_NN), Some(GEMM_WGMMA_F16_F32_NT), Some(GEMM_WGMMA_F16_F32_TN), Some(GEMM_WGMMA_F16_F32_TT)],
        [Some(GEMM_WGMMA_N128_F16_F32_NN), Some(GEMM_WGMMA_N128_F16_F32_NT), Some(GEMM_WGMMA_N128_F16_F32_TN), Some(GEMM_WGMMA_N128_F16_F32_TT)],
        dev::f16::from, |x: half::f16| x.to_f64();
    f32 => f32, "tf32", 11, Tf32, [None, Some(GEMM_WGMMA_TF32_F32_NT), None, None], [None; 4],
        |x| x, |x: f32| x as f64;
}

macro_rules! gemm_outputs {
    ($($in:ty => $out:ty, $dev:ty, $name:literal, $p:literal, $simt:ident, $mma:ident, $wgmma:expr, $n128:expr, $reduce:ident, $from:expr;)*) => {$(
        impl GemmOutput<$in> for $out {
            type Dev = $dev;
            const NAME: &'static str = $name;
            const PRECISION: i32 = $p;
            const SIMT: Kernel<GemmParams<<$in as GemmInput>::Dev, $dev>> = $simt;
            const MMA: Kernel<GemmParams<<$in as GemmInput>::Dev, $dev>> = $mma;
            const WGMMA: [Option<Kernel<WgmmaParams<$dev>>>; 4] = $wgmma;
            const WGMMA_N128: [Option<Kernel<WgmmaParams<$dev>>>; 4] = $n128;
            const SPLIT_REDUCE: Kernel<SplitReduceParams<$dev>> = $reduce;
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
        <half::bf16 as GemmInput>::WGMMA_F32, <half::bf16 as GemmInput>::WGMMA_N128_F32,
        GEMM_SPLIT_REDUCE_F32, |d| d;
    half::bf16 => half::bf16, dev::bf16, "bf16", 8, GEMM_SIMT_BF16_BF16, GEMM_MMA_BF16_BF16,
        [Some(GEMM_WGMMA_BF16_BF16_NN), Some(GEMM_WGMMA_BF16_BF16_NT), Some(GEMM_WGMMA_BF16_BF16_TN), Some(GEMM_WGMMA_BF16_BF16_TT)],
        [None; 4], GEMM_SPLIT_REDUCE_BF16, half::bf16::from;
    half::f16 => f32, f32, "f32", 24, GEMM_SIMT_F16_F32, GEMM_MMA_F16_F32,
        <half::f16 as GemmInput>::WGMMA_F32, <half::f16 as GemmInput>::WGMMA_N128_F32,
        GEMM_SPLIT_REDUCE_F32, |d| d;
    half::f16 => half::f16, dev::f16, "f16", 11, GEMM_SIMT_F16_F16, GEMM_MMA_F16_F16,
        [Some(GEMM_WGMMA_F16_F16_NN), Some(GEMM_WGMMA_F16_F16_NT), Some(GEMM_WGMMA_F16_F16_TN), Some(GEMM_WGMMA_F16_F16_TT)],
        [None; 4], GEMM_SPLIT_REDUCE_F16, half::f16::from;
    f32 => f32, f32, "f32", 24, GEMM_SIMT_F32_F32, GEMM_MMA_TF32_F32,
        <f32 as GemmInput>::WGMMA_F32, [None; 4], GEMM_SPLIT_REDUCE_F32, |d| d;
}

/// A host operand as the kernels read it: its elements as stored, and how.
struct Operand<D> {
    data: Vec<D>,
    op: Op,
    ld: usize,
}

/// `x` (the operand `op(X)`, `rows × cols`) as stored: a transposed view of
/// a row-major array (column-major) is T without reordering, anything else
/// is copied row-major as N. The stored rows are padded with zeros to whole
/// 16-byte chunks, so that the copy the device gets is aligned for the
/// tensor cores at any size (no staging on the device).
fn operand<I: GemmInput>(x: ArrayView2<I>) -> Operand<I::Dev> {
    let transposed = !x.is_standard_layout() && x.t().is_standard_layout();
    let stored = if transposed { x.reversed_axes() } else { x };
    let cols = stored.ncols();
    // A row of usize::MAX elements is not an array's.
    let ld = padded_row::<I::Dev>(cols).unwrap_or(cols).max(1);
    let zero = I::Dev::zeroed();
    let mut data = Vec::with_capacity(stored.nrows() * ld);
    for row in stored.rows() {
        data.extend(row.iter().map(|v| v.to_dev()));
        data.resize(data.len() + ld - cols, zero);
    }
    Operand {
        data,
        op: if transposed { Op::T } else { Op::N },
        ld,
    }
}

/// The GEMM launchers on a [`Gpu`].
pub trait GemmExt {
    /// The path a GEMM of `shape` takes on this device: the forced one
    /// ([`GEMM_PATH_ENV`]) if set, else wgmma on sm_90 when the wgmma kernel
    /// fits it ([`Gpu::wgmma_fits`](crate::matrices::gemm::GemmExt::wgmma_fits)), mma.sync on sm_80 and later (and on
    /// the simulator), the CUDA cores elsewhere. At any alignment: an
    /// operand whose start, leading dimension or batch stride is not a
    /// multiple of 16 bytes is first staged into aligned rows (see
    /// [`Gpu::gemm_on_device`](crate::matrices::gemm::GemmExt::gemm_on_device)).
    fn gemm_path<I: GemmInput, O: GemmOutput<I>>(&self, shape: &GemmShape) -> Result<GemmPath>;

    /// Whether the wgmma kernel (`gemm_wgmma_*`, sm_90a) computes a GEMM of
    /// `shape`, or why not: a GPU (not the simulator, which does not model
    /// wgmma and TMA) whose loaded image has it (the sm_90a cubin), a layout
    /// wgmma reads (every layout for 16-bit inputs, f32 or 16-bit output;
    /// tf32 in every layout too: wgmma reads tf32 K-major only, so an
    /// MN-major tf32 operand is staged transposed first). (Operands that are
    /// not 16-byte aligned, TMA's rule, are staged first.)
    fn wgmma_fits<I: GemmInput, O: GemmOutput<I>>(
        &self,
        shape: &GemmShape,
    ) -> std::result::Result<(), String>;

    /// `C = alpha · op(A) · op(B) + beta · C` over device buffers, queued on
    /// [`Gpu::stream`]; the path taken is returned. Every size, leading
    /// dimension, batch stride and buffer length is checked first
    /// ([`GemmShape::check`]). On the tensor-core paths, an operand whose
    /// start, leading dimension or batch stride is not a multiple of 16
    /// bytes is first copied by `gemm_stage_*` into rows padded to 16 bytes
    /// (one read and one write of the operand, queued on the same stream)
    /// in a scratch buffer the `Gpu` keeps for the next such call (grown,
    /// after a wait, when an operand is larger than any before). On wgmma, a
    /// tf32 operand stored MN-major (A `k × m`, B `k × n`) is staged
    /// transposed the same way (`gemm_stage_transposed_b32`).
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
    fn gemm_path<I: GemmInput, O: GemmOutput<I>>(&self, shape: &GemmShape) -> Result<GemmPath> {
        let name = O::MMA.name();
        let wgmma = self.wgmma_fits::<I, O>(shape);
        if let Some(forced) = GemmPath::forced(name)? {
            return match forced {
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
        } else if self.has_kernel(O::MMA.name()) {
            GemmPath::MmaSync
        } else {
            GemmPath::CudaCore
        })
    }

    fn wgmma_fits<I: GemmInput, O: GemmOutput<I>>(
        &self,
        shape: &GemmShape,
    ) -> std::result::Result<(), String> {
        let kernel = wgmma_kernel::<I, O>(&wgmma_layout::<I>(shape))?.name();
        if self.is_simulated() {
            Err("the simulator does not model wgmma or TMA".into())
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
        let path = self.gemm_path::<I, O>(shape)?;
        // wgmma reads tf32 K-major only: an MN-major tf32 operand is staged
        // transposed (A stored k × m, B stored k × n).
        let transpose = path == GemmPath::Wgmma && I::WGMMA == WgmmaInput::Tf32;
        let staging = [
            Staging::of(
                transpose && shape.op_a == Op::T,
                operand_aligned(a, shape.lda, shape.stride_a, shape.batches),
            ),
            Staging::of(
                transpose && shape.op_b == Op::N,
                operand_aligned(b, shape.ldb, shape.stride_b, shape.batches),
            ),
        ];
        if path == GemmPath::CudaCore || staging == [Staging::Keep; 2] {
            self.gemm_aligned::<I, O>(path, shape, alpha, a, b, beta, c)?;
        } else {
            self.gemm_staged::<I, O>(path, shape, alpha, [a, b], staging, beta, c)?;
        }
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

/// Whether an operand at `x` with leading dimension `ld` and batch stride
/// `stride` (read only when `batches > 1`) is 16-byte aligned everywhere
/// the tensor-core paths need it (TMA's and `cp.async`'s rule): its start,
/// every row and every batch. The one test the dispatcher and the wgmma
/// plan share.
pub(crate) fn operand_aligned<T: DeviceCopy>(
    x: &DeviceSlice<T>,
    ld: usize,
    stride: usize,
    batches: usize,
) -> bool {
    let bytes16 = |v: usize| {
        v.checked_mul(size_of::<T>())
            .is_some_and(|b| b.is_multiple_of(16))
    };
    x.as_device_ptr().as_raw().is_multiple_of(16)
        && bytes16(ld)
        && (batches == 1 || bytes16(stride))
}

/// A [`Gpu`]'s scratch for staged operands of element type `T` (A's and
/// B's), kept between calls ([`Gpu::launcher_state`]): every staged GEMM
/// queues its copies and its kernel on the `Gpu`'s stream while holding the
/// lock, so the stream orders each use of a buffer after the last.
struct StagingBuffers<T: DeviceCopy>(Mutex<[Option<DeviceBuffer<T>>; 2]>);

/// What the dispatcher does with an operand before the kernel reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Staging {
    /// Read as it is (16-byte aligned, in a layout the kernel reads).
    Keep,
    /// Copied into 16-byte rows (`gemm_stage_*`).
    Copy,
    /// Copied transposed into 16-byte rows (`gemm_stage_transposed_b32`:
    /// tf32 for wgmma, which reads it K-major only).
    Transpose,
}

impl Staging {
    fn of(transpose: bool, aligned: bool) -> Self {
        match (transpose, aligned) {
            (true, _) => Self::Transpose,
            (false, false) => Self::Copy,
            (false, true) => Self::Keep,
        }
    }
}

/// How one operand is staged: rows and columns as stored, whether it is
/// transposed, the staged copy's leading dimension (padded to 16 bytes) and
/// batch stride, and its elements.
#[derive(Debug, Clone, Copy)]
struct Staged {
    rows: usize,
    cols: usize,
    transpose: bool,
    ld: usize,
    stride: usize,
    len: usize,
}

impl Staged {
    /// `batches` of `rows × cols` `T`s as stored, staged (transposed when
    /// `transpose`) in rows padded to whole 16-byte chunks; `None` past the
    /// kernels' 32-bit limits.
    fn new<T>((rows, cols): (usize, usize), transpose: bool, batches: usize) -> Option<Self> {
        let (out_rows, out_cols) = if transpose {
            (cols, rows)
        } else {
            (rows, cols)
        };
        let ld = padded_row::<T>(out_cols)?;
        let stride = out_rows.checked_mul(ld)?;
        let len = stride.checked_mul(batches)?;
        (ld <= i32::MAX as usize).then_some(Self {
            rows,
            cols,
            transpose,
            ld,
            stride,
            len,
        })
    }

    /// The staged copy's leading dimension, batch stride and storage order
    /// for an operand stored `op` (a transposed copy is stored the other
    /// way).
    fn layout(&self, op: Op) -> (usize, usize, Op) {
        let op = match (self.transpose, op) {
            (false, op) => op,
            (true, Op::N) => Op::T,
            (true, Op::T) => Op::N,
        };
        (self.ld, self.stride, op)
    }
}

/// Elements of a row of `cols` `T`s padded to whole 16-byte chunks (the
/// tensor-core paths' alignment): the one rule of the staged copies and the
/// ndarray API's uploads. `None` when it overflows.
fn padded_row<T>(cols: usize) -> Option<usize> {
    cols.checked_next_multiple_of(STAGE_CHUNK_BYTES / size_of::<T>())
}

/// `slot`'s scratch buffer, at least `len` elements: kept for the next
/// launch and replaced only when shorter, after waiting for `gpu`'s stream
/// (launches queued there earlier may still use the old one). The staged
/// operands' buffers and the split-k workspace.
///
/// # Safety
/// A new buffer's contents are undefined: every element the caller's
/// launches read, they write first (queued before on the same stream).
pub(crate) unsafe fn scratch<'s, T: DeviceCopy>(
    gpu: &Gpu,
    name: &'static str,
    slot: &'s mut Option<DeviceBuffer<T>>,
    len: usize,
) -> Result<&'s mut DeviceBuffer<T>> {
    let buf = match slot.take() {
        Some(buf) if buf.len() >= len => buf,
        old => {
            if old.is_some() {
                gpu.synchronize(name)?;
            }
            drop(old);
            // SAFETY: the caller's contract.
            unsafe { gpu.uninitialized::<T>(len) }?
        }
    };
    Ok(slot.insert(buf))
}

/// The layout whose wgmma kernel computes `shape` for `I` inputs: its own,
/// or NT for tf32 (its MN-major operands staged transposed).
fn wgmma_layout<I: GemmInput>(shape: &GemmShape) -> GemmShape {
    let mut layout = *shape;
    if I::WGMMA == WgmmaInput::Tf32 {
        (layout.op_a, layout.op_b) = (Op::N, Op::T);
    }
    layout
}

/// The steps the launchers above share.
trait GemmExtSteps {
    /// Whether the loaded module has the entry point `name` (the simulator
    /// has every kernel).
    fn has_kernel(&self, name: &str) -> bool;

    /// Queues the GEMM on `path` (a checked shape on this device's buffers,
    /// operands aligned unless the path is the CUDA cores').
    #[allow(clippy::too_many_arguments)]
    fn gemm_aligned<I: GemmInput, O: GemmOutput<I>>(
        &self,
        path: GemmPath,
        shape: &GemmShape,
        alpha: f32,
        a: &DeviceSlice<I::Dev>,
        b: &DeviceSlice<I::Dev>,
        beta: f32,
        c: &mut DeviceSlice<O::Dev>,
    ) -> Result<()>;

    /// Stages the operands as `staging` says into the scratch
    /// ([`StagingBuffers`]; fresh buffers on the simulator), then queues the
    /// GEMM on `path` over the staged copies.
    #[allow(clippy::too_many_arguments)]
    fn gemm_staged<I: GemmInput, O: GemmOutput<I>>(
        &self,
        path: GemmPath,
        shape: &GemmShape,
        alpha: f32,
        operands: [&DeviceSlice<I::Dev>; 2],
        staging: [Staging; 2],
        beta: f32,
        c: &mut DeviceSlice<O::Dev>,
    ) -> Result<()>;

    /// `src` (ld and batch stride `ld_stride`) as the kernel reads it:
    /// itself when `staged` is `None`, else its copy in `slot`'s scratch
    /// (grown to fit), queued by [`stage_operand`](Self::stage_operand).
    fn staged_operand<'r, T: DeviceCopy>(
        &self,
        src: &'r DeviceSlice<T>,
        ld_stride: (usize, usize),
        staged: Option<&Staged>,
        batches: usize,
        slot: &'r mut Option<DeviceBuffer<T>>,
    ) -> Result<&'r DeviceSlice<T>>;

    /// Queues `gemm_stage_*` copying `src` (ld `ld`, batch stride `stride`)
    /// into `dst` as `staged` describes.
    fn stage_operand<T: DeviceCopy>(
        &self,
        src: &DeviceSlice<T>,
        ld_stride: (usize, usize),
        staged: &Staged,
        batches: usize,
        dst: &mut DeviceBuffer<T>,
    ) -> Result<()>;
}

impl GemmExtSteps for Gpu {
    fn has_kernel(&self, name: &str) -> bool {
        self.is_simulated() || self.function(name).is_ok()
    }

    #[allow(clippy::too_many_arguments)]
    fn gemm_aligned<I: GemmInput, O: GemmOutput<I>>(
        &self,
        path: GemmPath,
        shape: &GemmShape,
        alpha: f32,
        a: &DeviceSlice<I::Dev>,
        b: &DeviceSlice<I::Dev>,
        beta: f32,
        c: &mut DeviceSlice<O::Dev>,
    ) -> Result<()> {
        let (kernel, cfg) = match path {
            GemmPath::Wgmma => {
                return self
                    .gemm_wgmma_plan::<I, O>(shape, alpha, a, b, beta, c)?
                    .launch();
            }
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
        if path == GemmPath::MmaSync {
            // 96 KiB: past the 48 KiB a block has without opting in.
            self.allow_dynamic_shared(kernel, MMA_SMEM_BYTES)?;
        }
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
        }
    }
    #[allow(clippy::too_many_arguments)]
    fn gemm_staged<I: GemmInput, O: GemmOutput<I>>(
        &self,
        path: GemmPath,
        shape: &GemmShape,
        alpha: f32,
        [a, b]: [&DeviceSlice<I::Dev>; 2],
        staging: [Staging; 2],
        beta: f32,
        c: &mut DeviceSlice<O::Dev>,
    ) -> Result<()> {
        let name = stage_kernel_name::<I::Dev>();
        // How each operand is staged (none: read as it is).
        let plan = |stored: (usize, usize), staging: Staging, what: &str| {
            if staging == Staging::Keep {
                return Ok(None);
            }
            Staged::new::<I::Dev>(stored, staging == Staging::Transpose, shape.batches)
                .map(Some)
                .ok_or_else(|| {
                    Error::invalid(
                        name,
                        format!(
                            "{what} ({stored:?} as stored, {} batches) staged in 16-byte rows is past the 32-bit limits",
                            shape.batches
                        ),
                    )
                })
        };
        let sa = plan(shape.a_stored(), staging[0], "A")?;
        let sb = plan(shape.b_stored(), staging[1], "B")?;
        let mut staged_shape = *shape;
        let s = &mut staged_shape;
        if let Some(st) = &sa {
            (s.lda, s.stride_a, s.op_a) = st.layout(shape.op_a);
        }
        if let Some(st) = &sb {
            (s.ldb, s.stride_b, s.op_b) = st.layout(shape.op_b);
        }
        let mut local: [Option<DeviceBuffer<I::Dev>>; 2] = [None, None];
        let shared;
        let mut guard;
        let [buf_a, buf_b]: &mut [Option<DeviceBuffer<I::Dev>>; 2] = if self.is_simulated() {
            &mut local
        } else {
            shared = self.launcher_state(name, || {
                Ok(StagingBuffers::<I::Dev>(Mutex::new([None, None])))
            })?;
            guard = shared.0.lock().unwrap_or_else(|e| e.into_inner());
            &mut guard
        };
        let a = self.staged_operand(
            a,
            (shape.lda, shape.stride_a),
            sa.as_ref(),
            shape.batches,
            buf_a,
        )?;
        let b = self.staged_operand(
            b,
            (shape.ldb, shape.stride_b),
            sb.as_ref(),
            shape.batches,
            buf_b,
        )?;
        self.gemm_aligned::<I, O>(path, &staged_shape, alpha, a, b, beta, c)
    }

    fn staged_operand<'r, T: DeviceCopy>(
        &self,
        src: &'r DeviceSlice<T>,
        ld_stride: (usize, usize),
        staged: Option<&Staged>,
        batches: usize,
        slot: &'r mut Option<DeviceBuffer<T>>,
    ) -> Result<&'r DeviceSlice<T>> {
        let Some(staged) = staged else {
            return Ok(src);
        };
        let name = stage_kernel_name::<T>();
        // SAFETY: the staging copy queued next writes every element the GEMM
        // reads (queued after it on the same stream).
        let dst = unsafe { scratch(self, name, slot, staged.len) }?;
        self.stage_operand(src, ld_stride, staged, batches, dst)?;
        Ok(dst)
    }

    fn stage_operand<T: DeviceCopy>(
        &self,
        src: &DeviceSlice<T>,
        (ld, stride): (usize, usize),
        staged: &Staged,
        batches: usize,
        dst: &mut DeviceBuffer<T>,
    ) -> Result<()> {
        if staged.transpose {
            return stage_transposed(self, src, (ld, stride), staged, batches, dst);
        }
        let chunks = staged.stride / (STAGE_CHUNK_BYTES / size_of::<T>());
        let cfg = LaunchConfig {
            grid: (
                chunks
                    .div_ceil(STAGE_THREADS as usize)
                    .clamp(1, STAGE_MAX_BLOCKS) as u32,
                1,
                batches as u32,
            ),
            block: (STAGE_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let words = (src.as_device_ptr().as_raw(), dst.as_device_ptr().as_raw());
        let dims = (
            staged.rows as u32,
            staged.cols as u32,
            ld as u32,
            staged.ld as u32,
            stride as u64,
        );
        // SAFETY: the shape was checked against `src`'s length (every element
        // the copy reads is inside it, dimensions and leading dimensions below
        // 2^31, batches within grid z); `dst` is this device's scratch of at
        // least `staged.len` elements, 16-byte aligned (an allocation's start)
        // with rows of `staged.ld`, a whole number of chunks; nothing else
        // uses it until the GEMM queued after this copy on the same stream.
        unsafe {
            match size_of::<T>() {
                2 => launch_stage::<u16>(self, GEMM_STAGE_B16, cfg, words, dims),
                4 => launch_stage::<u32>(self, GEMM_STAGE_B32, cfg, words, dims),
                other => Err(Error::invalid(
                    stage_kernel_name::<T>(),
                    format!("no staging copy for {other}-byte elements"),
                )),
            }
        }
    }
}

/// Queues the staging entry `kernel` on `gpu`'s stream over the operand's
/// bits as words `W`: `(src, dst)` addresses, `(rows, cols, ld_src, ld_dst,
/// batch_src)`.
///
/// # Safety
/// The entry's contract (see `gemm_stage` and `gemm_stage_transposed`) for
/// these addresses, sizes and `cfg`.
unsafe fn launch_stage<W: DeviceCopy>(
    gpu: &Gpu,
    kernel: Kernel<StageParams<W>>,
    cfg: LaunchConfig,
    (src, dst): (u64, u64),
    (rows, cols, ld_src, ld_dst, batch_src): (u32, u32, u32, u32, u64),
) -> Result<()> {
    gpu.bind()?;
    let args = (
        DevicePointer::<W>::from_raw(src),
        DevicePointer::<W>::from_raw(dst),
        rows,
        cols,
        ld_src,
        ld_dst,
        batch_src,
    );
    // SAFETY: the caller's contract.
    unsafe { gpu.launch(kernel, cfg, gpu.stream(), args) }
}

/// Queues `gemm_stage_transposed_b32` copying `src` (ld `ld`, batch
/// stride `stride`) transposed into `dst` as `staged` describes.
fn stage_transposed<T: DeviceCopy>(
    gpu: &Gpu,
    src: &DeviceSlice<T>,
    (ld, stride): (usize, usize),
    staged: &Staged,
    batches: usize,
    dst: &mut DeviceBuffer<T>,
) -> Result<()> {
    let name = GEMM_STAGE_TRANSPOSED_B32.name();
    if size_of::<T>() != 4 {
        return Err(Error::invalid(
            name,
            format!("a transposed staging of {}-byte elements", size_of::<T>()),
        ));
    }
    let tile = STAGE_TILE as usize;
    let cfg = LaunchConfig {
        grid: (
            staged.cols.div_ceil(tile) as u32,
            staged.rows.div_ceil(tile).min(MAX_GRID_YZ as usize) as u32,
            batches as u32,
        ),
        block: (STAGE_TILE, STAGE_TILE_ROWS, 1),
        shared_mem_bytes: 0,
    };
    let words = (src.as_device_ptr().as_raw(), dst.as_device_ptr().as_raw());
    let dims = (
        staged.rows as u32,
        staged.cols as u32,
        ld as u32,
        staged.ld as u32,
        stride as u64,
    );
    // SAFETY: the shape was checked against `src`'s length (every element
    // read is inside it, dimensions below 2^31, batches within grid z);
    // `dst` is this device's scratch of at least `staged.len` 32-bit
    // elements (`cols` rows of `staged.ld ≥ rows` a batch); grid x covers
    // the columns in tiles, grid y strides over the rows; nothing else uses
    // `dst` until the GEMM queued after this copy on the same stream.
    unsafe { launch_stage::<u32>(gpu, GEMM_STAGE_TRANSPOSED_B32, cfg, words, dims) }
}

/// Blocks of the staging copy at most (a grid-stride loop covers the rest).
const STAGE_MAX_BLOCKS: usize = 4096;

/// The staging entry point for `T`'s size (the name errors carry).
fn stage_kernel_name<T>() -> &'static str {
    if size_of::<T>() == 2 {
        GEMM_STAGE_B16.name()
    } else {
        GEMM_STAGE_B32.name()
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
