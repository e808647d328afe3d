//! Connection data one RC QP's owner gives its peer (QPN, LID, GID, PSN, and where the peer
//! writes our credits), in a fixed little-endian layout validated field by field: it arrives
//! through a bootstrap (rendezvous directory, coordinator relay, peer exchange or in-process)
//! and is never trusted. The text form of a rendezvous file is its hex ([`super::hex`]).
//!
//! Layout: magic `FTVB` (as a little-endian u32), version, MTU code, LID (2), job (8), from
//! (4), to (4), QPN (4), PSN (4), GID (16), credit address (8), credit rkey (4), ring slots
//! (4), slot length (4), 4 zero bytes.

use super::codec::{Reader, Writer};
use super::hex;

/// "FTVB".
pub const MAGIC: u32 = 0x4256_5446;
pub const VERSION: u8 = 1;
/// Encoded length.
pub const LEN: usize = 72;

/// Whether `code` is an `ibv_mtu` code (1..=5: 256 to 4096 bytes).
fn valid_mtu(code: u8) -> bool {
    (1..=5).contains(&code)
}

/// What rank `from` tells rank `to` about the QP `from` created for `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnInfo {
    pub job: u64,
    pub from: u32,
    pub to: u32,
    /// 24-bit QP number.
    pub qpn: u32,
    /// 24-bit initial packet sequence number of `from`'s send queue.
    pub psn: u32,
    /// InfiniBand LID (0 on RoCE).
    pub lid: u16,
    /// Port GID at the chosen index (all zero when no GID index is used).
    pub gid: [u8; 16],
    /// `ibv_mtu` code of `from`'s port.
    pub mtu: u8,
    /// Address and rkey of `from`'s credit word for `to` (RDMA WRITE target).
    pub credit_addr: u64,
    pub credit_rkey: u32,
    /// Receive slots `from` pre-posted for `to`, and their size in bytes.
    pub ring_slots: u32,
    pub slot_len: u32,
}

/// Why connection data was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnError {
    Length,
    Magic,
    Version,
    Job,
    Rank,
    Qpn,
    Psn,
    Mtu,
    Ring,
}

impl std::fmt::Display for ConnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConnError::Length => "wrong length",
            ConnError::Magic => "bad magic",
            ConnError::Version => "unknown version",
            ConnError::Job => "another job's data",
            ConnError::Rank => "ranks out of range or not addressed to us",
            ConnError::Qpn => "QP number not 24-bit or reserved",
            ConnError::Psn => "PSN not 24-bit",
            ConnError::Mtu => "invalid MTU code",
            ConnError::Ring => "receive ring of zero slots or slots smaller than a message",
        })
    }
}

impl ConnInfo {
    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        let mut w = Writer::new(&mut b);
        w.u32(MAGIC);
        w.u8(VERSION);
        w.u8(self.mtu);
        w.u16(self.lid);
        w.u64(self.job);
        w.u32(self.from);
        w.u32(self.to);
        w.u32(self.qpn);
        w.u32(self.psn);
        w.bytes(&self.gid);
        w.u64(self.credit_addr);
        w.u32(self.credit_rkey);
        w.u32(self.ring_slots);
        w.u32(self.slot_len);
        debug_assert_eq!(w.len(), LEN - 4);
        b
    }

    /// Decodes data meant for rank `me` of an `n`-rank job `job` whose messages are at most
    /// `max_msg` bytes.
    pub fn decode(b: &[u8], job: u64, me: u32, n: u32, max_msg: u32) -> Result<ConnInfo, ConnError> {
        if b.len() != LEN {
            return Err(ConnError::Length);
        }
        let mut r = Reader::new(b);
        let short = |_| ConnError::Length;
        if r.u32().map_err(short)? != MAGIC {
            return Err(ConnError::Magic);
        }
        if r.u8().map_err(short)? != VERSION {
            return Err(ConnError::Version);
        }
        let (mtu, lid) = (r.u8().map_err(short)?, r.u16().map_err(short)?);
        let (job_at, from, to) = (
            r.u64().map_err(short)?,
            r.u32().map_err(short)?,
            r.u32().map_err(short)?,
        );
        let (qpn, psn) = (r.u32().map_err(short)?, r.u32().map_err(short)?);
        let gid = r.array::<16>().map_err(short)?;
        let c = ConnInfo {
            mtu,
            lid,
            job: job_at,
            from,
            to,
            qpn,
            psn,
            gid,
            credit_addr: r.u64().map_err(short)?,
            credit_rkey: r.u32().map_err(short)?,
            ring_slots: r.u32().map_err(short)?,
            slot_len: r.u32().map_err(short)?,
        };
        // The last 4 bytes are padding, not checked (as ever).
        if c.job != job {
            return Err(ConnError::Job);
        }
        if c.to != me || c.from >= n || c.from == me {
            return Err(ConnError::Rank);
        }
        // QPs 0 and 1 are the special QPs (SMI, GSI).
        if c.qpn >= 1 << 24 || c.qpn < 2 {
            return Err(ConnError::Qpn);
        }
        if c.psn >= 1 << 24 {
            return Err(ConnError::Psn);
        }
        if !valid_mtu(c.mtu) {
            return Err(ConnError::Mtu);
        }
        if c.ring_slots == 0 || c.slot_len < max_msg {
            return Err(ConnError::Ring);
        }
        Ok(c)
    }

    /// Text form for a rendezvous file: lower-case hex.
    pub fn to_hex(&self) -> String {
        hex::encode(&self.encode())
    }

    /// Parses [`ConnInfo::to_hex`]; bad hex is a length error.
    pub fn from_hex(s: &str, job: u64, me: u32, n: u32, max_msg: u32) -> Result<ConnInfo, ConnError> {
        let b: [u8; LEN] = hex::decode(s.trim()).map_err(|_| ConnError::Length)?;
        Self::decode(&b, job, me, n, max_msg)
    }
}

/// Test data: a valid record from `from` to `to`, distinct per pair.
#[cfg(test)]
pub fn sample(job: u64, from: u32, to: u32) -> ConnInfo {
    ConnInfo {
        job,
        from,
        to,
        qpn: 0x100 + from * 64 + to,
        psn: (from * 1000 + to) & 0xff_ffff,
        lid: 1,
        gid: [from as u8; 16],
        mtu: 5,
        credit_addr: 0x1000 + u64::from(to) * 8,
        credit_rkey: 5,
        ring_slots: 16,
        slot_len: crate::transport::MAX_PAYLOAD as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ConnInfo {
        ConnInfo {
            job: 0xF7C0_0000_0000_0001,
            from: 3,
            to: 1,
            qpn: 0x00ab_cdef,
            psn: 0x0012_3456,
            lid: 0x1234,
            gid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            mtu: 5,
            credit_addr: 0x7fff_1234_5678_9abc,
            credit_rkey: 0xdead_beef,
            ring_slots: 512,
            slot_len: 1280,
        }
    }

    #[test]
    fn roundtrip_binary_and_hex() {
        let c = sample();
        assert_eq!(ConnInfo::decode(&c.encode(), c.job, 1, 4, 1200), Ok(c));
        assert_eq!(ConnInfo::from_hex(&c.to_hex(), c.job, 1, 4, 1200), Ok(c));
        assert_eq!(c.to_hex().len(), 2 * LEN);
    }

    #[test]
    fn every_field_is_validated() {
        let c = sample();
        let d = |c: ConnInfo| ConnInfo::decode(&c.encode(), sample().job, 1, 4, 1200);
        assert_eq!(
            ConnInfo::decode(&c.encode(), c.job + 1, 1, 4, 1200),
            Err(ConnError::Job)
        );
        assert_eq!(ConnInfo::decode(&c.encode(), c.job, 2, 4, 1200), Err(ConnError::Rank));
        assert_eq!(d(ConnInfo { from: 4, ..c }), Err(ConnError::Rank));
        assert_eq!(d(ConnInfo { from: 1, ..c }), Err(ConnError::Rank));
        assert_eq!(d(ConnInfo { qpn: 1 << 24, ..c }), Err(ConnError::Qpn));
        assert_eq!(d(ConnInfo { qpn: 1, ..c }), Err(ConnError::Qpn));
        assert_eq!(d(ConnInfo { psn: 1 << 24, ..c }), Err(ConnError::Psn));
        assert_eq!(d(ConnInfo { mtu: 0, ..c }), Err(ConnError::Mtu));
        assert_eq!(d(ConnInfo { mtu: 6, ..c }), Err(ConnError::Mtu));
        assert_eq!(d(ConnInfo { ring_slots: 0, ..c }), Err(ConnError::Ring));
        assert_eq!(d(ConnInfo { slot_len: 1199, ..c }), Err(ConnError::Ring));
        let mut b = c.encode();
        b[0] ^= 1;
        assert_eq!(ConnInfo::decode(&b, c.job, 1, 4, 1200), Err(ConnError::Magic));
        let mut b = c.encode();
        b[4] = 2;
        assert_eq!(ConnInfo::decode(&b, c.job, 1, 4, 1200), Err(ConnError::Version));
        assert_eq!(
            ConnInfo::decode(&b[..LEN - 1], c.job, 1, 4, 1200),
            Err(ConnError::Length)
        );
    }

    #[test]
    fn bad_hex_and_mutations_never_panic() {
        let c = sample();
        assert_eq!(ConnInfo::from_hex("zz", c.job, 1, 4, 1200), Err(ConnError::Length));
        let h = c.to_hex().replace('a', "g");
        assert_eq!(ConnInfo::from_hex(&h, c.job, 1, 4, 1200), Err(ConnError::Length));
        let mut h = c.to_hex();
        h.replace_range(0..2, "é");
        assert!(ConnInfo::from_hex(&h, c.job, 1, 4, 1200).is_err());
        // Every single-byte mutation either decodes to something valid or is refused.
        let b = c.encode();
        for i in 0..LEN {
            for x in [0u8, 1, 0x7f, 0xff] {
                let mut m = b;
                m[i] = x;
                if let Ok(d) = ConnInfo::decode(&m, c.job, 1, 4, 1200) {
                    assert!(d.qpn < 1 << 24 && d.psn < 1 << 24 && d.from < 4 && d.to == 1);
                }
            }
        }
    }

    /// Every byte is exactly two hex digits: a sign, a prefix or a space where a digit pair
    /// belongs (which `u8::from_str_radix` would take for "+f") is refused, wherever it is.
    #[test]
    fn signs_prefixes_and_spaces_in_the_hex_are_refused() {
        let c = sample();
        let h = c.to_hex();
        for bad in ["+f", "-0", "+0", " f", "f ", "0x", "0X", "\tf"] {
            for at in [0, 2, LEN, 2 * LEN - 2] {
                let mut m = h.clone();
                m.replace_range(at..at + 2, bad);
                assert_eq!(
                    ConnInfo::from_hex(&m, c.job, 1, 4, 1200),
                    Err(ConnError::Length),
                    "{bad:?} at {at}"
                );
            }
        }
        // "+5" for the MTU's "05" (the same value to a radix parser) is still refused.
        assert_eq!(&h[10..12], "05");
        let m = format!("{}+5{}", &h[..10], &h[12..]);
        assert_eq!(ConnInfo::from_hex(&m, c.job, 1, 4, 1200), Err(ConnError::Length));
        // Surrounding whitespace is trimmed (a file's newline), inner whitespace is not.
        assert_eq!(ConnInfo::from_hex(&format!(" {h}\n"), c.job, 1, 4, 1200), Ok(c));
    }

    /// The bytes as this layout has always put them.
    #[test]
    fn golden_bytes() {
        let c = super::sample(0xF7C0_0000_0000_0001, 3, 1);
        let hex = "4654564201050100010000000000c0f70300000001000000c1010000b90b00000303030303030303030303030303030308100000000000000500000010000000b004000000000000";
        assert_eq!(c.to_hex(), hex);
        assert_eq!(ConnInfo::from_hex(hex, c.job, 1, 4, 1200), Ok(c));
    }
}
