//! Collectives for kernel writers (CUB's building blocks), written once with
//! the device layer's warp primitives and shared memory. See
//! `docs/collectives.md` and `docs/collectives-sort.md` for example kernels.
//!
//! | module | what | CUB |
//! |---|---|---|
//! | [`warp`] | reduce, inclusive and exclusive scan of one value per lane, full or partial masks | `WarpReduce`, `WarpScan` |
//! | [`block`] | reduce and scan of one value per thread (with a prefix callback), blocked and striped loads and stores | `BlockReduce`, `BlockScan`, `BlockLoad`, `BlockStore` |
//! | [`radix`] | block radix rank and block radix sort of keys and key–value pairs (8-bit digits, stable), the order-preserving key bits that sort floats like `total_cmp` with NaN last | `BlockRadixRank`, `BlockRadixSort` |
//! | [`histogram`] | a block histogram in shared memory with shared-memory atomics, warp-aggregated where a warp's samples fall in one bin | `BlockHistogram` |
mod ops;

pub mod block;
pub mod histogram;
pub mod radix;
pub mod warp;

pub use ops::{Max, Min, ReduceOp, Sum};
