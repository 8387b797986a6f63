//! Offline PTX checks (no GPU needed): the embedded PTX holds every entry
//! point the host launches, and `ptxas` assembles it for sm_70, sm_80 and
//! sm_90 without register spills in any kernel.
//!
//! `ptxas` is taken from `$PTXAS`, then `PATH`, then `.tools/ptxas` (where
//! `scripts/setup.sh` installs the PyPI wheel `nvidia-cuda-nvcc-cu12`); when
//! none is found the assembly checks are reported as ignored, with the reason.
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use libtest_mimic::{Arguments, Completion, Failed, Trial};

const ARCHS: &[&str] = &["sm_70", "sm_80", "sm_90"];

fn main() -> ExitCode {
    let mut trials = vec![
        Trial::test(
            "every_entry_point_is_in_the_ptx",
            every_entry_point_is_in_the_ptx,
        ),
        Trial::test("ptx_targets_the_built_arch", ptx_targets_the_built_arch),
    ];
    for &arch in ARCHS {
        trials.push(Trial::ignorable_test(
            format!("ptxas_{arch}_assembles_without_spills"),
            move || assemble(arch),
        ));
    }
    libtest_mimic::run(&Arguments::from_args(), trials).exit_code()
}

fn every_entry_point_is_in_the_ptx() -> Result<(), Failed> {
    let found = cuda_kernels::ptx_entry_points(cuda_kernels::PTX);
    let missing: Vec<_> = cuda_kernels::entry_points()
        .into_iter()
        .filter(|e| !found.contains(e))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("missing from the PTX: {missing:?}").into())
    }
}

fn ptx_targets_the_built_arch() -> Result<(), Failed> {
    let target = format!(".target {}", cuda_kernels::PTX_ARCH);
    if cuda_kernels::PTX.lines().any(|l| l.trim() == target) {
        Ok(())
    } else {
        Err(format!("no `{target}` line in the PTX").into())
    }
}

fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PTXAS") {
        return Some(p.into());
    }
    if Command::new("ptxas")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Some("ptxas".into());
    }
    let local =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/ptxas/nvidia/cuda_nvcc/bin/ptxas");
    local.is_file().then_some(local)
}

/// Assembles the PTX for `arch` with `ptxas -v`; fails on an assembly error
/// or on any spill, and prints each kernel's registers and shared memory.
fn assemble(arch: &str) -> Result<Completion, Failed> {
    let Some(ptxas) = find_ptxas() else {
        return Ok(Completion::ignored_with(
            "no ptxas: run scripts/setup.sh or set PTXAS",
        ));
    };
    let built = cuda_kernels::PTX_ARCH
        .trim_start_matches("sm_")
        .parse::<u32>()
        .unwrap_or(0);
    let wanted = arch.trim_start_matches("sm_").parse::<u32>().unwrap_or(0);
    if wanted < built {
        return Ok(Completion::ignored_with(format!(
            "PTX built for {}",
            cuda_kernels::PTX_ARCH
        )));
    }
    let dir = std::env::temp_dir().join(format!("cuda-kernels-ptx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let input = dir.join("kernels.ptx");
    std::fs::write(&input, cuda_kernels::PTX).map_err(|e| e.to_string())?;
    let out = Command::new(&ptxas)
        .args(["-v", &format!("-arch={arch}"), "-o"])
        .arg(dir.join(format!("kernels-{arch}.cubin")))
        .arg(&input)
        .output()
        .map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && log.contains("is not defined for option 'gpu-name'") {
        // CUDA 13's ptxas dropped sm_70 (seen on the H100 machine); the driver still JITs it.
        return Ok(Completion::ignored_with(format!(
            "this ptxas ({}) cannot target {arch}",
            ptxas.display()
        )));
    }
    if !out.status.success() {
        return Err(format!("ptxas -arch={arch} failed:\n{log}").into());
    }
    let spills: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("spill stores") && !l.contains(" 0 bytes spill stores, 0 bytes spill loads")
        })
        .collect();
    if std::env::var_os("PTXAS_VERBOSE").is_some() {
        eprintln!("{log}");
    }
    if spills.is_empty() {
        Ok(Completion::Completed)
    } else {
        Err(format!(
            "register spills for {arch}:\n{}\n\nfull log:\n{log}",
            spills.join("\n")
        )
        .into())
    }
}
