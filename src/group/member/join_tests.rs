//! Members that join and start at different times (threads here, each with its own sockets,
//! as processes would have), over loopback UDP: a rank 0 that leaves as soon as it joined, a
//! member slow to start, and one that never does.

use std::time::{Duration, Instant};

use super::tests::{agreed, coordinator};
use super::{Member, MemberSpec, START_LATE};
use crate::group::Event;

/// One round: three members join, rank 0 leaves as soon as its own join returned (a process
/// that only started the group, or died); the others must join, see rank 0 fail (only it),
/// agree without it and not be fenced. What went wrong, if anything.
fn rank_0_leaves_at_once() -> Result<(), String> {
    let at = coordinator();
    let joins: Vec<_> = (0..3u32)
        .map(|r| {
            std::thread::spawn(move || {
                let spec = MemberSpec {
                    timeout: Duration::from_secs(5),
                    ..MemberSpec::new(r, 3, at)
                };
                // Rank 0 leaves at once (its member dropped).
                Member::join(spec).map(|m| (r > 0).then_some(m))
            })
        })
        .collect();
    let mut ms = Vec::new();
    for (r, h) in joins.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(m)) => ms.extend(m),
            Ok(Err(e)) => return Err(format!("member {r} did not join: {e}")),
            Err(_) => return Err(format!("member {r}'s join panicked")),
        }
    }
    for m in ms.iter_mut() {
        match m.next_event(Duration::from_secs(5)) {
            Some(Event::Failed { rank: 0 }) => {}
            other => return Err(format!("member {}: {other:?} where rank 0's failure was due", m.rank())),
        }
        m.agree(!(1u64 << m.rank()))
            .map_err(|e| format!("member {}: {e}", m.rank()))?;
    }
    for m in ms.iter_mut() {
        match m.next_event(Duration::from_secs(5)) {
            Some(Event::Agreed { value, failed, .. }) if value == !0b110 && failed == [0] => {}
            other => return Err(format!("member {}: {other:?} where (!0b110, [0]) was due", m.rank())),
        }
        if let Some(by) = m.fenced_by() {
            return Err(format!("member {} fenced by {by}", m.rank()));
        }
    }
    Ok(())
}

/// Runs `rounds` rounds of [`rank_0_leaves_at_once`] and says which went wrong. (A member
/// that got the table last timed its clock against a rank 0 gone without a word, ten silent
/// probes, and started ~250 ms after the other, whose detector had by then suspected it:
/// fenced; a member whose table was sent only at its next hello never got it: no join.)
fn rank_0_leaves_at_once_rounds(rounds: u32) {
    let wrong: Vec<String> = (0..rounds)
        .filter_map(|i| rank_0_leaves_at_once().err().map(|e| format!("round {i}: {e}")))
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of {rounds} rounds went wrong: {wrong:#?}",
        wrong.len()
    );
}

/// A group whose rank 0 leaves as soon as it joined: the others join, agree without it, and
/// no one else is fenced, round after round.
#[test]
fn rank_0_leaving_as_soon_as_it_joined_fences_no_one() {
    rank_0_leaves_at_once_rounds(8);
}

/// As [`rank_0_leaving_as_soon_as_it_joined_fences_no_one`], thirty rounds:
/// `cargo test --release --lib rank_0_leaving -- --ignored`.
#[test]
#[ignore]
fn rank_0_leaving_as_soon_as_it_joined_fences_no_one_in_thirty_rounds() {
    rank_0_leaves_at_once_rounds(30);
}

/// Three members, agreements only, of which `late` starts its thread `by` after it got the
/// table (the others at once); in rank order.
fn three_with_one_late(late: u32, by: Duration) -> Vec<std::thread::JoinHandle<Member>> {
    let at = coordinator();
    (0..3u32)
        .map(|r| {
            std::thread::spawn(move || {
                if r == late {
                    START_LATE.set(by);
                }
                let spec = MemberSpec {
                    broadcasts: false,
                    ..MemberSpec::new(r, 3, at)
                };
                Member::join(spec).unwrap()
            })
        })
        .collect()
}

/// A member that starts heartbeating 400 ms after it got the table (four times
/// `suspect_after`: a process descheduled, or timing its clock slowly) is not suspected by
/// the neighbours that watched it meanwhile: it was never heard from, so it may still be
/// starting (the detector's start window), not silent. The agreement then has everyone.
#[test]
fn a_member_that_starts_late_is_not_suspected_before_it_could_have_started() {
    let mut ms: Vec<Member> = three_with_one_late(2, Duration::from_millis(400))
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    for m in ms.iter_mut() {
        assert_eq!(m.poll(), None, "member {}", m.rank());
        m.agree(!(1u64 << m.rank())).unwrap();
    }
    let mut failed = Vec::new();
    for m in ms.iter_mut() {
        assert_eq!(agreed(m, 0, &mut failed), (!0b111, vec![]), "member {}", m.rank());
        assert_eq!(m.fenced_by(), None, "member {}", m.rank());
    }
    assert_eq!(failed, Vec::<u32>::new());
}

/// A member that has its table but does not start is suspected all the same by its watching
/// neighbour once the start window ends (`SYNC_GIVE_UP` + `GAP_CEILING` × `suspect_after`,
/// 1 s: not at `suspect_after`, 100 ms), and when it does start it finds itself fenced; the others agree
/// without it.
#[test]
fn a_member_that_never_starts_is_suspected_once_the_start_window_ends() {
    let mut hs = three_with_one_late(2, Duration::from_secs(3));
    let late = hs.pop().unwrap();
    let mut ms: Vec<Member> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    let joined = Instant::now();
    // Its parent in ERA's tree, 0, watches it (ERA §2: each watches its tree neighbours).
    assert_eq!(
        ms[0].next_event(Duration::from_millis(2_500)),
        Some(Event::Failed { rank: 2 })
    );
    let took = joined.elapsed();
    assert!(took >= Duration::from_millis(400), "suspected after {took:?}");
    let mut two = late.join().unwrap();
    assert_eq!(two.next_event(Duration::from_secs(5)), Some(Event::Failed { rank: 2 }));
    assert!(two.fenced_by().is_some());
    for m in ms.iter_mut() {
        m.agree(!(1u64 << m.rank())).unwrap();
    }
    for m in ms.iter_mut() {
        let mut failed = Vec::new();
        assert_eq!(agreed(m, 0, &mut failed), (!0b011, vec![2]), "member {}", m.rank());
        // Reported once: 0 by its own suspicion, 1 by the agreement.
        let want: &[u32] = if m.rank() == 0 { &[] } else { &[2] };
        assert_eq!(failed, want, "member {}", m.rank());
    }
}

/// The start window is the longest a peer may take to start once it has the table (timing
/// its clock against a rank 0 that is gone) plus the detector's ceiling, not the larger of
/// the two: a peer that got its table later than this member still has the whole ceiling
/// after its start. (Before, with `suspect_after` of 100 ms: 800 ms, leaving such a peer
/// 600 ms.)
#[test]
fn the_start_window_is_the_clock_sync_plus_the_detectors_ceiling() {
    use crate::protocol::detector::GAP_CEILING;
    use crate::runtime::control::clock::SYNC_GIVE_UP;
    let ceiling = u32::try_from(GAP_CEILING).unwrap();
    for ms in [1, 10, 100, 1000] {
        let s = Duration::from_millis(ms);
        assert_eq!(
            super::start_window(s),
            SYNC_GIVE_UP + s * ceiling,
            "suspect_after {s:?}"
        );
    }
    assert_eq!(super::start_window(Duration::MAX), Duration::MAX, "saturates");
}
