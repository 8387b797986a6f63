//! Runs the kernel crate's `saxpy` on the GPU, or on the CPU simulator when
//! there is none (or `CUDA_KERNELS_SIM=1`), and checks it against the formula.
use cuda_kernels_runtime::{Gpu, Images, In, InOut, LaunchConfig, Result};

/// The PTX `build.rs` wrote.
const IMAGES: Images<'static> = cuda_kernels_runtime::embedded_images!("my_kernels");

fn main() -> Result<()> {
    let gpu = Gpu::from_images_or_simulator(&IMAGES)?;
    let n = 1_000_003;
    // Small integers: every product and sum is exact, fused or not.
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let mut y = vec![1.0f32; n];
    let cfg = LaunchConfig::linear(n.div_ceil(256).min(4096) as u32, 256);
    // SAFETY: x and y hold n f32 each, as saxpy's contract asks.
    unsafe { gpu.launch_host(my_kernels::SAXPY, cfg, (2.0f32, In(&x), InOut(&mut y), n)) }?;
    let wrong = (0..n).filter(|&i| y[i] != 2.0 * x[i] + 1.0).count();
    let on = if gpu.is_simulated() {
        "the CPU simulator"
    } else {
        "the GPU"
    };
    println!("saxpy on {on}: {n} elements, {wrong} wrong");
    if wrong > 0 {
        std::process::exit(1);
    }
    Ok(())
}
