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
//!   next tile of [`TILE`] keys by ticket (a global atomic counter),
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
    digit_lookback, digit_publish,
};
use crate::device::shared::SharedArray;
use crate::device::{atomic, sync, thread, warp};

/// Threads per block of both kernels.
pub const BLOCK: u32 = 256;
/// Keys per thread of a onesweep tile.
pub const ITEMS: usize = 16;
/// Keys per onesweep tile (per block).
pub const TILE: usize = BLOCK as usize * ITEMS;
/// Warps per block.
const WARPS: usize = BLOCK as usize / 32;

/// The largest key count the kernels take: look-back words hold counts
/// below 2^30.
pub const MAX_KEYS: usize = (1 << 30) - 1;

/// A key type of the sort: its two kernels. Implemented for `u32`, `i32`,
/// `f32`, `u64`, `i64`, `f64` by this module alone.
pub trait SortKey: RadixKey {
    /// `radix_sort_histogram_<t>`: `(keys, n, passes, descending, histogram)`.
    const HISTOGRAM: crate::device::kernel::Kernel<(*const Self, usize, u32, u32, *mut u32)>;
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

/// The body of `radix_sort_histogram_<t>`.
///
/// # Safety
/// `keys` holds `n` keys; `histogram` `passes · 256` u32 zeroed before the
/// launch (only atomics touch it); `passes ≤ 8`, `passes · 8 ≤ K::BITS`;
/// blocks of [`BLOCK`] threads.
#[inline(always)]
pub unsafe fn histogram<K: RadixKey>(
    keys: *const K,
    n: usize,
    passes: u32,
    descending: u32,
    histogram: *mut u32,
) {
    let counts = crate::shared_array!(radix_sort_pass_counts: [u32; 8 * RADIX_DIGITS]);
    let bins = passes as usize * RADIX_DIGITS;
    let (t, threads) = (thread::thread_idx_x() as usize, BLOCK as usize);
    let mut i = t;
    while i < bins {
        // SAFETY: i < passes · 256 ≤ 8 · 256.
        unsafe { counts.store(i, 0) };
        i += threads;
    }
    sync::sync_threads();
    let descending = descending != 0;
    let lane = warp::lane_id();
    // Whole warps step through the keys together (the vote needs every lane).
    let stride = thread::grid_size_1d();
    let mut base = thread::block_idx_x() as usize * threads + t - lane as usize;
    while base < n {
        let i = base + lane as usize;
        let valid = i < n;
        // SAFETY: i < n when valid; else key 0's stand-in is never counted.
        let key = unsafe { *keys.add(if valid { i } else { base }) };
        let bits = key.ordered_bits();
        // Every lane shuffles (a warp collective), then votes.
        let first = warp::shuffle_idx(bits, 0);
        let uniform = warp::all(valid && first == bits);
        for p in 0..passes {
            let d = key.digit(p * RADIX_BITS, descending) as usize;
            let bin = p as usize * RADIX_DIGITS + d;
            if uniform {
                if lane == 0 {
                    // SAFETY: bin < passes · 256; the warp's 32 keys at once.
                    unsafe { counts.fetch_add(bin, 32) };
                }
            } else if valid {
                // SAFETY: bin < passes · 256.
                unsafe { counts.fetch_add(bin, 1) };
            }
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
/// their registers): one pass over digit `shift / 8`.
///
/// # Safety
/// `keys_in` and `keys_out` hold `n ≤ MAX_KEYS` keys and do not overlap;
/// with `VALUES`, `values_out` holds `n` u32 and `values_in`, when not
/// null, `n` u32 (not overlapping; null writes each key's input index); `digit_totals` the pass's 256 counts over
/// all keys; `status` `⌈n / TILE⌉ · 256` u32 and `tile_counter` one u32,
/// all zeroed before the launch; a grid of `⌈n / TILE⌉` blocks of
/// [`BLOCK`] threads.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn onesweep<K: RadixKey, const VALUES: bool>(
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
    let shared = RadixSortShared {
        warp_counts: crate::shared_array!(radix_sort_warp_counts: [u32; WARPS * RADIX_DIGITS]),
        digit_counts: crate::shared_array!(radix_sort_digit_counts: [u32; RADIX_DIGITS]),
        digit_starts: crate::shared_array!(radix_sort_digit_starts: [u32; RADIX_DIGITS]),
    };
    let totals = crate::shared_array!(radix_sort_totals: [u32; RADIX_DIGITS]);
    let global_starts = crate::shared_array!(radix_sort_global_starts: [u32; RADIX_DIGITS]);
    let out_base = crate::shared_array!(radix_sort_out_base: [u32; RADIX_DIGITS]);
    let ticket = crate::shared_array!(radix_sort_ticket: [u32; 1]);
    // One exchange area for the keys (up to 8 bytes), then the values.
    let exchange_words = crate::shared_array!(radix_sort_exchange: [u64; TILE]);
    // SAFETY: TILE keys of at most 8 bytes, or TILE u32, fit in the area.
    let (key_exchange, value_exchange) = unsafe {
        (
            SharedArray::<K, TILE>::from_shared_address(exchange_words.address()),
            SharedArray::<u32, TILE>::from_shared_address(exchange_words.address()),
        )
    };
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
    let base = tile * TILE;
    let valid = TILE.min(n - base);
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
    let digit_of = |i: usize, key: K| {
        if striped(i) < valid {
            key.digit(shift, descending)
        } else {
            (RADIX_DIGITS - 1) as u32
        }
    };
    // Items past n have digit 255 and come last in the tile: after the
    // rank they are the positions `valid..TILE`.
    // SAFETY: the block's own shared arrays; blocks of BLOCK threads.
    let rank = unsafe { RadixRank::begin(&shared) };
    // SAFETY: after begin; digits < 256.
    let peers = unsafe { rank.count::<ITEMS>(|i| digit_of(i, keys[i])) };
    // SAFETY: every item counted.
    unsafe { rank.scan_counts() };
    // The tile's digit counts are published before the ranking, so that
    // later tiles' look-backs rarely wait for this one.
    let mut count = 0;
    if t < RADIX_DIGITS {
        // SAFETY: after scan_counts: read-only.
        count = unsafe { shared.digit_counts.load(t) };
        if t == RADIX_DIGITS - 1 {
            count -= (TILE - valid) as u32;
        }
        // SAFETY: the status words of this tile, zeroed before the launch;
        // one thread per digit; n < 2^30.
        unsafe { digit_publish(status, tile, t, count) };
    }
    // SAFETY: after scan_counts, with the digits counted.
    let ranks = unsafe { rank.rank(|i| digit_of(i, keys[i]), peers) };
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
    crate::device::unroll!(i in ITEMS => {
        // SAFETY: ranks are a permutation of 0..TILE: one writer per slot.
        unsafe { key_exchange.store(ranks[i] as usize, keys[i]) };
    });
    sync::sync_threads();
    let mut out_digits = [0u32; ITEMS];
    crate::device::unroll!(k in ITEMS => {
        let s = k * BLOCK as usize + t;
        if s < valid {
            // SAFETY: s < TILE, written before the barrier.
            let key = unsafe { key_exchange.load(s) };
            out_digits[k] = key.digit(shift, descending);
            // SAFETY: out_base + s is the key's place, < n.
            unsafe {
                let at = out_base.load(out_digits[k] as usize).wrapping_add(s as u32) as usize;
                *keys_out.add(at) = key;
            }
        }
    });
    if VALUES {
        sync::sync_threads();
        crate::device::unroll!(i in ITEMS => {
            // SAFETY: as for the keys.
            unsafe { value_exchange.store(ranks[i] as usize, values[i]) };
        });
        sync::sync_threads();
        crate::device::unroll!(k in ITEMS => {
            let s = k * BLOCK as usize + t;
            if s < valid {
                // SAFETY: as for the keys.
                unsafe {
                    let at = out_base.load(out_digits[k] as usize).wrapping_add(s as u32) as usize;
                    *values_out.add(at) = value_exchange.load(s);
                }
            }
        });
    }
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
                    passes: u32,
                    descending: u32,
                    digit_histogram: *mut u32,
                ) as $HIST {
                    // SAFETY: forwarded from this entry point's contract.
                    unsafe { histogram::<$t>(keys, n, passes, descending, digit_histogram) }
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
                        onesweep::<$t, false>(
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
                        onesweep::<$t, true>(
                            keys_in, values_in, keys_out, values_out, digit_totals, status,
                            tile_counter, n, shift, descending,
                        )
                    }
                }
            )*
        }
        $(
            impl SortKey for $t {
                const HISTOGRAM: crate::device::kernel::Kernel<(*const $t, usize, u32, u32, *mut u32)> = $HIST;
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
