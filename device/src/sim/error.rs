//! The simulator's one error type.
use std::fmt;

/// A simulated thread: its `blockIdx` and `threadIdx`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SimThread {
    /// `blockIdx` (x, y, z).
    pub block: [u32; 3],
    /// `threadIdx` (x, y, z).
    pub thread: [u32; 3],
}

impl fmt::Display for SimThread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [bx, by, bz] = self.block;
        let [tx, ty, tz] = self.thread;
        write!(f, "block ({bx}, {by}, {bz}) thread ({tx}, {ty}, {tz})")
    }
}

/// How a thread touched a shared word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A load.
    Read,
    /// A store.
    Write,
    /// A shared-memory atomic (`SharedArray::fetch_add` …): it races
    /// with plain accesses of other threads, not with their atomics.
    Atomic,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Write => "wrote",
            Access::Atomic => "atomically updated",
        })
    }
}

/// Where a [`SimError::SharedRace`] is in the kernel's source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaceSource {
    /// What the later access touched: "`tile[3]` (shared_array! at
    /// file:line:column)", the array by its declaration, or the dynamic
    /// shared memory's byte.
    pub place: String,
    /// Where each access is, earlier then later.
    pub sites: [Option<&'static std::panic::Location<'static>>; 2],
}

/// Threads of a block that are stuck in the same place, for
/// [`SimError::BarrierDivergence`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stuck {
    /// Where they are: `waits at sync_threads (file:line:column)`, `exited`,
    /// or a warp collective that cannot complete.
    pub place: String,
    /// Their `threadIdx`, in linear order.
    pub threads: Vec<[u32; 3]>,
}

/// What went wrong in a simulated launch. `Display` says all of it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SimError {
    /// The launch was refused before any thread ran, as the GPU refuses it
    /// (`reason` names the limit; CUDA's error would be
    /// `CUDA_ERROR_INVALID_VALUE`).
    LaunchRefused {
        /// The kernel.
        kernel: &'static str,
        /// Which limit the shape exceeds.
        reason: String,
    },
    /// A thread failed: a `gpu_assert!`, [`fail`](crate::fault::fail) or a
    /// panic in the kernel body.
    Fault {
        /// The kernel.
        kernel: &'static str,
        /// Source file of the failing code.
        file: String,
        /// Source line.
        line: u32,
        /// Source column.
        column: u32,
        /// The failing thread.
        at: SimThread,
        /// The assertion's or the panic's message.
        message: String,
    },
    /// Two threads of one block touched the same shared-memory word between
    /// two barriers, at least one of them writing.
    SharedRace {
        /// The kernel.
        kernel: &'static str,
        /// Byte offset of the word in the block's shared memory.
        offset: u32,
        /// The earlier access.
        first: (SimThread, Access),
        /// The later access.
        second: (SimThread, Access),
        /// Which array, and where in the source (boxed: the error stays
        /// small).
        source: Box<RaceSource>,
        /// The barrier interval: how many barriers the block had passed
        /// (0: before the first).
        interval: u32,
    },
    /// No thread of a block can go on: some wait at a barrier (or a warp
    /// collective) that the others never reach.
    BarrierDivergence {
        /// The kernel.
        kernel: &'static str,
        /// `blockIdx` of the block.
        block: [u32; 3],
        /// The block's threads, grouped by where they are.
        stuck: Vec<Stuck>,
    },
    /// A warp collective was used wrongly: a lane of its mask exited, or the
    /// lanes of one mask called different collectives.
    WarpCollective {
        /// The kernel.
        kernel: &'static str,
        /// A thread of the collective.
        at: SimThread,
        /// What was wrong.
        reason: String,
    },
    /// A thread read or wrote outside a simulated device buffer (into its
    /// guard pages).
    OutOfBounds {
        /// The kernel.
        kernel: &'static str,
        /// The buffer: "parameter `x`, buffer `label`" when a kernel
        /// parameter points into it, else "buffer `label`" (its label).
        buffer: Box<str>,
        /// The element index, `(address − base) / element size` (negative
        /// before the start).
        index: i64,
        /// The buffer's length in elements.
        len: usize,
        /// The faulting thread.
        at: SimThread,
        /// Where the access is in the kernel's source, `file:line:column`
        /// (`None` in a build without line tables: `debug = false`; boxed:
        /// the error stays small).
        site: Option<Box<str>>,
    },
    /// Under the interleaved schedule, the resident blocks only spin: they
    /// made `polls` atomic loads of global memory with no thread exiting,
    /// no barrier released and no atomic store among them, so none can
    /// publish what another waits for (on the GPU, a hang).
    Deadlock {
        /// The kernel.
        kernel: &'static str,
        /// `blockIdx` of each resident block.
        blocks: Vec<[u32; 3]>,
        /// The atomic loads since the last progress.
        polls: u64,
    },
    /// A memory operation of the simulator itself failed (mmap).
    Memory {
        /// What was attempted.
        what: String,
        /// The OS's error.
        reason: String,
    },
}

fn threads(list: &[[u32; 3]]) -> String {
    const SHOWN: usize = 8;
    let mut s = list
        .iter()
        .take(SHOWN)
        .map(|[x, y, z]| format!("({x}, {y}, {z})"))
        .collect::<Vec<_>>()
        .join(", ");
    if list.len() > SHOWN {
        s.push_str(&format!(" and {} more", list.len() - SHOWN));
    }
    s
}

/// A source location as `file:line:column` (`?` when unknown).
struct Site(Option<&'static std::panic::Location<'static>>);

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(l) => write!(f, "{}:{}:{}", l.file(), l.line(), l.column()),
            None => f.write_str("?"),
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::LaunchRefused { kernel, reason } => {
                write!(f, "{kernel}: launch refused by the simulator: {reason}")
            }
            SimError::Fault {
                kernel,
                file,
                line,
                column,
                at,
                message,
            } => write!(
                f,
                "{kernel}: the kernel failed at {file}:{line}:{column} in {at}: {message}"
            ),
            SimError::SharedRace {
                kernel,
                offset,
                first,
                second,
                source,
                interval,
            } => write!(
                f,
                "{kernel}: shared-memory race on {}, the word at shared byte offset \
                 {offset}: {} {} it at {} and {} {} it at {} with no barrier between, {}",
                source.place,
                first.0,
                first.1,
                Site(source.sites[0]),
                second.0,
                second.1,
                Site(source.sites[1]),
                match interval {
                    0 => "before the block's first barrier".to_string(),
                    k => format!("after the block's barrier {k}"),
                }
            ),
            SimError::BarrierDivergence {
                kernel,
                block,
                stuck,
            } => {
                let [x, y, z] = block;
                write!(
                    f,
                    "{kernel}: barrier divergence in block ({x}, {y}, {z}): no thread can go on"
                )?;
                for s in stuck {
                    write!(
                        f,
                        "; {} thread(s) {}: {}",
                        s.threads.len(),
                        s.place,
                        threads(&s.threads)
                    )?;
                }
                Ok(())
            }
            SimError::WarpCollective { kernel, at, reason } => {
                write!(f, "{kernel}: warp collective in {at}: {reason}")
            }
            SimError::OutOfBounds {
                kernel,
                buffer,
                index,
                len,
                at,
                site,
            } => {
                write!(
                    f,
                    "{kernel}: out-of-bounds access to {buffer} (length {len}) at element index \
                     {index} by {at}"
                )?;
                match site {
                    Some(site) => write!(f, " at {site}"),
                    None => f.write_str(
                        " (its source line needs line tables: `debug = \"line-tables-only\"` in \
                         the build's profile)",
                    ),
                }
            }
            SimError::Deadlock {
                kernel,
                blocks,
                polls,
            } => write!(
                f,
                "{kernel}: deadlock under the interleaved schedule: resident blocks {} made \
                 {polls} atomic loads of global memory with no thread exiting, no barrier \
                 released and no atomic store among them (a spin-wait on a value no running \
                 block will write; on the GPU, a hang)",
                threads(blocks)
            ),
            SimError::Memory { what, reason } => write!(f, "simulator memory: {what}: {reason}"),
        }
    }
}

impl std::error::Error for SimError {}
#[cfg(test)]
mod tests {
    /// The runtime's error holds a `SimError` beside the kernel's name; past
    /// 96 bytes every `Result` of the runtime grows past clippy's
    /// `result_large_err` limit (hence the boxed fields).
    #[test]
    fn the_error_stays_small() {
        assert!(size_of::<super::SimError>() <= 96);
    }
}
