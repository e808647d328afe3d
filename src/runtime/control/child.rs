//! The node process's side of the control channel.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{challenge_key, hello_key, recv_within};
use crate::runtime::board::{Control, WINDOW};
use crate::runtime::conn_relay::Gather;
use crate::wire::conn::ConnInfo;
use crate::wire::conn_relay::{self, Dir};
use crate::wire::control::{Msg, decode, encode};
use crate::wire::join::{self, JobParams};
use crate::wire::mac::AuthKey;
use crate::wire::mac::{opened, sealed};
use crate::wire::shape::{self, GroupShape};

/// The node process's side: applies the parent's commands to its local [`Control`] and reports
/// its board.
pub struct ChildAgent {
    pub(super) sock: UdpSocket,
    pub(super) parent: SocketAddr,
    pub(super) job: u64,
    rank: u32,
    pub(super) n: u32,
    heard: bool,
    last_heard: Instant,
    /// Per slot: the last report sent and when.
    last: Vec<Option<(Msg, Instant)>>,
    /// Per slot: the operation in it and when this process first saw it.
    seen: Vec<(u64, Instant)>,
    /// The job key: every control datagram carries its MAC.
    pub(super) key: Option<AuthKey>,
    last_flush: Instant,
    /// When this node last sent the parent anything (see [`KEEPALIVE`]).
    last_word: Instant,
    /// Control datagrams dropped as invalid.
    pub invalid: u64,
    /// What this node must share with its group (a group's member): its hello states the
    /// fingerprint, and the coordinator's refusal names the coordinator's.
    shape: Option<GroupShape>,
    /// Set by another thread: the rendezvous gives up at once.
    cancel: Option<Arc<AtomicBool>>,
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
            last_word: Instant::now(),
            invalid: 0,
            shape: None,
            cancel: None,
        })
    }

    pub(super) fn send(&self, m: &Msg) {
        // A full socket buffer only delays: reports are re-sent.
        let _ = self
            .sock
            .send_to(&sealed(self.key.as_ref(), &encode(self.job, self.rank, m)), self.parent);
    }

    /// Rendezvous through the coordinator of a launched run, by its challenge–response
    /// ([`super`]): knocks with a fresh nonce under the key given to
    /// [`ChildAgent::set_key`] (the job's long-term key) until the coordinator's challenge
    /// comes back sealed over it, then sends its hello (its data address `me`, sealed with the
    /// hello key over the challenge's nonces) until the whole address table (and the run's
    /// parameters, whose nonce must be the challenge's) has arrived under the run's session
    /// key, or `timeout` passes. From then on this agent seals and opens everything with the
    /// session key.
    pub fn join(&mut self, me: SocketAddr, timeout: Duration) -> Result<(Vec<SocketAddr>, JobParams), String> {
        self.table(me, timeout, true)
    }

    /// Rendezvous through the coordinator of a `--procs` run, whose key (given to
    /// [`ChildAgent::set_key`]) is already the run's session key: sends its data address `me`
    /// until the whole address table has arrived, or `timeout` passes.
    pub fn rendezvous(&mut self, me: SocketAddr, timeout: Duration) -> Result<(Vec<SocketAddr>, JobParams), String> {
        self.table(me, timeout, false)
    }

    /// [`ChildAgent::join`] (`challenge`: by the challenge–response) or
    /// [`ChildAgent::rendezvous`].
    fn table(
        &mut self,
        me: SocketAddr,
        timeout: Duration,
        challenge: bool,
    ) -> Result<(Vec<SocketAddr>, JobParams), String> {
        let n = self.n as usize;
        let mut table: Vec<Option<SocketAddr>> = vec![None; n];
        let mut params = None;
        let mut missing = n;
        let mut buf = vec![0u8; 2048];
        // A timeout past what an `Instant` holds is no deadline (`Duration::MAX`: wait on).
        let deadline = Instant::now().checked_add(timeout);
        let mut last_sent: Option<Instant> = None;
        let long_term = self.key.clone();
        let knock = crate::transport::udp::auth::fresh_nonce().map_err(|e| format!("cannot draw a nonce: {e}"))?;
        let answer = challenge_key(long_term.as_ref(), &knock);
        // Once challenged: the hello's key and the run's nonce (without a challenge: the
        // run's key, and any nonce).
        let mut hello: Option<(Option<AuthKey>, Option<[u8; 16]>)> = (!challenge).then(|| (long_term.clone(), None));
        let fingerprint = self.shape.as_ref().map_or(0, GroupShape::fingerprint);
        while missing > 0 {
            let now = Instant::now();
            if self.cancel.as_ref().is_some_and(|c| c.load(Ordering::Acquire)) {
                return Err(format!("rendezvous with the coordinator at {}: given up", self.parent));
            }
            if deadline.is_some_and(|d| now > d) {
                return Err(match hello {
                    None => format!(
                        "rendezvous with the coordinator at {}: no challenge came back after {timeout:?} (is it up, with the same key and job?)",
                        self.parent
                    ),
                    Some(_) => format!(
                        "rendezvous with the coordinator at {}: {missing} of {n} addresses missing after {timeout:?}",
                        self.parent
                    ),
                });
            }
            if last_sent.is_none_or(|t| now.duration_since(t) > Duration::from_millis(5)) {
                let (key, m) = match &hello {
                    None => (long_term.as_ref(), Msg::Knock { nonce: knock }),
                    Some((k, _)) => (
                        k.as_ref(),
                        Msg::Join {
                            addr: me,
                            shape: fingerprint,
                        },
                    ),
                };
                let _ = self
                    .sock
                    .send_to(&sealed(key, &encode(self.job, self.rank, &m)), self.parent);
                last_sent = Some(now);
            }
            let Ok((len, from)) = recv_within(&self.sock, &mut buf, now + Duration::from_millis(5)) else {
                continue;
            };
            if from != self.parent {
                self.invalid += 1;
                continue;
            }
            let d = &buf[..len];
            let challenge = match opened(answer.as_ref(), d).and_then(|b| decode(b, self.job, self.n)) {
                Some((_, Msg::Challenge { nonce, run })) => Some((nonce, run)),
                _ => None,
            };
            let Some((_, run)) = hello else {
                match challenge {
                    Some((nonce, run)) => {
                        hello = Some((hello_key(long_term.as_ref(), &nonce, &run), Some(run)));
                        self.key = long_term.as_ref().map(|k| k.session(&run));
                        last_sent = None;
                    }
                    None => self.invalid += 1,
                }
                continue;
            };
            if challenge.is_some() {
                continue; // A repeated challenge.
            }
            if let Some(theirs) = opened(self.key.as_ref(), d)
                .filter(|b| shape::is_refusal(b))
                .and_then(|b| shape::decode_refusal(b, self.job))
                .filter(|&(r, _)| r == self.rank)
                .map(|(_, s)| s)
            {
                // Without a shape of its own (stated none): the coordinator's, in words.
                let why = self.shape.as_ref().map_or_else(
                    || format!("the coordinator's: {}", theirs.summary()),
                    |m| m.differences(&theirs),
                );
                return Err(format!(
                    "the coordinator at {} refused this member: its group differs ({why})",
                    self.parent
                ));
            }
            let chunk = opened(self.key.as_ref(), d).and_then(|body| join::decode(body, self.job, self.n));
            let Some((first, addrs, p)) = chunk.filter(|c| run.is_none_or(|r| c.2.run == r)) else {
                if self.stopped(d) {
                    // The coordinator's farewell (`ParentAgent::farewell`): no table will come.
                    return Err(format!(
                        "rendezvous with the coordinator at {}: the coordinator stopped serving with {missing} of {n} addresses still missing here",
                        self.parent
                    ));
                }
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

    /// Is `d` the coordinator's STOP, sealed with this agent's key?
    pub(super) fn stopped(&self, d: &[u8]) -> bool {
        let body = opened(self.key.as_ref(), d);
        matches!(
            body.and_then(|b| decode(b, self.job, self.n.max(1))),
            Some((_, Msg::Stop))
        )
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
        // As in `table`: a timeout past what an `Instant` holds is no deadline.
        let deadline = Instant::now().checked_add(timeout);
        let mut last_sent: Option<Instant> = None;
        // Resent with a growing pause: all n ranks repeat their whole set until the last rank
        // is in, so a fixed short period would flood the coordinator of a large run.
        let mut pause = Duration::from_millis(5);
        let mut problem: Option<String> = None;
        while got.missing() > 0 {
            let now = Instant::now();
            if deadline.is_some_and(|d| now > d) {
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

    /// States `shape` in this node's hello: a coordinator with another refuses the join, and
    /// [`ChildAgent::join`] fails at once naming both.
    pub fn set_shape(&mut self, shape: Option<GroupShape>) {
        self.shape = shape;
    }

    /// [`ChildAgent::join`] gives up at once when `cancel` is set (by another thread).
    pub fn set_cancel(&mut self, cancel: Option<Arc<AtomicBool>>) {
        self.cancel = cancel;
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
                self.last_word = now;
            }
        }
        if self.heard && now.duration_since(self.last_word) > KEEPALIVE {
            // Nothing in flight to report: the parent still hears that this node is alive.
            self.send(&Msg::Hello);
            self.last_word = now;
        }
        false
    }
}

/// The longest a node that has joined stays silent to its parent: with no operation in flight
/// it has no report to send, and a parent that heard nothing for its silence bound (300 ms for
/// `bench --join`) counted the live node crashed (the root's own node in the emulated cluster
/// of `tests/netns.rs`, about one run in three).
pub(super) const KEEPALIVE: Duration = Duration::from_millis(50);

/// How long after this process first saw an operation, and after its last report, a changed
/// report may go out: every protocol send moves the counters, and a report per send (or one
/// the moment an operation starts or is delivered) put a control datagram, which crosses the
/// emulated network too, between the very messages the broadcast is timed by. Only the
/// coordinator's decision that an operation is over waits; the reported times do not change.
pub(super) const REPORT_EVERY: Duration = Duration::from_micros(100);

/// Whether report `m` goes out now, given the last report sent for its slot and when, and
/// when its operation was first seen.
pub(super) fn report_due(last: Option<(Msg, Instant)>, seen: Instant, m: &Msg, now: Instant) -> bool {
    if now.duration_since(seen) < REPORT_EVERY {
        return false;
    }
    match last {
        None => true,
        Some((prev, at)) => prev != *m && now.duration_since(at) >= REPORT_EVERY,
    }
}

/// A joined process's data socket and its place in the run: the socket bound (on `bind`, else
/// the interface toward the coordinator) and kept, since the address published is the one it
/// has; the control agent that joined rank 0's coordinator with that address (keyed by
/// `key`'s challenge–response) and stays open; the address table and the run's parameters.
pub struct Joined {
    pub sock: UdpSocket,
    pub agent: ChildAgent,
    pub peers: Vec<SocketAddr>,
    pub params: JobParams,
}

/// How a process joins its coordinator ([`JoinAs::join`]): where, with which key and shape.
#[derive(Clone)]
pub struct JoinAs {
    pub coordinator: SocketAddr,
    /// The IP the data socket binds [default: the interface toward the coordinator].
    pub bind: Option<IpAddr>,
    pub job: u64,
    pub key: Option<AuthKey>,
    pub timeout: Duration,
    /// What the process must share with its group ([`ChildAgent::set_shape`]).
    pub shape: Option<GroupShape>,
    /// Gives the join up at once when set ([`ChildAgent::set_cancel`]).
    pub cancel: Option<Arc<AtomicBool>>,
}

impl JoinAs {
    /// Binds this process's data socket and joins the coordinator as `rank` of `n` (until the
    /// table is complete, the coordinator refuses this shape, or the timeout passes):
    /// [`Joined`].
    pub fn join(&self, rank: u32, n: u32) -> Result<Joined, String> {
        let coordinator = self.coordinator;
        let ip = match self.bind {
            Some(ip) => ip,
            None => crate::transport::local_ip::local_ip_toward(coordinator)
                .map_err(|e| format!("no route to the coordinator {coordinator}: {e}"))?,
        };
        let sock = crate::transport::udp::UdpTransport::bind_socket(SocketAddr::new(ip, 0))
            .map_err(|e| format!("cannot bind a UDP port on {ip}: {e}"))?;
        let me = sock
            .local_addr()
            .map_err(|e| format!("cannot read the address bound on {ip}: {e}"))?;
        let mut agent = ChildAgent::new(coordinator, self.job, rank, n).map_err(|e| format!("control socket: {e}"))?;
        agent.set_key(self.key.clone());
        agent.set_shape(self.shape.clone());
        agent.set_cancel(self.cancel.clone());
        let (peers, params) = agent.join(me, self.timeout)?;
        Ok(Joined {
            sock,
            agent,
            peers,
            params,
        })
    }
}

/// [`JoinAs::join`] with no shape stated and no cancel.
pub fn join_with_socket(
    coordinator: SocketAddr,
    bind: Option<IpAddr>,
    job: u64,
    rank: u32,
    n: u32,
    key: Option<AuthKey>,
    timeout: Duration,
) -> Result<Joined, String> {
    JoinAs {
        coordinator,
        bind,
        job,
        key,
        timeout,
        shape: None,
        cancel: None,
    }
    .join(rank, n)
}
