//! The collectives' bench part (`CUDA_KERNELS_BENCH_ONLY=collectives`):
//! device-wide inclusive scan (i32 and f32 sums) and compaction (half of
//! the i32 kept) at 2^28 elements, each against a device copy measured in
//! the same run, each timed result checked exactly against its CPU
//! reference.
use super::{BenchRecord, Check, median_gpu_ms};
use crate::bench::{device_copy_gbps, gb_per_s};
use crate::scan::{self, ScanKernel, ScanKind, Sum, TileScratch};
use crate::select::{self, NonZero, SelectScratch};
use crate::util::Rng;
use crate::{Gpu, Result};

const N: usize = 1 << 28;
const REPS: usize = 20;

/// The scans and the compaction (see the module docs).
pub fn bench(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    gpu.bind()?;
    let copy = device_copy_gbps(gpu, N * 4, REPS)?;
    let mut rng = Rng::new(22);
    // Steps of −1, 0 or 1: every prefix is an integer far below 2^24, so
    // the f32 scan is exact in any order and checked bit for bit.
    let steps: Vec<i32> = (0..N).map(|_| rng.below(3) as i32 - 1).collect();
    bench_scan::<i32>(gpu, &steps, copy, records)?;
    let floats: Vec<f32> = steps.iter().map(|&s| s as f32).collect();
    bench_scan::<f32>(gpu, &floats, copy, records)?;
    bench_select(gpu, &mut rng, copy, records)
}

fn bench_scan<T: scan::Element>(
    gpu: &Gpu,
    host: &[T],
    copy: f64,
    records: &mut Vec<BenchRecord>,
) -> Result<()>
where
    Sum: ScanKernel<T>,
{
    let input = gpu.to_device(host)?;
    let mut output = gpu.zeroed::<T>(host.len())?;
    let mut scratch = TileScratch::<T>::new(gpu, host.len())?;
    let ms = median_gpu_ms(gpu, 2, REPS, || {
        scan::scan_on_device::<Sum, T>(
            gpu,
            &input,
            &mut output,
            ScanKind::Inclusive,
            None,
            &mut scratch,
        )
    })?;
    gpu.synchronize(<Sum as ScanKernel<T>>::ENTRY)?;
    let got = output.to_vec()?;
    let want = scan::scan_cpu::<Sum, T>(host, ScanKind::Inclusive, None);
    let check = match (0..host.len()).find(|&i| got[i] != want[i]) {
        None => Check::Pass("exact".into()),
        Some(i) => Check::Fail(format!("element {i}: {:?}, want {:?}", got[i], want[i])),
    };
    let gbps = gb_per_s(2 * host.len() * size_of::<T>(), ms);
    records.push(
        BenchRecord::new(
            format!("{} (inclusive)", <Sum as ScanKernel<T>>::ENTRY),
            format!("2^28 × {}", std::any::type_name::<T>()),
            ms as f64,
            "GB/s",
            gbps,
            check,
        )
        .against("device copy", gbps / copy),
    );
    Ok(())
}

fn bench_select(gpu: &Gpu, rng: &mut Rng, copy: f64, records: &mut Vec<BenchRecord>) -> Result<()> {
    let host: Vec<i32> = (0..N)
        .map(|_| {
            if rng.below(2) == 0 {
                0
            } else {
                1 + rng.below(1000) as i32
            }
        })
        .collect();
    let input = gpu.to_device(&host)?;
    let mut output = gpu.zeroed::<i32>(N)?;
    let mut scratch = SelectScratch::new(gpu, N)?;
    let ms = median_gpu_ms(gpu, 2, REPS, || {
        select::select_on_device::<NonZero, i32>(gpu, &input, None, &mut output, &mut scratch)
    })?;
    let kept = scratch.count(gpu)?;
    let got = output.to_vec()?;
    let want = select::select_cpu(&host, |_, x| x != 0);
    let check = if kept == want.len() && got[..kept] == want[..] {
        Check::Pass(format!("exact, {kept} kept"))
    } else {
        Check::Fail(format!("{kept} kept, want {}", want.len()))
    };
    let gbps = gb_per_s((N + kept) * 4, ms);
    records.push(
        BenchRecord::new(
            "select_nonzero_i32 (half kept)",
            "2^28 × i32",
            ms as f64,
            "GB/s (read + written)",
            gbps,
            check,
        )
        .against("device copy", gbps / copy),
    );
    Ok(())
}
