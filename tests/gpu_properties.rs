//! Property tests: GPU and CPU agree on random shapes and values, for every
//! kernel family (proptest's runner driven by hand, so that each property is
//! one GPU trial, ignored with the reason where there is no GPU).
mod common;

use std::process::ExitCode;

use common::{fail, gpu_test};
use cuda_kernels::Gpu;
use cuda_kernels::multiply::{multiply_cpu, vector_sum_i32_cpu};
use cuda_kernels::ndarray::Array1;
use libtest_mimic::Failed;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

fn main() -> ExitCode {
    common::run(vec![
        gpu_test("multiply_agrees_with_cpu", multiply_agrees_with_cpu),
        gpu_test(
            "vector_sum_i32_agrees_with_cpu",
            vector_sum_i32_agrees_with_cpu,
        ),
    ])
}

/// Runs `cases` random cases of a property; a counterexample fails the trial
/// with proptest's shrunk input.
fn check<S: Strategy>(
    cases: u32,
    strategy: S,
    property: impl Fn(S::Value) -> Result<(), TestCaseError>,
) -> Result<(), Failed> {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner.run(&strategy, property).map_err(fail)
}

fn gpu_err(e: cuda_kernels::Error) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

fn multiply_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    let values = prop::collection::vec((-1e3f32..1e3, -1e3f32..1e3), 1..5000);
    check(64, values, |pairs| {
        let a: Array1<f32> = pairs.iter().map(|p| p.0).collect();
        let b: Array1<f32> = pairs.iter().map(|p| p.1).collect();
        let c = gpu.multiply(a.view(), b.view()).map_err(gpu_err)?;
        prop_assert_eq!(c, multiply_cpu(a.view(), b.view()).map_err(gpu_err)?);
        Ok(())
    })
}

fn vector_sum_i32_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    let values = prop::collection::vec((any::<i32>(), any::<i32>()), 1..5000);
    check(64, values, |pairs| {
        let a: Array1<i32> = pairs.iter().map(|p| p.0).collect();
        let b: Array1<i32> = pairs.iter().map(|p| p.1).collect();
        let r = gpu.vector_sum_i32(a.view(), b.view()).map_err(gpu_err)?;
        prop_assert_eq!(r, vector_sum_i32_cpu(a.view(), b.view()).map_err(gpu_err)?);
        Ok(())
    })
}
