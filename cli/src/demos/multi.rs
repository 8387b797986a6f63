//! `cuda-kernels bench --multi`: scaling from 1 to N devices of the
//! multi-device launchers (SGEMM 16384³, Mandelbrot 16384² × 256, Life
//! 8192² × 100 steps with the halo exchange, a sum of 2^31 f32 resident on
//! the devices), and the bandwidth of copies between two devices (peer and
//! staged) against a device-to-device copy on one.
//!
//! Each workload runs on the first 1, 2, …, N of the devices; a run's time
//! is the wall clock around the joined host threads (one per device),
//! divided by the back-to-back repetitions it queued, median of several
//! runs. Every result is checked: against the CPU where that is affordable
//! (sampled rows at these sizes) and, for each device count, against the
//! one-device result (identical for Mandelbrot and Life; within the
//! rounding bound for SGEMM and the float sum).
use ndarray::{Array2, Axis};

use super::{BenchRecord, Check, cpu_time};
use crate::bench::{device_copy_gbps, gb_per_s};
use crate::life::{life_cpu, life_step_cpu, random_lattice};
use crate::mandelbrot::{MandelbrotParams, first_difference};
use crate::matrices::MatmulReference;
use crate::memory::DeviceSlice;
use crate::multi_gpu::life::LifeBands;
use crate::multi_gpu::mandelbrot::MandelbrotBands;
use crate::multi_gpu::matmul::MatmulBands;
use crate::multi_gpu::reduce::{ReduceScratches, reduce_in_devices_order};
use crate::peer::{CopyPath, copy_between};
use crate::reduce::{Sum, accurate_sum, float_sum_tolerance};
use crate::timing::median;
use crate::util::Rng;
use crate::{Error, Gpu, Result};
use cuda_kernels::prelude::*;

/// Sizes of the scaling rows (the issue's).
pub struct Sizes {
    /// SGEMM m = k = n.
    pub sgemm: usize,
    /// Mandelbrot breadth.
    pub mandelbrot: usize,
    /// Mandelbrot iterations.
    pub iters: i32,
    /// Life lattice edge.
    pub life: usize,
    /// Life steps per run.
    pub life_steps: usize,
    /// f32 elements summed.
    pub reduce: usize,
    /// Bytes per copy between devices.
    pub copy_bytes: usize,
    /// Bytes of f32 all-reduced through NCCL.
    pub all_reduce_bytes: usize,
}

impl Sizes {
    /// The sizes.
    pub const FULL: Sizes = Sizes {
        sgemm: 16384,
        mandelbrot: 16384,
        iters: 256,
        life: 8192,
        life_steps: 100,
        reduce: 1 << 31,
        copy_bytes: 1 << 30,
        all_reduce_bytes: 1 << 30,
    };
}

/// Median of `samples` wall-clock runs of `run` (after one warm-up), each
/// divided by `per_run` (the repetitions one run queues), in ms.
fn wall_ms(samples: usize, per_run: usize, mut run: impl FnMut() -> Result<()>) -> Result<f64> {
    run()?;
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let (r, ms) = cpu_time(&mut run);
        r?;
        times.push((ms / per_run as f64) as f32);
    }
    Ok(f64::from(median(&mut times)))
}

/// The record of `kernel` on `count` devices, with its speedup against the
/// one-device time `one_ms` (the first row of each workload is the one
/// device's own).
#[allow(clippy::too_many_arguments)]
fn scaling_record(
    kernel: &str,
    size: &str,
    count: usize,
    ms: f64,
    metric: &str,
    value: f64,
    one_ms: f64,
    check: Check,
) -> BenchRecord {
    BenchRecord::new(
        format!(
            "{kernel} on {count} GPU{}",
            if count == 1 { "" } else { "s" }
        ),
        size,
        ms,
        metric,
        value,
        check,
    )
    .against(format!("{kernel} on 1 GPU (speedup)"), one_ms / ms)
}

/// The device names of `gpus`, for the bench's device line.
pub fn device_line(gpus: &[&Gpu]) -> String {
    gpus.iter()
        .map(|g| g.label())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every scaling row and the copy rows, on `gpus` (at least one).
pub fn bench(gpus: &[&Gpu], sizes: &Sizes, records: &mut Vec<BenchRecord>) -> Result<()> {
    if gpus.is_empty() {
        return Err(Error::invalid("bench --multi", "no devices"));
    }
    let parts: [(&str, Part); 6] = [
        ("sgemm", sgemm),
        ("mandelbrot", mandelbrot),
        ("life", life),
        ("reduce", reduce),
        ("copy", copies),
        ("nccl all-reduce", nccl_all_reduce),
    ];
    for (name, part) in parts {
        let (result, ms) = cpu_time(|| part(gpus, sizes, records));
        result?;
        eprintln!("bench --multi {name}: done in {:.1} s", ms / 1e3);
    }
    Ok(())
}

type Part = fn(&[&Gpu], &Sizes, &mut Vec<BenchRecord>) -> Result<()>;

fn sgemm(gpus: &[&Gpu], sizes: &Sizes, records: &mut Vec<BenchRecord>) -> Result<()> {
    let n = sizes.sgemm;
    let mut rng = Rng::new(15);
    let a = Array2::from_shape_simple_fn((n, n), || rng.uniform() as f32 - 0.5);
    let b = Array2::from_shape_simple_fn((n, n), || rng.uniform() as f32 - 0.5);
    let flop = 2.0 * (n as f64).powi(3);
    let size = format!("{n}³ f32");
    let mut one: Option<(f64, Array2<f32>)> = None;
    for count in 1..=gpus.len() {
        let mut bands = MatmulBands::upload(&gpus[..count], a.view(), b.view())?;
        let ms = wall_ms(3, 1, || bands.run(1))?;
        let c = bands.download()?;
        drop(bands);
        // Against the CPU: the rows at both ends of every band, in f64.
        let rows = crate::multi_gpu::split_rows("bench", n, count)?;
        let sampled: Vec<usize> = rows.iter().flat_map(|r| [r.start, r.end - 1]).collect();
        let reference = MatmulReference::new(a.select(Axis(0), &sampled).view(), b.view())?;
        let got = reference.check(c.select(Axis(0), &sampled).view())?;
        let mut check = if got.passed() {
            Check::Pass(format!(
                "{} sampled rows within the √k bound (worst {:.3} of it)",
                sampled.len(),
                got.worst_ratio
            ))
        } else {
            Check::Fail(format!(
                "sampled row {}: error {:.2e} is {:.2} of the √k bound",
                sampled[got.worst_at.0], got.max_abs_error, got.worst_ratio
            ))
        };
        let one_ms = match &one {
            None => ms,
            Some((one_ms, c1)) => {
                if let (Check::Pass(text), Some(d)) = (&check, max_rel_difference(&c, c1)) {
                    check = Check::Pass(format!("{text}; max rel. diff. to 1 GPU {d:.1e}"));
                }
                *one_ms
            }
        };
        records.push(scaling_record(
            "multi SGEMM",
            &size,
            count,
            ms,
            "GFLOP/s",
            flop / (ms * 1e-3) / 1e9,
            one_ms,
            check,
        ));
        if one.is_none() {
            one = Some((ms, c));
        }
    }
    Ok(())
}

/// The largest `|x − y| / max(|y|, 1e-3)` between two products.
fn max_rel_difference(x: &Array2<f32>, y: &Array2<f32>) -> Option<f64> {
    (x.dim() == y.dim()).then(|| {
        x.iter().zip(y.iter()).fold(0f64, |m, (&p, &q)| {
            m.max((f64::from(p) - f64::from(q)).abs() / f64::from(q.abs()).max(1e-3))
        })
    })
}

fn mandelbrot(gpus: &[&Gpu], sizes: &Sizes, records: &mut Vec<BenchRecord>) -> Result<()> {
    let p = MandelbrotParams {
        breadth: sizes.mandelbrot,
        max_iters: sizes.iters,
        ..MandelbrotParams::default()
    };
    let lattice = p.lattice();
    let n = p.breadth;
    let size = format!("{n}² × {}", p.max_iters);
    let reps = 10;
    let mut one: Option<(f64, Array2<f32>)> = None;
    for count in 1..=gpus.len() {
        let mut bands =
            MandelbrotBands::upload(&gpus[..count], lattice.view(), p.max_iters, p.upper_bound)?;
        let ms = wall_ms(3, reps, || bands.run(reps))?;
        let graph = bands.download()?;
        drop(bands);
        // Against the CPU: every 1024th row, point by point.
        let mut check = Check::Pass(format!("every {}th row identical to CPU", 1024));
        for r in (0..n).step_by(1024) {
            let c_im = lattice[n - 1 - r];
            for (c, &got) in graph.row(r).iter().enumerate() {
                let want = crate::mandelbrot::point_cpu(
                    lattice[c],
                    c_im,
                    p.max_iters,
                    p.upper_bound * p.upper_bound,
                );
                if got != want {
                    check = Check::Fail(format!("({r}, {c}) is {got}, the CPU's {want}"));
                }
            }
        }
        let one_ms = match &one {
            None => ms,
            Some((one_ms, g1)) => {
                if let Some(d) = first_difference(graph.view(), g1.view()) {
                    check = Check::Fail(format!("differs from 1 GPU's graph at {d}"));
                } else if let Check::Pass(text) = &check {
                    check = Check::Pass(format!("{text}; identical to 1 GPU's graph"));
                }
                *one_ms
            }
        };
        let points = (n * n) as f64;
        records.push(scaling_record(
            "multi Mandelbrot",
            &size,
            count,
            ms,
            "Mpoints/s",
            points / (ms * 1e-3) / 1e6,
            one_ms,
            check,
        ));
        if one.is_none() {
            one = Some((ms, graph));
        }
    }
    Ok(())
}

fn life(gpus: &[&Gpu], sizes: &Sizes, records: &mut Vec<BenchRecord>) -> Result<()> {
    let (n, steps) = (sizes.life, sizes.life_steps);
    let start = random_lattice(n, 0.25, &mut Rng::new(3));
    let size = format!("{n}² × {steps} steps");
    let samples = 3;
    let mut one: Option<(f64, Array2<i32>)> = None;
    // Every count runs the same steps: one step, then the warm-up and the
    // timed runs of `steps` each; the CPU's lattice after all of them.
    let total_steps = 1 + (samples + 1) * steps;
    let mut cpu_last: Option<Array2<i32>> = None;
    for count in 1..=gpus.len() {
        let mut bands = LifeBands::upload(&gpus[..count], start.view(), None)?;
        // One step first, against the CPU's step.
        bands.run(1)?;
        let first = bands.download()?;
        let mut check = if first == life_step_cpu(start.view())? {
            Check::Pass("step 1 identical to CPU".into())
        } else {
            Check::Fail("step 1 differs from the CPU's".into())
        };
        let ms = wall_ms(samples, 1, || bands.run(steps))?;
        let path = bands.path();
        let last = bands.download()?;
        drop(bands);
        // The final lattice of the timed runs, against the CPU's.
        let want = match cpu_last.take() {
            Some(l) => l,
            None => life_cpu(start.view(), total_steps)?,
        };
        if last != want {
            check = Check::Fail(format!(
                "after {total_steps} steps differs from the CPU's lattice"
            ));
        } else if let Check::Pass(text) = &check {
            check = Check::Pass(format!(
                "{text}; after {total_steps} steps identical to CPU; halos {}",
                path.map_or("none".into(), |p| p.to_string())
            ));
        }
        cpu_last = Some(want);
        let one_ms = match &one {
            None => ms,
            Some((one_ms, _)) => *one_ms,
        };
        let cells = (n * n * steps) as f64;
        records.push(scaling_record(
            "multi Life (conway_fast + halos)",
            &size,
            count,
            ms,
            "Gcells/s",
            cells / (ms * 1e-3) / 1e9,
            one_ms,
            check,
        ));
        if one.is_none() {
            one = Some((ms, last));
        }
    }
    Ok(())
}

/// Elements of the pattern the reduction's input repeats.
const PATTERN: usize = 1 << 24;

fn reduce(gpus: &[&Gpu], sizes: &Sizes, records: &mut Vec<BenchRecord>) -> Result<()> {
    const K: &str = "bench --multi reduce";
    let total = sizes.reduce;
    let mut rng = Rng::new(31);
    let pattern: Vec<f32> = (0..PATTERN.min(total))
        .map(|_| rng.uniform() as f32 - 0.25)
        .collect();
    let size = format!("2^{} f32 resident", total.trailing_zeros());
    let reps = 20;
    let mut one_ms = None;
    for count in 1..=gpus.len() {
        let shares = crate::multi_gpu::split_rows(K, total, count)?;
        // Each device's share: the pattern repeated, filled by device
        // copies; its exact sum from the pattern's.
        let exact = |len: usize| accurate_sum(pattern[..len].iter().map(|&x| f64::from(x)));
        let abs = |len: usize| accurate_sum(pattern[..len].iter().map(|&x| f64::from(x.abs())));
        let (full, full_abs) = (exact(pattern.len()), abs(pattern.len()));
        let mut buffers = Vec::with_capacity(count);
        let (mut expected, mut sum_abs) = (0.0, 0.0);
        for (gpu, share) in gpus[..count].iter().zip(&shares) {
            let source = gpu.to_device(&pattern)?;
            // SAFETY: every element is written by the copies below before any read.
            let mut buffer = unsafe { gpu.uninitialized::<f32>(share.len()) }?;
            let mut at = 0;
            while at < share.len() {
                let len = pattern.len().min(share.len() - at);
                buffer
                    .index_mut(at..at + len)
                    .copy_from_device(&source.index(..len))?;
                at += len;
            }
            let (repeats, rest) = (share.len() / pattern.len(), share.len() % pattern.len());
            expected += repeats as f64 * full + exact(rest);
            sum_abs += repeats as f64 * full_abs + abs(rest);
            buffers.push(buffer);
        }
        let parts: Vec<(&Gpu, &DeviceSlice<f32>)> = gpus[..count]
            .iter()
            .zip(&buffers)
            .map(|(g, b)| (*g, &**b))
            .collect();
        let mut scratch = ReduceScratches::<f32>::new(&gpus[..count])?;
        let mut got = 0f32;
        let ms = wall_ms(5, reps, || {
            got = scratch.reduce::<Sum>(&parts[..], None, reps)?;
            Ok(())
        })?;
        // Exact: each device's share in the order of its own launch, the
        // host's fold in device order (a dropped share, a wrong launch
        // shape, an element read twice all change the bits); and within
        // the bound for that order of the accurate sum.
        let host_shares: Vec<Vec<f32>> = shares
            .iter()
            .map(|share| pattern.iter().copied().cycle().take(share.len()).collect())
            .collect();
        let parts_in_order: Vec<(&Gpu, &[f32])> = gpus[..count]
            .iter()
            .zip(&host_shares)
            .map(|(g, h)| (*g, h.as_slice()))
            .collect();
        let in_order = reduce_in_devices_order::<Sum, f32>(&parts_in_order, None)?;
        drop(host_shares);
        let mut threads = usize::MAX;
        for (gpu, share) in gpus[..count].iter().zip(&shares) {
            let (grid, block) = gpu.reduce_launch_shape::<Sum, f32>(share.len())?;
            threads = threads.min(count * grid as usize * block as usize);
        }
        let tolerance = float_sum_tolerance(total, threads, sum_abs, f64::from(f32::EPSILON) / 2.0);
        let err = (f64::from(got) - expected).abs();
        let check = if got != in_order {
            Check::Fail(format!("{got} is not {in_order}, the devices' order's sum"))
        } else if err <= tolerance {
            Check::Pass(format!(
                "equal to the devices' order; error {err:.3e} within its bound {tolerance:.3e}"
            ))
        } else {
            Check::Fail(format!(
                "{got} is {err:.3e} from {expected}, bound {tolerance:.3e}"
            ))
        };
        let one = *one_ms.get_or_insert(ms);
        records.push(scaling_record(
            "multi reduce_sum_f32",
            &size,
            count,
            ms,
            "GB/s read",
            gb_per_s(total * 4, ms as f32),
            one,
            check,
        ));
    }
    Ok(())
}

fn copies(gpus: &[&Gpu], sizes: &Sizes, records: &mut Vec<BenchRecord>) -> Result<()> {
    let bytes = sizes.copy_bytes;
    let n = bytes / 4;
    // Between the first two devices, or a device and itself.
    let (a, b) = (gpus[0], *gpus.get(1).unwrap_or(&gpus[0]));
    let one = device_copy_gbps(a, bytes, 10)? / 2.0;
    records.push(BenchRecord::new(
        "device copy (one GPU)",
        format!("{} MiB", bytes >> 20),
        bytes as f64 / (one * 1e9) * 1e3,
        "GB/s copied",
        one,
        Check::Pass("every word copied back equals the source".into()),
    ));
    let source: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let src = a.to_device(&source)?;
    let mut dst = b.zeroed::<u32>(n)?;
    for path in [CopyPath::Peer, CopyPath::Staged] {
        let label = format!("copy {} → {} ({path})", a.label(), b.label());
        let ms = match wall_ms(5, 1, || {
            copy_between(a, &src, b, &mut dst, Some(path)).map(|_| ())
        }) {
            Ok(ms) => ms,
            Err(e @ Error::InvalidInput { .. }) => {
                records.push(BenchRecord::new(
                    label,
                    format!("{} MiB", bytes >> 20),
                    0.0,
                    "GB/s copied",
                    0.0,
                    Check::Skipped(e.to_string()),
                ));
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut back = vec![0u32; n];
        dst.copy_to(&mut back)?;
        let check = match back.iter().zip(&source).position(|(x, y)| x != y) {
            None => Check::Pass("every word equals the source".into()),
            Some(i) => Check::Fail(format!("word {i} is {:#x}, not {:#x}", back[i], source[i])),
        };
        dst.set_zero()?;
        let gbps = bytes as f64 / (ms * 1e-3) / 1e9;
        records.push(
            BenchRecord::new(
                label,
                format!("{} MiB", bytes >> 20),
                ms,
                "GB/s copied",
                gbps,
                check,
            )
            .against("device copy (one GPU)", gbps / one),
        );
    }
    Ok(())
}

/// NCCL's all-reduce (sum of f32, out of place) on the distinct devices of
/// `gpus` (a device listed twice is dropped: NCCL needs one per rank), one
/// thread per rank: the time of one all-reduce (the slowest rank's median
/// of back-to-back runs), its algorithm bandwidth (bytes / time) and bus
/// bandwidth (× 2(n − 1)/n, as nccl-tests and `torch.distributed` report
/// it). Rank `r` sends `r + 1` everywhere: every received element must be
/// n(n + 1)/2, exactly, checked at both ends and the middle on every rank.
fn nccl_all_reduce(gpus: &[&Gpu], sizes: &Sizes, records: &mut Vec<BenchRecord>) -> Result<()> {
    use crate::nccl::{Communicator, ReduceOp};
    const K: &str = "bench --multi nccl";
    let mut distinct: Vec<&Gpu> = Vec::new();
    for g in gpus {
        if !distinct.iter().any(|d| d.same_device(g)) {
            distinct.push(g);
        }
    }
    let ranks = distinct.len();
    let n = sizes.all_reduce_bytes / 4;
    let reps = 20;
    let comms = match Communicator::all_devices(&distinct) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bench --multi: no NCCL rows: {e}");
            return Ok(());
        }
    };
    let items: Vec<_> = distinct.iter().zip(comms).collect();
    let per_rank = crate::multi_gpu::run_each(
        K,
        &crate::multi_gpu::labels(&distinct),
        items,
        |_, (gpu, comm), _| {
            let (r, stream) = (comm.rank(), gpu.stream());
            let mut send = gpu.zeroed::<f32>(n)?;
            send.set_32(((r + 1) as f32).to_bits())?;
            let mut recv = gpu.zeroed::<f32>(n)?;
            let mut times = Vec::new();
            for _ in 0..4 {
                let (done, ms) = cpu_time(|| -> Result<()> {
                    for _ in 0..reps {
                        comm.all_reduce(&send, &mut recv, ReduceOp::Sum, stream)?;
                    }
                    comm.synchronize(stream)
                });
                done?;
                times.push((ms / f64::from(reps)) as f32);
            }
            times.remove(0); // the warm-up
            let want = (ranks * (ranks + 1) / 2) as f32;
            let mut probe = [0f32; 1];
            let mut wrong = None;
            for at in [0, n / 2, n - 1] {
                recv.index(at..at + 1).copy_to(&mut probe)?;
                if probe[0] != want {
                    wrong = Some(format!(
                        "rank {r}: element {at} is {}, want {want}",
                        probe[0]
                    ));
                }
            }
            Ok((f64::from(median(&mut times)), wrong))
        },
    )?;
    let ms = per_rank.iter().map(|p| p.0).fold(0.0, f64::max);
    let alg = gb_per_s(sizes.all_reduce_bytes, ms as f32);
    let bus = alg * 2.0 * (ranks as f64 - 1.0) / ranks as f64;
    let check = match per_rank.iter().find_map(|p| p.1.clone()) {
        Some(wrong) => Check::Fail(wrong),
        None => Check::Pass(format!(
            "every rank's sampled elements = n(n+1)/2 exactly; algorithm bandwidth {alg:.1} GB/s"
        )),
    };
    records.push(BenchRecord::new(
        format!(
            "NCCL all_reduce sum f32 on {ranks} GPU{}",
            if ranks == 1 { "" } else { "s" }
        ),
        format!("{} MiB", sizes.all_reduce_bytes >> 20),
        ms,
        "GB/s bus",
        bus,
        check,
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BuiltinSimulator;

    /// The NCCL all-reduce row on two simulated devices (and device 0
    /// listed again, dropped): one record, its check passed, and a wrong
    /// device count would give another sum.
    #[test]
    fn the_nccl_all_reduce_row_checks_its_sums() -> Result<()> {
        let (a, b) = (Gpu::simulated_device(0)?, Gpu::simulated_device(1)?);
        let sizes = Sizes {
            all_reduce_bytes: 4096,
            ..Sizes::FULL
        };
        let mut records = Vec::new();
        nccl_all_reduce(&[&a, &b, &a], &sizes, &mut records)?;
        assert_eq!(records.len(), 1);
        let r = &records[0];
        assert_eq!(r.kernel, "NCCL all_reduce sum f32 on 2 GPUs");
        assert!(matches!(r.check, Check::Pass(_)), "{:?}", r.check);
        Ok(())
    }
}
