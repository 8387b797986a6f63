//! The tensor cores' arithmetic (issue 44, item 2): `mma.sync` words on the
//! GPU and on the simulator, bit for bit, over random and adversarial
//! inputs (`fid_mma_words`, inputs from `fidelity::mma_input`, the one
//! generator of both sides), and a fit of the candidate rounding models to
//! the GPU's words, printed, so that the model the simulator should
//! implement is measured, not guessed.
//!
//! The candidate models, from the published studies (Fasi, Higham,
//! Mikaitis, Pranesh 2021, "Numerical behavior of NVIDIA tensor cores", and
//! their successors on Hopper): `D = C + Σ_k A_k B_k` where the products are
//! exact; the products are added `group` at a time to the running sum (the
//! first group to C); in each group every term (the running sum and the
//! products) is aligned to the largest exponent among them and truncated
//! toward zero to `bits` fraction bits below that exponent's leading bit;
//! the aligned terms are summed exactly and the sum rounded to f32 (toward
//! zero, or to nearest even). The simulator's present model: the exact sum
//! rounded once to nearest. NaN results: the GPU's canonical `0x7fffffff`.
use super::*;
use cuda_kernels::kernels::device::mma::C_M16N8;
use cuda_kernels::kernels::fidelity::{MMA_BLOCKS, mma_class, mma_input, mma_type};
use half::{bf16, f16};

/// How a candidate rounds the sum of a group to f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Round {
    TowardZero,
    NearestEven,
}

/// A candidate model: `group` products a step, `bits` fraction bits kept
/// after alignment (`None`: no truncation: the exact sum), the rounding.
#[derive(Clone, Copy, Debug)]
struct Model {
    group: usize,
    bits: Option<i32>,
    round: Round,
}

/// The value of element `i` of operand `operand` of block `b`, as the
/// tensor core reads it: bf16, f16, or tf32 (the upper 19 bits of an f32);
/// C as f32.
fn value(b: u32, operand: u32, i: u32) -> f64 {
    let bits = mma_input(b, operand, i);
    match (operand, mma_type(b)) {
        (2, _) => f32::from_bits(bits) as f64,
        (_, 0) => bf16::from_bits(bits as u16).to_f64(),
        (_, 1) => f16::from_bits(bits as u16).to_f64(),
        _ => f32::from_bits(bits & 0xffff_e000) as f64,
    }
}

/// `x` rounded to f32 as `r` says.
fn to_f32(x: f64, r: Round) -> f32 {
    let f = x as f32;
    match r {
        Round::NearestEven => f,
        Round::TowardZero if f != 0.0 && (f as f64).abs() > x.abs() => {
            f32::from_bits(f.to_bits() - 1)
        }
        Round::TowardZero => f,
    }
}

/// The exponent of the leading bit of a nonzero, finite `x`.
fn exponent(x: f64) -> i32 {
    ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// `D[row][col]` of block `b` under model `m` (the bits).
fn model_word(b: u32, row: u32, col: u32, m: Model) -> u32 {
    let k = if mma_type(b) == 2 { 8 } else { 16 };
    let c = value(b, 2, row * 8 + col);
    let products: Vec<f64> = (0..k)
        .map(|kk| value(b, 0, row * k + kk) * value(b, 1, kk * 8 + col))
        .collect();
    // Specials: NaN wherever IEEE gives one (a NaN operand, ∞·0, ∞ − ∞),
    // as the GPU's canonical NaN; ∞ of its sign otherwise.
    let exact: f64 = products.iter().sum::<f64>() + c;
    let any_nan = c.is_nan() || products.iter().any(|p| p.is_nan());
    if any_nan || exact.is_nan() {
        return 0x7fff_ffff;
    }
    if exact.is_infinite() {
        return (exact as f32).to_bits();
    }
    let Some(bits) = m.bits else {
        return to_f32(exact, m.round).to_bits();
    };
    let mut acc = c as f32;
    for chunk in products.chunks(m.group) {
        let terms: Vec<f64> = std::iter::once(acc as f64)
            .chain(chunk.iter().copied())
            .collect();
        let Some(emax) = terms
            .iter()
            .filter(|t| **t != 0.0)
            .map(|&t| exponent(t))
            .max()
        else {
            acc = 0.0;
            continue;
        };
        let unit = 2f64.powi(emax - bits);
        let sum: f64 = terms.iter().map(|t| (t / unit).trunc() * unit).sum();
        acc = to_f32(sum, m.round);
    }
    acc.to_bits()
}

/// The GPU's and the simulator's `mma.sync` words bit for bit, every
/// type and class; the differences counted per type and class, and each
/// candidate model's misses against the GPU's words printed (the
/// measurement of item 2: the model that misses none is the one to
/// implement). Fails while the simulator's words differ.
pub(super) fn tensor_core_words_agree(gpu: &Gpu) -> Result<(), Failed> {
    let sim = crate::common::shared_simulator().map_err(Failed::from)?;
    let case = case_of(k::FID_MMA_WORDS, None);
    let g = gpu.fidelity_case(case).map_err(fail)?;
    let s = sim.fidelity_case(case).map_err(fail)?;
    let names = ["bf16", "f16", "tf32"];
    let mut differ = [[0usize; 4]; 3];
    for b in 0..MMA_BLOCKS {
        for w in 0..128 {
            let i = (b * 128 + w) as usize;
            if g[i] != s[i] {
                differ[mma_type(b) as usize][mma_class(b) as usize] += 1;
            }
        }
    }
    for (t, row) in differ.iter().enumerate() {
        eprintln!(
            "{}: words differing per class (of {} each): {row:?}",
            names[t],
            MMA_BLOCKS / 12 * 128
        );
    }
    let mut models = vec![Model {
        group: 16,
        bits: None,
        round: Round::NearestEven,
    }];
    for group in [4, 8, 16] {
        for bits in 23..=27 {
            for round in [Round::TowardZero, Round::NearestEven] {
                models.push(Model {
                    group,
                    bits: Some(bits),
                    round,
                });
            }
        }
    }
    for m in &models {
        let mut misses = [0usize; 3];
        for b in 0..MMA_BLOCKS {
            for lane in 0..32 {
                for e in 0..4 {
                    let (row, col) = C_M16N8.coord(lane, e);
                    let i = ((b * 32 + lane) * 4 + e) as usize;
                    if model_word(b, row, col, *m) != g[i] {
                        misses[mma_type(b) as usize] += 1;
                    }
                }
            }
        }
        eprintln!("model {m:?}: GPU words missed (bf16, f16, tf32): {misses:?}");
    }
    same_words("fid_mma_words (simulator against the GPU)", &s, &g)
}

/// The candidate models on the CPU: the exact-sum model is the
/// simulator's present arithmetic (so the fit's first row counts the
/// simulator's differences), and truncation shows on a sum that needs it.
pub(super) fn rounding_models_compute_their_formulas() -> Result<(), Failed> {
    let sim = crate::common::shared_simulator().map_err(Failed::from)?;
    let case = case_of(k::FID_MMA_WORDS, None);
    let s = sim.fidelity_case(case).map_err(fail)?;
    let exact = Model {
        group: 16,
        bits: None,
        round: Round::NearestEven,
    };
    let mut differ = 0;
    for b in (0..MMA_BLOCKS).filter(|&b| mma_class(b) != 3) {
        for lane in 0..32 {
            for e in 0..4 {
                let (row, col) = C_M16N8.coord(lane, e);
                if model_word(b, row, col, exact) != s[((b * 32 + lane) * 4 + e) as usize] {
                    differ += 1;
                }
            }
        }
    }
    ensure(differ == 0, || {
        format!("{differ} simulator words differ from the exact-sum model")
    })?;
    // 1 + 2⁻³⁰ truncated to 23 fraction bits is 1: the truncating model
    // loses what the exact one keeps.
    let t = (1.0 + 2f64.powi(-30)) / 2f64.powi(-23);
    ensure(t.trunc() * 2f64.powi(-23) == 1.0, || {
        "truncation".to_string()
    })
}
