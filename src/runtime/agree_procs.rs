//! The line protocol of agreement node processes and its node loop: what a node process
//! says to the process that coordinates it (`ready`, its returns in batches
//! ([`agree_stream`]), its injected crash with its time, the peers whose returns stop
//! counting, its result line; `parse` reads them) and what it is told (`go`, `next SPEC`,
//! the end of its input). The node processes of `agree --procs` are members of a group of
//! processes (`experiment::launch::agree_node`, which speaks these lines to its parent over
//! its pipes); those of `agree --join` speak them over TCP to rank 0
//! (`experiment::launch::agree_join`) and run `run_node`, the same node (ERA on the
//! heartbeat detector, `runtime/agree/node.rs`) over a transport their rendezvous connected
//! (UDP or verbs). Either way a kill is a real `SIGKILL` and peers learn of it from the
//! closed socket (ICMP port unreachable through `IP_RECVERR`, `transport/udp/icmp.rs`), the
//! host's death board or their heartbeats. The coordinating side merges the streamed returns
//! into one online window (per-agreement rows in constant memory).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::protocol::agree::{AgreeId, EraConfig, Rebalance, Shape};
use crate::runtime::agree::{
    AgreeBench, AgreeTransport, CrashReport, Fold, Node, NodeInit, Shared, Stall, peak_rss_kb, stall_of, total,
    validate,
};
use crate::runtime::agree_stream::{self, BATCH, FLUSH_MS};
use crate::runtime::agree_window::Rec;
use crate::transport::Transport;
use crate::wire::DropCounters;

/// Everything one node process needs (passed as one JSON argument).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChildSpec {
    pub rank: u32,
    /// The group's size.
    pub nodes: u32,
    /// Every node's address, by rank (`agree --join`'s nodes; empty for `agree --procs`'s,
    /// which join a rendezvous: [`ChildSpec::coordinator`]).
    #[serde(default)]
    pub peers: Vec<SocketAddr>,
    pub epoch_unix_ns: u64,
    pub tree: String,
    pub gc: bool,
    /// 0 off, 1 degenerated, 2 always.
    pub rebalance: u8,
    pub warmup: u64,
    pub iterations: u64,
    pub duration_ms: Option<u64>,
    pub kills: Vec<(u32, u64)>,
    /// `(rank, i, pause µs)`: [`crate::runtime::agree::Stall`]s.
    #[serde(default)]
    pub stalls: Vec<(u32, u64, u64)>,
    pub heartbeat_us: u64,
    pub suspect_ms: u64,
    pub op_timeout_ms: u64,
    pub seed: u64,
    /// Generation of the group (`stress agree --procs`); 0 for `agree --procs`.
    pub generation: u64,
    /// The rendezvous of the generation's group (`agree --procs`: the parent's, which its
    /// node processes join as members, `experiment::launch::agree_node`); `None` for a
    /// launched node (`agree --join`), which has its `peers`.
    #[serde(default)]
    pub coordinator: Option<SocketAddr>,
    /// The generation's death board, when the node processes share this host
    /// ([`crate::transport::death_watch`]; `None`: none, as for launched nodes).
    #[serde(default)]
    pub death_board: Option<String>,
}

/// One node process's result line.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ChildResult {
    pub rank: u32,
    pub finished: bool,
    pub returned: u64,
    pub invalid: u64,
    pub max_stored: usize,
    pub suspected: Vec<u32>,
    pub messages: u64,
    pub heartbeats: u64,
    /// Of those, probes ([`crate::runtime::driver::Driver::probe`]).
    #[serde(default)]
    pub probes: u64,
    pub transport: [u64; 4],
    pub drops: DropCounters,
    /// Outcome digests per block of [`crate::runtime::agree::DIGEST_BLOCK`] agreements.
    pub digests: Vec<u64>,
    pub peak_rss_kb: Option<u64>,
    /// The agreed failed set of the last agreement returned (the shrink's input).
    pub failed: Vec<u32>,
    /// The peer whose FENCE stopped this node (it was suspected while alive), if one did:
    /// the node reports at once and counts as dead, a false suspicion.
    #[serde(default)]
    pub fenced_by: Option<u32>,
    /// When this node first suspected a peer (ns on the run's clock).
    #[serde(default)]
    pub first_suspect_ns: Option<u64>,
    /// The rest of the transport's counters: window-full refusals, ACKs sent, refused
    /// datagrams, refused PROBEs.
    #[serde(default)]
    pub counters: [u64; 4],
    /// Peers suspected because their process died on this host (the death board).
    #[serde(default)]
    pub died_on_host: u64,
}

#[derive(Serialize, Deserialize)]
struct Killed {
    rank: u32,
    killed_ns: u64,
}

/// Node `left_out`'s returns from agreement `from_id` on do not count: this node suspected
/// it (or it was killed or fenced) then.
#[derive(Serialize, Deserialize)]
struct LeftOut {
    left_out: u32,
    from_id: u64,
}

/// Where a node process's lines go (its stdout, or its stream to rank 0), shared with its
/// crash report.
pub(crate) type Out = Arc<Mutex<Box<dyn Write + Send>>>;

pub(crate) fn say(out: &Out, line: &str) -> Result<(), String> {
    let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
    writeln!(o, "{line}")
        .and_then(|()| o.flush())
        .map_err(|e| format!("cannot report to the coordinating process: {e}"))
}

/// The node process dies here: silent from now on, it sends the returns it has not sent yet
/// but its last one — a decision that may not have spread before the crash, so the survivors
/// may decide otherwise (ERA's agreement is non-uniform, §1) — and says so with the time on
/// the common clock. Under a parent (`--procs`) it then waits for the parent's SIGKILL (the parent times
/// the kill); a launched node (`--join`) kills itself right away.
pub(crate) fn crash_report(out: Out, parent_kills: bool) -> CrashReport {
    Box::new(move |rank, ns, pending| {
        if !pending.is_empty() {
            let _ = say(&out, &agree_stream::encode(pending));
        }
        let line = serde_json::to_string(&Killed { rank, killed_ns: ns }).unwrap_or_default();
        let _ = say(&out, &line);
        if parent_kills {
            std::thread::sleep(Duration::from_secs(10));
        }
    })
}

/// How a node process tells its parent (or rank 0) whose returns no longer count, at once:
/// the line goes out before any return this node makes after it, so the merge (which passes
/// on an agreement only once every open stream reached it) has it before it classes the
/// agreements concerned. A falsely suspected node may have returned the agreement it was
/// suspected in, or more if it suspected its suspecters too, before a FENCE stopped it; it
/// is dead to the group, and ERA's agreement is non-uniform (§1): those returns may differ
/// and are left out, as the threads run's window leaves them out.
pub(crate) fn left_out_report(out: Out) -> crate::runtime::agree::LeftOutReport {
    Box::new(move |r, from| {
        let line = serde_json::to_string(&LeftOut {
            left_out: r,
            from_id: from,
        })
        .unwrap_or_default();
        let _ = say(&out, &line);
    })
}

fn shape_config(s: &ChildSpec) -> Result<EraConfig, String> {
    let shape: Shape = s.tree.parse()?;
    Ok(EraConfig {
        shape,
        window: 1,
        gc: s.gc,
        rebalance: match s.rebalance {
            0 => Rebalance::Off,
            1 => Rebalance::Degenerated,
            _ => Rebalance::Always,
        },
    })
}

pub(crate) fn bench_of(s: &ChildSpec) -> Result<AgreeBench, String> {
    Ok(AgreeBench {
        n: s.nodes,
        era: shape_config(s)?,
        transport: AgreeTransport::Udp,
        workers: 1,
        pin: false,
        warmup: s.warmup,
        iterations: s.iterations,
        duration: s.duration_ms.map(Duration::from_millis),
        kills: s.kills.clone(),
        stalls: s
            .stalls
            .iter()
            .map(|&(rank, at, us)| Stall {
                rank,
                at,
                pause: Duration::from_micros(us),
            })
            .collect(),
        heartbeat: Duration::from_micros(s.heartbeat_us.max(1)),
        suspect_after: Duration::from_millis(s.suspect_ms.max(1)),
        op_timeout: Duration::from_millis(s.op_timeout_ms.max(1)),
        seed: s.seed,
    })
}

/// Every line of `input` on a channel, from a thread of its own (its end closes the channel).
pub(crate) fn lines_of(input: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(input).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// One generation of one node process over `tp`, on the common clock `base`: say `ready`,
/// wait for `go`, run the agreements streaming the returns ([`agree_stream`]), report, keep
/// answering peers until told `next SPEC` (returned) or the input ends (`None`).
pub(crate) fn run_node(
    s: &ChildSpec,
    rx: &mpsc::Receiver<String>,
    out: &Out,
    base: Instant,
    tp: Box<dyn Transport>,
    parent_kills: bool,
) -> Result<Option<ChildSpec>, String> {
    let b = bench_of(s)?;
    validate(&b)?;
    if s.rank >= b.n {
        return Err(format!("--spec: rank {} of {} nodes", s.rank, b.n));
    }
    let first_kill = b.kills.iter().map(|k| b.warmup + k.1).min();
    let mut sh = Shared::streaming(base, b.n, b.warmup, first_kill);
    sh.on_crash = Some(crash_report(out.clone(), parent_kills));
    sh.on_left_out = Some(left_out_report(out.clone()));
    let init = NodeInit {
        rank: s.rank,
        total: total(&b),
        deadline: None,
        kill_id: b.kills.iter().find(|k| k.0 == s.rank).map(|k| b.warmup + k.1),
        stall: stall_of(&b, s.rank),
    };
    let mut node = Node::new(&b, init, tp, base)?;
    node.tap = Some(Vec::with_capacity(BATCH));
    say(out, "ready")?;
    match rx.recv() {
        Ok(l) if l.trim() == "go" => {}
        _ => return Ok(None), // The parent gave up before the start.
    }
    let now = Instant::now();
    node.set_deadline(b.duration.map(|d| now + d));
    node.start(&sh, now);
    let mut last_progress = now;
    let mut last_flush = now;
    let mut reported = false;
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    // More node processes (and the parent) than cores: yield the core after every empty pass
    // (as `bench --procs` nodes do) instead of sleeping on the socket, where every message
    // paid a kernel wake-up.
    let share_cores = b.n as usize + 1 > cores;
    loop {
        match rx.try_recv() {
            Ok(l) => {
                if let Some(next) = l.strip_prefix("next ") {
                    let next: ChildSpec = serde_json::from_str(next).map_err(|e| format!("bad next spec: {e}"))?;
                    return Ok(Some(next));
                }
            }
            Err(mpsc::TryRecvError::Empty) => {}
            Err(mpsc::TryRecvError::Disconnected) => return Ok(None),
        }
        let progress = node.step(&sh);
        let now = Instant::now();
        if progress {
            last_progress = now;
        }
        let timed_out = now.saturating_duration_since(last_progress) > b.op_timeout;
        let fenced = node.drv.fenced_by().is_some();
        let done = !reported && (node.finished || timed_out || fenced);
        if done {
            // (Returns the node still batches go out with the last stream line.)
            node.record_returns(&sh, Fold::Wait);
        }
        if let Some(tap) = node.tap.as_mut().filter(|t| {
            t.len() >= BATCH
                || (!t.is_empty()
                    && (done || now.saturating_duration_since(last_flush).as_millis() >= u128::from(FLUSH_MS)))
        }) {
            say(out, &agree_stream::encode(tap))?;
            tap.clear();
            last_flush = now;
        }
        if done {
            reported = true;
            let r = result(&node);
            say(out, &serde_json::to_string(&r).map_err(|e| e.to_string())?)?;
        }
        if !progress {
            if reported {
                // Done: only answering stragglers, so sleep on the socket.
                let _ = node.drv.tp.wait(Duration::from_millis(1));
            } else if share_cores {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

fn result(node: &Node) -> ChildResult {
    let t = node.drv.tp.stats();
    ChildResult {
        rank: node.rank,
        finished: node.finished,
        returned: node.returned,
        invalid: node.invalid,
        max_stored: node.max_stored,
        suspected: node.suspected.clone(),
        messages: node.drv.messages,
        heartbeats: node.drv.heartbeats,
        probes: node.drv.probes,
        transport: [t.sent, t.received, t.retransmits, t.suspected],
        counters: [t.window_full, t.acks_sent, t.refused, t.refused_probes],
        died_on_host: t.died_on_host,
        drops: node.drv.drops,
        digests: node.digests.clone(),
        peak_rss_kb: peak_rss_kb(),
        failed: node.last_failed.clone(),
        fenced_by: node.drv.fenced_by(),
        first_suspect_ns: node.first_suspect_ns,
    }
}

/// One line a node process says to its parent (or over its stream to rank 0).
pub(crate) enum Line {
    Ready,
    /// The node's own time of its crash, on the common clock.
    Killed(u64),
    /// Node `rank`'s returns from agreement `from` on do not count.
    LeftOut {
        rank: u32,
        from: AgreeId,
    },
    Recs(Vec<(AgreeId, Rec)>),
    Result(Box<ChildResult>),
    /// A line that is none of these (dropped, counted).
    Bad,
    Eof,
}

/// Reads one line of a node process.
pub(crate) fn parse(l: &str) -> Line {
    if let Some(body) = l.strip_prefix(agree_stream::PREFIX) {
        return agree_stream::decode(body).map_or(Line::Bad, Line::Recs);
    }
    if l.trim() == "ready" {
        Line::Ready
    } else if let Ok(k) = serde_json::from_str::<Killed>(l) {
        Line::Killed(k.killed_ns)
    } else if let Ok(d) = serde_json::from_str::<LeftOut>(l) {
        Line::LeftOut {
            rank: d.left_out,
            from: d.from_id,
        }
    } else if let Ok(res) = serde_json::from_str::<ChildResult>(l) {
        Line::Result(Box::new(res))
    } else {
        Line::Bad
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::agree_window::tests::rec;

    #[test]
    fn node_lines_parse_and_anything_else_is_bad() {
        assert!(matches!(parse("ready"), Line::Ready));
        assert!(matches!(parse(r#"{"rank":2,"killed_ns":77}"#), Line::Killed(77)));
        assert!(matches!(
            parse(r#"{"left_out":3,"from_id":190}"#),
            Line::LeftOut { rank: 3, from: 190 }
        ));
        let recs = vec![(5, rec(1, 2, 3, true))];
        assert!(matches!(parse(&agree_stream::encode(&recs)), Line::Recs(v) if v == recs));
        let r = serde_json::to_string(&ChildResult {
            rank: 1,
            finished: true,
            ..ChildResult::default()
        })
        .unwrap();
        assert!(matches!(parse(&r), Line::Result(x) if x.rank == 1 && x.finished));
        for bad in [
            "",
            "go",
            "recs ***",
            "recs ",
            r#"{"rank":2}"#,
            r#"{"left_out":3}"#,
            "ready now",
            // (Node processes no longer say the address they bound: they join the parent's
            // rendezvous.)
            "bound 127.0.0.1:4000",
        ] {
            assert!(matches!(parse(bad), Line::Bad), "{bad:?}");
        }
    }
}
