//! What every member of a group of processes must have the same ([`GroupShape`]: how many
//! members, whether it broadcasts, with which algorithm, how many operations in flight,
//! payloads up to what, whether it runs agreement streams),
//! and rank 0's refusal of a member that joined with another ([`encode_refusal`]).
//!
//! A joining member states its shape's [`GroupShape::fingerprint`] in its control `Join`
//! ([`super::control::Msg::Join`]); rank 0's rendezvous compares it with its own and, when
//! they differ, answers with a refusal that carries its shape in full, so that the joining
//! member fails at once and names both (a member admitted with another algorithm would
//! decode none of the others' datagrams, and only time out).
//!
//! Layout of a shape ([`SHAPE_LEN`] bytes, little-endian): broadcasts (1: 0 or 1), streams
//! (1: 0 or 1), 2 reserved zero bytes, members (4), operations in flight (4), longest payload (4), then the
//! algorithm: tag (1), tree (1), order (1), start (1), correction or variant (1), 3 reserved
//! zero bytes, the tree's parameter (4), the correction's or variant's parameter (8),
//! gossip's `T` (8). Without broadcasts every byte after the members is zero. A refusal: magic `FTCR`, version, 3 reserved
//! zero bytes, job (8), the refused rank (4), 4 reserved zero bytes, then the shape. Every
//! field is checked on decode.

use super::codec::{Reader, Writer};
use crate::protocol::bcast::Start;
use crate::protocol::bcast::algo::Algo;
use crate::protocol::bcast::corrected_gossip::Variant;
use crate::protocol::bcast::correction::Correction;
use crate::topology::{Order, TreeKind};

/// Bytes of an encoded [`GroupShape`].
pub const SHAPE_LEN: usize = 44;
const MAGIC: [u8; 4] = *b"FTCR";
const VERSION: u8 = 2;
/// Bytes of a refusal.
pub const REFUSAL_LEN: usize = 24 + SHAPE_LEN;

/// What must be the same at every member of a group of processes.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupShape {
    /// How many members the group has (a member started with another count would join in
    /// another member's place).
    pub members: u32,
    /// The broadcast algorithm; `None`: the group does not broadcast (agreements only).
    pub algo: Option<Algo>,
    /// Broadcasts a member may have in flight past its oldest one not over (0 without).
    pub in_flight: u32,
    /// The longest payload a broadcast carries (0 without).
    pub max_payload: u32,
    /// Whether each member has a socket for agreement streams
    /// ([`crate::group::Member::agree_stream`]).
    pub streams: bool,
}

impl GroupShape {
    /// The shape's bytes.
    pub fn encode(&self) -> [u8; SHAPE_LEN] {
        let mut o = [0u8; SHAPE_LEN];
        let mut w = Writer::new(&mut o);
        let streams = u8::from(self.streams);
        let Some(algo) = &self.algo else {
            w.bytes(&[0, streams, 0, 0]);
            w.u32(self.members);
            return o;
        };
        w.bytes(&[1, streams, 0, 0]);
        w.u32(self.members);
        w.u32(self.in_flight);
        w.u32(self.max_payload);
        let f = AlgoFields::of(algo);
        w.bytes(&[f.tag, f.tree, f.order, f.start, f.sub, 0, 0, 0]);
        w.u32(f.k);
        w.u64(f.a);
        w.u64(f.t);
        debug_assert_eq!(w.len(), SHAPE_LEN);
        o
    }

    /// The shape these bytes encode; `None` for anything malformed.
    pub fn decode(buf: &[u8]) -> Option<Self> {
        if buf.len() != SHAPE_LEN {
            return None;
        }
        let mut r = Reader::new(buf);
        let [broadcasts, streams, z0, z1]: [u8; 4] = r.array().ok()?;
        let members = r.u32().ok()?;
        if broadcasts > 1 || streams > 1 || [z0, z1] != [0; 2] {
            return None;
        }
        let streams = streams == 1;
        if broadcasts == 0 {
            return buf[8..].iter().all(|&b| b == 0).then_some(GroupShape {
                members,
                algo: None,
                in_flight: 0,
                max_payload: 0,
                streams,
            });
        }
        let (in_flight, max_payload) = (r.u32().ok()?, r.u32().ok()?);
        let [tag, tree, order, start, sub, z0, z1, z2] = r.array().ok()?;
        if [z0, z1, z2] != [0; 3] {
            return None;
        }
        let f = AlgoFields {
            tag,
            tree,
            order,
            start,
            sub,
            k: r.u32().ok()?,
            a: r.u64().ok()?,
            t: r.u64().ok()?,
        };
        r.finish().ok()?;
        let algo = f.algo()?;
        // Canonical bytes only: a field the algorithm does not have is zero.
        (AlgoFields::of(&algo) == f).then_some(GroupShape {
            members,
            algo: Some(algo),
            in_flight,
            max_payload,
            streams,
        })
    }

    /// A 64-bit digest of the shape for a control `Join` (FNV-1a over [`GroupShape::encode`];
    /// never 0, which a `Join` uses for "no shape stated").
    pub fn fingerprint(&self) -> u64 {
        super::codec::fnv1a(self.encode()).max(1)
    }

    /// The shape in words, one line.
    pub fn summary(&self) -> String {
        let streams = if self.streams { ", agreement streams" } else { "" };
        match &self.algo {
            None => format!("{} members, agreements only, no broadcasts{streams}", self.members),
            Some(a) => format!(
                "{} members, broadcasts with {}, {} in flight, payloads up to {} bytes{streams}",
                self.members,
                a.describe(),
                self.in_flight,
                self.max_payload
            ),
        }
    }

    /// What differs between `self` (here) and `theirs` (rank 0's), one line: each differing
    /// field with both values.
    pub fn differences(&self, theirs: &GroupShape) -> String {
        let algo = |a: &Option<Algo>| a.as_ref().map_or("none (agreements only)".into(), Algo::describe);
        let mut out = Vec::new();
        if self.members != theirs.members {
            out.push(format!("{} members at rank 0, {} here", theirs.members, self.members));
        }
        if self.algo != theirs.algo {
            out.push(format!(
                "broadcast algorithm {} at rank 0, {} here",
                algo(&theirs.algo),
                algo(&self.algo)
            ));
        }
        if self.in_flight != theirs.in_flight {
            out.push(format!(
                "{} broadcasts in flight at rank 0, {} here",
                theirs.in_flight, self.in_flight
            ));
        }
        if self.max_payload != theirs.max_payload {
            out.push(format!(
                "payloads up to {} bytes at rank 0, {} here",
                theirs.max_payload, self.max_payload
            ));
        }
        if self.streams != theirs.streams {
            let s = |on| if on { "on" } else { "off" };
            out.push(format!(
                "agreement streams {} at rank 0, {} here",
                s(theirs.streams),
                s(self.streams)
            ));
        }
        if out.is_empty() {
            out.push("the same parameters, another encoding".into());
        }
        out.join("; ")
    }
}

/// An algorithm as the shape's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AlgoFields {
    tag: u8,
    tree: u8,
    order: u8,
    start: u8,
    sub: u8,
    k: u32,
    a: u64,
    t: u64,
}

impl AlgoFields {
    fn of(algo: &Algo) -> Self {
        let mut f = AlgoFields {
            tag: 0,
            tree: 0,
            order: 0,
            start: 0,
            sub: 0,
            k: 0,
            a: 0,
            t: 0,
        };
        let tree = |f: &mut AlgoFields, t: &TreeKind, o: Order| {
            (f.tree, f.k) = match *t {
                TreeKind::Kary(k) => (1, k),
                TreeKind::Binomial => (2, 0),
                TreeKind::Lame(k) => (3, k),
                TreeKind::Optimal => (4, 0),
            };
            f.order = match o {
                Order::Interleaved => 1,
                Order::InOrder => 2,
            };
        };
        match algo {
            Algo::CorrectedTree {
                tree: t,
                order,
                correction,
                start,
            } => {
                f.tag = 1;
                tree(&mut f, t, *order);
                f.start = match start {
                    Start::Synchronized => 1,
                    Start::Overlapped => 2,
                };
                (f.sub, f.a) = match *correction {
                    Correction::None => (1, 0),
                    Correction::Opportunistic { d } => (2, u64::from(d)),
                    Correction::Optimized { d } => (3, u64::from(d)),
                    Correction::Checked => (4, 0),
                    Correction::FailProof { f } => (5, u64::from(f)),
                    Correction::Delayed { delay: None } => (6, 0),
                    Correction::Delayed { delay: Some(d) } => (7, d),
                };
            }
            Algo::CorrectedGossip { variant, t } => {
                f.tag = 2;
                f.t = *t;
                (f.sub, f.a) = match *variant {
                    Variant::Gos => (1, 0),
                    Variant::Ocg { c } => (2, c),
                    Variant::Ccg => (3, 0),
                    Variant::Fcg { f } => (4, u64::from(f)),
                };
            }
            Algo::Big => f.tag = 3,
            Algo::Bfb => f.tag = 4,
            Algo::TreeAck { tree: t, order } => {
                f.tag = 5;
                tree(&mut f, t, *order);
            }
        }
        f
    }

    /// The algorithm, if the fields name one (unused fields are checked by the caller).
    fn algo(&self) -> Option<Algo> {
        let small = |v: u64| u32::try_from(v).ok();
        let tree = || {
            let t = match self.tree {
                1 => TreeKind::Kary(self.k),
                2 => TreeKind::Binomial,
                3 => TreeKind::Lame(self.k),
                4 => TreeKind::Optimal,
                _ => return None,
            };
            let o = match self.order {
                1 => Order::Interleaved,
                2 => Order::InOrder,
                _ => return None,
            };
            Some((t, o))
        };
        Some(match self.tag {
            1 => {
                let (tree, order) = tree()?;
                let start = match self.start {
                    1 => Start::Synchronized,
                    2 => Start::Overlapped,
                    _ => return None,
                };
                let correction = match self.sub {
                    1 => Correction::None,
                    2 => Correction::Opportunistic { d: small(self.a)? },
                    3 => Correction::Optimized { d: small(self.a)? },
                    4 => Correction::Checked,
                    5 => Correction::FailProof { f: small(self.a)? },
                    6 => Correction::Delayed { delay: None },
                    7 => Correction::Delayed { delay: Some(self.a) },
                    _ => return None,
                };
                Algo::CorrectedTree {
                    tree,
                    order,
                    correction,
                    start,
                }
            }
            2 => {
                let variant = match self.sub {
                    1 => Variant::Gos,
                    2 => Variant::Ocg { c: self.a },
                    3 => Variant::Ccg,
                    4 => Variant::Fcg { f: small(self.a)? },
                    _ => return None,
                };
                Algo::CorrectedGossip { variant, t: self.t }
            }
            3 => Algo::Big,
            4 => Algo::Bfb,
            5 => {
                let (tree, order) = tree()?;
                Algo::TreeAck { tree, order }
            }
            _ => return None,
        })
    }
}

/// Is this datagram a refusal (so a joining member reads it as one)?
pub fn is_refusal(buf: &[u8]) -> bool {
    buf.starts_with(&MAGIC)
}

/// Rank 0's refusal of `rank`'s join to `job`'s group, whose shape is `shape`.
pub fn encode_refusal(job: u64, rank: u32, shape: &GroupShape) -> [u8; REFUSAL_LEN] {
    let mut o = [0u8; REFUSAL_LEN];
    let mut w = Writer::new(&mut o);
    w.bytes(&MAGIC);
    w.bytes(&[VERSION, 0, 0, 0]);
    w.u64(job);
    w.u32(rank);
    w.u32(0);
    w.bytes(&shape.encode());
    debug_assert_eq!(w.len(), REFUSAL_LEN);
    o
}

/// A refusal of `job`: the rank refused and rank 0's shape; `None` for anything malformed or
/// foreign.
pub fn decode_refusal(buf: &[u8], job: u64) -> Option<(u32, GroupShape)> {
    if buf.len() != REFUSAL_LEN {
        return None;
    }
    let mut r = Reader::new(buf);
    let head: [u8; 8] = r.array().ok()?;
    if head != [MAGIC[0], MAGIC[1], MAGIC[2], MAGIC[3], VERSION, 0, 0, 0] || r.u64().ok()? != job {
        return None;
    }
    let (rank, reserved) = (r.u32().ok()?, r.u32().ok()?);
    if reserved != 0 {
        return None;
    }
    let shape: [u8; SHAPE_LEN] = r.array().ok()?;
    r.finish().ok()?;
    Some((rank, GroupShape::decode(&shape)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes() -> Vec<GroupShape> {
        let tree = |correction, tree| Algo::CorrectedTree {
            tree,
            order: Order::Interleaved,
            correction,
            start: Start::Overlapped,
        };
        let algos = [
            tree(Correction::Checked, TreeKind::Binomial),
            tree(Correction::Opportunistic { d: 3 }, TreeKind::Kary(4)),
            tree(Correction::Optimized { d: 2 }, TreeKind::Lame(2)),
            tree(Correction::FailProof { f: 2 }, TreeKind::Optimal),
            tree(Correction::Delayed { delay: None }, TreeKind::Binomial),
            tree(Correction::Delayed { delay: Some(u64::MAX) }, TreeKind::Binomial),
            tree(Correction::None, TreeKind::Binomial),
            Algo::CorrectedGossip {
                variant: Variant::Ocg { c: 7 },
                t: 40,
            },
            Algo::CorrectedGossip {
                variant: Variant::Fcg { f: 1 },
                t: u64::MAX,
            },
            Algo::CorrectedGossip {
                variant: Variant::Gos,
                t: 3,
            },
            Algo::CorrectedGossip {
                variant: Variant::Ccg,
                t: 3,
            },
            Algo::Big,
            Algo::Bfb,
            Algo::TreeAck {
                tree: TreeKind::Kary(2),
                order: Order::InOrder,
            },
        ];
        let mut out: Vec<_> = algos
            .into_iter()
            .map(|a| GroupShape {
                members: 5,
                algo: Some(a),
                in_flight: 32,
                max_payload: 1000,
                streams: false,
            })
            .collect();
        out.push(GroupShape {
            members: 5,
            algo: None,
            in_flight: 0,
            max_payload: 0,
            streams: false,
        });
        // The same but with agreement streams, with broadcasts and without.
        out.push(GroupShape {
            streams: true,
            ..out[0].clone()
        });
        out.push(GroupShape {
            streams: true,
            ..out[out.len() - 2].clone()
        });
        // The same but for the members' count.
        out.push(GroupShape {
            members: 6,
            ..out[0].clone()
        });
        out.push(GroupShape {
            members: 1,
            ..out[out.len() - 4].clone()
        });
        out
    }

    #[test]
    fn shapes_and_refusals_round_trip_and_their_fingerprints_differ() {
        let all = shapes();
        for s in &all {
            assert_eq!(GroupShape::decode(&s.encode()).as_ref(), Some(s));
            let r = encode_refusal(9, 3, s);
            assert!(is_refusal(&r));
            assert_eq!(decode_refusal(&r, 9), Some((3, s.clone())));
            assert_eq!(decode_refusal(&r, 8), None, "foreign job");
        }
        let mut fps: Vec<u64> = all.iter().map(GroupShape::fingerprint).collect();
        fps.sort_unstable();
        fps.dedup();
        assert_eq!(fps.len(), all.len());
        assert!(!fps.contains(&0));
    }

    #[test]
    fn truncated_or_garbled_shapes_and_refusals_are_refused() {
        for s in shapes() {
            let b = encode_refusal(9, 3, &s);
            for len in 0..b.len() {
                assert_eq!(decode_refusal(&b[..len], 9), None, "truncated to {len}");
                assert_eq!(GroupShape::decode(&s.encode()[..len.min(SHAPE_LEN - 1)]), None);
            }
            let mut long = b.to_vec();
            long.push(0);
            assert_eq!(decode_refusal(&long, 9), None, "trailing byte");
            for i in 0..b.len() {
                for bit in [0x01, 0x80] {
                    let mut c = b;
                    c[i] ^= bit;
                    // A flipped bit breaks the refusal or changes what it says, never panics.
                    if let Some(d) = decode_refusal(&c, 9) {
                        assert_ne!(d, (3, s.clone()), "byte {i} bit {bit:#x} changed nothing");
                    }
                }
            }
        }
    }

    #[test]
    fn differences_name_both_values() {
        let all = shapes();
        let d = all[0].differences(&all[7]);
        assert!(
            d.contains("corrected-gossip variant=ocg") && d.contains("corrected-tree"),
            "{d}"
        );
        let fewer = GroupShape {
            in_flight: 16,
            max_payload: 9,
            ..all[0].clone()
        };
        let d = fewer.differences(&all[0]);
        assert!(d.contains("32 broadcasts in flight at rank 0, 16 here"), "{d}");
        assert!(d.contains("payloads up to 1000 bytes at rank 0, 9 here"), "{d}");
        assert!(!d.contains('\n'));
        let more = GroupShape {
            members: 7,
            ..all[0].clone()
        };
        let d = more.differences(&all[0]);
        assert_eq!(d, "5 members at rank 0, 7 here");
        assert!(all[0].summary().starts_with("5 members, broadcasts with"));
        let streaming = GroupShape {
            streams: true,
            ..all[0].clone()
        };
        assert_eq!(
            streaming.differences(&all[0]),
            "agreement streams off at rank 0, on here"
        );
        assert!(streaming.summary().ends_with(", agreement streams"));
    }

    /// A shape without broadcasts is zero past its members' count; any other byte there, or
    /// a count in the reserved bytes, is refused. Its streams byte is 0 or 1.
    #[test]
    fn a_shape_without_broadcasts_is_canonical() {
        let s = GroupShape {
            members: 3,
            algo: None,
            in_flight: 0,
            max_payload: 0,
            streams: false,
        };
        let b = s.encode();
        assert_eq!(&b[4..8], &3u32.to_le_bytes());
        assert_eq!(GroupShape::decode(&b), Some(s.clone()));
        for i in (2..4).chain(8..SHAPE_LEN) {
            let mut c = b;
            c[i] = 1;
            assert_eq!(GroupShape::decode(&c), None, "byte {i}");
        }
        let mut c = b;
        c[1] = 1;
        assert_eq!(GroupShape::decode(&c), Some(GroupShape { streams: true, ..s }));
        c[1] = 2;
        assert_eq!(GroupShape::decode(&c), None, "streams byte 2");
        c[1] = 0;
        c[0] = 2;
        assert_eq!(GroupShape::decode(&c), None, "broadcasts byte 2");
    }
}
