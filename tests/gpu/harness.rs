//! The harness itself (`tests/common/mod.rs`): where a kernel-result and a
//! hardware-only test run, with a GPU, without one, with a GPU that is there
//! but unusable, and under `CUDA_KERNELS_SIM=1`, `CUDA_KERNELS_SIM_COMPARE=1`
//! and `CUDA_KERNELS_REQUIRE_GPU=1`; and this binary run again on one test of
//! each kind, showing it.
use std::process::Command;

use cuda_kernels::Error;
use libtest_mimic::{Failed, Trial};

use crate::common::{
    NoGpu, Placement, REQUIRE_GPU, SIM, SIM_COMPARE, SimMode, Subject, ensure, fail, have_gpu,
    place,
};

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        cpu!(no_gpu_simulates_kernel_results_and_ignores_hardware),
        cpu!(a_broken_gpu_fails),
        cpu!(a_gpu_runs_everything_unless_told),
        cpu!(this_binary_places_each_kind),
    ]
}

const KERNEL: Subject = Subject::KernelResult;
const HARDWARE: Subject = Subject::Hardware("timings");
const MODES: [SimMode; 3] = [SimMode::Fallback, SimMode::Forced, SimMode::Compare];

/// `Err` unless `got` fails naming the test `family::t` and each of `words`.
fn fails_naming(got: &Placement, words: &[&str]) -> Result<(), String> {
    match got {
        Placement::Fails(msg) if words.iter().all(|w| msg.contains(w)) => Ok(()),
        other => Err(format!(
            "expected a failure naming {words:?}, got {other:?}"
        )),
    }
}

/// No CUDA driver or no CUDA device: kernel-result tests run on the
/// simulator, hardware-only tests are ignored saying so; under
/// `CUDA_KERNELS_REQUIRE_GPU=1` both fail, naming the test and the variable,
/// except kernel-result tests that `CUDA_KERNELS_SIM=1` sends to the
/// simulator.
fn no_gpu_simulates_kernel_results_and_ignores_hardware() -> Result<(), Failed> {
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
        for mode in MODES {
            let at = |subject, required| place("family::t", subject, Err(&why), mode, required);
            ensure(at(KERNEL, false) == Placement::Sim, || {
                format!("{e}, {mode:?}: a kernel-result test is not simulated")
            })?;
            match at(HARDWARE, false) {
                Placement::Ignored(reason)
                    if reason.contains("hardware-only") && reason.contains("timings") => {}
                other => {
                    return Err(format!("{e}, {mode:?}: hardware-only test: {other:?}").into());
                }
            }
            fails_naming(&at(HARDWARE, true), &["family::t", REQUIRE_GPU])
                .map_err(|m| format!("{e}, {mode:?}, required, hardware-only: {m}"))?;
            let kernel_required = at(KERNEL, true);
            if mode == SimMode::Forced {
                ensure(kernel_required == Placement::Sim, || {
                    format!("{e}: {SIM}=1 and required: {kernel_required:?}")
                })?;
            } else {
                fails_naming(&kernel_required, &["family::t", REQUIRE_GPU])
                    .map_err(|m| format!("{e}, {mode:?}, required, kernel-result: {m}"))?;
            }
        }
    }
    Ok(())
}

/// A GPU that is there but unusable (any other error of opening it) fails
/// every GPU test, kernel-result ones included (no fallback to the
/// simulator), except kernel-result tests sent to the simulator by
/// `CUDA_KERNELS_SIM=1`.
fn a_broken_gpu_fails() -> Result<(), Failed> {
    for e in [
        Error::not_found("multiply"),
        Error::invalid("module", "PTX with a NUL byte"),
    ] {
        let why = NoGpu::from_error(&e);
        ensure(matches!(why, NoGpu::Broken(_)), || format!("{e}: {why:?}"))?;
        for mode in MODES {
            for required in [false, true] {
                for subject in [KERNEL, HARDWARE] {
                    let got = place("family::t", subject, Err(&why), mode, required);
                    if subject == KERNEL && mode == SimMode::Forced {
                        ensure(got == Placement::Sim, || format!("{e}: {got:?}"))?;
                    } else {
                        fails_naming(&got, &["family::t", "unusable"]).map_err(|m| {
                            format!("{e}, {mode:?}, required {required}, {subject:?}: {m}")
                        })?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// With a GPU: everything runs on it; `CUDA_KERNELS_SIM=1` sends the
/// kernel-result tests to the simulator, `CUDA_KERNELS_SIM_COMPARE=1` runs
/// them on both; hardware-only tests stay on the GPU.
fn a_gpu_runs_everything_unless_told() -> Result<(), Failed> {
    for required in [false, true] {
        for (mode, kernel) in [
            (SimMode::Fallback, Placement::Gpu),
            (SimMode::Forced, Placement::Sim),
            (SimMode::Compare, Placement::Both),
        ] {
            let at = |subject| place("family::t", subject, Ok(()), mode, required);
            ensure(at(KERNEL) == kernel, || {
                format!("{mode:?}: kernel-result test: {:?}", at(KERNEL))
            })?;
            ensure(at(HARDWARE) == Placement::Gpu, || {
                format!("{mode:?}: hardware-only test: {:?}", at(HARDWARE))
            })?;
        }
    }
    Ok(())
}

/// One kernel-result test and one hardware-only test of this binary.
const KERNEL_TEST: &str = "foundation::multiply_strided_views";
const HARDWARE_TEST: &str = "foundation::empty_kernel_launch_rates";

/// Runs this binary again on `test` alone with the variables `env` set (and
/// the harness's other variables removed): whether it exited 0, and its
/// output.
fn rerun(test: &str, env: &[&str]) -> Result<(bool, String), Failed> {
    let exe = std::env::current_exe().map_err(fail)?;
    let mut cmd = Command::new(&exe);
    cmd.args(["--exact", test, "--test-threads", "1"]);
    for var in [REQUIRE_GPU, SIM, SIM_COMPARE] {
        if env.contains(&var) {
            cmd.env(var, "1");
        } else {
            cmd.env_remove(var);
        }
    }
    let out = cmd.output().map_err(fail)?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.success(), text))
}

/// This binary run again on one test of each kind, plainly, under
/// `CUDA_KERNELS_REQUIRE_GPU=1` and under `CUDA_KERNELS_SIM=1`: without a GPU
/// the kernel-result test passes as `[sim]` and the hardware-only test is
/// ignored saying why, and under the first variable both fail naming
/// themselves and the reason; with a GPU both pass on it, and under the
/// second variable the kernel-result test passes on the simulator.
fn this_binary_places_each_kind() -> Result<(), Failed> {
    let expect = |test: &str, env: &[&str], ok: bool, words: &[String]| -> Result<(), Failed> {
        let (exit_ok, text) = rerun(test, env)?;
        ensure(
            exit_ok == ok && words.iter().all(|w| text.contains(w.as_str())),
            || format!("{test} with {env:?}: expected exit ok = {ok} and {words:?}:\n{text}"),
        )
    };
    let line = |kind: &str, test: &str, outcome: &str| format!("[{kind}] {test} ... {outcome}");
    if have_gpu() {
        for env in [&[][..], &[REQUIRE_GPU]] {
            expect(KERNEL_TEST, env, true, &[line("gpu", KERNEL_TEST, "ok")])?;
            expect(
                HARDWARE_TEST,
                env,
                true,
                &[line("gpu", HARDWARE_TEST, "ok")],
            )?;
        }
        expect(KERNEL_TEST, &[SIM], true, &[line("sim", KERNEL_TEST, "ok")])?;
        expect(
            HARDWARE_TEST,
            &[SIM],
            true,
            &[line("gpu", HARDWARE_TEST, "ok")],
        )?;
        expect(
            KERNEL_TEST,
            &[SIM_COMPARE],
            true,
            &[line("gpu+sim", KERNEL_TEST, "ok")],
        )
    } else {
        for env in [&[][..], &[SIM], &[SIM_COMPARE]] {
            expect(KERNEL_TEST, env, true, &[line("sim", KERNEL_TEST, "ok")])?;
            expect(
                HARDWARE_TEST,
                env,
                true,
                &[
                    line("gpu", HARDWARE_TEST, "ignored"),
                    "hardware-only: needs a CUDA GPU (launch timings)".into(),
                ],
            )?;
        }
        for test in [KERNEL_TEST, HARDWARE_TEST] {
            expect(
                test,
                &[REQUIRE_GPU],
                false,
                &[format!("{test}: {REQUIRE_GPU}=1"), "1 failed".into()],
            )?;
        }
        expect(
            KERNEL_TEST,
            &[REQUIRE_GPU, SIM],
            true,
            &[line("sim", KERNEL_TEST, "ok")],
        )
    }
}
