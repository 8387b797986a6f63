//! `vector_sum_repeat`: against the CPU, and its repeat loop survives in the
//! PTX.
use super::*;

pub(super) fn vector_sum_repeat_matches_cpu(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(8);
    let n = 10_000;
    let repeats = sized(gpu, 10_000, 1001) as u32;
    let a: Array1<f32> = (0..n).map(|_| rng.uniform() as f32).collect();
    let b: Array1<f32> = (0..n).map(|_| rng.uniform() as f32).collect();
    let c = gpu
        .vector_sum_repeat(a.view(), b.view(), repeats)
        .map_err(fail)?;
    let expected = vector_sum_repeat_cpu(a.view(), b.view(), repeats).map_err(fail)?;
    let norm = (&c - &expected).mapv(|d| (d as f64).powi(2)).sum().sqrt();
    ensure(norm < 1e-5, || format!("‖cpu − gpu‖ = {norm}"))?;
    for &n in &[1usize, 257, 65_537] {
        let a = Array1::from_elem(n, 1.5f32);
        let c = gpu.vector_sum_repeat(a.view(), a.view(), 3).map_err(fail)?;
        ensure(c.iter().all(|&x| x == 3.0), || format!("n = {n}"))?;
    }
    Ok(())
}

pub(super) fn ptx_keeps_the_repeat_loop() -> Result<(), Failed> {
    let body = ptx_entry("vector_sum_repeat")?;
    ensure(body.contains("ld.volatile.global"), || {
        "no volatile load".into()
    })?;
    ensure(body.contains("st.volatile.global"), || {
        "no volatile store".into()
    })?;
    // A backward branch: some `bra` targets a label defined before it.
    let mut labels = Vec::new();
    let mut backward = false;
    for line in body.lines() {
        let l = line.trim();
        if l.starts_with("$L") {
            // `$L__BB17_7:  // comment`
            labels.push(l.split(':').next().unwrap_or("").to_string());
        } else if let Some(target) = l.split("bra").nth(1) {
            let target = target
                .trim()
                .trim_start_matches(".uni")
                .trim()
                .trim_end_matches(';');
            backward |= labels.iter().any(|x| x == target);
        }
    }
    ensure(backward, || {
        "no loop (backward branch) in vector_sum_repeat".into()
    })
}
