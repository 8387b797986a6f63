//! Small kernels that exercise the device layer on its own: static shared
//! memory (`shared_array!`) with block barriers. (The warp, atomic and load
//! primitives have theirs in `reduce::primitive_tests`.)

/// Threads per block of `block_reverse_i32`, and its shared tile's length.
pub const REVERSE_BLOCK: usize = 256;

/// Where element `i` of a block of `len` elements goes in `block_reverse_i32`.
#[inline(always)]
pub fn reversed_index(i: usize, len: usize) -> usize {
    len - 1 - i
}

use crate::device::sync::sync_threads;
use crate::device::thread;
use crate::shared_array;

crate::device::kernels! {
    /// Reverses each block-sized chunk of `input` into `output` through a
    /// static shared tile: every thread stores its element, the block waits at
    /// the barrier, then every thread loads its mirror element. The last chunk
    /// may be short (`len` elements).
    ///
    /// # Safety
    /// `input` and `output` hold `n` i32 each and do not overlap; the block
    /// has [`REVERSE_BLOCK`] threads.
    pub fn block_reverse_i32(
        input: *const i32,
        output: *mut i32,
        n: usize,
    ) as BLOCK_REVERSE_I32 {
        let tile = shared_array!(block_reverse_tile: [i32; REVERSE_BLOCK]);
        let t = thread::thread_idx_x() as usize;
        let start = thread::block_idx_x() as usize * REVERSE_BLOCK;
        let len = (n - start).min(REVERSE_BLOCK);
        if t < len {
            // SAFETY: start + t < n; t < REVERSE_BLOCK, the tile's length; each thread writes its own slot.
            unsafe { tile.store(t, *input.add(start + t)) };
        }
        sync_threads();
        if t < len {
            // SAFETY: reversed_index(t, len) < len ≤ REVERSE_BLOCK, written before the barrier.
            unsafe { *output.add(start + t) = tile.load(reversed_index(t, len)) };
        }
    }
}
