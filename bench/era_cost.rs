//! ERA's own cost per agreement, without a network: `n` processes in one thread, their
//! messages handed over at once. Two columns: the protocol alone (messages handed over as
//! values) and the protocol with the wire codec (each message encoded as a whole datagram
//! into one reused buffer and decoded from it, as a node does; no allocation per message),
//! so their difference is the codec's share. What is left of an agreement's failure-free
//! latency once the transport's one-way time is subtracted is this (per hop) plus the
//! runtime's bookkeeping. The last two columns are the same agreements once process `n / 2`
//! has died: every survivor was told (`Era::on_dead`), one agreement decided the failure and
//! each survivor acknowledged it (as a node does on a return that reports one), and one more
//! (the stabilizing one) ran untimed, so they are the post-failure agreements of `ftcoll agree
//! --kill`, which the LogP model prices like
//! failure-free ones (no extra message on their path).
//!
//! `cargo bench --bench era_cost` (add `-- --quick` for a shorter run).

use std::collections::VecDeque;
use std::time::Instant;

use ftcoll::protocol::agree::{And64, Era, EraConfig, EraMsg};
use ftcoll::wire::{HEADER_LEN, Header, WireMessage, encode_datagram};

/// Runs `agreements` agreements, through the codec if `wire`, failure-free or (`dead`) once
/// that process has died and the survivors agreed on it and acknowledged it; returns (ns per
/// agreement, messages per agreement).
fn measure(n: u32, agreements: u64, wire: bool, dead: Option<u32>) -> (f64, f64) {
    let mut eras: Vec<Era<And64>> = (0..n)
        .map(|r| Era::new(r, n, EraConfig::default()).expect("era"))
        .collect();
    let mut queue: VecDeque<(u32, u32, EraMsg<And64>)> = VecDeque::new();
    let mut buf = vec![0u8; HEADER_LEN + EraMsg::<And64>::MAX_BODY];
    let live = n - u32::from(dead.is_some());
    if let Some(d) = dead {
        for (r, era) in eras.iter_mut().enumerate() {
            if r as u32 != d {
                era.on_dead(d);
            }
        }
        let (_, reported) = round(&mut eras, &mut queue, &mut buf, dead, live, wire);
        assert_eq!(reported, live, "every survivor's first agreement reports the failure");
        // The stabilizing agreement (which may rebuild the tree) is not timed either.
        round(&mut eras, &mut queue, &mut buf, dead, live, wire);
    }
    let mut messages = 0u64;
    let t = Instant::now();
    for _ in 0..agreements {
        let (m, reported) = round(&mut eras, &mut queue, &mut buf, dead, live, wire);
        assert_eq!(reported, 0, "a failure reported again after it was acknowledged");
        messages += m;
    }
    let ns = t.elapsed().as_nanos() as f64 / agreements as f64;
    (ns, messages as f64 / agreements as f64)
}

/// One agreement of every process but `dead`, until the `live` ones returned; (messages,
/// returns that reported a failure not acknowledged, which are acknowledged).
fn round(
    eras: &mut [Era<And64>],
    queue: &mut VecDeque<(u32, u32, EraMsg<And64>)>,
    buf: &mut [u8],
    dead: Option<u32>,
    live: u32,
    wire: bool,
) -> (u64, u32) {
    let n = eras.len() as u32;
    let (mut messages, mut reported) = (0u64, 0u32);
    for (r, era) in eras.iter_mut().enumerate() {
        if Some(r as u32) != dead {
            era.agree(And64(u64::MAX)).expect("window");
        }
    }
    let mut returned = 0;
    while returned < live {
        for (r, era) in eras.iter_mut().enumerate() {
            if Some(r as u32) == dead {
                continue;
            }
            while let Some((to, m)) = era.poll_send() {
                queue.push_back((r as u32, to, m));
                messages += 1;
            }
            while let Some(o) = era.poll_outcome() {
                returned += 1;
                if !o.ok() {
                    reported += 1;
                    era.acknowledge_failures();
                }
            }
        }
        while let Some((from, to, m)) = queue.pop_front() {
            if Some(to) == dead {
                continue;
            }
            let m = if wire {
                let len = encode_datagram(buf, 1, 0, m.id(), from, &m, &[]).expect("encode");
                let (h, body, _) = Header::decode(&buf[..len], 1, n).expect("header");
                EraMsg::<And64>::decode_in(&h, body, n).expect("body")
            } else {
                m
            };
            eras[to as usize].on_message(from, m);
        }
    }
    (messages, reported)
}

/// Rounds per column; the fastest is printed.
const ROUNDS: u64 = 5;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let agreements = if quick { 20_000 } else { 200_000 };
    println!(
        "ERA cost per agreement, one thread (ns, fastest of {ROUNDS} rounds); failure-free, then with process n/2 dead:"
    );
    println!(
        "{:>6} {:>14} {:>12} {:>12} {:>14} {:>12} {:>12} {:>12}",
        "nodes", "msgs/agreement", "protocol", "+codec", "protocol/msg", "+codec/msg", "dead:proto", "dead:+codec"
    );
    for n in [2u32, 4, 8, 32, 128] {
        let k = agreements / u64::from(n).max(1) * 2 / ROUNDS;
        // The fastest of a few rounds, alternated: on a shared machine the slower ones
        // measured someone else's load.
        let (mut era, mut wire, mut msgs) = (f64::MAX, f64::MAX, 0.0);
        let (mut d_era, mut d_wire) = (f64::MAX, f64::MAX);
        for _ in 0..ROUNDS {
            let (e, m) = measure(n, k, false, None);
            let (w, _) = measure(n, k, true, None);
            let (de, _) = measure(n, k, false, Some(n / 2));
            let (dw, _) = measure(n, k, true, Some(n / 2));
            (era, wire, msgs) = (era.min(e), wire.min(w), m);
            (d_era, d_wire) = (d_era.min(de), d_wire.min(dw));
        }
        println!(
            "{n:>6} {msgs:>14.2} {era:>12.0} {wire:>12.0} {:>14.0} {:>12.0} {d_era:>12.0} {d_wire:>12.0}",
            era / msgs,
            wire / msgs
        );
    }
}
