//! `ftcoll agree --procs`: every node its own OS process (`ftcoll agree-node`) over UDP
//! loopback, so that a kill is a real `SIGKILL` and peers learn of it from the closed socket
//! (ICMP port unreachable through `IP_RECVERR`, `transport/udp/icmp.rs`) or the heartbeats.
//!
//! Control goes through the children's pipes only: each child binds its port and prints
//! `ready`; the parent writes `go` to every stdin; a child prints one JSON result line when it
//! returns the run's last agreement (or, at its injected crash, a `killed_ns` line on which
//! the parent SIGKILLs it and notes the time) and keeps
//! answering its peers (ERA's early return) until the parent closes its stdin. Clocks: every
//! child aligns its monotonic clock to the parent's wall-clock epoch (same machine), so kill
//! and return times compare across processes.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::protocol::agree::{EraConfig, Rebalance, Shape};
use crate::runtime::agree::{
    AgreeBench, AgreeBenchReport, AgreeTransport, Node, NodeInit, Shared, peak_rss_kb, total, validate,
};
use crate::runtime::agree_window::{CLASS_NAMES, Class, hist};
use crate::runtime::procs::{aligned_epoch, free_ports, sigkill_self, unix_ns};
use crate::transport::TransportStats;
use crate::transport::udp::{UdpConfig, UdpTransport};
use crate::wire::DropCounters;

/// Everything one node process needs (passed as one JSON argument).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChildSpec {
    pub rank: u32,
    pub peers: Vec<SocketAddr>,
    pub epoch_unix_ns: u64,
    pub tree: String,
    pub gc: bool,
    /// 0 off, 1 degenerated, 2 always.
    pub rebalance: u8,
    pub warmup: u64,
    pub iterations: u64,
    pub duration_ms: Option<u64>,
    pub kills: Vec<(u32, u64)>,
    pub heartbeat_us: u64,
    pub suspect_ms: u64,
    pub op_timeout_ms: u64,
    pub seed: u64,
}

/// One node process's result line.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ChildResult {
    pub rank: u32,
    pub finished: bool,
    pub returned: u64,
    pub agreements: u64,
    pub invalid: u64,
    pub late: u64,
    pub max_stored: usize,
    pub suspected: Vec<u32>,
    pub messages: u64,
    pub heartbeats: u64,
    pub transport: [u64; 4],
    pub drops: DropCounters,
    /// Outcome digests per block of [`crate::runtime::agree::DIGEST_BLOCK`] agreements.
    pub digests: Vec<u64>,
    /// Per-node latencies of each class: (value ns, count) pairs.
    pub classes: Vec<Vec<(u64, u64)>>,
    pub detecting: Option<u64>,
    /// This node's return of the first successful agreement from the first kill on: (id,
    /// ns on the common clock).
    pub first_success: Option<(u64, u64)>,
    pub peak_rss_kb: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct Killed {
    rank: u32,
    killed_ns: u64,
}

/// The node process dies here: silent from now on, it asks the parent for its SIGKILL (the
/// parent times the kill on the common clock); should the parent be gone, it kills itself.
pub(crate) fn die(rank: u32, ns: u64) -> ! {
    let line = serde_json::to_string(&Killed { rank, killed_ns: ns }).unwrap_or_default();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    drop(out);
    std::thread::sleep(Duration::from_secs(10));
    sigkill_self()
}

fn shape_config(s: &ChildSpec) -> Result<EraConfig, String> {
    let shape: Shape = s.tree.parse()?;
    Ok(EraConfig {
        shape,
        window: 1,
        gc: s.gc,
        rebalance: match s.rebalance {
            0 => Rebalance::Off,
            1 => Rebalance::Degenerated,
            _ => Rebalance::Always,
        },
    })
}

fn bench_of(s: &ChildSpec) -> Result<AgreeBench, String> {
    Ok(AgreeBench {
        n: s.peers.len() as u32,
        era: shape_config(s)?,
        transport: AgreeTransport::Udp,
        workers: 1,
        pin: false,
        warmup: s.warmup,
        iterations: s.iterations,
        duration: s.duration_ms.map(Duration::from_millis),
        kills: s.kills.clone(),
        heartbeat: Duration::from_micros(s.heartbeat_us.max(1)),
        suspect_after: Duration::from_millis(s.suspect_ms.max(1)),
        op_timeout: Duration::from_millis(s.op_timeout_ms.max(1)),
        seed: s.seed,
    })
}

/// `ftcoll agree-node`: one node process (a kill: see [`die`]).
pub fn child(spec_json: &str) -> Result<(), String> {
    let s: ChildSpec = serde_json::from_str(spec_json).map_err(|e| format!("bad --spec: {e}"))?;
    let b = bench_of(&s)?;
    validate(&b)?;
    if s.rank >= b.n {
        return Err(format!("--spec: rank {} of {} nodes", s.rank, b.n));
    }
    let base = aligned_epoch(s.epoch_unix_ns);
    let first_kill = b.kills.iter().map(|k| b.warmup + k.1).min();
    let sh = Shared::new(base, b.n, b.warmup, first_kill, true);
    let tp = UdpTransport::bind(s.rank, &s.peers, UdpConfig::default())
        .map_err(|e| format!("cannot bind {}: {e}", s.peers[s.rank as usize]))?;
    let init = NodeInit {
        rank: s.rank,
        total: total(&b),
        deadline: None,
        kill_id: b.kills.iter().find(|k| k.0 == s.rank).map(|k| b.warmup + k.1),
    };
    let mut node = Node::new(&b, init, Box::new(tp), base)?;
    println!("ready");
    let mut stdin = std::io::stdin().lock();
    let mut line = String::new();
    if stdin.read_line(&mut line).map_err(|e| e.to_string())? == 0 || line.trim() != "go" {
        return Ok(()); // The parent gave up before the start.
    }
    drop(stdin);
    // The parent closes stdin to end the run.
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            stop.store(true, Ordering::Release);
        });
    }
    let now = Instant::now();
    node.set_deadline(b.duration.map(|d| now + d));
    node.start(&sh, now);
    let mut last_progress = Instant::now();
    let mut reported = false;
    while !stop.load(Ordering::Acquire) {
        let progress = node.step(&sh, &b);
        let now = Instant::now();
        if progress {
            last_progress = now;
        }
        let timed_out = now.saturating_duration_since(last_progress) > b.op_timeout;
        if !reported && (node.finished || timed_out) {
            reported = true;
            let r = result(&node, &sh);
            println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
        }
        if !progress {
            // Nodes usually outnumber cores: sleep on the socket (a datagram wakes it at once)
            // rather than spin through the others' time slices.
            let _ = node.tp.wait(Duration::from_micros(if reported { 1000 } else { 100 }));
        }
    }
    Ok(())
}

fn result(node: &Node, sh: &Shared) -> ChildResult {
    let mut w = sh.window();
    w.flush();
    let t = node.tp.stats();
    ChildResult {
        rank: node.rank,
        finished: node.finished,
        returned: node.returned,
        agreements: w.agreements,
        invalid: node.invalid,
        late: w.late,
        max_stored: node.max_stored,
        suspected: node.suspected.clone(),
        messages: node.messages,
        heartbeats: node.heartbeats,
        transport: [t.sent, t.received, t.retransmits, t.suspected],
        drops: node.drops,
        digests: node.digests.clone(),
        classes: w
            .classes
            .iter()
            .map(|c| {
                c.node
                    .iter_recorded()
                    .map(|v| (v.value_iterated_to(), v.count_at_value()))
                    .collect()
            })
            .collect(),
        detecting: w.detecting,
        first_success: w.first_success,
        peak_rss_kb: peak_rss_kb(),
    }
}

/// Kills every child still running when dropped (also on errors).
struct Kids(Vec<Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

enum Line {
    Ready,
    Killed,
    Result(Box<ChildResult>),
    Eof,
}

/// Runs the benchmark with one `exe agree-node` process per node.
pub fn run(b: &AgreeBench, exe: &Path) -> Result<AgreeBenchReport, String> {
    validate(b)?;
    if b.transport != AgreeTransport::Udp {
        return Err("--procs runs over UDP: use --transport udp".into());
    }
    let n = b.n;
    let peers = free_ports(n)?;
    let epoch_unix_ns = unix_ns();
    let epoch = aligned_epoch(epoch_unix_ns);
    let (tx, rx) = mpsc::channel::<(u32, Line)>();
    let mut kids = Kids(Vec::new());
    let mut stdins: Vec<Option<ChildStdin>> = Vec::new();
    for r in 0..n {
        let spec = ChildSpec {
            rank: r,
            peers: peers.clone(),
            epoch_unix_ns,
            tree: b.era.shape.to_string(),
            gc: b.era.gc,
            rebalance: match b.era.rebalance {
                Rebalance::Off => 0,
                Rebalance::Degenerated => 1,
                Rebalance::Always => 2,
            },
            warmup: b.warmup,
            iterations: b.iterations,
            duration_ms: b.duration.map(|d| d.as_millis() as u64),
            kills: b.kills.clone(),
            heartbeat_us: b.heartbeat.as_micros() as u64,
            suspect_ms: b.suspect_after.as_millis() as u64,
            op_timeout_ms: b.op_timeout.as_millis() as u64,
            seed: b.seed,
        };
        let spec = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
        let mut child = Command::new(exe)
            .args(["agree-node", "--spec", &spec])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        stdins.push(child.stdin.take());
        let out = child.stdout.take();
        kids.0.push(child);
        let tx = tx.clone();
        std::thread::spawn(move || {
            if let Some(out) = out {
                for l in BufReader::new(out).lines().map_while(Result::ok) {
                    let line = if l.trim() == "ready" {
                        Line::Ready
                    } else if serde_json::from_str::<Killed>(&l).is_ok() {
                        Line::Killed
                    } else if let Ok(res) = serde_json::from_str::<ChildResult>(&l) {
                        Line::Result(Box::new(res))
                    } else {
                        continue;
                    };
                    if tx.send((r, line)).is_err() {
                        return;
                    }
                }
            }
            let _ = tx.send((r, Line::Eof));
        });
    }
    drop(tx);
    // Everyone bound: start.
    let mut ready = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while ready < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((_, Line::Ready)) => ready += 1,
            Ok((r, Line::Eof)) => return Err(format!("node process {r} exited before it was ready")),
            Ok(_) => {}
            Err(_) => return Err(format!("only {ready} of {n} node processes were ready within 20 s")),
        }
    }
    let started = Instant::now();
    for s in stdins.iter_mut().flatten() {
        let _ = s.write_all(b"go\n");
        let _ = s.flush();
    }
    let mut results: Vec<Option<ChildResult>> = vec![None; n as usize];
    let mut killed: Vec<Option<u64>> = vec![None; n as usize];
    let mut gone = vec![false; n as usize];
    let limit = b.duration.unwrap_or_default() + b.op_timeout + Duration::from_secs(30);
    let mut seconds = 0.0;
    while (0..n as usize).any(|r| results[r].is_none() && killed[r].is_none() && !gone[r]) {
        let left = (started + limit).saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((r, Line::Result(res))) => {
                results[r as usize] = Some(*res);
                seconds = started.elapsed().as_secs_f64();
            }
            Ok((r, Line::Killed)) => {
                let _ = kids.0[r as usize].kill(); // SIGKILL on Unix.
                killed[r as usize] = Some(epoch.elapsed().as_nanos() as u64);
            }
            Ok((r, Line::Eof)) => gone[r as usize] = true,
            Ok((_, Line::Ready)) => {}
            Err(_) => break,
        }
    }
    // The end: closing stdin stops every node.
    drop(stdins);
    let stop_by = Instant::now() + Duration::from_secs(5);
    for c in &mut kids.0 {
        while matches!(c.try_wait(), Ok(None)) && Instant::now() < stop_by {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    drop(kids);
    Ok(merge(b, &results, &killed, seconds))
}

fn merge(b: &AgreeBench, results: &[Option<ChildResult>], killed: &[Option<u64>], seconds: f64) -> AgreeBenchReport {
    let live: Vec<&ChildResult> = results
        .iter()
        .zip(killed)
        .filter_map(|(r, k)| r.as_ref().filter(|_| k.is_none()))
        .collect();
    let expected_live = b.n as usize - killed.iter().filter(|k| k.is_some()).count();
    let unfinished = (expected_live - live.iter().filter(|r| r.finished).count().min(expected_live)) as u64;
    let mut classes: Vec<Class> = CLASS_NAMES
        .iter()
        .map(|&name| Class {
            name,
            agreement: hist(),
            node: hist(),
        })
        .collect();
    let mut transport = TransportStats::default();
    let (mut suspicions, mut false_suspicions, mut messages, mut heartbeats, mut invalid) = (0, 0, 0, 0, 0);
    let mut drops = DropCounters::default();
    for r in &live {
        for (c, pairs) in classes.iter_mut().zip(&r.classes) {
            let h: &mut Histogram<u64> = &mut c.node;
            for &(v, k) in pairs {
                let _ = h.record_n(v.max(1), k);
            }
        }
        transport.sent += r.transport[0];
        transport.received += r.transport[1];
        transport.retransmits += r.transport[2];
        transport.suspected += r.transport[3];
        suspicions += r.suspected.len() as u64;
        false_suspicions += r.suspected.iter().filter(|&&p| killed[p as usize].is_none()).count() as u64;
        messages += r.messages;
        heartbeats += r.heartbeats;
        invalid += r.invalid;
        drops.merge(&r.drops);
    }
    // Disagreements: outcome digests of a block that differ between live nodes, plus live
    // nodes that returned a different number of agreements or a different detecting one.
    let mut disagreements = 0;
    if let Some(first) = live.first() {
        let blocks = live.iter().map(|r| r.digests.len()).max().unwrap_or(0);
        for i in 0..blocks {
            let d = first.digests.get(i);
            disagreements += u64::from(live.iter().any(|r| r.digests.get(i) != d));
        }
        disagreements += u64::from(
            live.iter()
                .any(|r| r.returned != first.returned || r.detecting != first.detecting),
        );
    }
    let kill_ns = killed.iter().flatten().min().copied();
    let first_success = kill_ns.and_then(|k| {
        live.iter()
            .map(|r| r.first_success.map(|(_, t)| t))
            .collect::<Option<Vec<u64>>>()
            .and_then(|v| v.into_iter().max())
            .map(|t| t.saturating_sub(k))
    });
    let agreements = live.iter().map(|r| r.agreements).max().unwrap_or(0);
    AgreeBenchReport {
        classes,
        disagreements,
        invalid,
        unfinished,
        suspicions,
        false_suspicions,
        first_success_after_kill: first_success,
        messages_per_agreement: messages as f64 / agreements.max(1) as f64,
        heartbeats,
        transport,
        drops,
        agreements,
        seconds,
        peak_rss_kb: live.iter().filter_map(|r| r.peak_rss_kb).max(),
        era_stored_max: live.iter().map(|r| r.max_stored).max().unwrap_or(0),
        late: live.iter().map(|r| r.late).sum(),
    }
}
