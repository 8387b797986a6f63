//! The nvptx64 `core` built once per compiler and architecture, and kept.
//!
//! No toolchain ships `rust-std` for nvptx64, so the kernels need `core`
//! (and `compiler_builtins`) built from the toolchain's `rust-src`: with
//! `-Zbuild-std=core` that is 20 s of a first build on two cores, in every
//! project and again after each `cargo clean`, for the same bytes each time.
//! Here it is built once, by the same inner build with the same flags and
//! profile (but for its codegen units, see [`CODEGEN_UNITS`]), from an empty
//! `no_std` crate, and its two libraries are kept in
//! a sysroot in the user's cache (`~/.cache/cuda-kernels/sysroot/<arch>-<key>`,
//! the key hashing the compiler's `rustc -vV`, the flags and the profile).
//! The kernel crate's inner build then takes them with `--sysroot` instead of
//! building them: the same libraries, so the same PTX (checked on this
//! repository's kernels for sm_70, sm_80 and sm_90a when this was written:
//! identical but for the crate hashes in mangled names and anonymous
//! constants), without the 20 s.
//!
//! The sysroot's host half is a link to the compiler's own (its codegen
//! backends and the `llvm-bitcode-linker` live there). Anything that fails
//! here (no cache folder, a failed build, a full disk) leaves the inner
//! build to `-Zbuild-std=core` as before, whose own errors then say what is
//! wrong.
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::inner::{self, TARGET};

/// Bumped when what goes into a sysroot changes in a way the key does not see.
const FORMAT: &str = "sysroot 1";

/// `core`'s codegen units. Its LLVM half (6 of its 16 s on two cores with
/// one unit) then runs on every core the build has, and the machine's first
/// kernel build takes 12 s for `core` instead of 16.5 (measured on two
/// cores). `core` reaches the kernels as bitcode, which the link optimises
/// again as one module: this repository's kernels compiled to the same PTX
/// for sm_70, sm_80 and sm_90a when this was written, but for the order of
/// two of `core`'s declarations and the numbering of anonymous constants.
const CODEGEN_UNITS: &str = "16";

/// The libraries a `no_std` kernel crate links from the sysroot.
const LIBRARIES: [&str; 2] = ["libcore-", "libcompiler_builtins-"];

/// The file whose presence says a sysroot is complete (written last, before
/// the folder is renamed into place).
const COMPLETE: &str = "complete";

/// The compiler the inner builds run (`$RUSTC`, as cargo gives it to build
/// scripts, else `rustc`), as the caches key it.
#[derive(Debug, Clone)]
pub struct Compiler {
    /// The program.
    pub rustc: PathBuf,
    /// Its `rustc -vV`.
    pub version: String,
    /// Its host triple.
    pub host: String,
    /// Its own sysroot (`rustc --print sysroot`).
    pub host_sysroot: PathBuf,
}

impl Compiler {
    /// The compiler, or `None` when it cannot be asked.
    pub fn find() -> Option<Self> {
        let rustc = PathBuf::from(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()));
        let version = output(Command::new(&rustc).arg("-vV"))?;
        let host = version
            .lines()
            .find_map(|l| l.strip_prefix("host: "))?
            .trim()
            .to_string();
        let host_sysroot =
            PathBuf::from(output(Command::new(&rustc).args(["--print", "sysroot"]))?.trim());
        Some(Self {
            rustc,
            version,
            host,
            host_sysroot,
        })
    }
}

/// The sysroot with `core` built for `arch`, from the cache or built into it
/// now; `None` when it cannot be had (the caller builds `core` itself).
pub fn for_arch(cargo: &OsStr, compiler: &Compiler, arch: &str) -> Option<PathBuf> {
    let Compiler {
        version,
        host,
        host_sysroot,
        ..
    } = compiler;
    let flags = inner::rustflags(arch, None);
    let profile: String = inner::PROFILE
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    let key = fnv1a(&[
        FORMAT,
        CODEGEN_UNITS,
        version,
        &flags,
        &profile,
        &host_sysroot.to_string_lossy(),
    ]);
    let root = crate::tools::cache_root()?.join("sysroot");
    let dir = root.join(format!("{arch}-{key:016x}"));
    if target_lib(&dir).join(COMPLETE).is_file() {
        return Some(dir);
    }
    // A scratch folder of this call's own: other processes and threads may
    // be building the same sysroot at the same time.
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let scratch = root.join(format!(".{arch}-{key:016x}-{}-{call}", std::process::id()));
    let built = build(cargo, &scratch, arch, host, host_sysroot);
    if built.is_some() {
        // Another build may have put the same sysroot in place meanwhile:
        // then this rename fails and that one is used.
        let _ = std::fs::rename(scratch.join("sysroot"), &dir);
    }
    let _ = std::fs::remove_dir_all(&scratch);
    target_lib(&dir).join(COMPLETE).is_file().then_some(dir)
}

/// Builds `core` for `arch` in `scratch` and lays out `scratch/sysroot`.
fn build(cargo: &OsStr, scratch: &Path, arch: &str, host: &str, host_sysroot: &Path) -> Option<()> {
    let probe = scratch.join("probe");
    std::fs::create_dir_all(probe.join("src")).ok()?;
    std::fs::write(
        probe.join("Cargo.toml"),
        "[package]\nname = \"nvptx-sysroot\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
         [lib]\npath = \"src/lib.rs\"\n[workspace]\n",
    )
    .ok()?;
    std::fs::write(probe.join("src/lib.rs"), "#![no_std]\n").ok()?;
    let target_dir = scratch.join("target");
    let mut cmd = inner::command(cargo, &probe, &target_dir, arch, None, None, None);
    cmd.env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", CODEGEN_UNITS);
    let status = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    if !status.success() {
        return None;
    }
    let deps = target_dir.join(TARGET).join("release").join("deps");
    let lib = target_lib(&scratch.join("sysroot"));
    std::fs::create_dir_all(&lib).ok()?;
    let mut found = 0;
    for entry in std::fs::read_dir(&deps).ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".rlib") && LIBRARIES.iter().any(|l| name.starts_with(l)) {
            std::fs::copy(entry.path(), lib.join(&name)).ok()?;
            found += 1;
        }
    }
    if found != LIBRARIES.len() {
        return None;
    }
    #[cfg(unix)]
    std::os::unix::fs::symlink(
        host_sysroot.join("lib").join("rustlib").join(host),
        scratch
            .join("sysroot")
            .join("lib")
            .join("rustlib")
            .join(host),
    )
    .ok()?;
    #[cfg(not(unix))]
    return None;
    std::fs::write(lib.join(COMPLETE), "").ok()
}

/// Where a sysroot keeps the target's libraries.
fn target_lib(sysroot: &Path) -> PathBuf {
    sysroot.join("lib").join("rustlib").join(TARGET).join("lib")
}

/// A command's stdout when it succeeds.
fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.stderr(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// FNV-1a over the parts, each followed by a 0 byte: a stable hash with no
/// dependency.
pub(crate) fn fnv1a(parts: &[&str]) -> u64 {
    parts
        .iter()
        .flat_map(|p| p.bytes().chain([0]))
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_changes_with_each_part() {
        let base = fnv1a(&["a", "b"]);
        assert_ne!(base, fnv1a(&["ab", ""]), "parts are separated");
        assert_ne!(base, fnv1a(&["a", "c"]));
        assert_eq!(base, fnv1a(&["a", "b"]));
    }

    #[test]
    fn the_target_libraries_sit_where_rustc_looks() {
        assert_eq!(
            target_lib(Path::new("/c/s")),
            Path::new("/c/s/lib/rustlib/nvptx64-nvidia-cuda/lib")
        );
    }
}
