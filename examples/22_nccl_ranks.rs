//! N processes on one machine, one GPU each, joined by NCCL (issue 24): the
//! code path that would run with one process per node. Run without a rank
//! in the environment it is the launcher: it makes the communicator's
//! unique id, starts N copies of itself (`CUDA_KERNELS_RANK`,
//! `CUDA_KERNELS_RANKS`) and serves them the id over loopback TCP; each
//! copy joins as its rank, runs reduce, SGEMM, Mandelbrot and Life through
//! the multi-device launchers' rank functions, checks its part against the
//! CPU, and rank 0 the whole against one GPU's run.
//!
//! `cargo run --release --example 22_nccl_ranks -- [N] [tcp|env|file:PATH]`
//! (N: every GPU by default). Without a GPU (or with `CUDA_KERNELS_SIM=1`)
//! the ranks run on simulated devices, joined through a simulated clique's
//! hub that the launcher serves on loopback (N: 3 by default).
use std::process::{Command, ExitCode};

use cuda_kernels::Result;
use cuda_kernels::multi_gpu::ranks::{IdTransport, Launch, launcher_or_rank};

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool> {
    let simulated = cuda_kernels::sim_requested() || cuda_kernels::devices::device_count() == 0;
    let mut args = std::env::args().skip(1);
    let ranks = match args.next() {
        Some(n) => n
            .parse()
            .map_err(|e| cuda_kernels::Error::invalid("22_nccl_ranks", format!("N {n:?}: {e}")))?,
        None if simulated => 3,
        None => cuda_kernels::devices::device_count() as usize,
    };
    let transport: IdTransport = args.next().as_deref().unwrap_or("tcp").parse()?;
    let exe = std::env::current_exe().map_err(|source| cuda_kernels::Error::Io {
        what: "this program's path".into(),
        source,
    })?;
    // The rank processes are this program again, with the rank in their
    // environment (the arguments do not matter to a rank).
    let job = Launch {
        transport,
        ..Launch::new(ranks)
    };
    let passed = launcher_or_rank(
        Some(&job),
        simulated,
        // A rank runs on device `rank` (or simulated device `rank`).
        |rank| cuda_kernels::rank_gpu(rank, simulated),
        |_| Command::new(&exe),
    )?;
    Ok(passed == Some(true))
}
