//! Launching and checking the elementwise kernels against their per-element
//! functions.
use super::*;

/// The parameters of the binary maps `multiply` and `vector_sum_i32`.
type BinaryMap<T> = (*const T, *const T, *mut T, usize);

/// Launches the binary map `kernel` on copies of `a` and `b` with `shape`:
/// the result and the launch's time in seconds.
pub(super) fn binary_map<T: Copy>(
    kernel: Kernel<BinaryMap<T>>,
    shape: LaunchShape,
    a: &[T],
    b: &[T],
) -> (Vec<T>, f64) {
    let n = a.len();
    let (da, db, dc) = (Buf::from(a), Buf::from(b), Buf::<T>::zeroed(n));
    let t = Instant::now();
    // SAFETY: three buffers of n elements, c apart from a and b.
    unsafe {
        launch(
            kernel,
            shape,
            (da.ptr().cast_const(), db.ptr().cast_const(), dc.ptr(), n),
        )
    }
    .unwrap();
    let seconds = t.elapsed().as_secs_f64();
    (dc.to_vec(), seconds)
}

/// `f` at every index of `a` and `b`.
pub(super) fn zip_map<T: Copy, R>(a: &[T], b: &[T], f: impl Fn(T, T) -> R) -> Vec<R> {
    a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
}

/// Launches elementwise kernel `K` on `T` with the arrays and scalars given,
/// as the host's `ElementwiseArgs` lays them out: arrays, scalars, then `n`.
fn elementwise_launch<K: Elementwise<T>, T: Copy>(arrays: &[&Buf<T>], scalars: &[T], n: usize) {
    let kernel = K::KERNEL;
    let entry = kernel.sim_entry().expect("a host entry");
    let mut ptrs: Vec<*mut T> = arrays.iter().map(|b| b.ptr()).collect();
    let mut scalars = scalars.to_vec();
    let mut n = n;
    let mut params: Vec<*mut c_void> = ptrs
        .iter_mut()
        .map(|p| p as *mut *mut T as *mut c_void)
        .chain(scalars.iter_mut().map(|s| s as *mut T as *mut c_void))
        .collect();
    params.push(&mut n as *mut usize as *mut c_void);
    // SAFETY: every array holds n elements; the outputs are apart from the
    // inputs; the parameters are the declaration's, in order.
    launched(kernel.name());
    unsafe { sim::launch(kernel.name(), linear(2, 64), entry, &params) }.unwrap();
}

/// Elementwise kernel `K` on `T` at several lengths (vector body, head and
/// tail), against its per-element function.
pub(super) fn check_elementwise<K: Elementwise<T>, T: Sample>() {
    let (ni, no) = (K::INPUTS.len(), K::OUTPUTS.len());
    let arrays = ni + no + K::INOUTS.len();
    for n in [1usize, 37, 531] {
        let data: Vec<Vec<T>> = (0..arrays)
            .map(|a| (0..n).map(|i| T::small(i * 3 + a * 101)).collect())
            .collect();
        let scalars: Vec<T> = (0..K::SCALARS.len()).map(|s| T::small(s + 7)).collect();
        let bufs: Vec<Buf<T>> = data.iter().map(|d| Buf::from(d)).collect();
        elementwise_launch::<K, T>(&bufs.iter().collect::<Vec<_>>(), &scalars, n);
        let got: Vec<Vec<T>> = bufs[ni..].iter().map(Buf::to_vec).collect();
        for i in 0..n {
            let ins: Vec<T> = data[..ni].iter().map(|d| d[i]).collect();
            let mut outs: Vec<T> = (ni..arrays)
                .map(|a| {
                    if a < ni + no {
                        T::default()
                    } else {
                        data[a][i]
                    }
                })
                .collect();
            K::element(&ins, &mut outs, &scalars);
            for (j, out) in outs.iter().enumerate() {
                assert_eq!(got[j][i], *out, "{} n = {n}, element {i}", K::ENTRY);
            }
        }
    }
}
