//! The slots of one (sender, receiver) ring and the layout of a message in them: a header word
//! (length and position, published last) and the payload in the line's other seven words,
//! further slots for longer messages.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::transport::MAX_PAYLOAD;

/// Payload bytes in a message's first slot (word 0: its header, [`header`]).
pub(super) const FIRST: usize = 56;
/// The longest message that takes a single slot (one cache line from sender to receiver).
/// A broadcast's 8-byte payload with its wire header and tree body is 49 bytes: with the
/// length in a word of its own (48 bytes in the first slot) every such message took two lines.
pub const ONE_SLOT: usize = FIRST;
/// Payload bytes in each further slot (word 0: zero, never a valid header).
pub(super) const NEXT: usize = 56;
/// The length of a wrap marker: the rest of the lap is skipped.
pub(super) const WRAP: u64 = 0xFFFF;
/// A header's position field: the low 48 bits, holding the position modulo 2^47, plus one
/// (never 0, so a further slot's zero word is never taken for a header). A slot is rewritten
/// every lap, so a stale header never shows the position the receiver waits for.
pub(super) const POS_FIELD: u64 = (1 << 48) - 1;
const _: () = assert!((MAX_PAYLOAD as u64) < WRAP);

/// The header word of the message (or wrap marker) at position `pos` with `len` bytes: the
/// length in the top 16 bits, [`tag`] below, published last.
#[inline]
pub(super) const fn header(pos: u64, len: u64) -> u64 {
    (len << 48) | tag(pos)
}

/// The position field a header at `pos` holds.
#[inline]
pub(super) const fn tag(pos: u64) -> u64 {
    (pos & ((1 << 47) - 1)) + 1
}
/// Slots a message of `len` bytes takes.
pub(super) const fn slots_for(len: usize) -> usize {
    if len <= FIRST {
        1
    } else {
        1 + (len - FIRST).div_ceil(NEXT)
    }
}

/// One cache line of a ring.
#[repr(align(64))]
pub(super) struct Slot(pub(super) [AtomicU64; 8]);

/// Keeps the receiver's read position off the lines the sender writes.
#[repr(align(128))]
pub(super) struct Padded(pub(super) AtomicU64);

/// The ring of one (sender, receiver) pair. Positions count slots from 0 and never wrap; a
/// header holds its position + 1, so no stale line (an older lap's header, a continuation
/// slot, zeroed memory) can pass for the message the receiver expects. Both ends hold the
/// slots' pointer and length themselves, so reaching a slot costs no extra cache line (in a
/// large job, the lines of a ring not used for a while are cold).
#[derive(Clone)]
pub(super) struct Ring {
    pub(super) slots: Arc<[Slot]>,
    /// How far the receiver has read (published once per poll).
    pub(super) tail: Arc<Padded>,
}

impl Ring {
    pub(super) fn new(slots: usize) -> Ring {
        Ring {
            slots: (0..slots).map(|_| Slot(Default::default())).collect(),
            tail: Arc::new(Padded(AtomicU64::new(0))),
        }
    }

    pub(super) fn slot(&self, pos: u64) -> &Slot {
        &self.slots[(pos as usize) & (self.slots.len() - 1)]
    }
}

/// Writes `bytes` into `ring` at `head` and publishes it (the header word last).
pub(super) fn write_message(ring: &Ring, head: u64, bytes: &[u8]) {
    let first = ring.slot(head);
    let (lead, rest) = bytes.split_at(bytes.len().min(FIRST));
    for (k, chunk) in rest.chunks(NEXT).enumerate() {
        let slot = ring.slot(head + 1 + k as u64);
        slot.0[0].store(0, Ordering::Relaxed);
        store_words(&slot.0[1..], chunk);
    }
    store_words(&first.0[1..], lead);
    first.0[0].store(header(head, bytes.len() as u64), Ordering::Release);
}

/// Copies `bytes` into consecutive words (little-endian, the last one zero-padded).
pub(super) fn store_words(words: &[AtomicU64], bytes: &[u8]) {
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
pub(super) fn load_words(words: &[AtomicU64], out: &mut [u8]) {
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
