//! Hopper on the simulator: one warpgroup loads a 64 × K tile of A and a
//! 256 × K tile of B with TMA (every swizzle), waits on its mbarrier, and
//! multiplies them with wgmma m64n256 (K-major and MN-major descriptors);
//! the result against an f64 reference. Then the detectors, each with a
//! broken variant of the kernel: an accumulator read before
//! `wgmma.wait_group` (it holds the poison), a missing `wgmma.fence`, a
//! wgmma that reads a TMA box before its mbarrier phase completed, a box
//! that does not fit shared memory, a descriptor whose swizzle is not the
//! one the data was written with, and a wait with the wrong parity (a
//! deadlock reported, not a hang).
use std::ffi::c_void;

use cuda_kernels_device::float16::bf16;
use cuda_kernels_device::kernel::Kernel;
use cuda_kernels_device::sim::{
    self, LaunchShape, SimError, SimOptions, TiledMap, encode_tiled, memory::Allocation,
};

/// How the kernel is broken (or not).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
enum Mode {
    Correct = 0,
    ReadBeforeWait = 1,
    NoFence = 2,
    NoPhaseWait = 3,
    SwizzleMismatch = 4,
    WrongParity = 5,
    BoxPastShared = 6,
}

mod k {
    use cuda_kernels_device::hopper::{
        self, Bf16, MBarrier, N256_ACCUMULATORS, WgmmaInput, wgmma_commit_group, wgmma_fence,
        wgmma_wait_group,
    };
    use cuda_kernels_device::{shared, sync, thread};

    /// The descriptor of a tile at `addr`: `swizzle` bytes (0: none, else
    /// 32, 64, 128), K-major rows of `swizzle` bytes in 8-row groups (`sbo`
    /// apart), or MN-major (`mn`): rows of `swizzle` bytes along M/N, one
    /// per k, 8-k groups `sbo` apart, 64-element blocks `lbo` apart.
    pub fn descriptor(addr: u32, swizzle: u32, lbo: u32, sbo: u32) -> u64 {
        let mode = match swizzle {
            128 => 1u64,
            64 => 2,
            32 => 3,
            _ => 0,
        };
        u64::from(addr >> 4) | u64::from(lbo >> 4) << 16 | u64::from(sbo >> 4) << 32 | mode << 62
    }

    cuda_kernels_device::kernels! {
        /// One warpgroup: thread 0 loads the box at (0, 0, 0) of `in_map`
        /// into shared memory (TMA), all wait on its barrier and meet at
        /// named barrier 1, and thread 0 stores the box to `out_map` at
        /// (0, 0, 0) (a TMA store; the box's elements outside the tensor are
        /// not written).
        ///
        /// # Safety
        /// Both maps describe bf16 tensors with the same box; 128 threads,
        /// 48 KiB of dynamic shared memory.
        pub fn round_trip(in_map: *const u64, out_map: *const u64, box_bytes: u32) as ROUND_TRIP {
            let tile = (shared::dynamic_shared_address() + 1023) & !1023;
            // SAFETY: 8 bytes after the box, initialised before the barrier.
            let bar = unsafe { MBarrier::at(tile + box_bytes) };
            let t = thread::thread_idx_x();
            if t == 0 {
                bar.init(1);
                hopper::fence_barrier_init();
            }
            sync::sync_threads();
            if t == 0 {
                bar.arrive_expect_tx(box_bytes);
                // SAFETY: the launch's map; the tile is free.
                unsafe { hopper::tma_load_3d(tile, in_map as u64, &bar, 0, 0, 0) };
            }
            bar.wait(0);
            // SAFETY: all 128 threads of the block meet here.
            unsafe { hopper::named_barrier_sync(1, 128) };
            if t == 0 {
                hopper::fence_proxy_async_shared();
                // SAFETY: the launch's map; the tile holds the box.
                unsafe { hopper::tma_store_3d(out_map as u64, tile, 0, 0, 0) };
                hopper::bulk_commit_group();
                hopper::bulk_wait_group::<0>();
            }
        }

        /// One warpgroup: `out[m][n] = Σ_k A[m][k] B[n][k]`, A 64 × K and B
        /// 256 × K bf16 loaded by TMA with a `swizzle`-byte swizzle (K =
        /// swizzle / 2 elements: one box row), K-major, or MN-major (`mn`:
        /// A stored K × 64 and B K × 256, boxes of K along M/N); `mode`
        /// breaks it (see `Mode`); `out[64 · 256]` is accumulator 0 of
        /// thread 0 read before the wait (in mode 1).
        ///
        /// # Safety
        /// The maps describe A and B as above; `out` holds 64 · 256 + 1
        /// f32; 128 threads, 48 KiB of dynamic shared memory.
        pub fn tile(a_map: *const u64, b_map: *const u64, out: *mut f32, swizzle: u32, mn: u32, mode: u32) as TILE {
            let ring = (shared::dynamic_shared_address() + 1023) & !1023;
            let k = swizzle / 2;
            let a_tile = ring;
            let b_tile = ring + 64 * 2 * k;
            let bar_at = b_tile + 256 * 2 * k;
            // SAFETY: 8 bytes after the tiles, initialised before the barrier.
            let bar = unsafe { MBarrier::at(bar_at) };
            let t = thread::thread_idx_x();
            if t == 0 {
                bar.init(1);
                hopper::fence_barrier_init();
            }
            sync::sync_threads();
            if t == 0 {
                bar.arrive_expect_tx(2 * k * (64 + 256));
                let b_dst = if mode == 6 { ring + 40 * 1024 } else { b_tile };
                // SAFETY: the launch's maps; the tiles are free.
                unsafe {
                    if mn == 0 {
                        hopper::tma_load_3d(a_tile, a_map as u64, &bar, 0, 0, 0);
                        hopper::tma_load_3d(b_dst, b_map as u64, &bar, 0, 0, 0);
                    } else {
                        // Boxes of `k` elements along M/N (one swizzle row)
                        // by the k rows, each `2 k²` bytes.
                        for j in 0..64 / k {
                            let dst = a_tile + j * 2 * k * k;
                            hopper::tma_load_3d(dst, a_map as u64, &bar, (k * j) as i32, 0, 0);
                        }
                        for j in 0..256 / k {
                            let dst = b_dst + j * 2 * k * k;
                            hopper::tma_load_3d(dst, b_map as u64, &bar, (k * j) as i32, 0, 0);
                        }
                    }
                }
            }
            if mode != 3 {
                bar.wait(0);
            }
            if mode == 5 {
                bar.wait(1);
            }
            let mut acc = [0f32; N256_ACCUMULATORS];
            if mode != 2 {
                wgmma_fence();
            }
            let read_swizzle = if mode == 4 { swizzle / 2 } else { swizzle };
            for s in 0..k / 16 {
                // SAFETY: the whole warpgroup, fenced, the tiles in place.
                unsafe {
                    if mn == 0 {
                        let da = descriptor(a_tile + 32 * s, read_swizzle, 16, 8 * swizzle);
                        let db = descriptor(b_tile + 32 * s, read_swizzle, 16, 8 * swizzle);
                        Bf16::mma_m64n256::<false, false>(&mut acc, da, db);
                    } else {
                        // 16 k a step: two 8-k groups of `swizzle`-byte rows.
                        let step = 16 * swizzle * s;
                        let da = descriptor(a_tile + step, read_swizzle, 2 * k * k, 8 * swizzle);
                        let db = descriptor(b_tile + step, read_swizzle, 2 * k * k, 8 * swizzle);
                        Bf16::mma_m64n256::<true, true>(&mut acc, da, db);
                    }
                }
            }
            wgmma_commit_group();
            if mode == 1 && t == 0 {
                // SAFETY: out holds 64 · 256 + 1 f32.
                unsafe { *out.add(64 * 256) = acc[0] };
            }
            wgmma_wait_group::<0>();
            let (w, l) = (t / 32, t % 32);
            for j in 0..32 {
                for e in 0..4 {
                    let row = 16 * w + l / 4 + 8 * (e / 2);
                    let col = 8 * j + 2 * (l % 4) + e % 2;
                    // SAFETY: row < 64, col < 256: inside out, this thread's element.
                    unsafe { *out.add((row * 256 + col) as usize) = acc[(4 * j + e) as usize] };
                }
            }
        }
    }
}

/// A simulated device buffer holding `values`.
fn buffer<T: Copy>(values: &[T], label: &str) -> Allocation {
    let a = Allocation::new(size_of_val(values), size_of::<T>(), label).expect("mmap");
    // SAFETY: the allocation holds exactly these bytes.
    unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), a.ptr().cast(), values.len()) };
    a
}

fn random(n: usize, seed: u64) -> Vec<bf16> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            bf16::narrow(((s >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0)
        })
        .collect()
}

/// A bf16 tensor map of `rows × inner` elements (`inner` contiguous), box
/// `box_inner × box_rows`, with `swizzle` bytes.
fn map(data: &Allocation, inner: u64, rows: u64, boxes: [u32; 2], swizzle: u32) -> Allocation {
    let code = match swizzle {
        32 => 1,
        64 => 2,
        128 => 3,
        _ => 0,
    };
    let m = encode_tiled(&TiledMap {
        data_type: 9,
        rank: 3,
        global_address: data.ptr() as u64,
        dims: [inner, rows, 1, 0, 0],
        strides: [inner * 2, inner * rows * 2, 0, 0],
        box_dims: [boxes[0], boxes[1], 1, 0, 0],
        element_strides: [1, 1, 1, 0, 0],
        interleave: 0,
        swizzle: code,
        l2_promotion: 0,
        oob_fill: 0,
    })
    .expect("a valid map");
    buffer(&m.0, "tensor map")
}

/// Runs the tile kernel: its output, or what the simulator reported.
fn run(swizzle: u32, mn: bool, mode: Mode) -> (Result<Vec<f32>, SimError>, Vec<bf16>, Vec<bf16>) {
    let k = (swizzle / 2) as usize;
    let (a, b) = (random(64 * k, 1 + swizzle as u64), random(256 * k, 7));
    let (da, db) = (buffer(&a, "a"), buffer(&b, "b"));
    let (ma, mb) = if mn {
        // Stored K × 64 and K × 256: boxes of 64 along M/N by K.
        (
            map(&da, 64, k as u64, [k as u32, k as u32], swizzle),
            map(&db, 256, k as u64, [k as u32, k as u32], swizzle),
        )
    } else {
        (
            map(&da, k as u64, 64, [k as u32, 64], swizzle),
            map(&db, k as u64, 256, [k as u32, 256], swizzle),
        )
    };
    let out = Allocation::new((64 * 256 + 1) * 4, 4, "out").expect("mmap");
    let (mut pa, mut pb, mut po) = (
        ma.ptr().cast::<u64>(),
        mb.ptr().cast::<u64>(),
        out.ptr().cast::<f32>(),
    );
    let (mut sw, mut m, mut md) = (swizzle, mn as u32, mode as u32);
    let params: [*mut c_void; 6] = [
        (&raw mut pa).cast(),
        (&raw mut pb).cast(),
        (&raw mut po).cast(),
        (&raw mut sw).cast(),
        (&raw mut m).cast(),
        (&raw mut md).cast(),
    ];
    let shape = LaunchShape {
        grid: [1, 1, 1],
        block: [128, 1, 1],
        dynamic_shared_bytes: 48 * 1024,
    };
    let kernel: Kernel<_> = k::TILE;
    let entry = kernel.sim_entry().expect("a host entry");
    // SAFETY: the kernel's parameters and buffers as its contract says
    // (broken on purpose where the simulator must catch it).
    let r =
        unsafe { sim::launch_with(kernel.name(), shape, entry, &params, &SimOptions::default()) };
    let r = r.map(|()| {
        // SAFETY: out holds 64 · 256 + 1 f32.
        unsafe { std::slice::from_raw_parts(out.ptr().cast::<f32>(), 64 * 256 + 1) }.to_vec()
    });
    (r, a, b)
}

/// The largest error of `got` (64 × 256) against `Σ_k A[m][k] B[n][k]`
/// in f64, relative to `Σ_k |A||B|`.
fn check(got: &[f32], a: &[bf16], b: &[bf16], k: usize, mn: bool) -> Result<(), String> {
    let at = |m: usize, kk: usize| if mn { a[kk * 64 + m] } else { a[m * k + kk] }.widen() as f64;
    let bt = |n: usize, kk: usize| if mn { b[kk * 256 + n] } else { b[n * k + kk] }.widen() as f64;
    for m in 0..64 {
        for n in 0..256 {
            let (mut e, mut mag) = (0f64, 0f64);
            for kk in 0..k {
                e += at(m, kk) * bt(n, kk);
                mag += (at(m, kk) * bt(n, kk)).abs();
            }
            let g = got[m * 256 + n] as f64;
            if (g - e).abs() > 1e-6 * mag + 1e-30 {
                return Err(format!("C[{m}][{n}] = {g}, exact {e}"));
            }
        }
    }
    Ok(())
}

#[test]
fn wgmma_multiplies_tma_tiles_of_every_swizzle_and_major() {
    for swizzle in [32, 64, 128] {
        for mn in [false, true] {
            let (r, a, b) = run(swizzle, mn, Mode::Correct);
            let got = r.unwrap_or_else(|e| panic!("swizzle {swizzle}, mn {mn}: {e}"));
            check(&got, &a, &b, swizzle as usize / 2, mn)
                .unwrap_or_else(|e| panic!("swizzle {swizzle}, mn {mn}: {e}"));
        }
    }
}

#[test]
fn the_check_catches_a_wrong_layout() {
    // The K-major tile checked as MN-major: the planted fault is caught.
    let (r, a, b) = run(128, false, Mode::Correct);
    assert!(check(&r.expect("runs"), &a, &b, 64, true).is_err());
}

#[test]
fn an_accumulator_read_before_wait_group_holds_the_poison() {
    let (r, _, _) = run(128, false, Mode::ReadBeforeWait);
    let got = r.expect("runs");
    assert_eq!(got[64 * 256].to_bits(), sim::WGMMA_POISON);
}

/// The report of a broken mode: a located fault (or deadlock) naming this
/// file, containing `words`.
fn reported(mode: Mode, words: &str) {
    let (r, _, _) = run(128, false, mode);
    let e = r.expect_err("the simulator reports it").to_string();
    assert!(
        e.contains(words) && e.contains("device/tests/sim_hopper.rs:"),
        "{mode:?}: {e}"
    );
    eprintln!("{mode:?}: {e}");
}

#[test]
fn a_missing_wgmma_fence_is_reported() {
    reported(Mode::NoFence, "no wgmma.fence");
}

#[test]
fn reading_a_tma_box_before_its_phase_completes_is_reported() {
    reported(Mode::NoPhaseWait, "a TMA load in flight writes");
}

#[test]
fn a_descriptor_whose_swizzle_disagrees_with_the_load_is_reported() {
    reported(
        Mode::SwizzleMismatch,
        "the 64-byte swizzle, but the TMA load",
    );
}

#[test]
fn a_box_past_shared_memory_is_reported() {
    reported(Mode::BoxPastShared, "go past the block's");
}

#[test]
fn a_wait_with_the_wrong_parity_is_a_deadlock_reported() {
    reported(
        Mode::WrongParity,
        "deadlock: wait at mbarrier.try_wait with parity 1",
    );
}

#[test]
fn a_tma_store_writes_back_what_a_tma_load_read_inside_the_tensor() {
    // 50 rows of 64 bf16: the 64-row box reads zeros past row 50 and
    // writes rows 0..50 alone (the output buffer ends there: a guard page
    // after it).
    for rows in [64u64, 50] {
        let data = random(rows as usize * 64, 11);
        let input = buffer(&data, "in");
        let output = Allocation::new(data.len() * 2, 2, "out").expect("mmap");
        let in_map = map(&input, 64, rows, [64, 64], 128);
        let out_map = map(&output, 64, rows, [64, 64], 128);
        let (mut pi, mut po, mut bytes) = (
            in_map.ptr().cast::<u64>(),
            out_map.ptr().cast::<u64>(),
            64 * 64 * 2u32,
        );
        let params: [*mut c_void; 3] = [
            (&raw mut pi).cast(),
            (&raw mut po).cast(),
            (&raw mut bytes).cast(),
        ];
        let shape = LaunchShape {
            grid: [1, 1, 1],
            block: [128, 1, 1],
            dynamic_shared_bytes: 48 * 1024,
        };
        let entry = k::ROUND_TRIP.sim_entry().expect("a host entry");
        // SAFETY: the kernel's parameters: maps of bf16 tensors with one box.
        unsafe {
            sim::launch_with(
                k::ROUND_TRIP.name(),
                shape,
                entry,
                &params,
                &SimOptions::default(),
            )
        }
        .unwrap_or_else(|e| panic!("{rows} rows: {e}"));
        // SAFETY: the output holds the tensor's elements.
        let got = unsafe { std::slice::from_raw_parts(output.ptr().cast::<bf16>(), data.len()) };
        assert!(
            got == &data[..],
            "{rows} rows: the round trip changed the data"
        );
    }
}
