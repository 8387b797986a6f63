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
    Elementwise, MatmulKernel, allclose, check_matmul, doubles_matrix_cpu, elementwise_cpu,
    gufunc_matmul_i64_cpu, matmul_cpu, vector_sum_repeat_cpu,
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
        gpu_test("matmul_refuses_bad_input", matmul_refuses_bad_input),
        gpu_test("elementwise_sum_all_types", elementwise_sum_all_types),
        gpu_test("elementwise_saxpy_and_lerp", elementwise_saxpy_and_lerp),
        gpu_test(
            "elementwise_heads_and_tails_on_sub_slices",
            elementwise_heads_and_tails_on_sub_slices,
        ),
        gpu_test(
            "doubles_matrix_heads_and_tails_on_sub_slices",
            doubles_matrix_heads_and_tails_on_sub_slices,
        ),
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

/// The lengths and sub-slice offsets of the vectorized kernels' boundary
/// tests: 1..=33, 2^k ± 1; every array at offset 0..=3 (the body starts at
/// a 128-byte line), at offsets that agree modulo 16 bytes only (the body
/// starts at a 16-byte boundary), or at disagreeing offsets (the element
/// path).
fn boundary_cases() -> Vec<(usize, [usize; 4])> {
    let lengths = (1..=33usize).chain([1023, 1025, 65_535, 65_537, (1 << 20) - 1, (1 << 20) + 1]);
    lengths
        .flat_map(|n| {
            [
                [0, 0, 0, 0],
                [1, 1, 1, 1],
                [2, 2, 2, 2],
                [3, 3, 3, 3],
                [1, 5, 9, 1],
                [1, 0, 2, 3],
            ]
            .into_iter()
            .map(move |o| (n, o))
        })
        .collect()
}

/// Kernel `K` on `T` over device sub-slices at `offsets` (one per array,
/// in order): exactly the CPU reference's outputs, and nothing written
/// outside the output slices.
fn elementwise_on_sub_slices<K, T>(
    gpu: &Gpu,
    n: usize,
    offsets: [usize; 4],
    value: impl Fn(usize, usize) -> T,
    scalars: &[T],
) -> Result<(), Failed>
where
    K: Elementwise<T>,
    T: cuda_kernels::matrices::ElementwiseElement + PartialEq + std::fmt::Debug,
{
    use cuda_kernels::cust::memory::{CopyDestination, DeviceBuffer, DeviceSlice};
    let ni = K::INPUTS.len();
    let arrays = ni + K::OUTPUTS.len() + K::INOUTS.len();
    let host: Vec<Vec<T>> = (0..arrays)
        .map(|k| (0..n).map(|i| value(k, i)).collect())
        .collect();
    let fill = value(99, 0);
    let mut bufs = Vec::new();
    for (k, h) in host.iter().enumerate() {
        let mut p = vec![fill; offsets[k % 4]];
        p.extend_from_slice(h);
        p.extend_from_slice(&[fill; 3]);
        bufs.push(DeviceBuffer::from_slice(&p).map_err(fail)?);
    }
    let slices: Vec<DeviceSlice<T>> = bufs
        .iter()
        .enumerate()
        .map(|(k, b)| b.index(offsets[k % 4]..offsets[k % 4] + n))
        .collect();
    let (ins, outs) = slices.split_at(ni);
    let in_refs: Vec<&DeviceSlice<T>> = ins.iter().collect();
    let mut outs: Vec<DeviceSlice<T>> = outs.iter().map(|s| s.index(..)).collect();
    let mut out_refs: Vec<&mut DeviceSlice<T>> = outs.iter_mut().collect();
    gpu.elementwise_on_device::<K, T>(&in_refs, &mut out_refs, scalars)
        .map_err(fail)?;
    gpu.synchronize("test").map_err(fail)?;
    let inputs: Vec<Array1<T>> = host[..ni].iter().map(|h| Array1::from(h.clone())).collect();
    let in_views: Vec<_> = inputs.iter().map(|a| a.view()).collect();
    let mut expected: Vec<Array1<T>> = host[ni..].iter().map(|h| Array1::from(h.clone())).collect();
    let mut views: Vec<_> = expected.iter_mut().map(|e| e.view_mut()).collect();
    elementwise_cpu::<K, T>(&in_views, &mut views, scalars).map_err(fail)?;
    for (j, want) in expected.iter().enumerate() {
        let k = ni + j;
        let o = offsets[k % 4];
        let mut got = vec![fill; bufs[k].len()];
        bufs[k].copy_to(&mut got[..]).map_err(fail)?;
        ensure(got[o..o + n] == want.as_slice().unwrap_or(&[])[..], || {
            format!(
                "{}: n = {n}, offsets {offsets:?}: GPU and CPU differ",
                K::ENTRY
            )
        })?;
        ensure(
            got[..o].iter().chain(&got[o + n..]).all(|v| *v == fill),
            || format!("{}: n = {n}, offsets {offsets:?}: wrote outside", K::ENTRY),
        )?;
    }
    Ok(())
}

fn elementwise_heads_and_tails_on_sub_slices(gpu: &Gpu) -> Result<(), Failed> {
    for (n, o) in boundary_cases() {
        let f32s = |k: usize, i: usize| ((i * 37 + k * 11) % 1000) as f32 * 0.25 - 100.0;
        let f64s = |k: usize, i: usize| f64::from(f32s(k, i)) * 1.5;
        elementwise_on_sub_slices::<sum, i32>(gpu, n, o, |k, i| (i * 7919 + k) as i32, &[])?;
        elementwise_on_sub_slices::<sum, i64>(gpu, n, o, |k, i| (i * 7919 + k) as i64, &[])?;
        elementwise_on_sub_slices::<sum, f64>(gpu, n, o, f64s, &[])?;
        elementwise_on_sub_slices::<saxpy, f32>(gpu, n, o, f32s, &[2.5])?;
        elementwise_on_sub_slices::<saxpy, f64>(gpu, n, o, f64s, &[2.5])?;
        elementwise_on_sub_slices::<lerp, f32>(gpu, n, o, f32s, &[])?;
    }
    Ok(())
}

fn doubles_matrix_heads_and_tails_on_sub_slices(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::cust::memory::{CopyDestination, DeviceBuffer};
    for (rows, cols) in [
        (1, 1),
        (1, 3),
        (3, 1),
        (1, 33),
        (5, 7),
        (31, 33),
        (33, 31),
        (257, 255),
    ] {
        for offset in 0..=3usize {
            let n = rows * cols;
            let a = Array2::from_shape_fn((rows, cols), |(r, c)| (r * 1000 + c) as f32 - 3.5);
            let mut p = vec![-7.0f32; offset];
            p.extend(a.iter().copied());
            p.extend_from_slice(&[-9.0; 3]);
            let d = DeviceBuffer::from_slice(&p).map_err(fail)?;
            let mut s = d.index(offset..offset + n);
            gpu.doubles_matrix_on_device(&mut s, rows, cols)
                .map_err(fail)?;
            gpu.synchronize("test").map_err(fail)?;
            let mut got = vec![0.0f32; d.len()];
            d.copy_to(&mut got[..]).map_err(fail)?;
            let want = doubles_matrix_cpu(a.view());
            ensure(
                got[offset..offset + n] == want.as_slice().unwrap_or(&[])[..],
                || format!("{rows}×{cols} at offset {offset}: GPU and CPU differ"),
            )?;
            ensure(
                got[..offset].iter().all(|&v| v == -7.0)
                    && got[offset + n..].iter().all(|&v| v == -9.0),
                || format!("{rows}×{cols} at offset {offset}: wrote outside"),
            )?;
        }
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
    let body = ptx_function("matrix_mul_tiled")?;
    let v4 = body.matches("ld.shared.v4.f32").count();
    let fma = body.matches("fma.rn.f32").count();
    ensure(v4 >= 32 && fma >= 512, || {
        format!("expected ≥ 32 ld.shared.v4.f32 and ≥ 512 fma.rn.f32, got {v4} and {fma}")
    })?;
    ensure(!body.contains(".local"), || {
        "local memory in matrix_mul_tiled".into()
    })
}
