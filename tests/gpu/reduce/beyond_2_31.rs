//! More than 2^31 elements.
use super::*;

pub(super) fn beyond_2_31(gpu: &Gpu, n: usize) -> Result<(), Failed> {
    // SAFETY: every element is written by set_32 before the reduction reads it.
    let mut buf = unsafe { gpu.uninitialized::<i32>(n) }.map_err(fail)?;
    buf.set_32(1).map_err(fail)?;
    // Distinct values past 2^31: a minimum, a maximum, and a tail.
    let specials: [(usize, i32); 4] = [(1 << 31, 99), ((1 << 31) + 2, -5), (n - 1, 7), (3, 2)];
    for &(i, v) in &specials {
        let mut one = buf.index_mut(i..i + 1);
        one.copy_from(&[v][..]).map_err(fail)?;
    }
    let extra: i64 = specials.iter().map(|&(_, v)| v as i64 - 1).sum();
    let want = (n as i64 + extra) as i32; // wraps like the GPU's i32 sum
    let got = gpu.reduce_device::<Sum, i32>(&buf, None).map_err(fail)?;
    ensure(got == want, || format!("sum: {got} vs {want}"))?;
    let got = gpu.reduce_device::<Min, i32>(&buf, None).map_err(fail)?;
    ensure(got == -5, || format!("min: {got}"))?;
    let got = gpu.reduce_device::<Max, i32>(&buf, None).map_err(fail)?;
    ensure(got == 99, || format!("max: {got}"))?;
    // Misaligned start (head elements) at this size too: drops element 0 (a 1).
    let tail = buf.index(1..);
    let got = gpu.reduce_device::<Sum, i32>(&tail, None).map_err(fail)?;
    ensure(got == want.wrapping_sub(1), || {
        format!("sum from 1: {got} vs {}", want.wrapping_sub(1))
    })?;
    let got = gpu
        .reduce_device::<Sum, i32>(&buf, Some(-100))
        .map_err(fail)?;
    ensure(got == want.wrapping_sub(100), || {
        format!("sum with init: {got}")
    })
}
