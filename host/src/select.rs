//! Launchers of the select family ([`cuda_kernels_gpu::select`]): stream
//! compaction by a predicate ([`NonZero`], or any [`SelectOp`] declared with
//! `select_kernels!`) or by flags, returning the kept elements in order
//! (their count is the length). Free functions taking the [`Gpu`].
//!
//! ```no_run
//! use cuda_kernels_host::select::{self, NonZero};
//! # fn main() -> cuda_kernels_host::Result<()> {
//! # let gpu = cuda_kernels_host::Gpu::from_ptx_file("kernels.ptx")?;
//! let x = ndarray::array![0i32, 5, 0, 7];
//! assert_eq!(select::select::<NonZero, i32>(&gpu, x.view())?, ndarray::array![5, 7]);
//! let keep = ndarray::array![true, false, false, true];
//! assert_eq!(select::select_flagged(&gpu, x.view(), keep.view())?, ndarray::array![0, 7]);
//! # Ok(()) }
//! ```
//! An empty input gives an empty output without a launch; inputs of
//! 2^32 elements or more (the count is a `u32`), flags of another length, or
//! an output shorter than the input are refused with
//! [`Error::InvalidInput`] naming the kernel.
use ndarray::{Array1, ArrayView1};

pub use cuda_kernels_gpu::select::{ByFlags, NonZero, SelectKernel, SelectOp};

use crate::Gpu;
use crate::error::{Error, Result};
use crate::launch::LaunchConfig;
use crate::memory::{DeviceBuffer, DeviceSlice};
use crate::scan::{Element, THREADS, TileScratch, tile};
use crate::util::contiguous;

/// The longest input a selection takes: its count is a `u32`.
pub const MAX_LEN: usize = u32::MAX as usize;

/// The scratch of a selection: the tiles' look-back state and the count.
pub struct SelectScratch {
    tiles: TileScratch<u32>,
    count: DeviceBuffer<u32>,
}

impl SelectScratch {
    /// Room for inputs of up to `len` elements.
    pub fn new(gpu: &Gpu, len: usize) -> Result<Self> {
        Ok(Self {
            tiles: TileScratch::new(gpu, len)?,
            count: gpu.zeroed(1)?,
        })
    }

    /// Waits for the queued selection and returns how many elements it kept
    /// (the first that many of its output).
    pub fn count(&self, gpu: &Gpu) -> Result<usize> {
        gpu.bind()?;
        gpu.synchronize("select")?;
        Ok(self.count.to_vec()?[0] as usize)
    }
}

/// The elements of `input` that `Op` keeps, in order.
pub fn select<Op: SelectKernel<T>, T: Element>(
    gpu: &Gpu,
    input: ArrayView1<T>,
) -> Result<Array1<T>> {
    run::<Op, T>(gpu, input, None)
}

/// The elements of `input` whose flag is true, in order.
pub fn select_flagged<T: Element>(
    gpu: &Gpu,
    input: ArrayView1<T>,
    flags: ArrayView1<bool>,
) -> Result<Array1<T>>
where
    ByFlags: SelectKernel<T>,
{
    if flags.len() != input.len() {
        return Err(Error::invalid(
            <ByFlags as SelectKernel<T>>::ENTRY,
            format!("{} flags for {} elements", flags.len(), input.len()),
        ));
    }
    let bytes: Vec<u8> = flags.iter().map(|&f| f as u8).collect();
    run::<ByFlags, T>(gpu, input, Some(&bytes))
}

fn run<Op: SelectKernel<T>, T: Element>(
    gpu: &Gpu,
    input: ArrayView1<T>,
    flags: Option<&[u8]>,
) -> Result<Array1<T>> {
    let n = input.len();
    check_len(Op::ENTRY, n)?;
    if n == 0 {
        return Ok(Array1::from_vec(Vec::new()));
    }
    gpu.bind()?;
    let device_in = gpu.to_device(&contiguous(&input))?;
    let device_flags = flags.map(|f| gpu.to_device(f)).transpose()?;
    // SAFETY: only the first `count` elements, which the kernel writes, are read back.
    let mut device_out = unsafe { gpu.uninitialized::<T>(n) }?;
    let mut scratch = SelectScratch::new(gpu, n)?;
    select_on_device::<Op, T>(
        gpu,
        &device_in,
        device_flags.as_deref(),
        &mut device_out,
        &mut scratch,
    )?;
    let kept = scratch.count(gpu)?;
    let mut out = device_out.to_vec()?;
    out.truncate(kept);
    Ok(Array1::from_vec(out))
}

fn check_len(kernel: &'static str, n: usize) -> Result<()> {
    if n > MAX_LEN {
        return Err(Error::invalid(
            kernel,
            format!("{n} elements: more than the {MAX_LEN} the kernel counts"),
        ));
    }
    Ok(())
}

/// Queues the selection of `input` into the front of `output` on
/// [`Gpu::stream`]; [`SelectScratch::count`] waits and says how many were
/// kept. `flags` (one byte per element, nonzero = keep) is required for
/// [`ByFlags`] and refused otherwise. An empty input launches nothing (the
/// count is then whatever the scratch held: use the host functions).
pub fn select_on_device<Op: SelectKernel<T>, T: Element>(
    gpu: &Gpu,
    input: &DeviceSlice<T>,
    flags: Option<&DeviceSlice<u8>>,
    output: &mut DeviceSlice<T>,
    scratch: &mut SelectScratch,
) -> Result<()> {
    let k = Op::ENTRY;
    let n = input.len();
    check_len(k, n)?;
    if output.len() < n {
        return Err(Error::invalid(
            k,
            format!("output of {} elements for an input of {n}", output.len()),
        ));
    }
    match (Op::BY_FLAGS, flags) {
        (true, Some(f)) if f.len() == n => gpu.check_device(k, "flags", f)?,
        (true, Some(f)) => {
            return Err(Error::invalid(
                k,
                format!("{} flags for {n} elements", f.len()),
            ));
        }
        (true, None) => return Err(Error::invalid(k, "selecting by flags needs the flags")),
        (false, Some(_)) => {
            return Err(Error::invalid(k, "flags given to a predicate's selection"));
        }
        (false, None) => {}
    }
    gpu.check_device(k, "input", input)?;
    gpu.check_device(k, "output", output)?;
    gpu.check_device(k, "scratch", &scratch.count)?;
    if n == 0 {
        return Ok(());
    }
    gpu.bind()?;
    let grid = scratch.tiles.prepare(gpu, k, n, tile::<T>())?;
    let cfg = LaunchConfig::linear(grid, THREADS);
    let flags_ptr = flags.map_or(cust::memory::DevicePointer::null(), |f| f.as_device_ptr());
    // SAFETY: input holds n elements, output at least n (borrowed mutably,
    // distinct); flags n bytes when the predicate reads them (checked
    // above), null otherwise and then never read; n < 2^32; one block of
    // THREADS per tile; the tile state was zeroed on this stream and is
    // borrowed mutably with the count.
    unsafe {
        let args = (
            input,
            flags_ptr,
            output,
            &mut scratch.count,
            n,
            &mut scratch.tiles.state,
            &mut scratch.tiles.aggregates,
            &mut scratch.tiles.inclusives,
        );
        gpu.launch(Op::KERNEL, cfg, gpu.stream(), args)
    }
}

/// The CPU reference: the elements `keep` accepts, in order.
pub fn select_cpu<T: Copy>(input: &[T], keep: impl Fn(usize, T) -> bool) -> Vec<T> {
    input
        .iter()
        .enumerate()
        .filter(|&(i, &x)| keep(i, x))
        .map(|(_, &x)| x)
        .collect()
}
