//! Collectives between simulated devices of one process: a clique of ranks
//! (threads) that post their parts of each collective under a sequence
//! number and wait, up to their deadline, for the others'; point-to-point
//! messages through per-pair queues, matched in order as NCCL matches them.
//! Simulated memory is host memory, so a part is the bytes of a buffer.
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use super::{Call, Communicator, DataType, K, Kind, UniqueId};
use crate::error::{Error, Result};

/// One collective's parts, by sequence number.
struct Slot {
    /// What the first rank to post called: the others must match it.
    signature: Signature,
    first: usize,
    parts: Vec<Option<Vec<u8>>>,
    /// Ranks that have taken their result.
    done: usize,
    /// Why the ranks' calls do not match.
    mismatch: Option<String>,
}

/// What every rank's call of one collective must agree on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Signature {
    kind: Kind,
    data_type: DataType,
    count: usize,
}

/// A point-to-point message.
struct Message {
    data_type: DataType,
    count: usize,
    bytes: Vec<u8>,
}

struct State {
    slots: HashMap<u64, Slot>,
    mail: HashMap<(usize, usize), VecDeque<Message>>,
    /// Ranks that aborted or dropped their communicator, and why.
    gone: Vec<Option<String>>,
    joined: Vec<bool>,
}

/// The shared state of one simulated communicator's ranks.
pub(super) struct Clique {
    ranks: usize,
    state: Mutex<State>,
    changed: Condvar,
}

/// One rank's handle on its clique.
pub(super) struct Rank {
    clique: Arc<Clique>,
    rank: usize,
    /// The next collective's sequence number.
    seq: AtomicU64,
}

/// The cliques made by [`Clique::join`], by unique id.
static REGISTRY: Mutex<Option<HashMap<[u8; super::UNIQUE_ID_BYTES], Weak<Clique>>>> =
    Mutex::new(None);

impl Clique {
    /// A clique of `ranks` ranks, all joined (one process's devices).
    pub fn new(ranks: usize) -> Arc<Self> {
        let clique = Self::empty(ranks);
        clique.lock().joined.fill(true);
        clique
    }

    fn empty(ranks: usize) -> Arc<Self> {
        Arc::new(Self {
            ranks,
            state: Mutex::new(State {
                slots: HashMap::new(),
                mail: HashMap::new(),
                gone: vec![None; ranks],
                joined: vec![false; ranks],
            }),
            changed: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Rank `rank`'s handle.
    pub fn rank(self: &Arc<Self>, rank: usize) -> Rank {
        Rank {
            clique: self.clone(),
            rank,
            seq: AtomicU64::new(0),
        }
    }

    /// Joins rank `rank` of `ranks` to the clique of `id` in this process
    /// (made by the first rank to join), and waits up to `timeout` for
    /// every rank to join.
    pub fn join(id: &UniqueId, rank: usize, ranks: usize, timeout: Duration) -> Result<Rank> {
        let clique = {
            let mut registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
            let map = registry.get_or_insert_with(HashMap::new);
            map.retain(|_, c| c.strong_count() > 0);
            let clique = match map.get(id.bytes()).and_then(Weak::upgrade) {
                Some(c) => c,
                None => {
                    let c = Self::empty(ranks);
                    map.insert(*id.bytes(), Arc::downgrade(&c));
                    c
                }
            };
            if clique.ranks != ranks {
                return Err(Error::invalid(
                    K,
                    format!(
                        "rank {rank} joins with {ranks} ranks a communicator that has {}",
                        clique.ranks
                    ),
                ));
            }
            let mut state = clique.lock();
            if state.joined[rank] {
                return Err(Error::invalid(
                    K,
                    format!("rank {rank} joined this communicator twice"),
                ));
            }
            state.joined[rank] = true;
            drop(state);
            clique.changed.notify_all();
            clique
        };
        let handle = clique.rank(rank);
        let since = Instant::now();
        let mut state = clique.lock();
        while !state.joined.iter().all(|&j| j) {
            let left = timeout.saturating_sub(since.elapsed());
            if left.is_zero() {
                state.gone[rank] = Some("its set-up passed its deadline".into());
                drop(state);
                clique.changed.notify_all();
                return Err(Error::CollectiveTimeout {
                    operation: "ncclCommInitRank (simulated)",
                    rank,
                    ranks,
                    waited: since.elapsed(),
                });
            }
            state = clique
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        drop(state);
        Ok(handle)
    }
}

impl Rank {
    /// Marks this rank gone (aborted): ranks waiting for it fail at once.
    pub fn abort(&self, why: &str) {
        self.gone(format!("it was aborted: {why}"));
    }

    /// Marks this rank gone (its communicator dropped).
    pub fn leave(&self) {
        self.gone("its communicator was dropped".into());
    }

    fn gone(&self, why: String) {
        let mut state = self.clique.lock();
        state.gone[self.rank].get_or_insert(why);
        drop(state);
        self.clique.changed.notify_all();
    }
}

/// The simulator's memory of `len` bytes at device address `addr`, copied.
///
/// # Safety
/// `addr` is the start of `len` bytes of a live simulator allocation.
unsafe fn read(addr: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    if len > 0 {
        // SAFETY: the caller's contract; `v` is a fresh allocation.
        unsafe { std::ptr::copy_nonoverlapping(addr as usize as *const u8, v.as_mut_ptr(), len) };
    }
    v
}

/// Writes `bytes` at device address `addr` of the simulator's memory.
///
/// # Safety
/// `addr` is the start of `bytes.len()` bytes of a live simulator
/// allocation that nothing else reads or writes meanwhile.
unsafe fn write(addr: u64, bytes: &[u8]) {
    if !bytes.is_empty() {
        // SAFETY: the caller's contract; `copy` allows the in-place case.
        unsafe { std::ptr::copy(bytes.as_ptr(), addr as usize as *mut u8, bytes.len()) };
    }
}

/// What a rank sends of a call: the collectives' contributions are their
/// send buffers.
fn signature(c: &Call) -> Signature {
    Signature {
        kind: c.kind,
        data_type: c.data_type,
        count: c.send_len,
    }
}

/// Runs a group's calls on the simulator: every part posted first (the
/// sends' messages, the collectives' contributions), then each call
/// completed in order, each waiting up to its communicator's deadline.
pub(super) fn run_group(calls: &[(&Communicator, Call)]) -> Result<()> {
    let since = Instant::now();
    let mut seqs = Vec::with_capacity(calls.len());
    for (comm, call) in calls {
        comm.check_usable(call.kind.name())?;
        seqs.push(post(comm, call)?);
    }
    for ((comm, call), seq) in calls.iter().zip(seqs) {
        complete(comm, call, seq, since)?;
    }
    Ok(())
}

fn rank_of(comm: &Communicator) -> Result<&Rank> {
    match &comm.backend {
        super::Backend::Sim(r) => Ok(r),
        super::Backend::Nccl { .. } => Err(Error::invalid(
            K,
            "an NCCL communicator in a simulated group",
        )),
    }
}

/// Posts a call's part: a send's message, a collective's contribution
/// (returning its sequence number); a receive posts nothing.
fn post(comm: &Communicator, call: &Call) -> Result<Option<u64>> {
    let me = rank_of(comm)?;
    let bytes = || {
        // SAFETY: the Call was made from a live slice of this simulated
        // device holding send_len elements, borrowed by the group.
        unsafe { read(call.send, call.send_len * call.elem_size) }
    };
    match call.kind {
        Kind::Recv { .. } => Ok(None),
        Kind::Send { peer } => {
            let message = Message {
                data_type: call.data_type,
                count: call.send_len,
                bytes: bytes(),
            };
            let mut state = me.clique.lock();
            state
                .mail
                .entry((me.rank, peer))
                .or_default()
                .push_back(message);
            drop(state);
            me.clique.changed.notify_all();
            Ok(None)
        }
        _ => {
            let seq = me.seq.fetch_add(1, Ordering::Relaxed);
            let mine = signature(call);
            let part = bytes();
            let mut state = me.clique.lock();
            let ranks = me.clique.ranks;
            let slot = state.slots.entry(seq).or_insert_with(|| Slot {
                signature: mine,
                first: me.rank,
                parts: vec![None; ranks],
                done: 0,
                mismatch: None,
            });
            if slot.signature != mine && slot.mismatch.is_none() {
                slot.mismatch = Some(format!(
                    "the ranks' collective #{seq} does not match: rank {} called {} and rank {} \
                     called {}",
                    slot.first,
                    describe(&slot.signature),
                    me.rank,
                    describe(&mine)
                ));
            }
            slot.parts[me.rank] = Some(part);
            drop(state);
            me.clique.changed.notify_all();
            Ok(Some(seq))
        }
    }
}

/// `all_reduce(Sum) of 4 F32`.
fn describe(s: &Signature) -> String {
    format!("{:?} of {} {:?}", s.kind, s.count, s.data_type)
}

/// Waits for what a call needs (every contribution, or the peer's
/// message) and writes its result.
fn complete(comm: &Communicator, call: &Call, seq: Option<u64>, since: Instant) -> Result<()> {
    let me = rank_of(comm)?;
    let op = call.kind.name();
    let mut state = me.clique.lock();
    loop {
        let ready = match (call.kind, seq) {
            (Kind::Send { .. }, _) => return Ok(()),
            (Kind::Recv { peer }, _) => {
                let queue = state.mail.entry((peer, me.rank)).or_default();
                if let Some(m) = queue.pop_front() {
                    drop(state);
                    if m.data_type != call.data_type || m.count != call.recv_len {
                        return Err(Error::invalid(
                            K,
                            format!(
                                "recv on rank {}: {} {:?} expected from rank {peer}, which sent \
                                 {} {:?}",
                                me.rank, call.recv_len, call.data_type, m.count, m.data_type
                            ),
                        ));
                    }
                    // SAFETY: the receive buffer is a live slice of this
                    // simulated device of recv_len elements (its bytes:
                    // m.bytes.len(), the same length and type, checked).
                    unsafe { write(call.recv, &m.bytes) };
                    return Ok(());
                }
                state.gone[peer].clone().map(|why| (peer, why))
            }
            (_, Some(seq)) => {
                let ranks = me.clique.ranks;
                let slot = state
                    .slots
                    .get_mut(&seq)
                    .ok_or_else(|| Error::invalid(K, format!("collective #{seq} lost")))?;
                if let Some(why) = &slot.mismatch {
                    return Err(Error::invalid(
                        K,
                        format!("{op} on rank {}: {why}", me.rank),
                    ));
                }
                if slot.parts.iter().all(Option::is_some) {
                    let result = result_of(call, &slot.parts, me.rank, ranks);
                    slot.done += 1;
                    if slot.done == ranks {
                        state.slots.remove(&seq);
                    }
                    drop(state);
                    if let Some(bytes) = result {
                        // SAFETY: the receive buffer is a live slice of
                        // this simulated device; `result_of` gives exactly
                        // recv_len elements' bytes (the lengths checked when
                        // the Call was made, and equal on every rank).
                        unsafe { write(call.recv, &bytes) };
                    }
                    return Ok(());
                }
                let missing = slot.parts.iter().position(Option::is_none);
                missing.and_then(|r| state.gone[r].clone().map(|why| (r, why)))
            }
            (_, None) => return Err(Error::invalid(K, "a collective without a number")),
        };
        if let Some((peer, why)) = ready {
            drop(state);
            return Err(Error::CommunicatorAborted {
                operation: op,
                rank: me.rank,
                reason: format!("rank {peer}, which it waits for, is gone: {why}"),
            });
        }
        let left = comm.timeout.saturating_sub(since.elapsed());
        if left.is_zero() {
            drop(state);
            return Err(comm.time_out(op, since));
        }
        state = me
            .clique
            .changed
            .wait_timeout(state, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// Rank `me`'s result of a collective from every rank's part, as bytes of
/// its receive buffer (`None`: nothing to write, a reduce's other ranks).
/// Folds in rank order.
fn result_of(call: &Call, parts: &[Option<Vec<u8>>], me: usize, ranks: usize) -> Option<Vec<u8>> {
    let part = |r: usize| parts[r].as_deref().unwrap_or(&[]);
    let fold = |op| {
        let mut acc = part(0).to_vec();
        for r in 1..ranks {
            (call.fold)(op, &mut acc, part(r));
        }
        acc
    };
    match call.kind {
        Kind::AllReduce(op) => Some(fold(op)),
        Kind::Reduce { op, root } => (me == root).then(|| fold(op)),
        Kind::Broadcast { root } => Some(part(root).to_vec()),
        Kind::AllGather => Some((0..ranks).flat_map(|r| part(r).iter().copied()).collect()),
        Kind::ReduceScatter(op) => {
            let block = call.recv_len * call.elem_size;
            Some(fold(op)[me * block..(me + 1) * block].to_vec())
        }
        Kind::Send { .. } | Kind::Recv { .. } => None,
    }
}
