//! Ring correction, shared by Corrected Trees and Corrected Gossip.
//!
//! After dissemination, processes sit on a virtual ring of ranks `0..n`. Participants (the
//! processes colored by dissemination: "g-nodes") send correction messages to their ring
//! neighbours at growing offsets, alternating between the two directions; processes colored
//! by correction ("c-nodes") never send (Corrected Gossip §III, Corrected Trees §3.1, §3.3).
//!
//! Kinds, each as its paper specifies it:
//! - opportunistic (distance `d`): `d` messages each way, no checks (§3.1; OCG, Algorithm 1);
//! - optimized opportunistic: skips what a closer participant provably covers (CT §3.3);
//! - checked: stop a direction after reaching the nearest participant heard from on that side
//!   (CCG, Algorithm 2; CT §3.1); a stopped direction's slot either idles for `o` (CCG's
//!   analysis) or goes to the other direction (CT Lemma 2), see [`CorrParams`];
//! - failure-proof (`f`): FCG's correction (Algorithm 3), tolerating `f` failures during it,
//!   including the c-nodes' wait for `f + 1` g-nodes and the SOS mode;
//! - delayed: one message to the left, then send right only if the right neighbour is not
//!   heard from within a delay (CT §3.3).

use serde::Serialize;

use crate::protocol::{Action, Rank, Time};
use crate::topology::ring;

/// The largest `f` of failure-proof correction: bounds the knowledge carried in every
/// correction message, which the simulator copies per event (the papers use f <= 3).
pub const MAX_FAILPROOF_F: u32 = 3;
/// Knowledge capacity a failure-proof corrector needs (`MAX_FAILPROOF_F + 1`). Correctors and
/// messages are generic over their capacity `C`: the other kinds use `C = 0`, so neither
/// their per-process state nor their messages carry FCG's arrays (the simulator holds one
/// state per process and copies every message through its event queue).
pub const FAILPROOF_CAP: usize = MAX_FAILPROOF_F as usize + 1;

/// A correction algorithm and its parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Correction {
    /// No correction: dissemination only.
    None,
    /// Opportunistic correction: `d` messages in each direction.
    Opportunistic { d: u32 },
    /// Optimized opportunistic correction with distance `d` (CT §3.3): a participant `i` that
    /// receives a correction message from a participant `j = i + δ` on its right, `0 < δ < d`,
    /// sends nothing more to the right and to the left only `i − d … j − d − 1`.
    ///
    /// The rule loses no coverage: every target `x` that `i` skips lies within `d` of `j` (a
    /// right target of `i` is in `(i, i + d] ⊂ (j − d, j + d]`, a skipped left one in
    /// `[j − d, i)`). If `j` skipped `x` too, `j` heard from some `k` further right and `x` is
    /// again within `d` of `k`, and so on; each step moves right and stays below `x + d`, so the
    /// chain ends at a participant that sends to `x`. Applied to messages from the left as
    /// well, reliance could point both ways and two participants could each skip a process on
    /// the other's word; only the one-sided rule is implemented.
    Optimized { d: u32 },
    /// Checked correction.
    Checked,
    /// Failure-proof correction tolerating `f` failures during the operation.
    FailProof { f: u32 },
    /// Delayed correction; `delay` in model time units (a default is derived when `None`).
    Delayed { delay: Option<Time> },
}

/// A direction on the ring: `Fwd` sends to `r + off` ("right"), `Bwd` to `r - off` ("left").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Dir {
    Fwd = 0,
    Bwd = 1,
}

impl Dir {
    fn other(self) -> Dir {
        match self {
            Dir::Fwd => Dir::Bwd,
            Dir::Bwd => Dir::Fwd,
        }
    }
    fn idx(self) -> usize {
        self as usize
    }
}

/// What a correction message is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CorrKind {
    /// An ordinary correction message.
    Normal,
    /// FCG's finalization round message.
    Final,
    /// Delayed correction's immediate reply that stops a sender.
    Reply,
    /// FCG's SOS: the receiver delivers and floods.
    Sos,
}

/// Up to `f + 1` g-nodes known in one direction, nearest first (FCG's `k` arrays). Ranks are
/// kept as bytes so that `Known<0>` (every kind but failure-proof) is one byte, not four.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Known<const C: usize> {
    len: u8,
    ranks: [[u8; 4]; C],
}

impl<const C: usize> Default for Known<C> {
    fn default() -> Self {
        Self {
            len: 0,
            ranks: [[0; 4]; C],
        }
    }
}

impl<const C: usize> Known<C> {
    /// The known ranks, nearest first.
    pub fn iter(&self) -> impl Iterator<Item = Rank> + '_ {
        self.ranks[..self.len as usize].iter().map(|b| Rank::from_ne_bytes(*b))
    }
    /// How many ranks are known.
    pub fn count(&self) -> usize {
        self.len as usize
    }
    /// The `i`-th nearest known rank.
    pub fn get(&self, i: usize) -> Option<Rank> {
        self.ranks[..self.len as usize].get(i).map(|b| Rank::from_ne_bytes(*b))
    }
    /// The set holding `ranks` as given (nearest first); `None` if more than `C`.
    pub fn from_slice(ranks: &[Rank]) -> Option<Self> {
        let mut k = Self::default();
        for (slot, r) in k.ranks.get_mut(..ranks.len())?.iter_mut().zip(ranks) {
            *slot = r.to_ne_bytes();
        }
        k.len = u8::try_from(ranks.len()).ok()?;
        Some(k)
    }
    fn len(&self) -> u32 {
        u32::from(self.len)
    }
    /// Inserts `r` keeping the `cap` nearest by `dist`, without duplicates.
    fn insert(&mut self, r: Rank, cap: usize, dist: impl Fn(Rank) -> u32) {
        let len = self.len as usize;
        if self.iter().any(|x| x == r) {
            return;
        }
        let d = dist(r);
        let at = |s: &Self, i: usize| Rank::from_ne_bytes(s.ranks[i]);
        let mut pos = len;
        while pos > 0 && dist(at(self, pos - 1)) > d {
            pos -= 1;
        }
        if pos >= cap.min(C) {
            return;
        }
        let new_len = (len + 1).min(cap).min(C);
        let mut i = new_len - 1;
        while i > pos {
            self.ranks[i] = self.ranks[i - 1];
            i -= 1;
        }
        self.ranks[pos] = r.to_ne_bytes();
        self.len = new_len as u8;
    }
    fn with(mut self, r: Rank, cap: usize, dist: impl Fn(Rank) -> u32) -> Self {
        self.insert(r, cap, dist);
        self
    }
}

/// A correction message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CorrMsg<const C: usize> {
    /// The direction the message travels in.
    pub dir: Dir,
    /// Its purpose.
    pub kind: CorrKind,
    /// FCG only: g-nodes the sender knows on the side the message comes from (sender included).
    pub known: Known<C>,
}

/// Parameters a corrector needs, fixed for the whole operation.
#[derive(Clone, Copy, Debug)]
pub struct CorrParams {
    /// The algorithm.
    pub kind: Correction,
    /// The direction of the first message (CT Lemma 2: left; CCG: forward).
    pub first: Dir,
    /// LogP `o`, the length of an idle slot.
    pub o: Time,
    /// Delayed correction's wait after its first message.
    pub delay: Time,
    /// FCG: how long a c-node waits for `f + 1` g-nodes before SOS.
    pub sos_timeout: Time,
    /// Checked/failure-proof: a stopped direction's slot idles for `o` (CCG Algorithm 2's
    /// analysis) instead of being given to the other direction (CT Lemma 2's count
    /// `3 + ⌊L/o⌋` needs the latter: for L = o = 1 it is 4, not 3).
    pub idle_when_stopped: bool,
}

const NO_TIMER: Time = Time::MAX;
const NO_REPLY: Rank = Rank::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Not colored yet.
    Unknown,
    /// Colored by dissemination: will run correction (once started).
    Participant,
    /// Colored (or contacted) by correction: never sends (except FCG's SOS).
    CNode,
}

/// One process's correction state.
#[derive(Clone, Debug)]
pub struct Corrector<const C: usize> {
    role: Role,
    started: bool,
    done: bool,
    delivered: bool,
    next: Dir,
    off: [u32; 2],
    /// Checked: distance to the nearest participant heard from on that side.
    /// Opportunistic: the last offset to send on that side.
    bound: [u32; 2],
    /// Optimized: first offset still to send on that side.
    stopped: [bool; 2],
    /// FCG: known g-nodes ahead (`[Fwd]`, to the right) and behind (`[Bwd]`); c-nodes use
    /// `[Fwd]` for every g-node they learned of.
    known: [Known<C>; 2],
    fin: [bool; 2],
    /// FCG: flooding SOS now; the next rank to flood to is `sos_next`.
    sos: bool,
    /// FCG: the SOS flood's cursor. Its own field: a correction message that reaches a
    /// participant during its flood may reset the correction offsets (the final round), which
    /// must not move the flood (it did: a flood sent to its own rank and repeated ranks).
    sos_next: Rank,
    /// FCG: this process has flooded SOS already; it floods at most once (Corollary 2).
    sos_done: bool,
    /// Pending timer (`NO_TIMER`: none); a sentinel keeps the state small.
    timer: Time,
    /// Delayed: heard from the right.
    heard_right: bool,
    /// The searcher owed a reply (`NO_REPLY`: none); further ones are counted in
    /// `replies_dropped` (the searcher also stops on any later message from its right).
    reply: Rank,
    /// Replies that did not fit in the queue (the sender also stops on any later message).
    pub replies_dropped: u16,
}

impl<const C: usize> Default for Corrector<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const C: usize> Corrector<C> {
    /// An uncolored process's corrector.
    pub fn new() -> Self {
        Self {
            role: Role::Unknown,
            started: false,
            done: false,
            delivered: false,
            next: Dir::Bwd,
            off: [1, 1],
            bound: [u32::MAX, u32::MAX],
            stopped: [false, false],
            known: [Known::default(); 2],
            fin: [false, false],
            sos: false,
            sos_done: false,
            sos_next: 0,
            timer: NO_TIMER,
            heard_right: false,
            reply: NO_REPLY,
            replies_dropped: 0,
        }
    }

    /// This process was colored by dissemination: it will participate.
    pub fn colored_by_dissemination(&mut self) {
        if self.role == Role::Unknown {
            self.role = Role::Participant;
            self.delivered = true;
        }
    }

    /// Has the correction delivered (or dissemination colored) this process?
    pub fn delivered(&self) -> bool {
        self.delivered
    }

    /// Is this process a c-node that was contacted by correction?
    pub fn is_cnode(&self) -> bool {
        self.role == Role::CNode
    }

    /// Is this process a participant (g-node)?
    pub fn is_participant(&self) -> bool {
        self.role == Role::Participant
    }

    /// Will this process send no more correction messages?
    pub fn finished(&self) -> bool {
        match self.role {
            Role::Participant => self.done && !self.sos && self.reply == NO_REPLY,
            Role::CNode => !self.sos && self.reply == NO_REPLY && (self.delivered || (self.timer == NO_TIMER)),
            Role::Unknown => true,
        }
    }

    /// Opportunistic: send at most `last` messages towards `dir` (OCG's uneven split of its
    /// `S` sends, Algorithm 1). Call after [`Corrector::start`]; idempotent.
    pub fn limit_offsets(&mut self, dir: Dir, last: u32) {
        let i = dir.idx();
        self.bound[i] = self.bound[i].min(last);
    }

    /// A pending timer, if any.
    pub fn next_timer(&self) -> Option<Time> {
        (self.timer != NO_TIMER).then_some(self.timer)
    }

    /// A participant begins its correction phase at `now`.
    pub fn start(&mut self, p: &CorrParams, n: Rank, now: Time) {
        if self.role != Role::Participant || self.started {
            return;
        }
        self.started = true;
        self.next = p.first;
        match p.kind {
            Correction::None => self.done = true,
            Correction::Opportunistic { d } | Correction::Optimized { d } => {
                let d = d.min(n.saturating_sub(1));
                self.bound = [d, d];
                if d == 0 {
                    self.done = true;
                }
            }
            Correction::Checked | Correction::FailProof { .. } => {}
            Correction::Delayed { .. } => {
                // One message to the left, then wait for the right neighbour.
                self.bound = [0, 1];
                self.timer = now + p.delay;
            }
        }
        if let Correction::FailProof { f } = p.kind {
            debug_assert!(
                (f as usize) < C,
                "failure-proof correction needs Corrector<FAILPROOF_CAP>"
            );
            // Knowledge gathered before the start may already trigger the final phase.
            self.check_final(f);
        }
        if n < 2 {
            self.done = true;
        }
    }

    /// Alg. 3 line 24: once `f + 1` g-nodes are known behind, send final messages ahead (and
    /// symmetrically), starting again at offset 1. The count is `f + 1` as Appendix B has it
    /// ("A is reset to send final messages by learning about f + 1 = 2 other g-nodes"): the
    /// list then holds the `f + 1` g-nodes the final round announces, and line 21 freezes it
    /// (with `f` the frozen list could never reach the `(f + 1)`-th g-node line 25 stops at).
    fn check_final(&mut self, f: u32) {
        for dir in [Dir::Fwd, Dir::Bwd] {
            if !self.fin[dir.idx()] && self.known[dir.other().idx()].len() > f {
                self.fin[dir.idx()] = true;
                self.off[dir.idx()] = 1;
                self.stopped[dir.idx()] = false;
            }
        }
    }

    /// Handles a correction message from `from`. Returns true if it newly delivers here.
    pub fn on_message(&mut self, p: &CorrParams, me: Rank, n: Rank, now: Time, from: Rank, m: &CorrMsg<C>) -> bool {
        let was = self.delivered;
        if m.kind == CorrKind::Sos {
            // Alg. 3: SOS is acted on by an uncolored process (line 8), a waiting c-node
            // (line 14) or a g-node still correcting (line 23). A process that exited (a
            // finished g-node, a c-node that delivered at line 13) or already flooded ignores
            // it: each process floods at most once (Corollary 2). Delivery comes after the
            // flood (Claim 4's proof), see `poll`.
            if self.role == Role::Unknown {
                self.role = Role::CNode;
            }
            let exited = match self.role {
                Role::Participant => self.done && !self.sos,
                _ => self.delivered,
            };
            if !self.sos && !self.sos_done && !exited {
                self.enter_sos(me, n);
            }
            return self.delivered && !was;
        }
        // Distance to the sender on the side it sits: a Bwd message comes from the right.
        let side = m.dir.other(); // the sender is on this side of us
        let dist = match side {
            Dir::Fwd => ring::forward_distance(me, from, n),
            Dir::Bwd => ring::backward_distance(me, from, n),
        };
        match self.role {
            Role::Unknown => {
                self.role = Role::CNode;
                if !matches!(p.kind, Correction::FailProof { .. }) {
                    self.delivered = true;
                }
                self.cnode_learn(p, me, n, now, from, m);
            }
            Role::CNode => self.cnode_learn(p, me, n, now, from, m),
            Role::Participant => self.participant_learn(p, me, n, side, dist, from, m),
        }
        self.delivered && !was
    }

    fn cnode_learn(&mut self, p: &CorrParams, me: Rank, n: Rank, now: Time, from: Rank, m: &CorrMsg<C>) {
        let Correction::FailProof { f } = p.kind else { return };
        if self.delivered {
            return;
        }
        // Line 13 of Algorithm 3: deliver once f + 1 distinct g-nodes are known.
        let cap = C;
        let d = |r: Rank| ring::forward_distance(me, r, n);
        self.known[0].insert(from, cap, d);
        for r in m.known.iter() {
            self.known[0].insert(r, cap, d);
        }
        if self.known[0].len() > f {
            self.delivered = true;
            self.timer = NO_TIMER;
        } else if self.timer == NO_TIMER {
            // Line 14: SOS after a timeout.
            self.timer = now + p.sos_timeout;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn participant_learn(
        &mut self,
        p: &CorrParams,
        me: Rank,
        n: Rank,
        side: Dir,
        dist: u32,
        from: Rank,
        m: &CorrMsg<C>,
    ) {
        let s = side.idx();
        match p.kind {
            Correction::None | Correction::Opportunistic { .. } => {}
            Correction::Optimized { d } => {
                // CT §3.3, as stated there: "given i and j with j − d < i < j, assume i receives
                // a message from j": only a message from the RIGHT (a `Bwd` message, sent by a
                // participant j = i + δ, 0 < δ < d). j's left messages reach i − 1 … j − d and
                // its right ones everything up to i + d, so i sends nothing more to the right
                // and to the left only i − d … j − d − 1, offsets d + 1 − δ … d.
                //
                // The mirror rule for a message from the left is NOT applied: with
                // both, two participants within d of each other each rely on the other and both
                // skip the same processes (`ftcoll sim --nodes 128 --dead 4,18,23,24,30,42,47,
                // 54,58,66,68,72,87,95,102,115,117 --correction optimized:4` left 116 uncolored:
                // 112 relied on 113 and 113 on 112). One-sided, the reliance always points
                // right and ends at a participant that sends the offsets relied on, so every
                // process within d of a participant is still reached (see
                // `Correction::Optimized`).
                if m.kind == CorrKind::Normal && side == Dir::Fwd && dist < d {
                    self.stopped[Dir::Fwd.idx()] = true;
                    let b = Dir::Bwd.idx();
                    self.off[b] = self.off[b].max(d + 1 - dist);
                }
            }
            Correction::Checked => {
                self.bound[s] = self.bound[s].min(dist);
            }
            Correction::Delayed { .. } => {
                if side == Dir::Fwd {
                    // Anything from the right stops our rightward search.
                    self.heard_right = true;
                    self.timer = NO_TIMER;
                } else if m.kind != CorrKind::Reply {
                    // A search from the left reached us: reply at once to stop it.
                    if self.reply == NO_REPLY {
                        self.reply = from;
                    } else {
                        self.replies_dropped = self.replies_dropped.saturating_add(1);
                    }
                }
            }
            Correction::FailProof { f } => {
                // Line 21: a side's list is updated only until the final round it triggers
                // (towards the other side) has started.
                if self.fin[side.other().idx()] {
                    return;
                }
                let cap = (f as usize + 1).min(C);
                let k = &mut self.known[s];
                match side {
                    Dir::Fwd => {
                        let d = |r: Rank| ring::forward_distance(me, r, n);
                        k.insert(from, cap, d);
                        for r in m.known.iter() {
                            if r != me {
                                k.insert(r, cap, d);
                            }
                        }
                    }
                    Dir::Bwd => {
                        let d = |r: Rank| ring::backward_distance(me, r, n);
                        k.insert(from, cap, d);
                        for r in m.known.iter() {
                            if r != me {
                                k.insert(r, cap, d);
                            }
                        }
                    }
                }
                if self.started {
                    self.check_final(f);
                }
            }
        }
    }

    /// Alg. 3 line 9: send SOS to every other process, once; deliver when done (`poll`).
    fn enter_sos(&mut self, me: Rank, n: Rank) {
        self.sos = true;
        self.done = false;
        self.timer = NO_TIMER;
        self.sos_next = if me == 0 { 1 } else { 0 };
        if self.sos_next >= n {
            self.end_sos();
        }
    }

    fn end_sos(&mut self) {
        self.sos = false;
        self.sos_done = true;
        self.done = true;
        self.delivered = true;
    }

    /// The pending timer fired.
    pub fn on_timer(&mut self, p: &CorrParams, me: Rank, n: Rank, now: Time) {
        if self.timer > now {
            return;
        }
        self.timer = NO_TIMER;
        match p.kind {
            // Nobody from the right: search to the right until someone answers.
            Correction::Delayed { .. } if !self.heard_right => self.bound[Dir::Fwd.idx()] = n,
            Correction::FailProof { .. } if self.role == Role::CNode && !self.delivered && !self.sos_done => {
                self.enter_sos(me, n);
            }
            _ => {}
        }
    }

    /// The sender is free: the next correction action.
    pub fn poll(&mut self, p: &CorrParams, me: Rank, n: Rank) -> Action<CorrMsg<C>> {
        if self.sos {
            let to = self.sos_next;
            if to >= n {
                // Sent to all: only now deliver and exit (Claim 4's proof).
                self.end_sos();
                return Action::Wait;
            }
            let mut nx = to + 1;
            if nx == me {
                nx += 1;
            }
            self.sos_next = nx;
            return Action::Send {
                to,
                msg: CorrMsg {
                    dir: Dir::Fwd,
                    kind: CorrKind::Sos,
                    known: Known::default(),
                },
            };
        }
        if self.reply != NO_REPLY {
            let to = self.reply;
            self.reply = NO_REPLY;
            return Action::Send {
                to,
                msg: CorrMsg {
                    dir: Dir::Bwd,
                    kind: CorrKind::Reply,
                    known: Known::default(),
                },
            };
        }
        if self.role != Role::Participant || !self.started || self.done {
            return Action::Wait;
        }
        match p.kind {
            Correction::None => {
                self.done = true;
                Action::Wait
            }
            Correction::Opportunistic { .. } | Correction::Optimized { .. } => self.poll_opportunistic(me, n),
            Correction::Checked => self.poll_checked(p, me, n),
            Correction::FailProof { f } => self.poll_failproof(p, f, me, n),
            Correction::Delayed { .. } => self.poll_delayed(me, n),
        }
    }

    fn send(&mut self, dir: Dir, me: Rank, n: Rank, kind: CorrKind, known: Known<C>) -> Action<CorrMsg<C>> {
        let off = self.off[dir.idx()];
        self.off[dir.idx()] += 1;
        let to = match dir {
            Dir::Fwd => ring::forward(me, off, n),
            Dir::Bwd => ring::backward(me, off, n),
        };
        Action::Send {
            to,
            msg: CorrMsg { dir, kind, known },
        }
    }

    /// Opportunistic: alternate while both sides have offsets left, then finish the other.
    fn poll_opportunistic(&mut self, me: Rank, n: Rank) -> Action<CorrMsg<C>> {
        for _ in 0..2 {
            let dir = self.next;
            self.next = dir.other();
            let i = dir.idx();
            if !self.stopped[i] && self.off[i] <= self.bound[i] {
                return self.send(dir, me, n, CorrKind::Normal, Known::default());
            }
        }
        self.done = true;
        Action::Wait
    }

    /// Checked: a direction stops once it has sent to the nearest participant heard from on
    /// that side (or wrapped around the ring); a stopped direction's slot idles for `o`.
    fn poll_checked(&mut self, p: &CorrParams, me: Rank, n: Rank) -> Action<CorrMsg<C>> {
        for d in [Dir::Fwd, Dir::Bwd] {
            let i = d.idx();
            if self.off[i] > self.bound[i] || self.off[i] >= n {
                self.stopped[i] = true;
            }
        }
        if self.stopped[0] && self.stopped[1] {
            self.done = true;
            return Action::Wait;
        }
        let mut dir = self.next;
        self.next = dir.other();
        if self.stopped[dir.idx()] {
            if p.idle_when_stopped {
                return Action::Sleep(p.o);
            }
            dir = dir.other();
        }
        self.send(dir, me, n, CorrKind::Normal, Known::default())
    }

    /// Failure-proof (FCG Algorithm 3, lines 15–28).
    fn poll_failproof(&mut self, p: &CorrParams, f: u32, me: Rank, n: Rank) -> Action<CorrMsg<C>> {
        self.check_final(f);
        for d in [Dir::Fwd, Dir::Bwd] {
            let i = d.idx();
            // Stop once past the (f+1)-th known g-node on that side (line 25).
            if let Some(far) = self.known[i].get(f as usize) {
                let dist = match d {
                    Dir::Fwd => ring::forward_distance(me, far, n),
                    Dir::Bwd => ring::backward_distance(me, far, n),
                };
                if self.off[i] > dist {
                    self.stopped[i] = true;
                }
            }
        }
        if self.fin[0] && self.fin[1] && self.stopped[0] && self.stopped[1] {
            self.done = true;
            return Action::Wait;
        }
        // A full loop without f + 1 g-nodes on a side: SOS (line 28).
        if self.off[0] > n || self.off[1] > n {
            self.enter_sos(me, n);
            return self.poll(p, me, n);
        }
        let mut dir = self.next;
        self.next = dir.other();
        if self.stopped[dir.idx()] && !p.idle_when_stopped {
            dir = dir.other();
        }
        let i = dir.idx();
        if self.stopped[i] {
            return Action::Sleep(p.o);
        }
        if self.off[i] >= n {
            // Sending to ourselves would be pointless: count the slot and move on.
            self.off[i] += 1;
            return Action::Sleep(p.o);
        }
        // A message travelling `dir` tells its receiver about us and what lies behind us.
        let behind = self.known[dir.other().idx()];
        let cap = (f as usize + 1).min(C);
        let known = match dir {
            Dir::Fwd => behind.with(me, cap, |r| ring::backward_distance(me, r, n)),
            Dir::Bwd => behind.with(me, cap, |r| ring::forward_distance(me, r, n)),
        };
        let kind = if self.fin[i] { CorrKind::Final } else { CorrKind::Normal };
        self.send(dir, me, n, kind, known)
    }

    /// Delayed (CT §3.3): the first message goes left; rightward messages only after the delay
    /// expired without a message from the right, until one arrives.
    fn poll_delayed(&mut self, me: Rank, n: Rank) -> Action<CorrMsg<C>> {
        let b = Dir::Bwd.idx();
        if self.off[b] <= self.bound[b] {
            return self.send(Dir::Bwd, me, n, CorrKind::Normal, Known::default());
        }
        let fw = Dir::Fwd.idx();
        if self.heard_right || self.off[fw] >= n {
            self.done = true;
            self.timer = NO_TIMER;
            return Action::Wait;
        }
        if self.bound[fw] >= n {
            return self.send(Dir::Fwd, me, n, CorrKind::Normal, Known::default());
        }
        Action::Wait
    }
}

#[cfg(test)]
mod tests;
