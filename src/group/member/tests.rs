//! Members of a group of processes (threads here, each with its own sockets, as processes
//! would have), over loopback UDP.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::{Member, MemberSpec};
use crate::group::{Event, GroupError};
use crate::transport::udp::auth::AuthKey;

/// A loopback address with a port free a moment ago, for rank 0's rendezvous.
fn coordinator() -> SocketAddr {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap()
}

/// Every member of `specs` joins at once (each join waits for all); in rank order.
fn join_all(specs: Vec<MemberSpec>) -> Vec<Result<Member, GroupError>> {
    let hs: Vec<_> = specs
        .into_iter()
        .map(|s| std::thread::spawn(move || Member::join(s)))
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Waits for member `m`'s return of agreement `id`: its value and failed set; the members it
/// reported failed meanwhile go to `failed`.
fn agreed(m: &mut Member, id: u64, failed: &mut Vec<u32>) -> (u64, Vec<u32>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match m.next_event(left) {
            Some(Event::Agreed {
                member,
                id: i,
                value,
                failed: f,
            }) if i == id => {
                assert_eq!(member, m.rank());
                return (value, f);
            }
            Some(Event::Failed { rank }) => failed.push(rank),
            Some(e) => panic!("member {}: unexpected {e:?}", m.rank()),
            None => panic!("member {}: agreement {id} did not return in 20 s", m.rank()),
        }
    }
}

/// Four members agree on the AND of their values; one leaves (its process gone: its endpoint
/// closes); the others' next agreement excludes its value, agrees that it failed, and each
/// reports it failed once.
#[test]
fn members_of_processes_agree_and_agree_on_one_that_left() {
    let at = coordinator();
    let mut ms: Vec<Member> = join_all((0..4).map(|r| MemberSpec::new(r, 4, at)).collect())
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for m in ms.iter_mut() {
        assert_eq!(m.agree(!(1u64 << m.rank())).unwrap(), 0);
    }
    for m in ms.iter_mut() {
        let mut failed = Vec::new();
        assert_eq!(agreed(m, 0, &mut failed), (!0b1111, vec![]));
        assert!(failed.is_empty(), "{failed:?}");
    }
    drop(ms.pop()); // member 3 leaves
    for m in ms.iter_mut() {
        assert_eq!(m.agree(!(1u64 << (8 + m.rank()))).unwrap(), 1);
    }
    for m in ms.iter_mut() {
        let mut failed = Vec::new();
        assert_eq!(agreed(m, 1, &mut failed), (!0b111_0000_0000, vec![3]));
        // Reported once: by its own suspicion or by the agreement, whichever came first.
        while let Some(e) = m.poll() {
            if let Event::Failed { rank } = e {
                failed.push(rank);
            }
        }
        assert_eq!(failed, [3], "member {}", m.rank());
        assert_eq!(m.fenced_by(), None);
    }
}

/// With a key every member must have it: keyed members agree; a member with another key is
/// refused by rank 0's rendezvous and its join fails within its timeout, with one line.
#[test]
fn a_keyed_group_agrees_and_refuses_a_member_with_another_key() {
    let at = coordinator();
    let key = AuthKey::from_bytes([7; 16]);
    let specs = (0..3)
        .map(|r| MemberSpec {
            key: Some(key.clone()),
            timeout: Duration::from_secs(20),
            seed: 5,
            ..MemberSpec::new(r, 3, at)
        })
        .collect();
    let mut ms: Vec<Member> = join_all(specs).into_iter().map(Result::unwrap).collect();
    for m in ms.iter_mut() {
        m.agree(u64::MAX).unwrap();
    }
    for m in ms.iter_mut() {
        assert_eq!(agreed(m, 0, &mut Vec::new()), (u64::MAX, vec![]));
    }
    drop(ms);
    let at = coordinator();
    let spec = |r, k: u8| MemberSpec {
        key: Some(AuthKey::from_bytes([k; 16])),
        timeout: Duration::from_millis(600),
        ..MemberSpec::new(r, 2, at)
    };
    let rs = join_all(vec![spec(0, 7), spec(1, 8)]);
    for r in rs {
        match r {
            Err(GroupError::Setup(e)) => assert!(!e.contains('\n'), "{e}"),
            Err(e) => panic!("{e}"),
            Ok(m) => panic!("member {} joined with a wrong key", m.rank()),
        }
    }
}

/// What cannot be a group is refused before anything is bound.
#[test]
fn an_impossible_member_is_refused_with_one_line() {
    let at = coordinator();
    let bad = |s: MemberSpec| match Member::join(s) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("joined"),
    };
    assert!(bad(MemberSpec::new(2, 2, at)).contains("rank 2 of 2"));
    assert!(bad(MemberSpec::new(0, 1, at)).contains("at least 2"));
    let e = bad(MemberSpec {
        heartbeat: Duration::from_millis(200),
        suspect_after: Duration::from_millis(100),
        ..MemberSpec::new(0, 2, at)
    });
    assert!(e.contains("heartbeat"), "{e}");
    assert!(matches!(
        Member::join(MemberSpec::new(0, 100_000, at)),
        Err(GroupError::TooManyToAgree { .. })
    ));
}

/// Rank 0 serves only the rendezvous: once every member has joined, the others agree without
/// it when its process is gone, and agree that it failed.
#[test]
fn the_others_agree_without_rank_0() {
    let at = coordinator();
    let mut ms: Vec<Member> = join_all((0..3).map(|r| MemberSpec::new(r, 3, at)).collect())
        .into_iter()
        .map(Result::unwrap)
        .collect();
    drop(ms.remove(0));
    for m in ms.iter_mut() {
        m.agree(!(1u64 << m.rank())).unwrap();
    }
    for m in ms.iter_mut() {
        assert_eq!(agreed(m, 0, &mut Vec::new()), (!0b110, vec![0]));
    }
}

/// A coordinator address no member can send to is refused at once.
#[test]
fn an_unspecified_coordinator_is_refused() {
    for at in ["0.0.0.0:7000", "127.0.0.1:0"] {
        match Member::join(MemberSpec::new(1, 2, at.parse().unwrap())) {
            Err(GroupError::Setup(e)) => assert!(e.contains("not one the members can send to"), "{e}"),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("joined at {at}"),
        }
    }
}
