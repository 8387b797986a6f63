//! Device memory on either backend: [`DeviceBuffer`] (owns an allocation)
//! and [`DeviceSlice`] (a pointer, a length and the device they belong to),
//! with `cust`'s method names, and [`Stream`], a queue of work on one device.
//!
//! A buffer is made on a [`Gpu`](crate::Gpu): [`Gpu::to_device`](crate::Gpu::to_device), [`Gpu::zeroed`](crate::Gpu::zeroed),
//! [`Gpu::uninitialized`](crate::Gpu::uninitialized). On a CUDA GPU it owns a `cust` buffer (device
//! memory of the `Gpu`'s context); on the simulator, an allocation of the
//! simulator's memory (host memory with a guard page after its end, so that
//! a kernel reading or writing past it is caught and reported with the
//! buffer and the index). Either way the kernels see the buffer's address
//! ([`DeviceSlice::as_device_ptr`]), and every slice says which device it
//! belongs to ([`DeviceSlice::device`]): a launcher given a slice or a
//! stream of another device refuses it with [`Error::WrongDevice`] before
//! anything is queued.
//!
//! ```
//! # fn main() -> cuda_kernels_runtime::Result<()> {
//! let gpu = cuda_kernels_runtime::Gpu::simulated_device_of_crate(0, "kernels");
//! let mut buf = gpu.to_device(&[1.0f32, 2.0, 3.0])?;
//! buf.index_mut(1..).copy_from(&[5.0, 6.0])?;
//! let mut back = [0.0f32; 3];
//! buf.copy_to(&mut back)?;
//! assert_eq!(back, [1.0, 5.0, 6.0]);
//! # Ok(()) }
//! ```
//!
//! On the simulator a buffer ends where its guard page begins, its length
//! rounded up to a whole number of 16-byte vectors: so it starts on a
//! 16-byte boundary as a GPU buffer does (the reductions' order of
//! operations, and which SGEMM entry runs, depend on that alignment, and the
//! simulator's results equal the GPU's), and an access past the end is
//! caught from the first 16-byte vector after the buffer's own (an access
//! into the padding of the last vector, for a buffer that is not a whole
//! number of vectors, is not).
//!
//! A part of a buffer is a view that borrows it, as a Rust sub-slice does:
//! [`DeviceSlice::index`] gives a [`DeviceView`] (shared: kernels may read
//! it), [`DeviceSlice::index_mut`] a [`DeviceViewMut`] (exclusive: kernels
//! may write it). A view cannot outlive its buffer, and the buffer cannot be
//! written through while a shared view of it lives.
//!
//! ```compile_fail,E0505
//! # fn main() -> cuda_kernels_runtime::Result<()> {
//! let gpu = cuda_kernels_runtime::Gpu::simulated_device_of_crate(0, "kernels");
//! let buf = gpu.to_device(&[1.0f32, 2.0, 3.0])?;
//! let tail = buf.index(1..);
//! drop(buf); // refused: `tail` still borrows it
//! let _ = tail.to_vec()?;
//! # Ok(()) }
//! ```
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Bound, Deref, DerefMut, RangeBounds};
use std::sync::Arc;

use cust::memory::bytemuck::{Pod, Zeroable};
use cust::memory::{AsyncCopyDestination, CopyDestination, DeviceCopy, DevicePointer};

pub use crate::device_context::DeviceContext;
pub use crate::device_id::DeviceId;
use crate::error::{CudaResultExt, Error, Result};
use crate::simulator;

/// The operation name device-memory errors carry in their `kernel` field.
pub(crate) const MEMORY: &str = "device memory";

impl DeviceId {
    /// Makes this device's context current on the calling thread (nothing
    /// to do on the simulator), as every copy, memset and free of its memory
    /// needs: a thread of the caller's (one per device, in a multi-GPU job)
    /// may have no context current, or another device's.
    pub(crate) fn make_current(&self) -> Result<()> {
        let DeviceId::Cuda { context, .. } = *self else {
            return Ok(());
        };
        // SAFETY: `context` is the primary context held by the
        // `DeviceContext` of the buffer, stream or communicator that carries
        // this identity (alive while it is); setting it current only changes
        // the calling thread's driver state.
        let r = unsafe { cust::sys::cuCtxSetCurrent(context as cust::sys::CUcontext) };
        crate::error::check_driver(r, MEMORY, "cuCtxSetCurrent")
    }
}

/// A stream of work on one device: a `cust` stream on a CUDA GPU; on the
/// simulator, nothing (every launch there runs to completion before it
/// returns, so work is always in order and always finished).
///
/// A CUDA stream holds its device's [`DeviceContext`], so the context (and
/// the memory the stream's work uses) outlives it. It is either the
/// device's ordering stream ([`Gpu::stream`](crate::Gpu::stream), shared by
/// every `Gpu` of the device) or a stream of its own
/// ([`Gpu::new_stream`](crate::Gpu::new_stream), a
/// [`Lane`](crate::async_mem::Lane)'s), which work over memory that safe
/// code reaches orders with the ordering stream by
/// [`Stream::wait_for_ordering`] and [`Stream::join_ordering`].
pub struct Stream {
    device: DeviceId,
    cuda: Option<CudaStream>,
}

/// A CUDA stream: its own (`own`), or the ordering stream of `context`
/// (`own` is `None`). Fields drop in order: the stream, then the context.
struct CudaStream {
    own: Option<cust::stream::Stream>,
    context: Arc<DeviceContext>,
}

impl Stream {
    /// The simulator's (empty) stream of simulated device `device`.
    pub(crate) fn simulated(device: DeviceId) -> Self {
        Self { device, cuda: None }
    }

    /// The ordering stream of `context`.
    pub(crate) fn ordering(context: &Arc<DeviceContext>) -> Self {
        Self {
            device: context.id(),
            cuda: Some(CudaStream {
                own: None,
                context: Arc::clone(context),
            }),
        }
    }

    /// `stream`, a stream made in `context`, owned.
    pub(crate) fn own(context: &Arc<DeviceContext>, stream: cust::stream::Stream) -> Self {
        Self {
            device: context.id(),
            cuda: Some(CudaStream {
                own: Some(stream),
                context: Arc::clone(context),
            }),
        }
    }

    /// The device the stream belongs to.
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// Whether this is the simulator's (empty) stream.
    pub fn is_simulated(&self) -> bool {
        self.cuda.is_none()
    }

    /// Whether this is its device's ordering stream (always, on the
    /// simulator, where all work is in order): the stream of
    /// [`Gpu::stream`](crate::Gpu::stream).
    pub fn is_ordering(&self) -> bool {
        self.cuda.as_ref().is_none_or(|c| c.own.is_none())
    }

    /// The device's context ([`Error::NotOnSimulator`] on the simulator).
    pub fn device_context(&self) -> Result<&Arc<DeviceContext>> {
        self.cuda
            .as_ref()
            .map(|c| &c.context)
            .ok_or(Error::NotOnSimulator {
                what: "a CUDA stream",
            })
    }

    /// The `cust` stream, for `cust` calls of your own;
    /// [`Error::NotOnSimulator`] on the simulator.
    pub fn as_cust(&self) -> Result<&cust::stream::Stream> {
        match &self.cuda {
            Some(c) => Ok(c.own.as_ref().unwrap_or(c.context.ordering())),
            None => Err(Error::NotOnSimulator {
                what: "a CUDA stream",
            }),
        }
    }

    /// Makes this stream's later work wait for everything queued on its
    /// device's ordering stream so far (an event recorded there): what work
    /// over memory that safe code reaches does first on a stream that is not
    /// the ordering stream. Nothing to do on the ordering stream itself or
    /// on the simulator. `operation` names the caller in errors.
    pub fn wait_for_ordering(&self, operation: &'static str) -> Result<()> {
        match &self.cuda {
            Some(CudaStream {
                own: Some(own),
                context,
            }) => context.order(context.ordering(), own, operation),
            _ => Ok(()),
        }
    }

    /// Makes the device's ordering stream wait for everything queued on this
    /// stream so far (an event recorded here): what work over memory that
    /// safe code reaches does last on a stream that is not the ordering
    /// stream, so that the `_on_device` launchers, the copies and `to_vec`
    /// see its results. Nothing to do on the ordering stream itself or on
    /// the simulator.
    pub fn join_ordering(&self, operation: &'static str) -> Result<()> {
        match &self.cuda {
            Some(CudaStream {
                own: Some(own),
                context,
            }) => context.order(own, context.ordering(), operation),
            _ => Ok(()),
        }
    }

    /// Waits for everything queued on the stream (nothing to wait for on
    /// the simulator).
    pub fn synchronize(&self) -> Result<()> {
        crate::graph::refuse_in_capture("Stream::synchronize")?;
        match &self.cuda {
            Some(_) => self
                .as_cust()?
                .synchronize()
                .during("stream", "cuStreamSynchronize"),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Stream({})", self.device)
    }
}

/// Elements of device memory: a pointer, a length and the device they
/// belong to. Borrowed from a [`DeviceBuffer`] (`&buf`, `&mut buf`) or from
/// a view of part of one ([`DeviceSlice::index`], [`DeviceSlice::index_mut`]);
/// never owned, so it never outlives the memory it names.
///
/// It is unsized, as `[T]` is: only ever behind a reference, so safe code
/// cannot swap two of them (a swap of `&mut *a` and `&mut *b` would leave
/// each buffer naming memory the other frees):
///
/// ```compile_fail,E0277
/// # fn main() -> cuda_kernels_runtime::Result<()> {
/// let gpu = cuda_kernels_runtime::Gpu::simulated_device_of_crate(0, "kernels");
/// let (mut a, mut b) = (gpu.zeroed::<f32>(4)?, gpu.zeroed::<f32>(8)?);
/// std::mem::swap(&mut *a, &mut *b);
/// # Ok(()) }
/// ```
#[repr(C)]
pub struct DeviceSlice<T: DeviceCopy> {
    place: Place<T>,
    /// Zero elements of a zero-sized type: what makes the type unsized
    /// (a reference to it is a pointer to its `place` and a length of 0).
    unsized_tail: [()],
}

/// Where a slice's elements are: the address of the first, their number and
/// their device. Owned by a [`DeviceBuffer`] or a view, which lend it out as
/// a [`DeviceSlice`].
struct Place<T: DeviceCopy> {
    ptr: DevicePointer<T>,
    len: usize,
    device: DeviceId,
}

impl<T: DeviceCopy> Place<T> {
    /// This place as a slice.
    fn slice(&self) -> &DeviceSlice<T> {
        let raw = std::ptr::slice_from_raw_parts(std::ptr::from_ref(self).cast::<()>(), 0)
            as *const DeviceSlice<T>;
        // SAFETY: DeviceSlice is repr(C) with a Place first and a tail of 0
        // zero-sized elements, so its size and alignment are the Place's and
        // `raw` (this Place's address, tail length 0) points to a valid one
        // for as long as `self` is borrowed.
        unsafe { &*raw }
    }

    /// This place as a mutable slice.
    fn slice_mut(&mut self) -> &mut DeviceSlice<T> {
        let raw = std::ptr::slice_from_raw_parts_mut(std::ptr::from_mut(self).cast::<()>(), 0)
            as *mut DeviceSlice<T>;
        // SAFETY: as in `slice`, borrowed exclusively.
        unsafe { &mut *raw }
    }
}

impl<T: DeviceCopy> fmt::Debug for DeviceSlice<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceSlice({} × {} at {:#x} on {})",
            self.place.len,
            std::any::type_name::<T>(),
            self.place.ptr.as_raw(),
            self.place.device
        )
    }
}

// SAFETY: a DeviceSlice is an address and a length in device memory (or the
// simulator's), like cust's DeviceSlice, which is Send and Sync on the same
// bounds; it owns nothing and holds no thread-bound state.
unsafe impl<T: DeviceCopy + Send> Send for Place<T> {}
// SAFETY: as above; shared access only reads the address and length.
unsafe impl<T: DeviceCopy + Sync> Sync for Place<T> {}

impl<T: DeviceCopy> DeviceSlice<T> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.place.len
    }

    /// Whether the slice holds no element.
    pub fn is_empty(&self) -> bool {
        self.place.len == 0
    }

    /// The address of the first element, as kernels take it.
    pub fn as_device_ptr(&self) -> DevicePointer<T> {
        self.place.ptr
    }

    /// The device the memory belongs to.
    pub fn device(&self) -> DeviceId {
        self.place.device
    }

    /// The elements in `range`, as a shared view that borrows this slice
    /// (it passes for a kernel's `*const T` parameter). Panics when the range
    /// is out of bounds (as slice indexing does).
    pub fn index(&self, range: impl RangeBounds<usize>) -> DeviceView<'_, T> {
        DeviceView {
            place: self.sub(range),
            borrow: PhantomData,
        }
    }

    /// The elements in `range`, as an exclusive view that borrows this slice
    /// mutably (it passes for a kernel's `*mut T` parameter, and copies and
    /// memsets write through it). Panics when the range is out of bounds.
    pub fn index_mut(&mut self, range: impl RangeBounds<usize>) -> DeviceViewMut<'_, T> {
        DeviceViewMut {
            place: self.sub(range),
            borrow: PhantomData,
        }
    }

    /// The slice split at `mid` into two exclusive views, `..mid` and
    /// `mid..`, both borrowing this slice mutably (as
    /// [`slice::split_at_mut`]): a kernel may write one while another reads
    /// the other. Panics when `mid` is past the end.
    pub fn split_at_mut(&mut self, mid: usize) -> (DeviceViewMut<'_, T>, DeviceViewMut<'_, T>) {
        let (head, tail) = (self.sub(..mid), self.sub(mid..));
        let view = |place| DeviceViewMut {
            place,
            borrow: PhantomData,
        };
        (view(head), view(tail))
    }

    /// The elements in `range` (checked), as a slice description of its own:
    /// only ever handed out inside a view that borrows `self`.
    fn sub(&self, range: impl RangeBounds<usize>) -> Place<T> {
        let start = match range.start_bound() {
            Bound::Included(&s) => Some(s),
            Bound::Excluded(&s) => s.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.checked_add(1),
            Bound::Excluded(&e) => Some(e),
            Bound::Unbounded => Some(self.place.len),
        };
        let (start, end) = match (start, end) {
            (Some(s), Some(e)) if s <= e && e <= self.place.len => (s, e),
            _ => panic!(
                "device slice range {:?}..{:?} out of bounds for length {}",
                range.start_bound(),
                range.end_bound(),
                self.place.len
            ),
        };
        let bytes = (start * size_of::<T>()) as u64;
        Place {
            ptr: DevicePointer::from_raw(self.place.ptr.as_raw() + bytes),
            len: end - start,
            device: self.place.device,
        }
    }

    /// The same memory as a `cust` slice (for `cust`'s copies and memsets;
    /// CUDA devices only), with its device's context made current on the
    /// calling thread for them.
    pub(crate) fn as_cust(&self) -> Result<cust::memory::DeviceSlice<T>> {
        self.place.device.make_current()?;
        // SAFETY: the address and length describe device memory of this
        // slice's buffer (or nothing, for a length of 0); cust's slice, like
        // ours, is a pointer and a length, and is only used for the copy or
        // memset at hand.
        Ok(unsafe { cust::memory::DeviceSlice::from_raw_parts(self.place.ptr, self.place.len) })
    }

    /// Refuses a host slice of another length.
    fn same_len(&self, operation: &str, other: usize) -> Result<()> {
        if other == self.place.len {
            Ok(())
        } else {
            Err(Error::invalid(
                MEMORY,
                format!(
                    "{operation}: the device slice holds {} elements, the other side {other}",
                    self.place.len
                ),
            ))
        }
    }

    /// The simulator's memory of this slice, as a host pointer.
    fn sim_ptr(&self) -> *mut T {
        self.place.ptr.as_raw() as usize as *mut T
    }

    /// Copies the slice into `host` (of the same length), waiting for the
    /// copy.
    pub fn copy_to(&self, host: &mut [T]) -> Result<()> {
        crate::graph::refuse_in_capture("DeviceSlice::copy_to (a synchronous copy to the host)")?;
        self.same_len("copy to the host", host.len())?;
        if self.place.device.is_simulated() {
            let src = self.sim_ptr();
            // SAFETY: `src` is the start of len elements of a live simulator
            // allocation (the slice's invariant: its buffer is alive), `host` holds len elements, and the two
            // do not overlap (`host` is a Rust slice borrowed mutably, the
            // allocation is the simulator's own memory).
            unsafe { std::ptr::copy_nonoverlapping(src, host.as_mut_ptr(), self.place.len) };
            return Ok(());
        }
        self.as_cust()?
            .copy_to(host)
            .during(MEMORY, "copy to the host")
    }

    /// Copies `host` (of the same length) into the slice, waiting for the
    /// copy.
    pub fn copy_from(&mut self, host: &[T]) -> Result<()> {
        crate::graph::refuse_in_capture(
            "DeviceSlice::copy_from (a synchronous copy from the host)",
        )?;
        self.same_len("copy to the device", host.len())?;
        if self.place.device.is_simulated() {
            let dst = self.sim_ptr();
            // SAFETY: as in copy_to, the other way.
            unsafe { std::ptr::copy_nonoverlapping(host.as_ptr(), dst, self.place.len) };
            return Ok(());
        }
        self.as_cust()?
            .copy_from(host)
            .during(MEMORY, "copy to the device")
    }

    /// Copies `src` (of the same length and device) into the slice, on the
    /// device, waiting for the copy.
    pub fn copy_from_device(&mut self, src: &DeviceSlice<T>) -> Result<()> {
        crate::graph::refuse_in_capture(
            "DeviceSlice::copy_from_device (a synchronous copy: use Capture::copy)",
        )?;
        self.same_len("device-to-device copy", src.place.len)?;
        self.same_device("device-to-device copy", src)?;
        if self.place.device.is_simulated() {
            let (from, to) = (src.sim_ptr(), self.sim_ptr());
            // SAFETY: both are the starts of len elements of live simulator
            // allocations (the slices' invariant); `copy` allows overlap.
            unsafe { std::ptr::copy(from, to, self.place.len) };
            return Ok(());
        }
        self.as_cust()?
            .copy_from(&src.as_cust()?)
            .during(MEMORY, "device-to-device copy")
    }

    /// Refuses memory of another device.
    fn same_device(&self, operation: &'static str, other: &DeviceSlice<T>) -> Result<()> {
        if other.place.device == self.place.device {
            Ok(())
        } else {
            Err(Error::WrongDevice {
                kernel: operation,
                argument: "the other slice",
                expected: self.place.device,
                found: other.place.device,
            })
        }
    }

    /// Refuses a stream of another device.
    fn same_stream(&self, operation: &'static str, stream: &Stream) -> Result<()> {
        if stream.device == self.place.device {
            Ok(())
        } else {
            Err(Error::WrongDevice {
                kernel: operation,
                argument: "stream",
                expected: self.place.device,
                found: stream.device,
            })
        }
    }

    /// Queues a copy of `host` into the slice on `stream` (on the
    /// simulator: copies at once).
    ///
    /// # Safety
    /// `host` must stay alive and unwritten until the stream has finished
    /// the copy (as `cust`'s `async_copy_from`).
    pub unsafe fn async_copy_from(&mut self, host: &[T], stream: &Stream) -> Result<()> {
        crate::graph::refuse_in_capture(
            "DeviceSlice::async_copy_from (a copy outside the capture)",
        )?;
        self.same_stream("asynchronous copy to the device", stream)?;
        match stream.as_cust().ok() {
            None => self.copy_from(host),
            Some(s) => {
                self.same_len("asynchronous copy to the device", host.len())?;
                // SAFETY: the caller's contract; lengths are equal.
                unsafe { self.as_cust()?.async_copy_from(host, s) }
                    .during(MEMORY, "cuMemcpyHtoDAsync")
            }
        }
    }

    /// Queues a copy of the slice into `host` on `stream` (on the
    /// simulator: copies at once).
    ///
    /// # Safety
    /// `host` must stay alive and be neither read nor written until the
    /// stream has finished the copy (as `cust`'s `async_copy_to`).
    pub unsafe fn async_copy_to(&self, host: &mut [T], stream: &Stream) -> Result<()> {
        crate::graph::refuse_in_capture("DeviceSlice::async_copy_to (a copy outside the capture)")?;
        self.same_stream("asynchronous copy to the host", stream)?;
        match stream.as_cust().ok() {
            None => self.copy_to(host),
            Some(s) => {
                self.same_len("asynchronous copy to the host", host.len())?;
                // SAFETY: the caller's contract; lengths are equal.
                unsafe { self.as_cust()?.async_copy_to(host, s) }
                    .during(MEMORY, "cuMemcpyDtoHAsync")
            }
        }
    }

    /// Queues a device-to-device copy of `src` into the slice on `stream`
    /// (on the simulator: copies at once).
    ///
    /// # Safety
    /// Both slices' memory must stay allocated until the stream has
    /// finished the copy, and nothing else may write it meanwhile.
    pub unsafe fn async_copy_from_device(
        &mut self,
        src: &DeviceSlice<T>,
        stream: &Stream,
    ) -> Result<()> {
        crate::graph::refuse_in_capture(
            "DeviceSlice::async_copy_from_device (a copy outside the capture: use Capture::copy)",
        )?;
        self.same_stream("asynchronous device-to-device copy", stream)?;
        match stream.as_cust().ok() {
            None => self.copy_from_device(src),
            Some(s) => {
                self.same_len("asynchronous device-to-device copy", src.place.len)?;
                self.same_device("asynchronous device-to-device copy", src)?;
                // SAFETY: the caller's contract; lengths are equal.
                unsafe { self.as_cust()?.async_copy_from(&src.as_cust()?, s) }
                    .during(MEMORY, "cuMemcpyDtoDAsync")
            }
        }
    }
}

impl<T: DeviceCopy + Pod> DeviceSlice<T> {
    /// Sets the slice's memory to copies of the 32-bit word `value`
    /// (`cuMemsetD32`), waiting for it. The slice's bytes must be a whole
    /// number of 4-byte words starting on a 4-byte boundary (an error
    /// otherwise).
    pub fn set_32(&mut self, value: u32) -> Result<()> {
        crate::graph::refuse_in_capture("DeviceSlice::set_32 (a synchronous memset)")?;
        let bytes = self.place.len * size_of::<T>();
        if !bytes.is_multiple_of(4) || !self.place.ptr.as_raw().is_multiple_of(4) {
            return Err(Error::invalid(
                MEMORY,
                format!(
                    "set_32: {bytes} bytes at {:#x} are not whole aligned 4-byte words",
                    self.place.ptr.as_raw()
                ),
            ));
        }
        if self.place.device.is_simulated() {
            let words = self.sim_ptr().cast::<u32>();
            for i in 0..bytes / 4 {
                // SAFETY: `words` is the 4-aligned start (checked) of `bytes`
                // bytes of a live simulator allocation (the slice's invariant),
                // and any bit pattern is a valid T (Pod).
                unsafe { words.add(i).write(value) };
            }
            return Ok(());
        }
        self.as_cust()?.set_32(value).during(MEMORY, "cuMemsetD32")
    }
}

impl<T: DeviceCopy + Zeroable> DeviceSlice<T> {
    /// The slice's elements copied to a new `Vec` (a kernel's output in one
    /// call), waiting for the copy.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut host = vec![T::zeroed(); self.place.len];
        self.copy_to(&mut host)?;
        Ok(host)
    }

    /// Sets every byte of the slice to 0, waiting for it.
    pub fn set_zero(&mut self) -> Result<()> {
        crate::graph::refuse_in_capture(
            "DeviceSlice::set_zero (a synchronous memset: use Capture::set_zero)",
        )?;
        if self.place.device.is_simulated() {
            let dst = self.sim_ptr();
            // SAFETY: `dst` is the start of len elements of a live simulator
            // allocation (the slice's invariant); all-zero bytes are a valid T (Zeroable).
            unsafe { std::ptr::write_bytes(dst, 0, self.place.len) };
            return Ok(());
        }
        self.as_cust()?.set_zero().during(MEMORY, "cuMemsetD8")
    }

    /// Queues the zeroing of the slice on `stream` (on the simulator:
    /// zeroes at once).
    ///
    /// # Safety
    /// The memory must stay allocated until the stream has done it.
    pub unsafe fn set_zero_async(&mut self, stream: &Stream) -> Result<()> {
        crate::graph::refuse_in_capture(
            "DeviceSlice::set_zero_async (a memset outside the capture: use Capture::set_zero)",
        )?;
        self.same_stream("asynchronous memset", stream)?;
        match stream.as_cust().ok() {
            None => self.set_zero(),
            // SAFETY: the caller's contract.
            Some(s) => {
                unsafe { self.as_cust()?.set_zero_async(s) }.during(MEMORY, "cuMemsetD8Async")
            }
        }
    }
}

/// Part of a [`DeviceSlice`] or [`DeviceBuffer`], borrowed shared: from
/// [`DeviceSlice::index`]. Dereferences to a [`DeviceSlice`] for reading;
/// `&view` passes for a kernel's `*const T` parameter, never for a `*mut T`.
///
/// ```compile_fail,E0277
/// # mod k { cuda_kernels_device::kernels! {
/// #     /// # Safety
/// #     /// `c` holds `n` f32.
/// #     pub fn fill(c: *mut f32, n: usize) as FILL { let _ = (c, n); }
/// # } }
/// # use cuda_kernels_runtime::{DeviceBuffer, Gpu, LaunchConfig, Result};
/// # fn run(gpu: &Gpu, c: &DeviceBuffer<f32>, n: usize) -> Result<()> {
/// // SAFETY: c holds n f32.
/// unsafe { gpu.launch(k::FILL, LaunchConfig::linear(1, 256), gpu.stream(), (&mut c.index(1..), n)) }
/// # }
/// ```
pub struct DeviceView<'a, T: DeviceCopy> {
    place: Place<T>,
    borrow: PhantomData<&'a DeviceSlice<T>>,
}

impl<T: DeviceCopy> Deref for DeviceView<'_, T> {
    type Target = DeviceSlice<T>;

    fn deref(&self) -> &DeviceSlice<T> {
        self.place.slice()
    }
}

impl<T: DeviceCopy> fmt::Debug for DeviceView<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceView of {:?}", self.place.slice())
    }
}

/// Part of a [`DeviceSlice`] or [`DeviceBuffer`], borrowed exclusively: from
/// [`DeviceSlice::index_mut`]. Dereferences to a [`DeviceSlice`] for reading
/// and writing; `&mut view` passes for a kernel's `*mut T` parameter.
///
/// ```
/// # fn main() -> cuda_kernels_runtime::Result<()> {
/// let gpu = cuda_kernels_runtime::Gpu::simulated_device_of_crate(0, "kernels");
/// let mut buf = gpu.zeroed::<u32>(4)?;
/// buf.index_mut(2..).set_32(7)?;
/// assert_eq!(buf.to_vec()?, [0, 0, 7, 7]);
/// # Ok(()) }
/// ```
pub struct DeviceViewMut<'a, T: DeviceCopy> {
    place: Place<T>,
    borrow: PhantomData<&'a mut DeviceSlice<T>>,
}

impl<T: DeviceCopy> Deref for DeviceViewMut<'_, T> {
    type Target = DeviceSlice<T>;

    fn deref(&self) -> &DeviceSlice<T> {
        self.place.slice()
    }
}

impl<T: DeviceCopy> DerefMut for DeviceViewMut<'_, T> {
    fn deref_mut(&mut self) -> &mut DeviceSlice<T> {
        self.place.slice_mut()
    }
}

impl<T: DeviceCopy> fmt::Debug for DeviceViewMut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceViewMut of {:?}", self.place.slice())
    }
}

/// Where a buffer's memory comes from.
enum Storage<T: DeviceCopy> {
    /// A `cust` buffer in a CUDA context.
    Cuda(cust::memory::DeviceBuffer<T>),
    /// An allocation of the simulator's memory (`None` for 0 elements).
    Sim(Option<simulator::Allocation>),
}

/// Device memory of `len` elements of `T`, owned: freed when dropped. Made
/// on a [`Gpu`](crate::Gpu) ([`Gpu::to_device`](crate::Gpu::to_device), [`Gpu::zeroed`](crate::Gpu::zeroed), [`Gpu::uninitialized`](crate::Gpu::uninitialized));
/// dereferences to its [`DeviceSlice`].
///
/// A CUDA buffer holds its device's [`DeviceContext`]: the context, and so
/// the memory, stays alive as long as the buffer, even after the last
/// [`Gpu`](crate::Gpu) of the device has dropped (a `Gpu` opened later on the
/// device shares the same context, and its allocations are elsewhere).
/// Fields drop in order: the memory is freed before the context is let go.
pub struct DeviceBuffer<T: DeviceCopy> {
    place: Place<T>,
    storage: Storage<T>,
    context: Option<Arc<DeviceContext>>,
}

/// Frees the memory with its device's context current (`cuMemFree` needs
/// one on the dropping thread; without it the free would fail silently and
/// leak), then the storage drops.
impl<T: DeviceCopy> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        // A free during a capture fails the capture (the driver refuses
        // cuMemFree then, and the capture's end says so by name).
        let _ =
            crate::graph::refuse_in_capture("cuMemFree (a device buffer dropped during a capture)");
        // A failure leaves the free to the context the thread has, as before.
        let _ = self.place.device.make_current();
    }
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// A buffer over `storage`, in `context` (`None` on the simulator).
    fn new(
        device: DeviceId,
        context: Option<Arc<DeviceContext>>,
        storage: Storage<T>,
        len: usize,
    ) -> Self {
        let ptr = match &storage {
            Storage::Cuda(b) => b.as_device_ptr(),
            Storage::Sim(Some(a)) => DevicePointer::from_raw(a.address() as u64),
            // No memory: an aligned, non-null address that no access reaches.
            Storage::Sim(None) => DevicePointer::from_raw(std::mem::align_of::<T>() as u64),
        };
        Self {
            place: Place { ptr, len, device },
            storage,
            context,
        }
    }

    /// The context the buffer's memory lives in (held as long as the
    /// buffer); `None` on the simulator.
    pub fn device_context(&self) -> Option<&Arc<DeviceContext>> {
        self.context.as_ref()
    }

    /// The `cust` buffer of a CUDA device; `None` on the simulator.
    pub fn as_cust(&self) -> Option<&cust::memory::DeviceBuffer<T>> {
        match &self.storage {
            Storage::Cuda(b) => Some(b),
            Storage::Sim(_) => None,
        }
    }
}

impl<T: DeviceCopy> Deref for DeviceBuffer<T> {
    type Target = DeviceSlice<T>;

    fn deref(&self) -> &DeviceSlice<T> {
        self.place.slice()
    }
}

impl<T: DeviceCopy> DerefMut for DeviceBuffer<T> {
    fn deref_mut(&mut self) -> &mut DeviceSlice<T> {
        self.place.slice_mut()
    }
}

impl<T: DeviceCopy> fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceBuffer({} × {} on {})",
            self.place.len,
            std::any::type_name::<T>(),
            self.place.device
        )
    }
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// Allocates `len` elements on `device` (in `context`, `None` on the
    /// simulator), unwritten: the storage behind
    /// [`Gpu::uninitialized`](crate::Gpu::uninitialized),
    /// [`Gpu::zeroed`](crate::Gpu::zeroed) and
    /// [`Gpu::to_device`](crate::Gpu::to_device).
    pub(crate) fn allocate(
        device: DeviceId,
        context: Option<&Arc<DeviceContext>>,
        len: usize,
    ) -> Result<Self> {
        crate::graph::refuse_in_capture("cuMemAlloc (a device buffer allocated during a capture)")?;
        let storage = if device.is_simulated() {
            let bytes = len.checked_mul(size_of::<T>()).ok_or_else(|| {
                Error::invalid(MEMORY, format!("{len} elements overflow usize bytes"))
            })?;
            // Rounded up to whole 16-byte vectors, so that the buffer starts on a
            // 16-byte boundary like cudaMalloc's (see the module docs).
            let padded = bytes.next_multiple_of(simulator::BUFFER_ALIGN);
            let allocation = (bytes > 0)
                .then(|| {
                    let ordinal = match device {
                        DeviceId::Simulator { ordinal } | DeviceId::Cuda { ordinal, .. } => ordinal,
                    };
                    simulator::Allocation::new(
                        padded,
                        size_of::<T>(),
                        std::any::type_name::<T>(),
                        ordinal,
                    )
                })
                .transpose()?;
            Storage::Sim(allocation)
        } else {
            let Some(context) = context else {
                return Err(Error::invalid(
                    MEMORY,
                    format!("{device}: a CUDA allocation needs its device's context"),
                ));
            };
            context.make_current()?;
            // SAFETY: the caller (uninitialized: its own caller; zeroed and
            // to_device: at once) writes the memory before anything reads it.
            let b = unsafe { cust::memory::DeviceBuffer::<T>::uninitialized(len) }
                .during(MEMORY, "cuMemAlloc")?;
            Storage::Cuda(b)
        };
        Ok(Self::new(device, context.cloned(), storage, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Gpu;

    /// A simulator running no kernel crate's kernels (these tests launch none).
    fn simulator() -> Result<Gpu> {
        Ok(Gpu::simulated_device_of_crate(0, "tests"))
    }

    #[test]
    fn simulated_buffers_copy_index_and_zero() {
        let gpu = simulator().unwrap();
        let mut buf = gpu.to_device(&[1i32, 2, 3, 4, 5]).unwrap();
        assert_eq!((buf.len(), buf.is_empty()), (5, false));
        assert_eq!(buf.device(), DeviceId::Simulator { ordinal: 0 });
        assert_eq!(buf.as_device_ptr().as_raw() % 16, 0, "16-byte aligned");
        buf.index_mut(1..3).copy_from(&[20, 30]).unwrap();
        let mut out = [0i32; 5];
        buf.copy_to(&mut out).unwrap();
        assert_eq!(out, [1, 20, 30, 4, 5]);
        let mut tail = [0i32; 2];
        buf.index(3..).copy_to(&mut tail).unwrap();
        assert_eq!(tail, [4, 5]);
        assert!(buf.index(5..).is_empty());
        let mut z = gpu.zeroed::<i32>(5).unwrap();
        z.copy_to(&mut out).unwrap();
        assert_eq!(out, [0; 5]);
        z.copy_from_device(&buf).unwrap();
        z.copy_to(&mut out).unwrap();
        assert_eq!(out, [1, 20, 30, 4, 5]);
        z.set_32(7).unwrap();
        z.copy_to(&mut out).unwrap();
        assert_eq!(out, [7; 5]);
        assert!(z.index_mut(..1).set_32(1).is_ok());
        assert!(gpu.zeroed::<u8>(3).unwrap().set_32(1).is_err());
        z.set_zero().unwrap();
        z.index(..1).copy_to(&mut out[..1]).unwrap();
        assert_eq!(out[0], 0);
        let (mut head, mut tail) = z.split_at_mut(2);
        head.copy_from(&[8, 9]).unwrap();
        tail.copy_from_device(&buf.index(2..)).unwrap();
        assert_eq!((head.len(), tail.len()), (2, 3));
        assert_eq!(z.to_vec().unwrap(), [8, 9, 30, 4, 5]);
        let empty = gpu.to_device::<f32>(&[]).unwrap();
        assert!(empty.is_empty());
        empty.copy_to(&mut []).unwrap();
        // SAFETY: nothing reads it.
        let big = unsafe { gpu.uninitialized::<u8>(3) }.unwrap();
        assert_eq!(big.len(), 3);
    }

    #[test]
    fn handles_are_send_and_sync() {
        fn send_sync<T: Send + Sync + ?Sized>() {}
        send_sync::<Gpu>();
        send_sync::<Stream>();
        send_sync::<DeviceContext>();
        send_sync::<DeviceBuffer<f32>>();
        send_sync::<DeviceSlice<f64>>();
        send_sync::<DeviceView<'static, f64>>();
        send_sync::<DeviceViewMut<'static, f64>>();
    }

    #[test]
    fn a_buffer_outlives_its_gpu_on_the_simulator() {
        // The issue's sequence (issue 40, item 1) on the simulator: the write
        // through the buffer of a dropped Gpu lands in its own memory.
        let mut stale = {
            let g = simulator().unwrap();
            g.to_device(&[1f32; 64]).unwrap()
        };
        let g2 = simulator().unwrap();
        let fresh = g2.to_device(&[2f32; 64]).unwrap();
        stale.copy_from(&[3f32; 64]).unwrap();
        assert_eq!(fresh.to_vec().unwrap(), [2f32; 64]);
        assert_eq!(stale.to_vec().unwrap(), [3f32; 64]);
        assert_eq!(stale.device(), fresh.device());
        drop(stale);
        let next = g2.to_device(&[4f32; 64]).unwrap();
        assert_eq!(fresh.to_vec().unwrap(), [2f32; 64]);
        assert_eq!(next.to_vec().unwrap(), [4f32; 64]);
        assert!(fresh.device_context().is_none(), "no CUDA context here");
    }

    #[test]
    fn simulated_streams_are_all_ordered() {
        // Every simulated launch finishes before it returns: every stream
        // counts as the ordering stream, and joining it does nothing.
        let gpu = simulator().unwrap();
        let s = gpu.new_stream().unwrap();
        assert!(gpu.stream().is_ordering() && s.is_ordering());
        s.wait_for_ordering("test").unwrap();
        s.join_ordering("test").unwrap();
        assert!(s.device_context().is_err() && gpu.device_context().is_err());
    }

    #[test]
    fn length_mismatches_are_errors_not_panics() {
        let gpu = simulator().unwrap();
        let mut buf = gpu.zeroed::<f32>(4).unwrap();
        let e = buf.copy_from(&[1.0; 3]).unwrap_err();
        assert!(
            matches!(e, Error::InvalidInput { kernel: MEMORY, .. }),
            "{e:?}"
        );
        assert!(buf.copy_to(&mut [0.0; 5]).is_err());
        let other = gpu.zeroed::<f32>(2).unwrap();
        assert!(buf.copy_from_device(&other).is_err());
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn index_past_the_end_panics_like_a_slice() {
        let gpu = simulator().unwrap();
        let buf = gpu.zeroed::<f32>(4).unwrap();
        let _ = buf.index(2..5);
    }

    #[test]
    fn lanes_work_on_the_simulator_without_kernels() {
        let gpu = simulator().unwrap();
        let mut lane = crate::async_mem::Lane::<i32, 2>::from_host(&gpu, &[1, 2, 3]).unwrap();
        lane.upload(0).unwrap();
        lane.copy_on_device(0, 1).unwrap();
        lane.host_mut().unwrap().fill(0);
        lane.download(1).unwrap();
        assert_eq!(lane.host().unwrap(), &[1, 2, 3]);
    }
}
