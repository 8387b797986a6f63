//! The GEMM family: `C = alpha · op(A) · op(B) + beta · C` over strided
//! batches, with f32 accumulation, for bf16 and f16 inputs (output f32 or
//! the input type) and tf32 from f32 inputs.
//!
//! Two paths, the host picking by device (`GemmPath` in the host crate):
//! - `gemm_mma_*`: the tensor cores through `mma.sync` (sm_80 and later;
//!   these entry points exist only in the sm_80 and later builds): blocks of
//!   [`BLOCK_M`] × [`BLOCK_N`] of C, 4 warps of 64 × 64, k-tiles of 128 bytes
//!   a row (`MmaInput::BK` = 64 16-bit or 32 f32 elements) in a
//!   [`STAGES`]-deep `cp.async` ring in shared memory ([`MMA_SMEM_BYTES`] =
//!   96 KiB, one barrier per k-tile), 16-byte chunks XOR-swizzled per row
//!   ([`swizzle`]) so that the copies and the `ldmatrix` reads are free of
//!   bank conflicts; fragments by `ldmatrix_x4` (`.trans` for a 16-bit
//!   operand stored m- or n-contiguous; tf32 reads such an operand element
//!   by element), double-buffered in registers across the k-steps, 32
//!   `mma.sync` per warp per k-step; one monomorphic body per layout; each
//!   thread's copy and fragment addresses worked out once
//!   ([`swizzle_step`]); blocks take their tiles in groups of 8 m-tiles
//!   (L2 reuse); the epilogue stores pairs of elements;
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
/// Threads per block of the mma.sync kernels (4 warps: 2 along m × 2 along
/// n, each 64 × 64 of C).
pub const MMA_THREADS: u32 = 128;
/// k-tiles in flight in shared memory.
pub const STAGES: usize = 3;
/// Bytes of k per row of a k-tile: 64 16-bit or 32 f32 elements.
pub const TILE_ROW_BYTES: usize = 128;
/// Bytes of one operand's tile of one stage: 128 rows (m or n) of
/// [`TILE_ROW_BYTES`] (or, stored the other way, `BK` rows of k of 128
/// elements), 16 KiB.
pub const MMA_TILE_BYTES: usize = BLOCK_M * TILE_ROW_BYTES;
/// The dynamic shared memory of an mma.sync block: [`STAGES`] × (A tile +
/// B tile), 96 KiB: past the 48 KiB a block has without opting in (the
/// launcher calls `Gpu::allow_dynamic_shared`), within the 99 KiB of sm_86
/// and sm_89 (and the 163 KiB of sm_80, 227 KiB of sm_90).
pub const MMA_SMEM_BYTES: u32 = (STAGES * 2 * MMA_TILE_BYTES) as u32;
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

/// The phase of row `row` of a swizzled tile: `row % 8`, or (`permuted`)
/// that with its bits rotated, `((row % 4) << 1) | ((row / 4) % 2)`, a
/// permutation of it. Either is linear over XOR in the row's low 3 bits,
/// which [`swizzle_step`] uses.
#[inline(always)]
pub const fn swizzle_phase(row: usize, permuted: bool) -> usize {
    let r = row & 7;
    if permuted {
        ((r & 3) << 1) | (r >> 2)
    } else {
        r
    }
}

/// The byte offset of 16-byte chunk `chunk` of row `row` in a shared tile
/// of `row_bytes`-byte rows (a multiple of 128): the chunk is stored at
/// chunk `chunk ^ phase(row)` of its row ([`swizzle_phase`]), so that 8
/// consecutive rows (the 8 rows an `ldmatrix` matrix reads, which without
/// it would share one group of 4 banks) hit 8 different bank groups, and
/// so do 4 rows × 2 chunks with `permuted` (the tf32 fragments of an
/// operand stored m- or n-contiguous). The one layout the copies and the
/// fragment reads both use.
#[inline(always)]
pub const fn swizzle(row: usize, chunk: usize, row_bytes: usize, permuted: bool) -> usize {
    row * row_bytes + ((chunk ^ swizzle_phase(row, permuted)) << 4)
}

/// `swizzle(row + dr, chunk + dc) + within` from `at`, which is
/// `swizzle(row, chunk) + within` (`within < 16`), by one XOR and one add,
/// when `row % 8` and `dr % 8` share no bit and `chunk` and `dc` share no
/// bit (then the sums are XORs where the phase and the chunk index see
/// them): the kernels work out a lane's `at` once and reach each fragment
/// and copy from it by constants.
#[inline(always)]
pub const fn swizzle_step(at: u32, dr: usize, dc: usize, row_bytes: usize, permuted: bool) -> u32 {
    (at ^ (((dc ^ swizzle_phase(dr, permuted)) << 4) as u32)) + (dr * row_bytes) as u32
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

/// The mma.sync kernels (see the module docs): [`mma::MmaInput`], how a
/// warp reads its fragments of one k-step from a stage in shared memory and
/// multiplies them, and the body, [`mma::gemm_mma`].
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
pub mod mma {
    use super::{
        BLOCK_M, BLOCK_N, GemmInput, GemmOutput, MMA_THREADS, MMA_TILE_BYTES, STAGES,
        TILE_ROW_BYTES, TRANS_A, TRANS_B, store_c, store_c_pair, swizzle, swizzle_step,
    };
    use crate::device::float16::{bf16, f16};
    use crate::device::mma::{self as tc, FragATf32, FragBTf32};
    use crate::device::shared::{SharedScalar, dynamic_shared_address};
    use crate::device::sync::sync_threads;
    use crate::device::{thread, warp};

    /// `body` 2, 4 or 8 times with `$i` = 0, 1, … as a constant: the
    /// accumulators and fragments are arrays indexed by these, which stay in
    /// registers only when every index is a constant (a loop LLVM does not
    /// unroll fully would put them in local memory).
    macro_rules! unroll {
        ($i:ident in 2 => $body:block) => { unroll!(@each $i [0 1] $body) };
        ($i:ident in 4 => $body:block) => { unroll!(@each $i [0 1 2 3] $body) };
        ($i:ident in 8 => $body:block) => { unroll!(@each $i [0 1 2 3 4 5 6 7] $body) };
        (@each $i:ident [$($n:literal)*] $body:block) => {{
            $({
                let $i: usize = $n;
                $body
            })*
        }};
    }

    /// Rows (m) of C per warp: the block's 4 warps are 2 along m × 2 along n.
    const WARP_M: usize = 64;
    /// Columns (n) of C per warp.
    const WARP_N: usize = 64;
    /// k-steps (one `mma` deep) per k-tile: 4 of k16 (16-bit) or k8 (tf32).
    const KSTEPS: usize = 4;

    /// A warp's accumulators: `[mi][ni]` is the m16 × n8 tile at rows
    /// `16·mi`, columns `8·ni` of the warp's 64 × 64 ([`tc::C_M16N8`]).
    pub type Acc = [[[f32; 4]; 8]; 4];
    /// A warp's A fragments of one k-step (4 m16 tiles, 4 registers each).
    pub type FragsA = [[u32; 4]; 4];
    /// A warp's B fragments of one k-step (8 n8 tiles, 2 registers each).
    pub type FragsB = [[u32; 2]; 8];

    /// Bytes per row of an operand's shared tile: the operand stored with
    /// k contiguous (A not transposed, B transposed) is 128 rows of m (n) by
    /// [`TILE_ROW_BYTES`] of k; stored with m (n) contiguous it is `BK` rows
    /// of k by 128 elements.
    const fn row_bytes(k_contiguous: bool, size: usize) -> usize {
        if k_contiguous {
            TILE_ROW_BYTES
        } else {
            BLOCK_M * size
        }
    }

    /// The swizzle's row phase is a permutation of `row % 8` for the f32
    /// tiles with m (n) contiguous, whose element-wise fragment reads span 4
    /// rows × 8 columns (see [`swizzle`]).
    const fn permuted(k_contiguous: bool, size: usize) -> bool {
        !k_contiguous && size == 4
    }

    /// This lane's fragment offsets in the A and B tiles (at m, n, k-step
    /// 0): [`swizzle`] of its row and chunk; each fragment's offset is a
    /// [`swizzle_step`] from these by constants.
    #[derive(Clone, Copy)]
    pub struct Lanes {
        a: u32,
        b: u32,
    }

    /// How an input type computes.
    pub trait MmaInput: GemmInput {
        /// Elements of k per k-tile: [`TILE_ROW_BYTES`] of a row.
        const BK: usize;
        /// Whether the fragments of k-step `kk + 1` are read before the
        /// mmas of step `kk` (double-buffered in registers); tf32 reads its
        /// fragments at their step instead: the 32 addresses of its
        /// element-wise reads, which LLVM keeps in registers across the
        /// loop, and a second set of fragments do not fit in 255 registers
        /// together.
        const PREFETCH: bool = true;
        /// This lane's [`Lanes`] for the warp at `(wm, wn)` of the block.
        fn lanes<const TA: bool, const TB: bool>(lane: usize, wm: usize, wn: usize) -> Lanes;
        /// The warp's fragments of k-step `kk` (`0..KSTEPS`) of the stage
        /// whose tiles are at `sa`, `sb`.
        ///
        /// # Safety
        /// `sa`, `sb` address a stage's tiles, filled (waited and
        /// synchronized); a warp collective (all lanes, converged).
        unsafe fn fragments<const TA: bool, const TB: bool>(
            sa: u32,
            sb: u32,
            lanes: Lanes,
            kk: usize,
            fa: &mut FragsA,
            fb: &mut FragsB,
        );
        /// `c += a · b` of one m16 × n8 tile over one k-step.
        fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4];
    }

    /// The lane offsets of the `ldmatrix` reads, 16-bit elements and f32
    /// alike wherever the operand is stored with k contiguous (an 8 × 8
    /// matrix of 16-bit elements is 8 × 4 f32, which is what the tf32
    /// fragments hold per register). Matrix `i` of an `.x4` is addressed by
    /// lanes `8i..8i + 8`.
    /// - A, k contiguous: row `m = wm + lane % 16`, chunk `lane / 16` (matrices: m 0-7 and
    ///   8-15 of k chunk 0, then of chunk 1);
    /// - A, m contiguous (16-bit, `.trans`): row `k = 8·(lane / 16) + lane % 8`, chunk
    ///   `wm / 8 + (lane / 8) % 2` (m 0-7, m 8-15 of k 0-7, then of k 8-15);
    /// - B, k contiguous: row `n = wn + 8·(lane / 16) + lane % 8`, chunk `(lane / 8) % 2`
    ///   (k chunks 0, 1 of n 0-7, then of n 8-15);
    /// - B, n contiguous (16-bit, `.trans`): row `k = 8·((lane / 8) % 2) + lane % 8`,
    ///   chunk `wn / 8 + lane / 16`.
    #[inline(always)]
    fn ldmatrix_lanes<T, const TA: bool, const TB: bool>(
        lane: usize,
        wm: usize,
        wn: usize,
    ) -> Lanes {
        let size = core::mem::size_of::<T>();
        let (rba, rbb) = (row_bytes(!TA, size), row_bytes(TB, size));
        let a = if TA {
            swizzle(
                8 * (lane / 16) + lane % 8,
                wm * size / 16 + (lane / 8) % 2,
                rba,
                false,
            )
        } else {
            swizzle(wm + lane % 16, lane / 16, rba, false)
        };
        let b = if TB {
            swizzle(wn + 8 * (lane / 16) + lane % 8, (lane / 8) % 2, rbb, false)
        } else {
            swizzle(
                8 * ((lane / 8) % 2) + lane % 8,
                wn * size / 16 + lane / 16,
                rbb,
                false,
            )
        };
        Lanes {
            a: a as u32,
            b: b as u32,
        }
    }

    /// A's fragment of tile `mi`, k-step `kk` by `ldmatrix` (`.trans` when A
    /// is stored m-contiguous, 16-bit only).
    ///
    /// # Safety
    /// As [`MmaInput::fragments`].
    #[inline(always)]
    unsafe fn ldmatrix_a<const TA: bool>(
        sa: u32,
        lane: u32,
        mi: usize,
        kk: usize,
        size: usize,
    ) -> [u32; 4] {
        // SAFETY (both arms): rows of this stage's A tile (the caller's).
        unsafe {
            if TA {
                tc::ldmatrix_x4_trans(
                    sa + swizzle_step(lane, 16 * kk, 2 * mi, row_bytes(false, size), false),
                )
            } else {
                tc::ldmatrix_x4(sa + swizzle_step(lane, 16 * mi, 2 * kk, TILE_ROW_BYTES, false))
            }
        }
    }

    /// B's fragments of tiles `2·pair` and `2·pair + 1`, k-step `kk`, by one
    /// `ldmatrix` (`.trans` when B is stored n-contiguous, 16-bit only).
    ///
    /// # Safety
    /// As [`MmaInput::fragments`].
    #[inline(always)]
    unsafe fn ldmatrix_b<const TB: bool>(
        sb: u32,
        lane: u32,
        pair: usize,
        kk: usize,
        size: usize,
    ) -> [[u32; 2]; 2] {
        // SAFETY (both arms): rows of this stage's B tile (the caller's).
        let r = unsafe {
            if TB {
                tc::ldmatrix_x4(sb + swizzle_step(lane, 16 * pair, 2 * kk, TILE_ROW_BYTES, false))
            } else {
                tc::ldmatrix_x4_trans(
                    sb + swizzle_step(lane, 16 * kk, 2 * pair, row_bytes(false, size), false),
                )
            }
        };
        [[r[0], r[1]], [r[2], r[3]]]
    }

    macro_rules! half_input {
        ($t:ident) => {
            impl MmaInput for $t {
                const BK: usize = TILE_ROW_BYTES / 2;
                #[inline(always)]
                fn lanes<const TA: bool, const TB: bool>(lane: usize, wm: usize, wn: usize) -> Lanes {
                    ldmatrix_lanes::<$t, TA, TB>(lane, wm, wn)
                }
                /// One k16 step: 4 + 4 `ldmatrix_x4`.
                #[inline(always)]
                unsafe fn fragments<const TA: bool, const TB: bool>(
                    sa: u32,
                    sb: u32,
                    lanes: Lanes,
                    kk: usize,
                    fa: &mut FragsA,
                    fb: &mut FragsB,
                ) {
                    unroll!(mi in 4 => {
                        // SAFETY: the caller's.
                        fa[mi] = unsafe { ldmatrix_a::<TA>(sa, lanes.a, mi, kk, 2) };
                    });
                    unroll!(pair in 4 => {
                        // SAFETY: the caller's.
                        let r = unsafe { ldmatrix_b::<TB>(sb, lanes.b, pair, kk, 2) };
                        fb[2 * pair] = r[0];
                        fb[2 * pair + 1] = r[1];
                    });
                }
                #[inline(always)]
                fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
                    tc::mma_m16n8k16::<$t>(tc::FragA::from_regs(a), tc::FragB::from_regs(b), c)
                }
            }
        };
    }
    half_input!(bf16);
    half_input!(f16);

    /// f32 → tf32 bits of a fragment register (`cvt.rna.tf32.f32`).
    #[inline(always)]
    fn tf32(bits: u32) -> u32 {
        tc::to_tf32(f32::from_bits(bits))
    }

    impl MmaInput for f32 {
        const BK: usize = TILE_ROW_BYTES / 4;
        const PREFETCH: bool = false;
        /// The k-contiguous operands as for `ldmatrix`; the others
        /// element by element: lane `(g, t) = (lane / 4, lane % 4)` reads
        /// row `k = t` (+ `8·kk`, + 4), chunk `(wm + g) / 4` (+ `4·mi`, + 2)
        /// of A and `(wn + g) / 4` (+ `2·ni`) of B, word `g % 4`.
        #[inline(always)]
        fn lanes<const TA: bool, const TB: bool>(lane: usize, wm: usize, wn: usize) -> Lanes {
            let mut l = ldmatrix_lanes::<f32, TA, TB>(lane, wm, wn);
            let (g, t) = (lane / 4, lane % 4);
            let rb = row_bytes(false, 4);
            if TA {
                l.a = (swizzle(t, (wm + g) / 4, rb, true) + 4 * (g % 4)) as u32;
            }
            if !TB {
                l.b = (swizzle(t, (wn + g) / 4, rb, true) + 4 * (g % 4)) as u32;
            }
            l
        }
        /// One k8 step: `ldmatrix_x4` (k-contiguous operand) or 16 scalar
        /// loads (the other) per operand, each register rounded to tf32
        /// (`cvt.rna.tf32.f32`), in the layouts [`tc::A_M16K8_TF32`] and
        /// [`tc::B_K8N8_TF32`].
        #[inline(always)]
        unsafe fn fragments<const TA: bool, const TB: bool>(
            sa: u32,
            sb: u32,
            lanes: Lanes,
            kk: usize,
            fa: &mut FragsA,
            fb: &mut FragsB,
        ) {
            let rb = row_bytes(false, 4);
            // SAFETY: inside this stage's tile (the caller's): the offsets
            // are the layouts' elements, rows < 32, chunks < 32.
            let load =
                |base: u32, off: u32| unsafe { <u32 as SharedScalar>::load_shared(base + off) };
            unroll!(mi in 4 => {
                fa[mi] = if TA {
                    // Element e: m + 8·(e % 2), k + 4·(e / 2) ([`tc::A_M16K8_TF32`]).
                    let mut r = [0u32; 4];
                    unroll!(e in 4 => {
                        let off = swizzle_step(lanes.a, 8 * kk + 4 * (e / 2), 4 * mi + 2 * (e % 2), rb, true);
                        r[e] = tf32(load(sa, off));
                    });
                    r
                } else {
                    // SAFETY: the caller's.
                    unsafe { ldmatrix_a::<false>(sa, lanes.a, mi, kk, 4) }.map(tf32)
                };
            });
            if TB {
                unroll!(pair in 4 => {
                    // SAFETY: the caller's.
                    let r = unsafe { ldmatrix_b::<true>(sb, lanes.b, pair, kk, 4) };
                    fb[2 * pair] = r[0].map(tf32);
                    fb[2 * pair + 1] = r[1].map(tf32);
                });
            } else {
                unroll!(ni in 8 => {
                    // Element e: k + 4·e ([`tc::B_K8N8_TF32`]).
                    unroll!(e in 2 => {
                        let off = swizzle_step(lanes.b, 8 * kk + 4 * e, 2 * ni, rb, true);
                        fb[ni][e] = tf32(load(sb, off));
                    });
                });
            }
        }
        #[inline(always)]
        fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
            tc::mma_m16n8k8_tf32(FragATf32 { regs: a }, FragBTf32 { regs: b }, c)
        }
    }

    /// One thread's share of copying an operand's k-tiles into shared
    /// memory: 8 chunks of 16 bytes per k-tile, their addresses worked out
    /// once. The tile has `C = row_bytes / 16` chunks a row; thread `tid`
    /// copies chunk `tid % C` of rows `tid / C + (128 / C)·i`, `i < 8`.
    struct Loader<T> {
        /// Chunk 0 of the next k-tile (may be past the matrix: only
        /// dereferenced with a nonzero size).
        src: *const T,
        /// The matrix (the address of zero-size copies).
        base: *const T,
        /// Elements from chunk `i` to `i + 1` (`128 / C` rows).
        step_i: usize,
        /// Elements from one k-tile to the next.
        step_k: usize,
        /// [`swizzle`] of chunk 0 in the tile.
        dst: u32,
        /// k contiguous: how many of the 8 rows are inside m (n); else the
        /// bytes of each chunk inside m (n).
        fixed: usize,
        /// k contiguous: this chunk's first k in the tile; else its first row.
        first: usize,
        /// k from the next k-tile's start to the end (saturating).
        k_left: usize,
    }

    impl<T> Loader<T> {
        const SIZE: usize = core::mem::size_of::<T>();
        const PER: usize = 16 / Self::SIZE;

        /// The loader of an operand stored `k_contiguous` (rows of m or n,
        /// `mn` of them, from `mn0` on) or not (rows of k, columns of m or n
        /// from `mn0`), leading dimension `ld`, depth `k`.
        #[inline(always)]
        fn new(
            k_contiguous: bool,
            src: *const T,
            ld: usize,
            mn0: usize,
            mn: usize,
            k: usize,
        ) -> Self {
            let chunks = row_bytes(k_contiguous, Self::SIZE) / 16;
            let rows_per = MMA_THREADS as usize / chunks;
            let tid = thread::thread_idx_x() as usize;
            let (r0, ch) = (tid / chunks, tid % chunks);
            let dst = swizzle(
                r0,
                ch,
                row_bytes(k_contiguous, Self::SIZE),
                permuted(k_contiguous, Self::SIZE),
            ) as u32;
            if k_contiguous {
                let row = mn0 + r0;
                Self {
                    src: src.wrapping_add(row * ld + ch * Self::PER),
                    base: src,
                    step_i: rows_per * ld,
                    step_k: TILE_ROW_BYTES / Self::SIZE,
                    dst,
                    fixed: mn.saturating_sub(row).div_ceil(rows_per).min(8),
                    first: ch * Self::PER,
                    k_left: k,
                }
            } else {
                let col = mn0 + ch * Self::PER;
                Self {
                    src: src.wrapping_add(r0 * ld + col),
                    base: src,
                    step_i: rows_per * ld,
                    step_k: TILE_ROW_BYTES / Self::SIZE * ld,
                    dst,
                    fixed: mn.saturating_sub(col).min(Self::PER) * Self::SIZE,
                    first: r0,
                    k_left: k,
                }
            }
        }

        /// Issues the next k-tile's copies into the tile at `tile`
        /// (zero-filled past the matrix) and steps to the one after.
        ///
        /// # Safety
        /// The operand's contract (16-byte aligned start and rows, every
        /// element of its shape readable); `tile` is a shared tile that
        /// nothing reads until these copies are waited for.
        #[inline(always)]
        unsafe fn issue(&mut self, k_contiguous: bool, tile: u32) {
            let rb = row_bytes(k_contiguous, Self::SIZE);
            let rows_per = MMA_THREADS as usize / (rb / 16);
            let left = self.k_left.saturating_sub(self.first);
            let (rows, bytes) = if k_contiguous {
                (self.fixed, left.min(Self::PER) * Self::SIZE)
            } else {
                (left.div_ceil(rows_per).min(8), self.fixed)
            };
            unroll!(i in 8 => {
                let (from, n) = if i < rows && bytes != 0 {
                    (self.src.wrapping_add(i * self.step_i), bytes as u32)
                } else {
                    (self.base, 0)
                };
                let at = swizzle_step(self.dst, i * rows_per, 0, rb, permuted(k_contiguous, Self::SIZE));
                // SAFETY: `from` holds `n` bytes of the matrix (or none; rows
                // and columns checked above), 16-byte aligned (the caller's);
                // the destination chunk is this thread's alone until the wait.
                unsafe { tc::cp_async_16(tile + at, from.cast(), n) };
            });
            self.src = self.src.wrapping_add(self.step_k);
            self.k_left = self.k_left.saturating_sub(TILE_ROW_BYTES / Self::SIZE);
        }
    }

    /// The mma.sync kernel's body (see the module docs): one of four
    /// monomorphic bodies by the layout flags, so that the k loop has no
    /// branch on them.
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
        let args = (a, b, c, m, n, k, lda, ldb, ldc, batch_strides, alpha, beta);
        // SAFETY: forwarded.
        unsafe {
            match (flags & TRANS_A != 0, flags & TRANS_B != 0) {
                (false, false) => gemm_mma_layout::<T, O, false, false>(args),
                (false, true) => gemm_mma_layout::<T, O, false, true>(args),
                (true, false) => gemm_mma_layout::<T, O, true, false>(args),
                (true, true) => gemm_mma_layout::<T, O, true, true>(args),
            }
        }
    }

    /// m-tiles per group of [`block_tile`]'s order.
    const GROUP_M: u32 = 8;

    /// The `(m, n)` tile of C of this block: in launch order (x fastest),
    /// the blocks walk groups of [`GROUP_M`] m-tiles column by column
    /// rather than whole rows of n-tiles, so that the blocks resident at
    /// once share fewer and more reused panels of A and B in L2. A
    /// bijection of the grid's `(x, y)` onto its tiles (the last group
    /// may be shorter).
    #[inline(always)]
    fn block_tile() -> (usize, usize) {
        let (gx, gy) = (thread::grid_dim_x(), thread::grid_dim_y());
        // gx · gy < 2^32: C holds more elements than that.
        let id = thread::block_idx_y() * gx + thread::block_idx_x();
        // `max(1)` and `clamp(1, ..)` tell LLVM the divisors are not zero
        // (no panic path); on a launch of the kernel's grid they are not.
        let per_group = (GROUP_M * gx).max(1);
        let first = id / per_group * GROUP_M;
        let rows = gy.saturating_sub(first).clamp(1, GROUP_M);
        let within = id % per_group;
        ((first + within % rows) as usize, (within / rows) as usize)
    }

    /// [`gemm_mma`]'s arguments less the flags.
    type Args<T, O> = (
        *const T,
        *const T,
        *mut O,
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
        [u64; 3],
        f32,
        f32,
    );

    /// [`gemm_mma`] of one layout (`TA`: A stored `k × m`; `TB`: B stored
    /// `n × k`).
    ///
    /// # Safety
    /// As [`gemm_mma`].
    #[inline(always)]
    unsafe fn gemm_mma_layout<T: MmaInput, O: GemmOutput, const TA: bool, const TB: bool>(
        (a, b, c, m, n, k, lda, ldb, ldc, batch_strides, alpha, beta): Args<T, O>,
    ) {
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let z = thread::block_idx_z() as usize;
        let a = a.wrapping_add(z * batch_strides[0] as usize);
        let b = b.wrapping_add(z * batch_strides[1] as usize);
        let c = c.wrapping_add(z * batch_strides[2] as usize);
        let (tm, tn) = block_tile();
        let (bm, bn) = (tm * BLOCK_M, tn * BLOCK_N);
        let smem = dynamic_shared_address();
        let tile = MMA_TILE_BYTES as u32;
        let stage_bytes = 2 * tile;
        let advance = |s: u32| {
            if s + stage_bytes == STAGES as u32 * stage_bytes {
                0
            } else {
                s + stage_bytes
            }
        };
        let mut load_a = Loader::new(!TA, a, lda as usize, bm, m, k);
        let mut load_b = Loader::new(TB, b, ldb as usize, bn, n, k);
        let mut issue = |s: u32| {
            // SAFETY: the kernel's contract (alignment, extents); stage s is
            // not read until these copies are waited for (the ring below).
            unsafe {
                load_a.issue(!TA, smem + s);
                load_b.issue(TB, smem + s + tile);
            }
        };
        let warp_id = thread::thread_idx_x() as usize / 32;
        let (wm, wn) = ((warp_id % 2) * WARP_M, (warp_id / 2) * WARP_N);
        let lanes = T::lanes::<TA, TB>(warp::lane_id() as usize, wm, wn);
        let tiles = k.div_ceil(T::BK);
        // The ring: stage `read` holds k-tile kt while the copies of kt + 1
        // and kt + 2 are in flight; each k-tile's copies are issued at its
        // k-step 0 into the stage every thread finished reading before the
        // barrier at k-step 3 of the k-tile before.
        let mut write = 0;
        for s in 0..STAGES - 1 {
            if s < tiles {
                issue(write);
            }
            tc::cp_async_commit();
            write = advance(write);
        }
        tc::cp_async_wait::<{ STAGES as u32 - 2 }>();
        sync_threads();
        let mut read = 0;
        let mut acc: Acc = [[[0f32; 4]; 8]; 4];
        // Fragments double-buffered: step kk + 1's are read before step kk's
        // mmas are issued.
        let mut fa: [FragsA; 2] = [[[0; 4]; 4]; 2];
        let mut fb: [FragsB; 2] = [[[0; 2]; 8]; 2];
        if T::PREFETCH {
            if tiles > 0 {
                // SAFETY: stage 0 holds k-tile 0 (waited, synchronized above).
                unsafe {
                    T::fragments::<TA, TB>(smem, smem + tile, lanes, 0, &mut fa[0], &mut fb[0])
                };
            }
            for kt in 0..tiles {
                unroll!(kk in 4 => {
                    if kk == KSTEPS - 1 {
                        // k-tile kt + 1 in: every copy but the newest group done
                        // (this thread's), and everyone's (the barrier), which
                        // also ends every read of the stage the next issue fills.
                        tc::cp_async_wait::<{ STAGES as u32 - 2 }>();
                        sync_threads();
                        read = advance(read);
                    }
                    if kk + 1 < KSTEPS || kt + 1 < tiles {
                        let (sa, sb) = (smem + read, smem + read + tile);
                        // SAFETY: stage `read` holds k-tile kt (kk < 3) or kt + 1
                        // (kk = 3), waited and synchronized.
                        unsafe {
                            T::fragments::<TA, TB>(sa, sb, lanes, (kk + 1) % KSTEPS, &mut fa[(kk + 1) % 2], &mut fb[(kk + 1) % 2])
                        };
                    }
                    if kk == 0 {
                        if kt + STAGES - 1 < tiles {
                            issue(write);
                        }
                        tc::cp_async_commit();
                        write = advance(write);
                    }
                    unroll!(mi in 4 => {
                        unroll!(ni in 8 => {
                            acc[mi][ni] = T::mma(fa[kk % 2][mi], fb[kk % 2][ni], acc[mi][ni]);
                        });
                    });
                });
            }
        } else {
            for kt in 0..tiles {
                unroll!(kk in 4 => {
                    if kk == 0 {
                        // k-tile kt in (this thread's copies, then everyone's);
                        // every read of the stage the issue fills (kt - 1's) done.
                        tc::cp_async_wait::<{ STAGES as u32 - 2 }>();
                        sync_threads();
                        if kt + STAGES - 1 < tiles {
                            issue(write);
                        }
                        tc::cp_async_commit();
                        write = advance(write);
                    }
                    // SAFETY: stage `read` holds k-tile kt, waited and synchronized.
                    unsafe {
                        T::fragments::<TA, TB>(smem + read, smem + read + tile, lanes, kk, &mut fa[0], &mut fb[0])
                    };
                    unroll!(mi in 4 => {
                        unroll!(ni in 8 => {
                            acc[mi][ni] = T::mma(fa[0][mi], fb[0][ni], acc[mi][ni]);
                        });
                    });
                });
                read = advance(read);
            }
        }
        tc::cp_async_wait::<0>();
        // The epilogue: each lane's elements 2h and 2h + 1 of a tile are
        // adjacent in a row ([`tc::C_M16N8`]: (g + 8h, 2t) and the next),
        // stored as pairs where C's rows keep pairs aligned.
        let lane = warp::lane_id();
        let ldc = ldc as usize;
        let pairs =
            ldc.is_multiple_of(2) && c.addr().is_multiple_of(core::mem::size_of::<O::Pair>());
        unroll!(mi in 4 => {
            unroll!(h in 2 => {
                let (r, c0) = tc::C_M16N8.coord(lane, 2 * h as u32);
                let row = bm + wm + mi * 16 + r as usize;
                if row < m {
                    unroll!(ni in 8 => {
                        let col = bn + wn + ni * 8 + c0 as usize;
                        let v = [acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]];
                        let out = c.wrapping_add(row * ldc + col);
                        if pairs && col + 1 < n {
                            // SAFETY: row < m, col + 1 < n: inside C; aligned to
                            // the pair (C and ldc are, col is even); each element
                            // has one owner.
                            unsafe { store_c_pair(out, v, alpha, beta) };
                        } else {
                            unroll!(j in 2 => {
                                if col + j < n {
                                    // SAFETY: row < m, col + j < n: inside C; one owner.
                                    unsafe { store_c(out.wrapping_add(j), v[j], alpha, beta) };
                                }
                            });
                        }
                    });
                }
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
