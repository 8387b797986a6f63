//! The radix sort family's part of `cuda-kernels bench`
//! (`CUDA_KERNELS_BENCH_ONLY=sort`), at 2^28 elements: sorts of u32 and
//! f32 keys, i32 keys with indices and u64 keys (Gkeys/s, each sorted
//! result checked exactly in O(n): ordered, the same multiset as the
//! input, and for indices a stable permutation that carries its keys).
use std::fmt::Debug;

use super::{BenchRecord, Check};
use crate::sort::{Key, Order, RadixSort};
use crate::timing::{GpuTimer, median};
use crate::util::Rng;
use crate::{Gpu, Result};

const N: usize = 1 << 28;
const REPS: usize = 5;

/// Runs the sort benches.
pub fn bench(gpu: &Gpu, records: &mut Vec<BenchRecord>) -> Result<()> {
    gpu.bind()?;
    let mut rng = Rng::new(22);
    let u32_keys: Vec<u32> = (0..N).map(|_| rng.next_u64() as u32).collect();
    bench_sort(gpu, "u32 keys", &u32_keys, false, records)?;
    let f32_keys: Vec<f32> = u32_keys
        .iter()
        .map(|&b| (b as f64 / 2f64.powi(32) * 2e6 - 1e6) as f32)
        .collect();
    bench_sort(gpu, "f32 keys", &f32_keys, false, records)?;
    drop(f32_keys);
    let i32_keys: Vec<i32> = u32_keys.iter().map(|&b| b as i32).collect();
    bench_sort(gpu, "i32 keys with indices", &i32_keys, true, records)?;
    drop(i32_keys);
    drop(u32_keys);
    let u64_keys: Vec<u64> = (0..N).map(|_| rng.next_u64()).collect();
    bench_sort(gpu, "u64 keys", &u64_keys, false, records)
}

/// Times `REPS` sorts of `keys` (each of a fresh copy of the input; the
/// copy untimed) and checks the last one.
fn bench_sort<K: Key + PartialOrd + Hashed>(
    gpu: &Gpu,
    what: &str,
    keys: &[K],
    with_indices: bool,
    records: &mut Vec<BenchRecord>,
) -> Result<()> {
    let input = gpu.to_device(keys)?;
    let mut work = gpu.to_device(keys)?;
    let mut indices = gpu.zeroed::<u32>(if with_indices { keys.len() } else { 0 })?;
    let mut sorter = RadixSort::<K>::new(gpu, keys.len(), with_indices)?;
    let stream = gpu.stream();
    let mut times = Vec::new();
    for rep in 0..=REPS {
        // SAFETY: both buffers live until the stream is synchronized (time waits).
        unsafe { work.async_copy_from_device(&input, stream) }?;
        let ((), ms) = GpuTimer::time(stream, || {
            if with_indices {
                sorter.argsort(gpu, &mut work, &mut indices, Order::Ascending)
            } else {
                sorter.sort(gpu, &mut work, Order::Ascending)
            }
        })?;
        if rep > 0 {
            times.push(ms);
        }
    }
    let ms = median(&mut times);
    let sorted = work.to_vec()?;
    let check = if with_indices {
        check_stable_argsort(keys, &sorted, &indices.to_vec()?)
    } else {
        check_sorted_permutation(keys, &sorted)
    };
    let name = K::ONESWEEP.name().replace("_onesweep", "");
    records.push(BenchRecord::new(
        name,
        format!("2^28 {what}"),
        f64::from(ms),
        "Gkeys/s",
        keys.len() as f64 / (f64::from(ms) * 1e6),
        check,
    ));
    Ok(())
}

/// A key's bits, mixed, for a multiset fingerprint.
pub trait Hashed: Copy {
    /// The key's bits.
    fn bits(self) -> u64;
}
macro_rules! hashed {
    ($($t:ty => $e:expr),*) => {$(
        impl Hashed for $t {
            fn bits(self) -> u64 {
                let f: fn($t) -> u64 = $e;
                f(self)
            }
        }
    )*};
}
hashed!(u32 => |x| x as u64, i32 => |x| x as u32 as u64, f32 => |x| x.to_bits() as u64, u64 => |x| x);

/// A mixing of the bits (splitmix64's finaliser): the sum over a multiset
/// of keys changes when any key does.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `sorted` is in order (no NaN in these inputs) and holds the keys of
/// `input` (equal sums of mixed bits and of squares of mixed bits).
fn check_sorted_permutation<K: PartialOrd + Hashed>(input: &[K], sorted: &[K]) -> Check {
    if let Some(i) = sorted.windows(2).position(|w| w[1] < w[0]) {
        return Check::Fail(format!("keys {i} and {} out of order", i + 1));
    }
    let print = |keys: &[K]| {
        keys.iter().fold((0u64, 0u64), |(a, b), &k| {
            let m = mix(k.bits());
            (a.wrapping_add(m), b.wrapping_add(m.wrapping_mul(m)))
        })
    };
    if print(input) != print(sorted) {
        return Check::Fail("the sorted keys are not the input's (fingerprints differ)".into());
    }
    Check::Pass("ordered, same keys (fingerprint)".into())
}

/// `indices` is a permutation, `sorted[i]` is `input[indices[i]]`, the keys
/// are in order and equal keys' indices increase (stable): exactly the
/// stable sort.
fn check_stable_argsort<K: PartialOrd + Hashed + Debug>(
    input: &[K],
    sorted: &[K],
    indices: &[u32],
) -> Check {
    let mut seen = vec![false; input.len()];
    for (i, (&k, &j)) in sorted.iter().zip(indices).enumerate() {
        let j = j as usize;
        if j >= input.len() || std::mem::replace(&mut seen[j], true) {
            return Check::Fail(format!("index {i}: {j} out of range or repeated"));
        }
        if input[j].bits() != k.bits() {
            return Check::Fail(format!("key {i} is {k:?}, its index's key {:?}", input[j]));
        }
        if i > 0 {
            let (p, q) = (sorted[i - 1], k);
            if q < p || (q.bits() == p.bits() && indices[i - 1] as usize > j) {
                return Check::Fail(format!("keys {} and {i} out of (stable) order", i - 1));
            }
        }
    }
    Check::Pass("stable permutation carrying its keys, ordered".into())
}
