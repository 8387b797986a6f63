//! Whether a test binary has line tables, for the tests of the simulator's
//! source sites: a debug build has them; `cargo test --release` has none
//! (the release profile is `debug = false`), and then a finding has no site.

/// Whether this binary's own frames resolve to file and line.
#[inline(never)]
pub fn line_tables() -> bool {
    format!("{:#}", std::backtrace::Backtrace::force_capture()).contains(file!())
}
