//! Each device primitive through its own test kernel: shuffles and votes,
//! atomics, wide loads, the block tree.
use super::*;

pub(super) fn warp_shuffles_and_votes(gpu: &Gpu) -> Result<(), Failed> {
    let (blocks, tpb) = (3u32, 128u32);
    let r = gpu.warp_primitives_test(blocks, tpb).map_err(fail)?;
    let threads = (blocks * tpb) as usize;
    let x = |g: usize| (g as u32).wrapping_mul(3).wrapping_add(1);
    let y = |g: usize| ((g as u64) << 33) | g as u64;
    for g in 0..threads {
        let lane = g % 32;
        let base = g - lane;
        let down = if lane + 1 < 32 { g + 1 } else { g };
        let up = if lane >= 3 { g - 3 } else { g };
        let xor = base + (lane ^ 5);
        let idx = base + 7;
        let want32 = [x(down), x(up), x(xor), x(idx), lane as u32];
        let want64 = [y(down), y(up), y(xor), y(idx)];
        for (row, w) in want32.iter().enumerate() {
            ensure(r.rows32[row][g] == *w, || {
                format!("32-bit row {row}, thread {g}: {} vs {w}", r.rows32[row][g])
            })?;
        }
        for (row, w) in want64.iter().enumerate() {
            ensure(r.rows64[row][g] == *w, || {
                format!("64-bit row {row}, thread {g}: {} vs {w}", r.rows64[row][g])
            })?;
        }
        let warp_sum32 = (base..base + 32).fold(0u32, |a, h| a.wrapping_add(x(h)));
        let warp_sum64 = (base..base + 32).fold(0u64, |a, h| a.wrapping_add(y(h)));
        if lane == 0 {
            ensure(r.rows32[5][g] == warp_sum32, || {
                format!("warp::reduce u32 at {g}")
            })?;
            ensure(r.rows64[4][g] == warp_sum64, || {
                format!("warp::reduce u64 at {g}")
            })?;
        }
        ensure(r.rows32[6][g] == warp_sum32, || {
            format!("warp::all_reduce u32 at {g}")
        })?;
        ensure(r.rows64[5][g] == warp_sum64, || {
            format!("warp::all_reduce u64 at {g}")
        })?;
        let ballot = (0..32).fold(
            0u32,
            |m, l| if x(base + l) % 3 == 0 { m | 1 << l } else { m },
        );
        ensure(r.rows32[7][g] == ballot, || {
            format!("ballot at {g}: {:#x} vs {ballot:#x}", r.rows32[7][g])
        })?;
        let any = (base..base + 32).any(|h| h % 64 == 5) as u64;
        ensure(r.rows64[6][g] == any, || format!("any at {g}"))?;
        ensure(r.rows64[7][g] == 1, || format!("all at {g}"))?;
    }
    Ok(())
}

pub(super) fn atomics(gpu: &Gpu) -> Result<(), Failed> {
    let n = 100_003usize;
    let r = gpu.atomic_primitives_test(n).map_err(fail)?;
    let mut seen = vec![false; n];
    for &t in &r.tickets {
        ensure((t as usize) < n && !seen[t as usize], || {
            format!("ticket {t} out of range or repeated")
        })?;
        seen[t as usize] = true;
    }
    let c = r.counters;
    ensure(c[0] == n as u32, || format!("add counter {}", c[0]))?;
    ensure(c[1] == n as u32 - 1 && c[2] == 0, || {
        format!("max/min {} {}", c[1], c[2])
    })?;
    ensure((c[3] as usize) < n, || format!("exchange left {}", c[3]))?;
    ensure(c[4] >= 1 && c[4] as usize <= n && c[5] == 1, || {
        format!("cas target {} winners {}", c[4], c[5])
    })?;
    let half = (n / 2) as i32;
    ensure(r.signed == [n as i32 - 1 - half, -half], || {
        format!("signed max/min {:?}", r.signed)
    })?;
    // 100003 additions of 1.0 are exact in f32 (below 2^24); 0.5s are exact in f64.
    ensure(r.sum_f32 == n as f32, || format!("f32 sum {}", r.sum_f32))?;
    ensure(r.sum_f64 == n as f64 * 0.5, || {
        format!("f64 sum {}", r.sum_f64)
    })?;
    ensure(r.sum_u64 == (n as u64 * (n as u64 - 1)) / 2, || {
        format!("u64 sum {}", r.sum_u64)
    })
}

pub(super) fn wide_loads(gpu: &Gpu) -> Result<(), Failed> {
    let input: Vec<u32> = (0..4 * 70_001u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let (nc, cg) = gpu.load_primitives_test(&input).map_err(fail)?;
    ensure(nc == input, || "ld.global.nc.v4 copy differs".into())?;
    ensure(cg == input, || "ld.global.cg copy differs".into())
}

pub(super) fn block_reduce_tree(gpu: &Gpu) -> Result<(), Failed> {
    for tpb in [32u32, 64, 96, 256, 480, 1024] {
        let blocks = 7usize;
        let input: Vec<i64> = (0..blocks * tpb as usize)
            .map(|i| (i as i64 - 1000) * 1_000_003)
            .collect();
        let got = gpu.block_reduce_test(&input, tpb).map_err(fail)?;
        let want: Vec<i64> = input.chunks(tpb as usize).map(|c| c.iter().sum()).collect();
        ensure(got == want, || format!("block {tpb}: {got:?} vs {want:?}"))?;
    }
    Ok(())
}
