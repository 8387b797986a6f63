//! Launchers for `reduce_*` (Numba's `@cuda.reduce`): a
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
//!   [`Error::InvalidInput`](crate::error::Error::InvalidInput) (there is no meaningful value);
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

pub use cuda_kernels_gpu::reduce::{
    Max, Min, Product, ReduceKernel, ReduceOp, SHARED_BYTES, Sum, Xor, fold,
};

use crate::Gpu;
use crate::error::Result;
use crate::memory::{DeviceBuffer, DeviceSlice};

mod cpu;
mod launch;
mod order;
pub mod primitives;
#[cfg(test)]
mod tests;

pub use cpu::{accurate_sum, reduce_cpu, start_value};
pub use launch::ReduceExt;
pub use order::{ReduceOrder, float_sum_tolerance, reduce_in_gpu_order};

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

    /// The device element the reductions write their result to (for
    /// work queued after them on the device, such as a collective that
    /// combines several devices' results).
    pub fn result_on_device(&mut self) -> &mut DeviceSlice<T> {
        &mut self.result
    }

    /// Waits for the queued reduction and returns its result (from any
    /// thread: it makes `gpu`'s context current first).
    pub fn result(&self, gpu: &Gpu) -> Result<T> {
        const K: &str = "reduce";
        gpu.check_device(K, "scratch", &self.result)?;
        gpu.bind()?;
        gpu.synchronize(K)?;
        let mut out = [T::default()];
        self.result.copy_to(&mut out[..])?;
        Ok(out[0])
    }
}
