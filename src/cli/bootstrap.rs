//! `ftcoll bootstrap` (a local multi-process run of the runtime bootstrap) and
//! `ftcoll boot-node` (one node of it, as a launcher starts it: rank, size and the launch-tree
//! parent's address only).

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use clap::Args;
use serde_json::json;

use crate::runtime::bootstrap::{BootConfig, BootReport, boot, launch_tree, unix_us};

/// Flags of `ftcoll boot-node`.
#[derive(Args, Debug, Clone)]
pub struct BootNodeArgs {
    /// This node's rank [default: from SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK].
    #[arg(long)]
    pub rank: Option<u32>,
    /// The job's size [default: from the launcher's environment].
    #[arg(long)]
    pub nodes: Option<u32>,
    /// The launch-tree parent's address IP:PORT (every rank but 0).
    #[arg(long)]
    pub parent: Option<String>,
    /// Address to bind (IPv4).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub bind: String,
    /// Job identifier (datagrams of other jobs are dropped).
    #[arg(long, default_value_t = 1)]
    pub job: u64,
    /// One overlay phase, in microseconds.
    #[arg(long = "tick-us", default_value_t = 1000)]
    pub tick_us: u64,
    /// A quiet node refreshes every R phases.
    #[arg(long, default_value_t = 16)]
    pub refresh: u32,
    /// Keep serving this long after the table is complete, in milliseconds.
    #[arg(long = "linger-ms", default_value_t = 300)]
    pub linger_ms: u64,
    /// Give up after this many seconds.
    #[arg(long = "timeout-s", default_value_t = 30)]
    pub timeout_s: u64,
    /// After booting, watch the BMG neighbours, spread failure notices and repair the overlay,
    /// printing a JSON report line at each change, until stdin closes (`bootstrap --kill`).
    #[arg(long, hide = true)]
    pub watch: bool,
    #[command(flatten)]
    pub detector: DetectorArgs,
}

/// The failure detector of a watching node.
#[derive(Args, Debug, Clone)]
pub struct DetectorArgs {
    /// With --watch/--kill: heartbeat period to BMG neighbours, in milliseconds.
    #[arg(long = "heartbeat-ms", default_value_t = 20)]
    pub heartbeat_ms: u64,
    /// With --watch/--kill: a neighbour silent this long is suspected, in milliseconds.
    #[arg(long = "suspect-ms", default_value_t = 500)]
    pub suspect_ms: u64,
}

/// Flags of `ftcoll bootstrap`.
#[derive(Args, Debug, Clone)]
pub struct BootstrapArgs {
    /// Node processes to start on this machine (comma-separated for several runs).
    #[arg(long, default_value = "8")]
    pub nodes: String,
    /// One overlay phase, in microseconds.
    #[arg(long = "tick-us", default_value_t = 1000)]
    pub tick_us: u64,
    /// Give up after this many seconds.
    #[arg(long = "timeout-s", default_value_t = 30)]
    pub timeout_s: u64,
    /// One JSON object per run instead of the table.
    #[arg(long)]
    pub json: bool,
    /// After the overlay is built, SIGKILL these ranks, then time the detection, the failure
    /// notices' spread and the repair, and check the repaired overlay (one size in --nodes).
    #[arg(long, value_delimiter = ',')]
    pub kill: Vec<u32>,
    #[command(flatten)]
    pub detector: DetectorArgs,
}

fn config(a: &BootNodeArgs, rank: u32, n: u32, parent: Option<SocketAddrV4>) -> Result<BootConfig, String> {
    if a.tick_us == 0 || a.refresh == 0 || a.timeout_s == 0 {
        return Err("--tick-us, --refresh and --timeout-s must be at least 1".into());
    }
    Ok(BootConfig {
        rank,
        n,
        parent,
        job: a.job,
        tick: Duration::from_micros(a.tick_us),
        refresh: a.refresh,
        linger: Duration::from_millis(a.linger_ms),
        timeout: Duration::from_secs(a.timeout_s),
        drop_every: 0,
        // The job key from the environment (`bootstrap` hands its children one).
        key: crate::transport::udp::auth::AuthKey::from_env()?,
    })
}

/// Runs `ftcoll boot-node`: prints `listening IP:PORT`, boots, prints its report as one JSON
/// line.
pub fn run_node(a: &BootNodeArgs) -> Result<(), String> {
    let env = crate::runtime::procs::rank_from_env();
    let rank = a
        .rank
        .or(env.map(|e| e.0))
        .ok_or("--rank is needed (no launcher environment)")?;
    let n = a
        .nodes
        .or(env.map(|e| e.1))
        .ok_or("--nodes is needed (no launcher environment)")?;
    if n < 2 {
        return Err(format!("--nodes must be at least 2, got {n}"));
    }
    if rank >= n {
        return Err(format!("--rank {rank} is not below --nodes {n}"));
    }
    let parent = match &a.parent {
        Some(p) => Some(
            p.parse::<SocketAddrV4>()
                .map_err(|_| format!("invalid --parent '{p}': expected IPv4:PORT"))?,
        ),
        None => None,
    };
    if (rank == 0) != parent.is_none() {
        return Err("every rank but 0 needs --parent, and rank 0 takes none".into());
    }
    let bind: SocketAddrV4 = a
        .bind
        .parse()
        .map_err(|_| format!("invalid --bind '{}': expected IPv4:PORT", a.bind))?;
    let cfg = config(a, rank, n, parent)?;
    let sock = UdpSocket::bind(bind).map_err(|e| format!("cannot bind {bind}: {e}"))?;
    let me = sock.local_addr().map_err(|e| e.to_string())?;
    println!("listening {me}");
    if a.watch {
        return crate::cli::bootstrap_kill::boot_and_watch(sock, cfg, &a.detector);
    }
    let rep = boot(sock, cfg)?;
    println!("{}", serde_json::to_string(&rep).map_err(|e| e.to_string())?);
    Ok(())
}

/// Kills the children still running when dropped (an error on the way out).
pub(crate) struct Procs(pub(crate) Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// `n` node processes started, each given only its parent's address, and their boot reports.
pub(crate) struct Launched {
    pub procs: Procs,
    /// Each node's stdout, past its boot report.
    pub readers: Vec<BufReader<std::process::ChildStdout>>,
    pub reports: Vec<BootReport>,
    pub launched_us: u64,
}

/// One local run: `n` node processes, each given only its parent's address.
/// Returns the reports, the milliseconds from the first launch to the last complete table,
/// and the wall seconds of the whole run (process exits included).
fn run_once(a: &BootstrapArgs, n: u32) -> Result<(Vec<BootReport>, f64, f64), String> {
    let started = std::time::Instant::now();
    let Launched {
        mut procs,
        reports,
        launched_us,
        ..
    } = launch(a, n, false)?;
    let wall = started.elapsed().as_secs_f64();
    for c in &mut procs.0 {
        let st = c.wait().map_err(|e| e.to_string())?;
        if !st.success() {
            return Err(format!("a node exited with {st}"));
        }
    }
    let last = reports.iter().map(|r| r.table_unix_us).max().unwrap_or(launched_us);
    Ok((reports, last.saturating_sub(launched_us) as f64 / 1000.0, wall))
}

/// Starts `n` node processes (with `watch`, watching after the bootstrap, stdin piped) and
/// reads their boot reports; errors unless every address table is complete and right.
pub(crate) fn launch(a: &BootstrapArgs, n: u32, watch: bool) -> Result<Launched, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find ftcoll: {e}"))?;
    let tree = launch_tree(n)?;
    let job = u64::from(std::process::id()) << 20 | u64::from(n);
    let mut addrs: Vec<SocketAddrV4> = Vec::with_capacity(n as usize);
    let mut procs = Procs(Vec::new());
    let mut readers = Vec::new();
    let launched_us = unix_us();
    // One job key for the children's datagrams, through their environment (never printed).
    let key = match crate::transport::udp::auth::AuthKey::from_env()? {
        Some(k) => k,
        None => {
            crate::transport::udp::auth::AuthKey::generate().map_err(|e| format!("cannot generate a job key: {e}"))?
        }
    };
    // Parents first: every child outranks its parent in the launch tree.
    for r in 0..n {
        let mut cmd = Command::new(&exe);
        cmd.env(crate::transport::udp::auth::KEY_ENV, key.to_hex());
        cmd.args(["boot-node", "--rank", &r.to_string(), "--nodes", &n.to_string()])
            .args(["--job", &job.to_string(), "--tick-us", &a.tick_us.to_string()])
            .args(["--timeout-s", &a.timeout_s.to_string()]);
        if let Some(p) = tree.parent(r) {
            cmd.args(["--parent", &addrs[p as usize].to_string()]);
        }
        if watch {
            cmd.arg("--watch")
                .args(["--heartbeat-ms", &a.detector.heartbeat_ms.to_string()])
                .args(["--suspect-ms", &a.detector.suspect_ms.to_string()])
                .stdin(Stdio::piped());
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start a node: {e}"))?;
        let mut out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        procs.0.push(child);
        let mut line = String::new();
        out.read_line(&mut line).map_err(|e| e.to_string())?;
        let addr = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|x| x.parse::<SocketAddr>().ok())
            .and_then(|x| match x {
                SocketAddr::V4(v) => Some(v),
                SocketAddr::V6(_) => None,
            })
            .ok_or_else(|| format!("node {r} did not start: {}", line.trim()))?;
        addrs.push(addr);
        readers.push(out);
    }
    let mut reports = Vec::new();
    for (r, out) in readers.iter_mut().enumerate() {
        let mut line = String::new();
        out.read_line(&mut line).map_err(|e| e.to_string())?;
        let rep: BootReport =
            serde_json::from_str(line.trim()).map_err(|_| format!("node {r} failed (see its error above)"))?;
        reports.push(rep);
    }
    let want: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    for rep in &reports {
        if rep.table != want {
            return Err(format!("node {} ended with a wrong address table", rep.rank));
        }
    }
    Ok(Launched {
        procs,
        readers,
        reports,
        launched_us,
    })
}

/// Runs `ftcoll bootstrap`.
pub fn run(a: &BootstrapArgs) -> Result<(), String> {
    let sizes: Vec<u32> = a
        .nodes
        .split(',')
        .map(|s| s.trim().parse::<u32>().ok().filter(|&n| (2..=1024).contains(&n)))
        .collect::<Option<_>>()
        .ok_or_else(|| {
            format!(
                "invalid --nodes '{}': expected sizes from 2 to 1024, comma-separated",
                a.nodes
            )
        })?;
    if a.tick_us == 0 || a.timeout_s == 0 {
        return Err("--tick-us and --timeout-s must be at least 1".into());
    }
    if !a.kill.is_empty() {
        let [n] = sizes[..] else {
            return Err("--kill needs a single size in --nodes".into());
        };
        return crate::cli::bootstrap_kill::run(a, n);
    }
    if !a.json {
        println!("ftcoll bootstrap: one process per node on this machine, each given its rank, the size and its");
        println!("launch-tree parent's address only; ring, BMG (Algorithms 1, 2), then the address all-gather");
        println!(
            "(Han–Finkel over CW links); tick {} µs. boot: ms from the first launch to the last complete",
            a.tick_us
        );
        println!("table (launches are sequential, parents first); ring, bmg, gather, table: ms from each node's");
        println!("own start, max over nodes; wall: the whole run with process exits\n");
        println!(
            "{:>6}{:>10}{:>10}{:>10}{:>10}{:>10}{:>12}{:>10}{:>10}",
            "nodes", "boot", "ring", "bmg", "gather", "table", "msgs/node", "dropped", "wall s"
        );
    }
    for n in sizes {
        let (reps, boot_ms, wall) = run_once(a, n)?;
        let ms = |f: fn(&BootReport) -> u64| reps.iter().map(f).max().unwrap_or(0) as f64 / 1000.0;
        let sent: u64 = reps.iter().map(|r| r.sent).sum();
        let dropped: u64 = reps.iter().map(|r| r.dropped).sum();
        if a.json {
            println!(
                "{}",
                json!({
                    "nodes": n,
                    "boot_ms": boot_ms,
                    "ring_ms": ms(|r| r.ring_us),
                    "bmg_ms": ms(|r| r.bmg_us),
                    "gather_ms": ms(|r| r.gather_us),
                    "table_ms": ms(|r| r.table_us),
                    "messages_per_node": sent as f64 / f64::from(n),
                    "dropped": dropped,
                    "wall_seconds": wall,
                    "tables_complete": true,
                })
            );
        } else {
            println!(
                "{:>6}{:>10.1}{:>10.1}{:>10.1}{:>10.1}{:>10.1}{:>12.1}{:>10}{:>10.2}",
                n,
                boot_ms,
                ms(|r| r.ring_us),
                ms(|r| r.bmg_us),
                ms(|r| r.gather_us),
                ms(|r| r.table_us),
                sent as f64 / f64::from(n),
                dropped,
                wall
            );
        }
    }
    Ok(())
}

/// Runs `ftcoll launch-tree`: the parent of every rank in the bootstrap's launch tree.
pub fn print_launch_tree(n: u32) -> Result<(), String> {
    if n < 2 {
        return Err(format!("--nodes must be at least 2, got {n}"));
    }
    let tree = crate::runtime::bootstrap::launch_tree(n)?;
    let mut out = String::new();
    for r in 0..n {
        match tree.parent(r) {
            Some(p) => out += &format!("{r} {p}\n"),
            None => out += &format!("{r} -\n"),
        }
    }
    print!("{out}");
    Ok(())
}
