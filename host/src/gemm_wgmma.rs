//! The Hopper GEMM's launcher (`kernels::gemm_wgmma`, sm_90a): tensor maps
//! made with the driver's `cuTensorMapEncodeTiled`, found at run time, and
//! the launch with its opt-in shared memory.
//!
//! A launch costs no allocation, no wait and, for operands seen before, no
//! copy: a tensor map depends on the operands' addresses, shapes and strides
//! alone (never on their data), so each [`Gpu`] keeps the maps of the last
//! [`TENSOR_MAP_SLOTS`] operand triples (A, B and, when the TMA epilogue
//! stores it, C) in slots of its module's global
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
//! `C = alpha · op(A) · op(B) + beta · C` per batch in the four layouts of
//! the GEMM family ([`GemmShape`]: NN, NT, TN, TT; tf32 NT only, as wgmma
//! reads tf32 K-major alone), C row-major in f32 or the 16-bit input type.
//! C is stored through TMA from shared memory ([`WgmmaEpilogue::Tma`], the
//! default), with its own tensor map, when `beta = 0` and C's start,
//! leading dimension and batch stride are 16-byte aligned, else straight
//! from registers (pairs of adjacent columns). A C whose pairs are not
//! aligned (an odd `ldc`, say), and every split of k, goes through an f32
//! workspace of aligned rows that the kernel stores (through TMA) and
//! `gemm_split_reduce_*` sums into C with alpha and beta.
//! TMA needs each operand's start, leading dimension and batch stride
//! 16-byte aligned: the plan refuses other operands ([`Error::InvalidInput`]),
//! and the dispatcher ([`Gpu::gemm_on_device`](crate::matrices::gemm::GemmExt::gemm_on_device))
//! stages them into aligned rows first.
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::sync::{Mutex, OnceLock};

pub use cuda_kernels_gpu::device::hopper::TensorMap;
use cuda_kernels_gpu::device::kernel::Kernel;
use cuda_kernels_gpu::gemm::{REDUCE_THREADS, SplitReduceParams};
use cuda_kernels_gpu::gemm_wgmma::{
    BLOCK_M, BLOCK_N, BLOCK_N_NARROW, C_BOX_ROW_BYTES, C_BOX_ROWS, KERNELS, MAPS_PER_SLOT, MN_BOX,
    ROW_BYTES, SHARED_BYTES, TENSOR_MAP_SLOTS, TENSOR_MAPS_SYMBOL, THREADS, WgmmaParams,
};
use cust::memory::DevicePointer;
use cust::sys as cu;

use crate::dynlib::DynLib;
use crate::error::{Error, Result, check_driver};
use crate::gpu::Gpu;
use crate::kernel::launch_function;
use crate::launch::LaunchConfig;
use crate::matrices::gemm::{GemmInput, GemmOutput, GemmShape, Op, operand_aligned, scratch};
use crate::memory::{DeviceBuffer, DeviceSlice};

mod simulated;

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

impl WgmmaInput {
    /// Bytes of one element.
    pub const fn bytes(self) -> usize {
        match self {
            Self::Bf16 | Self::F16 => 2,
            Self::Tf32 => 4,
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
}

/// The environment variable that picks the wgmma kernel's epilogue
/// ([`WgmmaEpilogue`]): `tma` (the default) or `registers`. Read once per
/// process, when the first plan is made.
pub const GEMM_EPILOGUE_ENV: &str = "CUDA_KERNELS_GEMM_EPILOGUE";

/// How the wgmma kernel stores C (see `kernels::gemm_wgmma`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WgmmaEpilogue {
    /// Each thread stores its fragment from registers (pairs of adjacent
    /// columns where aligned), reading C when `beta ≠ 0`.
    Registers,
    /// Each consumer stages boxes of C in shared memory and stores them
    /// with TMA, asynchronously, where C allows it (`beta = 0`, C's start,
    /// leading dimension and batch stride 16-byte aligned, or the f32
    /// workspace of a split or unaligned C);
    /// [`Registers`](Self::Registers) elsewhere. The default: on an H200
    /// (2026-12-02) it ran 0.98–1.13 of cuBLAS on the bench's squares where
    /// the register epilogue ran 0.90–1.0, and 8192 × 8192 × 512 at 1.01
    /// instead of 0.83.
    #[default]
    Tma,
}

impl WgmmaEpilogue {
    /// Its name, as [`GEMM_EPILOGUE_ENV`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Registers => "registers",
            Self::Tma => "tma",
        }
    }

    /// The epilogue [`GEMM_EPILOGUE_ENV`] picks (the default when unset);
    /// another value is an error naming `kernel`.
    pub fn from_env(kernel: &'static str) -> Result<Self> {
        static PICKED: OnceLock<std::result::Result<WgmmaEpilogue, String>> = OnceLock::new();
        let picked = PICKED.get_or_init(|| {
            let epilogues = [Self::Registers, Self::Tma].map(|e| (e.name(), e));
            crate::util::env_choice(GEMM_EPILOGUE_ENV, &epilogues).map(Option::unwrap_or_default)
        });
        picked.clone().map_err(|why| Error::invalid(kernel, why))
    }
}

/// The index of a layout in [`GemmOutput::WGMMA`]: NN, NT, TN, TT.
pub const fn layout_index(op_a: Op, op_b: Op) -> usize {
    (matches!(op_a, Op::T) as usize) * 2 + matches!(op_b, Op::T) as usize
}

/// Whether the operand stored with `op` is read MN-major by the kernel: A
/// stored `k × m` (T), B stored `k × n` (N).
const fn mn_major(operand: Operand, op: Op) -> bool {
    matches!((operand, op), (Operand::A, Op::T) | (Operand::B, Op::N))
}

/// Which operand a tensor map describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operand {
    A,
    B,
}

impl Operand {
    /// Rows (of C's m or n) a block's tile of this operand spans, the
    /// tiles `tile_n` columns of C wide.
    const fn tile_rows(self, tile_n: u32) -> u32 {
        match self {
            Self::A => BLOCK_M,
            Self::B => tile_n,
        }
    }

    /// The operation named when the driver refuses a map: the call, the
    /// operand, its orientation and box.
    const fn encode_operation(self, mn: bool, input: WgmmaInput, tile_n: u32) -> &'static str {
        match (self, mn, input) {
            (Self::B, false, WgmmaInput::Bf16 | WgmmaInput::F16) if tile_n == BLOCK_N_NARROW => {
                "cuTensorMapEncodeTiled (B stored n × k, box 64 × 128 × 1 16-bit)"
            }
            (_, true, _) => match self {
                Self::A => "cuTensorMapEncodeTiled (A stored k × m, box 64 × 64 × 1 16-bit)",
                Self::B => "cuTensorMapEncodeTiled (B stored k × n, box 64 × 64 × 1 16-bit)",
            },
            (Self::A, false, WgmmaInput::Tf32) => {
                "cuTensorMapEncodeTiled (A stored m × k, box 32 × 128 × 1 f32)"
            }
            (Self::B, false, WgmmaInput::Tf32) => {
                "cuTensorMapEncodeTiled (B stored n × k, box 32 × 256 × 1 f32)"
            }
            (Self::A, false, _) => {
                "cuTensorMapEncodeTiled (A stored m × k, box 64 × 128 × 1 16-bit)"
            }
            (Self::B, false, _) => {
                "cuTensorMapEncodeTiled (B stored n × k, box 64 × 256 × 1 16-bit)"
            }
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

/// The tensor map of one operand as stored: `outer × inner` per batch
/// (`inner` contiguous), `ld` and `batch_stride` in elements; box
/// `ROW_BYTES / bytes × tile rows × 1` for a K-major operand (inner = k; B's
/// tile rows the tile's width, `tile_n`), or
/// `64 × 64 × 1` for an MN-major one (inner = m or n, outer = k); 128-byte
/// swizzle, zeros out of bounds. On the simulator (`simulated`), the same
/// arguments in the simulator's format.
#[allow(clippy::too_many_arguments)]
fn tensor_map(
    simulated: bool,
    kernel: &'static str,
    input: WgmmaInput,
    operand: Operand,
    mn: bool,
    tile_n: u32,
    base: u64,
    (outer, inner, batches): (usize, usize, usize),
    (ld, batch_stride): (usize, usize),
) -> Result<TensorMap> {
    let bytes = input.bytes();
    let boxes = if mn {
        [MN_BOX, ROW_BYTES / bytes as u32, 1]
    } else {
        [ROW_BYTES / bytes as u32, operand.tile_rows(tile_n), 1]
    };
    encode_map(
        simulated,
        kernel,
        operand.encode_operation(mn, input, tile_n),
        (input.tensor_map_type(), bytes),
        base,
        (outer, inner, batches),
        (ld, batch_stride),
        boxes,
    )
}

/// A 3-D tensor map of `outer × inner × batches` elements of `bytes` bytes
/// (`map_type`, a `CUtensorMapDataType`) at `base`, rows `ld` and batches
/// `batch_stride` elements apart, box `boxes`, 128-byte swizzle, zeros out of
/// bounds; `operation` is named when the driver refuses it. On the simulator
/// (`simulated`), the same arguments in the simulator's format.
#[allow(clippy::too_many_arguments)]
fn encode_map(
    simulated: bool,
    kernel: &'static str,
    operation: &'static str,
    (map_type, bytes): (c_int, usize),
    base: u64,
    (outer, inner, batches): (usize, usize, usize),
    (ld, batch_stride): (usize, usize),
    boxes: [u32; 3],
) -> Result<TensorMap> {
    let encode = if simulated {
        simulated::ENCODE_TILED
    } else {
        encode_tiled().map_err(|e| Error::invalid(kernel, e))?
    };
    let bytes = bytes as u64;
    let dims = [inner as u64, outer as u64, batches as u64];
    // One batch: its stride is never stepped (and may be anything, 0
    // included, which the driver refuses); the batch's own size stands in.
    let batch_stride = if batches == 1 {
        outer as u64 * ld as u64
    } else {
        batch_stride as u64
    };
    let strides = [ld as u64 * bytes, batch_stride * bytes];
    let element_strides = [1u32; 3];
    let mut map = TensorMap([0; 16]);
    // SAFETY: every array has the rank's length (3, strides 2); `map` is a
    // 64-byte aligned CUtensorMap; the enums are cuda.h's values (interleave
    // none 0, swizzle 128B 3, L2 promotion 256B 3, OOB fill none 0).
    let r = unsafe {
        encode(
            &mut map,
            map_type,
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
    check_driver(r, kernel, operation)?;
    Ok(map)
}

/// C as the TMA epilogue stores it (see `kernels::gemm_wgmma`): its
/// address, element (`CUtensorMapDataType` and bytes), leading dimension
/// and batch stride in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct TmaC {
    address: u64,
    map_type: c_int,
    bytes: usize,
    ldc: usize,
    stride_c: usize,
    /// The map's third dimension: the batches, or for a split-k workspace
    /// the splits' batches after one another.
    planes: usize,
}

impl TmaC {
    /// C of `shape` at `address` with elements named `name` (`f32`, `bf16`,
    /// `f16`), when the TMA epilogue can store it: `beta = 0` (C is not
    /// read) and C's start, leading dimension and (with several batches)
    /// batch stride 16-byte aligned, as TMA needs.
    fn new(name: &str, address: u64, shape: &GemmShape, beta: f32) -> Option<Self> {
        let (map_type, bytes) = match name {
            "f32" => (7, 4),
            "bf16" => (9, 2),
            "f16" => (6, 2),
            _ => return None,
        };
        let aligned = address.is_multiple_of(16)
            && (shape.ldc * bytes).is_multiple_of(16)
            && (shape.batches == 1 || (shape.stride_c * bytes).is_multiple_of(16));
        (beta == 0.0 && aligned).then_some(Self {
            address,
            map_type,
            bytes,
            ldc: shape.ldc,
            stride_c: shape.stride_c,
            planes: shape.batches,
        })
    }

    /// The f32 workspace at `address` (16-byte aligned: an allocation's
    /// start) of `planes` planes (splits · batches) of `m` rows of `ldw`
    /// (a multiple of 4), `m · ldw` apart.
    fn workspace(address: u64, m: usize, ldw: usize, planes: usize) -> Self {
        Self {
            address,
            map_type: 7,
            bytes: 4,
            ldc: ldw,
            stride_c: m * ldw,
            planes,
        }
    }

    /// C's tensor map: `n × m × planes`, box one epilogue box (128-byte
    /// rows of [`C_BOX_ROWS`] rows).
    fn encode(
        &self,
        kernel: &'static str,
        shape: &GemmShape,
        simulated: bool,
    ) -> Result<TensorMap> {
        encode_map(
            simulated,
            kernel,
            "cuTensorMapEncodeTiled (C, box 128 bytes × 64 rows × 1)",
            (self.map_type, self.bytes),
            self.address,
            (shape.m, shape.n, self.planes),
            (self.ldc, self.stride_c),
            [C_BOX_ROW_BYTES / self.bytes as u32, C_BOX_ROWS, 1],
        )
    }
}

/// What a GEMM's tensor maps are made from, and all they depend on: the
/// key of the slots' table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct MapsKey {
    input: WgmmaInput,
    /// The tile's width (B's K-major box rows follow it).
    tile_n: u32,
    /// A's and B's device addresses.
    a: u64,
    b: u64,
    /// The shape, its C fields (`ldc`, `stride_c`) zeroed: those are in `c`.
    shape: GemmShape,
    /// C, when the TMA epilogue stores it (its map is the slot's third).
    c: Option<TmaC>,
}

impl MapsKey {
    fn new(
        input: WgmmaInput,
        tile_n: u32,
        a: u64,
        b: u64,
        shape: &GemmShape,
        c: Option<TmaC>,
    ) -> Self {
        Self {
            input,
            tile_n,
            a,
            b,
            shape: GemmShape {
                ldc: 0,
                stride_c: 0,
                ..*shape
            },
            c,
        }
    }

    /// A's, B's and C's tensor map (C's zeros without `c`; in the
    /// simulator's format when `simulated`); `kernel` is named in the
    /// driver's refusal.
    fn encode(&self, kernel: &'static str, simulated: bool) -> Result<[TensorMap; MAPS_PER_SLOT]> {
        let s = &self.shape;
        let (a_rows, a_cols) = s.a_stored();
        let (b_rows, b_cols) = s.b_stored();
        Ok([
            tensor_map(
                simulated,
                kernel,
                self.input,
                Operand::A,
                mn_major(Operand::A, s.op_a),
                self.tile_n,
                self.a,
                (a_rows, a_cols, s.batches),
                (s.lda, s.stride_a),
            )?,
            tensor_map(
                simulated,
                kernel,
                self.input,
                Operand::B,
                mn_major(Operand::B, s.op_b),
                self.tile_n,
                self.b,
                (b_rows, b_cols, s.batches),
                (s.ldb, s.stride_b),
            )?,
            match &self.c {
                Some(c) => c.encode(kernel, s, simulated)?,
                None => TensorMap([0; 16]),
            },
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
        maps: Option<&[TensorMap; MAPS_PER_SLOT]>,
        name: &'static str,
        stream: &cust::stream::Stream,
    ) -> Result<u64> {
        let bytes = size_of::<[TensorMap; MAPS_PER_SLOT]>();
        if let Some(&slot) = table.slot_of.get(key) {
            return Ok(self.global + (slot * bytes) as u64);
        }
        let maps = match maps {
            Some(maps) => *maps,
            None => key.encode(name, false)?,
        };
        let slot = table.next;
        table.next = (slot + 1) % TENSOR_MAP_SLOTS;
        if let Some(old) = table.held.get(slot).copied() {
            table.slot_of.remove(&old);
        }
        let address = self.global + (slot * bytes) as u64;
        // SAFETY: the slot lies inside the module's global (its size
        // checked), `maps` is `bytes` readable bytes; the copy is queued on the
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

/// The entries of one tile width: the GEMM's (output `O`) and the f32 one
/// that writes split-k partial products (where the input has one).
type TileKernels<O> = (Kernel<WgmmaParams<O>>, Option<Kernel<WgmmaParams<f32>>>);

/// A GEMM ready to launch on the wgmma kernel: its problem checked, its
/// kernel chosen and its tensor maps made
/// ([`Gpu::gemm_wgmma_plan`](crate::gemm_wgmma::WgmmaGemmExt::gemm_wgmma_plan));
/// [`launch`](Self::launch) queues it on the `Gpu` it was planned on, as
/// often as wanted, while the borrowed `Gpu` and operands live.
pub struct WgmmaGemm<'a, O: cust::memory::DeviceCopy> {
    gpu: &'a Gpu,
    kernel: Kernel<WgmmaParams<O>>,
    /// The f32-output entry of the same input, layout and tile, which
    /// writes the split-k partial products, and the reduction into C.
    split_kernels: (
        Option<Kernel<WgmmaParams<f32>>>,
        Kernel<SplitReduceParams<O>>,
    ),
    /// The entries of each tile width (the GEMM's and the split-k
    /// partials'): 128 × 256, and 128 × 128 where one exists (16-bit inputs,
    /// f32 C).
    wide: TileKernels<O>,
    narrow: Option<TileKernels<O>>,
    /// The plan's choice of tile width, and why ([`choose_tile_n`]).
    choice: TileChoice,
    /// Splits of k (1: none), each `k_chunk` elements of k (the last fewer).
    splits: u32,
    /// The persistent grid's blocks at most: one an SM (the kernel's shared
    /// memory and registers allow one).
    blocks: u32,
    k_chunk: u32,
    /// The k of one stage of the kernel's ring (64 16-bit or 32 tf32).
    k_stage: u32,
    /// What the tensor maps are made from.
    key: MapsKey,
    /// C as the TMA epilogue would store it, where it can; `key.c` holds it
    /// when that epilogue is chosen.
    tma_c: Option<TmaC>,
    epilogue: WgmmaEpilogue,
    /// A's, B's and C's map, when the plan made them (the `Gpu` held none
    /// of these operands then).
    maps: Option<[TensorMap; MAPS_PER_SLOT]>,
    c: DevicePointer<O>,
    /// Whether the kernel can store C's adjacent columns as aligned pairs
    /// (C's start, `ldc` and batch stride even: the kernel's own rule);
    /// else C goes through the workspace (see [`WgmmaGemm::launch`]).
    c_pairs: bool,
    shape: GemmShape,
    /// The tiles of one batch's C (of the chosen width, `key.tile_n`).
    tiles: u32,
    alpha: f32,
    beta: f32,
    group_m: u32,
    _operands: PhantomData<&'a mut DeviceSlice<O>>,
}

impl<O: cust::memory::DeviceCopy> std::fmt::Debug for WgmmaGemm<'_, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgmmaGemm")
            .field("kernel", &self.kernel.name())
            .field("shape", &self.shape)
            .field("tile", &format_args!("{}", self.choice))
            .field("tiles", &self.tiles)
            .field("group_m", &self.group_m)
            .field("splits", &self.splits)
            .field("k_chunk", &self.k_chunk)
            .field("c_through_workspace", &self.c_through_workspace())
            .field("epilogue", &self.epilogue_used())
            .finish()
    }
}

/// The Hopper wgmma GEMM's planner on a [`Gpu`].
pub trait WgmmaGemmExt {
    /// Checks `C = alpha · op(A) · op(B) + beta · C` of `shape` for the
    /// wgmma kernel and makes its tensor maps (on the simulator, which runs
    /// the kernel's own code, in its format). Refuses, before anything is
    /// queued: an image without
    /// the kernel, or a layout it does not read (tf32 is NT only)
    /// ([`Error::InvalidInput`]); buffers of another device
    /// ([`Error::WrongDevice`]); every refusal of [`GemmShape::check`]
    /// (zero or 32-bit-overflowing dimensions, short leading dimensions,
    /// short buffers, overflowing extents, more batches than the grid
    /// holds); operands TMA cannot read (a start, leading dimension or
    /// batch stride not 16-byte aligned). A map the driver refuses is
    /// [`Error::Cuda`] naming `cuTensorMapEncodeTiled`, the operand and the box.
    #[allow(clippy::too_many_arguments)]
    fn gemm_wgmma_plan<'a, I: GemmInput, O: GemmOutput<I>>(
        &'a self,
        shape: &GemmShape,
        alpha: f32,
        a: &'a DeviceSlice<I::Dev>,
        b: &'a DeviceSlice<I::Dev>,
        beta: f32,
        c: &'a mut DeviceSlice<O::Dev>,
    ) -> Result<WgmmaGemm<'a, O::Dev>>;
}

/// The wgmma entry point for `I` inputs, `O` output and `shape`'s layout,
/// or why there is none (tf32 reads K-major operands only: NT).
pub fn wgmma_kernel<I: GemmInput, O: GemmOutput<I>>(
    shape: &GemmShape,
) -> std::result::Result<Kernel<WgmmaParams<O::Dev>>, String> {
    O::WGMMA[layout_index(shape.op_a, shape.op_b)].ok_or_else(|| {
        format!(
            "wgmma reads {} operands K-major only (NT), not {:?}{:?}",
            I::NAME,
            shape.op_a,
            shape.op_b
        )
    })
}

impl WgmmaGemmExt for Gpu {
    #[allow(clippy::too_many_arguments)]
    fn gemm_wgmma_plan<'a, I: GemmInput, O: GemmOutput<I>>(
        &'a self,
        shape: &GemmShape,
        alpha: f32,
        a: &'a DeviceSlice<I::Dev>,
        b: &'a DeviceSlice<I::Dev>,
        beta: f32,
        c: &'a mut DeviceSlice<O::Dev>,
    ) -> Result<WgmmaGemm<'a, O::Dev>> {
        let kernel =
            wgmma_kernel::<I, O>(shape).map_err(|why| Error::invalid(O::MMA.name(), why))?;
        let name = kernel.name();
        shape.check(name, (a.len(), b.len(), c.len()))?;
        self.check_device(name, "a", a)?;
        self.check_device(name, "b", b)?;
        self.check_device(name, "c", c)?;
        // The wide tiles' count bounds every launch's (the narrow ones are
        // used only where theirs fits too).
        tiles_of(shape, BLOCK_N).ok_or_else(|| {
            Error::invalid(
                name,
                format!(
                    "m = {}, n = {}, {} batches: more tiles of {BLOCK_M} × {BLOCK_N} than the kernel's 2^32 - 1 work units",
                    shape.m, shape.n, shape.batches
                ),
            )
        })?;
        let input = I::WGMMA;
        let bytes = input.bytes();
        let (a_ptr, b_ptr) = (a.as_device_ptr().as_raw(), b.as_device_ptr().as_raw());
        let aligned = operand_aligned(a, shape.lda, shape.stride_a, shape.batches)
            && operand_aligned(b, shape.ldb, shape.stride_b, shape.batches);
        if !aligned {
            return Err(Error::invalid(
                name,
                format!(
                    "TMA needs 16-byte aligned operands: A at {a_ptr:#x} (lda {}), B at \
                     {b_ptr:#x} (ldb {}), {bytes}-byte elements",
                    shape.lda, shape.ldb
                ),
            ));
        }
        let c_address = c.as_device_ptr().as_raw();
        let tma_c = TmaC::new(O::NAME, c_address, shape, beta);
        let c_pairs = shape.ldc.is_multiple_of(2)
            && shape.stride_c.is_multiple_of(2)
            && c_address.is_multiple_of(2 * size_of::<O::Dev>() as u64);
        let epilogue = WgmmaEpilogue::from_env(name)?;
        let layout = layout_index(shape.op_a, shape.op_b);
        let wide = (kernel, I::WGMMA_F32[layout]);
        let narrow = O::WGMMA_N128[layout]
            .filter(|_| tiles_of(shape, BLOCK_N_NARROW).is_some())
            .map(|k| (k, I::WGMMA_N128_F32[layout]));
        let k_stage = ROW_BYTES / bytes as u32;
        let k_tiles = shape.k.div_ceil(k_stage as usize);
        let sms = self.multiprocessors(name)?;
        let choice = choose_tile_n(shape, k_tiles, sms as usize, narrow.is_some());
        let (kernel, partials) = if choice.tile_n == BLOCK_N_NARROW {
            narrow.unwrap_or(wide)
        } else {
            wide
        };
        let name = kernel.name();
        let tiles = choice.chosen().tiles as u32;
        let key = MapsKey::new(
            input,
            choice.tile_n,
            a_ptr,
            b_ptr,
            shape,
            tma_c.filter(|_| epilogue == WgmmaEpilogue::Tma),
        );
        let simulated = self.is_simulated();
        let held = !simulated && {
            let slots = self.launcher_state(name, || TensorMapSlots::new(self, name))?;
            let table = slots.table.lock().unwrap_or_else(|e| e.into_inner());
            table.slot_of.contains_key(&key)
        };
        // New operands: the maps are made here, so that the driver's refusal
        // is the plan's error.
        let maps = if held {
            None
        } else {
            Some(key.encode(name, simulated)?)
        };
        let splits = choice.chosen().splits;
        let forced = forced_tile_n(name)?;
        let mut plan = WgmmaGemm {
            gpu: self,
            kernel,
            split_kernels: (partials, O::SPLIT_REDUCE),
            wide,
            narrow,
            choice,
            splits: 1,
            blocks: sms.max(1),
            k_chunk: 0,
            k_stage,
            key,
            tma_c,
            epilogue,
            maps,
            c: c.as_device_ptr(),
            c_pairs,
            shape: *shape,
            tiles,
            alpha,
            beta,
            group_m: DEFAULT_GROUP_M,
            _operands: PhantomData,
        };
        plan.set_splits(splits as u32);
        // A forced width this GEMM has no entry for keeps the plan's choice.
        if let Some(tile_n) = forced.filter(|&t| t == BLOCK_N || plan.narrow.is_some()) {
            plan.set_tile_n(tile_n)?;
        }
        Ok(plan)
    }
}

/// The fewest k-tiles (stages of the kernel's ring) a split of k is given:
/// below that, the fixed cost of a tile (its prologue, epilogue and the
/// partial product's write and read) outweighs the SMs it fills.
pub const MIN_SPLIT_K_TILES: usize = 8;

/// Splits of k for a GEMM of `blocks` tiles (all batches) of `k_tiles`
/// k-tiles each on `sms` multiprocessors: 1 when the tiles fill the SMs
/// (one block an SM: the kernel's shared memory), else as many as fill them
/// without a split shorter than [`MIN_SPLIT_K_TILES`]. A deep-k or skinny
/// product (1024 × 1024 × 16384 is 32 tiles) otherwise leaves most SMs idle.
pub fn split_k(blocks: usize, k_tiles: usize, sms: usize) -> usize {
    if blocks == 0 || blocks >= sms {
        1
    } else {
        (sms / blocks).min(k_tiles / MIN_SPLIT_K_TILES).max(1)
    }
}

/// The tiles of one batch's C, `tile_n` columns wide (128 rows), when
/// all batches' tiles stay below the kernel's 2^32 work units.
fn tiles_of(shape: &GemmShape, tile_n: u32) -> Option<u32> {
    shape
        .m
        .div_ceil(BLOCK_M as usize)
        .checked_mul(shape.n.div_ceil(tile_n as usize))
        .filter(|&t| {
            t.checked_mul(shape.batches)
                .is_some_and(|u| u <= u32::MAX as usize)
        })
        .map(|t| t as u32)
}

/// How a GEMM runs on tiles of one width: its tiles (one batch), the splits
/// of k [`split_k`] gives them, the persistent grid's rounds over all work
/// units, and the time proxy those make ([`choose_tile_n`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileCost {
    /// Columns of C a tile spans (its rows are 128).
    pub tile_n: u32,
    /// The tiles of one batch's C.
    pub tiles: usize,
    /// Splits of k.
    pub splits: usize,
    /// `ceil(tiles · batches · splits / sms)`: the waves of work units
    /// the SMs (one block each) run.
    pub rounds: usize,
    /// rounds × tile width × k-tiles of a split: the time the longest SM
    /// spends in its units, in units of a 128 × 1 × one-stage product (all
    /// units of a round take the same time; the tile's rows are common).
    pub proxy: usize,
}

impl TileCost {
    /// The cost of `shape` (`k_tiles` stages of k) on `sms` multiprocessors
    /// with tiles `tile_n` wide, or `None` if they are too many.
    fn new(shape: &GemmShape, tile_n: u32, k_tiles: usize, sms: usize) -> Option<Self> {
        let tiles = tiles_of(shape, tile_n)? as usize;
        let units = tiles * shape.batches;
        let splits = split_k(units, k_tiles, sms);
        let rounds = (units * splits).div_ceil(sms.max(1));
        let chunk = k_tiles.div_ceil(splits).max(1);
        Some(Self {
            tile_n,
            tiles,
            splits,
            rounds,
            proxy: rounds * tile_n as usize * chunk,
        })
    }
}

impl std::fmt::Display for TileCost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{BLOCK_M}x{} ({} tiles", self.tile_n, self.tiles)?;
        if self.splits > 1 {
            write!(f, " × {} splits of k", self.splits)?;
        }
        let plural = if self.rounds == 1 { "" } else { "s" };
        write!(f, ", {} round{plural})", self.rounds)
    }
}

/// The plan's choice of tile width and the costs it weighed
/// ([`choose_tile_n`]); its `Display` is the plan's `Debug` field `tile`:
/// `128x128 (289 tiles, 3 rounds) vs 128x256 (153 tiles, 2 rounds)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileChoice {
    /// The width chosen: [`BLOCK_N`] or [`BLOCK_N_NARROW`].
    pub tile_n: u32,
    /// The 128 × 256 tiles' cost.
    pub wide: TileCost,
    /// The 128 × 128 tiles' cost, where the GEMM has that entry (16-bit
    /// inputs, f32 C).
    pub narrow: Option<TileCost>,
}

impl TileChoice {
    /// The chosen width's cost.
    pub fn chosen(&self) -> TileCost {
        match self.narrow {
            Some(narrow) if self.tile_n == narrow.tile_n => narrow,
            _ => self.wide,
        }
    }
}

impl std::fmt::Display for TileChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.chosen())?;
        match self.narrow {
            Some(narrow) if self.tile_n == narrow.tile_n => write!(f, " vs {}", self.wide),
            Some(narrow) => write!(f, " vs {narrow}"),
            None => write!(f, " (no 128x128 entry)"),
        }
    }
}

/// The tile width for `shape` (`k_tiles` stages of k) on `sms`
/// multiprocessors, `narrow` whether a 128 × 128 entry exists for it.
///
/// The rule: each width's work units (tiles · batches, times the splits of
/// k [`split_k`] would choose for them) run in `rounds = ceil(units / sms)`
/// waves, one block an SM; a wave takes as long as one unit, whose time is
/// proportional to its tile's area times its k (the tiles' rows are
/// common: width × k-tiles of a split), so the time proxy is rounds × width
/// × k-tiles a split ([`TileCost::proxy`]). The 128 × 128 tiles are chosen
/// when they need fewer splits of k at no larger a proxy (each split costs
/// a workspace round trip and a reduction: 512 × 4096 × 4096 is 64 wide
/// tiles split in 2, or 128 narrow ones whole), or when their proxy is
/// below 3/4 of the wide tiles' (a small product: both fit one round, the
/// narrow units take half the time). Otherwise the wide tiles, which read
/// A and B half as often per product: a narrow proxy a little below the
/// wide one does not pay for that. Measured on an H200 (2026-12-02, bench
/// rows against cuBLAS, wide forced against the plan's choice in one run):
/// 512 × 4096 × 4096 0.80 wide, 1.03 narrow; 256 × 8192 × 8192 0.84, 1.11;
/// 512 × 512 × 16384 0.86, 1.06; 1024 × 1024 × 16384 0.91, 0.97; but 4160³
/// (narrow proxy 0.9 of the wide) 0.91 wide, 0.89 narrow, and 2049 × 2056 ×
/// 2048 (0.75) 0.66 wide, 0.64 narrow.
pub fn choose_tile_n(shape: &GemmShape, k_tiles: usize, sms: usize, narrow: bool) -> TileChoice {
    // The wide tiles' count was checked by the plan; the fallback never runs.
    let wide = TileCost::new(shape, BLOCK_N, k_tiles, sms).unwrap_or(TileCost {
        tile_n: BLOCK_N,
        tiles: 0,
        splits: 1,
        rounds: 0,
        proxy: 0,
    });
    let narrow = narrow
        .then(|| TileCost::new(shape, BLOCK_N_NARROW, k_tiles, sms))
        .flatten();
    let better = narrow.is_some_and(|n| {
        (n.splits < wide.splits && n.proxy <= wide.proxy) || 4 * n.proxy < 3 * wide.proxy
    });
    TileChoice {
        tile_n: if better { BLOCK_N_NARROW } else { BLOCK_N },
        wide,
        narrow,
    }
}

/// A [`Gpu`]'s f32 workspace for split-k partial products
/// ([`Gpu::launcher_state`]): every split launch queues its two kernels on
/// the `Gpu`'s stream while holding the lock, so the stream orders each use
/// after the last.
struct SplitWorkspace(Mutex<Option<DeviceBuffer<f32>>>);

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
    if bytes != size_of::<[[TensorMap; MAPS_PER_SLOT]; TENSOR_MAP_SLOTS]>() {
        return Err(Error::invalid(
            name,
            format!(
                "{TENSOR_MAPS_SYMBOL} holds {bytes} bytes, not {TENSOR_MAP_SLOTS} slots of \
                 {MAPS_PER_SLOT} tensor maps"
            ),
        ));
    }
    Ok(address)
}

/// Tile rows a group of the kernel's grouped tile order spans (see
/// `kernels::gemm_wgmma`).
pub const DEFAULT_GROUP_M: u32 = 16;

/// The environment variable that overrides the plans' tile width, for
/// tuning runs: `256` or `128` (where a GEMM has 128-wide entries: 16-bit
/// inputs with f32 C; others keep 256); the plan's choice
/// ([`choose_tile_n`]) when unset. Read once per process.
pub const GEMM_TILE_N_ENV: &str = "CUDA_KERNELS_GEMM_TILE_N";

/// The width [`GEMM_TILE_N_ENV`] forces, if any; another value is an error
/// naming `kernel`.
fn forced_tile_n(kernel: &'static str) -> Result<Option<u32>> {
    static PICKED: OnceLock<std::result::Result<Option<u32>, String>> = OnceLock::new();
    let picked = PICKED.get_or_init(|| {
        crate::util::env_choice(
            GEMM_TILE_N_ENV,
            &[("256", BLOCK_N), ("128", BLOCK_N_NARROW)],
        )
    });
    picked.clone().map_err(|why| Error::invalid(kernel, why))
}

impl<O: cust::memory::DeviceCopy> WgmmaGemm<'_, O> {
    /// Sets the tiles' width (for tuning and tests; the plan chooses with
    /// [`choose_tile_n`]): 256 ([`BLOCK_N`]) or 128 ([`BLOCK_N_NARROW`],
    /// which exists for 16-bit inputs with f32 C alone), and with it the
    /// splits of k [`split_k`] gives that width's tiles. Another width, or
    /// 128 where there is no such entry, is [`Error::InvalidInput`] and
    /// leaves the plan as it was.
    pub fn set_tile_n(&mut self, tile_n: u32) -> Result<()> {
        let (kernel, partials) = match (tile_n, self.narrow) {
            (BLOCK_N, _) => self.wide,
            (BLOCK_N_NARROW, Some(narrow)) => narrow,
            _ => {
                return Err(Error::invalid(
                    self.kernel.name(),
                    format!(
                        "no {BLOCK_M} × {tile_n} tiles for this GEMM (256, or 128 for 16-bit \
                         inputs with f32 C)"
                    ),
                ));
            }
        };
        let cost = if tile_n == BLOCK_N {
            self.choice.wide
        } else {
            self.choice.narrow.unwrap_or(self.choice.wide)
        };
        self.choice.tile_n = cost.tile_n;
        self.kernel = kernel;
        self.split_kernels.0 = partials;
        self.tiles = cost.tiles as u32;
        if self.key.tile_n != cost.tile_n {
            self.key.tile_n = cost.tile_n;
            // The slot of the new key is found, or its maps made, at launch.
            self.maps = None;
        }
        self.set_splits(cost.splits as u32);
        Ok(())
    }

    /// The tiles' width the launch runs (see [`set_tile_n`](Self::set_tile_n)).
    pub fn tile_n(&self) -> u32 {
        self.key.tile_n
    }

    /// The plan's choice of tile width and the costs it weighed.
    pub fn tile_choice(&self) -> TileChoice {
        self.choice
    }

    /// Sets the tile rows a group of the grouped tile order spans (1: row
    /// by row), for tuning.
    pub fn set_group_m(&mut self, group_m: u32) {
        self.group_m = group_m.max(1);
    }

    /// Sets the splits of k (for tuning; the plan chooses with [`split_k`]):
    /// clamped to what k's stages allow, each split a whole number of
    /// stages. More than one computes f32 partial products in a workspace
    /// the `Gpu` keeps and sums them into C with alpha and beta
    /// (`gemm_split_reduce_*`).
    pub fn set_splits(&mut self, splits: u32) {
        let k = self.shape.k as u32;
        let k_tiles = k.div_ceil(self.k_stage);
        // Work units (tiles · splits · batches) stay below 2^32 (the plan
        // checked tiles · batches).
        let most = u32::MAX / (self.tiles * self.shape.batches as u32);
        let wanted = if self.split_kernels.0.is_some() {
            splits.clamp(1, k_tiles.min(most).max(1))
        } else {
            1
        };
        self.k_chunk = k_tiles.div_ceil(wanted) * self.k_stage;
        self.splits = k.div_ceil(self.k_chunk);
    }

    /// Picks how C is stored (the plan takes [`WgmmaEpilogue::from_env`]);
    /// the TMA epilogue is used only where C allows it (see
    /// [`WgmmaEpilogue::Tma`]).
    pub fn set_epilogue(&mut self, epilogue: WgmmaEpilogue) {
        if epilogue != self.epilogue {
            self.epilogue = epilogue;
            self.key.c = self.tma_c.filter(|_| epilogue == WgmmaEpilogue::Tma);
            // The slot of the new key is found, or its maps made, at launch.
            self.maps = None;
        }
    }

    /// The epilogue the launch's GEMM kernel runs: TMA when chosen and C
    /// allows it, or C goes through the workspace (whose rows TMA always
    /// can store); else the register epilogue.
    pub fn epilogue_used(&self) -> WgmmaEpilogue {
        if self.key.c.is_some()
            || (self.c_through_workspace() && self.epilogue == WgmmaEpilogue::Tma)
        {
            WgmmaEpilogue::Tma
        } else {
            WgmmaEpilogue::Registers
        }
    }

    /// Whether the product goes through the f32 workspace and
    /// `gemm_split_reduce_*` into C: with several splits of k, or a C whose
    /// adjacent columns cannot be stored as aligned pairs (an odd `ldc`,
    /// say), which the kernel would otherwise store element by element (on
    /// an H200, 4097³ with ldc 4097 ran at 338 TFLOP/s against 614 for
    /// 4160³ on the same tiles).
    pub fn c_through_workspace(&self) -> bool {
        self.splits > 1 || !self.c_pairs
    }

    /// The splits of k the launch runs (see [`set_splits`](Self::set_splits)).
    pub fn splits(&self) -> u32 {
        self.splits
    }

    /// The kernel's entry point.
    pub fn kernel_name(&self) -> &'static str {
        self.kernel.name()
    }

    /// Queues the GEMM on its `Gpu`'s stream: the kernel, reading its
    /// tensor maps from their slot, after the copy that writes them there if
    /// the `Gpu` holds none of these operands (see the module docs); nothing
    /// is allocated and nothing waited for.
    pub fn launch(&self) -> Result<()> {
        if self.c_through_workspace() {
            return self.launch_split();
        }
        let s = &self.shape;
        let c = (self.c, s.ldc as u32, s.stride_c as u64);
        let maps = (&self.key, self.maps.as_ref());
        self.launch_tiles(self.kernel, c, (self.alpha, self.beta), 0, maps)
    }

    /// Queues the GEMM through the workspace: the partial products of the
    /// splits (one split: the whole product) into f32 rows of `n` rounded
    /// up to 4 (16 bytes, so TMA stores them), then their sum into C with
    /// alpha and beta.
    fn launch_split(&self) -> Result<()> {
        let gpu = self.gpu;
        let s = &self.shape;
        let name = self.kernel.name();
        let Some(partials) = self.split_kernels.0 else {
            return Err(Error::invalid(
                name,
                "no f32-output entry for the split-k partial products",
            ));
        };
        // Checked, though the plan's bounds (m and n below 2^31, the units
        // below 2^32) keep them far below usize's limit.
        let ldw = s.n.next_multiple_of(4);
        let sizes = || {
            let per_batch = s.m.checked_mul(ldw)?;
            let split_stride = per_batch.checked_mul(s.batches)?;
            Some((
                per_batch,
                split_stride,
                split_stride.checked_mul(self.splits as usize)?,
            ))
        };
        let Some((per_batch, split_stride, len)) = sizes() else {
            return Err(Error::invalid(
                name,
                "the split-k workspace's size overflows",
            ));
        };
        // The `Gpu` keeps the workspace; the simulator (whose launches run
        // when queued) takes one for the launch.
        let workspace = if gpu.is_simulated() {
            None
        } else {
            Some(gpu.launcher_state(name, || Ok(SplitWorkspace(Mutex::new(None))))?)
        };
        let mut held = workspace
            .as_ref()
            .map(|w| w.0.lock().unwrap_or_else(|e| e.into_inner()));
        let mut simulated_w = None;
        let w = match held.as_mut() {
            // SAFETY: every element the reduction reads is written by the
            // partial products' kernel first (queued before it on the stream).
            Some(held) => unsafe { scratch(gpu, name, held, len) }?,
            None => simulated_w.insert(gpu.zeroed::<f32>(len)?),
        };
        // The partials' kernel stores the workspace through TMA (its map the
        // slot's third) when that epilogue is chosen: the workspace is an
        // allocation's start with rows of 16-byte multiples.
        let tma_w = (self.epilogue == WgmmaEpilogue::Tma).then(|| {
            TmaC::workspace(
                w.as_device_ptr().as_raw(),
                s.m,
                ldw,
                self.splits as usize * s.batches,
            )
        });
        let key = MapsKey {
            c: tma_w,
            ..self.key
        };
        let same_maps = self.maps.filter(|_| key == self.key);
        let c = (w.as_device_ptr(), ldw as u32, per_batch as u64);
        self.launch_tiles(
            partials,
            c,
            (1.0, 0.0),
            split_stride as u64,
            (&key, same_maps.as_ref()),
        )?;
        let reduce = self.split_kernels.1;
        // A thread a column (grid x), a block a row (grid y, rows past
        // 65,535 in steps of it): every element its own thread, so the
        // loads are all in flight at once. (Fewer rows a block, each thread
        // looping over rows, left it waiting on one load at a time: on the
        // H200, 4097³ with ldc 4097 took 435 µs where 4160³ took 237.)
        let columns = s.n.div_ceil(REDUCE_THREADS as usize);
        let rows = s.m.min(65_535);
        let cfg = LaunchConfig {
            grid: (columns as u32, rows as u32, s.batches as u32),
            block: (REDUCE_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let args = (
            &**w,
            self.c,
            s.m as u32,
            s.n as u32,
            ldw as u32,
            s.ldc as u32,
            self.splits,
            split_stride as u64,
            per_batch as u64,
            s.stride_c as u64,
            self.alpha,
            self.beta,
        );
        // SAFETY: the workspace holds `splits` blocks of `split_stride` f32
        // (batches of m rows of ldw ≥ n each), written by the kernel queued
        // just before on the same stream; C holds the checked shape (the
        // plan's borrow keeps it alive and unaliased); the grid's z is the
        // batches, its x covers the columns.
        unsafe { gpu.launch(reduce, cfg, gpu.stream(), args) }
    }

    /// Queues `kernel` over the work units (the plan's tiles, splits and
    /// batches), writing `c` (its pointer, ldc and batch stride; the splits
    /// `split_stride` apart) with `alpha` and `beta`, the tensor maps of
    /// `key` (made already: `maps`, or here); through the third, a map of
    /// `c`, when `key` has one.
    fn launch_tiles<T: cust::memory::DeviceCopy>(
        &self,
        kernel: Kernel<WgmmaParams<T>>,
        (c, ldc, c_batch_stride): (DevicePointer<T>, u32, u64),
        (alpha, beta): (f32, f32),
        split_stride: u64,
        (key, maps): (&MapsKey, Option<&[TensorMap; MAPS_PER_SLOT]>),
    ) -> Result<()> {
        let tma_c = key.c.is_some();
        let gpu = self.gpu;
        let name = kernel.name();
        let s = &self.shape;
        let splits = self.splits;
        // The plan checked every dimension and leading dimension below 2^31
        // and the batches within the grid (GemmShape::check): the casts keep
        // their values.
        let (m, n, k) = (s.m as u32, s.n as u32, s.k as u32);
        // The work units the persistent blocks walk: every tile of every
        // split of every batch (below 2^32: the plan's check).
        let units = self.tiles * splits * s.batches as u32;
        let cfg = LaunchConfig {
            grid: (units.min(self.blocks), 1, 1),
            block: (THREADS, 1, 1),
            shared_mem_bytes: SHARED_BYTES,
        };
        let args = |a_map: u64| {
            (
                DevicePointer::<u64>::from_raw(a_map),
                DevicePointer::<u64>::from_raw(a_map + size_of::<TensorMap>() as u64),
                c,
                m,
                n,
                k,
                ldc,
                c_batch_stride,
                alpha,
                beta,
                self.group_m,
                self.k_chunk,
                split_stride,
                units,
                DevicePointer::<u64>::from_raw(if tma_c {
                    a_map + 2 * size_of::<TensorMap>() as u64
                } else {
                    0
                }),
            )
        };
        if gpu.is_simulated() {
            // SAFETY: as below; the plan made the maps (the simulator holds
            // no slots).
            let maps = match maps {
                Some(maps) => *maps,
                None => key.encode(name, true)?,
            };
            return unsafe { simulated::launch(gpu, kernel, cfg, &maps, args) };
        }
        gpu.bind()?;
        let function = gpu.raw_function(name)?;
        let stream = gpu.stream().as_cust()?;
        let slots = gpu.launcher_state(name, || TensorMapSlots::new(gpu, name))?;
        // The slot's copy (if any) and the launch together: another thread's
        // copy into the slot between them would give this launch other maps.
        let mut table = slots.table.lock().unwrap_or_else(|e| e.into_inner());
        let a_map = slots.slot(&mut table, key, maps, name, stream)?;
        // SAFETY: the kernel's contract: 384 threads, SHARED_BYTES (opted in
        // when the slots were made), the grid covering C's tiles and the
        // splits ((splits - 1) · k_chunk < k, k_chunk whole stages: set_splits);
        // the slot holds the maps of `key` (written, if it was not, by a copy
        // queued just before on this stream), which describe A and B inside
        // their buffers and, when `tma_c` (beta 0, C aligned: TmaC), C as `c`
        // is, its planes every split's batches; `c` holds the shape for
        // every split (C
        // checked by the plan, whose borrows keep the buffers and the `Gpu`
        // alive; the workspace sized by launch_split).
        unsafe { launch_function(function, kernel, cfg, stream, args(a_map)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The TMA epilogue takes C only where TMA can store it and C is not
    /// read: `beta = 0`, a 16-byte aligned start, leading dimension and (with
    /// several batches) batch stride, an output type it knows.
    #[test]
    fn the_tma_epilogue_takes_only_aligned_unread_c() {
        let shape = GemmShape::with_ops(100, 64, 32, Op::N, Op::N);
        let c = TmaC::new("f32", 0x1000, &shape, 0.0).expect("aligned f32 C, beta 0");
        assert_eq!((c.map_type, c.bytes, c.ldc), (7, 4, 64));
        assert_eq!(
            TmaC::new("bf16", 0x1000, &shape, 0.0).map(|c| c.map_type),
            Some(9)
        );
        assert_eq!(
            TmaC::new("f16", 0x1000, &shape, 0.0).map(|c| c.map_type),
            Some(6)
        );
        assert!(
            TmaC::new("f32", 0x1000, &shape, 1.0).is_none(),
            "beta ≠ 0 reads C"
        );
        assert!(
            TmaC::new("f32", 0x1004, &shape, 0.0).is_none(),
            "start not 16-byte aligned"
        );
        assert!(
            TmaC::new("f64", 0x1000, &shape, 0.0).is_none(),
            "no such output"
        );
        let odd = GemmShape { ldc: 65, ..shape };
        assert!(
            TmaC::new("f32", 0x1000, &odd, 0.0).is_none(),
            "ldc · 4 not a multiple of 16"
        );
        let sixteen_bit = GemmShape { ldc: 72, ..shape };
        assert!(TmaC::new("bf16", 0x1000, &sixteen_bit, 0.0).is_some());
        let batched = GemmShape {
            batches: 2,
            stride_c: 100 * 64 + 2,
            ..shape
        };
        assert!(
            TmaC::new("f32", 0x1000, &batched, 0.0).is_none(),
            "batch stride unaligned"
        );
        let one_batch = GemmShape {
            stride_c: 3,
            ..shape
        };
        assert!(
            TmaC::new("f32", 0x1000, &one_batch, 0.0).is_some(),
            "one batch: stride unused"
        );
    }

    /// The key holds C only with the TMA epilogue: the register epilogue's
    /// slots do not depend on C.
    #[test]
    fn only_the_tma_epilogue_keys_the_slot_by_c() {
        let shape = GemmShape::with_ops(128, 256, 64, Op::N, Op::T);
        let c = TmaC::new("f32", 0x2000, &shape, 0.0);
        let with = MapsKey::new(WgmmaInput::Bf16, BLOCK_N, 0x1000, 0x3000, &shape, c);
        let without = MapsKey::new(WgmmaInput::Bf16, BLOCK_N, 0x1000, 0x3000, &shape, None);
        assert_ne!(with, without);
        let other_ldc = GemmShape { ldc: 512, ..shape };
        assert_eq!(
            without,
            MapsKey::new(WgmmaInput::Bf16, BLOCK_N, 0x1000, 0x3000, &other_ldc, None)
        );
        // B's K-major box follows the tile's width: another slot.
        assert_ne!(
            without,
            MapsKey::new(
                WgmmaInput::Bf16,
                BLOCK_N_NARROW,
                0x1000,
                0x3000,
                &shape,
                None
            )
        );
    }

    /// The tile width's rule (see `choose_tile_n`) on an H200's 132 SMs: the
    /// narrow tiles where the wide ones need a split of k or leave the last
    /// round far from full, the wide ones otherwise; never narrow where no
    /// entry exists.
    #[test]
    fn the_plan_picks_narrow_tiles_where_they_fill_the_gpu_better() {
        let choose = |m, n, k| {
            let shape = GemmShape::with_ops(m, n, k, Op::N, Op::N);
            choose_tile_n(&shape, k.div_ceil(64), 132, true)
        };
        // 64 wide tiles split in 2 against 128 narrow ones whole.
        let skinny = choose(512, 4096, 4096);
        assert_eq!(skinny.tile_n, BLOCK_N_NARROW, "{skinny}");
        assert_eq!((skinny.wide.tiles, skinny.wide.splits), (64, 2));
        assert_eq!(
            skinny.chosen(),
            TileCost {
                tile_n: 128,
                tiles: 128,
                splits: 1,
                rounds: 1,
                proxy: 128 * 64
            }
        );
        assert_eq!(
            skinny.to_string(),
            "128x128 (128 tiles, 1 round) vs 128x256 (64 tiles × 2 splits of k, 1 round)"
        );
        assert_eq!(choose(256, 8192, 8192).tile_n, BLOCK_N_NARROW);
        // Deep k: fewer splits of the narrow tiles (8 against 16).
        assert_eq!(choose(512, 512, 16384).tile_n, BLOCK_N_NARROW);
        // 153 wide tiles on 132 SMs: 2 rounds; 289 narrow: 3 of half the
        // time, a proxy of 3/4 the wide one's: not enough (measured slower).
        let awkward = choose(2049, 2056, 2048);
        assert_eq!(awkward.tile_n, BLOCK_N);
        assert_eq!(
            awkward.to_string(),
            "128x256 (153 tiles, 2 rounds) vs 128x128 (289 tiles, 3 rounds)"
        );
        // 561 wide tiles, 5 rounds, against 1089 narrow, 9: wide.
        assert_eq!(choose(4160, 4160, 4160).tile_n, BLOCK_N);
        assert_eq!(choose(4097, 4097, 4097).tile_n, BLOCK_N);
        // A small product: one round either way, narrow units half the time.
        assert_eq!(choose(300, 520, 192).tile_n, BLOCK_N_NARROW);
        // Squares whose wide tiles fill the rounds: a tie keeps them.
        for size in [2048, 4096, 8192] {
            let square = choose(size, size, size);
            assert_eq!(square.tile_n, BLOCK_N, "{size}: {square}");
        }
        // No narrow entry (tf32, 16-bit C): wide.
        let shape = GemmShape::with_ops(512, 4096, 4096, Op::N, Op::T);
        let none = choose_tile_n(&shape, 64, 132, false);
        assert_eq!((none.tile_n, none.narrow), (BLOCK_N, None));
        assert_eq!(
            none.to_string(),
            "128x256 (64 tiles × 2 splits of k, 1 round) (no 128x128 entry)"
        );
    }
}
