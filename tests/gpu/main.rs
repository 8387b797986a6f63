//! The GPU test binary (`cargo test --test gpu`): one module per kernel
//! family, each holding that family's correctness tests, property tests and
//! refusals of bad input, CPU-only checks of the family included:
//!
//! | module       | kernels                                                        |
//! |--------------|----------------------------------------------------------------|
//! | `foundation` | the `Gpu`, PTX modules, launch helpers, multiply, vector_sum_i32, hello, block_reverse, device faults |
//! | `matrices`   | doubles_matrix, matmul (naive, tiled), elementwise, vector_sum_repeat, gufunc_matmul_i64 |
//! | `reduce`     | the reductions and the device primitives (warps, atomics, loads, block tree) |
//! | `mandelbrot` | mandelbrot_ker on every path: high-level, PTX file, driver API, explicit sync, the C ABI |
//! | `streams`    | mult_ker, batches on streams, events, lanes, Life, contexts    |
//! | `stress`     | many host threads × many launches, no leak                     |
//! | `multi`      | every device, copies between devices, the multi-device launchers |
//! | `harness`    | this harness: no GPU means ignored, or failed under `CUDA_KERNELS_REQUIRE_GPU=1` |
//!
//! Tests are named `family::test` and marked `[gpu]` or `[cpu]`; filter by
//! family with `cargo test --test gpu -- reduce::`. Without a GPU the `[gpu]`
//! tests are ignored with the reason (see `tests/common/mod.rs`).
use std::process::ExitCode;

#[path = "../common/mod.rs"]
mod common;

/// `family::name` for a test of module `module` (`gpu::reduce` → `reduce`).
fn test_name(module: &str, name: &str) -> String {
    let family = module.split_once("::").map_or(module, |(_, f)| f);
    format!("{family}::{name}")
}

/// A GPU test named `<family>::<name>`: `gpu!(function)` or
/// `gpu!("name", function)`.
macro_rules! gpu {
    ($body:ident) => {
        gpu!(stringify!($body), $body)
    };
    ($name:expr, $body:expr) => {
        $crate::common::gpu_test($crate::test_name(module_path!(), $name), $body)
    };
}

/// A GPU test that runs while no other GPU trial of the binary does (it
/// measures the whole device), named as [`gpu!`].
macro_rules! gpu_alone {
    ($body:ident) => {
        $crate::common::exclusive_gpu_test(
            $crate::test_name(module_path!(), stringify!($body)),
            $body,
        )
    };
}

/// A CPU test named `<family>::<name>`, as [`gpu!`].
macro_rules! cpu {
    ($body:ident) => {
        cpu!(stringify!($body), $body)
    };
    ($name:expr, $body:expr) => {
        $crate::common::cpu_test($crate::test_name(module_path!(), $name), $body)
    };
}

mod support;

mod foundation;
mod harness;
mod mandelbrot;
mod matrices;
mod multi;
mod reduce;
mod streams;
mod stress;

fn main() -> ExitCode {
    // Child processes of tests that need a process of their own.
    if let Some(code) = foundation::child_process() {
        return code;
    }
    let trials = [
        foundation::trials(),
        matrices::trials(),
        reduce::trials(),
        mandelbrot::trials(),
        streams::trials(),
        multi::trials(),
        stress::trials(),
        harness::trials(),
    ]
    .into_iter()
    .flatten()
    .collect();
    common::run(trials)
}
