//! `mult_ker`: the deliberately heavy "multiply by 2, divide
//! by 2, fifty times" kernel that the streams, events and contexts demos
//! launch.
//!
//! The seed launches it as one block of 64 threads that stride over the array
//! with `num_iters = array_len / blockDim.x` and `i = j * blockDim.x + thd`.
//! That drops the tail when `array_len` is not a multiple of the block size
//! (and with more than one block the blocks overlap, since the stride is
//! `blockDim.x`, not the grid's size). Here every thread walks a grid-stride
//! loop `i = index_1d(), i + blockDim.x * gridDim.x, … < array_len`: with the
//! seed's `<<<1, 64>>>` that is the seed's exact access pattern plus the tail,
//! and any other launch shape covers the array exactly once as well.

/// How many times [`mult_ker_element`] multiplies by 2 and divides by 2.
pub const MULT_KER_ROUNDS: usize = 50;

/// One element of `mult_ker`: fifty rounds of `x *= 2.0; x /= 2.0`, shared by
/// the kernel and the CPU reference.
///
/// Exact: for every finite `x` with `|x| < 2^127` (so `2x` does not
/// overflow) both steps are exact in IEEE binary32 (multiplying or dividing by
/// a power of two only changes the exponent, and subnormals stay exact because
/// rustc's NVPTX code does not flush them to zero), so the result is `x` bit for
/// bit. The compiler may not fold the round trip away: without fast-math flags
/// `(x * 2) / 2` is not `x` for large `x` (`2x` overflows to infinity), so
/// LLVM keeps all one hundred operations (it only turns the exact division by
/// 2 into a multiplication by 0.5). The PTX check in `tests/gpu/streams/mult_ker.rs`
/// counts them.
#[inline(always)]
pub fn mult_ker_element(x: f32) -> f32 {
    let mut x = x;
    for _ in 0..MULT_KER_ROUNDS {
        x *= 2.0;
        x /= 2.0;
    }
    x
}

use crate::device::thread;

crate::device::kernels! {
    /// `array[i] = mult_ker_element(array[i])` for every `i < array_len`, in
    /// place, grid-stride (the seed's `<<<1, 64>>>` works, as does any other
    /// 1-D launch).
    ///
    /// Thread mapping: thread `t = blockIdx.x * blockDim.x + threadIdx.x`
    /// handles `t, t + S, t + 2S, …` with `S = blockDim.x * gridDim.x`.
    ///
    /// # Safety
    /// `array` points to at least `array_len` f32 on the device that no other
    /// work touches while the kernel runs.
    pub fn mult_ker(array: *mut f32, array_len: usize) as MULT_KER {
        for i in thread::grid_stride(array_len) {
            // SAFETY: i < array_len, the buffer's length (host-checked); each i is
            // visited by exactly one thread, so the read-modify-write does not race.
            unsafe {
                let p = array.add(i);
                *p = mult_ker_element(*p);
            }
        }
    }
}
