//! cuBLAS's SGEMM, loaded at run time with `dlopen` (no link-time
//! dependency, nothing to install): the reference `cuda-kernels bench`
//! measures the tiled matrix product against, in the same run, on the same
//! buffers and stream, timed the same way (CUDA events).
//!
//! The handle computes in `CUBLAS_DEFAULT_MATH`: plain f32 FMAs, no TF32
//! tensor cores (those need `CUBLAS_TF32_TENSOR_OP_MATH` or
//! `NVIDIA_TF32_OVERRIDE=1`; [`Cublas::tf32_override`] reports the latter).
use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};

use cust::memory::DevicePointer;

use crate::Gpu;
use crate::dynlib::DynLib;
use crate::error::{Error, Result};
use crate::matrices::{GemmInput, GemmOutput, GemmShape, Op, check_product_buffers};
use crate::memory::{DeviceId, DeviceSlice};

type Handle = *mut c_void;
type Create = unsafe extern "C" fn(*mut Handle) -> c_int;
type Destroy = unsafe extern "C" fn(Handle) -> c_int;
type SetStream = unsafe extern "C" fn(Handle, cust::sys::CUstream) -> c_int;
type SetMathMode = unsafe extern "C" fn(Handle, c_int) -> c_int;
#[allow(clippy::type_complexity)]
type Sgemm = unsafe extern "C" fn(
    Handle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const f32,
    *const f32,
    c_int,
    *const f32,
    c_int,
    *const f32,
    *mut f32,
    c_int,
) -> c_int;

#[allow(clippy::type_complexity)]
type GemmStridedBatchedEx = unsafe extern "C" fn(
    Handle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    c_int,
    c_int,
    i64,
    *const c_void,
    c_int,
    c_int,
    i64,
    *const c_void,
    *mut c_void,
    c_int,
    c_int,
    i64,
    c_int,
    c_int,
    c_int,
) -> c_int;

/// `CUBLAS_OP_T`.
const CUBLAS_OP_T: c_int = 1;
/// `CUBLAS_COMPUTE_32F` (cublas_api.h): f32 accumulation, 16-bit inputs on
/// the tensor cores.
const CUBLAS_COMPUTE_32F: c_int = 68;
/// `CUBLAS_COMPUTE_32F_FAST_TF32`: f32 inputs through tf32 tensor cores.
const CUBLAS_COMPUTE_32F_FAST_TF32: c_int = 77;
/// `CUBLAS_GEMM_DEFAULT`.
const CUBLAS_GEMM_DEFAULT: c_int = -1;

/// `CUDA_R_32F`, `CUDA_R_16F`, `CUDA_R_16BF` (library_types.h): the
/// `cudaDataType_t` of an element of this size and name.
fn cuda_data_type(name: &str) -> c_int {
    match name {
        "f16" => 2,
        "bf16" => 14,
        _ => 0,
    }
}

/// `CUBLAS_DEFAULT_MATH` (cublas_api.h): no TF32.
const CUBLAS_DEFAULT_MATH: c_int = 0;
/// `CUBLAS_OP_N`.
const CUBLAS_OP_N: c_int = 0;

/// The name of a `cublasStatus_t`.
pub fn status_name(status: i32) -> &'static str {
    match status {
        0 => "CUBLAS_STATUS_SUCCESS",
        1 => "CUBLAS_STATUS_NOT_INITIALIZED",
        3 => "CUBLAS_STATUS_ALLOC_FAILED",
        7 => "CUBLAS_STATUS_INVALID_VALUE",
        8 => "CUBLAS_STATUS_ARCH_MISMATCH",
        11 => "CUBLAS_STATUS_MAPPING_ERROR",
        13 => "CUBLAS_STATUS_EXECUTION_FAILED",
        14 => "CUBLAS_STATUS_INTERNAL_ERROR",
        15 => "CUBLAS_STATUS_NOT_SUPPORTED",
        16 => "CUBLAS_STATUS_LICENSE_ERROR",
        _ => "unknown cublasStatus_t",
    }
}

fn status(function: &'static str, code: c_int) -> Result<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(Error::Library {
            library: "cuBLAS",
            function,
            status: code,
            name: status_name(code),
        })
    }
}

/// A cuBLAS handle bound to a [`Gpu`]'s stream, with the library it came
/// from.
pub struct Cublas {
    device: DeviceId,
    handle: Handle,
    destroy: Destroy,
    sgemm: Sgemm,
    gemm_ex: GemmStridedBatchedEx,
    // Last: the library stays loaded until the handle is destroyed.
    lib: DynLib,
}

impl Cublas {
    /// Where libcublas is looked for, in order: `$CUDA_KERNELS_CUBLAS` (a
    /// file), the names `libcublas.so`, `.so.13`, `.so.12`, `.so.11` through
    /// the dynamic loader's search, then the same names under
    /// `/usr/local/cuda/lib64`.
    pub fn candidates() -> Vec<PathBuf> {
        let names = [
            "libcublas.so",
            "libcublas.so.13",
            "libcublas.so.12",
            "libcublas.so.11",
        ];
        let mut c: Vec<PathBuf> = std::env::var_os("CUDA_KERNELS_CUBLAS")
            .map(PathBuf::from)
            .into_iter()
            .collect();
        c.extend(names.iter().map(PathBuf::from));
        c.extend(
            names
                .iter()
                .map(|n| Path::new("/usr/local/cuda/lib64").join(n)),
        );
        c
    }

    /// Opens the first loadable candidate: the library, or why none could
    /// be opened (every candidate's `dlerror`), for a "cuBLAS missing" note.
    pub fn find() -> std::result::Result<DynLib, String> {
        let mut why = Vec::new();
        for c in Self::candidates() {
            let opened = if c.components().count() == 1 {
                DynLib::open_by_name(&c.to_string_lossy())
            } else {
                DynLib::open(&c)
            };
            match opened {
                Ok(lib) => return Ok(lib),
                Err(e) => why.push(e.to_string()),
            }
        }
        Err(why.join("; "))
    }

    /// A handle on `gpu`'s context (cuBLAS uses the current context, the
    /// primary one the [`Gpu`] holds) computing on [`Gpu::stream`], in
    /// `CUBLAS_DEFAULT_MATH` (TF32 off).
    /// GPU only ([`Error::NotOnSimulator`] on the simulator).
    pub fn new(gpu: &Gpu, lib: DynLib) -> Result<Self> {
        let stream = gpu
            .stream()
            .as_cust()
            .map_err(|_| Error::NotOnSimulator { what: "cuBLAS" })?;
        let sym = |name: &'static str| {
            lib.symbol(name)
                .map_err(|e| Error::invalid("cuBLAS", e.to_string()))
        };
        let (create, destroy, set_stream, set_math, sgemm, gemm_ex) = (
            sym("cublasCreate_v2")?,
            sym("cublasDestroy_v2")?,
            sym("cublasSetStream_v2")?,
            sym("cublasSetMathMode")?,
            sym("cublasSgemm_v2")?,
            sym("cublasGemmStridedBatchedEx")?,
        );
        // SAFETY: these are cuBLAS's exported functions, whose C signatures
        // (cublas_api.h, stable since CUDA 10) the types above spell out.
        let (create, destroy, set_stream, set_math, sgemm, gemm_ex) = unsafe {
            (
                std::mem::transmute::<*mut c_void, Create>(create),
                std::mem::transmute::<*mut c_void, Destroy>(destroy),
                std::mem::transmute::<*mut c_void, SetStream>(set_stream),
                std::mem::transmute::<*mut c_void, SetMathMode>(set_math),
                std::mem::transmute::<*mut c_void, Sgemm>(sgemm),
                std::mem::transmute::<*mut c_void, GemmStridedBatchedEx>(gemm_ex),
            )
        };
        gpu.bind()?;
        let mut handle: Handle = std::ptr::null_mut();
        // SAFETY: `handle` is a valid place for the new handle; the GPU's
        // context is current on this thread (bind above).
        status("cublasCreate_v2", unsafe { create(&mut handle) })?;
        let cublas = Self {
            device: gpu.device_id(),
            handle,
            destroy,
            sgemm,
            gemm_ex,
            lib,
        };
        // SAFETY: a live handle and the Gpu's live stream, which outlives
        // every call made through this handle (the caller holds the Gpu).
        status("cublasSetStream_v2", unsafe {
            set_stream(handle, stream.as_inner())
        })?;
        // SAFETY: a live handle and a valid cublasMath_t.
        status("cublasSetMathMode", unsafe {
            set_math(handle, CUBLAS_DEFAULT_MATH)
        })?;
        Ok(cublas)
    }

    /// The file (or name) the library was loaded from.
    pub fn path(&self) -> &Path {
        self.lib.path()
    }

    /// Whether `NVIDIA_TF32_OVERRIDE=1` would turn TF32 on behind the math
    /// mode (then the bench's cuBLAS figure would not be an f32 SGEMM).
    pub fn tf32_override() -> bool {
        std::env::var("NVIDIA_TF32_OVERRIDE").is_ok_and(|v| v.trim() == "1")
    }

    /// Queues `C = A · B` for row-major `a` (m × k), `b` (k × n), `c`
    /// (m × n) on the handle's stream (the [`Gpu`]'s), without waiting:
    /// cuBLAS is column-major, so it computes `Cᵀ = Bᵀ · Aᵀ`, which is the
    /// same memory. Lengths are checked, and each dimension must fit an
    /// `int`.
    #[allow(clippy::too_many_arguments)]
    pub fn sgemm_row_major(
        &self,
        a: &DeviceSlice<f32>,
        b: &DeviceSlice<f32>,
        c: &mut DeviceSlice<f32>,
        m: usize,
        k: usize,
        n: usize,
    ) -> Result<()> {
        const F: &str = "cublasSgemm_v2";
        let int = |v: usize, what: &str| {
            c_int::try_from(v)
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| Error::invalid(F, format!("{what} = {v}: must be in 1..=i32::MAX")))
        };
        let (mi, ki, ni) = (int(m, "m")?, int(k, "k")?, int(n, "n")?);
        check_product_buffers(F, (a.len(), b.len(), c.len()), (m, k, n))?;
        for (argument, found) in [("a", a.device()), ("b", b.device()), ("c", c.device())] {
            if found != self.device {
                return Err(Error::WrongDevice {
                    kernel: F,
                    argument,
                    expected: self.device,
                    found,
                });
            }
        }
        let ptr = |p: DevicePointer<f32>| p.as_raw() as *const f32;
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: a live handle on the current context; B (ld n), A (ld k)
        // and C (ld n) hold k·n, m·k and m·n f32 (checked above), C does not
        // alias A or B (borrowed mutably); alpha and beta are host values
        // (the default pointer mode) that live through the call, which only
        // reads them before returning.
        status(F, unsafe {
            (self.sgemm)(
                self.handle,
                CUBLAS_OP_N,
                CUBLAS_OP_N,
                ni,
                mi,
                ki,
                &alpha,
                ptr(b.as_device_ptr()),
                ni,
                ptr(a.as_device_ptr()),
                ki,
                &beta,
                ptr(c.as_device_ptr()) as *mut f32,
                ni,
            )
        })
    }
}

impl Cublas {
    /// Queues the GEMM of [`Gpu::gemm_on_device`](crate::matrices::gemm::GemmExt::gemm_on_device) (`C = alpha · op(A) ·
    /// op(B) + beta · C`, row-major, strided batches) with
    /// `cublasGemmStridedBatchedEx`: `CUBLAS_COMPUTE_32F` for bf16 and f16
    /// inputs, `CUBLAS_COMPUTE_32F_FAST_TF32` for f32 (tf32) inputs. cuBLAS
    /// is column-major: it computes `Cᵀ = op(B)ᵀ · op(A)ᵀ`, the same memory.
    /// The shape is checked as for our kernels.
    pub fn gemm_ex<I: GemmInput, O: GemmOutput<I>>(
        &self,
        shape: &GemmShape,
        alpha: f32,
        a: &DeviceSlice<I::Dev>,
        b: &DeviceSlice<I::Dev>,
        beta: f32,
        c: &mut DeviceSlice<O::Dev>,
    ) -> Result<()> {
        const F: &str = "cublasGemmStridedBatchedEx";
        shape.check(F, (a.len(), b.len(), c.len()))?;
        for (argument, found) in [("a", a.device()), ("b", b.device()), ("c", c.device())] {
            if found != self.device {
                return Err(Error::WrongDevice {
                    kernel: F,
                    argument,
                    expected: self.device,
                    found,
                });
            }
        }
        let op = |o: Op| if o == Op::N { CUBLAS_OP_N } else { CUBLAS_OP_T };
        let (ta, tc) = (cuda_data_type(I::NAME), cuda_data_type(O::NAME));
        let compute = if I::NAME == "tf32" {
            CUBLAS_COMPUTE_32F_FAST_TF32
        } else {
            CUBLAS_COMPUTE_32F
        };
        let s = shape;
        // Dimensions below 2^31 (checked): they fit an int.
        let int = |v: usize| v as c_int;
        // SAFETY: a live handle on the current context; A, B and C hold every
        // element the checked shape reaches, in the element types named; C does
        // not alias A or B (borrowed mutably); alpha and beta are host f32 (the
        // default pointer mode, the compute type's scalar type) read before the
        // call returns.
        status(F, unsafe {
            (self.gemm_ex)(
                self.handle,
                op(s.op_b),
                op(s.op_a),
                int(s.n),
                int(s.m),
                int(s.k),
                (&alpha as *const f32).cast(),
                b.as_device_ptr().as_raw() as *const c_void,
                ta,
                int(s.ldb),
                s.stride_b as i64,
                a.as_device_ptr().as_raw() as *const c_void,
                ta,
                int(s.lda),
                s.stride_a as i64,
                (&beta as *const f32).cast(),
                c.as_device_ptr().as_raw() as *mut c_void,
                tc,
                int(s.ldc),
                s.stride_c as i64,
                int(s.batches),
                compute,
                CUBLAS_GEMM_DEFAULT,
            )
        })
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        // SAFETY: the handle is live and destroyed once; the library is
        // still loaded (`lib` is dropped after this body).
        let _ = unsafe { (self.destroy)(self.handle) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_and_status_names() {
        let c = Cublas::candidates();
        assert!(c.iter().any(|p| p == Path::new("libcublas.so.12")));
        assert!(c.contains(&PathBuf::from("/usr/local/cuda/lib64/libcublas.so.13")));
        assert_eq!(status_name(7), "CUBLAS_STATUS_INVALID_VALUE");
        assert!(status("cublasSgemm_v2", 0).is_ok());
        assert!(matches!(
            status("cublasSgemm_v2", 13),
            Err(Error::Library { status: 13, .. })
        ));
    }
}
