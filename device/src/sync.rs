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
///
/// On sm_70 and later it is the non-aligned `barrier.sync 0`: the threads
/// may arrive at different copies of it, which LLVM makes when it duplicates
/// the barrier into the arms of a branch (`bar.sync 0`, the aligned form that
/// `__syncthreads` and `core::arch::nvptx::_syncthreads` are, requires every
/// thread at the same instruction, and such a copy hung a correct kernel on
/// an H200: issue 40, `fidelity::fid_barrier_after_partial_stores`). Below
/// sm_70 it is `bar.sync 0`, which the builder checks
/// (`cuda_kernels_builder::ptx::check_aligned_barriers`).
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
    use core::arch::asm;

    #[cfg(target_feature = "sm_70")]
    #[inline(always)]
    pub fn sync_threads() {
        // SAFETY: barrier.sync 0 has no memory-safety preconditions; the
        // uniformity requirement above is a liveness rule, documented for
        // callers. Not `nomem`: the barrier orders the block's memory
        // accesses, so the compiler must not move them across it.
        unsafe { asm!("barrier.sync 0;", options(nostack)) }
    }

    #[cfg(not(target_feature = "sm_70"))]
    #[inline(always)]
    pub fn sync_threads() {
        // SAFETY: bar.sync 0 has no memory-safety preconditions; the uniformity
        // requirement above is a liveness rule, documented for callers.
        unsafe { core::arch::nvptx::_syncthreads() }
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
