//! The 16-bit float check's launcher: `float16_check` over word arrays (see
//! `cuda_kernels_gpu::float16_checks`), for tests that compare every
//! conversion's and packed operation's bits on the GPU, on the simulator and
//! against a reference.
use cuda_kernels_gpu::float16_checks::FLOAT16_CHECK;
pub use cuda_kernels_gpu::float16_checks::{FLOAT16_OPS, Float16Op, float16_apply};

use crate::Gpu;
use crate::error::{Error, Result};
use crate::launch::LaunchConfig;
use crate::launch::grid_1d_capped;

/// Threads per block of the check.
const BLOCK: u32 = 256;
/// Blocks at most (a grid-stride loop covers the rest; a small grid keeps
/// the simulator's thread count low).
const MAX_BLOCKS: u32 = 64;

/// The 16-bit float checks on a [`Gpu`].
pub trait Float16Checks {
    /// `op(x[i], y[i], z[i])` for every `i` on the device (the arrays of equal
    /// length; `y`, `z` unused by the conversions).
    fn float16_check(&self, op: Float16Op, x: &[u32], y: &[u32], z: &[u32]) -> Result<Vec<u32>>;
}

impl Float16Checks for Gpu {
    fn float16_check(&self, op: Float16Op, x: &[u32], y: &[u32], z: &[u32]) -> Result<Vec<u32>> {
        let name = FLOAT16_CHECK.name();
        let n = x.len();
        if y.len() != n || z.len() != n {
            return Err(Error::invalid(
                name,
                format!("arrays of {n}, {} and {} words", y.len(), z.len()),
            ));
        }
        let grid = grid_1d_capped(name, n, BLOCK)?.min(MAX_BLOCKS);
        self.bind()?;
        let stream = self.stream();
        let (dx, dy, dz) = (self.to_device(x)?, self.to_device(y)?, self.to_device(z)?);
        let mut out = self.zeroed::<u32>(n)?;
        // SAFETY: dx, dy, dz and out hold n words each and are distinct buffers
        // that live until the synchronization below.
        unsafe {
            self.launch(
                FLOAT16_CHECK,
                LaunchConfig::linear(grid, BLOCK),
                stream,
                (&dx, &dy, &dz, &mut out, n, op as u32),
            )
        }?;
        self.synchronize(name)?;
        let mut host = vec![0u32; n];
        out.copy_to(&mut host[..])?;
        Ok(host)
    }
}
