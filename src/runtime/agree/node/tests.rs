use super::*;
use crate::protocol::agree::EraConfig;
use crate::runtime::driver::Verdict;
use crate::transport::inproc::InprocNet;

/// Every message of failure-free agreements, as the node encodes it, fits one ring slot
/// of the in-process transport, and decodes back to itself.
#[test]
fn failure_free_agreements_send_one_slot_datagrams() {
    use crate::transport::inproc::ONE_SLOT;
    for n in [2, 8] {
        let mut eras: Vec<Era<And64>> = (0..n).map(|r| Era::new(r, n, EraConfig::default()).unwrap()).collect();
        let mut buf = vec![0u8; EraFraming::MAX_DATAGRAM];
        let mut sent = 0;
        for id in 0..300 {
            for (r, era) in eras.iter_mut().enumerate() {
                era.agree(contribution(5, r as Rank, id, true)).unwrap();
            }
            let mut returned = 0;
            while returned < n {
                for r in 0..n as usize {
                    while let Some((to, m)) = eras[r].poll_send() {
                        let len = EraFraming::encode(&m, JOB, r as Rank, &mut buf).unwrap();
                        assert!(len <= ONE_SLOT, "{len} bytes: {m:?}");
                        let (h, body, _) = Header::decode(&buf[..len], JOB, n).unwrap();
                        let Ok(Decoded::Msg(back)) = EraFraming::decode_datagram(&h, body, n) else {
                            panic!("{m:?} does not decode");
                        };
                        assert_eq!(back, m);
                        eras[to as usize].on_message(r as Rank, back);
                        sent += 1;
                    }
                    while eras[r].poll_outcome().is_some() {
                        returned += 1;
                    }
                }
            }
        }
        assert_eq!(sent, 300 * 2 * (n - 1), "an UP and a DOWN per edge");
    }
}

/// An in-process agreement run of `n` nodes and `iterations` agreements without warm-up, with
/// `kills`, a 100 µs heartbeat and the given suspicion and operation timeouts.
fn inproc_bench(
    n: u32,
    iterations: u64,
    kills: Vec<(u32, u64)>,
    suspect_after: Duration,
    op_timeout: Duration,
) -> crate::runtime::agree::AgreeBench {
    use crate::runtime::agree::{AgreeBench, AgreeTransport};
    AgreeBench {
        n,
        era: EraConfig::default(),
        transport: AgreeTransport::Inproc,
        workers: 1,
        pin: false,
        warmup: 0,
        iterations,
        duration: None,
        kills,
        stalls: Vec::new(),
        heartbeat: Duration::from_micros(100),
        suspect_after,
        op_timeout,
        seed: 1,
    }
}

/// Node 0 of two over in-process queues, whose injected kill strikes instead of its first
/// agreement, and the run's shared state (`base`: the run's start).
fn node_killed_at_first_agreement(base: Instant) -> (InprocNet, crate::runtime::agree::Shared, Node) {
    use crate::runtime::agree::Shared;
    let n = 2;
    let b = inproc_bench(n, 1, vec![(0, 0)], Duration::from_millis(100), Duration::from_secs(1));
    let (net, mut eps) = InprocNet::new(n, 64);
    let sh = Shared::new(base, n, 0, Some(0));
    let init = NodeInit {
        rank: 0,
        total: 1,
        deadline: None,
        kill_id: Some(0),
        stall: None,
    };
    let node = Node::new(&b, init, Box::new(eps.swap_remove(0)), base).unwrap();
    (net, sh, node)
}

/// An injected kill is stamped when the node dies, not at its pass's instant: a node
/// killed instead of entering its first agreement, stepped with an instant 5 ms old,
/// stamps the kill at least 5 ms after the run's base.
#[test]
fn a_kill_is_stamped_when_the_node_dies() {
    let base = Instant::now();
    let (_net, sh, mut node) = node_killed_at_first_agreement(base);
    std::thread::sleep(Duration::from_millis(5));
    node.start(&sh, base);
    let killed = sh.kill_ns.load(Ordering::Acquire);
    assert!(killed != u64::MAX, "the node did not die");
    assert!(
        killed >= 5_000_000,
        "the kill was stamped {killed} ns after the base, at the stale instant"
    );
}

/// A dead node's later steps return at once, without the returns window's lock: a dead node
/// on a shared worker waited for another thread's fold on every pass. The window is held by
/// this test while the dead node steps.
#[test]
fn a_dead_node_steps_without_waiting_for_the_window() {
    let base = Instant::now();
    let (_net, sh, mut node) = node_killed_at_first_agreement(base);
    node.start(&sh, base);
    assert!(node.dead, "the injected kill struck at the start");
    let window = sh.window();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let progress = node.step(&sh);
            let _ = tx.send(progress);
        });
        let got = rx.recv_timeout(Duration::from_secs(5));
        drop(window);
        assert_eq!(got, Ok(false), "the dead node's step waited for the window");
    });
}

/// The generic loop alone, three ERA nodes over in-process queues: one agreement
/// returns everywhere, then node 2 goes silent (its endpoint stays open, so only the
/// heartbeats' silence tells) and the other two suspect it, by silence, and agree
/// without it.
#[test]
fn the_generic_loop_agrees_and_its_detector_suspects_a_silent_node() {
    let n = 3;
    let (_net, eps) = InprocNet::new(n, 64);
    let base = Instant::now();
    let det = DetectorConfig {
        heartbeat: 1_000_000,
        suspect_after: 40_000_000,
    };
    let mut nodes: Vec<(Era<And64>, Driver<EraFraming>)> = eps
        .into_iter()
        .map(|tp| {
            let r = tp.rank();
            let era = Era::new(r, n, EraConfig::default()).unwrap();
            (era, Driver::new(Box::new(tp), JOB, det, base))
        })
        .collect();
    let pass = |nodes: &mut Vec<(Era<And64>, Driver<EraFraming>)>, live: u32| {
        let mut outs = Vec::new();
        let mut suspects = Vec::new();
        for (r, (era, drv)) in nodes.iter_mut().enumerate().take(live as usize) {
            let now = Instant::now();
            drv.receive(era, now);
            drv.detect(now, |nb| era.neighbours(nb));
            while let Some((p, how)) = drv.poll_suspect() {
                suspects.push((r as Rank, p, how));
                _ = era.handle(0, Event::Suspect(p));
            }
            drv.transmit(era, now, || true);
            while let Some(o) = era.poll_output() {
                outs.push((r as Rank, o));
            }
        }
        (outs, suspects)
    };
    for (era, drv) in nodes.iter_mut() {
        drv.start(Instant::now());
        era.handle(0, Event::Input(And64(!0))).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut returned = 0;
    while returned < n && Instant::now() < deadline {
        returned += pass(&mut nodes, n).0.len() as u32;
    }
    assert_eq!(returned, n, "the failure-free agreement returns everywhere");
    for (era, _) in nodes.iter_mut().take(2) {
        era.handle(0, Event::Input(And64(!0))).unwrap();
    }
    let (mut outs, mut suspects) = (Vec::new(), Vec::new());
    while outs.len() < 2 && Instant::now() < deadline {
        let (o, s) = pass(&mut nodes, 2);
        outs.extend(o);
        suspects.extend(s);
    }
    assert_eq!(outs.len(), 2, "the survivors return: {suspects:?}");
    assert!(outs.iter().all(|(_, o)| o.failed.contains(2)));
    assert!(
        suspects.iter().all(|&(_, p, how)| p == 2 && how == Verdict::Silence),
        "{suspects:?}"
    );
    assert!(nodes[0].1.heartbeats + nodes[1].1.heartbeats > 0);
}

/// A node process's nodes (`--procs`, `--join`: a tap, [`Shared::streaming`]) run their
/// agreements without ever building the run's window: its histograms would be most of the
/// process's private memory, which a SIGKILL unmaps before the socket closes.
#[test]
fn a_node_process_runs_without_building_the_window() {
    use crate::runtime::agree::Shared;
    let (n, total) = (2u32, 300u64);
    let b = inproc_bench(n, total, Vec::new(), Duration::from_secs(10), Duration::from_secs(10));
    let base = Instant::now();
    let (_net, eps) = InprocNet::new(n, 64);
    let sh = Shared::streaming(base, n, 0, None);
    let mut nodes: Vec<Node> = eps
        .into_iter()
        .enumerate()
        .map(|(r, ep)| {
            let init = NodeInit {
                rank: r as Rank,
                total,
                deadline: None,
                kill_id: None,
                stall: None,
            };
            let mut node = Node::new(&b, init, Box::new(ep), base).unwrap();
            node.tap = Some(Vec::new());
            node
        })
        .collect();
    for node in &mut nodes {
        node.start(&sh, Instant::now());
    }
    let until = Instant::now() + Duration::from_secs(20);
    while nodes.iter().any(|nd| !nd.finished) && Instant::now() < until {
        for node in &mut nodes {
            node.step(&sh);
        }
    }
    for node in &mut nodes {
        node.record_returns(&sh, Fold::Wait);
        assert!(
            node.finished,
            "node {} returned {} of {total}",
            node.rank, node.returned
        );
        assert_eq!(
            node.tap.as_ref().map(Vec::len),
            Some(total as usize),
            "every return on the tap"
        );
    }
    assert!(
        sh.window.lock().unwrap().is_none(),
        "a node process built the window it never folds into"
    );
    // The threads run's shared state has its window from the start.
    let threads = Shared::new(base, n, 0, None);
    assert!(threads.window.lock().unwrap().is_some());
}

/// Each agreement's value is checked by one node, the same at every node: `id mod n`, or the
/// next rank that neither the decided failed set names nor the run kills or stalls; over `n`
/// agreements each other node checks as many as it is `id mod n` for plus those of the
/// skipped ranks before it.
#[test]
fn one_live_node_checks_each_agreements_value() {
    use crate::protocol::agree::RankSet;
    let none = RankSet::new();
    assert_eq!(checker(4, 0, &none, &[]), Some(0));
    assert_eq!(checker(4, 6, &none, &[]), Some(2));
    let dead = RankSet::of([2, 3]);
    assert_eq!(checker(4, 2, &dead, &[]), Some(0), "wraps past the dead 2 and 3");
    assert_eq!(checker(4, 1, &dead, &[]), Some(1));
    assert_eq!(checker(4, 1, &dead, &[1]), Some(0), "1 will be killed: 0 checks");
    assert_eq!(checker(2, 5, &RankSet::of([0, 1]), &[]), None, "no one left");
    let mut checks = [0u32; 8];
    let dead = RankSet::of([3]);
    for id in 0..800u64 {
        checks[checker(8, id, &dead, &[4]).unwrap() as usize] += 1;
    }
    assert_eq!(checks, [100, 100, 100, 0, 0, 300, 100, 100]);
    assert_eq!(
        checker(u32::MAX, u64::MAX, &none, &[]),
        Some((u64::MAX % u64::from(u32::MAX)) as u32)
    );
}

/// A node whose dead child was routed around is probed at once, and found dead by the
/// transport: the root of eight nodes over in-process queues, with a 1 s heartbeat (its own
/// detector would not find the child for half a second), gets the UP of a leaf that knows
/// its parent dead; its next two steps probe that parent and take the transport's
/// suspicion, with no time passing for any heartbeat.
#[test]
fn a_child_routed_around_is_probed_and_suspected_without_a_heartbeat() {
    let n = 8;
    let base = Instant::now();
    let mut b = inproc_bench(n, 10, Vec::new(), Duration::from_secs(10), Duration::from_secs(10));
    b.heartbeat = Duration::from_secs(1);
    let era: Era<And64> = Era::new(0, n, b.era).unwrap();
    let (tree, none) = (era.tree(), vec![false; n as usize]);
    let mut kids = Vec::new();
    let (c, g) = (1..n)
        .find_map(|g| {
            tree.children(&none, g, &mut kids);
            let c = tree.parent(&none, g)?;
            (kids.is_empty() && c != 0 && tree.parent(&none, c) == Some(0)).then_some((c, g))
        })
        .expect("a grandchild of the root");
    let (net, mut eps) = InprocNet::new(n, 64);
    let sh = Shared::new(base, n, 0, None);
    let ep0 = eps.remove(0);
    let init = NodeInit {
        rank: 0,
        total: 10,
        deadline: None,
        kill_id: None,
        stall: None,
    };
    let mut root = Node::new(&b, init, Box::new(ep0), base).unwrap();
    root.start(&sh, Instant::now());
    root.step(&sh);
    assert!(root.suspected.is_empty());

    // The child dies (as an injected kill makes it); the leaf found out and sends its UP
    // to the root.
    net.kill(c);
    sh.dead[c as usize].store(true, Ordering::Release);
    let mut leaf: Era<And64> = Era::new(g, n, b.era).unwrap();
    leaf.on_dead(c);
    leaf.agree(contribution(b.seed, g, 0, true)).unwrap();
    let (to, up) = leaf.poll_send().expect("the leaf's UP");
    assert_eq!(to, 0);
    let mut buf = vec![0u8; EraFraming::MAX_DATAGRAM];
    let len = EraFraming::encode(&up, JOB, g, &mut buf).unwrap();
    eps[g as usize - 1].send(0, &buf[..len], Instant::now()).unwrap();

    for _ in 0..3 {
        root.step(&sh);
    }
    assert_eq!(root.drv.probes, 1, "one probe of the child routed around");
    assert_eq!(root.suspected, [c], "the transport's answer to the probe");
    assert!(root.era.known_dead().contains(c));
    assert_eq!(root.false_suspicions, 0);
}
