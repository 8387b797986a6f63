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
//!
//! On two devices or more, SGEMM, Life and the reduction also run on NCCL
//! (`Backend::Nccl`'s per-rank code, resident on the devices, one thread
//! per rank): SGEMM's bands all-gathered into every device after each
//! product, Life's halos exchanged by grouped sends and receives every
//! step, the devices' partial sums all-reduced after each reduction. Their
//! speedups are against the same one-device time as the peer rows. Then a
//! job of rank processes, one GPU each (`multi_gpu::ranks`, the path that
//! would run with one process per node), times SGEMM and the all-reduce
//! twice: on NCCL's default transports and on its socket transport
//! (`NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo`, as
//! between nodes).
use std::process::{Command, ExitCode};

use ndarray::{Array2, ArrayView2, Axis};

use super::{BenchRecord, Check, cpu_time};
use crate::bench::{device_copy_gbps, gb_per_s};
use crate::life::{life_cpu, life_step_cpu, random_lattice};
use crate::mandelbrot::{MandelbrotParams, first_difference};
use crate::matrices::MatmulReference;
use crate::memory::DeviceSlice;
use crate::multi_gpu::life::{LifeBands, LifeRank};
use crate::multi_gpu::mandelbrot::MandelbrotBands;
use crate::multi_gpu::matmul::{MatmulBands, MatmulRank};
use crate::multi_gpu::ranks::{Launch, RankEnv, launch_job};
use crate::multi_gpu::reduce::{ReduceScratches, reduce_in_devices_order, reduce_resident_rank};
use crate::multi_gpu::{Backend, Crew, labels, run_each};
use crate::nccl::{Communicator, ReduceOp};
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

/// The record of `kernel` on `count` devices with `backend` (", NCCL"
/// after the count for NCCL rows), with its speedup against the one-device
/// time `one_ms` (the first row of each workload is the one device's own).
#[allow(clippy::too_many_arguments)]
fn scaling_record(
    kernel: &str,
    size: &str,
    count: usize,
    backend: Backend,
    ms: f64,
    metric: &str,
    value: f64,
    one_ms: f64,
    check: Check,
) -> BenchRecord {
    BenchRecord::new(
        format!(
            "{kernel} on {count} GPU{}{}",
            if count == 1 { "" } else { "s" },
            if backend == Backend::Nccl {
                ", NCCL"
            } else {
                ""
            }
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

/// Every scaling row, the copy rows, the NCCL all-reduce and the rank
/// processes' rows, on `gpus` (at least one); `CUDA_KERNELS_BENCH_ONLY`
/// may name some of the parts `sgemm`, `mandelbrot`, `life`, `reduce`,
/// `copy`, `nccl` and `ranks`.
pub fn bench(gpus: &[&Gpu], sizes: &Sizes, records: &mut Vec<BenchRecord>) -> Result<()> {
    if gpus.is_empty() {
        return Err(Error::invalid("bench --multi", "no devices"));
    }
    let parts: [(&str, Part); 7] = [
        ("sgemm", sgemm),
        ("mandelbrot", mandelbrot),
        ("life", life),
        ("reduce", reduce),
        ("copy", copies),
        ("nccl", nccl_all_reduce),
        ("ranks", rank_processes),
    ];
    for (name, part) in parts {
        if !super::bench_selected(name) {
            continue;
        }
        let (result, ms) = cpu_time(|| part(gpus, sizes, records));
        result?;
        eprintln!("bench --multi {name}: done in {:.1} s", ms / 1e3);
    }
    Ok(())
}

type Part = fn(&[&Gpu], &Sizes, &mut Vec<BenchRecord>) -> Result<()>;

/// The distinct devices of `gpus`, in order (NCCL needs one per rank).
fn distinct<'g>(gpus: &[&'g Gpu]) -> Vec<&'g Gpu> {
    let mut out: Vec<&Gpu> = Vec::new();
    for g in gpus {
        if !out.iter().any(|d| d.same_device(g)) {
            out.push(g);
        }
    }
    out
}

/// An NCCL row's ranks in this process, one per device, each with its
/// communicator and the resident state `S` its upload made; every call runs
/// on one host thread per rank ([`run_each`]).
struct NcclRanks<'g, S> {
    gpus: Vec<&'g Gpu>,
    comms: Vec<Communicator>,
    states: Vec<S>,
}

impl<'g, S: Send> NcclRanks<'g, S> {
    /// Communicators over `gpus` and `upload`'s state on each rank; `None`
    /// (the reason printed) when a device is listed twice or NCCL cannot
    /// be loaded: the NCCL rows are left out then.
    fn upload(
        gpus: &[&'g Gpu],
        upload: impl Fn(&Communicator, &Gpu) -> Result<S> + Sync,
    ) -> Result<Option<Self>> {
        if distinct(gpus).len() < gpus.len() {
            eprintln!(
                "bench --multi: no NCCL row on [{}]: a device is listed twice",
                device_line(gpus)
            );
            return Ok(None);
        }
        let mut comms = match Communicator::all_devices(gpus) {
            Ok(c) => c,
            Err(e @ Error::LibraryMissing { .. }) => {
                eprintln!("bench --multi: no NCCL rows: {e}");
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let items: Vec<_> = gpus.iter().zip(comms.iter_mut()).collect();
        let states = run_each(K_NCCL, &labels(gpus), items, |_, (gpu, comm), _| {
            upload(comm, gpu)
        })?;
        Ok(Some(Self {
            gpus: gpus.to_vec(),
            comms,
            states,
        }))
    }

    /// `work` on every rank at once; the results in rank order.
    fn each<R: Send>(
        &mut self,
        work: impl Fn(&Communicator, &Gpu, &mut S, &Crew) -> Result<R> + Sync,
    ) -> Result<Vec<R>> {
        let items: Vec<_> = self
            .gpus
            .iter()
            .zip(self.comms.iter_mut())
            .zip(self.states.iter_mut())
            .collect();
        run_each(
            K_NCCL,
            &labels(&self.gpus),
            items,
            |_, ((gpu, comm), state), crew| work(comm, gpu, state, crew),
        )
    }
}

/// The job name of the NCCL rows' threads.
const K_NCCL: &str = "bench --multi nccl";

/// SGEMM's operands, the same in every process: `n`×`n`, uniform in ±0.5.
fn sgemm_operands(n: usize) -> (Array2<f32>, Array2<f32>) {
    let mut rng = Rng::new(15);
    let a = Array2::from_shape_simple_fn((n, n), || rng.uniform() as f32 - 0.5);
    let b = Array2::from_shape_simple_fn((n, n), || rng.uniform() as f32 - 0.5);
    (a, b)
}

/// `c = a · b` checked against the CPU (in f64) on the rows at both ends
/// of every band of `bands` bands.
fn sgemm_sampled_check(
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
    c: &Array2<f32>,
    bands: usize,
) -> Result<Check> {
    let rows = crate::multi_gpu::split_rows("bench", a.nrows(), bands)?;
    let sampled: Vec<usize> = rows.iter().flat_map(|r| [r.start, r.end - 1]).collect();
    let reference = MatmulReference::new(a.select(Axis(0), &sampled).view(), b)?;
    let got = reference.check(c.select(Axis(0), &sampled).view())?;
    Ok(if got.passed() {
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
    })
}

fn sgemm(gpus: &[&Gpu], sizes: &Sizes, records: &mut Vec<BenchRecord>) -> Result<()> {
    let n = sizes.sgemm;
    let (a, b) = sgemm_operands(n);
    let flop = 2.0 * (n as f64).powi(3);
    let size = format!("{n}³ f32");
    let mut one: Option<(f64, Array2<f32>)> = None;
    for count in 1..=gpus.len() {
        let mut bands = MatmulBands::upload(&gpus[..count], a.view(), b.view())?;
        let ms = wall_ms(3, 1, || bands.run(1))?;
        let c = bands.download()?;
        drop(bands);
        let mut check = sgemm_sampled_check(a.view(), b.view(), &c, count)?;
        let one_ms = match &one {
            None => ms,
            Some((one_ms, c1)) => {
                if let (Check::Pass(text), Some(d)) = (&check, max_rel_difference(&c, c1)) {
                    check = Check::Pass(format!("{text}; max rel. diff. to 1 GPU {d:.1e}"));
                }
                *one_ms
            }
        };
        let peer_check = check.clone();
        let gflops = |ms: f64| flop / (ms * 1e-3) / 1e9;
        records.push(scaling_record(
            "multi SGEMM",
            &size,
            count,
            Backend::PeerCopies,
            ms,
            "GFLOP/s",
            gflops(ms),
            one_ms,
            check,
        ));
        // NCCL: the same bands, each product followed by the all-gather of
        // C into every device; every rank's C must equal the peer run's.
        if count > 1
            && let Some(mut ranks) = NcclRanks::upload(&gpus[..count], |comm, gpu| {
                MatmulRank::upload(comm, gpu, a.view(), b.view())
            })?
        {
            let ms = wall_ms(3, 1, || {
                ranks
                    .each(|comm, gpu, rank, _| rank.run(comm, gpu, 1))
                    .map(drop)
            })?;
            let cs = ranks.each(|_, _, rank, _| rank.download())?;
            drop(ranks);
            let check = match (cs.iter().position(|x| *x != c), &peer_check) {
                (Some(r), _) => Check::Fail(format!("rank {r}'s C differs from the peer run's")),
                (None, Check::Pass(text)) => Check::Pass(format!(
                    "every rank's C equals the peer run's, whose {text}"
                )),
                (None, _) => Check::Fail("the peer run's C failed its check".into()),
            };
            records.push(scaling_record(
                "multi SGEMM",
                &size,
                count,
                Backend::Nccl,
                ms,
                "GFLOP/s",
                gflops(ms),
                one_ms,
                check,
            ));
        }
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
            Backend::PeerCopies,
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
    let mut one_ms = None;
    // Every count and backend runs the same steps: one step, then the
    // warm-up and the timed runs of `steps` each; the CPU's lattice after
    // all of them.
    let total_steps = 1 + (samples + 1) * steps;
    let step_one = life_step_cpu(start.view())?;
    let mut cpu_last: Option<Array2<i32>> = None;
    let cells = (n * n * steps) as f64;
    for count in 1..=gpus.len() {
        let mut bands = LifeBands::upload(&gpus[..count], start.view(), None)?;
        // One step first, against the CPU's step.
        bands.run(1)?;
        let first = bands.download()?;
        let ms = wall_ms(samples, 1, || bands.run(steps))?;
        let path = bands.path();
        let last = bands.download()?;
        drop(bands);
        // The final lattice of the timed runs, against the CPU's.
        let want = match cpu_last.take() {
            Some(l) => l,
            None => life_cpu(start.view(), total_steps)?,
        };
        let halos = format!("halos {}", path.map_or("none".into(), |p| p.to_string()));
        let check = life_check(&[first], &step_one, &[last], &want, total_steps, &halos);
        let one = *one_ms.get_or_insert(ms);
        records.push(scaling_record(
            "multi Life (conway_fast + halos)",
            &size,
            count,
            Backend::PeerCopies,
            ms,
            "Gcells/s",
            cells / (ms * 1e-3) / 1e9,
            one,
            check,
        ));
        // NCCL: the same bands, the halos exchanged by grouped sends and
        // receives every step, the interior beside them.
        if count > 1
            && let Some(mut ranks) = NcclRanks::upload(&gpus[..count], |comm, gpu| {
                LifeRank::upload(comm, gpu, start.view())
            })?
        {
            ranks.each(|comm, gpu, rank, crew| rank.run(comm, gpu, 1, Some(crew)))?;
            let firsts = ranks.each(|comm, gpu, rank, _| rank.download(comm, gpu))?;
            let ms = wall_ms(samples, 1, || {
                ranks
                    .each(|comm, gpu, rank, crew| rank.run(comm, gpu, steps, Some(crew)))
                    .map(drop)
            })?;
            let lasts = ranks.each(|comm, gpu, rank, _| rank.download(comm, gpu))?;
            drop(ranks);
            let check = life_check(
                &firsts,
                &step_one,
                &lasts,
                &want,
                total_steps,
                "halos by NCCL send/recv",
            );
            records.push(scaling_record(
                "multi Life (conway_fast + halos)",
                &size,
                count,
                Backend::Nccl,
                ms,
                "Gcells/s",
                cells / (ms * 1e-3) / 1e9,
                one,
                check,
            ));
        }
        cpu_last = Some(want);
    }
    Ok(())
}

/// Life's check: every lattice of `firsts` (one per rank, or the gathered
/// one) equals the CPU's first step, every one of `lasts` the CPU's
/// lattice after `total_steps`.
fn life_check(
    firsts: &[Array2<i32>],
    step_one: &Array2<i32>,
    lasts: &[Array2<i32>],
    want: &Array2<i32>,
    total_steps: usize,
    how: &str,
) -> Check {
    let on_rank = |r: usize, of: &[Array2<i32>]| {
        if of.len() > 1 {
            format!(" on rank {r}")
        } else {
            String::new()
        }
    };
    if let Some(r) = firsts.iter().position(|f| f != step_one) {
        Check::Fail(format!(
            "step 1 differs from the CPU's{}",
            on_rank(r, firsts)
        ))
    } else if let Some(r) = lasts.iter().position(|l| l != want) {
        Check::Fail(format!(
            "after {total_steps} steps differs from the CPU's lattice{}",
            on_rank(r, lasts)
        ))
    } else {
        Check::Pass(format!(
            "step 1 identical to CPU; after {total_steps} steps identical to CPU; {how}"
        ))
    }
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
        // A total `got`: equal to the devices' order's sum when `exact`,
        // and within the bound of the accurate sum; `equal` says which.
        let sum_check = |got: f32, exact: bool, equal: &str| {
            let err = (f64::from(got) - expected).abs();
            if exact && got != in_order {
                Check::Fail(format!("{got} is not {in_order}, the devices' order's sum"))
            } else if err <= tolerance {
                Check::Pass(format!(
                    "{equal}; error {err:.3e} within its bound {tolerance:.3e}"
                ))
            } else {
                Check::Fail(format!(
                    "{got} is {err:.3e} from {expected}, bound {tolerance:.3e}"
                ))
            }
        };
        let check = sum_check(got, true, "equal to the devices' order");
        let one = *one_ms.get_or_insert(ms);
        records.push(scaling_record(
            "multi reduce_sum_f32",
            &size,
            count,
            Backend::PeerCopies,
            ms,
            "GB/s read",
            gb_per_s(total * 4, ms as f32),
            one,
            check,
        ));
        // NCCL: each device's reduction into its device element, then an
        // all-reduce of those elements, every repetition.
        if count > 1
            && let Some(mut ranks) =
                NcclRanks::upload(&gpus[..count], |_, gpu| gpu.reduce_scratch::<f32>())?
        {
            let mut totals = Vec::new();
            let ms = wall_ms(5, reps, || {
                totals = ranks.each(|comm, gpu, scratch, _| {
                    reduce_resident_rank::<Sum, f32>(
                        comm,
                        gpu,
                        &buffers[comm.rank()],
                        scratch,
                        reps,
                    )
                })?;
                Ok(())
            })?;
            drop(ranks);
            // Two ranks' sum is one addition, exactly the host's fold;
            // more ranks add in NCCL's order, within the bound.
            let check = if totals.iter().any(|&t| t != totals[0]) {
                Check::Fail(format!("the ranks' totals differ: {totals:?}"))
            } else if count == 2 {
                sum_check(
                    totals[0],
                    true,
                    "every rank's total equal to the devices' order",
                )
            } else {
                sum_check(totals[0], false, "every rank's total equal")
            };
            records.push(scaling_record(
                "multi reduce_sum_f32",
                &size,
                count,
                Backend::Nccl,
                ms,
                "GB/s read",
                gb_per_s(total * 4, ms as f32),
                one,
                check,
            ));
        }
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
/// thread per rank ([`all_reduce_rank`]).
fn nccl_all_reduce(gpus: &[&Gpu], sizes: &Sizes, records: &mut Vec<BenchRecord>) -> Result<()> {
    let gpus = distinct(gpus);
    let n = sizes.all_reduce_bytes / 4;
    let Some(mut ranks) = NcclRanks::upload(&gpus, |_, _| Ok(()))? else {
        return Ok(());
    };
    let per_rank = ranks.each(|comm, gpu, _, _| all_reduce_rank(comm, gpu, n, 20))?;
    let ms = per_rank.iter().map(|p| p.0).fold(0.0, f64::max);
    let wrong = per_rank.into_iter().find_map(|p| p.1);
    records.push(all_reduce_record(
        gpus.len(),
        "",
        sizes.all_reduce_bytes,
        ms,
        wrong,
    ));
    Ok(())
}

/// One rank's part of the all-reduce row: `n` f32 all-reduced (sum, out
/// of place) back to back on `gpu`'s stream, `reps` at a time, four times
/// (the first a warm-up); the median time of one all-reduce, and what is
/// wrong with the result, if anything. Rank `r` sends `r + 1` everywhere:
/// every received element must be n(n + 1)/2, exactly, checked at both
/// ends and the middle.
fn all_reduce_rank(
    comm: &Communicator,
    gpu: &Gpu,
    n: usize,
    reps: usize,
) -> Result<(f64, Option<String>)> {
    let (r, ranks, stream) = (comm.rank(), comm.ranks(), gpu.stream());
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
        times.push((ms / reps as f64) as f32);
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
}

/// The all-reduce row of `ranks` ranks (`how`: how they run, after the
/// count), from the slowest rank's time `ms`: its algorithm bandwidth
/// (bytes / time) in the check and its bus bandwidth (× 2(n − 1)/n, as
/// nccl-tests and `torch.distributed` report it; 0 for one rank) as the
/// metric.
fn all_reduce_record(
    ranks: usize,
    how: &str,
    bytes: usize,
    ms: f64,
    wrong: Option<String>,
) -> BenchRecord {
    let alg = gb_per_s(bytes, ms as f32);
    let bus = alg * 2.0 * (ranks as f64 - 1.0) / ranks as f64;
    let check = match wrong {
        Some(wrong) => Check::Fail(wrong),
        None => Check::Pass(format!(
            "every rank's sampled elements = n(n+1)/2 exactly; algorithm bandwidth {alg:.1} GB/s"
        )),
    };
    BenchRecord::new(
        format!(
            "NCCL all_reduce sum f32 on {ranks} GPU{}{how}",
            if ranks == 1 { "" } else { "s" }
        ),
        format!("{} MiB", bytes >> 20),
        ms,
        "GB/s bus",
        bus,
        check,
    )
}

/// The environment of NCCL's socket transport on one machine (no peer
/// access, no shared memory, the loopback interface): what two nodes use.
const SOCKET_TRANSPORT: [(&str, &str); 3] = [
    ("NCCL_P2P_DISABLE", "1"),
    ("NCCL_SHM_DISABLE", "1"),
    ("NCCL_SOCKET_IFNAME", "lo"),
];

/// The line prefix of a record that a rank process prints for its launcher.
const RECORD_LINE: &str = "bench-record ";

/// A job of rank processes on the distinct devices of `gpus` (rank `r` on
/// device `r`; two or more), started twice, on NCCL's default transports
/// and on its socket transport: each process is this program's
/// `bench --multi` as a rank ([`rank_process`]), and rank 0's records come
/// back here. A rank that fails makes a failed row with the ranks' output.
fn rank_processes(gpus: &[&Gpu], _: &Sizes, records: &mut Vec<BenchRecord>) -> Result<()> {
    let ranks = distinct(gpus).len();
    if ranks < 2 {
        eprintln!("bench --multi: no rank-process rows: they need two devices or more");
        return Ok(());
    }
    let exe = std::env::current_exe().map_err(|source| Error::Io {
        what: "this program's path".into(),
        source,
    })?;
    for socket in [false, true] {
        let outcomes = launch_job(&Launch::new(ranks), false, |_| {
            let mut c = Command::new(&exe);
            c.args(["bench", "--multi"]);
            for (var, value) in SOCKET_TRANSPORT {
                if socket {
                    c.env(var, value);
                } else {
                    c.env_remove(var);
                }
            }
            c
        })?;
        if outcomes.iter().all(|o| o.succeeded) {
            for line in outcomes[0].output.lines() {
                if let Some(json) = line.strip_prefix(RECORD_LINE) {
                    records.push(serde_json::from_str(json).map_err(|e| {
                        Error::invalid(
                            "bench --multi ranks",
                            format!("rank 0's record {json:?}: {e}"),
                        )
                    })?);
                }
            }
        } else {
            let said: Vec<String> = outcomes
                .iter()
                .map(|o| format!("rank {} ({}): {}", o.rank, o.ended, o.output.trim()))
                .collect();
            records.push(BenchRecord::new(
                format!("{ranks} rank processes ({})", transport_name(socket)),
                "",
                0.0,
                "",
                0.0,
                Check::Fail(said.join("; ")),
            ));
        }
    }
    Ok(())
}

/// How the ranks' NCCL moves data: the socket transport when
/// [`SOCKET_TRANSPORT`]'s first two variables disable the others.
fn transport_name(socket: bool) -> &'static str {
    if socket {
        "NCCL socket transport"
    } else {
        "NCCL"
    }
}

/// Whether this process's environment selects NCCL's socket transport.
fn socket_transport_set() -> bool {
    SOCKET_TRANSPORT[..2]
        .iter()
        .all(|(var, value)| std::env::var(var).is_ok_and(|v| v == *value))
}

/// `bench --multi` started as rank `env.rank` of a job
/// ([`rank_processes`]): joins the job on device `env.rank` and runs
/// [`rank_rows`] at the bench's sizes; rank 0 prints the records for the
/// launcher.
pub fn rank_process(env: &RankEnv) -> Result<ExitCode> {
    let timeout = crate::nccl::default_timeout();
    let gpu = crate::rank_gpu(env.rank, false)?;
    let comm = Communicator::init_rank(&gpu, &env.id, env.rank, env.ranks, timeout)?;
    let records = rank_rows(&comm, &gpu, &Sizes::FULL, socket_transport_set())?;
    for record in records.iter().filter(|_| env.rank == 0) {
        let json = serde_json::to_string(record).map_err(|e| {
            Error::invalid("bench --multi ranks", format!("encoding a record: {e}"))
        })?;
        println!("{RECORD_LINE}{json}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The rows a rank of a job times, every rank together (rank 0's records
/// are the job's):
/// - SGEMM on the ranks (`MatmulRank`: each rank's band, then the
///   all-gather of C), the slowest rank's median, against one GPU's time
///   that rank 0 measures alone first; every rank checks the sampled rows
///   of its C against the CPU, and rank 0 its whole C against one GPU's,
///   bit for bit;
/// - the all-reduce ([`all_reduce_rank`]), the slowest rank's time.
///
/// A failed check on any rank is an error of that rank.
fn rank_rows(
    comm: &Communicator,
    gpu: &Gpu,
    sizes: &Sizes,
    socket: bool,
) -> Result<Vec<BenchRecord>> {
    const K: &str = "bench --multi ranks";
    let (rank, ranks) = (comm.rank(), comm.ranks());
    let how = format!(" in {ranks} rank processes, {}", transport_name(socket));
    let n = sizes.sgemm;
    let (a, b) = sgemm_operands(n);
    // One GPU's time and product, on rank 0 alone; the others wait in the
    // first `slowest`.
    let one = if rank == 0 {
        let mut bands = MatmulBands::upload(&[gpu], a.view(), b.view())?;
        let ms = wall_ms(3, 1, || bands.run(1))?;
        Some((ms, bands.download()?))
    } else {
        None
    };
    let one_ms = slowest(comm, gpu, one.as_ref().map_or(0.0, |o| o.0))?;
    let mut mine = MatmulRank::upload(comm, gpu, a.view(), b.view())?;
    let ms = wall_ms(3, 1, || mine.run(comm, gpu, 1))?;
    let ms = slowest(comm, gpu, ms)?;
    let c = mine.download()?;
    drop(mine);
    let mut check = sgemm_sampled_check(a.view(), b.view(), &c, ranks)?;
    if let (Some((_, c1)), Check::Pass(text)) = (&one, &check) {
        check = if *c1 == c {
            Check::Pass(format!("{text}; the whole equals one GPU's, bit for bit"))
        } else {
            Check::Fail("the whole differs from one GPU's product".into())
        };
    }
    if let Check::Fail(why) = &check {
        return Err(Error::invalid(K, format!("rank {rank}: SGEMM: {why}")));
    }
    let flop = 2.0 * (n as f64).powi(3);
    let mut records = vec![
        BenchRecord::new(
            format!("multi SGEMM{how}"),
            format!("{n}³ f32"),
            ms,
            "GFLOP/s",
            flop / (ms * 1e-3) / 1e9,
            check,
        )
        .against("multi SGEMM on 1 GPU (speedup)", one_ms / ms),
    ];
    // The socket transport moves a few GB/s: fewer repetitions.
    let reps = if socket { 3 } else { 20 };
    let (ms, wrong) = all_reduce_rank(comm, gpu, sizes.all_reduce_bytes / 4, reps)?;
    if let Some(wrong) = &wrong {
        return Err(Error::invalid(K, format!("all-reduce: {wrong}")));
    }
    let ms = slowest(comm, gpu, ms)?;
    records.push(all_reduce_record(
        ranks,
        &how,
        sizes.all_reduce_bytes,
        ms,
        wrong,
    ));
    Ok(records)
}

/// The largest of the ranks' `ms` (an all-reduce of one f64 with max),
/// on every rank: also where the ranks wait for each other.
fn slowest(comm: &Communicator, gpu: &Gpu, ms: f64) -> Result<f64> {
    let mut x = gpu.to_device(&[ms])?;
    comm.all_reduce_in_place(&mut x, ReduceOp::Max, gpu.stream())?;
    comm.synchronize(gpu.stream())?;
    Ok(x.to_vec()?[0])
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

    /// Every record's check passed.
    fn assert_passed<'a>(records: impl IntoIterator<Item = &'a BenchRecord>) {
        for r in records {
            assert!(
                matches!(r.check, Check::Pass(_)),
                "{}: {:?}",
                r.kernel,
                r.check
            );
        }
    }

    /// Small sizes for the simulator.
    const SMALL: Sizes = Sizes {
        sgemm: 37,
        mandelbrot: 64,
        iters: 32,
        life: 67,
        life_steps: 3,
        reduce: 3001,
        copy_bytes: 4096,
        all_reduce_bytes: 4096,
    };

    /// SGEMM, Life and the reduction on two simulated devices: one row on
    /// one device, then the peer row and the NCCL row on both, each checked
    /// and passed, the NCCL rows' speedups against the one-device time.
    #[test]
    fn the_scaling_rows_run_on_both_backends() -> Result<()> {
        let (a, b) = (Gpu::simulated_device(0)?, Gpu::simulated_device(1)?);
        for part in [sgemm as Part, life, reduce] {
            let mut records = Vec::new();
            part(&[&a, &b], &SMALL, &mut records)?;
            let kernels: Vec<&str> = records.iter().map(|r| r.kernel.as_str()).collect();
            assert_eq!(records.len(), 3, "{kernels:?}");
            assert!(kernels[0].ends_with(" on 1 GPU"), "{kernels:?}");
            assert!(kernels[1].ends_with(" on 2 GPUs"), "{kernels:?}");
            assert!(kernels[2].ends_with(" on 2 GPUs, NCCL"), "{kernels:?}");
            assert_passed(&records);
            for r in &records {
                assert_eq!(
                    r.reference.as_deref(),
                    Some(format!("{} (speedup)", kernels[0]).as_str())
                );
            }
        }
        Ok(())
    }

    /// The NCCL rows need distinct devices: with device 0 listed twice
    /// only the peer rows run.
    #[test]
    fn a_device_listed_twice_has_no_nccl_row() -> Result<()> {
        let a = Gpu::simulated_device(0)?;
        let mut records = Vec::new();
        reduce(&[&a, &a], &SMALL, &mut records)?;
        assert_eq!(records.len(), 2);
        assert!(records.iter().all(|r| !r.kernel.contains("NCCL")));
        Ok(())
    }

    /// Life's check fails a lattice with one cell changed, at either end.
    #[test]
    fn life_check_fails_a_changed_cell() {
        let want = Array2::from_shape_fn((5, 5), |(i, j)| ((i + j) % 2) as i32);
        let mut wrong = want.clone();
        wrong[(4, 3)] ^= 1;
        let same = std::slice::from_ref(&want);
        let ok = life_check(same, &want, same, &want, 7, "x");
        assert!(matches!(ok, Check::Pass(_)), "{ok:?}");
        let first = life_check(&[want.clone(), wrong.clone()], &want, same, &want, 7, "x");
        assert_eq!(
            first,
            Check::Fail("step 1 differs from the CPU's on rank 1".into())
        );
        let last = life_check(same, &want, &[wrong], &want, 7, "x");
        assert_eq!(
            last,
            Check::Fail("after 7 steps differs from the CPU's lattice".into())
        );
    }

    /// What a job of two rank processes runs, on two simulated ranks as
    /// threads: every rank passes its checks, and rank 0's records are the
    /// SGEMM row (against one GPU's time) and the all-reduce row.
    #[test]
    fn the_rank_rows_pass_on_simulated_ranks() -> Result<()> {
        let gpus = [Gpu::simulated_device(0)?, Gpu::simulated_device(1)?];
        let refs: Vec<&Gpu> = gpus.iter().collect();
        let comms = Communicator::all_devices(&refs)?;
        let items: Vec<_> = refs.iter().zip(comms).collect();
        let per_rank = run_each("test", &labels(&refs), items, |_, (gpu, comm), _| {
            rank_rows(&comm, gpu, &SMALL, false)
        })?;
        let kernels: Vec<&str> = per_rank[0].iter().map(|r| r.kernel.as_str()).collect();
        assert_eq!(
            kernels,
            [
                "multi SGEMM in 2 rank processes, NCCL",
                "NCCL all_reduce sum f32 on 2 GPUs in 2 rank processes, NCCL"
            ]
        );
        assert_passed(per_rank.iter().flatten());
        assert_eq!(
            per_rank[0][0].reference.as_deref(),
            Some("multi SGEMM on 1 GPU (speedup)")
        );
        Ok(())
    }
}
