//! `hello_kernel`: every thread prints a line with `vprintf`.

use crate::device::thread;
use crate::gpu_printf;

crate::device::kernels! {
    /// Prints `Hello World From GPU!` once per thread (the seed launches
    /// <<<1, 3>>>: three lines).
    ///
    /// # Safety
    /// None; `unsafe` only because every entry point is.
    pub fn hello_kernel() as HELLO_KERNEL {
        gpu_printf!("Hello World From GPU!\n");
    }

    /// Fails on purpose at thread `thread` of block `block` with
    /// `gpu_assert!`, to test the fault report (file, line, block, thread).
    ///
    /// # Safety
    /// None; `unsafe` only because every entry point is.
    pub fn fault_test_kernel(block: u32, thread: u32) as FAULT_TEST_KERNEL {
        crate::gpu_assert!(
            !(thread::block_idx_x() == block && thread::thread_idx_x() == thread),
            "fault_test_kernel fails here on purpose"
        );
    }

    /// Formatted device printing: each thread prints its thread and block
    /// index and its global index.
    ///
    /// # Safety
    /// None; `unsafe` only because every entry point is.
    pub fn hello_indexed() as HELLO_INDEXED {
        gpu_printf!(
            "Hello from thread %u of block %u (global index %lu)\n",
            thread::thread_idx_x(),
            thread::block_idx_x(),
            thread::index_1d()
        );
    }
}
