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

/// Member 3's agreements stop (`how`: hung, or closed) without [`Group::kill`]: the others'
/// agreement detectors notice it (its silence, or its closed endpoint), the group reports it failed once and names who
/// suspected it, and the survivors' agreement returns with it in the failed set.
fn a_member_that_stops_unannounced_is_failed_by_the_detector(kind: crate::runtime::TransportKind, how: u8) {
    use std::sync::atomic::{AtomicU8, Ordering};
    let mode = std::sync::Arc::new(AtomicU8::new(0));
    let mut g = Group::builder(4)
        .transport(kind)
        .failure_detector(Duration::from_micros(200), Duration::from_millis(50))
        .hang_agree((3, mode.clone()))
        .build()
        .unwrap();
    let case = format!("{kind:?}, mode {how}");
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
    a_member_that_stops_unannounced_is_failed_by_the_detector(TransportKind::Inproc, agree::HUNG);
    a_member_that_stops_unannounced_is_failed_by_the_detector(TransportKind::Udp, agree::HUNG);
}

#[test]
fn a_member_whose_endpoint_closed_is_suspected_and_failed() {
    a_member_that_stops_unannounced_is_failed_by_the_detector(crate::runtime::TransportKind::Udp, agree::CLOSED);
}
