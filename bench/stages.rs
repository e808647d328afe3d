//! Where a 2-node broadcast's time goes: the node's forwarding path stamped per operation
//! (`src/runtime/node/stages.rs`), the median time between consecutive stages, for the
//! in-process and the UDP transport, beside the coloring latency and the LogGP hop
//! `o_s + L + o_r` measured by the transport-only ping-pong of the same run.
//!
//! `cargo bench --bench stages --features stages` (add `-- --quick` for a shorter run).
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

fn run(kind: TransportKind, iterations: u64, warmup: u64) -> Result<(), String> {
    let est = estimate(kind, 2000, 8)?;
    let model = BenchModel::new(est.o_send_ns, est.o_recv_ns, est.l_ns);
    let algo = resolve_algo(&AlgoSpec::new(AlgoName::CorrectedTree), 2, model.mean_logp(), 0)?;
    let auth = match kind {
        TransportKind::Udp => Some(AuthKey::generate().map_err(|e| e.to_string())?),
        _ => None,
    };
    let bench = Bench {
        algo,
        cluster: ClusterConfig {
            nodes: 2,
            workers: 2,
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
        transport: kind,
        kills: Vec::new(),
        model: model.loggp,
        loss: 0.0,
        auth,
    };
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

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
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
