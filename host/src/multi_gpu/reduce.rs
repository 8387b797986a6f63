//! Reductions on several GPUs: each device reduces the data it holds (or its
//! contiguous share of a host array), each on its own host thread, and the
//! host combines the per-device results in device order with the
//! operation's own `combine`. Integer results equal one GPU's; float sums
//! differ from one GPU's only by summation order (within
//! [`float_sum_tolerance`](crate::reduce::float_sum_tolerance)).
use crate::memory::{DeviceBuffer, DeviceSlice};
use ndarray::ArrayView1;

use super::{Backend, labels, on_ranks, run_each, split_rows};
use crate::Gpu;
use crate::error::{Error, Result};
use crate::nccl::{self, Communicator, NcclElement};
use crate::reduce::ReduceExt;
use crate::reduce::{
    Element, Max, Min, Product, ReduceKernel, ReduceOrder, ReduceScratch, Sum, reduce_in_gpu_order,
    start_value,
};
use crate::util::contiguous;

const K: &str = "reduce (multi-GPU)";

/// Folds per-device results (`None` for a device with no data) from `init`.
fn combine<Op: ReduceKernel<T>, T: Element>(init: T, parts: Vec<Option<T>>) -> T {
    parts.into_iter().flatten().fold(init, Op::combine)
}

/// Reduces data already resident on each device: `parts[i]` is a slice of
/// `parts[i].0`'s memory. Returns `combine(init, …)` over all of it, as
/// [`Gpu::reduce`](crate::reduce::ReduceExt::reduce) would over the concatenation. Empty parts are skipped.
///
/// Errors: no parts, min/max of nothing without `init`, a failure on a
/// device ([`Error::OnDevice`]).
pub fn reduce_resident<Op: ReduceKernel<T>, T: Element>(
    parts: &[(&Gpu, &DeviceSlice<T>)],
    init: Option<T>,
) -> Result<T> {
    let mut scratch = ReduceScratches::new(&parts.iter().map(|p| p.0).collect::<Vec<_>>())?;
    scratch.reduce::<Op>(parts, init, 1)
}

/// Reduces `input` on `gpus`: split in contiguous shares in device order,
/// each device copies its share in and reduces it on its own thread.
/// Errors as [`reduce_resident`]; also more devices than elements.
pub fn reduce<Op: ReduceKernel<T>, T: Element>(
    gpus: &[&Gpu],
    input: ArrayView1<T>,
    init: Option<T>,
) -> Result<T> {
    let init = start_value::<Op, T>(input.len(), init)?;
    let host = contiguous(&input);
    let shares = split_rows(K, host.len(), gpus.len())?;
    let items: Vec<_> = gpus.iter().zip(shares).collect();
    let parts = run_each(K, &labels(gpus), items, |_, (gpu, share), _| {
        gpu.reduce_slice::<Op, T>(&host[share], None).map(Some)
    })?;
    Ok(combine::<Op, T>(init, parts))
}

/// A reduction NCCL has too: the operation its all-reduce combines the
/// devices' results with (sealed to the reductions NCCL has: sum, product,
/// min, max).
pub trait NcclReduceKernel<T: Element>: ReduceKernel<T> {
    /// NCCL's operation.
    const NCCL: nccl::ReduceOp;
}

macro_rules! nccl_reduction {
    ($($op:ident => $nccl:ident),*) => {$(
        impl<T: Element> NcclReduceKernel<T> for $op
        where
            $op: ReduceKernel<T>,
        {
            const NCCL: nccl::ReduceOp = nccl::ReduceOp::$nccl;
        }
    )*};
}
nccl_reduction!(Sum => Sum, Product => Prod, Min => Min, Max => Max);

/// [`reduce`] on `backend`: with [`Backend::Nccl`], each device reduces
/// its share into a device element, an all-reduce combines the devices'
/// elements on the devices, and the host folds `init` in. Integer results
/// equal [`reduce`]'s; float sums differ only by NCCL's order of adding
/// the devices' results (on the simulator: rank order, as [`reduce`]).
/// Errors as [`reduce`]; also, for NCCL, a device listed twice.
pub fn reduce_with<Op: NcclReduceKernel<T>, T: Element + NcclElement>(
    backend: Backend,
    gpus: &[&Gpu],
    input: ArrayView1<T>,
    init: Option<T>,
) -> Result<T> {
    if backend == Backend::PeerCopies {
        return reduce::<Op, T>(gpus, input, init);
    }
    let init = start_value::<Op, T>(input.len(), init)?;
    let host = contiguous(&input);
    let shares = split_rows(K, host.len(), gpus.len())?;
    let totals = on_ranks(K, gpus, |comm, gpu, _| {
        reduce_rank::<Op, T>(comm, gpu, &host[shares[comm.rank()].clone()])
    })?;
    // Every device holds the same total (NaN aside); any other would be a
    // failed all-reduce.
    #[allow(clippy::eq_op)]
    if totals.windows(2).any(|w| w[0] != w[1] && w[0] == w[0]) {
        return Err(Error::invalid(
            K,
            format!("the devices' all-reduced totals differ: {totals:?}"),
        ));
    }
    Ok(Op::combine(init, totals[0]))
}

/// One rank's part of [`reduce_with`] on NCCL, in a process of its own or
/// on a thread: `share` (this rank's data, non-empty) reduced on `gpu`,
/// then all-reduced with the other ranks' results on the device. Returns
/// the total over every rank's share (the same on every rank).
pub fn reduce_rank<Op: NcclReduceKernel<T>, T: Element + NcclElement>(
    comm: &Communicator,
    gpu: &Gpu,
    share: &[T],
) -> Result<T> {
    let data = gpu.to_device(share)?;
    let mut scratch = gpu.reduce_scratch::<T>()?;
    reduce_resident_rank::<Op, T>(comm, gpu, &data, &mut scratch, 1)
}

/// One rank's part of a reduction on NCCL over data resident on its
/// device (what [`reduce_rank`] runs once, and the bench's NCCL rows
/// time): `reps` times, `data` (non-empty, on `gpu`) reduced into
/// `scratch`'s device element and that element all-reduced with the other
/// ranks', all queued on `gpu`'s stream; then waits (up to the
/// communicator's deadline) and returns the last total over every rank's
/// data (the same on every rank). Every rank calls it with the same `reps`.
pub fn reduce_resident_rank<Op: NcclReduceKernel<T>, T: Element + NcclElement>(
    comm: &Communicator,
    gpu: &Gpu,
    data: &DeviceSlice<T>,
    scratch: &mut ReduceScratch<T>,
    reps: usize,
) -> Result<T> {
    for _ in 0..reps.max(1) {
        gpu.reduce_on_device::<Op, T>(data, None, scratch)?;
        comm.all_reduce_in_place(scratch.result_on_device(), Op::NCCL, gpu.stream())?;
    }
    comm.synchronize(gpu.stream())?;
    scratch.result(gpu)
}

/// What [`reduce`] and [`reduce_resident`] return for `shares`, each the
/// data of the device beside it in a buffer of its own: each share reduced
/// in the order of its device's real launch ([`reduce_in_gpu_order`] with
/// [`Gpu::reduce_launch_shape`](crate::reduce::ReduceExt::reduce_launch_shape) for its length), then the per-device
/// results folded from `init` in device order, as the host does. Exact for
/// every type, float sums included: the reference the multi-device tests
/// and the bench compare with `==`.
pub fn reduce_in_devices_order<Op: ReduceKernel<T>, T: Element>(
    shares: &[(&Gpu, &[T])],
    init: Option<T>,
) -> Result<T> {
    let total = shares.iter().map(|s| s.1.len()).sum();
    let init = start_value::<Op, T>(total, init)?;
    let mut acc = init;
    for &(gpu, share) in shares {
        if share.is_empty() {
            continue;
        }
        let order = ReduceOrder::aligned(gpu.reduce_launch_shape::<Op, T>(share.len())?);
        acc = Op::combine(acc, reduce_in_gpu_order::<Op, T>(share, None, order)?);
    }
    Ok(acc)
}

/// One [`ReduceScratch`] per device, for repeated resident reductions (the
/// bench's scaling rows) without allocating on every run.
pub struct ReduceScratches<T: Element> {
    scratch: Vec<ReduceScratch<T>>,
}

impl<T: Element> ReduceScratches<T> {
    /// A scratch on each of `gpus` (in order).
    pub fn new(gpus: &[&Gpu]) -> Result<Self> {
        if gpus.is_empty() {
            return Err(Error::invalid(
                K,
                "an empty device list: give at least one device",
            ));
        }
        let scratch = run_each(K, &labels(gpus), gpus.to_vec(), |_, gpu, _| {
            gpu.reduce_scratch::<T>()
        })?;
        Ok(Self { scratch })
    }

    /// Queues `reps` reductions of each part on its device (each device on
    /// its own thread), waits, and returns the last one's combined result.
    /// `parts[i]` is reduced with scratch `i`: list the parts in the order
    /// of the GPUs given to [`ReduceScratches::new`].
    pub fn reduce<Op: ReduceKernel<T>>(
        &mut self,
        parts: &[(&Gpu, &DeviceSlice<T>)],
        init: Option<T>,
        reps: usize,
    ) -> Result<T> {
        let total: usize = parts.iter().map(|p| p.1.len()).sum();
        let init = start_value::<Op, T>(total, init)?;
        if parts.len() != self.scratch.len() {
            return Err(Error::invalid(
                K,
                format!(
                    "{} parts for scratch on {} devices",
                    parts.len(),
                    self.scratch.len()
                ),
            ));
        }
        let gpus: Vec<&Gpu> = parts.iter().map(|p| p.0).collect();
        let items: Vec<_> = parts.iter().zip(self.scratch.iter_mut()).collect();
        let results = run_each(
            K,
            &labels(&gpus),
            items,
            |_, (&(gpu, data), scratch), crew| {
                if data.is_empty() {
                    return Ok(None);
                }
                for _ in 0..reps.max(1) {
                    crew.check(K)?;
                    gpu.reduce_on_device::<Op, T>(data, None, scratch)?;
                }
                scratch.result(gpu).map(Some)
            },
        )?;
        Ok(combine::<Op, T>(init, results))
    }
}

/// Copies `input` to `gpus` in contiguous shares, in device order (each
/// device on its own thread), for [`reduce_resident`].
pub fn scatter<T: Element>(gpus: &[&Gpu], input: &[T]) -> Result<Vec<DeviceBuffer<T>>> {
    let shares = split_rows(K, input.len(), gpus.len())?;
    let items: Vec<_> = gpus.iter().zip(shares).collect();
    run_each(K, &labels(gpus), items, |_, (gpu, share), _| {
        gpu.to_device(&input[share])
    })
}
