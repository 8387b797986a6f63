//! The context-owning handle: device, primary context, the loaded PTX module
//! and a stream. Every launcher is a method on [`Gpu`].
use std::ffi::CString;
use std::path::Path;

use cust::context::{Context, CurrentContext};
use cust::device::Device;
use cust::error::CudaError;
use cust::function::Function;
use cust::module::Module;
use cust::stream::{Stream, StreamFlags};
use cust::{CudaApiVersion, CudaFlags};

use crate::error::{CudaResultExt, Error, Result};

/// Initialises the CUDA driver and returns device 0.
///
/// Tells "no driver" ([`Error::NoDriver`]: `cuInit` fails for any reason but
/// "no device") from "no device" ([`Error::NoDevice`]: `cuInit` says so, or
/// the driver counts zero devices).
pub fn init() -> Result<Device> {
    match cust::init(CudaFlags::empty()) {
        Ok(()) => {}
        Err(CudaError::NoDevice) => {
            return Err(Error::NoDevice {
                reason: "cuInit: no CUDA-capable device is detected".into(),
            });
        }
        Err(e) => {
            return Err(Error::NoDriver {
                reason: format!("cuInit: {e}"),
            });
        }
    }
    let count = Device::num_devices().map_err(|e| Error::NoDriver {
        reason: format!("cuDeviceGetCount: {e}"),
    })?;
    if count == 0 {
        return Err(Error::NoDevice {
            reason: "the driver reports 0 devices".into(),
        });
    }
    Device::get_device(0).during("init", "cuDeviceGet")
}

/// A GPU ready to run this crate's kernels: the device, its primary context,
/// the loaded PTX module and a stream.
///
/// `Gpu` is `Send + Sync`; every method makes the context current on the
/// calling thread first, so one `Gpu` can serve several threads. Fields drop
/// in order: module and stream first, the context last.
///
/// ```no_run
/// # fn main() -> cuda_kernels_host::Result<()> {
/// let gpu = cuda_kernels_host::Gpu::from_ptx_file("kernels.ptx")?;
/// let a = ndarray::Array1::from(vec![1.0f32, 2.0, 3.0]);
/// let c = gpu.multiply(a.view(), a.view())?;
/// assert_eq!(c.to_vec(), vec![1.0, 4.0, 9.0]);
/// # Ok(()) }
/// ```
pub struct Gpu {
    module: Module,
    stream: Stream,
    device: Device,
    context: Context,
}

impl Gpu {
    /// Opens device 0 and loads `ptx` (PTX source text).
    pub fn from_ptx(ptx: &str) -> Result<Self> {
        let device = init()?;
        let context = Context::new(device).during("context", "cuDevicePrimaryCtxRetain")?;
        let module = load_module(ptx)?;
        let stream = Stream::new(StreamFlags::DEFAULT, None).during("context", "cuStreamCreate")?;
        Ok(Self {
            module,
            stream,
            device,
            context,
        })
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
    /// does it; call it yourself before using `cust` directly.
    pub fn bind(&self) -> Result<()> {
        CurrentContext::set_current(&self.context).during("context", "cuCtxSetCurrent")
    }

    /// The loaded module.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The stream the launchers use (created with default flags, so it is
    /// ordered with the synchronous copies of the legacy default stream).
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The primary context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The device's name.
    pub fn name(&self) -> Result<String> {
        self.device.name().during("context", "cuDeviceGetName")
    }

    /// The entry point `name` of the loaded module.
    pub fn function(&self, name: &str) -> Result<Function<'_>> {
        self.module
            .get_function(name)
            .map_err(|_| Error::KernelNotFound {
                name: name.to_string(),
            })
    }

    /// Waits for everything queued on [`Gpu::stream`]; a kernel fault shows
    /// up here, attributed to `kernel`.
    pub fn synchronize(&self, kernel: &'static str) -> Result<()> {
        self.stream.synchronize().during(kernel, "synchronize")
    }
}

/// Loads PTX text into the current context, turning refusals into an error
/// that says the PTX's `.version`/`.target` and the driver's version.
pub fn load_module(ptx: &str) -> Result<Module> {
    let cstr = CString::new(ptx)
        .map_err(|_| Error::invalid("module", "the PTX text contains a NUL byte"))?;
    Module::from_ptx_cstr(&cstr, &[]).map_err(|source| Error::ModuleLoad {
        details: ptx_summary(ptx),
        source,
    })
}

/// `.version X .target Y, driver N` for error messages.
pub fn ptx_summary(ptx: &str) -> String {
    let directive = |d: &str| {
        ptx.lines()
            .find_map(|l| l.trim().strip_prefix(d).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| "none".into())
    };
    let driver = CudaApiVersion::get()
        .map(|v| format!("{}.{}", v.major(), v.minor()))
        .unwrap_or_else(|e| format!("unknown ({e})"));
    format!(
        "PTX .version {}, .target {}, driver supports CUDA {driver}",
        directive(".version"),
        directive(".target")
    )
}
