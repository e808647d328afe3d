//! `logp`: LogP parameters of a transport between two endpoints of this process, two hosts
//! (`between`) or rank 0 and every other process of a launched run (`rendezvous`), by
//! Netgauge's PRTT method and by the direct method (send and receive call times, round trip).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::runtime::TransportKind;
use crate::runtime::logp::{Calibration, Estimate, Prtt, RoundTrips, estimate_samples, netgauge};
use crate::runtime::logp_remote::{PeerLogp, client_samples, serve_with};
use crate::runtime::procs::rendezvous;
use crate::transport::Transport;
use crate::transport::udp::{UdpConfig, UdpTransport};

/// A LogP measurement (the flags of `ftcoll logp`).
#[derive(Clone, Debug)]
pub struct LogpSpec {
    pub transport: TransportKind,
    /// Message size in bytes.
    pub size: usize,
    /// Messages per PRTT burst.
    pub n: usize,
    /// Repetitions per measurement (medians are reported).
    pub reps: usize,
    /// One JSON object instead of the text.
    pub json: bool,
    /// Write the calibration here (this process's two endpoints only).
    pub save: Option<PathBuf>,
    /// Two hosts, `IP_A,IP_B`.
    pub between: Option<String>,
    /// The UDP port on both hosts of `between`.
    pub udp_port: u16,
    /// Emulated one-way link delay and its jitter, ns (`between` only).
    pub emulate_delay_ns: u64,
    pub emulate_jitter_ns: u64,
    /// With `between`: both hosts sleep in the kernel while waiting (else they spin).
    pub blocking: bool,
    /// The L expected, ns: the ratio is printed.
    pub expected_l_ns: Option<u64>,
    /// Between processes: exchange addresses or QP data through this directory.
    pub rendezvous: Option<PathBuf>,
    /// This process's rank (`between`, `rendezvous`).
    pub rank: Option<u32>,
    /// Processes of a `rendezvous` run.
    pub nodes: Option<u32>,
    /// The IP to bind and publish (`rendezvous`, UDP).
    pub bind: IpAddr,
    /// How long to wait for the other processes (`rendezvous`).
    pub rendezvous_timeout: u64,
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

/// Runs the measurement `a` and prints it.
pub fn run(a: &LogpSpec) -> Result<(), String> {
    if a.size == 0 || a.size > 1024 {
        return Err(format!("--size must be in 1..=1024, got {}", a.size));
    }
    if !(2..=1000).contains(&a.n) {
        return Err(format!("--n must be in 2..=1000, got {}", a.n));
    }
    if a.reps < 10 {
        return Err(format!("--reps must be at least 10, got {}", a.reps));
    }
    // Three samples per round trip (RTT, send, poll), kept for the medians twice (all measured
    // and those not preempted), up to four times `reps` measured when preemptions are many
    // (`runtime::logp::clean_round_trips`; a calibration's least time adds a fixed amount).
    let samples = (a.reps as u64).saturating_mul(8);
    let need = samples.saturating_mul(3 * size_of::<u64>() as u64);
    crate::experiment::limits::check_memory("--reps", a.reps as u64, need, "the round-trip samples")?;
    if a.save.is_some() && a.rank.is_some_and(|r| r != 0) {
        return Err("--save applies to rank 0 (the measuring side)".into());
    }
    if let Some(path) = &a.save {
        // An unwritable path fails now, not after the measurement (the content is written
        // once it exists).
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if let Some(dir) = &a.rendezvous {
        return remote(a, dir);
    }
    let mut calibration = None;
    let (p, d) = match (&a.between, a.rank) {
        (Some(b), Some(rank)) => {
            if a.transport != TransportKind::Udp {
                return Err("--between measures over --transport udp".into());
            }
            if rank > 1 {
                return Err(format!("--rank must be 0 or 1, got {rank}"));
            }
            let peers = hosts(b, a.udp_port)?;
            let blocking = a.blocking;
            let cfg = UdpConfig {
                job: crate::experiment::launch::job::logp_between(a.udp_port),
                delay: std::time::Duration::from_nanos(a.emulate_delay_ns),
                delay_jitter: std::time::Duration::from_nanos(a.emulate_jitter_ns),
                ..UdpConfig::default()
            };
            let mut t = UdpTransport::bind(rank, &peers, cfg)
                .map_err(|e| format!("cannot bind {}: {e}", peers[rank as usize]))?;
            if rank == 1 {
                serve_with(&mut t, Duration::from_secs(60), blocking)?;
                return Ok(());
            }
            let (r, raw) = client_samples(&mut t, a.n, a.size, a.reps, blocking)?;
            if a.save.is_some() {
                calibration = Some(remote_calibration(a, &r, &raw)?);
            }
            (r[0].prtt, r[0].direct)
        }
        _ if a.emulate_delay_ns > 0 || a.emulate_jitter_ns > 0 => {
            return Err("--emulate-delay-ns applies to --between (two hosts)".into());
        }
        _ if a.rank.is_some() && a.rendezvous.is_none() => {
            return Err("--rank needs --between or --rendezvous".into());
        }
        _ => {
            let p = netgauge(a.transport, a.n, a.size, a.reps)?;
            let trips = estimate_samples(a.transport, a.reps, a.size)?;
            if a.save.is_some() {
                // G: the gap's growth per byte up to the largest size (Netgauge's LogGP fit).
                let big_g = (a.size < 1024)
                    .then(|| netgauge(a.transport, a.n, 1024, a.reps))
                    .transpose()?
                    .map(|q| ((q.g_ns - p.g_ns) / (1024 - a.size) as f64).max(0.0));
                let name = a.transport.name().to_string();
                calibration = Some(trips.calibration(name, a.size, p.g_ns, big_g)?);
            }
            (p, trips.estimate())
        }
    };
    if let (Some(c), Some(path)) = (&calibration, &a.save) {
        save(c, path)?;
    }
    let ratio = |l: f64| a.expected_l_ns.map(|e| l / e.max(1) as f64);
    if a.json {
        println!(
            "{}",
            json!({
                "transport": a.transport, "between": a.between, "prtt": p, "direct": d,
                "expected_L_ns": a.expected_l_ns,
                "calibration": calibration,
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
    print!("{}", report(&p, &d));
    if let Some(c) = &calibration {
        println!("calibration (median, 95% interval): {}", c.summary());
    }
    if let (Some(e), Some(rp), Some(rd)) = (a.expected_l_ns, ratio(p.l_ns), ratio(d.l_ns as f64)) {
        println!(
            "expected L = {:.3} µs:  measured/expected  PRTT {rp:.2}   direct {rd:.2}",
            e as f64 / 1e3
        );
    }
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
        "direct method:         o_s = {:.3} µs   o_r = {:.3} µs   L = {:.3} µs   (RTT {:.2} µs; {} round trips{})\n",
        d.o_send_ns as f64 / 1e3,
        d.o_recv_ns as f64 / 1e3,
        d.l_ns as f64 / 1e3,
        d.rtt_ns as f64 / 1e3,
        d.samples,
        d.preempted
            .map(|n| format!(", {n} more left out: the thread was preempted in them"))
            .unwrap_or_default()
    );
    s
}

/// `--rendezvous`: one process of a multi-process measurement.
fn remote(a: &LogpSpec, dir: &std::path::Path) -> Result<(), String> {
    let (rank, n) = crate::runtime::procs::rank_and_size(a.rank, a.nodes, "processes")?;
    let timeout = Duration::from_secs(a.rendezvous_timeout);
    let job = crate::experiment::launch::job::LOGP_RENDEZVOUS;
    if a.transport == TransportKind::Verbs {
        // The device first: no warning and no directory for a node that cannot take part.
        crate::transport::verbs::probe()?;
    }
    // Unauthenticated: the launcher's run id versions the files, else a warned default.
    let run = crate::transport::run_dir::RunId::resolve(None, false, "logp --rendezvous")?;
    let run_dir = &crate::transport::run_dir::RunDir::open(dir, &run, None)?;
    let mut t: Box<dyn Transport> = match a.transport {
        TransportKind::Inproc => return Err("--transport inproc cannot cross processes: use udp or verbs".into()),
        TransportKind::Verbs => crate::transport::verbs::node_endpoint(rank, n, job, 1, run_dir, timeout)?,
        TransportKind::Udp => {
            let (sock, peers) = rendezvous(run_dir, rank, n, a.bind, timeout)?;
            let cfg = UdpConfig {
                job,
                ..UdpConfig::default()
            };
            let t = UdpTransport::from_bound(rank, &peers, cfg, sock)
                .map_err(|e| format!("cannot use {}: {e}", peers[rank as usize]))?;
            // Every socket must be bound before rank 0's first datagram.
            crate::transport::verbs::bootstrap::barrier(run_dir, "udp-bound", rank, n, timeout)?;
            Box::new(t)
        }
    };
    if rank != 0 {
        let served = serve_with(t.as_mut(), timeout, false)?;
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
    let (res, raw) = client_samples(t.as_mut(), a.n, a.size, a.reps, false)?;
    let calibration = a
        .save
        .as_ref()
        .map(|path| {
            let c = remote_calibration(a, &res, &raw)?;
            save(&c, path).map(|()| c)
        })
        .transpose()?;
    if a.json {
        println!(
            "{}",
            json!({ "transport": a.transport, "rank": 0, "nodes": n, "peers": res, "calibration": calibration })
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
    if let Some(c) = &calibration {
        println!(
            "calibration of all {} peers' round trips (median, 95% interval): {}",
            res.len(),
            c.summary()
        );
    }
    Ok(())
}

/// A calibration from rank 0's round trips with every peer (pooled: the machine's typical
/// message, as `bench --params` wants it) and the peers' mean Netgauge `g`. `G` needs a second
/// message size, which the remote measurement does not take: left out.
fn remote_calibration(a: &LogpSpec, peers: &[PeerLogp], raw: &[RoundTrips]) -> Result<Calibration, String> {
    let mut all = RoundTrips::default();
    for r in raw {
        all.extend(r);
    }
    let g_ns = peers.iter().map(|p| p.prtt.g_ns).sum::<f64>() / peers.len().max(1) as f64;
    let name = a.transport.name().to_string();
    all.calibration(name, a.size, g_ns, None)
}

/// Writes a calibration for `bench --params` and `sim --noise`.
fn save(c: &Calibration, path: &std::path::Path) -> Result<(), String> {
    let text = serde_json::to_string_pretty(c).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
}
