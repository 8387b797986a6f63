//! K11 `mandelbrot_ker` (seed 002) and its launch paths, K16a (explicit
//! context synchronization, seed 003) and the client side of K18 (the C ABI
//! library, seeds 002 and 004).
//!
//! The four launch paths of seed 002, which all give the same graph:
//! 1. the high-level path, [`Gpu::mandelbrot`](crate::mandelbrot::MandelbrotExt::mandelbrot) (a `Gpu` built from the
//!    embedded PTX);
//! 2. PTX loaded from a file at run time: [`Gpu::from_ptx_file`] then
//!    [`Gpu::mandelbrot`](crate::mandelbrot::MandelbrotExt::mandelbrot) (PyCUDA's `module_from_file`);
//! 3. the raw CUDA driver API, call by call: [`driver_api`];
//! 4. the C ABI shared library `libcuda_kernels_capi.so` (crate `capi/`),
//!    called from Python ctypes, from C, and from Rust through [`c_abi`].
//!
//! [`Gpu::mandelbrot_explicit_sync`](crate::mandelbrot::MandelbrotExt::mandelbrot_explicit_sync) is K16a. [`mandelbrot_cpu`] is the CPU
//! reference: it calls the very same per-point function as the kernel
//! ([`cuda_kernels_gpu::mandelbrot::mandelbrot_point`]), so the GPU and CPU
//! graphs are identical, not merely close.

use ndarray::{Array1, Array2, ArrayView1, ArrayView2};

use cuda_kernels_gpu::mandelbrot::MANDELBROT_KER;

use crate::Gpu;
use crate::error::{Error, Result};
use crate::launch::LaunchConfig;
use crate::launch::{MAX_GRID_X, check_block};
use crate::memory::DeviceSlice;
use crate::timing::{PhaseTimers, Times, timed_result};
use crate::util::contiguous;

pub mod c_abi;
pub mod driver_api;

/// The kernel's PTX entry point (its handle's name).
pub const KERNEL: &str = MANDELBROT_KER.name();

/// Threads per block (seed 002 launches blocks of 32).
pub const BLOCK: u32 = 32;

/// The largest lattice size whose square (the number of points, an `int`
/// in the kernel's signature) fits in i32: 46 340² = 2 147 395 600.
pub const MAX_LATTICE_SIZE: usize = 46_340;

/// Seed 002's parameters: `mandelbrot(breadth, low, high, max_iters,
/// upper_bound)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MandelbrotParams {
    /// Points along each axis (the graph is `breadth × breadth`).
    pub breadth: usize,
    /// Smallest real and imaginary part.
    pub low: f32,
    /// Largest real and imaginary part.
    pub high: f32,
    /// Iterations before a point counts as inside the set.
    pub max_iters: i32,
    /// Escape radius (not squared; the launchers square it, as the seed's
    /// host wrapper does).
    pub upper_bound: f32,
}

impl Default for MandelbrotParams {
    /// The seed's `mandelbrot(512, -2, 2, 256, 2)`.
    fn default() -> Self {
        Self {
            breadth: 512,
            low: -2.0,
            high: 2.0,
            max_iters: 256,
            upper_bound: 2.0,
        }
    }
}

impl MandelbrotParams {
    /// The lattice, `linspace(low, high, breadth)` as f32.
    pub fn lattice(&self) -> Array1<f32> {
        linspace_f32(self.low, self.high, self.breadth)
    }
}

/// NumPy's `np.linspace(low, high, n, dtype=np.float32)`, bit for bit:
/// `k · step + low` computed in f64 with `step = (high − low) / (n − 1)`,
/// the last point set to `high`, then rounded to f32. `n = 1` gives `[low]`.
pub fn linspace_f32(low: f32, high: f32, n: usize) -> Array1<f32> {
    let (lo, hi) = (low as f64, high as f64);
    let step = if n > 1 {
        (hi - lo) / (n - 1) as f64
    } else {
        0.0
    };
    Array1::from_shape_fn(n, |k| {
        if n > 1 && k == n - 1 {
            high
        } else {
            (k as f64 * step + lo) as f32
        }
    })
}

/// A validated launch: the kernel's scalar arguments and the 1-D launch
/// shape. Built by [`check_launch`], the one place every path checks its
/// input before anything is allocated or launched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MandelbrotLaunch {
    /// Points along each axis, as the kernel's `int lattice_size`.
    pub lattice_size: i32,
    /// `lattice_size²`: the graph's length.
    pub points: usize,
    /// `max_iters`, checked non-negative.
    pub max_iters: i32,
    /// `upper_bound * upper_bound` in f32, as the seed's wrapper computes it.
    pub upper_bound_squared: f32,
    /// Blocks: `ceil(points / block)`.
    pub grid: u32,
    /// Threads per block.
    pub block: u32,
}

impl MandelbrotLaunch {
    /// The launch configuration: [`Self::grid`] blocks of [`Self::block`]
    /// threads.
    pub fn config(&self) -> LaunchConfig {
        LaunchConfig::linear(self.grid, self.block)
    }
}

/// Checks a lattice size, an iteration count and a block size, and returns
/// the launch. Errors ([`Error::InvalidInput`] for `kernel`): an empty
/// lattice, a lattice whose square overflows i32 (more than
/// [`MAX_LATTICE_SIZE`] points per axis), a negative `max_iters`, a block
/// outside 1..=1024 threads.
pub fn check_launch(
    kernel: &'static str,
    lattice_size: usize,
    max_iters: i32,
    upper_bound: f32,
    block: u32,
) -> Result<MandelbrotLaunch> {
    check_block(kernel, (block, 1, 1))?;
    if lattice_size == 0 {
        return Err(Error::invalid(kernel, "empty lattice: nothing to launch"));
    }
    if lattice_size > MAX_LATTICE_SIZE {
        return Err(Error::invalid(
            kernel,
            format!(
                "lattice size {lattice_size}: its square (the number of points) overflows i32; \
                 at most {MAX_LATTICE_SIZE}"
            ),
        ));
    }
    if max_iters < 0 {
        return Err(Error::invalid(
            kernel,
            format!("max_iters = {max_iters} is negative"),
        ));
    }
    let points = lattice_size * lattice_size;
    // points ≤ i32::MAX, so the grid fits easily and grid × block < 2^32.
    let grid = points.div_ceil(block as usize);
    debug_assert!(grid <= MAX_GRID_X as usize);
    Ok(MandelbrotLaunch {
        lattice_size: lattice_size as i32,
        points,
        max_iters,
        upper_bound_squared: upper_bound * upper_bound,
        grid: grid as u32,
        block,
    })
}

/// Times of one [`Gpu::mandelbrot_timed`](crate::mandelbrot::MandelbrotExt::mandelbrot_timed) run, from CUDA events.
#[derive(Debug, Clone, Copy)]
pub struct MandelbrotTiming {
    /// The kernel alone.
    pub kernel_ms: f32,
    /// Copy in, kernel, copy out.
    pub with_transfers_ms: f32,
}

/// The Mandelbrot launchers on a [`Gpu`].
pub trait MandelbrotExt {
    /// Seed 002's Mandelbrot graph on the GPU: `lattice` is the real and
    /// imaginary axis (`linspace(low, high, breadth)`, see
    /// [`MandelbrotParams::lattice`]), `upper_bound` the escape radius (not
    /// squared). Returns the `breadth × breadth` graph, 1.0 inside the set,
    /// 0.0 outside, row 0 at the top (largest imaginary part).
    ///
    /// Errors (no launch) as [`check_launch`] says.
    fn mandelbrot(
        &self,
        lattice: ArrayView1<f32>,
        max_iters: i32,
        upper_bound: f32,
    ) -> Result<Array2<f32>>;

    /// The seed's host wrapper `launch_mandelbrot` on slices: allocate on the
    /// device, copy `lattice` in, launch (blocks of [`BLOCK`]), copy the graph
    /// out into `graph` (row-major, `lattice.len()²` values), free. The C ABI
    /// library calls this.
    fn mandelbrot_into(
        &self,
        lattice: &[f32],
        graph: &mut [f32],
        max_iters: i32,
        upper_bound: f32,
    ) -> Result<()>;

    /// [`Gpu::mandelbrot`](crate::mandelbrot::MandelbrotExt::mandelbrot) with CUDA-event times and a chosen block size
    /// (the seed's is [`BLOCK`]).
    fn mandelbrot_timed(
        &self,
        lattice: ArrayView1<f32>,
        max_iters: i32,
        upper_bound: f32,
        block: u32,
    ) -> Result<(Array2<f32>, MandelbrotTiming)>;

    /// Queues `mandelbrot_ker` on [`Gpu::stream`] over data already on the
    /// device (for benchmarks): `graph` must hold `lattice.len()²` values.
    /// No copies, no synchronization. Safe under the
    /// [`_on_device` rule](Gpu#launchers-that-leave-work-in-flight-the-_on_device-rule).
    fn mandelbrot_on_device(
        &self,
        lattice: &DeviceSlice<f32>,
        graph: &mut DeviceSlice<f32>,
        max_iters: i32,
        upper_bound: f32,
        block: u32,
    ) -> Result<()>;

    /// K16a (seed 003's `gpu_mandelbrot_context_sync.py`): the same graph
    /// with explicit context synchronization: asynchronous copy in,
    /// `cuCtxSynchronize`, launch, `cuCtxSynchronize`, asynchronous copy out,
    /// `cuCtxSynchronize`.
    ///
    /// The host buffers are ordinary (pageable) memory, as the seed's NumPy
    /// arrays behind PyCUDA's `to_gpu_async`/`get_async`: the driver stages
    /// them, so the copies are only partly asynchronous, but no page-locked
    /// allocation is paid on every call (which was slower: `docs/tuning.md`).
    fn mandelbrot_explicit_sync(
        &self,
        lattice: ArrayView1<f32>,
        max_iters: i32,
        upper_bound: f32,
    ) -> Result<Array2<f32>>;
}

impl MandelbrotExt for Gpu {
    fn mandelbrot(
        &self,
        lattice: ArrayView1<f32>,
        max_iters: i32,
        upper_bound: f32,
    ) -> Result<Array2<f32>> {
        // Check before allocating the n × n graph or copying the lattice: an
        // oversized lattice (a broadcast view, say) must be refused, not
        // allocated (n² may not even fit in memory, or overflow `usize`).
        check_launch(KERNEL, lattice.len(), max_iters, upper_bound, BLOCK)?;
        let n = lattice.len();
        let mut graph = Array2::zeros((n, n));
        let out = graph
            .as_slice_mut()
            .ok_or_else(|| Error::invalid(KERNEL, "graph not contiguous"))?;
        self.mandelbrot_into(&contiguous(&lattice), out, max_iters, upper_bound)?;
        Ok(graph)
    }

    fn mandelbrot_into(
        &self,
        lattice: &[f32],
        graph: &mut [f32],
        max_iters: i32,
        upper_bound: f32,
    ) -> Result<()> {
        let shape = check_launch(KERNEL, lattice.len(), max_iters, upper_bound, BLOCK)?;
        check_graph_len(graph.len(), shape.points)?;
        self.mandelbrot_with(&shape, lattice, graph, false)
            .map(drop)
    }

    fn mandelbrot_timed(
        &self,
        lattice: ArrayView1<f32>,
        max_iters: i32,
        upper_bound: f32,
        block: u32,
    ) -> Result<(Array2<f32>, MandelbrotTiming)> {
        let shape = check_launch(KERNEL, lattice.len(), max_iters, upper_bound, block)?;
        let n = lattice.len();
        let mut graph = Array2::zeros((n, n));
        let out = graph
            .as_slice_mut()
            .ok_or_else(|| Error::invalid(KERNEL, "graph not contiguous"))?;
        let times = self.mandelbrot_with(&shape, &contiguous(&lattice), out, true)?;
        let (kernel_ms, with_transfers_ms) = timed_result(times, KERNEL)?;
        let timing = MandelbrotTiming {
            kernel_ms,
            with_transfers_ms,
        };
        Ok((graph, timing))
    }

    fn mandelbrot_on_device(
        &self,
        lattice: &DeviceSlice<f32>,
        graph: &mut DeviceSlice<f32>,
        max_iters: i32,
        upper_bound: f32,
        block: u32,
    ) -> Result<()> {
        let shape = check_launch(KERNEL, lattice.len(), max_iters, upper_bound, block)?;
        check_graph_len(graph.len(), shape.points)?;
        self.bind()?;
        self.launch_mandelbrot(&shape, lattice, graph)
    }

    fn mandelbrot_explicit_sync(
        &self,
        lattice: ArrayView1<f32>,
        max_iters: i32,
        upper_bound: f32,
    ) -> Result<Array2<f32>> {
        const K: &str = "mandelbrot_ker (explicit sync)";
        let shape = check_launch(K, lattice.len(), max_iters, upper_bound, BLOCK)?;
        self.bind()?;
        let stream = self.stream();
        let h_lattice = contiguous(&lattice);
        let mut h_graph = vec![0.0f32; shape.points];
        // SAFETY: written in full by the copy in / the kernel before being read.
        let mut d_lattice = unsafe { self.uninitialized::<f32>(lattice.len()) }?;
        // SAFETY: as above.
        let mut d_graph = unsafe { self.uninitialized::<f32>(shape.points) }?;
        // SAFETY: h_lattice and d_lattice have the same length and live until the
        // context synchronization below.
        unsafe { d_lattice.async_copy_from(&h_lattice[..], stream) }?;
        self.synchronize_context(K)?;
        self.launch_mandelbrot(&shape, &d_lattice, &mut d_graph)?;
        self.synchronize_context(K)?;
        // SAFETY: same lengths; both live until the synchronization below.
        unsafe { d_graph.async_copy_to(&mut h_graph[..], stream) }?;
        self.synchronize_context(K)?;
        let n = lattice.len();
        Array2::from_shape_vec((n, n), h_graph)
            .map_err(|e| Error::invalid(K, format!("graph shape: {e}")))
    }
}

/// The steps the launchers above share.
trait MandelbrotExtSteps {
    /// Copy `lattice` in, launch, copy the graph out into `graph` (checked
    /// lengths), timed (`(kernel_ms, total_ms)`) or not.
    fn mandelbrot_with(
        &self,
        shape: &MandelbrotLaunch,
        lattice: &[f32],
        graph: &mut [f32],
        timed: bool,
    ) -> Result<Times>;

    /// Launches `mandelbrot_ker` on [`Gpu::stream`] for a checked `shape`.
    fn launch_mandelbrot(
        &self,
        shape: &MandelbrotLaunch,
        lattice: &DeviceSlice<f32>,
        graph: &mut DeviceSlice<f32>,
    ) -> Result<()>;
}

impl MandelbrotExtSteps for Gpu {
    fn mandelbrot_with(
        &self,
        shape: &MandelbrotLaunch,
        lattice: &[f32],
        graph: &mut [f32],
        timed: bool,
    ) -> Result<Times> {
        self.bind()?;
        let timers = PhaseTimers::start(self, timed)?;
        let d_lattice = self.to_device(lattice)?;
        // SAFETY: the kernel writes every one of the `points` values before the copy out.
        let mut d_graph = unsafe { self.uninitialized::<f32>(shape.points) }?;
        timers.kernel_start()?;
        self.launch_mandelbrot(shape, &d_lattice, &mut d_graph)?;
        timers.kernel_stop()?;
        self.synchronize(KERNEL)?;
        d_graph.copy_to(graph)?;
        timers.finish()
    }

    fn launch_mandelbrot(
        &self,
        shape: &MandelbrotLaunch,
        lattice: &DeviceSlice<f32>,
        graph: &mut DeviceSlice<f32>,
    ) -> Result<()> {
        debug_assert_eq!(lattice.len(), shape.lattice_size as usize);
        debug_assert_eq!(graph.len(), shape.points);
        let cfg = shape.config();
        // SAFETY: `shape` comes from check_launch: 0 < lattice_size, lattice_size² ≤ i32::MAX,
        // grid × block < 2^32; `lattice` holds lattice_size f32 and `graph` lattice_size² f32
        // (checked by every caller); `graph` is borrowed mutably, so it overlaps nothing.
        unsafe {
            let args = (
                lattice,
                graph,
                shape.max_iters,
                shape.upper_bound_squared,
                shape.lattice_size,
            );
            self.launch(MANDELBROT_KER, cfg, self.stream(), args)
        }
    }
}

/// The CPU reference, written from the seed's formula (SPEC K11), not with
/// the kernel's functions: graph row `r`, column `c` is the point
/// `c = lattice[c] + i·lattice[n − 1 − r]`; from z = 0, `max_iters` times
/// z = z² + c, and 0 as soon as |z|² exceeds the bound squared, else 1.
/// The arithmetic is rounded as the kernel documents it: `Re z² + Re c`
/// as `fma(x, x, −y²) + Re c`, `Im` as `fma(2x, y, Im c)`, |z|² as
/// `fma(x, x, y²)`. Same checks as the GPU.
pub fn mandelbrot_cpu(
    lattice: ArrayView1<f32>,
    max_iters: i32,
    upper_bound: f32,
) -> Result<Array2<f32>> {
    let shape = check_launch(
        "mandelbrot (CPU)",
        lattice.len(),
        max_iters,
        upper_bound,
        BLOCK,
    )?;
    let n = lattice.len();
    let lattice = contiguous(&lattice);
    let (iters, bound) = (shape.max_iters, shape.upper_bound_squared);
    Ok(Array2::from_shape_fn((n, n), |(r, c)| {
        point_cpu(lattice[c], lattice[n - 1 - r], iters, bound)
    }))
}

/// One point of [`mandelbrot_cpu`], from the formula: 1.0 when z stays
/// within the bound for `max_iters` iterations of z = z² + (re + i·im)
/// from 0, else 0.0 (rounded as the kernel documents; see
/// [`mandelbrot_cpu`]).
pub fn point_cpu(re: f32, im: f32, max_iters: i32, upper_bound_squared: f32) -> f32 {
    let (mut x, mut y) = (0.0f32, 0.0f32);
    for _ in 0..max_iters {
        let next_x = x.mul_add(x, -(y * y)) + re;
        y = (2.0 * x).mul_add(y, im);
        x = next_x;
        if x.mul_add(x, y * y) > upper_bound_squared {
            return 0.0;
        }
    }
    1.0
}

/// The number of points inside the set (value 1.0) in a graph.
pub fn count_inside(graph: ArrayView2<f32>) -> usize {
    graph.iter().filter(|&&v| v == 1.0).count()
}

/// CRC-32 (IEEE, as zlib's `crc32`) of the graph's row-major little-endian
/// f32 bytes: a fingerprint that the Python caller prints too
/// (`zlib.crc32(graph.tobytes())`), so graphs from different processes can
/// be compared by eye.
pub fn graph_crc32(graph: ArrayView2<f32>) -> u32 {
    crc32(graph.iter().flat_map(|v| v.to_le_bytes()))
}

/// CRC-32 (IEEE 802.3, zlib's `crc32`) of a byte sequence, bit by bit.
pub fn crc32(bytes: impl IntoIterator<Item = u8>) -> u32 {
    let mut crc = !0u32;
    for byte in bytes {
        crc ^= byte as u32;
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// The first point where two graphs differ, or `None` when they are equal.
pub fn first_difference(a: ArrayView2<f32>, b: ArrayView2<f32>) -> Option<String> {
    if a.dim() != b.dim() {
        return Some(format!("shapes {:?} vs {:?}", a.dim(), b.dim()));
    }
    a.indexed_iter()
        .zip(b.iter())
        .find(|((_, x), y)| x.to_bits() != y.to_bits())
        .map(|(((r, c), x), y)| format!("point ({r}, {c}): {x} vs {y}"))
}

/// Refuses an output graph that does not hold exactly the lattice's
/// `points` values.
fn check_graph_len(graph_len: usize, points: usize) -> Result<()> {
    if graph_len == points {
        Ok(())
    } else {
        Err(Error::invalid(
            KERNEL,
            format!("graph holds {graph_len} values, the lattice needs {points}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linspace_matches_numpy() {
        // np.linspace(-2, 2, 512, dtype=np.float32)[[0, 1, 255, 256, 510, 511]]
        let l = linspace_f32(-2.0, 2.0, 512);
        assert_eq!(l[0], -2.0);
        assert_eq!(l[1], -1.992_172_2_f32);
        assert_eq!(l[255], -0.003_913_894_3);
        assert_eq!(l[256], 0.003_913_894_3);
        assert_eq!(l[510], 1.992_172_2);
        assert_eq!(l[511], 2.0);
        assert_eq!(linspace_f32(-2.0, 2.0, 1).to_vec(), vec![-2.0]);
        assert!(linspace_f32(-2.0, 2.0, 0).is_empty());
    }

    #[test]
    fn launch_checks() {
        let ok = check_launch(KERNEL, 512, 256, 2.0, BLOCK).unwrap();
        assert_eq!(ok.points, 512 * 512);
        assert_eq!(ok.grid, 512 * 512 / 32);
        assert_eq!(ok.upper_bound_squared, 4.0);
        assert_eq!(check_launch(KERNEL, 3, 1, 2.0, 32).unwrap().grid, 1);
        let big = check_launch(KERNEL, MAX_LATTICE_SIZE, 1, 2.0, 32).unwrap();
        assert!(big.points <= i32::MAX as usize);
        for (size, iters, block) in [
            (0, 256, 32),
            (MAX_LATTICE_SIZE + 1, 256, 32),
            (512, -1, 32),
            (512, 256, 0),
            (512, 256, 2048),
        ] {
            assert!(
                matches!(
                    check_launch(KERNEL, size, iters, 2.0, block),
                    Err(Error::InvalidInput { .. })
                ),
                "size {size}, iters {iters}, block {block}"
            );
        }
    }

    #[test]
    fn cpu_reference_known_points() {
        // lattice [-2, -1, 0, 1]: row 0 is imaginary part 1 (j = 3), row 3 is -2.
        let lattice = Array1::from(vec![-2.0f32, -1.0, 0.0, 1.0]);
        let g = mandelbrot_cpu(lattice.view(), 256, 2.0).unwrap();
        // c = 0 (row 1: j = 2 → 0; column 2): inside. c = -1: inside (period 2).
        assert_eq!(g[[1, 2]], 1.0);
        assert_eq!(g[[1, 1]], 1.0);
        // c = -2 is on the boundary: z stays at 2, |z|² = 4 is not > 4: inside.
        assert_eq!(g[[1, 0]], 1.0);
        // c = 1 escapes: 0, 1, 2, 5.
        assert_eq!(g[[1, 3]], 0.0);
        // c = i (row 0, column 2): periodic, inside. c = 1 + i escapes.
        assert_eq!(g[[0, 2]], 1.0);
        assert_eq!(g[[0, 3]], 0.0);
        // Zero iterations: everything is inside.
        let g0 = mandelbrot_cpu(lattice.view(), 0, 2.0).unwrap();
        assert_eq!(count_inside(g0.view()), 16);
    }

    #[test]
    fn cpu_reference_default_picture() {
        let p = MandelbrotParams::default();
        let g = mandelbrot_cpu(p.lattice().view(), p.max_iters, p.upper_bound).unwrap();
        assert_eq!(g.dim(), (512, 512));
        let inside = count_inside(g.view());
        // The set's area is about 1.506; each point covers (4/511)².
        let area = inside as f64 * (4.0f64 / 511.0).powi(2);
        assert!((1.45..1.60).contains(&area), "area {area}");
        // Symmetric about the real axis up to the lattice's rounding.
        let mirrored = g.slice(ndarray::s![..;-1, ..]).to_owned();
        let differ = g
            .iter()
            .zip(mirrored.iter())
            .filter(|(a, b)| a != b)
            .count();
        assert!(differ < 200, "{differ} points break the symmetry");
        assert!(g.iter().all(|&v| v == 0.0 || v == 1.0));
    }

    #[test]
    fn crc_matches_zlib() {
        // zlib.crc32(b"123456789") == 0xCBF43926
        assert_eq!(crc32(*b"123456789"), 0xCBF4_3926);
        // zlib.crc32(np.array([[1, 0], [0, 1]], dtype=np.float32).tobytes())
        let g = ndarray::array![[1.0f32, 0.0], [0.0, 1.0]];
        assert_eq!(graph_crc32(g.view()), 0xC224_29DB);
    }
}
