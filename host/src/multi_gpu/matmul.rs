//! SGEMM on several GPUs, split by rows of C: device `i` multiplies its
//! band of rows of A by all of B and writes that band of C. Each band is an
//! ordinary tiled SGEMM ([`Gpu::matrix_mul_tiled`](crate::matrices::matmul::MatmulExt::matrix_mul_tiled)), so the result is within
//! the same error bound as one GPU's.
use std::ops::Range;

use crate::memory::{DeviceBuffer, DeviceSlice};
use ndarray::{Array2, ArrayView2, Axis, s};

use super::{Backend, bands, gather, labels, rank_zero, run_each, tallest};
use crate::Gpu;
use crate::error::{Error, Result};
use crate::matrices::MatmulKernel;
use crate::matrices::matmul::MatmulExt;
use crate::nccl::Communicator;

const K: &str = "matmul (multi-GPU)";

/// Checks `A · B` and returns `(m, k, n)`.
fn check_shapes(a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<(usize, usize, usize)> {
    if a.ncols() != b.nrows() {
        return Err(Error::invalid(
            K,
            format!("inner dimensions differ: {:?} · {:?}", a.dim(), b.dim()),
        ));
    }
    Ok((a.nrows(), a.ncols(), b.ncols()))
}

/// `C = A · B` on `gpus`, C's rows split in contiguous bands, one per
/// device (in order), each device on its own host thread: it copies its
/// rows of A and all of B in, multiplies, and copies its rows of C out.
///
/// Errors: inner dimensions that differ, no devices, more devices than rows
/// of C (before anything runs), a failure on a device
/// ([`Error::OnDevice`], naming it).
pub fn matmul(gpus: &[&Gpu], a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Array2<f32>> {
    let (m, _, _) = check_shapes(a, b)?;
    let rows = bands(K, gpus, m)?;
    let items: Vec<_> = gpus.iter().zip(rows).collect();
    let parts = run_each(K, &labels(gpus), items, |_, (gpu, band), crew| {
        crew.check(K)?;
        gpu.matrix_mul_tiled(a.slice(s![band, ..]), b)
    })?;
    let views: Vec<_> = parts.iter().map(|p| p.view()).collect();
    ndarray::concatenate(Axis(0), &views).map_err(|e| Error::invalid(K, e.to_string()))
}

/// [`matmul`] on `backend`: with [`Backend::Nccl`] each device multiplies
/// its band of rows of A by B on the device, then an all-gather gives every
/// device all of C (rank 0's copy is returned). The same bands, the same
/// kernel: the same C as [`matmul`], bit for bit. Errors as [`matmul`];
/// also, for NCCL, a device listed twice.
pub fn matmul_with(
    backend: Backend,
    gpus: &[&Gpu],
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
) -> Result<Array2<f32>> {
    if backend == Backend::PeerCopies {
        return matmul(gpus, a, b);
    }
    rank_zero(K, gpus, |comm, gpu, _| matmul_rank(comm, gpu, a, b))
}

/// One rank's part of [`matmul_with`] on NCCL, in a process of its own or
/// on a thread: band `rank` of C's rows (as [`split_rows`](super::split_rows)
/// splits them over the communicator's ranks) computed on `gpu`, then
/// all-gathered: all of C on every rank. Every rank
/// passes the whole of A and B.
pub fn matmul_rank(
    comm: &Communicator,
    gpu: &Gpu,
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
) -> Result<Array2<f32>> {
    let mut rank = MatmulRank::upload(comm, gpu, a, b)?;
    rank.run(comm, gpu, 1)?;
    rank.download()
}

/// One rank's share of a product on NCCL, resident between runs (what
/// [`matmul_rank`] runs once, and the bench's NCCL rows time): its band of
/// rows of A and all of B on its device, its band of C padded to the
/// tallest band's rows, and all of C as the all-gather leaves it.
pub struct MatmulRank {
    /// The rows of every rank's band, in rank order.
    heights: Vec<usize>,
    /// This rank's band's rows.
    h: usize,
    a: DeviceBuffer<f32>,
    b: DeviceBuffer<f32>,
    c_band: DeviceBuffer<f32>,
    c_all: DeviceBuffer<f32>,
    k: usize,
    n: usize,
}

impl MatmulRank {
    /// Copies band `comm.rank()` of A's rows (as [`split_rows`](super::split_rows)
    /// splits them over the communicator's ranks) and all of B to `gpu`.
    /// Every rank passes the whole of A and B. Errors as [`matmul`].
    pub fn upload(
        comm: &Communicator,
        gpu: &Gpu,
        a: ArrayView2<f32>,
        b: ArrayView2<f32>,
    ) -> Result<Self> {
        let (m, k, n) = check_shapes(a, b)?;
        let bands = super::split_rows(K, m, comm.ranks())?;
        let heights: Vec<usize> = bands.iter().map(|r| r.len()).collect();
        let tall = tallest(&bands);
        let rows = bands[comm.rank()].clone();
        let h = rows.len();
        let a_band = a.slice(s![rows, ..]).as_standard_layout().to_owned();
        let b_host = b.as_standard_layout();
        let (a_flat, b_flat) = a_band
            .as_slice()
            .zip(b_host.as_slice())
            .ok_or_else(|| Error::invalid(K, "A or B not contiguous"))?;
        Ok(Self {
            heights,
            h,
            a: gpu.to_device(a_flat)?,
            b: gpu.to_device(b_flat)?,
            c_band: gpu.zeroed::<f32>(tall * n)?,
            c_all: gpu.zeroed::<f32>(tall * n * comm.ranks())?,
            k,
            n,
        })
    }

    /// Queues `reps` times this rank's product and the all-gather of every
    /// rank's band of C on `gpu`'s stream, and waits for them (up to the
    /// communicator's deadline). Every rank calls it with the same `reps`.
    pub fn run(&mut self, comm: &Communicator, gpu: &Gpu, reps: usize) -> Result<()> {
        let (h, k, n) = (self.h, self.k, self.n);
        for _ in 0..reps {
            gpu.matmul_on_device(
                MatmulKernel::Tiled,
                &self.a,
                &self.b,
                &mut self.c_band.index_mut(..h * n),
                h,
                k,
                n,
            )?;
            comm.all_gather(&self.c_band, &mut self.c_all, gpu.stream())?;
        }
        comm.synchronize(gpu.stream())
    }

    /// All of C, as the last [`run`](Self::run)'s all-gather left it on
    /// this rank's device.
    pub fn download(&self) -> Result<Array2<f32>> {
        let c = super::band_rows(
            &self.c_all.to_vec()?,
            self.c_band.len(),
            &self.heights,
            self.n,
        );
        let m = self.heights.iter().sum();
        Array2::from_shape_vec((m, self.n), c).map_err(|e| Error::invalid(K, e.to_string()))
    }
}

/// One device's share of a resident product: its rows of A, all of B, its
/// rows of C.
struct Band {
    rows: Range<usize>,
    a: DeviceBuffer<f32>,
    b: DeviceBuffer<f32>,
    c: DeviceBuffer<f32>,
}

/// A product whose operands stay on the devices, for repeated runs (the
/// bench's scaling rows): [`MatmulBands::upload`] copies each device its
/// band of A and all of B, [`MatmulBands::run`] queues the products on
/// every device at once and waits, [`MatmulBands::download`] gathers C.
pub struct MatmulBands<'g> {
    gpus: Vec<&'g Gpu>,
    bands: Vec<Band>,
    k: usize,
    n: usize,
}

impl<'g> MatmulBands<'g> {
    /// Splits `A · B` over `gpus` and copies the operands in (each device on
    /// its own thread). Errors as [`matmul`].
    pub fn upload(gpus: &[&'g Gpu], a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Self> {
        let (m, k, n) = check_shapes(a, b)?;
        let rows = bands(K, gpus, m)?;
        let b_host = b.as_standard_layout();
        let b_flat = b_host
            .as_slice()
            .ok_or_else(|| Error::invalid(K, "B not contiguous"))?;
        let items: Vec<_> = gpus.iter().zip(rows).collect();
        let bands = run_each(K, &labels(gpus), items, |_, (gpu, rows), _| {
            let a_band = a.slice(s![rows.clone(), ..]);
            let a_band = a_band.as_standard_layout();
            let a_flat = a_band
                .as_slice()
                .ok_or_else(|| Error::invalid(K, "A not contiguous"))?;
            let a = gpu.to_device(a_flat)?;
            let b = gpu.to_device(b_flat)?;
            let c = gpu.zeroed(rows.len() * n)?;
            Ok(Band { rows, a, b, c })
        })?;
        Ok(Self {
            gpus: gpus.to_vec(),
            bands,
            k,
            n,
        })
    }

    /// Queues `reps` products on every device (each on its own thread) and
    /// waits for all of them.
    pub fn run(&mut self, reps: usize) -> Result<()> {
        let (k, n) = (self.k, self.n);
        let items: Vec<_> = self.gpus.iter().zip(self.bands.iter_mut()).collect();
        run_each(K, &labels(&self.gpus), items, |_, (gpu, band), crew| {
            for _ in 0..reps {
                crew.check(K)?;
                let m = band.rows.len();
                gpu.matmul_on_device(MatmulKernel::Tiled, &band.a, &band.b, &mut band.c, m, k, n)?;
            }
            gpu.synchronize(MatmulKernel::Tiled.entry())
        })?;
        Ok(())
    }

    /// Copies every band of C out and joins them.
    pub fn download(&self) -> Result<Array2<f32>> {
        let m = self.bands.last().map_or(0, |b| b.rows.end);
        let parts: Vec<&DeviceSlice<f32>> = self.bands.iter().map(|b| &*b.c).collect();
        let c = gather(K, &self.gpus, &parts)?;
        Array2::from_shape_vec((m, self.n), c).map_err(|e| Error::invalid(K, e.to_string()))
    }
}
