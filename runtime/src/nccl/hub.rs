//! A simulated communicator across processes: a hub (a thread of the
//! launcher's process, listening on loopback) runs the clique
//! ([`super::sim::Clique`]) and every rank, in whatever process, is a
//! connection to it that posts its parts and waits for its results there
//! ([`Client`]). The id of such a clique names the hub's port. A rank whose
//! process ends closes its connection: the hub marks it gone, and the ranks
//! waiting for it fail at once, as they would on a peer's abort.
//!
//! Frames: a tag byte, a 4-byte length, the payload (little-endian
//! integers). From a rank: `JOIN rank ranks timeout_ms`, `POST shape part`,
//! `COMPLETE shape seq timeout_ms`, `ABORT why`, `LEAVE`; from the hub:
//! `OK`, `SEQ`, `DATA`, `NONE`, or `WAIT kind text` (why a wait ended).
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::sim::{Clique, Shape, Wait};
use super::{DataType, K, Kind, ReduceOp, UniqueId};
use crate::error::{Error, Result};

const JOIN: u8 = 1;
const POST: u8 = 2;
const COMPLETE: u8 = 3;
const ABORT: u8 = 4;
const LEAVE: u8 = 5;
const OK: u8 = 10;
const SEQ: u8 = 11;
const DATA: u8 = 12;
const NONE: u8 = 13;
const WAIT: u8 = 14;

/// The most a frame may hold (a corrupt length is refused, not allocated).
const MAX_FRAME: usize = 1 << 31;

fn send_frame(stream: &mut TcpStream, tag: u8, payload: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(payload.len())
        .map_err(|_| std::io::Error::other("a frame of more than 4 GiB"))?;
    let mut head = [0u8; 5];
    head[0] = tag;
    head[1..].copy_from_slice(&len.to_le_bytes());
    stream.write_all(&head)?;
    stream.write_all(payload)
}

fn read_frame(stream: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut head = [0u8; 5];
    stream.read_exact(&mut head)?;
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::other("a frame too long"));
    }
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload)?;
    Ok((head[0], payload))
}

/// A payload being written.
#[derive(Default)]
struct Out(Vec<u8>);

impl Out {
    fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(mut self, v: &[u8]) -> Self {
        self = self.u64(v.len() as u64);
        self.0.extend_from_slice(v);
        self
    }
    fn shape(self, s: &Shape) -> Self {
        let (tag, a, b) = match s.kind {
            Kind::AllReduce(op) => (0, op as u64, 0),
            Kind::Broadcast { root } => (1, 0, root as u64),
            Kind::Reduce { op, root } => (2, op as u64, root as u64),
            Kind::AllGather => (3, 0, 0),
            Kind::ReduceScatter(op) => (4, op as u64, 0),
            Kind::Send { peer } => (5, 0, peer as u64),
            Kind::Recv { peer } => (6, 0, peer as u64),
        };
        self.u8(tag)
            .u64(a)
            .u64(b)
            .u64(s.data_type as i32 as u64)
            .u64(s.send_len as u64)
            .u64(s.recv_len as u64)
    }
}

/// A payload being read; every read checks the length.
struct In<'a>(&'a [u8]);

impl In<'_> {
    fn take(&mut self, n: usize) -> std::io::Result<&[u8]> {
        if self.0.len() < n {
            return Err(std::io::Error::other("a frame too short"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> std::io::Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u64(&mut self) -> std::io::Result<u64> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes([
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
        ]))
    }
    fn usize(&mut self) -> std::io::Result<usize> {
        usize::try_from(self.u64()?).map_err(|_| std::io::Error::other("a count too large"))
    }
    fn bytes(&mut self) -> std::io::Result<Vec<u8>> {
        let n = self.usize()?;
        Ok(self.take(n)?.to_vec())
    }
    fn shape(&mut self) -> std::io::Result<Shape> {
        let bad = |what: &str| std::io::Error::other(format!("a bad {what} in a frame"));
        let (tag, a, b) = (self.u8()?, self.u64()?, self.usize()?);
        let op = match a {
            0 => ReduceOp::Sum,
            1 => ReduceOp::Prod,
            2 => ReduceOp::Max,
            3 => ReduceOp::Min,
            _ => return Err(bad("operation")),
        };
        let kind = match tag {
            0 => Kind::AllReduce(op),
            1 => Kind::Broadcast { root: b },
            2 => Kind::Reduce { op, root: b },
            3 => Kind::AllGather,
            4 => Kind::ReduceScatter(op),
            5 => Kind::Send { peer: b },
            6 => Kind::Recv { peer: b },
            _ => return Err(bad("collective")),
        };
        let data_type = i32::try_from(self.u64()?)
            .ok()
            .and_then(DataType::from_raw)
            .ok_or_else(|| bad("element type"))?;
        Ok(Shape {
            kind,
            data_type,
            send_len: self.usize()?,
            recv_len: self.usize()?,
        })
    }
}

/// Why a wait ended, as the hub sends it.
fn encode_wait(w: &Wait) -> Vec<u8> {
    let (kind, peer, text) = match w {
        Wait::Invalid(t) => (0, 0, t.as_str()),
        Wait::Gone { peer, why } => (1, *peer, why.as_str()),
        Wait::Timeout => (2, 0, ""),
        Wait::Hub(t) => (3, 0, t.as_str()),
    };
    Out::default()
        .u8(kind)
        .u64(peer as u64)
        .bytes(text.as_bytes())
        .0
}

fn decode_wait(payload: &[u8]) -> Wait {
    let mut p = In(payload);
    let parsed = (|| -> std::io::Result<Wait> {
        let (kind, peer) = (p.u8()?, p.usize()?);
        let text = String::from_utf8_lossy(&p.bytes()?).into_owned();
        Ok(match kind {
            0 => Wait::Invalid(text),
            1 => Wait::Gone { peer, why: text },
            2 => Wait::Timeout,
            _ => Wait::Hub(text),
        })
    })();
    parsed.unwrap_or_else(|e| Wait::Hub(format!("an unreadable answer: {e}")))
}

/// A hub: the clique of a simulated communicator whose ranks may be other
/// processes, served on loopback until dropped.
pub struct SimHub {
    id: UniqueId,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl SimHub {
    /// Starts a hub for `ranks` ranks on a loopback port of its own.
    pub fn start(ranks: usize) -> Result<SimHub> {
        if ranks == 0 {
            return Err(Error::invalid(K, "a hub for 0 ranks"));
        }
        let io = |source| Error::Io {
            what: "the simulated clique's hub".into(),
            source,
        };
        let listener = TcpListener::bind("127.0.0.1:0").map_err(io)?;
        listener.set_nonblocking(true).map_err(io)?;
        let port = listener.local_addr().map_err(io)?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let clique = Clique::empty(ranks);
        let accept = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let clique = clique.clone();
                            std::thread::spawn(move || serve(stream, &clique));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        Ok(SimHub {
            id: UniqueId::simulated_hub(port),
            stop,
            accept: Some(accept),
        })
    }

    /// The id the ranks join with ([`super::Communicator::init_rank`]).
    pub fn id(&self) -> &UniqueId {
        &self.id
    }
}

impl Drop for SimHub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// One rank's connection, on the hub: its join, then its requests until it
/// leaves or the connection ends (then the rank is gone).
fn serve(mut stream: TcpStream, clique: &Arc<Clique>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_nodelay(true);
    let Ok((JOIN, payload)) = read_frame(&mut stream) else {
        return;
    };
    let mut p = In(&payload);
    let Ok((rank, ranks, timeout)) =
        (|| Ok::<_, std::io::Error>((p.usize()?, p.usize()?, p.u64()?)))()
    else {
        return;
    };
    let member = match clique.enter(rank, ranks) {
        Ok(r) => r,
        Err(why) => {
            let _ = send_frame(&mut stream, WAIT, &encode_wait(&Wait::Invalid(why)));
            return;
        }
    };
    let deadline = Instant::now() + Duration::from_millis(timeout);
    let answer = match member.wait_for_everyone(deadline) {
        Ok(()) => send_frame(&mut stream, OK, &[]),
        Err(w) => send_frame(&mut stream, WAIT, &encode_wait(&w)),
    };
    if answer.is_err() {
        member.gone("its connection to the hub failed".into());
        return;
    }
    let ended = loop {
        let Ok((tag, payload)) = read_frame(&mut stream) else {
            break "its process ended (its connection to the hub closed)".to_string();
        };
        let mut p = In(&payload);
        let sent = match tag {
            POST => match (p.shape(), p.bytes()) {
                (Ok(shape), Ok(part)) => match member.post(&shape, part) {
                    Some(seq) => send_frame(&mut stream, SEQ, &seq.to_le_bytes()),
                    None => send_frame(&mut stream, NONE, &[]),
                },
                _ => break "it sent an unreadable frame".into(),
            },
            COMPLETE => match (p.shape(), p.u8(), p.u64(), p.u64()) {
                (Ok(shape), Ok(has), Ok(seq), Ok(ms)) => {
                    let seq = (has == 1).then_some(seq);
                    let deadline = Instant::now() + Duration::from_millis(ms);
                    match member.complete(&shape, seq, deadline) {
                        Ok(Some(bytes)) => send_frame(&mut stream, DATA, &bytes),
                        Ok(None) => send_frame(&mut stream, NONE, &[]),
                        Err(w) => {
                            if w == Wait::Timeout {
                                member.gone("it passed its deadline".into());
                            }
                            send_frame(&mut stream, WAIT, &encode_wait(&w))
                        }
                    }
                }
                _ => break "it sent an unreadable frame".into(),
            },
            ABORT => {
                let why = p.bytes().unwrap_or_default();
                member.abort(&String::from_utf8_lossy(&why));
                Ok(())
            }
            LEAVE => {
                member.leave();
                return;
            }
            _ => break format!("it sent an unknown frame ({tag})"),
        };
        if sent.is_err() {
            break "its connection to the hub failed".into();
        }
    };
    member.gone(ended);
}

/// A rank's connection to a hub (in this process or another).
pub struct Client {
    stream: Mutex<TcpStream>,
}

impl Client {
    /// Connects to the hub at `addr` as rank `rank` of `ranks` and waits,
    /// up to `timeout`, for every rank to join.
    pub(super) fn join(
        addr: SocketAddr,
        rank: usize,
        ranks: usize,
        timeout: Duration,
    ) -> Result<Client> {
        let since = Instant::now();
        let io = |what: &str, e: std::io::Error| Error::Io {
            what: format!("rank {rank} joining the simulated clique at {addr}: {what}"),
            source: e,
        };
        let mut stream = TcpStream::connect_timeout(&addr, timeout.max(Duration::from_millis(1)))
            .map_err(|e| io("connect", e))?;
        let _ = stream.set_nodelay(true);
        let ms = timeout.as_millis().min(u128::from(u64::MAX)) as u64;
        let join = Out::default().u64(rank as u64).u64(ranks as u64).u64(ms).0;
        send_frame(&mut stream, JOIN, &join).map_err(|e| io("send", e))?;
        stream
            .set_read_timeout(Some(timeout + Duration::from_secs(10)))
            .map_err(|e| io("set_read_timeout", e))?;
        match read_frame(&mut stream).map_err(|e| io("read", e))? {
            (OK, _) => Ok(Client {
                stream: Mutex::new(stream),
            }),
            (WAIT, payload) => Err(match decode_wait(&payload) {
                Wait::Timeout => Error::CollectiveTimeout {
                    operation: "ncclCommInitRank (simulated, across processes)",
                    rank,
                    ranks,
                    waited: since.elapsed(),
                },
                Wait::Invalid(why) | Wait::Hub(why) | Wait::Gone { why, .. } => {
                    Error::invalid(K, why)
                }
            }),
            (tag, _) => Err(Error::invalid(
                K,
                format!("the hub answered a join with frame {tag}"),
            )),
        }
    }

    /// One request and its answer.
    fn ask(
        &self,
        tag: u8,
        payload: &[u8],
        wait: Option<Instant>,
    ) -> std::result::Result<(u8, Vec<u8>), Wait> {
        let mut stream = self.stream.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(deadline) = wait {
            // The hub answers by the deadline; a margin for the answer itself.
            let left = deadline.saturating_duration_since(Instant::now());
            let _ = stream.set_read_timeout(Some(left + Duration::from_secs(10)));
        }
        send_frame(&mut stream, tag, payload).map_err(|e| Wait::Hub(format!("send: {e}")))?;
        read_frame(&mut stream).map_err(|e| Wait::Hub(format!("read: {e}")))
    }

    pub(super) fn post(
        &self,
        shape: &Shape,
        part: Vec<u8>,
    ) -> std::result::Result<Option<u64>, Wait> {
        let payload = Out::default().shape(shape).bytes(&part).0;
        match self.ask(POST, &payload, None)? {
            (SEQ, p) => Ok(Some(In(&p).u64().map_err(|e| Wait::Hub(e.to_string()))?)),
            (NONE, _) => Ok(None),
            (WAIT, p) => Err(decode_wait(&p)),
            (tag, _) => Err(Wait::Hub(format!(
                "the hub answered a post with frame {tag}"
            ))),
        }
    }

    pub(super) fn complete(
        &self,
        shape: &Shape,
        seq: Option<u64>,
        deadline: Instant,
    ) -> std::result::Result<Option<Vec<u8>>, Wait> {
        let ms = deadline
            .saturating_duration_since(Instant::now())
            .as_millis()
            .min(u128::from(u64::MAX)) as u64;
        let payload = Out::default()
            .shape(shape)
            .u8(u8::from(seq.is_some()))
            .u64(seq.unwrap_or(0))
            .u64(ms)
            .0;
        match self.ask(COMPLETE, &payload, Some(deadline))? {
            (DATA, bytes) => Ok(Some(bytes)),
            (NONE, _) => Ok(None),
            (WAIT, p) => Err(decode_wait(&p)),
            (tag, _) => Err(Wait::Hub(format!(
                "the hub answered a wait with frame {tag}"
            ))),
        }
    }

    pub(super) fn abort(&self, why: &str) {
        let mut stream = self.stream.lock().unwrap_or_else(|e| e.into_inner());
        let _ = send_frame(&mut stream, ABORT, &Out::default().bytes(why.as_bytes()).0);
    }

    pub(super) fn leave(&self) {
        let mut stream = self.stream.lock().unwrap_or_else(|e| e.into_inner());
        let _ = send_frame(&mut stream, LEAVE, &[]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rank whose process ends (its connection closes without a word)
    /// is gone: the rank waiting for it fails at once, naming why.
    #[test]
    fn a_closed_connection_is_a_rank_gone() {
        let hub = SimHub::start(2).unwrap();
        let port = hub.id().hub_port().unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| Client::join(addr, 0, 2, Duration::from_secs(30)));
            let b = s.spawn(|| Client::join(addr, 1, 2, Duration::from_secs(30)));
            (a.join().unwrap(), b.join().unwrap())
        });
        let (a, b) = (a.unwrap(), b.unwrap());
        drop(b); // the socket closes, no LEAVE: as a killed process's
        let shape = Shape {
            kind: Kind::AllReduce(ReduceOp::Sum),
            data_type: DataType::F32,
            send_len: 1,
            recv_len: 1,
        };
        let seq = a.post(&shape, 1f32.to_le_bytes().to_vec()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        match a.complete(&shape, seq, deadline) {
            Err(Wait::Gone { peer: 1, why }) => assert!(why.contains("process ended"), "{why}"),
            other => panic!("wanted rank 1 gone, got {other:?}"),
        }
        assert!(Instant::now() < deadline - Duration::from_secs(20));
    }

    #[test]
    fn frames_round_trip_and_corruption_is_refused() {
        for kind in [
            Kind::AllReduce(ReduceOp::Min),
            Kind::Broadcast { root: 3 },
            Kind::Reduce {
                op: ReduceOp::Prod,
                root: 1,
            },
            Kind::AllGather,
            Kind::ReduceScatter(ReduceOp::Max),
            Kind::Send { peer: 2 },
            Kind::Recv { peer: 0 },
        ] {
            let s = Shape {
                kind,
                data_type: DataType::Bf16,
                send_len: 7,
                recv_len: 9,
            };
            let bytes = Out::default().shape(&s).bytes(b"part").0;
            let mut p = In(&bytes);
            assert_eq!(p.shape().unwrap(), s);
            assert_eq!(p.bytes().unwrap(), b"part");
            assert!(In(&bytes[..bytes.len() - 1]).shape().is_ok());
            let mut short = In(&bytes[..10]);
            assert!(short.shape().is_err());
        }
        for w in [
            Wait::Invalid("x".into()),
            Wait::Gone {
                peer: 4,
                why: "y".into(),
            },
            Wait::Timeout,
            Wait::Hub("z".into()),
        ] {
            assert_eq!(decode_wait(&encode_wait(&w)), w);
        }
    }
}
