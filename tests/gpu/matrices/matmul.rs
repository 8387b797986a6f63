//! The matrix products (naive and tiled): chosen shapes, views, tile
//! selection, split K, the tiled kernel's vector loads in the PTX, and random
//! shapes against the CPU.
use super::*;

pub(super) fn randn2(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    let mut rng = Rng::new(seed);
    Array2::from_shape_simple_fn((rows, cols), || rng.normal() as f32)
}

pub(super) fn matmul_small_matches_dot(gpu: &Gpu) -> Result<(), Failed> {
    // The seed's 5×5 and other small shapes: numpy.allclose against ndarray's
    // dot. Inputs are small integers, so both products are exact and the
    // seed's tolerance applies as is.
    let mut rng = Rng::new(11);
    for &(m, k, n) in &[
        (1, 1, 1),
        (5, 5, 5),
        (3, 7, 2),
        (16, 16, 16),
        (33, 17, 65),
        (128, 8, 128),
    ] {
        let a = Array2::from_shape_simple_fn((m, k), || rng.below(10) as f32 - 5.0);
        let b = Array2::from_shape_simple_fn((k, n), || rng.below(10) as f32 - 5.0);
        let expected = matmul_cpu(a.view(), b.view()).map_err(fail)?;
        for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
            let c = gpu.matmul(kernel, a.view(), b.view()).map_err(fail)?;
            ensure(allclose(c.view(), expected.view()).is_none(), || {
                format!(
                    "{kernel:?} {m}×{k}·{k}×{n}: not allclose at {:?}",
                    allclose(c.view(), expected.view())
                )
            })?;
        }
    }
    Ok(())
}

pub(super) fn matmul_edges_and_large(gpu: &Gpu) -> Result<(), Failed> {
    // randn inputs, every edge case of the 128×128×8 tiling, and large k:
    // compared with the f64 product, tolerance = allclose + the f32 rounding
    // bound k·2⁻²⁴·(|A||B|)ᵢⱼ (see check_matmul for why). The simulator
    // leaves out the three largest (large k there: 33 × 4097 · 4097 × 31).
    let edges = [
        (5, 5, 5),
        (127, 9, 129),
        (129, 257, 130),
        (1, 1000, 1),
        (300, 1, 200),
        (255, 31, 513),
    ];
    let large: &[(usize, usize, usize)] = if simulated(gpu) {
        &[(33, 4097, 31)]
    } else {
        &[(1000, 1000, 1000), (1024, 1024, 1024), (517, 4096, 260)]
    };
    for &(m, k, n) in edges.iter().chain(large) {
        let a = randn2(m, k, (m * 31 + k) as u64);
        let b = randn2(k, n, (k * 17 + n) as u64);
        for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
            let c = gpu.matmul(kernel, a.view(), b.view()).map_err(fail)?;
            let chk = check_matmul(c.view(), a.view(), b.view()).map_err(fail)?;
            ensure(chk.passed(), || {
                format!("{kernel:?} {m}×{k}·{k}×{n}: {chk:?}")
            })?;
        }
    }
    Ok(())
}

pub(super) fn matmul_views(gpu: &Gpu) -> Result<(), Failed> {
    let a = randn2(70, 50, 1);
    let b = randn2(90, 70, 2);
    // Aᵀ (50×70) · Bᵀ (70×90), both non-contiguous views.
    let c = gpu.matrix_mul_tiled(a.t(), b.t()).map_err(fail)?;
    let chk = check_matmul(c.view(), a.t(), b.t()).map_err(fail)?;
    ensure(chk.passed(), || format!("transposed views: {chk:?}"))?;
    let c = gpu
        .matrix_mul_naive(a.slice(s![..;-2, ..]), b.slice(s![..50, ..;3]))
        .map_err(fail)?;
    let chk =
        check_matmul(c.view(), a.slice(s![..;-2, ..]), b.slice(s![..50, ..;3])).map_err(fail)?;
    ensure(chk.passed(), || format!("stepped views: {chk:?}"))
}

/// `C = A · B` with the tiled kernel through `matmul_on_device`, every
/// buffer starting `offset` elements into its allocation (1: not 16-byte
/// aligned, so the 4-byte entries run), C filled with NaN first (so an
/// element the kernel skips shows). Returns C and the launch plan used.
fn tiled_at_offset(
    gpu: &Gpu,
    a: &Array2<f32>,
    b: &Array2<f32>,
    offset: usize,
) -> Result<(Array2<f32>, MatmulLaunch), Failed> {
    let ((m, k), n) = (a.dim(), b.ncols());
    let padded = |x: &Array2<f32>| {
        let mut v = vec![0.0f32; offset];
        v.extend(x.iter());
        v
    };
    let da = gpu.to_device(&padded(a)).map_err(fail)?;
    let db = gpu.to_device(&padded(b)).map_err(fail)?;
    let mut dc = gpu
        .to_device(&vec![f32::NAN; offset + m * n])
        .map_err(fail)?;
    let (sa, sb, mut sc) = (
        da.index(offset..),
        db.index(offset..),
        dc.index_mut(offset..),
    );
    let aligned = [sa.as_device_ptr().as_raw(), sb.as_device_ptr().as_raw()]
        .iter()
        .all(|p| p.is_multiple_of(16));
    let sms = gpu.multiprocessors("test").map_err(fail)?;
    let plan =
        matmul_launch_for(MatmulKernel::Tiled, (m, k), (k, n), sms, aligned).map_err(fail)?;
    gpu.matmul_on_device(MatmulKernel::Tiled, &sa, &sb, &mut sc, m, k, n)
        .map_err(fail)?;
    gpu.synchronize("matrix_mul_tiled").map_err(fail)?;
    let mut out = vec![0.0f32; m * n];
    sc.copy_to(&mut out[..]).map_err(fail)?;
    let c = Array2::from_shape_vec((m, n), out).map_err(fail)?;
    Ok((c, plan))
}

pub(super) fn matmul_tile_selection(gpu: &Gpu) -> Result<(), Failed> {
    // Shapes at the edges of every tiled entry's tiles and loads, aligned and
    // misaligned: 64² tiles (few tiles of 128²) and 128² tiles (16 × 16 of
    // them, which 132 SMs take as 128²: see sgemm_choice); k-tile tails of
    // 4, 8 and 12 floats (16-byte loads run whole float4s), n not a
    // multiple of the tile, m odd; and the odd shapes. On the
    // simulator the 128² tiles run at the same m and n with a short k (the
    // choice does not depend on k's length).
    let mut seen = std::collections::BTreeSet::new();
    let shapes = [
        (1, 4, 4),
        (63, 12, 68),
        (65, 20, 132),
        (127, 333, 65),
        (129, 36, 60),
        (130, 1004, 260),
        (1, 1, 1),
    ];
    let large: &[(usize, usize, usize)] = if simulated(gpu) {
        &[(2048, 4, 2044), (1921, 5, 1923)]
    } else {
        &[(2048, 36, 2044), (1921, 20, 1924), (2047, 13, 2045)]
    };
    for &(m, k, n) in shapes.iter().chain(large) {
        let a = randn2(m, k, (m * 13 + k) as u64);
        let b = randn2(k, n, (k * 7 + n) as u64);
        for offset in [0, 1] {
            let (c, plan) = tiled_at_offset(gpu, &a, &b, offset)?;
            let vec = plan.entry.name().ends_with("_v4");
            ensure(!(vec && (offset != 0 || k % 4 != 0 || n % 4 != 0)), || {
                format!(
                    "{m}×{k}·{k}×{n} offset {offset}: {} needs alignment",
                    plan.entry.name()
                )
            })?;
            seen.insert(plan.entry.name());
            let chk = check_matmul(c.view(), a.view(), b.view()).map_err(fail)?;
            ensure(chk.passed(), || {
                format!(
                    "{} {m}×{k}·{k}×{n} offset {offset}: {chk:?}",
                    plan.entry.name()
                )
            })?;
        }
    }
    // On an H100 (the SM count the shapes were picked for) every entry ran.
    let sms = gpu.multiprocessors("test").map_err(fail)?;
    ensure(sms != PLAN_SMS || seen.len() == 4, || {
        format!("only {seen:?} ran")
    })
}

pub(super) fn matmul_split_k(gpu: &Gpu) -> Result<(), Failed> {
    // Few output tiles and a long k: two k-splits added onto a zeroed C.
    // The split falls inside a k-tile tail (k % 8 != 0), on a tile boundary,
    // and on misaligned (4-byte) operands; the result is the same bits on
    // every run. The simulator leaves out 256 × 2048 · 2048 × 260.
    let sms = gpu.multiprocessors("test").map_err(fail)?;
    let large: &[(usize, usize, usize)] = if simulated(gpu) {
        &[]
    } else {
        &[(256, 2048, 260)]
    };
    for &(m, k, n) in [
        (65, 4097, 3),
        (1, 4096, 1),
        (100, 1001, 100),
        (33, 520, 17),
        (64, SPLIT_K_MIN, 64),
    ]
    .iter()
    .chain(large)
    {
        let a = randn2(m, k, (m * 5 + k) as u64);
        let b = randn2(k, n, (k * 3 + n) as u64);
        for offset in [0, 1] {
            let (c, plan) = tiled_at_offset(gpu, &a, &b, offset)?;
            ensure(sms < 2 * 20 || plan.splits == 2, || {
                format!("{m}×{k}·{k}×{n}: {} splits", plan.splits)
            })?;
            let chk = check_matmul(c.view(), a.view(), b.view()).map_err(fail)?;
            ensure(chk.passed(), || {
                format!(
                    "{} split {m}×{k}·{k}×{n} offset {offset}: {chk:?}",
                    plan.entry.name()
                )
            })?;
            let (again, _) = tiled_at_offset(gpu, &a, &b, offset)?;
            let same = c
                .iter()
                .zip(&again)
                .all(|(x, y)| x.to_bits() == y.to_bits());
            ensure(same, || {
                format!("{m}×{k}·{k}×{n}: split-k result differs between runs")
            })?;
        }
    }
    Ok(())
}

pub(super) fn ptx_tiled_uses_shared_vector_loads() -> Result<(), Failed> {
    for tile in cuda_kernels::kernels::matmul::SGEMM_TILES {
        let body = ptx_entry(tile.entry.name())?;
        let v4 = body.matches("ld.shared.v4.f32").count();
        let fma = body.matches("fma.rn.f32").count();
        let (want_v4, want_fma) = (4 * tile.bk, 64 * tile.bk);
        ensure(v4 >= want_v4 && fma >= want_fma, || {
            format!(
                "{}: expected ≥ {want_v4} ld.shared.v4.f32 and ≥ {want_fma} fma.rn.f32, \
                 got {v4} and {fma}",
                tile.entry.name()
            )
        })?;
        ensure(!body.contains(".local"), || {
            format!("local memory in {}", tile.entry.name())
        })?;
    }
    Ok(())
}

pub(super) fn ptx_tiled_v4_uses_global_vector_loads() -> Result<(), Failed> {
    for tile in cuda_kernels::kernels::matmul::SGEMM_TILES {
        let body = ptx_entry(tile.entry.name())?;
        let v4 = body.contains("ld.global.nc.v4");
        ensure(v4 == tile.vec, || {
            format!(
                "{}: ld.global.nc.v4 present: {v4}, expected {}",
                tile.entry.name(),
                tile.vec
            )
        })?;
    }
    Ok(())
}

struct MatmulCase {
    a: Array2<f32>,
    b: Array2<f32>,
    /// Small integers (exact products) rather than floats in [-1, 1).
    integers: bool,
    /// Pass A (B) as the transposed view of a column-major copy.
    a_transposed: bool,
    b_transposed: bool,
}

impl Debug for MatmulCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "A {:?}{} · B {:?}{}, {}, A = {}, B = {}",
            self.a.dim(),
            if self.a_transposed { " (view)" } else { "" },
            self.b.dim(),
            if self.b_transposed { " (view)" } else { "" },
            if self.integers {
                "integers in -8..=8"
            } else {
                "floats in [-1, 1)"
            },
            brief(self.a.as_slice().unwrap_or(&[])),
            brief(self.b.as_slice().unwrap_or(&[]))
        )
    }
}

fn matmul_cases() -> impl Strategy<Value = MatmulCase> {
    let params = (
        1..=200usize,
        1..=200usize,
        1..=200usize,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    );
    params.prop_perturb(|(m, k, n, integers, a_t, b_t), rng| {
        let mut d = Draw::new(rng);
        let values: BoxedStrategy<f32> = if integers {
            (-8i8..=8).prop_map(f32::from).boxed()
        } else {
            (-1.0f32..1.0).boxed()
        };
        MatmulCase {
            a: matrix(m, k, d.vec(&values, m * k)),
            b: matrix(k, n, d.vec(&values, k * n)),
            integers,
            a_transposed: a_t,
            b_transposed: b_t,
        }
    })
}

/// Random m, k, n in 1..=200; values either integers in -8..=8 (every sum is
/// an integer below 2^24, so exact in any order) or floats in [-1, 1); each
/// operand either row-major or a transposed column-major view. Integers: the
/// product equals `matmul_cpu` exactly; floats: within `check_matmul`'s
/// tolerance (the one `matmul_edges_and_large` uses: NumPy's allclose plus k·2⁻²⁴·|A||B|)
/// (32 cases per kernel).
pub(super) fn matmul_agrees_with_cpu(gpu: &Gpu, kernel: MatmulKernel) -> Result<(), Failed> {
    check(32, matmul_cases(), |c| {
        let a_col = c.a.t().as_standard_layout().into_owned();
        let b_col = c.b.t().as_standard_layout().into_owned();
        let a = if c.a_transposed {
            a_col.t()
        } else {
            c.a.view()
        };
        let b = if c.b_transposed {
            b_col.t()
        } else {
            c.b.view()
        };
        let got = gpu.matmul(kernel, a, b).map_err(case_err)?;
        if c.integers {
            let want = matmul_cpu(c.a.view(), c.b.view()).map_err(case_err)?;
            all_same(&format!("{kernel:?} (integers)"), &got, &want)
        } else {
            let chk = check_matmul(got.view(), c.a.view(), c.b.view()).map_err(case_err)?;
            prop_assert!(chk.passed(), "{:?} (floats): {:?}", kernel, chk);
            Ok(())
        }
    })
}
