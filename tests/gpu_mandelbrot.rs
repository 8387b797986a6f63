//! GPU tests of the mandelbrot family: `mandelbrot_ker` against the CPU
//! reference (identical graphs), the four launch paths of seed 002 and
//! seed 003's explicit synchronization giving the same graph, and bad input
//! (sizes, missing PTX files, PTX without the kernel, the C ABI's status
//! codes) refused without a crash and without a launch.
mod common;

use std::path::PathBuf;
use std::process::ExitCode;

use common::{ensure, expect_invalid, fail, gpu_test, run, shared_gpu, under_sanitizer};
use cuda_kernels::mandelbrot::c_abi::{CAbiLibrary, LIBRARY_NAME, status};
use cuda_kernels::mandelbrot::driver_api::{PtxSource, mandelbrot_driver_api};
use cuda_kernels::mandelbrot::{
    BLOCK, MAX_LATTICE_SIZE, MandelbrotParams, count_inside, first_difference, linspace_f32,
    mandelbrot_cpu,
};
use cuda_kernels::ndarray::{Array1, Array2};
use cuda_kernels::{Error, Gpu};
use libtest_mimic::{Completion, Failed, Trial};

fn main() -> ExitCode {
    run(vec![
        gpu_test("matches_cpu_at_awkward_sizes", matches_cpu_at_awkward_sizes),
        gpu_test("matches_cpu_other_parameters", matches_cpu_other_parameters),
        gpu_test("matches_cpu_4096", matches_cpu_4096),
        gpu_test(
            "block_size_does_not_change_the_graph",
            block_size_does_not_change_the_graph,
        ),
        gpu_test("ptx_file_path_identical", ptx_file_path_identical),
        gpu_test("driver_api_path_identical", driver_api_path_identical),
        gpu_test("explicit_sync_path_identical", explicit_sync_path_identical),
        gpu_test(
            "bad_sizes_are_refused_before_launch",
            bad_sizes_are_refused_before_launch,
        ),
        gpu_test(
            "missing_ptx_or_kernel_is_a_typed_error",
            missing_ptx_or_kernel_is_a_typed_error,
        ),
        c_abi_test("c_abi_path_identical", c_abi_path_identical),
        c_abi_test("c_abi_bad_input_status_codes", c_abi_bad_input_status_codes),
    ])
}

/// A test of the C ABI library: ignored without a GPU, or without the library
/// (with where it was looked for).
fn c_abi_test(name: &str, body: fn(&Gpu, &CAbiLibrary) -> Result<(), Failed>) -> Trial {
    Trial::ignorable_test(name, move || {
        let gpu = match shared_gpu() {
            Ok(gpu) => gpu,
            Err(reason) => return Ok(Completion::ignored_with(reason)),
        };
        let Some(path) = CAbiLibrary::find() else {
            return Ok(Completion::ignored_with(format!(
                "{LIBRARY_NAME} not found (build it: cargo build -p cuda-kernels-capi)"
            )));
        };
        let lib = CAbiLibrary::open(&path).map_err(fail)?;
        body(&gpu, &lib).map(|()| Completion::Completed)
    })
    .with_kind("gpu")
}

fn same(what: &str, got: &Array2<f32>, expected: &Array2<f32>) -> Result<(), Failed> {
    match first_difference(got.view(), expected.view()) {
        None => Ok(()),
        Some(d) => Err(format!("{what}: differs at {d}").into()),
    }
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
        same(&format!("n = {n}"), &g, &c)?;
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
        same(
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
    // 1024 under compute-sanitizer (the harness's convention for the largest sizes).
    let breadth = if under_sanitizer() { 1024 } else { 4096 };
    let p = MandelbrotParams {
        breadth,
        ..MandelbrotParams::default()
    };
    let lattice = p.lattice();
    let (g, t) = gpu
        .mandelbrot_timed(lattice.view(), p.max_iters, p.upper_bound, BLOCK)
        .map_err(fail)?;
    let c = mandelbrot_cpu(lattice.view(), p.max_iters, p.upper_bound).map_err(fail)?;
    same(&format!("{breadth}×{breadth}"), &g, &c)?;
    ensure(
        t.kernel_ms > 0.0 && t.with_transfers_ms >= t.kernel_ms,
        || format!("{t:?}"),
    )
}

fn block_size_does_not_change_the_graph(gpu: &Gpu) -> Result<(), Failed> {
    let (lattice, expected) = seed_params();
    for block in [1u32, 32, 100, 256, 1024] {
        let (g, _) = gpu
            .mandelbrot_timed(lattice.view(), 256, 2.0, block)
            .map_err(fail)?;
        same(&format!("block {block}"), &g, &expected)?;
    }
    Ok(())
}

/// A file in the temporary folder, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> Result<Self, Failed> {
        let path =
            std::env::temp_dir().join(format!("cuda-kernels-test-{}-{name}", std::process::id()));
        std::fs::write(&path, text).map_err(fail)?;
        Ok(Self(path))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn ptx_file_path_identical(_gpu: &Gpu) -> Result<(), Failed> {
    let (lattice, expected) = seed_params();
    let file = TempFile::new("kernels.ptx", cuda_kernels::PTX)?;
    let from_file = Gpu::from_ptx_file(&file.0).map_err(fail)?;
    let g = from_file
        .mandelbrot(lattice.view(), 256, 2.0)
        .map_err(fail)?;
    same("PTX from a file", &g, &expected)
}

fn driver_api_path_identical(gpu: &Gpu) -> Result<(), Failed> {
    let (lattice, expected) = seed_params();
    let file = TempFile::new("driver.ptx", cuda_kernels::PTX)?;
    let g =
        mandelbrot_driver_api(PtxSource::File(&file.0), lattice.view(), 256, 2.0).map_err(fail)?;
    same("driver API, cuModuleLoad", &g, &expected)?;
    let g = mandelbrot_driver_api(PtxSource::Text(cuda_kernels::PTX), lattice.view(), 256, 2.0)
        .map_err(fail)?;
    same("driver API, cuModuleLoadData", &g, &expected)?;
    // The driver-API path created and destroyed its own context: the shared
    // GPU's context still works afterwards.
    let g = gpu.mandelbrot(lattice.view(), 256, 2.0).map_err(fail)?;
    same("high-level after the driver API", &g, &expected)
}

fn explicit_sync_path_identical(gpu: &Gpu) -> Result<(), Failed> {
    let (lattice, expected) = seed_params();
    let g = gpu
        .mandelbrot_explicit_sync(lattice.view(), 256, 2.0)
        .map_err(fail)?;
    same("explicit context synchronization", &g, &expected)?;
    let small = linspace_f32(-2.0, 2.0, 33);
    let g = gpu
        .mandelbrot_explicit_sync(small.view(), 100, 2.0)
        .map_err(fail)?;
    same(
        "explicit sync, 33",
        &g,
        &mandelbrot_cpu(small.view(), 100, 2.0).map_err(fail)?,
    )
}

fn bad_sizes_are_refused_before_launch(gpu: &Gpu) -> Result<(), Failed> {
    let empty = Array1::<f32>::zeros(0);
    let too_big = Array1::<f32>::zeros(MAX_LATTICE_SIZE + 1);
    let ok = linspace_f32(-2.0, 2.0, 8);
    for (what, lattice, iters) in [
        ("empty", &empty, 256),
        ("size² overflows i32", &too_big, 256),
        ("negative max_iters", &ok, -1),
    ] {
        expect_invalid(what, gpu.mandelbrot(lattice.view(), iters, 2.0))?;
        expect_invalid(
            what,
            gpu.mandelbrot_explicit_sync(lattice.view(), iters, 2.0),
        )?;
        expect_invalid(
            what,
            mandelbrot_driver_api(
                PtxSource::Text(cuda_kernels::PTX),
                lattice.view(),
                iters,
                2.0,
            ),
        )?;
    }
    let mut graph = vec![0.0f32; 63];
    expect_invalid(
        "graph too short",
        gpu.mandelbrot_into(ok.as_slice().unwrap_or(&[]), &mut graph, 256, 2.0),
    )?;
    // The GPU still works.
    let g = gpu.mandelbrot(ok.view(), 256, 2.0).map_err(fail)?;
    same(
        "after refusals",
        &g,
        &mandelbrot_cpu(ok.view(), 256, 2.0).map_err(fail)?,
    )
}

/// Valid PTX with one kernel that is not `mandelbrot_ker`.
const PTX_WITHOUT_KERNEL: &str = ".version 6.0\n.target sm_70\n.address_size 64\n\n.visible .entry something_else()\n{\n\tret;\n}\n";

fn missing_ptx_or_kernel_is_a_typed_error(_gpu: &Gpu) -> Result<(), Failed> {
    let lattice = linspace_f32(-2.0, 2.0, 16);
    let missing = std::env::temp_dir().join("cuda-kernels-test-no-such-file.ptx");
    match Gpu::from_ptx_file(&missing) {
        Err(Error::PtxFile { .. }) => {}
        other => return Err(format!("from_ptx_file(missing): {:?}", other.err()).into()),
    }
    match mandelbrot_driver_api(PtxSource::File(&missing), lattice.view(), 256, 2.0) {
        Err(Error::PtxFile { .. }) => {}
        other => return Err(format!("driver API (missing file): {other:?}").into()),
    }
    let file = TempFile::new("other.ptx", PTX_WITHOUT_KERNEL)?;
    let other = Gpu::from_ptx_file(&file.0).map_err(fail)?;
    match other.mandelbrot(lattice.view(), 256, 2.0) {
        Err(Error::KernelNotFound { name }) if name == "mandelbrot_ker" => {}
        r => return Err(format!("PTX without the kernel: {r:?}").into()),
    }
    match mandelbrot_driver_api(PtxSource::File(&file.0), lattice.view(), 256, 2.0) {
        Err(Error::KernelNotFound { name }) if name == "mandelbrot_ker" => {}
        r => return Err(format!("driver API, PTX without the kernel: {r:?}").into()),
    }
    let garbage = TempFile::new("garbage.ptx", ".version 6.0\n.target sm_70\nnot ptx at all")?;
    match mandelbrot_driver_api(PtxSource::File(&garbage.0), lattice.view(), 256, 2.0) {
        Err(Error::ModuleLoad { details, .. }) => ensure(details.contains("sm_70"), || details),
        r => Err(format!("driver API, corrupt PTX: {r:?}").into()),
    }
}

fn c_abi_path_identical(gpu: &Gpu, lib: &CAbiLibrary) -> Result<(), Failed> {
    let (lattice, expected) = seed_params();
    let g = lib.mandelbrot(lattice.view(), 256, 2.0).map_err(fail)?;
    same("C ABI", &g, &expected)?;
    let g2 = lib.mandelbrot(lattice.view(), 256, 2.0).map_err(fail)?;
    same("C ABI, second call", &g2, &expected)?;
    lib.hello().map_err(fail)?;
    let g = gpu.mandelbrot(lattice.view(), 256, 2.0).map_err(fail)?;
    same("high-level after the C ABI", &g, &expected)
}

fn c_abi_bad_input_status_codes(_gpu: &Gpu, lib: &CAbiLibrary) -> Result<(), Failed> {
    let lattice = [0.0f32; 4];
    let mut graph = [7.0f32; 16];
    let (l, g) = (lattice.as_ptr(), graph.as_mut_ptr());
    let null_l = std::ptr::null::<f32>();
    let null_g = std::ptr::null_mut::<f32>();
    for (what, (lp, gp, iters, size), want) in [
        ("null lattice", (null_l, g, 256, 4), status::NULL_POINTER),
        ("null graph", (l, null_g, 256, 4), status::NULL_POINTER),
        ("zero size", (l, g, 256, 0), status::BAD_SIZE),
        ("negative size", (l, g, 256, -4), status::BAD_SIZE),
        ("size² overflows int", (l, g, 256, 46_341), status::BAD_SIZE),
        ("negative max_iters", (l, g, -1, 4), status::BAD_ARGUMENT),
    ] {
        // SAFETY: non-null pointers are valid for 4 and 16 floats, and every call
        // here is refused before any access.
        let code = unsafe { lib.launch_mandelbrot_raw(lp, gp, iters, 2.0, size) };
        ensure(code == want, || {
            format!("{what}: status {code}, expected {want}")
        })?;
        ensure(!lib.last_error().is_empty(), || {
            format!("{what}: no message")
        })?;
    }
    ensure(graph == [7.0; 16], || {
        "a refused call wrote the graph".into()
    })?;
    // And a good call afterwards succeeds.
    // SAFETY: valid for 4 and 16 floats.
    let code = unsafe { lib.launch_mandelbrot_raw(l, g, 256, 2.0, 4) };
    ensure(code == status::OK, || {
        format!("good call: {code}: {}", lib.last_error())
    })?;
    ensure(lib.last_error().is_empty(), || {
        "message after success".into()
    })
}
