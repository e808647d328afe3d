//! ERA's per-message path allocates nothing once warm: two agreement nodes on the generic
//! node loop (`Driver<EraFraming>`: in-process transport, codec, heartbeat failure detector
//! checking ERA's tree neighbours at every pass) run failure-free agreements in one thread,
//! and a counting allocator (the `allocation-counter` crate) counts that thread's allocations
//! after a warm-up.

use std::time::{Duration, Instant};

use ftcoll::protocol::agree::{And64, Era, EraConfig};
use ftcoll::protocol::{DetectorConfig, Event, Machine};
use ftcoll::runtime::agree::{EraFraming, contribution};
use ftcoll::runtime::driver::Driver;
use ftcoll::transport::Transport;
use ftcoll::transport::inproc::InprocNet;

type Node = (Era<And64>, Driver<EraFraming>);

/// Runs `agreements` failure-free agreements from `from` on every node; passes until each
/// returned.
fn agree(nodes: &mut [Node], from: u64, agreements: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for id in from..from + agreements {
        for (r, (era, _)) in nodes.iter_mut().enumerate() {
            era.handle(0, Event::Input(contribution(3, r as u32, id, true)))
                .unwrap();
        }
        let mut returned = 0;
        while returned < nodes.len() {
            assert!(Instant::now() < deadline, "agreement {id} did not return");
            for (era, drv) in nodes.iter_mut() {
                let now = Instant::now();
                drv.receive(era, now);
                drv.detect(now, |nb| era.neighbours(nb));
                assert!(drv.poll_suspect().is_none(), "no suspicion in a failure-free run");
                drv.transmit(era, now, || true);
                while era.poll_output().is_some() {
                    returned += 1;
                }
            }
        }
    }
}

#[test]
fn a_warm_agreement_node_allocates_nothing_per_message() {
    let n = 2;
    let (_net, eps) = InprocNet::new(n, 64);
    let base = Instant::now();
    // The detector checks the neighbours at every pass (every `heartbeat / 4`) and sends
    // heartbeats, with no suspicion in sight.
    let det = DetectorConfig {
        heartbeat: 1,
        suspect_after: 3_600_000_000_000,
    };
    let mut nodes: Vec<Node> = eps
        .into_iter()
        .map(|tp| {
            let era = Era::new(tp.rank(), n, EraConfig::default()).unwrap();
            (era, Driver::new(Box::new(tp), 1, det, base))
        })
        .collect();
    for (_, drv) in nodes.iter_mut() {
        drv.settle();
        drv.start(Instant::now());
    }
    agree(&mut nodes, 0, 200);
    // (`allocation_counter` is this test binary's global allocator: it counts this thread's
    // allocations and reallocations while the closure runs.)
    let spent = allocation_counter::measure(|| agree(&mut nodes, 200, 2000)).count_total;
    // (The counter is live: one vector is one allocation.)
    let one = allocation_counter::measure(|| drop(std::hint::black_box(vec![0u8; 64]))).count_total;
    assert_eq!(one, 1, "the counting allocator is not installed");
    let messages: u64 = nodes.iter().map(|(_, d)| d.messages).sum();
    let heartbeats: u64 = nodes.iter().map(|(_, d)| d.heartbeats).sum();
    assert!(
        messages >= 2 * 2200 && heartbeats > 0,
        "{messages} messages, {heartbeats} heartbeats"
    );
    assert_eq!(spent, 0, "allocations in 2000 warm agreements");
}
