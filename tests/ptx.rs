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

use libtest_mimic::{Completion, Failed, Trial};

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
    trials.push(Trial::test(
        "no_aligned_barrier_nor_narrowing_store_in_any_image",
        no_aligned_barrier_nor_narrowing_store_in_any_image,
    ));
    trials.push(Trial::ignorable_test(
        "sm_90a_build_holds_the_wgmma_gemm_unserialised",
        sm_90a_build_holds_the_wgmma_gemm_unserialised,
    ));
    for &arch in ARCHS {
        trials.push(Trial::ignorable_test(
            format!("ptxas_{arch}_assembles_without_spills"),
            move || assemble(arch),
        ));
    }
    common::run(trials)
}

/// The kernel crate's generated list (one `kernels!` declaration per
/// kernel) and the built PTX's entry points are the same set.
fn every_entry_point_is_in_the_ptx() -> Result<(), Failed> {
    let found = cuda_kernels::ptx_entry_points(cuda_kernels::PTX);
    let listed = cuda_kernels::entry_points();
    // The tensor-core kernels exist in the sm_80 and later images alone.
    let arch_only = cuda_kernels::kernels::gemm::GEMM_SM80_KERNELS;
    let missing: Vec<_> = listed
        .iter()
        .filter(|e| !found.contains(e) && !arch_only.contains(e))
        .collect();
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

/// Every image the build embeds (the portable PTX and each architecture's)
/// holds no aligned barrier (`sync_threads` is the non-aligned
/// `barrier.sync 0` from sm_70: a copy LLVM makes of it cannot hang a
/// block, docs/known-issues.md) and no narrowing store of a 64-bit register
/// that the builder's rewrite would still change (the builder checks and
/// mends every image it writes; this holds that it did).
fn no_aligned_barrier_nor_narrowing_store_in_any_image() -> Result<(), Failed> {
    use cuda_kernels_builder::ptx;
    let mut images = vec![(cuda_kernels::PTX_ARCH, cuda_kernels::PTX.to_string())];
    for (arch, path) in env!("CUDA_KERNELS_ARCH_PTX")
        .split(';')
        .filter_map(|entry| entry.split_once('='))
    {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        images.push((arch, text));
    }
    let mut bad = Vec::new();
    for (arch, text) in &images {
        let text = text.as_str();
        let aligned: Vec<_> = text
            .lines()
            .map(str::trim_start)
            .filter(|l| l.starts_with("bar.") && !l.starts_with("bar.warp"))
            .collect();
        if !aligned.is_empty() {
            bad.push(format!(
                "{arch}: {} aligned barriers, the first `{}`",
                aligned.len(),
                aligned[0]
            ));
        }
        if let Err(d) = ptx::check_aligned_barriers(text) {
            bad.push(format!("{arch}: {d:?}"));
        }
        let again = ptx::mend_narrowing_stores(text);
        if again.instructions > 0 {
            bad.push(format!(
                "{arch}: narrowing stores left in {:?}",
                again.functions
            ));
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad.join("\n").into())
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
    let spills = spill_lines(&log);
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

/// The PTX of the sm_90a build (build.rs's `CUDA_KERNELS_ARCH_PTX`).
fn arch_ptx(arch: &str) -> Option<&'static str> {
    env!("CUDA_KERNELS_ARCH_PTX")
        .split(';')
        .find_map(|entry| entry.strip_prefix(arch)?.strip_prefix('='))
}

/// The sm_90a build holds the wgmma GEMM's entry points (and the portable
/// PTX none of them), they and the histogram's alone carry a `.maxnreg`
/// (of `gemm_wgmma::MAX_REGISTERS` and `histogram::MAX_REGISTERS`: the
/// builder's per-entry limit, so that the image's other kernels keep their
/// own register counts), and `ptxas`
/// assembles it as the build does without spills, with `setmaxnreg`
/// honoured and no wgmma serialised (ptxas's C7508 and C7518 notes: a kernel whose
/// warpgroup branch ptxas thinks divergent, or whose accumulators it sees
/// touched in flight, runs its wgmma one at a time).
fn sm_90a_build_holds_the_wgmma_gemm_unserialised() -> Result<Completion, Failed> {
    if PTXAS.is_empty() {
        return missing_prerequisite(NO_PTXAS);
    }
    let Some(path) = arch_ptx("sm_90a") else {
        return Err("build.rs built no sm_90a PTX".into());
    };
    let ptx = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let entries = cuda_kernels::ptx_entry_points(&ptx);
    let portable = cuda_kernels::ptx_entry_points(cuda_kernels::PTX);
    for &kernel in cuda_kernels::kernels::gemm_wgmma::KERNELS {
        if !entries.contains(&kernel) {
            return Err(format!("{kernel} is not in the sm_90a PTX").into());
        }
        if portable.contains(&kernel) {
            return Err(format!("{kernel} is in the portable PTX").into());
        }
    }
    let mut limited = entries_with_maxnreg(&ptx);
    limited.sort();
    use cuda_kernels::kernels::{gemm_wgmma, histogram};
    let mut expected: Vec<(&str, u32)> = gemm_wgmma::KERNELS
        .iter()
        .map(|&k| (k, gemm_wgmma::MAX_REGISTERS))
        .chain(
            histogram::HISTOGRAM_KERNELS
                .iter()
                .map(|&k| (k, histogram::MAX_REGISTERS)),
        )
        .collect();
    expected.sort();
    if limited != expected {
        return Err(format!(
            "entries with a .maxnreg: {limited:?}, expected the wgmma GEMM's and the histogram's alone: {expected:?}"
        )
        .into());
    }
    let dir = std::env::temp_dir().join(format!("cuda-kernels-ptx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let out = Command::new(PTXAS)
        .args(["-v", "-arch=sm_90a", "-o"])
        .arg(dir.join("kernels-sm_90a.cubin"))
        .arg(path)
        .output()
        .map_err(|e| format!("running {PTXAS}: {e}"))?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("ptxas -arch=sm_90a failed:\n{log}").into());
    }
    let mut bad: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("C7508") || l.contains("C7518"))
        .collect();
    bad.extend(spill_lines(&log));
    if bad.is_empty() {
        Ok(Completion::Completed)
    } else {
        Err(format!(
            "ptxas -arch=sm_90a:\n{}\n\nfull log:\n{log}",
            bad.join("\n")
        )
        .into())
    }
}

/// The entry points of `ptx` whose header has a `.maxnreg`, with it, in
/// order.
fn entries_with_maxnreg(ptx: &str) -> Vec<(&str, u32)> {
    let mut entry = "";
    let mut out = Vec::new();
    for line in ptx.lines() {
        if let Some(rest) = line.split(".entry ").nth(1) {
            entry = rest.split('(').next().unwrap_or("").trim();
        } else if let Some(n) = line.trim().strip_prefix(".maxnreg ") {
            out.push((entry, n.trim().parse().unwrap_or(0)));
        }
    }
    out
}

/// The lines of a `ptxas -v` log that report spills, but for the recursive
/// function of the fidelity family's recursion cases: it saves its registers
/// across its own call, and those spills are the case itself.
fn spill_lines(log: &str) -> Vec<&str> {
    let mut function = "";
    log.lines()
        .filter(|l| {
            if let Some(f) = l.split("Function properties for ").nth(1) {
                function = f;
            }
            l.contains("spill stores")
                && !l.contains(" 0 bytes spill stores, 0 bytes spill loads")
                && !(function.contains("fidelity") && function.contains("recurse"))
        })
        .collect()
}
