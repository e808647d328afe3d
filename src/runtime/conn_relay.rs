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
//! ([`crate::runtime::conn_peers`]): a [`Dir::Peer`] chunk holds one record and two flags.

use crate::transport::verbs::conn::{self, ConnError, ConnInfo};

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
    /// Node → node, no coordinator ([`crate::runtime::conn_peers`]): the one record `rank`
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
    buf.len() >= 4 && buf[..4] == MAGIC
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
    let mut o = Vec::with_capacity(HEADER + conn::LEN * infos.len());
    o.extend_from_slice(&MAGIC);
    o.extend_from_slice(&[VERSION, dir as u8, flags, 0]);
    o.extend_from_slice(&job.to_le_bytes());
    o.extend_from_slice(&n.to_le_bytes());
    o.extend_from_slice(&rank.to_le_bytes());
    o.extend_from_slice(&part.to_le_bytes());
    o.extend_from_slice(&(infos.len() as u32).to_le_bytes());
    for c in infos {
        o.extend_from_slice(&c.encode());
    }
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
    let u32_at = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
    let job_at = u64::from(u32_at(8)) | (u64::from(u32_at(12)) << 32);
    if job_at != job || u32_at(16) != n {
        return Err(RelayError::Job);
    }
    let (rank, part, count) = (u32_at(20), u32_at(24), u32_at(28) as usize);
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
        let to = u32::from_le_bytes([rec[20], rec[21], rec[22], rec[23]]);
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

/// The records a rank still waits for, indexed by the other end's rank.
#[derive(Clone, Debug)]
pub struct Gather {
    me: u32,
    dir: Dir,
    slots: Vec<Option<ConnInfo>>,
    missing: usize,
}

impl Gather {
    /// What `me` collects: with [`Dir::Up`] the records `me` made (the coordinator's view of
    /// one rank), with [`Dir::Down`] those addressed to `me`.
    pub fn new(me: u32, n: u32, dir: Dir) -> Gather {
        Gather {
            me,
            dir,
            slots: vec![None; n as usize],
            missing: (n as usize).saturating_sub(1),
        }
    }

    /// Takes a decoded chunk's records; `Ok(new records)`.
    pub fn add(&mut self, c: &Chunk) -> Result<usize, RelayError> {
        if c.dir != self.dir || c.rank != self.me {
            return Err(RelayError::Rank);
        }
        let mut new = 0;
        for i in &c.infos {
            let other = match self.dir {
                Dir::Up => i.to,
                Dir::Down | Dir::Peer => i.from,
            };
            match &self.slots[other as usize] {
                Some(old) if old == i => {}
                Some(_) => return Err(RelayError::Conflict),
                None => {
                    self.slots[other as usize] = Some(*i);
                    self.missing -= 1;
                    new += 1;
                }
            }
        }
        Ok(new)
    }

    pub fn missing(&self) -> usize {
        self.missing
    }

    /// The record for (or from) `other`.
    pub fn get(&self, other: u32) -> Option<&ConnInfo> {
        self.slots.get(other as usize)?.as_ref()
    }

    /// Every record, indexed by the other end's rank (`None` at `me` and where missing).
    pub fn into_slots(self) -> Vec<Option<ConnInfo>> {
        self.slots
    }
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
        assert!(b.len() + crate::transport::udp::auth::TAG_LEN <= 1200, "{}", b.len());
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
    fn many_peers_split_over_datagrams_and_reassemble_in_any_order_with_repeats() {
        let n = 40u32;
        let me = 7u32;
        let down: Vec<ConnInfo> = (0..n).filter(|&f| f != me).map(|f| info(f, me)).collect();
        let mut parts = encode_all(JOB, n, Dir::Down, me, &down);
        assert_eq!(parts.len(), (n as usize - 1).div_ceil(PER_DATAGRAM));
        parts.reverse();
        let again = parts[1].clone();
        parts.push(again);
        let mut g = Gather::new(me, n, Dir::Down);
        for p in &parts {
            let c = decode(p, JOB, n, 1200).unwrap();
            g.add(&c).unwrap();
        }
        assert_eq!(g.missing(), 0);
        let slots = g.into_slots();
        assert!(slots[me as usize].is_none());
        for f in (0..n).filter(|&f| f != me) {
            assert_eq!(slots[f as usize], Some(info(f, me)));
        }
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
    fn gather_refuses_contradictions_and_foreign_chunks() {
        let mut g = Gather::new(2, 4, Dir::Up);
        let c = decode(&encode(JOB, 4, Dir::Up, 2, 0, &[info(2, 0)]), JOB, 4, 1200).unwrap();
        assert_eq!(g.add(&c), Ok(1));
        assert_eq!(g.add(&c), Ok(0), "a repeat");
        let other = ConnInfo { qpn: 999, ..info(2, 0) };
        let c2 = decode(&encode(JOB, 4, Dir::Up, 2, 1, &[other]), JOB, 4, 1200).unwrap();
        assert_eq!(g.add(&c2), Err(RelayError::Conflict));
        let c3 = decode(&encode(JOB, 4, Dir::Up, 1, 0, &[info(1, 0)]), JOB, 4, 1200).unwrap();
        assert_eq!(g.add(&c3), Err(RelayError::Rank));
        assert_eq!(g.missing(), 2);
        assert_eq!(g.get(0), Some(&info(2, 0)));
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
}
