//! The device handle: a CUDA device (primary context, the loaded PTX module,
//! a stream) or the CPU simulator, with the one typed launch
//! ([`Gpu::launch`]); the catalogue's launchers are extension traits on it
//! (`cuda_kernels::prelude`).
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::ffi::CString;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::Path;
use std::sync::{Arc, Mutex};

use cust::context::{Context, CurrentContext};
use cust::device::Device;
use cust::error::CudaError;
use cust::function::Function;
use cust::memory::{CopyDestination, LockedBuffer};
use cust::module::Module;
use cust::stream::StreamFlags;

use cuda_kernels_device::fault::{FAULT_POINTER_SYMBOL, FaultRecord};
use cuda_kernels_device::sim::Limits;

use crate::image::KernelResources;

use crate::error::{CudaResultExt, Error, Result, check_driver};
use crate::image::{Images, LoadedImage};
use cuda_kernels_device::kernel::Kernel;
use cust::memory::DeviceCopy;
use cust::memory::bytemuck::Zeroable;

use crate::memory::{DeviceBuffer, DeviceContext, DeviceId, DeviceSlice, Stream};
use crate::simulator;

/// Initialises the CUDA driver and returns device 0.
///
/// Only two failures mean "no GPU" ([`Error::is_no_gpu`]): the driver says
/// there is no device ([`Error::NoDevice`], also when it counts zero), or no
/// NVIDIA kernel driver is loaded ([`Error::NoDriver`]: see
/// [`kernel_driver_loaded`]). Any other failure of `cuInit` or
/// `cuDeviceGetCount` with the kernel driver loaded (a driver too old or
/// mismatched, …) is [`Error::DriverFailed`], naming the call and the
/// driver's error: a GPU that is there but unusable ([`classify_open_failure`]).
pub fn init() -> Result<Device> {
    // SAFETY: cuInit has no preconditions; 0 is its one valid flag value.
    let r = unsafe { raw_driver::cuInit(0) };
    if r != 0 {
        return Err(classify_open_failure("cuInit", r, kernel_driver_loaded()));
    }
    let mut count = 0i32;
    // SAFETY: `count` is a live i32 for the driver to write; cuInit succeeded.
    let r = unsafe { raw_driver::cuDeviceGetCount(&mut count) };
    if r != 0 {
        return Err(classify_open_failure(
            "cuDeviceGetCount",
            r,
            kernel_driver_loaded(),
        ));
    }
    if count == 0 {
        return Err(Error::NoDevice {
            reason: "the driver reports 0 devices".into(),
        });
    }
    Device::get_device(0).during("init", "cuDeviceGet")
}

/// The driver calls [`init`] makes, declared with the plain `int` result
/// the C API returns: a code the bindings' `CUresult` enum lacks (a newer
/// driver's, like `CUDA_ERROR_INSUFFICIENT_DRIVER` = 35) must be read as a
/// number, not as an enum it is no value of.
#[allow(clashing_extern_declarations)]
mod raw_driver {
    use std::ffi::c_char;

    unsafe extern "C" {
        pub fn cuInit(flags: u32) -> i32;
        pub fn cuDeviceGetCount(count: *mut i32) -> i32;
        pub fn cuGetErrorName(error: i32, name: *mut *const c_char) -> i32;
        pub fn cuGetErrorString(error: i32, text: *mut *const c_char) -> i32;
    }
}

/// `CUDA_ERROR_NO_DEVICE`.
const CUDA_ERROR_NO_DEVICE: i32 = 100;

/// The files whose presence means an NVIDIA kernel driver is loaded.
pub const KERNEL_DRIVER_FILES: [&str; 2] = ["/proc/driver/nvidia/version", "/dev/nvidiactl"];

/// Whether an NVIDIA kernel driver is loaded: one of [`KERNEL_DRIVER_FILES`]
/// exists.
pub fn kernel_driver_loaded() -> bool {
    KERNEL_DRIVER_FILES.iter().any(|f| Path::new(f).exists())
}

/// A driver result code as the driver names it:
/// `CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected`, or the
/// number alone when the driver library cannot say.
pub fn driver_error_name(code: i32) -> String {
    let text = |f: unsafe extern "C" fn(i32, *mut *const std::ffi::c_char) -> i32| {
        let mut p = std::ptr::null();
        // SAFETY: `p` is a live pointer for the driver to set to a static
        // NUL-terminated string; these two calls need no cuInit.
        let ok = unsafe { f(code, &mut p) } == 0 && !p.is_null();
        // SAFETY: on success `p` points at a static C string.
        ok.then(|| {
            unsafe { std::ffi::CStr::from_ptr(p) }
                .to_string_lossy()
                .into_owned()
        })
    };
    match (
        text(raw_driver::cuGetErrorName),
        text(raw_driver::cuGetErrorString),
    ) {
        (Some(name), Some(text)) => format!("{name} ({code}): {text}"),
        (Some(name), None) => format!("{name} ({code})"),
        _ => format!("CUresult {code}"),
    }
}

/// What the failure `code` of the driver call `call` (`cuInit`,
/// `cuDeviceGetCount`) means for the user, given whether an NVIDIA kernel
/// driver is loaded: [`Error::NoDevice`] when the driver says no device;
/// else [`Error::NoDriver`] when no kernel driver is loaded (a driver
/// library without a GPU, as Debian's `libcuda1` on a machine without one);
/// else [`Error::DriverFailed`]: the GPU is there and unusable, never "no
/// GPU".
pub fn classify_open_failure(call: &'static str, code: i32, kernel_driver_loaded: bool) -> Error {
    let said = format!("{call}: {}", driver_error_name(code));
    if code == CUDA_ERROR_NO_DEVICE {
        Error::NoDevice { reason: said }
    } else if !kernel_driver_loaded {
        Error::NoDriver {
            reason: format!(
                "{said} (no NVIDIA kernel driver is loaded: neither {} nor {} exists)",
                KERNEL_DRIVER_FILES[0], KERNEL_DRIVER_FILES[1]
            ),
        }
    } else {
        Error::DriverFailed { call, code, said }
    }
}

/// The environment variable that makes `cuda_kernels::gpu()` open the
/// simulator instead of device 0 when set to `1` (as Numba's
/// `NUMBA_ENABLE_CUDASIM=1` does for its CUDA simulator).
pub const SIM_ENV: &str = "CUDA_KERNELS_SIM";

/// Whether [`SIM_ENV`] asks for the simulator (`CUDA_KERNELS_SIM=1`).
pub fn sim_requested() -> bool {
    std::env::var(SIM_ENV).is_ok_and(|v| v.trim() == "1")
}

/// A device ready to run this crate's kernels: a CUDA GPU (the device, its
/// primary context, the loaded module from a cubin or the PTX, a stream), or
/// the CPU simulator ([`Gpu::simulated_device_of_crate`]), which runs the kernels' own Rust
/// code on the host with CUDA's execution model. The same launchers, buffers
/// ([`DeviceBuffer`]) and streams work on both;
/// what only hardware has (CUDA-event timings, concurrent streams, contexts,
/// the raw driver-API path, the C ABI, cuBLAS, unified and page-locked
/// memory) is [`Error::NotOnSimulator`] there.
///
/// `Gpu` is `Send + Sync`; every method makes the context current on the
/// calling thread first, so one `Gpu` can serve several threads. Fields drop
/// in order: the handle of the ordering stream first, then the module, the
/// device's [`DeviceContext`] last (released when nothing else holds it).
///
/// # Launchers that leave work in flight: the `_on_device` rule
/// Most launchers copy in, launch, synchronize and copy out. The
/// `*_on_device` ones (`multiply_on_device`, `matmul_on_device`,
/// `doubles_matrix_on_device`, `elementwise_on_device`,
/// `mandelbrot_on_device`, `reduce_on_device` and its `_shaped`
/// form, `mult_ker_on_device`) check every length, shape and device,
/// queue one kernel on [`Gpu::stream`] over device memory the caller lends
/// them as `&DeviceSlice`/`&mut DeviceSlice`, and return before it finishes
/// (on the simulator the kernel has run to completion when they return, so
/// the rule below holds there trivially).
///
/// **The rule: one ordering stream per device, which every other stream
/// joins.** [`Gpu::stream`] is not the `Gpu`'s own: it is its device's
/// ordering stream ([`DeviceContext::ordering`]), one blocking stream shared
/// by every `Gpu` of the device (two `Gpu`s of one device have equal
/// [`DeviceId`]s, so either accepts the other's buffers). Safe code reaches
/// device memory in four ways, and each is ordered with that stream:
/// - *launches*: every `_on_device` launcher (and every launcher that
///   synchronizes) queues on the ordering stream, so the `_on_device` work
///   of two `Gpu`s of one device runs in the order it was queued;
/// - *access*: the safe copies and memsets of [`DeviceSlice`] (`copy_from`,
///   `copy_to`, `to_vec`, `copy_from_device`, `set_zero`, `set_32`,
///   [`Gpu::to_device`], [`Gpu::zeroed`]) are `cust` calls on the legacy
///   default stream (those with host memory synchronous), and the ordering
///   stream is a *blocking* stream, ordered with it both ways: they start
///   after every kernel queued there before them, and the kernels queued
///   after them start after them;
/// - *other streams*: work that safe code queues over memory it lends on a
///   stream that is not the ordering stream (an NCCL collective on a
///   [`Gpu::new_stream`] stream or on a [`Lane`]'s non-blocking stream)
///   first makes that stream wait for the ordering stream
///   ([`Stream::wait_for_ordering`]) and afterwards makes the ordering
///   stream wait for it ([`Stream::join_ordering`]): events, so that the
///   work starts after the launches and copies queued before it, and the
///   launches and copies queued after it (`to_vec` included) see its
///   results;
/// - *freeing*: a CUDA buffer's `Drop` calls `cuMemFree`, which waits for
///   the device's outstanding work (the driver documents it as synchronous;
///   the stream-ordered `cuMemFreeAsync`, the exception, is not in `cust`
///   0.3.2's safe API). The memory of a buffer is freed by its own `Drop`
///   alone: each buffer, stream and event holds its device's
///   [`DeviceContext`], whose primary context is released only after the
///   last of them drops, so a buffer outlives the `Gpu` it came from with
///   its memory and values intact.
///
/// Queueing other work over that memory on another stream by hand takes
/// `unsafe` code (the asynchronous copies and [`Gpu::launch`] are `unsafe`),
/// whose author takes on the ordering (with the same two calls, or events of
/// their own). So a launcher must be `unsafe` only if the work it leaves in
/// flight touches memory that safe code can reach without waiting: host
/// memory (an asynchronous copy from or into a caller's buffer), or device
/// memory on a stream that is neither the ordering stream nor joined to it.
/// None of the `_on_device` launchers does; the [`Lane`] launchers
/// (`Lane::mult_ker`, `Lane::conway_step`) run on non-blocking streams and are
/// safe for a different reason: the lane owns every buffer its stream touches
/// (see [`crate::async_mem`]).
///
/// [`Lane`]: crate::async_mem::Lane
///
/// ```
/// # fn main() -> cuda_kernels_runtime::Result<()> {
/// // or Gpu::from_images(&IMAGES)? on device 0, cuda_kernels::gpu()? with the catalogue
/// let gpu = cuda_kernels_runtime::Gpu::simulated_device_of_crate(0, "kernels");
/// let a = gpu.to_device(&[1.0f32, 2.0, 3.0])?;
/// assert_eq!(a.to_vec()?, vec![1.0, 2.0, 3.0]);
/// # Ok(()) }
/// ```
pub struct Gpu {
    stream: Stream,
    id: DeviceId,
    /// The kernel crate whose image is loaded (whose kernel handles alone
    /// launch here); `None` for PTX that names none.
    image_crate: Option<String>,
    backend: Backend,
    /// The kernels' registers and local memory as `ptxas` reported them
    /// (the simulator checks a launch against them, as the driver does).
    kernel_resources: &'static [KernelResources],
    /// The dynamic shared memory each kernel (by name) may launch with past
    /// the 48 KB a block has without opting in
    /// ([`allow_dynamic_shared`](Self::allow_dynamic_shared)).
    shared_opt_in: Mutex<HashMap<&'static str, u32>>,
}

/// What a [`Gpu`] runs on.
enum Backend {
    /// A CUDA device (boxed: the simulator's variant is empty).
    Cuda(Box<CudaDevice>),
    /// The CPU simulator.
    Simulator,
}

/// The CUDA side of a [`Gpu`]. Fields drop in order: the module first, the
/// device's context (shared with every other resource of the device) last.
struct CudaDevice {
    module: Module,
    fault: Option<FaultBuffer>,
    image: LoadedImage,
    device: Device,
    context: Arc<DeviceContext>,
    /// The functions [`Gpu::launch`] has looked up, by the address and
    /// length of the entry name (the `CUfunction` as an address, so that
    /// `Gpu` stays `Send` and `Sync`).
    functions: Mutex<FunctionCache>,
    /// The launchers' per-GPU state ([`Gpu::launcher_state`]), one value
    /// per type.
    launcher_states: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
    /// The device's launch limits, which [`Gpu::launch`] checks a shape
    /// against before `cuLaunchKernel` (as the simulator does with an
    /// H100's), so that a bad shape gives the same error on both backends.
    limits: Limits,
}

/// The looked-up functions of a module, keyed by where their entry name
/// lies (`(address, length)` of the handle's `&'static str`): a launch
/// finds its function without hashing or comparing the name. The same name
/// at another address (a constant inlined in another crate) is looked up
/// once more and cached under that address too.
type FunctionCache = HashMap<(usize, usize), usize, BuildHasherDefault<AddressHasher>>;

/// The hasher of [`FunctionCache`]'s keys: two words mixed by a multiply
/// (the FxHash step), enough for addresses, which are distinct already.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// `device`'s limits: threads per block, block and grid dimensions, shared
/// memory per block without and with opt-in, multiprocessors and what each
/// keeps resident.
fn launch_limits(device: Device) -> Result<Limits> {
    use cust::device::DeviceAttribute as A;
    use cust::sys::CUdevice_attribute as Raw;
    let get = |a: A| {
        device
            .get_attribute(a)
            .map(|v| v.max(0) as u32)
            .during("context", "cuDeviceGetAttribute")
    };
    // The attributes cust 0.3.2 does not list: the driver call itself.
    let get_raw = |a: Raw| {
        let mut v = 0i32;
        // SAFETY: `v` is a live i32 for the driver to write; the device
        // handle is valid (the context on it was just retained).
        let r = unsafe { cust::sys::cuDeviceGetAttribute(&mut v, a, device.as_raw()) };
        crate::error::check_driver(r, "context", "cuDeviceGetAttribute").map(|()| v.max(0) as u32)
    };
    Ok(Limits {
        max_threads_per_block: get(A::MaxThreadsPerBlock)?,
        max_block: [
            get(A::MaxBlockDimX)?,
            get(A::MaxBlockDimY)?,
            get(A::MaxBlockDimZ)?,
        ],
        max_grid: [
            get(A::MaxGridDimX)?,
            get(A::MaxGridDimY)?,
            get(A::MaxGridDimZ)?,
        ],
        shared_per_block: get(A::MaxSharedMemoryPerBlock)?,
        shared_per_block_opt_in: get_raw(
            Raw::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?,
        multiprocessors: get(A::MultiprocessorCount)?.max(1),
        threads_per_multiprocessor: get(A::MaxThreadsPerMultiprocessor)?,
        blocks_per_multiprocessor: get_raw(Raw::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?
            .max(1),
        shared_per_multiprocessor: get(A::MaxSharedMemoryPerMultiprocessor)?,
    })
}

/// The image a simulator "loads": none, the kernels' host code runs.
static SIMULATED_IMAGE: LoadedImage = LoadedImage::Simulator;

impl Gpu {
    /// The number of multiprocessors (SMs) of this GPU (the simulated
    /// H100's 132 on the simulator): [`Limits::multiprocessors`] of
    /// [`Gpu::launch_limits`], queried when the `Gpu` opened. `Result` (never
    /// an error, `_kernel` unused) for the launchers that call it.
    pub fn multiprocessors(&self, _kernel: &'static str) -> Result<u32> {
        Ok(self.launch_limits().multiprocessors)
    }

    /// How many blocks of `kernel` (by name) with `block` threads stay
    /// resident on one multiprocessor at once, from the occupancy API
    /// (registers, `dynamic_shared` bytes of dynamic shared memory and the
    /// kernel's own static shared memory), at least 1. The simulator has no
    /// registers to count: its answer is [`simulator::resident_blocks`] of
    /// `dynamic_shared + static_shared`, the static bytes the caller names.
    /// A grid of [`multiprocessors`](Self::multiprocessors) times this is
    /// one full wave.
    pub fn resident_blocks(
        &self,
        kernel: &'static str,
        block: u32,
        dynamic_shared: u32,
        static_shared: u32,
    ) -> Result<u32> {
        let resident = if self.is_simulated() {
            simulator::resident_blocks(block, dynamic_shared.saturating_add(static_shared))
        } else {
            self.bind()?;
            self.function(kernel)?
                .max_active_blocks_per_multiprocessor(block.into(), dynamic_shared as usize)
                .during(kernel, "cuOccupancyMaxActiveBlocksPerMultiprocessor")?
        };
        Ok(resident.clamp(1, self.launch_limits().blocks_per_multiprocessor))
    }

    /// Lets `kernel` launch with up to `bytes` of dynamic shared memory,
    /// past the 48 KB a block has without opting in (CUDA's
    /// `cudaFuncSetAttribute(…, cudaFuncAttributeMaxDynamicSharedMemorySize,
    /// bytes)`, which the driver asks for before such a launch). Until it is
    /// called, [`launch`](Self::launch) refuses more than 48 KB as the driver
    /// does; after, up to the device's opt-in limit
    /// ([`Limits::shared_per_block_opt_in`], 227 KB on an H100), on the
    /// simulator too. A kernel's static shared memory counts against the
    /// same limits.
    ///
    /// ```no_run
    /// # use cuda_kernels_runtime::{Gpu, LaunchConfig, Kernel};
    /// # fn f(gpu: &Gpu, kernel: Kernel<()>) -> cuda_kernels_runtime::Result<()> {
    /// let bytes = 96 * 1024;
    /// gpu.allow_dynamic_shared(kernel, bytes)?;
    /// // SAFETY: the kernel takes no arguments and expects `bytes` of dynamic shared memory.
    /// unsafe { gpu.launch(kernel, LaunchConfig::linear(1, 256).with_shared(bytes), gpu.stream(), ()) }?;
    /// # Ok(()) }
    /// ```
    pub fn allow_dynamic_shared<P>(&self, kernel: Kernel<P>, bytes: u32) -> Result<()> {
        let name = kernel.name();
        self.check_image(&kernel)?;
        let mut opt_in = self.shared_opt_in.lock().unwrap_or_else(|e| e.into_inner());
        if opt_in.get(name) == Some(&bytes) {
            return Ok(());
        }
        if let Backend::Cuda(_) = self.backend {
            self.bind()?;
            let function = self.raw_function(name)?;
            // SAFETY: a live function of this GPU's module, bound above; the
            // attribute is a plain int, which the driver checks against the
            // device's opt-in limit.
            let r = unsafe {
                cust::sys::cuFuncSetAttribute(
                    function,
                    cust::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    bytes.min(i32::MAX as u32) as i32,
                )
            };
            check_driver(r, name, "cuFuncSetAttribute (dynamic shared memory)")?;
        }
        opt_in.insert(name, bytes);
        Ok(())
    }

    /// Whether a launch of `kernel` with `bytes` of dynamic shared memory
    /// was opted in by [`allow_dynamic_shared`](Self::allow_dynamic_shared).
    pub(crate) fn shared_opted_in(&self, kernel: &'static str, bytes: u32) -> bool {
        bytes > 0
            && self
                .shared_opt_in
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(kernel)
                .is_some_and(|&allowed| bytes <= allowed)
    }

    /// Opens device 0 and loads `ptx` (PTX source text).
    pub fn from_ptx(ptx: &str) -> Result<Self> {
        Self::from_images(&Images::from(ptx))
    }

    /// Opens device 0 and loads the cubin of `images` that matches the
    /// device, else its PTX ([`Images::load`]); [`Gpu::image`] says which.
    pub fn from_images(images: &Images<'_>) -> Result<Self> {
        Self::open(init()?, images)
    }

    /// Opens `device` (its primary context, shared with every other [`Gpu`]
    /// of the device) and loads `images` there: the one constructor behind
    /// [`Gpu::from_images`] and [`Gpu::on_device`].
    pub(crate) fn open(device: Device, images: &Images<'_>) -> Result<Self> {
        let context = DeviceContext::retain(device)?;
        context.make_current()?;
        let (module, image) = images.load(device)?;
        let fault = FaultBuffer::attach(&module)?;
        let id = context.id();
        Ok(Self {
            stream: Stream::ordering(&context),
            id,
            image_crate: images.crate_name().map(str::to_string),
            backend: Backend::Cuda(Box::new(CudaDevice {
                module,
                fault,
                image,
                device,
                context,
                functions: Mutex::default(),
                launcher_states: Mutex::default(),
                limits: launch_limits(device)?,
            })),
            kernel_resources: &[],
            shared_opt_in: Mutex::default(),
        })
    }

    /// Simulated device `ordinal` running the kernels declared in the crate
    /// `name` (its library name, `env!("CARGO_CRATE_NAME")` there): the CPU
    /// simulator, standing in for an H100 (its limits: block and grid sizes,
    /// shared memory, 132 multiprocessors), which runs the kernels' own Rust
    /// code, every thread of a launch, before the launch returns. No GPU,
    /// driver or PTX is needed. A kernel that faults leaves it usable:
    /// unlike a CUDA context, no restart is needed. Its buffers and streams
    /// are its own, so that handing them to another device's launcher is
    /// [`Error::WrongDevice`], as on a machine with several GPUs.
    ///
    /// `cuda_kernels::gpu()` opens one too when `CUDA_KERNELS_SIM=1`
    /// ([`SIM_ENV`]).
    pub fn simulated_device_of_crate(ordinal: u32, name: &str) -> Self {
        Self::simulating(ordinal, name)
    }

    /// The simulator (simulated device 0) standing
    /// for a GPU that loaded `images`: it runs the kernels of the crate they
    /// were built from ([`Images::crate_name`]), as that GPU would, and
    /// refuses every other crate's ([`Error::KernelNotFound`]). Images that
    /// name no crate are [`Error::InvalidInput`].
    pub fn simulator_of(images: &Images<'_>) -> Result<Self> {
        let name = images.crate_name().ok_or_else(|| {
            Error::invalid(
                "simulator",
                "these images name no kernel crate (PTX not built by cuda-kernels-builder)",
            )
        })?;
        Ok(Self::simulating(0, name))
    }

    /// Device 0 with `images` loaded ([`Gpu::from_images`]), or the
    /// simulator standing for it ([`Gpu::simulator_of`]) when
    /// `CUDA_KERNELS_SIM=1` asks for it ([`SIM_ENV`]) or there is no GPU
    /// (no NVIDIA driver or no device: [`Error::is_no_gpu`]; it then says
    /// so on stderr, with the driver's reason). Any other failure, such as a
    /// driver that is installed but broken, is the error, never the
    /// simulator. [`Gpu::is_simulated`] says which it is.
    ///
    /// ```text
    /// // in the app whose build.rs built the kernel crate `my-kernels`:
    /// const IMAGES: Images<'static> = cuda_kernels_runtime::embedded_images!("my_kernels");
    /// let gpu = Gpu::from_images_or_simulator(&IMAGES)?;
    /// ```
    pub fn from_images_or_simulator(images: &Images<'_>) -> Result<Self> {
        if !sim_requested() {
            match Self::from_images(images) {
                Err(e) if e.is_no_gpu() => {
                    eprintln!("cuda-kernels: {e}: running on the CPU simulator")
                }
                opened => return opened,
            }
        }
        Self::simulator_of(images)
    }

    /// The simulator (simulated device 0) running the kernels declared in
    /// the crate `name` (its library name, `env!("CARGO_CRATE_NAME")` there):
    /// for kernels that exist only on the host, such as a test's
    /// deliberately broken ones, which no GPU image holds.
    pub fn simulator_of_crate(name: &str) -> Self {
        Self::simulating(0, name)
    }

    /// Simulated device `ordinal` running the kernels of the crate `image`.
    fn simulating(ordinal: u32, image: &str) -> Self {
        let id = DeviceId::Simulator { ordinal };
        Self {
            stream: Stream::simulated(id),
            id,
            image_crate: Some(image.to_string()),
            backend: Backend::Simulator,
            kernel_resources: &[],
            shared_opt_in: Mutex::default(),
        }
    }

    /// The kernel crate whose image this device runs (its library name):
    /// on a GPU, the one the loaded PTX names ([`Images::crate_name`];
    /// `None` when it names none); on the simulator, the built-in kernels'
    /// crate, or the one [`Gpu::simulator_of`] was given.
    pub fn image_crate(&self) -> Option<&str> {
        self.image_crate.as_deref()
    }

    /// `Ok` when `kernel`'s handle was declared in the crate whose image
    /// this device runs, else [`Error::KernelNotFound`] saying both crates
    /// (the same check on both backends, before any lookup by name: another
    /// crate's kernel of the same name is not this one).
    pub fn check_image<P>(&self, kernel: &Kernel<P>) -> Result<()> {
        if self.image_crate() == Some(kernel.image()) {
            return Ok(());
        }
        let loaded = match self.image_crate() {
            Some(c) => format!("the image loaded here was built from crate `{c}`"),
            None => "the PTX loaded here names no kernel crate (not built by cuda-kernels-builder)"
                .into(),
        };
        Err(Error::KernelNotFound {
            name: kernel.name().to_string(),
            reason: format!(
                "its handle was declared in crate `{}`, and {loaded}. Declare kernels \
                 (ops of reduce_kernels! and elementwise! too) in a kernel crate that \
                 cuda-kernels-builder builds to PTX, and launch them on a Gpu of that \
                 crate's images (Gpu::from_images, Gpu::simulator_of)",
                kernel.image()
            ),
        })
    }

    /// This simulator with the kernels' resources as `ptxas` reported them
    /// for an H100 (the sm_90 [`Cubin`](crate::Cubin)'s): a launch whose
    /// block needs more registers than the register file is then refused
    /// with `CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES`, as the driver refuses it.
    pub fn with_kernel_resources(self, resources: &'static [KernelResources]) -> Self {
        Self {
            kernel_resources: resources,
            ..self
        }
    }

    /// What `ptxas` reported of kernel `name` (on the simulator, given by
    /// [`Gpu::with_kernel_resources`]).
    pub fn kernel_resources(&self, name: &str) -> Option<&'static KernelResources> {
        self.kernel_resources.iter().find(|r| r.name == name)
    }

    /// Whether this is the simulator.
    pub fn is_simulated(&self) -> bool {
        matches!(self.backend, Backend::Simulator)
    }

    /// Which device this is: buffers and streams made on it carry the same
    /// identity.
    pub fn device_id(&self) -> DeviceId {
        self.id
    }

    /// The CUDA side, or [`Error::NotOnSimulator`] naming `what` needs it.
    fn cuda(&self, what: &'static str) -> Result<&CudaDevice> {
        match &self.backend {
            Backend::Cuda(c) => Ok(c),
            Backend::Simulator => Err(Error::NotOnSimulator { what }),
        }
    }

    /// [`Error::NotOnSimulator`] for `what` on the simulator, `Ok` on a
    /// CUDA GPU: the first line of every hardware-only feature.
    pub fn require_cuda(&self, what: &'static str) -> Result<()> {
        self.cuda(what).map(drop)
    }

    /// Which image the module was loaded from: a cubin (no JIT), the PTX
    /// and why, or none ([`LoadedImage::Simulator`]).
    pub fn image(&self) -> &LoadedImage {
        match &self.backend {
            Backend::Cuda(c) => &c.image,
            Backend::Simulator => &SIMULATED_IMAGE,
        }
    }

    /// Opens device 0 and loads the PTX in the file at `path` (PyCUDA's
    /// `module_from_file`). A missing file is [`Error::PtxFile`]; text the
    /// driver refuses is [`Error::ModuleLoad`].
    pub fn from_ptx_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let ptx = std::fs::read_to_string(path).map_err(|source| Error::PtxFile {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_ptx(&ptx)
    }

    /// Makes this GPU's context current on the calling thread. Every method
    /// does it; call it yourself before using `cust` directly. Nothing to do
    /// on the simulator.
    pub fn bind(&self) -> Result<()> {
        match &self.backend {
            Backend::Cuda(c) => c.context.make_current(),
            Backend::Simulator => Ok(()),
        }
    }

    /// The loaded module ([`Error::NotOnSimulator`] on the simulator).
    pub fn module(&self) -> Result<&Module> {
        Ok(&self.cuda("a PTX module")?.module)
    }

    /// The stream the launchers use: on a GPU, the device's ordering stream
    /// ([`DeviceContext::ordering`], shared by every `Gpu` of the device,
    /// created with default flags, so it is ordered with the synchronous
    /// copies of the legacy default stream); on the simulator, an empty
    /// stream. See the rule above.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// A new stream of this device: on a GPU created with default flags
    /// (blocking, like [`Gpu::stream`], but not the ordering stream: see
    /// [`Stream::wait_for_ordering`]); on the simulator, an empty one.
    pub fn new_stream(&self) -> Result<Stream> {
        self.stream_with_priority(false)
    }

    /// A new stream of this device whose kernels the device schedules ahead
    /// of other streams' pending blocks (the context's greatest priority,
    /// `cuStreamCreateWithPriority`), otherwise as [`Gpu::new_stream`]: for
    /// short work on the critical path beside a long kernel, such as Life's
    /// edge rows and their NCCL exchange beside the interior. On the
    /// simulator, an empty stream.
    pub fn new_priority_stream(&self) -> Result<Stream> {
        self.stream_with_priority(true)
    }

    fn stream_with_priority(&self, greatest: bool) -> Result<Stream> {
        match &self.backend {
            Backend::Cuda(cuda) => {
                self.bind()?;
                let priority = if greatest {
                    Some(
                        CurrentContext::get_stream_priority_range()
                            .during("context", "cuCtxGetStreamPriorityRange")?
                            .greatest,
                    )
                } else {
                    None
                };
                let s = cust::stream::Stream::new(StreamFlags::DEFAULT, priority)
                    .during("context", "cuStreamCreate")?;
                Ok(Stream::own(&cuda.context, s))
            }
            Backend::Simulator => Ok(Stream::simulated(self.id)),
        }
    }

    /// The CUDA device ([`Error::NotOnSimulator`] on the simulator).
    pub fn device(&self) -> Result<Device> {
        Ok(self.cuda("a CUDA device handle")?.device)
    }

    /// The primary context ([`Error::NotOnSimulator`] on the simulator).
    pub fn context(&self) -> Result<&Context> {
        Ok(self.cuda("a CUDA context")?.context.context())
    }

    /// The device's [`DeviceContext`] (its primary context and ordering
    /// stream), which every buffer and stream made here holds;
    /// [`Error::NotOnSimulator`] on the simulator.
    pub fn device_context(&self) -> Result<&Arc<DeviceContext>> {
        Ok(&self.cuda("a CUDA context")?.context)
    }

    /// The device's context when this is a CUDA GPU, `None` on the
    /// simulator: what resources made here hold.
    pub(crate) fn context_handle(&self) -> Option<&Arc<DeviceContext>> {
        match &self.backend {
            Backend::Cuda(c) => Some(&c.context),
            Backend::Simulator => None,
        }
    }

    /// The device's name; on the simulator, a name that says so
    /// ([`simulator::NAME`]).
    pub fn name(&self) -> Result<String> {
        match &self.backend {
            Backend::Cuda(c) => c.device.name().during("context", "cuDeviceGetName"),
            Backend::Simulator => Ok(simulator::NAME.to_string()),
        }
    }

    /// The entry point `name` of the loaded module; [`Error::KernelNotFound`]
    /// when there is none of that name (a name with a NUL byte included:
    /// no entry point can have one); [`Error::NotOnSimulator`] on the
    /// simulator.
    pub fn function(&self, name: &str) -> Result<Function<'_>> {
        let module = self.module()?;
        if name.contains('\0') {
            // cust's get_function would panic on it.
            return Err(Error::not_found(name));
        }
        module
            .get_function(name)
            .map_err(|_| Error::not_found(name))
    }

    /// The device's limits (a CUDA device's own, queried when the `Gpu`
    /// opened; the simulated H100's, [`Limits::H100`]): launch shapes,
    /// shared memory, multiprocessors and what each keeps resident.
    pub fn launch_limits(&self) -> &Limits {
        match &self.backend {
            Backend::Cuda(cuda) => &cuda.limits,
            Backend::Simulator => &simulator::LIMITS,
        }
    }

    /// The raw function of entry point `name`, looked up once and cached
    /// for [`Gpu::launch`]; [`Error::KernelNotFound`] names it when the
    /// module lacks it.
    pub fn raw_function(&self, name: &'static str) -> Result<cust::sys::CUfunction> {
        let cuda = self.cuda("a PTX function")?;
        let key = (name.as_ptr() as usize, name.len());
        let mut cache = cuda.functions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&f) = cache.get(&key) {
            return Ok(f as cust::sys::CUfunction);
        }
        let f = self.function(name)?.to_raw();
        cache.insert(key, f as usize);
        Ok(f)
    }

    /// The state of type `T` that a launcher keeps for this GPU's module
    /// (what it looked up or set up there once: function attributes, a
    /// module global's address, a cache of what the global holds), made by
    /// `make` on the first call and shared by the later ones; it lives as
    /// long as the `Gpu` and its module. `what` names the launcher in
    /// [`Error::NotOnSimulator`] (the simulator keeps no such state).
    /// `make` runs under the lock of these states: it must not ask for
    /// another.
    pub fn launcher_state<T: Any + Send + Sync>(
        &self,
        what: &'static str,
        make: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>> {
        let cuda = self.cuda(what)?;
        let mut states = cuda
            .launcher_states
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(Ok(state)) = states
            .get(&TypeId::of::<T>())
            .map(|state| Arc::clone(state).downcast::<T>())
        {
            return Ok(state);
        }
        let state = Arc::new(make()?);
        states.insert(TypeId::of::<T>(), state.clone());
        Ok(state)
    }

    /// Waits for everything queued on [`Gpu::stream`] (the device's ordering
    /// stream: the work of every `Gpu` of the device). A kernel fault shows
    /// up here, attributed to `kernel`: as [`Error::DeviceFault`] (file, line,
    /// block, thread) when the device layer recorded it, else as
    /// [`Error::Cuda`]. Nothing to wait for on the simulator (a launch there
    /// reports its fault itself).
    pub fn synchronize(&self, kernel: &'static str) -> Result<()> {
        crate::graph::refuse_in_capture("Gpu::synchronize (cuStreamSynchronize)")?;
        match self.stream.as_cust() {
            Ok(s) => s
                .synchronize()
                .map_err(|source| self.describe_failure(kernel, "synchronize", source)),
            Err(_) => Ok(()),
        }
    }

    /// Waits for all work of the context (`cuCtxSynchronize`); nothing to
    /// wait for on the simulator.
    pub fn synchronize_context(&self, kernel: &'static str) -> Result<()> {
        crate::graph::refuse_in_capture("Gpu::synchronize_context (cuCtxSynchronize)")?;
        match &self.backend {
            Backend::Cuda(_) => {
                self.bind()?;
                CurrentContext::synchronize()
                    .map_err(|source| self.describe_failure(kernel, "cuCtxSynchronize", source))
            }
            Backend::Simulator => Ok(()),
        }
    }

    /// Sets the size of the FIFO that kernels' `printf` records go through
    /// (`cudaLimitPrintfFifoSize`; the driver raises a smaller size to
    /// 512 KiB): what a launch prints past it is dropped. On a GPU,
    /// `cuCtxSetLimit` of the context (which the driver refuses once a
    /// kernel that prints has run in it: set it first); the GPU drops
    /// silently, and drains the FIFO while the kernel runs, so how many
    /// lines pass depends on timing. On the simulator, this device's FIFO
    /// (1 MiB by default): records of 16 bytes plus the packed arguments
    /// rounded up to 8, the dropped lines counted on stderr
    /// (`docs/simulator.md`).
    pub fn set_printf_fifo_bytes(&self, bytes: usize) -> Result<()> {
        use cust::context::ResourceLimit::PrintfFifoSize as PRINTF_FIFO;
        match (&self.backend, self.id) {
            (Backend::Simulator, DeviceId::Simulator { ordinal }) => {
                simulator::set_printf_fifo_bytes(ordinal, bytes);
                Ok(())
            }
            _ => {
                self.bind()?;
                CurrentContext::set_resource_limit(PRINTF_FIFO, bytes)
                    .during("printf FIFO", "cuCtxSetLimit")
            }
        }
    }

    /// The printf FIFO's size in bytes ([`Gpu::set_printf_fifo_bytes`]).
    pub fn printf_fifo_bytes(&self) -> Result<usize> {
        use cust::context::ResourceLimit::PrintfFifoSize as PRINTF_FIFO;
        match (&self.backend, self.id) {
            (Backend::Simulator, DeviceId::Simulator { ordinal }) => {
                Ok(simulator::printf_fifo_bytes(ordinal))
            }
            _ => {
                self.bind()?;
                CurrentContext::get_resource_limit(PRINTF_FIFO)
                    .during("printf FIFO", "cuCtxGetLimit")
            }
        }
    }

    /// Runs this simulated device's later launches with the order of threads
    /// shuffled by `seed` (as `CUDA_KERNELS_SIM_SEED` does for the whole
    /// process, which this overrides for this device), or in the fixed order
    /// again for `None` with no such variable: for tests that run a kernel
    /// under many orders in one process (`docs/simulator.md`, "Order").
    /// [`Error::InvalidInput`] on a CUDA GPU, whose order is its own.
    pub fn set_simulator_seed(&self, seed: Option<u64>) -> Result<()> {
        match (&self.backend, self.id) {
            (Backend::Simulator, DeviceId::Simulator { ordinal }) => {
                simulator::set_seed(ordinal, seed);
                Ok(())
            }
            _ => Err(Error::invalid(
                "simulator seed",
                "a CUDA GPU runs threads in its own order; seeds are the simulator's",
            )),
        }
    }

    /// Turns a driver error into [`Error::DeviceFault`] when a kernel recorded
    /// a fault, or [`Error::Cuda`] otherwise.
    pub fn describe_failure(
        &self,
        kernel: &'static str,
        operation: &'static str,
        source: CudaError,
    ) -> Error {
        let record = match &self.backend {
            Backend::Cuda(c) => c.fault.as_ref().and_then(FaultBuffer::read),
            Backend::Simulator => None,
        };
        match record {
            Some(r) => Error::DeviceFault {
                kernel,
                file: r.file().to_string(),
                line: r.line,
                column: r.column,
                block: r.block,
                thread: r.thread,
                message: r.message().to_string(),
                source: Some(source),
            },
            None => Error::Cuda {
                kernel,
                operation,
                source,
            },
        }
    }
}

/// The page-locked, device-mapped host memory a faulting kernel describes
/// itself in (see `cuda_kernels_device::fault`). Host memory, because after a
/// trap the context can no longer copy from the device.
struct FaultBuffer {
    words: LockedBuffer<u32>,
}

impl FaultBuffer {
    /// Allocates the record and stores its device address in the module's
    /// `CUDA_KERNELS_FAULT_RECORD`; `None` for PTX without that symbol.
    fn attach(module: &Module) -> Result<Option<Self>> {
        const K: &str = "fault record";
        let symbol = CString::new(FAULT_POINTER_SYMBOL)
            .map_err(|_| Error::invalid(K, "symbol name has a NUL"))?;
        let Ok(mut pointer) = module.get_global::<u64>(&symbol) else {
            return Ok(None);
        };
        let words = size_of::<FaultRecord>().div_ceil(4);
        let mut buffer = Self {
            words: LockedBuffer::new(&0u32, words).during(K, "cuMemAllocHost")?,
        };
        // Page-locked memory from cuMemAllocHost is mapped into the device's address space
        // at the same address under unified addressing (every 64-bit platform CUDA runs on).
        let device_address = buffer.words.as_mut_ptr() as u64;
        pointer
            .copy_from(&device_address)
            .during(K, "set CUDA_KERNELS_FAULT_RECORD")?;
        Ok(Some(buffer))
    }

    /// The record, if a kernel wrote one.
    fn read(&self) -> Option<FaultRecord> {
        let ptr = self.words.as_ptr().cast::<FaultRecord>();
        // SAFETY: the buffer holds size_of::<FaultRecord>() bytes, 4-aligned like FaultRecord
        // (all u32/u8 fields); a kernel that wrote it has stopped (the failed synchronize).
        let record = unsafe { std::ptr::read_volatile(ptr) };
        (record.written == 1).then_some(record)
    }
}

impl Gpu {
    /// A buffer of `len` elements on this device whose contents are
    /// undefined (`cust`'s `DeviceBuffer::uninitialized`).
    ///
    /// # Safety
    /// Nothing may read an element before it is written (by a copy or a
    /// kernel).
    pub unsafe fn uninitialized<T: DeviceCopy>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        DeviceBuffer::allocate(self.device_id(), self.context_handle(), len)
    }

    /// A buffer of `len` zeroed elements on this device, waiting for the
    /// memset.
    pub fn zeroed<T: DeviceCopy + Zeroable>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let mut buf = DeviceBuffer::allocate(self.device_id(), self.context_handle(), len)?;
        buf.set_zero()?;
        Ok(buf)
    }

    /// A buffer on this device holding a copy of `host` (`cust`'s
    /// `DeviceBuffer::from_slice`), waiting for the copy.
    pub fn to_device<T: DeviceCopy>(&self, host: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buf = DeviceBuffer::allocate(self.device_id(), self.context_handle(), host.len())?;
        buf.copy_from(host)?;
        Ok(buf)
    }

    /// Refuses memory of another device given to `kernel` as `argument`
    /// ([`Error::WrongDevice`] naming both).
    pub fn check_device<T: DeviceCopy>(
        &self,
        kernel: &'static str,
        argument: &'static str,
        slice: &DeviceSlice<T>,
    ) -> Result<()> {
        self.check_device_id(kernel, argument, slice.device())
    }

    /// Refuses a device identity other than this GPU's for `kernel`'s
    /// `argument`.
    pub fn check_device_id(
        &self,
        kernel: &'static str,
        argument: &'static str,
        found: DeviceId,
    ) -> Result<()> {
        let expected = self.device_id();
        if found == expected {
            Ok(())
        } else {
            Err(Error::WrongDevice {
                kernel,
                argument,
                expected,
                found,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every result code the driver API defines (CUDA 12's `CUresult`),
    /// success aside: the codes a failed `cuInit` or `cuDeviceGetCount` can
    /// return.
    const EVERY_CURESULT: &[i32] = &[
        1, 2, 3, 4, 5, 6, 7, 8, 34, 35, 36, 46, 100, 101, 102, 200, 201, 202, 205, 206, 207, 208,
        209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223, 224, 225, 300,
        301, 302, 303, 304, 400, 401, 500, 600, 700, 701, 702, 703, 704, 705, 708, 709, 710, 711,
        712, 713, 714, 715, 716, 717, 718, 719, 720, 721, 800, 801, 802, 803, 804, 805, 806, 807,
        808, 809, 810, 811, 900, 901, 902, 903, 904, 905, 906, 907, 908, 909, 910, 911, 912, 913,
        914, 915, 916, 917, 999,
    ];

    #[test]
    fn only_no_device_or_no_kernel_driver_means_no_gpu() {
        for call in ["cuInit", "cuDeviceGetCount"] {
            for &code in EVERY_CURESULT {
                for loaded in [false, true] {
                    let e = classify_open_failure(call, code, loaded);
                    let text = e.to_string();
                    assert!(
                        text.contains(call) && text.contains(&format!("{code}")),
                        "{call} {code}: {text}"
                    );
                    match (code, loaded) {
                        (100, _) => assert!(matches!(e, Error::NoDevice { .. }), "{e:?}"),
                        (_, false) => assert!(
                            matches!(e, Error::NoDriver { .. })
                                && text.contains("no NVIDIA kernel driver is loaded"),
                            "{e:?}"
                        ),
                        (_, true) => assert!(
                            matches!(e, Error::DriverFailed { code: c, .. } if c == code)
                                && !e.is_no_gpu(),
                            "{call} {code} with the kernel driver loaded: {e:?}"
                        ),
                    }
                }
            }
        }
    }

    #[test]
    fn a_driver_too_old_with_the_kernel_driver_loaded_is_not_no_gpu() {
        // CUDA_ERROR_INSUFFICIENT_DRIVER (35), CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803).
        for code in [35, 803] {
            let e = classify_open_failure("cuInit", code, true);
            assert!(!e.is_no_gpu(), "{e:?}");
            assert!(e.to_string().contains("cuInit"), "{e}");
        }
    }
}
