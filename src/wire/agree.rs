//! Bodies of ERA's messages ([`crate::protocol::agree::EraMsg`]), one kind per value type.
//!
//! Little-endian; ranks are physical `u32`, each checked `< n`; sets strictly increasing and
//! at most [`MAX_SET`] long. Two forms of UP and DOWN, both always decoded:
//!
//! ```text
//! EraMsg<V>   0 (Up) · id u64 · ballot  | 1 (Down) · id u64 · ballot
//!           | 2 (ResultRequest) · id u64 · dead set
//!           | compact: 0x10 | flags · value · [rb gap] · [failed cset · [acked cset]]
//! ballot      value · failed set · acked (0 = ⊥ | 1 · set) · returned_below u64
//! set         len u16 (<= MAX_SET) · len × rank u32
//! value       And32: u32 | And64: u64 | RankSet (union): set
//! Heartbeat   (empty)
//!
//! compact     the id is the header's operation sequence (written only where they are equal)
//! flags       0x01 Down (else Up) · 0x02 acked is a set (else ⊥) · 0x04 the sets follow (else
//!             both empty) · 0x08 returned_below = ⊥ (u64::MAX; else `rb gap` follows)
//! rb gap      varint id - returned_below (returned_below <= id)
//! cset        varint len (<= MAX_SET) · len × varint gap (rank - previous rank - 1; the
//!             first: the rank)
//! ```
//!
//! The compact form exists for the in-process transport, whose ring slot holds a 56-byte
//! datagram (48 bytes when the compact form was made): a failure-free agreement's UP and DOWN (a 64-bit value, no failures, the returned
//! prefix at the id) take 36 + 10 bytes instead of 36 + 30, so one slot instead of two. The
//! encoder writes it when the header names the agreement (`seq == id`, as ERA's framing
//! does), `returned_below` is ⊥ or at most the id, and the sets hold at most
//! [`COMPACT_RANKS`] ranks together; otherwise the self-contained form. A compact body outside
//! a datagram (no header: [`WireMessage::decode`]) is refused as `era.tag`.

use super::codec::{Reader, Writer};
use super::{DecodeError, Header, WireMessage, kind};
use crate::protocol::agree::{And32, And64, Ballot, EraMsg, RankSet, Value};

/// The most ranks a set on the wire holds (failed sets and union values): the group sizes
/// an ERA datagram serves; a larger set does not encode (its length field is invalid).
pub const MAX_SET: usize = 1024;

const SET_MAX: usize = 2 + 4 * MAX_SET;

/// The most ranks (failed and acknowledged together) a compact body carries; more go in the
/// self-contained form.
pub const COMPACT_RANKS: usize = 8;

/// The compact form's tag (with [`flag`] bits below it).
const COMPACT: u8 = 0x10;

/// The compact form's flag bits.
mod flag {
    pub const DOWN: u8 = 0x01;
    pub const ACKED: u8 = 0x02;
    pub const SETS: u8 = 0x04;
    pub const RB_TOP: u8 = 0x08;
}

/// Decodes `len` ranks with `next` into a [`RankSet`]: on the stack up to [`COMPACT_RANKS`]
/// (every set of a compact body), so such a set allocates at most once, for its own ranks,
/// and not at all up to [`RankSet::INLINE`] ranks; a longer one (the self-contained form)
/// twice, a vector here and its shared ranks.
fn decode_set(
    len: usize,
    what: &'static str,
    mut next: impl FnMut() -> Result<u32, DecodeError>,
) -> Result<RankSet, DecodeError> {
    let mut stack = [0u32; COMPACT_RANKS];
    let mut heap = Vec::new();
    let ranks: &mut [u32] = if len <= COMPACT_RANKS {
        &mut stack[..len]
    } else {
        heap.resize(len, 0);
        &mut heap
    };
    for r in ranks.iter_mut() {
        *r = next()?;
    }
    RankSet::from_sorted_slice(ranks).ok_or(DecodeError::BadField(what))
}

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
    decode_set(len, what, || r.rank(n))
}

fn put_cset(w: &mut Writer<'_>, s: &RankSet) {
    w.varint(s.len() as u64);
    let mut next = 0u32;
    for &r in s.as_slice() {
        w.varint(u64::from(r - next));
        next = r + 1;
    }
}

fn get_cset(r: &mut Reader<'_>, n: u32, what: &'static str) -> Result<RankSet, DecodeError> {
    let len = r.varint()?;
    if len > MAX_SET as u64 {
        return Err(DecodeError::BadField(what));
    }
    let mut next = 0u64;
    // (Strictly increasing by construction.)
    decode_set(len as usize, what, || {
        let rank = next.checked_add(r.varint()?).ok_or(DecodeError::RankOutOfRange)?;
        if rank >= u64::from(n) {
            return Err(DecodeError::RankOutOfRange);
        }
        next = rank + 1;
        Ok(rank as u32)
    })
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

/// Whether `b` of agreement `id` has a compact form.
fn compact_fits<V>(id: u64, b: &Ballot<V>) -> bool {
    let acked = b.acked.as_ref().map_or(0, RankSet::len);
    (b.returned_below <= id || b.returned_below == u64::MAX) && b.failed.len() + acked <= COMPACT_RANKS
}

fn put_compact<V: WireValue>(w: &mut Writer<'_>, down: bool, id: u64, b: &Ballot<V>) {
    let sets = !b.failed.is_empty() || b.acked.as_ref().is_some_and(|a| !a.is_empty());
    let mut tag = COMPACT;
    if down {
        tag |= flag::DOWN;
    }
    if b.acked.is_some() {
        tag |= flag::ACKED;
    }
    if sets {
        tag |= flag::SETS;
    }
    if b.returned_below == u64::MAX {
        tag |= flag::RB_TOP;
    }
    w.u8(tag);
    b.value.put(w);
    if b.returned_below != u64::MAX {
        w.varint(id - b.returned_below);
    }
    if sets {
        put_cset(w, &b.failed);
        if let Some(a) = &b.acked {
            put_cset(w, a);
        }
    }
}

fn get_compact<V: WireValue>(r: &mut Reader<'_>, tag: u8, id: u64, n: u32) -> Result<EraMsg<V>, DecodeError> {
    let value = V::get(r, n)?;
    let returned_below = if tag & flag::RB_TOP != 0 {
        u64::MAX
    } else {
        let gap = r.varint()?;
        // (⊥ has its flag: a gap that lands on it is not the same message twice.)
        match id.checked_sub(gap) {
            Some(rb) if rb != u64::MAX => rb,
            _ => return Err(DecodeError::BadField("era.returned_below")),
        }
    };
    let (failed, acked) = if tag & flag::SETS != 0 {
        let failed = get_cset(r, n, "era.failed")?;
        let acked = if tag & flag::ACKED != 0 {
            Some(get_cset(r, n, "era.acked")?)
        } else {
            None
        };
        (failed, acked)
    } else {
        (RankSet::new(), (tag & flag::ACKED != 0).then(RankSet::new))
    };
    let ballot = Ballot {
        value,
        failed,
        acked,
        returned_below,
    };
    Ok(if tag & flag::DOWN != 0 {
        EraMsg::Down { id, ballot }
    } else {
        EraMsg::Up { id, ballot }
    })
}

/// Decodes either form; `seq`: the header's operation sequence (`None`: no header, so a
/// compact body does not decode).
fn decode_body<V: WireValue>(body: &[u8], n: u32, seq: Option<u64>) -> Result<EraMsg<V>, DecodeError> {
    let mut r = Reader::new(body);
    let tag = r.u8()?;
    let m = if tag & !0x0F == COMPACT {
        let id = seq.ok_or(DecodeError::BadField("era.tag"))?;
        get_compact(&mut r, tag, id, n)?
    } else {
        let id = r.u64()?;
        match tag {
            0 => EraMsg::Up {
                id,
                ballot: get_ballot(&mut r, n)?,
            },
            1 => EraMsg::Down {
                id,
                ballot: get_ballot(&mut r, n)?,
            },
            2 => EraMsg::ResultRequest {
                id,
                dead: get_set(&mut r, n, "era.dead")?,
            },
            _ => return Err(DecodeError::BadField("era.tag")),
        }
    };
    r.finish()?;
    Ok(m)
}

impl<V: WireValue> WireMessage for EraMsg<V> {
    const KIND: u8 = V::KIND;
    const MAX_BODY: usize = 1 + 8 + V::MAX + SET_MAX + 1 + SET_MAX + 8;

    /// The self-contained form.
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
            EraMsg::ResultRequest { id, dead } => {
                w.u8(2);
                w.u64(*id);
                put_set(&mut w, dead);
            }
        }
        w.len()
    }

    /// The compact form where the header names the agreement and the ballot has one.
    #[inline]
    fn encode_in(&self, seq: u64, out: &mut [u8]) -> usize {
        match self {
            EraMsg::Up { id, ballot } | EraMsg::Down { id, ballot } if *id == seq && compact_fits(*id, ballot) => {
                let mut w = Writer::new(out);
                put_compact(&mut w, matches!(self, EraMsg::Down { .. }), *id, ballot);
                w.len()
            }
            _ => self.encode(out),
        }
    }

    fn decode(body: &[u8], n: u32) -> Result<Self, DecodeError> {
        decode_body(body, n, None)
    }

    #[inline]
    fn decode_in(h: &Header, body: &[u8], n: u32) -> Result<Self, DecodeError> {
        decode_body(body, n, Some(h.seq))
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
mod tests;
