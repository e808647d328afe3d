//! A node process of a multi-process run (`ftcoll node`): its own UDP socket, rank and size
//! from the flags or the launcher's environment, the peers from a hostfile or a rendezvous
//! directory, and the run coordinated over the control plane of [`crate::runtime::control`]
//! ([`run_node`]). `bench --procs` starts such processes and `bench --join` coordinates
//! launched ones from rank 0 (the parent's side: `experiment::launch::bcast`). A
//! real `SIGKILL` of a node is what this makes possible.
//!
//! Clock: every process aligns its monotonic clock to a common wall-clock epoch given by the
//! coordinator, then measures its offset to the coordinator's clock by ping-pong (Cristian);
//! timestamps are moved to the coordinator's clock by it (not where the coordinator is on
//! this host and the estimate holds 0: [`ChildAgent::sync_clock`]) and the worst uncertainty
//! is reported.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::protocol::{Protocol, SharedInfo};
use crate::runtime::board::Control;
use crate::runtime::cluster::PollMode;
use crate::runtime::control::ChildAgent;
use crate::runtime::kill::Kill;
use crate::runtime::node::{Generated, Node, NodeParams};
use crate::transport::run_dir::{Found, RunDir};
use crate::transport::udp::{UdpConfig, UdpTransport};
use crate::transport::{Transport, TransportStats};
use crate::wire::{DropCounters, WireMessage};

/// Wall-clock nanoseconds since the Unix epoch.
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The local `Instant` that corresponds to `epoch_unix_ns` on the wall clock.
pub fn aligned_epoch(epoch_unix_ns: u64) -> Instant {
    let (now_i, now_u) = (Instant::now(), unix_ns());
    let back = Duration::from_nanos(now_u.saturating_sub(epoch_unix_ns));
    now_i.checked_sub(back).unwrap_or(now_i)
}

/// The local `Instant` of the coordinator's epoch: `epoch_unix_ns` aligned on this host's
/// wall clock, then moved by this process's offset to the coordinator's clock, measured by
/// ping-pong (the coordinator reports the uncertainty).
pub fn coordinator_epoch(agent: &mut ChildAgent, epoch_unix_ns: u64) -> Instant {
    let local = aligned_epoch(epoch_unix_ns);
    let (offset, _) = agent.sync_clock(&|| local.elapsed().as_nanos() as u64, 100);
    let shift = Duration::from_nanos(offset.unsigned_abs());
    if offset >= 0 {
        local.checked_sub(shift)
    } else {
        local.checked_add(shift)
    }
    .unwrap_or(local)
}

/// Parses a hostfile: one `host:port` per line in rank order, or `RANK host:port` lines in
/// any order; blank lines and `#` comments are ignored. Errors name the line.
pub fn parse_hostfile(text: &str, n: u32) -> Result<Vec<SocketAddr>, String> {
    // Memory grows with the file, never with `n` (`--nodes 4000000000` aborted on allocation).
    let mut out: std::collections::HashMap<usize, SocketAddr> = std::collections::HashMap::new();
    let mut next = 0usize;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (rank, addr) = match (parts.next(), parts.next(), parts.next()) {
            (Some(a), None, None) => (next, a),
            (Some(r), Some(a), None) => (
                r.parse::<usize>()
                    .map_err(|_| format!("hostfile line {}: invalid rank '{}'", i + 1, r.escape_debug()))?,
                a,
            ),
            _ => {
                return Err(format!(
                    "hostfile line {}: expected 'host:port' or 'RANK host:port'",
                    i + 1
                ));
            }
        };
        let addr: SocketAddr = addr.parse().map_err(|_| {
            format!(
                "hostfile line {}: invalid address '{}' (expected IP:port)",
                i + 1,
                addr.escape_debug()
            )
        })?;
        if rank >= n as usize {
            return Err(format!(
                "hostfile line {}: rank {rank} out of range for {n} nodes",
                i + 1
            ));
        }
        if out.insert(rank, addr).is_some() {
            return Err(format!("hostfile line {}: rank {rank} listed twice", i + 1));
        }
        next = rank + 1;
    }
    // Every rank listed once and all below n: complete exactly when there are n of them.
    if out.len() != n as usize {
        let missing = (0..n).find(|r| !out.contains_key(&(*r as usize))).unwrap_or(0);
        return Err(format!("hostfile: no address for rank {missing} ({n} nodes)"));
    }
    Ok((0..n as usize).filter_map(|r| out.get(&r).copied()).collect())
}

/// Exchanges addresses through a directory all nodes can see (a job's shared directory),
/// inside the run's own subdirectory ([`RunDir`]: files of other runs are never read): each
/// node binds a free UDP port on `ip`, publishes `node-RANK.addr` (sealed with the run's key
/// when it has one), and waits up to `timeout` for all `n` nodes. A file that does not parse
/// or whose tag does not verify is waited on (it may be being replaced) and named if the wait
/// times out. Returns the bound socket, kept so that no other program can take the published
/// port before the transport uses it ([`UdpTransport::from_bound`]), and every rank's address.
pub fn rendezvous(
    dir: &RunDir,
    rank: u32,
    n: u32,
    ip: std::net::IpAddr,
    timeout: Duration,
) -> Result<(UdpSocket, Vec<SocketAddr>), String> {
    if rank >= n {
        return Err(format!("rank {rank} is not below the {n} nodes"));
    }
    let sock = UdpSocket::bind((ip, 0)).map_err(|e| format!("cannot bind a UDP port on {ip}: {e}"))?;
    let me = sock
        .local_addr()
        .map_err(|e| format!("cannot bind a UDP port on {ip}: {e}"))?;
    let name = |r: u32| format!("node-{r}.addr");
    dir.publish(&name(rank), rank, &format!("{me}\n"))?;
    let deadline = Instant::now() + timeout;
    let mut peers: Vec<Option<SocketAddr>> = vec![None; n as usize];
    peers[rank as usize] = Some(me);
    let mut last_bad: Option<String> = None;
    loop {
        for (r, slot) in peers.iter_mut().enumerate() {
            if slot.is_some() {
                continue;
            }
            match dir.read(&name(r as u32), r as u32) {
                Found::Missing => {}
                Found::Bad(e) => last_bad = Some(e),
                Found::Body(text) => match text.trim().parse() {
                    Ok(a) => *slot = Some(a),
                    Err(_) => {
                        last_bad = Some(format!(
                            "{}: holds '{}', not IP:port",
                            name(r as u32),
                            text.trim().escape_debug()
                        ))
                    }
                },
            }
        }
        let missing = peers.iter().filter(|p| p.is_none()).count();
        if missing == 0 {
            return Ok((sock, peers.into_iter().flatten().collect()));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "rendezvous: {missing} of {n} nodes did not publish in {} within {:?}{}",
                dir.path().display(),
                timeout,
                last_bad.map(|e| format!(" (last problem: {e})")).unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Rank and size from the launcher's environment: Slurm, Open MPI, MPICH/PMI.
pub fn rank_from_env() -> Option<(u32, u32)> {
    let get = |k: &str| std::env::var(k).ok().and_then(|v| v.trim().parse::<u32>().ok());
    [
        ("SLURM_PROCID", "SLURM_NTASKS"),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("PMI_RANK", "PMI_SIZE"),
    ]
    .iter()
    .find_map(|(r, s)| Some((get(r)?, get(s)?)))
}

/// This process's rank and the job's size: `--rank`/`--nodes` when both are given, else the
/// launcher's environment; checked (`what` names the processes in the error).
pub fn rank_and_size(rank: Option<u32>, nodes: Option<u32>, what: &str) -> Result<(u32, u32), String> {
    let (rank, n) = match (rank, nodes) {
        (Some(r), Some(n)) => (r, n),
        _ => rank_from_env()
            .ok_or("rank and size not given: use --rank and --nodes, or run under Slurm, Open MPI or a PMI launcher")?,
    };
    if n < 2 || rank >= n {
        return Err(format!(
            "rank {rank} of {n} {what} is invalid (need 0 <= rank < nodes, nodes >= 2)"
        ));
    }
    Ok((rank, n))
}

/// What a node process prints (one JSON line) when it exits.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NodeExit {
    pub rank: u32,
    pub alive: bool,
    pub transport: Option<TransportStats>,
    pub drops: DropCounters,
    pub stale: u64,
    pub spoofed: u64,
    pub wrong_kind: u64,
    pub backpressure: u64,
    #[serde(default)]
    pub deferred_overflow: u64,
    #[serde(default)]
    pub too_far: u64,
    pub control_invalid: u64,
    /// The peer whose FENCE stopped this node (a false suspicion made true), if one did.
    #[serde(default)]
    pub fenced_by: Option<u32>,
}

/// One node process's parameters.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub rank: u32,
    pub n: u32,
    pub peers: Vec<SocketAddr>,
    pub control: SocketAddr,
    pub epoch_unix_ns: u64,
    pub job: u64,
    pub seed: u64,
    pub tick_ns: u64,
    pub payload_len: usize,
    pub poll: PollMode,
    pub kill: Option<Kill>,
    /// Give up if the coordinator has not answered (or went silent) for this long.
    pub control_timeout: Duration,
    /// When the node's injected crash happens, the process reports it and SIGKILLs itself
    /// (a launched run, where no parent can kill it).
    pub sigkill_self: bool,
    /// Emulated one-way link delay and jitter in the UDP transport (zero: off).
    pub link_delay: (Duration, Duration),
    /// Fraction of the datagrams the UDP transport drops on receive (loss injection).
    pub loss: f64,
    /// The job's key (`None`: unauthenticated).
    pub auth: Option<crate::transport::udp::auth::AuthKey>,
}

/// Runs one node until the parent says stop (or the node is killed). Bind errors (a port in
/// use) are one-line errors.
pub fn run_node<P>(shared: &P::Shared, s: &NodeSpec, agent: ChildAgent) -> Result<NodeExit, String>
where
    P: Protocol,
    P::Shared: SharedInfo,
    P::Msg: WireMessage,
{
    let t = UdpTransport::bind(s.rank, &s.peers, udp_config(s))
        .map_err(|e| format!("cannot bind {}: {e}", s.peers[s.rank as usize]))?;
    run_node_with::<P>(shared, s, Box::new(t), agent)
}

/// The UDP transport's configuration for node `s`.
pub fn udp_config(s: &NodeSpec) -> UdpConfig {
    UdpConfig {
        job: s.job,
        seed: s.seed,
        delay: s.link_delay.0,
        delay_jitter: s.link_delay.1,
        loss: s.loss,
        auth: s.auth.clone(),
        ..UdpConfig::default()
    }
}

/// [`run_node`] over a transport already connected to the job's peers (the verbs transport
/// connects through the rendezvous directory before the node joins the coordinator).
pub fn run_node_with<P>(
    shared: &P::Shared,
    s: &NodeSpec,
    t: Box<dyn Transport>,
    mut agent: ChildAgent,
) -> Result<NodeExit, String>
where
    P: Protocol,
    P::Shared: SharedInfo,
    P::Msg: WireMessage,
{
    let mut node = Node::<P>::new(
        s.rank,
        s.n,
        t,
        Box::new(Generated::new(s.payload_len)),
        s.kill,
        s.seed,
        None,
    );
    let ctl = Control::new(s.n);
    // The wall-clock epoch aligns the processes of one host; the ping-pong offset then moves
    // this node's clock onto the coordinator's (hosts' wall clocks differ, and a bootstrapped
    // run has no common epoch at all): every timestamp it reports, and the protocols' own
    // time, are then the coordinator's, up to the reported uncertainty.
    let epoch = coordinator_epoch(&mut agent, s.epoch_unix_ns);
    let params = NodeParams {
        shared,
        n: s.n,
        root: Some(0),
        job: s.job,
        tick_ns: s.tick_ns,
        epoch,
    };
    let board = &ctl.boards[s.rank as usize];
    node.kill_at_start(board);
    node.set_sends_per_step(s.poll.sends_per_pass());
    let mut idle = 0u32;
    let started = Instant::now();
    let mut warned = false;
    loop {
        if !node.alive() {
            agent.report_death(board.died_in.load(Ordering::Relaxed));
            if s.sigkill_self {
                sigkill_self();
            }
            break;
        }
        if !warned && agent.heard() {
            // The run has started: now say it, if it is unauthenticated.
            if s.auth.is_none() {
                crate::transport::udp::auth::warn_unauthenticated();
            }
            warned = true;
        }
        let progress = node.step(&params, &ctl, Instant::now());
        if agent.pump(&ctl, s.rank == 0) {
            break;
        }
        if progress {
            idle = 0;
            s.poll.after_progress();
            continue;
        }
        idle = idle.saturating_add(1);
        s.poll.idle(idle, || node.wait(Duration::from_micros(100)));
        if !agent.heard() && started.elapsed() > s.control_timeout {
            return Err(format!(
                "the coordinator at {} did not answer within {:?}",
                s.control, s.control_timeout
            ));
        }
        if agent.heard() && agent.silent_for() > s.control_timeout {
            return Err(format!(
                "the coordinator at {} went silent for {:?}",
                s.control, s.control_timeout
            ));
        }
        if started.elapsed() > Duration::from_secs(24 * 3600) {
            return Err("node ran for a day without a stop: giving up".into());
        }
    }
    Ok(NodeExit {
        rank: s.rank,
        alive: node.alive(),
        fenced_by: node.fenced_by(),
        transport: Some(node.transport_stats()),
        drops: node.stats.drops,
        stale: node.stats.stale,
        spoofed: node.stats.spoofed,
        wrong_kind: node.stats.wrong_kind,
        backpressure: node.stats.backpressure,
        deferred_overflow: node.stats.deferred_overflow,
        too_far: node.stats.too_far,
        control_invalid: agent.invalid,
    })
}

/// A real crash of this process: `SIGKILL` to itself (no unwinding, no exit handlers, the
/// socket vanishes as after a fault), by the `kill` system call, so it dies within µs of its
/// caller's stamp of the crash (a `kill -KILL` command, forked and exec'd, took 1–2 ms more
/// on the emulated cluster, which a launched run's kill-to-suspicion figures included; docs/
/// measurements.md, "A launched node's own SIGKILL"); exits with 137 should that fail.
pub(crate) fn sigkill_self() -> ! {
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::Kill);
    std::thread::sleep(Duration::from_secs(1));
    std::process::exit(137)
}

#[cfg(test)]
mod rendezvous_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostfiles_parse_in_both_forms_and_errors_name_the_line() {
        let a = parse_hostfile("127.0.0.1:5000\n# c\n\n127.0.0.1:5001 # x\n", 2).unwrap();
        assert_eq!(a[1].port(), 5001);
        let b = parse_hostfile("1 10.0.0.2:7\n0 10.0.0.1:7\n", 2).unwrap();
        assert_eq!(b[0].to_string(), "10.0.0.1:7");
        for (bad, what) in [
            ("127.0.0.1:1\n", "no address for rank 1"),
            ("x\n127.0.0.1:2", "line 1"),
            ("0 127.0.0.1:1\n0 127.0.0.1:2\n", "listed twice"),
            ("5 127.0.0.1:1\n", "out of range"),
            ("a b c\n", "line 1"),
            ("z 127.0.0.1:1\n", "invalid rank"),
        ] {
            let e = parse_hostfile(bad, 2).unwrap_err();
            assert!(e.contains(what), "{bad:?}: {e}");
            assert_eq!(e.lines().count(), 1);
        }
    }

    #[test]
    fn rendezvous_gives_every_node_the_same_table() {
        let base = std::env::temp_dir().join(format!("ftcoll-rdv-{}", std::process::id()));
        let run = crate::transport::run_dir::RunId::new("table").unwrap();
        let dir = RunDir::open(&base, &run, None).unwrap();
        let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        let tables: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3)
                .map(|r| {
                    let dir = &dir;
                    s.spawn(move || rendezvous(dir, r, 3, ip, Duration::from_secs(5)).unwrap().1)
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(tables[0].len(), 3);
        assert!(tables.iter().all(|t| t == &tables[0]));
        let other = crate::transport::run_dir::RunId::new("x").unwrap();
        let lonely = RunDir::open(&base, &other, None).unwrap();
        let lonely = rendezvous(&lonely, 0, 2, ip, Duration::from_millis(50)).unwrap_err();
        assert!(lonely.contains("1 of 2 nodes did not publish"), "{lonely}");
        std::fs::remove_dir_all(&base).ok();
    }

    #[test]
    fn aligned_epochs_agree() {
        let e = unix_ns();
        let a = aligned_epoch(e);
        let b = aligned_epoch(e);
        let d = if a > b { a - b } else { b - a };
        assert!(d < Duration::from_millis(5), "{d:?}");
    }
}
