//! Small kernels that exercise each device-layer primitive the reduction is
//! built from on its own (warp shuffles and votes, atomics, wide loads, the
//! block tree step), so that a failure points at one primitive. The host
//! launches them from `reduce::primitives` in its tests.
use crate::device::thread::{block_idx_x, index_1d, thread_idx_x};
use crate::device::{atomic, load, warp};

use super::Sum;
use super::body::block_storage;

crate::device::kernels! {
    /// Each thread of a warp-multiple launch writes what its lane receives from
    /// each shuffle, for 32- and 64-bit values. Thread `g` (global index)
    /// contributes `x = g·3 + 1` (u32) and `y = (g << 33) | g` (u64); row `r` of
    /// `out32`/`out64` (each `8 × threads` long, row-major) holds for every
    /// thread:
    /// - row 0: `shuffle_down(x, 1)`, row 1: `shuffle_up(x, 3)`,
    ///   row 2: `shuffle_xor(x, 5)`, row 3: `shuffle_idx(x, 7)`,
    /// - rows 4..8: the same for `y`… in `out64`; for `out32`, rows 4..8 hold
    ///   `lane_id()`, `warp::reduce(x, +)` (lane 0 meaningful),
    ///   `warp::all_reduce(x, +)`, `ballot(x % 3 == 0)`.
    ///
    /// Rows 0..4 of `out64` are the 64-bit shuffles of `y`; rows 4..8 of
    /// `out64` hold `warp::reduce(y, +)`, `warp::all_reduce(y, +)`, `any(g %
    /// 64 == 5)`, `all(lane < 32)`.
    ///
    /// # Safety
    /// `out32` and `out64` hold `8 · threads` elements each, `threads` being the
    /// total number of threads of the launch (a 1-D grid of 1-D blocks whose
    /// size is a multiple of 32).
    pub fn warp_shuffle_test(
        out32: *mut u32,
        out64: *mut u64,
        threads: usize,
    ) as WARP_SHUFFLE_TEST {
        let g = index_1d();
        let x = (g as u32).wrapping_mul(3).wrapping_add(1);
        let y = ((g as u64) << 33) | g as u64;
        let lane = warp::lane_id();
        let row32 = [
            warp::shuffle_down(x, 1),
            warp::shuffle_up(x, 3),
            warp::shuffle_xor(x, 5),
            warp::shuffle_idx(x, 7),
            lane,
            warp::reduce(x, u32::wrapping_add),
            warp::all_reduce(x, u32::wrapping_add),
            warp::ballot(x.is_multiple_of(3)),
        ];
        let row64 = [
            warp::shuffle_down(y, 1),
            warp::shuffle_up(y, 3),
            warp::shuffle_xor(y, 5),
            warp::shuffle_idx(y, 7),
            warp::reduce(y, u64::wrapping_add),
            warp::all_reduce(y, u64::wrapping_add),
            warp::any(g % 64 == 5) as u64,
            warp::all(lane < 32) as u64,
        ];
        for r in 0..8 {
            // SAFETY: r < 8 and g < threads: inside the 8 · threads elements.
            unsafe {
                *out32.add(r * threads + g) = row32[r];
                *out64.add(r * threads + g) = row64[r];
            }
        }
    }

    /// Every thread `g < n` hits the atomics once:
    /// - `tickets[g] = fetch_add_u32(&counters[0], 1)` (a permutation of 0..n),
    /// - `fetch_max_u32(&counters[1], g)`, `fetch_min_u32(&counters[2], g)`,
    /// - `exchange_u32(&counters[3], g)` (ends as some g < n),
    /// - `compare_exchange_u32(&counters[4], 0, g + 1)`: exactly one thread
    ///   sees 0 and adds 1 to `counters[5]`,
    /// - `fetch_max_i32` / `fetch_min_i32` of `g − n/2` on `signed[0]` / `[1]`,
    /// - `fetch_add_f32(sum_f32, 1.0)`, `fetch_add_f64(&sums[0], 0.5)`,
    ///   `fetch_add_u64(&sums_u64[0], g)`.
    ///
    /// # Safety
    /// `tickets` holds `n` u32; `counters` 6 u32 (initialised by the host: 0, 0,
    /// u32::MAX, u32::MAX, 0, 0); `signed` 2 i32 (i32::MIN, i32::MAX); `sum_f32`
    /// one f32, `sum_f64` one f64, `sum_u64` one u64 (all 0). `n` fits in i32.
    pub fn atomic_test(
        tickets: *mut u32,
        counters: *mut u32,
        signed: *mut i32,
        sum_f32: *mut f32,
        sum_f64: *mut f64,
        sum_u64: *mut u64,
        n: usize,
    ) as ATOMIC_TEST {
        let g = index_1d();
        if g >= n {
            return;
        }
        let g32 = g as u32;
        // SAFETY: every pointer holds the elements listed in # Safety, in global
        // memory, touched by this launch only through atomics (tickets[g] is
        // written by thread g alone).
        unsafe {
            *tickets.add(g) = atomic::fetch_add_u32(counters, 1);
            atomic::fetch_max_u32(counters.add(1), g32);
            atomic::fetch_min_u32(counters.add(2), g32);
            atomic::exchange_u32(counters.add(3), g32);
            if atomic::compare_exchange_u32(counters.add(4), 0, g32 + 1) == 0 {
                atomic::fetch_add_u32(counters.add(5), 1);
            }
            let s = g as i32 - (n / 2) as i32;
            atomic::fetch_max_i32(signed, s);
            atomic::fetch_min_i32(signed.add(1), s);
            atomic::fetch_add_f32(sum_f32, 1.0);
            atomic::fetch_add_f64(sum_f64, 0.5);
            atomic::fetch_add_u64(sum_u64, g as u64);
        }
    }

    /// `out[i] = input[i]` for `i < 4·vectors`, copied 16 bytes at a time with
    /// `load_nc_v4`, and `out_cg[i] = load_cg_b32(input[i])` (grid-stride).
    ///
    /// # Safety
    /// `input` is 16-byte aligned with `4 · vectors` u32, read-only during the
    /// launch; `out` and `out_cg` hold as many and overlap nothing.
    pub fn load_test(
        input: *const u32,
        out: *mut u32,
        out_cg: *mut u32,
        vectors: usize,
    ) as LOAD_TEST {
        for v in crate::device::thread::grid_stride(vectors) {
            // SAFETY: v < vectors; alignment and extent from # Safety.
            let w = unsafe { load::load_nc_v4(input.cast::<[u32; 4]>().add(v)) };
            for (k, word) in w.into_iter().enumerate() {
                let i = 4 * v + k;
                // SAFETY: i < 4 · vectors.
                unsafe {
                    *out.add(i) = word;
                    *out_cg.add(i) = load::load_cg_b32(input.add(i));
                }
            }
        }
    }

    /// `out[b] = sum of input[b·blockDim.x .. (b+1)·blockDim.x]` (wrapping
    /// i64) through the block collective (`TempStorage::reduce`, in
    /// [`block_storage`]): one value per thread, any block size that is a
    /// multiple of 32.
    ///
    /// # Safety
    /// `input` holds `gridDim.x · blockDim.x` i64, `out` `gridDim.x`;
    /// the launch has `reduce::SHARED_BYTES` of dynamic shared memory (a block
    /// that is not a multiple of 32 is the block collective's located fault).
    pub fn block_reduce_test_i64(input: *const i64, out: *mut i64) as BLOCK_REDUCE_TEST_I64 {
        // SAFETY: index_1d() < gridDim.x · blockDim.x.
        let v = unsafe { *input.add(index_1d()) };
        // SAFETY: the launch has the shared memory block_storage needs; every
        // thread calls it.
        let total = unsafe { block_storage::<i64>().reduce::<Sum>(v) };
        if thread_idx_x() == 0 {
            // SAFETY: blockIdx.x < gridDim.x.
            unsafe { *out.add(block_idx_x() as usize) = total };
        }
    }
}
