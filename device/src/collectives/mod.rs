//! Collectives for kernel writers (CUB's building blocks): warp and block
//! reduce and scan over any [`ReduceOp`], block loads and stores. See
//! `docs/collectives.md` for an example kernel of each.
//!
//! | module | what | CUB |
//! |---|---|---|
//! | [`warp`] | reduce, inclusive and exclusive scan of one value per lane, full or partial masks | `WarpReduce`, `WarpScan` |
//! | [`block`] | reduce and scan of one value per thread (with a prefix callback), blocked and striped loads and stores | `BlockReduce`, `BlockScan`, `BlockLoad`, `BlockStore` |
mod ops;

pub mod block;
pub mod warp;

pub use ops::{Max, Min, ReduceOp, Sum};
