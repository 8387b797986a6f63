//! The kernel's order of operations on the CPU ([`reduce_in_gpu_order`])
//! and the error bound of a float sum in any tree order
//! ([`float_sum_tolerance`]).
use super::{Element, ReduceKernel, start_value};
use crate::error::{Error, Result};

/// The shape of one reduction launch, as far as its order of operations
/// depends on it: what [`reduce_in_gpu_order`] needs to reproduce the
/// kernel's result bit for bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReduceOrder {
    /// Blocks in the grid.
    pub grid: usize,
    /// Threads per block (a multiple of 32, at most 1024).
    pub block: usize,
    /// Elements before the input's first 16-byte boundary (0 for a buffer
    /// the driver allocated; `(PER_VEC − offset % PER_VEC) % PER_VEC` for a
    /// slice starting `offset` elements into one).
    pub head: usize,
}

impl ReduceOrder {
    /// The order of a launch with `(grid, block)` from
    /// [`Gpu::reduce_launch_shape`](crate::reduce::ReduceExt::reduce_launch_shape) over a driver-allocated buffer (which
    /// starts on a 256-byte boundary, so `head` is 0).
    pub fn aligned((grid, block): (u32, u32)) -> Self {
        Self {
            grid: grid as usize,
            block: block as usize,
            head: 0,
        }
    }
}

/// The kernel's result computed on the CPU in the kernel's own order of
/// operations (documented in [`cuda_kernels_gpu::reduce`], implemented in
/// its `body`): each of the `grid × block` threads' head/tail element,
/// vectors combined pairwise into [`UNROLL`](cuda_kernels_gpu::reduce::UNROLL)
/// interleaved accumulators, the warp shuffle trees, the per-warp slots,
/// the last block's strided pass over the block partials, then `init`.
/// With the same [`ReduceOrder`] as the launch, a correct GPU result is
/// *equal* to it, bits included, for every operation and type (float sums
/// too): so a float reduction can be checked exactly, and one dropped or
/// doubled element, or a lost partial, shows up in the result's bits
/// whenever it changes them.
///
/// Costs about as much as a sequential fold (every element is combined once).
///
/// ```
/// use cuda_kernels_host::reduce::{ReduceOrder, Sum, reduce_in_gpu_order};
/// let xs: Vec<f32> = (0..10_000).map(|i| (i as f32).sin()).collect();
/// let order = ReduceOrder { grid: 3, block: 64, head: 0 };
/// let gpu_like = reduce_in_gpu_order::<Sum, f32>(&xs, None, order).unwrap();
/// let dropped = reduce_in_gpu_order::<Sum, f32>(&xs[..9_999], None, order).unwrap();
/// assert_ne!(gpu_like, dropped);
/// ```
pub fn reduce_in_gpu_order<Op: ReduceKernel<T>, T: Element>(
    input: &[T],
    init: Option<T>,
    order: ReduceOrder,
) -> Result<T> {
    use cuda_kernels_gpu::reduce::UNROLL;
    let n = input.len();
    let init = start_value::<Op, T>(n, init)?;
    let ReduceOrder { grid, block, head } = order;
    if grid == 0 || block == 0 || block % 32 != 0 || block > 1024 || head >= T::PER_VEC {
        return Err(Error::invalid(
            Op::ENTRY,
            format!(
                "no launch has the order {order:?} (grid ≥ 1, block a multiple of 32 up to 1024, head < {})",
                T::PER_VEC
            ),
        ));
    }
    let c = Op::combine;
    let id = Op::identity();
    let threads = grid * block;
    let head = head.min(n);
    let vectors = (n - head) / T::PER_VEC;
    let tail_start = head + vectors * T::PER_VEC;
    // One 16-byte vector, its elements combined pairwise (as combine_vec).
    let vector = |i: usize| -> T {
        let v = &input[head + i * T::PER_VEC..head + (i + 1) * T::PER_VEC];
        match *v {
            [a, b] => c(a, b),
            [a, b, x, y] => c(c(a, b), c(x, y)),
            _ => unreachable!("16-byte vectors hold 2 or 4 elements"),
        }
    };
    let thread_value = |gtid: usize| -> T {
        let mut acc = id;
        if gtid < head {
            acc = c(acc, input[gtid]);
        }
        if gtid < n - tail_start {
            acc = c(acc, input[tail_start + gtid]);
        }
        let mut accs = [id; UNROLL];
        let mut i = gtid;
        while i + (UNROLL - 1) * threads < vectors {
            for (u, a) in accs.iter_mut().enumerate() {
                *a = c(*a, vector(i + u * threads));
            }
            i += UNROLL * threads;
        }
        while i < vectors {
            accs[0] = c(accs[0], vector(i));
            i += threads;
        }
        c(acc, c(c(accs[0], accs[1]), c(accs[2], accs[3])))
    };
    let block_reduce = |values: &[T]| -> T {
        let warp = |lanes: &mut [T; 32]| -> T {
            // shfl.sync.down: lane l reads lane l + offset, or keeps its own
            // value past the last lane; all lanes step together.
            let mut offset = 16;
            while offset > 0 {
                let old = *lanes;
                for (l, v) in lanes.iter_mut().enumerate() {
                    *v = c(
                        old[l],
                        if l + offset < 32 {
                            old[l + offset]
                        } else {
                            old[l]
                        },
                    );
                }
                offset /= 2;
            }
            lanes[0]
        };
        let mut slots = [id; 32];
        for (w, chunk) in values.chunks(32).enumerate() {
            let mut lanes = [id; 32];
            lanes.copy_from_slice(chunk);
            slots[w] = warp(&mut lanes);
        }
        // Warp 0: lanes past the number of warps start from the identity.
        warp(&mut slots)
    };
    let partials: Vec<T> = (0..grid)
        .map(|b| {
            let values: Vec<T> = (b * block..(b + 1) * block).map(thread_value).collect();
            block_reduce(&values)
        })
        .collect();
    let last: Vec<T> = (0..block)
        .map(|tid| {
            partials
                .iter()
                .skip(tid)
                .step_by(block)
                .fold(id, |a, &p| c(a, p))
        })
        .collect();
    Ok(c(init, block_reduce(&last)))
}

/// A bound on `|gpu − exact|` for a float sum of `n` elements whose
/// absolute values add up to `sum_abs`, reduced by `threads` GPU threads
/// (`grid × block` of [`Gpu::reduce_launch_shape`](crate::reduce::ReduceExt::reduce_launch_shape)), for a type of unit
/// roundoff `unit_roundoff` (`f32::EPSILON / 2`, `f64::EPSILON / 2`).
///
/// The GPU's summation tree (see [`cuda_kernels_gpu::reduce`]) has depth at
/// most `d = ceil(n / threads) + 32` (each thread's sequential share, then
/// the pairwise steps inside a vector, between accumulators, in the warp,
/// the block and across blocks), and a sum computed along a tree of depth
/// `d` errs by at most `γ_d · Σ|x|`, `γ_d = d·u / (1 − d·u)` (Higham,
/// *Accuracy and Stability of Numerical Algorithms*, §4.2).
///
/// This is a worst-case bound for a summation order known only by its
/// depth, and it is as tight as a bound from `Σ|x|` can be: its resolution
/// is `d·u·Σ|x|`, so for f32 it sees one dropped element of typical size only
/// while `n` is below about `1 / (d·u)` (2^18 or so), and at 2^24 elements
/// it allows a few dozen (f32 itself cannot resolve a sum of 2^24 values of
/// size 500 to better than its ulp, 1024, at 8·10^9). To check a GPU
/// result tightly, compare it with [`reduce_in_gpu_order`], which
/// reproduces the kernel's order exactly: a correct result is equal to it.
///
/// ```
/// let tol = cuda_kernels_host::reduce::float_sum_tolerance(1 << 20, 1 << 16, 1e6, f32::EPSILON as f64 / 2.0);
/// assert!(tol > 0.0 && tol < 10.0);
/// ```
pub fn float_sum_tolerance(n: usize, threads: usize, sum_abs: f64, unit_roundoff: f64) -> f64 {
    let depth = n.div_ceil(threads.max(1)) as f64 + 32.0;
    let du = depth * unit_roundoff;
    if du >= 1.0 {
        return f64::INFINITY;
    }
    du / (1.0 - du) * sum_abs
}
