//! The matrix kernels of seed 001: K3 `doubles_matrix`, K4
//! `matrix_mul_naive`, K5 `matrix_mul_tiled` and K9 `gufunc_matmul_i64`.
//!
//! Every matrix is row-major and contiguous (the host launchers copy other
//! layouts to standard layout first). Thread mapping of the 2-D kernels:
//! x = column, y = row, as in the seed.
//!
//! ## The seed's `doubles_matrix` bug
//! Seed 001 indexes its 5×5 matrix with `threadIdx.x + threadIdx.y*4`: the
//! row stride is 4 where the matrix has 5 columns, so threads `(4, y)` and
//! `(0, y+1)` both double element `4 + 4y` (elements 4, 8, 12 and 16 are
//! quadrupled), and the largest index is `4 + 4·4 = 20`: elements 21..24 are
//! never touched. The row stride must be the column count:
//! `row * cols + col`. Since the matrix is contiguous, `doubles_matrix`
//! visits its `rows * cols` elements as one 1-D range with the vectorized
//! map of [`crate::bandwidth`] (a 2-D grid of 32 × 8 blocks, one element per
//! thread, reached 0.77 of a device copy on an H100), so any rows × cols
//! works.

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

/// Rows of C computed by one block of `matrix_mul_tiled`.
pub const TILED_BM: usize = 128;
/// Columns of C computed by one block of `matrix_mul_tiled`.
pub const TILED_BN: usize = 128;
/// Depth of the k-tiles `matrix_mul_tiled` stages in shared memory.
pub const TILED_BK: usize = 8;
/// Threads per block of `matrix_mul_tiled` (a 16 × 16 grid of threads, each
/// computing an 8 × 8 micro-tile of C).
pub const TILED_THREADS: u32 = 256;
/// Dynamic shared memory of one `matrix_mul_tiled` block, in bytes: two
/// buffers of the transposed A tile (8 × 132 floats, padded) and two of the
/// B tile (8 × 128 floats).
pub const TILED_SMEM_BYTES: u32 = (2 * TILED_BK * (TILED_BM + 4 + TILED_BN) * 4) as u32;
/// Most elements an operand of `matrix_mul_tiled` may have (`m·k` and
/// `k·n`): its loads index A and B with 32-bit offsets; the slack keeps
/// `k + 16` within `u32` as well. (16 GiB of f32 per operand.)
pub const TILED_MAX_OPERAND: usize = (u32::MAX - (1 << 16)) as usize;
/// Threads per block of `gufunc_matmul_i64` (1-D, grid-stride).
pub const GUFUNC_THREADS: u32 = 256;

/// Row stride (in floats) of the transposed A tile in shared memory: 128 + 4
/// padding, so that the loaders' transposing stores hit 32 different banks
/// while every row stays 16-byte aligned for `ld.shared.v4`.
#[cfg(target_arch = "nvptx64")]
const AS_STRIDE: usize = TILED_BM + 4;

/// Repeats a block once per listed constant, with `$i` bound to it:
/// `unroll!(I in [0, 1, 2, 3] => { … })`, so that the micro-tile arrays are
/// indexed by constants only and stay in registers (no reliance on the
/// optimizer's unrolling heuristics).
#[cfg(target_arch = "nvptx64")]
macro_rules! unroll {
    ($i:ident in [$($n:literal),* $(,)?] => $body:block) => {{
        $({
            const $i: usize = $n;
            $body
        })*
    }};
}

#[cfg(target_arch = "nvptx64")]
mod entry {
    use super::*;
    use crate::device::arith::fma_f32;
    use crate::device::shared::dynamic_shared_address;
    use crate::device::sync::sync_threads;
    use crate::device::thread;
    use crate::device::vector::{load_shared_f32x4, store_shared_f32};

    /// K3: `a[r][c] *= 2` in place for every element of a `rows × cols`
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
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn doubles_matrix(a: *mut f32, rows: usize, cols: usize) {
        // SAFETY: a holds rows * cols f32 (host-checked), only this launch touches it.
        unsafe {
            crate::bandwidth::device::map::<f32, 4, 0, 1>([], [a], 0, rows * cols, |_, [x]| {
                *x = double_element(*x)
            })
        };
    }

    /// K4: `C = A · B`, one thread per element of C (x = column of C,
    /// y = row), each a dot product of length `k` read straight from global
    /// memory (the seed's `MatrixMulKernel`, generalized from one 5×5 block
    /// to any `m × k · k × n` with a 2-D grid and bounds checks).
    ///
    /// # Safety
    /// `a` holds `m * k`, `b` holds `k * n` and `c` holds `m * n` f32 on the
    /// device, row-major; `c` overlaps neither input; the products do not
    /// overflow (host-checked).
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn matrix_mul_naive(
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        m: usize,
        k: usize,
        n: usize,
    ) {
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

    /// K5: `C = A · B` with shared-memory tiles and register blocking.
    ///
    /// The seed's recipe (load a tile into shared memory, synchronize,
    /// compute, synchronize) scaled up to what a fast SIMT GEMM needs:
    /// - each block of 256 threads computes a 128 × 128 tile of C; each
    ///   thread an 8 × 8 micro-tile (rows `ty*4 + {0..4}` and
    ///   `64 + ty*4 + {0..4}`, the same for columns with `tx`), held in 64
    ///   registers;
    /// - k advances in tiles of 8: the A tile (128 × 8) is stored
    ///   *transposed* in shared memory and the B tile (8 × 128) as is, so
    ///   each step of the inner loop reads 4 + 4 consecutive floats of each
    ///   with two `ld.shared.v4.f32` per operand, for 64 FMAs;
    /// - double buffering: the next k-tile is fetched from global memory
    ///   into registers while the current one is multiplied, then stored to
    ///   the other shared buffer: one barrier per k-tile;
    /// - edges: loads outside A or B read 0, stores outside C are skipped, so
    ///   any `m`, `k`, `n` works (up to [`TILED_MAX_OPERAND`] elements per
    ///   operand: loads use 32-bit offsets, which keeps the kernel within
    ///   128 registers per thread, so two blocks fit on an SM).
    ///
    /// Grid: `(ceil(n / 128), ceil(m / 128))`, block: 256 threads (1-D).
    ///
    /// # Safety
    /// `a` holds `m * k`, `b` holds `k * n` and `c` holds `m * n` f32 on the
    /// device, row-major; `c` overlaps neither input; the products do not
    /// overflow; `m * k` and `k * n` are below [`TILED_MAX_OPERAND`]; the
    /// launch has 256 threads per block, the grid above and
    /// [`TILED_SMEM_BYTES`] of dynamic shared memory (host-checked).
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn matrix_mul_tiled(
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        m: usize,
        k: usize,
        n: usize,
    ) {
        const A_BUF: usize = TILED_BK * AS_STRIDE;
        const B_BUF: usize = TILED_BK * TILED_BN;
        // Dynamic shared memory (TILED_SMEM_BYTES, passed by the launch):
        // two A buffers, then two B buffers.
        let a_base = dynamic_shared_address();
        let b_base = a_base + (2 * A_BUF * 4) as u32;

        let t = thread::thread_idx_x() as usize;
        let tx = t % 16;
        let ty = t / 16;
        let block_row = thread::block_idx_y() as usize * TILED_BM;
        let block_col = thread::block_idx_x() as usize * TILED_BN;

        // Loader mapping. A: column t % 8 of the k-tile, rows t / 8 + 32 i
        // (a warp reads 4 rows × 32 contiguous bytes). B: column t % 128,
        // rows t / 128 + 2 i (a warp reads 128 contiguous bytes).
        let a_col = t % 8;
        let a_row = t / 8;
        let b_col = t % 128;
        let b_row = t / 128;
        let a_rows_ok: [bool; 4] = [
            block_row + a_row < m,
            block_row + a_row + 32 < m,
            block_row + a_row + 64 < m,
            block_row + a_row + 96 < m,
        ];
        let b_col_ok = block_col + b_col < n;
        // Element offsets of this thread's first loads (k-tile 0), in 32
        // bits: the host guarantees m·k and k·n below TILED_MAX_OPERAND, so
        // every in-bounds offset fits (and k, n fit u32). 32-bit offsets
        // bring the kernel to ≤ 128 registers on sm_80/sm_90 (141 with
        // 64-bit ones), which lets two blocks share an SM. Only
        // dereferenced when in bounds.
        let a_first = ((block_row + a_row) * k + a_col) as u32;
        let b_first = (b_row * n + block_col + b_col) as u32;
        let (k32, n32) = (k as u32, n as u32);
        // Shared-window byte addresses of this thread's stores (buffer 0).
        let a_store = a_base + ((a_col * AS_STRIDE + a_row) * 4) as u32;
        let b_store = b_base + ((b_row * TILED_BN + b_col) * 4) as u32;
        // And of its fragment loads (buffer 0, k-step 0).
        let a_frag = a_base + (ty * 4 * 4) as u32;
        let b_frag = b_base + (tx * 4 * 4) as u32;

        // Fetches k-tile `k0` of A and B into registers (zeros outside).
        let fetch = |k0: u32| -> ([f32; 4], [f32; 4]) {
            let mut ra = [0.0f32; 4];
            let mut rb = [0.0f32; 4];
            let a_k_ok = k0 + (a_col as u32) < k32;
            unroll!(I in [0, 1, 2, 3] => {
                if a_k_ok && a_rows_ok[I] {
                    // SAFETY: row block_row + a_row + 32 I < m and column
                    // k0 + a_col < k: inside A.
                    ra[I] = unsafe { *a.add((a_first + 32 * I as u32 * k32 + k0) as usize) };
                }
                if b_col_ok && k0 + ((b_row + 2 * I) as u32) < k32 {
                    // SAFETY: row k0 + b_row + 2 I < k and column
                    // block_col + b_col < n: inside B.
                    rb[I] = unsafe { *b.add((b_first + (k0 + 2 * I as u32) * n32) as usize) };
                }
            });
            (ra, rb)
        };
        // Stores fetched registers into shared buffer `buf`.
        let stash = |buf: usize, ra: [f32; 4], rb: [f32; 4]| {
            let a_off = (buf * A_BUF * 4) as u32;
            let b_off = (buf * B_BUF * 4) as u32;
            unroll!(I in [0, 1, 2, 3] => {
                // SAFETY: a_col < 8 and a_row + 32 I < 128: inside buffer
                // `buf` of the A tile; only this thread writes this slot, and
                // nobody reads the buffer until the next barrier.
                unsafe { store_shared_f32(a_store + a_off + (32 * I * 4) as u32, ra[I]) };
                // SAFETY: b_row + 2 I < 8 and b_col < 128: inside buffer
                // `buf` of the B tile; as above.
                unsafe {
                    store_shared_f32(b_store + b_off + (2 * I * TILED_BN * 4) as u32, rb[I])
                };
            });
        };

        let mut acc = [[0.0f32; 8]; 8];
        let tiles = k32.div_ceil(TILED_BK as u32);
        let (ra, rb) = fetch(0);
        stash(0, ra, rb);
        sync_threads();
        let mut tile = 0u32;
        while tile < tiles {
            let buf = (tile & 1) as usize;
            let more = tile + 1 < tiles;
            // Prefetch the next k-tile while this one is multiplied.
            let (ra, rb) = if more {
                fetch((tile + 1) * TILED_BK as u32)
            } else {
                ([0.0; 4], [0.0; 4])
            };
            let a_buf = a_frag + (buf * A_BUF * 4) as u32;
            let b_buf = b_frag + (buf * B_BUF * 4) as u32;
            unroll!(KK in [0, 1, 2, 3, 4, 5, 6, 7] => {
                // SAFETY: KK < 8, ty * 4 + 64 + 3 < 128 and tx * 4 + 64 + 3
                // < 128: inside buffer `buf`, 16-byte aligned (AS_STRIDE and
                // 128 are multiples of 4); written before the last barrier.
                let (a0, a1, b0, b1) = unsafe {
                    (
                        load_shared_f32x4(a_buf + (KK * AS_STRIDE * 4) as u32),
                        load_shared_f32x4(a_buf + ((KK * AS_STRIDE + 64) * 4) as u32),
                        load_shared_f32x4(b_buf + (KK * TILED_BN * 4) as u32),
                        load_shared_f32x4(b_buf + ((KK * TILED_BN + 64) * 4) as u32),
                    )
                };
                let av = [a0[0], a0[1], a0[2], a0[3], a1[0], a1[1], a1[2], a1[3]];
                let bv = [b0[0], b0[1], b0[2], b0[3], b1[0], b1[1], b1[2], b1[3]];
                unroll!(I in [0, 1, 2, 3, 4, 5, 6, 7] => {
                    unroll!(J in [0, 1, 2, 3, 4, 5, 6, 7] => {
                        acc[I][J] = fma_f32(av[I], bv[J], acc[I][J]);
                    });
                });
            });
            if more {
                stash(buf ^ 1, ra, rb);
            }
            sync_threads();
            tile += 1;
        }

        // Write the micro-tile: rows/columns 0..4 are at ty*4 (tx*4), 4..8
        // at 64 + ty*4 (64 + tx*4).
        unroll!(I in [0, 1, 2, 3, 4, 5, 6, 7] => {
            let row = block_row + ty * 4 + (I % 4) + (I / 4) * 64;
            if row < m {
                unroll!(J in [0, 1, 2, 3, 4, 5, 6, 7] => {
                    let col = block_col + tx * 4 + (J % 4) + (J / 4) * 64;
                    if col < n {
                        // SAFETY: row < m and col < n: inside C.
                        unsafe { *c.add(row * n + col) = acc[I][J] };
                    }
                });
            }
        });
    }

    /// K9: batched int64 matrix product with NumPy gufunc semantics
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
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn gufunc_matmul_i64(
        a: *const i64,
        b: *const i64,
        a_offsets: *const usize,
        b_offsets: *const usize,
        c: *mut i64,
        batch: usize,
        m: usize,
        n: usize,
        p: usize,
    ) {
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
