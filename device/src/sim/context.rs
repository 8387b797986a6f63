//! The current simulated thread (a thread-local pointer set by the
//! scheduler) and the grid runner.
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::c_void;
use std::panic::AssertUnwindSafe;

use super::{Entry, LaunchShape, SimError, SimOptions, SimThread};

/// One simulated thread's registers and its block's state.
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
}

/// A block's shared memory and the launch-wide layout of static arrays.
pub(crate) struct BlockState {
    /// The kernel.
    pub kernel: &'static str,
    /// Shared memory, 16-byte aligned words.
    pub shared: RefCell<Vec<u128>>,
    /// Bytes in use: dynamic, then the static arrays declared so far.
    pub shared_len: Cell<u32>,
    /// Static arrays' offsets by key.
    pub statics: RefCell<HashMap<usize, u32>>,
    /// The budget for static + dynamic shared bytes.
    pub shared_budget: u32,
    /// The first fault, if any.
    pub fault: RefCell<Option<SimError>>,
}

thread_local! {
    static CURRENT: Cell<*const ThreadCtx> = const { Cell::new(std::ptr::null()) };
}

/// The simulated thread running on this OS thread. Panics (a fault of the
/// caller's code) outside a simulated kernel.
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

/// Runs the grid, block by block, thread by thread.
///
/// # Safety
/// As for [`launch`](super::launch).
pub(crate) unsafe fn run_grid(
    kernel: &'static str,
    shape: LaunchShape,
    entry: Entry,
    params: &[*mut c_void],
    options: &SimOptions,
) -> Result<(), SimError> {
    let [gx, gy, gz] = shape.grid;
    let [bx, by, bz] = shape.block;
    let dynamic = shape.dynamic_shared_bytes.next_multiple_of(16);
    let budget = super::shared_budget(options);
    let state = BlockState {
        kernel,
        shared: RefCell::new(vec![0; (budget as usize).div_ceil(16) + 1]),
        shared_len: Cell::new(dynamic),
        statics: RefCell::new(HashMap::new()),
        shared_budget: budget,
        fault: RefCell::new(None),
    };
    for z in 0..gz {
        for y in 0..gy {
            for x in 0..gx {
                for tz in 0..bz {
                    for ty in 0..by {
                        for tx in 0..bx {
                            let ctx = ThreadCtx {
                                thread: [tx, ty, tz],
                                block: [x, y, z],
                                block_dim: shape.block,
                                grid_dim: shape.grid,
                                linear: tx + bx * (ty + by * tz),
                                block_state: &state,
                            };
                            CURRENT.with(|c| c.set(&ctx));
                            // SAFETY: forwarded from the caller.
                            let r = std::panic::catch_unwind(AssertUnwindSafe(|| unsafe {
                                entry(params.as_ptr())
                            }));
                            CURRENT.with(|c| c.set(std::ptr::null()));
                            if let Some(e) = state.fault.borrow_mut().take() {
                                return Err(e);
                            }
                            if let Err(payload) = r {
                                let message = payload
                                    .downcast_ref::<&str>()
                                    .map(|s| s.to_string())
                                    .or_else(|| payload.downcast_ref::<String>().cloned())
                                    .unwrap_or_else(|| "panic".into());
                                return Err(SimError::Fault {
                                    kernel,
                                    file: String::new(),
                                    line: 0,
                                    column: 0,
                                    at: ctx.id(),
                                    message,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Records a fault of the current thread and unwinds out of it.
pub(crate) fn fail(file: &str, line: u32, column: u32, message: &str) -> ! {
    let p = CURRENT.with(Cell::get);
    if p.is_null() {
        panic!("{file}:{line}:{column}: {message}");
    }
    let ctx = current();
    let b = ctx.block_state();
    b.fault.borrow_mut().get_or_insert(SimError::Fault {
        kernel: b.kernel,
        file: file.to_string(),
        line,
        column,
        at: ctx.id(),
        message: message.to_string(),
    });
    std::panic::resume_unwind(Box::new(FaultUnwind))
}

/// The unwind payload of [`fail`]: the fault is already recorded.
pub(crate) struct FaultUnwind;

/// The shared-memory offset of the static array keyed `key` (`bytes` long),
/// laid out after the dynamic memory and the arrays declared before it.
pub(crate) fn static_shared(key: usize, name: &'static str, bytes: usize) -> u32 {
    let ctx = current();
    let b = ctx.block_state();
    if let Some(&off) = b.statics.borrow().get(&key) {
        return off;
    }
    let off = b.shared_len.get().next_multiple_of(16);
    let end = off as u64 + bytes as u64;
    if end > b.shared_budget as u64 {
        fail(
            file!(),
            line!(),
            column!(),
            &format!(
                "shared_array {name} ({bytes} bytes) takes the block's shared memory to {end} bytes, past the {} allowed",
                b.shared_budget
            ),
        );
    }
    b.shared_len.set(end as u32);
    b.statics.borrow_mut().insert(key, off);
    off
}

/// The dynamic shared memory's offset (0: it comes first).
pub(crate) fn dynamic_shared() -> u32 {
    0
}

/// A pointer to `size` bytes of the current block's shared memory at
/// `offset`; a fault when out of range.
#[track_caller]
pub(crate) fn shared_ptr(offset: u32, size: usize) -> *mut u8 {
    let ctx = current();
    let b = ctx.block_state();
    if offset as u64 + size as u64 > b.shared_len.get() as u64 {
        let l = std::panic::Location::caller();
        fail(
            l.file(),
            l.line(),
            l.column(),
            &format!(
                "shared-memory access of {size} bytes at offset {offset} past the block's {} bytes",
                b.shared_len.get()
            ),
        );
    }
    // SAFETY: offset + size ≤ shared_len ≤ the buffer's bytes.
    unsafe {
        b.shared
            .borrow_mut()
            .as_mut_ptr()
            .cast::<u8>()
            .add(offset as usize)
    }
}

/// `sync_threads` (the first version runs threads one after another: a
/// no-op until the scheduler lands).
pub(crate) fn sync_threads(_site: &'static std::panic::Location<'static>) {}

/// A warp collective (not simulated yet in this first version: a fault).
pub(crate) fn warp_collective(
    op: super::WarpOp,
    _mask: u32,
    _value: u32,
    _arg: u32,
    site: &'static std::panic::Location<'static>,
) -> u32 {
    fail(
        site.file(),
        site.line(),
        site.column(),
        &format!("warp collective {op:?}: not simulated yet"),
    )
}
