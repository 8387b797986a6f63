//! Mandelbrot on several GPUs, split by rows of the graph: device `i`
//! computes its band of rows with `mandelbrot_rows`, which gives each point
//! exactly the value `mandelbrot_ker` gives it (same indices, same per-point
//! function), so the joined graph is identical to one GPU's.
use std::ops::Range;

use crate::memory::{DeviceBuffer, DeviceSlice};
use ndarray::{Array2, ArrayView1};

use cuda_kernels_gpu::mandelbrot::MANDELBROT_ROWS;

use super::{Backend, all_gather_bands, bands, gather, labels, rank_zero, run_each, tallest};
use crate::Gpu;
use crate::error::{Error, Result};
use crate::launch::LaunchConfig;
use crate::mandelbrot::{BLOCK, check_launch};
use crate::nccl::Communicator;
use crate::util::contiguous;

const K: &str = MANDELBROT_ROWS.name();

/// The Mandelbrot launcher over a range of rows, on a [`Gpu`].
pub trait MandelbrotRowsExt {
    /// Queues rows `rows` of the Mandelbrot graph of `lattice` (see
    /// [`Gpu::mandelbrot`](crate::mandelbrot::MandelbrotExt::mandelbrot)) on [`Gpu::stream`] into `graph`, which holds
    /// `rows.len() × lattice.len()` values: the same values as those rows of
    /// the full graph, bit for bit. No copies, no synchronization; safe
    /// under the [`_on_device` rule](Gpu#launchers-that-leave-work-in-flight-the-_on_device-rule).
    ///
    /// Errors (no launch): as [`check_launch`], an empty or out-of-range
    /// band, a graph of the wrong length.
    fn mandelbrot_rows_on_device(
        &self,
        lattice: &DeviceSlice<f32>,
        graph: &mut DeviceSlice<f32>,
        rows: Range<usize>,
        max_iters: i32,
        upper_bound: f32,
        block: u32,
    ) -> Result<()>;
}

impl MandelbrotRowsExt for Gpu {
    fn mandelbrot_rows_on_device(
        &self,
        lattice: &DeviceSlice<f32>,
        graph: &mut DeviceSlice<f32>,
        rows: Range<usize>,
        max_iters: i32,
        upper_bound: f32,
        block: u32,
    ) -> Result<()> {
        let n = lattice.len();
        let shape = check_launch(K, n, max_iters, upper_bound, block)?;
        if rows.is_empty() || rows.end > n {
            return Err(Error::invalid(
                K,
                format!("rows {rows:?} of a {n}-row graph: must be a non-empty band inside it"),
            ));
        }
        let points = rows.len() * n;
        if graph.len() != points {
            return Err(Error::invalid(
                K,
                format!(
                    "the graph holds {} values, rows {rows:?} of a {n}×{n} graph need {points}",
                    graph.len()
                ),
            ));
        }
        self.bind()?;
        // points <= n² < 2^31 (check_launch), so the grid and the i32 casts fit.
        let cfg = LaunchConfig::linear(points.div_ceil(block as usize) as u32, block);
        // SAFETY: `lattice` holds n f32 and `graph` rows·n (checked above),
        // distinct allocations (one borrowed shared, one mutably); n² fits in
        // i32 (check_launch); 0 <= row0 < row0 + rows <= n; the grid covers
        // rows·n threads, fewer than 2^32.
        unsafe {
            let args = (
                lattice,
                graph,
                shape.max_iters,
                shape.upper_bound_squared,
                shape.lattice_size,
                rows.start as i32,
                rows.len() as i32,
            );
            self.launch(MANDELBROT_ROWS, cfg, self.stream(), args)
        }
    }
}

/// One device's band: its rows, the lattice and its rows of the graph.
struct Band {
    rows: Range<usize>,
    lattice: DeviceBuffer<f32>,
    graph: DeviceBuffer<f32>,
}

/// The Mandelbrot graph of `lattice` (as [`Gpu::mandelbrot`](crate::mandelbrot::MandelbrotExt::mandelbrot)) on `gpus`,
/// its rows split in contiguous bands, each device on its own host thread.
/// Identical to one GPU's graph.
///
/// Errors: as [`check_launch`], no devices, more devices than rows (before
/// anything runs), a failure on a device ([`Error::OnDevice`]).
pub fn mandelbrot(
    gpus: &[&Gpu],
    lattice: ArrayView1<f32>,
    max_iters: i32,
    upper_bound: f32,
) -> Result<Array2<f32>> {
    let mut bands = MandelbrotBands::upload(gpus, lattice, max_iters, upper_bound)?;
    bands.run(1)?;
    bands.download()
}

/// [`mandelbrot`] on `backend`: with [`Backend::Nccl`] each device
/// computes its band of rows, then an all-gather joins the rows (rank 0's
/// copy is returned). Identical to one GPU's graph. Errors as
/// [`mandelbrot`]; also, for NCCL, a device listed twice.
pub fn mandelbrot_with(
    backend: Backend,
    gpus: &[&Gpu],
    lattice: ArrayView1<f32>,
    max_iters: i32,
    upper_bound: f32,
) -> Result<Array2<f32>> {
    if backend == Backend::PeerCopies {
        return mandelbrot(gpus, lattice, max_iters, upper_bound);
    }
    rank_zero(K, gpus, |comm, gpu, _| {
        mandelbrot_rank(comm, gpu, lattice, max_iters, upper_bound)
    })
}

/// One rank's part of [`mandelbrot_with`] on NCCL, in a process of its own
/// or on a thread: band `rank` of the graph's rows computed on `gpu`, then
/// all-gathered: the whole graph on every rank.
pub fn mandelbrot_rank(
    comm: &Communicator,
    gpu: &Gpu,
    lattice: ArrayView1<f32>,
    max_iters: i32,
    upper_bound: f32,
) -> Result<Array2<f32>> {
    let n = lattice.len();
    check_launch(K, n, max_iters, upper_bound, BLOCK)?;
    let rows = super::split_rows(K, n, comm.ranks())?;
    let heights: Vec<usize> = rows.iter().map(|r| r.len()).collect();
    let tall = tallest(&rows);
    let band = rows[comm.rank()].clone();
    let h = band.len();
    let lattice = gpu.to_device(&contiguous(&lattice))?;
    let mut graph = gpu.zeroed::<f32>(tall * n)?;
    gpu.mandelbrot_rows_on_device(
        &lattice,
        &mut graph.index_mut(..h * n),
        band,
        max_iters,
        upper_bound,
        BLOCK,
    )?;
    all_gather_bands(comm, gpu, &graph, &heights, n).and_then(|g| {
        Array2::from_shape_vec((n, n), g).map_err(|e| Error::invalid(K, e.to_string()))
    })
}

/// A graph whose lattice and bands stay on the devices, for repeated runs
/// (the bench's scaling rows).
pub struct MandelbrotBands<'g> {
    gpus: Vec<&'g Gpu>,
    bands: Vec<Band>,
    max_iters: i32,
    upper_bound: f32,
}

impl<'g> MandelbrotBands<'g> {
    /// Splits the graph of `lattice` over `gpus`, copies the lattice to each
    /// and allocates each band. Errors as [`mandelbrot`].
    pub fn upload(
        gpus: &[&'g Gpu],
        lattice: ArrayView1<f32>,
        max_iters: i32,
        upper_bound: f32,
    ) -> Result<Self> {
        let n = lattice.len();
        check_launch(K, n, max_iters, upper_bound, BLOCK)?;
        let rows = bands(K, gpus, n)?;
        let host = contiguous(&lattice);
        let items: Vec<_> = gpus.iter().zip(rows).collect();
        let bands = run_each(K, &labels(gpus), items, |_, (gpu, rows), _| {
            let lattice = gpu.to_device(&host)?;
            let graph = gpu.zeroed(rows.len() * n)?;
            Ok(Band {
                rows,
                lattice,
                graph,
            })
        })?;
        Ok(Self {
            gpus: gpus.to_vec(),
            bands,
            max_iters,
            upper_bound,
        })
    }

    /// Queues `reps` computations of every band (each device on its own
    /// thread, blocks of 256) and waits for all of them.
    pub fn run(&mut self, reps: usize) -> Result<()> {
        let (max_iters, upper_bound) = (self.max_iters, self.upper_bound);
        let items: Vec<_> = self.gpus.iter().zip(self.bands.iter_mut()).collect();
        run_each(K, &labels(&self.gpus), items, |_, (gpu, band), crew| {
            for _ in 0..reps {
                crew.check(K)?;
                gpu.mandelbrot_rows_on_device(
                    &band.lattice,
                    &mut band.graph,
                    band.rows.clone(),
                    max_iters,
                    upper_bound,
                    256,
                )?;
            }
            gpu.synchronize(K)
        })?;
        Ok(())
    }

    /// Copies every band out and joins them into the graph.
    pub fn download(&self) -> Result<Array2<f32>> {
        let n = self.bands.last().map_or(0, |b| b.rows.end);
        let parts: Vec<&DeviceSlice<f32>> = self.bands.iter().map(|b| &*b.graph).collect();
        let graph = gather(K, &self.gpus, &parts)?;
        Array2::from_shape_vec((n, n), graph).map_err(|e| Error::invalid(K, e.to_string()))
    }
}
