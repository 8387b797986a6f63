//! The bandwidth-bound kernels in `cuda-kernels bench`: `multiply`,
//! `vector_sum_i32`, every `elementwise_*` kernel and `doubles_matrix`, at
//! 2^26 elements (8192² for `doubles_matrix`) and at an odd size (2^26 + 3,
//! 8191 × 8193) whose arrays start one element into their buffers, so that
//! the vectorized kernels run their element-wise head and tail. Each row is
//! the kernel's bandwidth (bytes read + written) against a device-to-device
//! copy of the same bytes measured just before it, and each result is then
//! checked exactly against the CPU reference after one fresh launch: a
//! mismatch fails the bench. The elementwise kernels on f16 and bf16 run at
//! 2^27 elements.
use std::fmt::Debug;

use crate::{DeviceBuffer, DeviceSlice, DeviceView, DeviceViewMut};
use ndarray::{Array1, ArrayView1, ArrayView2, ArrayViewMut1};

use super::foundation::size_label;
use super::{BenchRecord, Check, exact_check, median_gpu_ms};
use crate::bench::{device_copy_gbps, gb_per_s};
use crate::cust::memory::DeviceCopy;
use crate::kernels::device::float16::{bf16, f16};
use crate::matrices::kernels::{lerp, saxpy, sum};
use crate::matrices::{Elementwise, doubles_matrix_cpu, elementwise_cpu};
use crate::multiply::{multiply_cpu, vector_sum_i32_cpu};

use crate::util::Rng;
use crate::{Error, Gpu, Result};
use cuda_kernels::prelude::*;

const K: &str = "bench";
const REPS: usize = 20;
/// Untimed launches before the timed ones (the first row of a fresh process
/// measured 0.92 of a copy once with a single warm-up launch, 0.996 in the
/// run before).
const WARM_UP: usize = 5;

/// The sizes: `(elements, offset of the arrays into their buffers)`.
const SIZES: [(usize, usize); 2] = [(1 << 26, 0), ((1 << 26) + 3, 1)];

/// Every bandwidth row (see the [module documentation](self)).
pub fn bench(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    gpu.bind()?;
    let bytes = 6usize << 26;
    let copy = device_copy_gbps(gpu, bytes, REPS)?;
    records.push(BenchRecord::new(
        "device copy",
        format!("{} MB", bytes / 1_000_000),
        2.0 * bytes as f64 / (copy * 1e9) * 1e3,
        "GB/s",
        copy,
        Check::Pass(super::foundation::COPY_CHECKED.into()),
    ));
    for (n, offset) in SIZES {
        pair(gpu, records, n, offset)?;
        let f32s = |r: u64| (r >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
        let f64s = |r: u64| (r >> 11) as f64 / (1u64 << 52) as f64 - 1.0;
        let ints = |r: u64| (r >> 44) as i32;
        let longs = |r: u64| (r >> 24) as i64;
        elementwise::<sum, i32>(gpu, records, n, offset, ints, &[])?;
        elementwise::<sum, i64>(gpu, records, n, offset, longs, &[])?;
        elementwise::<sum, f32>(gpu, records, n, offset, f32s, &[])?;
        elementwise::<sum, f64>(gpu, records, n, offset, f64s, &[])?;
        elementwise::<saxpy, f32>(gpu, records, n, offset, f32s, &[1.0001])?;
        elementwise::<saxpy, f64>(gpu, records, n, offset, f64s, &[1.0001])?;
        elementwise::<lerp, f32>(gpu, records, n, offset, f32s, &[])?;
        elementwise::<lerp, f64>(gpu, records, n, offset, f64s, &[])?;
    }
    // The 16-bit floats at 2^27 elements (the bytes of 2^26 f32), values in
    // [-1, 1).
    let n = 1 << 27;
    let unit = |r: u64| (r >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
    let f16s = |r: u64| f16::narrow(unit(r));
    let bf16s = |r: u64| bf16::narrow(unit(r));
    elementwise::<sum, f16>(gpu, records, n, 0, f16s, &[])?;
    elementwise::<sum, bf16>(gpu, records, n, 0, bf16s, &[])?;
    elementwise::<saxpy, f16>(gpu, records, n, 0, f16s, &[f16::narrow(1.0001)])?;
    elementwise::<saxpy, bf16>(gpu, records, n, 0, bf16s, &[bf16::narrow(1.0001)])?;
    elementwise::<lerp, f16>(gpu, records, n, 0, f16s, &[])?;
    elementwise::<lerp, bf16>(gpu, records, n, 0, bf16s, &[])?;
    for (rows, cols, offset) in [(8192usize, 8192usize, 0usize), (8191, 8193, 1)] {
        doubles(gpu, records, rows, cols, offset)?;
    }
    Ok(())
}

/// A timed row, waiting for the check of the result it timed.
struct Timed {
    kernel: String,
    size: String,
    ms: f64,
    gbps: f64,
    copy: f64,
}

impl Timed {
    /// The record, with its check (no ratio when the check failed).
    fn checked(self, check: Check) -> BenchRecord {
        BenchRecord::new(self.kernel, self.size, self.ms, "GB/s", self.gbps, check)
            .against("device copy", self.gbps / self.copy)
    }
}

/// Times `launch` (median of [`REPS`] after [`WARM_UP`]) moving `bytes`,
/// beside a device copy of the same bytes.
fn time_row(
    gpu: &Gpu,
    kernel: &str,
    size: String,
    bytes: usize,
    launch: impl FnMut() -> Result<()>,
) -> Result<Timed> {
    let copy = device_copy_gbps(gpu, bytes / 2, REPS)?;
    let ms = median_gpu_ms(gpu, WARM_UP, REPS, launch)?;
    Ok(Timed {
        kernel: kernel.into(),
        size,
        ms: ms as f64,
        gbps: gb_per_s(bytes, ms),
        copy,
    })
}

/// Host threads for the data and the CPU references (the bench's arrays
/// have 2^26 elements).
fn threads() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get())
}

/// `n` values `value(r)` of 64 pseudo-random bits `r` (a hash of `seed`
/// and the index), filled by [`threads`] host threads.
fn fill<T: Copy + Default + Send>(n: usize, seed: u64, value: impl Fn(u64) -> T + Sync) -> Vec<T> {
    let mut v = vec![T::default(); n];
    let chunk = n.div_ceil(threads()).max(1);
    std::thread::scope(|s| {
        for (c, part) in v.chunks_mut(chunk).enumerate() {
            let value = &value;
            s.spawn(move || {
                for (j, x) in part.iter_mut().enumerate() {
                    *x = value(Rng::new(seed ^ ((c * chunk + j) as u64) << 8).next_u64());
                }
            });
        }
    });
    v
}

/// [`elementwise_cpu`] on [`threads`] host threads, each over one chunk of
/// every array.
fn elementwise_cpu_parallel<Op: Elementwise<T>, T: Copy + Default + Send + Sync>(
    inputs: &[Vec<T>],
    outputs: &mut [Vec<T>],
    scalars: &[T],
) -> Result<()> {
    let n = outputs.first().map_or(0, Vec::len);
    let chunk = n.div_ceil(threads()).max(1);
    let mut parts: Vec<Vec<&mut [T]>> = (0..n.div_ceil(chunk)).map(|_| Vec::new()).collect();
    for out in outputs.iter_mut() {
        for (c, part) in out.chunks_mut(chunk).enumerate() {
            parts[c].push(part);
        }
    }
    std::thread::scope(|s| {
        let workers: Vec<_> = parts
            .into_iter()
            .enumerate()
            .map(|(c, outs)| {
                s.spawn(move || {
                    let range = c * chunk..((c + 1) * chunk).min(n);
                    let ins: Vec<ArrayView1<T>> = inputs
                        .iter()
                        .map(|v| ArrayView1::from(&v[range.clone()]))
                        .collect();
                    let mut outs: Vec<ArrayViewMut1<T>> =
                        outs.into_iter().map(ArrayViewMut1::from).collect();
                    elementwise_cpu::<Op, T>(&ins, &mut outs, scalars)
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .map_err(|_| Error::invalid(K, "a CPU reference thread panicked"))?
        })
    })
}

/// `host` on the device, `offset` elements into a buffer (zeros before).
fn upload<T: DeviceCopy + Default>(
    gpu: &Gpu,
    host: &[T],
    offset: usize,
) -> Result<DeviceBuffer<T>> {
    let mut padded = vec![T::default(); offset];
    padded.extend_from_slice(host);
    gpu.to_device(&padded)
}

/// The `n` elements from `offset` of a device buffer, on the host.
fn download<T: DeviceCopy + Default>(d: &DeviceSlice<T>, n: usize) -> Result<Array1<T>> {
    let mut host = vec![T::default(); d.len()];
    d.copy_to(&mut host[..])?;
    Ok(Array1::from(host.split_off(host.len() - n)))
}

/// The element type's name without its path (`f32`, `bf16`).
fn type_label<T>() -> &'static str {
    let name = std::any::type_name::<T>();
    name.rsplit("::").next().unwrap_or(name)
}

/// ", from element 1" for an offset run, nothing otherwise.
fn from_element(offset: usize) -> String {
    if offset > 0 {
        format!(", from element {offset}")
    } else {
        String::new()
    }
}

/// `multiply` (f32) and `vector_sum_i32`: two inputs, one output.
fn pair(gpu: &Gpu, records: &mut Vec<BenchRecord>, n: usize, offset: usize) -> Result<()> {
    let floats = |r: u64| (r >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
    let multiply = |a: &DeviceSlice<f32>, b: &DeviceSlice<f32>, c: &mut DeviceSlice<f32>| {
        gpu.multiply_on_device(a, b, c)
    };
    two_inputs(
        gpu,
        records,
        "multiply",
        n,
        offset,
        floats,
        multiply,
        multiply_cpu,
    )?;
    let vector_sum = |a: &DeviceSlice<i32>, b: &DeviceSlice<i32>, c: &mut DeviceSlice<i32>| {
        gpu.vector_sum_i32_on_device(a, b, c)
    };
    two_inputs(
        gpu,
        records,
        "vector_sum_i32",
        n,
        offset,
        |r| r as i32,
        vector_sum,
        vector_sum_i32_cpu,
    )
}

/// One row of a kernel `c = f(a, b)` queued by `launch`, checked against
/// `cpu`; the arrays are filled with `value` of random bits.
#[allow(clippy::too_many_arguments)]
fn two_inputs<T: DeviceCopy + Default + PartialEq + Debug + Send>(
    gpu: &Gpu,
    records: &mut Vec<BenchRecord>,
    kernel: &str,
    n: usize,
    offset: usize,
    value: impl Fn(u64) -> T + Sync,
    launch: impl Fn(&DeviceSlice<T>, &DeviceSlice<T>, &mut DeviceSlice<T>) -> Result<()>,
    cpu: impl Fn(ArrayView1<T>, ArrayView1<T>) -> Result<Array1<T>>,
) -> Result<()> {
    let size = format!("{}{}", size_label(n), from_element(offset));
    let a = Array1::from(fill(n, 1, &value));
    let b = Array1::from(fill(n, 2, &value));
    let (da, db) = (
        upload(gpu, &a.to_vec(), offset)?,
        upload(gpu, &b.to_vec(), offset)?,
    );
    let mut dc = upload(gpu, &vec![T::default(); n], offset)?;
    let (sa, sb, mut sc) = (
        da.index(offset..),
        db.index(offset..),
        dc.index_mut(offset..),
    );
    let kind = format!("{size} {}", type_label::<T>());
    let timed = time_row(gpu, kernel, kind, 12 * n, || launch(&sa, &sb, &mut sc))?;
    gpu.synchronize(K)?;
    let check = exact_check(&download(&dc, n)?, &cpu(a.view(), b.view())?);
    records.push(timed.checked(check));
    Ok(())
}

/// Elementwise kernel `Op` on `T`: every array filled with `value` of
/// random bits; the in-out arrays reset before the checked launch.
fn elementwise<Op, T>(
    gpu: &Gpu,
    records: &mut Vec<BenchRecord>,
    n: usize,
    offset: usize,
    value: impl Fn(u64) -> T + Sync,
    scalars: &[T],
) -> Result<()>
where
    Op: Elementwise<T>,
    T: DeviceCopy + Default + PartialEq + Debug + Send + Sync,
{
    let size = format!("{}{}", size_label(n), from_element(offset));
    let (ni, no, nio) = (Op::INPUTS.len(), Op::OUTPUTS.len(), Op::INOUTS.len());
    let host: Vec<Vec<T>> = (0..ni + no + nio)
        .map(|k| fill(n, 10 + k as u64, &value))
        .collect();
    let mut bufs = host
        .iter()
        .map(|h| upload(gpu, h, offset))
        .collect::<Result<Vec<_>>>()?;
    let bytes = (ni + no + 2 * nio) * n * std::mem::size_of::<T>();
    let run = |bufs: &mut [DeviceBuffer<T>]| {
        let (ins, outs) = bufs.split_at_mut(ni);
        let ins: Vec<DeviceView<T>> = ins.iter().map(|b| b.index(offset..)).collect();
        let mut outs: Vec<DeviceViewMut<T>> =
            outs.iter_mut().map(|b| b.index_mut(offset..)).collect();
        let in_refs: Vec<&DeviceSlice<T>> = ins.iter().map(|v| &**v).collect();
        let mut out_refs: Vec<&mut DeviceSlice<T>> = outs.iter_mut().map(|v| &mut **v).collect();
        gpu.elementwise_on_device::<Op, T>(&in_refs, &mut out_refs, scalars)
    };
    let kind = format!("{size} {}", type_label::<T>());
    let timed = time_row(gpu, Op::ENTRY, kind, bytes, || run(&mut bufs))?;
    // The check: fresh in-out arrays, one launch, against the CPU.
    gpu.synchronize(K)?;
    for (buf, h) in bufs[ni..].iter_mut().zip(&host[ni..]) {
        *buf = upload(gpu, h, offset)?;
    }
    run(&mut bufs)?;
    gpu.synchronize(K)?;
    let mut expected: Vec<Vec<T>> = host[ni..].to_vec();
    elementwise_cpu_parallel::<Op, T>(&host[..ni], &mut expected, scalars)?;
    let mut check = Check::Pass("exact".into());
    for (buf, want) in bufs[ni..].iter().zip(expected) {
        let c = exact_check(&download(buf, n)?, &Array1::from(want));
        if matches!(c, Check::Fail(_)) {
            check = c;
        }
    }
    records.push(timed.checked(check));
    Ok(())
}

/// `doubles_matrix` in place on a `rows × cols` matrix, `offset` elements
/// into its buffer (8 bytes moved per element).
fn doubles(
    gpu: &Gpu,
    records: &mut Vec<BenchRecord>,
    rows: usize,
    cols: usize,
    offset: usize,
) -> Result<()> {
    let n = rows * cols;
    let size = format!("{rows}×{cols} f32{}", from_element(offset));
    let host = fill(n, 5, |r: u64| (r >> 40) as f32 / (1u64 << 23) as f32 - 1.0);
    let mut dm = upload(gpu, &host, offset)?;
    let mut sm = dm.index_mut(offset..);
    let timed = time_row(gpu, "doubles_matrix", size, 8 * n, || {
        gpu.doubles_matrix_on_device(&mut sm, rows, cols)
    })?;
    gpu.synchronize(K)?;
    dm = upload(gpu, &host, offset)?;
    let mut sm = dm.index_mut(offset..);
    gpu.doubles_matrix_on_device(&mut sm, rows, cols)?;
    gpu.synchronize(K)?;
    let want = doubles_matrix_cpu(
        ArrayView2::from_shape((rows, cols), &host[..])
            .map_err(|e| Error::invalid(K, e.to_string()))?,
    );
    let got = download(&dm, n)?
        .into_shape_with_order((rows, cols))
        .map_err(|e| Error::invalid(K, e.to_string()))?;
    records.push(timed.checked(exact_check(&got, &want)));
    Ok(())
}
