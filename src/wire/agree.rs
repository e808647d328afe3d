//! Bodies of ERA's messages ([`crate::protocol::agree::EraMsg`]), one kind per value type.
//!
//! Little-endian; ranks are physical `u32`, each checked `< n`; sets strictly increasing and
//! at most [`MAX_SET`] long.
//!
//! ```text
//! EraMsg<V>   0 (Up) · id u64 · ballot  | 1 (Down) · id u64 · ballot  | 2 (ResultRequest) · id u64
//! ballot      value · failed set · acked (0 = ⊥ | 1 · set) · returned_below u64
//! set         len u16 (<= MAX_SET) · len × rank u32
//! value       And32: u32 | And64: u64 | RankSet (union): set
//! Heartbeat   (empty)
//! ```

use super::codec::{Reader, Writer};
use super::{DecodeError, WireMessage, kind};
use crate::protocol::agree::{And32, And64, Ballot, EraMsg, RankSet, Value};

/// The most ranks a set on the wire holds (failed sets and union values): the group sizes
/// an ERA datagram serves; a larger set does not encode (its length field is invalid).
pub const MAX_SET: usize = 1024;

const SET_MAX: usize = 2 + 4 * MAX_SET;

fn put_set(w: &mut Writer<'_>, s: &RankSet) {
    if s.len() > MAX_SET {
        w.u16(u16::MAX);
        return;
    }
    w.u16(s.len() as u16);
    for &r in s.as_slice() {
        w.u32(r);
    }
}

fn get_set(r: &mut Reader<'_>, n: u32, what: &'static str) -> Result<RankSet, DecodeError> {
    let len = usize::from(r.u16()?);
    if len > MAX_SET {
        return Err(DecodeError::BadField(what));
    }
    let mut v = Vec::with_capacity(len);
    for _ in 0..len {
        v.push(r.rank(n)?);
    }
    RankSet::from_sorted(v).ok_or(DecodeError::BadField(what))
}

/// A value type ERA can carry.
pub trait WireValue: Value {
    /// The header kind of `EraMsg<Self>`.
    const KIND: u8;
    /// Bytes of an encoded value at most.
    const MAX: usize;
    fn put(&self, w: &mut Writer<'_>);
    fn get(r: &mut Reader<'_>, n: u32) -> Result<Self, DecodeError>;
}

impl WireValue for And32 {
    const KIND: u8 = kind::ERA_AND32;
    const MAX: usize = 4;
    fn put(&self, w: &mut Writer<'_>) {
        w.u32(self.0);
    }
    fn get(r: &mut Reader<'_>, _n: u32) -> Result<Self, DecodeError> {
        r.u32().map(And32)
    }
}

impl WireValue for And64 {
    const KIND: u8 = kind::ERA_AND64;
    const MAX: usize = 8;
    fn put(&self, w: &mut Writer<'_>) {
        w.u64(self.0);
    }
    fn get(r: &mut Reader<'_>, _n: u32) -> Result<Self, DecodeError> {
        r.u64().map(And64)
    }
}

impl WireValue for RankSet {
    const KIND: u8 = kind::ERA_UNION;
    const MAX: usize = SET_MAX;
    fn put(&self, w: &mut Writer<'_>) {
        put_set(w, self);
    }
    fn get(r: &mut Reader<'_>, n: u32) -> Result<Self, DecodeError> {
        get_set(r, n, "era.value")
    }
}

fn put_ballot<V: WireValue>(w: &mut Writer<'_>, b: &Ballot<V>) {
    b.value.put(w);
    put_set(w, &b.failed);
    match &b.acked {
        None => w.u8(0),
        Some(s) => {
            w.u8(1);
            put_set(w, s);
        }
    }
    w.u64(b.returned_below);
}

fn get_ballot<V: WireValue>(r: &mut Reader<'_>, n: u32) -> Result<Ballot<V>, DecodeError> {
    let value = V::get(r, n)?;
    let failed = get_set(r, n, "era.failed")?;
    let acked = match r.u8()? {
        0 => None,
        1 => Some(get_set(r, n, "era.acked")?),
        _ => return Err(DecodeError::BadField("era.acked.tag")),
    };
    let returned_below = r.u64()?;
    Ok(Ballot {
        value,
        failed,
        acked,
        returned_below,
    })
}

impl<V: WireValue> WireMessage for EraMsg<V> {
    const KIND: u8 = V::KIND;
    const MAX_BODY: usize = 1 + 8 + V::MAX + SET_MAX + 1 + SET_MAX + 8;

    fn encode(&self, out: &mut [u8]) -> usize {
        let mut w = Writer::new(out);
        match self {
            EraMsg::Up { id, ballot } => {
                w.u8(0);
                w.u64(*id);
                put_ballot(&mut w, ballot);
            }
            EraMsg::Down { id, ballot } => {
                w.u8(1);
                w.u64(*id);
                put_ballot(&mut w, ballot);
            }
            EraMsg::ResultRequest { id } => {
                w.u8(2);
                w.u64(*id);
            }
        }
        w.len()
    }

    fn decode(body: &[u8], n: u32) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let tag = r.u8()?;
        let id = r.u64()?;
        let m = match tag {
            0 => EraMsg::Up {
                id,
                ballot: get_ballot(&mut r, n)?,
            },
            1 => EraMsg::Down {
                id,
                ballot: get_ballot(&mut r, n)?,
            },
            2 => EraMsg::ResultRequest { id },
            _ => return Err(DecodeError::BadField("era.tag")),
        };
        r.finish()?;
        Ok(m)
    }
}

/// The failure detector's heartbeat between ERA tree neighbours (empty body).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heartbeat;

impl WireMessage for Heartbeat {
    const KIND: u8 = kind::HEARTBEAT;
    const MAX_BODY: usize = 0;

    fn encode(&self, _out: &mut [u8]) -> usize {
        0
    }

    fn decode(body: &[u8], _n: u32) -> Result<Self, DecodeError> {
        if body.is_empty() {
            Ok(Heartbeat)
        } else {
            Err(DecodeError::LengthMismatch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ProtoRng;
    use crate::wire::{decode_datagram, encode_datagram};

    const JOB: u64 = 77;
    const N: u32 = 2000;

    fn ballot<V: Value>(value: V) -> Ballot<V> {
        Ballot {
            value,
            failed: RankSet::of([3, 17, N - 1]),
            acked: Some(RankSet::of([3])),
            returned_below: 41,
        }
    }

    fn round_trip<V: WireValue>(m: EraMsg<V>) {
        let mut buf = vec![0u8; crate::wire::HEADER_LEN + EraMsg::<V>::MAX_BODY];
        let len = encode_datagram(&mut buf, JOB, 0, m.id(), 5, &m, &[]).unwrap();
        let (h, back, payload) = decode_datagram::<EraMsg<V>>(&buf[..len], JOB, N).unwrap();
        assert_eq!(back, m);
        assert_eq!((h.sender, payload.len()), (5, 0));
        // Every truncation fails cleanly.
        for cut in crate::wire::HEADER_LEN..len {
            assert!(decode_datagram::<EraMsg<V>>(&buf[..cut], JOB, N).is_err());
        }
        // A wrong value type is another kind.
        assert!(decode_datagram::<EraMsg<And64>>(&buf[..len], JOB, N).is_err() || V::KIND == And64::KIND);
    }

    #[test]
    fn every_message_round_trips() {
        for m in [
            EraMsg::Up {
                id: 0,
                ballot: ballot(And32(7)),
            },
            EraMsg::Down {
                id: u64::MAX,
                ballot: Ballot::bottom(),
            },
            EraMsg::ResultRequest { id: 9 },
        ] {
            round_trip(m);
        }
        round_trip(EraMsg::Down {
            id: 3,
            ballot: ballot(And64(u64::MAX - 1)),
        });
        round_trip(EraMsg::Up {
            id: 3,
            ballot: ballot(RankSet::of(0..MAX_SET as u32)),
        });
    }

    #[test]
    fn malformed_bodies_are_rejected() {
        let body = |tag: u8, rest: &[u8]| {
            let mut v = vec![tag];
            v.extend_from_slice(&5u64.to_le_bytes());
            v.extend_from_slice(rest);
            v
        };
        let dec = |b: &[u8], n: u32| EraMsg::<And32>::decode(b, n);
        assert_eq!(dec(&body(3, &[]), N), Err(DecodeError::BadField("era.tag")));
        assert_eq!(dec(&body(2, &[0]), N), Err(DecodeError::LengthMismatch));
        // Up: value, failed {2, 1} (not increasing).
        let mut up = 9u32.to_le_bytes().to_vec();
        up.extend_from_slice(&2u16.to_le_bytes());
        up.extend_from_slice(&2u32.to_le_bytes());
        up.extend_from_slice(&1u32.to_le_bytes());
        up.push(0);
        up.extend_from_slice(&0u64.to_le_bytes());
        assert_eq!(dec(&body(0, &up), N), Err(DecodeError::BadField("era.failed")));
        // Same with a rank out of range.
        assert_eq!(dec(&body(0, &up), 2), Err(DecodeError::RankOutOfRange));
        // Too long a set.
        let mut long = 9u32.to_le_bytes().to_vec();
        long.extend_from_slice(&(MAX_SET as u16 + 1).to_le_bytes());
        assert_eq!(dec(&body(0, &long), N), Err(DecodeError::BadField("era.failed")));
        // Bad acked tag.
        let mut bad = 9u32.to_le_bytes().to_vec();
        bad.extend_from_slice(&0u16.to_le_bytes());
        bad.push(7);
        bad.extend_from_slice(&0u64.to_le_bytes());
        assert_eq!(dec(&body(0, &bad), N), Err(DecodeError::BadField("era.acked.tag")));
        // A set too large to encode never decodes.
        let big = EraMsg::Up {
            id: 1,
            ballot: ballot(RankSet::of(0..MAX_SET as u32 + 1)),
        };
        let mut buf = vec![0u8; EraMsg::<RankSet>::MAX_BODY];
        let len = big.encode(&mut buf);
        assert!(EraMsg::<RankSet>::decode(&buf[..len], N).is_err());
    }

    #[test]
    fn heartbeat_is_empty() {
        let mut buf = vec![0u8; crate::wire::HEADER_LEN];
        let len = encode_datagram(&mut buf, JOB, 0, 0, 3, &Heartbeat, &[]).unwrap();
        assert!(decode_datagram::<Heartbeat>(&buf[..len], JOB, N).is_ok());
        assert_eq!(Heartbeat::decode(&[0], N), Err(DecodeError::LengthMismatch));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = ProtoRng::new(11);
        let mut buf = [0u8; 64];
        for _ in 0..20_000 {
            let len = rng.below(64) as usize;
            for b in buf.iter_mut().take(len) {
                *b = rng.below(256) as u8;
            }
            // Mostly-valid prefixes: a valid tag and small lengths.
            buf[0] = rng.below(4) as u8;
            let _ = EraMsg::<RankSet>::decode(&buf[..len], 16);
            let _ = EraMsg::<And64>::decode(&buf[..len], 16);
        }
    }
}
