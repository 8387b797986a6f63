//! K15 `conway_ker` (seed 003, the kernel from the book's previous chapter):
//! one step of Conway's Game of Life, rules B3/S23, on an N×N `i32` lattice
//! (1 alive, 0 dead) with wrap-around edges (a torus).
//!
//! The seed derives the lattice's width from the launch (`blockDim.x *
//! gridDim.x`), so it only works when N is a multiple of 32; here N is a
//! kernel parameter and the threads outside the lattice return at once, so
//! any N works with a grid of `ceil(N/32)²` blocks of 32×32.
//!
//! The cell rule and the wrap-around neighbour indexing are the plain
//! functions [`next_state`] and [`life_cell`], which the CPU reference calls
//! too.

/// B3/S23: the next state of a cell that is `cell` (1 alive, 0 dead) with
/// `neighbours` live neighbours. A live cell with 2 or 3 neighbours survives,
/// a dead cell with exactly 3 is born, every other cell is dead next.
#[inline(always)]
pub fn next_state(cell: i32, neighbours: i32) -> i32 {
    if cell == 1 {
        (neighbours == 2 || neighbours == 3) as i32
    } else {
        (neighbours == 3) as i32
    }
}

/// Index arithmetic for [`life_cell`]: `u32` (cheaper on the GPU, whose
/// 64-bit multiplies take several instructions; enough for lattices up to
/// 65535×65535) or `usize` (any lattice).
pub trait CellIndex:
    Copy
    + PartialEq
    + core::ops::Add<Output = Self>
    + core::ops::Sub<Output = Self>
    + core::ops::Mul<Output = Self>
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
}

impl CellIndex for u32 {
    const ZERO: Self = 0;
    const ONE: Self = 1;
}

impl CellIndex for usize {
    const ZERO: Self = 0;
    const ONE: Self = 1;
}

/// The largest N for which every index of an N×N lattice fits in `u32`
/// (`65535² < 2^32`).
pub const MAX_U32_LATTICE: usize = u16::MAX as usize;

/// The next state of cell `(x, y)` (column x, row y) of an `n`×`n` row-major
/// lattice with wrap-around edges, reading cells through `read(index)`.
///
/// The eight neighbours are `(x ± 1, y ± 1)` modulo `n`, computed with
/// compares instead of `%` (cheaper on the GPU). Requires `x < n`, `y < n`
/// and `n * n` representable in `I`; `read` is called only with indices
/// below `n * n`. The result does not depend on `I`.
#[inline(always)]
pub fn life_cell<I: CellIndex>(n: I, x: I, y: I, read: impl Fn(I) -> i32) -> i32 {
    let last = n - I::ONE;
    let left = if x == I::ZERO { last } else { x - I::ONE };
    let right = if x == last { I::ZERO } else { x + I::ONE };
    let up = if y == I::ZERO { last } else { y - I::ONE };
    let down = if y == last { I::ZERO } else { y + I::ONE };
    let (row_up, row, row_down) = (up * n, y * n, down * n);
    let neighbours = read(row_up + left)
        + read(row_up + x)
        + read(row_up + right)
        + read(row + left)
        + read(row + right)
        + read(row_down + left)
        + read(row_down + x)
        + read(row_down + right);
    next_state(read(row + x), neighbours)
}

/// Block edge of the seed's 32×32 blocks.
pub const LIFE_BLOCK: u32 = 32;

#[cfg(target_arch = "nvptx64")]
mod entry {
    use super::*;
    use crate::device::thread;

    /// One Life step: `lattice_out = step(lattice)` on an `n`×`n` torus.
    ///
    /// Thread mapping: 2-D blocks (the seed's 32×32) in a 2-D grid covering
    /// the lattice; thread `(x, y)` (x = column) computes cell `y * n + x`;
    /// threads with `x >= n` or `y >= n` do nothing. (The seed's parameter
    /// order is `(lattice_out, lattice)`; here inputs come first, as in every
    /// kernel of this crate.)
    ///
    /// # Safety
    /// `lattice` and `lattice_out` point to at least `n * n` i32 each on the
    /// device (`n * n` does not overflow), they do not overlap, and nothing
    /// writes `lattice` while the kernel runs.
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn conway_ker(
        lattice: *const i32,
        lattice_out: *mut i32,
        n: usize,
    ) {
        let (x, y) = thread::index_2d();
        if x >= n || y >= n {
            return;
        }
        let next = if n <= MAX_U32_LATTICE {
            // Every index fits in u32: cheaper index arithmetic, same result.
            let (n, x, y) = (n as u32, x as u32, y as u32);
            // SAFETY: life_cell reads only indices below n * n, the input's length.
            life_cell(n, x, y, |i| unsafe { *lattice.add(i as usize) })
        } else {
            // SAFETY: as above.
            life_cell(n, x, y, |i| unsafe { *lattice.add(i) })
        };
        // SAFETY: x, y < n, so y * n + x < n * n, the output's length; one thread
        // per cell, and the output overlaps no input.
        unsafe { *lattice_out.add(y * n + x) = next };
    }
}
