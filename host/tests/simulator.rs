//! The public API on the simulator: launchers, buffers, errors, with no GPU.
//! (The full kernel suite runs on both backends in the root crate's
//! `tests/gpu`; these check the host crate's own simulator path.)
use cuda_kernels_host::kernel::Kernel;
use cuda_kernels_host::launch::LaunchConfig;
use cuda_kernels_host::mandelbrot::{MandelbrotParams, mandelbrot_cpu};
use cuda_kernels_host::matrices::{MatmulKernel, check_matmul};
use cuda_kernels_host::multiply::{multiply_cpu, multiply_inputs, vector_sum_i32_cpu};
use cuda_kernels_host::prelude::*;
use cuda_kernels_host::{DeviceId, Error, Gpu, Result};
use ndarray::{Array1, Array2};

fn sim() -> Gpu {
    Gpu::simulator().expect("the simulator opens anywhere")
}

#[test]
fn the_simulator_says_what_it_is() -> Result<()> {
    let gpu = sim();
    assert!(gpu.is_simulated());
    assert!(gpu.name()?.contains("simulator"));
    assert_eq!(gpu.device_id(), DeviceId::Simulator { ordinal: 0 });
    let info = gpu.device_info()?;
    assert_eq!(
        (
            info.multiprocessors,
            info.max_threads_per_block,
            info.warp_size
        ),
        (132, 1024, 32)
    );
    assert_eq!(info.shared_memory_per_block, 48 * 1024);
    assert!(gpu.image().to_string().contains("simulator"));
    Ok(())
}

#[test]
fn multiply_and_vector_sum_match_the_cpu() -> Result<()> {
    let gpu = sim();
    for n in [1usize, 3, 1000, 4097] {
        let (a, b) = multiply_inputs(n, 7);
        assert_eq!(
            gpu.multiply(a.view(), b.view())?,
            multiply_cpu(a.view(), b.view())?
        );
        let x = Array1::from_iter((0..n as i32).map(|i| i.wrapping_mul(0x3fff_ffff)));
        assert_eq!(
            gpu.vector_sum_i32(x.view(), x.view())?,
            vector_sum_i32_cpu(x.view(), x.view())?
        );
    }
    let e = gpu.multiply(Array1::zeros(0).view(), Array1::zeros(0).view());
    assert!(matches!(e, Err(Error::InvalidInput { .. })));
    Ok(())
}

#[test]
fn on_device_launchers_run_on_simulated_buffers() -> Result<()> {
    let gpu = sim();
    let a = gpu.to_device(&[1.0f32, 2.0, 3.0, 4.0, 5.0])?;
    let b = gpu.to_device(&[2.0f32; 5])?;
    let mut c = gpu.zeroed::<f32>(5)?;
    gpu.multiply_on_device(&a, &b, &mut c)?;
    let mut out = [0.0f32; 5];
    c.copy_to(&mut out)?;
    assert_eq!(out, [2.0, 4.0, 6.0, 8.0, 10.0]);
    // Slices starting anywhere.
    let mut tail = c.index_mut(1..);
    gpu.multiply_on_device(&a.index(1..), &b.index(..4), &mut tail)?;
    c.copy_to(&mut out)?;
    assert_eq!(out, [2.0, 4.0, 6.0, 8.0, 10.0]);
    Ok(())
}

#[test]
fn mandelbrot_equals_the_cpu_reference() -> Result<()> {
    let gpu = sim();
    let p = MandelbrotParams {
        breadth: 64,
        ..MandelbrotParams::default()
    };
    let lattice = p.lattice();
    let got = gpu.mandelbrot(lattice.view(), p.max_iters, p.upper_bound)?;
    assert_eq!(
        got,
        mandelbrot_cpu(lattice.view(), p.max_iters, p.upper_bound)?
    );
    assert_eq!(
        gpu.mandelbrot_explicit_sync(lattice.view(), p.max_iters, p.upper_bound)?,
        got
    );
    Ok(())
}

#[test]
fn naive_matmul_passes_the_check() -> Result<()> {
    let gpu = sim();
    let a = Array2::from_shape_fn((17, 9), |(i, j)| (i * 3 + j) as f32 * 0.25);
    let b = Array2::from_shape_fn((9, 13), |(i, j)| (i as f32 - j as f32) * 0.5);
    let c = gpu.matmul(MatmulKernel::Naive, a.view(), b.view())?;
    assert!(check_matmul(c.view(), a.view(), b.view())?.passed());
    Ok(())
}

#[test]
fn timings_are_refused_untimed_paths_work() {
    let gpu = sim();
    let a = Array2::<f32>::ones((4, 4));
    let e = gpu.matmul_timed(MatmulKernel::Naive, a.view(), a.view());
    assert!(matches!(e, Err(Error::NotOnSimulator { .. })), "{e:?}");
    let x = Array1::from(vec![1.0f32, 2.0]);
    let e = gpu.vector_sum_repeat_timed(x.view(), x.view(), 3);
    assert!(matches!(e, Err(Error::NotOnSimulator { .. })), "{e:?}");
    assert_eq!(
        gpu.vector_sum_repeat(x.view(), x.view(), 3)
            .unwrap()
            .to_vec(),
        vec![2.0, 4.0]
    );
}

#[test]
fn faults_are_device_faults_and_the_simulator_stays_usable() -> Result<()> {
    let gpu = sim();
    let e = gpu.fault_test(2, 5).unwrap_err();
    match &e {
        Error::DeviceFault {
            kernel,
            block,
            thread,
            source,
            ..
        } => {
            assert_eq!(*kernel, "fault_test_kernel");
            assert_eq!((block[0], thread[0]), (2, 5));
            assert!(source.is_none());
        }
        other => panic!("expected a DeviceFault, got {other:?}"),
    }
    assert!(e.to_string().contains("stays usable"), "{e}");
    let x = Array1::from(vec![3.0f32]);
    assert_eq!(gpu.multiply(x.view(), x.view())?.to_vec(), vec![9.0]);
    Ok(())
}

#[test]
fn the_launch_path_refuses_what_the_gpu_refuses() -> Result<()> {
    let gpu = sim();
    let k = cuda_kernels_gpu::multiply::MULTIPLY;
    let a = gpu.to_device(&[1.0f32; 4])?;
    let mut c = gpu.zeroed::<f32>(4)?;
    // More than 1024 threads per block.
    // SAFETY: refused before any thread runs.
    let e = unsafe {
        gpu.launch(
            k,
            LaunchConfig::linear(1, 2048),
            gpu.stream(),
            (&a, &a, &mut c, 4usize),
        )
    };
    assert!(
        matches!(
            e,
            Err(Error::LaunchRefused {
                kernel: "multiply",
                ..
            })
        ),
        "{e:?}"
    );
    // A handle from a bare name has no host entry.
    // SAFETY: multiply takes these parameters.
    let bare: Kernel<(*const f32, *const f32, *mut f32, usize)> =
        unsafe { Kernel::new(cuda_kernels_gpu::IMAGE, "multiply") };
    // SAFETY: refused before any thread runs.
    let e = unsafe {
        gpu.launch(
            bare,
            LaunchConfig::linear(1, 32),
            gpu.stream(),
            (&a, &a, &mut c, 4usize),
        )
    };
    assert!(
        matches!(e, Err(Error::NoSimEntry { kernel: "multiply" })),
        "{e:?}"
    );
    Ok(())
}

#[test]
fn another_simulated_devices_buffer_is_refused() -> Result<()> {
    let (gpu0, gpu1) = (Gpu::simulated_device(0)?, Gpu::simulated_device(1)?);
    let a = gpu1.to_device(&[1.0f32; 4])?;
    let mut c = gpu0.zeroed::<f32>(4)?;
    let e = gpu0.multiply_on_device(&a, &a, &mut c).unwrap_err();
    assert!(
        matches!(e, Error::WrongDevice { expected, found, .. }
            if expected == gpu0.device_id() && found == gpu1.device_id()),
        "{e:?}"
    );
    Ok(())
}

#[test]
fn life_gufunc_and_lanes_run_on_the_simulator() -> Result<()> {
    use cuda_kernels_host::async_mem::Lane;
    use cuda_kernels_host::life::{LifeKernel, LifeSims, life_cpu, random_lattice};
    use cuda_kernels_host::util::Rng;
    let gpu = sim();
    for kernel in [LifeKernel::Seed, LifeKernel::Fast] {
        let start = random_lattice(37, 0.3, &mut Rng::new(5));
        let mut sims = LifeSims::with_kernel(&gpu, std::slice::from_ref(&start), kernel)?;
        for _ in 0..3 {
            sims.frame()?;
        }
        assert_eq!(
            sims.lattice(0)?,
            life_cpu(start.view(), 3)?.view(),
            "{kernel:?}"
        );
    }
    let m = ndarray::ArrayD::from_shape_vec(vec![2, 2, 2], (0..8i64).collect()).unwrap();
    assert_eq!(
        gpu.gufunc_matmul_i64(m.view(), m.view())?,
        cuda_kernels_host::matrices::gufunc_matmul_i64_cpu(m.view(), m.view())?
    );
    let mut lane = Lane::<f32, 1>::from_host(&gpu, &[1.0, -2.0, 3.5])?;
    lane.upload(0)?;
    lane.mult_ker(0, 1, 64)?;
    lane.download(0)?;
    assert_eq!(lane.host()?, &[1.0, -2.0, 3.5]);
    Ok(())
}

#[test]
fn elementwise_kernels_run_on_the_simulator() -> Result<()> {
    let gpu = sim();
    let (a, b) = (
        Array1::from(vec![1i32, 2, 3]),
        Array1::from(vec![10i32, 20, 30]),
    );
    let mut c = Array1::<i32>::zeros(3);
    gpu.elementwise_sum(a.view(), b.view(), c.view_mut())?;
    assert_eq!(c.to_vec(), vec![11, 22, 33]);
    let x = Array1::from(vec![1.0f32, 2.0]);
    let mut y = Array1::from(vec![0.5f32, 0.25]);
    gpu.elementwise_saxpy(x.view(), y.view_mut(), 2.0)?;
    assert_eq!(y.to_vec(), vec![2.5, 4.25]);
    Ok(())
}

#[test]
fn reductions_equal_the_gpu_order_bit_for_bit() -> Result<()> {
    use cuda_kernels_host::reduce::{Max, ReduceOrder, Sum, reduce_cpu, reduce_in_gpu_order};
    let gpu = sim();
    for n in [1usize, 33, 4099, 70_001] {
        let ints: Vec<i64> = (0..n as i64).map(|i| i * 7 - 3000).collect();
        let view = ndarray::ArrayView1::from(&ints[..]);
        assert_eq!(
            gpu.reduce::<Sum, i64>(view, None)?,
            reduce_cpu::<Sum, i64>(view, None)?
        );
        assert_eq!(
            gpu.reduce::<Max, i64>(view, Some(5))?,
            ((n as i64 - 1) * 7 - 3000).max(5)
        );
        let floats: Vec<f32> = (0..n)
            .map(|i| ((i * 37) % 101) as f32 * 0.37 - 9.0)
            .collect();
        let order = ReduceOrder::aligned(gpu.reduce_launch_shape::<Sum, f32>(n)?);
        let got = gpu.reduce_slice::<Sum, f32>(&floats, None)?;
        let want = reduce_in_gpu_order::<Sum, f32>(&floats, None, order)?;
        assert_eq!(got.to_bits(), want.to_bits(), "n = {n}");
    }
    Ok(())
}

#[test]
fn barrier_and_shared_memory_kernels_run() -> Result<()> {
    use cuda_kernels_host::device_checks::block_reverse_i32_cpu;
    let gpu = sim();
    let x = Array1::from_iter(0..600i32);
    assert_eq!(
        gpu.block_reverse_i32(x.view())?,
        block_reverse_i32_cpu(x.view())
    );
    for (m, k, n) in [(1, 1, 1), (65, 33, 17), (64, 600, 64), (130, 8, 129)] {
        let a = Array2::from_shape_fn((m, k), |(i, j)| ((i * 5 + j * 3) % 11) as f32 - 5.0);
        let b = Array2::from_shape_fn((k, n), |(i, j)| ((i * 7 + j) % 13) as f32 * 0.5);
        let c = gpu.matrix_mul_tiled(a.view(), b.view())?;
        let chk = check_matmul(c.view(), a.view(), b.view())?;
        assert!(chk.passed(), "{m}×{k}·{k}×{n}: {chk:?}");
    }
    Ok(())
}

#[test]
fn an_access_past_a_buffer_is_reported() -> Result<()> {
    let gpu = sim();
    let a = gpu.to_device(&[1.0f32; 64])?;
    let mut c = gpu.zeroed::<f32>(64)?;
    // SAFETY (of the test): deliberately broken; the simulator traps the
    // access past `a`'s guard page instead of touching other memory.
    let e = unsafe {
        gpu.launch(
            cuda_kernels_gpu::multiply::MULTIPLY,
            LaunchConfig::linear(64, 256),
            gpu.stream(),
            (&a, &a, &mut c, 16_384usize),
        )
    };
    assert!(
        matches!(
            e,
            Err(Error::OutOfBounds {
                kernel: "multiply",
                ..
            })
        ),
        "{e:?}"
    );
    Ok(())
}

/// Deliberately broken kernels, for the simulator's findings.
mod broken {
    use cuda_kernels_device::sync::sync_threads;
    use cuda_kernels_device::{shared_array, thread};

    cuda_kernels_device::kernels! {
        /// Broken: every thread writes shared word 3 with no barrier.
        ///
        /// # Safety
        /// None needed.
        pub fn host_racy_write() as RACY_WRITE {
            let s = shared_array!(host_racy_write_tile: [u32; 8]);
            // SAFETY: 3 < 8.
            unsafe { s.store(3, thread::thread_idx_x()) };
        }

        /// Broken: threads below 16 wait at one barrier, the others at
        /// another (threads that exit without a barrier count as arrived,
        /// as on sm_70 and later; two different barriers do not).
        ///
        /// # Safety
        /// None needed.
        pub fn host_half_barrier() as HALF_BARRIER {
            let t = thread::thread_idx_x();
            if t < 16 {
                sync_threads();
            } else {
                core::hint::black_box(t);
                sync_threads();
            }
        }
    }
}

#[test]
fn races_and_divergent_barriers_are_typed_errors() {
    // The broken kernels are this test crate's: a simulator of its kernels.
    let gpu = Gpu::simulator_of_crate(env!("CARGO_CRATE_NAME"));
    let cfg = LaunchConfig::linear(1, 64);
    // SAFETY: the kernels take no parameters.
    let e = unsafe { gpu.launch(broken::RACY_WRITE, cfg, gpu.stream(), ()) };
    assert!(
        matches!(
            &e,
            Err(Error::SharedRace {
                kernel: "host_racy_write",
                ..
            })
        ),
        "{e:?}"
    );
    // SAFETY: as above.
    let e = unsafe { gpu.launch(broken::HALF_BARRIER, cfg, gpu.stream(), ()) };
    assert!(
        matches!(
            &e,
            Err(Error::BarrierDivergence {
                kernel: "host_half_barrier",
                ..
            })
        ),
        "{e:?}"
    );
    // The simulator stays usable (for this crate's kernels).
    // SAFETY: as above.
    let e = unsafe { gpu.launch(broken::RACY_WRITE, cfg, gpu.stream(), ()) };
    assert!(matches!(&e, Err(Error::SharedRace { .. })), "{e:?}");
}

#[test]
fn a_handle_launches_only_on_its_own_crates_image() {
    let cfg = LaunchConfig::linear(1, 64);
    // This crate's kernel on the built-in kernels' simulator, and a built-in
    // kernel on this crate's: refused both ways, naming both crates.
    let builtin = sim();
    // SAFETY: refused before any thread runs.
    let e = unsafe { builtin.launch(broken::HALF_BARRIER, cfg, builtin.stream(), ()) };
    match &e {
        Err(Error::KernelNotFound { name, reason }) => assert!(
            name == "host_half_barrier"
                && reason.contains(&format!("`{}`", env!("CARGO_CRATE_NAME")))
                && reason.contains("`cuda_kernels_gpu`")
                && reason.contains("cuda-kernels-builder"),
            "{reason}"
        ),
        other => panic!("expected KernelNotFound, got {other:?}"),
    }
    let mine = Gpu::simulator_of_crate(env!("CARGO_CRATE_NAME"));
    let x = Array1::from(vec![2.0f32]);
    let e = mine.multiply(x.view(), x.view());
    assert!(
        matches!(&e, Err(Error::KernelNotFound { name, .. }) if name == "multiply"),
        "{e:?}"
    );
}

/// Moved from the runtime's memory tests: they launch the catalogue's kernels.
#[test]
fn another_devices_memory_or_stream_is_a_typed_error() {
    let (gpu0, gpu1) = (
        Gpu::simulated_device(0).unwrap(),
        Gpu::simulated_device(1).unwrap(),
    );
    let (d0, d1) = (gpu0.device_id(), gpu1.device_id());
    assert_ne!(d0, d1);
    let a = gpu0.to_device(&[1.0f32; 8]).unwrap();
    let b = gpu1.to_device(&[1.0f32; 8]).unwrap();
    let mut c = gpu0.zeroed::<f32>(8).unwrap();
    let wrong = |e: Error, arg: &str| {
        matches!(e, Error::WrongDevice { kernel: "multiply", argument, expected, found }
            if argument == arg && expected == d0 && found == d1)
    };
    let e = gpu0.multiply_on_device(&a, &b, &mut c).unwrap_err();
    assert!(wrong(e, "argument 1"));
    // The launch path itself: a stream of another device.
    let cfg = LaunchConfig::linear(1, 32);
    let k = cuda_kernels_gpu::multiply::MULTIPLY;
    // SAFETY: refused before anything runs.
    let e = unsafe { gpu0.launch(k, cfg, gpu1.stream(), (&a, &a, &mut c, 8usize)) };
    assert!(wrong(e.unwrap_err(), "stream"));
    // A copy between devices.
    let e = c.copy_from_device(&b).unwrap_err();
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
    assert!(e.to_string().contains("simulated device 1"), "{e}");
    // Same ordinal, same device (as two Gpus on one CUDA device share its context).
    let again = Gpu::simulator().unwrap();
    assert_eq!(again.device_id(), d0);
    assert!(again.check_device("k", "a", &a).is_ok());
}

#[test]
fn hardware_features_are_refused_on_the_simulator() {
    let gpu = Gpu::simulator().unwrap();
    let not_on_sim = |e: Error| matches!(e, Error::NotOnSimulator { .. });
    assert!(gpu.is_simulated() && gpu.stream().is_simulated());
    assert!(not_on_sim(gpu.module().map(drop).unwrap_err()));
    assert!(not_on_sim(gpu.device().unwrap_err()));
    assert!(not_on_sim(gpu.context().map(drop).unwrap_err()));
    assert!(not_on_sim(gpu.function("multiply").map(drop).unwrap_err()));
    assert!(not_on_sim(gpu.stream().as_cust().map(drop).unwrap_err()));
    let e = cuda_kernels_host::timing::GpuTimer::time(gpu.stream(), || Ok(())).unwrap_err();
    assert!(not_on_sim(e));
    assert!(not_on_sim(
        cuda_kernels_host::timing::GpuTimer::on(&gpu)
            .map(drop)
            .unwrap_err()
    ));
    let a = ndarray::Array1::from(vec![1.0f32; 4]);
    let e = gpu
        .multiply_timed(
            a.view(),
            a.view(),
            cuda_kernels_host::multiply::MemoryMode::Device,
        )
        .unwrap_err();
    assert!(not_on_sim(e));
    let e = gpu
        .multiply_timed(
            a.view(),
            a.view(),
            cuda_kernels_host::multiply::MemoryMode::Unified,
        )
        .unwrap_err();
    assert!(not_on_sim(e));
    assert!(not_on_sim(gpu.launch_overhead(1).unwrap_err()));
    assert!(not_on_sim(
        cuda_kernels_host::bench::device_copy_gbps(&gpu, 1024, 1).unwrap_err()
    ));
    let inputs = vec![vec![1.0f32; 4]];
    assert!(not_on_sim(
        cuda_kernels_host::streams::SerialBatch::new(&gpu, &inputs)
            .map(drop)
            .unwrap_err()
    ));
    assert!(not_on_sim(
        cuda_kernels_host::streams::StreamBatch::new(&gpu, &inputs)
            .map(drop)
            .unwrap_err()
    ));
    assert!(gpu.synchronize("k").is_ok() && gpu.synchronize_context("k").is_ok());
    assert!(gpu.bind().is_ok());
    let s = gpu.new_stream().unwrap();
    assert!(s.is_simulated() && s.device() == gpu.device_id() && s.synchronize().is_ok());
}
