//! The GPU test binary (`cargo test --test gpu`): one module per kernel
//! family, each holding that family's correctness tests, property tests and
//! refusals of bad input, CPU-only checks of the family included:
//!
//! | module       | kernels                                                        |
//! |--------------|----------------------------------------------------------------|
//! | `foundation` | the `Gpu`, PTX modules, launch helpers, multiply, vector_sum_i32, hello, block_reverse, device faults |
//! | `matrices`   | doubles_matrix, matmul (naive, tiled), elementwise, vector_sum_repeat, gufunc_matmul_i64 |
//! | `half_precision` | the 16-bit float check (every conversion, packed operations), the GEMM family (mma.sync, CUDA cores) |
//! | `reduce`     | the reductions and the device primitives (warps, atomics, loads, block tree) |
//! | `mandelbrot` | mandelbrot_ker on every path: high-level, PTX file, driver API, explicit sync, the C ABI |
//! | `streams`    | mult_ker, batches on streams, events, lanes, Life, contexts    |
//! | `stress`     | many host threads × many launches, no leak                     |
//! | `multi`      | every device, copies between devices, the multi-device launchers |
//! | `nccl`       | communicators and collectives (NCCL, or simulated), the multi-device launchers on both backends |
//! | `graphs`     | CUDA graphs: capture, replay, argument updates, refusals (multiply, vector_sum_i32, conway_fast) |
//! | `soundness`  | buffers outlive their `Gpu`; two `Gpu`s, NCCL on other streams and `to_vec` ordered with the device's ordering stream |
//! | `sort`       | radix_sort_histogram_*, radix_sort_onesweep_* (every key type, both orders, keys, pairs, indices) |
//! | `histogram`  | histogram_even_* (u32, i32, f32; 1 to 4,096 bins)                |
//! | `launchers`  | every launcher given another device's memory and sizes past its kernel's indices |
//! | `primitives` | shared-memory atomics (and a misaligned one), syncwarp, activemask, match_any/match_all |
//! | `agreement`  | every kernel on the GPU and on the simulator: equal results    |
//! | `handles`    | kernel handles launch only on their own crate's image          |
//! | `fidelity`   | adversarial cases with values from the PTX ISA and CUDA guide, both backends |
//! | `harness`    | this harness: where each kind of test runs, with and without a GPU |
//!
//! Tests are named `family::test` and marked with their kind: `[cpu]`, a
//! kernel-result test `[gpu]` on a GPU and `[sim]` on the simulator (where
//! there is no GPU, or under `CUDA_KERNELS_SIM=1`; `[gpu+sim]` under
//! `CUDA_KERNELS_SIM_COMPARE=1`), a hardware-only test `[gpu]` (ignored
//! without a GPU, with what hardware it is about). Filter by family with
//! `cargo test --test gpu -- reduce::`, by kind with `-- '[sim]'`. See
//! `tests/common/mod.rs`.
use std::process::ExitCode;

#[path = "../common/mod.rs"]
mod common;

/// `family::name` for a test of module `module` (`gpu::reduce` → `reduce`).
fn test_name(module: &str, name: &str) -> String {
    let family = module.split_once("::").map_or(module, |(_, f)| f);
    format!("{family}::{name}")
}

/// A kernel-result test named `<family>::<name>`: `kernel!(function)` or
/// `kernel!("name", function)`; on the GPU, or on the simulator.
macro_rules! kernel {
    ($body:ident) => {
        kernel!(stringify!($body), $body)
    };
    ($name:expr, $body:expr) => {
        $crate::common::kernel_test($crate::test_name(module_path!(), $name), $body)
    };
}

/// A hardware-only test named `<family>::<name>` about `what` (a short
/// phrase: "timings", "contexts"): `hardware!("what", function)` or
/// `hardware!("what", "name", function)`; on the GPU only.
macro_rules! hardware {
    ($what:literal, $body:ident) => {
        hardware!($what, stringify!($body), $body)
    };
    ($what:literal, $name:expr, $body:expr) => {
        $crate::common::hardware_test($crate::test_name(module_path!(), $name), $what, $body)
    };
}

/// A hardware-only test that runs while no other GPU trial of the binary does
/// (it measures the whole device), named as [`hardware!`].
macro_rules! hardware_alone {
    ($what:literal, $body:ident) => {
        $crate::common::exclusive_hardware_test(
            $crate::test_name(module_path!(), stringify!($body)),
            $what,
            $body,
        )
    };
}

/// A CPU test named `<family>::<name>`, as [`kernel!`].
macro_rules! cpu {
    ($body:ident) => {
        cpu!(stringify!($body), $body)
    };
    ($name:expr, $body:expr) => {
        $crate::common::cpu_test($crate::test_name(module_path!(), $name), $body)
    };
}

mod support;

mod agreement;
mod collectives;
mod fidelity;
mod foundation;
mod graphs;
mod half_precision;
mod handles;
mod harness;
mod histogram;
mod launchers;
mod mandelbrot;
mod matrices;
mod multi;
mod nccl;
mod primitives;
mod reduce;
mod sort;
mod soundness;
mod streams;
mod stress;

fn main() -> ExitCode {
    // Child processes of tests that need a process of their own.
    if let Some(code) = foundation::child_process().or_else(primitives::child_process) {
        return code;
    }
    if let Some(code) = collectives::child_process() {
        return code;
    }
    if let Some(code) = fidelity::child_process() {
        return code;
    }
    if let Some(code) = nccl::child_process() {
        return code;
    }
    if let Some(code) = soundness::child_process() {
        return code;
    }
    let trials = [
        foundation::trials(),
        handles::trials(),
        matrices::trials(),
        half_precision::trials(),
        reduce::trials(),
        collectives::trials(),
        sort::trials(),
        histogram::trials(),
        launchers::trials(),
        primitives::trials(),
        mandelbrot::trials(),
        streams::trials(),
        multi::trials(),
        nccl::trials(),
        soundness::trials(),
        graphs::trials(),
        stress::trials(),
        agreement::trials(),
        fidelity::trials(),
        harness::trials(),
    ]
    .into_iter()
    .flatten()
    .collect();
    common::run(trials)
}
