//! The simulator's findings that no other kernel of the suite provokes
//! (issue 19), each from a deliberately broken kernel
//! (`support/broken_kernels.rs`), launched with `sim::launch_with` under the
//! default schedule and under a seeded one: lanes of one mask calling
//! different collectives, a lane outside its own mask, a write past a
//! buffer's end, and races through dynamic and through 128-bit shared
//! memory.
use std::ffi::c_void;

use cuda_kernels_device::kernel::Kernel;
use cuda_kernels_device::sim::{self, LaunchShape, SimError, SimOptions, memory::Allocation};

#[path = "support/broken_kernels.rs"]
mod broken;
#[path = "support/line_tables.rs"]
mod line_tables;

/// A pointer to a parameter value, as `cuLaunchKernel` takes it.
fn p<T>(v: &mut T) -> *mut c_void {
    (v as *mut T).cast()
}

/// One block of `threads` threads with `dynamic` bytes of dynamic shared memory.
fn block(threads: u32, dynamic: u32) -> LaunchShape {
    LaunchShape {
        grid: [1, 1, 1],
        block: [threads, 1, 1],
        dynamic_shared_bytes: dynamic,
    }
}

/// Launches `kernel` under the default schedule and under seed 7: both
/// errors (each must be one).
fn both_schedules<P>(kernel: Kernel<P>, s: LaunchShape, params: &[*mut c_void]) -> [SimError; 2] {
    let entry = kernel.sim_entry().expect("kernels! gives a host entry");
    [
        SimOptions::default(),
        SimOptions {
            seed: Some(7),
            ..SimOptions::default()
        },
    ]
    .map(|o| {
        // SAFETY: each test passes its kernel's parameters, with buffers
        // as large as its `# Safety` asks, except where the bug under test
        // breaks that on purpose (the simulator catches it).
        let r = unsafe { sim::launch_with(kernel.name(), s, entry, params, &o) };
        match r {
            Err(e) => e,
            Ok(()) => panic!("{}: the broken kernel ran clean ({o:?})", kernel.name()),
        }
    })
}

fn buffer(bytes: usize, label: &str) -> Allocation {
    Allocation::new(bytes, 4, label).expect("mmap")
}

#[test]
fn lanes_of_one_mask_in_different_collectives_are_an_error() {
    let out = buffer(32 * 4, "out");
    let mut op = out.ptr();
    for e in both_schedules(broken::MIXED_COLLECTIVES, block(32, 0), &[p(&mut op)]) {
        println!("{e}");
        // The lanes wait for one another in two collectives: the warp
        // collective's misuse, or no thread able to go on.
        assert!(
            matches!(
                &e,
                SimError::WarpCollective {
                    kernel: "mixed_collectives",
                    ..
                } | SimError::BarrierDivergence {
                    kernel: "mixed_collectives",
                    ..
                }
            ),
            "{e}"
        );
    }
}

#[test]
fn a_lane_outside_its_own_mask_is_an_error() {
    let out = buffer(32 * 4, "out");
    let mut op = out.ptr();
    for e in both_schedules(broken::OUTSIDE_OWN_MASK, block(32, 0), &[p(&mut op)]) {
        assert!(
            matches!(&e, SimError::WarpCollective { kernel: "outside_own_mask", reason, at }
                if reason.contains("lane 0 is not in its own member mask") && at.thread == [0, 0, 0]),
            "{e}"
        );
    }
}

#[test]
fn a_write_past_the_end_is_out_of_bounds() {
    let y = buffer(1000 * 4, "y");
    let (mut yp, mut n, mut past) = (y.ptr(), 1000usize, 1usize);
    let s = LaunchShape {
        grid: [4, 1, 1],
        ..block(256, 0)
    };
    for e in both_schedules(
        broken::WRITE_PAST,
        s,
        &[p(&mut yp), p(&mut n), p(&mut past)],
    ) {
        assert!(
            matches!(&e, SimError::OutOfBounds { kernel: "write_past", buffer, index: 1000, len: 1000, at, site }
                if &**buffer == "parameter `y`, buffer y" && at.block == [3, 0, 0] && at.thread == [232, 0, 0]
                && site_or_none(site.as_deref(), "device/tests/support/broken_kernels.rs:")),
            "{e}"
        );
    }
}

/// A finding's source site is in `file` when the build has line tables, and
/// absent when it has none (never some other frame's file).
fn site_or_none(site: Option<&str>, file: &str) -> bool {
    if line_tables::line_tables() {
        site.is_some_and(|s| s.starts_with(file))
    } else {
        site.is_none()
    }
}

#[test]
fn races_through_dynamic_and_wide_shared_memory_are_found() {
    for e in both_schedules(broken::DYNAMIC_SHARED_RACE, block(64, 16), &[]) {
        assert!(
            matches!(
                &e,
                SimError::SharedRace {
                    kernel: "dynamic_shared_race",
                    offset: 0,
                    ..
                }
            ),
            "{e}"
        );
    }
    for e in both_schedules(broken::WIDE_SHARED_RACE, block(32, 0), &[]) {
        assert!(
            matches!(
                &e,
                SimError::SharedRace {
                    kernel: "wide_shared_race",
                    offset: 12,
                    ..
                }
            ),
            "{e}"
        );
    }
}
