//! Launchers of the streams family (not written yet).

/// The PTX entry points this module launches.
pub const ENTRY_POINTS: &[&str] = &[];
