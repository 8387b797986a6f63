//! The matrices family: `doubles_matrix`, the matrix products (naive
//! and tiled), elementwise kernels, `vector_sum_repeat`,
//! `gufunc_matmul_i64`: against the CPU at chosen shapes and on random ones
//! (properties), CPU-only checks of the embedded PTX (the repeat loop
//! survived, the tiled kernel's vector loads), and refusals of bad input
//! (the launch plans without a GPU, every launcher with one).
use std::fmt::{self, Debug};

use cuda_kernels::Gpu;

use cuda_kernels::matrices::kernels::{lerp, saxpy, sum};
use cuda_kernels::matrices::{
    Elementwise, ElementwiseElement, MatmulKernel, MatmulLaunch, PLAN_SMS, SPLIT_K_MIN, allclose,
    check_matmul, doubles_matrix_cpu, doubles_matrix_launch, elementwise_cpu,
    gufunc_matmul_i64_cpu, gufunc_plan, matmul_cpu, matmul_launch, matmul_launch_for,
    vector_sum_repeat_cpu,
};
use cuda_kernels::ndarray::{
    Array, Array1, Array2, Array3, ArrayD, ArrayView1, ArrayView2, ArrayViewMut1, Axis, IxDyn, s,
};
use cuda_kernels::util::Rng;
use libtest_mimic::{Failed, Trial};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::common::{AWKWARD_LENGTHS, ensure, fail, simulated, sized};
use crate::support::cases::{Cases, Want, equal, m, require};
use crate::support::props::{
    Draw, all_same, brief, case_err, check, f32_no_nan, f64_no_nan, length,
};
use crate::support::{Elem, huge1, huge2, huged, ptx_entry};
use cuda_kernels::prelude::*;

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        kernel!(doubles_matrix_any_shape),
        kernel!(doubles_matrix_views),
        kernel!(matmul_small_matches_dot),
        kernel!(matmul_edges_and_large),
        kernel!(matmul_views),
        kernel!(matmul_tile_selection),
        kernel!(matmul_split_k),
        kernel!(elementwise_sum_all_types),
        kernel!(elementwise_saxpy_and_lerp),
        kernel!(elementwise_heads_and_tails_on_sub_slices),
        kernel!(doubles_matrix_heads_and_tails_on_sub_slices),
        kernel!(vector_sum_repeat_matches_cpu),
        kernel!(gufunc_matmul_matches_cpu),
        cpu!(ptx_keeps_the_repeat_loop),
        cpu!(ptx_tiled_uses_shared_vector_loads),
        cpu!(ptx_tiled_v4_uses_global_vector_loads),
        kernel!(doubles_matrix_agrees_with_cpu),
        kernel!("matmul_naive_agrees_with_cpu", |gpu| {
            matmul_agrees_with_cpu(gpu, MatmulKernel::Naive)
        }),
        kernel!("matmul_tiled_agrees_with_cpu", |gpu| {
            matmul_agrees_with_cpu(gpu, MatmulKernel::Tiled)
        }),
        kernel!(elementwise_sum_agrees_with_cpu),
        kernel!(elementwise_saxpy_agrees_with_cpu),
        kernel!(elementwise_lerp_agrees_with_cpu),
        kernel!(gufunc_matmul_i64_agrees_with_cpu),
        cpu!(gufunc_references_agree),
        cpu!(plan_refusals),
        kernel!(refusals),
    ]
}

// ---------------------------------------------------------------------------
// Correctness.

fn randn2(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    let mut rng = Rng::new(seed);
    Array2::from_shape_simple_fn((rows, cols), || rng.normal() as f32)
}

fn doubles_matrix_any_shape(gpu: &Gpu) -> Result<(), Failed> {
    // 4096² on a GPU, 1025 × 1023 on the simulator.
    let (rows, cols) = (sized(gpu, 4096, 1025), sized(gpu, 4096, 1023));
    for &(r, c) in &[
        (1, 1),
        (5, 5),
        (16, 16),
        (17, 33),
        (1, 1000),
        (1000, 1),
        (1023, 1025),
        (rows, cols),
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
    ensure(b == expected, || "stepped view".into())
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
            let c = gpu.matmul(kernel, a.view(), b.view()).map_err(fail)?;
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
    // bound k·2⁻²⁴·(|A||B|)ᵢⱼ (see check_matmul for why). The simulator
    // leaves out the three largest (large k there: 33 × 4097 · 4097 × 31).
    let edges = [
        (5, 5, 5),
        (127, 9, 129),
        (129, 257, 130),
        (1, 1000, 1),
        (300, 1, 200),
        (255, 31, 513),
    ];
    let large: &[(usize, usize, usize)] = if simulated(gpu) {
        &[(33, 4097, 31)]
    } else {
        &[(1000, 1000, 1000), (1024, 1024, 1024), (517, 4096, 260)]
    };
    for &(m, k, n) in edges.iter().chain(large) {
        let a = randn2(m, k, (m * 31 + k) as u64);
        let b = randn2(k, n, (k * 17 + n) as u64);
        for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
            let c = gpu.matmul(kernel, a.view(), b.view()).map_err(fail)?;
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
    let ((m, k), n) = (a.dim(), b.ncols());
    let padded = |x: &Array2<f32>| {
        let mut v = vec![0.0f32; offset];
        v.extend(x.iter());
        v
    };
    let da = gpu.to_device(&padded(a)).map_err(fail)?;
    let db = gpu.to_device(&padded(b)).map_err(fail)?;
    let dc = gpu
        .to_device(&vec![f32::NAN; offset + m * n])
        .map_err(fail)?;
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
    // multiple of the tile, m odd; and the odd shapes. On the
    // simulator the 128² tiles run at the same m and n with a short k (the
    // choice does not depend on k's length).
    let mut seen = std::collections::BTreeSet::new();
    let shapes = [
        (1, 4, 4),
        (63, 12, 68),
        (65, 20, 132),
        (127, 333, 65),
        (129, 36, 60),
        (130, 1004, 260),
        (1, 1, 1),
    ];
    let large: &[(usize, usize, usize)] = if simulated(gpu) {
        &[(2048, 4, 2044), (1921, 5, 1923)]
    } else {
        &[(2048, 36, 2044), (1921, 20, 1924), (2047, 13, 2045)]
    };
    for &(m, k, n) in shapes.iter().chain(large) {
        let a = randn2(m, k, (m * 13 + k) as u64);
        let b = randn2(k, n, (k * 7 + n) as u64);
        for offset in [0, 1] {
            let (c, plan) = tiled_at_offset(gpu, &a, &b, offset)?;
            let vec = plan.entry.name().ends_with("_v4");
            ensure(!(vec && (offset != 0 || k % 4 != 0 || n % 4 != 0)), || {
                format!(
                    "{m}×{k}·{k}×{n} offset {offset}: {} needs alignment",
                    plan.entry.name()
                )
            })?;
            seen.insert(plan.entry.name());
            let chk = check_matmul(c.view(), a.view(), b.view()).map_err(fail)?;
            ensure(chk.passed(), || {
                format!(
                    "{} {m}×{k}·{k}×{n} offset {offset}: {chk:?}",
                    plan.entry.name()
                )
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
    // every run. The simulator leaves out 256 × 2048 · 2048 × 260.
    let sms = gpu.multiprocessors("test").map_err(fail)?;
    let large: &[(usize, usize, usize)] = if simulated(gpu) {
        &[]
    } else {
        &[(256, 2048, 260)]
    };
    for &(m, k, n) in [
        (65, 4097, 3),
        (1, 4096, 1),
        (100, 1001, 100),
        (33, 520, 17),
        (64, SPLIT_K_MIN, 64),
    ]
    .iter()
    .chain(large)
    {
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
                    plan.entry.name()
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
fn boundary_cases(gpu: &Gpu) -> Vec<(usize, [usize; 4])> {
    // 2^20 ± 1 on a GPU only: on the simulator 2^16 ± 1 is the largest.
    let large: &[usize] = if simulated(gpu) {
        &[]
    } else {
        &[(1 << 20) - 1, (1 << 20) + 1]
    };
    let lengths = (1..=33usize)
        .chain([1023, 1025, 65_535, 65_537])
        .chain(large.iter().copied());
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
    T: cuda_kernels::matrices::ElementwiseElement<Dev = T>
        + cuda_kernels::cust::memory::DeviceCopy
        + PartialEq
        + std::fmt::Debug,
{
    use cuda_kernels::DeviceSlice;
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
        bufs.push(gpu.to_device(&p).map_err(fail)?);
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
    for (n, o) in boundary_cases(gpu) {
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
            let d = gpu.to_device(&p).map_err(fail)?;
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

fn vector_sum_repeat_matches_cpu(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(8);
    let n = 10_000;
    let repeats = sized(gpu, 10_000, 1001) as u32;
    let a: Array1<f32> = (0..n).map(|_| rng.uniform() as f32).collect();
    let b: Array1<f32> = (0..n).map(|_| rng.uniform() as f32).collect();
    let c = gpu
        .vector_sum_repeat(a.view(), b.view(), repeats)
        .map_err(fail)?;
    let expected = vector_sum_repeat_cpu(a.view(), b.view(), repeats).map_err(fail)?;
    let norm = (&c - &expected).mapv(|d| (d as f64).powi(2)).sum().sqrt();
    ensure(norm < 1e-5, || format!("‖cpu − gpu‖ = {norm}"))?;
    for &n in &[1usize, 257, 65_537] {
        let a = Array1::from_elem(n, 1.5f32);
        let c = gpu.vector_sum_repeat(a.view(), a.view(), 3).map_err(fail)?;
        ensure(c.iter().all(|&x| x == 3.0), || format!("n = {n}"))?;
    }
    Ok(())
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

fn ptx_keeps_the_repeat_loop() -> Result<(), Failed> {
    let body = ptx_entry("vector_sum_repeat")?;
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
        let body = ptx_entry(tile.entry.name())?;
        let v4 = body.matches("ld.shared.v4.f32").count();
        let fma = body.matches("fma.rn.f32").count();
        let (want_v4, want_fma) = (4 * tile.bk, 64 * tile.bk);
        ensure(v4 >= want_v4 && fma >= want_fma, || {
            format!(
                "{}: expected ≥ {want_v4} ld.shared.v4.f32 and ≥ {want_fma} fma.rn.f32, \
                 got {v4} and {fma}",
                tile.entry.name()
            )
        })?;
        ensure(!body.contains(".local"), || {
            format!("local memory in {}", tile.entry.name())
        })?;
    }
    Ok(())
}

fn ptx_tiled_v4_uses_global_vector_loads() -> Result<(), Failed> {
    for tile in cuda_kernels::kernels::matmul::SGEMM_TILES {
        let body = ptx_entry(tile.entry.name())?;
        let v4 = body.contains("ld.global.nc.v4");
        ensure(v4 == tile.vec, || {
            format!(
                "{}: ld.global.nc.v4 present: {v4}, expected {}",
                tile.entry.name(),
                tile.vec
            )
        })?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Properties.

fn matrix(rows: usize, cols: usize, values: Vec<f32>) -> Array2<f32> {
    Array2::from_shape_vec((rows, cols), values).expect("rows × cols values")
}

struct DoublesCase {
    a: Array2<f32>,
    /// Double in place through a transposed (column-major) view.
    transposed: bool,
}

impl Debug for DoublesCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} matrix, in place transposed: {}, values {}",
            self.a.dim(),
            self.transposed,
            brief(self.a.as_slice().unwrap_or(&[]))
        )
    }
}

fn doubles_cases() -> impl Strategy<Value = DoublesCase> {
    let shapes = (1..=300usize, 1..=300usize, any::<bool>());
    shapes.prop_perturb(|(rows, cols, transposed), rng| DoublesCase {
        a: matrix(rows, cols, Draw::new(rng).vec(&f32_no_nan(), rows * cols)),
        transposed,
    })
}

/// Random rows × cols in 1..=300, any f32 but NaN: `doubles_matrix` (copy)
/// and `doubles_matrix_in_place` (through a standard or a transposed view)
/// equal `doubles_matrix_cpu` bit for bit (32 cases).
fn doubles_matrix_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(32, doubles_cases(), |c| {
        let want = doubles_matrix_cpu(c.a.view());
        let got = gpu.doubles_matrix(c.a.view()).map_err(case_err)?;
        all_same("doubles_matrix (copy)", &got, &want)?;
        if c.transposed {
            // A column-major copy of A, doubled through its (row-major) transpose.
            let mut t = c.a.t().as_standard_layout().into_owned();
            gpu.doubles_matrix_in_place(t.view_mut().reversed_axes())
                .map_err(case_err)?;
            all_same("doubles_matrix (in place, transposed)", t.t(), &want)
        } else {
            let mut a = c.a.clone();
            gpu.doubles_matrix_in_place(a.view_mut())
                .map_err(case_err)?;
            all_same("doubles_matrix (in place)", &a, &want)
        }
    })
}

struct MatmulCase {
    a: Array2<f32>,
    b: Array2<f32>,
    /// Small integers (exact products) rather than floats in [-1, 1).
    integers: bool,
    /// Pass A (B) as the transposed view of a column-major copy.
    a_transposed: bool,
    b_transposed: bool,
}

impl Debug for MatmulCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "A {:?}{} · B {:?}{}, {}, A = {}, B = {}",
            self.a.dim(),
            if self.a_transposed { " (view)" } else { "" },
            self.b.dim(),
            if self.b_transposed { " (view)" } else { "" },
            if self.integers {
                "integers in -8..=8"
            } else {
                "floats in [-1, 1)"
            },
            brief(self.a.as_slice().unwrap_or(&[])),
            brief(self.b.as_slice().unwrap_or(&[]))
        )
    }
}

fn matmul_cases() -> impl Strategy<Value = MatmulCase> {
    let params = (
        1..=200usize,
        1..=200usize,
        1..=200usize,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    );
    params.prop_perturb(|(m, k, n, integers, a_t, b_t), rng| {
        let mut d = Draw::new(rng);
        let values: BoxedStrategy<f32> = if integers {
            (-8i8..=8).prop_map(f32::from).boxed()
        } else {
            (-1.0f32..1.0).boxed()
        };
        MatmulCase {
            a: matrix(m, k, d.vec(&values, m * k)),
            b: matrix(k, n, d.vec(&values, k * n)),
            integers,
            a_transposed: a_t,
            b_transposed: b_t,
        }
    })
}

/// Random m, k, n in 1..=200; values either integers in -8..=8 (every sum is
/// an integer below 2^24, so exact in any order) or floats in [-1, 1); each
/// operand either row-major or a transposed column-major view. Integers: the
/// product equals `matmul_cpu` exactly; floats: within `check_matmul`'s
/// tolerance (the one `matmul_edges_and_large` uses: NumPy's allclose plus k·2⁻²⁴·|A||B|)
/// (32 cases per kernel).
fn matmul_agrees_with_cpu(gpu: &Gpu, kernel: MatmulKernel) -> Result<(), Failed> {
    check(32, matmul_cases(), |c| {
        let a_col = c.a.t().as_standard_layout().into_owned();
        let b_col = c.b.t().as_standard_layout().into_owned();
        let a = if c.a_transposed {
            a_col.t()
        } else {
            c.a.view()
        };
        let b = if c.b_transposed {
            b_col.t()
        } else {
            c.b.view()
        };
        let got = gpu.matmul(kernel, a, b).map_err(case_err)?;
        if c.integers {
            let want = matmul_cpu(c.a.view(), c.b.view()).map_err(case_err)?;
            all_same(&format!("{kernel:?} (integers)"), &got, &want)
        } else {
            let chk = check_matmul(got.view(), c.a.view(), c.b.view()).map_err(case_err)?;
            prop_assert!(chk.passed(), "{:?} (floats): {:?}", kernel, chk);
            Ok(())
        }
    })
}

/// Runs elementwise kernel `K` on the GPU and with `elementwise_cpu` on the
/// same inputs, `outputs` holding the initial `out` and `inout` arrays, and
/// compares every output.
fn elementwise_same<K: Elementwise<T>, T: ElementwiseElement<Dev = T> + Elem>(
    gpu: &Gpu,
    inputs: &[&[T]],
    outputs: &[&[T]],
    scalars: &[T],
) -> Result<(), TestCaseError> {
    let ins: Vec<ArrayView1<T>> = inputs.iter().map(|a| ArrayView1::from(*a)).collect();
    let mut got: Vec<Array1<T>> = outputs.iter().map(|a| Array1::from(a.to_vec())).collect();
    let mut want = got.clone();
    {
        let mut views: Vec<ArrayViewMut1<T>> = got.iter_mut().map(|a| a.view_mut()).collect();
        gpu.elementwise::<K, T>(&ins, &mut views, scalars)
            .map_err(case_err)?;
    }
    {
        let mut views: Vec<ArrayViewMut1<T>> = want.iter_mut().map(|a| a.view_mut()).collect();
        elementwise_cpu::<K, T>(&ins, &mut views, scalars).map_err(case_err)?;
    }
    for (j, (g, w)) in got.iter().zip(&want).enumerate() {
        all_same(&format!("{} output {j}", K::ENTRY), g, w)?;
    }
    Ok(())
}

/// Arrays of one length for each element type, and scalars.
struct Arrays {
    i32s: Vec<Vec<i32>>,
    i64s: Vec<Vec<i64>>,
    f32s: Vec<Vec<f32>>,
    f64s: Vec<Vec<f64>>,
    scalar32: f32,
    scalar64: f64,
}

impl Debug for Arrays {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |xs: Vec<String>| xs.join(", ");
        write!(
            f,
            "length {}; i32 [{}]; i64 [{}]; f32 [{}]; f64 [{}]; scalars {:?}, {:?}",
            self.f32s.first().map_or(0, Vec::len),
            show(self.i32s.iter().map(|a| brief(a)).collect()),
            show(self.i64s.iter().map(|a| brief(a)).collect()),
            show(self.f32s.iter().map(|a| brief(a)).collect()),
            show(self.f64s.iter().map(|a| brief(a)).collect()),
            self.scalar32,
            self.scalar64
        )
    }
}

/// `count` arrays of each type (integers: half the range, so that sums do
/// not overflow; floats: anything but NaN), of one random length in
/// 1..=100 000.
fn arrays(count: usize, with_ints: bool) -> impl Strategy<Value = Arrays> {
    length(1, 100_000).prop_perturb(move |n, rng| {
        let mut d = Draw::new(rng);
        let ints = if with_ints { count } else { 0 };
        let i32s = (0..ints)
            .map(|_| d.vec(&(i32::MIN / 2..=i32::MAX / 2), n))
            .collect();
        let i64s = (0..ints)
            .map(|_| d.vec(&(i64::MIN / 2..=i64::MAX / 2), n))
            .collect();
        let f32s = (0..count).map(|_| d.vec(&f32_no_nan(), n)).collect();
        let f64s = (0..count).map(|_| d.vec(&f64_no_nan(), n)).collect();
        Arrays {
            i32s,
            i64s,
            f32s,
            f64s,
            scalar32: d.one(&f32_no_nan()),
            scalar64: d.one(&f64_no_nan()),
        }
    })
}

/// Random length 1..=100 000; i32/i64 in half their range, f32/f64 anything
/// but NaN: `elementwise_sum_<T>` equals `elementwise_cpu::<sum, T>` for all
/// four types, bit for bit (NaN = NaN) (32 cases).
fn elementwise_sum_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(32, arrays(2, true), |a| {
        let n = a.f32s[0].len();
        elementwise_same::<sum, i32>(gpu, &[&a.i32s[0], &a.i32s[1]], &[&vec![0; n]], &[])?;
        elementwise_same::<sum, i64>(gpu, &[&a.i64s[0], &a.i64s[1]], &[&vec![0; n]], &[])?;
        elementwise_same::<sum, f32>(gpu, &[&a.f32s[0], &a.f32s[1]], &[&vec![0.0; n]], &[])?;
        elementwise_same::<sum, f64>(gpu, &[&a.f64s[0], &a.f64s[1]], &[&vec![0.0; n]], &[])
    })
}

/// Random length 1..=100 000, x, y and a anything but NaN: saxpy (y in
/// place) equals `elementwise_cpu::<saxpy, T>` for f32 and f64, bit for bit
/// (NaN = NaN) (32 cases).
fn elementwise_saxpy_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(32, arrays(2, false), |a| {
        elementwise_same::<saxpy, f32>(gpu, &[&a.f32s[0]], &[&a.f32s[1]], &[a.scalar32])?;
        elementwise_same::<saxpy, f64>(gpu, &[&a.f64s[0]], &[&a.f64s[1]], &[a.scalar64])
    })
}

/// Random length 1..=100 000, a, b and t anything but NaN: lerp equals
/// `elementwise_cpu::<lerp, T>` for f32 and f64, bit for bit (NaN = NaN)
/// (32 cases).
fn elementwise_lerp_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(32, arrays(3, false), |a| {
        let n = a.f32s[0].len();
        let (x, y, z) = (&a.f32s[0], &a.f32s[1], &a.f32s[2]);
        elementwise_same::<lerp, f32>(gpu, &[x, y, z], &[&vec![0.0; n]], &[])?;
        let (x, y, z) = (&a.f64s[0], &a.f64s[1], &a.f64s[2]);
        elementwise_same::<lerp, f64>(gpu, &[x, y, z], &[&vec![0.0; n]], &[])
    })
}

struct GufuncCase {
    a: ArrayD<i64>,
    b: ArrayD<i64>,
}

impl Debug for GufuncCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "A {:?} · B {:?}, A = {}, B = {}",
            self.a.shape(),
            self.b.shape(),
            brief(self.a.as_slice().unwrap_or(&[])),
            brief(self.b.as_slice().unwrap_or(&[]))
        )
    }
}

/// The batch shape of one operand: the last `axes` of the broadcast batch
/// shape `batch`, each kept or set to 1.
fn operand_batch(batch: &[usize], axes: usize, keep: &[bool]) -> Vec<usize> {
    let skip = batch.len() - axes.min(batch.len());
    (skip..batch.len())
        .map(|i| if keep[i] { batch[i] } else { 1 })
        .collect()
}

/// `C = A · B` with NumPy broadcasting, independently of the crate's plan:
/// both operands broadcast by ndarray to the common batch shape, one
/// `ndarray` dot per matrix.
fn gufunc_reference(a: &ArrayD<i64>, b: &ArrayD<i64>) -> ArrayD<i64> {
    let (sa, sb) = (a.shape(), b.shape());
    let (ba, bb) = (&sa[..sa.len() - 2], &sb[..sb.len() - 2]);
    let nd = ba.len().max(bb.len());
    let dim = |s: &[usize], i: usize| (i + s.len()).checked_sub(nd).map_or(1, |j| s[j]);
    let batch: Vec<usize> = (0..nd).map(|i| dim(ba, i).max(dim(bb, i))).collect();
    let count: usize = batch.iter().product();
    let (m, n, p) = (sa[sa.len() - 2], sa[sa.len() - 1], sb[sb.len() - 1]);
    let full = |core: [usize; 2]| -> Vec<usize> { batch.iter().copied().chain(core).collect() };
    let stack = |x: &ArrayD<i64>, rows: usize, cols: usize| {
        x.broadcast(IxDyn(&full([rows, cols])))
            .expect("the batch shapes broadcast")
            .as_standard_layout()
            .into_owned()
            .into_shape_with_order((count, rows, cols))
            .expect("count × rows × cols")
    };
    let (a3, b3) = (stack(a, m, n), stack(b, n, p));
    let mut c = Array3::<i64>::zeros((count, m, p));
    for z in 0..count {
        c.index_axis_mut(Axis(0), z)
            .assign(&a3.index_axis(Axis(0), z).dot(&b3.index_axis(Axis(0), z)));
    }
    c.into_shape_with_order(IxDyn(&full([m, p])))
        .expect("batch × m × p")
}

fn gufunc_cases() -> impl Strategy<Value = GufuncCase> {
    let params = (
        prop::collection::vec(1..=4usize, 0..=3),
        (0..=3usize, 0..=3usize),
        (
            prop::collection::vec(any::<bool>(), 3),
            prop::collection::vec(any::<bool>(), 3),
        ),
        (1..=12usize, 1..=12usize, 1..=12usize),
    );
    params.prop_perturb(
        |(batch, (axes_a, axes_b), (keep_a, keep_b), (m, n, p)), rng| {
            let mut d = Draw::new(rng);
            let mut shape_a = operand_batch(&batch, axes_a, &keep_a);
            let mut shape_b = operand_batch(&batch, axes_b, &keep_b);
            shape_a.extend([m, n]);
            shape_b.extend([n, p]);
            let values = -100i64..=100;
            let mut operand = |shape: Vec<usize>| {
                let len = shape.iter().product();
                ArrayD::from_shape_vec(IxDyn(&shape), d.vec(&values, len)).expect("shape")
            };
            let a = operand(shape_a);
            let b = operand(shape_b);
            GufuncCase { a, b }
        },
    )
}

/// Random batch shapes that broadcast (up to 3 batch axes of 1..=4; each
/// operand has the last 0..=3 of them, each kept or 1), m, n, p in 1..=12,
/// values in -100..=100: `gufunc_matmul_i64` equals `gufunc_matmul_i64_cpu`
/// and an independent ndarray broadcast-and-dot, exactly (48 cases).
fn gufunc_matmul_i64_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(48, gufunc_cases(), |c| {
        let got = gpu
            .gufunc_matmul_i64(c.a.view(), c.b.view())
            .map_err(case_err)?;
        let cpu = gufunc_matmul_i64_cpu(c.a.view(), c.b.view()).map_err(case_err)?;
        let reference = gufunc_reference(&c.a, &c.b);
        prop_assert_eq!(got.shape(), reference.shape());
        prop_assert_eq!(cpu.shape(), reference.shape());
        all_same("gufunc vs gufunc_matmul_i64_cpu", &got, &cpu)?;
        all_same("gufunc vs broadcast dot", &got, &reference)
    })
}

/// CPU only: on the gufunc property's random cases, its independent
/// broadcast-and-dot reference equals `gufunc_matmul_i64_cpu` (so that a
/// disagreement in the GPU trial points at the GPU, not at the test) (48
/// cases).
fn gufunc_references_agree() -> Result<(), Failed> {
    check(48, gufunc_cases(), |c| {
        let cpu = gufunc_matmul_i64_cpu(c.a.view(), c.b.view()).map_err(case_err)?;
        let reference = gufunc_reference(&c.a, &c.b);
        prop_assert_eq!(cpu.shape(), reference.shape());
        all_same("gufunc_matmul_i64_cpu vs broadcast dot", &cpu, &reference)
    })
}

// ---------------------------------------------------------------------------
// Refusals.

fn plan_refusals() -> Result<(), Failed> {
    let mut t = Cases::new("matrices::plan_refusals");
    for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
        let e = kernel.entry();
        for (case, a, b) in [
            ("inner dimensions differ", (2, 3), (4, 5)),
            ("m = 0", (0, 3), (3, 5)),
            ("k = 0", (2, 0), (0, 5)),
            ("n = 0", (2, 3), (3, 0)),
            ("m × k × 4 overflows", (1 << 62, 1), (1, 1)),
            ("k × n × 4 overflows", (1, 1 << 62), (1 << 62, 1)),
            ("m = 2^32", (1 << 32, 1), (1, 1)),
            ("n = 2^38", (1, 1), (1, 1 << 38)),
        ] {
            t.refuse(&format!("{e}: {case}"), Want::Invalid(e), || {
                matmul_launch(kernel, a, b)
            });
        }
        t.works(&format!("{e}: 1 × 1 · 1 × 1"), || {
            let l = matmul_launch(kernel, (1, 1), (1, 1)).map_err(m)?;
            equal("grid", l.grid, (1, 1))
        });
    }
    let naive = MatmulKernel::Naive.entry();
    t.refuse("naive: 65,536 blocks along y", Want::Invalid(naive), || {
        matmul_launch(MatmulKernel::Naive, (65_535 * 16 + 1, 1), (1, 1))
    });
    t.works("naive: 65,535 blocks along y", || {
        matmul_launch(MatmulKernel::Naive, (65_535 * 16, 1), (1, 1))
            .map(drop)
            .map_err(m)
    });
    t.works("naive: A of 2^32 elements is accepted", || {
        matmul_launch(MatmulKernel::Naive, (1 << 16, 1 << 16), (1 << 16, 1))
            .map(drop)
            .map_err(m)
    });
    let tiled = MatmulKernel::Tiled.entry();
    for (case, a, b) in [
        (
            "tiled: A of 2^32 elements",
            (1 << 16, 1 << 16),
            (1 << 16, 1),
        ),
        (
            "tiled: A of 2^32 − 2^16 elements (one past the limit)",
            (1 << 16, 65_535),
            (65_535, 1),
        ),
        (
            "tiled: B of 2^32 elements",
            (1, 1 << 16),
            (1 << 16, 1 << 16),
        ),
        (
            "tiled: 65,536 blocks along y",
            (65_535 * 128 + 1, 1),
            (1, 1),
        ),
    ] {
        t.refuse(case, Want::Invalid(tiled), || {
            matmul_launch(MatmulKernel::Tiled, a, b)
        });
    }
    let dm = "doubles_matrix";
    for (case, rows, cols) in [
        ("0 × 5", 0, 5),
        ("5 × 0", 5, 0),
        ("0 × 0", 0, 0),
        ("65,536 blocks along y", 65_535 * 8 + 1, 1),
        ("2^31 blocks along x", 1, 1 << 36),
        ("rows × cols × 4 overflows", 1 << 62, 1),
    ] {
        t.refuse(
            &format!("doubles_matrix_launch: {case}"),
            Want::Invalid(dm),
            || doubles_matrix_launch(rows, cols),
        );
    }
    t.works("doubles_matrix_launch: 1 × 1", || {
        equal("shape", doubles_matrix_launch(1, 1).map_err(m)?, (1, 256))
    });
    t.works("doubles_matrix_launch: 65,535 blocks along y", || {
        doubles_matrix_launch(65_535 * 8, 1).map(drop).map_err(m)
    });
    let g = "gufunc_matmul_i64";
    for (case, a, b) in [
        ("A has 1 axis", &[3][..], &[3, 3][..]),
        ("B has 1 axis", &[3, 3], &[3]),
        ("A has 0 axes", &[], &[3, 3]),
        ("core dimensions differ", &[2, 3], &[4, 5]),
        ("empty batch axis", &[0, 2, 2], &[2, 2]),
        ("empty core axis", &[2, 0], &[0, 2]),
        ("batch shapes do not broadcast", &[2, 2, 3], &[3, 3, 5]),
        ("A's 2^61 elements × 8 overflow", &[1 << 61, 1, 1], &[1, 1]),
        (
            "batch 2^40 × 2^40 overflows",
            &[1 << 40, 1, 1, 1],
            &[1 << 40, 1, 1],
        ),
        (
            "batch × m × p × 8 overflows",
            &[1 << 30, 1 << 17, 1],
            &[1, 1 << 17],
        ),
    ] {
        t.refuse(&format!("gufunc_plan: {case}"), Want::Invalid(g), || {
            gufunc_plan(a, b)
        });
    }
    t.works("gufunc_plan: [1, 1] · [1, 1]", || {
        let p = gufunc_plan(&[1, 1], &[1, 1]).map_err(m)?;
        equal("out shape", p.out_shape, vec![1, 1])
    });
    t.works(
        "gufunc_plan: batch broadcast [3, 1, 2, 2] · [4, 2, 2]",
        || {
            let p = gufunc_plan(&[3, 1, 2, 2], &[4, 2, 2]).map_err(m)?;
            equal("batch", p.batch(), 12)
        },
    );
    // The CPU references refuse what the GPU refuses.
    let a = Array1::<f32>::zeros(3);
    let b = Array1::<f32>::zeros(4);
    t.refuse(
        "matmul_cpu: inner dimensions differ",
        Want::Invalid("matmul (CPU)"),
        || {
            matmul_cpu(
                Array2::<f32>::zeros((2, 3)).view(),
                Array2::<f32>::zeros((4, 2)).view(),
            )
        },
    );
    t.refuse(
        "vector_sum_repeat_cpu: lengths differ",
        Want::Invalid("vector_sum_repeat (CPU)"),
        || vector_sum_repeat_cpu(a.view(), b.view(), 1),
    );
    let (x3, x4) = (Array1::<i32>::zeros(3), Array1::<i32>::zeros(4));
    let (mut c3, mut c4) = (Array1::<i32>::zeros(3), Array1::<i32>::zeros(4));
    let e = "elementwise_sum_i32";
    t.refuse("elementwise_cpu: 1 input for 2", Want::Invalid(e), || {
        elementwise_cpu::<sum, i32>(&[x3.view()], &mut [c3.view_mut()], &[])
    });
    t.refuse("elementwise_cpu: 3 inputs for 2", Want::Invalid(e), || {
        elementwise_cpu::<sum, i32>(
            &[x3.view(), x3.view(), x3.view()],
            &mut [c3.view_mut()],
            &[],
        )
    });
    t.refuse("elementwise_cpu: no output", Want::Invalid(e), || {
        elementwise_cpu::<sum, i32>(&[x3.view(), x3.view()], &mut [], &[])
    });
    t.refuse(
        "elementwise_cpu: a scalar too many",
        Want::Invalid(e),
        || elementwise_cpu::<sum, i32>(&[x3.view(), x3.view()], &mut [c3.view_mut()], &[1]),
    );
    t.refuse(
        "elementwise_cpu: input lengths differ",
        Want::Invalid(e),
        || elementwise_cpu::<sum, i32>(&[x3.view(), x4.view()], &mut [c3.view_mut()], &[]),
    );
    t.refuse(
        "elementwise_cpu: output length differs",
        Want::Invalid(e),
        || elementwise_cpu::<sum, i32>(&[x3.view(), x3.view()], &mut [c4.view_mut()], &[]),
    );
    let z = Array1::<i32>::zeros(0);
    let mut zc = Array1::<i32>::zeros(0);
    t.refuse("elementwise_cpu: empty", Want::Invalid(e), || {
        elementwise_cpu::<sum, i32>(&[z.view(), z.view()], &mut [zc.view_mut()], &[])
    });
    let s = "elementwise_saxpy_f32";
    let (fx, mut fy) = (Array1::<f32>::zeros(3), Array1::<f32>::zeros(3));
    t.refuse(
        "elementwise_cpu: saxpy without its scalar",
        Want::Invalid(s),
        || elementwise_cpu::<saxpy, f32>(&[fx.view()], &mut [fy.view_mut()], &[]),
    );
    t.works("Elementwise::ENTRY: the typed entry point's name", || {
        equal(
            "ENTRY",
            <sum as Elementwise<f32>>::ENTRY,
            "elementwise_sum_f32",
        )
    });
    let one = [0i64];
    t.refuse(
        "gufunc_matmul_i64_cpu: 2^61-element broadcast A",
        Want::Invalid(g),
        || gufunc_matmul_i64_cpu(huged(&one, &[1 << 61, 1, 1]), huged(&one, &[1, 1])),
    );
    t.finish()
}

fn refusals(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("matrices::refusals");
    let dm = "doubles_matrix";
    let one = [1.25f32];
    let (e05, e50) = (Array2::<f32>::zeros((0, 5)), Array2::<f32>::zeros((5, 0)));
    for (case, a) in [
        ("0 × 5", e05.view()),
        ("5 × 0", e50.view()),
        (
            "524,281 × 1 broadcast (65,536 blocks along y)",
            huge2(&one, 65_535 * 8 + 1, 1),
        ),
        (
            "1 × 2^36 broadcast (2^31 blocks along x)",
            huge2(&one, 1, 1 << 36),
        ),
        (
            "2^62 × 1 broadcast (bytes overflow)",
            huge2(&one, 1 << 62, 1),
        ),
    ] {
        t.refuse(
            &format!("doubles_matrix: {case}"),
            Want::Invalid(dm),
            || gpu.doubles_matrix(a),
        );
    }
    let x = Array2::from_shape_fn((5, 7), |(i, j)| (i * 7 + j) as f32 - 3.5);
    for (case, a) in [
        (
            "1 × 1",
            ArrayView2::from_shape((1, 1), &one[..]).expect("1 × 1"),
        ),
        ("transposed", x.t()),
        ("negative strides", x.slice(s![..;-1, ..;-2])),
        ("broadcast 4 × 3", huge2(&one, 4, 3)),
    ] {
        t.works(&format!("doubles_matrix: {case}"), || {
            equal(
                "2a",
                gpu.doubles_matrix(a).map_err(m)?,
                doubles_matrix_cpu(a),
            )
        });
    }
    t.refuse("doubles_matrix_in_place: 0 × 3", Want::Invalid(dm), || {
        gpu.doubles_matrix_in_place(Array2::<f32>::zeros((0, 3)).view_mut())
    });
    t.refuse(
        "doubles_matrix_in_place: 524,281 × 1 (65,536 blocks along y)",
        Want::Invalid(dm),
        || gpu.doubles_matrix_in_place(Array2::<f32>::zeros((65_535 * 8 + 1, 1)).view_mut()),
    );
    t.works(
        "doubles_matrix_in_place: transposed and reversed view",
        || {
            let mut y = x.clone();
            gpu.doubles_matrix_in_place(y.slice_mut(s![..;-1, ..]).reversed_axes())
                .map_err(m)?;
            equal("in place", y, doubles_matrix_cpu(x.view()))
        },
    );
    t.works(
        "doubles_matrix_in_place: step-2 rows leave the others alone",
        || {
            let mut y = x.clone();
            gpu.doubles_matrix_in_place(y.slice_mut(s![..;2, ..]))
                .map_err(m)?;
            let mut want = x.clone();
            want.slice_mut(s![..;2, ..]).mapv_inplace(|v| 2.0 * v);
            equal("in place", y, want)
        },
    );
    let mut d5 = gpu.to_device(&[1.0f32; 5]).map_err(crate::common::fail)?;
    for (case, rows, cols) in [
        ("2 × 3 in 5", 2, 3),
        ("0 × 5", 0, 5),
        ("524,281 × 1 in 5", 65_535 * 8 + 1, 1),
        ("2^62 × 1 in 5", 1 << 62, 1),
    ] {
        t.refuse(
            &format!("doubles_matrix_on_device: {case}"),
            Want::Invalid(dm),
            || gpu.doubles_matrix_on_device(&mut d5, rows, cols),
        );
    }
    t.works("doubles_matrix_on_device: 1 × 1", || {
        let mut d = gpu.to_device(&[1.5f32]).map_err(m)?;
        gpu.doubles_matrix_on_device(&mut d, 1, 1).map_err(m)?;
        gpu.synchronize(dm).map_err(m)?;
        let mut out = [0.0f32];
        d.copy_to(&mut out[..]).map_err(m)?;
        equal("2a", out, [3.0])
    });
    // Matrix products, both kernels.
    let z = |r: usize, c: usize| Array2::<f32>::zeros((r, c));
    let (a23, b45, a03, b35, a20, b05, b30) = (
        z(2, 3),
        z(4, 5),
        z(0, 3),
        z(3, 5),
        z(2, 0),
        z(0, 5),
        z(3, 0),
    );
    let p = Array2::from_shape_fn((6, 5), |(i, j)| ((i * 5 + j) % 7) as f32 - 3.0);
    let q = Array2::from_shape_fn((5, 4), |(i, j)| ((i + 2 * j) % 5) as f32 * 0.5);
    for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
        let e = kernel.entry();
        let mm = |a: ArrayView2<f32>, b: ArrayView2<f32>| match kernel {
            MatmulKernel::Naive => gpu.matrix_mul_naive(a, b),
            MatmulKernel::Tiled => gpu.matrix_mul_tiled(a, b),
        };
        let mut refusals: Vec<(&str, ArrayView2<f32>, ArrayView2<f32>)> = vec![
            ("inner dimensions differ", a23.view(), b45.view()),
            ("m = 0", a03.view(), b35.view()),
            ("k = 0", a20.view(), b05.view()),
            ("n = 0", a23.view(), b30.view()),
            (
                "2^62 × 1 broadcast A (bytes overflow)",
                huge2(&one, 1 << 62, 1),
                huge2(&one, 1, 1),
            ),
            (
                "A 2^32 × 1 broadcast: grid y",
                huge2(&one, 1 << 32, 1),
                huge2(&one, 1, 1),
            ),
            (
                "B 1 × 2^38 broadcast: grid x",
                huge2(&one, 1, 1),
                huge2(&one, 1, 1 << 38),
            ),
            (
                "2^40 × 1 · 1 × 2^40 broadcast (C of 2^80 elements)",
                huge2(&one, 1 << 40, 1),
                huge2(&one, 1, 1 << 40),
            ),
        ];
        match kernel {
            MatmulKernel::Naive => refusals.push((
                "1,048,561 × 1 broadcast A (65,536 blocks along y)",
                huge2(&one, 65_535 * 16 + 1, 1),
                huge2(&one, 1, 1),
            )),
            MatmulKernel::Tiled => refusals.extend([
                (
                    "8,388,481 × 1 broadcast A (65,536 blocks along y)",
                    huge2(&one, 65_535 * 128 + 1, 1),
                    huge2(&one, 1, 1),
                ),
                (
                    "2^16 × 2^16 broadcast A (2^32 elements)",
                    huge2(&one, 1 << 16, 1 << 16),
                    huge2(&one, 1 << 16, 1),
                ),
                (
                    "2^16 × 65,535 broadcast A (one past the limit)",
                    huge2(&one, 1 << 16, 65_535),
                    huge2(&one, 65_535, 1),
                ),
            ]),
        }
        for (case, a, b) in refusals {
            t.refuse(&format!("{e}: {case}"), Want::Invalid(e), || mm(a, b));
        }
        t.refuse(
            &format!("{e} (timed): inner dimensions differ"),
            Want::Invalid(e),
            || gpu.matmul_timed(kernel, a23.view(), b45.view()),
        );
        let works: Vec<(&str, ArrayView2<f32>, ArrayView2<f32>)> = vec![
            ("1 × 1 · 1 × 1", huge2(&one, 1, 1), huge2(&[-2.0f32], 1, 1)),
            ("transposed operands", q.t(), p.t()),
            (
                "negative strides",
                p.slice(s![..;-1, ..]),
                q.slice(s![.., ..;-1]),
            ),
            ("broadcast operands", huge2(&one, 3, 5), q.view()),
            (
                "1 × k · k × 1",
                p.slice(s![2..3, ..]),
                q.slice(s![.., 1..2]),
            ),
        ];
        for (case, a, b) in works {
            t.works(&format!("{e}: {case}"), || {
                let c = mm(a, b).map_err(m)?;
                let chk = check_matmul(c.view(), a, b).map_err(m)?;
                require(chk.passed(), || format!("{chk:?}"))
            });
        }
        let fail = crate::common::fail;
        let (d6, d4) = (
            gpu.to_device(&[1.0f32; 6]).map_err(fail)?,
            gpu.to_device(&[1.0f32; 4]).map_err(fail)?,
        );
        let mut c4 = gpu.to_device(&[0.0f32; 4]).map_err(fail)?;
        let mut c6 = gpu.to_device(&[0.0f32; 6]).map_err(fail)?;
        // m = 2, k = 3, n = 2: A holds 6, B 6, C 4.
        t.refuse(&format!("{e}_on_device: A short"), Want::Invalid(e), || {
            gpu.matmul_on_device(kernel, &d4, &d6, &mut c4, 2, 3, 2)
        });
        t.refuse(&format!("{e}_on_device: B short"), Want::Invalid(e), || {
            gpu.matmul_on_device(kernel, &d6, &d4, &mut c4, 2, 3, 2)
        });
        t.refuse(&format!("{e}_on_device: C long"), Want::Invalid(e), || {
            gpu.matmul_on_device(kernel, &d6, &d6, &mut c6, 2, 3, 2)
        });
        t.refuse(&format!("{e}_on_device: m = 0"), Want::Invalid(e), || {
            gpu.matmul_on_device(kernel, &d6, &d6, &mut c4, 0, 3, 2)
        });
        t.refuse(
            &format!("{e}_on_device: 2^16 × 2^16 · 2^16 × 2^20 in small buffers"),
            Want::Invalid(e),
            || gpu.matmul_on_device(kernel, &d6, &d6, &mut c4, 1 << 16, 1 << 16, 1 << 20),
        );
        t.works(&format!("{e}_on_device: 1 × 1"), || {
            let (a, b) = (
                gpu.to_device(&[3.0f32]).map_err(m)?,
                gpu.to_device(&[0.5f32]).map_err(m)?,
            );
            let mut c = gpu.to_device(&[0.0f32]).map_err(m)?;
            gpu.matmul_on_device(kernel, &a, &b, &mut c, 1, 1, 1)
                .map_err(m)?;
            gpu.synchronize(e).map_err(m)?;
            let mut out = [0.0f32];
            c.copy_to(&mut out[..]).map_err(m)?;
            equal("c", out, [1.5])
        });
    }
    // Elementwise: the generic launcher, the typed ones, on device.
    let es = "elementwise_sum_i32";
    let (x3, x4, x0) = (
        Array1::from(vec![1i32, 2, 3]),
        Array1::<i32>::zeros(4),
        Array1::<i32>::zeros(0),
    );
    let ione = [1i32];
    t.refuse(
        "elementwise::<sum>: 1 input for 2",
        Want::Invalid(es),
        || gpu.elementwise::<sum, i32>(&[x3.view()], &mut [Array1::zeros(3).view_mut()], &[]),
    );
    t.refuse(
        "elementwise::<sum>: 3 inputs for 2",
        Want::Invalid(es),
        || {
            gpu.elementwise::<sum, i32>(
                &[x3.view(), x3.view(), x3.view()],
                &mut [Array1::zeros(3).view_mut()],
                &[],
            )
        },
    );
    t.refuse(
        "elementwise::<saxpy>: without its scalar",
        Want::Invalid("elementwise_saxpy_f32"),
        || {
            gpu.elementwise::<saxpy, f32>(
                &[Array1::<f32>::zeros(3).view()],
                &mut [Array1::<f32>::zeros(3).view_mut()],
                &[],
            )
        },
    );
    t.refuse("elementwise::<sum>: no output", Want::Invalid(es), || {
        gpu.elementwise::<sum, i32>(&[x3.view(), x3.view()], &mut [], &[])
    });
    t.refuse(
        "elementwise::<sum>: a scalar too many",
        Want::Invalid(es),
        || {
            gpu.elementwise::<sum, i32>(
                &[x3.view(), x3.view()],
                &mut [Array1::zeros(3).view_mut()],
                &[5],
            )
        },
    );
    t.refuse(
        "elementwise_sum: input lengths differ",
        Want::Invalid(es),
        || gpu.elementwise_sum(x3.view(), x4.view(), Array1::zeros(3).view_mut()),
    );
    t.refuse(
        "elementwise_sum: output length differs",
        Want::Invalid(es),
        || gpu.elementwise_sum(x3.view(), x3.view(), Array1::zeros(4).view_mut()),
    );
    t.refuse("elementwise_sum: empty", Want::Invalid(es), || {
        gpu.elementwise_sum(x0.view(), x0.view(), Array1::zeros(0).view_mut())
    });
    t.refuse(
        "elementwise_sum: 2^32 broadcast input vs 3 (refused before any copy)",
        Want::Invalid(es),
        || {
            gpu.elementwise_sum(
                huge1(&ione, 1 << 32),
                x3.view(),
                Array1::zeros(3).view_mut(),
            )
        },
    );
    t.refuse(
        "elementwise_saxpy: 2^32 broadcast x vs y of 3",
        Want::Invalid("elementwise_saxpy_f32"),
        || {
            gpu.elementwise_saxpy(
                huge1(&one, 1 << 32),
                Array1::<f32>::zeros(3).view_mut(),
                2.0f32,
            )
        },
    );
    t.works("elementwise_sum: one element", || {
        let mut c = Array1::<i32>::zeros(1);
        gpu.elementwise_sum(
            ArrayView1::from(&[40i32]),
            ArrayView1::from(&[2i32]),
            c.view_mut(),
        )
        .map_err(m)?;
        equal("c", c.to_vec(), vec![42])
    });
    t.works("elementwise_saxpy (f64): one element, in place", || {
        let mut y = Array1::from(vec![0.5f64]);
        gpu.elementwise_saxpy(ArrayView1::from(&[3.0f64]), y.view_mut(), 2.0)
            .map_err(m)?;
        equal("y", y.to_vec(), vec![6.5])
    });
    t.works("elementwise_lerp (f32): one element", || {
        let mut out = Array1::<f32>::zeros(1);
        gpu.elementwise_lerp(
            ArrayView1::from(&[1.0f32]),
            ArrayView1::from(&[3.0f32]),
            ArrayView1::from(&[0.5f32]),
            out.view_mut(),
        )
        .map_err(m)?;
        let mut want = Array1::<f32>::zeros(1);
        elementwise_cpu::<lerp, f32>(
            &[
                ArrayView1::from(&[1.0f32]),
                ArrayView1::from(&[3.0f32]),
                ArrayView1::from(&[0.5f32]),
            ],
            &mut [want.view_mut()],
            &[],
        )
        .map_err(m)?;
        equal("out", out, want)
    });
    let big: Array1<i32> = (0..1001).map(|i| i % 97 - 48).collect();
    t.works(
        "elementwise_sum: negative-stride inputs into a negative-stride output",
        || {
            let mut c = Array1::<i32>::zeros(1001);
            let mut want = Array1::<i32>::zeros(1001);
            let (a, b) = (big.slice(s![..;-1]), big.view());
            gpu.elementwise_sum(a, b, c.slice_mut(s![..;-1]))
                .map_err(m)?;
            elementwise_cpu::<sum, i32>(&[a, b], &mut [want.slice_mut(s![..;-1])], &[])
                .map_err(m)?;
            equal("c", c, want)
        },
    );
    t.works(
        "elementwise_saxpy: step-2 inout view leaves the rest alone",
        || {
            let xf: Array1<f32> = (0..501).map(|i| i as f32).collect();
            let mut y = Array1::<f32>::from_elem(1001, 1.0);
            gpu.elementwise_saxpy(xf.view(), y.slice_mut(s![..;2]), 2.0)
                .map_err(m)?;
            let ok = y.iter().enumerate().all(|(i, &v)| {
                if i % 2 == 0 {
                    v == 2.0 * (i / 2) as f32 + 1.0
                } else {
                    v == 1.0
                }
            });
            require(ok, || "wrong elements".into())
        },
    );
    let fail = crate::common::fail;
    let (d3, d4) = (
        gpu.to_device(&[1i32; 3]).map_err(fail)?,
        gpu.to_device(&[1i32; 4]).map_err(fail)?,
    );
    let d0 = gpu.to_device::<i32>(&[]).map_err(fail)?;
    let mut c3 = gpu.to_device(&[0i32; 3]).map_err(fail)?;
    let mut c0 = gpu.to_device::<i32>(&[]).map_err(fail)?;
    t.refuse(
        "elementwise_on_device: 1 input for 2",
        Want::Invalid(es),
        || gpu.elementwise_on_device::<sum, i32>(&[&d3], &mut [&mut c3], &[]),
    );
    t.refuse(
        "elementwise_on_device: lengths differ",
        Want::Invalid(es),
        || gpu.elementwise_on_device::<sum, i32>(&[&d3, &d4], &mut [&mut c3], &[]),
    );
    t.refuse(
        "elementwise_on_device: a scalar too many",
        Want::Invalid(es),
        || gpu.elementwise_on_device::<sum, i32>(&[&d3, &d3], &mut [&mut c3], &[1]),
    );
    t.refuse("elementwise_on_device: empty", Want::Invalid(es), || {
        gpu.elementwise_on_device::<sum, i32>(&[&d0, &d0], &mut [&mut c0], &[])
    });
    t.works("elementwise_on_device: one element", || {
        let (a, b) = (
            gpu.to_device(&[5i32]).map_err(m)?,
            gpu.to_device(&[-7i32]).map_err(m)?,
        );
        let mut c = gpu.to_device(&[0i32]).map_err(m)?;
        gpu.elementwise_on_device::<sum, i32>(&[&a, &b], &mut [&mut c], &[])
            .map_err(m)?;
        gpu.synchronize(es).map_err(m)?;
        let mut out = [0i32];
        c.copy_to(&mut out[..]).map_err(m)?;
        equal("c", out, [-2])
    });
    let vr = "vector_sum_repeat";
    let (f3, f4, f0) = (
        Array1::from(vec![1.0f32, 2.0, 3.0]),
        Array1::<f32>::zeros(4),
        Array1::<f32>::zeros(0),
    );
    t.refuse("vector_sum_repeat: 3 vs 4", Want::Invalid(vr), || {
        gpu.vector_sum_repeat(f3.view(), f4.view(), 1)
    });
    t.refuse("vector_sum_repeat: empty", Want::Invalid(vr), || {
        gpu.vector_sum_repeat(f0.view(), f0.view(), 1)
    });
    t.refuse("vector_sum_repeat: 2^32 vs 3", Want::Invalid(vr), || {
        gpu.vector_sum_repeat(huge1(&one, 1 << 32), f3.view(), 1)
    });
    for (case, a, b, repeats) in [
        (
            "one element",
            ArrayView1::from(&one),
            ArrayView1::from(&[0.5f32]),
            3,
        ),
        ("zero repeats", f3.view(), f3.view(), 0),
        ("negative stride", f3.slice(s![..;-1]), f3.view(), 2),
    ] {
        t.works(&format!("vector_sum_repeat: {case}"), || {
            let c = gpu.vector_sum_repeat(a, b, repeats).map_err(m)?;
            equal("c", c, vector_sum_repeat_cpu(a, b, repeats).map_err(m)?)
        });
    }
    // gufunc.
    let g = "gufunc_matmul_i64";
    let zi = |shape: &[usize]| ArrayD::<i64>::zeros(IxDyn(shape));
    let (v3, m33, m23, m45, e022, m22, b223, b335, m20, m02) = (
        zi(&[3]),
        zi(&[3, 3]),
        zi(&[2, 3]),
        zi(&[4, 5]),
        zi(&[0, 2, 2]),
        zi(&[2, 2]),
        zi(&[2, 2, 3]),
        zi(&[3, 3, 5]),
        zi(&[2, 0]),
        zi(&[0, 2]),
    );
    let ione64 = [1i64];
    for (case, a, b) in [
        ("A has 1 axis", v3.view(), m33.view()),
        ("core dimensions differ", m23.view(), m45.view()),
        ("empty batch axis", e022.view(), m22.view()),
        ("empty core axis", m20.view(), m02.view()),
        ("batch shapes do not broadcast", b223.view(), b335.view()),
        (
            "2^61 × 1 × 1 broadcast A (bytes overflow)",
            huged(&ione64, &[1 << 61, 1, 1]),
            huged(&ione64, &[1, 1]),
        ),
        (
            "batch 2^40 × 2^40 overflows",
            huged(&ione64, &[1 << 40, 1, 1, 1]),
            huged(&ione64, &[1 << 40, 1, 1]),
        ),
    ] {
        t.refuse(
            &format!("gufunc_matmul_i64: {case}"),
            Want::Invalid(g),
            || gpu.gufunc_matmul_i64(a, b),
        );
    }
    let ga = ArrayD::from_shape_fn(IxDyn(&[2, 3, 4]), |d| {
        (d[0] * 12 + d[1] * 4 + d[2]) as i64 - 9
    });
    let gb = ArrayD::from_shape_fn(IxDyn(&[4, 5]), |d| (d[0] * 5 + d[1]) as i64 % 7 - 3);
    let gt = ArrayD::from_shape_fn(IxDyn(&[5, 4]), |d| (d[0] + 3 * d[1]) as i64 % 5 - 2);
    let gt_t = gt.t();
    for (case, a, b) in [
        (
            "1 × 1 · 1 × 1",
            huged(&[i64::MAX], &[1, 1]),
            huged(&[2i64], &[1, 1]),
        ),
        ("transposed B", ga.view(), gt_t.view()),
        (
            "negative strides",
            ga.slice(s![..;-1, .., ..;-1]).into_dyn(),
            gb.slice(s![..;-1, ..]).into_dyn(),
        ),
        (
            "broadcast (zero-stride) batch",
            huged(&ione64, &[3, 2, 4]),
            gb.view(),
        ),
    ] {
        t.works(&format!("gufunc_matmul_i64: {case}"), || {
            equal(
                "C",
                gpu.gufunc_matmul_i64(a.clone(), b.clone()).map_err(m)?,
                gufunc_matmul_i64_cpu(a, b).map_err(m)?,
            )
        });
    }
    t.finish()
}
