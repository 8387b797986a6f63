//! The half-precision family: the 16-bit floats of `device::float16` (every
//! 16 → 32 conversion input, a large set of 32 → 16 inputs with every tie,
//! the packed operations) bit for bit against references written from the
//! formula, and the GEMM family (mma.sync and CUDA-core paths, every layout,
//! edges, misaligned operands, batches, NaN and infinity, alpha and beta)
//! against the f64 reference and its error bound, with the bound shown to
//! catch one dropped k-slab, and the refusals of bad shapes; the elementwise
//! kernels and the reductions on f16 and bf16 against references written
//! from the formula in f64.
use cuda_kernels::Gpu;
use cuda_kernels::float16_checks::Float16Op;
use cuda_kernels::matrices::{
    GemmInput, GemmOutput, GemmPath, GemmReference, GemmShape, Op, gemm_check, gemm_reference,
};
use cuda_kernels::ndarray::{Array2, ArrayView2, s};
use cuda_kernels::util::Rng;
use half::{bf16, f16};
use libtest_mimic::{Failed, Trial};

use crate::common::{ensure, fail, simulated};
use cuda_kernels::prelude::*;

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        kernel!(conversions_16_to_32_every_input),
        kernel!(conversions_32_to_16_every_tie),
        kernel!(packed_operations),
        kernel!(gemm_bf16_256_cubed),
        kernel!(gemm_layouts_types_and_edges),
        kernel!(gemm_misaligned_and_batched),
        kernel!(gemm_reused_and_reallocated_buffers),
        kernel!(gemm_many_operand_pairs_in_flight),
        hardware!("the sm_90a wgmma kernel", gemm_wgmma_refused_tensor_map),
        kernel!(gemm_nan_and_infinity),
        hardware!("cuBLAS", gemm_agrees_with_cublas),
        cpu!(gemm_bound_catches_a_dropped_k_slab),
        kernel!(gemm_refusals),
        kernel!(elementwise_f16_bf16),
        kernel!(reduce_f16_bf16),
    ]
}

// ---------------------------------------------------------------------------
// 16-bit floats.

/// The canonical NaNs the GPU gives (see `device::float16`).
const NAN16: u32 = 0x7fff;
const NAN32: u32 = 0x7fff_ffff;

fn run(gpu: &Gpu, op: Float16Op, x: &[u32], y: &[u32], z: &[u32]) -> Result<Vec<u32>, Failed> {
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
fn conversions_16_to_32_every_input(gpu: &Gpu) -> Result<(), Failed> {
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
fn conversions_32_to_16_every_tie(gpu: &Gpu) -> Result<(), Failed> {
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
fn packed_operations(gpu: &Gpu) -> Result<(), Failed> {
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

// ---------------------------------------------------------------------------
// GEMM.

fn random<I: GemmInput>(rows: usize, cols: usize, seed: u64, from: impl Fn(f32) -> I) -> Array2<I> {
    let mut rng = Rng::new(seed);
    Array2::from_shape_simple_fn((rows, cols), || from(rng.uniform() as f32 * 2.0 - 1.0))
}

/// Runs `C = alpha · A · B + beta · C` and checks it against the reference;
/// returns the path taken.
fn gemm_case<I: GemmInput, O: GemmOutput<I>>(
    gpu: &Gpu,
    alpha: f32,
    a: ArrayView2<I>,
    b: ArrayView2<I>,
    beta: f32,
    c: &Array2<O>,
) -> Result<GemmPath, Failed> {
    let mut got = c.clone();
    let path = gpu.gemm(alpha, a, b, beta, got.view_mut()).map_err(fail)?;
    let reference: GemmReference = gemm_reference(alpha, a, b, beta, c.view());
    if let Some((i, j, g, e, bound)) = gemm_check(got.view(), &reference, |v| v.to_f64()) {
        return Err(Failed::from(format!(
            "{} {}x{}x{} ({path:?}): C[{i}][{j}] = {g}, exact {e}, bound {bound}",
            I::NAME,
            a.nrows(),
            b.ncols(),
            a.ncols()
        )));
    }
    Ok(path)
}

fn expected_path(gpu: &Gpu) -> GemmPath {
    // The simulator runs the production mma.sync kernel; a GPU without the
    // sm_80 build's kernel takes the CUDA cores.
    if simulated(gpu) {
        GemmPath::MmaSync
    } else {
        gpu.gemm_path::<bf16, f32>(&GemmShape::dense(256, 256, 256), true)
            .unwrap_or(GemmPath::CudaCore)
    }
}

/// The 256³ bf16 product through the production mma.sync kernel (the
/// simulator's budget: 30 s on 2 cores).
fn gemm_bf16_256_cubed(gpu: &Gpu) -> Result<(), Failed> {
    let (a, b) = (
        random(256, 256, 1, bf16::from_f32),
        random(256, 256, 2, bf16::from_f32),
    );
    let c = Array2::<f32>::zeros((256, 256));
    let path = gemm_case(gpu, 1.0, a.view(), b.view(), 0.0, &c)?;
    ensure(path == expected_path(gpu), || format!("path {path:?}"))
}

/// NN, NT, TN and TT; bf16 → bf16, f16 → f32, f16 → f16, tf32; alpha and
/// beta; edges of every dimension (1, odd, past a block).
fn gemm_layouts_types_and_edges(gpu: &Gpu) -> Result<(), Failed> {
    let shapes: &[(usize, usize, usize)] = if simulated(gpu) {
        &[(1, 1, 1), (17, 33, 45), (130, 9, 40)]
    } else {
        &[
            (1, 1, 1),
            (17, 33, 45),
            (130, 9, 40),
            (257, 300, 333),
            (1000, 1000, 1000),
        ]
    };
    let ops = [
        (Op::N, Op::N),
        (Op::N, Op::T),
        (Op::T, Op::N),
        (Op::T, Op::T),
    ];
    for (idx, &(m, n, k)) in shapes.iter().enumerate() {
        for (oi, &(oa, ob)) in ops.iter().enumerate() {
            let seed = (idx * 4 + oi) as u64 * 10;
            // A stored transposed: a k × m array viewed as m × k.
            fn view<I: GemmInput>(x: &Array2<I>, op: Op) -> ArrayView2<'_, I> {
                if op == Op::T { x.t() } else { x.view() }
            }
            let store = |rows: usize, cols: usize, op: Op| {
                if op == Op::T {
                    (cols, rows)
                } else {
                    (rows, cols)
                }
            };
            let (ra, ca) = store(m, k, oa);
            let (rb, cb) = store(k, n, ob);
            let ab = random(ra, ca, seed, bf16::from_f32);
            let bb = random(rb, cb, seed + 1, bf16::from_f32);
            let cb16 = random(m, n, seed + 2, bf16::from_f32);
            gemm_case(gpu, 1.5, view(&ab, oa), view(&bb, ob), -0.5, &cb16)?;
            let ah = random(ra, ca, seed + 3, f16::from_f32);
            let bh = random(rb, cb, seed + 4, f16::from_f32);
            let c32 = random(m, n, seed + 5, |x| x);
            gemm_case(gpu, 0.75, view(&ah, oa), view(&bh, ob), 2.0, &c32)?;
            gemm_case(
                gpu,
                1.0,
                view(&ah, oa),
                view(&bh, ob),
                0.0,
                &random(m, n, seed + 6, f16::from_f32),
            )?;
            let af = random(ra, ca, seed + 7, |x| x);
            let bf = random(rb, cb, seed + 8, |x| x);
            gemm_case(gpu, -1.0, view(&af, oa), view(&bf, ob), 0.5, &c32)?;
        }
    }
    Ok(())
}

/// The on-device API: an operand starting one element into its buffer and
/// a leading dimension of an odd count take the CUDA-core path and are
/// right; a strided batch of 3 is right, batch by batch.
fn gemm_misaligned_and_batched(gpu: &Gpu) -> Result<(), Failed> {
    let (m, n, k, batches) = (40, 24, 56, 3);
    let a = random(batches * m + 1, k, 30, bf16::from_f32);
    let b = random(batches * k, n, 31, bf16::from_f32);
    let flat = |x: &Array2<bf16>| x.iter().map(|&v| GemmInput::to_dev(v)).collect::<Vec<_>>();
    let da = gpu.to_device(&flat(&a)).map_err(fail)?;
    let db = gpu.to_device(&flat(&b)).map_err(fail)?;
    let mut shape = GemmShape::dense(m, n, k);
    shape.batches = batches;
    (shape.stride_a, shape.stride_b) = (m * k, k * n);
    let check = |got: &[f32], a_off: usize, what: &str| -> Result<(), Failed> {
        for z in 0..batches {
            let az = a
                .as_slice()
                .map(|s| &s[a_off + z * m * k..a_off + (z + 1) * m * k])
                .ok_or("layout")?;
            let az = ArrayView2::from_shape((m, k), az).map_err(fail)?;
            let bz = b.slice(s![z * k..(z + 1) * k, ..]);
            let cz = Array2::<f32>::zeros((m, n));
            let reference = gemm_reference(1.0, az, bz, 0.0, cz.view());
            let gz =
                ArrayView2::from_shape((m, n), &got[z * m * n..(z + 1) * m * n]).map_err(fail)?;
            if let Some(bad) = gemm_check(gz, &reference, |v| v as f64) {
                return Err(Failed::from(format!("{what}, batch {z}: {bad:?}")));
            }
        }
        Ok(())
    };
    for (a_off, want) in [(0, expected_path(gpu)), (1, GemmPath::CudaCore)] {
        let mut dc = gpu.zeroed::<f32>(batches * m * n).map_err(fail)?;
        let path = gpu
            .gemm_on_device::<bf16, f32>(&shape, 1.0, &da.index(a_off..), &db, 0.0, &mut dc)
            .map_err(fail)?;
        gpu.synchronize("gemm").map_err(fail)?;
        ensure(path == want, || {
            format!("A at +{a_off}: path {path:?}, want {want:?}")
        })?;
        let mut got = vec![0f32; batches * m * n];
        dc.copy_to(&mut got[..]).map_err(fail)?;
        check(&got, a_off, &format!("A at +{a_off}"))?;
    }
    Ok(())
}

/// The on-device API queued back to back without a wait between (NT, the
/// wgmma kernel's layout on an H100, whose tensor maps are copied into the
/// module before each launch): the same buffers with new data, other
/// buffers of another shape, and buffers freed and allocated again (often
/// at the same addresses) with another shape; every result is right.
fn gemm_reused_and_reallocated_buffers(gpu: &Gpu) -> Result<(), Failed> {
    let flat = |x: &Array2<bf16>| x.iter().map(|&v| GemmInput::to_dev(v)).collect::<Vec<_>>();
    // (m, n, k, seed): A m × k, B stored n × k.
    let run = |cases: &[(usize, usize, usize, u64)]| -> Result<Vec<String>, Failed> {
        let mut queued = Vec::new();
        let mut addresses = Vec::new();
        for &(m, n, k, seed) in cases {
            let (a, bt) = (
                random(m, k, seed, bf16::from_f32),
                random(n, k, seed + 1, bf16::from_f32),
            );
            let da = gpu.to_device(&flat(&a)).map_err(fail)?;
            let db = gpu.to_device(&flat(&bt)).map_err(fail)?;
            let mut dc = gpu.zeroed::<f32>(m * n).map_err(fail)?;
            let shape = GemmShape::with_ops(m, n, k, Op::N, Op::T);
            let path = gpu
                .gemm_on_device::<bf16, f32>(&shape, 1.0, &da, &db, 0.0, &mut dc)
                .map_err(fail)?;
            let want = if simulated(gpu) {
                GemmPath::MmaSync
            } else {
                gpu.gemm_path::<bf16, f32>(&shape, true).map_err(fail)?
            };
            ensure(path == want, || {
                format!("{m}x{n}x{k}: path {path:?}, want {want:?}")
            })?;
            // The same buffers with new data, queued before the first has run.
            let (a2, bt2) = (
                random(m, k, seed + 2, bf16::from_f32),
                random(n, k, seed + 3, bf16::from_f32),
            );
            let mut da = da;
            let mut db = db;
            let mut dc2 = gpu.zeroed::<f32>(m * n).map_err(fail)?;
            // The copies are ordered after the first GEMM (the Gpu's stream is
            // ordered with the synchronous copies).
            da.copy_from(&flat(&a2)).map_err(fail)?;
            db.copy_from(&flat(&bt2)).map_err(fail)?;
            gpu.gemm_on_device::<bf16, f32>(&shape, 1.0, &da, &db, 0.0, &mut dc2)
                .map_err(fail)?;
            addresses.push(format!(
                "{m}x{n}x{k} A at {:#x}",
                da.as_device_ptr().as_raw()
            ));
            queued.push((m, n, k, a, bt, dc, a2, bt2, dc2, da, db));
        }
        gpu.synchronize("gemm").map_err(fail)?;
        for (m, n, k, a, bt, dc, a2, bt2, dc2, _, _) in &queued {
            for (what, a, bt, dc) in [("first", a, bt, dc), ("new data", a2, bt2, dc2)] {
                let mut got = vec![0f32; m * n];
                dc.copy_to(&mut got[..]).map_err(fail)?;
                let got = Array2::from_shape_vec((*m, *n), got).map_err(fail)?;
                let zero = Array2::<f32>::zeros((*m, *n));
                let reference = gemm_reference(1.0, a.view(), bt.t(), 0.0, zero.view());
                if let Some(bad) = gemm_check(got.view(), &reference, |v| v as f64) {
                    return Err(Failed::from(format!("{m}x{n}x{k}, {what}: {bad:?}")));
                }
            }
        }
        Ok(addresses)
    };
    let (big, small) = if simulated(gpu) {
        ((40, 72, 48), (24, 16, 80))
    } else {
        ((300, 520, 264), (136, 264, 72))
    };
    let first = run(&[(big.0, big.1, big.2, 80), (small.0, small.1, small.2, 90)])?;
    // Freed above; allocated again, with the shapes swapped.
    let again = run(&[(small.1, small.0, small.2, 100), (big.1, big.0, big.2, 110)])?;
    eprintln!("gemm_reused_and_reallocated_buffers: {first:?}, then {again:?}");
    Ok(())
}

/// More operand pairs than the wgmma launcher keeps tensor maps for
/// (`TENSOR_MAP_SLOTS`, on an H100), queued back to back without a wait:
/// 80 pairs (A and B at other offsets of two buffers), then again in reverse
/// order with alpha = 2, so that the second pass first finds the maps it
/// holds and then writes slots whose last launches may still be in flight;
/// every result is right.
fn gemm_many_operand_pairs_in_flight(gpu: &Gpu) -> Result<(), Failed> {
    const PAIRS: usize = 80;
    let (m, n, k) = if simulated(gpu) {
        (16, 8, 32)
    } else {
        (72, 136, 96)
    };
    // 16 bytes between starts: aligned, a key of its own.
    let step = 8;
    let a = random(m + PAIRS * step / k + 1, k, 120, bf16::from_f32);
    let b = random(n + PAIRS * step / k + 1, k, 121, bf16::from_f32);
    let (a, b) = (a.into_raw_vec_and_offset().0, b.into_raw_vec_and_offset().0);
    let dev = |x: &[bf16]| x.iter().map(|&v| GemmInput::to_dev(v)).collect::<Vec<_>>();
    let (da, db) = (dev(&a), dev(&b));
    let da = gpu.to_device(&da).map_err(fail)?;
    let db = gpu.to_device(&db).map_err(fail)?;
    let shape = GemmShape::with_ops(m, n, k, Op::N, Op::T);
    let mut results = Vec::new();
    for (pass, alpha) in [(0, 1.0f32), (1, 2.0)] {
        let order: Vec<usize> = if pass == 0 {
            (0..PAIRS).collect()
        } else {
            (0..PAIRS).rev().collect()
        };
        for i in order {
            let (a0, b0) = (i * step, (PAIRS - 1 - i) * step);
            let mut dc = gpu.zeroed::<f32>(m * n).map_err(fail)?;
            gpu.gemm_on_device::<bf16, f32>(
                &shape,
                alpha,
                &da.index(a0..a0 + m * k),
                &db.index(b0..b0 + n * k),
                0.0,
                &mut dc,
            )
            .map_err(fail)?;
            results.push((i, alpha, a0, b0, dc));
        }
    }
    gpu.synchronize("gemm").map_err(fail)?;
    for (i, alpha, a0, b0, dc) in &results {
        let av = Array2::from_shape_vec((m, k), a[*a0..a0 + m * k].to_vec()).map_err(fail)?;
        let bv = Array2::from_shape_vec((n, k), b[*b0..b0 + n * k].to_vec()).map_err(fail)?;
        let mut got = vec![0f32; m * n];
        dc.copy_to(&mut got[..]).map_err(fail)?;
        let got = Array2::from_shape_vec((m, n), got).map_err(fail)?;
        let zero = Array2::<f32>::zeros((m, n));
        let reference = gemm_reference(*alpha, av.view(), bv.t(), 0.0, zero.view());
        if let Some(bad) = gemm_check(got.view(), &reference, |v| v as f64) {
            return Err(Failed::from(format!(
                "pair {i} (A at {a0}, B at {b0}), alpha {alpha}: {bad:?}"
            )));
        }
    }
    Ok(())
}

/// A tensor map the driver refuses (A's row stride 2^40 bytes, past TMA's
/// limit, for one row: every check before the driver's passes) is
/// `Error::Cuda` naming the kernel, `cuTensorMapEncodeTiled` and A's box.
fn gemm_wgmma_refused_tensor_map(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::gemm_wgmma::{WgmmaInput, WgmmaShape};
    let kernel = WgmmaInput::Bf16.kernel_name();
    ensure(gpu.function(kernel).is_ok(), || {
        format!("the loaded image ({}) has no {kernel}", gpu.image())
    })?;
    let (m, n, k) = (1, 8, 64);
    let a = gpu.zeroed::<u16>(k).map_err(fail)?;
    let b = gpu.zeroed::<u16>(n * k).map_err(fail)?;
    let mut c = gpu.zeroed::<f32>(m * n).map_err(fail)?;
    let shape = WgmmaShape {
        lda: 1 << 39,
        ..WgmmaShape::dense(m, n, k)
    };
    let e = gpu
        .gemm_wgmma(WgmmaInput::Bf16, &a, &b, &mut c, &shape, 1.0, 0.0)
        .err()
        .ok_or("a 2^40-byte row stride accepted")?;
    let text = e.to_string();
    ensure(
        matches!(e, cuda_kernels::Error::Cuda { .. })
            && text.contains(kernel)
            && text.contains("cuTensorMapEncodeTiled (A, box 64 × 128 × 1 16-bit)"),
        || format!("not the driver's refusal naming the call and the box: {text}"),
    )
}

/// NaN and infinity in A and B propagate as the exact product says (NaN
/// where a NaN or ∞·0 or ∞−∞ meets, ∞ of its sign elsewhere); a NaN in C
/// with beta = 0 does not.
fn gemm_nan_and_infinity(gpu: &Gpu) -> Result<(), Failed> {
    let (m, n, k) = (48, 40, 64);
    let mut a = random(m, k, 40, bf16::from_f32);
    let mut b = random(k, n, 41, bf16::from_f32);
    a[(3, 5)] = bf16::NAN;
    a[(7, 9)] = bf16::INFINITY;
    a[(20, 1)] = bf16::NEG_INFINITY;
    b[(9, 2)] = bf16::ZERO;
    b[(30, 11)] = bf16::INFINITY;
    let mut c = Array2::<f32>::zeros((m, n));
    c[(0, 0)] = f32::NAN;
    gemm_case(gpu, 1.0, a.view(), b.view(), 0.0, &c)?;
    Ok(())
}

/// Ours and `cublasGemmEx` on the same bf16 operands with NaN and
/// infinities (NN and TN, f32 output): NaN in the same places, the same
/// infinities, every finite element of both within the f64 bound.
fn gemm_agrees_with_cublas(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::cublas::Cublas;
    let lib = Cublas::find().map_err(|why| Failed::from(format!("cuBLAS missing: {why}")))?;
    let cublas = Cublas::new(gpu, lib).map_err(fail)?;
    let (m, n, k) = (200, 136, 264);
    for op_a in [Op::N, Op::T] {
        let stored = if op_a == Op::N { (m, k) } else { (k, m) };
        let mut a = random(stored.0, stored.1, 70, bf16::from_f32);
        let mut b = random(k, n, 71, bf16::from_f32);
        a[(3, 5)] = bf16::NAN;
        a[(7, 9)] = bf16::INFINITY;
        a[(20, 1)] = bf16::NEG_INFINITY;
        b[(9, 2)] = bf16::ZERO;
        b[(30, 11)] = bf16::INFINITY;
        b[(1, 100)] = bf16::NEG_INFINITY;
        let flat = |x: &Array2<bf16>| x.iter().map(|&v| GemmInput::to_dev(v)).collect::<Vec<_>>();
        let da = gpu.to_device(&flat(&a)).map_err(fail)?;
        let db = gpu.to_device(&flat(&b)).map_err(fail)?;
        let shape = GemmShape::with_ops(m, n, k, op_a, Op::N);
        let av = if op_a == Op::N { a.view() } else { a.t() };
        let zero = Array2::<f32>::zeros((m, n));
        let reference = gemm_reference(1.0, av, b.view(), 0.0, zero.view());
        let mut results = Vec::new();
        for ours in [true, false] {
            let mut dc = gpu.zeroed::<f32>(m * n).map_err(fail)?;
            if ours {
                gpu.gemm_on_device::<bf16, f32>(&shape, 1.0, &da, &db, 0.0, &mut dc)
                    .map_err(fail)?;
            } else {
                cublas
                    .gemm_ex::<bf16, f32>(&shape, 1.0, &da, &db, 0.0, &mut dc)
                    .map_err(fail)?;
            }
            gpu.synchronize("gemm").map_err(fail)?;
            let mut c = vec![0f32; m * n];
            dc.copy_to(&mut c[..]).map_err(fail)?;
            let c = Array2::from_shape_vec((m, n), c).map_err(fail)?;
            if let Some(bad) = gemm_check(c.view(), &reference, |v| v as f64) {
                return Err(Failed::from(format!(
                    "{} ({op_a:?}N): {bad:?}",
                    if ours { "ours" } else { "cuBLAS" }
                )));
            }
            results.push(c);
        }
        let classes = |c: &Array2<f32>| {
            c.mapv(|v| {
                if v.is_nan() {
                    2
                } else if v.is_infinite() {
                    v.signum() as i32 * 3
                } else {
                    0
                }
            })
        };
        ensure(classes(&results[0]) == classes(&results[1]), || {
            format!("{op_a:?}N: NaN/infinity places differ from cuBLAS")
        })?;
    }
    Ok(())
}

/// The bound is tight enough to matter: the f32 sum in k order passes it,
/// and the same sum with one k-slab of 16 dropped fails it, for every
/// input type.
fn gemm_bound_catches_a_dropped_k_slab() -> Result<(), Failed> {
    fn case<I: GemmInput, O: GemmOutput<I>>(
        from: impl Fn(f32) -> I,
        to_out: impl Fn(f32) -> O,
    ) -> Result<(), Failed> {
        let (m, n, k) = (32, 32, 512);
        let (a, b) = (random(m, k, 50, &from), random(k, n, 51, &from));
        let c = Array2::from_elem((m, n), to_out(0.0));
        let reference = gemm_reference(1.0, a.view(), b.view(), 0.0, c.view());
        let sum = |skip: Option<usize>| {
            Array2::from_shape_fn((m, n), |(i, j)| {
                let mut acc = 0f32;
                for kk in 0..k {
                    if skip.is_some_and(|s| kk / 16 == s) {
                        continue;
                    }
                    let x = |v: I| {
                        let f = v.to_f64() as f32;
                        // tf32: the tensor core's input rounding.
                        if I::NAME == "tf32" {
                            f32::from_bits((f.to_bits() + 0x1000) & 0xffff_e000)
                        } else {
                            f
                        }
                    };
                    acc = x(a[(i, kk)]).mul_add(x(b[(kk, j)]), acc);
                }
                to_out(acc)
            })
        };
        ensure(
            gemm_check(sum(None).view(), &reference, |v| v.to_f64()).is_none(),
            || format!("{}: the f32 sum fails its own bound", I::NAME),
        )?;
        ensure(
            gemm_check(sum(Some(7)).view(), &reference, |v| v.to_f64()).is_some(),
            || format!("{}: a dropped k-slab passes the bound", I::NAME),
        )
    }
    case::<bf16, f32>(bf16::from_f32, |x| x)?;
    case::<bf16, bf16>(bf16::from_f32, bf16::from_f32)?;
    case::<f16, f16>(f16::from_f32, f16::from_f32)?;
    case::<f32, f32>(|x| x, |x| x)
}

/// Inner dimensions that differ, a zero dimension, a leading dimension
/// shorter than a row, a dimension past 2^31 and a short buffer: errors
/// naming the kernel, before any launch.
fn gemm_refusals(gpu: &Gpu) -> Result<(), Failed> {
    let a = random(4, 5, 60, bf16::from_f32);
    let b = random(6, 3, 61, bf16::from_f32);
    let mut c = Array2::<f32>::zeros((4, 3));
    let named = |e: cuda_kernels::Error, what: &str| -> Result<(), Failed> {
        let text = e.to_string();
        ensure(
            text.contains("gemm_mma_bf16_f32") && text.contains(what),
            || format!("{what}: {text}"),
        )
    };
    let e = gpu
        .gemm(1.0, a.view(), b.view(), 0.0, c.view_mut())
        .err()
        .ok_or("inner dims accepted")?;
    named(e, "inner dimensions differ")?;
    let empty = Array2::from_elem((0, 5), bf16::ZERO);
    let b5 = random(5, 3, 62, bf16::from_f32);
    let mut c0 = Array2::<f32>::zeros((0, 3));
    let e = gpu
        .gemm(1.0, empty.view(), b5.view(), 0.0, c0.view_mut())
        .err()
        .ok_or("empty accepted")?;
    named(e, "zero dimension")?;
    let name = "gemm_mma_bf16_f32";
    let mut shape = GemmShape::dense(4, 3, 5);
    shape.lda = 4;
    named(
        shape
            .check(name, (100, 100, 100))
            .err()
            .ok_or("short lda accepted")?,
        "shorter than a row",
    )?;
    let huge = GemmShape::dense(1 << 31, 8, 8);
    named(
        huge.check(name, (usize::MAX, usize::MAX, usize::MAX))
            .err()
            .ok_or("2^31 accepted")?,
        "32-bit limit",
    )?;
    let shape = GemmShape::dense(4, 3, 5);
    named(
        shape
            .check(name, (19, 15, 12))
            .err()
            .ok_or("short A accepted")?,
        "A holds 19",
    )
}

// ---------------------------------------------------------------------------
// f16 and bf16 in the elementwise and reduce families.

/// A 16-bit float of `half` as the tests below need it.
trait Half: Copy + PartialEq + std::fmt::Debug + Default + Send + Sync + 'static {
    /// The type's name.
    const NAME: &'static str;
    /// The device crate's twin of the same bits.
    type Dev: cuda_kernels::reduce::Input<Acc = f32>;
    fn from_bits(b: u16) -> Self;
    fn to_bits(self) -> u16;
    fn to_f64(self) -> f64;
    /// `x` rounded once (nearest, ties to even).
    fn round(x: f64) -> Self;
}

macro_rules! half_type {
    ($($t:ident),*) => {$(
        impl Half for $t {
            const NAME: &'static str = stringify!($t);
            type Dev = cuda_kernels::kernels::device::float16::$t;
            fn from_bits(b: u16) -> Self {
                $t::from_bits(b)
            }
            fn to_bits(self) -> u16 {
                $t::to_bits(self)
            }
            fn to_f64(self) -> f64 {
                $t::to_f64(self)
            }
            fn round(x: f64) -> Self {
                $t::from_f64(x)
            }
        }
    )*};
}
half_type!(f16, bf16);

/// `x` rounded to `H` as the kernels give it: the canonical NaN `0x7fff`
/// for a NaN.
fn rounded<H: Half>(x: f64) -> u16 {
    if x.is_nan() {
        NAN16 as u16
    } else {
        H::round(x).to_bits()
    }
}

/// `n` values of random bits (every class: normals, subnormals, zeros,
/// infinities, NaNs).
fn random_bits<H: Half>(n: usize, seed: u64) -> Vec<H> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| H::from_bits(rng.next_u64() as u16))
        .collect()
}

/// `got` bit for bit against `want` (bits), the first difference described.
fn same_bits<H: Half>(what: &str, got: &[H], want: &[u16]) -> Result<(), Failed> {
    ensure(got.len() == want.len(), || format!("{what}: length"))?;
    match got.iter().zip(want).position(|(g, &w)| g.to_bits() != w) {
        None => Ok(()),
        Some(i) => Err(Failed::from(format!(
            "{what}: element {i} of {}: got {:#06x}, want {:#06x}",
            got.len(),
            got[i].to_bits(),
            want[i]
        ))),
    }
}

/// `sum`, `saxpy` and `lerp` on `H`: every operation rounded once, from the
/// formula in f64 (a sum, difference or product of two 16-bit values is
/// exact in f64, or for bf16's wide exponents rounded there with 53 ≥ 2·8 + 2
/// bits, so the second rounding to `H` is still the exactly rounded
/// result). Random bits of every class, odd lengths, views starting one
/// element in (the kernels' element-wise head and tail), and the empty
/// input refused.
fn elementwise_case<H>(gpu: &Gpu) -> Result<(), Failed>
where
    H: Half + cuda_kernels::matrices::ElementwiseElement<Dev = <H as Half>::Dev>,
    cuda_kernels::matrices::kernels::sum: cuda_kernels::matrices::Elementwise<<H as Half>::Dev>,
    cuda_kernels::matrices::kernels::saxpy: cuda_kernels::matrices::Elementwise<<H as Half>::Dev>,
    cuda_kernels::matrices::kernels::lerp: cuda_kernels::matrices::Elementwise<<H as Half>::Dev>,
{
    use cuda_kernels::matrices::kernels::{lerp, saxpy, sum};
    use cuda_kernels::ndarray::Array1;
    let r = |x: f64| H::round(x).to_f64();
    let lens: &[usize] = if simulated(gpu) {
        &[1, 7, 8, 9, 4099]
    } else {
        &[1, 7, 8, 9, 4099, 1 << 20]
    };
    for &n in lens {
        for offset in [0usize, 1] {
            let what = |k: &str| format!("{k}_{} n = {n}, offset {offset}", H::NAME);
            let arrays: Vec<Array1<H>> = (0..3)
                .map(|k| Array1::from(random_bits::<H>(n + offset, 100 * n as u64 + k)))
                .collect();
            let (a, b, t) = (
                arrays[0].slice(s![offset..]),
                arrays[1].slice(s![offset..]),
                arrays[2].slice(s![offset..]),
            );
            let mut c = Array1::from_elem(n, H::default());
            gpu.elementwise::<sum, H>(&[a, b], &mut [c.view_mut()], &[])
                .map_err(fail)?;
            let want: Vec<u16> = a
                .iter()
                .zip(&b)
                .map(|(x, y)| rounded::<H>(x.to_f64() + y.to_f64()))
                .collect();
            same_bits(&what("sum"), c.as_slice().unwrap(), &want)?;

            let alpha = H::round(-1.375);
            let mut y = b.to_owned();
            gpu.elementwise::<saxpy, H>(&[a], &mut [y.view_mut()], &[alpha])
                .map_err(fail)?;
            let want: Vec<u16> = a
                .iter()
                .zip(&b)
                .map(|(x, y)| rounded::<H>(r(alpha.to_f64() * x.to_f64()) + y.to_f64()))
                .collect();
            same_bits(&what("saxpy"), y.as_slice().unwrap(), &want)?;

            let mut out = Array1::from_elem(n, H::default());
            gpu.elementwise::<lerp, H>(&[a, b, t], &mut [out.view_mut()], &[])
                .map_err(fail)?;
            let want: Vec<u16> = (0..n)
                .map(|i| {
                    let (a, b, t) = (a[i].to_f64(), b[i].to_f64(), t[i].to_f64());
                    rounded::<H>(a + r(t * r(b - a)))
                })
                .collect();
            same_bits(&what("lerp"), out.as_slice().unwrap(), &want)?;
        }
    }
    let empty = Array1::<H>::from(vec![]);
    let mut none = Array1::<H>::from(vec![]);
    ensure(
        matches!(
            gpu.elementwise_sum(empty.view(), empty.view(), none.view_mut()),
            Err(cuda_kernels::Error::InvalidInput { .. })
        ),
        || format!("sum_{}: empty arrays must be refused", H::NAME),
    )
}

fn elementwise_f16_bf16(gpu: &Gpu) -> Result<(), Failed> {
    elementwise_case::<f16>(gpu)?;
    elementwise_case::<bf16>(gpu)
}

/// Sum (f32 accumulation, f32 result), min and max (the input type) of
/// `H`:
/// - values `k/8`, `|k| ≤ 127`, in `H` exactly: every partial sum of up to
///   2^17 of them is a multiple of 1/8 below 2^21, exact in f32 in any
///   order, so the sum must equal the integer sum exactly (one element
///   dropped or doubled changes it);
/// - values in [-1, 1): within the bound of `float_sum_tolerance` for the
///   launch's summation depth (f32's unit roundoff) around the f64 sum;
/// - min and max equal to the f64 minimum and maximum (NaNs ignored, all
///   NaN gives ±∞), for random bits of every class;
/// - infinities and NaN in a sum; odd lengths; a device slice starting one
///   element in (the unaligned head); the empty input (sum: the initial
///   value or 0; min/max: refused without an initial value).
fn reduce_case<H>(gpu: &Gpu) -> Result<(), Failed>
where
    H: Half + cuda_kernels::reduce::HalfInput<Dev = <H as Half>::Dev>,
    cuda_kernels::reduce::Sum: cuda_kernels::reduce::HalfReduction<H, Output = f32>,
    cuda_kernels::reduce::Min: cuda_kernels::reduce::HalfReduction<H, Output = H>,
    cuda_kernels::reduce::Max: cuda_kernels::reduce::HalfReduction<H, Output = H>,
{
    use cuda_kernels::ndarray::Array1;
    use cuda_kernels::reduce::{Max, Min, Sum, accurate_sum, float_sum_tolerance};
    let name = H::NAME;
    let lens: &[usize] = if simulated(gpu) {
        &[1, 7, 8, 9, 4099, 100_003]
    } else {
        &[1, 7, 8, 9, 4099, 100_003, 1 << 17]
    };
    for &n in lens {
        let mut rng = Rng::new(n as u64);
        let ks: Vec<i64> = (0..n).map(|_| rng.below(255) as i64 - 127).collect();
        let xs: Array1<H> = ks.iter().map(|&k| H::round(k as f64 / 8.0)).collect();
        let want = ks.iter().sum::<i64>() as f64 / 8.0;
        let got = gpu.reduce_half::<Sum, H>(xs.view(), None).map_err(fail)?;
        ensure(f64::from(got) == want, || {
            format!("sum_{name} of k/8, n = {n}: got {got}, want {want}")
        })?;
        let got = gpu
            .reduce_half::<Sum, H>(xs.view(), Some(0.5))
            .map_err(fail)?;
        ensure(f64::from(got) == want + 0.5, || {
            format!("sum_{name} of k/8 + init 0.5, n = {n}: got {got}")
        })?;
        // The same bytes on the device, reduced from element 1 (unaligned).
        let dev: Vec<<H as Half>::Dev> = xs
            .iter()
            .map(|&x| cuda_kernels::reduce::HalfInput::to_dev(x))
            .collect();
        let d = gpu.to_device(&dev).map_err(fail)?;
        let got = gpu
            .reduce_device::<Sum, <H as Half>::Dev>(&d.index(1..), None)
            .map_err(fail)?;
        let want1 = ks[1..].iter().sum::<i64>() as f64 / 8.0;
        ensure(f64::from(got) == want1, || {
            format!("sum_{name} of k/8 from element 1, n = {n}: got {got}, want {want1}")
        })?;

        // Values in [-1, 1): the proven bound of the launch's order.
        let us: Array1<H> = (0..n)
            .map(|_| H::round(rng.uniform() * 2.0 - 1.0))
            .collect();
        let exact = accurate_sum(us.iter().map(|x| x.to_f64()));
        let sum_abs: f64 = us.iter().map(|x| x.to_f64().abs()).sum();
        let (grid, block) = gpu
            .reduce_launch_shape::<Sum, <H as Half>::Dev>(n)
            .map_err(fail)?;
        let tol = float_sum_tolerance(n, (grid * block) as usize, sum_abs, 2f64.powi(-24));
        let got = gpu.reduce_half::<Sum, H>(us.view(), None).map_err(fail)?;
        ensure((f64::from(got) - exact).abs() <= tol, || {
            format!("sum_{name} of [-1, 1), n = {n}: got {got}, exact {exact}, bound {tol:.3e}")
        })?;

        // Min and max of random bits (NaNs among them).
        let bits = Array1::from(random_bits::<H>(n, 7 * n as u64));
        let finite = || bits.iter().map(|x| x.to_f64()).filter(|x| !x.is_nan());
        let (lo, hi) = (
            finite().fold(f64::INFINITY, f64::min),
            finite().fold(f64::NEG_INFINITY, f64::max),
        );
        let got_lo = gpu.reduce_half::<Min, H>(bits.view(), None).map_err(fail)?;
        let got_hi = gpu.reduce_half::<Max, H>(bits.view(), None).map_err(fail)?;
        ensure(got_lo.to_f64() == lo && got_hi.to_f64() == hi, || {
            format!("min/max_{name}, n = {n}: got {got_lo:?} / {got_hi:?}, want {lo} / {hi}")
        })?;
    }
    // Infinities and NaN in a sum; all-NaN min and max; the empty input.
    let v = |xs: &[f64]| -> Array1<H> { xs.iter().map(|&x| H::round(x)).collect() };
    let sum = |xs: &[f64]| gpu.reduce_half::<Sum, H>(v(xs).view(), None).map_err(fail);
    let inf = f64::INFINITY;
    ensure(sum(&[1.0, inf, 2.0])? == f32::INFINITY, || {
        format!("sum_{name}: 1 + ∞ + 2")
    })?;
    ensure(sum(&[1.0, inf, -inf])?.is_nan(), || {
        format!("sum_{name}: ∞ − ∞")
    })?;
    ensure(sum(&[1.0, f64::NAN, 2.0])?.is_nan(), || {
        format!("sum_{name}: NaN")
    })?;
    let nans = v(&[f64::NAN; 9]);
    let lo = gpu.reduce_half::<Min, H>(nans.view(), None).map_err(fail)?;
    let hi = gpu.reduce_half::<Max, H>(nans.view(), None).map_err(fail)?;
    ensure(lo.to_f64() == inf && hi.to_f64() == -inf, || {
        format!("min/max_{name} of NaNs: {lo:?} / {hi:?}, want +∞ / −∞ (the identities)")
    })?;
    let empty = v(&[]);
    ensure(sum(&[])? == 0.0, || format!("sum_{name} of nothing"))?;
    let got = gpu
        .reduce_half::<Sum, H>(empty.view(), Some(2.5))
        .map_err(fail)?;
    ensure(got == 2.5, || {
        format!("sum_{name} of nothing, init 2.5: {got}")
    })?;
    let init = H::round(-3.0);
    let got = gpu
        .reduce_half::<Min, H>(empty.view(), Some(init))
        .map_err(fail)?;
    ensure(got == init, || {
        format!("min_{name} of nothing, init −3: {got:?}")
    })?;
    ensure(
        matches!(
            gpu.reduce_half::<Max, H>(empty.view(), None),
            Err(cuda_kernels::Error::InvalidInput { .. })
        ),
        || format!("max_{name} of nothing without init must be refused"),
    )
}

fn reduce_f16_bf16(gpu: &Gpu) -> Result<(), Failed> {
    reduce_case::<f16>(gpu)?;
    reduce_case::<bf16>(gpu)
}
