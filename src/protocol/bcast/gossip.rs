//! The gossip phase shared by GOS and the corrected-gossip algorithms (Corrected Gossip §III.A,
//! Algorithm 1 lines 1–6), and GOS itself (§IV.B.1): each colored process sends the payload to
//! a uniformly random other process every `O` until virtual time `T`; messages carry the
//! sender's virtual time, so that every process stops at `T` without a clock.

use crate::model::{LogGP, Time};
use crate::protocol::{Action, ProtoRng, Rank};

/// Gossip-phase parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GossipParams {
    /// No gossip message is sent at virtual time `T` or later.
    pub t: Time,
    /// LogP/LogGP parameters for the counted time (a hop `logp.hop()`, a send `logp.slot()`).
    pub logp: LogGP,
}

impl GossipParams {
    /// When the correction phase starts: `T + L + O`, once every gossip message has arrived;
    /// in LogGP `T + hop − slot` (the last send's slot ends at `T`), which is `T + L + O` for
    /// LogP.
    pub fn end(&self) -> Time {
        self.t + self.logp.hop().saturating_sub(self.logp.slot())
    }
}

/// One process's gossip-phase state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GossipState {
    /// Colored by a gossip message (or the root): a g-node.
    pub colored: bool,
    /// The process's virtual time.
    pub vt: Time,
}

impl GossipState {
    /// The root starts gossiping at virtual time 0.
    pub fn start_root(&mut self) {
        self.colored = true;
        self.vt = 0;
    }

    /// A gossip message sent at virtual time `vt` arrived; returns true if it colors us.
    pub fn on_gossip(&mut self, p: &GossipParams, vt: Time) -> bool {
        if self.colored {
            return false;
        }
        self.colored = true;
        // Algorithm 1 line 4: the receiver's time is the send time plus L/O + 1 steps of O
        // (the send's own O, the latency, the receive's O).
        self.vt = vt + p.logp.hop();
        true
    }

    /// The next gossip action: `Some(Send)` while before `T`, a counted wait until the
    /// correction start, or `None` once the gossip phase is over for this process.
    pub fn poll(&mut self, p: &GossipParams, me: Rank, n: Rank, rng: &mut ProtoRng) -> Option<Action<Time>> {
        if !self.colored {
            return None;
        }
        if self.vt < p.t && n > 1 {
            let vt = self.vt;
            self.vt += p.logp.slot();
            return Some(Action::Send {
                to: rng.other_than(me, n),
                msg: vt,
            });
        }
        if self.vt < p.end() {
            let wait = p.end() - self.vt;
            self.vt = p.end();
            return Some(Action::Sleep(wait));
        }
        None
    }
}
