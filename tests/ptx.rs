//! Offline PTX checks (no GPU needed): the embedded PTX holds every entry
//! point the host launches, `ptxas` assembles it for sm_70, sm_80 and sm_90
//! without register spills in any kernel, and the library embeds the sm_80
//! and sm_90 cubins.
//!
//! `ptxas` is the one `build.rs` (`cuda-kernels-builder`) found and used for
//! the cubins (`$PTXAS`, then `PATH`, then `.tools/ptxas`, where
//! `scripts/setup.sh` installs the PyPI wheel `nvidia-cuda-nvcc-cu12`, then
//! `/usr/local/cuda/bin`, then that wheel in `python3`'s environment). When there is none, or it cannot
//! target an architecture, the check is ignored with the reason, or fails in
//! CI ([`common::missing_prerequisite`]). Not part of the packed GPU run:
//! the GPU machine has only CUDA 13's `ptxas`, which dropped sm_70.
mod common;

use std::process::{Command, ExitCode};

use common::missing_prerequisite;

use libtest_mimic::{Arguments, Completion, Failed, Trial};

const ARCHS: &[&str] = &["sm_70", "sm_80", "sm_90"];

fn main() -> ExitCode {
    let mut trials = vec![
        Trial::test(
            "every_entry_point_is_in_the_ptx",
            every_entry_point_is_in_the_ptx,
        ),
        Trial::test("ptx_targets_the_built_arch", ptx_targets_the_built_arch),
        Trial::ignorable_test("cubins_are_embedded", cubins_are_embedded),
    ];
    for &arch in ARCHS {
        trials.push(Trial::ignorable_test(
            format!("ptxas_{arch}_assembles_without_spills"),
            move || assemble(arch),
        ));
    }
    libtest_mimic::run(&Arguments::from_args(), trials).exit_code()
}

/// The kernel crate's generated list (one `kernels!` declaration per
/// kernel) and the built PTX's entry points are the same set.
fn every_entry_point_is_in_the_ptx() -> Result<(), Failed> {
    let found = cuda_kernels::ptx_entry_points(cuda_kernels::PTX);
    let listed = cuda_kernels::entry_points();
    let missing: Vec<_> = listed.iter().filter(|e| !found.contains(e)).collect();
    let unlisted: Vec<_> = found.iter().filter(|e| !listed.contains(e)).collect();
    if missing.is_empty() && unlisted.is_empty() {
        Ok(())
    } else {
        Err(
            format!("missing from the PTX: {missing:?}; in the PTX but not declared: {unlisted:?}")
                .into(),
        )
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

/// The `ptxas` build.rs used (empty when it found none).
const PTXAS: &str = env!("CUDA_KERNELS_PTXAS");
const NO_PTXAS: &str = "the build found no ptxas: run scripts/setup.sh or set PTXAS, then rebuild";

/// An sm_80 and an sm_90 cubin (those at or above the PTX's target) are
/// embedded, each an ELF image.
fn cubins_are_embedded() -> Result<Completion, Failed> {
    if PTXAS.is_empty() {
        return missing_prerequisite(NO_PTXAS);
    }
    let built = sm(cuda_kernels::PTX_ARCH);
    for wanted in [80, 90].into_iter().filter(|&w| w >= built) {
        match cuda_kernels::CUBINS.iter().find(|c| c.sm == wanted) {
            None => {
                return Err(
                    format!("no sm_{wanted} cubin embedded (see the build warnings)").into(),
                );
            }
            Some(c) if !c.image.starts_with(b"\x7fELF") => {
                return Err(format!("the sm_{wanted} cubin is not an ELF image").into());
            }
            Some(_) => {}
        }
    }
    Ok(Completion::Completed)
}

/// 70 for "sm_70" (0 for anything else).
fn sm(arch: &str) -> u32 {
    arch.trim_start_matches("sm_").parse().unwrap_or(0)
}

/// Assembles the PTX for `arch` with `ptxas -v`; fails on an assembly error
/// or on any spill, and prints each kernel's registers and shared memory.
fn assemble(arch: &str) -> Result<Completion, Failed> {
    if PTXAS.is_empty() {
        return missing_prerequisite(NO_PTXAS);
    }
    let ptxas = std::path::Path::new(PTXAS);
    if sm(arch) < sm(cuda_kernels::PTX_ARCH) {
        return Ok(Completion::ignored_with(format!(
            "PTX built for {}",
            cuda_kernels::PTX_ARCH
        )));
    }
    let dir = std::env::temp_dir().join(format!("cuda-kernels-ptx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    // One input per architecture: the trials run in parallel, and a shared file rewritten by
    // one while another's ptxas reads it fails to parse (seen: "Parsing error near ''").
    let input = dir.join(format!("kernels-{arch}.ptx"));
    std::fs::write(&input, cuda_kernels::PTX).map_err(|e| e.to_string())?;
    let out = Command::new(ptxas)
        .args(["-v", &format!("-arch={arch}"), "-o"])
        .arg(dir.join(format!("kernels-{arch}.cubin")))
        .arg(&input)
        .output()
        .map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && log.contains("is not defined for option 'gpu-name'") {
        // CUDA 13's ptxas dropped sm_70 (seen on the H100 machine); the driver still JITs
        // it. The set-up pins the CUDA 12.9 wheel, which assembles it: CI runs this check.
        return missing_prerequisite(format!(
            "this ptxas ({}) cannot target {arch}: the set-up's pinned nvidia-cuda-nvcc-cu12 can",
            ptxas.display()
        ));
    }
    if !out.status.success() {
        return Err(format!("ptxas -arch={arch} failed:\n{log}").into());
    }
    if !dir.join(format!("kernels-{arch}.cubin")).is_file() {
        return Err(format!("ptxas -arch={arch} wrote no cubin:\n{log}").into());
    }
    // The recursive function of the fidelity family's recursion cases saves
    // its registers across its own call: its spills are the case itself.
    let mut function = "";
    let spills: Vec<&str> = log
        .lines()
        .filter(|l| {
            if let Some(f) = l.split("Function properties for ").nth(1) {
                function = f;
            }
            l.contains("spill stores")
                && !l.contains(" 0 bytes spill stores, 0 bytes spill loads")
                && !(function.contains("fidelity") && function.contains("recurse"))
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
