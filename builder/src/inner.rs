//! The inner `cargo build` for nvptx64 and what is read from its output.
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target triple the kernels are built for.
pub const TARGET: &str = "nvptx64-nvidia-cuda";

/// Variables of the outer build that must not reach the inner one: its
/// flags, target, target directory and compiler wrappers.
pub const STRIPPED_VARS: [&str; 10] = [
    "RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_BUILD_TARGET",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER",
    "CARGO_PRIMARY_PACKAGE",
];

/// The kernels' own release profile (the outer workspace's is the host's).
pub const PROFILE: [(&str, &str); 7] = [
    ("CARGO_PROFILE_RELEASE_OPT_LEVEL", "3"),
    ("CARGO_PROFILE_RELEASE_LTO", "fat"),
    ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1"),
    ("CARGO_PROFILE_RELEASE_PANIC", "abort"),
    ("CARGO_PROFILE_RELEASE_DEBUG", "false"),
    ("CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS", "false"),
    ("CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS", "false"),
];

/// The PTX ISA an architecture needs, as an nvptx target feature, where
/// LLVM's default (PTX 6.0) is too old for it: 7.0 for sm_80, 7.1 for
/// sm_86, 7.4 for sm_87, 7.8 for sm_89, 8.0 for sm_90 and sm_90a.
pub fn ptx_isa(arch: &str) -> Option<&'static str> {
    match arch.strip_prefix("sm_")? {
        "80" => Some("ptx70"),
        "86" => Some("ptx71"),
        "87" => Some("ptx74"),
        "89" => Some("ptx78"),
        "90" | "90a" => Some("ptx80"),
        _ => None,
    }
}

/// `CARGO_ENCODED_RUSTFLAGS` for the inner build: the PTX target (and the
/// PTX ISA it needs) and, when given, libdevice for the bitcode linker
/// (which keeps only what the kernels call).
pub fn rustflags(arch: &str, libdevice: Option<&Path>) -> String {
    let mut flags = format!("-Ctarget-cpu={arch}");
    if let Some(isa) = ptx_isa(arch) {
        flags.push_str(&format!("\x1f-Ctarget-feature=+{isa}"));
    }
    if let Some(path) = libdevice {
        flags.push_str(&format!("\x1f-Clink-arg={}", path.display()));
    }
    flags
}

/// The inner build: `cargo build --release --target nvptx64-nvidia-cuda
/// -Zbuild-std=core` of the crate in `crate_dir` into `target_dir`, with
/// `RUSTC_BOOTSTRAP=1` for it alone, its own flags and profile, and the
/// outer build's flags, target and wrappers stripped.
pub fn command(
    cargo: &OsStr,
    crate_dir: &Path,
    target_dir: &Path,
    arch: &str,
    libdevice: Option<&Path>,
) -> Command {
    let mut cmd = Command::new(cargo);
    cmd.current_dir(crate_dir)
        .args(["build", "--release", "--target", TARGET, "-Zbuild-std=core"])
        .arg("--message-format=json-render-diagnostics")
        .arg("--manifest-path")
        .arg(crate_dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags(arch, libdevice))
        .envs(PROFILE);
    for var in STRIPPED_VARS {
        cmd.env_remove(var);
    }
    cmd
}

/// The `.ptx` file among the artifacts cargo reported on stdout (JSON
/// messages, one a line). `None` when the crate made none (it is not a
/// `cdylib`).
pub fn ptx_artifact(stdout: &str) -> Option<PathBuf> {
    stdout
        .lines()
        .filter(|l| l.contains(r#""reason":"compiler-artifact""#))
        .filter_map(|l| l.split_once(r#""filenames":["#).map(|(_, rest)| rest))
        .filter_map(|rest| rest.split_once(']').map(|(list, _)| list))
        .flat_map(|list| list.split(','))
        .map(|quoted| quoted.trim().trim_matches('"'))
        .filter(|f| f.ends_with(".ptx"))
        // JSON escapes: only `\\` and `\"` can occur in a Unix path.
        .map(|f| PathBuf::from(f.replace(r"\\", r"\").replace(r#"\""#, "\"")))
        .next_back()
}

/// The source files a dep-info file (`<artifact>.d`: `target: file file …`,
/// spaces in names escaped as `\ `) lists.
pub fn dep_info_files(text: &str) -> Vec<PathBuf> {
    let Some((_, files)) = text.lines().next().and_then(|l| l.split_once(": ")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = files.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                current.push(' ');
                chars.next();
            }
            ' ' => {
                if !current.is_empty() {
                    out.push(PathBuf::from(std::mem::take(&mut current)));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        out.push(PathBuf::from(current));
    }
    out
}

/// The warning rustc gives for the PTX ISA feature [`rustflags`] passes
/// (`ptx80` is an unstable target feature): the builder's own choice, not the
/// kernel crate's to act on, so not forwarded; nor are cargo's counts of
/// warnings (`generated 1 warning`).
const OWN_WARNINGS: [&str; 2] = [
    "warning: unstable feature specified for `-Ctarget-feature`: `ptx",
    ") generated ",
];

/// Each warning block of the inner build's stderr (from a `warning` line to
/// the next blank line, `error` line or cargo status line), line by line,
/// less the builder's own ([`OWN_WARNINGS`]).
pub fn warnings(stderr: &str) -> Vec<&str> {
    let mut in_warning = false;
    let mut out = Vec::new();
    for line in stderr.lines() {
        // Cargo's status lines: an indented capitalised verb ("    Finished …").
        let status = line.starts_with(' ')
            && line.split_whitespace().next().is_some_and(|w| {
                w.starts_with(|c: char| c.is_ascii_uppercase())
                    && w.chars().all(|c| c.is_ascii_alphabetic())
            });
        if line.starts_with("warning") {
            in_warning = !OWN_WARNINGS.iter().any(|own| line.contains(own));
        } else if line.trim().is_empty() || status || line.starts_with("error") {
            in_warning = false;
        }
        if in_warning {
            out.push(line);
        }
    }
    out
}

/// `<target>/nvptx-kernels/<crate folder>-<hash of its path>`, `<target>`
/// found from `out_dir` (`<target>/[<triple>/]<profile>/build/<pkg>/out`):
/// shared by the debug and release outer builds, never the outer build's own
/// directory (whose lock the outer build holds), and one per kernel crate.
/// One per kernel crate because cargo writes a `cdylib`'s PTX under its
/// library name alone (`release/<lib>.ptx`, no hash): a kernel crate that
/// depends on another kernel crate (a user's on `cuda-kernels-gpu` without
/// its built-in kernels) builds that crate's `cdylib` too, and would
/// overwrite the PTX that crate's own build reads.
pub fn kernel_target_dir(out_dir: &Path, crate_dir: &Path) -> PathBuf {
    let target = out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent())
        .and_then(|profile| profile.parent())
        .unwrap_or(out_dir);
    let crate_dir = crate_dir
        .canonicalize()
        .unwrap_or_else(|_| crate_dir.to_path_buf());
    let name = crate_dir
        .file_name()
        .map_or("kernels".into(), |n| n.to_string_lossy());
    // FNV-1a: a stable hash of the path, with no dependency.
    let hash = crate_dir
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    target
        .join("nvptx-kernels")
        .join(format!("{name}-{hash:016x}"))
}

/// The number of an architecture name: 80 for `sm_80`, 90 for `sm_90a`
/// (the architecture-specific variant, whose cubin runs on compute
/// capability 9.0 alone); `None` for anything that is not `sm_<number>` or
/// `sm_<number>a` with a number of at least 50.
pub fn sm(arch: &str) -> Option<u32> {
    let n = arch.strip_prefix("sm_")?;
    n.strip_suffix('a')
        .unwrap_or(n)
        .parse::<u32>()
        .ok()
        .filter(|&n| n >= 50)
}

/// The Rust expression (of type `&[Cubin]`) that lists `cubins`
/// (architecture number, file) for `include!`.
pub fn cubins_rs(cubins: &[(u32, PathBuf)]) -> String {
    let entries: Vec<_> = cubins
        .iter()
        .map(|(sm, path)| {
            format!(
                "Cubin {{ sm: {sm}, image: include_bytes!({:?}) }},",
                path.display().to_string()
            )
        })
        .collect();
    format!("&[\n{}\n]\n", entries.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inner_build_is_nvptx_release_with_build_std_and_bootstrap_for_it_alone() {
        let libdevice = Path::new("/cuda/libdevice.10.bc");
        let cmd = command(
            OsStr::new("cargo"),
            Path::new("/ws/kernels"),
            Path::new("/ws/target/nvptx-kernels"),
            "sm_80",
            Some(libdevice),
        );
        let args: Vec<_> = cmd.get_args().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args,
            [
                "build",
                "--release",
                "--target",
                "nvptx64-nvidia-cuda",
                "-Zbuild-std=core",
                "--message-format=json-render-diagnostics",
                "--manifest-path",
                "/ws/kernels/Cargo.toml",
                "--target-dir",
                "/ws/target/nvptx-kernels",
            ]
        );
        assert_eq!(cmd.get_current_dir(), Some(Path::new("/ws/kernels")));
        let env = |name: &str| {
            cmd.get_envs()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.map(|v| v.to_str().unwrap().to_string()))
        };
        assert_eq!(env("RUSTC_BOOTSTRAP"), Some(Some("1".into())));
        assert_eq!(
            env("CARGO_ENCODED_RUSTFLAGS"),
            Some(Some(
                "-Ctarget-cpu=sm_80\x1f-Ctarget-feature=+ptx70\x1f-Clink-arg=/cuda/libdevice.10.bc"
                    .into()
            ))
        );
        assert_eq!(env("CARGO_PROFILE_RELEASE_LTO"), Some(Some("fat".into())));
        assert_eq!(
            env("CARGO_PROFILE_RELEASE_PANIC"),
            Some(Some("abort".into()))
        );
        for var in [
            "RUSTFLAGS",
            "CARGO_TARGET_DIR",
            "RUSTC_WRAPPER",
            "CARGO_BUILD_TARGET",
        ] {
            assert_eq!(env(var), Some(None), "{var} is removed");
        }
    }

    #[test]
    fn without_libdevice_only_the_target_cpu_is_passed() {
        assert_eq!(rustflags("sm_70", None), "-Ctarget-cpu=sm_70");
        assert_eq!(
            rustflags("sm_90a", None),
            "-Ctarget-cpu=sm_90a\x1f-Ctarget-feature=+ptx80"
        );
    }

    #[test]
    fn the_ptx_is_read_from_cargos_artifact_messages() {
        let stdout = concat!(
            r#"{"reason":"compiler-artifact","package_id":"core","filenames":["/t/nvptx64-nvidia-cuda/release/deps/libcore-1.rlib"],"fresh":true}"#,
            "\n",
            r#"{"reason":"compiler-artifact","package_id":"k","target":{"crate_types":["cdylib","rlib"]},"filenames":["/t/nvptx64-nvidia-cuda/release/my_kernels.ptx","/t/nvptx64-nvidia-cuda/release/libmy_kernels.rlib"],"executable":null,"fresh":false}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
            "\n"
        );
        assert_eq!(
            ptx_artifact(stdout),
            Some(PathBuf::from(
                "/t/nvptx64-nvidia-cuda/release/my_kernels.ptx"
            ))
        );
        assert_eq!(
            ptx_artifact(r#"{"reason":"build-finished","success":true}"#),
            None
        );
    }

    #[test]
    fn dep_info_lists_the_sources() {
        let text = "/t/k.ptx: /ws/k/src/lib.rs /ws/my\\ dir/a.rs /ws/device/src/lib.rs\n\n/ws/k/src/lib.rs:\n";
        assert_eq!(
            dep_info_files(text),
            [
                PathBuf::from("/ws/k/src/lib.rs"),
                PathBuf::from("/ws/my dir/a.rs"),
                PathBuf::from("/ws/device/src/lib.rs"),
            ]
        );
        assert!(dep_info_files("").is_empty());
    }

    #[test]
    fn the_builders_own_ptx_isa_warning_is_dropped() {
        let stderr = "warning: unstable feature specified for `-Ctarget-feature`: `ptx80`\n  |\n  = note: this feature is not stably supported\nwarning: `k` (lib) generated 1 warning\n    Finished `release` profile\n";
        assert!(warnings(stderr).is_empty(), "{:?}", warnings(stderr));
    }

    #[test]
    fn warning_blocks_are_kept_and_the_rest_dropped() {
        let stderr = "   Compiling k v0.1.0 (/ws/k)\nwarning: unused variable: `x`\n --> src/lib.rs:3:9\n  |\n3 |     let x = 1;\n\nerror: aborting\n    Finished `release` profile\n";
        assert_eq!(
            warnings(stderr),
            [
                "warning: unused variable: `x`",
                " --> src/lib.rs:3:9",
                "  |",
                "3 |     let x = 1;"
            ]
        );
    }

    #[test]
    fn the_kernel_target_dir_sits_beside_the_profiles_one_per_kernel_crate() {
        let kernels = Path::new("/ws/kernels");
        let dir = kernel_target_dir(Path::new("/ws/target/debug/build/pkg-abc/out"), kernels);
        assert_eq!(dir.parent(), Some(Path::new("/ws/target/nvptx-kernels")));
        let name = dir.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("kernels-") && name.len() == 8 + 16,
            "{name}"
        );
        // The release build shares it; another triple's folder has its own.
        assert_eq!(
            kernel_target_dir(Path::new("/ws/target/release/build/pkg-def/out"), kernels),
            dir
        );
        assert_eq!(
            kernel_target_dir(
                Path::new("/ws/target/x86_64-unknown-linux-gnu/release/build/pkg-abc/out"),
                kernels
            )
            .parent(),
            Some(Path::new(
                "/ws/target/x86_64-unknown-linux-gnu/nvptx-kernels"
            ))
        );
        assert_eq!(
            kernel_target_dir(Path::new("/tmp/out"), kernels).parent(),
            Some(Path::new("/tmp/out/nvptx-kernels"))
        );
        // Two kernel crates of one name in different places never share one.
        assert_ne!(
            kernel_target_dir(Path::new("/tmp/out"), Path::new("/other/kernels")),
            kernel_target_dir(Path::new("/tmp/out"), kernels)
        );
    }

    #[test]
    fn architectures_are_sm_numbers() {
        assert_eq!(sm("sm_70"), Some(70));
        assert_eq!(sm("sm_90"), Some(90));
        assert_eq!(sm("sm_90a"), Some(90));
        assert_eq!(sm("sm_90b"), None);
        assert_eq!(sm("sm_35"), None);
        assert_eq!(sm("compute_70"), None);
        assert_eq!(sm("sm_9x"), None);
        assert_eq!(sm("70"), None);
    }

    #[test]
    fn the_cubin_list_is_an_include_expression() {
        assert_eq!(cubins_rs(&[]), "&[\n\n]\n");
        assert_eq!(
            cubins_rs(&[(80, PathBuf::from("/o/k.sm_80.cubin"))]),
            "&[\nCubin { sm: 80, image: include_bytes!(\"/o/k.sm_80.cubin\") },\n]\n"
        );
    }
}
