//! The simulator's findings from deliberately broken kernels (the device
//! crate's `tests/support/broken_kernels.rs`), through the one launch path,
//! `Gpu::launch`, on a simulator of this test crate's kernels: each is this
//! crate's typed error naming the kernel (issue 19).
use cuda_kernels_device::sim::SimError;
use cuda_kernels_host::{Error, Gpu, LaunchConfig};

#[path = "../../device/tests/support/broken_kernels.rs"]
mod broken;

/// The simulator of this crate's kernels (the broken ones are declared here).
fn sim() -> Gpu {
    Gpu::simulator_of_crate(env!("CARGO_CRATE_NAME"))
}

#[test]
fn warp_collective_misuse_through_launch() {
    let gpu = sim();
    let mut out = gpu.zeroed::<u32>(32).expect("32 words");
    let cfg = LaunchConfig::linear(1, 32);
    // SAFETY (of the test): `out` holds 32 u32; the kernels are broken on
    // purpose, which the simulator reports.
    let e = unsafe { gpu.launch(broken::MIXED_COLLECTIVES, cfg, gpu.stream(), (&mut out,)) };
    assert!(
        matches!(
            &e,
            Err(Error::Simulator {
                kernel: "mixed_collectives",
                detail: SimError::WarpCollective { .. }
            }) | Err(Error::BarrierDivergence {
                kernel: "mixed_collectives",
                ..
            })
        ),
        "{e:?}"
    );
    // SAFETY: as above.
    let e = unsafe { gpu.launch(broken::OUTSIDE_OWN_MASK, cfg, gpu.stream(), (&mut out,)) };
    match &e {
        Err(Error::Simulator {
            kernel: "outside_own_mask",
            detail: SimError::WarpCollective { reason, .. },
        }) => assert!(reason.contains("not in its own member mask"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_write_past_the_end_through_launch() {
    let gpu = sim();
    let mut y = gpu.zeroed::<f32>(1000).expect("1000 floats");
    // SAFETY (of the test): broken on purpose; the simulator traps the write
    // into the guard page after `y`.
    let e = unsafe {
        gpu.launch(
            broken::WRITE_PAST,
            LaunchConfig::linear(4, 256),
            gpu.stream(),
            (&mut y, 1000usize, 1usize),
        )
    };
    match &e {
        Err(Error::OutOfBounds {
            kernel: "write_past",
            detail: SimError::OutOfBounds { index, len, .. },
        }) => assert_eq!((*index, *len), (1000, 1000)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn shared_races_through_launch() {
    let gpu = sim();
    // SAFETY (of the test): 16 bytes of dynamic shared memory, as the
    // kernel asks; the race is the bug under test.
    let e = unsafe {
        gpu.launch(
            broken::DYNAMIC_SHARED_RACE,
            LaunchConfig::linear(1, 64).with_shared(16),
            gpu.stream(),
            (),
        )
    };
    assert!(
        matches!(
            &e,
            Err(Error::SharedRace {
                kernel: "dynamic_shared_race",
                ..
            })
        ),
        "{e:?}"
    );
    // SAFETY: as above.
    let e = unsafe {
        gpu.launch(
            broken::WIDE_SHARED_RACE,
            LaunchConfig::linear(1, 32),
            gpu.stream(),
            (),
        )
    };
    assert!(
        matches!(
            &e,
            Err(Error::SharedRace {
                kernel: "wide_shared_race",
                detail: SimError::SharedRace { offset: 12, .. }
            })
        ),
        "{e:?}"
    );
}
