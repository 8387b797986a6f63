//! Launch-shape arithmetic, checked before any kernel sees a pointer.
use std::sync::OnceLock;

use cuda_kernels_gpu::bandwidth::{UNROLL, VECTOR_BYTES};

use crate::error::{Error, Result};
use crate::kernel::LaunchConfig;

/// Largest `gridDim.x` (2^31 − 1).
pub const MAX_GRID_X: u32 = i32::MAX as u32;
/// Largest `gridDim.y` and `gridDim.z`.
pub const MAX_GRID_YZ: u32 = 65_535;
/// Most threads in one block.
pub const MAX_BLOCK_THREADS: u32 = 1024;

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

/// Threads per block of the vectorized bandwidth kernels (`multiply`,
/// `vector_sum_i32`, `doubles_matrix`, the `elementwise_*` kernels).
pub const VECTORIZED_BLOCK: u32 = 256;

/// How the grid of a vectorized bandwidth kernel is sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorizedGrid {
    /// Enough blocks that each thread makes one pass of [`UNROLL`] vectors.
    Cover,
    /// At most this many blocks per multiprocessor (grid-stride over the rest).
    PerSm(u32),
}

/// The environment variable that overrides the vectorized kernels' launch
/// as `cover` or `sm:<blocks per SM>`, optionally followed by
/// `,<threads per block>` (for tuning runs; read once).
pub const VECTORIZED_ENV: &str = "CUDA_KERNELS_BW_GRID";

/// The vectorized kernels' grid sizing and block, from [`VECTORIZED_ENV`]
/// when it parses, else `(Cover, VECTORIZED_BLOCK)`.
pub fn vectorized_shape() -> (VectorizedGrid, u32) {
    static SHAPE: OnceLock<(VectorizedGrid, u32)> = OnceLock::new();
    *SHAPE.get_or_init(|| {
        let parse = |v: &str| -> Option<(VectorizedGrid, u32)> {
            let (grid, block) = match v.split_once(',') {
                Some((g, b)) => (g, b.trim().parse().ok()?),
                None => (v, VECTORIZED_BLOCK),
            };
            let grid = match grid.trim() {
                "cover" => VectorizedGrid::Cover,
                g => VectorizedGrid::PerSm(g.strip_prefix("sm:")?.parse().ok()?),
            };
            (block % 32 == 0 && (32..=MAX_BLOCK_THREADS).contains(&block)).then_some((grid, block))
        };
        std::env::var(VECTORIZED_ENV)
            .ok()
            .and_then(|v| parse(&v))
            .unwrap_or((VectorizedGrid::Cover, VECTORIZED_BLOCK))
    })
}

/// The grid of a vectorized kernel over `n` elements of `size` bytes with
/// blocks of `block` threads on a GPU of `sms` multiprocessors: every thread
/// gets [`UNROLL`] 16-byte vectors ([`VectorizedGrid::Cover`]) or the grid
/// is capped at `sms × k` blocks ([`VectorizedGrid::PerSm`]); at least 1,
/// at most [`MAX_GRID_X`]. Errors if `n` is 0 or the block is invalid.
pub fn vectorized_grid(
    kernel: &'static str,
    n: usize,
    size: usize,
    block: u32,
    sms: u32,
    grid: VectorizedGrid,
) -> Result<u32> {
    check_block(kernel, (block, 1, 1))?;
    if n == 0 {
        return Err(Error::invalid(kernel, "empty input: nothing to launch"));
    }
    let per_vector = (VECTOR_BYTES / size.clamp(1, VECTOR_BYTES)).max(1);
    let cover = n
        .div_ceil(per_vector)
        .div_ceil(block as usize * UNROLL)
        .clamp(1, MAX_GRID_X as usize);
    Ok(match grid {
        VectorizedGrid::Cover => cover,
        VectorizedGrid::PerSm(k) => cover.min((sms.max(1) as usize * k.max(1) as usize).max(1)),
    } as u32)
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
    if threads > MAX_BLOCK_THREADS as u128 || z > 64 {
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

impl crate::Gpu {
    /// The prelude of every 1-D launch over two inputs of one length: the
    /// lengths agree and are not 0, the grid that covers them with blocks of
    /// `block`, the context current. Returns the launch configuration and
    /// the length.
    pub(crate) fn prepare_pair_1d(
        &self,
        kernel: &'static str,
        a_len: usize,
        b_len: usize,
        block: u32,
    ) -> Result<(LaunchConfig, usize)> {
        same_len(kernel, "a and b", a_len, b_len)?;
        let grid = grid_1d_capped(kernel, a_len, block)?;
        self.bind()?;
        Ok((LaunchConfig::linear(grid, block), a_len))
    }

    /// The `(grid, block)` of a vectorized bandwidth kernel over `n`
    /// elements of `size` bytes on this GPU ([`vectorized_grid`] with
    /// [`vectorized_shape`]).
    pub(crate) fn vectorized_launch(
        &self,
        kernel: &'static str,
        n: usize,
        size: usize,
    ) -> Result<(u32, u32)> {
        let (grid, block) = vectorized_shape();
        let sms = match grid {
            VectorizedGrid::Cover => 1,
            VectorizedGrid::PerSm(_) => self.multiprocessors(kernel)?,
        };
        Ok((vectorized_grid(kernel, n, size, block, sms, grid)?, block))
    }

    /// [`Gpu::prepare_pair_1d`] for a vectorized kernel over elements of
    /// `size` bytes: returns the launch configuration and the length.
    pub(crate) fn prepare_pair_vectorized(
        &self,
        kernel: &'static str,
        a_len: usize,
        b_len: usize,
        size: usize,
    ) -> Result<(LaunchConfig, usize)> {
        same_len(kernel, "a and b", a_len, b_len)?;
        let (grid, block) = self.vectorized_launch(kernel, a_len, size)?;
        self.bind()?;
        Ok((LaunchConfig::linear(grid, block), a_len))
    }
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
    fn vectorized_grids() {
        let v = |n, size, grid| vectorized_grid("k", n, size, 256, 132, grid).unwrap();
        // 2^26 f32: 2^24 vectors, 1024 per block.
        assert_eq!(v(1 << 26, 4, VectorizedGrid::Cover), 1 << 14);
        assert_eq!(v((1 << 26) + 3, 4, VectorizedGrid::Cover), (1 << 14) + 1);
        assert_eq!(v(1 << 26, 8, VectorizedGrid::Cover), 1 << 15);
        assert_eq!(v(1, 4, VectorizedGrid::Cover), 1);
        assert_eq!(v(1 << 26, 4, VectorizedGrid::PerSm(8)), 132 * 8);
        assert_eq!(v(100, 4, VectorizedGrid::PerSm(8)), 1);
        assert_eq!(
            v(usize::MAX, 4, VectorizedGrid::Cover),
            MAX_GRID_X,
            "capped: grid-stride covers the rest"
        );
        assert!(vectorized_grid("k", 0, 4, 256, 132, VectorizedGrid::Cover).is_err());
        assert!(vectorized_grid("k", 8, 4, 0, 132, VectorizedGrid::Cover).is_err());
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
