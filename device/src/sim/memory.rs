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
//! kernel whose *result* depends on its pointers' alignment would differ
//! (none of ours does). A guard page before the start catches
//! `ptr.sub(1)`-style underflows the same way. The guard after the end is
//! [`GUARD_AFTER_BYTES`] long (address space only), so that an index far past
//! the end traps too rather than landing in the next buffer.
//!
//! The memory is zero when allocated (anonymous mappings are).
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
#[allow(dead_code)] // read by the fault handler (next commit)
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

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
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
            return Err(SimError::Memory {
                what: format!("mapping {len_bytes} bytes for {label}"),
                reason: std::io::Error::last_os_error().to_string(),
            });
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
            return Err(SimError::Memory {
                what: format!("making {len_bytes} bytes for {label} writable"),
                reason,
            });
        }
        let end = page + data_pages * page;
        // SAFETY: `end - len_bytes` lies within the data pages (len_bytes ≤ data_pages * page).
        let ptr = unsafe { map.add(end - len_bytes) };
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
        // SAFETY: the mapping made in `new`, unmapped once; the registry no
        // longer names it.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

/// The live buffer whose mapping (guard pages included) holds `addr`, or
/// else the nearest one below it; `None` when no buffer starts below `addr`.
/// Reading the registry may block: call it outside a signal handler.
#[allow(dead_code)] // used by the fault handler (next commit)
pub(crate) fn find(addr: usize) -> Option<BufferInfo> {
    let reg = REGISTRY.read().unwrap_or_else(|e| e.into_inner());
    let (_, (_, info)) = reg.range(..=addr).next_back()?;
    Some(info.clone())
}
