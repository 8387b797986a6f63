//! K2: the device query of seed 001 (PyCUDA's and PyOpenCL's listings).
use cust::CudaApiVersion;
use cust::device::{Device, DeviceAttribute};

use crate::error::{CudaResultExt, Error, Result};
use crate::simulator;

/// What seed 001 prints about each device.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: u32,
    /// Marketing name.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Global memory in bytes.
    pub total_memory: usize,
    /// SM clock in kHz.
    pub clock_rate_khz: i32,
    /// Streaming multiprocessors.
    pub multiprocessors: i32,
    /// Shared memory per block in bytes (without opt-in).
    pub shared_memory_per_block: i32,
    /// Constant memory in bytes.
    pub total_constant_memory: i32,
    /// Largest block.
    pub max_threads_per_block: i32,
    /// Threads per warp.
    pub warp_size: i32,
    /// L2 cache in bytes.
    pub l2_cache_bytes: i32,
    /// Memory bus width in bits.
    pub memory_bus_width: i32,
    /// Memory clock in kHz.
    pub memory_clock_khz: i32,
    /// PCI bus id, `domain:bus:device.function` (`0000:19:00.0`).
    pub pci_bus_id: String,
    /// Why this crate cannot use the device, or `None` when it can (see
    /// [`crate::devices::unusable_reason`]).
    pub unusable: Option<String>,
}

/// The driver's CUDA version and every device's properties.
///
/// Errors with [`Error::NoDriver`] or [`Error::NoDevice`] when there is no GPU.
pub fn query_devices() -> Result<(String, Vec<DeviceInfo>)> {
    crate::gpu::init()?;
    let driver = CudaApiVersion::get().during("device query", "cuDriverGetVersion")?;
    let count = Device::num_devices().during("device query", "cuDeviceGetCount")?;
    let devices = (0..count)
        .map(|ordinal| {
            let d = Device::get_device(ordinal).during("device query", "cuDeviceGet")?;
            device_info(ordinal, d)
        })
        .collect::<Result<Vec<_>>>()?;
    if devices.is_empty() {
        return Err(Error::NoDevice {
            reason: "the driver reports 0 devices".into(),
        });
    }
    Ok((format!("{}.{}", driver.major(), driver.minor()), devices))
}

/// The properties of CUDA device `d` (ordinal `ordinal`).
fn device_info(ordinal: u32, d: Device) -> Result<DeviceInfo> {
    let attr = |a: DeviceAttribute| {
        d.get_attribute(a)
            .during("device query", "cuDeviceGetAttribute")
    };
    Ok(DeviceInfo {
        ordinal,
        name: d.name().during("device query", "cuDeviceGetName")?,
        compute_capability: (
            attr(DeviceAttribute::ComputeCapabilityMajor)?,
            attr(DeviceAttribute::ComputeCapabilityMinor)?,
        ),
        total_memory: d
            .total_memory()
            .during("device query", "cuDeviceTotalMem")?,
        clock_rate_khz: attr(DeviceAttribute::ClockRate)?,
        multiprocessors: attr(DeviceAttribute::MultiprocessorCount)?,
        shared_memory_per_block: attr(DeviceAttribute::MaxSharedMemoryPerBlock)?,
        total_constant_memory: attr(DeviceAttribute::TotalConstantMemory)?,
        max_threads_per_block: attr(DeviceAttribute::MaxThreadsPerBlock)?,
        warp_size: attr(DeviceAttribute::WarpSize)?,
        l2_cache_bytes: attr(DeviceAttribute::L2CacheSize)?,
        memory_bus_width: attr(DeviceAttribute::GlobalMemoryBusWidth)?,
        memory_clock_khz: attr(DeviceAttribute::MemoryClockRate)?,
        pci_bus_id: pci_bus_id(d)?,
        unusable: unusable_reason(d)?,
    })
}

/// The device query of the simulated device: an H100's limits (compute
/// capability 9.0, 132 multiprocessors, 48 KiB of shared memory per block
/// without opt-in, 1024 threads per block, warps of 32). Memory size,
/// clocks and bus width are an H100 SXM's nominal values; the memory is
/// what the simulator lets a device allocate ([`simulator::memory_bytes`]).
pub fn simulated() -> DeviceInfo {
    DeviceInfo {
        ordinal: 0,
        name: simulator::NAME.to_string(),
        compute_capability: (9, 0),
        total_memory: simulator::memory_bytes().unwrap_or(simulator::DEFAULT_MEMORY_BYTES),
        clock_rate_khz: 1_980_000,
        multiprocessors: simulator::MULTIPROCESSORS as i32,
        shared_memory_per_block: simulator::LIMITS.shared_per_block as i32,
        total_constant_memory: 64 * 1024,
        max_threads_per_block: simulator::LIMITS.max_threads_per_block as i32,
        warp_size: 32,
        l2_cache_bytes: 50 * 1024 * 1024,
        memory_bus_width: 5120,
        memory_clock_khz: 2_619_000,
        pci_bus_id: "none (simulated)".into(),
        unusable: None,
    }
}

/// The lowest compute capability the kernels run on: the PTX targets sm_70
/// (rustc's nvptx baseline).
pub const MIN_COMPUTE_CAPABILITY: (i32, i32) = (7, 0);

/// `cuDeviceGetAttribute(COMPUTE_MODE)`'s value for a device on which no
/// context may be created.
const COMPUTE_MODE_PROHIBITED: i32 = 2;

/// The device's PCI bus id, `domain:bus:device.function`.
pub fn pci_bus_id(device: Device) -> Result<String> {
    let mut buf = [0 as std::ffi::c_char; 32];
    // SAFETY: `buf` is a live array of 32 chars and the driver writes at most
    // `len` bytes, NUL-terminated (13 are needed).
    let r = unsafe {
        cust::sys::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as i32, device.as_raw())
    };
    crate::error::check_driver(r, "device query", "cuDeviceGetPCIBusId")?;
    // SAFETY: the driver wrote a NUL-terminated string into `buf` (and `buf`
    // was zeroed, so there is a NUL in any case).
    let id = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    Ok(id.to_string_lossy().into_owned())
}

/// Why this crate cannot use `device`, or `None` when it can: a compute
/// capability below [`MIN_COMPUTE_CAPABILITY`], or a device in prohibited
/// compute mode (no context may be created on it).
pub fn unusable_reason(device: Device) -> Result<Option<String>> {
    let attr = |a| {
        device
            .get_attribute(a)
            .during("device query", "cuDeviceGetAttribute")
    };
    let cc = (
        attr(DeviceAttribute::ComputeCapabilityMajor)?,
        attr(DeviceAttribute::ComputeCapabilityMinor)?,
    );
    if cc < MIN_COMPUTE_CAPABILITY {
        let (major, minor) = MIN_COMPUTE_CAPABILITY;
        return Ok(Some(format!(
            "compute capability {}.{} is below {major}.{minor}, the kernels' lowest target",
            cc.0, cc.1
        )));
    }
    if attr(DeviceAttribute::ComputeMode)? == COMPUTE_MODE_PROHIBITED {
        return Ok(Some(
            "the device is in prohibited compute mode (nvidia-smi -c): no context may be created"
                .into(),
        ));
    }
    Ok(None)
}

impl crate::Gpu {
    /// This device's properties: the GPU's, or on the simulator the
    /// simulated H100's limits ([`simulated`]).
    pub fn device_info(&self) -> Result<DeviceInfo> {
        match self.device_id() {
            crate::DeviceId::Simulator { ordinal } => Ok(DeviceInfo {
                ordinal,
                ..simulated()
            }),
            crate::DeviceId::Cuda { ordinal, .. } => {
                self.bind()?;
                device_info(ordinal, self.device()?)
            }
        }
    }
}

impl std::fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |b: f64| b / (1024.0 * 1024.0);
        writeln!(f, "Device {}: {}", self.ordinal, self.name)?;
        writeln!(f, "  PCI bus id                {}", self.pci_bus_id)?;
        writeln!(
            f,
            "  usable                    {}",
            self.unusable
                .as_deref()
                .map_or("yes".to_string(), |why| format!("no: {why}"))
        )?;
        writeln!(
            f,
            "  compute capability        {}.{}",
            self.compute_capability.0, self.compute_capability.1
        )?;
        writeln!(
            f,
            "  total memory              {:.0} MiB",
            mib(self.total_memory as f64)
        )?;
        writeln!(
            f,
            "  clock rate                {} MHz",
            self.clock_rate_khz / 1000
        )?;
        writeln!(f, "  multiprocessors           {}", self.multiprocessors)?;
        writeln!(
            f,
            "  shared memory per block   {} KiB",
            self.shared_memory_per_block / 1024
        )?;
        writeln!(
            f,
            "  constant memory           {} KiB",
            self.total_constant_memory / 1024
        )?;
        writeln!(
            f,
            "  max threads per block     {}",
            self.max_threads_per_block
        )?;
        writeln!(f, "  warp size                 {}", self.warp_size)?;
        writeln!(
            f,
            "  L2 cache                  {:.1} MiB",
            mib(self.l2_cache_bytes as f64)
        )?;
        writeln!(
            f,
            "  memory bus width          {} bits",
            self.memory_bus_width
        )?;
        write!(
            f,
            "  memory clock              {} MHz",
            self.memory_clock_khz / 1000
        )
    }
}
