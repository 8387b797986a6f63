//! Recording a fault before trapping: `gpu_assert!`, and the panic handler.
//! See [`crate::fault`] for the record and why it lives in host memory.
use core::arch::{asm, nvptx};
use core::ptr::{addr_of_mut, write_volatile};

use super::{FAULT_FILE_BYTES, FAULT_MESSAGE_BYTES, FaultRecord};
use crate::thread;

/// The record's device address, written by the host when it loads the
/// module (see [`FAULT_POINTER_SYMBOL`](super::FAULT_POINTER_SYMBOL)); null when unset.
#[unsafe(no_mangle)]
pub static mut CUDA_KERNELS_FAULT_RECORD: *mut FaultRecord = core::ptr::null_mut();

/// Set by the first faulting thread, so that only one writes the record.
static mut FAULT_CLAIMED: u32 = 0;

/// Set by that thread once the record is complete: the other faulting
/// threads wait for it before they trap, since a trap ends every thread of
/// the grid, the writer's unfinished record included (seen on an H100 when
/// every thread of a block failed the same check at once).
static mut FAULT_RECORDED: u32 = 0;

/// Writes where this thread failed into the host's fault record (first
/// faulting thread only) and traps. The host then sees a launch failure at
/// its next synchronization, described by the record.
#[inline(never)]
#[cold]
pub fn fail(file: &str, line: u32, column: u32, message: &str) -> ! {
    // SAFETY: a plain load of a module global the host wrote before any launch.
    let record = unsafe { core::ptr::read_volatile(addr_of_mut!(CUDA_KERNELS_FAULT_RECORD)) };
    if !record.is_null() {
        if claim() {
            // SAFETY: `record` points to a live FaultRecord in page-locked, device-mapped
            // host memory (the host keeps it for the module's lifetime); only the thread
            // that won `claim` writes it, so the writes do not race.
            unsafe { write_record(record, file, line, column, message) };
            // SAFETY: a volatile store to a module global, after write_record's membar.sys.
            unsafe { write_volatile(addr_of_mut!(FAULT_RECORDED), 1) };
        } else {
            // The writer runs on (independent thread scheduling, sm_70 and later)
            // and traps after its store, which ends this loop's thread too.
            // SAFETY: a volatile load of a module global.
            while unsafe { core::ptr::read_volatile(addr_of_mut!(FAULT_RECORDED)) } == 0 {}
        }
    }
    // SAFETY: trap aborts the kernel; it has no preconditions.
    unsafe { nvptx::trap() }
}

/// `true` for the first caller on the device (an atomic compare-and-swap).
fn claim() -> bool {
    let old: u32;
    // SAFETY: atom.global.cas on a module global; the address is a generic
    // pointer to global memory, which `atom` accepts without a state space.
    unsafe {
        asm!("atom.cas.b32 {old}, [{p}], 0, 1;", old = out(reg32) old,
             p = in(reg64) addr_of_mut!(FAULT_CLAIMED), options(nostack));
    }
    old == 0
}

/// # Safety
/// `record` points to a writable FaultRecord that no other thread writes.
///
/// Written without any operation that could panic (no slicing, no checked
/// indexing): a panic here would re-enter the panic handler.
unsafe fn write_record(
    record: *mut FaultRecord,
    file: &str,
    line: u32,
    column: u32,
    message: &str,
) {
    // Keep the end of a long path (the file name), the start of a long message.
    let file_len = file.len().min(FAULT_FILE_BYTES);
    let file_start = file.len() - file_len;
    let message_len = message.len().min(FAULT_MESSAGE_BYTES);
    // SAFETY: forwarded from the caller; `file_start + i < file.len()` and
    // `i < FAULT_FILE_BYTES` for every `i < file_len`, likewise for the message.
    unsafe {
        let r = &raw mut *record;
        write_volatile(&raw mut (*r).line, line);
        write_volatile(&raw mut (*r).column, column);
        write_volatile(
            &raw mut (*r).thread,
            [
                thread::thread_idx_x(),
                thread::thread_idx_y(),
                thread::thread_idx_z(),
            ],
        );
        write_volatile(
            &raw mut (*r).block,
            [
                thread::block_idx_x(),
                thread::block_idx_y(),
                thread::block_idx_z(),
            ],
        );
        let file_dst = (&raw mut (*r).file).cast::<u8>();
        for i in 0..file_len {
            write_volatile(file_dst.add(i), *file.as_ptr().add(file_start + i));
        }
        write_volatile(&raw mut (*r).file_len, file_len as u32);
        let message_dst = (&raw mut (*r).message).cast::<u8>();
        for i in 0..message_len {
            write_volatile(message_dst.add(i), *message.as_ptr().add(i));
        }
        write_volatile(&raw mut (*r).message_len, message_len as u32);
        // Make the fields visible to the host before the flag that says they are complete.
        asm!("membar.sys;", options(nostack));
        write_volatile(&raw mut (*r).written, 1);
        asm!("membar.sys;", options(nostack));
    }
}

/// The nvptx64 build's panic handler (the default feature `panic-handler`):
/// on panic (an out-of-bounds index, an overflow check…) records the source
/// location, block and thread for the host ([`crate::fault`]) and traps: the
/// kernel stops and the host gets a described error at its next
/// synchronization. (`loop {}` would hang the GPU instead.)
#[cfg(feature = "panic-handler")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    match info.location() {
        Some(l) => fail(l.file(), l.line(), l.column(), "panic"),
        None => fail("<unknown>", 0, 0, "panic"),
    }
}
