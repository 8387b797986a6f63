//! The launcher of the fidelity cases (`kernels-gpu/src/fidelity.rs`): one
//! case, its launch shape from [`FIDELITY_CASES`], its output words back.
use cuda_kernels_gpu::fidelity::FidelityCase;
pub use cuda_kernels_gpu::fidelity::{FIDELITY_CASES, LARGE_LOCAL_WORDS};

use crate::Gpu;
use crate::error::Result;
use crate::launch::LaunchConfig;

/// The simulator-fidelity checks on a [`Gpu`].
pub trait FidelityChecks {
    /// Runs fidelity case `case` once, on zeroed output, and returns the
    /// output words (the kernel's error, a fault included, as it is).
    fn fidelity_case(&self, case: &FidelityCase) -> Result<Vec<u32>>;
}

impl FidelityChecks for Gpu {
    fn fidelity_case(&self, case: &FidelityCase) -> Result<Vec<u32>> {
        let k = case.kernel;
        self.bind()?;
        let stream = self.stream();
        let mut out = self.zeroed::<u32>(case.out_words)?;
        let [gx, gy, gz] = case.grid;
        let [bx, by, bz] = case.block;
        let cfg = LaunchConfig {
            grid: (gx, gy, gz),
            block: (bx, by, bz),
            shared_mem_bytes: 0,
        };
        // SAFETY: `out` holds `out_words` u32, the `n` every case kernel
        // writes below; the shapes are the table's.
        unsafe { self.launch(k, cfg, stream, (&mut out, case.out_words)) }?;
        self.synchronize(k.name())?;
        let mut host = vec![0u32; case.out_words];
        out.copy_to(&mut host[..])?;
        Ok(host)
    }
}
