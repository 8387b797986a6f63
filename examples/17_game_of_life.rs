//! Conway's Game of Life, several independent simulations,
//! each in its own stream: per frame, the step kernel, an async copy of the
//! new lattice to the host and a device-side copy new → old, all queued
//! without waiting. Checked against the CPU reference after a few steps.
//! (`cargo run --release -- life` writes the animation as a GIF.)
//!
//! `cargo run --example 17_game_of_life`
use cuda_kernels::life::{LifeSims, life_cpu, random_lattice};
use cuda_kernels::ndarray::Array2;
use cuda_kernels::util::Rng;

fn main() -> Result<(), cuda_kernels::Error> {
    let (n, sims, steps) = (32, 4, 20);
    let mut rng = Rng::new(15);
    // The seed's start: each cell alive with probability 0.25.
    let starts: Vec<Array2<i32>> = (0..sims)
        .map(|_| random_lattice(n, 0.25, &mut rng))
        .collect();

    let gpu = cuda_kernels::gpu()?;
    let mut life = LifeSims::new(&gpu, &starts)?; // one stream per simulation
    for _ in 0..steps {
        life.frame()?; // queues a step on every stream, returns at once
    }
    for (k, start) in starts.iter().enumerate() {
        // `lattice` waits for simulation k's stream, then shows its last frame.
        assert_eq!(life.lattice(k)?, life_cpu(start.view(), steps)?);
    }

    println!(
        "simulation 0 after {steps} steps (same as the CPU, as are the other {}):",
        sims - 1
    );
    for row in life.lattice(0)?.rows() {
        println!(
            "{}",
            row.iter()
                .map(|&c| if c == 1 { '#' } else { '.' })
                .collect::<String>()
        );
    }
    Ok(())
}
