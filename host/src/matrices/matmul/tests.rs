//! Unit tests: the launch plans check shapes, the product check passes correct
//! summation orders and catches a dropped slab, the SGEMM tile choice, the CPU
//! references.
use super::*;
use ndarray::array;

#[test]
fn shapes_are_checked_before_launch() {
    for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
        assert!(matmul_launch(kernel, (2, 3), (4, 5)).is_err());
        assert!(matmul_launch(kernel, (0, 3), (3, 5)).is_err());
        assert!(matmul_launch(kernel, (2, 0), (0, 5)).is_err());
        assert!(matmul_launch(kernel, (usize::MAX / 2, 3), (3, 5)).is_err());
    }
    // 6 tiles of 128² for 132 SMs: 64² tiles, k too short to split; 7 % 4 != 0:
    // 4-byte loads.
    let l = matmul_launch(MatmulKernel::Tiled, (129, 7), (7, 300)).unwrap();
    assert_eq!(
        (l.entry.name(), l.grid, l.splits, l.block, l.smem),
        (
            "matrix_mul_tiled_64",
            (5, 3),
            1,
            (64, 1),
            SGEMM_64.smem_bytes()
        )
    );
    // 256 tiles of 128², aligned and k, n multiples of 4.
    let l = matmul_launch(MatmulKernel::Tiled, (2048, 64), (64, 2048)).unwrap();
    assert_eq!(
        (l.entry.name(), l.grid, l.splits, l.block, l.smem),
        (
            "matrix_mul_tiled_v4",
            (16, 16),
            1,
            (256, 1),
            SGEMM_128_V4.smem_bytes()
        )
    );
    // The same, misaligned: 4-byte loads.
    let l = matmul_launch_for(MatmulKernel::Tiled, (2048, 64), (64, 2048), 132, false);
    assert_eq!(l.unwrap().entry.name(), "matrix_mul_tiled");
    // Split-k.
    let l = matmul_launch(MatmulKernel::Tiled, (65, 4097), (4097, 3)).unwrap();
    assert_eq!(
        (l.entry.name(), l.grid, l.splits),
        ("matrix_mul_tiled_64", (1, 2), 2)
    );
    let l = matmul_launch(MatmulKernel::Naive, (17, 7), (7, 16)).unwrap();
    assert_eq!((l.grid, l.block), ((1, 2), (16, 16)));
    // 65,536 blocks along y is one too many.
    assert!(matmul_launch(MatmulKernel::Naive, (65_536 * 16, 1), (1, 1)).is_err());
    assert!(matmul_launch(MatmulKernel::Naive, (65_535 * 16, 1), (1, 1)).is_ok());
    assert!(matmul_launch(MatmulKernel::Tiled, (65_536 * 128, 1), (1, 1)).is_err());
    // 2^32 elements in A: beyond the tiled kernel's 32-bit offsets only.
    assert!(matmul_launch(MatmulKernel::Tiled, (1 << 16, 1 << 16), (1 << 16, 1)).is_err());
    assert!(matmul_launch(MatmulKernel::Naive, (1 << 16, 1 << 16), (1 << 16, 1)).is_ok());
}

/// An m×k and a k×n matrix: standard normal, or uniform in [0, 1)
/// (all terms positive: partial sums grow like k, the hard case).
fn operands(m: usize, k: usize, n: usize, positive: bool, seed: u64) -> (Array2<f32>, Array2<f32>) {
    let mut rng = crate::util::Rng::new(seed);
    let mut draw = |_| {
        if positive {
            rng.uniform() as f32
        } else {
            rng.normal() as f32
        }
    };
    (
        Array2::from_shape_fn((m, k), &mut draw),
        Array2::from_shape_fn((k, n), &mut draw),
    )
}

/// `A·B` in f32 with each dot product's terms `a[i, l]·b[l, j]` (l in
/// `keep`) summed by `sum`.
fn product_with(
    a: &Array2<f32>,
    b: &Array2<f32>,
    keep: impl Fn(usize) -> bool,
    sum: impl Fn(&[f32], &[f32]) -> f32,
) -> Array2<f32> {
    Array2::from_shape_fn((a.nrows(), b.ncols()), |(i, j)| {
        let (x, y): (Vec<f32>, Vec<f32>) = (0..a.ncols())
            .filter(|&l| keep(l))
            .map(|l| (a[[i, l]], b[[l, j]]))
            .unzip();
        sum(&x, &y)
    })
}

fn sequential(x: &[f32], y: &[f32]) -> f32 {
    x.iter().zip(y).fold(0.0f32, |s, (a, b)| s + a * b)
}
fn sequential_fma(x: &[f32], y: &[f32]) -> f32 {
    x.iter().zip(y).fold(0.0f32, |s, (a, b)| a.mul_add(*b, s))
}
fn pairwise(x: &[f32], y: &[f32]) -> f32 {
    match x.len() {
        0 => 0.0,
        1 => x[0] * y[0],
        n => pairwise(&x[..n / 2], &y[..n / 2]) + pairwise(&x[n / 2..], &y[n / 2..]),
    }
}
/// k-slabs of 8 summed with FMAs, then the slabs' sums in sequence (a
/// tiled kernel's order).
fn blocked(x: &[f32], y: &[f32]) -> f32 {
    x.chunks(8)
        .zip(y.chunks(8))
        .map(|(x, y)| sequential_fma(x, y))
        .fold(0.0f32, |s, t| s + t)
}

#[test]
fn matmul_check_passes_correct_orders_with_room_to_spare() {
    for positive in [false, true] {
        let (a, b) = operands(16, 4096, 16, positive, 41);
        let reference = MatmulReference::new(a.view(), b.view()).unwrap();
        type Dot = fn(&[f32], &[f32]) -> f32;
        let orders: [(&str, Dot); 4] = [
            ("sequential", sequential),
            ("sequential FMA", sequential_fma),
            ("pairwise", pairwise),
            ("blocked", blocked),
        ];
        for (name, dot) in orders {
            let c = product_with(&a, &b, |_| true, dot);
            let chk = reference.check(c.view()).unwrap();
            println!(
                "{name} (positive: {positive}): worst ratio {:.4}",
                chk.worst_ratio
            );
            assert!(
                chk.worst_ratio < 0.25,
                "{name} (positive: {positive}): {chk:?}"
            );
        }
        let chk = reference.check(a.dot(&b).view()).unwrap();
        assert!(chk.worst_ratio < 0.25, "ndarray's dot: {chk:?}");
    }
}

#[test]
fn matmul_check_catches_a_dropped_slab_or_term_at_k_4096() {
    let (m, k, n) = (24, 4096, 24);
    let (a, b) = operands(m, k, n, false, 7);
    let reference = MatmulReference::new(a.view(), b.view()).unwrap();
    // The old elementwise bound k·u·(|A||B|)ᵢⱼ, for the relation.
    let old = a
        .mapv(|x| f64::from(x).abs())
        .dot(&b.mapv(|x| f64::from(x).abs()))
        * (k as f64 * 2f64.powi(-24));
    let caught = |c: &Array2<f32>| -> (usize, usize) {
        let mut new_caught = 0;
        let mut old_caught = 0;
        for ((i, j), &x) in c.indexed_iter() {
            let one = ndarray::arr2(&[[x]]);
            let err = (f64::from(x) - reference.exact()[[i, j]]).abs();
            let sub = MatmulReference {
                exact: ndarray::arr2(&[[reference.exact()[[i, j]]]]),
                tolerance: ndarray::arr2(&[[reference.tolerance[[i, j]]]]),
            };
            new_caught += usize::from(!sub.check(one.view()).unwrap().passed());
            old_caught += usize::from(err > old[[i, j]]);
        }
        (new_caught, old_caught)
    };
    // One 8-wide k-slab (l in 2048..2056) dropped from every element.
    let slab = product_with(&a, &b, |l| !(2048..2056).contains(&l), blocked);
    assert!(!reference.check(slab.view()).unwrap().passed());
    let (new, old) = caught(&slab);
    let total = m * n;
    println!("slab dropped: caught in {new} of {total} elements (old bound: {old})");
    assert!(new * 100 >= total * 95, "slab caught in {new} of {total}");
    assert!(
        old * 100 <= total * 90,
        "the old bound caught it in {old} of {total}"
    );
    // One term (l = 1000) dropped from every element.
    let term = product_with(&a, &b, |l| l != 1000, blocked);
    assert!(!reference.check(term.view()).unwrap().passed());
    let (new, old) = caught(&term);
    println!("term dropped: caught in {new} of {total} elements (old bound: {old})");
    assert!(new > old, "term: new {new}, old {old} of {total}");
    assert!(new * 100 >= total * 80, "term caught in {new} of {total}");
    // A single element with a slab dropped fails the whole check.
    let mut one = product_with(&a, &b, |_| true, blocked);
    one[[5, 7]] = slab[[5, 7]];
    let chk = reference.check(one.view()).unwrap();
    assert!(!chk.passed() && chk.worst_at == (5, 7), "{chk:?}");
}

#[test]
fn sgemm_tile_selection() {
    let pick = |m, k, n, sms, aligned| {
        let (t, s) = sgemm_choice(m, k, n, sms, aligned);
        (t.entry.name(), s)
    };
    // 4096³ and 4000³: 1024 tiles of 128², 8 per SM (64²: 32 per SM, no gain).
    assert_eq!(
        pick(4096, 4096, 4096, 132, true),
        ("matrix_mul_tiled_v4", 1)
    );
    assert_eq!(
        pick(4000, 4000, 4000, 132, true),
        ("matrix_mul_tiled_v4", 1)
    );
    assert_eq!(
        pick(2048, 2048, 2048, 132, true),
        ("matrix_mul_tiled_v4", 1)
    );
    // 1024³: 64 tiles of 128² for 132 SMs, 256 of 64² (2 per SM), no split.
    assert_eq!(
        pick(1024, 1024, 1024, 132, true),
        ("matrix_mul_tiled_64_v4", 1)
    );
    // On a GPU with 64 SMs, 1024³ fills them with 128² tiles.
    assert_eq!(pick(1024, 1024, 1024, 64, true), ("matrix_mul_tiled_v4", 1));
    // 1536³: 144 tiles of 128² (2 on 12 SMs: 32768 elements) against 576 of
    // 64² (5 per SM: 20480): 64². 1408³: 121 against 484, 16384 both: 128².
    assert_eq!(pick(1536, 64, 1536, 132, true).0, "matrix_mul_tiled_64_v4");
    assert_eq!(pick(1792, 64, 1792, 132, true).0, "matrix_mul_tiled_64_v4");
    assert_eq!(pick(1408, 64, 1408, 132, true).0, "matrix_mul_tiled_v4");
    assert_eq!(pick(1280, 64, 1280, 132, true).0, "matrix_mul_tiled_v4");
    // 3072³: 576 tiles of 128² (5 on the busiest SM: 81920 elements) against
    // 2304 of 64² (18: 73728, 10% fewer): 64². 4000³: 1024 against 3969,
    // 131072 against 126976 (3% fewer): 128².
    assert_eq!(pick(3072, 64, 3072, 132, true).0, "matrix_mul_tiled_64_v4");
    assert_eq!(pick(4000, 64, 4000, 132, true).0, "matrix_mul_tiled_v4");
    // The margin: 64² must beat 128² by more than 1/15.
    // 8 × 8 tiles of 128² on 16 SMs: 4 each (65536); 64²: 16 each (65536).
    assert_eq!(pick(1024, 64, 1024, 16, true).0, "matrix_mul_tiled_v4");
    // Any of k % 4, n % 4 or alignment off: 4-byte loads.
    assert_eq!(pick(4096, 4095, 4096, 132, true).0, "matrix_mul_tiled");
    assert_eq!(pick(4096, 4096, 4094, 132, true).0, "matrix_mul_tiled");
    assert_eq!(pick(4096, 4096, 4096, 132, false).0, "matrix_mul_tiled");
    assert_eq!(pick(1024, 1024, 1021, 132, true).0, "matrix_mul_tiled_64");
    // Split-k: at most one 64² tile per SM and k ≥ SPLIT_K_MIN.
    assert_eq!(pick(65, 4097, 3, 132, true), ("matrix_mul_tiled_64", 2));
    assert_eq!(
        pick(512, 4096, 512, 132, true),
        ("matrix_mul_tiled_64_v4", 2)
    );
    assert_eq!(
        pick(576, 1024, 576, 132, true),
        ("matrix_mul_tiled_64_v4", 2)
    );
    assert_eq!(pick(512, SPLIT_K_MIN, 512, 132, true).1, 2);
    assert_eq!(pick(512, SPLIT_K_MIN - 1, 512, 132, true).1, 1);
    // 12 × 11 = 132 tiles of 64²: split; 12 × 12 = 144: none.
    assert_eq!(
        pick(768, 4096, 704, 132, true),
        ("matrix_mul_tiled_64_v4", 2)
    );
    assert_eq!(
        pick(768, 4096, 768, 132, true),
        ("matrix_mul_tiled_64_v4", 1)
    );
    assert_eq!(pick(127, 333, 65, 132, true), ("matrix_mul_tiled_64", 1));
    // One tile: the small one (a quarter of the work on the busiest SM).
    assert_eq!(pick(1, 1, 1, 132, true), ("matrix_mul_tiled_64", 1));
    // A zero SM count (never reported) is treated as one.
    assert_eq!(pick(1, 1, 1, 0, true), ("matrix_mul_tiled_64", 1));
    assert_eq!(pick(256, 64, 256, 0, true), ("matrix_mul_tiled_v4", 1));
}

#[test]
fn doubles_matrix_shapes() {
    assert_eq!(doubles_matrix_launch(5, 5).unwrap(), (1, 256));
    // 8192²: 2^24 vectors of 4, 1024 per block of 256 threads.
    assert_eq!(doubles_matrix_launch(8192, 8192).unwrap(), (1 << 14, 256));
    assert_eq!(doubles_matrix_launch(8191, 8193).unwrap(), (1 << 14, 256));
    assert!(doubles_matrix_launch(0, 5).is_err());
    assert!(doubles_matrix_launch(2_000_000, 1).is_err());
    assert!(doubles_matrix_launch(65_535 * 8, 1).is_ok());
    assert!(doubles_matrix_launch(usize::MAX, 2).is_err());
}

#[test]
fn cpu_references() {
    let a = array![[1.0f32, 2.0], [3.0, 4.0]];
    let b = array![[5.0f32, 6.0], [7.0, 8.0]];
    assert_eq!(doubles_matrix_cpu(a.view()), array![[2.0, 4.0], [6.0, 8.0]]);
    let c = matmul_cpu(a.view(), b.view()).unwrap();
    assert_eq!(c, array![[19.0, 22.0], [43.0, 50.0]]);
    assert!(allclose(c.view(), c.view()).is_none());
    assert!(check_matmul(c.view(), a.view(), b.view()).unwrap().passed());
    let mut off = c.clone();
    off[[1, 0]] += 0.01;
    assert_eq!(allclose(off.view(), c.view()), Some((1, 0)));
    let chk = check_matmul(off.view(), a.view(), b.view()).unwrap();
    assert!(!chk.passed());
    assert_eq!(chk.worst_at, (1, 0));
    assert!(matmul_cpu(a.view(), b.t().slice(ndarray::s![..1, ..])).is_err());
}
