//! The simulator's tensor-core instructions (`device::mma`): `mma.sync`
//! with fragments placed by the layouts gives the exact product, a fragment
//! built from the wrong layout does not, `ldmatrix` (plain and `.trans`)
//! gives each lane the elements its layout names, and a read of `cp.async`'d
//! shared memory before `cp.async.wait_group` reads NaN (`0xff` bytes), the
//! data only after.
use std::ffi::c_void;

use cuda_kernels_device::float16::bf16;
use cuda_kernels_device::kernel::Kernel;
use cuda_kernels_device::mma::{A_M16K16, B_K16N8, C_M16N8, LDMATRIX_8X8};
use cuda_kernels_device::sim::{self, LaunchShape, SimOptions, memory::Allocation};

mod k {
    use cuda_kernels_device::float16::bf16;
    use cuda_kernels_device::mma::{self, A_M16K16, B_K16N8, C_M16N8, FragA, FragB};
    use cuda_kernels_device::shared::{SharedScalar, dynamic_shared_address};
    use cuda_kernels_device::{sync::sync_threads, thread, warp};

    cuda_kernels_device::kernels! {
        /// One warp: `d = a · b` (16 × 16 · 16 × 8, bf16, row-major), the
        /// fragments from the layouts; with `swap_b` the B fragment is
        /// built with A's layout (a wrong load).
        ///
        /// # Safety
        /// `a` holds 256, `b` 128 bf16, `d` 128 f32; 32 threads.
        pub fn mma_tile(a: *const bf16, b: *const bf16, d: *mut f32, swap_b: u32) as MMA_TILE {
            let lane = warp::lane_id();
            // SAFETY: indices inside the tiles (the layouts' ranges).
            let fa = FragA::<bf16>::from_fn(lane, |r, c| unsafe { *a.add((r * 16 + c) as usize) });
            let fb = if swap_b == 0 {
                // SAFETY: as above.
                FragB::<bf16>::from_fn(lane, |r, c| unsafe { *b.add((r * 8 + c) as usize) })
            } else {
                let wrong = FragA::<bf16>::from_fn(lane, |r, c| {
                    // SAFETY: (r % 16, c % 8) is inside B.
                    unsafe { *b.add(((r % 16) * 8 + c % 8) as usize) }
                });
                FragB::from_regs([wrong.regs[0], wrong.regs[1]])
            };
            let out = mma::mma_m16n8k16(fa, fb, [0.0; 4]);
            for (e, v) in out.iter().enumerate() {
                let (r, c) = C_M16N8.coord(lane, e as u32);
                // SAFETY: inside D; one lane per element.
                unsafe { *d.add((r * 8 + c) as usize) = *v };
            }
            let _ = (A_M16K16, B_K16N8);
        }

        /// One warp: a 16 × 16 u16 tile (value = index) in shared memory,
        /// `ldmatrix_x4` (trans = 0) or `ldmatrix_x4_trans` of it with lane
        /// `l` addressing row `l % 16`, column `8 · (l / 16)`; `out[lane][i]`
        /// the registers.
        ///
        /// # Safety
        /// `out` holds 128 u32; 32 threads, 512 bytes of dynamic shared memory.
        pub fn ldmatrix_tile(out: *mut u32, trans: u32) as LDMATRIX_TILE {
            let lane = warp::lane_id();
            let base = dynamic_shared_address();
            for i in 0..4 {
                let idx = lane * 4 + i;
                let word = (2 * idx) | (2 * idx + 1) << 16;
                // SAFETY: 128 words in the 512 bytes.
                unsafe { u32::store_shared(base + 4 * idx, word) };
            }
            sync_threads();
            let row_addr = base + (lane % 16) * 32 + (lane / 16) * 16;
            // SAFETY: every row address is a 16-byte aligned row of the tile.
            let regs = unsafe {
                if trans == 0 { mma::ldmatrix_x4(row_addr) } else { mma::ldmatrix_x4_trans(row_addr) }
            };
            for (i, r) in regs.iter().enumerate() {
                // SAFETY: inside out.
                unsafe { *out.add((lane * 4) as usize + i) = *r };
            }
        }

        /// Each of 32 threads `cp.async`s 16 bytes of `src` to shared memory,
        /// reads its first word before the wait (`out[2t]`) and after
        /// (`out[2t + 1]`).
        ///
        /// # Safety
        /// `src` holds 128 u32, `out` 64; 32 threads, 512 bytes of dynamic
        /// shared memory.
        pub fn cp_async_early_read(src: *const u32, out: *mut u32) as CP_ASYNC_EARLY_READ {
            let t = thread::thread_idx_x();
            let dst = dynamic_shared_address() + 16 * t;
            // SAFETY: 16 aligned bytes of src and of shared memory, this thread's.
            unsafe { mma::cp_async_16(dst, src.add(4 * t as usize).cast(), 16) };
            mma::cp_async_commit();
            // SAFETY: this thread's own destination (the read is the bug under test).
            let early = unsafe { u32::load_shared(dst) };
            mma::cp_async_wait::<0>();
            // SAFETY: as above, after the wait.
            let late = unsafe { u32::load_shared(dst) };
            // SAFETY: inside out.
            unsafe {
                *out.add(2 * t as usize) = early;
                *out.add(2 * t as usize + 1) = late;
            }
        }
    }
}

fn p<T>(v: &mut T) -> *mut c_void {
    (v as *mut T).cast()
}

fn run<P>(kernel: Kernel<P>, threads: u32, shared: u32, params: &[*mut c_void]) {
    let entry = kernel.sim_entry().expect("kernels! gives a host entry");
    let shape = LaunchShape {
        grid: [1, 1, 1],
        block: [threads, 1, 1],
        dynamic_shared_bytes: shared,
    };
    // SAFETY: every test passes its kernel's parameters with buffers as its
    // `# Safety` asks.
    unsafe { sim::launch_with(kernel.name(), shape, entry, params, &SimOptions::default()) }
        .expect("launch");
}

fn buffer<T: Copy>(values: &[T], label: &str) -> Allocation {
    let a = Allocation::new(size_of_val(values), size_of::<T>(), label).expect("mmap");
    // SAFETY: the allocation holds exactly these bytes.
    unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), a.ptr().cast(), values.len()) };
    a
}

fn read<T: Copy>(a: &Allocation) -> Vec<T> {
    let n = a.len_bytes() / size_of::<T>();
    // SAFETY: the allocation holds n values of T.
    unsafe { std::slice::from_raw_parts(a.ptr().cast::<T>(), n) }.to_vec()
}

fn mma_with(swap_b: u32) -> (Vec<f32>, Vec<f32>) {
    let av: Vec<bf16> = (0..256)
        .map(|i| bf16::narrow(((i * 7) % 13) as f32 - 6.0))
        .collect();
    let bv: Vec<bf16> = (0..128)
        .map(|i| bf16::narrow(((i * 5) % 11) as f32 - 5.0))
        .collect();
    let (a, b) = (buffer(&av, "a"), buffer(&bv, "b"));
    let d = buffer(&[0f32; 128], "d");
    let (mut ap, mut bp, mut dp, mut s) = (a.ptr(), b.ptr(), d.ptr(), swap_b);
    run(
        k::MMA_TILE,
        32,
        0,
        &[p(&mut ap), p(&mut bp), p(&mut dp), p(&mut s)],
    );
    let exact = (0..128)
        .map(|i| {
            let (r, c) = (i / 8, i % 8);
            (0..16)
                .map(|kk| av[r * 16 + kk].widen() * bv[kk * 8 + c].widen())
                .sum()
        })
        .collect();
    (read(&d), exact)
}

#[test]
fn mma_with_the_layouts_is_the_product() {
    let (got, exact) = mma_with(0);
    assert_eq!(got, exact);
    // The layouts cover their tiles once each (what the kernel relies on).
    for l in [A_M16K16, B_K16N8, C_M16N8, LDMATRIX_8X8] {
        let mut seen = vec![0; (l.rows * l.cols) as usize];
        for lane in 0..32 {
            for e in 0..l.elems {
                let (r, c) = l.coord(lane, e);
                seen[(r * l.cols + c) as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{l:?}");
    }
}

#[test]
fn a_fragment_from_the_wrong_layout_is_caught() {
    let (got, exact) = mma_with(1);
    assert_ne!(got, exact);
}

#[test]
fn ldmatrix_gives_the_layouts_elements() {
    for trans in [0u32, 1] {
        let out = buffer(&[0u32; 128], "out");
        let (mut op, mut t) = (out.ptr(), trans);
        run(k::LDMATRIX_TILE, 32, 512, &[p(&mut op), p(&mut t)]);
        let got = read::<u32>(&out);
        for lane in 0..32u32 {
            for i in 0..4u32 {
                // Matrix i: rows 8·(i % 2).., columns 8·(i / 2).. of the 16 × 16 tile.
                let (r0, c0) = (8 * (i % 2), 8 * (i / 2));
                let mut want = 0u32;
                for e in 0..2 {
                    let (r, c) = LDMATRIX_8X8.coord(lane, e);
                    let (r, c) = if trans == 1 { (c, r) } else { (r, c) };
                    want |= ((r0 + r) * 16 + c0 + c) << (16 * e);
                }
                assert_eq!(
                    got[(lane * 4 + i) as usize],
                    want,
                    "trans {trans} lane {lane} reg {i}"
                );
            }
        }
    }
}

#[test]
fn a_read_before_cp_async_wait_reads_nan() {
    let srcv: Vec<u32> = (0..128).map(|i| i * 3 + 1).collect();
    let src = buffer(&srcv, "src");
    let out = buffer(&[0u32; 64], "out");
    let (mut sp, mut op) = (src.ptr(), out.ptr());
    run(k::CP_ASYNC_EARLY_READ, 32, 512, &[p(&mut sp), p(&mut op)]);
    let got = read::<u32>(&out);
    for t in 0..32 {
        assert_eq!(got[2 * t], u32::MAX, "thread {t} read before the wait");
        assert_eq!(got[2 * t + 1], srcv[4 * t], "thread {t} after the wait");
    }
}

/// `tensor_core_dot` on words an H200 computed (`fid_mma_words`, words 533,
/// 1963, 642 and 2726 of the run of 2026-12-02): each of the first three is
/// missed by the exact sum rounded either way, and by the model with 24 or
/// 26 kept bits, with alignment to the products' normalised exponents, or
/// with two's-complement (floor) truncation; the fourth overflows to ∞.
#[test]
fn tensor_core_dot_gives_the_h200s_words() {
    use cuda_kernels_device::float16::f16;
    use cuda_kernels_device::mma::tensor_core_dot;
    let bf = |v: &[u16]| -> Vec<f32> { v.iter().map(|&b| bf16::from_bits(b).widen()).collect() };
    let hf = |v: &[u16]| -> Vec<f32> { v.iter().map(|&b| f16::from_bits(b).widen()).collect() };
    let tf =
        |v: &[u32]| -> Vec<f32> { v.iter().map(|&b| f32::from_bits(b & 0xffff_e000)).collect() };
    let cases: [(u32, Vec<f32>, Vec<f32>, u32); 4] = [
        (
            0xc208_be72,
            hf(&[
                0x414a, 0xd38c, 0xdf9a, 0x46da, 0xc923, 0x253f, 0x450c, 0x66bb, 0xa4a9, 0x32e5,
                0x36d7, 0xe2d1, 0x2f70, 0xd4a3, 0x2818, 0x5bc4,
            ]),
            hf(&[
                0xafbc, 0x2cbf, 0xb8a4, 0x5268, 0xa398, 0x4678, 0x6768, 0xbaed, 0x61ea, 0xc484,
                0x9a5c, 0xa804, 0xc5bb, 0xb656, 0xda96, 0xcf4a,
            ]),
            0x44b6_a4c5,
        ),
        (
            0x44c5_eae6,
            bf(&[
                0xc4df, 0xbae3, 0xc1c3, 0xbd8b, 0x4160, 0x42d3, 0x426f, 0xbe4b, 0x3ee9, 0x3dcc,
                0x4056, 0xbc28, 0x3d6b, 0xbe2e, 0xc2e0, 0xc23f,
            ]),
            bf(&[
                0xc21a, 0x3edf, 0xbdbd, 0xbd9b, 0x41db, 0x3ceb, 0xc4a3, 0xc2a8, 0x4166, 0xbe2c,
                0x3ba8, 0x42b8, 0x3d70, 0xc2b8, 0xbf85, 0xc252,
            ]),
            0xc58f_a7f4,
        ),
        (
            0x3e5f_25f6,
            tf(&[
                0xc4c1_8079,
                0xc1c2_0155,
                0x41c6_f689,
                0xc1c3_4846,
                0x3ff7_a55d,
                0xbbc4_3e50,
                0x419e_bf37,
                0xc26f_5fbe,
            ]),
            tf(&[
                0x4036_0500,
                0x3d6e_eace,
                0xc265_9467,
                0x3fc8_4061,
                0x3f6e_f0ea,
                0xbf67_f69d,
                0x3fde_c49b,
                0xc2b4_bc88,
            ]),
            0xc3d6_d6c6,
        ),
        (
            0xbfc1_01c5,
            bf(&[
                0x3ffb, 0x3fb3, 0x3f61, 0x3ffd, 0x7f7f, 0xbff6, 0xbff9, 0x3f99, 0xbf41, 0x3fe5,
                0x3fff, 0xbfc3, 0x3f5b, 0x3f89, 0x3f79, 0x3ffe,
            ]),
            bf(&[
                0x3feb, 0x3f31, 0x3fa6, 0x3fb9, 0x3ffe, 0x3f40, 0x3f77, 0x3fef, 0xbf8f, 0xbf91,
                0xbf8e, 0x3fc3, 0xbfa7, 0x3f09, 0x3f51, 0xbf0b,
            ]),
            0x7f80_0000,
        ),
    ];
    for (i, (c, a, b, want)) in cases.iter().enumerate() {
        let got = tensor_core_dot(f32::from_bits(*c), a, b).to_bits();
        assert_eq!(got, *want, "case {i}: {got:#010x} want {want:#010x}");
        let exact: f64 = f64::from(f32::from_bits(*c))
            + a.iter()
                .zip(b)
                .map(|(&x, &y)| f64::from(x) * f64::from(y))
                .sum::<f64>();
        if want & 0x7f80_0000 != 0x7f80_0000 {
            assert_ne!(
                (exact as f32).to_bits(),
                *want,
                "case {i}: not distinguishing"
            );
        }
    }
    // Specials: canonical NaN for a NaN operand, ∞ · 0 and ∞ − ∞.
    let one = [1.0f32; 2];
    for (c, a) in [
        (0.0, [f32::from_bits(0x7fc0_1234), 1.0]),
        (0.0, [f32::INFINITY, 0.0]),
        (f32::NEG_INFINITY, [f32::INFINITY, 1.0]),
    ] {
        let b = if a[1] == 0.0 { [0.0, 1.0] } else { one };
        assert_eq!(
            tensor_core_dot(c, &a, &b).to_bits(),
            0x7fff_ffff,
            "{c} {a:?}"
        );
    }
    assert_eq!(
        tensor_core_dot(1.0, &[f32::INFINITY, -1.0], &one),
        f32::INFINITY
    );
}
