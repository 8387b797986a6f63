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
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const DEFAULT_ARCH: &str = "sm_70";
const TARGET: &str = "nvptx64-nvidia-cuda";

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
    println!("cargo::rerun-if-env-changed=CUDA_KERNELS_ARCH");

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
    std::fs::write(out_dir.join("kernels.ptx"), &text).expect("OUT_DIR is writable");
    println!("cargo::rustc-env=CUDA_KERNELS_ARCH_BUILT={arch}");
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
