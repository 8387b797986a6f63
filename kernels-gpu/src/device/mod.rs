//! The device layer: what `cuda_std` would give a kernel author, written on
//! top of `core::arch::nvptx` and inline PTX.
//!
//! | module | what it wraps |
//! |---|---|
//! | [`thread`] | `threadIdx`/`blockIdx`/`blockDim`/`gridDim`, the global index, grid-stride loops |
//! | [`sync`] | `__syncthreads`, memory fences |
//! | [`shared`] | static (`shared_array!`) and dynamic block-shared memory, accessed with `ld.shared`/`st.shared` |
//! | [`fault`] | `gpu_assert!` and the panic path: record where, then trap |
//! | [`print`] | device `printf` through the CUDA `vprintf` system call (`gpu_printf!`) |
//!
//! Kernels reach the hardware only through these modules, so that a host
//! implementation of the same functions could one day run kernel bodies on the
//! CPU, the way Numba's CUDA simulator does.
pub mod fault;
pub mod print;
pub mod shared;
pub mod sync;
pub mod thread;
