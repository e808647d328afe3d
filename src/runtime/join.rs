//! Rendezvous through rank 0 (`--join ADDR`): the address table and the run's parameters as
//! the coordinator hands them out, in datagrams of at most [`PER_DATAGRAM`] entries.
//!
//! A node knows only the coordinator's address; it sends [`crate::runtime::control::Msg::Join`]
//! with its own data address until it holds the whole table. The coordinator answers once every
//! rank has joined. Every field is checked on decode; anything else is dropped by the caller.

use std::net::SocketAddr;

use crate::runtime::control::{addr_from_bytes, addr_to_bytes};

const MAGIC: [u8; 4] = *b"FTCT";
const VERSION: u8 = 1;
const HEADER: usize = 56;
const ENTRY: usize = 19;
/// Table entries per datagram (keeps datagrams under 1200 bytes).
pub const PER_DATAGRAM: usize = 56;

/// What every node of a joined run must agree on, decided by the coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobParams {
    /// The protocols' time unit (LogP `o`), ns.
    pub o_ns: u64,
    /// LogP `L`, ns.
    pub l_ns: u64,
    /// The common clock epoch, ns since the Unix epoch (refined per node by ping-pong).
    pub epoch_unix_ns: u64,
}

/// Is this datagram a table chunk (so a node that has its table can ignore late copies)?
pub fn is_table(buf: &[u8]) -> bool {
    buf.len() >= 4 && buf[..4] == MAGIC
}

/// Encodes entries `first..first + addrs.len()` of an `n`-rank table for `job`.
pub fn encode(job: u64, n: u32, first: u32, addrs: &[SocketAddr], p: &JobParams) -> Vec<u8> {
    assert!(addrs.len() <= PER_DATAGRAM);
    let mut o = Vec::with_capacity(HEADER + ENTRY * addrs.len());
    o.extend_from_slice(&MAGIC);
    o.extend_from_slice(&[VERSION, 0, 0, 0]);
    o.extend_from_slice(&job.to_le_bytes());
    o.extend_from_slice(&n.to_le_bytes());
    o.extend_from_slice(&first.to_le_bytes());
    o.extend_from_slice(&(addrs.len() as u32).to_le_bytes());
    o.extend_from_slice(&0u32.to_le_bytes());
    o.extend_from_slice(&p.o_ns.to_le_bytes());
    o.extend_from_slice(&p.l_ns.to_le_bytes());
    o.extend_from_slice(&p.epoch_unix_ns.to_le_bytes());
    for a in addrs {
        o.extend_from_slice(&addr_to_bytes(a));
    }
    o
}

/// A decoded chunk: `(first rank, addresses, parameters)`.
pub type Chunk = (u32, Vec<SocketAddr>, JobParams);

/// Decodes a chunk of `job`'s `n`-rank table; `None` for anything malformed or foreign.
pub fn decode(buf: &[u8], job: u64, n: u32) -> Option<Chunk> {
    if buf.len() < HEADER || !is_table(buf) || buf[4] != VERSION || buf[5..8] != [0, 0, 0] {
        return None;
    }
    let u32_at = |i: usize| u32::from_le_bytes(buf[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().expect("8 bytes"));
    let (first, count) = (u32_at(20), u32_at(24) as usize);
    if u64_at(8) != job || u32_at(16) != n || u32_at(28) != 0 || count == 0 || count > PER_DATAGRAM {
        return None;
    }
    if buf.len() != HEADER + ENTRY * count || u64::from(first) + count as u64 > u64::from(n) {
        return None;
    }
    let p = JobParams {
        o_ns: u64_at(32),
        l_ns: u64_at(40),
        epoch_unix_ns: u64_at(48),
    };
    if p.o_ns == 0 {
        return None;
    }
    let addrs = buf[HEADER..]
        .chunks_exact(ENTRY)
        .map(|e| addr_from_bytes(e.try_into().expect("entry size")))
        .collect::<Option<Vec<_>>>()?;
    Some((first, addrs, p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_round_trip_and_garbage_is_refused() {
        let addrs: Vec<SocketAddr> = vec!["10.0.0.1:5000".parse().unwrap(), "[fe80::1]:7".parse().unwrap()];
        let p = JobParams {
            o_ns: 1000,
            l_ns: 2500,
            epoch_unix_ns: 42,
        };
        let b = encode(9, 5, 3, &addrs, &p);
        assert_eq!(decode(&b, 9, 5), Some((3, addrs.clone(), p)));
        assert_eq!(decode(&b, 8, 5), None, "foreign job");
        assert_eq!(decode(&b, 9, 4), None, "past the table's end");
        assert_eq!(decode(&b[..b.len() - 1], 9, 5), None, "truncated");
        let mut family = b.clone();
        family[HEADER] = 9;
        assert_eq!(decode(&family, 9, 5), None, "unknown address family");
        for i in 0..HEADER {
            let mut c = b.clone();
            c[i] ^= 0x80;
            let d = decode(&c, 9, 5);
            // Flipping a bit either breaks the datagram or changes only a parameter/rank.
            if let Some((first, a, q)) = d {
                assert!(first != 3 || q != p || a != addrs, "byte {i} changed nothing");
            }
        }
    }
}
