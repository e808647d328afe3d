//! Corrected Gossip (Hoefler et al.): GOS (gossip only, §IV.B.1), OCG (opportunistic,
//! §III.B, Algorithm 1), CCG (checked, §III.C, Algorithm 2) and FCG (failure-proof with SOS,
//! §III.D, Algorithm 3). The gossip phase runs until virtual time `T`; correction starts at
//! `T + L + O` on every g-node and uses the ring correction of
//! [`crate::protocol::bcast::correction`], beginning with a forward message (§III.C).

use serde::Serialize;

use crate::model::{LogGP, Time};
use crate::protocol::bcast::correction::{CorrMsg, CorrParams, Correction, Corrector, Dir};
use crate::protocol::bcast::gossip::{GossipParams, GossipState};
use crate::protocol::bcast::{corr_label, corr_phase};
use crate::protocol::{Action, Ctx, Message, Phase, ProtoRng, Protocol, Rank, SharedInfo, VTime, vtime};

/// Which corrected-gossip algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Variant {
    /// GOS: gossip until `T`, no correction.
    Gos,
    /// OCG: opportunistic correction for `c` time units (Claim 2).
    Ocg { c: Time },
    /// CCG: checked correction.
    Ccg,
    /// FCG: failure-proof correction tolerating `f` failures during the operation.
    Fcg { f: u32 },
}

impl Variant {
    /// OCG's sends within its correction time `C`: `S = (C - L - O) / O` (Claim 2:
    /// `C = K·O + L + O` covers a gap of K); LogGP: `S = (C − (hop − slot)) / slot`.
    fn ocg_sends(c: Time, logp: LogGP) -> u64 {
        c.saturating_sub(logp.hop().saturating_sub(logp.slot())) / logp.slot().max(1)
    }

    /// The ring correction the variant uses. OCG alternates its `S` sends starting forward
    /// (Algorithm 1 lines 8–11): `⌈S / 2⌉` forward, the distance given here, and
    /// `⌊S / 2⌋` backward, see [`Variant::ocg_backward`].
    pub fn correction(&self, logp: impl Into<LogGP>) -> Correction {
        let logp: LogGP = logp.into();
        match *self {
            Variant::Gos => Correction::None,
            Variant::Ocg { c } => Correction::Opportunistic {
                d: Self::ocg_sends(c, logp).div_ceil(2).min(u64::from(u32::MAX)) as u32,
            },
            Variant::Ccg => Correction::Checked,
            Variant::Fcg { f } => Correction::FailProof { f },
        }
    }

    /// OCG: backward messages, `⌊S / 2⌋` (Algorithm 1: the forward send comes first).
    pub fn ocg_backward(&self, logp: impl Into<LogGP>) -> Option<u32> {
        let logp: LogGP = logp.into();
        match *self {
            Variant::Ocg { c } => Some((Self::ocg_sends(c, logp) / 2).min(u64::from(u32::MAX)) as u32),
            _ => None,
        }
    }
}

/// Configuration shared by all processes of a corrected-gossip broadcast.
#[derive(Clone, Debug)]
pub struct GossipShared {
    pub variant: Variant,
    /// OCG: the backward share of its sends, `⌊S / 2⌋` (`None` for the other variants).
    pub ocg_backward: Option<u32>,
    pub gossip: GossipParams,
    pub corr: CorrParams,
}

impl GossipShared {
    /// A configuration for `n` processes gossiping until `t`.
    pub fn new(n: u32, logp: impl Into<LogGP>, t: Time, variant: Variant) -> Self {
        let logp: LogGP = logp.into();
        let gossip = GossipParams { t, logp };
        let corr = CorrParams {
            kind: variant.correction(logp),
            first: Dir::Fwd,
            o: logp.slot(),
            delay: 0,
            // FCG line 14: c-nodes wait before SOS. A g-node needs at most a full loop of the
            // ring (2n sends) to find f + 1 g-nodes on each side: wait that long.
            idle_when_stopped: true,
            sos_timeout: 2 * Time::from(n) * logp.slot() + 2 * logp.hop(),
        };
        Self {
            variant,
            ocg_backward: variant.ocg_backward(logp),
            gossip,
            corr,
        }
    }
}

impl SharedInfo for GossipShared {
    fn sync_correction_start(&self) -> Option<Time> {
        (self.variant != Variant::Gos).then_some(self.gossip.end())
    }
}

/// A corrected-gossip message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GossipMsg<const C: usize> {
    /// A gossip message sent at the sender's virtual time `vt`.
    Gossip { vt: VTime },
    /// Ring correction.
    Corr(CorrMsg<C>),
}

impl<const C: usize> Message for GossipMsg<C> {
    fn phase(&self) -> Phase {
        match self {
            GossipMsg::Gossip { .. } => Phase::Dissemination,
            GossipMsg::Corr(c) => corr_phase(c),
        }
    }
    fn label(&self) -> &'static str {
        match self {
            GossipMsg::Gossip { .. } => "gossip",
            GossipMsg::Corr(c) => corr_label(c),
        }
    }
}

/// One process of GOS / OCG / CCG / FCG.
#[derive(Clone, Debug)]
pub struct CorrectedGossip<const C: usize> {
    gossip: GossipState,
    corr: Corrector<C>,
}

impl<const C: usize> Protocol for CorrectedGossip<C> {
    type Shared = GossipShared;
    type Msg = GossipMsg<C>;

    fn new(_cx: &Ctx<'_, GossipShared>) -> Self {
        Self {
            gossip: GossipState::default(),
            corr: Corrector::new(),
        }
    }

    fn start(&mut self, cx: &Ctx<'_, GossipShared>) {
        if cx.rank == 0 {
            self.gossip.start_root();
            self.corr.colored_by_dissemination();
        }
    }

    fn on_message(&mut self, cx: &Ctx<'_, GossipShared>, from: Rank, msg: &GossipMsg<C>) {
        let s = cx.shared;
        match msg {
            GossipMsg::Gossip { vt } => {
                // Only an uncolored process becomes a g-node (c-nodes stay c-nodes).
                if !self.corr.delivered() && !self.corr.is_cnode() && self.gossip.on_gossip(&s.gossip, Time::from(*vt))
                {
                    self.corr.colored_by_dissemination();
                }
            }
            GossipMsg::Corr(c) => {
                self.corr.on_message(&s.corr, cx.rank, cx.n, cx.now, from, c);
            }
        }
    }

    fn poll_send(&mut self, cx: &Ctx<'_, GossipShared>, rng: &mut ProtoRng) -> Action<GossipMsg<C>> {
        let s = cx.shared;
        if self.corr.is_participant() {
            match self.gossip.poll(&s.gossip, cx.rank, cx.n, rng) {
                Some(Action::Send { to, msg }) => {
                    return Action::Send {
                        to,
                        msg: GossipMsg::Gossip { vt: vtime(msg) },
                    };
                }
                Some(Action::Sleep(t)) => return Action::Sleep(t),
                _ => {
                    self.corr.start(&s.corr, cx.n, cx.now);
                    if let Some(b) = s.ocg_backward {
                        self.corr.limit_offsets(Dir::Bwd, b);
                    }
                }
            }
        }
        self.corr.poll(&s.corr, cx.rank, cx.n).map(GossipMsg::Corr)
    }

    fn on_timer(&mut self, cx: &Ctx<'_, GossipShared>) {
        self.corr.on_timer(&cx.shared.corr, cx.rank, cx.n, cx.now);
    }

    fn next_timer(&self) -> Option<Time> {
        self.corr.next_timer()
    }

    fn delivered(&self) -> bool {
        self.corr.delivered()
    }

    fn colored_by_dissemination(&self) -> bool {
        self.corr.is_participant()
    }

    fn finished(&self, cx: &Ctx<'_, GossipShared>) -> bool {
        let gossip_over = !self.corr.is_participant() || self.gossip.vt >= cx.shared.gossip.end();
        gossip_over && self.corr.finished()
    }
}

#[cfg(test)]
mod tests;
