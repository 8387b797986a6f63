//! Small kernels that exercise the device layer on its own: static shared
//! memory (`shared_array!`) with block barriers, shared-memory atomics, and
//! the warp primitives `syncwarp`, `activemask`, `match_any_sync` and
//! `match_all_sync`, and the float methods of `GpuFloat`. (The shuffles, votes, global atomics and loads have
//! theirs in `reduce::primitive_tests`.)

/// Threads per block of `block_reverse_i32`, and its shared tile's length.
pub const REVERSE_BLOCK: usize = 256;

/// Where element `i` of a block of `len` elements goes in `block_reverse_i32`.
#[inline(always)]
pub fn reversed_index(i: usize, len: usize) -> usize {
    len - 1 - i
}

/// Threads of the one block of `shared_atomics_test`.
pub const ATOMICS_BLOCK: usize = 256;
/// Results `shared_atomics_test` writes to `out` (see its docs).
pub const ATOMICS_RESULTS: usize = 20;
/// Threads of the one block of `warp_match_test`, and the values per thread.
pub const MATCH_BLOCK: usize = 64;
/// Values per thread `warp_match_test` writes.
pub const MATCH_ROWS: usize = 8;

/// Rows per argument of `gpu_float_test_f32`/`_f64`: each `GpuFloat`
/// method once (`sin_cos` twice, for its two results).
pub const GPU_FLOAT_ROWS: usize = 31;

use crate::device::arith;
use crate::device::math::{self, GpuFloat};
use crate::device::shared::SharedAtomicAdd;
use crate::device::sync::sync_threads;
use crate::device::{thread, warp};
use crate::shared_array;

/// The f32 or the f64 function of a pair: `by_type!(f32, a, b)` is `a`.
macro_rules! by_type {
    (f32, $f32:path, $f64:path) => {
        $f32
    };
    (f64, $f32:path, $f64:path) => {
        $f64
    };
}

/// The body of `gpu_float_test_f32` (`$t` = `f32`) and `_f64`: thread `i`
/// writes, for each method of `GpuFloat` called by path, its result and that
/// of the `math` (or `arith`) function of the same meaning (named here from
/// its meaning, not from the trait's impl), for the arguments `x[i]`,
/// `x[(i + 1) mod n]`, `x[(i + 2) mod n]`.
macro_rules! gpu_float_test_body {
    ($t:tt, $x:ident, $n:ident, $out:ident) => {
        // The arguments' names come from here, as the table's `b` does (hygiene).
        gpu_float_test_body!(@rows $t, $x, $n, $out, (a, b, c);
            sqrt() => sqrt_f32 sqrt_f64, rsqrt() => rsqrt_f32 rsqrt_f64,
            cbrt() => cbrt_f32 cbrt_f64, exp() => exp_f32 exp_f64, exp2() => exp2_f32 exp2_f64,
            exp_m1() => expm1_f32 expm1_f64, ln() => log_f32 log_f64,
            log2() => log2_f32 log2_f64, log10() => log10_f32 log10_f64,
            ln_1p() => log1p_f32 log1p_f64, sin() => sin_f32 sin_f64, cos() => cos_f32 cos_f64,
            tan() => tan_f32 tan_f64, asin() => asin_f32 asin_f64, acos() => acos_f32 acos_f64,
            atan() => atan_f32 atan_f64, atan2(b) => atan2_f32 atan2_f64,
            sinh() => sinh_f32 sinh_f64, cosh() => cosh_f32 cosh_f64,
            tanh() => tanh_f32 tanh_f64, erf() => erf_f32 erf_f64, erfc() => erfc_f32 erfc_f64,
            floor() => floor_f32 floor_f64, ceil() => ceil_f32 ceil_f64,
            round() => round_f32 round_f64, trunc() => trunc_f32 trunc_f64,
            powf(b) => pow_f32 pow_f64, hypot(b) => hypot_f32 hypot_f64)
    };
    (@rows $t:tt, $x:ident, $n:ident, $out:ident, ($a:ident, $b:ident, $c:ident);
     $($method:ident($($arg:ident),*) => $f32:ident $f64:ident),*) => {
        for i in thread::grid_stride($n) {
            // SAFETY: each index is below n, the length of `x`.
            let ($a, $b, $c) = unsafe { (*$x.add(i), *$x.add((i + 1) % $n), *$x.add((i + 2) % $n)) };
            let sincos = by_type!($t, math::sincos_f32, math::sincos_f64);
            let fma = by_type!($t, arith::fma_f32, arith::fma_f64);
            let rows: [($t, $t); GPU_FLOAT_ROWS] = [
                $((GpuFloat::$method($a $(, $arg)*), by_type!($t, math::$f32, math::$f64)($a $(, $arg)*)),)*
                (GpuFloat::sin_cos($a).0, sincos($a).0),
                (GpuFloat::sin_cos($a).1, sincos($a).1),
                (GpuFloat::mul_add($a, $b, $c), fma($a, $b, $c)),
            ];
            for (r, (by_method, by_function)) in rows.into_iter().enumerate() {
                let k = 2 * (i * GPU_FLOAT_ROWS + r);
                // SAFETY: k + 1 < 2 · n · GPU_FLOAT_ROWS, the length of `out`.
                unsafe {
                    *$out.add(k) = by_method;
                    *$out.add(k + 1) = by_function;
                }
            }
        }
    };
}

crate::device::kernels! {
    /// Reverses each block-sized chunk of `input` into `output` through a
    /// static shared tile: every thread stores its element, the block waits at
    /// the barrier, then every thread loads its mirror element. The last chunk
    /// may be short (`len` elements).
    ///
    /// # Safety
    /// `input` and `output` hold `n` i32 each and do not overlap; the block
    /// has [`REVERSE_BLOCK`] threads.
    pub fn block_reverse_i32(
        input: *const i32,
        output: *mut i32,
        n: usize,
    ) as BLOCK_REVERSE_I32 {
        let tile = shared_array!(block_reverse_tile: [i32; REVERSE_BLOCK]);
        let t = thread::thread_idx_x() as usize;
        let start = thread::block_idx_x() as usize * REVERSE_BLOCK;
        let len = (n - start).min(REVERSE_BLOCK);
        if t < len {
            // SAFETY: start + t < n; t < REVERSE_BLOCK, the tile's length; each thread writes its own slot.
            unsafe { tile.store(t, *input.add(start + t)) };
        }
        sync_threads();
        if t < len {
            // SAFETY: reversed_index(t, len) < len ≤ REVERSE_BLOCK, written before the barrier.
            unsafe { *output.add(start + t) = tile.load(reversed_index(t, len)) };
        }
    }

    /// Every shared-memory atomic of the device layer, by the one block of
    /// [`ATOMICS_BLOCK`] threads, thread `t`:
    /// - u32 slots: `fetch_add(0, 1)` (its ticket), `fetch_min`/`fetch_max`
    ///   of `1000 + (37t + 11) mod 256`, `fetch_and(!(1 << t mod 16))` from
    ///   all ones, `fetch_or(1 << t mod 20)`, `fetch_xor(t·t)`,
    ///   `exchange(t + 1)`, `compare_exchange(0, t + 1)`;
    /// - i32: `fetch_add(t − 200)`, `fetch_min(100 − t)`, `fetch_max(3t − 400)`;
    /// - u64: `fetch_add(t << 33)`, `fetch_min`/`fetch_max` of `(t ^ 0x55) << 40`,
    ///   `fetch_or(1 << t mod 64)`;
    /// - i64: `fetch_add(−t << 35)`, `fetch_min(−t · 1000000007)`,
    ///   `fetch_max(3t − 1000)`;
    /// - f32 `fetch_add(0.5)`, `fetch_add(t)`; f64 `fetch_add(0.25)`.
    ///
    /// After a barrier thread 0 writes the final values to `out` in that
    /// order ([`ATOMICS_RESULTS`] of them, signed values sign-extended, the
    /// two f32 as their bits in the low and high word of one); thread `t` writes its ticket,
    /// its exchange's and its compare-exchange's previous values to
    /// `per_thread[t]`, `[256 + t]` and `[512 + t]`.
    ///
    /// # Safety
    /// `out` holds [`ATOMICS_RESULTS`] u64, `per_thread` `3 ·`
    /// [`ATOMICS_BLOCK`] u32; one block of [`ATOMICS_BLOCK`] threads.
    pub fn shared_atomics_test(out: *mut u64, per_thread: *mut u32) as SHARED_ATOMICS_TEST {
        let a32 = shared_array!(atomics_u32: [u32; 8]);
        let s32 = shared_array!(atomics_i32: [i32; 3]);
        let a64 = shared_array!(atomics_u64: [u64; 4]);
        let s64 = shared_array!(atomics_i64: [i64; 3]);
        let f32s = shared_array!(atomics_f32: [f32; 2]);
        let f64s = shared_array!(atomics_f64: [f64; 1]);
        let t = thread::thread_idx_x() as usize;
        if t == 0 {
            let init32 = [0, u32::MAX, 0, u32::MAX, 0, 0, 0, 0];
            // SAFETY: thread 0 alone initialises every slot, before the barrier.
            unsafe {
                for (k, v) in init32.into_iter().enumerate() {
                    a32.store(k, v);
                }
                for (k, v) in [0, i32::MAX, i32::MIN].into_iter().enumerate() {
                    s32.store(k, v);
                }
                for (k, v) in [0, u64::MAX, 0, 0].into_iter().enumerate() {
                    a64.store(k, v);
                }
                for (k, v) in [0, i64::MAX, i64::MIN].into_iter().enumerate() {
                    s64.store(k, v);
                }
                f32s.store(0, 0.0);
                f32s.store(1, 0.0);
                f64s.store(0, 0.0);
            }
        }
        sync_threads();
        let (tu, ti) = (t as u32, t as i32);
        let spread = 1000 + (37 * tu + 11) % 256;
        // SAFETY: every index is within its array; between the barriers the
        // slots are touched by atomics only.
        let (ticket, exchanged, compared) = unsafe {
            let ticket = a32.fetch_add(0, 1);
            a32.fetch_min(1, spread);
            a32.fetch_max(2, spread);
            a32.fetch_and(3, !(1 << (tu % 16)));
            a32.fetch_or(4, 1 << (tu % 20));
            a32.fetch_xor(5, tu.wrapping_mul(tu));
            let exchanged = a32.exchange(6, tu + 1);
            let compared = a32.compare_exchange(7, 0, tu + 1);
            s32.fetch_add(0, ti - 200);
            s32.fetch_min(1, 100 - ti);
            s32.fetch_max(2, 3 * ti - 400);
            a64.fetch_add(0, (t as u64) << 33);
            a64.fetch_min(1, ((t as u64) ^ 0x55) << 40);
            a64.fetch_max(2, ((t as u64) ^ 0x55) << 40);
            a64.fetch_or(3, 1 << (t % 64));
            s64.fetch_add(0, -(t as i64) << 35);
            s64.fetch_min(1, -(t as i64) * 1_000_000_007);
            s64.fetch_max(2, 3 * t as i64 - 1000);
            f32s.fetch_add(0, 0.5);
            f32s.fetch_add(1, t as f32);
            f64s.fetch_add(0, 0.25);
            (ticket, exchanged, compared)
        };
        // SAFETY: t < ATOMICS_BLOCK; per_thread holds 3 · ATOMICS_BLOCK u32.
        unsafe {
            *per_thread.add(t) = ticket;
            *per_thread.add(ATOMICS_BLOCK + t) = exchanged;
            *per_thread.add(2 * ATOMICS_BLOCK + t) = compared;
        }
        sync_threads();
        if t == 0 {
            // SAFETY: after the barrier every atomic is done; out holds
            // ATOMICS_RESULTS u64.
            unsafe {
                let mut k = 0;
                let mut put = |v: u64| {
                    *out.add(k) = v;
                    k += 1;
                };
                for i in 0..8 {
                    put(a32.load(i) as u64);
                }
                for i in 0..3 {
                    put(s32.load(i) as i64 as u64);
                }
                for i in 0..4 {
                    put(a64.load(i));
                }
                for i in 0..3 {
                    put(s64.load(i) as u64);
                }
                put(f32s.load(0).to_bits() as u64 | (f32s.load(1).to_bits() as u64) << 32);
                put(f64s.load(0).to_bits());
            }
        }
    }

    /// A shared-memory atomic on a misaligned address (two bytes into a u32
    /// slot), by thread 0 of the block: a located fault on the GPU and on
    /// the simulator. The other threads do nothing.
    ///
    /// # Safety
    /// None beyond a valid launch: the fault is the point.
    pub fn shared_atomic_misaligned(out: *mut u32) as SHARED_ATOMIC_MISALIGNED {
        let slots = shared_array!(misaligned_slots: [u32; 4]);
        if thread::thread_idx_x() == 0 {
            // SAFETY: the address lies inside `slots`; its misalignment is
            // the fault this kernel exists for.
            let old = unsafe { u32::shared_fetch_add(slots.address() + 2, 1) };
            // SAFETY: never reached (the atomic faults); out holds one u32.
            unsafe { *out = old };
        }
    }

    /// The warp primitives, by every thread of one block of [`MATCH_BLOCK`]
    /// threads, lane `l`: row `r` of `out` (`MATCH_ROWS × MATCH_BLOCK`,
    /// row-major) holds
    /// 0. `activemask()` with every lane converged;
    /// 1. `match_any_sync(FULL, l / 4)`;
    /// 2. `match_all_sync(FULL, 7)`;
    /// 3. `match_all_sync(FULL, l)`;
    /// 4. `match_any_sync_u64(FULL, (l mod 3) << 40 | 5)`;
    /// 5. `match_all_sync_u64(FULL, 1 << 40)`;
    /// 6. `activemask()` in a branch of the lanes `l < 10` (0 for the others);
    /// 7. the shared value lane `l ^ 1` stored before a `syncwarp(FULL)`:
    ///    `5 · (t ^ 1)`, `t` the thread index.
    ///
    /// # Safety
    /// `out` holds `MATCH_ROWS · MATCH_BLOCK` u32; one block of
    /// [`MATCH_BLOCK`] threads.
    pub fn warp_match_test(out: *mut u32) as WARP_MATCH_TEST {
        let tile = shared_array!(warp_match_tile: [u32; MATCH_BLOCK]);
        let t = thread::thread_idx_x() as usize;
        let l = warp::lane_id();
        let full = warp::FULL_MASK;
        let converged = warp::activemask();
        let rows = [
            converged,
            warp::match_any_sync(full, l / 4),
            warp::match_all_sync(full, 7),
            warp::match_all_sync(full, l),
            warp::match_any_sync_u64(full, ((l % 3) as u64) << 40 | 5),
            warp::match_all_sync_u64(full, 1 << 40),
        ];
        let branch = if l < 10 { warp::activemask() } else { 0 };
        // SAFETY: t < MATCH_BLOCK; each lane writes its own slot, and reads
        // its neighbour's after the warp barrier.
        let neighbour = unsafe {
            tile.store(t, 5 * t as u32);
            warp::syncwarp(full);
            tile.load(t ^ 1)
        };
        for (r, v) in rows.into_iter().chain([branch, neighbour]).enumerate() {
            // SAFETY: r < MATCH_ROWS, t < MATCH_BLOCK.
            unsafe { *out.add(r * MATCH_BLOCK + t) = v };
        }
    }

    /// Every `GpuFloat` method on f32, thread `i` on arguments `x[i]`,
    /// `x[(i + 1) mod n]`, `x[(i + 2) mod n]`: row `r` of argument `i` is
    /// `out[2 (i · GPU_FLOAT_ROWS + r)]`, the method's result, and the next
    /// word, the result of the `math` function of the same meaning (the
    /// rows' order is `gpu_float_test_body!`'s). The two must be bit for bit
    /// equal: the trait is those functions.
    ///
    /// # Safety
    /// `x` holds `n > 0` f32, `out` `2 · n ·` [`GPU_FLOAT_ROWS`].
    pub fn gpu_float_test_f32(x: *const f32, n: usize, out: *mut f32) as GPU_FLOAT_TEST_F32 {
        gpu_float_test_body!(f32, x, n, out);
    }

    /// `gpu_float_test_f32`'s rows on f64.
    ///
    /// # Safety
    /// `x` holds `n > 0` f64, `out` `2 · n ·` [`GPU_FLOAT_ROWS`].
    pub fn gpu_float_test_f64(x: *const f64, n: usize, out: *mut f64) as GPU_FLOAT_TEST_F64 {
        gpu_float_test_body!(f64, x, n, out);
    }
}
