//! A member's thread ([`Run`]): it takes its caller's requests, steps its ERA member and its
//! broadcast node, reports failures once, enforces each in both endpoints, sleeps when idle
//! (on both sockets and the caller's doorbell) and, when the member leaves, lingers until
//! what it sent is acknowledged ([`Run::leave`]).

use std::os::fd::AsFd;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use super::bcast::{self, Bcasts, Broadcasts, MemberCounters};
use super::{BcastSetup, Flags, LEFT_FLUSHED, Request};
use crate::group::agree::{Agreements, Stops};
use crate::group::{Event, NOT_FENCED};
use crate::protocol::{Protocol, SharedInfo};
use crate::runtime::control::ChildAgent;
use crate::wire::WireMessage;
use crate::wire::dispatch::{Dispatch, Visit};

/// A member's thread: its ERA instance, stepped until the member leaves.
pub(super) struct Run {
    /// The caller's doorbell (rung by [`Member::request`]).
    pub(super) rung: UnixDatagram,
    /// How long a leaving member waits for what it sent to be acknowledged.
    pub(super) linger: Duration,
    /// How long an idle member sleeps between passes at most (its idle heartbeat period: a
    /// beat is at most one period late; a datagram on either socket or a call wakes it).
    pub(super) idle_wait: Duration,
    pub(super) rank: u32,
    pub(super) n: u32,
    pub(super) agreements: Agreements,
    pub(super) requests: mpsc::Receiver<Request>,
    pub(super) events: mpsc::Sender<Event>,
    pub(super) flags: Arc<Flags>,
    /// Kept open: a control datagram to a closed socket would draw an ICMP error that spends
    /// this host's ICMP rate limit toward rank 0 (`src/transport/udp/icmp.rs`).
    pub(super) _agent: ChildAgent,
}

/// A leaving member's pause between passes with nothing to do (acknowledgements it waits
/// for come within an RTO, 200 µs and more).
const LEAVE_POLL: Duration = Duration::from_micros(50);

/// What one process knows has failed ([`Stops`] for its single member): each rank stops once.
struct Failed(Vec<std::cell::Cell<bool>>);

impl Stops for Failed {
    fn is_stopped(&self, r: u32) -> bool {
        self.0[r as usize].get()
    }

    fn claim(&self, r: u32, by: Option<u32>) -> bool {
        if by.is_some_and(|b| self.is_stopped(b)) {
            return false;
        }
        !self.0[r as usize].replace(true)
    }
}

/// How long a member sleeps at most with broadcasts in flight (their protocols' timers), or
/// when its agreements' endpoint has no descriptor to wait on.
const IDLE_POLL: Duration = Duration::from_micros(100);

/// Idle passes a member with broadcasts in flight yields before it blocks on its socket.
const SPIN_PASSES: u32 = 256;

/// The member's thread with its broadcast node of the algorithm's protocol type.
struct WithBcasts(Run, BcastSetup);

impl Visit for WithBcasts {
    type Out = ();
    fn visit<P>(self, shared: &P::Shared)
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        let WithBcasts(run, b) = self;
        let setup = bcast::Setup {
            rank: run.rank,
            n: run.n,
            transport: b.transport,
            job: b.job,
            seed: b.seed,
            tick_ns: b.tick_ns,
            epoch: b.epoch,
            op_timeout: b.op_timeout,
            max: b.max,
        };
        let mut node = Bcasts::<P>::new(shared, setup, run.events.clone());
        let _agent = b._agent;
        run.run(Some(&mut node));
    }
}

impl Run {
    /// Runs the member: with its broadcast node, if it has one.
    pub(super) fn start(self, bcasts: Option<BcastSetup>) {
        match bcasts {
            None => self.run(None),
            Some(b) => {
                let (n, model, algo) = (self.n, b.model, b.algo.clone());
                // The same build `join` made (same algorithm, members and model): it cannot fail.
                let _ = algo.dispatch(n, model, WithBcasts(self, b));
            }
        }
    }

    fn run(mut self, mut bcasts: Option<&mut dyn Broadcasts>) {
        let failed = Failed((0..self.n).map(|_| std::cell::Cell::new(false)).collect());
        let mut reported = vec![false; self.n as usize];
        let mut stops = Vec::new();
        let (tx, rx) = mpsc::channel();
        let mut idle = 0u32;
        // Failures this member's endpoints were told of (beyond their own suspicions).
        let mut told = vec![false; self.n as usize];
        while !self.flags.stop.load(Ordering::Acquire) {
            while let Ok(r) = self.requests.try_recv() {
                self.take(r, &mut bcasts, &tx);
            }
            let now = Instant::now();
            let mut progress = self.agreements.step(now, &tx, &failed, &mut stops);
            if let Some(b) = bcasts.as_deref_mut() {
                progress |= b.step(now);
                if let Some(by) = b.stopped() {
                    // Fenced by a peer's broadcast transport (fail-stop): this member stops.
                    stops.push((self.rank, Some(by.unwrap_or(self.rank))));
                }
            }
            for (r, by) in stops.drain(..) {
                if r == self.rank {
                    self.flags.fenced_by.store(by.unwrap_or(self.rank), Ordering::Release);
                    failed.claim(r, None);
                } else if let Some(b) = bcasts.as_deref_mut()
                    && !std::mem::replace(&mut told[r as usize], true)
                {
                    // Suspected by the agreements' transport or detector: the broadcasts'
                    // transport stops retrying to it, and their protocol routes around it.
                    b.suspect(r, now);
                }
                report(&mut reported, r, &self.events);
            }
            for ev in rx.try_iter() {
                if let Event::Agreed { failed: f, .. } = &ev {
                    if f.contains(&self.rank) {
                        // The group agreed this member failed (a peer suspected it, and the
                        // decision came before the peer's FENCE): it stops as if fenced, and
                        // the decision is not its to return.
                        self.flags
                            .fenced_by
                            .compare_exchange(NOT_FENCED, self.rank, Ordering::AcqRel, Ordering::Acquire)
                            .ok();
                        failed.claim(self.rank, None);
                        report(&mut reported, self.rank, &self.events);
                        break;
                    }
                    // ERA agreed these failed: every member that returns reports them, and
                    // its endpoints enforce them (fail-stop), as they do their own suspicions.
                    for &r in f {
                        failed.claim(r, None);
                        report(&mut reported, r, &self.events);
                        if !std::mem::replace(&mut told[r as usize], true) {
                            self.agreements.suspect(self.rank, r, now);
                            if let Some(b) = bcasts.as_deref_mut() {
                                b.suspect(r, now);
                            }
                        }
                    }
                }
                let _ = self.events.send(ev);
            }
            if failed.is_stopped(self.rank) {
                // Fenced: its endpoints close as the thread ends; nothing more to do.
                break;
            }
            if progress {
                idle = 0;
                continue;
            }
            idle = idle.saturating_add(1);
            let busy = bcasts.as_deref().is_some_and(|b| b.busy());
            if self.agreements.active() || (busy && idle < SPIN_PASSES) {
                std::thread::yield_now();
            } else {
                // Woken by a datagram on either socket or the caller's doorbell; otherwise
                // at the detector's next check or the agreements' transport's next timer.
                let (afd, due) = match self.agreements.readiness() {
                    Some((fd, due)) => (Some(fd), due),
                    // No descriptor to wait on: come back soon.
                    None => (None, Some(now + IDLE_POLL)),
                };
                // Broadcasts in flight have protocol timers no descriptor signals: they are
                // served at least every `IDLE_POLL`, as before the idle period existed.
                let cap = if busy { IDLE_POLL } else { self.idle_wait };
                let wait = due.map_or(cap, |d| d.saturating_duration_since(now).min(cap));
                let rung = self.rung.as_fd();
                let (both, one);
                let fds: &[_] = match afd {
                    Some(a) => {
                        both = [a, rung];
                        &both
                    }
                    None => {
                        one = [rung];
                        &one
                    }
                };
                match bcasts.as_deref_mut() {
                    Some(b) => b.wait(wait, fds),
                    None if !wait.is_zero() => {
                        let _ = crate::transport::ppoll::any_readable(fds[0], &fds[1..], wait);
                    }
                    None => {}
                }
                let mut buf = [0u8; 16];
                while self.rung.recv(&mut buf).is_ok() {}
            }
        }
        if !failed.is_stopped(self.rank) && self.leave(bcasts, &failed, &tx) {
            self.flags.left.store(LEFT_FLUSHED, Ordering::Release);
        }
    }

    /// The member leaves: for at most `linger` it goes on receiving, sending and heartbeating
    /// (taking no more requests) until everything its protocols sent has been acknowledged.
    /// An agreement's root that returns and exits at once would otherwise take its decision
    /// with it, whenever a DOWN to a child was still queued or lost on the way:
    /// the child, seeing its parent gone, would decide again without it (ERA's agreement is
    /// non-uniform, §1 footnote 1: "only in the odd case when all processes that returned v
    /// failed, may the surviving processes return v′ ≠ v"), and a process that merely
    /// finished is not one that failed.
    /// Whether everything was acknowledged (not: `linger` passed, or it was fenced meanwhile).
    fn leave(&mut self, mut bcasts: Option<&mut dyn Broadcasts>, failed: &Failed, tx: &mpsc::Sender<Event>) -> bool {
        // A linger past what an `Instant` holds has no end (`Duration::MAX`: until flushed).
        let end = Instant::now().checked_add(self.linger);
        self.agreements.leave();
        let mut stops = Vec::new();
        loop {
            let now = Instant::now();
            let mut progress = self.agreements.step(now, tx, failed, &mut stops);
            if let Some(b) = bcasts.as_deref_mut() {
                progress |= b.step(now);
                if let Some(by) = b.stopped() {
                    self.fenced(by.unwrap_or(self.rank));
                    return false;
                }
            }
            for (r, by) in stops.drain(..) {
                if r == self.rank {
                    // Fenced meanwhile: nothing of its own is owed any more.
                    self.fenced(by.unwrap_or(self.rank));
                    return false;
                }
                if let Some(b) = bcasts.as_deref_mut() {
                    b.suspect(r, now);
                }
            }
            let flushed = self.agreements.flushed() && bcasts.as_deref().is_none_or(|b| b.flushed());
            if flushed || end.is_some_and(|e| now >= e) {
                return flushed;
            }
            if !progress {
                std::thread::sleep(LEAVE_POLL);
            }
        }
    }

    /// Records that `by` fenced this member (the first to do so).
    fn fenced(&self, by: u32) {
        let _ = self
            .flags
            .fenced_by
            .compare_exchange(NOT_FENCED, by, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Hands one request on.
    fn take(&mut self, r: Request, bcasts: &mut Option<&mut dyn Broadcasts>, tx: &mpsc::Sender<Event>) {
        let _ = tx;
        match r {
            Request::Counters(reply) => {
                let mut c = MemberCounters {
                    agreements: self.agreements.transport_stats(self.rank),
                    ..MemberCounters::default()
                };
                if let Some(b) = bcasts.as_deref() {
                    b.count(&mut c);
                }
                let _ = reply.send(c);
            }
            Request::Agree(v) => self.agreements.agree(self.rank, v),
            Request::Broadcast { seq, root, bytes } => {
                if let Some(b) = bcasts.as_deref_mut() {
                    b.call(seq, root, bytes.or_else(|| (root != self.rank).then(Vec::new)));
                }
            }
            #[cfg(test)]
            Request::Stall(d) => std::thread::sleep(d),
            #[cfg(test)]
            Request::Inject(ev) => {
                let _ = tx.send(ev);
            }
        }
    }
}

/// Reports rank `r` failed once.
fn report(reported: &mut [bool], r: u32, events: &mpsc::Sender<Event>) {
    if !std::mem::replace(&mut reported[r as usize], true) {
        let _ = events.send(Event::Failed { rank: r });
    }
}
