//! Reassembly of the verbs connection data a run exchanges ([`crate::wire::conn_relay`]'s
//! chunks): through rank 0's coordinator (`--join`, `--boot`) or pairwise
//! ([`crate::runtime::conn_peers`]). A record is identified by its `(from, to)` pair, so
//! reassembly is idempotent: repeats are ignored, contradictions refused.

use crate::wire::conn::ConnInfo;
use crate::wire::conn_relay::{Chunk, Dir, RelayError};

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
    use crate::wire::conn::sample;
    use crate::wire::conn_relay::{PER_DATAGRAM, decode, encode, encode_all};

    const JOB: u64 = 0xF7C0_0000_0000_0009;

    fn info(from: u32, to: u32) -> ConnInfo {
        sample(JOB, from, to)
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
}
