//! ERA's own cost per agreement, without a network: `n` processes in one thread, their
//! messages handed over at once. Two columns: the protocol alone (messages handed over as
//! values) and the protocol with the wire codec (each message encoded as a whole datagram
//! into one reused buffer and decoded from it, as a node does; no allocation per message),
//! so their difference is the codec's share. What is left of an agreement's failure-free
//! latency once the transport's one-way time is subtracted is this (per hop) plus the
//! runtime's bookkeeping.
//!
//! `cargo bench --bench era_cost` (add `-- --quick` for a shorter run).

use std::collections::VecDeque;
use std::time::Instant;

use ftcoll::protocol::agree::{And64, Era, EraConfig, EraMsg};
use ftcoll::wire::{HEADER_LEN, Header, WireMessage, encode_datagram};

/// Runs `agreements` failure-free agreements, through the codec if `wire`; returns (ns per
/// agreement, messages per agreement).
fn measure(n: u32, agreements: u64, wire: bool) -> (f64, f64) {
    let mut eras: Vec<Era<And64>> = (0..n)
        .map(|r| Era::new(r, n, EraConfig::default()).expect("era"))
        .collect();
    let mut queue: VecDeque<(u32, u32, EraMsg<And64>)> = VecDeque::new();
    let mut buf = vec![0u8; HEADER_LEN + EraMsg::<And64>::MAX_BODY];
    let mut messages = 0u64;
    let t = Instant::now();
    for _ in 0..agreements {
        for era in eras.iter_mut() {
            era.agree(And64(u64::MAX)).expect("window");
        }
        let mut returned = 0;
        while returned < n {
            for (r, era) in eras.iter_mut().enumerate() {
                while let Some((to, m)) = era.poll_send() {
                    queue.push_back((r as u32, to, m));
                    messages += 1;
                }
                while era.poll_outcome().is_some() {
                    returned += 1;
                }
            }
            while let Some((from, to, m)) = queue.pop_front() {
                let m = if wire {
                    let len = encode_datagram(&mut buf, 1, 0, m.id(), from, &m, &[]).expect("encode");
                    let (h, body, _) = Header::decode(&buf[..len], 1, n).expect("header");
                    EraMsg::<And64>::decode_in(&h, body, n).expect("body")
                } else {
                    m
                };
                eras[to as usize].on_message(from, m);
            }
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / agreements as f64;
    (ns, messages as f64 / agreements as f64)
}

/// Rounds per column; the fastest is printed.
const ROUNDS: u64 = 5;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let agreements = if quick { 20_000 } else { 200_000 };
    println!("ERA cost per failure-free agreement, one thread (ns, fastest of {ROUNDS} rounds):");
    println!(
        "{:>6} {:>14} {:>12} {:>12} {:>14} {:>12}",
        "nodes", "msgs/agreement", "protocol", "+codec", "protocol/msg", "+codec/msg"
    );
    for n in [2u32, 4, 8, 32, 128] {
        let k = agreements / u64::from(n).max(1) * 2 / ROUNDS;
        // The fastest of a few rounds, alternated: on a shared machine the slower ones
        // measured someone else's load.
        let (mut era, mut wire, mut msgs) = (f64::MAX, f64::MAX, 0.0);
        for _ in 0..ROUNDS {
            let (e, m) = measure(n, k, false);
            let (w, _) = measure(n, k, true);
            (era, wire, msgs) = (era.min(e), wire.min(w), m);
        }
        println!(
            "{n:>6} {msgs:>14.2} {era:>12.0} {wire:>12.0} {:>14.0} {:>12.0}",
            era / msgs,
            wire / msgs
        );
    }
}
