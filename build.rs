//! Our `cuda_builder`: compiles `kernels-gpu` for `nvptx64-nvidia-cuda` with
//! rustc's own NVPTX backend and embeds the PTX in the library.
//!
//! - Inner build: `cargo build --release --target nvptx64-nvidia-cuda
//!   -Zbuild-std=core` on the pinned stable toolchain, with
//!   `RUSTC_BOOTSTRAP=1` set for that inner build only (the unstable features
//!   `abi_ptx`, `stdarch_nvptx`, `asm_experimental_arch` and `-Zbuild-std`
//!   need it; the host build never sees it).
//! - Its own target directory (`target/nvptx-kernels`), so it never waits on
//!   the outer build's lock; inherited `RUSTFLAGS`, wrappers and target
//!   settings are stripped.
//! - `CUDA_KERNELS_ARCH` picks the PTX target (default `sm_70`: the driver
//!   JIT-compiles PTX for any newer GPU, and Rust 1.97 makes sm_70 the nvptx
//!   baseline). The PTX goes to `$OUT_DIR/kernels.ptx`.
//! - The inner build's warnings are forwarded as `cargo::warning` lines.
//! - Cubins: `ptxas` (`$PTXAS`, else `ptxas` on `PATH`, else the wheel that
//!   `scripts/setup.sh` installs in `.tools/ptxas`) assembles the PTX for each
//!   of [`CUBIN_ARCHS`] at or above the PTX target, in parallel, into
//!   `$OUT_DIR/kernels.<arch>.cubin`; `$OUT_DIR/cubins.rs` lists them for the
//!   library to embed (`cuda_kernels::CUBINS`), so that a device of those
//!   architectures loads machine code instead of JIT-compiling the PTX. Without
//!   `ptxas` the list is empty and a build warning says so. The `ptxas` used is
//!   passed on as `CUDA_KERNELS_PTXAS` (empty when none) for the offline PTX
//!   checks (`tests/ptx.rs`).
use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const DEFAULT_ARCH: &str = "sm_70";
const TARGET: &str = "nvptx64-nvidia-cuda";
/// The architectures a cubin is embedded for (A100 and H100 families).
const CUBIN_ARCHS: [&str; 2] = ["sm_80", "sm_90"];
/// Where `scripts/setup.sh` installs the `nvidia-cuda-nvcc-cu12` wheel's ptxas.
const WHEEL_PTXAS: &str = ".tools/ptxas/nvidia/cuda_nvcc/bin/ptxas";

fn main() {
    let root =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let kernels = root.join("kernels-gpu");
    println!("cargo::rerun-if-changed={}", kernels.join("src").display());
    println!(
        "cargo::rerun-if-changed={}",
        kernels.join("Cargo.toml").display()
    );
    println!("cargo::rerun-if-changed={}", root.join("device").display());
    println!("cargo::rerun-if-env-changed=CUDA_KERNELS_ARCH");
    println!("cargo::rerun-if-env-changed=PTXAS");

    let arch = env::var("CUDA_KERNELS_ARCH").unwrap_or_else(|_| DEFAULT_ARCH.to_string());
    if !arch.starts_with("sm_") || arch[3..].parse::<u32>().map_or(true, |v| v < 50) {
        fail(
            &format!(
                "CUDA_KERNELS_ARCH={arch:?} is not a GPU architecture like sm_70, sm_80, sm_90"
            ),
            "",
        );
    }
    let libdevice = libdevice(&root);
    let target_dir = kernel_target_dir(&out_dir);
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());

    let mut cmd = Command::new(&cargo);
    cmd.current_dir(&kernels)
        .args(["build", "--release", "--target", TARGET, "-Zbuild-std=core"])
        .arg("--manifest-path")
        .arg(kernels.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .env("RUSTC_BOOTSTRAP", "1")
        // libdevice goes to the bitcode linker, which keeps only what the kernels call.
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            format!("-Ctarget-cpu={arch}\x1f-Clink-arg={}", libdevice.display()),
        )
        // The workspace's release profile is the host's; the kernels get their own.
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "3")
        .env("CARGO_PROFILE_RELEASE_LTO", "fat")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
        .env("CARGO_PROFILE_RELEASE_PANIC", "abort")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS", "false")
        .env("CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS", "false");
    for var in [
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    let output = match cmd.output() {
        Ok(o) => o,
        Err(e) => fail(&format!("could not run `{cargo}`: {e}"), ""),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        fail("the nvptx64 build of kernels-gpu failed", &stderr);
    }
    forward_warnings(&stderr);
    let ptx = target_dir
        .join(TARGET)
        .join("release")
        .join("cuda_kernels_gpu.ptx");
    let text = std::fs::read_to_string(&ptx).unwrap_or_else(|e| {
        fail(
            &format!("the kernel build wrote no PTX at {}: {e}", ptx.display()),
            &stderr,
        )
    });
    let ptx_file = out_dir.join("kernels.ptx");
    std::fs::write(&ptx_file, &text).expect("OUT_DIR is writable");
    println!("cargo::rustc-env=CUDA_KERNELS_ARCH_BUILT={arch}");
    embed_cubins(&root, &out_dir, &ptx_file, &arch);
}

/// Each warning block of the inner build's output (from a `warning` line to
/// the next blank line or cargo status line) as `cargo::warning` lines, so
/// that `cargo build` shows what the nvptx64 compile said.
fn forward_warnings(stderr: &str) {
    let mut in_warning = false;
    for line in stderr.lines() {
        // Cargo's status lines: an indented capitalised verb ("    Finished …").
        let status = line.starts_with(' ')
            && line.split_whitespace().next().is_some_and(|w| {
                w.starts_with(|c: char| c.is_ascii_uppercase())
                    && w.chars().all(|c| c.is_ascii_alphabetic())
            });
        if line.starts_with("warning") {
            in_warning = true;
        } else if line.trim().is_empty() || status || line.starts_with("error") {
            in_warning = false;
        }
        if in_warning {
            println!("cargo::warning=kernels-gpu (nvptx64): {line}");
        }
    }
}

/// `$PTXAS`, else `ptxas` on `PATH`, else the set-up's wheel under the
/// workspace; `None` when none runs.
fn find_ptxas(root: &Path) -> Option<PathBuf> {
    let wheel = root.join(WHEEL_PTXAS);
    if wheel.is_file() {
        // Rebuild when the set-up installs or replaces it.
        println!("cargo::rerun-if-changed={}", wheel.display());
    }
    let candidates = [
        env::var_os("PTXAS").map(PathBuf::from),
        Some(PathBuf::from("ptxas")),
        Some(wheel),
    ];
    candidates.into_iter().flatten().find(|p| {
        Command::new(p)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Assembles `ptx_file` for every architecture of [`CUBIN_ARCHS`] at or above
/// `arch` (in parallel) and writes `$OUT_DIR/cubins.rs`, the expression the
/// library embeds as `CUBINS`. Without `ptxas`, or where it fails, the
/// build goes on with the PTX alone and a warning says so.
fn embed_cubins(root: &Path, out_dir: &Path, ptx_file: &Path, arch: &str) {
    let ptxas = find_ptxas(root);
    println!(
        "cargo::rustc-env=CUDA_KERNELS_PTXAS={}",
        ptxas
            .as_deref()
            .map(Path::display)
            .map(|d| d.to_string())
            .unwrap_or_default()
    );
    let sm = |a: &str| a.trim_start_matches("sm_").parse::<u32>().unwrap_or(0);
    let mut entries = Vec::new();
    match &ptxas {
        None => println!(
            "cargo::warning=no ptxas found ($PTXAS, PATH, {WHEEL_PTXAS}): the library embeds \
             PTX only, and the driver JIT-compiles it at the first start (about 1 s); \
             run `bash scripts/setup.sh` to install ptxas"
        ),
        Some(ptxas) => {
            let jobs: Vec<_> = CUBIN_ARCHS
                .iter()
                .filter(|a| sm(a) >= sm(arch))
                .map(|a| {
                    let cubin = out_dir.join(format!("kernels.{a}.cubin"));
                    // A previous build's cubin must not pass for this one's.
                    let _ = std::fs::remove_file(&cubin);
                    let child = Command::new(ptxas)
                        .arg(format!("-arch={a}"))
                        .arg("-o")
                        .arg(&cubin)
                        .arg(ptx_file)
                        .stdout(Stdio::null())
                        .stderr(Stdio::piped())
                        .spawn();
                    (a, cubin, child)
                })
                .collect();
            for (a, cubin, child) in jobs {
                match child.and_then(|c| c.wait_with_output()) {
                    Ok(o) if o.status.success() && cubin.metadata().is_ok_and(|m| m.len() > 0) => {
                        entries.push(format!(
                            "Cubin {{ sm: {}, image: include_bytes!({:?}) }},",
                            sm(a),
                            cubin.display().to_string()
                        ))
                    }
                    Ok(o) => println!(
                        "cargo::warning=`{} -arch={a}` wrote no cubin: no {a} cubin embedded: {}",
                        ptxas.display(),
                        String::from_utf8_lossy(&o.stderr).replace('\n', " ")
                    ),
                    Err(e) => println!(
                        "cargo::warning=could not run {}: no {a} cubin embedded: {e}",
                        ptxas.display()
                    ),
                }
            }
        }
    }
    // An expression of type `&'static [Cubin]`.
    let code = format!("&[\n{}\n]\n", entries.join("\n"));
    std::fs::write(out_dir.join("cubins.rs"), code).expect("OUT_DIR is writable");
}

/// NVIDIA's libdevice (`libdevice.10.bc`), linked into the kernels for
/// `device::math`: `$CUDA_KERNELS_LIBDEVICE`, else the copy in the
/// `nvidia-cuda-nvcc-cu12` wheel that `scripts/setup.sh` installs in `.tools`.
fn libdevice(root: &Path) -> PathBuf {
    println!("cargo::rerun-if-env-changed=CUDA_KERNELS_LIBDEVICE");
    let path = env::var_os("CUDA_KERNELS_LIBDEVICE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            root.join(".tools/ptxas/nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc")
        });
    if !path.is_file() {
        fail(
            &format!(
                "no libdevice at {} (set CUDA_KERNELS_LIBDEVICE to a libdevice.10.bc, found in \
                 CUDA's nvvm/libdevice/)",
                path.display()
            ),
            "",
        );
    }
    println!("cargo::rerun-if-changed={}", path.display());
    path
}

/// `<target>/nvptx-kernels`, found from OUT_DIR (`<target>/[<triple>/]<profile>/build/<pkg>/out`),
/// shared by the debug and release outer builds.
fn kernel_target_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent())
        .and_then(|profile| profile.parent())
        .map(|target| target.join("nvptx-kernels"))
        .unwrap_or_else(|| out_dir.join("nvptx-kernels"))
}

fn fail(what: &str, stderr: &str) -> ! {
    let mut hint = String::new();
    if stderr.contains("rust-src") || stderr.contains("could not find `core`") {
        hint.push_str("\n  the `rust-src` component is missing");
    }
    if stderr.contains("llvm-bitcode-linker") || stderr.contains("linker `") {
        hint.push_str("\n  the `llvm-bitcode-linker` component is missing");
    }
    if stderr.contains("toolchain") && stderr.contains("not installed") {
        hint.push_str("\n  the pinned toolchain is not installed");
    }
    panic!(
        "\n\ncuda-kernels build.rs: {what}{hint}\n  \
         run `bash scripts/setup.sh` (it installs the toolchain pinned in rust-toolchain.toml \
         with rust-src, llvm-tools and llvm-bitcode-linker)\n\n--- inner cargo output ---\n{stderr}\n"
    );
}
