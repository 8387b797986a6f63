//! One property per operation and type: random lengths, initial values and
//! device offsets against the CPU.
use super::*;

/// A reduction's test inputs and how its results are judged.
pub(super) trait ReduceProp<T: Elem>: ReduceKernel<T> {
    /// `n` inputs and a candidate initial value.
    fn draw(d: &mut Draw, n: usize, exact: bool) -> (Vec<T>, T);
    /// What the kernel must not read: the value put around the device slice.
    fn poison() -> T;
    /// Whether the GPU result must equal the CPU reference exactly.
    fn exact(_values_exact: bool) -> bool {
        true
    }
}

impl<T: Elem> ReduceProp<T> for Sum
where
    Sum: ReduceKernel<T>,
{
    fn draw(d: &mut Draw, n: usize, exact: bool) -> (Vec<T>, T) {
        let s = T::sum_value(exact);
        (d.vec(&s, n), d.one(&s))
    }
    fn poison() -> T {
        T::BIG
    }
    fn exact(values_exact: bool) -> bool {
        values_exact || T::UNIT_ROUNDOFF.is_none()
    }
}

impl<T: Elem> ReduceProp<T> for Product
where
    Product: ReduceKernel<T>,
{
    fn draw(d: &mut Draw, n: usize, _exact: bool) -> (Vec<T>, T) {
        let xs = T::product_values(d, n);
        (xs, d.one(&T::product_init()))
    }
    fn poison() -> T {
        T::default()
    }
}

/// Min, max and xor: any values; what is put around the device slice.
macro_rules! any_value_reductions {
    ($($op:ident: $poison:ident),*) => {$(
        impl<T: Elem> ReduceProp<T> for $op
        where
            $op: ReduceKernel<T>,
        {
            fn draw(d: &mut Draw, n: usize, _exact: bool) -> (Vec<T>, T) {
                let s = T::any_value();
                (d.vec(&s, n), d.one(&s))
            }
            fn poison() -> T {
                T::$poison
            }
        }
    )*};
}
any_value_reductions!(Min: LOWEST, Max: HIGHEST, Xor: BIG);

struct ReduceCase<T> {
    data: Vec<T>,
    init: Option<T>,
    /// Where the data starts in the device buffer (elements): 1..=3 start
    /// off the 16-byte boundary.
    offset: usize,
    /// Float sums: small integers (exact) rather than [-1000, 1000).
    exact_values: bool,
}

impl<T: Debug> Debug for ReduceCase<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "n = {}, init = {:?}, device offset = {}, exact values: {}, data = {}",
            self.data.len(),
            self.init,
            self.offset,
            self.exact_values,
            brief(&self.data)
        )
    }
}

fn reduce_cases<Op: ReduceProp<T>, T: Elem>() -> impl Strategy<Value = ReduceCase<T>> {
    let params = (length(0, 99_999), any::<bool>(), 0..=3usize, any::<bool>());
    params.prop_perturb(|(n, with_init, offset, exact_values), rng| {
        let (data, init) = Op::draw(&mut Draw::new(rng), n, exact_values);
        // Min and max of nothing are undefined: such a case gets its initial value.
        let with_init = with_init || (n == 0 && !Op::DEFINED_ON_EMPTY);
        ReduceCase {
            data,
            init: with_init.then_some(init),
            offset,
            exact_values,
        }
    })
}

/// Random length 0..100 000 (a third ≤ 64, a third ≤ 4096), an initial
/// value or none (always one for min/max of nothing, which is undefined),
/// the data at offset 0..=3 of a device buffer padded with values that
/// would change the result. Each case reduces on the GPU twice, from the
/// host array (`reduce`) and from the device slice (`reduce_device`, which
/// launches even for an empty input), and compares both with `reduce_cpu`:
/// exactly, except float sums of values in [-1000, 1000), which must be
/// equal to the kernel's order emulated (`reduce_in_gpu_order` with the
/// launch's shape and the slice's head) and within `float_sum_tolerance`
/// (the GPU's tree, one level more for the initial value) of the exact sum
/// (`float_sum_verdict`; 32 cases per operation and type).
pub(super) fn reduce_agrees<Op: ReduceProp<T>, T: Elem>(gpu: &Gpu) -> Result<(), Failed> {
    gpu.bind().map_err(fail)?;
    check(32, reduce_cases::<Op, T>(), |c| {
        let n = c.data.len();
        let data = Array1::from(c.data.clone());
        let cpu = reduce_cpu::<Op, T>(data.view(), c.init).map_err(case_err)?;
        let host = gpu.reduce::<Op, T>(data.view(), c.init).map_err(case_err)?;
        let mut padded = vec![Op::poison(); c.offset];
        padded.extend_from_slice(&c.data);
        padded.extend([Op::poison(); 4]);
        let buf = gpu
            .to_device(&padded)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let slice = buf.index(c.offset..c.offset + n);
        let device = gpu
            .reduce_device::<Op, T>(&slice, c.init)
            .map_err(case_err)?;
        if Op::exact(c.exact_values) {
            prop_assert!(
                host == cpu && device == cpu,
                "{}: GPU {} (from the host), {} (from the device), CPU {}",
                Op::ENTRY,
                host,
                device,
                cpu
            );
            return Ok(());
        }
        let (grid, block) = gpu.reduce_launch_shape::<Op, T>(n).map_err(case_err)?;
        let threads = grid as usize * block as usize;
        // Exact in the kernel's order: from the host, a fresh (aligned)
        // buffer; from the device, the slice `offset` elements in.
        let per_vec = <T as Input>::PER_VEC;
        let host_order = ReduceOrder::aligned((grid, block));
        let device_order = ReduceOrder {
            head: (per_vec - c.offset % per_vec) % per_vec,
            ..host_order
        };
        for (what, got, order) in [
            ("from the host", host, host_order),
            ("from the device", device, device_order),
        ] {
            let want = reduce_in_gpu_order::<Op, T>(&c.data, c.init, order).map_err(case_err)?;
            prop_assert!(
                got == want,
                "{} {what}: GPU {}, the kernel's order {} ({order:?})",
                Op::ENTRY,
                got,
                want
            );
        }
        for (what, got) in [("from the host", host), ("from the device", device)] {
            if let Err(e) = float_sum_verdict(&c.data, c.init, got, threads) {
                return Err(TestCaseError::fail(format!(
                    "{} {what}: {e} (CPU {cpu})",
                    Op::ENTRY
                )));
            }
        }
        Ok(())
    })
}
