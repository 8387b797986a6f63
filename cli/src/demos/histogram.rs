//! The histogram family's part of `cuda-kernels bench`
//! (`CUDA_KERNELS_BENCH_ONLY=histogram`): 256-bin histograms of 2^28
//! uniform and of 2^28 all-equal u32 (GB/s read against a device copy of
//! the same bytes, counts checked exactly against the CPU's).
use super::{BenchRecord, Check};
use crate::bench::{device_copy_gbps, gb_per_s};
use crate::histogram::{histogram_even_cpu, histogram_even_on_device};
use crate::timing::{GpuTimer, median};
use crate::util::Rng;
use crate::{Gpu, Result};

const N: usize = 1 << 28;
const REPS: usize = 5;

/// Runs the histogram benches.
pub fn bench(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    gpu.bind()?;
    let copy = device_copy_gbps(gpu, N * 4, REPS)?;
    let mut rng = Rng::new(22);
    let uniform: Vec<u32> = (0..N).map(|_| (rng.next_u64() as u32) >> 24).collect();
    bench_histogram(gpu, "256 bins, uniform u32", &uniform, copy, records)?;
    let same = vec![77u32; N];
    bench_histogram(gpu, "256 bins, all one value", &same, copy, records)
}

/// Times `REPS` 256-bin histograms of `samples` over [0, 256) and checks
/// the counts exactly.
fn bench_histogram(
    gpu: &Gpu,
    what: &str,
    samples: &[u32],
    copy: f64,
    records: &mut Vec<BenchRecord>,
) -> Result<()> {
    let input = gpu.to_device(samples)?;
    let mut counts = gpu.zeroed::<u32>(256)?;
    let stream = gpu.stream();
    let mut times = Vec::new();
    for rep in 0..=REPS {
        let ((), ms) = GpuTimer::time(stream, || {
            histogram_even_on_device(gpu, &input, &mut counts, 0u32, 256)
        })?;
        if rep > 0 {
            times.push(ms);
        }
    }
    let ms = median(&mut times);
    let got = counts.to_vec()?;
    let want = histogram_even_cpu(samples, 256, 0, 256);
    let check = if got == want {
        Check::Pass("exact counts".into())
    } else {
        Check::Fail("counts differ from the CPU's".into())
    };
    let bw = gb_per_s(samples.len() * 4, ms);
    records.push(
        BenchRecord::new(
            "histogram_even_u32",
            format!("2^28 u32, {what}"),
            f64::from(ms),
            "GB/s read",
            bw,
            check,
        )
        .against("device copy", bw / copy),
    );
    Ok(())
}
