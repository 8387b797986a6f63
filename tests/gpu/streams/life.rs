//! Conway's Game of Life on concurrent streams: against the CPU at chosen and
//! random sizes, the fast kernel's edges, and its refusals.
use super::*;

fn starts(sims: usize, n: usize, seed: u64) -> Vec<Array2<i32>> {
    let mut rng = Rng::new(seed);
    (0..sims)
        .map(|_| random_lattice(n, 0.25, &mut rng))
        .collect()
}

fn run_life(gpu: &Gpu, lattices: &[Array2<i32>], steps: usize) -> Result<(), Failed> {
    let n = lattices[0].nrows();
    let mut sims = LifeSims::new(gpu, lattices).map_err(fail)?;
    for step in 1..=steps {
        sims.frame().map_err(fail)?;
        if step == 1 || step == steps {
            for (k, l) in lattices.iter().enumerate() {
                let expected = life_cpu(l.view(), step).map_err(fail)?;
                ensure(sims.lattice(k).map_err(fail)? == expected, || {
                    format!("N = {n}, simulation {k}, step {step}: GPU differs from CPU")
                })?;
            }
        }
    }
    Ok(())
}

pub(super) fn life_equals_cpu_after_200_steps(gpu: &Gpu) -> Result<(), Failed> {
    run_life(gpu, &starts(4, 128, 1), 200)
}

pub(super) fn life_any_size_equals_cpu(gpu: &Gpu) -> Result<(), Failed> {
    for (n, steps) in [(1, 3), (2, 5), (33, 60), (100, 100), (257, 20)] {
        run_life(gpu, &starts(2, n, n as u64), steps)?;
    }
    Ok(())
}

/// `conway_fast` (the default) and `conway_ker` on lattices of 1, 2, 3, 4,
/// 5, 8, 31, 32, 33, 64, 127, 129 and 4097 (on the simulator 513) cells a
/// side (random, and a glider across the wrap-around corner): three steps,
/// each exactly the CPU reference's lattice, for both kernels.
pub(super) fn life_fast_kernel_edges(gpu: &Gpu) -> Result<(), Failed> {
    let mut rng = Rng::new(4097);
    let largest = sized(gpu, 4097, 513);
    for n in [1usize, 2, 3, 4, 5, 8, 31, 32, 33, 64, 127, 129, largest] {
        let mut corner = Array2::<i32>::zeros((n, n));
        for (r, c) in [(0, 1), (1, 2), (2, 0), (2, 1), (2, 2)] {
            corner[[(r + n - 1) % n, (c + n - 1) % n]] = 1;
        }
        for start in [random_lattice(n, 0.3, &mut rng), corner] {
            let steps = if n > 1000 { 2 } else { 3 };
            let mut expected = start.clone();
            let mut sims = [LifeKernel::Fast, LifeKernel::Seed]
                .into_iter()
                .map(|k| LifeSims::with_kernel(gpu, std::slice::from_ref(&start), k))
                .collect::<Result<Vec<_>, _>>()
                .map_err(fail)?;
            for step in 1..=steps {
                expected = life_step_cpu(expected.view()).map_err(fail)?;
                for sim in &mut sims {
                    sim.frame().map_err(fail)?;
                    let got = sim.lattice(0).map_err(fail)?;
                    ensure(got == expected.view(), || {
                        format!(
                            "{:?}, n = {n}, step {step}: GPU and CPU differ",
                            sim.kernel()
                        )
                    })?;
                }
            }
        }
    }
    ensure(
        LifeSims::new(gpu, &[Array2::zeros((2, 2))])
            .map_err(fail)?
            .kernel()
            == LifeKernel::Fast,
        || "LifeSims::new runs conway_fast".into(),
    )
}

struct LifeCase {
    lattices: Vec<Array2<i32>>,
    densities: Vec<f64>,
    steps: usize,
}

impl Debug for LifeCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.lattices[0].nrows();
        write!(f, "N = {n}, {} steps, ", self.steps)?;
        for (l, p) in self.lattices.iter().zip(&self.densities) {
            let alive = l.iter().filter(|&&v| v == 1).count();
            if n <= 8 {
                write!(
                    f,
                    "[density {p:.3}: {:?}] ",
                    l.outer_iter().collect::<Vec<_>>()
                )?;
            } else {
                write!(f, "[density {p:.3}: {alive} alive] ")?;
            }
        }
        Ok(())
    }
}

fn life_cases() -> impl Strategy<Value = LifeCase> {
    let params = (
        1..=150usize,
        1..=30usize,
        prop::collection::vec(0.0f64..=1.0, 1..=3),
    );
    params.prop_perturb(|(n, steps, densities), rng| {
        let mut d = Draw::new(rng);
        let lattices = densities
            .iter()
            .map(|&p| {
                let cells = d.vec(&prop::bool::weighted(p), n * n);
                Array2::from_shape_fn((n, n), |(r, c)| cells[r * n + c] as i32)
            })
            .collect();
        LifeCase {
            lattices,
            densities,
            steps,
        }
    })
}

/// Random N in 1..=150, 1..=3 simulations on their own streams, each with a
/// random density in [0, 1], 1..=30 steps: after every frame, each
/// simulation's lattice equals the CPU reference's (`life_step_cpu`, step by
/// step) (32 cases).
pub(super) fn life_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(32, life_cases(), |c| {
        let n = c.lattices[0].nrows();
        let mut sims = LifeSims::new(gpu, &c.lattices).map_err(case_err)?;
        let mut cpu = c.lattices.clone();
        for step in 1..=c.steps {
            sims.frame().map_err(case_err)?;
            for (k, want) in cpu.iter_mut().enumerate() {
                *want = life_step_cpu(want.view()).map_err(case_err)?;
                let got = sims.lattice(k).map_err(case_err)?;
                if let Some(((r, col), _)) = got.indexed_iter().find(|&(i, v)| *v != want[i]) {
                    return Err(TestCaseError::fail(format!(
                        "N = {n}, simulation {k}, step {step}: cell ({r}, {col}) is {} on the GPU, {} on the CPU",
                        got[(r, col)],
                        want[(r, col)]
                    )));
                }
            }
        }
        Ok(())
    })
}

pub(super) fn life_refusals(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("streams::life_refusals");
    let c = "conway_ker";
    let sq = |n: usize| Array2::<i32>::zeros((n, n));
    for (case, lattices) in [
        ("no lattice", vec![]),
        ("0 × 0", vec![sq(0)]),
        ("3 × 4", vec![Array2::zeros((3, 4))]),
        ("a cell of 2", vec![Array2::from_elem((2, 2), 2)]),
        ("a cell of -1", vec![Array2::from_elem((2, 2), -1)]),
        ("sizes differ", vec![sq(8), sq(9)]),
        (
            "the second lattice is bad",
            vec![sq(4), Array2::from_elem((4, 4), 7)],
        ),
    ] {
        t.refuse(&format!("LifeSims::new: {case}"), Want::Invalid(c), || {
            LifeSims::new(gpu, &lattices).map(drop)
        });
    }
    t.works("LifeSims::new: a non-square lattice says so", || {
        let r = reason(LifeSims::new(gpu, &[Array2::zeros((8, 9))]));
        require(r.contains("square"), || format!("reason: {r}"))
    });
    let glider = {
        let mut l = sq(6);
        for (r, col) in [(0, 1), (1, 2), (2, 0), (2, 1), (2, 2)] {
            l[[r, col]] = 1;
        }
        l
    };
    for (case, start) in [
        ("1 × 1, alive", Array2::from_elem((1, 1), 1)),
        (
            "2 × 2",
            Array2::from_shape_vec((2, 2), vec![1, 0, 1, 1]).unwrap_or_else(|_| sq(2)),
        ),
        ("transposed (Fortran order)", glider.clone().reversed_axes()),
        (
            "negative strides",
            glider.clone().slice_move(s![..;-1, ..;-1]),
        ),
    ] {
        t.works(&format!("LifeSims: {case}"), || {
            let mut sims = LifeSims::new(gpu, std::slice::from_ref(&start)).map_err(m)?;
            for step in 1..=3 {
                sims.frame().map_err(m)?;
                equal(
                    &format!("step {step}"),
                    sims.lattice(0).map_err(m)?.to_owned(),
                    life_cpu(start.view(), step).map_err(m)?,
                )?;
            }
            Ok(())
        });
    }
    t.works("LifeSims::lattice: simulation 1 of 1 refused", || {
        let sims = LifeSims::new(gpu, &[sq(2)]).map_err(m)?;
        match sims.lattice(1) {
            Err(Error::InvalidInput {
                kernel: "conway_ker",
                ..
            }) => Ok(()),
            r => Err(format!("got {r:?}")),
        }
    });
    match Lane::<i32, 2>::new(gpu, 4) {
        Err(e) => t.works("Lane<i32, 2>::new(4)", || Err(m(e))),
        Ok(mut ln) => {
            for (case, n, src, dst) in [
                ("n = 0", 0, 0, 1),
                ("3 × 3 in 4 cells", 3, 0, 1),
                ("in place", 2, 1, 1),
                ("source buffer 2", 2, 2, 1),
                ("destination buffer 7", 2, 0, 7),
                (
                    "n = 2,097,121 (65,536 blocks along y)",
                    65_535 * 32 + 1,
                    0,
                    1,
                ),
                ("n = 2^32 (n² overflows)", 1 << 32, 0, 1),
            ] {
                t.refuse(
                    &format!("Lane::conway_step: {case}"),
                    Want::Invalid(c),
                    || ln.conway_step(n, src, dst),
                );
            }
        }
    }
    t.works("Lane::conway_step: one live cell dies", || {
        let mut ln = Lane::<i32, 2>::from_host(gpu, &[1]).map_err(m)?;
        ln.upload(0).map_err(m)?;
        ln.conway_step(1, 0, 1).map_err(m)?;
        ln.download(1).map_err(m)?;
        equal("cell", ln.host().map_err(m)?.to_vec(), vec![0])
    });
    t.refuse(
        "Lane<i32, 1>::conway_step: no second buffer",
        Want::Invalid(c),
        || {
            let mut ln = Lane::<i32, 1>::new(gpu, 1)?;
            ln.conway_step(1, 0, 1)
        },
    );
    t.finish()
}
