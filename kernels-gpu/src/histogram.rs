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
//! grid-stride share of 16-byte vectors in a [`BlockHistogram`] of
//! [`SHARED_BYTES`] in shared memory (32 copies of up to 256 bins, one per
//! lane, so that no two lanes' atomics meet on a bank; 2 copies of 4,096;
//! warp-aggregated when a warp's 128 samples of a step share a bin), then
//! adds its nonzero bins to the output with global atomics.
use crate::device::collectives::histogram::{BlockHistogram, MAX_COPIES};
use crate::device::load::load_nc_v4;
use crate::device::{thread, warp};

/// Threads per block.
pub const BLOCK: u32 = 256;
/// The most bins.
pub const MAX_BINS: usize = 4096;
/// The words of a block's histogram: [`MAX_COPIES`] copies of 256 bins.
const SHARED_WORDS: usize = 256 * MAX_COPIES;
/// The static shared memory of each `histogram_even_<t>` block, in bytes.
pub const SHARED_BYTES: u32 = (SHARED_WORDS * 4) as u32;
const _: () = assert!(SHARED_WORDS >= MAX_BINS);
/// Registers a thread (`.maxnreg`): with 48, five blocks stay resident on
/// a multiprocessor (5 × 256 × 48 ≤ 65,536; [`SHARED_BYTES`] would allow
/// six), where `ptxas` alone took 53 (four blocks); 40 spills.
pub const MAX_REGISTERS: u32 = 48;

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

/// What a bin function returns for a sample in no bin (the block
/// histogram's own "no bin").
pub use crate::device::collectives::histogram::NO_BIN;

/// Code generic over a bin function (a sample's bin, or [`NO_BIN`]), which
/// [`EvenBins::with_bin`] runs with the function its mapping needs.
pub trait WithBin<T> {
    /// Runs the code with `bin`.
    ///
    /// # Safety
    /// The implementor's own contract.
    unsafe fn run(self, bin: impl Fn(T) -> u32 + Copy);
}

/// An even-bin mapping of samples of type `T`.
pub trait EvenBins<T> {
    /// Runs `code` with the bin function of this mapping, picked once (a
    /// uniform branch) so that the function itself has no branch: every
    /// sample's bin is computed, then replaced by [`NO_BIN`] outside the
    /// range.
    ///
    /// # Safety
    /// `code`'s contract for [`WithBin::run`].
    unsafe fn with_bin(&self, code: impl WithBin<T>);
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

/// A 32-bit integer sample: its bin is found from its bits' offset from
/// the range's lower bound, modulo 2^32.
pub trait IntegerSample: HistogramSample {
    /// The sample's 32 bits.
    fn word(self) -> u32;
}

/// How [`IntegerBins`] divides an offset into its bin.
#[derive(Clone, Copy, Debug)]
enum Division {
    /// The range is `bins` widths of `2^shift`: a shift.
    Shift(u32),
    /// The range is `bins` widths of another size: a [`MagicDivisor`].
    Magic(MagicDivisor),
    /// The range is not a multiple of `bins`: `⌊offset · bins / range⌋`
    /// by a [`WideDivisor`].
    Wide(WideDivisor),
}

/// `⌊offset · bins / range⌋` for `offset < range < 2^32` and `bins ≤ 2^12`
/// without a 64-bit division (a call to a long routine on the GPU): the
/// product, below 2^44, times `1 / range` in f64 is within 2^-40 of the
/// quotient, so truncated it is the floor or one off either way, and the
/// remainder `offset · bins − q · range`, in exact integers, says which.
#[derive(Clone, Copy, Debug)]
pub struct WideDivisor {
    bins: u32,
    range: u32,
    inverse: f64,
}

impl WideDivisor {
    /// The quotient's multiplier `bins` and divisor `range ≥ 1`.
    #[inline(always)]
    pub fn new(bins: u32, range: u32) -> Self {
        Self {
            bins,
            range,
            inverse: 1.0 / range as f64,
        }
    }

    /// `⌊offset · bins / range⌋` (exact for `offset < range`, `bins ≤ 2^12`).
    #[inline(always)]
    pub fn divide(&self, offset: u32) -> u32 {
        let product = offset as u64 * self.bins as u64;
        let q = (product as f64 * self.inverse) as u64;
        let remainder = product as i64 - (q * self.range as u64) as i64;
        let q = if remainder < 0 {
            q.wrapping_sub(1)
        } else if remainder >= self.range as i64 {
            q + 1
        } else {
            q
        };
        q as u32
    }
}

/// Even bins of 32-bit integers, by their offset from `lower` (wrapping).
#[derive(Clone, Copy, Debug)]
pub struct IntegerBins {
    lower: u32,
    range: u32,
    division: Division,
}

impl IntegerBins {
    #[inline(always)]
    fn new(lower: u32, upper: u32, bins: u32) -> Self {
        let range = upper.wrapping_sub(lower);
        let width = range / bins;
        let division = if !range.is_multiple_of(bins) {
            Division::Wide(WideDivisor::new(bins, range))
        } else if width.is_power_of_two() {
            Division::Shift(width.trailing_zeros())
        } else {
            Division::Magic(MagicDivisor::new(width))
        };
        Self {
            lower,
            range,
            division,
        }
    }

    /// The bin of `x` by `divide` (of its offset, which it must map below
    /// `bins` for every offset below `range`), or [`NO_BIN`].
    #[inline(always)]
    fn bin(self, x: u32, divide: impl Fn(u32) -> u32) -> u32 {
        let offset = x.wrapping_sub(self.lower);
        let bin = divide(offset);
        if offset < self.range { bin } else { NO_BIN }
    }
}

impl<T: IntegerSample> EvenBins<T> for IntegerBins {
    #[inline(always)]
    unsafe fn with_bin(&self, code: impl WithBin<T>) {
        let this = *self;
        // SAFETY (each arm): forwarded from the caller.
        match self.division {
            Division::Shift(shift) => unsafe {
                code.run(move |x: T| this.bin(x.word(), |offset| offset >> shift))
            },
            Division::Magic(width) => unsafe {
                code.run(move |x: T| this.bin(x.word(), |offset| width.divide(offset)))
            },
            Division::Wide(quotient) => unsafe {
                code.run(move |x: T| this.bin(x.word(), |offset| quotient.divide(offset)))
            },
        }
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
    unsafe fn with_bin(&self, code: impl WithBin<f32>) {
        let FloatBins {
            lower,
            upper,
            scale,
            last,
        } = *self;
        let bin = move |x: f32| {
            // `as` saturates (and takes NaN to 0): no fault, whatever x is.
            let bin = (((x - lower) * scale) as u32).min(last);
            if x >= lower && x < upper { bin } else { NO_BIN }
        };
        // SAFETY: forwarded from the caller.
        unsafe { code.run(bin) }
    }
}

macro_rules! integer_samples {
    ($($t:ty),*) => {$(
        impl HistogramSample for $t {
            type Bins = IntegerBins;
            #[inline(always)]
            fn from_word(word: u32) -> Self {
                word as $t
            }
            #[inline(always)]
            fn even_bins(lower: $t, upper: $t, bins: u32) -> IntegerBins {
                IntegerBins::new(lower as u32, upper as u32, bins)
            }
        }
        impl IntegerSample for $t {
            #[inline(always)]
            fn word(self) -> u32 {
                self as u32
            }
        }
    )*};
}
integer_samples!(u32, i32);

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
/// `samples` holds `n < 2^32` 4-byte-aligned samples; `counts` `bins` u32
/// that only atomics touch during the launch; `1 ≤ bins ≤ MAX_BINS`,
/// `lower < upper` (not NaN); blocks of [`BLOCK`] threads, fewer than 2^31
/// threads in all.
#[inline(always)]
pub unsafe fn histogram_even<T: HistogramSample>(
    samples: *const T,
    n: usize,
    counts: *mut u32,
    lower: T,
    upper: T,
    bins: u32,
) {
    crate::device::kernel::max_registers::<MAX_REGISTERS>();
    let histogram = BlockHistogram::new(
        crate::shared_array!(histogram_even_bins: [u32; SHARED_WORDS]),
        bins as usize,
    );
    // SAFETY: the block's own bins; `samples` and `n` from the caller,
    // every bin function's bins below `bins`; counts holds `bins` u32,
    // touched only by atomics.
    unsafe {
        histogram.zero();
        T::even_bins(lower, upper, bins).with_bin(CountSamples {
            samples,
            n,
            histogram,
        });
        histogram.flush(counts);
    }
}

/// A block's share of the samples, counted in its histogram.
struct CountSamples<T, const N: usize> {
    samples: *const T,
    n: usize,
    histogram: BlockHistogram<N>,
}

impl<T: HistogramSample, const N: usize> WithBin<T> for CountSamples<T, N> {
    /// Counts this block's grid-stride share of the samples.
    ///
    /// # Safety
    /// As for [`histogram_even`]; `histogram` is zeroed;
    /// `bin` maps every sample below the histogram's bins or to [`NO_BIN`].
    #[inline(always)]
    unsafe fn run(self, bin: impl Fn(T) -> u32 + Copy) {
        let Self {
            samples,
            n,
            histogram: h,
        } = self;
        // The elements before the first 16-byte boundary, and after the last
        // whole vector, one per thread of the grid; the vectors in between.
        // Indices in 32 bits (n < 2^32): fewer registers and instructions in
        // the loop than 64-bit ones.
        let head = ((16 - samples as usize % 16) % 16 / 4).min(n);
        let vectors = ((n - head) / 4) as u32;
        let tail = head + vectors as usize * 4;
        let g = thread::index_1d();
        let edge = |i: usize| {
            // SAFETY: i < n, in `samples`.
            let b = bin(T::from_word(unsafe { *samples.add(i).cast::<u32>() }));
            if b != NO_BIN {
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
        let lane = warp::lane_id();
        let stride = thread::grid_size_1d() as u32;
        let load = |j: u32| {
            // SAFETY: j < vectors: a whole vector of `samples`.
            (j < vectors).then(|| unsafe { load_nc_v4(body.add(j as usize)) })
        };
        let count = |v: Option<[u32; 4]>| {
            let bins = v.map_or([NO_BIN; 4], |v| v.map(|w| bin(T::from_word(w))));
            // SAFETY: the block's bins; each bin < bins; all 32 lanes call it.
            unsafe { h.add_warp_4(bins.map(|b| (b != NO_BIN).then_some(b))) };
        };
        // Two vectors per thread in flight: both loads are issued before
        // either is counted.
        // Below 2^31 + 2^31: no wrap (vectors < 2^30, the grid < 2^31).
        let mut base = g as u32 - lane;
        while base < vectors {
            let (first, second) = (load(base + lane), load(base + stride + lane));
            count(first);
            count(second);
            base += 2 * stride;
        }
    }
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
    use super::{MagicDivisor, WideDivisor};

    #[test]
    fn wide_division_is_exact() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut ranges = vec![
            1u32,
            2,
            3,
            4095,
            4097,
            5000,
            u32::MAX,
            u32::MAX - 1,
            1 << 31,
        ];
        ranges.extend((0..100).map(|_| next() as u32 | 1));
        for range in ranges {
            for bins in [1u32, 2, 3, 7, 100, 255, 4095, 4096] {
                let w = WideDivisor::new(bins, range);
                let mut offsets = vec![0, range - 1, range / 2, range / 3];
                // Offsets at and next to each bin's start: where the quotient
                // is an integer and the f64 estimate can land either side.
                for b in [1, bins / 2, bins - 1] {
                    let start = ((b as u64 * range as u64).div_ceil(bins as u64)) as u32;
                    offsets.extend([start.saturating_sub(1), start, start.saturating_add(1)]);
                }
                offsets.extend((0..50).map(|_| (next() % range as u64) as u32));
                for offset in offsets.into_iter().filter(|&o| o < range) {
                    let want = (offset as u64 * bins as u64 / range as u64) as u32;
                    assert_eq!(w.divide(offset), want, "{offset} · {bins} / {range}");
                }
            }
        }
    }

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
