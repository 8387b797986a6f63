//! Seed 002's third path: the raw CUDA driver API, call by call, as the
//! seed's `cuda_driver.py` / `mandelbrot_driver.py` do it through ctypes:
//! `cuInit`, `cuDeviceGetCount` (an error when 0), `cuDeviceGet`,
//! `cuCtxCreate`, `cuModuleLoad` (from a file; `cuModuleLoadData` for PTX
//! text), `cuModuleGetFunction`, `cuMemAlloc`, `cuMemcpyHtoD`,
//! `cuLaunchKernel` with a `void**` array of pointers to the arguments,
//! `cuCtxSynchronize`, `cuMemcpyDtoH`, `cuMemFree`, `cuModuleUnload`,
//! `cuCtxDestroy`.
//!
//! Nothing of `cust` is used but its FFI declarations ([`cust::sys`]): every
//! `CUresult` is checked and turned into the crate's [`Error`], and every
//! resource is owned by a guard, so an error at any step frees what the
//! earlier steps made (device memory, then the module, then the context).
//! The seed creates and destroys a context on every call; so does this path,
//! which makes it the slowest of the four (see the benchmark).
use std::ffi::{CString, c_void};
use std::path::Path;
use std::ptr;
use std::time::Instant;

use cust::error::CudaError;
use cust::sys::{self as cu, CUcontext, CUdeviceptr, CUfunction, CUmodule, CUresult};
use ndarray::{Array2, ArrayView1};

use super::{BLOCK, KERNEL, check_launch};
use crate::error::{Error, Result, cuda_error};
use crate::image::ptx_summary;
use crate::util::contiguous;

/// The name errors of this path carry.
const K: &str = "mandelbrot_ker (driver API)";

/// Where the driver-API path gets its PTX.
#[derive(Debug, Clone, Copy)]
pub enum PtxSource<'a> {
    /// A PTX file, loaded with `cuModuleLoad` (the seed's way).
    File(&'a Path),
    /// PTX text, loaded with `cuModuleLoadData`.
    Text(&'a str),
}

/// Wall-clock phases of one driver-API run, in milliseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct DriverApiTiming {
    /// `cuInit` … `cuModuleGetFunction` (context creation and the module's
    /// JIT compilation dominate).
    pub setup_ms: f64,
    /// `cuMemAlloc` … `cuMemcpyDtoH`: allocate, copy in, launch,
    /// synchronize, copy out.
    pub run_ms: f64,
    /// `cuMemFree`, `cuModuleUnload`, `cuCtxDestroy`.
    pub teardown_ms: f64,
}

/// The Mandelbrot graph through the raw driver API (see the module docs):
/// same arguments and result as [`Gpu::mandelbrot`](crate::mandelbrot::MandelbrotExt::mandelbrot), with the PTX
/// from `ptx`.
///
/// Errors: invalid sizes as [`check_launch`] (before any driver call); a
/// missing or unreadable PTX file, [`Error::PtxFile`]; no driver or no
/// device, [`Error::NoDriver`]/[`Error::NoDevice`]; PTX the driver refuses,
/// [`Error::ModuleLoad`]; a module without `mandelbrot_ker`,
/// [`Error::KernelNotFound`]; any other failing call, [`Error::Cuda`] naming
/// the call.
pub fn mandelbrot_driver_api(
    ptx: PtxSource<'_>,
    lattice: ArrayView1<f32>,
    max_iters: i32,
    upper_bound: f32,
) -> Result<Array2<f32>> {
    mandelbrot_driver_api_timed(ptx, lattice, max_iters, upper_bound).map(|(g, _)| g)
}

/// [`mandelbrot_driver_api`] with the wall-clock time of each phase.
pub fn mandelbrot_driver_api_timed(
    ptx: PtxSource<'_>,
    lattice: ArrayView1<f32>,
    max_iters: i32,
    upper_bound: f32,
) -> Result<(Array2<f32>, DriverApiTiming)> {
    let shape = check_launch(K, lattice.len(), max_iters, upper_bound, BLOCK)?;
    let lattice = contiguous(&lattice);
    // The PTX as a C string, before any driver call.
    let (c_source, from_file) = match ptx {
        PtxSource::File(path) => {
            std::fs::metadata(path).map_err(|source| Error::PtxFile {
                path: path.to_path_buf(),
                source,
            })?;
            (path_to_cstring(path)?, true)
        }
        PtxSource::Text(text) => {
            let text = CString::new(text)
                .map_err(|_| Error::invalid(K, "the PTX text contains a NUL byte"))?;
            (text, false)
        }
    };
    let t0 = Instant::now();

    // SAFETY: cuInit takes a flags word (0) and no pointers.
    let r = unsafe { cu::cuInit(0) };
    if r != CUresult::CUDA_SUCCESS {
        let e = cuda_error(r);
        return Err(if e == CudaError::NoDevice {
            Error::NoDevice {
                reason: format!("cuInit: {e}"),
            }
        } else {
            Error::NoDriver {
                reason: format!("cuInit: {e}"),
            }
        });
    }
    let mut count = 0;
    // SAFETY: `count` is a live local c_int the driver writes.
    check(
        unsafe { cu::cuDeviceGetCount(&mut count) },
        "cuDeviceGetCount",
    )?;
    if count == 0 {
        return Err(Error::NoDevice {
            reason: "cuDeviceGetCount: 0 devices".into(),
        });
    }
    let mut device = 0;
    // SAFETY: `device` is a live local CUdevice the driver writes; ordinal 0 < count.
    check(unsafe { cu::cuDeviceGet(&mut device, 0) }, "cuDeviceGet")?;
    let mut raw_ctx: CUcontext = ptr::null_mut();
    // SAFETY: `raw_ctx` is a live local the driver writes; `device` came from cuDeviceGet.
    check(
        unsafe { cu::cuCtxCreate_v2(&mut raw_ctx, 0, device) },
        "cuCtxCreate",
    )?;
    // From here on the context is current on this thread and owned by `ctx`.
    let ctx = ContextGuard(raw_ctx);

    let mut raw_module: CUmodule = ptr::null_mut();
    let r = if from_file {
        // SAFETY: `raw_module` is a live local; `c_source` is a NUL-terminated
        // path; the context created above is current.
        unsafe { cu::cuModuleLoad(&mut raw_module, c_source.as_ptr()) }
    } else {
        // SAFETY: as above, with NUL-terminated PTX text as the image.
        unsafe { cu::cuModuleLoadData(&mut raw_module, c_source.as_ptr() as *const c_void) }
    };
    if r != CUresult::CUDA_SUCCESS {
        let source = cuda_error(r);
        let details = match ptx {
            PtxSource::File(path) => match std::fs::read_to_string(path) {
                Ok(t) => format!("{}: {}", path.display(), ptx_summary(&t)),
                Err(e) => format!("{}: {e}", path.display()),
            },
            PtxSource::Text(t) => ptx_summary(t),
        };
        return Err(Error::ModuleLoad { details, source });
    }
    let module = ModuleGuard(raw_module);

    let name = CString::new(KERNEL).map_err(|_| Error::invalid(K, "kernel name"))?;
    let mut function: CUfunction = ptr::null_mut();
    // SAFETY: `function` is a live local; the module is alive (guard); the name
    // is NUL-terminated.
    let r = unsafe { cu::cuModuleGetFunction(&mut function, module.0, name.as_ptr()) };
    if r == CUresult::CUDA_ERROR_NOT_FOUND {
        return Err(Error::not_found(KERNEL));
    }
    check(r, "cuModuleGetFunction")?;
    let t1 = Instant::now();

    let lattice_bytes = std::mem::size_of_val(&lattice[..]);
    let graph_bytes = shape.points * std::mem::size_of::<f32>();
    let d_lattice = DeviceMemory::alloc(lattice_bytes)?;
    let d_graph = DeviceMemory::alloc(graph_bytes)?;
    // SAFETY: d_lattice holds lattice_bytes; the host slice is lattice_bytes long.
    check(
        unsafe {
            cu::cuMemcpyHtoD_v2(
                d_lattice.0,
                lattice.as_ptr() as *const c_void,
                lattice_bytes,
            )
        },
        "cuMemcpyHtoD",
    )?;

    // The kernel's arguments, and the `void**` array of pointers to them.
    let mut arg_lattice: CUdeviceptr = d_lattice.0;
    let mut arg_graph: CUdeviceptr = d_graph.0;
    let mut arg_max_iters: i32 = shape.max_iters;
    let mut arg_upper_bound_squared: f32 = shape.upper_bound_squared;
    let mut arg_lattice_size: i32 = shape.lattice_size;
    let mut params: [*mut c_void; 5] = [
        &mut arg_lattice as *mut CUdeviceptr as *mut c_void,
        &mut arg_graph as *mut CUdeviceptr as *mut c_void,
        &mut arg_max_iters as *mut i32 as *mut c_void,
        &mut arg_upper_bound_squared as *mut f32 as *mut c_void,
        &mut arg_lattice_size as *mut i32 as *mut c_void,
    ];
    // SAFETY: `function` is mandelbrot_ker of the loaded module; the five
    // pointers point to locals of exactly the kernel's parameter types
    // (u64 device pointer ×2, i32, f32, i32) that outlive the call (the
    // driver copies them at launch); the shape was checked (lattice_size² ≤
    // i32::MAX, grid × block < 2^32), d_lattice holds lattice_size f32 and
    // d_graph lattice_size² f32, not overlapping.
    check(
        unsafe {
            cu::cuLaunchKernel(
                function,
                shape.grid,
                1,
                1,
                shape.block,
                1,
                1,
                0,
                ptr::null_mut(),
                params.as_mut_ptr(),
                ptr::null_mut(),
            )
        },
        "cuLaunchKernel",
    )?;
    // SAFETY: no arguments; our context is current.
    check(unsafe { cu::cuCtxSynchronize() }, "cuCtxSynchronize")?;
    let mut graph = vec![0.0f32; shape.points];
    // SAFETY: `graph` and d_graph both hold graph_bytes; the kernel has finished.
    check(
        unsafe { cu::cuMemcpyDtoH_v2(graph.as_mut_ptr() as *mut c_void, d_graph.0, graph_bytes) },
        "cuMemcpyDtoH",
    )?;
    let t2 = Instant::now();

    // Orderly teardown, every result checked (the guards only act on errors).
    d_graph.free()?;
    d_lattice.free()?;
    module.unload()?;
    ctx.destroy()?;
    let t3 = Instant::now();

    let n = shape.lattice_size as usize;
    let graph = Array2::from_shape_vec((n, n), graph)
        .map_err(|e| Error::invalid(K, format!("graph shape: {e}")))?;
    let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
    Ok((
        graph,
        DriverApiTiming {
            setup_ms: ms(t0, t1),
            run_ms: ms(t1, t2),
            teardown_ms: ms(t2, t3),
        },
    ))
}

/// A path as the C string `cuModuleLoad` wants (its bytes, on Unix).
fn path_to_cstring(path: &Path) -> Result<CString> {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = path.to_string_lossy().into_owned().into_bytes();
    CString::new(bytes).map_err(|_| {
        Error::invalid(
            K,
            format!("the PTX path {} contains a NUL byte", path.display()),
        )
    })
}

/// `Ok` for `CUDA_SUCCESS`, else [`Error::Cuda`] naming the call.
fn check(r: CUresult, operation: &'static str) -> Result<()> {
    crate::error::check_driver(r, K, operation)
}

/// Owns a context made by `cuCtxCreate`; destroys it on drop (errors then
/// ignored: the path is already failing).
struct ContextGuard(CUcontext);

impl ContextGuard {
    /// `cuCtxDestroy`, checked.
    fn destroy(self) -> Result<()> {
        let ctx = self.0;
        std::mem::forget(self);
        // SAFETY: `ctx` came from cuCtxCreate and is destroyed exactly once.
        check(unsafe { cu::cuCtxDestroy_v2(ctx) }, "cuCtxDestroy")
    }
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        // SAFETY: as in `destroy`; this runs only when `destroy` did not.
        let _ = unsafe { cu::cuCtxDestroy_v2(self.0) };
    }
}

/// Owns a module made by `cuModuleLoad`/`cuModuleLoadData`.
struct ModuleGuard(CUmodule);

impl ModuleGuard {
    /// `cuModuleUnload`, checked.
    fn unload(self) -> Result<()> {
        let module = self.0;
        std::mem::forget(self);
        // SAFETY: `module` was loaded in the current context and is unloaded once.
        check(unsafe { cu::cuModuleUnload(module) }, "cuModuleUnload")
    }
}

impl Drop for ModuleGuard {
    fn drop(&mut self) {
        // SAFETY: as in `unload`; this runs only when `unload` did not.
        let _ = unsafe { cu::cuModuleUnload(self.0) };
    }
}

/// Owns device memory from `cuMemAlloc`.
struct DeviceMemory(CUdeviceptr);

impl DeviceMemory {
    /// `cuMemAlloc` of `bytes` (at least 1: the launch checks exclude 0).
    fn alloc(bytes: usize) -> Result<Self> {
        let mut ptr: CUdeviceptr = 0;
        // SAFETY: `ptr` is a live local the driver writes.
        check(unsafe { cu::cuMemAlloc_v2(&mut ptr, bytes) }, "cuMemAlloc")?;
        Ok(Self(ptr))
    }

    /// `cuMemFree`, checked.
    fn free(self) -> Result<()> {
        let ptr = self.0;
        std::mem::forget(self);
        // SAFETY: `ptr` came from cuMemAlloc and is freed once.
        check(unsafe { cu::cuMemFree_v2(ptr) }, "cuMemFree")
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // SAFETY: as in `free`; this runs only when `free` did not.
        let _ = unsafe { cu::cuMemFree_v2(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_results_map_to_cust_errors() {
        assert_eq!(
            cuda_error(CUresult::CUDA_ERROR_NO_DEVICE),
            CudaError::NoDevice
        );
        assert_eq!(
            cuda_error(CUresult::CUDA_ERROR_NOT_FOUND),
            CudaError::NotFound
        );
        assert_eq!(
            cuda_error(CUresult::CUDA_ERROR_LAUNCH_FAILED),
            CudaError::LaunchFailed
        );
        assert_eq!(
            cuda_error(CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION),
            CudaError::UnknownError
        );
    }

    #[test]
    fn bad_input_fails_before_the_driver() {
        let empty = ndarray::Array1::<f32>::zeros(0);
        let r = mandelbrot_driver_api(PtxSource::Text(""), empty.view(), 256, 2.0);
        assert!(matches!(r, Err(Error::InvalidInput { .. })), "{r:?}");
        let lattice = ndarray::Array1::<f32>::zeros(4);
        let r = mandelbrot_driver_api(
            PtxSource::File(Path::new("/nonexistent/kernels.ptx")),
            lattice.view(),
            256,
            2.0,
        );
        assert!(matches!(r, Err(Error::PtxFile { .. })), "{r:?}");
        let r = mandelbrot_driver_api(PtxSource::Text("a\0b"), lattice.view(), 256, 2.0);
        assert!(matches!(r, Err(Error::InvalidInput { .. })), "{r:?}");
    }
}
