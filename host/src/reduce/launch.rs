//! The reduction launchers on a [`Gpu`]: [`ReduceExt`].
use ndarray::ArrayView1;

use super::{
    BLOCK, Element, HalfInput, HalfReduction, Input, ReduceKernel, ReduceScratch, SHARED_BYTES,
    start_value,
};
use crate::Gpu;
use crate::error::{Error, Result};
use crate::launch::LaunchConfig;
use crate::memory::DeviceSlice;
use crate::util::contiguous;

/// The reduction launchers on a [`Gpu`].
pub trait ReduceExt {
    /// Reduces `input` with `Op` on the GPU and returns
    /// `combine(init, combine over input)` (see the [module docs](crate::reduce)).
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
    /// float tolerance ([`float_sum_tolerance`](super::float_sum_tolerance)).
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
        self.check_device(k, "scratch", &scratch.result)?;
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
        let capacity = self.multiprocessors(K)? as usize
            * self.launch_limits().blocks_per_multiprocessor as usize;
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
        let resident = self.resident_blocks(k, BLOCK, SHARED_BYTES, 0)?;
        let full = self.multiprocessors(k)? * resident;
        let wanted = n.div_ceil(T::PER_VEC).div_ceil(BLOCK as usize).max(1);
        Ok((wanted.min(full as usize) as u32, BLOCK))
    }
}
