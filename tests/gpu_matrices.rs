//! GPU tests of the matrices family: K3 `doubles_matrix`, K4/K5 matrix
//! products, K7 elementwise kernels, K8 `vector_sum_repeat`, K9
//! `gufunc_matmul_i64`, and bad input (typed errors, no launch). Plus
//! CPU-only checks of the embedded PTX (the repeat loop survived).
mod common;

use std::process::ExitCode;

use common::{AWKWARD_LENGTHS, cpu_test, ensure, expect_invalid, fail, gpu_test, run};
use cuda_kernels::Gpu;
use cuda_kernels::matrices::kernels::{lerp, saxpy, sum};
use cuda_kernels::matrices::{
    Elementwise, MatmulKernel, MatmulLaunch, PLAN_SMS, SPLIT_K_MIN, allclose, check_matmul,
    doubles_matrix_cpu, elementwise_cpu, gufunc_matmul_i64_cpu, matmul_cpu, matmul_launch_for,
    vector_sum_repeat_cpu,
};
use cuda_kernels::ndarray::{Array, Array1, Array2, ArrayD, Axis, IxDyn, s};
use cuda_kernels::util::Rng;
use libtest_mimic::Failed;

fn main() -> ExitCode {
    run(vec![
        gpu_test("doubles_matrix_any_shape", doubles_matrix_any_shape),
        gpu_test("doubles_matrix_views", doubles_matrix_views),
        gpu_test("matmul_small_matches_dot", matmul_small_matches_dot),
        gpu_test("matmul_edges_and_large", matmul_edges_and_large),
        gpu_test("matmul_views", matmul_views),
        gpu_test("matmul_tile_selection", matmul_tile_selection),
        gpu_test("matmul_split_k", matmul_split_k),
        gpu_test("matmul_refuses_bad_input", matmul_refuses_bad_input),
        gpu_test("elementwise_sum_all_types", elementwise_sum_all_types),
        gpu_test("elementwise_saxpy_and_lerp", elementwise_saxpy_and_lerp),
        gpu_test(
            "elementwise_refuses_bad_input",
            elementwise_refuses_bad_input,
        ),
        gpu_test(
            "vector_sum_repeat_matches_cpu",
            vector_sum_repeat_matches_cpu,
        ),
        gpu_test("gufunc_matmul_matches_cpu", gufunc_matmul_matches_cpu),
        gpu_test("gufunc_refuses_bad_input", gufunc_refuses_bad_input),
        cpu_test("ptx_keeps_the_repeat_loop", ptx_keeps_the_repeat_loop),
        cpu_test(
            "ptx_tiled_uses_shared_vector_loads",
            ptx_tiled_uses_shared_vector_loads,
        ),
        cpu_test(
            "ptx_tiled_v4_uses_global_vector_loads",
            ptx_tiled_v4_uses_global_vector_loads,
        ),
    ])
}

fn randn2(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    let mut rng = Rng::new(seed);
    Array2::from_shape_simple_fn((rows, cols), || rng.normal() as f32)
}

fn doubles_matrix_any_shape(gpu: &Gpu) -> Result<(), Failed> {
    for &(r, c) in &[
        (1, 1),
        (5, 5),
        (16, 16),
        (17, 33),
        (1, 1000),
        (1000, 1),
        (1023, 1025),
        (4096, 4096),
    ] {
        let a = randn2(r, c, (r * 7 + c) as u64);
        let expected = doubles_matrix_cpu(a.view());
        let got = gpu.doubles_matrix(a.view()).map_err(fail)?;
        ensure(got == expected, || format!("{r}×{c}: copy differs"))?;
        let mut inplace = a.clone();
        gpu.doubles_matrix_in_place(inplace.view_mut())
            .map_err(fail)?;
        ensure(inplace == expected, || format!("{r}×{c}: in place differs"))?;
    }
    Ok(())
}

fn doubles_matrix_views(gpu: &Gpu) -> Result<(), Failed> {
    // Transposed, stepped and negatively strided views: copied to standard
    // layout, doubled, written back through the view.
    let base = randn2(40, 30, 3);
    let mut a = base.clone();
    gpu.doubles_matrix_in_place(a.view_mut().reversed_axes())
        .map_err(fail)?;
    ensure(a == doubles_matrix_cpu(base.view()), || "transposed".into())?;
    let mut b = base.clone();
    gpu.doubles_matrix_in_place(b.slice_mut(s![..;2, ..;-3]))
        .map_err(fail)?;
    let mut expected = base.clone();
    expected
        .slice_mut(s![..;2, ..;-3])
        .mapv_inplace(|x| x * 2.0);
    ensure(b == expected, || "stepped view".into())?;
    expect_invalid(
        "empty",
        gpu.doubles_matrix(Array2::<f32>::zeros((0, 3)).view()),
    )?;
    // 2,000,000 rows need 250,000 blocks of 8 rows along y (limit 65,535): refused
    // before anything is copied (a broadcast view of one element).
    let one = Array2::<f32>::zeros((1, 1));
    let tall = one.broadcast((2_000_000, 1)).ok_or("broadcast")?;
    expect_invalid("grid too tall", gpu.doubles_matrix(tall))
}

fn matmul_small_matches_dot(gpu: &Gpu) -> Result<(), Failed> {
    // The seed's 5×5 and other small shapes: numpy.allclose against ndarray's
    // dot. Inputs are small integers, so both products are exact and the
    // seed's tolerance applies as is.
    let mut rng = Rng::new(11);
    for &(m, k, n) in &[
        (1, 1, 1),
        (5, 5, 5),
        (3, 7, 2),
        (16, 16, 16),
        (33, 17, 65),
        (128, 8, 128),
    ] {
        let a = Array2::from_shape_simple_fn((m, k), || rng.below(10) as f32 - 5.0);
        let b = Array2::from_shape_simple_fn((k, n), || rng.below(10) as f32 - 5.0);
        let expected = matmul_cpu(a.view(), b.view()).map_err(fail)?;
        for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
            let (c, _) = gpu.matmul_timed(kernel, a.view(), b.view()).map_err(fail)?;
            ensure(allclose(c.view(), expected.view()).is_none(), || {
                format!(
                    "{kernel:?} {m}×{k}·{k}×{n}: not allclose at {:?}",
                    allclose(c.view(), expected.view())
                )
            })?;
        }
    }
    Ok(())
}

fn matmul_edges_and_large(gpu: &Gpu) -> Result<(), Failed> {
    // randn inputs, every edge case of the 128×128×8 tiling, and large k:
    // compared with the f64 product, tolerance = allclose + the f32 rounding
    // bound k·2⁻²⁴·(|A||B|)ᵢⱼ (see check_matmul for why).
    for &(m, k, n) in &[
        (5, 5, 5),
        (127, 9, 129),
        (129, 257, 130),
        (1, 1000, 1),
        (300, 1, 200),
        (255, 31, 513),
        (1000, 1000, 1000),
        (1024, 1024, 1024),
        (517, 4096, 260),
    ] {
        let a = randn2(m, k, (m * 31 + k) as u64);
        let b = randn2(k, n, (k * 17 + n) as u64);
        for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
            let (c, _) = gpu.matmul_timed(kernel, a.view(), b.view()).map_err(fail)?;
            let chk = check_matmul(c.view(), a.view(), b.view()).map_err(fail)?;
            ensure(chk.passed(), || {
                format!("{kernel:?} {m}×{k}·{k}×{n}: {chk:?}")
            })?;
        }
    }
    Ok(())
}

fn matmul_views(gpu: &Gpu) -> Result<(), Failed> {
    let a = randn2(70, 50, 1);
    let b = randn2(90, 70, 2);
    // Aᵀ (50×70) · Bᵀ (70×90), both non-contiguous views.
    let c = gpu.matrix_mul_tiled(a.t(), b.t()).map_err(fail)?;
    let chk = check_matmul(c.view(), a.t(), b.t()).map_err(fail)?;
    ensure(chk.passed(), || format!("transposed views: {chk:?}"))?;
    let c = gpu
        .matrix_mul_naive(a.slice(s![..;-2, ..]), b.slice(s![..50, ..;3]))
        .map_err(fail)?;
    let chk =
        check_matmul(c.view(), a.slice(s![..;-2, ..]), b.slice(s![..50, ..;3])).map_err(fail)?;
    ensure(chk.passed(), || format!("stepped views: {chk:?}"))
}

/// `C = A · B` with the tiled kernel through `matmul_on_device`, every
/// buffer starting `offset` elements into its allocation (1: not 16-byte
/// aligned, so the 4-byte entries run), C filled with NaN first (so an
/// element the kernel skips shows). Returns C and the launch plan used.
fn tiled_at_offset(
    gpu: &Gpu,
    a: &Array2<f32>,
    b: &Array2<f32>,
    offset: usize,
) -> Result<(Array2<f32>, MatmulLaunch), Failed> {
    use cuda_kernels::cust::memory::{CopyDestination, DeviceBuffer};
    let ((m, k), n) = (a.dim(), b.ncols());
    let padded = |x: &Array2<f32>| {
        let mut v = vec![0.0f32; offset];
        v.extend(x.iter());
        v
    };
    let da = DeviceBuffer::from_slice(&padded(a)).map_err(fail)?;
    let db = DeviceBuffer::from_slice(&padded(b)).map_err(fail)?;
    let dc = DeviceBuffer::from_slice(&vec![f32::NAN; offset + m * n]).map_err(fail)?;
    let (sa, sb, mut sc) = (da.index(offset..), db.index(offset..), dc.index(offset..));
    let aligned = [sa.as_device_ptr().as_raw(), sb.as_device_ptr().as_raw()]
        .iter()
        .all(|p| p.is_multiple_of(16));
    let sms = gpu.multiprocessors("test").map_err(fail)?;
    let plan =
        matmul_launch_for(MatmulKernel::Tiled, (m, k), (k, n), sms, aligned).map_err(fail)?;
    gpu.matmul_on_device(MatmulKernel::Tiled, &sa, &sb, &mut sc, m, k, n)
        .map_err(fail)?;
    gpu.synchronize("matrix_mul_tiled").map_err(fail)?;
    let mut out = vec![0.0f32; m * n];
    sc.copy_to(&mut out[..]).map_err(fail)?;
    let c = Array2::from_shape_vec((m, n), out).map_err(fail)?;
    Ok((c, plan))
}

fn matmul_tile_selection(gpu: &Gpu) -> Result<(), Failed> {
    // Shapes at the edges of every tiled entry's tiles and loads, aligned and
    // misaligned: 64² tiles (few tiles of 128²) and 128² tiles (16 × 16 of
    // them, which 132 SMs take as 128²: see sgemm_choice); k-tile tails of
    // 4, 8 and 12 floats (16-byte loads run whole float4s), n not a
    // multiple of the tile, m odd; and the odd shapes.
    let mut seen = std::collections::BTreeSet::new();
    for &(m, k, n) in &[
        (1, 4, 4),
        (63, 12, 68),
        (65, 20, 132),
        (127, 333, 65),
        (129, 36, 60),
        (130, 1004, 260),
        (1, 1, 1),
        (2048, 36, 2044),
        (1921, 20, 1924),
        (2047, 13, 2045),
    ] {
        let a = randn2(m, k, (m * 13 + k) as u64);
        let b = randn2(k, n, (k * 7 + n) as u64);
        for offset in [0, 1] {
            let (c, plan) = tiled_at_offset(gpu, &a, &b, offset)?;
            let vec = plan.entry.ends_with("_v4");
            ensure(!(vec && (offset != 0 || k % 4 != 0 || n % 4 != 0)), || {
                format!(
                    "{m}×{k}·{k}×{n} offset {offset}: {} needs alignment",
                    plan.entry
                )
            })?;
            seen.insert(plan.entry);
            let chk = check_matmul(c.view(), a.view(), b.view()).map_err(fail)?;
            ensure(chk.passed(), || {
                format!("{} {m}×{k}·{k}×{n} offset {offset}: {chk:?}", plan.entry)
            })?;
        }
    }
    // On an H100 (the SM count the shapes were picked for) every entry ran.
    let sms = gpu.multiprocessors("test").map_err(fail)?;
    ensure(sms != PLAN_SMS || seen.len() == 4, || {
        format!("only {seen:?} ran")
    })
}

fn matmul_split_k(gpu: &Gpu) -> Result<(), Failed> {
    // Few output tiles and a long k: two k-splits added onto a zeroed C.
    // The split falls inside a k-tile tail (k % 8 != 0), on a tile boundary,
    // and on misaligned (4-byte) operands; the result is the same bits on
    // every run.
    let sms = gpu.multiprocessors("test").map_err(fail)?;
    for &(m, k, n) in &[
        (65, 4097, 3),
        (1, 4096, 1),
        (100, 1001, 100),
        (33, 520, 17),
        (256, 2048, 260),
        (64, SPLIT_K_MIN, 64),
    ] {
        let a = randn2(m, k, (m * 5 + k) as u64);
        let b = randn2(k, n, (k * 3 + n) as u64);
        for offset in [0, 1] {
            let (c, plan) = tiled_at_offset(gpu, &a, &b, offset)?;
            ensure(sms < 2 * 20 || plan.splits == 2, || {
                format!("{m}×{k}·{k}×{n}: {} splits", plan.splits)
            })?;
            let chk = check_matmul(c.view(), a.view(), b.view()).map_err(fail)?;
            ensure(chk.passed(), || {
                format!(
                    "{} split {m}×{k}·{k}×{n} offset {offset}: {chk:?}",
                    plan.entry
                )
            })?;
            let (again, _) = tiled_at_offset(gpu, &a, &b, offset)?;
            let same = c
                .iter()
                .zip(&again)
                .all(|(x, y)| x.to_bits() == y.to_bits());
            ensure(same, || {
                format!("{m}×{k}·{k}×{n}: split-k result differs between runs")
            })?;
        }
    }
    Ok(())
}

fn matmul_refuses_bad_input(gpu: &Gpu) -> Result<(), Failed> {
    let a = Array2::<f32>::zeros((3, 4));
    let b = Array2::<f32>::zeros((5, 6));
    let e = Array2::<f32>::zeros((0, 4));
    let one = Array2::<f32>::zeros((1, 1));
    let huge = one.broadcast((1 << 40, 1)).ok_or("broadcast")?;
    let wide = one.broadcast((1, 1 << 40)).ok_or("broadcast")?;
    let tall = one.broadcast((65_536 * 128, 1)).ok_or("broadcast")?;
    for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
        expect_invalid(
            "inner mismatch",
            gpu.matmul_timed(kernel, a.view(), b.view()),
        )?;
        expect_invalid("empty", gpu.matmul_timed(kernel, e.view(), a.t()))?;
        // (2^40 × 1)·(1 × 2^40): C would have 2^80 elements.
        expect_invalid("overflow", gpu.matmul_timed(kernel, huge, wide))?;
        // Too many blocks along y for either kernel.
        expect_invalid("grid", gpu.matmul_timed(kernel, tall, one.view()))?;
    }
    Ok(())
}

fn elementwise_sum_all_types(gpu: &Gpu) -> Result<(), Failed> {
    for &n in AWKWARD_LENGTHS {
        let mut rng = Rng::new(n as u64);
        let a: Array1<i32> = (0..n).map(|_| rng.below(100) as i32).collect();
        let b: Array1<i32> = (0..n).map(|_| rng.below(100) as i32).collect();
        let mut c = Array1::<i32>::zeros(n);
        gpu.elementwise_sum(a.view(), b.view(), c.view_mut())
            .map_err(fail)?;
        ensure(c == &a + &b, || format!("i32 n = {n}"))?;

        let a64 = a.mapv(|x| x as i64 * 1_000_000_007);
        let b64 = b.mapv(|x| x as i64 - 50);
        let mut c64 = Array1::<i64>::zeros(n);
        gpu.elementwise_sum(a64.view(), b64.view(), c64.view_mut())
            .map_err(fail)?;
        ensure(c64 == &a64 + &b64, || format!("i64 n = {n}"))?;

        let af: Array1<f32> = (0..n).map(|_| rng.normal() as f32).collect();
        let bf: Array1<f32> = (0..n).map(|_| rng.normal() as f32).collect();
        let mut cf = Array1::<f32>::zeros(n);
        gpu.elementwise_sum(af.view(), bf.view(), cf.view_mut())
            .map_err(fail)?;
        ensure(cf == &af + &bf, || format!("f32 n = {n}"))?;

        let ad = af.mapv(f64::from);
        let bd = bf.mapv(|x| f64::from(x) / 3.0);
        let mut cd = Array1::<f64>::zeros(n);
        gpu.elementwise::<sum, f64>(&[ad.view(), bd.view()], &mut [cd.view_mut()], &[])
            .map_err(fail)?;
        ensure(cd == &ad + &bd, || format!("f64 n = {n}"))?;
    }
    Ok(())
}

fn elementwise_saxpy_and_lerp(gpu: &Gpu) -> Result<(), Failed> {
    for &n in AWKWARD_LENGTHS {
        let mut rng = Rng::new(n as u64 + 1);
        let x: Array1<f32> = (0..n).map(|_| rng.normal() as f32).collect();
        let y0: Array1<f32> = (0..n).map(|_| rng.normal() as f32).collect();
        let mut y = y0.clone();
        gpu.elementwise_saxpy(x.view(), y.view_mut(), 2.5f32)
            .map_err(fail)?;
        let mut expected = y0.clone();
        elementwise_cpu::<saxpy, f32>(&[x.view()], &mut [expected.view_mut()], &[2.5])
            .map_err(fail)?;
        ensure(y == expected, || {
            format!("saxpy n = {n}: GPU and CPU differ")
        })?;

        let t: Array1<f64> = (0..n).map(|_| rng.uniform()).collect();
        let (a, b) = (x.mapv(f64::from), y0.mapv(f64::from));
        let mut out = Array1::<f64>::zeros(n);
        gpu.elementwise_lerp(a.view(), b.view(), t.view(), out.view_mut())
            .map_err(fail)?;
        let mut expected = Array1::<f64>::zeros(n);
        elementwise_cpu::<lerp, f64>(
            &[a.view(), b.view(), t.view()],
            &mut [expected.view_mut()],
            &[],
        )
        .map_err(fail)?;
        ensure(out == expected, || format!("lerp n = {n}"))?;
    }
    // Strided inout: written back through the view.
    let x = Array1::from_iter((0..100).map(|i| i as f32));
    let mut y = Array1::<f32>::ones(200);
    gpu.elementwise_saxpy(x.view(), y.slice_mut(s![..;2]), 2.0)
        .map_err(fail)?;
    ensure(y[2] == 3.0 && y[3] == 1.0 && y[198] == 199.0, || {
        "strided inout".into()
    })
}

fn elementwise_refuses_bad_input(gpu: &Gpu) -> Result<(), Failed> {
    let a = Array1::<f32>::zeros(10);
    let b = Array1::<f32>::zeros(11);
    let mut c = Array1::<f32>::zeros(10);
    expect_invalid(
        "lengths",
        gpu.elementwise_sum(a.view(), b.view(), c.view_mut()),
    )?;
    expect_invalid(
        "arity",
        gpu.elementwise::<sum, f32>(&[a.view()], &mut [c.view_mut()], &[]),
    )?;
    expect_invalid(
        "scalars",
        gpu.elementwise::<saxpy, f32>(&[a.view()], &mut [c.view_mut()], &[]),
    )?;
    let e = Array1::<f32>::zeros(0);
    let mut ec = Array1::<f32>::zeros(0);
    expect_invalid(
        "empty",
        gpu.elementwise_sum(e.view(), e.view(), ec.view_mut()),
    )?;
    ensure(
        <sum as Elementwise<f32>>::ENTRY == "elementwise_sum_f32",
        || "name".into(),
    )
}

fn vector_sum_repeat_matches_cpu(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(8);
    let n = 10_000;
    let a: Array1<f32> = (0..n).map(|_| rng.uniform() as f32).collect();
    let b: Array1<f32> = (0..n).map(|_| rng.uniform() as f32).collect();
    let (c, t) = gpu
        .vector_sum_repeat(a.view(), b.view(), 10_000)
        .map_err(fail)?;
    let expected = vector_sum_repeat_cpu(a.view(), b.view(), 10_000).map_err(fail)?;
    let norm = (&c - &expected).mapv(|d| (d as f64).powi(2)).sum().sqrt();
    ensure(norm < 1e-5, || format!("‖cpu − gpu‖ = {norm}"))?;
    ensure(
        t.kernel_ms > 0.0 && t.with_transfers_ms >= t.kernel_ms,
        || format!("timing {t:?}"),
    )?;
    for &n in &[1usize, 257, 65_537] {
        let a = Array1::from_elem(n, 1.5f32);
        let (c, _) = gpu.vector_sum_repeat(a.view(), a.view(), 3).map_err(fail)?;
        ensure(c.iter().all(|&x| x == 3.0), || format!("n = {n}"))?;
    }
    expect_invalid(
        "lengths",
        gpu.vector_sum_repeat(a.view(), a.slice(s![..5]), 1),
    )
}

fn randint(shape: &[usize], rng: &mut Rng) -> ArrayD<i64> {
    ArrayD::from_shape_simple_fn(IxDyn(shape), || rng.below(10) as i64)
}

fn gufunc_matmul_matches_cpu(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(9);
    // The seed's 10×10, batches, broadcasting on either side, and a size
    // that is not a multiple of the block.
    for (sa, sb) in [
        (vec![10, 10], vec![10, 10]),
        (vec![1, 1], vec![1, 1]),
        (vec![4, 10, 10], vec![10, 10]),
        (vec![3, 1, 5, 7], vec![4, 7, 2]),
        (vec![2, 3, 33, 17], vec![2, 3, 17, 65]),
        (vec![1000, 3, 3], vec![1, 3, 3]),
    ] {
        let a = randint(&sa, &mut rng);
        let b = randint(&sb, &mut rng);
        let c = gpu.gufunc_matmul_i64(a.view(), b.view()).map_err(fail)?;
        let expected = gufunc_matmul_i64_cpu(a.view(), b.view()).map_err(fail)?;
        ensure(c == expected, || format!("{sa:?}·{sb:?}"))?;
    }
    // Independent of the shared plan: each batch of a plain batch equals
    // ndarray's dot.
    let a = randint(&[5, 6, 7], &mut rng);
    let b = randint(&[5, 7, 8], &mut rng);
    let c = gpu.gufunc_matmul_i64(a.view(), b.view()).map_err(fail)?;
    for z in 0..5 {
        let az = a
            .index_axis(Axis(0), z)
            .into_dimensionality::<cuda_kernels::ndarray::Ix2>()?;
        let bz = b
            .index_axis(Axis(0), z)
            .into_dimensionality::<cuda_kernels::ndarray::Ix2>()?;
        ensure(c.index_axis(Axis(0), z) == az.dot(&bz).into_dyn(), || {
            format!("batch {z}")
        })?;
    }
    // Non-contiguous (transposed core axes): copied to standard layout.
    let t = randint(&[3, 8, 6], &mut rng);
    let tv = t.view().permuted_axes(IxDyn(&[0, 2, 1]));
    let b2 = randint(&[3, 8, 4], &mut rng);
    let c = gpu.gufunc_matmul_i64(tv.clone(), b2.view()).map_err(fail)?;
    ensure(
        c == gufunc_matmul_i64_cpu(tv, b2.view()).map_err(fail)?,
        || "transposed".into(),
    )?;
    // Wrapping overflow, the same on both sides.
    let big = Array::from_elem(IxDyn(&[2, 3]), i64::MAX / 3);
    let ones = Array::from_elem(IxDyn(&[3, 2]), 7i64);
    let c = gpu
        .gufunc_matmul_i64(big.view(), ones.view())
        .map_err(fail)?;
    ensure(
        c == gufunc_matmul_i64_cpu(big.view(), ones.view()).map_err(fail)?,
        || "wrapping".into(),
    )
}

fn gufunc_refuses_bad_input(gpu: &Gpu) -> Result<(), Failed> {
    let a = ArrayD::<i64>::zeros(IxDyn(&[2, 3, 4]));
    let b = ArrayD::<i64>::zeros(IxDyn(&[3, 4, 5]));
    let c = ArrayD::<i64>::zeros(IxDyn(&[5, 6]));
    let v = ArrayD::<i64>::zeros(IxDyn(&[4]));
    let e = ArrayD::<i64>::zeros(IxDyn(&[0, 4, 5]));
    expect_invalid("batch broadcast", gpu.gufunc_matmul_i64(a.view(), b.view()))?;
    expect_invalid("core mismatch", gpu.gufunc_matmul_i64(a.view(), c.view()))?;
    expect_invalid("1-D operand", gpu.gufunc_matmul_i64(a.view(), v.view()))?;
    expect_invalid("empty", gpu.gufunc_matmul_i64(a.view(), e.view()))
}

fn ptx_function<'a>(name: &str) -> Result<&'a str, Failed> {
    let ptx = cuda_kernels::PTX;
    let start = ptx
        .find(&format!(".entry {name}("))
        .ok_or_else(|| format!("{name} not in the PTX"))?;
    let rest = &ptx[start..];
    let end = rest.find("\n}").ok_or("unterminated entry")?;
    Ok(&rest[..end])
}

fn ptx_keeps_the_repeat_loop() -> Result<(), Failed> {
    let body = ptx_function("vector_sum_repeat")?;
    ensure(body.contains("ld.volatile.global"), || {
        "no volatile load".into()
    })?;
    ensure(body.contains("st.volatile.global"), || {
        "no volatile store".into()
    })?;
    // A backward branch: some `bra` targets a label defined before it.
    let mut labels = Vec::new();
    let mut backward = false;
    for line in body.lines() {
        let l = line.trim();
        if l.starts_with("$L") {
            // `$L__BB17_7:  // comment`
            labels.push(l.split(':').next().unwrap_or("").to_string());
        } else if let Some(target) = l.split("bra").nth(1) {
            let target = target
                .trim()
                .trim_start_matches(".uni")
                .trim()
                .trim_end_matches(';');
            backward |= labels.iter().any(|x| x == target);
        }
    }
    ensure(backward, || {
        "no loop (backward branch) in vector_sum_repeat".into()
    })
}

fn ptx_tiled_uses_shared_vector_loads() -> Result<(), Failed> {
    for tile in cuda_kernels::kernels::matmul::SGEMM_TILES {
        let body = ptx_function(tile.entry)?;
        let v4 = body.matches("ld.shared.v4.f32").count();
        let fma = body.matches("fma.rn.f32").count();
        let (want_v4, want_fma) = (4 * tile.bk, 64 * tile.bk);
        ensure(v4 >= want_v4 && fma >= want_fma, || {
            format!(
                "{}: expected ≥ {want_v4} ld.shared.v4.f32 and ≥ {want_fma} fma.rn.f32, \
                 got {v4} and {fma}",
                tile.entry
            )
        })?;
        ensure(!body.contains(".local"), || {
            format!("local memory in {}", tile.entry)
        })?;
    }
    Ok(())
}

fn ptx_tiled_v4_uses_global_vector_loads() -> Result<(), Failed> {
    for tile in cuda_kernels::kernels::matmul::SGEMM_TILES {
        let body = ptx_function(tile.entry)?;
        let v4 = body.contains("ld.global.nc.v4");
        ensure(v4 == tile.vec, || {
            format!(
                "{}: ld.global.nc.v4 present: {v4}, expected {}",
                tile.entry, tile.vec
            )
        })?;
    }
    Ok(())
}
