//! The GEMM family (mma.sync and CUDA-core paths): every layout, edges,
//! misaligned operands, batches, reused buffers, NaN and infinity, against the
//! f64 reference and its error bound (and cuBLAS on a GPU), the bound shown to
//! catch one dropped k-slab, and the refusals of bad shapes.
use super::*;

pub(super) fn random<I: GemmInput>(
    rows: usize,
    cols: usize,
    seed: u64,
    from: impl Fn(f32) -> I,
) -> Array2<I> {
    let mut rng = Rng::new(seed);
    Array2::from_shape_simple_fn((rows, cols), || from(rng.uniform() as f32 * 2.0 - 1.0))
}

/// Runs `C = alpha · A · B + beta · C` and checks it against the reference;
/// returns the path taken.
fn gemm_case<I: GemmInput, O: GemmOutput<I>>(
    gpu: &Gpu,
    alpha: f32,
    a: ArrayView2<I>,
    b: ArrayView2<I>,
    beta: f32,
    c: &Array2<O>,
) -> Result<GemmPath, Failed> {
    let mut got = c.clone();
    let path = gpu.gemm(alpha, a, b, beta, got.view_mut()).map_err(fail)?;
    let reference: GemmReference = gemm_reference(alpha, a, b, beta, c.view());
    if let Some((i, j, g, e, bound)) = gemm_check(got.view(), &reference, |v| v.to_f64()) {
        return Err(Failed::from(format!(
            "{} {}x{}x{} ({path:?}): C[{i}][{j}] = {g}, exact {e}, bound {bound}",
            I::NAME,
            a.nrows(),
            b.ncols(),
            a.ncols()
        )));
    }
    Ok(path)
}

/// The four layouts, `(op_a, op_b)`: NN, NT, TN, TT.
const LAYOUTS: [(Op, Op); 4] = [
    (Op::N, Op::N),
    (Op::N, Op::T),
    (Op::T, Op::N),
    (Op::T, Op::T),
];

fn expected_path(gpu: &Gpu) -> GemmPath {
    // The simulator runs the production mma.sync kernel; a GPU without the
    // sm_80 build's kernel takes the CUDA cores.
    if simulated(gpu) {
        GemmPath::MmaSync
    } else {
        gpu.gemm_path::<bf16, f32>(&GemmShape::dense(256, 256, 256))
            .unwrap_or(GemmPath::CudaCore)
    }
}

/// The 256³ bf16 product through the production mma.sync kernel (the
/// simulator's budget: 30 s on 2 cores); and a tall one, 1100 × 136 × 16,
/// whose 9 × 2 tiles of C span two groups of the mma.sync kernel's block
/// order (8 m-tiles, then 1), so that every tile must still be computed
/// once.
pub(super) fn gemm_bf16_256_cubed(gpu: &Gpu) -> Result<(), Failed> {
    let (a, b) = (
        random(256, 256, 1, bf16::from_f32),
        random(256, 256, 2, bf16::from_f32),
    );
    let c = Array2::<f32>::zeros((256, 256));
    let path = gemm_case(gpu, 1.0, a.view(), b.view(), 0.0, &c)?;
    ensure(path == expected_path(gpu), || format!("path {path:?}"))?;
    let (a, b) = (
        random(1100, 16, 3, bf16::from_f32),
        random(16, 136, 4, bf16::from_f32),
    );
    let c = random(1100, 136, 5, bf16::from_f32);
    let path = gemm_case(gpu, 0.5, a.view(), b.view(), 1.5, &c)?;
    ensure(path == expected_path(gpu), || {
        format!("tall: path {path:?}")
    })
}

/// NN, NT, TN and TT; bf16 → bf16, f16 → f32, f16 → f16, tf32; alpha and
/// beta; edges of every dimension (1, odd, past a block).
pub(super) fn gemm_layouts_types_and_edges(gpu: &Gpu) -> Result<(), Failed> {
    let shapes: &[(usize, usize, usize)] = if simulated(gpu) {
        &[(1, 1, 1), (17, 33, 45), (130, 9, 40)]
    } else {
        &[
            (1, 1, 1),
            (17, 33, 45),
            (130, 9, 40),
            (257, 300, 333),
            (1000, 1000, 1000),
        ]
    };
    for (idx, &(m, n, k)) in shapes.iter().enumerate() {
        for (oi, &(oa, ob)) in LAYOUTS.iter().enumerate() {
            let seed = (idx * 4 + oi) as u64 * 10;
            // A stored transposed: a k × m array viewed as m × k.
            fn view<I: GemmInput>(x: &Array2<I>, op: Op) -> ArrayView2<'_, I> {
                if op == Op::T { x.t() } else { x.view() }
            }
            let store = |rows: usize, cols: usize, op: Op| {
                if op == Op::T {
                    (cols, rows)
                } else {
                    (rows, cols)
                }
            };
            let (ra, ca) = store(m, k, oa);
            let (rb, cb) = store(k, n, ob);
            let ab = random(ra, ca, seed, bf16::from_f32);
            let bb = random(rb, cb, seed + 1, bf16::from_f32);
            let cb16 = random(m, n, seed + 2, bf16::from_f32);
            gemm_case(gpu, 1.5, view(&ab, oa), view(&bb, ob), -0.5, &cb16)?;
            let ah = random(ra, ca, seed + 3, f16::from_f32);
            let bh = random(rb, cb, seed + 4, f16::from_f32);
            let c32 = random(m, n, seed + 5, |x| x);
            gemm_case(gpu, 0.75, view(&ah, oa), view(&bh, ob), 2.0, &c32)?;
            gemm_case(
                gpu,
                1.0,
                view(&ah, oa),
                view(&bh, ob),
                0.0,
                &random(m, n, seed + 6, f16::from_f32),
            )?;
            let af = random(ra, ca, seed + 7, |x| x);
            let bf = random(rb, cb, seed + 8, |x| x);
            gemm_case(gpu, -1.0, view(&af, oa), view(&bf, ob), 0.5, &c32)?;
        }
    }
    Ok(())
}

/// The on-device API: an operand starting one element into its buffer is
/// staged and stays on the tensor-core path, and is right; a strided batch
/// of 3 is right, batch by batch.
pub(super) fn gemm_misaligned_and_batched(gpu: &Gpu) -> Result<(), Failed> {
    let (m, n, k, batches) = (40, 24, 56, 3);
    let a = random(batches * m + 1, k, 30, bf16::from_f32);
    let b = random(batches * k, n, 31, bf16::from_f32);
    let flat = |x: &Array2<bf16>| x.iter().map(|&v| GemmInput::to_dev(v)).collect::<Vec<_>>();
    let da = gpu.to_device(&flat(&a)).map_err(fail)?;
    let db = gpu.to_device(&flat(&b)).map_err(fail)?;
    let mut shape = GemmShape::dense(m, n, k);
    shape.batches = batches;
    (shape.stride_a, shape.stride_b) = (m * k, k * n);
    let check = |got: &[f32], a_off: usize, what: &str| -> Result<(), Failed> {
        for z in 0..batches {
            let az = a
                .as_slice()
                .map(|s| &s[a_off + z * m * k..a_off + (z + 1) * m * k])
                .ok_or("layout")?;
            let az = ArrayView2::from_shape((m, k), az).map_err(fail)?;
            let bz = b.slice(s![z * k..(z + 1) * k, ..]);
            let cz = Array2::<f32>::zeros((m, n));
            let reference = gemm_reference(1.0, az, bz, 0.0, cz.view());
            let gz =
                ArrayView2::from_shape((m, n), &got[z * m * n..(z + 1) * m * n]).map_err(fail)?;
            if let Some(bad) = gemm_check(gz, &reference, |v| v as f64) {
                return Err(Failed::from(format!("{what}, batch {z}: {bad:?}")));
            }
        }
        Ok(())
    };
    // An operand one element in is staged into aligned rows: the same path.
    for (a_off, want) in [(0, expected_path(gpu)), (1, expected_path(gpu))] {
        let mut dc = gpu.zeroed::<f32>(batches * m * n).map_err(fail)?;
        let path = gpu
            .gemm_on_device::<bf16, f32>(&shape, 1.0, &da.index(a_off..), &db, 0.0, &mut dc)
            .map_err(fail)?;
        gpu.synchronize("gemm").map_err(fail)?;
        ensure(path == want, || {
            format!("A at +{a_off}: path {path:?}, want {want:?}")
        })?;
        let mut got = vec![0f32; batches * m * n];
        dc.copy_to(&mut got[..]).map_err(fail)?;
        check(&got, a_off, &format!("A at +{a_off}"))?;
    }
    Ok(())
}

/// One on-device case of [`device_case`].
#[derive(Clone, Copy)]
struct DeviceCase {
    mnk: (usize, usize, usize),
    ops: (Op, Op),
    /// Elements added to each stored row (0: tight and aligned).
    pad: usize,
    /// Elements A starts into its buffer.
    a_off: usize,
    batches: usize,
    /// `(alpha, beta)`.
    ab: (f32, f32),
    seed: u64,
}

/// One on-device GEMM of `m × n × k` in the layout `ops`, `C = alpha ·
/// op(A) · op(B) + beta · C` over `batches`: with `pad > 0` its operands
/// are nowhere 16-byte aligned (A starts `a_off` elements into its buffer,
/// both leading dimensions are a row plus `pad` and `pad + 2` elements, the
/// batch strides are odd). The path must be a tensor-core one (unaligned
/// operands staged into aligned rows) and every element of every batch
/// within the f64 bound.
fn device_case<I: GemmInput, O: GemmOutput<I> + Default>(
    gpu: &Gpu,
    case: &DeviceCase,
    (from, to_out): (impl Fn(f32) -> I + Copy, impl Fn(f32) -> O + Copy),
) -> Result<(), Failed> {
    let DeviceCase {
        mnk: (m, n, k),
        ops: (op_a, op_b),
        pad,
        a_off,
        batches,
        ab: (alpha, beta),
        seed,
    } = *case;
    let mut shape = GemmShape::with_ops(m, n, k, op_a, op_b);
    let ((ra, ca), (rb, cb)) = (shape.a_stored(), shape.b_stored());
    shape.batches = batches;
    if pad > 0 {
        (shape.lda, shape.ldb) = (ca + pad, cb + pad + 2);
        (shape.stride_a, shape.stride_b) = (ra * shape.lda + 1, rb * shape.ldb + 3);
    }
    let (ea, eb, ec) = shape.extents().ok_or("extents")?;
    let a = random(1, a_off + ea, seed, from)
        .into_raw_vec_and_offset()
        .0;
    let b = random(1, eb, seed + 1, from).into_raw_vec_and_offset().0;
    let dev = |x: &[I]| x.iter().map(|&v| v.to_dev()).collect::<Vec<_>>();
    let da = gpu.to_device(&dev(&a)).map_err(fail)?;
    let db = gpu.to_device(&dev(&b)).map_err(fail)?;
    let c0: Vec<O> = {
        let mut rng = Rng::new(seed + 2);
        (0..ec)
            .map(|_| to_out(rng.uniform() as f32 * 2.0 - 1.0))
            .collect()
    };
    let mut dc = gpu
        .to_device(&c0.iter().map(|&v| v.to_dev()).collect::<Vec<_>>())
        .map_err(fail)?;
    let what = format!(
        "{} -> {} {m}x{n}x{k} {op_a:?}{op_b:?}, lda {} ldb {}, A at +{a_off}, {batches} batches",
        I::NAME,
        O::NAME,
        shape.lda,
        shape.ldb
    );
    let path = gpu
        .gemm_on_device::<I, O>(&shape, alpha, &da.index(a_off..), &db, beta, &mut dc)
        .map_err(|e| format!("{what}: {e}"))?;
    ensure(path != GemmPath::CudaCore, || {
        format!("{what}: the CUDA cores")
    })?;
    ensure(!simulated(gpu) || path == GemmPath::MmaSync, || {
        format!("{what}: {path:?} on the simulator")
    })?;
    let got: Vec<O> = dc
        .to_vec()
        .map_err(fail)?
        .into_iter()
        .map(O::from_dev)
        .collect();
    fn stored<I>(
        x: &[I],
        start: usize,
        (rows, cols): (usize, usize),
        ld: usize,
        op: Op,
    ) -> Result<ArrayView2<'_, I>, cuda_kernels::ndarray::ShapeError> {
        ArrayView2::from_shape((rows, cols).strides((ld, 1)), &x[start..]).map(|v| match op {
            Op::N => v,
            Op::T => v.reversed_axes(),
        })
    }
    for z in 0..batches {
        let az = stored(&a, a_off + z * shape.stride_a, (ra, ca), shape.lda, op_a).map_err(fail)?;
        let bz = stored(&b, z * shape.stride_b, (rb, cb), shape.ldb, op_b).map_err(fail)?;
        let cz = ArrayView2::from_shape((m, n), &c0[z * m * n..(z + 1) * m * n]).map_err(fail)?;
        let reference = gemm_reference(alpha, az, bz, beta, cz);
        let gz = ArrayView2::from_shape((m, n), &got[z * m * n..(z + 1) * m * n]).map_err(fail)?;
        if let Some(bad) = gemm_check(gz, &reference, |v| v.to_f64()) {
            return Err(Failed::from(format!(
                "{what} ({path:?}), batch {z}: {bad:?}"
            )));
        }
    }
    Ok(())
}

/// Every layout, input and output type with operands that are nowhere
/// 16-byte aligned (a start one or three elements in, odd leading
/// dimensions, odd batch strides) stays on the tensor cores, the operands
/// staged into aligned rows, and is right batch by batch; shapes grow and
/// shrink between calls, so the staging buffers are regrown and reused.
pub(super) fn gemm_any_alignment(gpu: &Gpu) -> Result<(), Failed> {
    let cases = [
        ((37, 45, 29), 3, 1, 2),
        ((33, 17, 9), 1, 1, 1),
        ((130, 70, 67), 1, 0, 1),
        ((9, 200, 150), 5, 3, 2),
    ];
    // The simulator's budget: the two small cases.
    let cases = &cases[..if simulated(gpu) { 2 } else { cases.len() }];
    for (i, &(mnk, pad, a_off, batches)) in cases.iter().enumerate() {
        for (j, &ops) in LAYOUTS.iter().enumerate() {
            let case = DeviceCase {
                mnk,
                ops,
                pad,
                a_off,
                batches,
                ab: (1.5, 0.0),
                seed: 100 + 10 * (4 * i + j) as u64,
            };
            let seeded = |d| DeviceCase {
                seed: case.seed + d,
                ..case
            };
            device_case::<bf16, f32>(gpu, &case, (bf16::from_f32, |x| x))?;
            device_case::<f16, f16>(gpu, &seeded(3), (f16::from_f32, f16::from_f32))?;
            device_case::<f32, f32>(gpu, &seeded(6), (|x| x, |x| x))?;
        }
    }
    Ok(())
}

/// Deep-k and skinny products (few tiles of C, long k), where the wgmma
/// plan splits k across the SMs (f32 partial products in a workspace,
/// summed with alpha and beta by `gemm_split_reduce_*`), in every layout and
/// output type, with batches and one unaligned case; each within the f64
/// bound. (On the simulator the same calls run on mma.sync, smaller.)
pub(super) fn gemm_deep_k(gpu: &Gpu) -> Result<(), Failed> {
    let cases: &[((usize, usize, usize), usize, usize)] = if simulated(gpu) {
        &[((40, 24, 320), 0, 2), ((17, 9, 400), 1, 1)]
    } else {
        &[
            ((200, 300, 3000), 0, 1),
            ((64, 520, 1500), 0, 2),
            ((129, 17, 4100), 0, 1),
            ((1000, 100, 9000), 1, 1),
        ]
    };
    for (i, &(mnk, pad, batches)) in cases.iter().enumerate() {
        for (j, &ops) in LAYOUTS.iter().enumerate() {
            let case = DeviceCase {
                mnk,
                ops,
                pad,
                a_off: 0,
                batches,
                ab: (-1.0, 0.5),
                seed: 500 + 10 * (4 * i + j) as u64,
            };
            let seeded = |d| DeviceCase {
                seed: case.seed + d,
                ..case
            };
            device_case::<bf16, f32>(gpu, &case, (bf16::from_f32, |x| x))?;
            device_case::<f16, f16>(gpu, &seeded(3), (f16::from_f32, f16::from_f32))?;
            device_case::<bf16, bf16>(gpu, &seeded(5), (bf16::from_f32, bf16::from_f32))?;
        }
    }
    Ok(())
}

/// The wgmma plan's split-k choice on the GPU: a deep-k product is split
/// (more than one split on any GPU of fewer than 4 tiles a multiprocessor),
/// and every forced split count (1, 2, 7, and more than k has stages) gives
/// the same product within the bound, with beta, in a batch of 2.
pub(super) fn gemm_wgmma_split_counts(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::gemm_wgmma::WgmmaGemmExt;
    let (m, n, k, batches) = (130, 264, 2000, 2);
    let mut shape = GemmShape::with_ops(m, n, k, Op::N, Op::N);
    shape.batches = batches;
    let (a, b) = (
        random(batches * m, k, 70, bf16::from_f32),
        random(batches * k, n, 71, bf16::from_f32),
    );
    let c0 = random(batches * m, n, 72, |x| x);
    let flat = |x: &Array2<bf16>| x.iter().map(|&v| GemmInput::to_dev(v)).collect::<Vec<_>>();
    let da = gpu.to_device(&flat(&a)).map_err(fail)?;
    let db = gpu.to_device(&flat(&b)).map_err(fail)?;
    for forced in [None, Some(1), Some(2), Some(7), Some(1000)] {
        let mut dc = gpu
            .to_device(c0.as_slice().ok_or("layout")?)
            .map_err(fail)?;
        let mut plan = gpu
            .gemm_wgmma_plan::<bf16, f32>(&shape, 0.75, &da, &db, -2.0, &mut dc)
            .map_err(fail)?;
        match forced {
            None => ensure(plan.splits() > 1, || format!("not split: {plan:?}"))?,
            Some(s) => plan.set_splits(s),
        }
        let what = format!("{forced:?}: {plan:?}");
        plan.launch().map_err(fail)?;
        let got = dc.to_vec().map_err(fail)?;
        for z in 0..batches {
            let reference = gemm_reference(
                0.75,
                a.slice(s![z * m..(z + 1) * m, ..]),
                b.slice(s![z * k..(z + 1) * k, ..]),
                -2.0,
                c0.slice(s![z * m..(z + 1) * m, ..]),
            );
            let gz =
                ArrayView2::from_shape((m, n), &got[z * m * n..(z + 1) * m * n]).map_err(fail)?;
            if let Some(bad) = gemm_check(gz, &reference, |v| v as f64) {
                return Err(Failed::from(format!("{what}, batch {z}: {bad:?}")));
            }
        }
    }
    Ok(())
}

/// Both wgmma epilogues (registers, and TMA through shared memory) in the
/// layouts NN and NT, f32 and bf16 output, two batches, edges past the
/// tiles (m = 300, n = 520; 136 × 264 on the simulator), with a padded
/// leading dimension of C, one split of k or two: every element of each
/// batch's `m × n` against the f64 reference, the padding columns
/// (poisoned with NaN) untouched, and the route asserted: C through the f32
/// workspace and the reduction with two splits or an odd ldc (the
/// workspace stored by the chosen epilogue), else the TMA epilogue where C
/// allows it (`beta = 0`, ldc 16-byte aligned) and the register one
/// otherwise.
pub(super) fn gemm_wgmma_epilogues(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::gemm_wgmma::{WgmmaEpilogue, WgmmaGemmExt};
    fn run<O: GemmOutput<bf16> + Copy>(gpu: &Gpu, from: fn(f32) -> O) -> Result<(), Failed> {
        // On the simulator (which runs the kernel's own code) a smaller
        // shape with the same edges: a partial second tile row, whose
        // second consumer's rows all lie past m, and a partial column tile.
        let (m, n, k, batches) = if simulated(gpu) {
            (136, 264, 128, 2)
        } else {
            (300, 520, 192, 2)
        };
        let flat = |x: &Array2<bf16>| x.iter().map(|&v| GemmInput::to_dev(v)).collect::<Vec<_>>();
        for (op_a, op_b) in [(Op::N, Op::N), (Op::N, Op::T)] {
            let cases = [
                (8, 0.0f32, 1),
                (1, 0.0, 1),
                (8, 0.5, 1),
                (2, 0.0, 1),
                (1, 0.5, 1),
                (8, 0.0, 2),
                (8, 0.5, 2),
            ];
            for (pad, beta, splits) in cases {
                let mut shape = GemmShape::with_ops(m, n, k, op_a, op_b);
                shape.batches = batches;
                shape.ldc = n + pad;
                shape.stride_c = m * shape.ldc;
                let (a_rows, a_cols) = shape.a_stored();
                let (b_rows, b_cols) = shape.b_stored();
                let a = random(batches * a_rows, a_cols, 80, bf16::from_f32);
                let b = random(batches * b_rows, b_cols, 81, bf16::from_f32);
                let c0 = random(batches * m, shape.ldc, 82, |x: f32| x).mapv(from);
                let da = gpu.to_device(&flat(&a)).map_err(fail)?;
                let db = gpu.to_device(&flat(&b)).map_err(fail)?;
                for epilogue in [WgmmaEpilogue::Registers, WgmmaEpilogue::Tma] {
                    // The padding columns hold NaN: a write there shows.
                    let mut c = c0.clone();
                    c.slice_mut(s![.., n..]).fill(from(f32::NAN));
                    let dev: Vec<O::Dev> = c.iter().map(|&v| v.to_dev()).collect();
                    let mut dc = gpu.to_device(&dev).map_err(fail)?;
                    let mut plan = gpu
                        .gemm_wgmma_plan::<bf16, O>(&shape, 0.5, &da, &db, beta, &mut dc)
                        .map_err(fail)?;
                    plan.set_splits(splits);
                    plan.set_epilogue(epilogue);
                    let through_workspace = splits > 1 || !shape.ldc.is_multiple_of(2);
                    let tma_allowed =
                        beta == 0.0 && (shape.ldc * size_of::<O::Dev>()).is_multiple_of(16);
                    let want =
                        if through_workspace || (epilogue == WgmmaEpilogue::Tma && tma_allowed) {
                            epilogue
                        } else {
                            WgmmaEpilogue::Registers
                        };
                    let what = format!(
                        "{op_a:?}{op_b:?} {} ldc {} beta {beta} splits {splits}: {plan:?}",
                        O::NAME,
                        shape.ldc
                    );
                    ensure(
                        plan.splits() == splits
                            && plan.c_through_workspace() == through_workspace
                            && plan.epilogue_used() == want,
                        || {
                            format!(
                                "{what}: not {splits} splits, through the workspace {through_workspace}, {want:?}"
                            )
                        },
                    )?;
                    plan.launch().map_err(fail)?;
                    let got: Vec<O> = dc
                        .to_vec()
                        .map_err(fail)?
                        .into_iter()
                        .map(O::from_dev)
                        .collect();
                    let got =
                        Array2::from_shape_vec((batches * m, shape.ldc), got).map_err(fail)?;
                    for z in 0..batches {
                        let rows = z * m..(z + 1) * m;
                        let az = a.slice(s![z * a_rows..(z + 1) * a_rows, ..]);
                        let az = if op_a == Op::T {
                            az.reversed_axes()
                        } else {
                            az
                        };
                        let bz = b.slice(s![z * b_rows..(z + 1) * b_rows, ..]);
                        let bz = if op_b == Op::T {
                            bz.reversed_axes()
                        } else {
                            bz
                        };
                        let reference =
                            gemm_reference(0.5, az, bz, beta, c0.slice(s![rows.clone(), ..n]));
                        let gz = got.slice(s![rows.clone(), ..n]);
                        if let Some(bad) = gemm_check(gz, &reference, |v| v.to_f64()) {
                            return Err(Failed::from(format!("{what}, batch {z}: {bad:?}")));
                        }
                        let pad_written = got
                            .slice(s![rows, n..])
                            .iter()
                            .any(|v| !v.to_f64().is_nan());
                        ensure(!pad_written, || {
                            format!("{what}, batch {z}: a padding column written")
                        })?;
                    }
                }
            }
        }
        Ok(())
    }
    run::<f32>(gpu, |x| x)?;
    run::<bf16>(gpu, bf16::from_f32)
}

/// The on-device API queued back to back without a wait between (NT, the
/// wgmma kernel's layout on an H100, whose tensor maps are copied into the
/// module before each launch): the same buffers with new data, other
/// buffers of another shape, and buffers freed and allocated again (often
/// at the same addresses) with another shape; every result is right.
pub(super) fn gemm_reused_and_reallocated_buffers(gpu: &Gpu) -> Result<(), Failed> {
    let flat = |x: &Array2<bf16>| x.iter().map(|&v| GemmInput::to_dev(v)).collect::<Vec<_>>();
    // (m, n, k, seed): A m × k, B stored n × k.
    let run = |cases: &[(usize, usize, usize, u64)]| -> Result<Vec<String>, Failed> {
        let mut queued = Vec::new();
        let mut addresses = Vec::new();
        for &(m, n, k, seed) in cases {
            let (a, bt) = (
                random(m, k, seed, bf16::from_f32),
                random(n, k, seed + 1, bf16::from_f32),
            );
            let da = gpu.to_device(&flat(&a)).map_err(fail)?;
            let db = gpu.to_device(&flat(&bt)).map_err(fail)?;
            let mut dc = gpu.zeroed::<f32>(m * n).map_err(fail)?;
            let shape = GemmShape::with_ops(m, n, k, Op::N, Op::T);
            let path = gpu
                .gemm_on_device::<bf16, f32>(&shape, 1.0, &da, &db, 0.0, &mut dc)
                .map_err(fail)?;
            let want = if simulated(gpu) {
                GemmPath::MmaSync
            } else {
                gpu.gemm_path::<bf16, f32>(&shape).map_err(fail)?
            };
            ensure(path == want, || {
                format!("{m}x{n}x{k}: path {path:?}, want {want:?}")
            })?;
            // The same buffers with new data, queued before the first has run.
            let (a2, bt2) = (
                random(m, k, seed + 2, bf16::from_f32),
                random(n, k, seed + 3, bf16::from_f32),
            );
            let mut da = da;
            let mut db = db;
            let mut dc2 = gpu.zeroed::<f32>(m * n).map_err(fail)?;
            // The copies are ordered after the first GEMM (the Gpu's stream is
            // ordered with the synchronous copies).
            da.copy_from(&flat(&a2)).map_err(fail)?;
            db.copy_from(&flat(&bt2)).map_err(fail)?;
            gpu.gemm_on_device::<bf16, f32>(&shape, 1.0, &da, &db, 0.0, &mut dc2)
                .map_err(fail)?;
            addresses.push(format!(
                "{m}x{n}x{k} A at {:#x}",
                da.as_device_ptr().as_raw()
            ));
            queued.push((m, n, k, a, bt, dc, a2, bt2, dc2, da, db));
        }
        gpu.synchronize("gemm").map_err(fail)?;
        for (m, n, k, a, bt, dc, a2, bt2, dc2, _, _) in &queued {
            for (what, a, bt, dc) in [("first", a, bt, dc), ("new data", a2, bt2, dc2)] {
                let mut got = vec![0f32; m * n];
                dc.copy_to(&mut got[..]).map_err(fail)?;
                let got = Array2::from_shape_vec((*m, *n), got).map_err(fail)?;
                let zero = Array2::<f32>::zeros((*m, *n));
                let reference = gemm_reference(1.0, a.view(), bt.t(), 0.0, zero.view());
                if let Some(bad) = gemm_check(got.view(), &reference, |v| v as f64) {
                    return Err(Failed::from(format!("{m}x{n}x{k}, {what}: {bad:?}")));
                }
            }
        }
        Ok(addresses)
    };
    let (big, small) = if simulated(gpu) {
        ((40, 72, 48), (24, 16, 80))
    } else {
        ((300, 520, 264), (136, 264, 72))
    };
    let first = run(&[(big.0, big.1, big.2, 80), (small.0, small.1, small.2, 90)])?;
    // Freed above; allocated again, with the shapes swapped.
    let again = run(&[(small.1, small.0, small.2, 100), (big.1, big.0, big.2, 110)])?;
    eprintln!("gemm_reused_and_reallocated_buffers: {first:?}, then {again:?}");
    Ok(())
}

/// More operand pairs than the wgmma launcher keeps tensor maps for
/// (`TENSOR_MAP_SLOTS`, on an H100), queued back to back without a wait:
/// 80 pairs (A and B at other offsets of two buffers), then again in reverse
/// order with alpha = 2, so that the second pass first finds the maps it
/// holds and then writes slots whose last launches may still be in flight;
/// every result is right.
pub(super) fn gemm_many_operand_pairs_in_flight(gpu: &Gpu) -> Result<(), Failed> {
    const PAIRS: usize = 80;
    let (m, n, k) = if simulated(gpu) {
        (16, 8, 32)
    } else {
        (72, 136, 96)
    };
    // 16 bytes between starts: aligned, a key of its own.
    let step = 8;
    let a = random(m + PAIRS * step / k + 1, k, 120, bf16::from_f32);
    let b = random(n + PAIRS * step / k + 1, k, 121, bf16::from_f32);
    let (a, b) = (a.into_raw_vec_and_offset().0, b.into_raw_vec_and_offset().0);
    let dev = |x: &[bf16]| x.iter().map(|&v| GemmInput::to_dev(v)).collect::<Vec<_>>();
    let (da, db) = (dev(&a), dev(&b));
    let da = gpu.to_device(&da).map_err(fail)?;
    let db = gpu.to_device(&db).map_err(fail)?;
    let shape = GemmShape::with_ops(m, n, k, Op::N, Op::T);
    let mut results = Vec::new();
    for (pass, alpha) in [(0, 1.0f32), (1, 2.0)] {
        let order: Vec<usize> = if pass == 0 {
            (0..PAIRS).collect()
        } else {
            (0..PAIRS).rev().collect()
        };
        for i in order {
            let (a0, b0) = (i * step, (PAIRS - 1 - i) * step);
            let mut dc = gpu.zeroed::<f32>(m * n).map_err(fail)?;
            gpu.gemm_on_device::<bf16, f32>(
                &shape,
                alpha,
                &da.index(a0..a0 + m * k),
                &db.index(b0..b0 + n * k),
                0.0,
                &mut dc,
            )
            .map_err(fail)?;
            results.push((i, alpha, a0, b0, dc));
        }
    }
    gpu.synchronize("gemm").map_err(fail)?;
    for (i, alpha, a0, b0, dc) in &results {
        let av = Array2::from_shape_vec((m, k), a[*a0..a0 + m * k].to_vec()).map_err(fail)?;
        let bv = Array2::from_shape_vec((n, k), b[*b0..b0 + n * k].to_vec()).map_err(fail)?;
        let mut got = vec![0f32; m * n];
        dc.copy_to(&mut got[..]).map_err(fail)?;
        let got = Array2::from_shape_vec((m, n), got).map_err(fail)?;
        let zero = Array2::<f32>::zeros((m, n));
        let reference = gemm_reference(*alpha, av.view(), bv.t(), 0.0, zero.view());
        if let Some(bad) = gemm_check(got.view(), &reference, |v| v as f64) {
            return Err(Failed::from(format!(
                "pair {i} (A at {a0}, B at {b0}), alpha {alpha}: {bad:?}"
            )));
        }
    }
    Ok(())
}

/// The wgmma plan refuses, with a typed error naming its kernel and the
/// argument, before the driver sees a tensor map: a leading dimension past
/// the 32-bit limit (A's row stride 2^40 bytes, which TMA could not take
/// either), a leading dimension of `usize::MAX` (whose extent overflows),
/// more batches than the grid holds, and a layout wgmma does not read
/// (tf32 NN).
pub(super) fn gemm_wgmma_refusals(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::gemm_wgmma::WgmmaGemmExt;
    let (m, n, k) = (2, 256, 64);
    let a = gpu
        .zeroed::<<bf16 as GemmInput>::Dev>(m * k)
        .map_err(fail)?;
    let b = gpu
        .zeroed::<<bf16 as GemmInput>::Dev>(n * k)
        .map_err(fail)?;
    let mut c = gpu.zeroed::<f32>(m * n).map_err(fail)?;
    let nt = GemmShape::with_ops(m, n, k, Op::N, Op::T);
    for (what, shape, names) in [
        ("lda 2^39", GemmShape { lda: 1 << 39, ..nt }, "lda"),
        (
            "ldc usize::MAX",
            GemmShape {
                ldc: usize::MAX,
                ..nt
            },
            "ldc",
        ),
        (
            "batches 65,536",
            GemmShape {
                batches: 65_536,
                stride_a: 0,
                stride_b: 0,
                stride_c: 0,
                ..nt
            },
            "batches",
        ),
    ] {
        let e = gpu
            .gemm_wgmma_plan::<bf16, f32>(&shape, 1.0, &a, &b, 0.0, &mut c)
            .err()
            .ok_or_else(|| format!("{what} accepted"))?;
        let text = e.to_string();
        ensure(
            matches!(e, cuda_kernels::Error::InvalidInput { .. })
                && text.contains("gemm_wgmma_bf16_f32_nt")
                && text.contains(names),
            || format!("{what}: not a typed refusal naming the kernel and {names}: {text}"),
        )?;
    }
    let af = gpu.zeroed::<f32>(m * k).map_err(fail)?;
    let bf = gpu.zeroed::<f32>(n * k).map_err(fail)?;
    let e = gpu
        .gemm_wgmma_plan::<f32, f32>(&GemmShape::dense(m, n, k), 1.0, &af, &bf, 0.0, &mut c)
        .err()
        .ok_or("tf32 NN accepted by the wgmma plan")?;
    ensure(
        matches!(e, cuda_kernels::Error::InvalidInput { .. }) && e.to_string().contains("K-major"),
        || format!("tf32 NN: {e}"),
    )
}

/// NaN and infinity in A and B propagate as the exact product says (NaN
/// where a NaN or ∞·0 or ∞−∞ meets, ∞ of its sign elsewhere); a NaN in C
/// with beta = 0 does not.
pub(super) fn gemm_nan_and_infinity(gpu: &Gpu) -> Result<(), Failed> {
    let (m, n, k) = (48, 40, 64);
    let mut a = random(m, k, 40, bf16::from_f32);
    let mut b = random(k, n, 41, bf16::from_f32);
    a[(3, 5)] = bf16::NAN;
    a[(7, 9)] = bf16::INFINITY;
    a[(20, 1)] = bf16::NEG_INFINITY;
    b[(9, 2)] = bf16::ZERO;
    b[(30, 11)] = bf16::INFINITY;
    let mut c = Array2::<f32>::zeros((m, n));
    c[(0, 0)] = f32::NAN;
    gemm_case(gpu, 1.0, a.view(), b.view(), 0.0, &c)?;
    Ok(())
}

/// Ours and `cublasGemmEx` on the same bf16 operands with NaN and
/// infinities (NN and TN, f32 output): NaN in the same places, the same
/// infinities, every finite element of both within the f64 bound.
pub(super) fn gemm_agrees_with_cublas(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::cublas::Cublas;
    let lib = Cublas::find().map_err(|why| Failed::from(format!("cuBLAS missing: {why}")))?;
    let cublas = Cublas::new(gpu, lib).map_err(fail)?;
    let (m, n, k) = (200, 136, 264);
    for op_a in [Op::N, Op::T] {
        let stored = if op_a == Op::N { (m, k) } else { (k, m) };
        let mut a = random(stored.0, stored.1, 70, bf16::from_f32);
        let mut b = random(k, n, 71, bf16::from_f32);
        a[(3, 5)] = bf16::NAN;
        a[(7, 9)] = bf16::INFINITY;
        a[(20, 1)] = bf16::NEG_INFINITY;
        b[(9, 2)] = bf16::ZERO;
        b[(30, 11)] = bf16::INFINITY;
        b[(1, 100)] = bf16::NEG_INFINITY;
        let flat = |x: &Array2<bf16>| x.iter().map(|&v| GemmInput::to_dev(v)).collect::<Vec<_>>();
        let da = gpu.to_device(&flat(&a)).map_err(fail)?;
        let db = gpu.to_device(&flat(&b)).map_err(fail)?;
        let shape = GemmShape::with_ops(m, n, k, op_a, Op::N);
        let av = if op_a == Op::N { a.view() } else { a.t() };
        let zero = Array2::<f32>::zeros((m, n));
        let reference = gemm_reference(1.0, av, b.view(), 0.0, zero.view());
        let mut results = Vec::new();
        for ours in [true, false] {
            let mut dc = gpu.zeroed::<f32>(m * n).map_err(fail)?;
            if ours {
                gpu.gemm_on_device::<bf16, f32>(&shape, 1.0, &da, &db, 0.0, &mut dc)
                    .map_err(fail)?;
            } else {
                cublas
                    .gemm_ex::<bf16, f32>(&shape, 1.0, &da, &db, 0.0, &mut dc)
                    .map_err(fail)?;
            }
            gpu.synchronize("gemm").map_err(fail)?;
            let mut c = vec![0f32; m * n];
            dc.copy_to(&mut c[..]).map_err(fail)?;
            let c = Array2::from_shape_vec((m, n), c).map_err(fail)?;
            if let Some(bad) = gemm_check(c.view(), &reference, |v| v as f64) {
                return Err(Failed::from(format!(
                    "{} ({op_a:?}N): {bad:?}",
                    if ours { "ours" } else { "cuBLAS" }
                )));
            }
            results.push(c);
        }
        let classes = |c: &Array2<f32>| {
            c.mapv(|v| {
                if v.is_nan() {
                    2
                } else if v.is_infinite() {
                    v.signum() as i32 * 3
                } else {
                    0
                }
            })
        };
        ensure(classes(&results[0]) == classes(&results[1]), || {
            format!("{op_a:?}N: NaN/infinity places differ from cuBLAS")
        })?;
    }
    Ok(())
}

/// The bound is tight enough to matter: the f32 sum in k order passes it,
/// and the same sum with one k-slab of 16 dropped fails it, for every
/// input type.
pub(super) fn gemm_bound_catches_a_dropped_k_slab() -> Result<(), Failed> {
    fn case<I: GemmInput, O: GemmOutput<I>>(
        from: impl Fn(f32) -> I,
        to_out: impl Fn(f32) -> O,
    ) -> Result<(), Failed> {
        let (m, n, k) = (32, 32, 512);
        let (a, b) = (random(m, k, 50, &from), random(k, n, 51, &from));
        let c = Array2::from_elem((m, n), to_out(0.0));
        let reference = gemm_reference(1.0, a.view(), b.view(), 0.0, c.view());
        let sum = |skip: Option<usize>| {
            Array2::from_shape_fn((m, n), |(i, j)| {
                let mut acc = 0f32;
                for kk in 0..k {
                    if skip.is_some_and(|s| kk / 16 == s) {
                        continue;
                    }
                    let x = |v: I| {
                        let f = v.to_f64() as f32;
                        // tf32: the tensor core's input rounding.
                        if I::NAME == "tf32" {
                            f32::from_bits((f.to_bits() + 0x1000) & 0xffff_e000)
                        } else {
                            f
                        }
                    };
                    acc = x(a[(i, kk)]).mul_add(x(b[(kk, j)]), acc);
                }
                to_out(acc)
            })
        };
        ensure(
            gemm_check(sum(None).view(), &reference, |v| v.to_f64()).is_none(),
            || format!("{}: the f32 sum fails its own bound", I::NAME),
        )?;
        ensure(
            gemm_check(sum(Some(7)).view(), &reference, |v| v.to_f64()).is_some(),
            || format!("{}: a dropped k-slab passes the bound", I::NAME),
        )
    }
    case::<bf16, f32>(bf16::from_f32, |x| x)?;
    case::<bf16, bf16>(bf16::from_f32, bf16::from_f32)?;
    case::<f16, f16>(f16::from_f32, f16::from_f32)?;
    case::<f32, f32>(|x| x, |x| x)
}

/// Inner dimensions that differ, a zero dimension, a leading dimension
/// shorter than a row, a dimension past 2^31 and a short buffer: errors
/// naming the kernel, before any launch.
pub(super) fn gemm_refusals(gpu: &Gpu) -> Result<(), Failed> {
    let a = random(4, 5, 60, bf16::from_f32);
    let b = random(6, 3, 61, bf16::from_f32);
    let mut c = Array2::<f32>::zeros((4, 3));
    let named = |e: cuda_kernels::Error, what: &str| -> Result<(), Failed> {
        let text = e.to_string();
        ensure(
            text.contains("gemm_mma_bf16_f32") && text.contains(what),
            || format!("{what}: {text}"),
        )
    };
    let e = gpu
        .gemm(1.0, a.view(), b.view(), 0.0, c.view_mut())
        .err()
        .ok_or("inner dims accepted")?;
    named(e, "inner dimensions differ")?;
    let empty = Array2::from_elem((0, 5), bf16::ZERO);
    let b5 = random(5, 3, 62, bf16::from_f32);
    let mut c0 = Array2::<f32>::zeros((0, 3));
    let e = gpu
        .gemm(1.0, empty.view(), b5.view(), 0.0, c0.view_mut())
        .err()
        .ok_or("empty accepted")?;
    named(e, "zero dimension")?;
    let name = "gemm_mma_bf16_f32";
    let mut shape = GemmShape::dense(4, 3, 5);
    shape.lda = 4;
    named(
        shape
            .check(name, (100, 100, 100))
            .err()
            .ok_or("short lda accepted")?,
        "shorter than a row",
    )?;
    let huge = GemmShape::dense(1 << 31, 8, 8);
    named(
        huge.check(name, (usize::MAX, usize::MAX, usize::MAX))
            .err()
            .ok_or("2^31 accepted")?,
        "32-bit limit",
    )?;
    let shape = GemmShape::dense(4, 3, 5);
    named(
        shape
            .check(name, (19, 15, 12))
            .err()
            .ok_or("short A accepted")?,
        "A holds 19",
    )
}

/// `C = alpha · op(A) · op(B) + beta · C` of one batch through the wgmma
/// plan, checked against the f64 reference and its bound; the plan's
/// kernel must be the wgmma entry of the layout. `beta = -0.5`, the tiles
/// the plan's.
fn wgmma_case<I: GemmInput, O: GemmOutput<I>>(
    gpu: &Gpu,
    dims: (usize, usize, usize),
    ops: (Op, Op),
    seed: u64,
    convert: (impl Fn(f32) -> I + Copy, impl Fn(f32) -> O + Copy),
) -> Result<(), Failed> {
    wgmma_case_with(gpu, dims, ops, seed, convert, WgmmaCase::default())
}

/// What a [`wgmma_case_with`] sets or asserts beyond the product.
#[derive(Clone, Copy)]
struct WgmmaCase {
    beta: f32,
    /// The tiles' width set on the plan (`set_tile_n`), else the plan's.
    tile_n: Option<u32>,
    /// The width the plan must have chosen by itself.
    plan_tile_n: Option<u32>,
    /// Splits of k set on the plan.
    splits: Option<u32>,
    /// The epilogue the launch must use.
    epilogue: Option<cuda_kernels::gemm_wgmma::WgmmaEpilogue>,
}

impl Default for WgmmaCase {
    fn default() -> Self {
        Self {
            beta: -0.5,
            tile_n: None,
            plan_tile_n: None,
            splits: None,
            epilogue: None,
        }
    }
}

/// [`wgmma_case`] with `case`'s settings and assertions: the kernel the
/// one of the launch's tile width (`gemm_wgmma_n128_*` for 128).
fn wgmma_case_with<I: GemmInput, O: GemmOutput<I>>(
    gpu: &Gpu,
    (m, n, k): (usize, usize, usize),
    (op_a, op_b): (Op, Op),
    seed: u64,
    (from, to_out): (impl Fn(f32) -> I + Copy, impl Fn(f32) -> O + Copy),
    case: WgmmaCase,
) -> Result<(), Failed> {
    use cuda_kernels::gemm_wgmma::WgmmaGemmExt;
    let shape = GemmShape::with_ops(m, n, k, op_a, op_b);
    let ((ra, ca), (rb, cb)) = (shape.a_stored(), shape.b_stored());
    let (a, b) = (random(ra, ca, seed, from), random(rb, cb, seed + 1, from));
    let mut rng = Rng::new(seed + 2);
    let c0 = Array2::from_shape_simple_fn((m, n), || to_out(rng.uniform() as f32 * 2.0 - 1.0));
    let dev = |x: &Array2<I>| x.iter().map(|&v| v.to_dev()).collect::<Vec<_>>();
    let da = gpu.to_device(&dev(&a)).map_err(fail)?;
    let db = gpu.to_device(&dev(&b)).map_err(fail)?;
    let mut dc = gpu
        .to_device(&c0.iter().map(|&v| v.to_dev()).collect::<Vec<_>>())
        .map_err(fail)?;
    let (alpha, beta) = (0.75, case.beta);
    let what = format!(
        "{} -> {} {m}x{n}x{k} {op_a:?}{op_b:?} beta {beta}",
        I::NAME,
        O::NAME
    );
    let mut plan = gpu
        .gemm_wgmma_plan::<I, O>(&shape, alpha, &da, &db, beta, &mut dc)
        .map_err(|e| format!("{what}: {e}"))?;
    if let Some(want) = case.plan_tile_n {
        ensure(plan.tile_n() == want, || {
            format!("{what}: the plan chose {plan:?}, not {want} wide")
        })?;
    }
    if let Some(tile_n) = case.tile_n {
        plan.set_tile_n(tile_n)
            .map_err(|e| format!("{what}: {e}"))?;
    }
    if let Some(splits) = case.splits {
        plan.set_splits(splits);
        ensure(plan.splits() == splits, || format!("{what}: {plan:?}"))?;
    }
    let what = format!("{what}: {plan:?}");
    let kernel = plan.kernel_name();
    let narrow = kernel.starts_with("gemm_wgmma_n128_");
    ensure(
        kernel.starts_with("gemm_wgmma_") && narrow == (plan.tile_n() == 128),
        || format!("{what}: {kernel}"),
    )?;
    if let Some(want) = case.epilogue {
        ensure(plan.epilogue_used() == want, || {
            format!("{what}: not the {want:?} epilogue")
        })?;
    }
    plan.launch().map_err(|e| format!("{what}: {e}"))?;
    let got: Vec<O> = dc
        .to_vec()
        .map_err(fail)?
        .into_iter()
        .map(O::from_dev)
        .collect();
    fn stored<I>(x: &Array2<I>, op: Op) -> ArrayView2<'_, I> {
        match op {
            Op::N => x.view(),
            Op::T => x.view().reversed_axes(),
        }
    }
    let reference = gemm_reference(alpha, stored(&a, op_a), stored(&b, op_b), beta, c0.view());
    let got = ArrayView2::from_shape((m, n), &got).map_err(fail)?;
    match gemm_check(got, &reference, |v| v.to_f64()) {
        Some(bad) => Err(format!("{what} ({kernel}): {bad:?}").into()),
        None => Ok(()),
    }
}

/// The Hopper wgmma kernel through its own code, on the simulator too
/// (its mbarriers, TMA boxes with the 128-byte swizzle and zero fill, and
/// wgmma from K- and MN-major descriptors are modelled there): every
/// layout of bf16 → f32 on one 128 × 256 tile with two k-stages (the wide
/// tile set: the plan would take two narrow ones), a shape past a tile in
/// m and n with a k tail (the boxes' zero fill), the 128 × 128 tiles as the
/// plan chooses them (136 × 200 × 120: 4 narrow tiles, each partial in m,
/// n and k, against 2 wide; the k tail in the last k step) in every layout, bf16 and f16, with both
/// epilogues, and through two splits of k; f16 → f16 and tf32 (NT), each
/// against the f64 reference and its bound.
pub(super) fn gemm_wgmma_runs_its_own_code(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::gemm_wgmma::WgmmaEpilogue;
    let wide = WgmmaCase {
        tile_n: Some(256),
        ..WgmmaCase::default()
    };
    for (i, &ops) in LAYOUTS.iter().enumerate() {
        wgmma_case_with::<bf16, f32>(
            gpu,
            (128, 256, 128),
            ops,
            900 + 10 * i as u64,
            (bf16::from_f32, |x| x),
            wide,
        )?;
    }
    for (i, &ops) in [(Op::N, Op::T), (Op::T, Op::N)].iter().enumerate() {
        wgmma_case_with::<bf16, f32>(
            gpu,
            (136, 264, 72),
            ops,
            950 + 10 * i as u64,
            (bf16::from_f32, |x| x),
            wide,
        )?;
    }
    // The narrow tiles, chosen by the plan: the register epilogue (beta ≠
    // 0) and the TMA one (beta = 0, ldc 200 · 4 bytes 16-byte aligned).
    for (i, &ops) in LAYOUTS.iter().enumerate() {
        for (beta, epilogue) in [(-0.5, WgmmaEpilogue::Registers), (0.0, WgmmaEpilogue::Tma)] {
            let case = WgmmaCase {
                beta,
                plan_tile_n: Some(128),
                epilogue: Some(epilogue),
                ..WgmmaCase::default()
            };
            let seed = 1000 + 10 * i as u64;
            wgmma_case_with::<bf16, f32>(
                gpu,
                (136, 200, 120),
                ops,
                seed,
                (bf16::from_f32, |x| x),
                case,
            )?;
            if i % 2 == 1 {
                wgmma_case_with::<f16, f32>(
                    gpu,
                    (136, 200, 120),
                    ops,
                    seed + 5,
                    (f16::from_f32, |x| x),
                    case,
                )?;
            }
        }
    }
    // Two splits of k on the narrow tiles: their f32 partials through the
    // workspace (stored by TMA) and the reduction.
    wgmma_case_with::<bf16, f32>(
        gpu,
        (136, 200, 128),
        (Op::N, Op::N),
        1050,
        (bf16::from_f32, |x| x),
        WgmmaCase {
            plan_tile_n: Some(128),
            splits: Some(2),
            epilogue: Some(WgmmaEpilogue::Tma),
            ..WgmmaCase::default()
        },
    )?;
    wgmma_case::<f16, f16>(
        gpu,
        (128, 256, 64),
        (Op::N, Op::T),
        970,
        (f16::from_f32, f16::from_f32),
    )?;
    wgmma_case::<f32, f32>(gpu, (128, 256, 64), (Op::N, Op::T), 980, (|x| x, |x| x))?;
    // The speed target (item 4): 256³ bf16 through the wgmma
    // kernel in 60 s on 2 cores.
    let start = std::time::Instant::now();
    wgmma_case::<bf16, f32>(
        gpu,
        (256, 256, 256),
        (Op::N, Op::T),
        990,
        (bf16::from_f32, |x| x),
    )?;
    eprintln!(
        "wgmma GEMM 256³ bf16, with its f64 check: {:?}",
        start.elapsed()
    );
    Ok(())
}
