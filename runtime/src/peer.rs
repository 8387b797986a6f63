//! Copies between devices: peer to peer where the two devices support it
//! (`cuDeviceCanAccessPeer`; `cuCtxEnablePeerAccess` once per ordered pair,
//! then `cuMemcpyPeerAsync`), else staged through page-locked host memory
//! (device to host, host to device, two staging buffers in flight so that
//! both copy engines work at once). Both paths give the same bytes; a copy
//! from a device to itself works on both, which is how a machine with one
//! GPU tests them.
//!
//! [`copy_between`] is synchronous for the host: it orders the copy after
//! the work already queued on both GPUs' streams and returns when the copy
//! is done. The multi-device launchers use the queued forms inside this
//! crate.
//!
//! Simulated devices ([`Gpu::simulated_device_of_crate`]) copy too: their memory is
//! the host's, so a "peer" copy between two of them is one `memcpy` and a
//! staged one goes through a host buffer. Between a simulated device and a
//! CUDA device only the staged path exists.
use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use cust::memory::DeviceCopy;
use cust::sys::{self as cu, CUresult};

use crate::Gpu;
use crate::error::{Error, Result, check_driver};
use crate::memory::{DeviceContext, DeviceSlice, Stream};

const K: &str = "peer copy";

/// How a copy between two devices travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CopyPath {
    /// `cuMemcpyPeerAsync` with peer access enabled: straight over NVLink or
    /// PCIe (or a device-to-device copy when both are one device).
    Peer,
    /// Device to page-locked host memory, then host to device.
    Staged,
}

impl std::fmt::Display for CopyPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CopyPath::Peer => "peer",
            CopyPath::Staged => "staged through pinned host memory",
        })
    }
}

/// Whether `from` can read and write `to`'s memory directly
/// (`cuDeviceCanAccessPeer`); a device can always reach itself.
/// Two simulated devices reach each other (their memory is the host's); a
/// simulated device and a CUDA device do not.
pub fn can_access_peer(from: &Gpu, to: &Gpu) -> Result<bool> {
    if from.same_device(to) || (from.is_simulated() && to.is_simulated()) {
        return Ok(true);
    }
    if from.is_simulated() || to.is_simulated() {
        return Ok(false);
    }
    let mut can = 0;
    // SAFETY: `can` is a live local the driver writes; both handles are
    // devices the driver gave us.
    let r = unsafe {
        cu::cuDeviceCanAccessPeer(&mut can, from.device()?.as_raw(), to.device()?.as_raw())
    };
    check_driver(r, K, "cuDeviceCanAccessPeer")?;
    Ok(can != 0)
}

/// The ordered pairs of contexts (as addresses) whose peer access this
/// process has enabled: `cuCtxEnablePeerAccess` is called once per pair.
static ENABLED: Mutex<Option<HashSet<(usize, usize)>>> = Mutex::new(None);

/// Enables `from`'s access to `to`'s memory once per ordered pair of
/// contexts; `false` (and nothing enabled) when the devices do not support
/// it. A device needs nothing to reach itself.
pub fn enable_peer_access(from: &Gpu, to: &Gpu) -> Result<bool> {
    if !can_access_peer(from, to)? {
        return Ok(false);
    }
    if from.same_device(to) || from.is_simulated() {
        return Ok(true);
    }
    let key = (
        from.context()?.as_raw() as usize,
        to.context()?.as_raw() as usize,
    );
    let mut enabled = ENABLED.lock().unwrap_or_else(|e| e.into_inner());
    let set = enabled.get_or_insert_with(HashSet::new);
    if set.contains(&key) {
        return Ok(true);
    }
    from.bind()?;
    // SAFETY: `from`'s context is current and `to`'s context is alive (its
    // Gpu is borrowed); flags must be 0.
    let r = unsafe { cu::cuCtxEnablePeerAccess(to.context()?.as_raw(), 0) };
    if r != CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
        check_driver(r, K, "cuCtxEnablePeerAccess")?;
    }
    set.insert(key);
    Ok(true)
}

/// The path [`copy_between`] takes when none is asked for: peer where both
/// directions can be enabled, else staged.
pub fn best_path(src: &Gpu, dst: &Gpu) -> Result<CopyPath> {
    Ok(
        if enable_peer_access(dst, src)? && enable_peer_access(src, dst)? {
            CopyPath::Peer
        } else {
            CopyPath::Staged
        },
    )
}

/// Enables peer access both ways between `a` and `b`, or says (as
/// [`Error::InvalidInput`]) that they cannot reach each other.
pub fn require_peer(a: &Gpu, b: &Gpu) -> Result<()> {
    if enable_peer_access(a, b)? && enable_peer_access(b, a)? {
        Ok(())
    } else {
        Err(no_peer_path(a, b))
    }
}

/// A CUDA event without timing (`CU_EVENT_DISABLE_TIMING`), for ordering
/// streams, possibly of different devices: recorded on a stream of its own
/// device, waited on by any stream. (`cust`'s `Event` hides its handle, and
/// its `Stream::wait_event` consumes the event.) On the simulator, where
/// every operation has finished when it returns, there is nothing to order:
/// the event is empty and recording and waiting do nothing. A CUDA event
/// holds its device's [`DeviceContext`] until it is destroyed.
pub struct SyncEvent(Option<cu::CUevent>, Option<Arc<DeviceContext>>);

// SAFETY: a CUevent handle may be used from any thread (the driver API is
// thread-safe); this type only records, waits on and destroys it.
unsafe impl Send for SyncEvent {}
// SAFETY: as above; recording and waiting through a shared reference are
// driver calls the driver serializes.
unsafe impl Sync for SyncEvent {}

impl Drop for SyncEvent {
    fn drop(&mut self) {
        if let Some(event) = self.0 {
            // The context, held until now, current (a failure leaves the
            // thread's).
            if let Some(context) = &self.1 {
                let _ = context.make_current();
            }
            // SAFETY: the handle came from cuEventCreate and is destroyed once;
            // the driver releases it when work still recorded on it completes.
            unsafe { cu::cuEventDestroy_v2(event) };
        }
    }
}

/// A fresh [`SyncEvent`] of `gpu` (empty on the simulator).
pub fn sync_event(gpu: &Gpu) -> Result<SyncEvent> {
    if gpu.is_simulated() {
        return Ok(SyncEvent(None, None));
    }
    gpu.bind()?;
    let mut event = std::ptr::null_mut();
    // SAFETY: `event` is a live local the driver writes.
    let r = unsafe {
        cu::cuEventCreate(
            &mut event,
            cu::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32,
        )
    };
    check_driver(r, K, "cuEventCreate")?;
    Ok(SyncEvent(
        Some(event),
        Some(Arc::clone(gpu.device_context()?)),
    ))
}

/// Makes `stream` wait for the work recorded by `event` (which may be of
/// another device); nothing on the simulator.
pub fn stream_wait(stream: &Stream, event: &SyncEvent) -> Result<()> {
    let (Some(event), false) = (event.0, stream.is_simulated()) else {
        return Ok(());
    };
    // SAFETY: both handles are alive (borrowed); flags 0.
    check_driver(
        unsafe { cu::cuStreamWaitEvent(stream.as_cust()?.as_inner(), event, 0) },
        K,
        "cuStreamWaitEvent",
    )
}

/// Records `event` on `stream` (both of the same device); nothing on the
/// simulator.
pub fn record(event: &SyncEvent, stream: &Stream) -> Result<()> {
    let (Some(event), false) = (event.0, stream.is_simulated()) else {
        return Ok(());
    };
    // SAFETY: both handles are alive (borrowed).
    check_driver(
        unsafe { cu::cuEventRecord(event, stream.as_cust()?.as_inner()) },
        K,
        "cuEventRecord",
    )
}

/// Host memory for staged copies: page-locked memory that every context
/// sees as pinned (`cuMemHostAlloc` with `CU_MEMHOSTALLOC_PORTABLE`) on a
/// CUDA device, an ordinary host buffer for a simulated one. Freed on drop.
pub struct PinnedBytes {
    ptr: *mut c_void,
    len: usize,
    /// The host buffer of a simulated device (`None`: page-locked memory).
    host: Option<Box<[u8]>>,
    /// The context that allocated the page-locked memory, held until it is
    /// freed (`None` on the simulator).
    context: Option<Arc<DeviceContext>>,
}

// SAFETY: the allocation is plain host memory owned by this value; the driver
// does not tie it to a thread.
unsafe impl Send for PinnedBytes {}
// SAFETY: shared access hands out only the address; writes go through the
// driver's copies (or the simulator's), ordered by the caller's streams and
// events.
unsafe impl Sync for PinnedBytes {}

impl PinnedBytes {
    /// `len` bytes (at least 1) of staging memory for `gpu`.
    pub fn new(gpu: &Gpu, len: usize) -> Result<Self> {
        if gpu.is_simulated() {
            let mut host = vec![0u8; len.max(1)].into_boxed_slice();
            return Ok(Self {
                ptr: host.as_mut_ptr().cast(),
                len,
                host: Some(host),
                context: None,
            });
        }
        gpu.bind()?;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: `ptr` is a live local the driver writes.
        let r = unsafe { cu::cuMemHostAlloc(&mut ptr, len.max(1), cu::CU_MEMHOSTALLOC_PORTABLE) };
        check_driver(r, K, "cuMemHostAlloc(PORTABLE)")?;
        Ok(Self {
            ptr,
            len,
            host: None,
            context: Some(Arc::clone(gpu.device_context()?)),
        })
    }

    /// The address.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.cast()
    }

    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for PinnedBytes {
    fn drop(&mut self) {
        if self.host.is_none() {
            // The allocating context, held until now, current (a failure
            // leaves the thread's).
            if let Some(context) = &self.context {
                let _ = context.make_current();
            }
            // SAFETY: `ptr` came from cuMemHostAlloc and is freed once; no copy
            // uses it any more (its owners synchronize before dropping it).
            unsafe { cu::cuMemFreeHost(self.ptr) };
        }
    }
}

/// Bytes per staging buffer of a staged copy (two are in flight).
pub const STAGING_CHUNK_BYTES: usize = 16 << 20;

/// Queues a peer copy of `bytes` from `src` (on `src_gpu`) to `dst` (on
/// `dst_gpu`) on `stream`, a stream of `dst_gpu`: `cuMemcpyPeerAsync`
/// between two CUDA devices, `cuMemcpyDtoDAsync` on one, a `memcpy` between
/// simulated devices (done when this returns).
///
/// # Safety
/// `src` and `dst` are device addresses of `bytes` bytes on those GPUs, valid
/// until the copy ends; the caller orders the copy against every other use
/// of both ranges.
pub unsafe fn queue_peer_copy(
    src_gpu: &Gpu,
    src: cu::CUdeviceptr,
    dst_gpu: &Gpu,
    dst: cu::CUdeviceptr,
    bytes: usize,
    stream: &Stream,
) -> Result<()> {
    match (src_gpu.is_simulated(), dst_gpu.is_simulated()) {
        (true, true) => {
            // SAFETY: the caller's contract; a simulated device address is the
            // host address of the simulator's memory; `copy` allows overlap.
            unsafe { std::ptr::copy(src as usize as *const u8, dst as usize as *mut u8, bytes) };
            return Ok(());
        }
        (false, false) => {}
        _ => return Err(no_peer_path(src_gpu, dst_gpu)),
    }
    dst_gpu.bind()?;
    let stream = stream.as_cust()?.as_inner();
    if src_gpu.same_device(dst_gpu) {
        // One device (one primary context): a device-to-device copy.
        // SAFETY: the caller's contract.
        let r = unsafe { cu::cuMemcpyDtoDAsync_v2(dst, src, bytes, stream) };
        return check_driver(r, K, "cuMemcpyDtoDAsync");
    }
    // SAFETY: the caller's contract; both contexts are alive (borrowed Gpus).
    let r = unsafe {
        cu::cuMemcpyPeerAsync(
            dst,
            dst_gpu.context()?.as_raw(),
            src,
            src_gpu.context()?.as_raw(),
            bytes,
            stream,
        )
    };
    check_driver(r, K, "cuMemcpyPeerAsync")
}

/// Queues a copy of `bytes` from `src` (on `gpu`) into host memory `host` on
/// `stream`, a stream of `gpu` (a `memcpy` on the simulator).
///
/// # Safety
/// `src` is a device address of `bytes` bytes on `gpu` and `host` holds
/// `bytes` bytes (page-locked for an asynchronous copy), both valid until
/// the copy ends, which the caller orders against their other uses.
pub unsafe fn queue_to_host(
    gpu: &Gpu,
    src: cu::CUdeviceptr,
    host: *mut u8,
    bytes: usize,
    stream: &Stream,
) -> Result<()> {
    if gpu.is_simulated() {
        // SAFETY: the caller's contract; simulated memory is host memory.
        unsafe { std::ptr::copy(src as usize as *const u8, host, bytes) };
        return Ok(());
    }
    gpu.bind()?;
    // SAFETY: the caller's contract.
    let r =
        unsafe { cu::cuMemcpyDtoHAsync_v2(host.cast(), src, bytes, stream.as_cust()?.as_inner()) };
    check_driver(r, K, "cuMemcpyDtoHAsync")
}

/// Queues a copy of `bytes` from host memory `host` into `dst` (on `gpu`)
/// on `stream`, a stream of `gpu` (a `memcpy` on the simulator).
///
/// # Safety
/// As [`queue_to_host`], the other way.
pub unsafe fn queue_to_device(
    gpu: &Gpu,
    host: *const u8,
    dst: cu::CUdeviceptr,
    bytes: usize,
    stream: &Stream,
) -> Result<()> {
    if gpu.is_simulated() {
        // SAFETY: the caller's contract; simulated memory is host memory.
        unsafe { std::ptr::copy(host, dst as usize as *mut u8, bytes) };
        return Ok(());
    }
    gpu.bind()?;
    // SAFETY: the caller's contract.
    let r =
        unsafe { cu::cuMemcpyHtoDAsync_v2(dst, host.cast(), bytes, stream.as_cust()?.as_inner()) };
    check_driver(r, K, "cuMemcpyHtoDAsync")
}

/// The error for a peer copy between devices that cannot reach each other.
fn no_peer_path(a: &Gpu, b: &Gpu) -> Error {
    Error::invalid(
        K,
        format!(
            "{} and {} cannot access each other's memory (cuDeviceCanAccessPeer, or a \
             simulated and a CUDA device): use the staged path",
            a.label(),
            b.label()
        ),
    )
}

/// Copies `src` (memory of `src_gpu`) into `dst` (memory of `dst_gpu`) by
/// `path` (`None`: [`best_path`]); returns the path taken. The copy starts
/// after the work queued so far on both GPUs' streams, and is done when this
/// returns. `Staged` always works; `Peer` between devices that cannot reach
/// each other is [`Error::InvalidInput`].
///
/// Errors: lengths that differ, a slice of another device than the `Gpu`
/// given for it ([`Error::WrongDevice`], naming both devices).
pub fn copy_between<T: DeviceCopy>(
    src_gpu: &Gpu,
    src: &DeviceSlice<T>,
    dst_gpu: &Gpu,
    dst: &mut DeviceSlice<T>,
    path: Option<CopyPath>,
) -> Result<CopyPath> {
    src_gpu.check_device(K, "src", src)?;
    dst_gpu.check_device(K, "dst", dst)?;
    if src.len() != dst.len() {
        return Err(Error::invalid(
            K,
            format!(
                "source holds {} elements, destination {}",
                src.len(),
                dst.len()
            ),
        ));
    }
    let path = match path {
        Some(p) => p,
        None => best_path(src_gpu, dst_gpu)?,
    };
    if path == CopyPath::Peer {
        require_peer(src_gpu, dst_gpu)?;
    }
    let bytes = src.len() * std::mem::size_of::<T>();
    if src.is_empty() {
        return Ok(path);
    }
    let (src_ptr, dst_ptr) = (src.as_device_ptr().as_raw(), dst.as_device_ptr().as_raw());
    // The copy waits for the source GPU's queued work.
    let src_ready = sync_event(src_gpu)?;
    record(&src_ready, src_gpu.stream())?;
    let staging = match path {
        CopyPath::Peer => {
            stream_wait(dst_gpu.stream(), &src_ready)?;
            // SAFETY: both are live allocations of `bytes` bytes (equal
            // lengths, borrowed for the call); the copy is ordered after the
            // source's queued work (the event) and the destination's (its
            // stream), and finishes before we return (synchronize below).
            unsafe {
                queue_peer_copy(src_gpu, src_ptr, dst_gpu, dst_ptr, bytes, dst_gpu.stream())
            }?;
            None
        }
        // SAFETY: as above; the staging buffers live until both streams are
        // synchronized below.
        CopyPath::Staged => {
            Some(unsafe { queue_staged_copy(src_gpu, src_ptr, dst_gpu, dst_ptr, bytes) }?)
        }
    };
    dst_gpu.synchronize(K)?;
    src_gpu.synchronize(K)?;
    drop(staging);
    Ok(path)
}

/// Queues a staged copy on both GPUs' streams: chunks of at most
/// [`STAGING_CHUNK_BYTES`] go device → host buffer on the source's stream,
/// then host buffer → device on the destination's, with two buffers in
/// flight (events order each buffer's reuse). Returns the staging buffers,
/// which must outlive the copy (synchronize both streams first).
///
/// # Safety
/// `src` and `dst` are device addresses of `bytes` bytes on those GPUs,
/// valid until the copy ends; the source's stream has the source's data
/// ready (or is ordered after it).
unsafe fn queue_staged_copy(
    src_gpu: &Gpu,
    src: cu::CUdeviceptr,
    dst_gpu: &Gpu,
    dst: cu::CUdeviceptr,
    bytes: usize,
) -> Result<Vec<PinnedBytes>> {
    let chunk = STAGING_CHUNK_BYTES.min(bytes);
    // Page-locked unless both ends are simulated (a CUDA end needs it for
    // its asynchronous copy).
    let host_gpu = if src_gpu.is_simulated() {
        dst_gpu
    } else {
        src_gpu
    };
    let buffers = [
        PinnedBytes::new(host_gpu, chunk)?,
        PinnedBytes::new(host_gpu, chunk)?,
    ];
    let staged = [sync_event(src_gpu)?, sync_event(src_gpu)?];
    let drained = [sync_event(dst_gpu)?, sync_event(dst_gpu)?];
    for (i, start) in (0..bytes).step_by(chunk).enumerate() {
        let len = chunk.min(bytes - start);
        let b = i % 2;
        if i >= 2 {
            // The buffer's previous chunk must have reached the destination.
            stream_wait(src_gpu.stream(), &drained[b])?;
        }
        // SAFETY: the buffer holds `chunk >= len` bytes; `src + start` is in
        // the source range; ordered as the function's contract says.
        unsafe {
            queue_to_host(
                src_gpu,
                src + start as u64,
                buffers[b].as_ptr(),
                len,
                src_gpu.stream(),
            )
        }?;
        record(&staged[b], src_gpu.stream())?;
        stream_wait(dst_gpu.stream(), &staged[b])?;
        // SAFETY: as above, into the destination range, after the chunk is
        // in the buffer (the event).
        unsafe {
            queue_to_device(
                dst_gpu,
                buffers[b].as_ptr(),
                dst + start as u64,
                len,
                dst_gpu.stream(),
            )
        }?;
        record(&drained[b], dst_gpu.stream())?;
    }
    debug_assert!(buffers.iter().all(|b| b.len() == chunk));
    Ok(buffers.into())
}
