//! A booted process's watch as one sans-IO [`Machine`]: the BMG overlay kept legitimate
//! (Algorithms 1 and 2, [`BmgOverlay`]), failure notices spread with Han–Finkel's
//! `Disseminate` ([`FailureNotices`]) and the repair of the overlay on every death learned
//! ([`Mended`]). The simulator's repair and the runtime's watch
//! ([`crate::runtime::watch`]) are the same steps.
//!
//! Events: [`Event::Timer`] is one scheduler phase and one notice round (every `tick`); a
//! message is an overlay message or a round's notices; [`Event::Suspect`] is this process's
//! own failure detector's verdict about a neighbour ([`WatchMachine::neighbours`] are the
//! peers to watch). Outputs: every death learned ([`Learned`]), detected here or by a notice.
//!
//! After a death the overlay's spontaneous rules run at every phase, quiet or not, for four
//! notice spans: the survivors learn a death at different times, and one that repairs late
//! empties finger entries its quiet neighbours' introductions had filled (a refresh would
//! repair them, `refresh` phases later).

use std::collections::VecDeque;
use std::convert::Infallible;

use super::Guarded;
use super::bmg_overlay::{BmgOverlay, OverlayMsg};
use super::failure_notice::{FailureNotices, Notice};
use super::repair::Mended;
use crate::protocol::machine::{Event, Machine};
use crate::protocol::{Rank, Time};
use crate::topology::launch_tree::LaunchTree;

/// The most notices one message carries.
pub const MAX_NOTICES: usize = 1024;

/// A watch message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchMsg {
    /// "I am alive", to a BMG neighbour: the failure detector's, handled by the driver
    /// ([`crate::protocol::detector::Detector::pinged`]); the machine ignores it.
    Heartbeat,
    /// An overlay message (Algorithms 1 and 2 repairing the overlay).
    Overlay(OverlayMsg),
    /// Failure notices of one round (at most [`MAX_NOTICES`]).
    Notices(Vec<Notice>),
}

/// A death learned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Learned {
    pub dead: Rank,
    /// By this process's own detector (else by a notice).
    pub detected: bool,
}

/// One process's watch.
#[derive(Clone, Debug)]
pub struct WatchMachine {
    rank: Rank,
    n: u32,
    overlay: BmgOverlay,
    mended: Mended,
    notices: FailureNotices,
    out: VecDeque<(Rank, WatchMsg)>,
    scratch: Vec<(Rank, OverlayMsg)>,
    rounds: Vec<(Rank, Vec<Notice>)>,
    learned: VecDeque<Learned>,
    /// Phases left during which the spontaneous rules run at every phase.
    awake: u32,
    tick: Time,
    next_tick: Time,
}

impl WatchMachine {
    /// Process `rank` of the launch tree `tree` (of `n` processes) with its overlay state,
    /// one phase every `tick` from `now` on (the first one at `now`).
    pub fn new(rank: Rank, n: u32, tree: &LaunchTree, overlay: BmgOverlay, tick: Time, now: Time) -> Self {
        Self {
            rank,
            n,
            overlay,
            mended: Mended::new(tree),
            notices: FailureNotices::new(rank, &tree.ring_order(), n),
            out: VecDeque::new(),
            scratch: Vec::new(),
            rounds: Vec::new(),
            learned: VecDeque::new(),
            awake: 0,
            tick: tick.max(1),
            next_tick: now,
        }
    }

    /// The overlay's state.
    pub fn overlay(&self) -> &BmgOverlay {
        &self.overlay
    }

    /// The launch tree mended so far and the legitimate overlay over the survivors.
    pub fn mended(&self) -> &Mended {
        &self.mended
    }

    /// The failure notices (deaths known, how and when learned, drops).
    pub fn notices(&self) -> &FailureNotices {
        &self.notices
    }

    /// Is this process's overlay state the legitimate one over the survivors?
    pub fn legitimate(&self) -> bool {
        self.mended.legitimate(&self.overlay)
    }

    /// The peers to watch: the live BMG neighbours of the current state (ring and finger
    /// tables), ascending, into `out`.
    pub fn neighbours(&self, out: &mut Vec<Rank>) {
        let o = &self.overlay;
        out.clear();
        out.extend(
            [o.ring.succ, o.ring.pred]
                .into_iter()
                .chain(o.bmg.cw.iter().copied())
                .chain(o.bmg.ccw.iter().copied())
                .flatten()
                .filter(|&p| p != self.rank && p < self.n && !self.notices.is_dead(p)),
        );
        out.sort_unstable();
        out.dedup();
    }

    /// One scheduler phase and one notice round.
    fn phase(&mut self) {
        self.overlay.on_phase();
        if self.awake > 0 {
            self.awake -= 1;
            self.overlay.on_suspect(self.rank);
        }
        if self.overlay.spontaneous_due() {
            self.overlay.spontaneous(&mut self.scratch);
            self.queue_overlay();
        }
        self.notices.poll(&mut self.rounds);
        for (to, v) in self.rounds.drain(..) {
            for chunk in v.chunks(MAX_NOTICES) {
                self.out.push_back((to, WatchMsg::Notices(chunk.to_vec())));
            }
        }
    }

    fn queue_overlay(&mut self) {
        self.out
            .extend(self.scratch.drain(..).map(|(to, m)| (to, WatchMsg::Overlay(m))));
    }

    /// `dead` is known dead (detected or by a notice): repair the overlay around it.
    fn learned(&mut self, dead: Rank, detected: bool) {
        if self.mended.excise(dead).is_ok() {
            self.mended.reattach(&mut self.overlay);
            self.overlay.on_suspect(dead);
            self.awake = 4 * self.notices.span();
        }
        self.learned.push_back(Learned { dead, detected });
    }
}

impl Machine for WatchMachine {
    type Msg = WatchMsg;
    type Input = Infallible;
    type Output = Learned;
    type Error = Infallible;

    fn handle(&mut self, now: Time, ev: Event<WatchMsg, Infallible>) -> Result<(), Infallible> {
        match ev {
            Event::Timer => {
                if now >= self.next_tick {
                    self.next_tick = now + self.tick;
                    self.phase();
                }
            }
            Event::Message { from, msg } => match msg {
                WatchMsg::Heartbeat => {}
                WatchMsg::Overlay(m) => {
                    if !self.notices.is_dead(from) {
                        self.overlay.on_message(from, m, &mut self.scratch);
                        self.queue_overlay();
                    }
                }
                WatchMsg::Notices(v) => {
                    for d in self.notices.on_message(from, &v) {
                        self.learned(d, false);
                    }
                }
            },
            Event::Suspect(p) => {
                if self.notices.suspect(p) {
                    self.learned(p, true);
                }
            }
            Event::Input(i) => match i {},
        }
        Ok(())
    }

    /// Messages to this process itself or to a process known dead are dropped here.
    fn poll_transmit(&mut self, _now: Time) -> Option<(Rank, WatchMsg)> {
        while let Some((to, m)) = self.out.pop_front() {
            if to != self.rank && to < self.n && !self.notices.is_dead(to) {
                return Some((to, m));
            }
        }
        None
    }

    fn poll_timeout(&self) -> Option<Time> {
        Some(self.next_tick)
    }

    fn poll_output(&mut self) -> Option<Learned> {
        self.learned.pop_front()
    }
}

#[cfg(test)]
mod tests;
