//! Refusals of bad input by every launcher.
use super::*;

pub(super) fn refusals(gpu: &Gpu) -> Result<(), Failed> {
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
