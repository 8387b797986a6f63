//! A launch on host data in one call ([`Gpu::launch_host`]): each host
//! slice the kernel reads is copied to the device ([`In`]), each one it
//! writes is copied in and back ([`InOut`]), and the launch waits for the
//! kernel in between; scalars pass as they are. The parameter types are
//! checked at compile time as for [`Gpu::launch`], which it calls.
//!
//! ```
//! # mod k { cuda_kernels_device::kernels! {
//! #     /// `y[i] += a * x[i]` for `i < n`.
//! #     ///
//! #     /// # Safety
//! #     /// `x` and `y` hold `n` f32.
//! #     pub fn saxpy(x: *const f32, y: *mut f32, a: f32, n: usize) as SAXPY {
//! #         for i in cuda_kernels_device::thread::grid_stride(n) {
//! #             // SAFETY: i < n.
//! #             unsafe { *y.add(i) += a * *x.add(i) };
//! #         }
//! #     }
//! # } }
//! use cuda_kernels_runtime::host_launch::{In, InOut};
//! use cuda_kernels_runtime::{Gpu, LaunchConfig, Result};
//! fn saxpy(gpu: &Gpu, x: &[f32], y: &mut [f32]) -> Result<()> {
//!     let n = x.len().min(y.len());
//!     // SAFETY: x and y hold at least n f32 each.
//!     unsafe { gpu.launch_host(k::SAXPY, LaunchConfig::linear(1, 256), (In(x), InOut(y), 2.0f32, n)) }
//! }
//! let gpu = Gpu::simulator_of_crate(env!("CARGO_CRATE_NAME")); // or Gpu::from_images(&IMAGES)
//! let mut y = [10.0f32; 3];
//! saxpy(&gpu, &[1.0, 2.0, 3.0], &mut y)?;
//! assert_eq!(y, [12.0, 14.0, 16.0]);
//! # Ok::<(), cuda_kernels_runtime::Error>(())
//! ```
//! An `ndarray` array in standard layout enters as its slice
//! (`a.as_slice()`, `a.as_slice_mut()`).
use cust::memory::{DeviceCopy, DevicePointer};

use crate::Gpu;
use crate::error::Result;
use crate::kernel::{Kernel, KernelArgs, KernelParam};
use crate::launch::LaunchConfig;
use crate::memory::DeviceBuffer;

/// A host slice the kernel reads (a `*const T` parameter): copied to a
/// device buffer of its own before the launch.
#[derive(Debug, Clone, Copy)]
pub struct In<'a, T>(pub &'a [T]);

/// A host slice the kernel writes, and may read (a `*mut T` parameter):
/// copied to a device buffer of its own before the launch and back into
/// the slice after the kernel has finished, so that elements the kernel
/// does not write keep their values.
#[derive(Debug)]
pub struct InOut<'a, T>(pub &'a mut [T]);

/// An argument of [`Gpu::launch_host`] for a kernel parameter of type `P`:
/// [`In`], [`InOut`], or a scalar.
pub trait HostArg<P> {
    /// The argument on the device, during the launch.
    type Staged: Staged<P>;

    /// Copies the argument to `gpu` (host slices), or keeps it (scalars).
    fn stage(self, gpu: &Gpu) -> Result<Self::Staged>;
}

/// A [`HostArg`] on the device: what the launch passes, and what is copied
/// back after it.
pub trait Staged<P> {
    /// What the launch passes for the parameter (for a slice, the address
    /// of the buffer [`HostArg::stage`] allocated on the launching device).
    type Arg: KernelParam<P>;

    /// The launch's argument.
    fn arg(&self) -> Self::Arg;

    /// After the kernel has finished: copies what it wrote back to the host.
    fn finish(self) -> Result<()>;
}

impl<T: DeviceCopy> HostArg<*const T> for In<'_, T> {
    type Staged = DeviceBuffer<T>;

    fn stage(self, gpu: &Gpu) -> Result<DeviceBuffer<T>> {
        gpu.to_device(self.0)
    }
}

impl<T: DeviceCopy> Staged<*const T> for DeviceBuffer<T> {
    type Arg = DevicePointer<T>;

    fn arg(&self) -> DevicePointer<T> {
        self.as_device_ptr()
    }

    fn finish(self) -> Result<()> {
        Ok(())
    }
}

/// An [`InOut`] on the device: its buffer and the slice it goes back to.
#[derive(Debug)]
pub struct StagedInOut<'a, T: DeviceCopy> {
    host: &'a mut [T],
    device: DeviceBuffer<T>,
}

impl<'a, T: DeviceCopy> HostArg<*mut T> for InOut<'a, T> {
    type Staged = StagedInOut<'a, T>;

    fn stage(self, gpu: &Gpu) -> Result<StagedInOut<'a, T>> {
        let device = gpu.to_device(self.0)?;
        Ok(StagedInOut {
            host: self.0,
            device,
        })
    }
}

impl<T: DeviceCopy> Staged<*mut T> for StagedInOut<'_, T> {
    type Arg = DevicePointer<T>;

    fn arg(&self) -> DevicePointer<T> {
        self.device.as_device_ptr()
    }

    fn finish(self) -> Result<()> {
        self.device.copy_to(self.host)
    }
}

macro_rules! scalar_host_args {
    ($($t:ty),*) => {$(
        impl HostArg<$t> for $t {
            type Staged = $t;

            fn stage(self, _: &Gpu) -> Result<$t> {
                Ok(self)
            }
        }

        impl Staged<$t> for $t {
            type Arg = $t;

            fn arg(&self) -> $t {
                *self
            }

            fn finish(self) -> Result<()> {
                Ok(())
            }
        }
    )*};
}
scalar_host_args!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64);

/// Arguments of [`Gpu::launch_host`] for a kernel of parameters `P`:
/// tuples of [`HostArg`]s of the parameters, one for one, so that host
/// data of the wrong number or types does not compile.
pub trait HostArgs<P> {
    /// Stages the arguments, launches `kernel` on `gpu`'s stream, waits for
    /// it and copies the outputs back.
    ///
    /// # Safety
    /// As [`Gpu::launch_host`].
    unsafe fn launch_on(self, gpu: &Gpu, kernel: Kernel<P>, cfg: LaunchConfig) -> Result<()>;
}

macro_rules! host_tuple_args {
    ($($a:ident $p:ident $i:tt),*) => {
        impl<$($a: HostArg<$p>, $p,)*> HostArgs<($($p,)*)> for ($($a,)*)
        where
            ($(<$a::Staged as Staged<$p>>::Arg,)*): KernelArgs<($($p,)*)>,
        {
            #[allow(unused_variables, clippy::unused_unit)]
            unsafe fn launch_on(
                self,
                gpu: &Gpu,
                kernel: Kernel<($($p,)*)>,
                cfg: LaunchConfig,
            ) -> Result<()> {
                let staged = ($(self.$i.stage(gpu)?,)*);
                let args = ($(staged.$i.arg(),)*);
                // SAFETY: every slice argument is the address of a device
                // buffer of its own on this device, of the host slice's
                // length, alive until the kernel has finished (`staged`
                // outlives the synchronisation below); the rest is the
                // caller's contract (`Gpu::launch_host`).
                unsafe { gpu.launch(kernel, cfg, gpu.stream(), args) }?;
                gpu.synchronize(kernel.name())?;
                $(staged.$i.finish()?;)*
                Ok(())
            }
        }
    };
}
for_each_arity!(host_tuple_args);

impl Gpu {
    /// Launches `kernel` with `cfg` on host data, in one call: copies each
    /// [`In`] and [`InOut`] slice to a device buffer of its own, launches
    /// on this device's stream ([`Gpu::launch`], with all its checks), waits
    /// for the kernel, and copies each [`InOut`] buffer back into its
    /// slice. Scalars pass as they are. A failure of any step is this
    /// crate's [`Error`](crate::Error) naming the kernel or the copy; the
    /// slices are then left as they were, or partly written back.
    ///
    /// ```
    /// use cuda_kernels_runtime::{Gpu, In, InOut, LaunchConfig};
    ///
    /// mod k {
    ///     use cuda_kernels_device::thread;
    ///     cuda_kernels_device::kernels! {
    ///         /// `y[i] = a · x[i] + y[i]` for `i < n`.
    ///         ///
    ///         /// # Safety
    ///         /// `x` and `y` hold `n` f32.
    ///         pub fn axpy(x: *const f32, y: *mut f32, a: f32, n: usize) as AXPY {
    ///             for i in thread::grid_stride(n) {
    ///                 // SAFETY: i < n.
    ///                 unsafe { *y.add(i) += a * *x.add(i) };
    ///             }
    ///         }
    ///     }
    /// }
    ///
    /// # fn main() -> cuda_kernels_runtime::Result<()> {
    /// // The simulator running this crate's kernels (a program with a GPU
    /// // opens one with `Gpu::from_images_or_simulator(&IMAGES)`).
    /// let gpu = Gpu::simulator_of_crate(env!("CARGO_CRATE_NAME"));
    /// let x = vec![1.0f32; 1000];
    /// let mut y = vec![2.0f32; 1000];
    /// // SAFETY: n is the length of both slices.
    /// unsafe {
    ///     gpu.launch_host(
    ///         k::AXPY,
    ///         LaunchConfig::linear(4, 256),
    ///         (In(&x), InOut(&mut y), 3.0f32, 1000usize),
    ///     )?
    /// };
    /// assert!(y.iter().all(|&v| v == 5.0));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Safety
    /// The kernel's own `# Safety` contract, for these arguments and `cfg`:
    /// the sizes passed as scalars agree with the slices' lengths, and the
    /// kernel reads and writes nothing beyond them. (The buffers never
    /// alias: each slice gets its own, even the same slice twice.)
    pub unsafe fn launch_host<P, A: HostArgs<P>>(
        &self,
        kernel: Kernel<P>,
        cfg: LaunchConfig,
        args: A,
    ) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { args.launch_on(self, kernel, cfg) }
    }
}

#[cfg(test)]
mod tests {
    use super::{In, InOut};
    use crate::{Gpu, LaunchConfig};

    cuda_kernels_device::kernels! {
        /// `y[i] = a * x[i] + y[i]` for `i < n`.
        ///
        /// # Safety
        /// `x` and `y` hold `n` f32.
        pub fn axpy(x: *const f32, y: *mut f32, a: f32, n: usize) as AXPY {
            for i in cuda_kernels_device::thread::grid_stride(n) {
                // SAFETY: i < n, inside both arrays (the caller's contract).
                unsafe { *y.add(i) += a * *x.add(i) };
            }
        }
    }

    #[test]
    fn host_slices_go_in_and_come_back_in_one_call() {
        let gpu = Gpu::simulator_of_crate(env!("CARGO_CRATE_NAME"));
        let x: Vec<f32> = (0..1000).map(|i| i as f32).collect();
        let mut y = vec![1.0f32; 1000];
        // SAFETY: x and y hold 1000 f32 each.
        unsafe {
            gpu.launch_host(
                AXPY,
                LaunchConfig::linear(4, 128),
                (In(&x), InOut(&mut y), 2.0f32, 1000usize),
            )
        }
        .unwrap();
        let want: Vec<f32> = x.iter().map(|v| 2.0 * v + 1.0).collect();
        assert_eq!(y, want);
        // Elements the kernel does not write keep their values.
        let mut y = vec![5.0f32; 1000];
        // SAFETY: the first 10 of each.
        unsafe {
            gpu.launch_host(
                AXPY,
                LaunchConfig::linear(1, 32),
                (In(&x), InOut(&mut y), 1.0f32, 10usize),
            )
        }
        .unwrap();
        assert_eq!(y[9], 14.0);
        assert_eq!(y[10..], [5.0; 990]);
    }

    #[test]
    fn a_kernel_past_its_slice_is_the_simulators_finding() {
        let gpu = Gpu::simulator_of_crate(env!("CARGO_CRATE_NAME"));
        let x = [1.0f32; 4];
        let mut y = [0.0f32; 4];
        // SAFETY: not kept: n is past both slices, which the simulator's
        // bounds check reports (on a GPU this would be undefined).
        let e = unsafe {
            gpu.launch_host(
                AXPY,
                LaunchConfig::linear(1, 32),
                (In(&x), InOut(&mut y), 1.0f32, 8usize),
            )
        }
        .unwrap_err();
        println!("{e}");
        assert!(e.to_string().contains("axpy"), "{e}");
        assert_eq!(y, [0.0; 4], "nothing is copied back after a failure");
    }
}
