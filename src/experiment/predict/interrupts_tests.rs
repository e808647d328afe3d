//! A calibration's interruptions in the prediction ([`crate::sim::noise::Interrupts`]): a
//! round trip that a timer tick hit is a rate in time and a length that a node's stretch of
//! the overheads does not stretch.

use super::*;
use crate::experiment::algo::{AlgoName, AlgoSpec, resolve_algo};
use crate::runtime::logp::Calibration;
use crate::sim::noise::Dist;

/// `n` in-process round trips (RTT ~500 ns, o_s ~40, o_r ~50), the 100th one interrupted in
/// its send by 40 µs if asked: (rtt, o_s, o_r).
fn pingpong(n: u64, interrupted: bool) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let mut rtt: Vec<u64> = (0..n).map(|i| 480 + i % 40).collect();
    let mut os: Vec<u64> = (0..n).map(|i| 36 + i % 9).collect();
    let or: Vec<u64> = (0..n).map(|i| 46 + i % 9).collect();
    if interrupted {
        rtt[100] += 40_000;
        os[100] += 40_000;
    }
    (rtt, os, or)
}

/// A corrected tree of 16 whose nodes' overheads are twice the transport's medians (o_s 40,
/// o_r 50): the stretch `bench` applies. Some 110 messages an operation, 20 µs of overheads.
fn model() -> BenchModel {
    BenchModel::new(80, 100, 150)
}

fn at(m: &BenchModel, noise: Arc<Noise>) -> Prediction {
    let algo = resolve_algo(&AlgoSpec::new(AlgoName::CorrectedTree), 16, m.mean_logp(), 0).unwrap();
    predict(&algo, 16, m, None, Some(&noise), &[], (0, 10)).unwrap()
}

fn calibrated(m: &BenchModel, trips: (Vec<u64>, Vec<u64>, Vec<u64>)) -> Prediction {
    let (rtt, os, or) = trips;
    let d = Calibration::noise_from_samples(&rtt, &os, &or).unwrap();
    at(m, node_noise(&d, 40, 50, m).unwrap())
}

/// One interruption in 1 ms of round trips is a rate of one a millisecond: 20 µs of
/// overheads an operation meet one in 2 %, and it lasts its 40 µs. Kept in o_s's samples
/// and stretched with them (how a calibration was read before), it lasted 80 µs.
#[test]
fn an_interruption_keeps_its_length_when_the_overheads_stretch() {
    let m = model();
    let clean = calibrated(&m, pingpong(2000, false));
    let hit = calibrated(&m, pingpong(2000, true));
    let q = |p: &Prediction| p.quiescence[1];
    let once = q(&clean) + 40_000.0;
    assert!(
        (0.95 * once..=1.1 * once).contains(&q(&hit)),
        "quiescence p99 {} with the interruption, {} without",
        q(&hit),
        q(&clean)
    );
    assert!(hit.coloring[0] <= 1.02 * clean.coloring[0], "{hit:?} vs {clean:?}");
    let (_, os, or) = pingpong(2000, true);
    let u = m.unit_ns as f64;
    let stretched = |v: &[u64]| Dist::Samples(v.iter().map(|&x| (x as f64 * 2.0 / u).round() as u64).collect());
    let old = at(
        &m,
        Arc::new(Noise {
            os: stretched(&os),
            or: stretched(&or),
            ..Noise::constant(m.loggp)
        }),
    );
    assert!(q(&old) > 1.6 * once, "per message, stretched: {} vs {once}", q(&old));
}

/// The same interruption in 50 ms of round trips (a calibration's least, `MIN_CALIBRATION`)
/// is one in 50 ms: it leaves p99 where it was.
#[test]
fn an_interruption_in_a_long_calibration_leaves_p99_alone() {
    let m = model();
    let clean = calibrated(&m, pingpong(100_000, false));
    let hit = calibrated(&m, pingpong(100_000, true));
    assert!(
        hit.quiescence[1] <= 1.05 * clean.quiescence[1] && hit.coloring[1] <= 1.05 * clean.coloring[1],
        "{hit:?} vs {clean:?}"
    );
}
