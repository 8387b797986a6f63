//! The mandelbrot family (K11): `mandelbrot_ker` against the CPU reference
//! (identical graphs) at chosen and random sizes and parameters, the launch
//! paths of seed 002 (PTX embedded, from a file, through the driver API, the
//! C ABI library) and seed 003's explicit synchronization giving the same
//! graph, and refusals of bad input on every path (sizes, missing, corrupt
//! and kernel-less PTX, the C ABI's status codes), without a crash and
//! without a launch.
use std::path::Path;

use cuda_kernels::dynlib::DlError;
use cuda_kernels::mandelbrot::c_abi::{CAbiError, CAbiLibrary, LIBRARY_NAME, status};
use cuda_kernels::mandelbrot::driver_api::{PtxSource, mandelbrot_driver_api};
use cuda_kernels::mandelbrot::{
    BLOCK as MANDEL_BLOCK, KERNEL as MANDEL, MAX_LATTICE_SIZE, MandelbrotParams, check_launch,
    count_inside, first_difference, linspace_f32, mandelbrot_cpu,
};
use cuda_kernels::ndarray::{Array1, Array2, ArrayView1, s};
use cuda_kernels::{Error, Gpu, PTX};
use libtest_mimic::{Completion, Failed, Trial};
use proptest::test_runner::TestCaseError;

use crate::common::{
    ensure, fail, hardware_trial, have_gpu, missing_prerequisite, sized, under_sanitizer,
};
use crate::support::cases::{Cases, Want, equal, m, require};
use crate::support::props::{case_err, check};
use crate::support::{PTX_GARBAGE, PTX_WITHOUT_KERNEL, TempFile, huge1, missing_path};
use cuda_kernels::prelude::*;

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        kernel!(matches_cpu_at_awkward_sizes),
        kernel!(matches_cpu_other_parameters),
        kernel!(matches_cpu_4096),
        kernel!(block_size_does_not_change_the_graph),
        hardware!("the driver's PTX loader", ptx_file_path_identical),
        hardware!("the raw driver-API path", driver_api_path_identical),
        kernel!(explicit_sync_path_identical),
        c_abi_gpu_test("c_abi_path_identical", c_abi_path_identical),
        kernel!(mandelbrot_agrees_with_cpu),
        cpu!(launch_refusals),
        c_abi_test("c_abi_refusals", c_abi_refusals),
        kernel!(refusals),
        hardware!("the raw driver-API path", driver_api_refusals),
        c_abi_gpu_test("c_abi_refusals_with_gpu", c_abi_refusals_with_gpu),
    ]
}

/// The C ABI library, or `None` when it is not built.
fn open_library() -> Result<Option<CAbiLibrary>, Failed> {
    match CAbiLibrary::find() {
        None => Ok(None),
        Some(path) => CAbiLibrary::open(&path).map(Some).map_err(fail),
    }
}

/// The library is not built: ignored on a developer's machine, a failure
/// in CI and in the packed GPU run ([`missing_prerequisite`]).
fn library_missing() -> Result<Completion, Failed> {
    missing_prerequisite(format!(
        "{LIBRARY_NAME} not found (build it: cargo build -p cuda-kernels-capi)"
    ))
}

/// A test of the C ABI library that needs no GPU: ignored when the library
/// is not built.
fn c_abi_test(name: &str, body: fn(&CAbiLibrary) -> Result<(), Failed>) -> Trial {
    Trial::ignorable_test(
        crate::test_name(module_path!(), name),
        move || match open_library()? {
            None => library_missing(),
            Some(lib) => body(&lib).map(|()| Completion::Completed),
        },
    )
    .with_kind("cpu")
}

/// A hardware-only test of the C ABI library (see
/// `common::hardware_trial`): ignored when the library is not built.
fn c_abi_gpu_test(name: &str, body: fn(&Gpu, &CAbiLibrary) -> Result<(), Failed>) -> Trial {
    hardware_trial(
        crate::test_name(module_path!(), name),
        "the C ABI",
        move |gpu| match open_library()? {
            None => library_missing(),
            Some(lib) => body(gpu, &lib).map(|()| Completion::Completed),
        },
    )
}

// ---------------------------------------------------------------------------
// Correctness.

fn same_graph(what: &str, got: &Array2<f32>, expected: &Array2<f32>) -> Result<(), Failed> {
    match first_difference(got.view(), expected.view()) {
        None => Ok(()),
        Some(d) => Err(format!("{what}: differs at {d}").into()),
    }
}

/// The graph of `mandelbrot_ker` launched with blocks of `block` threads,
/// untimed, on either backend (through `mandelbrot_on_device`).
fn graph_with_block(
    gpu: &Gpu,
    lattice: ArrayView1<f32>,
    max_iters: i32,
    upper_bound: f32,
    block: u32,
) -> cuda_kernels::Result<Array2<f32>> {
    let n = lattice.len();
    let d_lattice = gpu.to_device(&lattice.to_vec())?;
    let mut d_graph = gpu.zeroed::<f32>(n * n)?;
    gpu.mandelbrot_on_device(&d_lattice, &mut d_graph, max_iters, upper_bound, block)?;
    gpu.synchronize(MANDEL)?;
    let mut graph = vec![0.0f32; n * n];
    d_graph.copy_to(&mut graph[..])?;
    Array2::from_shape_vec((n, n), graph).map_err(|e| Error::invalid(MANDEL, e.to_string()))
}

fn seed_params() -> (Array1<f32>, Array2<f32>) {
    let p = MandelbrotParams::default();
    let lattice = p.lattice();
    let expected = mandelbrot_cpu(lattice.view(), p.max_iters, p.upper_bound).expect("valid");
    (lattice, expected)
}

fn matches_cpu_at_awkward_sizes(gpu: &Gpu) -> Result<(), Failed> {
    for n in [1usize, 2, 3, 31, 32, 33, 181, 512, 1000] {
        let lattice = linspace_f32(-2.0, 2.0, n);
        let g = gpu.mandelbrot(lattice.view(), 256, 2.0).map_err(fail)?;
        let c = mandelbrot_cpu(lattice.view(), 256, 2.0).map_err(fail)?;
        same_graph(&format!("n = {n}"), &g, &c)?;
    }
    Ok(())
}

fn matches_cpu_other_parameters(gpu: &Gpu) -> Result<(), Failed> {
    for (low, high, n, iters, ub) in [
        (-2.0f32, 2.0f32, 300usize, 0i32, 2.0f32),
        (-2.0, 2.0, 300, 1, 2.0),
        (-2.0, 2.0, 300, 3, 2.0),
        (-1.5, 0.5, 400, 1000, 2.0),
        (-2.0, 2.0, 257, 256, 0.5),
        (-2.0, 2.0, 257, 256, 1e20),
        (-0.75, -0.74, 256, 5000, 2.0),
    ] {
        let lattice = linspace_f32(low, high, n);
        let g = gpu.mandelbrot(lattice.view(), iters, ub).map_err(fail)?;
        let c = mandelbrot_cpu(lattice.view(), iters, ub).map_err(fail)?;
        same_graph(
            &format!("[{low}, {high}] n={n} iters={iters} ub={ub}"),
            &g,
            &c,
        )?;
    }
    let lattice = linspace_f32(-2.0, 2.0, 64);
    let g = gpu.mandelbrot(lattice.view(), 0, 2.0).map_err(fail)?;
    ensure(count_inside(g.view()) == 64 * 64, || {
        "0 iterations: all inside".into()
    })
}

fn matches_cpu_4096(gpu: &Gpu) -> Result<(), Failed> {
    // 1024 under compute-sanitizer (the harness's convention for the largest
    // sizes), 513 on the simulator.
    let breadth = sized(gpu, if under_sanitizer() { 1024 } else { 4096 }, 513);
    let p = MandelbrotParams {
        breadth,
        ..MandelbrotParams::default()
    };
    let lattice = p.lattice();
    let g = gpu
        .mandelbrot(lattice.view(), p.max_iters, p.upper_bound)
        .map_err(fail)?;
    let c = mandelbrot_cpu(lattice.view(), p.max_iters, p.upper_bound).map_err(fail)?;
    same_graph(&format!("{breadth}×{breadth}"), &g, &c)
}

fn block_size_does_not_change_the_graph(gpu: &Gpu) -> Result<(), Failed> {
    let (lattice, expected) = seed_params();
    for block in [1u32, 32, 100, 256, 1024] {
        let g = graph_with_block(gpu, lattice.view(), 256, 2.0, block).map_err(fail)?;
        same_graph(&format!("block {block}"), &g, &expected)?;
    }
    Ok(())
}

fn ptx_file_path_identical(_gpu: &Gpu) -> Result<(), Failed> {
    let (lattice, expected) = seed_params();
    let file = TempFile::new("kernels.ptx", PTX.as_bytes())?;
    let from_file = Gpu::from_ptx_file(&file.0).map_err(fail)?;
    let g = from_file
        .mandelbrot(lattice.view(), 256, 2.0)
        .map_err(fail)?;
    same_graph("PTX from a file", &g, &expected)
}

fn driver_api_path_identical(gpu: &Gpu) -> Result<(), Failed> {
    let (lattice, expected) = seed_params();
    let file = TempFile::new("driver.ptx", PTX.as_bytes())?;
    let g =
        mandelbrot_driver_api(PtxSource::File(&file.0), lattice.view(), 256, 2.0).map_err(fail)?;
    same_graph("driver API, cuModuleLoad", &g, &expected)?;
    let g = mandelbrot_driver_api(PtxSource::Text(cuda_kernels::PTX), lattice.view(), 256, 2.0)
        .map_err(fail)?;
    same_graph("driver API, cuModuleLoadData", &g, &expected)?;
    // The driver-API path created and destroyed its own context: the shared
    // GPU's context still works afterwards.
    let g = gpu.mandelbrot(lattice.view(), 256, 2.0).map_err(fail)?;
    same_graph("high-level after the driver API", &g, &expected)
}

fn explicit_sync_path_identical(gpu: &Gpu) -> Result<(), Failed> {
    let (lattice, expected) = seed_params();
    let g = gpu
        .mandelbrot_explicit_sync(lattice.view(), 256, 2.0)
        .map_err(fail)?;
    same_graph("explicit context synchronization", &g, &expected)?;
    let small = linspace_f32(-2.0, 2.0, 33);
    let g = gpu
        .mandelbrot_explicit_sync(small.view(), 100, 2.0)
        .map_err(fail)?;
    same_graph(
        "explicit sync, 33",
        &g,
        &mandelbrot_cpu(small.view(), 100, 2.0).map_err(fail)?,
    )
}

fn c_abi_path_identical(gpu: &Gpu, lib: &CAbiLibrary) -> Result<(), Failed> {
    let (lattice, expected) = seed_params();
    let g = lib.mandelbrot(lattice.view(), 256, 2.0).map_err(fail)?;
    same_graph("C ABI", &g, &expected)?;
    let g2 = lib.mandelbrot(lattice.view(), 256, 2.0).map_err(fail)?;
    same_graph("C ABI, second call", &g2, &expected)?;
    lib.hello().map_err(fail)?;
    let g = gpu.mandelbrot(lattice.view(), 256, 2.0).map_err(fail)?;
    same_graph("high-level after the C ABI", &g, &expected)
}

// ---------------------------------------------------------------------------
// Properties.

/// Random breadth 1..=200, max_iters 1..=300, low and high in [-2.5, 2.5)
/// (either order), escape radius in [0.5, 4), block 1..=1024: the graph of
/// `mandelbrot` (the seed's blocks of 32) and of `mandelbrot_on_device`
/// (that block) equal `mandelbrot_cpu` bit for bit (32 cases).
fn mandelbrot_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    let params = (
        1..=200usize,
        1..=300i32,
        -2.5f32..2.5,
        -2.5f32..2.5,
        0.5f32..4.0,
        1..=1024u32,
    );
    check(32, params, |(n, iters, low, high, bound, block)| {
        let lattice = linspace_f32(low, high, n);
        let want = mandelbrot_cpu(lattice.view(), iters, bound).map_err(case_err)?;
        let got = gpu
            .mandelbrot(lattice.view(), iters, bound)
            .map_err(case_err)?;
        if let Some(d) = first_difference(got.view(), want.view()) {
            return Err(TestCaseError::fail(format!("mandelbrot: {d}")));
        }
        let got = graph_with_block(gpu, lattice.view(), iters, bound, block).map_err(case_err)?;
        if let Some(d) = first_difference(got.view(), want.view()) {
            return Err(TestCaseError::fail(format!("block {block}: {d}")));
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------
// Refusals.

fn launch_refusals() -> Result<(), Failed> {
    let mut t = Cases::new("mandelbrot::launch_refusals");
    for (case, size, iters, block) in [
        ("empty lattice", 0, 256, 32),
        (
            "46,341 points (size² overflows i32)",
            MAX_LATTICE_SIZE + 1,
            256,
            32,
        ),
        ("2^31 points", 1 << 31, 256, 32),
        ("2^32 points", 1 << 32, 256, 32),
        ("usize::MAX points", usize::MAX, 256, 32),
        ("max_iters = -1", 4, -1, 32),
        ("max_iters = i32::MIN", 4, i32::MIN, 32),
        ("block 0", 4, 256, 0),
        ("block 1025", 4, 256, 1025),
    ] {
        t.refuse(
            &format!("check_launch: {case}"),
            Want::Invalid(MANDEL),
            || check_launch(MANDEL, size, iters, 2.0, block),
        );
    }
    t.works("check_launch: 46,340 points (the largest)", || {
        let l = check_launch(MANDEL, MAX_LATTICE_SIZE, 1, 2.0, 1).map_err(m)?;
        require(l.grid as usize * l.block as usize >= l.points, || {
            format!("grid {} does not cover {}", l.grid, l.points)
        })
    });
    t.works("check_launch: one point, block 1024", || {
        equal(
            "grid",
            check_launch(MANDEL, 1, 0, 2.0, 1024).map_err(m)?.grid,
            1,
        )
    });
    let one = [0.0f32];
    let cpu = "mandelbrot (CPU)";
    t.refuse("mandelbrot_cpu: empty", Want::Invalid(cpu), || {
        mandelbrot_cpu(Array1::<f32>::zeros(0).view(), 256, 2.0)
    });
    t.refuse(
        "mandelbrot_cpu: 2^32-point broadcast lattice",
        Want::Invalid(cpu),
        || mandelbrot_cpu(huge1(&one, 1 << 32), 256, 2.0),
    );
    t.works("mandelbrot_cpu: one point", || {
        let g = mandelbrot_cpu(ArrayView1::from(&[0.0f32]), 10, 2.0).map_err(m)?;
        equal("graph", g, Array2::from_elem((1, 1), 1.0))
    });
    // The driver-API path checks everything before its first driver call:
    // these are refused with or without a GPU.
    let d = "mandelbrot_ker (driver API)";
    let lattice = linspace_f32(-2.0, 2.0, 4);
    let empty = Array1::<f32>::zeros(0);
    let text = PtxSource::Text(PTX);
    for (case, l, iters) in [
        ("empty lattice", empty.view(), 256),
        ("46,341 points", huge1(&one, MAX_LATTICE_SIZE + 1), 256),
        ("2^31 points", huge1(&one, 1 << 31), 256),
        ("2^32 points", huge1(&one, 1 << 32), 256),
        ("max_iters = -1", lattice.view(), -1),
    ] {
        t.refuse(&format!("driver API: {case}"), Want::Invalid(d), || {
            mandelbrot_driver_api(text, l, iters, 2.0)
        });
    }
    t.refuse("driver API: PTX text with a NUL", Want::Invalid(d), || {
        mandelbrot_driver_api(PtxSource::Text("a\0b"), lattice.view(), 256, 2.0)
    });
    let missing = missing_path();
    t.refuse("driver API: missing PTX file", Want::PtxFile, || {
        mandelbrot_driver_api(PtxSource::File(&missing), lattice.view(), 256, 2.0)
    });
    t.refuse("driver API: PTX path with a NUL", Want::PtxFile, || {
        mandelbrot_driver_api(
            PtxSource::File(Path::new("/tmp/a\0b.ptx")),
            lattice.view(),
            256,
            2.0,
        )
    });
    t.refuse(
        "driver API: bad size wins over a missing file",
        Want::Invalid(d),
        || mandelbrot_driver_api(PtxSource::File(&missing), Array1::zeros(0).view(), 256, 2.0),
    );
    t.works("linspace_f32: one point is [low]", || {
        equal("lattice", linspace_f32(-2.0, 2.0, 1).to_vec(), vec![-2.0])
    });
    t.finish()
}

/// The C ABI's status for a case that the library must refuse.
fn c_status(t: &mut Cases, lib: &CAbiLibrary, case: &str, want: i32, call: impl FnOnce() -> i32) {
    t.works(case, || {
        let code = call();
        equal("status", code, want)?;
        require(!lib.last_error().is_empty(), || "no message".into())
    });
}

fn c_abi_refusals(lib: &CAbiLibrary) -> Result<(), Failed> {
    let mut t = Cases::new("mandelbrot::c_abi_refusals");
    // (The header's status codes are checked by the capi crate's unit test.)
    let lattice = [0.0f32; 4];
    let mut graph = [7.0f32; 16];
    let (l, g) = (lattice.as_ptr(), graph.as_mut_ptr());
    let (null_l, null_g) = (std::ptr::null::<f32>(), std::ptr::null_mut::<f32>());
    // A pointer one byte into the graph: not aligned for float.
    let odd_g = g.cast::<u8>().wrapping_add(1).cast::<f32>();
    let odd_l = lattice.as_ptr().cast::<u8>().wrapping_add(1).cast::<f32>();
    for (case, (lp, gp, iters, size), want) in [
        ("null lattice", (null_l, g, 256, 4), status::NULL_POINTER),
        ("null graph", (l, null_g, 256, 4), status::NULL_POINTER),
        ("both null", (null_l, null_g, 256, 4), status::NULL_POINTER),
        (
            "null lattice and size 0 (null wins)",
            (null_l, g, 256, 0),
            status::NULL_POINTER,
        ),
        ("size 0", (l, g, 256, 0), status::BAD_SIZE),
        ("size -1", (l, g, 256, -1), status::BAD_SIZE),
        ("size i32::MIN", (l, g, 256, i32::MIN), status::BAD_SIZE),
        (
            "size 46,341 (size² overflows int)",
            (l, g, 256, 46_341),
            status::BAD_SIZE,
        ),
        (
            "size 65,536 (size² = 2^32)",
            (l, g, 256, 65_536),
            status::BAD_SIZE,
        ),
        ("size i32::MAX", (l, g, 256, i32::MAX), status::BAD_SIZE),
        ("max_iters -1", (l, g, -1, 4), status::BAD_ARGUMENT),
        (
            "max_iters i32::MIN",
            (l, g, i32::MIN, 4),
            status::BAD_ARGUMENT,
        ),
        ("graph misaligned", (l, odd_g, 256, 2), status::BAD_ARGUMENT),
        (
            "lattice misaligned",
            (odd_l, g, 256, 2),
            status::BAD_ARGUMENT,
        ),
        (
            "lattice inside the graph",
            (g.wrapping_add(2).cast_const(), g, 256, 2),
            status::BAD_ARGUMENT,
        ),
        (
            "graph overlaps the lattice's end",
            (g.cast_const(), g.wrapping_add(1), 256, 2),
            status::BAD_ARGUMENT,
        ),
    ] {
        c_status(
            &mut t,
            lib,
            &format!("launch_mandelbrot: {case}"),
            want,
            || {
                // SAFETY: every non-null pointer is valid for what the size asks, or the
                // call is refused before any access (which is what this case checks).
                unsafe { lib.launch_mandelbrot_raw(lp, gp, iters, 2.0, size) }
            },
        );
    }
    t.works("refused calls wrote nothing", || {
        require(graph == [7.0; 16], || format!("graph is now {graph:?}"))
    });
    let one = [0.0f32];
    let status_of = |r: Result<_, CAbiError>| match r {
        Err(CAbiError::Status { status, .. }) => Ok(status),
        Err(e) => Err(format!("expected a status, got {e}")),
        Ok(_) => Err("accepted".to_string()),
    };
    t.works("CAbiLibrary::mandelbrot: empty lattice is BAD_SIZE", || {
        equal(
            "status",
            status_of(lib.mandelbrot(Array1::zeros(0).view(), 256, 2.0))?,
            status::BAD_SIZE,
        )
    });
    t.works(
        "CAbiLibrary::mandelbrot: max_iters -1 is BAD_ARGUMENT",
        || {
            equal(
                "status",
                status_of(lib.mandelbrot(ArrayView1::from(&one), -1, 2.0))?,
                status::BAD_ARGUMENT,
            )
        },
    );
    for (case, n) in [
        ("46,341 points", MAX_LATTICE_SIZE + 1),
        ("2^31 points", 1 << 31),
        ("2^32 points", 1 << 32),
    ] {
        t.works(
            &format!("CAbiLibrary::mandelbrot: {case} refused before any copy"),
            || match lib.mandelbrot(huge1(&one, n), 256, 2.0) {
                Err(CAbiError::Invalid(_)) => Ok(()),
                Err(e) => Err(format!("expected Invalid, got {e}")),
                Ok(_) => Err("accepted".into()),
            },
        );
    }
    t.works("a valid call: OK with a GPU, NO_GPU without", || {
        let lattice = [0.0f32; 2];
        let mut graph = [7.0f32; 4];
        // SAFETY: valid for 2 and 4 floats.
        let code =
            unsafe { lib.launch_mandelbrot_raw(lattice.as_ptr(), graph.as_mut_ptr(), 10, 2.0, 2) };
        equal(
            "status",
            code,
            if have_gpu() {
                status::OK
            } else {
                status::NO_GPU
            },
        )
    });
    let missing = missing_path();
    t.works(
        "CAbiLibrary::open: missing file is a Load error",
        || match CAbiLibrary::open(&missing) {
            Err(CAbiError::Load(DlError::Load { .. })) => Ok(()),
            Err(e) => Err(format!("expected Load, got {e}")),
            Ok(_) => Err("opened".into()),
        },
    );
    t.works("CAbiLibrary::open: a text file is a Load error", || {
        let f = TempFile::new("not-a-library.so", b"not an ELF file")?;
        match CAbiLibrary::open(&f.0) {
            Err(CAbiError::Load(DlError::Load { .. })) => Ok(()),
            Err(e) => Err(format!("expected Load, got {e}")),
            Ok(_) => Err("opened".into()),
        }
    });
    t.works(
        "CAbiLibrary::open: a path with a NUL is a Load error",
        || match CAbiLibrary::open("/tmp/a\0b.so") {
            Err(CAbiError::Load(DlError::Load { .. })) => Ok(()),
            Err(e) => Err(format!("expected Load, got {e}")),
            Ok(_) => Err("opened".into()),
        },
    );
    t.finish()
}

fn refusals(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("mandelbrot::refusals");
    let one = [0.0f32];
    let empty = Array1::<f32>::zeros(0);
    let over = Array1::<f32>::zeros(MAX_LATTICE_SIZE + 1);
    let ok = linspace_f32(-2.0, 2.0, 8);
    let bad: [(&str, ArrayView1<f32>, i32); 6] = [
        ("empty lattice", empty.view(), 256),
        ("46,341 points", over.view(), 256),
        ("2^31 points (broadcast)", huge1(&one, 1 << 31), 256),
        ("2^32 points (broadcast)", huge1(&one, 1 << 32), 256),
        ("max_iters -1", ok.view(), -1),
        ("max_iters i32::MIN", ok.view(), i32::MIN),
    ];
    let sync = "mandelbrot_ker (explicit sync)";
    let driver = "mandelbrot_ker (driver API)";
    for (case, l, iters) in bad {
        t.refuse(
            &format!("mandelbrot: {case}"),
            Want::Invalid(MANDEL),
            || gpu.mandelbrot(l, iters, 2.0),
        );
        t.refuse(
            &format!("mandelbrot_timed: {case}"),
            Want::Invalid(MANDEL),
            || gpu.mandelbrot_timed(l, iters, 2.0, MANDEL_BLOCK),
        );
        t.refuse(
            &format!("mandelbrot_explicit_sync: {case}"),
            Want::Invalid(sync),
            || gpu.mandelbrot_explicit_sync(l, iters, 2.0),
        );
        t.refuse(
            &format!("driver API: {case}"),
            Want::Invalid(driver),
            || mandelbrot_driver_api(PtxSource::Text(PTX), l, iters, 2.0),
        );
    }
    for block in [0, 1025] {
        t.refuse(
            &format!("mandelbrot_timed: block {block}"),
            Want::Invalid(MANDEL),
            || gpu.mandelbrot_timed(ok.view(), 256, 2.0, block),
        );
    }
    let oks = ok.as_slice().unwrap_or(&[]);
    let overs = over.as_slice().unwrap_or(&[]);
    for (case, lattice, len) in [
        ("graph one short", oks, 63),
        ("graph one long", oks, 65),
        ("empty graph", oks, 0),
        ("empty lattice", &[][..], 0),
        ("46,341 points, empty graph", overs, 0),
    ] {
        t.refuse(
            &format!("mandelbrot_into: {case}"),
            Want::Invalid(MANDEL),
            || gpu.mandelbrot_into(lattice, &mut vec![0.0; len], 256, 2.0),
        );
    }
    let fail = crate::common::fail;
    let dl = gpu.to_device(oks).map_err(fail)?;
    let dover = gpu.to_device(overs).map_err(fail)?;
    let d0 = gpu.to_device::<f32>(&[]).map_err(fail)?;
    let mut g63 = gpu.to_device(&[0.0f32; 63]).map_err(fail)?;
    let mut g64 = gpu.to_device(&[0.0f32; 64]).map_err(fail)?;
    for (case, lattice, short, iters, block) in [
        ("graph one short", &dl, true, 256, 32),
        ("empty lattice", &d0, false, 256, 32),
        ("46,341 points", &dover, false, 256, 32),
        ("block 0", &dl, false, 256, 0),
        ("block 2048", &dl, false, 256, 2048),
        ("max_iters -1", &dl, false, -1, 32),
    ] {
        let graph = if short { &mut g63 } else { &mut g64 };
        t.refuse(
            &format!("mandelbrot_on_device: {case}"),
            Want::Invalid(MANDEL),
            || gpu.mandelbrot_on_device(lattice, graph, iters, 2.0, block),
        );
    }
    // What must work, on every path, against the CPU reference.
    let wide = linspace_f32(-2.0, 1.0, 37);
    let goods: [(&str, ArrayView1<f32>, i32); 5] = [
        ("one point", ArrayView1::from(&one), 256),
        ("one point, 0 iterations", ArrayView1::from(&[5.0f32]), 0),
        ("negative stride", wide.slice(s![..;-1]), 100),
        ("step 3", wide.slice(s![..;3]), 100),
        ("broadcast (zero stride)", huge1(&[-1.0f32], 5), 50),
    ];
    for (case, l, iters) in goods {
        let want = match mandelbrot_cpu(l, iters, 2.0) {
            Ok(w) => w,
            Err(e) => {
                t.works(case, || Err(format!("CPU reference: {e}")));
                continue;
            }
        };
        t.works(&format!("mandelbrot: {case}"), || {
            equal(
                "graph",
                gpu.mandelbrot(l, iters, 2.0).map_err(m)?,
                want.clone(),
            )
        });
        t.works_on_gpu(
            gpu,
            &format!("mandelbrot_timed (block 1): {case}"),
            || gpu.mandelbrot_timed(l, iters, 2.0, 1),
            |(g, _)| equal("graph", g, want.clone()),
        );
        t.works(&format!("mandelbrot_explicit_sync: {case}"), || {
            equal(
                "graph",
                gpu.mandelbrot_explicit_sync(l, iters, 2.0).map_err(m)?,
                want.clone(),
            )
        });
    }
    t.works("mandelbrot_into: one point", || {
        let mut g = [7.0f32];
        gpu.mandelbrot_into(&[0.0], &mut g, 10, 2.0).map_err(m)?;
        let want = mandelbrot_cpu(ArrayView1::from(&[0.0f32]), 10, 2.0).map_err(m)?;
        equal(
            "graph",
            g.to_vec(),
            want.iter().copied().collect::<Vec<f32>>(),
        )
    });
    t.works("mandelbrot_on_device: one point, block 1024", || {
        let dl = gpu.to_device(&[1.0f32]).map_err(m)?;
        let mut dg = gpu.to_device(&[7.0f32]).map_err(m)?;
        gpu.mandelbrot_on_device(&dl, &mut dg, 10, 2.0, 1024)
            .map_err(m)?;
        gpu.synchronize(MANDEL).map_err(m)?;
        let mut g = [0.0f32];
        dg.copy_to(&mut g[..]).map_err(m)?;
        let want = mandelbrot_cpu(ArrayView1::from(&[1.0f32]), 10, 2.0).map_err(m)?;
        equal(
            "graph",
            g.to_vec(),
            want.iter().copied().collect::<Vec<f32>>(),
        )
    });
    t.finish()
}

/// PTX files and the driver API's own loading: what must work, and what the
/// driver must refuse.
fn driver_api_refusals(_gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("mandelbrot::driver_api_refusals");
    let one = [0.0f32];
    let wide = linspace_f32(-2.0, 1.0, 37);
    let one_point = ArrayView1::from(&one);
    let want1 = Array2::from_elem((1, 1), 1.0f32);
    match TempFile::new("kernels.ptx", PTX.as_bytes()) {
        Ok(file) => {
            t.works("from_ptx_file + mandelbrot: one point", || {
                let g2 = Gpu::from_ptx_file(&file.0).map_err(m)?;
                equal(
                    "graph",
                    g2.mandelbrot(one_point, 10, 2.0).map_err(m)?,
                    want1.clone(),
                )
            });
            t.works("driver API (file): one point", || {
                equal(
                    "graph",
                    mandelbrot_driver_api(PtxSource::File(&file.0), one_point, 10, 2.0)
                        .map_err(m)?,
                    want1.clone(),
                )
            });
        }
        Err(e) => t.works("writing the PTX file", || Err(e)),
    }
    t.works("driver API (text): negative-stride lattice", || {
        let l = wide.slice(s![..;-4]);
        equal(
            "graph",
            mandelbrot_driver_api(PtxSource::Text(PTX), l, 50, 2.0).map_err(m)?,
            mandelbrot_cpu(l, 50, 2.0).map_err(m)?,
        )
    });
    t.refuse("driver API: empty PTX text", Want::ModuleLoad, || {
        mandelbrot_driver_api(PtxSource::Text(""), one_point, 10, 2.0)
    });
    t.refuse("driver API: corrupt PTX text", Want::ModuleLoad, || {
        mandelbrot_driver_api(PtxSource::Text(PTX_GARBAGE), one_point, 10, 2.0)
    });
    t.refuse(
        "driver API: PTX without mandelbrot_ker",
        Want::NotFound(MANDEL),
        || mandelbrot_driver_api(PtxSource::Text(PTX_WITHOUT_KERNEL), one_point, 10, 2.0),
    );
    let garbage = TempFile::new("garbage.ptx", PTX_GARBAGE.as_bytes());
    t.refuse(
        "driver API: corrupt PTX file",
        Want::ModuleLoad,
        || match &garbage {
            Ok(f) => mandelbrot_driver_api(PtxSource::File(&f.0), one_point, 10, 2.0),
            Err(e) => Err(Error::invalid("test setup", e.clone())),
        },
    );
    t.works(
        "driver API: a corrupt PTX file's error names its target",
        || {
            let f = garbage.as_ref().map_err(|e| e.clone())?;
            match mandelbrot_driver_api(PtxSource::File(&f.0), one_point, 10, 2.0) {
                Err(Error::ModuleLoad { details, .. }) => {
                    require(details.contains("sm_70"), || details.clone())
                }
                r => Err(format!("expected ModuleLoad, got {r:?}")),
            }
        },
    );
    t.refuse(
        "driver API: a directory as the PTX file",
        Want::ModuleLoad,
        || mandelbrot_driver_api(PtxSource::File(&std::env::temp_dir()), one_point, 10, 2.0),
    );
    t.refuse("driver API: missing PTX file", Want::PtxFile, || {
        mandelbrot_driver_api(PtxSource::File(&missing_path()), one_point, 10, 2.0)
    });
    t.finish()
}

fn c_abi_refusals_with_gpu(_gpu: &Gpu, lib: &CAbiLibrary) -> Result<(), Failed> {
    let mut t = Cases::new("mandelbrot::c_abi_refusals_with_gpu");
    let wide = linspace_f32(-2.0, 1.0, 21);
    for (case, l, iters) in [
        ("one point", ArrayView1::from(&[0.0f32]), 10),
        ("one point outside", ArrayView1::from(&[1.0f32]), 10),
        ("two points", ArrayView1::from(&[-1.0f32, 0.25]), 100),
        ("negative stride", wide.slice(s![..;-1]), 100),
        ("step 2", wide.slice(s![..;2]), 100),
        ("0 iterations", wide.view(), 0),
    ] {
        t.works(&format!("CAbiLibrary::mandelbrot: {case}"), || {
            equal(
                "graph",
                lib.mandelbrot(l, iters, 2.0).map_err(m)?,
                mandelbrot_cpu(l, iters, 2.0).map_err(m)?,
            )
        });
    }
    // With the library's GPU open, refusals still come before it, and the
    // library stays usable.
    let lattice = [0.0f32; 2];
    let mut graph = [7.0f32; 4];
    let (l, g) = (lattice.as_ptr(), graph.as_mut_ptr());
    for (case, (lp, gp, iters, size), want) in [
        (
            "null graph",
            (l, std::ptr::null_mut(), 10, 2),
            status::NULL_POINTER,
        ),
        ("size 46,341", (l, g, 10, 46_341), status::BAD_SIZE),
        ("size -2", (l, g, 10, -2), status::BAD_SIZE),
        ("max_iters -1", (l, g, -1, 2), status::BAD_ARGUMENT),
    ] {
        c_status(
            &mut t,
            lib,
            &format!("launch_mandelbrot (GPU open): {case}"),
            want,
            || {
                // SAFETY: valid for 2 and 4 floats, or refused before any access.
                unsafe { lib.launch_mandelbrot_raw(lp, gp, iters, 2.0, size) }
            },
        );
    }
    t.works("launch_mandelbrot: a good call after the refusals", || {
        // SAFETY: valid for 2 and 4 floats.
        let code = unsafe { lib.launch_mandelbrot_raw(l, g, 10, 2.0, 2) };
        equal("status", code, status::OK)?;
        require(lib.last_error().is_empty(), || {
            format!("a message after success: {}", lib.last_error())
        })?;
        let want = mandelbrot_cpu(ArrayView1::from(&lattice), 10, 2.0).map_err(m)?;
        equal("graph", graph.to_vec(), want.iter().copied().collect())
    });
    t.finish()
}
