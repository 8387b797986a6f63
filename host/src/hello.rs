//! Launcher for K17 `hello_kernel` (seed 004) and its formatted sibling
//! `hello_indexed`.
use cust::launch;

use crate::Gpu;
use crate::error::{CudaResultExt, Error, Result};

/// The PTX entry points this module launches.
pub const ENTRY_POINTS: &[&str] = &["hello_kernel", "hello_indexed"];

impl Gpu {
    /// K17: launches `hello_kernel` (or, with `indexed`, `hello_indexed`,
    /// which prints each thread's indices) on `blocks × threads` and waits;
    /// the lines appear on stdout at the synchronization.
    pub fn hello(&self, blocks: u32, threads: u32, indexed: bool) -> Result<()> {
        let name = if indexed {
            "hello_indexed"
        } else {
            "hello_kernel"
        };
        crate::launch::check_block(name, (threads, 1, 1))?;
        if blocks == 0 || blocks > crate::launch::MAX_GRID_X {
            return Err(Error::invalid(name, format!("grid of {blocks} blocks")));
        }
        self.bind()?;
        let f = self.function(name)?;
        let stream = self.stream();
        // SAFETY: the hello kernels take no arguments and write no memory.
        unsafe { launch!(f<<<blocks, threads, 0, stream>>>()) }.during("hello_kernel", "launch")?;
        self.synchronize("hello_kernel")
    }
}
