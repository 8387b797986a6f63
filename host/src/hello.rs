//! Launcher for K17 `hello_kernel` (seed 004) and its formatted sibling
//! `hello_indexed`.
use cuda_kernels_gpu::hello::{FAULT_TEST_KERNEL, HELLO_INDEXED, HELLO_KERNEL};

use crate::Gpu;
use crate::error::{Error, Result};
use crate::launch::LaunchConfig;

/// The hello-world launcher on a [`Gpu`].
pub trait HelloExt {
    /// K17: launches `hello_kernel` (or, with `indexed`, `hello_indexed`,
    /// which prints each thread's indices) on `blocks × threads` and waits;
    /// the lines appear on stdout at the synchronization.
    fn hello(&self, blocks: u32, threads: u32, indexed: bool) -> Result<()>;

    /// Launches `fault_test_kernel`, which fails on purpose with `gpu_assert!`
    /// at thread `thread` of block `block` (grid of `block + 1` blocks of
    /// `thread + 1` threads), and synchronizes: it returns the
    /// [`Error::DeviceFault`] that describes the failure.
    ///
    /// On a GPU the CUDA context is unusable after it: call it only in a
    /// process you are about to end (the tests run it in a child process).
    /// The simulator stays usable.
    fn fault_test(&self, block: u32, thread: u32) -> Result<()>;
}

impl HelloExt for Gpu {
    fn hello(&self, blocks: u32, threads: u32, indexed: bool) -> Result<()> {
        let kernel = if indexed { HELLO_INDEXED } else { HELLO_KERNEL };
        let name = kernel.name();
        crate::launch::check_block(name, (threads, 1, 1))?;
        if blocks == 0 || blocks > crate::launch::MAX_GRID_X {
            return Err(Error::invalid(name, format!("grid of {blocks} blocks")));
        }
        self.bind()?;
        let cfg = LaunchConfig::linear(blocks, threads);
        // SAFETY: the hello kernels take no arguments and write no memory.
        unsafe { self.launch(kernel, cfg, self.stream(), ()) }?;
        self.synchronize(name)
    }

    fn fault_test(&self, block: u32, thread: u32) -> Result<()> {
        const K: &str = FAULT_TEST_KERNEL.name();
        crate::launch::check_block(K, (thread.saturating_add(1), 1, 1))?;
        if block >= crate::launch::MAX_GRID_X {
            return Err(Error::invalid(K, format!("block index {block}")));
        }
        self.bind()?;
        let cfg = LaunchConfig::linear(block + 1, thread + 1);
        // SAFETY: the kernel takes two integers and touches only the fault record.
        unsafe { self.launch(FAULT_TEST_KERNEL, cfg, self.stream(), (block, thread)) }?;
        self.synchronize(K)
    }
}
