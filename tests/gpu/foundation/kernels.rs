//! `multiply` (device and unified memory), `vector_sum_i32`, `hello_kernel`'s
//! output, `block_reverse_i32`: against the CPU at chosen and random lengths.
use super::*;

pub(super) fn multiply_matches_cpu_exactly(gpu: &Gpu) -> Result<(), Failed> {
    let large: &[usize] = if crate::common::under_sanitizer() || crate::common::simulated(gpu) {
        &[]
    } else {
        &[1 << 24]
    };
    for &n in AWKWARD_LENGTHS.iter().chain(large) {
        let (a, b) = multiply_inputs(n, n as u64);
        let c = gpu.multiply(a.view(), b.view()).map_err(fail)?;
        let expected = multiply_cpu(a.view(), b.view()).map_err(fail)?;
        ensure(c == expected, || format!("n = {n}: GPU and CPU differ"))?;
    }
    Ok(())
}

pub(super) fn multiply_unified_matches_cpu(gpu: &Gpu) -> Result<(), Failed> {
    for &n in &[1usize, 257, 1 << 20] {
        let (a, b) = multiply_inputs(n, 7);
        let (c, t) = gpu
            .multiply_timed(a.view(), b.view(), MemoryMode::Unified)
            .map_err(fail)?;
        ensure(c == multiply_cpu(a.view(), b.view()).map_err(fail)?, || {
            format!("n = {n}")
        })?;
        ensure(
            t.kernel_ms >= 0.0 && t.with_transfers_ms >= t.kernel_ms,
            || format!("timing {t:?}"),
        )?;
    }
    Ok(())
}

pub(super) fn multiply_strided_views(gpu: &Gpu) -> Result<(), Failed> {
    let (a, b) = multiply_inputs(1001, 3);
    let (a2, b2) = (a.slice(s![..;2]), b.slice(s![..;-2]));
    let c = gpu.multiply(a2, b2).map_err(fail)?;
    ensure(c == multiply_cpu(a2, b2).map_err(fail)?, || {
        "strided views".into()
    })
}

pub(super) fn vector_sum_i32_matches_cpu(gpu: &Gpu) -> Result<(), Failed> {
    for &n in AWKWARD_LENGTHS {
        let a: Array1<i32> = (0..n as i32).map(|i| i.wrapping_mul(7919)).collect();
        let b: Array1<i32> = (0..n as i32).map(|i| i32::MAX - i).collect(); // overflows: wraps on both sides
        let r = gpu.vector_sum_i32(a.view(), b.view()).map_err(fail)?;
        ensure(
            r == vector_sum_i32_cpu(a.view(), b.view()).map_err(fail)?,
            || format!("n = {n}"),
        )?;
    }
    Ok(())
}

/// `multiply` and `vector_sum_i32` on device sub-slices that start 0..=3
/// elements into their buffers (the same offset for every array: a head up
/// to the next 128-byte line; offsets 1, 5, 9: a head up to the next
/// 16-byte boundary; disagreeing offsets: the element path), at lengths
/// 1..=33 and 2^k ± 1: exactly the CPU's results, and nothing outside the
/// output slice is written.
pub(super) fn vectorized_heads_and_tails_on_sub_slices(gpu: &Gpu) -> Result<(), Failed> {
    // Lengths up to 2^16 + 1 only: this test shares the GPU's stream with the
    // launch-rate test (gpu_matrices covers 2^20 ± 1 on the same map).
    let lengths = (1..=33usize).chain([1023, 1025, 65_535, 65_537]);
    for n in lengths {
        for offsets in [
            [0, 0, 0],
            [1, 1, 1],
            [2, 2, 2],
            [3, 3, 3],
            [1, 5, 9],
            [1, 2, 0],
            [0, 3, 1],
        ] {
            let (a, b) = multiply_inputs(n, (n + offsets[0]) as u64);
            let (a, b) = (a.to_vec(), b.to_vec());
            sub_slice_pair(
                gpu,
                "multiply",
                [&a, &b],
                offsets,
                [-7.0, -9.0],
                |a, b, c| gpu.multiply_on_device(a, b, c),
                multiply_cpu,
            )?;
            let ai: Vec<i32> = (0..n as i32).map(|i| i.wrapping_mul(7919)).collect();
            let bi: Vec<i32> = (0..n as i32).map(|i| i32::MAX - i).collect();
            sub_slice_pair(
                gpu,
                "vector_sum_i32",
                [&ai, &bi],
                offsets,
                [-7, -9],
                |a, b, c| gpu.vector_sum_i32_on_device(a, b, c),
                vector_sum_i32_cpu,
            )?;
        }
    }
    Ok(())
}

/// `launch(a, b, c)` with the inputs `host` and the output `c` as device
/// sub-slices at `offsets` into buffers padded with `pad[0]` before and
/// `pad[1]` after: `c` must equal `cpu(a, b)` exactly, and the padding stay.
fn sub_slice_pair<T>(
    gpu: &Gpu,
    kernel: &str,
    host: [&[T]; 2],
    offsets: [usize; 3],
    pad: [T; 2],
    launch: impl Fn(&DeviceSlice<T>, &DeviceSlice<T>, &mut DeviceSlice<T>) -> cuda_kernels::Result<()>,
    cpu: impl Fn(ArrayView1<T>, ArrayView1<T>) -> cuda_kernels::Result<Array1<T>>,
) -> Result<(), Failed>
where
    T: DeviceCopy + Copy + Default + PartialEq + std::fmt::Debug,
{
    let n = host[0].len();
    let what = || format!("{kernel}, n = {n}, offsets {offsets:?}");
    let padded = |v: &[T], o: usize| -> Vec<T> {
        let mut p = vec![pad[0]; o];
        p.extend_from_slice(v);
        p.extend_from_slice(&[pad[1]; 3]);
        p
    };
    let [oa, ob, oc] = offsets;
    let da = gpu.to_device(&padded(host[0], oa)).map_err(fail)?;
    let db = gpu.to_device(&padded(host[1], ob)).map_err(fail)?;
    let mut dc = gpu
        .to_device(&padded(&vec![T::default(); n], oc))
        .map_err(fail)?;
    let mut sc = dc.index_mut(oc..oc + n);
    launch(&da.index(oa..oa + n), &db.index(ob..ob + n), &mut sc).map_err(fail)?;
    gpu.synchronize("test").map_err(fail)?;
    let mut got = vec![T::default(); dc.len()];
    dc.copy_to(&mut got[..]).map_err(fail)?;
    let expected = cpu(ArrayView1::from(host[0]), ArrayView1::from(host[1])).map_err(fail)?;
    ensure(
        got[oc..oc + n] == expected.as_slice().unwrap_or(&[])[..],
        || format!("{}: GPU and CPU differ", what()),
    )?;
    ensure(
        got[..oc].iter().all(|&v| v == pad[0]) && got[oc + n..].iter().all(|&v| v == pad[1]),
        || format!("{}: wrote outside the slice", what()),
    )
}

pub(super) fn hello_prints_three_lines(gpu: &Gpu) -> Result<(), Failed> {
    let out = rerun_self(gpu, HELLO_CHILD)?;
    ensure(out.status.success(), || {
        format!("child failed: {}", String::from_utf8_lossy(&out.stderr))
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines = stdout
        .lines()
        .filter(|l| *l == "Hello World From GPU!")
        .count();
    ensure(lines == 3, || {
        format!("expected 3 hello lines, got {lines}: {stdout:?}")
    })
}

pub(super) fn shared_array_block_reverse(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::device_checks::block_reverse_i32_cpu;
    for &n in AWKWARD_LENGTHS {
        let x: Array1<i32> = (0..n as i32).collect();
        let got = gpu.block_reverse_i32(x.view()).map_err(fail)?;
        ensure(got == block_reverse_i32_cpu(x.view()), || {
            format!("n = {n}")
        })?;
    }
    Ok(())
}

/// Two equally long arrays.
struct Pair<T> {
    a: Vec<T>,
    b: Vec<T>,
}

impl<T: Debug> Debug for Pair<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a = {}, b = {}", brief(&self.a), brief(&self.b))
    }
}

fn pairs<S: Strategy + 'static>(
    len: impl Strategy<Value = usize>,
    elem: S,
) -> impl Strategy<Value = Pair<S::Value>> {
    len.prop_perturb(move |n, rng| {
        let mut d = Draw::new(rng);
        Pair {
            a: d.vec(&elem, n),
            b: d.vec(&elem, n),
        }
    })
}

/// Random length 1..5000, values in [-1000, 1000): `multiply` equals
/// `multiply_cpu` exactly (64 cases).
pub(super) fn multiply_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(64, pairs(1..5000usize, -1e3f32..1e3), |p| {
        let (a, b) = (Array1::from(p.a), Array1::from(p.b));
        let c = gpu.multiply(a.view(), b.view()).map_err(case_err)?;
        let want = multiply_cpu(a.view(), b.view()).map_err(case_err)?;
        all_same("multiply", &c, &want)
    })
}

/// Random length 1..5000, any i32 (sums wrap): `vector_sum_i32` equals its
/// CPU reference exactly (64 cases).
pub(super) fn vector_sum_i32_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(64, pairs(1..5000usize, any::<i32>()), |p| {
        let (a, b) = (Array1::from(p.a), Array1::from(p.b));
        let r = gpu.vector_sum_i32(a.view(), b.view()).map_err(case_err)?;
        let want = vector_sum_i32_cpu(a.view(), b.view()).map_err(case_err)?;
        all_same("vector_sum_i32", &r, &want)
    })
}
