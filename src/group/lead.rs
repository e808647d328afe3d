//! What a group's workers do besides stepping their members ([`GroupHook`], run by the
//! runtime's worker loop): every worker crashes the members it is asked to and reports the
//! ones that stopped, steps its members' agreements ([`super::agree`], member `r` on worker
//! `r % k`, as the broadcast nodes) and its share of an agreement stream's nodes while one
//! runs ([`super::agree_stream`]); worker 0 also leads ([`Lead`]): it takes the caller's
//! requests, hands each agreement value to its member's worker, starts and retires
//! broadcasts through the coordinator, and runs streams.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use super::Event;
use super::agree::{Agreements, Stops};
use super::driver::{Pending, Request};
use super::shared::{AgreeShare, Shared};
use super::stream::{Offer, Reply, StreamReq, Streaming};
use crate::protocol::Protocol;
use crate::runtime::board::{Control, WINDOW};
use crate::runtime::cluster::{ClusterConfig, ClusterResult, Coordinator, IdlePasses, WorkerHook};
use crate::runtime::node::Node;
use crate::runtime::thread_switches::SwitchCounter;
use crate::wire::WireMessage;

/// One worker's hook: its members' crashes and failure reports, its share of an agreement
/// stream; worker 0's also leads.
pub(super) struct GroupHook {
    /// This worker's index in the pool.
    index: usize,
    shared: Arc<Shared>,
    events: mpsc::Sender<Event>,
    seen_asks: u64,
    seen_collect: u64,
    /// This worker's members reported failed, by position.
    reported: Vec<bool>,
    pub(super) lead: Option<Lead>,
    seen_agree: u64,
    /// The agreement stream's share this worker steps, while one runs.
    agree: Option<AgreeShare>,
    /// Passes of the agreement stream so far.
    agree_passes: u32,
    /// Whether the last pass was the stream's alone, and whether its nodes made progress
    /// there (`None`: not a stream pass, or one that did the group's work too): the worker
    /// loop's timing of that pass goes to the share ([`GroupHook::busy_pass`]).
    stream_pass: Option<bool>,
    /// This worker's passes without progress since the last collection.
    idle: IdlePasses,
    /// This worker's members' agreements (`None`: the group has none).
    agreements: Option<Agreements>,
    /// Taken from the inbox, not yet handed over (kept for its capacity).
    inbox: Vec<(u32, u64)>,
    /// Members this worker's agreements asked to stop in the last pass (kept for its capacity).
    stops: Vec<(u32, Option<u32>)>,
    /// When this worker's last pass with progress began (outside streams).
    last_progress: Instant,
    /// This worker thread's preemptions (opened on it, [`WorkerHook::started`]) and their
    /// count at the last collection.
    preemptions: Option<(SwitchCounter, u64)>,
    /// Tests: this worker's agreement members are recorded.
    #[cfg(test)]
    placed_agree: bool,
}

/// A worker thread's preemptions since the last call (or since it started), setting a new
/// mark (`None`: not counted).
fn preempted_since(p: &mut Option<(SwitchCounter, u64)>) -> Option<u64> {
    let (c, at) = p.as_mut()?;
    let now = c.read()?;
    Some(now.saturating_sub(std::mem::replace(at, now)))
}

/// While an agreement stream runs, its worker does the group's own work (the lead, crashes,
/// failure reports) once per this many passes: an agreement's hop waits for none of it.
const GROUP_WORK_EVERY: u32 = 16;

/// A worker whose members have an agreement in flight yields instead of sleeping for this
/// long after its last progress (then it sleeps as an idle worker does).
const AGREE_YIELD_FOR: Duration = Duration::from_millis(1);

impl GroupHook {
    pub(super) fn new(
        index: usize,
        shared: Arc<Shared>,
        events: mpsc::Sender<Event>,
        lead: Option<Lead>,
        agreements: Option<Agreements>,
    ) -> Self {
        GroupHook {
            index,
            shared,
            events,
            seen_asks: 0,
            seen_collect: 0,
            reported: Vec::new(),
            lead,
            seen_agree: 0,
            agree: None,
            agree_passes: 0,
            stream_pass: None,
            idle: IdlePasses::default(),
            agreements,
            inbox: Vec::new(),
            stops: Vec::new(),
            last_progress: Instant::now(),
            preemptions: None,
            #[cfg(test)]
            placed_agree: false,
        }
    }

    /// One pass of this worker's agreement members: what its inbox says first, then their
    /// receives, suspicions, sends and returns; the members their transports or detectors
    /// suspected are stopped. Whether anything happened.
    fn agree_step(&mut self, ctl: &Control) -> bool {
        let Some(a) = self.agreements.as_mut() else {
            return false;
        };
        let sh = &*self.shared;
        sh.take(self.index, &mut self.inbox);
        for (r, v) in self.inbox.drain(..) {
            a.agree(r, v);
        }
        #[cfg(test)]
        if !std::mem::replace(&mut self.placed_agree, true) {
            sh.placed_agree
                .lock()
                .expect("not poisoned")
                .push((self.index, a.ranks()));
        }
        let mut progress = a.step(Instant::now(), &self.events, sh, &mut self.stops);
        for (r, by) in self.stops.drain(..) {
            // A member that crashed first (killed) and was suspected after is dead, not
            // fenced: only a suspicion of a live member is a fence.
            let crashed = ctl
                .boards
                .get(r as usize)
                .is_some_and(|b| b.dead.load(Ordering::Acquire));
            if let Some(by) = by
                && !crashed
            {
                sh.fenced.set(r, by);
            }
            if sh.bcasts {
                sh.ask_crash(r);
            } else {
                fail_now(r, sh, ctl, &self.events);
            }
            progress = true;
        }
        progress
    }

    /// Steps this worker's share of the agreement stream, if one runs; hands its nodes back
    /// once the stream is over. `None`: no stream, or the group's own work is due. A pass of
    /// a stream counts as progress whatever it did: its worker never waits (not even a spin
    /// hint's pause), as `ftcoll agree`'s loop never did, and the share keeps its own count
    /// of idle passes for the stream's timeout, and the times of its passes with and without
    /// progress (`stream_pass`).
    #[inline]
    fn agree_pass(&mut self) -> Option<bool> {
        self.stream_pass = None;
        let share = self.agree.as_mut()?;
        match share.worker.pass() {
            Some(progress) => {
                self.agree_passes = self.agree_passes.wrapping_add(1);
                let alone = !self.agree_passes.is_multiple_of(GROUP_WORK_EVERY);
                if alone {
                    self.stream_pass = Some(progress);
                }
                alone.then_some(true)
            }
            None => {
                let share = self.agree.take().expect("a share");
                let preempted = preempted_since(&mut self.preemptions);
                let _ = share.back.send(share.worker.into_nodes(preempted));
                None
            }
        }
    }

    /// Takes this worker's share of an agreement stream just asked for, and starts it (with
    /// the other workers' shares).
    #[cold]
    fn take_agree_share(&mut self) {
        let share = self
            .shared
            .agree_shares
            .lock()
            .expect("not poisoned")
            .get_mut(self.index)
            .and_then(Option::take);
        if let Some(mut share) = share {
            #[cfg(test)]
            self.shared
                .placed
                .lock()
                .expect("not poisoned")
                .push((self.index, share.worker.ranks()));
            share.worker.start();
            let _ = preempted_since(&mut self.preemptions);
            self.agree_passes = 0;
            self.agree = Some(share);
        }
    }

    /// Crashes the members asked for, reports those that stopped (killed, injected or
    /// fenced) once each, and hands a finished stream this worker's counters.
    fn care<P: Protocol>(&mut self, nodes: &mut [Node<P>], ctl: &Control) -> bool
    where
        P::Msg: WireMessage,
    {
        let asks = self.shared.agree_asks.load(Ordering::Acquire);
        if asks != self.seen_agree {
            self.seen_agree = asks;
            self.take_agree_share();
        }
        let sh = &*self.shared;
        let asks = sh.crash_asks.load(Ordering::Acquire);
        if asks != self.seen_asks {
            self.seen_asks = asks;
            for node in nodes.iter_mut() {
                if sh.crash[node.rank as usize].swap(false, Ordering::AcqRel) {
                    node.crash(&ctl.boards[node.rank as usize]);
                }
            }
        }
        if self.reported.len() != nodes.len() {
            self.reported = vec![false; nodes.len()];
        }
        let mut progress = false;
        for (node, reported) in nodes.iter().zip(self.reported.iter_mut()) {
            if *reported || node.alive() {
                continue;
            }
            *reported = true;
            progress = true;
            // Its agreement member closes at its worker's next pass.
            sh.stop(node.rank);
            if let Some(by) = node.fenced_by() {
                sh.fenced.set(node.rank, by);
            }
            let _ = self.events.send(Event::Failed { rank: node.rank });
        }
        let collect = sh.collect.load(Ordering::Acquire);
        if collect != self.seen_collect {
            self.seen_collect = collect;
            let mut part = ClusterResult::empty();
            for node in nodes.iter() {
                part.add_node(node);
            }
            let preempted = preempted_since(&mut self.preemptions);
            part.idle_passes.push(IdlePasses {
                nodes: nodes.len() as u32,
                preempted,
                ..std::mem::take(&mut self.idle)
            });
            if let Some(tx) = sh.reply.lock().expect("not poisoned").as_ref() {
                let _ = tx.send(Reply::Part(part));
            }
        }
        progress
    }
}

impl<P: Protocol> WorkerHook<P> for GroupHook
where
    P::Msg: WireMessage,
{
    #[inline]
    fn after_pass(&mut self, nodes: &mut [Node<P>], ctl: &Control, epoch: Instant) -> bool {
        if let Some(progress) = self.agree_pass() {
            return progress;
        }
        let mut progress = self.agree.is_some();
        if let Some(lead) = self.lead.as_mut() {
            progress |= lead.pass(&self.shared, &self.events, ctl, epoch);
        }
        progress |= self.agree_step(ctl);
        progress |= self.care(nodes, ctl);
        if progress && self.agreements.is_some() {
            self.last_progress = Instant::now();
        }
        progress
    }

    fn started(&mut self) {
        let mut c = SwitchCounter::of_this_thread();
        self.preemptions = c.read().map(|now| (c, now));
    }

    fn block(&mut self, nodes: &mut [Node<P>], idle: u32) {
        if self.agree.is_some() {
            // An agreement stream's worker polls on: its nodes answer at once, as
            // `ftcoll agree`'s do.
            std::hint::spin_loop();
        } else if self.shared.streaming.load(Ordering::Relaxed) {
            // As a benchmark's workers wait.
            if nodes.len() == 1 && self.lead.is_none() {
                nodes[0].wait(Duration::from_micros(200))
            } else {
                std::thread::sleep(Duration::from_micros(20))
            }
        } else if idle < 64
            || (self.agreements.as_ref().is_some_and(Agreements::active)
                && self.last_progress.elapsed() < AGREE_YIELD_FOR)
        {
            // An agreement in flight waits for members on other workers: it yields rather
            // than sleeps, for a while (a member may wait for the caller's other members to
            // enter, which takes as long as the caller likes).
            std::thread::yield_now();
        } else if self.lead.as_ref().is_some_and(|l| !l.busy()) {
            // Nothing asked for: the lead looks for requests every 200 µs.
            std::thread::sleep(Duration::from_micros(200));
        } else {
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    fn coordinates(&self) -> bool {
        self.lead.is_some() || self.agree.is_some() || self.agreements.is_some()
    }

    #[inline]
    fn idle_pass(&mut self, ns: u64) {
        self.idle.add(ns);
    }

    /// A stream pass is always progress to the worker loop (its worker never waits); its
    /// time goes to the share as what it was for the share's nodes (an idle stream pass is
    /// the processor-sharing model's visit of idle nodes, `AgreeBenchReport::idle_visit_ns`).
    #[inline]
    fn busy_pass(&mut self, ns: u64) {
        match (self.stream_pass.take(), self.agree.as_mut()) {
            (Some(progress), Some(share)) => share.worker.passed(ns, progress),
            _ => self.idle.add_busy(ns),
        }
    }
}

/// Worker 0's part: the bridge to the caller and the coordinator.
pub(super) struct Lead {
    /// The coordinator's settings between streams.
    cfg: ClusterConfig,
    requests: mpsc::Receiver<Request>,
    pending: Pending,
    /// Every member's slot for a stream's payloads.
    offers: Vec<Offer>,
    coord: Coordinator,
    /// Asked for, not yet handed to the coordinator (a slot is reused only once its previous
    /// operation is retired); then in flight.
    queued: VecDeque<(u64, u32)>,
    in_flight: VecDeque<(u64, u32)>,
    /// A crash asked for that later requests wait for (they come after it).
    waiting_kill: Option<u32>,
    /// A stream asked for, waiting for the broadcasts before it to be over.
    next_stream: Option<StreamReq>,
    stream: Option<Streaming>,
    /// The agreement values of the batch of requests being read (kept for its capacity).
    values: Vec<(u32, u64)>,
    /// The group's planned crashes: a stream's results are also split where one starts.
    kills: Vec<crate::runtime::kill::Kill>,
}

impl Lead {
    pub(super) fn new(
        cfg: ClusterConfig,
        requests: mpsc::Receiver<Request>,
        pending: Pending,
        offers: Vec<Offer>,
        kills: Vec<crate::runtime::kill::Kill>,
    ) -> Self {
        let coord = Coordinator::new(&cfg);
        Lead {
            cfg,
            requests,
            pending,
            offers,
            coord,
            queued: VecDeque::new(),
            in_flight: VecDeque::new(),
            waiting_kill: None,
            next_stream: None,
            stream: None,
            values: Vec::new(),
            kills,
        }
    }

    /// Broadcasts asked for and not over, or a stream waiting or running.
    fn busy(&self) -> bool {
        !self.queued.is_empty() || !self.in_flight.is_empty() || self.next_stream.is_some() || self.stream.is_some()
    }

    /// One pass; whether anything happened.
    fn pass(&mut self, sh: &Shared, events: &mpsc::Sender<Event>, ctl: &Control, epoch: Instant) -> bool {
        let mut progress = false;
        if self.stream.is_some() {
            self.stream_pass(sh, ctl, epoch);
            // As a benchmark's coordinator: its ticks are not the nodes' progress.
            return progress;
        }
        if !self.take_requests(sh, ctl, events) {
            ctl.stop.store(true, Ordering::Release);
            return progress;
        }
        if self.queued.is_empty()
            && self.in_flight.is_empty()
            && let Some(req) = self.next_stream.take()
        {
            self.start_stream(req, sh);
            return true;
        }
        while let Some(&(seq, root)) = self.queued.front() {
            if seq >= self.coord.retired() + WINDOW as u64 / 2 {
                break;
            }
            if ctl.root_of(seq) != root {
                ctl.set_root(seq, root);
            }
            let pushed = self.coord.push_op();
            debug_assert_eq!(pushed, seq, "one sequence, in the order asked");
            self.in_flight.push_back(self.queued.pop_front().expect("front"));
        }
        let (before, timeouts) = (self.coord.retired(), self.coord.result().timeouts);
        self.coord.tick(ctl, epoch);
        if self.coord.retired() > before {
            let (seq, root) = self.in_flight.pop_front().expect("a retired operation was in flight");
            let _ = events.send(Event::Completed {
                root,
                seq,
                timed_out: self.coord.result().timeouts > timeouts,
            });
            progress = true;
        }
        progress
    }

    /// Takes the caller's requests, in order (after a crash, only once it is done; none
    /// after a stream); false once the caller dropped the group.
    fn take_requests(&mut self, sh: &Shared, ctl: &Control, events: &mpsc::Sender<Event>) -> bool {
        let mut values = std::mem::take(&mut self.values);
        let open = self.read_requests(sh, ctl, events, &mut values);
        // The values go to their members' workers once the whole batch is read: a member
        // killed in the same batch enters none of them, as when one thread stepped every
        // member after reading the requests.
        for (member, value) in values.drain(..) {
            if !sh.is_stopped(member) {
                sh.tell(member, value);
            }
        }
        self.values = values;
        open
    }

    /// The requests waiting, in order, the agreement values into `values`; false once the
    /// caller dropped the group.
    fn read_requests(
        &mut self,
        sh: &Shared,
        ctl: &Control,
        events: &mpsc::Sender<Event>,
        values: &mut Vec<(u32, u64)>,
    ) -> bool {
        loop {
            if let Some(r) = self.waiting_kill {
                if !ctl.boards[r as usize].dead.load(Ordering::Acquire) {
                    return true;
                }
                self.waiting_kill = None;
            }
            if self.next_stream.is_some() {
                return true;
            }
            match self.requests.try_recv() {
                Ok(Request::Broadcast { seq, root, bytes }) => {
                    self.pending.lock().expect("not poisoned").insert(seq, bytes);
                    self.queued.push_back((seq, root));
                }
                Ok(Request::Agree { member, value }) => values.push((member, value)),
                Ok(Request::Kill(r)) if !sh.bcasts => fail_now(r, sh, ctl, events),
                Ok(Request::Kill(r)) => {
                    if !ctl.boards[r as usize].dead.load(Ordering::Acquire) {
                        // Its agreements stop now; its broadcast node on its worker's next pass.
                        sh.stop(r);
                        sh.ask_crash(r);
                        self.waiting_kill = Some(r);
                    }
                }
                Ok(Request::Stream(req)) => self.next_stream = Some(req),
                Err(mpsc::TryRecvError::Empty) => return true,
                Err(mpsc::TryRecvError::Disconnected) => return false,
            }
        }
    }

    /// Starts a stream after every broadcast asked before it: its operations follow theirs.
    fn start_stream(&mut self, mut req: StreamReq, sh: &Shared) {
        let first = self.coord.end();
        debug_assert_eq!(first, req.first, "the stream follows the broadcasts asked before it");
        let ops = first..first + req.warmup + req.ops;
        for (offer, payloads) in self.offers.iter().zip(req.payloads.drain(..)) {
            *offer.lock().expect("not poisoned") = Some((ops.clone(), payloads));
        }
        let cfg = ClusterConfig {
            warmup: req.warmup,
            iterations: req.ops,
            window: req.window,
            give_up_after: req.give_up_after,
            ..self.cfg.clone()
        };
        sh.streaming.store(true, Ordering::Relaxed);
        self.stream = Some(Streaming::new(
            req,
            Coordinator::starting_at(&cfg, first).split_at(&self.kills),
        ));
    }

    /// Names the roots of the stream's next operations, then lets the coordinator start and
    /// retire them; once all are over, hands the result to the caller and asks every worker
    /// for its counters.
    fn stream_pass(&mut self, sh: &Shared, ctl: &Control, epoch: Instant) {
        let s = self.stream.as_mut().expect("a stream runs");
        s.name_roots(ctl);
        if s.coord.tick(ctl, epoch) {
            return;
        }
        let s = self.stream.take().expect("a stream runs");
        let end = s.coord.end();
        *sh.reply.lock().expect("not poisoned") = Some(s.reply.clone());
        sh.collect.fetch_add(1, Ordering::AcqRel);
        sh.streaming.store(false, Ordering::Relaxed);
        s.finish();
        self.coord = Coordinator::starting_at(&self.cfg, end);
    }
}

/// A group without broadcast nodes: member `r` stops now (its board dead, its agreements told
/// at its worker's next pass) and is reported failed, once.
fn fail_now(r: u32, sh: &Shared, ctl: &Control, events: &mpsc::Sender<Event>) {
    sh.stop(r);
    if ctl.boards[r as usize].dead.swap(true, Ordering::AcqRel) {
        return;
    }
    let _ = events.send(Event::Failed { rank: r });
}
