//! The verbs connection data of a launched run (`--join`, `--boot`) relayed by rank 0's
//! coordinator: an all-to-all exchange of per-peer [`ConnInfo`] (QPN, LID, GID, PSN, MTU,
//! credit word address and rkey, ring size) through one well-known address.
//!
//! Each rank sends "up" the n−1 records it made for its peers; once all n·(n−1) are in, the
//! coordinator sends each rank "down" the n−1 addressed to it. Records travel
//! [`PER_DATAGRAM`] to a datagram (under 1200 bytes with the MAC), sealed with the job key like
//! every control datagram. A record is identified by its `(from, to)` pair, so reassembly is
//! idempotent and needs no sequence numbers: repeats are ignored, contradictions refused.
//! Every record is validated by [`ConnInfo::decode`] and against the chunk's header.
//!
//! The same encoding carries the coordinator-free exchange of booted runs
//! (`runtime::conn_peers`): a [`Dir::Peer`] chunk holds one record and two flags.
//! Reassembly is the runtime's (`runtime::conn_relay::Gather`).
//!
//! Layout (little-endian): magic `FTCV`, version, direction, flags, a zero byte, job (8), `n`
//! (4), rank (4), part (4), count (4), then `count` records of [`conn::LEN`] bytes.

use super::codec::{Reader, Writer};
use super::conn::{self, ConnError, ConnInfo};

const MAGIC: [u8; 4] = *b"FTCV";
const VERSION: u8 = 1;
const HEADER: usize = 32;
/// Records per datagram: 32 + 15·72 = 1112 bytes, plus the MAC.
pub const PER_DATAGRAM: usize = 15;

/// Which way a chunk travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Node → coordinator: records made by `rank`.
    Up = 1,
    /// Coordinator → node: records addressed to `rank`.
    Down = 2,
    /// Node → node, no coordinator (`runtime::conn_peers`): the one record `rank`
    /// made for the addressee, with [`PEER_HAVE`] / [`PEER_NEED`] flags.
    Peer = 3,
}

/// [`Dir::Peer`] flag: the sender holds the addressee's record for it ("got yours").
pub const PEER_HAVE: u8 = 1;
/// [`Dir::Peer`] flag: the sender has not yet seen the addressee's "got yours".
pub const PEER_NEED: u8 = 2;

/// One datagram's worth of records about `rank`; `part` numbers the chunks of one set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub dir: Dir,
    pub rank: u32,
    pub part: u32,
    pub infos: Vec<ConnInfo>,
    /// [`PEER_HAVE`] | [`PEER_NEED`] on a [`Dir::Peer`] chunk; zero otherwise.
    pub flags: u8,
}

/// Why a chunk was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelayError {
    /// Too short, wrong length for its count, reserved bytes set, unknown direction.
    Malformed,
    Version,
    /// Another job's (or another job size's) chunk.
    Job,
    /// The header's rank is out of range, or a record's ranks do not fit the header.
    Rank,
    /// A record refused by [`ConnInfo::decode`].
    Record(ConnError),
    /// A record contradicting one already held for the same pair.
    Conflict,
}

impl std::fmt::Display for RelayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RelayError::Malformed => f.write_str("malformed connection-data datagram"),
            RelayError::Version => f.write_str("unknown connection-data version"),
            RelayError::Job => f.write_str("another job's connection data"),
            RelayError::Rank => f.write_str("connection data for the wrong rank"),
            RelayError::Record(e) => write!(f, "bad connection record: {e}"),
            RelayError::Conflict => f.write_str("connection record contradicting an earlier one"),
        }
    }
}

/// Is this datagram body a connection-data chunk?
pub fn is_chunk(buf: &[u8]) -> bool {
    buf.starts_with(&MAGIC)
}

/// Splits `infos` (all about `rank`, in `dir`) into encoded datagram bodies.
pub fn encode_all(job: u64, n: u32, dir: Dir, rank: u32, infos: &[ConnInfo]) -> Vec<Vec<u8>> {
    infos
        .chunks(PER_DATAGRAM)
        .enumerate()
        .map(|(part, c)| encode(job, n, dir, rank, part as u32, c))
        .collect()
}

/// Encodes one chunk (at most [`PER_DATAGRAM`] records).
pub fn encode(job: u64, n: u32, dir: Dir, rank: u32, part: u32, infos: &[ConnInfo]) -> Vec<u8> {
    encode_flagged(job, n, dir, rank, part, infos, 0)
}

/// Encodes the [`Dir::Peer`] chunk carrying `info` (made by `info.from`) with `flags`.
pub fn encode_peer(job: u64, n: u32, info: &ConnInfo, flags: u8) -> Vec<u8> {
    encode_flagged(job, n, Dir::Peer, info.from, 0, std::slice::from_ref(info), flags)
}

fn encode_flagged(job: u64, n: u32, dir: Dir, rank: u32, part: u32, infos: &[ConnInfo], flags: u8) -> Vec<u8> {
    assert!(infos.len() <= PER_DATAGRAM);
    let mut o = vec![0u8; HEADER + conn::LEN * infos.len()];
    let mut w = Writer::new(&mut o);
    w.bytes(&MAGIC);
    w.bytes(&[VERSION, dir as u8, flags, 0]);
    w.u64(job);
    w.u32(n);
    w.u32(rank);
    w.u32(part);
    w.u32(infos.len() as u32);
    for c in infos {
        w.bytes(&c.encode());
    }
    debug_assert_eq!(w.len(), o.len());
    o
}

/// Decodes a chunk of `job`'s `n`-rank exchange whose messages are at most `max_msg` bytes.
pub fn decode(buf: &[u8], job: u64, n: u32, max_msg: u32) -> Result<Chunk, RelayError> {
    if buf.len() < HEADER || !is_chunk(buf) || buf[7] != 0 {
        return Err(RelayError::Malformed);
    }
    if buf[4] != VERSION {
        return Err(RelayError::Version);
    }
    let (dir, flags) = match (buf[5], buf[6]) {
        (1, 0) => (Dir::Up, 0),
        (2, 0) => (Dir::Down, 0),
        (3, f) if f & !(PEER_HAVE | PEER_NEED) == 0 => (Dir::Peer, f),
        _ => return Err(RelayError::Malformed),
    };
    let mut r = Reader::new(&buf[8..]);
    let mut field = || r.u32().map_err(|_| RelayError::Malformed);
    let job_at = u64::from(field()?) | (u64::from(field()?) << 32);
    if job_at != job || field()? != n {
        return Err(RelayError::Job);
    }
    let (rank, part, count) = (field()?, field()?, field()? as usize);
    if count == 0 || count > PER_DATAGRAM || buf.len() != HEADER + conn::LEN * count {
        return Err(RelayError::Malformed);
    }
    if dir == Dir::Peer && (count != 1 || part != 0) {
        return Err(RelayError::Malformed);
    }
    if rank >= n {
        return Err(RelayError::Rank);
    }
    let mut infos = Vec::with_capacity(count);
    for rec in buf[HEADER..].chunks_exact(conn::LEN) {
        // The addressee, read first so that decode checks the record against it.
        let to = Reader::new(&rec[20..24]).u32().map_err(|_| RelayError::Malformed)?;
        if to >= n {
            return Err(RelayError::Rank);
        }
        let c = ConnInfo::decode(rec, job, to, n, max_msg).map_err(RelayError::Record)?;
        let fits = match dir {
            Dir::Up | Dir::Peer => c.from == rank,
            Dir::Down => c.to == rank,
        };
        if !fits {
            return Err(RelayError::Rank);
        }
        infos.push(c);
    }
    Ok(Chunk {
        dir,
        rank,
        part,
        infos,
        flags,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: u64 = 0xF7C0_0000_0000_0009;

    fn info(from: u32, to: u32) -> ConnInfo {
        conn::sample(JOB, from, to)
    }

    #[test]
    fn a_chunk_round_trips_and_stays_under_a_datagram() {
        let up: Vec<ConnInfo> = (1..16).map(|t| info(0, t)).collect();
        let b = encode(JOB, 16, Dir::Up, 0, 0, &up);
        assert!(b.len() + crate::wire::mac::TAG_LEN <= 1200, "{}", b.len());
        let c = decode(&b, JOB, 16, 1200).unwrap();
        assert_eq!((c.dir, c.rank, c.part, c.infos, c.flags), (Dir::Up, 0, 0, up, 0));
    }

    #[test]
    fn a_peer_chunk_carries_one_record_of_its_sender_and_two_flags() {
        let b = encode_peer(JOB, 4, &info(2, 1), PEER_HAVE | PEER_NEED);
        let c = decode(&b, JOB, 4, 1200).unwrap();
        assert_eq!((c.dir, c.rank, c.flags, c.infos), (Dir::Peer, 2, 3, vec![info(2, 1)]));
        let mut unknown_flag = b.clone();
        unknown_flag[6] = 4;
        assert_eq!(decode(&unknown_flag, JOB, 4, 1200), Err(RelayError::Malformed));
        let mut flagged_up = encode(JOB, 4, Dir::Up, 2, 0, &[info(2, 1)]);
        flagged_up[6] = PEER_HAVE;
        assert_eq!(decode(&flagged_up, JOB, 4, 1200), Err(RelayError::Malformed));
        let two = encode(JOB, 4, Dir::Peer, 2, 0, &[info(2, 1), info(2, 0)]);
        assert_eq!(decode(&two, JOB, 4, 1200), Err(RelayError::Malformed));
        let forged = encode(JOB, 4, Dir::Peer, 3, 0, &[info(2, 1)]);
        assert_eq!(decode(&forged, JOB, 4, 1200), Err(RelayError::Rank));
    }

    #[test]
    fn wrong_job_rank_or_shape_is_refused_by_name() {
        let b = encode(JOB, 4, Dir::Up, 1, 0, &[info(1, 0), info(1, 2)]);
        assert_eq!(decode(&b, JOB + 1, 4, 1200), Err(RelayError::Job));
        assert_eq!(decode(&b, JOB, 5, 1200), Err(RelayError::Job), "another job size");
        assert_eq!(decode(&b[..b.len() - 1], JOB, 4, 1200), Err(RelayError::Malformed));
        assert_eq!(decode(&b[..10], JOB, 4, 1200), Err(RelayError::Malformed));
        // Rank 2 claiming records made by rank 1.
        let forged = encode(JOB, 4, Dir::Up, 2, 0, &[info(1, 0)]);
        assert_eq!(decode(&forged, JOB, 4, 1200), Err(RelayError::Rank));
        // A down chunk for rank 3 holding a record addressed to rank 0.
        let misaddressed = encode(JOB, 4, Dir::Down, 3, 0, &[info(1, 0)]);
        assert_eq!(decode(&misaddressed, JOB, 4, 1200), Err(RelayError::Rank));
        let out_of_range = encode(JOB, 4, Dir::Up, 9, 0, &[info(1, 0)]);
        assert_eq!(decode(&out_of_range, JOB, 4, 1200), Err(RelayError::Rank));
        let mut dir = b.clone();
        dir[5] = 4;
        assert_eq!(decode(&dir, JOB, 4, 1200), Err(RelayError::Malformed));
        let mut ver = b.clone();
        ver[4] = 9;
        assert_eq!(decode(&ver, JOB, 4, 1200), Err(RelayError::Version));
        let self_addressed = encode(JOB, 4, Dir::Up, 1, 0, &[info(1, 1)]);
        assert_eq!(
            decode(&self_addressed, JOB, 4, 1200),
            Err(RelayError::Record(ConnError::Rank))
        );
        let small_ring = ConnInfo {
            slot_len: 100,
            ..info(1, 0)
        };
        let b2 = encode(JOB, 4, Dir::Up, 1, 0, &[small_ring]);
        assert_eq!(decode(&b2, JOB, 4, 1200), Err(RelayError::Record(ConnError::Ring)));
        assert!(RelayError::Record(ConnError::Ring).to_string().contains("receive ring"));
    }

    #[test]
    fn mutated_chunks_never_panic() {
        let b = encode(JOB, 4, Dir::Up, 1, 0, &[info(1, 0), info(1, 3)]);
        for i in 0..b.len() {
            for x in [0u8, 1, 0x80, 0xff] {
                let mut m = b.clone();
                m[i] = x;
                if let Ok(c) = decode(&m, JOB, 4, 1200) {
                    assert!(
                        c.infos.iter().all(|r| r.from == 1 && r.to < 4 && r.to != 1),
                        "byte {i} = {x}: {c:?}"
                    );
                }
            }
        }
    }

    /// The header as this layout has always put it (the record follows, [`conn::LEN`] bytes).
    #[test]
    fn golden_header() {
        let job = 0xF7C0_0000_0000_0001;
        let c = conn::sample(job, 3, 1);
        let b = encode(job, 4, Dir::Up, 3, 0, &[c]);
        assert_eq!(
            crate::wire::hex::encode(&b[..HEADER]),
            "4654435601010000010000000000c0f704000000030000000000000001000000"
        );
        assert_eq!(&b[HEADER..], &c.encode());
    }
}
