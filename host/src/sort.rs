//! Launchers for the radix sort family (`radix_sort_histogram_<t>`,
//! `radix_sort_onesweep_<t>`; the algorithm is described in
//! [`cuda_kernels_gpu::sort`]): stable sorts of `u32`, `i32`, `f32`, `u64`,
//! `i64` and `f64` keys, alone or with u32 values or with their input
//! indices, ascending or descending.
//!
//! ```no_run
//! use cuda_kernels_host::sort::{self, Order};
//! # use cuda_kernels_host::prelude::*;
//! # fn main() -> cuda_kernels_host::Result<()> {
//! # let gpu = cuda_kernels_host::Gpu::simulator()?;
//! let keys = ndarray::array![2.5f32, f32::NAN, -0.0, 0.0, -1.0];
//! let sorted = sort::sort(&gpu, keys.view(), Order::Ascending)?;
//! // -1, -0, +0, 2.5, NaN: `total_cmp`'s order, NaN last.
//! let (sorted, indices) = sort::argsort(&gpu, keys.view(), Order::Descending)?;
//! # Ok(()) }
//! ```
//!
//! Semantics:
//! - the order is the keys' order, floats as `total_cmp` orders them
//!   (`-0.0` before `+0.0`) except that every NaN, whatever its sign and
//!   payload, is greater than every number and equal to every other NaN;
//!   keys come out with the bits they went in with;
//! - stable: equal keys (and NaNs) keep their input order, in both orders
//!   (descending is not the reverse of ascending: ties stay in input order);
//! - an empty input is an empty result; more than [`MAX_KEYS`] keys, or key
//!   and value arrays of different lengths, are [`Error::InvalidInput`]
//!   naming the onesweep kernel.
use std::cmp::Ordering;

use cust::memory::bytemuck::Zeroable;
use cust::memory::{DeviceCopy, DevicePointer};
use ndarray::{Array1, ArrayView1};

pub use cuda_kernels_gpu::sort::{
    BLOCK, MAX_KEYS, SortKey, TILE, onesweep_dynamic_shared, onesweep_shape, tile,
};

use crate::Gpu;
use crate::error::{Error, Result};
use crate::launch::LaunchConfig;
use crate::launch::same_len;
use crate::memory::{DeviceBuffer, DeviceSlice};
use crate::util::contiguous;

/// Sort order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Smallest first (NaN last).
    Ascending,
    /// Largest first (NaN first); equal keys keep their input order.
    Descending,
}

mod sealed {
    pub trait Sealed {}
}

/// A key type the sort takes: `u32`, `i32`, `f32`, `u64`, `i64`, `f64`
/// (sealed: the kernels exist for these).
pub trait Key: SortKey + DeviceCopy + Zeroable + sealed::Sealed + std::fmt::Debug {
    /// The order of the [module docs](self), written for the CPU
    /// reference: the key type's own order, floats by `total_cmp` with
    /// every NaN greater than every number and equal to every NaN.
    fn reference_cmp(&self, other: &Self) -> Ordering;
}

macro_rules! integer_keys {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Key for $t {
            fn reference_cmp(&self, other: &Self) -> Ordering {
                self.cmp(other)
            }
        }
    )*};
}
integer_keys!(u32, i32, u64, i64);

macro_rules! float_keys {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Key for $t {
            fn reference_cmp(&self, other: &Self) -> Ordering {
                match (self.is_nan(), other.is_nan()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Greater,
                    (false, true) => Ordering::Less,
                    (false, false) => self.total_cmp(other),
                }
            }
        }
    )*};
}
float_keys!(f32, f64);

/// The values that travel with the keys.
enum Values<'a> {
    /// Keys only.
    None,
    /// The caller's values, permuted with their keys.
    Given(&'a mut DeviceSlice<u32>),
    /// Each key's input index, written into this slice.
    Indices(&'a mut DeviceSlice<u32>),
}

/// The device memory of sorts of up to `capacity` keys of type `K`: the
/// second buffer of keys (and values) each pass writes into, the digit
/// histogram with the tile counters, the look-back status words. Reusing
/// one across sorts saves the allocations.
pub struct RadixSort<K: Key> {
    capacity: usize,
    keys: DeviceBuffer<K>,
    values: Option<DeviceBuffer<u32>>,
    /// `passes · 256` digit counts, then one tile counter per pass.
    histogram: DeviceBuffer<u32>,
    status: DeviceBuffer<u32>,
}

/// Digit passes of a sort of `K` keys.
const fn passes<K: Key>() -> usize {
    (K::BITS / 8) as usize
}

impl<K: Key> RadixSort<K> {
    /// The memory for sorts of up to `capacity` keys, with values (or
    /// indices) when `with_values`.
    pub fn new(gpu: &Gpu, capacity: usize, with_values: bool) -> Result<Self> {
        let name = K::ONESWEEP.name();
        if capacity > MAX_KEYS {
            return Err(Error::invalid(
                name,
                format!("{capacity} keys: at most {MAX_KEYS} (the look-back counts below 2^30)"),
            ));
        }
        gpu.bind()?;
        // Tiles of keys with values are never larger than those of keys alone.
        let tiles = capacity.div_ceil(tile(size_of::<K>(), with_values));
        // SAFETY: each pass writes these in full before the next reads them
        // (the histogram and status words are zeroed before use).
        unsafe {
            Ok(Self {
                capacity,
                keys: gpu.uninitialized(capacity)?,
                values: if with_values {
                    Some(gpu.uninitialized(capacity)?)
                } else {
                    None
                },
                histogram: gpu.uninitialized(passes::<K>() * 257)?,
                status: gpu.uninitialized(tiles * 256)?,
            })
        }
    }

    /// Sorts `keys` in place on the device.
    pub fn sort(&mut self, gpu: &Gpu, keys: &mut DeviceSlice<K>, order: Order) -> Result<()> {
        self.run(gpu, keys, Values::None, order)
    }

    /// Sorts `keys` in place and permutes `values` with them.
    pub fn sort_pairs(
        &mut self,
        gpu: &Gpu,
        keys: &mut DeviceSlice<K>,
        values: &mut DeviceSlice<u32>,
        order: Order,
    ) -> Result<()> {
        self.run(gpu, keys, Values::Given(values), order)
    }

    /// Sorts `keys` in place and writes each sorted key's input index into
    /// `indices`.
    pub fn argsort(
        &mut self,
        gpu: &Gpu,
        keys: &mut DeviceSlice<K>,
        indices: &mut DeviceSlice<u32>,
        order: Order,
    ) -> Result<()> {
        self.run(gpu, keys, Values::Indices(indices), order)
    }

    /// Queues the sort on [`Gpu::stream`]: the histogram, then one onesweep
    /// pass per digit, ping-ponging between the caller's buffers and this
    /// memory (an even number of passes ends in the caller's).
    fn run(
        &mut self,
        gpu: &Gpu,
        keys: &mut DeviceSlice<K>,
        mut values: Values<'_>,
        order: Order,
    ) -> Result<()> {
        let name = K::ONESWEEP.name();
        let n = keys.len();
        // Every buffer the passes reach, the caller's and this sort's own,
        // is checked here: the values and the second buffers go to the
        // kernels as raw pointers, which the launch cannot check.
        gpu.check_device(name, "keys", keys)?;
        let argument = match values {
            Values::Indices(_) => "indices",
            _ => "values",
        };
        let user_values = match &mut values {
            Values::None => None,
            Values::Given(v) | Values::Indices(v) => {
                gpu.check_device(name, argument, v)?;
                same_len(name, "keys and values", n, v.len())?;
                Some(v.as_device_ptr())
            }
        };
        gpu.check_device(name, "the sort's memory (RadixSort)", &self.keys)?;
        if let Some(v) = &self.values {
            gpu.check_device(name, "the sort's memory (RadixSort)", v)?;
        }
        gpu.check_device(name, "the sort's memory (RadixSort)", &self.histogram)?;
        gpu.check_device(name, "the sort's memory (RadixSort)", &self.status)?;
        if n > self.capacity {
            return Err(Error::invalid(
                name,
                format!("{n} keys: this sort's memory holds {}", self.capacity),
            ));
        }
        let temp_values = match (&user_values, &self.values) {
            (None, _) => None,
            (Some(_), Some(v)) => Some(v.as_device_ptr()),
            (Some(_), None) => {
                return Err(Error::invalid(
                    name,
                    "values given to a sort whose memory was made without values",
                ));
            }
        };
        if n == 0 {
            return Ok(());
        }
        gpu.bind()?;
        let stream = gpu.stream();
        let passes = passes::<K>();
        let descending = (order == Order::Descending) as u32;
        let with_values = user_values.is_some();
        let tiles = n.div_ceil(tile(size_of::<K>(), with_values));
        let onesweep = if with_values {
            K::ONESWEEP_PAIRS
        } else {
            K::ONESWEEP
        };
        let dynamic_shared = onesweep_dynamic_shared(size_of::<K>(), with_values);
        gpu.allow_dynamic_shared(onesweep, dynamic_shared)?;
        let (threads, _) = onesweep_shape(size_of::<K>(), with_values);
        let onesweep_cfg = LaunchConfig::linear(tiles as u32, threads).with_shared(dynamic_shared);
        // SAFETY: the histogram stays allocated (self) until the stream
        // reaches the memset.
        unsafe { self.histogram.set_zero_async(stream) }?;
        let grid = tiles.min(1024) as u32;
        // SAFETY: keys holds n keys; the histogram passes · 257 ≥ passes · 256
        // zeroed u32; passes · 8 = K::BITS; blocks of BLOCK threads.
        unsafe {
            gpu.launch(
                K::HISTOGRAM,
                LaunchConfig::linear(grid, BLOCK),
                stream,
                (&*keys, n, descending, &mut self.histogram),
            )
        }?;
        let null = DevicePointer::<u32>::null();
        let buffers = [keys.as_device_ptr(), self.keys.as_device_ptr()];
        for p in 0..passes {
            let (from, to) = (p % 2, (p + 1) % 2);
            let (values_in, values_out) = match (user_values, temp_values) {
                (Some(user), Some(temp)) => {
                    let v = [user, temp];
                    let first_indices = p == 0 && matches!(values, Values::Indices(_));
                    (if first_indices { null } else { v[from] }, v[to])
                }
                _ => (null, null),
            };
            let status = &mut self.status.index_mut(..tiles * 256);
            // SAFETY: the status words stay allocated (self) until the
            // stream reaches the memset.
            unsafe { status.set_zero_async(stream) }?;
            // The histogram buffer: every pass's 256 counts, then one tile
            // counter per pass.
            let (counts, mut counters) = self.histogram.split_at_mut(passes * 256);
            let totals = counts.index(p * 256..(p + 1) * 256);
            let mut counter = counters.index_mut(p..p + 1);
            // SAFETY: buffers[from] and buffers[to] hold n ≤ MAX_KEYS keys each
            // and are distinct allocations; the values likewise (or null: keys
            // only / indices); totals is this pass's 256 counts, written by
            // the histogram kernel before on this stream; status holds
            // tiles · 256 zeroed words and the counter is zero (from the
            // histogram's zeroing, one counter per pass); one block per tile,
            // of the kernel's shape, with its dynamic shared memory.
            unsafe {
                gpu.launch(
                    onesweep,
                    onesweep_cfg,
                    stream,
                    (
                        buffers[from],
                        values_in,
                        buffers[to],
                        values_out,
                        &totals,
                        &mut *status,
                        &mut counter,
                        n,
                        (p * 8) as u32,
                        descending,
                    ),
                )
            }?;
        }
        Ok(())
    }
}

/// `keys` sorted (see the [module docs](self)).
pub fn sort<K: Key>(gpu: &Gpu, keys: ArrayView1<K>, order: Order) -> Result<Array1<K>> {
    let (keys, _) = sort_host(gpu, keys, None, order)?;
    Ok(keys)
}

/// `keys` sorted, and `values` permuted with them.
pub fn sort_pairs<K: Key>(
    gpu: &Gpu,
    keys: ArrayView1<K>,
    values: ArrayView1<u32>,
    order: Order,
) -> Result<(Array1<K>, Array1<u32>)> {
    same_len(
        K::ONESWEEP.name(),
        "keys and values",
        keys.len(),
        values.len(),
    )?;
    let (keys, values) = sort_host(gpu, keys, Some(Some(values)), order)?;
    Ok((keys, values.unwrap_or_default()))
}

/// `keys` sorted, and each sorted key's index in `keys` (what
/// `torch.sort(stable=True)` returns).
pub fn argsort<K: Key>(
    gpu: &Gpu,
    keys: ArrayView1<K>,
    order: Order,
) -> Result<(Array1<K>, Array1<u32>)> {
    let (keys, indices) = sort_host(gpu, keys, Some(None), order)?;
    Ok((keys, indices.unwrap_or_default()))
}

/// Copies in, sorts (values: `None` keys only, `Some(None)` indices,
/// `Some(Some(v))` given), copies out.
fn sort_host<K: Key>(
    gpu: &Gpu,
    keys: ArrayView1<K>,
    values: Option<Option<ArrayView1<u32>>>,
    order: Order,
) -> Result<(Array1<K>, Option<Array1<u32>>)> {
    let name = K::ONESWEEP.name();
    let n = keys.len();
    if n > MAX_KEYS {
        return Err(Error::invalid(
            name,
            format!("{n} keys: at most {MAX_KEYS} (the look-back counts below 2^30)"),
        ));
    }
    if n == 0 {
        return Ok((Array1::from(vec![]), values.map(|_| Array1::from(vec![]))));
    }
    let mut sorter = RadixSort::<K>::new(gpu, n, values.is_some())?;
    let mut d_keys = gpu.to_device(&contiguous(&keys))?;
    let d_values = match values {
        None => None,
        Some(None) => {
            // SAFETY: the first pass writes every index.
            Some(unsafe { gpu.uninitialized::<u32>(n) }?)
        }
        Some(Some(v)) => Some(gpu.to_device(&contiguous(&v))?),
    };
    match (d_values, values) {
        (None, _) => {
            sorter.sort(gpu, &mut d_keys, order)?;
            gpu.synchronize(name)?;
            Ok((Array1::from(d_keys.to_vec()?), None))
        }
        (Some(mut d_values), v) => {
            if matches!(v, Some(None)) {
                sorter.argsort(gpu, &mut d_keys, &mut d_values, order)?;
            } else {
                sorter.sort_pairs(gpu, &mut d_keys, &mut d_values, order)?;
            }
            gpu.synchronize(name)?;
            Ok((
                Array1::from(d_keys.to_vec()?),
                Some(Array1::from(d_values.to_vec()?)),
            ))
        }
    }
}

/// The CPU reference: `keys` with their input indices, stably sorted by
/// [`Key::reference_cmp`] (reversed for [`Order::Descending`]), from the
/// definition (the standard library's stable sort).
pub fn sort_cpu<K: Key>(keys: &[K], order: Order) -> (Vec<K>, Vec<u32>) {
    let mut pairs: Vec<(K, u32)> = keys.iter().copied().zip(0..).collect();
    pairs.sort_by(|a, b| match order {
        Order::Ascending => a.0.reference_cmp(&b.0),
        Order::Descending => b.0.reference_cmp(&a.0),
    });
    pairs.into_iter().unzip()
}
