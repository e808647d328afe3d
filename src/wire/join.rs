//! The address table and the run's parameters as a coordinator hands them out to the nodes
//! that joined it (rendezvous through rank 0), in datagrams of at most [`PER_DATAGRAM`]
//! entries. A node asks with a control `Join` ([`super::control::Msg::Join`]).
//!
//! Layout (little-endian): magic `FTCT`, version, 3 reserved zero bytes, job (8), `n` (4),
//! first rank (4), count (4), 4 reserved zero bytes, `o` ns (8), `L` ns (8), epoch ns (8),
//! the run's nonce (16), then `count` addresses of [`super::addr::LEN`] bytes. Every field is
//! checked on decode.

use std::net::SocketAddr;

use super::addr;
use super::codec::{Reader, Writer};

const MAGIC: [u8; 4] = *b"FTCT";
const VERSION: u8 = 2;
const HEADER: usize = 72;
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
    /// The run's nonce, fresh per run: every node keys the run's datagrams with the session
    /// key it derives from the job key ([`AuthKey::session`](super::mac::AuthKey)).
    pub run: [u8; 16],
}

/// Is this datagram a table chunk (so a node that has its table can ignore late copies)?
pub fn is_table(buf: &[u8]) -> bool {
    buf.starts_with(&MAGIC)
}

/// Encodes entries `first..first + addrs.len()` of an `n`-rank table for `job`.
pub fn encode(job: u64, n: u32, first: u32, addrs: &[SocketAddr], p: &JobParams) -> Vec<u8> {
    assert!(addrs.len() <= PER_DATAGRAM);
    let mut o = vec![0u8; HEADER + addr::LEN * addrs.len()];
    let mut w = Writer::new(&mut o);
    w.bytes(&MAGIC);
    w.bytes(&[VERSION, 0, 0, 0]);
    w.u64(job);
    w.u32(n);
    w.u32(first);
    w.u32(addrs.len() as u32);
    w.u32(0);
    w.u64(p.o_ns);
    w.u64(p.l_ns);
    w.u64(p.epoch_unix_ns);
    w.bytes(&p.run);
    for a in addrs {
        addr::write(&mut w, a);
    }
    debug_assert_eq!(w.len(), o.len());
    o
}

/// A decoded chunk: `(first rank, addresses, parameters)`.
pub type Chunk = (u32, Vec<SocketAddr>, JobParams);

/// Decodes a chunk of `job`'s `n`-rank table; `None` for anything malformed or foreign.
pub fn decode(buf: &[u8], job: u64, n: u32) -> Option<Chunk> {
    let mut r = Reader::new(buf);
    let head = [(); 8].map(|_| r.u8().unwrap_or(0));
    if buf.len() < HEADER || head != [MAGIC[0], MAGIC[1], MAGIC[2], MAGIC[3], VERSION, 0, 0, 0] {
        return None;
    }
    let (job_at, n_at, first, count, reserved) = (
        r.u64().ok()?,
        r.u32().ok()?,
        r.u32().ok()?,
        r.u32().ok()?,
        r.u32().ok()?,
    );
    let count = count as usize;
    if job_at != job || n_at != n || reserved != 0 || count == 0 || count > PER_DATAGRAM {
        return None;
    }
    if buf.len() != HEADER + addr::LEN * count || u64::from(first) + count as u64 > u64::from(n) {
        return None;
    }
    let p = JobParams {
        o_ns: r.u64().ok()?,
        l_ns: r.u64().ok()?,
        epoch_unix_ns: r.u64().ok()?,
        run: r.array().ok()?,
    };
    if p.o_ns == 0 {
        return None;
    }
    let addrs = (0..count).map(|_| addr::read(&mut r)).collect::<Option<Vec<_>>>()?;
    r.finish().ok()?;
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
            run: [7; 16],
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
