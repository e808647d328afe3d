//! [`Roots`]: a disagreement on an operation's root is reported once, for as long as the
//! node may hear the operation's datagrams, naming the call's root and the other one.

use super::{NO_ROOT, Roots, WINDOW};

/// The node heard these `(seq, root known, root heard)`.
fn hear(r: &Roots, what: &[(u64, u32, u32)]) {
    r.heard.lock().unwrap().extend_from_slice(what);
}

/// Operation 0 called here with root 0; the other root's datagrams keep coming long after it
/// is over here (late copies, for as long as its slot holds it): one report. (Before, the
/// report was forgotten in the pass that made it once the operation was over, and every
/// later datagram was reported again.)
#[test]
fn late_datagrams_of_the_other_root_are_reported_once() {
    let mut r = Roots::default();
    r.note_call(0, 0);
    hear(&r, &[(0, 0, 1)]);
    assert_eq!(r.take_heard(1, 1), [(0, 0, 1)]);
    for retired in 1..WINDOW as u64 + 3 {
        hear(&r, &[(0, 0, 1), (0, 0, 1)]);
        assert_eq!(r.take_heard(retired.max(1), retired), [], "retired {retired}");
    }
}

/// Heard from root 1 before its call named root 2 (reported at the call, as `(2, 1)`), then
/// root 2's datagrams: the node names the slot's root (1) as known and 2 as heard; no second
/// report, and none with the roots swapped. Without the call's report first, the node's is
/// told with the call's root as `root`.
#[test]
fn a_report_names_the_calls_root_not_the_slots() {
    let mut r = Roots::default();
    r.note_call(0, 2);
    assert!(r.first_report(0), "the call's report");
    hear(&r, &[(0, 1, 2)]);
    assert_eq!(r.take_heard(1, 1), []);

    let mut r = Roots::default();
    r.note_call(0, 2);
    hear(&r, &[(0, 1, 2)]);
    assert_eq!(r.take_heard(1, 0), [(0, 2, 1)]);
}

/// An aborted call's slot names no root: the report names the call's root (the caller's
/// rank) and the datagram's, never `NO_ROOT`.
#[test]
fn an_aborted_call_never_surfaces_no_root() {
    let mut r = Roots::default();
    r.note_call(0, 3);
    hear(&r, &[(0, NO_ROOT, 1)]);
    assert_eq!(r.take_heard(1, 0), [(0, 3, 1)]);
    // Its own root named back to it, with the slot naming none: nothing differs.
    let mut r = Roots::default();
    r.note_call(0, 3);
    hear(&r, &[(0, NO_ROOT, 3)]);
    assert_eq!(r.take_heard(1, 0), []);
}

/// Not yet called: kept for the call (the first other root heard), not reported.
#[test]
fn before_its_call_a_disagreement_waits_for_the_call() {
    let mut r = Roots::default();
    hear(&r, &[(4, 0, 1), (4, 0, 2)]);
    assert_eq!(r.take_heard(4, 0), []);
    assert_eq!(r.other.get(&4), Some(&1));
}
