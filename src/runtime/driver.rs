//! The generic node loop: one process's [`Transport`] endpoint, the byte format of one
//! protocol family ([`Framing`]) and the shared heartbeat [`Detector`], driving any sans-IO
//! [`Machine`] of that family. The broadcast node ([`crate::runtime::node`]), the agreement
//! benchmark's nodes ([`crate::runtime::agree`]) and a booted node's watch
//! ([`crate::runtime::watch`]) are this loop with their own bookkeeping around it. A machine
//! meets the driver as an [`Endpoint`]: a plain one through [`Plain`] (the family's framing
//! as it is); the broadcast's admits whole datagrams, writes its operations' payloads and
//! hears what became of each send.
//!
//! One pass of a node is, in order:
//! 1. [`Driver::receive`] (or one poll: [`Driver::receive_once`]): poll the transport
//!    (bounded), check each datagram's header (job, sender) and decode its body straight out
//!    of the transport's buffer; a message goes to the machine ([`Event::Message`]), a
//!    heartbeat to the detector; every delivery is a sign of life (and, at each check, any
//!    datagram the transport heard and could not deliver yet); what fails is dropped and
//!    counted;
//! 2. [`Driver::detect`] (every `heartbeat / 4`): the detector checks the peers the machine
//!    wants watched, and heartbeats go to those owed one;
//! 3. the caller takes [`Driver::poll_suspect`] (transport and detector verdicts, with how
//!    each was reached), does its own bookkeeping and hands each to the machine
//!    ([`Event::Suspect`]); and checks [`Driver::fenced_by`]: a peer that suspected this
//!    node fenced it (fail-stop enforcement), the transport has stopped, and the caller
//!    must stop the node as a crash;
//! 4. [`Driver::transmit`] ([`Driver::transmit_to`]): what the machine queued is encoded and
//!    sent, then the peers it doubts are probed ([`Driver::probe`]). A peer whose window is
//!    full ([`SendError::WindowFull`]) gets its messages queued, in order, and only it waits
//!    (a slow peer must not hold up heartbeats to the others, who would then suspect this
//!    node): the [`Outbox`].
//!
//! [`Event::Message`]: crate::protocol::Event::Message
//! [`Event::Suspect`]: crate::protocol::Event::Suspect
//! [`SendError::WindowFull`]: crate::transport::SendError::WindowFull

mod endpoint;
mod outbox;

pub use endpoint::{Endpoint, Got, Plain};
pub use outbox::{Outbox, Sent};

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use crate::protocol::{Detector, DetectorConfig, Machine, Rank, Time};
use crate::transport::{Beat, Delivery, Transport};
use crate::wire::{DecodeError, DropCounters, Header};

/// What a datagram of a family carries.
pub enum Decoded<M> {
    /// A protocol message.
    Msg(M),
    /// A heartbeat (the sender watches this node).
    Heartbeat,
    /// A valid datagram with nothing for the machine.
    Other,
}

/// The byte format of one protocol family's datagrams (the codecs themselves are in
/// [`crate::wire`]).
pub trait Framing {
    /// The family's messages.
    type Msg;
    /// The largest datagram, header included.
    const MAX_DATAGRAM: usize;
    /// Does the family watch its peers with heartbeats? One that does not (the broadcast:
    /// its suspicions come from the transport) keeps no detector time per datagram.
    const HEARTBEATS: bool = true;
    /// Decodes the body of a datagram of `kind` whose header checked out.
    fn decode(kind: u8, body: &[u8], n: u32) -> Result<Decoded<Self::Msg>, DecodeError>;
    /// Decodes a datagram whose header `h` checked out, from its body (default: by its kind
    /// alone, [`Framing::decode`]; a family whose messages name something in the header, the
    /// broadcast's operation, reads it here).
    #[inline]
    fn decode_datagram(h: &Header, body: &[u8], n: u32) -> Result<Decoded<Self::Msg>, DecodeError> {
        Self::decode(h.kind, body, n)
    }
    /// Encodes `msg` from `rank` as a whole datagram into `buf`; its length.
    fn encode(msg: &Self::Msg, job: u64, rank: Rank, buf: &mut [u8]) -> Option<usize>;
    /// Encodes a heartbeat from `rank` into `buf`; its length.
    fn heartbeat(job: u64, rank: Rank, buf: &mut [u8]) -> Option<usize>;
}

/// How a suspicion was reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The transport gave up on the peer (retries exhausted, port unreachable, endpoint
    /// gone).
    Transport,
    /// The peer was silent for `suspect_after` (the heartbeat detector).
    Silence,
    /// The caller learned it elsewhere (an agreement's decided failed set): [`Driver::suspect`].
    Told,
}

/// One node's endpoint, detector and send queue for a family `F`.
pub struct Driver<F> {
    rank: Rank,
    n: u32,
    job: u64,
    /// The run's time base: the detector and the machine count nanoseconds since it.
    base: Instant,
    pub tp: Box<dyn Transport>,
    det: Detector,
    /// `suspect_after / 4` and `heartbeat / 4` of the detector's configuration.
    grace: Duration,
    check_every: Duration,
    /// The last instant converted to the detector's time, and what it gave (a pass
    /// converts its one clock reading once).
    last_now: Instant,
    last_t: Time,
    /// The peers watched at the last check.
    nb: Vec<Rank>,
    nb_at: Instant,
    last_step: Instant,
    /// Messages refused with `WindowFull`, in order; only their peers wait.
    outbox: Outbox,
    buf: Vec<u8>,
    /// Suspicions not yet taken.
    suspects: VecDeque<(Rank, Verdict)>,
    /// What had been sent at the last mark, per peer ([`Driver::leave`]).
    marks: Vec<u64>,
    /// Leaving: every send of the machine's messages or of the backlog re-marks.
    marking: bool,
    /// The peer whose FENCE stopped this node's transport, if one did.
    fenced_by: Option<Rank>,
    /// Datagrams dropped as invalid, by reason.
    pub drops: DropCounters,
    /// Valid datagrams received.
    pub received: u64,
    /// Protocol messages handed to the transport (queued ones included).
    pub messages: u64,
    pub heartbeats: u64,
    /// Heartbeats sent as probes of doubted peers ([`Driver::probe`]; counted in
    /// `heartbeats` too).
    pub probes: u64,
    _family: PhantomData<fn() -> F>,
}

impl<F: Framing> Driver<F> {
    /// A driver for node `tp.rank()` of job `job`, times counted from `base`.
    pub fn new(tp: Box<dyn Transport>, job: u64, det: DetectorConfig, base: Instant) -> Self {
        let (rank, n) = (tp.rank(), tp.size());
        Self {
            rank,
            n,
            job,
            base,
            tp,
            det: Detector::new(n, det, 0),
            grace: Duration::from_nanos(det.suspect_after / 4),
            check_every: Duration::from_nanos(det.heartbeat / 4),
            last_now: base,
            last_t: 0,
            nb: Vec::new(),
            nb_at: base,
            last_step: base,
            outbox: Outbox::new(n, usize::MAX),
            buf: Vec::new(),
            suspects: VecDeque::new(),
            marks: Vec::new(),
            marking: false,
            fenced_by: None,
            drops: DropCounters::default(),
            received: 0,
            messages: 0,
            heartbeats: 0,
            probes: 0,
            _family: PhantomData,
        }
    }

    /// At most `cap` datagrams wait in the send queue (then they are dropped, counted by
    /// the machine: [`Endpoint::sent`] hears [`Sent::Overflow`]).
    pub fn with_outbox_cap(mut self, cap: usize) -> Self {
        self.outbox = Outbox::new(self.n, cap);
        self
    }

    /// No forgiveness for a long pause between passes (see [`Driver::receive`]): for a node
    /// whose passes are paced by a timer of its own rather than run back to back.
    pub fn without_grace(mut self) -> Self {
        self.grace = Duration::MAX;
        self
    }

    /// Nanoseconds since the run's time base.
    #[inline]
    pub fn ns(&mut self, now: Instant) -> Time {
        if now != self.last_now {
            self.last_now = now;
            self.last_t = now.saturating_duration_since(self.base).as_nanos() as Time;
        }
        self.last_t
    }

    /// Heartbeats every `heartbeat` from now on ([`Detector::set_heartbeat`]), checked every
    /// quarter of it.
    pub fn set_heartbeat(&mut self, heartbeat: Duration) {
        self.det.set_heartbeat(heartbeat.as_nanos() as Time);
        self.check_every = heartbeat / 4;
    }

    /// The peers start independently of this node, within `within` of `now`: until then a
    /// watched peer not heard from yet is not suspected by the detector
    /// ([`Detector::expect_starts`]).
    pub fn expect_starts(&mut self, now: Instant, within: Duration) {
        let t = self.ns(now);
        self.det
            .expect_starts(t.saturating_add(Time::try_from(within.as_nanos()).unwrap_or(Time::MAX)));
    }

    /// Moves the driver's buffers into memory of the calling thread (nodes made by one
    /// thread and driven by others would share cache lines otherwise).
    pub fn settle(&mut self) {
        self.det = self.det.clone();
        self.outbox = self.outbox.clone();
        self.buf = Vec::with_capacity(F::MAX_DATAGRAM);
    }

    /// The node starts (or resumes) at `now`: everyone counts as heard from.
    pub fn start(&mut self, now: Instant) {
        let t = self.ns(now);
        self.det.reset(t);
        self.last_step = now;
    }

    /// Receives what the transport has (bounded) into `m`; whether anything came. A node
    /// that was not polling for `suspect_after / 4` (descheduled) does not count the silence
    /// of others during that time against them, once per silence ([`Detector::rest`];
    /// unless [`Driver::without_grace`]).
    #[inline]
    pub fn receive<M: Machine<Msg = F::Msg>>(&mut self, m: &mut M, now: Instant) -> bool {
        let mut progress = false;
        // Transports may hand out one delivery per poll: drain (bounded).
        for _ in 0..64 {
            if !self.receive_once(&mut Plain(&mut *m), now) {
                break;
            }
            progress = true;
        }
        progress
    }

    /// One poll of the transport (a transport may hand out one delivery per poll, so that
    /// a forward can leave before the next read): its deliveries go to `e`; whether any came.
    #[inline]
    pub fn receive_once<E: Endpoint<F>>(&mut self, e: &mut E, now: Instant) -> bool {
        if F::HEARTBEATS {
            if now.saturating_duration_since(self.last_step) >= self.grace {
                let t = self.ns(now);
                self.det.rest(t);
            }
            self.last_step = now;
        }
        let mut rx = Receiver::<F, E> {
            m: e,
            det: &mut self.det,
            drops: &mut self.drops,
            received: &mut self.received,
            suspects: &mut self.suspects,
            fenced_by: &mut self.fenced_by,
            job: self.job,
            n: self.n,
            clock: (now, self.base, None),
            _family: PhantomData,
        };
        let got = self.tp.poll(now, &mut |d| rx.deliver(d));
        matches!(got, Ok(k) if k > 0)
    }

    /// Every `heartbeat / 4`: checks the peers `watch` names (into the vector it is handed)
    /// and sends the heartbeats owed. Suspicions wait for [`Driver::poll_suspect`].
    #[inline]
    pub fn detect(&mut self, now: Instant, watch: impl FnOnce(&mut Vec<Rank>)) {
        if now.saturating_duration_since(self.nb_at) < self.check_every {
            return;
        }
        self.nb_at = now;
        let t = self.ns(now);
        watch(&mut self.nb);
        // What the transport heard and has not delivered yet (held behind a gap under loss)
        // is a sign of life too: a peer is silent only if nothing at all comes from it.
        for &p in &self.nb {
            if let Some(at) = self.tp.last_heard(p) {
                let at = at.saturating_duration_since(self.base).as_nanos() as Time;
                self.det.heard_below(p, at);
            }
        }
        // (A blocked peer has data waiting for it; a heartbeat would only queue.)
        let outbox = &self.outbox;
        self.det.check(t, &self.nb, |p| outbox.is_queued(p));
        while let Some(p) = self.det.poll_suspect() {
            // Enforced at once (fail-stop): a live suspect is fenced, not left to go on alone.
            self.tp.enforce_suspicion(p, now);
            self.suspects.push_back((p, Verdict::Silence));
        }
        while let Some(p) = self.det.poll_beat() {
            self.beat(p, now, t);
        }
    }

    /// A heartbeat to `p`: outside the reliable stream where the transport can (no window
    /// slot, nothing queued behind it); otherwise as a message. Whether one went (taken or
    /// queued behind `p`'s earlier messages), which alone counts in `heartbeats`: a
    /// transport that withholds it (its peer suspected, itself fenced) sent nothing, and the
    /// detector's schedule moves on as if it had (the suspicion comes through
    /// [`Driver::poll_suspect`]); a message the transport refused is tried at the next check.
    fn beat(&mut self, p: Rank, now: Instant, t: Time) -> bool {
        match self.tp.beat(p, now) {
            Beat::Sent => {
                self.heartbeats += 1;
                self.det.sent(p, t);
                return true;
            }
            Beat::Withheld => {
                self.det.sent(p, t);
                return false;
            }
            Beat::Unsupported => {}
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(F::MAX_DATAGRAM, 0);
        let went = F::heartbeat(self.job, self.rank, &mut buf)
            .is_some_and(|len| matches!(self.send_bytes(p, &buf[..len], now), Sent::Sent | Sent::Queued));
        self.heartbeats += u64::from(went);
        self.buf = buf;
        went
    }

    /// The machine doubts `peer` ([`Machine::poll_doubt`]): a heartbeat goes to it now if
    /// the detector says so ([`Detector::probe`]; counted in `probes`), and a dead peer's
    /// transport answers with a suspicion ([`Driver::poll_suspect`]) instead of the detector
    /// timing it out.
    pub fn probe(&mut self, peer: Rank, now: Instant) {
        if !F::HEARTBEATS || peer >= self.n || peer == self.rank {
            return;
        }
        let t = self.ns(now);
        if self.det.probe(peer, t) && self.beat(peer, now, t) {
            self.probes += 1;
        }
    }

    /// A failure the caller learned elsewhere (an agreement decided `peer` failed): the
    /// transport enforces it (traffic stopped, the FENCE sent: fail-stop), and it is handed
    /// out as [`Verdict::Told`] by [`Driver::poll_suspect`] with the others.
    pub fn suspect(&mut self, peer: Rank, now: Instant) {
        self.tp.enforce_suspicion(peer, now);
        self.suspects.push_back((peer, Verdict::Told));
    }

    /// Everything handed to the transport has been acknowledged and nothing waits in the
    /// send queue: an endpoint closed now loses nothing it sent (suspected peers owe
    /// nothing: their transport gave their messages up).
    pub fn flushed(&self) -> bool {
        self.outbox.is_empty() && self.tp.unacked() == 0
    }

    /// The node is leaving (a process about to close its endpoint): from now on what the
    /// machine sends, and what the send queue's backlog lets out, is marked as it goes
    /// ([`Driver::transmit_to`]), to be waited for by [`Driver::flushed_to_mark`];
    /// heartbeats sent meanwhile are not (the node keeps heartbeating until it closes, so
    /// that its peers do not take it for failed, and those never all stand acknowledged).
    /// The driver keeps the mark itself so that no caller can miss a send: a DOWN that a
    /// full window held in the queue and that left after the caller's mark was not waited for.
    pub fn leave(&mut self) {
        self.marking = true;
        self.tp.sent_marks(&mut self.marks);
    }

    /// [`Driver::flushed`] for what was sent since [`Driver::leave`] up to the last mark:
    /// the queue is empty and the transport acknowledged everything sent before the mark.
    pub fn flushed_to_mark(&self) -> bool {
        self.outbox.is_empty() && self.tp.acked_through(&self.marks)
    }

    /// The next suspicion (the transport's first, then the detector's).
    pub fn poll_suspect(&mut self) -> Option<(Rank, Verdict)> {
        self.suspects.pop_front()
    }

    /// The peer that fenced this node (it suspected this node while it was alive), if one
    /// did: the transport sends and delivers nothing more, the node must stop as crashed.
    pub fn fenced_by(&self) -> Option<Rank> {
        self.fenced_by
    }

    /// Sends what `m` queued (after the backlog of blocked peers) while `go()` holds; whether
    /// anything was.
    #[inline]
    pub fn transmit<M: Machine<Msg = F::Msg>>(&mut self, m: &mut M, now: Instant, go: impl FnMut() -> bool) -> bool {
        self.transmit_to(&mut Plain(m), now, go).0
    }

    /// [`Driver::transmit`] for an [`Endpoint`]: whether anything was sent, and whether the
    /// backlog moved.
    #[inline]
    pub fn transmit_to<E: Endpoint<F>>(
        &mut self,
        e: &mut E,
        now: Instant,
        mut go: impl FnMut() -> bool,
    ) -> (bool, bool) {
        // (A machine that reads no time is not handed any: no clock conversion per pass.)
        let t = if E::TIMED { self.ns(now) } else { 0 };
        let mut sent = false;
        let flushed = self.drain_backlog(e, now);
        while go()
            && let Some((to, msg)) = e.poll_transmit(t)
        {
            sent = true;
            self.messages += 1;
            let mut buf = std::mem::take(&mut self.buf);
            buf.resize(F::MAX_DATAGRAM, 0);
            if let Some(len) = e.encode(&msg, self.job, self.rank, &mut buf) {
                let r = self.send_bytes(to, &buf[..len], now);
                e.sent(to, r);
            }
            self.buf = buf;
        }
        // What the messages just handled made the machine doubt is probed after its own
        // messages left (they are the agreement's critical path; the probe is the detector's),
        // while `go()` holds: a node that stopped sends no sign of life.
        while let Some(p) = e.poll_doubt() {
            if go() {
                self.probe(p, now);
            }
        }
        if self.marking && (sent || flushed) {
            // Leaving: what went out now (new messages, or the backlog a full window had
            // held) is waited for too.
            self.tp.sent_marks(&mut self.marks);
        }
        (sent, flushed)
    }

    /// Sends, or queues behind `to`'s earlier messages (per-peer order is kept).
    /// Only a refused message is copied (into the backlog).
    #[inline]
    fn send_bytes(&mut self, to: Rank, bytes: &[u8], now: Instant) -> Sent {
        let r = self.outbox.send(&mut *self.tp, to, bytes, now);
        if F::HEARTBEATS && r == Sent::Sent {
            let t = self.ns(now);
            self.det.sent(to, t);
        }
        r
    }

    /// Retries the queued messages once, in order; whether any left the queue.
    fn drain_backlog<E: Endpoint<F>>(&mut self, e: &mut E, now: Instant) -> bool {
        if self.outbox.is_empty() {
            return false;
        }
        let t = self.ns(now);
        let det = &mut self.det;
        self.outbox.flush(&mut *self.tp, now, |to, r| {
            if r.is_ok() {
                det.sent(to, t);
            }
            e.flushed(to, r);
        })
    }
}

/// Why [`open_datagram`] rejected a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reject {
    /// The header did not check out.
    Invalid(DecodeError),
    /// A valid datagram of another kind than the one expected.
    WrongKind,
    /// The header's sender is not the rank the transport received it from.
    Spoofed,
}

/// Checks a datagram's header (job, ranks, `kind` if given, sender against `from`, in that
/// order): the header, the message body and the payload.
#[inline]
pub fn open_datagram(
    bytes: &[u8],
    job: u64,
    n: u32,
    from: Rank,
    kind: Option<u8>,
) -> Result<(Header, &[u8], &[u8]), Reject> {
    let (h, body, payload) = Header::decode(bytes, job, n).map_err(Reject::Invalid)?;
    if kind.is_some_and(|k| k != h.kind) {
        return Err(Reject::WrongKind);
    }
    if h.sender != from {
        return Err(Reject::Spoofed);
    }
    Ok((h, body, payload))
}

/// What a poll's deliveries update: the driver's fields, borrowed apart from its transport.
struct Receiver<'a, F: Framing, E> {
    m: &'a mut E,
    det: &'a mut Detector,
    drops: &'a mut DropCounters,
    received: &'a mut u64,
    suspects: &'a mut VecDeque<(Rank, Verdict)>,
    fenced_by: &'a mut Option<Rank>,
    job: u64,
    n: u32,
    /// The pass's instant, the time base, and the instant in the detector's time once a
    /// delivery needed it (a pass that receives nothing converts nothing).
    clock: (Instant, Instant, Option<Time>),
    _family: PhantomData<fn() -> F>,
}

impl<F: Framing, E: Endpoint<F>> Receiver<'_, F, E> {
    #[inline]
    fn now(&mut self) -> Time {
        let (now, base, t) = &mut self.clock;
        *t.get_or_insert_with(|| now.saturating_duration_since(*base).as_nanos() as Time)
    }

    /// Checks and hands one delivery on; a bad datagram is dropped and counted.
    #[inline]
    fn deliver(&mut self, d: Delivery<'_>) {
        let (from, bytes) = match d {
            Delivery::Message { from, bytes } => (from, bytes),
            Delivery::Suspect { peer } => return self.suspects.push_back((peer, Verdict::Transport)),
            Delivery::Fenced { by } => {
                *self.fenced_by = Some(by);
                return;
            }
        };
        // (A family without heartbeats whose machine reads no time converts no clock.)
        let now = if F::HEARTBEATS || E::TIMED { self.now() } else { 0 };
        if F::HEARTBEATS {
            self.det.heard(from, now);
        }
        match self.m.datagram(now, from, bytes, self.job, self.n, self.drops) {
            Got::Msg | Got::Other => *self.received += 1,
            Got::Heartbeat => {
                *self.received += 1;
                self.det.pinged(from, now);
            }
            Got::Dropped => {}
        }
    }
}

#[cfg(test)]
mod tests;
