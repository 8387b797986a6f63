//! Launchers for the histogram family (`histogram_even_<t>`; the algorithm
//! and the bin of a sample are defined in [`cuda_kernels_gpu::histogram`]):
//! counts of `u32`, `i32` or `f32` samples in `bins` even bins over
//! `[lower, upper)`, 1 to [`MAX_BINS`] bins.
//!
//! ```no_run
//! use cuda_kernels_host::histogram::histogram_even;
//! # use cuda_kernels_host::prelude::*;
//! # fn main() -> cuda_kernels_host::Result<()> {
//! # let gpu = cuda_kernels_host::Gpu::simulator()?;
//! let samples = ndarray::array![0.5f32, 1.5, 1.7, 9.0, f32::NAN];
//! // Bins [0, 1), [1, 2), [2, 3), [3, 4); 9 and NaN are in none.
//! let counts = histogram_even(&gpu, samples.view(), 4, 0.0, 4.0)?;
//! assert_eq!(counts.to_vec(), [1, 2, 0, 0]);
//! # Ok(()) }
//! ```
//!
//! An empty input gives all-zero counts. 0 bins or more than [`MAX_BINS`],
//! `lower ≥ upper`, a NaN bound, and more than `u32::MAX` samples (the
//! counts are u32) are [`Error::InvalidInput`] naming the kernel.
use cust::memory::DeviceCopy;
use ndarray::{Array1, ArrayView1};

pub use cuda_kernels_gpu::histogram::{BLOCK, HistogramSample, MAX_BINS, SHARED_BYTES};
use cuda_kernels_gpu::histogram::{HISTOGRAM_EVEN_F32, HISTOGRAM_EVEN_I32, HISTOGRAM_EVEN_U32};

use crate::Gpu;
use crate::error::{Error, Result};
use crate::kernel::{Kernel, KernelParam};
use crate::launch::LaunchConfig;
use crate::memory::DeviceSlice;
use crate::util::contiguous;

mod sealed {
    pub trait Sealed {}
}

/// A sample type of the histogram: `u32`, `i32`, `f32` (sealed).
pub trait Sample:
    HistogramSample + DeviceCopy + KernelParam<Self> + PartialOrd + sealed::Sealed
{
    /// The kernel `histogram_even_<t>`: `(samples, n, counts, lower, upper, bins)`.
    const KERNEL: Kernel<(*const Self, usize, *mut u32, Self, Self, u32)>;
    /// Whether the value is NaN (never for integers).
    fn is_nan(self) -> bool;
    /// The bin of `x` from the definition, for the CPU reference (`None`
    /// outside `[lower, upper)`).
    fn reference_bin(x: Self, lower: Self, upper: Self, bins: u32) -> Option<u32>;
}

macro_rules! integer_samples {
    ($($t:ty => $kernel:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Sample for $t {
            const KERNEL: Kernel<(*const $t, usize, *mut u32, $t, $t, u32)> = $kernel;
            fn is_nan(self) -> bool {
                false
            }
            fn reference_bin(x: $t, lower: $t, upper: $t, bins: u32) -> Option<u32> {
                // ⌊(x − lower) · bins / (upper − lower)⌋, exactly, in i128.
                (lower <= x && x < upper).then(|| {
                    ((x as i128 - lower as i128) * bins as i128
                        / (upper as i128 - lower as i128)) as u32
                })
            }
        }
    )*};
}
integer_samples!(u32 => HISTOGRAM_EVEN_U32, i32 => HISTOGRAM_EVEN_I32);

impl sealed::Sealed for f32 {}
impl Sample for f32 {
    const KERNEL: Kernel<(*const f32, usize, *mut u32, f32, f32, u32)> = HISTOGRAM_EVEN_F32;
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn reference_bin(x: f32, lower: f32, upper: f32, bins: u32) -> Option<u32> {
        // CUB's even bins in f32: ⌊(x − lower) · (bins / (upper − lower))⌋,
        // at most bins − 1.
        let scale = bins as f32 / (upper - lower);
        (lower <= x && x < upper).then(|| (((x - lower) * scale).floor() as u32).min(bins - 1))
    }
}

/// Refuses what the kernel cannot count: see the [module docs](self).
fn check<T: Sample>(n: usize, bins: usize, lower: T, upper: T) -> Result<()> {
    let name = T::KERNEL.name();
    if bins == 0 || bins > MAX_BINS {
        return Err(Error::invalid(
            name,
            format!("{bins} bins: from 1 to {MAX_BINS}"),
        ));
    }
    if lower.is_nan() || upper.is_nan() {
        return Err(Error::invalid(name, "a NaN bound of the range"));
    }
    if lower >= upper {
        return Err(Error::invalid(
            name,
            "the range's lower bound is not below its upper bound",
        ));
    }
    if n > u32::MAX as usize {
        return Err(Error::invalid(
            name,
            format!("{n} samples: at most {} (u32 counts)", u32::MAX),
        ));
    }
    Ok(())
}

/// Queues the histogram of `samples` on [`Gpu::stream`]: `counts` (its
/// length is the number of bins) is zeroed, then counts the samples of each
/// bin of the even bins over `[lower, upper)`.
pub fn histogram_even_on_device<T: Sample>(
    gpu: &Gpu,
    samples: &DeviceSlice<T>,
    counts: &mut DeviceSlice<u32>,
    lower: T,
    upper: T,
) -> Result<()> {
    let n = samples.len();
    let bins = counts.len();
    check(n, bins, lower, upper)?;
    let name = T::KERNEL.name();
    gpu.check_device(name, "samples", samples)?;
    gpu.check_device(name, "counts", counts)?;
    gpu.bind()?;
    let stream = gpu.stream();
    // SAFETY: `counts` is borrowed until the caller synchronizes.
    unsafe { counts.set_zero_async(stream) }?;
    if n == 0 {
        return Ok(());
    }
    // One wave of resident blocks at most: each block's bins are added to
    // the output once, at its end.
    let wave = gpu.multiprocessors(name)? * gpu.resident_blocks(name, BLOCK, 0, SHARED_BYTES)?;
    let grid = n.div_ceil(4 * BLOCK as usize).min(wave as usize) as u32;
    // SAFETY: samples holds n 4-byte samples (aligned: a slice of T);
    // counts `bins` u32 zeroed above, touched only by the kernel's atomics;
    // 1 ≤ bins ≤ MAX_BINS and lower < upper, neither NaN (checked above).
    unsafe {
        gpu.launch(
            T::KERNEL,
            LaunchConfig::linear(grid, BLOCK),
            stream,
            (samples, n, counts, lower, upper, bins as u32),
        )
    }
}

/// The counts of `samples` in `bins` even bins over `[lower, upper)`.
pub fn histogram_even<T: Sample>(
    gpu: &Gpu,
    samples: ArrayView1<T>,
    bins: usize,
    lower: T,
    upper: T,
) -> Result<Array1<u32>> {
    check(samples.len(), bins, lower, upper)?;
    gpu.bind()?;
    let d_samples = gpu.to_device(&contiguous(&samples))?;
    // SAFETY: zeroed by the launcher before the kernel writes it.
    let mut d_counts = unsafe { gpu.uninitialized::<u32>(bins) }?;
    histogram_even_on_device(gpu, &d_samples, &mut d_counts, lower, upper)?;
    gpu.synchronize(T::KERNEL.name())?;
    Ok(Array1::from(d_counts.to_vec()?))
}

/// The CPU reference: each sample's bin from [`Sample::reference_bin`]
/// (the definition), counted.
pub fn histogram_even_cpu<T: Sample>(samples: &[T], bins: usize, lower: T, upper: T) -> Vec<u32> {
    let mut counts = vec![0u32; bins];
    for &x in samples {
        if let Some(b) = T::reference_bin(x, lower, upper, bins as u32) {
            counts[b as usize] += 1;
        }
    }
    counts
}
