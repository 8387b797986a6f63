//! `doubles_matrix`: chosen shapes, views, heads and tails on sub-slices, and
//! random matrices against the CPU.
use super::*;

pub(super) fn doubles_matrix_any_shape(gpu: &Gpu) -> Result<(), Failed> {
    // 4096² on a GPU, 1025 × 1023 on the simulator.
    let (rows, cols) = (sized(gpu, 4096, 1025), sized(gpu, 4096, 1023));
    for &(r, c) in &[
        (1, 1),
        (5, 5),
        (16, 16),
        (17, 33),
        (1, 1000),
        (1000, 1),
        (1023, 1025),
        (rows, cols),
    ] {
        let a = randn2(r, c, (r * 7 + c) as u64);
        let expected = doubles_matrix_cpu(a.view());
        let got = gpu.doubles_matrix(a.view()).map_err(fail)?;
        ensure(got == expected, || format!("{r}×{c}: copy differs"))?;
        let mut inplace = a.clone();
        gpu.doubles_matrix_in_place(inplace.view_mut())
            .map_err(fail)?;
        ensure(inplace == expected, || format!("{r}×{c}: in place differs"))?;
    }
    Ok(())
}

pub(super) fn doubles_matrix_views(gpu: &Gpu) -> Result<(), Failed> {
    // Transposed, stepped and negatively strided views: copied to standard
    // layout, doubled, written back through the view.
    let base = randn2(40, 30, 3);
    let mut a = base.clone();
    gpu.doubles_matrix_in_place(a.view_mut().reversed_axes())
        .map_err(fail)?;
    ensure(a == doubles_matrix_cpu(base.view()), || "transposed".into())?;
    let mut b = base.clone();
    gpu.doubles_matrix_in_place(b.slice_mut(s![..;2, ..;-3]))
        .map_err(fail)?;
    let mut expected = base.clone();
    expected
        .slice_mut(s![..;2, ..;-3])
        .mapv_inplace(|x| x * 2.0);
    ensure(b == expected, || "stepped view".into())
}

pub(super) fn doubles_matrix_heads_and_tails_on_sub_slices(gpu: &Gpu) -> Result<(), Failed> {
    for (rows, cols) in [
        (1, 1),
        (1, 3),
        (3, 1),
        (1, 33),
        (5, 7),
        (31, 33),
        (33, 31),
        (257, 255),
    ] {
        for offset in 0..=3usize {
            let n = rows * cols;
            let a = Array2::from_shape_fn((rows, cols), |(r, c)| (r * 1000 + c) as f32 - 3.5);
            let mut p = vec![-7.0f32; offset];
            p.extend(a.iter().copied());
            p.extend_from_slice(&[-9.0; 3]);
            let mut d = gpu.to_device(&p).map_err(fail)?;
            let mut s = d.index_mut(offset..offset + n);
            gpu.doubles_matrix_on_device(&mut s, rows, cols)
                .map_err(fail)?;
            gpu.synchronize("test").map_err(fail)?;
            let mut got = vec![0.0f32; d.len()];
            d.copy_to(&mut got[..]).map_err(fail)?;
            let want = doubles_matrix_cpu(a.view());
            ensure(
                got[offset..offset + n] == want.as_slice().unwrap_or(&[])[..],
                || format!("{rows}×{cols} at offset {offset}: GPU and CPU differ"),
            )?;
            ensure(
                got[..offset].iter().all(|&v| v == -7.0)
                    && got[offset + n..].iter().all(|&v| v == -9.0),
                || format!("{rows}×{cols} at offset {offset}: wrote outside"),
            )?;
        }
    }
    Ok(())
}

pub(super) fn matrix(rows: usize, cols: usize, values: Vec<f32>) -> Array2<f32> {
    Array2::from_shape_vec((rows, cols), values).expect("rows × cols values")
}

struct DoublesCase {
    a: Array2<f32>,
    /// Double in place through a transposed (column-major) view.
    transposed: bool,
}

impl Debug for DoublesCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} matrix, in place transposed: {}, values {}",
            self.a.dim(),
            self.transposed,
            brief(self.a.as_slice().unwrap_or(&[]))
        )
    }
}

fn doubles_cases() -> impl Strategy<Value = DoublesCase> {
    let shapes = (1..=300usize, 1..=300usize, any::<bool>());
    shapes.prop_perturb(|(rows, cols, transposed), rng| DoublesCase {
        a: matrix(rows, cols, Draw::new(rng).vec(&f32_no_nan(), rows * cols)),
        transposed,
    })
}

/// Random rows × cols in 1..=300, any f32 but NaN: `doubles_matrix` (copy)
/// and `doubles_matrix_in_place` (through a standard or a transposed view)
/// equal `doubles_matrix_cpu` bit for bit (32 cases).
pub(super) fn doubles_matrix_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(32, doubles_cases(), |c| {
        let want = doubles_matrix_cpu(c.a.view());
        let got = gpu.doubles_matrix(c.a.view()).map_err(case_err)?;
        all_same("doubles_matrix (copy)", &got, &want)?;
        if c.transposed {
            // A column-major copy of A, doubled through its (row-major) transpose.
            let mut t = c.a.t().as_standard_layout().into_owned();
            gpu.doubles_matrix_in_place(t.view_mut().reversed_axes())
                .map_err(case_err)?;
            all_same("doubles_matrix (in place, transposed)", t.t(), &want)
        } else {
            let mut a = c.a.clone();
            gpu.doubles_matrix_in_place(a.view_mut())
                .map_err(case_err)?;
            all_same("doubles_matrix (in place)", &a, &want)
        }
    })
}
