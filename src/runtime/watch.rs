//! A booted node's watch (failure notices and repair): after the bootstrap
//! ([`crate::runtime::bootstrap`]) the node keeps its socket, its address table and its overlay
//! state, and drives the sans-IO [`WatchMachine`] (one phase and one notice round per `tick`)
//! with the shared heartbeat [`Detector`](crate::protocol::Detector) beside it:
//! - the detector watches the BMG neighbours: a heartbeat when nothing else went to one for
//!   `heartbeat`, a neighbour silent for `suspect_after` is suspected, and so at once is a
//!   neighbour whose port draws an ICMP "port unreachable" (`IP_RECVERR`,
//!   `transport/udp/icmp.rs`; every peer answered during the bootstrap, so a refusal
//!   means its process died);
//! - the machine spreads what it suspects, and forwards what it hears, as failure notices
//!   (Han–Finkel's `Disseminate` over the members without the dead one, `⌈log m⌉ + 2`
//!   rounds), repairs the overlay on every death learned (the simulator's repair: the launch
//!   tree mended, Algorithms 1 and 2 re-run over the survivors), and tells whether its own
//!   `Succ`, `Pred`, `CW`, `CCW` are those of the legitimate BMG over the survivors.
//!
//! Each time the set of deaths known or the verdict of that check changes, the node hands a
//! [`WatchReport`] to its caller. It runs until `stop` is set.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::protocol::overlay::watch::WatchMachine;
use crate::protocol::{DetectorConfig, Event, Machine, Rank, Time};
use crate::runtime::bootstrap::socket::Sealed;
use crate::runtime::bootstrap::{Booted, launch_tree, unix_us};
use crate::runtime::driver::{Decoded, Driver, Framing, Verdict};
use crate::topology::launch_tree::LaunchTree;
use crate::transport::udp::icmp;
use crate::wire::bootstrap::BootMsg;
use crate::wire::mac::AuthKey;
use crate::wire::watch::WatchMsg;
use crate::wire::{DecodeError, HEADER_LEN, WireMessage, encode_datagram, kind};

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

/// The watch's datagrams: `WATCH` messages, and the overlay messages of a neighbour still
/// lingering in its bootstrap (`BOOTSTRAP`).
struct WatchFraming;

impl Framing for WatchFraming {
    type Msg = WatchMsg;
    const MAX_DATAGRAM: usize = HEADER_LEN + WatchMsg::MAX_BODY;

    fn decode(k: u8, body: &[u8], n: u32) -> Result<Decoded<WatchMsg>, DecodeError> {
        match k {
            kind::WATCH if body.len() <= WatchMsg::MAX_BODY => Ok(match WatchMsg::decode(body, n)? {
                WatchMsg::Heartbeat => Decoded::Heartbeat,
                m => Decoded::Msg(m),
            }),
            kind::BOOTSTRAP if body.len() <= BootMsg::MAX_BODY => Ok(match BootMsg::decode(body, n)? {
                BootMsg::Overlay(m, _) => Decoded::Msg(WatchMsg::Overlay(m)),
                _ => Decoded::Other,
            }),
            kind::WATCH | kind::BOOTSTRAP => Err(DecodeError::TooLarge),
            _ => Err(DecodeError::UnknownKind),
        }
    }

    fn encode(m: &WatchMsg, job: u64, rank: Rank, buf: &mut [u8]) -> Option<usize> {
        encode_datagram(buf, job, 0, 0, rank, m, &[]).ok()
    }

    fn heartbeat(job: u64, rank: Rank, buf: &mut [u8]) -> Option<usize> {
        Self::encode(&WatchMsg::Heartbeat, job, rank, buf)
    }
}

struct Watch {
    m: WatchMachine,
    drv: Driver<WatchFraming>,
    report: WatchReport,
    /// (deaths known, legitimate) of the last report handed out.
    emitted: (usize, bool),
}

impl Watch {
    /// One pass: receive, the phase when due, suspicions, sends.
    fn step(&mut self, now: Instant) {
        let t = self.drv.ns(now);
        self.drv.receive(&mut self.m, now);
        if self.drv.fenced_by().is_some() {
            // A peer suspected this node and fenced it: its transport stopped, it is crashed
            // (fail-stop enforcement); the others' notices carry its death.
            return;
        }
        if self.m.poll_timeout().is_some_and(|at| t >= at) {
            let Ok(()) = self.m.handle(t, Event::Timer);
        }
        self.drv.transmit(&mut self.m, now, || true);
        let m = &self.m;
        self.drv.detect(now, |nb| m.neighbours(nb));
        while let Some((p, how)) = self.drv.poll_suspect() {
            self.suspect(p, how, t);
        }
        self.drv.transmit(&mut self.m, now, || true);
        while self.m.poll_output().is_some() {
            self.report.learned_unix_us = unix_us();
            self.report.dead = self.m.notices().dead().collect();
        }
    }

    fn suspect(&mut self, p: Rank, how: Verdict, t: Time) {
        if p == self.report.rank || self.m.notices().is_dead(p) {
            return;
        }
        let Ok(()) = self.m.handle(t, Event::Suspect(p));
        if self.m.notices().is_dead(p) && self.report.detected_unix_us == 0 {
            self.report.detected_unix_us = unix_us();
            self.report.detected_by = match how {
                Verdict::Transport => "icmp",
                Verdict::Silence => "heartbeat",
                Verdict::Told => "told",
            }
            .into();
        }
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
        let stats = self.drv.tp.stats();
        (r.sent, r.received) = (stats.sent, self.drv.received);
        let (bad, about_me) = notices.dropped();
        r.dropped = self.drv.drops.total() + stats.malformed + bad + overlay.dropped();
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
    let start = Instant::now();
    let ns = |d: Duration| d.as_nanos() as Time;
    let max = HEADER_LEN + WatchMsg::MAX_BODY.max(BootMsg::MAX_BODY);
    let sock = Sealed::fixed(b.sock, b.addrs, cfg.key.clone(), cfg.job, rank, max);
    let det = DetectorConfig {
        heartbeat: ns(cfg.heartbeat),
        suspect_after: ns(cfg.suspect_after),
    };
    let mut w = Watch {
        m: WatchMachine::new(rank, n, &tree, b.overlay, ns(cfg.tick), 0),
        drv: Driver::new(Box::new(sock), cfg.job, det, start).without_grace(),
        report: WatchReport {
            rank,
            ..WatchReport::default()
        },
        emitted: (0, false),
    };
    w.drv.start(start);
    while !stop.load(Ordering::Relaxed) {
        w.step(Instant::now());
        w.check(emit);
        let next = start + Duration::from_nanos(w.m.poll_timeout().unwrap_or(0));
        let wait = next.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            let _ = w.drv.tp.wait(wait);
        }
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
