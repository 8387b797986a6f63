//! NCCL's C API as this crate calls it, declared from NCCL 2.28's public
//! header (`nccl.h`): the types, the enum values and the functions, looked
//! up with `dlsym` in `libnccl.so.2` opened at run time (no build-time
//! dependency, no header needed).
use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use crate::dynlib::DynLib;
use crate::error::{Error, Result};

/// `ncclComm_t`: an opaque communicator.
pub(crate) type RawComm = *mut c_void;
/// `ncclResult_t`.
pub(crate) type NcclResult = c_int;
/// `cudaStream_t` (the driver's `CUstream` is the same handle).
pub(crate) type RawStream = cust::sys::CUstream;

/// `NCCL_UNIQUE_ID_BYTES`.
pub const UNIQUE_ID_BYTES: usize = 128;

/// `ncclUniqueId`: 128 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct RawUniqueId {
    pub internal: [c_char; UNIQUE_ID_BYTES],
}

/// `ncclSuccess`.
pub(crate) const SUCCESS: NcclResult = 0;
/// `ncclInProgress`: a nonblocking communicator's call still running.
pub(crate) const IN_PROGRESS: NcclResult = 7;

/// The name of an `ncclResult_t` (`ncclTimeout` = 8 is newer than 2.28,
/// where 8 is `ncclNumResults`).
pub fn result_name(code: i32) -> &'static str {
    match code {
        0 => "ncclSuccess",
        1 => "ncclUnhandledCudaError",
        2 => "ncclSystemError",
        3 => "ncclInternalError",
        4 => "ncclInvalidArgument",
        5 => "ncclInvalidUsage",
        6 => "ncclRemoteError",
        7 => "ncclInProgress",
        8 => "ncclTimeout",
        _ => "unknown ncclResult_t",
    }
}

/// `NCCL_CONFIG_UNDEF_INT`.
const UNDEF_INT: c_int = c_int::MIN;
/// `NCCL_API_MAGIC`.
pub(crate) const API_MAGIC: u32 = 0xcafe_beef;
/// `NCCL_VERSION(2, 28, 3)`: the header version whose `ncclConfig_t` this
/// is; a later library reads a config of an earlier version by its `size`
/// and `version`.
pub(crate) const CONFIG_VERSION: u32 = 22803;

/// `ncclConfig_t` of NCCL 2.28 (`ncclConfig_v22800`), field for field.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawConfig {
    pub size: usize,
    pub magic: u32,
    pub version: u32,
    pub blocking: c_int,
    pub cga_cluster_size: c_int,
    pub min_ctas: c_int,
    pub max_ctas: c_int,
    pub net_name: *const c_char,
    pub split_share: c_int,
    pub traffic_class: c_int,
    pub comm_name: *const c_char,
    pub collnet_enable: c_int,
    pub cta_policy: c_int,
    pub shrink_share: c_int,
    pub nvls_ctas: c_int,
    pub n_channels_per_net_peer: c_int,
    pub nvlink_centric_sched: c_int,
}

impl RawConfig {
    /// `NCCL_CONFIG_INITIALIZER` with `blocking` set (0: nonblocking, so
    /// that initialization and collectives return `ncclInProgress` instead
    /// of waiting for peers that may never come).
    pub fn with_blocking(blocking: bool) -> Self {
        Self {
            size: size_of::<Self>(),
            magic: API_MAGIC,
            version: CONFIG_VERSION,
            blocking: c_int::from(blocking),
            cga_cluster_size: UNDEF_INT,
            min_ctas: UNDEF_INT,
            max_ctas: UNDEF_INT,
            net_name: std::ptr::null(),
            split_share: UNDEF_INT,
            traffic_class: UNDEF_INT,
            comm_name: std::ptr::null(),
            collnet_enable: UNDEF_INT,
            cta_policy: UNDEF_INT,
            shrink_share: UNDEF_INT,
            nvls_ctas: UNDEF_INT,
            n_channels_per_net_peer: UNDEF_INT,
            nvlink_centric_sched: UNDEF_INT,
        }
    }
}

type GetVersion = unsafe extern "C" fn(*mut c_int) -> NcclResult;
type GetUniqueId = unsafe extern "C" fn(*mut RawUniqueId) -> NcclResult;
type CommInitRankConfig =
    unsafe extern "C" fn(*mut RawComm, c_int, RawUniqueId, c_int, *mut RawConfig) -> NcclResult;
type CommInitAll = unsafe extern "C" fn(*mut RawComm, c_int, *const c_int) -> NcclResult;
type CommOp = unsafe extern "C" fn(RawComm) -> NcclResult;
type GetErrorString = unsafe extern "C" fn(NcclResult) -> *const c_char;
type GetLastError = unsafe extern "C" fn(RawComm) -> *const c_char;
type CommGetAsyncError = unsafe extern "C" fn(RawComm, *mut NcclResult) -> NcclResult;
type CommQuery = unsafe extern "C" fn(RawComm, *mut c_int) -> NcclResult;
type GroupCall = unsafe extern "C" fn() -> NcclResult;
/// `ncclAllReduce`, `ncclReduceScatter` (the operation) and `ncclBroadcast`
/// (the root): `(send, recv, count, datatype, op or root, comm, stream)`.
type BufferPairCall = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    c_int,
    c_int,
    RawComm,
    RawStream,
) -> NcclResult;
type Reduce = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    c_int,
    c_int,
    c_int,
    RawComm,
    RawStream,
) -> NcclResult;
type AllGather = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    c_int,
    RawComm,
    RawStream,
) -> NcclResult;
type Send =
    unsafe extern "C" fn(*const c_void, usize, c_int, c_int, RawComm, RawStream) -> NcclResult;
type Recv =
    unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, RawComm, RawStream) -> NcclResult;

/// The library's name as the dynamic loader finds it.
pub const LIBRARY: &str = "libnccl.so.2";

/// The environment variable naming a libnccl file to load instead of the
/// one the dynamic loader finds.
pub const LIBRARY_ENV: &str = "CUDA_KERNELS_NCCL";

/// NCCL's functions, looked up in the loaded library (which stays loaded
/// as long as this lives).
pub(crate) struct Nccl {
    pub version: i32,
    pub get_unique_id: GetUniqueId,
    pub comm_init_rank_config: CommInitRankConfig,
    pub comm_init_all: CommInitAll,
    pub comm_finalize: CommOp,
    pub comm_destroy: CommOp,
    pub comm_abort: CommOp,
    pub get_error_string: GetErrorString,
    pub get_last_error: GetLastError,
    pub comm_get_async_error: CommGetAsyncError,
    pub comm_count: CommQuery,
    pub comm_user_rank: CommQuery,
    pub group_start: GroupCall,
    pub group_end: GroupCall,
    pub all_reduce: BufferPairCall,
    pub broadcast: BufferPairCall,
    pub reduce: Reduce,
    pub all_gather: AllGather,
    pub reduce_scatter: BufferPairCall,
    pub send: Send,
    pub recv: Recv,
    pub path: PathBuf,
    _lib: DynLib,
}

/// Where libnccl is looked for: the file `$CUDA_KERNELS_NCCL` alone when
/// it is set (an explicit choice is not replaced by another library),
/// else `libnccl.so.2` and `libnccl.so` through the dynamic loader's search.
pub fn candidates() -> Vec<PathBuf> {
    match std::env::var_os(LIBRARY_ENV) {
        Some(file) => vec![PathBuf::from(file)],
        None => [LIBRARY, "libnccl.so"].map(PathBuf::from).to_vec(),
    }
}

static LOADED: OnceLock<std::result::Result<Arc<Nccl>, String>> = OnceLock::new();

impl Nccl {
    /// The process's NCCL, loaded on first use from [`candidates`]; a
    /// failure is [`Error::LibraryMissing`] naming `libnccl.so.2` and what
    /// each candidate said (and stays the answer for the process).
    pub fn get() -> Result<Arc<Nccl>> {
        LOADED
            .get_or_init(|| Self::load(&candidates()).map(Arc::new))
            .clone()
            .map_err(missing)
    }

    /// Loads the first of `candidates` that opens and has every function;
    /// `Err` with what each one said.
    pub fn load(candidates: &[PathBuf]) -> std::result::Result<Nccl, String> {
        let mut why = Vec::new();
        for c in candidates {
            let opened = if c.components().count() == 1 {
                DynLib::open_by_name(&c.to_string_lossy())
            } else {
                DynLib::open(c)
            };
            match opened.map_err(|e| e.to_string()).and_then(Self::bind) {
                Ok(nccl) => return Ok(nccl),
                Err(e) => why.push(e),
            }
        }
        Err(why.join("; "))
    }

    /// Looks every function up in `lib`.
    fn bind(lib: DynLib) -> std::result::Result<Nccl, String> {
        let sym = |name: &'static str| lib.symbol(name).map_err(|e| e.to_string());
        macro_rules! f {
            ($name:literal as $t:ty) => {{
                let p = sym($name)?;
                // SAFETY: `p` is the library's exported function `$name`,
                // whose C signature (nccl.h, NCCL 2.28) `$t` spells out.
                unsafe { std::mem::transmute::<*mut c_void, $t>(p) }
            }};
        }
        let get_version = f!("ncclGetVersion" as GetVersion);
        let mut version = 0;
        // SAFETY: `version` is a live int for the library to write.
        let r = unsafe { get_version(&mut version) };
        if r != SUCCESS {
            return Err(format!(
                "{}: ncclGetVersion returned {r}",
                lib.path().display()
            ));
        }
        Ok(Nccl {
            version,
            get_unique_id: f!("ncclGetUniqueId" as GetUniqueId),
            comm_init_rank_config: f!("ncclCommInitRankConfig" as CommInitRankConfig),
            comm_init_all: f!("ncclCommInitAll" as CommInitAll),
            comm_finalize: f!("ncclCommFinalize" as CommOp),
            comm_destroy: f!("ncclCommDestroy" as CommOp),
            comm_abort: f!("ncclCommAbort" as CommOp),
            get_error_string: f!("ncclGetErrorString" as GetErrorString),
            get_last_error: f!("ncclGetLastError" as GetLastError),
            comm_get_async_error: f!("ncclCommGetAsyncError" as CommGetAsyncError),
            comm_count: f!("ncclCommCount" as CommQuery),
            comm_user_rank: f!("ncclCommUserRank" as CommQuery),
            group_start: f!("ncclGroupStart" as GroupCall),
            group_end: f!("ncclGroupEnd" as GroupCall),
            all_reduce: f!("ncclAllReduce" as BufferPairCall),
            broadcast: f!("ncclBroadcast" as BufferPairCall),
            reduce: f!("ncclReduce" as Reduce),
            all_gather: f!("ncclAllGather" as AllGather),
            reduce_scatter: f!("ncclReduceScatter" as BufferPairCall),
            send: f!("ncclSend" as Send),
            recv: f!("ncclRecv" as Recv),
            path: lib.path().to_path_buf(),
            _lib: lib,
        })
    }

    /// `Ok` for `ncclSuccess`, else [`Error::Nccl`] naming `call`, with
    /// `ncclGetErrorString` and `ncclGetLastError(comm)` (`comm` may be
    /// null: the last error of any communicator).
    pub fn check(&self, call: &'static str, code: NcclResult, comm: RawComm) -> Result<()> {
        if code == SUCCESS {
            return Ok(());
        }
        Err(self.error(call, code, comm))
    }

    /// The [`Error::Nccl`] for `code` returned by `call`.
    pub fn error(&self, call: &'static str, code: NcclResult, comm: RawComm) -> Error {
        // SAFETY: both return null or a NUL-terminated string that lives at
        // least until the next NCCL call on this thread; copied at once.
        // `comm` is null or a communicator this process holds.
        let (text, last) = unsafe {
            (
                c_text((self.get_error_string)(code)),
                c_text((self.get_last_error)(comm)),
            )
        };
        Error::Nccl {
            call,
            code,
            name: result_name(code),
            text,
            last,
        }
    }

    /// The library's version as `2.28.3`.
    pub fn version_string(&self) -> String {
        let v = self.version;
        format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100)
    }
}

/// The [`Error::LibraryMissing`] for what each candidate said.
fn missing(tried: String) -> Error {
    Error::LibraryMissing {
        library: LIBRARY,
        tried,
    }
}

/// A C string the library returned, copied (empty for null).
///
/// # Safety
/// `p` is null or a NUL-terminated string alive for the call.
unsafe fn c_text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: the caller's contract.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    /// The layout NCCL 2.28's `ncclConfig_t` has on a 64-bit Linux
    /// (`size_t` and pointers 8 bytes, `int` 4): every field where the C
    /// compiler puts it, 80 bytes in all, and `NCCL_CONFIG_INITIALIZER`'s
    /// size, magic and version.
    #[test]
    fn the_config_has_nccl_2_28_s_layout() {
        assert_eq!(size_of::<RawConfig>(), 80);
        assert_eq!(offset_of!(RawConfig, magic), 8);
        assert_eq!(offset_of!(RawConfig, version), 12);
        assert_eq!(offset_of!(RawConfig, blocking), 16);
        assert_eq!(offset_of!(RawConfig, max_ctas), 28);
        assert_eq!(offset_of!(RawConfig, net_name), 32);
        assert_eq!(offset_of!(RawConfig, split_share), 40);
        assert_eq!(offset_of!(RawConfig, comm_name), 48);
        assert_eq!(offset_of!(RawConfig, collnet_enable), 56);
        assert_eq!(offset_of!(RawConfig, nvlink_centric_sched), 76);
        let c = RawConfig::with_blocking(false);
        assert_eq!((c.size, c.magic, c.version), (80, 0xcafe_beef, 22803));
        assert_eq!((c.blocking, c.min_ctas), (0, i32::MIN));
        assert_eq!(size_of::<RawUniqueId>(), 128);
    }

    #[test]
    fn result_codes_have_nccl_s_names() {
        assert_eq!(result_name(0), "ncclSuccess");
        assert_eq!(result_name(IN_PROGRESS), "ncclInProgress");
        assert_eq!(result_name(6), "ncclRemoteError");
        assert_eq!(result_name(42), "unknown ncclResult_t");
    }

    /// A library that is not there is an error naming each candidate; one
    /// that is there but is not NCCL (libc) names the missing function.
    #[test]
    fn a_missing_library_says_what_was_tried() {
        let e = Nccl::load(&[PathBuf::from("/nonexistent/libnccl.so.2")])
            .err()
            .unwrap_or_default();
        assert!(e.contains("/nonexistent/libnccl.so.2"), "{e}");
        let e = Nccl::load(&[PathBuf::from("libc.so.6")])
            .err()
            .unwrap_or_default();
        assert!(e.contains("ncclGetVersion"), "{e}");
        let e = missing(e).to_string();
        assert!(
            e.starts_with("libnccl.so.2 could not be loaded (it is opened at run time): "),
            "{e}"
        );
    }
}
