//! Block collectives: the building blocks a kernel takes from CUB, written
//! once with the device layer's warp primitives and shared memory.
//!
//! - [`radix`]: block radix rank and block radix sort of keys and key–value
//!   pairs (8-bit digits, stable), and the order-preserving key bits that
//!   sort floats like `total_cmp` with NaN last;
//! - [`histogram`]: a block histogram in shared memory with shared-memory
//!   atomics, warp-aggregated where a warp's samples fall in one bin.
pub mod histogram;
pub mod radix;
