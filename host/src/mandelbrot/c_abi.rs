//! The C ABI library `libcuda_kernels_capi.so` from the Rust side
//! (crate `capi/`, header `capi/include/cuda_kernels.h`) opened at run time
//! with `dlopen`/`dlsym`, as the seed's C program does, so that the fourth
//! launch path of the Mandelbrot seed can be run and compared from Rust.
//!
//! The status codes are defined here ([`status`]) and used by the library
//! itself, so the two cannot disagree; the C header repeats them (a test of
//! the `capi` crate checks that it does).
use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::{Path, PathBuf};

use ndarray::{Array2, ArrayView1};

use super::MAX_LATTICE_SIZE;
use crate::dynlib::{DlError, DynLib};

/// The status codes every function of the C ABI returns.
pub mod status {
    /// Success.
    pub const OK: i32 = 0;
    /// A pointer argument is null.
    pub const NULL_POINTER: i32 = -1;
    /// `lattice_size` is zero or negative, or its square overflows `int`.
    pub const BAD_SIZE: i32 = -2;
    /// No usable CUDA driver, or no CUDA device.
    pub const NO_GPU: i32 = -3;
    /// A CUDA call failed (allocation, copy, module load, launch, …).
    pub const CUDA_ERROR: i32 = -4;
    /// Another argument is invalid (a negative `max_iters`, overlapping
    /// buffers).
    pub const BAD_ARGUMENT: i32 = -5;
    /// An internal error (a Rust panic, caught at the boundary).
    pub const INTERNAL: i32 = -6;

    /// Every status code with the name `capi/include/cuda_kernels.h` gives it
    /// (`#define CK_…`), for checks that the header and the library agree.
    pub const HEADER_NAMES: [(&str, i32); 7] = [
        ("CK_OK", OK),
        ("CK_NULL_POINTER", NULL_POINTER),
        ("CK_BAD_SIZE", BAD_SIZE),
        ("CK_NO_GPU", NO_GPU),
        ("CK_CUDA_ERROR", CUDA_ERROR),
        ("CK_BAD_ARGUMENT", BAD_ARGUMENT),
        ("CK_INTERNAL", INTERNAL),
    ];

    /// A short description of a status code.
    pub fn describe(code: i32) -> &'static str {
        match code {
            OK => "ok",
            NULL_POINTER => "null pointer",
            BAD_SIZE => "bad size",
            NO_GPU => "no CUDA driver or device",
            CUDA_ERROR => "CUDA error",
            BAD_ARGUMENT => "bad argument",
            INTERNAL => "internal error",
            _ => "unknown status",
        }
    }
}

/// The library's file name.
pub const LIBRARY_NAME: &str = "libcuda_kernels_capi.so";

/// What can go wrong when calling the C ABI library.
#[derive(Debug, thiserror::Error)]
pub enum CAbiError {
    /// The library or one of its symbols could not be loaded.
    #[error(transparent)]
    Load(#[from] DlError),
    /// A function returned a non-zero status.
    #[error("{function} returned {status} ({}): {message}", status::describe(*status))]
    Status {
        /// The function.
        function: &'static str,
        /// Its status code (see [`status`]).
        status: i32,
        /// `cuda_kernels_last_error()`.
        message: String,
    },
    /// The input cannot even be passed (a lattice longer than `int`).
    #[error("{0}")]
    Invalid(String),
}

type LaunchMandelbrot = unsafe extern "C" fn(*const f32, *mut f32, c_int, f32, c_int) -> c_int;
type LaunchHello = unsafe extern "C" fn() -> c_int;
type Reset = unsafe extern "C" fn() -> c_int;
type LastError = unsafe extern "C" fn() -> *const c_char;
type StatusString = unsafe extern "C" fn(c_int) -> *const c_char;

/// The loaded library and its entry points.
pub struct CAbiLibrary {
    lib: DynLib,
    launch_mandelbrot: LaunchMandelbrot,
    launch_hello: LaunchHello,
    reset: Reset,
    last_error: LastError,
    status_string: StatusString,
}

// SAFETY: the library's functions may be called from any thread (its state is
// behind a mutex and its error message is thread-local); the handle (DynLib)
// is Send and Sync.
unsafe impl Send for CAbiLibrary {}
// SAFETY: as above.
unsafe impl Sync for CAbiLibrary {}

impl CAbiLibrary {
    /// Where the library is looked for, in order: `$CUDA_KERNELS_CAPI` (a
    /// file), then [`LIBRARY_NAME`] next to the running executable, in its
    /// parent folder (test binaries live in `target/<profile>/deps`), in
    /// `target/release` and `target/debug` under the current folder.
    pub fn candidates() -> Vec<PathBuf> {
        let mut c = Vec::new();
        if let Some(p) = std::env::var_os("CUDA_KERNELS_CAPI") {
            c.push(PathBuf::from(p));
        }
        if let Ok(exe) = std::env::current_exe() {
            let mut dir = exe.parent().map(Path::to_path_buf);
            for _ in 0..2 {
                if let Some(d) = dir {
                    c.push(d.join(LIBRARY_NAME));
                    dir = d.parent().map(Path::to_path_buf);
                }
            }
        }
        for profile in ["release", "debug"] {
            c.push(Path::new("target").join(profile).join(LIBRARY_NAME));
        }
        c
    }

    /// The first of [`CAbiLibrary::candidates`] that exists.
    pub fn find() -> Option<PathBuf> {
        Self::candidates().into_iter().find(|p| p.is_file())
    }

    /// `dlopen`s the library at `path` and looks up `launch_mandelbrot`,
    /// `launch_hello`, `cuda_kernels_reset`, `cuda_kernels_last_error` and
    /// `cuda_kernels_status_string`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CAbiError> {
        let lib = DynLib::open(path)?;
        let (m, h, r, e, st) = (
            lib.symbol("launch_mandelbrot")?,
            lib.symbol("launch_hello")?,
            lib.symbol("cuda_kernels_reset")?,
            lib.symbol("cuda_kernels_last_error")?,
            lib.symbol("cuda_kernels_status_string")?,
        );
        // SAFETY: the symbols are the library's exported functions with exactly
        // these C signatures (capi/include/cuda_kernels.h).
        let (launch_mandelbrot, launch_hello, reset, last_error, status_string) = unsafe {
            (
                std::mem::transmute::<*mut c_void, LaunchMandelbrot>(m),
                std::mem::transmute::<*mut c_void, LaunchHello>(h),
                std::mem::transmute::<*mut c_void, Reset>(r),
                std::mem::transmute::<*mut c_void, LastError>(e),
                std::mem::transmute::<*mut c_void, StatusString>(st),
            )
        };
        Ok(Self {
            lib,
            launch_mandelbrot,
            launch_hello,
            reset,
            last_error,
            status_string,
        })
    }

    /// The library's path.
    pub fn path(&self) -> &Path {
        self.lib.path()
    }

    /// `launch_mandelbrot` on an ndarray lattice (the seed's Python
    /// `mandelbrot()` does the same with NumPy): returns the graph.
    pub fn mandelbrot(
        &self,
        lattice: ArrayView1<f32>,
        max_iters: i32,
        upper_bound: f32,
    ) -> Result<Array2<f32>, CAbiError> {
        let n = lattice.len();
        if n > MAX_LATTICE_SIZE {
            return Err(CAbiError::Invalid(format!(
                "lattice size {n}: its square overflows int"
            )));
        }
        let lattice = crate::util::contiguous(&lattice);
        let mut graph = vec![0.0f32; n * n];
        // SAFETY: lattice holds n f32 and graph n² f32, and they do not overlap.
        let code = unsafe {
            self.launch_mandelbrot_raw(
                lattice.as_ptr(),
                graph.as_mut_ptr(),
                max_iters,
                upper_bound,
                n as c_int,
            )
        };
        self.status("launch_mandelbrot", code)?;
        Array2::from_shape_vec((n, n), graph).map_err(|e| CAbiError::Invalid(e.to_string()))
    }

    /// `launch_mandelbrot` exactly as C sees it, for tests of bad input.
    ///
    /// # Safety
    /// Non-null pointers must be valid for `lattice_size` (`lattice`) and
    /// `lattice_size²` (`graph`) f32 when `lattice_size` is positive.
    pub unsafe fn launch_mandelbrot_raw(
        &self,
        lattice: *const f32,
        graph: *mut f32,
        max_iters: i32,
        upper_bound: f32,
        lattice_size: i32,
    ) -> i32 {
        // SAFETY: forwarded to the caller's guarantee.
        unsafe { (self.launch_mandelbrot)(lattice, graph, max_iters, upper_bound, lattice_size) }
    }

    /// `launch_hello`: the seed's kernel on <<<1, 3>>> (three lines on
    /// stdout).
    pub fn hello(&self) -> Result<(), CAbiError> {
        // SAFETY: takes no arguments.
        let code = unsafe { (self.launch_hello)() };
        self.status("launch_hello", code)
    }

    /// The cost of one call across the C ABI against the same work as a
    /// direct Rust call, in nanoseconds per call, over `calls` calls each:
    /// `cuda_kernels_status_string` through the `dlsym`'d pointer versus
    /// [`status::describe`] (both map a status code to a static string).
    pub fn call_overhead_ns(&self, calls: usize) -> (f64, f64) {
        let calls = calls.max(1);
        let t = std::time::Instant::now();
        for i in 0..calls {
            let code = std::hint::black_box(-(i as c_int & 7));
            // SAFETY: takes an int and returns a pointer to a static C string.
            std::hint::black_box(unsafe { (self.status_string)(code) });
        }
        let through_c = t.elapsed().as_secs_f64() * 1e9 / calls as f64;
        let t = std::time::Instant::now();
        for i in 0..calls {
            let code = std::hint::black_box(-(i as c_int & 7));
            std::hint::black_box(status::describe(code));
        }
        let direct = t.elapsed().as_secs_f64() * 1e9 / calls as f64;
        (through_c, direct)
    }

    /// The first status code (of every defined one and one undefined) whose
    /// `cuda_kernels_status_string` differs from [`status::describe`], the
    /// result [`CAbiLibrary::call_overhead_ns`] times; `None` when all agree.
    pub fn first_status_string_mismatch(&self) -> Option<i32> {
        status::HEADER_NAMES
            .iter()
            .map(|&(_, code)| code)
            .chain([-99])
            .find(|&code| {
                // SAFETY: takes an int and returns a pointer to a static,
                // NUL-terminated C string, read at once.
                let s = unsafe { CStr::from_ptr((self.status_string)(code)) };
                s.to_str().ok() != Some(status::describe(code))
            })
    }

    /// `cuda_kernels_reset()`: the library releases its GPU (it opens it
    /// again on the next call). Dropping a `CAbiLibrary` does this too.
    pub fn reset(&self) -> Result<(), CAbiError> {
        // SAFETY: takes no arguments.
        let code = unsafe { (self.reset)() };
        self.status("cuda_kernels_reset", code)
    }

    /// `cuda_kernels_last_error()`: the message of this thread's last failed
    /// call ("" if none).
    pub fn last_error(&self) -> String {
        // SAFETY: the function returns a NUL-terminated string that stays valid
        // until the next call into the library on this thread; it is copied at once.
        unsafe {
            let p = (self.last_error)();
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        }
    }

    fn status(&self, function: &'static str, code: i32) -> Result<(), CAbiError> {
        if code == status::OK {
            Ok(())
        } else {
            Err(CAbiError::Status {
                function,
                status: code,
                message: self.last_error(),
            })
        }
    }
}

impl Drop for CAbiLibrary {
    /// Releases the library's GPU (`cuda_kernels_reset`, so that nothing it
    /// allocated outlives this handle); the `DynLib` field then `dlclose`s
    /// it.
    fn drop(&mut self) {
        // SAFETY: takes no arguments; the library is still loaded (the
        // DynLib field is dropped after this body).
        let _ = unsafe { (self.reset)() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_is_a_load_error() {
        match CAbiLibrary::open("/nonexistent/libcuda_kernels_capi.so") {
            Err(CAbiError::Load(DlError::Load { reason, .. })) => assert!(!reason.is_empty()),
            Err(e) => panic!("expected Load, got {e}"),
            Ok(_) => panic!("opened a library that does not exist"),
        }
    }

    #[test]
    fn status_codes_are_distinct() {
        use status::*;
        let codes = [
            OK,
            NULL_POINTER,
            BAD_SIZE,
            NO_GPU,
            CUDA_ERROR,
            BAD_ARGUMENT,
            INTERNAL,
        ];
        for (i, a) in codes.iter().enumerate() {
            assert!(codes[i + 1..].iter().all(|b| a != b));
            assert_ne!(describe(*a), "unknown status");
        }
    }
}
