//! A block histogram in shared memory (CUB's `BlockHistogram` with the
//! shared-atomic algorithm): the block's privatised bins, counted with
//! `atom.shared.add`, then added to a global histogram.
//!
//! A warp's shared-memory atomic takes one pass per distinct bank its 32
//! lanes address, and lanes that add to one address serialise too. With a
//! single copy of the bins, random samples in 256 bins put about four lanes
//! on the busiest of the 32 banks. So the histogram keeps as many copies of
//! its bins as the shared array holds, up to 32 (a power of two): bin `b`'s
//! copy `c` is word `b · copies + c`, and lane `l` counts in copy `l mod
//! copies`. With 32 copies every lane has a bank of its own, whatever the
//! bins; with fewer, lanes `copies` apart may meet. [`flush`](BlockHistogram::flush)
//! sums the copies of each bin. Give it `bins · 32` words (32 KB for 256
//! bins) when the shared memory can spare them.
//!
//! When all of a warp's samples fall in one bin,
//! [`add_warp`](BlockHistogram::add_warp) finds it (one shuffle and one
//! vote) and lane 0 adds 32 with one atomic: all-equal or sorted inputs
//! cost one atomic per warp, random ones one per sample.
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
use crate::shared::{SharedArray, shared_add_aligned_u32};
use crate::{atomic, sync, thread, warp};

/// The most copies of each bin a [`BlockHistogram`] keeps: one per lane.
pub const MAX_COPIES: usize = 32;

/// A block's privatised histogram of `bins ≤ N` bins in shared memory, in
/// [`copies`](Self::copies) copies (see the [module docs](self)).
#[derive(Clone, Copy)]
pub struct BlockHistogram<const N: usize> {
    counts: SharedArray<u32, N>,
    bins: usize,
    copies: usize,
    /// The shared address of this lane's copy (its lane mod `copies`) of
    /// bin 0; bin `b`'s is `b · stride` bytes on.
    lane_base: u32,
    /// The bytes from one bin's copies to the next's: `4 · copies`, held
    /// rather than derived in [`bump`](Self::bump), where under the
    /// histogram kernel's register cap `ptxas` recomputed it per atomic.
    stride: u32,
}

/// No bin: a sample counted nowhere (what the `Option` bins of
/// [`BlockHistogram::add_warp`] carry as `None`, and what a kernel's bin
/// function may return for a sample outside its range).
pub const NO_BIN: u32 = u32::MAX;

impl<const N: usize> BlockHistogram<N> {
    /// The histogram of `bins` bins in `counts` (asserted `bins ≤ N`: a
    /// located fault otherwise), in as many copies as `counts` holds, up to
    /// [`MAX_COPIES`].
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    pub fn new(counts: SharedArray<u32, N>, bins: usize) -> Self {
        crate::gpu_assert!(bins <= N, "block histogram: more bins than shared memory");
        let mut copies = MAX_COPIES;
        while copies > 1 && bins * copies > N {
            copies /= 2;
        }
        let copy = warp::lane_id() as usize & (copies - 1);
        Self {
            counts,
            bins,
            copies,
            lane_base: counts.element_address(copy),
            stride: (copies * size_of::<u32>()) as u32,
        }
    }

    /// How many copies of each bin it keeps: the largest power of two up to
    /// [`MAX_COPIES`] with `bins · copies ≤ N`.
    #[inline(always)]
    pub fn copies(&self) -> usize {
        self.copies
    }

    /// Adds `value` to this lane's copy of `bin`, unless `bin` is
    /// [`NO_BIN`].
    ///
    /// # Safety
    /// After [`zero`](Self::zero); `bin < bins` or [`NO_BIN`].
    #[inline(always)]
    unsafe fn bump(&self, bin: u32, value: u32) {
        if bin != NO_BIN {
            // SAFETY: bin < bins by the caller: below bins · copies ≤ N
            // words, an aligned u32 of the block's array.
            unsafe { shared_add_aligned_u32(self.lane_base + bin * self.stride, value) };
        }
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
        while i < self.bins * self.copies {
            // SAFETY: i < bins · copies ≤ N.
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
        let b = bin.unwrap_or(NO_BIN);
        let first = warp::shfl_idx_b32(b, 0);
        if warp::all(b == first && b != NO_BIN) {
            if warp::lane_id() == 0 {
                // SAFETY: b < bins by the caller.
                unsafe { self.bump(b, 32) };
            }
        } else {
            // SAFETY: b < bins by the caller, or NO_BIN.
            unsafe { self.bump(b, 1) };
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
        let [b0, b1, b2, b3] = bins.map(|b| b.unwrap_or(NO_BIN));
        // Every lane shuffles, unconditionally (a warp collective).
        let first = warp::shfl_idx_b32(b0, 0);
        let alike = b0 != NO_BIN && b1 == b0 && b2 == b0 && b3 == b0;
        if warp::all(alike & (b0 == first)) {
            if warp::lane_id() == 0 {
                // SAFETY: b0 < bins by the caller.
                unsafe { self.bump(b0, 128) };
            }
        } else {
            for b in [b0, b1, b2, b3] {
                // SAFETY: b < bins by the caller, or NO_BIN.
                unsafe { self.bump(b, 1) };
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
        // SAFETY: bin < bins by the caller.
        unsafe { self.bump(bin, 1) };
    }

    /// A barrier, then adds each nonzero bin (the sum of its copies) to
    /// `global[bin]` with a global atomic. A collective of the block.
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
        let last = self.copies - 1;
        while i < self.bins {
            let mut c = 0u32;
            for k in 0..self.copies {
                // Copy (k + i) mod copies: the lanes of a warp start on
                // different banks.
                // SAFETY: i · copies + (… ≤ last) < bins · copies ≤ N; all
                // atomics were before the barrier.
                c = c.wrapping_add(unsafe { self.counts.load(i * self.copies + ((k + i) & last)) });
            }
            if c != 0 {
                // SAFETY: i < bins, the length of `global`.
                unsafe { atomic::fetch_add_u32(global.add(i), c) };
            }
            i += threads;
        }
    }
}
