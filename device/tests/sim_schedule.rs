//! The simulator's interleaved schedule (`Schedule::Interleaved`,
//! `CUDA_KERNELS_SIM_SCHEDULE=interleaved`): blocks start out of order and
//! run in turns, so a block that waits for another's publication waits
//! (the wait path runs), a publication whose flag comes before its data is
//! caught, and a spin that nothing will end is a typed deadlock, not a hang.
use std::ffi::c_void;

use cuda_kernels_device::kernel::Kernel;
use cuda_kernels_device::sim::memory::Allocation;
use cuda_kernels_device::sim::{self, LaunchShape, Schedule, SimError, SimOptions};

mod k {
    use cuda_kernels_device::{atomic, thread};

    /// A tile's flag once its inclusive prefix is published.
    pub const INCLUSIVE: u32 = 2;

    cuda_kernels_device::kernels! {
        /// A chained scan, one value per block, the 64-bit publication of
        /// the tiled kernels' look-back (`scan::TileState`): the block draws
        /// tile `t` from `counter`, waits for tile `t − 1`'s flag in
        /// `flags`, reads its inclusive prefix from `inclusives`, and
        /// publishes its own (`inclusives[t]`, then the flag with a release
        /// store; with `flag_first` ≠ 0, the planted fault: the flag, then
        /// the value). `out[t]` is the inclusive prefix it computed,
        /// `waits[t]` how many times it found the flag unset.
        ///
        /// # Safety
        /// One thread per block; `values`, `inclusives`, `out` hold one u64
        /// per block, `flags` and `waits` one u32 per block, all 0 but
        /// `values`; `counter` a u32, 0.
        pub fn chain(
            values: *const u64,
            flags: *mut u32,
            inclusives: *mut u64,
            counter: *mut u32,
            out: *mut u64,
            waits: *mut u32,
            flag_first: u32,
        ) as CHAIN {
            // SAFETY: the contract's buffers, each of one element per block,
            // and tiles are drawn once per block (t < blocks).
            unsafe {
                let t = atomic::fetch_add_u32(counter, 1) as usize;
                let mut prefix = 0;
                let mut waited = 0;
                if t > 0 {
                    while atomic::load_acquire_u32(flags.add(t - 1)) != INCLUSIVE {
                        waited += 1;
                    }
                    prefix = inclusives.add(t - 1).read_volatile();
                }
                let inclusive = prefix + *values.add(t);
                if flag_first != 0 {
                    atomic::store_release_u32(flags.add(t), INCLUSIVE);
                    inclusives.add(t).write_volatile(inclusive);
                } else {
                    inclusives.add(t).write_volatile(inclusive);
                    atomic::store_release_u32(flags.add(t), INCLUSIVE);
                }
                *out.add(t) = inclusive;
                *waits.add(t) = waited;
            }
        }

        /// Every block waits for `flag` to become 1, which nothing writes.
        ///
        /// # Safety
        /// `flag` points to a u32.
        pub fn spin_for_ever(flag: *mut u32) as SPIN_FOR_EVER {
            // SAFETY: the contract's u32.
            while unsafe { atomic::load_acquire_u32(flag) } != 1 {}
        }

        /// `order[blockIdx.x]` is the block's place in the start order
        /// (thread 0's ticket from `counter`).
        ///
        /// # Safety
        /// `order` holds one u32 per block, `counter` a u32, 0.
        pub fn start_order(counter: *mut u32, order: *mut u32) as START_ORDER {
            if thread::thread_idx_x() == 0 {
                // SAFETY: the contract's buffers; one slot per block.
                unsafe {
                    *order.add(thread::block_idx_x() as usize) = atomic::fetch_add_u32(counter, 1)
                };
            }
        }
    }
}

fn p<T>(v: &mut T) -> *mut c_void {
    (v as *mut T).cast()
}

fn zeros<T: Copy + Default>(n: usize, label: &str) -> Allocation {
    Allocation::new(n * size_of::<T>(), size_of::<T>(), label).expect("mmap")
}

fn read<T: Copy>(a: &Allocation) -> Vec<T> {
    let n = a.len_bytes() / size_of::<T>();
    // SAFETY: the allocation holds n values of T.
    unsafe { std::slice::from_raw_parts(a.ptr().cast::<T>(), n) }.to_vec()
}

fn options(schedule: Schedule, seed: Option<u64>) -> SimOptions {
    SimOptions {
        schedule,
        seed,
        ..SimOptions::default()
    }
}

const INTERLEAVED: Schedule = Schedule::Interleaved { resident: 4 };

fn launch<P>(
    kernel: Kernel<P>,
    grid: u32,
    block: u32,
    params: &[*mut c_void],
    o: &SimOptions,
) -> Result<(), SimError> {
    let shape = LaunchShape {
        grid: [grid, 1, 1],
        block: [block, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let entry = kernel.sim_entry().expect("kernels! gives a host entry");
    // SAFETY: each test passes its kernel's parameters with the buffers its
    // `# Safety` asks for.
    unsafe { sim::launch_with(kernel.name(), shape, entry, params, o) }
}

/// The chain over `blocks` values: (the prefixes it computed, the waits).
fn chain(blocks: usize, flag_first: bool, o: &SimOptions) -> (Vec<u64>, Vec<u32>) {
    let values = Allocation::new(blocks * 8, 8, "values").expect("mmap");
    // SAFETY: the allocation holds `blocks` u64.
    let v = unsafe { std::slice::from_raw_parts_mut(values.ptr().cast::<u64>(), blocks) };
    for (i, x) in v.iter_mut().enumerate() {
        *x = 1 + i as u64;
    }
    let (flags, inclusives) = (
        zeros::<u32>(blocks, "flags"),
        zeros::<u64>(blocks, "inclusives"),
    );
    let (counter, out, waits) = (
        zeros::<u32>(1, "counter"),
        zeros::<u64>(blocks, "out"),
        zeros::<u32>(blocks, "waits"),
    );
    let mut ptrs = [
        values.ptr(),
        flags.ptr(),
        inclusives.ptr(),
        counter.ptr(),
        out.ptr(),
        waits.ptr(),
    ];
    let mut fault = u32::from(flag_first);
    let mut params: Vec<*mut c_void> = ptrs.iter_mut().map(p).collect();
    params.push(p(&mut fault));
    launch(k::CHAIN, blocks as u32, 1, &params, o).expect("the chain runs to its end");
    (read(&out), read(&waits))
}

fn prefixes(blocks: usize) -> Vec<u64> {
    (1..=blocks as u64).map(|i| i * (i + 1) / 2).collect()
}

/// The planted fault (the flag released before the value it guards) passes
/// in order, where a block always finds its predecessor done, and is caught
/// under the interleaved schedule, with and without a seed; the correct
/// order passes both.
#[test]
fn a_flag_published_before_its_data_is_caught_only_interleaved() {
    let blocks = 64;
    let want = prefixes(blocks);
    let in_order = options(Schedule::InOrder, None);
    assert_eq!(chain(blocks, false, &in_order).0, want);
    assert_eq!(
        chain(blocks, true, &in_order).0,
        want,
        "in order, the fault hides"
    );
    for seed in [None, Some(1), Some(2), Some(3)] {
        let o = options(INTERLEAVED, seed);
        assert_eq!(chain(blocks, false, &o).0, want, "seed {seed:?}");
        let (got, _) = chain(blocks, true, &o);
        let wrong = got.iter().zip(&want).filter(|(g, w)| g != w).count();
        assert!(wrong > 0, "seed {seed:?}: the planted fault was not caught");
    }
}

/// In order a block never waits; interleaved, blocks wait for their
/// predecessor (the look-back's wait path runs), and the result is right.
#[test]
fn interleaved_blocks_wait_for_their_predecessors() {
    let blocks = 64;
    let (got, waits) = chain(blocks, false, &options(Schedule::InOrder, None));
    assert_eq!(got, prefixes(blocks));
    assert_eq!(waits.iter().sum::<u32>(), 0);
    let (got, waits) = chain(blocks, false, &options(INTERLEAVED, None));
    assert_eq!(got, prefixes(blocks));
    let waited = waits.iter().filter(|&&w| w > 0).count();
    assert!(waited > blocks / 4, "{waited} of {blocks} blocks waited");
}

/// A spin on a flag no block will set ends the launch with a typed
/// deadlock naming the resident blocks, instead of hanging.
#[test]
fn a_spin_nothing_ends_is_a_deadlock() {
    let flag = zeros::<u32>(1, "flag");
    let mut fp = flag.ptr();
    let e = launch(
        k::SPIN_FOR_EVER,
        10,
        32,
        &[p(&mut fp)],
        &options(INTERLEAVED, None),
    )
    .expect_err("a deadlock");
    let SimError::Deadlock {
        kernel,
        blocks,
        polls,
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(*kernel, "spin_for_ever");
    assert_eq!(blocks.len(), 4, "{e}");
    assert!(*polls > sim::DEADLOCK_POLLS, "{e}");
    assert!(
        e.to_string()
            .contains("deadlock under the interleaved schedule"),
        "{e}"
    );
}

/// Blocks start out of order (the last ones first without a seed, a
/// seeded permutation with one), each exactly once.
#[test]
fn blocks_start_out_of_order_each_once() {
    let blocks = 37;
    for seed in [None, Some(7)] {
        let (counter, order) = (zeros::<u32>(1, "counter"), zeros::<u32>(blocks, "order"));
        let (mut cp, mut op) = (counter.ptr(), order.ptr());
        let o = options(INTERLEAVED, seed);
        launch(
            k::START_ORDER,
            blocks as u32,
            64,
            &[p(&mut cp), p(&mut op)],
            &o,
        )
        .expect("launch");
        let got = read::<u32>(&order);
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            (0..blocks as u32).collect::<Vec<_>>(),
            "seed {seed:?}"
        );
        assert_ne!(got, sorted, "seed {seed:?}: blocks started in order");
        if seed.is_none() {
            assert!(
                got[blocks - 1] < got[0],
                "the last before the first: {got:?}"
            );
        }
    }
}
