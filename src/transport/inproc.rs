//! Ranks as threads of one process: one single-producer ring per (sender, receiver) pair.
//!
//! A ring is made of 64-byte slots (one cache line each) and created the first time its sender
//! sends to its receiver, so a job pays only for the pairs that talk (trees: O(n log n)).
//! A message takes one slot of a header word and 56 bytes, then as many whole slots as the rest
//! needs, all contiguous; the sender writes the payload, then publishes the header word (the
//! slot's position and the message's length). The receiver watches only that header word: a message of up to
//! 56 bytes crosses between cores as a single cache line, which is what shared-memory MPI
//! transports do (Open MPI's per-peer FIFOs, MPICH's fastboxes). The receiver hands its read
//! position back once per poll, so the sender rarely reads a line the receiver writes.
//! Data words are atomics (relaxed stores, one release store per message), so there is no
//! `unsafe`: on x86-64 they compile to plain moves.
//!
//! The per-pair ring is the window: a message that does not fit is refused with
//! [`SendError::WindowFull`] (backpressure). Per-sender order is FIFO by construction;
//! the receiver visits its senders' rings round-robin. Nothing is allocated on the message
//! path after a pair's first message.
//!
//! Memory grows with the pairs that talk: a receiver learns of a new ring through an
//! unbounded queue that allocates only when a sender announces one, and an endpoint finds its
//! rings by rank through a direct table up to [`DENSE_MAX`] ranks (4 bytes per rank) and a
//! hash map above. The one per-pair cost is a doorbell bit (above [`DIRECT_MAX`] ranks): a
//! bitmap word per 64 senders for each receiver, and as many carry words (n²/4 bytes in all,
//! 6 MB at 5 000 ranks). [`InprocNet::footprint`] adds it up.
//!
//! [`InprocNet::kill`] makes an endpoint dead: it delivers nothing more, what is sent to it
//! vanishes, and an endpoint that sends to it is told [`Delivery::Suspect`] on its next poll
//! (like a socket whose peer is gone), after which sends to it return
//! [`SendError::Suspected`].

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_queue::SegQueue;

use super::{Delivery, MAX_PAYLOAD, SendError, Transport, TransportStats};
use peer_index::{NONE, PeerIndex};

mod peer_index;
mod ring;

pub use ring::ONE_SLOT;
use ring::{FIRST, NEXT, POS_FIELD, Padded, Ring, Slot, WRAP, header, load_words, slots_for, tag, write_message};

/// The fewest slots a ring has: two of the largest messages (with a wrap) must fit.
pub const MIN_SLOTS: usize = 2 * slots_for(MAX_PAYLOAD);

/// Up to this many ranks a receiver checks every ring it has on each poll (a cached line per
/// ring while nothing changes); above, each sender also sets its bit in the receiver's
/// doorbell words after publishing, and a receiver visits only the rings whose bit it finds.
pub const DIRECT_MAX: u32 = 32;
/// Slots of all the rings one sender may have, at most (beyond [`MIN_SLOTS`] per ring): a
/// ring is shortened in large jobs so that memory grows as the pairs that talk, not faster.
const SLOTS_PER_SENDER: usize = 8192;
/// Up to this many ranks an endpoint indexes its rings by rank in a table (4 bytes a rank);
/// above, in a hash map (memory as the rings, a hash per lookup).
pub const DENSE_MAX: u32 = 1024;
/// Doorbell words of a receiver are padded to a multiple of this many (one 128-byte pair of
/// cache lines), so that two receivers never share a line.
const BELL_STRIDE: usize = 16;

/// The sender's side of one ring.
struct Tx {
    ring: Ring,
    head: u64,
    /// The receiver's position when last read: refreshed only when the ring looks full.
    tail: u64,
}

/// The receiver's side of one ring.
struct Rx {
    from: u32,
    ring: Ring,
    pos: u64,
    /// Whether `pos` moved since it was last published to the sender.
    moved: bool,
}

/// The announcements, doorbells and liveness flags all endpoints share.
struct Shared {
    /// Per receiver: rings its senders created since it last looked (each sender once); a
    /// queue allocates only while it holds announcements.
    announce: Vec<SegQueue<(u32, Ring)>>,
    /// Per receiver: rings announced so far (a poll reads this line, rarely written, rather
    /// than the queue, whose empty check costs a full fence).
    announced: Vec<Padded>,
    /// Receivers poll every ring ([`DIRECT_MAX`]); otherwise they read `bells`.
    direct: bool,
    /// Doorbell words per receiver (one bit per sender).
    words: usize,
    /// Distance between two receivers' first doorbell words (`words` padded to [`BELL_STRIDE`]).
    stride: usize,
    /// `bells[to * stride + from / 64]` bit `from % 64`: `from` published since `to` looked
    /// (empty with `direct`). A receiver's words share lines: only its senders write them.
    bells: Box<[AtomicU64]>,
    dead: Vec<AtomicBool>,
    /// Rings created so far.
    rings: AtomicU64,
}

impl Shared {
    /// Makes `rank` dead (idempotent; out-of-range ranks are ignored).
    fn kill(&self, rank: u32) {
        if let Some(flag) = self.dead.get(rank as usize) {
            flag.store(true, Ordering::Release);
        }
    }
}

/// The handle on an in-process network: kills endpoints. Cheap to clone, `Send + Sync`.
#[derive(Clone)]
pub struct InprocNet {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for InprocNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InprocNet").field("size", &self.size()).finish()
    }
}

impl InprocNet {
    /// A network of ranks `0..n` and its `n` endpoints, in rank order. Each pair that talks
    /// gets a ring of `ring_slots` 64-byte slots on its first message, the pair's window
    /// (rounded up to a power of two, at least [`MIN_SLOTS`]; fewer in large jobs, see
    /// `SLOTS_PER_SENDER`).
    pub fn new(n: u32, ring_slots: usize) -> (InprocNet, Vec<InprocTransport>) {
        let slots = ring_slots_for(n, ring_slots);
        let direct = n <= DIRECT_MAX;
        let (words, stride) = bell_words(n);
        let shared = Arc::new(Shared {
            announce: (0..n).map(|_| SegQueue::new()).collect(),
            announced: (0..n).map(|_| Padded(AtomicU64::new(0))).collect(),
            direct,
            words,
            stride,
            bells: (0..n as usize * stride).map(|_| AtomicU64::new(0)).collect(),
            dead: (0..n).map(|_| AtomicBool::new(false)).collect(),
            rings: AtomicU64::new(0),
        });
        let endpoints = (0..n)
            .map(|rank| InprocTransport {
                rank,
                size: n,
                slots,
                shared: Arc::clone(&shared),
                tx: Vec::new(),
                tx_index: PeerIndex::new(n),
                rx: Vec::new(),
                by_sender: PeerIndex::new(if direct { 0 } else { n }),
                carry: vec![0; if direct { 0 } else { words }],
                next_rx: 0,
                scratch: vec![0; MAX_PAYLOAD],
                to_report: Vec::new(),
                reported: HashSet::new(),
                suspected: HashSet::new(),
                stats: TransportStats::default(),
            })
            .collect();
        (InprocNet { shared }, endpoints)
    }

    /// Bytes a network of `n` ranks built with `ring_slots` holds once `talking` pairs per
    /// rank have exchanged messages: per rank its endpoint (record, scratch buffer, ring
    /// indexes, announcement line, liveness) and its doorbell and carry words, per ring its
    /// slots, read position and both ends' records.
    pub fn footprint(n: u32, ring_slots: usize, talking: u64) -> u64 {
        let slots = ring_slots_for(n, ring_slots) as u64;
        let (words, stride) = bell_words(n);
        let ranks = u64::from(n);
        let pairs = ranks.saturating_mul(talking.min(ranks.saturating_sub(1)));
        let direct = n <= DIRECT_MAX;
        let bells = if direct { 0 } else { (stride + words) as u64 * 8 };
        let per_rank =
            (size_of::<InprocTransport>() + MAX_PAYLOAD + size_of::<Padded>() + size_of::<SegQueue<(u32, Ring)>>() + 1)
                as u64
                + bells
                + 2 * PeerIndex::footprint(n, talking);
        let per_ring = slots * size_of::<Slot>() as u64
            + (size_of::<Padded>() + size_of::<Tx>() + size_of::<Rx>() + 2 * size_of::<usize>()) as u64;
        ranks
            .saturating_mul(per_rank)
            .saturating_add(pairs.saturating_mul(per_ring))
    }

    /// Rings created so far (one per pair that talked, each direction its own).
    pub fn rings(&self) -> u64 {
        self.shared.rings.load(Ordering::Relaxed)
    }

    /// Ranks in the network.
    pub fn size(&self) -> u32 {
        self.shared.dead.len() as u32
    }

    /// Makes `rank` dead (idempotent; out-of-range ranks are ignored).
    pub fn kill(&self, rank: u32) {
        self.shared.kill(rank);
    }

    /// Whether `rank` was killed.
    pub fn is_dead(&self, rank: u32) -> bool {
        self.shared
            .dead
            .get(rank as usize)
            .is_some_and(|d| d.load(Ordering::Acquire))
    }
}

/// Slots of each ring in a network of `n` ranks asked for `ring_slots`.
fn ring_slots_for(n: u32, ring_slots: usize) -> usize {
    ring_slots
        .min(SLOTS_PER_SENDER / n.max(1) as usize)
        .max(MIN_SLOTS)
        .next_power_of_two()
}

/// Doorbell words per receiver in a network of `n` ranks, and the stride between receivers.
fn bell_words(n: u32) -> (usize, usize) {
    if n <= DIRECT_MAX {
        return (0, 0);
    }
    let words = (n as usize).div_ceil(64);
    (words, words.next_multiple_of(BELL_STRIDE))
}

/// The endpoint of one rank of an [`InprocNet`]. Aligned so that two endpoints never share
/// a cache line (each is written by its own thread on every message).
#[repr(align(128))]
pub struct InprocTransport {
    rank: u32,
    size: u32,
    slots: usize,
    shared: Arc<Shared>,
    /// The rings this endpoint writes, in the order it first sent to their receivers.
    tx: Vec<Tx>,
    /// Per destination: its ring's index in `tx`.
    tx_index: PeerIndex,
    /// The rings written to this endpoint, in the order their senders first sent.
    rx: Vec<Rx>,
    /// Per sender: its ring's index in `rx` (doorbell mode only).
    by_sender: PeerIndex,
    /// Doorbell bits of rings left with messages by the last poll's budget.
    carry: Vec<u64>,
    /// The ring the next poll starts with (round-robin between senders).
    next_rx: usize,
    /// A message copied out of its ring for the sink.
    scratch: Vec<u8>,
    /// Dead peers this endpoint sent to, to report on the next poll.
    to_report: Vec<u32>,
    reported: HashSet<u32>,
    suspected: HashSet<u32>,
    stats: TransportStats,
}

impl std::fmt::Debug for InprocTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InprocTransport")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

impl InprocTransport {
    /// Heap bytes this endpoint holds itself (its rings' slots not counted): what grows
    /// with the job's size rather than with the peers it talks to.
    pub fn own_heap_bytes(&self) -> usize {
        self.tx.capacity() * size_of::<Tx>()
            + self.rx.capacity() * size_of::<Rx>()
            + self.tx_index.bytes()
            + self.by_sender.bytes()
            + self.carry.capacity() * 8
            + self.scratch.capacity()
            + self.to_report.capacity() * 4
            + (self.reported.capacity() + self.suspected.capacity()) * 5
    }

    fn is_dead(&self, rank: u32) -> bool {
        self.shared.dead[rank as usize].load(Ordering::Acquire)
    }

    /// Takes in the rings senders created since the last look.
    fn adopt_rings(&mut self) {
        let me = self.rank as usize;
        if self.shared.announced[me].0.load(Ordering::Acquire) == self.rx.len() as u64 {
            return;
        }
        while let Some((from, ring)) = self.shared.announce[me].pop() {
            if !self.shared.direct {
                self.by_sender.set(from, self.rx.len() as u32);
            }
            self.rx.push(Rx {
                from,
                ring,
                pos: 0,
                moved: false,
            });
        }
    }

    /// Whether a message may be waiting (used by `wait`).
    fn has_work(&self) -> bool {
        let me = self.rank as usize;
        let sh = &self.shared;
        !self.to_report.is_empty()
            || sh.announced[me].0.load(Ordering::Acquire) != self.rx.len() as u64
            || if sh.direct {
                self.rx
                    .iter()
                    .any(|r| r.ring.slot(r.pos).0[0].load(Ordering::Acquire) & POS_FIELD == tag(r.pos))
            } else {
                self.carry.iter().any(|&c| c != 0)
                    || sh.bells[me * sh.stride..me * sh.stride + sh.words]
                        .iter()
                        .any(|b| b.load(Ordering::Acquire) != 0)
            }
    }

    /// Delivers up to `budget` messages of ring `i` of `rx`; whether any are left.
    fn drain(&mut self, i: usize, budget: usize, sink: &mut dyn FnMut(Delivery<'_>)) -> bool {
        let rx = &mut self.rx[i];
        let mut left = false;
        for k in 0..=budget {
            let head = rx.ring.slot(rx.pos);
            let word = head.0[0].load(Ordering::Acquire);
            if word & POS_FIELD != tag(rx.pos) {
                break;
            }
            if k == budget {
                left = true;
                break;
            }
            let len = word >> 48;
            if len == WRAP {
                let size = rx.ring.slots.len() as u64;
                rx.pos += size - (rx.pos & (size - 1));
                rx.moved = true;
                continue;
            }
            // Never above MAX_PAYLOAD: only `send` writes headers.
            let len = (len as usize).min(MAX_PAYLOAD);
            let out = &mut self.scratch[..len];
            let (lead, rest) = out.split_at_mut(len.min(FIRST));
            load_words(&head.0[1..], lead);
            for (j, chunk) in rest.chunks_mut(NEXT).enumerate() {
                load_words(&rx.ring.slot(rx.pos + 1 + j as u64).0[1..], chunk);
            }
            rx.pos += slots_for(len) as u64;
            rx.moved = true;
            sink(Delivery::Message {
                from: rx.from,
                bytes: &self.scratch[..len],
            });
            self.stats.received += 1;
        }
        if rx.moved {
            rx.moved = false;
            rx.ring.tail.0.store(rx.pos, Ordering::Release);
        }
        left
    }
}

impl Transport for InprocTransport {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn send(&mut self, to: u32, bytes: &[u8], _now: Instant) -> Result<(), SendError> {
        if to >= self.size || to == self.rank {
            return Err(SendError::BadPeer);
        }
        if bytes.len() > MAX_PAYLOAD {
            return Err(SendError::TooLarge);
        }
        if !self.suspected.is_empty() && self.suspected.contains(&to) {
            return Err(SendError::Suspected);
        }
        if self.is_dead(self.rank) {
            // A dead endpoint is passive: what it sends vanishes.
            return Ok(());
        }
        if self.is_dead(to) {
            if self.reported.insert(to) {
                self.to_report.push(to);
            }
            self.stats.sent += 1;
            return Ok(());
        }
        let mut i = self.tx_index.get(to);
        if i == NONE {
            let ring = Ring::new(self.slots);
            self.shared.rings.fetch_add(1, Ordering::Relaxed);
            self.shared.announce[to as usize].push((self.rank, ring.clone()));
            self.shared.announced[to as usize].0.fetch_add(1, Ordering::Release);
            i = self.tx.len() as u32;
            self.tx.push(Tx { ring, head: 0, tail: 0 });
            self.tx_index.set(to, i);
        }
        let tx = &mut self.tx[i as usize];
        let size = tx.ring.slots.len() as u64;
        let need = slots_for(bytes.len()) as u64;
        let to_end = size - (tx.head & (size - 1));
        // A message never wraps: if it does not fit before the end of the lap, a marker
        // sends the receiver to the next lap.
        let wrap = if need > to_end { to_end } else { 0 };
        if tx.head + wrap + need - tx.tail > size {
            tx.tail = tx.ring.tail.0.load(Ordering::Acquire);
            if tx.head + wrap + need - tx.tail > size {
                self.stats.window_full += 1;
                return Err(SendError::WindowFull);
            }
        }
        if wrap > 0 {
            let marker = tx.ring.slot(tx.head);
            marker.0[0].store(header(tx.head, WRAP), Ordering::Release);
            tx.head += wrap;
        }
        write_message(&tx.ring, tx.head, bytes);
        tx.head += need;
        if !self.shared.direct {
            let sh = &self.shared;
            let r = self.rank as usize;
            sh.bells[to as usize * sh.stride + r / 64].fetch_or(1 << (r % 64), Ordering::AcqRel);
        }
        self.stats.sent += 1;
        Ok(())
    }

    fn poll(&mut self, _now: Instant, sink: &mut dyn FnMut(Delivery<'_>)) -> std::io::Result<usize> {
        if self.is_dead(self.rank) {
            return Ok(0);
        }
        let mut delivered = 0;
        for peer in self.to_report.drain(..) {
            self.suspected.insert(peer);
            self.stats.suspected += 1;
            sink(Delivery::Suspect { peer });
            delivered += 1;
        }
        self.adopt_rings();
        let before = self.stats.received;
        // At most one ring's worth of messages per sender and poll, so no sender starves.
        let budget = self.slots;
        if self.shared.direct {
            let rings = self.rx.len();
            for k in 0..rings {
                self.drain((self.next_rx + k) % rings, budget, sink);
            }
            if rings > 0 {
                self.next_rx = (self.next_rx + 1) % rings;
            }
        } else {
            let (me, words, stride) = (self.rank as usize, self.shared.words, self.shared.stride);
            for w in 0..words {
                let bell = &self.shared.bells[me * stride + w];
                let mut bits = std::mem::take(&mut self.carry[w]);
                if bell.load(Ordering::Relaxed) != 0 {
                    bits |= bell.swap(0, Ordering::Acquire);
                }
                while bits != 0 {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let from = w * 64 + b;
                    if self.by_sender.get(from as u32) == NONE {
                        // Announced before its first bell: visible now.
                        self.adopt_rings();
                    }
                    let i = self.by_sender.get(from as u32);
                    if i != NONE && self.drain(i as usize, budget, sink) {
                        self.carry[w] |= 1 << b;
                    }
                }
            }
        }
        delivered += (self.stats.received - before) as usize;
        Ok(delivered)
    }

    fn wait(&mut self, timeout: Duration) -> std::io::Result<()> {
        let start = Instant::now();
        let mut spins = 0u32;
        while !self.has_work() && start.elapsed() < timeout {
            if spins < 64 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    fn stats(&self) -> TransportStats {
        self.stats
    }

    /// The suspect is made dead, as [`InprocNet::kill`] does (a live one stops hearing and
    /// being heard: the in-process fence).
    fn enforce_suspicion(&mut self, peer: u32, _now: Instant) {
        if peer != self.rank {
            self.shared.kill(peer);
        }
    }
}

#[cfg(test)]
mod tests;
