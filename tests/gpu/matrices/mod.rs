//! The matrices family: `doubles_matrix`, the matrix products (naive
//! and tiled), elementwise kernels, `vector_sum_repeat`,
//! `gufunc_matmul_i64`: against the CPU at chosen shapes and on random ones
//! (properties), CPU-only checks of the embedded PTX (the repeat loop
//! survived, the tiled kernel's vector loads), and refusals of bad input
//! (the launch plans without a GPU, every launcher with one).
use std::fmt::{self, Debug};

use cuda_kernels::Gpu;

use cuda_kernels::matrices::kernels::{lerp, saxpy, sum};
use cuda_kernels::matrices::{
    Elementwise, ElementwiseElement, MatmulKernel, MatmulLaunch, PLAN_SMS, SPLIT_K_MIN, allclose,
    check_matmul, doubles_matrix_cpu, doubles_matrix_launch, elementwise_cpu,
    gufunc_matmul_i64_cpu, gufunc_plan, matmul_cpu, matmul_launch, matmul_launch_for,
    vector_sum_repeat_cpu,
};
use cuda_kernels::ndarray::{
    Array, Array1, Array2, Array3, ArrayD, ArrayView1, ArrayView2, ArrayViewMut1, Axis, IxDyn, s,
};
use cuda_kernels::util::Rng;
use libtest_mimic::{Failed, Trial};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::common::{AWKWARD_LENGTHS, ensure, fail, simulated, sized};
use crate::support::cases::{Cases, Want, equal, m, require};
use crate::support::props::{
    Draw, all_same, brief, case_err, check, f32_no_nan, f64_no_nan, length,
};
use crate::support::{Elem, huge1, huge2, huged, ptx_entry};
use cuda_kernels::prelude::*;

mod doubles;
mod elementwise;
mod gufunc;
mod matmul;
mod plans;
mod refusals;
mod repeat;

use doubles::*;
use elementwise::*;
use gufunc::*;
use matmul::*;
use plans::*;
use refusals::*;
use repeat::*;

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        kernel!(doubles_matrix_any_shape),
        kernel!(doubles_matrix_views),
        kernel!(matmul_small_matches_dot),
        kernel!(matmul_edges_and_large),
        kernel!(matmul_views),
        kernel!(matmul_tile_selection),
        kernel!(matmul_split_k),
        kernel!(elementwise_sum_all_types),
        kernel!(elementwise_saxpy_and_lerp),
        kernel!(elementwise_heads_and_tails_on_sub_slices),
        kernel!(doubles_matrix_heads_and_tails_on_sub_slices),
        kernel!(vector_sum_repeat_matches_cpu),
        kernel!(gufunc_matmul_matches_cpu),
        cpu!(ptx_keeps_the_repeat_loop),
        cpu!(ptx_tiled_uses_shared_vector_loads),
        cpu!(ptx_tiled_v4_uses_global_vector_loads),
        kernel!(doubles_matrix_agrees_with_cpu),
        kernel!("matmul_naive_agrees_with_cpu", |gpu| {
            matmul_agrees_with_cpu(gpu, MatmulKernel::Naive)
        }),
        kernel!("matmul_tiled_agrees_with_cpu", |gpu| {
            matmul_agrees_with_cpu(gpu, MatmulKernel::Tiled)
        }),
        kernel!(elementwise_sum_agrees_with_cpu),
        kernel!(elementwise_saxpy_agrees_with_cpu),
        kernel!(elementwise_lerp_agrees_with_cpu),
        kernel!(gufunc_matmul_i64_agrees_with_cpu),
        cpu!(gufunc_references_agree),
        cpu!(plan_refusals),
        kernel!(refusals),
    ]
}
