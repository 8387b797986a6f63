//! The reduce demos (not written yet).
use std::path::Path;

use super::{BenchRecord, Report};
use crate::{Gpu, Result};

/// The reduce subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {}

/// Runs one reduce subcommand.
pub fn run(cmd: &Command, _gpu: Option<&Gpu>, _report: &mut Report) -> Result<()> {
    match *cmd {}
}

/// The reduce part of `cuda-kernels demo`.
pub fn run_all(_gpu: Option<&Gpu>, _out_dir: &Path, _report: &mut Report) -> Result<()> {
    Ok(())
}

/// The reduce part of `cuda-kernels bench`.
pub fn bench(_gpu: &Gpu, _records: &mut Vec<BenchRecord>) -> Result<()> {
    Ok(())
}
