//! `libcuda_kernels_capi.so`, the C ABI of `cuda-kernels`, declared in
//! `capi/include/cuda_kernels.h`.
//!
//! - `launch_mandelbrot(lattice, graph, max_iters, upper_bound,
//!   lattice_size)`: the Mandelbrot host wrapper (allocate, copy in, launch
//!   `mandelbrot_ker` with blocks of 32, copy out, free), called from Python
//!   with ctypes (`examples/python/mandelbrot_ctypes.py`) and from C;
//! - `launch_hello()`: the hello kernel on <<<1, 3>>>, called from C
//!   through `dlopen`/`dlsym` (`examples/c/hello_dlopen.c`);
//! - `cuda_kernels_reset()`: releases the GPU the library holds (as
//!   `cudaDeviceReset()` does); the next call opens it again;
//! - `cuda_kernels_last_error()`, `cuda_kernels_status_string(status)`.
//!
//! Every function returns a status code
//! ([`cuda_kernels::mandelbrot::c_abi::status`]); arguments are checked
//! before the GPU is touched; panics are caught at the boundary and never
//! unwind into the caller. The GPU (device 0 with the embedded PTX) is
//! opened by the first call and kept, as the CUDA runtime keeps its primary
//! context in the seed's `.so`; after a CUDA failure it is dropped and the
//! next call opens it again.
#![warn(missing_docs)]
use std::cell::RefCell;
use std::ffi::{CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use cuda_kernels::mandelbrot::MAX_LATTICE_SIZE;
use cuda_kernels::mandelbrot::c_abi::status;
use cuda_kernels::prelude::*;
use cuda_kernels::{Error, Gpu};

/// The GPU, opened by the first call that needs it.
static GPU: Mutex<Option<Gpu>> = Mutex::new(None);

thread_local! {
    /// The message of this thread's last failed call.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// A failure: the status code and the message for `cuda_kernels_last_error`.
type Failure = (c_int, String);

/// The Mandelbrot set of a lattice into a graph; see `cuda_kernels.h`.
///
/// # Safety
/// When non-null, `lattice` must be valid for reading `lattice_size` floats
/// and `mandelbrot_graph` for writing `lattice_size²` floats (when
/// `lattice_size` is positive). Null pointers, bad sizes, misaligned or
/// overlapping buffers are refused with a status code.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn launch_mandelbrot(
    lattice: *const f32,
    mandelbrot_graph: *mut f32,
    max_iters: c_int,
    upper_bound: f32,
    lattice_size: c_int,
) -> c_int {
    guarded(|| {
        if lattice.is_null() || mandelbrot_graph.is_null() {
            return Err((
                status::NULL_POINTER,
                "launch_mandelbrot: lattice or mandelbrot_graph is NULL".into(),
            ));
        }
        if lattice_size <= 0 || lattice_size as usize > MAX_LATTICE_SIZE {
            return Err((
                status::BAD_SIZE,
                format!(
                    "launch_mandelbrot: lattice_size = {lattice_size}: it must be in 1..={MAX_LATTICE_SIZE} \
                     (its square must fit in int)"
                ),
            ));
        }
        if max_iters < 0 {
            return Err((
                status::BAD_ARGUMENT,
                format!("launch_mandelbrot: max_iters = {max_iters} is negative"),
            ));
        }
        let n = lattice_size as usize;
        let points = n * n;
        if !lattice.is_aligned() || !mandelbrot_graph.is_aligned() {
            return Err((
                status::BAD_ARGUMENT,
                "launch_mandelbrot: a buffer is not aligned for float".into(),
            ));
        }
        let (l0, l1) = (lattice as usize, lattice as usize + n * 4);
        let (g0, g1) = (
            mandelbrot_graph as usize,
            mandelbrot_graph as usize + points * 4,
        );
        if l0 < g1 && g0 < l1 {
            return Err((
                status::BAD_ARGUMENT,
                "launch_mandelbrot: lattice and mandelbrot_graph overlap".into(),
            ));
        }
        // SAFETY: non-null, aligned, not overlapping (checked above), and valid
        // for n and n² floats by the caller's contract.
        let (lattice, graph) = unsafe {
            (
                std::slice::from_raw_parts(lattice, n),
                std::slice::from_raw_parts_mut(mandelbrot_graph, points),
            )
        };
        with_gpu(|gpu| gpu.mandelbrot_into(lattice, graph, max_iters, upper_bound))
    })
}

/// Launches the hello kernel on `<<<1, 3>>>`; see `cuda_kernels.h`.
#[unsafe(no_mangle)]
pub extern "C" fn launch_hello() -> c_int {
    guarded(|| with_gpu(|gpu| gpu.hello(1, 3, false)))
}

/// Releases the GPU the library holds (its module, stream and its reference
/// to the primary context), as `cudaDeviceReset()` ends a C program; the
/// next call opens the GPU again. Always `CK_OK`.
#[unsafe(no_mangle)]
pub extern "C" fn cuda_kernels_reset() -> c_int {
    guarded(|| {
        let gpu = GPU
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        drop(gpu);
        Ok(())
    })
}

/// The calling thread's last error message ("" if none); see
/// `cuda_kernels.h`.
#[unsafe(no_mangle)]
pub extern "C" fn cuda_kernels_last_error() -> *const c_char {
    // The CString lives in this thread's storage until the next call replaces it.
    LAST_ERROR
        .try_with(|e| e.borrow().as_ptr())
        .unwrap_or(c"thread is exiting".as_ptr())
}

/// A static description of a status code; see `cuda_kernels.h`.
#[unsafe(no_mangle)]
pub extern "C" fn cuda_kernels_status_string(status: c_int) -> *const c_char {
    match status {
        status::OK => c"ok",
        status::NULL_POINTER => c"null pointer",
        status::BAD_SIZE => c"bad size",
        status::NO_GPU => c"no CUDA driver or device",
        status::CUDA_ERROR => c"CUDA error",
        status::BAD_ARGUMENT => c"bad argument",
        status::INTERNAL => c"internal error",
        _ => c"unknown status",
    }
    .as_ptr()
}

/// Runs `body`, records its error message, catches panics.
fn guarded(body: impl FnOnce() -> Result<(), Failure>) -> c_int {
    set_last_error(String::new());
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => status::OK,
        Ok(Err((code, message))) => {
            set_last_error(message);
            code
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            set_last_error(format!("internal error: {what}"));
            status::INTERNAL
        }
    }
}

/// Runs `f` on the shared GPU, opening it first if needed.
fn with_gpu<T>(f: impl FnOnce(&Gpu) -> cuda_kernels::Result<T>) -> Result<T, Failure> {
    let mut slot = GPU.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let gpu = match slot.take() {
        Some(gpu) => gpu,
        None => cuda_kernels::cuda_gpu().map_err(failure)?,
    };
    let result = f(&gpu);
    // A CUDA failure may leave the context unusable: open a fresh one next time.
    if !matches!(result, Err(Error::Cuda { .. })) {
        *slot = Some(gpu);
    }
    result.map_err(failure)
}

/// The status code and message of a crate error.
fn failure(e: Error) -> Failure {
    let code = match &e {
        Error::NoDriver { .. } | Error::NoDevice { .. } => status::NO_GPU,
        Error::InvalidInput { .. } => status::BAD_ARGUMENT,
        _ => status::CUDA_ERROR,
    };
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        message.push_str(&format!(": {s}"));
        source = s.source();
    }
    (code, message)
}

fn set_last_error(message: String) {
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = c);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    const HEADER: &str = include_str!("../include/cuda_kernels.h");

    fn last_error() -> String {
        // SAFETY: the function returns a valid C string owned by this thread.
        unsafe { CStr::from_ptr(cuda_kernels_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn header_status_codes_match() {
        for (name, value) in status::HEADER_NAMES {
            let line = HEADER
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("{name} is not in the header"));
            let defined: String = line[8 + name.len()..]
                .split("/*")
                .next()
                .unwrap_or("")
                .chars()
                .filter(|c| !c.is_whitespace() && *c != '(' && *c != ')')
                .collect();
            assert_eq!(defined.parse::<i32>().ok(), Some(value), "{line}");
        }
        for f in [
            "launch_mandelbrot(",
            "launch_hello(",
            "cuda_kernels_reset(",
            "cuda_kernels_last_error(",
            "cuda_kernels_status_string(",
        ] {
            assert!(HEADER.contains(f), "{f} is not declared in the header");
        }
    }

    #[test]
    fn bad_input_gets_status_codes_without_a_gpu() {
        let lattice = [0.0f32; 4];
        let mut graph = [0.0f32; 16];
        let l = lattice.as_ptr();
        let g = graph.as_mut_ptr();
        // SAFETY: the pointers are valid for 4 and 16 floats (or null); every
        // call below is refused before anything is read or written.
        unsafe {
            assert_eq!(
                launch_mandelbrot(std::ptr::null(), g, 256, 2.0, 4),
                status::NULL_POINTER
            );
            assert!(last_error().contains("NULL"));
            assert_eq!(
                launch_mandelbrot(l, std::ptr::null_mut(), 256, 2.0, 4),
                status::NULL_POINTER
            );
            assert_eq!(launch_mandelbrot(l, g, 256, 2.0, 0), status::BAD_SIZE);
            assert_eq!(launch_mandelbrot(l, g, 256, 2.0, -3), status::BAD_SIZE);
            assert_eq!(launch_mandelbrot(l, g, 256, 2.0, 46_341), status::BAD_SIZE);
            assert!(last_error().contains("46341"));
            assert_eq!(launch_mandelbrot(l, g, -1, 2.0, 4), status::BAD_ARGUMENT);
            // graph overlapping lattice
            assert_eq!(
                launch_mandelbrot(g.add(2) as *const f32, g, 256, 2.0, 2),
                status::BAD_ARGUMENT
            );
        }
        assert_eq!(graph, [0.0; 16], "nothing was written");
    }

    #[test]
    fn reset_without_a_gpu_is_ok() {
        assert_eq!(cuda_kernels_reset(), status::OK);
        assert_eq!(cuda_kernels_reset(), status::OK);
    }

    #[test]
    fn status_strings() {
        for code in [0, -1, -2, -3, -4, -5, -6] {
            // SAFETY: static C strings.
            let s = unsafe { CStr::from_ptr(cuda_kernels_status_string(code)) };
            assert_eq!(s.to_str().ok(), Some(status::describe(code)));
        }
    }
}
