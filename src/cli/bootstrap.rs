//! `ftcoll bootstrap` (a local multi-process run of the runtime bootstrap) and
//! `ftcoll boot-node` (one node of it, as a launcher starts it: rank, size and the launch-tree
//! parent's address only).

use std::net::{SocketAddrV4, UdpSocket};
use std::time::Duration;

use clap::Args;
use serde_json::json;

use crate::cli::flags::{WALL_MAX_MS, WALL_MAX_S, WALL_MAX_US};
use crate::experiment::launch::boot::{BootLaunch, Detector, run_once};
use crate::runtime::bootstrap::{BootConfig, BootReport, boot};

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
    #[arg(long = "tick-us", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_US))]
    pub tick_us: u64,
    /// A quiet node refreshes every R phases.
    #[arg(long, default_value_t = 16)]
    pub refresh: u32,
    /// Keep serving this long after the table is complete, in milliseconds.
    #[arg(long = "linger-ms", default_value_t = 300, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_MS))]
    pub linger_ms: u64,
    /// Give up after this many seconds.
    #[arg(long = "timeout-s", default_value_t = 30, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_S))]
    pub timeout_s: u64,
    /// After booting, watch the BMG neighbours, spread failure notices and repair the overlay,
    /// printing a JSON report line at each change, until stdin closes (`bootstrap --kill`).
    #[arg(long, hide = true)]
    pub watch: bool,
    #[command(flatten)]
    pub detector: DetectorArgs,
    /// `on`: the datagrams carry the MAC of the job key in FTCOLL_KEY; without a key the
    /// node keeps to loopback (a non-loopback --bind is refused). `off`: no MAC, anywhere,
    /// with a warning where a non-loopback address is involved (on loopback, `bootstrap`'s
    /// many nodes would each print it).
    #[arg(long, value_enum, default_value = "on")]
    pub auth: crate::cli::auth::AuthMode,
    /// This launch's id, the same on every node of it and new for each launch: with a key,
    /// the datagrams are sealed with a key derived from it [default: the launcher's, Slurm
    /// SLURM_JOB_ID.SLURM_STEP_ID or Open MPI PMIX_NAMESPACE; a keyed node needs one].
    #[arg(long = "run-id", value_name = "STR")]
    pub run_id: Option<String>,
}

/// The failure detector of a watching node.
#[derive(Args, Debug, Clone)]
pub struct DetectorArgs {
    /// With --watch/--kill: heartbeat period to BMG neighbours, in milliseconds.
    #[arg(long = "heartbeat-ms", default_value_t = 20, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_MS))]
    pub heartbeat_ms: u64,
    /// With --watch/--kill: a neighbour silent this long is suspected, in milliseconds.
    #[arg(long = "suspect-ms", default_value_t = 500, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_MS))]
    pub suspect_ms: u64,
}

/// Flags of `ftcoll bootstrap`.
#[derive(Args, Debug, Clone)]
pub struct BootstrapArgs {
    /// Node processes to start on this machine (comma-separated for several runs).
    #[arg(long, default_value = "8")]
    pub nodes: String,
    /// One overlay phase, in microseconds.
    #[arg(long = "tick-us", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_US))]
    pub tick_us: u64,
    /// Give up after this many seconds.
    #[arg(long = "timeout-s", default_value_t = 30, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_S))]
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
        // The run's session key under it, from the launch's id (no rank 0 hands out a nonce).
        key: match a.auth {
            crate::cli::auth::AuthMode::On => match crate::transport::udp::auth::AuthKey::from_env()? {
                Some(k) => {
                    let run = crate::transport::run_dir::RunId::resolve(a.run_id.as_deref(), true, "boot-node")?;
                    Some(run.session_key(&k))
                }
                None => None,
            },
            crate::cli::auth::AuthMode::Off => None,
        },
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
    // The address table, the launch tree and the overlay's state per rank: 43 bytes measured
    // (peak RSS at 10^6 and 4·10^6 ranks), 64 counted.
    let need = u64::from(n).saturating_mul(64);
    crate::experiment::limits::check_memory("--nodes", u64::from(n), need, "this node's address table")?;
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
    if cfg.key.is_none() {
        let parent_ip = parent.map(|p| std::net::IpAddr::V4(*p.ip()));
        let ips: Vec<std::net::IpAddr> = std::iter::once(std::net::IpAddr::V4(*bind.ip()))
            .chain(parent_ip)
            .collect();
        crate::cli::auth::unauthenticated_on("boot-node without FTCOLL_KEY", &ips, a.auth)?;
    }
    let sock = UdpSocket::bind(bind).map_err(|e| format!("cannot bind {bind}: {e}"))?;
    let me = sock.local_addr().map_err(|e| e.to_string())?;
    println!("listening {me}");
    if a.watch {
        return crate::experiment::bootstrap_kill::boot_and_watch(sock, cfg, &a.detector.spec());
    }
    let rep = boot(sock, cfg)?;
    println!("{}", serde_json::to_string(&rep).map_err(|e| e.to_string())?);
    Ok(())
}

impl DetectorArgs {
    /// The typed detector settings of these flags.
    pub fn spec(&self) -> Detector {
        Detector {
            heartbeat_ms: self.heartbeat_ms,
            suspect_ms: self.suspect_ms,
        }
    }
}

impl BootstrapArgs {
    /// How to launch this run's node processes.
    pub fn launch(&self) -> BootLaunch {
        BootLaunch {
            tick_us: self.tick_us,
            timeout_s: self.timeout_s,
            detector: self.detector.spec(),
        }
    }
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
        let o = crate::experiment::bootstrap_kill::run(&a.launch(), &a.kill, n)?;
        crate::report::bootstrap::print_kill(&o, a.json);
        return Ok(());
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
        let (reps, boot_ms, wall) = run_once(&a.launch(), n)?;
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
    // The tree (parent, child offset, child and depth per rank) and its text (22 bytes a line).
    let need = u64::from(n).saturating_mul(4 * 4 + 22);
    crate::experiment::limits::check_memory("--nodes", u64::from(n), need, "the launch tree and its text")?;
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
