//! Bodies of the broadcast protocols' messages ([`crate::protocol::bcast`]).
//!
//! Little-endian; ranks are virtual `u32` (root 0), each checked `< n`; enum tags are one byte.
//!
//! ```text
//! CorrMsg<C>      dir u8 (0 Fwd, 1 Bwd) · kind u8 (0 Normal, 1 Final, 2 Reply, 3 Sos)
//!                 · len u8 (<= C) · len × rank u32 (distinct)
//! TreeMsg<C>      0 · vt u64                 | 1 · CorrMsg<C>
//! GossipMsg<C>    0 · vt u64                 | 1 · CorrMsg<C>
//! BigMsg          (empty)
//! TreeAckMsg      0 (Tree)                   | 1 (Ack)
//! BfbMsg          0 · epoch u32 · lo u32 · hi u32 · total u32 · start u32 · len u8
//!                   · len × rank u32                                          (Tree)
//!                 | 1 · epoch u32 (Ack)      | 2 · epoch u32 · dead rank u32 (Nack)
//!                 | 3 · epoch u32 · have u32 (Gap)
//! ```
//! BFB's tree range must satisfy `lo < hi <= n - total`, and its window of the exclusion log
//! be a valid one (`start + len <= total < n`, entries distinct, never the root, at most
//! `WINDOW`); a Gap's `have` is below `n`.

use super::codec::{Reader, Writer};
use super::{DecodeError, WireMessage, kind};
use crate::protocol::Rank;
use crate::protocol::bcast::bfb::{BfbMsg, Excluded, WINDOW};
use crate::protocol::bcast::big::BigMsg;
use crate::protocol::bcast::corrected_gossip::GossipMsg;
use crate::protocol::bcast::corrected_tree::TreeMsg;
use crate::protocol::bcast::correction::{CorrKind, CorrMsg, Dir, Known};
use crate::protocol::bcast::tree_ack::TreeAckMsg;

const fn max(a: usize, b: usize) -> usize {
    if a > b { a } else { b }
}

/// Bytes of a `CorrMsg<C>` body at most.
const fn corr_max(c: usize) -> usize {
    3 + 4 * c
}

fn put_corr<const C: usize>(w: &mut Writer<'_>, m: &CorrMsg<C>) {
    w.u8(match m.dir {
        Dir::Fwd => 0,
        Dir::Bwd => 1,
    });
    w.u8(match m.kind {
        CorrKind::Normal => 0,
        CorrKind::Final => 1,
        CorrKind::Reply => 2,
        CorrKind::Sos => 3,
    });
    w.u8(m.known.count() as u8);
    for r in m.known.iter() {
        w.u32(r);
    }
}

fn get_corr<const C: usize>(r: &mut Reader<'_>, n: u32) -> Result<CorrMsg<C>, DecodeError> {
    let dir = match r.u8()? {
        0 => Dir::Fwd,
        1 => Dir::Bwd,
        _ => return Err(DecodeError::BadField("corr.dir")),
    };
    let kind = match r.u8()? {
        0 => CorrKind::Normal,
        1 => CorrKind::Final,
        2 => CorrKind::Reply,
        3 => CorrKind::Sos,
        _ => return Err(DecodeError::BadField("corr.kind")),
    };
    let len = usize::from(r.u8()?);
    if len > C {
        return Err(DecodeError::BadField("corr.known.len"));
    }
    let mut ranks = [0 as Rank; C];
    let ranks = ranks.get_mut(..len).ok_or(DecodeError::BadField("corr.known.len"))?;
    for i in 0..len {
        let x = r.rank(n)?;
        let (seen, rest) = ranks
            .split_at_mut_checked(i)
            .ok_or(DecodeError::BadField("corr.known.len"))?;
        if seen.contains(&x) {
            return Err(DecodeError::BadField("corr.known.duplicate"));
        }
        if let Some(slot) = rest.first_mut() {
            *slot = x;
        }
    }
    let known = Known::from_slice(ranks).ok_or(DecodeError::BadField("corr.known.len"))?;
    Ok(CorrMsg { dir, kind, known })
}

impl<const C: usize> WireMessage for CorrMsg<C> {
    const KIND: u8 = kind::with_cap(kind::CORRECTION, C);
    const MAX_BODY: usize = corr_max(C);

    fn encode(&self, out: &mut [u8]) -> usize {
        let mut w = Writer::new(out);
        put_corr(&mut w, self);
        w.len()
    }

    fn decode(body: &[u8], n: u32) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let m = get_corr(&mut r, n)?;
        r.finish()?;
        Ok(m)
    }
}

/// Tree and gossip messages share one layout: tag 0 and the sender's virtual time, or tag 1
/// and a correction message.
fn put_vt_or_corr<const C: usize>(out: &mut [u8], m: Result<u32, &CorrMsg<C>>) -> usize {
    let mut w = Writer::new(out);
    match m {
        Ok(vt) => {
            w.u8(0);
            w.u32(vt);
        }
        Err(c) => {
            w.u8(1);
            put_corr(&mut w, c);
        }
    }
    w.len()
}

fn get_vt_or_corr<const C: usize>(
    body: &[u8],
    n: u32,
    tag: &'static str,
) -> Result<Result<u32, CorrMsg<C>>, DecodeError> {
    let mut r = Reader::new(body);
    let m = match r.u8()? {
        0 => Ok(r.u32()?),
        1 => Err(get_corr(&mut r, n)?),
        _ => return Err(DecodeError::BadField(tag)),
    };
    r.finish()?;
    Ok(m)
}

impl<const C: usize> WireMessage for TreeMsg<C> {
    const KIND: u8 = kind::with_cap(kind::CORRECTED_TREE, C);
    const MAX_BODY: usize = 1 + max(4, corr_max(C));

    fn encode(&self, out: &mut [u8]) -> usize {
        match self {
            TreeMsg::Tree { vt } => put_vt_or_corr::<C>(out, Ok(*vt)),
            TreeMsg::Corr(c) => put_vt_or_corr(out, Err(c)),
        }
    }

    fn decode(body: &[u8], n: u32) -> Result<Self, DecodeError> {
        Ok(match get_vt_or_corr::<C>(body, n, "tree.tag")? {
            Ok(vt) => TreeMsg::Tree { vt },
            Err(c) => TreeMsg::Corr(c),
        })
    }
}

impl<const C: usize> WireMessage for GossipMsg<C> {
    const KIND: u8 = kind::with_cap(kind::CORRECTED_GOSSIP, C);
    const MAX_BODY: usize = 1 + max(4, corr_max(C));

    fn encode(&self, out: &mut [u8]) -> usize {
        match self {
            GossipMsg::Gossip { vt } => put_vt_or_corr::<C>(out, Ok(*vt)),
            GossipMsg::Corr(c) => put_vt_or_corr(out, Err(c)),
        }
    }

    fn decode(body: &[u8], n: u32) -> Result<Self, DecodeError> {
        Ok(match get_vt_or_corr::<C>(body, n, "gossip.tag")? {
            Ok(vt) => GossipMsg::Gossip { vt },
            Err(c) => GossipMsg::Corr(c),
        })
    }
}

impl WireMessage for BigMsg {
    const KIND: u8 = kind::BIG;
    const MAX_BODY: usize = 0;

    fn encode(&self, _out: &mut [u8]) -> usize {
        0
    }

    fn decode(body: &[u8], _n: u32) -> Result<Self, DecodeError> {
        Reader::new(body).finish()?;
        Ok(BigMsg)
    }
}

impl WireMessage for TreeAckMsg {
    const KIND: u8 = kind::TREE_ACK;
    const MAX_BODY: usize = 1;

    fn encode(&self, out: &mut [u8]) -> usize {
        let mut w = Writer::new(out);
        w.u8(match self {
            TreeAckMsg::Tree => 0,
            TreeAckMsg::Ack => 1,
        });
        w.len()
    }

    fn decode(body: &[u8], _n: u32) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let m = match r.u8()? {
            0 => TreeAckMsg::Tree,
            1 => TreeAckMsg::Ack,
            _ => return Err(DecodeError::BadField("tree_ack.tag")),
        };
        r.finish()?;
        Ok(m)
    }
}

impl WireMessage for BfbMsg {
    const KIND: u8 = kind::BFB;
    const MAX_BODY: usize = 1 + 12 + 8 + 1 + 4 * WINDOW;

    fn encode(&self, out: &mut [u8]) -> usize {
        let mut w = Writer::new(out);
        match self {
            BfbMsg::Tree {
                epoch,
                lo,
                hi,
                excluded,
            } => {
                w.u8(0);
                w.u32(*epoch);
                w.u32(*lo);
                w.u32(*hi);
                w.u32(excluded.total());
                w.u32(excluded.start());
                let ex = excluded.as_slice();
                w.u8(ex.len() as u8);
                for &r in ex {
                    w.u32(r);
                }
            }
            BfbMsg::Ack { epoch } => {
                w.u8(1);
                w.u32(*epoch);
            }
            BfbMsg::Nack { epoch, dead } => {
                w.u8(2);
                w.u32(*epoch);
                w.u32(*dead);
            }
            BfbMsg::Gap { epoch, have } => {
                w.u8(3);
                w.u32(*epoch);
                w.u32(*have);
            }
        }
        w.len()
    }

    fn decode(body: &[u8], n: u32) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let m = match r.u8()? {
            0 => {
                let epoch = r.u32()?;
                let lo = r.u32()?;
                let hi = r.u32()?;
                let total = r.u32()?;
                let start = r.u32()?;
                let len = usize::from(r.u8()?);
                let mut ranks = [0 as Rank; WINDOW];
                let ranks = ranks.get_mut(..len).ok_or(DecodeError::BadField("bfb.excluded.len"))?;
                for slot in ranks.iter_mut() {
                    *slot = r.rank(n)?;
                }
                let excluded =
                    Excluded::from_parts(total, start, ranks).ok_or(DecodeError::BadField("bfb.excluded.len"))?;
                if !excluded.is_valid(n) {
                    return Err(DecodeError::BadField("bfb.excluded"));
                }
                // Positions of the live view, which has n - total ranks.
                let live = n.saturating_sub(total);
                if lo >= hi || hi > live {
                    return Err(DecodeError::BadField("bfb.range"));
                }
                BfbMsg::Tree {
                    epoch,
                    lo,
                    hi,
                    excluded,
                }
            }
            1 => BfbMsg::Ack { epoch: r.u32()? },
            2 => BfbMsg::Nack {
                epoch: r.u32()?,
                dead: r.rank(n)?,
            },
            3 => BfbMsg::Gap {
                epoch: r.u32()?,
                have: r.rank(n)?,
            },
            _ => return Err(DecodeError::BadField("bfb.tag")),
        };
        r.finish()?;
        Ok(m)
    }
}
