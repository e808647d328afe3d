//! The launchers never release a port between choosing it and a node binding it: a thread
//! that keeps taking every port the kernel gives out (as any other program on the machine
//! may) cannot break a run.

use std::collections::VecDeque;
use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

mod common;

use common::ftcoll;

/// Holds up to `keep` kernel-chosen loopback UDP ports at any time, taking new ones (and
/// letting the oldest go) as fast as it can until `stop`: a port released by one process for
/// another to bind is taken in between with high probability.
fn grabber(stop: Arc<AtomicBool>, keep: usize) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut held = VecDeque::with_capacity(keep);
        let mut taken = 0;
        while !stop.load(Ordering::Acquire) {
            if let Ok(s) = UdpSocket::bind("127.0.0.1:0") {
                taken += 1;
                held.push_back(s);
                if held.len() > keep {
                    held.pop_front();
                }
            }
        }
        taken
    })
}

/// Sockets one grabber may hold: the tests of this file run at once, and each must leave
/// descriptors for the pipes of the processes it starts.
fn keep() -> usize {
    let limit = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Max open files"))?
                .split_whitespace()
                .nth(3)?
                .parse::<usize>()
                .ok()
        })
        .unwrap_or(1024);
    (limit / 8).min(4000)
}

fn under_grabber(args: &[&str]) -> (i32, String, String) {
    let stop = Arc::new(AtomicBool::new(false));
    let g = grabber(stop.clone(), keep());
    let out = ftcoll(args);
    stop.store(true, Ordering::Release);
    assert!(g.join().unwrap() > 0);
    out
}

#[test]
fn agree_procs_nodes_keep_the_ports_they_bind() {
    for _ in 0..3 {
        let (code, _, err) = under_grabber(&["agree", "--procs", "--nodes", "8", "--agreements", "50"]);
        assert_eq!(code, 0, "{err}");
    }
}

#[test]
fn stress_agree_procs_newcomers_keep_the_ports_they_bind() {
    let (code, out, err) = under_grabber(&["stress", "agree", "--procs", "--nodes", "6", "--duration", "2"]);
    assert_eq!(code, 0, "{out}\n{err}");
}

#[test]
fn bench_procs_nodes_keep_the_ports_they_bind() {
    for _ in 0..2 {
        let (code, out, err) = under_grabber(&[
            "bench",
            "--procs",
            "--nodes",
            "8",
            "--iterations",
            "40",
            "--warmup",
            "5",
            "--kill",
            "none",
            "--no-model",
            "--o-ns",
            "1000",
            "--L-ns",
            "2000",
        ]);
        assert_eq!(code, 0, "{out}\n{err}");
    }
}
