//! The GEMM family's helper kernels that the simulator's GEMM path does not
//! reach by itself: the staging copies (plain and transposed) and the
//! split-k reductions, checked against the index formulas of their
//! contracts.
use super::*;
use cuda_kernels_gpu::device::float16::{bf16, f16};
use cuda_kernels_gpu::gemm::{
    GEMM_SPLIT_REDUCE_BF16, GEMM_SPLIT_REDUCE_F16, GEMM_SPLIT_REDUCE_F32, GEMM_STAGE_B16,
    GEMM_STAGE_B32, GEMM_STAGE_TRANSPOSED_B32, REDUCE_THREADS, STAGE_THREADS, STAGE_TILE,
    STAGE_TILE_ROWS, StageParams,
};

/// Distinct words: `seed`'s index pattern, never zero.
fn words(n: usize, seed: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) ^ seed | 1)
        .collect()
}

/// The f32 value of f16 bits (normal and zero values; the test's are).
fn f16_value(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((bits >> 10) & 0x1f) as i32;
    let frac = (bits & 0x3ff) as f32 / 1024.0;
    match exp {
        0 => sign * frac * 2f32.powi(-14),
        _ => sign * (1.0 + frac) * 2f32.powi(exp - 15),
    }
}

/// Launches the plain staging entry `kernel` over `src` (`rows` rows of
/// `ld_src` a batch, `batch_src` apart, `batches` of them) for `cols`
/// columns into rows of `ld_dst`, and checks every staged element and the
/// zeros after the columns.
fn check_plain_stage<W: Copy + PartialEq + std::fmt::Debug + From<u8>>(
    kernel: Kernel<StageParams<W>>,
    src: &[W],
    (rows, ld_src, batch_src, batches): (usize, usize, usize, usize),
    (cols, ld_dst): (usize, usize),
) {
    let (ds, dd) = (Buf::from(src), Buf::<W>::zeroed(batches * rows * ld_dst));
    // SAFETY: src holds every element of every batch; dst batches · rows ·
    // ld_dst, 16-byte aligned (an allocation), ld_dst whole 16-byte chunks.
    unsafe {
        launch(
            kernel,
            shape([2, 1, batches as u32], [STAGE_THREADS, 1, 1], 0),
            (
                ds.ptr().cast_const(),
                dd.ptr(),
                rows as u32,
                cols as u32,
                ld_src as u32,
                ld_dst as u32,
                batch_src as u64,
            ),
        )
    }
    .unwrap();
    let got = dd.to_vec();
    for z in 0..batches {
        for r in 0..rows {
            for c in 0..ld_dst {
                let want = if c < cols {
                    src[z * batch_src + r * ld_src + c]
                } else {
                    W::from(0)
                };
                let name = kernel.name();
                assert_eq!(
                    got[(z * rows + r) * ld_dst + c],
                    want,
                    "{name} [{z}][{r}][{c}]"
                );
            }
        }
    }
}

#[test]
pub(super) fn gemm_staging_and_split_reduce() {
    // The plain staging copies: 5 rows per batch, ld 17, an odd batch
    // stride; 13 16-bit columns into rows of 16, 7 32-bit ones into rows of
    // 8 (zeros past the columns).
    let (rows, ld_src, batches) = (5usize, 17usize, 2usize);
    let batch_src = rows * ld_src + 3;
    let src16: Vec<u16> = words(batch_src * batches, 7)
        .iter()
        .map(|&w| w as u16 | 1)
        .collect();
    let plain = (rows, ld_src, batch_src, batches);
    check_plain_stage(GEMM_STAGE_B16, &src16, plain, (13, 16));
    check_plain_stage(
        GEMM_STAGE_B32,
        &words(batch_src * batches, 9),
        plain,
        (7, 8),
    );

    // The transposing copy: 37 × 45 per batch, ld 50, into 45 rows of 40.
    let (rows, cols, ld_src, ld_dst) = (37usize, 45usize, 50usize, 40usize);
    let batch_src = rows * ld_src + 1;
    let src = words(batch_src * batches, 11);
    let (ds, dd) = (Buf::from(&src), Buf::<u32>::zeroed(batches * cols * ld_dst));
    let tile = STAGE_TILE as usize;
    // SAFETY: src holds every element; dst batches · cols · ld_dst; grid x
    // covers the columns in tiles, y the rows (one step of the grid-stride
    // loop is exercised by grid y = 1).
    unsafe {
        launch(
            GEMM_STAGE_TRANSPOSED_B32,
            shape(
                [cols.div_ceil(tile) as u32, 1, batches as u32],
                [STAGE_TILE, STAGE_TILE_ROWS, 1],
                0,
            ),
            (
                ds.ptr().cast_const(),
                dd.ptr(),
                rows as u32,
                cols as u32,
                ld_src as u32,
                ld_dst as u32,
                batch_src as u64,
            ),
        )
    }
    .unwrap();
    let got = dd.to_vec();
    for z in 0..batches {
        for c in 0..cols {
            for r in 0..ld_dst {
                let want = if r < rows {
                    src[z * batch_src + r * ld_src + c]
                } else {
                    0
                };
                assert_eq!(
                    got[(z * cols + c) * ld_dst + r],
                    want,
                    "transposed [{z}][{c}][{r}]"
                );
            }
        }
    }

    // The split-k reductions: C = alpha · Σ_s W_s + beta · C over 3 splits,
    // 5 × 7 per batch in rows of 8 (the workspace's padded rows), C with
    // ldc 9 and an odd batch stride; 2 blocks along y for the 5 rows (the
    // row loop runs).
    let (splits, m, n, ldw, ldc) = (3usize, 5usize, 7usize, 8usize, 9usize);
    let w_batch = m * ldw;
    let split_stride = batches * w_batch;
    let c_batch = m * ldc + 1;
    let (alpha, beta) = (0.5f32, -1.0f32);
    let w = values(splits * split_stride, 31);
    let c0 = values(batches * c_batch, 32);
    let want = |z: usize, r: usize, col: usize| {
        let mut sum = 0f32;
        for s in 0..splits {
            sum += w[s * split_stride + z * w_batch + r * ldw + col];
        }
        beta.mul_add(c0[z * c_batch + r * ldc + col], alpha * sum)
    };
    let cfg = shape([1, 2, batches as u32], [REDUCE_THREADS, 1, 1], 0);
    let dw = Buf::from(&w);
    let (wp, m32, n32, ldc32) = (dw.ptr().cast_const(), m as u32, n as u32, ldc as u32);
    let (ldw32, s32, ss) = (ldw as u32, splits as u32, split_stride as u64);
    let (wb, cb) = (w_batch as u64, c_batch as u64);
    // The reductions' arguments, one output type and beta apart.
    macro_rules! args {
        ($c:expr, $beta:expr) => {
            (
                wp, $c, m32, n32, ldw32, ldc32, s32, ss, wb, cb, alpha, $beta,
            )
        };
    }
    let dc = Buf::from(&c0);
    // SAFETY: w holds splits · split_stride f32; C every batch's m rows of
    // ldc; grid z the batches.
    unsafe { launch(GEMM_SPLIT_REDUCE_F32, cfg, args!(dc.ptr(), beta)) }.unwrap();
    let c16: Vec<u16> = vec![0; batches * c_batch];
    let (dbf, dhf) = (
        Buf::<bf16>::zeroed(c16.len()),
        Buf::<f16>::zeroed(c16.len()),
    );
    // Beta 0 for the 16-bit outputs (C not read): alpha · Σ rounded.
    // SAFETY: as above.
    unsafe { launch(GEMM_SPLIT_REDUCE_BF16, cfg, args!(dbf.ptr(), 0.0)) }.unwrap();
    // SAFETY: as above.
    unsafe { launch(GEMM_SPLIT_REDUCE_F16, cfg, args!(dhf.ptr(), 0.0)) }.unwrap();
    let (got, got_bf, got_hf) = (dc.to_vec(), dbf.to_vec(), dhf.to_vec());
    for z in 0..batches {
        for r in 0..m {
            for col in 0..n {
                let i = z * c_batch + r * ldc + col;
                assert_eq!(
                    got[i],
                    want(z, r, col),
                    "split_reduce_f32 [{z}][{r}][{col}]"
                );
                let exact = want(z, r, col) - beta * c0[i];
                let (b, h) = (got_bf[i].to_bits(), got_hf[i].to_bits());
                let bf = f32::from_bits((b as u32) << 16);
                assert!(
                    (bf - exact).abs() <= exact.abs() * 2f32.powi(-8) + 1e-30,
                    "bf16 [{i}]: {bf} vs {exact}"
                );
                let hf = f16_value(h);
                assert!(
                    (hf - exact).abs() <= exact.abs() * 2f32.powi(-11) + 2f32.powi(-24),
                    "f16 [{i}]: {hf} vs {exact}"
                );
            }
        }
    }
    // Untouched: C's gap between rows (columns n..ldc) and between batches.
    assert_eq!(got[n], c0[n], "split_reduce_f32 wrote past a row");
}
