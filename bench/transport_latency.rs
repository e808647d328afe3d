//! Transport micro-benchmarks: one-way latency (half ping-pong, 8-byte payload,
//! busy poll, two pinned threads) of ftcoll's reliable UDP transport against a raw UDP socket
//! ping-pong measured in the same run, the in-process transport, the message rate one
//! sending worker sustains through each transport, and what an in-process endpoint's poll
//! costs by the rings it has (one per peer that ever sent to it: a node of a checked
//! correction has rings from its ring neighbours too), idle and with one message waiting, all
//! on one thread (the rings' lines in its cache, as for nodes that share a core).
//!
//! `cargo bench --bench transport_latency` (add `-- --quick` for a shorter run).

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ftcoll::runtime::{TransportKind, endpoints};
use ftcoll::transport::{Delivery, SendError, Transport};

/// The machine's cores, read once before anything is pinned: `get_core_ids` returns the
/// calling thread's allowed cores, so a thread spawned by a pinned one would see only one.
fn cores() -> &'static [core_affinity::CoreId] {
    static CORES: std::sync::OnceLock<Vec<core_affinity::CoreId>> = std::sync::OnceLock::new();
    CORES.get_or_init(|| core_affinity::get_core_ids().unwrap_or_default())
}

fn pin(i: usize) {
    let ids = cores();
    if !ids.is_empty() {
        core_affinity::set_for_current(ids[i % ids.len()]);
    }
}

fn median(mut v: Vec<u64>) -> f64 {
    v.sort_unstable();
    v[v.len() / 2] as f64
}

/// Half round trip of a raw non-blocking UDP socket pair, busy-polled (ns, median).
fn raw_udp(rounds: usize) -> f64 {
    let a = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let b = UdpSocket::bind("127.0.0.1:0").expect("bind");
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    std::thread::scope(|s| {
        s.spawn(|| {
            pin(1);
            let mut buf = [0u8; 64];
            for _ in 0..rounds {
                loop {
                    if b.recv_from(&mut buf).is_ok() {
                        break;
                    }
                }
                b.send_to(&buf[..8], aa).unwrap();
            }
        });
        pin(0);
        let mut buf = [0u8; 64];
        let mut v = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = Instant::now();
            a.send_to(&[7u8; 8], ba).unwrap();
            loop {
                if a.recv_from(&mut buf).is_ok() {
                    break;
                }
            }
            v.push(t.elapsed().as_nanos() as u64 / 2);
        }
        median(v[rounds / 10..].to_vec())
    })
}

fn send(t: &mut dyn Transport, to: u32, m: &[u8]) {
    loop {
        match t.send(to, m, Instant::now()) {
            Ok(()) => return,
            Err(SendError::WindowFull) => {
                t.poll(Instant::now(), &mut |_| {}).unwrap();
            }
            Err(e) => panic!("send: {e}"),
        }
    }
}

fn recv_one(t: &mut dyn Transport) {
    let mut got = false;
    while !got {
        t.poll(Instant::now(), &mut |d| got |= matches!(d, Delivery::Message { .. }))
            .unwrap();
    }
}

/// Half round trip through a transport pair (ns, median).
fn transport_pingpong(kind: TransportKind, rounds: usize) -> f64 {
    let mut eps = endpoints(kind, 2, 9, 9, 0.0).expect("endpoints");
    let (mut b, mut a) = (eps.pop().unwrap().0, eps.pop().unwrap().0);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let done = &done;
        s.spawn(move || {
            pin(1);
            for _ in 0..rounds {
                recv_one(b.as_mut());
                send(b.as_mut(), 0, &[1u8; 8]);
            }
            while !done.load(Ordering::Relaxed) {
                b.poll(Instant::now(), &mut |_| {}).unwrap();
            }
        });
        pin(0);
        let mut v = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = Instant::now();
            send(a.as_mut(), 1, &[7u8; 8]);
            recv_one(a.as_mut());
            v.push(t.elapsed().as_nanos() as u64 / 2);
        }
        done.store(true, Ordering::Relaxed);
        median(v[rounds / 10..].to_vec())
    })
}

/// Messages per second one sending worker pushes through to a receiving one.
fn message_rate(kind: TransportKind, secs: f64) -> f64 {
    let mut eps = endpoints(kind, 2, 10, 10, 0.0).expect("endpoints");
    let (mut b, mut a) = (eps.pop().unwrap().0, eps.pop().unwrap().0);
    let stop = AtomicBool::new(false);
    let received = AtomicU64::new(0);
    std::thread::scope(|s| {
        let (stop, received) = (&stop, &received);
        s.spawn(move || {
            pin(1);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                b.poll(Instant::now(), &mut |d| {
                    if let Delivery::Message { .. } = d {
                        n += 1;
                    }
                })
                .unwrap();
            }
            received.store(n, Ordering::Relaxed);
        });
        pin(0);
        let t = Instant::now();
        while t.elapsed().as_secs_f64() < secs {
            for _ in 0..64 {
                send(a.as_mut(), 1, &[3u8; 8]);
            }
            a.poll(Instant::now(), &mut |_| {}).unwrap();
        }
        // Let the receiver drain what is in flight, then stop it.
        std::thread::sleep(Duration::from_millis(50));
        stop.store(true, Ordering::Relaxed);
    });
    received.load(Ordering::Relaxed) as f64 / secs
}

fn main() {
    cores();
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 20_000 } else { 200_000 };
    let secs = if quick { 1.0 } else { 3.0 };
    println!(
        "one-way latency, 8-byte payload, half ping-pong, busy poll, 2 pinned threads, {rounds} round trips (median)"
    );
    let raw = raw_udp(rounds);
    let udp = transport_pingpong(TransportKind::Udp, rounds);
    let inproc = transport_pingpong(TransportKind::Inproc, rounds);
    println!("  raw UDP socket (floor)      {:>8.2} µs", raw / 1e3);
    println!(
        "  ftcoll udp (reliable)       {:>8.2} µs   ratio to raw: {:.2}",
        udp / 1e3,
        udp / raw
    );
    println!("  ftcoll inproc               {:>8.2} µs", inproc / 1e3);
    println!("message rate of one sending worker ({secs} s, 8-byte messages)");
    println!(
        "  ftcoll udp                  {:>12.0} msg/s",
        message_rate(TransportKind::Udp, secs)
    );
    println!(
        "  ftcoll inproc               {:>12.0} msg/s",
        message_rate(TransportKind::Inproc, secs)
    );
    println!("in-process poll by the endpoint's rings, one thread, {rounds} polls each (median ns)");
    println!("  rings   idle poll   poll receiving one message");
    for rings in [1, 2, 3, 4, 8, 16, 31] {
        let (idle, one) = ftcoll::runtime::ring_poll::polls_by_rings(rings, rounds).expect("ring poll");
        println!("  {rings:>5}   {idle:>9.1}   {one:>9.1}");
    }
}
