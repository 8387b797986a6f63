//! GPU tests of the mandelbrot family (not written yet).
mod common;

use std::process::ExitCode;

fn main() -> ExitCode {
    common::run(vec![])
}
