//! The collectives on simulated devices, against values computed by hand
//! from each rank's data (rank `r`'s element `i` is a formula of `r` and
//! `i`), and the errors: mismatched calls, deadlines, aborts, bad input.
use std::time::{Duration, Instant};

use super::*;
use cuda_kernels_device::float16::{bf16, f16};

/// Simulated devices `0..p`.
fn devices(p: u32) -> Vec<Gpu> {
    (0..p)
        .map(|i| Gpu::simulated_device_of_crate(i, "tests"))
        .collect()
}

/// Runs `work(comm, gpu)` for every rank of a fresh clique over `p`
/// simulated devices, each on its own thread; the results in rank order.
fn on_ranks<R: Send>(
    p: u32,
    timeout: Duration,
    work: impl Fn(&Communicator, &Gpu) -> Result<R> + Sync,
) -> Vec<Result<R>> {
    let gpus = devices(p);
    let comms = Communicator::all_devices(&gpus.iter().collect::<Vec<_>>()).unwrap();
    std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .into_iter()
            .zip(&gpus)
            .map(|(mut comm, gpu)| {
                let work = &work;
                s.spawn(move || {
                    comm.set_timeout(timeout);
                    work(&comm, gpu)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

const LONG: Duration = Duration::from_secs(30);

/// Rank `r`'s element `i`: `10 r + i + 1`.
fn x(r: usize, i: usize) -> i32 {
    (10 * r + i + 1) as i32
}

#[test]
fn all_reduce_sum_prod_min_max_match_the_formulas() {
    let (p, n) = (3usize, 5usize);
    for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max] {
        let got = on_ranks(p as u32, LONG, |comm, gpu| {
            let r = comm.rank();
            let send = gpu.to_device(&(0..n).map(|i| x(r, i)).collect::<Vec<_>>())?;
            let mut recv = gpu.zeroed::<i32>(n)?;
            comm.all_reduce(&send, &mut recv, op, gpu.stream())?;
            comm.synchronize(gpu.stream())?;
            recv.to_vec()
        });
        let want: Vec<i32> = (0..n)
            .map(|i| {
                let i = i as i32;
                // Σ (10r + i + 1) = 10·(0+1+2) + 3(i+1); min at r = 0, max at r = 2.
                match op {
                    ReduceOp::Sum => 30 + 3 * (i + 1),
                    ReduceOp::Prod => (i + 1) * (i + 11) * (i + 21),
                    ReduceOp::Min => i + 1,
                    ReduceOp::Max => i + 21,
                }
            })
            .collect();
        for g in got {
            assert_eq!(g.unwrap(), want, "{op:?}");
        }
    }
}

#[test]
fn every_element_type_reduces() {
    let got = on_ranks(4, LONG, |comm, gpu| {
        let r = comm.rank();
        let s = gpu.stream();
        let mut a = gpu.to_device(&[r as f64 + 0.5, -(r as f64)])?;
        comm.all_reduce_in_place(&mut a, ReduceOp::Sum, s)?;
        let mut b = gpu.to_device(&[100u8 + r as u8])?;
        comm.all_reduce_in_place(&mut b, ReduceOp::Sum, s)?; // 406 wraps to 150
        let mut c = gpu.to_device(&[u64::MAX - r as u64])?;
        comm.all_reduce_in_place(&mut c, ReduceOp::Min, s)?;
        let mut d = gpu.to_device(&[f16::narrow(r as f32 + 1.0)])?;
        comm.all_reduce_in_place(&mut d, ReduceOp::Prod, s)?; // 4! = 24
        let mut e = gpu.to_device(&[bf16::narrow(-(r as f32))])?;
        comm.all_reduce_in_place(&mut e, ReduceOp::Max, s)?;
        let mut f = gpu.to_device(&[-3i8 * r as i8, 7])?;
        comm.all_reduce_in_place(&mut f, ReduceOp::Sum, s)?;
        let mut g = gpu.to_device(&[r as f32 * 0.25])?;
        comm.all_reduce_in_place(&mut g, ReduceOp::Sum, s)?;
        let mut h = gpu.to_device(&[1u32 << r, r as u32])?;
        comm.all_reduce_in_place(&mut h, ReduceOp::Sum, s)?;
        let mut k = gpu.to_device(&[-(1i64 << 40) * r as i64])?;
        comm.all_reduce_in_place(&mut k, ReduceOp::Sum, s)?;
        Ok((
            a.to_vec()?,
            b.to_vec()?[0],
            c.to_vec()?[0],
            d.to_vec()?[0].widen(),
            e.to_vec()?[0].widen(),
            f.to_vec()?,
            (g.to_vec()?[0], h.to_vec()?, k.to_vec()?[0]),
        ))
    });
    for g in got {
        let (a, b, c, d, e, f, (g, h, k)) = g.unwrap();
        assert_eq!(a, [8.0, -6.0]);
        assert_eq!(b, 150);
        assert_eq!(c, u64::MAX - 3);
        assert_eq!(d, 24.0);
        assert_eq!(e, 0.0);
        assert_eq!(f, [-18, 28]);
        assert_eq!(g, 1.5);
        assert_eq!(h, [15, 6]);
        assert_eq!(k, -6 * (1i64 << 40));
    }
}

#[test]
fn broadcast_reduce_all_gather_and_reduce_scatter() {
    let (p, n) = (3usize, 4usize);
    let got = on_ranks(p as u32, LONG, |comm, gpu| {
        let (r, s) = (comm.rank(), gpu.stream());
        let mine: Vec<i32> = (0..n).map(|i| x(r, i)).collect();
        let mut b = gpu.to_device(&mine)?;
        comm.broadcast(&mut b, 1, s)?;
        let send = gpu.to_device(&mine)?;
        let mut red = gpu.to_device(&[-1i32; 4])?;
        comm.reduce(&send, &mut red, ReduceOp::Max, 2, s)?;
        let mut all = gpu.zeroed::<i32>(p * n)?;
        comm.all_gather(&send, &mut all, s)?;
        // Reduce-scatter of p·2 elements: element j of rank r is 10 r + j + 1.
        let wide = gpu.to_device(&(0..p * 2).map(|j| x(r, j)).collect::<Vec<_>>())?;
        let mut block = gpu.zeroed::<i32>(2)?;
        comm.reduce_scatter(&wide, &mut block, ReduceOp::Sum, s)?;
        comm.synchronize(s)?;
        Ok((b.to_vec()?, red.to_vec()?, all.to_vec()?, block.to_vec()?))
    });
    for (r, g) in got.into_iter().enumerate() {
        let (b, red, all, block) = g.unwrap();
        assert_eq!(b, (0..n).map(|i| x(1, i)).collect::<Vec<_>>());
        if r == 2 {
            assert_eq!(red, (0..n).map(|i| x(2, i)).collect::<Vec<_>>());
        } else {
            assert_eq!(red, [-1; 4], "only the root receives");
        }
        let want: Vec<i32> = (0..p).flat_map(|q| (0..n).map(move |i| x(q, i))).collect();
        assert_eq!(all, want);
        // Σ_q (10 q + j + 1) = 30 + 3 (j + 1), for j = 2r, 2r + 1.
        let want: Vec<i32> = (2 * r..2 * r + 2)
            .map(|j| 30 + 3 * (j as i32 + 1))
            .collect();
        assert_eq!(block, want);
    }
}

#[test]
fn grouped_send_and_recv_pass_a_ring() {
    for p in [1u32, 2, 5] {
        let got = on_ranks(p, LONG, |comm, gpu| {
            let (r, q) = (comm.rank(), comm.ranks());
            let s = gpu.stream();
            let out = gpu.to_device(&[r as i64 * 7, -(r as i64)])?;
            let mut from_left = gpu.zeroed::<i64>(2)?;
            let mut g = Group::new();
            // Receive first: without the group this would wait forever.
            g.recv(comm, &mut from_left, (r + q - 1) % q, s)?;
            g.send(comm, &out, (r + 1) % q, s)?;
            g.end()?;
            from_left.to_vec()
        });
        for (r, g) in got.into_iter().enumerate() {
            let left = (r + p as usize - 1) % p as usize;
            assert_eq!(g.unwrap(), [left as i64 * 7, -(left as i64)], "{p} ranks");
        }
    }
}

#[test]
fn arguments_that_do_not_fit_are_refused_before_anything_runs() {
    let gpus = devices(2);
    let comms = Communicator::all_devices(&gpus.iter().collect::<Vec<_>>()).unwrap();
    let (c, g) = (&comms[0], &gpus[0]);
    let s = g.stream();
    let a = g.zeroed::<f32>(4).unwrap();
    let mut b = g.zeroed::<f32>(3).unwrap();
    let e = c.all_reduce(&a, &mut b, ReduceOp::Sum, s).unwrap_err();
    assert!(
        e.to_string().contains("4 elements, the receive buffer 3"),
        "{e}"
    );
    let e = c.all_gather(&a, &mut b, s).unwrap_err();
    assert!(e.to_string().contains("2 ranks × 4 sent need 8"), "{e}");
    let mut one = g.zeroed::<f32>(1).unwrap();
    let e = c
        .reduce_scatter(&b, &mut one, ReduceOp::Sum, s)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("3 elements: 2 ranks × 1 received need 2"),
        "{e}"
    );
    let mut a2 = g.zeroed::<f32>(4).unwrap();
    let e = c.broadcast(&mut a2, 2, s).unwrap_err();
    assert!(e.to_string().contains("root 2 is not a rank"), "{e}");
    let e = c.send(&a, 5, s).unwrap_err();
    assert!(e.to_string().contains("peer 5 is not a rank"), "{e}");
    let other = gpus[1].zeroed::<f32>(4).unwrap();
    let e = c.send(&other, 1, s).unwrap_err();
    assert!(matches!(e, Error::WrongDevice { .. }), "{e}");
    let e = c.send(&a, 1, gpus[1].stream()).unwrap_err();
    assert!(matches!(e, Error::WrongDevice { .. }), "{e}");
    // Nothing was posted: rank 1's first collective meets rank 0's first.
    drop(comms);
}

#[test]
fn calls_that_differ_across_ranks_fail_on_every_rank() {
    // Rank 1 sends 5 elements where rank 0 sends 4.
    let got = on_ranks(2, LONG, |comm, gpu| {
        let n = 4 + comm.rank();
        let mut a = gpu.zeroed::<i32>(n)?;
        comm.all_reduce_in_place(&mut a, ReduceOp::Sum, gpu.stream())
    });
    for g in got {
        let e = g.unwrap_err().to_string();
        assert!(
            e.contains("does not match") && e.contains("of 5 I32"),
            "{e}"
        );
    }
    // Rank 0 all-reduces, rank 1 broadcasts; f32 against i32.
    let got = on_ranks(2, LONG, |comm, gpu| {
        if comm.rank() == 0 {
            let mut a = gpu.zeroed::<i32>(4)?;
            comm.all_reduce_in_place(&mut a, ReduceOp::Sum, gpu.stream())
        } else {
            let mut a = gpu.zeroed::<f32>(4)?;
            comm.broadcast(&mut a, 0, gpu.stream())
        }
    });
    for g in got {
        let e = g.unwrap_err().to_string();
        assert!(
            e.contains("AllReduce(Sum) of 4 I32") && e.contains("Broadcast"),
            "{e}"
        );
    }
    // A receive of another length than the send.
    let got = on_ranks(2, LONG, |comm, gpu| {
        let (r, s) = (comm.rank(), gpu.stream());
        let mut g = Group::new();
        let out = gpu.zeroed::<u32>(3)?;
        let mut inn = gpu.zeroed::<u32>(2 + r)?;
        g.send(comm, &out, 1 - r, s)?;
        g.recv(comm, &mut inn, 1 - r, s)?;
        g.end()
    });
    assert!(got[0].is_err() && got[1].is_ok(), "{got:?}");
    let e = got[0].as_ref().unwrap_err().to_string();
    assert!(
        e.contains("2 U32 expected from rank 1, which sent 3 U32"),
        "{e}"
    );
}

#[test]
fn a_rank_that_never_comes_times_out_and_aborts_its_communicator() {
    let timeout = Duration::from_millis(150);
    let got = on_ranks(2, timeout, |comm, gpu| {
        if comm.rank() == 1 {
            // Dies before its collective: keeps its communicator alive past
            // the other's deadline, then drops it without calling.
            std::thread::sleep(timeout * 4);
            return Ok((Duration::ZERO, None));
        }
        let mut a = gpu.zeroed::<f32>(8)?;
        let since = Instant::now();
        let e = comm
            .all_reduce_in_place(&mut a, ReduceOp::Sum, gpu.stream())
            .unwrap_err();
        let waited = since.elapsed();
        assert!(
            matches!(
                e,
                Error::CollectiveTimeout {
                    rank: 0,
                    ranks: 2,
                    ..
                }
            ),
            "{e}"
        );
        assert!(comm.aborted().is_some());
        let again = comm.all_reduce_in_place(&mut a, ReduceOp::Sum, gpu.stream());
        Ok((waited, Some(again.unwrap_err())))
    });
    let (waited, again) = got.into_iter().next().unwrap().unwrap();
    assert!(waited >= Duration::from_millis(150) && waited < Duration::from_secs(5));
    let again = again.unwrap();
    assert!(
        matches!(again, Error::CommunicatorAborted { .. }),
        "{again}"
    );
    assert!(
        again.to_string().contains("cannot be used again"),
        "{again}"
    );
}

#[test]
fn an_aborted_rank_fails_its_peers_at_once() {
    let got = on_ranks(3, LONG, |comm, gpu| {
        if comm.rank() == 2 {
            comm.abort("the test kills rank 2");
            return Ok(Duration::ZERO);
        }
        let since = Instant::now();
        let mut a = gpu.zeroed::<f32>(8)?;
        let e = comm
            .all_reduce_in_place(&mut a, ReduceOp::Sum, gpu.stream())
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("rank 2, which it waits for, is gone"),
            "{e}"
        );
        assert!(e.to_string().contains("the test kills rank 2"), "{e}");
        Ok(since.elapsed())
    });
    for g in got {
        assert!(g.unwrap() < Duration::from_secs(10));
    }
}

#[test]
fn ranks_join_by_unique_id_and_bad_input_is_refused() {
    let gpus = devices(3);
    let id = UniqueId::simulated();
    let got = std::thread::scope(|s| {
        let handles: Vec<_> = gpus
            .iter()
            .enumerate()
            .map(|(r, gpu)| {
                let id = id.clone();
                s.spawn(move || -> Result<Vec<u32>> {
                    let comm = Communicator::init_rank(gpu, &id, r, 3, LONG)?;
                    let mut a = gpu.to_device(&[1u32 << r])?;
                    comm.all_reduce_in_place(&mut a, ReduceOp::Sum, gpu.stream())?;
                    a.to_vec()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    for g in got {
        assert_eq!(g.unwrap(), [7]);
    }
    let g = &gpus[0];
    let e = Communicator::init_rank(g, &UniqueId::simulated(), 3, 3, LONG).unwrap_err();
    assert!(
        e.to_string()
            .contains("rank 3 of 3: a rank must be in 0..3"),
        "{e}"
    );
    let nccl_id = UniqueId::from_hex(&"02".repeat(128)).unwrap();
    let e = Communicator::init_rank(g, &nccl_id, 0, 2, LONG).unwrap_err();
    assert!(
        e.to_string()
            .contains("a NCCL unique id given to simulated device 0"),
        "{e}"
    );
    // Rank 1 never joins: rank 0's set-up times out.
    let e = Communicator::init_rank(g, &UniqueId::simulated(), 0, 2, Duration::from_millis(50))
        .unwrap_err();
    assert!(matches!(e, Error::CollectiveTimeout { .. }), "{e}");
    let e = Communicator::all_devices(&[&gpus[0], &gpus[1], &gpus[0]]).unwrap_err();
    assert!(e.to_string().contains("listed as rank 0 and rank 2"), "{e}");
    assert!(Communicator::all_devices(&[]).is_err());
}

#[test]
fn one_thread_drives_every_rank_in_one_group() {
    // As with NCCL, where one thread issuing the collectives of several
    // communicators must group them: every part is posted before any waits.
    let gpus = devices(3);
    let comms = Communicator::all_devices(&gpus.iter().collect::<Vec<_>>()).unwrap();
    let mut bufs: Vec<_> = gpus
        .iter()
        .enumerate()
        .map(|(r, g)| g.to_device(&[r as u64 + 1, 10 * (r as u64 + 1)]).unwrap())
        .collect();
    let mut g = Group::new();
    for ((comm, gpu), buf) in comms.iter().zip(&gpus).zip(bufs.iter_mut()) {
        g.all_reduce_in_place(comm, buf, ReduceOp::Prod, gpu.stream())
            .unwrap();
    }
    g.end().unwrap();
    for b in &bufs {
        assert_eq!(b.to_vec().unwrap(), [6, 6000]);
    }
}

/// Every rank a connection to a hub (as rank processes are): the same
/// collectives, the same results.
#[test]
fn ranks_joined_through_a_hub_match_the_formulas() {
    let hub = SimHub::start(3).unwrap();
    assert!(hub.id().hub_port().is_some() && hub.id().is_simulated());
    let gpus = devices(3);
    let got = std::thread::scope(|s| {
        let handles: Vec<_> = gpus
            .iter()
            .enumerate()
            .map(|(r, gpu)| {
                let id = hub.id().clone();
                s.spawn(move || -> Result<(Vec<i32>, Vec<i32>, Vec<i32>)> {
                    let comm = Communicator::init_rank(gpu, &id, r, 3, LONG)?;
                    let st = gpu.stream();
                    let mine: Vec<i32> = (0..4).map(|i| x(r, i)).collect();
                    let send = gpu.to_device(&mine)?;
                    let mut sum = gpu.zeroed::<i32>(4)?;
                    comm.all_reduce(&send, &mut sum, ReduceOp::Sum, st)?;
                    let mut all = gpu.zeroed::<i32>(12)?;
                    comm.all_gather(&send, &mut all, st)?;
                    let mut left = gpu.zeroed::<i32>(4)?;
                    let mut g = Group::new();
                    g.recv(&comm, &mut left, (r + 2) % 3, st)?;
                    g.send(&comm, &send, (r + 1) % 3, st)?;
                    g.end()?;
                    Ok((sum.to_vec()?, all.to_vec()?, left.to_vec()?))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    for (r, g) in got.into_iter().enumerate() {
        let (sum, all, left) = g.unwrap();
        assert_eq!(sum, (0..4).map(|i| 30 + 3 * (i + 1)).collect::<Vec<i32>>());
        let want: Vec<i32> = (0..3).flat_map(|q| (0..4).map(move |i| x(q, i))).collect();
        assert_eq!(all, want);
        assert_eq!(left, (0..4).map(|i| x((r + 2) % 3, i)).collect::<Vec<_>>());
    }
}

/// Through a hub: a rank that drops its communicator fails the rank
/// waiting for it at once; mismatched calls are refused on both; a rank
/// that never joins makes the others' set-up time out.
#[test]
fn hub_ranks_fail_as_local_ones_do() {
    let hub = SimHub::start(2).unwrap();
    let gpus = devices(2);
    let got = std::thread::scope(|s| {
        let handles: Vec<_> = gpus
            .iter()
            .enumerate()
            .map(|(r, gpu)| {
                let id = hub.id().clone();
                s.spawn(move || -> Result<Duration> {
                    let comm = Communicator::init_rank(gpu, &id, r, 2, LONG)?;
                    let mut a = gpu.zeroed::<f32>(3 + r)?;
                    let e = comm
                        .all_reduce_in_place(&mut a, ReduceOp::Sum, gpu.stream())
                        .unwrap_err();
                    assert!(e.to_string().contains("does not match"), "{e}");
                    if r == 1 {
                        return Ok(Duration::ZERO); // drops its communicator
                    }
                    let since = Instant::now();
                    let e = comm.broadcast(&mut a, 0, gpu.stream()).unwrap_err();
                    assert!(
                        e.to_string()
                            .contains("rank 1, which it waits for, is gone"),
                        "{e}"
                    );
                    Ok(since.elapsed())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    for g in got {
        assert!(g.unwrap() < Duration::from_secs(10));
    }
    let lonely = SimHub::start(2).unwrap();
    let e = Communicator::init_rank(&gpus[0], lonely.id(), 0, 2, Duration::from_millis(100))
        .unwrap_err();
    assert!(matches!(e, Error::CollectiveTimeout { .. }), "{e}");
    let e = Communicator::init_rank(&gpus[0], lonely.id(), 0, 3, LONG).unwrap_err();
    assert!(e.to_string().contains("has 2"), "{e}");
}
