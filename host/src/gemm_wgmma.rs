//! The Hopper GEMM's launcher (`kernels::gemm_wgmma`, sm_90a): tensor maps
//! made with the driver's `cuTensorMapEncodeTiled`, found at run time, and
//! the launch with its opt-in shared memory.
//!
//! A launch costs no allocation, no wait and, for operands seen before, no
//! copy: a tensor map depends on the operands' addresses, shapes and strides
//! alone (never on their data), so each [`Gpu`] keeps the maps of the last
//! [`TENSOR_MAP_SLOTS`] operand pairs in slots of its module's global
//! `GEMM_WGMMA_TENSOR_MAPS`, with a table of what each slot holds
//! ([`Gpu::launcher_state`], made once with the kernels' shared-memory
//! attribute and the global's address). A launch of known operands passes
//! their slot's addresses; new operands take the next slot in turn, written
//! by a copy queued on the launch's stream just before the kernel. Every
//! launch that reads the slots is queued on that one stream (the `Gpu`'s,
//! of the module that holds them), so the stream orders a slot's copy after
//! every earlier launch that read its old maps and before its own; the
//! table's lock keeps a copy and its launch together when several threads
//! launch on one `Gpu`.
//!
//! `C = alpha · A · Bᵀ + beta · C` per batch, A `m × k` and B `n × k`
//! row-major (both K-major), C `m × n` row-major f32; the operands bf16 or
//! f16 (16-bit words, the `half` crate's bits) or f32 multiplied as tf32.
//! TMA needs each operand's start and leading dimension 16-byte aligned:
//! [`Gpu::gemm_wgmma`](crate::gemm_wgmma::WgmmaGemmExt::gemm_wgmma) refuses other operands ([`Error::InvalidInput`]), for
//! the caller to take another path.
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::sync::{Mutex, OnceLock};

pub use cuda_kernels_gpu::device::hopper::TensorMap;
use cuda_kernels_gpu::device::kernel::Kernel;
use cuda_kernels_gpu::gemm_wgmma::{
    BLOCK_M, BLOCK_N, GEMM_WGMMA_BF16, GEMM_WGMMA_F16, GEMM_WGMMA_TF32, KERNELS, ROW_BYTES,
    SHARED_BYTES, TENSOR_MAP_SLOTS, TENSOR_MAPS_SYMBOL, THREADS,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    // One batch: its stride is never stepped (and may be anything, 0
    // included, which the driver refuses); the batch's own size stands in.
    let batch_stride = if batches == 1 {
        rows * ld
    } else {
        batch_stride
    };
    let strides = [ld as u64 * bytes, batch_stride as u64 * bytes];
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

/// What a GEMM's two tensor maps are made from, and all they depend on:
/// the key of the slots' table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct MapsKey {
    input: WgmmaInput,
    /// A's and B's device addresses.
    a: u64,
    b: u64,
    /// The shape, its C fields (`ldc`, `c_batch_stride`) zeroed: the maps
    /// describe A and B alone.
    shape: WgmmaShape,
}

impl MapsKey {
    fn new(input: WgmmaInput, a: u64, b: u64, shape: &WgmmaShape) -> Self {
        Self {
            input,
            a,
            b,
            shape: WgmmaShape {
                ldc: 0,
                c_batch_stride: 0,
                ..*shape
            },
        }
    }

    /// A's then B's tensor map; `kernel` is named in the driver's refusal.
    fn encode(&self, kernel: &'static str) -> Result<[TensorMap; 2]> {
        let s = &self.shape;
        Ok([
            tensor_map(
                kernel,
                self.input,
                self.a,
                (s.m, s.k, s.batches),
                (s.lda, s.a_batch_stride),
                BLOCK_M,
            )?,
            tensor_map(
                kernel,
                self.input,
                self.b,
                (s.n, s.k, s.batches),
                (s.ldb, s.b_batch_stride),
                BLOCK_N,
            )?,
        ])
    }
}

/// A [`Gpu`]'s state for the wgmma GEMM ([`Gpu::launcher_state`]): the
/// address of its module's tensor-map slots and what each slot holds (see
/// the module docs); made once, when the kernels' shared memory is opted in.
struct TensorMapSlots {
    /// The device address of `GEMM_WGMMA_TENSOR_MAPS`.
    global: u64,
    table: Mutex<SlotTable>,
}

/// Which operands' maps each slot holds.
#[derive(Default)]
struct SlotTable {
    /// The slot of each key held.
    slot_of: HashMap<MapsKey, usize>,
    /// The key each slot holds, by slot.
    held: Vec<MapsKey>,
    /// The slot new operands take next (the oldest written, once all are).
    next: usize,
}

impl TensorMapSlots {
    /// Sets the wgmma kernels' opt-in shared memory and finds the slots'
    /// global in `gpu`'s module; an error names `name`.
    fn new(gpu: &Gpu, name: &'static str) -> Result<Self> {
        gpu.bind()?;
        let mut global = None;
        for &entry in KERNELS {
            let function = gpu.raw_function(entry)?;
            // SAFETY: a live function of this GPU's module; the attribute and
            // its value are the driver's (within the device's opt-in maximum).
            let r = unsafe {
                cu::cuFuncSetAttribute(
                    function,
                    cu::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    SHARED_BYTES as c_int,
                )
            };
            check_driver(r, name, "cuFuncSetAttribute (dynamic shared memory)")?;
            if global.is_none() {
                global = Some(tensor_maps_global(name, function)?);
            }
        }
        let global = global.ok_or_else(|| Error::invalid(name, "no wgmma entry point"))?;
        Ok(Self {
            global,
            table: Mutex::default(),
        })
    }

    /// The slot of `key`: the one that holds it, or the next in turn,
    /// written with `maps` (made by `encode` when `None`) by a copy queued
    /// on `stream` (see the module docs). The caller holds `table`'s lock
    /// until its launch is queued.
    fn slot(
        &self,
        table: &mut SlotTable,
        key: &MapsKey,
        maps: Option<&[TensorMap; 2]>,
        name: &'static str,
        stream: &cust::stream::Stream,
    ) -> Result<u64> {
        let bytes = size_of::<[TensorMap; 2]>();
        if let Some(&slot) = table.slot_of.get(key) {
            return Ok(self.global + (slot * bytes) as u64);
        }
        let maps = match maps {
            Some(maps) => *maps,
            None => key.encode(name)?,
        };
        let slot = table.next;
        table.next = (slot + 1) % TENSOR_MAP_SLOTS;
        if let Some(old) = table.held.get(slot).copied() {
            table.slot_of.remove(&old);
        }
        let address = self.global + (slot * bytes) as u64;
        // SAFETY: the slot lies inside the module's global (its size
        // checked), `maps` is 256 readable bytes; the copy is queued on the
        // stream of every launch that reads the slots, after each earlier
        // one (stream order), and the driver has taken the source bytes
        // when the call returns.
        let r = unsafe {
            cu::cuMemcpyHtoDAsync_v2(address, maps.as_ptr().cast(), bytes, stream.as_inner())
        };
        check_driver(r, name, "cuMemcpyHtoDAsync (tensor maps)")?;
        if slot < table.held.len() {
            table.held[slot] = *key;
        } else {
            table.held.push(*key);
        }
        table.slot_of.insert(*key, slot);
        Ok(address)
    }
}

/// A GEMM ready to launch: its operands checked and their tensor maps made
/// ([`Gpu::gemm_wgmma_plan`](crate::gemm_wgmma::WgmmaGemmExt::gemm_wgmma_plan));
/// [`launch`](Self::launch) queues it, as often as wanted, while the borrowed
/// operands live.
pub struct WgmmaGemm<'a> {
    kernel: Kernel<GemmParams>,
    /// What the tensor maps are made from.
    key: MapsKey,
    /// A's then B's map, when the plan made them (the `Gpu` held none of
    /// these operands then).
    maps: Option<[TensorMap; 2]>,
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
        let key = MapsKey::new(input, a_ptr, b_ptr, shape);
        let slots = self.launcher_state(name, || TensorMapSlots::new(self, name))?;
        let held = slots
            .table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .slot_of
            .contains_key(&key);
        // New operands: the maps are made here, so that the driver's refusal
        // is the plan's error.
        let maps = if held { None } else { Some(key.encode(name)?) };
        Ok(WgmmaGemm {
            kernel,
            key,
            maps,
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
/// another size than [`TENSOR_MAP_SLOTS`] pairs of maps, is an error naming
/// the kernel.
fn tensor_maps_global(name: &'static str, function: cu::CUfunction) -> Result<u64> {
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
    if bytes != size_of::<[[TensorMap; 2]; TENSOR_MAP_SLOTS]>() {
        return Err(Error::invalid(
            name,
            format!(
                "{TENSOR_MAPS_SYMBOL} holds {bytes} bytes, not {TENSOR_MAP_SLOTS} slots of two tensor maps"
            ),
        ));
    }
    Ok(address)
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
    /// kernel, reading its tensor maps from their slot, after the copy that
    /// writes them there if `gpu` holds none of these operands (see the
    /// module docs); nothing is allocated and nothing waited for.
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
        let slots = gpu.launcher_state(name, || TensorMapSlots::new(gpu, name))?;
        // The slot's copy (if any) and the launch together: another thread's
        // copy into the slot between them would give this launch other maps.
        let mut table = slots.table.lock().unwrap_or_else(|e| e.into_inner());
        let a_map = slots.slot(&mut table, &self.key, self.maps.as_ref(), name, stream)?;
        let b_map = a_map + size_of::<TensorMap>() as u64;
        let args = (
            DevicePointer::<u64>::from_raw(a_map),
            DevicePointer::<u64>::from_raw(b_map),
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
        // SAFETY: the kernel's contract: 384 threads, SHARED_BYTES (opted in
        // when the slots were made), the grid covering C; the slot holds the
        // maps of this plan's key (written, if it was not, by a copy queued
        // just before on this stream), which describe A and B inside their
        // buffers, and C holds the shape (checked by the plan, whose borrows
        // keep them alive).
        unsafe { launch_function(function, self.kernel, cfg, stream, args) }
    }
}
