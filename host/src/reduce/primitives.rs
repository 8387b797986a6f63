//! The device-primitive test kernels (warp shuffles and votes, atomics,
//! wide loads, the block tree step), launched on their own so that a broken
//! primitive is named by its own test.
use cuda_kernels_gpu::reduce::primitive_tests::{
    ATOMIC_TEST, BLOCK_REDUCE_TEST_I64, LOAD_TEST, WARP_SHUFFLE_TEST,
};

use crate::Gpu;
use crate::error::{Error, Result};
use crate::launch::LaunchConfig;

/// What `warp_shuffle_test` wrote: 8 rows of one value per thread each.
#[derive(Debug, Clone)]
pub struct WarpResults {
    /// Rows of 32-bit results: shuffle down 1, up 3, xor 5, idx 7 of
    /// `x = 3g + 1`, lane id, `warp::reduce(x, +)`, `warp::all_reduce(x,
    /// +)`, `ballot(x % 3 == 0)`.
    pub rows32: Vec<Vec<u32>>,
    /// Rows of 64-bit results: shuffle down 1, up 3, xor 5, idx 7 of
    /// `y = (g << 33) | g`, `warp::reduce(y, +)`, `warp::all_reduce(y,
    /// +)`, `any(g % 64 == 5)`, `all(lane < 32)`.
    pub rows64: Vec<Vec<u64>>,
}

/// What `atomic_test` left behind.
#[derive(Debug, Clone)]
pub struct AtomicResults {
    /// The ticket each thread drew from `fetch_add_u32`.
    pub tickets: Vec<u32>,
    /// add counter, max, min, exchanged value, CAS target, CAS winners.
    pub counters: [u32; 6],
    /// `fetch_max_i32`, `fetch_min_i32` results.
    pub signed: [i32; 2],
    /// `fetch_add_f32` of 1.0 per thread.
    pub sum_f32: f32,
    /// `fetch_add_f64` of 0.5 per thread.
    pub sum_f64: f64,
    /// `fetch_add_u64` of each thread's index.
    pub sum_u64: u64,
}

/// The warp-primitive and atomic checks on a [`Gpu`].
pub trait WarpPrimitiveChecks {
    /// Runs `warp_shuffle_test` on `blocks × threads_per_block` threads
    /// (`threads_per_block` a multiple of 32).
    fn warp_primitives_test(&self, blocks: u32, threads_per_block: u32) -> Result<WarpResults>;

    /// Runs `atomic_test` with `n` threads (1 ≤ n < 2^31).
    fn atomic_primitives_test(&self, n: usize) -> Result<AtomicResults>;

    /// Runs `load_test` on `input` (a whole number of 16-byte vectors):
    /// returns what the `ld.global.nc.v4` copy and the `ld.global.cg`
    /// copy wrote (both must equal the input).
    fn load_primitives_test(&self, input: &[u32]) -> Result<(Vec<u32>, Vec<u32>)>;

    /// Runs `block_reduce_test_i64`: one sum per block of
    /// `threads_per_block` consecutive values of `input` (whose length
    /// must be a multiple of `threads_per_block`, itself a multiple of 32).
    fn block_reduce_test(&self, input: &[i64], threads_per_block: u32) -> Result<Vec<i64>>;
}

impl WarpPrimitiveChecks for Gpu {
    fn warp_primitives_test(&self, blocks: u32, threads_per_block: u32) -> Result<WarpResults> {
        const K: &str = WARP_SHUFFLE_TEST.name();
        crate::launch::check_block(K, (threads_per_block, 1, 1))?;
        if !threads_per_block.is_multiple_of(32) || blocks == 0 {
            return Err(Error::invalid(K, "blocks ≥ 1 of a multiple of 32 threads"));
        }
        // Before the output buffers (8 words per thread) are allocated.
        if blocks > crate::launch::MAX_GRID_X {
            return Err(Error::invalid(
                K,
                format!(
                    "grid of {blocks} blocks, more than the limit of {}",
                    crate::launch::MAX_GRID_X
                ),
            ));
        }
        let threads = blocks as usize * threads_per_block as usize;
        self.bind()?;
        let stream = self.stream();
        let mut o32 = self.to_device(&vec![0u32; 8 * threads])?;
        let mut o64 = self.to_device(&vec![0u64; 8 * threads])?;
        // SAFETY: both outputs hold 8 · threads elements; the block size is a multiple of 32.
        unsafe {
            let cfg = LaunchConfig::linear(blocks, threads_per_block);
            let args = (&mut o32, &mut o64, threads);
            self.launch(WARP_SHUFFLE_TEST, cfg, stream, args)
        }?;
        self.synchronize(K)?;
        let mut h32 = vec![0u32; 8 * threads];
        let mut h64 = vec![0u64; 8 * threads];
        o32.copy_to(&mut h32[..])?;
        o64.copy_to(&mut h64[..])?;
        Ok(WarpResults {
            rows32: h32.chunks(threads).map(<[u32]>::to_vec).collect(),
            rows64: h64.chunks(threads).map(<[u64]>::to_vec).collect(),
        })
    }

    fn atomic_primitives_test(&self, n: usize) -> Result<AtomicResults> {
        const K: &str = ATOMIC_TEST.name();
        if n == 0 || n >= i32::MAX as usize {
            return Err(Error::invalid(K, format!("{n} threads: need 1 ≤ n < 2^31")));
        }
        let grid = crate::launch::grid_1d_capped(K, n, 256)?;
        if grid as usize * 256 < n {
            return Err(Error::invalid(K, "too many threads for one launch"));
        }
        self.bind()?;
        let stream = self.stream();
        let mut tickets = self.to_device(&vec![u32::MAX; n])?;
        let mut counters = self.to_device(&[0, 0, u32::MAX, u32::MAX, 0, 0u32])?;
        let mut signed = self.to_device(&[i32::MIN, i32::MAX])?;
        let mut s32 = self.to_device(&[0f32])?;
        let mut s64 = self.to_device(&[0f64])?;
        let mut su64 = self.to_device(&[0u64])?;
        // SAFETY: buffers sized and initialised as atomic_test's # Safety says; n < 2^31.
        unsafe {
            let args = (
                &mut tickets,
                &mut counters,
                &mut signed,
                &mut s32,
                &mut s64,
                &mut su64,
                n,
            );
            self.launch(ATOMIC_TEST, LaunchConfig::linear(grid, 256), stream, args)
        }?;
        self.synchronize(K)?;
        let mut r = AtomicResults {
            tickets: vec![0; n],
            counters: [0; 6],
            signed: [0; 2],
            sum_f32: 0.0,
            sum_f64: 0.0,
            sum_u64: 0,
        };
        tickets.copy_to(&mut r.tickets[..])?;
        counters.copy_to(&mut r.counters[..])?;
        signed.copy_to(&mut r.signed[..])?;
        let (mut a, mut b, mut c) = ([0f32], [0f64], [0u64]);
        s32.copy_to(&mut a[..])?;
        s64.copy_to(&mut b[..])?;
        su64.copy_to(&mut c[..])?;
        (r.sum_f32, r.sum_f64, r.sum_u64) = (a[0], b[0], c[0]);
        Ok(r)
    }

    fn load_primitives_test(&self, input: &[u32]) -> Result<(Vec<u32>, Vec<u32>)> {
        const K: &str = LOAD_TEST.name();
        if input.is_empty() || !input.len().is_multiple_of(4) {
            return Err(Error::invalid(
                K,
                "the input must be a non-empty whole number of 4-word vectors",
            ));
        }
        let vectors = input.len() / 4;
        let grid = crate::launch::grid_1d_capped(K, vectors, 128)?;
        self.bind()?;
        let stream = self.stream();
        // cuMemAlloc returns 256-byte-aligned memory, the simulator 16-byte-aligned
        // buffers: the 16-byte alignment holds.
        let din = self.to_device(input)?;
        let mut out = self.to_device(&vec![0u32; input.len()])?;
        let mut out_cg = self.to_device(&vec![0u32; input.len()])?;
        // SAFETY: din is 16-byte aligned with 4 · vectors words, only read; the outputs
        // hold as many and are separate allocations.
        unsafe {
            let args = (&din, &mut out, &mut out_cg, vectors);
            self.launch(LOAD_TEST, LaunchConfig::linear(grid, 128), stream, args)
        }?;
        self.synchronize(K)?;
        let mut a = vec![0u32; input.len()];
        let mut b = vec![0u32; input.len()];
        out.copy_to(&mut a[..])?;
        out_cg.copy_to(&mut b[..])?;
        Ok((a, b))
    }

    fn block_reduce_test(&self, input: &[i64], threads_per_block: u32) -> Result<Vec<i64>> {
        const K: &str = BLOCK_REDUCE_TEST_I64.name();
        crate::launch::check_block(K, (threads_per_block, 1, 1))?;
        let tpb = threads_per_block as usize;
        if !tpb.is_multiple_of(32) || input.is_empty() || !input.len().is_multiple_of(tpb) {
            return Err(Error::invalid(
                K,
                "the input must be whole blocks of a multiple of 32 threads",
            ));
        }
        let blocks = crate::launch::grid_exact(K, input.len(), threads_per_block, "x")?;
        self.bind()?;
        let stream = self.stream();
        let din = self.to_device(input)?;
        let mut out = self.to_device(&vec![0i64; blocks as usize])?;
        // SAFETY: input holds blocks · tpb values, out one per block; the dynamic shared
        // memory (SHARED_BYTES ≥ 256) is what block_reduce needs.
        unsafe {
            let cfg =
                LaunchConfig::linear(blocks, threads_per_block).with_shared(super::SHARED_BYTES);
            let args = (&din, &mut out);
            self.launch(BLOCK_REDUCE_TEST_I64, cfg, stream, args)
        }?;
        self.synchronize(K)?;
        let mut h = vec![0i64; blocks as usize];
        out.copy_to(&mut h[..])?;
        Ok(h)
    }
}
