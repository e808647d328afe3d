//! `ftcoll logp`: LogP parameters of a transport between two nodes, by Netgauge's PRTT
//! method and by the direct method (send and receive call times, round trip) as a cross-check.

use clap::Args;
use serde_json::json;

use crate::runtime::TransportKind;
use crate::runtime::logp::{estimate, netgauge};
use crate::runtime::logp_remote::{measure, serve};
use crate::transport::udp::{UdpConfig, UdpTransport};

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
    /// Measure between two hosts instead of two endpoints of this process: `IP_A,IP_B`; run
    /// it on both with `--rank 0` (measures, prints) and `--rank 1` (echoes).
    #[arg(long, value_name = "IP_A,IP_B", requires = "rank")]
    pub between: Option<String>,
    /// With --between: this host's rank (0 or 1).
    #[arg(long, requires = "between")]
    pub rank: Option<u32>,
    /// With --between: the UDP port on both hosts.
    #[arg(long, default_value_t = 47100)]
    pub port: u16,
    /// Emulated one-way link delay in ns, held in the UDP transport on receive (for kernels
    /// without `netem`; the netns script passes it) [default: 0, off].
    #[arg(long = "emulate-delay-ns", default_value_t = 0)]
    pub emulate_delay_ns: u64,
    /// Uniform jitter added to --emulate-delay-ns, ns.
    #[arg(long = "emulate-jitter-ns", default_value_t = 0)]
    pub emulate_jitter_ns: u64,
    /// With --between: how both hosts wait for datagrams (`blocking` sleeps in the kernel, as
    /// `bench --poll blocking` nodes do; the wake-up then counts in L).
    #[arg(long, value_enum, default_value = "busy")]
    pub poll: crate::runtime::cluster::PollMode,
    /// The L you expect (e.g. an emulated link's netem delay), ns: the ratio is printed.
    #[arg(long = "expected-L-ns")]
    pub expected_l_ns: Option<u64>,
}

/// The two hosts of `--between`.
fn hosts(text: &str, port: u16) -> Result<Vec<std::net::SocketAddr>, String> {
    let v: Vec<std::net::SocketAddr> = text
        .split(',')
        .map(|h| {
            h.trim()
                .parse::<std::net::IpAddr>()
                .map(|ip| std::net::SocketAddr::new(ip, port))
                .map_err(|_| format!("--between: '{}' is not an IP address", h.trim()))
        })
        .collect::<Result<_, _>>()?;
    if v.len() != 2 {
        return Err(format!("--between needs exactly two IP addresses, got {}", v.len()));
    }
    Ok(v)
}

/// Runs `ftcoll logp`.
pub fn run(a: &LogpArgs) -> Result<(), String> {
    if a.size == 0 || a.size > 1024 {
        return Err(format!("--size must be in 1..=1024, got {}", a.size));
    }
    if !(2..=1000).contains(&a.n) {
        return Err(format!("--n must be in 2..=1000, got {}", a.n));
    }
    if a.reps < 10 {
        return Err(format!("--reps must be at least 10, got {}", a.reps));
    }
    let (p, d) = match (&a.between, a.rank) {
        (Some(b), Some(rank)) => {
            if a.transport != TransportKind::Udp {
                return Err("--between measures over --transport udp".into());
            }
            if rank > 1 {
                return Err(format!("--rank must be 0 or 1, got {rank}"));
            }
            let peers = hosts(b, a.port)?;
            let blocking = a.poll != crate::runtime::cluster::PollMode::Busy;
            let cfg = UdpConfig {
                job: 0x106f_0000 ^ u64::from(a.port),
                delay: std::time::Duration::from_nanos(a.emulate_delay_ns),
                delay_jitter: std::time::Duration::from_nanos(a.emulate_jitter_ns),
                ..UdpConfig::default()
            };
            let mut t = UdpTransport::bind(rank, &peers, cfg)
                .map_err(|e| format!("cannot bind {}: {e}", peers[rank as usize]))?;
            if rank == 1 {
                return serve(&mut t, std::time::Duration::from_secs(60), blocking);
            }
            measure(&mut t, a.n, a.size, a.reps, blocking)?
        }
        _ if a.emulate_delay_ns > 0 || a.emulate_jitter_ns > 0 => {
            return Err("--emulate-delay-ns applies to --between (two hosts)".into());
        }
        _ => (
            netgauge(a.transport, a.n, a.size, a.reps)?,
            estimate(a.transport, a.reps, a.size)?,
        ),
    };
    let ratio = |l: f64| a.expected_l_ns.map(|e| l / e.max(1) as f64);
    if a.json {
        println!(
            "{}",
            json!({
                "transport": a.transport, "between": a.between, "prtt": p, "direct": d,
                "expected_L_ns": a.expected_l_ns,
                "L_over_expected": {"prtt": ratio(p.l_ns), "direct": ratio(d.l_ns as f64)},
            })
        );
        return Ok(());
    }
    println!(
        "ftcoll logp: transport={:?}{} size={}B n={} reps={} (medians)",
        a.transport,
        a.between.as_ref().map(|b| format!(" between {b}")).unwrap_or_default(),
        a.size,
        a.n,
        a.reps
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
    if let (Some(e), Some(rp), Some(rd)) = (a.expected_l_ns, ratio(p.l_ns), ratio(d.l_ns as f64)) {
        println!(
            "expected L = {:.3} µs:  measured/expected  PRTT {rp:.2}   direct {rd:.2}",
            e as f64 / 1e3
        );
    }
    Ok(())
}
