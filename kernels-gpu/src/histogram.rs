//! Device-wide histogram with even bins (CUB's `DeviceHistogram::HistogramEven`):
//! `bins` bins of equal width over `[lower, upper)`, 1 to [`MAX_BINS`],
//! for `u32`, `i32` and `f32` samples; samples outside the range (and NaN)
//! are not counted.
//!
//! The bin of a sample (the [`EvenBins`] of its type, the one definition):
//! - integers, exactly: `⌊(x − lower) · bins / (upper − lower)⌋`. When the
//!   range is a multiple of `bins` this is `(x − lower) / width`, divided by
//!   multiplying with a magic number (Granlund and Montgomery) instead of
//!   the GPU's slow integer division;
//! - `f32`, as CUB does: `⌊(x − lower) · scale⌋` in f32 with `scale = bins /
//!   (upper − lower)` (in f32), then at most `bins − 1` (rounding can reach
//!   `bins` just below `upper`).
//!
//! One kernel per sample type, `histogram_even_<t>`: each block counts its
//! grid-stride share of 16-byte vectors in a [`BlockHistogram`] in shared
//! memory (warp-aggregated when a warp's 128 samples of a step share a bin), then adds its
//! nonzero bins to the output with global atomics.
use crate::device::collectives::histogram::BlockHistogram;
use crate::device::load::load_nc_v4;
use crate::device::{thread, warp};

/// Threads per block.
pub const BLOCK: u32 = 256;
/// The most bins.
pub const MAX_BINS: usize = 4096;

/// A sample type with its even-bin mapping.
pub trait HistogramSample: Copy {
    /// What a thread precomputes from `(lower, upper, bins)`.
    type Bins: EvenBins<Self>;
    /// The sample from its 32 bits.
    fn from_word(word: u32) -> Self;
    /// The mapping of `bins` bins over `[lower, upper)` (`lower < upper`,
    /// `1 ≤ bins ≤ MAX_BINS`, checked by the host).
    fn even_bins(lower: Self, upper: Self, bins: u32) -> Self::Bins;
}

/// The bin of a sample, or `None` outside `[lower, upper)`.
pub trait EvenBins<T> {
    /// The sample's bin.
    fn bin(&self, x: T) -> Option<u32>;
}

/// Unsigned division of 32-bit values by an invariant divisor with a
/// multiply and shifts (Hacker's Delight, 10–8): `divide(x) = x / d` for
/// every `x`.
#[derive(Clone, Copy, Debug)]
pub struct MagicDivisor {
    magic: u32,
    shift1: u32,
    shift2: u32,
}

impl MagicDivisor {
    /// The divisor `d ≥ 1`.
    #[inline(always)]
    pub fn new(d: u32) -> Self {
        let l = 32 - (d - 1).leading_zeros();
        let magic = (((1u64 << 32) * ((1u64 << l) - d as u64)) / d as u64 + 1) as u32;
        Self {
            magic,
            shift1: l.min(1),
            shift2: l.saturating_sub(1),
        }
    }

    /// `x / d`.
    #[inline(always)]
    pub fn divide(&self, x: u32) -> u32 {
        let t = ((self.magic as u64 * x as u64) >> 32) as u32;
        (t + ((x - t) >> self.shift1)) >> self.shift2
    }
}

/// Even bins of 32-bit integers, by their offset from `lower` (wrapping).
#[derive(Clone, Copy, Debug)]
pub struct IntegerBins {
    lower: u32,
    range: u32,
    bins: u32,
    /// The bin width when `range` is a multiple of `bins`.
    width: Option<MagicDivisor>,
}

impl IntegerBins {
    #[inline(always)]
    fn new(lower: u32, upper: u32, bins: u32) -> Self {
        let range = upper.wrapping_sub(lower);
        Self {
            lower,
            range,
            bins,
            width: range
                .is_multiple_of(bins)
                .then(|| MagicDivisor::new(range / bins)),
        }
    }

    #[inline(always)]
    fn bin_of_offset(&self, x: u32) -> Option<u32> {
        let off = x.wrapping_sub(self.lower);
        if off >= self.range {
            return None;
        }
        Some(match self.width {
            Some(width) => width.divide(off),
            None => ((off as u64 * self.bins as u64) / self.range as u64) as u32,
        })
    }
}

impl EvenBins<u32> for IntegerBins {
    #[inline(always)]
    fn bin(&self, x: u32) -> Option<u32> {
        self.bin_of_offset(x)
    }
}

impl EvenBins<i32> for IntegerBins {
    #[inline(always)]
    fn bin(&self, x: i32) -> Option<u32> {
        // x − lower modulo 2^32: below `range` exactly for lower ≤ x < upper.
        self.bin_of_offset(x as u32)
    }
}

/// Even bins of f32 samples, as CUB computes them.
#[derive(Clone, Copy, Debug)]
pub struct FloatBins {
    lower: f32,
    upper: f32,
    scale: f32,
    last: u32,
}

impl EvenBins<f32> for FloatBins {
    #[inline(always)]
    fn bin(&self, x: f32) -> Option<u32> {
        if x >= self.lower && x < self.upper {
            Some((((x - self.lower) * self.scale) as u32).min(self.last))
        } else {
            None
        }
    }
}

impl HistogramSample for u32 {
    type Bins = IntegerBins;
    #[inline(always)]
    fn from_word(word: u32) -> Self {
        word
    }
    #[inline(always)]
    fn even_bins(lower: u32, upper: u32, bins: u32) -> IntegerBins {
        IntegerBins::new(lower, upper, bins)
    }
}

impl HistogramSample for i32 {
    type Bins = IntegerBins;
    #[inline(always)]
    fn from_word(word: u32) -> Self {
        word as i32
    }
    #[inline(always)]
    fn even_bins(lower: i32, upper: i32, bins: u32) -> IntegerBins {
        IntegerBins::new(lower as u32, upper as u32, bins)
    }
}

impl HistogramSample for f32 {
    type Bins = FloatBins;
    #[inline(always)]
    fn from_word(word: u32) -> Self {
        f32::from_bits(word)
    }
    #[inline(always)]
    fn even_bins(lower: f32, upper: f32, bins: u32) -> FloatBins {
        FloatBins {
            lower,
            upper,
            scale: bins as f32 / (upper - lower),
            last: bins - 1,
        }
    }
}

/// The body of `histogram_even_<t>`.
///
/// # Safety
/// `samples` holds `n` 4-byte-aligned samples; `counts` `bins` u32 that
/// only atomics touch during the launch; `1 ≤ bins ≤ MAX_BINS`, `lower <
/// upper` (not NaN); blocks of [`BLOCK`] threads.
#[inline(always)]
pub unsafe fn histogram_even<T: HistogramSample>(
    samples: *const T,
    n: usize,
    counts: *mut u32,
    lower: T,
    upper: T,
    bins: u32,
) {
    let mapping = T::even_bins(lower, upper, bins);
    let h = BlockHistogram::new(
        crate::shared_array!(histogram_even_bins: [u32; MAX_BINS]),
        bins as usize,
    );
    // SAFETY: the block's own bins.
    unsafe { h.zero() };
    // The elements before the first 16-byte boundary, and after the last
    // whole vector, one per thread of the grid; the vectors in between.
    let head = ((16 - samples as usize % 16) % 16 / 4).min(n);
    let vectors = (n - head) / 4;
    let tail = head + vectors * 4;
    let g = thread::index_1d();
    let word = |i: usize| {
        // SAFETY: i < n, in `samples`.
        T::from_word(unsafe { *samples.add(i).cast::<u32>() })
    };
    let edge = |i: usize| {
        if let Some(b) = mapping.bin(word(i)) {
            // SAFETY: b < bins.
            unsafe { h.add(b) };
        }
    };
    if g < head {
        edge(g);
    }
    if tail + g < n {
        edge(tail + g);
    }
    // SAFETY: 16-byte aligned from `head` on.
    let body = unsafe { samples.add(head) }.cast::<[u32; 4]>();
    let lane = warp::lane_id() as usize;
    let stride = thread::grid_size_1d();
    let load = |j: usize| {
        // SAFETY: j < vectors: a whole vector of `samples`.
        (j < vectors).then(|| unsafe { load_nc_v4(body.add(j)) })
    };
    let count = |v: Option<[u32; 4]>| {
        let bin = |w: u32| v.and_then(|_| mapping.bin(T::from_word(w)));
        let v = v.unwrap_or([0; 4]);
        // SAFETY: the block's bins; bin < bins; all 32 lanes call it.
        unsafe { h.add_warp_4([bin(v[0]), bin(v[1]), bin(v[2]), bin(v[3])]) };
    };
    // Two vectors per thread in flight: both loads are issued before either
    // is counted.
    let mut base = g - lane;
    while base < vectors {
        let (first, second) = (load(base + lane), load(base + stride + lane));
        count(first);
        count(second);
        base += 2 * stride;
    }
    // SAFETY: counts holds `bins` u32, touched only by atomics.
    unsafe { h.flush(counts) };
}

crate::device::kernels! {
    list HISTOGRAM_KERNELS;
    /// `counts[b]` += the `u32` samples in bin `b` of `bins` even bins over
    /// `[lower, upper)`.
    ///
    /// # Safety
    /// As for [`histogram_even`].
    pub fn histogram_even_u32(
        samples: *const u32,
        n: usize,
        counts: *mut u32,
        lower: u32,
        upper: u32,
        bins: u32,
    ) as HISTOGRAM_EVEN_U32 {
        // SAFETY: forwarded from this entry point's contract.
        unsafe { histogram_even(samples, n, counts, lower, upper, bins) }
    }

    /// `counts[b]` += the `i32` samples in bin `b` of `bins` even bins over
    /// `[lower, upper)`.
    ///
    /// # Safety
    /// As for [`histogram_even`].
    pub fn histogram_even_i32(
        samples: *const i32,
        n: usize,
        counts: *mut u32,
        lower: i32,
        upper: i32,
        bins: u32,
    ) as HISTOGRAM_EVEN_I32 {
        // SAFETY: forwarded from this entry point's contract.
        unsafe { histogram_even(samples, n, counts, lower, upper, bins) }
    }

    /// `counts[b]` += the `f32` samples in bin `b` of `bins` even bins over
    /// `[lower, upper)` (NaN is in no bin).
    ///
    /// # Safety
    /// As for [`histogram_even`].
    pub fn histogram_even_f32(
        samples: *const f32,
        n: usize,
        counts: *mut u32,
        lower: f32,
        upper: f32,
        bins: u32,
    ) as HISTOGRAM_EVEN_F32 {
        // SAFETY: forwarded from this entry point's contract.
        unsafe { histogram_even(samples, n, counts, lower, upper, bins) }
    }
}

#[cfg(test)]
mod tests {
    use super::MagicDivisor;

    #[test]
    fn magic_division_is_exact() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u32
        };
        let divisors = [1, 2, 3, 7, 255, 256, 257, 1 << 20, u32::MAX / 3, u32::MAX];
        let random: Vec<u32> = (0..200).map(|_| next().max(1)).collect();
        for d in divisors.into_iter().chain(random) {
            let m = MagicDivisor::new(d);
            for x in [0, 1, d - 1, d, d.wrapping_add(1), u32::MAX, u32::MAX - 1] {
                assert_eq!(m.divide(x), x / d, "{x} / {d}");
            }
            for _ in 0..200 {
                let x = next();
                assert_eq!(m.divide(x), x / d, "{x} / {d}");
            }
        }
    }
}
