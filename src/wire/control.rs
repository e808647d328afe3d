//! Control datagrams between a run's coordinator and its node processes: fixed [`LEN`]-byte
//! bodies (before the MAC tag, [`super::mac::sealed`]), validated field by field on decode
//! (magic, version, job, type, rank, reserved bytes, flags, exact length).
//!
//! Layout (little-endian): magic `FTCC`, version, type, 2 reserved zero bytes, job (8), rank
//! (4), 4 reserved zero bytes, then the message's slots: `seq` (8), `a` (8), `b` (8), `c`
//! (8), `d` (4), `flags` (4).

use std::net::SocketAddr;

use super::addr;
use super::codec::{Reader, Writer};

const MAGIC: [u8; 4] = *b"FTCC";
const VERSION: u8 = 1;
/// Bytes of every control datagram.
pub const LEN: usize = 64;

/// What a control datagram says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Msg {
    /// Child → parent: I am here (sent until the parent answers).
    Hello,
    /// Child → parent: my state for operation `seq`.
    Report {
        seq: u64,
        delivered_ns: u64,
        last_ns: u64,
        started_ns: u64,
        sent: u32,
        deliveries: u8,
        bad: u8,
        finished: bool,
        /// A message of the operation could not be sent (the node's deferred queue was full).
        dropped: bool,
    },
    /// Child → parent: I crashed (injected) during iteration `iter` (`u64::MAX`: at the start).
    Dead { iter: u64 },
    /// Parent → root: operations with `seq < allowed` may start.
    Allow { allowed: u64 },
    /// Parent → all: operations with `seq < retired` are over.
    Retire { retired: u64 },
    /// Parent → all: exit now.
    Stop,
    /// Child → parent: clock probe sent at the child's time `t1`.
    Ping { t1: u64 },
    /// Parent → child: the probe `t1` answered at the parent's time `t2`.
    Pong { t1: u64, t2: u64 },
    /// Child → parent: parent clock − child clock, and its uncertainty (half the best probe's
    /// round trip), both ns.
    Clock { offset: i64, uncertainty: u64 },
    /// Child → parent: my data (transport) address; asks for the address table. In a
    /// launched run this is the node's hello, sealed with the key of the coordinator's
    /// challenge (`runtime::control`). `shape`: the [`super::shape::GroupShape::fingerprint`]
    /// of what this member must share with its group (0: none stated), which the coordinator
    /// compares with its own.
    Join { addr: SocketAddr, shape: u64 },
    /// Child → parent (launched run): asks for the coordinator's challenge; `nonce` is the
    /// node's fresh nonce, which keys the answer.
    Knock { nonce: [u8; 16] },
    /// Parent → child (launched run): the coordinator's fresh challenge nonce and the run's
    /// nonce, sealed with a key over the node's knock nonce.
    Challenge { nonce: [u8; 16], run: [u8; 16] },
}

/// A 16-byte nonce as two little-endian slots.
fn halves(n: &[u8; 16]) -> (u64, u64) {
    let (lo, hi) = n.split_at(8);
    (
        u64::from_le_bytes(lo.try_into().expect("8 bytes")),
        u64::from_le_bytes(hi.try_into().expect("8 bytes")),
    )
}

/// The nonce of two slots written by [`halves`].
fn whole(a: u64, b: u64) -> [u8; 16] {
    let mut n = [0u8; 16];
    n[..8].copy_from_slice(&a.to_le_bytes());
    n[8..].copy_from_slice(&b.to_le_bytes());
    n
}

/// Encodes `m` from `rank` of `job`.
pub fn encode(job: u64, rank: u32, m: &Msg) -> [u8; LEN] {
    let (ty, seq, a, b, c, d, flags): (u8, u64, u64, u64, u64, u32, u32) = match *m {
        Msg::Hello => (1, 0, 0, 0, 0, 0, 0),
        Msg::Report {
            seq,
            delivered_ns,
            last_ns,
            started_ns,
            sent,
            deliveries,
            bad,
            finished,
            dropped,
        } => (
            2,
            seq,
            delivered_ns,
            last_ns,
            started_ns,
            sent,
            u32::from(finished) | u32::from(dropped) << 1 | u32::from(deliveries) << 8 | u32::from(bad) << 16,
        ),
        Msg::Dead { iter } => (3, iter, 0, 0, 0, 0, 0),
        Msg::Allow { allowed } => (4, allowed, 0, 0, 0, 0, 0),
        Msg::Retire { retired } => (5, retired, 0, 0, 0, 0, 0),
        Msg::Stop => (6, 0, 0, 0, 0, 0, 0),
        Msg::Ping { t1 } => (7, t1, 0, 0, 0, 0, 0),
        Msg::Pong { t1, t2 } => (8, t1, t2, 0, 0, 0, 0),
        Msg::Clock { offset, uncertainty } => (9, offset as u64, uncertainty, 0, 0, 0, 0),
        Msg::Join { addr, shape } => {
            let (hi, lo, fam) = addr::split(&addr);
            (10, u64::from(addr.port()), hi, lo, shape, 0, fam)
        }
        Msg::Knock { nonce } => {
            let (x, y) = halves(&nonce);
            (11, x, y, 0, 0, 0, 0)
        }
        Msg::Challenge { nonce, run } => {
            let ((x, y), (z, w)) = (halves(&nonce), halves(&run));
            (12, x, y, z, w, 0, 0)
        }
    };
    let mut o = [0u8; LEN];
    let mut w = Writer::new(&mut o);
    w.bytes(&MAGIC);
    w.u8(VERSION);
    w.u8(ty);
    w.u16(0);
    w.u64(job);
    w.u32(rank);
    w.u32(0);
    for v in [seq, a, b, c] {
        w.u64(v);
    }
    w.u32(d);
    w.u32(flags);
    debug_assert_eq!(w.len(), LEN);
    o
}

/// Decodes and validates a datagram of `job` from a rank below `n`: `(rank, message)`.
pub fn decode(buf: &[u8], job: u64, n: u32) -> Option<(u32, Msg)> {
    if buf.len() != LEN {
        return None;
    }
    let mut r = Reader::new(buf);
    let magic = [r.u8().ok()?, r.u8().ok()?, r.u8().ok()?, r.u8().ok()?];
    let (version, ty, reserved) = (r.u8().ok()?, r.u8().ok()?, r.u16().ok()?);
    if magic != MAGIC || version != VERSION || reserved != 0 || r.u64().ok()? != job {
        return None;
    }
    let rank = r.rank(n).ok()?;
    if r.u32().ok()? != 0 {
        return None;
    }
    let (seq, a, bb, c) = (r.u64().ok()?, r.u64().ok()?, r.u64().ok()?, r.u64().ok()?);
    let (d, flags) = (r.u32().ok()?, r.u32().ok()?);
    r.finish().ok()?;
    let m = match ty {
        1 => Msg::Hello,
        2 if flags >> 24 == 0 && flags & 0xFC == 0 => Msg::Report {
            seq,
            delivered_ns: a,
            last_ns: bb,
            started_ns: c,
            sent: d,
            deliveries: (flags >> 8) as u8,
            bad: (flags >> 16) as u8,
            finished: flags & 1 == 1,
            dropped: flags & 2 == 2,
        },
        3 => Msg::Dead { iter: seq },
        4 => Msg::Allow { allowed: seq },
        5 => Msg::Retire { retired: seq },
        6 => Msg::Stop,
        7 => Msg::Ping { t1: seq },
        8 => Msg::Pong { t1: seq, t2: a },
        9 => Msg::Clock {
            offset: seq as i64,
            uncertainty: a,
        },
        10 if d == 0 => Msg::Join {
            addr: addr::join(a, bb, flags, seq)?,
            shape: c,
        },
        11 if bb == 0 && c == 0 && d == 0 && flags == 0 => Msg::Knock { nonce: whole(seq, a) },
        12 if d == 0 && flags == 0 => Msg::Challenge {
            nonce: whole(seq, a),
            run: whole(bb, c),
        },
        _ => return None,
    };
    Some((rank, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        let msgs = [
            Msg::Hello,
            Msg::Report {
                seq: 7,
                delivered_ns: 1,
                last_ns: 2,
                started_ns: 3,
                sent: 4,
                deliveries: 1,
                bad: 2,
                finished: true,
                dropped: true,
            },
            Msg::Dead { iter: 9 },
            Msg::Allow { allowed: 3 },
            Msg::Retire { retired: 2 },
            Msg::Stop,
            Msg::Ping { t1: 11 },
            Msg::Pong { t1: 11, t2: 12 },
            Msg::Clock {
                offset: -5,
                uncertainty: 3,
            },
            Msg::Join {
                addr: "10.1.2.3:4567".parse().unwrap(),
                shape: 0,
            },
            Msg::Join {
                addr: "[2001:db8::7]:9".parse().unwrap(),
                shape: u64::MAX,
            },
            Msg::Knock { nonce: [0xA5; 16] },
            Msg::Challenge {
                nonce: *b"0123456789abcdef",
                run: *b"fedcba9876543210",
            },
        ];
        for m in msgs {
            let b = encode(5, 3, &m);
            assert_eq!(decode(&b, 5, 4), Some((3, m)));
            assert_eq!(decode(&b, 6, 4), None, "foreign job");
            assert_eq!(decode(&b, 5, 3), None, "rank out of range");
            assert_eq!(decode(&b[..LEN - 1], 5, 4), None, "truncated");
            for i in 0..8 {
                let mut c = b;
                c[i] ^= 0x40;
                assert_eq!(decode(&c, 5, 4), None, "byte {i}");
            }
        }
    }

    /// The bytes as this layout has always put them (job 0x1122334455667788, rank 3).
    #[test]
    fn golden_bytes() {
        let job = 0x1122_3344_5566_7788;
        let report = Msg::Report {
            seq: 7,
            delivered_ns: 1,
            last_ns: 2,
            started_ns: 3,
            sent: 4,
            deliveries: 1,
            bad: 2,
            finished: true,
            dropped: true,
        };
        let join = Msg::Join {
            addr: "10.1.2.3:4567".parse().unwrap(),
            shape: 0,
        };
        for (m, hex) in [
            (
                Msg::Hello,
                "46544343010100008877665544332211030000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
            ),
            (
                report,
                "46544343010200008877665544332211030000000000000007000000000000000100000000000000020000000000000003000000000000000400000003010200",
            ),
            (
                Msg::Clock {
                    offset: -5,
                    uncertainty: 3,
                },
                "465443430109000088776655443322110300000000000000fbffffffffffffff0300000000000000000000000000000000000000000000000000000000000000",
            ),
            (
                join,
                "46544343010a000088776655443322110300000000000000d71100000000000000000000000000000000ffff0a01020300000000000000000000000004000000",
            ),
        ] {
            assert_eq!(crate::wire::hex::encode(&encode(job, 3, &m)), hex, "{m:?}");
            assert_eq!(
                decode(&crate::wire::hex::decode::<LEN>(hex).unwrap(), job, 4),
                Some((3, m))
            );
        }
    }
}
