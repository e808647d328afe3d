//! `ftcoll logp`: LogP parameters of a transport between two nodes, by Netgauge's PRTT
//! method and by the direct method (send and receive call times, round trip) as a cross-check.

use clap::Args;
use serde_json::json;

use crate::runtime::TransportKind;
use crate::runtime::logp::{estimate, netgauge};

#[derive(Args, Debug, Clone)]
pub struct LogpArgs {
    /// Transport to measure.
    #[arg(long, value_enum, default_value = "udp")]
    pub transport: TransportKind,
    /// Message size in bytes.
    #[arg(long, default_value_t = 8)]
    pub size: usize,
    /// Messages per PRTT burst (Netgauge uses about 10–16).
    #[arg(long, default_value_t = 16)]
    pub n: usize,
    /// Repetitions per measurement (medians are reported).
    #[arg(long, default_value_t = 2000)]
    pub reps: usize,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub verbs: crate::cli::verbs::VerbsArgs,
}

/// Runs `ftcoll logp`.
pub fn run(a: &LogpArgs) -> Result<(), String> {
    a.verbs.apply(a.transport)?;
    if a.size == 0 || a.size > 1024 {
        return Err(format!("--size must be in 1..=1024, got {}", a.size));
    }
    if !(2..=1000).contains(&a.n) {
        return Err(format!("--n must be in 2..=1000, got {}", a.n));
    }
    if a.reps < 10 {
        return Err(format!("--reps must be at least 10, got {}", a.reps));
    }
    let p = netgauge(a.transport, a.n, a.size, a.reps)?;
    let d = estimate(a.transport, a.reps, a.size)?;
    if a.json {
        println!("{}", json!({ "transport": a.transport, "prtt": p, "direct": d }));
        return Ok(());
    }
    println!(
        "ftcoll logp: transport={:?} size={}B n={} reps={} (medians)",
        a.transport, a.size, a.n, a.reps
    );
    println!(
        "PRTT(1,0,s) = {:.2} µs   PRTT(n,0,s) = {:.2} µs   PRTT(n,d,s) = {:.2} µs with d = {:.2} µs",
        p.prtt_1_0_ns as f64 / 1e3,
        p.prtt_n_0_ns as f64 / 1e3,
        p.prtt_n_d_ns as f64 / 1e3,
        p.d_ns as f64 / 1e3
    );
    println!(
        "Netgauge PRTT method:  o = {:.3} µs   g = {:.3} µs   L = {:.3} µs",
        p.o_ns / 1e3,
        p.g_ns / 1e3,
        p.l_ns / 1e3
    );
    println!(
        "direct method:         o_s = {:.3} µs   o_r = {:.3} µs   L = {:.3} µs   (RTT {:.2} µs)",
        d.o_send_ns as f64 / 1e3,
        d.o_recv_ns as f64 / 1e3,
        d.l_ns as f64 / 1e3,
        d.rtt_ns as f64 / 1e3
    );
    Ok(())
}
