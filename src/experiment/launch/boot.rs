//! `bootstrap`: node processes on this machine, each started with its rank, the size and its
//! launch-tree parent's address only (`ftcoll boot-node`), and their boot reports checked.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, SocketAddrV4};
use std::process::{Command, Stdio};

use crate::experiment::launch::Children;
use crate::runtime::bootstrap::{BootReport, launch_tree, unix_us};

/// The failure detector of a watching node (`--heartbeat-ms`, `--suspect-ms`).
#[derive(Clone, Copy, Debug)]
pub struct Detector {
    /// Heartbeat period to BMG neighbours, ms.
    pub heartbeat_ms: u64,
    /// A neighbour silent for this long is suspected, ms.
    pub suspect_ms: u64,
}

/// How the node processes of a bootstrap are started.
#[derive(Clone, Copy, Debug)]
pub struct BootLaunch {
    /// One overlay phase, µs.
    pub tick_us: u64,
    /// Each node gives up after this many seconds.
    pub timeout_s: u64,
    /// The detector of watching nodes (`bootstrap --kill`).
    pub detector: Detector,
}

/// `n` node processes started, each given only its parent's address, and their boot reports.
pub(crate) struct Launched {
    pub procs: Children,
    /// Each node's stdout, past its boot report.
    pub readers: Vec<BufReader<std::process::ChildStdout>>,
    pub reports: Vec<BootReport>,
    pub launched_us: u64,
}

/// One local run: `n` node processes, each given only its parent's address.
/// Returns the reports, the milliseconds from the first launch to the last complete table,
/// and the wall seconds of the whole run (process exits included).
pub fn run_once(a: &BootLaunch, n: u32) -> Result<(Vec<BootReport>, f64, f64), String> {
    let started = std::time::Instant::now();
    let Launched {
        mut procs,
        reports,
        launched_us,
        ..
    } = launch(a, n, false)?;
    let wall = started.elapsed().as_secs_f64();
    for c in procs.0.iter_mut().flatten() {
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
pub(crate) fn launch(a: &BootLaunch, n: u32, watch: bool) -> Result<Launched, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find ftcoll: {e}"))?;
    let tree = launch_tree(n)?;
    let job = crate::experiment::launch::job::bootstrap(std::process::id(), n);
    let mut addrs: Vec<SocketAddrV4> = Vec::with_capacity(n as usize);
    let mut procs = Children(Vec::new());
    let mut readers = Vec::new();
    let launched_us = unix_us();
    // One key for the children's datagrams, through their environment (never printed): this
    // run's session key under `FTCOLL_KEY` (a datagram of an earlier bootstrap with the same
    // key does not verify), else a fresh one.
    let key = match super::run_key(crate::transport::udp::auth::AuthKey::from_env()?)? {
        Some(k) => k,
        None => {
            crate::transport::udp::auth::AuthKey::generate().map_err(|e| format!("cannot generate a job key: {e}"))?
        }
    };
    // This launch's id, new per run: each node seals with the session key derived from it.
    let run_id = format!(
        "bootstrap-{}-{}",
        std::process::id(),
        crate::wire::hex::encode(
            &crate::transport::udp::auth::fresh_nonce().map_err(|e| format!("cannot draw the run's id: {e}"))?
        )
    );
    // Parents first: every child outranks its parent in the launch tree.
    for r in 0..n {
        let mut cmd = Command::new(&exe);
        cmd.env(crate::transport::udp::auth::KEY_ENV, key.to_hex());
        cmd.args(["boot-node", "--rank", &r.to_string(), "--nodes", &n.to_string()])
            .args(["--job", &job.to_string(), "--tick-us", &a.tick_us.to_string()])
            .args(["--timeout-s", &a.timeout_s.to_string()])
            .args(["--run-id", &run_id]);
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
        procs.0.push(Some(child));
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
