// Builds kernels/ to PTX ($OUT_DIR/my_kernels.ptx), which src/main.rs embeds.
fn main() {
    cuda_kernels_builder::build("kernels");
}
