//! A shared library opened at run time with `dlopen`, its symbols looked up
//! with `dlsym`, closed on drop: what the catalogue's C ABI library
//! (`mandelbrot::c_abi`) and cuBLAS (`cublas`) are loaded with.
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};

// glibc (2.34 and later: in libc itself) — declared here rather than adding a
// dependency for four functions.
unsafe extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlclose(handle: *mut c_void) -> c_int;
    fn dlerror() -> *mut c_char;
}
const RTLD_NOW: c_int = 2;

/// Why a library or one of its symbols could not be loaded.
#[derive(Debug)]
pub enum DlError {
    /// `dlopen` failed.
    Load {
        /// The library.
        path: PathBuf,
        /// `dlerror()`.
        reason: String,
    },
    /// A symbol is missing.
    Symbol {
        /// The library.
        path: PathBuf,
        /// The symbol.
        symbol: &'static str,
        /// `dlerror()`.
        reason: String,
    },
}

impl std::fmt::Display for DlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DlError::Load { path, reason } => {
                write!(f, "cannot load {}: {reason}", path.display())
            }
            DlError::Symbol {
                path,
                symbol,
                reason,
            } => write!(f, "{} has no symbol `{symbol}`: {reason}", path.display()),
        }
    }
}

impl std::error::Error for DlError {}

/// A `dlopen` handle, `dlclose`d on drop.
#[derive(Debug)]
pub struct DynLib {
    handle: *mut c_void,
    path: PathBuf,
}

// SAFETY: the handle is only passed to dlsym (thread-safe) and, once, to
// dlclose on drop.
unsafe impl Send for DynLib {}
// SAFETY: as above.
unsafe impl Sync for DynLib {}

impl DynLib {
    /// Opens the file at `path` (a bare file name is taken relative to the
    /// current folder, not searched for in the system's paths).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, DlError> {
        let path = path.as_ref().to_path_buf();
        let explicit = if path.components().count() == 1 {
            Path::new(".").join(&path)
        } else {
            path.clone()
        };
        Self::open_raw(&explicit.to_string_lossy(), path)
    }

    /// Opens a library by its name (`libcublas.so.12`), searched for the way
    /// the dynamic loader searches (`LD_LIBRARY_PATH`, the loader cache,
    /// the system folders).
    pub fn open_by_name(name: &str) -> Result<Self, DlError> {
        Self::open_raw(name, PathBuf::from(name))
    }

    fn open_raw(name: &str, path: PathBuf) -> Result<Self, DlError> {
        let c_name = CString::new(name).map_err(|_| DlError::Load {
            path: path.clone(),
            reason: "the path contains a NUL byte".into(),
        })?;
        // SAFETY: c_name is a valid C string; loading runs the library's
        // initializers (none beyond its runtime's for the libraries opened
        // here: our Rust cdylib and NVIDIA's cuBLAS).
        let handle = unsafe { dlopen(c_name.as_ptr(), RTLD_NOW) };
        if handle.is_null() {
            return Err(DlError::Load {
                path,
                reason: last_dl_error(),
            });
        }
        Ok(Self { handle, path })
    }

    /// The address of `name`. Calling it means transmuting it to the
    /// function's exact C signature, which the caller must know.
    pub fn symbol(&self, name: &'static str) -> Result<*mut c_void, DlError> {
        let missing = |reason: String| DlError::Symbol {
            path: self.path.clone(),
            symbol: name,
            reason,
        };
        let c_name = CString::new(name).map_err(|_| missing("NUL in the name".into()))?;
        // SAFETY: handle is a live dlopen handle, c_name a valid C string.
        let p = unsafe { dlsym(self.handle, c_name.as_ptr()) };
        if p.is_null() {
            Err(missing(last_dl_error()))
        } else {
            Ok(p)
        }
    }

    /// The path (or name) it was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DynLib {
    fn drop(&mut self) {
        // SAFETY: handle came from dlopen and is closed once; the owners of
        // this DynLib keep no function pointer beyond it.
        unsafe { dlclose(self.handle) };
    }
}

fn last_dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string valid until the
    // next dl* call on this thread; it is copied at once.
    unsafe {
        let p = dlerror();
        if p.is_null() {
            "unknown error".into()
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_libraries_and_symbols_are_errors() {
        assert!(matches!(
            DynLib::open("/nonexistent/libnothing.so"),
            Err(DlError::Load { .. })
        ));
        assert!(matches!(
            DynLib::open_by_name("libnothing-at-all.so.0"),
            Err(DlError::Load { .. })
        ));
        // The C library itself is always there.
        let libc = DynLib::open_by_name("libc.so.6").unwrap();
        assert!(libc.symbol("strlen").is_ok());
        assert!(matches!(
            libc.symbol("no_such_function_here"),
            Err(DlError::Symbol { .. })
        ));
    }
}
