//! How a kernel is launched ([`LaunchConfig`]) and the launch-shape checks
//! done before any kernel sees a pointer: [`check_launch_shape`], the one
//! check of a shape against a device's limits on both backends, and the
//! grid arithmetic of the launchers.
use cuda_kernels_device::sim::{self, LaunchShape, Limits};

use crate::error::{Error, Result};

/// How a kernel is launched: grid and block dimensions and the bytes of
/// dynamic shared memory (the `<<<grid, block, smem>>>` of CUDA C).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D grid of `grid` blocks of `block` threads, no dynamic shared memory.
    pub const fn linear(grid: u32, block: u32) -> Self {
        Self {
            grid: (grid, 1, 1),
            block: (block, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// This configuration with `bytes` of dynamic shared memory.
    pub const fn with_shared(self, bytes: u32) -> Self {
        Self {
            shared_mem_bytes: bytes,
            ..self
        }
    }
}

impl LaunchConfig {
    /// The simulator's form of this configuration.
    pub(crate) fn shape(self) -> LaunchShape {
        LaunchShape {
            grid: self.grid.into(),
            block: self.block.into(),
            dynamic_shared_bytes: self.shared_mem_bytes,
        }
    }
}

/// Refuses `cfg` for `kernel` when it exceeds `limits` (a CUDA device's
/// own, or the simulated H100's): [`Error::LaunchRefused`] naming the limit,
/// the same error on both backends. Dynamic shared memory is checked
/// against the opt-in limit when `shared_opt_in` (the kernel was allowed
/// it: [`Gpu::allow_dynamic_shared`](crate::Gpu::allow_dynamic_shared)),
/// else against the 48 KB a block has without.
pub fn check_launch_shape(
    kernel: &'static str,
    cfg: LaunchConfig,
    limits: &Limits,
    shared_opt_in: bool,
) -> Result<()> {
    sim::check_launch_shape(kernel, &cfg.shape(), limits, shared_opt_in)
        .map_err(|e| Error::from_sim(kernel, e))
}

/// Largest `gridDim.x` (2^31 − 1, every GPU these kernels run on).
pub const MAX_GRID_X: u32 = Limits::H100.max_grid[0];
/// Largest `gridDim.y` and `gridDim.z`.
pub const MAX_GRID_YZ: u32 = Limits::H100.max_grid[1];
/// Most threads in one block.
pub const MAX_BLOCK_THREADS: u32 = Limits::H100.max_threads_per_block;

/// Blocks of `block` threads that cover `n` elements, `ceil(n / block)`,
/// capped at [`MAX_GRID_X`] (grid-stride kernels cover the rest).
///
/// Errors if `n` is 0 (nothing to launch) or `block` is not in 1..=1024.
pub fn grid_1d_capped(kernel: &'static str, n: usize, block: u32) -> Result<u32> {
    check_block(kernel, (block, 1, 1))?;
    if n == 0 {
        return Err(Error::invalid(kernel, "empty input: nothing to launch"));
    }
    Ok(n.div_ceil(block as usize).min(MAX_GRID_X as usize) as u32)
}

/// Blocks that cover `extent` exactly (one thread per element, no
/// grid-stride), for grid dimension `axis` ("x", "y" or "z"); errors past the
/// hardware limit for that axis.
pub fn grid_exact(kernel: &'static str, extent: usize, block: u32, axis: &str) -> Result<u32> {
    let limit = if axis == "x" { MAX_GRID_X } else { MAX_GRID_YZ };
    let blocks = extent.div_ceil(block.max(1) as usize);
    if blocks > limit as usize {
        return Err(Error::invalid(
            kernel,
            format!(
                "{extent} elements need {blocks} blocks along {axis}, more than the limit of {limit}"
            ),
        ));
    }
    Ok(blocks as u32)
}

/// Checks a block shape: every dimension at least 1, at most 1024 threads in
/// all, z at most 64.
pub fn check_block(kernel: &'static str, (x, y, z): (u32, u32, u32)) -> Result<()> {
    // u128: three u32 factors can exceed u64 (a panic in debug builds).
    let threads = x as u128 * y as u128 * z as u128;
    if threads == 0 {
        return Err(Error::invalid(
            kernel,
            format!("block ({x}, {y}, {z}) has no threads"),
        ));
    }
    if threads > MAX_BLOCK_THREADS as u128 || z > Limits::H100.max_block[2] {
        return Err(Error::invalid(
            kernel,
            format!(
                "block ({x}, {y}, {z}) has {threads} threads; at most {MAX_BLOCK_THREADS} (and z ≤ 64)"
            ),
        ));
    }
    Ok(())
}

/// `a * b` for element counts, or an error naming `kernel`.
pub fn checked_elements(kernel: &'static str, dims: &[usize]) -> Result<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            Error::invalid(
                kernel,
                format!("the element count of {dims:?} overflows usize"),
            )
        })
}

/// Checks that two inputs have the same length.
pub fn same_len(kernel: &'static str, what: &str, a: usize, b: usize) -> Result<()> {
    if a != b {
        return Err(Error::invalid(
            kernel,
            format!("{what}: lengths differ ({a} vs {b})"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_covers_and_caps() {
        assert_eq!(grid_1d_capped("k", 1, 256).unwrap(), 1);
        assert_eq!(grid_1d_capped("k", 256, 256).unwrap(), 1);
        assert_eq!(grid_1d_capped("k", 257, 256).unwrap(), 2);
        assert_eq!(grid_1d_capped("k", usize::MAX, 1).unwrap(), MAX_GRID_X);
        assert!(grid_1d_capped("k", 0, 256).is_err());
        assert!(grid_1d_capped("k", 10, 0).is_err());
        assert!(grid_1d_capped("k", 10, 2048).is_err());
    }

    #[test]
    fn exact_grid_limits() {
        assert_eq!(grid_exact("k", 65_535 * 32, 32, "y").unwrap(), 65_535);
        assert!(grid_exact("k", 65_535 * 32 + 1, 32, "y").is_err());
        assert!(grid_exact("k", usize::MAX, 1, "x").is_err());
    }

    #[test]
    fn huge_blocks_are_refused_without_overflow() {
        assert!(check_block("k", (u32::MAX, u32::MAX, u32::MAX)).is_err());
        assert!(check_block("k", (1 << 16, 1 << 16, 1)).is_err());
        assert!(check_block("k", (32, 32, 1)).is_ok());
    }

    #[test]
    fn element_counts_overflow() {
        assert_eq!(checked_elements("k", &[3, 4]).unwrap(), 12);
        assert!(checked_elements("k", &[usize::MAX, 2]).is_err());
    }
}
