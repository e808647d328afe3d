//! The bootstrap's messages ([`crate::protocol::overlay::boot`], run by
//! [`crate::runtime::bootstrap`]): the overlay's messages
//! with the address of the process they name (the knowledge-based model of the BMG paper
//! §3.1: a process can send only to a process whose connection information it has), a hello
//! from a child to its launch-tree parent, and the all-gather's rounds (Han–Finkel over the
//! BMG's clockwise links) carrying `(rank, address)` entries.
//!
//! ```text
//! BootMsg   0 (Hello)
//!           | 1 · OverlayMsg body (5 or 6 bytes, see wire::overlay) · ipv4 u32 · port u16
//!           | 2 · round u8 (< ⌈log n⌉) · count u16 (<= n) · count × (rank u32 · ipv4 u32 · port u16)
//! ```
//! Decodes into a `Vec` for the entries (at most `MAX_ENTRIES`).

use std::net::{Ipv4Addr, SocketAddrV4};

use super::codec::{Reader, Writer};
use super::{DecodeError, WireMessage, kind};
use crate::protocol::overlay::bmg_overlay::OverlayMsg;
use crate::protocol::overlay::han_finkel::run_len;

/// The most entries one all-gather message carries.
pub const MAX_ENTRIES: usize = 4096;

pub use crate::protocol::overlay::boot::BootMsg;

fn put_addr(w: &mut Writer<'_>, a: &SocketAddrV4) {
    w.u32(u32::from(*a.ip()));
    w.u16(a.port());
}

fn get_addr(r: &mut Reader<'_>) -> Result<SocketAddrV4, DecodeError> {
    let ip = Ipv4Addr::from(r.u32()?);
    let port = r.u16()?;
    if port == 0 || ip.is_unspecified() {
        return Err(DecodeError::BadField("boot.addr"));
    }
    Ok(SocketAddrV4::new(ip, port))
}

impl WireMessage for BootMsg {
    const KIND: u8 = kind::BOOTSTRAP;
    const MAX_BODY: usize = 1 + 1 + 2 + 10 * MAX_ENTRIES;

    fn encode(&self, out: &mut [u8]) -> usize {
        let mut w = Writer::new(out);
        match self {
            BootMsg::Hello => w.u8(0),
            BootMsg::Overlay(m, a) => {
                w.u8(1);
                let mut body = [0u8; OverlayMsg::MAX_BODY];
                let len = m.encode(&mut body);
                w.bytes(&body[..len]);
                put_addr(&mut w, a);
            }
            BootMsg::Round { round, entries } => {
                if entries.len() > MAX_ENTRIES {
                    return 0;
                }
                w.u8(2);
                w.u8(*round);
                w.u16(entries.len() as u16);
                for (rank, a) in entries {
                    w.u32(*rank);
                    put_addr(&mut w, a);
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
                Ok(BootMsg::Hello)
            }
            1 => {
                // The overlay body is 5 bytes, or 6 for UP/DN.
                let len = match rest.first() {
                    Some(4 | 5) => 6,
                    Some(_) => 5,
                    None => return Err(DecodeError::LengthMismatch),
                };
                let (m, a) = rest.split_at_checked(len).ok_or(DecodeError::LengthMismatch)?;
                let m = OverlayMsg::decode(m, n)?;
                let mut r = Reader::new(a);
                let addr = get_addr(&mut r)?;
                r.finish()?;
                Ok(BootMsg::Overlay(m, addr))
            }
            2 => {
                let mut r = Reader::new(rest);
                let round = r.u8()?;
                if u32::from(round) >= run_len(n).max(1) {
                    return Err(DecodeError::BadField("boot.round"));
                }
                let count = usize::from(r.u16()?);
                if count > MAX_ENTRIES || count > n as usize {
                    return Err(DecodeError::BadField("boot.count"));
                }
                if rest.len() != 3 + 10 * count {
                    return Err(DecodeError::LengthMismatch);
                }
                let mut entries = Vec::with_capacity(count);
                for _ in 0..count {
                    entries.push((r.rank(n)?, get_addr(&mut r)?));
                }
                r.finish()?;
                Ok(BootMsg::Round { round, entries })
            }
            _ => Err(DecodeError::BadField("boot.tag")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::overlay::boot::named;
    use crate::protocol::overlay::ring_to_bmg::BmgMsg;
    use crate::protocol::overlay::tree_to_ring::RingMsg;

    #[test]
    fn boot_messages_round_trip_and_are_checked() {
        let a = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4000);
        let n = 8;
        for m in [
            BootMsg::Hello,
            BootMsg::Overlay(OverlayMsg::Ring(RingMsg::Info(7)), a),
            BootMsg::Overlay(OverlayMsg::Bmg(BmgMsg::Dn { ident: 3, hop: 2 }), a),
            BootMsg::Round {
                round: 2,
                entries: vec![(0, a), (7, SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 9))],
            },
        ] {
            crate::wire::tests::round_trips_strictly(&m, n);
        }
        assert_eq!(BootMsg::decode(&[3], n), Err(DecodeError::BadField("boot.tag")));
        assert_eq!(
            BootMsg::decode(&[2, 3, 0, 0], n),
            Err(DecodeError::BadField("boot.round"))
        );
        assert_eq!(
            BootMsg::decode(&[2, 0, 9, 0], n),
            Err(DecodeError::BadField("boot.count"))
        );
        let zero_port = [1, 1, 2, 0, 0, 0, 127, 0, 0, 1, 0, 0];
        assert_eq!(BootMsg::decode(&zero_port, n), Err(DecodeError::BadField("boot.addr")));
        assert_eq!(named(&OverlayMsg::Ring(RingMsg::Info(7))), 7);
    }
}
