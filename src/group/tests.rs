use std::time::Duration;

use super::*;

/// Events until broadcast `seq` completes (or 10 s pass).
fn until_completed(g: &mut Group, seq: u64) -> (Vec<Event>, Option<bool>) {
    let mut seen = Vec::new();
    while let Some(ev) = g.next_event(Duration::from_secs(10)) {
        if let Event::Completed { seq: s, timed_out, .. } = ev
            && s == seq
        {
            return (seen, Some(timed_out));
        }
        seen.push(ev);
    }
    (seen, None)
}

#[test]
fn rejects_what_cannot_be_sent() {
    assert!(matches!(Group::local(1), Err(GroupError::Setup(_))));
    let mut g = Group::local(3).unwrap();
    assert_eq!(g.broadcast(3, b"x"), Err(GroupError::NoSuchMember(3)));
    let big = vec![0u8; g.max_payload() + 1];
    assert!(matches!(g.broadcast(0, &big), Err(GroupError::TooLarge { .. })));
    assert_eq!(g.size(), 3);
}

#[test]
fn a_root_killed_before_it_starts_is_reported_and_nothing_hangs() {
    let mut g = Group::local(4).unwrap();
    g.kill(2).unwrap();
    // Queued behind the kill: the root is dead before it can start.
    let seq = g.broadcast(2, b"never").unwrap_or(u64::MAX);
    if seq != u64::MAX {
        let (seen, done) = until_completed(&mut g, seq);
        assert_eq!(done, Some(true), "{seen:?}");
        assert!(!seen.iter().any(|e| matches!(e, Event::Delivered { .. })), "{seen:?}");
    }
    assert_eq!(g.broadcast(2, b"x"), Err(GroupError::Dead(2)));
    let seq = g.broadcast(1, b"after").unwrap();
    let (seen, done) = until_completed(&mut g, seq);
    assert_eq!(done, Some(false), "{seen:?}");
}

/// A member's endpoint that reads nothing while `deaf` is set: a stalled process (its peers
/// get no acknowledgements, suspect it, and fence it; it reads the FENCE when it wakes).
struct Stalled {
    inner: Box<dyn crate::transport::Transport>,
    deaf: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl crate::transport::Transport for Stalled {
    fn rank(&self) -> u32 {
        self.inner.rank()
    }
    fn size(&self) -> u32 {
        self.inner.size()
    }
    fn send(&mut self, to: u32, bytes: &[u8], now: std::time::Instant) -> Result<(), crate::transport::SendError> {
        self.inner.send(to, bytes, now)
    }
    fn poll(
        &mut self,
        now: std::time::Instant,
        sink: &mut dyn FnMut(crate::transport::Delivery<'_>),
    ) -> std::io::Result<usize> {
        if self.deaf.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(0);
        }
        self.inner.poll(now, sink)
    }
    fn wait(&mut self, timeout: Duration) -> std::io::Result<()> {
        self.inner.wait(timeout)
    }
    fn stats(&self) -> crate::transport::TransportStats {
        self.inner.stats()
    }
}

#[test]
fn a_fenced_member_is_reported_failed_and_its_own_calls_say_it_was_fenced() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let deaf = std::sync::Arc::new(AtomicBool::new(true));
    let d = deaf.clone();
    let mut g = Group::builder(4)
        .transport(crate::runtime::TransportKind::Udp)
        .op_timeout(Duration::from_secs(2))
        .wrap(Box::new(move |r, t| {
            if r == 3 {
                Box::new(Stalled {
                    inner: t,
                    deaf: d.clone(),
                })
            } else {
                t
            }
        }))
        .build()
        .unwrap();
    // Member 3 stalls while a broadcast needs it: whoever sends to it gets no acknowledgement,
    // suspects it (within a second, `UdpConfig::suspicion_time`) and fences it.
    let seq = g.broadcast(0, b"while 3 stalls").unwrap();
    let (seen, done) = until_completed(&mut g, seq);
    assert!(done.is_some(), "{seen:?}");
    // It wakes up, reads the FENCE and stops: the others hear it failed.
    deaf.store(false, Ordering::Release);
    let mut events = Vec::new();
    let failed = loop {
        match g.next_event(Duration::from_secs(10)) {
            Some(Event::Failed { rank }) => break rank,
            Some(ev) => events.push(ev),
            None => panic!("member 3 never reported failed: {events:?}"),
        }
    };
    assert_eq!(failed, 3);
    let by = g.fenced_by(3).expect("fenced, not killed");
    assert!(by < 3, "{by}");
    // Its own calls fail at once, saying why.
    let e = g.broadcast(3, b"x").unwrap_err();
    assert_eq!(e, GroupError::Fenced { rank: 3, by });
    assert!(e.to_string().contains("fenced"), "{e}");
    assert_eq!(g.agree(3, 1), Err(GroupError::Fenced { rank: 3, by }));
    assert_eq!(g.kill(3), Err(GroupError::Fenced { rank: 3, by }));
    // The survivors go on: a broadcast completes without it, an agreement excludes it.
    let seq = g.broadcast(1, b"after").unwrap();
    let (seen, done) = until_completed(&mut g, seq);
    assert_eq!(done, Some(false), "{seen:?}");
    assert!(
        !seen.iter().any(|e| matches!(e, Event::Failed { .. })),
        "reported once: {seen:?}"
    );
    for m in 0..3 {
        g.agree(m, 0b11).unwrap();
    }
    let mut agreed = 0;
    while agreed < 3 {
        match g.next_event(Duration::from_secs(10)) {
            Some(Event::Agreed { value, failed, .. }) => {
                assert_eq!((value, failed), (0b11, vec![3]));
                agreed += 1;
            }
            Some(Event::Failed { rank }) => panic!("member {rank} reported failed again"),
            Some(_) => {}
            None => panic!("the survivors' agreement never returned"),
        }
    }
}

/// A delivery: member, root, sequence number, bytes.
type Delivery = (u32, u32, u64, Vec<u8>);

/// The deliveries and the other events until `completions` broadcasts completed.
fn deliveries(g: &mut Group, completions: usize) -> (Vec<Delivery>, Vec<Event>) {
    let (mut got, mut other, mut done) = (Vec::new(), Vec::new(), 0);
    while done < completions {
        match g.next_event(Duration::from_secs(10)) {
            Some(Event::Delivered {
                member,
                root,
                seq,
                bytes,
            }) => got.push((member, root, seq, bytes)),
            Some(ev) => {
                done += usize::from(matches!(ev, Event::Completed { .. }));
                other.push(ev);
            }
            None => panic!("stuck after {got:?} {other:?}"),
        }
    }
    (got, other)
}

#[test]
fn members_on_several_workers_deliver_the_callers_bytes_once_each_around_a_kill() {
    let mut g = Group::builder(5).workers(2).build().unwrap();
    let a = g.broadcast(1, b"first").unwrap();
    // Member 4 lives on worker 0, member 3 on worker 1: both are crashed by their own worker.
    g.kill(3).unwrap();
    let b = g.broadcast(2, b"second").unwrap();
    g.kill(4).unwrap();
    let c = g.broadcast(0, b"third").unwrap();
    let (mut got, other) = deliveries(&mut g, 3);
    assert!(
        other
            .iter()
            .all(|e| !matches!(e, Event::Completed { timed_out: true, .. })),
        "{other:?}"
    );
    let mut failed: Vec<u32> = other
        .iter()
        .filter_map(|e| {
            if let Event::Failed { rank } = e {
                Some(*rank)
            } else {
                None
            }
        })
        .collect();
    failed.sort();
    assert_eq!(failed, [3, 4], "each crash reported once: {other:?}");
    // Each broadcast reached every survivor once, intact; a member killed while it was in
    // flight may have delivered it (once), none after its kill was asked.
    got.sort();
    let mut once = got.clone();
    once.dedup_by_key(|d| (d.0, d.2));
    assert_eq!(once, got, "once per member and broadcast");
    for (seq, root, text, may) in [
        (a, 1, &b"first"[..], &[3, 4][..]),
        (b, 2, b"second", &[4]),
        (c, 0, b"third", &[]),
    ] {
        let at: Vec<u32> = got.iter().filter(|d| d.2 == seq).map(|d| d.0).collect();
        assert!(
            got.iter().filter(|d| d.2 == seq).all(|d| d.1 == root && d.3 == text),
            "{got:?}"
        );
        for m in 0..5 {
            assert_eq!(
                at.contains(&m),
                m < 3 || (at.contains(&m) && may.contains(&m)),
                "seq {seq}: {at:?}"
            );
        }
    }
    assert!(g.is_dead(3) && g.is_dead(4));
}

/// A stream's payloads that check every byte and count each member's deliveries.
struct Checked {
    inner: crate::runtime::node::Generated,
    delivered: std::sync::Arc<std::sync::Mutex<Vec<(u32, u64)>>>,
    rank: u32,
}

impl crate::runtime::node::Payloads for Checked {
    fn source(&mut self, seq: u64, out: &mut Vec<u8>) {
        self.inner.source(seq, out)
    }
    fn admit(&mut self, seq: u64, bytes: &[u8]) -> bool {
        self.inner.admit(seq, bytes)
    }
    fn deliver(&mut self, root: u32, seq: u64, bytes: &[u8]) {
        assert!(self.inner.admit(seq, bytes), "delivered bytes that are not the root's");
        self.delivered.lock().unwrap().push((self.rank, seq));
        let _ = root;
    }
}

/// A stream rooted at member 1 measures member 0's deliveries, not the root's own: the
/// per-node delivery histogram skipped rank 0 instead of each operation's root, so every
/// sample was the root's delivery to itself (1 ns) and member 0's were lost.
#[test]
fn a_stream_rooted_elsewhere_than_0_measures_the_other_members_deliveries() {
    let mut g = Group::builder(2).build().unwrap();
    let res = g
        .stream(Stream {
            roots: vec![1],
            ..Stream::generated(50, 8)
        })
        .unwrap();
    assert_eq!((res.measured, res.violations, res.timeouts), (50, 0, 0));
    assert_eq!(res.delivery.len(), 50, "one non-root member per operation");
    // A hop through two in-process nodes takes more than a nanosecond: member 0's deliveries.
    assert!(res.delivery.min() > 1, "min {} ns", res.delivery.min());
    assert!(
        res.delivery.min() <= res.coloring.max(),
        "a delivery is no later than its coloring"
    );
}

#[test]
fn a_stream_on_two_workers_between_broadcasts_delivers_checked_bytes_to_its_payloads() {
    let mut g = Group::builder(4).workers(2).build().unwrap();
    let before = g.broadcast(3, b"before").unwrap();
    let delivered = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let d = delivered.clone();
    let res = g
        .stream(Stream {
            ops: 40,
            warmup: 5,
            window: 4,
            roots: vec![0, 2],
            give_up_after: None,
            payloads: Box::new(move |rank| {
                Box::new(Checked {
                    inner: crate::runtime::node::Generated::new(100),
                    delivered: d.clone(),
                    rank,
                })
            }),
            progress: None,
        })
        .unwrap();
    assert_eq!((res.measured, res.violations, res.timeouts), (40, 0, 0));
    assert_eq!(res.coloring.len(), 40);
    assert_eq!(res.transport.malformed, 0);
    let mut got = delivered.lock().unwrap().clone();
    got.sort();
    let mut want: Vec<(u32, u64)> = (0..4).flat_map(|m| (1..46).map(move |s| (m, s))).collect();
    want.sort();
    assert_eq!(got, want, "each member delivered each of the stream's operations once");
    // The broadcast before went to events; the one after follows the stream's numbers.
    let after = g.broadcast(1, b"after").unwrap();
    assert_eq!((before, after), (0, 46));
    let (got, _) = deliveries(&mut g, 2);
    assert_eq!(got.len(), 8, "{got:?}");
    assert!(
        got.iter()
            .all(|d| (d.2, &d.3[..]) == (0, b"before") || (d.2, &d.3[..]) == (46, b"after"))
    );
}

#[test]
fn a_stream_with_a_crash_injected_counts_it_and_refuses_what_cannot_run() {
    use crate::runtime::kill::parse_kills;
    let mut g = Group::builder(4)
        .workers(3)
        .agreements(false)
        .kills(parse_kills("2@20", 4).unwrap())
        .build()
        .unwrap();
    let bad = |s: Stream<'_>, g: &mut Group| g.stream(s).unwrap_err();
    assert!(matches!(
        bad(
            Stream {
                window: 33,
                ..Stream::generated(5, 8)
            },
            &mut g
        ),
        GroupError::BadStream(_)
    ));
    assert!(matches!(bad(Stream::generated(0, 8), &mut g), GroupError::BadStream(_)));
    assert_eq!(
        bad(
            Stream {
                roots: vec![4],
                ..Stream::generated(5, 8)
            },
            &mut g
        ),
        GroupError::NoSuchMember(4)
    );
    assert_eq!(g.agree(0, 1), Err(GroupError::NoAgreements));
    let res = g
        .stream(Stream {
            window: 2,
            ..Stream::generated(60, 32)
        })
        .unwrap();
    assert_eq!((res.measured, res.violations, res.timeouts), (60, 0, 0));
    assert_eq!(res.dead_nodes, [2]);
    assert_eq!(res.false_suspicions, 0);
    assert!(g.is_dead(2));
}

/// Member 3's agreements stop (`how`: hung, or closed) without [`Group::kill`]: the others'
/// agreement detectors notice it (its silence, or its closed endpoint), the group reports it failed once and names who
/// suspected it, and the survivors' agreement returns with it in the failed set. On
/// `workers` workers: with more than one, the member that suspects it runs on another
/// worker than member 3 (and than the lead).
fn a_member_that_stops_unannounced_is_failed_by_the_detector(
    kind: crate::runtime::TransportKind,
    how: u8,
    workers: usize,
) {
    use std::sync::atomic::{AtomicU8, Ordering};
    let mode = std::sync::Arc::new(AtomicU8::new(0));
    let mut g = Group::builder(4)
        .transport(kind)
        .workers(workers)
        .failure_detector(Duration::from_micros(200), Duration::from_millis(50))
        .hang_agree((3, mode.clone()))
        .build()
        .unwrap();
    let case = format!("{kind:?}, mode {how}, {workers} workers");
    // A first agreement with everyone: member 3 was alive and heard from.
    for m in 0..4 {
        g.agree(m, u64::MAX).unwrap();
    }
    for _ in 0..4 {
        match g.next_event(Duration::from_secs(10)) {
            Some(Event::Agreed {
                id: 0, value, failed, ..
            }) => {
                assert_eq!((value, failed), (u64::MAX, vec![]), "{case}");
            }
            ev => panic!("{case}: {ev:?}"),
        }
    }
    mode.store(how, Ordering::Release);
    for m in 0..3 {
        g.agree(m, !(1u64 << m)).unwrap();
    }
    let (mut agreed, mut failed_events) = (0, Vec::new());
    while agreed < 3 {
        match g.next_event(Duration::from_secs(10)) {
            Some(Event::Agreed {
                id: 1, value, failed, ..
            }) => {
                assert_eq!((value, failed), (!0b111, vec![3]), "{case}");
                agreed += 1;
            }
            Some(Event::Failed { rank }) => failed_events.push(rank),
            ev => panic!("{case}: {ev:?} (failed so far: {failed_events:?})"),
        }
    }
    while let Some(ev) = g.next_event(Duration::from_millis(200)) {
        match ev {
            Event::Failed { rank } => failed_events.push(rank),
            ev => panic!("{case}: {ev:?}"),
        }
    }
    assert_eq!(failed_events, [3], "{case}: reported once, no one else");
    assert!(g.is_dead(3), "{case}: it stops in the broadcasts too");
    let by = g.fenced_by(3).expect("stopped because a member suspected it");
    assert!(by < 3, "{case}: {by}");
    assert_eq!(g.agree(3, 1), Err(GroupError::Fenced { rank: 3, by }), "{case}");
    // The survivors go on.
    for m in 0..3 {
        g.agree(m, 0b11).unwrap();
    }
    for _ in 0..3 {
        match g.next_event(Duration::from_secs(10)) {
            Some(Event::Agreed {
                id: 2, value, failed, ..
            }) => assert_eq!((value, failed), (0b11, vec![3]), "{case}"),
            ev => panic!("{case}: {ev:?}"),
        }
    }
}

#[test]
fn a_hung_member_is_suspected_by_its_silence_and_failed() {
    use crate::runtime::TransportKind;
    a_member_that_stops_unannounced_is_failed_by_the_detector(TransportKind::Inproc, agree::HUNG, 1);
    a_member_that_stops_unannounced_is_failed_by_the_detector(TransportKind::Udp, agree::HUNG, 1);
    a_member_that_stops_unannounced_is_failed_by_the_detector(TransportKind::Inproc, agree::HUNG, 3);
}

#[test]
fn a_member_whose_endpoint_closed_is_suspected_and_failed() {
    a_member_that_stops_unannounced_is_failed_by_the_detector(crate::runtime::TransportKind::Udp, agree::CLOSED, 1);
    a_member_that_stops_unannounced_is_failed_by_the_detector(crate::runtime::TransportKind::Udp, agree::CLOSED, 2);
}

/// The agreements of `n` members until each has returned agreement `id`: its value and failed
/// set (the same for all, or the test fails), other events aside.
fn agreed(g: &mut Group, n: usize, id: u64) -> (u64, Vec<u32>, Vec<Event>) {
    let (mut got, mut others) = (Vec::new(), Vec::new());
    while got.len() < n {
        match g.next_event(Duration::from_secs(10)) {
            Some(Event::Agreed {
                member,
                id: i,
                value,
                failed,
            }) => {
                assert_eq!(i, id, "member {member}: {others:?}");
                got.push((member, value, failed));
            }
            Some(ev) => others.push(ev),
            None => panic!("agreement {id}: {} of {n} returned: {got:?} {others:?}", got.len()),
        }
    }
    let (_, value, failed) = got[0].clone();
    assert!(got.iter().all(|g| (g.1, &g.2) == (value, &failed)), "{got:?}");
    got.sort_by_key(|g| g.0);
    got.dedup_by_key(|g| g.0);
    assert_eq!(got.len(), n, "each member once: {got:?}");
    (value, failed, others)
}

/// A group's own agreements run on its workers as its broadcast nodes do (member `r` on worker
/// `r % k`), and agree across them: on values, around a kill of a member of another worker
/// than the lead's, and on the failed set.
#[test]
fn agreement_members_are_spread_over_the_workers_and_agree_across_them() {
    for kind in [
        crate::runtime::TransportKind::Inproc,
        crate::runtime::TransportKind::Udp,
    ] {
        let mut g = Group::builder(5)
            .transport(kind)
            .workers(3)
            .broadcasts(false)
            .failure_detector(Duration::from_micros(500), Duration::from_millis(50))
            .build()
            .unwrap();
        for round in 0..20u64 {
            for m in 0..5u32 {
                g.agree(m, !(1u64 << ((round + u64::from(m)) % 64))).unwrap();
            }
            let want = (0..5u64).fold(u64::MAX, |v, m| v & !(1 << ((round + m) % 64)));
            let (value, failed, _) = agreed(&mut g, 5, round);
            assert_eq!((value, failed), (want, vec![]), "{kind:?} round {round}");
        }
        let mut placed = g.shared.placed_agree.lock().unwrap().clone();
        placed.sort();
        assert_eq!(placed, [(0, vec![0, 3]), (1, vec![1, 4]), (2, vec![2])], "{kind:?}");
        // Member 4 (worker 1) dies; the others' agreement returns with it in the failed set.
        g.kill(4).unwrap();
        for m in 0..4u32 {
            g.agree(m, 0b1111 & !(1 << m)).unwrap();
        }
        let (value, failed, others) = agreed(&mut g, 4, 20);
        assert_eq!((value, failed), (0, vec![4]), "{kind:?}");
        assert!(
            others.iter().all(|e| matches!(e, Event::Failed { rank: 4 })),
            "{kind:?}: {others:?}"
        );
        assert!(g.is_dead(4) && g.fenced_by(4).is_none(), "{kind:?}: killed, not fenced");
    }
}

/// A member's endpoint that counts the datagrams sent through it.
struct Counting {
    inner: Box<dyn crate::transport::Transport>,
    sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl crate::transport::Transport for Counting {
    fn rank(&self) -> u32 {
        self.inner.rank()
    }
    fn size(&self) -> u32 {
        self.inner.size()
    }
    fn send(&mut self, to: u32, bytes: &[u8], now: std::time::Instant) -> Result<(), crate::transport::SendError> {
        self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.send(to, bytes, now)
    }
    fn poll(
        &mut self,
        now: std::time::Instant,
        sink: &mut dyn FnMut(crate::transport::Delivery<'_>),
    ) -> std::io::Result<usize> {
        self.inner.poll(now, sink)
    }
    fn wait(&mut self, timeout: Duration) -> std::io::Result<()> {
        self.inner.wait(timeout)
    }
    fn stats(&self) -> crate::transport::TransportStats {
        self.inner.stats()
    }
}

#[test]
fn a_group_runs_over_the_callers_endpoints_and_refuses_a_wrong_count() {
    use crate::runtime::{TransportKind, endpoints};
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let eps = endpoints(TransportKind::Inproc, 4, 7, 1, 0.0)
        .unwrap()
        .into_iter()
        .map(|(t, kill)| {
            let t: Box<dyn crate::transport::Transport> = Box::new(Counting {
                inner: t,
                sent: sent.clone(),
            });
            (t, kill)
        })
        .collect();
    let mut g = Group::builder(4).endpoints(eps).agreements(false).build().unwrap();
    let res = g.stream(Stream::generated(20, 8)).unwrap();
    assert_eq!((res.measured, res.violations, res.timeouts), (20, 0, 0));
    // Every datagram of the stream went through the caller's endpoints.
    let n = sent.load(std::sync::atomic::Ordering::Relaxed);
    assert!(n >= 20 * 3, "{n} datagrams for 20 broadcasts to 3 members");
    assert_eq!(
        n, res.transport.sent,
        "the members' counters are the caller's endpoints'"
    );

    let three = endpoints(TransportKind::Inproc, 3, 7, 1, 0.0).unwrap();
    match Group::builder(4).endpoints(three).build() {
        Err(GroupError::Setup(e)) => assert!(e.contains("3 endpoints for 4 members"), "{e}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn a_keyed_udp_group_broadcasts_and_agrees_on_authenticated_endpoints() {
    let key = crate::transport::udp::auth::AuthKey::from_bytes([9; 16]);
    let mut g = Group::builder(3)
        .transport(crate::runtime::TransportKind::Udp)
        .auth(Some(key))
        .build()
        .unwrap();
    let seq = g.broadcast(0, b"keyed").unwrap();
    let (seen, done) = until_completed(&mut g, seq);
    assert_eq!(done, Some(false), "{seen:?}");
    for m in 0..3 {
        g.agree(m, !(1u64 << m)).unwrap();
    }
    let mut agreed = 0;
    while agreed < 3 {
        match g.next_event(Duration::from_secs(10)) {
            Some(Event::Agreed { value, failed, .. }) => {
                assert_eq!((value, failed), (!0b111, vec![]));
                agreed += 1;
            }
            Some(Event::Delivered { .. } | Event::Completed { .. }) => {}
            ev => panic!("{ev:?}"),
        }
    }
}

/// More workers asked for than members: one worker per member, each stepping its own.
#[test]
fn more_workers_than_members_place_one_member_per_worker() {
    let mut g = Group::builder(3).workers(8).broadcasts(false).build().unwrap();
    for m in 0..3 {
        g.agree(m, !(1u64 << m)).unwrap();
    }
    let (value, failed, _) = agreed(&mut g, 3, 0);
    assert_eq!((value, failed), (!0b111, vec![]));
    let mut placed = g.shared.placed_agree.lock().unwrap().clone();
    placed.sort();
    assert_eq!(placed, [(0, vec![0]), (1, vec![1]), (2, vec![2])]);
}

/// Without a period of the caller's, the agreements heartbeat every 50 µs times the members
/// per core: the members per worker, with no more workers than members or cores.
#[test]
fn the_default_heartbeat_scales_with_the_members_per_core() {
    let us = |b: GroupBuilder| b.heartbeat_period().as_micros();
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get()) as u32;
    assert_eq!(us(Group::builder(16)), 800, "one worker by default");
    assert_eq!(us(Group::builder(1)), 50);
    assert_eq!(
        us(Group::builder(3).workers(8)),
        50 * 3u32.div_ceil(cores.min(3)) as u128
    );
    assert_eq!(
        us(Group::builder(16).workers(4)),
        50 * 16u32.div_ceil(cores.min(4)) as u128
    );
    let kept = Group::builder(16).failure_detector(Duration::from_micros(70), Duration::from_millis(100));
    assert_eq!(us(kept), 70, "the caller's period is kept");
}

/// A UDP group's member that hangs for 400 ms while the others are in an agreement with it
/// (the root, member 0: its children's contributions to it unacknowledged meanwhile, the
/// transports retransmitting them) is not suspected under a 1 s
/// `suspect_after`: the group's transports retransmit to it for at least that long
/// (`runtime::endpoints_bounded`), where their default gave up after ~104 ms; the agreement
/// returns with everyone.
#[test]
fn a_udp_group_member_hung_for_less_than_suspect_after_is_not_suspected() {
    use std::sync::atomic::{AtomicU8, Ordering};
    let mode = std::sync::Arc::new(AtomicU8::new(0));
    let mut g = Group::builder(4)
        .transport(crate::runtime::TransportKind::Udp)
        .broadcasts(false)
        .failure_detector(Duration::from_micros(200), Duration::from_secs(1))
        .hang_agree((0, mode.clone()))
        .build()
        .unwrap();
    mode.store(agree::HUNG, Ordering::Release);
    for m in 0..4 {
        g.agree(m, !(1u64 << m)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(400));
    mode.store(0, Ordering::Release);
    let mut agreed = 0;
    while agreed < 4 {
        match g.next_event(Duration::from_secs(10)) {
            Some(Event::Agreed {
                id: 0, value, failed, ..
            }) => {
                assert_eq!((value, failed), (!0b1111, vec![]));
                agreed += 1;
            }
            ev => panic!("{ev:?}"),
        }
    }
    assert!(!g.is_dead(0));
}

/// The setup error of building `b` (a group built is a failure).
fn refused(b: GroupBuilder) -> String {
    match b.build() {
        Err(GroupError::Setup(e)) => {
            assert!(!e.contains('\n'), "{e}");
            e
        }
        Err(e) => panic!("not a setup error: {e:?}"),
        Ok(_) => panic!("built"),
    }
}

/// An algorithm beyond the command line's limits is refused at build: FCG or a failure-proof
/// correction tolerating more failures than its correctors hold made the first broadcast
/// panic a worker (and every later call say `Closed`), and a gossip time near `u64::MAX`
/// overflowed the gossip phase's end.
#[test]
fn an_algorithm_beyond_the_command_lines_limits_is_refused_at_build() {
    use crate::protocol::bcast::corrected_gossip::Variant;
    let b = |algo| Group::builder(4).algo(algo);
    let e = refused(b(Algo::CorrectedGossip {
        variant: Variant::Fcg { f: 100 },
        t: 20,
    }));
    assert!(e.contains("fcg:F supports F <= 3"), "{e}");
    let e = refused(b(Algo::CorrectedTree {
        tree: TreeKind::Binomial,
        order: Order::Interleaved,
        correction: Correction::FailProof { f: 100 },
        start: Start::Synchronized,
    }));
    assert!(e.contains("failproof:F supports F <= 3"), "{e}");
    let e = refused(b(Algo::CorrectedGossip {
        variant: Variant::Ccg,
        t: u64::MAX,
    }));
    assert!(e.contains("gossip rounds T must be at most"), "{e}");
    // Within the limits, it broadcasts.
    let mut g = b(Algo::CorrectedGossip {
        variant: Variant::Fcg { f: 3 },
        t: 20,
    })
    .build()
    .unwrap();
    let seq = g.broadcast(1, b"fcg").unwrap();
    assert_eq!(until_completed(&mut g, seq).1, Some(false));
}

/// A model out of range is refused at build, and the builder never overflows on the way:
/// `logp(2^40 s, Duration::MAX)` panicked inside `GroupBuilder::logp`.
#[test]
fn a_model_out_of_range_is_refused_at_build_without_overflowing() {
    let e = refused(Group::builder(4).logp(Duration::from_secs(1 << 40), Duration::MAX));
    assert!(e.contains("unit"), "{e}");
    let e = refused(Group::builder(4).logp(Duration::from_nanos(1), Duration::MAX));
    assert!(
        e.contains("the model's L is") && e.contains("at most 4294967296"),
        "{e}"
    );
    let e = refused(Group::builder(4).loggp(
        LogGP {
            g: LogP::MAX + 1,
            ..LogP { l: 2, o: 1 }.into()
        },
        Duration::from_micros(1),
    ));
    assert!(e.contains("the model's g is"), "{e}");
    // A huge timeout is no error: saturated, it is never reached.
    let mut g = Group::builder(3)
        .op_timeout(Duration::MAX)
        .failure_detector(Duration::from_millis(1), Duration::MAX)
        .build()
        .unwrap();
    let seq = g.broadcast(0, b"x").unwrap();
    assert_eq!(until_completed(&mut g, seq).1, Some(false));
}

/// Above the members an ERA message has room for, a group broadcasts and its `agree` says
/// why (`TooManyToAgree`); one without broadcasts, which could do nothing, is refused.
#[test]
fn more_members_than_agreements_allow_broadcast_and_agree_says_why() {
    // Broadcasts among 129 build (a group above ERA's limit has broadcasts only), and its
    // `agree` says why, whether agreements were asked for or not: it said "built without
    // agreements", as if the caller had turned them off.
    for b in [Group::builder(129), Group::builder(129).agreements(false)] {
        let mut g = b.build().unwrap();
        assert_eq!(g.agree(0, 1), Err(GroupError::TooManyToAgree { max: 128 }));
    }
    // Neither broadcasts nor agreements: nothing such a group could do.
    for b in [
        Group::builder(129).broadcasts(false),
        Group::builder(129).broadcasts(false).agreements(false),
    ] {
        let e = refused(b);
        assert!(e.contains("without broadcasts only agrees"), "{e}");
    }
    let mut g = Group::builder(8).agreements(false).build().unwrap();
    assert_eq!(g.agree(0, 1), Err(GroupError::NoAgreements));
    assert!(Group::builder(128).build().is_ok());
}

/// A group whose endpoints would not fit this host's memory is refused at build:
/// `Group::local(u32::MAX)` aborted the process on a failed allocation.
#[test]
fn a_group_too_large_for_this_host_is_refused_at_build() {
    if crate::runtime::limits::memory().is_none() {
        return; // (No limit to read here: nothing is refused.)
    }
    assert!(Group::local(u32::MAX).is_err());
    let e = refused(Group::builder(u32::MAX).agreements(false));
    assert!(
        e.contains("n = 4294967295 needs about") && e.contains("in-process endpoints"),
        "{e}"
    );
}

/// Kills no member would carry out are refused at build, not dropped: of a rank out of
/// range, a second kill of one member, a real `SIGKILL` (processes only).
#[test]
fn kills_no_member_would_carry_out_are_refused_at_build() {
    use crate::runtime::kill::KillPoint;
    let kill = |rank, point| Kill { rank, point };
    let b = |kills| Group::builder(4).kills(kills);
    assert!(matches!(
        b(vec![kill(4, KillPoint::Start)]).build(),
        Err(GroupError::NoSuchMember(4))
    ));
    let e = refused(b(vec![
        kill(2, KillPoint::OnReceive { iter: 3 }),
        kill(2, KillPoint::Start),
    ]));
    assert!(e.contains("member 2 is killed twice"), "{e}");
    let e = refused(b(vec![kill(2, KillPoint::SigKill { iter: 3 })]));
    assert!(e.contains("SIGKILL"), "{e}");
    assert!(
        b(vec![kill(2, KillPoint::Start), kill(3, KillPoint::Start)])
            .build()
            .is_ok()
    );
}

/// A window or worker count out of range is refused at build, as a stream's window is,
/// instead of being clamped (0 became 1, 1000 became 32).
#[test]
fn a_window_or_worker_count_out_of_range_is_refused_at_build() {
    for w in [0, 33, 1000] {
        let e = refused(Group::builder(4).window(w));
        assert!(e.contains(&format!("a window of {w}, not in 1..=32")), "{e}");
    }
    let e = refused(Group::builder(4).workers(0));
    assert!(e.contains("at least 1 worker"), "{e}");
    assert!(Group::builder(4).window(32).workers(2).build().is_ok());
}

/// A stream whose payloads are longer than a broadcast carries is refused at once with the
/// error a broadcast of those bytes gets; it ran until every operation timed out (100 000
/// bytes) or ran cleanly beyond the stated limit (`max_payload() + 1`).
#[test]
fn a_stream_of_payloads_longer_than_a_broadcast_carries_is_refused() {
    let mut g = Group::builder(4).agreements(false).build().unwrap();
    let max = g.max_payload();
    for len in [100_000, max + 1] {
        assert_eq!(
            g.stream(Stream::generated(5, len)).unwrap_err(),
            GroupError::TooLarge { len, max }
        );
        assert_eq!(
            g.broadcast(0, &vec![0; len]).unwrap_err(),
            GroupError::TooLarge { len, max }
        );
    }
    let res = g.stream(Stream::generated(5, max)).unwrap();
    assert_eq!((res.measured, res.violations, res.timeouts), (5, 0, 0));
}
