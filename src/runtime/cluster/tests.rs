use std::time::{Duration, Instant};

use super::{ClusterConfig, PollMode};
use crate::model::LogP;
use crate::protocol::bcast::Start;
use crate::protocol::bcast::algo::Algo;
use crate::protocol::bcast::correction::Correction;
use crate::runtime::{Bench, TransportKind, run_on};
use crate::topology::{Order, TreeKind};
use crate::transport::udp::{UdpConfig, UdpTransport};
use crate::transport::{Delivery, SendError, Transport, TransportStats};

#[test]
fn only_yield_sends_one_message_per_pass() {
    assert_eq!(PollMode::Yield.sends_per_pass(), 1);
    for p in [PollMode::Busy, PollMode::Adaptive, PollMode::Blocking] {
        assert!(p.sends_per_pass() > 1, "{p:?}");
    }
}

/// A UDP endpoint whose thread stalls once, for `pause`, in the delivery of its `after`-th
/// message (a descheduled process): its peers get no acknowledgement, suspect it and fence it.
struct Stalling {
    inner: UdpTransport,
    after: u64,
    delivered: u64,
    pause: Duration,
}

impl Transport for Stalling {
    fn rank(&self) -> u32 {
        self.inner.rank()
    }
    fn size(&self) -> u32 {
        self.inner.size()
    }
    fn send(&mut self, to: u32, bytes: &[u8], now: Instant) -> Result<(), SendError> {
        self.inner.send(to, bytes, now)
    }
    fn poll(&mut self, now: Instant, sink: &mut dyn FnMut(Delivery<'_>)) -> std::io::Result<usize> {
        let (delivered, after, pause) = (&mut self.delivered, self.after, self.pause);
        self.inner.poll(now, &mut |d| {
            let msg = matches!(d, Delivery::Message { .. });
            sink(d);
            if msg {
                *delivered += 1;
                if *delivered == after {
                    std::thread::sleep(pause);
                }
            }
        })
    }
    fn wait(&mut self, timeout: Duration) -> std::io::Result<()> {
        self.inner.wait(timeout)
    }
    fn stats(&self) -> TransportStats {
        self.inner.stats()
    }
}

#[test]
fn a_fenced_root_stops_the_run_at_once_and_is_named() {
    // Rank 0, the root, stalls 1 s mid-run with correction messages to it unacknowledged:
    // a peer suspects it (silence capped at 300 ms), fences it, and rank 0 stops when it
    // wakes. Nothing can start after that: the run stops at once, without waiting out any
    // operation's timeout, and says the root was fenced.
    let n = 6;
    let iterations = 200;
    let b = Bench {
        algo: Algo::CorrectedTree {
            tree: TreeKind::Binomial,
            order: Order::Interleaved,
            correction: Correction::Checked,
            start: Start::Synchronized,
        },
        cluster: ClusterConfig {
            nodes: n,
            workers: n as usize,
            poll: PollMode::Blocking,
            warmup: 10,
            iterations,
            window: 1,
            payload_len: 16,
            tick_ns: 1000,
            job: 0xF0_0F,
            seed: 5,
            op_timeout: Duration::from_secs(5),
            idle: Duration::from_micros(500),
            pin: false,
            give_up_after: Some(3),
        },
        transport: TransportKind::Udp,
        kills: Vec::new(),
        model: LogP { l: 2, o: 1 }.into(),
        loss: 0.0,
        auth: None,
    };
    let cfg = UdpConfig {
        job: b.cluster.job,
        seed: b.cluster.seed,
        silence_max: Duration::from_millis(300),
        ..UdpConfig::default()
    };
    let (_, ts) = UdpTransport::bind_ephemeral_local(n, cfg).expect("sockets");
    let eps = ts
        .into_iter()
        .map(|t| {
            let t: Box<dyn Transport> = if t.rank() == 0 {
                Box::new(Stalling {
                    inner: t,
                    after: 40,
                    delivered: 0,
                    pause: Duration::from_secs(1),
                })
            } else {
                Box::new(t)
            };
            (t, None)
        })
        .collect();
    let res = run_on(&b, eps, None).expect("runs");
    let summary = format!(
        "{} ops, {} not run, {} timeouts, dead {:?}, {} false suspicions, root lost {:?}, wall {:?}",
        res.measured, res.not_run, res.timeouts, res.dead_nodes, res.false_suspicions, res.root_lost, res.wall
    );
    let Some((0, Some(by))) = res.root_lost else {
        panic!("the run did not stop on the fenced root: {summary}");
    };
    assert!(by != 0 && by < n, "{summary}");
    assert!(res.dead_nodes.contains(&0) && res.false_suspicions >= 1, "{summary}");
    assert!(res.not_run > 0, "{summary}");
    assert_eq!(res.measured + res.not_run, iterations, "{summary}");
    // Stopped at once: no operation waited out its timeout (the old rule waited for the one
    // in flight and then counted 3 timeouts in a row).
    assert_eq!(res.timeouts, 0, "{summary}");
}
