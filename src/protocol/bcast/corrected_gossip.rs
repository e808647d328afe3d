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
    /// The ring correction the variant uses. OCG's correction time `C` allows
    /// `S = (C - L - O) / O` alternating sends (Claim 2: `C = K·O + L + O` covers a gap of K),
    /// i.e. `⌈S / 2⌉` per direction (LogGP: `S = (C − (hop − slot)) / slot`).
    pub fn correction(&self, logp: impl Into<LogGP>) -> Correction {
        let logp: LogGP = logp.into();
        match *self {
            Variant::Gos => Correction::None,
            Variant::Ocg { c } => {
                let s = c.saturating_sub(logp.hop().saturating_sub(logp.slot())) / logp.slot().max(1);
                Correction::Opportunistic {
                    d: s.div_ceil(2).min(u64::from(u32::MAX)) as u32,
                }
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
                _ => self.corr.start(&s.corr, cx.n, cx.now),
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
mod tests {
    use super::*;
    use crate::model::LogP;
    use crate::protocol::bcast::correction::FAILPROOF_CAP;
    use crate::sim::{DeadBefore, Engine, Faults, RunStats};

    fn run(n: u32, logp: LogP, t: Time, v: Variant, faults: &Faults, seed: u64) -> RunStats {
        let shared = GossipShared::new(n, logp, t, v);
        match v {
            Variant::Fcg { .. } => {
                Engine::<CorrectedGossip<FAILPROOF_CAP>>::new(n, logp).run(&shared, faults, seed, 50_000_000)
            }
            _ => Engine::<CorrectedGossip<0>>::new(n, logp).run(&shared, faults, seed, 50_000_000),
        }
    }

    fn dead(k: u32) -> Faults {
        Faults {
            before: DeadBefore::Count(k),
            ..Faults::default()
        }
    }

    const UNIT: LogP = LogP { l: 1, o: 1 };

    #[test]
    fn gossip_stops_at_t_and_correction_starts_at_t_plus_l_plus_o() {
        for seed in 0..20 {
            let s = run(1024, UNIT, 20, Variant::Gos, &dead(0), seed);
            // Only g-nodes send, one per O before T: at most 20 from the root.
            assert!(s.max_messages_per_process <= 20);
            assert_eq!(s.correction, 0, "GOS has no correction");
            // Virtual time may lag real time by receive queueing (several gossip messages
            // arriving together), so the last receive can come a few O after T + L + O.
            assert!(s.quiescence <= 20 + 2 + 6, "quiescence {}", s.quiescence);
        }
    }

    #[test]
    fn ccg_colors_every_live_process_with_faults_before() {
        for seed in 0..50 {
            let s = run(1024, UNIT, 25, Variant::Ccg, &dead(seed as u32 * 3), seed);
            assert_eq!(s.uncolored_live, 0, "seed {seed}");
            assert!(!s.aborted);
        }
        // Even with a tiny T (few g-nodes, long gaps).
        let s = run(1024, UNIT, 3, Variant::Ccg, &dead(0), 1);
        assert_eq!(s.uncolored_live, 0);
    }

    #[test]
    fn fcg_survives_up_to_f_online_failures() {
        let logp = LogP { l: 2, o: 1 };
        for f in [1u32, 2] {
            for seed in 0..40 {
                let faults = Faults {
                    before: DeadBefore::Count(3),
                    online: f,
                    online_horizon: 60,
                    ..Faults::default()
                };
                let s = run(1024, logp, 24, Variant::Fcg { f }, &faults, seed);
                assert_eq!(s.uncolored_live, 0, "f={f} seed={seed}");
                assert!(!s.aborted, "no SOS flood expected");
            }
        }
    }

    #[test]
    fn fcg_sos_still_colors_everyone_when_gossip_reaches_nobody() {
        // T = 0: only the root is a g-node; with f = 1 it never finds f + 1 g-nodes: SOS.
        let s = run(64, UNIT, 0, Variant::Fcg { f: 1 }, &dead(0), 0);
        assert_eq!(s.uncolored_live, 0);
        assert!(s.messages >= 63 * 63, "SOS floods: {}", s.messages);
    }

    #[test]
    fn ocg_with_model_c_mostly_colors_all_and_gos_often_does_not() {
        let (mut ocg_bad, mut gos_bad) = (0, 0);
        for seed in 0..200 {
            ocg_bad += u32::from(run(1024, UNIT, 24, Variant::Ocg { c: 12 }, &dead(0), seed).uncolored_live > 0);
            gos_bad += u32::from(run(1024, UNIT, 24, Variant::Gos, &dead(0), seed).uncolored_live > 0);
        }
        assert!(ocg_bad <= 2, "OCG inconsistent in {ocg_bad}/200 runs");
        assert!(gos_bad > 100, "GOS at T=24 misses nodes in most runs: {gos_bad}/200");
    }

    #[test]
    fn ccg_counts_are_plausible_fault_free() {
        // Figure 5 neighbourhood: N = 1024, L = O = 1, T = 25: latency near T + 2L + 2O + 2K̂O.
        let mut worst = 0;
        for seed in 0..100 {
            let s = run(1024, UNIT, 25, Variant::Ccg, &dead(0), seed);
            assert_eq!(s.uncolored_live, 0);
            worst = worst.max(s.quiescence);
        }
        assert!((30..=60).contains(&worst), "worst CCG latency {worst}");
    }
}
