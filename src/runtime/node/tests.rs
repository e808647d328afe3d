use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use super::*;
use crate::model::LogP;
use crate::protocol::bcast::Start;
use crate::protocol::bcast::corrected_tree::{CorrectedTree, TreeShared};
use crate::protocol::bcast::correction::Correction;
use crate::topology::{Order, Tree, TreeKind};
use crate::transport::{Delivery, SendError, TransportStats};

/// What a spy saw of node `rank`'s board entry for operation 0 at some moment:
/// `None`: no entry yet; `Some(ns)`: the entry's delivery stamp (0: not delivered).
type Seen = Arc<Mutex<Vec<Option<u64>>>>;

fn look(ctl: &Control, rank: usize) -> Option<u64> {
    ctl.boards[rank].get(0).map(|b| b.delivered_ns.load(Relaxed))
}

/// A transport that records the sender's board at each send, the datagrams sent and when
/// each send ended (after `delay`: a slow `o_s`), and hands out the datagrams it is given.
struct Spy {
    rank: u32,
    n: u32,
    delay: Duration,
    ended: Arc<Mutex<Vec<Instant>>>,
    ctl: Arc<Control>,
    at_send: Seen,
    /// The sender's board count of operation 0's sends at each send.
    sends_seen: Arc<Mutex<Vec<Option<u32>>>>,
    /// Operation 0's start as the coordinator sees it (`Control::started_ns`) at each send.
    starts_seen: Arc<Mutex<Vec<u64>>>,
    sent: Arc<Mutex<Vec<Vec<u8>>>>,
    inbox: Vec<Vec<u8>>,
    /// How long a read that finds nothing takes (a slow empty read, as UDP's system call).
    empty_read: Duration,
}

impl Transport for Spy {
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.n
    }
    fn send(&mut self, _: u32, bytes: &[u8], _: Instant) -> Result<(), SendError> {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        self.ended.lock().unwrap().push(Instant::now());
        self.at_send.lock().unwrap().push(look(&self.ctl, self.rank as usize));
        let count = self.ctl.boards[self.rank as usize].get(0).map(|b| b.sent.load(Relaxed));
        self.sends_seen.lock().unwrap().push(count);
        self.starts_seen
            .lock()
            .unwrap()
            .push(self.ctl.started_ns[0].load(Relaxed));
        self.sent.lock().unwrap().push(bytes.to_vec());
        Ok(())
    }
    fn poll(&mut self, _: Instant, sink: &mut dyn FnMut(Delivery<'_>)) -> std::io::Result<usize> {
        let Some(b) = self.inbox.pop() else {
            std::thread::sleep(self.empty_read);
            return Ok(0);
        };
        sink(Delivery::Message { from: 0, bytes: &b });
        Ok(1)
    }
    fn wait(&mut self, _: Duration) -> std::io::Result<()> {
        Ok(())
    }
    fn stats(&self) -> TransportStats {
        TransportStats::default()
    }
}

/// Payloads that record the node's board at the user's hand-over.
struct Hand(Generated, Arc<Control>, u32, Seen);

impl Payloads for Hand {
    fn source(&mut self, seq: u64, out: &mut Vec<u8>) {
        self.0.source(seq, out)
    }
    fn admit(&mut self, seq: u64, bytes: &[u8]) -> bool {
        self.0.admit(seq, bytes)
    }
    fn deliver(&mut self, _: u32, _: u64, _: &[u8]) {
        self.3.lock().unwrap().push(look(&self.1, self.2 as usize));
    }
}

/// The forwarding path carries no bookkeeping that no peer waits for: the root's first
/// datagram leaves before it tells the coordinator of the start (the start stamp, its board
/// entry) and before its own delivery is published, and the root's delivery is its start,
/// stamped after the start signal was read (not at the pass's older instant); a receiver
/// hands the payload to its user before it writes its board entry (whose lines the
/// coordinator's core reads), and its delivery stamp is published after.
#[test]
fn bookkeeping_follows_the_send_and_the_hand_over() {
    let n = 2;
    let logp = LogP { l: 2, o: 1 };
    let tree = Tree::build(TreeKind::Binomial, Order::Interleaved, n, logp).unwrap();
    let shared = TreeShared::new(tree, logp, Correction::None, Start::Synchronized);
    let ctl = Arc::new(Control::new(n));
    let epoch = Instant::now();
    let p = NodeParams {
        shared: &shared,
        n,
        root: Some(0),
        job: 7,
        tick_ns: 1,
        epoch,
    };
    let (at_send, sent, handed) = (Seen::default(), Arc::new(Mutex::new(Vec::new())), Seen::default());
    let (sends_seen, starts_seen) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
    let spy = |rank, inbox| Spy {
        rank,
        n,
        delay: Duration::ZERO,
        ended: Arc::default(),
        ctl: ctl.clone(),
        at_send: at_send.clone(),
        sends_seen: sends_seen.clone(),
        starts_seen: starts_seen.clone(),
        sent: sent.clone(),
        inbox,
        empty_read: Duration::ZERO,
    };
    let hand = |rank| Box::new(Hand(Generated::new(8), ctl.clone(), rank, handed.clone()));
    let mut root = Node::<CorrectedTree<0>>::new(0, n, Box::new(spy(0, Vec::new())), hand(0), None, 1, None);
    ctl.allowed.store(1, Relaxed);
    // The worker's instant for the pass, read well before the root sees the start signal.
    let pass_at = Instant::now();
    std::thread::sleep(Duration::from_millis(2));
    root.step(&p, &ctl, pass_at);
    assert_eq!(
        *at_send.lock().unwrap(),
        vec![None],
        "the root sent before it claimed its board entry (and published its delivery)"
    );
    assert_eq!(
        *starts_seen.lock().unwrap(),
        vec![0],
        "the root sent before it told the coordinator of the start"
    );
    let start = ctl.started_ns[0].load(Relaxed);
    let pass_ns = pass_at.duration_since(epoch).as_nanos() as u64;
    assert!(
        start >= pass_ns + 2_000_000,
        "the start is stamped once the signal is read ({start} ns), not at the pass's instant ({pass_ns} ns)"
    );
    assert_eq!(look(&ctl, 0), Some(start), "the root delivers at its start");
    assert_eq!(
        *handed.lock().unwrap(),
        vec![None],
        "the root's user had it before its board entry existed (then its stamp)"
    );
    // The send's count (a write to the board's line) waits until the pass's sends are out.
    assert_eq!(*sends_seen.lock().unwrap(), vec![None], "counted before the send left");
    assert_eq!(ctl.boards[0].get(0).unwrap().sent.load(Relaxed), 1, "counted after");
    let datagram = sent.lock().unwrap().pop().expect("the root sent to rank 1");
    // An 8-byte broadcast's tree message crosses the in-process ring in one cache line.
    assert!(
        datagram.len() <= crate::transport::inproc::ONE_SLOT,
        "{} bytes",
        datagram.len()
    );
    let mut leaf = Node::<CorrectedTree<0>>::new(1, n, Box::new(spy(1, vec![datagram])), hand(1), None, 1, None);
    leaf.step(&p, &ctl, Instant::now());
    assert_eq!(
        handed.lock().unwrap()[1],
        None,
        "the receiver's user had the payload before its board entry existed"
    );
    let d = look(&ctl, 1).expect("then the entry is written");
    assert!(d >= start, "{d} {start}");
    assert_eq!(ctl.boards[1].get(0).unwrap().deliveries.load(Relaxed), 1);
}

/// A benchmark of corrected trees over in-process endpoints on 2 unpinned workers: `n` nodes,
/// `iters` measured operations (after 5), `window` in flight, crashes `kills`.
fn inproc_bench(n: u32, iters: u64, window: u64, kills: &str) -> crate::runtime::Bench {
    use crate::experiment::algo::{AlgoName, AlgoSpec, resolve_algo};
    use crate::runtime::cluster::{ClusterConfig, PollMode};
    let model = LogP { l: 2, o: 1 };
    crate::runtime::Bench {
        algo: resolve_algo(&AlgoSpec::new(AlgoName::CorrectedTree), n, model, 0).unwrap(),
        cluster: ClusterConfig {
            nodes: n,
            workers: 2,
            poll: PollMode::Adaptive,
            warmup: 5,
            iterations: iters,
            window,
            payload_len: 8,
            tick_ns: 1000,
            job: 9,
            seed: 3,
            op_timeout: Duration::from_secs(2),
            idle: Duration::from_micros(500),
            pin: false,
            give_up_after: None,
        },
        transport: crate::runtime::TransportKind::Inproc,
        kills: if kills.is_empty() {
            Vec::new()
        } else {
            crate::runtime::kill::parse_kills(kills, n).unwrap()
        },
        model: model.into(),
        loss: 0.0,
        auth: None,
    }
}

/// A real run's `osu_bcast` figures: every live rank counts every measured operation, a rank
/// killed mid-run only those before its crash, the root's time is 0 (1 ns: its delivery is
/// its start), and no rank's mean exceeds the slowest operation's coloring.
#[test]
fn a_run_records_each_ranks_broadcast_times() {
    let (n, iters) = (4, 40);
    let bench = inproc_bench(n, iters, 1, "2@25");
    let r = crate::experiment::bench::local::run(&bench, None).unwrap();
    assert_eq!((r.measured, r.violations, r.timeouts), (iters, 0, 0), "{r:?}");
    let ops = r.per_rank.ops();
    assert_eq!((ops[0], ops[1], ops[3]), (iters, iters, iters), "{ops:?}");
    assert!(ops[2] < iters && ops[2] >= 19, "rank 2 died in operation 25: {ops:?}");
    let means = r.per_rank.means();
    assert_eq!(means[0], 1.0, "the root delivers at its start");
    let o = r.per_rank.osu().unwrap();
    assert_eq!(o.min, 1.0);
    assert!(o.max <= r.coloring.max() as f64, "{o:?}");
    assert_eq!(o.avg, means.iter().sum::<f64>() / 4.0);
}

/// A node's pass visits only the operations it has opened and not retired (not the whole
/// window): with the window full, operations wrapping the slots several times and every
/// operation's checked correction armed by a timer, each still sends, corrects and finishes.
#[test]
fn a_full_window_wrapping_the_slots_completes_every_operation() {
    use crate::runtime::board::WINDOW;
    let (n, iters) = (6, 5 * WINDOW as u64);
    let bench = inproc_bench(n, iters, WINDOW as u64 / 2, "");
    let r = crate::experiment::bench::local::run(&bench, None).unwrap();
    assert_eq!(
        (r.measured, r.violations, r.timeouts, r.dropped_ops, r.not_run),
        (iters, 0, 0, 0, 0),
        "{r:?}"
    );
    // Every operation's tree messages went out (and the checked correction's on top).
    assert!(r.messages.min() >= u64::from(n - 1), "{}", r.messages.min());
}

/// The counted-wait tests' time unit.
const TICK: Duration = Duration::from_millis(1);

/// A corrected tree over 4 nodes (binomial, L = 2, o = 1) with `correction` and the
/// synchronized start: its shared part, the root's children, and the root's wait after its
/// tree sends in units (`TICK` each).
fn four_nodes(correction: Correction) -> (TreeShared, usize, u64) {
    let logp = LogP { l: 2, o: 1 };
    let tree = Tree::build(TreeKind::Binomial, Order::Interleaved, 4, logp).unwrap();
    let children = tree.children(0).len();
    let shared = TreeShared::new(tree, logp, correction, Start::Synchronized);
    let wait_units = shared.sync_at - children as u64 * logp.o;
    assert!(wait_units >= 2, "{wait_units}");
    (shared, children, wait_units)
}

/// The root's parameters with units of `TICK`.
fn tick_params(shared: &TreeShared) -> NodeParams<'_, TreeShared> {
    NodeParams {
        shared,
        n: 4,
        root: Some(0),
        job: 7,
        tick_ns: TICK.as_nanos() as u64,
        epoch: Instant::now(),
    }
}

/// Rank 0 of 4 over a `Spy` whose sends take `delay` and whose empty reads `empty_read`,
/// allowed its first operation; with the log of its sends' ends.
fn spied_root(
    ctl: &Arc<Control>,
    delay: Duration,
    empty_read: Duration,
) -> (Node<CorrectedTree<0>>, Arc<Mutex<Vec<Instant>>>) {
    let ends = Arc::new(Mutex::new(Vec::new()));
    let tp = Spy {
        rank: 0,
        n: 4,
        delay,
        ended: ends.clone(),
        ctl: ctl.clone(),
        at_send: Seen::default(),
        sends_seen: Arc::default(),
        starts_seen: Arc::default(),
        sent: Arc::default(),
        inbox: Vec::new(),
        empty_read,
    };
    let root = Node::<CorrectedTree<0>>::new(0, 4, Box::new(tp), Box::new(Generated::new(8)), None, 1, None);
    ctl.allowed.store(1, Relaxed);
    (root, ends)
}

/// A counted wait (the synchronized correction start, `Action::Sleep`) runs from the end of
/// the sends before it, as the model's process sleeps from the end of its last send: with
/// sends slower than the pass's instant allows for, the first correction message still
/// leaves a whole wait after the last tree message, not in the same pass.
#[test]
fn a_counted_wait_starts_when_the_sends_before_it_have_left() {
    let (shared, children, wait_units) = four_nodes(Correction::Checked);
    assert_eq!(children, 2);
    let tick = TICK;
    let ctl = Arc::new(Control::new(4));
    let p = tick_params(&shared);
    // Both tree sends together take longer than the wait.
    let (mut root, ends) = spied_root(&ctl, tick * wait_units as u32, Duration::ZERO);
    root.step(&p, &ctl, Instant::now());
    assert_eq!(
        ends.lock().unwrap().len(),
        children,
        "the first pass sends the tree messages only"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while ends.lock().unwrap().len() == children && Instant::now() < deadline {
        root.step(&p, &ctl, Instant::now());
    }
    let ends = ends.lock().unwrap();
    assert!(ends.len() > children, "the correction never started");
    // The correction message's send ended `delay` after it began, which was at least the
    // wait after the last tree message's end.
    let gap = ends[children] - ends[children - 1];
    let least = tick * wait_units as u32 * 2;
    assert!(
        gap >= least,
        "correction sent {gap:?} after the last tree send, before {least:?}"
    );
}

/// A counted wait that ends while the node reads (an empty read as slow as UDP's system call,
/// longer than the whole wait here) is over when the read returns: the first correction
/// message leaves in that pass, as the model's process sends the moment its wait ends, not a
/// pass later (the pass's instant was read before the receive).
#[test]
fn a_counted_wait_that_ends_during_a_read_sends_right_after_it() {
    let (shared, children, wait_units) = four_nodes(Correction::Checked);
    let ctl = Arc::new(Control::new(4));
    let p = tick_params(&shared);
    let (mut root, ends) = spied_root(&ctl, Duration::ZERO, TICK * (wait_units as u32 + 2));
    // One pass: the start's tree messages, the wait, one (slow, empty) read, the send phase.
    root.step(&p, &ctl, Instant::now());
    assert_eq!(
        ends.lock().unwrap().len(),
        children + 1,
        "the correction's first message did not leave in the pass whose read outlasted the wait"
    );
}

/// A protocol timer that expires while the node reads fires when the read returns (the
/// delayed correction's search to the right, Corrected Trees §3.2), not a pass later.
#[test]
fn a_timer_that_expires_during_a_read_fires_right_after_it() {
    // A delay of 40 ticks: a stall between the two steps shorter than that cannot fire the
    // timer at the second step's instant and hide the pass's late timer.
    let (shared, children, wait_units) = four_nodes(Correction::Delayed { delay: Some(40) });
    let ctl = Arc::new(Control::new(4));
    let p = tick_params(&shared);
    // Every read outlasts the synchronized start's wait and the correction's delay.
    let read = TICK * (wait_units + shared.corr.delay + 2) as u32;
    let (mut root, ends) = spied_root(&ctl, Duration::ZERO, read);
    // The tree messages, the wait, a read, the correction's first message (to the left).
    root.step(&p, &ctl, Instant::now());
    assert_eq!(
        ends.lock().unwrap().len(),
        children + 1,
        "the delayed correction did not start"
    );
    // A read that outlasts the delay: nobody answered from the right, so the search to the
    // right begins in this pass.
    root.step(&p, &ctl, Instant::now());
    assert_eq!(
        ends.lock().unwrap().len(),
        children + 2,
        "the timer that expired during the read did not fire in that pass"
    );
}

/// The trace of a real run (cargo feature `trace`): every operation has one start, at the
/// root; every node delivers it once, the root at its start and every other node at or after
/// its first receive; and every receive has, before it, a send of the same message (label)
/// from its sender to it.
#[cfg(feature = "trace")]
#[test]
fn a_traced_run_shows_each_operations_start_deliveries_and_the_send_behind_each_receive() {
    use super::trace::{Row, take};
    let (n, iters) = (6, 30);
    let mut bench = inproc_bench(n, iters, 1, "");
    // Tests run side by side and publish to one place: this run's rows are its job's.
    bench.cluster.job = 0x7ace;
    let r = crate::experiment::bench::local::run(&bench, None).unwrap();
    assert_eq!((r.measured, r.violations, r.timeouts), (iters, 0, 0), "{r:?}");
    let (rows, lost) = take();
    assert_eq!(lost, 0);
    let rows: Vec<Row> = rows.into_iter().filter(|r| r.job == 0x7ace).collect();
    for seq in 0..5 + iters {
        let op: Vec<&Row> = rows.iter().filter(|r| r.seq == seq).collect();
        let of = |node: u32, event: &str| -> Vec<&Row> {
            op.iter()
                .copied()
                .filter(|r| r.node == node && r.event == event)
                .collect()
        };
        let starts: Vec<&Row> = op.iter().copied().filter(|r| r.event == "start").collect();
        assert_eq!(starts.len(), 1, "operation {seq}: {op:?}");
        assert_eq!((starts[0].node, starts[0].peer), (0, 0));
        for node in 0..n {
            let d = of(node, "deliver");
            assert_eq!(d.len(), 1, "operation {seq}, node {node}: {op:?}");
            if node == 0 {
                assert_eq!(d[0].ns, starts[0].ns, "the root delivers at its start");
            } else {
                let first = of(node, "recv").iter().map(|r| r.ns).min().expect("a receive");
                assert!(first <= d[0].ns, "operation {seq}, node {node}: {op:?}");
            }
        }
        let mut sends: Vec<&Row> = op.iter().copied().filter(|r| r.event == "send").collect();
        for recv in op.iter().filter(|r| r.event == "recv") {
            let k = sends
                .iter()
                .position(|s| (s.node, s.peer, s.label) == (recv.peer, recv.node, recv.label) && s.ns <= recv.ns)
                .unwrap_or_else(|| panic!("operation {seq}: no send behind {recv:?}: {op:?}"));
            sends.swap_remove(k);
        }
    }
}
