//! `bench --procs`: one OS process per node (`ftcoll node`), each with its own UDP socket,
//! started here and coordinated over the control plane of [`crate::runtime::control`]. This
//! is what makes a real `SIGKILL` of a node possible. `bench --join` (a launcher such as
//! Slurm, mpirun or the netns script starts the processes) coordinates the same way from
//! rank 0 ([`coordinate_joined`]). The node side is [`crate::runtime::procs`].
//!
//! Ports: a `--procs` node binds a port of the kernel's choice itself, keeps the socket, and
//! sends the address over the control plane (sealed with the run's session key); the parent
//! answers with the address table once every node's is in ([`node_endpoint`]). No port is
//! chosen here and bound in a child, where another program could take it in between.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::experiment::launch::spawn::{Launch, Report};
use crate::runtime::board::Control;
use crate::runtime::cluster::{ClusterConfig, ClusterResult, Coordinator};
use crate::runtime::control::ParentAgent;
use crate::runtime::join::JobParams;
use crate::runtime::kill::{Kill, KillPoint};
use crate::runtime::procs::{NodeExit, aligned_epoch, unix_ns};

/// A node the coordinator has not heard from for this long has crashed (it reports every
/// 2 ms while alive). The suspicion is made true where the coordinator can: a node process it
/// launched is SIGKILLed (fail-stop enforcement, as for the transport's suspicions), and one
/// not planned to crash counts as a false suspicion.
const SILENCE: Duration = Duration::from_millis(300);

/// How long the node processes a run starts may take to join the coordinator.
const JOIN_TIMEOUT: Duration = Duration::from_secs(20);

/// Waits until every node has made contact and measured its clock offset (nodes dead from the
/// start need not), pumping the control plane; `check` may abort the wait.
fn await_nodes(
    agent: &mut ParentAgent,
    ctl: &Control,
    kills: &[Kill],
    now_ns: &dyn Fn() -> u64,
    timeout: Duration,
    check: &mut dyn FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let n = ctl.boards.len();
    let deadline = Instant::now() + timeout;
    let dead_at_start = |r: usize| kills.iter().any(|k| k.rank == r as u32 && k.point == KillPoint::Start);
    while agent.joined() < n
        || agent
            .clocks
            .iter()
            .enumerate()
            .any(|(r, c)| c.is_none() && !dead_at_start(r))
    {
        agent.pump(ctl, now_ns);
        check()?;
        if Instant::now() > deadline {
            return Err(format!(
                "only {} of {n} nodes joined the coordinator within {timeout:?}",
                agent.joined()
            ));
        }
        agent.wait(Duration::from_millis(1));
    }
    Ok(())
}

/// How long the coordinator sleeps between its ticks. It only decides when an operation is
/// over (latencies are the nodes' own time stamps), but each tick costs a few µs of CPU on a
/// core the nodes may share: at 20 µs (plus the kernel's 50 µs timer slack) it took ~15 % of
/// a core and preempted the node processes in the middle of the operations it times.
const COORDINATOR_PERIOD: Duration = Duration::from_micros(200);

/// Runs the coordinator over the control plane until every operation is over; `each` runs
/// between its ticks with the nodes just declared crashed for their silence (the parent's
/// SIGKILLs). Fills in wall time and clock uncertainty.
fn drive(
    agent: &mut ParentAgent,
    ctl: &Control,
    cfg: &ClusterConfig,
    kills: &[Kill],
    epoch: Instant,
    now_ns: &dyn Fn() -> u64,
    each: &mut dyn FnMut(&Control, &[u32]),
) -> ClusterResult {
    let mut coord = Coordinator::new(cfg).split_at(kills);
    let started = Instant::now();
    loop {
        agent.pump(ctl, now_ns);
        let silent = agent.mark_silent_dead(ctl, SILENCE);
        for r in &silent {
            eprintln!("ftcoll: node {r} went silent for {SILENCE:?}: counted as crashed");
        }
        each(ctl, &silent);
        if !coord.tick(ctl, epoch) {
            break;
        }
        std::thread::sleep(COORDINATOR_PERIOD);
    }
    let mut res = coord.into_result();
    res.wall = started.elapsed();
    res.clock_uncertainty_ns = agent.clocks.iter().flatten().map(|&(_, u)| u).max();
    res.clocks = agent.clocks.clone();
    res
}

/// The coordinator of a launched run (`bench --join`), on rank 0, on its bound `agent`: hands every
/// node the address table and `params` once all `cfg.nodes` have joined, runs the operations
/// and tells the nodes to stop. Per-node counters stay with the nodes (each prints its own).
pub fn coordinate_joined(
    mut agent: ParentAgent,
    cfg: &ClusterConfig,
    kills: &[Kill],
    params: JobParams,
    join_timeout: Duration,
    table: bool,
) -> Result<ClusterResult, String> {
    let n = cfg.nodes as usize;
    let addr = agent.addr().map_err(|e| e.to_string())?;
    // The nodes join by challenge–response; everything after is sealed with the run's key.
    agent
        .launch(params)
        .map_err(|e| format!("cannot draw the coordinator's nonce: {e}"))?;
    let epoch = aligned_epoch(params.epoch_unix_ns);
    let now_ns = move || epoch.elapsed().as_nanos() as u64;
    let ctl = Control::new(cfg.nodes);
    let deadline = Instant::now() + join_timeout;
    // Hand out the address table (`--join`); a bootstrapped run has it already.
    while table && agent.addresses_known() < n {
        agent.pump(&ctl, &now_ns);
        if Instant::now() > deadline {
            return Err(format!(
                "only {} of {n} nodes joined at {addr} within {join_timeout:?}",
                agent.addresses_known()
            ));
        }
        agent.wait(Duration::from_millis(1));
    }
    await_nodes(&mut agent, &ctl, kills, &now_ns, join_timeout, &mut || Ok(()))?;
    let res = drive(&mut agent, &ctl, cfg, kills, epoch, &now_ns, &mut |_, _| {});
    if agent.refused_hellos > 0 {
        eprintln!(
            "ftcoll: the coordinator at {addr} refused {} hello(s) not sealed for this run (replayed or forged)",
            agent.refused_hellos
        );
    }
    // Stop is idempotent; repeat it so that a lost datagram does not leave a node running.
    for _ in 0..50 {
        agent.stop();
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(res)
}

/// A `--procs` node's UDP endpoint (the node's side of the rendezvous above): binds a port on
/// 127.0.0.1 and keeps it, sends its address to the parent through `agent` until the address
/// table comes back, which fills `spec.peers`, and builds the endpoint on that socket as
/// [`crate::runtime::procs::run_node`] builds its own.
pub fn node_endpoint(
    spec: &mut crate::runtime::procs::NodeSpec,
    agent: &mut crate::runtime::control::ChildAgent,
) -> Result<Box<dyn crate::transport::Transport>, String> {
    use crate::transport::udp::UdpTransport;
    let sock = UdpTransport::bind_socket(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .map_err(|e| format!("cannot bind a UDP port on 127.0.0.1: {e}"))?;
    let me = sock
        .local_addr()
        .map_err(|e| format!("cannot read the address bound: {e}"))?;
    let (peers, _) = agent.rendezvous(me, spec.control_timeout)?;
    if peers.get(spec.rank as usize) != Some(&me) {
        return Err(format!(
            "the coordinator's table does not name this node's address {me}"
        ));
    }
    spec.peers = peers;
    // The coordinator hands out the table once every node has bound its port and said so: a
    // closed port is a dead node's (`UdpConfig::bound_at_start`).
    let cfg = crate::transport::udp::UdpConfig {
        bound_at_start: true,
        ..crate::runtime::procs::udp_config(spec)
    };
    let t = UdpTransport::from_socket(spec.rank, sock, &spec.peers, cfg)
        .map_err(|e| format!("cannot open the endpoint at {me}: {e}"))?;
    Ok(Box::new(t))
}

/// Launches one `ftcoll node` process per rank (`exe node <args>`) and coordinates the run.
/// `child_args(rank)` gives each child its algorithm flags and its own crash.
pub fn run_parent(
    exe: &Path,
    cfg: &ClusterConfig,
    key: Option<&crate::transport::udp::auth::AuthKey>,
    kills: &[Kill],
    child_args: &dyn Fn(u32) -> Vec<String>,
    dir: &Path,
) -> Result<ClusterResult, String> {
    let n = cfg.nodes;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut agent = ParentAgent::new(cfg.job, n).map_err(|e| format!("control socket: {e}"))?;
    agent.set_key(key.cloned());
    let control = agent.addr().map_err(|e| e.to_string())?;
    let epoch_unix_ns = unix_ns();
    // The nodes bind their own ports and send them here: the table goes out once all are in
    // (the parameters are the children's own flags; these only complete the table).
    agent.set_params(JobParams {
        o_ns: 1,
        l_ns: 1,
        epoch_unix_ns,
        run: [0; 16],
    });
    let epoch = aligned_epoch(epoch_unix_ns);
    let args = (0..n)
        .map(|r| {
            let mut a: Vec<String> = vec!["node".into()];
            for (k, v) in [
                ("--rank", r.to_string()),
                ("--nodes", n.to_string()),
                ("--control", control.to_string()),
                ("--epoch-unix-ns", epoch_unix_ns.to_string()),
                ("--job", cfg.job.to_string()),
                ("--seed", cfg.seed.to_string()),
                ("--size", cfg.payload_len.to_string()),
            ] {
                a.push(k.into());
                a.push(v);
            }
            a.extend(child_args(r));
            a
        })
        .collect();
    let mut procs = Launch::new(exe, Report::Control, JOIN_TIMEOUT).start(args)?;
    let ctl = Control::new(n);
    let now_ns = move || epoch.elapsed().as_nanos() as u64;
    let dead_at_start = |r: usize| kills.iter().any(|k| k.rank == r as u32 && k.point == KillPoint::Start);
    await_nodes(&mut agent, &ctl, kills, &now_ns, JOIN_TIMEOUT, &mut || {
        procs.check_exited(&dead_at_start, "before joining")
    })?;
    let mut sigkilled = vec![false; n as usize];
    // Falsely suspected nodes: fenced by a peer (their exit report says so) or declared
    // crashed here for their silence without a planned crash; each counted once.
    let mut falsely = vec![false; n as usize];
    let mut res = drive(&mut agent, &ctl, cfg, kills, epoch, &now_ns, &mut |ctl, silent| {
        for &r in silent {
            // Declared crashed: make it so, and count it unless its crash was planned.
            procs.kill(r as usize);
            if !sigkilled[r as usize] && !kills.iter().any(|k| k.rank == r) {
                falsely[r as usize] = true;
            }
            sigkilled[r as usize] = true;
        }
        let allowed = ctl.allowed.load(Ordering::Acquire);
        for k in kills {
            if let KillPoint::SigKill { iter } = k.point {
                let r = k.rank as usize;
                if !sigkilled[r] && allowed > iter {
                    sigkilled[r] = true;
                    procs.kill(r); // SIGKILL on Unix.
                    let b = &ctl.boards[r];
                    b.died_in.store(iter, Ordering::Relaxed);
                    b.dead.store(true, Ordering::Release);
                }
            }
        }
    });
    // Stop everyone, then collect their exit reports (each node's last JSON line).
    procs.stop(Duration::from_secs(5), &mut || agent.stop());
    let mut exits: Vec<Option<NodeExit>> = vec![None; n as usize];
    let mut open = vec![true; n as usize];
    let deadline = Instant::now() + Duration::from_secs(5);
    while open.iter().any(|&o| o) {
        let Some((r, line)) = procs.recv(deadline.saturating_duration_since(Instant::now())) else {
            break;
        };
        match line {
            Some(l) => {
                if let Ok(e) = serde_json::from_str(&l) {
                    exits[r] = Some(e);
                }
            }
            None => open[r] = false,
        }
    }
    for (r, exit) in exits.into_iter().enumerate() {
        match exit {
            Some(e) => {
                if !e.alive {
                    res.dead_nodes.push(r as u32);
                }
                falsely[r] |= e.fenced_by.is_some();
                if let Some(t) = e.transport {
                    res.add_transport(&t);
                }
                res.stale += e.stale;
                res.spoofed += e.spoofed;
                res.wrong_kind += e.wrong_kind;
                res.backpressure += e.backpressure;
                res.deferred_overflow += e.deferred_overflow;
                res.too_far += e.too_far;
                res.drops.merge(&e.drops);
            }
            None => {
                res.dead_nodes.push(r as u32);
                res.counters_lost += 1;
            }
        }
    }
    res.false_suspicions += falsely.iter().filter(|&&f| f).count() as u64;
    res.dead_nodes.sort_unstable();
    Ok(res)
}
