//! The seed's family: `mult_ker` (any length and launch shape, against
//! the CPU reference on inputs it changes), the serial and per-stream
//! batches, events, lanes (page-locked buffers and streams),
//! Conway's Game of Life on concurrent streams against the CPU,
//! contexts made by hand and one per host thread, and the wrong-thread error
//!; their properties (random inputs and shapes against the CPU), a
//! CPU-only check that the PTX keeps the 100 operations of `mult_ker`, and
//! refusals of bad input (the checks without a GPU, every launcher).
use std::fmt::{self, Debug};
use std::sync::mpsc;

use cuda_kernels::async_mem::Lane;
use cuda_kernels::contexts::{ThreadContext, manual_context_roundtrip, threads_mult_ker};

use cuda_kernels::kernels::streams::MULT_KER;
use cuda_kernels::launch::MAX_GRID_X;
use cuda_kernels::life::{
    LifeKernel, LifeSims, check_lattice, life_cpu, life_grid, life_step_cpu, random_lattice,
};
use cuda_kernels::ndarray::{Array1, Array2, ArrayView1, array, s};
use cuda_kernels::streams::{
    IssueOrder, SEED_BLOCK, SEED_GRID, SerialBatch, StreamBatch, check_mult_ker,
    check_mult_ker_output, first_difference, mult_ker_cpu, randn_arrays,
};
use cuda_kernels::util::Rng;
use cuda_kernels::{Error, Gpu, PTX};
use libtest_mimic::{Failed, Trial};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::common::{AWKWARD_LENGTHS, ensure, fail, sized};
use crate::support::cases::{Cases, Want, equal, m, require};
use crate::support::props::{Draw, all_same, brief, case_err, check, length};
use crate::support::{PTX_GARBAGE, PTX_WITHOUT_KERNEL, huge1, huge2, ptx_entry};
use cuda_kernels::prelude::*;

mod batches;
mod contexts;
mod life;
mod mult_ker;
mod refusals;

use batches::*;
use contexts::*;
use life::*;
use mult_ker::*;
use refusals::*;

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        cpu!(mult_ker_ptx_keeps_all_operations),
        kernel!(mult_ker_matches_cpu_for_any_length),
        hardware!("streams, timings", batches_match_cpu),
        hardware!("events, timings", events_are_ordered),
        kernel!(lane_copies),
        hardware_alone!(
            "stream concurrency",
            lane_overlaps_the_legacy_default_stream
        ),
        kernel!(life_equals_cpu_after_200_steps),
        kernel!(life_any_size_equals_cpu),
        kernel!(life_fast_kernel_edges),
        hardware!("contexts", manual_context_round_trip),
        hardware!("contexts", ten_threads_with_own_contexts),
        hardware!("contexts", wrong_thread_is_a_typed_error),
        hardware!("contexts", thread_context_rebinds_after_gpu),
        kernel!(mult_ker_agrees_with_cpu),
        kernel!(life_agrees_with_cpu),
        cpu!(check_refusals),
        kernel!(refusals),
        hardware!("events, streams, timings", event_and_batch_refusals),
        kernel!(life_refusals),
        hardware!("contexts", context_refusals),
    ]
}

fn reason<T>(r: cuda_kernels::Result<T>) -> String {
    match r {
        Err(Error::InvalidInput { reason, .. }) => reason,
        Err(e) => format!("another error: {e}"),
        Ok(_) => "no error".into(),
    }
}
