//! ERA's own cost per agreement, without a network: `n` processes in one thread, their
//! messages encoded and decoded as on the wire and handed over at once. What is left of an
//! agreement's failure-free latency once the transport's one-way time is subtracted is this
//! (per hop) plus the runtime's bookkeeping.
//!
//! `cargo bench --bench era_cost` (add `-- --quick` for a shorter run).

use std::collections::VecDeque;
use std::time::Instant;

use ftcoll::protocol::agree::{And64, Era, EraConfig, EraMsg};
use ftcoll::wire::{HEADER_LEN, Header, WireMessage, encode_datagram};

/// Runs `agreements` failure-free agreements; returns (ns per agreement, messages per agreement).
fn measure(n: u32, agreements: u64) -> (f64, f64) {
    let mut eras: Vec<Era<And64>> = (0..n)
        .map(|r| Era::new(r, n, EraConfig::default()).expect("era"))
        .collect();
    let mut wire: VecDeque<(u32, u32, Vec<u8>)> = VecDeque::new();
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
                    let len = encode_datagram(&mut buf, 1, 0, m.id(), r as u32, &m, &[]).expect("encode");
                    wire.push_back((r as u32, to, buf[..len].to_vec()));
                    messages += 1;
                }
                while era.poll_outcome().is_some() {
                    returned += 1;
                }
            }
            while let Some((from, to, bytes)) = wire.pop_front() {
                let (_, body, _) = Header::decode(&bytes, 1, n).expect("header");
                let m = EraMsg::<And64>::decode(body, n).expect("body");
                eras[to as usize].on_message(from, m);
            }
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / agreements as f64;
    (ns, messages as f64 / agreements as f64)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let agreements = if quick { 20_000 } else { 200_000 };
    println!("ERA cost per failure-free agreement, one thread, wire encoding included:");
    println!(
        "{:>6} {:>14} {:>14} {:>16}",
        "nodes", "ns/agreement", "msgs/agreement", "ns/message"
    );
    for n in [2u32, 4, 8, 32, 128] {
        let (ns, msgs) = measure(n, agreements / u64::from(n).max(1) * 2);
        println!("{n:>6} {ns:>14.0} {msgs:>14.2} {:>16.0}", ns / msgs);
    }
}
