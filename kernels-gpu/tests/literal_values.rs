//! The per-element functions the kernels share with the CPU side by design
//! (each kernel family's `element`, `combine`, the Mandelbrot point, the
//! Life cell), pinned to values worked out by hand (issue 19): a change to
//! one of them cannot pass as "the GPU agrees with the CPU", since both
//! would change together.
use cuda_kernels_gpu::elementwise::{Elementwise, lerp, saxpy, sum, vector_sum_repeat_element};
use cuda_kernels_gpu::life::{life_cell, next_four, next_state};
use cuda_kernels_gpu::mandelbrot::{lattice_indices, mandelbrot_point};
use cuda_kernels_gpu::multiply::{multiply_element, vector_sum_element};
use cuda_kernels_gpu::reduce::{Max, Min, Product, ReduceOp, Sum, Xor};

/// Escape iterations, counted by hand (z₀ = 0, zₖ₊₁ = zₖ² + c, escape when
/// |z|² > the bound squared): `mandelbrot_point` is 1 with one iteration
/// fewer, 0 with exactly that many.
#[test]
fn mandelbrot_escape_counts() {
    // (Re c, Im c, bound², the iteration that escapes)
    let cases = [
        (1.0, 0.0, 4.0, 3),  // 1, 2, 5
        (0.5, 0.0, 4.0, 5),  // .5, .75, 1.0625, 1.6289, 3.1533
        (0.0, 2.0, 4.0, 2),  // 2i (|z|² = 4, not above), −4 + 2i
        (-2.1, 0.0, 4.0, 1), // |−2.1|² = 4.41
        (-2.1, 0.0, 9.0, 3), // 4.41, 2.31² = 5.34, 3.236² = 10.47
        (0.3, 0.0, 4.0, 12),
        (0.4, 0.4, 4.0, 9),
    ];
    for (re, im, bound, k) in cases {
        assert_eq!(
            mandelbrot_point(re, im, k - 1, bound),
            1.0,
            "c = {re}+{im}i"
        );
        assert_eq!(mandelbrot_point(re, im, k, bound), 0.0, "c = {re}+{im}i");
        assert_eq!(
            mandelbrot_point(re, im, k + 40, bound),
            0.0,
            "c = {re}+{im}i"
        );
    }
    // Inside: fixed points and cycles (0; −1 ↔ 0; −2 → 2 → 2; i ↔ −1 + i),
    // and 1/4, which creeps up to 1/2.
    for (re, im) in [
        (0.0, 0.0),
        (-1.0, 0.0),
        (-2.0, 0.0),
        (0.0, 1.0),
        (0.25, 0.0),
    ] {
        assert_eq!(mandelbrot_point(re, im, 1000, 4.0), 1.0, "c = {re}+{im}i");
    }
    // No iterations: every point is inside.
    assert_eq!(mandelbrot_point(100.0, 0.0, 0, 4.0), 1.0);
}

/// The seed's thread → point mapping: `i = tid % size`, `j = size − 1 −
/// tid / size`.
#[test]
fn mandelbrot_thread_mapping() {
    let four = std::num::NonZeroU32::new(4).unwrap();
    assert_eq!(lattice_indices(0, four), (0, 3));
    assert_eq!(lattice_indices(5, four), (1, 2));
    assert_eq!(lattice_indices(15, four), (3, 0));
}

/// One step of `life_cell` over a whole `n`×`n` torus.
fn step(cells: &[i32], n: usize) -> Vec<i32> {
    (0..n * n)
        .map(|i| life_cell(n, i % n, i / n, |j| cells[j]))
        .collect()
}

/// A lattice from rows of `.` (dead) and `#` (alive).
fn lattice(rows: &[&str]) -> Vec<i32> {
    rows.iter()
        .flat_map(|r| r.bytes().map(|b| (b == b'#') as i32))
        .collect()
}

#[test]
fn life_rules_table() {
    for neighbours in 0..=8 {
        let survives = (neighbours == 2 || neighbours == 3) as i32;
        let born = (neighbours == 3) as i32;
        assert_eq!(next_state(1, neighbours), survives, "alive, {neighbours}");
        assert_eq!(next_state(0, neighbours), born, "dead, {neighbours}");
    }
}

#[test]
fn life_still_lifes_oscillators_and_gliders() {
    // A block and a beehive do not change.
    let still = lattice(&[
        "........", ".##.....", ".##.....", "........", "....##..", "...#..#.", "....##..",
        "........",
    ]);
    assert_eq!(step(&still, 8), still);
    // A blinker across the wrap-around edge (rows 4, 0, 1 of column 2):
    // vertical, then horizontal on row 0, its middle.
    let vertical = lattice(&["..#..", "..#..", ".....", ".....", "..#.."]);
    let horizontal = lattice(&[".###.", ".....", ".....", ".....", "....."]);
    assert_eq!(step(&vertical, 5), horizontal);
    assert_eq!(step(&horizontal, 5), vertical);
    // A glider moves one cell down and right every four steps, and after 32
    // steps on an 8×8 torus is back where it started.
    let glider = lattice(&[
        ".#......", "..#.....", "###.....", "........", "........", "........", "........",
        "........",
    ]);
    let moved = lattice(&[
        "........", "..#.....", "...#....", ".###....", "........", "........", "........",
        "........",
    ]);
    let mut g = glider.clone();
    for _ in 0..4 {
        g = step(&g, 8);
    }
    assert_eq!(g, moved);
    for _ in 4..32 {
        g = step(&g, 8);
    }
    assert_eq!(g, glider);
}

/// `conway_fast`'s four-cell step agrees with the rules on a hand-made row.
#[test]
fn life_four_cells_at_once() {
    // Row segment [left, c0..c3, right] with the rows above and below given
    // as horizontal three-cell sums.
    let mid = [1, 1, 0, 1, 1, 0];
    let up = [3, 2, 0, 1];
    let down = [0, 1, 1, 0];
    // Neighbours: c0: 3 + 1 + 0 = 4 (dies); c1: 2 + 2 + 1 = 5 (stays dead);
    // c2: 0 + 2 + 1 = 3 (lives); c3: 1 + 1 + 0 = 2 (lives).
    assert_eq!(next_four(up, mid, down), [0, 0, 1, 1]);
}

#[test]
fn multiply_and_vector_sum_elements() {
    assert_eq!(multiply_element(3.0, 7.0), 21.0);
    assert_eq!(multiply_element(-0.5, 4.0), -2.0);
    assert_eq!(multiply_element(9.0, 0.0), 0.0);
    assert_eq!(vector_sum_element(40, 2), 42);
    assert_eq!(vector_sum_element(-7, 7), 0);
}

/// `K::element` on one element: the outputs for `ins` and `scalars`, the
/// outputs starting from `outs`.
fn element<K: Elementwise<T>, T: Copy>(ins: &[T], outs: &[T], scalars: &[T]) -> Vec<T> {
    let mut outs = outs.to_vec();
    K::element(ins, &mut outs, scalars);
    outs
}

#[test]
fn vector_sum_repeat_element_adds() {
    assert_eq!(vector_sum_repeat_element(2.5, 4.0), 6.5);
    assert_eq!(vector_sum_repeat_element(-3.0, 1.0), -2.0);
    assert_eq!(vector_sum_repeat_element(0.0, 0.0), 0.0);
}

#[test]
fn elementwise_op_tables() {
    assert_eq!(element::<sum, i32>(&[2, 3], &[0], &[]), [5]);
    assert_eq!(element::<sum, i64>(&[-7, 7], &[9], &[]), [0]);
    assert_eq!(element::<sum, f32>(&[0.5, 0.25], &[0.0], &[]), [0.75]);
    assert_eq!(element::<sum, f64>(&[1.5, -4.0], &[0.0], &[]), [-2.5]);
    // saxpy: y = a·x + y (in, inout, scalar).
    assert_eq!(element::<saxpy, f32>(&[3.0], &[1.0], &[2.0]), [7.0]);
    assert_eq!(element::<saxpy, f64>(&[4.0], &[10.0], &[-0.5]), [8.0]);
    // lerp: out = a + t·(b − a).
    assert_eq!(element::<lerp, f32>(&[1.0, 5.0, 0.25], &[0.0], &[]), [2.0]);
    assert_eq!(element::<lerp, f64>(&[-2.0, 2.0, 0.5], &[9.0], &[]), [0.0]);
    assert_eq!(element::<lerp, f64>(&[-2.0, 6.0, 1.0], &[9.0], &[]), [6.0]);
}

#[test]
fn reduce_op_tables() {
    assert_eq!(<Sum as ReduceOp<i32>>::combine(2, 3), 5);
    assert_eq!(<Sum as ReduceOp<f64>>::combine(0.5, -2.0), -1.5);
    assert_eq!(<Sum as ReduceOp<i32>>::combine(i32::MAX, 1), i32::MIN);
    assert_eq!(<Product as ReduceOp<i64>>::combine(4, -3), -12);
    assert_eq!(<Min as ReduceOp<f32>>::combine(2.0, -1.0), -1.0);
    assert_eq!(<Max as ReduceOp<i32>>::combine(2, -1), 2);
    assert_eq!(<Xor as ReduceOp<i32>>::combine(0b1100, 0b1010), 0b0110);
    assert_eq!(<Sum as ReduceOp<f32>>::identity(), 0.0);
    assert_eq!(<Product as ReduceOp<i32>>::identity(), 1);
    assert_eq!(<Min as ReduceOp<i32>>::identity(), i32::MAX);
    assert_eq!(<Max as ReduceOp<f64>>::identity(), f64::NEG_INFINITY);
    assert_eq!(<Xor as ReduceOp<i64>>::identity(), 0);
}
