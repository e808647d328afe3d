use super::*;

/// Round trips timed with a preemption every `every` calls (a 1 ms one), 1 µs otherwise.
fn preempted_every(every: u64) -> (RoundTrips, u64) {
    let mut k = 0u64;
    let seen = std::cell::Cell::new(0u64);
    let trips = clean_round_trips_counted(
        100,
        || Some(seen.get() / every),
        || {
            k += 1;
            seen.set(k);
            Ok(if k.is_multiple_of(every) {
                (1_000_000, 500_000, 500_000)
            } else {
                (1000, 100, 50)
            })
        },
    )
    .unwrap();
    (trips, k)
}

/// Batches the thread was preempted in are left out and counted, and as many more are
/// measured, until the kept ones add up to 50 ms; a thread preempted in most keeps them
/// all; a thread that cannot tell keeps them all.
#[test]
fn round_trips_the_thread_was_preempted_in_are_left_out() {
    // 10 unmeasured of 1 µs: batches of 200 (200 µs).
    let (trips, k) = preempted_every(5000);
    assert!(trips.rtt.iter().all(|&r| r == 1000), "a preempted round trip was kept");
    let kept_ns: u64 = trips.rtt.iter().sum();
    assert!(kept_ns >= 50_000_000 && trips.rtt.len() >= 100, "{kept_ns}");
    let away = trips.preempted.unwrap();
    assert_eq!(away + trips.rtt.len(), (k - 10) as usize);
    // Each preemption costs its batch.
    assert_eq!(away, 200 * ((k / 5000) as usize), "{away} {k}");
    assert_eq!(trips.estimate().preempted, trips.preempted);
    let c = trips.calibration("inproc".into(), 8, 1.0, None).unwrap();
    assert_eq!((c.preempted, c.samples), (trips.preempted, trips.rtt.len()));
    // Preempted in every batch: all kept, the preemptions in the tables.
    let (most, k) = preempted_every(7);
    assert_eq!((most.preempted, most.rtt.len()), (Some(0), (k - 10) as usize));
    assert!(most.rtt.contains(&1_000_000));
    let blind = clean_round_trips_counted(10, || None, || Ok((1000, 100, 50))).unwrap();
    assert_eq!(blind.preempted, None);
    assert!(blind.rtt.len() >= 10);
}

#[test]
fn pooled_round_trips_add_their_left_out_counts() {
    let one = |n: usize, away: Option<usize>| RoundTrips {
        rtt: vec![1000; n],
        os: vec![100; n],
        or: vec![50; n],
        preempted: away,
    };
    let mut all = RoundTrips::default();
    all.extend(&one(3, Some(2)));
    all.extend(&one(4, Some(1)));
    assert_eq!((all.rtt.len(), all.preempted), (7, Some(3)));
    all.extend(&one(1, None));
    assert_eq!((all.os.len(), all.preempted), (8, None));
}

#[test]
fn the_estimate_carries_its_spread() {
    let mut rtt: Vec<u64> = (0..400).map(|i| 5000 + i).collect();
    let mut os: Vec<u64> = (0..400).map(|i| 100 + i % 50).collect();
    let mut or: Vec<u64> = vec![70; 400];
    let e = Estimate::from_samples(&mut rtt, &mut os, &mut or);
    let s = e.o_send_ci_ns;
    assert_eq!(s.median, e.o_send_ns as f64);
    assert!(s.lo < s.median && s.median < s.hi && s.spread() > 0.0, "{s:?}");
    assert_eq!((e.o_recv_ci_ns.lo, e.o_recv_ci_ns.hi), (70.0, 70.0));
}
