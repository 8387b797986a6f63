//! NCCL through the runtime (issue 24): communicators and typed collectives
//! on our buffers and streams, and the multi-device launchers on both
//! backends ([`Backend::PeerCopies`], [`Backend::Nccl`]) giving the same
//! results, against formulas and the CPU.
//!
//! NCCL needs one device per rank, so the device lists here are distinct
//! devices: device 0 alone, and every usable device (one rank on a machine
//! with one GPU: a 1-rank NCCL communicator). On the simulator "every
//! device" is three simulated devices and the collectives are simulated.
//! The hardware-only tests need `libnccl.so.2` on the GPU machine: the
//! library loads, a rank whose peers never come times out and aborts, and an
//! aborted communicator refuses further use.
use std::net::TcpListener;
use std::time::{Duration, Instant};

use cuda_kernels::life::{life_cpu, random_lattice};
use cuda_kernels::mandelbrot::{MandelbrotParams, first_difference, mandelbrot_cpu};
use cuda_kernels::matrices::check_matmul;
use cuda_kernels::multi_gpu::life::life_with;
use cuda_kernels::multi_gpu::mandelbrot::mandelbrot_with;
use cuda_kernels::multi_gpu::matmul::matmul_with;
use cuda_kernels::multi_gpu::reduce::{reduce_in_devices_order, reduce_with};
use cuda_kernels::multi_gpu::{Backend, labels, split_rows};
use cuda_kernels::nccl::{Communicator, Group, ReduceOp, UniqueId};
use cuda_kernels::ndarray::{Array1, Array2};
use cuda_kernels::reduce::{Max, Min, Sum, reduce_cpu};
use cuda_kernels::util::Rng;
use cuda_kernels::{BuiltinSimulator, Error, Gpu};
use libtest_mimic::{Failed, Trial};

use crate::common::{ensure, fail, simulated, sized};

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        kernel!(collectives_match_the_formulas),
        kernel!(ranks_join_by_a_unique_id_over_tcp),
        kernel!(both_backends_give_the_same_results),
        kernel!(refusals),
        kernel!(lengths_that_differ_across_ranks_end_by_the_deadline),
        hardware!("NCCL", the_library_loads),
        hardware!("NCCL", a_rank_whose_peers_never_come_times_out),
        hardware!("NCCL", an_aborted_communicator_refuses_use),
        hardware!("NCCL", a_missing_library_is_a_typed_error),
    ]
}

/// The variable that makes this binary the child of
/// [`a_missing_library_is_a_typed_error`].
const MISSING_CHILD: &str = "CUDA_KERNELS_TEST_NCCL_MISSING_CHILD";

/// The child processes of this family (this binary again, with a variable
/// set): `Some(exit code)` in a child, `None` otherwise. The missing-library
/// child points [`LIBRARY_ENV`](cuda_kernels::nccl::LIBRARY_ENV) at a file
/// that does not exist, so no libnccl loads: NCCL is a typed error naming
/// the library, and the peer backend still works.
pub fn child_process() -> Option<std::process::ExitCode> {
    std::env::var_os(MISSING_CHILD)?;
    // SAFETY: called from main before any trial (or other thread) starts:
    // nothing reads the environment concurrently.
    unsafe { std::env::set_var(cuda_kernels::nccl::LIBRARY_ENV, "/nonexistent/libnccl.so.2") };
    let run = || -> Result<String, String> {
        let gpu = cuda_kernels::gpu().map_err(|e| e.to_string())?;
        let missing = match Communicator::all_devices(&[&gpu]) {
            Err(
                e @ Error::LibraryMissing {
                    library: "libnccl.so.2",
                    ..
                },
            ) => e.to_string(),
            other => return Err(format!("wanted LibraryMissing, got {other:?}")),
        };
        let a = Array2::from_shape_fn((33, 17), |(i, j)| (i * 17 + j) as f32 / 100.0);
        let b = Array2::from_shape_fn((17, 9), |(i, j)| (i + 2 * j) as f32 / 50.0);
        let c = matmul_with(Backend::PeerCopies, &[&gpu], a.view(), b.view())
            .map_err(|e| e.to_string())?;
        let check = check_matmul(c.view(), a.view(), b.view()).map_err(|e| e.to_string())?;
        if !check.passed() {
            return Err(format!("the peer backend's SGEMM: {check:?}"));
        }
        Ok(format!("MISSING: {missing}\npeer backend works"))
    };
    Some(match run() {
        Ok(text) => {
            println!("{text}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            println!("{e}");
            std::process::ExitCode::FAILURE
        }
    })
}

/// The distinct devices of the run, `gpu` first: every other usable CUDA
/// device, or simulated devices 1 and 2.
fn distinct(gpu: &Gpu) -> Result<Vec<Gpu>, Failed> {
    if gpu.is_simulated() {
        return (1..3)
            .map(Gpu::simulated_device)
            .collect::<Result<_, _>>()
            .map_err(fail);
    }
    cuda_kernels::devices()
        .map_err(fail)?
        .into_iter()
        .filter(|d| d.unusable.is_none() && d.ordinal != gpu.ordinal())
        .map(|d| cuda_kernels::gpu_on(d.ordinal).map_err(fail))
        .collect()
}

/// The device lists each workload runs on: `gpu` alone, `gpu` and the
/// next device (two bands: each neighbour is above and below at once), and
/// every device.
fn lists<'a>(gpu: &'a Gpu, others: &'a [Gpu]) -> Vec<Vec<&'a Gpu>> {
    let all: Vec<&Gpu> = std::iter::once(gpu).chain(others).collect();
    let mut lists: Vec<Vec<&Gpu>> = (1..all.len()).map(|k| all[..k].to_vec()).take(2).collect();
    lists.push(all);
    lists
}

/// Runs `work(comm, gpu)` on a thread per device of `gpus`, with one
/// communicator of [`Communicator::all_devices`] each; the results in rank
/// order.
fn per_rank<R: Send>(
    gpus: &[&Gpu],
    work: impl Fn(&Communicator, &Gpu) -> cuda_kernels::Result<R> + Sync,
) -> Result<Vec<R>, Failed> {
    let comms = Communicator::all_devices(gpus).map_err(fail)?;
    std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .into_iter()
            .zip(gpus)
            .map(|(comm, gpu)| {
                let work = &work;
                s.spawn(move || work(&comm, gpu))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| fail("a rank's thread panicked"))?
                    .map_err(fail)
            })
            .collect()
    })
}

/// Rank `r`'s element `i`: `1000 r + i`.
fn x(r: usize, i: usize) -> i64 {
    (1000 * r + i) as i64
}

fn collectives_match_the_formulas(gpu: &Gpu) -> Result<(), Failed> {
    let others = distinct(gpu)?;
    for gpus in lists(gpu, &others) {
        let p = gpus.len();
        let n = sized(gpu, 100_003, 37);
        let got = per_rank(&gpus, |comm, g| {
            let (r, s) = (comm.rank(), g.stream());
            let mine: Vec<i64> = (0..n).map(|i| x(r, i)).collect();
            let send = g.to_device(&mine)?;
            let mut sum = g.zeroed::<i64>(n)?;
            comm.all_reduce(&send, &mut sum, ReduceOp::Sum, s)?;
            let mut max = g.to_device(&mine)?;
            comm.all_reduce_in_place(&mut max, ReduceOp::Max, s)?;
            let mut all = g.zeroed::<i64>(n * p)?;
            comm.all_gather(&send, &mut all, s)?;
            let mut root = g.to_device(&mine)?;
            comm.broadcast(&mut root, p - 1, s)?;
            let wide = g.to_device(&(0..2 * p).map(|i| x(r, i) as f32).collect::<Vec<_>>())?;
            let mut block = g.zeroed::<f32>(2)?;
            comm.reduce_scatter(&wide, &mut block, ReduceOp::Sum, s)?;
            // A ring of sends: each rank gets its left neighbour's data.
            let mut left = g.zeroed::<i64>(n)?;
            let mut group = Group::new();
            group.send(comm, &send, (r + 1) % p, s)?;
            group.recv(comm, &mut left, (r + p - 1) % p, s)?;
            group.end()?;
            comm.synchronize(s)?;
            Ok((
                sum.to_vec()?,
                max.to_vec()?,
                all.to_vec()?,
                root.to_vec()?,
                block.to_vec()?,
                left.to_vec()?,
            ))
        })?;
        let tri = (p * (p - 1) / 2) as i64;
        for (r, (sum, max, all, root, block, left)) in got.into_iter().enumerate() {
            let at = |what: &str| format!("{what} on rank {r} of [{}]", labels(&gpus).join(", "));
            // Σ_q (1000 q + i) = 1000 p(p−1)/2 + p i.
            ensure(
                sum.iter()
                    .enumerate()
                    .all(|(i, &v)| v == 1000 * tri + (p * i) as i64),
                || at("all-reduce sum"),
            )?;
            ensure(
                max.iter().enumerate().all(|(i, &v)| v == x(p - 1, i)),
                || at("all-reduce max"),
            )?;
            ensure(
                all.iter().enumerate().all(|(j, &v)| v == x(j / n, j % n)),
                || at("all-gather"),
            )?;
            ensure(
                root.iter().enumerate().all(|(i, &v)| v == x(p - 1, i)),
                || at("broadcast"),
            )?;
            let want: Vec<f32> = (2 * r..2 * r + 2)
                .map(|j| (1000 * tri + (p * j) as i64) as f32)
                .collect();
            ensure(block == want, || {
                at(&format!("reduce-scatter {block:?}, want {want:?}"))
            })?;
            let l = (r + p - 1) % p;
            ensure(left.iter().enumerate().all(|(i, &v)| v == x(l, i)), || {
                at("send/recv ring")
            })?;
        }
    }
    Ok(())
}

fn ranks_join_by_a_unique_id_over_tcp(gpu: &Gpu) -> Result<(), Failed> {
    let others = distinct(gpu)?;
    let gpus: Vec<&Gpu> = std::iter::once(gpu).chain(&others).collect();
    let p = gpus.len();
    let id = UniqueId::new(gpu).map_err(fail)?;
    let listener = TcpListener::bind("127.0.0.1:0").map_err(fail)?;
    let addr = listener.local_addr().map_err(fail)?;
    let timeout = Duration::from_secs(60);
    let got = std::thread::scope(|s| {
        let server = s.spawn(|| {
            id.serve_tcp(
                &listener,
                p,
                timeout,
                &std::sync::atomic::AtomicBool::new(false),
            )
        });
        let ranks: Vec<_> = gpus
            .iter()
            .enumerate()
            .map(|(r, g)| {
                s.spawn(move || -> cuda_kernels::Result<Vec<u32>> {
                    let id = UniqueId::fetch_tcp(addr, timeout)?;
                    let comm = Communicator::init_rank(g, &id, r, p, timeout)?;
                    let mut a = g.to_device(&[1u32 << r; 3])?;
                    comm.all_reduce_in_place(&mut a, ReduceOp::Sum, g.stream())?;
                    comm.synchronize(g.stream())?;
                    a.to_vec()
                })
            })
            .collect();
        let results: Vec<_> = ranks.into_iter().map(|h| h.join()).collect();
        (server.join(), results)
    });
    got.0
        .map_err(|_| fail("the id server panicked"))?
        .map_err(fail)?;
    for (r, g) in got.1.into_iter().enumerate() {
        let v = g.map_err(|_| fail("a rank panicked"))?.map_err(fail)?;
        let want = (1u32 << p) - 1;
        ensure(v == [want; 3], || format!("rank {r}: {v:?}, want {want}"))?;
    }
    Ok(())
}

fn both_backends_give_the_same_results(gpu: &Gpu) -> Result<(), Failed> {
    let others = distinct(gpu)?;
    let mut rng = Rng::new(24);
    let n = sized(gpu, (1 << 20) + 7, 20_001);
    let ints = Array1::from_shape_simple_fn(n, || rng.below(2001) as i64 - 1000);
    let floats: Vec<f32> = (0..n).map(|_| rng.uniform() as f32 - 0.5).collect();
    let (m, k, c) = (sized(gpu, 515, 37), sized(gpu, 300, 20), sized(gpu, 257, 9));
    let a = Array2::from_shape_simple_fn((m, k), || rng.uniform() as f32 - 0.5);
    let b = Array2::from_shape_simple_fn((k, c), || rng.uniform() as f32 - 0.5);
    let params = MandelbrotParams {
        breadth: sized(gpu, 517, 67),
        ..MandelbrotParams::default()
    };
    let lattice = params.lattice();
    let graph =
        mandelbrot_cpu(lattice.view(), params.max_iters, params.upper_bound).map_err(fail)?;
    let (side, steps) = (sized(gpu, 256, 67), sized(gpu, 30, 9));
    let cells = random_lattice(side, 0.3, &mut rng);
    let life_want = life_cpu(cells.view(), steps).map_err(fail)?;
    for gpus in lists(gpu, &others) {
        let on = |what: &str, backend: Backend| {
            format!(
                "{what} on [{}] ({})",
                labels(&gpus).join(", "),
                backend.name()
            )
        };
        let mut products = Vec::new();
        for backend in Backend::ALL {
            let got =
                reduce_with::<Sum, i64>(backend, &gpus, ints.view(), Some(5)).map_err(fail)?;
            let want = reduce_cpu::<Sum, i64>(ints.view(), Some(5)).map_err(fail)?;
            ensure(got == want, || {
                on(&format!("sum {got}, want {want}"), backend)
            })?;
            let got = reduce_with::<Min, i64>(backend, &gpus, ints.view(), None).map_err(fail)?;
            let want = reduce_cpu::<Min, i64>(ints.view(), None).map_err(fail)?;
            ensure(got == want, || {
                on(&format!("min {got}, want {want}"), backend)
            })?;
            let view = Array1::from(floats.clone());
            let got = reduce_with::<Max, f32>(backend, &gpus, view.view(), None).map_err(fail)?;
            let want = floats.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            ensure(got == want, || {
                on(&format!("max {got}, want {want}"), backend)
            })?;
            // The f32 sum in the devices' order: exact where the devices'
            // results are added in rank order (the simulator, one device).
            let shares: Vec<(&Gpu, &[f32])> = split_rows("test", n, gpus.len())
                .map_err(fail)?
                .into_iter()
                .zip(&gpus)
                .map(|(r, g)| (*g, &floats[r]))
                .collect();
            let want = reduce_in_devices_order::<Sum, f32>(&shares, None).map_err(fail)?;
            let got = reduce_with::<Sum, f32>(backend, &gpus, view.view(), None).map_err(fail)?;
            let exact = simulated(gpu) || gpus.len() == 1 || backend == Backend::PeerCopies;
            ensure(
                got == want || (!exact && (got - want).abs() <= 1e-3 * (n as f32).sqrt()),
                || {
                    on(
                        &format!("f32 sum {got}, the devices' order gives {want}"),
                        backend,
                    )
                },
            )?;
            let product = matmul_with(backend, &gpus, a.view(), b.view()).map_err(fail)?;
            let check = check_matmul(product.view(), a.view(), b.view()).map_err(fail)?;
            ensure(check.passed(), || on(&format!("SGEMM {check:?}"), backend))?;
            products.push(product);
            let got = mandelbrot_with(
                backend,
                &gpus,
                lattice.view(),
                params.max_iters,
                params.upper_bound,
            )
            .map_err(fail)?;
            if let Some(d) = first_difference(got.view(), graph.view()) {
                return Err(fail(on(&format!("Mandelbrot differs at {d}"), backend)));
            }
            let got = life_with(backend, &gpus, cells.view(), steps).map_err(fail)?;
            ensure(got == life_want, || {
                on(&format!("Life {side}² × {steps} differs"), backend)
            })?;
        }
        ensure(products[0] == products[1], || {
            format!(
                "SGEMM on [{}]: the backends' products differ",
                labels(&gpus).join(", ")
            )
        })?;
    }
    Ok(())
}

fn refusals(gpu: &Gpu) -> Result<(), Failed> {
    let expect = |r: Result<(), Error>, needle: &str| -> Result<(), Failed> {
        match r {
            Err(e) if e.to_string().contains(needle) => Ok(()),
            Err(e) => Err(fail(format!(
                "wanted an error containing {needle:?}, got {e}"
            ))),
            Ok(()) => Err(fail(format!(
                "wanted a refusal containing {needle:?}, got Ok"
            ))),
        }
    };
    let a = Array2::<f32>::zeros((4, 4));
    expect(
        matmul_with(Backend::Nccl, &[gpu, gpu], a.view(), a.view()).map(drop),
        "listed as rank 0 and rank 1",
    )?;
    expect(
        reduce_with::<Sum, i32>(Backend::Nccl, &[], Array1::from(vec![1]).view(), None).map(drop),
        "an empty device list",
    )?;
    let cells = random_lattice(5, 0.5, &mut Rng::new(1));
    let others = distinct(gpu)?;
    if let Some(other) = others.first() {
        expect(
            life_with(Backend::Nccl, &[gpu, other], cells.view(), 1).map(drop),
            "too small for 2 bands",
        )?;
    }
    let id = UniqueId::new(gpu).map_err(fail)?;
    let long = Duration::from_secs(30);
    expect(
        Communicator::init_rank(gpu, &id, 2, 2, long).map(drop),
        "rank 2 of 2: a rank must be in 0..2",
    )?;
    let comms = Communicator::all_devices(&[gpu]).map_err(fail)?;
    let s = gpu.stream();
    let send = gpu.zeroed::<f32>(8).map_err(fail)?;
    let mut recv = gpu.zeroed::<f32>(7).map_err(fail)?;
    expect(
        comms[0].all_reduce(&send, &mut recv, ReduceOp::Sum, s),
        "the send buffer holds 8 elements, the receive buffer 7",
    )?;
    expect(
        comms[0].all_gather(&send, &mut recv, s),
        "1 ranks × 8 sent need 8",
    )?;
    expect(comms[0].send(&send, 1, s), "peer 1 is not a rank")?;
    Ok(())
}

fn the_library_loads(_: &Gpu) -> Result<(), Failed> {
    let which = cuda_kernels::nccl::library().map_err(fail)?;
    println!("NCCL {which}");
    ensure(which.starts_with("2."), || format!("NCCL {which}"))
}

fn a_rank_whose_peers_never_come_times_out(gpu: &Gpu) -> Result<(), Failed> {
    // Rank 0 of 2, and rank 1 never starts: the set-up must end by its
    // deadline with a typed error, the communicator aborted.
    let id = UniqueId::new(gpu).map_err(fail)?;
    let deadline = Duration::from_secs(3);
    let since = Instant::now();
    let e = Communicator::init_rank(gpu, &id, 0, 2, deadline).map(drop);
    let took = since.elapsed();
    match e {
        Err(Error::CollectiveTimeout { .. }) => {}
        other => return Err(fail(format!("wanted CollectiveTimeout, got {other:?}"))),
    }
    ensure(took < deadline + Duration::from_secs(10), || {
        format!("the timeout took {took:?}")
    })?;
    // A corrupt id (no NCCL bootstrap behind it): an error or the deadline,
    // never a hang.
    let corrupt = UniqueId::from_hex(&"02".repeat(128)).map_err(fail)?;
    let since = Instant::now();
    let e = Communicator::init_rank(gpu, &corrupt, 1, 2, deadline).map(drop);
    let took = since.elapsed();
    ensure(
        matches!(e, Err(Error::CollectiveTimeout { .. } | Error::Nccl { .. })),
        || format!("a corrupt id gave {e:?}"),
    )?;
    ensure(took < deadline + Duration::from_secs(10), || {
        format!("the corrupt id took {took:?}")
    })
}

/// Two ranks all-reduce different lengths, which only the ranks know: NCCL
/// cannot see it and waits, and the deadline ends the wait
/// (`CollectiveTimeout`, the communicator aborted); the simulator sees it
/// and fails every rank at once (`InvalidInput`). Either way no rank hangs
/// and at least one fails. On a machine with one GPU the two ranks are
/// simulated devices (NCCL refuses two ranks on one GPU).
fn lengths_that_differ_across_ranks_end_by_the_deadline(gpu: &Gpu) -> Result<(), Failed> {
    let others = distinct(gpu)?;
    let simulated_pair;
    let pair: Vec<&Gpu> = match others.first() {
        Some(other) => vec![gpu, other],
        None => {
            println!("one GPU: the two ranks are simulated devices");
            simulated_pair = [0, 1].map(Gpu::simulated_device);
            simulated_pair
                .iter()
                .map(|g| g.as_ref().map_err(|e| fail(e.to_string())))
                .collect::<Result<_, _>>()?
        }
    };
    let deadline = Duration::from_secs(3);
    let mut comms = Communicator::all_devices(&pair).map_err(fail)?;
    for comm in &mut comms {
        comm.set_timeout(deadline);
    }
    let since = Instant::now();
    let results: Vec<cuda_kernels::Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .iter_mut()
            .zip(&pair)
            .map(|(comm, gpu)| {
                s.spawn(move || {
                    // Rank r: 1000 (r + 1) elements.
                    let mut x = gpu.zeroed::<f32>(1000 * (comm.rank() + 1))?;
                    comm.all_reduce_in_place(&mut x, ReduceOp::Sum, gpu.stream())?;
                    comm.synchronize(gpu.stream())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::invalid("test", "a rank panicked")))
            })
            .collect()
    });
    let took = since.elapsed();
    // No later finalize waits on a peer that gave up.
    for comm in &comms {
        comm.abort("the test is over");
    }
    println!("after {took:?}: {results:?}");
    ensure(took < deadline + Duration::from_secs(10), || {
        format!("the ranks took {took:?}")
    })?;
    ensure(results.iter().any(|r| r.is_err()), || {
        "every rank succeeded with lengths that differ".into()
    })?;
    for r in &results {
        if let Err(e) = r {
            ensure(
                matches!(
                    e,
                    Error::CollectiveTimeout { .. } | Error::InvalidInput { .. }
                ),
                || format!("wanted CollectiveTimeout or InvalidInput, got {e:?}"),
            )?;
        }
    }
    Ok(())
}

fn a_missing_library_is_a_typed_error(gpu: &Gpu) -> Result<(), Failed> {
    crate::support::rerun_self_printing(
        gpu,
        MISSING_CHILD,
        &[
            "MISSING: libnccl.so.2 could not be loaded",
            "/nonexistent/libnccl.so.2",
            "peer backend works",
        ],
    )
}

fn an_aborted_communicator_refuses_use(gpu: &Gpu) -> Result<(), Failed> {
    let comms = Communicator::all_devices(&[gpu]).map_err(fail)?;
    let comm = &comms[0];
    let mut a = gpu.to_device(&[1.0f32, 2.0]).map_err(fail)?;
    comm.all_reduce_in_place(&mut a, ReduceOp::Sum, gpu.stream())
        .map_err(fail)?;
    comm.synchronize(gpu.stream()).map_err(fail)?;
    ensure(a.to_vec().map_err(fail)? == [1.0, 2.0], || {
        "a one-rank all-reduce changed the data".into()
    })?;
    comm.abort("the test aborts it");
    match comm.all_reduce_in_place(&mut a, ReduceOp::Sum, gpu.stream()) {
        Err(e @ Error::CommunicatorAborted { .. }) => {
            ensure(e.to_string().contains("the test aborts it"), || {
                e.to_string()
            })
        }
        other => Err(fail(format!("wanted CommunicatorAborted, got {other:?}"))),
    }
}
