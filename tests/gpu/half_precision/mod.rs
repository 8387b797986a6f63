//! The half-precision family: the 16-bit floats of `device::float16` (every
//! 16 → 32 conversion input, a large set of 32 → 16 inputs with every tie,
//! the packed operations) bit for bit against references written from the
//! formula, and the GEMM family (mma.sync and CUDA-core paths, every layout,
//! edges, misaligned operands, batches, NaN and infinity, alpha and beta)
//! against the f64 reference and its error bound, with the bound shown to
//! catch one dropped k-slab, the path each layout and type takes per
//! device from a table written by hand, and the refusals of bad shapes; the elementwise
//! kernels and the reductions on f16 and bf16 against references written
//! from the formula in f64.
use cuda_kernels::Gpu;
use cuda_kernels::float16_checks::Float16Op;
use cuda_kernels::matrices::{
    GemmInput, GemmOutput, GemmPath, GemmReference, GemmShape, Op, gemm_check, gemm_reference,
};
use cuda_kernels::ndarray::{Array2, ArrayView2, ShapeBuilder, s};
use cuda_kernels::util::Rng;
use half::{bf16, f16};
use libtest_mimic::{Failed, Trial};

use crate::common::{ensure, fail, simulated};
use cuda_kernels::prelude::*;

mod elementwise_and_reduce;
mod float16;
mod gemm;
mod gemm_paths;

use elementwise_and_reduce::*;
use float16::*;
use gemm::*;
use gemm_paths::*;

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        kernel!(conversions_16_to_32_every_input),
        kernel!(conversions_32_to_16_every_tie),
        kernel!(packed_operations),
        kernel!(gemm_bf16_256_cubed),
        kernel!(gemm_layouts_types_and_edges),
        kernel!(gemm_misaligned_and_batched),
        kernel!(gemm_any_alignment),
        kernel!(gemm_deep_k),
        hardware!("the sm_90a wgmma kernel", gemm_wgmma_split_counts),
        kernel!(gemm_wgmma_epilogues),
        kernel!(gemm_wgmma_runs_its_own_code),
        kernel!(gemm_reused_and_reallocated_buffers),
        kernel!(gemm_many_operand_pairs_in_flight),
        hardware!("the sm_90a wgmma kernel", gemm_wgmma_refusals),
        kernel!(gemm_nan_and_infinity),
        hardware!("cuBLAS", gemm_agrees_with_cublas),
        cpu!(gemm_bound_catches_a_dropped_k_slab),
        kernel!(gemm_refusals),
        kernel!(gemm_takes_the_tabled_path),
        kernel!(elementwise_f16_bf16),
        kernel!(reduce_f16_bf16),
    ]
}
