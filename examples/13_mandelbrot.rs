//! The Mandelbrot set, launched three ways that all give the
//! same graph as the CPU reference (which runs the kernel's own per-point
//! function): the embedded PTX (`cuda_kernels::gpu()`), PTX loaded from a
//! file at run time (PyCUDA's `module_from_file`), and the raw CUDA driver
//! API, call by call; then the same launch with explicit
//! context synchronization. The fourth path, the C ABI library, is
//! `18_c_abi`.
//!
//! `cargo run --release --example 13_mandelbrot`
use cuda_kernels::Gpu;
use cuda_kernels::mandelbrot::driver_api::{PtxSource, mandelbrot_driver_api};
use cuda_kernels::mandelbrot::{MandelbrotParams, count_inside, mandelbrot_cpu};
use cuda_kernels::prelude::*;

fn main() -> Result<(), cuda_kernels::Error> {
    // The seed's mandelbrot(512, -2, 2, 256, 2), at 256 × 256.
    let p = MandelbrotParams {
        breadth: 256,
        ..MandelbrotParams::default()
    };
    let lattice = p.lattice(); // linspace(low, high, breadth) in f32
    let expected = mandelbrot_cpu(lattice.view(), p.max_iters, p.upper_bound)?;

    // 1. The high-level path.
    let gpu = cuda_kernels::gpu()?;
    let graph = gpu.mandelbrot(lattice.view(), p.max_iters, p.upper_bound)?;
    assert_eq!(graph, expected);
    println!(
        "{} of {} points inside the set",
        count_inside(graph.view()),
        graph.len()
    );

    // 2. and 3. read a PTX file: write the embedded PTX to one first.
    let path = std::env::temp_dir().join(format!("cuda_kernels_13_{}.ptx", std::process::id()));
    std::fs::write(&path, cuda_kernels::PTX).map_err(|source| cuda_kernels::Error::Io {
        what: format!("writing {}", path.display()),
        source,
    })?;
    let from_file = Gpu::from_ptx_file(&path)
        .and_then(|g| g.mandelbrot(lattice.view(), p.max_iters, p.upper_bound));
    // The driver API path makes (and destroys) its own context, as the seed does.
    let driver = mandelbrot_driver_api(
        PtxSource::File(&path),
        lattice.view(),
        p.max_iters,
        p.upper_bound,
    );
    let _ = std::fs::remove_file(&path);
    assert_eq!(from_file?, expected);
    assert_eq!(driver?, expected);

    // Explicit synchronization: async copy in, cuCtxSynchronize, launch, cuCtxSynchronize, async copy out.
    let synced = gpu.mandelbrot_explicit_sync(lattice.view(), p.max_iters, p.upper_bound)?;
    assert_eq!(synced, expected);
    println!("embedded PTX, PTX file, driver API, explicit sync: the same graph as the CPU");
    Ok(())
}
