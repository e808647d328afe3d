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
