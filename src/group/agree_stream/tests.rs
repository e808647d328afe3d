use std::time::Duration;

use super::*;
use crate::group::Event;

/// The classes a report has rows for, with their agreement counts.
fn classes(r: &AgreeBenchReport) -> Vec<(&'static str, u64)> {
    r.classes.iter().map(|c| (c.name, c.agreement.len())).collect()
}

/// An agreements-only group's stream with a member killed at agreement 40 returns what
/// `ftcoll agree --kill 2@40` does: the failure-free rows before, the failure-detecting
/// (and later) rows after, the kill's detection and first success, no violation.
#[test]
fn an_agreements_only_stream_with_a_kill_reports_the_kill_classes() {
    let mut g = Group::builder(4)
        .broadcasts(false)
        .agreements(false)
        .failure_detector(Duration::from_micros(200), Duration::from_millis(50))
        .seed(5)
        .build()
        .unwrap();
    let r = g
        .agree_stream(AgreeStream {
            warmup: 10,
            kills: vec![(2, 40)],
            ..AgreeStream::new(200)
        })
        .unwrap();
    assert_eq!(
        (r.disagreements, r.invalid, r.unfinished, r.false_suspicions),
        (0, 0, 0, 0)
    );
    assert_eq!(r.agreements, 210, "warmup included");
    let rows = classes(&r);
    let count = |name| rows.iter().find(|c| c.0 == name).map_or(0, |c| c.1);
    assert_eq!(count("failure-free"), 40, "{rows:?}");
    assert!(count("failure-detecting") >= 1, "{rows:?}");
    assert_eq!(rows.iter().map(|c| c.1).sum::<u64>(), 200, "{rows:?}");
    assert!(r.suspicions >= 1);
    assert!(r.first_suspicion_after_kill.is_some() && r.first_success_after_kill.is_some());
}

/// With two members, the survivor's first successful agreement after the kill follows its
/// own suspicion of the dead one (it cannot decide without it), and so must the report's
/// stamps: the pass that suspects stamped its returns with its clock read before the
/// suspicion's handling, and the first success read earlier than the first suspicion. In
/// process and over UDP.
#[test]
fn the_first_success_after_a_kill_is_not_stamped_before_the_suspicion() {
    for transport in [TransportKind::Inproc, TransportKind::Udp] {
        let mut g = Group::builder(2)
            .transport(transport)
            .broadcasts(false)
            .agreements(false)
            .seed(9)
            .build()
            .unwrap();
        let r = g
            .agree_stream(AgreeStream {
                kills: vec![(1, 30)],
                ..AgreeStream::new(60)
            })
            .unwrap();
        assert_eq!((r.disagreements, r.invalid, r.unfinished), (0, 0, 0), "{transport:?}");
        let (Some(suspicion), Some(success)) = (r.first_suspicion_after_kill, r.first_success_after_kill) else {
            panic!(
                "{transport:?}: no suspicion or success after the kill ({} suspicions)",
                r.suspicions
            );
        };
        assert!(
            success >= suspicion,
            "{transport:?}: first success {success} ns after the kill, first suspicion {suspicion} ns"
        );
    }
}

/// A stream over two workers steps member `r` on worker `r % 2`, as `ftcoll agree` places
/// its nodes.
#[test]
fn a_stream_over_two_workers_places_members_as_agree_does() {
    let mut g = Group::builder(5).workers(2).broadcasts(false).build().unwrap();
    let r = g.agree_stream(AgreeStream::new(50)).unwrap();
    assert_eq!((r.agreements, r.disagreements, r.unfinished), (50, 0, 0));
    let mut placed = g.shared.placed.lock().unwrap().clone();
    placed.sort();
    assert_eq!(placed, [(0, vec![0, 2, 4]), (1, vec![1, 3])]);
}

/// Without broadcasts a group refuses them, and still crashes members and agrees.
#[test]
fn an_agreements_only_group_refuses_broadcasts_and_agrees() {
    let mut g = Group::builder(3).broadcasts(false).build().unwrap();
    assert_eq!(g.broadcast(0, b"x"), Err(GroupError::NoBroadcasts));
    assert!(matches!(
        g.stream(crate::group::Stream::generated(1, 8)),
        Err(GroupError::NoBroadcasts)
    ));
    g.kill(2).unwrap();
    g.agree(0, 0b110).unwrap();
    g.agree(1, 0b011).unwrap();
    let (mut agreed, mut failed) = (0, false);
    while agreed < 2 {
        match g.next_event(Duration::from_secs(20)) {
            Some(Event::Agreed { value, failed: f, .. }) => {
                assert_eq!((value, f), (0b010, vec![2]));
                agreed += 1;
            }
            Some(Event::Failed { rank: 2 }) => failed = true,
            ev => panic!("{ev:?}"),
        }
    }
    assert!(failed && g.is_dead(2));
    assert_eq!(g.agree_stream(AgreeStream::new(5)).err(), Some(GroupError::Dead(2)));
}

/// A group with broadcasts runs an agreement stream beside them and broadcasts after it.
#[test]
fn a_broadcasting_group_runs_an_agreement_stream_and_goes_on() {
    let mut g = Group::local(3).unwrap();
    let r = g.agree_stream(AgreeStream::new(30)).unwrap();
    assert_eq!((r.agreements, r.disagreements, r.invalid, r.unfinished), (30, 0, 0, 0));
    let seq = g.broadcast(1, b"after").unwrap();
    loop {
        match g.next_event(Duration::from_secs(20)) {
            Some(Event::Completed { seq: s, timed_out, .. }) if s == seq => {
                assert!(!timed_out);
                break;
            }
            Some(_) => {}
            None => panic!("the broadcast after the stream never completed"),
        }
    }
}

/// A stream of no agreements is refused, as a [`crate::group::Stream`] of no operations is:
/// it waited `op_timeout` and returned nothing measured.
#[test]
fn a_stream_of_no_agreements_is_refused() {
    let mut g = Group::builder(3).broadcasts(false).agreements(false).build().unwrap();
    assert!(matches!(
        g.agree_stream(AgreeStream {
            op_timeout: Duration::from_secs(5),
            ..AgreeStream::new(0)
        }),
        Err(GroupError::BadStream(e)) if e == "no agreements"
    ));
}
