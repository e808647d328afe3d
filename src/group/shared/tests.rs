//! The shared state's concurrency: stops claimed once, and each worker's inbox under
//! producers that race its worker.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Shared;
use crate::group::agree::Stops;

/// Stopping is claimed once, and only by a member that is not stopped itself: of two members
/// that suspect each other (on two workers, at about the same time), the first claim stops the
/// other and the second stops no one; a kill or failure (`None`) stops a member whatever
/// suspected it before or after, and a suspicion after it no longer fences it.
#[test]
fn a_stop_is_claimed_once_and_never_by_a_stopped_member() {
    let sh = Shared::new(4, 2, false);
    assert!(sh.claim(1, Some(0)), "0 suspects 1 first: 1 stops");
    assert!(!sh.claim(0, Some(1)), "1 is stopped: its suspicion of 0 stops no one");
    assert!(!sh.is_stopped(0) && sh.is_stopped(1));
    assert!(!sh.claim(1, Some(2)), "stopped once");
    assert!(sh.claim(3, None), "a kill");
    assert!(!sh.claim(3, Some(0)), "a suspicion after the kill is no fence");
    // Many threads racing to stop each other: exactly one claim per stopped member, and a
    // claim only by a member that was not stopped when it claimed.
    for _ in 0..200 {
        let sh = std::sync::Arc::new(Shared::new(2, 2, false));
        let won: Vec<bool> = (0..2u32)
            .map(|r| {
                let sh = sh.clone();
                std::thread::spawn(move || sh.claim(1 - r, Some(r)))
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        assert_eq!(won.iter().filter(|&&w| w).count(), 1, "{won:?}");
        assert_eq!(sh.is_stopped(0) as u8 + sh.is_stopped(1) as u8, 1);
    }
}

/// Each worker's inbox under producers racing its worker: every value told reaches the worker
/// of its member (`r % workers`) exactly once, and a member's values in the order they were
/// told (the order its agreements must take them in). Three producers tell values to disjoint
/// members while two workers take theirs, each as fast as it can.
#[test]
fn an_inbox_hands_each_value_once_in_order_to_its_members_worker() {
    const MEMBERS: u32 = 9;
    const WORKERS: usize = 2;
    const PER_MEMBER: u64 = 2000;
    let sh = Arc::new(Shared::new(MEMBERS, WORKERS, false));
    let producers: Vec<_> = (0..3u32)
        .map(|p| {
            let sh = sh.clone();
            std::thread::spawn(move || {
                let mine: Vec<u32> = (0..MEMBERS).filter(|r| r % 3 == p).collect();
                for v in 0..PER_MEMBER {
                    for &r in &mine {
                        sh.tell(r, v);
                    }
                }
            })
        })
        .collect();
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let sh = sh.clone();
            std::thread::spawn(move || {
                let expect = (0..MEMBERS).filter(|r| *r as usize % WORKERS == w).count() as u64 * PER_MEMBER;
                let deadline = Instant::now() + Duration::from_secs(60);
                let (mut got, mut buf) = (HashMap::<u32, Vec<u64>>::new(), Vec::new());
                let mut n = 0;
                while n < expect {
                    assert!(Instant::now() < deadline, "worker {w}: {n} of {expect} values in 60 s");
                    sh.take(w, &mut buf);
                    n += buf.len() as u64;
                    for (r, v) in buf.drain(..) {
                        got.entry(r).or_default().push(v);
                    }
                }
                (w, got)
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    for h in workers {
        let (w, got) = h.join().unwrap();
        for (r, vs) in &got {
            assert_eq!(*r as usize % WORKERS, w, "member {r} on worker {w}");
            assert_eq!(
                *vs,
                (0..PER_MEMBER).collect::<Vec<_>>(),
                "member {r}: each value once, in order"
            );
        }
        assert_eq!(got.len(), (0..MEMBERS).filter(|r| *r as usize % WORKERS == w).count());
        let mut rest = Vec::new();
        sh.take(w, &mut rest);
        assert!(
            rest.is_empty(),
            "worker {w}: {} values after all were taken",
            rest.len()
        );
    }
}
