//! Hopper on the simulator: `mbarrier` transaction barriers, TMA tensor
//! loads (`cp.async.bulk.tensor`) and warpgroup MMA (`wgmma.mma_async`), as
//! [`crate::hopper`] uses them.
//!
//! - **mbarrier**: a block's barriers live in a table keyed by their shared
//!   address (their 8 shared bytes are not used): the arrivals a phase
//!   waits for, the transaction bytes still expected, and the phases
//!   completed. A phase completes when its arrivals have come and its
//!   transaction count is back at zero; `try_wait.parity` says whether the
//!   phase of that parity completed, else the thread waits (suspended) until
//!   it does. A wait no thread can end is reported (a deadlock naming the
//!   barrier, the parity waited for and the barrier's state), not hung.
//! - **TMA**: a load is *in flight* from its issue until a thread waits on
//!   its barrier: its destination holds `0xff` bytes (a NaN in every float
//!   type) meanwhile, and a wgmma that reads them is reported. It lands when
//!   a thread waits on the barrier (or, when no thread can run, the first
//!   thread waiting on it is woken to land it): each element of the box
//!   read from global memory through the tensor map, zeros outside the
//!   tensor, written at its swizzled shared address; then the box's bytes
//!   complete on the barrier. The tensor map is the simulator's own
//!   encoding of `cuTensorMapEncodeTiled`'s arguments ([`encode_tiled`]),
//!   which the host writes where the GPU has the driver's.
//! - **wgmma**: each thread computes its own fragment of the accumulators
//!   (the layout of [`crate::hopper`]) from the shared-memory descriptors:
//!   start, leading and stride byte offsets, swizzle none, 32, 64 or 128
//!   bytes, K- or MN-major. The MMA is asynchronous: at issue the
//!   accumulators' values are kept and the registers hold a poison NaN
//!   ([`POISON`]) until the `wgmma.wait_group` that retires its group
//!   computes the products (an accumulator read early reads the poison; one
//!   written meanwhile is reported). `wait_group` is also a barrier of the
//!   warpgroup's threads (as the hardware's warpgroup-wide operation is
//!   complete for all of them when it returns), so a stage freed after it is
//!   no longer read by any of them. A wgmma issued with no `wgmma.fence`
//!   since the thread's last `wait_group` is reported.
//!
//! Each accumulator element is computed as the simulator's `mma.sync`
//! computes one ([`crate::mma::tensor_core_dot`]: the tensor cores'
//! arithmetic as measured on an H200 for `mma.sync`, the same k of 16
//! (bf16, f16) or 8 (tf32) per instruction; wgmma's words themselves were
//! not measured).
use std::collections::{HashMap, VecDeque};

use super::context::{Site, at, current};
use super::scheduler::Event;
use crate::hopper::TensorMap;

/// The first word of a tensor map the simulator reads ("SIMTMAP1").
pub const SIM_TENSOR_MAP_MAGIC: u64 = u64::from_le_bytes(*b"SIMTMAP1");

/// The f32 bits an accumulator holds while its wgmma is in flight: a
/// signalling NaN with a recognisable payload.
pub const POISON: u32 = 0x7fa0_0bad;

/// `cuTensorMapEncodeTiled`'s arguments, as the simulator keeps them in a
/// tensor map (the enums are `cuda.h`'s values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TiledMap {
    /// `CUtensorMapDataType` (0 `UINT8` … 9 `BFLOAT16`, 11 `TFLOAT32` …).
    pub data_type: u32,
    /// Dimensions, 1 to 5.
    pub rank: u32,
    /// The tensor's global address.
    pub global_address: u64,
    /// Elements along each dimension (innermost first), `rank` of them.
    pub dims: [u64; 5],
    /// Bytes between consecutive indices of dimensions 1.. (`rank - 1`).
    pub strides: [u64; 4],
    /// The box: elements along each dimension.
    pub box_dims: [u32; 5],
    /// Element strides (the traversal step) along each dimension.
    pub element_strides: [u32; 5],
    /// `CUtensorMapInterleave` (0: none).
    pub interleave: u32,
    /// `CUtensorMapSwizzle`: 0 none, 1 32 bytes, 2 64 bytes, 3 128 bytes.
    pub swizzle: u32,
    /// `CUtensorMapL2promotion` (not modelled).
    pub l2_promotion: u32,
    /// `CUtensorMapFloatOOBfill`: 0 zeros, 1 NaN (`NAN_REQUEST_ZERO_FMA`).
    pub oob_fill: u32,
}

/// Bytes of an element of `CUtensorMapDataType` `t`.
fn element_bytes(t: u32) -> Option<u64> {
    Some(match t {
        0 => 1,
        1 | 6 | 9 => 2,
        2 | 3 | 7 | 10..=12 => 4,
        4 | 5 | 8 => 8,
        _ => return None,
    })
}

/// Bytes of a swizzle pattern's row (`CUtensorMapSwizzle`): 0 for none.
fn swizzle_bytes(s: u32) -> u32 {
    match s {
        1 => 32,
        2 => 64,
        3 => 128,
        _ => 0,
    }
}

/// The byte address `addr` of shared memory as a swizzle of `bytes` (32, 64
/// or 128; 0: none) places it: the 16-byte chunk index within the row (bits
/// 4 and up) XOR the row index within the pattern's 8 rows (bits 7 and up),
/// CuTe's `Swizzle<log2(bytes / 16), 4, 3>`. The hardware applies it to the
/// shared address itself, so TMA and wgmma agree for any tile start.
fn swizzle(addr: u32, bytes: u32) -> u32 {
    match bytes {
        32 => addr ^ (((addr >> 7) & 1) << 4),
        64 => addr ^ (((addr >> 7) & 3) << 4),
        128 => addr ^ (((addr >> 7) & 7) << 4),
        _ => addr,
    }
}

/// Checks `m` as `cuTensorMapEncodeTiled` does (the rules its
/// documentation lists) and encodes it in the simulator's tensor-map
/// format: what the host writes where a GPU has the driver's map. An
/// argument the driver refuses is an `Err` saying which.
pub fn encode_tiled(m: &TiledMap) -> Result<TensorMap, String> {
    let bytes = element_bytes(m.data_type)
        .ok_or_else(|| format!("data type {} is not a CUtensorMapDataType", m.data_type))?;
    let rank = m.rank as usize;
    if !(1..=5).contains(&rank) {
        return Err(format!("rank {rank}: 1 to 5"));
    }
    if m.interleave != 0 {
        return Err("interleaved layouts are not modelled by the simulator".into());
    }
    if !m.global_address.is_multiple_of(16) {
        return Err(format!(
            "global address {:#x} is not 16-byte aligned",
            m.global_address
        ));
    }
    for d in 0..rank {
        if m.dims[d] == 0 || m.dims[d] > 1 << 32 {
            return Err(format!(
                "dimension {d} of {} elements: 1 to 2^32",
                m.dims[d]
            ));
        }
        if m.box_dims[d] == 0 || m.box_dims[d] > 256 {
            return Err(format!("box dimension {d} of {}: 1 to 256", m.box_dims[d]));
        }
        if !(1..=8).contains(&m.element_strides[d]) {
            return Err(format!(
                "element stride {d} of {}: 1 to 8",
                m.element_strides[d]
            ));
        }
    }
    for d in 0..rank - 1 {
        let s = m.strides[d];
        if !s.is_multiple_of(16) || s >= 1 << 40 {
            return Err(format!(
                "global stride {} of {s} bytes: a multiple of 16 below 2^40",
                d + 1
            ));
        }
    }
    let inner = m.box_dims[0] as u64 * bytes;
    if !inner.is_multiple_of(16) {
        return Err(format!(
            "the box's inner dimension is {inner} bytes: a multiple of 16"
        ));
    }
    let span = swizzle_bytes(m.swizzle) as u64;
    if m.swizzle > 3 {
        return Err(format!("swizzle {}: 0 to 3", m.swizzle));
    }
    if span != 0 && inner > span {
        return Err(format!(
            "the box's inner dimension ({inner} bytes) exceeds the {span}-byte swizzle"
        ));
    }
    let mut w = [0u64; 16];
    w[0] = SIM_TENSOR_MAP_MAGIC;
    w[1] = m.global_address;
    w[2..7].copy_from_slice(&m.dims);
    w[7..11].copy_from_slice(&m.strides);
    let b = m.box_dims.map(u64::from);
    w[11] = b[0] | b[1] << 16 | b[2] << 32 | b[3] << 48;
    let e = m.element_strides.map(u64::from);
    w[12] = b[4] | e[0] << 16 | e[1] << 24 | e[2] << 32 | e[3] << 40 | e[4] << 48;
    w[13] = u64::from(m.data_type)
        | u64::from(m.interleave) << 8
        | u64::from(m.swizzle) << 16
        | u64::from(m.l2_promotion) << 24
        | u64::from(m.oob_fill) << 32
        | (rank as u64) << 40;
    Ok(TensorMap(w))
}

/// The arguments a map made by [`encode_tiled`] holds; `None` for any
/// other 128 bytes (a driver's map, or memory that holds no map).
pub fn decode_tiled(map: &TensorMap) -> Option<TiledMap> {
    let w = &map.0;
    if w[0] != SIM_TENSOR_MAP_MAGIC {
        return None;
    }
    let mut dims = [0u64; 5];
    dims.copy_from_slice(&w[2..7]);
    let mut strides = [0u64; 4];
    strides.copy_from_slice(&w[7..11]);
    let b = |v: u64, s: u32, m: u64| ((v >> s) & m) as u32;
    Some(TiledMap {
        data_type: b(w[13], 0, 0xff),
        rank: b(w[13], 40, 0xff),
        global_address: w[1],
        dims,
        strides,
        box_dims: [
            b(w[11], 0, 0xffff),
            b(w[11], 16, 0xffff),
            b(w[11], 32, 0xffff),
            b(w[11], 48, 0xffff),
            b(w[12], 0, 0xffff),
        ],
        element_strides: [
            b(w[12], 16, 0xff),
            b(w[12], 24, 0xff),
            b(w[12], 32, 0xff),
            b(w[12], 40, 0xff),
            b(w[12], 48, 0xff),
        ],
        interleave: b(w[13], 8, 0xff),
        swizzle: b(w[13], 16, 0xff),
        l2_promotion: b(w[13], 24, 0xff),
        oob_fill: b(w[13], 32, 0xff),
    })
}

/// One transaction barrier.
#[derive(Clone, Copy, Debug)]
struct MBar {
    /// Arrivals each phase waits for.
    expected: u32,
    /// Arrivals the current phase still waits for.
    pending: u32,
    /// Transaction bytes announced and not yet landed (may go below zero
    /// while a load lands before its announcement).
    tx: i64,
    /// Phases completed.
    phase: u32,
}

/// A TMA load issued and not landed.
#[derive(Clone, Copy)]
struct Inflight {
    barrier: u32,
    dst: u32,
    bytes: u32,
    map: TiledMap,
    coords: [i32; 5],
}

/// An element type wgmma reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MmaType {
    /// bf16.
    Bf16,
    /// f16.
    F16,
    /// tf32 (f32 in memory, the low 13 bits ignored).
    Tf32,
}

impl MmaType {
    fn bytes(self) -> u32 {
        match self {
            MmaType::Tf32 => 4,
            _ => 2,
        }
    }

    /// The K of one instruction: 32 bytes of each row.
    fn k(self) -> u32 {
        32 / self.bytes()
    }
}

/// One wgmma of a thread, issued and not retired.
#[derive(Clone, Copy)]
struct Mma {
    acc: *mut f32,
    n: u32,
    a: u64,
    b: u64,
    a_mn: bool,
    b_mn: bool,
    ty: MmaType,
    site: Site,
}

/// A thread's wgmma: its fence, the open group and the committed ones, and
/// the values of the accumulators in flight (by address).
#[derive(Default)]
struct ThreadMma {
    fenced: bool,
    open: Vec<Mma>,
    committed: VecDeque<Vec<Mma>>,
    held: Vec<(*mut f32, Vec<f32>)>,
}

/// The Hopper state of the block that runs: reset at each block start.
#[derive(Default)]
pub(crate) struct BlockHopper {
    barriers: HashMap<u32, MBar>,
    /// Phases completed in the block, all barriers together (the scheduler
    /// wakes waiters when it changes).
    pub completions: u64,
    inflight: Vec<Inflight>,
    /// The shared bytes TMA loads landed, with the swizzle each wrote
    /// (`start..end`, swizzle bytes; 0: none), the latest first.
    landed: Vec<(u32, u32, u32)>,
    mma: HashMap<u32, ThreadMma>,
}

impl BlockHopper {
    /// Whether the phase of `parity` of the barrier at `addr` completed
    /// (`None`: no such barrier).
    pub fn phase_done(&self, addr: u32, parity: u32) -> Option<bool> {
        self.barriers.get(&addr).map(|b| b.phase & 1 != parity & 1)
    }

    /// Whether TMA loads on the barrier at `addr` are in flight.
    pub fn has_inflight(&self, addr: u32) -> bool {
        self.inflight.iter().any(|c| c.barrier == addr)
    }

    /// The state of the barrier at `addr`, for a deadlock report.
    pub fn describe(&self, addr: u32) -> String {
        match self.barriers.get(&addr) {
            Some(b) => format!(
                "in phase {} (parity {}), waiting for {} of {} arrivals and {} transaction bytes",
                b.phase,
                b.phase & 1,
                b.pending,
                b.expected,
                b.tx
            ),
            None => "not initialised".to_string(),
        }
    }

    fn complete(&mut self, addr: u32) {
        if let Some(b) = self.barriers.get_mut(&addr)
            && b.pending == 0
            && b.tx == 0
        {
            b.phase = b.phase.wrapping_add(1);
            b.pending = b.expected;
            self.completions += 1;
        }
    }
}

/// A located fault of the current thread at `site`.
fn fault(site: Site, message: &str) -> ! {
    super::fail(site.file(), site.line(), site.column(), message)
}

/// Runs `f` on the current block's Hopper state.
fn with_state<R>(f: impl FnOnce(&mut BlockHopper) -> R) -> R {
    let ctx = current();
    let mut state = ctx.block_state().hopper.borrow_mut();
    f(&mut state)
}

/// The address of `len` bytes of the block's shared memory at `offset`,
/// without the race detector (the asynchronous proxy's accesses): a fault
/// at `site` past the shared memory in use.
fn shared_bytes(offset: u32, len: u32, site: Site, what: &str) -> *mut u8 {
    current()
        .block_state()
        .raw_shared(offset, len)
        .unwrap_or_else(|end| {
            fault(
                site,
                &format!(
                    "{what}: {len} bytes at shared offset {offset} go past the block's {end} \
                     bytes of shared memory"
                ),
            )
        })
}

/// `mbarrier.init`.
pub(crate) fn mbarrier_init(addr: u32, count: u32, site: Site) {
    check_barrier_address(addr, site);
    if count == 0 || count >= 1 << 20 {
        fault(
            site,
            &format!("mbarrier.init with count {count}: 1 to 2^20 - 1"),
        );
    }
    with_state(|s| {
        s.inflight.retain(|c| c.barrier != addr);
        s.barriers.insert(
            addr,
            MBar {
                expected: count,
                pending: count,
                tx: 0,
                phase: 0,
            },
        )
    });
}

fn check_barrier_address(addr: u32, site: Site) {
    if !addr.is_multiple_of(8) {
        fault(
            site,
            &format!("misaligned address: an mbarrier at shared offset {addr}, not 8-byte aligned"),
        );
    }
    shared_bytes(addr, 8, site, "mbarrier");
}

/// `mbarrier.arrive` (`tx`: `.expect_tx` of these bytes first).
pub(crate) fn mbarrier_arrive(addr: u32, tx: u32, site: Site) {
    let r = with_state(|s| {
        let b = s.barriers.get_mut(&addr).ok_or("not initialised")?;
        if b.pending == 0 {
            return Err("arrived on more often than its count in one phase");
        }
        b.tx += i64::from(tx);
        b.pending -= 1;
        s.complete(addr);
        Ok(())
    });
    if let Err(why) = r {
        fault(
            site,
            &format!("mbarrier.arrive on the barrier at shared offset {addr}: {why}"),
        );
    }
}

/// `mbarrier.try_wait.parity`: lands the barrier's TMA loads in flight, then
/// waits (suspended) until the phase of `parity` completes; `true` then.
pub(crate) fn mbarrier_try_wait(addr: u32, parity: u32, site: Site) -> bool {
    loop {
        land(addr);
        match with_state(|s| s.phase_done(addr, parity)) {
            None => fault(
                site,
                &format!(
                    "mbarrier.try_wait on the barrier at shared offset {addr}: not initialised"
                ),
            ),
            Some(true) => return true,
            Some(false) => {
                current().suspend(Event::MBarrier { addr, parity, site });
            }
        }
    }
}

/// Lands the TMA loads in flight on the barrier at `addr`, in issue order.
fn land(addr: u32) {
    loop {
        let next = with_state(|s| {
            let i = s.inflight.iter().position(|c| c.barrier == addr)?;
            Some(s.inflight.remove(i))
        });
        let Some(c) = next else { return };
        copy_box(&c);
        with_state(|s| {
            let (start, end) = (c.dst, c.dst + c.bytes);
            s.landed.retain(|&(a, b, _)| b <= start || a >= end);
            s.landed
                .insert(0, (start, end, swizzle_bytes(c.map.swizzle)));
            if let Some(b) = s.barriers.get_mut(&addr) {
                b.tx -= i64::from(c.bytes);
            }
            s.complete(addr);
        });
    }
}

/// The bytes of `m`'s box and the element size.
fn box_bytes(m: &TiledMap) -> (u64, u64) {
    let eb = element_bytes(m.data_type).unwrap_or(1);
    let elems: u64 = (0..m.rank as usize)
        .map(|d| u64::from(m.box_dims[d]))
        .product();
    (elems * eb, eb)
}

/// Writes one landed box into shared memory.
fn copy_box(c: &Inflight) {
    let m = &c.map;
    let (_, eb) = box_bytes(m);
    let rank = m.rank as usize;
    let span = swizzle_bytes(m.swizzle);
    let dst = current()
        .block_state()
        .raw_shared(c.dst, c.bytes)
        .unwrap_or_else(|_| unreachable!("checked at issue"));
    // The NaN of `NAN_REQUEST_ZERO_FMA`: the canonical one of the width.
    let nan: [u8; 8] = match eb {
        2 => [0xff, 0x7f, 0, 0, 0, 0, 0, 0],
        4 => [0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0],
        _ => [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
    };
    let mut index = [0u64; 5];
    let mut offset = 0u32;
    let total = u64::from(c.bytes) / eb;
    for _ in 0..total {
        let mut inside = true;
        let mut src = m.global_address;
        for (d, &i) in index.iter().enumerate().take(rank) {
            let x = i64::from(c.coords[d]) + i as i64;
            if x < 0 || x as u64 >= m.dims[d] {
                inside = false;
            } else if d == 0 {
                src += x as u64 * eb;
            } else {
                src += x as u64 * m.strides[d - 1];
            }
        }
        let at = swizzle(c.dst + offset, span) - c.dst;
        // SAFETY: `at + eb ≤ bytes` (the swizzle permutes 16-byte chunks
        // within each 2^k-byte row group of the box, whose size is a
        // multiple of it), inside the shared bytes checked at issue; the
        // source element lies inside the tensor the map describes (the
        // host's promise, a guard page otherwise).
        unsafe {
            let to = dst.add(at as usize);
            if inside {
                std::ptr::copy_nonoverlapping(src as *const u8, to, eb as usize);
            } else if m.oob_fill == 1 {
                std::ptr::copy_nonoverlapping(nan.as_ptr(), to, eb as usize);
            } else {
                std::ptr::write_bytes(to, 0, eb as usize);
            }
        }
        offset += eb as u32;
        for (i, &size) in index.iter_mut().zip(&m.box_dims).take(rank) {
            *i += 1;
            if *i < u64::from(size) {
                break;
            }
            *i = 0;
        }
    }
}

/// `cp.async.bulk.tensor` of rank `coords.len()`: checks the map and the
/// destination, poisons the destination and puts the load in flight.
///
/// # Safety
/// `map` is the address of 128 readable bytes.
pub(crate) unsafe fn tma_load(dst: u32, map: u64, barrier: u32, coords: &[i32], site: Site) {
    // SAFETY: the caller's promise.
    let raw = unsafe { (map as *const TensorMap).read_unaligned() };
    let Some(m) = decode_tiled(&raw) else {
        fault(
            site,
            &format!(
                "cp.async.bulk.tensor: the tensor map at {map:#x} is not one the simulator reads \
                 (the host encodes it with sim::encode_tiled where the GPU has \
                 cuTensorMapEncodeTiled)"
            ),
        )
    };
    if m.rank as usize != coords.len() {
        fault(
            site,
            &format!(
                "cp.async.bulk.tensor.{}d with a tensor map of rank {}",
                coords.len(),
                m.rank
            ),
        );
    }
    if !dst.is_multiple_of(128) {
        fault(
            site,
            &format!(
                "misaligned address: cp.async.bulk.tensor to shared offset {dst}, not 128-byte \
                 aligned"
            ),
        );
    }
    if m.element_strides[..m.rank as usize].iter().any(|&e| e != 1) {
        fault(
            site,
            "cp.async.bulk.tensor: element strides other than 1 are not modelled by the simulator",
        );
    }
    let span = swizzle_bytes(m.swizzle);
    let (bytes, eb) = box_bytes(&m);
    if span != 0 && u64::from(m.box_dims[0]) * eb != u64::from(span) {
        fault(
            site,
            &format!(
                "cp.async.bulk.tensor: a box {} bytes wide with the {span}-byte swizzle (the \
                 simulator models boxes as wide as the swizzle)",
                u64::from(m.box_dims[0]) * eb
            ),
        );
    }
    let Ok(bytes) = u32::try_from(bytes) else {
        fault(site, "cp.async.bulk.tensor: a box of 4 GiB or more")
    };
    let p = shared_bytes(dst, bytes, site, "cp.async.bulk.tensor box");
    // SAFETY: `shared_bytes` checked the bytes lie in the block's shared memory.
    unsafe { std::ptr::write_bytes(p, 0xff, bytes as usize) };
    let mut c = [0i32; 5];
    c[..coords.len()].copy_from_slice(coords);
    let known = with_state(|s| {
        let known = s.barriers.contains_key(&barrier);
        s.inflight.push(Inflight {
            barrier,
            dst,
            bytes,
            map: m,
            coords: c,
        });
        known
    });
    if !known {
        fault(
            site,
            &format!(
                "cp.async.bulk.tensor completing on the barrier at shared offset {barrier}: not \
                 initialised"
            ),
        );
    }
}

/// `cp.async.bulk.tensor` to global memory (a TMA store): the box of
/// shared memory at `src`, swizzled as the map says, to the tensor at
/// `coords`; elements outside the tensor are not written. Made at once (a
/// bulk group completes, and its source may be reused, no earlier than on
/// the GPU).
///
/// # Safety
/// `map` is the address of 128 readable bytes; the tensor the map
/// describes is writable where the box lies inside it.
pub(crate) unsafe fn tma_store(map: u64, src: u32, coords: &[i32], site: Site) {
    // SAFETY: the caller's promise.
    let raw = unsafe { (map as *const TensorMap).read_unaligned() };
    let Some(m) = decode_tiled(&raw) else {
        fault(
            site,
            &format!(
                "cp.async.bulk.tensor (store): the tensor map at {map:#x} is not one the \
                 simulator reads"
            ),
        )
    };
    if m.rank as usize != coords.len() || !src.is_multiple_of(128) {
        fault(
            site,
            &format!(
                "cp.async.bulk.tensor.{}d (store) with a map of rank {} from shared offset {src} \
                 (128-byte aligned)",
                coords.len(),
                m.rank
            ),
        );
    }
    let (bytes, eb) = box_bytes(&m);
    let Ok(bytes) = u32::try_from(bytes) else {
        fault(site, "cp.async.bulk.tensor (store): a box of 4 GiB or more")
    };
    let from = shared_bytes(src, bytes, site, "cp.async.bulk.tensor (store) box");
    let span = swizzle_bytes(m.swizzle);
    let rank = m.rank as usize;
    let mut index = [0u64; 5];
    for e in 0..u64::from(bytes) / eb {
        let mut dst = Some(m.global_address);
        for (d, &i) in index.iter().enumerate().take(rank) {
            let x = i64::from(coords[d]) + i as i64;
            if x < 0 || x as u64 >= m.dims[d] {
                dst = None;
            } else if let Some(a) = dst.as_mut() {
                *a += if d == 0 {
                    x as u64 * eb
                } else {
                    x as u64 * m.strides[d - 1]
                };
            }
        }
        if let Some(dst) = dst {
            let at = swizzle(src + (e * eb) as u32, span) - src;
            // SAFETY: `at + eb ≤ bytes` inside the checked shared bytes; the
            // destination inside the tensor (the caller's promise).
            unsafe {
                std::ptr::copy_nonoverlapping(from.add(at as usize), dst as *mut u8, eb as usize)
            };
        }
        for (i, &size) in index.iter_mut().zip(&m.box_dims).take(rank) {
            *i += 1;
            if *i < u64::from(size) {
                break;
            }
            *i = 0;
        }
    }
}

/// `barrier.sync id, threads` (a named barrier): waits until `threads`
/// threads of the block wait at barrier `id`.
pub(crate) fn named_barrier(id: u32, threads: u32, site: Site) {
    let block = current().block_state().block_dim.iter().product::<u32>();
    if id >= 16
        || threads == 0
        || !threads.is_multiple_of(32)
        || threads > block.next_multiple_of(32)
    {
        fault(
            site,
            &format!(
                "barrier.sync {id}, {threads}: the id is 0 to 15, the count a nonzero multiple of \
                 32 no larger than the block"
            ),
        );
    }
    current().suspend(Event::Named { id, threads, site });
}

/// `fence.proxy.tensormap` / `prefetch.tensormap`: a fault unless `map`
/// holds a map the simulator reads.
///
/// # Safety
/// `map` is the address of 128 readable bytes.
pub(crate) unsafe fn check_tensor_map(map: u64, what: &str, site: Site) {
    // SAFETY: the caller's promise.
    let raw = unsafe { (map as *const TensorMap).read_unaligned() };
    if decode_tiled(&raw).is_none() {
        fault(
            site,
            &format!("{what}: the tensor map at {map:#x} is not one the simulator reads"),
        );
    }
}

/// The thread's index in its warpgroup and the warpgroup's first thread.
fn warpgroup_thread() -> (u32, u32) {
    let linear = current().linear;
    (linear % 128, linear / 128 * 128)
}

/// `wgmma.fence`.
pub(crate) fn wgmma_fence() {
    let linear = current().linear;
    with_state(|s| s.mma.entry(linear).or_default().fenced = true);
}

/// `wgmma.mma_async` m64n`n`k(16 or 8) of this thread: its accumulators'
/// values kept and the registers poisoned until it retires.
///
/// # Safety
/// `acc` points to `n / 2` f32 that stay valid and are not read or written
/// until a `wait_group` retires this wgmma.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn wgmma(
    acc: *mut f32,
    n: u32,
    a: u64,
    b: u64,
    a_mn: bool,
    b_mn: bool,
    ty: MmaType,
    site: Site,
) {
    let linear = current().linear;
    let count = (n / 2) as usize;
    let fenced = with_state(|s| s.mma.entry(linear).or_default().fenced);
    if !fenced {
        fault(
            site,
            "wgmma.mma_async with no wgmma.fence since this thread's last wgmma.wait_group (the \
             accumulator registers may be written before the wgmma reads them)",
        );
    }
    with_state(|s| {
        let t = s.mma.entry(linear).or_default();
        if !t.held.iter().any(|(p, _)| *p == acc) {
            // SAFETY: the caller's promise: `count` valid f32.
            let values = unsafe { std::slice::from_raw_parts_mut(acc, count) };
            t.held.push((acc, values.to_vec()));
            values.fill(f32::from_bits(POISON));
        }
        t.open.push(Mma {
            acc,
            n,
            a,
            b,
            a_mn,
            b_mn,
            ty,
            site,
        });
    });
}

/// `wgmma.commit_group`.
pub(crate) fn wgmma_commit() {
    let linear = current().linear;
    with_state(|s| {
        let t = s.mma.entry(linear).or_default();
        let open = std::mem::take(&mut t.open);
        t.committed.push_back(open);
    });
}

/// `wgmma.wait_group n`: retires all but the newest `n` committed groups
/// (computing their products into the accumulators), then waits for the
/// warpgroup's other threads to get here.
pub(crate) fn wgmma_wait(n: u32, site: Site) {
    let linear = current().linear;
    loop {
        let group = with_state(|s| {
            let t = s.mma.entry(linear).or_default();
            t.fenced = false;
            if t.committed.len() > n as usize {
                t.committed.pop_front()
            } else {
                None
            }
        });
        let Some(group) = group else { break };
        for op in &group {
            let mut values = with_state(|s| {
                let t = s.mma.entry(linear).or_default();
                let i = t.held.iter().position(|(p, _)| *p == op.acc);
                i.map(|i| std::mem::take(&mut t.held[i].1))
                    .unwrap_or_default()
            });
            compute(op, &mut values);
            with_state(|s| {
                let t = s.mma.entry(linear).or_default();
                if let Some(h) = t.held.iter_mut().find(|(p, _)| *p == op.acc) {
                    h.1 = values;
                }
            });
        }
        // Accumulators no wgmma in flight writes any more: their values go
        // back to the registers.
        let done: Vec<(*mut f32, Vec<f32>, Site)> = with_state(|s| {
            let t = s.mma.entry(linear).or_default();
            let busy: Vec<*mut f32> = t
                .open
                .iter()
                .chain(t.committed.iter().flatten())
                .map(|m| m.acc)
                .collect();
            let mut done = Vec::new();
            t.held.retain(|(p, v)| {
                if busy.contains(p) {
                    return true;
                }
                let site = group.iter().find(|m| m.acc == *p).map_or(site, |m| m.site);
                done.push((*p, v.clone(), site));
                false
            });
            done
        });
        for (p, v, issued) in done {
            // SAFETY: wgmma's caller promised the accumulators stay valid
            // until this retirement.
            let regs = unsafe { std::slice::from_raw_parts_mut(p, v.len()) };
            if let Some(i) = regs.iter().position(|x| x.to_bits() != POISON) {
                fault(
                    site,
                    &format!(
                        "accumulator {i} of the wgmma.mma_async at {} was written while the \
                         wgmma was in flight (before the wgmma.wait_group that retires it)",
                        at(issued)
                    ),
                );
            }
            regs.copy_from_slice(&v);
        }
    }
    current().suspend(Event::WarpGroup(site));
}

/// The swizzle of a wgmma shared-memory descriptor, in bytes (bits 62–63:
/// 1 128 bytes, 2 64, 3 32; 0 none).
fn descriptor_swizzle(desc: u64) -> u32 {
    match desc >> 62 {
        1 => 128,
        2 => 64,
        3 => 32,
        _ => 0,
    }
}

/// One element of an operand tile, by its descriptor: row `mn` (M of A, N
/// of B) and column `k`.
fn element(desc: u64, mn_major: bool, ty: MmaType, mn: u32, k: u32, site: Site) -> f32 {
    let start = ((desc & 0x3fff) << 4) as u32;
    let lbo = (((desc >> 16) & 0x3fff) << 4) as u32;
    let sbo = (((desc >> 32) & 0x3fff) << 4) as u32;
    let span = descriptor_swizzle(desc);
    let eb = ty.bytes();
    let addr = if span != 0 {
        if mn_major {
            let mb = mn * eb;
            start + mb % span + (mb / span) * lbo + (k % 8) * span + (k / 8) * sbo
        } else {
            start + (mn % 8) * span + (mn / 8) * sbo + k * eb
        }
    } else if mn_major {
        let mb = mn * eb;
        start + mb % 16 + (mb / 16) * lbo + (k % 8) * 16 + (k / 8) * sbo
    } else {
        let kb = k * eb;
        start + (mn % 8) * 16 + (mn / 8) * sbo + kb % 16 + (kb / 16) * lbo
    };
    let addr = swizzle(addr, span);
    let p = shared_bytes(addr, eb, site, "wgmma.mma_async operand");
    // SAFETY: `shared_bytes` checked the bytes lie in the block's shared memory.
    let bits = unsafe {
        match eb {
            2 => u32::from(p.cast::<u16>().read_unaligned()),
            _ => p.cast::<u32>().read_unaligned(),
        }
    };
    let poisoned = match eb {
        2 => bits == 0xffff,
        _ => bits == u32::MAX,
    };
    if poisoned
        && current()
            .block_state()
            .hopper
            .borrow()
            .inflight
            .iter()
            .any(|c| (c.dst..c.dst + c.bytes).contains(&addr))
    {
        fault(
            site,
            &format!(
                "wgmma.mma_async reads shared offset {addr}, which a TMA load in flight writes: \
                 wait on its mbarrier's phase first"
            ),
        );
    }
    match ty {
        MmaType::Bf16 => crate::float16::bf16::from_bits(bits as u16).widen(),
        MmaType::F16 => crate::float16::f16::from_bits(bits as u16).widen(),
        MmaType::Tf32 => f32::from_bits(bits & 0xffff_e000),
    }
}

/// The products of `op` added to `acc` (the thread's `n / 2` accumulators):
/// accumulator `4j + e` at row `16 w + l / 4 + 8 (e / 2)`, column `8 j +
/// 2 (l % 4) + e % 2` (warp `w`, lane `l` of the warpgroup).
fn compute(op: &Mma, acc: &mut [f32]) {
    for (desc, which) in [(op.a, "A"), (op.b, "B")] {
        let start = ((desc & 0x3fff) << 4) as u32;
        if (desc >> 49) & 7 != 0 {
            fault(
                op.site,
                &format!(
                    "wgmma.mma_async: the descriptor of {which} has a base offset of {} (a \
                     swizzle pattern not starting at its alignment), which the simulator does \
                     not model",
                    (desc >> 49) & 7
                ),
            );
        }
        let span = descriptor_swizzle(desc);
        let written = current()
            .block_state()
            .hopper
            .borrow()
            .landed
            .iter()
            .find(|&&(a, b, _)| (a..b).contains(&start))
            .map(|&(_, _, w)| w);
        if let Some(w) = written
            && w != span
        {
            let name = |b: u32| match b {
                0 => "no swizzle".to_string(),
                b => format!("the {b}-byte swizzle"),
            };
            fault(
                op.site,
                &format!(
                    "wgmma.mma_async: the descriptor of {which} (shared offset {start}) reads \
                     with {}, but the TMA load that wrote it used {}",
                    name(span),
                    name(w)
                ),
            );
        }
    }
    let (t, _) = warpgroup_thread();
    let (w, l) = (t / 32, t % 32);
    let k = op.ty.k();
    let rows = [16 * w + l / 4, 16 * w + l / 4 + 8];
    let mut a = [[0f32; 16]; 2];
    for (i, &r) in rows.iter().enumerate() {
        for kk in 0..k {
            a[i][kk as usize] = element(op.a, op.a_mn, op.ty, r, kk, op.site);
        }
    }
    let cols = op.n / 8;
    let k = k as usize;
    for j in 0..cols {
        for e in 0..2u32 {
            let col = 8 * j + 2 * (l % 4) + e;
            let mut b = [0f32; 16];
            for (kk, v) in b.iter_mut().enumerate().take(k) {
                *v = element(op.b, op.b_mn, op.ty, col, kk as u32, op.site);
            }
            for (i, ar) in a.iter().enumerate() {
                let idx = (4 * j + 2 * i as u32 + e) as usize;
                acc[idx] = crate::mma::tensor_core_dot(acc[idx], &ar[..k], &b[..k]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swizzles_permute_chunks_within_rows() {
        // 128 bytes: row 1's chunk 0 is at chunk 1, row 7's chunk 2 at 5.
        assert_eq!(swizzle(128, 128), 128 + 16);
        assert_eq!(swizzle(7 * 128 + 32, 128), 7 * 128 + 5 * 16);
        assert_eq!(swizzle(3 * 128, 64), 3 * 128 + 3 * 16);
        assert_eq!(swizzle(5 * 128 + 16, 32), 5 * 128);
        assert_eq!(swizzle(200, 0), 200);
    }

    #[test]
    fn tensor_maps_round_trip_and_refuse_what_the_driver_refuses() {
        let m = TiledMap {
            data_type: 9,
            rank: 3,
            global_address: 0x1000,
            dims: [100, 300, 2, 0, 0],
            strides: [208, 208 * 300, 0, 0],
            box_dims: [64, 128, 1, 0, 0],
            element_strides: [1, 1, 1, 0, 0],
            interleave: 0,
            swizzle: 3,
            l2_promotion: 3,
            oob_fill: 0,
        };
        assert_eq!(decode_tiled(&encode_tiled(&m).unwrap()), Some(m));
        let bad = TiledMap {
            strides: [200, 0, 0, 0],
            ..m
        };
        assert!(encode_tiled(&bad).unwrap_err().contains("multiple of 16"));
        let wide = TiledMap {
            box_dims: [128, 128, 1, 0, 0],
            ..m
        };
        assert!(encode_tiled(&wide).unwrap_err().contains("swizzle"));
        assert_eq!(decode_tiled(&TensorMap([0; 16])), None);
    }
}
