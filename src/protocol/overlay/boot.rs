//! The bootstrap as a sans-IO [`Machine`] (`docs/overlay.md`): a process given only its rank,
//! the job's size and its launch-tree parent's address builds the ring and the BMG with the
//! BMG paper's Algorithms 1 and 2 ([`BmgOverlay`]), then runs Han–Finkel's `Disseminate` over
//! the BMG's clockwise links as an all-gather of `(rank, address)`, so that every process ends
//! with the whole address table after `⌈log n⌉` rounds, without a coordinator.
//!
//! Knowledge-based model (BMG paper §3.1): a process sends only to processes whose address it
//! has learned, from its parent's address given at launch, from the source of a datagram
//! (handed in by its driver as [`Learn`]), or from the address an overlay message carries with
//! the process it names ([`BootMsg`]). The launch tree is the binomial tree over ranks, so a
//! process knows its children's ranks, not their addresses, until they say hello. The
//! addresses learned are the machine's state and its output ([`BootOutput::Learned`]): a
//! driver's transport sends only to those.
//!
//! One [`Event::Timer`] is one overlay phase (every `tick`): the phase, a hello to the parent
//! until it has been heard from, the overlay's spontaneous rules when due, and the re-sends
//! of the all-gather's round messages, backing off from one phase to 64 (datagrams may be
//! lost: the overlay repairs itself by its refreshes). Han–Finkel's rounds are emulated:
//! round `r` is sent to `CW[r]` (the process `2^r` ahead on the ring), and the process moves
//! to round `r + 1` once it holds round `r` from `CCW[r]`.

use std::collections::VecDeque;
use std::net::SocketAddrV4;

use crate::protocol::machine::{Event, Machine};
use crate::protocol::overlay::Guarded;
use crate::protocol::overlay::bmg_overlay::{BmgOverlay, OverlayMsg};
use crate::protocol::overlay::han_finkel::run_len;
use crate::protocol::overlay::ring_to_bmg::{BmgMsg, levels};
use crate::protocol::{Rank, Time};

/// A bootstrap datagram's body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BootMsg {
    /// A child announces itself to its parent (its address is the datagram's source).
    Hello,
    /// An overlay message and the address of the process it names.
    Overlay(OverlayMsg, SocketAddrV4),
    /// Round `round` of the all-gather: every entry the sender knows.
    Round {
        round: u8,
        entries: Vec<(u32, SocketAddrV4)>,
    },
}

/// The process an overlay message names (`ident`), whose address goes with it.
pub fn named(m: &OverlayMsg) -> u32 {
    match m {
        OverlayMsg::Ring(r) => r.ident(),
        OverlayMsg::Bmg(BmgMsg::Up { ident, .. } | BmgMsg::Dn { ident, .. }) => *ident,
    }
}

/// The input: `rank`'s address, seen as the source of one of its datagrams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Learn(pub Rank, pub SocketAddrV4);

/// What the bootstrap tells its driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootOutput {
    /// An address learned (or changed): the transport may send to `rank` now.
    Learned(Rank, SocketAddrV4),
    /// `Succ` and `Pred` are set.
    Ring,
    /// Every finger-table level is set (the all-gather starts).
    Bmg,
    /// The all-gather's last round was received.
    Gather,
    /// The address table is complete.
    Table,
}

/// A message waiting for [`Machine::poll_transmit`]: overlay messages get the address of the
/// process they name when they leave (what was learned meanwhile counts).
enum Queued {
    Ready(Rank, BootMsg),
    Overlay(Rank, OverlayMsg),
}

/// One process's bootstrap.
pub struct BootMachine {
    n: u32,
    parent: Option<Rank>,
    /// One phase, in the driver's time unit.
    tick: Time,
    next_tick: Time,
    addrs: Vec<Option<SocketAddrV4>>,
    overlay: BmgOverlay,
    heard_parent: bool,
    scratch: Vec<(Rank, OverlayMsg)>,
    queue: VecDeque<Queued>,
    /// All-gather: the round we are in (None: not started), the messages received per round.
    round: Option<u32>,
    inbox: Vec<Option<Vec<(u32, SocketAddrV4)>>>,
    /// Round messages sent: destination, message, phases until the next re-send, and the
    /// current back-off (doubling up to 64 phases).
    sent_rounds: Vec<(Rank, BootMsg, u32, u32)>,
    outputs: VecDeque<BootOutput>,
    /// Milestones reached: ring, BMG, all-gather, table.
    reached: [bool; 4],
    /// Messages not sent because an address they need was not known yet.
    unknown_destination: u64,
}

impl BootMachine {
    /// Process `rank` of `n` at `me`, its launch-tree `parent` at `parent_addr` (both `None`
    /// for the root), with its launch-tree `children`; a phase every `tick`, a refresh of a
    /// quiet overlay every `refresh` phases. The first phase is due at time 0.
    pub fn new(
        rank: Rank,
        n: u32,
        me: SocketAddrV4,
        parent: Option<(Rank, SocketAddrV4)>,
        children: Vec<Rank>,
        tick: Time,
        refresh: u32,
    ) -> Self {
        let mut addrs = vec![None; n as usize];
        addrs[rank as usize] = Some(me);
        if let Some((p, a)) = parent {
            addrs[p as usize] = Some(a);
        }
        let parent = parent.map(|(p, _)| p);
        Self {
            n,
            parent,
            tick: tick.max(1),
            next_tick: 0,
            addrs,
            overlay: BmgOverlay::new(rank, n, parent, children, refresh),
            heard_parent: false,
            scratch: Vec::new(),
            queue: VecDeque::new(),
            round: None,
            inbox: vec![None; run_len(n) as usize],
            sent_rounds: Vec::new(),
            outputs: VecDeque::new(),
            reached: [false; 4],
            unknown_destination: 0,
        }
    }

    /// The address table, by rank (`None`: not learned yet).
    pub fn addrs(&self) -> &[Option<SocketAddrV4>] {
        &self.addrs
    }

    /// The overlay's state.
    pub fn overlay(&self) -> &BmgOverlay {
        &self.overlay
    }

    /// The overlay, kept for what runs after the bootstrap.
    pub fn into_overlay(self) -> BmgOverlay {
        self.overlay
    }

    /// Is the table complete and the all-gather over?
    pub fn done(&self) -> bool {
        self.reached[2] && self.reached[3]
    }

    /// Have the ring and the BMG been built?
    pub fn milestones(&self) -> (bool, bool) {
        (self.reached[0], self.reached[1])
    }

    /// Messages not sent because an address they needed was unknown.
    pub fn unknown_destination(&self) -> u64 {
        self.unknown_destination
    }

    fn learn(&mut self, rank: Rank, a: SocketAddrV4) {
        if let Some(slot) = self.addrs.get_mut(rank as usize)
            && *slot != Some(a)
        {
            *slot = Some(a);
            self.outputs.push_back(BootOutput::Learned(rank, a));
        }
    }

    fn overlay_out(&mut self) {
        for (to, m) in self.scratch.drain(..) {
            self.queue.push_back(Queued::Overlay(to, m));
        }
    }

    /// One phase.
    fn phase(&mut self) {
        self.overlay.on_phase();
        if let Some(p) = self.parent
            && !self.heard_parent
        {
            self.queue.push_back(Queued::Ready(p, BootMsg::Hello));
        }
        if self.overlay.spontaneous_due() {
            self.overlay.spontaneous(&mut self.scratch);
            self.overlay_out();
        }
        for (to, m, wait, backoff) in &mut self.sent_rounds {
            *wait -= 1;
            if *wait == 0 {
                self.queue.push_back(Queued::Ready(*to, m.clone()));
                *backoff = (*backoff * 2).min(64);
                *wait = *backoff;
            }
        }
    }

    fn reach(&mut self, i: usize, out: BootOutput) {
        if !self.reached[i] {
            self.reached[i] = true;
            self.outputs.push_back(out);
        }
    }

    /// Records milestones and advances the all-gather.
    fn progress(&mut self) {
        let ring = self.overlay.ring.pred.is_some() && self.overlay.ring.succ.is_some();
        if ring {
            self.reach(0, BootOutput::Ring);
        }
        let l = levels(self.n);
        let bmg = ring && (0..l).all(|k| self.overlay.bmg.cw[k].is_some() && self.overlay.bmg.ccw[k].is_some());
        if bmg && !self.reached[1] {
            self.reach(1, BootOutput::Bmg);
            self.round = Some(0);
            self.start_round(0);
        }
        let len = run_len(self.n);
        while let Some(r) = self.round
            && r < len
            && let Some(entries) = self.inbox[r as usize].take()
        {
            for (rank, a) in entries {
                self.learn(rank, a);
            }
            self.round = Some(r + 1);
            if r + 1 < len {
                self.start_round(r + 1);
            }
        }
        if self.round.is_some_and(|r| r >= len) {
            self.reach(2, BootOutput::Gather);
        }
        if self.addrs.iter().all(Option::is_some) {
            self.reach(3, BootOutput::Table);
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
        self.queue.push_back(Queued::Ready(to, m.clone()));
        self.sent_rounds.push((to, m, 1, 1));
    }

    fn known(&self, r: Rank) -> bool {
        self.addrs.get(r as usize).is_some_and(Option::is_some)
    }
}

impl Machine for BootMachine {
    type Msg = BootMsg;
    type Input = Learn;
    type Output = BootOutput;
    type Error = std::convert::Infallible;

    fn handle(&mut self, now: Time, ev: Event<BootMsg, Learn>) -> Result<(), Self::Error> {
        match ev {
            Event::Timer => {
                if now >= self.next_tick {
                    self.next_tick = now + self.tick;
                    self.phase();
                }
            }
            Event::Input(Learn(rank, a)) => self.learn(rank, a),
            Event::Message { from, msg } => {
                if Some(from) == self.parent {
                    self.heard_parent = true;
                }
                match msg {
                    BootMsg::Hello => {}
                    BootMsg::Overlay(m, a) => {
                        self.learn(named(&m), a);
                        self.overlay.on_message(from, m, &mut self.scratch);
                        self.overlay_out();
                    }
                    BootMsg::Round { round, entries } => {
                        let r = usize::from(round);
                        if r < self.inbox.len() && self.inbox[r].is_none() {
                            self.inbox[r] = Some(entries);
                        }
                    }
                }
            }
            // The bootstrap has no failure detector: losses are repaired, not suspected.
            Event::Suspect(_) => {}
        }
        self.progress();
        Ok(())
    }

    fn poll_transmit(&mut self, _now: Time) -> Option<(Rank, BootMsg)> {
        while let Some(q) = self.queue.pop_front() {
            let (to, m) = match q {
                Queued::Ready(to, m) => (to, m),
                Queued::Overlay(to, m) => match self.addrs.get(named(&m) as usize).copied().flatten() {
                    Some(a) => (to, BootMsg::Overlay(m, a)),
                    None => {
                        self.unknown_destination += 1;
                        continue;
                    }
                },
            };
            if self.known(to) {
                return Some((to, m));
            }
            self.unknown_destination += 1;
        }
        None
    }

    fn poll_timeout(&self) -> Option<Time> {
        Some(self.next_tick)
    }

    fn poll_output(&mut self) -> Option<BootOutput> {
        self.outputs.pop_front()
    }
}

#[cfg(test)]
mod tests;
