//! Collectives between simulated devices: a clique of ranks that post their
//! parts of each collective under a sequence number and wait, up to their
//! deadline, for the others'; point-to-point messages through per-pair
//! queues, matched in order as NCCL matches them. The clique works on
//! bytes: a rank of this process reads its part from the simulator's memory
//! (host memory) and writes its result there ([`Member::Local`]); a rank of
//! another process sends them to the clique's hub over loopback TCP
//! ([`Member::Remote`], [`super::hub`]), which runs the same clique.
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use super::hub::Client;
use super::{Call, Communicator, DataType, K, Kind, UniqueId};
use crate::error::{Error, Result};

/// What a rank's call is, without its memory: what the clique needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    pub kind: Kind,
    pub data_type: DataType,
    pub send_len: usize,
    pub recv_len: usize,
}

impl Shape {
    fn of(c: &Call) -> Self {
        Shape {
            kind: c.kind,
            data_type: c.data_type,
            send_len: c.send_len,
            recv_len: c.recv_len,
        }
    }

    /// Whether the call sends a part (every call but a receive).
    fn sends(&self) -> bool {
        !matches!(self.kind, Kind::Recv { .. })
    }

    /// `all_reduce(Sum) of 4 F32`.
    fn describe(&self) -> String {
        format!("{:?} of {} {:?}", self.kind, self.send_len, self.data_type)
    }
}

/// Why a rank's wait ended without its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Wait {
    /// The ranks' calls do not match (the message says how).
    Invalid(String),
    /// A rank it waits for aborted, dropped its communicator or ended.
    Gone { peer: usize, why: String },
    /// The deadline passed.
    Timeout,
    /// The connection to the clique's hub failed.
    Hub(String),
}

/// One collective's parts, by sequence number.
struct Slot {
    /// What the first rank to post called: the others must match it.
    shape: Shape,
    first: usize,
    parts: Vec<Option<Vec<u8>>>,
    /// Ranks that have taken their result.
    done: usize,
    /// Why the ranks' calls do not match.
    mismatch: Option<String>,
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
    /// Ranks that aborted, dropped their communicator or ended, and why.
    gone: Vec<Option<String>>,
    joined: Vec<bool>,
}

/// The shared state of one simulated communicator's ranks.
pub(super) struct Clique {
    ranks: usize,
    state: Mutex<State>,
    changed: Condvar,
}

/// One rank's handle on a clique of this process (its own, or the hub's
/// for a rank of another process).
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

    /// A clique of `ranks` ranks that have yet to join.
    pub fn empty(ranks: usize) -> Arc<Self> {
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

    /// Waits for a change of the state, up to `deadline`: the state again,
    /// or (`Err`) the state once the deadline has passed.
    fn wait_before<'a>(
        &'a self,
        state: MutexGuard<'a, State>,
        deadline: Instant,
    ) -> std::result::Result<MutexGuard<'a, State>, MutexGuard<'a, State>> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(state);
        }
        Ok(self
            .changed
            .wait_timeout(state, left)
            .unwrap_or_else(|e| e.into_inner())
            .0)
    }

    /// Rank `rank`'s handle.
    pub fn rank(self: &Arc<Self>, rank: usize) -> Rank {
        Rank {
            clique: self.clone(),
            rank,
            seq: AtomicU64::new(0),
        }
    }

    /// Rank `rank` of `ranks` joins (not yet waiting for the others):
    /// refused when the clique has another number of ranks or the rank
    /// joined already.
    pub fn enter(self: &Arc<Self>, rank: usize, ranks: usize) -> std::result::Result<Rank, String> {
        if self.ranks != ranks {
            return Err(format!(
                "rank {rank} joins with {ranks} ranks a communicator that has {}",
                self.ranks
            ));
        }
        let mut state = self.lock();
        if state.joined[rank] {
            return Err(format!("rank {rank} joined this communicator twice"));
        }
        state.joined[rank] = true;
        drop(state);
        self.changed.notify_all();
        Ok(self.rank(rank))
    }

    /// Joins rank `rank` of `ranks` to the clique of `id` in this process
    /// (made by the first rank to join), and waits up to `timeout` for
    /// every rank to join.
    pub fn join(id: &UniqueId, rank: usize, ranks: usize, timeout: Duration) -> Result<Rank> {
        let since = Instant::now();
        let handle = {
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
            clique
                .enter(rank, ranks)
                .map_err(|e| Error::invalid(K, e))?
        };
        handle
            .wait_for_everyone(since + timeout)
            .map_err(|_| Error::CollectiveTimeout {
                operation: "ncclCommInitRank (simulated)",
                rank,
                ranks,
                waited: since.elapsed(),
            })?;
        Ok(handle)
    }
}

impl Rank {
    /// Waits until every rank has joined; past `deadline` this rank is
    /// marked gone and the wait is [`Wait::Timeout`].
    pub fn wait_for_everyone(&self, deadline: Instant) -> std::result::Result<(), Wait> {
        let mut state = self.clique.lock();
        while !state.joined.iter().all(|&j| j) {
            state = match self.clique.wait_before(state, deadline) {
                Ok(state) => state,
                Err(mut state) => {
                    state.gone[self.rank] = Some("its set-up passed its deadline".into());
                    drop(state);
                    self.clique.changed.notify_all();
                    return Err(Wait::Timeout);
                }
            };
        }
        Ok(())
    }

    /// Marks this rank gone (aborted): ranks waiting for it fail at once.
    pub fn abort(&self, why: &str) {
        self.gone(format!("it was aborted: {why}"));
    }

    /// Marks this rank gone (its communicator dropped).
    pub fn leave(&self) {
        self.gone("its communicator was dropped".into());
    }

    /// Marks this rank gone for `why` (the first reason stays).
    pub fn gone(&self, why: String) {
        let mut state = self.clique.lock();
        state.gone[self.rank].get_or_insert(why);
        drop(state);
        self.clique.changed.notify_all();
    }

    /// Posts a call's part: a send's message, a collective's contribution
    /// (returning its sequence number); a receive posts nothing.
    pub fn post(&self, shape: &Shape, part: Vec<u8>) -> Option<u64> {
        match shape.kind {
            Kind::Recv { .. } => None,
            Kind::Send { peer } => {
                let message = Message {
                    data_type: shape.data_type,
                    count: shape.send_len,
                    bytes: part,
                };
                let mut state = self.clique.lock();
                state
                    .mail
                    .entry((self.rank, peer))
                    .or_default()
                    .push_back(message);
                drop(state);
                self.clique.changed.notify_all();
                None
            }
            _ => {
                let seq = self.seq.fetch_add(1, Ordering::Relaxed);
                let ranks = self.clique.ranks;
                let mut state = self.clique.lock();
                let slot = state.slots.entry(seq).or_insert_with(|| Slot {
                    shape: *shape,
                    first: self.rank,
                    parts: vec![None; ranks],
                    done: 0,
                    mismatch: None,
                });
                if slot.shape != *shape && slot.mismatch.is_none() {
                    slot.mismatch = Some(format!(
                        "the ranks' collective #{seq} does not match: rank {} called {} and \
                         rank {} called {}",
                        slot.first,
                        slot.shape.describe(),
                        self.rank,
                        shape.describe()
                    ));
                }
                slot.parts[self.rank] = Some(part);
                drop(state);
                self.clique.changed.notify_all();
                Some(seq)
            }
        }
    }

    /// Waits, up to `deadline`, for what a call needs (every contribution,
    /// or the peer's message) and returns the bytes of its result (`None`:
    /// nothing to write).
    pub fn complete(
        &self,
        shape: &Shape,
        seq: Option<u64>,
        deadline: Instant,
    ) -> std::result::Result<Option<Vec<u8>>, Wait> {
        let me = self.rank;
        let mut state = self.clique.lock();
        loop {
            let gone = match (shape.kind, seq) {
                (Kind::Send { .. }, _) => return Ok(None),
                (Kind::Recv { peer }, _) => {
                    let queue = state.mail.entry((peer, me)).or_default();
                    if let Some(m) = queue.pop_front() {
                        if m.data_type != shape.data_type || m.count != shape.recv_len {
                            return Err(Wait::Invalid(format!(
                                "{} {:?} expected from rank {peer}, which sent {} {:?}",
                                shape.recv_len, shape.data_type, m.count, m.data_type
                            )));
                        }
                        return Ok(Some(m.bytes));
                    }
                    state.gone[peer].clone().map(|why| (peer, why))
                }
                (_, Some(seq)) => {
                    let ranks = self.clique.ranks;
                    let slot = state
                        .slots
                        .get_mut(&seq)
                        .ok_or_else(|| Wait::Invalid(format!("collective #{seq} lost")))?;
                    if let Some(why) = &slot.mismatch {
                        return Err(Wait::Invalid(why.clone()));
                    }
                    if slot.parts.iter().all(Option::is_some) {
                        let result = result_of(shape, &slot.parts, me, ranks);
                        slot.done += 1;
                        if slot.done == ranks {
                            state.slots.remove(&seq);
                        }
                        return Ok(result);
                    }
                    let missing = slot.parts.iter().position(Option::is_none);
                    missing.and_then(|r| state.gone[r].clone().map(|why| (r, why)))
                }
                (_, None) => return Err(Wait::Invalid("a collective without a number".into())),
            };
            if let Some((peer, why)) = gone {
                return Err(Wait::Gone { peer, why });
            }
            state = self
                .clique
                .wait_before(state, deadline)
                .map_err(|_| Wait::Timeout)?;
        }
    }
}

/// A simulated communicator's rank: of a clique in this process, or of a
/// hub's clique in another.
pub(super) enum Member {
    /// A rank of a clique of this process.
    Local(Rank),
    /// A rank of the clique a hub runs (possibly in another process).
    Remote(Client),
}

impl Member {
    /// Marks the rank aborted (ranks waiting for it fail at once).
    pub fn abort(&self, why: &str) {
        match self {
            Member::Local(r) => r.abort(why),
            Member::Remote(c) => c.abort(why),
        }
    }

    /// Marks the rank gone: its communicator was dropped.
    pub fn leave(&self) {
        match self {
            Member::Local(r) => r.leave(),
            Member::Remote(c) => c.leave(),
        }
    }

    fn post(&self, shape: &Shape, part: Vec<u8>) -> std::result::Result<Option<u64>, Wait> {
        match self {
            Member::Local(r) => Ok(r.post(shape, part)),
            Member::Remote(c) => c.post(shape, part),
        }
    }

    fn complete(
        &self,
        shape: &Shape,
        seq: Option<u64>,
        deadline: Instant,
    ) -> std::result::Result<Option<Vec<u8>>, Wait> {
        match self {
            Member::Local(r) => r.complete(shape, seq, deadline),
            Member::Remote(c) => c.complete(shape, seq, deadline),
        }
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

fn member_of(comm: &Communicator) -> Result<&Member> {
    match &comm.backend {
        super::Backend::Sim(m) => Ok(m),
        super::Backend::Nccl { .. } => Err(Error::invalid(
            K,
            "an NCCL communicator in a simulated group",
        )),
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
        let shape = Shape::of(call);
        let part = if shape.sends() {
            // SAFETY: the Call was made from a live slice of this simulated
            // device holding send_len elements, borrowed by the group.
            unsafe { read(call.send, call.send_len * call.data_type.size()) }
        } else {
            Vec::new()
        };
        let seq = member_of(comm)?
            .post(&shape, part)
            .map_err(|w| failed(comm, call, w, since))?;
        seqs.push(seq);
    }
    for ((comm, call), seq) in calls.iter().zip(seqs) {
        let shape = Shape::of(call);
        let result = member_of(comm)?
            .complete(&shape, seq, since + comm.timeout)
            .map_err(|w| failed(comm, call, w, since))?;
        if let Some(bytes) = result {
            let want = call.recv_len * call.data_type.size();
            if bytes.len() != want {
                return Err(Error::invalid(
                    K,
                    format!(
                        "{} on rank {}: {} bytes came back for a receive buffer of {want}",
                        call.kind.name(),
                        comm.rank,
                        bytes.len()
                    ),
                ));
            }
            // SAFETY: the receive buffer is a live slice of this simulated
            // device of recv_len elements (its bytes: `want`, checked), borrowed
            // by the group.
            unsafe { write(call.recv, &bytes) };
        }
    }
    Ok(())
}

/// The error of a wait that ended without a result.
fn failed(comm: &Communicator, call: &Call, wait: Wait, since: Instant) -> Error {
    let op = call.kind.name();
    match wait {
        Wait::Invalid(why) => Error::invalid(K, format!("{op} on rank {}: {why}", comm.rank)),
        Wait::Gone { peer, why } => Error::CommunicatorAborted {
            operation: op,
            rank: comm.rank,
            reason: format!("rank {peer}, which it waits for, is gone: {why}"),
        },
        Wait::Timeout => comm.time_out(op, since),
        Wait::Hub(why) => {
            comm.abort(&why);
            Error::CommunicatorAborted {
                operation: op,
                rank: comm.rank,
                reason: format!("the simulated clique's hub failed: {why}"),
            }
        }
    }
}

/// Rank `me`'s result of a collective from every rank's part, as bytes of
/// its receive buffer (`None`: nothing to write, a reduce's other ranks).
/// Folds in rank order.
fn result_of(shape: &Shape, parts: &[Option<Vec<u8>>], me: usize, ranks: usize) -> Option<Vec<u8>> {
    let part = |r: usize| parts[r].as_deref().unwrap_or(&[]);
    let fold = |op| {
        let combine = shape.data_type.fold();
        let mut acc = part(0).to_vec();
        for r in 1..ranks {
            combine(op, &mut acc, part(r));
        }
        acc
    };
    match shape.kind {
        Kind::AllReduce(op) => Some(fold(op)),
        Kind::Reduce { op, root } => (me == root).then(|| fold(op)),
        Kind::Broadcast { root } => Some(part(root).to_vec()),
        Kind::AllGather => Some((0..ranks).flat_map(|r| part(r).iter().copied()).collect()),
        Kind::ReduceScatter(op) => {
            let block = shape.recv_len * shape.data_type.size();
            Some(fold(op)[me * block..(me + 1) * block].to_vec())
        }
        Kind::Send { .. } | Kind::Recv { .. } => None,
    }
}
