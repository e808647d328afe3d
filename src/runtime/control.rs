//! The control plane of a multi-process run: a small UDP side channel between the coordinator
//! (the `ftcoll bench --procs` parent on 127.0.0.1, or rank 0 of a launcher-started run at
//! its `--join` address) and each node process. With `--join` it is also the rendezvous:
//! every node sends its data address ([`Msg::Join`]) and receives the whole table, with the
//! run's LogP unit, in table datagrams ([`join`]); over verbs the coordinator then relays
//! each rank's QP connection data to its peers ([`conn_relay`]). Nodes report per operation what the in-process cluster reads from shared
//! atomics; the parent tells the root which operations it may start and everyone which are
//! over. Reports are idempotent and re-sent periodically, so a lost datagram only delays.
//! Every datagram is validated (magic, version, job, type, rank, exact length) and the
//! invalid ones are counted and dropped.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::runtime::board::{Control, WINDOW};
use crate::runtime::conn_relay::{self, Dir, Gather};
use crate::runtime::join::{self, JobParams};
use crate::transport::udp::auth::{AuthKey, TAG_LEN};
use crate::transport::verbs::conn::ConnInfo;

const MAGIC: [u8; 4] = *b"FTCC";
const VERSION: u8 = 1;
/// Bytes of every control datagram.
pub const LEN: usize = 64;

/// What a control datagram says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Msg {
    /// Child → parent: I am here (sent until the parent answers).
    Hello,
    /// Child → parent: my state for operation `seq`.
    Report {
        seq: u64,
        delivered_ns: u64,
        last_ns: u64,
        started_ns: u64,
        sent: u32,
        deliveries: u8,
        bad: u8,
        finished: bool,
        /// A message of the operation could not be sent (the node's deferred queue was full).
        dropped: bool,
    },
    /// Child → parent: I crashed (injected) during iteration `iter` (`u64::MAX`: at the start).
    Dead { iter: u64 },
    /// Parent → root: operations with `seq < allowed` may start.
    Allow { allowed: u64 },
    /// Parent → all: operations with `seq < retired` are over.
    Retire { retired: u64 },
    /// Parent → all: exit now.
    Stop,
    /// Child → parent: clock probe sent at the child's time `t1`.
    Ping { t1: u64 },
    /// Parent → child: the probe `t1` answered at the parent's time `t2`.
    Pong { t1: u64, t2: u64 },
    /// Child → parent: parent clock − child clock, and its uncertainty (half the best probe's
    /// round trip), both ns.
    Clock { offset: i64, uncertainty: u64 },
    /// Child → parent: my data (transport) address; asks for the address table.
    Join { addr: SocketAddr },
}

fn ip_bytes(a: &SocketAddr) -> (u64, u64, u32) {
    let (b, fam) = match a.ip() {
        IpAddr::V4(v4) => (v4.to_ipv6_mapped().octets(), 4),
        IpAddr::V6(v6) => (v6.octets(), 6),
    };
    let hi = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
    let lo = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
    (hi, lo, fam)
}

/// An address as 19 bytes: family (4 or 6), 16 bytes of IPv6 (IPv4-mapped for v4), port.
pub fn addr_to_bytes(a: &SocketAddr) -> [u8; 19] {
    let (hi, lo, fam) = ip_bytes(a);
    let mut o = [0u8; 19];
    o[0] = fam as u8;
    o[1..9].copy_from_slice(&hi.to_le_bytes());
    o[9..17].copy_from_slice(&lo.to_le_bytes());
    o[17..].copy_from_slice(&a.port().to_le_bytes());
    o
}

/// The inverse of [`addr_to_bytes`]; `None` for an unknown family or a v4 that is not mapped.
pub fn addr_from_bytes(b: &[u8; 19]) -> Option<SocketAddr> {
    let hi = u64::from_le_bytes(b[1..9].try_into().expect("8 bytes"));
    let lo = u64::from_le_bytes(b[9..17].try_into().expect("8 bytes"));
    let port = u16::from_le_bytes([b[17], b[18]]);
    ip_from(hi, lo, u32::from(b[0]), u64::from(port))
}

fn ip_from(hi: u64, lo: u64, fam: u32, port: u64) -> Option<SocketAddr> {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&hi.to_le_bytes());
    b[8..].copy_from_slice(&lo.to_le_bytes());
    let v6 = Ipv6Addr::from(b);
    let ip = match fam {
        4 => IpAddr::V4(v6.to_ipv4_mapped()?),
        6 => IpAddr::V6(v6),
        _ => return None,
    };
    Some(SocketAddr::new(ip, u16::try_from(port).ok()?))
}

/// Appends the job key's MAC over `body` (all zeros without a key): every control and table
/// datagram travels as `body ‖ tag`, checked before anything in it is read.
pub(crate) fn sealed(key: Option<&AuthKey>, body: &[u8]) -> Vec<u8> {
    let tag = key.map(|k| k.tag(&[body])).unwrap_or([0; TAG_LEN]);
    let mut out = Vec::with_capacity(body.len() + TAG_LEN);
    out.extend_from_slice(body);
    out.extend_from_slice(&tag);
    out
}

/// The body of a sealed datagram whose tag checks under `key` (without a key: a zero tag);
/// `None` for anything else.
pub(crate) fn opened<'a>(key: Option<&AuthKey>, d: &'a [u8]) -> Option<&'a [u8]> {
    let (body, tag) = d.split_at(d.len().checked_sub(TAG_LEN)?);
    let ok = match key {
        Some(k) => k.verify(&[body], tag),
        None => tag.iter().all(|&b| b == 0),
    };
    ok.then_some(body)
}

/// A blocking receive on a non-blocking socket, until `deadline` at the latest.
fn recv_within(sock: &UdpSocket, buf: &mut [u8], deadline: Instant) -> std::io::Result<(usize, SocketAddr)> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_micros(1));
    sock.set_nonblocking(false)?;
    sock.set_read_timeout(Some(left))?;
    let r = sock.recv_from(buf);
    sock.set_nonblocking(true)?;
    r
}

/// Blocks until `sock` has a datagram or `timeout` passed (leaves it non-blocking).
fn wait_readable(sock: &UdpSocket, timeout: Duration) {
    if sock.set_nonblocking(false).is_ok()
        && sock
            .set_read_timeout(Some(timeout.max(Duration::from_micros(1))))
            .is_ok()
    {
        let _ = sock.peek_from(&mut [0u8; 1]);
    }
    let _ = sock.set_nonblocking(true);
}

fn put(out: &mut [u8; LEN], at: usize, v: &[u8]) {
    out[at..at + v.len()].copy_from_slice(v);
}

fn u64_at(b: &[u8; LEN], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

fn u32_at(b: &[u8; LEN], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

/// Encodes `m` from `rank` of `job`.
pub fn encode(job: u64, rank: u32, m: &Msg) -> [u8; LEN] {
    let mut o = [0u8; LEN];
    put(&mut o, 0, &MAGIC);
    o[4] = VERSION;
    put(&mut o, 8, &job.to_le_bytes());
    put(&mut o, 16, &rank.to_le_bytes());
    let (ty, seq, a, b, c, d, flags): (u8, u64, u64, u64, u64, u32, u32) = match *m {
        Msg::Hello => (1, 0, 0, 0, 0, 0, 0),
        Msg::Report {
            seq,
            delivered_ns,
            last_ns,
            started_ns,
            sent,
            deliveries,
            bad,
            finished,
            dropped,
        } => (
            2,
            seq,
            delivered_ns,
            last_ns,
            started_ns,
            sent,
            u32::from(finished) | u32::from(dropped) << 1 | u32::from(deliveries) << 8 | u32::from(bad) << 16,
        ),
        Msg::Dead { iter } => (3, iter, 0, 0, 0, 0, 0),
        Msg::Allow { allowed } => (4, allowed, 0, 0, 0, 0, 0),
        Msg::Retire { retired } => (5, retired, 0, 0, 0, 0, 0),
        Msg::Stop => (6, 0, 0, 0, 0, 0, 0),
        Msg::Ping { t1 } => (7, t1, 0, 0, 0, 0, 0),
        Msg::Pong { t1, t2 } => (8, t1, t2, 0, 0, 0, 0),
        Msg::Clock { offset, uncertainty } => (9, offset as u64, uncertainty, 0, 0, 0, 0),
        Msg::Join { addr } => {
            let (hi, lo, fam) = ip_bytes(&addr);
            (10, u64::from(addr.port()), hi, lo, 0, 0, fam)
        }
    };
    o[5] = ty;
    put(&mut o, 24, &seq.to_le_bytes());
    put(&mut o, 32, &a.to_le_bytes());
    put(&mut o, 40, &b.to_le_bytes());
    put(&mut o, 48, &c.to_le_bytes());
    put(&mut o, 56, &d.to_le_bytes());
    put(&mut o, 60, &flags.to_le_bytes());
    o
}

/// Decodes and validates a datagram of `job` from a rank below `n`: `(rank, message)`.
pub fn decode(buf: &[u8], job: u64, n: u32) -> Option<(u32, Msg)> {
    let b: &[u8; LEN] = buf.try_into().ok()?;
    if b[0..4] != MAGIC || b[4] != VERSION || b[6] != 0 || b[7] != 0 || u64_at(b, 8) != job {
        return None;
    }
    let rank = u32_at(b, 16);
    if rank >= n || u32_at(b, 20) != 0 {
        return None;
    }
    let (seq, a, bb, c, d, flags) = (
        u64_at(b, 24),
        u64_at(b, 32),
        u64_at(b, 40),
        u64_at(b, 48),
        u32_at(b, 56),
        u32_at(b, 60),
    );
    let m = match b[5] {
        1 => Msg::Hello,
        2 if flags >> 24 == 0 && flags & 0xFC == 0 => Msg::Report {
            seq,
            delivered_ns: a,
            last_ns: bb,
            started_ns: c,
            sent: d,
            deliveries: (flags >> 8) as u8,
            bad: (flags >> 16) as u8,
            finished: flags & 1 == 1,
            dropped: flags & 2 == 2,
        },
        3 => Msg::Dead { iter: seq },
        4 => Msg::Allow { allowed: seq },
        5 => Msg::Retire { retired: seq },
        6 => Msg::Stop,
        7 => Msg::Ping { t1: seq },
        8 => Msg::Pong { t1: seq, t2: a },
        9 => Msg::Clock {
            offset: seq as i64,
            uncertainty: a,
        },
        10 if c == 0 && d == 0 => Msg::Join {
            addr: ip_from(a, bb, flags, seq)?,
        },
        _ => return None,
    };
    Some((rank, m))
}

/// The node process's side: applies the parent's commands to its local [`Control`] and reports
/// its board.
pub struct ChildAgent {
    sock: UdpSocket,
    parent: SocketAddr,
    job: u64,
    rank: u32,
    n: u32,
    heard: bool,
    last_heard: Instant,
    /// Per slot: the last report sent and when.
    last: Vec<Option<(Msg, Instant)>>,
    /// Per slot: the operation in it and when this process first saw it.
    seen: Vec<(u64, Instant)>,
    /// The job key: every control datagram carries its MAC.
    key: Option<AuthKey>,
    last_flush: Instant,
    /// Control datagrams dropped as invalid.
    pub invalid: u64,
}

impl ChildAgent {
    /// Binds the control socket (any local address of the parent's family).
    pub fn new(parent: SocketAddr, job: u64, rank: u32, n: u32) -> std::io::Result<Self> {
        let any: IpAddr = if parent.is_ipv4() {
            Ipv4Addr::UNSPECIFIED.into()
        } else {
            Ipv6Addr::UNSPECIFIED.into()
        };
        let sock = UdpSocket::bind((any, 0))?;
        sock.set_nonblocking(true)?;
        Ok(Self {
            sock,
            parent,
            job,
            rank,
            n,
            heard: false,
            last_heard: Instant::now(),
            last: vec![None; WINDOW],
            seen: vec![(u64::MAX, Instant::now()); WINDOW],
            key: None,
            last_flush: Instant::now(),
            invalid: 0,
        })
    }

    fn send(&self, m: &Msg) {
        // A full socket buffer only delays: reports are re-sent.
        let _ = self
            .sock
            .send_to(&sealed(self.key.as_ref(), &encode(self.job, self.rank, m)), self.parent);
    }

    /// Estimates this process's clock offset to the parent by ping-pong (Cristian's method:
    /// the probe with the smallest round trip wins; the uncertainty is half of it), tells the
    /// parent, and returns `(offset, uncertainty)`. `now_ns` is this process's clock.
    pub fn sync_clock(&mut self, now_ns: &dyn Fn() -> u64, probes: usize) -> (i64, u64) {
        let mut best: Option<(u64, i64)> = None;
        let mut buf = [0u8; 128];
        let mut silent = 0;
        for _ in 0..probes {
            if silent >= 10 {
                break; // Nobody answers (yet): the main loop's timeout decides.
            }
            silent += 1;
            let t1 = now_ns();
            self.send(&Msg::Ping { t1 });
            let deadline = Instant::now() + Duration::from_millis(20);
            while Instant::now() < deadline {
                // Sleep in the kernel until the answer comes: spinning here would compete for
                // the core with the very processes whose answers we time.
                let Ok((len, from)) = recv_within(&self.sock, &mut buf, deadline) else {
                    continue;
                };
                let body = opened(self.key.as_ref(), &buf[..len]);
                let (true, Some(body)) = (from == self.parent, body) else {
                    self.invalid += 1;
                    continue;
                };
                if let Some((_, Msg::Pong { t1: e, t2 })) = decode(body, self.job, self.n.max(1)) {
                    if e != t1 {
                        continue;
                    }
                    let t3 = now_ns();
                    let rtt = t3.saturating_sub(t1);
                    let offset = t2 as i64 - ((t1 / 2 + t3 / 2) as i64);
                    if best.is_none_or(|(r, _)| rtt < r) {
                        best = Some((rtt, offset));
                    }
                    silent = 0;
                    break;
                }
            }
        }
        let (rtt, offset) = best.unwrap_or((u64::MAX, 0));
        let unc = rtt / 2;
        for _ in 0..3 {
            self.send(&Msg::Clock {
                offset,
                uncertainty: unc,
            });
        }
        (offset, unc)
    }

    /// Rendezvous through the coordinator: announces this node's data address `me` until the
    /// whole address table (and the run's parameters) has arrived, or `timeout` passes.
    pub fn join(&mut self, me: SocketAddr, timeout: Duration) -> Result<(Vec<SocketAddr>, JobParams), String> {
        let n = self.n as usize;
        let mut table: Vec<Option<SocketAddr>> = vec![None; n];
        let mut params = None;
        let mut missing = n;
        let mut buf = vec![0u8; 2048];
        let deadline = Instant::now() + timeout;
        let mut last_sent: Option<Instant> = None;
        while missing > 0 {
            let now = Instant::now();
            if now > deadline {
                return Err(format!(
                    "rendezvous with the coordinator at {}: {missing} of {n} addresses missing after {timeout:?}",
                    self.parent
                ));
            }
            if last_sent.is_none_or(|t| now.duration_since(t) > Duration::from_millis(5)) {
                self.send(&Msg::Join { addr: me });
                last_sent = Some(now);
            }
            let Ok((len, from)) = recv_within(&self.sock, &mut buf, now + Duration::from_millis(5)) else {
                continue;
            };
            let chunk = (from == self.parent)
                .then(|| opened(self.key.as_ref(), &buf[..len]))
                .flatten()
                .and_then(|body| join::decode(body, self.job, self.n));
            let Some((first, addrs, p)) = chunk else {
                self.invalid += 1;
                continue;
            };
            if params.is_some_and(|q| q != p) {
                self.invalid += 1;
                continue;
            }
            params = Some(p);
            for (i, a) in addrs.into_iter().enumerate() {
                let slot = &mut table[first as usize + i];
                if slot.is_none() {
                    missing -= 1;
                }
                *slot = Some(a);
            }
        }
        self.heard = true;
        self.last_heard = Instant::now();
        let params = params.expect("a complete table came with parameters");
        Ok((table.into_iter().flatten().collect(), params))
    }

    /// The verbs connection data of a launched run, relayed by the coordinator
    /// ([`conn_relay`]): sends `mine` (the records this rank made for each peer) until every
    /// record addressed to this rank has come back, or `timeout` passes. Indexed by rank
    /// (`None` at this rank). Invalid datagrams are counted; the last problem is named on
    /// timeout.
    pub fn exchange_conns(
        &mut self,
        mine: &[ConnInfo],
        max_msg: u32,
        timeout: Duration,
    ) -> Result<Vec<Option<ConnInfo>>, String> {
        let up: Vec<Vec<u8>> = conn_relay::encode_all(self.job, self.n, Dir::Up, self.rank, mine)
            .iter()
            .map(|b| sealed(self.key.as_ref(), b))
            .collect();
        let mut got = Gather::new(self.rank, self.n, Dir::Down);
        let mut buf = vec![0u8; 2048];
        let deadline = Instant::now() + timeout;
        let mut last_sent: Option<Instant> = None;
        // Resent with a growing pause: all n ranks repeat their whole set until the last rank
        // is in, so a fixed short period would flood the coordinator of a large run.
        let mut pause = Duration::from_millis(5);
        let mut problem: Option<String> = None;
        while got.missing() > 0 {
            let now = Instant::now();
            if now > deadline {
                return Err(format!(
                    "verbs connection data through the coordinator at {}: {} of {} peers missing after {timeout:?}{}",
                    self.parent,
                    got.missing(),
                    self.n - 1,
                    problem.map(|e| format!(" (last problem: {e})")).unwrap_or_default()
                ));
            }
            if last_sent.is_none_or(|t| now.duration_since(t) > pause) {
                for d in &up {
                    let _ = self.sock.send_to(d, self.parent);
                }
                if last_sent.is_some() {
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                last_sent = Some(now);
            }
            let Ok((len, from)) = recv_within(&self.sock, &mut buf, now + Duration::from_millis(5)) else {
                continue;
            };
            let Some(body) = opened(self.key.as_ref(), &buf[..len]).filter(|_| from == self.parent) else {
                self.invalid += 1;
                continue;
            };
            if !conn_relay::is_chunk(body) {
                continue; // A late copy of the address table, or a command for later.
            }
            let r = conn_relay::decode(body, self.job, self.n, max_msg).and_then(|c| got.add(&c));
            if let Err(e) = r {
                self.invalid += 1;
                problem = Some(e.to_string());
            }
        }
        self.heard = true;
        self.last_heard = Instant::now();
        Ok(got.into_slots())
    }

    /// Seals every control datagram with `key` and accepts only those it seals (`None`: the
    /// run is unauthenticated; tags are then zero).
    pub fn set_key(&mut self, key: Option<AuthKey>) {
        self.key = key;
    }

    /// Has the parent answered yet?
    pub fn heard(&self) -> bool {
        self.heard
    }

    /// Time since the parent's last valid command (it repeats them every few ms).
    pub fn silent_for(&self) -> Duration {
        self.last_heard.elapsed()
    }

    /// Tells the parent this node crashed; sent a few times, the process then exits.
    pub fn report_death(&self, iter: u64) {
        for _ in 0..5 {
            self.send(&Msg::Dead { iter });
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Receives commands and sends changed reports; returns true when told to stop.
    pub fn pump(&mut self, ctl: &Control, root: bool) -> bool {
        let mut buf = [0u8; 2048];
        while let Ok((len, from)) = self.sock.recv_from(&mut buf) {
            let Some(body) = opened(self.key.as_ref(), &buf[..len]).filter(|_| from == self.parent) else {
                self.invalid += 1;
                continue;
            };
            if join::is_table(body) || conn_relay::is_chunk(body) {
                continue; // A late copy of the address table or of connection data.
            }
            match decode(body, self.job, self.n.max(1)) {
                Some((_, Msg::Allow { allowed })) => {
                    ctl.allowed.fetch_max(allowed, Ordering::AcqRel);
                    self.heard = true;
                    self.last_heard = Instant::now();
                }
                Some((_, Msg::Retire { retired })) => {
                    ctl.retired.fetch_max(retired, Ordering::AcqRel);
                    self.heard = true;
                    self.last_heard = Instant::now();
                }
                Some((_, Msg::Stop)) => return true,
                _ => self.invalid += 1,
            }
        }
        let now = Instant::now();
        let resend = now.duration_since(self.last_flush) > Duration::from_millis(2);
        if resend {
            self.last_flush = now;
            if !self.heard {
                self.send(&Msg::Hello);
            }
        }
        let retired = ctl.retired.load(Ordering::Acquire);
        let board = &ctl.boards[self.rank as usize];
        for (i, b) in board.ops.iter().enumerate() {
            let seq1 = b.seq1.load(Ordering::Acquire);
            if seq1 == 0 || seq1 - 1 < retired {
                continue;
            }
            let seq = seq1 - 1;
            let started_ns = if root {
                ctl.started_ns[i].load(Ordering::Acquire)
            } else {
                0
            };
            let m = Msg::Report {
                seq,
                delivered_ns: b.delivered_ns.load(Ordering::Relaxed),
                last_ns: b.last_ns.load(Ordering::Relaxed),
                started_ns,
                sent: b.sent.load(Ordering::Relaxed),
                deliveries: b.deliveries.load(Ordering::Relaxed).min(255) as u8,
                bad: b.bad_payload.load(Ordering::Relaxed).min(255) as u8,
                finished: b.finished.load(Ordering::Acquire),
                dropped: b.send_drops.load(Ordering::Relaxed) > 0,
            };
            if self.seen[i].0 != seq {
                self.seen[i] = (seq, now);
            }
            if resend || report_due(self.last[i], self.seen[i].1, &m, now) {
                self.send(&m);
                self.last[i] = Some((m, now));
            }
        }
        false
    }
}

/// How long after this process first saw an operation, and after its last report, a changed
/// report may go out: every protocol send moves the counters, and a report per send (or one
/// the moment an operation starts or is delivered) put a control datagram, which crosses the
/// emulated network too, between the very messages the broadcast is timed by. Only the
/// coordinator's decision that an operation is over waits; the reported times do not change.
const REPORT_EVERY: Duration = Duration::from_micros(100);

/// Whether report `m` goes out now, given the last report sent for its slot and when, and
/// when its operation was first seen.
fn report_due(last: Option<(Msg, Instant)>, seen: Instant, m: &Msg, now: Instant) -> bool {
    if now.duration_since(seen) < REPORT_EVERY {
        return false;
    }
    match last {
        None => true,
        Some((prev, at)) => prev != *m && now.duration_since(at) >= REPORT_EVERY,
    }
}

/// The parent's side: turns reports into board entries for the coordinator and sends its
/// commands.
pub struct ParentAgent {
    sock: UdpSocket,
    job: u64,
    children: Vec<Option<SocketAddr>>,
    sent_allowed: u64,
    sent_retired: u64,
    last_flush: Instant,
    /// Per child: parent clock − child clock and its uncertainty (ns), once measured.
    pub clocks: Vec<Option<(i64, u64)>>,
    /// Per child: its data address, when it joined through this agent (`--join`).
    addrs: Vec<Option<SocketAddr>>,
    /// Per child: when it was last heard from.
    last_seen: Vec<Option<Instant>>,
    /// The parameters handed out with the address table; no table before they are set.
    params: Option<JobParams>,
    /// The job key: every control datagram carries its MAC.
    key: Option<AuthKey>,
    /// Per rank: the verbs connection data it made, as relayed so far ([`conn_relay`];
    /// allocated with the first chunk, so runs without verbs pay nothing).
    conns: Vec<Option<Gather>>,
    /// Ranks whose connection data is complete.
    conns_done: usize,
    pub invalid: u64,
}

impl ParentAgent {
    /// Binds the control socket on 127.0.0.1; `addr()` is passed to the children.
    pub fn new(job: u64, n: u32) -> std::io::Result<Self> {
        Self::bind("127.0.0.1:0".parse().expect("literal address"), job, n)
    }

    /// Binds the control socket at `addr` (rank 0's `--join` address in a launched run).
    pub fn bind(addr: SocketAddr, job: u64, n: u32) -> std::io::Result<Self> {
        let sock = UdpSocket::bind(addr)?;
        sock.set_nonblocking(true)?;
        Ok(Self {
            sock,
            job,
            children: vec![None; n as usize],
            sent_allowed: 0,
            sent_retired: 0,
            last_flush: Instant::now(),
            clocks: vec![None; n as usize],
            addrs: vec![None; n as usize],
            last_seen: vec![None; n as usize],
            params: None,
            key: None,
            conns: vec![None; n as usize],
            conns_done: 0,
            invalid: 0,
        })
    }

    /// Takes a chunk of verbs connection data from rank `r` at `from`; once every rank's is in,
    /// answers a rank's first chunk with the records addressed to it (the rank repeats its
    /// chunks until it has them all, so lost answers are made good).
    fn relay_conns(&mut self, chunk: &conn_relay::Chunk, from: SocketAddr) {
        let n = self.conns.len() as u32;
        let r = chunk.rank as usize;
        if chunk.dir != Dir::Up {
            self.invalid += 1;
            return;
        }
        let g = self.conns[r].get_or_insert_with(|| Gather::new(r as u32, n, Dir::Up));
        let was = g.missing();
        if g.add(chunk).is_err() {
            self.invalid += 1;
            return;
        }
        if was > 0 && g.missing() == 0 {
            self.conns_done += 1;
        }
        if chunk.part != 0 || self.conns_done < n as usize {
            return;
        }
        let down: Vec<ConnInfo> = self
            .conns
            .iter()
            .filter_map(|g| g.as_ref()?.get(r as u32).copied())
            .collect();
        for d in conn_relay::encode_all(self.job, n, Dir::Down, r as u32, &down) {
            let _ = self.sock.send_to(&sealed(self.key.as_ref(), &d), from);
        }
    }

    /// How many ranks have sent all their verbs connection data.
    pub fn conns_complete(&self) -> usize {
        self.conns_done
    }

    /// How many children have sent their data address.
    pub fn addresses_known(&self) -> usize {
        self.addrs.iter().filter(|a| a.is_some()).count()
    }

    /// Seals every control datagram with `key` and accepts only those it seals (`None`: the
    /// run is unauthenticated; tags are then zero).
    pub fn set_key(&mut self, key: Option<AuthKey>) {
        self.key = key;
    }

    /// From now on, answers every join with the address table and `p`.
    pub fn set_params(&mut self, p: JobParams) {
        self.params = Some(p);
    }

    /// Sends the whole address table to `to` (nothing while an address or the parameters are
    /// missing: the child keeps asking).
    fn send_table(&self, to: SocketAddr) {
        let Some(p) = self.params else { return };
        let Some(addrs) = self.addrs.iter().copied().collect::<Option<Vec<_>>>() else {
            return;
        };
        let n = addrs.len() as u32;
        for (i, chunk) in addrs.chunks(join::PER_DATAGRAM).enumerate() {
            let first = (i * join::PER_DATAGRAM) as u32;
            let table = join::encode(self.job, n, first, chunk, &p);
            let _ = self.sock.send_to(&sealed(self.key.as_ref(), &table), to);
        }
    }

    /// The control address.
    pub fn addr(&self) -> std::io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Sleeps until a control datagram arrives or `timeout` passed (while nothing else needs
    /// this thread: joining, clock probes).
    pub fn wait(&self, timeout: Duration) {
        wait_readable(&self.sock, timeout);
    }

    /// The harness's own failure detector for crashes it did not cause (a host killed or cut
    /// off from outside): a child that has been silent for `silence` — children repeat their
    /// reports every 2 ms — is marked dead in the operation the root may currently start, so
    /// that operations stop waiting for its reports. Returns the ranks newly marked.
    pub fn mark_silent_dead(&self, ctl: &Control, silence: Duration) -> Vec<u32> {
        let mut out = Vec::new();
        for (r, seen) in self.last_seen.iter().enumerate() {
            let b = &ctl.boards[r];
            if let Some(t) = seen
                && t.elapsed() > silence
                && !b.dead.load(Ordering::Acquire)
            {
                let iter = ctl.allowed.load(Ordering::Acquire).saturating_sub(1);
                b.died_in.store(iter, Ordering::Relaxed);
                b.dead.store(true, Ordering::Release);
                out.push(r as u32);
            }
        }
        out
    }

    /// How many children have made contact.
    pub fn joined(&self) -> usize {
        self.children.iter().filter(|c| c.is_some()).count()
    }

    fn send_to(&self, r: usize, m: &Msg) {
        if let Some(a) = self.children[r] {
            let _ = self
                .sock
                .send_to(&sealed(self.key.as_ref(), &encode(self.job, 0, m)), a);
        }
    }

    /// Tells every child to exit.
    pub fn stop(&self) {
        for r in 0..self.children.len() {
            self.send_to(r, &Msg::Stop);
        }
    }

    /// Receives reports into `ctl` (timestamps moved to the parent's clock) and sends commands
    /// that changed (and periodically). `now_ns` is the parent's clock.
    pub fn pump(&mut self, ctl: &Control, now_ns: &dyn Fn() -> u64) {
        let n = self.children.len() as u32;
        let mut buf = [0u8; 2048];
        while let Ok((len, from)) = self.sock.recv_from(&mut buf) {
            let Some(body) = opened(self.key.as_ref(), &buf[..len]) else {
                self.invalid += 1;
                continue;
            };
            if conn_relay::is_chunk(body) {
                // The sender's rank is in the chunk; it must come from that rank's address.
                match conn_relay::decode(body, self.job, n, crate::transport::MAX_PAYLOAD as u32) {
                    Ok(c) if self.children[c.rank as usize].is_none_or(|a| a == from) => {
                        let r = c.rank as usize;
                        self.children[r] = Some(from);
                        self.last_seen[r] = Some(Instant::now());
                        self.relay_conns(&c, from);
                    }
                    _ => self.invalid += 1,
                }
                continue;
            }
            let Some((rank, m)) = decode(body, self.job, n) else {
                self.invalid += 1;
                continue;
            };
            let r = rank as usize;
            match self.children[r] {
                None => self.children[r] = Some(from),
                Some(a) if a != from => {
                    self.invalid += 1;
                    continue;
                }
                Some(_) => {}
            }
            self.last_seen[r] = Some(Instant::now());
            match m {
                Msg::Report {
                    seq,
                    delivered_ns,
                    last_ns,
                    started_ns,
                    sent,
                    deliveries,
                    bad,
                    finished,
                    dropped,
                } => {
                    if seq < ctl.retired.load(Ordering::Acquire) {
                        continue;
                    }
                    let b = ctl.boards[r].claim(seq);
                    b.delivered_ns.store(delivered_ns, Ordering::Relaxed);
                    b.last_ns.store(last_ns, Ordering::Relaxed);
                    b.sent.store(sent, Ordering::Relaxed);
                    b.deliveries.store(u32::from(deliveries), Ordering::Relaxed);
                    b.bad_payload.store(u32::from(bad), Ordering::Relaxed);
                    b.send_drops.store(u32::from(dropped), Ordering::Relaxed);
                    if started_ns != 0 {
                        ctl.started_ns[(seq % WINDOW as u64) as usize].store(started_ns, Ordering::Release);
                    }
                    b.finished.store(finished, Ordering::Release);
                }
                Msg::Dead { iter } => {
                    let b = &ctl.boards[r];
                    if !b.dead.load(Ordering::Acquire) {
                        b.died_in.store(iter, Ordering::Relaxed);
                        b.dead.store(true, Ordering::Release);
                    }
                }
                Msg::Hello => {}
                Msg::Ping { t1 } => {
                    let pong = encode(self.job, 0, &Msg::Pong { t1, t2: now_ns() });
                    let _ = self.sock.send_to(&sealed(self.key.as_ref(), &pong), from);
                }
                Msg::Clock { offset, uncertainty } => self.clocks[r] = Some((offset, uncertainty)),
                Msg::Join { addr } => {
                    self.addrs[r] = Some(addr);
                    self.send_table(from);
                }
                _ => self.invalid += 1,
            }
        }
        let allowed = ctl.allowed.load(Ordering::Acquire);
        let retired = ctl.retired.load(Ordering::Acquire);
        let periodic = self.last_flush.elapsed() > Duration::from_millis(2);
        if periodic {
            self.last_flush = Instant::now();
        }
        if allowed != self.sent_allowed || periodic {
            self.send_to(0, &Msg::Allow { allowed });
            self.sent_allowed = allowed;
        }
        if retired != self.sent_retired || periodic {
            for r in 0..self.children.len() {
                self.send_to(r, &Msg::Retire { retired });
            }
            self.sent_retired = retired;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::verbs::conn::sample as conn;

    #[test]
    fn control_datagrams_are_sealed_with_the_job_key() {
        let key = AuthKey::from_bytes([7; 16]);
        let other = AuthKey::from_bytes([8; 16]);
        let body = encode(5, 3, &Msg::Stop);
        let d = sealed(Some(&key), &body);
        assert_eq!(opened(Some(&key), &d), Some(&body[..]));
        assert_eq!(opened(Some(&other), &d), None, "another job's key");
        assert_eq!(opened(None, &d), None, "a keyed datagram at an unkeyed agent");
        let mut forged = d.clone();
        forged[24] ^= 1;
        assert_eq!(opened(Some(&key), &forged), None, "a changed body");
        let plain = sealed(None, &body);
        assert_eq!(opened(None, &plain), Some(&body[..]));
        assert_eq!(
            opened(Some(&key), &plain),
            None,
            "an unsealed datagram at a keyed agent"
        );
        assert_eq!(opened(Some(&key), &d[..TAG_LEN - 1]), None, "shorter than a tag");
    }

    /// n ranks (more than one datagram's worth of peers) exchange connection data through a
    /// coordinator on loopback, sealed with the job key; a node with another key is shut out.
    #[test]
    fn connection_data_is_relayed_all_to_all_through_the_coordinator() {
        let (job, n) = (0xF7C0_0000_0000_0042u64, 20u32);
        let key = AuthKey::from_bytes([3; 16]);
        let mut parent = ParentAgent::bind("127.0.0.1:0".parse().unwrap(), job, n).unwrap();
        parent.set_key(Some(key.clone()));
        let addr = parent.addr().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let coord = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let ctl = Control::new(n);
                while !stop.load(Ordering::Acquire) {
                    parent.pump(&ctl, &|| 0);
                    parent.wait(Duration::from_millis(1));
                }
                (parent.conns_complete(), parent.invalid)
            })
        };
        let nodes: Vec<_> = (0..n)
            .map(|r| {
                let key = key.clone();
                std::thread::spawn(move || {
                    let mut a = ChildAgent::new(addr, job, r, n).unwrap();
                    a.set_key(Some(key));
                    let mine: Vec<ConnInfo> = (0..n).filter(|&t| t != r).map(|t| conn(job, r, t)).collect();
                    a.exchange_conns(&mine, crate::transport::MAX_PAYLOAD as u32, Duration::from_secs(10))
                })
            })
            .collect();
        // An outsider with the wrong key is never answered and changes nothing.
        let mut stranger = ChildAgent::new(addr, job, 1, n).unwrap();
        stranger.set_key(Some(AuthKey::from_bytes([4; 16])));
        let forged: Vec<ConnInfo> = (0..n)
            .filter(|&t| t != 1)
            .map(|t| ConnInfo {
                qpn: 9,
                ..conn(job, 1, t)
            })
            .collect();
        let e = stranger
            .exchange_conns(
                &forged,
                crate::transport::MAX_PAYLOAD as u32,
                Duration::from_millis(200),
            )
            .unwrap_err();
        assert!(e.contains("peers missing"), "{e}");
        for (me, h) in nodes.into_iter().enumerate() {
            let got = h.join().unwrap().unwrap();
            for (from, c) in got.iter().enumerate() {
                if from == me {
                    assert!(c.is_none());
                } else {
                    assert_eq!(*c, Some(conn(job, from as u32, me as u32)));
                }
            }
        }
        stop.store(true, Ordering::Release);
        let (done, invalid) = coord.join().unwrap();
        assert_eq!(done, n as usize);
        assert!(invalid > 0, "the stranger's datagrams were counted");
    }

    #[test]
    fn changed_reports_go_out_at_most_every_report_every() {
        let report = |last_ns| Msg::Report {
            seq: 3,
            delivered_ns: 10,
            last_ns,
            started_ns: 0,
            sent: 1,
            deliveries: 1,
            bad: 0,
            finished: false,
            dropped: false,
        };
        let seen = Instant::now();
        assert!(
            !report_due(None, seen, &report(5), seen),
            "not while the operation is young"
        );
        let t0 = seen + REPORT_EVERY;
        assert!(report_due(None, seen, &report(5), t0), "then the slot's first report");
        let last = Some((report(5), t0));
        assert!(
            !report_due(last, seen, &report(5), t0 + REPORT_EVERY * 10),
            "unchanged: never"
        );
        assert!(
            !report_due(last, seen, &report(6), t0 + REPORT_EVERY / 2),
            "changed, too soon"
        );
        assert!(report_due(last, seen, &report(6), t0 + REPORT_EVERY), "changed, due");
    }

    #[test]
    fn round_trips_and_rejects_garbage() {
        let msgs = [
            Msg::Hello,
            Msg::Report {
                seq: 7,
                delivered_ns: 1,
                last_ns: 2,
                started_ns: 3,
                sent: 4,
                deliveries: 1,
                bad: 2,
                finished: true,
                dropped: true,
            },
            Msg::Dead { iter: 9 },
            Msg::Allow { allowed: 3 },
            Msg::Retire { retired: 2 },
            Msg::Stop,
            Msg::Ping { t1: 11 },
            Msg::Pong { t1: 11, t2: 12 },
            Msg::Clock {
                offset: -5,
                uncertainty: 3,
            },
            Msg::Join {
                addr: "10.1.2.3:4567".parse().unwrap(),
            },
            Msg::Join {
                addr: "[2001:db8::7]:9".parse().unwrap(),
            },
        ];
        for m in msgs {
            let b = encode(5, 3, &m);
            assert_eq!(decode(&b, 5, 4), Some((3, m)));
            assert_eq!(decode(&b, 6, 4), None, "foreign job");
            assert_eq!(decode(&b, 5, 3), None, "rank out of range");
            assert_eq!(decode(&b[..LEN - 1], 5, 4), None, "truncated");
            for i in 0..8 {
                let mut c = b;
                c[i] ^= 0x40;
                assert_eq!(decode(&c, 5, 4), None, "byte {i}");
            }
        }
    }
}
