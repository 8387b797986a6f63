//! Hopper (sm_90a): warpgroup MMA (`wgmma.mma_async`) from shared-memory
//! matrix descriptors, `mbarrier` transaction barriers, 3-D TMA loads
//! (`cp.async.bulk.tensor`) and `setmaxnreg`.
//!
//! These instructions exist on sm_90a alone: a kernel that uses them is
//! compiled under `#[cfg(target_feature = "sm_90a")]`, which the builder's
//! sm_90a build sets (`KernelBuild::cubins(&["sm_90a"])`); the portable PTX
//! never holds it. On the host the simulator models them (`sim`'s `hopper`
//! module, described in `docs/simulator.md`): mbarrier phases and
//! transaction counts, TMA boxes through the simulator's own tensor maps
//! (`sim::encode_tiled`, on the host, which the host crate writes
//! where the GPU has the driver's), and wgmma from its descriptors, its
//! accumulators poisoned until the `wait_group` that retires it.
//!
//! Shared memory is named by its 32-bit shared-window address, as in
//! [`shared`](crate::shared).
//!
//! # The operand layout wgmma reads
//! [`sw128_descriptor`] describes a K-major tile written by a TMA load with
//! the 128-byte swizzle: rows of 128 bytes (64 16-bit or 32 32-bit elements
//! along K), eight rows (1024 bytes, the swizzle's period) a core-matrix
//! group, the tile 1024-byte aligned. One `k16` (16-bit) or `k8` (tf32) step
//! is 32 bytes of each row: the descriptor of step `s` is that of the tile
//! with its start advanced by `32 s` bytes (the hardware applies the swizzle
//! to the address it forms, so the advanced start reads the right chunks).
//!
//! # Accumulator fragment (m64nN, f32)
//! Thread `t` of the warpgroup (warp `w = t / 32`, lane `l = t % 32`) holds,
//! for each 8-column slab `j < N / 8`, `acc[4j]`, `acc[4j + 1]` at row
//! `16 w + l / 4`, columns `8 j + 2 (l % 4)` and `+ 1`, and `acc[4j + 2]`,
//! `acc[4j + 3]` at the row 8 below.
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// A tensor map (`CUtensorMap`): 128 opaque bytes the driver writes
/// (`cuTensorMapEncodeTiled`), 64-byte aligned, read by the TMA unit.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMap(pub [u64; 16]);

/// The number of f32 accumulators a thread holds for one m64n256 wgmma.
pub const N256_ACCUMULATORS: usize = 128;
/// The number of f32 accumulators a thread holds for one m64n128 wgmma.
pub const N128_ACCUMULATORS: usize = 64;

/// The shared-memory descriptor of a K-major operand tile at shared address
/// `addr` (1024-byte aligned at the tile's start; advanced by 32-byte steps
/// along K), laid out by a TMA load with the 128-byte swizzle: 8-row groups
/// 1024 bytes apart (the stride byte offset), the leading byte offset unused
/// (1, by convention), swizzle mode 1 (128 bytes) in bits 62–63.
#[inline(always)]
pub const fn sw128_descriptor(addr: u32) -> u64 {
    let start = ((addr as u64) & 0x3_FFFF) >> 4;
    let leading = 1u64;
    let stride = 1024u64 >> 4;
    start | (leading << 16) | (stride << 32) | (1u64 << 62)
}

/// The shared-memory descriptor of an MN-major operand tile at shared
/// address `addr` (1024-byte aligned at the tile's start; advanced by
/// 2048-byte steps along K, 16 rows of 128 bytes), laid out by TMA loads
/// with the 128-byte swizzle in boxes of 64 MN elements (one 128-byte row)
/// by 64 K rows: inside a box, row `r` holds K index `r`, 8-row groups 1024
/// bytes apart (the stride byte offset); the boxes, each the next 64
/// elements of M or N, `box_bytes` apart (the leading byte offset); swizzle
/// mode 1 (128 bytes). This is the PTX ISA's MN-major 128-byte swizzled
/// canonical layout (CuTe writes it `Swizzle<3,4,3> o ((T,8,m),(8,k)) :
/// ((1,T,LBO),(8T,SBO))`, `T` the elements of 16 bytes).
#[inline(always)]
pub const fn sw128_mn_descriptor(addr: u32, box_bytes: u32) -> u64 {
    let start = ((addr as u64) & 0x3_FFFF) >> 4;
    let leading = ((box_bytes as u64) & 0x3_FFFF) >> 4;
    let stride = 1024u64 >> 4;
    start | (leading << 16) | (stride << 32) | (1u64 << 62)
}

/// A transaction barrier (`mbarrier`, 8 bytes of shared memory, 8-byte
/// aligned), by shared address. Its phase completes when the expected
/// number of arrivals has come and every byte a TMA load announced
/// (`expect-tx`) has landed; the phases alternate parity 0, 1, 0, …
#[derive(Clone, Copy)]
pub struct MBarrier {
    addr: u32,
}

impl MBarrier {
    /// The barrier at shared address `addr`.
    ///
    /// # Safety
    /// `addr` is the shared address of 8 bytes, 8-byte aligned, that are a
    /// barrier for the kernel's lifetime (initialised by one thread with
    /// [`init`](Self::init) before any other use, with
    /// [`fence_barrier_init`] and a block barrier in between).
    #[inline(always)]
    pub const unsafe fn at(addr: u32) -> Self {
        Self { addr }
    }

    /// The barrier's shared address.
    #[inline(always)]
    pub const fn address(&self) -> u32 {
        self.addr
    }

    /// `mbarrier.init`: the phase completes after `count` arrivals.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn init(&self, count: u32) {
        imp::mbarrier_init(self.addr, count)
    }

    /// `mbarrier.arrive`: this thread's arrival on the current phase.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn arrive(&self) {
        imp::mbarrier_arrive(self.addr)
    }

    /// `mbarrier.arrive.expect_tx`: this thread's arrival, announcing `bytes`
    /// that asynchronous copies (TMA loads naming this barrier) will bring in
    /// the current phase.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn arrive_expect_tx(&self, bytes: u32) {
        imp::mbarrier_arrive_expect_tx(self.addr, bytes)
    }

    /// `mbarrier.try_wait.parity`: whether the phase of parity `parity` has
    /// completed (waits a while in hardware before saying no).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn try_wait(&self, parity: u32) -> bool {
        imp::mbarrier_try_wait(self.addr, parity)
    }

    /// Waits until the phase of parity `parity` has completed; then the
    /// shared memory the phase's TMA loads wrote is visible to this thread.
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    #[inline(always)]
    pub fn wait(&self, parity: u32) {
        while !self.try_wait(parity) {}
    }
}

/// `fence.mbarrier_init.release.cluster`: makes the barriers this thread
/// initialised visible to the asynchronous proxy (TMA) before a block
/// barrier hands them to the other threads.
#[inline(always)]
pub fn fence_barrier_init() {
    imp::fence_barrier_init()
}

/// `fence.proxy.tensormap::generic.acquire.sys`: makes a tensor map that
/// the host wrote into global memory (a copy ordered before the launch)
/// visible to the TMA unit, which reads it through the tensor-map proxy;
/// needed before the thread's first use of a map whose memory held another
/// map before (CUDA C programming guide, "Using TMA to transfer
/// multi-dimensional arrays").
///
/// # Safety
/// `map` is the generic address of a 64-byte aligned, 128-byte tensor map in
/// global memory.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub unsafe fn acquire_tensor_map(map: u64) {
    // SAFETY: the caller's promise.
    unsafe { imp::acquire_tensor_map(map) }
}

/// `prefetch.tensormap`: brings a tensor map (in global memory) into the
/// TMA unit's cache.
///
/// # Safety
/// `map` is the generic address of a 64-byte aligned, 128-byte tensor map
/// made by the driver (`cuTensorMapEncodeTiled`).
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub unsafe fn prefetch_tensor_map(map: u64) {
    // SAFETY: the caller's promise.
    unsafe { imp::prefetch_tensor_map(map) }
}

/// `cp.async.bulk.tensor.3d`: loads the box at coordinates `(c0, c1, c2)`
/// (innermost first, in elements) of the tensor `map` describes into shared
/// memory at `dst`, swizzled as the map says, elements outside the tensor
/// filled with zeros; its bytes count towards `barrier`'s current phase
/// (announced before with [`MBarrier::arrive_expect_tx`]).
///
/// # Safety
/// `map` is the generic address of a tensor map made by the driver (in
/// global memory, 64-byte aligned); `dst` is the shared address of the box's
/// bytes (1024-byte aligned for the 128-byte swizzle), which nothing else
/// reads or writes until `barrier`'s phase completes.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub unsafe fn tma_load_3d(dst: u32, map: u64, barrier: &MBarrier, c0: i32, c1: i32, c2: i32) {
    // SAFETY: the caller's promise.
    unsafe { imp::tma_load_3d(dst, map, barrier.addr, c0, c1, c2) }
}

/// `wgmma.fence`: orders this thread's register accesses to the
/// accumulators before the wgmma that follow (needed before the first
/// wgmma, and whenever the accumulators were touched in between).
#[inline(always)]
pub fn wgmma_fence() {
    imp::wgmma_fence()
}

/// `wgmma.commit_group`: closes the group of the wgmma issued since the
/// last commit.
#[inline(always)]
pub fn wgmma_commit_group() {
    imp::wgmma_commit_group()
}

/// `wgmma.wait_group N`: waits until at most `N` committed groups are still
/// running; the accumulators of the others may then be read, and the shared
/// memory they read be overwritten.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub fn wgmma_wait_group<const N: u32>() {
    imp::wgmma_wait_group::<N>()
}

/// `setmaxnreg.inc`: raises this warpgroup's register limit to `N` (a
/// multiple of 8 in 24..=256), waiting for the registers to be free.
#[inline(always)]
pub fn setmaxnreg_inc<const N: u32>() {
    imp::setmaxnreg_inc::<N>()
}

/// `setmaxnreg.dec`: lowers this warpgroup's register limit to `N`,
/// releasing the rest to the block's other warpgroups.
#[inline(always)]
pub fn setmaxnreg_dec<const N: u32>() {
    imp::setmaxnreg_dec::<N>()
}

/// `cp.async.bulk.tensor.3d` to global memory: stores the box of shared
/// memory at `src` (laid out and swizzled as `map` says) to the tensor `map`
/// describes at coordinates `(c0, c1, c2)` (innermost first, in elements);
/// elements of the box outside the tensor are not written. The store joins
/// this thread's current bulk-async group ([`bulk_commit_group`]); `src`
/// may be written again once [`bulk_wait_group_read`] says the group was
/// read, and the global writes are complete after [`bulk_wait_group`].
///
/// # Safety
/// `map` is the generic address of a tensor map made by the driver (in
/// global memory, 64-byte aligned) whose tensor only this store writes
/// there; `src` is the shared address of the box's bytes (1024-byte
/// aligned for the 128-byte swizzle), written before by this block and
/// made visible to the async proxy ([`fence_proxy_async_shared`]), not
/// written again until the group's read completes.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub unsafe fn tma_store_3d(map: u64, src: u32, c0: i32, c1: i32, c2: i32) {
    // SAFETY: the caller's promise.
    unsafe { imp::tma_store_3d(map, src, c0, c1, c2) }
}

/// `cp.async.bulk.commit_group`: closes this thread's group of the bulk
/// stores issued since the last commit.
#[inline(always)]
pub fn bulk_commit_group() {
    imp::bulk_commit_group()
}

/// `cp.async.bulk.wait_group.read N`: waits until at most `N` of this
/// thread's committed bulk groups still read their shared memory (the
/// others' sources may be written again).
#[inline(always)]
pub fn bulk_wait_group_read<const N: u32>() {
    imp::bulk_wait_group_read::<N>()
}

/// `cp.async.bulk.wait_group N`: waits until at most `N` of this thread's
/// committed bulk groups are incomplete (the others' global writes done).
#[inline(always)]
pub fn bulk_wait_group<const N: u32>() {
    imp::bulk_wait_group::<N>()
}

/// `fence.proxy.async.shared::cta`: makes this thread's earlier writes to
/// shared memory visible to the async proxy (a bulk store that a barrier
/// orders after them reads them).
#[inline(always)]
pub fn fence_proxy_async_shared() {
    imp::fence_proxy_async_shared()
}

/// `barrier.sync id, threads`: a barrier of `threads` threads (a multiple
/// of 32, whole warps) on the block's named barrier `id` (1..=15; 0 is
/// [`crate::sync::sync_threads`]'s), which the other warps of the block do
/// not take part in. The non-aligned form, as `sync_threads`: LLVM may
/// duplicate it into the arms of a branch (see the builder's barrier
/// check).
///
/// # Safety
/// Every warp that uses barrier `id` passes the same `threads`, all of
/// their threads reach the call, and exactly `threads / 32` warps meet at
/// each use.
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[inline(always)]
pub unsafe fn named_barrier_sync(id: u32, threads: u32) {
    // SAFETY: the caller's promise.
    unsafe { imp::named_barrier_sync(id, threads) }
}

/// An element type wgmma multiplies, with f32 accumulators: `bf16` and `f16`
/// (`k16`, K-major from 128-byte rows of 64 elements) and `tf32` (`k8`, 32
/// elements a row). Each k step reads 32 bytes of each operand row.
pub trait WgmmaInput {
    /// Bytes of one element (2, or 4 for tf32).
    const BYTES: u32;
    /// Whether wgmma reads this type from MN-major tiles (its transpose
    /// flags): the 16-bit types; tf32 is K-major only.
    const TRANSPOSABLE: bool;
    /// `acc += A · Bᵀ` for one m64n256 k step: `a` and `b` the descriptors
    /// of the tiles (64 rows of A, 256 rows of B): K-major
    /// ([`sw128_descriptor`]), or MN-major ([`sw128_mn_descriptor`]) where
    /// `A_MN` or `B_MN` says so (wgmma's transpose flags; a compile-time
    /// error for a type that is not [`TRANSPOSABLE`](Self::TRANSPOSABLE)).
    ///
    /// # Safety
    /// Issued by all 128 threads of a warpgroup together, after a
    /// [`wgmma_fence`]; the tiles are in shared memory and stay unchanged,
    /// and the accumulators unread, until a [`wgmma_wait_group`] covers it.
    unsafe fn mma_m64n256<const A_MN: bool, const B_MN: bool>(
        acc: &mut [f32; N256_ACCUMULATORS],
        a: u64,
        b: u64,
    );
    /// `acc += A · Bᵀ` for one m64n128 k step: as
    /// [`mma_m64n256`](Self::mma_m64n256), B's tile 128 rows (columns of C).
    ///
    /// # Safety
    /// As [`mma_m64n256`](Self::mma_m64n256).
    unsafe fn mma_m64n128<const A_MN: bool, const B_MN: bool>(
        acc: &mut [f32; N128_ACCUMULATORS],
        a: u64,
        b: u64,
    );
}

/// bf16 inputs, as raw bits (`half::bf16` on the host).
pub struct Bf16;
/// f16 inputs, as raw bits (`half::f16` on the host).
pub struct F16;
/// tf32 inputs: f32 in memory, read with tf32's 10-bit mantissa.
pub struct Tf32;

/// Calls `$m!($args; 0 1 … 127)`: the accumulator indices of an m64n256
/// fragment, for macros that name each accumulator by a constant index (as
/// an asm operand, or in an epilogue that must not index the fragment at run
/// time: that would put it in local memory).
#[macro_export]
macro_rules! with_n256_indices {
    ($m:ident!($($args:tt)*)) => {
        $m!($($args)*;
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29
            30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56
            57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83
            84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107
            108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127
        )
    };
}

/// Calls `$m!($args; 0 1 … 63)`: the accumulator indices of an m64n128
/// fragment (see [`with_n256_indices`]).
#[macro_export]
macro_rules! with_n128_indices {
    ($m:ident!($($args:tt)*)) => {
        $m!($($args)*;
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29
            30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56
            57 58 59 60 61 62 63
        )
    };
}

/// One `wgmma.mma_async` of any N: its accumulator operands are the indices
/// the macro is given (`with_n256_indices!` or `with_n128_indices!`), `$shape`
/// names the matching `m64nNk*`.
#[cfg(target_arch = "nvptx64")]
macro_rules! wgmma_mma {
    ($acc:ident, $a:ident, $b:ident, $shape:literal, $types:literal, $tail:literal;
     $first:literal $($i:literal)*) => {
        // SAFETY: the caller's promise (all of the warpgroup, fenced, tiles
        // in place); the accumulators are read and written as registers.
        unsafe {
            asm!(
                "{{",
                ".reg .pred p;",
                "setp.ne.b32 p, 1, 0;",
                concat!(
                    "wgmma.mma_async.sync.aligned.", $shape, ".f32.", $types, " {{",
                    "{", $first, "}" $(, ", {", $i, "}")*,
                    "}}, {a}, {b}, p, 1, 1", $tail, ";"
                ),
                "}}",
                inout(reg32) $acc[$first],
                $(inout(reg32) $acc[$i],)*
                a = in(reg64) $a,
                b = in(reg64) $b,
                options(nostack),
            )
        }
    };
}

#[cfg(target_arch = "nvptx64")]
macro_rules! fence_indices {
    ($acc:ident; $($i:literal)*) => {
        // SAFETY: an empty template (a PTX comment naming the registers).
        unsafe {
            asm!(
                concat!("//", $(" {", $i, "}"),*),
                $(inout(reg32) $acc[$i],)*
                options(nostack, nomem, preserves_flags),
            )
        }
    };
}

/// Pins the accumulators in place for the compiler: an empty instruction
/// that reads and writes each of them, so that no read or write of one moves
/// across it. Issued after [`wgmma_wait_group`] (before the accumulators are
/// read) and before the wgmma of a k loop (CUTLASS's
/// `warpgroup_fence_operand`): the wgmma write their registers
/// asynchronously, which the compiler cannot see.
///
/// For the fragment of an m64n256 ([`N256_ACCUMULATORS`]) or an m64n128
/// ([`N128_ACCUMULATORS`]) wgmma; another `N` does not compile.
#[inline(always)]
pub fn fence_accumulators<const N: usize>(acc: &mut [f32; N]) {
    const {
        assert!(
            N == N256_ACCUMULATORS || N == N128_ACCUMULATORS,
            "a wgmma fragment is 128 (m64n256) or 64 (m64n128) accumulators"
        )
    };
    #[cfg(target_arch = "nvptx64")]
    {
        // N is a constant: one arm remains, its conversion folded away.
        let acc: &mut [f32] = acc;
        if let Ok(acc) = <&mut [f32; N256_ACCUMULATORS]>::try_from(&mut *acc) {
            crate::with_n256_indices!(fence_indices!(acc));
        } else if let Ok(acc) = <&mut [f32; N128_ACCUMULATORS]>::try_from(acc) {
            crate::with_n128_indices!(fence_indices!(acc));
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    let _ = acc;
}

#[cfg(target_arch = "nvptx64")]
macro_rules! wgmma_input {
    ($t:ty, $bytes:literal, $shape:literal, $shape128:literal, $types:literal, transposable) => {
        impl WgmmaInput for $t {
            const BYTES: u32 = $bytes;
            const TRANSPOSABLE: bool = true;
            #[inline(always)]
            unsafe fn mma_m64n256<const A_MN: bool, const B_MN: bool>(
                acc: &mut [f32; N256_ACCUMULATORS],
                a: u64,
                b: u64,
            ) {
                // The flags are immediates: one instruction per pair, the
                // others removed at compile time.
                match (A_MN, B_MN) {
                    (false, false) => {
                        crate::with_n256_indices!(wgmma_mma!(acc, a, b, $shape, $types, ", 0, 0"))
                    }
                    (false, true) => {
                        crate::with_n256_indices!(wgmma_mma!(acc, a, b, $shape, $types, ", 0, 1"))
                    }
                    (true, false) => {
                        crate::with_n256_indices!(wgmma_mma!(acc, a, b, $shape, $types, ", 1, 0"))
                    }
                    (true, true) => {
                        crate::with_n256_indices!(wgmma_mma!(acc, a, b, $shape, $types, ", 1, 1"))
                    }
                }
            }
            #[inline(always)]
            unsafe fn mma_m64n128<const A_MN: bool, const B_MN: bool>(
                acc: &mut [f32; N128_ACCUMULATORS],
                a: u64,
                b: u64,
            ) {
                match (A_MN, B_MN) {
                    (false, false) => crate::with_n128_indices!(wgmma_mma!(
                        acc, a, b, $shape128, $types, ", 0, 0"
                    )),
                    (false, true) => crate::with_n128_indices!(wgmma_mma!(
                        acc, a, b, $shape128, $types, ", 0, 1"
                    )),
                    (true, false) => crate::with_n128_indices!(wgmma_mma!(
                        acc, a, b, $shape128, $types, ", 1, 0"
                    )),
                    (true, true) => crate::with_n128_indices!(wgmma_mma!(
                        acc, a, b, $shape128, $types, ", 1, 1"
                    )),
                }
            }
        }
    };
    ($t:ty, $bytes:literal, $shape:literal, $shape128:literal, $types:literal, k_major) => {
        impl WgmmaInput for $t {
            const BYTES: u32 = $bytes;
            const TRANSPOSABLE: bool = false;
            #[inline(always)]
            unsafe fn mma_m64n256<const A_MN: bool, const B_MN: bool>(
                acc: &mut [f32; N256_ACCUMULATORS],
                a: u64,
                b: u64,
            ) {
                const { assert!(!A_MN && !B_MN, "this wgmma type reads K-major tiles only") };
                crate::with_n256_indices!(wgmma_mma!(acc, a, b, $shape, $types, ""))
            }
            #[inline(always)]
            unsafe fn mma_m64n128<const A_MN: bool, const B_MN: bool>(
                acc: &mut [f32; N128_ACCUMULATORS],
                a: u64,
                b: u64,
            ) {
                const { assert!(!A_MN && !B_MN, "this wgmma type reads K-major tiles only") };
                crate::with_n128_indices!(wgmma_mma!(acc, a, b, $shape128, $types, ""))
            }
        }
    };
}
/// One wgmma on the simulator: `acc` (the fragment of an m64nN, N its
/// length times two) `+= A · B` from the descriptors, for `T`'s element
/// `ty`; K-major only for a type that is not transposable (a compile-time
/// error otherwise).
///
/// # Safety
/// As [`WgmmaInput::mma_m64n256`]: the accumulators stay unread and
/// unwritten until a wait_group retires this.
#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
unsafe fn simulated_wgmma<T: WgmmaInput + ?Sized, const A_MN: bool, const B_MN: bool>(
    acc: &mut [f32],
    a: u64,
    b: u64,
    ty: crate::sim::MmaType,
) {
    const {
        assert!(
            T::TRANSPOSABLE || (!A_MN && !B_MN),
            "this wgmma type reads K-major tiles only"
        )
    };
    // SAFETY: the caller's promise.
    unsafe {
        crate::sim::hopper_ops::wgmma(
            acc.as_mut_ptr(),
            2 * acc.len() as u32,
            a,
            b,
            A_MN,
            B_MN,
            ty,
            std::panic::Location::caller(),
        )
    }
}

#[cfg(not(target_arch = "nvptx64"))]
macro_rules! wgmma_input {
    ($t:ident, $bytes:literal, $shape:literal, $shape128:literal, $types:literal, $major:ident) => {
        impl WgmmaInput for $t {
            const BYTES: u32 = $bytes;
            const TRANSPOSABLE: bool = wgmma_input!(@transposable $major);
            #[track_caller]
            #[inline(never)]
            unsafe fn mma_m64n256<const A_MN: bool, const B_MN: bool>(
                acc: &mut [f32; N256_ACCUMULATORS],
                a: u64,
                b: u64,
            ) {
                // SAFETY: the caller's promise.
                unsafe { simulated_wgmma::<Self, A_MN, B_MN>(acc, a, b, crate::sim::MmaType::$t) }
            }
            #[track_caller]
            #[inline(never)]
            unsafe fn mma_m64n128<const A_MN: bool, const B_MN: bool>(
                acc: &mut [f32; N128_ACCUMULATORS],
                a: u64,
                b: u64,
            ) {
                // SAFETY: the caller's promise.
                unsafe { simulated_wgmma::<Self, A_MN, B_MN>(acc, a, b, crate::sim::MmaType::$t) }
            }
        }
    };
    (@transposable transposable) => {
        true
    };
    (@transposable k_major) => {
        false
    };
}
// The operands' transpose flags (imm-trans-a, imm-trans-b: 1 reads an
// MN-major tile) exist for 16-bit types alone; tf32 is K-major only.
wgmma_input!(
    Bf16,
    2,
    "m64n256k16",
    "m64n128k16",
    "bf16.bf16",
    transposable
);
wgmma_input!(F16, 2, "m64n256k16", "m64n128k16", "f16.f16", transposable);
wgmma_input!(Tf32, 4, "m64n256k8", "m64n128k8", "tf32.tf32", k_major);

#[cfg(target_arch = "nvptx64")]
mod imp {
    use core::arch::asm;

    #[inline(always)]
    pub fn mbarrier_init(addr: u32, count: u32) {
        // SAFETY: MBarrier::at's promise: addr is a barrier's 8 shared bytes.
        unsafe {
            asm!("mbarrier.init.shared::cta.b64 [{a}], {c};", a = in(reg32) addr,
                 c = in(reg32) count, options(nostack))
        }
    }

    #[inline(always)]
    pub fn mbarrier_arrive(addr: u32) {
        // SAFETY: as above.
        unsafe {
            asm!("mbarrier.arrive.shared::cta.b64 _, [{a}];", a = in(reg32) addr,
                 options(nostack))
        }
    }

    #[inline(always)]
    pub fn mbarrier_arrive_expect_tx(addr: u32, bytes: u32) {
        // SAFETY: as above.
        unsafe {
            asm!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{a}], {b};",
                 a = in(reg32) addr, b = in(reg32) bytes, options(nostack))
        }
    }

    #[inline(always)]
    pub fn mbarrier_try_wait(addr: u32, parity: u32) -> bool {
        let done: u32;
        // SAFETY: as above; the wait has acquire semantics for the phase.
        unsafe {
            asm!(
                "{{",
                ".reg .pred p;",
                "mbarrier.try_wait.parity.shared::cta.b64 p, [{a}], {ph};",
                "selp.u32 {d}, 1, 0, p;",
                "}}",
                a = in(reg32) addr, ph = in(reg32) parity, d = out(reg32) done,
                options(nostack),
            )
        }
        done != 0
    }

    #[inline(always)]
    pub fn fence_barrier_init() {
        // SAFETY: a fence only orders memory operations.
        unsafe { asm!("fence.mbarrier_init.release.cluster;", options(nostack)) }
    }

    #[inline(always)]
    pub unsafe fn acquire_tensor_map(map: u64) {
        // SAFETY: the caller's promise: map is a tensor map in global memory.
        unsafe {
            asm!("fence.proxy.tensormap::generic.acquire.sys [{m}], 128;", m = in(reg64) map,
                 options(nostack))
        }
    }

    #[inline(always)]
    pub unsafe fn prefetch_tensor_map(map: u64) {
        // SAFETY: the caller's promise: map is a tensor map.
        unsafe { asm!("prefetch.tensormap [{m}];", m = in(reg64) map, options(nostack)) }
    }

    #[inline(always)]
    pub unsafe fn tma_load_3d(dst: u32, map: u64, barrier: u32, c0: i32, c1: i32, c2: i32) {
        // SAFETY: the caller's promise: a tensor map, a free box of shared
        // memory, a barrier whose phase counts the bytes.
        unsafe {
            asm!(
                "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes \
                 [{d}], [{m}, {{{c0}, {c1}, {c2}}}], [{b}];",
                d = in(reg32) dst, m = in(reg64) map, b = in(reg32) barrier,
                c0 = in(reg32) c0, c1 = in(reg32) c1, c2 = in(reg32) c2,
                options(nostack),
            )
        }
    }

    #[inline(always)]
    pub fn wgmma_fence() {
        // SAFETY: orders register and shared accesses; no operands.
        unsafe { asm!("wgmma.fence.sync.aligned;", options(nostack)) }
    }

    #[inline(always)]
    pub fn wgmma_commit_group() {
        // SAFETY: as above.
        unsafe { asm!("wgmma.commit_group.sync.aligned;", options(nostack)) }
    }

    #[inline(always)]
    pub fn wgmma_wait_group<const N: u32>() {
        // SAFETY: as above.
        unsafe { asm!("wgmma.wait_group.sync.aligned {n};", n = const N, options(nostack)) }
    }

    #[inline(always)]
    pub fn setmaxnreg_inc<const N: u32>() {
        // SAFETY: changes the register budget of the warpgroup only.
        unsafe { asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const N, options(nostack)) }
    }

    #[inline(always)]
    pub fn setmaxnreg_dec<const N: u32>() {
        // SAFETY: as above.
        unsafe { asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const N, options(nostack)) }
    }

    #[inline(always)]
    pub unsafe fn tma_store_3d(map: u64, src: u32, c0: i32, c1: i32, c2: i32) {
        // SAFETY: the caller's promise: a tensor map, a written box of
        // shared memory, fenced for the async proxy.
        unsafe {
            asm!(
                "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group \
                 [{m}, {{{c0}, {c1}, {c2}}}], [{s}];",
                m = in(reg64) map, s = in(reg32) src,
                c0 = in(reg32) c0, c1 = in(reg32) c1, c2 = in(reg32) c2,
                options(nostack),
            )
        }
    }

    #[inline(always)]
    pub fn bulk_commit_group() {
        // SAFETY: closes this thread's bulk group; no operands.
        unsafe { asm!("cp.async.bulk.commit_group;", options(nostack)) }
    }

    #[inline(always)]
    pub fn bulk_wait_group_read<const N: u32>() {
        // SAFETY: waits only.
        unsafe { asm!("cp.async.bulk.wait_group.read {n};", n = const N, options(nostack)) }
    }

    #[inline(always)]
    pub fn bulk_wait_group<const N: u32>() {
        // SAFETY: waits only.
        unsafe { asm!("cp.async.bulk.wait_group {n};", n = const N, options(nostack)) }
    }

    #[inline(always)]
    pub fn fence_proxy_async_shared() {
        // SAFETY: a fence; no operands.
        unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) }
    }

    #[inline(always)]
    pub unsafe fn named_barrier_sync(id: u32, threads: u32) {
        // SAFETY: the caller's promise (whole warps, one count per id).
        unsafe {
            asm!("barrier.sync {i}, {t};", i = in(reg32) id, t = in(reg32) threads,
                 options(nostack))
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
mod imp {
    //! The simulator's Hopper (`sim`'s `hopper` module): each call names
    //! its caller's line in what it reports.
    use std::panic::Location;

    use crate::sim::hopper_ops as sim;

    #[track_caller]
    #[inline(never)]
    pub fn mbarrier_init(addr: u32, count: u32) {
        sim::mbarrier_init(addr, count, Location::caller())
    }

    #[track_caller]
    #[inline(never)]
    pub fn mbarrier_arrive(addr: u32) {
        sim::mbarrier_arrive(addr, 0, Location::caller())
    }

    #[track_caller]
    #[inline(never)]
    pub fn mbarrier_arrive_expect_tx(addr: u32, bytes: u32) {
        sim::mbarrier_arrive(addr, bytes, Location::caller())
    }

    #[track_caller]
    #[inline(never)]
    pub fn mbarrier_try_wait(addr: u32, parity: u32) -> bool {
        sim::mbarrier_try_wait(addr, parity, Location::caller())
    }

    /// The simulator's barriers are visible to its TMA at once.
    pub fn fence_barrier_init() {}

    #[track_caller]
    #[inline(never)]
    pub unsafe fn acquire_tensor_map(map: u64) {
        // SAFETY: the caller's promise: 128 readable bytes at `map`.
        unsafe { sim::check_tensor_map(map, "fence.proxy.tensormap", Location::caller()) }
    }

    #[track_caller]
    #[inline(never)]
    pub unsafe fn prefetch_tensor_map(map: u64) {
        // SAFETY: as above.
        unsafe { sim::check_tensor_map(map, "prefetch.tensormap", Location::caller()) }
    }

    #[track_caller]
    #[inline(never)]
    pub unsafe fn tma_load_3d(dst: u32, map: u64, barrier: u32, c0: i32, c1: i32, c2: i32) {
        // SAFETY: the caller's promise: a tensor map at `map`.
        unsafe { sim::tma_load(dst, map, barrier, &[c0, c1, c2], Location::caller()) }
    }

    pub fn wgmma_fence() {
        sim::wgmma_fence()
    }

    pub fn wgmma_commit_group() {
        sim::wgmma_commit()
    }

    #[track_caller]
    #[inline(never)]
    pub fn wgmma_wait_group<const N: u32>() {
        sim::wgmma_wait(N, Location::caller())
    }

    #[track_caller]
    #[inline(never)]
    pub unsafe fn tma_store_3d(map: u64, src: u32, c0: i32, c1: i32, c2: i32) {
        // SAFETY: the caller's promise: a tensor map at `map`, its tensor
        // writable.
        unsafe { sim::tma_store(map, src, &[c0, c1, c2], Location::caller()) }
    }

    /// The simulator's bulk stores are made at their issue: the groups
    /// are complete when committed.
    pub fn bulk_commit_group() {}

    /// As [`bulk_commit_group`].
    pub fn bulk_wait_group_read<const N: u32>() {}

    /// As [`bulk_commit_group`].
    pub fn bulk_wait_group<const N: u32>() {}

    /// The simulator's shared memory is one proxy: a no-op.
    pub fn fence_proxy_async_shared() {}

    #[track_caller]
    #[inline(never)]
    pub unsafe fn named_barrier_sync(id: u32, threads: u32) {
        sim::named_barrier(id, threads, Location::caller())
    }

    /// Registers are not modelled: a no-op.
    pub fn setmaxnreg_inc<const N: u32>() {
        const {
            assert!(
                N.is_multiple_of(8) && N >= 24 && N <= 256,
                "setmaxnreg: a multiple of 8 in 24..=256"
            )
        };
    }

    /// As [`setmaxnreg_inc`].
    pub fn setmaxnreg_dec<const N: u32>() {
        const {
            assert!(
                N.is_multiple_of(8) && N >= 24 && N <= 256,
                "setmaxnreg: a multiple of 8 in 24..=256"
            )
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_swizzled_descriptor_packs_address_strides_and_mode() {
        let d = sw128_descriptor(0x4400);
        assert_eq!(d & 0x3FFF, 0x4400 >> 4);
        assert_eq!((d >> 16) & 0x3FFF, 1);
        assert_eq!((d >> 32) & 0x3FFF, 64);
        assert_eq!(d >> 62, 1);
        // A k step is 32 bytes: two units of the start address.
        assert_eq!(sw128_descriptor(0x4400 + 32) - d, 2);
    }

    #[test]
    fn the_mn_major_descriptor_packs_the_box_stride_as_leading_offset() {
        let d = sw128_mn_descriptor(0x8000, 8192);
        assert_eq!(d & 0x3FFF, 0x8000 >> 4);
        assert_eq!((d >> 16) & 0x3FFF, 8192 >> 4);
        assert_eq!((d >> 32) & 0x3FFF, 64);
        assert_eq!(d >> 62, 1);
        // A k16 step is 16 rows of 128 bytes: 128 units of the start.
        assert_eq!(sw128_mn_descriptor(0x8000 + 2048, 8192) - d, 128);
    }
}
