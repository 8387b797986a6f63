//! Barriers and memory fences.
//!
//! On the host, [`sync_threads`] suspends the simulated thread until every
//! thread of its block has reached a barrier (the simulator reports a barrier
//! that some threads never reach, with its call site), and the fences are
//! `std::sync::atomic::fence`s.

/// `__syncthreads()`: waits until every thread of the block reaches this
/// point, and makes their shared- and global-memory writes visible to the
/// block.
///
/// Every thread of the block must reach the same barrier (no barrier inside a
/// branch that only some threads take), or the block deadlocks.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn sync_threads() {
    imp::sync_threads()
}

/// `__threadfence_block()`: orders this thread's memory accesses as seen by
/// the other threads of its block.
#[inline(always)]
pub fn thread_fence_block() {
    imp::thread_fence_block()
}

/// `__threadfence()`: orders this thread's memory accesses as seen by every
/// thread of the device.
#[inline(always)]
pub fn thread_fence() {
    imp::thread_fence()
}

#[cfg(target_arch = "nvptx64")]
mod imp {
    use core::arch::{asm, nvptx};

    #[inline(always)]
    pub fn sync_threads() {
        // SAFETY: bar.sync 0 has no memory-safety preconditions; the uniformity
        // requirement above is a liveness rule, documented for callers.
        unsafe { nvptx::_syncthreads() }
    }

    #[inline(always)]
    pub fn thread_fence_block() {
        // SAFETY: a fence only orders memory operations.
        unsafe { asm!("membar.cta;", options(nostack)) }
    }

    #[inline(always)]
    pub fn thread_fence() {
        // SAFETY: a fence only orders memory operations.
        unsafe { asm!("membar.gl;", options(nostack)) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
mod imp {
    use std::sync::atomic::{Ordering, fence};

    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    pub fn sync_threads() {
        crate::sim::sync_threads(std::panic::Location::caller())
    }

    pub fn thread_fence_block() {
        fence(Ordering::SeqCst)
    }

    pub fn thread_fence() {
        fence(Ordering::SeqCst)
    }
}
