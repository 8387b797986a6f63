//! The vectorized bandwidth kernels' launch shapes (`multiply`,
//! `vector_sum_i32`, `doubles_matrix`, the `elementwise_*` kernels) and the
//! prelude of the 1-D launches over two inputs.
use std::sync::OnceLock;

use cuda_kernels_gpu::bandwidth::{UNROLL, VECTOR_BYTES};

use crate::Gpu;
use crate::error::{Error, Result};
use crate::launch::{
    LaunchConfig, MAX_BLOCK_THREADS, MAX_GRID_X, check_block, grid_1d_capped, same_len,
};

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

/// The prelude of the 1-D launches over two inputs, on a [`Gpu`].
pub(crate) trait PairLaunch {
    /// The prelude of every 1-D launch over two inputs of one length: the
    /// lengths agree and are not 0, the grid that covers them with blocks of
    /// `block`, the context current. Returns the launch configuration and
    /// the length.
    fn prepare_pair_1d(
        &self,
        kernel: &'static str,
        a_len: usize,
        b_len: usize,
        block: u32,
    ) -> Result<(LaunchConfig, usize)>;

    /// The `(grid, block)` of a vectorized bandwidth kernel over `n`
    /// elements of `size` bytes on this GPU ([`vectorized_grid`] with
    /// [`vectorized_shape`]).
    fn vectorized_launch(&self, kernel: &'static str, n: usize, size: usize) -> Result<(u32, u32)>;

    /// [`Gpu::prepare_pair_1d`] for a vectorized kernel over elements of
    /// `size` bytes: returns the launch configuration and the length.
    fn prepare_pair_vectorized(
        &self,
        kernel: &'static str,
        a_len: usize,
        b_len: usize,
        size: usize,
    ) -> Result<(LaunchConfig, usize)>;
}

impl PairLaunch for Gpu {
    fn prepare_pair_1d(
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

    fn vectorized_launch(&self, kernel: &'static str, n: usize, size: usize) -> Result<(u32, u32)> {
        let (grid, block) = vectorized_shape();
        let sms = match grid {
            VectorizedGrid::Cover => 1,
            VectorizedGrid::PerSm(_) => self.multiprocessors(kernel)?,
        };
        Ok((vectorized_grid(kernel, n, size, block, sms, grid)?, block))
    }

    fn prepare_pair_vectorized(
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
}
