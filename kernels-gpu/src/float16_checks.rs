//! The 16-bit float check: one kernel that applies any conversion or packed
//! operation of `device::float16` ([`Float16Op`]) to arrays of 32-bit words,
//! so that the host can compare every input's bits on the GPU, on the
//! simulator and against its reference.
use crate::device::float16::{bf16, bf16x2, f16, f16x2};
use crate::device::thread;

/// An operation of the check kernel, numbered as it takes them. Words hold
/// an f32, a 16-bit float in the low half, or a packed pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Float16Op {
    /// f32 → f16 (`f16::narrow`).
    F32ToF16,
    /// f32 → bf16.
    F32ToBf16,
    /// f16 → f32 (`f16::widen`).
    F16ToF32,
    /// bf16 → f32.
    Bf16ToF32,
    /// `f16x2::fma(x, y, z)`.
    F16x2Fma,
    /// `bf16x2::fma(x, y, z)`.
    Bf16x2Fma,
    /// `f16x2::min(x, y)`.
    F16x2Min,
    /// `bf16x2::min(x, y)`.
    Bf16x2Min,
    /// `f16x2::max(x, y)`.
    F16x2Max,
    /// `bf16x2::max(x, y)`.
    Bf16x2Max,
    /// `f16x2::lt(x, y)`: bit 0 element 0, bit 1 element 1.
    F16x2Lt,
    /// `bf16x2::lt(x, y)`.
    Bf16x2Lt,
}

/// Every operation, in number order.
pub const FLOAT16_OPS: [Float16Op; 12] = [
    Float16Op::F32ToF16,
    Float16Op::F32ToBf16,
    Float16Op::F16ToF32,
    Float16Op::Bf16ToF32,
    Float16Op::F16x2Fma,
    Float16Op::Bf16x2Fma,
    Float16Op::F16x2Min,
    Float16Op::Bf16x2Min,
    Float16Op::F16x2Max,
    Float16Op::Bf16x2Max,
    Float16Op::F16x2Lt,
    Float16Op::Bf16x2Lt,
];

/// Operation `op` on the words `x`, `y`, `z` (see [`Float16Op`]); an unknown
/// number gives 0.
#[inline(always)]
pub fn float16_apply(op: u32, x: u32, y: u32, z: u32) -> u32 {
    let lt = |l: [bool; 2]| u32::from(l[0]) | u32::from(l[1]) << 1;
    let (hx, hy, hz) = (
        f16x2::from_bits(x),
        f16x2::from_bits(y),
        f16x2::from_bits(z),
    );
    let (bx, by, bz) = (
        bf16x2::from_bits(x),
        bf16x2::from_bits(y),
        bf16x2::from_bits(z),
    );
    match op {
        0 => f16::narrow(f32::from_bits(x)).to_bits() as u32,
        1 => bf16::narrow(f32::from_bits(x)).to_bits() as u32,
        2 => f16::from_bits(x as u16).widen().to_bits(),
        3 => bf16::from_bits(x as u16).widen().to_bits(),
        4 => hx.fma(hy, hz).to_bits(),
        5 => bx.fma(by, bz).to_bits(),
        6 => hx.min(hy).to_bits(),
        7 => bx.min(by).to_bits(),
        8 => hx.max(hy).to_bits(),
        9 => bx.max(by).to_bits(),
        10 => lt(hx.lt(hy)),
        11 => lt(bx.lt(by)),
        _ => 0,
    }
}

crate::device::kernels! {
    /// `out[i] = op(x[i], y[i], z[i])` ([`float16_apply`]); grid-stride.
    ///
    /// # Safety
    /// `x`, `y`, `z` and `out` hold `n` words each on the device; `out`
    /// overlaps none of the inputs.
    pub fn float16_check(x: *const u32, y: *const u32, z: *const u32, out: *mut u32, n: usize, op: u32) as FLOAT16_CHECK {
        for i in thread::grid_stride(n) {
            // SAFETY: i < n, the length of every array.
            unsafe { *out.add(i) = float16_apply(op, *x.add(i), *y.add(i), *z.add(i)) };
        }
    }
}
