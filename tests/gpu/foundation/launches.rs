//! The launch helpers: launch overhead, the launchers' times, their refusals,
//! and launch shapes past the device's limits.
use super::*;

/// Runs alone (`hardware_alone!`): the pipelined launches queue on the
/// stream every trial shares, behind the other trials' kernels, which would
/// be timed with them (seen on 2×H200 among the other trials: 2,354
/// pipelined launches/s against 9,068 synchronous).
pub(super) fn empty_kernel_launch_rates(gpu: &Gpu) -> Result<(), Failed> {
    let r = gpu.launch_overhead(2000).map_err(fail)?;
    // Under compute-sanitizer every launch is instrumented: only check that it ran.
    let floor = if crate::common::under_sanitizer() {
        0.0
    } else {
        1000.0
    };
    ensure(
        r.synchronous_per_s > floor && r.pipelined_per_s > r.synchronous_per_s * 0.5,
        || format!("{r:?}"),
    )
}

/// The timed forms of the launchers (CUDA events; the untimed forms are
/// what the kernel-result tests use) give their result and sane times: the
/// kernel's positive, the whole call's (copies included) at least the
/// kernel's.
pub(super) fn launchers_report_their_times(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::mandelbrot::{BLOCK, MandelbrotParams, mandelbrot_cpu};
    use cuda_kernels::matrices::{MatmulKernel, check_matmul, vector_sum_repeat_cpu};
    let sane = |what: &str, kernel_ms: f32, total_ms: f32| {
        ensure(kernel_ms > 0.0 && total_ms >= kernel_ms, || {
            format!("{what}: kernel {kernel_ms} ms, with transfers {total_ms} ms")
        })
    };
    let (a, b) = multiply_inputs(1 << 20, 7);
    let (c, t) = gpu
        .multiply_timed(a.view(), b.view(), MemoryMode::Device)
        .map_err(fail)?;
    ensure(c == multiply_cpu(a.view(), b.view()).map_err(fail)?, || {
        "multiply_timed: wrong result".into()
    })?;
    sane("multiply_timed", t.kernel_ms, t.with_transfers_ms)?;
    let m = Array2::from_shape_fn((300, 200), |(i, j)| (i * 7 + j) as f32 * 1e-3);
    for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
        let (c, t) = gpu.matmul_timed(kernel, m.view(), m.t()).map_err(fail)?;
        let chk = check_matmul(c.view(), m.view(), m.t()).map_err(fail)?;
        ensure(chk.passed(), || format!("matmul_timed {kernel:?}: {chk:?}"))?;
        sane("matmul_timed", t.kernel_ms, t.with_transfers_ms)?;
    }
    let x = Array1::from_elem(10_000, 0.25f32);
    let (c, t) = gpu
        .vector_sum_repeat_timed(x.view(), x.view(), 1000)
        .map_err(fail)?;
    let want = vector_sum_repeat_cpu(x.view(), x.view(), 1000).map_err(fail)?;
    ensure(c == want, || "vector_sum_repeat_timed: wrong result".into())?;
    sane("vector_sum_repeat_timed", t.kernel_ms, t.with_transfers_ms)?;
    let p = MandelbrotParams::default();
    let lattice = p.lattice();
    let (g, t) = gpu
        .mandelbrot_timed(lattice.view(), p.max_iters, p.upper_bound, BLOCK)
        .map_err(fail)?;
    let want = mandelbrot_cpu(lattice.view(), p.max_iters, p.upper_bound).map_err(fail)?;
    ensure(g == want, || "mandelbrot_timed: wrong graph".into())?;
    sane("mandelbrot_timed", t.kernel_ms, t.with_transfers_ms)
}

pub(super) fn launch_helper_refusals() -> Result<(), Failed> {
    let mut t = Cases::new("foundation::launch_helper_refusals");
    let k = "k";
    for (case, n, block) in [
        ("grid_1d_capped: n = 0", 0, 256),
        ("grid_1d_capped: block 0", 10, 0),
        ("grid_1d_capped: block 1025", 10, 1025),
        ("grid_1d_capped: block u32::MAX", 10, u32::MAX),
    ] {
        t.refuse(case, Want::Invalid(k), || grid_1d_capped(k, n, block));
    }
    for (case, n, want) in [
        ("grid_1d_capped: n = 1", 1usize, 1u32),
        ("grid_1d_capped: n = 2^31 − 1", MAX_GRID_X as usize, 1 << 23),
        ("grid_1d_capped: n = 2^32", 1 << 32, 1 << 24),
        (
            "grid_1d_capped: n = usize::MAX caps",
            usize::MAX,
            MAX_GRID_X,
        ),
    ] {
        t.works(case, || {
            let block = if n == usize::MAX { 1 } else { 256 };
            equal(case, grid_1d_capped(k, n, block).map_err(m)?, want)
        });
    }
    for (case, extent, block, axis) in [
        (
            "grid_exact: x past 2^31 − 1 blocks",
            (MAX_GRID_X as usize + 1) * 32,
            32,
            "x",
        ),
        ("grid_exact: x at usize::MAX", usize::MAX, 1, "x"),
        ("grid_exact: y past 65,535 blocks", 65_535 * 32 + 1, 32, "y"),
        ("grid_exact: z past 65,535 blocks", 65_536, 1, "z"),
    ] {
        t.refuse(case, Want::Invalid(k), || {
            grid_exact(k, extent, block, axis)
        });
    }
    for (case, extent, block, axis, want) in [
        (
            "grid_exact: x at 2^31 − 1 blocks",
            MAX_GRID_X as usize * 32,
            32,
            "x",
            MAX_GRID_X,
        ),
        (
            "grid_exact: y at 65,535 blocks",
            65_535 * 32,
            32,
            "y",
            MAX_GRID_YZ,
        ),
        ("grid_exact: one element", 1, 32, "y", 1),
        ("grid_exact: zero elements need no block", 0, 32, "x", 0),
    ] {
        t.works(case, || {
            equal(case, grid_exact(k, extent, block, axis).map_err(m)?, want)
        });
    }
    for (case, shape) in [
        ("check_block: (0, 1, 1)", (0, 1, 1)),
        ("check_block: (1, 0, 1)", (1, 0, 1)),
        ("check_block: (1, 1, 0)", (1, 1, 0)),
        ("check_block: 1025 threads", (1025, 1, 1)),
        ("check_block: 32 × 33", (32, 33, 1)),
        ("check_block: z = 65", (1, 1, 65)),
        (
            "check_block: u32::MAX³ (overflows u32)",
            (u32::MAX, u32::MAX, u32::MAX),
        ),
        (
            "check_block: 2^16 × 2^16 (product 2^32)",
            (1 << 16, 1 << 16, 1),
        ),
    ] {
        t.refuse(case, Want::Invalid(k), || check_block(k, shape));
    }
    for (case, shape) in [
        ("check_block: (1, 1, 1)", (1, 1, 1)),
        ("check_block: 1024 threads", (1024, 1, 1)),
        ("check_block: (1, 1, 64)", (1, 1, 64)),
        ("check_block: 32 × 32", (32, 32, 1)),
    ] {
        t.works(case, || check_block(k, shape).map_err(m));
    }
    for (case, dims) in [
        ("checked_elements: usize::MAX × 2", &[usize::MAX, 2][..]),
        ("checked_elements: 2^32 × 2^32", &[1 << 32, 1 << 32]),
        ("checked_elements: 2^62 × 4", &[1 << 62, 4]),
    ] {
        t.refuse(case, Want::Invalid(k), || checked_elements(k, dims));
    }
    for (case, dims, want) in [
        ("checked_elements: no dimension", &[][..], 1usize),
        ("checked_elements: a zero", &[0, usize::MAX], 0),
        ("checked_elements: 2^31 × 2", &[1 << 31, 2], 1 << 32),
        (
            "checked_elements: 2^32 × 2^31",
            &[1 << 32, 1 << 31],
            1 << 63,
        ),
    ] {
        t.works(case, || {
            equal(case, checked_elements(k, dims).map_err(m)?, want)
        });
    }
    t.refuse("same_len: 0 vs 1", Want::Invalid(k), || {
        same_len(k, "a", 0, 1)
    });
    t.refuse("same_len: 2^32 vs 2^32 + 1", Want::Invalid(k), || {
        same_len(k, "a", 1 << 32, (1 << 32) + 1)
    });
    t.works("same_len: 0 vs 0", || same_len(k, "a", 0, 0).map_err(m));
    t.works("same_len: 1 vs 1", || same_len(k, "a", 1, 1).map_err(m));
    t.finish()
}

/// A launch shape past the device's limits (a CUDA device's own, or the
/// simulated H100's) is refused before anything runs, with the same error on
/// both backends: `Error::LaunchRefused` naming the limit, its source the
/// driver's `CUDA_ERROR_INVALID_VALUE`; the device stays usable.
fn shapes_past_the_limits() -> Vec<(&'static str, cuda_kernels::LaunchConfig)> {
    use cuda_kernels::LaunchConfig;
    vec![
        ("1025 threads per block", LaunchConfig::linear(1, 1025)),
        (
            "block z of 65",
            LaunchConfig {
                grid: (1, 1, 1),
                block: (1, 1, 65),
                shared_mem_bytes: 0,
            },
        ),
        (
            "a block of 32 x 32 x 2 threads",
            LaunchConfig {
                grid: (1, 1, 1),
                block: (32, 32, 2),
                shared_mem_bytes: 0,
            },
        ),
        ("a grid with no blocks", LaunchConfig::linear(0, 32)),
        (
            "grid y of 65536",
            LaunchConfig {
                grid: (1, 65_536, 1),
                block: (32, 1, 1),
                shared_mem_bytes: 0,
            },
        ),
        (
            "dynamic shared memory past 48 KiB",
            LaunchConfig::linear(1, 32).with_shared(48 * 1024 + 16),
        ),
    ]
}

pub(super) fn launch_shapes_past_the_limits_are_refused(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::cust::error::CudaError;
    use cuda_kernels::kernels::multiply::EMPTY_KERNEL;
    for (what, cfg) in shapes_past_the_limits() {
        // SAFETY: empty_kernel takes no arguments and touches no memory; the
        // shape is refused before anything runs.
        let r = unsafe { gpu.launch(EMPTY_KERNEL, cfg, gpu.stream(), ()) };
        match r {
            Err(Error::LaunchRefused {
                kernel,
                source: CudaError::InvalidValue,
                ..
            }) if kernel == EMPTY_KERNEL.name() => {}
            other => return Err(fail(format!("{what}: {other:?}, not LaunchRefused"))),
        }
    }
    // The limits themselves pass, and the device is still usable.
    let ok = cuda_kernels::LaunchConfig::linear(2, 1024).with_shared(48 * 1024);
    // SAFETY: as above.
    unsafe { gpu.launch(EMPTY_KERNEL, ok, gpu.stream(), ()) }.map_err(fail)?;
    gpu.synchronize(EMPTY_KERNEL.name()).map_err(fail)?;
    // Past 48 KB once the kernel is allowed it (up to the opt-in limit, and
    // not past what it was allowed), then refused again once the allowance
    // is taken back (0).
    let opt_in = gpu.launch_limits().shared_per_block_opt_in;
    let allowed = 64 * 1024;
    gpu.allow_dynamic_shared(EMPTY_KERNEL, allowed)
        .map_err(fail)?;
    let cfg = |bytes| cuda_kernels::LaunchConfig::linear(2, 256).with_shared(bytes);
    // SAFETY: as above.
    unsafe { gpu.launch(EMPTY_KERNEL, cfg(allowed), gpu.stream(), ()) }.map_err(fail)?;
    gpu.synchronize(EMPTY_KERNEL.name()).map_err(fail)?;
    for (what, bytes) in [
        ("past the allowance", allowed + 16),
        ("past the opt-in limit", opt_in + 16),
    ] {
        // SAFETY: as above.
        let r = unsafe { gpu.launch(EMPTY_KERNEL, cfg(bytes), gpu.stream(), ()) };
        ensure(matches!(r, Err(Error::LaunchRefused { .. })), || {
            format!("{what} ({bytes} bytes): {r:?}, not LaunchRefused")
        })?;
    }
    gpu.allow_dynamic_shared(EMPTY_KERNEL, 0).map_err(fail)?;
    // SAFETY: as above.
    let r = unsafe { gpu.launch(EMPTY_KERNEL, cfg(allowed), gpu.stream(), ()) };
    ensure(matches!(r, Err(Error::LaunchRefused { .. })), || {
        format!("after the allowance was taken back: {r:?}, not LaunchRefused")
    })?;
    let c = gpu
        .multiply(
            Array1::from(vec![2.0f32; 3]).view(),
            Array1::from(vec![3.0f32; 3]).view(),
        )
        .map_err(fail)?;
    ensure(c.iter().all(|&x| x == 6.0), || {
        format!("after the refusals: {c}")
    })
}
