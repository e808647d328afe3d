//! A booted node's watch (failure notices and repair): after the bootstrap
//! ([`crate::runtime::bootstrap`]) the node keeps its socket, its address table and its overlay
//! state, and
//! - watches its BMG neighbours: heartbeats every `heartbeat`, a neighbour silent for
//!   `suspect_after` is suspected, and so at once is a neighbour whose port draws an ICMP
//!   "port unreachable" (`IP_RECVERR`, [`crate::transport::udp::icmp`]; every peer answered
//!   during the bootstrap, so a refusal means its process died);
//! - spreads what it suspects, and forwards what it hears, as failure notices
//!   ([`FailureNotices`]: Han–Finkel's `Disseminate` over the members without the dead one,
//!   `⌈log m⌉ + 2` rounds, one round per `tick`);
//! - repairs the overlay on every death learned ([`Mended`], the simulator's repair: the
//!   launch tree mended, Algorithms 1 and 2 re-run over the survivors), and checks its own
//!   `Succ`, `Pred`, `CW`, `CCW` against the legitimate BMG over the survivors.
//!
//! Each time the set of deaths known or the verdict of that check changes, the node hands a
//! [`WatchReport`] to its caller. It runs until `stop` is set.

use std::io::ErrorKind;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::protocol::Rank;
use crate::protocol::overlay::Guarded;
use crate::protocol::overlay::bmg_overlay::{BmgOverlay, OverlayMsg};
use crate::protocol::overlay::failure_notice::FailureNotices;
use crate::protocol::overlay::repair::Mended;
use crate::runtime::bootstrap::{Booted, launch_tree, unix_us};
use crate::runtime::control::{opened, sealed};
use crate::topology::launch_tree::LaunchTree;
use crate::transport::udp::auth::AuthKey;
use crate::transport::udp::icmp;
use crate::wire::bootstrap::BootMsg;
use crate::wire::watch::{MAX_NOTICES, WatchMsg};
use crate::wire::{DecodeError, DropCounters, HEADER_LEN, Header, WireMessage, encode_datagram, kind};

/// The watch's parameters.
#[derive(Clone, Debug)]
pub struct WatchConfig {
    pub job: u64,
    /// One overlay phase and one notice round.
    pub tick: Duration,
    /// Heartbeat period.
    pub heartbeat: Duration,
    /// A neighbour silent this long is suspected.
    pub suspect_after: Duration,
    pub key: Option<AuthKey>,
}

/// What a watching node reports. Times are µs since the Unix epoch (0: not yet), to compare
/// the processes of one machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchReport {
    pub rank: Rank,
    /// Processes known dead, in the order learned.
    pub dead: Vec<Rank>,
    /// This node's first own detection, and by what ("heartbeat" or "icmp").
    pub detected_unix_us: u64,
    pub detected_by: String,
    /// When the last of `dead` was learned (detected here or by a notice).
    pub learned_unix_us: u64,
    /// The most notice rounds a death took to reach this node (0: all detected here).
    pub notice_rounds: u32,
    /// When `legitimate` last became true.
    pub legit_unix_us: u64,
    /// Are `Succ`, `Pred`, `CW`, `CCW` those of the legitimate BMG over the survivors?
    pub legitimate: bool,
    pub survivors: u32,
    pub succ: Option<Rank>,
    pub pred: Option<Rank>,
    pub cw: Vec<Option<Rank>>,
    pub ccw: Vec<Option<Rank>>,
    pub sent: u64,
    pub received: u64,
    /// Datagrams and notices dropped as invalid.
    pub dropped: u64,
    /// Notices naming this node (it is alive: a false suspicion).
    pub false_suspicions: u64,
}

struct Watch {
    cfg: WatchConfig,
    rank: Rank,
    n: u32,
    sock: UdpSocket,
    addrs: Vec<SocketAddrV4>,
    overlay: BmgOverlay,
    mended: Mended,
    notices: FailureNotices,
    out: Vec<(Rank, OverlayMsg)>,
    last_heard: Vec<Instant>,
    watched: Vec<bool>,
    buf: Vec<u8>,
    /// Receive buffer: room for the largest datagram of the watch or of a late bootstrap.
    rbuf: Vec<u8>,
    drops: DropCounters,
    bad_mac: u64,
    report: WatchReport,
    /// (deaths known, legitimate) of the last report handed out.
    emitted: (usize, bool),
    /// Phases left during which the overlay's spontaneous rules run at every phase, quiet or
    /// not: the survivors learn a death at different times, and one that repairs late empties
    /// finger entries its quiet neighbours' introductions had filled (a refresh would repair
    /// them, `refresh` phases later). Four notice spans cover the spread.
    awake: u32,
}

impl Watch {
    fn send(&mut self, to: Rank, m: &WatchMsg) {
        if to == self.rank || self.notices.is_dead(to) {
            return;
        }
        let Some(&addr) = self.addrs.get(to as usize) else {
            return;
        };
        if let Ok(len) = encode_datagram(&mut self.buf, self.cfg.job, 0, 0, self.rank, m, &[]) {
            let d = sealed(self.cfg.key.as_ref(), &self.buf[..len]);
            // With IP_RECVERR a refusal (the ICMP of an earlier datagram to a dead peer) fails
            // the next call on the socket, and this datagram with it: once reported it is
            // cleared, so try once more.
            let mut r = self.sock.send_to(&d, addr);
            if r.as_ref().is_err_and(|e| e.kind() == ErrorKind::ConnectionRefused) {
                r = self.sock.send_to(&d, addr);
            }
            if r.is_ok() {
                self.report.sent += 1;
            }
        }
    }

    fn flush(&mut self) {
        for (to, m) in std::mem::take(&mut self.out) {
            self.send(to, &WatchMsg::Overlay(m));
        }
    }

    /// `dead` is known dead (detected or by a notice): repair the overlay around it.
    fn learned(&mut self, dead: Rank) {
        if self.mended.excise(dead).is_ok() {
            self.mended.reattach(&mut self.overlay);
            self.overlay.on_suspect(dead);
            self.awake = 4 * self.notices.span();
        }
        self.report.learned_unix_us = unix_us();
        self.report.dead = self.notices.dead().collect();
    }

    fn suspect(&mut self, p: Rank, how: &str) {
        if self.notices.suspect(p) {
            if self.report.detected_unix_us == 0 {
                self.report.detected_unix_us = unix_us();
                self.report.detected_by = how.into();
            }
            self.learned(p);
        }
    }

    /// The BMG neighbours of the current state (ring and finger tables), live ones.
    fn neighbours(&self) -> Vec<Rank> {
        let o = &self.overlay;
        let mut v: Vec<Rank> = [o.ring.succ, o.ring.pred]
            .into_iter()
            .chain(o.bmg.cw.iter().copied())
            .chain(o.bmg.ccw.iter().copied())
            .flatten()
            .filter(|&p| p != self.rank && p < self.n && !self.notices.is_dead(p))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    fn tick(&mut self, now: Instant, beat: bool) {
        self.overlay.on_phase();
        if self.awake > 0 {
            self.awake -= 1;
            self.overlay.on_suspect(self.rank);
        }
        if self.overlay.spontaneous_due() {
            let mut out = std::mem::take(&mut self.out);
            self.overlay.spontaneous(&mut out);
            self.out = out;
            self.flush();
        }
        let mut rounds = Vec::new();
        self.notices.poll(&mut rounds);
        for (to, v) in rounds {
            for chunk in v.chunks(MAX_NOTICES) {
                self.send(to, &WatchMsg::Notices(chunk.to_vec()));
            }
        }
        let current = self.neighbours();
        let mut now_watched = vec![false; self.n as usize];
        for &p in &current {
            now_watched[p as usize] = true;
            if !self.watched[p as usize] {
                self.last_heard[p as usize] = now;
            }
        }
        self.watched = now_watched;
        if beat {
            for &p in &current {
                self.send(p, &WatchMsg::Heartbeat);
            }
        }
        for p in current {
            if now.saturating_duration_since(self.last_heard[p as usize]) > self.cfg.suspect_after {
                self.suspect(p, "heartbeat");
            }
        }
        // Refused datagrams: the peer's port is closed, its process dead.
        while let Ok(r) = icmp::next_refused(&self.sock) {
            if let Some(SocketAddr::V4(a)) = r
                && let Some(p) = self.addrs.iter().position(|&x| x == a)
            {
                self.suspect(p as Rank, "icmp");
            }
        }
    }

    fn handle(&mut self, from: Rank, kind: u8, body: &[u8]) -> Result<(), DecodeError> {
        match kind {
            kind::WATCH if body.len() <= WatchMsg::MAX_BODY => match WatchMsg::decode(body, self.n)? {
                WatchMsg::Heartbeat => {
                    if !self.watched[from as usize] {
                        self.send(from, &WatchMsg::Heartbeat);
                    }
                }
                WatchMsg::Overlay(m) => self.on_overlay(from, m),
                WatchMsg::Notices(v) => {
                    for d in self.notices.on_message(from, &v) {
                        self.learned(d);
                    }
                }
            },
            // A neighbour still lingering in its bootstrap: its overlay messages count.
            kind::BOOTSTRAP if body.len() <= BootMsg::MAX_BODY => {
                if let BootMsg::Overlay(m, _) = BootMsg::decode(body, self.n)? {
                    self.on_overlay(from, m);
                }
            }
            kind::WATCH | kind::BOOTSTRAP => return Err(DecodeError::TooLarge),
            _ => return Err(DecodeError::UnknownKind),
        }
        Ok(())
    }

    fn on_overlay(&mut self, from: Rank, m: OverlayMsg) {
        if self.notices.is_dead(from) {
            return;
        }
        let mut out = std::mem::take(&mut self.out);
        self.overlay.on_message(from, m, &mut out);
        self.out = out;
        self.flush();
    }

    /// Handles datagrams until none is waiting (the socket's read timeout) or `until`.
    fn receive(&mut self, until: Instant) {
        let mut dgram = std::mem::take(&mut self.rbuf);
        while Instant::now() < until {
            let len = match self.sock.recv_from(&mut dgram) {
                Ok((len, _)) => len,
                // A refusal reported here: its details wait in the error queue.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => continue,
                Err(_) => break,
            };
            let Some(body) = opened(self.cfg.key.as_ref(), &dgram[..len]) else {
                self.bad_mac += 1;
                continue;
            };
            let r = Header::decode(body, self.cfg.job, self.n)
                .and_then(|(h, b, _)| self.handle(h.sender, h.kind, b).map(|()| h.sender));
            match r {
                Ok(from) => {
                    self.report.received += 1;
                    self.last_heard[from as usize] = Instant::now();
                }
                Err(e) => self.drops.count(e),
            }
        }
        self.rbuf = dgram;
    }

    /// Hands out a report when the deaths known or the verdict changed.
    fn check(&mut self, emit: &mut dyn FnMut(&WatchReport)) {
        let known = self.report.dead.len();
        if known == 0 {
            return;
        }
        let legit = self.mended.legitimate(&self.overlay);
        if (known, legit) == self.emitted {
            return;
        }
        self.emitted = (known, legit);
        let r = &mut self.report;
        r.legitimate = legit;
        if legit {
            r.legit_unix_us = unix_us();
        }
        r.survivors = self.mended.survivors();
        r.notice_rounds = r
            .dead
            .iter()
            .filter_map(|&d| self.notices.learned(d))
            .map(|(_, age)| age.map_or(0, |a| u32::from(a) + 1))
            .max()
            .unwrap_or(0);
        r.succ = self.overlay.ring.succ;
        r.pred = self.overlay.ring.pred;
        r.cw = self.overlay.bmg.cw.clone();
        r.ccw = self.overlay.bmg.ccw.clone();
        let (bad, about_me) = self.notices.dropped();
        r.dropped = self.drops.total() + self.bad_mac + bad + self.overlay.dropped();
        r.false_suspicions = about_me;
        emit(r);
    }
}

/// Watches a booted node of a job of `n` until `stop` is set, handing reports to `emit`.
pub fn watch(
    b: Booted,
    n: u32,
    cfg: &WatchConfig,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(&WatchReport),
) -> Result<(), String> {
    if b.addrs.len() != n as usize {
        return Err("the watch needs the complete address table".into());
    }
    let rank = b.report.rank;
    let tree = LaunchTree::from_tree(&launch_tree(n)?);
    icmp::enable(&b.sock, false);
    b.sock
        .set_read_timeout(Some(cfg.tick.max(Duration::from_micros(100))))
        .map_err(|e| format!("socket: {e}"))?;
    let start = Instant::now();
    let mut w = Watch {
        cfg: cfg.clone(),
        rank,
        n,
        notices: FailureNotices::new(rank, &tree.ring_order(), n),
        mended: Mended::new(&tree),
        sock: b.sock,
        addrs: b.addrs,
        overlay: b.overlay,
        out: Vec::new(),
        // Neighbours still lingering in their bootstrap send no heartbeat yet: one more
        // timeout of grace.
        last_heard: vec![start + cfg.suspect_after; n as usize],
        watched: vec![false; n as usize],
        buf: vec![0u8; HEADER_LEN + WatchMsg::MAX_BODY],
        rbuf: vec![0u8; HEADER_LEN + WatchMsg::MAX_BODY.max(BootMsg::MAX_BODY) + 64],
        drops: DropCounters::default(),
        bad_mac: 0,
        report: WatchReport {
            rank,
            ..WatchReport::default()
        },
        emitted: (0, false),
        awake: 0,
    };
    let mut next_tick = start;
    let mut next_beat = start;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= next_tick {
            next_tick = now + cfg.tick;
            let beat = now >= next_beat;
            if beat {
                next_beat = now + cfg.heartbeat;
            }
            w.tick(now, beat);
        }
        w.receive(next_tick);
        w.check(emit);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::bootstrap::{boot_keep, loopback_threads};
    use std::sync::{Arc, Mutex};

    #[test]
    fn a_silent_node_is_suspected_by_heartbeats_and_the_overlay_repaired() {
        let n = 6u32;
        let frozen = 2u32;
        let (_, boots) = loopback_threads(n, |c| c.linger = Duration::from_millis(100), boot_keep);
        let mut booted: Vec<Option<Booted>> = boots.into_iter().map(|b| Some(b.unwrap())).collect();
        // The frozen node keeps its socket open (no ICMP) and sends nothing: only the
        // heartbeats' silence tells.
        let _frozen = booted[frozen as usize].take();
        let stop = Arc::new(AtomicBool::new(false));
        let latest: Arc<Mutex<Vec<Option<WatchReport>>>> = Arc::new(Mutex::new(vec![None; n as usize]));
        let cfg = WatchConfig {
            job: 77,
            tick: Duration::from_millis(1),
            heartbeat: Duration::from_millis(10),
            suspect_after: Duration::from_millis(300),
            key: None,
        };
        let watchers: Vec<_> = booted
            .into_iter()
            .flatten()
            .map(|b| {
                let (stop, latest, cfg) = (Arc::clone(&stop), Arc::clone(&latest), cfg.clone());
                std::thread::spawn(move || {
                    let r = b.report.rank as usize;
                    watch(b, n, &cfg, &stop, &mut |rep| {
                        latest.lock().unwrap()[r] = Some(rep.clone())
                    })
                })
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(15);
        let done = || {
            let l = latest.lock().unwrap();
            (0..n as usize)
                .filter(|&r| r != frozen as usize)
                .all(|r| l[r].as_ref().is_some_and(|x| x.legitimate && x.dead == [frozen]))
        };
        while !done() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
        for w in watchers {
            w.join().unwrap().unwrap();
        }
        assert!(done(), "{:?}", latest.lock().unwrap());
        let l = latest.lock().unwrap();
        let reps: Vec<&WatchReport> = l.iter().flatten().collect();
        assert!(reps.iter().any(|r| r.detected_by == "heartbeat"));
        assert!(reps.iter().all(|r| r.detected_by != "icmp" && r.survivors == n - 1));
        assert!(
            reps.iter().all(|r| r.dropped == 0 && r.false_suspicions == 0),
            "{reps:?}"
        );
    }
}
