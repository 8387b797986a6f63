//! The radix sort family: every key type, ascending and descending, keys
//! only, with values and with indices, on random, sorted, reverse-sorted,
//! all-equal, few-distinct (stability) and NaN-containing inputs of odd
//! lengths across several tiles and across 64 tiles for every key type,
//! against the CPU reference (the standard
//! library's stable sort by the documented order); a reused sorter; and the
//! refusals (different lengths, too many keys, values to a keys-only
//! sorter), plus the empty input's empty result.
use cuda_kernels::Error;
use cuda_kernels::Gpu;
use cuda_kernels::ndarray::Array1;
use cuda_kernels::sort::{self, Key, MAX_KEYS, Order, RadixSort, TILE, sort_cpu, tile};
use cuda_kernels::util::Rng;
use libtest_mimic::{Failed, Trial};

use crate::common::{ensure, fail, sized};

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        kernel!("u32_agrees_with_stable_cpu_sort", agrees::<u32>),
        kernel!("i32_agrees_with_stable_cpu_sort", agrees::<i32>),
        kernel!("f32_agrees_with_stable_cpu_sort", agrees::<f32>),
        kernel!("u64_agrees_with_stable_cpu_sort", agrees::<u64>),
        kernel!("i64_agrees_with_stable_cpu_sort", agrees::<i64>),
        kernel!("f64_agrees_with_stable_cpu_sort", agrees::<f64>),
        kernel!(float_order_is_total_cmp_with_nan_last),
        kernel!(a_reused_sorter_sorts_pairs_and_keys),
        kernel!(bad_input_is_refused_naming_the_kernel),
        kernel!(every_key_type_across_64_tiles),
    ]
}

/// Keys the tests draw, with their bits for an exact comparison (NaN
/// payloads included).
trait TestKey: Key + Copy {
    /// Any bits (floats: special values often).
    fn random(rng: &mut Rng) -> Self;
    /// One of a few values (many ties: stability shows).
    fn few(rng: &mut Rng) -> Self;
    /// The key's bits.
    fn bits(self) -> u64;
}

macro_rules! integer_test_keys {
    ($($t:ty),*) => {$(
        impl TestKey for $t {
            fn random(rng: &mut Rng) -> Self {
                rng.next_u64() as $t
            }
            fn few(rng: &mut Rng) -> Self {
                // Negative, zero and positive for the signed types.
                (rng.below(5) as $t).wrapping_sub(2)
            }
            fn bits(self) -> u64 {
                self as u64
            }
        }
    )*};
}
integer_test_keys!(u32, i32, u64, i64);

macro_rules! float_test_keys {
    ($($t:ty: $bits:ty),*) => {$(
        impl TestKey for $t {
            fn random(rng: &mut Rng) -> Self {
                const SPECIAL: [$t; 8] = [
                    0.0, -0.0, <$t>::INFINITY, <$t>::NEG_INFINITY, <$t>::NAN,
                    <$t>::MIN_POSITIVE, -<$t>::MAX, 1.0,
                ];
                match rng.below(8) {
                    0 => SPECIAL[rng.below(8) as usize],
                    // A NaN of either sign and another payload.
                    1 => <$t>::from_bits(<$t>::NAN.to_bits() | rng.next_u64() as $bits),
                    _ => (rng.normal() * 1e3) as $t,
                }
            }
            fn few(rng: &mut Rng) -> Self {
                [-1.0, -0.0, 0.0, 2.5, <$t>::NAN][rng.below(5) as usize]
            }
            fn bits(self) -> u64 {
                self.to_bits() as u64
            }
        }
    )*};
}
float_test_keys!(f32: u32, f64: u64);

/// The inputs: name and keys.
fn inputs<K: TestKey>(n: usize, rng: &mut Rng) -> Vec<(&'static str, Vec<K>)> {
    let random: Vec<K> = (0..n).map(|_| K::random(rng)).collect();
    let (sorted, _) = sort_cpu(&random, Order::Ascending);
    let reversed: Vec<K> = sorted.iter().rev().copied().collect();
    let equal = vec![random[0]; n];
    let few: Vec<K> = (0..n).map(|_| K::few(rng)).collect();
    vec![
        ("random", random),
        ("sorted", sorted),
        ("reverse-sorted", reversed),
        ("all-equal", equal),
        ("few-distinct", few),
    ]
}

/// `got` equals the reference, bit for bit, keys and indices.
fn check_same<K: TestKey>(
    what: &str,
    got: (&[K], &[u32]),
    want: (&[K], &[u32]),
) -> Result<(), Failed> {
    ensure(got.0.len() == want.0.len(), || format!("{what}: length"))?;
    if let Some(i) = (0..want.0.len()).find(|&i| got.0[i].bits() != want.0[i].bits()) {
        return Err(fail(format!(
            "{what}: key {i} is {:?}, want {:?}",
            got.0[i], want.0[i]
        )));
    }
    if let Some(i) = (0..want.1.len()).find(|&i| got.1[i] != want.1[i]) {
        return Err(fail(format!(
            "{what}: index {i} is {}, want {} (not stable)",
            got.1[i], want.1[i]
        )));
    }
    Ok(())
}

/// Argsort of every input in both orders at lengths of one, two and three
/// tiles (odd), keys-only and pairs on the random input: equal to the
/// stable CPU sort.
fn agrees<K: TestKey>(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(22);
    for n in [1, 33, TILE + 1, sized(gpu, 3 * TILE - 7, 2 * TILE + 3)] {
        for (name, keys) in inputs::<K>(n, &mut rng) {
            for order in [Order::Ascending, Order::Descending] {
                let what = format!("{name}, n = {n}, {order:?}");
                let want = sort_cpu(&keys, order);
                let (k, i) =
                    sort::argsort(gpu, Array1::from(keys.clone()).view(), order).map_err(fail)?;
                check_same(
                    &what,
                    (k.as_slice().unwrap_or(&[]), i.as_slice().unwrap_or(&[])),
                    (&want.0, &want.1),
                )?;
                if name == "random" {
                    let k =
                        sort::sort(gpu, Array1::from(keys.clone()).view(), order).map_err(fail)?;
                    check_same(
                        &format!("{what}, keys only"),
                        (k.as_slice().unwrap_or(&[]), &[]),
                        (&want.0, &[]),
                    )?;
                    let values: Vec<u32> = (0..n as u32)
                        .map(|v| v.wrapping_mul(2_654_435_761))
                        .collect();
                    let (k, v) = sort::sort_pairs(
                        gpu,
                        Array1::from(keys.clone()).view(),
                        Array1::from(values.clone()).view(),
                        order,
                    )
                    .map_err(fail)?;
                    let want_values: Vec<u32> =
                        want.1.iter().map(|&i| values[i as usize]).collect();
                    check_same(
                        &format!("{what}, pairs"),
                        (k.as_slice().unwrap_or(&[]), v.as_slice().unwrap_or(&[])),
                        (&want.0, &want_values),
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// The documented float order, literally: -inf < -1 < -0 < +0 < 1 < inf <
/// NaN (either sign), NaNs and ties in input order, bits kept.
fn float_order_is_total_cmp_with_nan_last(gpu: &Gpu) -> Result<(), Failed> {
    let neg_nan = -f32::NAN;
    let keys = [
        2.0f32,
        neg_nan,
        0.0,
        -0.0,
        f32::NAN,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
    ];
    let (k, i) =
        sort::argsort(gpu, Array1::from(keys.to_vec()).view(), Order::Ascending).map_err(fail)?;
    let want_indices = [7u32, 5, 3, 2, 8, 0, 6, 1, 4];
    ensure(i.to_vec() == want_indices, || {
        format!("ascending indices {i}")
    })?;
    ensure(k[7].to_bits() == neg_nan.to_bits(), || {
        "a NaN's bits changed".into()
    })?;
    let (_, i) =
        sort::argsort(gpu, Array1::from(keys.to_vec()).view(), Order::Descending).map_err(fail)?;
    let want_indices = [1u32, 4, 6, 0, 2, 8, 3, 5, 7];
    ensure(i.to_vec() == want_indices, || {
        format!("descending indices {i}")
    })
}

/// One sorter's memory, reused: pairs of a shorter length, then keys only,
/// both right.
fn a_reused_sorter_sorts_pairs_and_keys(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(7);
    let n = TILE + 5;
    let mut sorter = RadixSort::<i64>::new(gpu, n, true).map_err(fail)?;
    for len in [n, 300] {
        let keys: Vec<i64> = (0..len).map(|_| i64::few(&mut rng)).collect();
        let values: Vec<u32> = (0..len as u32).collect();
        let mut d_keys = gpu.to_device(&keys).map_err(fail)?;
        let mut d_values = gpu.to_device(&values).map_err(fail)?;
        sorter
            .sort_pairs(gpu, &mut d_keys, &mut d_values, Order::Descending)
            .map_err(fail)?;
        let want = sort_cpu(&keys, Order::Descending);
        let (k, v) = (
            d_keys.to_vec().map_err(fail)?,
            d_values.to_vec().map_err(fail)?,
        );
        check_same(
            &format!("reused, pairs, n = {len}"),
            (&k, &v),
            (&want.0, &want.1),
        )?;
        let mut d_keys = gpu.to_device(&keys).map_err(fail)?;
        sorter
            .sort(gpu, &mut d_keys, Order::Ascending)
            .map_err(fail)?;
        let want = sort_cpu(&keys, Order::Ascending);
        check_same(
            &format!("reused, keys, n = {len}"),
            (&d_keys.to_vec().map_err(fail)?, &[]),
            (&want.0, &[]),
        )?;
    }
    Ok(())
}

/// Each refusal is `InvalidInput` naming the onesweep kernel; the empty
/// input's result is empty.
fn bad_input_is_refused_naming_the_kernel(gpu: &Gpu) -> Result<(), Failed> {
    let refused = |what: &str, r: cuda_kernels::Result<()>| match r {
        Err(Error::InvalidInput {
            kernel: "radix_sort_onesweep_f32",
            reason,
        }) => {
            println!("{what}: refused: {reason}");
            Ok(())
        }
        other => Err(fail(format!("{what}: want InvalidInput, got {other:?}"))),
    };
    let keys = Array1::from(vec![1.0f32, 2.0, 3.0]);
    let two = Array1::from(vec![1u32, 2]);
    refused(
        "keys and values of different lengths",
        sort::sort_pairs(gpu, keys.view(), two.view(), Order::Ascending).map(|_| ()),
    )?;
    refused(
        "too many keys",
        RadixSort::<f32>::new(gpu, MAX_KEYS + 1, false).map(|_| ()),
    )?;
    let mut sorter = RadixSort::<f32>::new(gpu, 3, false).map_err(fail)?;
    let mut d_keys = gpu.to_device(&[3.0f32, 1.0, 2.0]).map_err(fail)?;
    let mut d_values = gpu.to_device(&[0u32, 1, 2]).map_err(fail)?;
    refused(
        "values to a keys-only sorter",
        sorter.sort_pairs(gpu, &mut d_keys, &mut d_values, Order::Ascending),
    )?;
    let mut d_long = gpu.to_device(&[0.0f32; 4]).map_err(fail)?;
    refused(
        "more keys than the sorter holds",
        sorter.sort(gpu, &mut d_long, Order::Ascending),
    )?;
    let empty =
        sort::argsort(gpu, Array1::<f32>::from(vec![]).view(), Order::Ascending).map_err(fail)?;
    ensure(empty.0.is_empty() && empty.1.is_empty(), || {
        "empty input: a non-empty result".into()
    })
}

/// Each sort kernel of a key type across 65 tiles (`64 · tile + 7` keys,
/// the tile of that kernel: the look-back chains, the histogram's
/// grid-stride loop and the tile counter run past 64 tiles): argsort of
/// random keys ascending and pairs of few distinct keys descending (the
/// pairs kernel; stability across tiles), keys alone of random keys
/// descending (the keys kernel); equal to the stable CPU sort. One sort per
/// case, to keep the simulator's time down.
fn across_64_tiles<K: TestKey>(gpu: &Gpu, rng: &mut Rng) -> Result<(), Failed> {
    let size = size_of::<K>();
    let n = 64 * tile(size, true) + 7;
    let random: Vec<K> = (0..n).map(|_| K::random(rng)).collect();
    let what = |case: &str, n: usize, order: Order| format!("{case}, n = {n}, {order:?}");
    let order = Order::Ascending;
    let want = sort_cpu(&random, order);
    let (k, i) = sort::argsort(gpu, Array1::from(random).view(), order).map_err(fail)?;
    check_same(
        &what("random, indices", n, order),
        (k.as_slice().unwrap_or(&[]), i.as_slice().unwrap_or(&[])),
        (&want.0, &want.1),
    )?;
    let few: Vec<K> = (0..n).map(|_| K::few(rng)).collect();
    let order = Order::Descending;
    let want = sort_cpu(&few, order);
    let values: Vec<u32> = (0..n as u32).map(|v| v ^ 0x5bd1_e995).collect();
    let (k, v) = sort::sort_pairs(
        gpu,
        Array1::from(few).view(),
        Array1::from(values.clone()).view(),
        order,
    )
    .map_err(fail)?;
    let want_values: Vec<u32> = want.1.iter().map(|&i| values[i as usize]).collect();
    check_same(
        &what("few-distinct, pairs", n, order),
        (k.as_slice().unwrap_or(&[]), v.as_slice().unwrap_or(&[])),
        (&want.0, &want_values),
    )?;
    let n = 64 * tile(size, false) + 7;
    let random: Vec<K> = (0..n).map(|_| K::random(rng)).collect();
    let want = sort_cpu(&random, order);
    let k = sort::sort(gpu, Array1::from(random).view(), order).map_err(fail)?;
    check_same(
        &what("random, keys only", n, order),
        (k.as_slice().unwrap_or(&[]), &[]),
        (&want.0, &[]),
    )
}

fn every_key_type_across_64_tiles(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(64);
    across_64_tiles::<u32>(gpu, &mut rng)?;
    across_64_tiles::<i32>(gpu, &mut rng)?;
    across_64_tiles::<f32>(gpu, &mut rng)?;
    across_64_tiles::<u64>(gpu, &mut rng)?;
    across_64_tiles::<i64>(gpu, &mut rng)?;
    across_64_tiles::<f64>(gpu, &mut rng)
}
