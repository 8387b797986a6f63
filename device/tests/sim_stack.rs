//! The simulated threads' stack size (`SimOptions::stack_bytes`, the
//! simulator's `cudaLimitStackSize`): a recursion that runs in the default
//! 1 MiB faults with a stack overflow in 128 KiB, and runs again after.
use std::ffi::c_void;

use cuda_kernels_device::sim::{self, LaunchShape, SimError, SimOptions, memory::Allocation};

mod k {
    use cuda_kernels_device::thread;

    /// A call that keeps a 1 KiB frame of its own per level.
    #[inline(never)]
    pub fn recurse(depth: u32, seed: u32) -> u32 {
        let mut frame = [0u32; 256];
        for (k, f) in frame.iter_mut().enumerate() {
            // SAFETY: a valid local.
            unsafe { core::ptr::write_volatile(f, seed.wrapping_add(k as u32)) };
        }
        if depth == 0 {
            // SAFETY: a valid local.
            unsafe { core::ptr::read_volatile(&frame[7]) }
        } else {
            recurse(depth - 1, seed.wrapping_mul(3)).wrapping_add(1)
        }
    }

    cuda_kernels_device::kernels! {
        /// `out[t] = recurse(depth, t)`.
        ///
        /// # Safety
        /// `out` holds a u32 per thread.
        pub fn deep(out: *mut u32, depth: u32) as DEEP {
            let t = thread::thread_idx_x();
            // SAFETY: one word per thread.
            unsafe { *out.add(t as usize) = recurse(depth, t) };
        }
    }
}

fn run(stack_bytes: usize) -> Result<(), SimError> {
    let out = Allocation::new(4 * 4, 4, "out").expect("mmap");
    let (mut p, mut depth) = (out.ptr().cast::<u32>(), 300u32);
    let params: [*mut c_void; 2] = [(&raw mut p).cast(), (&raw mut depth).cast()];
    let shape = LaunchShape {
        grid: [1, 1, 1],
        block: [4, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let options = SimOptions {
        stack_bytes,
        ..SimOptions::default()
    };
    let entry = k::DEEP.sim_entry().expect("a host entry");
    // SAFETY: the kernel's parameters: a word per thread.
    unsafe { sim::launch_with(k::DEEP.name(), shape, entry, &params, &options) }
}

#[test]
fn the_stack_size_is_a_launch_option() {
    // 300 levels of 1 KiB frames: about 300 KiB of the host's stack.
    run(sim::STACK_BYTES).expect("runs in the default 1 MiB");
    let e = run(128 << 10).expect_err("overflows 128 KiB").to_string();
    assert!(e.contains("stack overflow"), "{e}");
    run(sim::STACK_BYTES).expect("runs again in 1 MiB");
}
