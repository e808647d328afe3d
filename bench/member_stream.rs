//! An agreement stream across processes against the same within one process: `n`
//! [`Member`]s (threads here, each with its own sockets and its own thread, as `n` processes
//! would have) run [`Member::agree_stream`], each stepping its ERA node on its caller's
//! thread; against a UDP [`Group`] of `n` on `min(n, cores)` workers running [`Group::agree_stream`] with
//! the same stream, failure detector and seed. Same node (`runtime/agree/node.rs`), protocol
//! and transport: what differs is the shell (a member's own thread and stream socket, the
//! start and end agreements on the member's thread, against a group's workers). Reported per
//! group size, alternating the two `--reps` times: each member's entry-to-return time of the
//! measured agreements (p50, p99 over all members' returns), and, as checks, that every
//! member returned every agreement with valid values and the same outcomes. With more
//! threads than cores this measures the scheduler.
//!
//! `cargo bench --bench member_stream` (`-- --quick` for a shorter run, `-- --nodes 2,4` for
//! the sizes, `-- --reps R` for the alternations).

#[path = "args.rs"]
mod args;

use std::time::Duration;

use ftcoll::group::{AgreeStream, Group, Member, MemberSpec};
use ftcoll::runtime::TransportKind;
use hdrhistogram::Histogram;

/// The failure detector of both: a member's defaults.
const HEARTBEAT: Duration = Duration::from_micros(50);
const SUSPECT_AFTER: Duration = Duration::from_millis(100);

fn stream(warmup: u64, agreements: u64) -> AgreeStream {
    AgreeStream {
        warmup,
        ..AgreeStream::new(agreements)
    }
}

/// `n` members' stream; every member's measured returns, ns.
fn members(n: u32, warmup: u64, agreements: u64) -> Result<Histogram<u64>, String> {
    let at = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map_err(|e| e.to_string())?;
    let threads: Vec<_> = (0..n)
        .map(|rank| {
            std::thread::spawn(move || {
                let spec = MemberSpec {
                    broadcasts: false,
                    streams: true,
                    heartbeat: HEARTBEAT,
                    suspect_after: SUSPECT_AFTER,
                    ..MemberSpec::new(rank, n, at)
                };
                let mut m = Member::join(spec).map_err(|e| e.to_string())?;
                let r = m.agree_stream(stream(warmup, agreements)).map_err(|e| e.to_string())?;
                // Every member is done before any leaves (the closing agreement returned).
                Ok::<_, String>((r, m))
            })
        })
        .collect();
    let done: Vec<_> = threads
        .into_iter()
        .map(|t| t.join().map_err(|_| "a member panicked".to_string())?)
        .collect::<Result<_, _>>()?;
    let mut h = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    for (r, m) in &done {
        if (r.returned, r.invalid, r.all_finished) != (warmup + agreements, 0, true) {
            return Err(format!(
                "member {}: returned {}, invalid {}, all finished {}",
                m.rank(),
                r.returned,
                r.invalid,
                r.all_finished
            ));
        }
        if r.digests != done[0].0.digests {
            return Err(format!("member {} returned other outcomes than member 0", m.rank()));
        }
        h.add(&r.latency).map_err(|e| e.to_string())?;
    }
    Ok(h)
}

/// The same stream in a UDP group of `n` on as many workers as members and cores (busy
/// workers beyond the cores would wait out each other's time slices, where members, more
/// threads than cores, yield): every member's measured returns, ns.
fn group(n: u32, warmup: u64, agreements: u64) -> Result<Histogram<u64>, String> {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let mut g = Group::builder(n)
        .transport(TransportKind::Udp)
        .workers((n as usize).min(cores))
        .broadcasts(false)
        .agreements(false)
        .failure_detector(HEARTBEAT, SUSPECT_AFTER)
        .build()
        .map_err(|e| e.to_string())?;
    let r = g.agree_stream(stream(warmup, agreements)).map_err(|e| e.to_string())?;
    if (r.agreements, r.disagreements, r.invalid, r.unfinished) != (warmup + agreements, 0, 0, 0) {
        return Err(format!(
            "{} agreements, {} disagreements, {} invalid, {} unfinished",
            r.agreements, r.disagreements, r.invalid, r.unfinished
        ));
    }
    let mut h = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    for c in &r.classes {
        h.add(&c.node).map_err(|e| e.to_string())?;
    }
    Ok(h)
}

fn main() {
    let args::Args { quick, nodes, reps } = args::Args::parse(&[2, 4]);
    let (warmup, agreements) = if quick { (200, 2000) } else { (1000, 20000) };
    println!(
        "cores: {}; {agreements} agreements after {warmup}, UDP loopback",
        std::thread::available_parallelism().map_or(0, |c| c.get()),
    );
    println!("rep n api p50_us p99_us");
    for rep in 1..=reps {
        for &n in &nodes {
            for (api, run) in [
                ("member", members as fn(u32, u64, u64) -> Result<Histogram<u64>, String>),
                ("group", group),
            ] {
                match run(n, warmup, agreements) {
                    Ok(h) => println!(
                        "{rep} {n} {api} {:.1} {:.1}",
                        h.value_at_quantile(0.5) as f64 / 1e3,
                        h.value_at_quantile(0.99) as f64 / 1e3
                    ),
                    Err(e) => {
                        eprintln!("member_stream: n = {n}, {api}: {e}");
                        std::process::exit(1);
                    }
                }
            }
        }
    }
}
