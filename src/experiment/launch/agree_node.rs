//! The node process of `ftcoll agree --procs` and `stress agree --procs` (`ftcoll
//! agree-node`, [`child`]): a [`Member`] of the group of node processes, which joins the
//! rendezvous its parent serves (`group::Rendezvous`, the parent's side is
//! [`super::agree`]) and runs the parent's stream of agreements as
//! [`Member::agree_stream`] runs it among any group of processes, with the parent's hooks:
//! its returns streamed to the parent in batches, its injected crash announced with its time
//! (the parent SIGKILLs it then: a real `SIGKILL`, whose peers learn of it from the closed
//! port, ICMP through `IP_RECVERR`, the host's death board or their detectors), the peers
//! whose returns stop counting, and its report as its part ends.
//!
//! Control goes through the process's pipes only: the spec (`--spec`, then `next SPEC` lines)
//! names the rendezvous; the process joins it with sockets of the kernel's choice (kept for
//! the generation: no port is chosen in one process and bound in another), says `ready`, and
//! runs the stream at the parent's `go`. The stream's own start and end are agreements of the
//! group's ([`Member::agree_stream`]): every node process starts together and none stops
//! answering while another still needs it; after the end it waits, still a member, for the
//! next generation's spec (it then leaves and joins that generation's rendezvous) or the end
//! of its input (it leaves and exits). Clocks: every member aligns its clock to the parent's
//! wall-clock epoch, which the rendezvous hands out (one host: no clock probes, whose
//! measured offset would only add its error to a true one of 0), so kill and return times
//! compare across processes.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io::Read;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use crate::experiment::agree_local::stream_of;
use crate::group::{Member, MemberSpec, MemberStream, StreamHooks};
use crate::runtime::agree::{AgreeBench, DEDICATED_HEARTBEAT, DEFAULT_SUSPECT_AFTER, peak_rss_kb, validate};
use crate::runtime::agree_procs::{
    ChildResult, ChildSpec, Out, bench_of, crash_report, left_out_report, lines_of, say,
};
use crate::runtime::agree_stream;
use crate::transport::death_watch::Watching;

/// How long a node process waits for every member to join its generation's rendezvous.
pub(crate) const JOIN_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a node process leaving its group (the next generation, or the end) waits for
/// what it sent to be acknowledged: its stream and the group's agreements are over by then.
const LINGER: Duration = Duration::from_millis(200);

/// `ftcoll agree-node`: one node process. It runs generations until its stdin closes: after
/// each, a `next SPEC` line starts the next one in the same process.
pub fn child(spec_json: &str) -> Result<(), String> {
    let mut s: ChildSpec = serde_json::from_str(spec_json).map_err(|e| format!("bad --spec: {e}"))?;
    // One reader of stdin for the process's life; its end (EOF) ends the process.
    let input = Input::new(std::io::stdin());
    let out: Out = Arc::new(Mutex::new(Box::new(std::io::stdout())));
    loop {
        match generation(&s, &input, &out)? {
            Some(next) => s = next,
            None => return Ok(()),
        }
    }
}

/// The member's spec for `b`'s node `rank` of generation `generation`'s group, whose
/// rendezvous is at `coordinator`. Each generation's group has its own seed, `b.seed +
/// generation` (generation 0: `b.seed`, so that `agree --procs` returns what the same run
/// among threads returns), and with it its own job ids (`transport::ids::members`): a
/// straggler datagram of the last generation is dropped.
///
/// The group's own failure detector (which times the stream's start and end agreements) is
/// the library's default, no quicker than the stream's: the stream's is the experiment's
/// (`b`'s heartbeat and suspicion floor, which `agree --suspect-ms 1` sets low to provoke
/// false suspicions in the stream), and a false suspicion in the group's start would fail the
/// run instead of being measured in it.
pub(crate) fn member_spec(b: &AgreeBench, rank: u32, coordinator: SocketAddr, generation: u64) -> MemberSpec {
    MemberSpec {
        timeout: JOIN_TIMEOUT,
        seed: b.seed.wrapping_add(generation),
        heartbeat: DEDICATED_HEARTBEAT,
        suspect_after: b.suspect_after.max(DEFAULT_SUSPECT_AFTER),
        broadcasts: false,
        streams: true,
        linger: LINGER,
        ..MemberSpec::new(rank, b.n, coordinator)
    }
}

/// One generation: join, say `ready`, run the stream at `go`, report; then, still a member,
/// wait for the next generation's spec (returned) or the input's end (`None`).
fn generation(s: &ChildSpec, input: &Input, out: &Out) -> Result<Option<ChildSpec>, String> {
    let b = bench_of(s)?;
    validate(&b)?;
    if s.rank >= b.n {
        return Err(format!("--spec: rank {} of {} nodes", s.rank, b.n));
    }
    let coordinator = s
        .coordinator
        .ok_or("--spec: no rendezvous (coordinator) for the node process")?;
    let mut m =
        Member::join_served(member_spec(&b, s.rank, coordinator, s.generation), true).map_err(|e| e.to_string())?;
    // The generation's death board (node processes of one host): held until the generation
    // ends (dropped: left), a kill tells the peers at once. Without it (another C library's
    // mutex layout, a board that cannot be mapped) deaths are seen from the closed port and
    // the heartbeats.
    let watching = match &s.death_board {
        Some(path) => match Watching::start(std::path::Path::new(path), s.rank, b.n) {
            Ok(w) => Some(w),
            Err(e) => {
                // Once per process (its generations all get boards alike).
                static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
                if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    eprintln!(
                        "ftcoll agree-node {}: no death board ({path}: {e}): deaths are seen from the closed port",
                        s.rank
                    );
                }
                None
            }
        },
        None => None,
    };
    say(out, "ready")?;
    match input.told()? {
        Told::Go => stream(&mut m, &b, s.rank, out, true, watching.as_ref(), input)?,
        // The parent gave this generation up before its start.
        Told::Next(next) => return Ok(Some(*next)),
        Told::End => return Ok(None),
    }
    let next = loop {
        match input.told()? {
            Told::Next(next) => break Some(*next),
            Told::End => break None,
            Told::Go => {}
        }
    };
    // Leaves the group (its board too) before the next generation joins anew.
    drop(m);
    drop(watching);
    Ok(next)
}

/// What the coordinating process told a node process (other lines are ignored).
pub(crate) enum Told {
    Go,
    /// The next generation's spec.
    Next(Box<ChildSpec>),
    /// Its input ended.
    End,
}

/// A node process's input: the lines the coordinating process tells it (its stdin, or its
/// stream from rank 0), read by a thread of their own.
pub(crate) struct Input {
    rx: mpsc::Receiver<String>,
    /// Lines read while the stream looked for the input's end, told first.
    kept: RefCell<VecDeque<String>>,
    ended: Cell<bool>,
}

impl Input {
    pub(crate) fn new(from: impl Read + Send + 'static) -> Self {
        Input {
            rx: lines_of(from),
            kept: RefCell::new(VecDeque::new()),
            ended: Cell::new(false),
        }
    }

    /// Whether the input has ended (the coordinating process is gone or done), without
    /// waiting; lines that came meanwhile are kept for [`Input::told`].
    pub(crate) fn ended(&self) -> bool {
        loop {
            match self.rx.try_recv() {
                Ok(l) => self.kept.borrow_mut().push_back(l),
                Err(mpsc::TryRecvError::Empty) => return self.ended.get(),
                Err(mpsc::TryRecvError::Disconnected) => {
                    self.ended.set(true);
                    return true;
                }
            }
        }
    }

    /// The next thing the coordinating process tells (other lines are ignored).
    pub(crate) fn told(&self) -> Result<Told, String> {
        loop {
            let kept = self.kept.borrow_mut().pop_front();
            let Some(l) = kept.or_else(|| self.rx.recv().ok()) else {
                return Ok(Told::End);
            };
            if l.trim() == "go" {
                return Ok(Told::Go);
            }
            if let Some(next) = l.strip_prefix("next ") {
                return next_spec(next).map(|s| Told::Next(Box::new(s)));
            }
        }
    }
}

/// Runs `b`'s stream on member `m` (node `rank`) with the coordinating process's hooks on
/// `out`: returns in batches, the injected crash (`parent_kills`: the parent SIGKILLs the
/// process on that line; otherwise it kills itself), the peers whose returns stop counting,
/// the result line as its part ends; `deaths`: the host's death board. The stream ends
/// unfinished here, and its start and end stop waiting, when `input` ends (the coordinating
/// process is gone). An error: the stream could not start here (the members' settings
/// differ, one could not run it, the group agreed this one had failed), and no result was
/// said.
pub(crate) fn stream(
    m: &mut Member,
    b: &AgreeBench,
    rank: u32,
    out: &Out,
    parent_kills: bool,
    deaths: Option<&Watching>,
    input: &Input,
) -> Result<(), String> {
    let said = Rc::new(Cell::new(Ok::<bool, String>(false)));
    let tap_out = out.clone();
    let done_out = out.clone();
    let done_said = said.clone();
    let hooks = StreamHooks {
        tap: Some(Box::new(move |batch| {
            // (A coordinator gone: the result line below says so.)
            let _ = say(&tap_out, &agree_stream::encode(batch));
        })),
        on_crash: Some(crash_report(out.clone(), parent_kills)),
        on_left_out: Some(left_out_report(out.clone())),
        on_done: Some(Box::new(move |r: &MemberStream| {
            let line = serde_json::to_string(&result(rank, r)).map_err(|e| e.to_string());
            done_said.set(line.and_then(|l| say(&done_out, &l)).map(|()| true));
        })),
        deaths: deaths.map(Watching::watch),
        detector: Some((b.heartbeat, b.suspect_after)),
        stop: Some(Box::new(|| input.ended())),
    };
    let stream = m.agree_stream_with(stream_of(b), hooks);
    match (said.replace(Ok(false)), stream) {
        (Err(e), _) => Err(e),
        (Ok(false), Err(e)) => Err(format!("node {rank}: {e}")),
        // Reported; the closing agreement's outcome is not part of the report.
        (Ok(_), _) => Ok(()),
    }
}

fn next_spec(line: &str) -> Result<ChildSpec, String> {
    serde_json::from_str(line).map_err(|e| format!("bad next spec: {e}"))
}

/// The result line of node `rank` from its member's part of the stream.
fn result(rank: u32, r: &MemberStream) -> ChildResult {
    let t = &r.transport;
    ChildResult {
        rank,
        finished: r.finished,
        returned: r.returned,
        invalid: r.invalid,
        max_stored: r.max_stored,
        suspected: r.suspected.clone(),
        messages: r.messages,
        heartbeats: r.heartbeats,
        probes: r.probes,
        transport: [t.sent, t.received, t.retransmits, t.suspected],
        counters: [t.window_full, t.acks_sent, t.refused, t.refused_probes],
        died_on_host: t.died_on_host,
        drops: r.drops,
        digests: r.digests.clone(),
        peak_rss_kb: peak_rss_kb(),
        failed: r.failed.clone(),
        fenced_by: r.fenced_by,
        first_suspect_ns: r.first_suspect_ns,
    }
}
