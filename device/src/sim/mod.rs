//! The CPU simulator (every target but nvptx64): runs kernel bodies on the
//! host with CUDA's execution model.
//!
//! A kernel declared with [`kernels!`](crate::kernels) is compiled for the
//! host too, as an [`Entry`] that its handle carries
//! ([`Kernel::sim_entry`](crate::kernel::Kernel::sim_entry)). [`launch`]
//! runs every thread of a grid with it, synchronously; the device layer's
//! functions ([`thread`](crate::thread), [`sync`](crate::sync),
//! [`shared`](crate::shared), [`warp`](crate::warp), …) read and change the
//! current simulated thread's state. Device buffers are [`memory`]
//! allocations. The mechanism, and why, is in `docs/simulator.md`.
//!
//! ```
//! use std::ffi::c_void;
//! use cuda_kernels_device::sim::{self, LaunchShape, SimError, memory::Allocation};
//!
//! mod k {
//!     use cuda_kernels_device::thread;
//!     cuda_kernels_device::kernels! {
//!         /// `x[i] *= 2` for `i < n`.
//!         ///
//!         /// # Safety
//!         /// `x` holds `n` f32.
//!         pub fn double(x: *mut f32, n: usize) as DOUBLE {
//!             for i in thread::grid_stride(n) {
//!                 // SAFETY: i < n.
//!                 unsafe { *x.add(i) *= 2.0 };
//!             }
//!         }
//!     }
//! }
//!
//! # fn main() -> Result<(), SimError> {
//! let n = 1000;
//! let buf = Allocation::new(n * 4, 4, "x")?; // zeroed, a guard page after its end
//! let (mut x, mut len) = (buf.ptr().cast::<f32>(), n);
//! // SAFETY: the buffer holds n f32.
//! unsafe { x.add(7).write(1.5) };
//! let params = [(&raw mut x).cast::<c_void>(), (&raw mut len).cast()];
//! let shape = LaunchShape { grid: [4, 1, 1], block: [128, 1, 1], dynamic_shared_bytes: 0 };
//! let entry = k::DOUBLE.sim_entry().expect("kernels! gives a host entry");
//! // SAFETY: the parameters are the kernel's, with a buffer of n f32.
//! unsafe { sim::launch(k::DOUBLE.name(), shape, entry, &params) }?;
//! // SAFETY: as above.
//! assert_eq!(unsafe { x.add(7).read() }, 3.0);
//!
//! // A launch that reads past the end is reported, not a crash:
//! let mut too_long = n + 1;
//! let params = [(&raw mut x).cast::<c_void>(), (&raw mut too_long).cast()];
//! // SAFETY: not safe on purpose (one element past the end): the simulator catches it.
//! let e = unsafe { sim::launch(k::DOUBLE.name(), shape, entry, &params) }.unwrap_err();
//! assert!(matches!(e, SimError::OutOfBounds { index: 1000, .. }), "{e}");
//! # Ok(())
//! # }
//! ```
use std::ffi::c_void;

pub(crate) mod atomic;
mod context;
mod error;
mod hopper;
pub mod memory;
pub(crate) mod printf;
mod scheduler;
mod trap;

pub(crate) use context::{current, dynamic_shared, fail};
pub use error::{Access, RaceSource, SimError, SimThread, Stuck};
pub(crate) use hopper::MmaType;
pub use hopper::{
    POISON as WGMMA_POISON, SIM_TENSOR_MAP_MAGIC, TiledMap, decode_tiled, encode_tiled,
};
pub use printf::capture_printf;

/// The device layer's Hopper instructions on the simulator ([`crate::hopper`]).
pub(crate) mod hopper_ops {
    pub(crate) use super::hopper::{
        check_tensor_map, mbarrier_arrive, mbarrier_init, mbarrier_try_wait, named_barrier,
        tma_load, tma_store, wgmma, wgmma_commit, wgmma_fence, wgmma_wait,
    };
}

/// The f32 NaN the GPU gives for a NaN result of its f32 instructions and
/// libdevice's f32 functions (its canonical NaN; payloads and signs are not
/// kept). Its f64 NaN results are the host's: an operand's payload,
/// quieted, else `0xfff8_0000_0000_0000` (measured on an H100).
pub const GPU_NAN_F32: u32 = 0x7fff_ffff;

/// `x`, or the GPU's NaN when `x` is a NaN. (On the bits: LLVM folds a
/// float comparison's `select` of a NaN constant back into `x`, taking one
/// NaN for another.)
#[inline]
pub(crate) fn gpu_nan_f32(x: f32) -> f32 {
    let bits = x.to_bits();
    f32::from_bits(if bits & 0x7fff_ffff > 0x7f80_0000 {
        GPU_NAN_F32
    } else {
        bits
    })
}

/// A kernel's host entry: reads its parameters from an array of pointers to
/// each parameter value (what `cuLaunchKernel` takes) and runs the kernel
/// body as the current simulated thread.
///
/// # Safety
/// Called by [`launch`] only, with the kernel's parameters.
pub type Entry = unsafe fn(params: *const *mut c_void);

/// A launch's shape: grid and block dimensions and dynamic shared bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    /// Blocks in the grid (x, y, z).
    pub grid: [u32; 3],
    /// Threads in a block (x, y, z).
    pub block: [u32; 3],
    /// Bytes of dynamic shared memory per block.
    pub dynamic_shared_bytes: u32,
}

/// The limits of the simulated device, checked before a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Threads per block.
    pub max_threads_per_block: u32,
    /// Block dimensions (x, y, z).
    pub max_block: [u32; 3],
    /// Grid dimensions (x, y, z).
    pub max_grid: [u32; 3],
    /// Shared memory per block, static plus dynamic, without opt-in.
    pub shared_per_block: u32,
    /// Shared memory per block with opt-in (`cudaFuncAttributeMaxDynamicSharedMemorySize`).
    pub shared_per_block_opt_in: u32,
    /// Multiprocessors (SMs), which launchers size their grids by.
    pub multiprocessors: u32,
    /// Resident threads per multiprocessor.
    pub threads_per_multiprocessor: u32,
    /// Resident blocks per multiprocessor.
    pub blocks_per_multiprocessor: u32,
    /// Shared memory per multiprocessor, in bytes.
    pub shared_per_multiprocessor: u32,
}

impl Limits {
    /// An H100 SXM's (compute capability 9.0): the simulated device's.
    pub const H100: Limits = Limits {
        max_threads_per_block: 1024,
        max_block: [1024, 1024, 64],
        max_grid: [(1 << 31) - 1, 65535, 65535],
        shared_per_block: 48 * 1024,
        shared_per_block_opt_in: 232_448,
        multiprocessors: 132,
        threads_per_multiprocessor: 2048,
        blocks_per_multiprocessor: 32,
        shared_per_multiprocessor: 228 * 1024,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::H100
    }
}

/// How the simulator runs a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimOptions {
    /// `None`: threads resume in a fixed order (deterministic). `Some(seed)`:
    /// the order is shuffled by this seed, to expose code that depends on it.
    pub seed: Option<u64>,
    /// OS threads that run blocks in parallel (0 or 1: one, the caller's).
    pub threads: usize,
    /// The order in which blocks run.
    pub schedule: Schedule,
    /// The device's limits.
    pub limits: Limits,
    /// Whether the kernel opted in to more than 48 KiB of shared memory.
    pub shared_opt_in: bool,
    /// Bytes of the printf FIFO (`cudaLimitPrintfFifoSize`): what the
    /// kernel prints past it is dropped, as on the GPU, and the count
    /// reported on stderr.
    pub printf_fifo_bytes: usize,
    /// Bytes of each simulated thread's stack, the simulator's counterpart
    /// of `cudaLimitStackSize`: a thread that needs more ends with a
    /// stack-overflow fault. Host frames are not the GPU's (the kernel's
    /// code compiled for the host, and the simulator's own frames under
    /// it), so the same recursion faults at other depths on each; at least
    /// [`MIN_STACK_BYTES`] ([`STACK_BYTES`] by default,
    /// `CUDA_KERNELS_SIM_STACK_BYTES`).
    pub stack_bytes: usize,
}

/// The default of [`SimOptions::stack_bytes`]: 1 MiB of address space per
/// simulated thread (only the pages a thread touches are backed), the
/// GPU's 512 KiB of local memory per thread and room for the host's own
/// frames.
pub const STACK_BYTES: usize = 1 << 20;

/// The least [`SimOptions::stack_bytes`]: the simulator's own frames under
/// a kernel's.
pub const MIN_STACK_BYTES: usize = 64 << 10;

/// The order in which the simulator runs a launch's blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schedule {
    /// Each block to its end before the next starts, in `blockIdx` order
    /// (or [`SimOptions::threads`] blocks at once on as many OS threads).
    /// A block that waits for another (a decoupled look-back) always finds
    /// it done.
    #[default]
    InOrder,
    /// `resident` blocks at a time, on the calling OS thread
    /// ([`SimOptions::threads`] is not used), as the GPU keeps several
    /// resident: blocks start in a permuted order (the last first without
    /// a seed, else a permutation drawn from [`SimOptions::seed`]), and run
    /// in turns of a random number of thread resumes (half of the turns
    /// the block started last's, so a later tile runs ahead). A turn also ends
    /// after every atomic store or read-modify-write of global memory (the
    /// other blocks see it before this one goes on: a flag published before
    /// its data is read without the data) and before one atomic load in
    /// eight (a spin-wait parks, so the block it waits for runs). So a
    /// look-back's wait runs, and a block parks mid look-back. When the
    /// resident blocks make more than [`DEADLOCK_POLLS`] atomic loads with
    /// no thread exiting, no barrier released and no atomic write among
    /// them, the launch ends with [`SimError::Deadlock`] (on the GPU: a
    /// hang). Plain stores are seen by the other blocks at once, in program
    /// order: a missing fence is not found, a missing or misordered
    /// publication is.
    Interleaved {
        /// Blocks resident at once (at least 2 interleave).
        resident: u32,
    },
}

/// The resident blocks of `CUDA_KERNELS_SIM_SCHEDULE=interleaved`.
pub const INTERLEAVED_RESIDENT: u32 = 4;

/// Atomic loads of global memory with no progress after which the
/// interleaved schedule reports a deadlock ([`Schedule::Interleaved`]).
pub const DEADLOCK_POLLS: u64 = 1 << 20;

/// The seed of the interleaved schedule's turns without
/// [`SimOptions::seed`].
const INTERLEAVE_SEED: u64 = 0x5eed_b10c_f00d_cafe;

/// The GPU's default printf FIFO: 1 MiB (`cudaLimitPrintfFifoSize`).
pub const PRINTF_FIFO_BYTES: usize = 1 << 20;

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            seed: None,
            threads: 0,
            schedule: Schedule::InOrder,
            limits: Limits::default(),
            shared_opt_in: false,
            printf_fifo_bytes: PRINTF_FIFO_BYTES,
            stack_bytes: STACK_BYTES,
        }
    }
}

impl SimOptions {
    /// The defaults, with `CUDA_KERNELS_SIM_SEED=<u64>`,
    /// `CUDA_KERNELS_SIM_THREADS=<n>`, `CUDA_KERNELS_SIM_STACK_BYTES=<n>`
    /// and `CUDA_KERNELS_SIM_SCHEDULE`
    /// (`in-order`, `interleaved` for [`INTERLEAVED_RESIDENT`] resident
    /// blocks, `interleaved:<n>`) from the environment when set. A value
    /// that does not parse is ignored, with a warning on stderr (once per
    /// process).
    pub fn from_env() -> SimOptions {
        fn var(name: &str) -> Option<u64> {
            let v = std::env::var(name).ok()?;
            let parsed = v.trim().parse().ok();
            if parsed.is_none() {
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| {
                    eprintln!("cuda-kernels simulator: ignoring {name}={v:?} (not a u64)")
                });
            }
            parsed
        }
        SimOptions {
            seed: var("CUDA_KERNELS_SIM_SEED"),
            threads: var("CUDA_KERNELS_SIM_THREADS").map_or(1, |n: u64| n as usize),
            stack_bytes: var("CUDA_KERNELS_SIM_STACK_BYTES").map_or(STACK_BYTES, |n| n as usize),
            schedule: std::env::var("CUDA_KERNELS_SIM_SCHEDULE").map_or(Schedule::InOrder, |v| {
                Schedule::parse(&v).unwrap_or_else(|| {
                    static WARNED: std::sync::Once = std::sync::Once::new();
                    WARNED.call_once(|| {
                        eprintln!(
                            "cuda-kernels simulator: ignoring CUDA_KERNELS_SIM_SCHEDULE={v:?} \
                                 (in-order, interleaved or interleaved:<blocks>)"
                        )
                    });
                    Schedule::InOrder
                })
            }),
            ..SimOptions::default()
        }
    }
}

impl Schedule {
    /// `in-order`, `interleaved` or `interleaved:<resident blocks ≥ 1>`.
    fn parse(v: &str) -> Option<Schedule> {
        match v.trim() {
            "in-order" | "" => Some(Schedule::InOrder),
            "interleaved" => Some(Schedule::Interleaved {
                resident: INTERLEAVED_RESIDENT,
            }),
            v => {
                let resident = v.strip_prefix("interleaved:")?.parse().ok()?;
                (resident > 0).then_some(Schedule::Interleaved { resident })
            }
        }
    }
}

/// Runs `entry` on every thread of a grid of `shape`, to completion, with
/// the options of [`SimOptions::from_env`]. See [`launch_with`].
///
/// # Safety
/// `params` are the kernel's parameters as `cuLaunchKernel` takes them (a
/// pointer to each value, of the entry's parameter types, in order), and
/// the kernel's own `# Safety` contract holds for them.
pub unsafe fn launch(
    kernel: &'static str,
    shape: LaunchShape,
    entry: Entry,
    params: &[*mut c_void],
) -> Result<(), SimError> {
    // SAFETY: forwarded from the caller.
    unsafe { launch_with(kernel, shape, entry, params, &SimOptions::from_env()) }
}

/// Runs `entry` on every thread of a grid of `shape`, to completion,
/// synchronously: checks the shape against `options.limits` first, then runs
/// the blocks. The first fault or finding ends the launch and is returned;
/// the simulator stays usable.
///
/// # Safety
/// As for [`launch`].
pub unsafe fn launch_with(
    kernel: &'static str,
    shape: LaunchShape,
    entry: Entry,
    params: &[*mut c_void],
    options: &SimOptions,
) -> Result<(), SimError> {
    check_launch_shape(kernel, &shape, &options.limits, options.shared_opt_in)?;
    if cfg!(debug_assertions) {
        warn_unoptimised(env!("CARGO_PKG_NAME"));
    }
    run_grid(
        kernel,
        shape,
        entry,
        scheduler::Params(params.as_ptr()),
        options,
    )
}

/// Says once per process and crate, on stderr, that `package` (a kernel
/// crate, or this one) was compiled with debug assertions, as a dev build
/// compiles it unless told otherwise: the simulator then runs its code
/// without optimisation, about ten times slower. The message gives the
/// `Cargo.toml` lines that fix it. Called by the host entries that
/// [`kernels!`](crate::kernels) writes, with their crate's name.
#[doc(hidden)]
pub fn warn_unoptimised(package: &'static str) {
    if let Some(message) = unoptimised_message(package) {
        eprintln!("{message}");
    }
}

/// [`warn_unoptimised`]'s message, the first time for `package` only.
fn unoptimised_message(package: &'static str) -> Option<String> {
    use std::sync::Mutex;
    static WARNED: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned.contains(&package) {
        return None;
    }
    warned.push(package);
    // A kernel crate also as the GPU build compiles it: wrapping arithmetic.
    let lines = if package == env!("CARGO_PKG_NAME") {
        format!(
            "[profile.dev.package.{package}]\nopt-level = 3\ndebug-assertions = false\n\
             [profile.dev.package.corosensei]\nopt-level = 3\n"
        )
    } else {
        format!(
            "[profile.dev.package.{package}]\nopt-level = 3\ndebug-assertions = false\n\
             overflow-checks = false\n"
        )
    };
    Some(format!(
        "cuda-kernels simulator: {package} was built without optimisation (a dev build), so \
         the simulator runs its kernel code about 10x slower. Add to your workspace's \
         Cargo.toml (or build with --release):\n{lines}"
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_unoptimised_crate_is_named_once_with_its_profile_lines() {
        let first = super::unoptimised_message("my-kernels").expect("the first time");
        assert!(
            first.contains("my-kernels was built without optimisation"),
            "{first}"
        );
        assert!(
            first.ends_with(
                "[profile.dev.package.my-kernels]\nopt-level = 3\ndebug-assertions = false\n\
                 overflow-checks = false\n"
            ),
            "{first}"
        );
        assert_eq!(super::unoptimised_message("my-kernels"), None);
    }
}

/// Runs the blocks, in order on the calling thread, or on
/// `options.threads` OS threads (each taking the next block); the printf
/// output is written in block order either way. With several threads the
/// first finding of the lowest block among those that ran is returned.
fn run_grid(
    kernel: &'static str,
    shape: LaunchShape,
    entry: Entry,
    params: scheduler::Params,
    options: &SimOptions,
) -> Result<(), SimError> {
    let budget = shared_budget(options);
    let fifo = std::sync::Arc::new(printf::Fifo::new(options.printf_fifo_bytes));
    let result = run_blocks(kernel, shape, entry, params, options, budget, &fifo);
    if fifo.dropped() > 0 {
        eprintln!(
            "cuda-kernels simulator: {kernel}: {} printf lines dropped: the printf FIFO of {} \
             bytes (cudaLimitPrintfFifoSize) was full, as the GPU drops them",
            fifo.dropped(),
            fifo.capacity()
        );
    }
    result
}

/// [`run_grid`]'s blocks, with the launch's printf FIFO.
fn run_blocks(
    kernel: &'static str,
    shape: LaunchShape,
    entry: Entry,
    params: scheduler::Params,
    options: &SimOptions,
    budget: u32,
    fifo: &std::sync::Arc<printf::Fifo>,
) -> Result<(), SimError> {
    let [gx, gy, gz] = shape.grid;
    let blocks = gx as u64 * gy as u64 * gz as u64;
    let interleave = match options.schedule {
        Schedule::Interleaved { resident } => Some(resident),
        Schedule::InOrder => None,
    };
    let seed = options.seed.unwrap_or(INTERLEAVE_SEED);
    let worker =
        || scheduler::Worker::new(kernel, shape, entry, params, options, budget, fifo.clone());
    if let Some(resident) = interleave {
        let workers = (0..u64::from(resident.max(1)).min(blocks))
            .map(|k| worker().interleaved(seed ^ k.wrapping_mul(0xd1b5_4a32_d192_ed03)))
            .collect();
        return run_interleaved(kernel, workers, blocks, options.seed);
    }
    let threads = options.threads.clamp(1, 256).min(blocks as usize);
    if threads <= 1 {
        let mut w = worker();
        for b in 0..blocks {
            let r = w.run_block(b);
            printf::emit(&w.take_output());
            r?;
        }
        return Ok(());
    }
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let outputs: Mutex<Vec<(u64, Vec<u8>)>> = Mutex::new(Vec::new());
    let errors: Mutex<Vec<(u64, SimError)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut w = worker();
                while !stop.load(Ordering::Relaxed) {
                    let b = next.fetch_add(1, Ordering::Relaxed);
                    if b >= blocks {
                        break;
                    }
                    let r = w.run_block(b);
                    let out = w.take_output();
                    if !out.is_empty() {
                        outputs
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push((b, out));
                    }
                    if let Err(e) = r {
                        stop.store(true, Ordering::Relaxed);
                        errors
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push((b, e));
                    }
                }
                drop(w);
                scheduler::release_stacks();
            });
        }
    });
    let mut outputs = outputs.into_inner().unwrap_or_else(|e| e.into_inner());
    outputs.sort_by_key(|(b, _)| *b);
    for (_, out) in &outputs {
        printf::emit(out);
    }
    let mut errors = errors.into_inner().unwrap_or_else(|e| e.into_inner());
    errors.sort_by_key(|(b, _)| *b);
    match errors.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// [`Schedule::Interleaved`]: `workers` (one per resident block) run the
/// grid's `blocks` in turns (half of them the block started last's), a new
/// block starting in a worker whose block ended, in a permuted order (the
/// last first without `order_seed`). The printf output is written in block
/// order.
fn run_interleaved(
    kernel: &'static str,
    mut workers: Vec<scheduler::Worker>,
    blocks: u64,
    order_seed: Option<u64>,
) -> Result<(), SimError> {
    let mut rng = scheduler::Rng(order_seed.unwrap_or(INTERLEAVE_SEED) ^ 0x7e57_ab1e);
    // The start order: i ↦ (a·i + c) mod blocks, a coprime to `blocks`.
    let (a, c) = match order_seed {
        None => (blocks - 1, blocks - 1),
        Some(_) => {
            let mut a = rng.next() % blocks;
            while gcd(a, blocks) != 1 {
                a = (a + 1) % blocks;
            }
            (a, rng.next() % blocks)
        }
    };
    let order =
        |i: u64| ((u128::from(a) * u128::from(i) + u128::from(c)) % u128::from(blocks)) as u64;
    let mut started = 0;
    let mut live: Vec<usize> = Vec::new();
    // Each worker's block's place in the start order.
    let mut place = vec![0u64; workers.len()];
    for (k, w) in workers.iter_mut().enumerate() {
        w.start(order(started));
        place[k] = started;
        started += 1;
        live.push(k);
    }
    let mut outputs: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut idle_polls = 0u64;
    let result = loop {
        if live.is_empty() {
            break Ok(());
        }
        // Half the turns go to the block started last (a later tile runs
        // ahead and waits for the earlier ones), the others to any.
        let k = if rng.below(2) == 0 {
            live.iter()
                .copied()
                .max_by_key(|&k| place[k])
                .unwrap_or(live[0])
        } else {
            live[rng.below(live.len())]
        };
        let w = &mut workers[k];
        let (progress, polls) = (w.progress, w.polls);
        let turn = w.run(1 + rng.below(256) as u32);
        if w.progress != progress {
            idle_polls = 0;
        } else {
            idle_polls += w.polls - polls;
        }
        let out = w.take_output();
        if !out.is_empty() {
            outputs.push((w.linear, out));
        }
        match turn {
            Err(e) => break Err(e),
            Ok(scheduler::Turn::Parked) if idle_polls > DEADLOCK_POLLS => {
                break Err(SimError::Deadlock {
                    kernel,
                    blocks: live.iter().map(|&k| workers[k].block()).collect(),
                    polls: idle_polls,
                });
            }
            Ok(scheduler::Turn::Parked) => {}
            Ok(scheduler::Turn::Done) if started < blocks => {
                w.start(order(started));
                place[k] = started;
                started += 1;
            }
            Ok(scheduler::Turn::Done) => live.retain(|&j| j != k),
        }
    };
    outputs.sort_by_key(|(b, _)| *b);
    for (_, out) in &outputs {
        printf::emit(out);
    }
    result
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Interleaved schedule ([`Schedule::Interleaved`]): the current thread
/// touched global memory atomically, a store or read-modify-write
/// (`wrote`, after it) or a load (before it): it yields, and another block
/// may run. Elsewhere, nothing.
pub(crate) fn global_access(wrote: bool) {
    if context::in_simulated_thread() {
        let ctx = current();
        if ctx.block_state().interleaved {
            ctx.suspend(scheduler::Event::Global { wrote });
        }
    }
}

/// Refuses a launch shape past `l`, the device's limits (a zero dimension,
/// a block or grid dimension past its maximum, more threads per block, more
/// dynamic shared memory than a block may have: with `shared_opt_in`, the
/// opt-in maximum), as `cuLaunchKernel` refuses it with
/// `CUDA_ERROR_INVALID_VALUE`. The one shape check of both of the host
/// crate's backends: the simulator's (here, on an H100's limits) and a GPU's
/// (before `cuLaunchKernel`, on the device's own), so that a bad shape gives
/// the same error on both.
pub fn check_launch_shape(
    kernel: &'static str,
    s: &LaunchShape,
    l: &Limits,
    shared_opt_in: bool,
) -> Result<(), SimError> {
    let refuse = |reason: String| {
        Err(SimError::LaunchRefused {
            kernel,
            reason: format!("{reason} (CUDA_ERROR_INVALID_VALUE: invalid argument)"),
        })
    };
    let [bx, by, bz] = s.block;
    let [gx, gy, gz] = s.grid;
    if s.block.contains(&0) || s.grid.contains(&0) {
        return refuse(format!(
            "a grid of {:?} blocks of {:?} threads has a zero dimension",
            s.grid, s.block
        ));
    }
    for (axis, (dim, max)) in ["x", "y", "z"].iter().zip(s.block.iter().zip(l.max_block)) {
        if *dim > max {
            return refuse(format!("block dimension {axis} = {dim} exceeds {max}"));
        }
    }
    let threads = bx as u64 * by as u64 * bz as u64;
    if threads > l.max_threads_per_block as u64 {
        return refuse(format!(
            "a block of {threads} threads exceeds {} threads per block",
            l.max_threads_per_block
        ));
    }
    for (axis, (dim, max)) in ["x", "y", "z"]
        .iter()
        .zip([gx, gy, gz].iter().zip(l.max_grid))
    {
        if *dim > max {
            return refuse(format!("grid dimension {axis} = {dim} exceeds {max}"));
        }
    }
    let shared_max = if shared_opt_in {
        l.shared_per_block_opt_in
    } else {
        l.shared_per_block
    };
    if s.dynamic_shared_bytes > shared_max {
        return refuse(format!(
            "{} bytes of dynamic shared memory exceed the {shared_max} bytes per block",
            s.dynamic_shared_bytes
        ));
    }
    Ok(())
}

/// The shared-memory budget of a launch with `options` (for the static
/// arrays' check as they are declared).
pub(crate) fn shared_budget(options: &SimOptions) -> u32 {
    if options.shared_opt_in {
        options.limits.shared_per_block_opt_in
    } else {
        options.limits.shared_per_block
    }
}

/// A located fault unless `addr` is aligned to the `size`-byte access made
/// there (the GPU's shared loads and stores, vector ones included, need
/// their natural alignment: `CUDA_ERROR_MISALIGNED_ADDRESS` otherwise).
fn check_shared_alignment(addr: u32, size: usize, site: &'static std::panic::Location<'static>) {
    if size.is_power_of_two() && !(addr as usize).is_multiple_of(size) {
        fail(
            site.file(),
            site.line(),
            site.column(),
            &format!(
                "misaligned address: a {size}-byte shared-memory access at offset {addr}, \
                 not a multiple of {size}"
            ),
        );
    }
}

/// The current thread's load of a `T` at shared offset `addr`.
#[track_caller]
#[inline(never)]
pub(crate) fn shared_load<T: Copy>(addr: u32) -> T {
    let site = std::panic::Location::caller();
    check_shared_alignment(addr, size_of::<T>(), site);
    let p = context::shared_ptr(addr, size_of::<T>(), Access::Read, site);
    // SAFETY: `shared_ptr` checked that the bytes lie in the block's shared memory.
    unsafe { p.cast::<T>().read_unaligned() }
}

/// The current thread's store of a `T` at shared offset `addr`.
#[track_caller]
#[inline(never)]
pub(crate) fn shared_store<T: Copy>(addr: u32, value: T) {
    let site = std::panic::Location::caller();
    check_shared_alignment(addr, size_of::<T>(), site);
    let p = context::shared_ptr(addr, size_of::<T>(), Access::Write, site);
    // SAFETY: `shared_ptr` checked that the bytes lie in the block's shared memory.
    unsafe { p.cast::<T>().write_unaligned(value) }
}

/// The current thread's atomic read-modify-write of the `T` at shared
/// offset `addr` (aligned: the caller checked): `update` maps the old value
/// to the new one; returns the old one. Atomic among the block's simulated
/// threads, which run one at a time on the block's OS thread.
#[track_caller]
#[inline(never)]
pub(crate) fn shared_rmw<T: Copy>(addr: u32, update: impl FnOnce(T) -> T) -> T {
    let site = std::panic::Location::caller();
    let p = context::shared_ptr(addr, size_of::<T>(), Access::Atomic, site).cast::<T>();
    // SAFETY: `shared_ptr` checked that the bytes lie in the block's shared
    // memory; `addr` is aligned to T, and so is the memory (16-byte aligned).
    unsafe {
        let old = p.read();
        p.write(update(old));
        old
    }
}

/// A plain read of global memory (no alignment needed).
///
/// # Safety
/// `ptr` points to `size_of::<T>()` readable bytes.
pub(crate) unsafe fn read_global<T: Copy>(ptr: *const T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { ptr.read_unaligned() }
}

/// `sync_threads` of the current thread, called at `site`: waits until
/// every thread of the block waits at it.
pub(crate) fn sync_threads(site: &'static std::panic::Location<'static>) {
    current().suspend(scheduler::Event::Barrier(site));
}

/// A warp collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WarpOp {
    /// `shfl.sync.down`.
    ShflDown,
    /// `shfl.sync.up`.
    ShflUp,
    /// `shfl.sync.bfly`.
    ShflXor,
    /// `shfl.sync.idx`.
    ShflIdx,
    /// `vote.sync.ballot`.
    Ballot,
    /// `vote.sync.any`.
    Any,
    /// `vote.sync.all`.
    All,
    /// `bar.warp.sync`: the lanes of the mask wait for each other; their
    /// shared-memory accesses before it are ordered before those after it.
    Sync,
    /// `match.any.sync.b32`.
    MatchAny,
    /// `match.all.sync.b32`.
    MatchAll,
    /// `activemask`: not a wait; the lanes of the warp that reach the same
    /// call site while no other thread can run get the mask of them.
    ActiveMask,
}

/// The current thread's part in a warp collective of the lanes in `mask`.
#[track_caller]
#[inline(never)]
pub(crate) fn warp_collective(op: WarpOp, mask: u32, value: u32, arg: u32) -> u32 {
    let site = std::panic::Location::caller();
    current().suspend(scheduler::Event::Warp(scheduler::Pending {
        op,
        mask,
        value,
        arg,
        site,
    }))
}

/// Whether the current simulated thread is thread 0 of its block (the one
/// that tells the simulator the launch's parameters, [`note_params`]).
#[doc(hidden)]
pub fn first_thread() -> bool {
    current().linear == 0
}

/// For the host entries of [`kernels!`](crate::kernels): the kernel's
/// parameters by name, with the address each pointer parameter holds, so
/// that an out-of-bounds access names the parameter it went through.
#[doc(hidden)]
pub fn note_params(params: &[(&'static str, Option<usize>)]) {
    current().block_state().note_params(params);
}

/// A kernel parameter, for [`ParamPointer`] and [`ParamValue`]:
/// `(&&ParamProbe(&x)).param_address()` is the address a pointer parameter
/// holds, `None` for any other.
#[doc(hidden)]
pub struct ParamProbe<'a, T>(pub &'a T);

/// [`ParamProbe`] of a pointer: its address.
#[doc(hidden)]
pub trait ParamPointer {
    /// The address the parameter holds.
    fn param_address(&self) -> Option<usize>;
}

impl<T> ParamPointer for &ParamProbe<'_, *const T> {
    fn param_address(&self) -> Option<usize> {
        Some(*self.0 as usize)
    }
}

impl<T> ParamPointer for &ParamProbe<'_, *mut T> {
    fn param_address(&self) -> Option<usize> {
        Some(*self.0 as usize)
    }
}

/// [`ParamProbe`] of anything else: no address.
#[doc(hidden)]
pub trait ParamValue {
    /// `None`: not a pointer.
    fn param_address(&self) -> Option<usize>;
}

impl<T> ParamValue for ParamProbe<'_, T> {
    fn param_address(&self) -> Option<usize> {
        None
    }
}

/// For [`shared_array!`](crate::shared_array) on the host: the shared
/// offset of the static array identified by `key` (the address of a static
/// of the invocation), `bytes` long, in the current block.
#[doc(hidden)]
#[track_caller]
#[inline(never)]
pub fn static_shared(key: usize, name: &'static str, bytes: usize) -> u32 {
    context::static_shared(key, name, bytes)
}
