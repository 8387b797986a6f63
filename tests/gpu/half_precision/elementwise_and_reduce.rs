//! f16 and bf16 in the elementwise and reduce families, against references
//! written from the formula in f64.
use super::*;

/// A 16-bit float of `half` as the tests below need it.
pub(super) trait Half:
    Copy + PartialEq + std::fmt::Debug + Default + Send + Sync + 'static
{
    /// The type's name.
    const NAME: &'static str;
    /// The device crate's twin of the same bits.
    type Dev: cuda_kernels::reduce::Input<Acc = f32>;
    fn from_bits(b: u16) -> Self;
    fn to_bits(self) -> u16;
    fn to_f64(self) -> f64;
    /// `x` rounded once (nearest, ties to even).
    fn round(x: f64) -> Self;
}

macro_rules! half_type {
    ($($t:ident),*) => {$(
        impl Half for $t {
            const NAME: &'static str = stringify!($t);
            type Dev = cuda_kernels::kernels::device::float16::$t;
            fn from_bits(b: u16) -> Self {
                $t::from_bits(b)
            }
            fn to_bits(self) -> u16 {
                $t::to_bits(self)
            }
            fn to_f64(self) -> f64 {
                $t::to_f64(self)
            }
            fn round(x: f64) -> Self {
                $t::from_f64(x)
            }
        }
    )*};
}
half_type!(f16, bf16);

/// `x` rounded to `H` as the kernels give it: the canonical NaN `0x7fff`
/// for a NaN.
pub(super) fn rounded<H: Half>(x: f64) -> u16 {
    if x.is_nan() {
        NAN16 as u16
    } else {
        H::round(x).to_bits()
    }
}

/// `n` values of random bits (every class: normals, subnormals, zeros,
/// infinities, NaNs).
fn random_bits<H: Half>(n: usize, seed: u64) -> Vec<H> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| H::from_bits(rng.next_u64() as u16))
        .collect()
}

/// `got` bit for bit against `want` (bits), the first difference described.
fn same_bits<H: Half>(what: &str, got: &[H], want: &[u16]) -> Result<(), Failed> {
    ensure(got.len() == want.len(), || format!("{what}: length"))?;
    match got.iter().zip(want).position(|(g, &w)| g.to_bits() != w) {
        None => Ok(()),
        Some(i) => Err(Failed::from(format!(
            "{what}: element {i} of {}: got {:#06x}, want {:#06x}",
            got.len(),
            got[i].to_bits(),
            want[i]
        ))),
    }
}

/// `sum`, `saxpy` and `lerp` on `H`: every operation rounded once, from the
/// formula in f64 (a sum, difference or product of two 16-bit values is
/// exact in f64, or for bf16's wide exponents rounded there with 53 ≥ 2·8 + 2
/// bits, so the second rounding to `H` is still the exactly rounded
/// result). Random bits of every class, odd lengths, views starting one
/// element in (the kernels' element-wise head and tail), and the empty
/// input refused.
fn elementwise_case<H>(gpu: &Gpu) -> Result<(), Failed>
where
    H: Half + cuda_kernels::matrices::ElementwiseElement<Dev = <H as Half>::Dev>,
    cuda_kernels::matrices::kernels::sum: cuda_kernels::matrices::Elementwise<<H as Half>::Dev>,
    cuda_kernels::matrices::kernels::saxpy: cuda_kernels::matrices::Elementwise<<H as Half>::Dev>,
    cuda_kernels::matrices::kernels::lerp: cuda_kernels::matrices::Elementwise<<H as Half>::Dev>,
{
    use cuda_kernels::matrices::kernels::{lerp, saxpy, sum};
    use cuda_kernels::ndarray::Array1;
    let r = |x: f64| H::round(x).to_f64();
    let lens: &[usize] = if simulated(gpu) {
        &[1, 7, 8, 9, 4099]
    } else {
        &[1, 7, 8, 9, 4099, 1 << 20]
    };
    for &n in lens {
        for offset in [0usize, 1] {
            let what = |k: &str| format!("{k}_{} n = {n}, offset {offset}", H::NAME);
            let arrays: Vec<Array1<H>> = (0..3)
                .map(|k| Array1::from(random_bits::<H>(n + offset, 100 * n as u64 + k)))
                .collect();
            let (a, b, t) = (
                arrays[0].slice(s![offset..]),
                arrays[1].slice(s![offset..]),
                arrays[2].slice(s![offset..]),
            );
            let mut c = Array1::from_elem(n, H::default());
            gpu.elementwise::<sum, H>(&[a, b], &mut [c.view_mut()], &[])
                .map_err(fail)?;
            let want: Vec<u16> = a
                .iter()
                .zip(&b)
                .map(|(x, y)| rounded::<H>(x.to_f64() + y.to_f64()))
                .collect();
            same_bits(&what("sum"), c.as_slice().unwrap(), &want)?;

            let alpha = H::round(-1.375);
            let mut y = b.to_owned();
            gpu.elementwise::<saxpy, H>(&[a], &mut [y.view_mut()], &[alpha])
                .map_err(fail)?;
            let want: Vec<u16> = a
                .iter()
                .zip(&b)
                .map(|(x, y)| rounded::<H>(r(alpha.to_f64() * x.to_f64()) + y.to_f64()))
                .collect();
            same_bits(&what("saxpy"), y.as_slice().unwrap(), &want)?;

            let mut out = Array1::from_elem(n, H::default());
            gpu.elementwise::<lerp, H>(&[a, b, t], &mut [out.view_mut()], &[])
                .map_err(fail)?;
            let want: Vec<u16> = (0..n)
                .map(|i| {
                    let (a, b, t) = (a[i].to_f64(), b[i].to_f64(), t[i].to_f64());
                    rounded::<H>(a + r(t * r(b - a)))
                })
                .collect();
            same_bits(&what("lerp"), out.as_slice().unwrap(), &want)?;
        }
    }
    let empty = Array1::<H>::from(vec![]);
    let mut none = Array1::<H>::from(vec![]);
    ensure(
        matches!(
            gpu.elementwise_sum(empty.view(), empty.view(), none.view_mut()),
            Err(cuda_kernels::Error::InvalidInput { .. })
        ),
        || format!("sum_{}: empty arrays must be refused", H::NAME),
    )
}

pub(super) fn elementwise_f16_bf16(gpu: &Gpu) -> Result<(), Failed> {
    elementwise_case::<f16>(gpu)?;
    elementwise_case::<bf16>(gpu)
}

/// Sum (f32 accumulation, f32 result), min and max (the input type) of
/// `H`:
/// - values `k/8`, `|k| ≤ 127`, in `H` exactly: every partial sum of up to
///   2^17 of them is a multiple of 1/8 below 2^21, exact in f32 in any
///   order, so the sum must equal the integer sum exactly (one element
///   dropped or doubled changes it);
/// - values in [-1, 1): within the bound of `float_sum_tolerance` for the
///   launch's summation depth (f32's unit roundoff) around the f64 sum;
/// - min and max equal to the f64 minimum and maximum (NaNs ignored, all
///   NaN gives ±∞), for random bits of every class;
/// - infinities and NaN in a sum; odd lengths; a device slice starting one
///   element in (the unaligned head); the empty input (sum: the initial
///   value or 0; min/max: refused without an initial value).
fn reduce_case<H>(gpu: &Gpu) -> Result<(), Failed>
where
    H: Half + cuda_kernels::reduce::HalfInput<Dev = <H as Half>::Dev>,
    cuda_kernels::reduce::Sum: cuda_kernels::reduce::HalfReduction<H, Output = f32>,
    cuda_kernels::reduce::Min: cuda_kernels::reduce::HalfReduction<H, Output = H>,
    cuda_kernels::reduce::Max: cuda_kernels::reduce::HalfReduction<H, Output = H>,
{
    use cuda_kernels::ndarray::Array1;
    use cuda_kernels::reduce::{Max, Min, Sum, accurate_sum, float_sum_tolerance};
    let name = H::NAME;
    let lens: &[usize] = if simulated(gpu) {
        &[1, 7, 8, 9, 4099, 100_003]
    } else {
        &[1, 7, 8, 9, 4099, 100_003, 1 << 17]
    };
    for &n in lens {
        let mut rng = Rng::new(n as u64);
        let ks: Vec<i64> = (0..n).map(|_| rng.below(255) as i64 - 127).collect();
        let xs: Array1<H> = ks.iter().map(|&k| H::round(k as f64 / 8.0)).collect();
        let want = ks.iter().sum::<i64>() as f64 / 8.0;
        let got = gpu.reduce_half::<Sum, H>(xs.view(), None).map_err(fail)?;
        ensure(f64::from(got) == want, || {
            format!("sum_{name} of k/8, n = {n}: got {got}, want {want}")
        })?;
        let got = gpu
            .reduce_half::<Sum, H>(xs.view(), Some(0.5))
            .map_err(fail)?;
        ensure(f64::from(got) == want + 0.5, || {
            format!("sum_{name} of k/8 + init 0.5, n = {n}: got {got}")
        })?;
        // The same bytes on the device, reduced from element 1 (unaligned).
        let dev: Vec<<H as Half>::Dev> = xs
            .iter()
            .map(|&x| cuda_kernels::reduce::HalfInput::to_dev(x))
            .collect();
        let d = gpu.to_device(&dev).map_err(fail)?;
        let got = gpu
            .reduce_device::<Sum, <H as Half>::Dev>(&d.index(1..), None)
            .map_err(fail)?;
        let want1 = ks[1..].iter().sum::<i64>() as f64 / 8.0;
        ensure(f64::from(got) == want1, || {
            format!("sum_{name} of k/8 from element 1, n = {n}: got {got}, want {want1}")
        })?;

        // Values in [-1, 1): the proven bound of the launch's order.
        let us: Array1<H> = (0..n)
            .map(|_| H::round(rng.uniform() * 2.0 - 1.0))
            .collect();
        let exact = accurate_sum(us.iter().map(|x| x.to_f64()));
        let sum_abs: f64 = us.iter().map(|x| x.to_f64().abs()).sum();
        let (grid, block) = gpu
            .reduce_launch_shape::<Sum, <H as Half>::Dev>(n)
            .map_err(fail)?;
        let tol = float_sum_tolerance(n, (grid * block) as usize, sum_abs, 2f64.powi(-24));
        let got = gpu.reduce_half::<Sum, H>(us.view(), None).map_err(fail)?;
        ensure((f64::from(got) - exact).abs() <= tol, || {
            format!("sum_{name} of [-1, 1), n = {n}: got {got}, exact {exact}, bound {tol:.3e}")
        })?;

        // Min and max of random bits (NaNs among them).
        let bits = Array1::from(random_bits::<H>(n, 7 * n as u64));
        let finite = || bits.iter().map(|x| x.to_f64()).filter(|x| !x.is_nan());
        let (lo, hi) = (
            finite().fold(f64::INFINITY, f64::min),
            finite().fold(f64::NEG_INFINITY, f64::max),
        );
        let got_lo = gpu.reduce_half::<Min, H>(bits.view(), None).map_err(fail)?;
        let got_hi = gpu.reduce_half::<Max, H>(bits.view(), None).map_err(fail)?;
        ensure(got_lo.to_f64() == lo && got_hi.to_f64() == hi, || {
            format!("min/max_{name}, n = {n}: got {got_lo:?} / {got_hi:?}, want {lo} / {hi}")
        })?;
    }
    // Infinities and NaN in a sum; all-NaN min and max; the empty input.
    let v = |xs: &[f64]| -> Array1<H> { xs.iter().map(|&x| H::round(x)).collect() };
    let sum = |xs: &[f64]| gpu.reduce_half::<Sum, H>(v(xs).view(), None).map_err(fail);
    let inf = f64::INFINITY;
    ensure(sum(&[1.0, inf, 2.0])? == f32::INFINITY, || {
        format!("sum_{name}: 1 + ∞ + 2")
    })?;
    ensure(sum(&[1.0, inf, -inf])?.is_nan(), || {
        format!("sum_{name}: ∞ − ∞")
    })?;
    ensure(sum(&[1.0, f64::NAN, 2.0])?.is_nan(), || {
        format!("sum_{name}: NaN")
    })?;
    let nans = v(&[f64::NAN; 9]);
    let lo = gpu.reduce_half::<Min, H>(nans.view(), None).map_err(fail)?;
    let hi = gpu.reduce_half::<Max, H>(nans.view(), None).map_err(fail)?;
    ensure(lo.to_f64() == inf && hi.to_f64() == -inf, || {
        format!("min/max_{name} of NaNs: {lo:?} / {hi:?}, want +∞ / −∞ (the identities)")
    })?;
    let empty = v(&[]);
    ensure(sum(&[])? == 0.0, || format!("sum_{name} of nothing"))?;
    let got = gpu
        .reduce_half::<Sum, H>(empty.view(), Some(2.5))
        .map_err(fail)?;
    ensure(got == 2.5, || {
        format!("sum_{name} of nothing, init 2.5: {got}")
    })?;
    let init = H::round(-3.0);
    let got = gpu
        .reduce_half::<Min, H>(empty.view(), Some(init))
        .map_err(fail)?;
    ensure(got == init, || {
        format!("min_{name} of nothing, init −3: {got:?}")
    })?;
    ensure(
        matches!(
            gpu.reduce_half::<Max, H>(empty.view(), None),
            Err(cuda_kernels::Error::InvalidInput { .. })
        ),
        || format!("max_{name} of nothing without init must be refused"),
    )
}

pub(super) fn reduce_f16_bf16(gpu: &Gpu) -> Result<(), Failed> {
    reduce_case::<f16>(gpu)?;
    reduce_case::<bf16>(gpu)
}
