//! Launches of the kernels that the kernel crate declares with the family
//! macros (`elementwise!`, `reduce_kernels!`), on the runtime alone: the
//! handles the macros made (`Elementwise::KERNEL`, `ReduceKernel::KERNEL`)
//! with the parameters their traits' `# Safety` sections list. The CPU
//! references compute with the ops' own per-element functions.
use std::ffi::c_void;

use cuda_kernels_gpu::elementwise::{Elementwise, Params};
use cuda_kernels_gpu::reduce::{ReduceKernel, SHARED_BYTES, fold};
use cuda_kernels_runtime::cust::memory::DeviceCopy;
use cuda_kernels_runtime::cust::memory::bytemuck::Pod;
use cuda_kernels_runtime::memory::DeviceId;
use cuda_kernels_runtime::{
    DeviceSlice, Error, Gpu, KernelArgs, KernelParam, LaunchConfig, Result,
};

/// Threads per block of both families' launches here (the reduction needs a
/// multiple of 32; 256 fills an SM with several blocks).
const BLOCK: u32 = 256;
/// Elements each thread of a first grid-stride pass covers, at least: the
/// reduction's grid is `n / (BLOCK · PER_THREAD)` blocks, capped.
const PER_THREAD: usize = 16;
/// Most blocks of a reduction: the partials the last block combines.
const MAX_REDUCE_BLOCKS: usize = 1024;

/// The arguments of an elementwise kernel of one `in` array, one `out` array
/// and one scalar, `(x, y, scalar, n)`: the layout of [`Params<T>`].
struct UnaryArgs<'a, T: DeviceCopy> {
    x: &'a DeviceSlice<T>,
    y: &'a mut DeviceSlice<T>,
    scalar: T,
}

// SAFETY: one pointer to each parameter's value, in the order `Params<T>`
// lists them (the `in` array, the `out` array as device addresses, the
// scalar, then n), alive during `f`; `foreign_device` names both arrays'.
unsafe impl<T: DeviceCopy> KernelArgs<Params<T>> for UnaryArgs<'_, T> {
    fn with_params<R>(self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
        let mut x = self.x.as_device_ptr();
        let mut y = self.y.as_device_ptr();
        let mut scalar = self.scalar;
        let mut n = self.x.len();
        f(&mut [
            (&raw mut x).cast(),
            (&raw mut y).cast(),
            (&raw mut scalar).cast(),
            (&raw mut n).cast(),
        ])
    }

    fn foreign_device(&self, expected: DeviceId) -> Option<DeviceId> {
        [DeviceSlice::device(self.x), DeviceSlice::device(self.y)]
            .into_iter()
            .find(|&d| d != expected)
    }
}

/// `y = K(x; scalar)` on the GPU for an elementwise kernel `K` of one input,
/// one output and one scalar.
pub fn elementwise_unary<K, T>(gpu: &Gpu, x: &[T], scalar: T) -> Result<Vec<T>>
where
    K: Elementwise<T>,
    T: DeviceCopy + Pod,
{
    let (inputs, outputs, scalars) = (K::INPUTS.len(), K::OUTPUTS.len(), K::SCALARS.len());
    if (inputs, outputs + K::INOUTS.len(), scalars) != (1, 1, 1) {
        return Err(Error::invalid(
            K::ENTRY,
            format!("takes {inputs} in, {outputs} out and {scalars} scalar(s), not 1, 1 and 1"),
        ));
    }
    if x.is_empty() {
        return Err(Error::invalid(K::ENTRY, "empty input: nothing to launch"));
    }
    let input = gpu.to_device(x)?;
    let mut output = gpu.zeroed::<T>(x.len())?;
    let blocks = x.len().div_ceil(BLOCK as usize).min(65_535) as u32;
    let args = UnaryArgs {
        x: &input,
        y: &mut output,
        scalar,
    };
    // SAFETY: both arrays hold x.len() elements (the `n` passed), the output
    // is a distinct allocation, and K has one `in`, one `out` and one
    // scalar (checked above): the parameters `UnaryArgs` passes.
    unsafe {
        gpu.launch(
            K::KERNEL,
            LaunchConfig::linear(blocks, BLOCK),
            gpu.stream(),
            args,
        )
    }?;
    gpu.synchronize(K::ENTRY)?;
    output.to_vec()
}

/// The CPU reference of [`elementwise_unary`]: the op's per-element function.
pub fn elementwise_unary_cpu<K: Elementwise<T>, T: Copy + Default>(x: &[T], scalar: T) -> Vec<T> {
    x.iter()
        .map(|&v| {
            let mut y = [T::default()];
            K::element(&[v], &mut y, &[scalar]);
            y[0]
        })
        .collect()
}

/// `Op`'s reduction of `x` on the GPU, starting from its identity: one
/// launch, whose last block combines the blocks' partials.
pub fn reduce<Op, T>(gpu: &Gpu, x: &[T]) -> Result<T>
where
    Op: ReduceKernel<T>,
    T: DeviceCopy + Pod + KernelParam<T>,
{
    let n = x.len();
    if n == 0 {
        return Err(Error::invalid(Op::ENTRY, "empty input: nothing to reduce"));
    }
    let blocks = n
        .div_ceil(BLOCK as usize * PER_THREAD)
        .clamp(1, MAX_REDUCE_BLOCKS);
    let input = gpu.to_device(x)?;
    let mut partials = gpu.zeroed::<T>(blocks)?;
    let mut counter = gpu.zeroed::<u32>(1)?;
    let mut out = gpu.zeroed::<T>(1)?;
    let cfg = LaunchConfig::linear(blocks as u32, BLOCK).with_shared(SHARED_BYTES);
    // SAFETY: as `reduce_kernels!` asks: `input` holds n elements, read
    // only; `partials` one per block; the counter is 0 and this launch's
    // alone; `out` one element; all distinct allocations; the block a
    // multiple of 32 with SHARED_BYTES of dynamic shared memory.
    unsafe {
        gpu.launch(
            Op::KERNEL,
            cfg,
            gpu.stream(),
            (
                &input,
                &mut partials,
                &mut counter,
                &mut out,
                n,
                Op::identity(),
            ),
        )
    }?;
    gpu.synchronize(Op::ENTRY)?;
    Ok(out.to_vec()?[0])
}

/// The CPU reference of [`reduce`]: `Op::combine` from the identity, left
/// to right.
pub fn reduce_cpu<Op: ReduceKernel<T>, T: Copy>(x: &[T]) -> Result<T> {
    fold::<T, Op>(x.iter().copied(), None)
        .filter(|_| !x.is_empty())
        .ok_or_else(|| Error::invalid(Op::ENTRY, "empty input: nothing to reduce"))
}
