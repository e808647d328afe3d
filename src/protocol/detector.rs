//! The heartbeat failure detector, sans-IO: one per process, beside its protocol machine
//! ([`crate::protocol::machine`]), used alike by agreement (ERA §2: "the local failure detector
//! monitors only the processes appearing in its neighborhood") and by the overlay's watch
//! (the BMG neighbours).
//!
//! The driver tells it what it heard ([`Detector::heard`]: any valid datagram is a sign of
//! life; [`Detector::pinged`]: a heartbeat, so the sender watches this process) and what it
//! sent ([`Detector::sent`]: any message doubles as a heartbeat), and calls
//! [`Detector::check`] with the peers the protocol wants watched (its neighbours) every so
//! often, at least every `heartbeat / 4` or so. The check queues, in this order per peer:
//! - a suspicion ([`Detector::poll_suspect`]) for a watched peer silent for its bound (a peer
//!   newly watched is timed from the check that first watches it, not from whenever it last
//!   happened to send something);
//! - otherwise a heartbeat ([`Detector::poll_beat`]) to a watched peer, or to a peer that
//!   pinged this one within `suspect_after` (those who watch this process hear from it too,
//!   their views may differ from this one's), when nothing was sent to it for `heartbeat`;
//!   a watched peer that this process spoke to last, silent for `heartbeat / 2` since, gets
//!   one then already (it owes a word: a neighbour that died while this process waits on it
//!   is found half a period sooner).
//!
//! A peer never heard from is not one that went silent: its process may not have started
//! yet. ERA assumes a detector that suspects only dead processes (§2, "only dead processes
//! are suspected at any time"), which heartbeats give only once the suspect had a chance to
//! send its first one. Where processes start independently (a group of processes, each
//! starting its member once it has the group's table), the driver gives a start window
//! ([`Detector::expect_starts`]): until it ends, a watched peer not heard from since this
//! detector began is not suspected however long it was watched; after it, or once the peer
//! has spoken, the rules below apply as ever. Without a window (the benchmarks' nodes, which
//! start together) nothing changes.
//!
//! The bound adapts per peer, as phi-accrual detectors do with the inter-arrival times they
//! observe: it is [`GAP_FACTOR`] × the longest gap between two datagrams of that watched peer
//! seen recently (a decaying maximum, halved every [`GAP_HALF_LIFE`] × `suspect_after`), never
//! below `suspect_after` (a peer never seen slow is suspected exactly as before) nor above
//! [`GAP_CEILING`] × `suspect_after` (a dead peer is still suspected in bounded time). A peer
//! that stalled close to `suspect_after` once and came back (a descheduled process on a loaded
//! machine) is given room at its next stall instead of being suspected falsely.
//!
//! Times are the driver's, in any unit (nanoseconds since its start in the runtime); the
//! detector reads no clock.

use std::collections::VecDeque;

use crate::protocol::{Rank, Time};

/// A watched peer is suspected once silent `GAP_FACTOR` × its longest recent gap (at least
/// `suspect_after`): twice the worst silence it recovered from.
pub const GAP_FACTOR: u64 = 2;
/// The learned gap halves every `GAP_HALF_LIFE` × `suspect_after` (a stall is remembered for
/// a few hundred suspicion periods: seconds to minutes at the runtime's periods).
pub const GAP_HALF_LIFE: u64 = 256;
/// However slow a peer was, it is suspected after `GAP_CEILING` × `suspect_after` of silence.
pub const GAP_CEILING: u64 = 8;

/// The detector's periods, in the driver's time unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DetectorConfig {
    /// A peer owed a heartbeat gets one when nothing was sent to it for this long.
    pub heartbeat: Time,
    /// A watched peer silent this long is suspected: the floor of the adaptive bound
    /// ([`Detector::bound`]).
    pub suspect_after: Time,
}

/// One process's heartbeat failure detector over `n` peers.
#[derive(Clone, Debug)]
pub struct Detector {
    cfg: DetectorConfig,
    last_heard: Vec<Time>,
    /// Per peer, the longest gap between two of its datagrams while watched, and when it
    /// ended (the learned gap, decaying).
    gap: Vec<(Time, Time)>,
    last_sent: Vec<Time>,
    /// When each peer last sent this process a heartbeat (it watches this process).
    pinged: Vec<Option<Time>>,
    /// When each peer was last probed ([`Detector::probe`]).
    probed: Vec<Option<Time>>,
    /// Per peer, whether its current silence was already forgiven by a [`Detector::rest`]
    /// (cleared when it is heard from).
    forgiven: Vec<bool>,
    /// The peers watched at the last check.
    watching: Vec<Rank>,
    /// Per peer, whether anything came from it since this detector began.
    spoke: Vec<bool>,
    /// Until then, a peer that has not spoken is not suspected ([`Detector::expect_starts`]).
    starting_until: Time,
    suspects: VecDeque<Rank>,
    beats: VecDeque<Rank>,
}

impl Detector {
    /// A detector over ranks `0..n`, everyone heard from and sent to at `now`.
    pub fn new(n: u32, cfg: DetectorConfig, now: Time) -> Self {
        Self {
            cfg,
            last_heard: vec![now; n as usize],
            gap: vec![(0, now); n as usize],
            last_sent: vec![now; n as usize],
            pinged: vec![None; n as usize],
            probed: vec![None; n as usize],
            forgiven: vec![false; n as usize],
            watching: Vec::new(),
            spoke: vec![false; n as usize],
            starting_until: 0,
            suspects: VecDeque::new(),
            beats: VecDeque::new(),
        }
    }

    /// The detector's periods.
    pub fn config(&self) -> DetectorConfig {
        self.cfg
    }

    /// Heartbeats from now on every `heartbeat` (a process with nothing in flight beats
    /// slower; the suspicion bound, `suspect_after`, is unchanged, so it must stay well above
    /// the slowest period its peers use).
    pub fn set_heartbeat(&mut self, heartbeat: Time) {
        self.cfg.heartbeat = heartbeat;
    }

    /// The peers start independently of this process, within `until` (the driver's time): a
    /// watched peer that has not spoken yet is not suspected before then, but a peer that went
    /// silent after it spoke is, as ever (see the module's doc: a process never heard from
    /// may still be starting, ERA §2's detector suspects only dead ones).
    pub fn expect_starts(&mut self, until: Time) {
        self.starting_until = until;
    }

    /// `peer` was last heard at `at` by a layer below (its transport: a datagram held behind
    /// a gap, or a retransmission, is a sign of life it delivers nothing for yet): as
    /// [`Detector::heard`] if that is later than what this detector last heard.
    #[inline]
    pub fn heard_below(&mut self, peer: Rank, at: Time) {
        if self.last_heard.get(peer as usize).is_some_and(|&t| at > t) {
            self.heard(peer, at);
        }
    }

    /// A valid datagram came from `peer`: if it is watched, the silence it ends is a gap
    /// its bound learns from.
    #[inline]
    pub fn heard(&mut self, peer: Rank, now: Time) {
        let p = peer as usize;
        let Some(&last) = self.last_heard.get(p) else {
            return;
        };
        // (A first word within the start window ends a start, not a gap.)
        let starting = !self.spoke[p] && now < self.starting_until;
        if self.watching.contains(&peer) && !starting {
            let gap = now.saturating_sub(last);
            if gap > self.learned(p, now) {
                self.gap[p] = (gap, now);
            }
        }
        self.last_heard[p] = now;
        self.forgiven[p] = false;
        self.spoke[p] = true;
    }

    /// The gap learned for peer `p`, decayed to `now`.
    #[inline]
    fn learned(&self, p: usize, now: Time) -> Time {
        let (gap, at) = self.gap[p];
        let half = self.cfg.suspect_after.saturating_mul(GAP_HALF_LIFE).max(1);
        let since = now.saturating_sub(at);
        // (Most calls come within one half-life: no division on every datagram heard.)
        if since < half {
            return gap;
        }
        let halvings = since / half;
        if halvings >= 64 { 0 } else { gap >> halvings }
    }

    /// How long `peer` may be silent at `now` before it is suspected: [`GAP_FACTOR`] × its
    /// learned gap, within `[suspect_after, GAP_CEILING × suspect_after]`.
    pub fn bound(&self, peer: Rank, now: Time) -> Time {
        let floor = self.cfg.suspect_after;
        let learned = if (peer as usize) < self.gap.len() {
            self.learned(peer as usize, now)
        } else {
            0
        };
        learned
            .saturating_mul(GAP_FACTOR)
            .clamp(floor, floor.saturating_mul(GAP_CEILING).max(floor))
    }

    /// A heartbeat came from `peer`: it watches this process.
    pub fn pinged(&mut self, peer: Rank, now: Time) {
        if let Some(t) = self.pinged.get_mut(peer as usize) {
            *t = Some(now);
        }
    }

    /// Something was sent to `peer`.
    pub fn sent(&mut self, peer: Rank, now: Time) {
        if let Some(t) = self.last_sent.get_mut(peer as usize) {
            *t = now;
        }
    }

    /// Everyone counts as heard from at `now` (the process starts or resumes).
    pub fn reset(&mut self, now: Time) {
        self.last_heard.iter_mut().for_each(|t| *t = now);
        self.forgiven.iter_mut().for_each(|f| *f = false);
    }

    /// The driver was not running for a while (e.g. descheduled), and the silence of others
    /// during that time says little about them: a peer heard from since it was last forgiven
    /// counts as heard from at `now`. A silence is forgiven once: a peer still silent at the
    /// next rest is timed from the rest that forgave it. Otherwise a process that is
    /// descheduled between every two of its passes (two busy-polling processes taking turns
    /// on a core, a scheduler tick each) would never suspect anyone: a fenced parent was
    /// never suspected by its child, whose agreement then waited for the 5 s operation
    /// timeout (`agree --procs --nodes 4 --suspect-ms 1` on 2 cores).
    pub fn rest(&mut self, now: Time) {
        for (t, f) in self.last_heard.iter_mut().zip(&mut self.forgiven) {
            if !*f {
                *t = now;
                *f = true;
            }
        }
    }

    /// Checks the peers in `watched` (distinct ranks, without this process) and those that
    /// pinged this process recently; queues suspicions and heartbeats. `skip(p)`: no
    /// heartbeat to `p` now (e.g. data already waits for it, a heartbeat would only queue).
    pub fn check(&mut self, now: Time, watched: &[Rank], skip: impl Fn(Rank) -> bool) {
        for &p in watched {
            if !self.watching.contains(&p) {
                // Timed from now (nothing heard: this peer has not spoken any more than before).
                self.last_heard[p as usize] = now;
                self.forgiven[p as usize] = false;
            }
        }
        self.watching.clear();
        self.watching.extend_from_slice(watched);
        let after = self.cfg.suspect_after;
        for &p in watched {
            let silent = now.saturating_sub(self.last_heard[p as usize]);
            let starting = now < self.starting_until && !self.spoke[p as usize];
            if silent >= self.bound(p, now) && !starting {
                self.suspects.push_back(p);
            } else if self.owes_word(p, now, silent) && !skip(p) {
                self.beats.push_back(p);
            } else {
                self.beat_if_due(p, now, &skip);
            }
        }
        for p in 0..self.pinged.len() as Rank {
            if self.pinged[p as usize].is_some_and(|t| now.saturating_sub(t) < after) && !watched.contains(&p) {
                self.beat_if_due(p, now, &skip);
            }
        }
    }

    /// A watched peer owes this process a word: this process spoke to it last (a reply sent
    /// in the pass that heard it, as a parent's decision answering the last contribution, is
    /// last too: the driver stamps both with the pass's time), and since then both have been
    /// silent for half a heartbeat period. It gets its heartbeat early: a
    /// neighbour that fell silent while this one waits on it is the one that may have died,
    /// and the heartbeat finds out (the transport's closed-port signal answers it at once)
    /// about half a period sooner than the regular one would, and the other neighbours of
    /// the dead process, which last heard from it at about the same time, find out with it.
    /// A peer that spoke last is not owed one early, so two idle peers still exchange about
    /// one heartbeat per period each.
    fn owes_word(&self, p: Rank, now: Time, silent: Time) -> bool {
        let half = self.cfg.heartbeat / 2;
        let sent = self.last_sent[p as usize];
        sent >= self.last_heard[p as usize] && silent >= half && now.saturating_sub(sent) >= half
    }

    fn beat_if_due(&mut self, p: Rank, now: Time, skip: &impl Fn(Rank) -> bool) {
        if !skip(p) && now.saturating_sub(self.last_sent[p as usize]) >= self.cfg.heartbeat {
            self.beats.push_back(p);
        }
    }

    /// The driver has reason to doubt peer `p` (its machine's [`crate::protocol::Machine::poll_doubt`]:
    /// a message came around it): whether to send it a heartbeat now, a probe, rather than
    /// wait for the next check's. A dead peer's transport answers a probe at once where it
    /// can (a closed port's refusal, a gone endpoint, an error completion), which is a
    /// suspicion as any other; a live one takes it as a heartbeat. At most one probe per
    /// peer every `heartbeat / 4` (a doubt repeated by every message that comes around the
    /// same peer is one probe).
    pub fn probe(&mut self, p: Rank, now: Time) -> bool {
        let Some(last) = self.probed.get_mut(p as usize) else {
            return false;
        };
        if last.is_some_and(|t| now.saturating_sub(t) < self.cfg.heartbeat / 4) {
            return false;
        }
        *last = Some(now);
        true
    }

    /// The next peer suspected by the last check.
    pub fn poll_suspect(&mut self) -> Option<Rank> {
        self.suspects.pop_front()
    }

    /// The next peer owed a heartbeat by the last check (the driver sends it and calls
    /// [`Detector::sent`]).
    pub fn poll_beat(&mut self) -> Option<Rank> {
        self.beats.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: DetectorConfig = DetectorConfig {
        heartbeat: 10,
        suspect_after: 100,
    };

    fn drain(d: &mut Detector) -> (Vec<Rank>, Vec<Rank>) {
        let s = std::iter::from_fn(|| d.poll_suspect()).collect();
        let b = std::iter::from_fn(|| d.poll_beat()).collect();
        (s, b)
    }

    /// A doubted peer is probed at once, then at most once every quarter heartbeat (10 / 4
    /// here), each peer on its own; a rank out of range never.
    #[test]
    fn a_doubted_peer_is_probed_at_most_once_a_quarter_period() {
        let mut d = Detector::new(4, CFG, 0);
        assert!(d.probe(2, 100));
        assert!(!d.probe(2, 101), "probed a moment ago");
        assert!(d.probe(3, 101), "another peer");
        assert!(d.probe(2, 102));
        assert!(!d.probe(4, 103), "out of range");
        assert_eq!(
            drain(&mut d),
            (vec![], vec![]),
            "a probe is the driver's heartbeat, not the check's"
        );
    }

    #[test]
    fn a_silent_watched_peer_is_suspected_and_a_talking_one_is_not() {
        let mut d = Detector::new(4, CFG, 0);
        d.check(0, &[1, 2], |_| false);
        assert_eq!(drain(&mut d), (vec![], vec![]), "sent to everyone at 0");
        for t in (10..=100).step_by(10) {
            d.heard(1, t);
            d.check(t, &[1, 2], |_| false);
            let (s, b) = drain(&mut d);
            for &p in &b {
                d.sent(p, t);
            }
            if t < 100 {
                assert!(s.is_empty(), "{t}");
                assert_eq!(b, [1, 2], "{t}: both watched peers are owed a heartbeat");
            } else {
                assert_eq!(s, [2], "silent for suspect_after");
                assert_eq!(b, [1], "no heartbeat to the suspect");
            }
        }
    }

    #[test]
    fn a_watched_peer_spoken_to_last_gets_its_heartbeat_after_half_a_period_of_silence() {
        let cfg = DetectorConfig {
            heartbeat: 100,
            suspect_after: 1000,
        };
        let mut d = Detector::new(4, cfg, 0);
        d.check(0, &[1, 2], |_| false);
        // Peer 1 answered this process's last message; peer 2 did not (it owes a word): this
        // process heard it and answered in the same pass, at 10.
        d.sent(1, 10);
        d.heard(1, 12);
        d.heard(2, 10);
        d.sent(2, 10);
        d.check(59, &[1, 2], |_| false);
        assert_eq!(drain(&mut d), (vec![], vec![]), "less than half a period");
        d.check(60, &[1, 2], |_| false);
        assert_eq!(
            drain(&mut d),
            (vec![], vec![2]),
            "half a period: only the one owing a word"
        );
        d.sent(2, 60);
        d.check(109, &[1, 2], |_| false);
        assert_eq!(drain(&mut d), (vec![], vec![]), "one early heartbeat per half period");
        d.check(110, &[1, 2], |_| false);
        assert_eq!(drain(&mut d), (vec![], vec![1, 2]), "the regular period for the other");
        // A pinger this process does not watch gets only the regular heartbeats.
        let mut d = Detector::new(4, cfg, 0);
        d.pinged(3, 5);
        d.sent(3, 10);
        d.check(80, &[], |_| false);
        assert_eq!(drain(&mut d), (vec![], vec![]));
        // Nor does a skipped peer.
        let mut d = Detector::new(4, cfg, 0);
        d.check(0, &[2], |_| false);
        d.sent(2, 10);
        d.check(60, &[2], |p| p == 2);
        assert_eq!(drain(&mut d), (vec![], vec![]));
    }

    #[test]
    fn a_newly_watched_peer_is_timed_from_its_first_check() {
        let mut d = Detector::new(4, CFG, 0);
        d.check(500, &[3], |_| false);
        let (s, _) = drain(&mut d);
        assert!(s.is_empty(), "not watched before 500: no verdict on the time before");
        d.check(599, &[3], |_| false);
        assert!(drain(&mut d).0.is_empty());
        d.check(600, &[3], |_| false);
        assert_eq!(drain(&mut d).0, [3]);
        // Resting forgives the silence.
        d.rest(600);
        d.check(650, &[3], |_| false);
        assert!(drain(&mut d).0.is_empty());
    }

    #[test]
    fn a_peer_not_heard_from_yet_is_not_suspected_within_the_start_window() {
        // Peers may start until 1000; 1 and 2 are watched from 0.
        let mut d = Detector::new(4, CFG, 0);
        d.expect_starts(1_000);
        d.check(0, &[1, 2], |_| false);
        // 2 speaks at 50 and then goes silent: suspected as ever, window or not. 1, which has
        // not spoken, is not, however long watched, and still gets its heartbeats.
        d.heard(2, 50);
        d.check(150, &[1, 2], |_| false);
        assert_eq!(drain(&mut d), (vec![2], vec![1]));
        d.check(999, &[1], |_| false);
        assert_eq!(drain(&mut d).0, Vec::<Rank>::new());
        // At the window's end, a peer that never spoke is suspected.
        d.check(1_000, &[1], |_| false);
        assert_eq!(drain(&mut d).0, [1]);
        // A late first word ends a start, not a gap: nothing learned, the bound stays the
        // floor, and from then on the peer is timed as any other.
        let mut d = Detector::new(4, CFG, 0);
        d.expect_starts(1_000);
        d.check(0, &[1], |_| false);
        d.heard(1, 700);
        assert_eq!(d.bound(1, 700), 100);
        d.check(799, &[1], |_| false);
        assert!(drain(&mut d).0.is_empty());
        d.check(800, &[1], |_| false);
        assert_eq!(
            drain(&mut d).0,
            [1],
            "silent suspect_after after it spoke, in the window"
        );
        // Without a window (the default), a peer that never spoke is suspected at the bound.
        let mut d = Detector::new(4, CFG, 0);
        d.check(0, &[1], |_| false);
        d.check(100, &[1], |_| false);
        assert_eq!(drain(&mut d).0, [1]);
    }

    #[test]
    fn a_silence_is_forgiven_once_however_often_the_process_rests() {
        let mut d = Detector::new(4, CFG, 0);
        d.check(0, &[1, 2], |_| false);
        // The process rests at every pass (descheduled between passes): peer 2, which
        // speaks between the rests, is forgiven each time; peer 1, dead, only at the first.
        for t in (60..=300).step_by(60) {
            d.heard(2, t - 10);
            d.rest(t);
            d.check(t, &[1, 2], |_| false);
            let (s, _) = drain(&mut d);
            if t < 160 {
                assert!(s.is_empty(), "{t}");
            } else {
                assert_eq!(s, [1], "{t}: silent for suspect_after since the rest that forgave it");
                break;
            }
        }
        // A reset (a start or a resume) counts everyone as heard, and the next rest forgives
        // again.
        d.reset(1_000);
        d.rest(1_090);
        d.check(1_150, &[1], |_| false);
        assert!(drain(&mut d).0.is_empty());
        d.check(1_190, &[1], |_| false);
        assert_eq!(drain(&mut d).0, [1]);
    }

    #[test]
    fn a_peer_that_came_back_from_a_long_gap_gets_room_at_its_next() {
        let mut d = Detector::new(4, CFG, 0);
        d.check(0, &[1, 2], |_| false);
        // Peer 1 is silent 90 (under suspect_after), then speaks: learned, its bound is 180.
        // Peer 2 speaks every 45: its bound stays suspect_after.
        d.heard(1, 90);
        d.heard(2, 45);
        d.heard(2, 90);
        assert_eq!((d.bound(1, 90), d.bound(2, 90)), (180, 100));
        // Both are silent 150 next: only 2, never seen slow, is suspected.
        d.check(240, &[1, 2], |_| false);
        assert_eq!(drain(&mut d).0, [2]);
        // 1 is dead from 90 on: suspected at 90 + 180.
        d.check(269, &[1], |_| false);
        assert!(drain(&mut d).0.is_empty());
        d.check(270, &[1], |_| false);
        assert_eq!(drain(&mut d).0, [1]);
        // The learned gap fades (halved every GAP_HALF_LIFE × suspect_after) back to the floor.
        assert_eq!(d.bound(1, 90 + GAP_HALF_LIFE * 100), 100);
    }

    #[test]
    fn the_bound_has_a_ceiling_and_only_watched_peers_teach_it() {
        let mut d = Detector::new(4, CFG, 0);
        // Peer 3 not watched: its silence (it had no reason to speak) teaches nothing.
        d.heard(3, 5_000);
        assert_eq!(d.bound(3, 5_000), 100);
        d.check(5_000, &[1], |_| false);
        // A huge gap of a watched peer (the detector's own process stalled, say): capped.
        d.heard(1, 50_000);
        assert_eq!(d.bound(1, 50_000), GAP_CEILING * 100);
        d.check(50_000 + GAP_CEILING * 100, &[1], |_| false);
        assert_eq!(drain(&mut d).0, [1], "a dead peer is suspected within the ceiling");
    }

    #[test]
    fn pingers_get_heartbeats_while_recent_and_skipped_or_busy_peers_do_not() {
        let mut d = Detector::new(4, CFG, 0);
        d.pinged(3, 5);
        d.check(20, &[1], |p| p == 1);
        assert_eq!(drain(&mut d), (vec![], vec![3]), "1 is skipped, 3 pinged");
        d.sent(3, 20);
        d.check(25, &[1], |_| false);
        assert_eq!(drain(&mut d), (vec![], vec![1]), "3 was sent to 5 units ago");
        d.check(105, &[1], |_| false);
        assert_eq!(drain(&mut d).1, [1], "3's ping is older than suspect_after");
    }
}
