//! The C ABI library's callers: the seed's Python ctypes program
//! (`examples/python/mandelbrot_ctypes.py`) and the seed's C program
//! (`examples/c/hello_dlopen.c`) run against the built
//! `libcuda_kernels_capi.so`.
//!
//! Without a GPU (CI) each must fail clearly: exit status 1 and a message
//! naming the missing device. With a GPU each must succeed, and the Python
//! graph must be the CPU reference's (same CRC-32). When what a test needs is
//! missing (python3 or NumPy, a C compiler, the library, the caller's source)
//! it is reported ignored, with the reason, or fails in CI and in the packed
//! GPU run ([`common::missing_prerequisite`]): never passed untested. Under
//! `CUDA_KERNELS_REQUIRE_GPU=1` a caller that finds no GPU fails.
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use common::{have_gpu, missing_prerequisite};
use cuda_kernels::mandelbrot::c_abi::{CAbiLibrary, LIBRARY_NAME};
use cuda_kernels::mandelbrot::{MandelbrotParams, graph_crc32, mandelbrot_cpu};
use libtest_mimic::{Completion, Failed, Trial};

fn main() -> ExitCode {
    common::run(vec![
        Trial::ignorable_test("python_ctypes_caller", python_ctypes_caller),
        Trial::ignorable_test("c_dlopen_caller", c_dlopen_caller),
        Trial::ignorable_test("call_overhead_is_measured", call_overhead_is_measured),
    ])
}

/// The C ABI call overhead needs no GPU: one call through the `dlsym`'d
/// pointer and one direct Rust call, both timed.
fn call_overhead_is_measured() -> Result<Completion, Failed> {
    let lib = match library() {
        Ok(l) => l,
        Err(outcome) => return outcome,
    };
    let lib = CAbiLibrary::open(lib).map_err(|e| Failed::from(e.to_string()))?;
    let (through_c, direct) = lib.call_overhead_ns(100_000);
    if through_c > 0.0 && direct >= 0.0 && through_c.is_finite() {
        eprintln!("C ABI call {through_c:.2} ns, direct Rust call {direct:.2} ns");
        Ok(Completion::Completed)
    } else {
        Err(format!("implausible timings: {through_c} ns vs {direct} ns").into())
    }
}

/// `name` next to this test binary (a packed run on the GPU machine), else
/// at `in_repo` under the source tree when it is there.
fn locate(name: &str, in_repo: &str) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        candidates.push(dir.join(name));
    }
    candidates.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(in_repo)
            .join(name),
    );
    candidates.into_iter().find(|p| p.is_file())
}

/// The library, or the test's outcome when it is missing.
fn library() -> Result<PathBuf, Result<Completion, Failed>> {
    CAbiLibrary::find().ok_or_else(|| {
        missing_prerequisite(format!(
            "{LIBRARY_NAME} not built (cargo build -p cuda-kernels-capi; scripts/setup.sh does it)"
        ))
    })
}

/// The outcome of a caller that found no GPU and failed as it must: passed,
/// except under `CUDA_KERNELS_REQUIRE_GPU=1` (the packed GPU run), where
/// not reaching the GPU is itself the failure.
fn no_gpu_outcome(caller: &str) -> Result<Completion, Failed> {
    let Err(no_gpu) = common::shared_gpu() else {
        return Ok(Completion::Completed);
    };
    match common::place(
        caller,
        common::Subject::Hardware("the C ABI"),
        Err(&no_gpu),
        common::SimMode::Fallback,
        common::gpu_required(),
    ) {
        common::Placement::Fails(message) => Err(message.into()),
        _ => Ok(Completion::Completed),
    }
}

fn python_ctypes_caller() -> Result<Completion, Failed> {
    let lib = match library() {
        Ok(l) => l,
        Err(outcome) => return outcome,
    };
    let Some(script) = locate("mandelbrot_ctypes.py", "examples/python") else {
        return missing_prerequisite("mandelbrot_ctypes.py not found");
    };
    match Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
    {
        Err(e) => return missing_prerequisite(format!("no python3: {e}")),
        Ok(o) if !o.status.success() => {
            return missing_prerequisite("python3 has no NumPy (scripts/setup.sh installs it)");
        }
        Ok(_) => {}
    }
    let png = std::env::temp_dir().join(format!("cuda-kernels-ctypes-{}.png", std::process::id()));
    let out = Command::new("python3")
        .arg(&script)
        .arg("--lib")
        .arg(&lib)
        .arg("--out")
        .arg(&png)
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let shown = format!(
        "status {:?}\nstdout: {stdout}\nstderr: {stderr}",
        out.status.code()
    );
    if have_gpu() {
        let written = png.is_file();
        let _ = std::fs::remove_file(&png);
        if out.status.code() != Some(0) || !written {
            return Err(format!("with a GPU the Python caller must succeed: {shown}").into());
        }
        let p = MandelbrotParams::default();
        let expected = mandelbrot_cpu(p.lattice().view(), p.max_iters, p.upper_bound)?;
        let crc = format!("graph crc32: {:#010x}", graph_crc32(expected.view()));
        if !stdout.contains(&crc) {
            return Err(
                format!("the Python graph is not the CPU reference ({crc}): {shown}").into(),
            );
        }
    } else if out.status.code() != Some(1)
        || !stderr.contains("launch_mandelbrot returned -3")
        || !stderr.contains("no CUDA")
    {
        return Err(format!(
            "without a GPU the Python caller must exit 1 with a clear message: {shown}"
        )
        .into());
    } else {
        return no_gpu_outcome("python_ctypes_caller");
    }
    Ok(Completion::Completed)
}

fn c_dlopen_caller() -> Result<Completion, Failed> {
    let lib = match library() {
        Ok(l) => l,
        Err(outcome) => return outcome,
    };
    let (Some(source), Some(header)) = (
        locate("hello_dlopen.c", "examples/c"),
        locate("cuda_kernels.h", "capi/include"),
    ) else {
        return missing_prerequisite("hello_dlopen.c or cuda_kernels.h not found");
    };
    let exe =
        std::env::temp_dir().join(format!("cuda-kernels-hello-dlopen-{}", std::process::id()));
    let include = header.parent().unwrap_or(Path::new("."));
    let compiled = Command::new("cc")
        .arg("-I")
        .arg(include)
        .arg("-o")
        .arg(&exe)
        .arg(&source)
        .arg("-ldl")
        .output();
    match compiled {
        Err(e) => return missing_prerequisite(format!("no C compiler (cc): {e}")),
        Ok(o) if !o.status.success() => {
            return Err(format!("cc failed: {}", String::from_utf8_lossy(&o.stderr)).into());
        }
        Ok(_) => {}
    }
    let out = Command::new(&exe).arg(&lib).output();
    let _ = std::fs::remove_file(&exe);
    let out = out?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let shown = format!(
        "status {:?}\nstdout: {stdout}\nstderr: {stderr}",
        out.status.code()
    );
    if have_gpu() {
        let hellos = stdout
            .lines()
            .filter(|l| *l == "Hello World From GPU!")
            .count();
        if out.status.code() != Some(0) || hellos != 3 || !stdout.contains("points inside the set")
        {
            return Err(format!(
                "with a GPU the C caller must print 3 hellos and succeed: {shown}"
            )
            .into());
        }
    } else if out.status.code() != Some(1) || !stderr.contains("launch_hello returned -3") {
        return Err(format!(
            "without a GPU the C caller must exit 1 with a clear message: {shown}"
        )
        .into());
    } else {
        return no_gpu_outcome("c_dlopen_caller");
    }
    Ok(Completion::Completed)
}
