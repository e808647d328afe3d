//! `ftcoll bootstrap --kill R[,R..]` (repair after a permanent crash): boot local node processes, SIGKILL
//! some once the overlay is built, and time what the survivors do
//! ([`crate::runtime::watch`]): detect (heartbeats, ICMP), spread failure notices, repair the
//! overlay. Every survivor checks its own `Succ`, `Pred`, `CW`, `CCW` against the legitimate
//! BMG over the survivors and reports; this process checks the reports again.
//! `boot-node --watch` is the node's side.

use std::collections::BTreeSet;
use std::io::Read;
use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::experiment::launch::boot::{BootLaunch, Detector, launch};
use crate::protocol::overlay::failure_notice::FailureNotices;
use crate::protocol::overlay::repair::Mended;
use crate::protocol::overlay::ring_to_bmg::levels;
use crate::runtime::bootstrap::{BootConfig, boot_keep, launch_tree, unix_us};
use crate::runtime::watch::{WatchConfig, WatchReport, watch};
use crate::topology::launch_tree::LaunchTree;
use crate::topology::ring::{backward, forward};

fn detector(d: &Detector) -> Result<(Duration, Duration), String> {
    if d.heartbeat_ms == 0 || d.suspect_ms <= d.heartbeat_ms {
        return Err("--heartbeat-ms must be at least 1 and below --suspect-ms".into());
    }
    Ok((
        Duration::from_millis(d.heartbeat_ms),
        Duration::from_millis(d.suspect_ms),
    ))
}

/// `boot-node --watch`: boots, prints the boot report, then watches until stdin closes,
/// printing each [`WatchReport`] as a JSON line.
pub fn boot_and_watch(sock: UdpSocket, cfg: BootConfig, d: &Detector) -> Result<(), String> {
    let (heartbeat, suspect_after) = detector(d)?;
    let n = cfg.n;
    let wcfg = WatchConfig {
        job: cfg.job,
        tick: cfg.tick,
        heartbeat,
        suspect_after,
        key: cfg.key.clone(),
    };
    let b = boot_keep(sock, cfg)?;
    println!("{}", serde_json::to_string(&b.report).map_err(|e| e.to_string())?);
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        s.store(true, Ordering::Relaxed);
    });
    watch(b, n, &wcfg, &stop, &mut |r| {
        if let Ok(line) = serde_json::to_string(r) {
            println!("{line}");
        }
    })
}

/// Does `r` hold the legitimate BMG over the survivors of `m`? (This process's own check of
/// what the node reports.)
fn verified(m: &Mended, r: &WatchReport) -> bool {
    let goal = m.goal();
    let n = m.survivors();
    let a = goal.position(r.rank);
    let ring = r.succ == Some(goal.at(forward(a, 1, n))) && r.pred == Some(goal.at(backward(a, 1, n)));
    let l = levels(n);
    ring && r.cw.len() >= l
        && r.ccw.len() >= l
        && (0..l).all(|k| {
            r.cw[k] == Some(goal.at(forward(a, 1 << k, n))) && r.ccw[k] == Some(goal.at(backward(a, 1 << k, n)))
        })
}

/// What `bootstrap --kill` measured: from the kill to the first suspicion (detect), to every
/// survivor knowing every death (spread), to the legitimate BMG over the survivors (repair).
pub struct KillOutcome {
    pub nodes: u32,
    pub killed: Vec<u32>,
    /// From the first launch to the last complete address table.
    pub boot_ms: f64,
    pub detect_ms: f64,
    /// How the first suspicion came (`heartbeat`, `icmp`).
    pub detected_by: String,
    /// Survivors that detected a death themselves.
    pub detectors: usize,
    pub spread_ms: f64,
    pub notice_rounds: u32,
    /// The notices' bound in rounds.
    pub notice_span: u32,
    pub repair_ms: f64,
    pub total_ms: f64,
    /// Survivors that reported the legitimate state, of `survivors`.
    pub reports: usize,
    pub survivors: usize,
    /// The repaired ring.
    pub ring: Vec<u32>,
}

/// Runs `ftcoll bootstrap --nodes N --kill R[,R..]`: `n` nodes launched as `a` says, `kill`
/// SIGKILLed once the overlay is built, the survivors' repair timed and checked.
pub fn run(a: &BootLaunch, kill: &[u32], n: u32) -> Result<KillOutcome, String> {
    detector(&a.detector)?;
    let kill: BTreeSet<u32> = kill.iter().copied().collect();
    if let Some(r) = kill.iter().find(|&&r| r >= n) {
        return Err(format!("--kill {r} is not below --nodes {n}"));
    }
    if kill.len() + 2 > n as usize {
        return Err(format!("--kill must leave at least 2 of the {n} nodes"));
    }
    let tree = LaunchTree::from_tree(&launch_tree(n)?);
    let mut mended = Mended::new(&tree);
    for &k in &kill {
        mended.excise(k)?;
    }
    let mut l = launch(a, n, true)?;
    let boot_ms = l
        .reports
        .iter()
        .map(|r| r.table_unix_us)
        .max()
        .unwrap_or(l.launched_us)
        .saturating_sub(l.launched_us) as f64
        / 1000.0;
    // Let the heartbeats flow between every pair of neighbours first.
    std::thread::sleep(Duration::from_millis(5 * a.detector.heartbeat_ms));
    let kill_us = unix_us();
    for &k in &kill {
        l.procs.reap(k as usize);
    }
    let survivors: Vec<usize> = (0..n as usize).filter(|&r| !kill.contains(&(r as u32))).collect();
    let mut latest: Vec<Option<WatchReport>> = vec![None; n as usize];
    let deadline = Instant::now() + Duration::from_secs(a.timeout_s);
    let repaired = |x: &Option<WatchReport>| {
        x.as_ref()
            .is_some_and(|x| x.legitimate && x.dead.iter().copied().collect::<BTreeSet<_>>() == kill)
    };
    while !survivors.iter().all(|&r| repaired(&latest[r])) {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = l.procs.recv(left);
        let rep = match &line {
            Some((r, Some(text))) => serde_json::from_str::<WatchReport>(text).ok().map(|rep| (*r, rep)),
            _ => None,
        };
        if let Some((r, None)) = line
            && !kill.contains(&(r as u32))
        {
            return Err(l.procs.exit_error(r, "while watching"));
        }
        match (line.is_some(), rep) {
            (true, None) => {}
            (true, Some((r, rep))) => {
                if let Some(d) = rep.dead.iter().find(|d| !kill.contains(d)) {
                    return Err(format!("rank {r} took live rank {d} for dead (a false suspicion)"));
                }
                latest[r] = Some(rep);
            }
            (false, _) => {
                let missing: Vec<String> = survivors
                    .iter()
                    .filter(|&&r| !repaired(&latest[r]))
                    .map(|r| r.to_string())
                    .collect();
                return Err(format!(
                    "the overlay was not repaired within {} s (ranks not done: {})",
                    a.timeout_s,
                    missing.join(" ")
                ));
            }
        }
    }
    let reps: Vec<&WatchReport> = survivors.iter().filter_map(|&r| latest[r].as_ref()).collect();
    let bad: Vec<String> = reps
        .iter()
        .filter(|r| !verified(&mended, r))
        .map(|r| r.rank.to_string())
        .collect();
    // Every node is done: close their stdin, they exit.
    l.procs.close_inputs();
    for &r in &survivors {
        if let Some(st) = l.procs.wait(r)?
            && !st.success()
        {
            return Err(format!("rank {r} exited with {st}"));
        }
    }
    if !bad.is_empty() {
        return Err(format!(
            "ranks {} reported a state that is not the legitimate BMG over the survivors",
            bad.join(" ")
        ));
    }
    let first = reps
        .iter()
        .filter(|r| r.detected_unix_us > 0)
        .min_by_key(|r| r.detected_unix_us)
        .ok_or("no survivor detected the deaths itself")?;
    let learned = reps.iter().map(|r| r.learned_unix_us).max().unwrap_or(0);
    let legit = reps.iter().map(|r| r.legit_unix_us).max().unwrap_or(0);
    let ms = |from: u64, to: u64| to.saturating_sub(from) as f64 / 1000.0;
    let detect_ms = ms(kill_us, first.detected_unix_us);
    let spread_ms = ms(first.detected_unix_us, learned);
    let repair_ms = ms(learned, legit);
    let total_ms = ms(kill_us, legit);
    let rounds = reps.iter().map(|r| r.notice_rounds).max().unwrap_or(0);
    let span = FailureNotices::new(0, &tree.ring_order(), n).span();
    let detectors = reps.iter().filter(|r| r.detected_unix_us > 0).count();
    Ok(KillOutcome {
        nodes: n,
        killed: kill.into_iter().collect(),
        boot_ms,
        detect_ms,
        detected_by: first.detected_by.clone(),
        detectors,
        spread_ms,
        notice_rounds: rounds,
        notice_span: span,
        repair_ms,
        total_ms,
        reports: reps.len(),
        survivors: survivors.len(),
        ring: mended.tree().ring_order(),
    })
}
