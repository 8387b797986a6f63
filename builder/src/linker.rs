//! The inner build's linker (`prune_link.rs`, a program of its own):
//! compiled once per compiler with the host `rustc` into the user's cache
//! (`~/.cache/cuda-kernels/linker/<key>/cuda-kernels-link`, the key hashing
//! the source and `rustc -vV`), and passed to the inner build as
//! `-Clinker`, with the toolchain's LLVM tools named in
//! `CUDA_KERNELS_LLVM_BIN`. Where it cannot be had, the inner build uses
//! rustc's own `llvm-bitcode-linker` as before.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sysroot::{Compiler, fnv1a};

/// The linker's source.
const SOURCE: &str = include_str!("prune_link.rs");

/// The variable that names the LLVM tools' folder for the linker.
pub const LLVM_BIN_VAR: &str = "CUDA_KERNELS_LLVM_BIN";

/// The linker for `compiler`, from the cache or compiled into it now, and
/// the LLVM tools' folder it needs; `None` when either cannot be had.
pub fn for_compiler(compiler: &Compiler) -> Option<(PathBuf, PathBuf)> {
    let bin = compiler
        .host_sysroot
        .join("lib")
        .join("rustlib")
        .join(&compiler.host)
        .join("bin");
    let tools = [
        "llvm-link",
        "opt",
        "llvm-nm",
        "self-contained/llvm-bitcode-linker",
    ];
    if !tools.iter().all(|t| bin.join(t).is_file()) {
        return None;
    }
    let key = fnv1a(&[SOURCE, &compiler.version]);
    let dir = crate::tools::cache_root()?
        .join("linker")
        .join(format!("{key:016x}"));
    let exe = dir.join("cuda-kernels-link");
    if !exe.is_file() {
        compile(&compiler.rustc, &dir, &exe)?;
    }
    Some((exe, bin))
}

/// Compiles the linker to `exe` (through a file of this call's own, renamed
/// into place: other builds may be compiling it too).
fn compile(rustc: &Path, dir: &Path, exe: &Path) -> Option<()> {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    std::fs::create_dir_all(dir).ok()?;
    let scratch = dir.join(format!(".{}-{call}", std::process::id()));
    std::fs::create_dir_all(&scratch).ok()?;
    let source = scratch.join("prune_link.rs");
    std::fs::write(&source, SOURCE).ok()?;
    let built = scratch.join("cuda-kernels-link");
    let status = Command::new(rustc)
        .args([
            "--edition",
            "2024",
            "-Copt-level=1",
            "--crate-name",
            "cuda_kernels_link",
        ])
        .arg(&source)
        .arg("-o")
        .arg(&built)
        .env_remove("RUSTFLAGS")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    let placed = status.success() && std::fs::rename(&built, exe).is_ok();
    let _ = std::fs::remove_dir_all(&scratch);
    (placed || exe.is_file()).then_some(())
}

/// The linker's own code, for its tests.
#[cfg(test)]
#[allow(dead_code)]
#[path = "prune_link.rs"]
mod prune_link;

#[cfg(test)]
mod tests {
    use super::prune_link;
    use std::ffi::OsString;

    fn args(text: &str) -> Vec<OsString> {
        text.split(' ').map(OsString::from).collect()
    }

    #[test]
    fn rustcs_arguments_split_into_exports_inputs_and_the_rest() {
        let parsed = prune_link::Parsed::of(&args(
            "--export-symbol saxpy --export-symbol REC /d/k.o /d/libdev.rlib /s/libcore.rlib \
             -L /d/raw --target nvptx64-nvidia-cuda --target-cpu sm_70 \
             --target-feature=+ptx32,+ptx62 -L /s/sc -o /d/k.ptx -O3 --debug",
        ))
        .expect("parsed");
        assert_eq!(parsed.exports, ["saxpy", "REC"]);
        assert_eq!(parsed.inputs, args("/d/k.o /d/libdev.rlib /s/libcore.rlib"));
        assert_eq!(parsed.output, std::path::Path::new("/d/k.ptx"));
        assert!(parsed.debug);
        assert_eq!(parsed.level.as_deref(), Some("3"));
        assert_eq!(parsed.cpu.as_deref(), Some("sm_70"));
        assert_eq!(parsed.features.as_deref(), Some("+ptx32,+ptx62"));
    }

    #[test]
    fn an_unknown_argument_leaves_the_inputs_as_they_are() {
        assert!(
            prune_link::Parsed::of(&args("--export-symbol k /d/k.o -o /d/k.ptx --new")).is_none()
        );
        assert!(
            prune_link::Parsed::of(&args("/d/k.o -o /d/k.ptx")).is_none(),
            "no export"
        );
    }
}
