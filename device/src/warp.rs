//! Warp-level primitives: lane index, shuffles (`shfl.sync`), votes
//! (`vote.sync`) and warp-wide reductions built from them.
//!
//! Every function here is a *collective* of the 32 lanes of a warp, with the
//! full member mask `0xffff_ffff`: all 32 lanes must execute the same call
//! (no call inside a branch that only some lanes of the warp take, and a
//! block size that is a multiple of 32), or the result is undefined. The
//! host launchers that use them enforce block sizes that are multiples of 32.
//!
//! ```
//! use cuda_kernels_device::{kernels, thread, warp};
//! kernels! {
//!     /// `out[i]` = the warp's sum of `x` (lane 0's result) plus lane 0's `x`.
//!     ///
//!     /// # Safety
//!     /// `x` and `out` hold one f32 per thread; blocks of a multiple of 32 threads.
//!     pub fn warp_sums(x: *const f32, out: *mut f32) as WARP_SUMS {
//!         let i = thread::index_1d();
//!         // SAFETY: one value per thread.
//!         let x = unsafe { *x.add(i) };
//!         // Sum over the warp: lane 0 gets the total.
//!         let total = warp::reduce(x, |a, b| a + b);
//!         // Everyone gets lane 0's value.
//!         let first = warp::shuffle_idx(x, 0);
//!         // SAFETY: one slot per thread.
//!         unsafe { *out.add(i) = total + first };
//!     }
//! }
//! # fn main() {}
//! ```
//! 32-bit values are one `shfl.sync.*.b32`; 64-bit values are two (the low
//! and the high word), as CUDA C's `__shfl_*_sync` does for `long long` and
//! `double`.
//!
//! The `_sync` variants take the member mask, as CUDA C's `__shfl_*_sync`
//! and `__ballot_sync` do: only the lanes in the mask take part (each of them
//! must call the same collective with the same mask; a lane reading from a
//! lane outside the mask gets an undefined value on the GPU). The functions
//! without a mask are these with [`FULL_MASK`].
//!
//! On the host, the simulator suspends each lane at a collective until every
//! lane of its mask has arrived (lanes are 32 consecutive linear thread
//! indices of the block, as on the GPU), then resolves it with the same
//! semantics as the instructions here (the `c` operand of `shfl.sync`: the
//! clamp `0x1f` for down/xor/idx, `0` for up); a lane of the mask that
//! exited, or never arrives, is reported.
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// Threads in a warp.
pub const WARP_SIZE: u32 = 32;

/// All 32 lanes: the member mask of every collective here.
pub const FULL_MASK: u32 = 0xffff_ffff;

/// This thread's lane in its warp, 0..32 (`%laneid`).
#[inline(always)]
pub fn lane_id() -> u32 {
    #[cfg(not(target_arch = "nvptx64"))]
    return crate::sim::current().linear % WARP_SIZE;
    #[cfg(target_arch = "nvptx64")]
    let lane: u32;
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: reading a special register has no preconditions.
    unsafe {
        asm!("mov.u32 {l}, %laneid;", l = out(reg32) lane,
             options(nostack, nomem, pure, preserves_flags));
    }
    #[cfg(target_arch = "nvptx64")]
    return lane;
}

macro_rules! shfl_b32 {
    ($(#[$doc:meta])* $name:ident, $sync:ident, $mode:literal, $clamp:literal, $op:ident) => {
        $(#[$doc])*
        ///
        /// A warp collective: all 32 lanes must call it together (see the
        /// [module docs](self)).
        #[cfg_attr(target_arch = "nvptx64", inline(always))]
        #[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
        pub fn $name(value: u32, lane_arg: u32) -> u32 {
            $sync(FULL_MASK, value, lane_arg)
        }

        $(#[$doc])*
        ///
        /// With the member mask `mask`: a warp collective of the lanes in
        /// `mask`, each of which must call it with the same mask (see the
        /// [module docs](self)).
        #[cfg_attr(target_arch = "nvptx64", inline(always))]
        #[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
        pub fn $sync(mask: u32, value: u32, lane_arg: u32) -> u32 {
            #[cfg(not(target_arch = "nvptx64"))]
            return crate::sim::warp_collective(
                crate::sim::WarpOp::$op, mask, value, lane_arg,
            );
            #[cfg(target_arch = "nvptx64")]
            {
                let out: u32;
                // SAFETY: shfl.sync reads only registers of the warp's lanes; the
                // uniform-call rule above is a correctness (not memory-safety)
                // requirement on the caller.
                unsafe {
                    asm!(
                        concat!("shfl.sync.", $mode, ".b32 {d}, {v}, {l}, ", $clamp, ", {m};"),
                        d = out(reg32) out,
                        v = in(reg32) value,
                        l = in(reg32) lane_arg,
                        m = in(reg32) mask,
                        options(nostack, nomem, preserves_flags),
                    );
                }
                out
            }
        }
    };
}

shfl_b32!(
    /// `__shfl_down_sync`: the value of lane `lane_id() + delta`; lanes
    /// whose source would be past lane 31 get their own value back.
    shfl_down_b32, shfl_down_sync_b32, "down", "0x1f", ShflDown
);
shfl_b32!(
    /// `__shfl_up_sync`: the value of lane `lane_id() - delta`; lanes whose
    /// source would be below lane 0 get their own value back.
    shfl_up_b32, shfl_up_sync_b32, "up", "0x0", ShflUp
);
shfl_b32!(
    /// `__shfl_xor_sync`: the value of lane `lane_id() ^ lane_mask` (the
    /// butterfly step of an all-reduce).
    shfl_xor_b32, shfl_xor_sync_b32, "bfly", "0x1f", ShflXor
);
shfl_b32!(
    /// `__shfl_sync`: the value of lane `src_lane % 32` (broadcast when every
    /// lane names the same source).
    shfl_idx_b32, shfl_idx_sync_b32, "idx", "0x1f", ShflIdx
);

/// A value that can cross lanes in a shuffle: moved as one 32-bit word or as
/// two (low word, high word).
pub trait Shuffle: Copy {
    /// Applies a 32-bit shuffle `f` word by word.
    fn shuffle_with(self, f: impl Fn(u32) -> u32) -> Self;
}

macro_rules! shuffle32 {
    ($($t:ty),*) => {$(
        impl Shuffle for $t {
            #[inline(always)]
            fn shuffle_with(self, f: impl Fn(u32) -> u32) -> Self {
                <$t>::from_ne_bytes(f(u32::from_ne_bytes(self.to_ne_bytes())).to_ne_bytes())
            }
        }
    )*};
}
macro_rules! shuffle64 {
    ($($t:ty),*) => {$(
        impl Shuffle for $t {
            #[inline(always)]
            fn shuffle_with(self, f: impl Fn(u32) -> u32) -> Self {
                let bits = u64::from_ne_bytes(self.to_ne_bytes());
                let lo = f(bits as u32) as u64;
                let hi = f((bits >> 32) as u32) as u64;
                <$t>::from_ne_bytes((lo | (hi << 32)).to_ne_bytes())
            }
        }
    )*};
}
shuffle32!(u32, i32, f32);
shuffle64!(u64, i64, f64);

macro_rules! shuffle16 {
    ($($t:ident),*) => {$(
        /// Moved in the low half of one 32-bit word.
        impl Shuffle for crate::float16::$t {
            #[inline(always)]
            fn shuffle_with(self, f: impl Fn(u32) -> u32) -> Self {
                Self::from_bits(f(self.to_bits() as u32) as u16)
            }
        }
    )*};
}
shuffle16!(f16, bf16);

/// [`shfl_down_b32`] for any [`Shuffle`] type (64-bit values: two shuffles).
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn shuffle_down<T: Shuffle>(value: T, delta: u32) -> T {
    shuffle_down_sync(FULL_MASK, value, delta)
}

/// [`shfl_down_sync_b32`] for any [`Shuffle`] type: the lanes in `mask` only.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn shuffle_down_sync<T: Shuffle>(mask: u32, value: T, delta: u32) -> T {
    value.shuffle_with(|w| shfl_down_sync_b32(mask, w, delta))
}

/// [`shfl_up_b32`] for any [`Shuffle`] type.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn shuffle_up<T: Shuffle>(value: T, delta: u32) -> T {
    shuffle_up_sync(FULL_MASK, value, delta)
}

/// [`shfl_up_sync_b32`] for any [`Shuffle`] type: the lanes in `mask` only.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn shuffle_up_sync<T: Shuffle>(mask: u32, value: T, delta: u32) -> T {
    value.shuffle_with(|w| shfl_up_sync_b32(mask, w, delta))
}

/// [`shfl_xor_b32`] for any [`Shuffle`] type.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn shuffle_xor<T: Shuffle>(value: T, lane_mask: u32) -> T {
    shuffle_xor_sync(FULL_MASK, value, lane_mask)
}

/// [`shfl_xor_sync_b32`] for any [`Shuffle`] type: the lanes in `mask` only.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn shuffle_xor_sync<T: Shuffle>(mask: u32, value: T, lane_mask: u32) -> T {
    value.shuffle_with(|w| shfl_xor_sync_b32(mask, w, lane_mask))
}

/// [`shfl_idx_b32`] for any [`Shuffle`] type.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn shuffle_idx<T: Shuffle>(value: T, src_lane: u32) -> T {
    shuffle_idx_sync(FULL_MASK, value, src_lane)
}

/// [`shfl_idx_sync_b32`] for any [`Shuffle`] type: the lanes in `mask` only.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn shuffle_idx_sync<T: Shuffle>(mask: u32, value: T, src_lane: u32) -> T {
    value.shuffle_with(|w| shfl_idx_sync_b32(mask, w, src_lane))
}

/// Tree reduction over the warp with `shfl.sync.down` (offsets 16, 8, 4, 2,
/// 1): lane 0 returns `combine` over all 32 lanes' values; the other lanes
/// return partial results. `combine` must be associative and commutative.
///
/// Order, for floating-point sums: lane 0 combines pairs at distance 16,
/// then 8, 4, 2, 1 (a balanced binary tree of depth 5).
#[inline(always)]
pub fn reduce<T: Shuffle>(value: T, combine: impl Fn(T, T) -> T) -> T {
    let mut v = value;
    let mut offset = WARP_SIZE / 2;
    while offset > 0 {
        v = combine(v, shuffle_down(v, offset));
        offset /= 2;
    }
    v
}

/// Butterfly all-reduce with `shfl.sync.bfly` (masks 16, 8, 4, 2, 1): every
/// lane returns `combine` over all 32 lanes' values (for a commutative and
/// associative `combine`; floating-point results may differ between lanes
/// in the last bits, since each lane combines in its own order).
#[inline(always)]
pub fn all_reduce<T: Shuffle>(value: T, combine: impl Fn(T, T) -> T) -> T {
    let mut v = value;
    let mut mask = WARP_SIZE / 2;
    while mask > 0 {
        v = combine(v, shuffle_xor(v, mask));
        mask /= 2;
    }
    v
}

/// `__ballot_sync(0xffffffff, pred)`: bit `i` is set when lane `i`'s
/// predicate is true.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn ballot(pred: bool) -> u32 {
    ballot_sync(FULL_MASK, pred)
}

/// `__ballot_sync(mask, pred)`: bit `i` is set when lane `i` is in `mask`
/// and its predicate is true.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn ballot_sync(mask: u32, pred: bool) -> u32 {
    #[cfg(not(target_arch = "nvptx64"))]
    return crate::sim::warp_collective(crate::sim::WarpOp::Ballot, mask, pred as u32, 0);
    #[cfg(target_arch = "nvptx64")]
    {
        let out: u32;
        // SAFETY: vote.sync reads only the warp's predicates; the uniform-call
        // rule of the module docs applies.
        unsafe {
            asm!(
                "{{ .reg .pred %p; setp.ne.u32 %p, {x}, 0; vote.sync.ballot.b32 {d}, %p, {m}; }}",
                d = out(reg32) out,
                x = in(reg32) pred as u32,
                m = in(reg32) mask,
                options(nostack, nomem, preserves_flags),
            );
        }
        out
    }
}

/// `__any_sync(0xffffffff, pred)`: whether any lane's predicate is true.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn any(pred: bool) -> bool {
    any_sync(FULL_MASK, pred)
}

/// `__all_sync(0xffffffff, pred)`: whether every lane's predicate is true.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn all(pred: bool) -> bool {
    all_sync(FULL_MASK, pred)
}

/// `__any_sync(mask, pred)`: whether any lane of `mask` has a true predicate.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn any_sync(mask: u32, pred: bool) -> bool {
    vote(mask, pred, false)
}

/// `__all_sync(mask, pred)`: whether every lane of `mask` has a true predicate.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn all_sync(mask: u32, pred: bool) -> bool {
    vote(mask, pred, true)
}

#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
fn vote(mask: u32, pred: bool, all: bool) -> bool {
    #[cfg(not(target_arch = "nvptx64"))]
    return crate::sim::warp_collective(
        if all {
            crate::sim::WarpOp::All
        } else {
            crate::sim::WarpOp::Any
        },
        mask,
        pred as u32,
        0,
    ) != 0;
    #[cfg(target_arch = "nvptx64")]
    {
        let out: u32;
        // SAFETY: as for `ballot_sync`.
        unsafe {
            if all {
                asm!(
                    "{{ .reg .pred %p, %q; setp.ne.u32 %p, {x}, 0; vote.sync.all.pred %q, %p, {m}; selp.u32 {d}, 1, 0, %q; }}",
                    d = out(reg32) out, x = in(reg32) pred as u32, m = in(reg32) mask,
                    options(nostack, nomem, preserves_flags),
                );
            } else {
                asm!(
                    "{{ .reg .pred %p, %q; setp.ne.u32 %p, {x}, 0; vote.sync.any.pred %q, %p, {m}; selp.u32 {d}, 1, 0, %q; }}",
                    d = out(reg32) out, x = in(reg32) pred as u32, m = in(reg32) mask,
                    options(nostack, nomem, preserves_flags),
                );
            }
        }
        out != 0
    }
}

/// `__syncwarp(mask)`: the lanes of `mask` wait for each other, and their
/// memory accesses before it (shared memory included) are ordered before
/// those after it: what a warp needs between writing shared memory and
/// reading another lane's part of it. Each lane of `mask` must call it with
/// the same mask (`bar.warp.sync`).
///
/// On the host the simulator waits the same way, and its race detector takes
/// a `syncwarp` of two lanes as ordering their shared-memory accesses.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn syncwarp(mask: u32) {
    #[cfg(not(target_arch = "nvptx64"))]
    crate::sim::warp_collective(crate::sim::WarpOp::Sync, mask, 0, 0);
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a warp barrier has no memory-safety preconditions; every lane
    // of the mask calling it is a liveness rule on the caller.
    unsafe {
        asm!("bar.warp.sync {m};", m = in(reg32) mask, options(nostack, preserves_flags));
    }
}

/// `__activemask()`: the lanes of this thread's warp that execute this call
/// together with it (`activemask.b32`). Not a synchronisation: use the
/// result as the member mask of a collective in a branch only some lanes
/// take.
///
/// On the host the simulator runs every thread of the block as far as it
/// can go first, then gives the lanes of the warp that reached the same call
/// site the mask of them.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn activemask() -> u32 {
    #[cfg(not(target_arch = "nvptx64"))]
    return crate::sim::warp_collective(crate::sim::WarpOp::ActiveMask, 0, 0, 0);
    #[cfg(target_arch = "nvptx64")]
    {
        let mask: u32;
        // SAFETY: reading the warp's active lanes has no preconditions.
        unsafe {
            asm!("activemask.b32 {d};", d = out(reg32) mask,
                 options(nostack, nomem, preserves_flags));
        }
        mask
    }
}

/// `match.{any,all}.sync.b32/.b64 d, value, mask` on the GPU.
#[cfg(target_arch = "nvptx64")]
macro_rules! match_sync {
    ($instr:literal, $reg:ident, $value:expr, $mask:expr) => {{
        let out: u32;
        // SAFETY: a warp collective on registers; the uniform-call rule of
        // the module docs applies.
        unsafe {
            asm!(concat!($instr, " {d}, {v}, {m};"), d = out(reg32) out,
                 v = in($reg) $value, m = in(reg32) $mask, options(nostack, nomem, preserves_flags));
        }
        out
    }};
}

/// `__match_any_sync(mask, value)`: the lanes of `mask` whose `value` equals
/// this lane's (`match.any.sync.b32`; sm_70 and later). A warp collective
/// of the lanes in `mask`.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn match_any_sync(mask: u32, value: u32) -> u32 {
    #[cfg(not(target_arch = "nvptx64"))]
    return crate::sim::warp_collective(crate::sim::WarpOp::MatchAny, mask, value, 0);
    #[cfg(target_arch = "nvptx64")]
    match_sync!("match.any.sync.b32", reg32, value, mask)
}

/// The lanes whose `label` agrees with this lane's in its low `BITS` bits
/// (the higher bits are ignored): [`match_any_sync`] over the whole warp
/// for small labels such as radix digits, computed with `BITS` ballots as
/// CUB's `MatchAny<LABEL_BITS>` does. `match.any.sync` takes longer the more
/// distinct values the warp holds; measured on the H100, a radix sort pass
/// ranking random 8-bit digits with it was slower than with these 8
/// ballots. A warp collective: all 32 lanes call it.
///
/// ```
/// # use cuda_kernels_device::warp;
/// # fn lane_view(digit: u32) -> u32 {
/// let peers = warp::match_any_bits::<8>(digit);
/// # peers }
/// ```
#[inline(always)]
pub fn match_any_bits<const BITS: u32>(label: u32) -> u32 {
    let mut peers = FULL_MASK;
    crate::unroll!(bit in BITS as usize => {
        peers &= lanes_with_bit_like_mine(label, 1 << bit);
    });
    peers
}

/// The lanes whose `label & bit` is this lane's (`bit` a single bit): one
/// ballot, in one `asm` block on the GPU so that the compiler cannot hoist
/// the bit tests of many labels ahead of their ballots (it did, and held
/// them all in registers).
#[inline(always)]
fn lanes_with_bit_like_mine(label: u32, bit: u32) -> u32 {
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let set = label & bit != 0;
        let same = ballot(set);
        if set { same } else { !same }
    }
    #[cfg(target_arch = "nvptx64")]
    {
        let out: u32;
        // SAFETY: vote.sync reads only the warp's predicates; the uniform-call
        // rule of the module docs applies.
        unsafe {
            asm!(
                "{{ .reg .pred %p; and.b32 {d}, {l}, {b}; setp.ne.u32 %p, {d}, 0; vote.sync.ballot.b32 {d}, %p, 0xffffffff; @!%p not.b32 {d}, {d}; }}",
                d = out(reg32) out,
                l = in(reg32) label,
                b = in(reg32) bit,
                options(nostack, nomem, preserves_flags),
            );
        }
        out
    }
}

/// [`match_any_sync`] of a 64-bit value (`match.any.sync.b64`).
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn match_any_sync_u64(mask: u32, value: u64) -> u32 {
    // The lanes with the same 64 bits: those with the same low and high words.
    #[cfg(not(target_arch = "nvptx64"))]
    return match_any_sync(mask, value as u32) & match_any_sync(mask, (value >> 32) as u32);
    #[cfg(target_arch = "nvptx64")]
    match_sync!("match.any.sync.b64", reg64, value, mask)
}

/// `__match_all_sync(mask, value, &pred)`: `mask` when every lane of `mask`
/// has the same `value`, else 0 (`match.all.sync.b32`; sm_70 and later). A
/// warp collective of the lanes in `mask`.
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn match_all_sync(mask: u32, value: u32) -> u32 {
    #[cfg(not(target_arch = "nvptx64"))]
    return crate::sim::warp_collective(crate::sim::WarpOp::MatchAll, mask, value, 0);
    #[cfg(target_arch = "nvptx64")]
    match_sync!("match.all.sync.b32", reg32, value, mask)
}

/// [`match_all_sync`] of a 64-bit value (`match.all.sync.b64`).
#[cfg_attr(target_arch = "nvptx64", inline(always))]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller, inline(never))]
pub fn match_all_sync_u64(mask: u32, value: u64) -> u32 {
    #[cfg(not(target_arch = "nvptx64"))]
    return match_all_sync(mask, value as u32) & match_all_sync(mask, (value >> 32) as u32);
    #[cfg(target_arch = "nvptx64")]
    match_sync!("match.all.sync.b64", reg64, value, mask)
}
