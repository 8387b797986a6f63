//! The reductions on the simulator, their sample inputs, and their checks
//! against the CPU.
use super::*;

/// Reduces `input` with `Op` on a grid of `grid` blocks of `block` threads,
/// twice (the kernel leaves its counter at 0 for the next launch).
pub(super) fn reduce_sim<Op: ReduceKernel<T>, T: Copy + Default + PartialEq + std::fmt::Debug>(
    input: &[T],
    init: T,
    grid: u32,
    block: u32,
) -> T {
    let din = Buf::from(input);
    let (partials, counter, out) = (
        Buf::<T>::zeroed(grid as usize),
        Buf::<u32>::zeroed(1),
        Buf::<T>::zeroed(1),
    );
    let mut results = Vec::new();
    for _ in 0..2 {
        // SAFETY: the reduce_kernels! contract: n inputs, grid partials, a
        // zero counter, one output, block a multiple of 32, SHARED_BYTES.
        unsafe {
            launch(
                Op::KERNEL,
                shape([grid, 1, 1], [block, 1, 1], reduce::SHARED_BYTES),
                (
                    din.ptr().cast_const(),
                    partials.ptr(),
                    counter.ptr(),
                    out.ptr(),
                    input.len(),
                    init,
                ),
            )
        }
        .unwrap();
        assert_eq!(counter.to_vec(), [0], "{}: the counter is reset", Op::ENTRY);
        results.push(out.to_vec()[0]);
    }
    assert_eq!(
        results[0],
        results[1],
        "{}: the same result twice",
        Op::ENTRY
    );
    results[0]
}

/// Element types of the kernel families, with sample values for which
/// every built-in operation is exact whatever the order of combination
/// (wrapping integers; floats of ±2^k with bounded exponents, whose sums
/// are small multiples of 1/2).
pub(super) trait Sample: Copy + Default + PartialEq + std::fmt::Debug {
    fn sample(i: usize) -> Self;
    /// A small value (an integer in −50..=50, a float a quarter of one),
    /// which no elementwise expression of the crate overflows with.
    fn small(i: usize) -> Self;
}

macro_rules! sample_ints {
    ($($t:ty),*) => {$(
        impl Sample for $t {
            fn sample(i: usize) -> Self {
                (i as $t).wrapping_mul(0x9E37_79B9_u32 as $t).wrapping_add(i as $t >> 3)
            }
            fn small(i: usize) -> Self {
                (i * 37 % 101) as $t - 50
            }
        }
    )*};
}
sample_ints!(i32, i64);

macro_rules! sample_floats {
    ($($t:ty),*) => {$(
        impl Sample for $t {
            fn sample(i: usize) -> Self {
                [1.0, -1.0, 2.0, 0.5, -1.0, 1.0, -2.0, -0.5, 4.0][i % 9] * if i % 7 == 3 { 0.25 } else { 1.0 }
            }
            fn small(i: usize) -> Self {
                ((i * 37 % 101) as $t - 50.0) * 0.25
            }
        }
    )*};
}
sample_floats!(f32, f64);

/// `Op` on `T` at several shapes (one block, several blocks: the
/// last-block-done path), against the CPU fold with the same operation.
pub(super) fn check_reduce<Op: ReduceKernel<T>, T: Sample>() {
    for n in [1usize, 37, 4099] {
        let xs: Vec<T> = (0..n).map(T::sample).collect();
        let init = T::sample(n + 5);
        for (grid, block) in [(1, 32), (5, 64), (3, 256)] {
            let got = reduce_sim::<Op, T>(&xs, init, grid, block);
            let want = reduce::fold::<T, Op>(xs.iter().copied(), Some(init));
            assert_eq!(Some(got), want, "{} n = {n}, {grid}×{block}", Op::ENTRY);
        }
    }
}

pub(super) fn check_int<Op: ReduceKernel<i32>>(input: &[i32]) {
    for (grid, block) in [(1, 32), (5, 64), (7, 256)] {
        let got = reduce_sim::<Op, i32>(input, 3, grid, block);
        assert_eq!(
            Some(got),
            reduce::fold::<i32, Op>(input.iter().copied(), Some(3)),
            "{} {grid}×{block}",
            Op::ENTRY
        );
    }
}
