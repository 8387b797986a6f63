//! `conway_ker` (the seed's kernel, from the book's previous chapter):
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
use crate::device::thread;

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

/// Cells of one row that one thread of `conway_fast` computes: four
/// consecutive `i32`, one 16-byte load and store per row.
pub const FAST_CELLS_X: usize = 4;

/// The horizontal three-cell sums of one row segment `[left, c0, c1, c2,
/// c3, right]`: entry `j` is the sum of `c_j` and its two horizontal
/// neighbours.
#[inline(always)]
pub fn row_sums(r: [i32; 6]) -> [i32; FAST_CELLS_X] {
    [
        r[0] + r[1] + r[2],
        r[1] + r[2] + r[3],
        r[2] + r[3] + r[4],
        r[3] + r[4] + r[5],
    ]
}

/// The next states of the four middle cells of row segment `mid` (see
/// [`row_sums`]), from the horizontal sums of the rows above and below:
/// the neighbour count of cell `j` is the 3×3 sum less the cell itself.
/// For 0/1 cells this is [`life_cell`]'s result, bit for bit.
#[inline(always)]
pub fn next_four(up: [i32; FAST_CELLS_X], mid: [i32; 6], down: [i32; FAST_CELLS_X]) -> [i32; 4] {
    let h = row_sums(mid);
    core::array::from_fn(|j| next_state(mid[j + 1], up[j] + h[j] + down[j] - mid[j + 1]))
}

/// A 16-byte aligned row segment of four cells.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Four([i32; 4]);

/// Rows `y0..y_end` of the four columns from `x0` (see [`conway_fast`]).
///
/// # Safety
/// As [`conway_fast`]; `x0 < n`, `y0 < y_end <= n`; when `VECTOR`, `n`
/// is a multiple of 4 and both lattices are 16-byte aligned.
#[inline(always)]
unsafe fn strip<const VECTOR: bool>(
    lattice: *const i32,
    lattice_out: *mut i32,
    n: usize,
    x0: usize,
    y0: usize,
    y_end: usize,
) {
    // Columns x0 - 1 ..= x0 + 4, wrapped. The element path computes them
    // with `%` once per thread (lattices may be narrower than six
    // columns); the vector path needs only the two outer ones.
    let cols: [usize; 6] = if VECTOR {
        let left = if x0 == 0 { n - 1 } else { x0 - 1 };
        let right = if x0 + FAST_CELLS_X == n {
            0
        } else {
            x0 + FAST_CELLS_X
        };
        [left, x0, x0 + 1, x0 + 2, x0 + 3, right]
    } else {
        core::array::from_fn(|k| (x0 + k + n - 1) % n)
    };
    // SAFETY (read): every row index is < n and every column < n, so the
    // index is < n * n, the input's length; nothing writes the input;
    // VECTOR: row * n + x0 is a multiple of 4 from an aligned base.
    let read = |row: usize| -> [i32; 6] {
        let base = row * n;
        unsafe {
            if VECTOR {
                let Four(c) = *(lattice.add(base + x0) as *const Four);
                [
                    *lattice.add(base + cols[0]),
                    c[0],
                    c[1],
                    c[2],
                    c[3],
                    *lattice.add(base + cols[5]),
                ]
            } else {
                core::array::from_fn(|k| *lattice.add(base + cols[k]))
            }
        }
    };
    let below = |y: usize| if y + 1 == n { 0 } else { y + 1 };
    let mut up = row_sums(read(if y0 == 0 { n - 1 } else { y0 - 1 }));
    let mut mid = read(y0);
    let mut down = read(below(y0));
    let mut y = y0;
    while y < y_end {
        // The row after `down`, loaded one iteration ahead so that two
        // rows of loads are in flight while this row is computed.
        let ahead = if y + 1 < y_end {
            read(below(y + 1))
        } else {
            down
        };
        let down_sums = row_sums(down);
        let next = next_four(up, mid, down_sums);
        let base = y * n + x0;
        // SAFETY: y < n and x0 + j < n for every cell written, so the
        // index is < n * n, the output's length; each cell has one thread;
        // the output overlaps no input; VECTOR: aligned as the input.
        unsafe {
            if VECTOR {
                *(lattice_out.add(base) as *mut Four) = Four(next);
            } else {
                for (j, &v) in next.iter().enumerate() {
                    if x0 + j < n {
                        *lattice_out.add(base + j) = v;
                    }
                }
            }
        }
        up = row_sums(mid);
        mid = down;
        down = ahead;
        y += 1;
    }
}

/// The body of [`conway_fast`] and [`conway_fast_rows`]: this thread's
/// strip of rows `row0 + rows gy ..+ rows` (clipped to `row_end`) and four
/// columns from `4 gx`.
///
/// # Safety
/// As [`conway_fast`]; `rows >= 1` and `row0 <= row_end <= n`.
#[inline(always)]
unsafe fn fast_rows(
    lattice: *const i32,
    lattice_out: *mut i32,
    n: usize,
    rows: usize,
    row0: usize,
    row_end: usize,
) {
    let (gx, gy) = thread::index_2d();
    let x0 = gx * FAST_CELLS_X;
    let y0 = row0 + gy * rows;
    if x0 >= n || y0 >= row_end {
        return;
    }
    let y_end = if row_end - y0 < rows {
        row_end
    } else {
        y0 + rows
    };
    // Two separate loops, so that the vector path keeps its 16-byte
    // accesses (one loop with a per-row choice gets merged into scalar
    // loads by the optimizer).
    let vector = n.is_multiple_of(FAST_CELLS_X)
        && (lattice as usize | lattice_out as usize).is_multiple_of(16);
    // SAFETY: the caller's contract; x0 < n, y0 < y_end <= row_end <= n;
    // vector only when n is a multiple of 4 and both lattices are 16-byte
    // aligned.
    unsafe {
        if vector {
            strip::<true>(lattice, lattice_out, n, x0, y0, y_end);
        } else {
            strip::<false>(lattice, lattice_out, n, x0, y0, y_end);
        }
    }
}

crate::device::kernels! {
    /// One Life step on an `n`×`n` torus, [`FAST_CELLS_X`] cells of a row
    /// by `rows` rows per thread: for each row it reads the four cells (one
    /// 16-byte load when `n` is a multiple of 4 and both lattices are
    /// 16-byte aligned, else four loads) and the two horizontal neighbours,
    /// keeps the horizontal sums of the rows above and below in registers
    /// (a sliding window down the column strip, with the next row's loads
    /// issued one row ahead) and writes the four next states. Cells are read about `(rows + 2) / rows` times (the strip's
    /// top and bottom halo rows come from L2), written once.
    ///
    /// Thread mapping: 2-D blocks of 32 × `blockDim.y`; thread `(tx, ty)` of
    /// block `(bx, by)` computes columns `4 (32 bx + tx) ..+ 4` of rows
    /// `rows (blockDim.y by + ty) ..+ rows`, clipped to the lattice.
    ///
    /// # Safety
    /// As [`conway_ker`]; also `rows >= 1`.
    pub fn conway_fast(
        lattice: *const i32,
        lattice_out: *mut i32,
        n: usize,
        rows: usize,
    ) as CONWAY_FAST {
        // SAFETY: the caller's contract; rows 0..n are the whole lattice.
        unsafe { fast_rows(lattice, lattice_out, n, rows, 0, n) }
    }

    /// [`conway_fast`] on rows `row0..row_end` of the `n`×`n` torus only
    /// (the multi-GPU Life's edge and interior strips of a band): thread row
    /// `gy` computes rows `row0 + rows gy ..+ rows`, clipped to `row_end`;
    /// the neighbours still wrap around the whole torus. Nothing outside
    /// those rows is written.
    ///
    /// # Safety
    /// As [`conway_fast`]; also `row0 <= row_end <= n`.
    pub fn conway_fast_rows(
        lattice: *const i32,
        lattice_out: *mut i32,
        n: usize,
        rows: usize,
        row0: usize,
        row_end: usize,
    ) as CONWAY_FAST_ROWS {
        // SAFETY: the caller's contract.
        unsafe { fast_rows(lattice, lattice_out, n, rows, row0, row_end) }
    }

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
    pub fn conway_ker(
        lattice: *const i32,
        lattice_out: *mut i32,
        n: usize,
    ) as CONWAY_KER {
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
