//! The GEMM family: `C = alpha · op(A) · op(B) + beta · C` over strided
//! batches, with f32 accumulation, for bf16 and f16 inputs (output f32 or
//! the input type) and tf32 from f32 inputs.
//!
//! Two paths, the host picking by device (`GemmPath` in the host crate):
//! - `gemm_mma_*`: the tensor cores through `mma.sync` (sm_80 and later;
//!   these entry points exist only in the sm_80 and later builds): blocks of
//!   [`BLOCK_M`] × [`BLOCK_N`] of C, 8 warps of 64 × 32, k-tiles of
//!   `MmaInput::BK` elements in a [`STAGES`]-deep `cp.async` pipeline in shared
//!   memory (XOR-swizzled 16-byte chunks, [`tile_offset`]), fragments by
//!   `ldmatrix` (16-bit inputs; `.trans` for the operand stored the other
//!   way) or by the fragment layouts (tf32);
//! - `gemm_simt_*`: the CUDA cores, one thread per element of C, each a dot
//!   product in f32 fmas in k order (any GPU; also the path for operands
//!   that are not 16-byte aligned).
//!
//! Matrices are row-major with leading dimensions (`lda` the distance
//! between rows of A as stored). `flags` bit 0: A is stored transposed
//! (`k × m`, "T"), bit 1: B is stored transposed (`n × k`). With
//! `beta == 0` C is not read (a NaN there does not propagate, as in
//! cuBLAS).
use crate::device::float16::{bf16, f16};
use crate::device::thread;

/// Rows of C per block of the mma.sync kernels.
pub const BLOCK_M: usize = 128;
/// Columns of C per block of the mma.sync kernels.
pub const BLOCK_N: usize = 128;
/// Threads per block of the mma.sync kernels (8 warps: 2 along m × 4 along
/// n, each 64 × 32 of C).
pub const MMA_THREADS: u32 = 256;
/// k-tiles in flight in shared memory.
pub const STAGES: usize = 3;
/// The dynamic shared memory of an mma.sync block: [`STAGES`] × (A tile +
/// B tile), 16 KiB each stage (128 × 32 16-bit or 128 × 16 f32 elements
/// per operand).
pub const MMA_SMEM_BYTES: u32 = (STAGES * 2 * BLOCK_M * 64) as u32;
/// Threads per block side of the CUDA-core kernels (16 × 16).
pub const SIMT_BLOCK: u32 = 16;

/// `flags` bit: A stored transposed (`k × m`).
pub const TRANS_A: u32 = 1;
/// `flags` bit: B stored transposed (`n × k`).
pub const TRANS_B: u32 = 2;

/// An input element: widened to f32 exactly.
pub trait GemmInput: Copy + 'static {
    /// The value as f32.
    fn to_f32(self) -> f32;
}

/// An output element: rounded from f32 (nearest, ties to even).
pub trait GemmOutput: Copy + 'static {
    /// `x` rounded to this type.
    fn from_f32(x: f32) -> Self;
    /// The value as f32.
    fn to_f32(self) -> f32;
    /// Two adjacent elements as one aligned word (f32: 8 bytes; 16-bit
    /// types: 4 bytes), the first in the low half: one store instruction
    /// for the pair.
    type Pair: Copy;
    /// `[lo, hi]` packed as [`GemmOutput::Pair`].
    fn pack(lo: Self, hi: Self) -> Self::Pair;
    /// The two elements of a pair, low first.
    fn unpack(pair: Self::Pair) -> [Self; 2];
    /// Stores a pair to shared memory at `addr` (one instruction).
    ///
    /// # Safety
    /// `addr` is a shared-window address aligned to the pair's size, of a
    /// live slot that no other thread reads or writes concurrently.
    unsafe fn store_shared_pair(addr: u32, pair: Self::Pair);
}

impl GemmInput for f32 {
    fn to_f32(self) -> f32 {
        self
    }
}
impl GemmOutput for f32 {
    fn from_f32(x: f32) -> Self {
        x
    }
    fn to_f32(self) -> f32 {
        self
    }
    type Pair = u64;
    fn pack(lo: f32, hi: f32) -> u64 {
        u64::from(lo.to_bits()) | (u64::from(hi.to_bits()) << 32)
    }
    fn unpack(pair: u64) -> [f32; 2] {
        [
            f32::from_bits(pair as u32),
            f32::from_bits((pair >> 32) as u32),
        ]
    }
    unsafe fn store_shared_pair(addr: u32, pair: u64) {
        // SAFETY: the caller's contract.
        unsafe { crate::device::vector::store_shared_b64(addr, pair) }
    }
}

macro_rules! half_io {
    ($($t:ident),*) => {$(
        impl GemmInput for $t {
            fn to_f32(self) -> f32 {
                self.widen()
            }
        }
        impl GemmOutput for $t {
            fn from_f32(x: f32) -> Self {
                $t::narrow(x)
            }
            fn to_f32(self) -> f32 {
                self.widen()
            }
            type Pair = u32;
            fn pack(lo: $t, hi: $t) -> u32 {
                u32::from(lo.to_bits()) | (u32::from(hi.to_bits()) << 16)
            }
            fn unpack(pair: u32) -> [$t; 2] {
                [$t::from_bits(pair as u16), $t::from_bits((pair >> 16) as u16)]
            }
            unsafe fn store_shared_pair(addr: u32, pair: u32) {
                // SAFETY: the caller's contract.
                unsafe { crate::device::vector::store_shared_b32(addr, pair) }
            }
        }
    )*};
}
half_io!(bf16, f16);

/// The epilogue of one element: `alpha · acc + beta · c` (C not read when
/// `beta == 0`), rounded to the output type. Shared with the CPU reference's
/// last step.
#[inline(always)]
pub fn epilogue(acc: f32, alpha: f32, beta: f32, c: f32) -> f32 {
    if beta == 0.0 {
        alpha * acc
    } else {
        crate::device::arith::fma_f32(beta, c, alpha * acc)
    }
}

/// Writes one element of C: `alpha · acc + beta · C` ([`epilogue`]; C read
/// only when `beta != 0`), rounded to the output type.
///
/// # Safety
/// `out` points to an element of C that only this thread writes.
#[inline(always)]
pub unsafe fn store_c<O: GemmOutput>(out: *mut O, acc: f32, alpha: f32, beta: f32) {
    // SAFETY: the caller's contract.
    unsafe {
        let old = if beta == 0.0 { 0.0 } else { (*out).to_f32() };
        *out = O::from_f32(epilogue(acc, alpha, beta, old));
    }
}

/// Writes two adjacent elements of C (`out[0]`, `out[1]`) with one store:
/// [`store_c`] of each, C read (as one load) only when `beta != 0`.
///
/// # Safety
/// `out` points to two elements of C that only this thread writes, aligned
/// to the size of [`GemmOutput::Pair`].
#[inline(always)]
pub unsafe fn store_c_pair<O: GemmOutput>(out: *mut O, acc: [f32; 2], alpha: f32, beta: f32) {
    let out = out.cast::<O::Pair>();
    // SAFETY: the caller's contract.
    unsafe {
        let old = if beta == 0.0 {
            [0.0; 2]
        } else {
            O::unpack(*out).map(O::to_f32)
        };
        *out = O::pack(
            O::from_f32(epilogue(acc[0], alpha, beta, old[0])),
            O::from_f32(epilogue(acc[1], alpha, beta, old[1])),
        );
    }
}

/// The byte offset of element `(row, col)` in a shared tile of `chunks`
/// 16-byte chunks per row, with `size`-byte elements: chunk `c` of row `r`
/// is stored at chunk `c ^ phase(r)` of its row, `phase` cycling through 8
/// (or, for 4-chunk rows, 4) values over the rows that share the 32 banks,
/// so that the 8 rows an `ldmatrix` (or a column of scalar loads) reads hit
/// 8 different bank groups. The one layout the copy and the fragment loads
/// both use.
#[inline(always)]
pub const fn tile_offset(row: usize, col: usize, chunks: usize, size: usize) -> usize {
    let chunk = col * size / 16;
    let within = col * size % 16;
    let phase = if chunks >= 8 { row & 7 } else { (row >> 1) & 3 };
    row * chunks * 16 + ((chunk ^ phase) * 16) + within
}

/// The CUDA-core kernel's body: one thread per element of C, the dot
/// product in k order with f32 fmas.
///
/// # Safety
/// As the entry points' (see the module docs): A, B, C hold every element
/// the shapes, leading dimensions and batch strides reach; C overlaps
/// neither.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn gemm_simt<T: GemmInput, O: GemmOutput>(
    a: *const T,
    b: *const T,
    c: *mut O,
    m: u32,
    n: u32,
    k: u32,
    lda: u32,
    ldb: u32,
    ldc: u32,
    batch_strides: [u64; 3],
    alpha: f32,
    beta: f32,
    flags: u32,
) {
    let (col, row) = thread::index_2d();
    let z = thread::block_idx_z() as usize;
    if row >= m as usize || col >= n as usize {
        return;
    }
    // SAFETY: the batch offsets stay in the buffers (host-checked).
    let (a, b, c) = unsafe {
        (
            a.add(z * batch_strides[0] as usize),
            b.add(z * batch_strides[1] as usize),
            c.add(z * batch_strides[2] as usize),
        )
    };
    let (lda, ldb) = (lda as usize, ldb as usize);
    let (sa_m, sa_k) = if flags & TRANS_A != 0 {
        (1, lda)
    } else {
        (lda, 1)
    };
    let (sb_k, sb_n) = if flags & TRANS_B != 0 {
        (1, ldb)
    } else {
        (ldb, 1)
    };
    let mut acc = 0.0f32;
    for kk in 0..k as usize {
        // SAFETY: row < m, col < n, kk < k: inside A and B (host-checked).
        let (x, y) = unsafe {
            (
                *a.add(row * sa_m + kk * sa_k),
                *b.add(kk * sb_k + col * sb_n),
            )
        };
        acc = crate::device::arith::fma_f32(x.to_f32(), y.to_f32(), acc);
    }
    // SAFETY: row < m, col < n: inside C; one thread per element.
    unsafe { store_c(c.wrapping_add(row * ldc as usize + col), acc, alpha, beta) };
}

/// The parameters of the split-k reductions: `(w, c, m, n, ldw, ldc,
/// splits, split_stride, w_batch_stride, c_batch_stride, alpha, beta)`.
pub type SplitReduceParams<O> = (
    *const f32,
    *mut O,
    u32,
    u32,
    u32,
    u32,
    u32,
    u64,
    u64,
    u64,
    f32,
    f32,
);

/// The parameters of every GEMM entry point: `(a, b, c, m, n, k, lda, ldb,
/// ldc, batch_a, batch_b, batch_c, alpha, beta, flags)`.
pub type GemmParams<T, O> = (
    *const T,
    *const T,
    *mut O,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
    u64,
    u64,
    u64,
    f32,
    f32,
    u32,
);

/// An input type of the mma.sync kernels: how a warp turns one k-tile in
/// shared memory into its 64 × 32 of C.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
pub mod mma {
    use super::{
        BLOCK_M, BLOCK_N, GemmInput, GemmOutput, STAGES, TRANS_A, TRANS_B, store_c, tile_offset,
    };
    use crate::device::float16::{bf16, f16};
    use crate::device::mma::{
        self as tc, A_M16K8_TF32, B_K8N8_TF32, C_M16N8, FragATf32, FragBTf32, MmaHalf,
    };
    use crate::device::shared::{SharedScalar, dynamic_shared_address};
    use crate::device::sync::sync_threads;
    use crate::device::{thread, warp};

    /// `body` 4 (or 2) times with `$i` = 0, 1, … as a constant: the
    /// accumulators and fragments are arrays indexed by these, which stay in
    /// registers only when every index is a constant (a loop LLVM does not
    /// unroll fully would put them in local memory).
    macro_rules! unroll {
        ($i:ident in 2 => $body:block) => {{
            {
                let $i: usize = 0;
                $body
            }
            {
                let $i: usize = 1;
                $body
            }
        }};
        ($i:ident in 4 => $body:block) => {{
            {
                let $i: usize = 0;
                $body
            }
            {
                let $i: usize = 1;
                $body
            }
            {
                let $i: usize = 2;
                $body
            }
            {
                let $i: usize = 3;
                $body
            }
        }};
    }

    /// How an input type computes: its k-tile depth and the per-k-tile work
    /// of one warp.
    pub trait MmaInput: GemmInput {
        /// Elements of k per shared-memory tile (64 bytes of a row).
        const BK: usize;
        /// One k-tile: `acc[mi][ni]` (4 m16 × 4 n8 tiles of the warp at
        /// `(wm, wn)` in the block) += A-tile · B-tile.
        ///
        /// # Safety
        /// `sa`, `sb` address this stage's tiles, filled (waited and
        /// synchronized).
        unsafe fn warp_tile(
            sa: u32,
            sb: u32,
            flags: u32,
            wm: usize,
            wn: usize,
            acc: &mut [[[f32; 4]; 4]; 4],
        );
    }

    /// Chunks per row of an operand tile: `rows × cols` elements of `size`
    /// bytes, stored with `cols` contiguous.
    const fn chunks(cols: usize, size: usize) -> usize {
        cols * size / 16
    }

    macro_rules! half_input {
        ($t:ident) => {
            impl MmaInput for $t {
                const BK: usize = 32;
                #[inline(always)]
                unsafe fn warp_tile(
                    sa: u32,
                    sb: u32,
                    flags: u32,
                    wm: usize,
                    wn: usize,
                    acc: &mut [[[f32; 4]; 4]; 4],
                ) {
                    // SAFETY: forwarded.
                    unsafe { warp_tile_16::<$t>(sa, sb, flags, wm, wn, acc) }
                }
            }
        };
    }
    half_input!(bf16);
    half_input!(f16);

    /// [`MmaInput::warp_tile`] of a 16-bit type: two k16 steps, each 4 + 2
    /// `ldmatrix_x4` and 16 `mma.m16n8k16`.
    #[inline(always)]
    unsafe fn warp_tile_16<T: MmaHalf>(
        sa: u32,
        sb: u32,
        flags: u32,
        wm: usize,
        wn: usize,
        acc: &mut [[[f32; 4]; 4]; 4],
    ) {
        let lane = warp::lane_id() as usize;
        let (ta, tb) = (flags & TRANS_A != 0, flags & TRANS_B != 0);
        unroll!(kk in 2 => {
            let mut fa = [[0u32; 4]; 4];
            unroll!(mi in 4 => {
                let m0 = wm + mi * 16;
                // SAFETY (both arms): the addresses are rows of this stage's A tile.
                fa[mi] = if ta {
                    // Stored k × m (BK rows of BLOCK_M): .trans; matrix i = (m + 8·(i%2), k + 8·(i/2)).
                    let krow = kk * 16 + (lane / 16) * 8 + lane % 8;
                    let mcol = m0 + ((lane / 8) % 2) * 8;
                    unsafe { tc::ldmatrix_x4_trans(sa + tile_offset(krow, mcol, chunks(BLOCK_M, 2), 2) as u32) }
                } else {
                    let mrow = m0 + lane % 16;
                    let kcol = kk * 16 + (lane / 16) * 8;
                    unsafe { tc::ldmatrix_x4(sa + tile_offset(mrow, kcol, chunks(32, 2), 2) as u32) }
                };
            });
            let mut fb = [[0u32; 2]; 4];
            unroll!(pair in 2 => {
                let n0 = wn + pair * 16;
                // Matrices: 0 = (k 0-7, n 0-7), 1 = (k 8-15, n 0-7), 2, 3 the same for n 8-15.
                // SAFETY (both arms): rows of this stage's B tile.
                let r = if tb {
                    let nrow = n0 + (lane / 16) * 8 + lane % 8;
                    let kcol = kk * 16 + ((lane / 8) % 2) * 8;
                    unsafe { tc::ldmatrix_x4(sb + tile_offset(nrow, kcol, chunks(32, 2), 2) as u32) }
                } else {
                    let krow = kk * 16 + ((lane / 8) % 2) * 8 + lane % 8;
                    let ncol = n0 + (lane / 16) * 8;
                    unsafe { tc::ldmatrix_x4_trans(sb + tile_offset(krow, ncol, chunks(BLOCK_N, 2), 2) as u32) }
                };
                fb[2 * pair] = [r[0], r[1]];
                fb[2 * pair + 1] = [r[2], r[3]];
            });
            unroll!(mi in 4 => {
                unroll!(ni in 4 => {
                    acc[mi][ni] = tc::mma_m16n8k16::<T>(
                        tc::FragA::from_regs(fa[mi]),
                        tc::FragB::from_regs(fb[ni]),
                        acc[mi][ni],
                    );
                });
            });
        });
    }

    impl MmaInput for f32 {
        const BK: usize = 16;
        /// Two k8 steps of `mma.m16n8k8.tf32`, the fragments read element
        /// by element where [`A_M16K8_TF32`] and [`B_K8N8_TF32`] put them,
        /// rounded to tf32 (`cvt.rna.tf32.f32`).
        #[inline(always)]
        unsafe fn warp_tile(
            sa: u32,
            sb: u32,
            flags: u32,
            wm: usize,
            wn: usize,
            acc: &mut [[[f32; 4]; 4]; 4],
        ) {
            let lane = warp::lane_id();
            let (ta, tb) = (flags & TRANS_A != 0, flags & TRANS_B != 0);
            // SAFETY: offsets inside this stage's tiles (rows < 128, k < 16).
            let load = |base: u32, row: usize, col: usize, cols: usize| unsafe {
                <u32 as SharedScalar>::load_shared(
                    base + tile_offset(row, col, chunks(cols, 4), 4) as u32,
                )
            };
            unroll!(kk in 2 => {
                let mut fa = [FragATf32 { regs: [0; 4] }; 4];
                unroll!(mi in 4 => {
                    unroll!(e in 4 => {
                        let (row, col) = A_M16K8_TF32.coord(lane, e as u32);
                        let (m, k) = (wm + mi * 16 + row as usize, kk * 8 + col as usize);
                        let x = if ta { load(sa, k, m, BLOCK_M) } else { load(sa, m, k, 16) };
                        fa[mi].regs[e] = tc::to_tf32(f32::from_bits(x));
                    });
                });
                let mut fb = [FragBTf32 { regs: [0; 2] }; 4];
                unroll!(ni in 4 => {
                    unroll!(e in 2 => {
                        let (row, col) = B_K8N8_TF32.coord(lane, e as u32);
                        let (k, n) = (kk * 8 + row as usize, wn + ni * 8 + col as usize);
                        let x = if tb { load(sb, n, k, 16) } else { load(sb, k, n, BLOCK_N) };
                        fb[ni].regs[e] = tc::to_tf32(f32::from_bits(x));
                    });
                });
                unroll!(mi in 4 => {
                    unroll!(ni in 4 => {
                        acc[mi][ni] = tc::mma_m16n8k8_tf32(fa[mi], fb[ni], acc[mi][ni]);
                    });
                });
            });
        }
    }

    /// Copies one operand's k-tile `kt` into the shared tile at `dst` with
    /// 16-byte `cp.async`s (zero-filled past the matrix's edges): the tile is
    /// `rows × cols` elements of the operand as stored (`cols` contiguous),
    /// starting at stored `(row0, col0)`, of a `total_rows × total_cols`
    /// matrix with leading dimension `ld`.
    ///
    /// # Safety
    /// `src` is 16-byte aligned and `ld` a multiple of 16 bytes
    /// (host-checked); the matrix holds `total_rows` rows of `ld`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn load_tile<T>(
        dst: u32,
        src: *const T,
        ld: usize,
        (row0, col0): (usize, usize),
        (rows, cols): (usize, usize),
        (total_rows, total_cols): (usize, usize),
    ) {
        let size = core::mem::size_of::<T>();
        let per_chunk = 16 / size;
        let chunks = cols / per_chunk;
        let tid = thread::thread_idx_x() as usize;
        let mut id = tid;
        while id < rows * chunks {
            let (r, ch) = (id / chunks, id % chunks);
            let (gr, gc) = (row0 + r, col0 + ch * per_chunk);
            let (from, bytes) = if gr < total_rows && gc < total_cols {
                let n = (total_cols - gc).min(per_chunk);
                (src.wrapping_add(gr * ld + gc), (n * size) as u32)
            } else {
                (src, 0)
            };
            // SAFETY: `from` holds `bytes` bytes of the matrix (or none), 16-byte
            // aligned (host-checked alignment of src and ld); the destination
            // chunk is this thread's alone until the wait.
            unsafe {
                tc::cp_async_16(
                    dst + tile_offset(r, ch * per_chunk, chunks, size) as u32,
                    from.cast(),
                    bytes,
                )
            };
            id += super::MMA_THREADS as usize;
        }
    }

    /// The mma.sync kernel's body (see the module docs).
    ///
    /// # Safety
    /// As [`super::gemm_simt`], plus: A and B 16-byte aligned with leading
    /// dimensions of whole 16 bytes; launched with [`super::MMA_THREADS`]
    /// threads, [`super::MMA_SMEM_BYTES`] of dynamic shared memory and a grid
    /// of `(⌈n / BLOCK_N⌉, ⌈m / BLOCK_M⌉, batches)`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub unsafe fn gemm_mma<T: MmaInput, O: GemmOutput>(
        a: *const T,
        b: *const T,
        c: *mut O,
        m: u32,
        n: u32,
        k: u32,
        lda: u32,
        ldb: u32,
        ldc: u32,
        batch_strides: [u64; 3],
        alpha: f32,
        beta: f32,
        flags: u32,
    ) {
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let z = thread::block_idx_z() as usize;
        let a = a.wrapping_add(z * batch_strides[0] as usize);
        let b = b.wrapping_add(z * batch_strides[1] as usize);
        let c = c.wrapping_add(z * batch_strides[2] as usize);
        let bm = thread::block_idx_y() as usize * BLOCK_M;
        let bn = thread::block_idx_x() as usize * BLOCK_N;
        let bk = T::BK;
        let stage_bytes = (BLOCK_M * bk * core::mem::size_of::<T>()) as u32;
        let smem = dynamic_shared_address();
        let tile_a = |s: usize| smem + 2 * s as u32 * stage_bytes;
        let tile_b = |s: usize| tile_a(s) + stage_bytes;
        let (ta, tb) = (flags & TRANS_A != 0, flags & TRANS_B != 0);
        let load = |kt: usize, s: usize| {
            let k0 = kt * bk;
            // SAFETY: the kernel's contract (alignment, extents).
            unsafe {
                if ta {
                    load_tile(tile_a(s), a, lda as usize, (k0, bm), (bk, BLOCK_M), (k, m));
                } else {
                    load_tile(tile_a(s), a, lda as usize, (bm, k0), (BLOCK_M, bk), (m, k));
                }
                if tb {
                    load_tile(tile_b(s), b, ldb as usize, (bn, k0), (BLOCK_N, bk), (n, k));
                } else {
                    load_tile(tile_b(s), b, ldb as usize, (k0, bn), (bk, BLOCK_N), (k, n));
                }
            }
        };
        let warp_id = thread::thread_idx_x() as usize / 32;
        let (wm, wn) = ((warp_id / 4) * 64, (warp_id % 4) * 32);
        let mut acc = [[[0f32; 4]; 4]; 4];
        let tiles = k.div_ceil(bk);
        for s in 0..STAGES - 1 {
            if s < tiles {
                load(s, s);
            }
            tc::cp_async_commit();
        }
        for kt in 0..tiles {
            tc::cp_async_wait::<{ STAGES as u32 - 2 }>();
            sync_threads();
            let next = kt + STAGES - 1;
            if next < tiles {
                load(next, next % STAGES);
            }
            tc::cp_async_commit();
            let s = kt % STAGES;
            // SAFETY: stage s holds tile kt (waited, synchronized above).
            unsafe { T::warp_tile(tile_a(s), tile_b(s), flags, wm, wn, &mut acc) };
        }
        tc::cp_async_wait::<0>();
        let lane = warp::lane_id();
        unroll!(mi in 4 => {
            unroll!(ni in 4 => {
                unroll!(e in 4 => {
                    let (r, col) = C_M16N8.coord(lane, e as u32);
                    let gr = bm + wm + mi * 16 + r as usize;
                    let gc = bn + wn + ni * 8 + col as usize;
                    if gr < m && gc < n {
                        // SAFETY: gr < m, gc < n: inside C; each element has one owner.
                        unsafe { store_c(c.wrapping_add(gr * ldc as usize + gc), acc[mi][ni][e], alpha, beta) };
                    }
                });
            });
        });
    }
}

/// Bytes of one chunk of a staged row ([`gemm_stage`]): the alignment TMA
/// and `cp.async` need of an operand's start, leading dimension and batch
/// stride.
pub const STAGE_CHUNK_BYTES: usize = 16;
/// Threads per block of the staging copy.
pub const STAGE_THREADS: u32 = 256;

/// The staging copy's body: one operand as stored (`rows × cols` per batch,
/// `ld_src` elements between rows, `batch_src` between batches, any start
/// and any leading dimension) copied into rows of `ld_dst` elements (a
/// multiple of the [`STAGE_CHUNK_BYTES`] chunk), batch `z` at
/// `z · rows · ld_dst`, so that the tensor-core paths can read it; the
/// columns from `cols` to `ld_dst` are written as zeros. Each thread writes
/// whole 16-byte chunks (`st.global.v4`) from `PER` element loads, in a
/// grid-stride loop over the batch's chunks; batches on grid z.
///
/// # Safety
/// `src` holds every element the shape reaches; `dst` holds
/// `batches · rows · ld_dst` elements, starts 16-byte aligned, overlaps
/// nothing the launch reads, and `ld_dst` is a multiple of `PER`; the grid's
/// z is at most the batches.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn gemm_stage<W: Copy + Default, const PER: usize>(
    src: *const W,
    dst: *mut W,
    rows: u32,
    cols: u32,
    ld_src: u32,
    ld_dst: u32,
    batch_src: u64,
) {
    const { assert!(size_of::<[W; PER]>() == STAGE_CHUNK_BYTES) };
    let z = thread::block_idx_z() as usize;
    let (rows, cols) = (rows as usize, cols as usize);
    let (ld_src, ld_dst) = (ld_src as usize, ld_dst as usize);
    let chunks = ld_dst / PER;
    let src = src.wrapping_add(z * batch_src as usize);
    let dst = dst.wrapping_add(z * rows * ld_dst);
    for i in thread::grid_stride(rows * chunks) {
        let (row, col) = (i / chunks, i % chunks * PER);
        let mut chunk = [W::default(); PER];
        for (j, word) in chunk.iter_mut().enumerate() {
            if col + j < cols {
                // SAFETY: row < rows, col + j < cols: inside the operand.
                *word = unsafe { *src.add(row * ld_src + col + j) };
            }
        }
        // SAFETY: 16 bytes of the same size as the chunk (asserted above).
        let words: [u32; 4] = unsafe { core::mem::transmute_copy(&chunk) };
        // SAFETY: row < rows, col + PER <= ld_dst: inside the staged buffer,
        // 16-byte aligned (its start and ld_dst are), written by this thread
        // alone.
        unsafe { crate::device::load::store_v4(dst.add(row * ld_dst + col).cast(), words) };
    }
}

/// Rows and columns of the transposing staging copy's tile.
pub const STAGE_TILE: u32 = 32;
/// Rows of threads of the transposing staging copy's blocks (32 × 8
/// threads, four rows of the tile each).
pub const STAGE_TILE_ROWS: u32 = 8;

/// The transposing staging copy's body (32-bit elements): one operand as
/// stored (`rows × cols` per batch, any leading dimension `ld_src`, batch
/// stride `batch_src`) written transposed, `cols` rows of `ld_dst ≥ rows`
/// elements (a multiple of 4: 16-byte rows), batch `z` at `z · cols ·
/// ld_dst`, the columns from `rows` to `ld_dst` zeros; so that wgmma, which
/// reads tf32 K-major only, reads an operand stored MN-major. Through a
/// 32 × 33-word tile in shared memory, so that both the reads and the
/// writes of a warp are whole rows; tile rows on grid y in a grid-stride
/// loop, tile columns on grid x, batches on grid z.
///
/// # Safety
/// `src` holds every element the shape reaches; `dst` holds `batches · cols
/// · ld_dst` elements and overlaps nothing the launch reads; blocks of
/// [`STAGE_TILE`] × [`STAGE_TILE_ROWS`] threads; grid x covers `cols` in
/// tiles, grid z at most the batches.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn gemm_stage_transposed(
    src: *const u32,
    dst: *mut u32,
    rows: u32,
    cols: u32,
    ld_src: u32,
    ld_dst: u32,
    batch_src: u64,
) {
    let tile = crate::device::shared_array!(gemm_stage_tile: [u32; 32 * 33]);
    let (tx, ty) = (thread::thread_idx_x(), thread::thread_idx_y());
    let z = thread::block_idx_z() as usize;
    let src = src.wrapping_add(z * batch_src as usize);
    let dst = dst.wrapping_add(z * cols as usize * ld_dst as usize);
    let col0 = thread::block_idx_x() * STAGE_TILE;
    let mut row0 = thread::block_idx_y() * STAGE_TILE;
    while row0 < rows {
        for i in 0..STAGE_TILE / STAGE_TILE_ROWS {
            let (r, c) = (row0 + ty + STAGE_TILE_ROWS * i, col0 + tx);
            let value = if r < rows && c < cols {
                // SAFETY: r < rows, c < cols: inside the operand.
                unsafe { *src.add(r as usize * ld_src as usize + c as usize) }
            } else {
                0
            };
            // SAFETY: (ty + 8i) · 33 + tx < 32 · 33.
            unsafe { tile.store(((ty + STAGE_TILE_ROWS * i) * 33 + tx) as usize, value) };
        }
        crate::device::sync::sync_threads();
        for i in 0..STAGE_TILE / STAGE_TILE_ROWS {
            let (c, r) = (col0 + ty + STAGE_TILE_ROWS * i, row0 + tx);
            if c < cols && r < ld_dst {
                // SAFETY: tx · 33 + ty + 8i < 32 · 33, written before the
                // barrier.
                let value = unsafe { tile.load((tx * 33 + ty + STAGE_TILE_ROWS * i) as usize) };
                // SAFETY: c < cols, r < ld_dst: inside the staged batch; one
                // thread per element.
                unsafe { *dst.add(c as usize * ld_dst as usize + r as usize) = value };
            }
        }
        crate::device::sync::sync_threads();
        row0 += thread::grid_dim_y() * STAGE_TILE;
    }
}

/// The parameters of the staging entries, over words `W` of the operand's
/// bits: `(src, dst, rows, cols, ld_src, ld_dst, batch_src)`.
pub type StageParams<W> = (*const W, *mut W, u32, u32, u32, u32, u64);

crate::device::kernels! {
    list STAGE_KERNELS;
    /// Stages a 32-bit GEMM operand transposed into 16-byte aligned rows
    /// ([`gemm_stage_transposed`]).
    ///
    /// # Safety
    /// See [`gemm_stage_transposed`].
    pub fn gemm_stage_transposed_b32(
        src: *const u32, dst: *mut u32, rows: u32, cols: u32, ld_src: u32, ld_dst: u32,
        batch_src: u64,
    ) as GEMM_STAGE_TRANSPOSED_B32 {
        // SAFETY: forwarded from this kernel's contract.
        unsafe { gemm_stage_transposed(src, dst, rows, cols, ld_src, ld_dst, batch_src) }
    }

    /// Stages a 16-bit GEMM operand into 16-byte aligned rows ([`gemm_stage`]).
    ///
    /// # Safety
    /// See [`gemm_stage`]; launched with [`STAGE_THREADS`] threads a block
    /// and the batches on grid z.
    pub fn gemm_stage_b16(
        src: *const u16, dst: *mut u16, rows: u32, cols: u32, ld_src: u32, ld_dst: u32,
        batch_src: u64,
    ) as GEMM_STAGE_B16 {
        // SAFETY: forwarded from this kernel's contract.
        unsafe { gemm_stage::<u16, 8>(src, dst, rows, cols, ld_src, ld_dst, batch_src) }
    }

    /// Stages an f32 GEMM operand into 16-byte aligned rows ([`gemm_stage`]).
    ///
    /// # Safety
    /// See [`gemm_stage`]; launched with [`STAGE_THREADS`] threads a block
    /// and the batches on grid z.
    pub fn gemm_stage_b32(
        src: *const u32, dst: *mut u32, rows: u32, cols: u32, ld_src: u32, ld_dst: u32,
        batch_src: u64,
    ) as GEMM_STAGE_B32 {
        // SAFETY: forwarded from this kernel's contract.
        unsafe { gemm_stage::<u32, 4>(src, dst, rows, cols, ld_src, ld_dst, batch_src) }
    }
}

/// Declares the split-k reductions ([`gemm_split_reduce`]), one per output
/// type, in the list `SPLIT_REDUCE_KERNELS`.
macro_rules! split_reduce_kernels {
    ($($name:ident as $handle:ident: $o:ty;)*) => {
        crate::device::kernels! {
            list SPLIT_REDUCE_KERNELS;
            $(
                #[doc = concat!("Sums the split-k partial products into a ", stringify!($o),
                    " C with alpha and beta ([`gemm_split_reduce`]).")]
                ///
                /// # Safety
                /// See [`gemm_split_reduce`]: [`REDUCE_THREADS`] threads a
                /// block, the columns on grid x, rows on grid y, batches on
                /// grid z.
                pub fn $name(
                    w: *const f32, c: *mut $o, m: u32, n: u32, ldw: u32, ldc: u32, splits: u32,
                    split_stride: u64, w_batch_stride: u64, c_batch_stride: u64, alpha: f32,
                    beta: f32,
                ) as $handle {
                    // SAFETY: forwarded from this kernel's contract.
                    unsafe {
                        gemm_split_reduce(
                            w, c, (m, n), (ldw, ldc), splits, split_stride,
                            (w_batch_stride, c_batch_stride), alpha, beta,
                        )
                    }
                }
            )*
        }
    };
}

split_reduce_kernels! {
    gemm_split_reduce_f32 as GEMM_SPLIT_REDUCE_F32: f32;
    gemm_split_reduce_bf16 as GEMM_SPLIT_REDUCE_BF16: bf16;
    gemm_split_reduce_f16 as GEMM_SPLIT_REDUCE_F16: f16;
}

/// Threads per block of the split-k reduction.
pub const REDUCE_THREADS: u32 = 256;

/// The split-k reduction's body: `C = alpha · Σ_s W_s + beta · C` for
/// batch `z` (grid z), where the `splits` partial products `W_s` are f32,
/// `m` rows of `ldw` per batch (batch `z` at `z · w_batch_stride`),
/// `split_stride` elements apart; the sum in split order, so the result
/// does not depend on the launch. A thread sums one column (grid x, block
/// x) of the rows `blockIdx.y, blockIdx.y + gridDim.y, …`: coalesced reads
/// and writes, no division. With one split it is the copy of an f32
/// product into any C (`ldc` odd, another output type) with alpha and beta.
///
/// # Safety
/// `w` holds `splits · split_stride` f32 with every batch's `m` rows of
/// `ldw ≥ n` inside each split's block; `c` holds every batch's `m` rows of
/// `ldc ≥ n` (batch `z` at `z · c_batch_stride`), overlapping nothing the
/// launch reads; grid z at most the batches.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn gemm_split_reduce<O: GemmOutput>(
    w: *const f32,
    c: *mut O,
    (m, n): (u32, u32),
    (ldw, ldc): (u32, u32),
    splits: u32,
    split_stride: u64,
    (w_batch_stride, c_batch_stride): (u64, u64),
    alpha: f32,
    beta: f32,
) {
    let z = thread::block_idx_z() as usize;
    let col = thread::block_idx_x() * thread::block_dim_x() + thread::thread_idx_x();
    if col >= n {
        return;
    }
    let w = w.wrapping_add(z * w_batch_stride as usize + col as usize);
    let c = c.wrapping_add(z * c_batch_stride as usize + col as usize);
    let mut row = thread::block_idx_y();
    while row < m {
        let mut sum = 0f32;
        for s in 0..splits as usize {
            // SAFETY: row < m, col < n ≤ ldw, s < splits: inside the split's
            // batch block.
            sum += unsafe { *w.add(s * split_stride as usize + row as usize * ldw as usize) };
        }
        // SAFETY: row < m, col < n ≤ ldc: inside the batch's C, one thread
        // per element.
        unsafe { store_c(c.add(row as usize * ldc as usize), sum, alpha, beta) };
        row += thread::grid_dim_y();
    }
}

/// Declares, for each `(input, output)` pair, the CUDA-core entry
/// `gemm_simt_<in>_<out>` and (sm_80 and later) the tensor-core entry
/// `gemm_mma_<in>_<out>`, in one `kernels!` list (`GEMM_KERNELS`).
macro_rules! gemm_kernels {
    ($($t:ident => $o:ident: $simt:ident as $simt_h:ident, $mma:ident as $mma_h:ident;)*) => {
        crate::device::kernels! {
            list GEMM_KERNELS;
            $(
                #[doc = concat!("`C = alpha · op(A) · op(B) + beta · C`, ", stringify!($t), " inputs, ",
                    stringify!($o), " output, on the CUDA cores (see the module docs).")]
                ///
                /// # Safety
                /// See [`gemm_simt`]. Launched with 16 × 16 blocks over
                /// `(⌈n / 16⌉, ⌈m / 16⌉, batches)`.
                pub fn $simt(
                    a: *const $t, b: *const $t, c: *mut $o, m: u32, n: u32, k: u32,
                    lda: u32, ldb: u32, ldc: u32, batch_a: u64, batch_b: u64, batch_c: u64,
                    alpha: f32, beta: f32, flags: u32,
                ) as $simt_h {
                    // SAFETY: forwarded from this kernel's contract.
                    unsafe {
                        gemm_simt(a, b, c, m, n, k, lda, ldb, ldc, [batch_a, batch_b, batch_c], alpha, beta, flags)
                    }
                }

                #[doc = concat!("`C = alpha · op(A) · op(B) + beta · C`, ", stringify!($t), " inputs, ",
                    stringify!($o), " output, on the tensor cores by `mma.sync` (sm_80 and later builds only).")]
                ///
                /// # Safety
                /// See [`mma::gemm_mma`].
                #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
                pub fn $mma(
                    a: *const $t, b: *const $t, c: *mut $o, m: u32, n: u32, k: u32,
                    lda: u32, ldb: u32, ldc: u32, batch_a: u64, batch_b: u64, batch_c: u64,
                    alpha: f32, beta: f32, flags: u32,
                ) as $mma_h {
                    // SAFETY: forwarded from this kernel's contract.
                    unsafe {
                        mma::gemm_mma(a, b, c, m, n, k, lda, ldb, ldc, [batch_a, batch_b, batch_c], alpha, beta, flags)
                    }
                }
            )*
        }

        /// The entry points of `GEMM_KERNELS` that exist only in the sm_80
        /// and later builds (absent from the portable sm_70 PTX).
        pub const GEMM_SM80_KERNELS: &[&str] = &[$(stringify!($mma)),*];
    };
}

gemm_kernels! {
    bf16 => f32: gemm_simt_bf16_f32 as GEMM_SIMT_BF16_F32, gemm_mma_bf16_f32 as GEMM_MMA_BF16_F32;
    bf16 => bf16: gemm_simt_bf16_bf16 as GEMM_SIMT_BF16_BF16, gemm_mma_bf16_bf16 as GEMM_MMA_BF16_BF16;
    f16 => f32: gemm_simt_f16_f32 as GEMM_SIMT_F16_F32, gemm_mma_f16_f32 as GEMM_MMA_F16_F32;
    f16 => f16: gemm_simt_f16_f16 as GEMM_SIMT_F16_F16, gemm_mma_f16_f16 as GEMM_MMA_F16_F16;
    f32 => f32: gemm_simt_f32_f32 as GEMM_SIMT_F32_F32, gemm_mma_tf32_f32 as GEMM_MMA_TF32_F32;
}
