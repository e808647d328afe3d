//! The group's thread: its members' runtime nodes, the coordinator that starts and retires
//! broadcasts, and the bridge to the caller (requests in, events out).

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{self, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::agree::Agreements;
use super::{Event, FencedBy, Group, GroupBuilder, GroupError};
use crate::model::LogP;
use crate::protocol::{Protocol, SharedInfo};
use crate::runtime::board::{Control, WINDOW};
use crate::runtime::cluster::{ClusterConfig, Coordinator, PollMode};
use crate::runtime::node::{Node, NodeParams, Payloads};
use crate::runtime::{Endpoints, endpoints};
use crate::transport::MAX_PAYLOAD;
use crate::wire::dispatch::{Dispatch, Visit};
use crate::wire::{HEADER_LEN, WireMessage};

/// The most members whose ERA messages fit one datagram.
pub(super) const MAX_AGREE_MEMBERS: u32 = crate::runtime::agree::MAX_NODES;

/// What the caller asks of the group's thread.
pub(super) enum Request {
    Broadcast { seq: u64, root: u32, bytes: Vec<u8> },
    Agree { member: u32, value: u64 },
    Kill(u32),
}

/// Payloads waiting for their root to start them, by sequence number.
type Pending = Arc<Mutex<HashMap<u64, Vec<u8>>>>;

/// One member's payloads: the caller's bytes at the root, any bytes admitted (they are the
/// root's, the transport delivers them intact), deliveries reported as events.
struct Member {
    rank: u32,
    max: usize,
    pending: Pending,
    events: mpsc::Sender<Event>,
}

impl Payloads for Member {
    fn source(&mut self, seq: u64, out: &mut Vec<u8>) {
        if let Some(b) = self.pending.lock().expect("not poisoned").remove(&seq) {
            out.extend_from_slice(&b);
        }
    }

    fn admit(&mut self, _seq: u64, bytes: &[u8]) -> bool {
        bytes.len() <= self.max
    }

    fn deliver(&mut self, root: u32, seq: u64, bytes: &[u8]) {
        let _ = self.events.send(Event::Delivered {
            member: self.rank,
            root,
            seq,
            bytes: bytes.to_vec(),
        });
    }
}

/// Everything the thread needs, moved into it.
struct Setup {
    cfg: ClusterConfig,
    eps: Endpoints,
    agreements: Option<Agreements>,
    ctl: Arc<Control>,
    fenced: Arc<FencedBy>,
    requests: mpsc::Receiver<Request>,
    events: mpsc::Sender<Event>,
    ready: mpsc::Sender<Result<usize, String>>,
}

/// Builds the endpoints, starts the thread, and waits until its members are up.
pub(super) fn start(#[allow(unused_mut)] mut b: GroupBuilder) -> Result<Group, GroupError> {
    let n = b.n;
    if n < 2 {
        return Err(GroupError::Setup(format!("a group needs at least 2 members, not {n}")));
    }
    let job = crate::transport::ids::group(b.seed);
    #[allow(unused_mut)]
    let mut eps = endpoints(b.transport, n, job, b.seed, 0.0).map_err(GroupError::Setup)?;
    #[cfg(test)]
    if let Some(wrap) = b.wrap.as_mut() {
        eps = eps
            .into_iter()
            .enumerate()
            .map(|(r, (t, d))| (wrap(r as u32, t), d))
            .collect();
    }
    // Agreements run over endpoints of their own (another job id), for groups whose ERA
    // messages fit a datagram.
    let agreements = if n <= MAX_AGREE_MEMBERS {
        let job = crate::transport::ids::group_agree(b.seed);
        let eps = endpoints(b.transport, n, job, b.seed, 0.0).map_err(GroupError::Setup)?;
        let a = Agreements::new(eps, n, job, b.heartbeat, b.suspect_after).map_err(GroupError::Setup)?;
        #[cfg(test)]
        let a = a.with_hang(b.hang_agree.take());
        Some(a)
    } else {
        None
    };
    let cfg = ClusterConfig {
        nodes: n,
        workers: 1,
        poll: PollMode::Adaptive,
        warmup: 0,
        iterations: 0,
        window: b.window,
        payload_len: 0,
        tick_ns: b.o_ns,
        job,
        seed: b.seed,
        op_timeout: b.op_timeout,
        idle: Duration::from_micros(500),
        pin: false,
        give_up_after: None,
    };
    let model = LogP {
        l: (b.l_ns + b.o_ns / 2) / b.o_ns,
        o: 1,
    };
    let ctl = Arc::new(Control::new(n));
    let fenced = Arc::new(FencedBy::new(n));
    let (req_tx, req_rx) = mpsc::channel();
    let (ev_tx, ev_rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::channel();
    let setup = Setup {
        cfg,
        eps,
        agreements,
        ctl: ctl.clone(),
        fenced: fenced.clone(),
        requests: req_rx,
        events: ev_tx,
        ready: ready_tx.clone(),
    };
    let algo = b.algo;
    let thread = std::thread::Builder::new()
        .name("ftcoll-group".into())
        .spawn(move || {
            if let Err(e) = algo.dispatch(n, model, Run(setup)) {
                let _ = ready_tx.send(Err(e));
            }
        })
        .map_err(|e| GroupError::Setup(format!("cannot start the group's thread: {e}")))?;
    let max_payload = match ready_rx.recv() {
        Ok(Ok(max)) => max,
        Ok(Err(e)) => {
            let _ = thread.join();
            return Err(GroupError::Setup(e));
        }
        Err(_) => {
            let _ = thread.join();
            return Err(GroupError::Closed);
        }
    };
    Ok(Group {
        n,
        next_seq: 0,
        agreements: vec![0; n as usize],
        max_payload,
        ctl,
        fenced,
        requests: Some(req_tx),
        events: ev_rx,
        thread: Some(thread),
    })
}

struct Run(Setup);

impl Visit for Run {
    type Out = ();
    fn visit<P>(self, shared: &P::Shared)
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        drive::<P>(shared, self.0);
    }
}

/// The thread's loop: take requests, step every member, let the coordinator start and
/// retire broadcasts, report what happened; until the caller drops the group.
fn drive<P>(shared: &P::Shared, s: Setup)
where
    P: Protocol,
    P::Shared: SharedInfo,
    P::Msg: WireMessage,
{
    let Setup {
        cfg,
        eps,
        mut agreements,
        ctl,
        fenced,
        requests,
        events,
        ready,
    } = s;
    let n = cfg.nodes;
    let max = MAX_PAYLOAD.saturating_sub(HEADER_LEN + P::Msg::MAX_BODY);
    let pending: Pending = Arc::default();
    let mut nodes: Vec<Node<P>> = eps
        .into_iter()
        .enumerate()
        .map(|(r, (t, on_death))| {
            let member = Member {
                rank: r as u32,
                max,
                pending: pending.clone(),
                events: events.clone(),
            };
            Node::<P>::new(r as u32, n, t, Box::new(member), None, cfg.seed, on_death)
        })
        .collect();
    let params = NodeParams {
        shared,
        n,
        root: None,
        job: cfg.job,
        tick_ns: cfg.tick_ns,
        epoch: Instant::now(),
    };
    let mut coord = Coordinator::new(&cfg);
    // Asked for, not yet handed to the coordinator (a slot is reused only once its
    // previous operation is retired); then in flight.
    let mut queued: VecDeque<(u64, u32)> = VecDeque::new();
    let mut in_flight: VecDeque<(u64, u32)> = VecDeque::new();
    let _ = ready.send(Ok(max));
    drop(ready);
    let mut idle = 0u32;
    // Members reported failed (once each, however they stopped).
    let mut failed = vec![false; n as usize];
    loop {
        loop {
            match requests.try_recv() {
                Ok(Request::Broadcast { seq, root, bytes }) => {
                    pending.lock().expect("not poisoned").insert(seq, bytes);
                    queued.push_back((seq, root));
                }
                Ok(Request::Agree { member, value }) => {
                    if let Some(a) = agreements.as_mut() {
                        a.agree(member, value);
                    }
                }
                Ok(Request::Kill(r)) => {
                    if nodes[r as usize].alive() {
                        fail(
                            r,
                            None,
                            &mut nodes,
                            &mut agreements,
                            &mut failed,
                            (&ctl, &fenced),
                            &events,
                        );
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        while let Some(&(seq, root)) = queued.front() {
            if seq >= coord.retired() + WINDOW as u64 / 2 {
                break;
            }
            ctl.set_root(seq, root);
            let pushed = coord.push_op();
            debug_assert_eq!(pushed, seq, "one sequence, in the order asked");
            in_flight.push_back(queued.pop_front().expect("front"));
        }
        let mut progress = false;
        let mut fenced_now = Vec::new();
        if let Some(a) = agreements.as_mut() {
            progress |= a.step(Instant::now(), &events, &mut fenced_now);
        }
        for (r, node) in nodes.iter_mut().enumerate() {
            progress |= node.step(&params, &ctl, Instant::now());
            // A member that stopped on its own was fenced: its transport got a FENCE from a
            // peer that suspected it.
            if !node.alive() && !failed[r] {
                fenced_now.push((r as u32, node.fenced_by()));
            }
        }
        for (r, by) in fenced_now {
            fail(
                r,
                by,
                &mut nodes,
                &mut agreements,
                &mut failed,
                (&ctl, &fenced),
                &events,
            );
            progress = true;
        }
        let (before, timeouts) = (coord.retired(), coord.result().timeouts);
        coord.tick(&ctl, params.epoch);
        if coord.retired() > before {
            let (seq, root) = in_flight.pop_front().expect("a retired operation was in flight");
            let _ = events.send(Event::Completed {
                root,
                seq,
                timed_out: coord.result().timeouts > timeouts,
            });
            progress = true;
        }
        if progress {
            idle = 0;
            continue;
        }
        idle = idle.saturating_add(1);
        if idle < 64 {
            std::thread::yield_now();
        } else if in_flight.is_empty() && queued.is_empty() {
            std::thread::sleep(Duration::from_micros(200));
        } else {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}

/// Member `r` stopped (`by`: the member that fenced it; `None`: killed): it stops in both
/// layers, the other members' agreements learn it, and the caller hears it once.
fn fail<P>(
    r: u32,
    by: Option<u32>,
    nodes: &mut [Node<P>],
    agreements: &mut Option<Agreements>,
    failed: &mut [bool],
    (ctl, fenced): (&Control, &FencedBy),
    events: &mpsc::Sender<Event>,
) where
    P: Protocol,
    P::Shared: SharedInfo,
    P::Msg: WireMessage,
{
    if failed[r as usize] {
        return;
    }
    failed[r as usize] = true;
    if let Some(by) = by {
        fenced.set(r, by);
    }
    nodes[r as usize].crash(&ctl.boards[r as usize]);
    if let Some(a) = agreements.as_mut() {
        a.kill(r);
    }
    let _ = events.send(Event::Failed { rank: r });
}
