//! The bodies of the fuzz targets: each feeds arbitrary bytes to one decoder and checks what
//! must hold whatever the bytes (no panic, bounded output, and a successful decode re-encodes
//! to something that decodes to the same value). Each returns a small "outcome" number (which
//! branch the input reached) that the stable harness uses as coarse coverage feedback.

use std::fmt::Debug;

use crate::protocol::agree::{And32, And64, EraMsg, RankSet};
use crate::protocol::bcast::bfb::BfbMsg;
use crate::protocol::bcast::big::BigMsg;
use crate::protocol::bcast::corrected_gossip::GossipMsg;
use crate::protocol::bcast::corrected_tree::TreeMsg;
use crate::protocol::bcast::correction::{CorrMsg, FAILPROOF_CAP};
use crate::protocol::bcast::tree_ack::TreeAckMsg;
use crate::protocol::overlay::bmg_overlay::OverlayMsg;
use crate::protocol::overlay::han_finkel::HfMsg;
use crate::runtime::conn_relay::Gather;
use crate::runtime::{kill, procs};
use crate::wire::agree::Heartbeat;
use crate::wire::bootstrap::BootMsg;
use crate::wire::watch::WatchMsg;
use crate::wire::{self, DecodeError, HEADER_LEN, Header, WireMessage, conn_relay, control, join};

/// The job id every wire target expects (seeds carry it; other ids are foreign).
pub const JOB: u64 = 0xF022_0000_0000_0008;
/// The operation sequence in the header a message body is decoded behind.
pub const SEQ: u64 = 7;

/// Splits the first byte off as the job size `n` (0..=255: covers `n = 0` and small jobs where
/// ranks run out of range).
fn size_and_rest(data: &[u8]) -> (u32, &[u8]) {
    match data.split_first() {
        Some((&n, rest)) => (u32::from(n), rest),
        None => (0, data),
    }
}

fn error_code(e: DecodeError) -> u64 {
    match e {
        DecodeError::TooShort => 1,
        DecodeError::BadMagic => 2,
        DecodeError::BadVersion => 3,
        DecodeError::ForeignJob => 4,
        DecodeError::UnknownKind => 5,
        DecodeError::BadFlags => 6,
        DecodeError::RankOutOfRange => 7,
        DecodeError::LengthMismatch => 8,
        // Field names are distinct static strings: their length separates most of them.
        DecodeError::BadField(name) => 16 + name.len() as u64,
        DecodeError::TooLarge => 9,
    }
}

/// `wire_header`: byte 0 is `n`, the rest a datagram of job [`JOB`].
pub fn wire_header(data: &[u8]) -> u64 {
    let (n, d) = size_and_rest(data);
    match Header::decode(d, JOB, n) {
        Ok((h, body, payload)) => {
            assert!(h.root < n && h.sender < n && h.job == JOB);
            assert_eq!(HEADER_LEN + body.len() + payload.len(), d.len());
            let mut out = [0u8; HEADER_LEN];
            assert_eq!(h.encode(&mut out), HEADER_LEN);
            assert_eq!(&out[..], &d[..HEADER_LEN], "header does not re-encode to its bytes");
            100 + u64::from(h.kind)
        }
        Err(e) => error_code(e),
    }
}

/// A message body: byte 0 is `n`, the rest the body, behind a header of sequence [`SEQ`]
/// (which a compact ERA body reads its id from). Also decoded as a whole datagram behind that
/// header, which must agree with the body decoder.
fn message<M: WireMessage + PartialEq + Debug>(data: &[u8]) -> u64 {
    let (n, body) = size_and_rest(data);
    let h = Header {
        kind: M::KIND,
        job: JOB,
        root: 0,
        seq: SEQ,
        sender: n.saturating_sub(1),
        body_len: body.len().min(usize::from(u16::MAX)) as u16,
        payload_len: 0,
    };
    let direct = M::decode_in(&h, body, n);
    if let Ok(m) = &direct {
        assert!(body.len() <= M::MAX_BODY, "a body longer than MAX_BODY decoded");
        let mut out = vec![0u8; M::MAX_BODY];
        let k = m.encode(&mut out);
        assert!(k <= M::MAX_BODY);
        assert_eq!(
            M::decode(&out[..k], n).as_ref(),
            Ok(m),
            "re-encoding changed the message"
        );
        let k = m.encode_in(SEQ, &mut out);
        assert!(k <= M::MAX_BODY);
        assert_eq!(
            M::decode_in(&h, &out[..k], n).as_ref(),
            Ok(m),
            "re-encoding behind the header changed the message"
        );
    }
    if n > 0 && body.len() <= usize::from(u16::MAX) {
        let mut d = vec![0u8; HEADER_LEN + body.len()];
        h.encode(&mut d);
        d[HEADER_LEN..].copy_from_slice(body);
        let whole = wire::decode_datagram::<M>(&d, JOB, n).map(|(_, m, _)| m);
        match (&direct, &whole) {
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Err(_), Err(_)) => {}
            (a, b) => panic!("body and datagram decoders disagree: {a:?} vs {b:?}"),
        }
    }
    match direct {
        Ok(_) => 100,
        Err(e) => error_code(e),
    }
}

/// Correction capacity of failure-proof correction (the largest the runtime uses).
const CAP: usize = FAILPROOF_CAP;

/// `wire_tree`: `TreeMsg` with and without correction lists (byte 1's low bit picks).
pub fn wire_tree(data: &[u8]) -> u64 {
    pick(data, message::<TreeMsg<0>>, message::<TreeMsg<CAP>>)
}

/// `wire_gossip`: `GossipMsg`, both capacities.
pub fn wire_gossip(data: &[u8]) -> u64 {
    pick(data, message::<GossipMsg<0>>, message::<GossipMsg<CAP>>)
}

/// `wire_corr`: a bare `CorrMsg`, both capacities.
pub fn wire_corr(data: &[u8]) -> u64 {
    pick(data, message::<CorrMsg<0>>, message::<CorrMsg<CAP>>)
}

/// `wire_bfb`: `BfbMsg` (tree ranges, excluded sets, acks, nacks).
pub fn wire_bfb(data: &[u8]) -> u64 {
    message::<BfbMsg>(data)
}

/// `wire_tree_ack` and `wire_big`: the two small bodies, byte 0's low bit picks.
pub fn wire_small(data: &[u8]) -> u64 {
    pick(data, message::<TreeAckMsg>, message::<BigMsg>)
}

/// `wire_era`: ERA's messages (Up, Down, ResultRequest) with the runtime's value (`And64`),
/// the simulator's (`And32`) and failed-set ballots (`RankSet`); byte 0 modulo 3 picks.
pub fn wire_era(data: &[u8]) -> u64 {
    match data.split_first() {
        Some((&c, rest)) => match c % 3 {
            0 => message::<EraMsg<And64>>(rest),
            1 => 1000 + message::<EraMsg<And32>>(rest),
            _ => 2000 + message::<EraMsg<RankSet>>(rest),
        },
        None => 0,
    }
}

/// `wire_overlay`: the overlay's messages
/// (Algorithms 1 and 2 of the BMG paper) and Han–Finkel's round message, byte 0's low bit picks.
pub fn wire_overlay(data: &[u8]) -> u64 {
    pick(data, message::<OverlayMsg>, message::<HfMsg>)
}

/// `wire_watch`: a booted node's watch datagrams (heartbeat, overlay repair, failure notices)
/// and the agreement runtime's heartbeat; byte 0's low bit picks.
pub fn wire_watch(data: &[u8]) -> u64 {
    pick(data, message::<WatchMsg>, message::<Heartbeat>)
}

/// `wire_bootstrap`: the runtime bootstrap's messages (hello, overlay with an address, the
/// all-gather's rounds).
pub fn wire_bootstrap(data: &[u8]) -> u64 {
    message::<BootMsg>(data)
}

/// Byte 0's low bit picks one of two decoders for the rest.
fn pick(data: &[u8], a: fn(&[u8]) -> u64, b: fn(&[u8]) -> u64) -> u64 {
    match data.split_first() {
        Some((&c, rest)) if c & 1 == 0 => a(rest),
        Some((_, rest)) => 1000 + b(rest),
        None => 0,
    }
}

/// `control`: byte 0 is `n`, the rest a control datagram of job [`JOB`].
pub fn control(data: &[u8]) -> u64 {
    let (n, d) = size_and_rest(data);
    match control::decode(d, JOB, n) {
        Some((rank, m)) => {
            assert!(rank < n);
            let again = control::encode(JOB, rank, &m);
            assert_eq!(control::decode(&again, JOB, n), Some((rank, m)));
            100 + u64::from(d.get(5).copied().unwrap_or(0))
        }
        None => 1,
    }
}

/// `join`: byte 0 is `n`, the rest an address-table chunk of job [`JOB`].
pub fn join(data: &[u8]) -> u64 {
    let (n, d) = size_and_rest(data);
    match join::decode(d, JOB, n) {
        Some((first, addrs, p)) => {
            assert!(!addrs.is_empty() && addrs.len() <= join::PER_DATAGRAM);
            assert!(u64::from(first) + addrs.len() as u64 <= u64::from(n));
            let again = join::encode(JOB, n, first, &addrs, &p);
            assert_eq!(join::decode(&again, JOB, n), Some((first, addrs, p)));
            100 + u64::from(d.get(16).copied().unwrap_or(0))
        }
        None => 1,
    }
}

/// `refusal`: rank 0's refusal of a member whose group shape differs, of job [`JOB`]; a
/// decoded one must re-encode to itself.
pub fn refusal(data: &[u8]) -> u64 {
    match wire::shape::decode_refusal(data, JOB) {
        Some((rank, shape)) => {
            let again = wire::shape::encode_refusal(JOB, rank, &shape);
            assert_eq!(&again[..], data);
            let _ = shape.differences(&shape);
            100 + u64::from(data.get(24).copied().unwrap_or(0)) + u64::from(data.get(36).copied().unwrap_or(0))
        }
        None => 1,
    }
}

/// `conn_relay`: byte 0 is `n`, the rest a verbs connection-data chunk of job [`JOB`]; a
/// decoded chunk must re-encode to itself and be taken by a reassembly of its rank.
pub fn conn_relay(data: &[u8]) -> u64 {
    let (n, d) = size_and_rest(data);
    let max = crate::transport::MAX_PAYLOAD as u32;
    match conn_relay::decode(d, JOB, n, max) {
        Ok(c) => {
            assert!(!c.infos.is_empty() && c.infos.len() <= conn_relay::PER_DATAGRAM);
            assert!(c.infos.iter().all(|i| i.from < n && i.to < n && i.from != i.to));
            let again = conn_relay::encode(JOB, n, c.dir, c.rank, c.part, &c.infos);
            assert_eq!(conn_relay::decode(&again, JOB, n, max).as_ref(), Ok(&c));
            let mut g = Gather::new(c.rank, n, c.dir);
            // Two records for one pair that differ are a conflict, never a panic.
            if g.add(&c).is_ok() {
                assert!(g.missing() < n as usize);
            }
            100 + c.infos.len() as u64
        }
        Err(e) => 2 + e.to_string().len() as u64 % 7,
    }
}

/// `conn_record`: byte 0 is `n`, byte 1 the receiving rank, the rest a verbs connection record
/// of job [`JOB`], as bytes and (lossy UTF-8) as a rendezvous file's hex line; a decoded
/// record must re-encode to itself in both forms.
pub fn conn_record(data: &[u8]) -> u64 {
    use crate::wire::conn::ConnInfo;
    let (n, d) = size_and_rest(data);
    let (me, d) = size_and_rest(d);
    let max = crate::transport::MAX_PAYLOAD as u32;
    let check = |c: &ConnInfo| {
        assert!(c.from < n && c.to == me && c.from != me && c.qpn < 1 << 24 && c.psn < 1 << 24);
        assert_eq!(ConnInfo::decode(&c.encode(), JOB, me, n, max), Ok(*c));
        assert_eq!(ConnInfo::from_hex(&c.to_hex(), JOB, me, n, max), Ok(*c));
    };
    let bin = ConnInfo::decode(d, JOB, me, n, max);
    if let Ok(c) = &bin {
        check(c);
    }
    let text = ConnInfo::from_hex(&String::from_utf8_lossy(d), JOB, me, n, max);
    if let Ok(c) = &text {
        check(c);
    }
    match (bin, text) {
        (Ok(_), _) => 100,
        (_, Ok(_)) => 200,
        (Err(e), Err(f)) => 2 + e as u64 * 10 + f as u64,
    }
}

/// `agree_stream`: a line of an agreement return stream (lossy UTF-8, prefix optional); a
/// decoded line holds ascending ids and returns no earlier than their entries, and re-encodes
/// to a line that decodes to the same returns. Errors are one line.
pub fn agree_stream(data: &[u8]) -> u64 {
    use crate::wire::stream::{PREFIX, decode, encode};
    let text = String::from_utf8_lossy(data);
    let body = text.strip_prefix(PREFIX).unwrap_or(&text);
    match decode(body) {
        Ok(recs) => {
            assert!(!recs.is_empty());
            assert!(recs.windows(2).all(|w| w[0].0 < w[1].0));
            assert!(recs.iter().all(|(_, r)| r.ret >= r.entry));
            let again = encode(&recs);
            assert_eq!(decode(&again[PREFIX.len()..]).as_ref(), Ok(&recs));
            100 + recs.len().min(50) as u64
        }
        Err(e) => {
            assert!(!e.contains('\n'), "{e}");
            1 + e.len() as u64 % 64
        }
    }
}

/// `hostfile`: byte 0 is `n`, the rest the file's text (lossy UTF-8, as a file read would fail
/// otherwise). Errors must be one line.
pub fn hostfile(data: &[u8]) -> u64 {
    let (n, d) = size_and_rest(data);
    let text = String::from_utf8_lossy(d);
    match procs::parse_hostfile(&text, n) {
        Ok(addrs) => {
            assert_eq!(addrs.len(), n as usize);
            let again: String = addrs.iter().map(|a| format!("{a}\n")).collect();
            assert_eq!(procs::parse_hostfile(&again, n), Ok(addrs));
            100
        }
        Err(e) => {
            assert!(!e.chars().any(char::is_control), "error not one clean line: {e:?}");
            1 + e.len() as u64 % 64
        }
    }
}

/// `kills`: byte 0 is `n`, the rest a `--kill` spec. A parsed list formats back to itself.
pub fn kills(data: &[u8]) -> u64 {
    let (n, d) = size_and_rest(data);
    let text = String::from_utf8_lossy(d);
    match kill::parse_kills(&text, n) {
        Ok(k) => {
            assert!((k.len() as u64) < u64::from(n.max(1)));
            assert!(k.iter().all(|x| x.rank < n && x.rank != 0));
            let s = kill::format_kills(&k);
            if !k.is_empty() {
                assert_eq!(kill::parse_kills(&s, n), Ok(k.clone()));
            }
            100 + k.len() as u64
        }
        Err(e) => {
            assert!(!e.chars().any(char::is_control), "error not one clean line: {e:?}");
            1 + e.len() as u64 % 64
        }
    }
}

/// The key of the `udp_datagram` target (its seeds are sealed with it).
pub const UDP_KEY: [u8; 16] = *b"ftcoll-fuzz-key!";

/// The peer addresses of the `udp_datagram` target: rank 0 is the endpoint under test.
pub fn udp_peers() -> Vec<std::net::SocketAddr> {
    ["127.0.0.1:0", "127.0.0.1:9", "127.0.0.1:10"]
        .iter()
        .map(|a| a.parse().expect("literal address"))
        .collect()
}

/// `udp_datagram`: the reliable UDP transport's whole receive path (MAC, header, ranks, ACK
/// and SACK ranges, reorder buffer) on a fresh authenticated endpoint of rank 0 in a 3-rank
/// job. The input is records `ctl u8 · len u16 · bytes`: `ctl & 3` picks the source address
/// (ranks 0–2, 3 an address outside the job), `ctl & 4` seals the bytes with the job key
/// first (so that mutations reach past the MAC), `ctl & 8` makes rank 0 send a message to
/// `ctl >> 4 & 1 + 1` first, `ctl & 32` advances the clock by 1 ms.
pub fn udp_datagram(data: &[u8]) -> u64 {
    use crate::transport::udp::{HEADER_LEN as UDP_HEADER, UdpConfig, UdpTransport, auth::AuthKey, seal};
    use crate::transport::{Delivery, Transport};
    use std::time::{Duration, Instant};

    let key = AuthKey::from_bytes(UDP_KEY);
    let cfg = UdpConfig {
        job: JOB,
        auth: Some(key.clone()),
        ..UdpConfig::default()
    };
    let peers = udp_peers();
    let Ok(mut t) = UdpTransport::bind(0, &peers, cfg) else {
        // No loopback socket (sandbox): nothing to fuzz.
        return 0;
    };
    let foreign: std::net::SocketAddr = "127.0.0.1:11".parse().expect("literal address");
    let mut now = Instant::now();
    let mut rest = data;
    let mut outcome = 0u64;
    let mut buf = Vec::new();
    while let [ctl, l0, l1, tail @ ..] = rest {
        let len = usize::from(u16::from_le_bytes([*l0, *l1])).min(tail.len());
        let (bytes, next) = tail.split_at(len);
        rest = next;
        if ctl & 32 != 0 {
            now += Duration::from_millis(1);
        }
        if ctl & 8 != 0 {
            let _ = t.send(u32::from(ctl >> 4 & 1) + 1, bytes.get(..8).unwrap_or(bytes), now);
        }
        buf.clear();
        buf.extend_from_slice(bytes);
        if ctl & 4 != 0 && buf.len() >= UDP_HEADER {
            seal(Some(&key), &mut buf);
        }
        let src = match ctl & 3 {
            3 => foreign,
            r => peers[usize::from(r)],
        };
        let before = t.stats();
        let delivered = t.receive_datagram(&buf, src, now, &mut |d| match d {
            Delivery::Message { from, bytes } => {
                assert!(from == 1 || from == 2, "delivery from rank {from}");
                assert!(bytes.len() <= crate::transport::MAX_PAYLOAD);
            }
            Delivery::Suspect { peer } => assert!(peer == 1 || peer == 2),
            Delivery::Fenced { by } => assert!(by == 1 || by == 2),
        });
        let after = t.stats();
        assert!(delivered <= 65, "one datagram delivered {delivered} messages");
        // A datagram that is not authentic changes nothing but its drop counter.
        if ctl & 4 == 0 && after.bad_mac == before.bad_mac + 1 {
            assert_eq!((after.received, after.duplicates), (before.received, before.duplicates));
        }
        outcome = outcome.wrapping_mul(31).wrapping_add(
            (after.bad_mac - before.bad_mac)
                + 2 * (after.malformed - before.malformed)
                + 4 * (after.foreign_job - before.foreign_job)
                + 8 * (after.bad_rank - before.bad_rank)
                + 16 * (after.foreign - before.foreign)
                + 32 * (after.duplicates - before.duplicates)
                + 64 * delivered as u64,
        ) % 4096;
        let _ = t.poll(now, &mut |_| {});
        assert!(t.unacked() <= 2 * t.config().window);
    }
    outcome
}

/// `key_file`: the text of a key file or of `FTCOLL_KEY` (lossy UTF-8). A parsed key prints
/// back to the same digits; an error is one clean line that never quotes the input.
pub fn key_file(data: &[u8]) -> u64 {
    use crate::transport::udp::auth::AuthKey;
    let text = String::from_utf8_lossy(data);
    match AuthKey::from_hex(&text) {
        Ok(k) => {
            assert_eq!(k.to_hex(), text.trim().to_ascii_lowercase());
            assert_eq!(format!("{k:?}"), "AuthKey(..)");
            100
        }
        Err(e) => {
            // One of the fixed messages: the input is never quoted. (libFuzzer found the input
            // "32 hex digit", a substring of a message, which an earlier oracle took for a quote.)
            assert!(
                e == "a key is 32 hex digits" || e == "a key is hex digits only",
                "unexpected key error: {e:?}"
            );
            1 + e.len() as u64 % 64
        }
    }
}

/// `join_line`: byte 0 picks the parser of an `agree --join` stream line (0: a challenge, 1: a
/// hello, 2: a sealed line), byte 1 whether the run is keyed, the rest is the line (lossy
/// UTF-8, up to its first newline as the reader cuts it). Whatever verifies is canonical (up
/// to the case of hex digits): a challenge re-encodes to the same nonces, a hello that checks
/// is the one its rank would send, a sealed line that opens is the line its body seals to; and
/// nothing verifies under the wrong nonces or direction.
pub fn join_line(data: &[u8]) -> u64 {
    use crate::wire::join_line::{Direction, LineSeal, Nonces, challenge, check_hello, hello, parse_challenge};
    use crate::wire::mac::AuthKey;
    let (Some(&which), Some(&keyed)) = (data.first(), data.get(1)) else {
        return 0;
    };
    let text = String::from_utf8_lossy(&data[2..]);
    // The reader hands out one line at a time: up to and including its first newline.
    let line = text.split_inclusive('\n').next().unwrap_or_default();
    let key = (keyed & 1 == 1).then(|| AuthKey::from_bytes(*b"fuzz join key 16"));
    let n = JOIN_NONCES;
    let other = Nonces { conn: [7; 16], ..n };
    match which % 3 {
        0 => match parse_challenge(line) {
            Some(c) => {
                assert_eq!(parse_challenge(&challenge(&c)), Some(c));
                100
            }
            None => 1,
        },
        1 => match check_hello(line, key.as_ref(), JOB, 64, &n) {
            Some(rank) => {
                assert!(rank < 64);
                // (Hex digits of either case are the same tag.)
                let canonical = hello(key.as_ref(), JOB, rank, &n);
                assert!(
                    line.trim_end_matches(['\r', '\n']).eq_ignore_ascii_case(&canonical),
                    "{line:?}"
                );
                if key.is_some() {
                    assert_eq!(check_hello(line, key.as_ref(), JOB, 64, &other), None);
                }
                101
            }
            None => 2,
        },
        _ => {
            let mut open = LineSeal::new(key.clone(), n, Direction::ToRoot);
            match open.open(line) {
                Some(body) => {
                    let mut seal = LineSeal::new(key.clone(), n, Direction::ToRoot);
                    let sealed = seal.seal(body);
                    let (tag, rest) = sealed.split_once(' ').unwrap_or_default();
                    let (got_tag, got_rest) = line.trim_end_matches(['\r', '\n']).split_once(' ').unwrap_or_default();
                    assert!(tag.eq_ignore_ascii_case(got_tag) && rest == got_rest, "{line:?}");
                    if key.is_some() {
                        let mut back = LineSeal::new(key, n, Direction::FromRoot);
                        assert_eq!(back.open(line), None, "reflected");
                    }
                    102 + body.len().min(50) as u64
                }
                None => 3,
            }
        }
    }
}

/// The nonces of the `join_line` target's stream.
pub const JOIN_NONCES: crate::wire::join_line::Nonces = crate::wire::join_line::Nonces {
    conn: [0x11; 16],
    run: [0x22; 16],
};
