//! The runtime bootstrap (`docs/overlay.md`): a node given only its rank, the job's size and its
//! launch-tree parent's address builds the ring and the BMG with the BMG paper's Algorithms
//! 1 and 2 ([`BmgOverlay`]), then runs Han–Finkel's `Disseminate` over the BMG's clockwise
//! links as an all-gather of `(rank, address)`, so that every node ends with the whole
//! address table after `⌈log n⌉` rounds, without a coordinator.
//!
//! Knowledge-based model (BMG paper §3.1): a node sends only to nodes whose address it has
//! learned, from its parent's address given at launch, from the source of a datagram (a
//! child's hello, any message), or from the address an overlay message carries with the
//! process it names ([`BootMsg`]). The launch tree is the binomial tree over ranks, so a node
//! knows its children's ranks, not their addresses, until they say hello.
//!
//! Phases of the overlay are ticks of `tick` real time (counted, `docs/architecture.md`, decision 3).
//! Datagrams may be lost: the overlay repairs itself (self-stabilization, refreshes), and the
//! all-gather re-sends its messages, backing off from one tick to 64, until the node is done
//! and has lingered.
//! Han–Finkel's rounds are emulated: round `r` is sent to `CW[r]` (the node `2^r` ahead on the
//! ring), and the node moves to round `r + 1` once it holds round `r` from `CCW[r]`.

use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::model::LogP;
use crate::protocol::Rank;
use crate::protocol::overlay::Guarded;
use crate::protocol::overlay::bmg_overlay::{BmgOverlay, OverlayMsg};
use crate::protocol::overlay::han_finkel::run_len;
use crate::protocol::overlay::ring_to_bmg::levels;
use crate::topology::{Order, Tree, TreeKind};
use crate::wire::bootstrap::{BootMsg, named};
use crate::wire::mac::{opened, sealed};
use crate::wire::{DropCounters, HEADER_LEN, WireMessage, decode_datagram, encode_datagram};

/// One node's bootstrap parameters.
#[derive(Clone, Debug)]
pub struct BootConfig {
    pub rank: Rank,
    pub n: u32,
    /// The launch-tree parent's address (`None` for the root, rank 0).
    pub parent: Option<SocketAddrV4>,
    /// Job identifier carried by every datagram (others are dropped).
    pub job: u64,
    /// One overlay phase.
    pub tick: Duration,
    /// A quiet node refreshes every `refresh` phases.
    pub refresh: u32,
    /// Keep answering and re-sending this long after the table is complete.
    pub linger: Duration,
    /// Give up after this long.
    pub timeout: Duration,
    /// Fault injection: drop every `k`-th datagram this node would send (0: none), to check
    /// that losses are repaired.
    pub drop_every: u32,
    /// The job key: every datagram carries its MAC after the body, checked before the body is
    /// read (`None`: unauthenticated, zero tags).
    pub key: Option<crate::wire::mac::AuthKey>,
}

/// What one node measured.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct BootReport {
    pub rank: Rank,
    pub n: u32,
    /// Microseconds from the start until `Succ` and `Pred` were set.
    pub ring_us: u64,
    /// Until every finger-table level was set.
    pub bmg_us: u64,
    /// Until the address table was complete (addresses are also learned from the overlay's
    /// messages, so on small jobs this can come before the BMG).
    pub table_us: u64,
    /// Until the all-gather's last round was received.
    pub gather_us: u64,
    /// Wall-clock time (µs since the Unix epoch) at which the table was complete, to compare
    /// nodes of one machine.
    pub table_unix_us: u64,
    /// The address table, by rank.
    pub table: Vec<String>,
    pub sent: u64,
    pub received: u64,
    /// Datagrams dropped as invalid.
    pub dropped: u64,
    /// Messages not sent because the destination's address was not known yet.
    pub unknown_destination: u64,
    /// Datagrams dropped by [`BootConfig::drop_every`].
    pub injected_losses: u64,
}

/// Microseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// The launch tree of a job of `n` nodes: the binomial tree over ranks, root 0 (every child
/// outranks its parent, so a launcher can start parents first).
pub fn launch_tree(n: u32) -> Result<Tree, String> {
    Tree::build(TreeKind::Binomial, Order::Interleaved, n, LogP::new(0, 1)?)
}

struct Node {
    cfg: BootConfig,
    sock: UdpSocket,
    addrs: Vec<Option<SocketAddrV4>>,
    overlay: BmgOverlay,
    heard_parent: bool,
    attempts: u64,
    buf: Vec<u8>,
    rbuf: Vec<u8>,
    out: Vec<(Rank, OverlayMsg)>,
    /// All-gather: the round we are in (None: not started), the messages received per round.
    round: Option<u32>,
    inbox: Vec<Option<Vec<(u32, SocketAddrV4)>>>,
    /// Round messages sent: destination, message, ticks until the next re-send, and the
    /// current back-off (doubling up to 64 ticks).
    sent_rounds: Vec<(Rank, BootMsg, u32, u32)>,
    drops: DropCounters,
    /// Datagrams whose MAC did not check.
    bad_mac: u64,
    report: BootReport,
}

impl Node {
    fn send(&mut self, to: Rank, m: &BootMsg) {
        let Some(Some(addr)) = self.addrs.get(to as usize).copied() else {
            self.report.unknown_destination += 1;
            return;
        };
        self.attempts += 1;
        if self.cfg.drop_every > 0 && self.attempts.is_multiple_of(u64::from(self.cfg.drop_every)) {
            self.report.injected_losses += 1;
            return;
        }
        if let Ok(len) = encode_datagram(&mut self.buf, self.cfg.job, 0, 0, self.cfg.rank, m, &[]) {
            let d = sealed(self.cfg.key.as_ref(), &self.buf[..len]);
            // A full socket buffer is a lost datagram: the protocols repair or re-send.
            if self.sock.send_to(&d, addr).is_ok() {
                self.report.sent += 1;
            }
        }
    }

    fn flush(&mut self) {
        for (to, m) in std::mem::take(&mut self.out) {
            let ident = named(&m);
            match self.addrs.get(ident as usize).copied().flatten() {
                Some(a) => self.send(to, &BootMsg::Overlay(m, a)),
                None => self.report.unknown_destination += 1,
            }
        }
    }

    fn learn(&mut self, rank: Rank, a: SocketAddrV4) {
        if let Some(slot) = self.addrs.get_mut(rank as usize) {
            *slot = Some(a);
        }
    }

    /// Handles datagrams until none is waiting (the socket's read timeout) or `until`.
    fn receive(&mut self, started: Instant, until: Instant) {
        let mut dgram = std::mem::take(&mut self.rbuf);
        while Instant::now() < until
            && let Ok((len, src)) = self.sock.recv_from(&mut dgram)
        {
            let SocketAddr::V4(src) = src else { continue };
            let Some(body) = opened(self.cfg.key.as_ref(), &dgram[..len]) else {
                self.bad_mac += 1;
                continue;
            };
            let (h, m) = match decode_datagram::<BootMsg>(body, self.cfg.job, self.cfg.n) {
                Ok((h, m, _)) => (h, m),
                Err(e) => {
                    self.drops.count(e);
                    continue;
                }
            };
            self.report.received += 1;
            let from = h.sender;
            self.learn(from, src);
            if Some(from) == self.overlay.ring.parent {
                self.heard_parent = true;
            }
            match m {
                BootMsg::Hello => {}
                BootMsg::Overlay(m, a) => {
                    self.learn(named(&m), a);
                    let mut out = std::mem::take(&mut self.out);
                    self.overlay.on_message(from, m, &mut out);
                    self.out = out;
                    self.flush();
                }
                BootMsg::Round { round, entries } => {
                    let r = usize::from(round);
                    if r < self.inbox.len() && self.inbox[r].is_none() {
                        self.inbox[r] = Some(entries);
                    }
                }
            }
            self.progress(started);
        }
        self.rbuf = dgram;
    }

    /// Records milestones and advances the all-gather.
    fn progress(&mut self, started: Instant) {
        let us = || started.elapsed().as_micros() as u64;
        let ring = self.overlay.ring.pred.is_some() && self.overlay.ring.succ.is_some();
        if self.report.ring_us == 0 && ring {
            self.report.ring_us = us();
        }
        let l = levels(self.cfg.n);
        let bmg = ring && (0..l).all(|k| self.overlay.bmg.cw[k].is_some() && self.overlay.bmg.ccw[k].is_some());
        if self.report.bmg_us == 0 && bmg {
            self.report.bmg_us = us();
            self.round = Some(0);
            self.start_round(0);
        }
        while let Some(r) = self.round {
            if r >= run_len(self.cfg.n) {
                break;
            }
            let Some(entries) = self.inbox[r as usize].take() else {
                break;
            };
            for (rank, a) in entries {
                self.learn(rank, a);
            }
            self.round = Some(r + 1);
            if r + 1 < run_len(self.cfg.n) {
                self.start_round(r + 1);
            }
        }
        if self.report.gather_us == 0 && self.round.is_some_and(|r| r >= run_len(self.cfg.n)) {
            self.report.gather_us = us();
        }
        if self.report.table_us == 0 && self.addrs.iter().all(Option::is_some) {
            self.report.table_us = us();
            self.report.table_unix_us = unix_us();
        }
    }

    /// Sends round `r` of the all-gather to `CW[r]`: every entry known (in an all-gather
    /// started by everyone at round 0 these are exactly the entries `Disseminate` still
    /// forwards).
    fn start_round(&mut self, r: u32) {
        let Some(to) = self.overlay.bmg.cw[r as usize] else {
            return;
        };
        let entries: Vec<(u32, SocketAddrV4)> = self
            .addrs
            .iter()
            .enumerate()
            .filter_map(|(i, a)| a.map(|a| (i as u32, a)))
            .collect();
        let m = BootMsg::Round {
            round: r as u8,
            entries,
        };
        self.send(to, &m);
        self.sent_rounds.push((to, m, 1, 1));
    }
}

/// Runs one node's bootstrap on `sock` (bound, any address) until its table is complete and
/// it has lingered, or the timeout. Errors (one line) on a socket failure or the timeout.
pub fn boot(sock: UdpSocket, cfg: BootConfig) -> Result<BootReport, String> {
    boot_keep(sock, cfg).map(|b| b.report)
}

/// A booted node, kept for what runs after the bootstrap ([`crate::runtime::watch`]).
pub struct Booted {
    pub report: BootReport,
    pub sock: UdpSocket,
    /// The complete address table, by rank.
    pub addrs: Vec<SocketAddrV4>,
    pub overlay: BmgOverlay,
}

/// [`boot`], keeping the socket, the table and the overlay.
pub fn boot_keep(sock: UdpSocket, cfg: BootConfig) -> Result<Booted, String> {
    let tree = launch_tree(cfg.n)?;
    if cfg.rank >= cfg.n {
        return Err(format!("rank {} is not below the job's size {}", cfg.rank, cfg.n));
    }
    if (cfg.rank == 0) != cfg.parent.is_none() {
        return Err("every rank but 0 needs its parent's address, and rank 0 has none".into());
    }
    let SocketAddr::V4(me) = sock.local_addr().map_err(|e| format!("socket: {e}"))? else {
        return Err("the bootstrap speaks IPv4 only".into());
    };
    sock.set_read_timeout(Some(cfg.tick.max(Duration::from_micros(100))))
        .map_err(|e| format!("socket: {e}"))?;
    let mut addrs = vec![None; cfg.n as usize];
    addrs[cfg.rank as usize] = Some(me);
    if let (Some(p), Some(a)) = (tree.parent(cfg.rank), cfg.parent) {
        addrs[p as usize] = Some(a);
    }
    let mut node = Node {
        cfg: cfg.clone(),
        sock,
        addrs,
        overlay: BmgOverlay::new(
            cfg.rank,
            cfg.n,
            tree.parent(cfg.rank),
            tree.children(cfg.rank).to_vec(),
            cfg.refresh,
        ),
        heard_parent: false,
        attempts: 0,
        buf: vec![0u8; HEADER_LEN + BootMsg::MAX_BODY],
        rbuf: vec![0u8; HEADER_LEN + BootMsg::MAX_BODY],
        out: Vec::new(),
        round: None,
        inbox: vec![None; run_len(cfg.n) as usize],
        sent_rounds: Vec::new(),
        drops: DropCounters::default(),
        bad_mac: 0,
        report: BootReport {
            rank: cfg.rank,
            n: cfg.n,
            ..BootReport::default()
        },
    };
    let started = Instant::now();
    let mut next_tick = started;
    let mut done_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if now >= next_tick {
            next_tick = now + cfg.tick;
            node.overlay.on_phase();
            if let Some(p) = tree.parent(cfg.rank)
                && !node.heard_parent
            {
                node.send(p, &BootMsg::Hello);
            }
            if node.overlay.spontaneous_due() {
                let mut out = std::mem::take(&mut node.out);
                node.overlay.spontaneous(&mut out);
                node.out = out;
                node.flush();
            }
            // Datagrams may be lost: re-send the round messages, backing off.
            let mut resend = std::mem::take(&mut node.sent_rounds);
            for (to, m, wait, backoff) in &mut resend {
                *wait -= 1;
                if *wait == 0 {
                    node.send(*to, m);
                    *backoff = (*backoff * 2).min(64);
                    *wait = *backoff;
                }
            }
            node.sent_rounds = resend;
        }
        node.receive(started, next_tick);
        node.progress(started);
        if node.report.table_us > 0 && node.report.gather_us > 0 && done_at.is_none() {
            done_at = Some(Instant::now());
        }
        if let Some(d) = done_at
            && d.elapsed() >= cfg.linger
        {
            break;
        }
        if started.elapsed() > cfg.timeout {
            let known = node.addrs.iter().filter(|a| a.is_some()).count();
            return Err(format!(
                "rank {}: bootstrap timed out after {:?} (ring {}, bmg {}, {known} of {} addresses)",
                cfg.rank,
                cfg.timeout,
                node.report.ring_us > 0,
                node.report.bmg_us > 0,
                cfg.n
            ));
        }
    }
    node.report.dropped = node.drops.total() + node.overlay.dropped() + node.bad_mac;
    node.report.table = node
        .addrs
        .iter()
        .map(|a| a.map(|a| a.to_string()).unwrap_or_default())
        .collect();
    let addrs = node.addrs.iter().flatten().copied().collect();
    Ok(Booted {
        report: node.report,
        sock: node.sock,
        addrs,
        overlay: node.overlay,
    })
}

/// Test support: `n` nodes as threads on loopback, each running `run` with its socket and
/// its config (tick 1 ms, refresh 16, linger 150 ms, timeout 20 s, job 77, no key, then
/// `adjust`ed); returns the addresses and the outcomes by rank.
#[cfg(test)]
pub(crate) fn loopback_threads<T: Send + 'static>(
    n: u32,
    adjust: impl Fn(&mut BootConfig),
    run: fn(UdpSocket, BootConfig) -> T,
) -> (Vec<SocketAddrV4>, Vec<T>) {
    let tree = launch_tree(n).unwrap();
    let socks: Vec<UdpSocket> = (0..n).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
    let addrs: Vec<SocketAddrV4> = socks
        .iter()
        .map(|s| match s.local_addr().unwrap() {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => unreachable!("bound to 127.0.0.1"),
        })
        .collect();
    let handles: Vec<_> = socks
        .into_iter()
        .enumerate()
        .map(|(r, s)| {
            let mut cfg = BootConfig {
                rank: r as u32,
                n,
                parent: tree.parent(r as u32).map(|p| addrs[p as usize]),
                job: 77,
                tick: Duration::from_millis(1),
                refresh: 16,
                linger: Duration::from_millis(150),
                timeout: Duration::from_secs(20),
                drop_every: 0,
                key: None,
            };
            adjust(&mut cfg);
            std::thread::spawn(move || run(s, cfg))
        })
        .collect();
    (addrs, handles.into_iter().map(|h| h.join().unwrap()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyed_job_boots_and_a_foreign_key_is_shut_out() {
        use crate::wire::mac::AuthKey;
        let same = boot_keyed(4, 0, |_| Some(AuthKey::from_bytes([3; 16])), Duration::from_secs(20));
        assert!(same.iter().all(|r| r.is_ok()), "{same:?}");
        // Rank 3 holds another key: nobody accepts its datagrams nor it theirs.
        let mixed = boot_keyed(
            4,
            0,
            |r| Some(AuthKey::from_bytes([if r == 3 { 4 } else { 3 }; 16])),
            Duration::from_millis(400),
        );
        assert!(mixed[3].as_ref().is_err_and(|e| e.contains("timed out")), "{mixed:?}");
    }

    /// Boots `n` nodes as threads on loopback, each dropping every `drop_every`-th datagram.
    fn boot_threads(n: u32, drop_every: u32) -> Vec<BootReport> {
        boot_keyed(n, drop_every, |_| None, Duration::from_secs(20))
            .into_iter()
            .map(|r| r.unwrap())
            .collect()
    }

    /// The same with a key per rank and a timeout; returns each node's outcome.
    fn boot_keyed(
        n: u32,
        drop_every: u32,
        key: impl Fn(u32) -> Option<crate::wire::mac::AuthKey>,
        timeout: Duration,
    ) -> Vec<Result<BootReport, String>> {
        let (addrs, reps) = loopback_threads(
            n,
            |c| {
                c.timeout = timeout;
                c.drop_every = drop_every;
                c.key = key(c.rank);
            },
            boot,
        );
        let want: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
        for rep in reps.iter().flatten() {
            assert_eq!(rep.table, want, "n={n} rank {}", rep.rank);
            assert!(rep.ring_us > 0 && rep.bmg_us >= rep.ring_us && rep.gather_us >= rep.bmg_us);
            assert!(rep.table_us > 0 && rep.sent > 0 && rep.dropped == 0, "{rep:?}");
        }
        reps
    }

    #[test]
    fn threads_on_loopback_boot_from_their_parents_addresses_only() {
        for n in [2u32, 5, 8, 13] {
            let reps = boot_threads(n, 0);
            assert!(reps.iter().all(|r| r.injected_losses == 0));
        }
    }

    #[test]
    fn lost_datagrams_are_repaired() {
        // Every 5th datagram of every node is lost: the overlay's refreshes and the
        // all-gather's re-sends still complete every table.
        let reps = boot_threads(12, 5);
        assert!(reps.iter().map(|r| r.injected_losses).sum::<u64>() > 12);
    }
}
