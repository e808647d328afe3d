//! Transports the runtime drives (`docs/architecture.md`, decision 6): `inproc` (threads of
//! one process, lock-free queues) and `udp` (one non-blocking socket per node, made reliable
//! here). Both move opaque byte strings between ranks of one job; encoding is [`crate::wire`]'s.

pub mod death_watch;
pub mod ids;
pub mod inproc;
pub mod local_ip;
pub mod ppoll;
pub mod run_dir;
pub mod udp;
pub mod verbs;

use std::time::{Duration, Instant};

/// The largest payload a transport carries in one datagram.
pub const MAX_PAYLOAD: usize = 1200;

/// Something the transport hands to the runtime while polling.
#[derive(Debug)]
pub enum Delivery<'a> {
    /// A payload from rank `from`, exactly once and in order per sender.
    Message { from: u32, bytes: &'a [u8] },
    /// `peer` stopped answering (retries exhausted, endpoint gone): the runtime's failure
    /// detector consumes this.
    Suspect { peer: u32 },
    /// Peer `by` suspected this endpoint and told it so (a FENCE, authenticated like any
    /// datagram): fail-stop enforcement, the endpoint has stopped and the runtime must stop
    /// this process's node as a crash. Reported once; nothing is delivered after it.
    Fenced { by: u32 },
}

/// What [`Transport::beat`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Beat {
    /// A heartbeat datagram left outside the reliable stream.
    Sent,
    /// This transport has such heartbeats but sent none: the peer is suspected, the rank is
    /// not a peer's, or this endpoint is fenced (nothing for the caller to send either).
    Withheld,
    /// This transport has none: the caller sends its heartbeat as a message.
    Unsupported,
}

/// Why a send was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// The payload exceeds [`MAX_PAYLOAD`].
    TooLarge,
    /// The destination is not a rank of the job, or is this rank.
    BadPeer,
    /// The peer is suspected: nothing more is sent to it.
    Suspected,
    /// The bounded retransmit window to this peer is full: try again after polling.
    WindowFull,
    /// This endpoint was fenced (suspected by a peer): it sends nothing more.
    Fenced,
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SendError::TooLarge => "payload too large",
            SendError::BadPeer => "no such peer",
            SendError::Suspected => "peer suspected",
            SendError::WindowFull => "retransmit window full",
            SendError::Fenced => "this endpoint was fenced",
        })
    }
}

/// Counters every transport keeps (never reset; read at the end of a run). A node process
/// hands them to its parent whole, in this serialized form (a counter its parent's build does
/// not know reads as 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct TransportStats {
    pub sent: u64,
    pub received: u64,
    pub retransmits: u64,
    pub acks_sent: u64,
    pub duplicates: u64,
    /// Datagrams dropped because they failed validation (bad magic, job, length, rank, ...).
    pub malformed: u64,
    /// Datagrams from an address outside the job.
    pub foreign: u64,
    pub suspected: u64,
    /// Datagrams dropped by the loss injector (tests).
    pub injected_losses: u64,
    /// Sends refused with [`SendError::WindowFull`] (backpressure).
    pub window_full: u64,
    /// Valid datagrams dropped because their sender is suspected.
    pub from_suspected: u64,
    /// ICMP port-unreachable hints for a peer that had answered before: each starts a probe;
    /// the peer is suspected only if it stays silent for the probe timeout.
    pub refused: u64,
    /// Peers suspected at once because an ICMP error quoted a datagram this endpoint had in
    /// flight to them, byte for byte: its PROBE, or the header of an unacknowledged DATA
    /// datagram (the kernel refused it: their port is closed).
    pub refused_probes: u64,
    /// Datagrams whose MAC did not verify (wrong key, forged, corrupted).
    pub bad_mac: u64,
    /// Authentic datagrams of another job id.
    pub foreign_job: u64,
    /// Datagrams whose sender or destination rank is not the one of the address they came
    /// from or went to (outside the membership).
    pub bad_rank: u64,
    /// FENCE datagrams sent to suspected peers (fail-stop enforcement).
    pub fences_sent: u64,
    /// Authentic FENCEs that stopped this endpoint (0 or 1 per endpoint).
    pub fenced: u64,
    /// Retransmissions the peer reported receiving twice (the original was late, not lost:
    /// the RTO adapted to the delay, see `udp/reliable/receive.rs`).
    pub spurious_retransmits: u64,
    /// Retransmission timer expiries that sent the oldest unacknowledged datagram again, and
    /// the sum of their waits since its last transmission, ns: the timeout a lost message
    /// with nothing behind it costs (what `bench --loss`'s model charges per lost copy).
    pub timeouts: u64,
    pub timeout_wait_ns: u64,
    /// Peers suspected because their process died on this host, told before their port
    /// closed ([`death_watch`]).
    pub died_on_host: u64,
    /// Heartbeats sent outside the reliable stream ([`Transport::beat`]: UDP's PROBEs), not
    /// counted in `sent`.
    pub beats_sent: u64,
}

/// One endpoint of one rank.
pub trait Transport: Send {
    /// This endpoint's rank.
    fn rank(&self) -> u32;
    /// Ranks in the job.
    fn size(&self) -> u32;
    /// Queues `bytes` for reliable delivery to `to`. Never blocks.
    fn send(&mut self, to: u32, bytes: &[u8], now: Instant) -> Result<(), SendError>;
    /// Makes progress (receive, acknowledge, retransmit) and hands deliveries to `sink`.
    /// Returns how many deliveries were made. Never blocks.
    fn poll(&mut self, now: Instant, sink: &mut dyn FnMut(Delivery<'_>)) -> std::io::Result<usize>;
    /// Blocks until data may be readable or `timeout` passed (blocking/adaptive poll modes).
    fn wait(&mut self, timeout: Duration) -> std::io::Result<()>;
    /// [`Transport::wait`], woken also when one of `also` is readable (at most
    /// [`ppoll::MAX_ALSO`]: a thread that serves requests or another endpoint besides this
    /// one). By default they are not watched: the wait ends at `timeout` at the latest, as
    /// [`Transport::wait`]'s.
    fn wait_or(&mut self, timeout: Duration, also: &[std::os::fd::BorrowedFd<'_>]) -> std::io::Result<()> {
        let _ = also;
        self.wait(timeout)
    }
    /// For a thread that waits on this endpoint beside others (in another's
    /// [`Transport::wait_or`]): the descriptor readable when data may have come, and when its
    /// timers (retransmissions, held datagrams) are due at the latest (now: it must not wait).
    /// `None`: no such descriptor; such a thread must come back to poll it soon.
    fn readiness(&self) -> Option<(std::os::fd::BorrowedFd<'_>, Option<Instant>)> {
        None
    }
    /// The counters.
    fn stats(&self) -> TransportStats;
    /// Messages sent but not yet acknowledged (0 for transports that need no acknowledgement):
    /// poll until 0 before dropping an endpoint whose last messages matter.
    fn unacked(&self) -> usize {
        0
    }
    /// When the last valid datagram from `peer` came, delivered or not (one held behind a
    /// gap, a retransmission, an acknowledgement): a sign of life a detector above must not
    /// miss while the in-order delivery waits for a repair. `None`: not known here.
    fn last_heard(&self, peer: u32) -> Option<Instant> {
        let _ = peer;
        None
    }
    /// Sends `to` a heartbeat outside the reliable stream, if this transport has such a
    /// datagram (UDP: a PROBE, which the peer's transport answers with an ACK at once, so each
    /// side hears the other through [`Transport::last_heard`]): it takes no slot of the send
    /// window, is never retransmitted (a lost one is replaced by the next period's) and never
    /// waits behind a full window, as a heartbeat sent as a message did, holding up the
    /// messages queued after it under loss. [`Beat::Unsupported`] (the default): this
    /// transport has none, and the caller sends its heartbeat as a message.
    fn beat(&mut self, to: u32, now: Instant) -> Beat {
        let _ = (to, now);
        Beat::Unsupported
    }
    /// Marks, into `marks` (by peer), what has been sent so far, for
    /// [`Transport::acked_through`]. By default none: then everything counts.
    fn sent_marks(&self, marks: &mut Vec<u64>) {
        marks.clear();
    }
    /// Has every message sent before `marks` was taken been acknowledged (or given up with
    /// its peer, suspected)? What was sent since (heartbeats) is not waited for; a peer
    /// without a mark counts everything sent to it. By default: [`Transport::unacked`] is 0.
    fn acked_through(&self, marks: &[u64]) -> bool {
        let _ = marks;
        self.unacked() == 0
    }
    /// Enforces a suspicion made above the transport (a heartbeat detector's silence bound):
    /// stops all traffic with `peer` and, where the transport can, tells it, so that a live
    /// suspect stops instead of going on cut off one-sidedly (fail-stop, as ULFM's runtime
    /// removes a process it suspects; ERA's Lemma 1 needs only dead processes marked dead).
    /// Reports nothing back: the caller made the suspicion. By default it does nothing (a
    /// transport that cannot reach a suspect relies on the caller's own enforcement).
    fn enforce_suspicion(&mut self, _peer: u32, _now: Instant) {}
}

#[cfg(test)]
mod testutil;
