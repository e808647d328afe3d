//! `ftcoll logp`: LogP parameters of a transport between two nodes, by Netgauge's PRTT
//! method and by the direct method (send and receive call times, round trip) as a cross-check.

use clap::Args;
use serde_json::json;

use std::time::Duration;

use crate::runtime::TransportKind;
use crate::runtime::logp::{Estimate, Prtt, estimate, netgauge};
use crate::runtime::logp_remote::{client, serve};
use crate::runtime::procs::{rank_from_env, rendezvous};
use crate::transport::Transport;
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
    /// Between processes (hosts): exchange addresses or QP data through this directory; rank 0
    /// measures every other rank, the others answer.
    #[arg(long)]
    pub rendezvous: Option<std::path::PathBuf>,
    /// With --rendezvous: this process's rank [default: from the launcher's environment].
    #[arg(long, requires = "rendezvous")]
    pub rank: Option<u32>,
    /// With --rendezvous: processes taking part [default: from the launcher's environment].
    #[arg(long, requires = "rendezvous")]
    pub nodes: Option<u32>,
    /// With --rendezvous and UDP: the IP address to bind and publish.
    #[arg(long, default_value = "127.0.0.1", requires = "rendezvous")]
    pub bind: std::net::IpAddr,
    /// With --rendezvous: how long to wait for the other processes, in seconds.
    #[arg(long = "rendezvous-timeout", default_value_t = 60, requires = "rendezvous")]
    pub rendezvous_timeout: u64,
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
    if let Some(dir) = &a.rendezvous {
        return remote(a, dir);
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
    print!("{}", report(&p, &d));
    Ok(())
}

/// The PRTT and direct-method lines.
fn report(p: &Prtt, d: &Estimate) -> String {
    let mut s = String::new();
    s += &format!(
        "PRTT(1,0,s) = {:.2} µs   PRTT(n,0,s) = {:.2} µs   PRTT(n,d,s) = {:.2} µs with d = {:.2} µs\n",
        p.prtt_1_0_ns as f64 / 1e3,
        p.prtt_n_0_ns as f64 / 1e3,
        p.prtt_n_d_ns as f64 / 1e3,
        p.d_ns as f64 / 1e3
    );
    s += &format!(
        "Netgauge PRTT method:  o = {:.3} µs   g = {:.3} µs   L = {:.3} µs\n",
        p.o_ns / 1e3,
        p.g_ns / 1e3,
        p.l_ns / 1e3
    );
    s += &format!(
        "direct method:         o_s = {:.3} µs   o_r = {:.3} µs   L = {:.3} µs   (RTT {:.2} µs)\n",
        d.o_send_ns as f64 / 1e3,
        d.o_recv_ns as f64 / 1e3,
        d.l_ns as f64 / 1e3,
        d.rtt_ns as f64 / 1e3
    );
    s
}

/// `--rendezvous`: one process of a multi-process measurement.
fn remote(a: &LogpArgs, dir: &std::path::Path) -> Result<(), String> {
    let (rank, n) = match (a.rank, a.nodes) {
        (Some(r), Some(n)) => (r, n),
        _ => rank_from_env()
            .ok_or("rank and size not given: use --rank and --nodes, or run under Slurm, Open MPI or a PMI launcher")?,
    };
    if n < 2 || rank >= n {
        return Err(format!(
            "rank {rank} of {n} processes is invalid (need 0 <= rank < nodes, nodes >= 2)"
        ));
    }
    let timeout = Duration::from_secs(a.rendezvous_timeout);
    let job = 0x10_6f_5e;
    let mut t: Box<dyn Transport> = match a.transport {
        TransportKind::Inproc => return Err("--transport inproc cannot cross processes: use udp or verbs".into()),
        TransportKind::Verbs => crate::transport::verbs::node_endpoint(rank, n, job, 1, dir, timeout)?,
        TransportKind::Udp => {
            let peers = rendezvous(dir, rank, n, a.bind, timeout)?;
            let cfg = UdpConfig {
                job,
                ..UdpConfig::default()
            };
            let t = UdpTransport::bind(rank, &peers, cfg)
                .map_err(|e| format!("cannot bind {}: {e}", peers[rank as usize]))?;
            // Every socket must be bound before rank 0's first datagram.
            crate::transport::verbs::bootstrap::barrier(dir, "udp-bound", rank, n, timeout)?;
            Box::new(t)
        }
    };
    if rank != 0 {
        let served = serve(t.as_mut(), timeout)?;
        if a.json {
            println!(
                "{}",
                json!({ "transport": a.transport, "rank": rank, "served": served })
            );
        } else {
            println!("ftcoll logp: rank {rank} answered rank 0 ({served} messages)");
        }
        return Ok(());
    }
    let res = client(t.as_mut(), a.n, a.size, a.reps)?;
    if a.json {
        println!(
            "{}",
            json!({ "transport": a.transport, "rank": 0, "nodes": n, "peers": res })
        );
        return Ok(());
    }
    println!(
        "ftcoll logp: transport={:?} size={}B n={} reps={} (medians), rank 0 and each of {} other processes via {}",
        a.transport,
        a.size,
        a.n,
        a.reps,
        n - 1,
        dir.display()
    );
    for r in &res {
        println!("rank 0 <-> rank {}:", r.peer);
        print!("{}", report(&r.prtt, &r.direct));
    }
    Ok(())
}
