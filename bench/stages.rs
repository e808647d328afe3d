//! Where a 2-node broadcast's time goes: the node's forwarding path stamped per operation
//! (`src/runtime/node/stages.rs`), the median time between consecutive stages, for the
//! in-process and the UDP transport, beside the coloring latency and the LogGP hop
//! `o_s + L + o_r` measured by the transport-only ping-pong of the same run.
//!
//! `cargo bench --bench stages --features stages` (add `-- --quick` for a shorter run;
//! `-- --relay [N]` for a relay's stages instead, rank 1 of N = 16 by default, with the
//! checked correction and without: N + 1 cores for a core per node).
//! That build also replaces `target/release/ftcoll` with a `stages` build (`--version` ends
//! in `+stages`, and `bench` says so): measure with `cargo build --release` again after it, or
//! give it its own target directory (`CARGO_TARGET_DIR=target/stages`).
//! The stamps cost a clock read each (printed): the coloring here is that much above an
//! unstamped run's.

use std::time::{Duration, Instant};

use ftcoll::experiment::algo::{AlgoName, AlgoSpec, resolve_algo};
use ftcoll::model::BenchModel;
use ftcoll::runtime::cluster::{ClusterConfig, PollMode};
use ftcoll::runtime::logp::estimate;
use ftcoll::runtime::node::stages::{self, Stage};
use ftcoll::runtime::{Bench, TransportKind};
use ftcoll::transport::udp::auth::AuthKey;

fn quantile(v: &mut [u64], q: f64) -> u64 {
    v.sort_unstable();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// The cost of one stamp: a clock read (ns, median of batches).
fn clock_read_ns() -> f64 {
    let mut v: Vec<u64> = (0..200)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..1000 {
                std::hint::black_box(Instant::now());
            }
            t.elapsed().as_nanos() as u64
        })
        .collect();
    quantile(&mut v, 0.5) as f64 / 1000.0
}

/// A run of `nodes` nodes on as many pinned, busy-polling workers, one operation at a time.
fn pinned_bench(
    algo: ftcoll::experiment::algo::Algo,
    transport: TransportKind,
    nodes: u32,
    model: &BenchModel,
    iterations: u64,
    warmup: u64,
    auth: Option<AuthKey>,
) -> Bench {
    Bench {
        algo,
        cluster: ClusterConfig {
            nodes,
            workers: nodes as usize,
            poll: PollMode::Busy,
            warmup,
            iterations,
            window: 1,
            payload_len: 8,
            tick_ns: model.unit_ns,
            job: 0x57a9e5,
            seed: 1,
            op_timeout: Duration::from_secs(1),
            idle: Duration::from_micros(500),
            pin: true,
            give_up_after: Some(3),
        },
        transport,
        kills: Vec::new(),
        model: model.loggp,
        loss: 0.0,
        auth,
    }
}

fn run(kind: TransportKind, iterations: u64, warmup: u64) -> Result<(), String> {
    let est = estimate(kind, 2000, 8)?;
    let model = BenchModel::new(est.o_send_ns, est.o_recv_ns, est.l_ns);
    let algo = resolve_algo(&AlgoSpec::new(AlgoName::CorrectedTree), 2, model.mean_logp(), 0)?;
    let auth = match kind {
        TransportKind::Udp => Some(AuthKey::generate().map_err(|e| e.to_string())?),
        _ => None,
    };
    let bench = pinned_bench(algo, kind, 2, &model, iterations, warmup, auth);
    let _ = stages::take();
    let res = ftcoll::experiment::bench::local::run(&bench, None)?;
    let iv = stages::intervals(&stages::take(), 0, 1, warmup);
    if iv.is_empty() {
        return Err("no operation had every stage stamped".into());
    }
    let us = |ns: f64| ns / 1e3;
    println!(
        "\n{kind:?}, N = 2, {} operations stamped of {} measured; ping-pong: o_s = {} ns, L = {} ns, o_r = {} ns (hop {} ns)",
        iv.len(),
        res.measured,
        est.o_send_ns,
        est.l_ns,
        est.o_recv_ns,
        est.o_send_ns + est.l_ns + est.o_recv_ns
    );
    println!(
        "{:<4}{:<68}{:>9}{:>9}",
        "", "stage (interval ending at it)", "p50 µs", "mean µs"
    );
    let mut sum_p50 = 0.0;
    for (k, st) in Stage::ALL[1..].iter().enumerate() {
        let mut col: Vec<u64> = iv.iter().map(|r| r[k]).collect();
        let mean = col.iter().sum::<u64>() as f64 / col.len() as f64;
        let p50 = quantile(&mut col, 0.5) as f64;
        sum_p50 += p50;
        println!("{:<4}{:<68}{:>9.3}{:>9.3}", k + 1, st.what(), us(p50), us(mean));
    }
    let mut total: Vec<u64> = iv.iter().map(|r| r.iter().sum()).collect();
    let mut colored: Vec<u64> = iv.iter().map(|r| r[1..].iter().sum()).collect();
    println!(
        "    sum of the p50s {:.3} µs; root step → receiver delivered p50 {:.3} µs; start → delivered (the coloring, stamped) p50 {:.3} µs; bench coloring p50 {:.3} µs",
        us(sum_p50),
        us(quantile(&mut total, 0.5) as f64),
        us(quantile(&mut colored, 0.5) as f64),
        us(res.coloring.value_at_quantile(0.5) as f64)
    );
    Ok(())
}

/// A relay's stages (`--relay`): rank 1 of an inproc broadcast to `n` nodes on `n` pinned
/// workers (binomial tree: its parent is the root, its children 3, 5, 9, …), per operation
/// from its first datagram's poll to its first forward's send, with the checked correction
/// and without. The model has a relay's receipt-to-forward cost the same in both; on a core
/// per node the checked correction's relays took 60–130 ns longer (`docs/measurements.md`).
fn relay(n: u32, iterations: u64, warmup: u64) -> Result<(), String> {
    let kind = TransportKind::Inproc;
    let est = estimate(kind, 2000, 8)?;
    let model = BenchModel::new(est.o_send_ns, est.o_recv_ns, est.l_ns);
    let path = [
        Stage::Polled,
        Stage::Decoded,
        Stage::Opened,
        Stage::Stepped,
        Stage::Delivered,
        Stage::Encoded,
        Stage::Sent,
    ];
    let mut table: Vec<(String, Vec<u64>, f64)> = Vec::new();
    for correction in ["none", "checked"] {
        let spec = AlgoSpec {
            correction: Some(correction.into()),
            ..AlgoSpec::new(AlgoName::CorrectedTree)
        };
        let algo = resolve_algo(&spec, n, model.mean_logp(), 0)?;
        let bench = pinned_bench(algo, kind, n, &model, iterations, warmup, None);
        let _ = stages::take();
        let res = ftcoll::experiment::bench::local::run(&bench, None)?;
        // Each stage's first stamp at rank 1 per operation: the tree message comes first, and
        // the first Encoded and Sent are its first forward (a correction waits for the
        // synchronized start).
        let mut first: std::collections::BTreeMap<u64, [u64; 7]> = Default::default();
        for st in stages::take() {
            let Some(i) = path.iter().position(|&p| p == st.stage) else {
                continue;
            };
            if st.rank != 1 || st.seq < warmup {
                continue;
            }
            let row = first.entry(st.seq).or_insert([u64::MAX; 7]);
            row[i] = row[i].min(st.ns);
        }
        let rows: Vec<[u64; 7]> = first
            .into_values()
            .filter(|r| r.iter().all(|&v| v != u64::MAX))
            .collect();
        if rows.is_empty() {
            return Err(format!("{correction}: no operation had every relay stage stamped"));
        }
        let p50s = (0..6)
            .map(|k| {
                let mut col: Vec<u64> = rows.iter().map(|r| r[k + 1].saturating_sub(r[k])).collect();
                quantile(&mut col, 0.5)
            })
            .collect();
        table.push((
            format!("{correction} ({} ops)", rows.len()),
            p50s,
            res.coloring.value_at_quantile(0.5) as f64 / 1e3,
        ));
    }
    println!("\nInproc, N = {n}, relay rank 1, p50 ns of each interval (ending at the stage named):");
    print!("{:<62}", "stage");
    for (name, _, _) in &table {
        print!("{name:>20}");
    }
    println!();
    for (k, st) in path[1..].iter().enumerate() {
        let what = match st {
            Stage::Encoded => "relay: pass to its first forward's encode",
            Stage::Sent => "relay: the forward's outbox + transport send",
            s => s.what(),
        };
        print!("{:<62}", what);
        for (_, p50s, _) in &table {
            print!("{:>20}", p50s[k]);
        }
        println!();
    }
    print!("{:<62}", "bench coloring p50 µs");
    for (_, _, c) in &table {
        print!("{c:>20.3}");
    }
    println!();
    Ok(())
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    if let Some(i) = std::env::args().position(|a| a == "--relay") {
        let n = std::env::args().nth(i + 1).and_then(|v| v.parse().ok()).unwrap_or(16);
        let (iterations, warmup) = if quick { (2000, 200) } else { (10_000, 1000) };
        if let Err(e) = relay(n, iterations, warmup) {
            eprintln!("stages: relay: {e}");
            std::process::exit(1);
        }
        return;
    }
    let (iterations, warmup) = if quick { (2000, 200) } else { (20_000, 1000) };
    let clock = clock_read_ns();
    println!(
        "stage stamps: {clock:.1} ns per clock read, {} stamps on the path from the root's start (≈ {:.2} µs of the coloring below)",
        stages::STAGES - 1,
        (stages::STAGES - 1) as f64 * clock / 1e3
    );
    for kind in [TransportKind::Inproc, TransportKind::Udp] {
        if let Err(e) = run(kind, iterations, warmup) {
            eprintln!("stages: {kind:?}: {e}");
            std::process::exit(1);
        }
    }
}
