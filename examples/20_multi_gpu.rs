//! Every GPU of the machine (issue 15): list the devices, open one by
//! ordinal, copy between two devices, and split Mandelbrot and Life across
//! all of them. With one GPU the split runs on that device listed twice;
//! with `CUDA_KERNELS_SIM=1` (or no GPU) on two simulated devices.
//!
//! `cargo run --release --example 20_multi_gpu`
use cuda_kernels::life::{life_cpu, random_lattice};
use cuda_kernels::mandelbrot::{MandelbrotParams, mandelbrot_cpu};
use cuda_kernels::multi_gpu::{life::life, mandelbrot::mandelbrot};
use cuda_kernels::peer::copy_between;
use cuda_kernels::prelude::*;
use cuda_kernels::util::Rng;
use cuda_kernels::{Gpu, Result};

fn main() -> Result<()> {
    let gpus: Vec<Gpu> = match cuda_kernels::all_gpus() {
        Ok(gpus) if !cuda_kernels::sim_requested() => {
            for d in cuda_kernels::devices()? {
                println!("{d}");
            }
            gpus
        }
        _ => {
            println!("no GPU (or CUDA_KERNELS_SIM=1): two simulated devices");
            vec![Gpu::simulated_device(0)?, Gpu::simulated_device(1)?]
        }
    };
    // At least two entries: one GPU is listed twice (two bands on it).
    let mut list: Vec<&Gpu> = gpus.iter().collect();
    if list.len() == 1 {
        list.push(list[0]);
    }
    println!(
        "devices: {}",
        list.iter()
            .map(|g| g.label())
            .collect::<Vec<_>>()
            .join(", ")
    );

    // A copy from the first device to the second (peer where they reach
    // each other, else staged through pinned host memory).
    let (a, b) = (list[0], list[1]);
    let src = a.to_device(&(0..1000u32).collect::<Vec<_>>())?;
    let mut dst = b.zeroed::<u32>(1000)?;
    let path = copy_between(a, &src, b, &mut dst, None)?;
    let mut back = vec![0u32; 1000];
    dst.copy_to(&mut back)?;
    assert!(back.iter().copied().eq(0..1000));
    println!("copied {} → {} ({path})", a.label(), b.label());

    // Mandelbrot by rows and Life in bands with halos: identical to the CPU.
    let p = MandelbrotParams {
        breadth: 256,
        ..MandelbrotParams::default()
    };
    let graph = mandelbrot(&list, p.lattice().view(), p.max_iters, p.upper_bound)?;
    assert_eq!(
        graph,
        mandelbrot_cpu(p.lattice().view(), p.max_iters, p.upper_bound)?
    );
    let start = random_lattice(128, 0.25, &mut Rng::new(1));
    assert_eq!(life(&list, start.view(), 50)?, life_cpu(start.view(), 50)?);
    println!(
        "Mandelbrot 256² and Life 128² × 50 split over {} devices: identical to the CPU",
        list.len()
    );
    Ok(())
}
