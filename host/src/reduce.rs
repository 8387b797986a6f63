//! Launchers for K10 `reduce_*` (seed 001, Numba's `@cuda.reduce`): a
//! generic parallel reduction over `i32`, `i64`, `f32` and `f64` with any
//! operation declared in `kernels-gpu` (sum, product, min, max built in; see
//! [`cuda_kernels_gpu::reduce`] for declaring another), and an optional
//! initial value like Numba's `init=`.
//!
//! ```no_run
//! use cuda_kernels_host::reduce::{Max, Sum};
//! # use cuda_kernels_host::prelude::*;
//! # fn main() -> cuda_kernels_host::Result<()> {
//! # let gpu = cuda_kernels_host::Gpu::from_ptx_file("kernels.ptx")?;
//! // The seed: sum(1..=10000) as i64.
//! let a = ndarray::Array1::from_iter(1..=10_000i64);
//! assert_eq!(gpu.reduce::<Sum, i64>(a.view(), None)?, 50_005_000);
//! // `init` is combined with the result (Numba's `init=`).
//! assert_eq!(gpu.reduce::<Max, i64>(a.view(), Some(20_000))?, 20_000);
//! # Ok(()) }
//! ```
//!
//! Semantics, for every entry point `reduce_<op>_<type>`:
//! - the result is `combine(init, combine over all elements)`, `init`
//!   defaulting to the operation's identity;
//! - an empty input gives `init`, or the identity (0 for sum, 1 for product);
//!   min and max of an empty input without `init` are refused with
//!   [`Error::InvalidInput`] (there is no meaningful value);
//! - integer sums and products wrap on overflow (two's complement), on the
//!   GPU and in [`reduce_cpu`] alike, so integer results are exact;
//! - float sums and products are combined in a tree (documented in
//!   [`cuda_kernels_gpu::reduce`]), not left to right: they differ from the
//!   sequential [`reduce_cpu`] by rounding, within
//!   [`float_sum_tolerance`], and equal to [`reduce_in_gpu_order`], the
//!   CPU emulation of the kernel's order; float min and max are exact (NaNs
//!   ignored).
//!
//! Any length works, including lengths beyond 2^31 elements, slices that do
//! not start on a 16-byte boundary, and lengths that are not a multiple of
//! the block or of the 16-byte vector. Results are deterministic: the same
//! input and length on the same GPU give the same bits every time (the last
//! block combines the partials in block order, whichever block finishes
//! last).
//!
//! Performance: `cuda-kernels bench` measures these kernels against a
//! device-to-device copy of the same bytes in the same run; the README's
//! performance table is rendered from its JSON, and `docs/benchmarks.md`
//! says how and when the outside references (`torch.sum`) were measured.
//! Numbers live there only (and the block size's in `docs/tuning.md`).
use std::fmt::Debug;

use cuda_kernels_device::float16 as dev;
use cust::memory::DeviceCopy;
use ndarray::ArrayView1;

pub use cuda_kernels_gpu::reduce::{
    Max, Min, Product, ReduceKernel, ReduceOp, SHARED_BYTES, Sum, Xor, fold,
};

use crate::Gpu;
use crate::error::{CudaResultExt, Error, Result};
use crate::launch::LaunchConfig;
use crate::memory::{DeviceBuffer, DeviceSlice};
use crate::simulator;
use crate::util::contiguous;

/// Threads per block of the reduction kernels (a multiple of 32): the
/// fastest measured (`docs/tuning.md`).
pub const BLOCK: u32 = 1024;

mod sealed {
    pub trait Sealed {}
}

/// An element type the reduction kernels read on the device: the
/// [`Element`]s, combined in their own type, and the device crate's 16-bit
/// floats `f16` and `bf16`, combined in f32 (sealed: the kernels exist only
/// for these).
pub trait Input: DeviceCopy + Copy + Send + Sync + 'static + sealed::Sealed {
    /// The type the elements are combined in and the result has (the
    /// accumulator).
    type Acc: Element;
    /// The type's name as in entry points (`"f32"`, `"bf16"`).
    const NAME: &'static str;
    /// Elements per 16-byte vector load.
    const PER_VEC: usize = 16 / std::mem::size_of::<Self>();
}

/// An element type the reduction kernels combine in and return: `i32`,
/// `i64`, `f32`, `f64` (sealed).
pub trait Element:
    Input<Acc = Self> + Default + PartialEq + Debug + crate::kernel::KernelParam<Self>
{
}

macro_rules! element {
    ($($t:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Input for $t {
            type Acc = $t;
            const NAME: &'static str = stringify!($t);
        }
        impl Element for $t {}
    )*};
}
element!(i32, i64, f32, f64);

macro_rules! half_input {
    ($($t:ident),*) => {$(
        impl sealed::Sealed for dev::$t {}
        impl Input for dev::$t {
            type Acc = f32;
            const NAME: &'static str = stringify!($t);
        }
        impl sealed::Sealed for half::$t {}
        impl HalfInput for half::$t {
            type Dev = dev::$t;
            fn to_dev(self) -> dev::$t {
                self.into()
            }
            fn to_f32(self) -> f32 {
                half::$t::to_f32(self)
            }
            fn from_f32(x: f32) -> Self {
                half::$t::from_f32(x)
            }
        }
    )*};
}
half_input!(f16, bf16);

/// `half`'s `half::f16` and `half::bf16` as reduction inputs
/// ([`Gpu::reduce_half`](crate::reduce::ReduceExt::reduce_half)): read as their device twins, combined in f32.
pub trait HalfInput: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The device crate's type of the same bits.
    type Dev: Input<Acc = f32>;
    /// The device twin.
    fn to_dev(self) -> Self::Dev;
    /// The value as f32 (exact).
    fn to_f32(self) -> f32;
    /// `x` rounded to this type (exact for the values a min or max gives).
    fn from_f32(x: f32) -> Self;
}

/// What reducing 16-bit floats `H` with an operation gives
/// ([`Gpu::reduce_half`](crate::reduce::ReduceExt::reduce_half)): the f32 accumulator for a sum; for min and max
/// the input type, which holds the f32 result exactly (it is one of the
/// inputs, or the identity `±∞`).
pub trait HalfReduction<H: HalfInput>: ReduceKernel<H::Dev, f32> {
    /// The result type (and that of the initial value).
    type Output: Copy;
    /// The initial value as an accumulator.
    fn to_acc(x: Self::Output) -> f32;
    /// The result from the accumulator.
    fn from_acc(x: f32) -> Self::Output;
}

impl<H: HalfInput> HalfReduction<H> for Sum
where
    Sum: ReduceKernel<H::Dev, f32>,
{
    type Output = f32;
    fn to_acc(x: f32) -> f32 {
        x
    }
    fn from_acc(x: f32) -> f32 {
        x
    }
}

macro_rules! half_in_input_type {
    ($($op:ident),*) => {$(
        impl<H: HalfInput> HalfReduction<H> for $op
        where
            $op: ReduceKernel<H::Dev, f32>,
        {
            type Output = H;
            fn to_acc(x: H) -> f32 {
                x.to_f32()
            }
            fn from_acc(x: f32) -> H {
                H::from_f32(x)
            }
        }
    )*};
}
half_in_input_type!(Min, Max);

/// Device memory a reduction works in: one partial result per block, the
/// last-block-done counter (0 between launches: the kernel resets it), and
/// the result. Make one with [`Gpu::reduce_scratch`](crate::reduce::ReduceExt::reduce_scratch) and reuse it for many
/// [`Gpu::reduce_on_device`](crate::reduce::ReduceExt::reduce_on_device) calls (on [`Gpu::stream`]; one launch at a
/// time per scratch, which the `&mut` borrow enforces).
pub struct ReduceScratch<T: Element> {
    partials: DeviceBuffer<T>,
    counter: DeviceBuffer<u32>,
    result: DeviceBuffer<T>,
}

impl<T: Element> ReduceScratch<T> {
    /// How many block partials fit: the largest grid a launch may use.
    pub fn capacity(&self) -> usize {
        self.partials.len()
    }

    /// Waits for the queued reduction and returns its result (from any
    /// thread: it makes `gpu`'s context current first).
    pub fn result(&self, gpu: &Gpu) -> Result<T> {
        const K: &str = "reduce";
        gpu.check_device(K, &self.result)?;
        gpu.bind()?;
        gpu.synchronize(K)?;
        let mut out = [T::default()];
        self.result.copy_to(&mut out[..])?;
        Ok(out[0])
    }
}

/// The reduction launchers on a [`Gpu`].
pub trait ReduceExt {
    /// Reduces `input` with `Op` on the GPU and returns
    /// `combine(init, combine over input)` (see the [module docs](self)).
    ///
    /// Copies the input to the device (strided views are made contiguous
    /// first). An empty input gives `init` or the identity without touching
    /// the GPU, or an error for min/max without `init`.
    ///
    /// ```no_run
    /// # use cuda_kernels_host::reduce::Min;
    /// # use cuda_kernels_host::prelude::*;
    /// # fn main() -> cuda_kernels_host::Result<()> {
    /// # let gpu = cuda_kernels_host::Gpu::from_ptx_file("kernels.ptx")?;
    /// let x = ndarray::array![3.5f32, -1.0, 2.0];
    /// assert_eq!(gpu.reduce::<Min, f32>(x.view(), None)?, -1.0);
    /// # Ok(()) }
    /// ```
    fn reduce<Op: ReduceKernel<T>, T: Element>(
        &self,
        input: ArrayView1<T>,
        init: Option<T>,
    ) -> Result<T>;

    /// [`Gpu::reduce`](crate::reduce::ReduceExt::reduce) for `half`'s 16-bit floats: the elements are combined
    /// in f32 (see [`cuda_kernels_gpu::reduce`]); a sum returns its f32
    /// accumulator, min and max a value of the input type
    /// ([`HalfReduction`]). Same rules otherwise (an empty input gives `init`
    /// or the identity, min/max of nothing is an error).
    ///
    /// ```no_run
    /// # use cuda_kernels_host::reduce::{Max, Sum};
    /// # use cuda_kernels_host::prelude::*;
    /// # fn main() -> cuda_kernels_host::Result<()> {
    /// # let gpu = cuda_kernels_host::Gpu::from_ptx_file("kernels.ptx")?;
    /// let x = ndarray::Array1::from_elem(1000, half::bf16::from_f32(0.5));
    /// assert_eq!(gpu.reduce_half::<Sum, half::bf16>(x.view(), None)?, 500.0f32);
    /// assert_eq!(gpu.reduce_half::<Max, half::bf16>(x.view(), None)?, x[0]);
    /// # Ok(()) }
    /// ```
    fn reduce_half<Op: HalfReduction<H>, H: HalfInput>(
        &self,
        input: ArrayView1<H>,
        init: Option<Op::Output>,
    ) -> Result<Op::Output>;

    /// [`Gpu::reduce`](crate::reduce::ReduceExt::reduce) on a slice.
    ///
    /// ```no_run
    /// # use cuda_kernels_host::reduce::Product;
    /// # use cuda_kernels_host::prelude::*;
    /// # fn main() -> cuda_kernels_host::Result<()> {
    /// # let gpu = cuda_kernels_host::Gpu::from_ptx_file("kernels.ptx")?;
    /// assert_eq!(gpu.reduce_slice::<Product, i32>(&[2, 3, 7], Some(10))?, 420);
    /// # Ok(()) }
    /// ```
    fn reduce_slice<Op: ReduceKernel<T>, T: Element>(
        &self,
        input: &[T],
        init: Option<T>,
    ) -> Result<T>;

    /// Reduces data already on the device; allocates a [`ReduceScratch`],
    /// launches, waits and returns the result. An empty slice launches too
    /// (the kernel returns `init` or the identity), except for min/max
    /// without `init`, which are refused.
    ///
    /// ```no_run
    /// # use cuda_kernels_host::reduce::Sum;
    /// # use cuda_kernels_host::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let gpu = cuda_kernels_host::Gpu::from_ptx_file("kernels.ptx")?;
    /// let d = gpu.to_device(&[1.0f64, 2.0, 3.0])?;
    /// assert_eq!(gpu.reduce_device::<Sum, f64>(&d, None)?, 6.0);
    /// # Ok(()) }
    /// ```
    fn reduce_device<Op: ReduceKernel<T, T::Acc>, T: Input>(
        &self,
        input: &DeviceSlice<T>,
        init: Option<T::Acc>,
    ) -> Result<T::Acc>;

    /// Queues the reduction of `input` on [`Gpu::stream`], writing its
    /// result into `scratch`, without waiting (for pipelines and
    /// benchmarks); [`ReduceScratch::result`] waits and reads it. Safe under
    /// the [`_on_device` rule](Gpu#launchers-that-leave-work-in-flight-the-_on_device-rule).
    ///
    /// ```no_run
    /// # use cuda_kernels_host::reduce::Sum;
    /// # use cuda_kernels_host::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let gpu = cuda_kernels_host::Gpu::from_ptx_file("kernels.ptx")?;
    /// let d = gpu.to_device(&vec![1i32; 1 << 20])?;
    /// let mut scratch = gpu.reduce_scratch::<i32>()?;
    /// for _ in 0..10 {
    ///     gpu.reduce_on_device::<Sum, i32>(&d, None, &mut scratch)?;
    /// }
    /// assert_eq!(scratch.result(&gpu)?, 1 << 20);
    /// # Ok(()) }
    /// ```
    fn reduce_on_device<Op: ReduceKernel<T, T::Acc>, T: Input>(
        &self,
        input: &DeviceSlice<T>,
        init: Option<T::Acc>,
        scratch: &mut ReduceScratch<T::Acc>,
    ) -> Result<()>;

    /// [`Gpu::reduce_on_device`](crate::reduce::ReduceExt::reduce_on_device) with a chosen launch shape (for tuning:
    /// the result is the same for any valid shape, up to float rounding):
    /// `block` a multiple of 32 in 32..=1024, `grid` in
    /// 1..=[`ReduceScratch::capacity`].
    ///
    /// ```no_run
    /// # use cuda_kernels_host::reduce::Sum;
    /// # use cuda_kernels_host::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let gpu = cuda_kernels_host::Gpu::from_ptx_file("kernels.ptx")?;
    /// let d = gpu.to_device(&vec![2i64; 1000])?;
    /// let mut scratch = gpu.reduce_scratch::<i64>()?;
    /// gpu.reduce_on_device_shaped::<Sum, i64>(&d, None, &mut scratch, 3, 96)?;
    /// assert_eq!(scratch.result(&gpu)?, 2000);
    /// # Ok(()) }
    /// ```
    fn reduce_on_device_shaped<Op: ReduceKernel<T, T::Acc>, T: Input>(
        &self,
        input: &DeviceSlice<T>,
        init: Option<T::Acc>,
        scratch: &mut ReduceScratch<T::Acc>,
        grid: u32,
        block: u32,
    ) -> Result<()>;

    /// Allocates the device memory for [`Gpu::reduce_on_device`](crate::reduce::ReduceExt::reduce_on_device): room for
    /// the largest grid a reduction launches on this GPU.
    fn reduce_scratch<T: Element>(&self) -> Result<ReduceScratch<T>>;

    /// The `(grid, block)` a reduction of `n` elements launches with: blocks
    /// of [`BLOCK`] threads, enough to give each thread at least one 16-byte
    /// vector, at most as many as fit on the GPU at once (multiprocessors ×
    /// resident blocks per multiprocessor, from the occupancy API), and at
    /// least one. The grid-stride loop covers the rest. Useful to derive the
    /// float tolerance ([`float_sum_tolerance`]).
    fn reduce_launch_shape<Op: ReduceKernel<T, T::Acc>, T: Input>(
        &self,
        n: usize,
    ) -> Result<(u32, u32)>;
}

impl ReduceExt for Gpu {
    fn reduce<Op: ReduceKernel<T>, T: Element>(
        &self,
        input: ArrayView1<T>,
        init: Option<T>,
    ) -> Result<T> {
        self.reduce_slice::<Op, T>(&contiguous(&input), init)
    }

    fn reduce_half<Op: HalfReduction<H>, H: HalfInput>(
        &self,
        input: ArrayView1<H>,
        init: Option<Op::Output>,
    ) -> Result<Op::Output> {
        let init = start_value::<Op, H::Dev>(input.len(), init.map(Op::to_acc))?;
        if input.is_empty() {
            return Ok(Op::from_acc(init));
        }
        let host: Vec<H::Dev> = input.iter().map(|x| x.to_dev()).collect();
        self.bind()?;
        let device = self.to_device(&host)?;
        Ok(Op::from_acc(
            self.reduce_device::<Op, H::Dev>(&device, Some(init))?,
        ))
    }

    fn reduce_slice<Op: ReduceKernel<T>, T: Element>(
        &self,
        input: &[T],
        init: Option<T>,
    ) -> Result<T> {
        let init = start_value::<Op, T>(input.len(), init)?;
        if input.is_empty() {
            return Ok(init);
        }
        self.bind()?;
        let device = self.to_device(input)?;
        self.reduce_device::<Op, T>(&device, Some(init))
    }

    fn reduce_device<Op: ReduceKernel<T, T::Acc>, T: Input>(
        &self,
        input: &DeviceSlice<T>,
        init: Option<T::Acc>,
    ) -> Result<T::Acc> {
        // Refuse bad input before allocating anything.
        start_value::<Op, T>(input.len(), init)?;
        let mut scratch = self.reduce_scratch::<T::Acc>()?;
        self.reduce_on_device::<Op, T>(input, init, &mut scratch)?;
        scratch.result(self)
    }

    fn reduce_on_device<Op: ReduceKernel<T, T::Acc>, T: Input>(
        &self,
        input: &DeviceSlice<T>,
        init: Option<T::Acc>,
        scratch: &mut ReduceScratch<T::Acc>,
    ) -> Result<()> {
        let (grid, block) = self.reduce_launch_shape::<Op, T>(input.len())?;
        self.reduce_on_device_shaped::<Op, T>(input, init, scratch, grid, block)
    }

    fn reduce_on_device_shaped<Op: ReduceKernel<T, T::Acc>, T: Input>(
        &self,
        input: &DeviceSlice<T>,
        init: Option<T::Acc>,
        scratch: &mut ReduceScratch<T::Acc>,
        grid: u32,
        block: u32,
    ) -> Result<()> {
        let k = Op::ENTRY;
        let n = input.len();
        let init = start_value::<Op, T>(n, init)?;
        crate::launch::check_block(k, (block, 1, 1))?;
        if !block.is_multiple_of(32) {
            return Err(Error::invalid(
                k,
                format!("block of {block} threads: must be a multiple of 32"),
            ));
        }
        if grid == 0 || grid as usize > scratch.capacity() {
            return Err(Error::invalid(
                k,
                format!(
                    "grid of {grid} blocks: must be 1..={} (the scratch's partials)",
                    scratch.capacity()
                ),
            ));
        }
        self.check_device(k, &scratch.result)?;
        self.bind()?;
        let stream = self.stream();
        let cfg = LaunchConfig::linear(grid, block).with_shared(SHARED_BYTES);
        // SAFETY: `input` holds n elements and is only read; `partials` holds
        // at least `grid` elements (checked above); the counter is 0 (fresh
        // from `reduce_scratch`, reset by every completed launch) and this
        // launch has it alone (`scratch` is borrowed mutably, launches on one
        // stream run in order); `result` holds one element; the scratch
        // buffers are distinct allocations and `input` is borrowed shared, so
        // nothing overlaps; the block is a multiple of 32 (checked) and
        // SHARED_BYTES is the kernel's dynamic shared memory.
        unsafe {
            let args = (
                input,
                &mut scratch.partials,
                &mut scratch.counter,
                &mut scratch.result,
                n,
                init,
            );
            self.launch(Op::KERNEL, cfg, stream, args)
        }
    }

    fn reduce_scratch<T: Element>(&self) -> Result<ReduceScratch<T>> {
        const K: &str = "reduce";
        self.bind()?;
        let capacity =
            self.multiprocessors(K)? as usize * simulator::BLOCKS_PER_MULTIPROCESSOR as usize;
        // SAFETY: the kernel writes each partial before any block reads it,
        // and writes the result; nothing reads them earlier.
        let partials = unsafe { self.uninitialized::<T>(capacity) }?;
        let counter = self.to_device(&[0u32])?;
        // SAFETY: as above.
        let result = unsafe { self.uninitialized::<T>(1) }?;
        Ok(ReduceScratch {
            partials,
            counter,
            result,
        })
    }

    fn reduce_launch_shape<Op: ReduceKernel<T, T::Acc>, T: Input>(
        &self,
        n: usize,
    ) -> Result<(u32, u32)> {
        let k = Op::ENTRY;
        self.bind()?;
        let resident = if self.is_simulated() {
            simulator::resident_blocks(BLOCK, SHARED_BYTES)
        } else {
            self.function(k)?
                .max_active_blocks_per_multiprocessor(BLOCK.into(), SHARED_BYTES as usize)
                .during(k, "cuOccupancyMaxActiveBlocksPerMultiprocessor")?
        }
        .clamp(1, simulator::BLOCKS_PER_MULTIPROCESSOR);
        let full = self.multiprocessors(k)? * resident;
        let wanted = n.div_ceil(T::PER_VEC).div_ceil(BLOCK as usize).max(1);
        Ok((wanted.min(full as usize) as u32, BLOCK))
    }
}

/// The value the reduction starts from: `init`, or the identity; an error
/// for an empty input without `init` when the operation has no meaningful
/// empty result (min, max).
pub fn start_value<Op: ReduceKernel<T, T::Acc>, T: Input>(
    n: usize,
    init: Option<T::Acc>,
) -> Result<T::Acc> {
    match init {
        Some(v) => Ok(v),
        None if n == 0 && !Op::DEFINED_ON_EMPTY => Err(Error::invalid(
            Op::ENTRY,
            format!(
                "empty input and no initial value: {} of nothing is undefined (pass an initial value)",
                Op::NAME
            ),
        )),
        None => Ok(Op::identity()),
    }
}

/// CPU reference for [`Gpu::reduce`](crate::reduce::ReduceExt::reduce): a sequential left fold from `init`
/// (or the identity) with the very same `combine` the kernel uses ([`fold`]). Same errors as
/// the GPU: min/max of an empty input without `init` are refused.
///
/// ```
/// use cuda_kernels_host::reduce::{reduce_cpu, Sum, Min};
/// let a = ndarray::Array1::from_iter(1..=10_000i64);
/// assert_eq!(reduce_cpu::<Sum, i64>(a.view(), None).unwrap(), 50_005_000);
/// assert!(reduce_cpu::<Min, i64>(a.slice(ndarray::s![..0]), None).is_err());
/// ```
pub fn reduce_cpu<Op: ReduceKernel<T>, T: Element>(
    input: ArrayView1<T>,
    init: Option<T>,
) -> Result<T> {
    start_value::<Op, T>(input.len(), init)?;
    fold::<T, Op>(input.iter().copied(), init)
        .ok_or_else(|| Error::invalid(Op::ENTRY, "empty input and no initial value"))
}

/// `Σ x` in f64 with Neumaier's compensated summation: accurate to a few
/// units in the last place of f64, far below any f32 or f64 summation-order
/// error, so it serves as the exact reference for float sums in any order.
///
/// ```
/// let xs = [1e16, 1.0, -1e16];
/// assert_eq!(cuda_kernels_host::reduce::accurate_sum(xs.iter().copied()), 1.0);
/// ```
pub fn accurate_sum(xs: impl Iterator<Item = f64>) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    for x in xs {
        let t = s + x;
        c += if s.abs() >= x.abs() {
            (s - t) + x
        } else {
            (x - t) + s
        };
        s = t;
    }
    s + c
}

/// The shape of one reduction launch, as far as its order of operations
/// depends on it: what [`reduce_in_gpu_order`] needs to reproduce the
/// kernel's result bit for bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReduceOrder {
    /// Blocks in the grid.
    pub grid: usize,
    /// Threads per block (a multiple of 32, at most 1024).
    pub block: usize,
    /// Elements before the input's first 16-byte boundary (0 for a buffer
    /// the driver allocated; `(PER_VEC − offset % PER_VEC) % PER_VEC` for a
    /// slice starting `offset` elements into one).
    pub head: usize,
}

impl ReduceOrder {
    /// The order of a launch with `(grid, block)` from
    /// [`Gpu::reduce_launch_shape`](crate::reduce::ReduceExt::reduce_launch_shape) over a driver-allocated buffer (which
    /// starts on a 256-byte boundary, so `head` is 0).
    pub fn aligned((grid, block): (u32, u32)) -> Self {
        Self {
            grid: grid as usize,
            block: block as usize,
            head: 0,
        }
    }
}

/// The kernel's result computed on the CPU in the kernel's own order of
/// operations (documented in [`cuda_kernels_gpu::reduce`], implemented in
/// its `body`): each of the `grid × block` threads' head/tail element,
/// vectors combined pairwise into [`UNROLL`](cuda_kernels_gpu::reduce::UNROLL)
/// interleaved accumulators, the warp shuffle trees, the per-warp slots,
/// the last block's strided pass over the block partials, then `init`.
/// With the same [`ReduceOrder`] as the launch, a correct GPU result is
/// *equal* to it, bits included, for every operation and type (float sums
/// too): so a float reduction can be checked exactly, and one dropped or
/// doubled element, or a lost partial, shows up in the result's bits
/// whenever it changes them.
///
/// Costs about as much as a sequential fold (every element is combined once).
///
/// ```
/// use cuda_kernels_host::reduce::{ReduceOrder, Sum, reduce_in_gpu_order};
/// let xs: Vec<f32> = (0..10_000).map(|i| (i as f32).sin()).collect();
/// let order = ReduceOrder { grid: 3, block: 64, head: 0 };
/// let gpu_like = reduce_in_gpu_order::<Sum, f32>(&xs, None, order).unwrap();
/// let dropped = reduce_in_gpu_order::<Sum, f32>(&xs[..9_999], None, order).unwrap();
/// assert_ne!(gpu_like, dropped);
/// ```
pub fn reduce_in_gpu_order<Op: ReduceKernel<T>, T: Element>(
    input: &[T],
    init: Option<T>,
    order: ReduceOrder,
) -> Result<T> {
    use cuda_kernels_gpu::reduce::UNROLL;
    let n = input.len();
    let init = start_value::<Op, T>(n, init)?;
    let ReduceOrder { grid, block, head } = order;
    if grid == 0 || block == 0 || block % 32 != 0 || block > 1024 || head >= T::PER_VEC {
        return Err(Error::invalid(
            Op::ENTRY,
            format!(
                "no launch has the order {order:?} (grid ≥ 1, block a multiple of 32 up to 1024, head < {})",
                T::PER_VEC
            ),
        ));
    }
    let c = Op::combine;
    let id = Op::identity();
    let threads = grid * block;
    let head = head.min(n);
    let vectors = (n - head) / T::PER_VEC;
    let tail_start = head + vectors * T::PER_VEC;
    // One 16-byte vector, its elements combined pairwise (as combine_vec).
    let vector = |i: usize| -> T {
        let v = &input[head + i * T::PER_VEC..head + (i + 1) * T::PER_VEC];
        match *v {
            [a, b] => c(a, b),
            [a, b, x, y] => c(c(a, b), c(x, y)),
            _ => unreachable!("16-byte vectors hold 2 or 4 elements"),
        }
    };
    let thread_value = |gtid: usize| -> T {
        let mut acc = id;
        if gtid < head {
            acc = c(acc, input[gtid]);
        }
        if gtid < n - tail_start {
            acc = c(acc, input[tail_start + gtid]);
        }
        let mut accs = [id; UNROLL];
        let mut i = gtid;
        while i + (UNROLL - 1) * threads < vectors {
            for (u, a) in accs.iter_mut().enumerate() {
                *a = c(*a, vector(i + u * threads));
            }
            i += UNROLL * threads;
        }
        while i < vectors {
            accs[0] = c(accs[0], vector(i));
            i += threads;
        }
        c(acc, c(c(accs[0], accs[1]), c(accs[2], accs[3])))
    };
    let block_reduce = |values: &[T]| -> T {
        let warp = |lanes: &mut [T; 32]| -> T {
            // shfl.sync.down: lane l reads lane l + offset, or keeps its own
            // value past the last lane; all lanes step together.
            let mut offset = 16;
            while offset > 0 {
                let old = *lanes;
                for (l, v) in lanes.iter_mut().enumerate() {
                    *v = c(
                        old[l],
                        if l + offset < 32 {
                            old[l + offset]
                        } else {
                            old[l]
                        },
                    );
                }
                offset /= 2;
            }
            lanes[0]
        };
        let mut slots = [id; 32];
        for (w, chunk) in values.chunks(32).enumerate() {
            let mut lanes = [id; 32];
            lanes.copy_from_slice(chunk);
            slots[w] = warp(&mut lanes);
        }
        // Warp 0: lanes past the number of warps start from the identity.
        warp(&mut slots)
    };
    let partials: Vec<T> = (0..grid)
        .map(|b| {
            let values: Vec<T> = (b * block..(b + 1) * block).map(thread_value).collect();
            block_reduce(&values)
        })
        .collect();
    let last: Vec<T> = (0..block)
        .map(|tid| {
            partials
                .iter()
                .skip(tid)
                .step_by(block)
                .fold(id, |a, &p| c(a, p))
        })
        .collect();
    Ok(c(init, block_reduce(&last)))
}

/// A bound on `|gpu − exact|` for a float sum of `n` elements whose
/// absolute values add up to `sum_abs`, reduced by `threads` GPU threads
/// (`grid × block` of [`Gpu::reduce_launch_shape`](crate::reduce::ReduceExt::reduce_launch_shape)), for a type of unit
/// roundoff `unit_roundoff` (`f32::EPSILON / 2`, `f64::EPSILON / 2`).
///
/// The GPU's summation tree (see [`cuda_kernels_gpu::reduce`]) has depth at
/// most `d = ceil(n / threads) + 32` (each thread's sequential share, then
/// the pairwise steps inside a vector, between accumulators, in the warp,
/// the block and across blocks), and a sum computed along a tree of depth
/// `d` errs by at most `γ_d · Σ|x|`, `γ_d = d·u / (1 − d·u)` (Higham,
/// *Accuracy and Stability of Numerical Algorithms*, §4.2).
///
/// This is a worst-case bound for a summation order known only by its
/// depth, and it is as tight as a bound from `Σ|x|` can be: its resolution
/// is `d·u·Σ|x|`, so for f32 it sees one dropped element of typical size only
/// while `n` is below about `1 / (d·u)` (2^18 or so), and at 2^24 elements
/// it allows a few dozen (f32 itself cannot resolve a sum of 2^24 values of
/// size 500 to better than its ulp, 1024, at 8·10^9). To check a GPU
/// result tightly, compare it with [`reduce_in_gpu_order`], which
/// reproduces the kernel's order exactly: a correct result is equal to it.
///
/// ```
/// let tol = cuda_kernels_host::reduce::float_sum_tolerance(1 << 20, 1 << 16, 1e6, f32::EPSILON as f64 / 2.0);
/// assert!(tol > 0.0 && tol < 10.0);
/// ```
pub fn float_sum_tolerance(n: usize, threads: usize, sum_abs: f64, unit_roundoff: f64) -> f64 {
    let depth = n.div_ceil(threads.max(1)) as f64 + 32.0;
    let du = depth * unit_roundoff;
    if du >= 1.0 {
        return f64::INFINITY;
    }
    du / (1.0 - du) * sum_abs
}

/// The device-primitive test kernels (warp shuffles and votes, atomics,
/// wide loads, the block tree step), launched on their own so that a broken
/// primitive is named by its own test.
pub mod primitives {
    use cuda_kernels_gpu::reduce::primitive_tests::{
        ATOMIC_TEST, BLOCK_REDUCE_TEST_I64, LOAD_TEST, WARP_SHUFFLE_TEST,
    };

    use crate::Gpu;
    use crate::error::{Error, Result};
    use crate::launch::LaunchConfig;

    /// What `warp_shuffle_test` wrote: 8 rows of one value per thread each.
    #[derive(Debug, Clone)]
    pub struct WarpResults {
        /// Rows of 32-bit results: shuffle down 1, up 3, xor 5, idx 7 of
        /// `x = 3g + 1`, lane id, `warp::reduce(x, +)`, `warp::all_reduce(x,
        /// +)`, `ballot(x % 3 == 0)`.
        pub rows32: Vec<Vec<u32>>,
        /// Rows of 64-bit results: shuffle down 1, up 3, xor 5, idx 7 of
        /// `y = (g << 33) | g`, `warp::reduce(y, +)`, `warp::all_reduce(y,
        /// +)`, `any(g % 64 == 5)`, `all(lane < 32)`.
        pub rows64: Vec<Vec<u64>>,
    }

    /// What `atomic_test` left behind.
    #[derive(Debug, Clone)]
    pub struct AtomicResults {
        /// The ticket each thread drew from `fetch_add_u32`.
        pub tickets: Vec<u32>,
        /// add counter, max, min, exchanged value, CAS target, CAS winners.
        pub counters: [u32; 6],
        /// `fetch_max_i32`, `fetch_min_i32` results.
        pub signed: [i32; 2],
        /// `fetch_add_f32` of 1.0 per thread.
        pub sum_f32: f32,
        /// `fetch_add_f64` of 0.5 per thread.
        pub sum_f64: f64,
        /// `fetch_add_u64` of each thread's index.
        pub sum_u64: u64,
    }

    /// The warp-primitive and atomic checks on a [`Gpu`].
    pub trait WarpPrimitiveChecks {
        /// Runs `warp_shuffle_test` on `blocks × threads_per_block` threads
        /// (`threads_per_block` a multiple of 32).
        fn warp_primitives_test(&self, blocks: u32, threads_per_block: u32) -> Result<WarpResults>;

        /// Runs `atomic_test` with `n` threads (1 ≤ n < 2^31).
        fn atomic_primitives_test(&self, n: usize) -> Result<AtomicResults>;

        /// Runs `load_test` on `input` (a whole number of 16-byte vectors):
        /// returns what the `ld.global.nc.v4` copy and the `ld.global.cg`
        /// copy wrote (both must equal the input).
        fn load_primitives_test(&self, input: &[u32]) -> Result<(Vec<u32>, Vec<u32>)>;

        /// Runs `block_reduce_test_i64`: one sum per block of
        /// `threads_per_block` consecutive values of `input` (whose length
        /// must be a multiple of `threads_per_block`, itself a multiple of 32).
        fn block_reduce_test(&self, input: &[i64], threads_per_block: u32) -> Result<Vec<i64>>;
    }

    impl WarpPrimitiveChecks for Gpu {
        fn warp_primitives_test(&self, blocks: u32, threads_per_block: u32) -> Result<WarpResults> {
            const K: &str = WARP_SHUFFLE_TEST.name();
            crate::launch::check_block(K, (threads_per_block, 1, 1))?;
            if !threads_per_block.is_multiple_of(32) || blocks == 0 {
                return Err(Error::invalid(K, "blocks ≥ 1 of a multiple of 32 threads"));
            }
            // Before the output buffers (8 words per thread) are allocated.
            if blocks > crate::launch::MAX_GRID_X {
                return Err(Error::invalid(
                    K,
                    format!(
                        "grid of {blocks} blocks, more than the limit of {}",
                        crate::launch::MAX_GRID_X
                    ),
                ));
            }
            let threads = blocks as usize * threads_per_block as usize;
            self.bind()?;
            let stream = self.stream();
            let mut o32 = self.to_device(&vec![0u32; 8 * threads])?;
            let mut o64 = self.to_device(&vec![0u64; 8 * threads])?;
            // SAFETY: both outputs hold 8 · threads elements; the block size is a multiple of 32.
            unsafe {
                let cfg = LaunchConfig::linear(blocks, threads_per_block);
                let args = (&mut o32, &mut o64, threads);
                self.launch(WARP_SHUFFLE_TEST, cfg, stream, args)
            }?;
            self.synchronize(K)?;
            let mut h32 = vec![0u32; 8 * threads];
            let mut h64 = vec![0u64; 8 * threads];
            o32.copy_to(&mut h32[..])?;
            o64.copy_to(&mut h64[..])?;
            Ok(WarpResults {
                rows32: h32.chunks(threads).map(<[u32]>::to_vec).collect(),
                rows64: h64.chunks(threads).map(<[u64]>::to_vec).collect(),
            })
        }

        fn atomic_primitives_test(&self, n: usize) -> Result<AtomicResults> {
            const K: &str = ATOMIC_TEST.name();
            if n == 0 || n >= i32::MAX as usize {
                return Err(Error::invalid(K, format!("{n} threads: need 1 ≤ n < 2^31")));
            }
            let grid = crate::launch::grid_1d_capped(K, n, 256)?;
            if grid as usize * 256 < n {
                return Err(Error::invalid(K, "too many threads for one launch"));
            }
            self.bind()?;
            let stream = self.stream();
            let mut tickets = self.to_device(&vec![u32::MAX; n])?;
            let mut counters = self.to_device(&[0, 0, u32::MAX, u32::MAX, 0, 0u32])?;
            let mut signed = self.to_device(&[i32::MIN, i32::MAX])?;
            let mut s32 = self.to_device(&[0f32])?;
            let mut s64 = self.to_device(&[0f64])?;
            let mut su64 = self.to_device(&[0u64])?;
            // SAFETY: buffers sized and initialised as atomic_test's # Safety says; n < 2^31.
            unsafe {
                let args = (
                    &mut tickets,
                    &mut counters,
                    &mut signed,
                    &mut s32,
                    &mut s64,
                    &mut su64,
                    n,
                );
                self.launch(ATOMIC_TEST, LaunchConfig::linear(grid, 256), stream, args)
            }?;
            self.synchronize(K)?;
            let mut r = AtomicResults {
                tickets: vec![0; n],
                counters: [0; 6],
                signed: [0; 2],
                sum_f32: 0.0,
                sum_f64: 0.0,
                sum_u64: 0,
            };
            tickets.copy_to(&mut r.tickets[..])?;
            counters.copy_to(&mut r.counters[..])?;
            signed.copy_to(&mut r.signed[..])?;
            let (mut a, mut b, mut c) = ([0f32], [0f64], [0u64]);
            s32.copy_to(&mut a[..])?;
            s64.copy_to(&mut b[..])?;
            su64.copy_to(&mut c[..])?;
            (r.sum_f32, r.sum_f64, r.sum_u64) = (a[0], b[0], c[0]);
            Ok(r)
        }

        fn load_primitives_test(&self, input: &[u32]) -> Result<(Vec<u32>, Vec<u32>)> {
            const K: &str = LOAD_TEST.name();
            if input.is_empty() || !input.len().is_multiple_of(4) {
                return Err(Error::invalid(
                    K,
                    "the input must be a non-empty whole number of 4-word vectors",
                ));
            }
            let vectors = input.len() / 4;
            let grid = crate::launch::grid_1d_capped(K, vectors, 128)?;
            self.bind()?;
            let stream = self.stream();
            // cuMemAlloc returns 256-byte-aligned memory, the simulator 16-byte-aligned
            // buffers: the 16-byte alignment holds.
            let din = self.to_device(input)?;
            let mut out = self.to_device(&vec![0u32; input.len()])?;
            let mut out_cg = self.to_device(&vec![0u32; input.len()])?;
            // SAFETY: din is 16-byte aligned with 4 · vectors words, only read; the outputs
            // hold as many and are separate allocations.
            unsafe {
                let args = (&din, &mut out, &mut out_cg, vectors);
                self.launch(LOAD_TEST, LaunchConfig::linear(grid, 128), stream, args)
            }?;
            self.synchronize(K)?;
            let mut a = vec![0u32; input.len()];
            let mut b = vec![0u32; input.len()];
            out.copy_to(&mut a[..])?;
            out_cg.copy_to(&mut b[..])?;
            Ok((a, b))
        }

        fn block_reduce_test(&self, input: &[i64], threads_per_block: u32) -> Result<Vec<i64>> {
            const K: &str = BLOCK_REDUCE_TEST_I64.name();
            crate::launch::check_block(K, (threads_per_block, 1, 1))?;
            let tpb = threads_per_block as usize;
            if !tpb.is_multiple_of(32) || input.is_empty() || !input.len().is_multiple_of(tpb) {
                return Err(Error::invalid(
                    K,
                    "the input must be whole blocks of a multiple of 32 threads",
                ));
            }
            let blocks = crate::launch::grid_exact(K, input.len(), threads_per_block, "x")?;
            self.bind()?;
            let stream = self.stream();
            let din = self.to_device(input)?;
            let mut out = self.to_device(&vec![0i64; blocks as usize])?;
            // SAFETY: input holds blocks · tpb values, out one per block; the dynamic shared
            // memory (SHARED_BYTES ≥ 256) is what block_reduce needs.
            unsafe {
                let cfg = LaunchConfig::linear(blocks, threads_per_block)
                    .with_shared(super::SHARED_BYTES);
                let args = (&din, &mut out);
                self.launch(BLOCK_REDUCE_TEST_I64, cfg, stream, args)
            }?;
            self.synchronize(K)?;
            let mut h = vec![0i64; blocks as usize];
            out.copy_to(&mut h[..])?;
            Ok(h)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array1, s};

    #[test]
    fn cpu_reference_semantics() {
        let a = Array1::from_iter(1..=10_000i64);
        assert_eq!(reduce_cpu::<Sum, i64>(a.view(), None).unwrap(), 50_005_000);
        assert_eq!(
            reduce_cpu::<Sum, i64>(a.view(), Some(-5_000)).unwrap(),
            50_000_000
        );
        assert_eq!(reduce_cpu::<Max, i64>(a.view(), Some(7)).unwrap(), 10_000);
        assert_eq!(reduce_cpu::<Min, i64>(a.view(), Some(7)).unwrap(), 1);
        let e = a.slice(s![..0]);
        assert_eq!(reduce_cpu::<Sum, i64>(e, None).unwrap(), 0);
        assert_eq!(reduce_cpu::<Product, i64>(e, None).unwrap(), 1);
        assert_eq!(reduce_cpu::<Min, i64>(e, Some(3)).unwrap(), 3);
        assert!(matches!(
            reduce_cpu::<Min, i64>(e, None),
            Err(Error::InvalidInput {
                kernel: "reduce_min_i64",
                ..
            })
        ));
        assert!(matches!(
            reduce_cpu::<Max, f32>(Array1::<f32>::zeros(0).view(), None),
            Err(Error::InvalidInput {
                kernel: "reduce_max_f32",
                ..
            })
        ));
        // Strided views reduce the viewed elements.
        assert_eq!(
            reduce_cpu::<Sum, i64>(a.slice(s![..;2]), None).unwrap(),
            25_000_000
        );
    }

    #[test]
    fn integer_overflow_wraps() {
        let a = Array1::from(vec![i32::MAX, 1, 1]);
        assert_eq!(
            reduce_cpu::<Sum, i32>(a.view(), None).unwrap(),
            i32::MIN + 1
        );
        let b = Array1::from(vec![1i64 << 40, 1 << 40]);
        assert_eq!(reduce_cpu::<Product, i64>(b.view(), None).unwrap(), 0);
    }

    #[test]
    fn start_values() {
        assert_eq!(start_value::<Sum, f64>(0, None).unwrap(), 0.0);
        assert_eq!(start_value::<Product, f32>(0, None).unwrap(), 1.0);
        assert_eq!(start_value::<Min, i32>(5, None).unwrap(), i32::MAX);
        assert_eq!(start_value::<Max, f64>(0, Some(2.0)).unwrap(), 2.0);
        assert!(start_value::<Max, f64>(0, None).is_err());
    }

    #[test]
    fn every_reduction_entry_is_listed() {
        let entries = [
            <Sum as ReduceKernel<i32>>::ENTRY,
            <Sum as ReduceKernel<i64>>::ENTRY,
            <Sum as ReduceKernel<f32>>::ENTRY,
            <Sum as ReduceKernel<f64>>::ENTRY,
            <Product as ReduceKernel<i32>>::ENTRY,
            <Product as ReduceKernel<i64>>::ENTRY,
            <Product as ReduceKernel<f32>>::ENTRY,
            <Product as ReduceKernel<f64>>::ENTRY,
            <Min as ReduceKernel<i32>>::ENTRY,
            <Min as ReduceKernel<i64>>::ENTRY,
            <Min as ReduceKernel<f32>>::ENTRY,
            <Min as ReduceKernel<f64>>::ENTRY,
            <Max as ReduceKernel<i32>>::ENTRY,
            <Max as ReduceKernel<i64>>::ENTRY,
            <Max as ReduceKernel<f32>>::ENTRY,
            <Max as ReduceKernel<f64>>::ENTRY,
            <Xor as ReduceKernel<i32>>::ENTRY,
            <Xor as ReduceKernel<i64>>::ENTRY,
        ];
        for e in entries {
            assert!(
                cuda_kernels_gpu::KERNELS.contains(&e),
                "{e} missing from the kernel list"
            );
        }
    }

    #[test]
    fn tolerance_grows_with_depth() {
        let u = f32::EPSILON as f64 / 2.0;
        let a = float_sum_tolerance(1 << 20, 1 << 18, 1.0, u);
        let b = float_sum_tolerance(1 << 24, 1 << 18, 1.0, u);
        assert!(a > 0.0 && a < b && b < 1e-4);
        assert_eq!(float_sum_tolerance(usize::MAX, 1, 1.0, u), f64::INFINITY);
    }

    /// Uniform values in [-1, 1), as f32.
    fn uniform_f32(n: usize, seed: u64) -> Vec<f32> {
        let mut rng = crate::util::Rng::new(seed);
        (0..n).map(|_| (rng.uniform() * 2.0 - 1.0) as f32).collect()
    }

    /// The H100's launch for 2^24 f32: 132 SMs × 2 blocks of 1024.
    const H100: ReduceOrder = ReduceOrder {
        grid: 264,
        block: 1024,
        head: 0,
    };

    #[test]
    fn gpu_order_emulation_is_exact_where_any_order_is() {
        // Integer sums (wrapping) and min/max do not depend on the order:
        // the emulation must agree with the sequential fold exactly, for
        // every head/tail split and for inputs shorter than one vector.
        let mut rng = crate::util::Rng::new(3);
        for n in [0usize, 1, 3, 5, 100, 4097, 70_001] {
            let xs: Vec<i32> = (0..n).map(|_| rng.next_u64() as i32).collect();
            let fs = uniform_f32(n, n as u64);
            for head in 0..4 {
                for (grid, block) in [(1, 32), (3, 64), (7, 1024)] {
                    let order = ReduceOrder { grid, block, head };
                    let view = ndarray::ArrayView1::from(&xs[..]);
                    assert_eq!(
                        reduce_in_gpu_order::<Sum, i32>(&xs, Some(5), order).unwrap(),
                        reduce_cpu::<Sum, i32>(view, Some(5)).unwrap()
                    );
                    if n > 0 {
                        let view = ndarray::ArrayView1::from(&fs[..]);
                        assert_eq!(
                            reduce_in_gpu_order::<Max, f32>(&fs, None, order).unwrap(),
                            reduce_cpu::<Max, f32>(view, None).unwrap()
                        );
                    }
                }
            }
        }
        assert!(reduce_in_gpu_order::<Min, f32>(&[], None, H100).is_err());
        let bad = ReduceOrder { block: 48, ..H100 };
        assert!(reduce_in_gpu_order::<Sum, f32>(&[1.0], None, bad).is_err());
    }

    #[test]
    fn gpu_order_emulation_follows_the_tree() {
        // One block of 32 threads, 8 f32 = 2 vectors, no head: thread 0
        // gets vector 0, thread 1 vector 1; the warp tree adds lane 1 to
        // lane 0 last (offset 1), then warp 0 of the slots adds identities.
        let xs = [1e8f32, 1.0, -1e8, 1.0, 3.0, 5.0, 7.0, 11.0];
        let order = ReduceOrder {
            grid: 1,
            block: 32,
            head: 0,
        };
        let v0 = (1e8f32 + 1.0) + (-1e8f32 + 1.0);
        let v1 = (3.0f32 + 5.0) + (7.0 + 11.0);
        assert_eq!(
            reduce_in_gpu_order::<Sum, f32>(&xs, None, order).unwrap(),
            0.0 + (v0 + v1)
        );
        // With a head of one element: thread 0 takes x0 (head), then x5
        // (the first of the 3-element tail), then vector 0 = x1..x4;
        // threads 1 and 2 take x6 and x7. The warp tree meets lane 2 at
        // offset 2 and lane 1 at offset 1.
        let order = ReduceOrder { head: 1, ..order };
        let t0 = (1e8f32 + 5.0) + ((1.0f32 + -1e8) + (1.0 + 3.0));
        let (t1, t2) = (7.0f32, 11.0f32);
        assert_eq!(t0, 8.0, "1e8 + 5 rounds up to 1e8 + 8");
        assert_eq!(
            reduce_in_gpu_order::<Sum, f32>(&xs, None, order).unwrap(),
            (t0 + t2) + t1
        );
    }

    #[test]
    fn gpu_order_check_catches_one_dropped_element_at_2_24() {
        // 2^24 f32 in [-1, 1) with the H100's launch: the exact check (the
        // GPU's order emulated) against one element left out, each of a
        // few positions (first, a middle one, the last), and one doubled.
        let n = 1 << 24;
        let xs = uniform_f32(n, 24);
        let right = reduce_in_gpu_order::<Sum, f32>(&xs, None, H100).unwrap();
        for drop in [0, n / 2 + 12_345, n - 1] {
            let mut wrong = xs.clone();
            wrong[drop] = 0.0;
            let got = reduce_in_gpu_order::<Sum, f32>(&wrong, None, H100).unwrap();
            assert_ne!(got, right, "dropping element {drop} ({})", xs[drop]);
            // The worst-case tolerance cannot see it: that is why the checks
            // of the GPU's sums compare with the emulation, exactly.
            let exact = accurate_sum(xs.iter().map(|&x| f64::from(x)));
            let sum_abs: f64 = xs.iter().map(|&x| f64::from(x).abs()).sum();
            let tol = float_sum_tolerance(n, H100.grid * H100.block, sum_abs, 2f64.powi(-24));
            assert!((f64::from(got) - exact).abs() <= tol);
        }
    }

    /// `xs` summed in f32 in three orders: left to right, pairwise
    /// (recursive halving), and in blocks of `b` summed left to right, then
    /// the blocks' sums left to right.
    fn three_orders(xs: &[f32], b: usize) -> [(f32, usize); 3] {
        fn pairwise(xs: &[f32]) -> f32 {
            match xs.len() {
                0 => 0.0,
                1 => xs[0],
                n => pairwise(&xs[..n / 2]) + pairwise(&xs[n / 2..]),
            }
        }
        let sequential = xs.iter().fold(0.0f32, |a, &x| a + x);
        let blocked = xs
            .chunks(b)
            .map(|c| c.iter().fold(0.0f32, |a, &x| a + x))
            .fold(0.0f32, |a, x| a + x);
        // The tolerance's `threads`: 1 for a sequential sum (depth n); n for
        // the pairwise tree (depth log2 n ≤ 32); for blocks, n / b leaves
        // summed sequentially (depth b), then n / b blocks in sequence
        // (bounded as b + n / b ≤ ceil(n / threads) + 32 with threads = n / b
        // only while n / b ≤ 32: the blocked test keeps to that).
        [
            (sequential, 1),
            (pairwise(xs), xs.len()),
            (blocked, xs.len() / b),
        ]
    }

    #[test]
    fn float_sum_tolerance_passes_correct_orders_and_catches_a_dropped_element() {
        let u32_ = 2f64.powi(-24);
        // f32, 2^16 values in [-1, 1): every correct order passes; with a
        // depth-36 tree (2^14 threads, as a GPU launch would give) one
        // dropped element of typical size fails.
        let n = 1 << 16;
        let xs = uniform_f32(n, 16);
        let exact = accurate_sum(xs.iter().map(|&x| f64::from(x)));
        let sum_abs: f64 = xs.iter().map(|&x| f64::from(x).abs()).sum();
        for (got, threads) in three_orders(&xs, n / 32) {
            let tol = float_sum_tolerance(n, threads, sum_abs, u32_);
            assert!((f64::from(got) - exact).abs() <= tol, "{got} vs {exact}");
        }
        let tol = float_sum_tolerance(n, 1 << 14, sum_abs, u32_);
        let big = xs.iter().position(|x| x.abs() > 0.5).unwrap();
        let dropped = exact - f64::from(xs[big]);
        assert!((dropped - exact).abs() > tol, "tolerance {tol:.2e}");
        // The relation: the bound is depth·u·Σ|x|, so it resolves one
        // element of size |x| only while depth·u·n·mean|x| < |x|; for f32 at
        // depth ~36 that is n below about 2^18. At 2^24 (depth 94 on an
        // H100) it allows ~47 elements of mean size, i.e. f32's
        // resolution of such a sum: see the exact check above for 2^24.
        // f64 at 2^24: a dropped element is caught by the bound itself.
        let n = 1 << 24;
        let xs: Vec<f64> = uniform_f32(n, 64).iter().map(|&x| f64::from(x)).collect();
        let exact = accurate_sum(xs.iter().copied());
        let sum_abs: f64 = xs.iter().map(|x| x.abs()).sum();
        let tol = float_sum_tolerance(n, 1 << 18, sum_abs, 2f64.powi(-53));
        let seq: f64 = xs.iter().sum();
        assert!((seq - exact).abs() <= float_sum_tolerance(n, 1, sum_abs, 2f64.powi(-53)));
        let big = xs.iter().position(|x| x.abs() > 1e-3).unwrap();
        assert!(xs[big].abs() > tol, "tolerance {tol:.2e}");
    }

    #[test]
    fn element_vector_widths() {
        assert_eq!(<f32 as Input>::PER_VEC, 4);
        assert_eq!(<i64 as Input>::PER_VEC, 2);
        assert_eq!(<f64 as Input>::NAME, "f64");
        assert_eq!(<dev::bf16 as Input>::PER_VEC, 8);
    }

    #[test]
    fn all_nan_min_max_give_the_identity_like_the_gpu() {
        let nans = ndarray::Array1::from(vec![f32::NAN; 5]);
        assert_eq!(
            reduce_cpu::<Min, f32>(nans.view(), None).unwrap(),
            f32::INFINITY
        );
        assert_eq!(
            reduce_cpu::<Max, f32>(nans.view(), None).unwrap(),
            f32::NEG_INFINITY
        );
        let mixed = ndarray::Array1::from(vec![f32::NAN, 2.0, f32::NAN, -1.0]);
        assert_eq!(reduce_cpu::<Min, f32>(mixed.view(), None).unwrap(), -1.0);
    }
}
