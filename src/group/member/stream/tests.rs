//! Agreement streams among members of a group of processes (threads here, each with its own
//! sockets, as processes would have), over loopback UDP.

use std::time::Duration;

use super::super::tests::{coordinator, join_all};
use super::{Member, MemberStream};
use crate::group::{AgreeStream, Event, GroupError, MemberSpec};

/// `n` members with streams (and without broadcasts), joined.
fn streaming(n: u32) -> Vec<Member> {
    streaming_with(n, MemberSpec::new(0, n, coordinator()).suspect_after)
}

/// `n` members with streams whose detectors suspect after `suspect_after`, joined.
fn streaming_with(n: u32, suspect_after: Duration) -> Vec<Member> {
    let at = coordinator();
    join_all(
        (0..n)
            .map(|r| MemberSpec {
                broadcasts: false,
                streams: true,
                suspect_after,
                ..MemberSpec::new(r, n, at)
            })
            .collect(),
    )
    .into_iter()
    .map(Result::unwrap)
    .collect()
}

/// Every member runs `streams[rank]` (each on a thread of its own), in rank order.
fn run(members: Vec<Member>, streams: Vec<AgreeStream>) -> Vec<(Member, Result<MemberStream, GroupError>)> {
    let hs: Vec<_> = members
        .into_iter()
        .zip(streams)
        .map(|(mut m, s)| {
            std::thread::spawn(move || {
                let r = m.agree_stream(s);
                (m, r)
            })
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

fn quick(agreements: u64) -> AgreeStream {
    AgreeStream {
        warmup: 20,
        op_timeout: Duration::from_secs(10),
        ..AgreeStream::new(agreements)
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
                (320, 0, true, Some(true)),
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
        let got: Vec<Event> = std::iter::from_fn(|| m.next_event(Duration::from_secs(5)))
            .take_while(|e| !matches!(e, Event::Agreed { id: 0, .. }))
            .chain(None)
            .collect();
        assert!(got.is_empty(), "before the caller's return: {got:?}");
        // Nothing of the streams' own four agreements follows.
        assert_eq!(m.poll(), None);
    }
}

#[test]
fn a_killed_member_dies_and_the_others_go_on_without_it() {
    // Detectors slow enough that only the closed port finds the death within a second.
    let slow = Duration::from_secs(4);
    let members = streaming_with(3, slow);
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
    for s in &r[..2] {
        assert_eq!((s.returned, s.invalid, s.finished), (420, 0, true));
        // A survivor suspects it, or learns of it from an agreement's failed set.
        assert!(s.suspected.iter().all(|&p| p == 2), "{:?}", s.suspected);
        assert!(
            s.first_suspect_ns.is_none_or(|t| t >= killed),
            "suspected before the kill"
        );
        assert_eq!(s.failed, [2], "the last agreement's failed set");
        assert_eq!(s.all_finished, Some(true));
    }
    // Found by the closed port or a probe left unanswered, not by the detector's silence.
    let first = r[..2].iter().filter_map(|s| s.first_suspect_ns).min();
    let took = Duration::from_nanos(first.expect("nobody suspected member 2") - killed);
    assert!(took < slow / 4, "suspected {took:?} after the kill");
    assert_eq!(r[0].digests, r[1].digests);
    // Its stream socket closed with it (the port refuses), and it runs no more streams.
    let (mut m2, _) = out.into_iter().nth(2).unwrap();
    let port = m2.streams.as_ref().unwrap().peers[2];
    let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    probe.connect(port).unwrap();
    probe.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    probe.send(b"anyone?").unwrap();
    let err = probe
        .recv(&mut [0; 16])
        .expect_err("an answer from a dead member's port");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
    match m2.agree_stream(quick(10)) {
        Err(GroupError::BadStream(e)) => assert!(e.contains("died in an earlier stream"), "{e}"),
        other => panic!("{other:?}"),
    }
}

/// A stream given up at its start (the others did not call it in time) leaves its starting
/// agreement in flight: its return, when the others' calls complete it, is not the caller's.
#[test]
fn a_stream_given_up_at_its_start_hands_out_no_return_of_its_own() {
    let mut m = streaming(2);
    let alone = AgreeStream {
        op_timeout: Duration::from_millis(200),
        ..quick(10)
    };
    match m[0].agree_stream(alone) {
        Err(GroupError::BadStream(e)) => assert!(e.contains("not every member called"), "{e}"),
        other => panic!("{other:?}"),
    }
    // Member 1's own first agreement meets member 0's starting one.
    assert_eq!(m[1].agree(!0).unwrap(), 0);
    let got = m[1].next_event(Duration::from_secs(10));
    assert!(matches!(got, Some(Event::Agreed { id: 0, .. })), "{got:?}");
    assert_eq!(m[0].next_event(Duration::from_secs(1)), None);
    // Member 0's next own agreement is its id 1, and is handed out.
    assert_eq!(m[0].agree(!0).unwrap(), 1);
    assert_eq!(m[1].agree(!0).unwrap(), 1);
    let got = m[0].next_event(Duration::from_secs(10));
    assert!(matches!(got, Some(Event::Agreed { id: 1, .. })), "{got:?}");
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

#[test]
fn a_member_without_streams_refuses_one() {
    let at = coordinator();
    let mut members: Vec<Member> = join_all(
        (0..2)
            .map(|r| MemberSpec {
                broadcasts: false,
                ..MemberSpec::new(r, 2, at)
            })
            .collect(),
    )
    .into_iter()
    .map(Result::unwrap)
    .collect();
    assert!(matches!(members[0].agree_stream(quick(10)), Err(GroupError::NoStreams)));
    // Bad settings are refused before any agreement is entered.
    let bad = AgreeStream {
        kills: vec![(5, 1)],
        ..quick(10)
    };
    let mut with = streaming(2);
    assert!(matches!(with[0].agree_stream(bad), Err(GroupError::BadStream(_))));
    assert_eq!(with[0].poll(), None);
    drop(members.pop());
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
