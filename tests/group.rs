//! The library API: a group's members deliver the caller's bytes exactly once each, over the
//! in-process and the loopback UDP transport, with and without a crashed member.

use std::collections::BTreeMap;
use std::time::Duration;

use ftcoll::group::{Event, Group};
use ftcoll::runtime::TransportKind;

/// The bytes of broadcast `k` (distinct per broadcast, of varying length).
fn bytes(k: u32, max: usize) -> Vec<u8> {
    let len = (k as usize * 97 + 1) % max.min(600) + 1;
    (0..len).map(|i| (i as u32 * 7 + k * 13) as u8).collect()
}

/// Runs `ops` broadcasts from rotating live roots, killing `kill` (if any) first, and checks
/// that every live member delivered each one exactly once with the bytes sent.
fn exactly_once(kind: TransportKind, n: u32, ops: u32, kill: Option<u32>) {
    let mut g = Group::builder(n).transport(kind).build().expect("group");
    let max = g.max_payload();
    let mut failed = Vec::new();
    if let Some(k) = kill {
        g.kill(k).unwrap();
        while let Some(ev) = g.next_event(Duration::from_secs(10)) {
            if let Event::Failed { rank } = ev {
                failed.push(rank);
                break;
            }
        }
        assert_eq!(failed, [k]);
    }
    let live: Vec<u32> = (0..n).filter(|r| Some(*r) != kill).collect();
    let mut sent = BTreeMap::new();
    for k in 0..ops {
        let root = live[k as usize % live.len()];
        let b = bytes(k, max);
        let seq = g.broadcast(root, &b).unwrap();
        sent.insert(seq, (root, b));
    }
    let mut got: BTreeMap<(u64, u32), u32> = BTreeMap::new();
    let mut completed = 0;
    while completed < ops {
        let ev = g
            .next_event(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("stalled after {completed} of {ops} broadcasts"));
        match ev {
            Event::Delivered {
                member,
                root,
                seq,
                bytes,
            } => {
                let (r, b) = &sent[&seq];
                assert_eq!((root, &bytes), (*r, b), "broadcast {seq} at member {member}");
                assert_ne!(Some(member), kill, "a dead member delivered");
                *got.entry((seq, member)).or_default() += 1;
            }
            Event::Completed { seq, timed_out, .. } => {
                assert!(!timed_out, "broadcast {seq} timed out");
                completed += 1;
            }
            e => panic!("unexpected {e:?}"),
        }
    }
    for seq in sent.keys() {
        for m in &live {
            assert_eq!(got.get(&(*seq, *m)), Some(&1), "broadcast {seq} at member {m}");
        }
    }
    assert_eq!(got.len(), sent.len() * live.len());
}

#[test]
fn inproc_members_deliver_the_callers_bytes_exactly_once() {
    exactly_once(TransportKind::Inproc, 8, 40, None);
}

#[test]
fn inproc_members_deliver_with_one_member_killed() {
    exactly_once(TransportKind::Inproc, 8, 40, Some(3));
}

#[test]
fn udp_members_deliver_the_callers_bytes_exactly_once() {
    exactly_once(TransportKind::Udp, 6, 20, None);
}

#[test]
fn udp_members_deliver_with_one_member_killed() {
    exactly_once(TransportKind::Udp, 6, 20, Some(4));
}

#[test]
fn a_member_killed_mid_stream_stops_delivering_and_the_others_go_on() {
    let mut g = Group::local(6).unwrap();
    let first = g.broadcast(0, b"before").unwrap();
    let mut before = 0;
    while let Some(ev) = g.next_event(Duration::from_secs(10)) {
        match ev {
            Event::Delivered { seq, .. } if seq == first => before += 1,
            Event::Completed { seq, .. } if seq == first => break,
            _ => {}
        }
    }
    assert_eq!(before, 6);
    g.kill(5).unwrap();
    let second = g.broadcast(2, b"after").unwrap();
    let mut members = Vec::new();
    let mut failed = false;
    while let Some(ev) = g.next_event(Duration::from_secs(10)) {
        match ev {
            Event::Failed { rank } => {
                assert_eq!(rank, 5);
                failed = true;
            }
            Event::Delivered { seq, member, bytes, .. } if seq == second => {
                assert_eq!(bytes, b"after");
                members.push(member);
            }
            Event::Completed { seq, timed_out, .. } if seq == second => {
                assert!(!timed_out);
                break;
            }
            e => panic!("unexpected {e:?}"),
        }
    }
    assert!(failed);
    members.sort_unstable();
    assert_eq!(members, [0, 1, 2, 3, 4]);
}

/// Every live member enters `rounds` agreements (member `m` clears bit `m` in round `k` when
/// `k` is odd) and returns from each with the same AND and the same failed set.
fn agreements(kind: TransportKind, n: u32, kill: Option<u32>) {
    let mut g = Group::builder(n).transport(kind).build().unwrap();
    if let Some(k) = kill {
        g.kill(k).unwrap();
    }
    let live: Vec<u32> = (0..n).filter(|r| Some(*r) != kill).collect();
    let rounds = 4u64;
    for k in 0..rounds {
        for &m in &live {
            let v = if k % 2 == 1 { !(1u64 << m) } else { u64::MAX };
            assert_eq!(g.agree(m, v).unwrap(), k);
        }
    }
    let mut got: BTreeMap<(u64, u32), (u64, Vec<u32>)> = BTreeMap::new();
    while got.len() < live.len() * rounds as usize {
        match g.next_event(Duration::from_secs(20)) {
            Some(Event::Agreed {
                member,
                id,
                value,
                failed,
            }) => {
                assert!(got.insert((id, member), (value, failed)).is_none(), "twice");
            }
            Some(Event::Failed { rank }) => assert_eq!(Some(rank), kill),
            Some(e) => panic!("unexpected {e:?}"),
            None => panic!("stalled with {} of {} returns", got.len(), live.len() * rounds as usize),
        }
    }
    let all_live = live.iter().fold(u64::MAX, |v, m| v & !(1u64 << m));
    for k in 0..rounds {
        for &m in &live {
            let (value, failed) = &got[&(k, m)];
            let want = if k % 2 == 1 { all_live } else { u64::MAX };
            assert_eq!(*value, want, "agreement {k} at member {m}");
            assert_eq!(failed, &got[&(k, live[0])].1, "the same failed set everywhere");
        }
        if let Some(dead) = kill {
            assert!(got[&(k, live[0])].1.iter().all(|r| *r == dead));
        }
    }
}

#[test]
fn inproc_members_agree() {
    agreements(TransportKind::Inproc, 6, None);
}

#[test]
fn inproc_members_agree_with_one_member_killed() {
    agreements(TransportKind::Inproc, 6, Some(2));
}

#[test]
fn udp_members_agree_with_one_member_killed() {
    agreements(TransportKind::Udp, 5, Some(1));
}

#[test]
fn other_broadcast_algorithms_carry_the_callers_bytes_too() {
    use ftcoll::protocol::bcast::algo::Algo;
    use ftcoll::protocol::bcast::corrected_gossip::Variant;
    for algo in [
        Algo::CorrectedGossip {
            variant: Variant::Ccg,
            t: 6,
        },
        Algo::CorrectedGossip {
            variant: Variant::Fcg { f: 1 },
            t: 6,
        },
        Algo::Bfb,
    ] {
        let mut g = Group::builder(7).algo(algo.clone()).build().unwrap();
        g.kill(4).unwrap();
        let seq = g.broadcast(2, b"payload").unwrap();
        let mut members = Vec::new();
        loop {
            match g.next_event(Duration::from_secs(20)) {
                Some(Event::Delivered { member, bytes, .. }) => {
                    assert_eq!(bytes, b"payload", "{algo:?}");
                    members.push(member);
                }
                Some(Event::Completed { seq: s, timed_out, .. }) if s == seq => {
                    assert!(!timed_out, "{algo:?}");
                    break;
                }
                Some(_) => {}
                None => panic!("{algo:?} stalled"),
            }
        }
        members.sort_unstable();
        assert_eq!(members, [0, 1, 2, 3, 5, 6], "{algo:?}");
    }
}
