//! The matrices family: `doubles_matrix`,
//! `matrix_mul_naive`, `matrix_mul_tiled` ([`matmul`]), elementwise
//! kernels declared from an expression and `vector_sum_repeat`
//! ([`elementwise`]), `gufunc_matmul_i64` ([`gufunc`]), and the GEMM
//! family on the tensor cores ([`gemm`]; its results checked in full by
//! [`gemm_verify`]).
//!
//! Every launcher is an `impl Gpu` method taking `ndarray` views; each
//! kernel has its CPU reference next to it. Inputs in any memory layout are
//! accepted: non-contiguous or non-standard views (transposed, sliced with a
//! step, negative strides, broadcast) are copied to standard (row-major,
//! contiguous) layout on the host first, after every shape check, since the
//! kernels read row-major contiguous buffers.
pub mod elementwise;
pub mod gemm;
pub mod gemm_verify;
pub mod gufunc;
pub mod matmul;

pub use elementwise::*;
pub use gemm::*;
pub use gufunc::*;
pub use matmul::*;
