//! Game of Life on several GPUs: the `n`×`n` torus split in bands of rows,
//! one per device, with the halo rows exchanged after every step (peer
//! copies where the devices reach each other, else staged through pinned
//! host memory). The result is identical to one GPU's.
//!
//! Layout: each device keeps an `n`×`n` buffer (two, for the ping-pong)
//! whose row `j` holds the lattice's row `(r0 + j) mod n`, where `r0` is
//! the band's first row: rows `0..h` are the band, row `h` the halo below
//! it (the next band's first row) and row `n − 1` the halo above it (the
//! previous band's last row). On that buffer the one-GPU kernel restricted
//! to a range of rows, `conway_fast_rows`, launched over the band's rows
//! only, computes exactly the band's next rows: the torus wrap it applies
//! at row 0 reads row `n − 1`, the halo above. It writes no other row, so
//! the halo rows `h` and `n − 1` (distinct and outside the band: `h + 3 <=
//! n` is checked at upload) are written by the halo copies only.
//!
//! Order and events. Each device's thread queues its steps without waiting
//! for the GPU, on three streams of its device: the edges' stream A (the
//! `Gpu`'s), a copies stream B and the interior's stream C. Step `s` (lattice `cur` → `next`, event
//! slot `s % 2`) of band `i`, of `h` rows, with edge strips of `E` rows (the
//! kernel's rows per thread × block height; clipped when `h < 2E`):
//! - A: wait for `i`'s own `pulled` and `inner` of step `s − 1` (its halos
//!   in `cur`, its interior); for `s >= 2`, wait for the neighbours'
//!   `pulled` of step `s − 2`; the edge rows `0..E` and `h − E..h`, one row
//!   a thread; (staged) the copies of rows `0` and `h − 1` to the pinned
//!   slot; record `done`.
//! - C: wait for `i`'s own `done` of step `s − 1`; the interior rows
//!   `E..h − E` (beside the edges of step `s`); record `inner`.
//! - B: wait for the neighbours' `done` of step `s` and `i`'s own `done` of
//!   step `s`; copy the neighbours' boundary rows into rows `h` and `n − 1`
//!   of `next` (peer, or from their pinned slot); record `pulled`.
//!
//! Why each is safe:
//! 1. The edges read `cur`'s halo rows: the own `pulled` of `s − 1` follows
//!    the copies that wrote them. (The interior reads rows `E − 1..h − E + 1`
//!    only, inside the band.)
//! 2. The copies read a neighbour's rows `0` / `h − 1` of `next` (or its
//!    pinned slot), written by its edges of step `s`: its `done` of `s`
//!    follows them (and the staging copies).
//! 3. The copies overwrite the halo rows of `next`, which is `cur` of step
//!    `s − 1`, whose edges read them: `i`'s `done` of step `s` is queued on
//!    A after all of step `s − 1`'s kernels.
//! 4. A neighbour's copies of step `s` read rows `0` / `h − 1` of `next` and
//!    the pinned slot `s % 2`, which `i` rewrites at step `s + 2` (edges,
//!    staging): A waits for the neighbours' `pulled` of `s` first.
//! 5. Concurrent and disjoint: the copies of step `s` into rows `h`, `n − 1`
//!    of `next` run beside the kernels of step `s`, which write rows `0..h`
//!    only; the neighbours' copies read rows `0`, `h − 1` while the interior
//!    writes rows `E..h − E`, none of them; the edges and the interior of
//!    step `s` write disjoint rows of `next` and only read `cur`.
//! 6. The interior of step `s` reads rows `E − 1` and `h − E` of `cur`,
//!    written by the edges of step `s − 1`, and overwrites rows of `next`
//!    (`cur` of step `s − 1`) next to the ones those edges read: C waits for
//!    `done` of `s − 1`. The edges of step `s` read rows `E`, `h − E − 1` of
//!    `cur`, written by the interior of `s − 1`, and overwrite rows of `next`
//!    that interior read: A waits for `inner` of `s − 1`.
//! 7. An event is waited on only after it is recorded (`cuStreamWaitEvent`
//!    on a not yet recorded event waits for nothing) and before it is
//!    recorded again: the threads' [`Crew`] progress counts `2s + 1` once
//!    a band's `done` of step `s` is recorded, `2s + 2` once its `pulled`
//!    is. A thread waits for `2s + 1` before waiting on a neighbour's `done`
//!    of `s`, and for `2s − 2` before waiting on its `pulled` of `s − 2`. The
//!    neighbour records `done` in that slot again at step `s + 2`, only after
//!    waiting for this thread's `2s + 2` (queued after its wait on `done`);
//!    `pulled` at step `s` only after waiting for this thread's `2s + 1`
//!    (queued after its wait on `pulled` of `s − 2`). A band's own events
//!    (`inner`, and its own `done` and `pulled`) are recorded and waited on
//!    by its own thread, in program order, each waited on before the step
//!    that records it again.
//! 8. Between runs: every thread synchronizes its three streams at the end
//!    and a run's first two steps wait on no event of an earlier run.
//!
//! The threads only wait for each other's *queueing* (a step apart at
//! most), so every device's queue stays full, and the halo copies of a step
//! overlap its interior's kernel instead of following it. One band: one
//! `conway_fast` launch over the whole torus per step, no exchange.
use std::ops::Range;

use cust::sys as cu;
#[cfg(test)]
use ndarray::Array1;
use ndarray::{Array2, ArrayView2};

use cuda_kernels_gpu::life::{CONWAY_FAST, CONWAY_FAST_ROWS};

use super::{Backend, Crew, bands, gather, labels, rank_zero, run_each};
use crate::Gpu;
use crate::error::{Error, Result};
use crate::launch::LaunchConfig;
use crate::life::{LifeKernel, check_lattice, fast_shape, life_launch};
use crate::memory::{DeviceBuffer, DeviceView};
use crate::nccl::{Communicator, Group};
use crate::peer::{
    CopyPath, PinnedBytes, SyncEvent, best_path, queue_peer_copy, queue_to_device, queue_to_host,
    record, require_peer, stream_wait, sync_event,
};

const K: &str = "life (multi-GPU)";
const CELL: usize = std::mem::size_of::<i32>();

/// One device's band: its rows, the two lattice buffers, the events its
/// neighbours wait on, and (staged exchange) its boundary rows in pinned
/// memory.
struct Band {
    rows: Range<usize>,
    lattice: [DeviceBuffer<i32>; 2],
    /// Recorded on the compute stream after step `g`'s edge strips (and
    /// staging copies), before its interior, slot `g % 2`.
    done: [SyncEvent; 2],
    /// Recorded on the copies stream after step `g`'s halo copies into this
    /// band, slot `g % 2`.
    pulled: [SyncEvent; 2],
    /// Recorded on the interior's stream after step `g`'s interior, slot
    /// `g % 2`.
    inner: [SyncEvent; 2],
    /// Staged exchange: slot `g % 2` holds the band's first and last rows
    /// after step `g`.
    staging: Option<[PinnedBytes; 2]>,
}

impl Band {
    /// The device address of row `row` of buffer `b`.
    fn row(&self, b: usize, row: usize, n: usize) -> cu::CUdeviceptr {
        self.lattice[b].as_device_ptr().as_raw() + (row * n * CELL) as u64
    }
}

/// Life on `gpus`: `steps` steps of `lattice` (square, cells 0 or 1),
/// its rows split in bands, each device on its own host thread, halos
/// exchanged every step. Identical to one GPU's result.
///
/// Errors: as [`check_lattice`], no devices, more devices than rows or
/// bands too thin for their halos (before anything runs), a failure on a
/// device ([`Error::OnDevice`]).
pub fn life(gpus: &[&Gpu], lattice: ArrayView2<i32>, steps: usize) -> Result<Array2<i32>> {
    let mut bands = LifeBands::upload(gpus, lattice, None)?;
    bands.run(steps)?;
    bands.download()
}

/// [`life`] on `backend`. With [`Backend::Nccl`] (more than one device)
/// every step of band `i` is, on its device: the edge strips (the rows the
/// neighbours need) on a stream of the greatest priority (their blocks go
/// ahead of the interior's), then one group of sends and receives there
/// (its first row to the band above, its last to the band
/// below, their rows into its two halo rows), while the interior runs on a
/// second stream beside the edges and the exchange; the next step's edges
/// wait for this step's interior, and its interior for this step's edges
/// (one event each way), so that the interiors run back to back. The
/// buffers are laid out as [`life`]'s (see the module docs).
/// Identical to one GPU's result. With one device there is nothing to
/// exchange: one device's [`life`] runs.
///
/// Errors as [`life`]; also, for NCCL, a device listed twice.
pub fn life_with(
    backend: Backend,
    gpus: &[&Gpu],
    lattice: ArrayView2<i32>,
    steps: usize,
) -> Result<Array2<i32>> {
    if backend == Backend::PeerCopies {
        return life(gpus, lattice, steps);
    }
    rank_zero(K, gpus, |comm, gpu, crew| {
        life_rank(comm, gpu, lattice, steps, Some(crew))
    })
}

/// One rank's part of [`life_with`] on NCCL, in a process of its own or on
/// a thread: band `rank` of the lattice's rows stepped `steps` times on
/// `gpu`, halos exchanged with the neighbouring ranks every step, then the
/// bands all-gathered: the whole lattice on every rank.
/// `crew` (threads of one process) stops the steps when another thread
/// failed. A communicator of one rank has no neighbours: `conway_fast` on
/// the whole torus.
pub fn life_rank(
    comm: &Communicator,
    gpu: &Gpu,
    lattice: ArrayView2<i32>,
    steps: usize,
    crew: Option<&Crew>,
) -> Result<Array2<i32>> {
    if comm.ranks() == 1 {
        return life(&[gpu], lattice, steps);
    }
    let mut rank = LifeRank::upload(comm, gpu, lattice)?;
    rank.run(comm, gpu, steps, crew)?;
    rank.download(comm, gpu)
}

/// One rank's band of a lattice on NCCL, resident between runs (what
/// [`life_rank`] runs once, and the bench's NCCL rows time): the band's
/// two buffers, laid out as [`life`]'s (see the module docs), on its
/// device.
pub struct LifeRank {
    /// The rows of every rank's band, in rank order.
    heights: Vec<usize>,
    /// The tallest band's rows (the all-gather's part).
    tallest: usize,
    n: usize,
    lattice: [DeviceBuffer<i32>; 2],
    /// Steps run so far: the current band is in buffer `steps % 2`.
    steps: usize,
}

impl LifeRank {
    /// Copies band `comm.rank()` of `lattice`'s rows (as
    /// [`split_rows`](super::split_rows) splits them over the
    /// communicator's ranks) and its halo rows to `gpu`. Every rank passes
    /// the whole lattice. Errors as [`life`]; also a communicator of one
    /// rank (no neighbours: [`life`] runs that).
    pub fn upload(comm: &Communicator, gpu: &Gpu, lattice: ArrayView2<i32>) -> Result<Self> {
        let n = check_lattice(lattice)?;
        let rows = super::split_rows(K, n, comm.ranks())?;
        let p = rows.len();
        if p == 1 {
            return Err(Error::invalid(
                K,
                "a band exchanges halos with its neighbours: one rank has none (run `life`)",
            ));
        }
        let tallest = check_band_room(n, &rows)?;
        let cells = lattice.as_standard_layout();
        let flat = cells
            .as_slice()
            .ok_or_else(|| Error::invalid(K, "lattice not contiguous"))?;
        let band = &rows[comm.rank()];
        Ok(Self {
            heights: rows.iter().map(|r| r.len()).collect(),
            tallest,
            n,
            lattice: [
                gpu.to_device(&band_buffer(flat, n, band, p))?,
                gpu.zeroed(n * n)?,
            ],
            steps: 0,
        })
    }

    /// Steps the band `steps` times, halos exchanged with the neighbouring
    /// ranks every step (see [`life_with`]), and waits (up to the
    /// communicator's deadline). Every rank calls it with the same `steps`.
    /// `crew` (threads of one process) stops the steps when another thread
    /// failed.
    pub fn run(
        &mut self,
        comm: &Communicator,
        gpu: &Gpu,
        steps: usize,
        crew: Option<&Crew>,
    ) -> Result<()> {
        let h = self.heights[comm.rank()];
        run_band_nccl(
            gpu,
            comm,
            &mut self.lattice,
            h,
            self.n,
            self.steps,
            steps,
            crew,
        )?;
        self.steps += steps;
        Ok(())
    }

    /// The whole lattice after the steps run so far: every rank's band,
    /// all-gathered (every rank calls it).
    pub fn download(&self, comm: &Communicator, gpu: &Gpu) -> Result<Array2<i32>> {
        let (n, h) = (self.n, self.heights[comm.rank()]);
        // Padded to the tallest band for the all-gather.
        let mut padded = gpu.zeroed::<i32>(self.tallest * n)?;
        padded
            .index_mut(..h * n)
            .copy_from_device(&self.lattice[self.steps % 2].index(..h * n))?;
        super::all_gather_bands(comm, gpu, &padded, &self.heights, n).and_then(|c| {
            Array2::from_shape_vec((n, n), c).map_err(|e| Error::invalid(K, e.to_string()))
        })
    }
}

/// One band's steps `base..base + steps` on NCCL (see [`life_with`]):
/// `lattice` holds the band's `h` rows and its halo rows `h` and `n − 1`,
/// step `base`'s in buffer `base % 2`.
#[allow(clippy::too_many_arguments)]
fn run_band_nccl(
    gpu: &Gpu,
    comm: &Communicator,
    lattice: &mut [DeviceBuffer<i32>; 2],
    h: usize,
    n: usize,
    base: usize,
    steps: usize,
    crew: Option<&Crew>,
) -> Result<()> {
    let (rank, p) = (comm.rank(), comm.ranks());
    let (up, down) = ((rank + p - 1) % p, (rank + 1) % p);
    let launch = life_launch(LifeKernel::Fast, n, fast_shape())?;
    let [first, last, interior] = strips(h, launch.rows * launch.block.1 as usize);
    gpu.bind()?;
    // The edges and the exchange on a stream of the greatest priority, so
    // that their few blocks are scheduled ahead of the interior's pending
    // ones (the next step's interior waits for them), both after the work
    // queued on the Gpu's stream.
    let stream = &gpu.new_priority_stream()?;
    let inside = gpu.new_stream()?;
    let (edges_done, interior_done) = (sync_event(gpu)?, sync_event(gpu)?);
    record(&edges_done, gpu.stream())?;
    stream_wait(stream, &edges_done)?;
    stream_wait(&inside, &edges_done)?;
    for s in 0..steps {
        if let Some(crew) = crew {
            crew.check(K)?;
        }
        let (from, to) = if (base + s).is_multiple_of(2) {
            let [a, b] = lattice;
            (&*a, b)
        } else {
            let [b, a] = lattice;
            (&*a, b)
        };
        if s >= 1 {
            // This step's edges overwrite rows next to the ones the last
            // step's interior read, and read rows it wrote.
            stream_wait(stream, &interior_done)?;
            // This step's interior reads rows the last step's edges wrote,
            // and overwrites rows next to the ones they read; it does not
            // wait for this step's edges, which write rows it never reads.
            stream_wait(&inside, &edges_done)?;
        }
        launch_rows(gpu, from, to, n, first.clone(), 1, stream)?;
        launch_rows(gpu, from, to, n, last.clone(), 1, stream)?;
        record(&edges_done, stream)?;
        launch_rows(gpu, from, to, n, interior.clone(), launch.rows, &inside)?;
        record(&interior_done, &inside)?;
        // The exchange, beside the interior: the rows it sends (0, h − 1)
        // and receives (h, n − 1) are none of the interior's. Sends to one
        // peer are matched in order by its receives from this rank: the
        // last row goes down first, the first row up, and a rank receives
        // from above (into row n − 1) before below (into row h), so that
        // with two bands (above = below) the pairs still match.
        let (band, mut rest) = to.split_at_mut(h * n);
        let (mut below, mut tail) = rest.split_at_mut(n);
        let above_at = tail.len() - n;
        let mut above = tail.index_mut(above_at..);
        let mut g = Group::new();
        let (first_row, last_row) = (band.index(..n), band.index((h - 1) * n..));
        g.send(comm, &last_row, down, stream)?;
        g.send(comm, &first_row, up, stream)?;
        g.recv(comm, &mut above, up, stream)?;
        g.recv(comm, &mut below, down, stream)?;
        g.end()?;
    }
    comm.synchronize(stream)?;
    inside.synchronize()?;
    gpu.synchronize(CONWAY_FAST_ROWS.name())
}

/// Queues rows `rows` of `to` (the next lattice) from `from` on `on`,
/// `per_thread` rows each thread (`conway_fast_rows`).
fn launch_rows(
    gpu: &Gpu,
    from: &DeviceBuffer<i32>,
    to: &mut DeviceBuffer<i32>,
    n: usize,
    rows: Range<usize>,
    per_thread: usize,
    on: &crate::memory::Stream,
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let launch = life_launch(LifeKernel::Fast, n, fast_shape())?;
    let cfg = LaunchConfig {
        grid: (
            launch.grid.0,
            rows.len()
                .div_ceil(per_thread)
                .div_ceil(launch.block.1 as usize) as u32,
            1,
        ),
        block: (launch.block.0, launch.block.1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: both buffers hold n·n i32 and are distinct (one borrowed
    // shared, one mutably); rows ⊆ 0..n and the grid covers them;
    // per_thread >= 1; n is the checked lattice size.
    unsafe {
        let args = (
            from,
            to.as_device_ptr(),
            n,
            per_thread,
            rows.start,
            rows.end,
        );
        gpu.launch(CONWAY_FAST_ROWS, cfg, on, args)
    }
}

/// A lattice split over several GPUs, resident between runs (the bench's
/// scaling rows time [`LifeBands::run`]).
pub struct LifeBands<'g> {
    gpus: Vec<&'g Gpu>,
    bands: Vec<Band>,
    n: usize,
    /// Steps run so far: the current lattice is in buffer `steps % 2`.
    steps: usize,
    path: Option<CopyPath>,
}

impl<'g> LifeBands<'g> {
    /// Splits `lattice` over `gpus` and copies each band (with its halos) in.
    /// `path` forces the halo exchange's path (`None`: peer copies when
    /// every neighbouring pair supports them, else staged).
    pub fn upload(
        gpus: &[&'g Gpu],
        lattice: ArrayView2<i32>,
        path: Option<CopyPath>,
    ) -> Result<Self> {
        let n = check_lattice(lattice)?;
        let rows = bands(K, gpus, n)?;
        let p = rows.len();
        if p > 1
            && gpus
                .iter()
                .any(|g| g.is_simulated() != gpus[0].is_simulated())
        {
            return Err(Error::invalid(
                K,
                format!(
                    "the devices [{}] mix simulated and CUDA devices: a Life job's bands \
                     wait for each other, so its devices must all be of one kind",
                    labels(gpus).join(", ")
                ),
            ));
        }
        check_band_room(n, &rows)?;
        let path = if p > 1 {
            Some(match path {
                Some(path) => path,
                None => {
                    let mut path = CopyPath::Peer;
                    for i in 0..p {
                        if best_path(gpus[i], gpus[(i + 1) % p])? == CopyPath::Staged {
                            path = CopyPath::Staged;
                        }
                    }
                    path
                }
            })
        } else {
            None
        };
        if path == Some(CopyPath::Peer) {
            for i in 0..p {
                let (a, b) = (gpus[i], gpus[(i + 1) % p]);
                require_peer(a, b)?;
            }
        }
        let cells = lattice.as_standard_layout();
        let flat = cells
            .as_slice()
            .ok_or_else(|| Error::invalid(K, "lattice not contiguous"))?;
        let items: Vec<_> = gpus.iter().zip(rows).collect();
        let bands = run_each(K, &labels(gpus), items, |_, (gpu, rows), _| {
            let host = band_buffer(flat, n, &rows, p);
            let lattice = [gpu.to_device(&host)?, gpu.zeroed(n * n)?];
            let staging = match path {
                Some(CopyPath::Staged) => Some([
                    PinnedBytes::new(gpu, 2 * n * CELL)?,
                    PinnedBytes::new(gpu, 2 * n * CELL)?,
                ]),
                _ => None,
            };
            Ok(Band {
                rows,
                lattice,
                done: [sync_event(gpu)?, sync_event(gpu)?],
                pulled: [sync_event(gpu)?, sync_event(gpu)?],
                inner: [sync_event(gpu)?, sync_event(gpu)?],
                staging,
            })
        })?;
        Ok(Self {
            gpus: gpus.to_vec(),
            bands,
            n,
            steps: 0,
            path,
        })
    }

    /// How the halos travel: `None` with one band (no exchange).
    pub fn path(&self) -> Option<CopyPath> {
        self.path
    }

    /// Runs `steps` steps on every device at once (each on its own thread),
    /// exchanging halos after each, and waits for all of them.
    pub fn run(&mut self, steps: usize) -> Result<()> {
        let (n, base, path) = (self.n, self.steps, self.path);
        let bands = &self.bands;
        let gpus = &self.gpus;
        let items: Vec<usize> = (0..bands.len()).collect();
        let result = run_each(K, &labels(gpus), items, |i, _, crew| {
            run_band(gpus, bands, i, n, base, steps, path, crew)
        });
        // Whatever happened, the buffers hold step base + steps only if
        // every device ran every step.
        if result.is_ok() {
            self.steps += steps;
        }
        result.map(|_| ())
    }

    /// Copies every band out and joins them into the lattice.
    pub fn download(&self) -> Result<Array2<i32>> {
        let (n, cur) = (self.n, self.steps % 2);
        let bands: Vec<DeviceView<'_, i32>> = self
            .bands
            .iter()
            .map(|b| b.lattice[cur].index(..b.rows.len() * n))
            .collect();
        let cells = gather(
            K,
            &self.gpus,
            &bands.iter().map(|b| &**b).collect::<Vec<_>>(),
        )?;
        Array2::from_shape_vec((n, n), cells).map_err(|e| Error::invalid(K, e.to_string()))
    }
}

/// The tallest of `rows` (the bands of an `n`-row lattice), refused when
/// there is more than one band and a band and its two halo rows do not fit
/// in the lattice's rows.
fn check_band_room(n: usize, rows: &[Range<usize>]) -> Result<usize> {
    let (p, tallest) = (rows.len(), super::tallest(rows));
    if p > 1 && tallest + 3 > n {
        return Err(Error::invalid(
            K,
            format!(
                "a {n}×{n} lattice is too small for {p} bands: a band of {tallest} rows and its \
                 two halo rows need a lattice of at least {} rows",
                tallest + 3
            ),
        ));
    }
    Ok(tallest)
}

/// Device `i`'s buffer at the start, for a lattice split in `p` bands:
/// row `j` holds the lattice's row `(r0 + j) mod n` for the band's rows
/// `j < h`, and (with more than one band) its halos, `j = h` and `j = n −
/// 1`; every other row is 0.
fn band_buffer(flat: &[i32], n: usize, rows: &Range<usize>, p: usize) -> Vec<i32> {
    let mut host = vec![0i32; n * n];
    let mut wanted: Vec<usize> = (0..rows.len()).collect();
    if p > 1 {
        wanted.extend([rows.len(), n - 1]);
    }
    for j in wanted {
        let src = (rows.start + j) % n;
        host[j * n..(j + 1) * n].copy_from_slice(&flat[src * n..(src + 1) * n]);
    }
    host
}

/// One halo row of a band after a step: copied from band `from`'s buffer
/// row `src_row` (row `staged_row` of its staging slot) into this band's
/// row `dst_row`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Halo {
    from: usize,
    src_row: usize,
    staged_row: usize,
    dst_row: usize,
}

/// The two halos of band `i` of bands of `heights` on an `n`-wide torus:
/// the band above's last row into row `n − 1`, the band below's first row
/// into row `h` (the staging slots hold a band's first row, then its last).
fn halos(heights: &[usize], i: usize, n: usize) -> [Halo; 2] {
    let p = heights.len();
    let (up, down) = ((i + p - 1) % p, (i + 1) % p);
    [
        Halo {
            from: up,
            src_row: heights[up] - 1,
            staged_row: 1,
            dst_row: n - 1,
        },
        Halo {
            from: down,
            src_row: 0,
            staged_row: 0,
            dst_row: heights[i],
        },
    ]
}

/// The rows of a band of `h` rows that its steps compute in three
/// launches, for edge strips of `e` rows: the first strip `0..e`, the last
/// `h − e..h` (the rows the neighbours copy, and the ones reading the
/// halos), and the interior between them. Clipped when `h < 2e`: the edges
/// then split the band between them and the interior is empty; every row
/// of `0..h` is in exactly one of the three.
fn strips(h: usize, e: usize) -> [Range<usize>; 3] {
    let first = 0..e.min(h);
    let last = h.saturating_sub(e).max(first.end)..h;
    let interior = first.end..last.start;
    [first, last, interior]
}

/// Device `i`'s thread: queues `steps` steps of its band (see the module
/// docs for the order and the events).
#[allow(clippy::too_many_arguments)]
fn run_band(
    gpus: &[&Gpu],
    bands: &[Band],
    i: usize,
    n: usize,
    base: usize,
    steps: usize,
    path: Option<CopyPath>,
    crew: &Crew,
) -> Result<()> {
    let (gpu, me) = (gpus[i], &bands[i]);
    let p = bands.len();
    let (up, down) = ((i + p - 1) % p, (i + 1) % p);
    // The bands this one exchanges rows with (one band, above and below
    // alike, when there are two; none when there is one).
    let mut neighbours = if p > 1 { vec![up, down] } else { vec![] };
    neighbours.dedup();
    let h = me.rows.len();
    let launch = life_launch(LifeKernel::Fast, n, fast_shape())?;
    // The rows one block row of the kernel covers: the edge strips' height.
    let edge = launch.rows * launch.block.1 as usize;
    // A launch over `rows` rows, `per_thread` rows each thread.
    let cfg_with = |rows: usize, per_thread: usize| LaunchConfig {
        grid: (
            launch.grid.0,
            rows.div_ceil(per_thread).div_ceil(launch.block.1 as usize) as u32,
            1,
        ),
        block: (launch.block.0, launch.block.1, 1),
        shared_mem_bytes: 0,
    };
    gpu.bind()?;
    let stream = gpu.stream();
    if p == 1 {
        // One band: the whole torus, one launch a step, no exchange.
        for s in 0..steps {
            let (cur, next) = ((base + s) % 2, (base + s + 1) % 2);
            crew.check(K)?;
            // SAFETY: both buffers hold n·n i32 and are distinct; the grid
            // covers the n rows and the kernel clips to the n×n lattice;
            // rows >= 1 (life_launch); n is the checked lattice size. The
            // next lattice goes as its raw address: the bands are shared
            // with the other devices' threads (they read our halo rows),
            // and only this thread writes this band's lattices.
            unsafe {
                let args = (
                    &me.lattice[cur],
                    me.lattice[next].as_device_ptr(),
                    n,
                    launch.rows,
                );
                gpu.launch(CONWAY_FAST, launch.config(), stream, args)
            }?;
        }
        return gpu.synchronize(CONWAY_FAST.name());
    }
    // Rows `rows` of the next lattice from the current one, on `stream`,
    // `per_thread` rows each thread: the interior with the kernel's own
    // sliding window (`launch.rows`), the edge strips one row a thread, so
    // that their short launches, on the critical path of the exchange, have
    // `launch.rows` times the blocks and end sooner.
    let step_rows = |cur: usize,
                     rows: Range<usize>,
                     per_thread: usize,
                     on: &crate::memory::Stream|
     -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        // SAFETY: both buffers hold n·n i32 and are distinct; rows ⊆ 0..h ⊆
        // 0..n (row0 <= row_end <= n) and the grid covers them; per_thread >= 1
        // (1, or launch.rows from life_launch); n is the checked lattice size;
        // only this thread writes this band's lattices (the raw address, as
        // above).
        unsafe {
            let args = (
                &me.lattice[cur],
                me.lattice[1 - cur].as_device_ptr(),
                n,
                per_thread,
                rows.start,
                rows.end,
            );
            gpu.launch(CONWAY_FAST_ROWS, cfg_with(rows.len(), per_thread), on, args)
        }
    };
    let [first, last, interior] = strips(h, edge);
    // The halo copies' stream: they overlap the interior's kernel; and the
    // interior's stream: it runs beside the edges.
    let copies = gpu.new_stream()?;
    let inside = gpu.new_stream()?;
    let heights: Vec<usize> = bands.iter().map(|b| b.rows.len()).collect();
    let row_bytes = n * CELL;
    for s in 0..steps {
        let g = base + s;
        let (cur, next, slot) = (g % 2, (g + 1) % 2, g % 2);
        crew.check(K)?;
        // The halos the edges read: this band's copies of the step before.
        if s >= 1 {
            stream_wait(stream, &me.pulled[next])?;
            // The edges read the interior's rows next to them (and overwrite
            // the rows it read): the interior of the step before.
            stream_wait(stream, &me.inner[next])?;
        }
        // The edges overwrite the rows (and the staging slot) the neighbours
        // copied two steps ago: wait for those copies.
        if s >= 2 {
            for &j in &neighbours {
                crew.wait_for(K, j, 2 * s as u64 - 2)?;
                stream_wait(stream, &bands[j].pulled[slot])?;
            }
        }
        step_rows(cur, first.clone(), 1, stream)?;
        step_rows(cur, last.clone(), 1, stream)?;
        if let Some(staging) = &me.staging {
            // The band's first and last rows, for the neighbours.
            for (k, row) in [0, h - 1].into_iter().enumerate() {
                // SAFETY: the staging slot holds two rows; the row is inside
                // the n·n buffer; ordered after the edges on this stream, and
                // after the neighbours' reads of this slot (the waits above).
                unsafe {
                    queue_to_host(
                        gpu,
                        me.row(next, row, n),
                        staging[slot].as_ptr().add(k * row_bytes),
                        row_bytes,
                        stream,
                    )
                }?;
            }
        }
        record(&me.done[slot], stream)?;
        crew.advance(i, 2 * s as u64 + 1);
        // The interior, beside the edges of this step: after the edges of the
        // step before (it reads the rows they wrote, and overwrites the rows
        // next to the ones they read).
        if s >= 1 {
            stream_wait(&inside, &me.done[next])?;
        }
        step_rows(cur, interior.clone(), launch.rows, &inside)?;
        record(&me.inner[slot], &inside)?;
        // The halos of the new lattice, on the copies' stream: the band
        // above's last row, the band below's first row, after their edges of
        // this step, and after this band's kernels of the step before (they
        // read the halo rows these copies overwrite; this band's `done` of
        // this step follows them on its stream).
        for &j in &neighbours {
            crew.wait_for(K, j, 2 * s as u64 + 1)?;
            stream_wait(&copies, &bands[j].done[slot])?;
        }
        stream_wait(&copies, &me.done[slot])?;
        for Halo {
            from: j,
            src_row,
            staged_row,
            dst_row,
        } in halos(&heights, i, n)
        {
            let dst = me.row(next, dst_row, n);
            match path {
                Some(CopyPath::Staged) => {
                    let staging = bands[j]
                        .staging
                        .as_ref()
                        .ok_or_else(|| Error::invalid(K, "staged exchange without staging"))?;
                    // SAFETY: the neighbour's pinned slot holds its rows of
                    // this step (its `done` event, waited above) and is not
                    // rewritten before our `pulled` event (its waits); the
                    // halo row is inside our buffer and no kernel of ours
                    // reads or writes it meanwhile (module docs).
                    unsafe {
                        queue_to_device(
                            gpu,
                            staging[slot].as_ptr().add(staged_row * row_bytes),
                            dst,
                            row_bytes,
                            &copies,
                        )
                    }?;
                }
                _ => {
                    // SAFETY: both rows are inside their n·n buffers; the
                    // source is final for this step (the neighbour's `done`
                    // event) and not rewritten before our `pulled` event; no
                    // kernel of ours reads or writes the halo row meanwhile
                    // (module docs).
                    unsafe {
                        queue_peer_copy(
                            gpus[j],
                            bands[j].row(next, src_row, n),
                            gpu,
                            dst,
                            row_bytes,
                            &copies,
                        )
                    }?;
                }
            }
        }
        record(&me.pulled[slot], &copies)?;
        crew.advance(i, 2 * s as u64 + 2);
    }
    copies.synchronize()?;
    inside.synchronize()?;
    gpu.synchronize(CONWAY_FAST_ROWS.name())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BuiltinSimulator;
    use crate::life::{life_cpu, life_step_cpu, random_lattice};
    use crate::multi_gpu::split_rows;
    use crate::util::Rng;

    /// The three strips cover a band's rows once each, in order, with the
    /// edges at most `e` rows and the interior empty when `h <= 2e`.
    #[test]
    fn strips_cover_the_band() {
        assert_eq!(strips(100, 32), [0..32, 68..100, 32..68]);
        assert_eq!(strips(64, 32), [0..32, 32..64, 32..32]);
        assert_eq!(strips(40, 32), [0..32, 32..40, 32..32]);
        assert_eq!(strips(20, 32), [0..20, 20..20, 20..20]);
        for h in 1..80 {
            for e in 1..40 {
                let [first, last, interior] = strips(h, e);
                assert_eq!(first.start, 0);
                assert_eq!((first.end, interior.end), (interior.start, last.start));
                assert_eq!(last.end, h);
                assert!(first.len() <= e && last.len() <= e);
                assert!(interior.is_empty() || (first.len() == e && last.len() == e));
            }
        }
    }

    /// Bands tall enough for all three strips (edges and interior) and
    /// bands with clipped edges, on simulated devices, both halo paths,
    /// over two runs: identical to the CPU.
    #[test]
    fn strips_on_simulated_devices_match_the_cpu() -> Result<()> {
        let g: Vec<Gpu> = (0..3).map(Gpu::simulated_device).collect::<Result<_>>()?;
        let (rows, by) = fast_shape();
        let e = rows * by as usize;
        // Two bands of 2e + 5 rows (an interior of 5 rows), three bands of
        // about 1.5e rows (edges clipped, no interior).
        for (n, p) in [(4 * e + 10, 2), (4 * e + 10, 3)] {
            let start = random_lattice(n, 0.35, &mut Rng::new(n as u64 + p as u64));
            let steps = 5;
            let want = life_cpu(start.view(), steps)?;
            let gpus: Vec<&Gpu> = g.iter().take(p).collect();
            for path in [CopyPath::Peer, CopyPath::Staged] {
                let mut bands = LifeBands::upload(&gpus, start.view(), Some(path))?;
                bands.run(2)?;
                bands.run(steps - 2)?;
                assert!(bands.download()? == want, "n {n}, {p} bands, {path}");
            }
        }
        Ok(())
    }

    /// The layout and the halo exchange on the CPU: each band's buffer is
    /// stepped as a whole `n`×`n` torus (a superset of what the kernel
    /// computes: its band's rows), then its halos are copied in as
    /// [`halos`] says, from the staging rows too; after every step the
    /// bands equal the one-lattice result.
    #[test]
    fn bands_and_halos_reproduce_the_torus() {
        for (n, p, steps) in [(16, 2, 9), (17, 3, 7), (40, 5, 6), (9, 2, 5), (12, 1, 4)] {
            let got = bands_and_halos_on_the_cpu(n, p, steps, None);
            assert!(got.is_ok(), "n {n}, {p} bands: {got:?}");
        }
    }

    /// Issue 19: one halo exchange skipped (band 1's, after step 2) leaves
    /// a stale row that the comparison with the one-lattice result catches.
    #[test]
    fn a_skipped_halo_exchange_is_caught() {
        for (n, p, steps) in [(16, 2, 9), (17, 3, 7), (40, 5, 6)] {
            let got = bands_and_halos_on_the_cpu(n, p, steps, Some((2, 1)));
            assert!(got.is_err(), "n {n}, {p} bands: the skip went unnoticed");
        }
    }

    /// The layout and the halo exchange on the CPU, compared with the
    /// one-lattice result after every step (`Err` naming the first row that
    /// differs); `skip = Some((step, band))` leaves that band's halos of
    /// that step unexchanged (an injected fault).
    fn bands_and_halos_on_the_cpu(
        n: usize,
        p: usize,
        steps: usize,
        skip: Option<(usize, usize)>,
    ) -> std::result::Result<(), String> {
        {
            let start = random_lattice(n, 0.35, &mut Rng::new(n as u64));
            let flat = start.as_slice().unwrap();
            let rows = split_rows("t", n, p).unwrap();
            let heights: Vec<usize> = rows.iter().map(|r| r.len()).collect();
            let mut buffers: Vec<Array2<i32>> = rows
                .iter()
                .map(|r| Array2::from_shape_vec((n, n), band_buffer(flat, n, r, p)).unwrap())
                .collect();
            for step in 1..=steps {
                let next: Vec<Array2<i32>> = buffers
                    .iter()
                    .map(|b| life_step_cpu(b.view()).unwrap())
                    .collect();
                let staged: Vec<[Vec<i32>; 2]> = next
                    .iter()
                    .zip(&heights)
                    .map(|(b, &h)| [b.row(0).to_vec(), b.row(h - 1).to_vec()])
                    .collect();
                buffers = next.clone();
                if p > 1 {
                    for (i, buffer) in buffers.iter_mut().enumerate() {
                        if skip == Some((step, i)) {
                            continue;
                        }
                        for halo in halos(&heights, i, n) {
                            let peer = next[halo.from].row(halo.src_row).to_vec();
                            assert_eq!(peer, staged[halo.from][halo.staged_row]);
                            buffer.row_mut(halo.dst_row).assign(&Array1::from(peer));
                        }
                    }
                }
                let want = life_cpu(start.view(), step).unwrap();
                for (r, b) in rows.iter().zip(&buffers) {
                    for (j, g) in r.clone().enumerate() {
                        if b.row(j) != want.row(g) {
                            return Err(format!("step {step}, row {g} differs"));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
