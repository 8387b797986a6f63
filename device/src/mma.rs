//! Warp-level matrix multiply-accumulate on the tensor cores (sm_80 and
//! later): the fragments and `mma.sync` of m16n8k16 (f16, bf16 → f32) and
//! m16n8k8 (tf32 → f32), `ldmatrix` (x1, x2, x4, `.trans`), and `cp.async`
//! (4, 8, 16 bytes) with its commit and wait groups.
//!
//! Which element of a tile each lane holds is data, not index arithmetic
//! repeated in kernels: a [`Layout`] gives an element's `(row, col)` from
//! the lane and the element's index in the lane's fragment (PTX ISA,
//! "Matrix Fragments for mma.m16n8k16" and "… m16n8k8"). The kernels place
//! their results with these layouts, and the simulator's `mma.sync` and
//! `ldmatrix` read them to know which lane holds what. `docs/tensor-cores.md`
//! draws them.
//!
//! The instructions here exist on the GPU from sm_80 (ldmatrix from sm_75):
//! a kernel that uses them is compiled only in the per-architecture builds
//! of sm_80 and later (`#[cfg(any(not(target_arch = "nvptx64"),
//! target_feature = "sm_80"))]`), and the host launches it only on such a
//! GPU.
//!
//! Every function is a warp collective where PTX says so (`mma.sync`,
//! `ldmatrix`: all 32 lanes, converged); the simulator runs them with warp
//! shuffles, so a lane that skips one is reported as for a shuffle.
//!
//! `cp.async` on the simulator: the copy is made at the `wait_group` that
//! retires its group, and until then the destination holds `0xff` bytes (a
//! NaN in every float type): a kernel that reads the data before waiting
//! reads NaNs, which its test sees.
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;
use core::marker::PhantomData;

use crate::float16::{bf16, f16};

/// Where each element of a fragment sits in its tile: element `e` of lane
/// `lane` is at `g·g_step + t·t_step + Σ bit_i(e)·e_steps[i]`, with
/// `g = lane / 4` and `t = lane % 4` (the "groupID" and "threadID_in_group"
/// of the PTX ISA), each step a `(row, col)` pair. Every fragment of
/// `mma.m16n8k*` and of `ldmatrix` has this form (CuTe writes the same as a
/// layout of shape `((4, 8), elems)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Rows of the tile.
    pub rows: u32,
    /// Columns of the tile.
    pub cols: u32,
    /// Elements per lane.
    pub elems: u32,
    /// The step of `g = lane / 4`.
    pub g_step: (u32, u32),
    /// The step of `t = lane % 4`.
    pub t_step: (u32, u32),
    /// The step of each bit of the element index (unused bits `(0, 0)`).
    pub e_steps: [(u32, u32); 3],
}

impl Layout {
    /// The `(row, col)` of element `e` of lane `lane`.
    #[inline(always)]
    pub const fn coord(&self, lane: u32, e: u32) -> (u32, u32) {
        let (g, t) = (lane / 4, lane % 4);
        let mut row = g * self.g_step.0 + t * self.t_step.0;
        let mut col = g * self.g_step.1 + t * self.t_step.1;
        let mut i = 0;
        while i < 3 {
            if e >> i & 1 == 1 {
                row += self.e_steps[i].0;
                col += self.e_steps[i].1;
            }
            i += 1;
        }
        (row, col)
    }
}

/// m16n8k16, A (16 × 16, row = m, col = k), 16-bit elements: 8 per lane,
/// in 4 registers of 2 (element `e` is half `e % 2` of register `e / 2`).
pub const A_M16K16: Layout = Layout {
    rows: 16,
    cols: 16,
    elems: 8,
    g_step: (1, 0),
    t_step: (0, 2),
    e_steps: [(0, 1), (8, 0), (0, 8)],
};

/// m16n8k16, B (16 × 8, row = k, col = n), 16-bit elements: 4 per lane in 2
/// registers.
pub const B_K16N8: Layout = Layout {
    rows: 16,
    cols: 8,
    elems: 4,
    g_step: (0, 1),
    t_step: (2, 0),
    e_steps: [(1, 0), (8, 0), (0, 0)],
};

/// The f32 accumulator C and D of both shapes (16 × 8): 4 per lane.
pub const C_M16N8: Layout = Layout {
    rows: 16,
    cols: 8,
    elems: 4,
    g_step: (1, 0),
    t_step: (0, 2),
    e_steps: [(0, 1), (8, 0), (0, 0)],
};

/// m16n8k8 tf32, A (16 × 8): 4 per lane, one per register.
pub const A_M16K8_TF32: Layout = Layout {
    rows: 16,
    cols: 8,
    elems: 4,
    g_step: (1, 0),
    t_step: (0, 1),
    e_steps: [(8, 0), (0, 4), (0, 0)],
};

/// m16n8k8 tf32, B (8 × 8, row = k, col = n): 2 per lane.
pub const B_K8N8_TF32: Layout = Layout {
    rows: 8,
    cols: 8,
    elems: 2,
    g_step: (0, 1),
    t_step: (1, 0),
    e_steps: [(4, 0), (0, 0), (0, 0)],
};

/// One 8 × 8 matrix of 16-bit elements as `ldmatrix` gives it (without
/// `.trans`): 2 per lane, in one register. With `.trans` a lane gets the
/// transposed coordinates.
pub const LDMATRIX_8X8: Layout = Layout {
    rows: 8,
    cols: 8,
    elems: 2,
    g_step: (1, 0),
    t_step: (0, 2),
    e_steps: [(0, 1), (0, 0), (0, 0)],
};

/// A 16-bit element type of `mma.m16n8k16`: [`f16`](struct@f16) or [`bf16`].
pub trait MmaHalf: Copy + 'static {
    /// Its PTX type name (`f16`, `bf16`).
    const PTX: &'static str;
    /// The bits.
    fn bits(self) -> u16;
    /// The value as f32 (exact).
    fn to_f32(self) -> f32;
}

impl MmaHalf for f16 {
    const PTX: &'static str = "f16";
    fn bits(self) -> u16 {
        self.to_bits()
    }
    fn to_f32(self) -> f32 {
        self.widen()
    }
}

impl MmaHalf for bf16 {
    const PTX: &'static str = "bf16";
    fn bits(self) -> u16 {
        self.to_bits()
    }
    fn to_f32(self) -> f32 {
        self.widen()
    }
}

/// One lane's part of the A operand of m16n8k16 ([`A_M16K16`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragA<T> {
    /// The 4 registers (pairs of elements, the lower first).
    pub regs: [u32; 4],
    _t: PhantomData<T>,
}

/// One lane's part of the B operand of m16n8k16 ([`B_K16N8`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragB<T> {
    /// The 2 registers.
    pub regs: [u32; 2],
    _t: PhantomData<T>,
}

/// One lane's part of the A operand of m16n8k8 tf32 ([`A_M16K8_TF32`]):
/// f32 bits, of which the tensor core reads the upper 19.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragATf32 {
    /// The 4 registers.
    pub regs: [u32; 4],
}

/// One lane's part of the B operand of m16n8k8 tf32 ([`B_K8N8_TF32`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragBTf32 {
    /// The 2 registers.
    pub regs: [u32; 2],
}

macro_rules! from_fn {
    ($frag:ident, $layout:ident, $n:literal) => {
        impl<T: MmaHalf> $frag<T> {
            /// The registers as they are (from `ldmatrix`, or built by hand).
            #[inline(always)]
            pub const fn from_regs(regs: [u32; $n]) -> Self {
                Self {
                    regs,
                    _t: PhantomData,
                }
            }

            /// This lane's fragment of the tile whose element `(row, col)`
            /// is `at(row, col)` (the lane's coordinates from the layout).
            #[inline(always)]
            pub fn from_fn(lane: u32, mut at: impl FnMut(u32, u32) -> T) -> Self {
                let mut regs = [0u32; $n];
                let mut e = 0;
                while e < $layout.elems {
                    let (r, c) = $layout.coord(lane, e);
                    regs[(e / 2) as usize] |= (at(r, c).bits() as u32) << (16 * (e % 2));
                    e += 1;
                }
                Self::from_regs(regs)
            }
        }
    };
}
from_fn!(FragA, A_M16K16, 4);
from_fn!(FragB, B_K16N8, 2);

/// `d = a · b + c` over a 16 × 8 × 16 tile of the warp
/// (`mma.sync.aligned.m16n8k16.row.col.f32.<T>.<T>.f32`): each lane gives
/// its fragments and gets its 4 elements of D ([`C_M16N8`]). A warp
/// collective (all 32 lanes, converged).
///
/// One tile, run here on the simulator (on a GPU the same kernel runs from
/// an sm_80 or later image):
/// ```
/// use std::ffi::c_void;
/// use cuda_kernels_device::float16::bf16;
/// use cuda_kernels_device::sim::{self, LaunchShape, SimError, memory::Allocation};
///
/// mod k {
///     use cuda_kernels_device::float16::bf16;
///     use cuda_kernels_device::mma::{C_M16N8, FragA, FragB, mma_m16n8k16};
///     use cuda_kernels_device::thread;
///     cuda_kernels_device::kernels! {
///         /// `d = a · b`: `a` 16 × 16, `b` 16 × 8, `d` 16 × 8, row-major.
///         ///
///         /// # Safety
///         /// Those sizes; one warp.
///         pub fn tile(a: *const bf16, b: *const bf16, d: *mut f32) as TILE {
///             let lane = thread::thread_idx_x();
///             // SAFETY: (row, col) inside a (16 × 16) and b (16 × 8).
///             let fa = FragA::from_fn(lane, |r, c| unsafe { *a.add((r * 16 + c) as usize) });
///             let fb = FragB::from_fn(lane, |r, c| unsafe { *b.add((r * 8 + c) as usize) });
///             let out = mma_m16n8k16(fa, fb, [0.0; 4]);
///             for e in 0..4 {
///                 let (r, c) = C_M16N8.coord(lane, e);
///                 // SAFETY: inside d (16 × 8); each element one lane's.
///                 unsafe { *d.add((r * 8 + c) as usize) = out[e as usize] };
///             }
///         }
///     }
/// }
///
/// # fn main() -> Result<(), SimError> {
/// let a: Vec<bf16> = (0..256).map(|i| bf16::narrow((i % 7) as f32 - 3.0)).collect();
/// let b: Vec<bf16> = (0..128).map(|i| bf16::narrow((i % 5) as f32 * 0.5)).collect();
/// let (da, db) = (Allocation::new(512, 2, "a")?, Allocation::new(256, 2, "b")?);
/// let dd = Allocation::new(512, 4, "d")?;
/// let (mut pa, mut pb, mut pd) = (
///     da.ptr().cast::<bf16>(),
///     db.ptr().cast::<bf16>(),
///     dd.ptr().cast::<f32>(),
/// );
/// // SAFETY: each allocation holds the elements copied.
/// unsafe {
///     pa.copy_from(a.as_ptr(), 256);
///     pb.copy_from(b.as_ptr(), 128);
/// }
/// let params = [
///     (&raw mut pa).cast::<c_void>(),
///     (&raw mut pb).cast(),
///     (&raw mut pd).cast(),
/// ];
/// let shape = LaunchShape { grid: [1, 1, 1], block: [32, 1, 1], dynamic_shared_bytes: 0 };
/// let entry = k::TILE.sim_entry().expect("kernels! gives a host entry");
/// // SAFETY: the kernel's parameters, buffers of its sizes, one warp.
/// unsafe { sim::launch(k::TILE.name(), shape, entry, &params) }?;
/// for (i, j) in (0..16).flat_map(|i| (0..8).map(move |j| (i, j))) {
///     let want: f32 = (0..16).map(|k| a[i * 16 + k].widen() * b[k * 8 + j].widen()).sum();
///     // SAFETY: inside d.
///     assert_eq!(unsafe { pd.add(i * 8 + j).read() }, want); // small integers: exact
/// }
/// # Ok(())
/// # }
/// ```
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn mma_m16n8k16<T: MmaHalf>(a: FragA<T>, b: FragB<T>, c: [f32; 4]) -> [f32; 4] {
    #[cfg(not(target_arch = "nvptx64"))]
    return sim::mma(&A_M16K16, &a.regs, &B_K16N8, &b.regs, c, 16, |r, i| {
        let h = (r >> (16 * i)) as u16;
        match T::PTX {
            "f16" => f16::from_bits(h).widen(),
            _ => bf16::from_bits(h).widen(),
        }
    });
    #[cfg(target_arch = "nvptx64")]
    {
        macro_rules! mma16 {
            ($ty:literal) => {{
                let d: [u32; 4];
                let [a0, a1, a2, a3] = a.regs;
                let [b0, b1] = b.regs;
                let (d0, d1, d2, d3): (u32, u32, u32, u32);
                // SAFETY: registers only; the warp-uniform call is the caller's
                // (correctness) contract as for shuffles.
                unsafe {
                    asm!(
                        concat!("mma.sync.aligned.m16n8k16.row.col.f32.", $ty, ".", $ty,
                                ".f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, ",
                                "{{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};"),
                        d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
                        a0 = in(reg32) a0, a1 = in(reg32) a1, a2 = in(reg32) a2, a3 = in(reg32) a3,
                        b0 = in(reg32) b0, b1 = in(reg32) b1,
                        c0 = in(reg32) c[0].to_bits(), c1 = in(reg32) c[1].to_bits(),
                        c2 = in(reg32) c[2].to_bits(), c3 = in(reg32) c[3].to_bits(),
                        options(nostack, nomem, preserves_flags),
                    );
                }
                d = [d0, d1, d2, d3];
                d.map(f32::from_bits)
            }};
        }
        if T::PTX.len() == 3 {
            mma16!("f16")
        } else {
            mma16!("bf16")
        }
    }
}

/// `d = a · b + c` over a 16 × 8 × 8 tile in tf32
/// (`mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`): the tensor core
/// reads the upper 19 bits of each f32 of A and B (round them first with
/// [`to_tf32`] for round-to-nearest). A warp collective.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn mma_m16n8k8_tf32(a: FragATf32, b: FragBTf32, c: [f32; 4]) -> [f32; 4] {
    #[cfg(not(target_arch = "nvptx64"))]
    return sim::mma(
        &A_M16K8_TF32,
        &a.regs,
        &B_K8N8_TF32,
        &b.regs,
        c,
        8,
        |r, _| f32::from_bits(r & 0xffff_e000),
    );
    #[cfg(target_arch = "nvptx64")]
    {
        let [a0, a1, a2, a3] = a.regs;
        let [b0, b1] = b.regs;
        let (d0, d1, d2, d3): (u32, u32, u32, u32);
        // SAFETY: registers only (see mma_m16n8k16).
        unsafe {
            asm!(
                "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};",
                d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
                a0 = in(reg32) a0, a1 = in(reg32) a1, a2 = in(reg32) a2, a3 = in(reg32) a3,
                b0 = in(reg32) b0, b1 = in(reg32) b1,
                c0 = in(reg32) c[0].to_bits(), c1 = in(reg32) c[1].to_bits(),
                c2 = in(reg32) c[2].to_bits(), c3 = in(reg32) c[3].to_bits(),
                options(nostack, nomem, preserves_flags),
            );
        }
        [d0, d1, d2, d3].map(f32::from_bits)
    }
}

/// f32 → tf32 bits, nearest with ties away from zero
/// (`cvt.rna.tf32.f32`), the low 13 bits zero. As the GPU computes it (the
/// SASS of `cvt.rna.tf32.f32` is an integer add of `0x1000` to a finite
/// input's bits, skipped for an infinite or NaN one, then a mask): a finite
/// value rounds by adding half of the dropped unit to its bits (the carry
/// may reach the exponent: ∞ past the largest tf32), and ∞ and NaN are
/// truncated, so a NaN whose payload lies in the low 13 bits alone becomes
/// ∞ of its sign, and a signalling NaN stays signalling.
#[inline(always)]
pub fn to_tf32(x: f32) -> u32 {
    #[cfg(all(target_arch = "nvptx64", target_feature = "sm_80"))]
    {
        let d: u32;
        // SAFETY: a register-only conversion.
        unsafe {
            asm!("cvt.rna.tf32.f32 {d}, {x};", d = out(reg32) d, x = in(reg32) x.to_bits(),
                 options(nostack, nomem, pure, preserves_flags));
        }
        d
    }
    #[cfg(not(all(target_arch = "nvptx64", target_feature = "sm_80")))]
    {
        let bits = x.to_bits();
        if !x.is_finite() {
            return bits & 0xffff_e000;
        }
        // Ties away: add half of the dropped unit to the magnitude.
        (bits + 0x1000) & 0xffff_e000
    }
}

/// `c + Σ a[k]·b[k]` as the tensor cores compute one element of `D` of
/// `mma.sync` m16n8k16 (bf16, f16) and m16n8k8 (tf32), measured bit for bit
/// on an H200 (sm_90; `tests/gpu/fidelity/tensor_cores.rs`, issue 44): the
/// simulator's `mma.sync` and `wgmma` compute every element with it. `a`
/// and `b` hold the operands' exact values (bf16, f16, or tf32 widened), at
/// most 16 of each.
///
/// - The products are exact, and all of them and `c` are added in one step
///   (k = 16 is one group, not two of 8).
/// - Alignment: the step's exponent `e` is the largest of `c`'s exponent
///   and each nonzero product's *operand* exponents summed
///   (`⌊log₂|a|⌋ + ⌊log₂|b|⌋`, so a product in `[2, 4)` of that power is
///   not renormalised first); every term is truncated toward zero (its
///   magnitude, not its two's complement) to a multiple of `2^(e − 25)`.
/// - The truncated terms are summed exactly and the sum rounded toward zero
///   to f32; a sum of magnitude `2¹²⁸` or more is ∞ of its sign (the
///   largest finite below that, as round-toward-zero gives).
/// - A NaN operand, ∞ · 0, or ∞ − ∞ gives the canonical NaN `0x7fffffff`
///   (no payload kept); otherwise an ∞ operand gives ∞ of its product's
///   sign.
///
/// Not pinned down by the measurement (no such word among the GPU's): the
/// alignment exponent of a subnormal operand (taken here as its value's,
/// `⌊log₂|a|⌋`), subnormal results (rounded toward zero as above), and the
/// sign of a zero sum (IEEE's: −0 only when every term is a −0).
#[cfg(not(target_arch = "nvptx64"))]
pub fn tensor_core_dot(c: f32, a: &[f32], b: &[f32]) -> f32 {
    /// `⌊log₂|x|⌋` of a finite nonzero f64.
    fn exponent(x: f64) -> i32 {
        let biased = ((x.to_bits() >> 52) & 0x7ff) as i32;
        if biased == 0 {
            // Subnormal f64 (not reached from f32 operands' products, kept
            // for completeness).
            -1023 - ((x.to_bits() << 12).leading_zeros() as i32)
        } else {
            biased - 1023
        }
    }
    /// 2^n as f64 (n within the normal range).
    fn pow2(n: i32) -> f64 {
        f64::from_bits(((n + 1023) as u64) << 52)
    }
    debug_assert!(a.len() == b.len() && a.len() <= 16);
    // Specials first.
    let mut nan = c.is_nan();
    let (mut pos_inf, mut neg_inf) = (c == f32::INFINITY, c == f32::NEG_INFINITY);
    for (&x, &y) in a.iter().zip(b) {
        let p = x * y;
        if p.is_nan() {
            nan = true;
        } else if p.is_infinite() && (x.is_infinite() || y.is_infinite()) {
            if p > 0.0 {
                pos_inf = true;
            } else {
                neg_inf = true;
            }
        }
    }
    if nan || (pos_inf && neg_inf) {
        return f32::from_bits(0x7fff_ffff);
    }
    if pos_inf {
        return f32::INFINITY;
    }
    if neg_inf {
        return f32::NEG_INFINITY;
    }
    // Finite: products exact in f64 (at most 11 × 11 significand bits).
    let c = f64::from(c);
    let mut e_max = (c != 0.0).then(|| exponent(c));
    for (&x, &y) in a.iter().zip(b) {
        if x != 0.0 && y != 0.0 {
            let e = exponent(f64::from(x)) + exponent(f64::from(y));
            e_max = Some(e_max.map_or(e, |m| m.max(e)));
        }
    }
    let Some(e_max) = e_max else {
        // Every term zero: −0 only if all of them are.
        let all_negative =
            c.is_sign_negative() && a.iter().zip(b).all(|(&x, &y)| (x * y).is_sign_negative());
        return if all_negative { -0.0 } else { 0.0 };
    };
    // Each term truncated toward zero to a multiple of `unit`; the sum of
    // 17 of them, each below 2^(e_max + 2), is exact in f64.
    let unit = pow2(e_max - 25);
    let truncate = |t: f64| (t / unit).trunc() * unit;
    let mut sum = truncate(c);
    for (&x, &y) in a.iter().zip(b) {
        sum += truncate(f64::from(x) * f64::from(y));
    }
    if sum.abs() >= pow2(128) {
        return if sum > 0.0 {
            f32::INFINITY
        } else {
            f32::NEG_INFINITY
        };
    }
    // Toward zero: the nearest f32, one step back if it is the larger.
    let near = sum as f32;
    if f64::from(near).abs() > sum.abs() {
        f32::from_bits(near.to_bits() - 1)
    } else {
        near
    }
}

macro_rules! ldmatrix {
    ($(#[$doc:meta])* $name:ident, $n:tt, $ptx:literal, $trans:literal) => {
        $(#[$doc])*
        ///
        /// A warp collective (all 32 lanes, converged).
        ///
        /// # Safety
        /// The row address of each lane that gives one (lanes
        #[doc = concat!("0..", stringify!($n), "·8")]
        /// ) is a shared-window address, 16-byte aligned, of 16 live
        /// bytes that no thread writes concurrently.
        #[cfg_attr(target_arch = "nvptx64", inline(always))]
        #[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
        pub unsafe fn $name(row_addr: u32) -> [u32; $n] {
            #[cfg(not(target_arch = "nvptx64"))]
            return sim::ldmatrix::<$n>(row_addr, $trans);
            #[cfg(target_arch = "nvptx64")]
            {
                let mut d = [0u32; $n];
                ldmatrix_asm!($n, $ptx, d, row_addr);
                d
            }
        }
    };
}

#[cfg(target_arch = "nvptx64")]
macro_rules! ldmatrix_asm {
    (1, $ptx:literal, $d:ident, $addr:ident) => {
        // SAFETY: the caller's contract (valid, aligned shared rows).
        unsafe {
            asm!(concat!($ptx, ".x1.shared.b16 {{{d0}}}, [{a}];"), d0 = out(reg32) $d[0],
                 a = in(reg32) $addr, options(nostack, readonly, preserves_flags));
        }
    };
    (2, $ptx:literal, $d:ident, $addr:ident) => {
        // SAFETY: the caller's contract (valid, aligned shared rows).
        unsafe {
            asm!(concat!($ptx, ".x2.shared.b16 {{{d0}, {d1}}}, [{a}];"),
                 d0 = out(reg32) $d[0], d1 = out(reg32) $d[1],
                 a = in(reg32) $addr, options(nostack, readonly, preserves_flags));
        }
    };
    (4, $ptx:literal, $d:ident, $addr:ident) => {
        // SAFETY: the caller's contract (valid, aligned shared rows).
        unsafe {
            asm!(concat!($ptx, ".x4.shared.b16 {{{d0}, {d1}, {d2}, {d3}}}, [{a}];"),
                 d0 = out(reg32) $d[0], d1 = out(reg32) $d[1],
                 d2 = out(reg32) $d[2], d3 = out(reg32) $d[3],
                 a = in(reg32) $addr, options(nostack, readonly, preserves_flags));
        }
    };
}

ldmatrix!(
    /// `ldmatrix.sync.aligned.m8n8.x1.shared.b16`: one 8 × 8 matrix of
    /// 16-bit elements whose rows lanes 0..8 address; each lane gets its
    /// register of [`LDMATRIX_8X8`].
    ldmatrix_x1, 1, "ldmatrix.sync.aligned.m8n8", false
);
ldmatrix!(
    /// `ldmatrix … .x2`: two matrices (rows from lanes 0..8 and 8..16),
    /// register `i` of each lane from matrix `i`.
    ldmatrix_x2, 2, "ldmatrix.sync.aligned.m8n8", false
);
ldmatrix!(
    /// `ldmatrix … .x4`: four matrices (rows from lanes `8i..8i+8` for
    /// matrix `i`), register `i` from matrix `i`: the A fragment of
    /// m16n8k16 from a row-major 16 × 16 tile when lane `l` addresses row
    /// `l % 16`, column `8·(l / 16)`.
    ldmatrix_x4, 4, "ldmatrix.sync.aligned.m8n8", false
);
ldmatrix!(
    /// `ldmatrix … .x1.trans`: as [`ldmatrix_x1`], each lane getting the
    /// transposed matrix's elements (from a column-major tile).
    ldmatrix_x1_trans, 1, "ldmatrix.sync.aligned.m8n8.trans", true
);
ldmatrix!(
    /// `ldmatrix … .x2.trans`: as [`ldmatrix_x2`], transposed.
    ldmatrix_x2_trans, 2, "ldmatrix.sync.aligned.m8n8.trans", true
);
ldmatrix!(
    /// `ldmatrix … .x4.trans`: as [`ldmatrix_x4`], transposed.
    ldmatrix_x4_trans, 4, "ldmatrix.sync.aligned.m8n8.trans", true
);

macro_rules! cp_async {
    ($(#[$doc:meta])* $name:ident, $bytes:literal, $cache:literal) => {
        $(#[$doc])*
        ///
        /// Of the `BYTES` at `src`, the first `src_bytes` (at most
        #[doc = concat!(stringify!($bytes), ")")]
        /// are copied and the rest of the destination is zero-filled: an
        /// edge tile reads only what exists.
        ///
        /// # Safety
        #[doc = concat!("`dst` is a shared-window address and `src` a global address, both ", stringify!($bytes), "-byte aligned;")]
        /// `src` points to `src_bytes` readable bytes; nothing else reads or
        /// writes `dst` until a [`cp_async_wait`] has retired this copy's
        /// group.
        #[cfg_attr(target_arch = "nvptx64", inline(always))]
        #[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
        pub unsafe fn $name(dst: u32, src: *const u8, src_bytes: u32) {
            #[cfg(not(target_arch = "nvptx64"))]
            // SAFETY: forwarded from the caller.
            return unsafe { sim::cp_async(dst, src, $bytes, src_bytes) };
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: the caller's contract.
            unsafe {
                asm!(concat!("cp.async.", $cache, ".shared.global [{d}], [{s}], ", stringify!($bytes), ", {n};"),
                     d = in(reg32) dst, s = in(reg64) src, n = in(reg32) src_bytes,
                     options(nostack, preserves_flags));
            }
        }
    };
}

cp_async!(
    /// `cp.async.ca.shared.global` of 4 bytes: global → shared without a
    /// register, in the current group (see [`cp_async_commit`]).
    cp_async_4, 4, "ca"
);
cp_async!(
    /// `cp.async.ca.shared.global` of 8 bytes.
    cp_async_8, 8, "ca"
);
cp_async!(
    /// `cp.async.cg.shared.global` of 16 bytes (L2 only, not L1).
    cp_async_16, 16, "cg"
);

/// `cp.async.commit_group`: closes this thread's group of copies issued
/// since the last commit.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn cp_async_commit() {
    #[cfg(not(target_arch = "nvptx64"))]
    sim::commit();
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no operands.
    unsafe {
        asm!("cp.async.commit_group;", options(nostack, preserves_flags));
    }
}

/// `cp.async.wait_group N`: waits until at most `N` of this thread's
/// committed groups are still in flight (`N = 0`: all done). The data is
/// then visible to this thread; other threads see it after a barrier.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn cp_async_wait<const N: u32>() {
    #[cfg(not(target_arch = "nvptx64"))]
    sim::wait(N);
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: waits only.
    unsafe {
        asm!("cp.async.wait_group {n};", n = const N, options(nostack, preserves_flags));
    }
}

#[cfg(not(target_arch = "nvptx64"))]
mod sim {
    //! The simulator's tensor-core instructions, on warp shuffles and the
    //! simulated shared memory.
    use std::cell::RefCell;
    use std::collections::HashMap;

    use super::{LDMATRIX_8X8, Layout};
    use crate::warp::shfl_idx_b32 as shuffle;

    /// `d = a · b + c` of one tile: each lane gathers, by shuffles, the
    /// registers of the lanes that hold a row of A or a column of B that
    /// its outputs need (from the layouts), then computes each of its
    /// elements as the tensor cores do ([`super::tensor_core_dot`]).
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    pub(super) fn mma<const NA: usize, const NB: usize>(
        la: &Layout,
        a: &[u32; NA],
        lb: &Layout,
        b: &[u32; NB],
        c: [f32; 4],
        k: u32,
        value: impl Fn(u32, u32) -> f32,
    ) -> [f32; 4] {
        let lane = crate::warp::lane_id();
        let lc = &super::C_M16N8;
        let per_reg = la.elems as usize / NA;
        // Rows of A and columns of B that this lane's outputs need.
        let outs: Vec<(u32, u32)> = (0..4).map(|e| lc.coord(lane, e)).collect();
        let sources = |l: &Layout, row_of_a: bool| -> Vec<u32> {
            (0..32)
                .filter(|&src| {
                    (0..l.elems).any(|e| {
                        let (r, c) = l.coord(src, e);
                        outs.iter()
                            .any(|&(orow, ocol)| if row_of_a { r == orow } else { c == ocol })
                    })
                })
                .collect()
        };
        let mut am = vec![f32::NAN; (la.rows * la.cols) as usize];
        let mut bm = vec![f32::NAN; (lb.rows * lb.cols) as usize];
        // Every lane takes the same number of shuffles: the largest set's
        // (all lanes' sets are equally large for these layouts).
        for (l, regs, m, row_of_a) in [(la, &a[..], &mut am, true), (lb, &b[..], &mut bm, false)] {
            let src = sources(l, row_of_a);
            for &s in &src {
                for (i, &r) in regs.iter().enumerate() {
                    let got = shuffle(r, s);
                    for j in 0..per_reg {
                        let e = (i * per_reg + j) as u32;
                        let (row, col) = l.coord(s, e);
                        m[(row * l.cols + col) as usize] = value(got, j as u32);
                    }
                }
            }
        }
        let mut d = [0f32; 4];
        for (e, &(row, col)) in outs.iter().enumerate() {
            let (mut ar, mut bc) = ([0f32; 16], [0f32; 16]);
            for kk in 0..k {
                ar[kk as usize] = am[(row * la.cols + kk) as usize];
                bc[kk as usize] = bm[(kk * lb.cols + col) as usize];
            }
            d[e] = super::tensor_core_dot(c[e], &ar[..k as usize], &bc[..k as usize]);
        }
        d
    }

    /// `ldmatrix` of `N` 8 × 8 matrices: the row addresses come from lanes
    /// `8i..8i+8` by shuffles, and each lane reads its elements of
    /// [`LDMATRIX_8X8`] (transposed with `.trans`) from shared memory.
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    pub(super) fn ldmatrix<const N: usize>(row_addr: u32, trans: bool) -> [u32; N] {
        let lane = crate::warp::lane_id();
        if lane < 8 * N as u32 && !row_addr.is_multiple_of(16) {
            // The GPU faults (`CUDA_ERROR_MISALIGNED_ADDRESS`): each row is
            // one 16-byte access.
            let at = std::panic::Location::caller();
            crate::sim::fail(
                at.file(),
                at.line(),
                at.column(),
                &format!(
                    "misaligned address: ldmatrix row address {row_addr} (lane {lane}) is not \
                     16-byte aligned"
                ),
            );
        }
        let mut d = [0u32; N];
        for (i, reg) in d.iter_mut().enumerate() {
            for e in 0..LDMATRIX_8X8.elems {
                let (r, c) = LDMATRIX_8X8.coord(lane, e);
                let (row, col) = if trans { (c, r) } else { (r, c) };
                let addr = shuffle(row_addr, 8 * i as u32 + row);
                let h: u16 = crate::sim::shared_load(addr + 2 * col);
                *reg |= (h as u32) << (16 * e);
            }
        }
        d
    }

    /// One pending copy: shared destination, global source, sizes.
    struct Copy {
        dst: u32,
        src: *const u8,
        bytes: u32,
        src_bytes: u32,
    }

    /// A thread's copies: the open group, then the committed ones (oldest
    /// first).
    #[derive(Default)]
    struct Groups {
        open: Vec<Copy>,
        committed: std::collections::VecDeque<Vec<Copy>>,
    }

    type Key = (usize, [u32; 3], u32);

    thread_local! {
        static PENDING: RefCell<HashMap<Key, Groups>> = RefCell::new(HashMap::new());
    }

    fn key() -> Key {
        let ctx = crate::sim::current();
        (ctx.block_state as usize, ctx.block, ctx.linear)
    }

    /// Queues the copy and poisons its destination until it is made.
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    pub(super) unsafe fn cp_async(dst: u32, src: *const u8, bytes: u32, src_bytes: u32) {
        assert!(
            src_bytes <= bytes,
            "cp.async of {bytes} bytes with src-size {src_bytes}"
        );
        for i in (0..bytes).step_by(4) {
            crate::sim::shared_store::<u32>(dst + i, u32::MAX);
        }
        let copy = Copy {
            dst,
            src,
            bytes,
            src_bytes,
        };
        PENDING.with(|p| p.borrow_mut().entry(key()).or_default().open.push(copy));
    }

    /// Closes the open group.
    pub(super) fn commit() {
        PENDING.with(|p| {
            let mut p = p.borrow_mut();
            let g = p.entry(key()).or_default();
            let open = std::mem::take(&mut g.open);
            g.committed.push_back(open);
        });
    }

    /// Makes the copies of all but the newest `n` committed groups.
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    pub(super) fn wait(n: u32) {
        let due: Vec<Copy> = PENDING.with(|p| {
            let mut p = p.borrow_mut();
            let g = p.entry(key()).or_default();
            let mut due = Vec::new();
            while g.committed.len() > n as usize {
                due.extend(g.committed.pop_front().unwrap_or_default());
            }
            due
        });
        for c in due {
            let mut bytes = [0u8; 16];
            for (i, b) in bytes.iter_mut().take(c.src_bytes as usize).enumerate() {
                // SAFETY: cp_async's caller promised src_bytes readable bytes.
                *b = unsafe { crate::sim::read_global(c.src.add(i)) };
            }
            for i in (0..c.bytes).step_by(4) {
                let word = u32::from_le_bytes(
                    bytes[i as usize..i as usize + 4]
                        .try_into()
                        .unwrap_or_default(),
                );
                crate::sim::shared_store::<u32>(c.dst + i, word);
            }
        }
    }
}
