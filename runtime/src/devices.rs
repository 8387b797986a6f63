//! Every device of the machine: the list with each device's properties
//! ([`devices`]), a [`Gpu`] on any of them ([`Gpu::on_device`]), and the
//! names that errors give devices ([`Gpu::label`]).
//!
//! An ordinal that names no device, or a device this crate cannot use, is
//! [`Error::NoSuchDevice`], whose message lists the devices there are.
use cust::device::Device;

use crate::Gpu;
use crate::device_info::{DeviceInfo, query_devices};
use crate::error::{CudaResultExt, Error, Result};
use crate::image::Images;
use crate::memory::DeviceId;

pub use crate::device_info::{MIN_COMPUTE_CAPABILITY, pci_bus_id, unusable_reason};

/// Every CUDA device of the machine with its properties (name, ordinal,
/// memory, multiprocessors, compute capability, PCI bus id, whether this
/// crate can use it), in ordinal order.
///
/// Errors with [`Error::NoDriver`] or [`Error::NoDevice`] when there is no GPU.
pub fn devices() -> Result<Vec<DeviceInfo>> {
    query_devices().map(|(_, devices)| devices)
}

/// One line naming every device: `0: NVIDIA H200, 1: NVIDIA H200 (unusable:
/// …)`, or why there is none (for error messages).
pub fn devices_summary() -> String {
    match devices() {
        Ok(list) => list
            .iter()
            .map(|d| match &d.unusable {
                None => format!("{}: {}", d.ordinal, d.name),
                Some(why) => format!("{}: {} (unusable: {why})", d.ordinal, d.name),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => format!("none ({e})"),
    }
}

/// The CUDA device of `ordinal`, checked: it exists and this crate can use
/// it. Otherwise [`Error::NoSuchDevice`], listing the devices there are
/// ([`Error::NoDriver`] or [`Error::NoDevice`] when there is no GPU at all).
pub fn cuda_device(ordinal: u32) -> Result<Device> {
    crate::gpu::init()?;
    let count = Device::num_devices().during("device query", "cuDeviceGetCount")?;
    let refuse = |reason: String| Error::NoSuchDevice {
        ordinal,
        reason,
        devices: devices_summary(),
    };
    if ordinal >= count {
        return Err(refuse(format!(
            "there is no such device: the driver counts {count}"
        )));
    }
    let device = Device::get_device(ordinal).during("device query", "cuDeviceGet")?;
    match unusable_reason(device)? {
        None => Ok(device),
        Some(why) => Err(refuse(format!("cannot be used: {why}"))),
    }
}

/// How many CUDA devices the driver counts (0 without a driver or device).
pub fn device_count() -> u32 {
    crate::gpu::init()
        .ok()
        .and_then(|_| Device::num_devices().ok())
        .unwrap_or(0)
}

impl Gpu {
    /// Opens CUDA device `ordinal` and loads the cubin of `images` that
    /// matches it, else its PTX (as [`Gpu::from_images`] does for device 0).
    /// `cuda_kernels::gpu_on(n)` does it with the embedded kernels.
    ///
    /// An ordinal past the last device, or a device this crate cannot use,
    /// is [`Error::NoSuchDevice`] naming the devices there are.
    pub fn on_device(ordinal: u32, images: &Images<'_>) -> Result<Self> {
        Self::open(cuda_device(ordinal)?, images)
    }

    /// The device's ordinal: the `N` of [`Gpu::on_device`], or of
    /// [`Gpu::simulated_device_of_crate`].
    pub fn ordinal(&self) -> u32 {
        match self.device_id() {
            DeviceId::Cuda { ordinal, .. } | DeviceId::Simulator { ordinal } => ordinal,
        }
    }

    /// How errors name this GPU: `device 1 (NVIDIA H200)`, or `simulated
    /// device 0`.
    pub fn label(&self) -> String {
        match (self.device_id(), self.name()) {
            (DeviceId::Simulator { ordinal }, _) => format!("simulated device {ordinal}"),
            (DeviceId::Cuda { ordinal, .. }, Ok(name)) => format!("device {ordinal} ({name})"),
            (DeviceId::Cuda { ordinal, .. }, Err(_)) => format!("device {ordinal}"),
        }
    }

    /// The one line that says where kernels run, which every test binary
    /// and the demo print first: `backend: GPU 0 (NVIDIA H100 80GB HBM3,
    /// cubin sm_90)`, or on the simulator `backend: simulator (<why>)`, where
    /// `why` says why no GPU runs them (`no CUDA device: …`,
    /// `CUDA_KERNELS_SIM=1`).
    pub fn backend_line(&self, why_simulated: &str) -> String {
        match (self.device_id(), self.name()) {
            (DeviceId::Simulator { .. }, _) => format!("backend: simulator ({why_simulated})"),
            (DeviceId::Cuda { ordinal, .. }, name) => format!(
                "backend: GPU {ordinal} ({}, {})",
                name.unwrap_or_else(|e| format!("name unknown: {e}")),
                self.image()
            ),
        }
    }

    /// Whether `other` is the same device (and so shares its memory: on a
    /// CUDA device, its primary context).
    pub fn same_device(&self, other: &Gpu) -> bool {
        self.device_id() == other.device_id()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_such_device_names_the_devices() {
        let e = Error::NoSuchDevice {
            ordinal: 3,
            reason: "there is no such device: the driver counts 2".into(),
            devices: "0: NVIDIA H200, 1: NVIDIA H200".into(),
        };
        assert_eq!(
            e.to_string(),
            "device 3: there is no such device: the driver counts 2; \
             the devices there are: 0: NVIDIA H200, 1: NVIDIA H200"
        );
    }

    #[test]
    fn a_missing_device_is_an_error_without_a_gpu_too() {
        // Without a GPU: no driver or no device; with one: no device 4096.
        let e = cuda_device(4096).unwrap_err();
        assert!(
            e.is_no_gpu() || matches!(e, Error::NoSuchDevice { ordinal: 4096, .. }),
            "{e}"
        );
    }
}
