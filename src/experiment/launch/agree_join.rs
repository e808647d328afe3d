//! `ftcoll agree --join ADDR`: ERA with one process per host, started by a launcher (Slurm,
//! mpirun, `cluster-scripts/netns-cluster.sh`), like `bench --join`. Rank 0 runs the
//! coordinator at `ADDR` next to its own node and prints the report.
//!
//! Rendezvous and clocks go through the coordinator's control plane as for broadcasts
//! ([`crate::runtime::control`]): each node joins for the address table and the common epoch,
//! relays its verbs connection data there ([`crate::runtime::conn_relay`]) and measures its
//! clock offset to rank 0 by ping-pong, so every time it reports is on rank 0's clock (up to
//! the reported uncertainty). Then each node opens a TCP stream to `ADDR` and speaks over it
//! the line protocol of a `--procs` node's pipes: `ready`, `go`, the streamed returns
//! ([`crate::runtime::agree_stream`]), its crash or its result. Rank 0 classes the returns per
//! agreement in constant memory, exactly as `--procs` does. A node's injected crash is a
//! SIGKILL of its own process, announced on the stream with its time.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::experiment::launch::agree::{Cluster, idle_limit, merge, spec_of, window_of};
use crate::runtime::agree::{AgreeBench, AgreeBenchReport, AgreeTransport, validate};
use crate::runtime::agree_procs::{Out, lines_of, run_node};
use crate::runtime::board::Control;
use crate::runtime::control::{ChildAgent, ParentAgent};
use crate::runtime::join::JobParams;
use crate::runtime::procs::{aligned_epoch, coordinator_epoch, unix_ns};
use crate::transport::Transport;
use crate::transport::udp::auth::AuthKey;
use crate::transport::udp::{UdpConfig, UdpTransport};

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

/// What a node's stream starts with: its rank, sealed with the job key.
fn hello(job: u64, rank: u32, key: Option<&AuthKey>) -> String {
    let tag = key.map_or_else(
        || "-".to_string(),
        |k| crate::wire::hex::encode(&k.tag(&[b"ftcoll agree --join", &job.to_le_bytes(), &rank.to_le_bytes()])),
    );
    format!("hello {rank} {tag}")
}

/// The rank a stream's first line names, if it is sealed as [`hello`] seals it.
fn check_hello(line: &str, job: u64, n: u32, key: Option<&AuthKey>) -> Option<u32> {
    let mut w = line.split_whitespace();
    let (Some("hello"), Some(r), Some(_), None) = (w.next(), w.next(), w.next(), w.next()) else {
        return None;
    };
    let rank: u32 = r.parse().ok().filter(|&r| r < n)?;
    (hello(job, rank, key) == line.trim()).then_some(rank)
}

/// A stream's sending half: dropping it tells the other end this side is done (the reading
/// half, a clone, may live on in its reader thread).
struct Sender(TcpStream);

impl Write for Sender {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let _ = self.0.shutdown(Shutdown::Write);
    }
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
    if j.rank != 0 {
        node(b, j)?;
        return Ok(None);
    }
    coordinate(b, j).map(Some)
}

/// One node: join, connect, measure the clock, then run as a `--procs` node over the stream.
fn node(b: &AgreeBench, j: &JoinSpec) -> Result<(), String> {
    let (n, job) = (b.n, crate::experiment::launch::job::agree(b.seed));
    let ip = match j.bind {
        Some(ip) => ip,
        None => crate::transport::local_ip::local_ip_toward(j.coordinator)
            .map_err(|e| format!("no route to the coordinator {}: {e}", j.coordinator))?,
    };
    let me = UdpSocket::bind((ip, 0))
        .and_then(|s| s.local_addr())
        .map_err(|e| format!("cannot bind a UDP port on {ip}: {e}"))?;
    let mut agent = ChildAgent::new(j.coordinator, job, j.rank, n).map_err(|e| format!("control socket: {e}"))?;
    agent.set_key(j.key.clone());
    let (peers, p) = agent.join(me, j.timeout)?;
    let tp: Box<dyn Transport> = if b.transport == AgreeTransport::Verbs {
        // The same path as `bench --join --transport verbs`: records relayed by rank 0.
        let max = crate::transport::MAX_PAYLOAD as u32;
        crate::transport::verbs::connected_endpoint(j.rank, n, job, b.seed, &mut |mine| {
            agent.exchange_conns(mine, max, j.timeout)
        })?
    } else {
        let cfg = UdpConfig {
            job,
            seed: b.seed,
            auth: j.key.clone(),
            ..UdpConfig::default()
        };
        Box::new(UdpTransport::bind(j.rank, &peers, cfg).map_err(|e| format!("cannot bind {me}: {e}"))?)
    };
    // The common epoch aligns the processes of one host; the ping-pong offset moves this
    // node's clock onto rank 0's (hosts' wall clocks differ).
    let base = coordinator_epoch(&mut agent, p.epoch_unix_ns);
    let stream = connect(j.coordinator, j.timeout)?;
    let _ = stream.set_nodelay(true);
    let input = stream.try_clone().map_err(|e| format!("stream to rank 0: {e}"))?;
    let out: Out = Arc::new(Mutex::new(Box::new(Sender(stream))));
    {
        let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
        writeln!(o, "{}", hello(job, j.rank, j.key.as_ref())).map_err(|e| format!("stream to rank 0: {e}"))?;
    }
    let rx = lines_of(input);
    let spec = spec_of(b, j.rank, &peers, p.epoch_unix_ns, 0);
    run_node(&spec, &rx, &out, base, tp, false)?;
    // The control socket lives until here: closed, a late control datagram to it would draw an
    // ICMP "port unreachable" that spends this host's ICMP rate limit toward rank 0, which the
    // survivors need for a prompt suspicion of a killed node (`src/transport/udp/icmp.rs`).
    drop(agent);
    Ok(())
}

/// A TCP stream to rank 0, retried until `timeout` (rank 0 may start last).
fn connect(to: SocketAddr, timeout: Duration) -> Result<TcpStream, String> {
    let deadline = Instant::now() + timeout;
    loop {
        match TcpStream::connect_timeout(&to, Duration::from_secs(1)) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() > deadline => return Err(format!("cannot connect to rank 0 at {to}: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Rank 0: the control plane (rendezvous, clock probes, verbs records) in one thread, its own
/// node in another, and here the streams of every node gathered into the report.
fn coordinate(b: &AgreeBench, j: &JoinSpec) -> Result<AgreeBenchReport, String> {
    let (n, job) = (b.n, crate::experiment::launch::job::agree(b.seed));
    let mut agent = ParentAgent::bind(j.coordinator, job, n)
        .map_err(|e| format!("cannot bind the coordinator at {}: {e}", j.coordinator))?;
    agent.set_key(j.key.clone());
    let epoch_unix_ns = unix_ns();
    agent.set_params(JobParams {
        o_ns: 1,
        l_ns: 1,
        epoch_unix_ns,
    });
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
            agent.clocks.iter().flatten().map(|&(_, u)| u).max()
        });
        let own = sc.spawn(|| node(b, j));
        let res = gather(b, j, &listener, epoch_unix_ns);
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

/// Accepts every node's stream (checking its hello), starts the run and collects it.
fn gather(
    b: &AgreeBench,
    j: &JoinSpec,
    listener: &TcpListener,
    epoch_unix_ns: u64,
) -> Result<AgreeBenchReport, String> {
    let (n, job) = (b.n, crate::experiment::launch::job::agree(b.seed));
    let mut c = Cluster::new(std::path::Path::new(""), n, epoch_unix_ns);
    let mut joined = vec![false; n as usize];
    let deadline = Instant::now() + j.timeout;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut refused = 0;
    while joined.iter().any(|x| !x) {
        if Instant::now() > deadline {
            let k = joined.iter().filter(|x| **x).count();
            return Err(format!(
                "only {k} of {n} nodes connected to rank 0 within {:?} ({refused} refused)",
                j.timeout
            ));
        }
        let s = match listener.accept() {
            Ok((s, _)) => s,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
        };
        let _ = s.set_nonblocking(false);
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let Ok(send) = s.try_clone() else { continue };
        let mut reader = BufReader::new(s);
        let mut first = String::new();
        let rank = match reader.read_line(&mut first) {
            Ok(_) => check_hello(&first, job, n, j.key.as_ref()).filter(|&r| !joined[r as usize]),
            Err(_) => None,
        };
        let Some(rank) = rank else {
            refused += 1; // Another job, a forged or repeated rank: dropped.
            continue;
        };
        let _ = reader.get_ref().set_read_timeout(None);
        joined[rank as usize] = true;
        let lines: Box<dyn Read + Send> = Box::new(reader);
        c.attach(rank, lines, Box::new(Sender(send)), None);
    }
    let started = c.start(j.timeout)?;
    let o = c.collect(started, idle_limit(b), window_of(b));
    // The end: every node stops when its stream closes.
    c.close_inputs();
    Ok(merge(b, o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_taken_only_with_its_jobs_seal() {
        let key = AuthKey::from_bytes([5; 16]);
        let h = hello(9, 3, Some(&key));
        assert_eq!(check_hello(&h, 9, 4, Some(&key)), Some(3));
        assert_eq!(check_hello(&format!("{h}\n"), 9, 4, Some(&key)), Some(3));
        assert_eq!(check_hello(&h, 8, 4, Some(&key)), None, "another job");
        assert_eq!(check_hello(&h, 9, 3, Some(&key)), None, "rank out of range");
        assert_eq!(check_hello(&h, 9, 4, Some(&AuthKey::from_bytes([6; 16]))), None);
        assert_eq!(
            check_hello(&h.replace(" 3 ", " 2 "), 9, 4, Some(&key)),
            None,
            "a forged rank"
        );
        assert_eq!(check_hello(&h, 9, 4, None), None, "keyed, at an unkeyed rank 0");
        assert_eq!(check_hello(&hello(9, 1, None), 9, 4, None), Some(1));
        for bad in ["", "hello", "hello 1", "hello x -", "hello 1 - extra", "ready"] {
            assert_eq!(check_hello(bad, 9, 4, None), None, "{bad:?}");
        }
    }
}
