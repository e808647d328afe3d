//! `bootstrap`: node processes on this machine, each started with its rank, the size and its
//! launch-tree parent's address only (`ftcoll boot-node`), and their boot reports checked.

use std::net::{SocketAddr, SocketAddrV4};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::experiment::launch::spawn::{Launch, Procs, Report};
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
    /// The processes; each one's later stdout lines come through [`Procs::recv`].
    pub procs: Procs,
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
    } = launch(a, n, false)?;
    let wall = started.elapsed().as_secs_f64();
    for r in 0..n as usize {
        if let Some(st) = procs.wait(r)?
            && !st.success()
        {
            return Err(format!("node {r} exited with {st}"));
        }
    }
    let last = reports.iter().map(|r| r.table_unix_us).max().unwrap_or(launched_us);
    Ok((reports, last.saturating_sub(launched_us) as f64 / 1000.0, wall))
}

/// Starts `n` node processes of this executable (with `watch`, watching after the bootstrap,
/// stdin piped) and reads their boot reports; errors unless every address table is complete
/// and right.
pub(crate) fn launch(a: &BootLaunch, n: u32, watch: bool) -> Result<Launched, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find ftcoll: {e}"))?;
    launch_with(&exe, a, n, watch)
}

/// The first word of the line in which a `boot-node` says the address it bound.
const LISTENING: &str = "listening";

/// [`launch`] with the node processes of `exe`. A node that does not say its address within
/// `a.timeout_s`, or exits before its boot report, fails the launch in one line; every
/// process is then killed and reaped.
pub(crate) fn launch_with(exe: &Path, a: &BootLaunch, n: u32, watch: bool) -> Result<Launched, String> {
    let tree = launch_tree(n)?;
    let job = crate::experiment::launch::job::bootstrap(std::process::id(), n);
    let mut addrs: Vec<SocketAddrV4> = Vec::with_capacity(n as usize);
    let launched_us = unix_us();
    // One key for the children's datagrams, through their environment (never printed): this
    // run's session key under `FTCOLL_KEY` (a datagram of an earlier bootstrap with the same
    // key does not verify), else a fresh one.
    let key = match super::job::fresh_session(crate::transport::udp::auth::AuthKey::from_env()?)? {
        Some(k) => k,
        None => {
            crate::transport::udp::auth::AuthKey::generate().map_err(|e| format!("cannot generate a job key: {e}"))?
        }
    };
    let run_id = crate::experiment::launch::job::bootstrap_run_id()?;
    let timeout = Duration::from_secs(a.timeout_s);
    let mut launch = Launch::new(exe, Report::Pipe(LISTENING), timeout);
    launch.env = vec![(crate::transport::udp::auth::KEY_ENV.into(), key.to_hex())];
    launch.stdin = watch;
    let mut procs = launch.slots(n);
    // Parents first: every child outranks its parent in the launch tree.
    for r in 0..n {
        let mut args: Vec<String> = ["boot-node", "--rank", &r.to_string(), "--nodes", &n.to_string()]
            .iter()
            .map(|x| x.to_string())
            .collect();
        for (k, v) in [
            ("--job", job.to_string()),
            ("--tick-us", a.tick_us.to_string()),
            ("--timeout-s", a.timeout_s.to_string()),
            ("--run-id", run_id.clone()),
        ] {
            args.extend([k.to_string(), v]);
        }
        if let Some(p) = tree.parent(r) {
            args.extend(["--parent".to_string(), addrs[p as usize].to_string()]);
        }
        if watch {
            for (k, v) in [
                ("--watch", None),
                ("--heartbeat-ms", Some(a.detector.heartbeat_ms)),
                ("--suspect-ms", Some(a.detector.suspect_ms)),
            ] {
                args.push(k.into());
                args.extend(v.map(|v| v.to_string()));
            }
        }
        procs.spawn(r, &args)?;
        let addr = match procs.addresses(&[r])?[..] {
            [SocketAddr::V4(v)] => v,
            ref other => return Err(format!("node {r} did not start on an IPv4 address: {other:?}")),
        };
        addrs.push(addr);
    }
    // Each node's next line is its boot report; a node gives up after `timeout_s` itself.
    let mut reports: Vec<Option<BootReport>> = vec![None; n as usize];
    let deadline = Instant::now() + timeout + Duration::from_secs(5);
    while let Some(r) = reports.iter().position(Option::is_none) {
        let Some((slot, line)) = procs.recv(deadline.saturating_duration_since(Instant::now())) else {
            return Err(format!(
                "node {r} sent no boot report within {:?}",
                timeout + Duration::from_secs(5)
            ));
        };
        match line {
            None if reports[slot].is_none() => return Err(procs.exit_error(slot, "before its boot report")),
            None => {}
            Some(l) if reports[slot].is_none() => {
                let rep: BootReport =
                    serde_json::from_str(l.trim()).map_err(|_| format!("node {slot} failed (see its error above)"))?;
                reports[slot] = Some(rep);
            }
            Some(_) => {}
        }
    }
    let reports: Vec<BootReport> = reports.into_iter().flatten().collect();
    let want: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    for rep in &reports {
        if rep.table != want {
            return Err(format!("node {} ended with a wrong address table", rep.rank));
        }
    }
    Ok(Launched {
        procs,
        reports,
        launched_us,
    })
}
