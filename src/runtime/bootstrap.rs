//! The runtime bootstrap (`docs/overlay.md`): a node given only its rank, the job's size and
//! its launch-tree parent's address runs the sans-IO [`BootMachine`] (the overlay built with
//! the BMG paper's Algorithms 1 and 2, then Han–Finkel's all-gather of addresses) in the
//! generic node loop ([`Driver`]) over its UDP socket (`socket::Sealed`, which learns the
//! address of a rank from the source of its datagrams), until every node has the whole
//! address table, without a coordinator.
//!
//! Phases of the overlay are ticks of `tick` real time (counted, `docs/architecture.md`,
//! decision 3). Datagrams may be lost: the overlay repairs itself and the all-gather re-sends;
//! [`BootConfig::drop_every`] injects losses with a transport wrapper (`lossy::Lossy`).

mod lossy;
pub(crate) mod socket;

use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::model::LogP;
use crate::protocol::overlay::bmg_overlay::BmgOverlay;
use crate::protocol::overlay::boot::{BootMachine, BootOutput, Learn};
use crate::protocol::{DetectorConfig, Event, Machine, Rank, Time};
use crate::runtime::driver::{Decoded, Driver, Framing};
use crate::topology::{Order, Tree, TreeKind};
use crate::wire::bootstrap::BootMsg;
use crate::wire::{DecodeError, HEADER_LEN, WireMessage, encode_datagram, kind};
use lossy::Lossy;
use socket::{AddrBook, Book, Sealed, lock};

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

/// The bootstrap's datagrams (`BOOTSTRAP`; anything else is dropped and counted).
struct BootFraming;

impl Framing for BootFraming {
    type Msg = BootMsg;
    const MAX_DATAGRAM: usize = HEADER_LEN + BootMsg::MAX_BODY;

    fn decode(k: u8, body: &[u8], n: u32) -> Result<Decoded<BootMsg>, DecodeError> {
        match k {
            kind::BOOTSTRAP if body.len() <= BootMsg::MAX_BODY => Ok(Decoded::Msg(BootMsg::decode(body, n)?)),
            kind::BOOTSTRAP => Err(DecodeError::TooLarge),
            _ => Err(DecodeError::UnknownKind),
        }
    }

    fn encode(m: &BootMsg, job: u64, rank: Rank, buf: &mut [u8]) -> Option<usize> {
        encode_datagram(buf, job, 0, 0, rank, m, &[]).ok()
    }

    fn heartbeat(_job: u64, _rank: Rank, _buf: &mut [u8]) -> Option<usize> {
        None
    }
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
    let keep = sock.try_clone().map_err(|e| format!("socket: {e}"))?;
    let ns = |d: Duration| d.as_nanos() as Time;
    let parent = tree.parent(cfg.rank).zip(cfg.parent);
    let mut m = BootMachine::new(
        cfg.rank,
        cfg.n,
        me,
        parent,
        tree.children(cfg.rank).to_vec(),
        ns(cfg.tick),
        cfg.refresh,
    );
    let book: Book = Arc::new(Mutex::new(AddrBook {
        addrs: m.addrs().to_vec(),
        fresh: Vec::new(),
    }));
    let tp = Lossy::new(
        Sealed::learning(
            sock,
            Arc::clone(&book),
            cfg.key.clone(),
            cfg.job,
            cfg.rank,
            BootFraming::MAX_DATAGRAM,
        ),
        cfg.drop_every,
    );
    let losses = Arc::clone(&tp.losses);
    // No heartbeats: the bootstrap suspects nobody.
    let quiet = DetectorConfig {
        heartbeat: Time::MAX / 4,
        suspect_after: Time::MAX / 4,
    };
    let started = Instant::now();
    let mut drv: Driver<BootFraming> = Driver::new(Box::new(tp), cfg.job, quiet, started).without_grace();
    drv.start(started);
    let mut report = BootReport {
        rank: cfg.rank,
        n: cfg.n,
        ..BootReport::default()
    };
    let mut done_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let t = drv.ns(now);
        if m.poll_timeout().is_some_and(|at| t >= at) {
            let Ok(()) = m.handle(t, Event::Timer);
        }
        drv.transmit(&mut m, now, || true);
        drv.receive(&mut m, now);
        let fresh = std::mem::take(&mut lock(&book).fresh);
        for (r, a) in fresh {
            let Ok(()) = m.handle(t, Event::Input(Learn(r, a)));
        }
        while let Some(o) = m.poll_output() {
            let us = (started.elapsed().as_micros() as u64).max(1);
            match o {
                BootOutput::Learned(r, a) => lock(&book).addrs[r as usize] = Some(a),
                BootOutput::Ring => report.ring_us = us,
                BootOutput::Bmg => report.bmg_us = us,
                BootOutput::Gather => report.gather_us = us,
                BootOutput::Table => {
                    report.table_us = us;
                    report.table_unix_us = unix_us();
                }
            }
        }
        drv.transmit(&mut m, now, || true);
        if m.done() && done_at.is_none() {
            done_at = Some(Instant::now());
        }
        if let Some(d) = done_at
            && d.elapsed() >= cfg.linger
        {
            break;
        }
        if started.elapsed() > cfg.timeout {
            let known = m.addrs().iter().filter(|a| a.is_some()).count();
            let (ring, bmg) = m.milestones();
            return Err(format!(
                "rank {}: bootstrap timed out after {:?} (ring {ring}, bmg {bmg}, {known} of {} addresses)",
                cfg.rank, cfg.timeout, cfg.n
            ));
        }
        let next = started + Duration::from_nanos(m.poll_timeout().unwrap_or(0));
        let wait = next.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            let _ = drv.tp.wait(wait);
        }
    }
    let stats = drv.tp.stats();
    report.sent = stats.sent;
    report.received = drv.received;
    report.dropped = drv.drops.total() + stats.malformed + m.overlay().dropped();
    report.unknown_destination = m.unknown_destination();
    report.injected_losses = losses.load(Ordering::Relaxed);
    report.table = m
        .addrs()
        .iter()
        .map(|a| a.map(|a| a.to_string()).unwrap_or_default())
        .collect();
    let addrs = m.addrs().iter().flatten().copied().collect();
    drop(drv);
    keep.set_read_timeout(Some(cfg.tick.max(Duration::from_micros(100))))
        .map_err(|e| format!("socket: {e}"))?;
    Ok(Booted {
        report,
        sock: keep,
        addrs,
        overlay: m.into_overlay(),
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
mod tests;
