//! A library user's broadcast across processes against the same within one process: `n`
//! [`Member`]s (threads here, each with its own sockets and its own thread, as `n` processes
//! would have) call each broadcast collectively, its root rotating, and the next root calls
//! only once every member delivered the last one (one broadcast in flight); against a UDP
//! [`Group`] of `n` whose caller broadcasts from the same roots and waits for every member's
//! [`Event::Delivered`]. Reported per group size, alternating the two `--reps` times: the time
//! from the root's call to the last member's delivery (p50, p99 over the measured broadcasts),
//! as each caller sees it (request channel, member threads and event channel included); the
//! callers wait yielding their core (a spinning caller starves the member threads of a small
//! machine for a time slice each). Same
//! algorithm, node machine and transport: what differs is one thread per member with its own
//! event stream against a group's workers and lead. With more threads than cores this
//! measures the scheduler.
//!
//! `cargo bench --bench member_bcast` (`-- --quick` for a shorter run, `-- --nodes 4,8` for the
//! sizes, `-- --reps R` for the alternations).

#[path = "args.rs"]
mod args;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ftcoll::group::{Event, Group, Member, MemberSpec};
use ftcoll::runtime::TransportKind;
use hdrhistogram::Histogram;

/// The payload of every broadcast.
const BYTES: &[u8] = b"0123456789abcdef";

/// Runs `warmup + ops` broadcasts among `n` members; the measured ones' latencies in ns.
fn members(n: u32, warmup: u32, ops: u32) -> Result<Histogram<u64>, String> {
    let at = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map_err(|e| e.to_string())?;
    let total = (warmup + ops) as usize;
    // Per broadcast: the root's call (ns since `t0`) and the members that delivered it.
    let called: Arc<Vec<std::sync::atomic::AtomicU64>> = Arc::new((0..total).map(|_| Default::default()).collect());
    let delivered: Arc<Vec<AtomicU32>> = Arc::new((0..total).map(|_| AtomicU32::new(0)).collect());
    let last: Arc<Vec<std::sync::atomic::AtomicU64>> = Arc::new((0..total).map(|_| Default::default()).collect());
    let t0 = Instant::now();
    let threads: Vec<_> = (0..n)
        .map(|rank| {
            let (called, delivered, last) = (called.clone(), delivered.clone(), last.clone());
            std::thread::spawn(move || -> Result<(), String> {
                let mut m = Member::join(MemberSpec::new(rank, n, at)).map_err(|e| e.to_string())?;
                let mut got = 0usize;
                for seq in 0..total {
                    let root = (seq % n as usize) as u32;
                    if root == rank {
                        // One broadcast in flight: the last one is delivered everywhere.
                        while seq > 0 && delivered[seq - 1].load(Ordering::Acquire) < n {
                            drain(&mut m, &delivered, &last, t0, &mut got)?;
                            // Not a spin: the member threads need the cores.
                            std::thread::yield_now();
                        }
                        called[seq].store(t0.elapsed().as_nanos() as u64, Ordering::Release);
                    }
                    m.broadcast(root, BYTES).map_err(|e| e.to_string())?;
                }
                let deadline = Instant::now() + Duration::from_secs(60);
                while got < total {
                    if Instant::now() > deadline {
                        return Err(format!("member {rank}: {got} of {total} delivered in 60 s"));
                    }
                    drain(&mut m, &delivered, &last, t0, &mut got)?;
                    std::thread::yield_now();
                }
                // Every member delivered every broadcast before any leaves.
                while delivered[total - 1].load(Ordering::Acquire) < n {
                    std::thread::yield_now();
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| "a member panicked".to_string())??;
    }
    let mut h = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    for seq in warmup as usize..total {
        let (c, l) = (called[seq].load(Ordering::Acquire), last[seq].load(Ordering::Acquire));
        h.record(l.saturating_sub(c).max(1)).map_err(|e| e.to_string())?;
    }
    Ok(h)
}

/// Takes the member's events that are there: each delivery counted and stamped.
fn drain(
    m: &mut Member,
    delivered: &[AtomicU32],
    last: &[std::sync::atomic::AtomicU64],
    t0: Instant,
    got: &mut usize,
) -> Result<(), String> {
    while let Some(ev) = m.poll() {
        match ev {
            Event::Delivered { seq, .. } => {
                last[seq as usize].fetch_max(t0.elapsed().as_nanos() as u64, Ordering::AcqRel);
                delivered[seq as usize].fetch_add(1, Ordering::AcqRel);
                *got += 1;
            }
            Event::Completed {
                seq, timed_out: true, ..
            } => return Err(format!("broadcast {seq} timed out")),
            Event::Failed { rank } => return Err(format!("member {rank} failed")),
            _ => {}
        }
    }
    Ok(())
}

/// The same broadcasts in a UDP group of `n` (one worker per member, as members have a
/// thread each): the caller's call to the last member's delivery, ns.
fn group(n: u32, warmup: u32, ops: u32) -> Result<Histogram<u64>, String> {
    let mut g = Group::builder(n)
        .transport(TransportKind::Udp)
        .workers(n as usize)
        .agreements(false)
        .build()
        .map_err(|e| e.to_string())?;
    let mut h = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    for i in 0..warmup + ops {
        let t = Instant::now();
        g.broadcast(i % n, BYTES).map_err(|e| e.to_string())?;
        let mut got = 0;
        while got < n {
            match g.poll() {
                Some(Event::Delivered { .. }) => got += 1,
                Some(Event::Failed { rank }) => return Err(format!("member {rank} failed")),
                Some(_) => {}
                None if t.elapsed() > Duration::from_secs(10) => return Err(format!("broadcast {i}: {got} of {n}")),
                None => std::thread::yield_now(),
            }
        }
        if i >= warmup {
            h.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
        }
    }
    Ok(h)
}

fn main() {
    let args::Args { quick, nodes, reps } = args::Args::parse(&[4, 8]);
    let (warmup, ops) = if quick { (50, 300) } else { (200, 2000) };
    println!(
        "cores: {}; {ops} broadcasts of {} bytes after {warmup}, one in flight",
        std::thread::available_parallelism().map_or(0, |c| c.get()),
        BYTES.len()
    );
    println!("rep n api p50_us p99_us");
    for rep in 1..=reps {
        for &n in &nodes {
            for (api, run) in [
                ("member", members as fn(u32, u32, u32) -> Result<Histogram<u64>, String>),
                ("group", group),
            ] {
                match run(n, warmup, ops) {
                    Ok(h) => println!(
                        "{rep} {n} {api} {:.1} {:.1}",
                        h.value_at_quantile(0.5) as f64 / 1e3,
                        h.value_at_quantile(0.99) as f64 / 1e3
                    ),
                    Err(e) => {
                        eprintln!("member_bcast: n = {n}, {api}: {e}");
                        std::process::exit(1);
                    }
                }
            }
        }
    }
}
