//! Refusals of bad input by every launcher, and on a module without its
//! kernel.
use super::*;

pub(super) fn refusals(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("foundation::refusals");
    let k = "multiply";
    let (a10, a11, e) = (
        Array1::<f32>::zeros(10),
        Array1::<f32>::zeros(11),
        Array1::<f32>::zeros(0),
    );
    let one = [1.5f32];
    for mode in [MemoryMode::Device, MemoryMode::Unified] {
        let tag = format!("multiply ({mode:?})");
        t.refuse(&format!("{tag}: 10 vs 11"), Want::Invalid(k), || {
            gpu.multiply_timed(a10.view(), a11.view(), mode)
        });
        t.refuse(&format!("{tag}: empty"), Want::Invalid(k), || {
            gpu.multiply_timed(e.view(), e.view(), mode)
        });
        t.refuse(&format!("{tag}: empty vs one"), Want::Invalid(k), || {
            gpu.multiply_timed(e.view(), ArrayView1::from(&one), mode)
        });
        t.refuse(
            &format!("{tag}: 2^32 vs 1 (refused before any copy)"),
            Want::Invalid(k),
            || gpu.multiply_timed(huge1(&one, 1 << 32), ArrayView1::from(&one), mode),
        );
        t.refuse(
            &format!("{tag}: 2^32 + 1 vs 2^32"),
            Want::Invalid(k),
            || gpu.multiply_timed(huge1(&one, (1 << 32) + 1), huge1(&one, 1 << 32), mode),
        );
        t.works_on_gpu(
            gpu,
            &format!("{tag}: one element"),
            || {
                gpu.multiply_timed(
                    ArrayView1::from(&[3.0f32]),
                    ArrayView1::from(&[-0.5f32]),
                    mode,
                )
            },
            |(c, _)| equal("c", c.to_vec(), vec![-1.5]),
        );
    }
    let x: Array1<f32> = (0..301).map(|i| i as f32 * 0.25 - 7.0).collect();
    for (case, a, b) in [
        ("negative stride", x.slice(s![..;-1]), x.slice(s![..])),
        ("step 2 and step -2", x.slice(s![..;2]), x.slice(s![..;-2])),
        ("broadcast (zero stride)", huge1(&one, 301), x.view()),
    ] {
        t.works(&format!("multiply: {case}"), || {
            let c = gpu.multiply(a, b).map_err(m)?;
            equal("c", c, multiply_cpu(a, b).map_err(m)?)
        });
    }
    // On device.
    let dev = |n: usize| gpu.to_device(&vec![2.0f32; n]).map_err(m);
    let fail = crate::common::fail;
    let (d3, d4) = (dev(3).map_err(fail)?, dev(4).map_err(fail)?);
    let (mut c3, mut c4) = (dev(3).map_err(fail)?, dev(4).map_err(fail)?);
    let (d0, mut c0) = (dev(0).map_err(fail)?, dev(0).map_err(fail)?);
    t.refuse(
        "multiply_on_device: a/b lengths differ",
        Want::Invalid(k),
        || gpu.multiply_on_device(&d3, &d4, &mut c3),
    );
    t.refuse(
        "multiply_on_device: a/c lengths differ",
        Want::Invalid(k),
        || gpu.multiply_on_device(&d3, &d3, &mut c4),
    );
    t.refuse("multiply_on_device: empty", Want::Invalid(k), || {
        gpu.multiply_on_device(&d0, &d0, &mut c0)
    });
    t.works("multiply_on_device: one element", || {
        let (a, b) = (dev(1)?, dev(1)?);
        let mut c = dev(1)?;
        gpu.multiply_on_device(&a, &b, &mut c).map_err(m)?;
        gpu.synchronize(k).map_err(m)?;
        let mut out = [0.0f32];
        c.copy_to(&mut out[..]).map_err(m)?;
        equal("c", out, [4.0])
    });
    let v = "vector_sum_i32";
    let (i10, i11, ie) = (
        Array1::<i32>::zeros(10),
        Array1::<i32>::zeros(11),
        Array1::<i32>::zeros(0),
    );
    let ione = [1i32];
    t.refuse("vector_sum_i32: 10 vs 11", Want::Invalid(v), || {
        gpu.vector_sum_i32(i10.view(), i11.view())
    });
    t.refuse("vector_sum_i32: empty", Want::Invalid(v), || {
        gpu.vector_sum_i32(ie.view(), ie.view())
    });
    t.refuse("vector_sum_i32: 2^32 vs 1", Want::Invalid(v), || {
        gpu.vector_sum_i32(huge1(&ione, 1 << 32), ArrayView1::from(&ione))
    });
    t.works("vector_sum_i32: one element wraps", || {
        let r = gpu
            .vector_sum_i32(ArrayView1::from(&[i32::MAX]), ArrayView1::from(&ione))
            .map_err(m)?;
        equal("res", r.to_vec(), vec![i32::MIN])
    });
    let xi: Array1<i32> = (0..257).map(|i| i * 3 - 100).collect();
    t.works("vector_sum_i32: negative stride and step 3", || {
        let (a, b) = (xi.slice(s![..;-3]), xi.slice(s![..;3]));
        equal(
            "res",
            gpu.vector_sum_i32(a, b).map_err(m)?,
            vector_sum_i32_cpu(a, b).map_err(m)?,
        )
    });
    // hello: shapes only, plus one valid one-thread launch.
    for indexed in [false, true] {
        let name = if indexed {
            "hello_indexed"
        } else {
            "hello_kernel"
        };
        for (case, blocks, threads) in [
            ("0 blocks", 0, 1),
            ("0 threads", 1, 0),
            ("1025 threads", 1, 1025),
            ("u32::MAX threads", 1, u32::MAX),
            ("2^31 blocks", MAX_GRID_X + 1, 1),
            ("u32::MAX blocks", u32::MAX, 1),
        ] {
            t.refuse(
                &format!("hello({indexed}): {case}"),
                Want::Invalid(name),
                || gpu.hello(blocks, threads, indexed),
            );
        }
    }
    t.works("hello: one block of one thread", || {
        gpu.hello(1, 1, false).map_err(m)
    });
    // fault_test: only shapes it must refuse, on a GPU without the kernel, so
    // that a missing check gives KernelNotFound instead of a trap (on the
    // simulator, a simulator of its own: a trap there is an error).
    if let Some(other) = harmless(gpu, &mut t) {
        let f = "fault_test_kernel";
        for (case, block, thread) in [
            ("thread 1024 (block of 1025)", 0, 1024),
            ("thread u32::MAX", 0, u32::MAX),
            ("block 2^31 − 1 (grid of 2^31)", MAX_GRID_X, 0),
            ("block u32::MAX", u32::MAX, 0),
        ] {
            t.refuse(&format!("fault_test: {case}"), Want::Invalid(f), || {
                other.fault_test(block, thread)
            });
        }
    }
    let r = "block_reverse_i32";
    t.refuse("block_reverse_i32: empty", Want::Invalid(r), || {
        gpu.block_reverse_i32(ie.view())
    });
    t.refuse(
        "block_reverse_i32: (2^31 − 1) · 256 + 1 elements (refused before any copy)",
        Want::Invalid(r),
        || gpu.block_reverse_i32(huge1(&ione, MAX_GRID_X as usize * 256 + 1)),
    );
    for (case, view) in [
        ("one element", ArrayView1::from(&ione)),
        ("negative stride", xi.slice(s![..;-1])),
        ("step 2", xi.slice(s![..;2])),
    ] {
        t.works(&format!("block_reverse_i32: {case}"), || {
            equal(
                "out",
                gpu.block_reverse_i32(view).map_err(m)?,
                block_reverse_i32_cpu(view),
            )
        });
    }
    t.refuse(
        "launch_overhead: 0 launches",
        Want::Invalid("empty_kernel"),
        || gpu.launch_overhead(0),
    );
    t.works_on_gpu(
        gpu,
        "launch_overhead: 1 launch",
        || gpu.launch_overhead(1),
        |r| require(r.synchronous_per_s > 0.0, || format!("{r:?}")),
    );
    t.finish()
}

pub(super) fn module_refusals(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("foundation::module_refusals");
    t.refuse("from_ptx: empty text", Want::ModuleLoad, || {
        Gpu::from_ptx("")
    });
    t.refuse("from_ptx: corrupt text", Want::ModuleLoad, || {
        Gpu::from_ptx(PTX_GARBAGE)
    });
    t.refuse(
        "from_ptx: truncated inside the first kernel",
        Want::ModuleLoad,
        || Gpu::from_ptx(&truncated_ptx()),
    );
    t.refuse("from_ptx: PTX ISA 99.9", Want::ModuleLoad, || {
        Gpu::from_ptx(&PTX_WITHOUT_KERNEL.replace(".version 6.0", ".version 99.9"))
    });
    t.refuse("from_ptx: a NUL byte", Want::Invalid("module"), || {
        Gpu::from_ptx("a\0b")
    });
    let empty = TempFile::new("empty.ptx", b"");
    t.refuse(
        "from_ptx_file: empty file",
        Want::ModuleLoad,
        || match &empty {
            Ok(f) => Gpu::from_ptx_file(&f.0),
            Err(e) => Err(Error::invalid("test setup", e.clone())),
        },
    );
    let garbage = TempFile::new("garbage-module.ptx", PTX_GARBAGE.as_bytes());
    t.refuse(
        "from_ptx_file: corrupt file",
        Want::ModuleLoad,
        || match &garbage {
            Ok(f) => Gpu::from_ptx_file(&f.0),
            Err(e) => Err(Error::invalid("test setup", e.clone())),
        },
    );
    for name in ["", "no_such_kernel", "multiply\0", "\0"] {
        t.refuse(&format!("function({name:?})"), Want::NotFound(name), || {
            gpu.function(name).map(drop)
        });
    }
    t.works("function(\"multiply\")", || {
        gpu.function("multiply").map(drop).map_err(m)
    });
    // Every launcher on a module without its kernel: KernelNotFound, naming it.
    let Some(other) = kernel_less(&mut t) else {
        return t.finish();
    };
    let o = &other;
    let f1 = ArrayView1::from(&[1.0f32]);
    let i1 = ArrayView1::from(&[1i32]);
    let m11 = huge2(&[1.0f32], 1, 1);
    let g11 = huged(&[1i64], &[1, 1]);
    t.refuse("multiply", Want::NotFound("multiply"), || {
        o.multiply(f1, f1)
    });
    t.refuse("multiply (unified)", Want::NotFound("multiply"), || {
        o.multiply_timed(f1, f1, MemoryMode::Unified)
    });
    t.refuse("vector_sum_i32", Want::NotFound("vector_sum_i32"), || {
        o.vector_sum_i32(i1, i1)
    });
    t.refuse("launch_overhead", Want::NotFound("empty_kernel"), || {
        o.launch_overhead(1)
    });
    t.refuse("hello", Want::NotFound("hello_kernel"), || {
        o.hello(1, 1, false)
    });
    t.refuse("hello (indexed)", Want::NotFound("hello_indexed"), || {
        o.hello(1, 1, true)
    });
    t.refuse(
        "fault_test (valid shape, no kernel: no trap)",
        Want::NotFound("fault_test_kernel"),
        || o.fault_test(0, 0),
    );
    t.refuse(
        "block_reverse_i32",
        Want::NotFound("block_reverse_i32"),
        || o.block_reverse_i32(i1),
    );
    t.refuse("doubles_matrix", Want::NotFound("doubles_matrix"), || {
        o.doubles_matrix(m11)
    });
    t.refuse(
        "matrix_mul_naive",
        Want::NotFound("matrix_mul_naive"),
        || o.matrix_mul_naive(m11, m11),
    );
    // A 1 × 1 product runs on the 64² tile entry (see sgemm_choice).
    t.refuse(
        "matrix_mul_tiled (1 × 1: matrix_mul_tiled_64)",
        Want::NotFound("matrix_mul_tiled_64"),
        || o.matrix_mul_tiled(m11, m11),
    );
    t.refuse(
        "elementwise_sum (i32)",
        Want::NotFound("elementwise_sum_i32"),
        || {
            let (a, mut c) = ([1i32], Array1::<i32>::zeros(1));
            o.elementwise_sum(ArrayView1::from(&a), ArrayView1::from(&a), c.view_mut())
        },
    );
    t.refuse(
        "elementwise_saxpy (f64)",
        Want::NotFound("elementwise_saxpy_f64"),
        || {
            let mut y = Array1::<f64>::zeros(1);
            o.elementwise_saxpy(ArrayView1::from(&[1.0f64]), y.view_mut(), 2.0)
        },
    );
    t.refuse(
        "vector_sum_repeat",
        Want::NotFound("vector_sum_repeat"),
        || o.vector_sum_repeat(f1, f1, 1),
    );
    t.refuse(
        "gufunc_matmul_i64",
        Want::NotFound("gufunc_matmul_i64"),
        || o.gufunc_matmul_i64(g11.clone(), g11.clone()),
    );
    t.refuse("reduce sum f32", Want::NotFound("reduce_sum_f32"), || {
        o.reduce::<Sum, f32>(f1, None)
    });
    t.refuse("reduce max i64", Want::NotFound("reduce_max_i64"), || {
        o.reduce_slice::<Max, i64>(&[1], None)
    });
    t.refuse(
        "reduce_launch_shape",
        Want::NotFound("reduce_xor_i32"),
        || o.reduce_launch_shape::<Xor, i32>(10),
    );
    t.refuse(
        "warp_primitives_test",
        Want::NotFound("warp_shuffle_test"),
        || o.warp_primitives_test(1, 32),
    );
    t.refuse(
        "atomic_primitives_test",
        Want::NotFound("atomic_test"),
        || o.atomic_primitives_test(1),
    );
    t.refuse("load_primitives_test", Want::NotFound("load_test"), || {
        o.load_primitives_test(&[1, 2, 3, 4])
    });
    t.refuse(
        "block_reduce_test",
        Want::NotFound("block_reduce_test_i64"),
        || o.block_reduce_test(&[1; 32], 32),
    );
    t.refuse("mandelbrot", Want::NotFound(MANDEL), || {
        o.mandelbrot(f1, 10, 2.0)
    });
    t.refuse("mandelbrot_timed", Want::NotFound(MANDEL), || {
        o.mandelbrot_timed(f1, 10, 2.0, 32)
    });
    t.refuse("mandelbrot_explicit_sync", Want::NotFound(MANDEL), || {
        o.mandelbrot_explicit_sync(f1, 10, 2.0)
    });
    t.refuse("mult_ker", Want::NotFound("mult_ker"), || {
        o.mult_ker(f1, 1, 64)
    });
    t.refuse("mult_ker_events", Want::NotFound("mult_ker"), || {
        o.mult_ker_events(f1)
    });
    t.refuse("Lane::mult_ker", Want::NotFound("mult_ker"), || {
        let mut ln = Lane::<f32, 1>::from_host(o, &[1.0])?;
        ln.mult_ker(0, 1, 64)
    });
    t.refuse("Lane::conway_step", Want::NotFound("conway_ker"), || {
        let mut ln = Lane::<i32, 2>::from_host(o, &[1])?;
        ln.conway_step(1, 0, 1)
    });
    t.refuse("LifeSims::frame", Want::NotFound("conway_fast"), || {
        let mut sims = LifeSims::new(o, &[Array2::zeros((2, 2))])?;
        sims.frame()
    });
    let inputs = vec![vec![1.0f32]];
    t.refuse("SerialBatch::run", Want::NotFound("mult_ker"), || {
        SerialBatch::new(o, &inputs)?.run()
    });
    t.refuse("StreamBatch::run", Want::NotFound("mult_ker"), || {
        StreamBatch::new(o, &inputs)?.run()
    });
    t.works(
        "the kernel-less GPU still copies (reduce of nothing needs no kernel)",
        || {
            equal(
                "sum",
                o.reduce::<Sum, f64>(ArrayView1::from(&[] as &[f64]), Some(1.5))
                    .map_err(m)?,
                1.5,
            )
        },
    );
    t.works("the shared GPU still works after all this", || {
        equal("c", gpu.multiply(f1, f1).map_err(m)?.to_vec(), vec![1.0])
    });
    t.finish()
}
