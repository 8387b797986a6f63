//! Deliberately broken kernels, one for each simulator finding that no
//! other kernel of the suite provokes (issue 19): shared by the device
//! crate's `tests/detectors.rs` (through `sim::launch_with`) and the host
//! crate's `tests/detectors.rs` (through `Gpu::launch`), which include this
//! file. Each stays wrong under CUDA's rules, whatever schedule the
//! simulator picks.
use cuda_kernels_device::shared::SharedArray;
use cuda_kernels_device::vector::store_shared_f32x4;
use cuda_kernels_device::{shared, shared_array, thread, warp};

cuda_kernels_device::kernels! {
    /// Broken: the lanes of one full-warp mask call different collectives
    /// (lanes 0–15 a shuffle, lanes 16–31 a ballot) and never the other's,
    /// so neither collective can complete.
    ///
    /// # Safety
    /// `out` holds 32 u32.
    pub fn mixed_collectives(out: *mut u32) as MIXED_COLLECTIVES {
        let lane = warp::lane_id();
        let v = if lane < 16 {
            warp::shuffle_idx_sync(warp::FULL_MASK, lane, 0)
        } else {
            warp::ballot_sync(warp::FULL_MASK, true)
        };
        // SAFETY: lane < 32.
        unsafe { *out.add(lane as usize) = v };
    }

    /// Broken: every lane calls a shuffle whose member mask leaves out
    /// lane 0, lane 0 included.
    ///
    /// # Safety
    /// `out` holds 32 u32.
    pub fn outside_own_mask(out: *mut u32) as OUTSIDE_OWN_MASK {
        let lane = warp::lane_id();
        let v = warp::shuffle_idx_sync(!1u32, lane, 1);
        // SAFETY: lane < 32.
        unsafe { *out.add(lane as usize) = v };
    }

    /// Broken: writes `y[i]` for every `i < n + past`, `past` past the end
    /// of `y`'s `n` elements.
    ///
    /// # Safety
    /// None: the simulator's guard pages catch the first write past.
    pub fn write_past(y: *mut f32, n: usize, past: usize) as WRITE_PAST {
        for i in thread::grid_stride(n + past) {
            // SAFETY: none for i >= n: the bug under test.
            unsafe { *y.add(i) = 1.0 };
        }
    }

    /// Broken: every thread writes word 0 of the launch's dynamic shared
    /// memory, with no barrier.
    ///
    /// # Safety
    /// The launch passes at least 4 bytes of dynamic shared memory.
    pub fn dynamic_shared_race() as DYNAMIC_SHARED_RACE {
        // SAFETY: the launch gives at least one u32 of dynamic shared memory.
        let words = unsafe {
            SharedArray::<u32, 1>::from_shared_address(shared::dynamic_shared_address())
        };
        // SAFETY: 0 < 1.
        unsafe { words.store(0, thread::thread_idx_x()) };
    }

    /// Broken: thread 0 stores four floats with one 128-bit store while
    /// thread 1 reads the fourth of them, with no barrier between.
    ///
    /// # Safety
    /// None needed.
    pub fn wide_shared_race() as WIDE_SHARED_RACE {
        let tile = shared_array!(wide_race_tile: [f32; 4]);
        match thread::thread_idx_x() {
            // SAFETY: the tile is 16-byte aligned and holds four f32.
            0 => unsafe { store_shared_f32x4(tile.address(), [1.0, 2.0, 3.0, 4.0]) },
            1 => {
                // SAFETY: 3 < 4.
                let _ = unsafe { tile.load(3) };
            }
            _ => {}
        }
    }
}
