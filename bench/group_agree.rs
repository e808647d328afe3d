//! A library user's agreement: every member of a [`Group`] calls [`Group::agree`], and the
//! agreement is over when the last member's [`Event::Agreed`] reaches the caller. Reported per
//! group size, worker count and transport: the time from the first member's request to the
//! last member's return (p50, p99 over the measured agreements), as the caller sees it,
//! request channel and event channel included. The workers and the caller poll busily (as a
//! benchmark's do: the caller spins on [`Group::poll`]); `-- --blocking`: as a group's
//! workers do by default, yielding and sleeping when idle, and the caller waits in
//! [`Group::next_event`] (each wake-up of the caller's thread then counts). With more
//! threads than cores (the workers and the caller) this measures the scheduler.
//!
//! `cargo bench --bench group_agree` (add `-- --quick` for a shorter run, `-- --workers 1,2`
//! and `-- --nodes 4,8` to choose the cells, `-- --heartbeat-us H` for the failure detector's
//! heartbeat period instead of the group's default, suspicion after `max(100 ms, 10 H)`).

use std::time::{Duration, Instant};

use ftcoll::group::{Event, Group};
use ftcoll::runtime::TransportKind;
use ftcoll::runtime::cluster::PollMode;
use hdrhistogram::Histogram;

/// Runs `warmup + agreements` agreements of every member of an `n`-member group on `workers`
/// workers; returns the measured agreements' latencies in ns.
fn measure(
    kind: TransportKind,
    n: u32,
    workers: usize,
    poll: PollMode,
    warmup: u32,
    agreements: u32,
    heartbeat: Option<Duration>,
) -> Result<Histogram<u64>, String> {
    let mut b = Group::builder(n);
    if let Some(hb) = heartbeat {
        b = b.failure_detector(hb, Duration::from_millis(100).max(hb * 10));
    }
    let mut g = b
        .transport(kind)
        .workers(workers)
        .poll(poll)
        .broadcasts(false)
        .build()
        .map_err(|e| e.to_string())?;
    let mut h = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    for i in 0..warmup + agreements {
        let t = Instant::now();
        for m in 0..n {
            g.agree(m, u64::MAX).map_err(|e| e.to_string())?;
        }
        let mut returned = 0;
        while returned < n {
            let ev = if poll == PollMode::Busy {
                let t = Instant::now();
                loop {
                    if let Some(ev) = g.poll() {
                        break Some(ev);
                    }
                    if t.elapsed() > Duration::from_secs(10) {
                        break None;
                    }
                    std::hint::spin_loop();
                }
            } else {
                g.next_event(Duration::from_secs(10))
            };
            match ev {
                Some(Event::Agreed { value, failed, .. }) => {
                    if value != u64::MAX || !failed.is_empty() {
                        return Err(format!("agreement {i} returned {value:#x}, failed {failed:?}"));
                    }
                    returned += 1;
                }
                Some(_) => {}
                None => return Err(format!("agreement {i}: {returned} of {n} members returned in 10 s")),
            }
        }
        if i >= warmup {
            h.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
        }
    }
    Ok(h)
}

/// The comma-separated list after `flag`, or `default`.
fn list<T: std::str::FromStr>(args: &[String], flag: &str, default: Vec<T>) -> Result<Vec<T>, String> {
    match args.iter().position(|a| a == flag) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .ok_or(format!("{flag} needs a value"))?
            .split(',')
            .map(|s| s.parse().map_err(|_| format!("{flag}: cannot read {s:?}")))
            .collect(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let poll = if args.iter().any(|a| a == "--blocking") {
        PollMode::Blocking
    } else {
        PollMode::Busy
    };
    let (warmup, agreements) = if quick { (50, 300) } else { (200, 2000) };
    let cells = list(&args, "--nodes", vec![4u32, 8]).and_then(|n| Ok((n, list(&args, "--workers", vec![1usize, 2])?)));
    let heartbeat = match list(&args, "--heartbeat-us", Vec::<u64>::new()) {
        Ok(v) => v.first().map(|&us| Duration::from_micros(us.max(1))),
        Err(e) => {
            eprintln!("group_agree: {e}");
            std::process::exit(2);
        }
    };
    let (nodes, workers) = match cells {
        Ok(c) => c,
        Err(e) => {
            eprintln!("group_agree: {e}");
            std::process::exit(2);
        }
    };
    println!(
        "Group::agree, every member, first request to last return ({agreements} agreements after {warmup}, {poll:?} workers)"
    );
    println!(
        "{:>8} {:>5} {:>8} {:>10} {:>10}",
        "transport", "n", "workers", "p50 us", "p99 us"
    );
    for kind in [TransportKind::Inproc, TransportKind::Udp] {
        for &n in &nodes {
            for &w in &workers {
                match measure(kind, n, w, poll, warmup, agreements, heartbeat) {
                    Ok(h) => println!(
                        "{:>8} {:>5} {:>8} {:>10.1} {:>10.1}",
                        format!("{kind:?}").to_lowercase(),
                        n,
                        w,
                        h.value_at_quantile(0.5) as f64 / 1e3,
                        h.value_at_quantile(0.99) as f64 / 1e3
                    ),
                    Err(e) => {
                        eprintln!("group_agree: {e}");
                        std::process::exit(1);
                    }
                }
            }
        }
    }
}
