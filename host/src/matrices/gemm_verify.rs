//! A check of every element of a large GEMM result without the f64 product:
//! Freivalds projections (`C·x` against `A·(B·x)` in f64 for random sign
//! vectors `x`), each row within a bound derived from the f32
//! accumulation's error model, plus exact f64 checks of random elements
//! within [`GemmReference`](crate::matrices::GemmReference)'s rigorous
//! bound ([`gemm_element_bound`]). It costs `O((m + n) · k)` per
//! projection and `O(k)` per sampled element, against `O(m · n · k)` for
//! the full reference, and needs nothing but the host copies of A, B and C.
//!
//! The projection's bound. Row `i` of `C·x − A·(B·x)` is
//! `Σ_j x_j (C_ij − E_ij)` plus the f64 arithmetic's own error, `E` the
//! exact product of the inputs as the tensor cores read them (16-bit:
//! exactly; tf32: every candidate rounding, see below). In the
//! probabilistic model of rounding (Higham & Mary, *A new approach to
//! probabilistic rounding error analysis*, SIAM J. Sci. Comput. 2019: each
//! rounding `δ`, `|δ| ≤ u`, mean-independent of the earlier ones), `C_ij − E_ij`
//! is a sum of `k` terms `δ_t · s_t` (the partial sums, the products being
//! exact in f32) and the output's rounding `δ · C_ij`; every `|s_t|` and
//! `|C_ij|` is at most `Σ_k |a_ik b_kj| ≤ ‖a_i‖·‖b_j‖` (Cauchy–Schwarz).
//! By Azuma–Hoeffding the projection's row then lies within
//! `λ · √(k·u_acc² + u_out²) · ‖a_i‖ · ‖B‖_F` with probability at least
//! `1 − 2·exp(−λ²/2)`; with `λ = `[`LAMBDA`] (8) that is `2.5 · 10^-14` a
//! row. `u_acc = 2^-23` (twice f32's unit roundoff: a truncating
//! accumulation's one-ulp errors, as the tensor cores', fit it), `u_out`
//! the output type's. The signs `x` are random (±1), so a deterministic bias
//! in the errors (a truncation's) averages out as the model's errors do.
//! The f64 sums add `γ_(n+k+2) · (Σ_j |C_ij| + (|A|·|B|·1)_i)`, kept
//! rigorously.
//!
//! What it catches (shown at 2048³ and 8192³ in the tests): a dropped k-slab of 16,
//! one 128 × 256 tile copied from its neighbour, one row shifted by a
//! column, and one element off by more than the row's bound (about 20 at
//! 8192³ with inputs in [−1, 1], where |C| is about 30 typically). The
//! rigorous worst-case bound `γ_k · Σ|a·b|` that [`GemmReference`] keeps
//! grows like `k·u · k` and passes a dropped slab in most elements at
//! 8192³ (issue 40, item 6): the projections use the model; the sampled
//! elements keep the worst case.
//!
//! tf32: the tensor cores read the f32 inputs rounded to tf32 by the
//! kernel (ours: `cvt.rna`), truncated, or unrounded (the CUDA-core path
//! and the simulator). Each is a candidate: the result passes when all
//! projections pass for one of them.
//!
//! [`GemmReference`]: crate::matrices::GemmReference
use crate::matrices::{GemmInput, GemmOutput, GemmShape, Op, gemm_element_bound};
use crate::util::Rng;

/// The model bound's multiple of the standard deviation (see the module
/// docs).
pub const LAMBDA: f64 = 8.0;

/// The f32 accumulation's unit roundoff in the model (two of f32's).
const U_ACC: f64 = 1.0 / (1u64 << 23) as f64;

/// A failed check: what, where, and by how much.
#[derive(Debug, Clone, PartialEq)]
pub enum GemmMismatch {
    /// Row `row` of projection `projection`: `C·x` is `got`, `A·(B·x)`
    /// `want`, the bound `bound`.
    Projection {
        /// Which projection (0-based).
        projection: usize,
        /// The row of C.
        row: usize,
        /// `(C·x)_row`.
        got: f64,
        /// `(A·(B·x))_row` (the candidate rounding closest to it).
        want: f64,
        /// The row's bound.
        bound: f64,
    },
    /// Element `(row, col)` is `got`, the f64 reference `want`, the bound
    /// `bound`.
    Element {
        /// The row of C.
        row: usize,
        /// The column of C.
        col: usize,
        /// The result's element.
        got: f64,
        /// The exact value.
        want: f64,
        /// Its bound.
        bound: f64,
    },
    /// The inputs are not what the check takes.
    Unchecked(String),
}

impl std::fmt::Display for GemmMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GemmMismatch::Projection {
                projection,
                row,
                got,
                want,
                bound,
            } => write!(
                f,
                "projection {projection}, row {row}: C·x = {got}, A·(B·x) = {want}, \
                 |difference| {} > bound {bound}",
                (got - want).abs()
            ),
            GemmMismatch::Element {
                row,
                col,
                got,
                want,
                bound,
            } => write!(
                f,
                "C[{row}][{col}] = {got}, exact {want}, |difference| {} > bound {bound}",
                (got - want).abs()
            ),
            GemmMismatch::Unchecked(why) => write!(f, "not checked: {why}"),
        }
    }
}

/// How a check went: projections and elements checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GemmVerified {
    /// Projections that passed.
    pub projections: usize,
    /// Elements checked exactly.
    pub samples: usize,
    /// The largest `|C·x − A·(B·x)| / bound` over every row (below 1).
    pub worst_ratio: f64,
}

/// An operand as the check reads it: `op(X)` is `rows × cols`, stored
/// row-major with leading dimension `ld` (`op` T: `cols × rows` stored).
struct View<'a, I> {
    data: &'a [I],
    op: Op,
    ld: usize,
    rows: usize,
    cols: usize,
}

impl<I: GemmInput> View<'_, I> {
    /// Element `(r, c)` of `op(X)` under the rounding `round`.
    fn at(&self, r: usize, c: usize, round: Rounding) -> f64 {
        let i = match self.op {
            Op::N => r * self.ld + c,
            Op::T => c * self.ld + r,
        };
        round.apply::<I>(self.data[i])
    }

    /// `Σ_c f(X_rc) · v_c` for every row `r` of `op(X)`, in f64 (the loop
    /// order follows the storage): the products, bounds and norms below.
    fn weighted_rows(&self, v: &[f64], f: impl Fn(I) -> f64) -> Vec<f64> {
        let mut out = vec![0.0; self.rows];
        match self.op {
            Op::N => {
                for (r, o) in out.iter_mut().enumerate() {
                    let row = &self.data[r * self.ld..r * self.ld + self.cols];
                    *o = row.iter().zip(v).map(|(&x, &y)| f(x) * y).sum();
                }
            }
            Op::T => {
                for (c, &y) in v.iter().enumerate() {
                    let col = &self.data[c * self.ld..c * self.ld + self.rows];
                    for (o, &x) in out.iter_mut().zip(col) {
                        *o += f(x) * y;
                    }
                }
            }
        }
        out
    }

    /// `op(X) · v` in f64, the inputs under the rounding `round`.
    fn times(&self, v: &[f64], round: Rounding) -> Vec<f64> {
        self.weighted_rows(v, |x| round.apply::<I>(x))
    }

    /// `|op(X)| · |v|` (unrounded: used only in bounds).
    fn abs_times(&self, v: &[f64]) -> Vec<f64> {
        let abs: Vec<f64> = v.iter().map(|x| x.abs()).collect();
        self.weighted_rows(&abs, |x| x.to_f64().abs())
    }

    /// The squared Euclidean norm of every row of `op(X)`.
    fn row_norms2(&self) -> Vec<f64> {
        self.weighted_rows(&vec![1.0; self.cols], |x| x.to_f64().powi(2))
    }
}

/// How the kernel may have rounded an input before the tensor cores read
/// it (tf32 only; 16-bit inputs are read exactly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rounding {
    /// As given.
    Exact,
    /// To tf32, to nearest with ties away (`cvt.rna.tf32.f32`).
    Tf32Nearest,
    /// To tf32 by dropping the low 13 bits.
    Tf32Truncated,
}

impl Rounding {
    fn apply<I: GemmInput>(self, x: I) -> f64 {
        let v = x.to_f64();
        if self == Rounding::Exact {
            return v;
        }
        let bits = (v as f32).to_bits();
        let bits = match self {
            Rounding::Tf32Nearest => bits.wrapping_add(0x1000) & !0x1fff,
            _ => bits & !0x1fff,
        };
        f64::from(f32::from_bits(bits))
    }
}

/// The checker of results of one product `op(A) · op(B)` (one batch,
/// alpha 1, beta 0: what the bench times): what depends on A and B alone
/// (the projections `A·(B·x)` for every candidate rounding, the norms of
/// the bound) is computed once by [`GemmVerifier::new`], so that checking
/// several results (ours and cuBLAS's) costs one pass over each.
pub struct GemmVerifier<'a, I: GemmInput> {
    shape: GemmShape,
    a: View<'a, I>,
    b: View<'a, I>,
    /// The sign vectors.
    xs: Vec<Vec<f64>>,
    /// Per candidate rounding, `A·(B·x)` per projection.
    abxs: Vec<Vec<Vec<f64>>>,
    /// Per row: `λ · √(k·u_acc²) · ‖a_i‖ · ‖B‖_F` without `u_out` (the
    /// output type's), as `‖a_i‖ · ‖B‖_F`.
    norms: Vec<f64>,
    /// `(|A|·|B|·1)_i`.
    abs_ab: Vec<f64>,
    rng_seed: u64,
}

impl<'a, I: GemmInput> GemmVerifier<'a, I> {
    /// The checker of `op(A) · op(B)` for `shape` with `projections`
    /// random sign vectors from `seed`. `a` and `b` are the buffers as
    /// stored under `shape` (its leading dimensions and ops), finite.
    pub fn new(
        shape: &GemmShape,
        a: &'a [I],
        b: &'a [I],
        projections: usize,
        seed: u64,
    ) -> Result<Self, GemmMismatch> {
        let unchecked = |why: String| Err(GemmMismatch::Unchecked(why));
        if shape.batches != 1 {
            return unchecked(format!("{} batches: one only", shape.batches));
        }
        let Some((ea, eb, _)) = shape.extents() else {
            return unchecked("the extents overflow".into());
        };
        if a.len() < ea || b.len() < eb {
            return unchecked(format!(
                "A and B of {} and {} elements for extents {ea} and {eb}",
                a.len(),
                b.len()
            ));
        }
        if !(a[..ea].iter().all(|x| x.to_f64().is_finite())
            && b[..eb].iter().all(|x| x.to_f64().is_finite()))
        {
            return unchecked("a NaN or infinity among the inputs".into());
        }
        let (m, n, k) = (shape.m, shape.n, shape.k);
        let av = View {
            data: a,
            op: shape.op_a,
            ld: shape.lda,
            rows: m,
            cols: k,
        };
        let bv = View {
            data: b,
            op: shape.op_b,
            ld: shape.ldb,
            rows: k,
            cols: n,
        };
        let mut rng = Rng::new(seed);
        let xs: Vec<Vec<f64>> = (0..projections)
            .map(|_| {
                (0..n)
                    .map(|_| if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 })
                    .collect()
            })
            .collect();
        let candidates: &[Rounding] = if I::NAME == "tf32" {
            &[
                Rounding::Tf32Nearest,
                Rounding::Exact,
                Rounding::Tf32Truncated,
            ]
        } else {
            &[Rounding::Exact]
        };
        // Each projection of each candidate on a thread of its own (the
        // products are the verifier's whole cost: 8192³ takes seconds each).
        let abxs = std::thread::scope(|scope| {
            let (av, bv) = (&av, &bv);
            let handles: Vec<Vec<_>> = candidates
                .iter()
                .map(|&round| {
                    xs.iter()
                        .map(|x| scope.spawn(move || av.times(&bv.times(x, round), round)))
                        .collect()
                })
                .collect();
            handles
                .into_iter()
                .map(|row| {
                    row.into_iter()
                        .map(|h| h.join().ok())
                        .collect::<Option<Vec<Vec<f64>>>>()
                })
                .collect::<Option<Vec<_>>>()
        });
        let Some(abxs) = abxs else {
            return unchecked("a projection's thread panicked".into());
        };
        // ‖B‖_F² is the sum of the squared norms of op(B)'s rows.
        let b_frob = bv.row_norms2().iter().sum::<f64>().sqrt();
        let norms = av
            .row_norms2()
            .iter()
            .map(|a2| a2.sqrt() * b_frob)
            .collect();
        let abs_ab = av.abs_times(&bv.abs_times(&vec![1.0; n]));
        Ok(Self {
            shape: *shape,
            a: av,
            b: bv,
            xs,
            abxs,
            norms,
            abs_ab,
            rng_seed: seed ^ 0x9e37_79b9_7f4a_7c15,
        })
    }

    /// Checks `c` (as stored under the shape's `ldc`, finite) with the
    /// projections and `samples` exact elements (see the module docs).
    pub fn check<O: GemmOutput<I>>(
        &self,
        c: &[O],
        samples: usize,
    ) -> Result<GemmVerified, GemmMismatch> {
        let (m, n, k) = (self.shape.m, self.shape.n, self.shape.k);
        let ldc = self.shape.ldc;
        let need = (m - 1) * ldc + n;
        if c.len() < need {
            return Err(GemmMismatch::Unchecked(format!(
                "C of {} elements for an extent of {need}",
                c.len()
            )));
        }
        // The model's bound per row: λ · √(k·u_acc² + u_out²) · ‖a_i‖ · ‖B‖_F,
        // inputs rounded to tf32 at most 2^-10 larger each; the f64 sums'
        // own error γ_(n+k+2) (Σ_j |C_ij| + (|A|·|B|·1)_i).
        let grow = if I::NAME == "tf32" {
            (1.0 + 2f64.powi(-10)).powi(2)
        } else {
            1.0
        };
        let u_out = 2f64.powi(-O::PRECISION);
        let sigma =
            (k as f64 * U_ACC * U_ACC + u_out * u_out).sqrt() * (1.0 + k as f64 * U_ACC) * grow;
        let gamma64 = (n + k + 2) as f64 * f64::EPSILON;
        let tiny = f64::from(f32::MIN_POSITIVE) * (k as f64 + 2.0) * n as f64;
        // One pass over C: every projection, |C| per row, finiteness.
        let p = self.xs.len();
        let mut cxs = vec![vec![0.0; m]; p];
        let mut bounds = vec![0.0; m];
        for i in 0..m {
            let row = &c[i * ldc..i * ldc + n];
            let mut abs = 0.0;
            for (j, v) in row.iter().enumerate() {
                let v = v.to_f64();
                if !v.is_finite() {
                    return Err(GemmMismatch::Element {
                        row: i,
                        col: j,
                        got: v,
                        want: f64::NAN,
                        bound: 0.0,
                    });
                }
                abs += v.abs();
                for (cx, x) in cxs.iter_mut().zip(&self.xs) {
                    cx[i] += v * x[j];
                }
            }
            bounds[i] = LAMBDA * sigma * self.norms[i] + gamma64 * (abs + self.abs_ab[i]) + tiny;
        }
        // The first candidate rounding whose every projection passes; else
        // the worst row of the candidate that came closest.
        let mut closest: Option<(f64, GemmMismatch)> = None;
        let mut passed = None;
        for abx in &self.abxs {
            let mut worst: (f64, Option<GemmMismatch>) = (0.0, None);
            for (q, (cx, abx)) in cxs.iter().zip(abx).enumerate() {
                for i in 0..m {
                    let ratio = (cx[i] - abx[i]).abs() / bounds[i];
                    if ratio.is_nan() || ratio > worst.0 {
                        worst = (
                            if ratio.is_nan() { f64::INFINITY } else { ratio },
                            Some(GemmMismatch::Projection {
                                projection: q,
                                row: i,
                                got: cx[i],
                                want: abx[i],
                                bound: bounds[i],
                            }),
                        );
                    }
                }
            }
            match worst {
                (ratio, _) if ratio <= 1.0 => {
                    passed = Some(ratio);
                    break;
                }
                (ratio, Some(mismatch)) => {
                    if closest.as_ref().is_none_or(|(r, _)| ratio < *r) {
                        closest = Some((ratio, mismatch));
                    }
                }
                (_, None) => {}
            }
        }
        let Some(worst_ratio) = passed else {
            return Err(closest.map_or(
                GemmMismatch::Unchecked("no projection".into()),
                |(_, mismatch)| mismatch,
            ));
        };
        // Random elements against the rigorous bound.
        let mut rng = Rng::new(self.rng_seed);
        for _ in 0..samples {
            let (i, j) = (rng.below(m as u64) as usize, rng.below(n as u64) as usize);
            let (mut s, mut abs) = (0.0, 0.0);
            for kk in 0..k {
                let prod = self.a.at(i, kk, Rounding::Exact) * self.b.at(kk, j, Rounding::Exact);
                s += prod;
                abs += prod.abs();
            }
            let bound = gemm_element_bound::<I, O>(k, 1.0, s, abs, 0.0);
            let got = c[i * ldc + j].to_f64();
            if (got - s).abs() > bound {
                return Err(GemmMismatch::Element {
                    row: i,
                    col: j,
                    got,
                    want: s,
                    bound,
                });
            }
        }
        Ok(GemmVerified {
            projections: p,
            samples,
            worst_ratio,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    /// A synthetic bf16 NT product (the bench's layout) whose exact result
    /// costs `O(n·k)`: row `i` of A is `s_i · v_(i mod 4)` (`s_i` a power of
    /// two, so every element is exact in bf16), so `C_ij = s_i · (v_g · Bᵀ)_j`.
    /// C is that rounded to f32, with an error of the accumulation's size
    /// added (a few ulps of the partial sums' size: `±4·√k·2^-24·rms`).
    struct Synthetic {
        shape: GemmShape,
        a: Vec<bf16>,
        b: Vec<bf16>,
        c: Vec<f32>,
        /// `s_i` and `v_g` (f32), for the faults.
        scale: Vec<f32>,
        v: Vec<Vec<f32>>,
    }

    fn synthetic(size: usize) -> Synthetic {
        let (m, n, k) = (size, size, size);
        let mut rng = Rng::new(40);
        let uniform = |rng: &mut Rng| bf16::from_f32(rng.uniform() as f32 * 2.0 - 1.0);
        let v: Vec<Vec<f32>> = (0..4)
            .map(|_| (0..k).map(|_| uniform(&mut rng).to_f32()).collect())
            .collect();
        let scale: Vec<f32> = (0..m)
            .map(|_| [1.0, -1.0, 0.5, -0.5][rng.below(4) as usize])
            .collect();
        let a: Vec<bf16> = (0..m)
            .flat_map(|i| {
                let (s, row) = (scale[i], &v[i % 4]);
                row.iter().map(move |&x| bf16::from_f32(s * x))
            })
            .collect();
        // B stored n × k (op T).
        let b: Vec<bf16> = (0..n * k).map(|_| uniform(&mut rng)).collect();
        let bf: Vec<f32> = b.iter().map(|x| x.to_f32()).collect();
        let w: Vec<Vec<f64>> = v
            .iter()
            .map(|vg| {
                (0..n)
                    .map(|j| {
                        let col = &bf[j * k..(j + 1) * k];
                        vg.iter().zip(col).map(|(&x, &y)| x as f64 * y as f64).sum()
                    })
                    .collect()
            })
            .collect();
        let noise = 4.0 * (k as f64).sqrt() * 2f64.powi(-24) * (k as f64 / 9.0).sqrt();
        let c: Vec<f32> = (0..m * n)
            .map(|e| {
                let (i, j) = (e / n, e % n);
                let exact = scale[i] as f64 * w[i % 4][j];
                (exact + (rng.uniform() * 2.0 - 1.0) * noise) as f32
            })
            .collect();
        Synthetic {
            shape: GemmShape::with_ops(m, n, k, Op::N, Op::T),
            a,
            b,
            c,
            scale,
            v,
        }
    }

    impl Synthetic {
        fn verifier(&self) -> GemmVerifier<'_, bf16> {
            GemmVerifier::new(&self.shape, &self.a, &self.b, 2, 9).expect("finite inputs")
        }

        /// C without the products of k in `slab` (one k-step skipped).
        fn drop_slab(&self, slab: std::ops::Range<usize>) -> Vec<f32> {
            let (n, k) = (self.shape.n, self.shape.k);
            let mut c = self.c.clone();
            for (i, row) in c.chunks_mut(n).enumerate() {
                let vg = &self.v[i % 4];
                for (j, x) in row.iter_mut().enumerate() {
                    let part: f64 = slab
                        .clone()
                        .map(|kk| vg[kk] as f64 * self.b[j * k + kk].to_f64())
                        .sum();
                    *x = (*x as f64 - self.scale[i] as f64 * part) as f32;
                }
            }
            c
        }
    }

    /// At 8192³ (bf16, NT, as the bench): see [`faults_are_caught`].
    #[test]
    #[ignore = "8192³ takes about 3 CPU minutes in a debug build; run it with \
                `cargo test --release -p cuda-kernels-host -- --ignored gemm_verify`"]
    fn faults_are_caught_at_8192_cubed() {
        faults_are_caught(8192);
    }

    /// [`faults_are_caught`] at 2048³, in every test run.
    #[test]
    fn faults_are_caught_at_2048_cubed() {
        faults_are_caught(2048);
    }

    /// At `size`³ (bf16, NT, as the bench): the clean result passes, and
    /// each planted fault is caught: a k-slab of 16 dropped everywhere, one
    /// 128 × 256 tile copied from its right neighbour, one row shifted by a
    /// column, one element off by 32.
    fn faults_are_caught(size: usize) {
        let s = synthetic(size);
        let n = s.shape.n;
        let verifier = s.verifier();
        let check = |c: &[f32]| verifier.check::<f32>(c, 1024);
        let ok = check(&s.c).expect("the clean result passes");
        assert!(ok.worst_ratio < 0.5, "{ok:?}");

        let dropped = s.drop_slab(size / 2..size / 2 + 16);
        let e = check(&dropped).expect_err("a dropped k-slab");
        assert!(matches!(e, GemmMismatch::Projection { .. }), "{e}");

        let mut tile = s.c.clone();
        let (r0, c0) = (5 * 128, 7 * 256);
        for r in r0..r0 + 128 {
            for col in c0..c0 + 256 {
                tile[r * n + col] = s.c[r * n + col + 256];
            }
        }
        let e = check(&tile).expect_err("a wrong tile");
        assert!(
            matches!(e, GemmMismatch::Projection { row, .. } if (r0..r0 + 128).contains(&row)),
            "{e}"
        );

        let mut shifted = s.c.clone();
        let r = size / 8 + 3;
        shifted[r * n + 1..(r + 1) * n].copy_from_slice(&s.c[r * n..(r + 1) * n - 1]);
        let e = check(&shifted).expect_err("a shifted row");
        assert!(
            matches!(e, GemmMismatch::Projection { row, .. } if row == r),
            "{e}"
        );

        let mut element = s.c.clone();
        element[3 * n + 5] += 32.0;
        let e = check(&element).expect_err("a wrong element");
        assert!(matches!(e, GemmMismatch::Projection { row: 3, .. }), "{e}");
    }
}

#[cfg(test)]
mod small {
    use super::*;

    /// tf32 at 96 × 128 × 1024 (NN): a result accumulated in f32 in
    /// order, from inputs rounded to tf32 by `cvt.rna` and by truncation,
    /// passes (the model's bound holds a real accumulation); the same
    /// result with a k-slab of 8 dropped does not.
    #[test]
    fn an_f32_accumulation_passes_and_a_dropped_slab_does_not() {
        let (m, n, k) = (96, 128, 1024);
        let mut rng = Rng::new(3);
        let a: Vec<f32> = (0..m * k)
            .map(|_| rng.uniform() as f32 * 2.0 - 1.0)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|_| rng.uniform() as f32 * 2.0 - 1.0)
            .collect();
        let shape = GemmShape::dense(m, n, k);
        let verifier = GemmVerifier::new(&shape, &a, &b, 3, 5).expect("finite");
        for round in [
            Rounding::Tf32Nearest,
            Rounding::Tf32Truncated,
            Rounding::Exact,
        ] {
            let r = |x: f32| round.apply::<f32>(x) as f32;
            let product = |skip: std::ops::Range<usize>| -> Vec<f32> {
                let mut c = vec![0f32; m * n];
                for i in 0..m {
                    for j in 0..n {
                        let mut acc = 0f32;
                        for kk in (0..k).filter(|kk| !skip.contains(kk)) {
                            acc = r(a[i * k + kk]).mul_add(r(b[kk * n + j]), acc);
                        }
                        c[i * n + j] = acc;
                    }
                }
                c
            };
            let ok = verifier.check::<f32>(&product(0..0), 256);
            assert!(ok.is_ok(), "{round:?}: {ok:?}");
            let e = verifier.check::<f32>(&product(512..520), 0);
            assert!(
                matches!(e, Err(GemmMismatch::Projection { .. })),
                "{round:?}: {e:?}"
            );
        }
    }
}
