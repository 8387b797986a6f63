//! Streams, events and page-locked buffers made sound: [`Lane`], a CUDA
//! stream that *owns* the memory its queued work touches. On the simulator a
//! lane works too (an empty stream, ordinary host memory, every operation
//! done at once), so the kernels run through lanes give their results there.
//!
//! # The problem
//! An asynchronous copy (`cuMemcpyHtoDAsync`, `cuMemcpyDtoHAsync`) returns
//! before the DMA engine has touched the host buffer, and a kernel launch
//! returns before the kernel has run. `cust` marks these calls `unsafe` and
//! leaves the rest to the caller: while the work is in flight the host buffer
//! must not be freed, moved, written (for a copy to the device) or read or
//! written (for a copy to the host), and the device buffers must not be freed
//! (`cuMemFree` of memory a kernel in *another* stream still uses is a
//! use-after-free on the GPU).
//!
//! # The design, and why it is sound
//! A [`Lane`] owns one stream, one page-locked host buffer and `D` device
//! buffers of the same length, and borrows the [`Gpu`] whose context they were
//! made in. The argument, point by point:
//!
//! 1. **Only the lane's own stream touches the lane's memory.** Every
//!    operation that queues work (the zeroing of the device buffers at
//!    creation, [`Lane::upload`], [`Lane::download`],
//!    [`Lane::copy_on_device`], and the kernel launchers written on top of
//!    `Lane::launch_target`, such as `Lane::mult_ker` and
//!    `Lane::conway_step`) queues it on `self.stream`, and the buffers are
//!    private fields: no safe code can hand them to another stream. (Unsafe
//!    code that takes raw device pointers carries that obligation itself.)
//! 2. **Queueing work takes `&mut self`.** So while any `&[T]` or `&mut [T]`
//!    into the host buffer is alive, no copy can be queued: the borrow checker
//!    forbids it.
//! 3. **Host access waits first.** [`Lane::host`] and [`Lane::host_mut`]
//!    synchronize the stream before they hand out the slice, so every copy
//!    queued earlier has finished and none can be queued while the slice is
//!    alive (point 2).
//! 4. **Nothing is freed under running work.** `Drop` makes the context
//!    current and synchronizes the stream before it frees anything. If that
//!    synchronization fails (a kernel fault makes the context unusable), the
//!    buffers are leaked rather than freed: leaking is safe, freeing memory a
//!    DMA engine might still write is not.
//! 5. **It does not rely on destructors running.** Unlike an "in-flight
//!    guard" whose `Drop` waits, nothing here becomes unsound if a lane is
//!    `mem::forget`-ten: the memory is then simply never freed, so no
//!    in-flight copy can ever see it reused.
//! 6. **The context outlives the lane.** The lane borrows `&'g Gpu`, so the
//!    `Gpu` (which owns the context) cannot be dropped while a lane exists.
//!    Every call binds that context first, so a lane works from any thread
//!    (`Lane` is `Send` and `Sync`; its `&self` methods queue nothing that
//!    touches the buffers).
//!
//! Events ([`Lane::record`]) need no such care: they own no user memory, and
//! destroying an event that is still pending is allowed by CUDA.
//!
//! # Non-blocking, for real
//! `cust` 0.3.2's `Stream::new` silently removes `StreamFlags::NON_BLOCKING`
//! (its `src/stream.rs`, line 94, citing Rust-CUDA issue 15), so a stream made
//! with it is *blocking*: its work waits for everything queued earlier on the
//! legacy default stream (`cust`'s synchronous copies, and any other library
//! in the process that uses the NULL stream), and vice versa. Lanes create
//! their stream with [`non_blocking_stream`] instead, which passes
//! `CU_STREAM_NON_BLOCKING` to `cuStreamCreate` itself. The soundness argument
//! above never relied on that ordering: only the lane's own stream touches the
//! lane's memory.
use std::mem::ManuallyDrop;

use cust::error::CudaResult;
use cust::event::Event;
use cust::memory::bytemuck::Zeroable;
use cust::memory::{DeviceCopy, DevicePointer, LockedBuffer};
use cust::sys::{self as cu, CUresult, CUstream, CUstream_flags};

use crate::Gpu;
use crate::error::cuda_error;
use crate::error::{CudaResultExt, Error, Result};
use crate::memory::{DeviceBuffer, DeviceSlice, Stream};

const K: &str = "lane";

/// A new stream, in the current context, that is *not* ordered with the
/// legacy default stream (`cuStreamCreate` with `CU_STREAM_NON_BLOCKING`),
/// returned as a `cust` [`Stream`](cust::stream::Stream) so that everything
/// `cust` does with streams (events, asynchronous copies, `Drop` →
/// `cuStreamDestroy`) works on it.
///
/// Why not `Stream::new(StreamFlags::NON_BLOCKING, None)`: `cust` 0.3.2
/// removes that flag (see the [module docs](self#non-blocking-for-real)).
/// It also has no constructor from a raw handle, so the handle is moved into
/// a `Stream` by value: `Stream` is a struct whose only field is the
/// `CUstream` handle, which `transmute` checks by size at compile time and
/// this function checks by value at run time (`Stream::as_inner` must give
/// the handle back) before the stream is used.
pub fn non_blocking_stream() -> CudaResult<cust::stream::Stream> {
    let mut raw: CUstream = std::ptr::null_mut();
    // SAFETY: `raw` is a valid place for the new handle; the flag is one the
    // driver documents for cuStreamCreate.
    let r = unsafe { cu::cuStreamCreate(&mut raw, CUstream_flags::CU_STREAM_NON_BLOCKING as u32) };
    if r != CUresult::CUDA_SUCCESS {
        return Err(cuda_error(r));
    }
    // SAFETY: `Stream` (cust 0.3.2) is `struct Stream { inner: CUstream }`: one
    // field, of the same size as the struct (transmute refuses to compile
    // otherwise), so its bytes are the handle's; any pointer value is a valid
    // `CUstream`, and the Stream now owns the stream we just created (its Drop
    // calls cuStreamDestroy_v2 on it exactly once).
    let stream = unsafe { std::mem::transmute::<CUstream, cust::stream::Stream>(raw) };
    if stream.as_inner() != raw {
        // Not the layout described above: do not let this value drop or be used.
        std::mem::forget(stream);
        // SAFETY: `raw` is the stream created above, used by nothing.
        unsafe { cu::cuStreamDestroy_v2(raw) };
        return Err(cust::error::CudaError::UnknownError);
    }
    Ok(stream)
}

/// A lane's host buffer: page-locked on a GPU (so that copies are truly
/// asynchronous), ordinary memory on the simulator (whose copies are
/// synchronous).
enum HostBuffer<T: DeviceCopy> {
    Locked(LockedBuffer<T>),
    Plain(Vec<T>),
}

impl<T: DeviceCopy> HostBuffer<T> {
    fn as_slice(&self) -> &[T] {
        match self {
            HostBuffer::Locked(b) => b.as_slice(),
            HostBuffer::Plain(v) => v,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            HostBuffer::Locked(b) => b.as_mut_slice(),
            HostBuffer::Plain(v) => v,
        }
    }
}

/// A stream with the host buffer and the `D` device buffers its work uses
/// (all of `len` elements). See the [module docs](self) for the soundness
/// argument. On the simulator the stream is empty and every operation runs
/// at once (the results are the same; recording events is
/// [`Error::NotOnSimulator`]).
///
/// ```
/// # fn main() -> cuda_kernels_runtime::Result<()> {
/// use cuda_kernels_runtime::{Gpu, async_mem::Lane};
/// let gpu = Gpu::simulated_device_of_crate(0, "kernels"); // or Gpu::from_images(&IMAGES)?
/// let mut lane = Lane::<f32, 2>::from_host(&gpu, &[1.0, 2.0, 3.0])?;
/// lane.upload(0)?; // host -> device, asynchronous, in the lane's stream
/// lane.copy_on_device(0, 1)?; // device -> device, in the same stream
/// lane.download(1)?; // device -> host, asynchronous
/// assert_eq!(lane.host()?, &[1.0, 2.0, 3.0]); // waits for the stream first
/// # Ok(()) }
/// ```
pub struct Lane<'g, T: DeviceCopy, const D: usize> {
    gpu: &'g Gpu,
    stream: Stream,
    host: ManuallyDrop<HostBuffer<T>>,
    device: ManuallyDrop<[DeviceBuffer<T>; D]>,
}

impl<'g, T: DeviceCopy + Default + Zeroable, const D: usize> Lane<'g, T, D> {
    /// A lane of `len` elements: a new non-blocking stream (so it runs
    /// concurrently with every other stream, the legacy default stream
    /// included), a page-locked host buffer and `D` device buffers, all
    /// zeroed (the device buffers by a memset queued on the lane's stream).
    /// On the simulator: an empty stream and ordinary host memory.
    ///
    /// Errors if `len` or `D` is 0, or on allocation failure.
    pub fn new(gpu: &'g Gpu, len: usize) -> Result<Self> {
        if len == 0 {
            return Err(Error::invalid(K, "length 0: nothing to hold"));
        }
        if D == 0 {
            return Err(Error::invalid(K, "a lane needs at least one device buffer"));
        }
        gpu.bind()?;
        let (stream, host) = if gpu.is_simulated() {
            let host = HostBuffer::Plain(vec![T::default(); len]);
            (Stream::simulated(gpu.device_id()), host)
        } else {
            let stream = non_blocking_stream().during(K, "cuStreamCreate")?;
            let host = LockedBuffer::new(&T::default(), len).during(K, "cuMemAllocHost")?;
            (
                Stream::own(gpu.device_context()?, stream),
                HostBuffer::Locked(host),
            )
        };
        let mut buffers = Vec::with_capacity(D);
        let zeroed = (|| -> Result<()> {
            for _ in 0..D {
                // SAFETY: nothing reads the buffer before the memset queued next, and
                // everything that reads it is queued after it on the same stream.
                let mut buf = unsafe { gpu.uninitialized::<T>(len) }?;
                // Zeroed on the lane's own stream: a memset on the legacy default stream
                // is asynchronous, and a non-blocking stream is not ordered after it, so a
                // later upload could race with it.
                // SAFETY: the buffer holds `len` elements and is used only by this stream.
                let queued = unsafe { buf.set_zero_async(&stream) };
                buffers.push(buf);
                queued?;
            }
            Ok(())
        })();
        if let Err(e) = zeroed {
            // Memsets may be queued on the buffers: wait before freeing them.
            if stream.synchronize().is_err() {
                std::mem::forget(buffers);
            }
            return Err(e);
        }
        let device: [DeviceBuffer<T>; D] = buffers.try_into().map_err(|unused| {
            // Unreachable (exactly D were pushed); still, wait before freeing.
            if stream.synchronize().is_err() {
                std::mem::forget(unused);
            }
            Error::invalid(K, "device buffer count")
        })?;
        Ok(Self {
            gpu,
            stream,
            host: ManuallyDrop::new(host),
            device: ManuallyDrop::new(device),
        })
    }

    /// A lane whose host buffer holds a copy of `data` (only the zeroing of
    /// the device buffers is queued).
    pub fn from_host(gpu: &'g Gpu, data: &[T]) -> Result<Self> {
        let mut lane = Self::new(gpu, data.len())?;
        lane.host.as_mut_slice().copy_from_slice(data);
        Ok(lane)
    }
}

impl<'g, T: DeviceCopy, const D: usize> Lane<'g, T, D> {
    /// Elements in each buffer.
    pub fn len(&self) -> usize {
        self.host.as_slice().len()
    }

    /// Always false: a lane holds at least one element.
    pub fn is_empty(&self) -> bool {
        self.host.as_slice().is_empty()
    }

    /// The GPU the lane belongs to.
    pub fn gpu(&self) -> &'g Gpu {
        self.gpu
    }

    /// The lane's stream: on a GPU non-blocking (made by
    /// [`non_blocking_stream`]), to record events on, to synchronize, or for
    /// unsafe code of your own; empty on the simulator.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    fn check(&self, what: &str, index: usize) -> Result<()> {
        if index >= D {
            return Err(Error::invalid(
                K,
                format!("{what}: device buffer {index} does not exist (this lane has {D})"),
            ));
        }
        Ok(())
    }

    /// Queues an asynchronous copy of the host buffer into device buffer
    /// `dev` on the lane's stream (a true async copy: the host buffer is
    /// page-locked).
    pub fn upload(&mut self, dev: usize) -> Result<()> {
        self.check("upload", dev)?;
        self.gpu.bind()?;
        let (host, device, stream) = (&*self.host, &mut self.device[dev], &self.stream);
        // SAFETY: same lengths (one `len` for every buffer of the lane); the host
        // buffer cannot be freed, moved or written until the stream is synchronized
        // (module docs, points 2-5), and only this stream uses the device buffer.
        unsafe { device.async_copy_from(host.as_slice(), stream) }
    }

    /// Queues an asynchronous copy of device buffer `dev` into the host
    /// buffer on the lane's stream; read it with [`Lane::host`].
    pub fn download(&mut self, dev: usize) -> Result<()> {
        self.check("download", dev)?;
        self.gpu.bind()?;
        let (host, device, stream) = (&mut *self.host, &self.device[dev], &self.stream);
        // SAFETY: as in `upload`; the host buffer is not read or written until the
        // stream is synchronized (Lane::host / host_mut / Drop wait first).
        unsafe { device.async_copy_to(host.as_mut_slice(), stream) }
    }

    /// Queues a device-to-device copy `device[dst] = device[src]` on the
    /// lane's stream (PyCUDA's `set_async`). `src` and `dst` must differ.
    pub fn copy_on_device(&mut self, src: usize, dst: usize) -> Result<()> {
        self.check("copy_on_device source", src)?;
        self.check("copy_on_device destination", dst)?;
        if src == dst {
            return Err(Error::invalid(
                K,
                format!("copy_on_device: source and destination are both buffer {src}"),
            ));
        }
        self.gpu.bind()?;
        let (src_buf, dst_buf) = if src < dst {
            let (a, b) = self.device.split_at_mut(dst);
            (&a[src], &mut b[0])
        } else {
            let (a, b) = self.device.split_at_mut(src);
            (&b[0], &mut a[dst])
        };
        let src_slice: &DeviceSlice<T> = src_buf;
        // SAFETY: distinct buffers of equal length, used only by this stream.
        unsafe { dst_buf.async_copy_from_device(src_slice, &self.stream) }
    }

    /// Records `event` on the lane's stream ([`Error::NotOnSimulator`] on
    /// the simulator).
    pub fn record(&self, event: &Event) -> Result<()> {
        let stream = self.stream.as_cust().map_err(|_| Error::NotOnSimulator {
            what: "CUDA events",
        })?;
        self.gpu.bind()?;
        event.record(stream).during(K, "cuEventRecord")
    }

    /// Waits for everything queued on the lane's stream.
    pub fn synchronize(&self) -> Result<()> {
        self.gpu.bind()?;
        match self.stream.as_cust() {
            Ok(s) => s.synchronize().during(K, "cuStreamSynchronize"),
            Err(_) => Ok(()),
        }
    }

    /// The host buffer, after waiting for the lane's stream (so every queued
    /// download has landed).
    pub fn host(&self) -> Result<&[T]> {
        self.synchronize()?;
        Ok(self.host.as_slice())
    }

    /// The host buffer, writable, after waiting for the lane's stream (so no
    /// queued upload still reads it).
    pub fn host_mut(&mut self) -> Result<&mut [T]> {
        self.synchronize()?;
        Ok(self.host.as_mut_slice())
    }

    /// What a kernel launcher on this lane needs: the context made current,
    /// the stream, and the pointers of the device buffers. Taking `&mut self`
    /// keeps the host buffer unborrowed while the launch is queued.
    ///
    /// For launchers of this crate (`Lane::mult_ker`, `Lane::conway_step`):
    /// the pointers stay valid until the stream is synchronized (module
    /// docs), belong to the lane's GPU, and the launcher queues its kernel on
    /// the returned stream only.
    pub fn launch_target(&mut self) -> Result<(&'g Gpu, &Stream, [DevicePointer<T>; D])> {
        self.gpu.bind()?;
        let ptrs = std::array::from_fn(|i| self.device[i].as_device_ptr());
        Ok((self.gpu, &self.stream, ptrs))
    }
}

impl<T: DeviceCopy, const D: usize> Drop for Lane<'_, T, D> {
    fn drop(&mut self) {
        let idle = self.synchronize().is_ok();
        if idle {
            // SAFETY: the stream is idle, so no queued work uses the buffers any more;
            // each ManuallyDrop is dropped once, here, and never used again.
            unsafe {
                ManuallyDrop::drop(&mut self.device);
                ManuallyDrop::drop(&mut self.host);
            }
        }
        // Otherwise the buffers are leaked on purpose (module docs, point 4).
    }
}

/// Mean and (population) standard deviation of a list of durations, as the
/// seed prints them with `np.mean` and `np.std`. `None` for an empty list.
pub fn mean_std(values: &[f32]) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = values
        .iter()
        .map(|&v| (v as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    Some((mean, var.sqrt()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_std_like_numpy() {
        assert_eq!(mean_std(&[]), None);
        let (m, s) = mean_std(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!((m - 2.5).abs() < 1e-12);
        assert!((s - 1.118_033_988_749_895).abs() < 1e-12);
    }
}
