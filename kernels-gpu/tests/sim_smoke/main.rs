//! The smoke tier of the CPU simulator: every kernel of this crate, launched
//! from its one declaration (its handle's host entry) on the simulator with
//! `sim::memory` buffers at small, odd sizes, and checked against the CPU
//! per-element functions. The host crate's suite covers the launchers; this
//! tier proves that the kernels themselves run on the host.
//!
//! Two tests also time the reference launches (multiply of 2^20 f32
//! and the tiled SGEMM at 256³) and print the times.
use std::ffi::c_void;
use std::marker::PhantomData;
use std::time::Instant;

use cuda_kernels_gpu::device::kernel::Kernel;
use cuda_kernels_gpu::device::sim::{self, LaunchShape, SimError, memory::Allocation};
use cuda_kernels_gpu::elementwise::{self as ew, Elementwise};
use cuda_kernels_gpu::reduce::{self, Max, Min, Product, ReduceKernel, Sum, Xor};
use cuda_kernels_gpu::{
    device_checks, elementwise, hello, life, mandelbrot, math_checks, matmul, multiply, streams,
};

mod elementwise_checks;
mod gemm_staging;
mod launched_elsewhere;
mod launching;
mod matmul_checks;
mod reduce_checks;

use elementwise_checks::*;
use gemm_staging::*;
use launched_elsewhere::*;
use launching::*;
use matmul_checks::*;
use reduce_checks::*;

#[test]
fn multiply_and_vector_sum() {
    for n in [1, 3, 37, 1037] {
        let (a, b) = (values(n, 1), values(n, 2));
        let (c, _) = binary_map(multiply::MULTIPLY, linear(3, 64), &a, &b);
        assert_eq!(
            c,
            zip_map(&a, &b, multiply::multiply_element),
            "multiply, n = {n}"
        );

        let (a, b) = (ints(n, 3), ints(n, 4));
        let (c, _) = binary_map(multiply::VECTOR_SUM_I32, linear(2, 32), &a, &b);
        assert_eq!(
            c,
            zip_map(&a, &b, multiply::vector_sum_element),
            "vector_sum_i32, n = {n}"
        );
    }
    // SAFETY: no parameters.
    unsafe { launch(multiply::EMPTY_KERNEL, linear(2, 64), ()) }.unwrap();
}

#[test]
fn elementwise_kernels() {
    // Every kernel of the crate's list, for every type it is declared for.
    check_elementwise::<ew::sum, i32>();
    check_elementwise::<ew::sum, i64>();
    check_elementwise::<ew::sum, f32>();
    check_elementwise::<ew::sum, f64>();
    check_elementwise::<ew::saxpy, f32>();
    check_elementwise::<ew::saxpy, f64>();
    check_elementwise::<ew::lerp, f32>();
    check_elementwise::<ew::lerp, f64>();

    let n = 531;
    // vector_sum_repeat.
    let (a, b) = (values(n, 9), values(n, 10));
    let (da, db, dc) = (Buf::from(&a), Buf::from(&b), Buf::<f32>::zeroed(n));
    // SAFETY: three buffers of n f32, c apart from a and b.
    unsafe {
        launch(
            elementwise::VECTOR_SUM_REPEAT,
            linear(2, elementwise::REPEAT_THREADS),
            (
                da.ptr().cast_const(),
                db.ptr().cast_const(),
                dc.ptr(),
                n,
                3u32,
            ),
        )
    }
    .unwrap();
    let want = zip_map(&a, &b, elementwise::vector_sum_repeat_element);
    assert_eq!(dc.to_vec(), want, "vector_sum_repeat");
}

#[test]
fn matrix_kernels() {
    // Odd shapes everywhere.
    let (m, k, n) = (37, 29, 45);
    let (a, b) = (values(m * k, 11), values(k * n, 12));
    let b2 = matmul::BLOCK_2D;
    let grid = [
        n.div_ceil(b2 as usize) as u32,
        m.div_ceil(b2 as usize) as u32,
        1,
    ];
    let (c, _) = matmul_sim(
        matmul::MATRIX_MUL_NAIVE,
        shape(grid, [b2, b2, 1], 0),
        &a,
        &b,
        (m, k, n),
    );
    assert_close(&c, &matmul_cpu(&a, &b, m, k, n), k, "matrix_mul_naive");

    // doubles_matrix, in place.
    let x = values(m * n, 15);
    let dx = Buf::from(&x);
    // SAFETY: m × n f32.
    unsafe { launch(matmul::DOUBLES_MATRIX, linear(3, 64), (dx.ptr(), m, n)) }.unwrap();
    let want: Vec<f32> = x.iter().map(|&v| matmul::double_element(v)).collect();
    assert_eq!(dx.to_vec(), want, "doubles_matrix");

    // Two batches of 3×5 · 5×4 sharing one B (a broadcast).
    let (bm, bn, bp) = (3usize, 5usize, 4usize);
    let a: Vec<i64> = (0..2 * bm * bn).map(|v| v as i64 * 7 - 20).collect();
    let b: Vec<i64> = (0..bn * bp).map(|v| v as i64 * 3 - 9).collect();
    let (a_off, b_off) = (vec![0usize, bm * bn], vec![0usize, 0]);
    let (da, db) = (Buf::from(&a), Buf::from(&b));
    let (dao, dbo, dc) = (
        Buf::from(&a_off),
        Buf::from(&b_off),
        Buf::<i64>::zeroed(2 * bm * bp),
    );
    // SAFETY: the offsets locate each batch's matrices inside A and B.
    unsafe {
        launch(
            matmul::GUFUNC_MATMUL_I64,
            linear(1, matmul::GUFUNC_THREADS),
            (
                da.ptr().cast_const(),
                db.ptr().cast_const(),
                dao.ptr().cast_const(),
                dbo.ptr().cast_const(),
                dc.ptr(),
                2usize,
                bm,
                bn,
                bp,
            ),
        )
    }
    .unwrap();
    let mut want = vec![0i64; 2 * bm * bp];
    for z in 0..2 {
        for i in 0..bm {
            for j in 0..bp {
                want[(z * bm + i) * bp + j] = (0..bn).fold(0, |acc, q| {
                    matmul::mul_add_i64(acc, a[a_off[z] + i * bn + q], b[b_off[z] + q * bp + j])
                });
            }
        }
    }
    assert_eq!(dc.to_vec(), want, "gufunc_matmul_i64");
}

/// The tiled SGEMM entry points (shared memory, barriers, split-k atomics).
#[test]
fn sgemm_tiles() {
    let tiles = [
        matmul::SGEMM_128,
        matmul::SGEMM_64,
        matmul::SGEMM_128_V4,
        matmul::SGEMM_64_V4,
    ];
    // Odd shapes for the 4-byte tiles; for all four, k and n multiples of 4.
    for (m, k, n) in [(37, 29, 45), (37, 28, 44)] {
        let (a, b) = (values(m * k, 11), values(k * n, 12));
        let want = matmul_cpu(&a, &b, m, k, n);
        for tile in tiles
            .into_iter()
            .filter(|t| !t.vec || (k % 4 == 0 && n % 4 == 0))
        {
            for splits in [1, 2] {
                let (c, _) = matmul_sim(
                    tile.entry,
                    tile_shape(tile, m, n, splits),
                    &a,
                    &b,
                    (m, k, n),
                );
                assert_close(
                    &c,
                    &want,
                    k,
                    &format!("{} {m}×{k}×{n}, split {splits}", tile.entry),
                );
            }
        }
    }
}

/// Every built-in reduction (the 18 entry points of `reduce::built_in`).
#[test]
fn every_reduction() {
    fn ops<T: Sample>()
    where
        Sum: ReduceKernel<T>,
        Product: ReduceKernel<T>,
        Min: ReduceKernel<T>,
        Max: ReduceKernel<T>,
    {
        check_reduce::<Sum, T>();
        check_reduce::<Product, T>();
        check_reduce::<Min, T>();
        check_reduce::<Max, T>();
    }
    ops::<i32>();
    ops::<i64>();
    ops::<f32>();
    ops::<f64>();
    check_reduce::<Xor, i32>();
    check_reduce::<Xor, i64>();
}

#[test]
fn reductions() {
    let n = 10_007;
    let xs = ints(n, 16);
    check_int::<Sum>(&xs);
    check_int::<Min>(&xs);
    check_int::<Max>(&xs);
    check_int::<Xor>(&xs);
    check_int::<Sum>(&xs[1..]); // another length, another alignment

    // Random floats: the sum is rounded in the kernel's order.
    let fs = values(n, 17);
    for (grid, block) in [(1, 32), (6, 128)] {
        let got = reduce_sim::<Sum, f32>(&fs, 0.5, grid, block);
        let want: f64 = 0.5 + fs.iter().map(|&v| v as f64).sum::<f64>();
        assert!(
            (got as f64 - want).abs() < 1e-3,
            "reduce_sum_f32: {got} vs {want}"
        );
    }
}

#[test]
fn reduction_primitives() {
    // Warp shuffles and votes: 2 blocks of 64.
    let threads = 128usize;
    let (o32, o64) = (
        Buf::<u32>::zeroed(8 * threads),
        Buf::<u64>::zeroed(8 * threads),
    );
    // SAFETY: 8 · threads elements each, a 1-D launch of `threads` threads.
    unsafe {
        launch(
            reduce::primitive_tests::WARP_SHUFFLE_TEST,
            linear(2, 64),
            (o32.ptr(), o64.ptr(), threads),
        )
    }
    .unwrap();
    let (r32, r64) = (o32.to_vec(), o64.to_vec());
    for g in 0..threads {
        let lane = g % 32;
        let x = |g: usize| (g as u32).wrapping_mul(3).wrapping_add(1);
        let warp0 = g - lane;
        let down = if lane + 1 < 32 { x(g + 1) } else { x(g) };
        assert_eq!(r32[g], down, "shuffle_down at {g}");
        assert_eq!(r32[3 * threads + g], x(warp0 + 7), "shuffle_idx at {g}");
        assert_eq!(r32[4 * threads + g], lane as u32, "lane_id at {g}");
        let sum = (warp0..warp0 + 32).fold(0u32, |s, t| s.wrapping_add(x(t)));
        assert_eq!(r32[6 * threads + g], sum, "all_reduce at {g}");
        assert_eq!(r64[7 * threads + g], 1, "all(lane < 32) at {g}");
    }

    // Atomics.
    let n = 300usize;
    let tickets = Buf::<u32>::zeroed(n);
    let counters = Buf::from(&[0u32, 0, u32::MAX, u32::MAX, 0, 0]);
    let signed = Buf::from(&[i32::MIN, i32::MAX]);
    let (sf, sd, su) = (
        Buf::<f32>::zeroed(1),
        Buf::<f64>::zeroed(1),
        Buf::<u64>::zeroed(1),
    );
    // SAFETY: the buffers as atomic_test's contract lists them.
    unsafe {
        launch(
            reduce::primitive_tests::ATOMIC_TEST,
            linear(3, 128),
            (
                tickets.ptr(),
                counters.ptr(),
                signed.ptr(),
                sf.ptr(),
                sd.ptr(),
                su.ptr(),
                n,
            ),
        )
    }
    .unwrap();
    let mut t = tickets.to_vec();
    t.sort_unstable();
    assert_eq!(t, (0..n as u32).collect::<Vec<_>>(), "tickets");
    let c = counters.to_vec();
    assert_eq!(
        (c[0], c[1], c[2], c[5]),
        (n as u32, n as u32 - 1, 0, 1),
        "counters"
    );
    assert_eq!(
        signed.to_vec(),
        [n as i32 - 1 - (n / 2) as i32, -((n / 2) as i32)]
    );
    assert_eq!((sf.to_vec()[0], sd.to_vec()[0]), (n as f32, n as f64 * 0.5));
    assert_eq!(su.to_vec()[0], (n * (n - 1) / 2) as u64);

    // Wide and L2 loads.
    let input: Vec<u32> = (0..4 * 19u32).map(|v| v.wrapping_mul(2654435761)).collect();
    let din = Buf::from(&input);
    let (out, out_cg) = (
        Buf::<u32>::zeroed(input.len()),
        Buf::<u32>::zeroed(input.len()),
    );
    // SAFETY: 4 · 19 u32, 16-byte aligned (304 bytes ending at a page).
    unsafe {
        launch(
            reduce::primitive_tests::LOAD_TEST,
            linear(1, 32),
            (din.ptr().cast_const(), out.ptr(), out_cg.ptr(), 19usize),
        )
    }
    .unwrap();
    assert_eq!(out.to_vec(), input);
    assert_eq!(out_cg.to_vec(), input);

    // The block tree step.
    let (grid, block) = (3usize, 96usize);
    let xs: Vec<i64> = (0..grid * block).map(|v| (v as i64 - 100) << 33).collect();
    let (din, dout) = (Buf::from(&xs), Buf::<i64>::zeroed(grid));
    // SAFETY: grid · block inputs, grid outputs, 256 bytes of shared memory.
    unsafe {
        launch(
            reduce::primitive_tests::BLOCK_REDUCE_TEST_I64,
            shape([grid as u32, 1, 1], [block as u32, 1, 1], 256),
            (din.ptr().cast_const(), dout.ptr()),
        )
    }
    .unwrap();
    let want: Vec<i64> = xs.chunks(block).map(|c| c.iter().sum()).collect();
    assert_eq!(dout.to_vec(), want);
}

#[test]
fn mandelbrot_graph() {
    let size = 33usize;
    let lattice: Vec<f32> = (0..size)
        .map(|i| -2.0 + 4.0 * i as f32 / (size - 1) as f32)
        .collect();
    let (dl, dg) = (Buf::from(&lattice), Buf::<f32>::zeroed(size * size));
    let blocks = (size * size).div_ceil(32) as u32;
    // SAFETY: `size` lattice values, size² graph cells, size² fits in i32.
    unsafe {
        launch(
            mandelbrot::MANDELBROT_KER,
            linear(blocks, 32),
            (dl.ptr().cast_const(), dg.ptr(), 40, 4.0f32, size as i32),
        )
    }
    .unwrap();
    let size_nz = std::num::NonZeroU32::new(size as u32).unwrap();
    let want: Vec<f32> = (0..(size * size) as u32)
        .map(|tid| {
            let (i, j) = mandelbrot::lattice_indices(tid, size_nz);
            mandelbrot::mandelbrot_point(lattice[i as usize], lattice[j as usize], 40, 4.0)
        })
        .collect();
    assert_eq!(dg.to_vec(), want);
    assert!(want.contains(&0.0) && want.contains(&1.0));
    // mandelbrot_rows: bands of the same graph, bit for bit its rows.
    for (row0, rows) in [(0usize, 33usize), (0, 1), (7, 12), (32, 1)] {
        let band = Buf::<f32>::zeroed(rows * size);
        // SAFETY: `size` lattice values, rows·size band cells, row0 + rows <= size.
        unsafe {
            launch(
                mandelbrot::MANDELBROT_ROWS,
                linear((rows * size).div_ceil(64) as u32, 64),
                (
                    dl.ptr().cast_const(),
                    band.ptr(),
                    40,
                    4.0f32,
                    size as i32,
                    row0 as i32,
                    rows as i32,
                ),
            )
        }
        .unwrap();
        assert_eq!(
            band.to_vec(),
            want[row0 * size..(row0 + rows) * size],
            "rows {row0}+{rows}"
        );
    }
}

fn life_cpu(cells: &[i32], n: usize) -> Vec<i32> {
    (0..n * n)
        .map(|i| life::life_cell(n, i % n, i / n, |j| cells[j]))
        .collect()
}

#[test]
fn life_steps() {
    for n in [37usize, 40] {
        let cells: Vec<i32> = values(n * n, n as u64)
            .iter()
            .map(|&v| (v > 0.3) as i32)
            .collect();
        let want = life_cpu(&cells, n);
        let din = Buf::from(&cells);

        let dout = Buf::<i32>::zeroed(n * n);
        let b = life::LIFE_BLOCK;
        let g = n.div_ceil(b as usize) as u32;
        // SAFETY: two n×n lattices, apart.
        unsafe {
            launch(
                life::CONWAY_KER,
                shape([g, g, 1], [b, b, 1], 0),
                (din.ptr().cast_const(), dout.ptr(), n),
            )
        }
        .unwrap();
        assert_eq!(dout.to_vec(), want, "conway_ker n = {n}");

        let dout = Buf::<i32>::zeroed(n * n);
        let (rows, by) = (3usize, 4u32);
        let gx = n.div_ceil(life::FAST_CELLS_X * 32) as u32;
        let gy = n.div_ceil(rows * by as usize) as u32;
        // SAFETY: as above; rows ≥ 1.
        unsafe {
            launch(
                life::CONWAY_FAST,
                shape([gx, gy, 1], [32, by, 1], 0),
                (din.ptr().cast_const(), dout.ptr(), n, rows),
            )
        }
        .unwrap();
        assert_eq!(dout.to_vec(), want, "conway_fast n = {n}");

        // Row ranges (the multi-GPU Life's strips): the rows of the range
        // are the step's, every other row keeps its sentinel.
        for (row0, row_end) in [(0, 13), (5, n - 3), (n - 7, n), (9, 9)] {
            let dout = Buf::from(&vec![7i32; n * n]);
            let gy = (row_end - row0).div_ceil(rows * by as usize).max(1) as u32;
            // SAFETY: as above; row0 <= row_end <= n.
            unsafe {
                launch(
                    life::CONWAY_FAST_ROWS,
                    shape([gx, gy, 1], [32, by, 1], 0),
                    (din.ptr().cast_const(), dout.ptr(), n, rows, row0, row_end),
                )
            }
            .unwrap();
            let want_rows: Vec<i32> = (0..n * n)
                .map(|i| {
                    if (row0..row_end).contains(&(i / n)) {
                        want[i]
                    } else {
                        7
                    }
                })
                .collect();
            assert_eq!(
                dout.to_vec(),
                want_rows,
                "conway_fast_rows n = {n}, rows {row0}..{row_end}"
            );
        }
    }
}

#[test]
fn small_kernels() {
    // mult_ker.
    let x = values(203, 18);
    let dx = Buf::from(&x);
    // SAFETY: 203 f32.
    unsafe { launch(streams::MULT_KER, linear(1, 64), (dx.ptr(), x.len())) }.unwrap();
    let want: Vec<f32> = x.iter().map(|&v| streams::mult_ker_element(v)).collect();
    assert_eq!(dx.to_vec(), want, "mult_ker");

    // Device math, one unary and one binary function per type.
    let xs = values(97, 20);
    let ys = values(97, 21);
    let (dx, dy, dout) = (Buf::from(&xs), Buf::from(&ys), Buf::<f32>::zeroed(97));
    for f in [math_checks::MathFn::Sin, math_checks::MathFn::Atan2] {
        // SAFETY: 97 f32 each.
        unsafe {
            launch(
                math_checks::MATH_F32_TEST,
                linear(1, math_checks::MATH_CHECK_BLOCK),
                (
                    dx.ptr().cast_const(),
                    dy.ptr().cast_const(),
                    dout.ptr(),
                    97usize,
                    f as u32,
                ),
            )
        }
        .unwrap();
        let got = dout.to_vec();
        for i in 0..97 {
            let want = match f {
                math_checks::MathFn::Sin => (xs[i] as f64).sin(),
                _ => (xs[i] as f64).atan2(ys[i] as f64),
            };
            assert!(
                (got[i] as f64 - want).abs() < 1e-6,
                "{f:?}({}) = {}",
                xs[i],
                got[i]
            );
        }
    }
    let xs: Vec<f64> = (0..31).map(|i| i as f64 * 0.37).collect();
    let (dx, dout) = (Buf::from(&xs), Buf::<f64>::zeroed(31));
    // SAFETY: 31 f64 each (y unused by sqrt, any valid pointer of 31).
    unsafe {
        launch(
            math_checks::MATH_F64_TEST,
            linear(1, math_checks::MATH_CHECK_BLOCK),
            (
                dx.ptr().cast_const(),
                dx.ptr().cast_const(),
                dout.ptr(),
                31usize,
                math_checks::MathFn::Sqrt as u32,
            ),
        )
    }
    .unwrap();
    assert_eq!(
        dout.to_vec(),
        xs.iter().map(|v| v.sqrt()).collect::<Vec<_>>()
    );
}

/// Static shared memory and barriers.
#[test]
fn shared_memory_and_barriers() {
    let n = 2 * device_checks::REVERSE_BLOCK + 77;
    let xs = ints(n, 19);
    let (din, dout) = (Buf::from(&xs), Buf::<i32>::zeroed(n));
    let blocks = n.div_ceil(device_checks::REVERSE_BLOCK) as u32;
    // SAFETY: n i32 each; blocks of REVERSE_BLOCK.
    unsafe {
        launch(
            device_checks::BLOCK_REVERSE_I32,
            linear(blocks, device_checks::REVERSE_BLOCK as u32),
            (din.ptr().cast_const(), dout.ptr(), n),
        )
    }
    .unwrap();
    let want: Vec<i32> = xs
        .chunks(device_checks::REVERSE_BLOCK)
        .flat_map(|c| c.iter().rev().copied())
        .collect();
    assert_eq!(dout.to_vec(), want, "block_reverse_i32");
}

#[test]
fn printf_and_faults() {
    // SAFETY: no parameters.
    unsafe { launch(hello::HELLO_KERNEL, linear(1, 3), ()) }.unwrap();
    // SAFETY: no parameters.
    unsafe { launch(hello::HELLO_INDEXED, linear(2, 2), ()) }.unwrap();

    // SAFETY: plain values.
    let err = unsafe { launch(hello::FAULT_TEST_KERNEL, linear(3, 32), (1u32, 5u32)) }.unwrap_err();
    match &err {
        SimError::Fault { at, message, .. } => {
            assert_eq!((at.block[0], at.thread[0]), (1, 5), "{err}");
            assert!(message.contains("on purpose"), "{err}");
        }
        other => panic!("expected a fault, got {other}"),
    }
    // The simulator stays usable.
    // SAFETY: plain values, and no thread matches.
    unsafe { launch(hello::FAULT_TEST_KERNEL, linear(3, 32), (9u32, 0u32)) }.unwrap();
}

/// The reference launch: multiply of 2^20 f32, timed (printed;
/// `--nocapture` shows it).
#[test]
fn multiply_timing() {
    let n = 1 << 20;
    let (a, b) = (values(n, 22), values(n, 23));
    // The host's launch: 256 threads, each one pass of 4 vectors.
    let grid = (n / 4).div_ceil(256 * 4) as u32;
    let (c, seconds) = binary_map(multiply::MULTIPLY, linear(grid, 256), &a, &b);
    assert!(c == zip_map(&a, &b, multiply::multiply_element));
    eprintln!("simulator: multiply of 2^20 f32 in {seconds:.3} s");
}

/// The reference launch: the tiled SGEMM at 256³, timed (printed;
/// `--nocapture` shows it).
#[test]
fn sgemm_timing() {
    let s = 256;
    let (a, b) = (values(s * s, 24), values(s * s, 25));
    let tile = matmul::SGEMM_128;
    let (c, seconds) = matmul_sim(tile.entry, tile_shape(tile, s, s, 1), &a, &b, (s, s, s));
    assert_close(&c, &matmul_cpu(&a, &b, s, s, s), s, "matrix_mul_tiled 256³");
    eprintln!("simulator: matrix_mul_tiled at 256³ in {seconds:.3} s");
}

/// The conjugate-gradient kernels (`cg`), one launch each on a 7 × 7 grid,
/// against their formulas: the 5-point Laplacian (zero boundary), the two
/// passes of a dot product (over 3 blocks), and the two updates with α and
/// β read on the device.
#[test]
fn cg_kernels() {
    use cuda_kernels_gpu::cg;
    let m = 7usize;
    let n = m * m;
    let (p, r) = (values(n, 31), values(n, 32));
    let (dp, dr) = (Buf::from(&p), Buf::from(&r));
    let dap = Buf::<f32>::zeroed(n);
    // SAFETY: p and ap hold m² f32, apart.
    unsafe {
        launch(
            cg::CG_LAPLACIAN,
            linear(2, 32),
            (dp.ptr().cast_const(), dap.ptr(), m),
        )
    }
    .unwrap();
    let at = |i: isize, j: isize| {
        if (0..m as isize).contains(&i) && (0..m as isize).contains(&j) {
            p[i as usize * m + j as usize]
        } else {
            0.0
        }
    };
    let want: Vec<f32> = (0..n as isize)
        .map(|k| {
            let (i, j) = (k / m as isize, k % m as isize);
            4.0 * at(i, j) - at(i - 1, j) - at(i + 1, j) - at(i, j - 1) - at(i, j + 1)
        })
        .collect();
    let ap = dap.to_vec();
    for (k, (&g, &w)) in ap.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "cg_laplacian [{k}]: {g} vs {w}"
        );
    }
    // r·r in two passes: 3 partial sums, then one block.
    let blocks = 3;
    let partial = Buf::<f32>::zeroed(blocks);
    let rr = Buf::<f32>::zeroed(1);
    let block = cg::CG_BLOCK as u32;
    // SAFETY: r holds n f32, partial one per block, CG_BLOCK threads.
    unsafe {
        launch(
            cg::CG_DOT_PARTIAL,
            linear(blocks as u32, block),
            (
                dr.ptr().cast_const(),
                dr.ptr().cast_const(),
                partial.ptr(),
                n,
            ),
        )
    }
    .unwrap();
    // SAFETY: partial holds `blocks` f32, rr one; one block of CG_BLOCK.
    unsafe {
        launch(
            cg::CG_DOT_FINAL,
            linear(1, block),
            (partial.ptr().cast_const(), rr.ptr(), blocks),
        )
    }
    .unwrap();
    let rr_want: f64 = r.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
    let rr_got = rr.to_vec()[0];
    assert!(
        (f64::from(rr_got) - rr_want).abs() <= 1e-5 * rr_want,
        "r·r: {rr_got} vs {rr_want}"
    );
    // x += α p, r −= α ap with α = rr / pap (here pap = 2 · rr: α = 0.5).
    let pap = Buf::from(&[2.0 * rr_got]);
    let dx = Buf::<f32>::zeroed(n);
    // SAFETY: x, r, p, ap hold n f32, rr and pap one; x and r apart from all.
    unsafe {
        launch(
            cg::CG_UPDATE_XR,
            linear(2, 32),
            (
                dx.ptr(),
                dr.ptr(),
                dp.ptr().cast_const(),
                dap.ptr().cast_const(),
                rr.ptr().cast_const(),
                pap.ptr().cast_const(),
                n,
            ),
        )
    }
    .unwrap();
    let (x, r1) = (dx.to_vec(), dr.to_vec());
    for k in 0..n {
        assert_eq!(x[k], 0.5 * p[k], "cg_update_xr x[{k}]");
        assert_eq!(r1[k], r[k] - 0.5 * ap[k], "cg_update_xr r[{k}]");
    }
    // p = r + β p with β = rr_new / rr_old (here 0.25).
    let (new, old) = (Buf::from(&[1.0f32]), Buf::from(&[4.0f32]));
    // SAFETY: p and r hold n f32, the scalars one each; p apart from all.
    unsafe {
        launch(
            cg::CG_UPDATE_P,
            linear(2, 32),
            (
                dp.ptr(),
                dr.ptr().cast_const(),
                new.ptr().cast_const(),
                old.ptr().cast_const(),
                n,
            ),
        )
    }
    .unwrap();
    let p1 = dp.to_vec();
    for k in 0..n {
        assert_eq!(p1[k], r1[k] + 0.25 * p[k], "cg_update_p [{k}]");
    }
}

/// This tier launches every entry point of the crate's list: each test of
/// the tier runs (again) here, in this order, and every name of `KERNELS`
/// must then have been launched at least once, but for the families of
/// [`LAUNCHED_ELSEWHERE`]. A kernel added to `KERNELS` fails here until a
/// test of the tier launches it.
#[test]
fn the_tier_launches_every_kernel() {
    let tier: [(&str, fn()); 16] = [
        ("multiply_and_vector_sum", multiply_and_vector_sum),
        ("elementwise_kernels", elementwise_kernels),
        ("matrix_kernels", matrix_kernels),
        ("sgemm_tiles", sgemm_tiles),
        ("every_reduction", every_reduction),
        ("reductions", reductions),
        ("reduction_primitives", reduction_primitives),
        ("mandelbrot_graph", mandelbrot_graph),
        ("life_steps", life_steps),
        ("small_kernels", small_kernels),
        ("shared_memory_and_barriers", shared_memory_and_barriers),
        ("printf_and_faults", printf_and_faults),
        ("multiply_timing", multiply_timing),
        ("sgemm_timing", sgemm_timing),
        (
            "gemm_staging_and_split_reduce",
            gemm_staging_and_split_reduce,
        ),
        ("cg_kernels", cg_kernels),
    ];
    for (name, test) in tier {
        eprintln!("sim_smoke: {name}");
        test();
    }
    let launched = LAUNCHED.lock().unwrap_or_else(|e| e.into_inner());
    let elsewhere: Vec<&str> = LAUNCHED_ELSEWHERE
        .iter()
        .flat_map(|(kernels, _)| kernels.iter().copied())
        .collect();
    let never: Vec<&str> = cuda_kernels_gpu::KERNELS
        .iter()
        .copied()
        .filter(|k| !launched.contains(k) && !elsewhere.contains(k) && !sixteen_bit_family(k))
        .collect();
    assert!(
        never.is_empty(),
        "never launched by the tier: {never:?} (launch them in a test of this file)"
    );
}
