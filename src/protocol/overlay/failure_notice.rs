//! Failure notices spread by Han–Finkel's fault-tolerant `Disseminate` (Han–Finkel §3): a
//! process that learns a peer dead (its failure detector) disseminates a notice naming it, so
//! that every live process learns it in `⌈log m⌉ + 2` rounds, even if one more process is
//! failed (before or during the spread; see the guarantee below for exactly what holds).
//!
//! The notice about `d` is disseminated over the members (the legitimate ring's order, known to
//! every process once the BMG is built) without `d`: every holder of the notice knows `d` dead,
//! so all of them agree on that pattern of `m` machines, in which only a process failing
//! during the spread is a failed machine — Theorem 2's single fault, tolerated by forwarding
//! for `⌈log m⌉ + 2` rounds. Round `r` of a holder at index `i` of the pattern goes to
//! `(i + 2^(r mod ⌈log m⌉)) mod m` (§2's `Disseminate`; `r mod ⌈log m⌉ = 0` for `r = 0`, so
//! every notice starts at round 0 of its run, Theorem 2's case 1).
//!
//! Rounds are counted, not clocked (`docs/architecture.md`, decision 3): a notice carries its age, the round
//! it was sent in, counted from its first sending. A holder sends the notice of age `a` once
//! for every `a` after the age it received (the origin from age 0), one more age per
//! [`FailureNotices::poll`] — so in a synchronous system this is `Disseminate` exactly. In an
//! asynchronous one a copy may arrive older than one already held: the holder then also sends
//! the earlier ages it missed, so every message the synchronous run sends is sent (reach is
//! monotone in the messages delivered, so this reaches at least what `Disseminate` reaches).
//! Several processes detecting the same death each start the notice; copies merge by age.
//!
//! **The guarantee** (Han–Finkel Theorems 1 and 2 applied to one notice's pattern, and no
//! more): the notice about `d`, started by any one detector, reaches every live member within
//! `⌈log m⌉ + 2` rounds of its first sending if *at most one* machine of its pattern fails —
//! a member other than `d` that is dead before the notice starts (already dead processes stay
//! members: the pattern is the members without `d` only, so that all holders agree on it) or
//! that dies during the spread. With two or more failed machines there is no bound: a live
//! member can miss the notice for good. Smallest case: members `0..5`, `0` dead and detected
//! by `1`, `2` and `3` dead too: the pattern is `[1, 2, 3, 4]`, `1` sends to indices `+1` and
//! `+2` alternately, both dead, and `4` never learns that `0` died. More detectors (every BMG
//! neighbour of `d` detects it) make a miss rarer but are not part of the guarantee.
//! Tests: `sim::notices::tests::one_failed_machine_before_or_during_the_spread_is_tolerated`
//! and `several_dead_plus_one_dying_is_beyond_the_guarantee`.

use crate::protocol::Rank;
use crate::protocol::overlay::han_finkel::{destination, run_len};

/// One notice in a message: `dead` is dead, sent at round `age` of its dissemination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Notice {
    pub dead: Rank,
    pub age: u8,
}

/// A notice held: the ages still to send (`lo..span`, those in `sent` done, none above `upto`
/// yet), and when and how it was learned.
#[derive(Clone, Copy, Debug)]
struct Held {
    dead: Rank,
    lo: u8,
    upto: u8,
    sent: u64,
    /// The round (count of polls) at which it was learned here.
    learned: u64,
    /// Age of the copy that taught it (`None`: detected here).
    via_age: Option<u8>,
}

/// One process's failure notices.
#[derive(Clone, Debug)]
pub struct FailureNotices {
    me: Rank,
    /// The members in ring order, and each identifier's index (`None`: not a member).
    members: Vec<Rank>,
    pos: Vec<Option<u32>>,
    held: Vec<Held>,
    rounds: u64,
    dropped: u64,
    about_me: u64,
}

impl FailureNotices {
    /// Process `me` among `members` (ring order; identifiers below `ids`).
    pub fn new(me: Rank, members: &[Rank], ids: u32) -> Self {
        let mut pos = vec![None; ids as usize];
        for (i, &p) in members.iter().enumerate() {
            if let Some(slot) = pos.get_mut(p as usize) {
                *slot = Some(i as u32);
            }
        }
        Self {
            me,
            members: members.to_vec(),
            pos,
            held: Vec::new(),
            rounds: 0,
            dropped: 0,
            about_me: 0,
        }
    }

    /// Machines of the pattern that spreads the notice about `dead`: the members but `dead`.
    fn machines(&self) -> u32 {
        (self.members.len() as u32).saturating_sub(1)
    }

    /// Rounds a notice is forwarded: `⌈log m⌉ + 2` (Theorem 2), `m` the machines of its
    /// pattern.
    pub fn span(&self) -> u32 {
        let m = self.machines();
        if m <= 1 { 0 } else { run_len(m) + 2 }
    }

    /// Polls so far (rounds of this process).
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// Notices dropped as invalid (identifiers, ages), and those naming this process (a false
    /// suspicion: it is not in the pattern of its own notice and does not forward it).
    pub fn dropped(&self) -> (u64, u64) {
        (self.dropped, self.about_me)
    }

    /// The processes known dead, in the order learned.
    pub fn dead(&self) -> impl Iterator<Item = Rank> + '_ {
        self.held.iter().map(|h| h.dead)
    }

    /// Is `p` known dead?
    pub fn is_dead(&self, p: Rank) -> bool {
        self.held.iter().any(|h| h.dead == p)
    }

    /// The round at which `dead`'s notice was learned here, and the age of the copy that
    /// taught it (`None`: detected here).
    pub fn learned(&self, dead: Rank) -> Option<(u64, Option<u8>)> {
        self.held
            .iter()
            .find(|h| h.dead == dead)
            .map(|h| (h.learned, h.via_age))
    }

    /// Is every notice held forwarded for its whole span?
    pub fn idle(&self) -> bool {
        let span = self.span() as u8;
        self.held
            .iter()
            .all(|h| (h.lo..span).all(|a| h.sent & (1u64 << a) != 0))
    }

    fn member(&self, p: Rank) -> bool {
        self.pos.get(p as usize).copied().flatten().is_some()
    }

    /// The failure detector says `dead` is dead: start its notice at the next round. False if
    /// already known, not a member, or this process itself.
    pub fn suspect(&mut self, dead: Rank) -> bool {
        if dead == self.me || !self.member(dead) || self.is_dead(dead) {
            return false;
        }
        self.held.push(Held {
            dead,
            lo: 0,
            upto: 0,
            sent: 0,
            learned: self.rounds,
            via_age: None,
        });
        true
    }

    /// Notices received from `from`. Returns the processes newly learned dead.
    pub fn on_message(&mut self, from: Rank, notices: &[Notice]) -> Vec<Rank> {
        let span = self.span();
        let mut new = Vec::new();
        if !self.member(from) {
            self.dropped += notices.len() as u64;
            return new;
        }
        for n in notices {
            if !self.member(n.dead) || u32::from(n.age) >= span || n.dead == from {
                self.dropped += 1;
                continue;
            }
            if n.dead == self.me {
                self.about_me += 1;
                continue;
            }
            let next = n.age + 1;
            match self.held.iter_mut().find(|h| h.dead == n.dead) {
                Some(h) => {
                    h.lo = h.lo.min(next);
                    h.upto = h.upto.max(next);
                }
                None => {
                    self.held.push(Held {
                        dead: n.dead,
                        lo: next,
                        upto: next,
                        sent: 0,
                        learned: self.rounds,
                        via_age: Some(n.age),
                    });
                    new.push(n.dead);
                }
            }
        }
        new
    }

    /// One round: the messages to send, at most one per destination, each carrying every
    /// notice due to it (piggybacking, §2).
    pub fn poll(&mut self, out: &mut Vec<(Rank, Vec<Notice>)>) {
        let span = self.span() as u8;
        let m = self.machines();
        let me = self.pos[self.me as usize];
        for i in 0..self.held.len() {
            let h = self.held[i];
            let (Some(me), Some(d)) = (me, self.pos[h.dead as usize]) else {
                continue;
            };
            let mut sent = h.sent;
            for age in h.lo..span.min(h.upto + 1) {
                if sent & (1u64 << age) != 0 {
                    continue;
                }
                sent |= 1u64 << age;
                // Index in the pattern without `d`, and back.
                let i = me - u32::from(d < me);
                let j = destination(i, u32::from(age) % run_len(m), m);
                let to = self.members[(j + u32::from(j >= d)) as usize];
                let notice = Notice { dead: h.dead, age };
                match out.iter_mut().find(|(t, _)| *t == to) {
                    Some((_, v)) => v.push(notice),
                    None => out.push((to, vec![notice])),
                }
            }
            let h = &mut self.held[i];
            h.sent = sent;
            h.upto = h.upto.saturating_add(1).min(span);
        }
        self.rounds += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(all: &mut [FailureNotices]) -> Vec<(Rank, Rank, Vec<Notice>)> {
        let mut msgs = Vec::new();
        for (p, x) in all.iter_mut().enumerate() {
            let mut out = Vec::new();
            x.poll(&mut out);
            msgs.extend(out.into_iter().map(|(to, v)| (p as Rank, to, v)));
        }
        msgs
    }

    #[test]
    fn the_origin_sends_disseminates_pattern_without_the_dead() {
        // Members 0..6 in ring order, 2 dead: the pattern is [0, 1, 3, 4, 5], m = 5, span 5.
        let members: Vec<Rank> = (0..6).collect();
        let mut p = FailureNotices::new(1, &members, 6);
        assert_eq!(p.span(), 5);
        assert!(p.suspect(2) && !p.suspect(2) && !p.suspect(1) && !p.suspect(9));
        let mut dests = Vec::new();
        for _ in 0..6 {
            let mut out = Vec::new();
            p.poll(&mut out);
            assert!(out.len() <= 1);
            dests.extend(out.into_iter().map(|(to, v)| (to, v[0].age)));
        }
        // Index 1 sends to indices 2, 3, 0 (+1, +2, +4 mod 5), then +1, +2 again.
        assert_eq!(dests, [(3, 0), (4, 1), (0, 2), (3, 3), (4, 4)]);
        assert!(p.idle());
    }

    #[test]
    fn a_receiver_forwards_the_later_ages_and_catches_up_on_older_copies() {
        let members: Vec<Rank> = (0..8).collect();
        let mut p = FailureNotices::new(4, &members, 8);
        assert_eq!(p.on_message(3, &[Notice { dead: 0, age: 2 }]), [0]);
        assert_eq!(p.learned(0), Some((0, Some(2))));
        let mut out = Vec::new();
        p.poll(&mut out);
        assert_eq!(out.iter().map(|(_, v)| v[0].age).collect::<Vec<_>>(), [3]);
        // An older copy: ages 1 and 2 are due as well (sent with the next round's).
        assert!(p.on_message(2, &[Notice { dead: 0, age: 0 }]).is_empty());
        out.clear();
        p.poll(&mut out);
        let mut ages: Vec<u8> = out.iter().flat_map(|(_, v)| v.iter().map(|n| n.age)).collect();
        ages.sort_unstable();
        assert_eq!(ages, [1, 2, 4]);
    }

    #[test]
    fn invalid_notices_are_dropped_and_counted() {
        let members: Vec<Rank> = (0..8).collect();
        let mut p = FailureNotices::new(4, &members, 10);
        let span = p.span() as u8;
        assert!(p.on_message(9, &[Notice { dead: 0, age: 0 }]).is_empty());
        assert!(p.on_message(3, &[Notice { dead: 8, age: 0 }]).is_empty());
        assert!(p.on_message(3, &[Notice { dead: 0, age: span }]).is_empty());
        assert!(p.on_message(3, &[Notice { dead: 3, age: 0 }]).is_empty());
        assert!(p.on_message(3, &[Notice { dead: 4, age: 0 }]).is_empty());
        assert_eq!(p.dropped(), (4, 1));
        assert_eq!(p.dead().count(), 0);
    }

    #[test]
    fn everyone_learns_in_one_run_without_further_failures() {
        for n in 3..=20u32 {
            let members: Vec<Rank> = (0..n).rev().collect();
            for dead in 0..n {
                let mut all: Vec<FailureNotices> = (0..n).map(|p| FailureNotices::new(p, &members, n)).collect();
                let origin = (dead + 1) % n;
                all[origin as usize].suspect(dead);
                for _ in 0..run_len(n - 1) {
                    for (from, to, v) in round(&mut all) {
                        assert_ne!(to, dead);
                        all[to as usize].on_message(from, &v);
                    }
                }
                // Theorem 1: within ⌈log m⌉ rounds.
                for p in (0..n).filter(|&p| p != dead) {
                    assert!(all[p as usize].is_dead(dead), "n={n} dead {dead} p {p}");
                }
            }
        }
    }
}
