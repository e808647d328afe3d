//! The bytes of a booted node's watch messages ([`WatchMsg`] of
//! [`crate::protocol::overlay::watch`]): heartbeats between BMG neighbours (the failure
//! detector), the overlay's messages while it repairs itself (every address is known by then,
//! so none is carried), and failure notices ([`crate::protocol::overlay::failure_notice`]).
//!
//! ```text
//! WatchMsg  0 (Heartbeat)
//!           | 1 · OverlayMsg body (5 or 6 bytes, see wire::overlay)
//!           | 2 · count u16 (1..=MAX_NOTICES) · count × (dead u32 · age u8 (< 64))
//! ```
//! Decodes into a `Vec` for the notices (at most [`MAX_NOTICES`]).

use super::codec::{Reader, Writer};
use super::{DecodeError, WireMessage, kind};
use crate::protocol::overlay::bmg_overlay::OverlayMsg;
use crate::protocol::overlay::failure_notice::Notice;
pub use crate::protocol::overlay::watch::{MAX_NOTICES, WatchMsg};

impl WireMessage for WatchMsg {
    const KIND: u8 = kind::WATCH;
    const MAX_BODY: usize = 1 + 2 + 5 * MAX_NOTICES;

    fn encode(&self, out: &mut [u8]) -> usize {
        let mut w = Writer::new(out);
        match self {
            WatchMsg::Heartbeat => w.u8(0),
            WatchMsg::Overlay(m) => {
                w.u8(1);
                let mut body = [0u8; OverlayMsg::MAX_BODY];
                let len = m.encode(&mut body);
                w.bytes(&body[..len]);
            }
            WatchMsg::Notices(v) => {
                if v.is_empty() || v.len() > MAX_NOTICES {
                    return 0;
                }
                w.u8(2);
                w.u16(v.len() as u16);
                for n in v {
                    w.u32(n.dead);
                    w.u8(n.age);
                }
            }
        }
        w.len()
    }

    fn decode(body: &[u8], n: u32) -> Result<Self, DecodeError> {
        let (&tag, rest) = body.split_first().ok_or(DecodeError::LengthMismatch)?;
        match tag {
            0 => {
                Reader::new(rest).finish()?;
                Ok(WatchMsg::Heartbeat)
            }
            1 => Ok(WatchMsg::Overlay(OverlayMsg::decode(rest, n)?)),
            2 => {
                let mut r = Reader::new(rest);
                let count = usize::from(r.u16()?);
                if count == 0 || count > MAX_NOTICES {
                    return Err(DecodeError::BadField("watch.count"));
                }
                if rest.len() != 2 + 5 * count {
                    return Err(DecodeError::LengthMismatch);
                }
                let mut v = Vec::with_capacity(count);
                for _ in 0..count {
                    let dead = r.rank(n)?;
                    let age = r.u8()?;
                    if age >= 64 {
                        return Err(DecodeError::BadField("watch.age"));
                    }
                    v.push(Notice { dead, age });
                }
                r.finish()?;
                Ok(WatchMsg::Notices(v))
            }
            _ => Err(DecodeError::BadField("watch.tag")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::overlay::ring_to_bmg::BmgMsg;
    use crate::protocol::overlay::tree_to_ring::RingMsg;

    #[test]
    fn watch_messages_round_trip_and_are_checked() {
        let n = 8;
        for m in [
            WatchMsg::Heartbeat,
            WatchMsg::Overlay(OverlayMsg::Ring(RingMsg::BConnect(7))),
            WatchMsg::Overlay(OverlayMsg::Bmg(BmgMsg::Up { ident: 3, hop: 2 })),
            WatchMsg::Notices(vec![Notice { dead: 3, age: 0 }, Notice { dead: 7, age: 4 }]),
        ] {
            crate::wire::tests::round_trips_strictly(&m, n);
        }
        assert_eq!(WatchMsg::decode(&[3], n), Err(DecodeError::BadField("watch.tag")));
        assert_eq!(
            WatchMsg::decode(&[2, 0, 0], n),
            Err(DecodeError::BadField("watch.count"))
        );
        assert_eq!(
            WatchMsg::decode(&[2, 1, 0, 8, 0, 0, 0, 0], n),
            Err(DecodeError::RankOutOfRange)
        );
        assert_eq!(
            WatchMsg::decode(&[2, 1, 0, 3, 0, 0, 0, 64], n),
            Err(DecodeError::BadField("watch.age"))
        );
        assert_eq!(WatchMsg::Notices(vec![]).encode(&mut [0u8; 8]), 0);
    }
}
