//! `mult_ker`: its PTX keeps all the operations, any length and launch shape
//! against the CPU, and random inputs (properties).
use super::*;

/// The `mult_ker` entry in the embedded PTX still has its 50 × 2 float
/// operations (the compiler did not fold `x * 2 / 2` away).
pub(super) fn mult_ker_ptx_keeps_all_operations() -> Result<(), Failed> {
    let ops = ptx_entry("mult_ker")?
        .lines()
        .filter(|l| {
            let op = l.trim_start();
            ["add.", "mul.", "div.", "fma."]
                .iter()
                .any(|p| op.starts_with(p))
                && op
                    .split_whitespace()
                    .next()
                    .is_some_and(|o| o.ends_with(".f32"))
        })
        .count();
    ensure(ops >= 100, || {
        format!("only {ops} f32 operations in mult_ker: the loop was folded")
    })
}

/// `mult_ker` equals `mult_ker_cpu` at every awkward length and launch
/// shape, on the inputs of `randn_arrays`, which it changes (a value of
/// magnitude ≥ 2^127 every 61 elements and at the end becomes ±∞): an
/// output equal to the input (a launch that did nothing) or a dropped tail
/// would fail. Plus edge values: subnormals, signed zeros, the largest
/// values that stay, the smallest that become ±∞, infinities and NaN.
pub(super) fn mult_ker_matches_cpu_for_any_length(gpu: &Gpu) -> Result<(), Failed> {
    for &n in AWKWARD_LENGTHS {
        let data: Array1<f32> = randn_arrays(1, n, n as u64).remove(0).into();
        let input = data.as_slice().ok_or("contiguous")?;
        let expected = mult_ker_cpu(data.view());
        ensure(check_mult_ker_output(input, input).is_some(), || {
            format!("n = {n}: the input equals the expected output")
        })?;
        for (grid, block) in [(SEED_GRID, SEED_BLOCK), (3, 100), (1024, 256)] {
            let out = gpu.mult_ker(data.view(), grid, block).map_err(fail)?;
            ensure(
                first_difference(
                    out.as_slice().ok_or("contiguous")?,
                    expected.as_slice().ok_or("contiguous")?,
                )
                .is_none(),
                || format!("n = {n}, <<<{grid}, {block}>>>: output differs from the CPU reference"),
            )?;
        }
    }
    let below = f32::from_bits((254 << 23) - 1); // the largest below 2^127
    let large = f32::from_bits(254 << 23); // 2^127
    let edge = array![
        f32::from_bits(1),
        -f32::from_bits(1),
        -0.0,
        0.0,
        1e30,
        -1.7e38,
        f32::MIN_POSITIVE,
        below,
        -below,
        large,
        -large,
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN
    ];
    let out = gpu.mult_ker(edge.view(), 1, 64).map_err(fail)?;
    let cpu = mult_ker_cpu(edge.view());
    let (got, want) = (
        out.as_slice().ok_or("contiguous")?,
        cpu.as_slice().ok_or("contiguous")?,
    );
    ensure(
        got.iter()
            .zip(want)
            .all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan())),
        || format!("edge values: GPU {out}, CPU {cpu}"),
    )?;
    ensure(
        want[..9] == edge.as_slice().ok_or("contiguous")?[..9]
            && want[9..14]
                == [
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                    f32::INFINITY,
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                ][..],
        || format!("the CPU reference on edge values: {cpu}"),
    )
}

struct MultKerCase {
    data: Vec<f32>,
    grid: u32,
    block: u32,
}

impl Debug for MultKerCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "<<<{}, {}>>> over {}",
            self.grid,
            self.block,
            brief(&self.data)
        )
    }
}

/// Any f32 but NaN: every sign, exponent field 0..=254 (zeros, subnormals,
/// and 2^127 and above, which `mult_ker` turns into ±∞) and mantissa, and
/// ±∞ (exponent field 255).
fn f32_any_but_nan() -> impl Strategy<Value = f32> {
    (any::<bool>(), 0u32..=255, 0u32..1 << 23).prop_map(|(negative, exp, mantissa)| {
        let mantissa = if exp == 255 { 0 } else { mantissa };
        f32::from_bits(((negative as u32) << 31) | (exp << 23) | mantissa)
    })
}

fn mult_ker_cases() -> impl Strategy<Value = MultKerCase> {
    let params = (length(1, 100_000), 1..=2048u32, 1..=1024u32);
    params.prop_perturb(|(n, grid, block), rng| {
        let mut data = Draw::new(rng).vec(&f32_any_but_nan(), n);
        // The last element is one that mult_ker changes (2^127 · 1.5 → +∞).
        data[n - 1] = f32::from_bits((254 << 23) | (1 << 22));
        MultKerCase { data, grid, block }
    })
}

/// Random length 1..=100 000, grid 1..=2048, block 1..=1024, any f32 but NaN
/// (subnormals, values ≥ 2^127 and infinities included; the last element
/// always one that becomes +∞): `mult_ker`'s output equals `mult_ker_cpu`
/// bit for bit, and differs from its input (48 cases).
pub(super) fn mult_ker_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(48, mult_ker_cases(), |c| {
        let data = Array1::from(c.data);
        let got = gpu
            .mult_ker(data.view(), c.grid, c.block)
            .map_err(case_err)?;
        all_same("mult_ker vs mult_ker_cpu", &got, &mult_ker_cpu(data.view()))?;
        prop_assert!(
            got[data.len() - 1] == f32::INFINITY,
            "the last element stayed {}",
            got[data.len() - 1]
        );
        Ok(())
    })
}
