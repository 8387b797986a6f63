//! Our `cuda_builder`: builds a `no_std` Rust kernel crate to PTX (and
//! cubins) from a `build.rs`, with rustc's own NVPTX backend on a stable
//! toolchain.
//!
//! ```no_run
//! // the `main` of the build.rs of a crate that has a kernel crate in `kernels/`
//! cuda_kernels_builder::KernelBuild::new("kernels")
//!     .name("kernels")
//!     .arch_from_env("CUDA_KERNELS_ARCH", "sm_70")
//!     .cubins(&["sm_80", "sm_90a"])
//!     .build()
//!     .unwrap_or_else(|e| e.fail());
//! ```
//! and in the crate, `cuda_kernels::embedded_images!("kernels")` is the
//! `Images` (PTX and cubins) to load.
//!
//! What [`KernelBuild::build`] does:
//! - runs `cargo build --release --target nvptx64-nvidia-cuda` on the kernel
//!   crate (a `cdylib`, whose link step the `llvm-bitcode-linker` turns into
//!   `<lib name>.ptx`), on the active toolchain, with `RUSTC_BOOTSTRAP=1` set
//!   for that inner build only (the unstable `-Zbuild-std` and the nvptx
//!   features `abi_ptx`, `stdarch_nvptx`, `asm_experimental_arch` need it;
//!   the outer build never sees it);
//! - takes `core` and `compiler_builtins` from a sysroot kept in the user's
//!   cache (`~/.cache/cuda-kernels/sysroot/<arch>-<key>`, about 42 MB each),
//!   built there once per compiler, architecture and flags with
//!   `-Zbuild-std=core` from an empty crate: no toolchain ships them for
//!   nvptx64, and building them is 20 s of two cores that every project and
//!   every `cargo clean` would pay again. Where the cache cannot be had, the
//!   inner build builds `core` itself (`-Zbuild-std=core`), as the same
//!   libraries with the same flags: the PTX is the same either way but for
//!   the crates' hashes in mangled names;
//! - links with `cuda-kernels-link`, a small program of this crate's own
//!   (compiled once per compiler into the same cache) in front of rustc's
//!   `llvm-bitcode-linker`: that one optimises the whole of `core` and
//!   libdevice at `-O3` before dropping what the kernels never call (5 s of
//!   every build, however small the crate); this one drops it first and
//!   then runs the same `opt` and `llc` commands, so the PTX is the same
//!   byte for byte, and a rebuild after a one-line change takes about a
//!   second and a half instead of seven. On any other arguments or any
//!   failure it runs `llvm-bitcode-linker` itself;
//! - in its own target directory (`<target>/nvptx-kernels/<crate>-<hash>`,
//!   one per kernel crate: see [`KernelBuild::target_dir`]), so it never
//!   waits on the outer build's lock; the outer `RUSTFLAGS`, target, target
//!   directory and compiler wrappers are stripped, and the kernels get their
//!   own release profile (`opt-level = 3`, one codegen unit,
//!   `panic = "abort"`, and no rustc LTO: the bitcode linker links every
//!   crate's bitcode into one module and optimises it whole anyway, and the
//!   PTX of this repository's kernels and of `examples/downstream` for
//!   sm_70, sm_80 and sm_90a is the same without it as with fat LTO, but
//!   for crate hashes in mangled names; a rebuild after a one-line change is
//!   a second shorter);
//! - links NVIDIA's libdevice (`libdevice.10.bc`) when it is found, for the
//!   kernels' math (`__nv_sinf` and the like: the bitcode linker keeps only
//!   what they call); when it is not found and the kernels call it, the
//!   error says where it was looked for and how to name it
//!   (`CUDA_KERNELS_LIBDEVICE`);
//! - writes `$OUT_DIR/<name>.ptx` (the portable PTX, for the oldest
//!   architecture); with [`KernelBuild::cubins`] it builds the crate once
//!   more for each architecture listed, alongside the portable build
//!   (`sm_80`, `sm_90a`: a build of its own, `-Ctarget-cpu=<arch>` with
//!   that architecture's PTX ISA, so code under
//!   `#[cfg(target_feature = "sm_90a")]` exists in that image alone),
//!   writes its PTX to `$OUT_DIR/<name>.<arch>.ptx` and the cubin `ptxas -v`
//!   assembles from it to `$OUT_DIR/<name>.<arch>.cubin`, listed in
//!   `$OUT_DIR/<name>.cubins.rs` with each kernel's registers and stack frame
//!   as `ptxas` reported them (empty, with a cargo warning, without `ptxas`;
//!   PTX that `ptxas` rejects fails the build with its messages, as the
//!   driver would reject it at load time);
//! - checks every PTX image before it is written, for the portable build
//!   and each architecture's ([`ptx`]): an aligned barrier (`bar.sync`)
//!   that threads can reach at different instructions fails the build
//!   ([`Error::AlignedBarrier`]), and each 32-bit store or operation of a
//!   64-bit register (`st.global.b32 [a], %rd6`, which ptxas and the
//!   driver's JIT miscompile when the register holds an f64) is rewritten
//!   through an explicit `cvt.u32.u64`, with one cargo warning naming the
//!   functions;
//! - gives each entry point whose body asks for a register limit
//!   (`cuda_kernels_device::kernel::max_registers`, which writes
//!   [`MAXNREG_MARK`] there) that `.maxnreg` in its header, and no other;
//! - prints `cargo::rerun-if-changed` for every source file of the kernel
//!   crate and its path dependencies, and forwards each of the inner build's
//!   warnings as one cargo warning line (its message and place; the host
//!   build of the crate shows it in full).
//!
//! Its errors say what to do: a toolchain without `rust-src`,
//! `llvm-tools` or `llvm-bitcode-linker` gets the `rustup component add …
//! --toolchain <active toolchain>` line for the missing ones; a kernel crate
//! that does not compile shows rustc's messages with file and line.
//!
//! Where the tools are looked for ([`find_ptxas`], [`find_libdevice`]):
//! `$PTXAS` / `$CUDA_KERNELS_LIBDEVICE`, then (`ptxas`) the `PATH`, then the
//! CUDA roots `$CUDA_HOME` and `$CUDA_PATH`, the `nvidia-cuda-nvcc-cu12`
//! wheel in a `.tools/ptxas` folder at or above the calling crate and in the
//! user's cache (`~/.cache/cuda-kernels/ptxas`, which this project's
//! `scripts/setup.sh` fills), `/usr/local/cuda`, and that wheel installed for
//! any Python on `PATH` (`pip install nvidia-cuda-nvcc-cu12`). A failed
//! search lists every place it looked at, and that one command.
//!
//! Bad input is one line naming the file or value and the fix: a kernel
//! crate folder without `Cargo.toml`, a crate without a library or not
//! `no_std`, an architecture rustc's NVPTX backend does not know.
#![warn(missing_docs)]

mod inner;
mod linker;
pub mod ptx;
mod sysroot;
mod toolchain;
mod tools;

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub use inner::{AssembledCubin, KernelResources, MAXNREG_MARK, TARGET};
pub use toolchain::COMPONENTS;
pub use tools::{LIBDEVICE_VAR, PTXAS_VAR, cache_dir, find_libdevice, find_ptxas};

/// One kernel crate to build to PTX: set it up with the methods, then
/// [`build`](Self::build).
///
/// ```no_run
/// let built = cuda_kernels_builder::KernelBuild::new("kernels-gpu")
///     .arch("sm_80")
///     .build()
///     .unwrap_or_else(|e| e.fail());
/// println!("cargo::warning=PTX at {}", built.ptx.display());
/// ```
#[derive(Debug, Clone)]
pub struct KernelBuild {
    crate_dir: PathBuf,
    name: Option<String>,
    arch: String,
    arch_var: Option<String>,
    cubins: Vec<String>,
    out_dir: Option<PathBuf>,
    target_dir: Option<PathBuf>,
}

/// The first line of every PTX this builder writes, followed by the kernel
/// crate's library name: the image's identity. The host (`Images`) reads it
/// and launches a kernel handle only on the image of the crate that declared
/// it, so that a kernel of the same name in another crate never runs in its
/// place.
pub const IMAGE_MARK: &str = "// cuda-kernels image: ";

/// What [`KernelBuild::build`] wrote.
#[derive(Debug, Clone)]
pub struct Built {
    /// The name the files are written under (`<name>.ptx`).
    pub name: String,
    /// The PTX: `<out dir>/<name>.ptx`.
    pub ptx: PathBuf,
    /// The architecture the PTX targets (`sm_70`).
    pub arch: String,
    /// The cubins assembled: architecture number (80 for `sm_80`), file and
    /// each kernel's resources.
    pub cubins: Vec<inner::AssembledCubin>,
    /// The PTX of each per-architecture build ([`KernelBuild::cubins`]):
    /// its architecture (`sm_90a`) and `<out dir>/<name>.<arch>.ptx`.
    pub arch_ptx: Vec<(String, PathBuf)>,
    /// The `include!` file listing [`cubins`](Self::cubins):
    /// `<out dir>/<name>.cubins.rs`.
    pub cubins_rs: PathBuf,
    /// The `ptxas` that assembled them (`None` when none was found, or no
    /// cubins were asked for).
    pub ptxas: Option<PathBuf>,
    /// The libdevice linked (`None` when none was found: then the kernels
    /// call none of its functions).
    pub libdevice: Option<PathBuf>,
}

/// Why a kernel build failed. Its [`Display`](fmt::Display) says what to do;
/// [`fail`](Self::fail) prints it for cargo and ends the build script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A variable cargo sets for build scripts is missing (not run from a
    /// `build.rs`, and no [`KernelBuild::out_dir`] given).
    NotInBuildScript {
        /// The variable (`OUT_DIR`, `CARGO_MANIFEST_DIR`).
        var: &'static str,
    },
    /// The architecture is not `sm_<number>` (at least `sm_50`), or
    /// `sm_<number>a`.
    BadArch {
        /// What was given.
        arch: String,
        /// The environment variable it came from, if any.
        var: Option<String>,
    },
    /// The architecture is not one rustc's NVPTX backend knows.
    UnknownArch {
        /// What was given.
        arch: String,
        /// The environment variable it came from, if any.
        var: Option<String>,
        /// The architectures `rustc --print target-cpus` lists.
        known: Vec<String>,
    },
    /// The kernel crate's folder has no `Cargo.toml`.
    NoKernelCrate {
        /// The folder looked at.
        crate_dir: PathBuf,
    },
    /// The kernel crate has no library target (no `src/lib.rs`, no `[lib]
    /// path` that exists).
    NotALibrary {
        /// The crate's `Cargo.toml`.
        manifest: PathBuf,
    },
    /// The kernel crate's library is not `no_std` (nvptx64 has no `std`).
    NotNoStd {
        /// The library's root file.
        lib: PathBuf,
    },
    /// A program could not be started.
    Spawn {
        /// The program.
        program: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The active toolchain lacks components the nvptx64 build needs.
    MissingComponents {
        /// The toolchain's name (`None` when rustup could not say).
        toolchain: Option<String>,
        /// The missing components, of [`COMPONENTS`].
        missing: Vec<&'static str>,
        /// The inner build's stderr.
        stderr: String,
    },
    /// The kernel crate did not compile for nvptx64.
    Compile {
        /// The kernel crate's folder.
        crate_dir: PathBuf,
        /// The inner build's stderr: rustc's messages with file and line.
        stderr: String,
    },
    /// Two kernels of the crate and its dependencies have one entry name
    /// (llvm-link's "symbol multiply defined"): a PTX module's entry names
    /// are global.
    DuplicateEntry {
        /// The entry point's name.
        symbol: String,
        /// The crates that define it, as far as the linked files tell (the
        /// kernel crate first).
        crates: Vec<String>,
    },
    /// The build succeeded but made no PTX.
    NoPtx {
        /// The kernel crate's folder.
        crate_dir: PathBuf,
    },
    /// The kernels call libdevice (`__nv_…` functions) and none was found.
    NoLibdevice {
        /// Every place looked at, in order, as the message lists it.
        searched: Vec<String>,
    },
    /// `ptxas` rejected the PTX: the driver's JIT would reject it too.
    Ptxas {
        /// The `ptxas` run.
        ptxas: PathBuf,
        /// The architecture it assembled for.
        arch: String,
        /// The PTX file.
        ptx: PathBuf,
        /// Its messages.
        stderr: String,
    },
    /// `ptxas` does not know an architecture of [`KernelBuild::cubins`]
    /// (rustc's NVPTX backend does: the `ptxas` is older than it).
    PtxasArch {
        /// The `ptxas` run.
        ptxas: PathBuf,
        /// The architecture.
        arch: String,
    },
    /// An aligned barrier (`bar.sync`, `barrier.sync.aligned`) that
    /// threads of a block can reach at different instructions, which hangs
    /// the block or worse on the GPU (the rule: [`ptx`]'s documentation).
    AlignedBarrier {
        /// The architecture of the PTX.
        arch: String,
        /// The PTX file (not written: the path it would have).
        ptx: PathBuf,
        /// The function: the kernel's name for an entry point, a mangled
        /// name for a device function.
        function: String,
        /// The barrier instructions reachable from one point: line in the
        /// PTX and text.
        barriers: Vec<(usize, String)>,
    },
    /// A file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        reason: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotInBuildScript { var } => write!(
                f,
                "`{var}` is not set: KernelBuild::build runs in a build script (or give it an out_dir)"
            ),
            Self::BadArch { arch, var } => {
                write!(
                    f,
                    "{arch:?} is not a GPU architecture like sm_70, sm_80, sm_90"
                )?;
                match var {
                    Some(var) => write!(f, " (from ${var})"),
                    None => Ok(()),
                }
            }
            Self::UnknownArch { arch, var, known } => {
                let from = var
                    .as_ref()
                    .map_or(String::new(), |v| format!(" (from ${v})"));
                let fix = var
                    .as_ref()
                    .map_or("`.arch(\"sm_80\")`".to_string(), |v| format!("`{v}=sm_80`"));
                write!(
                    f,
                    "{arch:?}{from} is not a GPU architecture rustc's NVPTX backend knows: give one \
                     of {} ({fix})",
                    known.join(", ")
                )
            }
            Self::NoKernelCrate { crate_dir } => write!(
                f,
                "no kernel crate at {}: there is no Cargo.toml there (KernelBuild::new takes the \
                 kernel crate's folder, relative to the crate whose build.rs calls it)",
                crate_dir.display()
            ),
            Self::NotALibrary { manifest } => write!(
                f,
                "{} has no library (no src/lib.rs, no [lib] path): a kernel crate is a library; \
                 add src/lib.rs and `[lib] crate-type = [\"cdylib\", \"rlib\"]`",
                manifest.display()
            ),
            Self::NotNoStd { lib } => write!(
                f,
                "{} is not no_std, and nvptx64 has no std: add \
                 `#![cfg_attr(target_arch = \"nvptx64\", no_std)]` at its top",
                lib.display()
            ),
            Self::Spawn { program, reason } => write!(f, "could not run `{program}`: {reason}"),
            Self::MissingComponents {
                toolchain,
                missing,
                stderr,
            } => {
                let which = toolchain
                    .as_deref()
                    .map_or("the active toolchain".to_string(), |t| {
                        format!("the toolchain `{t}`")
                    });
                write!(
                    f,
                    "{which} lacks {} for the nvptx64 kernel build: run `{}`\n\n--- the kernel build's output ---\n{stderr}",
                    missing.join(", "),
                    toolchain::component_add_line(toolchain.as_deref(), missing)
                )
            }
            Self::Compile { crate_dir, stderr } => {
                write!(
                    f,
                    "the kernel crate {} does not compile for nvptx64: rustc's messages follow \
                     (paths relative to its workspace's root)",
                    crate_dir.display()
                )?;
                if inner::misses_float_methods(stderr) {
                    write!(
                        f,
                        "; a float method such as `.exp()` is not in `core`: add `use \
                         cuda_kernels_device::prelude::*;` (its trait GpuFloat gives them, \
                         through libdevice)"
                    )?;
                }
                write!(f, "\n\n{stderr}")
            }
            Self::DuplicateEntry { symbol, crates } => write!(
                f,
                "two kernels have the entry name `{symbol}` (declared in {}): entry names are \
                 global in a PTX module; rename one (a kernels! function, or the NAME of a \
                 reduce_kernels!/elementwise! op), or build the dependency without its own \
                 kernels (cuda-kernels-gpu: default-features = false)",
                match crates.as_slice() {
                    [] => "the kernel crate and a dependency".to_string(),
                    [one] => format!("`{one}` and a dependency"),
                    many => many
                        .iter()
                        .map(|c| format!("`{c}`"))
                        .collect::<Vec<_>>()
                        .join(" and "),
                }
            ),
            Self::NoPtx { crate_dir } => write!(
                f,
                "the kernel crate {} built no PTX: it needs `crate-type = [\"cdylib\"]` (or \
                 [\"cdylib\", \"rlib\"]) in its [lib] section",
                crate_dir.display()
            ),
            Self::NoLibdevice { searched } => {
                write!(
                    f,
                    "the kernels call NVIDIA's libdevice (`__nv_…` math functions) and no \
                     libdevice.10.bc was found: run `{}` (or set {LIBDEVICE_VAR} to one; a CUDA \
                     toolkit has it in nvvm/libdevice/). Looked at:",
                    tools::INSTALL_LINE
                )?;
                for place in searched {
                    write!(f, "\n  {place}")?;
                }
                Ok(())
            }
            Self::Ptxas {
                ptxas,
                arch,
                ptx,
                stderr,
            } => write!(
                f,
                "ptxas rejected the kernels' PTX ({}) for {arch}: the driver would reject it \
                 too when it loads it. {}'s messages:\n{stderr}",
                ptx.display(),
                ptxas.display()
            ),
            Self::PtxasArch { ptxas, arch } => write!(
                f,
                "{} does not know {arch:?} (asked for by KernelBuild::cubins): leave it out, or \
                 use a ptxas that knows it (`pip install -U nvidia-cuda-nvcc-cu12`, or set {PTXAS_VAR})",
                ptxas.display()
            ),
            Self::AlignedBarrier {
                arch,
                ptx,
                function,
                barriers,
            } => write!(
                f,
                "`{function}` ({arch} PTX, {}) has aligned barriers that threads of one block \
                 can reach at different instructions: {}. The PTX ISA requires every thread to \
                 execute the same aligned barrier instruction; the GPU hangs otherwise (LLVM \
                 duplicated or moved a barrier into branches). Use \
                 cuda_kernels_device::sync::sync_threads (the non-aligned `barrier.sync 0` on \
                 sm_70 and later) instead of `bar.sync` or core::arch::nvptx::_syncthreads",
                ptx.display(),
                barriers
                    .iter()
                    .map(|(line, text)| format!("line {line} `{text}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Self::Io { path, reason } => write!(f, "{}: {reason}", path.display()),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// Ends the build script with this error: each line of the message as
    /// a `cargo::error` (cargo prints them, `error: <package>: <line>`, and
    /// fails the build), then exit status 0, so that cargo does not also
    /// dump the script's whole stdout and stderr under them.
    ///
    /// ```no_run
    /// cuda_kernels_builder::KernelBuild::new("kernels")
    ///     .build()
    ///     .unwrap_or_else(|e| e.fail());
    /// ```
    pub fn fail(self) -> ! {
        let text = self.to_string();
        for (i, line) in text.lines().enumerate() {
            let from = if i == 0 { "cuda-kernels-builder: " } else { "" };
            cargo("error", format_args!("{from}{line}"));
        }
        std::process::exit(0)
    }
}

/// The whole `build.rs` of most projects: builds the kernel crate in
/// `crate_dir` with the defaults of [`KernelBuild::new`] (PTX for `sm_70`,
/// written as `$OUT_DIR/<lib name>.ptx`) and, on failure, ends the build
/// script with the error ([`Error::fail`]).
///
/// ```no_run
/// // build.rs, beside the kernel crate's folder `kernels/`
/// cuda_kernels_builder::build("kernels");
/// ```
pub fn build(crate_dir: impl AsRef<Path>) -> Built {
    KernelBuild::new(crate_dir)
        .build()
        .unwrap_or_else(|e| e.fail())
}

/// A cargo directive on stdout (`cargo::<directive>=<value>`).
fn cargo(directive: &str, value: impl fmt::Display) {
    println!("cargo::{directive}={value}");
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |e| Error::Io {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

impl KernelBuild {
    /// The kernel crate in `crate_dir` (relative to the calling crate's
    /// `CARGO_MANIFEST_DIR`, or absolute), for `sm_70` by default, PTX
    /// only.
    ///
    /// ```no_run
    /// let build = cuda_kernels_builder::KernelBuild::new("kernels-gpu");
    /// ```
    pub fn new(crate_dir: impl AsRef<Path>) -> Self {
        Self {
            crate_dir: crate_dir.as_ref().to_path_buf(),
            name: None,
            arch: "sm_70".into(),
            arch_var: None,
            cubins: Vec::new(),
            out_dir: None,
            target_dir: None,
        }
    }

    /// The name the files are written under: `<name>.ptx`,
    /// `<name>.<arch>.cubin`, `<name>.cubins.rs` (default: the kernel
    /// crate's library name, as in `<lib name>.ptx`).
    ///
    /// ```no_run
    /// let build = cuda_kernels_builder::KernelBuild::new("kernels-gpu").name("kernels");
    /// ```
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The architecture the PTX targets (`sm_70`, `sm_80`, …). The driver
    /// JIT-compiles PTX for any newer GPU, so the oldest one the kernels must
    /// run on is the one to give (default `sm_70`, Rust's nvptx baseline from
    /// 1.97).
    ///
    /// ```no_run
    /// let build = cuda_kernels_builder::KernelBuild::new("kernels").arch("sm_80");
    /// ```
    pub fn arch(mut self, arch: &str) -> Self {
        self.arch = arch.into();
        self.arch_var = None;
        self
    }

    /// The architecture from the environment variable `var` (rebuilding when
    /// it changes), `default` when it is unset.
    ///
    /// ```no_run
    /// let build = cuda_kernels_builder::KernelBuild::new("kernels")
    ///     .arch_from_env("MY_KERNELS_ARCH", "sm_70");
    /// ```
    pub fn arch_from_env(mut self, var: &str, default: &str) -> Self {
        cargo("rerun-if-env-changed", var);
        self.arch = std::env::var(var).unwrap_or_else(|_| default.into());
        self.arch_var = Some(var.into());
        self
    }

    /// The per-architecture builds: for each of these architectures (those
    /// at or above the PTX's) the kernel crate is built once more with
    /// `-Ctarget-cpu=<arch>` and that architecture's PTX ISA (`sm_90a`: PTX
    /// 8.0), and `ptxas` assembles that PTX into a cubin, so that a GPU of
    /// one of them loads machine code instead of JIT-compiling the portable
    /// PTX. A kernel crate gates code on an architecture with
    /// `#[cfg(target_feature = "sm_80")]` (set for sm_80 and above) or
    /// `#[cfg(target_feature = "sm_90a")]` (Hopper's wgmma, TMA): it is in
    /// that architecture's cubin and not in the portable PTX. Without `ptxas`
    /// the build goes on with the PTX alone and a cargo warning says so.
    ///
    /// ```no_run
    /// let build = cuda_kernels_builder::KernelBuild::new("kernels").cubins(&["sm_80", "sm_90a"]);
    /// ```
    pub fn cubins(mut self, archs: &[&str]) -> Self {
        self.cubins = archs.iter().map(|a| a.to_string()).collect();
        self
    }

    /// Write into `dir` instead of `$OUT_DIR` (tests and tools outside a
    /// build script).
    ///
    /// ```no_run
    /// let build = cuda_kernels_builder::KernelBuild::new("/src/kernels").out_dir("/tmp/ptx");
    /// ```
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// The inner build's target directory (default:
    /// `nvptx-kernels/<crate folder>-<hash of its path>` in the outer build's
    /// target directory, found from `$OUT_DIR`). Never the outer build's own:
    /// it holds that directory's lock. Never one that another kernel crate
    /// builds in either: cargo writes a `cdylib`'s PTX under its library name
    /// alone, and a kernel crate that depends on another one (on
    /// `cuda-kernels-gpu`) builds that one's `cdylib` too.
    ///
    /// ```no_run
    /// let build = cuda_kernels_builder::KernelBuild::new("kernels").target_dir("/tmp/nvptx");
    /// ```
    pub fn target_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.target_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Builds the kernel crate to PTX (and the cubins asked for), writes them
    /// to the out directory and prints the cargo directives (rerun triggers,
    /// forwarded warnings). See the [crate] documentation for the steps.
    ///
    /// ```no_run
    /// let built = cuda_kernels_builder::KernelBuild::new("kernels")
    ///     .build()
    ///     .unwrap_or_else(|e| e.fail());
    /// assert!(built.ptx.ends_with("kernels.ptx") || built.ptx.extension().is_some());
    /// ```
    pub fn build(&self) -> Result<Built, Error> {
        let sm = inner::sm(&self.arch).ok_or_else(|| Error::BadArch {
            arch: self.arch.clone(),
            var: self.arch_var.clone(),
        })?;
        let env_dir = |var: &'static str| {
            std::env::var_os(var)
                .map(PathBuf::from)
                .ok_or(Error::NotInBuildScript { var })
        };
        let out_dir = match &self.out_dir {
            Some(dir) => dir.clone(),
            None => env_dir("OUT_DIR")?,
        };
        let manifest_dir =
            env_dir("CARGO_MANIFEST_DIR").or_else(|e| std::env::current_dir().map_err(|_| e))?;
        let crate_dir = manifest_dir.join(&self.crate_dir);
        inner::check_kernel_crate(&crate_dir)?;
        // `app/../kernels` named as `kernels` in messages and rerun triggers.
        let crate_dir = crate_dir.canonicalize().unwrap_or(crate_dir);
        if let Some(known) = inner::known_archs()
            && !known.contains(&self.arch)
        {
            return Err(Error::UnknownArch {
                arch: self.arch.clone(),
                var: self.arch_var.clone(),
                known,
            });
        }
        // Rebuild triggers that hold even when this build fails.
        cargo("rerun-if-changed", crate_dir.join("src").display());
        cargo("rerun-if-changed", crate_dir.join("Cargo.toml").display());
        cargo("rerun-if-env-changed", LIBDEVICE_VAR);
        cargo("rerun-if-env-changed", PTXAS_VAR);

        let (libdevice, searched) = find_libdevice(&manifest_dir);
        if let Some(path) = &libdevice {
            cargo("rerun-if-changed", path.display());
        } else if std::env::var_os(LIBDEVICE_VAR).is_some_and(|v| !v.is_empty()) {
            // A set variable that names no file is a mistake, math or not.
            return Err(Error::NoLibdevice { searched });
        }
        let archs: Vec<_> = self
            .cubins
            .iter()
            .filter_map(|a| match inner::sm(a) {
                Some(n) if n >= sm => Some(Ok((a.as_str(), n))),
                Some(_) => None,
                None => Some(Err(Error::BadArch {
                    arch: a.clone(),
                    var: None,
                })),
            })
            .collect::<Result<_, _>>()?;
        let target_dir = self
            .target_dir
            .clone()
            .unwrap_or_else(|| inner::kernel_target_dir(&out_dir, &crate_dir));
        // The portable build forwards the kernel crate's warnings; the
        // per-architecture builds compile the same code and would repeat them.
        let compile = |arch: &str, target_dir: &Path, forward_warnings| {
            compile(
                &crate_dir,
                target_dir,
                arch,
                libdevice.as_deref(),
                &searched,
                forward_warnings,
            )
        };
        // The portable build and each architecture's at once (their target
        // folders differ; the inner cargos share the outer build's job
        // tokens): on two cores a one-line change rebuilds in about half the
        // time of one after the other.
        let (portable, per_arch) = std::thread::scope(|scope| {
            let jobs: Vec<_> = archs
                .iter()
                .map(|&(arch, _)| {
                    let dir = target_dir.join(arch);
                    let compile = &compile;
                    scope.spawn(move || compile(arch, &dir, false))
                })
                .collect();
            let portable = compile(&self.arch, &target_dir, true);
            let per_arch: Vec<_> = jobs
                .into_iter()
                .map(|job| job.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect();
            (portable, per_arch)
        });
        let (artifact, text) = portable?;
        let text = inner::entry_max_registers(&text);
        // The kernel crate's library name (the artifact is `<lib name>.ptx`):
        // the image identity its kernels' handles carry, on every image's
        // first line.
        let lib_name = artifact
            .file_stem()
            .map_or("kernels".into(), |s| s.to_string_lossy().into_owned());
        let marked = |text: &str| format!("{IMAGE_MARK}{lib_name}\n{text}");
        let name = self.name.clone().unwrap_or_else(|| lib_name.clone());
        std::fs::create_dir_all(&out_dir).map_err(io(&out_dir))?;
        let ptx = out_dir.join(format!("{name}.ptx"));
        let mut rewritten = Vec::new();
        let checked = mended(marked(&text), &self.arch, &ptx, &mut rewritten)?;
        std::fs::write(&ptx, checked).map_err(io(&ptx))?;
        // Each architecture's build was in a folder of its own (its flags
        // differ, and cargo writes the PTX under the library name alone).
        let mut arch_ptx = Vec::new();
        for (&(arch, _), built) in archs.iter().zip(per_arch) {
            let (_, text) = built?;
            let text = inner::entry_max_registers(&text);
            let path = out_dir.join(format!("{name}.{arch}.ptx"));
            let checked = mended(marked(&text), arch, &path, &mut rewritten)?;
            std::fs::write(&path, checked).map_err(io(&path))?;
            arch_ptx.push((arch.to_string(), path));
        }
        warn_rewritten(&name, &rewritten);
        let (ptxas, cubins) = if archs.is_empty() {
            (None, Vec::new())
        } else {
            assemble(&manifest_dir, &out_dir, &name, &arch_ptx, &archs)?
        };
        let cubins_rs = out_dir.join(format!("{name}.cubins.rs"));
        std::fs::write(&cubins_rs, inner::cubins_rs(&cubins)).map_err(io(&cubins_rs))?;
        Ok(Built {
            name,
            ptx,
            arch: self.arch.clone(),
            cubins,
            arch_ptx,
            cubins_rs,
            ptxas,
            libdevice,
        })
    }
}

/// The PTX `text` (for `arch`, to be written to `path`) as it is written:
/// its aligned barriers checked ([`ptx::check_aligned_barriers`]), and its
/// narrowing stores of 64-bit registers rewritten
/// ([`ptx::mend_narrowing_stores`]); the functions rewritten are added to
/// `rewritten` (`arch`, name), for one warning of the whole build.
fn mended(
    text: String,
    arch: &str,
    path: &Path,
    rewritten: &mut Vec<(String, String)>,
) -> Result<String, Error> {
    ptx::check_aligned_barriers(&text).map_err(|d| Error::AlignedBarrier {
        arch: arch.to_string(),
        ptx: path.to_path_buf(),
        function: d.function,
        barriers: d.barriers,
    })?;
    let mended = ptx::mend_narrowing_stores(&text);
    rewritten.extend(mended.functions.into_iter().map(|f| (arch.to_string(), f)));
    Ok(mended.text)
}

/// The cargo warning naming the functions whose narrowing stores were
/// rewritten (each once, with the architectures of its images). The device
/// layer's own functions (`cuda_kernels_device`'s, in every image: its fault
/// recorder stores a `usize` length as `u32`) are rewritten without a word:
/// nothing in the user's code to change.
fn warn_rewritten(name: &str, rewritten: &[(String, String)]) {
    let mut functions: Vec<(&str, Vec<&str>)> = Vec::new();
    for (arch, f) in rewritten
        .iter()
        .filter(|(_, f)| !f.contains("cuda_kernels_device"))
    {
        match functions.iter_mut().find(|(g, _)| g == f) {
            Some((_, archs)) => archs.push(arch),
            None => functions.push((f, vec![arch])),
        }
    }
    if functions.is_empty() {
        return;
    }
    const SHOWN: usize = 8;
    let mut names: Vec<String> = functions
        .iter()
        .take(SHOWN)
        .map(|(f, archs)| format!("{f} ({})", archs.join(", ")))
        .collect();
    if functions.len() > SHOWN {
        names.push(format!("and {} more", functions.len() - SHOWN));
    }
    cargo(
        "warning",
        format_args!(
            "{name}: stores narrowing a 64-bit register to 32 bits rewritten through an explicit \
             cvt.u32.u64 (ptxas and the driver's JIT miscompile the original form when the \
             register holds an f64: docs/known-issues.md) in {}; in kernel code, take an f64's \
             words with cuda_kernels_device::arith::f64_halves",
            names.join(", ")
        ),
    );
}

/// One inner build of the kernel crate for `arch` into `target_dir`: the
/// PTX artifact's path and text. Forwards the build's warnings and prints
/// the rerun triggers for every source it read.
fn compile(
    crate_dir: &Path,
    target_dir: &Path,
    arch: &str,
    libdevice: Option<&Path>,
    searched: &[String],
    forward_warnings: bool,
) -> Result<(PathBuf, String), Error> {
    let cargo_bin = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let compiler = sysroot::Compiler::find();
    let sysroot = compiler
        .as_ref()
        .and_then(|c| sysroot::for_arch(&cargo_bin, c, arch));
    let linker = compiler.as_ref().and_then(linker::for_compiler);
    let output = inner::command(
        &cargo_bin,
        crate_dir,
        target_dir,
        arch,
        libdevice,
        sysroot.as_deref(),
        linker
            .as_ref()
            .map(|(exe, bin)| (exe.as_path(), bin.as_path())),
    )
    .output()
    .map_err(|e| Error::Spawn {
        program: cargo_bin.to_string_lossy().into_owned(),
        reason: e.to_string(),
    })?;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if !output.status.success() {
        return Err(failure(
            crate_dir,
            libdevice.is_none(),
            searched.to_vec(),
            stderr,
        ));
    }
    let crate_name = crate_dir.file_name().unwrap_or_default().to_string_lossy();
    for warning in inner::warnings(&stderr)
        .into_iter()
        .filter(|_| forward_warnings)
    {
        cargo(
            "warning",
            format_args!("{crate_name} (nvptx64 build): {warning}"),
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let artifact = inner::ptx_artifact(&stdout).ok_or_else(|| Error::NoPtx {
        crate_dir: crate_dir.to_path_buf(),
    })?;
    let text = std::fs::read_to_string(&artifact).map_err(io(&artifact))?;
    if libdevice.is_none() && text.contains("__nv_") {
        return Err(Error::NoLibdevice {
            searched: searched.to_vec(),
        });
    }
    // Every source of the kernel crate and its path dependencies.
    if let Ok(dep_info) = std::fs::read_to_string(artifact.with_extension("d")) {
        for file in inner::dep_info_files(&dep_info) {
            cargo("rerun-if-changed", file.display());
        }
    }
    Ok((artifact, text))
}

/// Classifies a failed inner build: missing toolchain components first
/// (asked of rustup, else read from the output), then libdevice missing for
/// math, else rustc's compile errors.
fn failure(crate_dir: &Path, no_libdevice: bool, searched: Vec<String>, stderr: String) -> Error {
    let toolchain = toolchain::active_toolchain(crate_dir);
    let missing = toolchain
        .as_deref()
        .and_then(toolchain::query_missing)
        .unwrap_or_else(|| toolchain::components_named_in(&stderr));
    if !missing.is_empty() {
        return Error::MissingComponents {
            toolchain,
            missing,
            stderr,
        };
    }
    if no_libdevice && stderr.contains("__nv_") {
        return Error::NoLibdevice { searched };
    }
    if let Some(symbol) = inner::duplicate_symbol(&stderr) {
        // The kernel crate, then the other definer: the module rustc's LTO
        // names, or (llvm-bitcode-linker's form) the linked files holding
        // the name, the sysroot's crates aside (they define no kernels).
        let mut crates: Vec<String> = inner::compiling_crate(&stderr).into_iter().collect();
        let others = match inner::bitcode_module_crate(&stderr) {
            Some(module) => vec![module],
            None => inner::linked_files(&stderr)
                .into_iter()
                .filter(|f| std::fs::read(f).is_ok_and(|b| inner::contains(&b, symbol.as_bytes())))
                .filter_map(|f| inner::crate_of(&f))
                .filter(|c| !["core", "compiler_builtins", "alloc"].contains(&c.as_str()))
                .collect(),
        };
        for c in others {
            if !crates.contains(&c) {
                crates.push(c);
            }
        }
        return Error::DuplicateEntry { symbol, crates };
    }
    Error::Compile {
        crate_dir: crate_dir.to_path_buf(),
        stderr: inner::without_progress(&stderr),
    }
}

/// Assembles each architecture's PTX (`arch_ptx`, in the order of `archs`)
/// with `ptxas -v`, in parallel, into
/// `<out_dir>/<name>.<arch>.cubin`, with each kernel's registers and stack
/// frame as `ptxas` reports them. Without `ptxas`, or where it cannot be
/// run, a cargo warning says so and that cubin is left out; where it rejects
/// the PTX, the build fails with its messages ([`Error::Ptxas`]).
fn assemble(
    manifest_dir: &Path,
    out_dir: &Path,
    name: &str,
    arch_ptx: &[(String, PathBuf)],
    archs: &[(&str, u32)],
) -> Result<(Option<PathBuf>, Vec<inner::AssembledCubin>), Error> {
    let (found, searched) = find_ptxas(manifest_dir);
    let Some(ptxas) = found else {
        cargo(
            "warning",
            format_args!(
                "no ptxas found: {name} embeds PTX only, and the driver JIT-compiles it at the \
                 first start; run `{}` (or set {PTXAS_VAR}). Looked at: {}",
                tools::INSTALL_LINE,
                searched.join("; ")
            ),
        );
        return Ok((None, Vec::new()));
    };
    let jobs: Vec<_> = archs
        .iter()
        .zip(arch_ptx)
        .map(|(&(arch, sm), (_, ptx))| {
            let cubin = out_dir.join(format!("{name}.{arch}.cubin"));
            // A previous build's cubin must not pass for this one's.
            let _ = std::fs::remove_file(&cubin);
            let child = Command::new(&ptxas)
                .arg(format!("-arch={arch}"))
                .arg("-v")
                .arg("-o")
                .arg(&cubin)
                .arg(ptx)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn();
            (arch, sm, ptx, cubin, child)
        })
        .collect();
    let mut cubins = Vec::new();
    for (arch, sm, ptx, cubin, child) in jobs {
        match child.and_then(|c| c.wait_with_output()) {
            Ok(o) if o.status.success() && cubin.metadata().is_ok_and(|m| m.len() > 0) => cubins
                .push(inner::AssembledCubin {
                    sm,
                    path: cubin,
                    resources: inner::ptxas_resources(&String::from_utf8_lossy(&o.stderr)),
                }),
            Ok(o) if inner::ptxas_unknown_arch(&String::from_utf8_lossy(&o.stderr)) => {
                return Err(Error::PtxasArch {
                    ptxas: ptxas.clone(),
                    arch: arch.to_string(),
                });
            }
            Ok(o) => {
                return Err(Error::Ptxas {
                    ptxas: ptxas.clone(),
                    arch: arch.to_string(),
                    ptx: ptx.to_path_buf(),
                    stderr: String::from_utf8_lossy(&o.stderr)
                        .lines()
                        .filter(|l| !l.starts_with("ptxas info") && !l.starts_with("    "))
                        .collect::<Vec<_>>()
                        .join("\n"),
                });
            }
            Err(e) => cargo(
                "warning",
                format_args!(
                    "could not run {}: no {arch} cubin embedded: {e}",
                    ptxas.display()
                ),
            ),
        }
    }
    Ok((Some(ptxas), cubins))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_architecture_names_its_variable() {
        let e = Error::BadArch {
            arch: "80".into(),
            var: Some("CUDA_KERNELS_ARCH".into()),
        };
        assert_eq!(
            e.to_string(),
            "\"80\" is not a GPU architecture like sm_70, sm_80, sm_90 (from $CUDA_KERNELS_ARCH)"
        );
        let err = KernelBuild::new("k")
            .arch("compute_80")
            .build()
            .unwrap_err();
        assert_eq!(
            err,
            Error::BadArch {
                arch: "compute_80".into(),
                var: None
            }
        );
    }

    #[test]
    fn an_unknown_architecture_is_one_line_with_the_known_ones() {
        let e = Error::UnknownArch {
            arch: "sm_999".into(),
            var: Some("DOWNSTREAM_ARCH".into()),
            known: vec!["sm_80".into(), "sm_90".into()],
        };
        assert_eq!(
            e.to_string(),
            "\"sm_999\" (from $DOWNSTREAM_ARCH) is not a GPU architecture rustc's NVPTX backend \
             knows: give one of sm_80, sm_90 (`DOWNSTREAM_ARCH=sm_80`)"
        );
    }

    #[test]
    fn a_missing_component_gives_the_command_for_the_toolchain() {
        let e = Error::MissingComponents {
            toolchain: Some("1.95.0-x86_64-unknown-linux-gnu".into()),
            missing: vec!["rust-src"],
            stderr: "error: …".into(),
        };
        let text = e.to_string();
        assert_eq!(
            text.lines().next(),
            Some(
                "the toolchain `1.95.0-x86_64-unknown-linux-gnu` lacks rust-src for the nvptx64 \
                 kernel build: run `rustup component add rust-src --toolchain \
                 1.95.0-x86_64-unknown-linux-gnu`"
            ),
            "{text}"
        );
        assert!(text.ends_with("error: …"), "{text}");
    }

    #[test]
    fn no_libdevice_lists_where_it_looked() {
        let e = Error::NoLibdevice {
            searched: vec![
                "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc (the CUDA toolkit)".into(),
            ],
        };
        let text = e.to_string();
        assert!(text.contains("set CUDA_KERNELS_LIBDEVICE"), "{text}");
        assert!(
            text.ends_with("\n  /usr/local/cuda/nvvm/libdevice/libdevice.10.bc (the CUDA toolkit)"),
            "{text}"
        );
    }

    #[test]
    fn barriers_in_exclusive_branches_fail_the_build_and_narrowing_stores_are_mended() {
        let two = "// cuda-kernels image: k\n.visible .entry dup()\n{\n\t@%p1 bra \t$L__BB0_2;\n\
                   \tbar.sync \t0;\n\tret;\n$L__BB0_2:\n\tbar.sync \t0;\n\tret;\n}\n";
        let path = Path::new("/out/kernels.ptx");
        let mut rewritten = Vec::new();
        let e = mended(two.into(), "sm_70", path, &mut rewritten).unwrap_err();
        assert_eq!(
            e,
            Error::AlignedBarrier {
                arch: "sm_70".into(),
                ptx: path.into(),
                function: "dup".into(),
                barriers: vec![(5, "bar.sync \t0".into()), (8, "bar.sync \t0".into())],
            }
        );
        let text = e.to_string();
        assert!(
            text.starts_with("`dup` (sm_70 PTX, /out/kernels.ptx) has aligned barriers")
                && text.contains("line 5 `bar.sync \t0`, line 8 `bar.sync \t0`")
                && text.contains("sync_threads"),
            "{text}"
        );
        // The non-aligned barrier passes, and a narrowing store is mended.
        let ok = two
            .replace("bar.sync", "barrier.sync")
            .replace("\tret;\n}", "\tst.global.b32 \t[%rd1], %rd6;\n\tret;\n}");
        let text = mended(ok, "sm_80", path, &mut rewritten).unwrap();
        assert!(text.contains("\tcvt.u32.u64 \t%rmis0, %rd6;\n\tst.global.b32 \t[%rd1], %rmis0;"));
        assert_eq!(rewritten, [("sm_80".to_string(), "dup".to_string())]);
    }

    #[test]
    fn a_build_without_cargos_variables_says_so() {
        // Tests run without OUT_DIR (no build script in this crate).
        if std::env::var_os("OUT_DIR").is_none() {
            assert_eq!(
                KernelBuild::new("k").build().unwrap_err(),
                Error::NotInBuildScript { var: "OUT_DIR" }
            );
        }
    }
}
