//! Online classification of `ftcoll agree`'s returns in constant memory: a ring of the
//! agreements still in flight, indexed by agreement id, each folded into the histograms and
//! counters as soon as no more returns can come for it.
//!
//! Why a small ring suffices (blocking agreements, ERA §2): a process decides agreement `i`
//! only after every process not known dead contributed to it (the UP rule gathers the whole
//! live tree), so when any node returns `i + 1` every live node has entered `i + 1`, i.e.
//! returned `i`. A node hands its returns over in batches of at most [`BATCH`], each before
//! it contributes to the agreement after the batch's last (so the shared state is touched
//! once per batch, not per agreement), and batches are folded in the order they were handed
//! over; no one can return `i + BATCH + 1` before the batch holding a node's return of `i`
//! was handed over, so agreement `i` is final once a return of `i + FINAL` arrives
//! ([`FINAL`] = `BATCH + 2`, one more for a node one agreement ahead). A node that is being made dead by a (false) suspicion may still
//! record late: such returns are counted as `late` and left out. A node far ahead
//! (impossible while the others live) only finalizes what is behind it early, so the ring
//! never holds more than `FINAL + 1` ids.

use hdrhistogram::Histogram;

use crate::protocol::Rank;
use crate::protocol::agree::AgreeId;

/// Returns a node may hold before it must hand them over (see the module comment).
pub const BATCH: usize = 256;
/// Agreement `i` is final once a return of `i + FINAL` arrives.
pub const FINAL: u64 = BATCH as u64 + 2;
/// Slots of the ring (`FINAL + 1` ids at most are in it; a power of two above that).
pub const RING: usize = 512;
const _: () = assert!(RING as u64 > FINAL);

/// One node's return of one agreement (its stream format is [`crate::wire::stream`]'s).
pub use crate::wire::stream::Rec;

/// Latencies of one class of agreements, in nanoseconds.
pub struct Class {
    pub name: &'static str,
    /// Per agreement: first entry to the last live return.
    pub agreement: Histogram<u64>,
    /// Per node and agreement: entry to return.
    pub node: Histogram<u64>,
}

/// The paper's §5.1 classes, in this order.
pub const CLASS_NAMES: [&str; 4] = ["failure-free", "failure-detecting", "stabilizing", "post-failure"];

/// A histogram of 1 ns .. 2^40 ns at 3 significant digits.
pub fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 1 << 40, 3).expect("valid bounds")
}

struct Slot {
    id: AgreeId,
    used: bool,
    recs: Vec<(Rank, Rec)>,
}

/// The ring and everything already folded out of it.
pub struct Window {
    slots: Vec<Slot>,
    /// Every id below is final.
    below: AgreeId,
    /// Ids below this are warm-up: checked, not timed.
    warmup: AgreeId,
    /// The first agreement a killed node did not enter.
    kill_id: Option<AgreeId>,
    /// The failure-detecting agreement: the first from `kill_id` on reporting a failure.
    pub detecting: Option<AgreeId>,
    /// The first agreement from `kill_id` on that succeeded everywhere: (id, last return).
    pub first_success: Option<(AgreeId, u64)>,
    pub classes: Vec<Class>,
    /// Agreements where two returns differ (must be 0).
    pub disagreements: u64,
    /// Returns for an agreement already final (see the module comment).
    pub late: u64,
    /// Agreements finalized.
    pub agreements: u64,
}

impl Window {
    pub fn new(warmup: AgreeId, kill_id: Option<AgreeId>) -> Self {
        Self {
            slots: (0..RING)
                .map(|_| Slot {
                    id: 0,
                    used: false,
                    recs: Vec::new(),
                })
                .collect(),
            below: 0,
            warmup,
            kill_id,
            detecting: None,
            first_success: None,
            classes: CLASS_NAMES
                .iter()
                .map(|&name| Class {
                    name,
                    agreement: hist(),
                    node: hist(),
                })
                .collect(),
            disagreements: 0,
            late: 0,
            agreements: 0,
        }
    }

    /// Adds `rank`'s return of agreement `id`; `dead(r, i)` tells whether node `r`'s return
    /// of agreement `i` must be left out (see `Window::finalize`).
    pub fn record(&mut self, rank: Rank, id: AgreeId, r: Rec, dead: &dyn Fn(Rank, AgreeId) -> bool) {
        if id < self.below {
            self.late += 1;
            return;
        }
        // Everything `FINAL` ids back is final: the ring then holds ids `id - FINAL + 1 ..= id`.
        // Only ids below `below + RING` can hold returns: those are finalized in order, and
        // the rest of a longer jump (an id far ahead, from a faulty or hostile stream) is
        // skipped, not walked one id at a time.
        if let Some(to) = id.checked_sub(FINAL - 1).filter(|&to| to > self.below) {
            let walk = to.min(self.below.saturating_add(RING as u64));
            while self.below < walk {
                self.finalize(self.below, dead);
            }
            self.below = to;
        }
        let s = &mut self.slots[(id % RING as u64) as usize];
        if !s.used {
            s.used = true;
            s.id = id;
            s.recs.clear();
        }
        s.recs.push((rank, r));
    }

    /// Finalizes every agreement still in the ring (the end of the run).
    pub fn flush(&mut self, dead: &dyn Fn(Rank, AgreeId) -> bool) {
        let top = self
            .slots
            .iter()
            .filter(|s| s.used)
            .map(|s| s.id + 1)
            .max()
            .unwrap_or(0);
        while self.below < top {
            self.finalize(self.below, dead);
        }
    }

    /// Folds agreement `id` into the counters. ERA's agreement is non-uniform (§1: "all
    /// surviving processes must decide" alike): a node that decided and died before its
    /// decision spread may have returned something else, so the returns `dead` names (a dead
    /// node's, from the agreement before its death on) do not count.
    fn finalize(&mut self, id: AgreeId, dead: &dyn Fn(Rank, AgreeId) -> bool) {
        self.below = self.below.max(id + 1);
        let k = (id % RING as u64) as usize;
        if !self.slots[k].used || self.slots[k].id != id {
            return;
        }
        self.slots[k].used = false;
        // One pass: drop the returns that do not count, then fold the rest.
        let slot = &mut self.slots[k];
        slot.recs.retain(|(r, _)| !dead(*r, id));
        let Some(&(_, first)) = slot.recs.first() else { return };
        let (mut disagree, mut any_fail) = (false, false);
        let (mut first_entry, mut last_ret) = (u64::MAX, 0);
        for (_, r) in &slot.recs {
            disagree |= r.fp != first.fp;
            any_fail |= !r.ok;
            first_entry = first_entry.min(r.entry);
            last_ret = last_ret.max(r.ret);
        }
        self.agreements += 1;
        self.disagreements += u64::from(disagree);
        let after_kill = self.kill_id.is_some_and(|k| id >= k);
        if after_kill && self.detecting.is_none() && any_fail {
            self.detecting = Some(id);
        }
        if after_kill && self.first_success.is_none() && !any_fail {
            self.first_success = Some((id, last_ret));
        }
        if id < self.warmup {
            return;
        }
        let c = match self.detecting {
            Some(d) if id == d => 1,
            Some(d) if id == d + 1 => 2,
            Some(d) if id > d + 1 => 3,
            _ => 0,
        };
        let class = &mut self.classes[c];
        let _ = class.agreement.record(last_ret.saturating_sub(first_entry).max(1));
        for (_, rec) in &self.slots[k].recs {
            let _ = class.node.record(rec.ret.saturating_sub(rec.entry).max(1));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A return (also for the tests of [`crate::runtime::agree_stream`] and `agree_procs`).
    pub(crate) fn rec(entry: u64, ret: u64, fp: u64, ok: bool) -> Rec {
        Rec { entry, ret, fp, ok }
    }

    #[test]
    fn classes_follow_the_detecting_agreement_in_constant_memory() {
        // 3 nodes, 1000 agreements, a kill at 500 first reported in 501 (not acknowledged),
        // then acknowledged from 502 on. Nodes interleave as the runtime's do: one return of
        // i + 1 may come before another's return of i.
        let mut w = Window::new(10, Some(500));
        let ret = |r: u32, id: u64| {
            let ok = id != 501;
            rec(id * 100, id * 100 + 10 + u64::from(r), 7 ^ u64::from(ok), ok)
        };
        for i in 0..1000u64 {
            w.record(0, i, ret(0, i), &|_, _| false);
            w.record(1, i, ret(1, i), &|_, _| false);
            if i > 0 {
                w.record(2, i - 1, ret(2, i - 1), &|_, _| false);
            }
        }
        w.record(2, 999, ret(2, 999), &|_, _| false);
        w.flush(&|_, _| false);
        assert_eq!(w.agreements, 1000);
        assert_eq!(w.disagreements, 0);
        assert_eq!(w.late, 0);
        assert_eq!(w.detecting, Some(501));
        assert_eq!(w.first_success, Some((500, 500 * 100 + 12)));
        let counts: Vec<u64> = w.classes.iter().map(|c| c.agreement.len()).collect();
        assert_eq!(counts, vec![491, 1, 1, 497]);
        assert_eq!(w.classes[3].node.len(), 3 * 497);
        // Per agreement: first entry to last return (node 2 returns 12 ns after entry).
        assert_eq!(w.classes[0].agreement.max(), 12);
        assert!(w.slots.iter().all(|s| s.recs.capacity() <= 4), "slots stay small");
    }

    #[test]
    fn a_different_outcome_is_a_disagreement_and_a_stale_return_is_late() {
        let mut w = Window::new(0, None);
        w.record(0, 0, rec(0, 5, 1, true), &|_, _| false);
        w.record(1, 0, rec(0, 5, 2, true), &|_, _| false);
        w.record(0, 1, rec(5, 9, 1, true), &|_, _| false);
        w.record(0, FINAL, rec(9, 12, 1, true), &|_, _| false);
        w.record(1, 0, rec(0, 5, 1, true), &|_, _| false);
        w.flush(&|_, _| false);
        assert_eq!((w.agreements, w.disagreements, w.late), (3, 1, 1));
    }

    #[test]
    fn a_dead_nodes_return_does_not_count() {
        // Non-uniform agreement: node 2 decided alone and died.
        let mut w = Window::new(0, None);
        let dead = |r: Rank, _: AgreeId| r == 2;
        w.record(2, 0, rec(0, 5, 9, true), &dead);
        w.record(0, 0, rec(0, 7, 1, true), &dead);
        w.record(1, 0, rec(0, 8, 1, true), &dead);
        w.flush(&dead);
        assert_eq!((w.agreements, w.disagreements), (1, 0));
        assert_eq!(w.classes[0].node.len(), 2);
        assert_eq!(w.classes[0].agreement.max(), 8);
    }

    #[test]
    fn a_node_far_ahead_finalizes_what_is_behind_it() {
        // It cannot happen while the others live, but must not break the ring.
        let mut w = Window::new(0, None);
        w.record(0, 0, rec(0, 1, 1, true), &|_, _| false);
        w.record(1, RING as u64 + 5, rec(0, 1, 1, true), &|_, _| false);
        w.record(0, 3, rec(0, 1, 1, true), &|_, _| false);
        w.flush(&|_, _| false);
        assert_eq!((w.agreements, w.late), (2, 1));
        assert!(w.slots.iter().all(|s| !s.used));
    }

    /// An id far ahead (a faulty or hostile stream line: `wire::stream` takes any id) is
    /// reached in one step, the ring's returns finalized in order on the way: the window
    /// walked the gap one id at a time (2^62 steps here, a hang).
    #[test]
    fn an_id_far_ahead_is_reached_without_walking_the_gap() {
        let mut w = Window::new(0, None);
        w.record(0, 0, rec(0, 1, 1, true), &|_, _| false);
        w.record(0, 1, rec(1, 2, 1, true), &|_, _| false);
        let far = 1u64 << 62;
        w.record(0, far, rec(2, 3, 1, true), &|_, _| false);
        assert_eq!(w.below, far - (FINAL - 1), "everything FINAL back is final");
        assert_eq!(w.agreements, 2, "the two behind it counted, in order");
        w.record(0, far + 7, rec(3, 4, 1, true), &|_, _| false);
        w.flush(&|_, _| false);
        assert_eq!((w.agreements, w.late), (4, 0));
    }
}
