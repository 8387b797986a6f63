//! The CPU simulator: kernels declared with `kernels!`, launched with
//! `sim::launch` over `sim::memory` allocations. Correct kernels give the
//! expected results; deliberately broken ones must be caught and reported.
use std::ffi::c_void;

use cuda_kernels_device::kernel::Kernel;
use cuda_kernels_device::sim::{self, LaunchShape, SimError, SimOptions, memory::Allocation};

#[path = "support/line_tables.rs"]
mod line_tables;

mod k {
    use cuda_kernels_device::sync::sync_threads;
    use cuda_kernels_device::{atomic, gpu_assert, gpu_printf, shared, shared_array, thread, warp};

    /// Threads per block of the shared-memory kernels.
    pub const TILE: usize = 64;

    cuda_kernels_device::kernels! {
        /// `y[i] = a * x[i]`.
        ///
        /// # Safety
        /// `x` and `y` hold `n` f32.
        pub fn scale(x: *const f32, y: *mut f32, n: usize, a: f32) as SCALE {
            for i in thread::grid_stride(n) {
                // SAFETY: i < n.
                unsafe { *y.add(i) = a * *x.add(i) };
            }
        }

        /// Fails in the thread whose global index is `n`.
        ///
        /// # Safety
        /// None needed.
        pub fn assert_fails(n: u32) as ASSERT_FAILS {
            gpu_assert!(thread::index_1d() as u32 != n, "thread hit n");
        }

        /// Panics (a slice index out of range) in thread 5 of block 0.
        ///
        /// # Safety
        /// None needed.
        pub fn panics(n: usize) as PANICS {
            let v = [1u32, 2, 3];
            if thread::index_1d() == 5 {
                let _ = v[n];
            }
        }

        /// Writes every thread's indices at its linear place in the grid:
        /// `out[g] = [tx, ty, tz, bx, by, bz, bdx * 1000 + gdx, lane]`.
        ///
        /// # Safety
        /// `out` holds 8 u32 per thread of the grid.
        pub fn indices(out: *mut u32) as INDICES {
            let t = [thread::thread_idx_x(), thread::thread_idx_y(), thread::thread_idx_z()];
            let b = [thread::block_idx_x(), thread::block_idx_y(), thread::block_idx_z()];
            let bd = [thread::block_dim_x(), thread::block_dim_y(), thread::block_dim_z()];
            let gd = [thread::grid_dim_x(), thread::grid_dim_y(), thread::grid_dim_z()];
            let block = b[0] + gd[0] * (b[1] + gd[1] * b[2]);
            let local = t[0] + bd[0] * (t[1] + bd[1] * t[2]);
            let g = (block * bd[0] * bd[1] * bd[2] + local) as usize;
            let v = [t[0], t[1], t[2], b[0], b[1], b[2], bd[0] * 1000 + gd[0], warp::lane_id()];
            for (k, x) in v.into_iter().enumerate() {
                // SAFETY: g < the grid's threads.
                unsafe { *out.add(8 * g + k) = x };
            }
        }

        /// Reverses each block's `TILE` values through a static shared array,
        /// and a second time through dynamic shared memory (barrier-ordered).
        ///
        /// # Safety
        /// `x`, `y` hold `TILE` f32 per block; blocks of `TILE` threads, with
        /// `TILE * 4` bytes of dynamic shared memory.
        pub fn reverse(x: *const f32, y: *mut f32, z: *mut f32) as REVERSE {
            let tile = shared_array!(reverse_tile: [f32; TILE]);
            // SAFETY: the launch gives TILE * 4 dynamic bytes.
            let dynamic = unsafe {
                shared::SharedArray::<f32, TILE>::from_shared_address(shared::dynamic_shared_address())
            };
            let t = thread::thread_idx_x() as usize;
            let g = thread::index_1d();
            // SAFETY: t < TILE; each thread writes its own element.
            unsafe { tile.store(t, *x.add(g)) };
            sync_threads();
            // SAFETY: read after the barrier.
            let v = unsafe { tile.load(TILE - 1 - t) };
            // SAFETY: g < the buffer's length.
            unsafe { *y.add(g) = v };
            // SAFETY: as above, in the dynamic memory.
            unsafe { dynamic.store(t, v) };
            sync_threads();
            // SAFETY: read after the barrier.
            unsafe { *z.add(g) = dynamic.load(TILE - 1 - t) };
        }

        /// Every shuffle and vote of the warp layer, full masks:
        /// 16 u32 per thread.
        ///
        /// # Safety
        /// `out` holds 16 u32 per thread of one block.
        pub fn warp_ops(out: *mut u32) as WARP_OPS {
            let t = thread::thread_idx_x();
            let lane = warp::lane_id();
            let v = t * 10;
            let r = [
                warp::shfl_down_b32(v, 3),
                warp::shfl_up_b32(v, 5),
                warp::shfl_xor_b32(v, 7),
                warp::shfl_idx_b32(v, 4),
                warp::shfl_idx_b32(v, 31 - lane),
                warp::ballot(lane.is_multiple_of(3)),
                warp::any(lane == 17) as u32,
                warp::all(lane < 31) as u32,
                warp::all(true) as u32,
                warp::reduce(v, |a, b| a + b),
                warp::all_reduce(v, |a, b| a + b),
                warp::shuffle_down(v as u64 | (1u64 << 40), 1) as u32,
                (warp::shuffle_down(v as u64 | ((t as u64) << 40), 1) >> 40) as u32,
                warp::shuffle_xor(v as f64, 1) as u32,
                warp::shfl_down_b32(v, 33),
                warp::shfl_up_b32(v, 0),
            ];
            for (k, x) in r.into_iter().enumerate() {
                // SAFETY: t < the block's threads.
                unsafe { *out.add(16 * t as usize + k) = x };
            }
        }

        /// Partial masks: lanes 0..16 shuffle among themselves; even lanes
        /// take a ballot; the rest write markers. 4 u32 per thread.
        ///
        /// # Safety
        /// `out` holds 4 u32 per thread of one block.
        pub fn warp_masks(out: *mut u32) as WARP_MASKS {
            let t = thread::thread_idx_x() as usize;
            let lane = warp::lane_id();
            let mut r = [u32::MAX; 4];
            if lane < 16 {
                r[0] = warp::shfl_down_sync_b32(0x0000_ffff, lane, 1);
                r[1] = warp::shuffle_idx_sync(0x0000_ffff, lane * 2, 15);
            }
            if lane.is_multiple_of(2) {
                r[2] = warp::ballot_sync(0x5555_5555, lane.is_multiple_of(4));
                r[3] = warp::any_sync(0x5555_5555, lane == 30) as u32
                    + 2 * warp::all_sync(0x5555_5555, lane < 40) as u32;
            }
            for (k, x) in r.into_iter().enumerate() {
                // SAFETY: t < the block's threads.
                unsafe { *out.add(4 * t + k) = x };
            }
        }

        /// Atomics from every thread of the grid on `c`: `[count, max, min,
        /// cas-won]`, and `f` an f32 sum and an f64 sum.
        ///
        /// # Safety
        /// `c` holds 4 u32, `f` 1 f32, `d` 1 f64.
        pub fn atomics(c: *mut u32, f: *mut f32, d: *mut f64) as ATOMICS {
            let g = thread::index_1d() as u32;
            // SAFETY: live, aligned u32s, only accessed atomically.
            unsafe {
                atomic::fetch_add_u32(c, 1);
                atomic::fetch_max_u32(c.add(1), g);
                atomic::fetch_min_u32(c.add(2), g);
                if atomic::compare_exchange_u32(c.add(3), 0, g + 1) == 0 {
                    atomic::fetch_add_u64(c.add(4).cast::<u64>(), 1);
                }
                atomic::fetch_add_f32(f, 0.5);
                atomic::fetch_add_f64(d, 0.25);
            }
        }

        /// Prints a formatted line from thread 1 of each block.
        ///
        /// # Safety
        /// None needed.
        pub fn printer(x: f32) as PRINTER {
            if thread::thread_idx_x() == 1 {
                gpu_printf!(
                    "block %u: %5.2f %d %lu %x|%-4d|%e\n",
                    thread::block_idx_x(),
                    x,
                    -3i32,
                    thread::index_1d(),
                    255u32,
                    7i32,
                    x as f64 * 1000.0
                );
            }
        }

        /// Takes a ticket in the order threads run: `out[g] = ticket`.
        ///
        /// # Safety
        /// `out` holds one u32 per thread; `counter` one u32.
        pub fn tickets(out: *mut u32, counter: *mut u32) as TICKETS {
            let g = thread::index_1d();
            // SAFETY: a live, aligned counter; g < the grid's threads.
            unsafe { *out.add(g) = atomic::fetch_add_u32(counter, 1) };
            sync_threads();
            // SAFETY: as above.
            unsafe { *out.add(g) += 1000 * atomic::fetch_add_u32(counter, 0) };
        }

        /// A correct block sum through shared memory (tree, barriers).
        ///
        /// # Safety
        /// `x` holds `TILE` u32 per block, `out` one per block; blocks of `TILE`.
        pub fn block_sum(x: *const u32, out: *mut u32) as BLOCK_SUM {
            let s = shared_array!(block_sum_tile: [u32; TILE]);
            let t = thread::thread_idx_x() as usize;
            // SAFETY: t < TILE; the index is in the buffer.
            unsafe { s.store(t, *x.add(thread::index_1d())) };
            sync_threads();
            let mut half = TILE / 2;
            while half > 0 {
                if t < half {
                    // SAFETY: t + half < TILE; the pairs are disjoint between barriers.
                    unsafe { s.store(t, s.load(t) + s.load(t + half)) };
                }
                sync_threads();
                half /= 2;
            }
            if t == 0 {
                // SAFETY: one value per block.
                unsafe { *out.add(thread::block_idx_x() as usize) = s.load(0) };
            }
        }

        /// Broken: every thread writes shared word 3 with no barrier.
        ///
        /// # Safety
        /// None needed.
        pub fn racy_write() as RACY_WRITE {
            let s = shared_array!(racy_write_tile: [u32; 8]);
            // SAFETY: 3 < 8.
            unsafe { s.store(3, thread::thread_idx_x()) };
        }

        /// Broken: each thread writes its element and reads its neighbour's
        /// without a barrier between.
        ///
        /// # Safety
        /// `out` holds one u32 per thread of one block of `TILE`.
        pub fn racy_neighbour(out: *mut u32) as RACY_NEIGHBOUR {
            let s = shared_array!(racy_neighbour_tile: [u32; TILE]);
            let t = thread::thread_idx_x() as usize;
            // SAFETY: t < TILE.
            unsafe { s.store(t, t as u32) };
            // SAFETY: (t + 1) % TILE < TILE.
            unsafe { *out.add(t) = s.load((t + 1) % TILE) };
        }

        /// Threads below 16 wait at a barrier; the others exit (correct on
        /// compute capability 7.0 and later: exited threads count as arrived).
        ///
        /// # Safety
        /// None needed.
        pub fn half_barrier() as HALF_BARRIER {
            if thread::thread_idx_x() < 16 {
                sync_threads();
            }
        }

        /// Broken: two barriers on two branches.
        ///
        /// # Safety
        /// None needed.
        pub fn split_barrier() as SPLIT_BARRIER {
            #[allow(clippy::if_same_then_else)]
            if thread::thread_idx_x().is_multiple_of(2) {
                sync_threads();
            } else {
                sync_threads();
            }
        }

        /// Broken: reads `x[i + past]` for `i < n`.
        ///
        /// # Safety
        /// Deliberately none: reads past the end when `past > 0`.
        pub fn read_past(x: *const f32, y: *mut f32, n: usize, past: usize) as READ_PAST {
            for i in thread::grid_stride(n) {
                // SAFETY: not safe on purpose: the simulator must catch it.
                unsafe { *y.add(i) = core::ptr::read_volatile(x.add(i + past)) };
            }
        }

        /// Broken: writes `back` elements before the start of `y`.
        ///
        /// # Safety
        /// Deliberately none.
        pub fn write_before(y: *mut f32, back: usize) as WRITE_BEFORE {
            if thread::index_1d() == 2 {
                // SAFETY: not safe on purpose: the simulator must catch it.
                unsafe { core::ptr::write_volatile(y.sub(back), 1.0) };
            }
        }

        /// Broken: lane 3 exits before a full-mask shuffle.
        ///
        /// # Safety
        /// None needed.
        pub fn shuffle_after_exit(out: *mut u32) as SHUFFLE_AFTER_EXIT {
            let lane = warp::lane_id();
            if lane == 3 {
                return;
            }
            // SAFETY: one u32 per thread.
            unsafe { *out.add(lane as usize) = warp::shfl_down_b32(lane, 1) };
        }

        /// Broken: recursion past the simulated thread's stack.
        ///
        /// # Safety
        /// None needed.
        pub fn overflow(n: u64) as OVERFLOW {
            fn f(n: u64) -> u64 {
                let a = [n; 64];
                if n == 0 {
                    0
                } else {
                    core::hint::black_box(a)[3] + f(n - 1)
                }
            }
            core::hint::black_box(f(n));
        }

        /// Broken: reads shared memory past a 16-byte array.
        ///
        /// # Safety
        /// None needed.
        pub fn shared_past_end(i: usize) as SHARED_PAST_END {
            let s = shared_array!(shared_past_end_tile: [u32; 4]);
            // SAFETY: not safe on purpose when i ≥ 4.
            let _ = unsafe { s.load(i) };
        }
    }
}

/// A pointer to a parameter value, as `cuLaunchKernel` takes it.
fn p<T>(v: &mut T) -> *mut c_void {
    (v as *mut T).cast()
}

fn shape(grid: [u32; 3], block: [u32; 3], dynamic_shared_bytes: u32) -> LaunchShape {
    LaunchShape {
        grid,
        block,
        dynamic_shared_bytes,
    }
}

fn line(grid: u32, block: u32) -> LaunchShape {
    shape([grid, 1, 1], [block, 1, 1], 0)
}

/// Launches `kernel` with the default options.
fn run<P>(kernel: Kernel<P>, s: LaunchShape, params: &[*mut c_void]) -> Result<(), SimError> {
    run_with(kernel, s, params, &SimOptions::default())
}

fn run_with<P>(
    kernel: Kernel<P>,
    s: LaunchShape,
    params: &[*mut c_void],
    o: &SimOptions,
) -> Result<(), SimError> {
    let entry = kernel.sim_entry().expect("kernels! gives a host entry");
    // SAFETY: every test passes its kernel's parameters, with buffers as its
    // `# Safety` asks (or breaks it on purpose where the simulator must catch it).
    unsafe { sim::launch_with(kernel.name(), s, entry, params, o) }
}

/// A simulated device buffer holding `values`.
fn buffer<T: Copy>(values: &[T], label: &str) -> Allocation {
    let a = Allocation::new(size_of_val(values), size_of::<T>(), label).expect("mmap");
    // SAFETY: the allocation holds exactly these bytes.
    unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), a.ptr().cast(), values.len()) };
    a
}

fn read<T: Copy>(a: &Allocation) -> Vec<T> {
    let n = a.len_bytes() / size_of::<T>();
    // SAFETY: the allocation holds n values of T (written by the test or kernel).
    unsafe { std::slice::from_raw_parts(a.ptr().cast::<T>(), n) }.to_vec()
}

#[test]
fn scale_runs_every_thread() {
    let n = 1000usize;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = buffer(&xs, "x");
    let y = buffer(&vec![0.0f32; n], "y");
    let (mut xp, mut yp, mut np, mut a) = (x.ptr(), y.ptr(), n, 2.0f32);
    run(
        k::SCALE,
        line(3, 128),
        &[p(&mut xp), p(&mut yp), p(&mut np), p(&mut a)],
    )
    .expect("launch");
    let ys = read::<f32>(&y);
    assert!(ys.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));
}

#[test]
fn indices_in_a_3d_grid() {
    let (grid, block) = ([3, 2, 2], [4, 3, 5]);
    let threads = 12 * 60;
    let out = buffer(&vec![0u32; 8 * threads], "out");
    let mut op = out.ptr();
    run(k::INDICES, shape(grid, block, 0), &[p(&mut op)]).expect("launch");
    let v = read::<u32>(&out);
    let mut g = 0;
    for bz in 0..2 {
        for by in 0..2 {
            for bx in 0..3 {
                for tz in 0..5 {
                    for ty in 0..3 {
                        for tx in 0..4 {
                            let local = tx + 4 * (ty + 3 * tz);
                            let want = [tx, ty, tz, bx, by, bz, 4 * 1000 + 3, local % 32];
                            assert_eq!(v[8 * g..8 * g + 8], want, "thread {g}");
                            g += 1;
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn shared_memory_exchange_is_barrier_ordered() {
    let blocks = 3;
    let n = blocks * k::TILE;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = buffer(&xs, "x");
    let y = buffer(&vec![0.0f32; n], "y");
    let z = buffer(&vec![0.0f32; n], "z");
    let (mut xp, mut yp, mut zp) = (x.ptr(), y.ptr(), z.ptr());
    let s = shape(
        [blocks as u32, 1, 1],
        [k::TILE as u32, 1, 1],
        4 * k::TILE as u32,
    );
    run(k::REVERSE, s, &[p(&mut xp), p(&mut yp), p(&mut zp)]).expect("launch");
    let (ys, zs) = (read::<f32>(&y), read::<f32>(&z));
    for b in 0..blocks {
        for t in 0..k::TILE {
            let g = b * k::TILE + t;
            assert_eq!(ys[g], (b * k::TILE + k::TILE - 1 - t) as f32);
            assert_eq!(zs[g], xs[g]);
        }
    }
}

#[test]
fn every_shuffle_and_vote() {
    let n = 64;
    let out = buffer(&vec![0u32; 16 * n], "out");
    let mut op = out.ptr();
    run(k::WARP_OPS, line(1, n as u32), &[p(&mut op)]).expect("launch");
    let v = read::<u32>(&out);
    for t in 0..n as u32 {
        let (lane, base) = (t % 32, t / 32 * 32);
        let val = |l: u32| (base + l) * 10;
        let r = &v[16 * t as usize..16 * t as usize + 16];
        let down = if lane + 3 < 32 {
            val(lane + 3)
        } else {
            val(lane)
        };
        let up = if lane >= 5 { val(lane - 5) } else { val(lane) };
        let ballot = (0..32).filter(|l| l % 3 == 0).fold(0u32, |b, l| b | 1 << l);
        let sum: u32 = (0..32).map(val).sum();
        assert_eq!(r[0], down, "down, thread {t}");
        assert_eq!(r[1], up, "up, thread {t}");
        assert_eq!(r[2], val(lane ^ 7), "xor, thread {t}");
        assert_eq!(r[3], val(4), "idx, thread {t}");
        assert_eq!(r[4], val(31 - lane), "idx per lane, thread {t}");
        assert_eq!(r[5], ballot, "ballot");
        assert_eq!(r[6], 1, "any");
        assert_eq!(r[7], 0, "all false");
        assert_eq!(r[8], 1, "all true");
        if lane == 0 {
            assert_eq!(r[9], sum, "reduce");
        }
        assert_eq!(r[10], sum, "all_reduce");
        let down1 = if lane + 1 < 32 {
            val(lane + 1)
        } else {
            val(lane)
        };
        assert_eq!(r[11], down1, "64-bit shuffle, low word");
        let hi = if lane + 1 < 32 { t + 1 } else { t };
        assert_eq!(r[12], hi, "64-bit shuffle, high word");
        assert_eq!(r[13], val(lane ^ 1), "f64 shuffle");
        assert_eq!(r[14], down1, "delta 33 is delta 1 (b[4:0])");
        assert_eq!(r[15], val(lane), "up by 0");
    }
}

#[test]
fn partial_masks() {
    let n = 32;
    let out = buffer(&vec![0u32; 4 * n], "out");
    let mut op = out.ptr();
    run(k::WARP_MASKS, line(1, n as u32), &[p(&mut op)]).expect("launch");
    let v = read::<u32>(&out);
    for lane in 0..32u32 {
        let r = &v[4 * lane as usize..4 * lane as usize + 4];
        if lane < 16 {
            // Lane 15's source (16) is outside the mask: its own value.
            assert_eq!(r[0], if lane < 15 { lane + 1 } else { lane }, "lane {lane}");
            assert_eq!(r[1], 30, "lane {lane}");
        } else {
            assert_eq!(r[..2], [u32::MAX, u32::MAX]);
        }
        if lane % 2 == 0 {
            let ballot = (0..32).filter(|l| l % 4 == 0).fold(0u32, |b, l| b | 1 << l);
            assert_eq!(r[2], ballot, "lane {lane}");
            assert_eq!(r[3], 3, "any and all, lane {lane}");
        } else {
            assert_eq!(r[2..], [u32::MAX, u32::MAX]);
        }
    }
}

#[test]
fn atomics_count_every_thread_also_on_several_os_threads() {
    for threads in [1, 4] {
        let c = buffer(&[0u32, 0, u32::MAX, 0, 0, 0], "counters");
        let f = buffer(&[0.0f32], "f");
        let d = buffer(&[0.0f64], "d");
        let (mut cp, mut fp, mut dp) = (c.ptr(), f.ptr(), d.ptr());
        let o = SimOptions {
            threads,
            ..SimOptions::default()
        };
        run_with(
            k::ATOMICS,
            line(40, 256),
            &[p(&mut cp), p(&mut fp), p(&mut dp)],
            &o,
        )
        .expect("launch");
        let n = 40 * 256;
        let cs = read::<u32>(&c);
        assert_eq!(cs[..3], [n, n - 1, 0]);
        assert!(cs[3] >= 1 && cs[3] <= n);
        assert_eq!(cs[4], 1, "one CAS wins");
        assert_eq!(read::<f32>(&f)[0], n as f32 * 0.5);
        assert_eq!(read::<f64>(&d)[0], n as f64 * 0.25);
    }
}

#[test]
fn printf_formats_c_conversions() {
    let mut x = 1.5f32;
    let (r, text) = sim::capture_printf(|| run(k::PRINTER, line(2, 4), &[p(&mut x)]));
    r.expect("launch");
    assert_eq!(
        text,
        "block 0:  1.50 -3 1 ff|7   |1.500000e+03\nblock 1:  1.50 -3 5 ff|7   |1.500000e+03\n"
    );
}

#[test]
fn assert_is_a_fault_and_the_next_launch_works() {
    let mut n = 35u32;
    let e = run(k::ASSERT_FAILS, line(2, 32), &[p(&mut n)]).unwrap_err();
    match &e {
        SimError::Fault {
            kernel,
            at,
            message,
            file,
            line,
            ..
        } => {
            assert_eq!(*kernel, "assert_fails");
            assert_eq!(at.block, [1, 0, 0]);
            assert_eq!(at.thread, [3, 0, 0]);
            assert_eq!(message, "thread hit n");
            assert!(file.ends_with("sim.rs"), "{file}");
            assert!(*line > 0);
        }
        other => panic!("not a fault: {other}"),
    }
    let text = e.to_string();
    assert!(text.contains("block (1, 0, 0) thread (3, 0, 0)"), "{text}");
    let mut n = 1000u32;
    run(k::ASSERT_FAILS, line(2, 32), &[p(&mut n)]).expect("the next launch works");
}

#[test]
fn a_panic_is_a_located_fault() {
    let mut n = 7usize;
    let e = run(k::PANICS, line(1, 32), &[p(&mut n)]).unwrap_err();
    match &e {
        SimError::Fault {
            at, message, file, ..
        } => {
            assert_eq!(at.thread, [5, 0, 0]);
            assert!(message.contains("index out of bounds"), "{message}");
            assert!(file.ends_with("sim.rs"), "{file}");
        }
        other => panic!("not a fault: {other}"),
    }
    let mut n = 1usize;
    run(k::PANICS, line(1, 32), &[p(&mut n)]).expect("the next launch works");
}

#[test]
fn a_shared_memory_race_is_reported() {
    let e = run(k::RACY_WRITE, line(2, 32), &[]).unwrap_err();
    println!("{e}");
    match &e {
        SimError::SharedRace {
            kernel,
            offset,
            first,
            second,
            ..
        } => {
            assert_eq!(*kernel, "racy_write");
            assert_eq!(*offset, 12);
            assert_eq!(first.0.thread, [0, 0, 0]);
            assert_eq!(second.0.thread, [1, 0, 0]);
            assert_eq!(first.0.block, [0, 0, 0]);
        }
        other => panic!("not a race: {other}"),
    }
    let text = e.to_string();
    assert!(text.contains("offset 12"), "{text}");
    // The array by its declaration, and both accesses' lines in this file.
    assert!(
        text.contains("(shared_array! at device/tests/sim.rs:"),
        "{text}"
    );
    assert_eq!(text.matches("device/tests/sim.rs:").count(), 3, "{text}");
    let out = buffer(&vec![0u32; k::TILE], "out");
    let mut op = out.ptr();
    let e = run(k::RACY_NEIGHBOUR, line(1, k::TILE as u32), &[p(&mut op)]).unwrap_err();
    println!("{e}");
    match &e {
        SimError::SharedRace { first, second, .. } => {
            // Thread 0 read word 1 before thread 1 wrote it.
            assert_eq!(first.0.thread, [0, 0, 0]);
            assert_eq!(first.1, sim::Access::Read);
            assert_eq!(second.0.thread, [1, 0, 0]);
            assert_eq!(second.1, sim::Access::Write);
        }
        other => panic!("not a race: {other}"),
    }
}

#[test]
fn a_correct_barrier_kernel_has_no_race() {
    let blocks = 4;
    let xs: Vec<u32> = (0..blocks * k::TILE as u32).collect();
    let x = buffer(&xs, "x");
    let out = buffer(&vec![0u32; blocks as usize], "out");
    let (mut xp, mut op) = (x.ptr(), out.ptr());
    for seed in [None, Some(1), Some(2)] {
        let o = SimOptions {
            seed,
            ..SimOptions::default()
        };
        run_with(
            k::BLOCK_SUM,
            line(blocks, k::TILE as u32),
            &[p(&mut xp), p(&mut op)],
            &o,
        )
        .expect("launch");
        let want: Vec<u32> = xs.chunks(k::TILE).map(|c| c.iter().sum()).collect();
        assert_eq!(read::<u32>(&out), want, "seed {seed:?}");
    }
}

#[test]
fn exited_threads_arrive_and_two_barriers_are_reported() {
    // Threads 16..64 exit; the others pass the barrier (compute capability
    // 7.0 and later count exited threads as arrived).
    run(k::HALF_BARRIER, line(1, 64), &[]).expect("exited threads count as arrived");
    let e = run(k::SPLIT_BARRIER, line(1, 32), &[]).unwrap_err();
    println!("{e}");
    match &e {
        SimError::BarrierDivergence { kernel, stuck, .. } => {
            assert_eq!(*kernel, "split_barrier");
            assert_eq!(stuck.len(), 2, "{e}");
            assert!(stuck[0].place.contains("sync_threads"), "{e}");
            assert!(stuck[0].place.contains("sim.rs"), "{e}");
            assert_ne!(stuck[0].place, stuck[1].place);
            assert_eq!(stuck[0].threads.len(), 16);
        }
        other => panic!("not a divergence: {other}"),
    }
}

/// Asserts that `site` (`file:line:column`) is a line of this file in the
/// kernel declared by `signature` (the access's line, or in optimised code
/// the loop's around it). Without line tables (`cargo test --release`)
/// there is no site to name, and `site` must be `None`.
fn assert_in_kernel(site: &Option<Box<str>>, signature: &str, e: &SimError) {
    if !line_tables::line_tables() {
        assert!(site.is_none(), "a site without line tables: {e}");
        return;
    }
    let site = site.as_deref().unwrap_or_else(|| panic!("no site: {e}"));
    let mut parts = site.rsplitn(3, ':');
    let (_column, line, file) = (parts.next(), parts.next(), parts.next());
    assert_eq!(file, Some(file!()), "{e}");
    let line: usize = line.and_then(|l| l.parse().ok()).expect("a line number");
    let lines: Vec<&str> = include_str!("sim.rs").lines().collect();
    let start = 1 + lines
        .iter()
        .position(|l| l.contains(signature))
        .expect("the kernel");
    let end = start
        + lines[start..]
            .iter()
            .position(|l| *l == "        }")
            .expect("its end");
    assert!(
        (start + 1..=end).contains(&line),
        "line {line} is not in the body, lines {} to {end}: {e}",
        start + 1
    );
}

fn read_past(past: usize) -> Result<(), SimError> {
    let n = 1000;
    let x = buffer(&vec![1.0f32; n], "x");
    let y = buffer(&vec![0.0f32; n], "y");
    let (mut xp, mut yp, mut np, mut pp) = (x.ptr(), y.ptr(), n, past);
    run(
        k::READ_PAST,
        line(4, 256),
        &[p(&mut xp), p(&mut yp), p(&mut np), p(&mut pp)],
    )
}

#[test]
fn reads_past_the_end_are_reported() {
    for past in [1, 5000] {
        let e = read_past(past).unwrap_err();
        println!("{e}");
        match &e {
            SimError::OutOfBounds {
                kernel,
                buffer,
                index,
                len,
                at,
                site,
            } => {
                assert_eq!(*kernel, "read_past");
                // A line of the kernel, not `read_volatile`'s in core.
                assert_in_kernel(site, "pub fn read_past(", &e);
                assert_eq!(&**buffer, "parameter `x`, buffer x");
                assert_eq!(*len, 1000);
                // The first thread to go past: global index 1000 - past
                // (or thread 0 when past ≥ 1000).
                let first = 1000usize.saturating_sub(past);
                assert_eq!(*index, (first + past) as i64, "{e}");
                assert_eq!(at.block, [(first / 256) as u32, 0, 0]);
                assert_eq!(at.thread, [(first % 256) as u32, 0, 0]);
            }
            other => panic!("not out of bounds: {other}"),
        }
    }
    // Before the start: caught from the page boundary below the buffer on
    // (the end, not the start, is placed at a guard page).
    let y = buffer(&[0.0f32; 4], "y");
    let (mut yp, mut back) = (y.ptr(), 1024usize);
    let e = run(k::WRITE_BEFORE, line(1, 4), &[p(&mut yp), p(&mut back)]).unwrap_err();
    println!("{e}");
    assert!(
        matches!(&e, SimError::OutOfBounds { index: -1024, at, .. } if at.thread == [2, 0, 0]),
        "{e}"
    );
    if let SimError::OutOfBounds { site, .. } = &e {
        assert_in_kernel(site, "pub fn write_before(", &e);
    }
    // And the simulator goes on.
    read_past(0).expect("an in-bounds launch after the faults");
}

#[test]
fn warp_misuse_and_shared_overflow_are_reported() {
    let out = buffer(&[0u32; 32], "out");
    let mut op = out.ptr();
    let e = run(k::SHUFFLE_AFTER_EXIT, line(1, 32), &[p(&mut op)]).unwrap_err();
    println!("{e}");
    assert!(
        matches!(&e, SimError::WarpCollective { reason, .. } if reason.contains("lane 3")),
        "{e}"
    );
    let mut i = 4usize;
    let e = run(k::SHARED_PAST_END, line(1, 1), &[p(&mut i)]).unwrap_err();
    assert!(
        matches!(&e, SimError::Fault { message, .. } if message.contains("past the block's")),
        "{e}"
    );
}

#[test]
fn a_stack_overflow_is_a_fault() {
    let mut n = 1_000_000u64;
    let e = run(k::OVERFLOW, line(1, 2), &[p(&mut n)]).unwrap_err();
    assert!(
        matches!(&e, SimError::Fault { message, at, .. }
            if message.contains("stack overflow") && at.thread == [0, 0, 0]),
        "{e}"
    );
    let mut n = 10u64;
    run(k::OVERFLOW, line(1, 2), &[p(&mut n)]).expect("the next launch works");
}

#[test]
fn the_default_order_is_deterministic_and_a_seed_shuffles_it() {
    let n = 128;
    let tickets = |seed: Option<u64>| {
        let out = buffer(&vec![0u32; n], "out");
        let counter = buffer(&[0u32], "counter");
        let (mut op, mut cp) = (out.ptr(), counter.ptr());
        let o = SimOptions {
            seed,
            ..SimOptions::default()
        };
        run_with(k::TICKETS, line(1, n as u32), &[p(&mut op), p(&mut cp)], &o).expect("launch");
        read::<u32>(&out)
    };
    let a = tickets(None);
    assert_eq!(a, tickets(None));
    let want: Vec<u32> = (0..n as u32).map(|t| t + 1000 * n as u32).collect();
    assert_eq!(a, want, "threads run in linear order by default");
    let s1 = tickets(Some(1));
    assert_ne!(s1, a, "a seed changes the order");
    assert_eq!(s1, tickets(Some(1)), "one seed, one order");
    let mut sorted = s1.clone();
    sorted.sort();
    assert_eq!(sorted, want, "a permutation of the same tickets");
}

#[test]
fn launches_past_the_limits_are_refused() {
    for (s, what) in [
        (line(1, 2048), "block dimension x"),
        (shape([1, 1, 1], [1024, 2, 1], 0), "threads per block"),
        (shape([1, 1, 1], [1, 1, 65], 0), "block dimension z"),
        (shape([1, 65536, 1], [1, 1, 1], 0), "grid dimension y"),
        (
            shape([1, 1, 1], [32, 1, 1], 49 * 1024),
            "dynamic shared memory",
        ),
        (line(0, 32), "zero dimension"),
    ] {
        let e = run(k::HALF_BARRIER, s, &[]).unwrap_err();
        match &e {
            SimError::LaunchRefused { reason, .. } => assert!(reason.contains(what), "{e}"),
            other => panic!("not refused: {other}"),
        }
    }
}

#[test]
fn multiply_of_2_pow_20_f32_is_fast() {
    let n = 1 << 20;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = buffer(&xs, "x");
    let y = buffer(&vec![0.0f32; n], "y");
    let (mut xp, mut yp, mut np, mut a) = (x.ptr(), y.ptr(), n, 3.0f32);
    let t = std::time::Instant::now();
    run(
        k::SCALE,
        line((n / 256) as u32, 256),
        &[p(&mut xp), p(&mut yp), p(&mut np), p(&mut a)],
    )
    .expect("launch");
    let dt = t.elapsed();
    println!("simulated multiply of 2^20 f32 (4096 blocks of 256): {dt:?}");
    assert!(
        read::<f32>(&y)
            .iter()
            .enumerate()
            .all(|(i, &v)| v == 3.0 * i as f32)
    );
    assert!(dt.as_secs_f64() < 1.0, "{dt:?}");
}
