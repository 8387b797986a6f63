//! The foundation: the `Gpu` and its PTX module, the launch helpers,
//! `multiply` (device and unified memory), `vector_sum_i32`, `hello_kernel`'s
//! output, launch overhead, `block_reverse_i32` (shared memory), and device
//! faults reported with their location; their properties (random lengths
//! and values against the CPU) and their refusals of bad input, including
//! every launcher on a module without its kernel.
use std::fmt::{self, Debug};
use std::process::ExitCode;

use cuda_kernels::DeviceSlice;
use cuda_kernels::async_mem::Lane;
use cuda_kernels::cust::memory::DeviceCopy;
use cuda_kernels::device_checks::block_reverse_i32_cpu;
use cuda_kernels::launch::{
    MAX_GRID_X, MAX_GRID_YZ, check_block, checked_elements, grid_1d_capped, grid_exact, same_len,
};
use cuda_kernels::life::LifeSims;
use cuda_kernels::mandelbrot::KERNEL as MANDEL;
use cuda_kernels::multiply::{MemoryMode, multiply_cpu, multiply_inputs, vector_sum_i32_cpu};
use cuda_kernels::ndarray::{Array1, Array2, ArrayView1, s};
use cuda_kernels::reduce::{Max, Sum, Xor};
use cuda_kernels::streams::{SerialBatch, StreamBatch};
use cuda_kernels::{Error, Gpu};
use libtest_mimic::{Failed, Trial};
use proptest::prelude::*;

use crate::common::{AWKWARD_LENGTHS, ensure, fail};
use crate::support::cases::{Cases, Want, equal, harmless, kernel_less, m, require};
use crate::support::props::{Draw, all_same, brief, case_err, check};
use crate::support::{
    PTX_GARBAGE, PTX_WITHOUT_KERNEL, TempFile, huge1, huge2, huged, missing_path, rerun_self,
    rerun_self_printing, truncated_ptx,
};
use cuda_kernels::prelude::*;

mod kernels;
mod launches;
mod math;
mod modules;
mod refusals;

use kernels::*;
use launches::*;
use math::*;
use modules::*;
use refusals::*;

const HELLO_CHILD: &str = "CUDA_KERNELS_TEST_HELLO_CHILD";
const FAULT_CHILD: &str = "CUDA_KERNELS_TEST_FAULT_CHILD";

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        kernel!(multiply_matches_cpu_exactly),
        hardware!("unified memory, timings", multiply_unified_matches_cpu),
        kernel!(multiply_strided_views),
        kernel!(vector_sum_i32_matches_cpu),
        kernel!(vectorized_heads_and_tails_on_sub_slices),
        kernel!(hello_prints_three_lines),
        hardware_alone!("launch timings", empty_kernel_launch_rates),
        hardware!("timings", launchers_report_their_times),
        hardware!("the driver's PTX loader", bad_ptx_is_a_typed_error),
        kernel!(shared_array_block_reverse),
        kernel!(device_fault_is_reported_with_location),
        hardware!(
            "the driver's cubin loader",
            embedded_cubin_is_loaded_on_its_architecture
        ),
        cpu!(math_ptx_is_self_contained),
        kernel!(device_math_within_cuda_bounds),
        kernel!(multiply_agrees_with_cpu),
        kernel!(vector_sum_i32_agrees_with_cpu),
        cpu!(launch_helper_refusals),
        cpu!(ptx_file_refusals),
        kernel!(refusals),
        kernel!(launch_shapes_past_the_limits_are_refused),
        hardware!("the driver's PTX loader", module_refusals),
        kernel!(a_tebibyte_is_out_of_device_memory),
    ]
}

/// The child processes some tests start (this binary again, with a
/// variable set): `Some(exit code)` in a child, `None` otherwise.
pub fn child_process() -> Option<ExitCode> {
    // Re-executed by `hello_prints_three_lines` to capture the device printf
    // output (it goes to this process's stdout).
    if std::env::var_os(HELLO_CHILD).is_some() {
        let Ok(gpu) = cuda_kernels::gpu() else {
            return Some(ExitCode::FAILURE);
        };
        return Some(match gpu.hello(1, 3, false) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        });
    }
    // Re-executed by `device_fault_is_reported_with_location`: a trap ruins the
    // process's CUDA context, so it happens in a child.
    if std::env::var_os(FAULT_CHILD).is_some() {
        return Some(fault_child());
    }
    None
}
