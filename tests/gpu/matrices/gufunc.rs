//! `gufunc_matmul_i64`: chosen and random broadcast batches against the CPU,
//! and the two CPU references agree.
use super::*;

fn randint(shape: &[usize], rng: &mut Rng) -> ArrayD<i64> {
    ArrayD::from_shape_simple_fn(IxDyn(shape), || rng.below(10) as i64)
}

pub(super) fn gufunc_matmul_matches_cpu(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(9);
    // The seed's 10×10, batches, broadcasting on either side, and a size
    // that is not a multiple of the block.
    for (sa, sb) in [
        (vec![10, 10], vec![10, 10]),
        (vec![1, 1], vec![1, 1]),
        (vec![4, 10, 10], vec![10, 10]),
        (vec![3, 1, 5, 7], vec![4, 7, 2]),
        (vec![2, 3, 33, 17], vec![2, 3, 17, 65]),
        (vec![1000, 3, 3], vec![1, 3, 3]),
    ] {
        let a = randint(&sa, &mut rng);
        let b = randint(&sb, &mut rng);
        let c = gpu.gufunc_matmul_i64(a.view(), b.view()).map_err(fail)?;
        let expected = gufunc_matmul_i64_cpu(a.view(), b.view()).map_err(fail)?;
        ensure(c == expected, || format!("{sa:?}·{sb:?}"))?;
    }
    // Independent of the shared plan: each batch of a plain batch equals
    // ndarray's dot.
    let a = randint(&[5, 6, 7], &mut rng);
    let b = randint(&[5, 7, 8], &mut rng);
    let c = gpu.gufunc_matmul_i64(a.view(), b.view()).map_err(fail)?;
    for z in 0..5 {
        let az = a
            .index_axis(Axis(0), z)
            .into_dimensionality::<cuda_kernels::ndarray::Ix2>()?;
        let bz = b
            .index_axis(Axis(0), z)
            .into_dimensionality::<cuda_kernels::ndarray::Ix2>()?;
        ensure(c.index_axis(Axis(0), z) == az.dot(&bz).into_dyn(), || {
            format!("batch {z}")
        })?;
    }
    // Non-contiguous (transposed core axes): copied to standard layout.
    let t = randint(&[3, 8, 6], &mut rng);
    let tv = t.view().permuted_axes(IxDyn(&[0, 2, 1]));
    let b2 = randint(&[3, 8, 4], &mut rng);
    let c = gpu.gufunc_matmul_i64(tv.clone(), b2.view()).map_err(fail)?;
    ensure(
        c == gufunc_matmul_i64_cpu(tv, b2.view()).map_err(fail)?,
        || "transposed".into(),
    )?;
    // Wrapping overflow, the same on both sides.
    let big = Array::from_elem(IxDyn(&[2, 3]), i64::MAX / 3);
    let ones = Array::from_elem(IxDyn(&[3, 2]), 7i64);
    let c = gpu
        .gufunc_matmul_i64(big.view(), ones.view())
        .map_err(fail)?;
    ensure(
        c == gufunc_matmul_i64_cpu(big.view(), ones.view()).map_err(fail)?,
        || "wrapping".into(),
    )
}

struct GufuncCase {
    a: ArrayD<i64>,
    b: ArrayD<i64>,
}

impl Debug for GufuncCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "A {:?} · B {:?}, A = {}, B = {}",
            self.a.shape(),
            self.b.shape(),
            brief(self.a.as_slice().unwrap_or(&[])),
            brief(self.b.as_slice().unwrap_or(&[]))
        )
    }
}

/// The batch shape of one operand: the last `axes` of the broadcast batch
/// shape `batch`, each kept or set to 1.
fn operand_batch(batch: &[usize], axes: usize, keep: &[bool]) -> Vec<usize> {
    let skip = batch.len() - axes.min(batch.len());
    (skip..batch.len())
        .map(|i| if keep[i] { batch[i] } else { 1 })
        .collect()
}

/// `C = A · B` with NumPy broadcasting, independently of the crate's plan:
/// both operands broadcast by ndarray to the common batch shape, one
/// `ndarray` dot per matrix.
fn gufunc_reference(a: &ArrayD<i64>, b: &ArrayD<i64>) -> ArrayD<i64> {
    let (sa, sb) = (a.shape(), b.shape());
    let (ba, bb) = (&sa[..sa.len() - 2], &sb[..sb.len() - 2]);
    let nd = ba.len().max(bb.len());
    let dim = |s: &[usize], i: usize| (i + s.len()).checked_sub(nd).map_or(1, |j| s[j]);
    let batch: Vec<usize> = (0..nd).map(|i| dim(ba, i).max(dim(bb, i))).collect();
    let count: usize = batch.iter().product();
    let (m, n, p) = (sa[sa.len() - 2], sa[sa.len() - 1], sb[sb.len() - 1]);
    let full = |core: [usize; 2]| -> Vec<usize> { batch.iter().copied().chain(core).collect() };
    let stack = |x: &ArrayD<i64>, rows: usize, cols: usize| {
        x.broadcast(IxDyn(&full([rows, cols])))
            .expect("the batch shapes broadcast")
            .as_standard_layout()
            .into_owned()
            .into_shape_with_order((count, rows, cols))
            .expect("count × rows × cols")
    };
    let (a3, b3) = (stack(a, m, n), stack(b, n, p));
    let mut c = Array3::<i64>::zeros((count, m, p));
    for z in 0..count {
        c.index_axis_mut(Axis(0), z)
            .assign(&a3.index_axis(Axis(0), z).dot(&b3.index_axis(Axis(0), z)));
    }
    c.into_shape_with_order(IxDyn(&full([m, p])))
        .expect("batch × m × p")
}

fn gufunc_cases() -> impl Strategy<Value = GufuncCase> {
    let params = (
        prop::collection::vec(1..=4usize, 0..=3),
        (0..=3usize, 0..=3usize),
        (
            prop::collection::vec(any::<bool>(), 3),
            prop::collection::vec(any::<bool>(), 3),
        ),
        (1..=12usize, 1..=12usize, 1..=12usize),
    );
    params.prop_perturb(
        |(batch, (axes_a, axes_b), (keep_a, keep_b), (m, n, p)), rng| {
            let mut d = Draw::new(rng);
            let mut shape_a = operand_batch(&batch, axes_a, &keep_a);
            let mut shape_b = operand_batch(&batch, axes_b, &keep_b);
            shape_a.extend([m, n]);
            shape_b.extend([n, p]);
            let values = -100i64..=100;
            let mut operand = |shape: Vec<usize>| {
                let len = shape.iter().product();
                ArrayD::from_shape_vec(IxDyn(&shape), d.vec(&values, len)).expect("shape")
            };
            let a = operand(shape_a);
            let b = operand(shape_b);
            GufuncCase { a, b }
        },
    )
}

/// Random batch shapes that broadcast (up to 3 batch axes of 1..=4; each
/// operand has the last 0..=3 of them, each kept or 1), m, n, p in 1..=12,
/// values in -100..=100: `gufunc_matmul_i64` equals `gufunc_matmul_i64_cpu`
/// and an independent ndarray broadcast-and-dot, exactly (48 cases).
pub(super) fn gufunc_matmul_i64_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(48, gufunc_cases(), |c| {
        let got = gpu
            .gufunc_matmul_i64(c.a.view(), c.b.view())
            .map_err(case_err)?;
        let cpu = gufunc_matmul_i64_cpu(c.a.view(), c.b.view()).map_err(case_err)?;
        let reference = gufunc_reference(&c.a, &c.b);
        prop_assert_eq!(got.shape(), reference.shape());
        prop_assert_eq!(cpu.shape(), reference.shape());
        all_same("gufunc vs gufunc_matmul_i64_cpu", &got, &cpu)?;
        all_same("gufunc vs broadcast dot", &got, &reference)
    })
}

/// CPU only: on the gufunc property's random cases, its independent
/// broadcast-and-dot reference equals `gufunc_matmul_i64_cpu` (so that a
/// disagreement in the GPU trial points at the GPU, not at the test) (48
/// cases).
pub(super) fn gufunc_references_agree() -> Result<(), Failed> {
    check(48, gufunc_cases(), |c| {
        let cpu = gufunc_matmul_i64_cpu(c.a.view(), c.b.view()).map_err(case_err)?;
        let reference = gufunc_reference(&c.a, &c.b);
        prop_assert_eq!(cpu.shape(), reference.shape());
        all_same("gufunc_matmul_i64_cpu vs broadcast dot", &cpu, &reference)
    })
}
