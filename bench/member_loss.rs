//! Agreements of a group of processes under receive loss: `n` [`Member`]s (threads here, each
//! with its own sockets and thread, as `n` processes would have), agreements only, each
//! member's receive side dropping a share of the datagrams ([`MemberSpec::loss`]), run a
//! closed loop of agreements (each member enters the next one when its last returned);
//! reported per loss rate: the run's wall time, the p50 and p99 of a member's agreement
//! (its call to its return, the median member), and what the members' agreement transports
//! counted: messages sent, heartbeats sent (outside the reliable stream), sends refused on a
//! full window, retransmissions. A run that does not finish in `--limit` seconds (default
//! 60) is reported as such, not waited for (its members go on running beside the next rows). Any failure reported or a disagreement fails the
//! bench.
//!
//! `cargo bench --bench member_loss` (`-- --quick` for fewer agreements, `-- --nodes 4` for the
//! sizes, `-- --reps R` for the repetitions, `-- --loss 0,0.05,0.15,0.3` for the rates).

#[path = "args.rs"]
mod args;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use ftcoll::group::{Event, Member, MemberSpec};

/// One run: (wall s, p50 µs, p99 µs, messages, heartbeats, window full, retransmits).
type Row = (f64, u64, u64, u64, u64, u64, u64);

/// One member's loop of `rounds` agreements: its latencies (µs, sorted) and its counters.
/// The member is handed back, to leave once every member is done (one that left early would
/// be failed by the others).
fn member(spec: MemberSpec, rounds: u64) -> Result<(Vec<u64>, [u64; 4], u64, Member), String> {
    let mut m = Member::join(spec).map_err(|e| e.to_string())?;
    let mut lat = Vec::with_capacity(rounds as usize);
    let mut digest = 0u64;
    for i in 0..rounds {
        let t = Instant::now();
        m.agree(!(1u64 << (i % 64))).map_err(|e| e.to_string())?;
        loop {
            match m.next_event(Duration::from_secs(30)) {
                Some(Event::Agreed { id, value, failed, .. }) if id == i => {
                    if !failed.is_empty() {
                        return Err(format!("member {} agreed {failed:?} failed", m.rank()));
                    }
                    digest = digest.rotate_left(1) ^ value;
                    break;
                }
                Some(Event::Failed { rank }) => return Err(format!("member {} reported {rank} failed", m.rank())),
                Some(_) => {}
                None => return Err(format!("member {}: agreement {i} did not return in 30 s", m.rank())),
            }
        }
        lat.push(t.elapsed().as_micros() as u64);
    }
    let c = m.counters().map_err(|e| e.to_string())?.agreements;
    lat.sort_unstable();
    Ok((lat, [c.sent, c.beats_sent, c.window_full, c.retransmits], digest, m))
}

/// `n` members, `rounds` agreements at `loss`; `None` when it did not finish in `limit`.
fn run(n: u32, loss: f64, rounds: u64, limit: Duration) -> Result<Option<Row>, String> {
    let at = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let (tx, rx) = mpsc::channel();
    for r in 0..n {
        let tx = tx.clone();
        let spec = MemberSpec {
            loss,
            broadcasts: false,
            // A loaded 2-core machine stalls threads for tens of ms: no false suspicion.
            suspect_after: Duration::from_secs(2),
            ..MemberSpec::new(r, n, at)
        };
        std::thread::spawn(move || {
            let _ = tx.send(member(spec, rounds));
        });
    }
    let mut got = Vec::new();
    for _ in 0..n {
        match rx.recv_timeout(limit.saturating_sub(t0.elapsed())) {
            Ok(r) => got.push(r?),
            // The members' threads are left behind, still running: the rows after this one
            // share the cores with them.
            Err(_) => return Ok(None),
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    if got.windows(2).any(|w| w[0].2 != w[1].2) {
        return Err("the members returned different decisions".into());
    }
    let mut p50: Vec<u64> = got.iter().map(|g| g.0[g.0.len() / 2]).collect();
    let mut p99: Vec<u64> = got.iter().map(|g| g.0[g.0.len() * 99 / 100]).collect();
    p50.sort_unstable();
    p99.sort_unstable();
    let sum = |i: usize| got.iter().map(|g| g.1[i]).sum::<u64>();
    let row = (
        wall,
        p50[p50.len() / 2],
        p99[p99.len() / 2],
        sum(0),
        sum(1),
        sum(2),
        sum(3),
    );
    // Every member is done: they leave.
    drop(got);
    Ok(Some(row))
}

fn main() {
    let args::Args { quick, nodes, reps } = args::Args::parse(&[4]);
    let argv: Vec<String> = std::env::args().collect();
    let value = |name: &str| argv.iter().position(|a| a == name).and_then(|i| argv.get(i + 1));
    let losses: Vec<f64> = value("--loss").map_or(vec![0.0, 0.05, 0.15, 0.3], |v| {
        v.split(',').filter_map(|s| s.trim().parse().ok()).collect()
    });
    let limit = Duration::from_secs(value("--limit").and_then(|v| v.parse().ok()).unwrap_or(60));
    let rounds = if quick { 200 } else { 1000 };
    println!(
        "cores: {}; {rounds} agreements per run, agreements only, receive loss on every member",
        std::thread::available_parallelism().map_or(0, |c| c.get())
    );
    println!("rep n loss wall_s p50_us p99_us messages heartbeats window_full retransmits");
    for rep in 1..=reps {
        for &n in &nodes {
            for &loss in &losses {
                match run(n, loss, rounds, limit) {
                    Ok(Some((wall, p50, p99, sent, beats, full, rtx))) => {
                        println!("{rep} {n} {loss} {wall:.2} {p50} {p99} {sent} {beats} {full} {rtx}")
                    }
                    Ok(None) => println!("{rep} {n} {loss} unfinished after {} s", limit.as_secs()),
                    Err(e) => {
                        eprintln!("member_loss: n = {n}, loss {loss}: {e}");
                        std::process::exit(1);
                    }
                }
            }
        }
    }
    std::process::exit(0);
}
