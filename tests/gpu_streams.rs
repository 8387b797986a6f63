//! GPU tests of the streams family (not written yet).
mod common;

use std::process::ExitCode;

fn main() -> ExitCode {
    common::run(vec![])
}
