//! One [`DeviceContext`] per CUDA device: the retained primary context and
//! the device's ordering stream, shared by every [`Gpu`](crate::Gpu) of the
//! device and by every resource made there.
//!
//! **Lifetimes.** The driver frees every allocation of a context when the
//! context is released, and a later retain can hand out the same addresses
//! again. So each resource that lives in the context (a
//! [`DeviceBuffer`](crate::DeviceBuffer), a [`Stream`](crate::Stream), a
//! timer's or a [`SyncEvent`](crate::peer::SyncEvent)'s events, staging
//! memory, a module through its [`Gpu`](crate::Gpu), an NCCL
//! [`Communicator`](crate::nccl::Communicator)) holds an
//! `Arc<DeviceContext>`: the primary context is released only after the last
//! of them drops, never while a buffer made there lives. Cloning the `Arc`
//! costs one atomic increment when a resource is made; a launch costs
//! nothing more.
//!
//! **Ordering.** The device's ordering stream ([`DeviceContext::ordering`])
//! is [`Gpu::stream`](crate::Gpu::stream) of every `Gpu` of the device: the
//! `_on_device` launchers of two `Gpu`s queue on one stream and are
//! ordered. It is a blocking stream, so the synchronous copies and memsets
//! of [`DeviceSlice`](crate::DeviceSlice) (on the legacy default stream)
//! are ordered with it both ways. Every other stream is ordered with it by
//! events ([`Stream::wait_for_ordering`](crate::Stream::wait_for_ordering),
//! [`Stream::join_ordering`](crate::Stream::join_ordering)); see the rule in
//! [`Gpu`](crate::Gpu)'s docs.
use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use cust::context::{Context, CurrentContext};
use cust::device::Device;
use cust::stream::StreamFlags;
use cust::sys as cu;

use crate::device_id::DeviceId;
use crate::error::{CudaResultExt, Result, check_driver};

/// The name errors of this module carry.
const K: &str = "context";

/// A CUDA device's retained primary context and its ordering stream: one per
/// device while anything of the device lives (every [`Gpu`](crate::Gpu)
/// opened on the device shares it).
/// Fields drop in order: the stream first, then the context (released by
/// `cust`'s `Drop`, `cuDevicePrimaryCtxRelease`).
pub struct DeviceContext {
    ordering: cust::stream::Stream,
    context: Context,
    device: Device,
    id: DeviceId,
}

/// The live contexts, by ordinal: what [`DeviceContext::retain`] shares.
static LIVE: Mutex<Vec<(u32, Weak<DeviceContext>)>> = Mutex::new(Vec::new());

impl DeviceContext {
    /// The context of `device`: the live one when something of the device
    /// still holds it, else a newly retained primary context with a new
    /// ordering stream (created with default flags: blocking).
    pub(crate) fn retain(device: Device) -> Result<Arc<Self>> {
        let ordinal = device.as_raw().max(0) as u32;
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|(_, w)| w.strong_count() > 0);
        if let Some(context) = live
            .iter()
            .find(|(o, _)| *o == ordinal)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(context);
        }
        let context = Context::new(device).during(K, "cuDevicePrimaryCtxRetain")?;
        CurrentContext::set_current(&context).during(K, "cuCtxSetCurrent")?;
        let ordering =
            cust::stream::Stream::new(StreamFlags::DEFAULT, None).during(K, "cuStreamCreate")?;
        let id = DeviceId::Cuda {
            ordinal,
            context: context.as_raw() as usize,
        };
        let made = Arc::new(Self {
            ordering,
            context,
            device,
            id,
        });
        live.push((ordinal, Arc::downgrade(&made)));
        Ok(made)
    }

    /// The live context that is current on the calling thread, if it is one
    /// of these (a context of the caller's own, such as a
    /// `cuCtxCreate`d one, is not).
    pub(crate) fn current() -> Option<Arc<Self>> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is a live local the driver writes.
        let r = unsafe { cu::cuCtxGetCurrent(&mut raw) };
        if r != cu::CUresult::CUDA_SUCCESS || raw.is_null() {
            return None;
        }
        let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.iter()
            .filter_map(|(_, w)| w.upgrade())
            .find(|c| c.context.as_raw() == raw)
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The identity of the device and context that buffers and streams made
    /// here carry.
    pub fn id(&self) -> DeviceId {
        self.id
    }

    /// The retained primary context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The device's ordering stream: [`Gpu::stream`](crate::Gpu::stream) of
    /// every `Gpu` of the device.
    pub fn ordering(&self) -> &cust::stream::Stream {
        &self.ordering
    }

    /// Makes the context current on the calling thread.
    pub fn make_current(&self) -> Result<()> {
        CurrentContext::set_current(&self.context).during(K, "cuCtxSetCurrent")
    }

    /// Makes `to` wait for the work queued on `from` so far (both streams
    /// of this context): an event without timing recorded on `from`,
    /// waited on by `to`, then destroyed (the driver keeps it until the
    /// wait is done).
    pub(crate) fn order(
        &self,
        from: &cust::stream::Stream,
        to: &cust::stream::Stream,
        operation: &'static str,
    ) -> Result<()> {
        self.make_current()?;
        let mut event = std::ptr::null_mut();
        // SAFETY: `event` is a live local the driver writes; the flag is one
        // cuEventCreate documents.
        let r = unsafe {
            cu::cuEventCreate(
                &mut event,
                cu::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32,
            )
        };
        check_driver(r, operation, "cuEventCreate")?;
        // SAFETY: `event` was just created in this context, and both streams
        // are live streams of it (borrowed); flags 0.
        let (recorded, waited) = unsafe {
            let recorded = cu::cuEventRecord(event, from.as_inner());
            let waited = if recorded == cu::CUresult::CUDA_SUCCESS {
                cu::cuStreamWaitEvent(to.as_inner(), event, 0)
            } else {
                cu::CUresult::CUDA_SUCCESS
            };
            cu::cuEventDestroy_v2(event);
            (recorded, waited)
        };
        check_driver(recorded, operation, "cuEventRecord")?;
        check_driver(waited, operation, "cuStreamWaitEvent")
    }
}

/// Destroys the ordering stream with the context current (then the context
/// is released).
impl Drop for DeviceContext {
    fn drop(&mut self) {
        let _ = self.make_current();
    }
}

impl fmt::Debug for DeviceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceContext({})", self.id)
    }
}
