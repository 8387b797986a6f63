//! The CPU simulator: kernels declared with `kernels!`, launched with
//! `sim::launch` over `sim::memory` allocations.
use std::ffi::c_void;

use cuda_kernels_device::sim::{self, LaunchShape, SimError, memory::Allocation};

mod k {
    use cuda_kernels_device::{gpu_assert, thread};

    cuda_kernels_device::kernels! {
        /// `y[i] = a * x[i]`.
        ///
        /// # Safety
        /// `x` and `y` hold `n` f32.
        pub fn scale(x: *const f32, y: *mut f32, n: usize, a: f32) as SCALE {
            for i in thread::grid_stride(n) {
                // SAFETY: i < n.
                unsafe { *y.add(i) = a * *x.add(i) };
            }
        }

        /// Fails in thread 3 of block 1.
        ///
        /// # Safety
        /// None needed.
        pub fn assert_fails(n: u32) as ASSERT_FAILS {
            gpu_assert!(thread::index_1d() as u32 != n, "thread hit n");
        }
    }
}

fn shape(grid: u32, block: u32) -> LaunchShape {
    LaunchShape {
        grid: [grid, 1, 1],
        block: [block, 1, 1],
        dynamic_shared_bytes: 0,
    }
}

fn f32_buffer(values: &[f32], label: &str) -> Allocation {
    let a = Allocation::new(std::mem::size_of_val(values), 4, label).expect("mmap");
    // SAFETY: the allocation holds exactly these bytes.
    unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), a.ptr().cast(), values.len()) };
    a
}

#[test]
fn scale_runs_every_thread() {
    let n = 1000usize;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = f32_buffer(&xs, "x");
    let y = f32_buffer(&vec![0.0; n], "y");
    let (mut xp, mut yp, mut np, mut a) = (x.ptr(), y.ptr(), n, 2.0f32);
    let params: [*mut c_void; 4] = [
        (&raw mut xp).cast(),
        (&raw mut yp).cast(),
        (&raw mut np).cast(),
        (&raw mut a).cast(),
    ];
    let entry = k::SCALE.sim_entry().expect("host entry");
    // SAFETY: the parameters match the kernel's, with buffers of n f32.
    unsafe { sim::launch("scale", shape(3, 128), entry, &params) }.expect("launch");
    // SAFETY: y holds n f32.
    let ys = unsafe { std::slice::from_raw_parts(y.ptr().cast::<f32>(), n) };
    assert!(ys.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));
}

#[test]
fn assert_is_a_fault_and_the_next_launch_works() {
    let mut n = 35u32;
    let params: [*mut c_void; 1] = [(&raw mut n).cast()];
    let entry = k::ASSERT_FAILS.sim_entry().expect("host entry");
    // SAFETY: one u32 parameter.
    let e = unsafe { sim::launch("assert_fails", shape(2, 32), entry, &params) }.unwrap_err();
    match &e {
        SimError::Fault { at, message, .. } => {
            assert_eq!(at.block, [1, 0, 0]);
            assert_eq!(at.thread, [3, 0, 0]);
            assert_eq!(message, "thread hit n");
        }
        other => panic!("not a fault: {other}"),
    }
    let mut n = 1000u32;
    let params: [*mut c_void; 1] = [(&raw mut n).cast()];
    // SAFETY: as above.
    unsafe { sim::launch("assert_fails", shape(2, 32), entry, &params) }.expect("next launch");
}

#[test]
fn too_many_threads_are_refused() {
    let mut n = 0u32;
    let params: [*mut c_void; 1] = [(&raw mut n).cast()];
    let entry = k::ASSERT_FAILS.sim_entry().expect("host entry");
    // SAFETY: one u32 parameter.
    let e = unsafe { sim::launch("assert_fails", shape(1, 2048), entry, &params) }.unwrap_err();
    assert!(matches!(e, SimError::LaunchRefused { .. }), "{e}");
}
