//! The kernel crate's `attention_tile` (bf16 `Q·Kᵀ` on the tensor cores,
//! then a row softmax) against an f64 CPU reference, within an error bound
//! derived below.
use cuda_kernels_gpu::device::float16::bf16;
use cuda_kernels_runtime::{Gpu, LaunchConfig, LoadedImage, Result};
use downstream_kernels::attention::{
    ATTENTION_THREADS, ATTENTION_TILE, ATTENTION_TILE_KERNEL, HEAD_DIM,
};

/// f32's unit roundoff, 2^-24.
const U: f64 = f32::EPSILON as f64 / 2.0;

/// Whether the loaded image has `attention_tile`: a cubin of sm_80 or later
/// (the kernel needs `mma.sync`), or the simulator.
fn has_tensor_cores(gpu: &Gpu) -> bool {
    match gpu.image() {
        LoadedImage::Cubin { sm } => *sm >= 80,
        LoadedImage::Simulator => true,
        _ => false,
    }
}

/// Runs `attention_tile` on a 64 × 64 tile of random bf16 queries and keys
/// in [-1, 1) and checks every weight against the f64 reference.
///
/// The bound, per row `i` (`u = 2^-24`, `D` the head dimension): the
/// products of two bf16 are exact in f32; the tensor cores sum them in f32,
/// truncating rather than rounding and aligning each k-step's terms to the
/// largest, so `|ŝ − s| ≤ 4·D·u·Σ_d |q_d·k_d|` covers the four k-steps with
/// room to spare (an error analysis of the tensor cores' accumulation:
/// Fasi et al., "Numerical behavior of NVIDIA tensor cores", 2021); the
/// scaling and the subtraction of the row maximum `m` round once each,
/// `u·(|s| + |m|)`. With `ε_i` the largest of these over the row, each
/// exponent is off by at most `2ε_i` and `expf` by 2 ulps, the 64-term sum
/// by `64u` and the division by `u`: `|p̂ − p| / p ≤ 4ε_i + 80u`. A dropped
/// k-step or a misplaced fragment moves a score by O(1), far outside it.
pub fn check(gpu: &Gpu) -> Result<bool> {
    let name = ATTENTION_TILE_KERNEL.name();
    if !has_tensor_cores(gpu) {
        println!(
            "{name:<34} skipped: needs an sm_80 or later cubin ({})",
            gpu.image()
        );
        return Ok(true);
    }
    let scale = 1.0 / (HEAD_DIM as f32).sqrt();
    let to_bf16 = |v: f32| bf16::narrow(v / 8.0);
    let q: Vec<bf16> = super::inputs(ATTENTION_TILE * HEAD_DIM, 4)
        .into_iter()
        .map(to_bf16)
        .collect();
    let k: Vec<bf16> = super::inputs(ATTENTION_TILE * HEAD_DIM, 5)
        .into_iter()
        .map(to_bf16)
        .collect();

    let (dq, dk) = (gpu.to_device(&q)?, gpu.to_device(&k)?);
    let mut dp = gpu.zeroed::<f32>(ATTENTION_TILE * ATTENTION_TILE)?;
    // SAFETY: dq and dk hold ATTENTION_TILE·HEAD_DIM bf16 and dp
    // ATTENTION_TILE² f32, three distinct allocations (the handle checks the
    // parameter types); one block of ATTENTION_THREADS, as its `# Safety`
    // asks.
    unsafe {
        gpu.launch(
            ATTENTION_TILE_KERNEL,
            LaunchConfig::linear(1, ATTENTION_THREADS),
            gpu.stream(),
            (&dq, &dk, &mut dp, scale),
        )
    }?;
    gpu.synchronize(name)?;
    let p = dp.to_vec()?;

    let (q, k): (Vec<f64>, Vec<f64>) = (
        q.iter().map(|x| f64::from(x.widen())).collect(),
        k.iter().map(|x| f64::from(x.widen())).collect(),
    );
    let (mut worst, mut worst_bound, mut ok, mut at_7_9) = (0.0f64, 0.0f64, true, 0.0);
    for i in 0..ATTENTION_TILE {
        let qi = &q[i * HEAD_DIM..][..HEAD_DIM];
        let key = |j: usize| &k[j * HEAD_DIM..][..HEAD_DIM];
        let s: Vec<f64> = (0..ATTENTION_TILE)
            .map(|j| f64::from(scale) * qi.iter().zip(key(j)).map(|(a, b)| a * b).sum::<f64>())
            .collect();
        let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let eps = (0..ATTENTION_TILE)
            .map(|j| {
                let magnitude: f64 = qi.iter().zip(key(j)).map(|(a, b)| (a * b).abs()).sum();
                f64::from(scale) * 4.0 * HEAD_DIM as f64 * U * magnitude
                    + U * (s[j].abs() + m.abs())
            })
            .fold(0.0, f64::max);
        let bound = 4.0 * eps + 80.0 * U;
        let terms: Vec<f64> = s.iter().map(|&x| (x - m).exp()).collect();
        let total: f64 = terms.iter().sum();
        for (j, t) in terms.iter().enumerate() {
            let want = t / total;
            if (i, j) == (7, 9) {
                at_7_9 = want;
            }
            let rel = (f64::from(p[i * ATTENTION_TILE + j]) - want).abs() / want;
            worst = worst.max(rel);
            worst_bound = worst_bound.max(bound);
            ok &= rel <= bound;
        }
    }
    Ok(super::row(
        &format!("{name} 64×64 bf16, p[7][9]"),
        p[7 * ATTENTION_TILE + 9],
        format!("{at_7_9:.7}"),
        &format!("worst relative error {worst:.2e} ≤ {worst_bound:.2e}:"),
        ok,
    ))
}
