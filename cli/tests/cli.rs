//! The command-line program on a machine without a GPU: `info` fails with "no
//! CUDA device"; a demo runs on the simulator, says so, checks its results
//! and prints no GPU time; with `--sim` the same on any machine, the whole
//! `demo` included (its pictures written); `bench --sim` measures nothing
//! and says why. (On a CUDA machine the no-GPU tests are reported as
//! ignored: the GPU paths are tested there.) And the tables generated into
//! README.md and docs/*.md are current.
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
            "demo_without_gpu_runs_on_the_simulator",
            demo_without_gpu_runs_on_the_simulator,
        ),
        with_binary("demo_sim_checks_every_result", demo_sim_checks_every_result),
        with_binary("bench_sim_measures_nothing", bench_sim_measures_nothing),
        with_binary(
            "multi_sim_both_backends_and_rank_processes",
            multi_sim_both_backends_and_rank_processes,
        ),
        with_binary(
            "ptx_command_prints_entry_points",
            ptx_command_prints_entry_points,
        ),
        with_binary(
            "generated_tables_in_readme_and_docs_are_current",
            generated_tables_in_readme_and_docs_are_current,
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

/// The rows of a simulated run's table: each one checked (`ok`) or a
/// hardware-only demo (`skipped: hardware-only`), none failed, none timed
/// (the "GPU ms" and throughput cells are `-`); the table says it was
/// simulated. Returns how many rows were checked.
fn simulated_table(stdout: &str) -> Result<usize, Failed> {
    ensure(stdout.contains("SIMULATED"), || {
        format!("the output does not say it was simulated:\n{stdout}")
    })?;
    let table = stdout
        .split_once("GPU ms (none: simulated)")
        .map(|(_, t)| t)
        .ok_or_else(|| Failed::from(format!("no simulated table:\n{stdout}")))?;
    let mut checked = 0;
    for line in table
        .lines()
        .filter(|l| l.contains("[sim]") || l.contains("skipped"))
    {
        if line.contains("[sim]") {
            ensure(line.contains("ok ("), || format!("not checked: {line}"))?;
            checked += 1;
        } else {
            ensure(line.contains("skipped: hardware-only"), || {
                format!("skipped for another reason: {line}")
            })?;
        }
    }
    ensure(!table.contains("FAILED"), || {
        format!("a check failed:\n{stdout}")
    })?;
    Ok(checked)
}

fn demo_without_gpu_runs_on_the_simulator() -> Result<(), Failed> {
    let out = cli().args(["multiply", "--n", "1000"]).output()?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    ensure(out.status.success(), || {
        format!("exit {:?}: {stderr}", out.status)
    })?;
    ensure(
        stderr.contains("notice:") && stderr.contains("SIMULATED"),
        || stderr.to_string(),
    )?;
    ensure(simulated_table(&stdout)? == 1, || stdout.to_string())?;
    ensure(stdout.contains("multiply [sim]"), || stdout.to_string())
}

/// `cuda-kernels demo --sim`: every demo, each kernel's result checked on
/// the simulator, the hardware-only ones said so, the pictures written.
fn demo_sim_checks_every_result() -> Result<(), Failed> {
    let dir = std::env::temp_dir().join(format!("cuda-kernels-demo-sim-{}", std::process::id()));
    let out = cli()
        .args(["demo", "--sim", "--out-dir"])
        .arg(&dir)
        .output()?;
    let pictures = ["mandelbrot.png", "life.gif"].map(|p| dir.join(p).is_file());
    let _ = std::fs::remove_dir_all(&dir);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    ensure(out.status.success(), || {
        format!("exit {:?}: {stdout}\n{stderr}", out.status)
    })?;
    let checked = simulated_table(&stdout)?;
    ensure(checked >= 20, || {
        format!("only {checked} results checked:\n{stdout}")
    })?;
    ensure(pictures == [true, true], || {
        format!("pictures written (mandelbrot.png, life.gif): {pictures:?}")
    })
}

fn bench_sim_measures_nothing() -> Result<(), Failed> {
    let out = cli().args(["bench", "--sim"]).output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure(out.status.success(), || {
        format!("exit {:?}: {stderr}", out.status)
    })?;
    ensure(
        stderr.contains("bench needs a GPU: no timings on the simulator"),
        || stderr.to_string(),
    )
}

/// `multi --sim`: both backends on three simulated devices, every check
/// passed; `--ranks N` (the launcher, N rank processes joined through the
/// simulated clique's hub, the id by each transport) passes; a rank killed
/// at the start or in the middle makes the others fail with a typed error
/// by their deadline, never hang.
fn multi_sim_both_backends_and_rank_processes() -> Result<(), Failed> {
    let out = cli().args(["multi", "--sim"]).output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure(out.status.success(), || {
        format!("exit {:?}: {stdout}", out.status)
    })?;
    for backend in ["peer", "nccl"] {
        ensure(
            stdout.contains(&format!("{backend}: Life 67² × 9 equals the CPU's")),
            || stdout.to_string(),
        )?;
    }
    let file = std::env::temp_dir().join(format!("ck-multi-id-{}", std::process::id()));
    for (ranks, id) in [
        ("3", "tcp".to_string()),
        ("2", "env".into()),
        ("1", format!("file:{}", file.display())),
    ] {
        let out = cli()
            .args(["multi", "--sim", "--ranks", ranks, "--id", &id])
            .output()?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        ensure(out.status.success(), || {
            format!("{ranks} ranks, {id}: {stdout}")
        })?;
        ensure(
            stdout.contains("rank 0: SGEMM: the whole equals one GPU's, bit for bit")
                && stdout.contains("every rank passed"),
            || format!("{ranks} ranks, {id}: {stdout}"),
        )?;
    }
    let _ = std::fs::remove_file(&file);
    for after in ["0", "60"] {
        let since = std::time::Instant::now();
        let out = cli()
            .env("CUDA_KERNELS_NCCL_TIMEOUT_MS", "3000")
            .args(["multi", "--sim", "--ranks", "3", "--kill-rank", "1"])
            .args(["--kill-after-ms", after])
            .output()?;
        let took = since.elapsed();
        let text = String::from_utf8_lossy(&out.stdout);
        ensure(
            !out.status.success() && text.contains("rank 1: killed as asked"),
            || format!("kill after {after} ms: {text}"),
        )?;
        // Killed before it joined: the others' set-up passes its deadline;
        // killed later: they fail at once, or finished before the kill. A
        // rank that started late (a loaded CI machine) may also find that
        // the launcher stopped serving the unique id at that deadline: its
        // connection is reset, and it fails with that I/O error.
        for rank in [0, 2] {
            let typed = [
                format!("on rank {rank} of 3: not finished after"),
                format!("on rank {rank}: rank 1, which it waits for, is gone"),
            ];
            let passed = format!("rank {rank}: exit status: 0");
            let id_unserved = text.contains("error: fetching the unique id from")
                && text.contains(&format!("rank {rank}: exit status: 1"));
            ensure(
                typed.iter().any(|t| text.contains(t))
                    || id_unserved
                    || (after != "0" && text.contains(&passed)),
                || format!("kill after {after} ms, rank {rank}: {text}"),
            )?;
        }
        ensure(took < std::time::Duration::from_secs(60), || {
            format!("kill after {after} ms took {took:?}")
        })?;
    }
    Ok(())
}

fn ptx_command_prints_entry_points() -> Result<(), Failed> {
    let out = cli().args(["ptx", "--summary"]).output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure(
        out.status.success() && stdout.contains("multiply") && stdout.contains("hello_kernel"),
        || stdout.to_string(),
    )
}

/// The tables generated into README.md and docs/*.md (the bench tables from
/// the JSON their first line names, the entry points from `KERNEL_LISTS`)
/// equal what `cuda-kernels docs-tables` renders now; the failure names the
/// stale files and the command that regenerates them.
fn generated_tables_in_readme_and_docs_are_current() -> Result<(), Failed> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = cli()
        .args(["docs-tables", "--check"])
        .current_dir(root)
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure(out.status.success(), || stderr.to_string())
}
