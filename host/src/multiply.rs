//! Launchers for K1 `multiply` (device buffers and unified memory), K6
//! `vector_sum_i32` and K19 `empty_kernel` (launch overhead).
use std::time::Instant;

use cust::memory::{DeviceCopy, UnifiedBuffer};
use ndarray::{Array1, ArrayView1, Zip};

use cuda_kernels_gpu::multiply::{EMPTY_KERNEL, MULTIPLY, VECTOR_SUM_I32};

use crate::Gpu;
use crate::error::{CudaResultExt, Error, Result};
use crate::kernel::Kernel;
use crate::launch::LaunchConfig;
use crate::launch::same_len;
use crate::memory::DeviceSlice;
use crate::timing::{PhaseTimers, Times, timed_result};
use crate::util::contiguous;
use crate::vectorized::PairLaunch;

/// Times of one `multiply` run.
#[derive(Debug, Clone, Copy)]
pub struct MultiplyTiming {
    /// The kernel alone, from CUDA events.
    pub kernel_ms: f32,
    /// Copies in, kernel and copy out, from CUDA events.
    pub with_transfers_ms: f32,
}

/// Which memory `multiply` works in (seed 000 uses `cudaMallocManaged`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryMode {
    /// `cuMemAlloc` buffers with explicit copies.
    Device,
    /// Unified (managed) memory, as seed 000's `cudaMallocManaged`.
    Unified,
}

/// The `multiply` family launchers on a [`Gpu`].
pub trait MultiplyExt {
    /// `c = a * b` elementwise on the GPU (K1), on either backend.
    ///
    /// Errors (no launch) when the lengths differ or are 0.
    fn multiply(&self, a: ArrayView1<f32>, b: ArrayView1<f32>) -> Result<Array1<f32>>;

    /// [`Gpu::multiply`](crate::multiply::MultiplyExt::multiply) in the chosen memory mode, with CUDA-event times
    /// (GPU only: [`Error::NotOnSimulator`] on the simulator).
    fn multiply_timed(
        &self,
        a: ArrayView1<f32>,
        b: ArrayView1<f32>,
        mode: MemoryMode,
    ) -> Result<(Array1<f32>, MultiplyTiming)>;

    /// Queues `multiply` on [`Gpu::stream`] over data already on the device:
    /// `c = a * b`, without copies or synchronization (for pipelines and
    /// benchmarks). Lengths are checked; the caller synchronizes before
    /// reading `c`. Safe under the
    /// [`_on_device` rule](Gpu#launchers-that-leave-work-in-flight-the-_on_device-rule).
    fn multiply_on_device(
        &self,
        a: &DeviceSlice<f32>,
        b: &DeviceSlice<f32>,
        c: &mut DeviceSlice<f32>,
    ) -> Result<()>;

    /// Queues `vector_sum_i32` on [`Gpu::stream`] over data already on the
    /// device: `res = a + b` (wrapping), without copies or synchronization.
    /// Lengths are checked; the caller synchronizes before reading `res`.
    fn vector_sum_i32_on_device(
        &self,
        a: &DeviceSlice<i32>,
        b: &DeviceSlice<i32>,
        res: &mut DeviceSlice<i32>,
    ) -> Result<()>;

    /// `res = a + b` elementwise on i32 (K6, PyOpenCL's `vectorSum`),
    /// wrapping on overflow like the CPU reference.
    fn vector_sum_i32(&self, a: ArrayView1<i32>, b: ArrayView1<i32>) -> Result<Array1<i32>>;

    /// K19: launches `empty_kernel` `launches` times, once synchronously
    /// (launch, synchronize, repeat) and once pipelined (all launches, then
    /// one synchronize), and returns the launch rates (GPU only: a timing).
    fn launch_overhead(&self, launches: usize) -> Result<LaunchRates>;
}

impl MultiplyExt for Gpu {
    fn multiply(&self, a: ArrayView1<f32>, b: ArrayView1<f32>) -> Result<Array1<f32>> {
        self.multiply_with(a, b, MemoryMode::Device, false)
            .map(|(c, _)| c)
    }

    fn multiply_timed(
        &self,
        a: ArrayView1<f32>,
        b: ArrayView1<f32>,
        mode: MemoryMode,
    ) -> Result<(Array1<f32>, MultiplyTiming)> {
        let (c, times) = self.multiply_with(a, b, mode, true)?;
        let (kernel_ms, with_transfers_ms) = timed_result(times, MULTIPLY.name())?;
        Ok((
            c,
            MultiplyTiming {
                kernel_ms,
                with_transfers_ms,
            },
        ))
    }

    fn multiply_on_device(
        &self,
        a: &DeviceSlice<f32>,
        b: &DeviceSlice<f32>,
        c: &mut DeviceSlice<f32>,
    ) -> Result<()> {
        self.pair_on_device(MULTIPLY, a, b, c)
    }

    fn vector_sum_i32_on_device(
        &self,
        a: &DeviceSlice<i32>,
        b: &DeviceSlice<i32>,
        res: &mut DeviceSlice<i32>,
    ) -> Result<()> {
        self.pair_on_device(VECTOR_SUM_I32, a, b, res)
    }

    fn vector_sum_i32(&self, a: ArrayView1<i32>, b: ArrayView1<i32>) -> Result<Array1<i32>> {
        const K: &str = VECTOR_SUM_I32.name();
        same_len(K, "a and b", a.len(), b.len())?;
        let n = a.len();
        if n == 0 {
            return Err(Error::invalid(K, "empty input: nothing to launch"));
        }
        self.bind()?;
        let da = self.to_device(&contiguous(&a))?;
        let db = self.to_device(&contiguous(&b))?;
        // SAFETY: written in full by the kernel before it is read.
        let mut dr = unsafe { self.uninitialized::<i32>(n) }?;
        self.vector_sum_i32_on_device(&da, &db, &mut dr)?;
        self.synchronize(K)?;
        let mut res = vec![0i32; n];
        dr.copy_to(&mut res[..])?;
        Ok(Array1::from(res))
    }

    fn launch_overhead(&self, launches: usize) -> Result<LaunchRates> {
        const K: &str = EMPTY_KERNEL.name();
        if launches == 0 {
            return Err(Error::invalid(K, "launch count 0"));
        }
        self.require_cuda("launch-rate timing")?;
        self.bind()?;
        let stream = self.stream();
        let cfg = LaunchConfig::linear(1, 1);
        // Warm-up: the first launch pays for module JIT and lazy loading.
        // SAFETY: empty_kernel takes no arguments and touches no memory.
        unsafe { self.launch(EMPTY_KERNEL, cfg, stream, ()) }?;
        self.synchronize(K)?;
        let t = Instant::now();
        for _ in 0..launches {
            // SAFETY: as above.
            unsafe { self.launch(EMPTY_KERNEL, cfg, stream, ()) }?;
            self.synchronize(K)?;
        }
        let synchronous = launches as f64 / t.elapsed().as_secs_f64();
        let t = Instant::now();
        for _ in 0..launches {
            // SAFETY: as above.
            unsafe { self.launch(EMPTY_KERNEL, cfg, stream, ()) }?;
        }
        self.synchronize(K)?;
        let pipelined = launches as f64 / t.elapsed().as_secs_f64();
        Ok(LaunchRates {
            synchronous_per_s: synchronous,
            pipelined_per_s: pipelined,
        })
    }
}

/// The steps the launchers above share.
trait MultiplyExtSteps {
    /// `multiply` in `mode`, timed (`(kernel_ms, total_ms)`) or not.
    fn multiply_with(
        &self,
        a: ArrayView1<f32>,
        b: ArrayView1<f32>,
        mode: MemoryMode,
        timed: bool,
    ) -> Result<(Array1<f32>, Times)>;

    /// Queues the two-input kernel `kernel` (`multiply`, `vector_sum_i32`:
    /// `(a, b, c, n)` with 4-byte elements) over `c.len()` elements.
    fn pair_on_device<T: DeviceCopy>(
        &self,
        kernel: Kernel<(*const T, *const T, *mut T, usize)>,
        a: &DeviceSlice<T>,
        b: &DeviceSlice<T>,
        c: &mut DeviceSlice<T>,
    ) -> Result<()>;
}

impl MultiplyExtSteps for Gpu {
    fn multiply_with(
        &self,
        a: ArrayView1<f32>,
        b: ArrayView1<f32>,
        mode: MemoryMode,
        timed: bool,
    ) -> Result<(Array1<f32>, Times)> {
        const K: &str = MULTIPLY.name();
        let (cfg, n) = self.prepare_pair_vectorized(K, a.len(), b.len(), 4)?;
        if mode == MemoryMode::Unified {
            self.require_cuda("unified memory")?;
        }
        let stream = self.stream();
        let (a, b) = (contiguous(&a), contiguous(&b));
        let timers = PhaseTimers::start(self, timed)?;
        let c = match mode {
            MemoryMode::Device => {
                let da = self.to_device(&a)?;
                let db = self.to_device(&b)?;
                // SAFETY: the buffer is written in full by the kernel before it is read.
                let mut dc = unsafe { self.uninitialized::<f32>(n) }?;
                timers.kernel_start()?;
                // SAFETY: da, db, dc hold n f32 each (lengths checked above); dc overlaps neither.
                unsafe { self.launch(MULTIPLY, cfg, stream, (&da, &db, &mut dc, n)) }?;
                timers.kernel_stop()?;
                self.synchronize(K)?;
                let mut c = vec![0.0f32; n];
                dc.copy_to(&mut c[..])?;
                c
            }
            MemoryMode::Unified => {
                let mut ua = UnifiedBuffer::from_slice(&a).during(K, "allocate unified a")?;
                let mut ub = UnifiedBuffer::from_slice(&b).during(K, "allocate unified b")?;
                let mut uc = UnifiedBuffer::new(&0.0f32, n).during(K, "allocate unified c")?;
                timers.kernel_start()?;
                // SAFETY: ua, ub, uc hold n f32 each in managed memory; uc overlaps neither;
                // the host touches none of them until the stream is synchronized.
                unsafe {
                    let args = (
                        ua.as_unified_ptr(),
                        ub.as_unified_ptr(),
                        uc.as_unified_ptr(),
                        n,
                    );
                    self.launch(MULTIPLY, cfg, stream, args)
                }?;
                timers.kernel_stop()?;
                self.synchronize(K)?;
                uc.as_slice().to_vec()
            }
        };
        Ok((Array1::from(c), timers.finish()?))
    }

    fn pair_on_device<T: DeviceCopy>(
        &self,
        kernel: Kernel<(*const T, *const T, *mut T, usize)>,
        a: &DeviceSlice<T>,
        b: &DeviceSlice<T>,
        c: &mut DeviceSlice<T>,
    ) -> Result<()> {
        let k = kernel.name();
        same_len(k, "a and the output", a.len(), c.len())?;
        let size = std::mem::size_of::<T>();
        let (cfg, n) = self.prepare_pair_vectorized(k, a.len(), b.len(), size)?;
        // SAFETY: a, b, c hold n elements each (checked above) of the kernel's
        // type; `c` is borrowed mutably, so it aliases neither input; all three
        // belong to this device (checked by the launch).
        unsafe { self.launch(kernel, cfg, self.stream(), (a, b, c, n)) }
    }
}

/// Pipelined launches per second of `empty_kernel` through [`Gpu::launch`]
/// and through a bare `cuLaunchKernel` on the same function and stream.
#[derive(Debug, Clone, Copy)]
pub struct TypedVsBare {
    /// Through [`Gpu::launch`] (handle lookup, argument packing, launch).
    pub typed_per_s: f64,
    /// A bare `cuLaunchKernel` with the function looked up beforehand.
    pub bare_per_s: f64,
}

impl TypedVsBare {
    /// How much longer a typed launch takes than a bare one (0.03 = 3%).
    pub fn overhead(&self) -> f64 {
        self.bare_per_s / self.typed_per_s - 1.0
    }
}

/// Launch-rate measurements on a [`Gpu`].
pub trait LaunchOverheadExt {
    /// The cost of the typed launch path: `launches` pipelined launches of
    /// `empty_kernel` through [`Gpu::launch`] and as many through a bare
    /// `cuLaunchKernel`, alternating in `rounds` rounds (each side's best
    /// round counts, so that a disturbance hits neither side alone).
    fn typed_launch_overhead(&self, launches: usize, rounds: usize) -> Result<TypedVsBare>;
}

impl LaunchOverheadExt for Gpu {
    fn typed_launch_overhead(&self, launches: usize, rounds: usize) -> Result<TypedVsBare> {
        const K: &str = EMPTY_KERNEL.name();
        if launches == 0 || rounds == 0 {
            return Err(Error::invalid(K, "launch or round count 0"));
        }
        self.require_cuda("launch-rate timing")?;
        self.bind()?;
        let stream = self.stream();
        let raw_stream = stream.as_cust()?.as_inner();
        let cfg = LaunchConfig::linear(1, 1);
        let function = self.function(K)?.to_raw();
        let bare = || -> Result<()> {
            // SAFETY: `function` is empty_kernel of this GPU's module, which
            // takes no parameters (an empty list) and touches no memory.
            let r = unsafe {
                cust::sys::cuLaunchKernel(
                    function,
                    1,
                    1,
                    1,
                    1,
                    1,
                    1,
                    0,
                    raw_stream,
                    [].as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            };
            crate::error::check_driver(r, K, "launch")
        };
        // SAFETY: empty_kernel takes no arguments and touches no memory.
        let typed = || unsafe { self.launch(EMPTY_KERNEL, cfg, stream, ()) };
        // Warm-up: both paths once (the typed one fills its cache).
        typed()?;
        bare()?;
        self.synchronize(K)?;
        let rate = |launch: &dyn Fn() -> Result<()>| -> Result<f64> {
            let t = Instant::now();
            for _ in 0..launches {
                launch()?;
            }
            self.synchronize(K)?;
            Ok(launches as f64 / t.elapsed().as_secs_f64())
        };
        let (mut typed_per_s, mut bare_per_s) = (0.0f64, 0.0f64);
        for _ in 0..rounds {
            typed_per_s = typed_per_s.max(rate(&typed)?);
            bare_per_s = bare_per_s.max(rate(&bare)?);
        }
        Ok(TypedVsBare {
            typed_per_s,
            bare_per_s,
        })
    }
}

/// Launches per second of an empty kernel (K19).
#[derive(Debug, Clone, Copy)]
pub struct LaunchRates {
    /// Launch then synchronize, each time.
    pub synchronous_per_s: f64,
    /// Many launches, one synchronize.
    pub pipelined_per_s: f64,
}

/// Seed 000's inputs of [`Gpu::multiply`](crate::multiply::MultiplyExt::multiply): `rand() % 10` as f32, `n` of
/// each, from [`Rng`](crate::util::Rng) seeded with `seed`.
pub fn multiply_inputs(n: usize, seed: u64) -> (Array1<f32>, Array1<f32>) {
    let mut rng = crate::util::Rng::new(seed);
    let a = (0..n).map(|_| rng.below(10) as f32).collect();
    let b = (0..n).map(|_| rng.below(10) as f32).collect();
    (a, b)
}

/// CPU reference for [`Gpu::multiply`](crate::multiply::MultiplyExt::multiply). Panics-free: mismatched lengths are
/// an error, as on the GPU.
pub fn multiply_cpu(a: ArrayView1<f32>, b: ArrayView1<f32>) -> Result<Array1<f32>> {
    same_len("multiply (CPU)", "a and b", a.len(), b.len())?;
    // The seed's formula, c[i] = a[i] * b[i], written here.
    Ok(Zip::from(&a).and(&b).map_collect(|&x, &y| x * y))
}

/// CPU reference for [`Gpu::vector_sum_i32`](crate::multiply::MultiplyExt::vector_sum_i32).
pub fn vector_sum_i32_cpu(a: ArrayView1<i32>, b: ArrayView1<i32>) -> Result<Array1<i32>> {
    same_len("vector_sum_i32 (CPU)", "a and b", a.len(), b.len())?;
    Ok(Zip::from(&a)
        .and(&b)
        .map_collect(|&x, &y| x.wrapping_add(y)))
}
