//! `ftcoll agree --join ADDR`: ERA with one process per host, started by a launcher (Slurm,
//! mpirun, `cluster-scripts/netns-cluster.sh`), like `bench --join`. Rank 0 runs the
//! coordinator at `ADDR` next to its own node and prints the report.
//!
//! Over UDP the nodes are members of a group of processes ([`crate::group::Member`]), as
//! `agree --procs`'s are ([`super::agree_node`]): rank 0's process serves the group's
//! rendezvous at `ADDR` without its member being the one that serves it
//! (`group::Rendezvous`: the address table, the run's nonce, from which every member
//! derives the run's session key for its datagrams, challenge–response with the job key, and
//! the clock probes by which each member measures its offset to rank 0's clock, so every time
//! it reports is on rank 0's clock up to the reported uncertainty). Over verbs (which a
//! `Member` does not speak) each node joins the coordinator's control plane as for
//! broadcasts ([`crate::runtime::control`]) for the table, the epoch and its clock offset,
//! relays its verbs connection data there ([`crate::runtime::conn_relay`]) and runs
//! `runtime::agree_procs::run_node`, the same node, over the connected endpoint.
//!
//! Either way each node opens a TCP stream to `ADDR`, authenticated before anything else is
//! read and sealed line by line ([`crate::runtime::join`]: challenge–response with the job
//! key, bounded reads, concurrent handshakes, refusals counted and said on stderr), and over
//! it speaks the line protocol of a `--procs` node's pipes: `ready`, `go`, the streamed
//! returns ([`crate::runtime::agree_stream`]), its crash or its result. Rank 0 classes the
//! returns per agreement in constant memory, exactly as `--procs` does. A node's injected
//! crash is a SIGKILL of its own process, announced on the stream with its time.

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::experiment::launch::agree::{Cluster, idle_limit, merge, spec_of, window_of};
use crate::experiment::launch::agree_node::{Input, Told, member_spec, stream};
use crate::group::{Member, MemberSpec, Rendezvous};
use crate::runtime::agree::{AgreeBench, AgreeBenchReport, AgreeTransport, validate};
use crate::runtime::agree_procs::{Out, lines_of, run_node, say};
use crate::runtime::board::Control;
use crate::runtime::control::ParentAgent;
use crate::runtime::control::child::{Joined, join_with_socket};
use crate::runtime::join::{self, JobParams};
use crate::runtime::procs::{aligned_epoch, coordinator_epoch, unix_ns};
use crate::transport::Transport;
use crate::transport::udp::auth::AuthKey;

/// One process of a launched agreement run.
#[derive(Clone, Debug)]
pub struct JoinSpec {
    /// Rank 0's coordinator (UDP control plane and TCP streams, same port).
    pub coordinator: SocketAddr,
    pub rank: u32,
    /// The IP to publish for this node's data socket [default: the interface toward rank 0].
    pub bind: Option<IpAddr>,
    /// How long to wait for every rank to join (and to be ready).
    pub timeout: Duration,
    /// The job's key (`None`: unauthenticated).
    pub key: Option<AuthKey>,
}

/// Runs this process's part: a node, and on rank 0 also the coordinator, whose report it
/// returns (`None` on the other ranks).
pub fn run(b: &AgreeBench, j: &JoinSpec) -> Result<Option<AgreeBenchReport>, String> {
    validate(b)?;
    if j.rank >= b.n {
        return Err(format!("--rank {} of {} nodes", j.rank, b.n));
    }
    if b.transport == AgreeTransport::Inproc {
        return Err("--join needs --transport udp or verbs (processes do not share memory)".into());
    }
    if b.kills.iter().any(|k| k.0 == 0) {
        return Err("bad --kill: rank 0 gathers the results of a --join run; kill another rank".into());
    }
    if b.transport == AgreeTransport::Verbs {
        // Before the rendezvous: a rank without a usable device must not leave the others
        // waiting for it.
        crate::transport::verbs::probe()?;
    }
    if j.key.is_none() {
        crate::transport::udp::auth::warn_unauthenticated();
    }
    if b.transport == AgreeTransport::Udp {
        // Over UDP the nodes are members of a group of processes.
        if j.rank != 0 {
            member_node(b, j)?;
            return Ok(None);
        }
        return coordinate_members(b, j).map(Some);
    }
    if j.rank != 0 {
        node(b, j)?;
        return Ok(None);
    }
    coordinate(b, j).map(Some)
}

/// The member spec of node `j.rank` of `b`, at rank 0's rendezvous.
fn member_spec_of(b: &AgreeBench, j: &JoinSpec) -> MemberSpec {
    MemberSpec {
        bind: j.bind,
        key: j.key.clone(),
        timeout: j.timeout,
        ..member_spec(b, j.rank, j.coordinator, 0)
    }
}

/// One node over UDP: a member of the group of the run's processes (joined at rank 0's
/// rendezvous, against whose clock it times its own), then, once the stream to rank 0 is
/// open, the run's stream of agreements reported over it; it stays a member until rank 0
/// closes the stream.
fn member_node(b: &AgreeBench, j: &JoinSpec) -> Result<(), String> {
    // Rank 0's own member shares the rendezvous's clock (one process): no probes.
    let mut m = Member::join_served(member_spec_of(b, j), j.rank == 0).map_err(|e| e.to_string())?;
    let job = crate::experiment::launch::job::agree(b.seed);
    let (input, output, _) = join::connect(j.coordinator, j.timeout, j.key.as_ref(), job, j.rank)?;
    let out: Out = Arc::new(Mutex::new(Box::new(output)));
    let input = Input::new(input);
    say(&out, "ready")?;
    if !matches!(input.told()?, Told::Go) {
        return Ok(()); // Rank 0 gave up before the start.
    }
    // A kill here is this process's own SIGKILL, announced on the stream with its time.
    stream(&mut m, b, j.rank, &out, false, None, &input)?;
    while !matches!(input.told()?, Told::End) {}
    Ok(())
}

/// Rank 0 over UDP: the group's rendezvous (served by this process, not by its member), its
/// own node's member in a thread, and here the streams of every node gathered into the
/// report.
fn coordinate_members(b: &AgreeBench, j: &JoinSpec) -> Result<AgreeBenchReport, String> {
    let epoch_unix_ns = unix_ns();
    let rendezvous = Rendezvous::start(
        &member_spec_of(b, j),
        j.coordinator,
        aligned_epoch(epoch_unix_ns),
        epoch_unix_ns,
    )?;
    let listener = TcpListener::bind(j.coordinator).map_err(|e| format!("cannot listen at {}: {e}", j.coordinator))?;
    let run = crate::experiment::launch::job::run_nonce()?;
    std::thread::scope(|sc| {
        let own = sc.spawn(|| member_node(b, j));
        let res = gather(b, j, &listener, epoch_unix_ns, run);
        let served = rendezvous.finish();
        if served.refused_hellos > 0 {
            eprintln!(
                "ftcoll: the coordinator at {} refused {} hello(s) not sealed for this run (replayed or forged)",
                j.coordinator, served.refused_hellos
            );
        }
        match (res, own.join()) {
            (Ok(mut r), Ok(Ok(()))) => {
                r.clock_uncertainty_ns = served.clock_uncertainty_ns;
                Ok(r)
            }
            (Err(e), _) | (_, Ok(Err(e))) => Err(e),
            (_, Err(_)) => Err("rank 0's node thread panicked".into()),
        }
    })
}

/// One node over verbs: join, connect, measure the clock, then run the node over the stream.
fn node(b: &AgreeBench, j: &JoinSpec) -> Result<(), String> {
    let (n, job) = (b.n, crate::experiment::launch::job::agree(b.seed));
    // (The table's UDP socket carries nothing over verbs; it is kept for the run.)
    let Joined {
        sock: _table,
        mut agent,
        peers,
        params: p,
    } = join_with_socket(j.coordinator, j.bind, job, j.rank, n, j.key.clone(), j.timeout)?;
    // The stream to rank 0, authenticated.
    let (input, output, _) = join::connect(j.coordinator, j.timeout, j.key.as_ref(), job, j.rank)?;
    // The same path as `bench --join --transport verbs`: records relayed by rank 0.
    let max = crate::transport::MAX_PAYLOAD as u32;
    let tp: Box<dyn Transport> = crate::transport::verbs::connected_endpoint(j.rank, n, job, b.seed, &mut |mine| {
        agent.exchange_conns(mine, max, j.timeout)
    })?;
    // The common epoch aligns the processes of one host; the ping-pong offset moves this
    // node's clock onto rank 0's (hosts' wall clocks differ).
    let base = coordinator_epoch(&mut agent, p.epoch_unix_ns);
    let out: Out = Arc::new(Mutex::new(Box::new(output)));
    let rx = lines_of(input);
    let spec = spec_of(b, j.rank, &peers, p.epoch_unix_ns, 0);
    run_node(&spec, &rx, &out, base, tp, false)?;
    // The control socket lives until here: closed, a late control datagram to it would draw an
    // ICMP "port unreachable" that spends this host's ICMP rate limit toward rank 0, which the
    // survivors need for a prompt suspicion of a killed node (`src/transport/udp/icmp.rs`).
    drop(agent);
    Ok(())
}

/// Rank 0 over verbs: the control plane (rendezvous, clock probes, verbs records) in one
/// thread, its own node in another, and here the streams of every node gathered into the
/// report.
fn coordinate(b: &AgreeBench, j: &JoinSpec) -> Result<AgreeBenchReport, String> {
    let (n, job) = (b.n, crate::experiment::launch::job::agree(b.seed));
    let run = crate::experiment::launch::job::run_nonce()?;
    let mut agent = ParentAgent::bind(j.coordinator, job, n)
        .map_err(|e| format!("cannot bind the coordinator at {}: {e}", j.coordinator))?;
    agent.set_key(j.key.clone());
    let epoch_unix_ns = unix_ns();
    agent
        .launch(JobParams {
            o_ns: 1,
            l_ns: 1,
            epoch_unix_ns,
            run,
        })
        .map_err(|e| format!("cannot draw the coordinator's nonce: {e}"))?;
    let listener = TcpListener::bind(j.coordinator).map_err(|e| format!("cannot listen at {}: {e}", j.coordinator))?;
    let epoch = aligned_epoch(epoch_unix_ns);
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let pump = sc.spawn(|| {
            let ctl = Control::new(n);
            let now_ns = || epoch.elapsed().as_nanos() as u64;
            // Until every node has its clock offset (which comes after its table and verbs
            // records): the control plane then falls silent for the measurement.
            while !stop.load(Ordering::Acquire) && agent.clocks.iter().any(Option::is_none) {
                agent.pump(&ctl, &now_ns);
                agent.wait(Duration::from_millis(1));
            }
            if agent.refused_hellos > 0 {
                eprintln!(
                    "ftcoll: the coordinator at {} refused {} hello(s) not sealed for this run (replayed or forged)",
                    j.coordinator, agent.refused_hellos
                );
            }
            agent.clocks.iter().flatten().map(|&(_, u)| u).max()
        });
        let own = sc.spawn(|| node(b, j));
        let res = gather(b, j, &listener, epoch_unix_ns, run);
        stop.store(true, Ordering::Release);
        let uncertainty = pump.join().map_err(|_| "the coordinator thread panicked".to_string())?;
        match (res, own.join()) {
            (Ok(mut r), Ok(Ok(()))) => {
                r.clock_uncertainty_ns = uncertainty;
                Ok(r)
            }
            (Err(e), _) | (_, Ok(Err(e))) => Err(e),
            (_, Err(_)) => Err("rank 0's node thread panicked".into()),
        }
    })
}

/// Accepts every node's authenticated stream ([`join::accept`]: concurrent, bounded, refusals
/// counted and said on stderr), starts the run and collects it.
fn gather(
    b: &AgreeBench,
    j: &JoinSpec,
    listener: &TcpListener,
    epoch_unix_ns: u64,
    run: [u8; 16],
) -> Result<AgreeBenchReport, String> {
    let n = b.n;
    let gate = join::Gate {
        job: crate::experiment::launch::job::agree(b.seed),
        n,
        key: j.key.clone(),
        run,
        timeout: j.timeout,
        handshake: j.timeout.min(HANDSHAKE),
        cap: HANDSHAKES_AT_ONCE,
    };
    let (streams, refused) = join::accept(listener, &gate)?;
    if refused.total() > 0 {
        eprintln!("ftcoll: agree --join: rank 0's streams: {refused}");
    }
    let mut c = Cluster::new(std::path::Path::new(""), n, epoch_unix_ns);
    for st in streams {
        c.attach(st.rank, st.lines, Box::new(st.send));
    }
    let started = c.start(j.timeout, || {})?;
    let o = c.collect(started, idle_limit(b), window_of(b));
    // The end: every node stops when its stream closes.
    c.close_inputs();
    let mut r = merge(b, o);
    r.refused_streams = Some(refused.total());
    Ok(r)
}

/// How long a connection to rank 0 has to answer its challenge.
const HANDSHAKE: Duration = Duration::from_secs(5);
/// Connections rank 0 serves in their handshake at once (more are closed and counted).
const HANDSHAKES_AT_ONCE: usize = 256;
