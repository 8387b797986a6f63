//! A block histogram in shared memory (CUB's `BlockHistogram` with the
//! shared-atomic algorithm): the block's privatised bins, counted with
//! `atom.shared.add`, then added to a global histogram.
//!
//! One shared-memory atomic per sample is fast while the samples of a warp
//! fall in different bins, and serialises when they fall in one (32 lanes,
//! one address). [`BlockHistogram::add_warp`] therefore first asks whether
//! the whole warp's samples are in one bin (one shuffle and one vote): then
//! lane 0 adds 32 in one atomic. All-equal or sorted inputs cost one atomic
//! per warp, random ones one per sample.
//!
//! ```
//! use cuda_kernels_device::prelude::*;
//! use cuda_kernels_device::collectives::histogram::BlockHistogram;
//! kernels! {
//!     /// `counts[b]` += how many of `bins` (one per thread, each < 64 or
//!     /// `u32::MAX` for none) are `b`.
//!     ///
//!     /// # Safety
//!     /// `bins` holds one u32 per thread of the grid, `counts` 64 u32.
//!     pub fn count_bins(bins: *const u32, counts: *mut u32) as COUNT_BINS {
//!         let h = BlockHistogram::new(shared_array!(doc_histogram_bins: [u32; 64]), 64);
//!         // SAFETY: the block's own bins; every thread calls these.
//!         unsafe {
//!             h.zero();
//!             let bin = *bins.add(thread::index_1d());
//!             h.add_warp((bin < 64).then_some(bin));
//!             h.flush(counts);
//!         }
//!     }
//! }
//! # fn main() {}
//! ```
use crate::shared::SharedArray;
use crate::{atomic, sync, thread, warp};

/// A block's privatised histogram of `bins ≤ N` bins in shared memory.
#[derive(Clone, Copy)]
pub struct BlockHistogram<const N: usize> {
    counts: SharedArray<u32, N>,
    bins: usize,
}

impl<const N: usize> BlockHistogram<N> {
    /// The histogram of `bins` bins in `counts` (asserted `bins ≤ N`: a
    /// located fault otherwise).
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    pub fn new(counts: SharedArray<u32, N>, bins: usize) -> Self {
        crate::gpu_assert!(bins <= N, "block histogram: more bins than shared memory");
        Self { counts, bins }
    }

    /// Sets every bin to 0, then a barrier. A collective of the block.
    ///
    /// # Safety
    /// The shared array is the block's own, used by nothing else meanwhile.
    #[inline(always)]
    pub unsafe fn zero(&self) {
        let (t, threads) = (
            thread::thread_idx_x() as usize,
            thread::block_dim_x() as usize,
        );
        let mut i = t;
        while i < self.bins {
            // SAFETY: i < bins ≤ N.
            unsafe { self.counts.store(i, 0) };
            i += threads;
        }
        sync::sync_threads();
    }

    /// Counts one sample per lane (`None`: no sample), warp-aggregated when
    /// every lane of the warp has a sample in the same bin. A collective of
    /// the warp (all 32 lanes call it); each `Some(b)` must be `< bins`.
    ///
    /// # Safety
    /// After [`zero`](Self::zero); bins `< bins` (not checked here).
    #[inline(always)]
    pub unsafe fn add_warp(&self, bin: Option<u32>) {
        let b = bin.unwrap_or(u32::MAX);
        let first = warp::shfl_idx_b32(b, 0);
        if warp::all(b == first && b != u32::MAX) {
            if warp::lane_id() == 0 {
                // SAFETY: b < bins ≤ N by the caller.
                unsafe { self.counts.fetch_add(b as usize, 32) };
            }
        } else if b != u32::MAX {
            // SAFETY: as above.
            unsafe { self.counts.fetch_add(b as usize, 1) };
        }
    }

    /// Counts four samples per lane (`None`: no sample), warp-aggregated
    /// when all 128 of the warp are in one bin (one shuffle and one vote for
    /// the four, where [`add_warp`](Self::add_warp) takes one each): then
    /// lane 0 adds 128 in one atomic. A collective of the warp (all 32 lanes
    /// call it); each `Some(b)` must be `< bins`.
    ///
    /// # Safety
    /// After [`zero`](Self::zero); bins `< bins` (not checked here).
    #[inline(always)]
    pub unsafe fn add_warp_4(&self, bins: [Option<u32>; 4]) {
        let [b0, b1, b2, b3] = bins.map(|b| b.unwrap_or(u32::MAX));
        // Every lane shuffles, unconditionally (a warp collective).
        let first = warp::shfl_idx_b32(b0, 0);
        let alike = b0 != u32::MAX && b1 == b0 && b2 == b0 && b3 == b0;
        if warp::all(alike & (b0 == first)) {
            if warp::lane_id() == 0 {
                // SAFETY: b0 < bins ≤ N by the caller.
                unsafe { self.counts.fetch_add(b0 as usize, 128) };
            }
        } else {
            for b in [b0, b1, b2, b3] {
                if b != u32::MAX {
                    // SAFETY: as above.
                    unsafe { self.counts.fetch_add(b as usize, 1) };
                }
            }
        }
    }

    /// Counts one sample (no aggregation): for samples some lanes of a warp
    /// have and others do not.
    ///
    /// # Safety
    /// After [`zero`](Self::zero); `bin < bins`.
    #[inline(always)]
    pub unsafe fn add(&self, bin: u32) {
        // SAFETY: bin < bins ≤ N by the caller.
        unsafe { self.counts.fetch_add(bin as usize, 1) };
    }

    /// A barrier, then adds each nonzero bin to `global[bin]` with a global
    /// atomic. A collective of the block.
    ///
    /// # Safety
    /// `global` points to `bins` u32 of global memory that only atomics
    /// touch during the launch.
    #[inline(always)]
    pub unsafe fn flush(&self, global: *mut u32) {
        sync::sync_threads();
        let (t, threads) = (
            thread::thread_idx_x() as usize,
            thread::block_dim_x() as usize,
        );
        let mut i = t;
        while i < self.bins {
            // SAFETY: i < bins ≤ N; all atomics were before the barrier.
            let c = unsafe { self.counts.load(i) };
            if c != 0 {
                // SAFETY: i < bins, the length of `global`.
                unsafe { atomic::fetch_add_u32(global.add(i), c) };
            }
            i += threads;
        }
    }
}
