//! Every device, and several on one job (issue 15): the device list, a
//! `Gpu` on each device, copies between devices (peer and staged, the same
//! bytes), and the multi-device launchers (SGEMM and Mandelbrot by rows,
//! reduce resident or split, Life in bands with halos) against one GPU and
//! the CPU, and their refusals of bad input.
//!
//! The tests run on any number of GPUs: each launcher runs on every device
//! list of [`Devices::lists`]: device 0 alone, device 0 listed twice (two
//! bands on one device: the split and the halo exchange run even on one
//! GPU), every device, and every device followed by device 0 again. With two
//! GPUs the copies go between them; with one, from the device to itself.
//! On the simulator "every device" is two simulated devices (the one the
//! harness gives and `Gpu::simulated_device(1)`), at smaller sizes.
use cuda_kernels::life::{life_cpu, random_lattice};
use cuda_kernels::mandelbrot::{MandelbrotParams, first_difference, mandelbrot_cpu};
use cuda_kernels::matrices::check_matmul;
use cuda_kernels::multi_gpu::life::{LifeBands, life};
use cuda_kernels::multi_gpu::mandelbrot::mandelbrot;
use cuda_kernels::multi_gpu::matmul::matmul;
use cuda_kernels::multi_gpu::reduce::{reduce, reduce_in_devices_order, reduce_resident, scatter};
use cuda_kernels::multi_gpu::{labels, run_each, split_rows};
use cuda_kernels::ndarray::{Array1, Array2};
use cuda_kernels::peer::{CopyPath, can_access_peer, copy_between};
use cuda_kernels::reduce::{Max, Min, Sum, reduce_cpu};
use cuda_kernels::util::Rng;
use cuda_kernels::{Error, Gpu};
use libtest_mimic::Trial;

use crate::common::{ensure, fail, simulated, sized};
use cuda_kernels::prelude::*;

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        hardware!("the driver's device list", every_device_is_listed),
        hardware!("CUDA devices by ordinal", a_gpu_on_every_device),
        hardware!(
            "CUDA devices by ordinal",
            a_missing_ordinal_names_the_devices
        ),
        kernel!(peer_and_staged_copies_agree),
        kernel!(sgemm_split_by_rows),
        kernel!(mandelbrot_split_identical),
        kernel!(reduce_resident_and_split),
        kernel!(life_bands_identical),
        kernel!(life_both_halo_paths),
        kernel!(refusals),
        kernel!(a_device_failing_mid_job),
        kernel!(injected_faults_are_caught),
    ]
}

/// The devices a test runs on: the harness's `gpu` and the other devices
/// of the run, opened for the one test and dropped with it (nothing the
/// family opens outlives the trials: compute-sanitizer's leak check would
/// see each leftover `Gpu`'s pinned fault record). The others are every
/// other usable CUDA device, or on the simulator simulated device 1.
struct Devices<'a> {
    gpu: &'a Gpu,
    others: Vec<Gpu>,
}

impl<'a> Devices<'a> {
    /// With two or more usable devices, "every device" is that many
    /// distinct ones (asserted, and their ids logged), never device 0
    /// twice.
    fn open(gpu: &'a Gpu) -> Result<Self, libtest_mimic::Failed> {
        let (others, usable) = if gpu.is_simulated() {
            (vec![Gpu::simulated_device(1).map_err(fail)?], 2)
        } else {
            let usable: Vec<u32> = cuda_kernels::devices()
                .map_err(fail)?
                .into_iter()
                .filter(|d| d.unusable.is_none())
                .map(|d| d.ordinal)
                .collect();
            let others = usable
                .iter()
                .filter(|&&o| o != gpu.ordinal())
                .map(|&o| cuda_kernels::gpu_on(o))
                .collect::<Result<Vec<_>, _>>()
                .map_err(fail)?;
            (others, usable.len())
        };
        let devices = Self { gpu, others };
        let ids: Vec<_> = devices.all().iter().map(|g| g.device_id()).collect();
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        ensure(distinct.len() == ids.len() && ids.len() == usable, || {
            format!("every device of {usable} usable: {ids:?}")
        })?;
        // Once a run: the distinct devices "every device" means.
        static LOGGED: std::sync::Once = std::sync::Once::new();
        LOGGED.call_once(|| eprintln!("multi: every device is [{}]", names(&devices.all())));
        Ok(devices)
    }

    /// Every device of the run, `gpu` first.
    fn all(&self) -> Vec<&Gpu> {
        std::iter::once(self.gpu).chain(&self.others).collect()
    }

    /// The device lists each launcher is tested on: device 0 alone, device
    /// 0 twice, every device, every device and device 0 again.
    fn lists(&self) -> Vec<Vec<&Gpu>> {
        let all = self.all();
        let mut again = all.clone();
        again.push(self.gpu);
        vec![vec![self.gpu], vec![self.gpu, self.gpu], all, again]
    }
}

/// The names of a device list, for failure messages.
fn names(gpus: &[&Gpu]) -> String {
    labels(gpus).join(", ")
}

fn every_device_is_listed(_: &Gpu) -> Result<(), libtest_mimic::Failed> {
    let devices = cuda_kernels::devices().map_err(fail)?;
    ensure(!devices.is_empty(), || "no devices listed".into())?;
    for (i, d) in devices.iter().enumerate() {
        ensure(d.ordinal as usize == i, || {
            format!("device {i} is listed as {}", d.ordinal)
        })?;
        ensure(
            !d.name.is_empty() && d.total_memory > 0 && d.multiprocessors > 0,
            || format!("device {i}: {d:?}"),
        )?;
        ensure(d.pci_bus_id.matches(':').count() == 2, || {
            format!("device {i}: PCI bus id {:?}", d.pci_bus_id)
        })?;
        println!("{d}");
    }
    Ok(())
}

fn a_gpu_on_every_device(_: &Gpu) -> Result<(), libtest_mimic::Failed> {
    let a = Array1::from_iter((0..1000).map(|i| i as f32));
    for gpu in &cuda_kernels::all_gpus().map_err(fail)? {
        let c = gpu.multiply(a.view(), a.view()).map_err(fail)?;
        ensure(c == &a * &a, || format!("{}: wrong product", gpu.label()))?;
        let again = cuda_kernels::gpu_on(gpu.ordinal()).map_err(fail)?;
        ensure(again.same_device(gpu), || {
            format!("gpu_on({}) opened another device", gpu.ordinal())
        })?;
    }
    Ok(())
}

fn a_missing_ordinal_names_the_devices(_: &Gpu) -> Result<(), libtest_mimic::Failed> {
    let devices = cuda_kernels::devices().map_err(fail)?;
    let missing = devices.len() as u32;
    match cuda_kernels::gpu_on(missing) {
        Err(e @ Error::NoSuchDevice { .. }) => {
            let text = e.to_string();
            for d in &devices {
                ensure(text.contains(&format!("{}: {}", d.ordinal, d.name)), || {
                    format!("{text:?} does not name device {}", d.ordinal)
                })?;
            }
            Ok(())
        }
        Err(e) => Err(fail(format!("device {missing}: {e} (not NoSuchDevice)"))),
        Ok(_) => Err(fail(format!(
            "device {missing} opened, but only {missing} are listed"
        ))),
    }
}

fn peer_and_staged_copies_agree(gpu: &Gpu) -> Result<(), libtest_mimic::Failed> {
    let devices = Devices::open(gpu)?;
    let all = devices.all();
    let other = *all.get(1).unwrap_or(&gpu);
    for (src_gpu, dst_gpu) in [(gpu, other), (other, gpu), (gpu, gpu)] {
        // Across the staging chunks' edges: 16 MiB is one chunk of bytes.
        for n in [1usize, 1000, (4 << 20) + 3, (8 << 20) + 5] {
            let host: Vec<u32> = (0..n as u32)
                .map(|i| i.wrapping_mul(2_654_435_761))
                .collect();
            let src = src_gpu.to_device(&host).map_err(fail)?;
            let mut dst = dst_gpu.zeroed::<u32>(n).map_err(fail)?;
            let paths: &[CopyPath] = if can_access_peer(src_gpu, dst_gpu).map_err(fail)? {
                &[CopyPath::Peer, CopyPath::Staged]
            } else {
                &[CopyPath::Staged]
            };
            for &path in paths {
                dst.set_zero().map_err(fail)?;
                let took =
                    copy_between(src_gpu, &src, dst_gpu, &mut dst, Some(path)).map_err(fail)?;
                ensure(took == path, || format!("asked for {path}, took {took}"))?;
                let mut back = vec![0u32; n];
                dst.copy_to(&mut back).map_err(fail)?;
                ensure(back == host, || {
                    format!(
                        "{} → {} ({path}), {n} words: word {:?} differs",
                        src_gpu.label(),
                        dst_gpu.label(),
                        back.iter().zip(&host).position(|(a, b)| a != b)
                    )
                })?;
            }
        }
    }
    Ok(())
}

fn sgemm_split_by_rows(gpu: &Gpu) -> Result<(), libtest_mimic::Failed> {
    let mut rng = Rng::new(15);
    let sizes = if simulated(gpu) {
        vec![(37, 20, 9), (5, 7, 3)]
    } else {
        vec![(515, 300, 257), (64, 1024, 130), (5, 7, 3)]
    };
    for (m, k, n) in sizes {
        let a = Array2::from_shape_simple_fn((m, k), || rng.uniform() as f32 - 0.5);
        let b = Array2::from_shape_simple_fn((k, n), || rng.uniform() as f32 - 0.5);
        let devices = Devices::open(gpu)?;
        for gpus in devices.lists() {
            let c = matmul(&gpus, a.view(), b.view()).map_err(fail)?;
            let check = check_matmul(c.view(), a.view(), b.view()).map_err(fail)?;
            ensure(check.passed(), || {
                format!("{m}×{k}·{k}×{n} on [{}]: {check:?}", names(&gpus))
            })?;
        }
    }
    Ok(())
}

fn mandelbrot_split_identical(gpu: &Gpu) -> Result<(), libtest_mimic::Failed> {
    for breadth in [4, sized(gpu, 517, 67), sized(gpu, 1024, 96)] {
        let p = MandelbrotParams {
            breadth,
            ..MandelbrotParams::default()
        };
        let lattice = p.lattice();
        let want = mandelbrot_cpu(lattice.view(), p.max_iters, p.upper_bound).map_err(fail)?;
        let one = gpu
            .mandelbrot(lattice.view(), p.max_iters, p.upper_bound)
            .map_err(fail)?;
        let devices = Devices::open(gpu)?;
        for gpus in devices.lists() {
            let got =
                mandelbrot(&gpus, lattice.view(), p.max_iters, p.upper_bound).map_err(fail)?;
            for (what, reference) in [("the CPU's", &want), ("one GPU's", &one)] {
                if let Some(d) = first_difference(got.view(), reference.view()) {
                    return Err(fail(format!(
                        "{breadth}² on [{}] differs from {what} graph at {d}",
                        names(&gpus)
                    )));
                }
            }
        }
    }
    Ok(())
}

fn reduce_resident_and_split(gpu: &Gpu) -> Result<(), libtest_mimic::Failed> {
    let mut rng = Rng::new(7);
    for n in [3usize, 1000, sized(gpu, (1 << 20) + 7, 20_001)] {
        let ints = Array1::from_shape_simple_fn(n, || rng.below(2001) as i64 - 1000);
        let floats = Array1::from_shape_simple_fn(n, || rng.uniform() as f32 - 0.5);
        let floats = floats.as_slice().unwrap_or(&[]);
        let want_sum = reduce_cpu::<Sum, i64>(ints.view(), Some(5)).map_err(fail)?;
        let want_min = reduce_cpu::<Min, i64>(ints.view(), None).map_err(fail)?;
        let devices = Devices::open(gpu)?;
        for gpus in devices.lists() {
            let at = || format!("n = {n} on [{}]", names(&gpus));
            let got = reduce::<Sum, i64>(&gpus, ints.view(), Some(5)).map_err(fail)?;
            ensure(got == want_sum, || {
                format!("{}: sum {got}, want {want_sum}", at())
            })?;
            let got = reduce::<Min, i64>(&gpus, ints.view(), None).map_err(fail)?;
            ensure(got == want_min, || {
                format!("{}: min {got}, want {want_min}", at())
            })?;
            // The f32 sums, exact: each device's share in the order of its
            // own launch, then the host's fold in device order.
            let want = reduce_in_devices_order::<Sum, f32>(&host_shares(&gpus, floats)?, None)
                .map_err(fail)?;
            let got = reduce::<Sum, f32>(&gpus, Array1::from(floats.to_vec()).view(), None)
                .map_err(fail)?;
            ensure(got == want, || {
                format!(
                    "{}: split f32 sum {got}, the devices' order gives {want}",
                    at()
                )
            })?;
            let shares = scatter(&gpus, floats).map_err(fail)?;
            let parts: Vec<_> = gpus.iter().zip(&shares).map(|(g, b)| (*g, &**b)).collect();
            let got = reduce_resident::<Sum, f32>(&parts, None).map_err(fail)?;
            ensure(got == want, || {
                format!(
                    "{}: resident f32 sum {got}, the devices' order gives {want}",
                    at()
                )
            })?;
            let got = reduce_resident::<Max, f32>(&parts, Some(-7.0)).map_err(fail)?;
            let want = floats.iter().copied().fold(-7.0f32, f32::max);
            ensure(got == want, || {
                format!("{}: f32 max {got}, want {want}", at())
            })?;
        }
    }
    Ok(())
}

/// `data` split as the multi-device launchers split it: each device of
/// `gpus` beside its contiguous share.
fn host_shares<'d, 'g, T>(
    gpus: &[&'g Gpu],
    data: &'d [T],
) -> Result<Vec<(&'g Gpu, &'d [T])>, libtest_mimic::Failed> {
    let rows = split_rows("test", data.len(), gpus.len()).map_err(fail)?;
    Ok(gpus.iter().zip(rows).map(|(g, r)| (*g, &data[r])).collect())
}

/// Issue 19: each fault a multi-device job could make is caught by the
/// check its test uses. One device's share dropped from a resident f32
/// sum: not equal to the devices' order. One band's rows of a split SGEMM
/// shifted down by one: outside `check_matmul`'s bound. (A skipped halo
/// exchange: `multi_gpu::life`'s unit test
/// `a_skipped_halo_exchange_is_caught`.)
fn injected_faults_are_caught(gpu: &Gpu) -> Result<(), libtest_mimic::Failed> {
    let devices = Devices::open(gpu)?;
    // Every list of at least two devices (device 0 twice on one GPU).
    for gpus in devices.lists().into_iter().filter(|l| l.len() > 1) {
        faults_caught_on(gpu, &gpus).map_err(|e| {
            fail(format!(
                "on [{}]: {}",
                names(&gpus),
                e.message().unwrap_or("")
            ))
        })?;
    }
    Ok(())
}

/// [`injected_faults_are_caught`] on the device list `gpus` (two or more).
fn faults_caught_on(gpu: &Gpu, gpus: &[&Gpu]) -> Result<(), libtest_mimic::Failed> {
    let mut rng = Rng::new(19);
    let floats: Vec<f32> = (0..sized(gpu, 300_007, 30_007))
        .map(|_| rng.uniform() as f32 - 0.25)
        .collect();
    let want =
        reduce_in_devices_order::<Sum, f32>(&host_shares(gpus, &floats)?, None).map_err(fail)?;
    let shares = scatter(gpus, &floats).map_err(fail)?;
    let parts: Vec<_> = gpus.iter().zip(&shares).map(|(g, b)| (*g, &**b)).collect();
    let whole = reduce_resident::<Sum, f32>(&parts, None).map_err(fail)?;
    ensure(whole == want, || format!("the whole sum {whole} ≠ {want}"))?;
    for dropped in 0..parts.len() {
        let mut fewer = parts.clone();
        fewer.remove(dropped);
        let got = reduce_resident::<Sum, f32>(&fewer, None).map_err(fail)?;
        ensure(got != want, || {
            format!("device {dropped}'s share dropped: {got} passes as {want}")
        })?;
    }
    let (m, k, n) = (sized(gpu, 515, 37), sized(gpu, 300, 20), sized(gpu, 257, 9));
    let a = Array2::from_shape_simple_fn((m, k), || rng.uniform() as f32 - 0.5);
    let b = Array2::from_shape_simple_fn((k, n), || rng.uniform() as f32 - 0.5);
    let c = matmul(gpus, a.view(), b.view()).map_err(fail)?;
    ensure(
        check_matmul(c.view(), a.view(), b.view())
            .map_err(fail)?
            .passed(),
        || "the unshifted product fails".into(),
    )?;
    for band in split_rows("test", m, gpus.len()).map_err(fail)? {
        let mut shifted = c.clone();
        for r in band.clone().skip(1) {
            let above = c.row(r - 1).to_owned();
            shifted.row_mut(r).assign(&above);
        }
        let check = check_matmul(shifted.view(), a.view(), b.view()).map_err(fail)?;
        ensure(!check.passed(), || {
            format!("rows {band:?} shifted by one pass: {check:?}")
        })?;
    }
    Ok(())
}

fn life_bands_identical(gpu: &Gpu) -> Result<(), libtest_mimic::Failed> {
    let mut rng = Rng::new(11);
    // 67: not a multiple of 4 (the kernel's element path); 256: the vector path.
    for (n, steps) in [(67, 20), (sized(gpu, 256, 64), sized(gpu, 30, 8))] {
        let start = random_lattice(n, 0.3, &mut rng);
        let want = life_cpu(start.view(), steps).map_err(fail)?;
        let devices = Devices::open(gpu)?;
        let mut lists = devices.lists();
        lists.push(vec![gpu; 5]);
        for gpus in lists {
            let got = life(&gpus, start.view(), steps).map_err(fail)?;
            ensure(got == want, || {
                format!("{n}² × {steps} on [{}] differs from the CPU", names(&gpus))
            })?;
        }
    }
    Ok(())
}

fn life_both_halo_paths(gpu: &Gpu) -> Result<(), libtest_mimic::Failed> {
    let devices = Devices::open(gpu)?;
    let all = devices.all();
    let other = *all.get(1).unwrap_or(&gpu);
    let start = random_lattice(128, 0.3, &mut Rng::new(5));
    let want = life_cpu(start.view(), 25).map_err(fail)?;
    let pairs: Vec<Vec<&Gpu>> = vec![vec![gpu, other], vec![gpu, other, gpu]];
    for gpus in pairs {
        for path in [CopyPath::Peer, CopyPath::Staged] {
            if path == CopyPath::Peer && !can_access_peer(gpus[0], gpus[1]).map_err(fail)? {
                continue;
            }
            let mut bands = LifeBands::upload(&gpus, start.view(), Some(path)).map_err(fail)?;
            ensure(bands.path() == Some(path), || {
                format!("asked {path}, got {:?}", bands.path())
            })?;
            // Split in runs: the halos stay valid between them.
            for steps in [1, 7, 17] {
                bands.run(steps).map_err(fail)?;
            }
            let got = bands.download().map_err(fail)?;
            ensure(got == want, || {
                format!("128² × 25 on [{}] with {path} halos differs", names(&gpus))
            })?;
        }
    }
    Ok(())
}

fn refusals(gpu: &Gpu) -> Result<(), libtest_mimic::Failed> {
    let expect = |r: Result<(), Error>, needle: &str| -> Result<(), libtest_mimic::Failed> {
        match r {
            Err(e @ Error::InvalidInput { .. }) if e.to_string().contains(needle) => Ok(()),
            Err(e) => Err(fail(format!(
                "wanted InvalidInput containing {needle:?}, got {e}"
            ))),
            Ok(()) => Err(fail(format!(
                "wanted a refusal containing {needle:?}, got Ok"
            ))),
        }
    };
    let p = MandelbrotParams {
        breadth: 2,
        ..MandelbrotParams::default()
    };
    let lattice = p.lattice();
    expect(
        mandelbrot(&[], lattice.view(), 256, 2.0).map(drop),
        "an empty device list",
    )?;
    expect(
        mandelbrot(&[gpu, gpu, gpu], lattice.view(), 256, 2.0).map(drop),
        "3 devices but only 2 rows",
    )?;
    let a = Array2::<f32>::zeros((2, 3));
    expect(
        matmul(&[gpu; 3], a.view(), Array2::zeros((3, 2)).view()).map(drop),
        "3 devices",
    )?;
    expect(
        matmul(&[gpu], a.view(), a.view()).map(drop),
        "inner dimensions differ",
    )?;
    // Two bands of 3 and 2 rows: the 3-row band and its two halos need 6.
    let small = random_lattice(5, 0.5, &mut Rng::new(1));
    expect(
        life(&[gpu; 2], small.view(), 1).map(drop),
        "too small for 2 bands",
    )?;
    expect(
        reduce::<Sum, i32>(&[gpu; 4], Array1::from(vec![1, 2]).view(), None).map(drop),
        "4 devices",
    )?;
    Ok(())
}

fn a_device_failing_mid_job(gpu: &Gpu) -> Result<(), libtest_mimic::Failed> {
    // Every device of the list multiplies in a loop; the second one fails
    // at its tenth launch (as a lost device would). The job must end, name
    // that device, and leave every device usable for the next job.
    let devices = Devices::open(gpu)?;
    let all = devices.all();
    let gpus: Vec<&Gpu> = vec![gpu, *all.get(1).unwrap_or(&gpu)];
    let a = Array1::from_iter((0..4096).map(|i| (i % 17) as f32));
    let r = run_each("test job", &labels(&gpus), gpus.clone(), |i, g, crew| {
        for launch in 0..1000 {
            crew.check("test job")?;
            if i == 1 && launch == 10 {
                return Err(Error::invalid("multiply", "the device was lost"));
            }
            g.multiply(a.view(), a.view())?;
        }
        Ok(())
    });
    match r {
        Err(Error::OnDevice { device, source, .. }) => {
            ensure(device == gpus[1].label(), || format!("named {device}"))?;
            ensure(
                source.to_string() == "multiply: the device was lost",
                || source.to_string(),
            )?;
        }
        other => return Err(fail(format!("wanted OnDevice, got {other:?}"))),
    }
    let p = MandelbrotParams {
        breadth: sized(gpu, 512, 64),
        ..MandelbrotParams::default()
    };
    let lattice = p.lattice();
    let want = mandelbrot_cpu(lattice.view(), p.max_iters, p.upper_bound).map_err(fail)?;
    let got = mandelbrot(&gpus, lattice.view(), p.max_iters, p.upper_bound).map_err(fail)?;
    ensure(got == want, || {
        "the devices gave a wrong graph after the failed job".into()
    })
}
