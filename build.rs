//! Builds `kernels-gpu` for nvptx64 with our builder (`builder/`,
//! `cuda-kernels-builder`), from the folder its build script names
//! (`DEP_CUDA_KERNELS_GPU_MANIFEST_DIR`, through its `links` key): `kernels-gpu/`
//! here, the unpacked crate when this one comes from a registry or from
//! `cargo package`. Writes `$OUT_DIR/kernels.ptx` for `CUDA_KERNELS_ARCH`
//! (default `sm_70`), the portable PTX; and builds the crate again for sm_80
//! and for sm_90a (Hopper's wgmma and TMA kernels, `#[cfg(target_feature =
//! "sm_90a")]`, exist in that build alone), each assembled to a cubin when
//! `ptxas` is found (`src/lib.rs` embeds them with
//! `embedded_images!("kernels")`; the runtime loads the cubin of the
//! device's compute capability).
//!
//! Passed on to the crate: `CUDA_KERNELS_ARCH_BUILT` (the PTX's target),
//! `CUDA_KERNELS_ARCH_PTX` (each per-architecture build's PTX,
//! `sm_80=<path>;sm_90a=<path>`) and `CUDA_KERNELS_PTXAS` (the `ptxas` used,
//! empty when none; `tests/ptx.rs` checks the PTX with it).
fn main() {
    const KERNELS_DIR: &str = "DEP_CUDA_KERNELS_GPU_MANIFEST_DIR";
    let Some(kernels) = std::env::var_os(KERNELS_DIR) else {
        println!(
            "cargo::error={KERNELS_DIR} is not set: cuda-kernels-gpu's build script names its folder"
        );
        std::process::exit(1)
    };
    // In this repository the kernels are `kernels-gpu/` beside this file. A
    // `target/` copied from another checkout holds that checkout's
    // kernels-gpu build-script output (cargo reuses it: same package, same
    // hash), which names the other checkout's folder: its kernels would be
    // built here. Refuse that, saying how to mend it.
    let own = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels-gpu");
    if own.join("Cargo.toml").is_file() {
        let same = |a: &std::path::Path, b: &std::path::Path| {
            a.canonicalize()
                .ok()
                .zip(b.canonicalize().ok())
                .is_some_and(|(a, b)| a == b)
        };
        if !same(&own, std::path::Path::new(&kernels)) {
            println!(
                "cargo::error={KERNELS_DIR} is {}, not this checkout's {}: a target/ folder \
                 copied from another checkout; remove target/*/build/cuda-kernels-gpu-* \
                 and target/nvptx-kernels, then build again",
                std::path::Path::new(&kernels).display(),
                own.display()
            );
            std::process::exit(1)
        }
    }
    let built = cuda_kernels_builder::KernelBuild::new(kernels)
        .name("kernels")
        .arch_from_env("CUDA_KERNELS_ARCH", "sm_70")
        .cubins(&["sm_80", "sm_90a"])
        .build()
        .unwrap_or_else(|e| e.fail());
    println!("cargo::rustc-env=CUDA_KERNELS_ARCH_BUILT={}", built.arch);
    // The per-architecture builds' PTX, `arch=path` joined by `;`, for the
    // offline checks (tests/ptx.rs).
    let arch_ptx: Vec<_> = built
        .arch_ptx
        .iter()
        .map(|(arch, path)| format!("{arch}={}", path.display()))
        .collect();
    println!(
        "cargo::rustc-env=CUDA_KERNELS_ARCH_PTX={}",
        arch_ptx.join(";")
    );
    let ptxas = built.ptxas.map(|p| p.display().to_string());
    println!(
        "cargo::rustc-env=CUDA_KERNELS_PTXAS={}",
        ptxas.unwrap_or_default()
    );
}
