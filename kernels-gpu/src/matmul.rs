//! The matrix kernels: `doubles_matrix`, `matrix_mul_naive`,
//! `matrix_mul_tiled` and `gufunc_matmul_i64`.
//!
//! Every matrix is row-major and contiguous (the host launchers copy other
//! layouts to standard layout first). Thread mapping of the 2-D kernels:
//! x = column, y = row, as in the seed.
//!
//! ## The seed's `doubles_matrix` bug
//! The seed indexes its 5×5 matrix with `threadIdx.x + threadIdx.y*4`: the
//! row stride is 4 where the matrix has 5 columns, so threads `(4, y)` and
//! `(0, y+1)` both double element `4 + 4y` (elements 4, 8, 12 and 16 are
//! quadrupled), and the largest index is `4 + 4·4 = 20`: elements 21..24 are
//! never touched. The row stride must be the column count:
//! `row * cols + col`. Since the matrix is contiguous, `doubles_matrix`
//! visits its `rows * cols` elements as one 1-D range with the vectorized
//! map of [`crate::bandwidth`] (faster than the seed's 2-D grid, one element
//! per thread: `docs/tuning.md`), so any rows × cols works.
use crate::device::arith::fma_f32;
use crate::device::atomic::fetch_add_f32;
use crate::device::kernel::Kernel;
use crate::device::load::load_nc_v4;
use crate::device::shared::dynamic_shared_address;
use crate::device::sync::sync_threads;
use crate::device::thread;
use crate::device::vector::{load_shared_f32x4, store_shared_f32, store_shared_f32x4};

/// The per-element function of `doubles_matrix`, shared with the CPU
/// reference: `x * 2`, exact in f32.
#[inline(always)]
pub fn double_element(x: f32) -> f32 {
    x * 2.0
}

/// One step of the int64 dot product of `gufunc_matmul_i64`, shared with the
/// CPU reference: `acc + x * y` with wrapping (two's-complement) arithmetic,
/// which is what the GPU's `mad.lo.s64` computes and what NumPy's int64
/// matmul does on overflow.
#[inline(always)]
pub fn mul_add_i64(acc: i64, x: i64, y: i64) -> i64 {
    acc.wrapping_add(x.wrapping_mul(y))
}

/// Threads per block side of `matrix_mul_naive` (blocks of 16 × 16).
pub const BLOCK_2D: u32 = 16;

/// The parameters of the matrix-product kernels (`matrix_mul_naive` and the
/// `matrix_mul_tiled*` entries): `(a, b, c, m, k, n)`.
pub type MatmulParams = (*const f32, *const f32, *mut f32, usize, usize, usize);

/// The tile shape of one tiled SGEMM entry point (`matrix_mul_tiled*`):
/// each block computes a `bm × bn` tile of C with `bm·bn/64` threads (an
/// 8 × 8 micro-tile each), staging k-tiles of `bk` in shared memory, with
/// 16-byte global loads when `vec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SgemmTile {
    /// The PTX entry point.
    pub entry: Kernel<MatmulParams>,
    /// Rows of C per block.
    pub bm: usize,
    /// Columns of C per block.
    pub bn: usize,
    /// Depth of the k-tiles in shared memory.
    pub bk: usize,
    /// 16-byte global loads: needs `k % 4 == 0`, `n % 4 == 0` and 16-byte
    /// aligned A and B.
    pub vec: bool,
}

impl SgemmTile {
    /// Threads per block (1-D).
    pub const fn threads(&self) -> u32 {
        (self.bm * self.bn / 64) as u32
    }

    /// Dynamic shared memory of one block, in bytes: two buffers of the
    /// transposed A tile (`bk × (bm + 4)` floats, padded) and two of the B
    /// tile (`bk × bn`).
    pub const fn smem_bytes(&self) -> u32 {
        (2 * self.bk * (self.bm + 4 + self.bn) * 4) as u32
    }
}

/// `matrix_mul_tiled`: 128 × 128 tiles, k-tiles of 8, 4-byte loads (any
/// shape and alignment).
pub const SGEMM_128: SgemmTile = SgemmTile {
    entry: MATRIX_MUL_TILED,
    bm: 128,
    bn: 128,
    bk: 8,
    vec: false,
};
/// `matrix_mul_tiled_v4`: 128 × 128 tiles, k-tiles of 16, 16-byte loads.
pub const SGEMM_128_V4: SgemmTile = SgemmTile {
    entry: MATRIX_MUL_TILED_V4,
    bm: 128,
    bn: 128,
    bk: 16,
    vec: true,
};
/// `matrix_mul_tiled_64`: 64 × 64 tiles (64 threads), k-tiles of 8, 4-byte
/// loads: four times the blocks of [`SGEMM_128`], for products too small to
/// fill the GPU with 128 × 128 tiles.
pub const SGEMM_64: SgemmTile = SgemmTile {
    entry: MATRIX_MUL_TILED_64,
    bm: 64,
    bn: 64,
    bk: 8,
    vec: false,
};
/// `matrix_mul_tiled_64_v4`: [`SGEMM_64`] with 16-byte loads.
pub const SGEMM_64_V4: SgemmTile = SgemmTile {
    entry: MATRIX_MUL_TILED_64_V4,
    bm: 64,
    bn: 64,
    bk: 8,
    vec: true,
};
/// Every tiled SGEMM entry point.
pub const SGEMM_TILES: [SgemmTile; 4] = [SGEMM_128, SGEMM_128_V4, SGEMM_64, SGEMM_64_V4];

/// Rows of C computed by one block of `matrix_mul_tiled`.
pub const TILED_BM: usize = SGEMM_128.bm;
/// Columns of C computed by one block of `matrix_mul_tiled`.
pub const TILED_BN: usize = SGEMM_128.bn;
/// Depth of the k-tiles `matrix_mul_tiled` stages in shared memory.
pub const TILED_BK: usize = SGEMM_128.bk;
/// Threads per block of `matrix_mul_tiled` (256: each computes an 8 × 8
/// micro-tile of C).
pub const TILED_THREADS: u32 = SGEMM_128.threads();
/// Dynamic shared memory of one `matrix_mul_tiled` block, in bytes.
pub const TILED_SMEM_BYTES: u32 = SGEMM_128.smem_bytes();
/// Most elements an operand of `matrix_mul_tiled` may have (`m·k` and
/// `k·n`): its loads index A and B with 32-bit offsets; the slack keeps
/// `k + 16` within `u32` as well. (16 GiB of f32 per operand.)
pub const TILED_MAX_OPERAND: usize = (u32::MAX - (1 << 16)) as usize;
/// Threads per block of `gufunc_matmul_i64` (1-D, grid-stride).
pub const GUFUNC_THREADS: u32 = 256;

/// Repeats a block once per listed constant, with `$i` bound to it:
/// `unroll!(I in [0, 1, 2, 3] => { … })`, so that the micro-tile arrays are
/// indexed by constants only and stay in registers (no reliance on the
/// optimizer's unrolling heuristics).
macro_rules! unroll {
    ($i:ident in [$($n:literal),* $(,)?] => $body:block) => {{
        $({
            const $i: usize = $n;
            $body
        })*
    }};
}

/// Loads part `i` of a thread's share of a tile: with `VEC`, the 4
/// floats `src[p .. p + 4]` (one `ld.global.nc.v4`) into `dst[4 i ..
/// 4 i + 4]`; otherwise `src[p]` into `dst[i]`.
///
/// # Safety
/// Those elements are inside the operand `src` points to, which nothing
/// writes during the launch; with `VEC`, `src + p` is 16-byte aligned.
#[inline(always)]
unsafe fn load_part<const VEC: bool>(dst: &mut [f32; 8], i: usize, src: *const f32, p: u32) {
    if VEC {
        // SAFETY: 16 readable, aligned, read-only bytes (the caller).
        let v = unsafe { load_nc_v4(src.add(p as usize) as *const [u32; 4]) };
        for j in 0..4 {
            dst[4 * i + j] = f32::from_bits(v[j]);
        }
    } else {
        // SAFETY: inside the operand (the caller).
        dst[i] = unsafe { *src.add(p as usize) };
    }
}

/// The tiled SGEMM every `matrix_mul_tiled*` entry instantiates:
/// `C = A · B` (or `C += A · B[k-range]` with split-k), one `BM × BN`
/// tile of C per block of `BM·BN/64` threads.
///
/// - each thread computes an 8 × 8 micro-tile of C (rows `ty*4 + {0..4}`
///   and `BM/2 + ty*4 + {0..4}`, the same for columns with `tx`), held in
///   64 registers;
/// - k advances in tiles of `BK`: the A tile (`BM × BK`) is stored
///   *transposed* in shared memory (rows padded by 4 floats, so that the
///   transposing stores hit distinct banks) and the B tile (`BK × BN`)
///   as is, so each step of the inner loop reads 4 + 4 consecutive
///   floats of each with `ld.shared.v4.f32`, for 64 FMAs;
/// - double buffering: the next k-tile is fetched from global memory
///   into registers while the current one is multiplied, then stored to
///   the other shared buffer: one barrier per k-tile;
/// - `VEC`: the tiles are fetched with 16-byte `ld.global.nc.v4` loads
///   (needs `k % 4 == 0`, `n % 4 == 0` and 16-byte aligned `a`, `b`);
///   otherwise with 4-byte loads;
/// - edges: rows of A and columns of B past the matrix are clamped to
///   the last one (their products land in rows/columns of C that are
///   never stored), columns of A and rows of B past `k` read 0, stores
///   outside C are skipped, so any `m`, `k`, `n` works (up to
///   [`TILED_MAX_OPERAND`] elements per operand: loads use 32-bit
///   offsets, which keeps the kernel within 128 registers per thread);
/// - split-k: with `gridDim.z = s > 1`, block `z` multiplies its share of
///   the k-tiles and *adds* its partial tile to C with `atom.add.f32`
///   (the launcher zeroes C first; it uses at most 2 splits, so each
///   element is `(0 + p) + q` in either order: the same bits every run).
///
/// # Safety
/// `a` holds `m * k`, `b` holds `k * n` and `c` holds `m * n` f32 on the
/// device, row-major; `c` overlaps neither input; the products do not
/// overflow; `m * k` and `k * n` are below [`TILED_MAX_OPERAND`]; with
/// `VEC`, `k` and `n` are multiples of 4 and `a`, `b` 16-byte aligned;
/// the launch has `BM·BN/64` threads per block (1-D), the grid
/// `(ceil(n / BN), ceil(m / BM), s)` and [`SgemmTile::smem_bytes`] of
/// dynamic shared memory; with `s > 1`, C is zeroed before the
/// launch (host-checked).
#[inline(always)]
unsafe fn sgemm_tile<const BM: usize, const BN: usize, const BK: usize, const VEC: bool>(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    m: usize,
    k: usize,
    n: usize,
) {
    let threads = BM * BN / 64;
    const {
        assert!(BK == 8 || BK == 16);
        assert!((BM * BN / 64).is_multiple_of(BK) && (BM * BN / 64).is_multiple_of(BN / 4));
        // Every thread's share of a tile fits the 8-float prefetch arrays.
        assert!(BM * BK / (BM * BN / 64) <= 8 && BK * BN / (BM * BN / 64) <= 8);
    }
    let as_stride = BM + 4;
    let a_buf = BK * as_stride;
    let b_buf = BK * BN;
    // Dynamic shared memory: two A buffers, then two B buffers.
    let a_base = dynamic_shared_address();
    let b_base = a_base + (2 * a_buf * 4) as u32;

    let t = thread::thread_idx_x() as usize;
    let tx = t % (BN / 8);
    let ty = t / (BN / 8);
    let block_row = thread::block_idx_y() as usize * BM;
    let block_col = thread::block_idx_x() as usize * BN;
    let (k32, n32) = (k as u32, n as u32);

    // This block's k-tiles: [first, last) (all of them without split-k).
    let tiles = k32.div_ceil(BK as u32);
    let splits = thread::grid_dim_z();
    let per_split = tiles.div_ceil(splits);
    let first = thread::block_idx_z() * per_split;
    let last = tiles.min(first + per_split);
    if first >= last {
        return;
    }

    // Loader mapping. Element offsets in 32 bits (the host guarantees
    // m·k and k·n below TILED_MAX_OPERAND), of k-tile 0; rows of A and
    // columns of B clamped into the matrix.
    // VEC: A as float4s along k (BK/4 per row), B as float4s along n.
    // Scalar: A as single floats along k (BK per row), B along n.
    let a_per_row = if VEC { BK / 4 } else { BK };
    let b_per_row = if VEC { BN / 4 } else { BN };
    let width = if VEC { 4 } else { 1 };
    let a_k = (t % a_per_row) * width; // column of A within the k-tile
    let a_row0 = t / a_per_row;
    let a_step = threads / a_per_row; // rows between this thread's loads
    let a_loads = BM / a_step;
    let b_c = (t % b_per_row) * width; // column of B within the tile
    let b_row0 = t / b_per_row;
    let b_step = threads / b_per_row;
    let b_loads = BK / b_step;
    let mut a_off = [0u32; 8];
    for (i, off) in a_off.iter_mut().enumerate().take(a_loads) {
        let row = (block_row + a_row0 + i * a_step).min(m - 1);
        *off = (row * k + a_k) as u32;
    }
    let b_col = (block_col + b_c).min(n - width) as u32;
    // Shared-window byte addresses of this thread's stores (buffer 0).
    let a_store = a_base + ((a_k * as_stride + a_row0) * 4) as u32;
    let b_store = b_base + ((b_row0 * BN + b_c) * 4) as u32;
    // And of its fragment loads (buffer 0, k-step 0).
    let a_frag = a_base + (ty * 4 * 4) as u32;
    let b_frag = b_base + (tx * 4 * 4) as u32;

    // Fetches k-tile `k0` of A and B into registers (zeros past k).
    let fetch = |k0: u32| -> ([f32; 8], [f32; 8]) {
        let mut ra = [0.0f32; 8];
        let mut rb = [0.0f32; 8];
        if k0 + (a_k as u32) < k32 {
            for (i, &off) in a_off.iter().enumerate().take(a_loads) {
                // SAFETY: the row is clamped into A and column k0 + a_k
                // (with VEC, k0 + a_k + 3: k % 4 == 0) is below k.
                unsafe { load_part::<VEC>(&mut ra, i, a, off + k0) };
            }
        }
        for i in 0..b_loads {
            let row = k0 + (b_row0 + i * b_step) as u32;
            if row < k32 {
                // SAFETY: row < k and the column (with VEC, the 4 columns:
                // n % 4 == 0) is clamped into B.
                unsafe { load_part::<VEC>(&mut rb, i, b, row * n32 + b_col) };
            }
        }
        (ra, rb)
    };
    // Stores fetched registers into shared buffer `buf`.
    let stash = |buf: u32, ra: [f32; 8], rb: [f32; 8]| {
        let a_at = a_store + buf * (a_buf * 4) as u32;
        let b_at = b_store + buf * (b_buf * 4) as u32;
        for i in 0..a_loads {
            let row = (i * a_step * 4) as u32;
            if VEC {
                for j in 0..4 {
                    // SAFETY: a_k + j < BK and a_row0 + i * a_step < BM:
                    // inside buffer `buf` of the A tile; only this thread
                    // writes this slot, nobody reads the buffer until the
                    // next barrier.
                    unsafe {
                        store_shared_f32(a_at + row + (j * as_stride * 4) as u32, ra[4 * i + j])
                    };
                }
            } else {
                // SAFETY: as above, with j = 0.
                unsafe { store_shared_f32(a_at + row, ra[i]) };
            }
        }
        for i in 0..b_loads {
            let row = (i * b_step * BN * 4) as u32;
            if VEC {
                let v = [rb[4 * i], rb[4 * i + 1], rb[4 * i + 2], rb[4 * i + 3]];
                // SAFETY: b_row0 + i * b_step < BK and b_c + 3 < BN,
                // 16-byte aligned: inside buffer `buf` of the B tile; as
                // above.
                unsafe { store_shared_f32x4(b_at + row, v) };
            } else {
                // SAFETY: b_row0 + i * b_step < BK and b_c < BN: inside
                // buffer `buf` of the B tile; as above.
                unsafe { store_shared_f32(b_at + row, rb[i]) };
            }
        }
    };

    let mut acc = [[0.0f32; 8]; 8];
    let (ra, rb) = fetch(first * BK as u32);
    stash(0, ra, rb);
    sync_threads();
    let mut tile = first;
    let mut buf = 0u32;
    while tile < last {
        // Prefetch the next k-tile while this one is multiplied. After
        // the last tile this reads the next split's first tile, or
        // nothing past k: harmless, and it keeps the loop branch-free
        // (a conditional fetch gets merged with the conditional stash
        // below and sunk past the math, which serializes the loads).
        let (ra, rb) = fetch((tile + 1) * BK as u32);
        let a_buf_at = a_frag + buf * (a_buf * 4) as u32;
        let b_buf_at = b_frag + buf * (b_buf * 4) as u32;
        unroll!(KK in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] => {
            if KK < BK {
                // SAFETY: KK < BK, ty * 4 + BM/2 + 3 < BM and tx * 4 +
                // BN/2 + 3 < BN: inside buffer `buf`, 16-byte aligned
                // (as_stride and BN are multiples of 4); written before
                // the last barrier.
                let (a0, a1, b0, b1) = unsafe {
                    (
                        load_shared_f32x4(a_buf_at + (KK * as_stride * 4) as u32),
                        load_shared_f32x4(a_buf_at + ((KK * as_stride + BM / 2) * 4) as u32),
                        load_shared_f32x4(b_buf_at + (KK * BN * 4) as u32),
                        load_shared_f32x4(b_buf_at + ((KK * BN + BN / 2) * 4) as u32),
                    )
                };
                let av = [a0[0], a0[1], a0[2], a0[3], a1[0], a1[1], a1[2], a1[3]];
                let bv = [b0[0], b0[1], b0[2], b0[3], b1[0], b1[1], b1[2], b1[3]];
                unroll!(I in [0, 1, 2, 3, 4, 5, 6, 7] => {
                    unroll!(J in [0, 1, 2, 3, 4, 5, 6, 7] => {
                        acc[I][J] = fma_f32(av[I], bv[J], acc[I][J]);
                    });
                });
            }
        });
        // The other buffer was last read before the previous barrier.
        stash(buf ^ 1, ra, rb);
        sync_threads();
        buf ^= 1;
        tile += 1;
    }

    // Write the micro-tile: rows/columns 0..4 are at ty*4 (tx*4), 4..8
    // at BM/2 + ty*4 (BN/2 + tx*4).
    unroll!(I in [0, 1, 2, 3, 4, 5, 6, 7] => {
        let row = block_row + ty * 4 + (I % 4) + (I / 4) * (BM / 2);
        if row < m {
            unroll!(J in [0, 1, 2, 3, 4, 5, 6, 7] => {
                let col = block_col + tx * 4 + (J % 4) + (J / 4) * (BN / 2);
                if col < n {
                    // SAFETY: row < m and col < n: inside C; with split-k
                    // every block adds with an atomic (C zeroed by the
                    // launcher).
                    unsafe {
                        let p = c.add(row * n + col);
                        if splits > 1 {
                            fetch_add_f32(p, acc[I][J]);
                        } else {
                            *p = acc[I][J];
                        }
                    }
                }
            });
        }
    });
}

crate::device::kernels! {
    /// `a[r][c] *= 2` in place for every element of a `rows × cols`
    /// matrix. The matrix is contiguous, so this is a 1-D map over its
    /// `rows * cols` elements (16-byte vectors, element-wise head and tail:
    /// [`crate::bandwidth`]), launched on a 1-D grid.
    ///
    /// Fixes the seed's index `threadIdx.x + threadIdx.y*4` (see the
    /// module documentation): every element is visited once.
    ///
    /// # Safety
    /// `a` points to `rows * cols` f32 on the device, row-major, and
    /// `rows * cols` does not overflow (host-checked).
    pub fn doubles_matrix(a: *mut f32, rows: usize, cols: usize) as DOUBLES_MATRIX {
        // SAFETY: a holds rows * cols f32 (host-checked), only this launch touches it.
        unsafe {
            crate::bandwidth::device::map::<f32, 4, 0, 1>([], [a], 0, rows * cols, |_, [x]| {
                *x = double_element(*x)
            })
        };
    }

    /// `C = A · B`, one thread per element of C (x = column of C,
    /// y = row), each a dot product of length `k` read straight from global
    /// memory (the seed's `MatrixMulKernel`, generalized from one 5×5 block
    /// to any `m × k · k × n` with a 2-D grid and bounds checks).
    ///
    /// # Safety
    /// `a` holds `m * k`, `b` holds `k * n` and `c` holds `m * n` f32 on the
    /// device, row-major; `c` overlaps neither input; the products do not
    /// overflow (host-checked).
    pub fn matrix_mul_naive(
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        m: usize,
        k: usize,
        n: usize,
    ) as MATRIX_MUL_NAIVE {
        let (col, row) = thread::index_2d();
        if row < m && col < n {
            let mut acc = 0.0f32;
            for p in 0..k {
                // SAFETY: row < m, p < k and col < n: both indices are in bounds.
                acc = unsafe { fma_f32(*a.add(row * k + p), *b.add(p * n + col), acc) };
            }
            // SAFETY: row < m and col < n.
            unsafe { *c.add(row * n + col) = acc };
        }
    }

    /// Batched int64 matrix product with NumPy gufunc semantics
    /// `(m,n),(n,p)->(m,p)`: for every batch index `z < batch`,
    /// `C[z] = A[a_offsets[z] ..] · B[b_offsets[z] ..]`, where the offsets
    /// (in elements) locate the `m × n` and `n × p` row-major matrices that
    /// batch `z` uses (the host computes them from the broadcast batch
    /// shape, so broadcast inputs are never copied). Wrapping arithmetic
    /// ([`mul_add_i64`]).
    ///
    /// 1-D grid-stride over the `batch * m * p` outputs (any grid covers any
    /// size); output `idx` is batch `idx / (m p)`, row `(idx / p) % m`,
    /// column `idx % p`.
    ///
    /// # Safety
    /// `a_offsets` and `b_offsets` hold `batch` offsets each, such that
    /// `a_offsets[z] + m * n` and `b_offsets[z] + n * p` are within `a` and
    /// `b`; `c` holds `batch * m * p` i64 and overlaps nothing else; no
    /// product overflows and `m * p > 0` (host-checked).
    pub fn gufunc_matmul_i64(
        a: *const i64,
        b: *const i64,
        a_offsets: *const usize,
        b_offsets: *const usize,
        c: *mut i64,
        batch: usize,
        m: usize,
        n: usize,
        p: usize,
    ) as GUFUNC_MATMUL_I64 {
        let per_batch = m * p;
        for idx in thread::grid_stride(batch * per_batch) {
            let z = idx / per_batch;
            let r = idx % per_batch;
            let (i, j) = (r / p, r % p);
            // SAFETY: z < batch, the length of both offset tables.
            let (ao, bo) = unsafe { (*a_offsets.add(z) + i * n, *b_offsets.add(z) + j) };
            let mut acc = 0i64;
            for q in 0..n {
                // SAFETY: i < m, q < n, j < p: inside matrix z of A and of B.
                acc = unsafe { mul_add_i64(acc, *a.add(ao + q), *b.add(bo + q * p)) };
            }
            // SAFETY: idx < batch * m * p, the length of c.
            unsafe { *c.add(idx) = acc };
        }
    }
}

/// Declares the tiled SGEMM entry points, each instantiating [`sgemm_tile`]
/// with the shape of one [`SgemmTile`] constant, in one `kernels!` block
/// (their list is `SGEMM_KERNELS`).
macro_rules! sgemm_kernels {
    ($($(#[$doc:meta])* $name:ident as $handle:ident = $tile:ident;)*) => {
        crate::device::kernels! {
            list SGEMM_KERNELS;
            $(
                $(#[$doc])*
                ///
                /// # Safety
                #[doc = concat!("As [`sgemm_tile`] with the shape of [`", stringify!($tile), "`].")]
                pub fn $name(
                    a: *const f32,
                    b: *const f32,
                    c: *mut f32,
                    m: usize,
                    k: usize,
                    n: usize,
                ) as $handle {
                    // SAFETY: forwarded from this kernel's contract.
                    unsafe {
                        sgemm_tile::<{ $tile.bm }, { $tile.bn }, { $tile.bk }, { $tile.vec }>(
                            a, b, c, m, k, n,
                        )
                    }
                }
            )*
        }
    };
}

sgemm_kernels! {
    /// `C = A · B` with shared-memory tiles and register blocking,
    /// for any shape and alignment: 128 × 128 tiles of C, 4-byte loads
    /// (see [`sgemm_tile`]). The launcher picks this entry or another
    /// `matrix_mul_tiled*` by shape and alignment.
    matrix_mul_tiled as MATRIX_MUL_TILED = SGEMM_128;

    /// `matrix_mul_tiled` with 16-byte loads and k-tiles of 16 (128 × 128 tiles).
    matrix_mul_tiled_v4 as MATRIX_MUL_TILED_V4 = SGEMM_128_V4;

    /// `matrix_mul_tiled` with 64 × 64 tiles (64 threads), 4-byte loads.
    matrix_mul_tiled_64 as MATRIX_MUL_TILED_64 = SGEMM_64;

    /// `matrix_mul_tiled` with 64 × 64 tiles (64 threads), 16-byte loads.
    matrix_mul_tiled_64_v4 as MATRIX_MUL_TILED_64_V4 = SGEMM_64_V4;
}
