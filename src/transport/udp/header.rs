//! The 64-byte header in front of every datagram (little-endian):
//! `magic u32 | version u8 | kind u8 | payload len u16 | job u64 | from u32 | to u32 |
//!  seq u64 | ack u64 | sack u64 | tag [u8; 16]`, and the MAC seal over it.
//!
//! With a job key `tag` is the keyed MAC ([`super::auth`]) of the header's first 48 bytes and
//! the payload; without one it is zero and ignored.

use super::auth;
use crate::transport::MAX_PAYLOAD;

/// "FTCU" (ftcoll UDP), first field of every datagram.
pub const MAGIC: u32 = 0x5543_5446;
/// Version of this transport's header (2: the MAC tag).
pub const VERSION: u8 = 2;
/// Bytes of the header in front of every payload.
pub const HEADER_LEN: usize = 64;
/// Offset of the MAC tag in the header (the fields before it and the payload are covered).
pub const TAG_AT: usize = HEADER_LEN - auth::TAG_LEN;
/// The largest datagram sent (1264 bytes: fits a 1500-byte MTU).
pub const MAX_DATAGRAM: usize = HEADER_LEN + MAX_PAYLOAD;

/// A datagram carrying a payload (and an acknowledgement).
pub(crate) const KIND_DATA: u8 = 1;
/// A datagram carrying only an acknowledgement.
pub(crate) const KIND_ACK: u8 = 2;

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub kind: u8,
    pub len: u16,
    pub job: u64,
    pub from: u32,
    pub to: u32,
    pub seq: u64,
    pub ack: u64,
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
        write_ack_fields(out, self.ack, self.sack);
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
        let h = Header {
            kind: d[5],
            len: le_u16(d, 6)?,
            job: le_u64(d, 8)?,
            from: le_u32(d, 16)?,
            to: le_u32(d, 20)?,
            seq: le_u64(d, 24)?,
            ack: le_u64(d, 32)?,
            sack: le_u64(d, 40)?,
        };
        let ok = match h.kind {
            KIND_DATA => usize::from(h.len) == d.len() - HEADER_LEN,
            KIND_ACK => h.len == 0 && h.seq == 0 && d.len() == HEADER_LEN,
            _ => false,
        };
        ok.then_some(h)
    }
}

/// Writes the MAC tag of a whole datagram (`d.len() >= HEADER_LEN`) into its header (zero
/// without a key).
#[inline]
pub fn seal(key: Option<&auth::AuthKey>, d: &mut [u8]) {
    let tag = match key {
        Some(k) => k.tag(&[&d[..TAG_AT], &d[HEADER_LEN..]]),
        None => [0; auth::TAG_LEN],
    };
    d[TAG_AT..HEADER_LEN].copy_from_slice(&tag);
}

/// Whether the MAC tag of a whole datagram (`d.len() >= HEADER_LEN`) verifies under `key`.
#[inline]
pub(crate) fn verify(key: &auth::AuthKey, d: &[u8]) -> bool {
    key.verify(&[&d[..TAG_AT], &d[HEADER_LEN..]], &d[TAG_AT..HEADER_LEN])
}

/// Rewrites the acknowledgement fields of a header (piggybacking on a retransmission).
#[inline]
pub(crate) fn write_ack_fields(out: &mut [u8], ack: u64, sack: u64) {
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
        let mut h = data_header(7, 1, 2, u64::MAX - 1, 42, 3);
        h.sack = 0b1011;
        let d = datagram(h, b"abc");
        assert_eq!(Header::read(&d), Some(h));
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
    }
}
