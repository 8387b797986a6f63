//! Launchers for the elementwise kernels declared in
//! [`cuda_kernels_gpu::elementwise`](mod@cuda_kernels_gpu::elementwise) (PyCUDA's `ElementwiseKernel`, built at
//! compile time), and `vector_sum_repeat`.
//!
//! Three ways to run an elementwise kernel:
//! - the typed method generated for it from the kernel list, e.g.
//!   [`Gpu::elementwise_sum`]: `gpu.elementwise_sum(a.view(), b.view(),
//!   c.view_mut())` is the seed's `elementwiseSum(a, b, c)`;
//! - the generic launcher [`Gpu::elementwise`](crate::matrices::elementwise::ElementwiseExt::elementwise)`::<K, T>(inputs, outputs,
//!   scalars)` for any kernel marker `K` (arity checked at run time);
//! - [`Gpu::elementwise_on_device`](crate::matrices::elementwise::ElementwiseExt::elementwise_on_device) over buffers already on the device.
//!
//! [`elementwise_cpu`] is the CPU reference: it runs the kernel's body on
//! one element at a time (the GPU kernel runs it on words: one element, or
//! a packed pair of `f16`/`bf16`, each element rounded as alone). Tests of
//! the 16-bit floats check both against the formula
//! (`tests/gpu/half_precision/elementwise_and_reduce.rs`).
//!
//! # Adding your own kernel
//! Add one entry to the list in `cuda_kernels_gpu::elementwise_kernels!`
//! (`kernels-gpu/src/elementwise.rs`), for example
//! ```text
//! /// `z = x·x + y·y`.
//! norm2 => elementwise_norm2<T: f32, f64>
//!     (in [x, y] out [z] inout [] scalar []) { *z = x * x + y * y; }
//! ```
//! and rebuild. You get the PTX entry points `elementwise_norm2_f32` and
//! `elementwise_norm2_f64`, the marker type
//! `cuda_kernels_gpu::elementwise::norm2`, the typed method
//! `gpu.elementwise_norm2(x.view(), y.view(), z.view_mut())` (this module
//! expands the same list), its CPU reference
//! `elementwise_cpu::<norm2, f32>(&[x.view(), y.view()], &mut [z.view_mut()], &[])`,
//! and an entry in the kernel crate's generated list
//! ([`cuda_kernels_gpu::KERNELS`]), which the offline PTX test checks.

use cuda_kernels_device::float16 as dev;
use std::ffi::c_void;

use cust::memory::{DeviceCopy, DevicePointer};
use ndarray::{Array1, ArrayView1, ArrayViewMut1};

pub use cuda_kernels_gpu::elementwise::{Elementwise, MAX_ELEMENTWISE_ARGS};
use cuda_kernels_gpu::elementwise::{
    Params, REPEAT_THREADS, VECTOR_SUM_REPEAT, vector_sum_repeat_element,
};

use crate::Gpu;
use crate::error::{Error, Result};
use crate::kernel::KernelArgs;
use crate::launch::LaunchConfig;
use crate::launch::same_len;
use crate::memory::DeviceSlice;
use crate::timing::{PhaseTimers, Times, timed_result};
use crate::util::contiguous;
use crate::vectorized::PairLaunch;

/// The arguments of an elementwise kernel (a variadic family: its handle's
/// parameters are [`Params<T>`]): the `in`, then `out` and `inout` arrays,
/// the scalars and `n`. The element type is checked at compile time, the
/// counts by the launcher against the declaration.
#[derive(Debug)]
pub struct ElementwiseArgs<T: DeviceCopy> {
    /// The arrays, in declaration order.
    pub arrays: Vec<DevicePointer<T>>,
    /// The scalars, in declaration order.
    pub scalars: Vec<T>,
    /// The element count.
    pub n: usize,
}

// SAFETY: one pointer per array, then per scalar, then to `n`, each to a
// live value of the parameter's type (`DevicePointer<T>` is the address),
// the layout of the elementwise entry points; the counts are checked by
// the launcher against the declaration.
unsafe impl<T: DeviceCopy> KernelArgs<Params<T>> for ElementwiseArgs<T> {
    fn with_params<R>(mut self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
        let mut params: Vec<*mut c_void> = self
            .arrays
            .iter_mut()
            .map(|p| p as *mut DevicePointer<T> as *mut c_void)
            .chain(self.scalars.iter_mut().map(|s| s as *mut T as *mut c_void))
            .collect();
        params.push(&mut self.n as *mut usize as *mut c_void);
        f(&mut params)
    }
}

/// The elementwise kernel markers (`sum`, `saxpy`, `lerp`, and any kernel
/// added to the list), re-exported from `cuda_kernels_gpu::elementwise`.
pub mod kernels {
    pub use cuda_kernels_gpu::elementwise::*;
}

/// An element type of the elementwise API on the host: the device's own
/// element types (`Dev = Self`: the integers, f32, f64, and the device
/// crate's `f16`/`bf16`), and `half`'s `half::f16`/`half::bf16`, whose
/// kernels are those of the device twin of the same bits.
pub trait ElementwiseElement: Copy + Default + 'static {
    /// The element type the kernels are built for: plain data the device can
    /// copy, with a zero (`Default`), of the same bits as `Self`.
    type Dev: DeviceCopy + ElementwiseElement<Dev = Self::Dev>;
    /// The device element of the same bits.
    fn to_dev(self) -> Self::Dev;
    /// From the device element of the same bits.
    fn from_dev(d: Self::Dev) -> Self;
}

macro_rules! device_elements {
    ($($t:ty),*) => {$(
        impl ElementwiseElement for $t {
            type Dev = $t;
            #[inline(always)]
            fn to_dev(self) -> $t {
                self
            }
            #[inline(always)]
            fn from_dev(d: $t) -> $t {
                d
            }
        }
    )*};
}
device_elements!(
    i8,
    i16,
    i32,
    i64,
    isize,
    u8,
    u16,
    u32,
    u64,
    usize,
    f32,
    f64,
    dev::f16,
    dev::bf16
);

macro_rules! half_elements {
    ($($t:ident),*) => {$(
        impl ElementwiseElement for half::$t {
            type Dev = dev::$t;
            #[inline(always)]
            fn to_dev(self) -> dev::$t {
                dev::$t::from(self)
            }
            #[inline(always)]
            fn from_dev(d: dev::$t) -> Self {
                d.into()
            }
        }
    )*};
}
half_elements!(f16, bf16);

/// Checks the arity of a call of kernel `K` and the common length of its
/// arrays; returns that length (errors on 0).
fn check_call<K: Elementwise<T>, T: Copy>(
    inputs: &[usize],
    outputs: &[usize],
    scalars: usize,
) -> Result<usize> {
    let name = K::ENTRY;
    let outs = K::OUTPUTS.len() + K::INOUTS.len();
    if inputs.len() != K::INPUTS.len() || outputs.len() != outs || scalars != K::SCALARS.len() {
        return Err(Error::invalid(
            name,
            format!(
                "{} takes {} input arrays {:?}, {} output arrays {:?} and {} scalars {:?}; \
                 got {}, {} and {}",
                K::NAME,
                K::INPUTS.len(),
                K::INPUTS,
                outs,
                [K::OUTPUTS, K::INOUTS].concat(),
                K::SCALARS.len(),
                K::SCALARS,
                inputs.len(),
                outputs.len(),
                scalars
            ),
        ));
    }
    if inputs.len() > MAX_ELEMENTWISE_ARGS || outs > MAX_ELEMENTWISE_ARGS {
        return Err(Error::invalid(name, "more than 8 arrays of one kind"));
    }
    let lens: Vec<usize> = inputs.iter().chain(outputs).copied().collect();
    let n = lens.first().copied().unwrap_or(0);
    if let Some(&other) = lens.iter().find(|&&l| l != n) {
        return Err(Error::invalid(
            name,
            format!("arrays of different lengths ({n} and {other})"),
        ));
    }
    if n == 0 {
        return Err(Error::invalid(name, "empty arrays: nothing to launch"));
    }
    Ok(n)
}

/// The elementwise launchers on a [`Gpu`].
pub trait ElementwiseExt {
    /// Runs elementwise kernel `K` for element type `T`: `inputs` are its
    /// `in` arrays, `outputs` its `out` arrays followed by its `inout` arrays
    /// (written back in place, in any layout), `scalars` its scalars, all in
    /// declaration order.
    ///
    /// Errors (no launch) when the numbers of arrays or scalars do not match
    /// the declaration, the arrays differ in length, or they are empty.
    /// `half`'s 16-bit floats run the kernels of their device twins
    /// ([`ElementwiseElement::Dev`]).
    fn elementwise<K: Elementwise<T::Dev>, T: ElementwiseElement>(
        &self,
        inputs: &[ArrayView1<T>],
        outputs: &mut [ArrayViewMut1<T>],
        scalars: &[T],
    ) -> Result<()>;

    /// Queues elementwise kernel `K` on [`Gpu::stream`] over buffers already
    /// on the device (same argument order as [`Gpu::elementwise`](crate::matrices::elementwise::ElementwiseExt::elementwise)), without
    /// synchronizing. The `&mut` borrows guarantee that no output aliases
    /// another array. Safe under the
    /// [`_on_device` rule](Gpu#launchers-that-leave-work-in-flight-the-_on_device-rule).
    fn elementwise_on_device<K: Elementwise<T>, T: DeviceCopy + Copy>(
        &self,
        inputs: &[&DeviceSlice<T>],
        outputs: &mut [&mut DeviceSlice<T>],
        scalars: &[T],
    ) -> Result<()>;

    /// The seed's CPU-vs-GPU evaluation kernel: for each `i`, `repeats`
    /// times `c[i] = a[i] + b[i]` (volatile, so the loop is really executed).
    /// Returns `c`, on either backend.
    fn vector_sum_repeat(
        &self,
        a: ArrayView1<f32>,
        b: ArrayView1<f32>,
        repeats: u32,
    ) -> Result<Array1<f32>>;

    /// [`Gpu::vector_sum_repeat`](crate::matrices::elementwise::ElementwiseExt::vector_sum_repeat) with the CUDA-event times of the kernel and
    /// of the whole (copies in, kernel, copy out); GPU only
    /// ([`Error::NotOnSimulator`] on the simulator).
    fn vector_sum_repeat_timed(
        &self,
        a: ArrayView1<f32>,
        b: ArrayView1<f32>,
        repeats: u32,
    ) -> Result<(Array1<f32>, RepeatTiming)>;
}

impl ElementwiseExt for Gpu {
    fn elementwise<K: Elementwise<T::Dev>, T: ElementwiseElement>(
        &self,
        inputs: &[ArrayView1<T>],
        outputs: &mut [ArrayViewMut1<T>],
        scalars: &[T],
    ) -> Result<()> {
        let name = K::ENTRY;
        let in_lens: Vec<usize> = inputs.iter().map(|a| a.len()).collect();
        let out_lens: Vec<usize> = outputs.iter().map(|a| a.len()).collect();
        let n = check_call::<K, T::Dev>(&in_lens, &out_lens, scalars.len())?;
        self.bind()?;
        let mut ins = Vec::with_capacity(inputs.len());
        for a in inputs {
            ins.push(self.to_device(&to_dev(a))?);
        }
        let mut outs = Vec::with_capacity(outputs.len());
        for (j, a) in outputs.iter().enumerate() {
            outs.push(if j < K::OUTPUTS.len() {
                // `out` arrays are written, never read: no copy in.
                // SAFETY: the kernel writes every element of an `out` array before
                // anything reads it.
                unsafe { self.uninitialized::<T::Dev>(n) }?
            } else {
                self.to_device(&to_dev(&a.view()))?
            });
        }
        let in_refs: Vec<&DeviceSlice<T::Dev>> = ins.iter().map(|b| &**b).collect();
        let mut out_refs: Vec<&mut DeviceSlice<T::Dev>> =
            outs.iter_mut().map(|b| &mut **b).collect();
        let scalars: Vec<T::Dev> = scalars.iter().map(|s| s.to_dev()).collect();
        self.elementwise_on_device::<K, T::Dev>(&in_refs, &mut out_refs, &scalars)?;
        self.synchronize(name)?;
        let mut host = vec![T::Dev::default(); n];
        for (buf, view) in outs.iter().zip(outputs.iter_mut()) {
            buf.copy_to(&mut host[..])?;
            for (dst, &src) in view.iter_mut().zip(&host) {
                *dst = T::from_dev(src);
            }
        }
        Ok(())
    }

    fn elementwise_on_device<K: Elementwise<T>, T: DeviceCopy + Copy>(
        &self,
        inputs: &[&DeviceSlice<T>],
        outputs: &mut [&mut DeviceSlice<T>],
        scalars: &[T],
    ) -> Result<()> {
        let name = K::ENTRY;
        let in_lens: Vec<usize> = inputs.iter().map(|a| a.len()).collect();
        let out_lens: Vec<usize> = outputs.iter().map(|a| a.len()).collect();
        let n = check_call::<K, T>(&in_lens, &out_lens, scalars.len())?;
        let (grid, block) = self.vectorized_launch(name, n, std::mem::size_of::<T>())?;
        for slice in inputs {
            self.check_device(name, "an input", slice)?;
        }
        for slice in outputs.iter() {
            self.check_device(name, "an output", slice)?;
        }
        self.bind()?;
        let args = ElementwiseArgs {
            arrays: inputs
                .iter()
                .map(|s| s.as_device_ptr())
                .chain(outputs.iter().map(|s| s.as_device_ptr()))
                .collect(),
            scalars: scalars.to_vec(),
            n,
        };
        // SAFETY: `args` matches the generated entry point's signature
        // (K::INPUTS + K::OUTPUTS + K::INOUTS pointers to T, K::SCALARS values
        // of T, then n: usize; the counts are checked above), every array holds
        // n elements (checked), and outputs are distinct `&mut` borrows.
        unsafe {
            self.launch(
                K::KERNEL,
                LaunchConfig::linear(grid, block),
                self.stream(),
                args,
            )
        }
    }

    fn vector_sum_repeat(
        &self,
        a: ArrayView1<f32>,
        b: ArrayView1<f32>,
        repeats: u32,
    ) -> Result<Array1<f32>> {
        self.vector_sum_repeat_with(a, b, repeats, false)
            .map(|(c, _)| c)
    }

    fn vector_sum_repeat_timed(
        &self,
        a: ArrayView1<f32>,
        b: ArrayView1<f32>,
        repeats: u32,
    ) -> Result<(Array1<f32>, RepeatTiming)> {
        let (c, times) = self.vector_sum_repeat_with(a, b, repeats, true)?;
        let (kernel_ms, with_transfers_ms) = timed_result(times, VECTOR_SUM_REPEAT.name())?;
        Ok((
            c,
            RepeatTiming {
                kernel_ms,
                with_transfers_ms,
            },
        ))
    }
}

/// The steps the launchers above share.
trait ElementwiseExtSteps {
    /// `vector_sum_repeat`, timed (`(kernel_ms, total_ms)`) or not.
    fn vector_sum_repeat_with(
        &self,
        a: ArrayView1<f32>,
        b: ArrayView1<f32>,
        repeats: u32,
        timed: bool,
    ) -> Result<(Array1<f32>, Times)>;
}

impl ElementwiseExtSteps for Gpu {
    fn vector_sum_repeat_with(
        &self,
        a: ArrayView1<f32>,
        b: ArrayView1<f32>,
        repeats: u32,
        timed: bool,
    ) -> Result<(Array1<f32>, Times)> {
        const K: &str = VECTOR_SUM_REPEAT.name();
        let (cfg, n) = self.prepare_pair_1d(K, a.len(), b.len(), REPEAT_THREADS)?;
        let stream = self.stream();
        let (a, b) = (contiguous(&a), contiguous(&b));
        let timers = PhaseTimers::start(self, timed)?;
        let da = self.to_device(&a)?;
        let db = self.to_device(&b)?;
        let mut dc = self.zeroed::<f32>(n)?;
        timers.kernel_start()?;
        // SAFETY: da, db, dc hold n f32 each (checked above); dc overlaps neither.
        unsafe {
            self.launch(
                VECTOR_SUM_REPEAT,
                cfg,
                stream,
                (&da, &db, &mut dc, n, repeats),
            )
        }?;
        timers.kernel_stop()?;
        self.synchronize(K)?;
        let mut c = vec![0.0f32; n];
        dc.copy_to(&mut c[..])?;
        Ok((Array1::from(c), timers.finish()?))
    }
}

/// Times of one `vector_sum_repeat` run (the seed's "GPU Kernel evaluation
/// Time" and "GPU Time").
#[derive(Debug, Clone, Copy)]
pub struct RepeatTiming {
    /// The kernel alone, from CUDA events.
    pub kernel_ms: f32,
    /// Copies in, kernel and copy out, from CUDA events.
    pub with_transfers_ms: f32,
}

/// A 1-D view's elements as the device elements of the same bits, in
/// memory order.
fn to_dev<T: ElementwiseElement>(view: &ArrayView1<T>) -> Vec<T::Dev> {
    view.iter().map(|v| v.to_dev()).collect()
}

/// CPU reference of an elementwise kernel: applies `K`'s per-element
/// function (the one the GPU kernel calls) at every index. Same arguments
/// and checks as [`Gpu::elementwise`](crate::matrices::elementwise::ElementwiseExt::elementwise).
pub fn elementwise_cpu<K: Elementwise<T>, T: Copy + Default>(
    inputs: &[ArrayView1<T>],
    outputs: &mut [ArrayViewMut1<T>],
    scalars: &[T],
) -> Result<()> {
    let in_lens: Vec<usize> = inputs.iter().map(|a| a.len()).collect();
    let out_lens: Vec<usize> = outputs.iter().map(|a| a.len()).collect();
    let n = check_call::<K, T>(&in_lens, &out_lens, scalars.len())?;
    let mut ins = [T::default(); MAX_ELEMENTWISE_ARGS];
    let mut outs = [T::default(); MAX_ELEMENTWISE_ARGS];
    // The expression is ordinary Rust: in a debug build integer overflow
    // panics on the CPU (the GPU build wraps). That panic is turned into an
    // error here rather than reaching the caller.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_cpu::<K, T>(n, inputs, outputs, scalars, &mut ins, &mut outs)
    }))
    .map_err(|_| {
        crate::Error::invalid(
            K::ENTRY,
            "the expression panicked in the CPU reference (integer overflow in a debug build?); \
             the GPU kernel wraps instead",
        )
    })
}

/// The CPU reference's loop (see [`elementwise_cpu`]).
fn run_cpu<K: Elementwise<T>, T: Copy + Default>(
    n: usize,
    inputs: &[ArrayView1<T>],
    outputs: &mut [ArrayViewMut1<T>],
    scalars: &[T],
    ins: &mut [T; MAX_ELEMENTWISE_ARGS],
    outs: &mut [T; MAX_ELEMENTWISE_ARGS],
) {
    let (ni, no) = (inputs.len(), outputs.len());
    for i in 0..n {
        for (slot, a) in ins.iter_mut().zip(inputs) {
            *slot = a[i];
        }
        for (j, (slot, a)) in outs.iter_mut().zip(outputs.iter()).enumerate() {
            *slot = if j < K::OUTPUTS.len() {
                T::default()
            } else {
                a[i]
            };
        }
        K::element(&ins[..ni], &mut outs[..no], scalars);
        for (slot, a) in outs.iter().zip(outputs.iter_mut()) {
            a[i] = *slot;
        }
    }
}

/// CPU reference for `vector_sum_repeat`: the same double loop as the GPU (`repeats` times
/// per element), kept from being optimized away with
/// [`std::hint::black_box`] on the operands and the result.
pub fn vector_sum_repeat_cpu(
    a: ArrayView1<f32>,
    b: ArrayView1<f32>,
    repeats: u32,
) -> Result<Array1<f32>> {
    same_len("vector_sum_repeat (CPU)", "a and b", a.len(), b.len())?;
    let mut c = Array1::<f32>::zeros(a.len());
    for i in 0..a.len() {
        for _ in 0..repeats {
            c[i] = std::hint::black_box(vector_sum_repeat_element(
                std::hint::black_box(a[i]),
                std::hint::black_box(b[i]),
            ));
        }
    }
    Ok(c)
}

/// Generates the typed launcher of each kernel in the elementwise list
/// (`cuda_kernels_gpu::elementwise_kernels!`): [`NamedElementwiseExt`].
macro_rules! typed_launchers {
    (@sig $(#[$meta:meta])* $name:ident, $method:ident,
        (in [$($i:ident),* $(,)?] out [$($o:ident),* $(,)?] inout [$($io:ident),* $(,)?] scalar [$($s:ident),* $(,)?])
    ) => {
        $(#[$meta])*
        ///
        /// Generated from the elementwise kernel list: runs
        #[doc = concat!("`elementwise_", stringify!($name), "_<T>`")]
        /// through [`ElementwiseExt::elementwise`]; `in` arrays are views, `out`
        /// and `inout` arrays are written in place, scalars are values,
        /// in declaration order. Errors (no launch) on arrays of
        /// different or zero length.
        #[allow(clippy::too_many_arguments)]
        fn $method<'a, T>(
            &self,
            $($i: ArrayView1<'a, T>,)*
            $($o: ArrayViewMut1<'a, T>,)*
            $($io: ArrayViewMut1<'a, T>,)*
            $($s: T,)*
        ) -> Result<()>
        where
            T: ElementwiseElement,
            kernels::$name: Elementwise<T::Dev>;
    };
    (@impl $(#[$meta:meta])* $name:ident, $method:ident,
        (in [$($i:ident),* $(,)?] out [$($o:ident),* $(,)?] inout [$($io:ident),* $(,)?] scalar [$($s:ident),* $(,)?])
    ) => {
        fn $method<'a, T>(
            &self,
            $($i: ArrayView1<'a, T>,)*
            $($o: ArrayViewMut1<'a, T>,)*
            $($io: ArrayViewMut1<'a, T>,)*
            $($s: T,)*
        ) -> Result<()>
        where
            T: ElementwiseElement,
            kernels::$name: Elementwise<T::Dev>,
        {
            self.elementwise::<kernels::$name, T>(&[$($i),*], &mut [$($o,)* $($io,)*], &[$($s),*])
        }
    };
    ($(
        $(#[$meta:meta])*
        $name:ident => $method:ident <T: $($ty:ident),+ $(,)?> $sig:tt $body:block
    )*) => {
        /// The typed launcher of each kernel in the elementwise list, on a [`Gpu`].
        pub trait NamedElementwiseExt {
            $( typed_launchers!(@sig $(#[$meta])* $name, $method, $sig); )*
        }

        impl NamedElementwiseExt for Gpu {
            $( typed_launchers!(@impl $(#[$meta])* $name, $method, $sig); )*
        }
    };
}
cuda_kernels_gpu::elementwise_kernels!(typed_launchers);

#[cfg(test)]
mod tests {
    use super::kernels::{lerp, saxpy, sum};
    use super::*;
    use ndarray::array;

    #[test]
    fn cpu_reference_uses_the_declared_expressions() {
        let a = array![1i32, 2, 3];
        let b = array![10i32, 20, 30];
        let mut c = Array1::<i32>::zeros(3);
        elementwise_cpu::<sum, i32>(&[a.view(), b.view()], &mut [c.view_mut()], &[]).unwrap();
        assert_eq!(c, array![11, 22, 33]);

        let x = array![1.0f32, 2.0];
        let mut y = array![0.5f32, 0.25];
        elementwise_cpu::<saxpy, f32>(&[x.view()], &mut [y.view_mut()], &[2.0]).unwrap();
        assert_eq!(y, array![2.5, 4.25]);

        let (a, b, t) = (
            array![0.0f64, 10.0],
            array![1.0f64, 20.0],
            array![0.5f64, 0.25],
        );
        let mut out = Array1::<f64>::zeros(2);
        elementwise_cpu::<lerp, f64>(&[a.view(), b.view(), t.view()], &mut [out.view_mut()], &[])
            .unwrap();
        assert_eq!(out, array![0.5, 12.5]);
    }

    #[test]
    fn arity_and_lengths_are_checked() {
        let a = array![1i32, 2, 3];
        let short = array![1i32, 2];
        let mut c = Array1::<i32>::zeros(3);
        let e = elementwise_cpu::<sum, i32>(&[a.view()], &mut [c.view_mut()], &[]);
        assert!(matches!(e, Err(Error::InvalidInput { .. })));
        let e = elementwise_cpu::<sum, i32>(&[a.view(), short.view()], &mut [c.view_mut()], &[]);
        assert!(matches!(e, Err(Error::InvalidInput { .. })));
        let e = elementwise_cpu::<sum, i32>(&[a.view(), a.view()], &mut [c.view_mut()], &[1]);
        assert!(matches!(e, Err(Error::InvalidInput { .. })));
        let z = Array1::<i32>::zeros(0);
        let mut zc = Array1::<i32>::zeros(0);
        let e = elementwise_cpu::<sum, i32>(&[z.view(), z.view()], &mut [zc.view_mut()], &[]);
        assert!(matches!(e, Err(Error::InvalidInput { .. })));
    }

    #[test]
    fn names_follow_the_spec() {
        assert_eq!(<sum as Elementwise<i32>>::ENTRY, "elementwise_sum_i32");
        assert_eq!(<saxpy as Elementwise<f32>>::ENTRY, "elementwise_saxpy_f32");
        assert_eq!(<saxpy as Elementwise<f32>>::INOUTS, &["y"]);
        assert_eq!(<lerp as Elementwise<f64>>::INPUTS, &["a", "b", "t"]);
    }

    #[test]
    fn repeat_reference() {
        let a = array![1.0f32, 2.0];
        let b = array![0.5f32, 0.25];
        let c = vector_sum_repeat_cpu(a.view(), b.view(), 100).unwrap();
        assert_eq!(c, array![1.5, 2.25]);
        assert!(vector_sum_repeat_cpu(a.view(), a.slice(ndarray::s![..1]), 1).is_err());
    }

    #[test]
    fn cpu_overflow_is_an_error_or_wraps_never_a_panic() {
        let a = ndarray::Array1::from(vec![i32::MAX]);
        let b = ndarray::Array1::from(vec![1]);
        let mut c = ndarray::Array1::from(vec![0]);
        let r = elementwise_cpu::<sum, i32>(&[a.view(), b.view()], &mut [c.view_mut()], &[]);
        // The kernel crate is built with or without overflow checks (the
        // workspace's dev profile has none for it, as the GPU build).
        match r {
            Err(crate::Error::InvalidInput { .. }) => {}
            Ok(()) => assert_eq!(c[0], i32::MIN),
            Err(e) => panic!("{e:?}"),
        }
    }
}
