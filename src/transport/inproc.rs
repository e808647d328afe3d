//! Ranks as threads of one process: one single-producer ring per (sender, receiver) pair.
//!
//! A ring is made of 64-byte slots (one cache line each) and created the first time its sender
//! sends to its receiver, so a job pays only for the pairs that talk (trees: O(n log n)).
//! A message takes one slot of header and 56 bytes, then as many whole slots as the rest
//! needs, all contiguous; the sender writes the payload, then publishes the header word with
//! the slot's position in it. The receiver watches only that header word: a message of up to
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
//! [`InprocNet::kill`] makes an endpoint dead: it delivers nothing more, what is sent to it
//! vanishes, and an endpoint that sends to it is told [`Delivery::Suspect`] on its next poll
//! (like a socket whose peer is gone), after which sends to it return
//! [`SendError::Suspected`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;

use super::{Delivery, MAX_PAYLOAD, SendError, Transport, TransportStats};

/// Payload bytes in a message's first slot (word 0: position + 1, word 1: length).
const FIRST: usize = 48;
/// Payload bytes in each further slot (word 0: zero, never a valid header).
const NEXT: usize = 56;
/// The length word of a wrap marker: the rest of the lap is skipped.
const WRAP: u64 = u64::MAX;
/// The fewest slots a ring has: two of the largest messages (with a wrap) must fit.
pub const MIN_SLOTS: usize = 2 * slots_for(MAX_PAYLOAD);

/// Up to this many ranks a receiver checks every ring it has on each poll (a cached line per
/// ring while nothing changes); above, each sender also sets its bit in the receiver's
/// doorbell words after publishing, and a receiver visits only the rings whose bit it finds.
pub const DIRECT_MAX: u32 = 32;
/// Slots of all the rings one sender may have, at most (beyond [`MIN_SLOTS`] per ring): a
/// ring is shortened in large jobs so that memory grows as the pairs that talk, not faster.
const SLOTS_PER_SENDER: usize = 8192;

/// Slots a message of `len` bytes takes.
const fn slots_for(len: usize) -> usize {
    if len <= FIRST {
        1
    } else {
        1 + (len - FIRST).div_ceil(NEXT)
    }
}

/// One cache line of a ring.
#[repr(align(64))]
struct Slot([AtomicU64; 8]);

/// Keeps the receiver's read position off the lines the sender writes.
#[repr(align(128))]
struct Padded(AtomicU64);

/// The ring of one (sender, receiver) pair. Positions count slots from 0 and never wrap; a
/// header holds its position + 1, so no stale line (an older lap's header, a continuation
/// slot, zeroed memory) can pass for the message the receiver expects. Both ends hold the
/// slots' pointer and length themselves, so reaching a slot costs no extra cache line (in a
/// large job, the lines of a ring not used for a while are cold).
#[derive(Clone)]
struct Ring {
    slots: Arc<[Slot]>,
    /// How far the receiver has read (published once per poll).
    tail: Arc<Padded>,
}

impl Ring {
    fn new(slots: usize) -> Ring {
        Ring {
            slots: (0..slots).map(|_| Slot(Default::default())).collect(),
            tail: Arc::new(Padded(AtomicU64::new(0))),
        }
    }

    fn slot(&self, pos: u64) -> &Slot {
        &self.slots[(pos as usize) & (self.slots.len() - 1)]
    }
}

/// The sender's side of one ring.
struct Tx {
    ring: Ring,
    head: u64,
    /// The receiver's position when last read: refreshed only when the ring looks full.
    tail: u64,
}

/// No ring (in `by_sender`).
const NONE: u32 = u32::MAX;

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
    /// Per receiver: rings its senders created since it last looked (each sender once).
    announce: Vec<ArrayQueue<(u32, Ring)>>,
    /// Per receiver: rings announced so far (a poll reads this line, rarely written, rather
    /// than the queue, whose empty check costs a full fence).
    announced: Vec<Padded>,
    /// Receivers poll every ring ([`DIRECT_MAX`]); otherwise they read `bells`.
    direct: bool,
    /// Doorbell words per receiver (one bit per sender).
    words: usize,
    /// `bells[to * words + from / 64]` bit `from % 64`: `from` published since `to` looked.
    bells: Vec<Padded>,
    dead: Vec<AtomicBool>,
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
        let slots = ring_slots
            .min(SLOTS_PER_SENDER / n.max(1) as usize)
            .max(MIN_SLOTS)
            .next_power_of_two();
        let words = (n as usize).div_ceil(64);
        let shared = Arc::new(Shared {
            announce: (0..n).map(|_| ArrayQueue::new(n.max(1) as usize)).collect(),
            announced: (0..n).map(|_| Padded(AtomicU64::new(0))).collect(),
            direct: n <= DIRECT_MAX,
            words,
            bells: (0..n as usize * words).map(|_| Padded(AtomicU64::new(0))).collect(),
            dead: (0..n).map(|_| AtomicBool::new(false)).collect(),
        });
        let endpoints = (0..n)
            .map(|rank| InprocTransport {
                rank,
                size: n,
                slots,
                shared: Arc::clone(&shared),
                tx: (0..n).map(|_| None).collect(),
                rx: Vec::new(),
                by_sender: vec![NONE; n as usize],
                carry: vec![0; words],
                next_rx: 0,
                scratch: vec![0; MAX_PAYLOAD],
                to_report: Vec::with_capacity(n as usize),
                reported: vec![false; n as usize],
                suspected: vec![false; n as usize],
                stats: TransportStats::default(),
            })
            .collect();
        (InprocNet { shared }, endpoints)
    }

    /// Ranks in the network.
    pub fn size(&self) -> u32 {
        self.shared.dead.len() as u32
    }

    /// Makes `rank` dead (idempotent; out-of-range ranks are ignored).
    pub fn kill(&self, rank: u32) {
        if let Some(flag) = self.shared.dead.get(rank as usize) {
            flag.store(true, Ordering::Release);
        }
    }

    /// Whether `rank` was killed.
    pub fn is_dead(&self, rank: u32) -> bool {
        self.shared
            .dead
            .get(rank as usize)
            .is_some_and(|d| d.load(Ordering::Acquire))
    }
}

/// The endpoint of one rank of an [`InprocNet`]. Aligned so that two endpoints never share
/// a cache line (each is written by its own thread on every message).
#[repr(align(128))]
pub struct InprocTransport {
    rank: u32,
    size: u32,
    slots: usize,
    shared: Arc<Shared>,
    /// Per destination: the ring this endpoint writes, once it has sent there.
    tx: Vec<Option<Tx>>,
    /// The rings written to this endpoint, in the order their senders first sent.
    rx: Vec<Rx>,
    /// Per sender: its ring's index in `rx`, or [`NONE`].
    by_sender: Vec<u32>,
    /// Doorbell bits of rings left with messages by the last poll's budget.
    carry: Vec<u64>,
    /// The ring the next poll starts with (round-robin between senders).
    next_rx: usize,
    /// A message copied out of its ring for the sink.
    scratch: Vec<u8>,
    /// Dead peers this endpoint sent to, to report on the next poll.
    to_report: Vec<u32>,
    reported: Vec<bool>,
    suspected: Vec<bool>,
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
            self.by_sender[from as usize] = self.rx.len() as u32;
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
                    .any(|r| r.ring.slot(r.pos).0[0].load(Ordering::Acquire) == r.pos + 1)
            } else {
                self.carry.iter().any(|&c| c != 0)
                    || sh.bells[me * sh.words..(me + 1) * sh.words]
                        .iter()
                        .any(|b| b.0.load(Ordering::Acquire) != 0)
            }
    }

    /// Delivers up to `budget` messages of ring `i` of `rx`; whether any are left.
    fn drain(&mut self, i: usize, budget: usize, sink: &mut dyn FnMut(Delivery<'_>)) -> bool {
        let rx = &mut self.rx[i];
        let mut left = false;
        for k in 0..=budget {
            let head = rx.ring.slot(rx.pos);
            if head.0[0].load(Ordering::Acquire) != rx.pos + 1 {
                break;
            }
            if k == budget {
                left = true;
                break;
            }
            let len = head.0[1].load(Ordering::Relaxed);
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
            load_words(&head.0[2..], lead);
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

/// Writes `bytes` into `ring` at `head` and publishes it (the header word last).
fn write_message(ring: &Ring, head: u64, bytes: &[u8]) {
    let first = ring.slot(head);
    let (lead, rest) = bytes.split_at(bytes.len().min(FIRST));
    for (k, chunk) in rest.chunks(NEXT).enumerate() {
        let slot = ring.slot(head + 1 + k as u64);
        slot.0[0].store(0, Ordering::Relaxed);
        store_words(&slot.0[1..], chunk);
    }
    store_words(&first.0[2..], lead);
    first.0[1].store(bytes.len() as u64, Ordering::Relaxed);
    first.0[0].store(head + 1, Ordering::Release);
}

/// Copies `bytes` into consecutive words (little-endian, the last one zero-padded).
fn store_words(words: &[AtomicU64], bytes: &[u8]) {
    // Whole words first (plain moves), then the zero-padded rest.
    let chunks = bytes.chunks_exact(8);
    let rest = chunks.remainder();
    let full = bytes.len() / 8;
    for (w, chunk) in words.iter().zip(chunks) {
        let word: [u8; 8] = chunk.try_into().unwrap_or_default();
        w.store(u64::from_le_bytes(word), Ordering::Relaxed);
    }
    if let (Some(w), false) = (words.get(full), rest.is_empty()) {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        w.store(u64::from_le_bytes(b), Ordering::Relaxed);
    }
}

/// Copies words out into `out` (its length says how many bytes).
fn load_words(words: &[AtomicU64], out: &mut [u8]) {
    let full = out.len() / 8;
    let mut chunks = out.chunks_exact_mut(8);
    for (w, chunk) in words.iter().zip(chunks.by_ref()) {
        chunk.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
    }
    let rest = chunks.into_remainder();
    if let (Some(w), false) = (words.get(full), rest.is_empty()) {
        let b = w.load(Ordering::Relaxed).to_le_bytes();
        rest.copy_from_slice(&b[..rest.len()]);
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
        if self.suspected[to as usize] {
            return Err(SendError::Suspected);
        }
        if self.is_dead(self.rank) {
            // A dead endpoint is passive: what it sends vanishes.
            return Ok(());
        }
        if self.is_dead(to) {
            if !self.reported[to as usize] {
                self.reported[to as usize] = true;
                self.to_report.push(to);
            }
            self.stats.sent += 1;
            return Ok(());
        }
        let tx = match &mut self.tx[to as usize] {
            Some(tx) => tx,
            slot => {
                let ring = Ring::new(self.slots);
                // Cannot fail: each sender announces once and the queue holds one per rank.
                let _ = self.shared.announce[to as usize].push((self.rank, ring.clone()));
                self.shared.announced[to as usize].0.fetch_add(1, Ordering::Release);
                slot.insert(Tx { ring, head: 0, tail: 0 })
            }
        };
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
            marker.0[1].store(WRAP, Ordering::Relaxed);
            marker.0[0].store(tx.head + 1, Ordering::Release);
            tx.head += wrap;
        }
        write_message(&tx.ring, tx.head, bytes);
        tx.head += need;
        if !self.shared.direct {
            let sh = &self.shared;
            let r = self.rank as usize;
            sh.bells[to as usize * sh.words + r / 64]
                .0
                .fetch_or(1 << (r % 64), Ordering::AcqRel);
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
            self.suspected[peer as usize] = true;
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
            let (me, words) = (self.rank as usize, self.shared.words);
            for w in 0..words {
                let bell = &self.shared.bells[me * words + w].0;
                let mut bits = std::mem::take(&mut self.carry[w]);
                if bell.load(Ordering::Relaxed) != 0 {
                    bits |= bell.swap(0, Ordering::Acquire);
                }
                while bits != 0 {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let from = w * 64 + b;
                    if self.by_sender[from] == NONE {
                        // Announced before its first bell: visible now.
                        self.adopt_rings();
                    }
                    let i = self.by_sender[from];
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
}

#[cfg(test)]
mod tests;
