//! GPU tests of the matrices family (not written yet).
mod common;

use std::process::ExitCode;

fn main() -> ExitCode {
    common::run(vec![])
}
