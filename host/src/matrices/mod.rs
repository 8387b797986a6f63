//! The matrices family (seed 001): K3 `doubles_matrix`, K4
//! `matrix_mul_naive`, K5 `matrix_mul_tiled` ([`matmul`]), K7 elementwise
//! kernels declared from an expression and K8 `vector_sum_repeat`
//! ([`elementwise`]), K9 `gufunc_matmul_i64` ([`gufunc`]).
//!
//! Every launcher is an `impl Gpu` method taking `ndarray` views; each
//! kernel has its CPU reference next to it. Inputs in any memory layout are
//! accepted: non-contiguous or non-standard views (transposed, sliced with a
//! step, negative strides, broadcast) are copied to standard (row-major,
//! contiguous) layout on the host first, after every shape check, since the
//! kernels read row-major contiguous buffers.
pub mod elementwise;
pub mod gufunc;
pub mod matmul;

pub use elementwise::*;
pub use gufunc::*;
pub use matmul::*;

/// Builds [`ENTRY_POINTS`] from the fixed kernels plus every entry point of
/// the elementwise list (so that a kernel added to the list is checked
/// against the PTX without editing this file).
macro_rules! entry_points {
    ($(
        $(#[$meta:meta])*
        $name:ident => $method:ident <T: $($ty:ident),+ $(,)?> $sig:tt $body:block
    )*) => {
        /// The PTX entry points this module launches.
        pub const ENTRY_POINTS: &[&str] = &[
            "doubles_matrix",
            "matrix_mul_naive",
            "matrix_mul_tiled",
            "matrix_mul_tiled_v4",
            "matrix_mul_tiled_64",
            "matrix_mul_tiled_64_v4",
            "vector_sum_repeat",
            "gufunc_matmul_i64",
            $($(concat!("elementwise_", stringify!($name), "_", stringify!($ty)),)+)*
        ];
    };
}
cuda_kernels_gpu::elementwise_kernels!(entry_points);

#[cfg(test)]
mod tests {
    use super::ENTRY_POINTS;

    #[test]
    fn entry_points_include_the_elementwise_list() {
        for e in [
            "matrix_mul_tiled",
            "elementwise_sum_i32",
            "elementwise_saxpy_f32",
            "elementwise_lerp_f64",
        ] {
            assert!(ENTRY_POINTS.contains(&e), "{e}");
        }
    }
}
