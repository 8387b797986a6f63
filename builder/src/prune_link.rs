//! `cuda-kernels-link`: the inner build's linker, in front of rustc's
//! `llvm-bitcode-linker`. A program of its own, with nothing but `std`: the
//! builder compiles this file with the host `rustc` once (see `linker.rs`)
//! and passes it to the inner build as `-Clinker`.
//!
//! `llvm-bitcode-linker` links every input's bitcode into one module (the
//! kernel crate, the device layer, `core`, `compiler_builtins`, libdevice),
//! then runs `opt --passes=default<O3>,internalize,globaldce`: the whole of
//! `core` and libdevice goes through `-O3` before what the kernels never
//! call is dropped. That is 5 s of every kernel build, whatever its size.
//! This linker runs the same `llvm-link`, first drops what no exported
//! symbol reaches (an `internalize,globaldce` pass to find what is reached,
//! then one that internalizes only what is not, so that everything reached
//! keeps its linkage), then runs `llvm-bitcode-linker`'s own `opt` and `llc`
//! commands (those of rustc 1.95's, for the arguments rustc passes it) on
//! what is left: the same passes over the same reachable code, so the same
//! PTX, byte for byte on this repository's kernels and its downstream
//! example, in a fraction of the time. (Handing the pruned module to
//! `llvm-bitcode-linker` instead would link it a second time, which
//! reorders the module and so the PTX.) For any other arguments, and
//! whenever a step fails, it runs `llvm-bitcode-linker` on the original
//! inputs, so that its behaviour and its error messages (a duplicate
//! symbol, a missing tool) are exactly those of rustc's linker.
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// The folder of the toolchain's LLVM tools (`llvm-link`, `opt`,
/// `llvm-nm`, and `self-contained/llvm-bitcode-linker`), set by the
/// builder for the inner build.
const LLVM_BIN_VAR: &str = "CUDA_KERNELS_LLVM_BIN";

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let Some(bin) = std::env::var_os(LLVM_BIN_VAR).map(PathBuf::from) else {
        eprintln!("cuda-kernels-link: {LLVM_BIN_VAR} is not set");
        return ExitCode::FAILURE;
    };
    let linker = bin.join("self-contained").join("llvm-bitcode-linker");
    if linked(&bin, &args).is_some() {
        return ExitCode::SUCCESS;
    }
    match Command::new(&linker).args(&args).status() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => ExitCode::from(status.code().unwrap_or(1).clamp(1, 255) as u8),
        Err(e) => {
            eprintln!("cuda-kernels-link: cannot run {}: {e}", linker.display());
            ExitCode::FAILURE
        }
    }
}

/// Links, prunes, optimises and writes the PTX as `llvm-bitcode-linker`
/// would; `None` when the arguments are not the ones this knows or any
/// step fails (the caller then runs `llvm-bitcode-linker`).
fn linked(bin: &Path, args: &[OsString]) -> Option<()> {
    let parsed = Parsed::of(args)?;
    // `llvm-bitcode-linker`'s commands for what rustc passes it: `--debug`
    // (rustc passes it unless told to strip), one `-O` level, the target
    // CPU and one list of target features.
    let (true, Some(level), Some(cpu), Some(features)) = (
        parsed.debug,
        parsed.level.as_deref(),
        parsed.cpu.as_deref(),
        parsed.features.as_deref(),
    ) else {
        return None;
    };
    let base = parsed.output.with_extension("");
    let with = |suffix: &str| {
        let mut name = base.clone().into_os_string();
        name.push(suffix);
        PathBuf::from(name)
    };
    let (linked, reached, pruned, optimized) = (
        with(".all.bc"),
        with(".reached.bc"),
        with(".pruned.bc"),
        with(".optimized.bc"),
    );
    let (exports, keep) = (with(".exports.txt"), with(".keep.txt"));
    let result = (|| {
        std::fs::write(&exports, lines(&parsed.exports)).ok()?;
        run(Command::new(bin.join("llvm-link"))
            .arg("--ignore-non-bitcode")
            .args(&parsed.inputs)
            .arg("-o")
            .arg(&linked))?;
        // What the exports reach: everything else is internalized and dropped.
        run(Command::new(bin.join("opt"))
            .arg(&linked)
            .arg(api_file(&exports))
            .arg("--passes=internalize,globaldce")
            .arg("-o")
            .arg(&reached))?;
        let names = output(
            Command::new(bin.join("llvm-nm"))
                .args(["--defined-only", "--format=just-symbols"])
                .arg(&reached),
        )?;
        let mut kept: Vec<String> = names.lines().map(str::to_string).collect();
        kept.extend(parsed.exports.iter().cloned());
        std::fs::write(&keep, lines(&kept)).ok()?;
        // The linked module less what is not reached: what is reached keeps
        // its linkage, so the optimiser sees it as before.
        run(Command::new(bin.join("opt"))
            .arg(&linked)
            .arg(api_file(&keep))
            .arg("--passes=internalize,globaldce")
            .arg("-o")
            .arg(&pruned))?;
        // llvm-bitcode-linker's optimisation and code generation.
        run(Command::new(bin.join("opt"))
            .arg(&pruned)
            .arg("-o")
            .arg(&optimized)
            .arg(api_file(&exports))
            .arg(format!("--passes=default<O{level}>,internalize,globaldce"))
            .arg("--strip-debug"))?;
        run(Command::new(bin.join("llc"))
            .args(["--mcpu", cpu])
            .arg(format!("--mattr={features}"))
            .arg(&optimized)
            .arg("-o")
            .arg(&parsed.output))
    })();
    for scratch in [&linked, &reached, &pruned, &optimized, &exports, &keep] {
        let _ = std::fs::remove_file(scratch);
    }
    result
}

/// The arguments `llvm-bitcode-linker` takes, as rustc passes them.
pub(crate) struct Parsed {
    /// `--export-symbol NAME`.
    pub(crate) exports: Vec<String>,
    /// The input files (objects, rlibs, bitcode).
    pub(crate) inputs: Vec<OsString>,
    /// `-o FILE` / `--output FILE`.
    pub(crate) output: PathBuf,
    /// `--debug`.
    pub(crate) debug: bool,
    /// `-O<level>` / `-O <level>`.
    pub(crate) level: Option<String>,
    /// `--target-cpu CPU`.
    pub(crate) cpu: Option<String>,
    /// `--target-feature=FEATURES` (one list; `None` for none or several).
    pub(crate) features: Option<String>,
}

impl Parsed {
    /// `None` for an argument this linker does not know (then the inputs
    /// go to `llvm-bitcode-linker` as they are).
    pub(crate) fn of(args: &[OsString]) -> Option<Self> {
        let mut parsed = Parsed {
            exports: Vec::new(),
            inputs: Vec::new(),
            output: PathBuf::new(),
            debug: false,
            level: None,
            cpu: None,
            features: None,
        };
        let mut feature_lists = 0;
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let text = arg.to_str()?;
            let mut value = || Some(args.next()?.to_str()?.to_string());
            match text {
                "--export-symbol" => parsed.exports.push(value()?),
                "-o" | "--output" => parsed.output = PathBuf::from(value()?),
                "--target-cpu" => parsed.cpu = Some(value()?),
                "-O" => parsed.level = Some(value()?),
                "--target-feature" => {
                    parsed.features = Some(value()?);
                    feature_lists += 1;
                }
                "-L" | "--target" => {
                    value()?;
                }
                "--debug" => parsed.debug = true,
                _ if text.starts_with("--target-feature=") => {
                    parsed.features = Some(text["--target-feature=".len()..].to_string());
                    feature_lists += 1;
                }
                _ if text.starts_with("-O") => parsed.level = Some(text[2..].to_string()),
                _ if text.starts_with("--target-cpu=") => {
                    parsed.cpu = Some(text["--target-cpu=".len()..].to_string())
                }
                _ if text.starts_with("--target=") || text.starts_with("-L") => {}
                _ if text.starts_with('-') => return None,
                _ => parsed.inputs.push(arg.clone()),
            }
        }
        if feature_lists > 1 {
            parsed.features = None;
        }
        (!parsed.exports.is_empty() && !parsed.inputs.is_empty() && parsed.output != Path::new(""))
            .then_some(parsed)
    }
}

/// `--internalize-public-api-file=FILE`.
fn api_file(file: &Path) -> OsString {
    let mut arg = OsString::from("--internalize-public-api-file=");
    arg.push(file);
    arg
}

/// One name a line.
fn lines(names: &[String]) -> String {
    names.iter().map(|n| format!("{n}\n")).collect()
}

/// Runs `cmd`, its output discarded; `None` unless it succeeds.
fn run(cmd: &mut Command) -> Option<()> {
    let status = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    status.success().then_some(())
}

/// `cmd`'s stdout when it succeeds.
fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.stderr(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
