//! The command-line program on a machine without a GPU: `info` fails with "no
//! CUDA device", demos exit 0 with a notice and the CPU results. (On a CUDA
//! machine these are reported as ignored: the GPU paths are tested there.)
// The root package's test harness (tests/common), shared with its test targets.
#[path = "../../tests/common/mod.rs"]
mod common;

use std::process::{Command, ExitCode};

use common::ensure;
use libtest_mimic::{Completion, Failed, Trial};

fn main() -> ExitCode {
    common::run(vec![
        no_gpu_test(
            "info_without_gpu_fails_clearly",
            info_without_gpu_fails_clearly,
        ),
        no_gpu_test(
            "demo_without_gpu_runs_cpu_and_exits_0",
            demo_without_gpu_runs_cpu_and_exits_0,
        ),
        with_binary(
            "ptx_command_prints_entry_points",
            ptx_command_prints_entry_points,
        ),
    ])
}

fn no_gpu_test(name: &str, body: fn() -> Result<(), Failed>) -> Trial {
    Trial::ignorable_test(name, move || {
        if common::have_gpu() {
            Ok(Completion::ignored_with(
                "a GPU is present: this checks the no-GPU path",
            ))
        } else {
            body().map(|()| Completion::Completed)
        }
    })
}

/// Runs only where the `cuda-kernels` binary is at its build path (not in a
/// packed run on the GPU machine).
fn with_binary(name: &str, body: fn() -> Result<(), Failed>) -> Trial {
    Trial::ignorable_test(name, move || {
        if std::path::Path::new(env!("CARGO_BIN_EXE_cuda-kernels")).exists() {
            body().map(|()| Completion::Completed)
        } else {
            Ok(Completion::ignored_with(
                "the cuda-kernels binary is not at its build path",
            ))
        }
    })
}

fn cli() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cuda-kernels"))
}

fn info_without_gpu_fails_clearly() -> Result<(), Failed> {
    let out = cli().arg("info").output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure(!out.status.success(), || {
        "info exited 0 without a GPU".into()
    })?;
    ensure(
        stderr.contains("no CUDA device") || stderr.contains("no CUDA driver"),
        || stderr.to_string(),
    )
}

fn demo_without_gpu_runs_cpu_and_exits_0() -> Result<(), Failed> {
    let out = cli().args(["multiply", "--n", "1000"]).output()?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    ensure(out.status.success(), || {
        format!("exit {:?}: {stderr}", out.status)
    })?;
    ensure(stderr.contains("notice:"), || stderr.to_string())?;
    ensure(
        stdout.contains("multiply (CPU only)") && stdout.contains("skipped: no GPU"),
        || stdout.to_string(),
    )
}

fn ptx_command_prints_entry_points() -> Result<(), Failed> {
    let out = cli().args(["ptx", "--summary"]).output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure(
        out.status.success() && stdout.contains("multiply") && stdout.contains("hello_kernel"),
        || stdout.to_string(),
    )
}
