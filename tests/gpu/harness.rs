//! The harness itself (`tests/common/mod.rs`): where a kernel-result and a
//! hardware-only test run, with a GPU, without one, with a GPU that is there
//! but unusable, and under `CUDA_KERNELS_SIM=1`, `CUDA_KERNELS_SIM_COMPARE=1`
//! and `CUDA_KERNELS_REQUIRE_GPU=1`; and this binary run again on one test of
//! each kind, showing it.
use std::process::Command;

use cuda_kernels::Error;
use cuda_kernels::gpu::classify_open_failure;
use libtest_mimic::{Failed, Trial};

use crate::common::{
    MIN_GPUS, NoGpu, Placement, REQUIRE_GPU, SIM, SIM_COMPARE, SimMode, Subject, check_min_gpus,
    ensure, fail, have_gpu, parse_min_gpus, place,
};

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        cpu!(no_gpu_simulates_kernel_results_and_ignores_hardware),
        cpu!(a_broken_gpu_fails),
        cpu!(a_driver_too_old_fails_a_gpu_test_instead_of_ignoring_it),
        cpu!(min_gpus_is_a_positive_count_of_distinct_usable_devices),
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

/// No CUDA device (the driver says so) or no NVIDIA kernel driver loaded
/// (whatever `cuInit` says then): kernel-result tests run on the simulator,
/// hardware-only tests are ignored saying so; under
/// `CUDA_KERNELS_REQUIRE_GPU=1` both fail, naming the test and the variable,
/// kernel-result tests that `CUDA_KERNELS_SIM=1` sends to the simulator
/// included.
fn no_gpu_simulates_kernel_results_and_ignores_hardware() -> Result<(), Failed> {
    for e in [
        classify_open_failure("cuInit", 100, true),
        classify_open_failure("cuInit", 100, false),
        classify_open_failure("cuInit", 999, false),
        classify_open_failure("cuInit", 35, false),
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
            fails_naming(&at(KERNEL, true), &["family::t", REQUIRE_GPU])
                .map_err(|m| format!("{e}, {mode:?}, required, kernel-result: {m}"))?;
        }
    }
    Ok(())
}

/// A GPU that is there but unusable (any other error of opening it: the
/// kernel driver loaded and `cuInit` or `cuDeviceGetCount` failing, the PTX
/// refused, …) fails every GPU test, kernel-result ones included (no
/// fallback to the simulator), except kernel-result tests sent to the
/// simulator by `CUDA_KERNELS_SIM=1` (which fail too under
/// `CUDA_KERNELS_REQUIRE_GPU=1`).
fn a_broken_gpu_fails() -> Result<(), Failed> {
    for e in [
        classify_open_failure("cuInit", 3, true),
        classify_open_failure("cuInit", 999, true),
        classify_open_failure("cuDeviceGetCount", 101, true),
        Error::not_found("multiply"),
        Error::invalid("module", "PTX with a NUL byte"),
    ] {
        let why = NoGpu::from_error(&e);
        ensure(matches!(why, NoGpu::Broken(_)), || format!("{e}: {why:?}"))?;
        for mode in MODES {
            for required in [false, true] {
                for subject in [KERNEL, HARDWARE] {
                    let got = place("family::t", subject, Err(&why), mode, required);
                    if subject == KERNEL && mode == SimMode::Forced && required {
                        fails_naming(&got, &["family::t", REQUIRE_GPU, SIM])
                            .map_err(|m| format!("{e}, {SIM}=1, required: {m}"))?;
                    } else if subject == KERNEL && mode == SimMode::Forced {
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
/// kernel-result tests to the simulator (under `CUDA_KERNELS_REQUIRE_GPU=1`
/// it fails them instead), `CUDA_KERNELS_SIM_COMPARE=1` runs them on both;
/// hardware-only tests stay on the GPU.
fn a_gpu_runs_everything_unless_told() -> Result<(), Failed> {
    for required in [false, true] {
        for (mode, kernel) in [
            (SimMode::Fallback, Placement::Gpu),
            (SimMode::Forced, Placement::Sim),
            (SimMode::Compare, Placement::Both),
        ] {
            let at = |subject| place("family::t", subject, Ok(()), mode, required);
            if required && mode == SimMode::Forced {
                fails_naming(&at(KERNEL), &["family::t", REQUIRE_GPU, SIM])?;
            } else {
                ensure(at(KERNEL) == kernel, || {
                    format!("{mode:?}: kernel-result test: {:?}", at(KERNEL))
                })?;
            }
            ensure(at(HARDWARE) == Placement::Gpu, || {
                format!("{mode:?}: hardware-only test: {:?}", at(HARDWARE))
            })?;
        }
    }
    Ok(())
}

/// Issue 19: on a machine whose NVIDIA kernel driver is loaded but too old
/// for this program (`cuInit` gives `CUDA_ERROR_INSUFFICIENT_DRIVER`, 35, or
/// `CUDA_ERROR_SYSTEM_DRIVER_MISMATCH`, 803), a GPU test fails naming the
/// driver's error: it is neither ignored nor run on the simulator, with or
/// without `CUDA_KERNELS_REQUIRE_GPU=1`.
fn a_driver_too_old_fails_a_gpu_test_instead_of_ignoring_it() -> Result<(), Failed> {
    for code in [35, 803] {
        let e = classify_open_failure("cuInit", code, true);
        ensure(!e.is_no_gpu(), || format!("{e} counts as no GPU"))?;
        let why = NoGpu::from_error(&e);
        for required in [false, true] {
            for subject in [KERNEL, HARDWARE] {
                let got = place("family::t", subject, Err(&why), SimMode::Fallback, required);
                fails_naming(
                    &got,
                    &["family::t", "unusable", "cuInit", &code.to_string()],
                )
                .map_err(|m| format!("cuInit {code}, required {required}: {m}"))?;
            }
        }
    }
    Ok(())
}

/// `CUDA_KERNELS_MIN_GPUS`: a whole number of at least 1 (`abc` and `0` are
/// refused naming the variable), and fewer distinct usable devices (a
/// device listed twice counts once) fail, naming each unusable one and why.
fn min_gpus_is_a_positive_count_of_distinct_usable_devices() -> Result<(), Failed> {
    ensure(parse_min_gpus(None) == Ok(None), || "unset".into())?;
    ensure(parse_min_gpus(Some(" 2 ")) == Ok(Some(2)), || "2".into())?;
    for bad in ["abc", "0", "", "-1", "1.5"] {
        match parse_min_gpus(Some(bad)) {
            Err(m) if m.contains(MIN_GPUS) => {}
            other => return Err(format!("{MIN_GPUS}={bad:?}: {other:?}").into()),
        }
    }
    let device = |ordinal: u32, bus: &str, unusable: Option<&str>| {
        let mut d = cuda_kernels::device_info::simulated();
        d.ordinal = ordinal;
        d.name = "NVIDIA H200".into();
        d.pci_bus_id = bus.into();
        d.unusable = unusable.map(str::to_string);
        d
    };
    let two = vec![
        device(0, "0000:01:00.0", None),
        device(1, "0000:02:00.0", None),
    ];
    ensure(check_min_gpus(2, Ok(two.clone())).is_ok(), || {
        "two usable".into()
    })?;
    ensure(check_min_gpus(3, Ok(two)).is_err(), || {
        "three of two".into()
    })?;
    let one_twice = vec![
        device(0, "0000:01:00.0", None),
        device(1, "0000:01:00.0", None),
    ];
    ensure(check_min_gpus(2, Ok(one_twice)).is_err(), || {
        "one device listed twice counted as two".into()
    })?;
    let broken = vec![
        device(0, "0000:01:00.0", None),
        device(
            1,
            "0000:02:00.0",
            Some("compute capability 3.5: no kernel image"),
        ),
    ];
    match check_min_gpus(2, Ok(broken)) {
        Err(m) if m.contains("device 1 (NVIDIA H200): compute capability 3.5") => {}
        other => return Err(format!("an unusable device: {other:?}").into()),
    }
    let none = Err(Error::NoDevice {
        reason: "the driver reports 0 devices".into(),
    });
    match check_min_gpus(1, none) {
        Err(m) if m.contains(MIN_GPUS) && m.contains("0 devices") => {}
        other => return Err(format!("no devices: {other:?}").into()),
    }
    // This binary, run with a bad value, refuses to run.
    let (ok, text) = rerun_with(KERNEL_TEST, &[], &[(MIN_GPUS, "abc")])?;
    ensure(!ok && text.contains(&format!("{MIN_GPUS}=\"abc\"")), || {
        format!("{MIN_GPUS}=abc:\n{text}")
    })
}

/// One kernel-result test and one hardware-only test of this binary.
const KERNEL_TEST: &str = "foundation::multiply_strided_views";
const HARDWARE_TEST: &str = "foundation::empty_kernel_launch_rates";

/// Runs this binary again on `test` alone with the variables `env` set (and
/// the harness's other variables removed): whether it exited 0, and its
/// output.
fn rerun(test: &str, env: &[&str]) -> Result<(bool, String), Failed> {
    rerun_with(test, env, &[])
}

/// [`rerun`], with the variables `values` set to their values too.
fn rerun_with(test: &str, env: &[&str], values: &[(&str, &str)]) -> Result<(bool, String), Failed> {
    let exe = std::env::current_exe().map_err(fail)?;
    let mut cmd = Command::new(&exe);
    cmd.args(["--exact", test, "--test-threads", "1"]);
    for var in [REQUIRE_GPU, SIM, SIM_COMPARE, MIN_GPUS] {
        if env.contains(&var) {
            cmd.env(var, "1");
        } else {
            cmd.env_remove(var);
        }
    }
    cmd.envs(values.iter().copied());
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
    // The first line names the backend; under the first variable the second
    // fails a kernel-result test, GPU or not.
    let backend = if have_gpu() {
        "backend: GPU "
    } else {
        "backend: simulator (no CUDA"
    };
    expect(KERNEL_TEST, &[], true, &[backend.into()])?;
    expect(
        KERNEL_TEST,
        &[REQUIRE_GPU, SIM],
        false,
        &[
            format!("{KERNEL_TEST}: {REQUIRE_GPU}=1 but {SIM}=1"),
            "1 failed".into(),
        ],
    )?;
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
        Ok(())
    }
}
