//! Refusals of bad input: the CPU references' rules, every launcher.
use super::*;

/// Calls the generic function `$f::<Op, T>` for every built-in reduction
/// entry point (18).
macro_rules! every_reduction {
    ($f:ident ( $($arg:expr),* )) => {
        $f::<Sum, i32>($($arg),*);
        $f::<Sum, i64>($($arg),*);
        $f::<Sum, f32>($($arg),*);
        $f::<Sum, f64>($($arg),*);
        $f::<Product, i32>($($arg),*);
        $f::<Product, i64>($($arg),*);
        $f::<Product, f32>($($arg),*);
        $f::<Product, f64>($($arg),*);
        $f::<Min, i32>($($arg),*);
        $f::<Min, i64>($($arg),*);
        $f::<Min, f32>($($arg),*);
        $f::<Min, f64>($($arg),*);
        $f::<Max, i32>($($arg),*);
        $f::<Max, i64>($($arg),*);
        $f::<Max, f32>($($arg),*);
        $f::<Max, f64>($($arg),*);
        $f::<Xor, i32>($($arg),*);
        $f::<Xor, i64>($($arg),*);
    };
}

/// 2 cases per entry point: the CPU reference's empty-input rules.
fn reduce_cpu_cases<Op: ReduceKernel<T>, T: Elem>(t: &mut Cases) {
    let k = Op::ENTRY;
    let empty = Array1::<T>::from(vec![]);
    if Op::DEFINED_ON_EMPTY {
        t.works(&format!("{k} (CPU): empty, no init"), || {
            equal(
                "result",
                reduce_cpu::<Op, T>(empty.view(), None).map_err(m)?,
                Op::identity(),
            )
        });
    } else {
        t.refuse(
            &format!("{k} (CPU): empty, no init"),
            Want::Invalid(k),
            || reduce_cpu::<Op, T>(empty.view(), None),
        );
    }
    t.works(&format!("{k} (CPU): empty, init"), || {
        equal(
            "result",
            reduce_cpu::<Op, T>(empty.view(), Some(T::of(7))).map_err(m)?,
            T::of(7),
        )
    });
}

pub(super) fn reference_refusals() -> Result<(), Failed> {
    let mut t = Cases::new("reduce::reference_refusals");
    every_reduction!(reduce_cpu_cases(&mut t));
    t.refuse(
        "start_value: min of nothing",
        Want::Invalid("reduce_min_f32"),
        || start_value::<Min, f32>(0, None),
    );
    t.refuse(
        "start_value: max of nothing",
        Want::Invalid("reduce_max_i64"),
        || start_value::<Max, i64>(0, None),
    );
    t.works(
        "start_value: min of one element starts at the identity",
        || {
            equal(
                "start",
                start_value::<Min, i32>(1, None).map_err(m)?,
                i32::MAX,
            )
        },
    );
    t.works("start_value: init wins", || {
        equal(
            "start",
            start_value::<Max, f64>(0, Some(2.5)).map_err(m)?,
            2.5,
        )
    });
    // Strided views are reduced as viewed.
    let a = Array1::from_iter(1..=10i64);
    t.works("reduce_cpu: negative stride", || {
        equal(
            "sum",
            reduce_cpu::<Sum, i64>(a.slice(s![..;-1]), None).map_err(m)?,
            55,
        )
    });
    t.works("reduce_cpu: step 3", || {
        equal(
            "sum",
            reduce_cpu::<Sum, i64>(a.slice(s![..;3]), None).map_err(m)?,
            22,
        )
    });
    t.finish()
}

/// 7 cases per entry point.
fn reduce_gpu_cases<Op: ReduceKernel<T>, T: Elem>(gpu: &Gpu, t: &mut Cases) {
    let k = Op::ENTRY;
    let empty = Array1::<T>::from(vec![]);
    if Op::DEFINED_ON_EMPTY {
        t.works(&format!("{k}: empty, no init gives the identity"), || {
            equal(
                "result",
                gpu.reduce::<Op, T>(empty.view(), None).map_err(m)?,
                Op::identity(),
            )
        });
    } else {
        t.refuse(&format!("{k}: empty, no init"), Want::Invalid(k), || {
            gpu.reduce::<Op, T>(empty.view(), None)
        });
    }
    t.works(&format!("{k}: empty, init"), || {
        equal(
            "result",
            gpu.reduce::<Op, T>(empty.view(), Some(T::of(-3)))
                .map_err(m)?,
            T::of(-3),
        )
    });
    let one = [T::of(5)];
    t.works(&format!("{k}: one element"), || {
        let v = ArrayView1::from(&one);
        equal(
            "result",
            gpu.reduce::<Op, T>(v, None).map_err(m)?,
            reduce_cpu::<Op, T>(v, None).map_err(m)?,
        )
    });
    let vals: Vec<T> = [2, -1, 3, 1, -2, 4, 1].into_iter().map(T::of).collect();
    let arr = Array1::from(vals);
    for (case, v) in [
        ("negative stride", arr.slice(s![..;-1])),
        ("step 2", arr.slice(s![..;2])),
    ] {
        t.works(&format!("{k}: {case}"), || {
            equal(
                "result",
                gpu.reduce::<Op, T>(v, Some(T::of(1))).map_err(m)?,
                reduce_cpu::<Op, T>(v, Some(T::of(1))).map_err(m)?,
            )
        });
    }
    t.works(&format!("{k}: reduce_slice, one element and init"), || {
        equal(
            "result",
            gpu.reduce_slice::<Op, T>(&one, Some(T::of(2))).map_err(m)?,
            reduce_cpu::<Op, T>(ArrayView1::from(&one), Some(T::of(2))).map_err(m)?,
        )
    });
    t.works(&format!("{k}: reduce_device, empty device slice"), || {
        let d = gpu.to_device::<T>(&[]).map_err(m)?;
        let r = gpu.reduce_device::<Op, T>(&d, None);
        match (Op::DEFINED_ON_EMPTY, r) {
            (true, Ok(v)) => equal("result", v, Op::identity()),
            (false, Err(Error::InvalidInput { kernel, .. })) if kernel == k => Ok(()),
            (_, r) => Err(format!("got {r:?}")),
        }
    });
}

pub(super) fn refusals(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("reduce::refusals");
    every_reduction!(reduce_gpu_cases(gpu, &mut t));
    // A chosen launch shape, a scratch, and device slices.
    let k = "reduce_sum_i64";
    let mut scratch = None;
    t.works("reduce_scratch: at least one partial", || {
        let s = gpu.reduce_scratch::<i64>().map_err(m)?;
        require(s.capacity() >= 1, || "capacity 0".into())?;
        scratch = Some(s);
        Ok(())
    });
    if let Some(mut scratch) = scratch {
        let cap = scratch.capacity();
        let d = gpu.to_device(&[1i64, 2, 3]).map_err(crate::common::fail)?;
        for (case, grid, block) in [
            ("block 0", 1, 0),
            ("block 31 (not a multiple of 32)", 1, 31),
            ("block 1056", 1, 1056),
            ("block 2048", 1, 2048),
            ("grid 0", 0, 32),
            ("grid past the scratch", cap as u32 + 1, 32),
            ("grid u32::MAX", u32::MAX, 32),
        ] {
            t.refuse(
                &format!("reduce_on_device_shaped: {case}"),
                Want::Invalid(k),
                || gpu.reduce_on_device_shaped::<Sum, i64>(&d, None, &mut scratch, grid, block),
            );
        }
        let empty = gpu.to_device::<i64>(&[]).map_err(crate::common::fail)?;
        t.refuse(
            "reduce_on_device_shaped: min of an empty slice, no init",
            Want::Invalid("reduce_min_i64"),
            || gpu.reduce_on_device_shaped::<Min, i64>(&empty, None, &mut scratch, 1, 32),
        );
        t.refuse(
            "reduce_on_device: max of an empty slice, no init",
            Want::Invalid("reduce_max_i64"),
            || gpu.reduce_on_device::<Max, i64>(&empty, None, &mut scratch),
        );
        t.works("reduce_on_device_shaped: grid 1 of 32 threads", || {
            gpu.reduce_on_device_shaped::<Sum, i64>(&d, Some(10), &mut scratch, 1, 32)
                .map_err(m)?;
            equal("result", scratch.result(gpu).map_err(m)?, 16)
        });
        t.works(
            "reduce_on_device_shaped: the largest grid of 1024 threads",
            || {
                gpu.reduce_on_device_shaped::<Sum, i64>(&d, None, &mut scratch, cap as u32, 1024)
                    .map_err(m)?;
                equal("result", scratch.result(gpu).map_err(m)?, 6)
            },
        );
        t.works("reduce_on_device: a one-element sub-slice", || {
            let sub = d.index(1..2usize);
            gpu.reduce_on_device::<Product, i64>(&sub, Some(-4), &mut scratch)
                .map_err(m)?;
            equal("result", scratch.result(gpu).map_err(m)?, -8)
        });
        t.works("reduce_on_device: an empty slice with init", || {
            gpu.reduce_on_device::<Min, i64>(&empty, Some(9), &mut scratch)
                .map_err(m)?;
            equal("result", scratch.result(gpu).map_err(m)?, 9)
        });
    }
    // The device-primitive test launchers.
    let w = "warp_shuffle_test";
    for (case, blocks, threads) in [
        ("0 blocks", 0, 32),
        ("0 threads", 1, 0),
        ("33 threads", 1, 33),
        ("2048 threads", 1, 2048),
        (
            "2^31 blocks (refused before allocating)",
            MAX_GRID_X + 1,
            32,
        ),
        ("u32::MAX blocks", u32::MAX, 1024),
    ] {
        t.refuse(
            &format!("warp_primitives_test: {case}"),
            Want::Invalid(w),
            || gpu.warp_primitives_test(blocks, threads),
        );
    }
    t.works("warp_primitives_test: one warp", || {
        let r = gpu.warp_primitives_test(1, 32).map_err(m)?;
        equal("rows", (r.rows32.len(), r.rows64.len()), (8, 8))?;
        equal(
            "lane ids",
            r.rows32[4].clone(),
            (0..32).collect::<Vec<u32>>(),
        )
    });
    let a = "atomic_test";
    for (case, n) in [
        ("0 threads", 0),
        ("2^31 − 1 threads", i32::MAX as usize),
        ("usize::MAX threads", usize::MAX),
    ] {
        t.refuse(
            &format!("atomic_primitives_test: {case}"),
            Want::Invalid(a),
            || gpu.atomic_primitives_test(n),
        );
    }
    t.works("atomic_primitives_test: one thread", || {
        let r = gpu.atomic_primitives_test(1).map_err(m)?;
        equal("tickets", r.tickets.clone(), vec![0])?;
        equal("sums", (r.sum_f32, r.sum_f64, r.sum_u64), (1.0, 0.5, 0))
    });
    let l = "load_test";
    t.refuse("load_primitives_test: empty", Want::Invalid(l), || {
        gpu.load_primitives_test(&[])
    });
    t.refuse("load_primitives_test: 3 words", Want::Invalid(l), || {
        gpu.load_primitives_test(&[1, 2, 3])
    });
    t.works("load_primitives_test: one vector", || {
        let (x, y) = gpu.load_primitives_test(&[1, 2, 3, 4]).map_err(m)?;
        equal("copies", (x, y), (vec![1, 2, 3, 4], vec![1, 2, 3, 4]))
    });
    let b = "block_reduce_test_i64";
    let ones = vec![1i64; 33];
    for (case, input, tpb) in [
        ("empty", &ones[..0], 32),
        ("0 threads", &ones[..32], 0),
        ("33 threads", &ones[..], 33),
        ("33 values for blocks of 32", &ones[..], 32),
        ("2048 threads", &ones[..32], 2048),
    ] {
        t.refuse(
            &format!("block_reduce_test: {case}"),
            Want::Invalid(b),
            || gpu.block_reduce_test(input, tpb),
        );
    }
    t.works("block_reduce_test: one block of 32", || {
        let input: Vec<i64> = (1..=32).collect();
        equal(
            "sums",
            gpu.block_reduce_test(&input, 32).map_err(m)?,
            vec![528],
        )
    });
    t.finish()
}
