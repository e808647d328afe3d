//! Agreement streams among members of a group of processes (threads here, each with its own
//! sockets, as processes would have), over loopback UDP.

use std::time::Duration;

use super::super::tests::{coordinator, join_all};
use super::{Member, MemberStream};
use crate::group::{AgreeStream, Event, GroupError, MemberSpec};

/// `n` members with streams (and without broadcasts), joined.
fn streaming(n: u32) -> Vec<Member> {
    joined(n, |s| s)
}

/// `n` members with streams, their specs changed by `f`, joined.
fn joined(n: u32, f: impl Fn(MemberSpec) -> MemberSpec) -> Vec<Member> {
    let at = coordinator();
    join_all(
        (0..n)
            .map(|r| {
                f(MemberSpec {
                    broadcasts: false,
                    streams: true,
                    ..MemberSpec::new(r, n, at)
                })
            })
            .collect(),
    )
    .into_iter()
    .map(Result::unwrap)
    .collect()
}

/// Every member runs `streams[rank]` (each on a thread of its own, member `r` after
/// `delays[r]` if given), in rank order.
fn run(members: Vec<Member>, streams: Vec<AgreeStream>) -> Vec<(Member, Result<MemberStream, GroupError>)> {
    run_after(members, streams, &[])
}

fn run_after(
    members: Vec<Member>,
    streams: Vec<AgreeStream>,
    delays: &[Duration],
) -> Vec<(Member, Result<MemberStream, GroupError>)> {
    let n = members.len();
    let (tx, rx) = std::sync::mpsc::channel();
    for (r, (mut m, s)) in members.into_iter().zip(streams).enumerate() {
        let delay = delays.get(r).copied().unwrap_or_default();
        let tx = tx.clone();
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            let got = m.agree_stream(s);
            let _ = tx.send((r, m, got));
        });
    }
    // A collective that never returns (a member's start or end not matched) fails here
    // instead of hanging the test run.
    let mut out: Vec<_> = (0..n)
        .map(|_| {
            rx.recv_timeout(Duration::from_secs(120))
                .expect("a member's stream did not return in 120 s")
        })
        .collect();
    out.sort_by_key(|(r, _, _)| *r);
    out.into_iter().map(|(_, m, got)| (m, got)).collect()
}

fn quick(agreements: u64) -> AgreeStream {
    AgreeStream {
        warmup: 20,
        op_timeout: Duration::from_secs(10),
        ..AgreeStream::new(agreements)
    }
}

/// Every member enters one more agreement of its own: each must get id `id` and see it
/// return (the members' ids are in step).
fn agree_in_step(members: &mut [Member], id: u64) {
    for m in members.iter_mut() {
        assert_eq!(m.agree(!0).unwrap(), id, "member {}", m.rank());
    }
    for m in members.iter_mut() {
        let got = m.next_event(Duration::from_secs(20));
        assert!(
            matches!(got, Some(Event::Agreed { id: i, .. }) if i == id),
            "member {}: {got:?}",
            m.rank()
        );
    }
}

#[test]
fn members_agree_on_every_value_of_a_stream_and_of_the_next() {
    let mut members = streaming(3);
    // A call of the caller's own before the stream: its return is handed out afterwards,
    // and the stream's own agreements are not.
    for m in &mut members {
        assert_eq!(m.agree(!0).unwrap(), 0);
    }
    for round in 0..2 {
        let out = run(members, vec![quick(300); 3]);
        let digests = out[0].1.as_ref().unwrap().digests.clone();
        assert!(!digests.is_empty());
        for (m, r) in &out {
            let r = r
                .as_ref()
                .unwrap_or_else(|e| panic!("round {round}, member {}: {e}", m.rank()));
            assert_eq!(
                (r.returned, r.invalid, r.finished, r.all_finished),
                (320, 0, true, true),
                "round {round}, member {}",
                m.rank()
            );
            assert_eq!(
                r.digests,
                digests,
                "round {round}: member {} returned other outcomes",
                m.rank()
            );
            assert_eq!(r.latency.len(), 300, "measured returns only");
            assert!(r.suspected.is_empty() && r.killed_ns.is_none() && r.fenced_by.is_none());
            assert!(r.messages > 0 && r.seconds > 0.0);
        }
        members = out.into_iter().map(|(m, _)| m).collect();
    }
    for m in &mut members {
        let got = m.next_event(Duration::from_secs(5));
        assert!(matches!(got, Some(Event::Agreed { id: 0, .. })), "{got:?}");
        // Nothing of the streams' own four agreements follows.
        assert_eq!(m.poll(), None);
    }
    // Each stream used two ids: the caller's next is 5, at every member.
    agree_in_step(&mut members, 5);
}

#[test]
fn a_killed_member_dies_and_the_others_go_on_without_it() {
    // Detectors slow enough that only the closed port (or a probe it leaves unanswered)
    // finds the death within a second.
    let slow = Duration::from_secs(4);
    let members = joined(3, |s| MemberSpec {
        suspect_after: slow,
        ..s
    });
    let s = AgreeStream {
        kills: vec![(2, 100)],
        ..quick(400)
    };
    let out = run(members, vec![s; 3]);
    let r: Vec<&MemberStream> = out.iter().map(|(_, r)| r.as_ref().unwrap()).collect();
    let killed = r[2].killed_ns.expect("member 2 was killed");
    assert!(
        !r[2].finished && r[2].returned == 120,
        "it died entering agreement 120: {}",
        r[2].returned
    );
    for s in &r {
        assert!(s.all_finished, "a killed member did its part");
    }
    for s in &r[..2] {
        assert_eq!((s.returned, s.invalid, s.finished), (420, 0, true));
        // A survivor suspects it, or learns of it from an agreement's failed set.
        assert!(s.suspected.iter().all(|&p| p == 2), "{:?}", s.suspected);
        assert!(
            s.first_suspect_ns.is_none_or(|t| t >= killed),
            "suspected before the kill"
        );
        assert_eq!(s.failed, [2], "the last agreement's failed set");
    }
    let first = r[..2].iter().filter_map(|s| s.first_suspect_ns).min();
    let took = Duration::from_nanos(first.expect("nobody suspected member 2") - killed);
    assert!(took < slow / 4, "suspected {took:?} after the kill");
    assert_eq!(r[0].digests, r[1].digests);
    // Its stream socket closed with it (the port refuses).
    let mut members: Vec<Member> = out.into_iter().map(|(m, _)| m).collect();
    let port = members[0].streams.as_ref().unwrap().peers[2];
    let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    probe.connect(port).unwrap();
    probe.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    probe.send(b"anyone?").unwrap();
    let err = probe
        .recv(&mut [0; 16])
        .expect_err("an answer from a dead member's port");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
    // It runs no more streams, and says why; the others are told at once that one could
    // not, and every member's agreement ids stay in step.
    let out = run(members, vec![quick(10); 3]);
    for (m, r) in &out {
        let want = if m.rank() == 2 {
            "died in an earlier stream"
        } else {
            "or one could not run it"
        };
        match r {
            Err(GroupError::BadStream(e)) => assert!(e.contains(want), "member {}: {e}", m.rank()),
            other => panic!("member {}: {other:?}", m.rank()),
        }
    }
    members = out.into_iter().map(|(m, _)| m).collect();
    agree_in_step(&mut members, 3);
}

#[test]
fn members_called_with_different_settings_all_fail_at_once() {
    let members = streaming(3);
    let mut streams = vec![quick(200); 3];
    streams[1].agreements = 201;
    let out = run(members, streams);
    for (m, r) in &out {
        match r {
            Err(GroupError::BadStream(e)) => assert!(e.contains("different settings"), "member {}: {e}", m.rank()),
            other => panic!("member {}: {other:?}", m.rank()),
        }
    }
}

/// One member's settings cannot run (a kill of no member; then no agreements at all): it
/// says so, the others fail their start, and the members' agreement ids stay in step (its
/// start was entered too).
#[test]
fn a_member_that_cannot_run_the_stream_fails_every_members_start() {
    let mut members = streaming(3);
    let no_member = AgreeStream {
        kills: vec![(5, 1)],
        ..quick(50)
    };
    let nothing = AgreeStream {
        agreements: 0,
        ..quick(50)
    };
    for (round, (bad, says)) in [(no_member, "bad --kill 5@1"), (nothing, "no agreements")]
        .into_iter()
        .enumerate()
    {
        let mut streams = vec![quick(50); 3];
        streams[1] = bad;
        let out = run(members, streams);
        for (m, r) in &out {
            let want = if m.rank() == 1 { says } else { "different settings" };
            match r {
                Err(GroupError::BadStream(e)) => assert!(e.contains(want), "member {}: {e}", m.rank()),
                other => panic!("member {}: {other:?}", m.rank()),
            }
        }
        members = out.into_iter().map(|(m, _)| m).collect();
        // Each round: its start, then this agreement.
        agree_in_step(&mut members, 2 * round as u64 + 1);
    }
}

/// A collective waits for every member's call: one that calls later than the stream's
/// `op_timeout` is waited for (the start has no timeout).
#[test]
fn a_member_that_calls_late_is_waited_for() {
    let members = streaming(3);
    let s = AgreeStream {
        op_timeout: Duration::from_millis(200),
        ..quick(100)
    };
    let late = [Duration::ZERO, Duration::ZERO, Duration::from_millis(800)];
    for (m, r) in run_after(members, vec![s; 3], &late) {
        let r = r.unwrap_or_else(|e| panic!("member {}: {e}", m.rank()));
        assert_eq!((r.returned, r.invalid, r.all_finished), (120, 0, true));
    }
}

/// Broadcasts and streams in one group, a broadcast either side of a stream.
#[test]
fn members_broadcast_and_stream_in_one_group() {
    let members = joined(3, |s| MemberSpec { broadcasts: true, ..s });
    let hs: Vec<_> = members
        .into_iter()
        .map(|mut m| {
            std::thread::spawn(move || {
                m.broadcast(1, b"before").unwrap();
                let r = m.agree_stream(quick(100)).unwrap();
                m.broadcast(2, b"after").unwrap();
                let mut got = Vec::new();
                while got.len() < 2 {
                    match m.next_event(Duration::from_secs(20)) {
                        Some(Event::Delivered { root, bytes, .. }) => got.push((root, bytes)),
                        Some(_) => {}
                        None => panic!("member {}: delivered {got:?} only", m.rank()),
                    }
                }
                (r, got, m)
            })
        })
        .collect();
    let done: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    for (r, got, m) in &done {
        assert_eq!(
            (r.returned, r.invalid, r.all_finished),
            (120, 0, true),
            "member {}",
            m.rank()
        );
        assert_eq!(got, &[(1, b"before".to_vec()), (2, b"after".to_vec())]);
    }
}

#[test]
fn a_member_without_streams_refuses_one() {
    let mut members = joined(2, |s| MemberSpec { streams: false, ..s });
    assert!(matches!(members[0].agree_stream(quick(10)), Err(GroupError::NoStreams)));
    // No agreement was entered: the ids are still at 0.
    agree_in_step(&mut members, 0);
}

#[test]
fn a_member_joined_with_streams_is_refused_by_a_rank_0_without() {
    let at = coordinator();
    let specs = (0..2)
        .map(|r| MemberSpec {
            broadcasts: false,
            streams: r == 1,
            timeout: Duration::from_secs(5),
            ..MemberSpec::new(r, 2, at)
        })
        .collect();
    let got = join_all(specs);
    match &got[1] {
        Err(GroupError::Setup(e)) => assert!(e.contains("agreement streams off at rank 0, on here"), "{e}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("joined"),
    }
    assert!(got[0].is_err(), "rank 0's group cannot form");
}

/// The same stream in two shells, a group of processes' members and a `Group`'s threads,
/// with the same seed: every agreement's outcome (value and sets, through the members'
/// digests) is the same.
#[test]
fn members_return_what_a_group_of_threads_returns_for_the_same_seed() {
    let members = joined(3, |s| MemberSpec { seed: 7, ..s });
    let s = quick(5000);
    let out = run(members, vec![s.clone(); 3]);
    // An agreements-only group of three threads over UDP with `seed`.
    let threads_of = |seed| {
        crate::group::Group::builder(3)
            .transport(crate::runtime::TransportKind::Udp)
            .broadcasts(false)
            .agreements(false)
            .seed(seed)
            .build()
            .unwrap()
    };
    let threads = threads_of(7).agree_stream(s).unwrap();
    assert_eq!(
        (threads.agreements, threads.disagreements, threads.invalid),
        (5020, 0, 0)
    );
    assert_eq!(threads.digests.len(), 2, "5020 agreements: two blocks");
    for (m, r) in &out {
        assert_eq!(r.as_ref().unwrap().digests, threads.digests, "member {}", m.rank());
    }
    // Another seed, other values: the digests tell them apart.
    assert_ne!(
        threads_of(8).agree_stream(quick(5000)).unwrap().digests,
        threads.digests
    );
}
