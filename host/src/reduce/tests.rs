//! The reduction's host-side unit tests: the CPU reference, the start
//! values, the entry list, the order emulation and the tolerance.
use super::*;
use crate::error::Error;
use ndarray::{Array1, s};

#[test]
fn cpu_reference_semantics() {
    let a = Array1::from_iter(1..=10_000i64);
    assert_eq!(reduce_cpu::<Sum, i64>(a.view(), None).unwrap(), 50_005_000);
    assert_eq!(
        reduce_cpu::<Sum, i64>(a.view(), Some(-5_000)).unwrap(),
        50_000_000
    );
    assert_eq!(reduce_cpu::<Max, i64>(a.view(), Some(7)).unwrap(), 10_000);
    assert_eq!(reduce_cpu::<Min, i64>(a.view(), Some(7)).unwrap(), 1);
    let e = a.slice(s![..0]);
    assert_eq!(reduce_cpu::<Sum, i64>(e, None).unwrap(), 0);
    assert_eq!(reduce_cpu::<Product, i64>(e, None).unwrap(), 1);
    assert_eq!(reduce_cpu::<Min, i64>(e, Some(3)).unwrap(), 3);
    assert!(matches!(
        reduce_cpu::<Min, i64>(e, None),
        Err(Error::InvalidInput {
            kernel: "reduce_min_i64",
            ..
        })
    ));
    assert!(matches!(
        reduce_cpu::<Max, f32>(Array1::<f32>::zeros(0).view(), None),
        Err(Error::InvalidInput {
            kernel: "reduce_max_f32",
            ..
        })
    ));
    // Strided views reduce the viewed elements.
    assert_eq!(
        reduce_cpu::<Sum, i64>(a.slice(s![..;2]), None).unwrap(),
        25_000_000
    );
}

#[test]
fn integer_overflow_wraps() {
    let a = Array1::from(vec![i32::MAX, 1, 1]);
    assert_eq!(
        reduce_cpu::<Sum, i32>(a.view(), None).unwrap(),
        i32::MIN + 1
    );
    let b = Array1::from(vec![1i64 << 40, 1 << 40]);
    assert_eq!(reduce_cpu::<Product, i64>(b.view(), None).unwrap(), 0);
}

#[test]
fn start_values() {
    assert_eq!(start_value::<Sum, f64>(0, None).unwrap(), 0.0);
    assert_eq!(start_value::<Product, f32>(0, None).unwrap(), 1.0);
    assert_eq!(start_value::<Min, i32>(5, None).unwrap(), i32::MAX);
    assert_eq!(start_value::<Max, f64>(0, Some(2.0)).unwrap(), 2.0);
    assert!(start_value::<Max, f64>(0, None).is_err());
}

#[test]
fn every_reduction_entry_is_listed() {
    let entries = [
        <Sum as ReduceKernel<i32>>::ENTRY,
        <Sum as ReduceKernel<i64>>::ENTRY,
        <Sum as ReduceKernel<f32>>::ENTRY,
        <Sum as ReduceKernel<f64>>::ENTRY,
        <Product as ReduceKernel<i32>>::ENTRY,
        <Product as ReduceKernel<i64>>::ENTRY,
        <Product as ReduceKernel<f32>>::ENTRY,
        <Product as ReduceKernel<f64>>::ENTRY,
        <Min as ReduceKernel<i32>>::ENTRY,
        <Min as ReduceKernel<i64>>::ENTRY,
        <Min as ReduceKernel<f32>>::ENTRY,
        <Min as ReduceKernel<f64>>::ENTRY,
        <Max as ReduceKernel<i32>>::ENTRY,
        <Max as ReduceKernel<i64>>::ENTRY,
        <Max as ReduceKernel<f32>>::ENTRY,
        <Max as ReduceKernel<f64>>::ENTRY,
        <Xor as ReduceKernel<i32>>::ENTRY,
        <Xor as ReduceKernel<i64>>::ENTRY,
    ];
    for e in entries {
        assert!(
            cuda_kernels_gpu::KERNELS.contains(&e),
            "{e} missing from the kernel list"
        );
    }
}

#[test]
fn tolerance_grows_with_depth() {
    let u = f32::EPSILON as f64 / 2.0;
    let a = float_sum_tolerance(1 << 20, 1 << 18, 1.0, u);
    let b = float_sum_tolerance(1 << 24, 1 << 18, 1.0, u);
    assert!(a > 0.0 && a < b && b < 1e-4);
    assert_eq!(float_sum_tolerance(usize::MAX, 1, 1.0, u), f64::INFINITY);
}

/// Uniform values in [-1, 1), as f32.
fn uniform_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = crate::util::Rng::new(seed);
    (0..n).map(|_| (rng.uniform() * 2.0 - 1.0) as f32).collect()
}

/// The H100's launch for 2^24 f32: 132 SMs × 2 blocks of 1024.
const H100: ReduceOrder = ReduceOrder {
    grid: 264,
    block: 1024,
    head: 0,
};

#[test]
fn gpu_order_emulation_is_exact_where_any_order_is() {
    // Integer sums (wrapping) and min/max do not depend on the order:
    // the emulation must agree with the sequential fold exactly, for
    // every head/tail split and for inputs shorter than one vector.
    let mut rng = crate::util::Rng::new(3);
    for n in [0usize, 1, 3, 5, 100, 4097, 70_001] {
        let xs: Vec<i32> = (0..n).map(|_| rng.next_u64() as i32).collect();
        let fs = uniform_f32(n, n as u64);
        for head in 0..4 {
            for (grid, block) in [(1, 32), (3, 64), (7, 1024)] {
                let order = ReduceOrder { grid, block, head };
                let view = ndarray::ArrayView1::from(&xs[..]);
                assert_eq!(
                    reduce_in_gpu_order::<Sum, i32>(&xs, Some(5), order).unwrap(),
                    reduce_cpu::<Sum, i32>(view, Some(5)).unwrap()
                );
                if n > 0 {
                    let view = ndarray::ArrayView1::from(&fs[..]);
                    assert_eq!(
                        reduce_in_gpu_order::<Max, f32>(&fs, None, order).unwrap(),
                        reduce_cpu::<Max, f32>(view, None).unwrap()
                    );
                }
            }
        }
    }
    assert!(reduce_in_gpu_order::<Min, f32>(&[], None, H100).is_err());
    let bad = ReduceOrder { block: 48, ..H100 };
    assert!(reduce_in_gpu_order::<Sum, f32>(&[1.0], None, bad).is_err());
}

#[test]
fn gpu_order_emulation_follows_the_tree() {
    // One block of 32 threads, 8 f32 = 2 vectors, no head: thread 0
    // gets vector 0, thread 1 vector 1; the warp tree adds lane 1 to
    // lane 0 last (offset 1), then warp 0 of the slots adds identities.
    let xs = [1e8f32, 1.0, -1e8, 1.0, 3.0, 5.0, 7.0, 11.0];
    let order = ReduceOrder {
        grid: 1,
        block: 32,
        head: 0,
    };
    let v0 = (1e8f32 + 1.0) + (-1e8f32 + 1.0);
    let v1 = (3.0f32 + 5.0) + (7.0 + 11.0);
    assert_eq!(
        reduce_in_gpu_order::<Sum, f32>(&xs, None, order).unwrap(),
        0.0 + (v0 + v1)
    );
    // With a head of one element: thread 0 takes x0 (head), then x5
    // (the first of the 3-element tail), then vector 0 = x1..x4;
    // threads 1 and 2 take x6 and x7. The warp tree meets lane 2 at
    // offset 2 and lane 1 at offset 1.
    let order = ReduceOrder { head: 1, ..order };
    let t0 = (1e8f32 + 5.0) + ((1.0f32 + -1e8) + (1.0 + 3.0));
    let (t1, t2) = (7.0f32, 11.0f32);
    assert_eq!(t0, 8.0, "1e8 + 5 rounds up to 1e8 + 8");
    assert_eq!(
        reduce_in_gpu_order::<Sum, f32>(&xs, None, order).unwrap(),
        (t0 + t2) + t1
    );
}

#[test]
fn gpu_order_check_catches_one_dropped_element_at_2_24() {
    // 2^24 f32 in [-1, 1) with the H100's launch: the exact check (the
    // GPU's order emulated) against one element left out, each of a
    // few positions (first, a middle one, the last), and one doubled.
    let n = 1 << 24;
    let xs = uniform_f32(n, 24);
    let right = reduce_in_gpu_order::<Sum, f32>(&xs, None, H100).unwrap();
    for drop in [0, n / 2 + 12_345, n - 1] {
        let mut wrong = xs.clone();
        wrong[drop] = 0.0;
        let got = reduce_in_gpu_order::<Sum, f32>(&wrong, None, H100).unwrap();
        assert_ne!(got, right, "dropping element {drop} ({})", xs[drop]);
        // The worst-case tolerance cannot see it: that is why the checks
        // of the GPU's sums compare with the emulation, exactly.
        let exact = accurate_sum(xs.iter().map(|&x| f64::from(x)));
        let sum_abs: f64 = xs.iter().map(|&x| f64::from(x).abs()).sum();
        let tol = float_sum_tolerance(n, H100.grid * H100.block, sum_abs, 2f64.powi(-24));
        assert!((f64::from(got) - exact).abs() <= tol);
    }
}

/// `xs` summed in f32 in three orders: left to right, pairwise
/// (recursive halving), and in blocks of `b` summed left to right, then
/// the blocks' sums left to right.
fn three_orders(xs: &[f32], b: usize) -> [(f32, usize); 3] {
    fn pairwise(xs: &[f32]) -> f32 {
        match xs.len() {
            0 => 0.0,
            1 => xs[0],
            n => pairwise(&xs[..n / 2]) + pairwise(&xs[n / 2..]),
        }
    }
    let sequential = xs.iter().fold(0.0f32, |a, &x| a + x);
    let blocked = xs
        .chunks(b)
        .map(|c| c.iter().fold(0.0f32, |a, &x| a + x))
        .fold(0.0f32, |a, x| a + x);
    // The tolerance's `threads`: 1 for a sequential sum (depth n); n for
    // the pairwise tree (depth log2 n ≤ 32); for blocks, n / b leaves
    // summed sequentially (depth b), then n / b blocks in sequence
    // (bounded as b + n / b ≤ ceil(n / threads) + 32 with threads = n / b
    // only while n / b ≤ 32: the blocked test keeps to that).
    [
        (sequential, 1),
        (pairwise(xs), xs.len()),
        (blocked, xs.len() / b),
    ]
}

#[test]
fn float_sum_tolerance_passes_correct_orders_and_catches_a_dropped_element() {
    let u32_ = 2f64.powi(-24);
    // f32, 2^16 values in [-1, 1): every correct order passes; with a
    // depth-36 tree (2^14 threads, as a GPU launch would give) one
    // dropped element of typical size fails.
    let n = 1 << 16;
    let xs = uniform_f32(n, 16);
    let exact = accurate_sum(xs.iter().map(|&x| f64::from(x)));
    let sum_abs: f64 = xs.iter().map(|&x| f64::from(x).abs()).sum();
    for (got, threads) in three_orders(&xs, n / 32) {
        let tol = float_sum_tolerance(n, threads, sum_abs, u32_);
        assert!((f64::from(got) - exact).abs() <= tol, "{got} vs {exact}");
    }
    let tol = float_sum_tolerance(n, 1 << 14, sum_abs, u32_);
    let big = xs.iter().position(|x| x.abs() > 0.5).unwrap();
    let dropped = exact - f64::from(xs[big]);
    assert!((dropped - exact).abs() > tol, "tolerance {tol:.2e}");
    // The relation: the bound is depth·u·Σ|x|, so it resolves one
    // element of size |x| only while depth·u·n·mean|x| < |x|; for f32 at
    // depth ~36 that is n below about 2^18. At 2^24 (depth 94 on an
    // H100) it allows ~47 elements of mean size, i.e. f32's
    // resolution of such a sum: see the exact check above for 2^24.
    // f64 at 2^24: a dropped element is caught by the bound itself.
    let n = 1 << 24;
    let xs: Vec<f64> = uniform_f32(n, 64).iter().map(|&x| f64::from(x)).collect();
    let exact = accurate_sum(xs.iter().copied());
    let sum_abs: f64 = xs.iter().map(|x| x.abs()).sum();
    let tol = float_sum_tolerance(n, 1 << 18, sum_abs, 2f64.powi(-53));
    let seq: f64 = xs.iter().sum();
    assert!((seq - exact).abs() <= float_sum_tolerance(n, 1, sum_abs, 2f64.powi(-53)));
    let big = xs.iter().position(|x| x.abs() > 1e-3).unwrap();
    assert!(xs[big].abs() > tol, "tolerance {tol:.2e}");
}

#[test]
fn element_vector_widths() {
    assert_eq!(<f32 as Input>::PER_VEC, 4);
    assert_eq!(<i64 as Input>::PER_VEC, 2);
    assert_eq!(<f64 as Input>::NAME, "f64");
    assert_eq!(<dev::bf16 as Input>::PER_VEC, 8);
}

#[test]
fn all_nan_min_max_give_the_identity_like_the_gpu() {
    let nans = ndarray::Array1::from(vec![f32::NAN; 5]);
    assert_eq!(
        reduce_cpu::<Min, f32>(nans.view(), None).unwrap(),
        f32::INFINITY
    );
    assert_eq!(
        reduce_cpu::<Max, f32>(nans.view(), None).unwrap(),
        f32::NEG_INFINITY
    );
    let mixed = ndarray::Array1::from(vec![f32::NAN, 2.0, f32::NAN, -1.0]);
    assert_eq!(reduce_cpu::<Min, f32>(mixed.view(), None).unwrap(), -1.0);
}
