//! The scheduler: simulated threads of a block run on stackful coroutines,
//! each until it finishes, waits at a barrier or joins a warp collective;
//! barriers and collectives are resolved when every thread they wait for has
//! arrived, and a block in which no thread can go on is reported.
//!
//! A coroutine is a *runner*: it starts the block's next unstarted thread,
//! and when that thread finishes without having waited, the next one, on the
//! same stack. Only a thread that waits keeps a coroutine (its runner) to
//! itself; the scheduler starts a new runner for the threads still
//! unstarted. So a block whose threads never wait costs one coroutine, and a
//! thread that never waits costs a function call.
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::context::{self, BlockState, Finding, Site, ThreadCtx};
use super::{Entry, LaunchShape, SimError, Stuck, WarpOp, trap};

/// Why a simulated thread suspended.
pub(crate) enum Event {
    /// It waits at `sync_threads` called here.
    Barrier(Site),
    /// It joined a warp collective.
    Warp(Pending),
    /// Interleaved schedule only: it touched global memory atomically, a
    /// store or read-modify-write (`wrote`, just done) or a load (about to
    /// be done); another block may run first (see [`Worker::run`]).
    Global { wrote: bool },
    /// It waits for the phase of `parity` of the mbarrier at shared offset
    /// `addr` to complete (`mbarrier.try_wait.parity` called at `site`).
    MBarrier { addr: u32, parity: u32, site: Site },
    /// It waits at `wgmma.wait_group` (called here) for the other threads
    /// of its warpgroup (128 consecutive linear indices).
    WarpGroup(Site),
    /// It waits at named barrier `id` for `threads` threads (`barrier.sync
    /// id, threads` called at `site`).
    Named { id: u32, threads: u32, site: Site },
}

/// A lane's part in a warp collective.
#[derive(Clone, Copy)]
pub(crate) struct Pending {
    pub op: WarpOp,
    pub mask: u32,
    pub value: u32,
    pub arg: u32,
    pub site: Site,
}

/// How a simulated thread ended other than by returning.
pub(crate) enum ThreadEnd {
    /// A fault or a finding.
    Error(Box<SimError>),
    /// It touched memory it may not (a guard page): the faulting address,
    /// and the call stack at the faulting instruction (unresolved: its
    /// source line is looked up only for the report).
    #[cfg_attr(
        not(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        )),
        allow(dead_code)
    )]
    Trap {
        addr: usize,
        trace: std::backtrace::Backtrace,
    },
}

/// What a runner yields: the thread it runs, and why that thread waits.
pub(crate) type Yield = (usize, Event);

/// What a runner returns: `None` when no unstarted thread was left after its
/// last one returned; else the thread that ended otherwise, and how.
pub(crate) type RunnerEnd = Option<(usize, ThreadEnd)>;

type Co = Coroutine<u32, Yield, RunnerEnd, DefaultStack>;

/// What the scheduler and its runners share for one block.
struct Shared {
    /// The unstarted threads, in the order they are to start.
    fresh: RefCell<VecDeque<usize>>,
    /// Threads that returned since the scheduler last looked.
    finished: RefCell<Vec<usize>>,
    /// The block's thread contexts (the worker's `ctxs`).
    ctxs: Cell<*const ThreadCtx>,
    entry: Entry,
    params: Params,
}

#[derive(Clone, Copy, PartialEq)]
enum State {
    /// Not started, or ready to resume.
    Ready,
    Barrier(Site),
    Warp,
    MBarrier {
        addr: u32,
        parity: u32,
        site: Site,
    },
    Group(Site),
    Named {
        id: u32,
        threads: u32,
        site: Site,
    },
    Done,
}

thread_local! {
    /// Stacks of finished coroutines, with their sizes, reused by the next
    /// ones.
    static POOL: RefCell<Vec<(usize, DefaultStack)>> = const { RefCell::new(Vec::new()) };
}

/// Stacks left by the OS threads of parallel launches (which end with their
/// launch), for the next launch's threads.
static SPARE: Mutex<Vec<(usize, DefaultStack)>> = Mutex::new(Vec::new());

/// Gives this OS thread's pooled stacks to [`SPARE`] (a parallel launch's
/// worker thread, before it ends).
pub(crate) fn release_stacks() {
    let mut stacks = POOL.with(|p| std::mem::take(&mut *p.borrow_mut()));
    SPARE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .append(&mut stacks);
}

/// A small, seedable generator (SplitMix64) for shuffled schedules.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The kernel's parameters, shared by the workers of a launch.
#[derive(Clone, Copy)]
pub(crate) struct Params(pub *const *mut c_void);

// SAFETY: the parameter array outlives the launch; the kernel's contract says
// what its threads may do with the values, wherever they run.
unsafe impl Send for Params {}
// SAFETY: as above; the array is only read.
unsafe impl Sync for Params {}

/// What [`Worker::run`] did with its turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    /// The block ran to its end.
    Done,
    /// The block parked: its turn's resumes were used up, or a thread
    /// yielded at global memory.
    Parked,
}

/// Runs blocks of one launch on the calling OS thread: one block at a time
/// ([`run_block`](Self::run_block)), or, for the interleaved schedule, one
/// resident block that runs in turns ([`start`](Self::start), then
/// [`run`](Self::run) until it is done).
pub(crate) struct Worker {
    shape: LaunchShape,
    shared: Box<Shared>,
    seed: Option<u64>,
    state: Box<BlockState>,
    ctxs: Vec<ThreadCtx>,
    states: Vec<State>,
    pending: Vec<Option<Pending>>,
    /// Lanes of each warp that wait in a collective.
    waiting: Vec<u32>,
    ready: VecDeque<(usize, u32)>,
    /// Each waiting thread's runner (none between blocks).
    cos: Vec<Option<Co>>,
    /// The block's threads that have exited.
    done: usize,
    /// The block's thread order (with a seed).
    rng: Option<Rng>,
    /// Interleaved schedule: the seed of the worker's turns, and the
    /// block's draws of where it parks.
    interleave: Option<(u64, Rng)>,
    /// The block's linear index.
    pub linear: u64,
    /// Interleaved schedule: events that let another block go on (a thread
    /// exited, a barrier released, an atomic store or read-modify-write of
    /// global memory), since the worker was made.
    pub progress: u64,
    /// Interleaved schedule: atomic loads of global memory since the
    /// worker was made (what a spin-wait does).
    pub polls: u64,
    /// The block's mbarrier phases completed when its waiters were last
    /// looked at.
    completions: u64,
    /// Bytes of each runner's stack ([`super::SimOptions::stack_bytes`]).
    stack_bytes: usize,
}

impl Worker {
    pub fn new(
        kernel: &'static str,
        shape: LaunchShape,
        entry: Entry,
        params: Params,
        options: &super::SimOptions,
        budget: u32,
        fifo: std::sync::Arc<super::printf::Fifo>,
    ) -> Worker {
        trap::install();
        Worker {
            shape,
            shared: Box::new(Shared {
                fresh: RefCell::new(VecDeque::new()),
                finished: RefCell::new(Vec::new()),
                ctxs: Cell::new(std::ptr::null()),
                entry,
                params,
            }),
            seed: options.seed,
            state: Box::new(BlockState::new(
                kernel,
                shape.block,
                shape.dynamic_shared_bytes,
                budget,
                fifo,
            )),
            ctxs: Vec::new(),
            states: Vec::new(),
            pending: Vec::new(),
            waiting: Vec::new(),
            ready: VecDeque::new(),
            cos: Vec::new(),
            done: 0,
            rng: None,
            interleave: None,
            linear: 0,
            progress: 0,
            polls: 0,
            completions: 0,
            stack_bytes: options.stack_bytes.max(super::MIN_STACK_BYTES),
        }
    }

    /// The worker for the interleaved schedule, its turns drawn from `seed`:
    /// its threads yield at global atomics ([`Event::Global`]).
    pub fn interleaved(mut self, seed: u64) -> Worker {
        self.interleave = Some((seed, Rng(seed)));
        self.state.interleaved = true;
        self
    }

    /// The printf output of the blocks run since the last call.
    pub fn take_output(&self) -> Vec<u8> {
        std::mem::take(&mut self.state.out.borrow_mut())
    }

    /// Runs block `linear` (x fastest) to completion.
    pub fn run_block(&mut self, linear: u64) -> Result<(), SimError> {
        self.start(linear);
        while self.run(u32::MAX)? == Turn::Parked {}
        Ok(())
    }

    /// Makes block `linear` (x fastest) this worker's, none of its threads
    /// started yet.
    pub fn start(&mut self, linear: u64) {
        self.linear = linear;
        let [gx, gy, _] = self.shape.grid;
        let (gx, gy) = (gx as u64, gy as u64);
        let block = [
            (linear % gx) as u32,
            ((linear / gx) % gy) as u32,
            (linear / (gx * gy)) as u32,
        ];
        self.state.start_block(block);
        let [bx, by, bz] = self.shape.block;
        let n = (bx * by * bz) as usize;
        if self.ctxs.len() != n {
            // Once per launch: the index registers of every thread of a block.
            self.ctxs.clear();
            let [mut tx, mut ty, mut tz] = [0u32; 3];
            for t in 0..n as u32 {
                self.ctxs.push(ThreadCtx {
                    thread: [tx, ty, tz],
                    block,
                    block_dim: self.shape.block,
                    grid_dim: self.shape.grid,
                    linear: t,
                    block_state: &*self.state,
                    yielder: Cell::new(std::ptr::null()),
                });
                tx += 1;
                if tx == bx {
                    tx = 0;
                    ty += 1;
                    if ty == by {
                        ty = 0;
                        tz += 1;
                    }
                }
            }
        }
        for c in &mut self.ctxs {
            c.block = block;
        }
        self.states.clear();
        self.states.resize(n, State::Ready);
        self.pending.clear();
        self.pending.resize(n, None);
        self.waiting.clear();
        self.waiting.resize(n.div_ceil(32), 0);
        self.ready.clear();
        self.done = 0;
        self.completions = 0;
        if let Some((seed, r)) = &mut self.interleave {
            *r = Rng(*seed ^ linear.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        }
        self.rng = self
            .seed
            .map(|s| Rng(s ^ linear.wrapping_mul(0x2545_f491_4f6c_dd1d)));
        self.shared.ctxs.set(self.ctxs.as_ptr());
        self.shared.finished.borrow_mut().clear();
        let mut fresh = self.shared.fresh.borrow_mut();
        fresh.clear();
        fresh.extend(0..n);
        if let Some(r) = &mut self.rng {
            // A random permutation (Fisher-Yates) of the start order.
            for k in (1..n).rev() {
                fresh.swap(k, r.below(k + 1));
            }
        }
        drop(fresh);
        self.cos.resize_with(n, || None);
    }

    /// Runs the block's threads until it ends ([`Turn::Done`]), or parks
    /// ([`Turn::Parked`]) after `resumes` resumes or where a thread yields
    /// at global memory ([`Event::Global`], interleaved schedule only):
    /// after every store or read-modify-write (another block sees it before
    /// this one goes on), and before one load in eight (drawn by the
    /// block's seed: a spin-wait lets the others run, and a load that does
    /// not park reads what was there when it parked last). A fault or
    /// finding ends the block.
    pub fn run(&mut self, resumes: u32) -> Result<Turn, SimError> {
        let mut cos = std::mem::take(&mut self.cos);
        let mut rng = self.rng.take();
        let result = self.schedule(&mut cos, &mut rng, resumes);
        if !matches!(result, Ok(Turn::Parked)) {
            // Suspended coroutines (after a finding) are unwound before the
            // contexts they point to change.
            for co in &mut cos {
                *co = None;
            }
        }
        self.cos = cos;
        self.rng = rng;
        result
    }

    fn schedule(
        &mut self,
        cos: &mut [Option<Co>],
        rng: &mut Option<Rng>,
        mut resumes: u32,
    ) -> Result<Turn, SimError> {
        loop {
            if resumes == 0 {
                return Ok(Turn::Parked);
            }
            resumes -= 1;
            // Unstarted threads first (the GPU's order, roughly: every thread
            // runs up to its first wait), then the ready ones; with a seed,
            // any of them at random.
            let fresh = self.shared.fresh.borrow().len();
            let pick = match rng {
                Some(r) if fresh + self.ready.len() > 0 => {
                    let k = r.below(fresh + self.ready.len());
                    if k < fresh {
                        None
                    } else {
                        self.ready.swap_remove_back(k - fresh)
                    }
                }
                _ if fresh > 0 => None,
                _ => match self.ready.pop_front() {
                    Some(x) => Some(x),
                    None if self.done == self.states.len() => return Ok(Turn::Done),
                    None => {
                        if !self.land_for_waiter() && !self.resolve_active_masks() {
                            self.release_barrier()?;
                        }
                        continue;
                    }
                },
            };
            let (mut co, value) = match pick {
                Some((i, value)) => {
                    context::set_current(&self.ctxs[i]);
                    (cos[i].take().expect("a waiting thread's runner"), value)
                }
                // One thread per runner under a seed, so that the scheduler
                // picks every next thread.
                None => (self.runner(rng.is_none()), 0),
            };
            trap::set_handler(Some(co.trap_handler()));
            let r = co.resume(value);
            trap::set_handler(None);
            context::set_current(std::ptr::null());
            let mut finished = std::mem::take(&mut *self.shared.finished.borrow_mut());
            for &t in &finished {
                self.states[t] = State::Done;
                self.done += 1;
                self.progress += 1;
                self.check_exit(t)?;
            }
            // The list's allocation goes back for the next runs.
            finished.clear();
            *self.shared.finished.borrow_mut() = finished;
            self.wake_mbarrier_waiters();
            match r {
                CoroutineResult::Yield((t, Event::Barrier(site))) => {
                    self.states[t] = State::Barrier(site);
                    cos[t] = Some(co);
                }
                CoroutineResult::Yield((t, Event::MBarrier { addr, parity, site })) => {
                    self.states[t] = State::MBarrier { addr, parity, site };
                    cos[t] = Some(co);
                }
                CoroutineResult::Yield((t, Event::Named { id, threads, site })) => {
                    self.states[t] = State::Named { id, threads, site };
                    cos[t] = Some(co);
                    self.try_release_named(id, threads);
                }
                CoroutineResult::Yield((t, Event::WarpGroup(site))) => {
                    self.states[t] = State::Group(site);
                    cos[t] = Some(co);
                    self.try_release_group(t);
                }
                CoroutineResult::Yield((t, Event::Global { wrote })) => {
                    // Ready again, the first of the ready threads.
                    cos[t] = Some(co);
                    self.ready.push_front((t, 0));
                    if wrote {
                        self.progress += 1;
                        return Ok(Turn::Parked);
                    }
                    self.polls += 1;
                    if self
                        .interleave
                        .as_mut()
                        .is_none_or(|(_, r)| r.below(8) == 0)
                    {
                        return Ok(Turn::Parked);
                    }
                }
                CoroutineResult::Yield((t, Event::Warp(p))) => {
                    self.states[t] = State::Warp;
                    self.pending[t] = Some(p);
                    self.waiting[t / 32] += 1;
                    cos[t] = Some(co);
                    // `activemask` resolves when no thread can run (below).
                    if p.op != WarpOp::ActiveMask {
                        self.try_resolve(t)?;
                    }
                }
                CoroutineResult::Return(end) => {
                    let handler = co.trap_handler();
                    POOL.with(|p| p.borrow_mut().push((self.stack_bytes, co.into_stack())));
                    match end {
                        None => {}
                        Some((_, ThreadEnd::Error(e))) => return Err(*e),
                        Some((t, ThreadEnd::Trap { addr, trace })) => {
                            let on_stack = handler.stack_ptr_in_bounds(addr);
                            return Err(trap::report(&self.ctxs[t], addr, on_stack, &trace));
                        }
                    }
                }
            }
        }
    }

    /// A runner: starts the next unstarted thread, and (when `many`) the next
    /// ones after each that returns, until one waits, ends otherwise, or none
    /// is left.
    fn runner(&self, many: bool) -> Co {
        // A pooled stack of this launch's size (the others are unmapped:
        // the size changes only between launches).
        let bytes = self.stack_bytes;
        let take = |v: &mut Vec<(usize, DefaultStack)>| {
            v.retain(|(b, _)| *b == bytes);
            v.pop().map(|(_, s)| s)
        };
        let stack = POOL
            .with(|p| take(&mut p.borrow_mut()))
            .or_else(|| take(&mut SPARE.lock().unwrap_or_else(|e| e.into_inner())))
            .map_or_else(|| DefaultStack::new(bytes), Ok)
            .unwrap_or_else(|e| panic!("simulator: cannot map a thread stack: {e}"));
        let shared: *const Shared = &*self.shared;
        Coroutine::with_stack(stack, move |y: &Yielder<u32, Yield>, _: u32| {
            // SAFETY: the worker keeps `shared` and the contexts it points to
            // alive, unchanged, until this coroutine has finished or been dropped.
            let shared = unsafe { &*shared };
            loop {
                let i = shared.fresh.borrow_mut().pop_front()?;
                // SAFETY: i < the block's threads, the length of `ctxs`.
                let ctx = unsafe { &*shared.ctxs.get().add(i) };
                ctx.yielder.set(y);
                context::set_current(ctx);
                if let Err(end) = run_thread(ctx, shared.entry, shared.params) {
                    return Some((i, end));
                }
                shared.finished.borrow_mut().push(i);
                if !many {
                    return None;
                }
            }
        })
    }

    /// `blockIdx` of the worker's block.
    pub fn block(&self) -> [u32; 3] {
        self.state.block.get()
    }

    /// The lanes of thread `i`'s warp that exist in the block, as a mask.
    fn warp_lanes(&self, i: usize) -> (usize, u32) {
        let first = i / 32 * 32;
        let present = (self.states.len() - first).min(32);
        let mask = if present == 32 {
            u32::MAX
        } else {
            (1u32 << present) - 1
        };
        (first, mask)
    }

    fn warp_error(&self, i: usize, reason: String) -> SimError {
        SimError::WarpCollective {
            kernel: self.state.kernel,
            at: self.ctxs[i].id(),
            reason,
        }
    }

    /// Thread `i` joined a collective: resolve it when every lane of its
    /// mask that has not exited is there, at a collective of the same kind
    /// and mask (CUDA's rule: the non-exited lanes named in the mask must
    /// call). A lane of the mask still running, or waiting in another
    /// collective, is waited for: a wait that never ends is reported when no
    /// thread of the block can go on.
    fn try_resolve(&mut self, i: usize) -> Result<(), SimError> {
        let p = self.pending[i].expect("a pending collective");
        let (first, present) = self.warp_lanes(i);
        let lane = (i - first) as u32;
        let at = context::at;
        if p.mask & (1 << lane) == 0 {
            return Err(self.warp_error(
                i,
                format!(
                    "{:?} at {}: lane {lane} is not in its own member mask {:#010x}",
                    p.op,
                    at(p.site),
                    p.mask
                ),
            ));
        }
        let exited = (0..32u32)
            .filter(|&l| present & (1 << l) != 0 && self.states[first + l as usize] == State::Done)
            .fold(0u32, |m, l| m | (1 << l));
        let mask = p.mask & present & !exited;
        for l in 0..32 {
            if mask & (1 << l) == 0 {
                continue;
            }
            match self.pending[first + l] {
                Some(q) if q.op == p.op && q.mask == p.mask => {}
                _ => return Ok(()),
            }
        }
        let value = |l: u32| self.pending[first + l as usize].map(|q| q.value);
        let mut results = [0u32; 32];
        let ballot = (0..32)
            .filter(|&l| mask & (1 << l) != 0 && value(l) != Some(0))
            .fold(0u32, |b, l| b | (1 << l));
        for l in 0..32u32 {
            if mask & (1 << l) == 0 {
                continue;
            }
            let q = self.pending[first + l as usize].expect("checked above");
            // The lanes of the mask holding this lane's value.
            let same = || {
                (0..32)
                    .filter(|&k| mask & (1 << k) != 0 && value(k) == Some(q.value))
                    .fold(0u32, |b, k| b | (1 << k))
            };
            results[l as usize] = match q.op {
                WarpOp::Ballot => ballot,
                WarpOp::Any => (ballot != 0) as u32,
                WarpOp::All => (ballot == mask) as u32,
                WarpOp::Sync | WarpOp::ActiveMask => 0,
                WarpOp::MatchAny => same(),
                WarpOp::MatchAll => {
                    if same() == mask {
                        mask
                    } else {
                        0
                    }
                }
                op => {
                    let src = shfl_source(op, l, q.arg);
                    if exited & p.mask & (1 << src) != 0 {
                        // Undefined on the GPU: reported.
                        return Err(self.warp_error(
                            first + l as usize,
                            format!(
                                "{op:?} at {} with mask {:#010x}: lane {l} reads lane {src}, \
                                 which has exited (undefined on the GPU)",
                                at(q.site),
                                q.mask
                            ),
                        ));
                    }
                    // A source outside the mask is undefined on the GPU: the
                    // lane gets its own value here.
                    if mask & (1 << src) != 0 {
                        value(src).unwrap_or(q.value)
                    } else {
                        q.value
                    }
                }
            };
        }
        if p.op == WarpOp::Sync {
            self.state.warp_synced(first, mask);
        }
        for (l, &result) in results.iter().enumerate() {
            if mask & (1 << l) != 0 {
                let t = first + l;
                self.pending[t] = None;
                self.waiting[t / 32] -= 1;
                self.states[t] = State::Ready;
                self.ready.push_back((t, result));
            }
        }
        Ok(())
    }

    /// No thread can run: the lanes of a warp that wait at one `activemask`
    /// call site get the mask of them (the lanes that reached it together).
    /// Returns whether any did.
    fn resolve_active_masks(&mut self) -> bool {
        let mut resolved = false;
        for i in 0..self.states.len() {
            let Some(p) = self.pending[i].filter(|p| p.op == WarpOp::ActiveMask) else {
                continue;
            };
            let first = i / 32 * 32;
            let lanes: Vec<usize> = (first..(first + 32).min(self.states.len()))
                .filter(|&t| {
                    self.pending[t].is_some_and(|q| q.op == WarpOp::ActiveMask && q.site == p.site)
                })
                .collect();
            let mask = lanes.iter().fold(0u32, |m, &t| m | 1 << (t - first));
            for t in lanes {
                self.pending[t] = None;
                self.waiting[t / 32] -= 1;
                self.states[t] = State::Ready;
                self.ready.push_back((t, mask));
            }
            resolved = true;
        }
        resolved
    }

    /// Threads waiting on an mbarrier phase that completed since the last
    /// look are ready again.
    fn wake_mbarrier_waiters(&mut self) {
        let completions = self.state.hopper.borrow().completions;
        if completions == self.completions {
            return;
        }
        self.completions = completions;
        let hopper = self.state.hopper.borrow();
        for (i, s) in self.states.iter_mut().enumerate() {
            if let State::MBarrier { addr, parity, .. } = *s
                && hopper.phase_done(addr, parity) != Some(false)
            {
                *s = State::Ready;
                self.ready.push_back((i, 0));
            }
        }
    }

    /// No thread can run: the first thread waiting on an mbarrier with TMA
    /// loads in flight is ready again, to land them (the copy engine
    /// catches up). Returns whether there was one.
    fn land_for_waiter(&mut self) -> bool {
        let hopper = self.state.hopper.borrow();
        let found = self
            .states
            .iter()
            .position(|s| matches!(*s, State::MBarrier { addr, .. } if hopper.has_inflight(addr)));
        drop(hopper);
        if let Some(i) = found {
            self.states[i] = State::Ready;
            self.ready.push_back((i, 0));
        }
        found.is_some()
    }

    /// A thread waits at named barrier `id`: when `threads` do, they go on
    /// (a new barrier interval for the race detector, block-wide: the
    /// accesses it orders are not reported, nor those of the threads that
    /// did not take part).
    fn try_release_named(&mut self, id: u32, threads: u32) {
        let waiting = |s: &State| matches!(*s, State::Named { id: i, .. } if i == id);
        if self.states.iter().filter(|s| waiting(s)).count() < threads as usize {
            return;
        }
        self.state.barrier_passed();
        self.progress += 1;
        for (t, s) in self.states.iter_mut().enumerate() {
            if waiting(s) {
                *s = State::Ready;
                self.ready.push_back((t, 0));
            }
        }
    }

    /// Thread `i` waits at `wgmma.wait_group` (or exited): when every thread
    /// of its warpgroup that has not exited waits there, they all go on.
    fn try_release_group(&mut self, i: usize) {
        let first = i / 128 * 128;
        let end = (first + 128).min(self.states.len());
        let group = first..end;
        let waiting = self.states[group.clone()]
            .iter()
            .any(|s| matches!(s, State::Group(_)));
        if !waiting
            || !self.states[group.clone()]
                .iter()
                .all(|s| matches!(s, State::Group(_) | State::Done))
        {
            return;
        }
        for t in group {
            if matches!(self.states[t], State::Group(_)) {
                self.states[t] = State::Ready;
                self.ready.push_back((t, 0));
            }
        }
    }

    /// Thread `i` exited: the collectives of its warp that waited for it
    /// may now be complete (exited lanes take no part). A lane waiting at
    /// `activemask` is not one of them: it waits for no lane, and gets its
    /// mask when no thread can run ([`Self::resolve_active_masks`]).
    fn check_exit(&mut self, i: usize) -> Result<(), SimError> {
        self.try_release_group(i);
        if self.waiting[i / 32] == 0 {
            return Ok(());
        }
        let (first, present) = self.warp_lanes(i);
        for l in 0..32 {
            let waits = self.pending[first + l].is_some_and(|p| p.op != WarpOp::ActiveMask);
            if present & (1 << l) != 0 && waits {
                self.try_resolve(first + l)?;
            }
        }
        Ok(())
    }

    /// No thread can run: release the barrier when every thread that has
    /// not exited waits at the same one (exited threads count as arrived, as
    /// on compute capability 7.0 and later), else report what each waits at.
    fn release_barrier(&mut self) -> Result<(), SimError> {
        let first_site = match self.states.iter().find(|s| **s != State::Done) {
            Some(State::Barrier(s)) => Some(*s),
            _ => None,
        };
        if let Some(site) = first_site
            && self
                .states
                .iter()
                .all(|s| *s == State::Done || matches!(s, State::Barrier(t) if *t == site))
        {
            self.state.barrier_passed();
            self.progress += 1;
            for (i, s) in self.states.iter_mut().enumerate() {
                if *s != State::Done {
                    *s = State::Ready;
                    self.ready.push_back((i, 0));
                }
            }
            return Ok(());
        }
        let mut stuck: Vec<Stuck> = Vec::new();
        for (i, s) in self.states.iter().enumerate() {
            let place = match s {
                State::Barrier(site) => format!(
                    "wait at sync_threads ({}:{}:{})",
                    site.file(),
                    site.line(),
                    site.column()
                ),
                State::Done => "exited".to_string(),
                State::Warp => {
                    let p = self.pending[i].expect("a pending collective");
                    format!(
                        "wait at warp collective {:?} with mask {:#010x} ({}:{}:{})",
                        p.op,
                        p.mask,
                        p.site.file(),
                        p.site.line(),
                        p.site.column()
                    )
                }
                State::MBarrier { addr, parity, site } => format!(
                    "deadlock: wait at mbarrier.try_wait with parity {parity} ({}:{}:{}) on the \
                     barrier at shared offset {addr}, {}",
                    site.file(),
                    site.line(),
                    site.column(),
                    self.state.hopper.borrow().describe(*addr)
                ),
                State::Named { id, threads, site } => format!(
                    "wait at named barrier {id} for {threads} threads ({}:{}:{})",
                    site.file(),
                    site.line(),
                    site.column()
                ),
                State::Group(site) => format!(
                    "wait at wgmma.wait_group ({}:{}:{}) for the rest of the warpgroup",
                    site.file(),
                    site.line(),
                    site.column()
                ),
                State::Ready => unreachable!("no thread is ready"),
            };
            let thread = self.ctxs[i].thread;
            match stuck.iter_mut().find(|g| g.place == place) {
                Some(g) => g.threads.push(thread),
                None => stuck.push(Stuck {
                    place,
                    threads: vec![thread],
                }),
            }
        }
        Err(SimError::BarrierDivergence {
            kernel: self.state.kernel,
            block: self.state.block.get(),
            stuck,
        })
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // A parked block's coroutines are unwound while the contexts they
        // point to are still there.
        for co in &mut self.cos {
            *co = None;
        }
    }
}

/// Runs the kernel body as the simulated thread `ctx`, catching what ends it
/// early: a finding, a fault, or a panic (located by the panic hook).
fn run_thread(ctx: &ThreadCtx, entry: Entry, params: Params) -> Result<(), ThreadEnd> {
    // SAFETY: `launch`'s caller guarantees the parameters match the entry.
    let payload = match std::panic::catch_unwind(AssertUnwindSafe(|| unsafe { entry(params.0) })) {
        Ok(()) => return Ok(()),
        Err(payload) => payload,
    };
    let payload = match payload.downcast::<Finding>() {
        Ok(f) => return Err(ThreadEnd::Error(Box::new(f.0))),
        Err(payload) => payload,
    };
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned());
    let fault = |file, line, column, message| {
        Err(ThreadEnd::Error(Box::new(SimError::Fault {
            kernel: ctx.block_state().kernel,
            file,
            line,
            column,
            at: ctx.id(),
            message,
        })))
    };
    match (trap::take_panic(), message) {
        (Some(p), _) => fault(p.file, p.line, p.column, p.message),
        // A panic whose hook was replaced after ours: no location, still a fault.
        (None, Some(m)) => fault("<unknown>".to_string(), 0, 0, m),
        // Not a panic of the kernel (the coroutine being unwound by its
        // drop): let it go on to the coroutine's root.
        (None, None) => std::panic::resume_unwind(payload),
    }
}

/// The source lane of a 32-lane `shfl.sync` with the `c` operand the device
/// layer uses (clamp 31 for down/xor/idx, 0 for up; no segments), as PTX
/// defines it: `b` is taken modulo 32, and a lane whose source is out of
/// range reads its own value.
fn shfl_source(op: WarpOp, lane: u32, b: u32) -> u32 {
    let b = b & 0x1f;
    let (c, segmask) = match op {
        WarpOp::ShflUp => (0u32, 0u32),
        _ => (0x1f, 0),
    };
    let max_lane = (lane & segmask) | (c & !segmask);
    let min_lane = lane & segmask;
    let (j, ok) = match op {
        WarpOp::ShflUp => {
            let j = lane as i32 - b as i32;
            (j, j >= max_lane as i32)
        }
        WarpOp::ShflDown => {
            let j = (lane + b) as i32;
            (j, j <= max_lane as i32)
        }
        WarpOp::ShflXor => {
            let j = (lane ^ b) as i32;
            (j, j <= max_lane as i32)
        }
        _ => {
            let j = (min_lane | (b & !segmask)) as i32;
            (j, j <= max_lane as i32)
        }
    };
    if ok { j as u32 } else { lane }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shfl_sources_follow_ptx() {
        assert_eq!(shfl_source(WarpOp::ShflDown, 3, 4), 7);
        assert_eq!(shfl_source(WarpOp::ShflDown, 30, 4), 30);
        assert_eq!(shfl_source(WarpOp::ShflDown, 0, 33), 1);
        assert_eq!(shfl_source(WarpOp::ShflUp, 3, 4), 3);
        assert_eq!(shfl_source(WarpOp::ShflUp, 5, 4), 1);
        assert_eq!(shfl_source(WarpOp::ShflXor, 5, 16), 21);
        assert_eq!(shfl_source(WarpOp::ShflIdx, 9, 35), 3);
    }
}
