//! The shared test harness (used by every test target with `harness = false`:
//! the `gpu` binary, `ptx`, `capi_callers`, and the program's `cli/tests/cli.rs`).
//!
//! Each GPU test is a libtest-mimic trial whose outcome is decided at run
//! time:
//! - on a machine with a usable GPU it runs;
//! - on a machine without one (no CUDA driver, or no CUDA device:
//!   [`Error::is_no_gpu`](cuda_kernels::Error::is_no_gpu)) it is reported as
//!   `ignored (no CUDA device: …)`, never as passed; with
//!   `CUDA_KERNELS_REQUIRE_GPU=1` ([`REQUIRE_GPU`]) it fails instead, naming
//!   itself and the reason, so that a run meant for the GPU cannot come back
//!   green with tests skipped;
//! - when the GPU is there but unusable (the crate's PTX fails to load, a
//!   broken driver: any other error) it fails.
//!
//! All trials share one [`Gpu`] (it is `Send + Sync` and binds its context on
//! every call).
#![allow(dead_code)]
use std::process::ExitCode;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use cuda_kernels::{Error, Gpu};
use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// The environment variable that turns "ignored: no GPU" into a failure.
pub const REQUIRE_GPU: &str = "CUDA_KERNELS_REQUIRE_GPU";

/// Whether `CUDA_KERNELS_REQUIRE_GPU` is set to anything but empty or `0`.
pub fn gpu_required() -> bool {
    std::env::var_os(REQUIRE_GPU).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Why the GPU tests cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoGpu {
    /// No CUDA driver or no CUDA device: GPU tests are ignored (they fail
    /// under [`REQUIRE_GPU`]).
    Absent(String),
    /// A GPU is there but unusable (the PTX failed to load, a broken
    /// driver, …): GPU tests fail.
    Broken(String),
}

impl NoGpu {
    /// Sorts an error of `cuda_kernels::gpu()`: only "no driver" and "no
    /// device" mean that there is no GPU.
    pub fn from_error(e: &Error) -> Self {
        if e.is_no_gpu() {
            NoGpu::Absent(e.to_string())
        } else {
            NoGpu::Broken(e.to_string())
        }
    }

    /// What a GPU test named `name` reports instead of running: ignored
    /// with the reason, or (a broken GPU, or no GPU while `required`) a
    /// failure naming the test and the reason.
    pub fn verdict(&self, name: &str, required: bool) -> Result<Completion, Failed> {
        match self {
            NoGpu::Absent(reason) if !required => Ok(Completion::ignored_with(reason)),
            NoGpu::Absent(reason) => Err(Failed::from(format!(
                "{name}: {REQUIRE_GPU}=1 but this GPU test cannot run: {reason}"
            ))),
            NoGpu::Broken(reason) => Err(Failed::from(format!(
                "{name}: a CUDA GPU is present but unusable: {reason}"
            ))),
        }
    }
}

/// The shared GPU (dropped by [`run`] after the trials, so that its memory is
/// freed before exit, as compute-sanitizer's leak check wants).
static GPU: Mutex<Option<Arc<Gpu>>> = Mutex::new(None);
/// Why there is no GPU, decided once.
static NO_GPU: OnceLock<Option<NoGpu>> = OnceLock::new();

/// The shared GPU, or why there is none.
pub fn shared_gpu() -> Result<Arc<Gpu>, NoGpu> {
    let mut slot = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let reason = NO_GPU.get_or_init(|| match cuda_kernels::gpu() {
        Ok(gpu) => {
            *slot = Some(Arc::new(gpu));
            None
        }
        Err(e) => Some(NoGpu::from_error(&e)),
    });
    match (reason, slot.as_ref()) {
        (None, Some(gpu)) => Ok(gpu.clone()),
        (Some(reason), _) => Err(reason.clone()),
        (None, None) => Err(NoGpu::Broken("the shared GPU was already released".into())),
    }
}

/// Whether this machine has a usable GPU.
pub fn have_gpu() -> bool {
    shared_gpu().is_ok()
}

/// Whether the tests run under compute-sanitizer (scripts/sanitize.sh sets
/// `CUDA_KERNELS_SANITIZE`): the largest sizes are left out there.
pub fn under_sanitizer() -> bool {
    std::env::var_os("CUDA_KERNELS_SANITIZE").is_some()
}

/// Held shared by every GPU trial, and exclusively by the trials that
/// measure the whole device (its free memory, say), which therefore run while
/// no other GPU trial of the binary does.
static WHOLE_DEVICE: RwLock<()> = RwLock::new(());

/// A test that needs the GPU and decides its own completion (it may be
/// ignored for another reason, say too little GPU memory). Without a usable
/// GPU: see [`NoGpu::verdict`]. The GPU's context is current on the trial's
/// thread when `body` starts.
pub fn gpu_trial(
    name: impl Into<String>,
    body: impl FnOnce(&Gpu) -> Result<Completion, Failed> + Send + 'static,
) -> Trial {
    device_trial(name.into(), false, body)
}

/// A GPU test that runs while no other GPU trial runs (see [`WHOLE_DEVICE`]).
pub fn exclusive_gpu_test(name: impl Into<String>, body: fn(&Gpu) -> Result<(), Failed>) -> Trial {
    device_trial(name.into(), true, move |gpu| {
        body(gpu).map(|()| Completion::Completed)
    })
}

fn device_trial(
    name: String,
    exclusive: bool,
    body: impl FnOnce(&Gpu) -> Result<Completion, Failed> + Send + 'static,
) -> Trial {
    let label = name.clone();
    Trial::ignorable_test(name, move || match shared_gpu() {
        // Each trial runs on its own thread: make the context current there, so
        // that tests calling `cust` directly (buffers, streams) have one.
        Ok(gpu) => {
            let (_shared, _exclusive) = if exclusive {
                (
                    None,
                    Some(WHOLE_DEVICE.write().unwrap_or_else(|e| e.into_inner())),
                )
            } else {
                (
                    Some(WHOLE_DEVICE.read().unwrap_or_else(|e| e.into_inner())),
                    None,
                )
            };
            gpu.bind().map_err(fail)?;
            body(&gpu)
        }
        Err(why) => why.verdict(&label, gpu_required()),
    })
    .with_kind("gpu")
}

/// A test that needs the GPU (see [`gpu_trial`]).
pub fn gpu_test(name: impl Into<String>, body: fn(&Gpu) -> Result<(), Failed>) -> Trial {
    gpu_trial(name, move |gpu| body(gpu).map(|()| Completion::Completed))
}

/// A test that needs no GPU.
pub fn cpu_test(name: impl Into<String>, body: fn() -> Result<(), Failed>) -> Trial {
    Trial::test(name, body).with_kind("cpu")
}

/// Runs the trials (parsing the usual `cargo test` arguments) and exits with
/// libtest's status.
pub fn run(trials: Vec<Trial>) -> ExitCode {
    let args = Arguments::from_args();
    let has_gpu_tests = trials.iter().any(|t| t.kind() == "gpu");
    match shared_gpu() {
        _ if !has_gpu_tests => {}
        Ok(_) => {}
        Err(NoGpu::Absent(reason)) if gpu_required() => {
            eprintln!("error: {REQUIRE_GPU}=1 and no GPU: GPU tests fail: {reason}")
        }
        Err(NoGpu::Absent(reason)) => {
            eprintln!("note: GPU tests are ignored on this machine: {reason}")
        }
        Err(NoGpu::Broken(reason)) => {
            eprintln!("error: the GPU is unusable: GPU tests fail: {reason}")
        }
    }
    let conclusion = libtest_mimic::run(&args, trials);
    GPU.lock().unwrap_or_else(|e| e.into_inner()).take();
    conclusion.exit_code()
}

/// Turns any displayable error into a test failure.
pub fn fail(e: impl std::fmt::Display) -> Failed {
    Failed::from(e.to_string())
}

/// `Err(Failed)` unless `cond`.
pub fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<(), Failed> {
    if cond {
        Ok(())
    } else {
        Err(Failed::from(msg()))
    }
}

/// Lengths worth testing for a 1-D kernel with blocks of 256: 1, below and
/// above one block, not a multiple of the block, and large.
pub const AWKWARD_LENGTHS: &[usize] = &[1, 2, 31, 255, 256, 257, 1000, 65_537, (1 << 20) + 3];

/// What a test does when something it needs from the set-up is missing (a
/// tool, a library, a source file): ignored with `reason` on a developer's
/// machine, but a failure naming it where the run must be complete: in CI
/// (`CI=true`, where `scripts/setup.sh` installs every prerequisite) and in
/// the packed GPU run (`CUDA_KERNELS_REQUIRE_GPU=1`).
pub fn missing_prerequisite(reason: impl Into<String>) -> Result<Completion, Failed> {
    let reason = reason.into();
    let strict = if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        "CI"
    } else if gpu_required() {
        REQUIRE_GPU
    } else {
        return Ok(Completion::ignored_with(reason));
    };
    Err(format!("{reason} (a failure, not ignored, because {strict} is set)").into())
}
