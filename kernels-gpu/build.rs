//! Tells the build scripts of the crates that depend on this one where its
//! sources are (`DEP_CUDA_KERNELS_GPU_MANIFEST_DIR`, from `links`), so that
//! they can build it for nvptx64 wherever cargo put it.
fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
        println!("cargo::metadata=manifest_dir={}", dir.to_string_lossy());
    }
}
