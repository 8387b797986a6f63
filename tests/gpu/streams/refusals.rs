//! Refusals of bad input: the checks without a GPU, every launcher with one.
use super::*;

pub(super) fn check_refusals() -> Result<(), Failed> {
    let mut t = Cases::new("streams::check_refusals");
    let mk = "mult_ker";
    for (case, len, grid, block) in [
        ("empty", 0, 1, 64),
        ("grid 0", 10, 0, 64),
        ("grid 2^31", 10, MAX_GRID_X + 1, 64),
        ("grid u32::MAX", 10, u32::MAX, 64),
        ("block 0", 10, 1, 0),
        ("block 1025", 10, 1, 1025),
        ("2^32 elements, grid 0", 1 << 32, 0, 64),
    ] {
        t.refuse(
            &format!("check_mult_ker: {case}"),
            Want::Invalid(mk),
            || check_mult_ker(len, grid, block),
        );
    }
    t.works(
        "check_mult_ker: 2^32 elements, grid 2^31 − 1 of 1024",
        || check_mult_ker(1 << 32, MAX_GRID_X, 1024).map_err(m),
    );
    t.works("mult_ker_cpu: one element is the identity", || {
        equal(
            "out",
            mult_ker_cpu(ArrayView1::from(&[1.5f32])).to_vec(),
            vec![1.5],
        )
    });
    let c = "conway_ker";
    for (case, n) in [
        ("0", 0),
        ("65,535 × 32 + 1 (65,536 blocks along y)", 65_535 * 32 + 1),
        ("2^32 (n² × 4 overflows)", 1 << 32),
        ("usize::MAX", usize::MAX),
    ] {
        t.refuse(&format!("life_grid: {case}"), Want::Invalid(c), || {
            life_grid(n)
        });
    }
    t.works("life_grid: 1", || {
        equal("grid", life_grid(1).map_err(m)?, (1, 1))
    });
    let zero = [0i32];
    let two = [2i32];
    t.refuse("check_lattice: 0 × 0", Want::Invalid(c), || {
        check_lattice(Array2::<i32>::zeros((0, 0)).view())
    });
    t.refuse("check_lattice: 3 × 4", Want::Invalid(c), || {
        check_lattice(Array2::<i32>::zeros((3, 4)).view())
    });
    t.refuse("check_lattice: a cell of 2", Want::Invalid(c), || {
        check_lattice(huge2(&two, 2, 2))
    });
    t.refuse("check_lattice: a cell of -1", Want::Invalid(c), || {
        check_lattice(Array2::from_elem((2, 2), -1).view())
    });
    t.refuse(
        "check_lattice: 2,097,121² broadcast (past the grid)",
        Want::Invalid(c),
        || check_lattice(huge2(&zero, 65_535 * 32 + 1, 65_535 * 32 + 1)),
    );
    t.refuse(
        "check_lattice: 2^32 × 1 broadcast (not square)",
        Want::Invalid(c),
        || check_lattice(huge2(&zero, 1 << 32, 1)),
    );
    t.refuse("life_step_cpu: 0 × 0", Want::Invalid(c), || {
        life_step_cpu(Array2::<i32>::zeros((0, 0)).view())
    });
    t.works(
        "life_cpu: one live cell dies (it is its own 8 neighbours)",
        || {
            equal(
                "step",
                life_cpu(Array2::from_elem((1, 1), 1).view(), 1).map_err(m)?,
                Array2::zeros((1, 1)),
            )
        },
    );
    let k = "context";
    t.refuse("threads_mult_ker: no arrays", Want::Invalid(k), || {
        threads_mult_ker(PTX, &[])
    });
    t.refuse("threads_mult_ker: an empty array", Want::Invalid(k), || {
        threads_mult_ker(PTX, &[vec![1.0], vec![]])
    });
    t.refuse("threads_mult_ker: PTX with a NUL", Want::Invalid(k), || {
        threads_mult_ker("a\0b", &[vec![1.0]])
    });
    t.finish()
}

pub(super) fn refusals(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("streams::refusals");
    let k = "mult_ker";
    let e = Array1::<f32>::zeros(0);
    let one = [1.75f32];
    let data: Array1<f32> = (0..300).map(|i| i as f32 * 0.5 - 20.0).collect();
    for (case, v, grid, block) in [
        ("empty", e.view(), 1, 64),
        ("grid 0", data.view(), 0, 64),
        ("grid 2^31", data.view(), MAX_GRID_X + 1, 64),
        ("grid u32::MAX", data.view(), u32::MAX, 64),
        ("block 0", data.view(), 1, 0),
        ("block 1025", data.view(), 1, 1025),
        (
            "2^32 broadcast elements, grid 0 (refused before any copy)",
            huge1(&one, 1 << 32),
            0,
            64,
        ),
    ] {
        t.refuse(&format!("mult_ker: {case}"), Want::Invalid(k), || {
            gpu.mult_ker(v, grid, block)
        });
    }
    for (case, v, grid, block) in [
        ("one element", ArrayView1::from(&one), 1, 64),
        (
            "one element, block 1024 × 3",
            ArrayView1::from(&one),
            3,
            1024,
        ),
        ("negative stride", data.slice(s![..;-1]), 2, 32),
        ("step 3", data.slice(s![..;3]), 1, 1),
    ] {
        t.works(&format!("mult_ker: {case}"), || {
            equal(
                "out",
                gpu.mult_ker(v, grid, block).map_err(m)?,
                mult_ker_cpu(v),
            )
        });
    }
    let mut d0 = gpu.to_device::<f32>(&[]).map_err(crate::common::fail)?;
    let mut d1 = gpu.to_device(&[2.5f32]).map_err(crate::common::fail)?;
    t.refuse("mult_ker_on_device: empty buffer", Want::Invalid(k), || {
        gpu.mult_ker_on_device(&mut d0, 1, 64)
    });
    t.refuse("mult_ker_on_device: grid 0", Want::Invalid(k), || {
        gpu.mult_ker_on_device(&mut d1, 0, 64)
    });
    t.works("mult_ker_on_device: one element", || {
        let launched = gpu.mult_ker_on_device(&mut d1, 1, 64);
        gpu.synchronize(k).map_err(m)?;
        launched.map_err(m)?;
        let mut out = [0.0f32];
        d1.copy_to(&mut out[..]).map_err(m)?;
        equal("out", out, [2.5])
    });
    // Lanes.
    let lane = "lane";
    t.refuse("Lane::new: length 0", Want::Invalid(lane), || {
        Lane::<f32, 1>::new(gpu, 0)
    });
    t.refuse("Lane::new: no device buffer", Want::Invalid(lane), || {
        Lane::<f32, 0>::new(gpu, 4)
    });
    t.refuse("Lane::from_host: empty", Want::Invalid(lane), || {
        Lane::<f32, 2>::from_host(gpu, &[])
    });
    match Lane::<f32, 2>::from_host(gpu, &[3.0]) {
        Err(err) => t.works("Lane::from_host: one element", || Err(m(err))),
        Ok(mut ln) => {
            t.refuse("Lane::upload: buffer 2 of 2", Want::Invalid(lane), || {
                ln.upload(2)
            });
            t.refuse(
                "Lane::download: buffer usize::MAX",
                Want::Invalid(lane),
                || ln.download(usize::MAX),
            );
            t.refuse(
                "Lane::copy_on_device: onto itself",
                Want::Invalid(lane),
                || ln.copy_on_device(1, 1),
            );
            t.refuse(
                "Lane::copy_on_device: to buffer 5",
                Want::Invalid(lane),
                || ln.copy_on_device(0, 5),
            );
            t.refuse(
                "Lane::copy_on_device: from buffer 5",
                Want::Invalid(lane),
                || ln.copy_on_device(5, 0),
            );
            t.refuse("Lane::mult_ker: buffer 2", Want::Invalid(k), || {
                ln.mult_ker(2, 1, 64)
            });
            t.refuse("Lane::mult_ker: grid 0", Want::Invalid(k), || {
                ln.mult_ker(0, 0, 64)
            });
            t.refuse("Lane::mult_ker: block 2048", Want::Invalid(k), || {
                ln.mult_ker(0, 1, 2048)
            });
            t.works(
                "Lane: one element, upload, copy, mult_ker, download",
                || {
                    ln.upload(0).map_err(m)?;
                    ln.copy_on_device(0, 1).map_err(m)?;
                    ln.mult_ker(1, 1, 64).map_err(m)?;
                    ln.download(1).map_err(m)?;
                    equal("host", ln.host().map_err(m)?.to_vec(), vec![3.0])
                },
            );
        }
    }
    t.finish()
}
