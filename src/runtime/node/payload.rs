//! What a broadcast carries: the bytes an operation's root sends, the check a receiver makes
//! of the bytes that arrive, and the hand-over to the user at delivery.
//!
//! The node keeps one copy of an operation's payload: the root's from its [`Payloads`]
//! source, every other node's from the first datagram of the operation it admits; the
//! messages it sends for the operation carry that copy, so a relay forwards what it received.

/// The user side of a broadcast node.
pub trait Payloads: Send {
    /// The payload of operation `seq`, started at this node (its root), written into `out`
    /// (empty on entry). Called once per operation.
    fn source(&mut self, seq: u64, out: &mut Vec<u8>);
    /// Does this node accept `bytes`, received in a datagram of operation `seq`? A refused
    /// datagram is dropped and counted as a corrupted payload.
    fn admit(&mut self, seq: u64, bytes: &[u8]) -> bool;
    /// This node delivered operation `(root, seq)`, whose payload is `bytes` (exactly once
    /// per operation, the root included).
    fn deliver(&mut self, root: u32, seq: u64, bytes: &[u8]);
    /// The longest payload [`Payloads::source`] writes, if known (`None`: unknown): a group's
    /// stream refuses one longer than its broadcasts carry before it starts, as a broadcast
    /// of too many bytes is refused, instead of running until every operation timed out.
    fn max_len(&self) -> Option<usize> {
        None
    }
    /// A valid datagram of operation `seq` named root `heard` where this node knows `named`
    /// (where roots are learned, [`crate::runtime::board::Control::learn_roots`]: named by
    /// its caller, or learned from an earlier datagram of the operation): the callers named
    /// different roots for one operation. The datagram is dropped and counted
    /// ([`super::NodeStats::wrong_root`]); this hook lets the caller hear of it.
    fn wrong_root(&mut self, seq: u64, named: u32, heard: u32) {
        let _ = (seq, named, heard);
    }
}

/// The payload byte `i` of operation `seq` (checked at every receiver).
pub fn payload_byte(seq: u64, i: usize) -> u8 {
    (seq as u8).wrapping_mul(31).wrapping_add(i as u8).wrapping_add(7)
}

/// The benchmark's payloads: `len` bytes made up from the sequence number
/// ([`payload_byte`]), checked byte for byte at every receiver, delivered to nobody.
#[derive(Clone, Copy, Debug)]
pub struct Generated {
    len: usize,
}

impl Generated {
    /// Payloads of `len` bytes (at most [`crate::transport::MAX_PAYLOAD`] are sent).
    pub fn new(len: usize) -> Self {
        Self { len }
    }
}

impl Payloads for Generated {
    fn source(&mut self, seq: u64, out: &mut Vec<u8>) {
        let len = self.len.min(crate::transport::MAX_PAYLOAD);
        out.extend((0..len).map(|i| payload_byte(seq, i)));
    }

    fn admit(&mut self, seq: u64, bytes: &[u8]) -> bool {
        bytes.len() == self.len && bytes.iter().enumerate().all(|(i, &b)| b == payload_byte(seq, i))
    }

    fn deliver(&mut self, _root: u32, _seq: u64, _bytes: &[u8]) {}

    fn max_len(&self) -> Option<usize> {
        Some(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_payloads_admit_their_own_bytes_only() {
        let mut g = Generated::new(5);
        let mut p = Vec::new();
        g.source(3, &mut p);
        assert_eq!(p.len(), 5);
        assert!(g.admit(3, &p));
        assert!(!g.admit(4, &p), "another operation's bytes");
        assert!(!g.admit(3, &p[..4]), "too short");
        p[2] ^= 1;
        assert!(!g.admit(3, &p), "a flipped bit");
    }
}
