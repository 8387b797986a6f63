//! The reduce family: every operation over every type at awkward
//! lengths, initial values, empty inputs, misaligned device slices, float
//! sums against an accurate reference within the order-aware bound, scratch
//! reuse, the user-declared `Xor`, more than 2^31 elements, and each device
//! primitive (shuffles and votes, atomics, wide loads, the block tree)
//! through its own test kernel; one property per operation and type (random
//! lengths, initial values and device offsets against the CPU); refusals of
//! bad input (the CPU references' rules, every launcher).
use std::fmt::{self, Debug};

use cuda_kernels::Error;
use cuda_kernels::Gpu;
use cuda_kernels::cust::memory::mem_get_info;
use cuda_kernels::launch::MAX_GRID_X;
use cuda_kernels::ndarray::{Array1, ArrayView1, s};
use cuda_kernels::reduce::{
    BLOCK, Input, Max, Min, Product, ReduceKernel, ReduceOrder, Sum, Xor, accurate_sum,
    float_sum_tolerance, reduce_cpu, reduce_in_gpu_order, start_value,
};
use cuda_kernels::util::Rng;
use libtest_mimic::{Completion, Failed, Trial};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::common::{ensure, fail, hardware_trial, simulated, sized};
use crate::support::Elem;
use crate::support::cases::{Cases, Want, equal, m, require};
use crate::support::props::{Draw, brief, case_err, check, length};
use cuda_kernels::prelude::*;

mod beyond_2_31;
mod float_sums;
mod operations;
mod primitives;
mod properties;
mod refusals;

use beyond_2_31::*;
use float_sums::*;
use operations::*;
use primitives::*;
use properties::*;
use refusals::*;

/// Lengths around every boundary the kernel has: the 16-byte vector (4 or 2
/// elements), the unroll (4 vectors), the warp, the block (1024 threads;
/// 256 in earlier shapes), one vector per thread of a block (2048 or 4096
/// elements), many blocks, and past the resident grid (a grid-stride loop).
/// On the simulator the lengths stop at 65,537 ([`lengths`]).
#[rustfmt::skip]
const LENGTHS: &[usize] = &[
    1, 2, 3, 4, 5, 7, 8, 9, 31, 32, 33, 255, 256, 257, 1000, 1023, 1024, 1025, 2047, 2049,
    4095, 4097, 65_537, 1_000_003, (1 << 20) + 3,
];

/// [`LENGTHS`] on a GPU; on the simulator those up to 65,537 (the hidden odd
/// sizes stay; 2^20 + 3 is the agreement tests' and the GPU's).
fn lengths(gpu: &Gpu) -> impl Iterator<Item = usize> {
    let cap = if simulated(gpu) { 65_537 } else { usize::MAX };
    LENGTHS.iter().copied().filter(move |&n| n <= cap)
}

/// One property trial per (operation, type): `<op>_<type>_agrees_with_cpu`.
macro_rules! reduce_properties {
    ($($op:ident $name:literal: $($t:ident),+;)*) => {
        vec![$($(
            kernel!(
                concat!($name, "_", stringify!($t), "_agrees_with_cpu"),
                reduce_agrees::<$op, $t>
            ),
        )+)*]
    };
}

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    let mut trials = vec![
        kernel!("seed_sum_of_1_to_10000_is_50005000", seed_sum),
        kernel!(
            "every_op_and_type_matches_cpu_at_awkward_lengths",
            every_op_and_type
        ),
        kernel!("initial_values_are_combined", initial_values),
        kernel!("empty_inputs_give_init_identity_or_error", empty_inputs),
        kernel!(misaligned_device_slices),
        kernel!(
            "float_sums_within_order_tolerance",
            float_sums_within_tolerance
        ),
        kernel!("integer_sums_wrap_like_cpu", integer_sums_wrap),
        kernel!(strided_views),
        kernel!("scratch_reuse_resets_the_counter", scratch_reuse),
        kernel!(user_declared_xor),
        kernel!(warp_shuffles_and_votes),
        kernel!(atomics),
        kernel!("wide_and_l2_loads", wide_loads),
        kernel!(block_reduce_tree),
        beyond_2_31_trial(),
        cpu!(float_sum_check_catches_one_dropped_element),
        cpu!(reference_refusals),
        kernel!(refusals),
    ];
    trials.extend(reduce_properties!(
        Sum "sum": i32, i64, f32, f64;
        Product "product": i32, i64, f32, f64;
        Min "min": i32, i64, f32, f64;
        Max "max": i32, i64, f32, f64;
        Xor "xor": i32, i64;
    ));
    trials
}

/// More than 2^31 elements (2^31 + 5 i32, 8.6 GB): ignored, with the
/// reason, where the GPU has too little free memory.
fn beyond_2_31_trial() -> Trial {
    hardware_trial(
        crate::test_name(module_path!(), "more_than_2_31_elements"),
        "device-wide free memory, 8.6 GB",
        |gpu| {
            let n = (1usize << 31) + 5;
            let bytes = n * 4;
            let (free, _) = mem_get_info().map_err(fail)?;
            if free < bytes + (512 << 20) {
                return Ok(Completion::ignored_with(format!(
                    "needs {:.1} GB of free GPU memory, {:.1} GB free",
                    bytes as f64 / 1e9,
                    free as f64 / 1e9
                )));
            }
            beyond_2_31(gpu, n).map(|()| Completion::Completed)
        },
    )
}
