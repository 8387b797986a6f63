//! The histogram family: u32, i32 and f32 samples in 1 to 4,096 even bins
//! (ranges that are and are not multiples of the bin count, negative
//! bounds; bin counts for which the block histogram keeps 32, 16, 8, 4 and
//! 2 copies of its bins), on random, sorted, all-equal, out-of-range and NaN-containing
//! inputs of odd lengths and from a misaligned device slice, against the
//! CPU reference from the definition; the empty input's zero counts; the
//! refusals (0 or 4,097 bins, lower ≥ upper, NaN bounds).
use cuda_kernels::Error;
use cuda_kernels::Gpu;
use cuda_kernels::histogram::{
    MAX_BINS, Sample, histogram_even, histogram_even_cpu, histogram_even_on_device,
};
use cuda_kernels::ndarray::Array1;
use cuda_kernels::util::Rng;
use libtest_mimic::{Failed, Trial};

use crate::common::{ensure, fail, sized};

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        kernel!(u32_counts_agree_with_the_definition),
        kernel!(i32_counts_agree_with_the_definition),
        kernel!(f32_counts_agree_with_the_definition),
        kernel!(a_misaligned_slice_is_counted_whole),
        kernel!(bad_input_is_refused_naming_the_kernel),
    ]
}

/// The histogram of `samples` equals the reference, for each `(bins,
/// lower, upper)`.
fn check<T: Sample + std::fmt::Debug>(
    gpu: &Gpu,
    what: &str,
    samples: &[T],
    ranges: &[(usize, T, T)],
) -> Result<(), Failed> {
    for &(bins, lower, upper) in ranges {
        let got = histogram_even(
            gpu,
            Array1::from(samples.to_vec()).view(),
            bins,
            lower,
            upper,
        )
        .map_err(fail)?;
        let want = histogram_even_cpu(samples, bins, lower, upper);
        if let Some(b) = (0..bins).find(|&b| got[b] != want[b]) {
            return Err(fail(format!(
                "{what}, {bins} bins over [{lower:?}, {upper:?}): bin {b} counts {}, want {}",
                got[b], want[b]
            )));
        }
    }
    Ok(())
}

/// Random, sorted and all-equal inputs of the given samples.
fn inputs<T: Copy + PartialOrd>(
    n: usize,
    mut draw: impl FnMut() -> T,
) -> Vec<(&'static str, Vec<T>)> {
    let random: Vec<T> = (0..n).map(|_| draw()).collect();
    let mut sorted = random.clone();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let equal = vec![random[n / 2]; n];
    vec![("random", random), ("sorted", sorted), ("all-equal", equal)]
}

fn u32_counts_agree_with_the_definition(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(1);
    let n = sized(gpu, 1_000_003, 20_001);
    for (name, samples) in inputs(n, || rng.below(5000) as u32) {
        check(
            gpu,
            name,
            &samples,
            &[
                (1, 0, 5000),
                (256, 0, 4096),
                (7, 100, 4000),
                (600, 0, 5000),
                (2000, 1, 4999),
                (4096, 0, 5000),
                (MAX_BINS, 0, u32::MAX),
            ],
        )?;
    }
    Ok(())
}

fn i32_counts_agree_with_the_definition(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(2);
    let n = sized(gpu, 1_000_003, 20_001);
    for (name, samples) in inputs(n, || rng.below(1 << 20) as i32 - (1 << 19)) {
        check(
            gpu,
            name,
            &samples,
            &[
                (256, -(1 << 19), 1 << 19),
                (3, -1000, 999),
                (300, -(1 << 18), 1 << 18),
                (100, i32::MIN, i32::MAX),
            ],
        )?;
    }
    Ok(())
}

fn f32_counts_agree_with_the_definition(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(3);
    let n = sized(gpu, 1_000_003, 20_001);
    let mut draw = || match rng.below(50) {
        0 => f32::NAN,
        1 => f32::INFINITY,
        2 => -0.0,
        _ => (rng.normal() * 3.0) as f32,
    };
    for (name, samples) in inputs(n, &mut draw) {
        check(
            gpu,
            name,
            &samples,
            &[
                (256, -4.0, 4.0),
                (10, 0.0, 1.0),
                (4096, -10.0, 10.0),
                (3, -1.0, 0.5),
            ],
        )?;
    }
    Ok(())
}

/// A device slice that starts 4 bytes past a 16-byte boundary, with a
/// length that is not a multiple of the vector: every sample counted once.
fn a_misaligned_slice_is_counted_whole(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(4);
    let samples: Vec<u32> = (0..5003).map(|_| rng.below(64) as u32).collect();
    let d = gpu.to_device(&samples).map_err(fail)?;
    let mut counts = gpu.zeroed::<u32>(64).map_err(fail)?;
    for start in [1, 2, 3] {
        let part = d.index(start..);
        histogram_even_on_device(gpu, &part, &mut counts, 0u32, 64).map_err(fail)?;
        gpu.synchronize("histogram_even_u32").map_err(fail)?;
        let got = counts.to_vec().map_err(fail)?;
        let want = histogram_even_cpu(&samples[start..], 64, 0, 64);
        ensure(got == want, || {
            format!("from sample {start}: {got:?}, want {want:?}")
        })?;
    }
    Ok(())
}

fn bad_input_is_refused_naming_the_kernel(gpu: &Gpu) -> Result<(), Failed> {
    let refused = |what: &str, want: &str, r: cuda_kernels::Result<Array1<u32>>| match r {
        Err(Error::InvalidInput { kernel, reason }) if kernel == want => {
            println!("{what}: refused: {reason}");
            Ok(())
        }
        other => Err(fail(format!(
            "{what}: want InvalidInput from {want}, got {other:?}"
        ))),
    };
    let f = Array1::from(vec![0.5f32, 1.5]);
    let u = Array1::from(vec![1u32, 2]);
    refused(
        "0 bins",
        "histogram_even_f32",
        histogram_even(gpu, f.view(), 0, 0.0, 1.0),
    )?;
    refused(
        "4,097 bins",
        "histogram_even_u32",
        histogram_even(gpu, u.view(), MAX_BINS + 1, 0, 1 << 20),
    )?;
    refused(
        "lower = upper",
        "histogram_even_u32",
        histogram_even(gpu, u.view(), 4, 5, 5),
    )?;
    refused(
        "lower > upper",
        "histogram_even_f32",
        histogram_even(gpu, f.view(), 4, 1.0, 0.0),
    )?;
    refused(
        "a NaN bound",
        "histogram_even_f32",
        histogram_even(gpu, f.view(), 4, f32::NAN, 1.0),
    )?;
    refused(
        "a NaN upper bound",
        "histogram_even_f32",
        histogram_even(gpu, f.view(), 4, 0.0, f32::NAN),
    )?;
    let empty = histogram_even(gpu, Array1::<i32>::from(vec![]).view(), 5, -3, 3).map_err(fail)?;
    ensure(empty.to_vec() == [0; 5], || format!("empty input: {empty}"))
}
