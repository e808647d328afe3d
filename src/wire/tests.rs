//! Whole-datagram tests: round trips of every message, rejection of every malformed body,
//! and a deterministic fuzz loop that must never panic.

use super::*;
use crate::protocol::ProtoRng;
use crate::protocol::bcast::bfb::{BfbMsg, Excluded, WINDOW};
use crate::protocol::bcast::big::BigMsg;
use crate::protocol::bcast::corrected_gossip::GossipMsg;
use crate::protocol::bcast::corrected_tree::TreeMsg;
use crate::protocol::bcast::correction::{CorrKind, CorrMsg, Dir, FAILPROOF_CAP, Known};
use crate::protocol::bcast::tree_ack::TreeAckMsg;

const JOB: u64 = 0xF7C0_11ED_0000_0042;
/// Job size for most tests: room for a full excluded set.
const N: u32 = 64;
const CAP: usize = FAILPROOF_CAP;

fn known<const C: usize>(ranks: &[u32]) -> Known<C> {
    Known::from_slice(ranks).unwrap()
}

fn corr<const C: usize>(dir: Dir, kind: CorrKind, ranks: &[u32]) -> CorrMsg<C> {
    CorrMsg {
        dir,
        kind,
        known: known(ranks),
    }
}

fn excluded(ranks: &[u32]) -> Excluded {
    Excluded::from_slice(ranks).unwrap()
}

/// A full window: entries 10.. of a log of `WINDOW + 10`.
fn full_excluded() -> Excluded {
    let all: Vec<u32> = (1..=WINDOW as u32).collect();
    Excluded::from_parts(WINDOW as u32 + 10, 10, &all).unwrap()
}

fn corr_samples<const C: usize>() -> Vec<CorrMsg<C>> {
    let mut v = Vec::new();
    for dir in [Dir::Fwd, Dir::Bwd] {
        for kind in [CorrKind::Normal, CorrKind::Final, CorrKind::Reply, CorrKind::Sos] {
            v.push(corr(dir, kind, &[]));
        }
    }
    let ranks = [N - 1, 0, 17, 5, 9, 11];
    for len in 1..=C.min(ranks.len()) {
        v.push(corr(Dir::Bwd, CorrKind::Final, &ranks[..len]));
        v.push(corr(Dir::Fwd, CorrKind::Normal, &ranks[..len]));
    }
    v
}

fn tree_samples<const C: usize>() -> Vec<TreeMsg<C>> {
    let mut v = vec![TreeMsg::Tree { vt: 0 }, TreeMsg::Tree { vt: u32::MAX }];
    v.extend(corr_samples::<C>().into_iter().map(TreeMsg::Corr));
    v
}

fn gossip_samples<const C: usize>() -> Vec<GossipMsg<C>> {
    let mut v = vec![GossipMsg::Gossip { vt: 0 }, GossipMsg::Gossip { vt: 123_456_789 }];
    v.extend(corr_samples::<C>().into_iter().map(GossipMsg::Corr));
    v
}

fn bfb_samples() -> Vec<BfbMsg> {
    vec![
        BfbMsg::Tree {
            epoch: 0,
            lo: 1,
            hi: N,
            excluded: Excluded::EMPTY,
        },
        BfbMsg::Tree {
            epoch: u32::MAX,
            lo: 5,
            hi: 9,
            excluded: excluded(&[2, 7, N - 1]),
        },
        BfbMsg::Tree {
            epoch: 32,
            lo: 0,
            hi: N - WINDOW as u32 - 10,
            excluded: full_excluded(),
        },
        BfbMsg::Tree {
            epoch: 9,
            lo: 0,
            hi: 1,
            excluded: Excluded::from_parts(N - 1, N - 3, &[N - 1, 1]).unwrap(),
        },
        BfbMsg::Gap { epoch: 4, have: 0 },
        BfbMsg::Gap {
            epoch: u32::MAX,
            have: N - 1,
        },
        BfbMsg::Ack { epoch: 0 },
        BfbMsg::Ack { epoch: 7 },
        BfbMsg::Nack { epoch: 3, dead: 0 },
        BfbMsg::Nack {
            epoch: u32::MAX,
            dead: N - 1,
        },
    ]
}

/// A datagram carrying `m` and `payload` from sender 5 in operation (root 2, seq 99).
fn datagram<M: WireMessage>(m: &M, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_LEN + M::MAX_BODY + payload.len()];
    let len = encode_datagram(&mut out, JOB, 2, 99, 5, m, payload).unwrap();
    out.truncate(len);
    out
}

/// Encodes `m`, decodes it back, and checks every field and the exact sizes.
fn round_trip<M: WireMessage + PartialEq + std::fmt::Debug>(m: M) {
    let payload: Vec<u8> = (0..37u8).collect();
    let d = datagram(&m, &payload);
    let (h, back, p) = decode_datagram::<M>(&d, JOB, N).unwrap();
    assert_eq!(back, m);
    assert_eq!(p, payload.as_slice());
    assert_eq!((h.kind, h.job, h.root, h.seq, h.sender), (M::KIND, JOB, 2, 99, 5));
    assert!(usize::from(h.body_len) <= M::MAX_BODY, "{m:?}");
    assert_eq!(d.len(), HEADER_LEN + usize::from(h.body_len) + payload.len());
    // The body alone, in a buffer of exactly MAX_BODY.
    let mut body = vec![0u8; M::MAX_BODY];
    let len = m.encode(&mut body);
    assert_eq!(M::decode(&body[..len], N), Ok(m));
}

/// Every decodable datagram for `M`, re-encoded, gives back the same bytes (one encoding per
/// message), and every error is reported, never a panic.
fn check<M: WireMessage>(d: &[u8]) -> Result<(), DecodeError> {
    let (h, m, p) = decode_datagram::<M>(d, JOB, N)?;
    let mut out = vec![0u8; HEADER_LEN + M::MAX_BODY + p.len()];
    let len = encode_datagram(&mut out, h.job, h.root, h.seq, h.sender, &m, p).unwrap();
    assert_eq!(&out[..len], d, "decoding is not canonical");
    Ok(())
}

type Check = fn(&[u8]) -> Result<(), DecodeError>;

const CHECKS: [Check; 11] = [
    check::<BigMsg>,
    check::<TreeAckMsg>,
    check::<BfbMsg>,
    check::<TreeMsg<0>>,
    check::<TreeMsg<CAP>>,
    check::<GossipMsg<0>>,
    check::<GossipMsg<CAP>>,
    check::<CorrMsg<0>>,
    check::<CorrMsg<CAP>>,
    check::<CorrMsg<1>>,
    check::<TreeMsg<1>>,
];

/// One valid datagram of every message type and variant.
fn all_samples() -> Vec<Vec<u8>> {
    let p: &[u8] = b"payload";
    let mut v = vec![datagram(&BigMsg, p), datagram(&BigMsg, &[])];
    v.extend([TreeAckMsg::Tree, TreeAckMsg::Ack].iter().map(|m| datagram(m, p)));
    v.extend(bfb_samples().iter().map(|m| datagram(m, p)));
    v.extend(tree_samples::<0>().iter().map(|m| datagram(m, p)));
    v.extend(tree_samples::<CAP>().iter().map(|m| datagram(m, p)));
    v.extend(gossip_samples::<0>().iter().map(|m| datagram(m, p)));
    v.extend(gossip_samples::<CAP>().iter().map(|m| datagram(m, p)));
    v.extend(corr_samples::<0>().iter().map(|m| datagram(m, p)));
    v.extend(corr_samples::<CAP>().iter().map(|m| datagram(m, p)));
    v
}

/// How many of the checkers accept `d` (a valid datagram is exactly one type).
fn accepted_by(d: &[u8]) -> usize {
    CHECKS.iter().filter(|c| c(d).is_ok()).count()
}

#[test]
fn wire_round_trip_every_message_and_variant() {
    round_trip(BigMsg);
    round_trip(TreeAckMsg::Tree);
    round_trip(TreeAckMsg::Ack);
    bfb_samples().into_iter().for_each(round_trip);
    tree_samples::<0>().into_iter().for_each(round_trip);
    tree_samples::<CAP>().into_iter().for_each(round_trip);
    gossip_samples::<0>().into_iter().for_each(round_trip);
    gossip_samples::<CAP>().into_iter().for_each(round_trip);
    corr_samples::<0>().into_iter().for_each(round_trip);
    corr_samples::<CAP>().into_iter().for_each(round_trip);
}

#[test]
fn wire_max_size_messages_fill_max_body() {
    let full: Vec<u32> = (0..CAP as u32).map(|i| 3 * i + 1).collect();
    let c = corr::<CAP>(Dir::Fwd, CorrKind::Final, &full);
    let mut buf = [0u8; 256];
    assert_eq!(c.encode(&mut buf), CorrMsg::<CAP>::MAX_BODY);
    assert_eq!(TreeMsg::Corr(c).encode(&mut buf), TreeMsg::<CAP>::MAX_BODY);
    assert_eq!(GossipMsg::Corr(c).encode(&mut buf), GossipMsg::<CAP>::MAX_BODY);
    assert_eq!(TreeMsg::<0>::Tree { vt: 1 }.encode(&mut buf), TreeMsg::<0>::MAX_BODY);
    assert_eq!(
        GossipMsg::<0>::Gossip { vt: 1 }.encode(&mut buf),
        GossipMsg::<0>::MAX_BODY
    );
    let b = BfbMsg::Tree {
        epoch: 1,
        lo: 0,
        hi: 1,
        excluded: full_excluded(),
    };
    assert_eq!(b.encode(&mut buf), BfbMsg::MAX_BODY);
    round_trip(b);
    round_trip(c);
    // The largest header + body leaves most of a transport datagram to the payload.
    const { assert!(HEADER_LEN + BfbMsg::MAX_BODY <= 200) };
}

#[test]
fn wire_kinds_are_distinct_and_name_the_capacity() {
    let kinds = [
        BigMsg::KIND,
        TreeAckMsg::KIND,
        BfbMsg::KIND,
        TreeMsg::<0>::KIND,
        TreeMsg::<1>::KIND,
        TreeMsg::<CAP>::KIND,
        GossipMsg::<0>::KIND,
        GossipMsg::<1>::KIND,
        GossipMsg::<CAP>::KIND,
        CorrMsg::<0>::KIND,
        CorrMsg::<1>::KIND,
        CorrMsg::<CAP>::KIND,
    ];
    for (i, a) in kinds.iter().enumerate() {
        assert!(kind::is_known(*a), "{a:#x}");
        for b in &kinds[i + 1..] {
            assert_ne!(a, b);
        }
    }
    // A C = 0 datagram is not a C = 4 one, and the other way round.
    let d0 = datagram(&TreeMsg::<0>::Tree { vt: 5 }, &[]);
    assert_eq!(
        decode_datagram::<TreeMsg<CAP>>(&d0, JOB, N).map(|x| x.1),
        Err(DecodeError::UnknownKind)
    );
    let d4 = datagram(&GossipMsg::<CAP>::Gossip { vt: 5 }, &[]);
    assert_eq!(
        decode_datagram::<GossipMsg<0>>(&d4, JOB, N).map(|x| x.1),
        Err(DecodeError::UnknownKind)
    );
    assert_eq!(
        decode_datagram::<TreeMsg<CAP>>(&d4, JOB, N).map(|x| x.1),
        Err(DecodeError::UnknownKind)
    );
    // Every sample is accepted by exactly one message type.
    for d in all_samples() {
        assert!(accepted_by(&d) <= 1);
    }
}

/// Decodes a bare body as `M` for a job of `n`.
fn body_err<M: WireMessage + std::fmt::Debug>(body: &[u8], n: u32) -> DecodeError {
    M::decode(body, n).unwrap_err()
}

#[test]
fn wire_body_rank_out_of_range_is_rejected() {
    let n = 8;
    // Known ranks.
    let mut b = [0u8; 64];
    let len = corr::<CAP>(Dir::Fwd, CorrKind::Normal, &[1, n]).encode(&mut b);
    assert_eq!(body_err::<CorrMsg<CAP>>(&b[..len], n), DecodeError::RankOutOfRange);
    assert!(CorrMsg::<CAP>::decode(&b[..len], n + 1).is_ok());
    let len = TreeMsg::Corr(corr::<CAP>(Dir::Bwd, CorrKind::Final, &[u32::MAX])).encode(&mut b);
    assert_eq!(body_err::<TreeMsg<CAP>>(&b[..len], n), DecodeError::RankOutOfRange);
    let len = GossipMsg::Corr(corr::<CAP>(Dir::Bwd, CorrKind::Final, &[0, 1, 2, n])).encode(&mut b);
    assert_eq!(body_err::<GossipMsg<CAP>>(&b[..len], n), DecodeError::RankOutOfRange);
    // BFB's excluded set and NACK.
    let mut b = [0u8; 256];
    let tree = BfbMsg::Tree {
        epoch: 0,
        lo: 1,
        hi: 2,
        excluded: excluded(&[3, n]),
    };
    let len = tree.encode(&mut b);
    assert_eq!(body_err::<BfbMsg>(&b[..len], n), DecodeError::RankOutOfRange);
    let len = BfbMsg::Nack { epoch: 0, dead: n }.encode(&mut b);
    assert_eq!(body_err::<BfbMsg>(&b[..len], n), DecodeError::RankOutOfRange);
    assert!(BfbMsg::decode(&b[..len], n + 1).is_ok());
    let len = BfbMsg::Gap { epoch: 0, have: n }.encode(&mut b);
    assert_eq!(body_err::<BfbMsg>(&b[..len], n), DecodeError::RankOutOfRange);
    assert!(BfbMsg::decode(&b[..len], n + 1).is_ok());
}

#[test]
fn wire_body_bad_fields_are_rejected() {
    let bad = |e: DecodeError| matches!(e, DecodeError::BadField(_));
    // Tags.
    for tag in [2u8, 3, 0xFF] {
        let mut b = [tag; 10];
        b[1..].fill(0);
        assert!(bad(body_err::<TreeMsg<0>>(&b, N)));
        assert!(bad(body_err::<GossipMsg<CAP>>(&b, N)));
        assert!(bad(body_err::<TreeAckMsg>(&b[..1], N)));
    }
    assert!(bad(body_err::<BfbMsg>(&[4, 0, 0, 0, 0], N)));
    // Correction direction and kind.
    assert_eq!(body_err::<CorrMsg<0>>(&[2, 0, 0], N), DecodeError::BadField("corr.dir"));
    assert_eq!(
        body_err::<CorrMsg<0>>(&[0, 4, 0], N),
        DecodeError::BadField("corr.kind")
    );
    // Known: longer than the capacity, duplicates.
    assert_eq!(
        body_err::<CorrMsg<0>>(&[0, 0, 1, 0, 0, 0, 0], N),
        DecodeError::BadField("corr.known.len")
    );
    let mut over = vec![0u8, 0, CAP as u8 + 1];
    for r in 0..=CAP as u32 {
        over.extend(r.to_le_bytes());
    }
    assert_eq!(
        body_err::<CorrMsg<CAP>>(&over, N),
        DecodeError::BadField("corr.known.len")
    );
    let dup = [0u8, 0, 2, 3, 0, 0, 0, 3, 0, 0, 0];
    assert_eq!(
        body_err::<CorrMsg<CAP>>(&dup, N),
        DecodeError::BadField("corr.known.duplicate")
    );
    // BFB: range and the window of the exclusion log (whole log unless `at` says otherwise).
    let window = |lo: u32, hi: u32, ex: &[u32], len: u8, total: u32, start: u32| {
        let mut b = vec![0u8];
        for v in [0, lo, hi, total, start] {
            b.extend(v.to_le_bytes());
        }
        b.push(len);
        for r in ex {
            b.extend(r.to_le_bytes());
        }
        BfbMsg::decode(&b, N)
    };
    let tree = |lo: u32, hi: u32, ex: &[u32], len: u8| window(lo, hi, ex, len, u32::from(len), 0);
    assert!(tree(1, 2, &[3, 5], 2).is_ok());
    assert_eq!(tree(2, 2, &[], 0), Err(DecodeError::BadField("bfb.range")));
    assert_eq!(tree(3, 2, &[], 0), Err(DecodeError::BadField("bfb.range")));
    assert_eq!(tree(1, N + 1, &[], 0), Err(DecodeError::BadField("bfb.range")));
    assert_eq!(tree(1, N - 1, &[3, 5], 2), Err(DecodeError::BadField("bfb.range")));
    assert!(tree(1, N - 2, &[3, 5], 2).is_ok());
    // The log is in exclusion order, not sorted; entries are distinct and never the root.
    assert!(tree(1, 2, &[5, 3], 2).is_ok());
    assert_eq!(tree(1, 2, &[3, 3], 2), Err(DecodeError::BadField("bfb.excluded")));
    assert_eq!(tree(1, 2, &[0, 3], 2), Err(DecodeError::BadField("bfb.excluded")));
    // The window lies inside a log shorter than N, and the range counts the whole log.
    assert!(window(1, N - 40, &[3], 1, 40, 39).is_ok());
    assert_eq!(
        window(1, N - 39, &[3], 1, 40, 39),
        Err(DecodeError::BadField("bfb.range"))
    );
    assert_eq!(
        window(0, 1, &[3], 1, 40, 40),
        Err(DecodeError::BadField("bfb.excluded"))
    );
    assert_eq!(window(0, 1, &[], 0, N, 0), Err(DecodeError::BadField("bfb.excluded")));
    assert!(window(0, 1, &[], 0, N - 1, N - 1).is_ok());
    let many: Vec<u32> = (1..=WINDOW as u32 + 1).collect();
    assert_eq!(
        tree(0, 1, &many, many.len() as u8),
        Err(DecodeError::BadField("bfb.excluded.len"))
    );
}

#[test]
fn wire_trailing_bytes_are_rejected() {
    for d in all_samples() {
        let (h, body, _) = Header::decode(&d, JOB, N).unwrap();
        let mut longer = body.to_vec();
        longer.push(0);
        // Through the header (body_len + 1) and as a bare body.
        let mut d2 = d[..HEADER_LEN].to_vec();
        d2[32..34].copy_from_slice(&(h.body_len + 1).to_le_bytes());
        d2.extend(&longer);
        d2.extend(&d[HEADER_LEN + body.len()..]);
        assert_eq!(accepted_by(&d2), 0, "kind {:#x}", h.kind);
        for c in CHECKS {
            let e = c(&d2).unwrap_err();
            assert!(
                matches!(
                    e,
                    DecodeError::LengthMismatch | DecodeError::UnknownKind | DecodeError::TooLarge
                ),
                "{e:?}"
            );
        }
        // A trailing byte after the payload.
        let mut d3 = d.clone();
        d3.push(0);
        assert!(
            CHECKS
                .iter()
                .all(|c| c(&d3) == Err(DecodeError::LengthMismatch) || c(&d3) == Err(DecodeError::UnknownKind))
        );
    }
    assert_eq!(BigMsg::decode(&[0], N), Err(DecodeError::LengthMismatch));
    assert_eq!(TreeAckMsg::decode(&[1, 0], N), Err(DecodeError::LengthMismatch));
    let mut b = [0u8; 32];
    let len = TreeMsg::<0>::Tree { vt: 9 }.encode(&mut b);
    assert_eq!(TreeMsg::<0>::decode(&b[..len + 1], N), Err(DecodeError::LengthMismatch));
    let len = BfbMsg::Ack { epoch: 9 }.encode(&mut b);
    assert_eq!(BfbMsg::decode(&b[..len + 1], N), Err(DecodeError::LengthMismatch));
}

#[test]
fn wire_body_longer_than_max_is_too_large() {
    let mut d = datagram(&TreeAckMsg::Ack, &[]);
    d[32..34].copy_from_slice(&2u16.to_le_bytes());
    d.push(0);
    assert_eq!(
        decode_datagram::<TreeAckMsg>(&d, JOB, N).map(|x| x.1),
        Err(DecodeError::TooLarge)
    );
}

#[test]
fn wire_truncation_at_every_length_is_rejected() {
    for d in all_samples() {
        assert_eq!(accepted_by(&d), 1);
        for len in 0..d.len() {
            assert_eq!(accepted_by(&d[..len]), 0, "len {len} of {}", d.len());
        }
        // Truncated bodies with a consistent header: the body decoder itself must refuse.
        let (h, body, _) = Header::decode(&d, JOB, N).unwrap();
        for len in 0..body.len() {
            let mut t = d[..HEADER_LEN].to_vec();
            t[32..34].copy_from_slice(&(len as u16).to_le_bytes());
            t[34..36].copy_from_slice(&0u16.to_le_bytes());
            t.extend(&body[..len]);
            assert_eq!(accepted_by(&t), 0, "kind {:#x} body len {len}", h.kind);
        }
    }
}

#[test]
fn wire_encode_datagram_reports_too_large() {
    let m = BfbMsg::Ack { epoch: 1 };
    let mut small = vec![0u8; HEADER_LEN + BfbMsg::MAX_BODY - 1];
    assert_eq!(
        encode_datagram(&mut small, JOB, 0, 0, 0, &m, &[]),
        Err(DecodeError::TooLarge)
    );
    // Room for the worst-case body but not the payload.
    let mut out = vec![0u8; HEADER_LEN + BfbMsg::MAX_BODY];
    let payload = vec![7u8; BfbMsg::MAX_BODY];
    assert_eq!(
        encode_datagram(&mut out, JOB, 0, 0, 0, &m, &payload),
        Err(DecodeError::TooLarge)
    );
    // The actual body is short: the payload fits.
    let payload = vec![7u8; BfbMsg::MAX_BODY - 5];
    assert_eq!(encode_datagram(&mut out, JOB, 0, 0, 0, &m, &payload), Ok(out.len()));
    // Payload lengths beyond u16.
    let mut big = vec![0u8; HEADER_LEN + 1 + 70_000];
    let payload = vec![0u8; usize::from(u16::MAX) + 1];
    assert_eq!(
        encode_datagram(&mut big, JOB, 0, 0, 0, &TreeAckMsg::Tree, &payload),
        Err(DecodeError::TooLarge)
    );
    let payload = vec![0u8; usize::from(u16::MAX)];
    let len = encode_datagram(&mut big, JOB, 0, 0, 0, &TreeAckMsg::Tree, &payload).unwrap();
    assert_eq!(check::<TreeAckMsg>(&big[..len]), Ok(()));
    // Bodies into a short buffer: truncated, never a panic.
    let mut tiny = [0u8; 3];
    assert_eq!(m.encode(&mut tiny), 1);
}

#[test]
fn wire_drop_counters_count_each_reason() {
    let all = [
        DecodeError::TooShort,
        DecodeError::BadMagic,
        DecodeError::BadVersion,
        DecodeError::ForeignJob,
        DecodeError::UnknownKind,
        DecodeError::BadFlags,
        DecodeError::RankOutOfRange,
        DecodeError::LengthMismatch,
        DecodeError::BadField("x"),
        DecodeError::TooLarge,
    ];
    let mut c = DropCounters::default();
    for (i, e) in all.iter().enumerate() {
        for _ in 0..=i {
            c.count(*e);
        }
        assert!(!e.to_string().is_empty());
    }
    assert_eq!(c.total(), (1..=10).sum::<u64>());
    assert_eq!((c.too_short, c.bad_field, c.too_large), (1, 9, 10));
    let mut m = c;
    m.merge(&c);
    assert_eq!(m.total(), 2 * c.total());
    let json = serde_json::to_string(&c).unwrap();
    assert!(json.contains("\"rank_out_of_range\":7"), "{json}");
}

/// 100 000 deterministic pseudo-random datagrams: mutated valid ones (bytes flipped, set to
/// extremes, truncated, extended), forged headers with random bodies, and pure noise. No input
/// may panic; whatever decodes re-encodes to the same bytes (checked inside `check`).
#[test]
fn wire_fuzz_never_panics() {
    let samples = all_samples();
    let mut rng = ProtoRng::new(0x5EED_F7C1);
    let mut counters = DropCounters::default();
    let mut accepted = 0u64;
    for _ in 0..100_000 {
        let d = match rng.below(4) {
            0 | 1 => {
                let mut d = samples[rng.below(samples.len() as u32) as usize].clone();
                for _ in 0..1 + rng.below(3) {
                    match rng.below(5) {
                        0 if !d.is_empty() => {
                            let i = rng.below(d.len() as u32) as usize;
                            d[i] ^= 1 << rng.below(8);
                        }
                        1 if !d.is_empty() => {
                            let i = rng.below(d.len() as u32) as usize;
                            d[i] = [0, 1, 0x7F, 0x80, 0xFF][rng.below(5) as usize];
                        }
                        2 => d.truncate(rng.below(d.len() as u32 + 1) as usize),
                        3 => d.push(rng.next_u64() as u8),
                        _ => {
                            // Random byte in the body only (header kept valid).
                            if d.len() > HEADER_LEN {
                                let i = HEADER_LEN + rng.below((d.len() - HEADER_LEN) as u32) as usize;
                                d[i] = rng.next_u64() as u8;
                            }
                        }
                    }
                }
                d
            }
            2 => {
                // A valid header of a random kind, random body of the declared length.
                let body_len = rng.below(48) as u16;
                let h = Header {
                    kind: [0x01, 0x02, 0x03, 0x10, 0x14, 0x20, 0x24, 0x30, 0x34, 0x11][rng.below(10) as usize],
                    job: JOB,
                    root: rng.below(N),
                    seq: rng.next_u64(),
                    sender: rng.below(N),
                    body_len,
                    payload_len: rng.below(4) as u16,
                };
                let mut d = vec![0u8; HEADER_LEN + usize::from(body_len) + usize::from(h.payload_len)];
                h.encode(&mut d);
                for b in &mut d[HEADER_LEN..] {
                    // Small values make valid tags, lengths and ranks likely.
                    *b = if rng.below(2) == 0 {
                        rng.below(4) as u8
                    } else {
                        rng.next_u64() as u8
                    };
                }
                d
            }
            _ => (0..rng.below(200)).map(|_| rng.next_u64() as u8).collect(),
        };
        let n = if rng.below(8) == 0 { rng.below(N + 2) } else { N };
        for c in CHECKS {
            match c(&d) {
                Ok(()) => accepted += 1,
                Err(e) => counters.count(e),
            }
        }
        let _ = Header::decode(&d, JOB, n);
        let _ = decode_datagram::<BfbMsg>(&d, JOB, n);
        let _ = decode_datagram::<CorrMsg<CAP>>(&d, JOB, n);
    }
    // The loop reached deep into the decoders, not only the magic check.
    assert!(accepted > 1000, "{accepted}");
    for (name, v) in [
        ("too_short", counters.too_short),
        ("bad_magic", counters.bad_magic),
        ("bad_version", counters.bad_version),
        ("unknown_kind", counters.unknown_kind),
        ("bad_flags", counters.bad_flags),
        ("foreign_job", counters.foreign_job),
        ("rank_out_of_range", counters.rank_out_of_range),
        ("length_mismatch", counters.length_mismatch),
        ("bad_field", counters.bad_field),
        ("too_large", counters.too_large),
    ] {
        assert!(v > 0, "{name} never hit: {counters:?}");
    }
}

/// `m`'s body decodes back to `m`, and every truncation and one trailing byte fail.
pub(crate) fn round_trips_strictly<M: WireMessage + PartialEq + std::fmt::Debug>(m: &M, n: u32) {
    let mut buf = vec![0u8; M::MAX_BODY];
    let len = m.encode(&mut buf);
    assert_eq!(M::decode(&buf[..len], n).as_ref(), Ok(m));
    for cut in 0..len {
        assert!(M::decode(&buf[..cut], n).is_err(), "{m:?} cut {cut}");
    }
    let mut long = buf[..len].to_vec();
    long.push(0);
    assert!(M::decode(&long, n).is_err());
}
