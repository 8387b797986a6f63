//! The simulator's model of the shared-memory atomics and the warp
//! primitives `syncwarp` and `activemask`: atomics race with plain accesses
//! of other threads but not with each other, a `syncwarp` orders a warp's
//! shared-memory accesses, a misaligned atomic is a located fault, and
//! `activemask` gives the lanes that reached the same call site. (Their
//! values on the GPU and the simulator: `tests/gpu/primitives.rs`.)
use std::ffi::c_void;

use cuda_kernels_device::kernel::Kernel;
use cuda_kernels_device::sim::{self, Access, LaunchShape, SimError, memory::Allocation};

mod k {
    use cuda_kernels_device::prelude::*;

    /// Threads per block of these kernels.
    pub const BLOCK: usize = 64;

    kernels! {
        /// Thread 0 then thread 1 touch shared slot 0 with no barrier
        /// between: thread `atomic_thread` by `fetch_add`, the other by a
        /// plain store.
        ///
        /// # Safety
        /// None needed.
        pub fn atomic_and_plain(atomic_thread: u32) as ATOMIC_AND_PLAIN {
            let slots = shared_array!(mixed_slots: [u32; 4]);
            let t = thread::thread_idx_x();
            // SAFETY: slot 0 exists; the race is the point.
            unsafe {
                if t == atomic_thread {
                    slots.fetch_add(0, 1);
                } else if t < 2 {
                    slots.store(0, 7);
                }
            }
        }

        /// Every thread adds 1 to shared slot 0 atomically (no barrier
        /// between the atomics), then thread 0 writes the count to `out`.
        ///
        /// # Safety
        /// `out` holds one u32.
        pub fn atomics_only(out: *mut u32) as ATOMICS_ONLY {
            let count = shared_array!(atomic_count: [u32; 1]);
            let t = thread::thread_idx_x();
            if t == 0 {
                // SAFETY: before the barrier, thread 0 alone.
                unsafe { count.store(0, 0) };
            }
            sync_threads();
            // SAFETY: slot 0 exists; only atomics touch it until the barrier.
            unsafe { count.fetch_add(0, 1) };
            sync_threads();
            if t == 0 {
                // SAFETY: out holds one u32; the atomics are done.
                unsafe { *out = count.load(0) };
            }
        }

        /// Each lane stores its slot, then (with `sync != 0`) `syncwarp`s,
        /// then reads its neighbour's (`t ^ 1`) into `out[t]`.
        ///
        /// # Safety
        /// `out` holds BLOCK u32; blocks of BLOCK threads.
        pub fn warp_exchange(sync: u32, out: *mut u32) as WARP_EXCHANGE {
            let tile = shared_array!(exchange_tile: [u32; BLOCK]);
            let t = thread::thread_idx_x() as usize;
            // SAFETY: t < BLOCK; the neighbour's slot is ordered by the
            // syncwarp (or, without it, the race is the point).
            unsafe {
                tile.store(t, 3 * t as u32);
                if sync != 0 {
                    warp::syncwarp(warp::FULL_MASK);
                }
                *out.add(t) = tile.load(t ^ 1);
            }
        }

        /// Thread 0 adds atomically at a shared address two bytes into a slot.
        ///
        /// # Safety
        /// None needed.
        pub fn misaligned_atomic() as MISALIGNED_ATOMIC {
            let slots = shared_array!(misaligned_words: [u32; 2]);
            if thread::thread_idx_x() == 0 {
                // SAFETY: inside `slots`; the misalignment is the point.
                unsafe { u32::shared_fetch_add(slots.address() + 2, 1) };
            }
        }

        /// `out[t]` = `activemask()` called in one branch by the even lanes
        /// and in another by the odd ones.
        ///
        /// # Safety
        /// `out` holds one u32 per thread.
        pub fn active_branches(out: *mut u32) as ACTIVE_BRANCHES {
            let t = thread::thread_idx_x() as usize;
            // Two call sites on purpose: each branch's lanes.
            #[allow(clippy::if_same_then_else)]
            let mask = if t.is_multiple_of(2) {
                warp::activemask()
            } else {
                warp::activemask()
            };
            // SAFETY: out holds one u32 per thread.
            unsafe { *out.add(t) = mask };
        }
    }
}

fn run<P>(kernel: Kernel<P>, params: &[*mut c_void]) -> Result<(), SimError> {
    let shape = LaunchShape {
        grid: [1, 1, 1],
        block: [k::BLOCK as u32, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let entry = kernel.sim_entry().expect("kernels! gives a host entry");
    // SAFETY: each test passes the kernel's parameters, with buffers of the
    // lengths its `# Safety` asks.
    unsafe { sim::launch(kernel.name(), shape, entry, params) }
}

fn p<T>(v: &mut T) -> *mut c_void {
    (v as *mut T).cast()
}

/// A zeroed u32 buffer of `n` and its device pointer.
fn zeros(n: usize) -> (Allocation, *mut u32) {
    let a = Allocation::new(n * 4, 4, "out").expect("a simulated buffer");
    let ptr = a.ptr().cast();
    (a, ptr)
}

fn read(a: &Allocation, n: usize) -> Vec<u32> {
    // SAFETY: the buffer holds n u32.
    unsafe { std::slice::from_raw_parts(a.ptr().cast::<u32>(), n) }.to_vec()
}

#[test]
fn an_atomic_races_with_a_plain_access_of_another_thread() {
    for (atomic_thread, first_kind, second_kind) in [
        (0, Access::Atomic, Access::Write),
        (1, Access::Write, Access::Atomic),
    ] {
        let mut a = atomic_thread;
        let e = run(k::ATOMIC_AND_PLAIN, &[p(&mut a)]).unwrap_err();
        println!("{e}");
        match &e {
            SimError::SharedRace { first, second, .. } => {
                assert_eq!((first.0.thread, first.1), ([0, 0, 0], first_kind), "{e}");
                assert_eq!((second.0.thread, second.1), ([1, 0, 0], second_kind), "{e}");
            }
            other => panic!("not a race: {other}"),
        }
        assert!(e.to_string().contains("atomically updated"), "{e}");
    }
}

#[test]
fn atomics_of_many_threads_do_not_race_and_count_each_one() {
    let (out, mut o) = zeros(1);
    run(k::ATOMICS_ONLY, &[p(&mut o)]).expect("no race among atomics");
    assert_eq!(read(&out, 1), [k::BLOCK as u32]);
}

#[test]
fn syncwarp_orders_a_warps_shared_memory_and_its_absence_is_a_race() {
    let (out, mut o) = zeros(k::BLOCK);
    let mut sync = 1u32;
    run(k::WARP_EXCHANGE, &[p(&mut sync), p(&mut o)]).expect("syncwarp orders the exchange");
    let want: Vec<u32> = (0..k::BLOCK as u32).map(|t| 3 * (t ^ 1)).collect();
    assert_eq!(read(&out, k::BLOCK), want);
    let mut sync = 0u32;
    let e = run(k::WARP_EXCHANGE, &[p(&mut sync), p(&mut o)]).unwrap_err();
    assert!(matches!(e, SimError::SharedRace { .. }), "{e}");
}

#[test]
fn a_misaligned_shared_atomic_is_a_located_fault() {
    let e = run(k::MISALIGNED_ATOMIC, &[]).unwrap_err();
    println!("{e}");
    match &e {
        SimError::Fault {
            file, message, at, ..
        } => {
            assert!(file.ends_with("primitives.rs"), "{e}");
            assert_eq!(message, "misaligned shared-memory atomic");
            assert_eq!(at.thread, [0, 0, 0]);
        }
        other => panic!("not a fault: {other}"),
    }
}

#[test]
fn activemask_gives_the_lanes_at_the_same_call_site() {
    let (out, mut o) = zeros(k::BLOCK);
    run(k::ACTIVE_BRANCHES, &[p(&mut o)]).expect("activemask in branches");
    let got = read(&out, k::BLOCK);
    for (t, m) in got.iter().enumerate() {
        let want = if t % 2 == 0 { 0x5555_5555 } else { 0xaaaa_aaaa };
        assert_eq!(*m, want, "thread {t}");
    }
}
