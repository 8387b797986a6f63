//! Several GPUs on one job: the big kernels split across a list of devices
//! (every device by default: `cuda_kernels::all_gpus()`), one host thread
//! per device (`std::thread::scope`), all working at once.
//!
//! - [`matmul`](mod@matmul): SGEMM split by rows of C;
//! - [`mandelbrot`](mod@mandelbrot): the graph split by rows;
//! - [`reduce`](mod@reduce): over data already resident on each device, or
//!   split from the host;
//! - [`life`](mod@life): the lattice split in bands, halo rows exchanged
//!   every step (peer copies, else staged through pinned host memory).
//!
//! Each also runs on NCCL ([`Backend::Nccl`], the `*_with` functions), the
//! kernels unchanged: a reduction is each device's local reduction, then an
//! all-reduce; SGEMM and Mandelbrot compute row bands, then all-gather them;
//! Life exchanges its halo rows with grouped sends and receives every step.
//! On simulated devices the same code runs on simulated collectives
//! ([`crate::nccl`]), so both backends are tested without a GPU. NCCL needs
//! one device per rank: a device listed twice is refused there.
//!
//! The same [`Gpu`] may be listed more than once (its threads share its
//! stream): on a machine with one GPU that exercises the split.
//!
//! Failures: an empty device list or more devices than rows is
//! [`Error::InvalidInput`] before anything runs; an error on one device
//! (a device lost in the middle of the job) stops the others at their next
//! step, every thread is joined, and the first failure comes back as
//! [`Error::OnDevice`] naming the device. No device's output is written
//! into the caller's result unless every device succeeded.
use std::ops::Range;
use std::sync::{Condvar, Mutex};

use cust::memory::DeviceCopy;

use crate::Gpu;
use crate::error::{Error, Result};
use crate::memory::DeviceSlice;
use crate::nccl::{Communicator, NcclElement};

pub mod life;
pub mod mandelbrot;
pub mod matmul;
pub mod ranks;
pub mod reduce;

/// How the devices of a multi-GPU job exchange data; the kernels are the
/// same either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// Host threads: each device's band copied out by its own thread, Life's
    /// halos by peer copies (or staged through pinned memory).
    #[default]
    PeerCopies,
    /// NCCL collectives between the devices (simulated collectives between
    /// simulated devices): all-reduce, all-gather, grouped send and receive.
    Nccl,
}

impl Backend {
    /// Both backends.
    pub const ALL: [Backend; 2] = [Backend::PeerCopies, Backend::Nccl];

    /// `peer` or `nccl`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::PeerCopies => "peer",
            Backend::Nccl => "nccl",
        }
    }
}

impl std::str::FromStr for Backend {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| Error::invalid("multi-GPU", format!("backend {s:?}: peer or nccl")))
    }
}

/// Runs `work(comm, gpu, crew)` for every device of `gpus` on its own host
/// thread (as [`run_each`]), each with its communicator of one NCCL job
/// over `gpus` ([`Communicator::all_devices`]); the results in rank order.
pub(crate) fn on_ranks<R: Send>(
    job: &'static str,
    gpus: &[&Gpu],
    work: impl Fn(&Communicator, &Gpu, &Crew) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let comms = Communicator::all_devices(gpus)?;
    let items: Vec<_> = gpus.iter().zip(comms).collect();
    run_each(job, &labels(gpus), items, |_, (gpu, comm), crew| {
        work(&comm, gpu, crew)
    })
}

/// [`on_ranks`], returning rank 0's result.
pub(crate) fn rank_zero<R: Send>(
    job: &'static str,
    gpus: &[&Gpu],
    work: impl Fn(&Communicator, &Gpu, &Crew) -> Result<R> + Sync,
) -> Result<R> {
    on_ranks(job, gpus, work)?
        .into_iter()
        .next()
        .ok_or_else(|| Error::invalid(job, "no rank returned a result"))
}

/// Every rank's band of `width`-element rows joined in rank order, on
/// every rank: `band` holds this rank's `heights[rank]` rows padded to the
/// tallest band's (all-gather takes equal parts), gathered into every rank
/// by one all-gather on `gpu`'s stream.
pub(crate) fn all_gather_bands<T: NcclElement>(
    comm: &Communicator,
    gpu: &Gpu,
    band: &DeviceSlice<T>,
    heights: &[usize],
    width: usize,
) -> Result<Vec<T>> {
    let mut all = gpu.zeroed::<T>(band.len() * comm.ranks())?;
    comm.all_gather(band, &mut all, gpu.stream())?;
    comm.synchronize(gpu.stream())?;
    Ok(band_rows(&all.to_vec()?, band.len(), heights, width))
}

/// The rows of an all-gather's result `all` (every rank's band of
/// `width`-element rows padded to `padded` elements, in rank order) without
/// the padding: `heights[r]` rows of rank `r`'s part each.
pub(crate) fn band_rows<T: Copy>(
    all: &[T],
    padded: usize,
    heights: &[usize],
    width: usize,
) -> Vec<T> {
    heights
        .iter()
        .enumerate()
        .flat_map(|(r, &h)| all[r * padded..][..h * width].iter().copied())
        .collect()
}

/// The tallest of `bands`.
pub(crate) fn tallest(bands: &[Range<usize>]) -> usize {
    bands.iter().map(|b| b.len()).max().unwrap_or(0)
}

/// Splits `rows` rows into `parts` contiguous bands, in order, the first
/// `rows % parts` one row longer. Errors: no parts (an empty device list),
/// or more parts than rows.
pub fn split_rows(job: &'static str, rows: usize, parts: usize) -> Result<Vec<Range<usize>>> {
    if parts == 0 {
        return Err(Error::invalid(
            job,
            "an empty device list: give at least one device",
        ));
    }
    if parts > rows {
        return Err(Error::invalid(
            job,
            format!("{parts} devices but only {rows} rows to split among them"),
        ));
    }
    let (base, extra) = (rows / parts, rows % parts);
    let mut start = 0;
    Ok((0..parts)
        .map(|i| {
            let len = base + usize::from(i < extra);
            let band = start..start + len;
            start += len;
            band
        })
        .collect())
}

/// What the threads of one job share: whether the job was stopped (a
/// device failed), and how far each thread has got (for jobs whose devices
/// wait for each other, such as Life's halo exchange).
pub struct Crew {
    state: Mutex<CrewState>,
    changed: Condvar,
}

struct CrewState {
    stopped: bool,
    progress: Vec<u64>,
}

impl Crew {
    fn new(threads: usize) -> Self {
        Self {
            state: Mutex::new(CrewState {
                stopped: false,
                progress: vec![0; threads],
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CrewState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether another thread failed and the job is stopping.
    pub fn stopped(&self) -> bool {
        self.lock().stopped
    }

    /// `Err` (an error no caller sees: the failing thread's is reported)
    /// when the job is stopping.
    pub fn check(&self, job: &'static str) -> Result<()> {
        if self.stopped() {
            Err(Error::invalid(job, "stopped: another device failed"))
        } else {
            Ok(())
        }
    }

    fn stop(&self) {
        self.lock().stopped = true;
        self.changed.notify_all();
    }

    /// Records that thread `i` has got to `progress` (monotonic).
    pub fn advance(&self, i: usize, progress: u64) {
        let mut state = self.lock();
        if let Some(p) = state.progress.get_mut(i) {
            *p = (*p).max(progress);
        }
        drop(state);
        self.changed.notify_all();
    }

    /// Waits until thread `j` has got to `progress`, or the job stops
    /// (then `Err`): never waits for a thread that has failed.
    pub fn wait_for(&self, job: &'static str, j: usize, progress: u64) -> Result<()> {
        let mut state = self.lock();
        loop {
            if state.stopped {
                return Err(Error::invalid(job, "stopped: another device failed"));
            }
            if state.progress.get(j).is_none_or(|&p| p >= progress) {
                return Ok(());
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Runs `work(i, item, crew)` for every item on a host thread of its own,
/// all at once, and joins every thread. Returns the results in order, or
/// the first failure (in time) as [`Error::OnDevice`] naming `labels[i]`;
/// a failure stops the [`Crew`], so the others end at their next check.
/// A panicking thread counts as a failure.
pub fn run_each<I: Send, R: Send>(
    job: &'static str,
    labels: &[String],
    items: Vec<I>,
    work: impl Fn(usize, I, &Crew) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let crew = Crew::new(items.len());
    let first: Mutex<Option<(usize, Error)>> = Mutex::new(None);
    let fail = |i: usize, e: Error| {
        let mut slot = first.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some((i, e));
        }
        drop(slot);
        crew.stop();
    };
    let results: Vec<Option<R>> = std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                let (work, crew, fail) = (&work, &crew, &fail);
                scope.spawn(move || match work(i, item, crew) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        fail(i, e);
                        None
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(i, h)| match h.join() {
                Ok(r) => r,
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic".into());
                    fail(
                        i,
                        Error::invalid(job, format!("the thread panicked: {what}")),
                    );
                    None
                }
            })
            .collect()
    });
    if let Some((i, source)) = first.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(Error::OnDevice {
            job,
            device: labels
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("device #{i}")),
            source: Box::new(source),
        });
    }
    Ok(results.into_iter().flatten().collect())
}

/// The labels of `gpus` ([`Gpu::label`]), for [`run_each`].
pub fn labels(gpus: &[&Gpu]) -> Vec<String> {
    gpus.iter().map(|g| g.label()).collect()
}

/// Copies `parts[i]` (memory of `gpus[i]`) out into one host vector, in
/// order, each device on its own thread: how the launchers gather their
/// bands.
pub(crate) fn gather<T: DeviceCopy + Default + Clone + Send + Sync>(
    job: &'static str,
    gpus: &[&Gpu],
    parts: &[&DeviceSlice<T>],
) -> Result<Vec<T>> {
    let total = parts.iter().map(|p| p.len()).sum();
    let mut out = vec![T::default(); total];
    let mut rest = &mut out[..];
    let mut outs = Vec::with_capacity(parts.len());
    for part in parts {
        let (head, tail) = rest.split_at_mut(part.len());
        outs.push(head);
        rest = tail;
    }
    let items: Vec<_> = gpus.iter().zip(parts).zip(outs).collect();
    run_each(job, &labels(gpus), items, |_, ((gpu, part), out), _| {
        gpu.check_device(job, "a part", part)?;
        part.copy_to(out)
    })?;
    Ok(out)
}

/// The rows of each device's band for a job over `rows` rows.
pub(crate) fn bands(job: &'static str, gpus: &[&Gpu], rows: usize) -> Result<Vec<Range<usize>>> {
    split_rows(job, rows, gpus.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn rows_split_in_order_and_cover_everything() {
        assert_eq!(split_rows("t", 10, 3).unwrap(), vec![0..4, 4..7, 7..10]);
        assert_eq!(split_rows("t", 4, 4).unwrap(), vec![0..1, 1..2, 2..3, 3..4]);
        assert_eq!(split_rows("t", 7, 1).unwrap(), vec![0..7]);
        let e = split_rows("t", 2, 3).unwrap_err().to_string();
        assert_eq!(e, "t: 3 devices but only 2 rows to split among them");
        let e = split_rows("t", 2, 0).unwrap_err().to_string();
        assert!(e.contains("an empty device list"), "{e}");
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("device {i} (test)")).collect()
    }

    #[test]
    fn results_come_back_in_order() {
        let r = run_each("job", &names(4), vec![10, 20, 30, 40], |i, x, _| Ok(x + i)).unwrap();
        assert_eq!(r, vec![10, 21, 32, 43]);
    }

    #[test]
    fn a_failing_device_is_named_and_the_others_stop_without_hanging() {
        // Device 2 fails at step 5; the others wait for each other every
        // step (as Life does), so without the stop they would wait forever.
        let finished = AtomicUsize::new(0);
        let e = run_each("life", &names(4), vec![(); 4], |i, (), crew| {
            for step in 0..1_000u64 {
                if i == 2 && step == 5 {
                    return Err(Error::invalid("conway_fast", "the device fell off the bus"));
                }
                crew.advance(i, step + 1);
                for j in 0..4 {
                    crew.wait_for("life", j, step + 1)?;
                }
            }
            finished.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
        .unwrap_err();
        assert_eq!(finished.load(Ordering::Relaxed), 0);
        assert_eq!(
            e.to_string(),
            "life on device 2 (test): conway_fast: the device fell off the bus"
        );
        assert!(matches!(e, Error::OnDevice { ref device, .. } if device == "device 2 (test)"));
    }

    #[test]
    fn a_panicking_thread_is_a_failure_of_its_device() {
        let e = run_each("job", &names(2), vec![0, 1], |i, _, _| {
            if i == 1 {
                panic!("boom");
            }
            Ok(i)
        })
        .unwrap_err();
        assert!(e.to_string().contains("device 1 (test)"), "{e}");
        assert!(e.to_string().contains("boom"), "{e}");
    }
}
