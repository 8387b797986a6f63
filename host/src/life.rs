//! K15: Conway's Game of Life (`conway_ker`) on concurrent streams, as seed
//! 003 runs it: several independent simulations, each in its own stream; per
//! frame, the step is launched into the simulation's stream, the new lattice
//! is copied back to the host asynchronously for display, and the new lattice
//! is copied over the old one on the device (PyCUDA's `set_async`).
//!
//! Each simulation is a [`Lane`] with two device buffers (0 = the current
//! lattice, 1 = the next one) and a page-locked host buffer for the frame; the
//! lane owns all three, so nothing can be freed or read while its stream still
//! works on it (see [`crate::async_mem`]).
//!
//! Performance (H100, N = 4096, the seed's one thread per cell in 32×32
//! blocks): one step takes 0.10 ms, 164 Gcells/s, 1.31 TB/s counting 4 bytes
//! read and 4 written per cell: 0.51 of a device-to-device copy of the
//! lattice. Nsight Compute puts DRAM at 35 % and the SMs at 50 % of peak: the
//! kernel is latency-bound (each 1024-thread block lives a few microseconds and
//! each thread issues nine loads); more cells per thread would be the next
//! step, at the price of the seed's thread mapping.
use cust::launch;
use ndarray::{Array2, ArrayView2};

use cuda_kernels_gpu::life::{LIFE_BLOCK, life_cell};

use crate::Gpu;
use crate::async_mem::Lane;
use crate::error::{CudaResultExt, Error, Result};
use crate::launch::{checked_elements, grid_exact};
use crate::util::Rng;

/// The PTX entry points this module launches.
pub const ENTRY_POINTS: &[&str] = &["conway_ker"];

const K: &str = "conway_ker";

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

/// CPU reference: one Life step, with the kernel's own [`life_cell`].
pub fn life_step_cpu(lattice: ArrayView2<i32>) -> Result<Array2<i32>> {
    let n = check_lattice(lattice)?;
    let cells = lattice.as_standard_layout();
    let flat = cells.as_slice().unwrap_or(&[]);
    Ok(Array2::from_shape_fn((n, n), |(y, x)| {
        life_cell(n, x, y, |i| flat[i])
    }))
}

/// CPU reference: `steps` Life steps.
pub fn life_cpu(lattice: ArrayView2<i32>, steps: usize) -> Result<Array2<i32>> {
    check_lattice(lattice)?;
    let mut current = lattice.to_owned();
    for _ in 0..steps {
        current = life_step_cpu(current.view())?;
    }
    Ok(current)
}

/// An `n`×`n` lattice whose cells are alive with probability `p_alive` (the
/// seed's `np.random.choice([1, 0], N*N, p=[0.25, 0.75])` with 0.25).
pub fn random_lattice(n: usize, p_alive: f64, rng: &mut Rng) -> Array2<i32> {
    Array2::from_shape_fn((n, n), |_| (rng.uniform() < p_alive) as i32)
}

impl<const D: usize> Lane<'_, i32, D> {
    /// Queues one Life step `device[dst] = step(device[src])` on the lane's
    /// stream, for an `n`×`n` lattice (the lane must hold `n * n` cells), with
    /// the seed's 32×32 blocks.
    pub fn conway_step(&mut self, n: usize, src: usize, dst: usize) -> Result<()> {
        let (gx, gy) = life_grid(n)?;
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
        let f = gpu.function(K)?;
        let block = (LIFE_BLOCK, LIFE_BLOCK, 1);
        // SAFETY: both buffers hold n * n i32 (checked above), are distinct, and are
        // used only by the lane's stream, which is synchronized before they are freed
        // (async_mem, points 1-4).
        unsafe { launch!(f<<<(gx, gy, 1), block, 0, stream>>>(input, output, n)) }
            .during(K, "launch")
    }
}

/// Several Life simulations of one size, each in its own stream (a [`Lane`]
/// with the current lattice in device buffer 0 and the next in buffer 1).
pub struct LifeSims<'g> {
    n: usize,
    lanes: Vec<Lane<'g, i32, 2>>,
}

impl<'g> LifeSims<'g> {
    /// Starts one simulation per lattice (all square, of one size, 0/1
    /// cells): copies each into its lane's page-locked buffer and queues the
    /// upload.
    pub fn new(gpu: &'g Gpu, lattices: &[Array2<i32>]) -> Result<Self> {
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
        Ok(Self { n, lanes })
    }

    /// The lattice size N.
    pub fn n(&self) -> usize {
        self.n
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
            lane.conway_step(self.n, 0, 1)?;
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
