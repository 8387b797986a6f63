//! The unique id that lets the ranks of a job find each other
//! (`ncclUniqueId`, 128 bytes), made by one rank and passed on to the
//! others: as hex text in a file ([`UniqueId::write_file`],
//! [`UniqueId::wait_for_file`]) or an environment variable
//! ([`UniqueId::from_env`]), or over a TCP connection on loopback that the
//! launcher serves ([`UniqueId::serve_tcp`], [`UniqueId::fetch_tcp`]).
//! A missing, truncated or corrupt id is an error, never a hang.
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::K;
use super::ffi::{Nccl, RawUniqueId, UNIQUE_ID_BYTES};
use crate::Gpu;
use crate::error::{Error, Result};

/// How a simulated clique's id starts (NCCL's ids never do: they start
/// with a socket address family and a port).
const SIM_MARK: &[u8; 32] = b"cuda-kernels simulated clique v1";

/// The byte after a simulated id's random part that says a hub serves it.
const HUB_MARK: u8 = b'H';

/// What the loopback server sends before the id (a client that reads
/// anything else refuses it).
const TCP_MAGIC: &[u8; 8] = b"CKNCCLID";

/// A unique id of a communicator: NCCL's (`ncclGetUniqueId`), or a
/// simulated clique's.
#[derive(Clone, PartialEq, Eq)]
pub struct UniqueId {
    bytes: [u8; UNIQUE_ID_BYTES],
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.is_simulated() {
            "simulated"
        } else {
            "NCCL"
        };
        write!(f, "UniqueId({kind}, {}…)", &self.to_hex()[..16])
    }
}

impl UniqueId {
    /// A new id for a job on devices like `gpu`: NCCL's `ncclGetUniqueId`
    /// on a CUDA device (it also starts the bootstrap listener of the rank
    /// that calls it: make it on rank 0's process), a fresh simulated
    /// clique's on the simulator.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        if gpu.is_simulated() {
            Ok(Self::simulated())
        } else {
            Self::nccl()
        }
    }

    /// A new id from NCCL's `ncclGetUniqueId`, made without a device (a
    /// launcher's, which then must live until every rank has joined: the
    /// id's bootstrap listener runs in the process that made it).
    pub fn nccl() -> Result<Self> {
        let lib = Nccl::get()?;
        let mut raw = RawUniqueId {
            internal: [0; UNIQUE_ID_BYTES],
        };
        // SAFETY: `raw` is a live 128-byte ncclUniqueId for NCCL to fill.
        let r = unsafe { (lib.get_unique_id)(&mut raw) };
        lib.check("ncclGetUniqueId", r, std::ptr::null_mut())?;
        Ok(Self {
            bytes: raw.internal.map(|c| c as u8),
        })
    }

    /// A fresh simulated clique's id: the mark, then 16 bytes no other id
    /// of this process (or, almost surely, of another) has.
    pub fn simulated() -> Self {
        use std::hash::{BuildHasher, Hasher};
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut bytes = [0u8; UNIQUE_ID_BYTES];
        bytes[..SIM_MARK.len()].copy_from_slice(SIM_MARK);
        for half in 0..2 {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
            h.write_u32(std::process::id());
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
            );
            let at = SIM_MARK.len() + 8 * half;
            bytes[at..at + 8].copy_from_slice(&h.finish().to_le_bytes());
        }
        Self { bytes }
    }

    /// The id of a simulated clique whose hub ([`super::SimHub`]) listens
    /// on loopback port `port`: its ranks may be other processes.
    pub(crate) fn simulated_hub(port: u16) -> Self {
        let mut id = Self::simulated();
        id.bytes[SIM_MARK.len() + 16] = HUB_MARK;
        id.bytes[SIM_MARK.len() + 17..SIM_MARK.len() + 19].copy_from_slice(&port.to_le_bytes());
        id
    }

    /// The loopback port of a simulated clique's hub, for the id of one.
    pub fn hub_port(&self) -> Option<u16> {
        let at = SIM_MARK.len() + 16;
        (self.is_simulated() && self.bytes[at] == HUB_MARK)
            .then(|| u16::from_le_bytes([self.bytes[at + 1], self.bytes[at + 2]]))
    }

    /// Whether this is a simulated clique's id.
    pub fn is_simulated(&self) -> bool {
        self.bytes.starts_with(SIM_MARK)
    }

    /// The 128 bytes.
    pub fn bytes(&self) -> &[u8; UNIQUE_ID_BYTES] {
        &self.bytes
    }

    /// The id as NCCL takes it.
    pub(crate) fn raw(&self) -> RawUniqueId {
        RawUniqueId {
            internal: self.bytes.map(|b| b as std::ffi::c_char),
        }
    }

    /// The id as 256 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        self.bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The id from 256 hex digits (surrounding whitespace ignored); any
    /// other text is [`Error::InvalidInput`] saying what is wrong.
    pub fn from_hex(text: &str) -> Result<Self> {
        let text = text.trim();
        if text.len() != 2 * UNIQUE_ID_BYTES {
            return Err(Error::invalid(
                K,
                format!(
                    "a unique id is {} hex digits, this one has {}",
                    2 * UNIQUE_ID_BYTES,
                    text.len()
                ),
            ));
        }
        let mut bytes = [0u8; UNIQUE_ID_BYTES];
        for (i, b) in bytes.iter_mut().enumerate() {
            let pair = text.get(2 * i..2 * i + 2).unwrap_or("");
            *b = u8::from_str_radix(pair, 16).map_err(|_| {
                Error::invalid(
                    K,
                    format!("a unique id is hex digits: {pair:?} at {} is not", 2 * i),
                )
            })?;
        }
        Ok(Self { bytes })
    }

    /// Writes the id as hex to `path`, atomically (a temporary file renamed
    /// over it): a reader sees no file or the whole id.
    pub fn write_file(&self, path: &Path) -> Result<()> {
        let io = |source| Error::Io {
            what: format!("writing the unique-id file {}", path.display()),
            source,
        };
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, format!("{}\n", self.to_hex())).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// The id in the file `path` (as [`UniqueId::write_file`] writes it):
    /// a missing file is [`Error::Io`], a corrupt one [`Error::InvalidInput`]
    /// naming the file.
    pub fn read_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            what: format!("reading the unique-id file {}", path.display()),
            source,
        })?;
        Self::from_hex(&text)
            .map_err(|e| Error::invalid(K, format!("the unique-id file {}: {e}", path.display())))
    }

    /// Waits up to `timeout` for the file `path` to appear (rank 0 writes
    /// it), then reads it; still missing after the timeout:
    /// [`Error::Io`] (not found).
    pub fn wait_for_file(path: &Path, timeout: Duration) -> Result<Self> {
        let since = Instant::now();
        while !path.exists() && since.elapsed() < timeout {
            std::thread::sleep(Duration::from_millis(10));
        }
        Self::read_file(path)
    }

    /// The id in the environment variable `var` (hex): unset or corrupt is
    /// [`Error::InvalidInput`] naming the variable.
    pub fn from_env(var: &str) -> Result<Self> {
        let text = std::env::var(var)
            .map_err(|e| Error::invalid(K, format!("the unique id's variable {var}: {e}")))?;
        Self::from_hex(&text)
            .map_err(|e| Error::invalid(K, format!("the unique id's variable {var}: {e}")))
    }

    /// Sends the id to `clients` connections on `listener` (each gets the
    /// magic and the 128 bytes), each accepted within `timeout` of the
    /// start, or until `stop` is set (the launcher's ranks have ended: no
    /// one is left to serve); then returns. Run it on a thread of the
    /// launcher.
    pub fn serve_tcp(
        &self,
        listener: &TcpListener,
        clients: usize,
        timeout: Duration,
        stop: &AtomicBool,
    ) -> Result<()> {
        let io = |what: &str, source| Error::Io {
            what: format!("serving the unique id: {what}"),
            source,
        };
        listener
            .set_nonblocking(true)
            .map_err(|e| io("set_nonblocking", e))?;
        let since = Instant::now();
        let mut served = 0;
        while served < clients {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    stream
                        .set_nonblocking(false)
                        .map_err(|e| io("set_nonblocking", e))?;
                    stream
                        .set_write_timeout(Some(timeout))
                        .map_err(|e| io("set_write_timeout", e))?;
                    stream
                        .write_all(TCP_MAGIC)
                        .and_then(|()| stream.write_all(&self.bytes))
                        .map_err(|e| io("write", e))?;
                    served += 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if since.elapsed() > timeout || stop.load(Ordering::Relaxed) {
                        return Err(Error::invalid(
                            K,
                            format!(
                                "serving the unique id: {served} of {clients} ranks connected \
                                 within {timeout:?}"
                            ),
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(io("accept", e)),
            }
        }
        Ok(())
    }

    /// The id served at `addr` ([`UniqueId::serve_tcp`]), connecting and
    /// reading within `timeout` (retrying the connection until then: the
    /// server may start later).
    pub fn fetch_tcp(addr: SocketAddr, timeout: Duration) -> Result<Self> {
        let io = |what: &str, source| Error::Io {
            what: format!("fetching the unique id from {addr}: {what}"),
            source,
        };
        let since = Instant::now();
        let mut stream = loop {
            match TcpStream::connect_timeout(&addr, timeout.max(Duration::from_millis(1))) {
                Ok(s) => break s,
                Err(e) if since.elapsed() > timeout => return Err(io("connect", e)),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        stream
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
            .map_err(|e| io("set_read_timeout", e))?;
        let mut got = [0u8; TCP_MAGIC.len() + UNIQUE_ID_BYTES];
        stream.read_exact(&mut got).map_err(|e| io("read", e))?;
        if &got[..TCP_MAGIC.len()] != TCP_MAGIC {
            return Err(Error::invalid(
                K,
                format!("{addr} did not send a unique id (wrong magic)"),
            ));
        }
        let mut bytes = [0u8; UNIQUE_ID_BYTES];
        bytes.copy_from_slice(&got[TCP_MAGIC.len()..]);
        Ok(Self { bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_corruption_is_refused() {
        let id = UniqueId::simulated();
        assert!(id.is_simulated());
        assert_eq!(UniqueId::from_hex(&id.to_hex()).unwrap(), id);
        assert_ne!(UniqueId::simulated(), id, "two fresh ids differ");
        let e = UniqueId::from_hex("abc").unwrap_err().to_string();
        assert!(e.contains("256 hex digits, this one has 3"), "{e}");
        let mut bad = id.to_hex();
        bad.replace_range(10..12, "zz");
        let e = UniqueId::from_hex(&bad).unwrap_err().to_string();
        assert!(e.contains("\"zz\" at 10"), "{e}");
        let nccl_like = UniqueId::from_hex(&"02".repeat(128)).unwrap();
        assert!(!nccl_like.is_simulated());
    }

    #[test]
    fn files_missing_or_corrupt_are_errors() {
        let dir = std::env::temp_dir().join(format!("ck-nccl-id-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("id");
        let e = UniqueId::read_file(&path).unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
        let e = UniqueId::wait_for_file(&path, Duration::from_millis(30)).unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
        let id = UniqueId::simulated();
        id.write_file(&path).unwrap();
        assert_eq!(UniqueId::read_file(&path).unwrap(), id);
        std::fs::write(&path, "not an id\n").unwrap();
        let e = UniqueId::read_file(&path).unwrap_err().to_string();
        assert!(
            e.contains("unique-id file") && e.contains("hex digits"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_id_travels_by_environment_and_loopback_tcp() {
        let id = UniqueId::simulated();
        let var = "CUDA_KERNELS_TEST_NCCL_ID_UNSET_VARIABLE";
        assert!(
            UniqueId::from_env(var)
                .unwrap_err()
                .to_string()
                .contains(var)
        );
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let got = std::thread::scope(|s| {
            let server = s.spawn(|| {
                id.serve_tcp(
                    &listener,
                    2,
                    Duration::from_secs(20),
                    &AtomicBool::new(false),
                )
            });
            let a = UniqueId::fetch_tcp(addr, Duration::from_secs(20));
            let b = UniqueId::fetch_tcp(addr, Duration::from_secs(20));
            server.join().unwrap().unwrap();
            (a.unwrap(), b.unwrap())
        });
        assert_eq!(got, (id.clone(), id));
        // Nobody connects: the server gives up by its deadline.
        let e = UniqueId::simulated()
            .serve_tcp(
                &listener,
                1,
                Duration::from_millis(50),
                &AtomicBool::new(false),
            )
            .unwrap_err();
        assert!(e.to_string().contains("0 of 1 ranks"), "{e}");
    }
}
