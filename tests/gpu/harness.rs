//! The harness itself: without a GPU a GPU test is ignored with the reason,
//! or fails, naming itself, under `CUDA_KERNELS_REQUIRE_GPU=1`; a GPU that is
//! there but unusable fails every GPU test.
use std::process::Command;

use cuda_kernels::Error;
use libtest_mimic::{Failed, Trial};

use crate::common::{NoGpu, REQUIRE_GPU, ensure, fail, have_gpu};

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        cpu!(no_gpu_is_ignored_or_fails_when_required),
        cpu!(a_broken_gpu_fails),
        cpu!(require_gpu_fails_a_run_without_a_gpu),
    ]
}

fn no_gpu_is_ignored_or_fails_when_required() -> Result<(), Failed> {
    for e in [
        Error::NoDevice {
            reason: "no CUDA-capable device is detected".into(),
        },
        Error::NoDriver {
            reason: "CUDA driver version is insufficient".into(),
        },
    ] {
        let why = NoGpu::from_error(&e);
        ensure(matches!(why, NoGpu::Absent(_)), || format!("{e}: {why:?}"))?;
        ensure(why.verdict("family::t", false).is_ok(), || {
            format!("{e}: not ignored")
        })?;
        match why.verdict("family::t", true) {
            Err(f) => {
                let msg = format!("{f:?}");
                ensure(
                    msg.contains("family::t") && msg.contains(REQUIRE_GPU),
                    || msg.clone(),
                )?;
            }
            Ok(_) => return Err(format!("{e}: not failed under {REQUIRE_GPU}=1").into()),
        }
    }
    Ok(())
}

fn a_broken_gpu_fails() -> Result<(), Failed> {
    for e in [
        Error::KernelNotFound {
            name: "multiply".into(),
        },
        Error::invalid("module", "PTX with a NUL byte"),
    ] {
        let why = NoGpu::from_error(&e);
        ensure(matches!(why, NoGpu::Broken(_)), || format!("{e}: {why:?}"))?;
        for required in [false, true] {
            ensure(why.verdict("family::t", required).is_err(), || {
                format!("{e}: a broken GPU did not fail the test (required: {required})")
            })?;
        }
    }
    Ok(())
}

/// Runs this binary again on one GPU test, with and without
/// `CUDA_KERNELS_REQUIRE_GPU=1`: without a GPU it is ignored, and under the
/// variable it fails naming itself and the reason; with one it passes both
/// times.
fn require_gpu_fails_a_run_without_a_gpu() -> Result<(), Failed> {
    const TEST: &str = "foundation::multiply_matches_cpu_exactly";
    let exe = std::env::current_exe().map_err(fail)?;
    let run = |required: bool| -> Result<(bool, String), Failed> {
        let mut cmd = Command::new(&exe);
        cmd.args(["--exact", TEST, "--test-threads", "1"]);
        if required {
            cmd.env(REQUIRE_GPU, "1");
        } else {
            cmd.env_remove(REQUIRE_GPU);
        }
        let out = cmd.output().map_err(fail)?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok((out.status.success(), text))
    };
    let (plain_ok, plain) = run(false)?;
    let (required_ok, required) = run(true)?;
    if have_gpu() {
        ensure(plain_ok && plain.contains("1 passed"), || plain.clone())?;
        ensure(required_ok && required.contains("1 passed"), || {
            required.clone()
        })
    } else {
        ensure(plain_ok && plain.contains("1 ignored"), || plain.clone())?;
        ensure(!required_ok, || {
            format!("{REQUIRE_GPU}=1 without a GPU exited 0:\n{required}")
        })?;
        ensure(
            required.contains(&format!("{TEST}: {REQUIRE_GPU}=1")) && required.contains("1 failed"),
            || format!("the failure does not name {TEST} and the reason:\n{required}"),
        )
    }
}
