//! The current simulated thread (a thread-local pointer the scheduler sets
//! around each resume), its block's shared memory with the race detector,
//! and the way a thread reports a fault or a finding (an unwind that the
//! scheduler catches at the coroutine's root).
use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::HashMap;
use std::panic::Location;

use corosensei::Yielder;

use super::scheduler::{Event, Yield};
use super::{Access, RaceSource, SimError, SimThread};

/// A call site in kernel code (`#[track_caller]`).
pub(crate) type Site = &'static Location<'static>;

/// `file:line:column` of a site.
pub(crate) fn at(site: Site) -> String {
    format!("{}:{}:{}", site.file(), site.line(), site.column())
}

/// One simulated thread: its index registers and its block.
pub(crate) struct ThreadCtx {
    /// `threadIdx`.
    pub thread: [u32; 3],
    /// `blockIdx`.
    pub block: [u32; 3],
    /// `blockDim`.
    pub block_dim: [u32; 3],
    /// `gridDim`.
    pub grid_dim: [u32; 3],
    /// The linear thread index in the block (x fastest).
    pub linear: u32,
    /// The block's shared memory and bookkeeping.
    pub block_state: *const BlockState,
    /// The yielder of the coroutine running the thread.
    pub yielder: Cell<*const Yielder<u32, Yield>>,
}

impl ThreadCtx {
    /// This thread's identity for reports.
    pub fn id(&self) -> SimThread {
        SimThread {
            block: self.block,
            thread: self.thread,
        }
    }

    /// The block's state.
    pub fn block_state(&self) -> &BlockState {
        // SAFETY: the scheduler keeps the block state alive while any of its
        // threads runs.
        unsafe { &*self.block_state }
    }

    /// Suspends the thread with `event`; returns the value it is resumed with.
    pub fn suspend(&self, event: Event) -> u32 {
        let y = self.yielder.get();
        assert!(
            !y.is_null(),
            "a simulated thread suspended outside its coroutine"
        );
        // SAFETY: the yielder belongs to the coroutine running this thread,
        // which is the caller (the pointer is set when the thread starts).
        unsafe { (*y).suspend((self.linear as usize, event)) }
    }
}

/// The race detector's record of one 4-byte shared word. Each access
/// keeps the barrier epoch it happened in and the `syncwarp` sequence number
/// of the accessing thread's warp at the time (see [`BlockState::ordered`]).
#[derive(Clone, Copy, Default)]
struct Shadow {
    /// The barrier epoch of the last write (0: never).
    write_epoch: u32,
    /// The last writer's linear thread index.
    writer: u32,
    /// Its warp's `syncwarp` sequence number at the write.
    write_seq: u32,
    /// Where it wrote.
    write_site: Option<Site>,
    /// Plain reads.
    reads: Accessors,
    /// Atomic read-modify-writes.
    atomics: Accessors,
}

/// Up to two distinct threads that accessed a word in one barrier epoch.
#[derive(Clone, Copy, Default)]
struct Accessors {
    /// The barrier epoch of the accesses below (0: none).
    epoch: u32,
    /// The threads (`NO_THREAD`: none).
    threads: [u32; 2],
    /// Each one's warp `syncwarp` sequence number at its latest access.
    seqs: [u32; 2],
    /// Where each one accessed it last.
    sites: [Option<Site>; 2],
}

impl Accessors {
    fn record(&mut self, epoch: u32, thread: u32, seq: u32, site: Site) {
        if self.epoch != epoch {
            *self = Accessors {
                epoch,
                threads: [thread, NO_THREAD],
                seqs: [seq, 0],
                sites: [Some(site), None],
            };
        } else if let Some(k) = (0..2).find(|&k| self.threads[k] == thread) {
            self.seqs[k] = seq;
            self.sites[k] = Some(site);
        } else if self.threads[1] == NO_THREAD {
            self.threads[1] = thread;
            self.seqs[1] = seq;
            self.sites[1] = Some(site);
        }
    }

    /// A thread of `epoch` for which `races(thread, seq)` holds, and where
    /// it accessed the word.
    fn racing(&self, epoch: u32, races: impl Fn(u32, u32) -> bool) -> Option<(u32, Option<Site>)> {
        (self.epoch == epoch)
            .then(|| (0..2).find(|&k| races(self.threads[k], self.seqs[k])))
            .flatten()
            .map(|k| (self.threads[k], self.sites[k]))
    }
}

/// A static shared array of the launch, for reports.
struct StaticArray {
    /// Its offset in the block's shared memory, and its end.
    range: std::ops::Range<u32>,
    /// Its name in `shared_array!`.
    name: &'static str,
    /// Where it is declared.
    declared: Site,
}

const NO_THREAD: u32 = u32::MAX;

/// A block's shared memory, its race-detector shadow, the layout of the
/// static arrays (kept for the whole launch by one worker) and its printf
/// output.
pub(crate) struct BlockState {
    /// The kernel.
    pub kernel: &'static str,
    /// `blockIdx` of the block running now.
    pub block: Cell<[u32; 3]>,
    /// `blockDim`.
    pub block_dim: [u32; 3],
    shared: UnsafeCell<Vec<u128>>,
    shared_len: Cell<u32>,
    statics: RefCell<HashMap<usize, u32>>,
    arrays: RefCell<Vec<StaticArray>>,
    /// The launch's pointer parameters: name and address.
    params: RefCell<Vec<(&'static str, usize)>>,
    budget: u32,
    shadow: UnsafeCell<Vec<Shadow>>,
    /// Barrier epochs: one per block start and per barrier passed; they grow
    /// for the whole launch so that the shadow never needs clearing.
    epoch: Cell<u32>,
    first_epoch: Cell<u32>,
    /// Per warp: how many `syncwarp`s its lanes completed (the launch long).
    warp_seq: RefCell<Vec<u32>>,
    /// Per thread: the sequence number and mask of its latest `syncwarp`.
    last_sync: RefCell<Vec<(u32, u32)>>,
    /// printf output of the block, written out when it ends.
    pub out: RefCell<Vec<u8>>,
    /// The launch's printf FIFO.
    pub fifo: std::sync::Arc<super::printf::Fifo>,
    /// Whether the launch runs under the interleaved schedule (its threads
    /// yield at global atomics: [`super::global_access`]).
    pub interleaved: bool,
    /// The block's mbarriers, TMA loads in flight and wgmma (Hopper).
    pub hopper: RefCell<super::hopper::BlockHopper>,
}

impl BlockState {
    /// A worker's block state for a launch.
    pub fn new(
        kernel: &'static str,
        block_dim: [u32; 3],
        dynamic: u32,
        budget: u32,
        fifo: std::sync::Arc<super::printf::Fifo>,
    ) -> Self {
        let bytes = budget.max(dynamic) as usize + 16;
        let threads = block_dim.iter().map(|&d| d as usize).product::<usize>();
        BlockState {
            kernel,
            block: Cell::new([0; 3]),
            block_dim,
            shared: UnsafeCell::new(vec![0; bytes.div_ceil(16)]),
            shared_len: Cell::new(dynamic.next_multiple_of(16)),
            statics: RefCell::new(HashMap::new()),
            arrays: RefCell::new(Vec::new()),
            params: RefCell::new(Vec::new()),
            budget,
            shadow: UnsafeCell::new(vec![Shadow::default(); bytes.div_ceil(4)]),
            epoch: Cell::new(0),
            first_epoch: Cell::new(1),
            warp_seq: RefCell::new(vec![0; threads.div_ceil(32)]),
            last_sync: RefCell::new(vec![(0, 0); threads]),
            out: RefCell::new(Vec::new()),
            fifo,
            interleaved: false,
            hopper: RefCell::default(),
        }
    }

    /// A new block starts: a new barrier interval.
    pub fn start_block(&self, block: [u32; 3]) {
        self.block.set(block);
        *self.hopper.borrow_mut() = Default::default();
        self.epoch.set(self.epoch.get() + 1);
        self.first_epoch.set(self.epoch.get());
    }

    /// Every thread passed a barrier: a new barrier interval.
    pub fn barrier_passed(&self) {
        self.epoch.set(self.epoch.get() + 1);
    }

    /// The lanes of `mask` in the warp whose first thread is `first`
    /// completed a `syncwarp`: their shared-memory accesses before it are
    /// ordered before the ones after it.
    pub fn warp_synced(&self, first: usize, mask: u32) {
        let mut seqs = self.warp_seq.borrow_mut();
        let seq = &mut seqs[first / 32];
        *seq += 1;
        let mut last = self.last_sync.borrow_mut();
        for lane in (0..32).filter(|l| mask & (1 << l) != 0) {
            if let Some(slot) = last.get_mut(first + lane) {
                *slot = (*seq, mask);
            }
        }
    }

    /// Whether an access by thread `other` at its warp's `syncwarp` sequence
    /// number `other_seq` is ordered before the current access of thread
    /// `me` by a `syncwarp` of them both since (same warp, `me`'s latest
    /// `syncwarp` later than that access and with `other` in its mask).
    fn ordered(&self, other: u32, other_seq: u32, me: u32) -> bool {
        let (seq, mask) = self.last_sync.borrow()[me as usize];
        other / 32 == me / 32 && seq > other_seq && mask & (1 << (other % 32)) != 0
    }

    /// The address of `len` bytes of shared memory at `offset`, with no
    /// race check (the asynchronous proxy's accesses: TMA, wgmma);
    /// `Err(bytes in use)` past them.
    pub fn raw_shared(&self, offset: u32, len: u32) -> Result<*mut u8, u32> {
        let end = self.shared_len.get();
        if offset as u64 + len as u64 > end as u64 {
            return Err(end);
        }
        // SAFETY: offset + len ≤ shared_len ≤ the buffer's bytes.
        Ok(unsafe {
            (*self.shared.get())
                .as_mut_ptr()
                .cast::<u8>()
                .add(offset as usize)
        })
    }

    /// Keeps the launch's pointer parameters (once per launch and worker).
    pub fn note_params(&self, params: &[(&'static str, Option<usize>)]) {
        let mut kept = self.params.borrow_mut();
        if kept.is_empty() {
            kept.extend(params.iter().filter_map(|&(name, a)| Some((name, a?))));
        }
    }

    /// The pointer parameter that points into `[base, base + len]`, if any.
    pub fn parameter_into(&self, base: usize, len: usize) -> Option<&'static str> {
        let params = self.params.borrow();
        let found = params.iter().find(|&&(_, a)| a >= base && a <= base + len);
        found.map(|&(name, _)| name)
    }

    /// What an access of `size` bytes at `offset` touched, for a race
    /// report: the static array's element and declaration, or the dynamic
    /// shared memory's byte.
    fn place(&self, offset: u32, size: usize) -> String {
        match self
            .arrays
            .borrow()
            .iter()
            .find(|a| a.range.contains(&offset))
        {
            Some(a) => format!(
                "`{}[{}]` (shared_array! at {})",
                a.name,
                (offset - a.range.start) as usize / size.max(1),
                at(a.declared)
            ),
            None => format!("dynamic shared memory byte {offset}"),
        }
    }

    /// `threadIdx` of the linear index `linear`.
    pub fn thread_idx(&self, linear: u32) -> [u32; 3] {
        let [bx, by, _] = self.block_dim;
        [linear % bx, (linear / bx) % by, linear / (bx * by)]
    }

    fn thread(&self, linear: u32) -> SimThread {
        SimThread {
            block: self.block.get(),
            thread: self.thread_idx(linear),
        }
    }

    /// Checks an access of `size` bytes at `offset` by thread `linear`
    /// (bounds, then races) and returns its address.
    fn access(&self, offset: u32, size: usize, linear: u32, kind: Access, site: Site) -> *mut u8 {
        let end = offset as u64 + size as u64;
        if end > self.shared_len.get() as u64 {
            fail(
                site.file(),
                site.line(),
                site.column(),
                &format!(
                    "shared-memory access of {size} bytes at offset {offset} past the block's {} bytes",
                    self.shared_len.get()
                ),
            );
        }
        let epoch = self.epoch.get();
        let seq = self.warp_seq.borrow()[linear as usize / 32];
        let races =
            |t: u32, t_seq: u32| t != NO_THREAD && t != linear && !self.ordered(t, t_seq, linear);
        // SAFETY: the shadow is only touched by the worker running this block,
        // one simulated thread at a time, and no reference to it outlives this call.
        let shadow = unsafe { &mut *self.shadow.get() };
        for word in offset / 4..(end as u32).div_ceil(4) {
            let s = &mut shadow[word as usize];
            let write = (s.write_epoch == epoch && races(s.writer, s.write_seq)).then_some((
                s.writer,
                s.write_site,
                Access::Write,
            ));
            let read = s
                .reads
                .racing(epoch, races)
                .map(|(t, at)| (t, at, Access::Read));
            let atomic = s
                .atomics
                .racing(epoch, races)
                .map(|(t, at)| (t, at, Access::Atomic));
            // A write races with every access of another thread, a read with
            // writes and atomics, an atomic with writes and reads.
            let other = match kind {
                Access::Write => {
                    s.write_epoch = epoch;
                    s.writer = linear;
                    s.write_seq = seq;
                    s.write_site = Some(site);
                    write.or(read).or(atomic)
                }
                Access::Read => {
                    s.reads.record(epoch, linear, seq, site);
                    write.or(atomic)
                }
                Access::Atomic => {
                    s.atomics.record(epoch, linear, seq, site);
                    write.or(read)
                }
            };
            if let Some((first, first_site, first_kind)) = other {
                raise(SimError::SharedRace {
                    kernel: self.kernel,
                    offset: word * 4,
                    first: (self.thread(first), first_kind),
                    second: (self.thread(linear), kind),
                    source: Box::new(RaceSource {
                        place: self.place(offset, size),
                        sites: [first_site, Some(site)],
                    }),
                    interval: epoch - self.first_epoch.get(),
                });
            }
        }
        // SAFETY: offset + size ≤ shared_len ≤ the buffer's bytes (checked above).
        unsafe {
            (*self.shared.get())
                .as_mut_ptr()
                .cast::<u8>()
                .add(offset as usize)
        }
    }
}

thread_local! {
    static CURRENT: Cell<*const ThreadCtx> = const { Cell::new(std::ptr::null()) };
}

/// Makes `ctx` (or none) the simulated thread running on this OS thread.
pub(crate) fn set_current(ctx: *const ThreadCtx) {
    CURRENT.with(|c| c.set(ctx));
}

/// The linear index of the simulated thread running on this OS thread, if
/// any (a plain thread-local read: usable in a signal handler).
pub(crate) fn current_linear() -> Option<usize> {
    let p = CURRENT.with(Cell::get);
    // SAFETY: a non-null pointer is a live ThreadCtx (see `current`).
    (!p.is_null()).then(|| unsafe { (*p).linear as usize })
}

/// Whether a simulated thread runs on this OS thread.
pub(crate) fn in_simulated_thread() -> bool {
    !CURRENT.with(Cell::get).is_null()
}

/// The simulated thread running on this OS thread. Panics outside a
/// simulated kernel.
#[inline]
pub(crate) fn current() -> &'static ThreadCtx {
    let p = CURRENT.with(Cell::get);
    assert!(
        !p.is_null(),
        "a device-layer function was called outside a simulated kernel (use sim::launch)"
    );
    // SAFETY: the scheduler sets the pointer to a ThreadCtx that outlives the
    // thread's run and clears it afterwards.
    unsafe { &*p }
}

/// The unwind payload that ends a simulated thread with a finding.
pub(crate) struct Finding(pub SimError);

/// Ends the current simulated thread with `error` (caught at its coroutine's root).
pub(crate) fn raise(error: SimError) -> ! {
    std::panic::resume_unwind(Box::new(Finding(error)))
}

/// Records a fault of the current thread and ends it. Outside a simulated
/// kernel, a panic with the same text.
pub(crate) fn fail(file: &str, line: u32, column: u32, message: &str) -> ! {
    if !in_simulated_thread() {
        panic!("{file}:{line}:{column}: {message}");
    }
    let ctx = current();
    raise(SimError::Fault {
        kernel: ctx.block_state().kernel,
        file: file.to_string(),
        line,
        column,
        at: ctx.id(),
        message: message.to_string(),
    })
}

/// The shared-memory offset of the static array keyed `key` (`bytes` long),
/// laid out after the dynamic memory and the arrays declared before it.
#[track_caller]
#[inline(never)]
pub(crate) fn static_shared(key: usize, name: &'static str, bytes: usize) -> u32 {
    let declared = Location::caller();
    let ctx = current();
    let b = ctx.block_state();
    if let Some(&off) = b.statics.borrow().get(&key) {
        return off;
    }
    let off = b.shared_len.get().next_multiple_of(16);
    let end = off as u64 + bytes as u64;
    if end > b.budget as u64 {
        raise(SimError::LaunchRefused {
            kernel: b.kernel,
            reason: format!(
                "shared_array {name} ({bytes} bytes) takes the block's shared memory to {end} bytes, \
                 past the {} bytes per block (CUDA_ERROR_INVALID_VALUE: invalid argument)",
                b.budget
            ),
        });
    }
    b.shared_len.set(end as u32);
    b.statics.borrow_mut().insert(key, off);
    b.arrays.borrow_mut().push(StaticArray {
        range: off..end as u32,
        name,
        declared,
    });
    off
}

/// The dynamic shared memory's offset (0: it comes first).
pub(crate) fn dynamic_shared() -> u32 {
    0
}

/// The address of `size` bytes of the current block's shared memory at
/// `offset`, after the bounds and race checks of an access of `kind` at `site`.
pub(crate) fn shared_ptr(offset: u32, size: usize, kind: Access, site: Site) -> *mut u8 {
    let ctx = current();
    ctx.block_state()
        .access(offset, size, ctx.linear, kind, site)
}
