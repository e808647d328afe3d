//! The parameters of a joined run (the table's byte format is [`crate::wire::join`]'s), and
//! the TCP streams between rank 0 and the nodes of `agree --join`.
//!
//! Rank 0's gate ([`accept`]) serves every connection in a thread of its own (at most
//! [`Gate::cap`] at once; one more is closed at once and counted `busy`), authenticates it
//! before reading anything else — the challenge–response of [`crate::wire::join_line`] —
//! and bounds every read: a handshake line is at most
//! [`MAX_HANDSHAKE_LINE`] bytes and must come within [`Gate::handshake`] of the connection,
//! a later line at most [`MAX_LINE`]. A peer that sends too much, too slowly (a slow loris),
//! a hello that does not answer this connection's challenge (a replay from another run, a
//! wrong key) or a rank already taken is refused and counted ([`Refused`]), and never holds up
//! the others. Once in, every line both ways is sealed ([`SealedReader`], [`SealedWriter`]):
//! a line whose tag does not check ends the stream, read as one bad line.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

pub use crate::wire::join::JobParams;
use crate::wire::join_line::{self, Direction, LineSeal, MAX_HANDSHAKE_LINE, MAX_LINE, NONCE_LEN, Nonces, check_hello};
use crate::wire::mac::AuthKey;

/// Why a line was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LineError {
    /// Longer than the bound.
    TooLong,
    /// Not complete by the deadline.
    TooSlow,
    /// The stream ended (mid-line or before one).
    Closed,
    /// Not UTF-8.
    NotText,
}

/// A stream's reading half, line by line, each line bounded in length and, optionally, in time.
pub struct LineReader {
    s: TcpStream,
    buf: Vec<u8>,
}

impl LineReader {
    pub fn new(s: TcpStream) -> Self {
        Self { s, buf: Vec::new() }
    }

    /// The next line (with its newline) of at most `max` bytes, complete by `deadline`.
    pub fn line(&mut self, max: usize, deadline: Option<Instant>) -> Result<String, LineError> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                if i >= max {
                    return Err(LineError::TooLong);
                }
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return String::from_utf8(line).map_err(|_| LineError::NotText);
            }
            if self.buf.len() >= max {
                return Err(LineError::TooLong);
            }
            let timeout = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(LineError::TooSlow);
                    }
                    Some(left)
                }
                None => None,
            };
            if self.s.set_read_timeout(timeout).is_err() {
                return Err(LineError::Closed);
            }
            let mut chunk = [0u8; 16 * 1024];
            let want = (max - self.buf.len()).min(chunk.len());
            match self.s.read(&mut chunk[..want]) {
                Ok(0) => return Err(LineError::Closed),
                Ok(k) => self.buf.extend_from_slice(&chunk[..k]),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(_) => return Err(LineError::Closed),
            }
        }
    }
}

/// The plain lines of a sealed stream, as a byte stream (`body\n` per line): a line that is too
/// long, or whose tag does not check, is read as one empty line (a bad line to the reader) and
/// ends the stream.
pub struct SealedReader {
    lines: LineReader,
    seal: LineSeal,
    out: Vec<u8>,
    at: usize,
    done: bool,
}

impl Read for SealedReader {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.out.len() {
            if self.done {
                return Ok(0);
            }
            self.out.clear();
            self.at = 0;
            match self.lines.line(MAX_LINE, None) {
                Ok(l) => match self.seal.open(&l) {
                    Some(body) => {
                        self.out.extend_from_slice(body.as_bytes());
                        self.out.push(b'\n');
                    }
                    None => {
                        self.out.push(b'\n');
                        self.done = true;
                    }
                },
                Err(LineError::Closed) => self.done = true,
                Err(_) => {
                    self.out.push(b'\n');
                    self.done = true;
                }
            }
        }
        let k = b.len().min(self.out.len() - self.at);
        b[..k].copy_from_slice(&self.out[self.at..self.at + k]);
        self.at += k;
        Ok(k)
    }
}

/// A stream's sending half: dropping it tells the other end this side is done (the reading
/// half, a clone, may live on in its reader thread).
pub struct Sender(pub TcpStream);

impl Write for Sender {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let _ = self.0.shutdown(Shutdown::Write);
    }
}

/// Seals every line written to it (up to each newline) before it goes out.
pub struct SealedWriter<W: Write> {
    inner: W,
    seal: LineSeal,
    pending: Vec<u8>,
}

impl<W: Write> Write for SealedWriter<W> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(b);
        while let Some(i) = self.pending.iter().position(|&c| c == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=i).collect();
            let body = String::from_utf8_lossy(&line[..i]);
            let mut sealed = self.seal.seal(&body);
            sealed.push('\n');
            self.inner.write_all(sealed.as_bytes())?;
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One node's authenticated stream at rank 0.
pub struct Stream {
    pub rank: u32,
    pub lines: SealedReader,
    pub send: SealedWriter<Sender>,
}

/// Connections rank 0 refused, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refused {
    /// A hello that does not answer the challenge: a wrong key, another job, a replay.
    pub bad_hello: u64,
    /// A handshake line over [`MAX_HANDSHAKE_LINE`] bytes (or not text).
    pub too_long: u64,
    /// No complete hello within the handshake deadline (or still none when all had joined).
    pub too_slow: u64,
    /// Closed before its hello.
    pub closed: u64,
    /// A rank that had joined already.
    pub duplicate: u64,
    /// Over the cap of handshakes at once.
    pub busy: u64,
}

impl Refused {
    pub fn total(&self) -> u64 {
        self.bad_hello + self.too_long + self.too_slow + self.closed + self.duplicate + self.busy
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} refused (bad hello {}, too long {}, too slow {}, closed {}, duplicate rank {}, busy {})",
            self.total(),
            self.bad_hello,
            self.too_long,
            self.too_slow,
            self.closed,
            self.duplicate,
            self.busy
        )
    }
}

/// How rank 0 admits the streams of a run.
#[derive(Clone, Debug)]
pub struct Gate {
    pub job: u64,
    pub n: u32,
    pub key: Option<AuthKey>,
    /// The run's nonce, sent in every challenge.
    pub run: [u8; NONCE_LEN],
    /// How long every node has to join.
    pub timeout: Duration,
    /// How long one connection has for its hello.
    pub handshake: Duration,
    /// Handshakes served at once.
    pub cap: usize,
}

/// A handshake's end: the stream, or why it was refused.
type Outcome = Result<Stream, LineError>;

/// The handshake on one connection: challenge, then a hello within the deadline.
fn handshake(s: TcpStream, g: &Gate, conn: [u8; NONCE_LEN]) -> Result<Option<Stream>, LineError> {
    let nonces = Nonces { conn, run: g.run };
    let deadline = Instant::now() + g.handshake;
    let _ = s.set_nodelay(true);
    let _ = s.set_write_timeout(Some(g.handshake));
    let send = s.try_clone().map_err(|_| LineError::Closed)?;
    let mut lines = LineReader::new(s);
    (&send)
        .write_all(format!("{}\n", join_line::challenge(&nonces)).as_bytes())
        .map_err(|_| LineError::Closed)?;
    let hello = lines.line(MAX_HANDSHAKE_LINE, Some(deadline))?;
    let Some(rank) = check_hello(&hello, g.key.as_ref(), g.job, g.n, &nonces) else {
        return Ok(None);
    };
    let _ = send.set_write_timeout(None);
    Ok(Some(Stream {
        rank,
        lines: SealedReader {
            lines,
            seal: LineSeal::new(g.key.clone(), nonces, Direction::ToRoot),
            out: Vec::new(),
            at: 0,
            done: false,
        },
        send: SealedWriter {
            inner: Sender(send),
            seal: LineSeal::new(g.key.clone(), nonces, Direction::FromRoot),
            pending: Vec::new(),
        },
    }))
}

/// Accepts one authenticated stream per rank on `listener` (see the module's doc); returns
/// them with the connections refused on the way. Fails when not every rank joined in time.
pub fn accept(listener: &TcpListener, g: &Gate) -> Result<(Vec<Stream>, Refused), String> {
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let (tx, rx) = mpsc::channel::<(u64, Option<Outcome>)>();
    // The connections in their handshake, to be cut when every rank is in.
    let open: Arc<Mutex<HashMap<u64, TcpStream>>> = Arc::default();
    let mut refused = Refused::default();
    let mut joined: Vec<Option<Stream>> = (0..g.n).map(|_| None).collect();
    let deadline = Instant::now() + g.timeout;
    let (mut next_id, mut in_flight) = (0u64, 0usize);
    while joined.iter().any(Option::is_none) {
        if Instant::now() > deadline {
            let k = joined.iter().filter(|x| x.is_some()).count();
            cut(&open);
            return Err(format!(
                "only {k} of {} nodes connected to rank 0 within {:?} ({refused})",
                g.n, g.timeout
            ));
        }
        let mut busy = false;
        if let Ok((s, _)) = listener.accept() {
            busy = true;
            if in_flight >= g.cap {
                refused.busy += 1;
                let _ = s.shutdown(Shutdown::Both);
            } else {
                let conn = crate::transport::udp::auth::fresh_nonce().map_err(|e| format!("no nonce: {e}"))?;
                let _ = s.set_nonblocking(false);
                let id = next_id;
                next_id += 1;
                in_flight += 1;
                if let Ok(c) = s.try_clone() {
                    open.lock().unwrap_or_else(|e| e.into_inner()).insert(id, c);
                }
                let (tx, g, open) = (tx.clone(), g.clone(), open.clone());
                std::thread::spawn(move || {
                    // Held until the outcome is counted: a refused peer sees its connection
                    // close only then.
                    let keep = s.try_clone();
                    let r = handshake(s, &g, conn);
                    open.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                    let _ = tx.send((id, r.transpose()));
                    drop(keep);
                });
            }
        }
        while let Ok((_, r)) = rx.try_recv() {
            busy = true;
            in_flight -= 1;
            match r {
                Some(Ok(st)) if joined[st.rank as usize].is_some() => refused.duplicate += 1,
                Some(Ok(st)) => {
                    let r = st.rank as usize;
                    joined[r] = Some(st);
                }
                None => refused.bad_hello += 1,
                Some(Err(LineError::TooLong | LineError::NotText)) => refused.too_long += 1,
                Some(Err(LineError::TooSlow)) => refused.too_slow += 1,
                Some(Err(LineError::Closed)) => refused.closed += 1,
            }
        }
        if !busy {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    // Whoever is still in a handshake now is too late: cut off.
    refused.too_slow += in_flight as u64;
    cut(&open);
    Ok((joined.into_iter().flatten().collect(), refused))
}

fn cut(open: &Mutex<HashMap<u64, TcpStream>>) {
    for (_, s) in open.lock().unwrap_or_else(|e| e.into_inner()).drain() {
        let _ = s.shutdown(Shutdown::Both);
    }
}

/// A node's stream to rank 0 at `to`: connects (retrying until `timeout`: rank 0 may start
/// last), answers the challenge; returns the sealed halves and the nonces (the run's keys the
/// session).
pub fn connect(
    to: SocketAddr,
    timeout: Duration,
    key: Option<&AuthKey>,
    job: u64,
    rank: u32,
) -> Result<(SealedReader, SealedWriter<Sender>, Nonces), String> {
    let deadline = Instant::now() + timeout;
    let s = loop {
        match TcpStream::connect_timeout(&to, Duration::from_secs(1)) {
            Ok(s) => break s,
            Err(e) if Instant::now() > deadline => return Err(format!("cannot connect to rank 0 at {to}: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let _ = s.set_nodelay(true);
    let mut send = s.try_clone().map_err(|e| format!("stream to rank 0: {e}"))?;
    let mut lines = LineReader::new(s);
    let nonces = lines
        .line(
            MAX_HANDSHAKE_LINE,
            Some(deadline.max(Instant::now() + Duration::from_secs(5))),
        )
        .ok()
        .and_then(|l| join_line::parse_challenge(&l))
        .ok_or_else(|| format!("rank 0 at {to} sent no challenge"))?;
    writeln!(send, "{}", join_line::hello(key, job, rank, &nonces)).map_err(|e| format!("stream to rank 0: {e}"))?;
    let reader = SealedReader {
        lines,
        seal: LineSeal::new(key.cloned(), nonces, Direction::FromRoot),
        out: Vec::new(),
        at: 0,
        done: false,
    };
    let writer = SealedWriter {
        inner: Sender(send),
        seal: LineSeal::new(key.cloned(), nonces, Direction::ToRoot),
        pending: Vec::new(),
    };
    Ok((reader, writer, nonces))
}

#[cfg(test)]
mod tests;
