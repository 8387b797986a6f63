//! The fidelity cases: small adversarial kernels whose output is fixed by
//! the PTX ISA and the CUDA C++ Programming Guide, run on the GPU and on the
//! simulator and compared bit for bit (`tests/gpu/fidelity/` holds the
//! expected values and where each comes from).
//!
//! Every case kernel has the same parameters, `(out: *mut u32, n: usize)`,
//! and writes only `out[..n]`; [`FIDELITY_CASES`] gives each its launch
//! shape and output length, the one place the host launcher
//! (`cuda_kernels_host::fidelity`) reads them from. Entry names start with
//! `fid_`, so that they cannot clash with the other families'.
// The cases compute on purpose what lints call mistakes (∞ − ∞, 0 · x).
#![allow(clippy::eq_op, clippy::erasing_op)]
use crate::device::kernel::Kernel;
use crate::device::sync::sync_threads;
use crate::device::{atomic, thread, warp};
use crate::{gpu_printf, shared_array};

/// One fidelity case: its kernel, launch shape and output words.
#[derive(Clone, Copy, Debug)]
pub struct FidelityCase {
    /// The case kernel.
    pub kernel: Kernel<(*mut u32, usize)>,
    /// Blocks (x, y, z).
    pub grid: [u32; 3],
    /// Threads per block (x, y, z).
    pub block: [u32; 3],
    /// `u32` words of output (`n`), zeroed before the launch.
    pub out_words: usize,
}

const fn case(kernel: Kernel<(*mut u32, usize)>, block: u32, out_words: usize) -> FidelityCase {
    FidelityCase {
        kernel,
        grid: [1, 1, 1],
        block: [block, 1, 1],
        out_words,
    }
}

/// Every fidelity case kernel with its launch shape.
pub const FIDELITY_CASES: &[FidelityCase] = &[
    case(FID_BALLOT_AFTER_EXIT, 32, 32),
    case(FID_VOTES_AFTER_EXIT, 64, 128),
    case(FID_SHFL_EVEN_ODD, 32, 64),
    case(FID_NESTED_QUARTERS, 32, 64),
    case(FID_LOOP_EXACT_MASKS, 32, 64),
    case(FID_PARTIAL_WARP, 48, 96),
    case(FID_SHFL_U64_HALF_WARP, 32, 64),
    case(FID_SHFL_OPERAND_RANGES, 32, 128),
    case(FID_SHFL_FROM_EXITED_LANE, 32, 32),
    case(FID_BARRIER_AFTER_EXIT, 128, 128),
    case(FID_BARRIER_LOOP_EXITS, 64, 64),
    case(FID_TWO_BARRIERS, 64, 64),
    case(FID_BARRIER_AFTER_PARTIAL_STORES, 64, 64),
    case(FID_ATOMIC_ADD_F32_EDGES, 1, 16),
    case(FID_ATOMIC_ADD_F64_EDGES, 1, 16),
    case(FID_ATOMIC_INT_EDGES, 64, 8),
    FidelityCase {
        kernel: FID_GRID_3D,
        grid: [3, 2, 2],
        block: [4, 3, 2],
        out_words: 2 * 288,
    },
    FidelityCase {
        kernel: FID_WARPS_OF_3D_BLOCK,
        grid: [1, 1, 1],
        block: [8, 4, 2],
        out_words: 128,
    },
    case(FID_INT_EDGES, 1, 32),
    case(FID_FLOAT_TO_INT, 1, 32),
    case(FID_FLOAT_EDGES, 1, 32),
    case(FID_FMA_COPYSIGN_NAN, 1, 16),
    case(FID_NAN_ARITHMETIC, 1, 17),
    case(FID_WRAPPING_OVERFLOW, 1, 8),
    case(FID_F64_LOW_WORD, 32, 32),
    case(FID_F64_HALVES, 32, 64),
    case(FID_F64_WORDS, 32, 128),
    case(FID_LARGE_LOCAL_ARRAY, 32, 32),
    case(FID_PRINTF_FORMATS, 1, 1),
    case(FID_PRINTF_GPU_MISPRINTS, 1, 1),
    FidelityCase {
        kernel: FID_PRINTF_PER_THREAD,
        grid: [PRINTF_BLOCKS, 1, 1],
        block: [PRINTF_THREADS, 1, 1],
        out_words: 1,
    },
    case(FID_MISALIGNED_SHARED_V4, 32, 32),
    case(FID_RUNAWAY_RECURSION, 32, 32),
    case(FID_DEEP_RECURSION, 32, 32),
    case(FID_ACTIVEMASK_WHILE_LANE_EXITS, 32, 32),
    case(FID_TF32_ROUNDING, 1, TF32_INPUTS.len()),
    case(FID_MISALIGNED_LDMATRIX, 32, 32),
    FidelityCase {
        kernel: FID_MMA_WORDS,
        grid: [MMA_BLOCKS, 1, 1],
        block: [32, 1, 1],
        out_words: MMA_BLOCKS as usize * 128,
    },
    case(FID_REGISTER_HUNGRY, 1024, 1024),
    case(FID_REGISTER_HUNGRY, 64, 1024),
];

/// Blocks of [`FID_PRINTF_PER_THREAD`].
pub const PRINTF_BLOCKS: u32 = 256;
/// Threads per block of [`FID_PRINTF_PER_THREAD`].
pub const PRINTF_THREADS: u32 = 256;

/// Lanes of [`FID_SHFL_EVEN_ODD`]'s two masks.
pub const EVEN_LANES: u32 = 0x5555_5555;
/// The odd lanes.
pub const ODD_LANES: u32 = 0xaaaa_aaaa;

/// Writes `v` to `out[i]` when `i < n`.
///
/// # Safety
/// `out` holds `n` u32.
#[inline(always)]
unsafe fn put(out: *mut u32, n: usize, i: usize, v: u32) {
    if i < n {
        // SAFETY: i < n, the output's length.
        unsafe { *out.add(i) = v };
    }
}

/// The linear thread index in the block (x fastest).
#[inline(always)]
fn linear() -> usize {
    let (x, y, z) = (
        thread::thread_idx_x() as usize,
        thread::thread_idx_y() as usize,
        thread::thread_idx_z() as usize,
    );
    let (bx, by) = (
        thread::block_dim_x() as usize,
        thread::block_dim_y() as usize,
    );
    x + bx * (y + by * z)
}

/// 1 from a special register, which the compiler cannot fold (blocks of
/// this file's single-thread cases have one thread in x).
#[inline(always)]
fn one() -> u32 {
    thread::block_dim_x().min(1).max(thread::grid_dim_x())
}

/// A deep call that keeps a frame of its own per level (`#[inline(never)]`
/// and a local array written with volatile stores). Nothing stays live in
/// registers across the call (such values would be spilled to the stack).
#[inline(never)]
fn recurse(depth: u32, seed: u32) -> u32 {
    let mut frame = [0u32; 64];
    for (k, f) in frame.iter_mut().enumerate() {
        // SAFETY: a valid local.
        unsafe { core::ptr::write_volatile(f, seed.wrapping_add(k as u32)) };
    }
    if depth == 0 {
        // SAFETY: a valid local.
        unsafe { core::ptr::read_volatile(&frame[0]) }
    } else {
        recurse(depth - 1, seed.wrapping_mul(3)).wrapping_add(1)
    }
}

/// The f32 bits [`FID_TF32_ROUNDING`] converts with `cvt.rna.tf32.f32`:
/// NaNs with payloads in the low 13 bits alone, and above them, quiet and
/// signalling, of both signs; infinities; finite values whose rounding
/// carries into the exponent, ties, and subnormals.
pub const TF32_INPUTS: [u32; 16] = [
    0x7f80_0001,
    0xff80_0001,
    0x7f80_0fff,
    0x7f80_1000,
    0x7fc0_0000,
    0x7fff_ffff,
    0xffff_ffff,
    0x7f80_2000,
    0x7f80_0000,
    0xff80_0000,
    0x7f7f_ffff,
    0x3f80_0fff,
    0x3f80_1000,
    0x0000_0fff,
    0x8000_1000,
    0xbf7f_f000,
];

/// Blocks (warps) of [`FID_MMA_WORDS`]: each one `mma.sync` of the type
/// [`mma_type`] and inputs of the class [`mma_class`] names.
pub const MMA_BLOCKS: u32 = 192;

/// The input type of block `block` of [`FID_MMA_WORDS`]: 0 bf16
/// (m16n8k16), 1 f16 (m16n8k16), 2 tf32 (m16n8k8).
pub const fn mma_type(block: u32) -> u32 {
    block % 3
}

/// The input class of block `block` of [`FID_MMA_WORDS`]: 0 values in
/// [0.5, 2) of both signs; 1 exponents spread over ±10 binades; 2 products
/// near 1 of both signs with C near 2⁸ (cancellation, alignment to C); 3
/// class 0 with rare specials (NaNs quiet and signalling, ±∞, ±0,
/// subnormals, the largest finite).
pub const fn mma_class(block: u32) -> u32 {
    (block / 3) % 4
}

/// A 32-bit mix (the murmur3 finaliser).
const fn mix(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x85eb_ca6b);
    x ^= x >> 13;
    x = x.wrapping_mul(0xc2b2_ae35);
    x ^ (x >> 16)
}

/// The bits of element `index` of operand `operand` (0 A row-major 16 ×
/// K, 1 B row-major K × 8, 2 C row-major 16 × 8, f32) of block `block` of
/// [`FID_MMA_WORDS`]: 16-bit patterns (in the low half) for bf16 and f16
/// A and B, f32 patterns for tf32 and C. The one generator of the kernel
/// and of the host's check.
pub const fn mma_input(block: u32, operand: u32, index: u32) -> u32 {
    let h = mix(block.wrapping_mul(0x9e37_79b9) ^ mix(operand * 4096 + index + 1));
    let h2 = mix(h ^ 0x5bd1_e995);
    let ty = mma_type(block);
    let (ebits, mbits) = if operand == 2 || ty == 2 {
        (8, 23)
    } else if ty == 0 {
        (8, 7)
    } else {
        (5, 10)
    };
    let bias = (1u32 << (ebits - 1)) - 1;
    let top = (1u32 << ebits) - 1;
    let sign = h >> 31;
    let mut mant = h2 & ((1u32 << mbits) - 1);
    let near_one = bias - 1 + (h >> 8) % 2;
    let exp = match mma_class(block) {
        0 => near_one,
        1 => bias - 10 + (h >> 8) % 21,
        2 => {
            if operand == 2 {
                bias + 8
            } else {
                near_one
            }
        }
        _ => match (h >> 9) % 256 {
            0 => {
                mant |= 1 << (mbits - 1);
                top
            }
            1 => {
                mant = (mant & ((1 << (mbits - 1)) - 1)) | 1;
                top
            }
            2 => {
                mant = 0;
                top
            }
            3 => {
                mant = 0;
                0
            }
            4 => {
                mant |= 1;
                0
            }
            5 => {
                mant = (1 << mbits) - 1;
                top - 1
            }
            _ => near_one,
        },
    };
    sign << (ebits + mbits) | exp << mbits | mant
}

/// Words of [`FID_LARGE_LOCAL_ARRAY`]'s per-thread array: 260 KiB.
pub const LARGE_LOCAL_WORDS: usize = 260 * 1024 / 4;

/// [`FID_REGISTER_HUNGRY`]'s body: one variable per name, `t · (k + 1)`
/// rotated by `k`, all live through four rounds of `x = x · (next | 1) ^
/// next-but-one` (the last two wrap to the first), folded with rotate-xor.
macro_rules! hungry {
    ($t:expr; $($v:ident)*) => {{
        let mut k = 0u32;
        $(
            k += 1;
            let mut $v = $t.wrapping_mul(k).rotate_left(k - 1);
        )*
        for _ in 0..4 {
            hungry!(@mix $($v)*);
        }
        let mut s = 0u32;
        $( s = s.rotate_left(1) ^ $v; )*
        s
    }};
    (@mix $a:ident $b:ident $c:ident $($rest:ident)*) => {
        $a = $a.wrapping_mul($b | 1) ^ $c;
        hungry!(@mix $b $c $($rest)*);
    };
    (@mix $a:ident $b:ident) => {
        $a = $a.wrapping_mul($b | 1);
        $b = $b.wrapping_add($a);
    };
}

crate::device::kernels! {
    list FIDELITY_KERNELS;

    /// Lanes with `lane % 3 == 0` return; the others take a full-mask
    /// ballot of `true`: `out[lane]` is the ballot (the non-exited lanes).
    ///
    /// # Safety
    /// `out` holds `n` u32 (as every case below).
    pub fn fid_ballot_after_exit(out: *mut u32, n: usize) as FID_BALLOT_AFTER_EXIT {
        let lane = warp::lane_id();
        if lane.is_multiple_of(3) {
            return;
        }
        let b = warp::ballot_sync(warp::FULL_MASK, true);
        // SAFETY: the case's contract.
        unsafe { put(out, n, lane as usize, b) };
    }

    /// Two warps; in warp 0, lanes ≥ 20 return. Full-mask `all(lane < 20)`
    /// and `any(lane ≥ 20)`: `out[2t]`, `out[2t + 1]`.
    pub fn fid_votes_after_exit(out: *mut u32, n: usize) as FID_VOTES_AFTER_EXIT {
        let t = thread::thread_idx_x() as usize;
        let lane = warp::lane_id();
        if t < 32 && lane >= 20 {
            return;
        }
        let all = warp::all_sync(warp::FULL_MASK, lane < 20) as u32;
        let any = warp::any_sync(warp::FULL_MASK, lane >= 20) as u32;
        // SAFETY: the case's contract.
        unsafe {
            put(out, n, 2 * t, all);
            put(out, n, 2 * t + 1, any);
        }
    }

    /// Even and odd lanes in divergent branches, each half with its own mask:
    /// even lanes broadcast lane 4's `10·lane` and swap with `lane ^ 2`; odd
    /// lanes broadcast lane 5's and shift down by 2 (`lane + 100`).
    pub fn fid_shfl_even_odd(out: *mut u32, n: usize) as FID_SHFL_EVEN_ODD {
        let lane = warp::lane_id();
        let (a, b) = if lane.is_multiple_of(2) {
            (
                warp::shfl_idx_sync_b32(EVEN_LANES, lane * 10, 4),
                warp::shfl_xor_sync_b32(EVEN_LANES, lane, 2),
            )
        } else {
            (
                warp::shfl_idx_sync_b32(ODD_LANES, lane * 10, 5),
                warp::shfl_down_sync_b32(ODD_LANES, lane + 100, 2),
            )
        };
        // SAFETY: the case's contract.
        unsafe {
            put(out, n, 2 * lane as usize, a);
            put(out, n, 2 * lane as usize + 1, b);
        }
    }

    /// Four quarters of a warp in nested branches, each a collective of its
    /// own 8-lane mask (xor 7; broadcast of lane 9; ballot of `lane % 3 ==
    /// 0`; shift down by 1), then a full-mask swap of the halves:
    /// `out[lane]`, `out[32 + lane]`.
    pub fn fid_nested_quarters(out: *mut u32, n: usize) as FID_NESTED_QUARTERS {
        let lane = warp::lane_id();
        let v = if lane < 16 {
            if lane < 8 {
                warp::shfl_xor_sync_b32(0x0000_00ff, lane, 7)
            } else {
                warp::shfl_idx_sync_b32(0x0000_ff00, lane, 9)
            }
        } else if lane < 24 {
            warp::ballot_sync(0x00ff_0000, lane.is_multiple_of(3))
        } else {
            warp::shfl_down_sync_b32(0xff00_0000, lane, 1)
        };
        let w = warp::shfl_xor_b32(v, 16);
        // SAFETY: the case's contract.
        unsafe {
            put(out, n, lane as usize, v);
            put(out, n, 32 + lane as usize, w);
        }
    }

    /// Per-lane loop counts (`lane % 4 + 1`); in round `k`, the lanes still
    /// looping (`lane % 4 ≥ k`) add their partner's (`lane ^ 4`) value with
    /// exactly that mask; after the loop, a full-mask butterfly sum.
    /// `out[lane]`: the value after the loop; `out[32 + lane]`: the sum.
    pub fn fid_loop_exact_masks(out: *mut u32, n: usize) as FID_LOOP_EXACT_MASKS {
        let lane = warp::lane_id();
        let mut acc = lane.wrapping_mul(0x9e37_79b9);
        for k in 0..lane % 4 + 1 {
            let mask = ((0xfu32 << k) & 0xf).wrapping_mul(0x1111_1111);
            acc = acc.wrapping_add(warp::shfl_xor_sync_b32(mask, acc, 4));
        }
        let sum = warp::all_reduce(acc, u32::wrapping_add);
        // SAFETY: the case's contract.
        unsafe {
            put(out, n, lane as usize, acc);
            put(out, n, 32 + lane as usize, sum);
        }
    }

    /// A block of 48 threads: warp 1 has 16 lanes. Full-mask butterfly sums
    /// over each 16 lanes (xor 8, 4, 2, 1) of `3t`, and a full-mask ballot of
    /// odd `t`: `out[2t]`, `out[2t + 1]`.
    pub fn fid_partial_warp(out: *mut u32, n: usize) as FID_PARTIAL_WARP {
        let t = thread::thread_idx_x();
        let mut s = 3 * t;
        for m in [8, 4, 2, 1] {
            s = s.wrapping_add(warp::shfl_xor_b32(s, m));
        }
        let b = warp::ballot(t % 2 == 1);
        // SAFETY: the case's contract.
        unsafe {
            put(out, n, 2 * t as usize, s);
            put(out, n, 2 * t as usize + 1, b);
        }
    }

    /// Lanes ≥ 16 return; the others broadcast lane 3's 64-bit value
    /// `(lane << 40) | 7` with mask `0xffff` (two 32-bit shuffles): `out[2
    /// lane]` low word, `out[2 lane + 1]` high word.
    pub fn fid_shfl_u64_half_warp(out: *mut u32, n: usize) as FID_SHFL_U64_HALF_WARP {
        let lane = warp::lane_id();
        if lane >= 16 {
            return;
        }
        let v = warp::shuffle_idx_sync(0xffff, ((lane as u64) << 40) | 7, 3);
        // SAFETY: the case's contract.
        unsafe {
            put(out, n, 2 * lane as usize, v as u32);
            put(out, n, 2 * lane as usize + 1, (v >> 32) as u32);
        }
    }

    /// Shuffle operands at the edges: up by 0, down by 33 (taken mod 32),
    /// index 37, xor 31: `out[4 lane + k]`.
    pub fn fid_shfl_operand_ranges(out: *mut u32, n: usize) as FID_SHFL_OPERAND_RANGES {
        let lane = warp::lane_id();
        let v = lane + 1000;
        let r = [
            warp::shfl_up_b32(v, 0),
            warp::shfl_down_b32(v, 33),
            warp::shfl_idx_b32(v, 37),
            warp::shfl_xor_b32(v, 31),
        ];
        for (k, x) in r.into_iter().enumerate() {
            // SAFETY: the case's contract.
            unsafe { put(out, n, 4 * lane as usize + k, x) };
        }
    }

    /// Undefined on the hardware: lanes ≥ 16 return, the others read lane 20
    /// (exited) with a full mask. `out[lane]`: what they read.
    pub fn fid_shfl_from_exited_lane(out: *mut u32, n: usize) as FID_SHFL_FROM_EXITED_LANE {
        let lane = warp::lane_id();
        if lane >= 16 {
            return;
        }
        let v = warp::shfl_idx_b32(lane + 1, 20);
        // SAFETY: the case's contract.
        unsafe { put(out, n, lane as usize, v) };
    }

    /// Threads ≥ 100 of 128 return; the others store `7t` in shared memory,
    /// wait at a barrier, and read their neighbour's (`(t + 1) % 100`).
    pub fn fid_barrier_after_exit(out: *mut u32, n: usize) as FID_BARRIER_AFTER_EXIT {
        let tile = shared_array!(fid_barrier_exit_tile: [u32; 128]);
        let t = thread::thread_idx_x() as usize;
        if t >= 100 {
            return;
        }
        // SAFETY: t < 128; each thread writes its own slot.
        unsafe { tile.store(t, 7 * t as u32) };
        sync_threads();
        // SAFETY: written before the barrier; the case's contract.
        unsafe { put(out, n, t, tile.load((t + 1) % 100)) };
    }

    /// Thread `t` loops `t % 4 + 1` times: store `100t + k`, barrier, add
    /// the neighbour's (`(t + 1) % 64`) slot, barrier; threads leave (and
    /// exit) after different rounds. `out[t]`: the sum.
    pub fn fid_barrier_loop_exits(out: *mut u32, n: usize) as FID_BARRIER_LOOP_EXITS {
        let tile = shared_array!(fid_barrier_loop_tile: [u32; 64]);
        let t = thread::thread_idx_x() as usize;
        let mut acc = 0u32;
        for k in 0..(t % 4 + 1) as u32 {
            // SAFETY: t < 64; each thread writes its own slot.
            unsafe { tile.store(t, 100 * t as u32 + k) };
            sync_threads();
            // SAFETY: written before the barrier.
            acc = acc.wrapping_add(unsafe { tile.load((t + 1) % 64) });
            sync_threads();
        }
        // SAFETY: the case's contract.
        unsafe { put(out, n, t, acc) };
    }

    /// Undefined on the hardware: even threads wait at one barrier, odd
    /// threads at another. `out[t] = t + 1` after it (even), `t + 2` before
    /// it (odd).
    pub fn fid_two_barriers(out: *mut u32, n: usize) as FID_TWO_BARRIERS {
        let t = thread::thread_idx_x() as usize;
        if t.is_multiple_of(2) {
            sync_threads();
            // SAFETY: the case's contract.
            unsafe { put(out, n, t, t as u32 + 1) };
        } else {
            // SAFETY: the case's contract.
            unsafe { put(out, n, t, t as u32 + 2) };
            sync_threads();
        }
    }

    /// Issue 40's kernel that hung an H200: 64 threads; threads `t < 20`
    /// store `f[t] = 1.5 t` (f32) and `d[t] = 2.5 t` (f64) in shared memory,
    /// threads `t < 4` also `f[64 + t] = 1000 + t`, `d[64 + t] = 2000 + t`
    /// and zero `counts[t]`; barrier; every thread adds 1 to `counts[t % 4]`
    /// (a shared atomic); barrier; with `i = t % 20`, `j = t % 4`: `out[t] =
    /// (f[i] + f[64 + j]) as u32 + 10^4 (d[i] + d[64 + j]) as u32 + 10^8
    /// counts[j]`. rustc's PTX had three `bar.sync 0` for the two barriers
    /// (the first duplicated into the branches), which lanes reached at
    /// different instructions: the block never finished. `n` is 64; the
    /// 20 is `5n / 16`, so that no constant decides the branches.
    pub fn fid_barrier_after_partial_stores(out: *mut u32, n: usize) as FID_BARRIER_AFTER_PARTIAL_STORES {
        let f = shared_array!(fid_partial_f: [f32; 68]);
        let d = shared_array!(fid_partial_d: [f64; 68]);
        let counts = shared_array!(fid_partial_counts: [u32; 4]);
        let t = thread::thread_idx_x() as usize;
        let stored = 5 * n / 16;
        if t < stored && t < 64 {
            // SAFETY: t < 64; each thread writes its own slots.
            unsafe {
                f.store(t, 1.5 * t as f32);
                d.store(t, 2.5 * t as f64);
            }
        }
        if t < 4 {
            // SAFETY: t < 4; each thread writes its own slots.
            unsafe {
                f.store(64 + t, 1000.0 + t as f32);
                d.store(64 + t, 2000.0 + t as f64);
                counts.store(t, 0);
            }
        }
        sync_threads();
        // SAFETY: t % 4 < 4, zeroed before the barrier; only atomics until
        // the next one.
        unsafe { counts.fetch_add(t % 4, 1) };
        sync_threads();
        let (i, j) = (t % 20, t % 4);
        // SAFETY: i < 20 and 64 + j < 68, written before the first barrier;
        // the counts' last atomic before the second.
        let v = unsafe {
            (f.load(i) + f.load(64 + j)) as u32
                + 10_000 * (d.load(i) + d.load(64 + j)) as u32
                + 100_000_000 * counts.load(j)
        };
        // SAFETY: the case's contract.
        unsafe { put(out, n, t, v) };
    }

    /// `atom.add.f32` on global memory at its edges (one thread): each
    /// `out[k]` is set to an f32, then an f32 is added atomically. The old
    /// value of slot 7's add goes to `out[12]`.
    pub fn fid_atomic_add_f32_edges(out: *mut u32, n: usize) as FID_ATOMIC_ADD_F32_EDGES {
        let cases: [(u32, f32); 11] = [
            (0, 1e-38),                             // 0 + subnormal
            (1e-38f32.to_bits(), 1e-38),            // subnormal + subnormal
            (2e-38f32.to_bits(), -1e-38),           // normal + subnormal
            (1.5e-38f32.to_bits(), -1.2e-38),       // normal + normal = subnormal
            ((-1.5e-38f32).to_bits(), 1.2e-38),     // the same, negative
            (1f32.to_bits(), 1e-40),                // 1 + a tiny subnormal
            (f32::INFINITY.to_bits(), f32::NEG_INFINITY),
            (0x7fc0_0123, 1.0),                     // a NaN with a payload + 1
            (0x8000_0000, 0.0),                     // -0 + +0
            (0x8000_0000, -0.0),                    // -0 + -0
            (0x3f80_0001, 1.0),                     // rounding: 1 + 2^-23 + 1
        ];
        if n < 16 {
            return;
        }
        let base = one() as usize - 1;
        for (k, &(init, add)) in cases.iter().enumerate() {
            let p = out.wrapping_add(base + k);
            // SAFETY: k < 11 < n; one thread.
            unsafe { *p = init };
            // SAFETY: as above; a global, aligned f32.
            let old = unsafe { atomic::fetch_add_f32(p.cast(), add) };
            if k == 7 {
                // SAFETY: 12 < n.
                unsafe { put(out, n, 12, old.to_bits()) };
            }
        }
    }

    /// `atom.add.f64` at its edges (one thread): subnormals (kept), ∞ − ∞,
    /// a NaN with a payload + 1; each result's low and high words in
    /// `out[2k]`, `out[2k + 1]`.
    pub fn fid_atomic_add_f64_edges(out: *mut u32, n: usize) as FID_ATOMIC_ADD_F64_EDGES {
        let cases: [(u64, f64); 4] = [
            (1e-310f64.to_bits(), 1e-310),
            (f64::INFINITY.to_bits(), f64::NEG_INFINITY),
            (0x7ff8_0000_0000_0123, 1.0),
            (0x8000_0000_0000_0000, 0.0),
        ];
        if n < 16 {
            return;
        }
        let base = one() as usize - 1;
        for (k, &(init, add)) in cases.iter().enumerate() {
            let p = out.wrapping_add(base + 2 * k).cast::<u64>();
            // SAFETY: 2k + 1 < n; out is 8-byte aligned (a buffer's start); one thread.
            unsafe {
                *p = init;
                atomic::fetch_add_f64(p.cast(), add);
            }
        }
    }

    /// Integer atomics of 64 threads at their edges (thread 0 sets the
    /// slots, a barrier, then every thread): a wrapping add from
    /// `0xffff_fff0`, signed max and min of `t − 32`, unsigned max and min
    /// of `t · 0x0400_0001`, exchange, and a compare-exchange loop that
    /// counts.
    pub fn fid_atomic_int_edges(out: *mut u32, n: usize) as FID_ATOMIC_INT_EDGES {
        let t = thread::thread_idx_x();
        if n < 8 {
            return;
        }
        if t == 0 {
            let init = [0xffff_fff0, i32::MIN as u32, i32::MAX as u32, 0, u32::MAX, 5, 0, 0];
            for (k, v) in init.into_iter().enumerate() {
                // SAFETY: k < 8 ≤ n.
                unsafe { *out.add(k) = v };
            }
        }
        sync_threads();
        // SAFETY: every slot is a global, aligned u32 < n, touched only by atomics now.
        unsafe {
            atomic::fetch_add_u32(out, 1);
            atomic::fetch_max_i32(out.add(1).cast(), t as i32 - 32);
            atomic::fetch_min_i32(out.add(2).cast(), t as i32 - 32);
            atomic::fetch_max_u32(out.add(3), t.wrapping_mul(0x0400_0001));
            atomic::fetch_min_u32(out.add(4), t.wrapping_mul(0x0400_0001).wrapping_add(9));
            if t == 17 {
                atomic::exchange_u32(out.add(5), 0xdead_beef);
            }
            loop {
                let seen = atomic::compare_exchange_u32(out.add(6), u32::MAX, u32::MAX);
                if atomic::compare_exchange_u32(out.add(6), seen, seen + 1) == seen {
                    break;
                }
            }
        }
    }

    /// A 3-D grid of 3-D blocks: each thread writes its indices packed in
    /// nibbles (`tx ty tz bx by bz` from bit 0) and the dimensions (`bdx bdy
    /// bdz gdx gdy gdz`) at `out[gid]`, `out[288 + gid]`, with `gid` the
    /// linear block index × 24 + the linear thread index.
    pub fn fid_grid_3d(out: *mut u32, n: usize) as FID_GRID_3D {
        use thread::*;
        let blin = block_idx_x() + grid_dim_x() * (block_idx_y() + grid_dim_y() * block_idx_z());
        let per = block_dim_x() * block_dim_y() * block_dim_z();
        let gid = (blin * per) as usize + linear();
        let ids = thread_idx_x()
            | thread_idx_y() << 4
            | thread_idx_z() << 8
            | block_idx_x() << 12
            | block_idx_y() << 16
            | block_idx_z() << 20;
        let dims = block_dim_x()
            | block_dim_y() << 4
            | block_dim_z() << 8
            | grid_dim_x() << 12
            | grid_dim_y() << 16
            | grid_dim_z() << 20;
        // SAFETY: the case's contract.
        unsafe {
            put(out, n, gid, ids);
            put(out, n, 288 + gid, dims);
        }
    }

    /// Warps of an 8×4×2 block follow the linear index: `out[2 lin]` the
    /// lane, `out[2 lin + 1]` a full-mask ballot of `tx == ty`.
    pub fn fid_warps_of_3d_block(out: *mut u32, n: usize) as FID_WARPS_OF_3D_BLOCK {
        let lin = linear();
        let b = warp::ballot(thread::thread_idx_x() == thread::thread_idx_y());
        // SAFETY: the case's contract.
        unsafe {
            put(out, n, 2 * lin, warp::lane_id());
            put(out, n, 2 * lin + 1, b);
        }
    }

    /// Integer operations at their edges (one thread), on values the
    /// compiler cannot fold: wrapping division and remainder of `i32::MIN`
    /// by −1, Euclidean and truncating division of negatives, shifts past
    /// the width (wrapping: masked), rotates, bit counts of 0, byte and bit
    /// reversal, the high word of a 32×32 product, 64-bit wrapping products.
    pub fn fid_int_edges(out: *mut u32, n: usize) as FID_INT_EDGES {
        let o = one();
        let m1 = -(o as i32);
        let min = i32::MIN + (o as i32 - 1);
        let z = o - 1;
        let x = 0x8765_4321u32.wrapping_mul(o);
        let r = [
            min.wrapping_div(m1) as u32,
            min.wrapping_rem(m1) as u32,
            (-7 * o as i32 / 2) as u32,
            (-7 * o as i32 % 2) as u32,
            (-7 * o as i32).div_euclid(2) as u32,
            (-7 * o as i32).rem_euclid(2) as u32,
            1u32.wrapping_shl(33 * o),
            x.wrapping_shr(36 * o),
            ((x as i32) >> (4 * o)) as u32,
            x.rotate_left(37 * o),
            z.leading_zeros(),
            z.trailing_zeros(),
            x.count_ones(),
            x.swap_bytes(),
            x.reverse_bits(),
            ((x as u64 * 0xffff_fff1u64 * o as u64) >> 32) as u32,
            (0x1234_5678_9abc_def0u64.wrapping_mul(0xfedc_ba98_7654_3211 * o as u64)) as u32,
            ((0x1234_5678_9abc_def0u64.wrapping_mul(0xfedc_ba98_7654_3211 * o as u64)) >> 32) as u32,
            min.wrapping_abs() as u32,
            ((min as i64 * min as i64) >> 32) as u32,
            (u32::MAX * o) / 7,
            (u32::MAX * o) % 7,
            ((i64::MIN + o as i64 - 1) / 3) as u32,
            (((i64::MIN + o as i64 - 1) / 3) >> 32) as u32,
            (x as u8).wrapping_add(200) as u32,
            (x as i16 as i32) as u32,
            (x as i8 as i32) as u32,
            min.saturating_sub(5) as u32,
            (u32::MAX * o).saturating_add(5),
            (x as u16).wrapping_mul(x as u16) as u32,
        ];
        for (k, v) in r.into_iter().enumerate() {
            // SAFETY: the case's contract.
            unsafe { put(out, n, k, v) };
        }
    }

    /// Float-to-integer casts (Rust's: saturating, NaN → 0, toward zero)
    /// and integer-to-float rounding (to nearest even), one thread.
    pub fn fid_float_to_int(out: *mut u32, n: usize) as FID_FLOAT_TO_INT {
        let f = one() as f32;
        let d = one() as f64;
        let nan = f32::from_bits(0x7fc0_0000 * one());
        let r = [
            (nan * f) as i32 as u32,
            (3e9 * f) as i32 as u32,
            (-3e9 * f) as i32 as u32,
            (-1.5 * f) as u32,
            (4.3e9 * f) as u32,
            (2.5 * f) as i32 as u32,
            (-2.5 * f) as i32 as u32,
            (-0.9 * f) as i32 as u32,
            (f32::INFINITY * f) as u8 as u32,
            (-300.0 * f) as i8 as i32 as u32,
            (1e20 * d) as i64 as u32,
            ((1e20 * d) as i64 >> 32) as u32,
            (nan as f64 * d) as u64 as u32,
            ((-1e300 * d) as i64 >> 32) as u32,
            ((u32::MAX * one()) as f32).to_bits(),
            ((16_777_217 * one()) as f32).to_bits(),
            ((16_777_219 * one()) as f32).to_bits(),
            (((1u64 << 53) + 1) * one() as u64) as f64 as u64 as u32,
            ((((1u64 << 53) + 3) * one() as u64) as f64).to_bits() as u32,
            ((u64::MAX / one() as u64) as f32).to_bits(),
            ((i32::MIN * one() as i32) as f32).to_bits(),
            ((-(16_777_217 * one() as i32)) as f32).to_bits(),
            (0.5 * f + 0.49999997 * f) as u32,
            ((1u64 << 63) as f64 * d) as u64 as u32,
            (((1u64 << 63) as f64 * d) as u64 >> 32) as u32,
            ((1u64 << 63) as f64 * d) as i64 as u32,
            (((1u64 << 63) as f64 * d) as i64 >> 32) as u32,
            (f32::MAX * f) as u32,
            (f32::MIN_POSITIVE * f) as u32,
            (-0.0 * f) as i32 as u32,
            (65535.9 * f) as u16 as u32,
            (65536.0 * f) as u16 as u32,
        ];
        for (k, v) in r.into_iter().enumerate() {
            // SAFETY: the case's contract.
            unsafe { put(out, n, k, v) };
        }
    }

    /// f32 and f64 arithmetic at its edges (one thread), NaN aside:
    /// subnormals kept (no flush to zero), signed zeros, overflow to ∞,
    /// correctly rounded division and square root, one rounding in `fma`,
    /// `min`/`max` with a NaN operand (the other operand).
    pub fn fid_float_edges(out: *mut u32, n: usize) as FID_FLOAT_EDGES {
        use crate::device::arith::fma_f32;
        use crate::device::math::sqrt_f32;
        let f = one() as f32;
        let d = one() as f64;
        let tiny = f32::from_bits(1) * f;
        let nan = f32::from_bits(0x7fc0_0000 * one());
        let r = [
            (tiny * 2.0).to_bits(),
            (f32::MIN_POSITIVE * f / 4.0).to_bits(),
            (f32::MIN_POSITIVE * f - tiny).to_bits(),
            (tiny / 2.0).to_bits(),
            (tiny * 1.5).to_bits(),
            sqrt_f32(f32::from_bits(0x0000_0100) * f).to_bits(),
            (-0.0 * f + 0.0).to_bits(),
            (-0.0 * f - 0.0).to_bits(),
            (0.0 * -f).to_bits(),
            (f32::MAX * f * 2.0).to_bits(),
            (-f32::MAX * f * 2.0).to_bits(),
            (1.0 / (3.0 * f)).to_bits(),
            (0.1 * f + 0.2).to_bits(),
            fma_f32(1.0 + f32::EPSILON * f, 1.0 - f32::EPSILON, -1.0).to_bits(),
            ((1.0 + f32::EPSILON * f) * (1.0 - f32::EPSILON) - 1.0).to_bits(),
            sqrt_f32(2.0 * f).to_bits(),
            (1.0 / (0.0 * f)).to_bits(),
            (-1.0 / (0.0 * f)).to_bits(),
            (2.0 * f).min(nan).to_bits(),
            nan.max(-3.0 * f).to_bits(),
            (1.0 * f).min(-1.0).to_bits(),
            (f64::from_bits(1) * d * 3.0).to_bits() as u32,
            (f64::MIN_POSITIVE * d / 8.0).to_bits() as u32,
            ((f64::MIN_POSITIVE * d / 8.0).to_bits() >> 32) as u32,
            ((1.0 / (3.0 * d)).to_bits()) as u32,
            ((1.0 / (3.0 * d)).to_bits() >> 32) as u32,
            ((0.1 * d + 0.2).to_bits()) as u32,
            ((f64::MAX * d * 2.0).to_bits() >> 32) as u32,
            (1e-45f32 * f * 0.5).to_bits(),
            (f32::MIN_POSITIVE * f * 0.75).to_bits(),
            ((tiny as f64) * d).to_bits() as u32,
            (((tiny as f64) * d).to_bits() >> 32) as u32,
        ];
        for (k, v) in r.into_iter().enumerate() {
            // SAFETY: the case's contract.
            unsafe { put(out, n, k, v) };
        }
    }

    /// `fma` (the device layer's `fma.rn`) and `copysign` with NaN
    /// operands (one thread): the words `tests/gpu/fidelity/expected.rs` derives
    /// (f64 words low then high). An f32 NaN magnitude is in
    /// [`FID_NAN_ARITHMETIC`]: rustc's f32 `copysign` gives the GPU's
    /// canonical NaN there.
    pub fn fid_fma_copysign_nan(out: *mut u32, n: usize) as FID_FMA_COPYSIGN_NAN {
        use crate::device::arith::{f64_halves, fma_f32, fma_f64};
        let o = one();
        let f = o as f32;
        let d = o as f64;
        let nan = f32::from_bits(0x7fc0_0123 * o);
        let nan64 = f64::from_bits(0x7ff8_0000_0000_0123 * o as u64);
        let nan64b = f64::from_bits(0x7ff8_0000_0000_0456 * o as u64);
        let neg_nan = f32::from_bits(0xffc0_0123 * o);
        let w = |x: f64| f64_halves(x);
        let r = [
            fma_f32(nan, f, 1.0).to_bits(),
            fma_f32(f, 1.0, -nan).to_bits(),
            fma_f32(f32::INFINITY * f, 0.0, 1.0).to_bits(),
            fma_f32(2.0 * f, 3.0, 1.0).to_bits(),
            w(fma_f64(nan64, d, 1.0)).0,
            w(fma_f64(nan64, d, 1.0)).1,
            w(fma_f64(d, nan64, nan64b)).0,
            w(fma_f64(d, nan64, nan64b)).1,
            w(fma_f64(f64::INFINITY * d, 0.0, 1.0)).0,
            w(fma_f64(f64::INFINITY * d, 0.0, 1.0)).1,
            (-0.0 * f).copysign(f).to_bits(),
            f.copysign(neg_nan).to_bits(),
            w(nan64.copysign(-d)).0,
            w(nan64.copysign(-d)).1,
            (-3.0 * f).copysign(f).to_bits(),
            w((2.0 * d).copysign(-0.0)).1,
        ];
        for (k, v) in r.into_iter().enumerate() {
            // SAFETY: the case's contract.
            unsafe { put(out, n, k, v) };
        }
    }

    /// NaN results of plain f32 and f64 arithmetic and of the negation,
    /// absolute value and `copysign` rustc emits (one thread): the bits the
    /// hardware gives.
    pub fn fid_nan_arithmetic(out: *mut u32, n: usize) as FID_NAN_ARITHMETIC {
        let f = one() as f32;
        let inf = f32::INFINITY * f;
        let payload = f32::from_bits(0x7fc0_0123 * one());
        let neg_payload = f32::from_bits(0xffc0_0123 * one());
        let dinf = f64::INFINITY * one() as f64;
        let r = [
            (inf - inf).to_bits(),
            (0.0 * inf).to_bits(),
            ((0.0 * f) / (0.0 * f)).to_bits(),
            (payload + 1.0).to_bits(),
            (neg_payload * 2.0).to_bits(),
            (-payload).to_bits(),
            payload.abs().to_bits(),
            neg_payload.abs().to_bits(),
            payload.to_bits(),
            (payload as f64).to_bits() as u32,
            ((payload as f64).to_bits() >> 32) as u32,
            ((dinf - dinf).to_bits() >> 32) as u32,
            (dinf - dinf).to_bits() as u32,
            (((payload as f64) * 2.0) as f32).to_bits(),
            (-(inf - inf)).to_bits(),
            (inf * 0.0 + 1.0).to_bits(),
            payload.copysign(-f).to_bits(),
        ];
        for (k, v) in r.into_iter().enumerate() {
            // SAFETY: the case's contract.
            unsafe { put(out, n, k, v) };
        }
    }

    /// Plain `+`, `-`, `*` and `<<` that overflow (one thread): they wrap,
    /// as the GPU build compiles them (no overflow checks), in every
    /// profile.
    #[allow(clippy::arithmetic_side_effects)]
    pub fn fid_wrapping_overflow(out: *mut u32, n: usize) as FID_WRAPPING_OVERFLOW {
        let big = u32::MAX - one() + 1;
        let ibig = i32::MAX - one() as i32 + 1;
        let r = [
            big + 5,
            (one() - 1) - 3,
            big * 3,
            (ibig + 1) as u32,
            (ibig * 2) as u32,
            (-(i32::MIN + one() as i32 - 1)) as u32,
            ((u64::MAX - one() as u64 + 1) + 2) as u32,
            (big as u16 + 1) as u32,
        ];
        for (k, v) in r.into_iter().enumerate() {
            // SAFETY: the case's contract.
            unsafe { put(out, n, k, v) };
        }
    }

    /// The miscompilation of `docs/known-issues.md`: `(x as f64).to_bits()
    /// as u32` for `x = lane + 0.3` (the low word of the f64's bits).
    pub fn fid_f64_low_word(out: *mut u32, n: usize) as FID_F64_LOW_WORD {
        let lane = warp::lane_id();
        let x = lane as f32 + 0.3;
        // SAFETY: the case's contract.
        unsafe { put(out, n, lane as usize, (x as f64).to_bits() as u32) };
    }

    /// The same values through [`crate::device::arith::f64_halves`]: `out[2
    /// lane]` low word, `out[2 lane + 1]` high word.
    pub fn fid_f64_halves(out: *mut u32, n: usize) as FID_F64_HALVES {
        let lane = warp::lane_id();
        let (lo, hi) = crate::device::arith::f64_halves((lane as f32 + 0.3) as f64);
        // SAFETY: the case's contract.
        unsafe {
            put(out, n, 2 * lane as usize, lo);
            put(out, n, 2 * lane as usize + 1, hi);
        }
    }

    /// An f64's words in plain Rust, the forms that came out as `trunc(x)`
    /// on an H200 before the builder rewrote narrowing stores of 64-bit
    /// registers (issue 40): for `x = lane + 0.3` (f32) and `y = x as f64`,
    /// `out[4 lane ..]` = `y.to_bits() as u32`, `(y.to_bits() >> 32) as
    /// u32`, `(3y).to_bits() & 0xffff_ffff` (as u32), `((3y).to_bits() >>
    /// 32) as u32`.
    pub fn fid_f64_words(out: *mut u32, n: usize) as FID_F64_WORDS {
        let lane = warp::lane_id();
        let y = (lane as f32 + 0.3) as f64;
        let bits = y.to_bits();
        let triple = (y * 3.0).to_bits();
        let words = [
            bits as u32,
            (bits >> 32) as u32,
            (triple & 0xffff_ffff) as u32,
            (triple >> 32) as u32,
        ];
        for (k, w) in words.into_iter().enumerate() {
            // SAFETY: the case's contract.
            unsafe { put(out, n, 4 * lane as usize + k, w) };
        }
    }

    /// A correct kernel with a 260 KiB local array per thread: each thread
    /// fills it (volatile: it stays in local memory) and sums a stride.
    pub fn fid_large_local_array(out: *mut u32, n: usize) as FID_LARGE_LOCAL_ARRAY {
        let t = thread::thread_idx_x();
        let mut a = [0u32; LARGE_LOCAL_WORDS];
        for (k, w) in a.iter_mut().enumerate() {
            // SAFETY: a valid local.
            unsafe { core::ptr::write_volatile(w, (k as u32).wrapping_mul(t + 1)) };
        }
        let mut s = 0u32;
        for w in a.iter().step_by(4099) {
            // SAFETY: a valid local.
            s = s.wrapping_add(unsafe { core::ptr::read_volatile(w) });
        }
        // SAFETY: the case's contract.
        unsafe { put(out, n, t as usize, s) };
    }

    /// One thread prints one line per format (`tests/gpu/fidelity/printf.rs` has
    /// the C standard's text for each); `out[0] = 1` after.
    pub fn fid_printf_formats(out: *mut u32, n: usize) as FID_PRINTF_FORMATS {
        let o = one();
        gpu_printf!("[%08x]\n", 0x0a1a_7c86u32 * o);
        gpu_printf!("[%-8x]\n", 0xbeefu32 * o);
        gpu_printf!("[%8.3d]\n", 7 * o as i32);
        gpu_printf!("[%+d % d %+d]\n", 5 * o as i32, 5 * o as i32, -5 * o as i32);
        gpu_printf!("[%#.3o]\n", 8 * o);
        gpu_printf!("[%#.0o]\n", 0 * o);
        gpu_printf!("[%#o %#x %#X %#x]\n", 8 * o, 255 * o, 255 * o, 0 * o);
        gpu_printf!("[%.0d]\n", 0 * o);
        gpu_printf!("[%c]\n", 0xe9 * o);
        gpu_printf!("[%c]\n", 0x41 * o);
        gpu_printf!("[%u]\n", u32::MAX * o);
        gpu_printf!("[%ld]\n", i64::MIN + o as i64 - 1);
        gpu_printf!("[%llx]\n", 0x1234_5678_9abc_def0u64 * o as u64);
        gpu_printf!("[%f]\n", f64::from_bits(0xfff8_0000_0000_0000 * o as u64));
        gpu_printf!("[%f %F]\n", f64::NAN * o as f64, f64::INFINITY * o as f64);
        gpu_printf!("[%e]\n", 12345.678 * o as f64);
        gpu_printf!("[%g %g]\n", 0.0001234 * o as f64, 123456789.0 * o as f64);
        gpu_printf!("[%G]\n", 1e-10 * o as f64);
        gpu_printf!("[%.3f %10.2e]\n", 2.0005 * o as f64, -1234.5 * o as f64);
        gpu_printf!("[%a]\n", 1.0 * o as f64);
        gpu_printf!("[%A]\n", 0.5 * o as f64);
        gpu_printf!("[%a]\n", 0.1 * o as f64);
        gpu_printf!("[%5.1f|%-7.2f|%07.2f]\n", 3.25 * o as f64, 2.5 * o as f64, -1.5 * o as f64);
        gpu_printf!("[%%]\n");
        gpu_printf!("[%hd]\n", 70000 * o as i32);
        gpu_printf!("[%hu]\n", 70000 * o);
        // SAFETY: the case's contract.
        unsafe { put(out, n, 0, 1) };
    }

    /// One thread prints the conversions the GPU's `vprintf` misprints (a
    /// precision from `*`, `hh`, `z`, `t`) and one it prints right (a width
    /// from `*`), each followed by a plain `%d` of 9, then `[end 9]`. The
    /// simulator reports the first line as a located fault.
    pub fn fid_printf_gpu_misprints(out: *mut u32, n: usize) as FID_PRINTF_GPU_MISPRINTS {
        let o = one();
        let nine = 9 * o as i32;
        gpu_printf!("[%.*f|%d]\n", 2 * o as i32, core::f64::consts::PI * o as f64, nine);
        gpu_printf!("[%.*d|%d]\n", 3 * o as i32, 7 * o as i32, nine);
        gpu_printf!("[%*d|%d]\n", 5 * o as i32, 42 * o as i32, nine);
        gpu_printf!("[%hhd|%d]\n", 300 * o as i32, nine);
        gpu_printf!("[%hhx|%d]\n", 0x1ff * o, nine);
        gpu_printf!("[%zu|%d]\n", 5 * o as usize, nine);
        gpu_printf!("[%td|%d]\n", -5 * o as isize, nine);
        gpu_printf!("[end %d]\n", nine);
        // SAFETY: the case's contract.
        unsafe { put(out, n, 0, 1) };
    }

    /// Every thread prints one line, `[fifo <global index>]` (a FIFO record
    /// of one 4-byte argument), for the printf FIFO's limit; thread 0 sets
    /// `out[0] = 1`.
    pub fn fid_printf_per_thread(out: *mut u32, n: usize) as FID_PRINTF_PER_THREAD {
        let g = thread::block_idx_x() * thread::block_dim_x() + thread::thread_idx_x();
        gpu_printf!("[fifo %u]\n", g);
        if g == 0 {
            // SAFETY: the case's contract.
            unsafe { put(out, n, 0, 1) };
        }
    }

    /// A fault: a 16-byte shared load (`ld.shared.v4`) at an address 4
    /// bytes past 16-byte alignment (the GPU's `MisalignedAddress`).
    pub fn fid_misaligned_shared_v4(out: *mut u32, n: usize) as FID_MISALIGNED_SHARED_V4 {
        let tile = shared_array!(fid_misaligned_tile: [f32; 64]);
        let t = thread::thread_idx_x() as usize;
        // SAFETY: t < 32 < 64, each thread its own slot.
        unsafe { tile.store(t, t as f32) };
        sync_threads();
        let off = 4 * one();
        // SAFETY: not safe on purpose: misaligned (the fault under test).
        let v = unsafe { crate::device::vector::load_shared_f32x4(tile.address() + off) };
        // SAFETY: the case's contract.
        unsafe { put(out, n, t, v[0].to_bits()) };
    }

    /// A fault: recursion 200 levels deep with a 256-byte frame per level,
    /// past the GPU's default stack (`cudaLimitStackSize`, 1 KiB).
    pub fn fid_runaway_recursion(out: *mut u32, n: usize) as FID_RUNAWAY_RECURSION {
        let t = thread::thread_idx_x();
        let v = recurse(200 * one(), t);
        // SAFETY: the case's contract.
        unsafe { put(out, n, t as usize, v) };
    }

    /// A fault on both backends: recursion 100,000 levels deep (past the
    /// simulator's 1 MiB thread stack too).
    pub fn fid_deep_recursion(out: *mut u32, n: usize) as FID_DEEP_RECURSION {
        let t = thread::thread_idx_x();
        let v = recurse(100_000 * one(), t);
        // SAFETY: the case's contract.
        unsafe { put(out, n, t as usize, v) };
    }

    /// Lane 31 returns while lanes 0–30 call `activemask` (the simulator
    /// once failed them with a false "not in its own member mask" error):
    /// `out[lane]` is the mask they read, 0 for lane 31.
    pub fn fid_activemask_while_lane_exits(out: *mut u32, n: usize) as FID_ACTIVEMASK_WHILE_LANE_EXITS {
        let lane = warp::lane_id();
        if lane == 31 {
            return;
        }
        let mask = warp::activemask();
        // SAFETY: the case's contract.
        unsafe { put(out, n, lane as usize, mask) };
    }

    /// `out[i]` is `cvt.rna.tf32.f32` of [`TF32_INPUTS`]`[i]` (sm_80 and
    /// later; the portable build writes zeros).
    pub fn fid_tf32_rounding(out: *mut u32, n: usize) as FID_TF32_ROUNDING {
        for (i, &x) in TF32_INPUTS.iter().enumerate() {
            #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
            let v = crate::device::mma::to_tf32(f32::from_bits(x.wrapping_mul(one())));
            #[cfg(all(target_arch = "nvptx64", not(target_feature = "sm_80")))]
            let v = x & 0;
            // SAFETY: the case's contract.
            unsafe { put(out, n, i, v) };
        }
    }

    /// A fault: `ldmatrix.x1` whose row addresses (lanes 0–7) are 8 bytes
    /// past 16-byte alignment (the GPU's `MisalignedAddress`; sm_80 and
    /// later, the portable build writes zeros).
    pub fn fid_misaligned_ldmatrix(out: *mut u32, n: usize) as FID_MISALIGNED_LDMATRIX {
        let tile = shared_array!(fid_ldmatrix_tile: [u32; 128]);
        let t = thread::thread_idx_x() as usize;
        for k in 0..4 {
            // SAFETY: t < 32: each thread its own four slots.
            unsafe { tile.store(4 * t + k, (4 * t + k) as u32) };
        }
        sync_threads();
        let row = tile.address() + 16 * (t as u32 % 8) + 8 * one();
        #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
        // SAFETY: not safe on purpose: misaligned rows (the fault under test).
        let v = unsafe { crate::device::mma::ldmatrix_x1(row) }[0];
        #[cfg(all(target_arch = "nvptx64", not(target_feature = "sm_80")))]
        let v = row & 0;
        // SAFETY: the case's contract.
        unsafe { put(out, n, t, v) };
    }

    /// One `mma.sync` per block (a warp) on the inputs of [`mma_input`]:
    /// `D = A · B + C` of the block's [`mma_type`], lane `l`'s four words
    /// of D (the `C_M16N8` layout) at `out[(block · 32 + l) · 4 ..]` (sm_80
    /// and later; the portable build writes zeros). The tensor cores'
    /// rounding, bit for bit, NaN and ∞ included.
    pub fn fid_mma_words(out: *mut u32, n: usize) as FID_MMA_WORDS {
        let b = thread::block_idx_x();
        let lane = warp::lane_id();
        #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
        let d = {
            use crate::device::float16::{bf16, f16};
            use crate::device::mma::{
                self as tc, A_M16K8_TF32, B_K8N8_TF32, C_M16N8, FragA, FragATf32, FragB,
                FragBTf32,
            };
            let c: [f32; 4] = core::array::from_fn(|e| {
                let (r, col) = C_M16N8.coord(lane, e as u32);
                f32::from_bits(mma_input(b, 2, r * 8 + col))
            });
            match mma_type(b) {
                0 => tc::mma_m16n8k16(
                    FragA::from_fn(lane, |r, k| bf16::from_bits(mma_input(b, 0, r * 16 + k) as u16)),
                    FragB::from_fn(lane, |k, col| bf16::from_bits(mma_input(b, 1, k * 8 + col) as u16)),
                    c,
                ),
                1 => tc::mma_m16n8k16(
                    FragA::from_fn(lane, |r, k| f16::from_bits(mma_input(b, 0, r * 16 + k) as u16)),
                    FragB::from_fn(lane, |k, col| f16::from_bits(mma_input(b, 1, k * 8 + col) as u16)),
                    c,
                ),
                _ => tc::mma_m16n8k8_tf32(
                    FragATf32 {
                        regs: core::array::from_fn(|e| {
                            let (r, k) = A_M16K8_TF32.coord(lane, e as u32);
                            mma_input(b, 0, r * 8 + k)
                        }),
                    },
                    FragBTf32 {
                        regs: core::array::from_fn(|e| {
                            let (k, col) = B_K8N8_TF32.coord(lane, e as u32);
                            mma_input(b, 1, k * 8 + col)
                        }),
                    },
                    c,
                ),
            }
        };
        #[cfg(all(target_arch = "nvptx64", not(target_feature = "sm_80")))]
        let d = [0f32; 4];
        for (e, v) in d.iter().enumerate() {
            // SAFETY: the case's contract.
            unsafe { put(out, n, ((b * 32 + lane) * 4) as usize + e, v.to_bits()) };
        }
    }

    /// 96 values live at once per thread (more registers than a thread of a
    /// 1024-thread block may have: ptxas gives it more than 64): `out[t]`
    /// their mixed sum after four rounds.
    pub fn fid_register_hungry(out: *mut u32, n: usize) as FID_REGISTER_HUNGRY {
        let t = thread::thread_idx_x();
        let s = hungry!(t; r0 r1 r2 r3 r4 r5 r6 r7 r8 r9 r10 r11 r12 r13 r14 r15 r16 r17 r18 r19 r20 r21 r22 r23 r24 r25 r26 r27 r28 r29 r30 r31 r32 r33 r34 r35 r36 r37 r38 r39 r40 r41 r42 r43 r44 r45 r46 r47 r48 r49 r50 r51 r52 r53 r54 r55 r56 r57 r58 r59 r60 r61 r62 r63 r64 r65 r66 r67 r68 r69 r70 r71 r72 r73 r74 r75 r76 r77 r78 r79 r80 r81 r82 r83 r84 r85 r86 r87 r88 r89 r90 r91 r92 r93 r94 r95);
        // SAFETY: the case's contract.
        unsafe { put(out, n, t as usize, s) };
    }
}
