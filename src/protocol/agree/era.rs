//! ERA, the Early Returning Agreement (Herault et al., SC'15), rule for rule as a sans-IO state
//! machine: one [`Era`] is one process's long-lived state for every agreement of a group
//! (ERA Part 1's variables, kept per agreement id), driven by three events: the user's
//! [`Era::agree`] (procedure Agreement), a received message ([`Era::on_message`]: ERA Part 2's
//! UP / DOWN / RESULT_REQUEST rules), and a failure-detector report ([`Era::on_dead`]: ERA
//! Part 4). The spontaneous rule (ERA Part 3) runs whenever its guard may have become true.
//! Messages wait in an outbox ([`Era::poll_send`]); decisions of agreements the user entered
//! come out of [`Era::poll_outcome`] as soon as they are reached (early return), and the
//! decided result stays to answer later requests until garbage-collected (§4).
//!
//! Where the pseudo-code and the prose of §2 differ, the prose and the proofs are followed,
//! and the choice is named at the place it is made:
//! - Part 2's UP rule tests `Result^a_p`, not `Result^q_p` (a typo); an UP received before
//!   the decision records its sender as a requester, so the decision answers it ("which will
//!   trigger the answer to the requesting child") even when the sender is not a child in this
//!   process's view: a process whose parent died sends its UP to its new parent, which may
//!   not have detected that death yet (found by the asynchronous property test; `Decision`
//!   sends to `Children ∪ RequestedResult`, so failure-free runs send nothing more).
//! - Part 2's DOWN rule is also accepted by a root (`Parent = ⊥`), from a process it sent a
//!   RESULT_REQUEST for that agreement, and from no other: a new root's request may reach a
//!   process that has decided, which answers DOWN (Theorem 5's proof: "wait for the c UP or
//!   DOWN messages"; Theorem 4: "a root process decides in ERA Part 2"), but a DOWN that a
//!   dead elder sent before this process became root (to it as a child, or to it as a
//!   requester) may arrive after, and taking it would decide the dead root's value while a
//!   live process had returned a later root's (found by an audit against Theorem 2, replayed
//!   in `tests.rs`, `a_new_root_ignores_a_stale_down_from_a_dead_elder`).
//! - A RESULT_REQUEST carries the processes its sender knows dead, which the receiver marks
//!   dead (Part 4) before it answers. Part 2 marks only the ranks below the requester: a
//!   grandchild asked after its parent `c` died (Part 4's second loop) still takes `c` for
//!   its parent (`c` is above the new root), answers UP, and then accepts a DOWN that `c`
//!   sent before it died, deciding the old root's value while the new root decides another
//!   (the same audit; `tests.rs`, `a_grandchild_asked_by_a_new_root_learns_its_parent_died`).
//!   Only dead processes are ever marked dead (Lemma 1), so the set marks nothing wrongly.
//! - Part 4's first loop tests `q = Parent(S'_p, p)` (the old view: in the new one `q` is dead).
//! - The processes marked dead by a RESULT_REQUEST (all `r < q`, Part 2) are "discovered dead"
//!   and go through Part 4, so an agreement whose parent was among them re-sends its UP.
//! - The failed set of a decision is "discovered dead" too: a process then knows every failure
//!   it agreed on, which `MPIX_Comm_failure_ack` ([`Era::acknowledge_failures`]) acknowledges.
//!
//! Identifiers are consecutive per group (as counting agreement calls on an MPI communicator,
//! §2); ranks in messages are physical ranks.

use std::collections::VecDeque;

use super::era_tree::{EraTree, Shape};
pub use super::slots::AgreeId;
use super::slots::IdMap;
use super::value::{Ballot, RankSet, Value};
use crate::protocol::Rank;
use ranks::Ranks;

/// ERA's messages (Part 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EraMsg<V> {
    /// A contribution going up the tree.
    Up { id: AgreeId, ballot: Ballot<V> },
    /// A decision going down the tree (or answering a request).
    Down { id: AgreeId, ballot: Ballot<V> },
    /// A new root asks whether a decision was reached, or for a lost contribution; `dead`:
    /// the processes it knows dead when it asks (see [`Era`]'s notes on Part 2).
    ResultRequest { id: AgreeId, dead: RankSet },
}

impl<V> EraMsg<V> {
    pub fn id(&self) -> AgreeId {
        match self {
            EraMsg::Up { id, .. } | EraMsg::Down { id, .. } | EraMsg::ResultRequest { id, .. } => *id,
        }
    }

    pub fn label(&self) -> &'static str {
        match self {
            EraMsg::Up { .. } => "up",
            EraMsg::Down { .. } => "down",
            EraMsg::ResultRequest { .. } => "request",
        }
    }
}

/// When the tree is rebuilt over the agreed live membership between agreements (§4 "Topology
/// Deterioration Mitigation").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rebalance {
    /// Never: the tree only mends (Figure 2d's "w/o rebalancing").
    Off,
    /// When the mended tree has degenerated: its height exceeds the balanced tree's by more
    /// than one level, or its largest fan-out is over twice the balanced one's. §5.1 finds a
    /// rebuild after one failure not worth its cost and recommends it "only when the topology
    /// has degenerated after a large number of failures"; a few scattered failures keep the
    /// mended tree within these bounds.
    Degenerated,
    /// After every agreement that agrees on a new failure.
    Always,
}

/// Configuration shared by the processes of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EraConfig {
    pub shape: Shape,
    /// How many agreements one process may have entered and not yet returned from (1: the
    /// blocking `MPIX_Comm_agree`; more: non-blocking agreements).
    pub window: u32,
    /// Garbage-collect decided results by agreeing on the prefix of returned ids (§4).
    pub gc: bool,
    /// Tree rebalancing between agreements; only with `window == 1` (with several agreements
    /// in flight the switch point would not be common to every process).
    pub rebalance: Rebalance,
}

impl Default for EraConfig {
    fn default() -> Self {
        Self {
            shape: Shape::Flat(super::era_tree::Flat::Binary),
            window: 1,
            gc: true,
            rebalance: Rebalance::Degenerated,
        }
    }
}

/// ERA Part 1's `Status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    NotContributed,
    Gathering,
    Broadcasting,
}

/// ERA Part 1's variables of one undecided agreement.
#[derive(Clone, Debug)]
struct Pending<V> {
    status: Status,
    current: Ballot<V>,
    contributed: Ranks,
    requested: Ranks,
    /// The processes this one sent a RESULT_REQUEST for the agreement (as its root): the
    /// only ones whose DOWN a root takes.
    asked: Ranks,
}

/// After the decision only `Result` is kept (§4: the other variables are reclaimed).
#[derive(Clone, Debug)]
enum Slot<V> {
    Pending(Pending<V>),
    Decided { result: Ballot<V>, returned: bool },
}

/// What an agreement returns to the user (`MPIX_Comm_agree`'s value and error code).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome<V> {
    pub id: AgreeId,
    pub value: V,
    /// The agreed set of failed processes.
    pub failed: RankSet,
    /// Failed processes not acknowledged by every participant before it entered: non-empty
    /// means "failure not acknowledged" (`MPI_ERR_PROC_FAILED`), identically everywhere.
    pub unacknowledged: RankSet,
}

impl<V> Outcome<V> {
    /// `MPI_SUCCESS`?
    pub fn ok(&self) -> bool {
        self.unacknowledged.is_empty()
    }
}

/// Why [`Era::agree`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgreeError {
    /// `window` agreements are already entered and not returned.
    WindowFull,
}

/// Messages dropped and why (bad or stale input is counted, never trusted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EraCounters {
    /// For an agreement already garbage-collected here.
    pub stale: u64,
    /// For an agreement too far ahead to be legitimate (see [`Era::on_message`]).
    pub too_far_ahead: u64,
    /// From a process outside the agreement's membership, or from this process itself.
    pub foreign: u64,
    /// DOWN messages ignored by the DOWN rule (not from the parent).
    pub ignored_down: u64,
    /// Processes doubted: an UP came around them ([`Era::poll_doubt`]).
    pub doubts: u64,
}

/// `Parent(S_p, p)` and `Children(S_p, p)` (§2) of this process, computed once per epoch and
/// `S_p` rather than on every message: failure-free, they never change.
#[derive(Clone, Debug, Default)]
struct View {
    /// The first agreement id of the epoch it was computed for, and `S_p`'s version.
    key: Option<(AgreeId, u64)>,
    parent: Option<Rank>,
    /// Sorted.
    kids: Vec<Rank>,
}

/// One process's ERA state for every agreement of its group.
#[derive(Clone, Debug)]
pub struct Era<V> {
    me: Rank,
    cfg: EraConfig,
    /// ERA Part 1's `S_p`, indexed by rank (`true` = dead).
    dead: Vec<bool>,
    /// `S_p` as a set (kept with `dead`: every ballot carries it).
    known: RankSet,
    /// Bumped whenever `S_p` changes (invalidates `view`).
    version: u64,
    /// This process's parent and children in the tree of one epoch under `S_p`.
    view: View,
    /// Trees and the first agreement id each applies to (rebalancing appends).
    epochs: Vec<(AgreeId, EraTree)>,
    slots: IdMap<Slot<V>>,
    next_id: AgreeId,
    /// Every id below has returned here.
    returned_below: AgreeId,
    /// Every id below is collected (§4): its messages are stale.
    floor: AgreeId,
    /// Failures the user acknowledged (`MPIX_Comm_failure_ack`).
    acked: RankSet,
    out: VecDeque<(Rank, EraMsg<V>)>,
    done: VecDeque<Outcome<V>>,
    pub counters: EraCounters,
    kids: Vec<Rank>,
    /// Emptied `Contributed` and `Requested` sets of decided agreements, reused by the next
    /// pending ones (no allocation per agreement once warm).
    spare: Vec<Ranks>,
    /// The last epoch's first id and the decided failed set last weighed against its tree
    /// ([`Era::rebalance`]): every agreement after a failure decides the same set, which
    /// changes nothing until another failure is agreed.
    weighed: Option<(AgreeId, RankSet)>,
    /// Decided failed sets weighed against a tree ([`Era::weighings`]).
    weighings: u64,
    /// Trees rebuilt ([`Era::rebalances`]).
    rebuilds: usize,
    /// Processes this one has reason to think dead, for its failure detector to probe
    /// ([`Era::poll_doubt`]): none twice while waiting, none known dead (withdrawn when
    /// found); at most one per process of the group.
    doubts: Vec<Rank>,
}

/// Sets kept in [`Era`]'s `spare` at most.
const SPARE_SETS: usize = 8;

impl<V: Value> Era<V> {
    /// Bytes [`Era::new`] allocates for a group of `n`: the record, the failure flags and the
    /// first epoch's tree (members, positions, parents, child offsets and children per rank).
    pub fn footprint(n: Rank) -> u64 {
        let per_rank = (size_of::<bool>() + 5 * size_of::<u32>()) as u64;
        (size_of::<Self>() as u64).saturating_add(u64::from(n).saturating_mul(per_rank))
    }

    /// Process `me` of a group of ranks `0..n`, every rank a member.
    pub fn new(me: Rank, n: Rank, cfg: EraConfig) -> Result<Self, String> {
        Self::with_members(me, n, (0..n).collect(), cfg)
    }

    /// Process `me` of a group made of `members` (e.g. after a shrink), ranks below `n`.
    pub fn with_members(me: Rank, n: Rank, members: Vec<Rank>, cfg: EraConfig) -> Result<Self, String> {
        if cfg.window == 0 {
            return Err("the agreement window must be at least 1".into());
        }
        let tree = EraTree::new(cfg.shape, members, n);
        if !tree.is_member(me) {
            return Err(format!("rank {me} is not a member of the group"));
        }
        Ok(Self {
            me,
            cfg,
            dead: vec![false; n as usize],
            known: RankSet::new(),
            version: 0,
            view: View::default(),
            epochs: vec![(0, tree)],
            slots: IdMap::default(),
            next_id: 0,
            returned_below: 0,
            floor: 0,
            acked: RankSet::new(),
            out: VecDeque::new(),
            done: VecDeque::new(),
            counters: EraCounters::default(),
            kids: Vec::new(),
            spare: Vec::new(),
            weighed: None,
            weighings: 0,
            rebuilds: 0,
            doubts: Vec::new(),
        })
    }

    pub fn rank(&self) -> Rank {
        self.me
    }

    /// The tree of the latest epoch (the membership later agreements use).
    pub fn tree(&self) -> &EraTree {
        &self.epochs[self.epochs.len() - 1].1
    }

    /// How many times the tree was rebuilt (old epochs are dropped once no agreement can use
    /// them, so this is counted, not the epochs left).
    pub fn rebalances(&self) -> usize {
        self.rebuilds
    }

    /// How many decided failed sets were weighed against the current tree for a rebuild
    /// (ERA §5.1): once per newly agreed set of failures, not once per agreement.
    pub fn weighings(&self) -> u64 {
        self.weighings
    }

    /// Agreements whose state is stored here (pending or decided and not yet collected).
    pub fn stored(&self) -> usize {
        self.slots.len()
    }

    /// Every agreement id below this one is collected.
    pub fn collected_below(&self) -> AgreeId {
        self.floor
    }

    /// The next agreement's id.
    pub fn next_id(&self) -> AgreeId {
        self.next_id
    }

    /// The processes this one knows dead (`S_p`).
    pub fn known_dead(&self) -> RankSet {
        self.known.clone()
    }

    /// `MPIX_Comm_failure_ack`: acknowledges every failure known so far; agreements entered
    /// afterwards do not report them as unacknowledged.
    pub fn acknowledge_failures(&mut self) {
        self.acked = self.known_dead();
    }

    fn tree_for(&self, id: AgreeId) -> &EraTree {
        let i = self.epochs.iter().rposition(|(from, _)| *from <= id).unwrap_or(0);
        &self.epochs[i].1
    }

    /// Brings `view` to the epoch of agreement `id` and the current `S_p`.
    fn refresh_view(&mut self, id: AgreeId) {
        let i = self.epochs.iter().rposition(|(from, _)| *from <= id).unwrap_or(0);
        let key = Some((self.epochs[i].0, self.version));
        if self.view.key != key {
            let tree = &self.epochs[i].1;
            self.view.parent = tree.parent(&self.dead, self.me);
            tree.children(&self.dead, self.me, &mut self.view.kids);
            self.view.key = key;
        }
    }

    fn parent(&mut self, id: AgreeId) -> Option<Rank> {
        self.refresh_view(id);
        self.view.parent
    }

    fn children(&mut self, id: AgreeId, of: Rank) -> Vec<Rank> {
        let mut kids = std::mem::take(&mut self.kids);
        let i = self.epochs.iter().rposition(|(from, _)| *from <= id).unwrap_or(0);
        self.epochs[i].1.children(&self.dead, of, &mut kids);
        let v = kids.clone();
        self.kids = kids;
        v
    }

    fn send(&mut self, to: Rank, msg: EraMsg<V>) {
        self.out.push_back((to, msg));
    }

    /// The sender is free: the next message to send, if any.
    pub fn poll_send(&mut self) -> Option<(Rank, EraMsg<V>)> {
        self.out.pop_front()
    }

    /// The next agreement the user entered that has returned (in decision order).
    pub fn poll_outcome(&mut self) -> Option<Outcome<V>> {
        self.done.pop_front()
    }

    /// Procedure Agreement: enters the next agreement contributing `value`; returns its id.
    /// The contribution also carries the known failures, the acknowledged ones and the
    /// returned prefix (the ballot's other fields).
    pub fn agree(&mut self, value: V) -> Result<AgreeId, AgreeError> {
        if self.next_id - self.returned_below >= u64::from(self.cfg.window) {
            return Err(AgreeError::WindowFull);
        }
        let id = self.next_id;
        self.next_id += 1;
        let me = self.me;
        let spare = &mut self.spare;
        match self.slots.get_or_insert_with(id, || new_pending(spare)) {
            Slot::Decided { returned, result } => {
                // Decided before entering (only if a parent's DOWN overtook the call).
                *returned = true;
                let result = result.clone();
                self.returned(id, &result);
            }
            Slot::Pending(p) => {
                p.status = Status::Gathering;
                p.contributed.insert(me);
                // Folded in place, without a ballot of copies: the contribution's failed set
                // is `S_p`, its acknowledged set this process's, its prefix `returned_below`.
                p.current
                    .fold_parts(&value, &self.known, Some(&self.acked), self.returned_below);
                self.spontaneous(id);
            }
        }
        Ok(id)
    }

    /// A message from `from`. Dropped and counted: from outside the agreement's membership,
    /// for a collected agreement, or for one at least `window` past the next id here (no
    /// process can enter such an agreement before this one has contributed to an earlier
    /// one, which bounds what bad input can make this process store).
    pub fn on_message(&mut self, from: Rank, msg: EraMsg<V>) {
        let id = msg.id();
        if id < self.floor {
            self.counters.stale += 1;
            return;
        }
        if id >= self.next_id + u64::from(self.cfg.window) {
            self.counters.too_far_ahead += 1;
            return;
        }
        if from == self.me || !self.tree_for(id).is_member(from) {
            self.counters.foreign += 1;
            return;
        }
        match msg {
            EraMsg::Up { id, ballot } => self.recv_up(from, id, ballot),
            EraMsg::Down { id, ballot } => self.recv_down(from, id, ballot),
            EraMsg::ResultRequest { id, dead } => self.recv_request(from, id, &dead),
        }
    }

    /// Rule Recv(UP(a, v)) from q.
    fn recv_up(&mut self, q: Rank, id: AgreeId, v: Ballot<V>) {
        let spare = &mut self.spare;
        let (down, asked) = match self.slots.get_or_insert_with(id, || new_pending(spare)) {
            Slot::Pending(p) => {
                if p.status != Status::Broadcasting {
                    p.current.fold(&v);
                    p.contributed.insert(q);
                }
                p.requested.insert(q);
                (None, p.asked.contains(q))
            }
            Slot::Decided { result, .. } => (Some(result.clone()), true),
        };
        match down {
            Some(ballot) => self.send(q, EraMsg::Down { id, ballot }),
            None => {
                if !asked {
                    self.doubt_around(id, q);
                }
                self.spontaneous(id)
            }
        }
    }

    /// Rule Recv(DOWN(a, v)) from q.
    fn recv_down(&mut self, q: Rank, id: AgreeId, v: Ballot<V>) {
        let asked = match self.slots.get(&id) {
            Some(Slot::Decided { .. }) => return,
            Some(Slot::Pending(p)) => p.asked.contains(q),
            None => false,
        };
        let parent = self.parent(id);
        if parent == Some(q) || (parent.is_none() && asked) {
            self.decision(id, v);
        } else {
            self.counters.ignored_down += 1;
        }
    }

    /// Sends a RESULT_REQUEST for agreement `id` to `to`, with the processes this one knows
    /// dead, and remembers that `to` was asked.
    fn request(&mut self, id: AgreeId, to: Rank) {
        if let Some(Slot::Pending(p)) = self.slots.get_mut(&id) {
            p.asked.insert(to);
        }
        let dead = self.known.clone();
        self.send(to, EraMsg::ResultRequest { id, dead });
    }

    /// Rule Recv(RESULT_REQUEST(a)) from q, after marking dead what the requester knows dead.
    fn recv_request(&mut self, q: Rank, id: AgreeId, dead: &RankSet) {
        for &r in dead.as_slice() {
            self.on_dead(r);
        }
        let tree = self.tree_for(id);
        let newly: Vec<Rank> = (0..q)
            .filter(|&r| tree.is_member(r) && !self.dead[r as usize])
            .collect();
        for r in newly {
            self.on_dead(r);
        }
        let spare = &mut self.spare;
        let reply = match self.slots.get_or_insert_with(id, || new_pending(spare)) {
            Slot::Decided { result, .. } => Some(EraMsg::Down {
                id,
                ballot: result.clone(),
            }),
            Slot::Pending(p) if p.status == Status::Broadcasting => Some(EraMsg::Up {
                id,
                ballot: p.current.clone(),
            }),
            Slot::Pending(p) => {
                p.requested.insert(q);
                None
            }
        };
        if let Some(m) = reply {
            self.send(q, m);
        }
    }

    /// ERA Part 3: `Status = gathering ∧ Children(S_p, p) ∪ {p} ⊆ Contributed`.
    fn spontaneous(&mut self, id: AgreeId) {
        let Some(Slot::Pending(p)) = self.slots.get(&id) else {
            return;
        };
        if p.status != Status::Gathering || !p.contributed.contains(self.me) {
            return;
        }
        self.refresh_view(id);
        let parent = self.view.parent;
        let Some(Slot::Pending(p)) = self.slots.get_mut(&id) else {
            return;
        };
        if !self.view.kids.iter().all(|&k| p.contributed.contains(k)) {
            return;
        }
        // This process also proposes the failures it knows now (idempotent for F).
        p.current.failed.union_with(&self.known);
        p.status = Status::Broadcasting;
        let current = p.current.clone();
        match parent {
            None => self.decision(id, current),
            Some(par) => self.send(par, EraMsg::Up { id, ballot: current }),
        }
    }

    /// Procedure Decision(v, a).
    fn decision(&mut self, id: AgreeId, v: Ballot<V>) {
        self.refresh_view(id);
        let (kids, requested, entered) = match self.slots.get(&id) {
            Some(Slot::Pending(p)) => (
                &self.view.kids[..],
                p.requested.as_slice(),
                p.status != Status::NotContributed,
            ),
            _ => (&self.view.kids[..], &[][..], false),
        };
        // To Children(S_p, p) ∪ Requested, in increasing rank order (both lists are sorted).
        let (mut i, mut j) = (0, 0);
        loop {
            let n = match (kids.get(i), requested.get(j)) {
                (Some(&a), Some(&b)) if a == b => {
                    (i, j) = (i + 1, j + 1);
                    a
                }
                (Some(&a), Some(&b)) if a < b => {
                    i += 1;
                    a
                }
                (_, Some(&b)) => {
                    j += 1;
                    b
                }
                (Some(&a), None) => {
                    i += 1;
                    a
                }
                (None, None) => break,
            };
            self.out.push_back((n, EraMsg::Down { id, ballot: v.clone() }));
        }
        let old = self.slots.insert(
            id,
            Slot::Decided {
                result: v.clone(),
                returned: entered,
            },
        );
        if let Some(Slot::Pending(p)) = old {
            for mut set in [p.contributed, p.requested, p.asked] {
                if self.spare.len() < SPARE_SETS && set.capacity() > 0 {
                    set.clear();
                    self.spare.push(set);
                }
            }
        }
        if entered {
            self.returned(id, &v);
        }
        self.after_decision(id, &v);
    }

    /// The user's call of agreement `id` returns `v` (early return).
    fn returned(&mut self, id: AgreeId, v: &Ballot<V>) {
        let unacknowledged = match &v.acked {
            Some(acked) => v.failed.minus(acked),
            None => v.failed.clone(),
        };
        self.done.push_back(Outcome {
            id,
            value: v.value.clone(),
            failed: v.failed.clone(),
            unacknowledged,
        });
        while self.returned_below < self.next_id
            && (self.returned_below < self.floor
                || matches!(
                    self.slots.get(&self.returned_below),
                    Some(Slot::Decided { returned: true, .. })
                ))
        {
            self.returned_below += 1;
        }
    }

    /// The decided failed set is now known here (every entry was dead when reported,
    /// Lemma 1); §4: collect the results every live process has returned; rebuild the tree if
    /// the agreed failures degenerated it.
    fn after_decision(&mut self, id: AgreeId, v: &Ballot<V>) {
        for &r in v.failed.as_slice() {
            self.on_dead(r);
        }
        if self.cfg.gc && v.returned_below != u64::MAX && v.returned_below > self.floor {
            let floor = v.returned_below.min(self.returned_below);
            // Only decided results are collected; anything else stays (it cannot exist here
            // for a live contributor, whose prefix bounded `returned_below`).
            self.slots.retain(|&k, s| k >= floor || matches!(s, Slot::Pending(_)));
            self.floor = self.floor.max(floor);
        }
        self.rebalance(id, v);
    }
}

/// A new agreement's variables (ERA Part 1's initial values), its two sets taken from
/// `spare` (empty) where it has some.
fn new_pending<V: Value>(spare: &mut Vec<Ranks>) -> Slot<V> {
    Slot::Pending(Pending {
        status: Status::NotContributed,
        current: Ballot::bottom(),
        contributed: spare.pop().unwrap_or_default(),
        requested: spare.pop().unwrap_or_default(),
        asked: Ranks::default(),
    })
}

mod failures;
mod ranks;
mod rebalance;
#[cfg(test)]
mod tests;
