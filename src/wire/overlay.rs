//! Bodies of the overlay protocols' messages ([`crate::protocol::overlay`]), so that the
//! runtime can carry them.
//!
//! Little-endian; identifiers are `u32`, each checked `< n`; tags are one byte.
//!
//! ```text
//! OverlayMsg   tag u8 (0 F_Connect, 1 Info, 2 Ask_Connect, 3 B_Connect) · ident u32
//!              | tag u8 (4 UP, 5 DN) · ident u32 · hop u8 (< table_len(n))
//! HfMsg        flags u8 (bit 0: failure known; others 0) · [f u32 · failtime u64]
//!              · count u16 (<= MAX_ITEMS) · count × (origin u32 · seq u32 · age u8 (< ⌈log n⌉ + 2))
//! ```
//! `HfMsg` is a list and decodes into a `Vec` (at most [`MAX_ITEMS`] entries): the one body
//! here that allocates.

use super::codec::{Reader, Writer};
use super::{DecodeError, WireMessage, kind};
use crate::protocol::overlay::bmg_overlay::OverlayMsg;
use crate::protocol::overlay::han_finkel::{HfMsg, Item, run_len};
use crate::protocol::overlay::ring_to_bmg::{BmgMsg, table_len};
use crate::protocol::overlay::tree_to_ring::RingMsg;

/// The most items one Han–Finkel message carries on the wire.
pub const MAX_ITEMS: usize = 1024;

impl WireMessage for OverlayMsg {
    const KIND: u8 = kind::BMG_OVERLAY;
    const MAX_BODY: usize = 6;

    fn encode(&self, out: &mut [u8]) -> usize {
        let mut w = Writer::new(out);
        match *self {
            OverlayMsg::Ring(m) => {
                w.u8(match m {
                    RingMsg::FConnect(_) => 0,
                    RingMsg::Info(_) => 1,
                    RingMsg::AskConnect(_) => 2,
                    RingMsg::BConnect(_) => 3,
                });
                w.u32(m.ident());
            }
            OverlayMsg::Bmg(BmgMsg::Up { ident, hop }) => {
                w.u8(4);
                w.u32(ident);
                w.u8(hop);
            }
            OverlayMsg::Bmg(BmgMsg::Dn { ident, hop }) => {
                w.u8(5);
                w.u32(ident);
                w.u8(hop);
            }
        }
        w.len()
    }

    fn decode(body: &[u8], n: u32) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let tag = r.u8()?;
        let ident = r.rank(n)?;
        let m = match tag {
            0 => OverlayMsg::Ring(RingMsg::FConnect(ident)),
            1 => OverlayMsg::Ring(RingMsg::Info(ident)),
            2 => OverlayMsg::Ring(RingMsg::AskConnect(ident)),
            3 => OverlayMsg::Ring(RingMsg::BConnect(ident)),
            4 | 5 => {
                let hop = r.u8()?;
                if usize::from(hop) >= table_len(n) {
                    return Err(DecodeError::BadField("overlay.hop"));
                }
                OverlayMsg::Bmg(if tag == 4 {
                    BmgMsg::Up { ident, hop }
                } else {
                    BmgMsg::Dn { ident, hop }
                })
            }
            _ => return Err(DecodeError::BadField("overlay.tag")),
        };
        r.finish()?;
        Ok(m)
    }
}

impl WireMessage for HfMsg {
    const KIND: u8 = kind::HAN_FINKEL;
    const MAX_BODY: usize = 1 + 12 + 2 + 9 * MAX_ITEMS;

    fn encode(&self, out: &mut [u8]) -> usize {
        if self.items.len() > MAX_ITEMS {
            // Would not decode: write nothing valid rather than a truncated list.
            return 0;
        }
        let mut w = Writer::new(out);
        match self.fail {
            Some((f, t)) => {
                w.u8(1);
                w.u32(f);
                w.u64(t);
            }
            None => w.u8(0),
        }
        w.u16(self.items.len() as u16);
        for it in &self.items {
            w.u32(it.origin);
            w.u32(it.seq);
            w.u8(it.age);
        }
        w.len()
    }

    fn decode(body: &[u8], n: u32) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let fail = match r.u8()? {
            0 => None,
            1 => Some((r.rank(n)?, r.u64()?)),
            _ => return Err(DecodeError::BadField("hf.flags")),
        };
        let count = usize::from(r.u16()?);
        if count > MAX_ITEMS {
            return Err(DecodeError::BadField("hf.count"));
        }
        if body.len() != 1 + if fail.is_some() { 12 } else { 0 } + 2 + 9 * count {
            return Err(DecodeError::LengthMismatch);
        }
        let span = run_len(n) + 2;
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            let origin = r.rank(n)?;
            let seq = r.u32()?;
            let age = r.u8()?;
            if u32::from(age) >= span {
                return Err(DecodeError::BadField("hf.age"));
            }
            items.push(Item { origin, seq, age });
        }
        r.finish()?;
        Ok(HfMsg { items, fail })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode_datagram, encode_datagram};

    fn round_trip<M: WireMessage + PartialEq + std::fmt::Debug>(m: &M, n: u32) {
        let mut buf = vec![0u8; crate::wire::HEADER_LEN + M::MAX_BODY + 16];
        let len = encode_datagram(&mut buf, 9, 0, 1, 2, m, b"pl").unwrap();
        let (h, got, payload) = decode_datagram::<M>(&buf[..len], 9, n).unwrap();
        assert_eq!((&got, payload, h.sender), (m, &b"pl"[..], 2));
        // Every truncation fails, never panics.
        for cut in crate::wire::HEADER_LEN..len - 2 {
            assert!(decode_datagram::<M>(&buf[..cut], 9, n).is_err());
        }
    }

    #[test]
    fn overlay_messages_round_trip_and_are_checked() {
        let n = 16;
        for m in [
            OverlayMsg::Ring(RingMsg::FConnect(0)),
            OverlayMsg::Ring(RingMsg::Info(15)),
            OverlayMsg::Ring(RingMsg::AskConnect(3)),
            OverlayMsg::Ring(RingMsg::BConnect(7)),
            OverlayMsg::Bmg(BmgMsg::Up { ident: 2, hop: 4 }),
            OverlayMsg::Bmg(BmgMsg::Dn { ident: 9, hop: 0 }),
        ] {
            round_trip(&m, n);
        }
        let dec = |b: &[u8]| OverlayMsg::decode(b, n);
        assert_eq!(dec(&[1, 16, 0, 0, 0]), Err(DecodeError::RankOutOfRange));
        assert_eq!(dec(&[6, 1, 0, 0, 0]), Err(DecodeError::BadField("overlay.tag")));
        assert_eq!(dec(&[4, 1, 0, 0, 0, 5]), Err(DecodeError::BadField("overlay.hop")));
        assert_eq!(dec(&[4, 1, 0, 0, 0]), Err(DecodeError::LengthMismatch));
        assert_eq!(dec(&[1, 1, 0, 0, 0, 0]), Err(DecodeError::LengthMismatch));
    }

    #[test]
    fn han_finkel_messages_round_trip_and_are_checked() {
        let n = 10;
        round_trip(&HfMsg::default(), n);
        let m = HfMsg {
            items: vec![
                Item {
                    origin: 9,
                    seq: 77,
                    age: 5,
                },
                Item {
                    origin: 0,
                    seq: 1,
                    age: 0,
                },
            ],
            fail: Some((3, 12)),
        };
        round_trip(&m, n);
        let mut buf = vec![0u8; HfMsg::MAX_BODY];
        let len = m.encode(&mut buf);
        let body = &buf[..len];
        assert!(HfMsg::decode(body, 9).is_err(), "origin 9 out of range for n = 9");
        let mut bad = body.to_vec();
        bad[0] = 2;
        assert_eq!(HfMsg::decode(&bad, n), Err(DecodeError::BadField("hf.flags")));
        let mut old = body.to_vec();
        old[15 + 8] = 6; // age of the first item: ⌈log 10⌉ + 2 = 6 is too old
        assert_eq!(HfMsg::decode(&old, n), Err(DecodeError::BadField("hf.age")));
        let mut long = body.to_vec();
        long[13] = 3; // count says 3, the body holds 2
        assert_eq!(HfMsg::decode(&long, n), Err(DecodeError::LengthMismatch));
        let many = HfMsg {
            items: vec![
                Item {
                    origin: 0,
                    seq: 0,
                    age: 0
                };
                MAX_ITEMS + 1
            ],
            fail: None,
        };
        assert_eq!(many.encode(&mut vec![0u8; 2 * HfMsg::MAX_BODY]), 0);
    }
}
