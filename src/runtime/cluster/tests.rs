use std::time::Duration;

use super::{BUSY_BUCKET_NS, ClusterConfig, Coordinator, IdlePasses, LONGEST_IDLE_PASS_NS, PollMode};

#[test]
fn only_yield_sends_one_message_per_pass() {
    assert_eq!(PollMode::Yield.sends_per_pass(), 1);
    for p in [PollMode::Busy, PollMode::Adaptive, PollMode::Blocking] {
        assert!(p.sends_per_pass() > 1, "{p:?}");
    }
}

#[test]
fn an_idle_pass_as_long_as_an_absence_is_not_a_visit() {
    let mut p = IdlePasses {
        nodes: 2,
        ..IdlePasses::default()
    };
    assert_eq!(p.visit_ns(), None);
    p.add(100);
    p.add(300);
    // A preemption or a sleep: not a round of visits.
    p.add(LONGEST_IDLE_PASS_NS);
    assert_eq!((p.passes, p.ns), (2, 400));
    assert_eq!(p.visit_ns(), Some(100.0), "200 ns a pass over 2 nodes");
}

#[test]
fn a_busy_pass_is_the_median_of_those_with_progress_not_their_mean() {
    let mut p = IdlePasses::default();
    assert_eq!(p.busy_ns(), None);
    for ns in [400, 420, 430, 9_000] {
        p.add_busy(ns);
    }
    // A preemption or a sleep: not a pass, counted apart.
    p.add_busy(LONGEST_IDLE_PASS_NS);
    assert_eq!(p.busy_away, 1);
    // The median's bucket, at its middle (the mean would be 2562).
    assert_eq!(p.busy_ns(), Some(420.0 + BUSY_BUCKET_NS as f64 / 2.0));
    // Idle passes are apart.
    assert_eq!((p.passes, p.ns), (0, 0));
}

/// The simulator's cores with a visit cost serve a process for as many sends in a row as a
/// polling worker's node sends per pass.
#[test]
fn the_models_burst_is_a_polling_workers_sends_per_pass() {
    for p in [PollMode::Busy, PollMode::Adaptive] {
        assert_eq!(p.sends_per_pass(), crate::sim::timing::VISIT_BURST, "{p:?}");
    }
}

/// Two nodes, one operation, no warm-up, with the coordinator's `op_timeout` and `idle`.
fn one_op(op_timeout: Duration, idle: Duration) -> ClusterConfig {
    ClusterConfig {
        nodes: 2,
        workers: 1,
        poll: PollMode::Blocking,
        warmup: 0,
        iterations: 1,
        window: 1,
        payload_len: 0,
        tick_ns: 1,
        job: 1,
        seed: 1,
        op_timeout,
        idle,
        pin: false,
        give_up_after: None,
    }
}

/// A caller's timeout beyond `u64::MAX` ns is saturated, not truncated: `as_nanos() as u64`
/// made 2^64 ns and a bit a timeout of 1.2 ms.
#[test]
fn an_op_timeout_beyond_u64_nanoseconds_saturates() {
    let cfg = one_op(Duration::new(18_446_744_073, 710_551_616), Duration::MAX);
    let c = Coordinator::new(&cfg);
    assert_eq!((c.op_timeout_ns, c.idle_ns), (u64::MAX, u64::MAX));
}

/// A delivery's time seen before its count (the node thread stamps the count, then the time,
/// and may lose its core in between for longer than `idle`) is a delivery being published:
/// the operation waits for it, and is no violation once the count is there. Before, such an
/// operation was over at `idle` with a violation (`1 violations, 0 timeouts` in a node-hop
/// calibration on a loaded machine).
/// A coordinator of `one_op`'s single operation, started at `start` ns, that rank `r` delivered
/// (and finished) at `delivered[r]` ns, its delivery counts not yet stamped; the control and
/// the epoch (2 ms before now) to tick it with.
fn started_op(start: u64, delivered: [u64; 2]) -> (Coordinator, crate::runtime::board::Control, std::time::Instant) {
    use std::sync::atomic::Ordering;
    let c = Coordinator::new(&one_op(Duration::from_secs(3600), Duration::ZERO));
    let ctl = crate::runtime::board::Control::new(2);
    let epoch = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(2));
    ctl.started_ns[0].store(start, Ordering::Release);
    for (r, at) in delivered.into_iter().enumerate() {
        let b = ctl.boards[r].claim(0);
        b.delivered_ns.store(at, Ordering::Release);
        b.last_ns.store(at, Ordering::Relaxed);
        b.finished.store(true, Ordering::Release);
    }
    (c, ctl, epoch)
}

#[test]
fn a_delivery_half_published_is_waited_for_not_a_violation() {
    use std::sync::atomic::Ordering;
    let (mut c, ctl, epoch) = started_op(1, [2, 2]);
    // Rank 0's count is there, rank 1's not yet.
    ctl.boards[0].claim(0).deliveries.store(1, Ordering::Relaxed);
    assert!(c.tick(&ctl, epoch), "still running");
    assert_eq!((c.retired(), c.result().violations), (0, 0), "waited for");
    ctl.boards[1].claim(0).deliveries.store(1, Ordering::Relaxed);
    assert!(!c.tick(&ctl, epoch), "over");
    assert_eq!((c.retired(), c.result().violations, c.result().timeouts), (1, 0, 0));
}

/// A delivery stamped before its operation's start (processes whose clocks disagree by more
/// than a hop) is counted, not only recorded as 1 ns.
#[test]
fn a_delivery_stamped_before_its_start_is_counted() {
    use std::sync::atomic::Ordering;
    let (mut c, ctl, epoch) = started_op(1000, [1000, 400]);
    for r in 0..2 {
        ctl.boards[r].claim(0).deliveries.store(1, Ordering::Relaxed);
    }
    assert!(!c.tick(&ctl, epoch), "over");
    let r = c.result();
    assert_eq!((r.violations, r.timeouts, r.before_start), (0, 0, 1));
    assert_eq!(
        (r.delivery.len(), r.delivery.max()),
        (1, 1),
        "rank 1's, clamped to 1 ns"
    );
}
