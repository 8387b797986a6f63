//! Barriers and memory fences.
use core::arch::{asm, nvptx};

/// `__syncthreads()`: waits until every thread of the block reaches this
/// point, and makes their shared- and global-memory writes visible to the
/// block.
///
/// Every thread of the block must reach the same barrier (no barrier inside a
/// branch that only some threads take), or the block deadlocks.
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: bar.sync 0 has no memory-safety preconditions; the uniformity
    // requirement above is a liveness rule, documented for callers.
    unsafe { nvptx::_syncthreads() }
}

/// `__threadfence_block()`: orders this thread's memory accesses as seen by
/// the other threads of its block.
#[inline(always)]
pub fn thread_fence_block() {
    // SAFETY: a fence only orders memory operations.
    unsafe { asm!("membar.cta;", options(nostack)) }
}

/// `__threadfence()`: orders this thread's memory accesses as seen by every
/// thread of the device.
#[inline(always)]
pub fn thread_fence() {
    // SAFETY: a fence only orders memory operations.
    unsafe { asm!("membar.gl;", options(nostack)) }
}
