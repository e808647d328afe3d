//! Members that disagree where they must not: a collective broadcast whose callers name
//! different roots (reported, [`Event::RootMismatch`]), and a member that joins with another
//! broadcast algorithm or without broadcasts (refused at once by rank 0's rendezvous, naming
//! both). Over loopback UDP, threads as processes.

use std::time::{Duration, Instant};

use super::tests::{coordinator, join_all};
use super::{Member, MemberSpec};
use crate::group::{Event, GroupError};
use crate::protocol::bcast::algo::Algo;
use crate::protocol::bcast::corrected_gossip::Variant;

/// Members with a slow failure detector (a member's thread is stalled on purpose here).
fn patient(r: u32, n: u32, at: std::net::SocketAddr) -> MemberSpec {
    MemberSpec {
        suspect_after: Duration::from_secs(8),
        op_timeout: Duration::from_secs(5),
        timeout: Duration::from_secs(20),
        ..MemberSpec::new(r, n, at)
    }
}

/// `n` [`patient`] members, joined.
fn patient_group(n: u32) -> Vec<Member> {
    let at = coordinator();
    join_all((0..n).map(|r| patient(r, n, at)).collect())
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

/// What member `m` saw of broadcast `seq` until it was over there (20 s at most): its
/// deliveries `(root, bytes)`, its root mismatches `(root, heard)` and its completion `(root,
/// timed_out)`.
type Outcome = (Vec<(u32, Vec<u8>)>, Vec<(u32, u32)>, (u32, bool));

fn outcome(m: &mut Member, seq: u64) -> Outcome {
    outcome_until(m, seq, false)
}

/// [`outcome`], waiting past its completion for a root mismatch (`told`: the other root's
/// datagrams may come after this member's own broadcast is over).
fn outcome_until(m: &mut Member, seq: u64, told: bool) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut got, mut mismatches, mut over) = (Vec::new(), Vec::new(), None);
    loop {
        if let Some(o) = over
            && (!told || !mismatches.is_empty())
        {
            return (got, mismatches, o);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match m.next_event(left) {
            Some(Event::Delivered {
                root, seq: s, bytes, ..
            }) if s == seq => got.push((root, bytes)),
            Some(Event::RootMismatch {
                member,
                seq: s,
                root,
                heard,
            }) if s == seq => {
                assert_eq!(member, m.rank());
                mismatches.push((root, heard));
            }
            Some(Event::Completed {
                root,
                seq: s,
                timed_out,
            }) if s == seq => over = Some((root, timed_out)),
            Some(Event::Failed { rank }) => panic!("member {}: member {rank} failed", m.rank()),
            Some(e) => panic!("member {}: unexpected {e:?}", m.rank()),
            None => panic!("member {}: broadcast {seq} not over (or not told) in 20 s", m.rank()),
        }
    }
}

/// Two members call their first broadcast naming themselves as its root, member 1 before
/// member 0 can hear it (member 0's thread is stalled, so member 1's datagram waits in its
/// socket until its own call is in): each starts its own and drops the other's, and each is
/// told, once, which root it named and which it heard (member 1 after its own broadcast is
/// over there, when member 0's datagram comes). (Before, each delivered its own bytes
/// and reported the broadcast complete, silently.)
#[test]
fn members_that_name_different_roots_for_one_broadcast_are_told() {
    let mut ms = patient_group(2);
    ms[0].stall(Duration::from_secs(2));
    assert_eq!(ms[0].broadcast(0, b"zero").unwrap(), 0);
    assert_eq!(ms[1].broadcast(1, b"one").unwrap(), 0);
    for m in ms.iter_mut() {
        let me = m.rank();
        let (got, mismatches, _) = outcome_until(m, 0, true);
        assert_eq!(mismatches, [(me, 1 - me)], "member {me}");
        // Only its own bytes: the other root's datagrams were dropped.
        assert!(got.iter().all(|(r, _)| *r == me), "member {me}: {got:?}");
        let c = m.counters().unwrap();
        assert!(c.root_mismatch >= 1, "member {me}: {c:?}");
        assert_eq!(c.invalid, 0, "member {me}: counted apart from invalid datagrams");
    }
    // Later copies of the other root's datagrams (retransmissions, corrections) are not
    // reported again, nor with the roots swapped.
    let quiet = Instant::now() + Duration::from_secs(1);
    for m in ms.iter_mut() {
        while let Some(e) = m.next_event(quiet.saturating_duration_since(Instant::now())) {
            assert!(
                !matches!(e, Event::RootMismatch { .. }),
                "member {}: reported again: {e:?}",
                m.rank()
            );
        }
    }
}

/// A member whose call names another root than the one it already heard the broadcast from
/// (and delivered, before its call) is told at its call, even once the broadcast is over
/// there; the next broadcast, named alike by all, goes on as usual.
#[test]
fn a_member_whose_late_call_names_another_root_than_it_heard_is_told() {
    let mut ms = patient_group(3);
    ms[0].broadcast(0, b"zero").unwrap();
    ms[1].broadcast(0, b"").unwrap();
    for m in ms.iter_mut().take(2) {
        let (got, mismatches, over) = outcome(m, 0);
        assert_eq!(
            (got, mismatches, over),
            (vec![(0, b"zero".to_vec())], vec![], (0, false))
        );
    }
    // Member 2 has not called: it forwarded, delivered and finished root 0's broadcast.
    let (got, mismatches, over) = outcome(&mut ms[2], 0);
    assert_eq!(
        (got, mismatches, over),
        (vec![(0, b"zero".to_vec())], vec![], (0, false))
    );
    assert_eq!(ms[2].broadcast(2, b"two").unwrap(), 0);
    let told = ms[2].next_event(Duration::from_secs(20));
    assert_eq!(
        told,
        Some(Event::RootMismatch {
            member: 2,
            seq: 0,
            root: 2,
            heard: 0,
        })
    );
    for m in ms.iter_mut() {
        let r = m.rank();
        m.broadcast(1, if r == 1 { b"one" } else { b"" }).unwrap();
    }
    for m in ms.iter_mut() {
        let (got, mismatches, over) = outcome(m, 1);
        assert_eq!(
            (got, mismatches, over),
            (vec![(1, b"one".to_vec())], vec![], (1, false)),
            "member {}",
            m.rank()
        );
    }
}

/// A member started with another count of members than rank 0's is refused at once, naming
/// both counts (before, its sockets joined as other members' ranks: its broadcast socket's
/// `n' + r` is another member's slot).
#[test]
fn a_member_with_another_count_of_members_is_refused_naming_both() {
    let at = coordinator();
    let zero = MemberSpec {
        timeout: Duration::from_secs(3),
        ..MemberSpec::new(0, 2, at)
    };
    let one = MemberSpec {
        timeout: Duration::from_secs(60),
        ..MemberSpec::new(1, 3, at)
    };
    let (one, zero) = refused_pair(zero, one);
    assert!(one.contains("refused this member"), "{one}");
    assert!(one.contains("2 members at rank 0, 3 here"), "{one}");
    assert!(zero.contains("rank 0 refused member 1"), "{zero}");
}

/// The one-line error of a join refused for another group shape, and of rank 0's join, which
/// gave up when its rendezvous refused that member.
fn refused_pair(zero: MemberSpec, one: MemberSpec) -> (String, String) {
    let zero = std::thread::spawn(move || Member::join(zero));
    let one = match Member::join(one) {
        Err(GroupError::Setup(e)) => e,
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("member 1 joined a group it differs from"),
    };
    let zero = match zero.join().unwrap() {
        Err(GroupError::Setup(e)) => e,
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("rank 0 joined without member 1"),
    };
    assert!(!one.contains('\n') && !zero.contains('\n'), "{one}\n{zero}");
    (one, zero)
}

/// A member that joins with another broadcast algorithm than rank 0's, or without broadcasts,
/// is refused by rank 0's rendezvous and fails at once, naming both (not after its join
/// timeout of a minute: before, it joined and then never delivered, only timed out); rank 0's
/// join gives up then too (the group cannot form), saying whom it refused, not after its own
/// timeout (it waited for it, 3 s here, and a member slower than that to arrive under a loaded
/// CI never heard a challenge: a failure seen once).
#[test]
fn a_member_with_another_algorithm_or_without_broadcasts_is_refused_naming_both() {
    let gossip = Algo::CorrectedGossip {
        variant: Variant::Ccg,
        t: 20,
    };
    for other in [
        MemberSpec {
            algo: gossip,
            ..MemberSpec::new(1, 2, coordinator())
        },
        MemberSpec {
            broadcasts: false,
            ..MemberSpec::new(1, 2, coordinator())
        },
    ] {
        let at = coordinator();
        let zero = MemberSpec {
            timeout: Duration::from_secs(60),
            ..MemberSpec::new(0, 2, at)
        };
        let one = MemberSpec {
            coordinator: at,
            timeout: Duration::from_secs(60),
            ..other.clone()
        };
        let (one, zero) = refused_pair(zero, one);
        assert!(one.contains("refused this member"), "{one}");
        assert!(!one.contains("missing after"), "refused, not timed out: {one}");
        let here = if other.broadcasts {
            "corrected-gossip variant=ccg"
        } else {
            "none (agreements only)"
        };
        assert!(one.contains("corrected-tree") && one.contains(here), "{one}");
        assert!(zero.contains("rank 0 refused member 1"), "{zero}");
        assert!(zero.contains("given up") && !zero.contains("missing after"), "{zero}");
    }
}
