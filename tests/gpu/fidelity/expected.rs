//! Expected words, from the documents: warp collectives, barriers, atomics,
//! indices, integers, casts and floats.
use super::*;

/// Bits of lanes `0..32` for which `f` holds.
pub(super) fn lanes(f: impl Fn(u32) -> bool) -> u32 {
    (0..32).filter(|&l| f(l)).fold(0, |m, l| m | 1 << l)
}

pub(super) fn ballot_after_exit() -> Vec<u32> {
    let running = lanes(|l| l % 3 != 0);
    (0..32)
        .map(|l| if l % 3 == 0 { 0 } else { running })
        .collect()
}

pub(super) fn votes_after_exit() -> Vec<u32> {
    (0..64u32)
        .flat_map(|t| match (t < 32, t % 32 >= 20) {
            (true, true) => [0, 0],
            // Warp 0's running lanes are all below 20.
            (true, false) => [1, 0],
            (false, _) => [0, 1],
        })
        .collect()
}

pub(super) fn shfl_even_odd() -> Vec<u32> {
    (0..32u32)
        .flat_map(|l| {
            if l % 2 == 0 {
                [40, l ^ 2]
            } else {
                [50, if l + 2 <= 31 { l + 2 } else { l } + 100]
            }
        })
        .collect()
}

pub(super) fn nested_quarters() -> Vec<u32> {
    let v = |l: u32| match l {
        0..8 => l ^ 7,
        8..16 => 9,
        16..24 => (1 << 18) | (1 << 21),
        _ => (l + 1).min(31),
    };
    (0..32).map(v).chain((0..32).map(|l| v(l ^ 16))).collect()
}

pub(super) fn loop_exact_masks() -> Vec<u32> {
    let mut acc: Vec<u32> = (0..32u32).map(|l| l.wrapping_mul(0x9e37_79b9)).collect();
    for k in 0..4 {
        let old = acc.clone();
        for l in 0..32 {
            if l % 4 >= k {
                acc[l] = old[l].wrapping_add(old[l ^ 4]);
            }
        }
    }
    let sum = acc.iter().fold(0u32, |a, &x| a.wrapping_add(x));
    acc.iter()
        .copied()
        .chain(std::iter::repeat_n(sum, 32))
        .collect()
}

pub(super) fn partial_warp() -> Vec<u32> {
    (0..48u32)
        .flat_map(|t| {
            let group = t / 16 * 16;
            let s = (group..group + 16).map(|u| 3 * u).sum::<u32>();
            let ballot = if t < 32 { 0xaaaa_aaaa } else { 0x0000_aaaa };
            [s, ballot]
        })
        .collect()
}

pub(super) fn shfl_u64_half_warp() -> Vec<u32> {
    let v = (3u64 << 40) | 7;
    (0..32)
        .flat_map(|l| {
            if l < 16 {
                [v as u32, (v >> 32) as u32]
            } else {
                [0, 0]
            }
        })
        .collect()
}

pub(super) fn shfl_operand_ranges() -> Vec<u32> {
    (0..32u32)
        .flat_map(|l| {
            [
                l + 1000,
                if l < 31 { l + 1001 } else { 1031 },
                1005,
                (l ^ 31) + 1000,
            ]
        })
        .collect()
}

pub(super) fn barrier_after_exit() -> Vec<u32> {
    (0..128u32)
        .map(|t| if t < 100 { (t + 1) % 100 * 7 } else { 0 })
        .collect()
}

pub(super) fn barrier_loop_exits() -> Vec<u32> {
    let rounds = |u: u32| u % 4 + 1;
    (0..64u32)
        .map(|t| {
            let u = (t + 1) % 64;
            // In round k the neighbour's slot holds its last store: round
            // min(k, its last round).
            (0..rounds(t)).map(|k| 100 * u + k.min(rounds(u) - 1)).sum()
        })
        .collect()
}

pub(super) fn atomic_add_f32_edges() -> Vec<u32> {
    let mut w = vec![0u32; 16];
    let results = [
        0,                  // 0 + (1e-38 → 0)
        0,                  // (1e-38 → 0) + (1e-38 → 0)
        2e-38f32.to_bits(), // 2e-38 + (-1e-38 → -0)
        0,                  // 1.5e-38 − 1.2e-38 = 3e-39, subnormal → +0
        0x8000_0000,        // the same, negative → −0
        0x3f80_0000,        // 1 + (1e-40 → 0)
        0x7fff_ffff,        // ∞ − ∞: the canonical NaN
        0x7fff_ffff,        // NaN + 1: the canonical NaN
        0,                  // −0 + +0 = +0
        0x8000_0000,        // −0 + −0 = −0
        0x4000_0000,        // 2 + 2^-23: a tie, to even
    ];
    w[..11].copy_from_slice(&results);
    w[12] = 0x7fc0_0123; // the old value: memory as it was
    w
}

pub(super) fn atomic_add_f64_edges() -> Vec<u32> {
    // NaN results as measured on an H100: f64 keeps an operand's payload,
    // and an invalid operation gives 0xfff8_0000_0000_0000.
    let results: [u64; 4] = [
        2e-310f64.to_bits(),   // subnormals kept by atom.add.f64
        0xfff8_0000_0000_0000, // ∞ − ∞
        0x7ff8_0000_0000_0123, // NaN(payload) + 1: the payload
        0,                     // −0 + +0
    ];
    let mut w: Vec<u32> = results
        .iter()
        .flat_map(|&r| [r as u32, (r >> 32) as u32])
        .collect();
    w.resize(16, 0);
    w
}

pub(super) fn atomic_int_edges() -> Vec<u32> {
    vec![
        0x30,
        31,
        -32i32 as u32,
        63 * 0x0400_0001,
        9,
        0xdead_beef,
        64,
        0,
    ]
}

pub(super) fn grid_3d() -> Vec<u32> {
    let mut w = vec![0u32; 576];
    let dims = 4 | 3 << 4 | 2 << 8 | 3 << 12 | 2 << 16 | 2 << 20;
    for (bz, by, bx) in itertools(2, 2, 3) {
        for (tz, ty, tx) in itertools(2, 3, 4) {
            let gid = ((bx + 3 * (by + 2 * bz)) * 24 + tx + 4 * (ty + 3 * tz)) as usize;
            w[gid] = tx | ty << 4 | tz << 8 | bx << 12 | by << 16 | bz << 20;
            w[288 + gid] = dims;
        }
    }
    w
}

/// `(z, y, x)` over `z < nz, y < ny, x < nx`.
fn itertools(nz: u32, ny: u32, nx: u32) -> impl Iterator<Item = (u32, u32, u32)> {
    (0..nz).flat_map(move |z| (0..ny).flat_map(move |y| (0..nx).map(move |x| (z, y, x))))
}

pub(super) fn warps_of_3d_block() -> Vec<u32> {
    let b = 1 | 1 << 9 | 1 << 18 | 1 << 27;
    (0..64u32).flat_map(|lin| [lin % 32, b]).collect()
}

pub(super) fn int_edges() -> Vec<u32> {
    let x = 0x8765_4321u32;
    let p = 0x1234_5678_9abc_def0u64.wrapping_mul(0xfedc_ba98_7654_3211);
    let q = i64::MIN / 3;
    vec![
        0x8000_0000,      // i32::MIN.wrapping_div(-1)
        0,                // i32::MIN.wrapping_rem(-1)
        -3i32 as u32,     // -7 / 2 (toward zero)
        -1i32 as u32,     // -7 % 2
        -4i32 as u32,     // (-7).div_euclid(2)
        1,                // (-7).rem_euclid(2)
        2,                // 1.wrapping_shl(33): the amount masked to 1
        x >> 4,           // wrapping_shr(36)
        0xf876_5432,      // arithmetic shift right by 4
        x.rotate_left(5), // rotate by 37 = 5 mod 32
        32,               // leading zeros of 0
        32,               // trailing zeros of 0
        13,               // ones of 0x87654321
        0x2143_6587,      // swapped bytes
        0x84c2_a6e1,      // reversed bits
        ((x as u64 * 0xffff_fff1) >> 32) as u32,
        p as u32,
        (p >> 32) as u32,
        0x8000_0000, // i32::MIN.wrapping_abs()
        0x4000_0000, // (MIN · MIN) >> 32 in i64
        0x2492_4924, // u32::MAX / 7
        3,           // u32::MAX % 7
        q as u32,
        (q >> 32) as u32,
        0x21 + 200,  // 0x21u8 + 200
        0x4321,      // as i16 (positive)
        0x21,        // as i8 (positive)
        0x8000_0000, // saturating_sub at MIN
        u32::MAX,    // saturating_add at MAX
        (0x4321u16.wrapping_mul(0x4321)) as u32,
        0,
        0,
    ]
}

pub(super) fn float_to_int() -> Vec<u32> {
    vec![
        0,               // NaN as i32
        i32::MAX as u32, // 3e9 as i32
        i32::MIN as u32, // -3e9 as i32
        0,               // -1.5 as u32
        u32::MAX,        // 4.3e9 as u32
        2,               // 2.5 as i32 (toward zero)
        -2i32 as u32,    // -2.5 as i32
        0,               // -0.9 as i32
        255,             // ∞ as u8
        -128i32 as u32,  // -300 as i8
        u32::MAX,        // 1e20 as i64: i64::MAX, low word
        0x7fff_ffff,     // its high word
        0,               // NaN as u64
        0x8000_0000,     // -1e300 as i64: i64::MIN, high word
        0x4f80_0000,     // u32::MAX as f32 = 2^32
        0x4b80_0000,     // 16777217 as f32: a tie, to even (2^24)
        0x4b80_0002,     // 16777219 as f32: a tie, to even (16777220)
        0,               // 2^53 + 1 as f64 as u64, low word: 2^53's is 0
        2,               // (2^53 + 3) as f64: a tie, to even (2^53 + 4): low bits 2
        0x5f80_0000,     // u64::MAX as f32 = 2^64
        0xcf00_0000,     // i32::MIN as f32
        0xcb80_0000,     // -16777217 as f32 = -2^24
        1,               // (0.5 + 0.49999997) as u32: the sum rounds to 1
        0,               // 2^63 as u64, low word
        0x8000_0000,     // high word
        u32::MAX,        // 2^63 as i64 = i64::MAX, low word
        0x7fff_ffff,     // high word
        u32::MAX,        // f32::MAX as u32
        0,               // MIN_POSITIVE as u32
        0,               // -0.0 as i32
        65535,           // 65535.9 as u16
        65535,           // 65536 as u16
    ]
}

pub(super) fn float_edges() -> Vec<u32> {
    let d = |x: f64| x.to_bits();
    let third = d(1.0 / 3.0);
    let tenth = d(0.1 + 0.2);
    let eighth = d(f64::MIN_POSITIVE / 8.0);
    vec![
        2,           // tiny · 2 (subnormals kept)
        0x0020_0000, // MIN_POSITIVE / 4
        0x007f_ffff, // MIN_POSITIVE − tiny
        0,           // tiny / 2: a tie, to even (0)
        2,           // tiny · 1.5: a tie, to even (2)
        0x1c35_04f3, // sqrt(2^-141) = 2^-70.5, correctly rounded
        0,           // -0 + 0 = +0
        0x8000_0000, // -0 − 0 = −0
        0x8000_0000, // 0 · −1 = −0
        0x7f80_0000, // MAX · 2 = +∞
        0xff80_0000, // −MAX · 2 = −∞
        0x3eaa_aaab, // 1/3
        0x3e99_999a, // 0.1 + 0.2 in f32
        0xa880_0000, // fma: −2^-46 exactly
        0,           // the same unfused: rounds to 0
        0x3fb5_04f3, // sqrt(2)
        0x7f80_0000, // 1 / +0
        0xff80_0000, // −1 / +0
        0x4000_0000, // min(2, NaN) = 2
        0xc040_0000, // max(NaN, −3) = −3
        0xbf80_0000, // min(1, −1) = −1
        3,           // f64 tiny · 3, low word
        eighth as u32,
        (eighth >> 32) as u32,
        third as u32,
        (third >> 32) as u32,
        tenth as u32,
        0x7ff0_0000, // f64 MAX · 2 = +∞, high word
        0,           // 1e-45 (the smallest subnormal) · 0.5: a tie, to even (0)
        0x0060_0000, // MIN_POSITIVE · 0.75
        0,           // tiny as f64, low word
        0x36a0_0000, // 2^-149 as f64, high word
    ]
}

pub(super) fn fma_copysign_nan() -> Vec<u32> {
    let halves = |b: u64| [b as u32, (b >> 32) as u32];
    let mut w = vec![
        0x7fff_ffff, // fma.rn.f32 of a NaN: the canonical NaN
        0x7fff_ffff, // of a negative NaN addend
        0x7fff_ffff, // ∞ · 0 + 1: invalid
        0x40e0_0000, // 2 · 3 + 1 = 7
    ];
    // fma.rn.f64: a NaN operand's payload, quieted; two NaNs: the first's
    // (the multiplicand's); invalid: 0xfff8_0000_0000_0000.
    w.extend(halves(0x7ff8_0000_0000_0123));
    w.extend(halves(0x7ff8_0000_0000_0123));
    w.extend(halves(0xfff8_0000_0000_0000));
    // copysign: the magnitude's bits with the sign's sign (copysign(−0, 1) =
    // +0; an f32 NaN's sign read), f64 NaN payloads kept.
    w.extend([0, 0xbf80_0000]);
    w.extend(halves(0xfff8_0000_0000_0123));
    w.extend([0x4040_0000, 0xc000_0000]);
    w
}

pub(super) fn nan_arithmetic() -> Vec<u32> {
    vec![
        0x7fff_ffff, // ∞ − ∞
        0x7fff_ffff, // 0 · ∞
        0x7fc0_0000, // 0 / 0 (div.rn.f32's NaN, not the canonical one)
        0x7fff_ffff, // NaN(payload) + 1
        0x7fff_ffff, // −NaN(payload) · 2
        0x7fff_ffff, // −NaN(payload)
        0x7fff_ffff, // |NaN(payload)|
        0x7fff_ffff, // |−NaN(payload)|
        0x7fc0_0123, // a NaN moved: bits kept
        0x6000_0000, // NaN(payload) as f64 (payload kept), low word
        0x7ff8_0024, // high word
        0xfff8_0000, // f64 ∞ − ∞, high word
        0,           // low word
        0x7fff_ffff, // (NaN as f64 · 2) as f32
        0x7fff_ffff, // −(∞ − ∞)
        0x7fff_ffff, // ∞ · 0 + 1
        0x7fff_ffff, // copysign(NaN(payload), −1)
    ]
}

pub(super) fn wrapping_overflow() -> Vec<u32> {
    vec![
        4,
        0xffff_fffd,
        0xffff_fffd,
        0x8000_0000,
        0xffff_fffe,
        0x8000_0000,
        1,
        0,
    ]
}

/// `(lane + 0.3f32) as f64`'s bits, for the two f64 cases.
pub(super) fn lane_f64_bits(lane: u32) -> u64 {
    ((lane as f32 + 0.3) as f64).to_bits()
}

pub(super) fn f64_low_word() -> Vec<u32> {
    (0..32).map(|l| lane_f64_bits(l) as u32).collect()
}

pub(super) fn f64_halves() -> Vec<u32> {
    (0..32)
        .flat_map(|l| [lane_f64_bits(l) as u32, (lane_f64_bits(l) >> 32) as u32])
        .collect()
}

/// `fid_f64_words`: for `y = (lane + 0.3f32) as f64`, the low and high
/// words of `y` and of `3y`.
pub(super) fn f64_words() -> Vec<u32> {
    (0..32)
        .flat_map(|l| {
            let (y, t) = (
                lane_f64_bits(l),
                (f64::from_bits(lane_f64_bits(l)) * 3.0).to_bits(),
            );
            [y as u32, (y >> 32) as u32, t as u32, (t >> 32) as u32]
        })
        .collect()
}

/// `fid_barrier_after_partial_stores`, from its formula: `i = t % 20`,
/// `j = t % 4`; `f = 1.5i` and `1000 + j` (f32), `d = 2.5i` and `2000 + j`
/// (f64), each count 16 (64 threads over 4 slots).
pub(super) fn barrier_after_partial_stores() -> Vec<u32> {
    (0..64u32)
        .map(|t| {
            let (i, j) = (t % 20, t % 4);
            let f = 1.5 * i as f32 + (1000.0 + j as f32);
            let d = 2.5 * i as f64 + (2000.0 + j as f64);
            f as u32 + 10_000 * d as u32 + 100_000_000 * 16
        })
        .collect()
}

pub(super) fn large_local_array() -> Vec<u32> {
    (0..32u32)
        .map(|t| {
            (0..LARGE_LOCAL_WORDS as u32)
                .step_by(4099)
                .fold(0u32, |s, k| s.wrapping_add(k.wrapping_mul(t + 1)))
        })
        .collect()
}

/// `fid_activemask_while_lane_exits`: lanes 0–30 reach `activemask`
/// together (CUDA Programming Guide, `__activemask`: the lanes currently
/// active), lane 31 has exited and writes nothing.
pub(super) fn activemask_while_lane_exits() -> Vec<u32> {
    (0..32u32)
        .map(|l| if l == 31 { 0 } else { lanes(|k| k != 31) })
        .collect()
}

/// `fid_tf32_rounding`, by hand from the GPU's rule (the SASS of
/// `cvt.rna.tf32.f32` on sm_80 and later: `FSETP.GEU |x|, +INF`, then for
/// a finite `x` an integer add of `0x1000`, then a mask of `0xffffe000`):
/// ∞ and NaN truncated (so a NaN whose payload is in the low 13 bits alone
/// is ∞, a signalling NaN stays signalling), finite values rounded half away
/// from zero on their bits (the carry reaching the exponent: ∞).
pub(super) fn tf32_rounding() -> Vec<u32> {
    vec![
        0x7f80_0000, // 0x7f80_0001: payload below bit 13 → +∞
        0xff80_0000, // 0xff80_0001 → −∞
        0x7f80_0000, // 0x7f80_0fff → +∞
        0x7f80_0000, // 0x7f80_1000: truncated, not rounded → +∞
        0x7fc0_0000, // the quiet NaN
        0x7fff_e000, // 0x7fff_ffff: truncated
        0xffff_e000, // 0xffff_ffff: truncated
        0x7f80_2000, // a signalling NaN stays one
        0x7f80_0000, // +∞
        0xff80_0000, // −∞
        0x7f80_0000, // the largest f32 rounds up to ∞
        0x3f80_0000, // 1 + below half of a tf32 unit → 1
        0x3f80_2000, // a tie rounds away from zero
        0x0000_0000, // a subnormal below half a unit → 0
        0x8000_2000, // a negative subnormal tie → away
        0xbf80_0000, // −(1 − 2⁻¹¹) rounds to −1 (carry into the exponent)
    ]
}
