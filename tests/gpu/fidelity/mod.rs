//! The fidelity family: small adversarial kernels (`kernels-gpu/src/fidelity.rs`)
//! whose output the PTX ISA and the CUDA C++ Programming Guide fix, checked
//! word for word against values derived here from those documents. They run
//! `[sim]` without a GPU and `[gpu+sim]` under `CUDA_KERNELS_SIM_COMPARE=1`,
//! where both backends must give exactly these words (so each other's).
//!
//! Where a word comes from:
//! - warp collectives: PTX ISA, `shfl.sync` (source lane, clamp `c`, a lane
//!   whose source is out of range gets its own value) and `vote.sync`;
//!   CUDA Programming Guide, "Warp Shuffle Functions" / "Warp Vote
//!   Functions": the non-exited lanes of the mask must call;
//! - barriers: Programming Guide, `__syncthreads` on compute capability 7.0
//!   and later: exited threads count as arrived;
//! - `atom.add.f32`: PTX ISA, `atom`: "flushes subnormal inputs and results
//!   to sign-preserving zero"; a NaN result is the canonical `0x7fffffff`
//!   (PTX ISA, floating-point instructions: NaN results are canonical);
//! - integers and casts: Rust's semantics (wrapping methods, saturating
//!   float-to-int casts), which the PTX lowering must keep;
//! - printf: the C standard's `fprintf` (CUDA's printf follows it).
//!
//! Cases undefined on the hardware ([`UNDEFINED`]) are run on both: the
//! simulator reports them, the GPU runs them with no value checked.
use cuda_kernels::Gpu;
use cuda_kernels::fidelity::{FIDELITY_CASES, LARGE_LOCAL_WORDS};
use cuda_kernels::kernels::device::kernel::Kernel;
use cuda_kernels::kernels::device::sim::{self, LaunchShape, SimOptions, memory::Allocation};
use cuda_kernels::kernels::fidelity::{self as k, FidelityCase};
use cuda_kernels::math_checks::{MATH_FUNCTIONS, MathFloat, MathFn};
use libtest_mimic::{Completion, Failed, Trial};

use crate::common::{ensure, fail, simulated};
use cuda_kernels::prelude::*;

mod cases;
mod codegen;
mod expected;
mod faults;
mod math;
mod printf;
mod tensor_cores;

use cases::*;
use codegen::*;
use expected::*;
use faults::*;
use math::*;
use printf::*;
use tensor_cores::*;

/// Re-executed by the printf tests to capture the device printf output: the
/// case's entry name, then `@` and a FIFO size in bytes when one is set.
const PRINTF_CHILD: &str = "CUDA_KERNELS_TEST_FIDELITY_PRINTF_CHILD";
/// Re-executed by the fault cases: a fault ruins the process's CUDA context.
const FAULT_CHILD: &str = "CUDA_KERNELS_TEST_FIDELITY_FAULT_CHILD";

type CaseKernel = Kernel<(*mut u32, usize)>;

/// A correct case: its kernel and its expected output.
struct Checked {
    kernel: CaseKernel,
    want: fn() -> Vec<u32>,
}

/// Every correct case with a fixed output on both backends.
const CHECKED: &[Checked] = &[
    Checked {
        kernel: k::FID_BALLOT_AFTER_EXIT,
        want: ballot_after_exit,
    },
    Checked {
        kernel: k::FID_VOTES_AFTER_EXIT,
        want: votes_after_exit,
    },
    Checked {
        kernel: k::FID_SHFL_EVEN_ODD,
        want: shfl_even_odd,
    },
    Checked {
        kernel: k::FID_NESTED_QUARTERS,
        want: nested_quarters,
    },
    Checked {
        kernel: k::FID_LOOP_EXACT_MASKS,
        want: loop_exact_masks,
    },
    Checked {
        kernel: k::FID_PARTIAL_WARP,
        want: partial_warp,
    },
    Checked {
        kernel: k::FID_SHFL_U64_HALF_WARP,
        want: shfl_u64_half_warp,
    },
    Checked {
        kernel: k::FID_SHFL_OPERAND_RANGES,
        want: shfl_operand_ranges,
    },
    Checked {
        kernel: k::FID_BARRIER_AFTER_EXIT,
        want: barrier_after_exit,
    },
    Checked {
        kernel: k::FID_BARRIER_LOOP_EXITS,
        want: barrier_loop_exits,
    },
    Checked {
        kernel: k::FID_ATOMIC_ADD_F32_EDGES,
        want: atomic_add_f32_edges,
    },
    Checked {
        kernel: k::FID_ATOMIC_ADD_F64_EDGES,
        want: atomic_add_f64_edges,
    },
    Checked {
        kernel: k::FID_ATOMIC_INT_EDGES,
        want: atomic_int_edges,
    },
    Checked {
        kernel: k::FID_GRID_3D,
        want: grid_3d,
    },
    Checked {
        kernel: k::FID_WARPS_OF_3D_BLOCK,
        want: warps_of_3d_block,
    },
    Checked {
        kernel: k::FID_INT_EDGES,
        want: int_edges,
    },
    Checked {
        kernel: k::FID_FLOAT_TO_INT,
        want: float_to_int,
    },
    Checked {
        kernel: k::FID_FLOAT_EDGES,
        want: float_edges,
    },
    Checked {
        kernel: k::FID_FMA_COPYSIGN_NAN,
        want: fma_copysign_nan,
    },
    Checked {
        kernel: k::FID_WRAPPING_OVERFLOW,
        want: wrapping_overflow,
    },
    Checked {
        kernel: k::FID_F64_LOW_WORD,
        want: f64_low_word,
    },
    Checked {
        kernel: k::FID_F64_HALVES,
        want: f64_halves,
    },
    Checked {
        kernel: k::FID_F64_WORDS,
        want: f64_words,
    },
    Checked {
        kernel: k::FID_LARGE_LOCAL_ARRAY,
        want: large_local_array,
    },
    Checked {
        kernel: k::FID_ACTIVEMASK_WHILE_LANE_EXITS,
        want: activemask_while_lane_exits,
    },
    Checked {
        kernel: k::FID_TF32_ROUNDING,
        want: tf32_rounding,
    },
];

/// Cases undefined on the hardware, with what each backend does, and
/// whether the GPU is given them (a case that hangs it is not).
const UNDEFINED: &[(CaseKernel, &str, bool)] = &[
    (
        k::FID_SHFL_FROM_EXITED_LANE,
        "a shuffle from an exited lane: the GPU gives an undefined value (zeros on an H100); \
         the simulator reports it",
        true,
    ),
    (
        k::FID_TWO_BARRIERS,
        "threads at two different barriers: undefined in CUDA (`__syncthreads` in divergent code); \
         with the aligned `bar.sync` the H100 hung (the launch never ended); sync_threads is now \
         the non-aligned `barrier.sync 0`, which the GPU may count as one barrier; the simulator \
         reports the divergence",
        false,
    ),
];

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    let mut trials: Vec<Trial> = CHECKED
        .iter()
        .map(|c| {
            let (kernel, want) = (c.kernel, c.want);
            crate::common::kernel_trial(
                crate::test_name(module_path!(), kernel.name()),
                move |gpu| check_case(gpu, kernel, &want()).map(|()| Completion::Completed),
            )
        })
        .collect();
    trials.extend(UNDEFINED.iter().map(|&(kernel, what, on_gpu)| {
        crate::common::kernel_trial(
            crate::test_name(module_path!(), kernel.name()),
            move |gpu| undefined_case(gpu, kernel, what, on_gpu).map(|()| Completion::Completed),
        )
    }));
    trials.extend([
        kernel!(nan_bits_of_plain_arithmetic),
        kernel!(
            k::FID_BARRIER_AFTER_PARTIAL_STORES.name(),
            barrier_after_partial_stores_finishes
        ),
        hardware!(
            "ptxas and the driver's JIT",
            ptxas_miscompiles_a_narrowing_store
        ),
        hardware!(
            "ptxas and the driver's JIT",
            the_builders_rewrite_mends_the_narrowing_store
        ),
        kernel!(register_file_is_a_launch_limit),
        kernel!(printf_formats_as_c),
        kernel!(printf_gpu_misprints_are_findings),
        kernel!(printf_fifo_limit_drops_lines),
        kernel!(misaligned_vector_access_faults),
        kernel!(misaligned_ldmatrix_faults),
        kernel!(runaway_recursion_faults),
        kernel!(exact_math_is_bit_exact),
        cpu!(every_seed_gives_the_same_words),
        hardware!("simulator–GPU agreement", math_differences_within_the_table),
        hardware!("simulator–GPU agreement", tensor_core_words_agree),
        cpu!(rounding_models_compute_their_formulas),
        cpu!(measured_model_gives_the_h200s_words),
    ]);
    trials
}

/// The child processes of this family: `Some(exit code)` in a child.
pub fn child_process() -> Option<std::process::ExitCode> {
    use std::process::ExitCode;
    let var = |v| std::env::var_os(v).is_some();
    if !var(PRINTF_CHILD) && !var(FAULT_CHILD) {
        return None;
    }
    let Ok(gpu) = cuda_kernels::gpu() else {
        return Some(ExitCode::FAILURE);
    };
    if let Ok(spec) = std::env::var(PRINTF_CHILD) {
        return Some(printf_child(&gpu, &spec));
    }
    let name = std::env::var(FAULT_CHILD).unwrap_or_default();
    let Some(case) = FIDELITY_CASES.iter().find(|c| c.kernel.name() == name) else {
        return Some(ExitCode::FAILURE);
    };
    match gpu.fidelity_case(case) {
        Ok(words) => println!("RAN: {words:x?}"),
        Err(e) => println!("FAULT: {e} ({e:?})"),
    }
    Some(ExitCode::SUCCESS)
}

/// Runs this test binary again with `var=value`, on `gpu`'s backend.
fn child(gpu: &Gpu, var: &str, value: &str) -> Result<std::process::Output, Failed> {
    let exe = std::env::current_exe().map_err(fail)?;
    let mut cmd = std::process::Command::new(exe);
    cmd.env(var, value);
    if simulated(gpu) {
        cmd.env(crate::common::SIM, "1");
    } else {
        cmd.env_remove(crate::common::SIM);
    }
    cmd.output().map_err(fail)
}
