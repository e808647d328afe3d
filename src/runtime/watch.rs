//! A booted node's watch (failure notices and repair): after the bootstrap
//! ([`crate::runtime::bootstrap`]) the node keeps its socket, its address table and its overlay
//! state, and drives the sans-IO [`WatchMachine`] (one phase and one notice round per `tick`)
//! with the shared heartbeat [`Detector`] beside it:
//! - the detector watches the BMG neighbours: a heartbeat when nothing else went to one for
//!   `heartbeat`, a neighbour silent for `suspect_after` is suspected, and so at once is a
//!   neighbour whose port draws an ICMP "port unreachable" (`IP_RECVERR`,
//!   [`crate::transport::udp::icmp`]; every peer answered during the bootstrap, so a refusal
//!   means its process died);
//! - the machine spreads what it suspects, and forwards what it hears, as failure notices
//!   (Han–Finkel's `Disseminate` over the members without the dead one, `⌈log m⌉ + 2`
//!   rounds), repairs the overlay on every death learned (the simulator's repair: the launch
//!   tree mended, Algorithms 1 and 2 re-run over the survivors), and tells whether its own
//!   `Succ`, `Pred`, `CW`, `CCW` are those of the legitimate BMG over the survivors.
//!
//! Each time the set of deaths known or the verdict of that check changes, the node hands a
//! [`WatchReport`] to its caller. It runs until `stop` is set.

use std::convert::Infallible;
use std::io::ErrorKind;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::protocol::overlay::watch::WatchMachine;
use crate::protocol::{Detector, DetectorConfig, Event, Machine, Rank, Time};
use crate::runtime::bootstrap::{Booted, launch_tree, unix_us};
use crate::runtime::control::{opened, sealed};
use crate::topology::launch_tree::LaunchTree;
use crate::transport::udp::auth::AuthKey;
use crate::transport::udp::icmp;
use crate::wire::bootstrap::BootMsg;
use crate::wire::watch::WatchMsg;
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
    /// The run's time base: the machine and the detector count nanoseconds since it.
    base: Instant,
    m: WatchMachine,
    det: Detector,
    /// The BMG neighbours at the last check (the detector watches them).
    nb: Vec<Rank>,
    buf: Vec<u8>,
    /// Receive buffer: room for the largest datagram of the watch or of a late bootstrap.
    rbuf: Vec<u8>,
    drops: DropCounters,
    bad_mac: u64,
    report: WatchReport,
    /// (deaths known, legitimate) of the last report handed out.
    emitted: (usize, bool),
}

impl Watch {
    fn ns(&self, t: Instant) -> Time {
        t.saturating_duration_since(self.base).as_nanos() as Time
    }

    fn send(&mut self, to: Rank, m: &WatchMsg, now: Time) {
        if to == self.rank || self.m.notices().is_dead(to) {
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
                self.det.sent(to, now);
            }
        }
    }

    /// Sends what the machine queued and takes in the deaths it learned.
    fn flush(&mut self, now: Time) {
        while let Some((to, m)) = self.m.poll_transmit(now) {
            self.send(to, &m, now);
        }
        while self.m.poll_output().is_some() {
            self.report.learned_unix_us = unix_us();
            self.report.dead = self.m.notices().dead().collect();
        }
    }

    /// Hands the machine an event and sends what it queued.
    fn handle(&mut self, now: Time, ev: Event<WatchMsg, Infallible>) {
        let Ok(()) = self.m.handle(now, ev);
        self.flush(now);
    }

    fn suspect(&mut self, p: Rank, how: &str, now: Time) {
        if p == self.rank || self.m.notices().is_dead(p) {
            return;
        }
        self.handle(now, Event::Suspect(p));
        if self.m.notices().is_dead(p) && self.report.detected_unix_us == 0 {
            self.report.detected_unix_us = unix_us();
            self.report.detected_by = how.into();
        }
    }

    fn tick(&mut self, now: Time) {
        self.handle(now, Event::Timer);
        self.m.neighbours(&mut self.nb);
        self.det.check(now, &self.nb, |_| false);
        while let Some(p) = self.det.poll_beat() {
            self.send(p, &WatchMsg::Heartbeat, now);
        }
        while let Some(p) = self.det.poll_suspect() {
            self.suspect(p, "heartbeat", now);
        }
        // Refused datagrams: the peer's port is closed, its process dead.
        while let Ok(r) = icmp::next_refused(&self.sock) {
            if let Some(SocketAddr::V4(a)) = r
                && let Some(p) = self.addrs.iter().position(|&x| x == a)
            {
                self.suspect(p as Rank, "icmp", now);
            }
        }
    }

    fn on_datagram(&mut self, from: Rank, kind: u8, body: &[u8], now: Time) -> Result<(), DecodeError> {
        match kind {
            kind::WATCH if body.len() <= WatchMsg::MAX_BODY => {
                let msg = WatchMsg::decode(body, self.n)?;
                if msg == WatchMsg::Heartbeat {
                    self.det.pinged(from, now);
                }
                self.handle(now, Event::Message { from, msg });
            }
            // A neighbour still lingering in its bootstrap: its overlay messages count.
            kind::BOOTSTRAP if body.len() <= BootMsg::MAX_BODY => {
                if let BootMsg::Overlay(m, _) = BootMsg::decode(body, self.n)? {
                    self.handle(
                        now,
                        Event::Message {
                            from,
                            msg: WatchMsg::Overlay(m),
                        },
                    );
                }
            }
            kind::WATCH | kind::BOOTSTRAP => return Err(DecodeError::TooLarge),
            _ => return Err(DecodeError::UnknownKind),
        }
        Ok(())
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
            let now = self.ns(Instant::now());
            let r = Header::decode(body, self.cfg.job, self.n)
                .and_then(|(h, b, _)| self.on_datagram(h.sender, h.kind, b, now).map(|()| h.sender));
            match r {
                Ok(from) => {
                    self.report.received += 1;
                    self.det.heard(from, now);
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
        let legit = self.m.legitimate();
        if (known, legit) == self.emitted {
            return;
        }
        self.emitted = (known, legit);
        let (overlay, notices) = (self.m.overlay(), self.m.notices());
        let r = &mut self.report;
        r.legitimate = legit;
        if legit {
            r.legit_unix_us = unix_us();
        }
        r.survivors = self.m.mended().survivors();
        r.notice_rounds = r
            .dead
            .iter()
            .filter_map(|&d| notices.learned(d))
            .map(|(_, age)| age.map_or(0, |a| u32::from(a) + 1))
            .max()
            .unwrap_or(0);
        r.succ = overlay.ring.succ;
        r.pred = overlay.ring.pred;
        r.cw = overlay.bmg.cw.clone();
        r.ccw = overlay.bmg.ccw.clone();
        let (bad, about_me) = notices.dropped();
        r.dropped = self.drops.total() + self.bad_mac + bad + overlay.dropped();
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
    let ns = |d: Duration| d.as_nanos() as Time;
    let mut w = Watch {
        cfg: cfg.clone(),
        rank,
        n,
        m: WatchMachine::new(rank, n, &tree, b.overlay, ns(cfg.tick), 0),
        det: Detector::new(
            n,
            DetectorConfig {
                heartbeat: ns(cfg.heartbeat),
                suspect_after: ns(cfg.suspect_after),
            },
            0,
        ),
        nb: Vec::new(),
        sock: b.sock,
        addrs: b.addrs,
        base: start,
        buf: vec![0u8; HEADER_LEN + WatchMsg::MAX_BODY],
        rbuf: vec![0u8; HEADER_LEN + WatchMsg::MAX_BODY.max(BootMsg::MAX_BODY) + 64],
        drops: DropCounters::default(),
        bad_mac: 0,
        report: WatchReport {
            rank,
            ..WatchReport::default()
        },
        emitted: (0, false),
    };
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let t = w.ns(now);
        let next = w.m.poll_timeout().unwrap_or(t);
        if t >= next {
            w.tick(t);
        }
        let next = w.m.poll_timeout().unwrap_or(t);
        w.receive(start + Duration::from_nanos(next));
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
