//! Refusals of bad input without a GPU: the launch plans.
use super::*;

pub(super) fn plan_refusals() -> Result<(), Failed> {
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
