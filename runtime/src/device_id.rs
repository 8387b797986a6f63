//! Which device a buffer, a stream or a [`Gpu`](crate::Gpu) belongs to
//! ([`DeviceId`]): what errors name and launches compare.
use std::fmt;

/// Which device a buffer, a stream or a [`Gpu`](crate::Gpu) belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceId {
    /// A CUDA device and the context its memory lives in.
    Cuda {
        /// The device ordinal.
        ordinal: u32,
        /// The context (`CUcontext`, as an address): the primary context for
        /// every [`Gpu`](crate::Gpu) of one device.
        context: usize,
    },
    /// A simulated device ([`Gpu::simulated_device_of_crate`](crate::Gpu::simulated_device_of_crate)).
    Simulator {
        /// Which simulated device.
        ordinal: u32,
    },
}

impl DeviceId {
    /// Whether this is a simulated device.
    pub fn is_simulated(&self) -> bool {
        matches!(self, DeviceId::Simulator { .. })
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceId::Cuda { ordinal, context } => {
                write!(f, "CUDA device {ordinal} (context {context:#x})")
            }
            DeviceId::Simulator { ordinal } => write!(f, "simulated device {ordinal}"),
        }
    }
}
