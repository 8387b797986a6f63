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

/// The PTX ISA the inner build asks for at least (see [`rustflags`]).
const MIN_PTX_ISA: &str = "ptx62";

/// The kernels' own release profile (the outer workspace's is the host's).
pub const PROFILE: [(&str, &str); 7] = [
    ("CARGO_PROFILE_RELEASE_OPT_LEVEL", "3"),
    ("CARGO_PROFILE_RELEASE_LTO", "off"),
    ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1"),
    ("CARGO_PROFILE_RELEASE_PANIC", "abort"),
    ("CARGO_PROFILE_RELEASE_DEBUG", "false"),
    ("CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS", "false"),
    ("CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS", "false"),
];

/// The PTX ISA an architecture needs, as an nvptx target feature, where
/// LLVM's default is too old for it: below sm_75, whose PTX LLVM writes as
/// ISA 6.1 or older, 6.2 (`+ptx62`, CUDA 10.0's), the first with `activemask`
/// (`warp::activemask`); 7.0 for sm_80, 7.1 for sm_86, 7.4 for sm_87, 7.8
/// for sm_89, 8.0 for sm_90, 8.3 for sm_90a (Hopper's
/// `fence.proxy.tensormap`, with which a kernel reads a tensor map the host
/// rewrote in global memory).
pub fn ptx_isa(arch: &str) -> Option<&'static str> {
    match arch.strip_prefix("sm_")? {
        "80" => Some("ptx70"),
        "86" => Some("ptx71"),
        "87" => Some("ptx74"),
        "89" => Some("ptx78"),
        "90" => Some("ptx80"),
        "90a" => Some("ptx83"),
        _ if sm(arch).is_some_and(|n| n < 75) => Some(MIN_PTX_ISA),
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

/// The inner build: `cargo build --release --target nvptx64-nvidia-cuda` of
/// the crate in `crate_dir` into `target_dir`, with `core` from `sysroot`
/// (see the `sysroot` module) or, without one, built too
/// (`-Zbuild-std=core`); with `RUSTC_BOOTSTRAP=1` for it alone, its own
/// flags and profile, and the outer build's flags, target and wrappers
/// stripped.
pub fn command(
    cargo: &OsStr,
    crate_dir: &Path,
    target_dir: &Path,
    arch: &str,
    libdevice: Option<&Path>,
    sysroot: Option<&Path>,
    linker: Option<(&Path, &Path)>,
) -> Command {
    let mut flags = rustflags(arch, libdevice);
    if let Some(dir) = sysroot {
        flags.push_str(&format!("\x1f--sysroot={}", dir.display()));
    }
    let mut cmd = Command::new(cargo);
    if let Some((exe, llvm_bin)) = linker {
        flags.push_str(&format!("\x1f-Clinker={}", exe.display()));
        cmd.env(crate::linker::LLVM_BIN_VAR, llvm_bin);
    }
    cmd.current_dir(crate_dir)
        .args(["build", "--release", "--target", TARGET])
        .args(sysroot.is_none().then_some("-Zbuild-std=core"))
        .arg("--message-format=json-render-diagnostics")
        .arg("--manifest-path")
        .arg(crate_dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_ENCODED_RUSTFLAGS", flags)
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

/// The symbol of llvm-link's "Linking globals named 'NAME': symbol multiply
/// defined!" in the inner build's stderr, if it failed so.
pub fn duplicate_symbol(stderr: &str) -> Option<String> {
    let (_, rest) = stderr.split_once("Linking globals named '")?;
    let (symbol, rest) = rest.split_once('\'')?;
    rest.starts_with(": symbol multiply defined")
        .then(|| symbol.to_string())
}

/// The files of llvm-bitcode-linker's "llvm-link failed to link files
/// [\"a.o\", \"b.rlib\"]" (empty when the message is not there).
pub fn linked_files(stderr: &str) -> Vec<PathBuf> {
    let Some((_, rest)) = stderr.split_once("failed to link files [") else {
        return Vec::new();
    };
    let list = rest.split_once(']').map_or(rest, |(list, _)| list);
    list.split(", ")
        .map(|quoted| PathBuf::from(quoted.trim().trim_matches('"')))
        .filter(|p| !p.as_os_str().is_empty())
        .collect()
}

/// The crate the failed inner build was compiling ("could not compile
/// `NAME`"), as its library name (`-` as `_`).
pub fn compiling_crate(stderr: &str) -> Option<String> {
    let (_, rest) = stderr.split_once("could not compile `")?;
    let (name, _) = rest.split_once('`')?;
    Some(name.replace('-', "_"))
}

/// The crate of the module rustc's LTO failed on after a duplicate symbol
/// ("failed to load bitcode of module \"dep-0123.dep.4567-cgu.0.rcgu.o\"").
pub fn bitcode_module_crate(stderr: &str) -> Option<String> {
    let (_, rest) = stderr.split_once("failed to load bitcode of module \"")?;
    let (module, _) = rest.split_once('"')?;
    crate_of(Path::new(module))
}

/// The crate a linked file belongs to: `libfoo.rlib` and
/// `libfoo-0123abcd.rlib` are `foo`; the crate's own object
/// `foo.foo.<hash>-cgu.0.rcgu.o` is `foo`.
pub fn crate_of(file: &Path) -> Option<String> {
    let name = file.file_name()?.to_str()?;
    let stem = match name.strip_suffix(".rlib") {
        Some(lib) => lib.strip_prefix("lib")?,
        None => name.split('.').next()?,
    };
    let stem = match stem.rsplit_once('-') {
        Some((base, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => base,
        _ => stem,
    };
    Some(stem.to_string())
}

/// Whether `needle` occurs in `haystack` (a symbol name in a bitcode file).
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
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

/// One line per warning of the inner build's stderr: its message and the
/// first place rustc names (` --> file:line:column`, relative to the kernel
/// crate's workspace), `"unused variable: `x` at src/lib.rs:3:9"`. The host
/// build of the same crate prints the full warning; this line says it holds
/// for the GPU build too, or is the GPU build's own. Not rustc's note, for
/// every crate, that [`rustflags`]' PTX ISA (`+ptx62`, `+ptx80`…) is an unstable
/// target feature,
/// nor cargo's count of a crate's warnings.
pub fn warnings(stderr: &str) -> Vec<String> {
    let ours = "unstable feature specified for `-Ctarget-feature`: `ptx";
    let mut out: Vec<String> = Vec::new();
    let mut in_warning = false;
    let mut placed = false;
    for line in stderr.lines() {
        if let Some(message) = line.strip_prefix("warning: ") {
            in_warning = !line.contains(ours) && !line.contains(") generated ");
            placed = false;
            if in_warning {
                out.push(message.to_string());
            }
        } else if !line.starts_with(' ') || line.trim().is_empty() {
            in_warning = false;
        } else if let Some(place) = line.trim_start().strip_prefix("--> ")
            && in_warning
            && !placed
            && let Some(last) = out.last_mut()
        {
            last.push_str(" at ");
            last.push_str(place);
            placed = true;
        }
    }
    out
}

/// `stderr` without cargo's progress lines (`   Compiling core v0.0.0`,
/// `    Finished …`): what is left is rustc's messages.
pub fn without_progress(stderr: &str) -> String {
    const STATUS: [&str; 8] = [
        "Compiling",
        "Finished",
        "Blocking",
        "Updating",
        "Locking",
        "Downloading",
        "Downloaded",
        "Fresh",
    ];
    let progress = |line: &str| {
        let word = line.trim_start().split(' ').next().unwrap_or_default();
        line.starts_with(' ') && STATUS.contains(&word)
    };
    let kept: Vec<&str> = stderr.lines().filter(|l| !progress(l)).collect();
    kept.join("\n")
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

/// The number of an architecture name: 80 for `sm_80` (and `sm_90a`);
/// `None` for anything that is not `sm_<number>[a|f]` with a number of at
/// least 50.
pub fn sm(arch: &str) -> Option<u32> {
    let n = arch.strip_prefix("sm_")?;
    let n = n.strip_suffix(['a', 'f']).unwrap_or(n);
    n.parse::<u32>().ok().filter(|&n| n >= 50)
}

/// The architectures rustc's NVPTX backend knows (`rustc --print
/// target-cpus --target nvptx64-nvidia-cuda`, with cargo's `$RUSTC`);
/// `None` when rustc cannot say.
pub fn known_archs() -> Option<Vec<String>> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc)
        .args(["--print", "target-cpus", "--target", TARGET])
        .output()
        .ok()?;
    let mut list: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| sm(w).is_some())
        .map(str::to_string)
        .collect();
    list.sort_by_key(|a| (sm(a), a.clone()));
    (out.status.success() && !list.is_empty()).then_some(list)
}

/// Refuses a kernel crate folder without `Cargo.toml`, a crate without a
/// library (`src/lib.rs`, or the `path` of its `[lib]` section), and a
/// library whose root never says `no_std`.
pub fn check_kernel_crate(crate_dir: &Path) -> Result<(), crate::Error> {
    let manifest = crate_dir.join("Cargo.toml");
    let Ok(text) = std::fs::read_to_string(&manifest) else {
        return Err(crate::Error::NoKernelCrate {
            crate_dir: crate_dir.to_path_buf(),
        });
    };
    let lib = crate_dir.join(lib_path(&text).unwrap_or("src/lib.rs"));
    let Ok(source) = std::fs::read_to_string(&lib) else {
        return Err(crate::Error::NotALibrary { manifest });
    };
    if !source.contains("no_std") {
        return Err(crate::Error::NotNoStd { lib });
    }
    Ok(())
}

/// The `path` of a manifest's `[lib]` section, if it names one.
fn lib_path(manifest: &str) -> Option<&str> {
    let mut in_lib = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_lib = line == "[lib]";
        } else if in_lib && let Some(value) = line.strip_prefix("path") {
            return Some(
                value
                    .trim_start()
                    .strip_prefix('=')?
                    .trim()
                    .trim_matches('"'),
            );
        }
    }
    None
}

/// Whether rustc's messages say a float method (`exp`, `sin`…) was not
/// found on `f32` or `f64`: in `no_std` they come from `GpuFloat`.
pub fn misses_float_methods(stderr: &str) -> bool {
    stderr.lines().any(|l| {
        l.contains("no method named")
            && (l.contains("for type `f32`") || l.contains("for type `f64`"))
    })
}

/// The Rust expression (of type `&[Cubin]`) that lists `cubins`
/// (architecture number, file) for `include!`.
pub fn cubins_rs(cubins: &[AssembledCubin]) -> String {
    let entries: Vec<_> = cubins
        .iter()
        .map(|c| {
            let resources: Vec<_> = c
                .resources
                .iter()
                .map(|r| {
                    format!(
                        "KernelResources {{ name: {:?}, registers: {}, stack_bytes: {} }}",
                        r.name, r.registers, r.stack_bytes
                    )
                })
                .collect();
            format!(
                "Cubin {{ sm: {}, image: include_bytes!({:?}), resources: &[{}] }},",
                c.sm,
                c.path.display().to_string(),
                resources.join(", ")
            )
        })
        .collect();
    format!("&[\n{}\n]\n", entries.join("\n"))
}

/// The comment a kernel writes into its entry's body to ask for a register
/// limit at launch (`cuda_kernels_device::kernel::max_registers`, an inline
/// `asm!` of it followed by the number): PTX allows `.maxnreg` only in an
/// entry's header, where Rust code cannot write, so the builder
/// moves it there.
pub const MAXNREG_MARK: &str = "// cuda-kernels .maxnreg ";

/// `ptx` with `.maxnreg N` in the header of each entry point whose body
/// holds [`MAXNREG_MARK`]` N` (the smallest, if several), before the body's
/// `{`; other entries are left as they are.
pub fn entry_max_registers(ptx: &str) -> String {
    let lines: Vec<&str> = ptx.lines().collect();
    let mut out = String::with_capacity(ptx.len() + 64);
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_start().starts_with(".visible .entry ")
            || lines[i].trim_start().starts_with(".entry ")
        {
            // The body: from the first line `{` to the next `}` at the start
            // of a line (LLVM's layout of a function).
            let open = (i..lines.len()).find(|&j| lines[j] == "{");
            let close = open.and_then(|o| (o..lines.len()).find(|&j| lines[j] == "}"));
            if let (Some(open), Some(close)) = (open, close) {
                let limit = lines[open..close]
                    .iter()
                    .filter_map(|l| l.trim_start().strip_prefix(MAXNREG_MARK))
                    .filter_map(|n| n.trim().parse::<u32>().ok())
                    .min();
                for line in &lines[i..open] {
                    out.push_str(line);
                    out.push('\n');
                }
                if let Some(n) = limit {
                    out.push_str(&format!(".maxnreg {n}\n"));
                }
                i = open;
                continue;
            }
        }
        out.push_str(lines[i]);
        out.push('\n');
        i += 1;
    }
    out
}

/// Whether `ptxas`'s messages say it does not know the architecture it was
/// asked for (`Value 'sm_110' is not defined for option 'gpu-name'`).
pub fn ptxas_unknown_arch(stderr: &str) -> bool {
    stderr.contains("is not defined for option 'gpu-name'")
}

/// A cubin `ptxas` wrote, with what it reported of each kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssembledCubin {
    /// The architecture as a number (90 for `sm_90`).
    pub sm: u32,
    /// The file.
    pub path: PathBuf,
    /// Each entry point's registers and stack frame.
    pub resources: Vec<KernelResources>,
}

/// What `ptxas -v` reports of one entry point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelResources {
    /// The entry point.
    pub name: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of stack frame (local memory) per thread.
    pub stack_bytes: u32,
}

/// The entry points' resources in `ptxas -v`'s messages: per `Compiling
/// entry function 'name'`, the `N bytes stack frame` and `Used N registers`
/// lines that follow it (device functions are left out).
pub fn ptxas_resources(stderr: &str) -> Vec<KernelResources> {
    let mut out: Vec<KernelResources> = Vec::new();
    let mut current: Option<KernelResources> = None;
    let number_before = |line: &str, word: &str| -> Option<u32> {
        let end = line.find(word)?;
        line[..end].split_whitespace().last()?.parse().ok()
    };
    for line in stderr.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            out.extend(current.take());
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            current = Some(KernelResources {
                name,
                registers: 0,
                stack_bytes: 0,
            });
        } else if line.contains("Compiling") {
            out.extend(current.take());
        } else if let Some(k) = current.as_mut() {
            if let Some(n) = number_before(line, " bytes stack frame") {
                k.stack_bytes = n;
            }
            if let Some(n) = number_before(line, " registers") {
                k.registers = n;
            }
        }
    }
    out.extend(current);
    out
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
            None,
            None,
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
        assert_eq!(env("CARGO_PROFILE_RELEASE_LTO"), Some(Some("off".into())));
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
    fn with_a_kept_sysroot_core_is_not_built_again() {
        let cmd = command(
            OsStr::new("cargo"),
            Path::new("/ws/kernels"),
            Path::new("/ws/target/nvptx-kernels"),
            "sm_75",
            None,
            Some(Path::new("/cache/sysroot/sm_75-0123")),
            None,
        );
        assert!(!cmd.get_args().any(|a| a == "-Zbuild-std=core"));
        let flags = cmd
            .get_envs()
            .find(|(k, _)| *k == "CARGO_ENCODED_RUSTFLAGS")
            .and_then(|(_, v)| v);
        assert_eq!(
            flags,
            Some(OsStr::new(
                "-Ctarget-cpu=sm_75\x1f--sysroot=/cache/sysroot/sm_75-0123"
            ))
        );
    }

    #[test]
    fn without_libdevice_only_the_target_cpu_is_passed() {
        assert_eq!(rustflags("sm_75", None), "-Ctarget-cpu=sm_75");
        // PTX ISA 6.2 at least (activemask), where sm_70's default is 6.0.
        assert_eq!(
            rustflags("sm_70", None),
            "-Ctarget-cpu=sm_70\x1f-Ctarget-feature=+ptx62"
        );
        assert_eq!(
            rustflags("sm_90a", None),
            "-Ctarget-cpu=sm_90a\x1f-Ctarget-feature=+ptx83"
        );
    }

    #[test]
    fn a_marked_entry_gets_its_register_limit_in_its_header_alone() {
        let ptx = ".visible .entry a(\n\t.param .u32 a_param_0\n)\n{\n\t// begin inline asm\n\t\
                   // cuda-kernels .maxnreg 168\n\t// end inline asm\n\tret;\n}\n\
                   .visible .entry b(\n\t.param .u32 b_param_0\n)\n{\n\tret;\n}\n";
        let got = entry_max_registers(ptx);
        assert_eq!(
            got,
            ".visible .entry a(\n\t.param .u32 a_param_0\n)\n.maxnreg 168\n{\n\t// begin inline asm\n\t\
             // cuda-kernels .maxnreg 168\n\t// end inline asm\n\tret;\n}\n\
             .visible .entry b(\n\t.param .u32 b_param_0\n)\n{\n\tret;\n}\n"
        );
        // Without a mark the text is unchanged.
        assert_eq!(
            entry_max_registers(&ptx.replace("maxnreg", "x")),
            ptx.replace("maxnreg", "x")
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
    fn each_warning_is_one_line_with_its_place() {
        let stderr = "   Compiling k v0.1.0 (/ws/k)\nwarning: unstable feature specified for `-Ctarget-feature`: `ptx62`\n  = note: unstable\n\nwarning: unused variable: `x`\n --> src/lib.rs:3:9\n  |\n3 |     let x = 1;\n\nwarning: `k` (lib) generated 2 warnings\nerror: aborting\n    Finished `release` profile\n";
        assert_eq!(warnings(stderr), ["unused variable: `x` at src/lib.rs:3:9"]);
        assert_eq!(warnings("warning: no place\n"), ["no place"]);
    }

    #[test]
    fn cargos_progress_lines_are_left_out_of_rustcs_messages() {
        let stderr = "   Compiling core v0.0.0 (/rust/library/core)\n    Blocking waiting for file lock\nerror[E0308]: mismatched types\n --> kernels/src/lib.rs:7:5\n    Finished nothing\n";
        assert_eq!(
            without_progress(stderr),
            "error[E0308]: mismatched types\n --> kernels/src/lib.rs:7:5"
        );
    }

    #[test]
    fn the_builders_own_ptx_isa_warning_is_dropped() {
        let stderr = "warning: unstable feature specified for `-Ctarget-feature`: `ptx80`\n  |\n  = note: this feature is not stably supported\nwarning: `k` (lib) generated 1 warning\n    Finished `release` profile\n";
        assert!(warnings(stderr).is_empty(), "{:?}", warnings(stderr));
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
    fn ptxas_reports_each_entry_points_resources() {
        let stderr = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'fid_a' for 'sm_90'\n\
ptxas info    : Function properties for fid_a\n\
    266240 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 40 registers, used 0 barriers, 266240 bytes cumulative stack size\n\
ptxas info    : Function properties for helper\n\
ptxas info    : Compiling entry function 'fid_b' for 'sm_90'\n\
ptxas info    : Used 111 registers, used 1 barriers, 256 bytes smem\n";
        assert_eq!(
            ptxas_resources(stderr),
            [
                KernelResources {
                    name: "fid_a".into(),
                    registers: 40,
                    stack_bytes: 266_240
                },
                KernelResources {
                    name: "fid_b".into(),
                    registers: 111,
                    stack_bytes: 0
                },
            ]
        );
    }

    #[test]
    fn an_architecture_ptxas_does_not_know_is_recognised() {
        // ptxas 12.9's words for sm_110 (CUDA 13's).
        let stderr = "ptxas fatal   : Value 'sm_110' is not defined for option 'gpu-name'\n";
        assert!(ptxas_unknown_arch(stderr));
        assert!(!ptxas_unknown_arch(
            "ptxas fatal   : Unresolved extern function 'f'"
        ));
        let e = crate::Error::PtxasArch {
            ptxas: PathBuf::from("/t/ptxas"),
            arch: "sm_110".into(),
        };
        assert_eq!(
            e.to_string(),
            "/t/ptxas does not know \"sm_110\" (asked for by KernelBuild::cubins): leave it out, \
             or use a ptxas that knows it (`pip install -U nvidia-cuda-nvcc-cu12`, or set PTXAS)"
        );
    }

    #[test]
    fn the_lib_path_comes_from_the_lib_section() {
        let manifest =
            "[package]\npath = \"x\"\n[lib]\ncrate-type = [\"cdylib\"]\npath = \"src/k.rs\"\n";
        assert_eq!(lib_path(manifest), Some("src/k.rs"));
        assert_eq!(lib_path("[package]\nname = \"k\"\n[lib]\n"), None);
    }

    #[test]
    fn a_kernel_crate_that_is_not_one_is_refused_naming_the_file() {
        let root = std::env::temp_dir().join(format!("ckb-crate-{}", std::process::id()));
        let dir = root.join("kernels");
        std::fs::create_dir_all(dir.join("src")).unwrap();
        let refused = |what: &str| {
            let e = check_kernel_crate(&dir).unwrap_err();
            let text = e.to_string();
            assert_eq!(text.lines().count(), 1, "{text}");
            assert!(text.contains(what), "{text}");
        };
        refused("no kernel crate at");
        std::fs::write(dir.join("Cargo.toml"), "[package]\nname = \"k\"\n").unwrap();
        refused("Cargo.toml has no library");
        std::fs::write(dir.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        refused("lib.rs is not no_std");
        std::fs::write(dir.join("src/lib.rs"), "#![no_std]\n").unwrap();
        check_kernel_crate(&dir).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn rustc_lists_the_architectures_it_knows() {
        // Where rustc answers (it does wherever the builder runs).
        if let Some(known) = known_archs() {
            assert!(known.iter().any(|a| a == "sm_70") && known.iter().any(|a| a == "sm_90a"));
            assert!(!known.iter().any(|a| a == "sm_999"));
        }
    }

    #[test]
    fn a_missing_float_method_is_recognised() {
        let e = "error[E0599]: no method named `exp` found for type `f32` in the current scope";
        assert!(misses_float_methods(e));
        assert!(!misses_float_methods(
            "error[E0599]: no method named `x` found for struct `S`"
        ));
    }

    #[test]
    fn the_cubin_list_is_an_include_expression() {
        assert_eq!(cubins_rs(&[]), "&[\n\n]\n");
        assert_eq!(
            cubins_rs(&[AssembledCubin {
                sm: 80,
                path: PathBuf::from("/o/k.sm_80.cubin"),
                resources: vec![KernelResources {
                    name: "k".into(),
                    registers: 40,
                    stack_bytes: 8
                }],
            }]),
            "&[\nCubin { sm: 80, image: include_bytes!(\"/o/k.sm_80.cubin\"), resources: \
             &[KernelResources { name: \"k\", registers: 40, stack_bytes: 8 }] },\n]\n"
        );
    }

    #[test]
    fn a_duplicate_entry_is_read_from_llvm_links_message() {
        let stderr = r#"    = note: Error: llvm-link failed to link files ["/t/release/deps/collide_kernels.collide_kernels.6b8bc9935ce9355c-cgu.0.rcgu.o", "/t/release/deps/libcuda_kernels_gpu.rlib", "/t/release/deps/libcuda_kernels_device-d0676b1cbc18f5f9.rlib"]
            Stack backtrace:
               0: <anyhow::Error>::msg::<alloc::string::String>
             stderr: error: Linking globals named 'reduce_max_f32': symbol multiply defined!
"#;
        assert_eq!(duplicate_symbol(stderr).as_deref(), Some("reduce_max_f32"));
        assert_eq!(duplicate_symbol("error: something else"), None);
        let files = linked_files(stderr);
        let crates: Vec<_> = files.iter().filter_map(|f| crate_of(f)).collect();
        assert_eq!(
            crates,
            ["collide_kernels", "cuda_kernels_gpu", "cuda_kernels_device"]
        );
        assert_eq!(compiling_crate(stderr), None);
        // The other form, from rustc's own LTO of a release build.
        let lto = "warning: Linking globals named 'scale': symbol multiply defined!\n\n\
                   error: failed to load bitcode of module \"collision_dep-f02f6cdbf771e34e.collision_dep.efef79a4c7b0a3df-cgu.0.rcgu.o\": \n\n\
                   error: could not compile `collision-kernels` (lib) due to 1 previous error";
        assert_eq!(duplicate_symbol(lto).as_deref(), Some("scale"));
        assert_eq!(compiling_crate(lto).as_deref(), Some("collision_kernels"));
        assert_eq!(bitcode_module_crate(lto).as_deref(), Some("collision_dep"));
        assert!(contains(b"xx reduce_max_f32 yy", b"reduce_max_f32"));
        assert!(!contains(b"reduce_max_f6", b"reduce_max_f32"));
    }
}
