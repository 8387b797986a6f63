//! Block radix rank and block radix sort (CUB's `BlockRadixRankMatch` and
//! `BlockRadixSort`), 8-bit digits, stable.
//!
//! # Keys
//! A [`RadixKey`] maps a key to unsigned bits whose order is the key's
//! order ([`RadixKey::ordered_bits`]): the identity for unsigned integers,
//! the sign bit flipped for signed ones, and for floats the order of
//! `total_cmp` (`-inf < … < -0.0 < +0.0 < … < +inf`) with every NaN, of
//! either sign and any payload, mapped to the largest bits: NaNs sort last,
//! equal to each other (so a stable sort keeps them in input order), as
//! `torch.sort` places them. Descending order complements the bits: the
//! stable descending order (equal keys keep their input order; NaNs first).
//!
//! # Arrangement
//! The block's `ITEMS` keys per thread are in the *warp-striped*
//! arrangement: item `i` of lane `l` of warp `w` is element
//! `w·32·ITEMS + i·32 + l` of the block's tile (each warp owns a contiguous
//! segment, read and written in coalesced rows of 32). Ranks follow that
//! order, which is what makes the sort stable.
//!
//! # Rank
//! [`block_radix_rank`] gives each item its position in the tile sorted by
//! one digit, in three steps (CUB's `BlockRadixRankMatchEarlyCounts`):
//! each item adds one to its warp's counter of its digit (a shared-memory
//! atomic); per digit, the warps' counts are scanned (warp order) and the
//! digits' totals by one warp ([`digit_exclusive_scan`]), which turns each
//! counter into where the warp's first item of that digit goes; then per
//! item, the lanes of a warp holding the same digit find each other with
//! eight ballots, the lowest of them takes their places from the warp's
//! counter (an atomic that returns the count before it), and each lane's
//! rank is that place plus the lanes below it with the digit. The
//! per-warp counters are laid out digit-minor (`w·256 + d`), so that the
//! scan's threads (one digit each) read 32 consecutive words per warp: no
//! bank conflicts.
//!
//! ```
//! use cuda_kernels_device::prelude::*;
//! use cuda_kernels_device::collectives::radix::{block_radix_sort, RadixSortShared};
//! kernels! {
//!     /// Sorts each block's 256·4 u32 in place (one tile per block of 256 threads).
//!     ///
//!     /// # Safety
//!     /// `keys` holds 1024 u32 per block; blocks of 256 threads.
//!     pub fn sort_tiles(keys: *mut u32) as SORT_TILES {
//!         let shared = RadixSortShared {
//!             warp_counts: shared_array!(doc_radix_warp_counts: [u32; 8 * 256]),
//!             digit_counts: shared_array!(doc_radix_digit_counts: [u32; 256]),
//!             digit_starts: shared_array!(doc_radix_digit_starts: [u32; 256]),
//!         };
//!         let exchange = shared_array!(doc_radix_exchange: [u32; 1024]);
//!         let (w, lane) = (thread::thread_idx_x() / 32, warp::lane_id());
//!         // SAFETY: the block's 1024 keys.
//!         let tile = unsafe { keys.add(thread::block_idx_x() as usize * 1024) };
//!         let at = |i: usize| (w * 128 + i as u32 * 32 + lane) as usize;
//!         // SAFETY: at(i) < 1024.
//!         let mut k: [u32; 4] = core::array::from_fn(|i| unsafe { *tile.add(at(i)) });
//!         // SAFETY: the arrays are this block's, of the sizes the sort asserts.
//!         unsafe { block_radix_sort(&mut k, None::<&mut [u32; 4]>, 0, 32, false, &shared, exchange, exchange) };
//!         for (i, key) in k.into_iter().enumerate() {
//!             // SAFETY: at(i) < 1024.
//!             unsafe { *tile.add(at(i)) = key };
//!         }
//!     }
//! }
//! # fn main() {}
//! ```
use crate::shared::{SharedArray, SharedScalar, shared_add_aligned_u32 as shared_add};
use crate::{sync, thread, warp};

/// Bits of one digit.
pub const RADIX_BITS: u32 = 8;
/// Digits (buckets) of one pass: `2^RADIX_BITS`.
pub const RADIX_DIGITS: usize = 1 << RADIX_BITS;

/// A key a radix sort orders: its bits in an order-preserving form.
pub trait RadixKey: SharedScalar + Copy {
    /// Bits of the key (32 or 64): the sort makes `BITS / 8` passes.
    const BITS: u32;

    /// Unsigned bits whose order is the key's (in the low [`BITS`](Self::BITS)
    /// bits): see the [module docs](self) for floats and NaN.
    fn ordered_bits(self) -> u64;

    /// Digit `shift / 8` of the key for a sort in ascending order, or in
    /// descending order when `descending` (the complemented digit).
    #[inline(always)]
    fn digit(self, shift: u32, descending: bool) -> u32 {
        // A 32-bit key's digits come from a 32-bit shift (one instruction;
        // a 64-bit shift by a value the compiler cannot bound is several).
        let bits = if Self::BITS == 32 {
            (self.ordered_bits() as u32).wrapping_shr(shift)
        } else {
            self.ordered_bits().wrapping_shr(shift) as u32
        };
        let d = bits & (RADIX_DIGITS as u32 - 1);
        if descending {
            (RADIX_DIGITS as u32 - 1) - d
        } else {
            d
        }
    }
}

impl RadixKey for u32 {
    const BITS: u32 = 32;
    #[inline(always)]
    fn ordered_bits(self) -> u64 {
        self as u64
    }
}
impl RadixKey for i32 {
    const BITS: u32 = 32;
    #[inline(always)]
    fn ordered_bits(self) -> u64 {
        (self as u32 ^ 0x8000_0000) as u64
    }
}
impl RadixKey for u64 {
    const BITS: u32 = 64;
    #[inline(always)]
    fn ordered_bits(self) -> u64 {
        self
    }
}
impl RadixKey for i64 {
    const BITS: u32 = 64;
    #[inline(always)]
    fn ordered_bits(self) -> u64 {
        self as u64 ^ (1 << 63)
    }
}
impl RadixKey for f32 {
    const BITS: u32 = 32;
    #[inline(always)]
    fn ordered_bits(self) -> u64 {
        let b = self.to_bits();
        // Without a branch: a negative key has every bit flipped, a positive
        // one its sign bit set, and a NaN (the exponent all ones and the
        // mantissa not zero, either sign) becomes all ones. Written as
        // `if`s, this compiled to branches, which diverge in every warp
        // holding keys of both signs: the f32 sort's passes took 17 % longer
        // than the u32 sort's (ncu, H200).
        let flipped = b ^ ((((b as i32) >> 31) as u32) | 0x8000_0000);
        let nan = ((b << 1) > 0xFF00_0000) as u32;
        (flipped | nan.wrapping_neg()) as u64
    }
}
impl RadixKey for f64 {
    const BITS: u32 = 64;
    #[inline(always)]
    fn ordered_bits(self) -> u64 {
        let b = self.to_bits();
        // Without a branch, as for f32.
        let flipped = b ^ ((((b as i64) >> 63) as u64) | (1 << 63));
        let nan = ((b << 1) > 0xFFE0_0000_0000_0000) as u64;
        flipped | nan.wrapping_neg()
    }
}

/// `key`, hidden from the optimiser: a digit computed from the result is
/// computed again, not kept in a register since an earlier computation
/// from the same key. [`RadixRank::count`] and [`RadixRank::rank`] both
/// need each item's digit, and the compiler would otherwise hold all of
/// them between the two (16 registers for 16 items), when registers are
/// what limit a sort's blocks per multiprocessor. One `mov` on the GPU.
#[inline(always)]
pub fn recompute<K: RadixKey>(key: K) -> K {
    #[cfg(target_arch = "nvptx64")]
    {
        if size_of::<K>() == 4 {
            // SAFETY: K is 4 bytes (checked above) and Copy.
            let mut bits: u32 = unsafe { core::mem::transmute_copy(&key) };
            // SAFETY: a register move, no memory.
            unsafe {
                core::arch::asm!("mov.b32 {b}, {b};", b = inout(reg32) bits,
                                 options(pure, nomem, nostack, preserves_flags));
            }
            // SAFETY: the same 4 bytes back.
            return unsafe { core::mem::transmute_copy(&bits) };
        }
        if size_of::<K>() == 8 {
            // SAFETY: K is 8 bytes (checked above) and Copy.
            let mut bits: u64 = unsafe { core::mem::transmute_copy(&key) };
            // SAFETY: a register move, no memory.
            unsafe {
                core::arch::asm!("mov.b64 {b}, {b};", b = inout(reg64) bits,
                                 options(pure, nomem, nostack, preserves_flags));
            }
            // SAFETY: the same 8 bytes back.
            return unsafe { core::mem::transmute_copy(&bits) };
        }
    }
    key
}

/// The shared memory of [`block_radix_rank`]: per-warp digit counters
/// (`N ≥ warps · 256`, digit-minor) and the tile's per-digit counts and
/// exclusive starts.
#[derive(Clone, Copy)]
pub struct RadixSortShared<const N: usize> {
    /// One counter per (warp, digit), at `w · 256 + d`.
    pub warp_counts: SharedArray<u32, N>,
    /// After a rank: how many items of the tile have digit `d`.
    pub digit_counts: SharedArray<u32, RADIX_DIGITS>,
    /// After a rank: where digit `d`'s items start in the ranked tile.
    pub digit_starts: SharedArray<u32, RADIX_DIGITS>,
}

/// The exclusive prefix sum of the 256 `counts`, written to `starts`, by
/// warp 0 alone (lane `l` scans digits `8l … 8l+7` serially, then the
/// lanes' sums with the warp collective [`exclusive_scan`](super::warp::exclusive_scan)).
/// Every thread of the block must call it (it ends with a barrier); `counts`
/// was written before a barrier.
///
/// # Safety
/// No thread writes `counts` or accesses `starts` until the barrier inside.
#[inline(always)]
pub unsafe fn digit_exclusive_scan(
    counts: SharedArray<u32, RADIX_DIGITS>,
    starts: SharedArray<u32, RADIX_DIGITS>,
) {
    const PER_LANE: usize = RADIX_DIGITS / 32;
    if thread::thread_idx_x() < 32 {
        let lane = warp::lane_id() as usize;
        let mut own = [0u32; PER_LANE];
        let mut sum = 0u32;
        for (j, slot) in own.iter_mut().enumerate() {
            *slot = sum;
            // SAFETY: lane·8 + j < 256.
            sum += unsafe { counts.load(lane * PER_LANE + j) };
        }
        // The lanes' sums, scanned by the warp collective.
        let (before, _) = super::warp::exclusive_scan::<super::Sum, u32>(sum);
        for (j, start) in own.into_iter().enumerate() {
            // SAFETY: lane·8 + j < 256; only this lane writes it.
            unsafe { starts.store(lane * PER_LANE + j, before + start) };
        }
    }
    sync::sync_threads();
}

/// Ranks the block's items by one digit each (`digits`, each `< 256`, in
/// the warp-striped arrangement of the [module docs](self)): returns each
/// item's position in the tile stably sorted by digit, and leaves the
/// tile's per-digit counts and starts in `shared` (valid until the next
/// rank). A collective of the whole block: every thread calls it, with a
/// block size that is a multiple of 32 (up to 1024) and `N ≥ warps · 256`
/// (both asserted: a located fault otherwise); `ITEMS ≤ 32` (a compile-time
/// error otherwise: the items' loops are unrolled with [`unroll!`](crate::unroll!)).
///
/// It is [`RadixRank::begin`], [`RadixRank::count`],
/// [`RadixRank::scan_counts`] and [`RadixRank::rank`]; a kernel can call
/// those itself, to use the tile's digit counts before the costlier ranking
/// (onesweep publishes them there), or to recompute each item's digit from
/// its key rather than hold the digits in registers.
///
/// # Safety
/// The shared arrays are the block's own, used by nothing else meanwhile.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[track_caller]
#[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
pub unsafe fn block_radix_rank<const ITEMS: usize, const N: usize>(
    digits: &[u32; ITEMS],
    shared: &RadixSortShared<N>,
    ranks: &mut [u32; ITEMS],
) {
    // SAFETY: forwarded from the caller; digits < 256.
    unsafe {
        let rank = RadixRank::begin(shared);
        rank.count::<ITEMS>(|i| digits[i]);
        rank.scan_counts();
        rank.rank::<ITEMS>(|i| digits[i], |i, r| ranks[i] = r);
    }
}

/// The steps of [`block_radix_rank`] (CUB's `BlockRadixRankMatchEarlyCounts`),
/// for kernels that use the counts before the ranking: the digits are first
/// counted per warp ([`count`](Self::count), one shared atomic per item),
/// the counts scanned into each warp's starting place per digit
/// ([`scan_counts`](Self::scan_counts)), then the items ranked
/// ([`rank`](Self::rank)).
#[derive(Clone, Copy)]
pub struct RadixRank<'a, const N: usize> {
    shared: &'a RadixSortShared<N>,
    warps: usize,
    warp: usize,
    below: u32,
}

impl<'a, const N: usize> RadixRank<'a, N> {
    /// Asserts the block shape and the counters' size, zeroes the counters,
    /// then a barrier. A collective of the block.
    ///
    /// # Safety
    /// As for [`block_radix_rank`].
    #[cfg_attr(target_arch = "nvptx64", inline(always))]
    #[track_caller]
    #[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
    pub unsafe fn begin(shared: &'a RadixSortShared<N>) -> Self {
        let threads = thread::block_dim_x() as usize;
        crate::gpu_assert!(
            threads.is_multiple_of(32) && threads <= 1024,
            "block radix rank: block size not a multiple of 32"
        );
        let warps = threads / 32;
        crate::gpu_assert!(
            N >= warps * RADIX_DIGITS,
            "block radix rank: too little shared memory for the warp counters"
        );
        let t = thread::thread_idx_x() as usize;
        let mut i = t;
        while i < warps * RADIX_DIGITS {
            // SAFETY: i < warps · 256 ≤ N.
            unsafe { shared.warp_counts.store(i, 0) };
            i += threads;
        }
        sync::sync_threads();
        Self {
            shared,
            warps,
            warp: t / 32,
            below: (1u32 << warp::lane_id()) - 1,
        }
    }

    /// Counts the digits of a thread's `ITEMS` items (`digit(i)`, each
    /// `< 256`) in its warp's counters: one shared atomic per item (CUB's
    /// early counts). Lanes of a warp that add to one counter at once are
    /// serialised by the hardware, which skewed keys pay for here; finding
    /// them first (as [`rank`](Self::rank) does) would hold their masks in
    /// registers until the rank, and registers are what limit a sort's
    /// blocks per multiprocessor.
    ///
    /// # Safety
    /// After [`begin`](Self::begin), before [`scan_counts`](Self::scan_counts).
    #[inline(always)]
    pub unsafe fn count<const ITEMS: usize>(&self, digit: impl Fn(usize) -> u32) {
        crate::unroll!(i in ITEMS => {
            // SAFETY: warp · 256 + (d mod 256) < N (asserted in begin).
            unsafe { shared_add(self.counter(digit(i)), 1) };
        });
    }

    /// The shared address of this warp's counter of `digit`.
    #[inline(always)]
    fn counter(&self, digit: u32) -> u32 {
        self.shared
            .warp_counts
            .element_address(self.warp * RADIX_DIGITS + (digit as usize % RADIX_DIGITS))
    }

    /// After [`count`](Self::count): the tile's count of each
    /// digit goes to `digit_counts`, their exclusive scan to `digit_starts`,
    /// and each warp's counter of a digit becomes where the warp's first
    /// item of that digit goes in the ranked tile (the digit's start plus the
    /// earlier warps' counts: warp order is tile order). A collective of the
    /// block; `digit_counts` and `digit_starts` may be read after it.
    ///
    /// # Safety
    /// Every thread of the block counted its items.
    #[inline(always)]
    pub unsafe fn scan_counts(&self) {
        let shared = self.shared;
        sync::sync_threads();
        let (t, threads) = (
            thread::thread_idx_x() as usize,
            thread::block_dim_x() as usize,
        );
        let mut d = t;
        while d < RADIX_DIGITS {
            let mut sum = 0;
            for w in 0..self.warps {
                // SAFETY: w · 256 + d < N; read-only until the next barrier.
                sum += unsafe { shared.warp_counts.load(w * RADIX_DIGITS + d) };
            }
            // SAFETY: d < 256, this thread's digit.
            unsafe { shared.digit_counts.store(d, sum) };
            d += threads;
        }
        sync::sync_threads();
        // SAFETY: digit_counts was written before the barrier above.
        unsafe { digit_exclusive_scan(shared.digit_counts, shared.digit_starts) };
        let mut d = t;
        while d < RADIX_DIGITS {
            // SAFETY: written before digit_exclusive_scan's barrier.
            let mut place = unsafe { shared.digit_starts.load(d) };
            for w in 0..self.warps {
                // SAFETY: w · 256 + d < N; this thread alone touches digit d here.
                unsafe {
                    let c = shared.warp_counts.load(w * RADIX_DIGITS + d);
                    shared.warp_counts.store(w * RADIX_DIGITS + d, place);
                    place += c;
                }
            }
            d += threads;
        }
        sync::sync_threads();
    }

    /// Each of a thread's `ITEMS` items' position in the tile stably sorted
    /// by digit (items in tile order: item by item, lanes in order), handed
    /// to `place(i, rank)` as soon as it is known, so that a kernel can
    /// store the item there at once rather than hold every rank in a
    /// register. A collective of the warp: per item, eight ballots find the
    /// lanes that share its digit ([`match_any_bits`](warp::match_any_bits)),
    /// and the lowest of them takes their places from the warp's running
    /// counter with one shared atomic.
    ///
    /// # Safety
    /// After [`scan_counts`](Self::scan_counts), with the digits that
    /// [`count`](Self::count) was given.
    #[inline(always)]
    pub unsafe fn rank<const ITEMS: usize>(
        &self,
        digit: impl Fn(usize) -> u32,
        mut place: impl FnMut(usize, u32),
    ) {
        crate::unroll!(i in ITEMS => {
            let d = digit(i);
            let p = warp::match_any_bits::<RADIX_BITS>(d);
            let leader = p.trailing_zeros();
            let mut before = 0;
            if warp::lane_id() == leader {
                // SAFETY: as in count.
                before = unsafe { shared_add(self.counter(d), p.count_ones()) };
            }
            place(i, warp::shfl_idx_b32(before, leader) + (p & self.below).count_ones());
        });
    }
}

/// Sorts the block's keys (and values, when given) by the key bits
/// `begin_bit .. end_bit` (multiples of 8), ascending or descending, stable:
/// one [`block_radix_rank`] per digit, each followed by an exchange through
/// shared memory (`exchange` for keys, `value_exchange` for values: they may
/// be the same memory, which is used for the keys first, then for the
/// values). Items are in the warp-striped arrangement of the
/// [module docs](self), before and after. A collective of the whole block;
/// asserts `M ≥ threads · ITEMS` and `MV ≥ threads · ITEMS` (located faults).
///
/// # Safety
/// As for [`block_radix_rank`]; the exchange arrays are the block's own.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[track_caller]
#[cfg_attr(not(target_arch = "nvptx64"), inline(never))]
pub unsafe fn block_radix_sort<
    K: RadixKey,
    V: SharedScalar,
    const ITEMS: usize,
    const N: usize,
    const M: usize,
    const MV: usize,
>(
    keys: &mut [K; ITEMS],
    mut values: Option<&mut [V; ITEMS]>,
    begin_bit: u32,
    end_bit: u32,
    descending: bool,
    shared: &RadixSortShared<N>,
    exchange: SharedArray<K, M>,
    value_exchange: SharedArray<V, MV>,
) {
    let threads = thread::block_dim_x() as usize;
    crate::gpu_assert!(
        M >= threads * ITEMS && (values.is_none() || MV >= threads * ITEMS),
        "block radix sort: exchange smaller than the tile"
    );
    let t = thread::thread_idx_x() as usize;
    let striped = |i: usize| (t / 32) * 32 * ITEMS + i * 32 + t % 32;
    let mut shift = begin_bit;
    while shift < end_bit {
        let digits: [u32; ITEMS] = core::array::from_fn(|i| keys[i].digit(shift, descending));
        let mut ranks = [0u32; ITEMS];
        // SAFETY: forwarded from the caller.
        unsafe { block_radix_rank(&digits, shared, &mut ranks) };
        // SAFETY: ranks < threads · ITEMS ≤ M (asserted), a permutation, so
        // each slot has one writer; the barriers order writes and reads.
        unsafe {
            for (k, r) in keys.iter().zip(ranks) {
                exchange.store(r as usize, *k);
            }
            sync::sync_threads();
            for (i, k) in keys.iter_mut().enumerate() {
                *k = exchange.load(striped(i));
            }
            sync::sync_threads();
        }
        if let Some(values) = values.as_deref_mut() {
            // SAFETY: as for the keys, with MV.
            unsafe {
                for (v, r) in values.iter().zip(ranks) {
                    value_exchange.store(r as usize, *v);
                }
                sync::sync_threads();
                for (i, v) in values.iter_mut().enumerate() {
                    *v = value_exchange.load(striped(i));
                }
                sync::sync_threads();
            }
        }
        shift += RADIX_BITS;
    }
}

/// The status word of a (tile, digit) in [`digit_lookback`]: 0 while the
/// tile has published nothing for the digit.
pub const LOOKBACK_EMPTY: u32 = 0;
/// Flag of a status word holding the tile's own count of the digit.
pub const LOOKBACK_AGGREGATE: u32 = 1 << 30;
/// Flag of a status word holding the digit's count over this tile and every
/// tile before it (the inclusive prefix).
pub const LOOKBACK_PREFIX: u32 = 2 << 30;
/// The count bits of a status word: counts and prefixes are `< 2^30`.
pub const LOOKBACK_VALUE: u32 = (1 << 30) - 1;

/// `ld.relaxed.gpu.global.b32`: a load that sees another block's atomic
/// stores (the look-back's spin; it becomes the collectives' shared helper
/// when the device-wide scan lands).
///
/// # Safety
/// `ptr` is an aligned, live u32 of global memory that other threads write
/// only with atomics.
#[inline(always)]
unsafe fn load_relaxed_u32(ptr: *const u32) -> u32 {
    #[cfg(not(target_arch = "nvptx64"))]
    // The spin's yield under the simulator's interleaved schedule.
    crate::sim::global_access(false);
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the caller's contract; other threads (other blocks on other
    // OS threads of the simulator) write it atomically.
    return unsafe { core::sync::atomic::AtomicU32::from_ptr(ptr.cast_mut()) }
        .load(core::sync::atomic::Ordering::Relaxed);
    #[cfg(target_arch = "nvptx64")]
    {
        let v: u32;
        // SAFETY: the caller guarantees a valid, aligned global address.
        unsafe {
            core::arch::asm!(
                "ld.relaxed.gpu.global.b32 {v}, [{p}];",
                v = out(reg32) v,
                p = in(reg64) ptr,
                options(nostack, readonly, preserves_flags),
            );
        }
        v
    }
}

/// Tiles whose status words a [`digit_lookback`] step reads at once.
pub const LOOKBACK_WINDOW: usize = 4;

/// Publishes `count`, this tile's number of items with the digit, in
/// `status[tile · 256 + digit]`: as the tile's aggregate, or for tile 0 as
/// its inclusive prefix. The first half of the decoupled look-back
/// (Merrill and Garland's single-pass scan, as CUB's onesweep radix sort
/// does it per digit); onesweep calls it as soon as the tile's digits are
/// counted, before ranking them, so that later tiles rarely wait for it.
///
/// # Safety
/// `status` holds `(tile + 1) · 256` u32, those of this tile 0 at the
/// launch's start and touched by nothing but this function and
/// [`digit_lookback`]; one thread per (tile, digit) calls it, once;
/// `count < 2^30`.
#[inline(always)]
pub unsafe fn digit_publish(status: *mut u32, tile: usize, digit: usize, count: u32) {
    let flag = if tile == 0 {
        LOOKBACK_PREFIX
    } else {
        LOOKBACK_AGGREGATE
    };
    // SAFETY: (tile, digit) is in `status`, written here and in
    // digit_lookback only.
    unsafe { crate::atomic::exchange_u32(status.add(tile * RADIX_DIGITS + digit), flag | count) };
}

/// The second half of the decoupled look-back of one digit, after
/// [`digit_publish`] of the same `count`: walks back over the earlier
/// tiles' words, [`LOOKBACK_WINDOW`] at a time (their loads in flight
/// together), adding aggregates until it meets an inclusive prefix (and
/// reading a window again from a word still [`LOOKBACK_EMPTY`]), publishes
/// its own inclusive prefix, and returns the exclusive one: how many items
/// of earlier tiles have the digit.
///
/// Forward progress: a tile waits only on tiles with smaller indices, and
/// tile indices must be handed out in the order blocks start (a ticket from
/// a global atomic counter, never `blockIdx`): a block holding a ticket is
/// running, so every tile waited on is being worked on by a resident block
/// and gets published. On the simulator, blocks run in ticket order (one OS
/// thread), several at once (`CUDA_KERNELS_SIM_THREADS`), or interleaved
/// (`CUDA_KERNELS_SIM_SCHEDULE=interleaved`, where this spin parks its
/// block); either way each block that took a ticket runs to its end.
///
/// # Safety
/// As for [`digit_publish`], which this thread called before for the same
/// (tile, digit) and count; counts and prefixes stay `< 2^30`.
#[inline(always)]
pub unsafe fn digit_lookback(status: *mut u32, tile: usize, digit: usize, count: u32) -> u32 {
    if tile == 0 {
        return 0;
    }
    let mut exclusive = 0;
    // Tiles `next - 1`, `next - 2`, … down to the first prefix are still to add.
    let mut next = tile;
    loop {
        let read = |i: usize| {
            if i < next {
                // SAFETY: next - 1 - i < tile: an earlier tile's word of this
                // digit, written by other blocks with atomics only.
                unsafe { load_relaxed_u32(status.add((next - 1 - i) * RADIX_DIGITS + digit)) }
            } else {
                LOOKBACK_EMPTY
            }
        };
        // The window's loads are issued before any is used; written out (an
        // array of the words would live in local memory).
        const _: () = assert!(LOOKBACK_WINDOW == 4);
        let words = (read(0), read(1), read(2), read(3));
        // Words are added in order until a prefix (the walk's end) or an
        // empty word (read again from there: tile 0 always has a prefix, so
        // one is met before the words past tile 0).
        let (mut added, mut stop, mut found) = (0, false, false);
        let mut add = |s: u32| {
            if !stop {
                if s == LOOKBACK_EMPTY {
                    stop = true;
                } else {
                    exclusive += s & LOOKBACK_VALUE;
                    added += 1;
                    found = s & LOOKBACK_PREFIX != 0;
                    stop = found;
                }
            }
        };
        add(words.0);
        add(words.1);
        add(words.2);
        add(words.3);
        if found {
            break;
        }
        next -= added;
    }
    // SAFETY: this tile's word (see digit_publish).
    unsafe {
        crate::atomic::exchange_u32(
            status.add(tile * RADIX_DIGITS + digit),
            LOOKBACK_PREFIX | (exclusive + count),
        )
    };
    exclusive
}

#[cfg(test)]
mod tests {
    use super::RadixKey;

    fn check_order<K: RadixKey + Copy>(sorted: &[K]) {
        for pair in sorted.windows(2) {
            assert!(pair[0].ordered_bits() < pair[1].ordered_bits());
        }
    }

    #[test]
    fn ordered_bits_follow_total_cmp_with_nan_last() {
        check_order(&[
            f32::NEG_INFINITY,
            -1.5,
            -f32::MIN_POSITIVE,
            -0.0,
            0.0,
            1e-45,
            2.0,
            f32::INFINITY,
            f32::NAN,
        ]);
        check_order(&[f64::NEG_INFINITY, -0.0, 0.0, f64::INFINITY, f64::NAN]);
        assert_eq!((-f32::NAN).ordered_bits(), f32::NAN.ordered_bits());
        check_order(&[i32::MIN, -1, 0, 1, i32::MAX]);
        check_order(&[i64::MIN, -1, 0, 1, i64::MAX]);
        check_order(&[0u32, 1, u32::MAX]);
        check_order(&[0u64, 1 << 40, u64::MAX]);
        assert_eq!(0x1234u32.digit(8, false), 0x12);
        assert_eq!(0x1234u32.digit(8, true), 0xff - 0x12);
        assert_eq!(0x8765_4321u32.digit(24, false), 0x87);
        assert_eq!(0x8765_4321_0000_0000u64.digit(56, false), 0x87);
        assert_eq!((-1i32).digit(24, false), 0x7f);
    }

    /// The floats' bits against `total_cmp` with every NaN the greatest and
    /// equal to each other, over the patterns at the edges of each class
    /// (zeros, subnormals, infinities, NaNs of either sign and any payload)
    /// and a spread of others, every pair compared.
    #[test]
    fn float_bits_order_every_pair_like_total_cmp_with_nan_last() {
        let bits32 = [
            0,
            1,
            0x007f_ffff,
            0x0080_0000,
            0x3f80_0000,
            0x7f7f_ffff,
            0x7f80_0000,
            0x7f80_0001,
            0x7fc0_0000,
            0x7fff_ffff,
        ];
        let spread32 = (0..200u32).map(|i| i.wrapping_mul(0x9E37_79B9));
        every_pair_like_total_cmp(
            &with_signs(&bits32, 1 << 31, spread32),
            f32::from_bits,
            f32::is_nan,
            f32::total_cmp,
        );
        let bits64 = [
            0,
            1,
            0x000f_ffff_ffff_ffff,
            0x0010_0000_0000_0000,
            0x7fef_ffff_ffff_ffff,
            0x7ff0_0000_0000_0000,
            0x7ff0_0000_0000_0001,
            0x7ff8_0000_0000_0000,
            0x7fff_ffff_ffff_ffff,
        ];
        let spread64 = (0..200u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        every_pair_like_total_cmp(
            &with_signs(&bits64, 1 << 63, spread64),
            f64::from_bits,
            f64::is_nan,
            f64::total_cmp,
        );
    }

    /// `edges`, each also with its sign bit set, then `spread`.
    fn with_signs<B: Copy + core::ops::BitOr<Output = B>>(
        edges: &[B],
        sign: B,
        spread: impl Iterator<Item = B>,
    ) -> Vec<B> {
        let mut all: Vec<B> = edges.to_vec();
        all.extend(edges.iter().map(|&b| b | sign));
        all.extend(spread);
        all
    }

    /// Every pair of the floats of `bits`: their ordered bits compare as
    /// `total_cmp` does, except that every NaN is the greatest and equal to
    /// every other NaN.
    fn every_pair_like_total_cmp<B: Copy, F: RadixKey + core::fmt::LowerExp>(
        bits: &[B],
        from_bits: fn(B) -> F,
        is_nan: fn(F) -> bool,
        total_cmp: fn(&F, &F) -> core::cmp::Ordering,
    ) {
        use core::cmp::Ordering;
        let floats: Vec<F> = bits.iter().map(|&b| from_bits(b)).collect();
        for &a in &floats {
            for &b in &floats {
                let want = match (is_nan(a), is_nan(b)) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Greater,
                    (false, true) => Ordering::Less,
                    (false, false) => total_cmp(&a, &b),
                };
                assert_eq!(a.ordered_bits().cmp(&b.ordered_bits()), want, "{a:e} {b:e}");
            }
        }
    }
}
