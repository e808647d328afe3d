//! BIG: broadcast on the binomial graph (Corrected Gossip §IV.B.3). Each process, on its first
//! receipt of the payload (the root at the start), sends it to all its forward neighbours
//! `N(p) = {p + 2^x mod P | 2^x < P}`; later copies are ignored. Static routing over
//! `⌈log2 P⌉` vertex-disjoint paths, so fewer than `⌈log2 P⌉` failures never disconnect it.
//!
//! The paper leaves the send order open; its "single binomial tree" latency needs the tree
//! edges first ([`BigOrder::TreeFirst`], the default). Plain increasing `x`
//! ([`BigOrder::Increasing`]) is slower by `o·k(k − 1)/2` for `P = 2^k`.

use crate::protocol::{Action, Ctx, Message, Phase, ProtoRng, Protocol, Rank, SharedInfo};
use crate::topology::binomial_graph::forward_neighbors;
use crate::topology::ring::forward;

/// The order in which a process sends to its neighbours `p + 2^x`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BigOrder {
    /// `x = 0, 1, …, ⌈log2 P⌉ − 1`. Each process's useful sends queue behind redundant ones:
    /// fault-free coloring takes `k(2o + L) + o·k(k − 1)/2` for `P = 2^k`.
    Increasing,
    /// Increasing `x` cyclically from `x = ⌊log2 p⌋ + 1` (the root from 0): the sends of the
    /// binomial tree embedded in the graph (parent of `p` = `p` minus its top bit) come first,
    /// the redundant ones after. Fault-free coloring equals the binomial tree's, `k(2o + L)`
    /// for `P = 2^k`, the "single binomial tree" of §IV.B.3.
    TreeFirst,
}

/// Configuration shared by all processes of a BIG broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BigShared {
    /// Number of processes `P`.
    pub n: u32,
    /// Send order of every process's neighbours.
    pub order: BigOrder,
}

impl BigShared {
    /// A BIG broadcast over `n` processes, neighbours in [`BigOrder::TreeFirst`] order.
    pub fn new(n: u32) -> Self {
        Self::with_order(n, BigOrder::TreeFirst)
    }

    /// A BIG broadcast over `n` processes with the given send order.
    pub fn with_order(n: u32, order: BigOrder) -> Self {
        Self { n, order }
    }
}

impl SharedInfo for BigShared {}

/// A BIG message: the payload along a binomial-graph edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BigMsg;

impl Message for BigMsg {
    fn phase(&self) -> Phase {
        Phase::Dissemination
    }
    fn label(&self) -> &'static str {
        "big"
    }
}

/// One process of a BIG broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Big {
    /// The payload has arrived (or this is the root).
    received: bool,
    /// Neighbours sent to so far.
    next: u32,
}

impl Big {
    /// The neighbour this process sends to next, if any is left.
    fn next_neighbor(&self, cx: &Ctx<'_, BigShared>) -> Option<Rank> {
        // |N(p)| = ⌈log2 P⌉, the same for every p.
        let k = forward_neighbors(cx.rank, cx.n).count() as u32;
        if self.next >= k {
            return None;
        }
        let first = match cx.shared.order {
            BigOrder::Increasing => 0,
            BigOrder::TreeFirst => (u32::BITS - cx.rank.leading_zeros()) % k,
        };
        Some(forward(cx.rank, 1 << ((first + self.next) % k), cx.n))
    }
}

impl Protocol for Big {
    type Shared = BigShared;
    type Msg = BigMsg;

    fn new(_cx: &Ctx<'_, BigShared>) -> Self {
        Self {
            received: false,
            next: 0,
        }
    }

    fn start(&mut self, cx: &Ctx<'_, BigShared>) {
        if cx.rank == 0 {
            self.received = true;
        }
    }

    fn on_message(&mut self, _cx: &Ctx<'_, BigShared>, _from: Rank, _msg: &BigMsg) {
        // First receipt delivers and arms the forwarding; later copies change nothing.
        self.received = true;
    }

    fn poll_send(&mut self, cx: &Ctx<'_, BigShared>, _rng: &mut ProtoRng) -> Action<BigMsg> {
        if !self.received {
            return Action::Wait;
        }
        match self.next_neighbor(cx) {
            Some(to) => {
                self.next += 1;
                Action::Send { to, msg: BigMsg }
            }
            None => Action::Wait,
        }
    }

    fn delivered(&self) -> bool {
        self.received
    }

    fn colored_by_dissemination(&self) -> bool {
        self.received
    }

    fn finished(&self, cx: &Ctx<'_, BigShared>) -> bool {
        self.received && self.next_neighbor(cx).is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LogP, Time};
    use crate::sim::{DeadBefore, Engine, Faults, RunStats};
    use crate::topology::{Order, Tree, TreeKind};

    fn run(n: u32, logp: LogP, faults: &Faults, seed: u64) -> RunStats {
        let s = Engine::<Big>::new(n, logp).run(&BigShared::new(n), faults, seed, 100_000_000);
        assert!(!s.aborted, "n={n} seed={seed}: aborted at the event cap");
        s
    }

    fn log2_ceil(n: u32) -> u32 {
        if n <= 1 { 0 } else { u32::BITS - (n - 1).leading_zeros() }
    }

    #[test]
    fn fault_free_colors_everyone_with_p_times_degree_messages() {
        let logp = LogP::default();
        for n in (1..=70).chain([100, 255, 256, 1000, 4096]) {
            let s = run(n, logp, &Faults::default(), 1);
            assert_eq!(s.uncolored_live, 0, "n={n}");
            let degree: u64 = (0..n).map(|p| forward_neighbors(p, n).count() as u64).sum();
            assert_eq!(degree, u64::from(n) * u64::from(log2_ceil(n)), "n={n}");
            assert_eq!(s.messages, degree, "n={n}");
            assert!(!s.aborted);
        }
    }

    /// §IV.B.3 for `P = 2^k`, exactly: with [`BigOrder::TreeFirst`] coloring is the binomial
    /// tree's `k(2o + L)`, and the last process colored finishes its `k` sends at
    /// `T_BIG = (2o + L)·k + o·k`; the last of them is received `o + L` later (quiescence).
    /// With [`BigOrder::Increasing`] coloring is `k(2o + L) + o·k(k − 1)/2`, quiescence again
    /// `k·o + o + L` after it.
    #[test]
    fn fault_free_latency_exact_for_powers_of_two() {
        for (l, o) in [(2, 1), (1, 1), (0, 1), (5, 1), (4, 2), (6, 3)] {
            let logp = LogP { l, o };
            for k in 1..=12u32 {
                let n = 1u32 << k;
                let kt = Time::from(k);
                let what = format!("n={n} L={l} o={o}");
                let s = run(n, logp, &Faults::default(), 1);
                let t_big = logp.hop() * kt + o * kt;
                let tree = Tree::build(TreeKind::Binomial, Order::Interleaved, n, logp).unwrap();
                assert_eq!(tree.dissemination_latency(logp), logp.hop() * kt, "{what}");
                assert_eq!(s.coloring, logp.hop() * kt, "{what}");
                assert!(s.coloring <= t_big, "{what}");
                assert_eq!(Ok(t_big), crate::model::baselines::t_big(n.into(), logp), "{what}");
                assert_eq!(s.messages, crate::model::baselines::big_messages(n.into()), "{what}");
                assert_eq!(s.quiescence, t_big + o + l, "{what}");
                let shared = BigShared::with_order(n, BigOrder::Increasing);
                let s = Engine::<Big>::new(n, logp).run(&shared, &Faults::default(), 1, 100_000_000);
                assert!(!s.aborted, "increasing {what}");
                let col = logp.hop() * kt + o * kt * (kt - 1) / 2;
                assert_eq!(s.coloring, col, "increasing {what}");
                assert_eq!(s.quiescence, col + o * kt + o + l, "increasing {what}");
                assert_eq!(s.messages, u64::from(n) * u64::from(k), "increasing {what}");
            }
        }
    }

    /// For any `P`, BIG colors no later than the binomial tree (it may be earlier: the graph
    /// wraps around the ring).
    #[test]
    fn fault_free_coloring_no_later_than_binomial_tree() {
        for (l, o) in [(2, 1), (0, 1), (5, 1), (4, 2)] {
            let logp = LogP { l, o };
            for n in (1..=130).chain([1000, 3000]) {
                let s = run(n, logp, &Faults::default(), 1);
                let tree = Tree::build(TreeKind::Binomial, Order::Interleaved, n, logp).unwrap();
                assert!(s.coloring <= tree.dissemination_latency(logp), "n={n} L={l} o={o}");
            }
        }
    }

    /// Both send orders use exactly the neighbour sets of the topology layer.
    #[test]
    fn neighbours_match_the_binomial_graph() {
        let mut rng = ProtoRng::new(1);
        for n in (1..=40).chain([1000, 1024]) {
            for order in [BigOrder::Increasing, BigOrder::TreeFirst] {
                let shared = BigShared::with_order(n, order);
                for p in 0..n {
                    let cx = Ctx {
                        rank: p,
                        n,
                        now: 0,
                        shared: &shared,
                    };
                    let mut node = Big::new(&cx);
                    node.on_message(&cx, 0, &BigMsg);
                    let mut sent: Vec<Rank> = std::iter::from_fn(|| match node.poll_send(&cx, &mut rng) {
                        Action::Send { to, .. } => Some(to),
                        _ => None,
                    })
                    .collect();
                    let mut want: Vec<Rank> = forward_neighbors(p, n).collect();
                    if order == BigOrder::Increasing {
                        assert_eq!(sent, want, "n={n} p={p}");
                    }
                    sent.sort_unstable();
                    want.sort_unstable();
                    assert_eq!(sent, want, "n={n} p={p} {order:?}");
                    assert!(node.finished(&cx));
                }
            }
        }
    }

    #[test]
    fn tolerates_fewer_than_log2_p_dead_processes() {
        let logp = LogP::default();
        for n in [16u32, 100, 1024, 3000] {
            let f = log2_ceil(n) - 1;
            for seed in 0..200 {
                let faults = Faults {
                    before: DeadBefore::Count(f),
                    ..Faults::default()
                };
                let s = run(n, logp, &faults, seed);
                assert_eq!(s.uncolored_live, 0, "n={n} f={f} seed={seed}");
            }
        }
    }

    /// Exhaustively: every set of `⌈log2 P⌉ - 1` dead processes leaves the rest connected.
    #[test]
    fn tolerates_every_small_dead_set_exhaustively() {
        let logp = LogP::default();
        for n in [8u32, 12, 16, 20, 32] {
            let f = log2_ceil(n) - 1;
            let mut set: Vec<Rank> = (1..=f).collect();
            loop {
                let faults = Faults {
                    before: DeadBefore::List(set.clone()),
                    ..Faults::default()
                };
                let s = run(n, logp, &faults, 0);
                assert_eq!(s.uncolored_live, 0, "n={n} dead={set:?}");
                // Next combination of `f` ranks out of 1..n.
                let mut i = set.len();
                while i > 0 && set[i - 1] == n - 1 - (set.len() - i) as u32 {
                    i -= 1;
                }
                if i == 0 {
                    break;
                }
                set[i - 1] += 1;
                for j in i..set.len() {
                    set[j] = set[j - 1] + 1;
                }
            }
        }
    }

    #[test]
    fn duplicates_and_foreign_messages_are_harmless() {
        let shared = BigShared::new(8);
        let cx = Ctx {
            rank: 3,
            n: 8,
            now: 0,
            shared: &shared,
        };
        let mut rng = ProtoRng::new(1);
        let mut p = Big::new(&cx);
        p.start(&cx);
        assert!(!p.delivered());
        assert_eq!(p.poll_send(&cx, &mut rng), Action::Wait);
        for from in [0, 7, 3, 1000] {
            p.on_message(&cx, from, &BigMsg);
        }
        assert!(p.delivered());
        let sent: Vec<Rank> = std::iter::from_fn(|| match p.poll_send(&cx, &mut rng) {
            Action::Send { to, .. } => Some(to),
            _ => None,
        })
        .collect();
        // Rank 3 = 0b11: the tree sends (x = 2, to 7) first, then x = 0, 1.
        assert_eq!(sent, vec![7, 4, 5]);
        assert!(p.finished(&cx));
        p.on_message(&cx, 2, &BigMsg);
        assert_eq!(p.poll_send(&cx, &mut rng), Action::Wait);
    }
}
