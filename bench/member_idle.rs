//! What an idle [`Member`] costs the process that embeds it: `n` members (threads here, each
//! with its own sockets and thread, as `n` processes would have) join, agree once, and then do
//! nothing for `--secs`; reported per member: the CPU time its process spent per second (all
//! threads, from `/proc/self/task/*/schedstat`, divided by `n`) and the agreement datagrams it
//! sent per second (its transport's counters: messages and heartbeats). Two settings, alternated `--reps` times: the
//! default idle heartbeat (`MemberSpec::idle_heartbeat`: `suspect_after / 8`), and the idle
//! heartbeat set to the in-flight one (50 µs): members then beat as every idle member did
//! before the idle period existed (and wake every 50 µs, where they then woke every 100 µs).
//!
//! `cargo bench --bench member_idle` (`-- --quick` for a shorter run, `-- --nodes 3,8` for the
//! sizes, `-- --reps R` for the alternations).

#[path = "args.rs"]
mod args;

use std::time::{Duration, Instant};

use ftcoll::group::{Event, Member, MemberSpec};

/// Nanoseconds this process's threads have run, from each task's `schedstat` (its first field).
fn cpu_ns() -> Result<u64, String> {
    let mut total = 0;
    let dir = std::fs::read_dir("/proc/self/task").map_err(|e| format!("cannot list /proc/self/task: {e}"))?;
    for task in dir.flatten() {
        // A thread that ended meanwhile has no file any more: it no longer runs.
        if let Ok(s) = std::fs::read_to_string(task.path().join("schedstat")) {
            total += s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Ok(total)
}

/// `n` members idle for `secs` after one agreement: (CPU ms per second, datagrams per second)
/// per member.
fn idle(n: u32, secs: f64, idle_heartbeat: Option<Duration>) -> Result<(f64, f64), String> {
    let at = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map_err(|e| e.to_string())?;
    let joins: Vec<_> = (0..n)
        .map(|rank| {
            std::thread::spawn(move || {
                Member::join(MemberSpec {
                    idle_heartbeat,
                    ..MemberSpec::new(rank, n, at)
                })
            })
        })
        .collect();
    let mut ms = Vec::new();
    for j in joins {
        ms.push(
            j.join()
                .map_err(|_| "a join panicked".to_string())?
                .map_err(|e| e.to_string())?,
        );
    }
    for m in ms.iter_mut() {
        m.agree(!0).map_err(|e| e.to_string())?;
    }
    for m in ms.iter_mut() {
        loop {
            match m.next_event(Duration::from_secs(10)) {
                Some(Event::Agreed { .. }) => break,
                Some(_) => {}
                None => return Err(format!("member {} did not return in 10 s", m.rank())),
            }
        }
    }
    let sent = |ms: &[Member]| -> Result<u64, String> {
        ms.iter()
            .map(|m| {
                m.counters()
                    .map(|c| c.agreements.sent + c.agreements.beats_sent)
                    .map_err(|e| e.to_string())
            })
            .sum()
    };
    // Settle: the agreement's last acknowledgements and the switch to the idle period.
    std::thread::sleep(Duration::from_millis(100));
    let (c0, s0, t0) = (cpu_ns()?, sent(&ms)?, Instant::now());
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (c1, s1, dt) = (cpu_ns()?, sent(&ms)?, t0.elapsed().as_secs_f64());
    let per = f64::from(n) * dt;
    Ok(((c1 - c0) as f64 / 1e6 / per, (s1 - s0) as f64 / per))
}

fn main() {
    let args::Args { quick, nodes, reps } = args::Args::parse(&[3, 8]);
    let secs = if quick { 1.0 } else { 3.0 };
    println!(
        "cores: {}; members idle {secs} s after one agreement; per member",
        std::thread::available_parallelism().map_or(0, |c| c.get())
    );
    println!("rep n idle_heartbeat cpu_ms_per_s datagrams_per_s");
    let beat = MemberSpec::new(0, 2, ([127, 0, 0, 1], 1).into()).heartbeat;
    for rep in 1..=reps {
        for &n in &nodes {
            for (name, period) in [("default", None), ("in-flight", Some(beat))] {
                match idle(n, secs, period) {
                    Ok((cpu, sent)) => println!("{rep} {n} {name} {cpu:.2} {sent:.0}"),
                    Err(e) => {
                        eprintln!("member_idle: n = {n}, {name}: {e}");
                        std::process::exit(1);
                    }
                }
            }
        }
    }
}
