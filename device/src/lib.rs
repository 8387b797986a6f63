//! The device layer for GPU kernels in plain Rust (our `cuda_std`): what
//! Rust-CUDA's `cuda_std` gives a kernel author, for kernels that rustc's own
//! NVPTX backend compiles on a stable toolchain, written on top of
//! `core::arch::nvptx` and inline PTX.
//!
//! # A kernel crate
//! A kernel crate depends on `cuda-kernels-device`, is a `cdylib` (the
//! bitcode linker writes its PTX), and on `nvptx64-nvidia-cuda` is `no_std`:
//! ```text
//! #![cfg_attr(target_arch = "nvptx64", no_std)]
//! #![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]
//! ```
//! Its kernels are declared in [`kernels!`] blocks: on nvptx64 each is an
//! `extern "ptx-kernel"` entry point; on the host its handle carries the same
//! body, which the CPU simulator runs (here with [`sim::launch`](sim/fn.launch.html);
//! the runtime crate's `Gpu::launch` does it for a program, with typed arguments):
//! ```
//! use cuda_kernels_device::prelude::*;
//! use cuda_kernels_device::sim::{self, LaunchShape, SimError, memory::Allocation};
//!
//! kernels! {
//!     /// `x[i] = a · e^x[i]` for `i < n`.
//!     ///
//!     /// # Safety
//!     /// `x` points to `n` f32.
//!     pub fn scale_exp(x: *mut f32, n: usize, a: f32) as SCALE_EXP {
//!         for i in thread::grid_stride(n) {
//!             // SAFETY: i < n, the length of `x`.
//!             unsafe { *x.add(i) = a * (*x.add(i)).exp() };
//!         }
//!     }
//! }
//!
//! # fn main() -> Result<(), SimError> {
//! let n = 1000;
//! let buf = Allocation::new(n * 4, 4, "x")?; // zeroed: e^0 = 1
//! let (mut x, mut len, mut a) = (buf.ptr().cast::<f32>(), n, 3.0f32);
//! let params = [(&raw mut x).cast(), (&raw mut len).cast(), (&raw mut a).cast()];
//! let shape = LaunchShape { grid: [4, 1, 1], block: [256, 1, 1], dynamic_shared_bytes: 0 };
//! let entry = SCALE_EXP.sim_entry().expect("kernels! gives a host entry");
//! // SAFETY: the parameters are the kernel's, with a buffer of n f32.
//! unsafe { sim::launch(SCALE_EXP.name(), shape, entry, &params) }?;
//! // SAFETY: as above.
//! assert_eq!(unsafe { x.add(n - 1).read() }, 3.0);
//! # Ok(())
//! # }
//! ```
//! - `abi_ptx` is for the `extern "ptx-kernel"` entry points `kernels!` writes. `asm_experimental_arch` is
//!   needed by a crate that uses `shared_array!` (nvptx64 only): the
//!   array's PTX declaration and the `mov` of its address expand in the
//!   kernel crate, where its name is known. The nvptx64 build sets
//!   `RUSTC_BOOTSTRAP=1` for these (this repository's `build.rs` does).
//! - [`math`](math/index.html) calls NVIDIA's libdevice: the kernel crate's
//!   nvptx64 build links `libdevice.10.bc` (`-Clink-arg=<path>` in its
//!   rustflags, as `build.rs` does); the bitcode linker keeps only the
//!   functions a kernel calls. A crate that never calls `math` needs nothing.
//! - The panic handler comes from here (the default feature `panic-handler`,
//!   below).
//!
//! # Modules
//! Every module exists on every target, with the same functions: on
//! `nvptx64` they are the hardware's instructions, elsewhere the CPU
//! simulator's (below). The last column names what Rust-CUDA's `cuda_std`
//! calls the same thing.
//!
//! | module | CUDA C | what it wraps | cuda_std |
//! |---|---|---|---|
//! | [`thread`](thread/index.html) | `threadIdx`, `blockIdx`, `blockDim`, `gridDim` | `thread_idx_x()` … `grid_dim_z()`, the global index (`index_1d`, `index_2d`), grid-stride loops | `thread::thread_idx_x()`, `thread::index_1d()`: the same |
//! | [`sync`](sync/index.html) | `__syncthreads`, `__threadfence` | `sync_threads()`, `thread_fence()`, `thread_fence_block()` | `thread::sync_threads()`, `thread::device_fence()` |
//! | [`shared`](shared/index.html) | `__shared__`, `extern __shared__` | static (`shared_array!`) and dynamic block-shared memory, accessed with `ld.shared`/`st.shared` | `shared_array!`, `shared::dynamic_shared_mem()` |
//! | [`vector`](vector/index.html) | `float4` from `__shared__` | 128-bit shared loads and stores (`ld.shared.v4.f32`) | — |
//! | [`warp`](warp/index.html) | `__shfl_*_sync`, `__ballot_sync`, `__any_sync`, `__all_sync`, `__syncwarp`, `__activemask`, `__match_any_sync`, `__match_all_sync` | lane index, shuffles (down/up/xor/idx, 32 and 64 bits), votes, warp reductions, `syncwarp`, `activemask`, `match_any_sync`, `match_all_sync`; `_sync` variants with a member mask | `warp::lane_id()`, `warp::warp_shuffle_down(mask, …)`, `warp::warp_vote_ballot(mask, …)` |
//! | [`atomic`](atomic/index.html) | `atomicAdd`, `atomicMin`, `atomicMax`, `atomicExch`, `atomicCAS` | relaxed `atom.global.*` on global memory | its `atomic` module |
//! | [`shared`](shared/index.html) (atomics) | `atomicAdd` … on `__shared__` | `SharedArray::fetch_add`, `fetch_min`, `fetch_max`, `fetch_and`, `fetch_or`, `fetch_xor`, `exchange`, `compare_exchange` (`atom.shared.*`, 32/64-bit integers; add also f32/f64) | — |
//! | [`collectives`](collectives/index.html) | CUB's `BlockRadixSort`, `BlockRadixRank`, `BlockHistogram` | block radix rank and sort (keys, pairs; floats like `total_cmp`, NaN last), block histogram with shared atomics | — |
//! | [`load`](load/index.html) | `__ldg` on a `uint4`, `__ldcg` | 128-bit read-only loads (`ld.global.nc.v4`), L2-only loads (`ld.global.cg`) | — |
//! | [`arith`](arith/index.html) | `fmaf` | `fma_f32` (`fma.rn.f32`: rustc never contracts `a * b + c`) | `GpuFloat::mul_add` |
//! | [`float16`](float16/index.html) | `__half`, `__nv_bfloat16`, `__half2`, `__float2bfloat16_rn` | `f16`, `bf16` and their packed pairs: `cvt.rn`, `fma.rn.f16x2`, `min`/`max`, comparisons | — |
//! | [`math`](math/index.html) | `sinf`, `exp`, `powf`, `erfc`, … | f32 and f64 `<function>_<type>` from libdevice (`sin_f32` is `__nv_sinf`), and [`GpuFloat`](math::GpuFloat): `x.sin()`, `x.exp()` … | `GpuFloat::sin`, … |
//! | [`mma`](mma/index.html) | `mma.sync` (CUTLASS's `SM80_16x8x16_F32BF16BF16F32_TN`), `ldmatrix`, `cp.async` | fragments with their lane layouts as data, `mma_m16n8k16`, `mma_m16n8k8_tf32`, `ldmatrix_x4_trans`, `cp_async_16`, commit and wait groups | — |
//! | [`prelude`](prelude/index.html) | — | `use cuda_kernels_device::prelude::*;`: the above in one `use` | `cuda_std::prelude` |
//! | [`print`](print/index.html) | `printf` | `gpu_printf!` through the `vprintf` system call | `println!` |
//! | [`hopper`](hopper/index.html) | `wgmma::mma_async`, `cuda::barrier`, `cp.async.bulk.tensor` (CUTLASS/CuTe) | sm_90a: warpgroup MMA from shared-memory descriptors (128-byte swizzle), `mbarrier` with transaction counts, 3-D TMA loads, `setmaxnreg` (not modelled by the simulator) | — |
//! | [`collectives`](collectives/index.html) | CUB's `WarpReduce`, `WarpScan`, `BlockReduce`, `BlockScan`, `BlockLoad`, `BlockStore` | warp and block reduce and scan over any [`ReduceOp`](collectives::ReduceOp), blocked and striped loads and stores | — |
//! | [`fault`] | `assert` | `gpu_assert!`, the panic handler, and the [`FaultRecord`](fault::FaultRecord) they fill for the host | — |
//!
//! # Faults and the panic handler
//! With the default feature `panic-handler`, this crate is the nvptx64
//! build's `#[panic_handler]`: a panic (an out-of-bounds index, an overflow
//! check) records its file, line, block and thread like a failed
//! `gpu_assert!` and traps, so a user's kernel crate gets located faults with
//! no code of its own (`loop {}`, the usual `no_std` handler, would hang the
//! GPU instead). A crate that wants its own handler turns the default
//! features off (`default-features = false`); it can still call
//! [`fault::fail`](fault/fn.fail.html). The kernel crate must use this crate
//! (any `use`), or rustc does not link it and finds no handler.
//!
//! # On the host: the simulator
//! On every other target the crate is `std`, and each function above is
//! implemented by a CPU simulator, [`sim`](sim/index.html): a kernel body
//! declared with [`kernels!`] is compiled for the host too (its handle
//! carries it as a [`sim::Entry`](sim/type.Entry.html)), and
//! [`sim::launch`](sim/fn.launch.html) runs every thread of a grid on the
//! CPU with CUDA's execution model: index registers, barriers, shared memory,
//! warp shuffles and votes, atomics, printf and located faults, plus checks a
//! GPU cannot make (shared-memory races, barrier divergence, out-of-bounds
//! accesses to device buffers). See `docs/simulator.md`. The fault record
//! ([`fault::FaultRecord`], [`fault::FAULT_POINTER_SYMBOL`]) is what the
//! host reads after a fault on the GPU, with this very type.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![warn(missing_docs)]
// On the host, the simulator names a user's call site through
// `#[track_caller]`. rustc 1.95's MIR inliner loses that location when a
// `#[track_caller]` function whose body calls another one is inlined across
// crates (seen with incremental compilation off, as in every release build:
// `activemask` grouped the lanes of two call sites as one). So every public
// `#[track_caller]` entry of this crate is `inline(never)` on the host and
// `inline(always)` on the GPU, where no location is passed.
#![cfg_attr(target_arch = "nvptx64", feature(stdarch_nvptx, asm_experimental_arch))]

pub mod arith;
pub mod atomic;
pub mod collectives;
pub mod fault;
pub mod float16;
pub mod hopper;
pub mod kernel;
pub mod load;
pub mod math;
pub mod mma;
pub mod prelude;
pub mod print;
pub mod shared;
#[cfg(not(target_arch = "nvptx64"))]
pub mod sim;
pub mod sync;
pub mod thread;
pub mod unroll;
pub mod vector;
pub mod warp;
