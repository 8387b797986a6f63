//! The 16-bit floats of `device::float16`: every 16 → 32 conversion input, a
//! large set of 32 → 16 inputs with every tie, and the packed operations, bit
//! for bit against references written from the formula.
use super::*;

/// The canonical NaNs the GPU gives (see `device::float16`).
pub(super) const NAN16: u32 = 0x7fff;
const NAN32: u32 = 0x7fff_ffff;

pub(super) fn run(
    gpu: &Gpu,
    op: Float16Op,
    x: &[u32],
    y: &[u32],
    z: &[u32],
) -> Result<Vec<u32>, Failed> {
    gpu.float16_check(op, x, y, z).map_err(fail)
}

/// The first input whose result differs from `want`, described.
fn compare(
    what: &str,
    inputs: &[(u32, u32, u32)],
    got: &[u32],
    want: impl Fn(u32, u32, u32) -> u32,
) -> Result<(), Failed> {
    let mut bad = 0usize;
    let mut first = None;
    for (&(x, y, z), &g) in inputs.iter().zip(got) {
        let w = want(x, y, z);
        if g != w {
            bad += 1;
            first.get_or_insert((x, y, z, g, w));
        }
    }
    match first {
        None => Ok(()),
        Some((x, y, z, g, w)) => Err(Failed::from(format!(
            "{what}: {bad} of {} inputs differ; first ({x:#010x}, {y:#010x}, {z:#010x}): got {g:#010x}, want {w:#010x}",
            inputs.len()
        ))),
    }
}

fn check_op(
    gpu: &Gpu,
    op: Float16Op,
    inputs: &[(u32, u32, u32)],
    want: impl Fn(u32, u32, u32) -> u32,
) -> Result<(), Failed> {
    let x: Vec<u32> = inputs.iter().map(|i| i.0).collect();
    let y: Vec<u32> = inputs.iter().map(|i| i.1).collect();
    let z: Vec<u32> = inputs.iter().map(|i| i.2).collect();
    let got = run(gpu, op, &x, &y, &z)?;
    compare(&format!("{op:?}"), inputs, &got, want)
}

/// All 65,536 inputs of f16 → f32 and bf16 → f32: exact, NaN canonical
/// (f16; bf16's widening is the shift and keeps the bits).
pub(super) fn conversions_16_to_32_every_input(gpu: &Gpu) -> Result<(), Failed> {
    let all: Vec<(u32, u32, u32)> = (0..=0xffffu32).map(|h| (h, 0, 0)).collect();
    check_op(gpu, Float16Op::F16ToF32, &all, |h, _, _| {
        let v = f16::from_bits(h as u16);
        if v.is_nan() {
            NAN32
        } else {
            v.to_f32().to_bits()
        }
    })?;
    check_op(gpu, Float16Op::Bf16ToF32, &all, |h, _, _| h << 16)
}

/// f32 → f16 and f32 → bf16 on: every upper half with the lower halves
/// that round differently (0, 1, the ties 0x8000 and neighbours, 0xffff),
/// and for every f16 the f32 exactly between it and the next with both
/// neighbours (f16's ties): 850,000 inputs, NaNs and infinities included.
/// The reference is `half`'s round to nearest even, NaN canonical.
pub(super) fn conversions_32_to_16_every_tie(gpu: &Gpu) -> Result<(), Failed> {
    let mut inputs = Vec::new();
    for hi in 0..=0xffffu32 {
        for lo in [0u32, 1, 0x7fff, 0x8000, 0x8001, 0xffff] {
            inputs.push(((hi << 16) | lo, 0, 0));
        }
    }
    for h in 0..0x7c00u16 {
        let (a, b) = (f16::from_bits(h).to_f64(), f16::from_bits(h + 1).to_f64());
        let mid = ((a + b) / 2.0) as f32;
        for sign in [0, 0x8000_0000] {
            for d in [-1i32, 0, 1] {
                inputs.push((mid.to_bits().wrapping_add_signed(d) | sign, 0, 0));
            }
        }
    }
    check_op(gpu, Float16Op::F32ToF16, &inputs, |x, _, _| {
        let v = f32::from_bits(x);
        if v.is_nan() {
            NAN16
        } else {
            f16::from_f32(v).to_bits() as u32
        }
    })?;
    check_op(gpu, Float16Op::F32ToBf16, &inputs, |x, _, _| {
        let v = f32::from_bits(x);
        if v.is_nan() {
            NAN16
        } else {
            bf16::from_f32(v).to_bits() as u32
        }
    })
}

/// `a · b + c` rounded once to a 16-bit type, nearest, ties to even: the
/// product of two 16-bit values is exact in f64 and TwoSum gives the sum's
/// error `err`, so the exact value is `s + err`; of `round(s)` and its two
/// neighbours the nearest to it wins (`half`'s f64 → 16-bit conversion goes
/// through f32, a double rounding, so it only proposes the candidates).
fn fma_reference(
    a: f64,
    b: f64,
    c: f64,
    round: impl Fn(f64) -> u16,
    widen: impl Fn(u16) -> f64,
) -> u16 {
    let p = a * b;
    let s = p + c;
    if s.is_nan() {
        return NAN16 as u16;
    }
    if !s.is_finite() {
        return round(s);
    }
    let pv = s - c;
    let err = (p - pv) + (c - (s - pv));
    let r = round(s);
    // Which of two candidates is nearer the exact value: the sign of
    // |s + err − va|² − |s + err − vb|² = (vb − va)(da + db + 2·err), da = s − va.
    // Infinity stands for the next step past the largest finite value (IEEE's
    // overflow threshold is the midpoint of the two).
    let value = |x: u16| {
        let v = widen(x);
        if v.is_infinite() {
            let (max, below) = (
                widen((x & 0x8000) | ((x & 0x7fff) - 1)),
                widen((x & 0x8000) | ((x & 0x7fff) - 2)),
            );
            2.0 * max - below
        } else {
            v
        }
    };
    let nearer = |x: u16, y: u16| -> u16 {
        let (va, vb) = (value(x), value(y));
        if vb.is_nan() {
            return x;
        }
        if va.is_nan() {
            return y;
        }
        let (da, db) = (s - va, s - vb);
        let sum = da + db;
        let side = if sum != 0.0 { sum } else { err };
        let key = (vb - va) * side;
        // Nearer, or on a tie the even one.
        if key > 0.0 || (key == 0.0 && x & 1 == 1) {
            y
        } else {
            x
        }
    };
    let (down, up) = (r.wrapping_sub(1), r.wrapping_add(1));
    let mut best = r;
    for cand in [down, up] {
        if cand & 0x7fff == r & 0x7fff || (cand ^ r) & 0x8000 != 0 {
            continue;
        }
        best = nearer(best, cand);
    }
    best
}

/// PTX's min/max of one element: the other when one is NaN, NaN when both
/// are, −0 below +0.
fn min_max_reference(a: f64, b: f64, max: bool) -> Option<f64> {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => None,
        (true, false) => Some(b),
        (false, true) => Some(a),
        _ if a == 0.0 && b == 0.0 => {
            let negative = if max {
                a.is_sign_negative() && b.is_sign_negative()
            } else {
                a.is_sign_negative() || b.is_sign_negative()
            };
            Some(if negative { -0.0 } else { 0.0 })
        }
        _ => Some(if (a < b) != max { a } else { b }),
    }
}

/// The packed operations on random pairs and every pair of special values.
pub(super) fn packed_operations(gpu: &Gpu) -> Result<(), Failed> {
    let specials: [u16; 12] = [
        0, 0x8000, 0x0001, 0x8001, 0x3c00, 0xbc00, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0x7fff, 0x03ff,
    ];
    let bf_specials: [u16; 12] = [
        0, 0x8000, 0x0001, 0x8001, 0x3f80, 0xbf80, 0x7f7f, 0x7f80, 0xff80, 0x7fc0, 0x7fff, 0x007f,
    ];
    let mut rng = Rng::new(21);
    let mut inputs = |sp: &[u16; 12]| {
        let mut v = Vec::new();
        for &a in sp {
            for &b in sp {
                for &c in sp {
                    v.push((
                        a as u32 | (b as u32) << 16,
                        b as u32 | (c as u32) << 16,
                        c as u32 | (a as u32) << 16,
                    ));
                }
            }
        }
        for _ in 0..20_000 {
            let w = |r: &mut Rng| {
                // Values near 1 often (products and sums that round), any bits otherwise.
                let h = if r.below(2) == 0 {
                    0x3800 + r.below(0x0c00) as u32
                } else {
                    r.below(0x10000) as u32
                };
                h | (r.below(0x10000) as u32) << 16
            };
            v.push((w(&mut rng), w(&mut rng), w(&mut rng)));
        }
        v
    };
    let (h_in, b_in) = (inputs(&specials), inputs(&bf_specials));
    fn pair(f: impl Fn(u16, u16, u16) -> u16) -> impl Fn(u32, u32, u32) -> u32 {
        move |x, y, z| {
            f(x as u16, y as u16, z as u16) as u32
                | (f((x >> 16) as u16, (y >> 16) as u16, (z >> 16) as u16) as u32) << 16
        }
    }
    let hw = |h: u16| f16::from_bits(h).to_f64();
    let bw = |h: u16| bf16::from_bits(h).to_f64();
    let hr = |v: f64| {
        if v.is_nan() {
            NAN16 as u16
        } else {
            f16::from_f64(v).to_bits()
        }
    };
    let br = |v: f64| {
        if v.is_nan() {
            NAN16 as u16
        } else {
            bf16::from_f64(v).to_bits()
        }
    };
    check_op(
        gpu,
        Float16Op::F16x2Fma,
        &h_in,
        pair(|a, b, c| fma_reference(hw(a), hw(b), hw(c), hr, hw)),
    )?;
    check_op(
        gpu,
        Float16Op::Bf16x2Fma,
        &b_in,
        pair(|a, b, c| fma_reference(bw(a), bw(b), bw(c), br, bw)),
    )?;
    for (op, max) in [(Float16Op::F16x2Min, false), (Float16Op::F16x2Max, true)] {
        check_op(
            gpu,
            op,
            &h_in,
            pair(|a, b, _| min_max_reference(hw(a), hw(b), max).map_or(NAN16 as u16, hr)),
        )?;
    }
    for (op, max) in [(Float16Op::Bf16x2Min, false), (Float16Op::Bf16x2Max, true)] {
        check_op(
            gpu,
            op,
            &b_in,
            pair(|a, b, _| min_max_reference(bw(a), bw(b), max).map_or(NAN16 as u16, br)),
        )?;
    }
    fn lt(w: impl Fn(u16) -> f64) -> impl Fn(u32, u32, u32) -> u32 {
        move |x, y, _| {
            u32::from(w(x as u16) < w(y as u16))
                | u32::from(w((x >> 16) as u16) < w((y >> 16) as u16)) << 1
        }
    }
    check_op(gpu, Float16Op::F16x2Lt, &h_in, lt(hw))?;
    check_op(gpu, Float16Op::Bf16x2Lt, &b_in, lt(bw))
}
