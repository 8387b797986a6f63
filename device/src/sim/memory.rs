//! Simulated device memory: buffers mapped with `mmap` between two
//! `PROT_NONE` guard pages, and the registry of live buffers by address.
//!
//! # Placement
//! A buffer's *end* is placed right at the guard page after it, so that a
//! read or write even one byte past the end traps (and is reported with the
//! buffer, the element index and the thread; see [`sim`](super)). The start
//! is then `page_end − len_bytes`: aligned to the element size (the length
//! is a whole number of elements), but not to 256 bytes as `cudaMalloc`'s
//! pointers are. The simulator's 16-byte vector loads
//! ([`load_nc_v4`](crate::load::load_nc_v4)) therefore read unaligned; a
//! kernel whose *result* depends on its pointers' alignment (the reductions'
//! summation order, the SGEMM entry chosen) would differ from the GPU, so a
//! caller that wants the GPU's results asks for a length rounded up to 16
//! bytes, as the host crate's buffers do (see `docs/simulator.md`). A guard page before the data pages catches accesses
//! before the start from the page boundary on: the up to one page of slack
//! between that boundary and the start (when the length is not a whole
//! number of pages) is readable, so a small underflow such as `ptr.sub(1)`
//! goes unnoticed; the end, where overruns happen, is exact. The guard after the end is
//! [`GUARD_AFTER_BYTES`] long (address space only), so that an index far past
//! the end traps too rather than landing in the next buffer.
//!
//! The memory is zero when allocated (anonymous mappings are).
//!
//! On targets other than Unix the buffers are plain heap allocations,
//! without guard pages: an out-of-bounds access is not caught there.
use std::collections::BTreeMap;
use std::sync::RwLock;

use super::SimError;

/// A simulated device buffer: `len_bytes` of read-write memory with a guard
/// page on each side. Unmapped on drop.
#[derive(Debug)]
pub struct Allocation {
    map: *mut u8,
    map_len: usize,
    ptr: *mut u8,
    len_bytes: usize,
}

// SAFETY: the allocation is plain memory owned by this value; moving or
// sharing the handle across threads is what device pointers are for.
unsafe impl Send for Allocation {}
// SAFETY: as above; the handle itself is never mutated through `&self`.
unsafe impl Sync for Allocation {}

/// What the registry keeps of a live allocation, for reports.
#[derive(Clone, Debug)]
pub(crate) struct BufferInfo {
    /// Start of the usable bytes.
    pub base: usize,
    /// Usable bytes.
    pub len_bytes: usize,
    /// Bytes per element (for the index in reports).
    pub element_size: usize,
    /// The buffer's label.
    pub label: String,
}

/// Bytes of `PROT_NONE` address space after each buffer's end.
pub const GUARD_AFTER_BYTES: usize = 1 << 20;

/// Live allocations by the start address of their mapping (guards included).
static REGISTRY: RwLock<BTreeMap<usize, (usize, BufferInfo)>> = RwLock::new(BTreeMap::new());

#[cfg(unix)]
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// Maps `len_bytes` between guards: (mapping, its length, the buffer's start).
#[cfg(unix)]
fn map(len_bytes: usize) -> Result<(*mut u8, usize, *mut u8), (&'static str, String)> {
    let page = page_size();
    let data_pages = len_bytes.div_ceil(page).max(1);
    let map_len = (data_pages + 1) * page + GUARD_AFTER_BYTES.next_multiple_of(page);
    // SAFETY: an anonymous private mapping at an address of the kernel's
    // choice; the result is checked below.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if map == libc::MAP_FAILED {
        return Err(("mapping", std::io::Error::last_os_error().to_string()));
    }
    let map = map.cast::<u8>();
    // SAFETY: the data pages lie inside the mapping just made.
    let rc = unsafe {
        libc::mprotect(
            map.add(page).cast(),
            data_pages * page,
            libc::PROT_READ | libc::PROT_WRITE,
        )
    };
    if rc != 0 {
        let reason = std::io::Error::last_os_error().to_string();
        // SAFETY: unmapping the mapping made above, not used since.
        unsafe { libc::munmap(map.cast(), map_len) };
        return Err(("making writable", reason));
    }
    let end = page + data_pages * page;
    // SAFETY: `end - len_bytes` lies within the data pages (len_bytes ≤ data_pages * page).
    Ok((map, map_len, unsafe { map.add(end - len_bytes) }))
}

/// Releases what [`map`] returned.
///
/// # Safety
/// `map` and `map_len` come from one [`map`] call, released once.
#[cfg(unix)]
unsafe fn unmap(map: *mut u8, map_len: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { libc::munmap(map.cast(), map_len) };
}

#[cfg(not(unix))]
fn heap_layout(len_bytes: usize) -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(len_bytes.max(1), 256).expect("a buffer's size fits")
}

/// Allocates `len_bytes` zeroed, 256-byte aligned, without guards.
#[cfg(not(unix))]
fn map(len_bytes: usize) -> Result<(*mut u8, usize, *mut u8), (&'static str, String)> {
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(heap_layout(len_bytes)) };
    if p.is_null() {
        return Err(("allocating", "out of memory".to_string()));
    }
    Ok((p, len_bytes, p))
}

/// Releases what [`map`] returned.
///
/// # Safety
/// `map` and `map_len` come from one [`map`] call, released once.
#[cfg(not(unix))]
unsafe fn unmap(map: *mut u8, map_len: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { std::alloc::dealloc(map, heap_layout(map_len)) };
}

impl Allocation {
    /// Maps `len_bytes` (zeroed) for a buffer of elements of `element_size`
    /// bytes, labelled `label` in reports (a name, or the element type).
    /// `len_bytes` should be a multiple of `element_size` (see the
    /// [module docs](self) on placement).
    pub fn new(
        len_bytes: usize,
        element_size: usize,
        label: impl Into<String>,
    ) -> Result<Allocation, SimError> {
        let label = label.into();
        let (map, map_len, ptr) = map(len_bytes).map_err(|(what, reason)| SimError::Memory {
            what: format!("{what} {len_bytes} bytes for {label}"),
            reason,
        })?;
        let info = BufferInfo {
            base: ptr as usize,
            len_bytes,
            element_size: element_size.max(1),
            label,
        };
        REGISTRY
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(map as usize, (map_len, info));
        Ok(Allocation {
            map,
            map_len,
            ptr,
            len_bytes,
        })
    }

    /// The first byte of the buffer (its end is at a guard page).
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The buffer's length in bytes.
    pub fn len_bytes(&self) -> usize {
        self.len_bytes
    }

    /// The element size given at allocation.
    pub fn element_size(&self) -> usize {
        self.info().map(|i| i.element_size).unwrap_or(1)
    }

    /// The label given at allocation.
    pub fn label(&self) -> String {
        self.info().map(|i| i.label).unwrap_or_default()
    }

    fn info(&self) -> Option<BufferInfo> {
        REGISTRY
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(self.map as usize))
            .map(|(_, i)| i.clone())
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        REGISTRY
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(self.map as usize));
        // SAFETY: the mapping made in `new`, released once; the registry no
        // longer names it.
        unsafe { unmap(self.map, self.map_len) };
    }
}

/// The live buffer whose mapping starts nearest below `addr`, and whether
/// that mapping (guard pages included) holds `addr`; `None` when no buffer
/// starts below it. Reading the registry may block: call it outside a
/// signal handler.
pub(crate) fn find(addr: usize) -> Option<(BufferInfo, bool)> {
    let reg = REGISTRY.read().unwrap_or_else(|e| e.into_inner());
    let (&start, (len, info)) = reg.range(..=addr).next_back()?;
    Some((info.clone(), addr < start + len))
}
