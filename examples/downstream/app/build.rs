//! Builds the kernel crate `../kernels` for nvptx64 with cuda-kernels-builder:
//! `$OUT_DIR/downstream.ptx` (for sm_70, which the driver JIT-compiles for
//! any newer GPU) and the sm_80 and sm_90 cubins `ptxas` assembles from it,
//! which `src/main.rs` embeds with `cuda_kernels_runtime::embedded_images!`.
fn main() {
    let built = cuda_kernels_builder::KernelBuild::new("../kernels")
        .name("downstream")
        .arch_from_env("DOWNSTREAM_ARCH", "sm_70")
        .cubins(&["sm_80", "sm_90a"])
        .build()
        .unwrap_or_else(|e| e.fail());
    // For tests/ptx.rs: the `ptxas` the build used (empty when none was found).
    let ptxas = built.ptxas.map(|p| p.display().to_string());
    println!(
        "cargo::rustc-env=DOWNSTREAM_PTXAS={}",
        ptxas.unwrap_or_default()
    );
}
