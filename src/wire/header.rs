//! The fixed datagram header: every field little-endian, every field checked on decode.
//!
//! ```text
//! offset size field
//!  0     4    magic "FTCL"
//!  4     1    version (2)
//!  5     1    kind (see wire::kind)
//!  6     2    flags (0)
//!  8     8    job id
//! 16     8    operation sequence  } operation id (docs/architecture.md, decision 5)
//! 24     4    operation root      }
//! 28     4    sender rank
//! 32     2    body length
//! 34     2    payload length
//! 36          body, then payload
//! ```

use super::DecodeError;
use super::codec::{Reader, Writer};
use super::kind;

/// The first four bytes of every datagram.
pub const MAGIC: [u8; 4] = *b"FTCL";
/// The wire format's version.
/// 2 since 2026-11-28: an ERA RESULT_REQUEST carries the requester's known-dead set
/// (`wire::agree`); a build that reads version 1 would take it as malformed.
pub const VERSION: u8 = 2;
/// Bytes of the header.
pub const HEADER_LEN: usize = 36;

/// A decoded header. Ranks are physical; `(root, seq)` names the operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// The message type (`WireMessage::KIND`).
    pub kind: u8,
    /// The job the datagram belongs to: datagrams of other jobs are foreign.
    pub job: u64,
    /// Physical rank of the operation's root.
    pub root: u32,
    /// The root's sequence number of the operation.
    pub seq: u64,
    /// Physical rank of the sender.
    pub sender: u32,
    /// Bytes of the protocol message body after the header.
    pub body_len: u16,
    /// Bytes of the user payload after the body.
    pub payload_len: u16,
}

impl Header {
    /// Writes the header into `out`; returns [`HEADER_LEN`], or 0 (nothing written) if `out`
    /// is shorter.
    pub fn encode(&self, out: &mut [u8]) -> usize {
        let Some(out) = out.get_mut(..HEADER_LEN) else {
            return 0;
        };
        let mut w = Writer::new(out);
        w.bytes(&MAGIC);
        w.u8(VERSION);
        w.u8(self.kind);
        w.u16(0);
        w.u64(self.job);
        w.u64(self.seq);
        w.u32(self.root);
        w.u32(self.sender);
        w.u16(self.body_len);
        w.u16(self.payload_len);
        w.len()
    }

    /// Validates magic, version, flags, kind (some known message type), `job ==
    /// expected_job`, `root < n`, `sender < n`, and that `HEADER_LEN + body_len + payload_len
    /// == datagram.len()`. Returns the header and the (body, payload) slices.
    pub fn decode(datagram: &[u8], expected_job: u64, n: u32) -> Result<(Header, &[u8], &[u8]), DecodeError> {
        let (head, rest) = datagram.split_at_checked(HEADER_LEN).ok_or(DecodeError::TooShort)?;
        let mut r = Reader::new(head);
        let magic = [r.u8()?, r.u8()?, r.u8()?, r.u8()?];
        if magic != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        if r.u8()? != VERSION {
            return Err(DecodeError::BadVersion);
        }
        let kind = r.u8()?;
        if r.u16()? != 0 {
            return Err(DecodeError::BadFlags);
        }
        if !kind::is_known(kind) {
            return Err(DecodeError::UnknownKind);
        }
        let job = r.u64()?;
        if job != expected_job {
            return Err(DecodeError::ForeignJob);
        }
        let seq = r.u64()?;
        let root = r.rank(n)?;
        let sender = r.rank(n)?;
        let body_len = r.u16()?;
        let payload_len = r.u16()?;
        r.finish()?;
        if rest.len() != usize::from(body_len) + usize::from(payload_len) {
            return Err(DecodeError::LengthMismatch);
        }
        let (body, payload) = rest
            .split_at_checked(usize::from(body_len))
            .ok_or(DecodeError::LengthMismatch)?;
        let h = Header {
            kind,
            job,
            root,
            seq,
            sender,
            body_len,
            payload_len,
        };
        Ok((h, body, payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: u64 = 0x0123_4567_89AB_CDEF;
    const N: u32 = 8;

    fn header() -> Header {
        Header {
            kind: kind::BFB,
            job: JOB,
            root: 3,
            seq: 0xFEDC_BA98_7654_3210,
            sender: 7,
            body_len: 2,
            payload_len: 3,
        }
    }

    fn datagram() -> Vec<u8> {
        let mut d = vec![0u8; HEADER_LEN + 5];
        assert_eq!(header().encode(&mut d), HEADER_LEN);
        d[HEADER_LEN..].copy_from_slice(&[1, 2, 10, 11, 12]);
        d
    }

    fn decode(d: &[u8]) -> Result<Header, DecodeError> {
        Header::decode(d, JOB, N).map(|(h, _, _)| h)
    }

    #[test]
    fn header_round_trip_and_layout() {
        let d = datagram();
        let (h, body, payload) = Header::decode(&d, JOB, N).unwrap();
        assert_eq!(h, header());
        assert_eq!(body, [1, 2]);
        assert_eq!(payload, [10, 11, 12]);
        assert_eq!(&d[..4], b"FTCL");
        assert_eq!(d[4], VERSION);
        assert_eq!(d[5], kind::BFB);
        assert_eq!(&d[6..8], [0, 0]);
        assert_eq!(d[8..16], JOB.to_le_bytes());
        assert_eq!(d[16..24], header().seq.to_le_bytes());
        assert_eq!(d[24..28], 3u32.to_le_bytes());
        assert_eq!(d[28..32], 7u32.to_le_bytes());
        assert_eq!(d[32..34], 2u16.to_le_bytes());
        assert_eq!(d[34..36], 3u16.to_le_bytes());
    }

    #[test]
    fn header_encode_into_short_buffer_writes_nothing() {
        let mut out = [0xAAu8; HEADER_LEN - 1];
        assert_eq!(header().encode(&mut out), 0);
        assert!(out.iter().all(|&b| b == 0xAA));
    }

    #[test]
    fn header_too_short_at_every_length() {
        let d = datagram();
        for len in 0..HEADER_LEN {
            assert_eq!(decode(&d[..len]), Err(DecodeError::TooShort), "len {len}");
        }
    }

    #[test]
    fn header_bad_magic_in_every_byte() {
        for i in 0..4 {
            let mut d = datagram();
            d[i] ^= 0x20;
            assert_eq!(decode(&d), Err(DecodeError::BadMagic), "byte {i}");
        }
    }

    #[test]
    fn header_bad_version() {
        // 1: the layout before an ERA request carried its known-dead set.
        for v in [0, 1, VERSION + 1, 0xFF] {
            let mut d = datagram();
            d[4] = v;
            assert_eq!(decode(&d), Err(DecodeError::BadVersion));
        }
    }

    #[test]
    fn header_unknown_kind() {
        for k in [0, 0x0C, 0x0F, 0x40, 0x80, 0xFF] {
            let mut d = datagram();
            d[5] = k;
            assert_eq!(decode(&d), Err(DecodeError::UnknownKind), "kind {k:#x}");
        }
    }

    #[test]
    fn header_bad_flags_in_every_bit() {
        for bit in 0..16 {
            let mut d = datagram();
            d[6 + bit / 8] |= 1 << (bit % 8);
            assert_eq!(decode(&d), Err(DecodeError::BadFlags), "bit {bit}");
        }
    }

    #[test]
    fn header_foreign_job_in_every_byte() {
        for i in 8..16 {
            let mut d = datagram();
            d[i] ^= 1;
            assert_eq!(decode(&d), Err(DecodeError::ForeignJob), "byte {i}");
        }
    }

    #[test]
    fn header_root_and_sender_out_of_range() {
        for off in [24, 28] {
            for r in [N, N + 1, u32::MAX] {
                let mut d = datagram();
                d[off..off + 4].copy_from_slice(&r.to_le_bytes());
                assert_eq!(decode(&d), Err(DecodeError::RankOutOfRange), "offset {off} rank {r}");
            }
            let mut d = datagram();
            d[off..off + 4].copy_from_slice(&(N - 1).to_le_bytes());
            assert!(decode(&d).is_ok());
        }
        assert_eq!(decode_n0(&datagram()), Err(DecodeError::RankOutOfRange));
    }

    fn decode_n0(d: &[u8]) -> Result<Header, DecodeError> {
        Header::decode(d, JOB, 0).map(|(h, _, _)| h)
    }

    #[test]
    fn header_any_sequence_is_accepted() {
        for s in [0, 1, u64::MAX] {
            let mut d = datagram();
            d[16..24].copy_from_slice(&s.to_le_bytes());
            assert_eq!(decode(&d).map(|h| h.seq), Ok(s));
        }
    }

    #[test]
    fn header_length_mismatch() {
        let d = datagram();
        // Truncated body or payload, and trailing bytes.
        for len in HEADER_LEN..d.len() {
            assert_eq!(decode(&d[..len]), Err(DecodeError::LengthMismatch), "len {len}");
        }
        let mut long = d.clone();
        long.push(0);
        assert_eq!(decode(&long), Err(DecodeError::LengthMismatch));
        // Each length field off by one either way, and at its maximum.
        for off in [32, 34] {
            for v in [1u16, 4, u16::MAX] {
                let mut bad = d.clone();
                let old = u16::from_le_bytes([bad[off], bad[off + 1]]);
                let v = if v == 1 {
                    old - 1
                } else if v == 4 {
                    old + 1
                } else {
                    v
                };
                bad[off..off + 2].copy_from_slice(&v.to_le_bytes());
                assert_eq!(decode(&bad), Err(DecodeError::LengthMismatch), "offset {off} value {v}");
            }
        }
        // Moving a byte from the body to the payload keeps the total: still a valid header.
        let mut moved = d.clone();
        moved[32..34].copy_from_slice(&1u16.to_le_bytes());
        moved[34..36].copy_from_slice(&4u16.to_le_bytes());
        let (_, body, payload) = Header::decode(&moved, JOB, N).unwrap();
        assert_eq!((body.len(), payload.len()), (1, 4));
    }
}
