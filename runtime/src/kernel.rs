//! The one typed launch path: a kernel's [`Kernel`] handle (declared once in
//! the kernel crate with `kernels!`), a [`LaunchConfig`], and arguments
//! whose types the handle checks at compile time ([`KernelArgs`]).
//!
//! ```no_run
//! # mod k { cuda_kernels_device::kernels! {
//! #     /// `c[i] = a[i] * b[i]` for `i < n`.
//! #     ///
//! #     /// # Safety
//! #     /// `a`, `b` and `c` hold `n` f32.
//! #     pub fn multiply(a: *const f32, b: *const f32, c: *mut f32, n: usize) as MULTIPLY {
//! #         for i in cuda_kernels_device::thread::grid_stride(n) {
//! #             // SAFETY: i < n.
//! #             unsafe { *c.add(i) = *a.add(i) * *b.add(i) };
//! #         }
//! #     }
//! # } }
//! # use k::MULTIPLY;
//! use cuda_kernels_runtime::{DeviceBuffer, Gpu, LaunchConfig, Result};
//!
//! fn run(gpu: &Gpu, a: &DeviceBuffer<f32>, b: &DeviceBuffer<f32>, c: &mut DeviceBuffer<f32>) -> Result<()> {
//!     let n = a.len();
//!     let cfg = LaunchConfig::linear(n.div_ceil(256) as u32, 256);
//!     // SAFETY: a, b and c hold n f32 each and c overlaps neither input.
//!     unsafe { gpu.launch(MULTIPLY, cfg, gpu.stream(), (a, b, c, n)) }
//! }
//! ```
//! Arguments of the wrong types or number do not compile:
//! ```compile_fail,E0277
//! # mod k { cuda_kernels_device::kernels! {
//! #     /// # Safety
//! #     /// `c` holds `n` f32.
//! #     pub fn fill(c: *mut f32, n: usize) as FILL { let _ = (c, n); }
//! # } }
//! # use cuda_kernels_runtime::{DeviceBuffer, Gpu, LaunchConfig, Result};
//! # fn run(gpu: &Gpu, c: &mut DeviceBuffer<i32>, n: usize) -> Result<()> {
//! // i32, where fill takes f32
//! unsafe { gpu.launch(k::FILL, LaunchConfig::linear(1, 256), gpu.stream(), (c, n)) }
//! # }
//! ```
//! ```compile_fail,E0277
//! # mod k { cuda_kernels_device::kernels! {
//! #     /// # Safety
//! #     /// `c` holds `n` f32.
//! #     pub fn fill(c: *mut f32, n: usize) as FILL { let _ = (c, n); }
//! # } }
//! # use cuda_kernels_runtime::{DeviceBuffer, Gpu, LaunchConfig, Result};
//! # fn run(gpu: &Gpu, c: &mut DeviceBuffer<f32>) -> Result<()> {
//! // one argument, where fill takes two
//! unsafe { gpu.launch(k::FILL, LaunchConfig::linear(1, 256), gpu.stream(), (c,)) }
//! # }
//! ```
//!
//! # The handle cannot be forged
//! A handle's parameter types are what the launch trusts, so only
//! `kernels!` and the family macros make one (from the same tokens as the
//! entry point); [`Kernel::new`] and `Kernel::with_sim_entry` are `unsafe`:
//! ```compile_fail,E0133
//! use cuda_kernels_runtime::Kernel;
//! // multiply takes (*const f32, *const f32, *mut f32, usize), not a u8.
//! const FORGED: Kernel<(u8,)> = Kernel::new("cuda_kernels_gpu", "multiply");
//! ```
//! ```compile_fail,E0133
//! use cuda_kernels_runtime::Kernel;
//! unsafe fn body(_: *const *mut std::ffi::c_void) {}
//! // A host entry of the simulator's, with the same forged types.
//! const FORGED: Kernel<(u8,)> = Kernel::with_sim_entry("cuda_kernels_gpu", "multiply", body);
//! ```
//! nor does `kernel_handle!`, the family macros' building block, outside
//! an `unsafe` block (see its docs in `cuda_kernels_device`):
//! ```compile_fail,E0133
//! const FORGED: cuda_kernels_runtime::Kernel<(u8,)> =
//!     cuda_kernels_device::kernel_handle!(multiply(x: u8) {});
//! ```
//! Only this crate's types pass for a kernel parameter ([`KernelParam`] is
//! sealed):
//! ```compile_fail,E0277
//! use cuda_kernels_runtime::KernelParam;
//! struct Address(u64);
//! impl KernelParam<*mut f32> for Address {
//!     fn param(self) -> *mut f32 { self.0 as *mut f32 }
//! }
//! ```
//! and argument lists are this crate's tuples, or types whose author
//! promises their layout ([`KernelArgs`] is an `unsafe` trait):
//! ```compile_fail,E0200
//! use cuda_kernels_runtime::KernelArgs;
//! struct Forged;
//! impl KernelArgs<(*mut f32,)> for Forged {
//!     fn with_params<R>(self, f: impl FnOnce(&mut [*mut std::ffi::c_void]) -> R) -> R {
//!         f(&mut [])
//!     }
//! }
//! ```
//! and memory borrowed shared passes only for a `*const` parameter: a
//! kernel that writes through a `*mut T` needs `&mut`:
//! ```compile_fail,E0277
//! # mod k { cuda_kernels_device::kernels! {
//! #     /// # Safety
//! #     /// `c` holds `n` f32.
//! #     pub fn fill(c: *mut f32, n: usize) as FILL { let _ = (c, n); }
//! # } }
//! # use cuda_kernels_runtime::{DeviceBuffer, Gpu, LaunchConfig, Result};
//! # fn run(gpu: &Gpu, c: &DeviceBuffer<f32>, n: usize) -> Result<()> {
//! // SAFETY: c holds n f32.
//! unsafe { gpu.launch(k::FILL, LaunchConfig::linear(1, 256), gpu.stream(), (c, n)) }
//! # }
//! ```
//! Part of a buffer goes the same way: [`DeviceSlice::index`] gives a shared
//! [`DeviceView`] (`&view` passes for a `*const T` only, and `&mut` of it
//! is refused for a `*mut T`), [`DeviceSlice::index_mut`] an exclusive
//! [`DeviceViewMut`]; both borrow their buffer, so neither outlives it.
use std::ffi::c_void;

use cust::memory::{DeviceCopy, DevicePointer, UnifiedPointer};
use cust::sys as cu;

pub use cuda_kernels_device::kernel::Kernel;

use crate::Gpu;
use crate::error::{Error, Result};
use crate::launch::{LaunchConfig, check_launch_shape};
use crate::memory::{DeviceBuffer, DeviceId, DeviceSlice, DeviceView, DeviceViewMut, Stream};
use crate::simulator;

/// A value that can be passed for a kernel parameter of type `P`: a
/// [`DeviceSlice`], [`DeviceBuffer`] or view ([`DeviceView`],
/// [`DeviceViewMut`]) by reference (its device is checked
/// against the launching [`Gpu`]'s; `&` for a `*const T`, `&mut` for a
/// `*mut T` or a `*const T`), a [`DevicePointer<T>`] or
/// [`UnifiedPointer<T>`] (not checked: a raw device address enters as
/// `DevicePointer::from_raw`) for `*const T` or `*mut T`, a scalar for
/// itself. Sealed: the launch trusts what it passes, so no other type
/// implements it.
pub trait KernelParam<P>: sealed::Param<P> {
    /// The parameter's value.
    fn param(self) -> P;

    /// The device the value's memory belongs to, when it says
    /// (device slices and buffers).
    fn device(&self) -> Option<DeviceId> {
        None
    }

    /// The number of elements of the value's memory, when it says (device
    /// slices and buffers): what a graph's argument update compares
    /// ([`GraphExec::set_args`](crate::graph::GraphExec::set_args)).
    fn extent(&self) -> Option<usize> {
        None
    }

    /// The graph whose buffer the value is, when it is one
    /// ([`Held`](crate::graph::Held)): the id a capture checks.
    fn holder(&self) -> Option<u64> {
        None
    }
}

/// The seal of [`KernelParam`]: implemented for exactly its implementers.
mod sealed {
    /// A type this crate lets pass for a kernel parameter of type `P`.
    pub trait Param<P> {}
}

macro_rules! slice_params {
    ($($slice:ty => $($p:ty),+;)*) => {$($(
        impl<T: DeviceCopy> sealed::Param<$p> for $slice {}
        impl<T: DeviceCopy> KernelParam<$p> for $slice {
            fn param(self) -> $p {
                self.as_device_ptr().as_raw() as $p
            }

            fn device(&self) -> Option<DeviceId> {
                Some(DeviceSlice::device(self))
            }

            fn extent(&self) -> Option<usize> {
                Some(DeviceSlice::len(self))
            }
        }
    )+)*};
}
slice_params! {
    &DeviceSlice<T> => *const T;
    &mut DeviceSlice<T> => *const T, *mut T;
    &DeviceBuffer<T> => *const T;
    &mut DeviceBuffer<T> => *const T, *mut T;
    &DeviceView<'_, T> => *const T;
    &DeviceViewMut<'_, T> => *const T;
    &mut DeviceViewMut<'_, T> => *const T, *mut T;
}

/// A graph's buffer ([`Held`](crate::graph::Held)) passes for a `*const T`
/// or a `*mut T` of a launch captured into that graph (the capture checks
/// it is the graph's own).
macro_rules! held_params {
    ($($p:ty),*) => {$(
        impl<T: DeviceCopy> sealed::Param<$p> for crate::graph::Held<T> {}
        impl<T: DeviceCopy> KernelParam<$p> for crate::graph::Held<T> {
            fn param(self) -> $p {
                self.ptr.as_raw() as $p
            }

            fn device(&self) -> Option<DeviceId> {
                Some(self.device)
            }

            fn extent(&self) -> Option<usize> {
                Some(self.len)
            }

            fn holder(&self) -> Option<u64> {
                Some(self.pool)
            }
        }
    )*};
}
held_params!(*const T, *mut T);

impl<T: DeviceCopy> sealed::Param<*const T> for DevicePointer<T> {}
impl<T: DeviceCopy> KernelParam<*const T> for DevicePointer<T> {
    fn param(self) -> *const T {
        self.as_raw() as *const T
    }
}

impl<T: DeviceCopy> sealed::Param<*mut T> for DevicePointer<T> {}
impl<T: DeviceCopy> KernelParam<*mut T> for DevicePointer<T> {
    fn param(self) -> *mut T {
        self.as_raw() as *mut T
    }
}

impl<T: DeviceCopy> sealed::Param<*const T> for UnifiedPointer<T> {}
impl<T: DeviceCopy> KernelParam<*const T> for UnifiedPointer<T> {
    fn param(self) -> *const T {
        self.as_raw()
    }
}

impl<T: DeviceCopy> sealed::Param<*mut T> for UnifiedPointer<T> {}
impl<T: DeviceCopy> KernelParam<*mut T> for UnifiedPointer<T> {
    fn param(mut self) -> *mut T {
        self.as_raw_mut()
    }
}

macro_rules! scalar_params {
    ($($t:ty),*) => {$(
        impl sealed::Param<$t> for $t {}
        impl KernelParam<$t> for $t {
            fn param(self) -> $t {
                self
            }
        }
    )*};
}
scalar_params!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64);

/// Arguments for a kernel of parameters `P`: implemented for tuples whose
/// elements are [`KernelParam`]s of the parameters, one for one, so that a
/// launch with arguments of the wrong number or types does not compile.
///
/// # Safety
/// [`Gpu::launch`] hands what `with_params` builds to the kernel as its
/// parameters: an implementation must call `f` with exactly one pointer per
/// parameter of `P`, in order, each to a live value of that parameter's
/// type (the layout `cuLaunchKernel` reads), and `foreign_device` must name
/// the device of any argument's memory that is not `expected`'s.
pub unsafe trait KernelArgs<P> {
    /// Calls `f` with a pointer to each parameter's value, in order (what
    /// `cuLaunchKernel` takes).
    fn with_params<R>(self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R;

    /// The first argument whose memory belongs to a device other than
    /// `expected`, as that device (arguments that do not say are skipped).
    fn foreign_device(&self, expected: DeviceId) -> Option<DeviceId> {
        let _ = expected;
        None
    }

    /// As [`foreign_device`](KernelArgs::foreign_device), with the name of
    /// the argument (`argument 2`, counted from 0) where the
    /// implementation knows it.
    fn foreign_argument(&self, expected: DeviceId) -> Option<(&'static str, DeviceId)> {
        self.foreign_device(expected).map(|d| ("an argument", d))
    }

    /// The number of elements of each argument's memory, in order (`None`
    /// for a scalar or a raw pointer), where the implementation knows them;
    /// empty where it does not.
    fn extents(&self) -> Vec<Option<usize>> {
        Vec::new()
    }

    /// The graph of each argument that is a graph's buffer
    /// ([`Held`](crate::graph::Held)), in order (`None` for the others);
    /// empty where the implementation does not say.
    fn holders(&self) -> Vec<Option<u64>> {
        Vec::new()
    }
}

/// The names [`KernelArgs::foreign_argument`] gives arguments by position.
const ARGUMENT_NAMES: [&str; 15] = [
    "argument 0",
    "argument 1",
    "argument 2",
    "argument 3",
    "argument 4",
    "argument 5",
    "argument 6",
    "argument 7",
    "argument 8",
    "argument 9",
    "argument 10",
    "argument 11",
    "argument 12",
    "argument 13",
    "argument 14",
];

macro_rules! tuple_args {
    ($($a:ident $p:ident $i:tt),*) => {
        // SAFETY: one pointer per element, in order, to the element's
        // parameter value, alive during `f`.
        unsafe impl<$($a: KernelParam<$p>, $p,)*> KernelArgs<($($p,)*)> for ($($a,)*) {
            #[allow(unused_mut, unused_variables, clippy::unused_unit)]
            fn with_params<R>(self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
                let mut values = ($(self.$i.param(),)*);
                f(&mut [$(&mut values.$i as *mut $p as *mut c_void),*])
            }

            #[allow(unused_variables)]
            fn foreign_device(&self, expected: DeviceId) -> Option<DeviceId> {
                self.foreign_argument(expected).map(|(_, d)| d)
            }

            #[allow(unused_variables)]
            fn foreign_argument(&self, expected: DeviceId) -> Option<(&'static str, DeviceId)> {
                None $(.or_else(|| {
                    self.$i.device().filter(|&d| d != expected).map(|d| (ARGUMENT_NAMES[$i], d))
                }))*
            }

            fn extents(&self) -> Vec<Option<usize>> {
                vec![$(self.$i.extent()),*]
            }

            fn holders(&self) -> Vec<Option<u64>> {
                vec![$(self.$i.holder()),*]
            }
        }
    };
}
for_each_arity!(tuple_args);

impl Gpu {
    /// Queues `kernel` on `stream` with `cfg` and `args` (the one launch
    /// path of this crate, for both backends).
    ///
    /// Every device slice or buffer among `args`, and `stream`, must belong
    /// to this device: [`Error::WrongDevice`] otherwise, before anything is
    /// launched.
    ///
    /// A handle declared in a crate other than the one whose image this
    /// device runs is [`Error::KernelNotFound`] on both backends
    /// ([`Gpu::check_image`]), whatever entry points the module has.
    /// On a CUDA GPU the function is looked up by the handle's name once per
    /// [`Gpu`] and cached; a module without it is [`Error::KernelNotFound`]
    /// naming the handle's entry point, a failing `cuLaunchKernel`
    /// [`Error::Cuda`] with the kernel's name. On the simulator the kernel's
    /// host entry runs every thread of the grid before this returns (a
    /// handle without one is [`Error::NoSimEntry`]); a fault is
    /// [`Error::DeviceFault`] as on the GPU, and what only the simulator
    /// sees (a shared-memory race, a barrier some threads never reach, an
    /// access past a buffer, a launch shape past the simulated H100's
    /// limits) its own error naming the kernel.
    ///
    /// What the launch checks: the handle's parameter types against the
    /// arguments' (at compile time; a handle can only be made from the
    /// kernel's declaration, see [`Kernel::new`]), the handle's crate
    /// against the loaded image's, the device of every slice, buffer and
    /// the stream, and the launch shape against the device's limits.
    ///
    /// # Safety
    /// What the caller still promises, the kernel's own `# Safety`
    /// contract:
    /// - every pointer argument, including those made from raw addresses
    ///   (`DevicePointer::from_raw`), is valid for every element the kernel
    ///   reads and writes with these arguments and this configuration
    ///   (lengths and shapes agree with the sizes passed);
    /// - memory the kernel writes is not read or written by anything else
    ///   until the launch has finished (other streams, the host, and other
    ///   arguments of this launch that alias it);
    /// - the memory stays allocated until the launch has finished (the
    ///   stream is synchronized before a buffer is freed elsewhere than by
    ///   its `Drop`, which waits);
    /// - for the dynamic shared memory asked for by `cfg`, what the kernel
    ///   expects.
    pub unsafe fn launch<P, A: KernelArgs<P>>(
        &self,
        kernel: Kernel<P>,
        cfg: LaunchConfig,
        stream: &Stream,
        args: A,
    ) -> Result<()> {
        crate::graph::refuse_in_capture(
            "Gpu::launch (a launch outside the capture: use Capture::launch)",
        )?;
        let name = kernel.name();
        let shared_opt_in = self.check_launch(&kernel, cfg, stream.device(), &args)?;
        if self.is_simulated() {
            let entry = self.sim_entry(&kernel, cfg)?;
            // SAFETY: `entry` is the kernel's own host entry, which reads the
            // parameters the handle's `P` lists, in order, from the array that
            // `with_params` builds for exactly those types; the pointers'
            // validity is the caller's contract.
            let (DeviceId::Simulator { ordinal } | DeviceId::Cuda { ordinal, .. }) =
                self.device_id();
            return args.with_params(|params| unsafe {
                simulator::launch(name, ordinal, cfg, shared_opt_in, entry, params)
            });
        }
        let function = self.raw_function(name)?;
        let stream = stream.as_cust()?;
        // SAFETY: `function` is this module's entry point of the handle's
        // name, `stream` belongs to this GPU (checked above); the rest is the
        // caller's contract.
        unsafe { launch_function(function, kernel, cfg, stream, args) }
    }
}

impl Gpu {
    /// The checks of a launch of `kernel` with `cfg` on a stream of
    /// `stream_device` over `args`, before anything is queued (the typed
    /// launch's and a graph capture's): the handle's crate against the
    /// image's, the device of the stream and of every argument, the shape
    /// against the device's limits. Returns whether the kernel was opted in
    /// to its dynamic shared memory past 48 KB.
    pub(crate) fn check_launch<P, A: KernelArgs<P>>(
        &self,
        kernel: &Kernel<P>,
        cfg: LaunchConfig,
        stream_device: DeviceId,
        args: &A,
    ) -> Result<bool> {
        let name = kernel.name();
        self.check_image(kernel)?;
        self.check_device_id(name, "stream", stream_device)?;
        if let Some((argument, found)) = args.foreign_argument(self.device_id()) {
            return Err(Error::WrongDevice {
                kernel: name,
                argument,
                expected: self.device_id(),
                found,
            });
        }
        let limits = self.launch_limits();
        // The opt-in is looked up only past the 48 KB every kernel has.
        let shared_opt_in = cfg.shared_mem_bytes > limits.shared_per_block
            && self.shared_opted_in(name, cfg.shared_mem_bytes);
        check_launch_shape(name, cfg, limits, shared_opt_in)?;
        Ok(shared_opt_in)
    }

    /// The simulator's host entry of `kernel` ([`Error::NoSimEntry`]
    /// without one), after checking its registers for a block of `cfg`
    /// against the register file.
    pub(crate) fn sim_entry<P>(
        &self,
        kernel: &Kernel<P>,
        cfg: LaunchConfig,
    ) -> Result<cuda_kernels_device::sim::Entry> {
        let name = kernel.name();
        let entry = kernel
            .sim_entry()
            .ok_or(Error::NoSimEntry { kernel: name })?;
        let (bx, by, bz) = cfg.block;
        let threads = bx as u64 * by as u64 * bz as u64;
        crate::image::check_registers(name, self.kernel_resources(name), threads)?;
        Ok(entry)
    }
}

/// Queues `function`, the loaded entry point of `kernel`, on `stream`: the
/// core of [`Gpu::launch`], for a module other than a [`Gpu`]'s (one
/// `cuLaunchKernel`; a failure is [`Error::Cuda`] naming the kernel).
///
/// # Safety
/// As [`Gpu::launch`]; also `function` is the entry point `kernel` names,
/// from a module loaded in the context `stream` belongs to.
pub unsafe fn launch_function<P, A: KernelArgs<P>>(
    function: cu::CUfunction,
    kernel: Kernel<P>,
    cfg: LaunchConfig,
    stream: &cust::stream::Stream,
    args: A,
) -> Result<()> {
    let LaunchConfig {
        grid: (gx, gy, gz),
        block: (bx, by, bz),
        shared_mem_bytes,
    } = cfg;
    let r = args.with_params(|params| {
        // SAFETY: `function` is a live function of the stream's context;
        // `params` holds one pointer per kernel parameter, to a value of
        // its type (the handle's `P` and `KernelArgs<P>`), alive for the
        // call (cuLaunchKernel copies them); the pointers' validity is the
        // caller's contract.
        unsafe {
            cu::cuLaunchKernel(
                function,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                shared_mem_bytes,
                stream.as_inner(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
    });
    crate::error::check_driver(r, kernel.name(), "launch")
}
