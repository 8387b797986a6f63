//! The collectives' bench part (`CUDA_KERNELS_BENCH_ONLY=collectives`):
//! device-wide inclusive scan (i32 and f32 sums) and compaction (half of
//! the i32 kept) at 2^28 elements, each against a device copy measured in
//! the same run. Before every run, warm-ups included, the output is
//! poisoned (untimed: a NaN or an unreachable integer in every element);
//! after each, sampled elements are checked against the CPU reference, and
//! after the last every element: a run that writes nothing, or writes only
//! some of the time, fails its row ([`timed_and_checked`]; before, the
//! output was reused across runs and such a run reported "exact").
use std::fmt::Debug;

use crate::cust::memory::DeviceCopy;

use super::{BenchRecord, Check};
use crate::bench::{device_copy_gbps, gb_per_s};
use crate::scan::{self, ScanKernel, ScanKind, Sum, TileScratch};
use crate::select::{self, NonZero, SelectScratch};
use crate::util::Rng;
use crate::{DeviceBuffer, Gpu, Result};

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

/// Elements checked after each run but the last (which is checked whole).
const SAMPLES: usize = 4096;

/// The median GPU time of `reps` runs of `work` (after `warm_up` more),
/// each writing `output`, and the check: before each run `output` is filled
/// with `poison` (untimed), after each `check` compares what the run wrote
/// with `want` (the first `len` of `output`, `len` given by `written` after
/// the run: the whole output, or the selection's count): [`SAMPLES`]
/// elements, the first and the last, and every element after the last run.
/// The first mismatch fails the check. On the simulator the runs are
/// untimed (0 ms).
pub fn timed_and_checked<T: DeviceCopy + crate::cust::memory::bytemuck::Pod + PartialEq + Debug>(
    gpu: &Gpu,
    (warm_up, reps): (usize, usize),
    output: &mut DeviceBuffer<T>,
    poison: u32,
    want: &[T],
    mut work: impl FnMut(&mut DeviceBuffer<T>) -> Result<()>,
    mut written: impl FnMut() -> Result<usize>,
) -> Result<(f32, Check)> {
    let mut times = Vec::with_capacity(reps);
    let mut rng = Rng::new(23);
    let mut got = Vec::new();
    for run in 0..warm_up + reps {
        output.set_32(poison)?;
        let ms = if gpu.is_simulated() {
            work(output)?;
            0.0
        } else {
            let ((), ms) = crate::timing::GpuTimer::time(gpu.stream(), || work(output))?;
            ms
        };
        if run >= warm_up {
            times.push(ms);
        }
        gpu.synchronize("bench")?;
        let len = written()?;
        if len != want.len() {
            return Ok((
                0.0,
                Check::Fail(format!("run {run}: {len} written, want {}", want.len())),
            ));
        }
        got.resize_with(output.len(), || want[0]);
        output.copy_to(&mut got[..])?;
        let last = run + 1 == warm_up + reps;
        let picks: Vec<usize> = if last || len == 0 {
            (0..len).collect()
        } else {
            (0..SAMPLES)
                .map(|_| rng.below(len as u64) as usize)
                .chain([0, len - 1])
                .collect()
        };
        if let Some(&i) = picks.iter().find(|&&i| got[i] != want[i]) {
            return Ok((
                0.0,
                Check::Fail(format!(
                    "run {run}: element {i} is {:?}, want {:?}",
                    got[i], want[i]
                )),
            ));
        }
    }
    let ms = if times.is_empty() {
        0.0
    } else {
        crate::timing::median(&mut times)
    };
    Ok((
        ms,
        Check::Pass(format!(
            "exact, every run ({} checked whole)",
            warm_up + reps
        )),
    ))
}

fn bench_scan<T: scan::Element + crate::cust::memory::bytemuck::Pod>(
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
    let want = scan::scan_cpu::<Sum, T>(host, ScanKind::Inclusive, None);
    // A NaN (f32), or -559038737 (i32): no prefix of steps of ±1 in 2^28.
    let (ms, check) = timed_and_checked(
        gpu,
        (2, REPS),
        &mut output,
        0xdead_beef,
        &want,
        |output| {
            scan::scan_on_device::<Sum, T>(
                gpu,
                &input,
                output,
                ScanKind::Inclusive,
                None,
                &mut scratch,
            )
        },
        || Ok(host.len()),
    )?;
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
    let scratch = std::cell::RefCell::new(SelectScratch::new(gpu, N)?);
    let want = select::select_cpu(&host, |_, x| x != 0);
    // -559038737: no kept element (1 to 1000).
    let (ms, check) = timed_and_checked(
        gpu,
        (2, REPS),
        &mut output,
        0xdead_beef,
        &want,
        |output| {
            select::select_on_device::<NonZero, i32>(
                gpu,
                &input,
                None,
                output,
                &mut scratch.borrow_mut(),
            )
        },
        || scratch.borrow().count(gpu),
    )?;
    let kept = want.len();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// On the simulator: a scan that writes its output passes; one that
    /// writes nothing (the planted fault: the work does not launch) fails,
    /// where the output reused across runs passed before; one that writes
    /// only on its first run fails too.
    #[test]
    fn a_run_that_writes_nothing_is_caught() -> Result<()> {
        let gpu = cuda_kernels::simulator()?;
        let host: Vec<i32> = (0..3000).map(|i| (i % 3) - 1).collect();
        let want = scan::scan_cpu::<Sum, i32>(&host, ScanKind::Inclusive, None);
        let input = gpu.to_device(&host)?;
        let mut scratch = TileScratch::<i32>::new(&gpu, host.len())?;
        let mut output = gpu.zeroed::<i32>(host.len())?;
        let mut runs = 0;
        let mut scan_when = |output: &mut DeviceBuffer<i32>, run: bool| -> Result<()> {
            runs += 1;
            if !run {
                return Ok(());
            }
            scan::scan_on_device::<Sum, i32>(
                &gpu,
                &input,
                output,
                ScanKind::Inclusive,
                None,
                &mut scratch,
            )
        };
        let n = || Ok(host.len());
        let (_, check) = timed_and_checked(
            &gpu,
            (1, 2),
            &mut output,
            0xdead_beef,
            &want,
            |o| scan_when(o, true),
            n,
        )?;
        assert!(matches!(check, Check::Pass(_)), "{check:?}");
        let (_, check) = timed_and_checked(
            &gpu,
            (1, 2),
            &mut output,
            0xdead_beef,
            &want,
            |o| scan_when(o, false),
            n,
        )?;
        assert!(matches!(check, Check::Fail(_)), "{check:?}");
        let mut first = true;
        let (_, check) = timed_and_checked(
            &gpu,
            (1, 2),
            &mut output,
            0xdead_beef,
            &want,
            |o| {
                let run = std::mem::take(&mut first);
                scan_when(o, run)
            },
            n,
        )?;
        assert!(
            matches!(&check, Check::Fail(why) if why.starts_with("run 1")),
            "{check:?}"
        );
        Ok(())
    }
}
