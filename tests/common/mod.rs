//! The GPU test harness (used by the `gpu_*` test targets, `harness = false`).
//!
//! Each test is a libtest-mimic trial whose outcome is decided at run time: on
//! a machine without a usable GPU it is reported as `ignored (no CUDA device:
//! …)`, never as passed; on a CUDA machine it runs. All trials share one
//! [`Gpu`] (it is `Send + Sync` and binds its context on every call).
#![allow(dead_code)]
use std::process::ExitCode;
use std::sync::{Arc, Mutex, OnceLock};

use cuda_kernels::Gpu;
use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// The shared GPU (dropped by [`run`] after the trials, so that its memory is
/// freed before exit, as compute-sanitizer's leak check wants).
static GPU: Mutex<Option<Arc<Gpu>>> = Mutex::new(None);
/// Why there is no GPU, decided once.
static NO_GPU: OnceLock<Option<String>> = OnceLock::new();

/// The shared GPU, or why there is none.
pub fn shared_gpu() -> Result<Arc<Gpu>, String> {
    let mut slot = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let reason = NO_GPU.get_or_init(|| match cuda_kernels::gpu() {
        Ok(gpu) => {
            *slot = Some(Arc::new(gpu));
            None
        }
        Err(e) => Some(e.to_string()),
    });
    match (reason, slot.as_ref()) {
        (None, Some(gpu)) => Ok(gpu.clone()),
        (Some(reason), _) => Err(reason.clone()),
        (None, None) => Err("the shared GPU was already released".into()),
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

/// A test that needs the GPU: ignored, with the reason, when there is none.
/// The GPU's context is current on the trial's thread when `body` starts.
pub fn gpu_test(name: &str, body: fn(&Gpu) -> Result<(), Failed>) -> Trial {
    Trial::ignorable_test(name, move || match shared_gpu() {
        // Each trial runs on its own thread: make the context current there, so
        // that tests calling `cust` directly (buffers, streams) have one.
        Ok(gpu) => {
            gpu.bind().map_err(fail)?;
            body(&gpu).map(|()| Completion::Completed)
        }
        Err(reason) => Ok(Completion::ignored_with(reason)),
    })
    .with_kind("gpu")
}

/// A test that needs no GPU.
pub fn cpu_test(name: &str, body: fn() -> Result<(), Failed>) -> Trial {
    Trial::test(name, body)
}

/// Runs the trials (parsing the usual `cargo test` arguments) and exits with
/// libtest's status.
pub fn run(trials: Vec<Trial>) -> ExitCode {
    let args = Arguments::from_args();
    if let Err(reason) = shared_gpu() {
        eprintln!("note: GPU tests are ignored on this machine: {reason}");
    }
    let conclusion = libtest_mimic::run(&args, trials);
    GPU.lock().unwrap_or_else(|e| e.into_inner()).take();
    conclusion.exit_code()
}

/// `Ok` when `r` is the crate's `Error::InvalidInput` (refused before any
/// launch), else a failure naming `what` and what came back.
pub fn expect_invalid<T: std::fmt::Debug>(
    what: &str,
    r: cuda_kernels::Result<T>,
) -> Result<(), Failed> {
    match r {
        Err(cuda_kernels::Error::InvalidInput { .. }) => Ok(()),
        other => Err(format!("{what}: expected InvalidInput, got {other:?}").into()),
    }
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
    let set = |var: &str| std::env::var(var).is_ok_and(|v| v == "1" || v == "true");
    match ["CI", "CUDA_KERNELS_REQUIRE_GPU"]
        .into_iter()
        .find(|v| set(v))
    {
        Some(var) => Err(format!("{reason} (a failure, not ignored, because {var} is set)").into()),
        None => Ok(Completion::ignored_with(reason)),
    }
}
