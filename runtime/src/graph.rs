//! CUDA graphs: a sequence of typed launches, copies and memsets captured
//! once ([`Gpu::begin_capture`]), instantiated ([`Graph::instantiate`]) and
//! replayed many times as one submission ([`GraphExec::launch`]), with a
//! launch's arguments updated between replays ([`GraphExec::set_args`],
//! [`GraphExec::update`]). On the simulator the same calls record the work
//! and a replay runs it in order through the simulator's launch, with the
//! same checks (races, barriers, accesses past a buffer).
//!
//! # What a graph holds
//! A graph's work runs long after the calls that captured it returned, so
//! the graph itself keeps alive everything it reads or writes:
//! - **buffers it writes are its own**: a [`DeviceBuffer`] is moved into the
//!   capture ([`Capture::hold`]), which gives back a [`Held`] handle (the
//!   buffer's address, length and device, `Copy`) that passes for a kernel's
//!   `*const T` or `*mut T`. The buffer lives as long as the graph and its
//!   executable; safe code reaches it only through
//!   [`GraphExec::buffer`] and [`GraphExec::buffer_mut`], which borrow the
//!   executable, so no replay can be queued or run while a host borrow of
//!   the buffer lives. Nodes of one graph may read and write the same held
//!   buffers in turn (Life's two lattices, a solver's vectors);
//! - **buffers it only reads may be borrowed**: `&buf` (or `&mut buf`) as an
//!   argument borrows it for the graph's lifetime `'a`, so it cannot be
//!   freed, or written by safe code, while the graph lives;
//! - **the module and the context**: the capture borrows the [`Gpu`] for
//!   `'a` (its module holds the kernels' code), and the graph holds the
//!   device's [`DeviceContext`].
//!
//! A [`Held`] handle of one graph passed to another graph's capture is
//! refused ([`Error::InvalidInput`]); passed to the `unsafe`
//! [`Gpu::launch`], it is a raw address under that call's contract.
//!
//! # Branches
//! A capture records one chain of work, and branches beside it:
//! [`Capture::fork`] starts a second chain after the main chain's work so
//! far, [`Capture::switch_to`] sends the next launches to it (or back to
//! [`Branch::MAIN`]), [`Capture::join`] makes the main chain's next work wait
//! for it (on a GPU: a second private stream, forked and joined by events).
//!
//! # Ordering
//! A replay follows the rule of every launch of this crate (see [`Gpu`]):
//! on the device's ordering stream ([`Gpu::stream`]) it is ordered with
//! every launcher and every copy; on another stream it first waits for the
//! ordering stream and the ordering stream then waits for it
//! ([`Stream::wait_for_ordering`], [`Stream::join_ordering`]). Replays of
//! one executable run one after another (the driver orders them), and
//! dropping the executable waits for the last one before its buffers and
//! borrows are let go. A stream of another device is refused
//! ([`Error::WrongDevice`]).
//!
//! # What cannot be captured
//! A capture is recorded on a private non-blocking stream, so no other
//! work of the process lands in it. On the capturing thread, every call
//! that would run outside the graph, or that the driver refuses while a
//! stream captures, is refused before it reaches the driver with
//! [`Error::NotCapturable`] naming it: allocations (`Gpu::zeroed`,
//! `Gpu::to_device`), synchronous copies and memsets (`to_vec`,
//! `copy_from`, `set_zero`, …), synchronizations, and launches outside the
//! capture ([`Gpu::launch`] and every launcher built on it). The capture is
//! then abandoned ([`Capture::end`] returns the same error); the device and
//! every stream stay usable. Dropping a [`Capture`] without ending it
//! abandons it too.
//!
//! ```
//! # mod k { cuda_kernels_device::kernels! {
//! #     /// `x[i] = x[i] * a + 1` for `i < n`.
//! #     ///
//! #     /// # Safety
//! #     /// `x` holds `n` f32.
//! #     pub fn axpo(x: *mut f32, a: f32, n: usize) as AXPO {
//! #         for i in cuda_kernels_device::thread::grid_stride(n) {
//! #             // SAFETY: i < n.
//! #             unsafe { *x.add(i) = *x.add(i) * a + 1.0 };
//! #         }
//! #     }
//! # } }
//! use cuda_kernels_runtime::{Gpu, LaunchConfig, Update};
//! # fn main() -> cuda_kernels_runtime::Result<()> {
//! let gpu = Gpu::simulated_device_of_crate(0, env!("CARGO_CRATE_NAME")); // or Gpu::from_images(&IMAGES)?
//! let x = gpu.to_device(&[0.0f32; 4])?; // allocate before the capture
//! let mut capture = gpu.begin_capture()?;
//! let x = capture.hold(x)?; // the graph owns what it writes
//! let cfg = LaunchConfig::linear(1, 32);
//! // SAFETY: x holds 4 f32.
//! let first = unsafe { capture.launch(k::AXPO, cfg, (x, 2.0f32, 4usize)) }?;
//! // SAFETY: as above.
//! unsafe { capture.launch(k::AXPO, cfg, (x, 2.0f32, 4usize)) }?;
//! let mut exec = capture.end()?.instantiate()?;
//! exec.launch(gpu.stream())?; // x = (0·2+1)·2+1 = 3
//! exec.launch(gpu.stream())?; // x = (3·2+1)·2+1 = 15
//! assert_eq!(exec.buffer(x)?.to_vec()?, [15.0; 4]);
//! // A new scalar for the first launch: in place where the driver allows it.
//! // SAFETY: x holds 4 f32.
//! let how = unsafe { exec.set_args(first, (x, 0.0f32, 4usize)) }?;
//! assert!(matches!(how, Update::InPlace | Update::Reinstantiated { .. }));
//! exec.launch(gpu.stream())?; // x = (15·0+1)·2+1 = 3
//! assert_eq!(exec.buffer(x)?.to_vec()?, [3.0; 4]);
//! # Ok(()) }
//! ```
//!
//! A buffer a graph reads by borrow cannot be freed while the graph lives:
//! ```compile_fail,E0505
//! # mod k { cuda_kernels_device::kernels! {
//! #     /// `y[i] = x[i]` for `i < n`.
//! #     ///
//! #     /// # Safety
//! #     /// `x` and `y` hold `n` f32.
//! #     pub fn copy(x: *const f32, y: *mut f32, n: usize) as COPY {
//! #         for i in cuda_kernels_device::thread::grid_stride(n) {
//! #             // SAFETY: i < n.
//! #             unsafe { *y.add(i) = *x.add(i) };
//! #         }
//! #     }
//! # } }
//! # use cuda_kernels_runtime::{Gpu, LaunchConfig};
//! # fn main() -> cuda_kernels_runtime::Result<()> {
//! let gpu = Gpu::simulated_device_of_crate(0, env!("CARGO_CRATE_NAME"));
//! let (x, y) = (gpu.to_device(&[1.0f32; 4])?, gpu.zeroed::<f32>(4)?);
//! let mut capture = gpu.begin_capture()?;
//! let y = capture.hold(y)?;
//! // SAFETY: x and y hold 4 f32.
//! unsafe { capture.launch(k::COPY, LaunchConfig::linear(1, 32), (&x, y, 4usize)) }?;
//! let mut exec = capture.end()?.instantiate()?;
//! drop(x); // refused: the graph borrows x
//! exec.launch(gpu.stream())?;
//! # Ok(()) }
//! ```
//! and a capture stays on the thread that began it:
//! ```compile_fail,E0277
//! # fn main() -> cuda_kernels_runtime::Result<()> {
//! let gpu = cuda_kernels_runtime::Gpu::simulated_device_of_crate(0, "kernels");
//! let capture = gpu.begin_capture()?;
//! std::thread::scope(|s| {
//!     s.spawn(move || drop(capture)); // refused: a Capture is not Send
//! });
//! # Ok(()) }
//! ```
use std::any::Any;
use std::cell::Cell;
use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cuda_kernels_device::sim::Entry;
use cust::memory::bytemuck::Zeroable;
use cust::memory::{AsyncCopyDestination, DeviceCopy, DevicePointer};
use cust::sys as cu;

use crate::Gpu;
use crate::async_mem::non_blocking_stream;
use crate::device_context::DeviceContext;
use crate::error::{CudaResultExt, Error, Result, check_driver};
use crate::kernel::{Kernel, KernelArgs};
use crate::launch::LaunchConfig;
use crate::memory::{DeviceBuffer, DeviceId, DeviceSlice, Stream};
use crate::simulator;

/// The name errors of this module carry.
const K: &str = "CUDA graph";

/// Whether the calling thread is capturing, and the first call refused
/// during the capture.
#[derive(Clone, Copy)]
enum Capturing {
    No,
    Yes { refused: Option<&'static str> },
}

thread_local! {
    /// The calling thread's capture state ([`Gpu::begin_capture`] to
    /// [`Capture::end`] or the capture's drop).
    static CAPTURING: Cell<Capturing> = const { Cell::new(Capturing::No) };
}

/// `Ok` outside a capture; on the thread of a capture in progress,
/// [`Error::NotCapturable`] naming `call`, which the capture remembers (its
/// `end` fails with the first such call): the first line of every call
/// that a graph cannot hold.
pub(crate) fn refuse_in_capture(call: &'static str) -> Result<()> {
    CAPTURING.with(|c| match c.get() {
        Capturing::No => Ok(()),
        Capturing::Yes { refused } => {
            c.set(Capturing::Yes {
                refused: refused.or(Some(call)),
            });
            Err(Error::NotCapturable { call })
        }
    })
}

/// Ends the calling thread's capture state, returning the first call
/// refused during it.
fn stop_capturing() -> Option<&'static str> {
    CAPTURING.with(|c| match c.replace(Capturing::No) {
        Capturing::No => None,
        Capturing::Yes { refused } => refused,
    })
}

/// A fresh id for a capture (and the graph and buffers it makes).
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The seal of [`ParamTuple`].
mod sealed {
    /// A tuple of kernel parameter types.
    pub trait Sealed {}
}

/// A kernel's parameter types as a tuple (`(*const f32, *mut f32, usize)`),
/// whose values a graph stores: the simulator replays a launch from them.
/// Implemented for every tuple of up to 15 `Copy` types; sealed.
///
/// # Safety
/// `read` reads one value per element, of the element's type, from the
/// pointers in order, and `pointers` points at each element in order.
pub unsafe trait ParamTuple: sealed::Sealed + Copy + 'static {
    /// The tuple whose elements `params` points at, in order.
    ///
    /// # Safety
    /// `params` holds one pointer per element, each to a live value of the
    /// element's type (what [`KernelArgs::with_params`] hands out).
    unsafe fn read(params: &[*mut c_void]) -> Self;

    /// A pointer to each element, in order (what a launch takes).
    fn pointers(&mut self) -> Vec<*mut c_void>;
}

macro_rules! param_tuple {
    ($($a:ident $p:ident $i:tt),*) => {
        impl<$($p: Copy + 'static,)*> sealed::Sealed for ($($p,)*) {}
        // SAFETY: one read and one pointer per element, in order, of the
        // element's own type.
        unsafe impl<$($p: Copy + 'static,)*> ParamTuple for ($($p,)*) {
            #[allow(unused_variables, clippy::unused_unit)]
            unsafe fn read(params: &[*mut c_void]) -> Self {
                // SAFETY: the caller's contract: params[i] points at a live
                // value of the i-th type.
                ($(unsafe { params[$i].cast::<$p>().read() },)*)
            }

            #[allow(unused_mut)]
            fn pointers(&mut self) -> Vec<*mut c_void> {
                vec![$(std::ptr::from_mut(&mut self.$i).cast::<c_void>()),*]
            }
        }
    };
}
for_each_arity!(param_tuple);

/// A launch's parameter values, stored.
trait StoredParams: Send + Sync {
    /// A pointer to each value, in order.
    fn pointers(&mut self) -> Vec<*mut c_void>;
}

/// The values of a tuple of parameters.
struct Stored<P>(P);

// SAFETY: the values are device addresses and scalars (kernel parameters),
// which no thread owns; they are read only by a replay, under `&mut`.
unsafe impl<P> Send for Stored<P> {}
// SAFETY: as above; shared access does not touch them.
unsafe impl<P> Sync for Stored<P> {}

impl<P: ParamTuple> StoredParams for Stored<P> {
    fn pointers(&mut self) -> Vec<*mut c_void> {
        self.0.pointers()
    }
}

/// A buffer of a graph's own ([`Capture::hold`], [`GraphExec::hold`]): its
/// address, length and device, and which graph holds it. `Copy`; passes
/// for a `*const T` or `*mut T` argument of a launch captured into that
/// graph; read and written on the host through [`GraphExec::buffer`] and
/// [`GraphExec::buffer_mut`].
pub struct Held<T: DeviceCopy> {
    pub(crate) ptr: DevicePointer<T>,
    pub(crate) len: usize,
    pub(crate) device: DeviceId,
    /// The id of the pool that holds it.
    pub(crate) pool: u64,
    /// Its place in the pool.
    index: usize,
}

impl<T: DeviceCopy> Clone for Held<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: DeviceCopy> Copy for Held<T> {}

impl<T: DeviceCopy> Held<T> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<T: DeviceCopy> fmt::Debug for Held<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Held({} × {} of graph {} on {})",
            self.len,
            std::any::type_name::<T>(),
            self.pool,
            self.device
        )
    }
}

/// The buffers one capture (or an executable) holds.
struct Pool {
    id: u64,
    buffers: Vec<Box<dyn Any + Send + Sync>>,
}

impl Pool {
    fn new(id: u64) -> Self {
        Self {
            id,
            buffers: Vec::new(),
        }
    }

    /// Takes `buf` (of `device`, checked) and returns its handle.
    fn hold<T: DeviceCopy + Send + Sync + 'static>(
        &mut self,
        device: DeviceId,
        buf: DeviceBuffer<T>,
    ) -> Result<Held<T>> {
        if buf.device() != device {
            return Err(Error::WrongDevice {
                kernel: K,
                argument: "the held buffer",
                expected: device,
                found: buf.device(),
            });
        }
        let held = Held {
            ptr: buf.as_device_ptr(),
            len: buf.len(),
            device,
            pool: self.id,
            index: self.buffers.len(),
        };
        self.buffers.push(Box::new(buf));
        Ok(held)
    }

    /// The buffer of `held`, when this pool holds it.
    fn get<T: DeviceCopy + 'static>(&self, held: Held<T>) -> Option<&DeviceBuffer<T>> {
        (held.pool == self.id)
            .then(|| self.buffers.get(held.index)?.downcast_ref())
            .flatten()
    }

    /// As [`Pool::get`], mutably.
    fn get_mut<T: DeviceCopy + 'static>(&mut self, held: Held<T>) -> Option<&mut DeviceBuffer<T>> {
        (held.pool == self.id)
            .then(|| self.buffers.get_mut(held.index)?.downcast_mut())
            .flatten()
    }
}

/// A captured launch: what a replay on the simulator runs and an update
/// on a GPU rewrites.
struct KernelOp {
    name: &'static str,
    cfg: LaunchConfig,
    shared_opt_in: bool,
    /// The simulator's host entry (`None` on a GPU).
    entry: Option<Entry>,
    /// The elements of each argument's memory, as captured ([`KernelArgs::extents`]).
    extents: Vec<Option<usize>>,
    params: Box<dyn StoredParams>,
    /// The graph's kernel node (`CUgraphNode`, 0 on the simulator).
    node: usize,
    /// The function (`CUfunction`, 0 on the simulator).
    function: usize,
}

/// One piece of captured work, in order.
enum Op {
    Kernel(KernelOp),
    /// `bytes` from device address `src` to `dst`.
    Copy {
        dst: u64,
        src: u64,
        bytes: usize,
    },
    /// `bytes` zeroed at `dst`.
    Zero {
        dst: u64,
        bytes: usize,
    },
}

impl Op {
    /// What the op is, for the simulator's update rule and messages.
    fn kind(&self) -> &'static str {
        match self {
            Op::Kernel(k) => k.name,
            Op::Copy { .. } => "copy",
            Op::Zero { .. } => "memset",
        }
    }
}

/// The handle of a launch in a graph ([`Capture::launch`]), for
/// [`GraphExec::set_args`]: which graph and which launch, and the kernel's
/// parameter types.
pub struct KernelNode<P> {
    graph: u64,
    index: usize,
    _params: PhantomData<fn(P)>,
}

impl<P> Clone for KernelNode<P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for KernelNode<P> {}

impl<P> fmt::Debug for KernelNode<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KernelNode({} of graph {})", self.index, self.graph)
    }
}

/// How an executable took new arguments or a new graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// The executable was updated in place (`cuGraphExecKernelNodeSetParams`,
    /// `cuGraphExecUpdate`; on the simulator, the same topology).
    InPlace,
    /// The driver refused the update (or the topology changed), so the graph
    /// was instantiated again: `reason` says what was refused.
    Reinstantiated {
        /// The driver's refusal, or what changed.
        reason: String,
    },
}

/// A capture in progress ([`Gpu::begin_capture`]): the typed launches,
/// copies and memsets queued through it are recorded, not run, until
/// [`Capture::end`] makes them a [`Graph`]. Work it writes must be in
/// buffers it holds ([`Capture::hold`]); memory it only reads may be
/// borrowed for `'a`. Tied to the thread that began it (not `Send`): calls
/// on that thread that a graph cannot hold are refused
/// ([`Error::NotCapturable`], see the [module docs](self)). Dropping it
/// without `end` abandons the capture.
pub struct Capture<'a> {
    gpu: &'a Gpu,
    ops: Vec<Op>,
    pool: Pool,
    /// The private stream being captured, on a CUDA GPU.
    stream: Option<Stream>,
    /// The branches forked from it ([`Capture::fork`]), by index.
    branches: Vec<BranchState>,
    /// Where work goes now: the main stream or a branch.
    current: Branch,
    /// Whether `end` ran (the capture state is then the thread's no more).
    ended: bool,
    /// Not `Send`: the capture state belongs to the calling thread.
    _thread: PhantomData<*const ()>,
}

impl Gpu {
    /// Begins a capture on this device: the work queued through the
    /// returned [`Capture`] is recorded into a graph ([`Capture::end`]),
    /// which is then instantiated once and replayed many times. On a GPU the
    /// capture records a private non-blocking stream
    /// (`cuStreamBeginCapture`, thread-local mode); on the simulator it
    /// records the launches themselves. A capture already in progress on
    /// this thread is [`Error::NotCapturable`]. See the [module docs](self)
    /// for an example.
    pub fn begin_capture(&self) -> Result<Capture<'_>> {
        refuse_in_capture("Gpu::begin_capture (a capture is already in progress on this thread)")?;
        let stream = match self.context_handle() {
            None => None,
            Some(context) => {
                context.make_current()?;
                let s = non_blocking_stream().during(K, "cuStreamCreate")?;
                // SAFETY: `s` is a live stream of the current context, not
                // capturing; the mode is one the driver documents.
                let r = unsafe {
                    cu::cuStreamBeginCapture_v2(
                        s.as_inner(),
                        cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                    )
                };
                check_driver(r, K, "cuStreamBeginCapture")?;
                Some(Stream::own(context, s))
            }
        };
        CAPTURING.with(|c| c.set(Capturing::Yes { refused: None }));
        Ok(Capture {
            gpu: self,
            ops: Vec::new(),
            pool: Pool::new(next_id()),
            stream,
            branches: Vec::new(),
            current: Branch::MAIN,
            ended: false,
            _thread: PhantomData,
        })
    }
}

impl Gpu {
    /// [`Gpu::begin_capture`], `body` on the capture, [`Capture::end`]: the
    /// graph and what `body` returned (its nodes and held buffers, say). An
    /// error of `body` abandons the capture and is returned.
    ///
    /// ```
    /// # mod k { cuda_kernels_device::kernels! {
    /// #     /// `x[i] += 1` for `i < n`.
    /// #     ///
    /// #     /// # Safety
    /// #     /// `x` holds `n` u32.
    /// #     pub fn bump(x: *mut u32, n: usize) as BUMP {
    /// #         for i in cuda_kernels_device::thread::grid_stride(n) {
    /// #             // SAFETY: i < n.
    /// #             unsafe { *x.add(i) += 1 };
    /// #         }
    /// #     }
    /// # } }
    /// # fn main() -> cuda_kernels_runtime::Result<()> {
    /// let gpu = cuda_kernels_runtime::Gpu::simulated_device_of_crate(0, env!("CARGO_CRATE_NAME"));
    /// let x = gpu.zeroed::<u32>(8)?;
    /// let (graph, x) = gpu.capture(|c| {
    ///     let x = c.hold(x)?;
    ///     for _ in 0..3 {
    ///         // SAFETY: x holds 8 u32.
    ///         unsafe { c.launch(k::BUMP, cuda_kernels_runtime::LaunchConfig::linear(1, 32), (x, 8usize)) }?;
    ///     }
    ///     Ok(x)
    /// })?;
    /// let mut exec = graph.instantiate()?;
    /// exec.launch(gpu.stream())?;
    /// assert_eq!(exec.buffer(x)?.to_vec()?, [3; 8]);
    /// # Ok(()) }
    /// ```
    pub fn capture<'a, R>(
        &'a self,
        body: impl FnOnce(&mut Capture<'a>) -> Result<R>,
    ) -> Result<(Graph<'a>, R)> {
        let mut capture = self.begin_capture()?;
        let made = body(&mut capture)?;
        Ok((capture.end()?, made))
    }
}

impl<'a> Capture<'a> {
    /// Moves `buf` into the graph, which holds it as long as it lives, and
    /// returns its handle: what launches, copies and memsets of this capture
    /// write through (and may read). A buffer of another device is
    /// [`Error::WrongDevice`]. Allocate before [`Gpu::begin_capture`]: an
    /// allocation during the capture is refused.
    pub fn hold<T: DeviceCopy + Send + Sync + 'static>(
        &mut self,
        buf: DeviceBuffer<T>,
    ) -> Result<Held<T>> {
        self.pool.hold(self.gpu.device_id(), buf)
    }

    /// Refuses a held buffer of another graph given as `argument`.
    fn check_held(&self, argument: &str, pool: Option<u64>) -> Result<()> {
        match pool {
            Some(p) if p != self.pool.id => Err(Error::invalid(
                K,
                format!("{argument} is a buffer held by another graph (graph {p})"),
            )),
            _ => Ok(()),
        }
    }

    /// Records a launch of `kernel` with `cfg` and `args`, as
    /// [`Gpu::launch`] queues one (the same checks: the handle's crate, the
    /// device of every argument, the launch shape; and every [`Held`]
    /// argument must be this capture's), and returns its node, whose
    /// arguments [`GraphExec::set_args`] can change. Arguments are held
    /// buffers, memory borrowed for the graph's lifetime `'a`, raw pointers
    /// and scalars.
    ///
    /// # Safety
    /// The contract of [`Gpu::launch`], for every replay: each pointer is
    /// valid for every element the kernel reads and writes with these
    /// arguments and this configuration, and memory the kernel writes is
    /// not touched by other arguments of the launch that alias it.
    pub unsafe fn launch<P: ParamTuple, A: KernelArgs<P> + 'a>(
        &mut self,
        kernel: Kernel<P>,
        cfg: LaunchConfig,
        args: A,
    ) -> Result<KernelNode<P>> {
        let gpu = self.gpu;
        let name = kernel.name();
        let shared_opt_in = gpu.check_launch(&kernel, cfg, gpu.device_id(), &args)?;
        for (i, pool) in args.holders().into_iter().enumerate() {
            self.check_held(&format!("{name}: argument {i}"), pool)?;
        }
        let extents = args.extents();
        let (entry, function, node, values) = match self.current_stream()? {
            None => {
                let entry = gpu.sim_entry(&kernel, cfg)?;
                // SAFETY: `with_params` hands out one pointer per parameter
                // of `P`, to a live value of its type (KernelArgs' contract).
                let values = args.with_params(|params| unsafe { P::read(params) });
                (Some(entry), 0, 0, values)
            }
            Some(stream) => {
                gpu.bind()?;
                let function = gpu.raw_function(name)?;
                let raw = stream.as_cust()?.as_inner();
                let LaunchConfig {
                    grid: (gx, gy, gz),
                    block: (bx, by, bz),
                    shared_mem_bytes,
                } = cfg;
                let (values, r) = args.with_params(|params| {
                    // SAFETY: as above.
                    let values = unsafe { P::read(params) };
                    // SAFETY: `function` is this GPU's entry point of the
                    // handle's name, `raw` its capturing stream; `params`
                    // holds one pointer per parameter, to a value of its
                    // type, alive for the call (the driver copies them into
                    // the node); the pointers' validity is the caller's
                    // contract.
                    let r = unsafe {
                        cu::cuLaunchKernel(
                            function,
                            gx,
                            gy,
                            gz,
                            bx,
                            by,
                            bz,
                            shared_mem_bytes,
                            raw,
                            params.as_mut_ptr(),
                            std::ptr::null_mut(),
                        )
                    };
                    (values, r)
                });
                check_driver(r, name, "cuLaunchKernel (captured)")?;
                let node = last_node(raw, name)?;
                (None, function as usize, node as usize, values)
            }
        };
        self.ops.push(Op::Kernel(KernelOp {
            name,
            cfg,
            shared_opt_in,
            entry,
            extents,
            params: Box::new(Stored(values)),
            node,
            function,
        }));
        Ok(KernelNode {
            graph: self.pool.id,
            index: self.ops.len() - 1,
            _params: PhantomData,
        })
    }

    /// Records a copy of the held buffer `src` into the held buffer `dst`
    /// (another buffer of the same length: [`Error::InvalidInput`]
    /// otherwise), on the device.
    pub fn copy<T: DeviceCopy>(&mut self, dst: Held<T>, src: Held<T>) -> Result<()> {
        self.check_held("the copy's source", Some(src.pool))?;
        self.copy_raw(dst, src.ptr, src.len, src.device)
    }

    /// Records a copy of `src`, memory the graph reads by borrow for its
    /// lifetime (an input, such as a right-hand side to start a solve
    /// from), into the held buffer `dst` of the same length, on the device.
    pub fn copy_from_borrowed<T: DeviceCopy>(
        &mut self,
        dst: Held<T>,
        src: &'a DeviceSlice<T>,
    ) -> Result<()> {
        self.copy_raw(dst, src.as_device_ptr(), src.len(), src.device())
    }

    /// The copy into `dst` of `len` elements at `src` on `device`: checked
    /// (this graph's `dst`, the device, the length, not `dst` itself) and
    /// recorded.
    fn copy_raw<T: DeviceCopy>(
        &mut self,
        dst: Held<T>,
        src: DevicePointer<T>,
        len: usize,
        device: DeviceId,
    ) -> Result<()> {
        self.check_held("the copy's destination", Some(dst.pool))?;
        self.gpu.check_device_id(K, "the copy's source", device)?;
        if dst.len != len {
            return Err(Error::invalid(
                K,
                format!(
                    "copy: the destination holds {} elements, the source {len}",
                    dst.len
                ),
            ));
        }
        if dst.ptr.as_raw() == src.as_raw() && len > 0 {
            return Err(Error::invalid(K, "copy: the source is the destination"));
        }
        let bytes = len * size_of::<T>();
        if bytes == 0 {
            return Ok(());
        }
        self.no_open_branch("copy")?;
        if let Some(stream) = &self.stream {
            // SAFETY: `dst` is a buffer of this capture's pool (checked) and
            // `src` one held or borrowed for the graph's lifetime, both of
            // `len` elements, distinct buffers; a captured copy runs only in
            // replays.
            let (mut d, s) = unsafe {
                (
                    cust::memory::DeviceSlice::from_raw_parts_mut(dst.ptr, len),
                    cust::memory::DeviceSlice::from_raw_parts(src, len),
                )
            };
            self.gpu.bind()?;
            // SAFETY: as above; lengths are equal.
            unsafe { d.async_copy_from(&s, stream.as_cust()?) }
                .during(K, "cuMemcpyDtoDAsync (captured)")?;
        }
        self.ops.push(Op::Copy {
            dst: dst.ptr.as_raw(),
            src: src.as_raw(),
            bytes,
        });
        Ok(())
    }

    /// Records the zeroing of the held buffer `dst`.
    pub fn set_zero<T: DeviceCopy + Zeroable>(&mut self, dst: Held<T>) -> Result<()> {
        self.check_held("the memset's destination", Some(dst.pool))?;
        self.no_open_branch("set_zero")?;
        let bytes = dst.len * size_of::<T>();
        if bytes == 0 {
            return Ok(());
        }
        if let Some(stream) = &self.stream {
            self.gpu.bind()?;
            // SAFETY: a buffer of this capture's pool (checked), alive as long
            // as the graph; the memset runs only in replays.
            let mut d = unsafe { cust::memory::DeviceSlice::from_raw_parts_mut(dst.ptr, dst.len) };
            // SAFETY: as above.
            unsafe { d.set_zero_async(stream.as_cust()?) }
                .during(K, "cuMemsetD8Async (captured)")?;
        }
        self.ops.push(Op::Zero {
            dst: dst.ptr.as_raw(),
            bytes,
        });
        Ok(())
    }

    /// The number of launches, copies and memsets recorded so far.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether nothing was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Forks a branch: a second chain of work that starts after everything
    /// recorded on the main chain so far and runs beside what the main
    /// chain records next, until [`Capture::join`] (on a GPU, a second
    /// private stream that waits for an event of the main one; the
    /// simulator replays the work in the order it was recorded, one valid
    /// order of the graph). Launches go to it after [`Capture::switch_to`].
    /// Work on two branches runs concurrently on a GPU: that the kernels of
    /// one do not touch what the other's write is part of
    /// [`Capture::launch`]'s contract, and the safe copies and memsets are
    /// refused while a branch is open.
    pub fn fork(&mut self) -> Result<Branch> {
        let stream = match &self.stream {
            None => None,
            Some(main) => {
                let context = main.device_context()?;
                context.make_current()?;
                let side = Stream::own(context, non_blocking_stream().during(K, "cuStreamCreate")?);
                context.order(main.as_cust()?, side.as_cust()?, K)?;
                Some(side)
            }
        };
        self.branches.push(BranchState { stream, open: true });
        Ok(Branch(self.branches.len()))
    }

    /// Sends the launches recorded next to `branch` ([`Branch::MAIN`]: the
    /// main chain). A branch already joined, or of another capture, is
    /// [`Error::InvalidInput`].
    pub fn switch_to(&mut self, branch: Branch) -> Result<()> {
        self.branch_stream(branch)?;
        self.current = branch;
        Ok(())
    }

    /// Joins `branch` into the main chain: what the main chain records next
    /// starts after everything recorded on the branch (an event of the
    /// branch's stream the main one waits for). The main chain is current
    /// afterwards; the branch takes no more work.
    pub fn join(&mut self, branch: Branch) -> Result<()> {
        if branch == Branch::MAIN {
            return Err(Error::invalid(K, "join: the main chain is not a branch"));
        }
        let side = self.branch_stream(branch)?;
        if let (Some(main), Some(side)) = (&self.stream, side) {
            main.device_context()?
                .order(side.as_cust()?, main.as_cust()?, K)?;
        }
        self.branches[branch.0 - 1].open = false;
        self.current = Branch::MAIN;
        Ok(())
    }

    /// Joins every open branch (what `end` and the capture's drop do first:
    /// the driver ends a capture only with every stream joined).
    fn join_all(&mut self) -> Result<()> {
        let open: Vec<Branch> = (0..self.branches.len())
            .filter(|&i| self.branches[i].open)
            .map(|i| Branch(i + 1))
            .collect();
        open.into_iter().try_for_each(|b| self.join(b))
    }

    /// The stream of `branch` (`None` on the simulator), or
    /// [`Error::InvalidInput`] for a branch joined or unknown.
    fn branch_stream(&self, branch: Branch) -> Result<Option<&Stream>> {
        if branch == Branch::MAIN {
            return Ok(self.stream.as_ref());
        }
        match self.branches.get(branch.0 - 1) {
            Some(b) if b.open => Ok(b.stream.as_ref()),
            Some(_) => Err(Error::invalid(
                K,
                format!("{branch:?} was joined: it takes no more work"),
            )),
            None => Err(Error::invalid(
                K,
                format!("{branch:?} is not a branch of this capture"),
            )),
        }
    }

    /// The stream work goes to now (`None` on the simulator).
    fn current_stream(&self) -> Result<Option<&Stream>> {
        self.branch_stream(self.current)
    }

    /// Refuses a safe copy or memset (`what`) while a branch is open: it
    /// could run beside a branch's work over the same buffer.
    fn no_open_branch(&self, what: &str) -> Result<()> {
        if self.branches.iter().any(|b| b.open) {
            return Err(Error::invalid(
                K,
                format!("{what}: a branch is open; join every branch before copies and memsets"),
            ));
        }
        Ok(())
    }

    /// Ends the capture: the graph of what was recorded, or, when a call
    /// that cannot be captured was made on this thread during it,
    /// [`Error::NotCapturable`] naming the first one (the capture is then
    /// abandoned; the device and its streams stay usable).
    pub fn end(mut self) -> Result<Graph<'a>> {
        self.ended = true;
        let joined = self.join_all();
        let refused = stop_capturing();
        let raw = match (&self.stream, joined) {
            (None, _) => Ok(0),
            (Some(stream), Ok(())) => end_capture(stream),
            (Some(stream), Err(e)) => {
                if let Ok(raw) = end_capture(stream)
                    && raw != 0
                {
                    // SAFETY: a graph the driver just returned, used by nothing.
                    unsafe { cu::cuGraphDestroy(raw as cu::CUgraph) };
                }
                Err(e)
            }
        };
        let graph = Graph {
            id: self.pool.id,
            device: self.gpu.device_id(),
            context: self.gpu.context_handle().cloned(),
            raw: *raw.as_ref().unwrap_or(&0),
            ops: std::mem::take(&mut self.ops),
            pool: std::mem::replace(&mut self.pool, Pool::new(0)),
            _borrows: PhantomData,
        };
        // A refused call first: the driver's own failure may follow from it.
        match (refused, raw) {
            (Some(call), _) => Err(Error::NotCapturable { call }),
            (None, Err(e)) => Err(e),
            (None, Ok(_)) => Ok(graph),
        }
    }
}

/// Abandons a capture that was not ended: the thread's capture state is
/// cleared and the driver's capture ended and its graph destroyed.
impl Drop for Capture<'_> {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let _ = self.join_all();
        stop_capturing();
        if let Some(stream) = &self.stream
            && let Ok(raw) = end_capture(stream)
            && raw != 0
        {
            // SAFETY: a graph the driver just returned, used by nothing.
            unsafe { cu::cuGraphDestroy(raw as cu::CUgraph) };
        }
    }
}

/// A chain of work in a capture: the main one ([`Branch::MAIN`]) or one
/// forked from it ([`Capture::fork`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Branch(usize);

impl Branch {
    /// The main chain, where a capture begins.
    pub const MAIN: Branch = Branch(0);
}

/// A forked branch: its stream on a GPU, and whether it still takes work.
struct BranchState {
    stream: Option<Stream>,
    open: bool,
}

/// The node the last captured operation on `stream` added (the capture's
/// one dependency then: a stream's capture is a chain).
fn last_node(stream: cu::CUstream, kernel: &'static str) -> Result<cu::CUgraphNode> {
    let mut status = cu::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let mut id = 0u64;
    let mut graph = std::ptr::null_mut();
    let mut deps: *const cu::CUgraphNode = std::ptr::null();
    let mut count = 0usize;
    // SAFETY: every out-pointer is a live local; `stream` is a live stream.
    let r = unsafe {
        cu::cuStreamGetCaptureInfo_v2(
            stream,
            &mut status,
            &mut id,
            &mut graph,
            &mut deps,
            &mut count,
        )
    };
    check_driver(r, kernel, "cuStreamGetCaptureInfo")?;
    if status != cu::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE
        || count != 1
        || deps.is_null()
    {
        return Err(Error::invalid(
            kernel,
            format!(
                "the capture is not active after the launch (status {status:?}, {count} dependencies)"
            ),
        ));
    }
    // SAFETY: the driver returned `count` (1) nodes at `deps`, valid until
    // the next call on the stream.
    Ok(unsafe { *deps })
}

/// Ends the capture of `stream` and returns its graph (as an address; 0
/// when the driver returned none).
fn end_capture(stream: &Stream) -> Result<usize> {
    let raw = stream.as_cust()?.as_inner();
    stream.device_context()?.make_current()?;
    let mut graph = std::ptr::null_mut();
    // SAFETY: `raw` is the capturing stream; `graph` a live local.
    let r = unsafe { cu::cuStreamEndCapture(raw, &mut graph) };
    if r != cu::CUresult::CUDA_SUCCESS && !graph.is_null() {
        // SAFETY: a graph the driver returned, used by nothing.
        unsafe { cu::cuGraphDestroy(graph) };
    }
    check_driver(r, K, "cuStreamEndCapture")?;
    Ok(graph as usize)
}

/// A captured graph ([`Capture::end`]): its work, the buffers it holds,
/// and what it borrows for `'a` (the [`Gpu`] and the memory it reads).
/// Instantiate it to replay it ([`Graph::instantiate`]).
pub struct Graph<'a> {
    id: u64,
    device: DeviceId,
    context: Option<Arc<DeviceContext>>,
    /// The `CUgraph` (0 on the simulator).
    raw: usize,
    ops: Vec<Op>,
    pool: Pool,
    _borrows: PhantomData<&'a ()>,
}

impl fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Graph({} operations on {}: {})",
            self.ops.len(),
            self.device,
            self.ops.iter().map(Op::kind).collect::<Vec<_>>().join(", ")
        )
    }
}

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        if let Some(context) = &self.context
            && self.raw != 0
        {
            let _ = context.make_current();
            // SAFETY: the graph this value owns, destroyed once; executables
            // instantiated from it do not need it.
            unsafe { cu::cuGraphDestroy(self.raw as cu::CUgraph) };
        }
    }
}

impl<'a> Graph<'a> {
    /// The number of launches, copies and memsets.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the graph holds no work.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The device the graph runs on.
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// An executable of this graph (`cuGraphInstantiateWithFlags`), which
    /// owns the graph, to replay ([`GraphExec::launch`]).
    pub fn instantiate(self) -> Result<GraphExec<'a>> {
        let (exec, done) = match &self.context {
            None => (0, 0),
            Some(context) => {
                context.make_current()?;
                let exec = instantiate(self.raw)?;
                let mut event = std::ptr::null_mut();
                // SAFETY: `event` is a live local; the flag is documented.
                let r = unsafe {
                    cu::cuEventCreate(
                        &mut event,
                        cu::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32,
                    )
                };
                if let Err(e) = check_driver(r, K, "cuEventCreate") {
                    // SAFETY: the executable just made, used by nothing.
                    unsafe { cu::cuGraphExecDestroy(exec as cu::CUgraphExec) };
                    return Err(e);
                }
                (exec, event as usize)
            }
        };
        Ok(GraphExec {
            exec,
            done,
            graph: self,
            retired: Vec::new(),
        })
    }
}

/// `cuGraphInstantiateWithFlags` of `graph`, as an address.
fn instantiate(graph: usize) -> Result<usize> {
    let mut exec = std::ptr::null_mut();
    // SAFETY: `graph` is a live graph of the current context; `exec` a live
    // local; flags 0.
    let r = unsafe { cu::cuGraphInstantiateWithFlags(&mut exec, graph as cu::CUgraph, 0) };
    check_driver(r, K, "cuGraphInstantiateWithFlags")?;
    Ok(exec as usize)
}

/// An instantiated graph ([`Graph::instantiate`]): replayed as one
/// submission by [`GraphExec::launch`], as many times as asked. It owns its
/// graph (and the buffers it holds) and borrows what the graph borrows.
/// Dropping it waits for its last replay.
pub struct GraphExec<'a> {
    /// The `CUgraphExec` (0 on the simulator).
    exec: usize,
    /// An event recorded after each replay (`CUevent`, 0 on the simulator).
    done: usize,
    graph: Graph<'a>,
    /// Graphs replaced by [`GraphExec::update`]: their buffers and nodes may
    /// still be in use by replays in flight.
    retired: Vec<Graph<'a>>,
}

impl fmt::Debug for GraphExec<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GraphExec of {:?}", self.graph)
    }
}

/// Waits for the last replay, then destroys the event and the executable;
/// the graph (and its buffers) drop after.
impl Drop for GraphExec<'_> {
    fn drop(&mut self) {
        if let Some(context) = &self.graph.context {
            let _ = context.make_current();
            // SAFETY: the event and executable this value owns, each
            // destroyed once, after the last replay (the driver frees an
            // executable still running when it completes).
            unsafe {
                if self.done != 0 {
                    cu::cuEventSynchronize(self.done as cu::CUevent);
                    cu::cuEventDestroy_v2(self.done as cu::CUevent);
                }
                if self.exec != 0 {
                    cu::cuGraphExecDestroy(self.exec as cu::CUgraphExec);
                }
            }
        }
    }
}

impl<'a> GraphExec<'a> {
    /// The device the graph runs on.
    pub fn device(&self) -> DeviceId {
        self.graph.device
    }

    /// The graph it runs (the latest given to [`GraphExec::update`]).
    pub fn graph(&self) -> &Graph<'a> {
        &self.graph
    }

    /// Replays the graph on `stream` (`cuGraphLaunch`), ordered as every
    /// launch is (see the [module docs](self#ordering)): at once on the
    /// simulator, every launch, copy and memset in order through the
    /// simulator's checks (a fault or a race is the error, naming the
    /// kernel). A stream of another device is [`Error::WrongDevice`].
    pub fn launch(&mut self, stream: &Stream) -> Result<()> {
        refuse_in_capture("GraphExec::launch (a replay during a capture)")?;
        if stream.device() != self.graph.device {
            return Err(Error::WrongDevice {
                kernel: K,
                argument: "stream",
                expected: self.graph.device,
                found: stream.device(),
            });
        }
        let Some(context) = &self.graph.context else {
            return self.replay_simulated();
        };
        context.make_current()?;
        stream.wait_for_ordering(K)?;
        let raw = stream.as_cust()?.as_inner();
        // SAFETY: the executable this value owns and a live stream of its
        // context (checked: the same device, hence the same context); what
        // its nodes touch is alive for `'a` or held (module docs).
        let r = unsafe { cu::cuGraphLaunch(self.exec as cu::CUgraphExec, raw) };
        check_driver(r, K, "cuGraphLaunch")?;
        // SAFETY: this value's event, on the same stream.
        let r = unsafe { cu::cuEventRecord(self.done as cu::CUevent, raw) };
        check_driver(r, K, "cuEventRecord")?;
        stream.join_ordering(K)
    }

    /// The simulator's replay: each op in order.
    fn replay_simulated(&mut self) -> Result<()> {
        let (DeviceId::Simulator { ordinal } | DeviceId::Cuda { ordinal, .. }) = self.graph.device;
        for op in &mut self.graph.ops {
            match op {
                Op::Kernel(k) => {
                    let entry = k.entry.ok_or(Error::NoSimEntry { kernel: k.name })?;
                    let params = k.params.pointers();
                    // SAFETY: `entry` is the kernel's host entry and `params`
                    // its parameter values, of its types, in order (stored at
                    // capture from KernelArgs of the handle's `P`); the memory
                    // they name is held by the graph or borrowed for `'a`, and
                    // the rest of the kernel's contract was promised at
                    // capture (Capture::launch, GraphExec::set_args).
                    unsafe {
                        simulator::launch(k.name, ordinal, k.cfg, k.shared_opt_in, entry, &params)
                    }?;
                }
                Op::Copy { dst, src, bytes } => {
                    // SAFETY: two simulator buffers of the graph's pool
                    // (checked at capture), alive as long as it, of at least
                    // `bytes`; `copy` allows overlap.
                    unsafe {
                        std::ptr::copy(*src as usize as *const u8, *dst as usize as *mut u8, *bytes)
                    }
                }
                Op::Zero { dst, bytes } => {
                    // SAFETY: a simulator buffer of the graph's pool, of
                    // at least `bytes`.
                    unsafe { std::ptr::write_bytes(*dst as usize as *mut u8, 0, *bytes) }
                }
            }
        }
        Ok(())
    }

    /// Waits for the last replay (nothing to wait for on the simulator).
    pub fn synchronize(&self) -> Result<()> {
        refuse_in_capture("GraphExec::synchronize")?;
        if self.done == 0 {
            return Ok(());
        }
        if let Some(context) = &self.graph.context {
            context.make_current()?;
        }
        // SAFETY: this value's live event.
        let r = unsafe { cu::cuEventSynchronize(self.done as cu::CUevent) };
        check_driver(r, K, "cuEventSynchronize")
    }

    /// Every pool of buffers this executable holds (its graph's and those
    /// of the graphs it replaced).
    fn pools(&self) -> impl Iterator<Item = &Pool> {
        std::iter::once(&self.graph.pool).chain(self.retired.iter().map(|g| &g.pool))
    }

    /// The buffer `held`, for reading on the host (`to_vec`, `copy_to`) or
    /// as a launch argument: ordered after every replay queued so far (a
    /// copy waits for the ordering stream, which waits for every replay).
    /// A handle this executable does not hold is [`Error::InvalidInput`].
    pub fn buffer<T: DeviceCopy + 'static>(&self, held: Held<T>) -> Result<&DeviceSlice<T>> {
        self.pools()
            .find_map(|p| p.get(held))
            .map(|b| &**b)
            .ok_or_else(|| not_held(held.pool))
    }

    /// The buffer `held`, for writing on the host (`copy_from`, `set_zero`)
    /// between replays: as [`GraphExec::buffer`].
    pub fn buffer_mut<T: DeviceCopy + 'static>(
        &mut self,
        held: Held<T>,
    ) -> Result<&mut DeviceSlice<T>> {
        let pool = held.pool;
        std::iter::once(&mut self.graph.pool)
            .chain(self.retired.iter_mut().map(|g| &mut g.pool))
            .find_map(|p| p.get_mut(held))
            .map(|b| &mut **b)
            .ok_or_else(|| not_held(pool))
    }

    /// Moves `buf` into the executable, which holds it as long as it lives:
    /// a new buffer for [`GraphExec::set_args`] (of the same shape as the
    /// one it replaces).
    pub fn hold<T: DeviceCopy + Send + Sync + 'static>(
        &mut self,
        buf: DeviceBuffer<T>,
    ) -> Result<Held<T>> {
        let device = self.graph.device;
        self.graph.pool.hold(device, buf)
    }

    /// Gives the launch `node` new arguments for the later replays: buffers
    /// of the same lengths as those captured (held by this executable, or
    /// borrowed for `'a`), new scalars. In place where the driver takes it
    /// (`cuGraphExecKernelNodeSetParams`, [`Update::InPlace`]); otherwise
    /// the graph is instantiated again with them
    /// ([`Update::Reinstantiated`], saying why). Replays already queued
    /// keep their arguments. A node of another graph, a buffer of another
    /// length or another device, or another graph's held buffer is refused
    /// before anything changes.
    ///
    /// # Safety
    /// The contract of [`Capture::launch`] for the new arguments.
    pub unsafe fn set_args<P: ParamTuple, A: KernelArgs<P> + 'a>(
        &mut self,
        node: KernelNode<P>,
        args: A,
    ) -> Result<Update> {
        refuse_in_capture("GraphExec::set_args (an update during a capture)")?;
        let device = self.graph.device;
        let pools: Vec<u64> = self.pools().map(|p| p.id).collect();
        let Some(Op::Kernel(op)) = (node.graph == self.graph.id)
            .then(|| self.graph.ops.get_mut(node.index))
            .flatten()
        else {
            return Err(Error::invalid(
                K,
                format!(
                    "set_args: node {} of graph {} is not a launch of this executable's graph ({})",
                    node.index, node.graph, self.graph.id
                ),
            ));
        };
        let name = op.name;
        if let Some((argument, found)) = args.foreign_argument(device) {
            return Err(Error::WrongDevice {
                kernel: name,
                argument,
                expected: device,
                found,
            });
        }
        for (i, pool) in args.holders().into_iter().enumerate() {
            if let Some(p) = pool.filter(|p| !pools.contains(p)) {
                return Err(Error::invalid(
                    name,
                    format!("set_args: argument {i} is a buffer held by another graph (graph {p})"),
                ));
            }
        }
        let extents = args.extents();
        for (i, (was, now)) in op.extents.iter().zip(&extents).enumerate() {
            if let (Some(was), Some(now)) = (was, now)
                && was != now
            {
                return Err(Error::invalid(
                    name,
                    format!(
                        "set_args: argument {i} holds {now} elements; the graph was captured \
                         with {was}: a buffer of the same shape is needed"
                    ),
                ));
            }
        }
        // SAFETY: as in Capture::launch.
        let mut values = args.with_params(|params| unsafe { P::read(params) });
        let mut how = Update::InPlace;
        if let Some(context) = &self.graph.context {
            context.make_current()?;
            let mut params = values.pointers();
            let LaunchConfig {
                grid: (gx, gy, gz),
                block: (bx, by, bz),
                shared_mem_bytes,
            } = op.cfg;
            let p = cu::CUDA_KERNEL_NODE_PARAMS {
                func: op.function as cu::CUfunction,
                gridDimX: gx,
                gridDimY: gy,
                gridDimZ: gz,
                blockDimX: bx,
                blockDimY: by,
                blockDimZ: bz,
                sharedMemBytes: shared_mem_bytes,
                kernelParams: params.as_mut_ptr(),
                extra: std::ptr::null_mut(),
            };
            // SAFETY: `node` is a kernel node of this executable's graph,
            // `p` names its function and shape with `params` pointing at one
            // value per parameter, alive for the calls (the driver copies
            // them); the pointers' validity is the caller's contract.
            let graph_set =
                unsafe { cu::cuGraphKernelNodeSetParams(op.node as cu::CUgraphNode, &p) };
            check_driver(graph_set, name, "cuGraphKernelNodeSetParams")?;
            // SAFETY: as above, on the executable this value owns.
            let exec_set = unsafe {
                cu::cuGraphExecKernelNodeSetParams(
                    self.exec as cu::CUgraphExec,
                    op.node as cu::CUgraphNode,
                    &p,
                )
            };
            if exec_set != cu::CUresult::CUDA_SUCCESS {
                let fresh = instantiate(self.graph.raw)?;
                // SAFETY: the old executable, replaced; the driver frees it
                // once replays in flight are done.
                unsafe { cu::cuGraphExecDestroy(self.exec as cu::CUgraphExec) };
                self.exec = fresh;
                how = Update::Reinstantiated {
                    reason: format!(
                        "cuGraphExecKernelNodeSetParams refused it: {}",
                        crate::error::cuda_error(exec_set)
                    ),
                };
            }
        }
        op.params = Box::new(Stored(values));
        op.extents = extents;
        Ok(how)
    }

    /// Replaces the graph this executable runs with `graph` (a capture of
    /// the same work over other buffers or with other scalars): in place
    /// where the driver takes it (`cuGraphExecUpdate`, [`Update::InPlace`];
    /// on the simulator, the same launches, copies and memsets in the same
    /// order), else instantiated again ([`Update::Reinstantiated`], saying
    /// what the driver refused). The replaced graph's buffers stay held
    /// (replays in flight may use them): read them with
    /// [`GraphExec::buffer`] as before. A graph of another device is
    /// [`Error::WrongDevice`].
    pub fn update(&mut self, graph: Graph<'a>) -> Result<Update> {
        refuse_in_capture("GraphExec::update (an update during a capture)")?;
        if graph.device != self.graph.device {
            return Err(Error::WrongDevice {
                kernel: K,
                argument: "the new graph",
                expected: self.graph.device,
                found: graph.device,
            });
        }
        let how = match &self.graph.context {
            None => {
                let same = graph.ops.len() == self.graph.ops.len()
                    && graph
                        .ops
                        .iter()
                        .zip(&self.graph.ops)
                        .all(|(a, b)| a.kind() == b.kind());
                if same {
                    Update::InPlace
                } else {
                    Update::Reinstantiated {
                        reason: format!(
                            "the topology changed: {:?} for {:?}",
                            graph.ops.iter().map(Op::kind).collect::<Vec<_>>(),
                            self.graph.ops.iter().map(Op::kind).collect::<Vec<_>>()
                        ),
                    }
                }
            }
            Some(context) => {
                context.make_current()?;
                let mut error_node = std::ptr::null_mut();
                let mut result = cu::CUgraphExecUpdateResult::CU_GRAPH_EXEC_UPDATE_SUCCESS;
                // SAFETY: this value's executable and a live graph of the
                // same context; the out-pointers are live locals.
                let r = unsafe {
                    cu::cuGraphExecUpdate(
                        self.exec as cu::CUgraphExec,
                        graph.raw as cu::CUgraph,
                        &mut error_node,
                        &mut result,
                    )
                };
                if r == cu::CUresult::CUDA_SUCCESS {
                    Update::InPlace
                } else {
                    let fresh = instantiate(graph.raw)?;
                    // SAFETY: the old executable, replaced; the driver frees
                    // it once replays in flight are done.
                    unsafe { cu::cuGraphExecDestroy(self.exec as cu::CUgraphExec) };
                    self.exec = fresh;
                    Update::Reinstantiated {
                        reason: format!(
                            "cuGraphExecUpdate refused it: {} ({result:?})",
                            crate::error::cuda_error(r)
                        ),
                    }
                }
            }
        };
        let old = std::mem::replace(&mut self.graph, graph);
        self.retired.push(old);
        Ok(how)
    }
}

/// The error for a held buffer of another graph.
fn not_held(pool: u64) -> Error {
    Error::invalid(
        K,
        format!("this executable does not hold that buffer (it belongs to graph {pool})"),
    )
}
