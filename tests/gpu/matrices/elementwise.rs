//! The elementwise kernels (sum, saxpy, lerp): every type, heads and tails
//! on sub-slices, and random arrays against the CPU.
use super::*;

pub(super) fn elementwise_sum_all_types(gpu: &Gpu) -> Result<(), Failed> {
    for &n in AWKWARD_LENGTHS {
        let mut rng = Rng::new(n as u64);
        let a: Array1<i32> = (0..n).map(|_| rng.below(100) as i32).collect();
        let b: Array1<i32> = (0..n).map(|_| rng.below(100) as i32).collect();
        let mut c = Array1::<i32>::zeros(n);
        gpu.elementwise_sum(a.view(), b.view(), c.view_mut())
            .map_err(fail)?;
        ensure(c == &a + &b, || format!("i32 n = {n}"))?;

        let a64 = a.mapv(|x| x as i64 * 1_000_000_007);
        let b64 = b.mapv(|x| x as i64 - 50);
        let mut c64 = Array1::<i64>::zeros(n);
        gpu.elementwise_sum(a64.view(), b64.view(), c64.view_mut())
            .map_err(fail)?;
        ensure(c64 == &a64 + &b64, || format!("i64 n = {n}"))?;

        let af: Array1<f32> = (0..n).map(|_| rng.normal() as f32).collect();
        let bf: Array1<f32> = (0..n).map(|_| rng.normal() as f32).collect();
        let mut cf = Array1::<f32>::zeros(n);
        gpu.elementwise_sum(af.view(), bf.view(), cf.view_mut())
            .map_err(fail)?;
        ensure(cf == &af + &bf, || format!("f32 n = {n}"))?;

        let ad = af.mapv(f64::from);
        let bd = bf.mapv(|x| f64::from(x) / 3.0);
        let mut cd = Array1::<f64>::zeros(n);
        gpu.elementwise::<sum, f64>(&[ad.view(), bd.view()], &mut [cd.view_mut()], &[])
            .map_err(fail)?;
        ensure(cd == &ad + &bd, || format!("f64 n = {n}"))?;
    }
    Ok(())
}

/// The lengths and sub-slice offsets of the vectorized kernels' boundary
/// tests: 1..=33, 2^k ± 1; every array at offset 0..=3 (the body starts at
/// a 128-byte line), at offsets that agree modulo 16 bytes only (the body
/// starts at a 16-byte boundary), or at disagreeing offsets (the element
/// path).
fn boundary_cases(gpu: &Gpu) -> Vec<(usize, [usize; 4])> {
    // 2^20 ± 1 on a GPU only: on the simulator 2^16 ± 1 is the largest.
    let large: &[usize] = if simulated(gpu) {
        &[]
    } else {
        &[(1 << 20) - 1, (1 << 20) + 1]
    };
    let lengths = (1..=33usize)
        .chain([1023, 1025, 65_535, 65_537])
        .chain(large.iter().copied());
    lengths
        .flat_map(|n| {
            [
                [0, 0, 0, 0],
                [1, 1, 1, 1],
                [2, 2, 2, 2],
                [3, 3, 3, 3],
                [1, 5, 9, 1],
                [1, 0, 2, 3],
            ]
            .into_iter()
            .map(move |o| (n, o))
        })
        .collect()
}

/// Kernel `K` on `T` over device sub-slices at `offsets` (one per array,
/// in order): exactly the CPU reference's outputs, and nothing written
/// outside the output slices.
fn elementwise_on_sub_slices<K, T>(
    gpu: &Gpu,
    n: usize,
    offsets: [usize; 4],
    value: impl Fn(usize, usize) -> T,
    scalars: &[T],
) -> Result<(), Failed>
where
    K: Elementwise<T>,
    T: cuda_kernels::matrices::ElementwiseElement<Dev = T>
        + cuda_kernels::cust::memory::DeviceCopy
        + PartialEq
        + std::fmt::Debug,
{
    use cuda_kernels::{DeviceSlice, DeviceView, DeviceViewMut};
    let ni = K::INPUTS.len();
    let arrays = ni + K::OUTPUTS.len() + K::INOUTS.len();
    let host: Vec<Vec<T>> = (0..arrays)
        .map(|k| (0..n).map(|i| value(k, i)).collect())
        .collect();
    let fill = value(99, 0);
    let mut bufs = Vec::new();
    for (k, h) in host.iter().enumerate() {
        let mut p = vec![fill; offsets[k % 4]];
        p.extend_from_slice(h);
        p.extend_from_slice(&[fill; 3]);
        bufs.push(gpu.to_device(&p).map_err(fail)?);
    }
    let range = |k: usize| offsets[k % 4]..offsets[k % 4] + n;
    let (ins, outs) = bufs.split_at_mut(ni);
    let ins: Vec<DeviceView<T>> = ins
        .iter()
        .enumerate()
        .map(|(k, b)| b.index(range(k)))
        .collect();
    let mut outs: Vec<DeviceViewMut<T>> = outs
        .iter_mut()
        .enumerate()
        .map(|(j, b)| b.index_mut(range(ni + j)))
        .collect();
    let in_refs: Vec<&DeviceSlice<T>> = ins.iter().map(|v| &**v).collect();
    let mut out_refs: Vec<&mut DeviceSlice<T>> = outs.iter_mut().map(|v| &mut **v).collect();
    gpu.elementwise_on_device::<K, T>(&in_refs, &mut out_refs, scalars)
        .map_err(fail)?;
    gpu.synchronize("test").map_err(fail)?;
    let inputs: Vec<Array1<T>> = host[..ni].iter().map(|h| Array1::from(h.clone())).collect();
    let in_views: Vec<_> = inputs.iter().map(|a| a.view()).collect();
    let mut expected: Vec<Array1<T>> = host[ni..].iter().map(|h| Array1::from(h.clone())).collect();
    let mut views: Vec<_> = expected.iter_mut().map(|e| e.view_mut()).collect();
    elementwise_cpu::<K, T>(&in_views, &mut views, scalars).map_err(fail)?;
    for (j, want) in expected.iter().enumerate() {
        let k = ni + j;
        let o = offsets[k % 4];
        let mut got = vec![fill; bufs[k].len()];
        bufs[k].copy_to(&mut got[..]).map_err(fail)?;
        ensure(got[o..o + n] == want.as_slice().unwrap_or(&[])[..], || {
            format!(
                "{}: n = {n}, offsets {offsets:?}: GPU and CPU differ",
                K::ENTRY
            )
        })?;
        ensure(
            got[..o].iter().chain(&got[o + n..]).all(|v| *v == fill),
            || format!("{}: n = {n}, offsets {offsets:?}: wrote outside", K::ENTRY),
        )?;
    }
    Ok(())
}

pub(super) fn elementwise_heads_and_tails_on_sub_slices(gpu: &Gpu) -> Result<(), Failed> {
    for (n, o) in boundary_cases(gpu) {
        let f32s = |k: usize, i: usize| ((i * 37 + k * 11) % 1000) as f32 * 0.25 - 100.0;
        let f64s = |k: usize, i: usize| f64::from(f32s(k, i)) * 1.5;
        elementwise_on_sub_slices::<sum, i32>(gpu, n, o, |k, i| (i * 7919 + k) as i32, &[])?;
        elementwise_on_sub_slices::<sum, i64>(gpu, n, o, |k, i| (i * 7919 + k) as i64, &[])?;
        elementwise_on_sub_slices::<sum, f64>(gpu, n, o, f64s, &[])?;
        elementwise_on_sub_slices::<saxpy, f32>(gpu, n, o, f32s, &[2.5])?;
        elementwise_on_sub_slices::<saxpy, f64>(gpu, n, o, f64s, &[2.5])?;
        elementwise_on_sub_slices::<lerp, f32>(gpu, n, o, f32s, &[])?;
    }
    Ok(())
}

pub(super) fn elementwise_saxpy_and_lerp(gpu: &Gpu) -> Result<(), Failed> {
    for &n in AWKWARD_LENGTHS {
        let mut rng = Rng::new(n as u64 + 1);
        let x: Array1<f32> = (0..n).map(|_| rng.normal() as f32).collect();
        let y0: Array1<f32> = (0..n).map(|_| rng.normal() as f32).collect();
        let mut y = y0.clone();
        gpu.elementwise_saxpy(x.view(), y.view_mut(), 2.5f32)
            .map_err(fail)?;
        let mut expected = y0.clone();
        elementwise_cpu::<saxpy, f32>(&[x.view()], &mut [expected.view_mut()], &[2.5])
            .map_err(fail)?;
        ensure(y == expected, || {
            format!("saxpy n = {n}: GPU and CPU differ")
        })?;

        let t: Array1<f64> = (0..n).map(|_| rng.uniform()).collect();
        let (a, b) = (x.mapv(f64::from), y0.mapv(f64::from));
        let mut out = Array1::<f64>::zeros(n);
        gpu.elementwise_lerp(a.view(), b.view(), t.view(), out.view_mut())
            .map_err(fail)?;
        let mut expected = Array1::<f64>::zeros(n);
        elementwise_cpu::<lerp, f64>(
            &[a.view(), b.view(), t.view()],
            &mut [expected.view_mut()],
            &[],
        )
        .map_err(fail)?;
        ensure(out == expected, || format!("lerp n = {n}"))?;
    }
    // Strided inout: written back through the view.
    let x = Array1::from_iter((0..100).map(|i| i as f32));
    let mut y = Array1::<f32>::ones(200);
    gpu.elementwise_saxpy(x.view(), y.slice_mut(s![..;2]), 2.0)
        .map_err(fail)?;
    ensure(y[2] == 3.0 && y[3] == 1.0 && y[198] == 199.0, || {
        "strided inout".into()
    })
}

/// Runs elementwise kernel `K` on the GPU and with `elementwise_cpu` on the
/// same inputs, `outputs` holding the initial `out` and `inout` arrays, and
/// compares every output.
fn elementwise_same<K: Elementwise<T>, T: ElementwiseElement<Dev = T> + Elem>(
    gpu: &Gpu,
    inputs: &[&[T]],
    outputs: &[&[T]],
    scalars: &[T],
) -> Result<(), TestCaseError> {
    let ins: Vec<ArrayView1<T>> = inputs.iter().map(|a| ArrayView1::from(*a)).collect();
    let mut got: Vec<Array1<T>> = outputs.iter().map(|a| Array1::from(a.to_vec())).collect();
    let mut want = got.clone();
    {
        let mut views: Vec<ArrayViewMut1<T>> = got.iter_mut().map(|a| a.view_mut()).collect();
        gpu.elementwise::<K, T>(&ins, &mut views, scalars)
            .map_err(case_err)?;
    }
    {
        let mut views: Vec<ArrayViewMut1<T>> = want.iter_mut().map(|a| a.view_mut()).collect();
        elementwise_cpu::<K, T>(&ins, &mut views, scalars).map_err(case_err)?;
    }
    for (j, (g, w)) in got.iter().zip(&want).enumerate() {
        all_same(&format!("{} output {j}", K::ENTRY), g, w)?;
    }
    Ok(())
}

/// Arrays of one length for each element type, and scalars.
struct Arrays {
    i32s: Vec<Vec<i32>>,
    i64s: Vec<Vec<i64>>,
    f32s: Vec<Vec<f32>>,
    f64s: Vec<Vec<f64>>,
    scalar32: f32,
    scalar64: f64,
}

impl Debug for Arrays {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |xs: Vec<String>| xs.join(", ");
        write!(
            f,
            "length {}; i32 [{}]; i64 [{}]; f32 [{}]; f64 [{}]; scalars {:?}, {:?}",
            self.f32s.first().map_or(0, Vec::len),
            show(self.i32s.iter().map(|a| brief(a)).collect()),
            show(self.i64s.iter().map(|a| brief(a)).collect()),
            show(self.f32s.iter().map(|a| brief(a)).collect()),
            show(self.f64s.iter().map(|a| brief(a)).collect()),
            self.scalar32,
            self.scalar64
        )
    }
}

/// `count` arrays of each type (integers: half the range, so that sums do
/// not overflow; floats: anything but NaN), of one random length in
/// 1..=100 000.
fn arrays(count: usize, with_ints: bool) -> impl Strategy<Value = Arrays> {
    length(1, 100_000).prop_perturb(move |n, rng| {
        let mut d = Draw::new(rng);
        let ints = if with_ints { count } else { 0 };
        let i32s = (0..ints)
            .map(|_| d.vec(&(i32::MIN / 2..=i32::MAX / 2), n))
            .collect();
        let i64s = (0..ints)
            .map(|_| d.vec(&(i64::MIN / 2..=i64::MAX / 2), n))
            .collect();
        let f32s = (0..count).map(|_| d.vec(&f32_no_nan(), n)).collect();
        let f64s = (0..count).map(|_| d.vec(&f64_no_nan(), n)).collect();
        Arrays {
            i32s,
            i64s,
            f32s,
            f64s,
            scalar32: d.one(&f32_no_nan()),
            scalar64: d.one(&f64_no_nan()),
        }
    })
}

/// Random length 1..=100 000; i32/i64 in half their range, f32/f64 anything
/// but NaN: `elementwise_sum_<T>` equals `elementwise_cpu::<sum, T>` for all
/// four types, bit for bit (NaN = NaN) (32 cases).
pub(super) fn elementwise_sum_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(32, arrays(2, true), |a| {
        let n = a.f32s[0].len();
        elementwise_same::<sum, i32>(gpu, &[&a.i32s[0], &a.i32s[1]], &[&vec![0; n]], &[])?;
        elementwise_same::<sum, i64>(gpu, &[&a.i64s[0], &a.i64s[1]], &[&vec![0; n]], &[])?;
        elementwise_same::<sum, f32>(gpu, &[&a.f32s[0], &a.f32s[1]], &[&vec![0.0; n]], &[])?;
        elementwise_same::<sum, f64>(gpu, &[&a.f64s[0], &a.f64s[1]], &[&vec![0.0; n]], &[])
    })
}

/// Random length 1..=100 000, x, y and a anything but NaN: saxpy (y in
/// place) equals `elementwise_cpu::<saxpy, T>` for f32 and f64, bit for bit
/// (NaN = NaN) (32 cases).
pub(super) fn elementwise_saxpy_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(32, arrays(2, false), |a| {
        elementwise_same::<saxpy, f32>(gpu, &[&a.f32s[0]], &[&a.f32s[1]], &[a.scalar32])?;
        elementwise_same::<saxpy, f64>(gpu, &[&a.f64s[0]], &[&a.f64s[1]], &[a.scalar64])
    })
}

/// Random length 1..=100 000, a, b and t anything but NaN: lerp equals
/// `elementwise_cpu::<lerp, T>` for f32 and f64, bit for bit (NaN = NaN)
/// (32 cases).
pub(super) fn elementwise_lerp_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(32, arrays(3, false), |a| {
        let n = a.f32s[0].len();
        let (x, y, z) = (&a.f32s[0], &a.f32s[1], &a.f32s[2]);
        elementwise_same::<lerp, f32>(gpu, &[x, y, z], &[&vec![0.0; n]], &[])?;
        let (x, y, z) = (&a.f64s[0], &a.f64s[1], &a.f64s[2]);
        elementwise_same::<lerp, f64>(gpu, &[x, y, z], &[&vec![0.0; n]], &[])
    })
}
