//! The ERA codecs' tests: round trips of both forms, sizes, malformed bodies.

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
        EraMsg::ResultRequest {
            id: 9,
            dead: RankSet::new(),
        },
        EraMsg::ResultRequest {
            id: 10,
            dead: RankSet::of([0, 5, 99]),
        },
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

/// A random set of at most `max` ranks below `N`.
fn set(rng: &mut ProtoRng, max: u32) -> RankSet {
    let k = rng.below(max + 1);
    RankSet::of((0..k).map(|_| rng.below(N)))
}

/// A random ballot: failed and acknowledged sets from empty to a little past what the
/// compact form takes, `returned_below` at the id, below it, above it, or ⊥.
fn random_ballot<V: Value>(rng: &mut ProtoRng, id: u64, value: V) -> Ballot<V> {
    let failed = set(rng, COMPACT_RANKS as u32 + 3);
    let acked = match rng.below(3) {
        0 => None,
        _ => Some(set(rng, 4)),
    };
    let returned_below = match rng.below(5) {
        0 => u64::MAX,
        1 => id.wrapping_add(1 + u64::from(rng.below(3))),
        2 => id.saturating_sub(rng.next_u64() >> rng.below(64)),
        _ => id.saturating_sub(u64::from(rng.below(3))),
    };
    Ballot {
        value,
        failed,
        acked,
        returned_below,
    }
}

fn random_msg<V: Value>(rng: &mut ProtoRng, value: V) -> EraMsg<V> {
    let id = match rng.below(4) {
        0 => u64::from(rng.below(64)),
        1 => u64::from(rng.below(1 << 20)),
        2 => u64::MAX - u64::from(rng.below(4)),
        _ => rng.next_u64(),
    };
    match rng.below(5) {
        0 => EraMsg::ResultRequest { id, dead: set(rng, 64) },
        1 | 2 => EraMsg::Up {
            id,
            ballot: random_ballot(rng, id, value),
        },
        _ => EraMsg::Down {
            id,
            ballot: random_ballot(rng, id, value),
        },
    }
}

/// Whether `m` has a compact form (the header naming its id).
fn compactable<V>(m: &EraMsg<V>) -> bool {
    match m {
        EraMsg::Up { id, ballot } | EraMsg::Down { id, ballot } => compact_fits(*id, ballot),
        EraMsg::ResultRequest { .. } => false,
    }
}

/// Encodes `m` behind a header of sequence `seq`, decodes it back (it must be `m`), checks
/// that every truncation fails; the body's length and first byte.
fn through_datagram<V: WireValue>(m: &EraMsg<V>, seq: u64) -> (usize, u8) {
    let mut buf = vec![0u8; crate::wire::HEADER_LEN + EraMsg::<V>::MAX_BODY];
    let len = encode_datagram(&mut buf, JOB, 0, seq, 5, m, &[]).unwrap();
    let (h, back, _) = decode_datagram::<EraMsg<V>>(&buf[..len], JOB, N).unwrap();
    assert_eq!(&back, m, "seq {seq}");
    assert_eq!(h.seq, seq);
    for cut in crate::wire::HEADER_LEN..len {
        let mut d = buf[..cut].to_vec();
        // (A consistent header, so that the body's own checks are what refuses it.)
        d[32..34].copy_from_slice(&((cut - crate::wire::HEADER_LEN) as u16).to_le_bytes());
        assert!(decode_datagram::<EraMsg<V>>(&d, JOB, N).is_err(), "{m:?} cut at {cut}");
    }
    let body = len - crate::wire::HEADER_LEN;
    (body, buf[crate::wire::HEADER_LEN])
}

fn random_round_trips<V: WireValue + SimValueForTest>(seed: u64) {
    let mut rng = ProtoRng::new(seed);
    let (mut compact, mut long) = (0, 0);
    for i in 0..3000 {
        let value = V::random(&mut rng);
        let m = random_msg(&mut rng, value);
        let id = m.id();
        // Behind a header that names the agreement: compact where it can be.
        let (len_in, tag_in) = through_datagram(&m, id);
        assert_eq!(tag_in & 0xF0 == COMPACT, compactable(&m), "message {i}: {m:?}");
        // Behind one that does not: always the self-contained form, and no shorter.
        let (len_out, tag_out) = through_datagram(&m, id ^ 1);
        assert!(tag_out <= 2, "{m:?}");
        assert!(len_in <= len_out, "the compact form is never longer: {m:?}");
        let mut buf = vec![0u8; EraMsg::<V>::MAX_BODY];
        let k = m.encode(&mut buf);
        assert_eq!(k, len_out);
        assert_eq!(EraMsg::<V>::decode(&buf[..k], N).as_ref(), Ok(&m));
        if tag_in & 0xF0 == COMPACT {
            compact += 1;
        } else {
            long += 1;
        }
    }
    // Both forms were exercised.
    assert!(compact > 500 && long > 500, "{compact} compact, {long} long");
}

/// Random values of each wire value type.
trait SimValueForTest: Sized {
    fn random(rng: &mut ProtoRng) -> Self;
}

impl SimValueForTest for And32 {
    fn random(rng: &mut ProtoRng) -> Self {
        And32(rng.next_u64() as u32)
    }
}

impl SimValueForTest for And64 {
    fn random(rng: &mut ProtoRng) -> Self {
        And64(rng.next_u64())
    }
}

impl SimValueForTest for RankSet {
    fn random(rng: &mut ProtoRng) -> Self {
        let k = rng.below(6);
        RankSet::of((0..k).map(|_| rng.below(N)))
    }
}

#[test]
fn random_messages_round_trip_in_both_forms() {
    random_round_trips::<And64>(1);
    random_round_trips::<And32>(2);
    random_round_trips::<RankSet>(3);
}

/// A failure-free agreement's UP and DOWN: a 64-bit value, no failures, nothing
/// unacknowledged, the returned prefix at the id.
#[test]
fn failure_free_messages_are_ten_byte_bodies() {
    for id in [0, 1, 22_000, 1 << 40, u64::MAX - 1] {
        let b = Ballot {
            value: And64(!0x0100_2000_0004_0000),
            failed: RankSet::new(),
            acked: Some(RankSet::new()),
            returned_below: id,
        };
        for m in [
            EraMsg::Up { id, ballot: b.clone() },
            EraMsg::Down { id, ballot: b.clone() },
        ] {
            assert_eq!(through_datagram(&m, id).0, 10, "{m:?}");
        }
        let one_failed = Ballot {
            failed: RankSet::of([N - 1]),
            acked: Some(RankSet::of([N - 1])),
            ..b.clone()
        };
        // One failure, acknowledged: tag, value, gap, two sets of one rank (2-byte varints).
        assert_eq!(through_datagram(&EraMsg::Down { id, ballot: one_failed }, id).0, 16);
    }
}

#[test]
fn malformed_compact_bodies_are_rejected() {
    let h = |seq: u64| crate::wire::Header {
        kind: And64::KIND,
        job: JOB,
        root: 0,
        seq,
        sender: 1,
        body_len: 0,
        payload_len: 0,
    };
    let dec = |b: &[u8], seq: u64, n: u32| EraMsg::<And64>::decode_in(&h(seq), b, n);
    let up = |flags: u8, rest: &[u8]| {
        let mut v = vec![COMPACT | flags];
        v.extend_from_slice(&7u64.to_le_bytes());
        v.extend_from_slice(rest);
        v
    };
    // The well-formed one.
    let ok = up(flag::ACKED | flag::SETS, &[0, 2, 3, 0, 1, 3]);
    let m = dec(&ok, 9, N).unwrap();
    let EraMsg::Up { id: 9, ballot } = m else {
        panic!("{m:?}")
    };
    assert_eq!(ballot.failed.as_slice(), &[3, 4]);
    assert_eq!(ballot.acked.unwrap().as_slice(), &[3]);
    assert_eq!(ballot.returned_below, 9);
    // Without a header it cannot know its id.
    assert_eq!(EraMsg::<And64>::decode(&ok, N), Err(DecodeError::BadField("era.tag")));
    // A rank out of range, an overflowing gap, a returned prefix past the id.
    assert_eq!(dec(&ok, 9, 4), Err(DecodeError::RankOutOfRange));
    let mut huge = up(flag::SETS, &[0, 1]);
    huge.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]);
    huge.push(0);
    assert_eq!(dec(&huge, 9, N), Err(DecodeError::RankOutOfRange));
    assert_eq!(
        dec(&up(0, &[10]), 9, N),
        Err(DecodeError::BadField("era.returned_below"))
    );
    // ⊥ through a gap is not the flag's twin.
    assert_eq!(
        dec(&up(0, &[0]), u64::MAX, N),
        Err(DecodeError::BadField("era.returned_below"))
    );
    // Too long a set, trailing and missing bytes.
    let mut long = up(flag::SETS, &[0]);
    long.extend_from_slice(&[0x81, 0x08]);
    assert_eq!(dec(&long, 9, N), Err(DecodeError::BadField("era.failed")));
    let mut trailing = ok.clone();
    trailing.push(0);
    assert_eq!(dec(&trailing, 9, N), Err(DecodeError::LengthMismatch));
    assert_eq!(dec(&ok[..ok.len() - 1], 9, N), Err(DecodeError::LengthMismatch));
    // Unknown tags around the compact ones.
    for tag in [3u8, 0x0F, 0x20, 0xFF] {
        assert_eq!(dec(&[tag; 18], 9, N), Err(DecodeError::BadField("era.tag")), "{tag}");
    }
}

#[test]
fn random_compact_bytes_never_panic() {
    let mut rng = ProtoRng::new(12);
    let mut buf = [0u8; 48];
    for _ in 0..20_000 {
        let len = rng.below(48) as usize;
        for b in buf.iter_mut().take(len) {
            *b = rng.below(256) as u8;
        }
        buf[0] = COMPACT | rng.below(16) as u8;
        let h = crate::wire::Header {
            kind: And64::KIND,
            job: JOB,
            root: 0,
            seq: rng.next_u64() >> rng.below(64),
            sender: 1,
            body_len: len as u16,
            payload_len: 0,
        };
        let _ = EraMsg::<RankSet>::decode_in(&h, &buf[..len], 16);
        let _ = EraMsg::<And64>::decode_in(&h, &buf[..len], 16);
    }
}
