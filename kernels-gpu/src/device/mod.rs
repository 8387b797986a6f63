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
//! | [`warp`] | lane index, warp shuffles (`shfl.sync` down/up/xor/idx, 32 and 64 bits), votes, warp reductions |
//! | [`atomic`] | atomic read-modify-write on global memory (`atom.global.*`: add, min, max, exch, cas) |
//! | [`load`] | 128-bit read-only loads (`ld.global.nc.v4`) and L2-only loads (`ld.global.cg`) |
//! | [`math`] | f32 and f64 `sqrt`, `exp`, `log`, `sin`, `pow`, `erf`, … from NVIDIA's libdevice |
//!
//! Kernels reach the hardware only through these modules, so that a host
//! implementation of the same functions could one day run kernel bodies on the
//! CPU, the way Numba's CUDA simulator does.
pub mod arith;
pub mod atomic;
pub mod fault;
pub mod load;
pub mod math;
pub mod print;
pub mod shared;
pub mod sync;
pub mod thread;
pub mod vector;
pub mod warp;
