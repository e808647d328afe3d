//! The 64-byte header in front of every datagram (little-endian):
//! `magic u32 | version u8 | kind u8 | payload len u16 | job u64 | from u32 | to u32 |
//!  seq u64 | ack u64 | sack u64 | tag [u8; 16]`, and the MAC seal over it.
//!
//! The `ack` field holds the cumulative ACK in its low 48 bits and, in its top 16, how long the
//! sender held it, in µs (`Header::hold`, RFC 9002's `ack_delay`): the peer takes that out
//! of its round-trip sample. Sequence numbers stay below 2^48 (`MAX_SEQ`).
//!
//! With a job key `tag` is the keyed MAC ([`super::auth`]) of the header's first 48 bytes and
//! the payload; without one it is zero and ignored.

use super::auth;
use crate::transport::MAX_PAYLOAD;

/// "FTCU" (ftcoll UDP), first field of every datagram.
pub const MAGIC: u32 = 0x5543_5446;
/// Version of this transport's header (2: the MAC tag; 3: the ACK's hold in the `ack` field).
pub const VERSION: u8 = 3;
/// Sequence numbers and cumulative ACKs are below this (the `ack` field's top 16 bits are the
/// hold); 2^48 datagrams to one peer is years at millions a second.
pub const MAX_SEQ: u64 = 1 << 48;
/// Bytes of the header in front of every payload.
pub const HEADER_LEN: usize = 64;
/// Offset of the MAC tag in the header (the fields before it and the payload are covered).
pub const TAG_AT: usize = HEADER_LEN - auth::TAG_LEN;
/// The largest datagram sent (1264 bytes: fits a 1500-byte MTU).
pub const MAX_DATAGRAM: usize = HEADER_LEN + MAX_PAYLOAD;

/// A datagram carrying a payload (and an acknowledgement).
pub(crate) const KIND_DATA: u8 = 1;
/// A datagram carrying only an acknowledgement. Its `seq` is 0, or `s + 1` when the sender
/// received DATA `s` twice (a duplicate-SACK, RFC 2883's report: the peer's retransmission of
/// `s` was spurious, see `reliable/receive.rs`).
pub(crate) const KIND_ACK: u8 = 2;
/// "You are suspected": the sender has cut the destination off; a destination that has not
/// suspected the sender stops (fail-stop enforcement). No payload; `seq`, `ack`, `sack` 0.
pub(crate) const KIND_FENCE: u8 = 3;
/// An acknowledgement that asks for one back at once (the probe an ICMP hint triggers).
/// `seq` numbers it (each PROBE's bytes are new; see `reliable/suspect.rs`).
pub(crate) const KIND_PROBE: u8 = 4;

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub kind: u8,
    pub len: u16,
    pub job: u64,
    pub from: u32,
    pub to: u32,
    pub seq: u64,
    /// The cumulative ACK, below [`MAX_SEQ`].
    pub ack: u64,
    /// How long the sender held this ACK before it left, µs (saturated at `u16::MAX`): since
    /// the DATA just below `ack` arrived.
    pub hold: u16,
    pub sack: u64,
}

#[inline]
fn le_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

#[inline]
fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

#[inline]
fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

impl Header {
    /// Writes the header into `out[..HEADER_LEN]` (`out` is at least that long).
    #[inline]
    pub fn write(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4] = VERSION;
        out[5] = self.kind;
        out[6..8].copy_from_slice(&self.len.to_le_bytes());
        out[8..16].copy_from_slice(&self.job.to_le_bytes());
        out[16..20].copy_from_slice(&self.from.to_le_bytes());
        out[20..24].copy_from_slice(&self.to.to_le_bytes());
        out[24..32].copy_from_slice(&self.seq.to_le_bytes());
        write_ack_fields(out, self.ack, self.hold, self.sack);
    }

    /// Decodes and checks what needs no state: magic, version, kind, lengths.
    #[inline]
    pub fn read(d: &[u8]) -> Option<Header> {
        if d.len() < HEADER_LEN || d.len() > MAX_DATAGRAM {
            return None;
        }
        if le_u32(d, 0)? != MAGIC || d[4] != VERSION {
            return None;
        }
        let ack = le_u64(d, 32)?;
        let h = Header {
            kind: d[5],
            len: le_u16(d, 6)?,
            job: le_u64(d, 8)?,
            from: le_u32(d, 16)?,
            to: le_u32(d, 20)?,
            seq: le_u64(d, 24)?,
            ack: ack & (MAX_SEQ - 1),
            hold: (ack >> 48) as u16,
            sack: le_u64(d, 40)?,
        };
        if h.seq >= MAX_SEQ {
            return None;
        }
        let ok = match h.kind {
            KIND_DATA => usize::from(h.len) == d.len() - HEADER_LEN,
            KIND_ACK => h.len == 0 && d.len() == HEADER_LEN,
            KIND_PROBE => h.len == 0 && d.len() == HEADER_LEN,
            KIND_FENCE => h.len == 0 && h.seq == 0 && h.ack == 0 && h.hold == 0 && h.sack == 0 && d.len() == HEADER_LEN,
            _ => false,
        };
        ok.then_some(h)
    }
}

/// Writes the MAC tag of a whole datagram (`d.len() >= HEADER_LEN`) into its header (zero
/// without a key).
#[inline]
pub fn seal(key: Option<&auth::AuthKey>, d: &mut [u8]) {
    // The one MAC framing (wire/mac.rs): the tag slot ends the header, `TAG_AT + TAG_LEN ==
    // HEADER_LEN`, and covers every other byte of the datagram.
    crate::wire::mac::seal_at(key, d, TAG_AT);
}

/// Whether the MAC tag of a whole datagram (`d.len() >= HEADER_LEN`) verifies under `key`.
#[inline]
pub(crate) fn verify(key: &auth::AuthKey, d: &[u8]) -> bool {
    crate::wire::mac::verify_at(key, d, TAG_AT)
}

/// Rewrites the acknowledgement fields of a header (piggybacking on a retransmission).
#[inline]
pub(crate) fn write_ack_fields(out: &mut [u8], ack: u64, hold: u16, sack: u64) {
    debug_assert!(ack < MAX_SEQ);
    let ack = (ack & (MAX_SEQ - 1)) | u64::from(hold) << 48;
    out[32..40].copy_from_slice(&ack.to_le_bytes());
    out[40..48].copy_from_slice(&sack.to_le_bytes());
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn data_header(job: u64, from: u32, to: u32, seq: u64, ack: u64, len: u16) -> Header {
        Header {
            kind: KIND_DATA,
            len,
            job,
            from,
            to,
            seq,
            ack,
            hold: 0,
            sack: 0,
        }
    }

    pub(crate) fn datagram(h: Header, payload: &[u8]) -> Vec<u8> {
        let mut d = vec![0u8; HEADER_LEN + payload.len()];
        h.write(&mut d);
        d[HEADER_LEN..].copy_from_slice(payload);
        d
    }

    #[test]
    fn header_roundtrip_and_stateless_checks() {
        let mut h = data_header(7, 1, 2, MAX_SEQ - 1, MAX_SEQ - 2, 3);
        h.sack = 0b1011;
        h.hold = u16::MAX;
        let d = datagram(h, b"abc");
        assert_eq!(Header::read(&d), Some(h));
        // A sequence number from 2^48 on is malformed; an ACK's top 16 bits are its hold.
        let mut bad = d.clone();
        bad[24..32].copy_from_slice(&MAX_SEQ.to_le_bytes());
        assert_eq!(Header::read(&bad), None, "seq");
        for cut in 0..d.len() {
            assert_eq!(Header::read(&d[..cut]), None, "truncated at {cut}");
        }
        let mut bad = d.clone();
        bad[0] ^= 1;
        assert_eq!(Header::read(&bad), None, "magic");
        let mut bad = d.clone();
        bad[4] = VERSION + 1;
        assert_eq!(Header::read(&bad), None, "version");
        let mut bad = d.clone();
        bad[5] = 9;
        assert_eq!(Header::read(&bad), None, "kind");
        let mut bad = d.clone();
        bad.push(0);
        assert_eq!(Header::read(&bad), None, "length");
        let ack = Header {
            kind: KIND_ACK,
            len: 0,
            seq: 0,
            ..h
        };
        assert_eq!(Header::read(&datagram(ack, &[])), Some(ack));
        assert_eq!(Header::read(&datagram(ack, b"x")), None, "ack with payload");
        assert_eq!(Header::read(&vec![0u8; MAX_DATAGRAM + 1]), None);
        let probe = Header {
            kind: KIND_PROBE,
            ..ack
        };
        assert_eq!(Header::read(&datagram(probe, &[])), Some(probe));
        let fence = Header {
            kind: KIND_FENCE,
            ack: 0,
            hold: 0,
            sack: 0,
            ..ack
        };
        assert_eq!(Header::read(&datagram(fence, &[])), Some(fence));
        assert_eq!(Header::read(&datagram(fence, b"x")), None, "fence with payload");
        assert_eq!(
            Header::read(&datagram(Header { ack: 1, ..fence }, &[])),
            None,
            "fence with ack"
        );
        assert_eq!(
            Header::read(&datagram(Header { sack: 1, ..fence }, &[])),
            None,
            "fence with sack"
        );
        assert_eq!(
            Header::read(&datagram(Header { hold: 1, ..fence }, &[])),
            None,
            "fence with a hold"
        );
        assert_eq!(
            Header::read(&datagram(Header { kind: 5, ..fence }, &[])),
            None,
            "kind 5"
        );
    }

    /// The wire bytes of each kind, field by field (version 3: those of version 2 but for
    /// the hold in the `ack` field's top 16 bits).
    #[test]
    fn golden_bytes_of_every_kind() {
        let h = |kind, len, seq, ack, sack| Header {
            kind,
            len,
            job: 0x0102_0304_0506_0708,
            from: 3,
            to: 5,
            seq,
            ack,
            hold: if kind == KIND_FENCE { 0 } else { 0x1234 },
            sack,
        };
        let mut want = vec![0x46, 0x54, 0x43, 0x55, 3];
        let tail = |kind: u8, len: [u8; 2], seq: u64, ack: u64, sack: u64| {
            let mut v = vec![kind];
            v.extend_from_slice(&len);
            v.extend_from_slice(&[8, 7, 6, 5, 4, 3, 2, 1, 3, 0, 0, 0, 5, 0, 0, 0]);
            v.extend_from_slice(&seq.to_le_bytes());
            // The ACK in the low six bytes, the hold (0x1234 µs) in the top two.
            let mut a = ack.to_le_bytes();
            if kind != KIND_FENCE {
                (a[6], a[7]) = (0x34, 0x12);
            }
            v.extend_from_slice(&a);
            v.extend_from_slice(&sack.to_le_bytes());
            v.extend_from_slice(&[0; 16]);
            v
        };
        for (kind, len, seq, ack, sack, payload) in [
            (KIND_DATA, 2u16, 9u64, 4u64, 0b101u64, &b"hi"[..]),
            (KIND_ACK, 0, 0, 4, 0b101, &[][..]),
            (KIND_FENCE, 0, 0, 0, 0, &[][..]),
            (KIND_PROBE, 0, 0, 4, 0b101, &[][..]),
        ] {
            let d = datagram(h(kind, len, seq, ack, sack), payload);
            want.truncate(5);
            want.extend(tail(kind, len.to_le_bytes(), seq, ack, sack));
            want.extend_from_slice(payload);
            assert_eq!(d, want, "kind {kind}");
            assert_eq!((KIND_DATA, KIND_ACK, KIND_FENCE, KIND_PROBE), (1, 2, 3, 4));
        }
    }
}
