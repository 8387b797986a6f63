//! Builds `kernels-gpu` for nvptx64 with our builder (`builder/`,
//! `cuda-kernels-builder`): `$OUT_DIR/kernels.ptx` for `CUDA_KERNELS_ARCH`
//! (default `sm_70`), and the sm_80/sm_90 cubins when `ptxas` is found
//! (`src/lib.rs` embeds them with `embedded_images!("kernels")`).
//!
//! Passed on to the crate: `CUDA_KERNELS_ARCH_BUILT` (the PTX's target) and
//! `CUDA_KERNELS_PTXAS` (the `ptxas` used, empty when none; `tests/ptx.rs`
//! checks the PTX with it).
fn main() {
    let built = cuda_kernels_builder::KernelBuild::new("kernels-gpu")
        .name("kernels")
        .arch_from_env("CUDA_KERNELS_ARCH", "sm_70")
        .cubins(&["sm_80", "sm_90"])
        .build()
        .unwrap_or_else(|e| e.fail());
    println!("cargo::rustc-env=CUDA_KERNELS_ARCH_BUILT={}", built.arch);
    let ptxas = built.ptxas.map(|p| p.display().to_string());
    println!(
        "cargo::rustc-env=CUDA_KERNELS_PTXAS={}",
        ptxas.unwrap_or_default()
    );
}
