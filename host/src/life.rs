//! Conway's Game of Life (`conway_ker`) on concurrent streams, as the
//! seed runs it: several independent simulations, each in its own stream; per
//! frame, the step is launched into the simulation's stream, the new lattice
//! is copied back to the host asynchronously for display, and the new lattice
//! is copied over the old one on the device (PyCUDA's `set_async`).
//!
//! Each simulation is a [`Lane`] with two device buffers (0 = the current
//! lattice, 1 = the next one) and a page-locked host buffer for the frame; the
//! lane owns all three, so nothing can be freed or read while its stream still
//! works on it (see [`crate::async_mem`]).
//!
//! Two kernels compute the same step, bit for bit ([`LifeKernel`]):
//! - `conway_ker`, the seed's one thread per cell in 32×32 blocks (the
//!   seed's own entry), latency-bound;
//! - `conway_fast`, the default of [`LifeSims`]: four cells of a row per
//!   thread (one 16-byte load and store), down a strip of four rows with the
//!   horizontal sums of the rows above and below kept in registers: under one
//!   load instruction per cell instead of nine.
//!
//! Their measurements: `docs/tuning.md`.
use std::sync::OnceLock;

use ndarray::{Array2, ArrayView2};

use cuda_kernels_gpu::life::{CONWAY_FAST, CONWAY_KER, FAST_CELLS_X, LIFE_BLOCK};

use crate::Gpu;
use crate::async_mem::Lane;
use crate::error::{Error, Result};
use crate::launch::LaunchConfig;
use crate::launch::{checked_elements, grid_exact};
use crate::util::Rng;

const K: &str = CONWAY_KER.name();

/// Which kernel computes a Life step (both give the same lattices).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LifeKernel {
    /// `conway_ker`: the seed's one thread per cell, 32×32 blocks.
    Seed,
    /// `conway_fast`: four cells of a row by a strip of rows per thread.
    #[default]
    Fast,
}

impl LifeKernel {
    /// The PTX entry point.
    pub fn entry(self) -> &'static str {
        match self {
            LifeKernel::Seed => CONWAY_KER.name(),
            LifeKernel::Fast => CONWAY_FAST.name(),
        }
    }
}

/// Rows per thread and threads per block along y of `conway_fast`: 32 × 8
/// threads, each computing 4 × 4 cells: the fastest shape measured
/// (`docs/tuning.md`).
pub const FAST_SHAPE: (usize, u32) = (4, 8);

/// The environment variable that overrides [`FAST_SHAPE`] as `rows,by`
/// (for tuning runs; read once).
pub const FAST_SHAPE_ENV: &str = "CUDA_KERNELS_LIFE_SHAPE";

/// [`FAST_SHAPE`], or the override in [`FAST_SHAPE_ENV`] when it parses to
/// a valid shape.
pub fn fast_shape() -> (usize, u32) {
    static SHAPE: OnceLock<(usize, u32)> = OnceLock::new();
    *SHAPE.get_or_init(|| {
        std::env::var(FAST_SHAPE_ENV)
            .ok()
            .and_then(|v| {
                let (r, b) = v.split_once(',')?;
                let (r, b) = (r.trim().parse().ok()?, b.trim().parse().ok()?);
                (r >= 1 && (1..=32).contains(&b)).then_some((r, b))
            })
            .unwrap_or(FAST_SHAPE)
    })
}

/// The launch of one Life step (see [`life_launch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifeLaunch {
    /// Blocks along x and y.
    pub grid: (u32, u32),
    /// Threads per block along x and y.
    pub block: (u32, u32),
    /// Rows per thread (`conway_fast`; 1 for the seed's kernel).
    pub rows: usize,
}

impl LifeLaunch {
    /// The launch configuration: this grid of these blocks, no dynamic
    /// shared memory.
    pub fn config(&self) -> LaunchConfig {
        LaunchConfig {
            grid: (self.grid.0, self.grid.1, 1),
            block: (self.block.0, self.block.1, 1),
            shared_mem_bytes: 0,
        }
    }
}

/// The launch of one Life step on an `n`×`n` lattice. The seed's kernel takes 32×32 blocks
/// covering the lattice (`rows` is unused: 1); `conway_fast` with `(rows,
/// by)` takes blocks of 32 × `by` threads, each thread 4 columns × `rows`
/// rows. Errors past the grid limits (the seed's limits for both kernels, so
/// that both refuse the same lattices).
pub fn life_launch(kernel: LifeKernel, n: usize, (rows, by): (usize, u32)) -> Result<LifeLaunch> {
    let seed = life_grid(n)?;
    match kernel {
        LifeKernel::Seed => Ok(LifeLaunch {
            grid: seed,
            block: (LIFE_BLOCK, LIFE_BLOCK),
            rows: 1,
        }),
        LifeKernel::Fast => {
            if rows == 0 || by == 0 || by > LIFE_BLOCK {
                return Err(Error::invalid(
                    "conway_fast",
                    format!("shape: {rows} rows per thread, {by} threads along y"),
                ));
            }
            let x = grid_exact("conway_fast", n.div_ceil(FAST_CELLS_X), LIFE_BLOCK, "x")?;
            let y = grid_exact("conway_fast", n.div_ceil(rows), by, "y")?;
            Ok(LifeLaunch {
                grid: (x, y),
                block: (LIFE_BLOCK, by),
                rows,
            })
        }
    }
}

/// The `conway_fast` shape for an `n`×`n` lattice on `sms` multiprocessors:
/// [`fast_shape`], with fewer rows per thread (then fewer threads along y)
/// while its grid has fewer blocks than `sms`. A small lattice is
/// latency-bound: 256² in the 4 × 8 shape is 16 blocks whose threads each
/// step 16 cells one after another, where 4 cells a thread over 128 blocks
/// keep every multiprocessor busy for a quarter of the time.
pub fn fast_shape_for(n: usize, sms: u32) -> (usize, u32) {
    let (mut rows, mut by) = fast_shape();
    let blocks = |rows: usize, by: u32| {
        life_launch(LifeKernel::Fast, n, (rows, by))
            .map_or(u64::MAX, |l| u64::from(l.grid.0) * u64::from(l.grid.1))
    };
    while blocks(rows, by) < u64::from(sms) && rows > 1 {
        rows /= 2;
    }
    while blocks(rows, by) < u64::from(sms) && by > 1 {
        by /= 2;
    }
    (rows, by)
}

/// The grid of 32×32 blocks that covers an `n`×`n` lattice:
/// `(ceil(n/32), ceil(n/32))`, or an error past the hardware's limits.
pub fn life_grid(n: usize) -> Result<(u32, u32)> {
    if n == 0 {
        return Err(Error::invalid(K, "lattice size 0: nothing to simulate"));
    }
    checked_elements(K, &[n, n, std::mem::size_of::<i32>()])?;
    let x = grid_exact(K, n, LIFE_BLOCK, "x")?;
    let y = grid_exact(K, n, LIFE_BLOCK, "y")?;
    Ok((x, y))
}

/// Checks a lattice: square, non-empty, within the grid limits, every cell 0
/// or 1. Returns its size `n`.
pub fn check_lattice(lattice: ArrayView2<i32>) -> Result<usize> {
    let (rows, cols) = lattice.dim();
    if rows != cols {
        return Err(Error::invalid(
            K,
            format!("the lattice must be square; got {rows}×{cols}"),
        ));
    }
    life_grid(rows)?;
    if let Some(((r, c), v)) = lattice.indexed_iter().find(|&(_, &v)| v != 0 && v != 1) {
        return Err(Error::invalid(
            K,
            format!("cell ({r}, {c}) is {v}; cells must be 1 (alive) or 0 (dead)"),
        ));
    }
    Ok(rows)
}

/// CPU reference: one Life step, written from the rules (SPEC.md), not
/// with the kernel's functions: on the `n`×`n` torus, a cell's neighbours
/// are the eight cells around it, indices modulo `n`; a live cell with 2 or
/// 3 live neighbours lives, a dead one with exactly 3 is born (B3/S23),
/// every other cell is dead.
pub fn life_step_cpu(lattice: ArrayView2<i32>) -> Result<Array2<i32>> {
    life_cpu(lattice, 1)
}

/// CPU reference: `steps` Life steps.
pub fn life_cpu(lattice: ArrayView2<i32>, steps: usize) -> Result<Array2<i32>> {
    let n = check_lattice(lattice)?;
    let mut cells = lattice
        .as_standard_layout()
        .into_owned()
        .into_raw_vec_and_offset()
        .0;
    for _ in 0..steps {
        cells = step_cells(&cells, n);
    }
    Array2::from_shape_vec((n, n), cells).map_err(|e| Error::invalid(K, e.to_string()))
}

/// One Life step of the `n`×`n` torus `cells` (row-major, each 0 or 1):
/// a cell is alive next when it has 3 live neighbours of 8, or 2 and is
/// alive. Rows are split in bands over the machine's cores (an 8192²
/// lattice took about 0.7 s a step on one core with ndarray indexing, so
/// `bench --multi`'s 401 steps took minutes).
fn step_cells(cells: &[i32], n: usize) -> Vec<i32> {
    let mut next = vec![0; n * n];
    let threads = std::thread::available_parallelism().map_or(1, |p| p.get());
    let rows_per_band = n.div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        for (band, out) in next.chunks_mut(rows_per_band * n).enumerate() {
            scope.spawn(move || {
                for (i, out_row) in out.chunks_mut(n).enumerate() {
                    let y = band * rows_per_band + i;
                    let row = |r: usize| &cells[r * n..(r + 1) * n];
                    let (up, here, down) = (row((y + n - 1) % n), row(y), row((y + 1) % n));
                    for (x, cell) in out_row.iter_mut().enumerate() {
                        let (l, r) = ((x + n - 1) % n, (x + 1) % n);
                        let alive =
                            up[l] + up[x] + up[r] + here[l] + here[r] + down[l] + down[x] + down[r];
                        *cell = i32::from(alive == 3 || (alive == 2 && here[x] == 1));
                    }
                }
            });
        }
    });
    next
}

/// An `n`×`n` lattice whose cells are alive with probability `p_alive` (the
/// seed's `np.random.choice([1, 0], N*N, p=[0.25, 0.75])` with 0.25).
pub fn random_lattice(n: usize, p_alive: f64, rng: &mut Rng) -> Array2<i32> {
    Array2::from_shape_fn((n, n), |_| (rng.uniform() < p_alive) as i32)
}

/// The Game of Life steps on a lane of `i32` grids.
pub trait LaneLifeExt {
    /// Queues one Life step `device[dst] = step(device[src])` on the lane's
    /// stream, for an `n`×`n` lattice (the lane must hold `n * n` cells), with
    /// the seed's kernel `conway_ker` and its 32×32 blocks.
    fn conway_step(&mut self, n: usize, src: usize, dst: usize) -> Result<()>;

    /// [`Lane::conway_step`] with the chosen kernel (same result, bit for
    /// bit).
    fn life_step(&mut self, kernel: LifeKernel, n: usize, src: usize, dst: usize) -> Result<()>;
}

impl<const D: usize> LaneLifeExt for Lane<'_, i32, D> {
    fn conway_step(&mut self, n: usize, src: usize, dst: usize) -> Result<()> {
        self.life_step(LifeKernel::Seed, n, src, dst)
    }

    fn life_step(&mut self, kernel: LifeKernel, n: usize, src: usize, dst: usize) -> Result<()> {
        let launch = life_launch(kernel, n, fast_shape())?;
        if n.checked_mul(n) != Some(self.len()) {
            return Err(Error::invalid(
                K,
                format!(
                    "an {n}×{n} lattice does not fit a lane of {} cells",
                    self.len()
                ),
            ));
        }
        if src == dst {
            return Err(Error::invalid(
                K,
                format!("input and output are both device buffer {src}"),
            ));
        }
        let (gpu, stream, ptrs) = self.launch_target()?;
        let missing = |i: usize| Error::invalid(K, format!("device buffer {i} does not exist"));
        let input = *ptrs.get(src).ok_or_else(|| missing(src))?;
        let output = *ptrs.get(dst).ok_or_else(|| missing(dst))?;
        let cfg = launch.config();
        // SAFETY: both buffers hold n * n i32 (checked above), are distinct, and are
        // used only by the lane's stream, which is synchronized before they are freed
        // (async_mem, points 1-4); the grid covers the lattice (life_launch) and the
        // kernels skip threads outside it; rows >= 1.
        match kernel {
            LifeKernel::Seed => unsafe { gpu.launch(CONWAY_KER, cfg, stream, (input, output, n)) },
            LifeKernel::Fast => unsafe {
                gpu.launch(CONWAY_FAST, cfg, stream, (input, output, n, launch.rows))
            },
        }
    }
}

/// Several Life simulations of one size, each in its own stream (a [`Lane`]
/// with the current lattice in device buffer 0 and the next in buffer 1).
pub struct LifeSims<'g> {
    n: usize,
    kernel: LifeKernel,
    lanes: Vec<Lane<'g, i32, 2>>,
}

impl<'g> LifeSims<'g> {
    /// Starts one simulation per lattice (all square, of one size, 0/1
    /// cells): copies each into its lane's page-locked buffer and queues the
    /// upload. Steps run on the default kernel, [`LifeKernel::Fast`].
    pub fn new(gpu: &'g Gpu, lattices: &[Array2<i32>]) -> Result<Self> {
        Self::with_kernel(gpu, lattices, LifeKernel::default())
    }

    /// [`LifeSims::new`] with the chosen kernel.
    pub fn with_kernel(gpu: &'g Gpu, lattices: &[Array2<i32>], kernel: LifeKernel) -> Result<Self> {
        let Some(first) = lattices.first() else {
            return Err(Error::invalid(K, "0 simulations: nothing to run"));
        };
        let n = check_lattice(first.view())?;
        for (k, l) in lattices.iter().enumerate() {
            if check_lattice(l.view())? != n {
                return Err(Error::invalid(
                    K,
                    format!(
                        "lattice {k} is {}×{}, lattice 0 is {n}×{n}",
                        l.nrows(),
                        l.ncols()
                    ),
                ));
            }
        }
        let mut lanes = Vec::with_capacity(lattices.len());
        for l in lattices {
            let cells = l.as_standard_layout();
            let mut lane = Lane::from_host(gpu, cells.as_slice().unwrap_or(&[]))?;
            lane.upload(0)?;
            lanes.push(lane);
        }
        Ok(Self { n, kernel, lanes })
    }

    /// The lattice size N.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The kernel that computes the steps.
    pub fn kernel(&self) -> LifeKernel {
        self.kernel
    }

    /// The number of simulations.
    pub fn count(&self) -> usize {
        self.lanes.len()
    }

    /// Queues one frame on every simulation, each in its own stream: the step
    /// (0 → 1), the asynchronous copy of the new lattice to the host, and the
    /// device-side copy new → old (1 → 0). Returns without waiting.
    pub fn frame(&mut self) -> Result<()> {
        for lane in &mut self.lanes {
            lane.life_step(self.kernel, self.n, 0, 1)?;
            lane.download(1)?;
            lane.copy_on_device(1, 0)?;
        }
        Ok(())
    }

    /// Simulation `k`'s latest frame (waits for its stream).
    pub fn lattice(&self, k: usize) -> Result<ArrayView2<'_, i32>> {
        let lane = self.lanes.get(k).ok_or_else(|| {
            Error::invalid(
                K,
                format!("simulation {k} does not exist ({} run)", self.count()),
            )
        })?;
        ArrayView2::from_shape((self.n, self.n), lane.host()?)
            .map_err(|e| Error::invalid(K, format!("frame shape: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn blinker_oscillates_and_wraps() {
        // A vertical blinker across the top/bottom edge of a 5×5 torus.
        let mut l = Array2::<i32>::zeros((5, 5));
        l[[4, 2]] = 1;
        l[[0, 2]] = 1;
        l[[1, 2]] = 1;
        let once = life_step_cpu(l.view()).unwrap();
        let mut expected = Array2::<i32>::zeros((5, 5));
        expected[[0, 1]] = 1;
        expected[[0, 2]] = 1;
        expected[[0, 3]] = 1;
        assert_eq!(once, expected);
        assert_eq!(life_cpu(l.view(), 2).unwrap(), l);
    }

    #[test]
    fn glider_returns_after_4n_steps_on_a_torus() {
        let n = 8;
        let mut l = Array2::<i32>::zeros((n, n));
        for (r, c) in [(0, 1), (1, 2), (2, 0), (2, 1), (2, 2)] {
            l[[r, c]] = 1;
        }
        // A glider moves one cell diagonally every 4 steps: back home after 4n.
        assert_eq!(life_cpu(l.view(), 4 * n).unwrap(), l);
        assert_ne!(life_cpu(l.view(), 4).unwrap(), l);
    }

    #[test]
    fn bad_lattices_are_typed_errors() {
        let bad =
            |l: Array2<i32>| matches!(check_lattice(l.view()), Err(Error::InvalidInput { .. }));
        assert!(bad(Array2::zeros((0, 0))));
        assert!(bad(Array2::zeros((3, 4))));
        assert!(bad(array![[0, 2], [1, 0]]));
        assert_eq!(check_lattice(Array2::zeros((1, 1)).view()).unwrap(), 1);
        assert_eq!(life_grid(33).unwrap(), (2, 2));
        assert_eq!(life_grid(32).unwrap(), (1, 1));
        assert!(life_grid(usize::MAX).is_err());
    }

    /// A small lattice gets fewer rows per thread, then fewer threads along
    /// y, until its grid fills the multiprocessors; a large one keeps the
    /// tuned shape.
    #[test]
    fn a_small_lattice_fills_the_multiprocessors() {
        assert_eq!(fast_shape_for(256, 132), (1, 2));
        assert_eq!(fast_shape_for(4096, 132), fast_shape());
        let (rows, by) = fast_shape_for(8, 132);
        assert_eq!((rows, by), (1, 1), "as small as the shape goes");
        let l = life_launch(LifeKernel::Fast, 256, fast_shape_for(256, 132)).unwrap();
        assert!(l.grid.0 * l.grid.1 >= 132, "{l:?}");
    }

    #[test]
    fn fast_launch_covers_the_lattice() {
        let shape = (8, 8);
        // 4096: 1024 column groups of 4 in blocks of 32; 512 strips of 8 rows in blocks of 8.
        assert_eq!(
            life_launch(LifeKernel::Fast, 4096, shape).unwrap(),
            LifeLaunch {
                grid: (32, 64),
                block: (32, 8),
                rows: 8
            }
        );
        for n in [1usize, 2, 31, 32, 33, 4097] {
            let l = life_launch(LifeKernel::Fast, n, FAST_SHAPE).unwrap();
            assert!(
                l.grid.0 as usize * l.block.0 as usize * FAST_CELLS_X >= n,
                "{n}"
            );
            assert!(l.grid.1 as usize * l.block.1 as usize * l.rows >= n, "{n}");
            assert_eq!(
                life_launch(LifeKernel::Seed, n, shape).unwrap().grid,
                life_grid(n).unwrap()
            );
        }
        assert!(life_launch(LifeKernel::Fast, 0, shape).is_err());
        assert!(life_launch(LifeKernel::Fast, 8, (0, 8)).is_err());
        assert!(life_launch(LifeKernel::Fast, 8, (8, 33)).is_err());
        assert!(life_launch(LifeKernel::Fast, usize::MAX, shape).is_err());
    }

    #[test]
    fn four_cell_rule_matches_life_cell() {
        // Every 3 × 6 neighbourhood of 0/1 cells: the four middle cells of
        // the middle row, by next_four and by life_cell on a 3-row window.
        for bits in 0u32..(1 << 18) {
            let cell = |r: usize, c: usize| ((bits >> (r * 6 + c)) & 1) as i32;
            let row = |r: usize| -> [i32; 6] { std::array::from_fn(|c| cell(r, c)) };
            let sums = |r: usize| cuda_kernels_gpu::life::row_sums(row(r));
            let fast = cuda_kernels_gpu::life::next_four(sums(0), row(1), sums(2));
            for (j, &v) in fast.iter().enumerate() {
                let x = j + 1;
                let neighbours = (0..3)
                    .flat_map(|r| (x - 1..=x + 1).map(move |c| (r, c)))
                    .filter(|&(r, c)| (r, c) != (1, x))
                    .map(|(r, c)| cell(r, c))
                    .sum();
                assert_eq!(
                    v,
                    cuda_kernels_gpu::life::next_state(cell(1, x), neighbours)
                );
            }
        }
    }

    #[test]
    fn single_cell_torus_counts_itself_eight_times() {
        // n = 1: every neighbour is the cell itself, so a live cell has 8 and dies.
        assert_eq!(life_step_cpu(array![[1]].view()).unwrap(), array![[0]]);
    }

    #[test]
    fn random_lattice_density() {
        let l = random_lattice(128, 0.25, &mut Rng::new(1));
        let alive = l.iter().filter(|&&v| v == 1).count() as f64 / (128.0 * 128.0);
        assert!((alive - 0.25).abs() < 0.02, "{alive}");
    }
}
