//! Device-wide radix sort, onesweep style (Adinets and Merrill, "Onesweep",
//! 2022; CUB's `DeviceRadixSort`): stable, keys only or keys with u32
//! values, ascending or descending, for `u32`, `i32`, `f32`, `u64`, `i64`
//! and `f64` keys ordered as [`RadixKey`] says (floats like `total_cmp`,
//! every NaN last).
//!
//! Per key type two kernels:
//! - `radix_sort_histogram_<t>` (once per sort): the digit counts of every
//!   pass over all keys, in one read (block-private counts with shared
//!   atomics, warp-aggregated when a warp's digits agree, added to the
//!   global `passes × 256` histogram);
//! - `radix_sort_onesweep_<t>` (once per 8-bit pass): each block takes the
//!   next tile (of [`onesweep_shape`]'s threads × keys a thread) by ticket
//!   (a global atomic counter),
//!   counts its digits and publishes the counts ([`digit_publish`]), ranks
//!   it by the pass's digit ([`RadixRank`], its per-item loops unrolled),
//!   finds each digit's offset from the earlier tiles by decoupled
//!   look-back ([`digit_lookback`]), and scatters its keys (and values) through
//!   shared memory to their places: each key is read once and written once
//!   per pass.
//!
//! Values: `values_out` null sorts keys only; `values_in` null with
//! `values_out` set writes each key's input index as its value (an argsort,
//! on the first pass).
use crate::device::collectives::radix::{
    RADIX_BITS, RADIX_DIGITS, RadixKey, RadixRank, RadixSortShared, digit_exclusive_scan,
    digit_lookback, digit_publish, recompute,
};
use crate::device::shared::SharedArray;
use crate::device::{atomic, sync, thread, warp};

/// Threads per block of `radix_sort_histogram_<t>` and of the onesweep
/// passes of keys alone.
pub const BLOCK: u32 = 256;

/// Bytes of the exchange of a onesweep pass of keys alone (static shared
/// memory), where each key is stored at its rank in the tile.
pub const EXCHANGE_BYTES: usize = 32 * 1024;

/// The shape of a onesweep pass's blocks, `(threads, keys a thread)`, for
/// keys of `key_bytes` bytes (4 or 8) alone or with u32 values. Larger
/// tiles mean fewer look-backs and barriers a key, and won over more
/// blocks a multiprocessor wherever measured (H200, 2^28 keys, each
/// alternated with the previous shape in one call):
/// - 32-bit keys alone: 256 × 24, 6,144 keys in 24 KB of the exchange (72
///   registers, three blocks a multiprocessor) instead of 256 × 16: u32
///   6.31 → 5.98 ms, f32 6.90 → 6.63 ms;
/// - 64-bit keys alone: 256 × 16, the exchange full (384 × 16 and 512 × 8
///   were slower: 15.08 and 17.29 ms against 14.87 for u64);
/// - 32-bit keys with values: 512 × 12, 6,144 keys, whose keys, values and
///   warp counters take 64 KB of dynamic shared memory (past the 48 KB a
///   block has without opting in: [`onesweep_dynamic_shared`]) instead of
///   256 × 16 in the static exchange: i32 with indices 8.83 → 8.28 ms;
/// - 64-bit keys with values: 256 × 8, 2,048 keys.
pub const fn onesweep_shape(key_bytes: usize, values: bool) -> (u32, usize) {
    match (key_bytes, values) {
        (4, false) => (BLOCK, 24),
        (_, false) => (BLOCK, EXCHANGE_BYTES / BLOCK as usize / key_bytes),
        (4, true) => (512, 12),
        (_, true) => (BLOCK, 8),
    }
}

/// Keys per onesweep tile for keys of `key_bytes` bytes, with or without
/// values: what the launcher divides the keys by for the grid.
pub const fn tile(key_bytes: usize, values: bool) -> usize {
    let (threads, items) = onesweep_shape(key_bytes, values);
    threads as usize * items
}

/// Bytes of dynamic shared memory a onesweep block takes: none for keys
/// alone (their exchange and counters are static), and with values the
/// tile's keys, then its values, then one counter per (warp, digit).
pub const fn onesweep_dynamic_shared(key_bytes: usize, values: bool) -> u32 {
    if !values {
        return 0;
    }
    let (threads, _) = onesweep_shape(key_bytes, values);
    let exchange = tile(key_bytes, values) * (key_bytes + 4);
    (exchange + threads as usize / 32 * RADIX_DIGITS * 4) as u32
}

/// The largest onesweep tile, of any key type, with or without values.
pub const TILE: usize = max(
    max(tile(4, false), tile(4, true)),
    max(tile(8, false), tile(8, true)),
);

const fn max(a: usize, b: usize) -> usize {
    if a > b { a } else { b }
}

/// The largest key count the kernels take: look-back words hold counts
/// below 2^30.
pub const MAX_KEYS: usize = (1 << 30) - 1;

/// A key type of the sort: its two kernels. Implemented for `u32`, `i32`,
/// `f32`, `u64`, `i64`, `f64` by this module alone.
pub trait SortKey: RadixKey {
    /// `radix_sort_histogram_<t>`: `(keys, n, descending, histogram)`.
    const HISTOGRAM: crate::device::kernel::Kernel<(*const Self, usize, u32, *mut u32)>;
    /// `radix_sort_onesweep_<t>`, keys alone, and `radix_sort_onesweep_pairs_<t>`,
    /// keys with values: `(keys_in, values_in, keys_out, values_out,
    /// digit_totals, status, tile_counter, n, shift, descending)`.
    #[allow(clippy::type_complexity)]
    const ONESWEEP: crate::device::kernel::Kernel<(
        *const Self,
        *const u32,
        *mut Self,
        *mut u32,
        *const u32,
        *mut u32,
        *mut u32,
        usize,
        u32,
        u32,
    )>;
    /// See [`ONESWEEP`](Self::ONESWEEP).
    #[allow(clippy::type_complexity)]
    const ONESWEEP_PAIRS: crate::device::kernel::Kernel<(
        *const Self,
        *const u32,
        *mut Self,
        *mut u32,
        *const u32,
        *mut u32,
        *mut u32,
        usize,
        u32,
        u32,
    )>;
}

/// Keys a thread of `radix_sort_histogram_<t>` reads at a time (their
/// loads in flight together).
pub const HISTOGRAM_ITEMS: usize = 16;

/// The body of `radix_sort_histogram_<t>`.
///
/// Blocks step through chunks of [`BLOCK`] × [`HISTOGRAM_ITEMS`] keys
/// (striped: item `i` of thread `t` is key `i · BLOCK + t` of the chunk, so
/// each load of a warp is one coalesced row), and count every pass's digit
/// of each key with one shared atomic into block-private counters; a warp
/// whose keys in a whole chunk are all equal adds its 512 at once per
/// pass instead, so that all-equal input does not serialise. Any grid
/// covers the keys; the launcher gives at most 1,024 blocks.
///
/// # Safety
/// `keys` holds `n` keys; `histogram` `K::BITS / 8 · 256` u32 zeroed
/// before the launch (only atomics touch it); blocks of [`BLOCK`] threads.
#[inline(always)]
pub unsafe fn histogram<K: RadixKey>(
    keys: *const K,
    n: usize,
    descending: u32,
    histogram: *mut u32,
) {
    const { assert!(K::BITS / RADIX_BITS <= 8) };
    let counts = crate::shared_array!(radix_sort_pass_counts: [u32; 8 * RADIX_DIGITS]);
    let passes = (K::BITS / RADIX_BITS) as usize;
    let bins = passes * RADIX_DIGITS;
    let (t, threads) = (thread::thread_idx_x() as usize, BLOCK as usize);
    let mut i = t;
    while i < bins {
        // SAFETY: i < passes · 256 ≤ 8 · 256.
        unsafe { counts.store(i, 0) };
        i += threads;
    }
    sync::sync_threads();
    let descending = descending != 0;
    // Pass p's counter of a key's digit p.
    let bin =
        |key: K, p: usize| p * RADIX_DIGITS + key.digit(p as u32 * RADIX_BITS, descending) as usize;
    const CHUNK: usize = BLOCK as usize * HISTOGRAM_ITEMS;
    let stride = thread::grid_dim_x() as usize * CHUNK;
    let mut base = thread::block_idx_x() as usize * CHUNK;
    while base < n {
        let valid = CHUNK.min(n - base);
        // SAFETY: base < n.
        let mut items = [unsafe { *keys.add(base) }; HISTOGRAM_ITEMS];
        crate::device::unroll!(i in HISTOGRAM_ITEMS => {
            if i * threads + t < valid {
                // SAFETY: base + i · BLOCK + t < n.
                items[i] = unsafe { *keys.add(base + i * threads + t) };
            }
        });
        // Every lane shuffles and votes (warp collectives); the chunk's
        // validity is the same for the whole block.
        let first = warp::shuffle_idx(items[0].ordered_bits(), 0);
        let mut same = valid == CHUNK;
        crate::device::unroll!(i in HISTOGRAM_ITEMS => {
            same &= items[i].ordered_bits() == first;
        });
        if warp::all(same) {
            if warp::lane_id() == 0 {
                for p in 0..passes {
                    // SAFETY: bin < passes · 256; the warp's 32 · ITEMS keys at once.
                    unsafe { counts.fetch_add(bin(items[0], p), (32 * HISTOGRAM_ITEMS) as u32) };
                }
            }
        } else {
            crate::device::unroll!(i in HISTOGRAM_ITEMS => {
                if i * threads + t < valid {
                    for p in 0..passes {
                        // SAFETY: bin < passes · 256.
                        unsafe { counts.fetch_add(bin(items[i], p), 1) };
                    }
                }
            });
        }
        base += stride;
    }
    sync::sync_threads();
    let mut i = t;
    while i < bins {
        // SAFETY: i < bins; the atomics were before the barrier.
        let c = unsafe { counts.load(i) };
        if c != 0 {
            // SAFETY: i < passes · 256, the histogram's length.
            unsafe { atomic::fetch_add_u32(histogram.add(i), c) };
        }
        i += threads;
    }
}

/// The body of `radix_sort_onesweep_<t>` (keys alone: the value pointers
/// are not read) and of `radix_sort_onesweep_pairs_<t>` (`VALUES`: keys
/// with values, read with the keys so that their latency overlaps the
/// rank; a separate kernel, so that a sort of keys alone does not hold
/// their registers): one pass over digit `shift / 8`, in tiles of
/// `T = THREADS · ITEMS` keys ([`tile`], [`onesweep_shape`]).
///
/// # Safety
/// `keys_in` and `keys_out` hold `n ≤ MAX_KEYS` keys and do not overlap;
/// with `VALUES`, `values_out` holds `n` u32 and `values_in`, when not
/// null, `n` u32 (not overlapping; null writes each key's input index);
/// `digit_totals` the pass's 256 counts over all keys; `status`
/// `⌈n / T⌉ · 256` u32 and `tile_counter` one u32, all zeroed before the
/// launch; a grid of `⌈n / T⌉` blocks of `THREADS` threads, with
/// [`onesweep_dynamic_shared`] bytes of dynamic shared memory.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn onesweep<
    K: RadixKey,
    const VALUES: bool,
    const THREADS: u32,
    const ITEMS: usize,
    const COUNTERS: usize,
>(
    keys_in: *const K,
    values_in: *const u32,
    keys_out: *mut K,
    values_out: *mut u32,
    digit_totals: *const u32,
    status: *mut u32,
    tile_counter: *mut u32,
    n: usize,
    shift: u32,
    descending: u32,
) {
    let tile_keys = THREADS as usize * ITEMS;
    const { assert!(THREADS as usize >= RADIX_DIGITS && THREADS as usize <= 1024) };
    const { assert!(COUNTERS == THREADS as usize / 32 * RADIX_DIGITS) };
    const { assert!(THREADS as usize * ITEMS <= TILE) };
    const {
        assert!(
            VALUES
                || (THREADS == BLOCK && BLOCK as usize * ITEMS * size_of::<K>() <= EXCHANGE_BYTES)
        )
    };
    // The exchange, where each item is stored at its rank as soon as the
    // rank is known, and the warps' digit counters: for keys alone static
    // arrays; with values dynamic shared memory (onesweep_dynamic_shared),
    // the tile's keys, then its values, then the counters.
    let (key_exchange, value_exchange, warp_counts) = if VALUES {
        let base = crate::device::shared::dynamic_shared_address();
        let values_at = base + (tile_keys * size_of::<K>()) as u32;
        let counts_at = values_at + (tile_keys * 4) as u32;
        // SAFETY: the launcher passes onesweep_dynamic_shared(size_of::<K>(),
        // true) bytes: tile_keys keys, tile_keys u32 and THREADS / 32 · 256
        // u32, each region aligned to its element (the base to 16 bytes);
        // only the first tile_keys elements of the exchange views and the
        // first THREADS / 32 · 256 counters are touched.
        unsafe {
            (
                SharedArray::<K, TILE>::from_shared_address(base),
                SharedArray::<u32, TILE>::from_shared_address(values_at),
                SharedArray::<u32, COUNTERS>::from_shared_address(counts_at),
            )
        }
    } else {
        let exchange = crate::shared_array!(radix_sort_exchange: [u64; EXCHANGE_BYTES / 8]);
        let counts =
            crate::shared_array!(radix_sort_warp_counts: [u32; BLOCK as usize / 32 * RADIX_DIGITS]);
        // SAFETY: the keys (tile_keys · size_of::<K>() ≤ EXCHANGE_BYTES,
        // asserted above) fit in the exchange, and the block's BLOCK / 32
        // warps' counters (COUNTERS) in `counts`; the values' view is not
        // used.
        unsafe {
            (
                SharedArray::<K, TILE>::from_shared_address(exchange.address()),
                SharedArray::<u32, TILE>::from_shared_address(
                    exchange.address() + (EXCHANGE_BYTES / 2) as u32,
                ),
                SharedArray::<u32, COUNTERS>::from_shared_address(counts.address()),
            )
        }
    };
    let shared = RadixSortShared {
        warp_counts,
        digit_counts: crate::shared_array!(radix_sort_digit_counts: [u32; RADIX_DIGITS]),
        digit_starts: crate::shared_array!(radix_sort_digit_starts: [u32; RADIX_DIGITS]),
    };
    let totals = crate::shared_array!(radix_sort_totals: [u32; RADIX_DIGITS]);
    let global_starts = crate::shared_array!(radix_sort_global_starts: [u32; RADIX_DIGITS]);
    let out_base = crate::shared_array!(radix_sort_out_base: [u32; RADIX_DIGITS]);
    let ticket = crate::shared_array!(radix_sort_ticket: [u32; 1]);
    let descending = descending != 0;
    let t = thread::thread_idx_x() as usize;
    let (w, lane) = (t / 32, t % 32);
    if t == 0 {
        // SAFETY: the counter is zeroed before the launch, one ticket per block.
        unsafe { ticket.store(0, atomic::fetch_add_u32(tile_counter, 1)) };
    }
    if t < RADIX_DIGITS {
        // SAFETY: the pass's 256 totals; t < 256.
        unsafe { totals.store(t, *digit_totals.add(t)) };
    }
    sync::sync_threads();
    // SAFETY: written before the barrier.
    let tile = unsafe { ticket.load(0) } as usize;
    let base = tile * tile_keys;
    let valid = tile_keys.min(n - base);
    let striped = |i: usize| w * 32 * ITEMS + i * 32 + lane;
    // SAFETY: base < n (one block per tile), so keys_in[base] exists.
    let stand_in = unsafe { *keys_in.add(base) };
    let mut keys = [stand_in; ITEMS];
    crate::device::unroll!(i in ITEMS => {
        let at = striped(i);
        if at < valid {
            // SAFETY: base + at < n.
            keys[i] = unsafe { *keys_in.add(base + at) };
        }
    });
    // The values are read with the keys, so that their latency overlaps
    // the rank and look-back (each item's input index when values_in is
    // null; nothing when the sort has no values).
    let mut values = [0u32; ITEMS];
    if VALUES {
        crate::device::unroll!(i in ITEMS => {
            let at = striped(i);
            if at < valid {
                values[i] = if values_in.is_null() {
                    (base + at) as u32
                } else {
                    // SAFETY: values_in holds n u32; base + at < n.
                    unsafe { *values_in.add(base + at) }
                };
            }
        });
    }
    // Item i's digit, recomputed where needed rather than held in
    // registers: registers, not arithmetic, limit how many blocks a
    // multiprocessor runs.
    // Bit i: item i is past n. Such items take digit 255 (a mask, not a
    // branch: ptxas held one predicate per item across the rank and
    // failed to allocate them for the signed and float keys).
    let mut past_end = 0u32;
    crate::device::unroll!(i in ITEMS => {
        if striped(i) >= valid {
            past_end |= 1 << i;
        }
    });
    let digit_of = |i: usize, key: K| {
        key.digit(shift, descending) | (0u32.wrapping_sub((past_end >> i) & 1) & 0xff)
    };
    // Items past n have digit 255 and come last in the tile: after the
    // rank they are the positions `valid..tile_keys`.
    // SAFETY: the block's own shared arrays; blocks of THREADS threads.
    let rank = unsafe { RadixRank::begin(&shared) };
    // SAFETY: after begin; digits < 256.
    unsafe { rank.count::<ITEMS>(|i| digit_of(i, keys[i])) };
    // SAFETY: every item counted.
    unsafe { rank.scan_counts() };
    // The tile's digit counts are published before the ranking, so that
    // later tiles' look-backs rarely wait for this one.
    let mut count = 0;
    if t < RADIX_DIGITS {
        // SAFETY: after scan_counts: read-only.
        count = unsafe { shared.digit_counts.load(t) };
        if t == RADIX_DIGITS - 1 {
            count -= (tile_keys - valid) as u32;
        }
        // SAFETY: the status words of this tile, zeroed before the launch;
        // one thread per digit; n < 2^30.
        unsafe { digit_publish(status, tile, t, count) };
    }
    // SAFETY: after scan_counts, with the digits counted; ranks are a
    // permutation of 0..tile_keys: one writer per slot.
    unsafe {
        rank.rank::<ITEMS>(
            |i| digit_of(i, recompute(keys[i])),
            |i, r| {
                key_exchange.store(r as usize, keys[i]);
                if VALUES {
                    value_exchange.store(r as usize, values[i]);
                }
            },
        )
    };
    // SAFETY: the exclusive scan of the pass's totals (written before the
    // barriers above), by the whole block.
    unsafe { digit_exclusive_scan(totals, global_starts) };
    if t < RADIX_DIGITS {
        // SAFETY: after the rank's barriers: read-only.
        let start = unsafe { shared.digit_starts.load(t) };
        // SAFETY: published above; tickets are handed out in start order.
        let before = unsafe { digit_lookback(status, tile, t, count) };
        // SAFETY: t < 256; this thread's digit.
        unsafe { out_base.store(t, (global_starts.load(t) + before).wrapping_sub(start)) };
    }
    sync::sync_threads();
    crate::device::unroll!(k in ITEMS => {
        let s = k * THREADS as usize + t;
        if s < valid {
            // SAFETY: s < tile_keys, written before the barrier.
            let key = unsafe { key_exchange.load(s) };
            // SAFETY: out_base + s is the key's place, < n; with VALUES,
            // values_out holds n u32 and slot s was written before the barrier.
            unsafe {
                let at = out_base.load(key.digit(shift, descending) as usize).wrapping_add(s as u32) as usize;
                *keys_out.add(at) = key;
                if VALUES {
                    *values_out.add(at) = value_exchange.load(s);
                }
            }
        }
    });
}

macro_rules! sort_family {
    ($($t:ident: $hist:ident as $HIST:ident, $sweep:ident as $SWEEP:ident, $pairs:ident as $PAIRS:ident;)*) => {
        crate::device::kernels! {
            list SORT_KERNELS;
            $(
                #[doc = concat!("The digit histogram of every pass of a sort of `", stringify!($t), "` keys.")]
                ///
                /// # Safety
                /// As for [`histogram`](super::histogram).
                pub fn $hist(
                    keys: *const $t,
                    n: usize,
                    descending: u32,
                    digit_histogram: *mut u32,
                ) as $HIST {
                    // SAFETY: forwarded from this entry point's contract.
                    unsafe { histogram::<$t>(keys, n, descending, digit_histogram) }
                }

                #[doc = concat!("One onesweep pass of a sort of `", stringify!($t), "` keys alone (the value pointers are not read).")]
                ///
                /// # Safety
                /// As for [`onesweep`](super::onesweep).
                pub fn $sweep(
                    keys_in: *const $t,
                    values_in: *const u32,
                    keys_out: *mut $t,
                    values_out: *mut u32,
                    digit_totals: *const u32,
                    status: *mut u32,
                    tile_counter: *mut u32,
                    n: usize,
                    shift: u32,
                    descending: u32,
                ) as $SWEEP {
                    // SAFETY: forwarded from this entry point's contract.
                    unsafe {
                        onesweep::<
                            $t,
                            false,
                            { onesweep_shape(size_of::<$t>(), false).0 },
                            { onesweep_shape(size_of::<$t>(), false).1 },
                            { onesweep_shape(size_of::<$t>(), false).0 as usize / 32 * RADIX_DIGITS },
                        >(
                            keys_in, values_in, keys_out, values_out, digit_totals, status,
                            tile_counter, n, shift, descending,
                        )
                    }
                }

                #[doc = concat!("One onesweep pass of a sort of `", stringify!($t), "` keys with u32 values.")]
                ///
                /// # Safety
                /// As for [`onesweep`](super::onesweep), with `values_out` not null.
                pub fn $pairs(
                    keys_in: *const $t,
                    values_in: *const u32,
                    keys_out: *mut $t,
                    values_out: *mut u32,
                    digit_totals: *const u32,
                    status: *mut u32,
                    tile_counter: *mut u32,
                    n: usize,
                    shift: u32,
                    descending: u32,
                ) as $PAIRS {
                    // SAFETY: forwarded from this entry point's contract.
                    unsafe {
                        onesweep::<
                            $t,
                            true,
                            { onesweep_shape(size_of::<$t>(), true).0 },
                            { onesweep_shape(size_of::<$t>(), true).1 },
                            { onesweep_shape(size_of::<$t>(), true).0 as usize / 32 * RADIX_DIGITS },
                        >(
                            keys_in, values_in, keys_out, values_out, digit_totals, status,
                            tile_counter, n, shift, descending,
                        )
                    }
                }
            )*
        }
        $(
            impl SortKey for $t {
                const HISTOGRAM: crate::device::kernel::Kernel<(*const $t, usize, u32, *mut u32)> = $HIST;
                const ONESWEEP: crate::device::kernel::Kernel<(
                    *const $t, *const u32, *mut $t, *mut u32, *const u32, *mut u32, *mut u32,
                    usize, u32, u32,
                )> = $SWEEP;
                const ONESWEEP_PAIRS: crate::device::kernel::Kernel<(
                    *const $t, *const u32, *mut $t, *mut u32, *const u32, *mut u32, *mut u32,
                    usize, u32, u32,
                )> = $PAIRS;
            }
        )*
    };
}

sort_family! {
    u32: radix_sort_histogram_u32 as RADIX_SORT_HISTOGRAM_U32, radix_sort_onesweep_u32 as RADIX_SORT_ONESWEEP_U32,
        radix_sort_onesweep_pairs_u32 as RADIX_SORT_ONESWEEP_PAIRS_U32;
    i32: radix_sort_histogram_i32 as RADIX_SORT_HISTOGRAM_I32, radix_sort_onesweep_i32 as RADIX_SORT_ONESWEEP_I32,
        radix_sort_onesweep_pairs_i32 as RADIX_SORT_ONESWEEP_PAIRS_I32;
    f32: radix_sort_histogram_f32 as RADIX_SORT_HISTOGRAM_F32, radix_sort_onesweep_f32 as RADIX_SORT_ONESWEEP_F32,
        radix_sort_onesweep_pairs_f32 as RADIX_SORT_ONESWEEP_PAIRS_F32;
    u64: radix_sort_histogram_u64 as RADIX_SORT_HISTOGRAM_U64, radix_sort_onesweep_u64 as RADIX_SORT_ONESWEEP_U64,
        radix_sort_onesweep_pairs_u64 as RADIX_SORT_ONESWEEP_PAIRS_U64;
    i64: radix_sort_histogram_i64 as RADIX_SORT_HISTOGRAM_I64, radix_sort_onesweep_i64 as RADIX_SORT_ONESWEEP_I64,
        radix_sort_onesweep_pairs_i64 as RADIX_SORT_ONESWEEP_PAIRS_I64;
    f64: radix_sort_histogram_f64 as RADIX_SORT_HISTOGRAM_F64, radix_sort_onesweep_f64 as RADIX_SORT_ONESWEEP_F64,
        radix_sort_onesweep_pairs_f64 as RADIX_SORT_ONESWEEP_PAIRS_F64;
}
