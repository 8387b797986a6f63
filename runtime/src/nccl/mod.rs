//! Collectives between devices and processes: NCCL, loaded at run time
//! (`libnccl.so.2`, by `dlopen`, as cuBLAS is: no build-time dependency),
//! on this crate's device buffers and streams; and the same collectives
//! between simulated devices of one process, with the same semantics, so
//! that code written against a [`Communicator`] runs `[sim]` in CI.
//!
//! - A communicator for every device of one process:
//!   [`Communicator::all_devices`] (`ncclCommInitAll`); for one rank of a
//!   job of many processes: [`Communicator::init_rank`]
//!   (`ncclCommInitRankConfig` on a nonblocking communicator, after
//!   [`UniqueId::new`] on one rank, the id passed on by a file, an
//!   environment variable or a loopback TCP connection: [`id`]).
//! - Typed collectives ([`NcclElement`]: `i8`, `u8`, `i32`, `u32`, `i64`,
//!   `u64`, `f32`, `f64` and the device crate's `f16`, `bf16`), queued on a
//!   [`Stream`]: [`Communicator::all_reduce`] (sum, product, min, max),
//!   [`Communicator::broadcast`], [`Communicator::reduce`],
//!   [`Communicator::all_gather`], [`Communicator::reduce_scatter`],
//!   [`Communicator::send`], [`Communicator::recv`], and several at once in
//!   a [`Group`] (`ncclGroupStart`/`ncclGroupEnd`). Lengths, roots, peers,
//!   devices and streams are checked before NCCL sees a pointer.
//! - Deadlines: [`Communicator::synchronize`] waits for a stream's
//!   collectives polling `ncclCommGetAsyncError`; past the communicator's
//!   [`timeout`](Communicator::set_timeout) it calls `ncclCommAbort` and
//!   returns [`Error::CollectiveTimeout`]; any later use is
//!   [`Error::CommunicatorAborted`].
//!
//! On the simulator a collective runs when it is called (as every simulated
//! launch does): each rank posts its part, waits (up to the deadline) for
//! the others' and computes its own result from all of them, folding in
//! rank order. Ranks are threads of one process (a clique joined by
//! [`UniqueId::simulated`], or [`Communicator::all_devices`]), or processes
//! joined through a [`SimHub`] the launcher serves on loopback. Calls that
//! do not match across ranks (another collective, element type, length,
//! root or operation) are an [`Error::InvalidInput`] on every rank there
//! (NCCL itself cannot see them: it hangs until the deadline), and a rank
//! that aborts, drops its communicator or whose process ends makes the ranks
//! waiting for it fail at once.
//!
//! ```
//! # fn main() -> cuda_kernels_runtime::Result<()> {
//! use cuda_kernels_runtime::Gpu;
//! use cuda_kernels_runtime::nccl::{Communicator, ReduceOp};
//! let gpus: Vec<Gpu> = (0..3).map(|i| Gpu::simulated_device_of_crate(i, "kernels")).collect();
//! let comms = Communicator::all_devices(&gpus.iter().collect::<Vec<_>>())?;
//! let sums = std::thread::scope(|s| {
//!     let handles: Vec<_> = comms.into_iter().zip(&gpus).map(|(comm, gpu)| s.spawn(move || {
//!         let mut x = gpu.to_device(&[comm.rank() as i32 + 1; 4])?;
//!         comm.all_reduce_in_place(&mut x, ReduceOp::Sum, gpu.stream())?;
//!         comm.synchronize(gpu.stream())?;
//!         x.to_vec()
//!     })).collect();
//!     handles.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
//! });
//! for sum in sums {
//!     assert_eq!(sum?, [6; 4]); // 1 + 2 + 3
//! }
//! # Ok(()) }
//! ```
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cust::memory::DeviceCopy;
use cust::memory::bytemuck::Pod;

use crate::Gpu;
use crate::error::{Error, Result};
use crate::memory::{DeviceContext, DeviceId, DeviceSlice, Stream};

mod ffi;
mod hub;
pub mod id;
mod sim;

pub use ffi::{LIBRARY, LIBRARY_ENV, UNIQUE_ID_BYTES, candidates, result_name};
pub use hub::SimHub;
pub use id::UniqueId;

use ffi::{IN_PROGRESS, Nccl, RawComm, RawConfig, SUCCESS};

/// The name errors of this module carry.
const K: &str = "nccl";

/// The environment variable that sets the default deadline of a
/// communicator's waits, in milliseconds ([`DEFAULT_TIMEOUT`] when unset).
pub const TIMEOUT_ENV: &str = "CUDA_KERNELS_NCCL_TIMEOUT_MS";

/// The deadline of a communicator's waits when [`TIMEOUT_ENV`] is unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// The deadline [`TIMEOUT_ENV`] sets, else [`DEFAULT_TIMEOUT`].
pub fn default_timeout() -> Duration {
    std::env::var(TIMEOUT_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_millis)
}

/// Whether NCCL can be loaded in this process (the library opens and has
/// every function this module calls), and which: `Ok("2.28.3 from
/// libnccl.so.2")`, or [`Error::LibraryMissing`] naming the library.
pub fn library() -> Result<String> {
    let nccl = Nccl::get()?;
    Ok(format!(
        "{} from {}",
        nccl.version_string(),
        nccl.path.display()
    ))
}

/// `ncclDataType_t`: the element types NCCL reduces and moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum DataType {
    /// `ncclInt8`.
    I8 = 0,
    /// `ncclUint8`.
    U8 = 1,
    /// `ncclInt32`.
    I32 = 2,
    /// `ncclUint32`.
    U32 = 3,
    /// `ncclInt64`.
    I64 = 4,
    /// `ncclUint64`.
    U64 = 5,
    /// `ncclFloat16`.
    F16 = 6,
    /// `ncclFloat32`.
    F32 = 7,
    /// `ncclFloat64`.
    F64 = 8,
    /// `ncclBfloat16`.
    Bf16 = 9,
}

impl DataType {
    /// Every type, in `ncclDataType_t` order.
    const ALL: [DataType; 10] = [
        DataType::I8,
        DataType::U8,
        DataType::I32,
        DataType::U32,
        DataType::I64,
        DataType::U64,
        DataType::F16,
        DataType::F32,
        DataType::F64,
        DataType::Bf16,
    ];

    /// The type of an `ncclDataType_t` value.
    pub fn from_raw(raw: i32) -> Option<DataType> {
        Self::ALL.into_iter().find(|t| *t as i32 == raw)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DataType::I8 | DataType::U8 => 1,
            DataType::F16 | DataType::Bf16 => 2,
            DataType::I32 | DataType::U32 | DataType::F32 => 4,
            DataType::I64 | DataType::U64 | DataType::F64 => 8,
        }
    }

    /// The simulator's fold of this type: `acc[i] = acc[i] op x[i]` over
    /// the bytes of whole elements.
    pub(crate) fn fold(self) -> fn(ReduceOp, &mut [u8], &[u8]) {
        use cuda_kernels_device::float16::{bf16, f16};
        match self {
            DataType::I8 => fold_bytes::<i8>,
            DataType::U8 => fold_bytes::<u8>,
            DataType::I32 => fold_bytes::<i32>,
            DataType::U32 => fold_bytes::<u32>,
            DataType::I64 => fold_bytes::<i64>,
            DataType::U64 => fold_bytes::<u64>,
            DataType::F16 => fold_bytes::<f16>,
            DataType::F32 => fold_bytes::<f32>,
            DataType::F64 => fold_bytes::<f64>,
            DataType::Bf16 => fold_bytes::<bf16>,
        }
    }
}

/// `ncclRedOp_t`: how a reduction combines the ranks' elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ReduceOp {
    /// `ncclSum`.
    Sum = 0,
    /// `ncclProd`.
    Prod = 1,
    /// `ncclMax`.
    Max = 2,
    /// `ncclMin`.
    Min = 3,
}

mod sealed {
    pub trait Sealed {}
}

/// An element type of the collectives: its `ncclDataType_t`, and how two
/// elements combine (what the simulator folds with; NCCL does the same on
/// the device). Sealed: NCCL's types only.
pub trait NcclElement: DeviceCopy + Pod + Send + Sync + 'static + sealed::Sealed {
    /// The `ncclDataType_t`.
    const DATA_TYPE: DataType;
    /// `a op b`.
    fn combine(op: ReduceOp, a: Self, b: Self) -> Self;
}

macro_rules! integer_element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl NcclElement for $t {
            const DATA_TYPE: DataType = DataType::$d;
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Min => a.min(b),
                }
            }
        }
    )*};
}
integer_element!(i8 => I8, u8 => U8, i32 => I32, u32 => U32, i64 => I64, u64 => U64);

macro_rules! float_element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl NcclElement for $t {
            const DATA_TYPE: DataType = DataType::$d;
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum => a + b,
                    ReduceOp::Prod => a * b,
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Min => a.min(b),
                }
            }
        }
    )*};
}
float_element!(f32 => F32, f64 => F64);

macro_rules! half_element {
    ($($t:ident => $d:ident),*) => {$(
        impl sealed::Sealed for cuda_kernels_device::float16::$t {}
        /// Combined as NCCL does: in f32, rounded to the 16-bit type.
        impl NcclElement for cuda_kernels_device::float16::$t {
            const DATA_TYPE: DataType = DataType::$d;
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                Self::narrow(f32::combine(op, a.widen(), b.widen()))
            }
        }
    )*};
}
half_element!(f16 => F16, bf16 => Bf16);

/// What one queued operation does, with its checked arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    AllReduce(ReduceOp),
    Broadcast { root: usize },
    Reduce { op: ReduceOp, root: usize },
    AllGather,
    ReduceScatter(ReduceOp),
    Send { peer: usize },
    Recv { peer: usize },
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::AllReduce(_) => "all_reduce",
            Kind::Broadcast { .. } => "broadcast",
            Kind::Reduce { .. } => "reduce",
            Kind::AllGather => "all_gather",
            Kind::ReduceScatter(_) => "reduce_scatter",
            Kind::Send { .. } => "send",
            Kind::Recv { .. } => "recv",
        }
    }
}

/// One operation of a [`Group`], type-erased once checked: the buffers'
/// addresses and lengths (elements) and the element type.
#[derive(Clone, Copy)]
pub(crate) struct Call {
    pub kind: Kind,
    pub data_type: DataType,
    pub send: u64,
    pub send_len: usize,
    pub recv: u64,
    pub recv_len: usize,
    pub stream: ffi::RawStream,
}

/// Folds `x` into `acc` element by element (`acc[i] = acc[i] op x[i]`).
fn fold_bytes<T: NcclElement>(op: ReduceOp, acc: &mut [u8], x: &[u8]) {
    let size = size_of::<T>();
    for (a, b) in acc.chunks_exact_mut(size).zip(x.chunks_exact(size)) {
        let r = T::combine(
            op,
            cust::memory::bytemuck::pod_read_unaligned(a),
            cust::memory::bytemuck::pod_read_unaligned(b),
        );
        a.copy_from_slice(cust::memory::bytemuck::bytes_of(&r));
    }
}

/// A communicator's backend.
enum Backend {
    /// An NCCL communicator (`ncclComm_t`).
    Nccl { lib: Arc<Nccl>, raw: RawComm },
    /// A rank of a simulated clique.
    Sim(sim::Member),
}

/// One rank of a group of devices that run collectives together: an NCCL
/// communicator on a CUDA device, or a rank of simulated devices. Made by
/// [`Communicator::all_devices`] or [`Communicator::init_rank`]. `Send`
/// (one thread per rank), not `Sync`: NCCL allows one thread at a time on a
/// communicator. Dropping it finalizes and destroys it (aborts it, if it
/// failed).
pub struct Communicator {
    rank: usize,
    ranks: usize,
    device: DeviceId,
    timeout: Duration,
    /// Why the communicator was aborted (`None`: usable).
    aborted: Mutex<Option<String>>,
    backend: Backend,
    /// Whether NCCL work was queued since the last successful
    /// [`Communicator::synchronize`]: dropped then, the communicator is
    /// aborted (finalizing it would wait for that work, which may wait for
    /// a peer that is gone). Also what makes the type not `Sync`.
    unsettled: std::cell::Cell<bool>,
    /// The device's context, held until the communicator is destroyed (the
    /// fields drop after `Drop::drop`); `None` on the simulator.
    context: Option<Arc<DeviceContext>>,
}

// SAFETY: the raw communicator is only used by the thread that holds the
// Communicator (it is not Sync), and NCCL allows a communicator to be used
// from any thread, one at a time.
unsafe impl Send for Communicator {}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Communicator(rank {} of {} on {}, {})",
            self.rank,
            self.ranks,
            self.device,
            if self.is_simulated() {
                "simulated"
            } else {
                "NCCL"
            }
        )
    }
}

/// Refuses an empty list and a device listed twice (NCCL refuses two ranks
/// on one device; the simulator too, so that both behave alike).
fn check_distinct(gpus: &[&Gpu]) -> Result<()> {
    if gpus.is_empty() {
        return Err(Error::invalid(
            K,
            "an empty device list: give at least one device",
        ));
    }
    for (i, a) in gpus.iter().enumerate() {
        if let Some(j) = gpus[..i].iter().position(|b| b.same_device(a)) {
            return Err(Error::invalid(
                K,
                format!(
                    "{} is listed as rank {j} and rank {i}: a communicator needs one device \
                     per rank (NCCL refuses two ranks on one GPU)",
                    a.label()
                ),
            ));
        }
    }
    Ok(())
}

impl Communicator {
    /// One communicator per device of `gpus`, rank `i` on `gpus[i]`, in one
    /// process (`ncclCommInitAll` on CUDA devices; a simulated clique on
    /// simulated ones). Use each on its own thread (or several in one
    /// [`Group`]).
    ///
    /// Errors: an empty list, a device listed twice, simulated and CUDA
    /// devices mixed, more devices than the machine has, NCCL missing
    /// ([`Error::LibraryMissing`]) or failing ([`Error::Nccl`]).
    pub fn all_devices(gpus: &[&Gpu]) -> Result<Vec<Communicator>> {
        check_distinct(gpus)?;
        let simulated = gpus[0].is_simulated();
        if gpus.iter().any(|g| g.is_simulated() != simulated) {
            return Err(Error::invalid(
                K,
                "simulated and CUDA devices mixed: a communicator's devices are all of one kind",
            ));
        }
        let ranks = gpus.len();
        let timeout = default_timeout();
        if simulated {
            let clique = sim::Clique::new(ranks);
            return Ok(gpus
                .iter()
                .enumerate()
                .map(|(rank, gpu)| {
                    Self::new(
                        rank,
                        ranks,
                        gpu,
                        timeout,
                        Backend::Sim(sim::Member::Local(clique.rank(rank))),
                    )
                })
                .collect());
        }
        let count = crate::devices::device_count() as usize;
        if ranks > count {
            return Err(Error::invalid(
                K,
                format!("{ranks} ranks but the machine has {count} CUDA devices"),
            ));
        }
        let lib = Nccl::get()?;
        let ordinals: Vec<i32> = gpus.iter().map(|g| g.ordinal() as i32).collect();
        let mut raw = vec![std::ptr::null_mut(); ranks];
        gpus[0].bind()?;
        // SAFETY: `raw` has room for `ranks` communicators and `ordinals`
        // holds `ranks` distinct, existing device ordinals (checked above).
        let r = unsafe { (lib.comm_init_all)(raw.as_mut_ptr(), ranks as i32, ordinals.as_ptr()) };
        lib.check("ncclCommInitAll", r, std::ptr::null_mut())?;
        if raw.iter().any(|c| c.is_null()) {
            return Err(Error::invalid(
                K,
                "ncclCommInitAll succeeded but gave no communicator for a device",
            ));
        }
        let comms: Vec<Communicator> = raw
            .into_iter()
            .zip(gpus)
            .enumerate()
            .map(|(rank, (raw, gpu))| {
                Self::new(
                    rank,
                    ranks,
                    gpu,
                    timeout,
                    Backend::Nccl {
                        lib: lib.clone(),
                        raw,
                    },
                )
            })
            .collect();
        for c in &comms {
            c.check_identity()?;
        }
        Ok(comms)
    }

    /// Rank `rank` of a job of `ranks` ranks (a process each, or threads),
    /// on `gpu`, joining the others through `id` (made by one rank with
    /// [`UniqueId::new`] and passed on to all: [`id`]). On a CUDA device a
    /// nonblocking NCCL communicator (`ncclCommInitRankConfig`, polled until
    /// it is ready); on the simulator a rank of the simulated clique of that
    /// id in this process. Waits for every rank to join, up to `timeout`
    /// ([`Error::CollectiveTimeout`] after it, the communicator aborted).
    ///
    /// Errors before anything is set up: `rank` outside `0..ranks`, no
    /// ranks, an id of the other backend's kind.
    pub fn init_rank(
        gpu: &Gpu,
        id: &UniqueId,
        rank: usize,
        ranks: usize,
        timeout: Duration,
    ) -> Result<Communicator> {
        if ranks == 0 || rank >= ranks {
            return Err(Error::invalid(
                K,
                format!("rank {rank} of {ranks}: a rank must be in 0..{ranks}"),
            ));
        }
        if ranks > i32::MAX as usize {
            return Err(Error::invalid(K, format!("{ranks} ranks: too many")));
        }
        if id.is_simulated() != gpu.is_simulated() {
            return Err(Error::invalid(
                K,
                format!(
                    "a {} unique id given to {}: make the id on the kind of device that uses it",
                    if id.is_simulated() {
                        "simulator's"
                    } else {
                        "NCCL"
                    },
                    gpu.label()
                ),
            ));
        }
        if gpu.is_simulated() {
            let member = match id.hub_port() {
                Some(port) => sim::Member::Remote(hub::Client::join(
                    std::net::SocketAddr::from(([127, 0, 0, 1], port)),
                    rank,
                    ranks,
                    timeout,
                )?),
                None => sim::Member::Local(sim::Clique::join(id, rank, ranks, timeout)?),
            };
            return Ok(Self::new(rank, ranks, gpu, timeout, Backend::Sim(member)));
        }
        let lib = Nccl::get()?;
        gpu.bind()?;
        let mut raw: RawComm = std::ptr::null_mut();
        let mut config = RawConfig::with_blocking(false);
        // SAFETY: `raw` is a place for the new communicator, `config` a
        // live ncclConfig_t of 2.28's layout (checked by a test), the id is
        // 128 bytes passed by value; the device's context is current.
        let r = unsafe {
            (lib.comm_init_rank_config)(&mut raw, ranks as i32, id.raw(), rank as i32, &mut config)
        };
        if r != SUCCESS && r != IN_PROGRESS {
            let e = lib.error("ncclCommInitRankConfig", r, raw);
            if !raw.is_null() {
                // SAFETY: a communicator NCCL gave us, aborted once.
                unsafe { (lib.comm_abort)(raw) };
            }
            return Err(e);
        }
        if raw.is_null() {
            return Err(Error::invalid(
                K,
                "ncclCommInitRankConfig succeeded but gave no communicator",
            ));
        }
        let comm = Self::new(rank, ranks, gpu, timeout, Backend::Nccl { lib, raw });
        comm.settle("ncclCommInitRankConfig", Instant::now())?;
        comm.check_identity()?;
        Ok(comm)
    }

    fn new(rank: usize, ranks: usize, gpu: &Gpu, timeout: Duration, backend: Backend) -> Self {
        Self {
            rank,
            ranks,
            device: gpu.device_id(),
            timeout,
            aborted: Mutex::new(None),
            backend,
            unsettled: std::cell::Cell::new(false),
            context: gpu.context_handle().cloned(),
        }
    }

    /// Checks that NCCL's communicator has this rank and rank count
    /// (`ncclCommUserRank`, `ncclCommCount`).
    fn check_identity(&self) -> Result<()> {
        let Backend::Nccl { lib, raw } = &self.backend else {
            return Ok(());
        };
        let (mut rank, mut count) = (-1, -1);
        // SAFETY: a live, initialized communicator and places for the ints.
        unsafe {
            lib.check(
                "ncclCommUserRank",
                (lib.comm_user_rank)(*raw, &mut rank),
                *raw,
            )?;
            lib.check("ncclCommCount", (lib.comm_count)(*raw, &mut count), *raw)?;
        }
        if (rank as usize, count as usize) != (self.rank, self.ranks) {
            return Err(Error::invalid(
                K,
                format!(
                    "NCCL made rank {rank} of {count} where rank {} of {} was asked for",
                    self.rank, self.ranks
                ),
            ));
        }
        Ok(())
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// The device this rank runs on.
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// Whether this is a simulated communicator.
    pub fn is_simulated(&self) -> bool {
        matches!(self.backend, Backend::Sim(_))
    }

    /// The deadline of this communicator's waits.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sets the deadline of this communicator's waits
    /// ([`Communicator::synchronize`]; on the simulator, every collective).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Why the communicator was aborted, if it was.
    pub fn aborted(&self) -> Option<String> {
        self.aborted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Refuses any use after an abort.
    fn check_usable(&self, operation: &'static str) -> Result<()> {
        match self.aborted() {
            None => Ok(()),
            Some(why) => Err(Error::CommunicatorAborted {
                operation,
                rank: self.rank,
                reason: format!("the communicator was aborted ({why}) and cannot be used again"),
            }),
        }
    }

    /// Aborts the communicator (`ncclCommAbort`): its queued collectives
    /// stop, and every later use is [`Error::CommunicatorAborted`]. On the
    /// simulator, ranks waiting for this one fail at once.
    pub fn abort(&self, why: &str) {
        let mut aborted = self.aborted.lock().unwrap_or_else(|e| e.into_inner());
        if aborted.is_some() {
            return;
        }
        *aborted = Some(why.to_string());
        match &self.backend {
            Backend::Nccl { lib, raw } => {
                // SAFETY: a live communicator, aborted once (the flag
                // above); it is destroyed by the abort.
                unsafe { (lib.comm_abort)(*raw) };
            }
            Backend::Sim(r) => r.abort(why),
        }
    }

    /// On a nonblocking NCCL communicator, waits while `ncclCommGetAsyncError`
    /// says `ncclInProgress` (after `call`, started at `since`); an error
    /// aborts; the deadline aborts and is [`Error::CollectiveTimeout`].
    fn settle(&self, call: &'static str, since: Instant) -> Result<()> {
        let Backend::Nccl { lib, raw } = &self.backend else {
            return Ok(());
        };
        self.check_usable(call)?;
        loop {
            let mut state = SUCCESS;
            // SAFETY: a live communicator and a place for its state.
            let r = unsafe { (lib.comm_get_async_error)(*raw, &mut state) };
            let r = if r == SUCCESS { state } else { r };
            match r {
                SUCCESS => return Ok(()),
                IN_PROGRESS => {}
                code => {
                    let e = lib.error(call, code, *raw);
                    self.abort(&e.to_string());
                    return Err(e);
                }
            }
            if since.elapsed() > self.timeout {
                return Err(self.time_out(call, since));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Aborts on a passed deadline: the [`Error::CollectiveTimeout`].
    fn time_out(&self, operation: &'static str, since: Instant) -> Error {
        let waited = since.elapsed();
        self.abort(&format!(
            "{operation}: deadline of {:?} passed",
            self.timeout
        ));
        Error::CollectiveTimeout {
            operation,
            rank: self.rank,
            ranks: self.ranks,
            waited,
        }
    }

    /// Waits until the collectives queued on `stream` have finished (the
    /// stream is idle; give the stream of every queued collective before
    /// dropping the communicator, or the drop aborts it), polling `ncclCommGetAsyncError` as it waits; past
    /// the deadline the communicator is aborted and the wait is
    /// [`Error::CollectiveTimeout`]. On the simulator the collectives
    /// finished when they were called: nothing to wait for.
    pub fn synchronize(&self, stream: &Stream) -> Result<()> {
        const OP: &str = "synchronize";
        self.check_usable(OP)?;
        self.check_stream(OP, stream)?;
        let Backend::Nccl { lib, raw } = &self.backend else {
            return Ok(());
        };
        let s = stream.as_cust()?.as_inner();
        self.device.make_current()?;
        let since = Instant::now();
        loop {
            // SAFETY: a live stream of this device (checked above).
            let q = unsafe { cust::sys::cuStreamQuery(s) };
            if q == cust::sys::CUresult::CUDA_SUCCESS {
                self.unsettled.set(false);
                return Ok(());
            }
            if q != cust::sys::CUresult::CUDA_ERROR_NOT_READY {
                crate::error::check_driver(q, K, "cuStreamQuery")?;
            }
            let mut state = SUCCESS;
            // SAFETY: a live communicator and a place for its state.
            let r = unsafe { (lib.comm_get_async_error)(*raw, &mut state) };
            let r = if r == SUCCESS { state } else { r };
            if r != SUCCESS && r != IN_PROGRESS {
                let e = lib.error("ncclCommGetAsyncError", r, *raw);
                self.abort(&e.to_string());
                return Err(e);
            }
            if since.elapsed() > self.timeout {
                return Err(self.time_out(OP, since));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Refuses a stream of another device.
    fn check_stream(&self, operation: &'static str, stream: &Stream) -> Result<()> {
        if stream.device() != self.device {
            return Err(Error::WrongDevice {
                kernel: operation,
                argument: "stream",
                expected: self.device,
                found: stream.device(),
            });
        }
        Ok(())
    }

    /// Refuses memory of another device.
    fn check_memory<T: DeviceCopy>(
        &self,
        operation: &'static str,
        s: &DeviceSlice<T>,
    ) -> Result<()> {
        if s.device() != self.device {
            return Err(Error::WrongDevice {
                kernel: operation,
                argument: "a buffer",
                expected: self.device,
                found: s.device(),
            });
        }
        Ok(())
    }

    /// Refuses a rank (root or peer) outside `0..ranks`.
    fn check_rank(&self, operation: &'static str, what: &str, r: usize) -> Result<()> {
        if r >= self.ranks {
            return Err(Error::invalid(
                K,
                format!(
                    "{operation}: {what} {r} is not a rank of this communicator (0..{})",
                    self.ranks
                ),
            ));
        }
        Ok(())
    }

    /// Checks one operation's arguments and erases its types.
    fn call<T: NcclElement>(
        &self,
        kind: Kind,
        send: Option<&DeviceSlice<T>>,
        recv: Option<&DeviceSlice<T>>,
        stream: &Stream,
    ) -> Result<Call> {
        let op = kind.name();
        self.check_usable(op)?;
        self.check_stream(op, stream)?;
        for s in [send, recv].into_iter().flatten() {
            self.check_memory(op, s)?;
        }
        let (send_len, recv_len) = (send.map_or(0, |s| s.len()), recv.map_or(0, |s| s.len()));
        let p = self.ranks;
        let want = match kind {
            Kind::AllReduce(_) | Kind::Reduce { .. } | Kind::Broadcast { .. } => {
                (send_len == recv_len).then_some(()).ok_or(format!(
                    "the send buffer holds {send_len} elements, the receive buffer {recv_len}: \
                     they must be equal"
                ))
            }
            Kind::AllGather => (recv_len == send_len * p).then_some(()).ok_or(format!(
                "the receive buffer holds {recv_len} elements: {p} ranks × {send_len} sent need {}",
                send_len * p
            )),
            Kind::ReduceScatter(_) => (send_len == recv_len * p).then_some(()).ok_or(format!(
                "the send buffer holds {send_len} elements: {p} ranks × {recv_len} received need {}",
                recv_len * p
            )),
            Kind::Send { .. } | Kind::Recv { .. } => Ok(()),
        };
        want.map_err(|why| Error::invalid(K, format!("{op} on rank {}: {why}", self.rank)))?;
        match kind {
            Kind::Broadcast { root } | Kind::Reduce { root, .. } => {
                self.check_rank(op, "root", root)?
            }
            Kind::Send { peer } | Kind::Recv { peer } => self.check_rank(op, "peer", peer)?,
            _ => {}
        }
        let stream = match stream.as_cust() {
            Ok(s) => s.as_inner(),
            Err(_) => std::ptr::null_mut(),
        };
        Ok(Call {
            kind,
            data_type: T::DATA_TYPE,
            send: send.map_or(0, |s| s.as_device_ptr().as_raw()),
            send_len,
            recv: recv.map_or(0, |s| s.as_device_ptr().as_raw()),
            recv_len,
            stream,
        })
    }

    /// Queues `recv = send[rank 0] op send[rank 1] op …` on every rank
    /// (`ncclAllReduce`), on `stream`. The buffers are of equal length on
    /// every rank.
    pub fn all_reduce<T: NcclElement>(
        &self,
        send: &DeviceSlice<T>,
        recv: &mut DeviceSlice<T>,
        op: ReduceOp,
        stream: &Stream,
    ) -> Result<()> {
        self.alone(|g| g.all_reduce(self, send, recv, op, stream))
    }

    /// [`Communicator::all_reduce`] in place: `buf` is sent and receives.
    pub fn all_reduce_in_place<T: NcclElement>(
        &self,
        buf: &mut DeviceSlice<T>,
        op: ReduceOp,
        stream: &Stream,
    ) -> Result<()> {
        self.alone(|g| g.all_reduce_in_place(self, buf, op, stream))
    }

    /// Queues the copy of rank `root`'s `buf` into every other rank's
    /// `buf` (`ncclBroadcast`, in place).
    pub fn broadcast<T: NcclElement>(
        &self,
        buf: &mut DeviceSlice<T>,
        root: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.alone(|g| g.broadcast(self, buf, root, stream))
    }

    /// Queues `recv = send[rank 0] op send[rank 1] op …` on rank `root`
    /// only (`ncclReduce`; the other ranks' `recv` is left as it was).
    pub fn reduce<T: NcclElement>(
        &self,
        send: &DeviceSlice<T>,
        recv: &mut DeviceSlice<T>,
        op: ReduceOp,
        root: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.alone(|g| g.reduce(self, send, recv, op, root, stream))
    }

    /// Queues the gathering of every rank's `send` into every rank's
    /// `recv`, rank `r`'s at `r · send.len()` (`ncclAllGather`): `recv`
    /// holds `ranks × send.len()` elements.
    pub fn all_gather<T: NcclElement>(
        &self,
        send: &DeviceSlice<T>,
        recv: &mut DeviceSlice<T>,
        stream: &Stream,
    ) -> Result<()> {
        self.alone(|g| g.all_gather(self, send, recv, stream))
    }

    /// Queues the reduction of every rank's `send` (`ranks × recv.len()`
    /// elements), rank `r` receiving block `r` of the result
    /// (`ncclReduceScatter`).
    pub fn reduce_scatter<T: NcclElement>(
        &self,
        send: &DeviceSlice<T>,
        recv: &mut DeviceSlice<T>,
        op: ReduceOp,
        stream: &Stream,
    ) -> Result<()> {
        self.alone(|g| g.reduce_scatter(self, send, recv, op, stream))
    }

    /// Queues the sending of `buf` to rank `peer` (`ncclSend`), which
    /// receives it with a [`Communicator::recv`] of the same length. Sends
    /// and receives that depend on each other go in one [`Group`].
    pub fn send<T: NcclElement>(
        &self,
        buf: &DeviceSlice<T>,
        peer: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.alone(|g| g.send(self, buf, peer, stream))
    }

    /// Queues the receiving of `buf` from rank `peer` (`ncclRecv`).
    pub fn recv<T: NcclElement>(
        &self,
        buf: &mut DeviceSlice<T>,
        peer: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.alone(|g| g.recv(self, buf, peer, stream))
    }

    /// One operation on its own: a group of one, added by `add`.
    fn alone<'a>(&'a self, add: impl FnOnce(&mut Group<'a>) -> Result<()>) -> Result<()> {
        let mut g = Group::new();
        add(&mut g)?;
        g.end()
    }

    /// Issues `call` to NCCL (inside or outside a group).
    fn issue_nccl(&self, lib: &Nccl, raw: RawComm, c: &Call) -> Result<()> {
        let (send, recv) = (
            c.send as usize as *const std::ffi::c_void,
            c.recv as usize as *mut std::ffi::c_void,
        );
        let dt = c.data_type as i32;
        // SAFETY: `send` and `recv` are device memory of this communicator's
        // device holding the lengths NCCL reads and writes (checked when the
        // Call was made), kept alive by the Group's borrows until it ends and
        // by the caller until the stream has done the work (the
        // `_on_device` rule: a buffer's free waits for the device); the
        // stream is a live stream of that device; `raw` a live communicator.
        let (call, r) = unsafe {
            match c.kind {
                Kind::AllReduce(op) => (
                    "ncclAllReduce",
                    (lib.all_reduce)(send, recv, c.send_len, dt, op as i32, raw, c.stream),
                ),
                Kind::Broadcast { root } => (
                    "ncclBroadcast",
                    (lib.broadcast)(send, recv, c.send_len, dt, root as i32, raw, c.stream),
                ),
                Kind::Reduce { op, root } => (
                    "ncclReduce",
                    (lib.reduce)(
                        send,
                        recv,
                        c.send_len,
                        dt,
                        op as i32,
                        root as i32,
                        raw,
                        c.stream,
                    ),
                ),
                Kind::AllGather => (
                    "ncclAllGather",
                    (lib.all_gather)(send, recv, c.send_len, dt, raw, c.stream),
                ),
                Kind::ReduceScatter(op) => (
                    "ncclReduceScatter",
                    (lib.reduce_scatter)(send, recv, c.recv_len, dt, op as i32, raw, c.stream),
                ),
                Kind::Send { peer } => (
                    "ncclSend",
                    (lib.send)(send, c.send_len, dt, peer as i32, raw, c.stream),
                ),
                Kind::Recv { peer } => (
                    "ncclRecv",
                    (lib.recv)(recv, c.recv_len, dt, peer as i32, raw, c.stream),
                ),
            }
        };
        if r != SUCCESS && r != IN_PROGRESS {
            let e = lib.error(call, r, raw);
            self.abort(&e.to_string());
            return Err(e);
        }
        self.unsettled.set(true);
        Ok(())
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        match &self.backend {
            Backend::Nccl { lib, raw } => {
                if self.aborted().is_some() {
                    return; // ncclCommAbort freed it.
                }
                if let Some(context) = &self.context {
                    // A failure leaves the thread's context, as before.
                    let _ = context.make_current();
                }
                if self.unsettled.get() {
                    self.abort("dropped with work queued and not waited for");
                    return;
                }
                // SAFETY: a live communicator, finalized and destroyed once;
                // a failure of either leaves an abort (which cannot hang).
                unsafe {
                    let r = (lib.comm_finalize)(*raw);
                    let ok = (r == SUCCESS || r == IN_PROGRESS)
                        && self.settle("ncclCommFinalize", Instant::now()).is_ok();
                    if !ok {
                        if self.aborted().is_none() {
                            (lib.comm_abort)(*raw);
                        }
                        return;
                    }
                    if (lib.comm_destroy)(*raw) != SUCCESS {
                        (lib.comm_abort)(*raw);
                    }
                }
            }
            Backend::Sim(r) => r.leave(),
        }
    }
}

/// Several operations issued together (`ncclGroupStart` … `ncclGroupEnd`):
/// sends and receives that depend on each other (a halo exchange), or the
/// collectives of several communicators driven by one thread. The group
/// borrows every buffer until [`Group::end`]; nothing reaches NCCL before
/// then, and an argument refused while the group is built refuses the
/// whole group.
///
/// On the simulator, `end` posts every operation's part first (the sends'
/// messages, the collectives' contributions), then completes them in order.
#[derive(Default)]
pub struct Group<'a> {
    calls: Vec<(&'a Communicator, Call)>,
    /// Each call's stream, in order.
    streams: Vec<&'a Stream>,
    _borrows: PhantomData<&'a mut ()>,
}

impl<'a> Group<'a> {
    /// An empty group.
    pub fn new() -> Self {
        Self::default()
    }

    fn push<T: NcclElement>(
        &mut self,
        comm: &'a Communicator,
        kind: Kind,
        send: Option<&'a DeviceSlice<T>>,
        recv: Option<&'a DeviceSlice<T>>,
        stream: &'a Stream,
    ) -> Result<()> {
        let call = comm.call(kind, send, recv, stream)?;
        self.calls.push((comm, call));
        self.streams.push(stream);
        Ok(())
    }

    /// Adds [`Communicator::all_reduce`].
    pub fn all_reduce<T: NcclElement>(
        &mut self,
        comm: &'a Communicator,
        send: &'a DeviceSlice<T>,
        recv: &'a mut DeviceSlice<T>,
        op: ReduceOp,
        stream: &'a Stream,
    ) -> Result<()> {
        self.push(comm, Kind::AllReduce(op), Some(send), Some(recv), stream)
    }

    /// Adds [`Communicator::all_reduce_in_place`].
    pub fn all_reduce_in_place<T: NcclElement>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut DeviceSlice<T>,
        op: ReduceOp,
        stream: &'a Stream,
    ) -> Result<()> {
        let buf: &'a DeviceSlice<T> = buf;
        self.push(comm, Kind::AllReduce(op), Some(buf), Some(buf), stream)
    }

    /// Adds [`Communicator::broadcast`].
    pub fn broadcast<T: NcclElement>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut DeviceSlice<T>,
        root: usize,
        stream: &'a Stream,
    ) -> Result<()> {
        let buf: &'a DeviceSlice<T> = buf;
        self.push(comm, Kind::Broadcast { root }, Some(buf), Some(buf), stream)
    }

    /// Adds [`Communicator::reduce`].
    pub fn reduce<T: NcclElement>(
        &mut self,
        comm: &'a Communicator,
        send: &'a DeviceSlice<T>,
        recv: &'a mut DeviceSlice<T>,
        op: ReduceOp,
        root: usize,
        stream: &'a Stream,
    ) -> Result<()> {
        self.push(
            comm,
            Kind::Reduce { op, root },
            Some(send),
            Some(recv),
            stream,
        )
    }

    /// Adds [`Communicator::all_gather`].
    pub fn all_gather<T: NcclElement>(
        &mut self,
        comm: &'a Communicator,
        send: &'a DeviceSlice<T>,
        recv: &'a mut DeviceSlice<T>,
        stream: &'a Stream,
    ) -> Result<()> {
        self.push(comm, Kind::AllGather, Some(send), Some(recv), stream)
    }

    /// Adds [`Communicator::reduce_scatter`].
    pub fn reduce_scatter<T: NcclElement>(
        &mut self,
        comm: &'a Communicator,
        send: &'a DeviceSlice<T>,
        recv: &'a mut DeviceSlice<T>,
        op: ReduceOp,
        stream: &'a Stream,
    ) -> Result<()> {
        self.push(
            comm,
            Kind::ReduceScatter(op),
            Some(send),
            Some(recv),
            stream,
        )
    }

    /// Adds [`Communicator::send`].
    pub fn send<T: NcclElement>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a DeviceSlice<T>,
        peer: usize,
        stream: &'a Stream,
    ) -> Result<()> {
        self.push(comm, Kind::Send { peer }, Some(buf), None, stream)
    }

    /// Adds [`Communicator::recv`].
    pub fn recv<T: NcclElement>(
        &mut self,
        comm: &'a Communicator,
        buf: &'a mut DeviceSlice<T>,
        peer: usize,
        stream: &'a Stream,
    ) -> Result<()> {
        let buf: &'a DeviceSlice<T> = buf;
        self.push(comm, Kind::Recv { peer }, None, Some(buf), stream)
    }

    /// Issues every operation: to NCCL between `ncclGroupStart` and
    /// `ncclGroupEnd` (then, on nonblocking communicators, waits while they
    /// say `ncclInProgress`, up to the deadline), or to the simulator. An
    /// empty group does nothing. All the operations' communicators must be
    /// of one kind.
    ///
    /// Ordering (the rule in [`Gpu`]'s docs): each stream of the group that
    /// is not its device's ordering stream ([`Gpu::stream`]) first waits for
    /// the work queued on the ordering stream so far
    /// ([`Stream::wait_for_ordering`]), and once the group's work is queued,
    /// the ordering stream waits for it ([`Stream::join_ordering`]): the
    /// collectives read what the `_on_device` launchers wrote before them,
    /// and the launchers and copies after them (`to_vec` included) see
    /// their results. A single collective ([`Communicator::all_reduce`], …)
    /// is a group of one.
    pub fn end(self) -> Result<()> {
        let Some((first, _)) = self.calls.first() else {
            return Ok(());
        };
        if self
            .calls
            .iter()
            .any(|(c, _)| c.is_simulated() != first.is_simulated())
        {
            return Err(Error::invalid(
                K,
                "a group mixes simulated and NCCL communicators",
            ));
        }
        match &first.backend {
            Backend::Sim(_) => sim::run_group(&self.calls),
            Backend::Nccl { lib, .. } => {
                // The rule of `Gpu`'s docs: a stream other than its device's
                // ordering stream starts after the work queued there so far,
                // and the ordering stream waits for its collectives (so the
                // `_on_device` launchers, the copies and `to_vec` see them).
                let mut others: Vec<&Stream> = Vec::new();
                for &stream in &self.streams {
                    let raw = stream.as_cust()?.as_inner();
                    if !stream.is_ordering()
                        && !others
                            .iter()
                            .any(|o| o.as_cust().is_ok_and(|o| std::ptr::eq(o.as_inner(), raw)))
                    {
                        others.push(stream);
                    }
                }
                for stream in &others {
                    stream.wait_for_ordering(K)?;
                }
                first.device.make_current()?;
                let since = Instant::now();
                // SAFETY: no arguments; paired with group_end below.
                let r = unsafe { (lib.group_start)() };
                lib.check("ncclGroupStart", r, std::ptr::null_mut())?;
                let mut issued = Ok(());
                for (comm, call) in &self.calls {
                    if let Backend::Nccl { raw, .. } = &comm.backend {
                        issued = comm.issue_nccl(lib, *raw, call);
                        if issued.is_err() {
                            break;
                        }
                    }
                }
                // SAFETY: closes the group opened above (also after a
                // failed call: NCCL requires the pairing).
                let r = unsafe { (lib.group_end)() };
                issued?;
                if r != SUCCESS && r != IN_PROGRESS {
                    let e = lib.error("ncclGroupEnd", r, std::ptr::null_mut());
                    for (comm, _) in &self.calls {
                        comm.abort(&e.to_string());
                    }
                    return Err(e);
                }
                for (comm, _) in &self.calls {
                    comm.settle("ncclGroupEnd", since)?;
                }
                // Only after the work is queued (a nonblocking communicator
                // queues it by the time it settles), and only when it was:
                // a failed group's streams are not joined (its work may
                // never finish).
                for stream in &others {
                    stream.join_ordering(K)?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests;
