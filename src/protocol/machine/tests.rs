use super::*;
use crate::model::LogP;
use crate::protocol::bcast::Start;
use crate::protocol::bcast::corrected_tree::{CorrectedTree, TreeShared};
use crate::protocol::bcast::correction::Correction;
use crate::topology::{Order, Tree, TreeKind};

/// A minimal driver of the contract: one send per unit per process, messages arrive `l`
/// units later, timers fire when due; returns when each process delivered (model time).
fn drive<M: Machine<Input = (), Output = ()>>(ms: &mut [M], l: Time, root: usize, until: Time) -> Vec<Option<Time>>
where
    M::Msg: Clone,
    M::Error: std::fmt::Debug,
{
    let mut delivered = vec![None; ms.len()];
    let mut flight: Vec<(Time, Rank, usize, M::Msg)> = Vec::new();
    ms[root].handle(0, Event::Input(())).unwrap();
    for now in 0..until {
        let (due, rest): (Vec<_>, Vec<_>) = flight.into_iter().partition(|f| f.0 <= now);
        flight = rest;
        for (_, from, to, msg) in due {
            ms[to].handle(now, Event::Message { from, msg }).unwrap();
        }
        for (i, m) in ms.iter_mut().enumerate() {
            if m.poll_timeout().is_some_and(|t| t <= now) {
                m.handle(now, Event::Timer).unwrap();
            }
            if let Some((to, msg)) = m.poll_transmit(now) {
                flight.push((now + 1 + l, i as Rank, to as usize, msg));
            }
            while m.poll_output().is_some() {
                delivered[i].get_or_insert(now);
            }
        }
    }
    delivered
}

#[test]
fn a_broadcast_protocol_runs_through_the_contract_and_every_process_delivers() {
    let n = 23;
    let logp = LogP { l: 2, o: 1 };
    let tree = Tree::build(TreeKind::Binomial, Order::Interleaved, n, logp).unwrap();
    for c in [Correction::Opportunistic { d: 2 }, Correction::Checked] {
        let shared = TreeShared::new(tree.clone(), logp, c, Start::Synchronized);
        let mut ms: Vec<Bcast<'_, CorrectedTree<0>>> = (0..n)
            .map(|r| Bcast::new(r, n, &shared, ProtoRng::new(u64::from(r))))
            .collect();
        let got = drive(&mut ms, 2, 0, 2_000);
        assert!(got.iter().all(Option::is_some), "{c:?}: {got:?}");
        assert_eq!(got[0], Some(0), "the root delivers at once");
        assert!(ms.iter().all(|m| m.protocol().delivered()));
    }
}
