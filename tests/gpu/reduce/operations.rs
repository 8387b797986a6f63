//! Every operation over every type at awkward lengths, initial values, empty
//! inputs, misaligned device slices, integer sums that wrap, strided views,
//! scratch reuse, and the user-declared `Xor`.
use super::*;

/// GPU and CPU agree exactly on `data` (with and without `init`).
fn same<Op: ReduceKernel<T>, T: Elem>(
    gpu: &Gpu,
    data: &Array1<T>,
    init: Option<T>,
) -> Result<(), Failed> {
    let got = gpu.reduce::<Op, T>(data.view(), init).map_err(fail)?;
    let expected = reduce_cpu::<Op, T>(data.view(), init).map_err(fail)?;
    ensure(got == expected, || {
        format!(
            "{} over {} elements (init {init:?}): GPU {got}, CPU {expected}",
            Op::ENTRY,
            data.len()
        )
    })
}

pub(super) fn seed_sum(gpu: &Gpu) -> Result<(), Failed> {
    let a = Array1::from_iter(1..=10_000i64);
    let got = gpu.reduce::<Sum, i64>(a.view(), None).map_err(fail)?;
    ensure(got == 50_005_000, || format!("got {got}"))
}

pub(super) fn every_op_and_type(gpu: &Gpu) -> Result<(), Failed> {
    fn for_type<T: Elem>(gpu: &Gpu, seed: u64) -> Result<(), Failed>
    where
        Sum: ReduceKernel<T>,
        Product: ReduceKernel<T>,
        Min: ReduceKernel<T>,
        Max: ReduceKernel<T>,
    {
        for n in lengths(gpu) {
            let mut d = Draw::seeded(seed ^ n as u64);
            let sums = Array1::from(d.vec(&T::sum_value(true), n));
            let prods = Array1::from(T::product_values(&mut d, n));
            let any = Array1::from(d.vec(&T::any_value(), n));
            same::<Sum, T>(gpu, &sums, None)?;
            same::<Product, T>(gpu, &prods, None)?;
            same::<Min, T>(gpu, &any, None)?;
            same::<Max, T>(gpu, &any, None)?;
        }
        Ok(())
    }
    for_type::<i32>(gpu, 1)?;
    for_type::<i64>(gpu, 2)?;
    for_type::<f32>(gpu, 3)?;
    for_type::<f64>(gpu, 4)
}

pub(super) fn initial_values(gpu: &Gpu) -> Result<(), Failed> {
    let a: Array1<i64> = Array1::from_iter(1..=1000);
    let cases = [
        (
            gpu.reduce::<Sum, i64>(a.view(), Some(-500_500))
                .map_err(fail)?,
            0,
        ),
        (
            gpu.reduce::<Max, i64>(a.view(), Some(5000)).map_err(fail)?,
            5000,
        ),
        (
            gpu.reduce::<Max, i64>(a.view(), Some(5)).map_err(fail)?,
            1000,
        ),
        (
            gpu.reduce::<Min, i64>(a.view(), Some(-1)).map_err(fail)?,
            -1,
        ),
        (
            gpu.reduce::<Product, i64>(a.slice(s![..5]), Some(2))
                .map_err(fail)?,
            240,
        ),
    ];
    for (i, (got, want)) in cases.into_iter().enumerate() {
        ensure(got == want, || format!("case {i}: {got} vs {want}"))?;
    }
    let x = Array1::from(vec![1.5f32, -2.0, 4.0]);
    same::<Sum, f32>(gpu, &x, Some(100.0))?;
    same::<Min, f32>(gpu, &x, Some(-3.0))?;
    same::<Max, f64>(gpu, &x.mapv(f64::from), Some(f64::NEG_INFINITY))
}

pub(super) fn empty_inputs(gpu: &Gpu) -> Result<(), Failed> {
    // This thread allocates through cust directly below: make the context current.
    gpu.bind().map_err(fail)?;
    let e32: Vec<f32> = Vec::new();
    ensure(
        gpu.reduce_slice::<Sum, f32>(&e32, None).map_err(fail)? == 0.0,
        || "sum of nothing".into(),
    )?;
    ensure(
        gpu.reduce_slice::<Product, f32>(&e32, None).map_err(fail)? == 1.0,
        || "product of nothing".into(),
    )?;
    ensure(
        gpu.reduce_slice::<Min, f32>(&e32, Some(7.0))
            .map_err(fail)?
            == 7.0,
        || "min with init".into(),
    )?;
    for r in [
        gpu.reduce_slice::<Min, f32>(&e32, None),
        gpu.reduce_slice::<Max, f32>(&e32, None),
    ] {
        match r {
            Err(Error::InvalidInput { kernel, .. }) if kernel.starts_with("reduce_m") => {}
            other => {
                return Err(
                    format!("min/max of nothing: expected InvalidInput, got {other:?}").into(),
                );
            }
        }
    }
    // On the device, an empty slice launches: the kernel itself returns init / identity.
    let buf = gpu.to_device(&[1i64, 2, 3]).map_err(fail)?;
    let empty = buf.index(1..1);
    ensure(
        gpu.reduce_device::<Sum, i64>(&empty, None).map_err(fail)? == 0,
        || "device sum of nothing".into(),
    )?;
    ensure(
        gpu.reduce_device::<Sum, i64>(&empty, Some(42))
            .map_err(fail)?
            == 42,
        || "device init".into(),
    )?;
    ensure(
        gpu.reduce_device::<Max, i64>(&empty, Some(-9))
            .map_err(fail)?
            == -9,
        || "device max init".into(),
    )?;
    match gpu.reduce_device::<Max, i64>(&empty, None) {
        Err(Error::InvalidInput {
            kernel: "reduce_max_i64",
            ..
        }) => Ok(()),
        other => Err(format!("device max of nothing: expected InvalidInput, got {other:?}").into()),
    }
}

pub(super) fn misaligned_device_slices(gpu: &Gpu) -> Result<(), Failed> {
    fn for_type<T: Elem>(gpu: &Gpu) -> Result<(), Failed>
    where
        Sum: ReduceKernel<T>,
        Min: ReduceKernel<T>,
    {
        gpu.bind().map_err(fail)?;
        let host: Vec<T> = Draw::seeded(99).vec(&T::sum_value(true), 100_000);
        let dev = gpu.to_device(&host).map_err(fail)?;
        for start in 0..5 {
            for len in [0usize, 1, 2, 3, 5, 6, 7, 8, 9, 63, 64, 65, 4099, 99_990] {
                let part = dev.index(start..start + len);
                let h = Array1::from(host[start..start + len].to_vec());
                let got = gpu.reduce_device::<Sum, T>(&part, None).map_err(fail)?;
                let want = reduce_cpu::<Sum, T>(h.view(), None).map_err(fail)?;
                ensure(got == want, || {
                    format!("{} sum [{start}..+{len}]: {got} vs {want}", T::NAME)
                })?;
                if len > 0 {
                    let got = gpu.reduce_device::<Min, T>(&part, None).map_err(fail)?;
                    let want = reduce_cpu::<Min, T>(h.view(), None).map_err(fail)?;
                    ensure(got == want, || {
                        format!("{} min [{start}..+{len}]: {got} vs {want}", T::NAME)
                    })?;
                }
            }
        }
        Ok(())
    }
    for_type::<i32>(gpu)?;
    for_type::<i64>(gpu)?;
    for_type::<f32>(gpu)?;
    for_type::<f64>(gpu)
}

pub(super) fn integer_sums_wrap(gpu: &Gpu) -> Result<(), Failed> {
    let a = Array1::from(vec![i32::MAX; 1001]);
    let got = gpu.reduce::<Sum, i32>(a.view(), None).map_err(fail)?;
    ensure(got == i32::MAX.wrapping_mul(1001), || format!("i32 {got}"))?;
    let b = Array1::from(vec![i64::MIN + 3; 777]);
    same::<Sum, i64>(gpu, &b, None)?;
    same::<Product, i64>(gpu, &b, Some(3))
}

pub(super) fn strided_views(gpu: &Gpu) -> Result<(), Failed> {
    let a: Array1<f64> = (0..10_001).map(|i| (i % 97) as f64).collect();
    for v in [
        a.slice(s![..;3]),
        a.slice(s![..;-2]),
        a.slice(s![5..9000;7]),
    ] {
        let got = gpu.reduce::<Sum, f64>(v, None).map_err(fail)?;
        let want = reduce_cpu::<Sum, f64>(v, None).map_err(fail)?;
        ensure(got == want, || format!("{got} vs {want}"))?;
    }
    Ok(())
}

pub(super) fn scratch_reuse(gpu: &Gpu) -> Result<(), Failed> {
    gpu.bind().map_err(fail)?;
    let mut scratch = gpu.reduce_scratch::<i32>().map_err(fail)?;
    let host: Vec<i32> = (0..3_000_000).map(|i| (i % 1000) - 500).collect();
    let dev = gpu.to_device(&host).map_err(fail)?;
    for (k, len) in [3_000_000usize, 1, 70_000, 2_999_999, 256, 0, 3_000_000]
        .into_iter()
        .enumerate()
    {
        let part = dev.index(k..k + len.min(host.len() - k));
        let want: i32 = host[k..k + part.len()]
            .iter()
            .fold(0i32, |a, &b| a.wrapping_add(b));
        for _ in 0..3 {
            gpu.reduce_on_device::<Sum, i32>(&part, None, &mut scratch)
                .map_err(fail)?;
        }
        let got = scratch.result(gpu).map_err(fail)?;
        ensure(got == want, || {
            format!("launch {k} (len {}): {got} vs {want}", part.len())
        })?;
    }
    Ok(())
}

pub(super) fn user_declared_xor(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(5);
    for n in lengths(gpu) {
        let a: Array1<i32> = (0..n).map(|_| rng.next_u64() as i32).collect();
        same::<Xor, i32>(gpu, &a, None)?;
        let b: Array1<i64> = (0..n).map(|_| rng.next_u64() as i64).collect();
        same::<Xor, i64>(gpu, &b, Some(0x5555))?;
    }
    Ok(())
}
