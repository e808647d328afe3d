//! Valid inputs each fuzz target starts from (mutations of valid inputs reach the deep checks).

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use super::targets::{JOB, SEQ};
use crate::protocol::agree::{And32, And64, Ballot, EraMsg, RankSet, Value};
use crate::protocol::bcast::corrected_tree::TreeMsg;
use crate::protocol::bcast::correction::{CorrKind, CorrMsg, Dir, FAILPROOF_CAP, Known};
use crate::protocol::overlay::bmg_overlay::OverlayMsg;
use crate::protocol::overlay::failure_notice::Notice;
use crate::protocol::overlay::han_finkel::{HfMsg, Item};
use crate::protocol::overlay::ring_to_bmg::BmgMsg;
use crate::protocol::overlay::tree_to_ring::RingMsg;
use crate::transport::udp;
use crate::wire::agree::Heartbeat;
use crate::wire::bootstrap::BootMsg;
use crate::wire::control::{self, Msg};
use crate::wire::join::{self, JobParams};
use crate::wire::watch::WatchMsg;
use crate::wire::{WireMessage, encode_datagram};

const N: u8 = 16;

fn corr() -> CorrMsg<FAILPROOF_CAP> {
    CorrMsg {
        dir: Dir::Bwd,
        kind: CorrKind::Final,
        known: Known::from_slice(&[3, 1, 9]).expect("3 ranks fit"),
    }
}

fn body<M: WireMessage>(m: &M) -> Vec<u8> {
    let mut out = vec![0u8; M::MAX_BODY];
    let k = m.encode(&mut out);
    out.truncate(k);
    out
}

/// `wire_era`'s selector for `And64`, `n`, then `m`'s body behind a header of [`SEQ`].
fn compact(m: &EraMsg<And64>) -> Vec<u8> {
    let mut out = vec![0u8; EraMsg::<And64>::MAX_BODY];
    let k = m.encode_in(SEQ, &mut out);
    let mut v = vec![0, N];
    v.extend_from_slice(&out[..k]);
    v
}

/// `n` then the bytes.
fn with_n(n: u8, b: &[u8]) -> Vec<u8> {
    let mut v = vec![n];
    v.extend_from_slice(b);
    v
}

pub fn wire_header() -> Vec<Vec<u8>> {
    let mut out = vec![0u8; 256];
    let len = encode_datagram(&mut out, JOB, 2, 5, 7, &TreeMsg::Corr(corr()), b"payload").expect("fits");
    let mut small = vec![0u8; 64];
    let len2 = encode_datagram(&mut small, JOB, 0, 0, 1, &TreeMsg::<0>::Tree { vt: 3 }, &[]).expect("fits");
    vec![with_n(N, &out[..len]), with_n(2, &small[..len2])]
}

pub fn wire_tree() -> Vec<Vec<u8>> {
    let picks = |c: u8, b: &[u8]| {
        let mut v = vec![c, N];
        v.extend_from_slice(b);
        v
    };
    vec![
        picks(0, &body(&TreeMsg::<0>::Tree { vt: 42 })),
        picks(1, &body(&TreeMsg::<FAILPROOF_CAP>::Tree { vt: 1 })),
        picks(1, &body(&TreeMsg::Corr(corr()))),
    ]
}

pub fn wire_corr() -> Vec<Vec<u8>> {
    vec![vec![1, N, 1, 3, 2, 4, 0, 0, 0, 5, 0, 0, 0], {
        let mut v = vec![1, N];
        v.extend_from_slice(&body(&corr()));
        v
    }]
}

pub fn wire_bfb() -> Vec<Vec<u8>> {
    let le = |x: u32| x.to_le_bytes();
    let mut tree = vec![N, 0];
    for x in [1u32, 2, 12] {
        tree.extend_from_slice(&le(x));
    }
    // total 2, start 0, 2 entries.
    tree.extend_from_slice(&le(2));
    tree.extend_from_slice(&le(0));
    tree.push(2);
    tree.extend_from_slice(&le(3));
    tree.extend_from_slice(&le(7));
    let mut gap = vec![N, 3];
    gap.extend_from_slice(&le(4));
    gap.extend_from_slice(&le(1));
    let mut ack = vec![N, 1];
    ack.extend_from_slice(&le(4));
    let mut nack = vec![N, 2];
    nack.extend_from_slice(&le(4));
    nack.extend_from_slice(&le(9));
    vec![tree, ack, nack, gap]
}

pub fn wire_small() -> Vec<Vec<u8>> {
    vec![vec![0, N, 0], vec![0, N, 1], vec![1, N]]
}

/// `n`, then one body per message kind (with a selector byte in front where the target picks).
fn picked<M: WireMessage>(pick: Option<u8>, m: &M) -> Vec<u8> {
    let mut v: Vec<u8> = pick.into_iter().collect();
    v.push(N);
    v.extend_from_slice(&body(m));
    v
}

pub fn wire_era() -> Vec<Vec<u8>> {
    fn ballot<V: Value>(value: V) -> Ballot<V> {
        Ballot {
            value,
            failed: RankSet::of([3, 7]),
            acked: Some(RankSet::of([3])),
            returned_below: 41,
        }
    }
    vec![
        picked(
            Some(0),
            &EraMsg::Up {
                id: 42,
                ballot: ballot(And64(0xF0F0)),
            },
        ),
        picked(
            Some(0),
            &EraMsg::Down {
                id: 42,
                ballot: Ballot::<And64>::bottom(),
            },
        ),
        picked(
            Some(0),
            &EraMsg::<And64>::ResultRequest {
                id: 9,
                dead: RankSet::of([1, 3]),
            },
        ),
        // The compact form (its id is the header's sequence).
        compact(&EraMsg::Up {
            id: SEQ,
            ballot: Ballot {
                value: And64(!0x10),
                failed: RankSet::of([2]),
                acked: Some(RankSet::new()),
                returned_below: SEQ - 1,
            },
        }),
        picked(
            Some(1),
            &EraMsg::Up {
                id: 1,
                ballot: ballot(And32(5)),
            },
        ),
        picked(
            Some(2),
            &EraMsg::Down {
                id: 2,
                ballot: ballot(RankSet::of([1, 2])),
            },
        ),
    ]
}

pub fn wire_overlay() -> Vec<Vec<u8>> {
    vec![
        picked(Some(0), &OverlayMsg::Ring(RingMsg::FConnect(3))),
        picked(Some(0), &OverlayMsg::Ring(RingMsg::BConnect(5))),
        picked(Some(0), &OverlayMsg::Bmg(BmgMsg::Up { ident: 4, hop: 2 })),
        picked(
            Some(1),
            &HfMsg {
                items: vec![Item {
                    origin: 2,
                    seq: 7,
                    age: 1,
                }],
                fail: Some((5, 3)),
            },
        ),
    ]
}

pub fn wire_watch() -> Vec<Vec<u8>> {
    vec![
        picked(Some(0), &WatchMsg::Heartbeat),
        picked(
            Some(0),
            &WatchMsg::Overlay(OverlayMsg::Bmg(BmgMsg::Dn { ident: 9, hop: 1 })),
        ),
        picked(
            Some(0),
            &WatchMsg::Notices(vec![Notice { dead: 4, age: 0 }, Notice { dead: 6, age: 2 }]),
        ),
        picked(Some(1), &Heartbeat),
    ]
}

pub fn wire_bootstrap() -> Vec<Vec<u8>> {
    let a = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 47001);
    vec![
        picked(None, &BootMsg::Hello),
        picked(None, &BootMsg::Overlay(OverlayMsg::Ring(RingMsg::Info(2)), a)),
        picked(
            None,
            &BootMsg::Round {
                round: 1,
                entries: vec![(0, a), (3, SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 4), 47003))],
            },
        ),
    ]
}

pub fn udp_datagram() -> Vec<Vec<u8>> {
    let data = |from: u32, seq: u64, ack: u64, payload: &[u8]| {
        let mut d = Vec::with_capacity(udp::HEADER_LEN + payload.len());
        d.extend_from_slice(&udp::MAGIC.to_le_bytes());
        d.push(udp::VERSION);
        d.push(if payload.is_empty() { 2 } else { 1 });
        d.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        d.extend_from_slice(&JOB.to_le_bytes());
        d.extend_from_slice(&from.to_le_bytes());
        d.extend_from_slice(&0u32.to_le_bytes());
        d.extend_from_slice(&seq.to_le_bytes());
        d.extend_from_slice(&ack.to_le_bytes());
        d.extend_from_slice(&0u64.to_le_bytes());
        d.extend_from_slice(&[0; udp::auth::TAG_LEN]);
        d.extend_from_slice(payload);
        d
    };
    let record = |ctl: u8, d: &[u8]| {
        let mut v = vec![ctl];
        v.extend_from_slice(&(d.len() as u16).to_le_bytes());
        v.extend_from_slice(d);
        v
    };
    let mut in_order = Vec::new();
    for seq in [1, 0, 2, 2, 70] {
        in_order.extend(record(4 | 1, &data(1, seq, 0, b"hello")));
    }
    in_order.extend(record(8 | 4 | 2, &data(2, 0, 1, b"x")));
    in_order.extend(record(32 | 4 | 2, &data(2, 0, 1, b"")));
    vec![in_order, record(1, &data(1, 0, 0, b"unsealed"))]
}

pub fn control() -> Vec<Vec<u8>> {
    let addr: SocketAddr = "10.1.2.3:4567".parse().expect("literal address");
    let msgs = [
        Msg::Hello,
        Msg::Report {
            seq: 3,
            delivered_ns: 10,
            last_ns: 20,
            started_ns: 5,
            sent: 2,
            deliveries: 1,
            bad: 0,
            finished: true,
            dropped: false,
        },
        Msg::Dead { iter: 9 },
        Msg::Pong { t1: 1, t2: 2 },
        Msg::Clock {
            offset: -5,
            uncertainty: 3,
        },
        Msg::Join { addr, shape: 7 },
    ];
    msgs.iter().map(|m| with_n(N, &control::encode(JOB, 3, m))).collect()
}

pub fn join() -> Vec<Vec<u8>> {
    let addrs: Vec<SocketAddr> = ["10.0.0.1:5000", "[fe80::1]:7"]
        .iter()
        .map(|a| a.parse().expect("literal address"))
        .collect();
    let p = JobParams {
        o_ns: 1000,
        l_ns: 2500,
        epoch_unix_ns: 42,
        run: [7; 16],
    };
    vec![with_n(4, &join::encode(JOB, 4, 1, &addrs, &p))]
}

pub fn refusal() -> Vec<Vec<u8>> {
    use crate::wire::shape::{GroupShape, encode_refusal};
    let shape = |algo| GroupShape {
        members: 4,
        algo,
        in_flight: 32,
        max_payload: 1000,
        streams: false,
    };
    vec![
        encode_refusal(
            JOB,
            1,
            &shape(Some(crate::protocol::bcast::algo::Algo::CorrectedTree {
                tree: crate::topology::TreeKind::Binomial,
                order: crate::topology::Order::Interleaved,
                correction: crate::protocol::bcast::correction::Correction::Checked,
                start: crate::protocol::bcast::Start::Synchronized,
            })),
        )
        .to_vec(),
        encode_refusal(JOB, 2, &shape(Some(crate::protocol::bcast::algo::Algo::Big))).to_vec(),
        encode_refusal(
            JOB,
            3,
            &GroupShape {
                members: 4,
                algo: None,
                in_flight: 0,
                max_payload: 0,
                streams: true,
            },
        )
        .to_vec(),
    ]
}

pub fn conn_relay() -> Vec<Vec<u8>> {
    use crate::wire::conn::ConnInfo;
    use crate::wire::conn_relay::{Dir, encode};
    let info = |from: u32, to: u32| ConnInfo {
        job: JOB,
        from,
        to,
        qpn: 0x100 + from * 8 + to,
        psn: 7,
        lid: 1,
        gid: [0; 16],
        mtu: 5,
        credit_addr: 4096,
        credit_rkey: 9,
        ring_slots: 16,
        slot_len: crate::transport::MAX_PAYLOAD as u32,
    };
    vec![
        with_n(4, &encode(JOB, 4, Dir::Up, 1, 0, &[info(1, 0), info(1, 2), info(1, 3)])),
        with_n(4, &encode(JOB, 4, Dir::Down, 2, 0, &[info(0, 2), info(3, 2)])),
    ]
}

pub fn conn_record() -> Vec<Vec<u8>> {
    use crate::wire::conn::ConnInfo;
    let c = ConnInfo {
        job: JOB,
        from: 2,
        to: 1,
        qpn: 0x1234,
        psn: 7,
        lid: 1,
        gid: [0xfe; 16],
        mtu: 5,
        credit_addr: 4096,
        credit_rkey: 9,
        ring_slots: 16,
        slot_len: crate::transport::MAX_PAYLOAD as u32,
    };
    let mut hex = vec![4, 1];
    hex.extend_from_slice(c.to_hex().as_bytes());
    let mut bin = vec![4, 1];
    bin.extend_from_slice(&c.encode());
    vec![bin, hex]
}

pub fn agree_stream() -> Vec<Vec<u8>> {
    use crate::wire::stream::{Rec, encode};
    let rec = |entry, ret, fp, ok| Rec { entry, ret, fp, ok };
    vec![
        encode(&[
            (3, rec(5, 9, 77, true)),
            (4, rec(9, 12, 77, true)),
            (9, rec(4, 5, 1, false)),
        ])
        .into_bytes(),
        encode(&[(u64::MAX - 1, rec(u64::MAX - 9, u64::MAX, 0, true))]).into_bytes(),
    ]
}

pub fn hostfile() -> Vec<Vec<u8>> {
    vec![
        with_n(3, b"127.0.0.1:5000\n127.0.0.1:5001 # two\n\n[::1]:5002\n"),
        with_n(2, b"1 10.0.0.2:7\n0 10.0.0.1:7\n"),
    ]
}

pub fn kills() -> Vec<Vec<u8>> {
    vec![with_n(8, b"1@150"), with_n(8, b"2,3@4:sent=2,5@7:sigkill,6@1:recv")]
}

pub fn key_file() -> Vec<Vec<u8>> {
    vec![
        b"00112233445566778899aabbccddeeff\n".to_vec(),
        b"  00112233445566778899AABBCCDDEEFF  ".to_vec(),
    ]
}

pub fn join_line() -> Vec<Vec<u8>> {
    use crate::fuzz::targets::JOIN_NONCES as N;
    use crate::wire::join_line::{Direction, LineSeal, challenge, hello};
    use crate::wire::mac::AuthKey;
    let key = AuthKey::from_bytes(*b"fuzz join key 16");
    let with = |which: u8, keyed: u8, line: String| {
        let mut v = vec![which, keyed];
        v.extend_from_slice(line.as_bytes());
        v.push(b'\n');
        v
    };
    vec![
        with(0, 1, challenge(&N)),
        with(1, 1, hello(Some(&key), super::targets::JOB, 5, &N)),
        with(1, 0, hello(None, super::targets::JOB, 63, &N)),
        with(
            2,
            1,
            LineSeal::new(Some(key.clone()), N, Direction::ToRoot).seal("result 12 34 ok"),
        ),
        with(2, 0, LineSeal::new(None, N, Direction::ToRoot).seal("entered 3")),
    ]
}
