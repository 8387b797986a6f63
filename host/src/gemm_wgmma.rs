//! The Hopper GEMM's launcher (`kernels::gemm_wgmma`, sm_90a): tensor maps
//! made with the driver's `cuTensorMapEncodeTiled`, found at run time, and
//! the launch with its opt-in shared memory.
//!
//! A launch costs no allocation and no wait: its two maps (which depend on
//! the operands' addresses, shapes and strides alone, never on their data)
//! are copied into the module's global `GEMM_WGMMA_TENSOR_MAPS` by a copy
//! queued on the launch's stream just before the kernel, so the stream
//! orders each copy after the previous launch that read that global and
//! before its own; a lock keeps each copy and its launch together when
//! several threads launch on one `Gpu`.
//!
//! `C = alpha · A · Bᵀ + beta · C` per batch, A `m × k` and B `n × k`
//! row-major (both K-major), C `m × n` row-major f32; the operands bf16 or
//! f16 (16-bit words, the `half` crate's bits) or f32 multiplied as tf32.
//! TMA needs each operand's start and leading dimension 16-byte aligned:
//! [`Gpu::gemm_wgmma`](crate::gemm_wgmma::WgmmaGemmExt::gemm_wgmma) refuses other operands ([`Error::InvalidInput`]), for
//! the caller to take another path.
use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::sync::{Mutex, OnceLock};

pub use cuda_kernels_gpu::device::hopper::TensorMap;
use cuda_kernels_gpu::device::kernel::Kernel;
use cuda_kernels_gpu::gemm_wgmma::{
    BLOCK_M, BLOCK_N, GEMM_WGMMA_BF16, GEMM_WGMMA_F16, GEMM_WGMMA_TF32, ROW_BYTES, SHARED_BYTES,
    TENSOR_MAPS_SYMBOL, THREADS,
};
use cust::memory::{DeviceCopy, DevicePointer};
use cust::sys as cu;

use crate::dynlib::DynLib;
use crate::error::{Error, Result, check_driver};
use crate::gpu::Gpu;
use crate::kernel::launch_function;
use crate::launch::LaunchConfig;
use crate::memory::DeviceSlice;

/// The operands' element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WgmmaInput {
    /// bf16 (16-bit words).
    Bf16,
    /// f16 (16-bit words).
    F16,
    /// f32, multiplied as tf32.
    Tf32,
}

/// The kernel's parameters: the two tensor maps' addresses, C, m, n, k,
/// ldc, C's batch stride, alpha, beta.
type GemmParams = (
    *const u64,
    *const u64,
    *mut f32,
    u32,
    u32,
    u32,
    u32,
    u64,
    f32,
    f32,
    u32,
);

impl WgmmaInput {
    /// Bytes of one element.
    pub const fn bytes(self) -> usize {
        match self {
            Self::Bf16 | Self::F16 => 2,
            Self::Tf32 => 4,
        }
    }

    /// The kernel's entry point (`gemm_wgmma_bf16`, …).
    pub fn kernel_name(self) -> &'static str {
        self.kernel().name()
    }

    fn kernel(self) -> Kernel<GemmParams> {
        match self {
            Self::Bf16 => GEMM_WGMMA_BF16,
            Self::F16 => GEMM_WGMMA_F16,
            Self::Tf32 => GEMM_WGMMA_TF32,
        }
    }

    /// `CUtensorMapDataType`: BFLOAT16 (9), FLOAT16 (6), FLOAT32 (7).
    const fn tensor_map_type(self) -> c_int {
        match self {
            Self::Bf16 => 9,
            Self::F16 => 6,
            Self::Tf32 => 7,
        }
    }

    /// The operation named when the driver refuses a map: the call and the
    /// box (k × rows × 1 elements).
    const fn encode_operation(self, rows: u32) -> &'static str {
        match (self, rows) {
            (Self::Tf32, BLOCK_M) => "cuTensorMapEncodeTiled (A, box 32 × 128 × 1 f32)",
            (Self::Tf32, _) => "cuTensorMapEncodeTiled (B, box 32 × 256 × 1 f32)",
            (_, BLOCK_M) => "cuTensorMapEncodeTiled (A, box 64 × 128 × 1 16-bit)",
            _ => "cuTensorMapEncodeTiled (B, box 64 × 256 × 1 16-bit)",
        }
    }
}

/// The shape of a strided-batched GEMM, in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WgmmaShape {
    /// Rows of A and C.
    pub m: usize,
    /// Rows of B, columns of C.
    pub n: usize,
    /// Columns of A and B.
    pub k: usize,
    /// Batches (1 for one product).
    pub batches: usize,
    /// A's leading dimension (≥ k).
    pub lda: usize,
    /// B's leading dimension (≥ k).
    pub ldb: usize,
    /// C's leading dimension (≥ n).
    pub ldc: usize,
    /// Elements from one batch of A to the next.
    pub a_batch_stride: usize,
    /// Elements from one batch of B to the next.
    pub b_batch_stride: usize,
    /// Elements from one batch of C to the next.
    pub c_batch_stride: usize,
}

impl WgmmaShape {
    /// One dense product: `lda = ldb = k`, `ldc = n`, one batch.
    pub fn dense(m: usize, n: usize, k: usize) -> Self {
        Self {
            m,
            n,
            k,
            batches: 1,
            lda: k,
            ldb: k,
            ldc: n,
            a_batch_stride: m * k,
            b_batch_stride: n * k,
            c_batch_stride: m * n,
        }
    }
}

/// `CUresult cuTensorMapEncodeTiled(CUtensorMap*, CUtensorMapDataType,
/// cuuint32_t rank, void* globalAddress, const cuuint64_t* globalDim,
/// const cuuint64_t* globalStrides, const cuuint32_t* boxDim, const
/// cuuint32_t* elementStrides, interleave, swizzle, l2Promotion, oobFill)`.
type EncodeTiled = unsafe extern "C" fn(
    *mut TensorMap,
    c_int,
    u32,
    *mut c_void,
    *const u64,
    *const u64,
    *const u32,
    *const u32,
    c_int,
    c_int,
    c_int,
    c_int,
) -> cu::CUresult;

/// The driver's `cuTensorMapEncodeTiled` (CUDA 12.0 and later; cust's
/// bindings predate it), looked up once in `libcuda.so.1`.
fn encode_tiled() -> std::result::Result<EncodeTiled, String> {
    static FOUND: OnceLock<std::result::Result<(DynLib, usize), String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        let lib = DynLib::open_by_name("libcuda.so.1").map_err(|e| e.to_string())?;
        let f = lib
            .symbol("cuTensorMapEncodeTiled")
            .map_err(|e| e.to_string())?;
        Ok((lib, f as usize))
    });
    match found {
        // SAFETY: the driver's exported function, whose C signature (cuda.h,
        // CUDA 12) `EncodeTiled` spells out; the library stays loaded (static).
        Ok((_, f)) => Ok(unsafe { std::mem::transmute::<usize, EncodeTiled>(*f) }),
        Err(e) => Err(e.clone()),
    }
}

/// The tensor map of one operand: `rows × k` per batch, `ld` and
/// `batch_stride` in elements, box `ROW_BYTES / bytes × box_rows × 1`,
/// 128-byte swizzle, zeros out of bounds.
fn tensor_map(
    kernel: &'static str,
    input: WgmmaInput,
    base: u64,
    (rows, k, batches): (usize, usize, usize),
    (ld, batch_stride): (usize, usize),
    box_rows: u32,
) -> Result<TensorMap> {
    let encode = encode_tiled().map_err(|e| Error::invalid(kernel, e))?;
    let bytes = input.bytes() as u64;
    let dims = [k as u64, rows as u64, batches as u64];
    let strides = [ld as u64 * bytes, batch_stride.max(1) as u64 * bytes];
    let boxes = [ROW_BYTES / bytes as u32, box_rows, 1];
    let element_strides = [1u32; 3];
    let mut map = TensorMap([0; 16]);
    // SAFETY: every array has the rank's length (3, strides 2); `map` is a
    // 64-byte aligned CUtensorMap; the enums are cuda.h's values (interleave
    // none 0, swizzle 128B 3, L2 promotion 256B 3, OOB fill none 0).
    let r = unsafe {
        encode(
            &mut map,
            input.tensor_map_type(),
            3,
            base as *mut c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            0,
            3,
            3,
            0,
        )
    };
    check_driver(r, kernel, input.encode_operation(box_rows))?;
    Ok(map)
}

/// A GEMM ready to launch: its operands checked and their tensor maps made
/// ([`Gpu::gemm_wgmma_plan`](crate::gemm_wgmma::WgmmaGemmExt::gemm_wgmma_plan));
/// [`launch`](Self::launch) queues it, as often as wanted, while the borrowed
/// operands live.
pub struct WgmmaGemm<'a> {
    kernel: Kernel<GemmParams>,
    /// A's then B's map, copied to the module before each launch.
    maps: [TensorMap; 2],
    c: DevicePointer<f32>,
    shape: WgmmaShape,
    alpha: f32,
    beta: f32,
    group_m: u32,
    _operands: PhantomData<&'a mut DeviceSlice<f32>>,
}

/// The Hopper wgmma GEMM launchers on a [`Gpu`].
pub trait WgmmaGemmExt {
    /// Checks a GEMM `C = alpha · A · Bᵀ + beta · C` for the wgmma kernel
    /// (sm_90a; GPU only, [`Error::NotOnSimulator`] on the simulator) and
    /// makes its tensor maps: A `m × k`, B `n × k`, C `m × n`, as `shape`
    /// lays them out (`T` is `u16` for bf16 and f16, `f32` for tf32).
    /// Refuses ([`Error::InvalidInput`]) a zero or 32-bit-overflowing
    /// dimension, a leading dimension shorter than its row, buffers too
    /// short for the shape, and operands TMA cannot read: a start, leading
    /// dimension or batch stride not 16-byte aligned. A map the driver
    /// refuses is [`Error::Cuda`] naming `cuTensorMapEncodeTiled` and the box.
    #[allow(clippy::too_many_arguments)]
    fn gemm_wgmma_plan<'a, T: DeviceCopy>(
        &self,
        input: WgmmaInput,
        a: &'a DeviceSlice<T>,
        b: &'a DeviceSlice<T>,
        c: &'a mut DeviceSlice<f32>,
        shape: &WgmmaShape,
        alpha: f32,
        beta: f32,
    ) -> Result<WgmmaGemm<'a>>;

    /// [`Gpu::gemm_wgmma_plan`](crate::gemm_wgmma::WgmmaGemmExt::gemm_wgmma_plan) and one [`WgmmaGemm::launch`], waiting for it.
    #[allow(clippy::too_many_arguments)]
    fn gemm_wgmma<T: DeviceCopy>(
        &self,
        input: WgmmaInput,
        a: &DeviceSlice<T>,
        b: &DeviceSlice<T>,
        c: &mut DeviceSlice<f32>,
        shape: &WgmmaShape,
        alpha: f32,
        beta: f32,
    ) -> Result<()>;
}

impl WgmmaGemmExt for Gpu {
    #[allow(clippy::too_many_arguments)]
    fn gemm_wgmma_plan<'a, T: DeviceCopy>(
        &self,
        input: WgmmaInput,
        a: &'a DeviceSlice<T>,
        b: &'a DeviceSlice<T>,
        c: &'a mut DeviceSlice<f32>,
        shape: &WgmmaShape,
        alpha: f32,
        beta: f32,
    ) -> Result<WgmmaGemm<'a>> {
        let kernel = input.kernel();
        let name = kernel.name();
        let invalid = |reason: String| Err(Error::invalid(name, reason));
        if std::mem::size_of::<T>() != input.bytes() {
            return invalid(format!(
                "{input:?} operands are {} bytes an element, not {}",
                input.bytes(),
                std::mem::size_of::<T>()
            ));
        }
        self.require_cuda(name)?;
        for s in [a.device(), b.device(), c.device()] {
            self.check_device_id(name, s)?;
        }
        let WgmmaShape {
            m,
            n,
            k,
            batches,
            lda,
            ldb,
            ldc,
            a_batch_stride,
            b_batch_stride,
            c_batch_stride,
        } = *shape;
        let limit = i32::MAX as usize;
        let tiles = m.div_ceil(BLOCK_M as usize) * n.div_ceil(BLOCK_N as usize);
        if [m, n, k, batches].iter().any(|&d| d == 0 || d > limit) || tiles > limit {
            return invalid(format!(
                "m, n, k, batches = {m}, {n}, {k}, {batches}: each must be in 1..=2^31-1"
            ));
        }
        if lda < k || ldb < k || ldc < n {
            return invalid(format!(
                "leading dimensions lda {lda}, ldb {ldb} (≥ k = {k}), ldc {ldc} (≥ n = {n})"
            ));
        }
        let need = |rows: usize, ld: usize, cols: usize, stride: usize| {
            (batches - 1) * stride + (rows - 1) * ld + cols
        };
        for (what, len, need) in [
            ("A", a.len(), need(m, lda, k, a_batch_stride)),
            ("B", b.len(), need(n, ldb, k, b_batch_stride)),
            ("C", c.len(), need(m, ldc, n, c_batch_stride)),
        ] {
            if len < need {
                return invalid(format!(
                    "{what} holds {len} elements, the shape needs {need}"
                ));
            }
        }
        let bytes = input.bytes();
        let (a_ptr, b_ptr) = (a.as_device_ptr().as_raw(), b.as_device_ptr().as_raw());
        let aligned16 = |v: usize| (v * bytes).is_multiple_of(16);
        let aligned = a_ptr.is_multiple_of(16)
            && b_ptr.is_multiple_of(16)
            && aligned16(lda)
            && aligned16(ldb)
            && (batches == 1 || aligned16(a_batch_stride) && aligned16(b_batch_stride));
        if !aligned {
            return invalid(format!(
                "TMA needs 16-byte aligned operands: A at {a_ptr:#x} (lda {lda}), B at \
                 {b_ptr:#x} (ldb {ldb}), {bytes}-byte elements"
            ));
        }
        let a_map = tensor_map(
            name,
            input,
            a_ptr,
            (m, k, batches),
            (lda, a_batch_stride),
            BLOCK_M,
        )?;
        let b_map = tensor_map(
            name,
            input,
            b_ptr,
            (n, k, batches),
            (ldb, b_batch_stride),
            BLOCK_N,
        )?;
        let function = self.raw_function(name)?;
        // SAFETY: a live function of this GPU's module; the attribute and its
        // value are the driver's (within the device's opt-in maximum).
        let r = unsafe {
            cu::cuFuncSetAttribute(
                function,
                cu::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                SHARED_BYTES as c_int,
            )
        };
        check_driver(r, name, "cuFuncSetAttribute (dynamic shared memory)")?;
        Ok(WgmmaGemm {
            kernel,
            maps: [a_map, b_map],
            c: c.as_device_ptr(),
            shape: *shape,
            alpha,
            beta,
            group_m: DEFAULT_GROUP_M,
            _operands: PhantomData,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn gemm_wgmma<T: DeviceCopy>(
        &self,
        input: WgmmaInput,
        a: &DeviceSlice<T>,
        b: &DeviceSlice<T>,
        c: &mut DeviceSlice<f32>,
        shape: &WgmmaShape,
        alpha: f32,
        beta: f32,
    ) -> Result<()> {
        let gemm = self.gemm_wgmma_plan(input, a, b, c, shape, alpha, beta)?;
        gemm.launch(self)?;
        self.synchronize(gemm.kernel.name())
    }
}

/// The address of the module's global that the kernel `name` (`function`)
/// reads its tensor maps from ([`TENSOR_MAPS_SYMBOL`]); its absence, or
/// another size than two maps, is an error naming the kernel.
fn tensor_maps_global(name: &'static str, function: cu::CUfunction) -> Result<DevicePointer<u64>> {
    let mut module = std::ptr::null_mut();
    // SAFETY: a live function of the current context; the driver writes
    // its module's handle.
    let r = unsafe { cu::cuFuncGetModule(&mut module, function) };
    check_driver(r, name, "cuFuncGetModule")?;
    let symbol = std::ffi::CString::new(TENSOR_MAPS_SYMBOL)
        .map_err(|_| Error::invalid(name, "the tensor maps' symbol has a NUL byte"))?;
    let (mut address, mut bytes) = (0, 0);
    // SAFETY: a live module; a NUL-terminated name; the driver writes the
    // address and size.
    let r = unsafe { cu::cuModuleGetGlobal_v2(&mut address, &mut bytes, module, symbol.as_ptr()) };
    check_driver(r, name, "cuModuleGetGlobal (GEMM_WGMMA_TENSOR_MAPS)")?;
    if bytes != size_of::<[TensorMap; 2]>() {
        return Err(Error::invalid(
            name,
            format!("{TENSOR_MAPS_SYMBOL} holds {bytes} bytes, not two tensor maps"),
        ));
    }
    Ok(DevicePointer::from_raw(address))
}

/// Tile rows a group of the kernel's grouped tile order spans (see
/// `kernels::gemm_wgmma`).
pub const DEFAULT_GROUP_M: u32 = 16;

impl WgmmaGemm<'_> {
    /// Sets the tile rows a group of the grouped tile order spans (1: row
    /// by row), for tuning.
    pub fn set_group_m(&mut self, group_m: u32) {
        self.group_m = group_m.max(1);
    }

    /// Queues the GEMM on `gpu`'s stream (the GPU it was planned on): the
    /// copy of its tensor maps into the module's global, then the kernel
    /// (see the module docs); nothing is allocated and nothing waited for.
    pub fn launch(&self, gpu: &Gpu) -> Result<()> {
        let name = self.kernel.name();
        let WgmmaShape {
            m,
            n,
            k,
            batches,
            ldc,
            c_batch_stride,
            ..
        } = self.shape;
        let tiles = m.div_ceil(BLOCK_M as usize) * n.div_ceil(BLOCK_N as usize);
        let cfg = LaunchConfig {
            grid: (tiles as u32, 1, batches as u32),
            block: (THREADS, 1, 1),
            shared_mem_bytes: SHARED_BYTES,
        };
        gpu.bind()?;
        let function = gpu.raw_function(name)?;
        let stream = gpu.stream().as_cust()?;
        let maps = tensor_maps_global(name, function)?;
        let b_map = DevicePointer::<u64>::from_raw(maps.as_raw() + size_of::<TensorMap>() as u64);
        let args = (
            maps,
            b_map,
            self.c,
            m as u32,
            n as u32,
            k as u32,
            ldc as u32,
            c_batch_stride as u64,
            self.alpha,
            self.beta,
            self.group_m,
        );
        // One copy and its launch at a time: another thread's copy between
        // them would give this launch that thread's maps.
        static LAUNCHING: Mutex<()> = Mutex::new(());
        let _launching = LAUNCHING.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: `maps` is the module's global of two tensor maps (its size
        // checked), `self.maps` 256 readable bytes; the copy is queued on the
        // stream the kernel follows on, after every earlier launch that read
        // the global (stream order), and the driver has taken the source
        // bytes when the call returns.
        let r = unsafe {
            cu::cuMemcpyHtoDAsync_v2(
                maps.as_raw(),
                self.maps.as_ptr().cast(),
                size_of::<[TensorMap; 2]>(),
                stream.as_inner(),
            )
        };
        check_driver(r, name, "cuMemcpyHtoDAsync (tensor maps)")?;
        // SAFETY: the kernel's contract: 384 threads, SHARED_BYTES (opted in
        // by the plan), the grid covering C; the maps (copied just before, in
        // stream order) describe A and B inside their buffers, and C holds
        // the shape (checked by the plan, whose borrows keep them alive).
        unsafe { launch_function(function, self.kernel, cfg, stream, args) }
    }
}
