//! Corrected Gossip (Hoefler et al.): GOS (gossip only, §IV.B.1), OCG (opportunistic,
//! §III.B, Algorithm 1), CCG (checked, §III.C, Algorithm 2) and FCG (failure-proof with SOS,
//! §III.D, Algorithm 3). The gossip phase runs until virtual time `T`; correction starts at
//! `T + L + O` on every g-node and uses the ring correction of
//! [`crate::protocol::bcast::correction`], beginning with a forward message (§III.C).

use serde::Serialize;

use crate::model::{LogP, Time};
use crate::protocol::bcast::correction::{CorrMsg, CorrParams, Correction, Corrector, Dir};
use crate::protocol::bcast::gossip::{GossipParams, GossipState};
use crate::protocol::bcast::{corr_label, corr_phase};
use crate::protocol::{Action, Ctx, Message, Phase, ProtoRng, Protocol, Rank, SharedInfo};

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
    /// The ring correction the variant uses. OCG's correction time `C` allows
    /// `S = (C - L - O) / O` alternating sends (Claim 2: `C = K·O + L + O` covers a gap of K),
    /// i.e. `⌈S / 2⌉` per direction.
    pub fn correction(&self, logp: LogP) -> Correction {
        match *self {
            Variant::Gos => Correction::None,
            Variant::Ocg { c } => {
                let s = c.saturating_sub(logp.l + logp.o) / logp.o;
                Correction::Opportunistic { d: s.div_ceil(2).min(u64::from(u32::MAX)) as u32 }
            }
            Variant::Ccg => Correction::Checked,
            Variant::Fcg { f } => Correction::FailProof { f },
        }
    }
}

/// Configuration shared by all processes of a corrected-gossip broadcast.
#[derive(Clone, Debug)]
pub struct GossipShared {
    pub variant: Variant,
    pub gossip: GossipParams,
    pub corr: CorrParams,
}

impl GossipShared {
    /// A configuration for `n` processes gossiping until `t`.
    pub fn new(n: u32, logp: LogP, t: Time, variant: Variant) -> Self {
        let gossip = GossipParams { t, logp };
        let corr = CorrParams {
            kind: variant.correction(logp),
            first: Dir::Fwd,
            o: logp.o,
            delay: 0,
            // FCG line 14: c-nodes wait before SOS. A g-node needs at most a full loop of the
            // ring (2n sends) to find f + 1 g-nodes on each side: wait that long.
            idle_when_stopped: true,
            sos_timeout: 2 * Time::from(n) * logp.o + 2 * logp.hop(),
        };
        Self { variant, gossip, corr }
    }
}

impl SharedInfo for GossipShared {
    fn sync_correction_start(&self) -> Option<Time> {
        (self.variant != Variant::Gos).then_some(self.gossip.end())
    }
}

/// A corrected-gossip message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GossipMsg {
    /// A gossip message sent at the sender's virtual time `vt`.
    Gossip { vt: Time },
    /// Ring correction.
    Corr(CorrMsg),
}

impl Message for GossipMsg {
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
pub struct CorrectedGossip {
    gossip: GossipState,
    corr: Corrector,
}

impl Protocol for CorrectedGossip {
    type Shared = GossipShared;
    type Msg = GossipMsg;

    fn new(_cx: &Ctx<'_, GossipShared>) -> Self {
        Self { gossip: GossipState::default(), corr: Corrector::new() }
    }

    fn start(&mut self, cx: &Ctx<'_, GossipShared>) {
        if cx.rank == 0 {
            self.gossip.start_root();
            self.corr.colored_by_dissemination();
        }
    }

    fn on_message(&mut self, cx: &Ctx<'_, GossipShared>, from: Rank, msg: &GossipMsg) {
        let s = cx.shared;
        match msg {
            GossipMsg::Gossip { vt } => {
                // Only an uncolored process becomes a g-node (c-nodes stay c-nodes).
                if !self.corr.delivered() && !self.corr.is_cnode() && self.gossip.on_gossip(&s.gossip, *vt) {
                    self.corr.colored_by_dissemination();
                }
            }
            GossipMsg::Corr(c) => {
                self.corr.on_message(&s.corr, cx.rank, cx.n, cx.now, from, c);
            }
        }
    }

    fn poll_send(&mut self, cx: &Ctx<'_, GossipShared>, rng: &mut ProtoRng) -> Action<GossipMsg> {
        let s = cx.shared;
        if self.corr.is_participant() {
            match self.gossip.poll(&s.gossip, cx.rank, cx.n, rng) {
                Some(Action::Send { to, msg }) => return Action::Send { to, msg: GossipMsg::Gossip { vt: msg } },
                Some(Action::Sleep(t)) => return Action::Sleep(t),
                _ => self.corr.start(&s.corr, cx.rank, cx.n, cx.now),
            }
        }
        match self.corr.poll(&s.corr, cx.rank, cx.n) {
            Action::Send { to, msg } => Action::Send { to, msg: GossipMsg::Corr(msg) },
            Action::Sleep(t) => Action::Sleep(t),
            Action::Wait => Action::Wait,
        }
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
