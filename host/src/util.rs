//! Small helpers shared by the launchers.
use std::borrow::Cow;

use ndarray::ArrayView1;

/// The elements of a 1-D view as a contiguous slice: borrowed when the view
/// is already contiguous in memory order, copied otherwise (strided or
/// negatively strided views).
pub fn contiguous<'a, T: Clone>(view: &'a ArrayView1<'_, T>) -> Cow<'a, [T]> {
    match view.as_slice() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(view.iter().cloned().collect()),
    }
}

/// The choice the environment variable `var` names among `choices` (each a
/// name and its value): `None` when unset; another value is an error
/// `{var}={value}: expected a, b or c` (the names, in order).
pub fn env_choice<T: Copy>(
    var: &str,
    choices: &[(&str, T)],
) -> std::result::Result<Option<T>, String> {
    let Some(value) = std::env::var_os(var) else {
        return Ok(None);
    };
    let value = value.to_string_lossy();
    if let Some(&(_, chosen)) = choices.iter().find(|(name, _)| *name == value) {
        return Ok(Some(chosen));
    }
    let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
    let expected = match names.split_last() {
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    Err(format!("{var}={value}: expected {expected}"))
}

/// A small deterministic random generator (SplitMix64) for demo and test
/// inputs: reproducible from a seed, no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (the seeds' `rand() % bound`); 0 when bound is 0.
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            0
        } else {
            self.next_u64() % bound
        }
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (NumPy's `randn`), by Box–Muller.
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}
