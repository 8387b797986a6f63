//! Launcher for K17 `hello_kernel` (seed 004) and its formatted sibling
//! `hello_indexed`.
use cust::launch;

use crate::Gpu;
use crate::error::{CudaResultExt, Error, Result};

/// The PTX entry points this module launches.
pub const ENTRY_POINTS: &[&str] = &["hello_kernel", "hello_indexed", "fault_test_kernel"];

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

    /// Launches `fault_test_kernel`, which fails on purpose with `gpu_assert!`
    /// at thread `thread` of block `block` (grid of `block + 1` blocks of
    /// `thread + 1` threads), and synchronizes: it returns the
    /// [`Error::DeviceFault`] that describes the failure.
    ///
    /// After it the CUDA context is unusable: call it only in a process you
    /// are about to end (the tests run it in a child process).
    pub fn fault_test(&self, block: u32, thread: u32) -> Result<()> {
        const K: &str = "fault_test_kernel";
        crate::launch::check_block(K, (thread.saturating_add(1), 1, 1))?;
        if block >= crate::launch::MAX_GRID_X {
            return Err(Error::invalid(K, format!("block index {block}")));
        }
        self.bind()?;
        let f = self.function(K)?;
        let stream = self.stream();
        // SAFETY: the kernel takes two integers and touches only the fault record.
        unsafe { launch!(f<<<block + 1, thread + 1, 0, stream>>>(block, thread)) }
            .during(K, "launch")?;
        self.synchronize(K)
    }
}
