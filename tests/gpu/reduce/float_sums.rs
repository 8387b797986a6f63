//! Float sums against an accurate reference within the order-aware bound, the
//! bound shown to catch one dropped element.
use super::*;

pub(super) fn float_sums_within_tolerance(gpu: &Gpu) -> Result<(), Failed> {
    fn for_type<T: Elem>(gpu: &Gpu) -> Result<(), Failed>
    where
        Sum: ReduceKernel<T>,
    {
        // 2^24 on a GPU only.
        for n in [1000usize, (1 << 20) + 3, sized(gpu, 1 << 24, 65_537)] {
            let data = Array1::from(Draw::seeded(n as u64).vec(&T::sum_value(false), n));
            let got = gpu.reduce::<Sum, T>(data.view(), None).map_err(fail)?;
            let (grid, block) = gpu.reduce_launch_shape::<Sum, T>(n).map_err(fail)?;
            let data = data.as_slice().unwrap_or(&[]);
            // Exact in the kernel's order (a dropped element changes the
            // bits at any n), and within the bound of the accurate sum.
            let order = ReduceOrder::aligned((grid, block));
            let want = reduce_in_gpu_order::<Sum, T>(data, None, order).map_err(fail)?;
            ensure(got == want, || {
                format!("{} n = {n}: GPU {got}, the kernel's order {want}", T::NAME)
            })?;
            float_sum_verdict(data, None, got, (grid * block) as usize)
                .map_err(|e| format!("{} n = {n}: {e}", T::NAME))?;
        }
        Ok(())
    }
    for_type::<f32>(gpu)?;
    for_type::<f64>(gpu)
}

/// The check of every GPU float sum here: `got`, the sum of `data` (and
/// `init`) by `threads` GPU threads, is within `float_sum_tolerance` of the
/// exact sum (`accurate_sum`, in f64); the initial value adds one level to
/// the tree.
pub(super) fn float_sum_verdict<T: Elem>(
    data: &[T],
    init: Option<T>,
    got: T,
    threads: usize,
) -> Result<(), String> {
    let u = T::UNIT_ROUNDOFF.ok_or("an integer sum is exact")?;
    let init_f = init.map_or(0.0, T::to_f64);
    let exact = accurate_sum(data.iter().map(|x| x.to_f64()).chain([init_f]));
    let sum_abs = data.iter().map(|x| x.to_f64().abs()).sum::<f64>() + init_f.abs();
    let levels = data.len() + if init.is_some() { threads } else { 0 };
    let tol = float_sum_tolerance(levels, threads, sum_abs, u);
    let err = (got.to_f64() - exact).abs();
    if err <= tol {
        Ok(())
    } else {
        Err(format!(
            "GPU {got}, exact {exact}: |GPU − exact| {err:.3e} > tol {tol:.3e}"
        ))
    }
}

/// The float-sum check catches a sum that lost one element: at n ≈ 10^5
/// values in [-1000, 1000) (the properties' largest), with the thread count
/// of a GPU that launches the whole grid (blocks of `BLOCK`, one 16-byte
/// vector per thread), the exact sum passes, and the exact sum without the
/// element nearest 500 in magnitude fails, in f32 and f64.
pub(super) fn float_sum_check_catches_one_dropped_element() -> Result<(), Failed> {
    fn for_type<T: Elem>() -> Result<(), Failed> {
        let n = 99_999;
        let data: Vec<T> = Draw::seeded(5).vec(&T::sum_value(false), n);
        let threads = n.div_ceil(T::PER_VEC).div_ceil(BLOCK as usize) * BLOCK as usize;
        let exact = accurate_sum(data.iter().map(|x| x.to_f64()));
        float_sum_verdict(&data, None, T::from_f64(exact), threads)
            .map_err(|e| format!("{}: the exact sum fails: {e}", T::NAME))?;
        let dropped = data
            .iter()
            .map(|x| x.to_f64())
            .min_by(|a, b| (a.abs() - 500.0).abs().total_cmp(&(b.abs() - 500.0).abs()))
            .ok_or("no data")?;
        let lost = T::from_f64(exact - dropped);
        ensure(
            float_sum_verdict(&data, None, lost, threads).is_err(),
            || {
                format!(
                    "{}: a sum without the element {dropped} passes the check",
                    T::NAME
                )
            },
        )?;
        Ok(())
    }
    for_type::<f32>()?;
    for_type::<f64>()
}
