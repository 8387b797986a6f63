//! Launchers of the scan family ([`cuda_kernels_gpu::scan`]): device-wide
//! inclusive and exclusive scans with any [`ReduceOp`] (sum, min, max built
//! in), single pass with decoupled look-back, over ndarray views and over
//! data already on the device. Free functions taking the [`Gpu`].
//!
//! ```no_run
//! use cuda_kernels_host::scan::{self, Sum};
//! # fn main() -> cuda_kernels_host::Result<()> {
//! # let gpu = cuda_kernels_host::Gpu::from_ptx_file("kernels.ptx")?;
//! let x = ndarray::array![1i32, 2, 3, 4];
//! assert_eq!(scan::inclusive_scan::<Sum, i32>(&gpu, x.view())?, ndarray::array![1, 3, 6, 10]);
//! assert_eq!(scan::exclusive_scan::<Sum, i32>(&gpu, x.view(), None)?, ndarray::array![0, 1, 3, 6]);
//! # Ok(()) }
//! ```
//!
//! Semantics: `inclusive[i] = init ⊕ x_0 ⊕ … ⊕ x_i` and `exclusive[i] =
//! init ⊕ x_0 ⊕ … ⊕ x_{i−1}` (`exclusive[0] = init`), `init` defaulting to
//! the operation's identity (for min and max a sentinel, `i32::MAX` or
//! `+∞`). Integer sums wrap. Float results are the same bits on every run
//! (see the kernel's docs for the order), and differ from the sequential
//! [`scan_cpu`] by rounding only. An empty input gives an empty output
//! without a launch. Lengths past [`MAX_LEN`] are refused with
//! [`Error::InvalidInput`] naming the kernel.
use cust::memory::DeviceCopy;
use cust::memory::bytemuck::Zeroable;
use ndarray::{Array1, ArrayView1};

pub use cuda_kernels_gpu::scan::{
    MIN_TILE, Max, Min, ReduceOp, ScanKernel, Sum, THREADS, items_per_thread, tile,
};

use crate::Gpu;
use crate::error::{Error, Result};
use crate::launch::LaunchConfig;
use crate::launch::MAX_GRID_X;
use crate::memory::{DeviceBuffer, DeviceSlice};
use crate::util::contiguous;

/// The longest input a scan or selection launch takes: one block per tile
/// of at least [`MIN_TILE`] elements, at most `MAX_GRID_X` blocks.
pub const MAX_LEN: usize = MAX_GRID_X as usize * MIN_TILE;

mod sealed {
    pub trait Sealed {}
}

/// An element type of the scan and select kernels: `i32`, `u32`, `i64`,
/// `u64`, `f32`, `f64` (sealed: the kernels exist for these).
pub trait Element:
    DeviceCopy
    + Zeroable
    + Copy
    + Default
    + PartialEq
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
    + crate::kernel::KernelParam<Self>
    + sealed::Sealed
{
}

macro_rules! element {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {}
    )*};
}
element!(i32, u32, i64, u64, f32, f64);

/// Which prefix a scan writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanKind {
    /// `out[i]` includes `x_i`.
    Inclusive,
    /// `out[i]` stops before `x_i`.
    Exclusive,
}

/// The tiles' look-back state of a tiled single-pass launch (scan or
/// selection): the tile counter and flags (zeroed before every launch), and
/// each tile's aggregate and inclusive prefix. Reusable for any input up
/// to its [`capacity`](Self::capacity); one launch at a time (`&mut`).
pub struct TileScratch<A: DeviceCopy> {
    pub(crate) state: DeviceBuffer<u32>,
    pub(crate) aggregates: DeviceBuffer<A>,
    pub(crate) inclusives: DeviceBuffer<A>,
}

impl<A: DeviceCopy + Zeroable> TileScratch<A> {
    /// Room for inputs of up to `len` elements (at least one tile), of any
    /// element type (tiles of [`MIN_TILE`] elements or more).
    pub fn new(gpu: &Gpu, len: usize) -> Result<Self> {
        let tiles = len.div_ceil(MIN_TILE).max(1);
        Ok(Self {
            state: gpu.zeroed(state_words(tiles))?,
            aggregates: gpu.zeroed(tiles)?,
            inclusives: gpu.zeroed(tiles)?,
        })
    }

    /// The longest input it serves.
    pub fn capacity(&self) -> usize {
        self.aggregates.len() * MIN_TILE
    }

    /// Checks that an input of `n` elements fits and this GPU owns the
    /// memory, then queues the zeroing of the counter and flags; returns
    /// the grid (one block per tile of `tile` elements, at least
    /// [`MIN_TILE`]).
    pub(crate) fn prepare(
        &mut self,
        gpu: &Gpu,
        kernel: &'static str,
        n: usize,
        tile: usize,
    ) -> Result<u32> {
        check_len(kernel, n)?;
        if n > self.capacity() {
            return Err(Error::invalid(
                kernel,
                format!("{n} elements: the scratch holds {}", self.capacity()),
            ));
        }
        gpu.check_device(kernel, "scratch", &self.state)?;
        debug_assert!(tile >= MIN_TILE, "{kernel}: a tile of {tile} elements");
        let tiles = n.div_ceil(tile);
        // SAFETY: the state lives in `self`, borrowed mutably for the launch
        // that follows on the same stream.
        unsafe {
            self.state
                .index_mut(..state_words(tiles))
                .set_zero_async(gpu.stream())
        }?;
        Ok(tiles as u32)
    }
}

/// The `u32` words of a tiled launch's state for `tiles` tiles: the tile
/// counter, a pad (the tiles' words are 8-byte aligned), and one 64-bit word
/// per tile (`cuda_kernels_gpu::scan::TileState`).
fn state_words(tiles: usize) -> usize {
    2 + 2 * tiles
}

/// Refuses, for `kernel`, an input of more than [`MAX_LEN`] elements.
pub fn check_len(kernel: &'static str, n: usize) -> Result<()> {
    if n > MAX_LEN {
        return Err(Error::invalid(
            kernel,
            format!("{n} elements: more than the {MAX_LEN} the kernel indexes"),
        ));
    }
    Ok(())
}

/// The inclusive scan of `input` with `Op` (see the [module docs](self)).
pub fn inclusive_scan<Op: ScanKernel<T>, T: Element>(
    gpu: &Gpu,
    input: ArrayView1<T>,
) -> Result<Array1<T>> {
    scan::<Op, T>(gpu, input, ScanKind::Inclusive, None)
}

/// The exclusive scan of `input` with `Op` from `init` (the identity when
/// `None`).
pub fn exclusive_scan<Op: ScanKernel<T>, T: Element>(
    gpu: &Gpu,
    input: ArrayView1<T>,
    init: Option<T>,
) -> Result<Array1<T>> {
    scan::<Op, T>(gpu, input, ScanKind::Exclusive, init)
}

/// The scan of `input` of either kind: copies it to the device, scans,
/// waits and copies the result back.
pub fn scan<Op: ScanKernel<T>, T: Element>(
    gpu: &Gpu,
    input: ArrayView1<T>,
    kind: ScanKind,
    init: Option<T>,
) -> Result<Array1<T>> {
    let n = input.len();
    check_len(Op::ENTRY, n)?;
    if n == 0 {
        return Ok(Array1::from_vec(Vec::new()));
    }
    gpu.bind()?;
    let device_in = gpu.to_device(&contiguous(&input))?;
    // SAFETY: the scan writes every element before the copy back reads it.
    let mut device_out = unsafe { gpu.uninitialized::<T>(n) }?;
    let mut scratch = TileScratch::new(gpu, n)?;
    scan_on_device::<Op, T>(gpu, &device_in, &mut device_out, kind, init, &mut scratch)?;
    gpu.synchronize(Op::ENTRY)?;
    Ok(Array1::from_vec(device_out.to_vec()?))
}

/// Queues the scan of `input` into `output` (of the same length) on
/// [`Gpu::stream`], without waiting. An empty input launches nothing.
pub fn scan_on_device<Op: ScanKernel<T>, T: Element>(
    gpu: &Gpu,
    input: &DeviceSlice<T>,
    output: &mut DeviceSlice<T>,
    kind: ScanKind,
    init: Option<T>,
    scratch: &mut TileScratch<T>,
) -> Result<()> {
    let k = Op::ENTRY;
    let n = input.len();
    if output.len() != n {
        return Err(Error::invalid(
            k,
            format!("output of {} elements for an input of {n}", output.len()),
        ));
    }
    gpu.check_device(k, "input", input)?;
    gpu.check_device(k, "output", output)?;
    if n == 0 {
        return Ok(());
    }
    gpu.bind()?;
    let grid = scratch.prepare(gpu, k, n, tile::<T>())?;
    let cfg = LaunchConfig::linear(grid, THREADS);
    let init = init.unwrap_or_else(Op::identity);
    let exclusive = (kind == ScanKind::Exclusive) as u32;
    // SAFETY: input and output hold n elements (output borrowed mutably, so
    // distinct from input); the grid is one block of THREADS per tile; the
    // state's counter and flags were zeroed on this stream just before, and
    // the scratch (borrowed mutably) has room for `grid` tiles.
    unsafe {
        let args = (
            input,
            output,
            n,
            init,
            exclusive,
            &mut scratch.state,
            &mut scratch.aggregates,
            &mut scratch.inclusives,
        );
        gpu.launch(Op::KERNEL, cfg, gpu.stream(), args)
    }
}

/// The CPU reference, written from the definition: a sequential left fold
/// from `init` (the identity when `None`), element by element.
pub fn scan_cpu<Op: ReduceOp<T>, T: Copy>(input: &[T], kind: ScanKind, init: Option<T>) -> Vec<T> {
    let mut acc = init.unwrap_or_else(Op::identity);
    input
        .iter()
        .map(|&x| {
            let before = acc;
            acc = Op::combine(acc, x);
            match kind {
                ScanKind::Inclusive => acc,
                ScanKind::Exclusive => before,
            }
        })
        .collect()
}
