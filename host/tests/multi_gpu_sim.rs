//! The multi-device launchers and the copies between devices on simulated
//! devices (`Gpu::simulated_device`): the split, the joins, Life's halo
//! exchange on both paths, and the refusals, with no GPU. (The same
//! launchers on CUDA devices are tested by `tests/gpu/multi.rs`.)
use cuda_kernels_host::life::{life_cpu, random_lattice};
use cuda_kernels_host::mandelbrot::{MandelbrotParams, first_difference, mandelbrot_cpu};
use cuda_kernels_host::matrices::check_matmul;
use cuda_kernels_host::multi_gpu::life::{LifeBands, life};
use cuda_kernels_host::multi_gpu::mandelbrot::mandelbrot;
use cuda_kernels_host::multi_gpu::matmul::matmul;
use cuda_kernels_host::multi_gpu::reduce::{reduce, reduce_resident, scatter};
use cuda_kernels_host::multi_gpu::{labels, run_each};
use cuda_kernels_host::peer::{CopyPath, copy_between};
use cuda_kernels_host::prelude::*;
use cuda_kernels_host::reduce::{Sum, reduce_cpu};
use cuda_kernels_host::util::Rng;
use cuda_kernels_host::{DeviceId, Error, Gpu, Result};
use ndarray::{Array1, Array2};

/// Three simulated devices.
fn devices() -> Vec<Gpu> {
    (0..3)
        .map(|i| Gpu::simulated_device(i).expect("the simulator opens anywhere"))
        .collect()
}

/// The device lists each launcher runs on: one device, one device twice,
/// two, three, and three with the first again.
fn lists(g: &[Gpu]) -> Vec<Vec<&Gpu>> {
    vec![
        vec![&g[0]],
        vec![&g[0], &g[0]],
        vec![&g[0], &g[1]],
        vec![&g[0], &g[1], &g[2]],
        vec![&g[0], &g[1], &g[2], &g[0]],
    ]
}

#[test]
fn simulated_devices_are_named_apart() {
    let g = devices();
    assert_eq!(g[1].label(), "simulated device 1");
    assert_eq!(g[2].ordinal(), 2);
    assert!(g[0].same_device(&g[0]) && !g[0].same_device(&g[1]));
}

#[test]
fn copies_between_simulated_devices_take_both_paths() -> Result<()> {
    let g = devices();
    // 16 MiB is one staging chunk: 9 Mi words cross two chunk edges.
    for n in [1usize, 1000, 9 << 20] {
        let host: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let src = g[1].to_device(&host)?;
        for dst_gpu in [&g[0], &g[1]] {
            let mut dst = dst_gpu.zeroed::<u32>(n)?;
            for path in [CopyPath::Peer, CopyPath::Staged] {
                dst.set_zero()?;
                assert_eq!(
                    copy_between(&g[1], &src, dst_gpu, &mut dst, Some(path))?,
                    path
                );
                let mut back = vec![0u32; n];
                dst.copy_to(&mut back)?;
                assert!(back == host, "{n} words to {} by {path}", dst_gpu.label());
            }
        }
    }
    Ok(())
}

#[test]
fn a_copy_given_another_devices_buffer_is_refused() -> Result<()> {
    let g = devices();
    let src = g[1].to_device(&[1u32, 2, 3])?;
    let mut dst = g[2].zeroed::<u32>(3)?;
    // The source is device 1's, but device 0 is named for it.
    match copy_between(&g[0], &src, &g[2], &mut dst, None) {
        Err(Error::WrongDevice {
            expected, found, ..
        }) => {
            assert_eq!(expected, DeviceId::Simulator { ordinal: 0 });
            assert_eq!(found, DeviceId::Simulator { ordinal: 1 });
        }
        other => panic!("wanted WrongDevice, got {other:?}"),
    }
    Ok(())
}

#[test]
fn mandelbrot_split_is_identical() -> Result<()> {
    let g = devices();
    let p = MandelbrotParams {
        breadth: 67,
        ..MandelbrotParams::default()
    };
    let lattice = p.lattice();
    let want = mandelbrot_cpu(lattice.view(), p.max_iters, p.upper_bound)?;
    for gpus in lists(&g) {
        let got = mandelbrot(&gpus, lattice.view(), p.max_iters, p.upper_bound)?;
        assert_eq!(
            first_difference(got.view(), want.view()),
            None,
            "[{}]",
            labels(&gpus).join(", ")
        );
    }
    Ok(())
}

#[test]
fn life_bands_match_the_cpu_on_both_halo_paths() -> Result<()> {
    let g = devices();
    for (n, steps) in [(13, 9), (32, 12)] {
        let start = random_lattice(n, 0.35, &mut Rng::new(n as u64));
        let want = life_cpu(start.view(), steps)?;
        for gpus in lists(&g) {
            assert_eq!(
                life(&gpus, start.view(), steps)?,
                want,
                "[{}]",
                labels(&gpus).join(", ")
            );
            if gpus.len() > 1 {
                for path in [CopyPath::Peer, CopyPath::Staged] {
                    let mut bands = LifeBands::upload(&gpus, start.view(), Some(path))?;
                    bands.run(steps / 2)?;
                    bands.run(steps - steps / 2)?;
                    assert_eq!(bands.path(), Some(path));
                    assert_eq!(bands.download()?, want, "{path}");
                }
            }
        }
    }
    Ok(())
}

#[test]
fn reduce_split_and_resident() -> Result<()> {
    let g = devices();
    let mut rng = Rng::new(3);
    let x = Array1::from_shape_simple_fn(5000, || rng.below(1000) as i64 - 500);
    let want = reduce_cpu::<Sum, i64>(x.view(), Some(9))?;
    for gpus in lists(&g) {
        assert_eq!(reduce::<Sum, i64>(&gpus, x.view(), Some(9))?, want);
        let shares = scatter(&gpus, x.as_slice().unwrap_or(&[]))?;
        let parts: Vec<_> = gpus.iter().zip(&shares).map(|(g, b)| (*g, &**b)).collect();
        assert_eq!(reduce_resident::<Sum, i64>(&parts, Some(9))?, want);
    }
    Ok(())
}

#[test]
fn a_resident_share_listed_with_another_device_is_refused() -> Result<()> {
    let g = devices();
    let x = Array1::from_iter(0..5000i64);
    // Each share listed with the other device: refused before any launch.
    let shares = scatter(&[&g[0], &g[1]], x.as_slice().unwrap_or(&[]))?;
    let parts = [(&g[0], &*shares[1]), (&g[1], &*shares[0])];
    let e = reduce_resident::<Sum, i64>(&parts, None).unwrap_err();
    assert!(
        matches!(&e, Error::OnDevice { source, .. } if matches!(**source, Error::WrongDevice { .. })),
        "{e}"
    );
    Ok(())
}

#[test]
fn sgemm_split_by_rows() -> Result<()> {
    let g = devices();
    let mut rng = Rng::new(15);
    let a = Array2::from_shape_simple_fn((37, 20), || rng.uniform() as f32 - 0.5);
    let b = Array2::from_shape_simple_fn((20, 9), || rng.uniform() as f32 - 0.5);
    for gpus in lists(&g) {
        let c = matmul(&gpus, a.view(), b.view())?;
        let check = check_matmul(c.view(), a.view(), b.view())?;
        assert!(check.passed(), "[{}]: {check:?}", labels(&gpus).join(", "));
    }
    Ok(())
}

#[test]
fn bad_device_lists_are_refused_before_anything_runs() {
    let g = devices();
    let lattice = MandelbrotParams::default().lattice();
    let e = mandelbrot(&[], lattice.view(), 256, 2.0).unwrap_err();
    assert!(e.to_string().contains("an empty device list"), "{e}");
    let two = MandelbrotParams {
        breadth: 2,
        ..MandelbrotParams::default()
    };
    let e = mandelbrot(&[&g[0], &g[1], &g[2]], two.lattice().view(), 256, 2.0).unwrap_err();
    assert!(e.to_string().contains("3 devices but only 2 rows"), "{e}");
    let small = random_lattice(5, 0.5, &mut Rng::new(1));
    let e = life(&[&g[0], &g[1]], small.view(), 1).unwrap_err();
    assert!(e.to_string().contains("too small for 2 bands"), "{e}");
}

#[test]
fn a_device_failing_mid_job_is_named_and_the_others_still_work() -> Result<()> {
    let g = devices();
    let gpus = [&g[0], &g[1], &g[2]];
    let a = Array1::from_iter((0..256).map(|i| i as f32));
    let e = run_each("test job", &labels(&gpus), gpus.to_vec(), |i, gpu, crew| {
        for launch in 0..100 {
            crew.check("test job")?;
            if i == 2 && launch == 5 {
                return Err(Error::invalid("multiply", "the device was lost"));
            }
            gpu.multiply(a.view(), a.view())?;
        }
        Ok(())
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "test job on simulated device 2: multiply: the device was lost"
    );
    let start = random_lattice(16, 0.4, &mut Rng::new(8));
    assert_eq!(life(&gpus, start.view(), 5)?, life_cpu(start.view(), 5)?);
    Ok(())
}
