use super::*;

#[test]
fn median_interval_brackets_the_median_and_narrows_with_samples() {
    let mut small: Vec<u64> = (0..100).rev().collect();
    let c = Ci::of(&mut small);
    assert_eq!(c.median, 50.0);
    assert!(c.lo < 50.0 && c.hi > 50.0 && c.lo >= 38.0 && c.hi <= 62.0, "{c:?}");
    let mut big: Vec<u64> = (0..10_000).map(|i| i % 100).collect();
    let d = Ci::of(&mut big);
    assert!(d.hi - d.lo < c.hi - c.lo, "{d:?} vs {c:?}");
    assert_eq!(Ci::of(&mut []).median, 0.0);
}

#[test]
fn calibration_round_trips_and_feeds_the_noise_reader() {
    let rtt: Vec<u64> = (0..200).map(|i| 10_000 + 10 * i).collect();
    let os: Vec<u64> = (0..200).map(|i| 1000 + i).collect();
    let or: Vec<u64> = vec![500; 200];
    let c = Calibration::from_samples("udp".into(), 8, &rtt, &os, &or, 700.0, Some(0.5)).unwrap();
    assert_eq!(c.or_ns.median, 500.0);
    assert_eq!(c.os_ns.median, 1100.0);
    let text = serde_json::to_string(&c).unwrap();
    let back: Calibration = serde_json::from_str(&text).unwrap();
    assert_eq!(back.l_ns, c.l_ns);
    let (o, l) = back.o_and_l_ns();
    assert_eq!((o, l), (800, c.l_ns.median as u64));
    let fixed = crate::model::LogGP::new(1, 1, 1, 0, 0).unwrap();
    let noise = crate::sim::Noise::from_json(&text, fixed).unwrap();
    assert_eq!(noise.or.constant(), Some(500));
    assert_eq!(noise.os.max(), 1199);
    assert!(Calibration::from_samples("udp".into(), 8, &[], &[], &[], 1.0, None).is_err());
}

/// The noisy prediction draws from the table as recorded: a tail of a few far outliers
/// (three preempted round trips of 2000) stays a few draws in a thousand, and the draws
/// between the 0.99 quantile and those outliers stay where the samples were. With the
/// old table (0.99, 0.999, 0.9999 and nothing between) the 0.999 quantile falls on an
/// outlier and 0.9 % of the draws spread evenly up to it: every tail check here fails.
#[test]
fn a_calibrations_tail_keeps_its_few_outliers_few() {
    let n = 2000;
    // 1980 round trips' o_s near 3 µs, 17 near 5 µs, three preempted at 40-60 µs.
    let mut os: Vec<u64> = (0..n).map(|i| 3000 + i % 100).collect();
    for (k, v) in os.iter_mut().rev().take(20).enumerate() {
        *v = match k {
            0 => 60_000,
            1 => 50_000,
            2 => 40_000,
            _ => 5000 + k as u64,
        };
    }
    let rtt = vec![20_000; n as usize];
    let or = vec![1000; n as usize];
    let json = Calibration::noise_from_samples(&rtt, &os, &or).unwrap();
    let fixed = crate::model::LogGP::new(1, 1, 1, 0, 0).unwrap();
    let noise = crate::sim::Noise::from_json(&json.to_string(), fixed).unwrap();
    let mut rng = crate::protocol::ProtoRng::new(3);
    let mut draws: Vec<u64> = (0..200_000).map(|_| noise.os.draw(&mut rng)).collect();
    draws.sort_unstable();
    let at = |q: f64| draws[(q * (draws.len() - 1) as f64) as usize];
    assert!(at(0.98) < 3100, "below the tail: {}", at(0.98));
    assert!((5000..=5100).contains(&at(0.995)), "inside the tail: {}", at(0.995));
    assert!(
        at(0.998) < 10_000,
        "the outliers stay a few in a thousand: {}",
        at(0.998)
    );
    assert_eq!(noise.os.max(), 60_000);
    let above = draws.iter().filter(|&&d| d > 10_000).count() as f64 / draws.len() as f64;
    assert!(above < 0.002, "{above}");
}

/// Round trips far longer than the median one are interruptions: counted per time, kept
/// out of `o_s`, `o_r` and `L`'s tables; the medians still count every round trip.
#[test]
fn interrupted_round_trips_become_a_rate_and_leave_the_tables() {
    let n = 4000;
    let mut rtt: Vec<u64> = (0..n).map(|i| 500 + i % 50).collect();
    let mut os: Vec<u64> = (0..n).map(|i| 40 + i % 10).collect();
    let or: Vec<u64> = vec![50; n as usize];
    // Three interruptions, in the send (two) and in the wait (one); and one round trip
    // long but below the cut (median + max(2 median, 5 µs)).
    for (i, extra, in_send) in [
        (7, 30_000, true),
        (1500, 45_000, true),
        (3000, 20_000, false),
        (3500, 5_000, false),
    ] {
        rtt[i] += extra;
        if in_send {
            os[i] += extra;
        }
    }
    let json = Calibration::noise_from_samples(&rtt, &os, &or).unwrap();
    let total: u64 = rtt.iter().sum();
    let i = &json["interrupts"];
    assert!((i["rate"].as_f64().unwrap() - 3.0 / total as f64).abs() < 1e-15, "{i}");
    let fixed = crate::model::LogGP::new(1, 1, 1, 0, 0).unwrap();
    let noise = crate::sim::Noise::from_json(&json.to_string(), fixed).unwrap();
    assert_eq!(noise.os.max(), 49, "the interrupted sends left o_s's table");
    assert!(
        noise.l.max() >= 2_000,
        "the long one below the cut stays: {}",
        noise.l.max()
    );
    let ex = &noise.interrupts.as_ref().unwrap().excess;
    let mut rng = crate::protocol::ProtoRng::new(1);
    let draws: Vec<u64> = (0..1000).map(|_| ex.draw(&mut rng)).collect();
    assert!(draws.iter().all(|&d| (19_900..=45_100).contains(&d)), "{:?}", ex);
    let c = Calibration::from_samples("udp".into(), 8, &rtt, &os, &or, 1.0, None).unwrap();
    assert_eq!(c.noise, json, "a saved calibration records the same");
    assert_eq!(c.samples, n as usize);
    // None interrupted: a rate of 0.
    let quiet = Calibration::noise_from_samples(&[500; 10], &[40; 10], &[50; 10]).unwrap();
    assert_eq!(quiet["interrupts"]["rate"], 0.0);
}
