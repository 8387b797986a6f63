//! The property-test runner: proptest's runner driven by hand, so that each
//! property is one trial (one GPU trial, ignored with the reason where there
//! is no GPU).
//!
//! Shapes and parameters are proptest strategies and shrink as usual. The
//! values of large inputs are drawn from proptest element strategies with the
//! case's own RNG ([`Draw`], inside `prop_perturb`): when the shape shrinks
//! they are drawn again from the same RNG (values are not shrunk one by one,
//! which would take a GPU launch per element), and failure reports show them
//! abridged ([`brief`]). Each run uses a fresh seed, printed on failure;
//! `PROPTEST_RNG_SEED=<seed>` replays it.
use std::collections::hash_map::RandomState;
use std::fmt::Debug;
use std::hash::{BuildHasher, Hasher};

use libtest_mimic::Failed;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, RngSeed, TestCaseError, TestRng, TestRunner};

use super::{Elem, first_unlike};
use crate::common::{fail, under_sanitizer};

/// Runs `cases` random cases of a property; a counterexample fails the trial
/// with proptest's shrunk input and the seed that replays the run.
///
/// The seed is `PROPTEST_RNG_SEED` when set, a fresh random one otherwise.
/// Shrinking stops after 512 steps or 20 s (every step launches kernels); no
/// failure persistence files. Under compute-sanitizer (scripts/sanitize.sh,
/// which gives each run 240 s) an eighth of the cases run.
pub fn check<S: Strategy>(
    cases: u32,
    strategy: S,
    property: impl Fn(S::Value) -> Result<(), TestCaseError>,
) -> Result<(), Failed> {
    let cases = if under_sanitizer() {
        cases.div_ceil(8)
    } else {
        cases
    };
    let mut config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 512,
        max_shrink_time: 20_000,
        ..Config::default()
    };
    let seed = match config.rng_seed {
        RngSeed::Fixed(seed) => seed,
        RngSeed::Random => RandomState::new().build_hasher().finish(),
    };
    config.rng_seed = RngSeed::Fixed(seed);
    let mut runner = TestRunner::new(config);
    runner
        .run(&strategy, property)
        .map_err(|e| fail(format!("{e}\n(replay with PROPTEST_RNG_SEED={seed})")))
}

/// A crate error as a failed case.
pub fn case_err(e: cuda_kernels::Error) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

/// `Err` naming `what` and the first index where `got` and `want` differ
/// ([`Elem::same`]).
pub fn all_same<'a, T: Elem + 'a>(
    what: &str,
    got: impl IntoIterator<Item = &'a T>,
    want: impl IntoIterator<Item = &'a T>,
) -> Result<(), TestCaseError> {
    first_unlike(got, want).map_err(|e| TestCaseError::fail(format!("{what}: {e}")))
}

/// Draws values from proptest strategies with one RNG: the `TestRng` that
/// `prop_perturb` hands a case (the same RNG state gives the same values, so
/// a case replays), or a fixed seed's ([`Draw::seeded`], for the tests with
/// chosen sizes).
pub struct Draw(TestRunner);

impl Draw {
    /// Draws with `rng`.
    pub fn new(rng: TestRng) -> Self {
        Self(TestRunner::new_with_rng(Config::default(), rng))
    }

    /// Draws reproducibly from `seed`.
    pub fn seeded(seed: u64) -> Self {
        let bytes: Vec<u8> = (0..4u64)
            .flat_map(|k| (seed ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes())
            .collect();
        Self::new(TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
    }

    /// One value of `s` (its first, unshrunk value).
    pub fn one<S: Strategy>(&mut self, s: &S) -> S::Value {
        s.new_tree(&mut self.0)
            .expect("the element strategies here never reject")
            .current()
    }

    /// `n` values of `s`.
    pub fn vec<S: Strategy>(&mut self, s: &S, n: usize) -> Vec<S::Value> {
        (0..n).map(|_| self.one(s)).collect()
    }
}

/// Lengths of 1-D inputs in `min..=max`: a third of the cases at most 64
/// (vector, warp and tail edges), a third at most 4096, a third anywhere.
pub fn length(min: usize, max: usize) -> impl Strategy<Value = usize> + Clone {
    prop_oneof![min..=max.min(64), min..=max.min(4096), min..=max]
}

/// A slice abridged for failure reports: all of it up to 16 values, else the
/// first and last few and the length.
pub fn brief<T: Debug>(xs: &[T]) -> String {
    if xs.len() <= 16 {
        format!("{xs:?}")
    } else {
        let n = xs.len();
        format!(
            "[{:?}, {:?}, {:?}, {:?}, …, {:?}, {:?}] ({n} values)",
            xs[0],
            xs[1],
            xs[2],
            xs[3],
            xs[n - 2],
            xs[n - 1]
        )
    }
}

/// Any f32 but NaN, either sign: 40 % of the values uniform in
/// [-1000, 1000), 40 % with a uniform random exponent field 0..=254 and
/// mantissa (every magnitude from subnormal to the largest finite), 10 %
/// zeros, 10 % infinities. (Cut from one random u64: `prop_oneof!`, tuples
/// and proptest's float classes take microseconds per value in a debug
/// build, too slow for 10^5 values.)
pub fn f32_no_nan() -> impl Strategy<Value = f32> + Clone {
    any::<u64>().prop_map(|r| {
        let negative = (r >> 8) & 1 == 1;
        let exp = ((r >> 9) % 255) as u32;
        let mantissa = ((r >> 17) & 0x7f_ffff) as u32;
        let sign = if negative { -1.0 } else { 1.0 };
        match r % 10 {
            0..=3 => (r >> 40) as f32 / (1u64 << 24) as f32 * 2000.0 - 1000.0,
            4..=7 => f32::from_bits(((negative as u32) << 31) | (exp << 23) | mantissa),
            8 => sign * 0.0,
            _ => sign * f32::INFINITY,
        }
    })
}

/// Any f64 but NaN, drawn as [`f32_no_nan`] draws f32 (exponent field
/// 0..=2046), from two random u64.
pub fn f64_no_nan() -> impl Strategy<Value = f64> + Clone {
    any::<(u64, u64)>().prop_map(|(r, bits)| {
        let negative = (r >> 8) & 1 == 1;
        let exp = (r >> 9) % 2047;
        let mantissa = bits & ((1 << 52) - 1);
        let sign = if negative { -1.0 } else { 1.0 };
        match r % 10 {
            0..=3 => (bits >> 11) as f64 / (1u64 << 53) as f64 * 2000.0 - 1000.0,
            4..=7 => f64::from_bits(((negative as u64) << 63) | (exp << 52) | mantissa),
            8 => sign * 0.0,
            _ => sign * f64::INFINITY,
        }
    })
}
