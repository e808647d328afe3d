//! A closed loop of agreements among a group of processes ([`Member::agree_stream`]): the
//! same stream as [`crate::group::Group::agree_stream`] runs among the threads of one
//! process — every member enters its next agreement the moment its last one returned, with a
//! contribution made from the seed, its rank and the agreement's id
//! (`runtime::agree::contribution`), as ULFM's `benchagree` does, on ERA (Herault et al.,
//! SC 2015) with the heartbeat failure detector over ERA's tree neighbours
//! (`runtime/agree/node.rs`, the node `ftcoll agree` runs) — each member stepping its own
//! node on the caller's thread, over a socket of its own that the rendezvous published
//! ([`MemberSpec::streams`](super::MemberSpec::streams)).
//!
//! The stream is collective, as an MPI call is: every member calls it with the same stream.
//! Its start and end are agreements of the group's own ([`Member::agree`]): the first, whose
//! value carries a fingerprint of the stream's settings (so that members called with
//! different ones all fail at once, instead of waiting for agreements that never come; a
//! member that cannot run the stream enters it too, with 0, so that the members' agreement
//! ids stay in step), returns at a member once every live member has called the stream; the
//! last, whose value says whether this member finished with every value valid, returns once
//! every live member is done with it, so that none stops answering while another still
//! needs it (ERA's early return: a member returns before its children have the decision).
//! Neither has a timeout: an MPI collective waits for every live member's call too. Each
//! stream has a job id of its own, from its start's id
//! ([`crate::transport::ids::member_stream`]): a straggler datagram of the last is dropped
//! and counted.
//!
//! A member the stream's kills name dies where they say: its node stops and its stream
//! socket closes, as a killed process's would (its peers learn of it from the closed port or
//! their detectors); the member itself lives on, but has no stream socket any more.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::Member;
use crate::group::{AgreeStream, Event, GroupError};
use crate::protocol::agree::AgreeId;
use crate::runtime::agree::{
    AgreeBench, AgreeTransport, CrashReport, Fold, LeftOutReport, Node, NodeInit, Shared, stall_of, total, validate,
};
use crate::runtime::agree_stream::{BATCH, FLUSH_MS};
use crate::runtime::agree_window::{Rec, hist};
use crate::runtime::control::ChildAgent;
use crate::transport::TransportStats;
use crate::transport::death_watch::DeathWatch;
use crate::transport::udp::{UdpConfig, UdpTransport};
use crate::wire::DropCounters;

/// A member's stream socket and what its streams need.
pub(super) struct Streams {
    /// `None` once this member died in a stream (the socket closed with it).
    pub(super) sock: Option<UdpSocket>,
    /// Every member's stream socket, by rank.
    pub(super) peers: Vec<SocketAddr>,
    /// The member's transport settings (key, loss, retries); each stream sets its job.
    pub(super) cfg: UdpConfig,
    /// The group's common clock: rank 0's epoch on this host's clock.
    pub(super) epoch: Instant,
    pub(super) seed: u64,
    pub(super) heartbeat: Duration,
    pub(super) suspect_after: Duration,
    pub(super) linger: Duration,
    /// Kept open, as the member's other control agents.
    pub(super) _agent: ChildAgent,
}

/// What one member measured of a stream ([`Member::agree_stream`]). Times (`*_ns`) are on
/// the group's common clock (ns since rank 0's epoch), so that they compare across members.
#[derive(Clone, Debug)]
pub struct MemberStream {
    /// Agreements this member returned, the warm-up's included.
    pub returned: u64,
    /// It returned every agreement it was to (or the stream's time was up): not abandoned
    /// after `op_timeout` without a return, not fenced, not killed.
    pub finished: bool,
    /// Returns whose value is not the AND of the live members' contributions (must be 0; a
    /// member checks a share of the agreements, `runtime::agree`'s `checker`).
    pub invalid: u64,
    /// When this member died where the stream's kills said.
    pub killed_ns: Option<u64>,
    /// Who fenced this member's node in the stream (suspected it while it lived), if one did.
    pub fenced_by: Option<u32>,
    /// The members this member suspected, in order.
    pub suspected: Vec<u32>,
    /// When it first suspected one.
    pub first_suspect_ns: Option<u64>,
    /// Entry to return of each measured (not warm-up) agreement here, ns.
    pub latency: Histogram<u64>,
    /// ERA messages, heartbeats and probes this member sent.
    pub messages: u64,
    pub heartbeats: u64,
    pub probes: u64,
    /// The stream's transport and drop counters.
    pub transport: TransportStats,
    pub drops: DropCounters,
    /// Outcome digests per block of [`crate::runtime::agree::DIGEST_BLOCK`] agreements: two
    /// members that returned the same agreements with the same outcomes have the same.
    pub digests: Vec<u64>,
    /// The failed members the last agreement returned here agreed on.
    pub failed: Vec<u32>,
    /// The most agreements ERA kept here at once (its garbage collection bounds them).
    pub max_stored: usize,
    /// The closing agreement: whether every live member finished with no invalid value (a
    /// member the kills named counts as finished); and the failed members it agreed on.
    pub all_finished: bool,
    pub closing_failed: Vec<u32>,
    /// From this member's start of the stream to its last return, seconds.
    pub seconds: f64,
}

/// A launcher's tap of a stream's returns ([`StreamHooks::tap`]).
pub(crate) type Tap = Box<dyn FnMut(&[(AgreeId, Rec)])>;
/// What a launcher does with a member's part as it ends ([`StreamHooks::on_done`]).
pub(crate) type OnDone = Box<dyn FnOnce(&MemberStream)>;

/// What a launcher hooks into a member's stream ([`Member::agree_stream_with`]): `ftcoll agree
/// --procs`'s node processes are members whose streams report to their parent
/// (`experiment/launch/agree_node.rs`).
#[derive(Default)]
pub(crate) struct StreamHooks<'a> {
    /// Every return, in batches, as the node makes them (at most [`FLUSH_MS`] apart).
    pub(crate) tap: Option<Tap>,
    /// The node's crash where the kills said, and a peer whose returns stop counting
    /// ([`Shared`]'s hooks).
    pub(crate) on_crash: Option<CrashReport>,
    pub(crate) on_left_out: Option<LeftOutReport>,
    /// The member's part, as it ends here (before the closing agreement, which waits for the
    /// others).
    pub(crate) on_done: Option<OnDone>,
    /// The host's death board, on the stream's transport.
    pub(crate) deaths: Option<DeathWatch>,
    /// The stream's failure detector (heartbeat, suspicion floor) instead of the member's.
    pub(crate) detector: Option<(Duration, Duration)>,
    /// Asked on every pass of the stream and while its start and end wait: `true` ends the
    /// stream here (unfinished) and gives those waits up (the launcher is gone: its node
    /// process's input ended).
    pub(crate) stop: Option<Box<dyn FnMut() -> bool + 'a>>,
}

/// A closing agreement's value bit: this member finished with every value valid.
const FINISHED: u64 = 1;

impl Member {
    /// Runs a closed loop of agreements among all members (collective: every member calls it,
    /// with the same `s`, and every member must be alive) on this member's stream socket,
    /// stepping its node on the caller's thread, and returns what this member measured
    /// ([`MemberStream`]). As an MPI collective, it waits for every live member's call: an
    /// agreement of the group's own starts it (a member whose settings differ, or that
    /// cannot run it, fails every member's start: `BadStream`; a member the start agreed
    /// had failed: `Dead`), and another ends it once every live member is done. Those two use
    /// two of this member's agreement ids ([`Member::agree`]'s next id is two higher after a
    /// stream, one after a stream that failed at its start) and their [`Event::Agreed`] are
    /// not handed out; the group's own agreements and
    /// broadcasts go on beside the stream on the member's thread, and their events that come
    /// meanwhile are kept for [`Member::next_event`]. `op_timeout` ends the stream here when
    /// this member's node has done nothing (received, sent or returned) for that long.
    ///
    /// ```
    /// use ftcoll::group::{AgreeStream, Member, MemberSpec};
    ///
    /// let port = std::net::UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port();
    /// let at: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    /// let members: Vec<_> = (0..3)
    ///     .map(|rank| {
    ///         std::thread::spawn(move || {
    ///             let spec = MemberSpec { broadcasts: false, streams: true, ..MemberSpec::new(rank, 3, at) };
    ///             let mut m = Member::join(spec).unwrap();
    ///             let r = m.agree_stream(AgreeStream { warmup: 10, ..AgreeStream::new(100) }).unwrap();
    ///             (r, m)
    ///         })
    ///     })
    ///     .collect();
    /// let done: Vec<_> = members.into_iter().map(|m| m.join().unwrap()).collect();
    /// for (r, _member) in &done {
    ///     assert_eq!((r.returned, r.invalid, r.finished, r.all_finished), (110, 0, true, true));
    ///     assert_eq!(r.digests, done[0].0.digests);
    /// }
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn agree_stream(&mut self, s: AgreeStream) -> Result<MemberStream, GroupError> {
        self.agree_stream_with(s, StreamHooks::default())
    }

    /// [`Member::agree_stream`] with a launcher's `hooks` (`ftcoll agree --procs`'s node
    /// processes: [`StreamHooks`]).
    pub(crate) fn agree_stream_with(
        &mut self,
        s: AgreeStream,
        mut hooks: StreamHooks<'_>,
    ) -> Result<MemberStream, GroupError> {
        let Some(st) = self.streams.as_ref() else {
            return Err(GroupError::NoStreams);
        };
        if let Some(by) = self.fenced_by() {
            return Err(GroupError::Fenced { rank: self.rank, by });
        }
        let b = AgreeBench {
            n: self.n,
            era: s.era,
            transport: AgreeTransport::Udp,
            workers: 1,
            pin: false,
            warmup: s.warmup,
            iterations: s.agreements,
            duration: s.duration,
            kills: s.kills.clone(),
            stalls: s.stalls.clone(),
            heartbeat: hooks.detector.map_or(st.heartbeat, |d| d.0),
            suspect_after: hooks.detector.map_or(st.suspect_after, |d| d.1),
            op_timeout: s.op_timeout,
            seed: st.seed,
        };
        // The start's id, which every member shares: the stream's job comes from it (a count
        // of this member's own streams would not be shared, were one ever left out).
        let start_id = self.next_id;
        let (epoch, linger) = (st.epoch, st.linger);
        let warmup = b.warmup;
        let first_kill = b.kills.iter().map(|k| warmup + k.1).min();
        let mut sh = Shared::streaming(epoch, b.n, warmup, first_kill);
        sh.on_crash = hooks.on_crash.take();
        sh.on_left_out = hooks.on_left_out.take();
        let kill_id = b.kills.iter().find(|k| k.0 == self.rank).map(|k| warmup + k.1);
        // Everything that can fail here is tried before the start: a member that cannot run
        // the stream still enters its start (contributing 0, which fails the fingerprint
        // everywhere) and then says why; had it returned at once, the others' start would
        // have paired with its caller's next agreement (every later collective off by one).
        let node = (|| {
            if s.agreements == 0 && s.duration.is_none() {
                return Err(GroupError::BadStream("no agreements".into()));
            }
            validate(&b).map_err(GroupError::BadStream)?;
            let sock = st.sock.as_ref().ok_or_else(|| {
                GroupError::BadStream("this member died in an earlier stream (its stream socket closed with it)".into())
            })?;
            let own = sock
                .try_clone()
                .map_err(|e| GroupError::Setup(format!("cannot reuse the stream socket: {e}")))?;
            let cfg = UdpConfig {
                job: crate::transport::ids::member_stream(st.seed, start_id),
                ..st.cfg.clone()
            };
            let mut tp = UdpTransport::from_socket(self.rank, own, &st.peers, cfg)
                .map_err(|e| GroupError::Setup(format!("cannot open the stream's endpoint: {e}")))?;
            if let Some(d) = hooks.deaths.take() {
                tp.watch_deaths(d);
            }
            let init = NodeInit {
                rank: self.rank,
                total: total(&b),
                deadline: None,
                kill_id,
                stall: stall_of(&b, self.rank),
            };
            Node::new(&b, init, Box::new(tp), epoch).map_err(GroupError::BadStream)
        })();
        // The start: every live member has called the stream, with the same settings.
        let h = settings_fingerprint(&s);
        let start = if node.is_err() {
            0
        } else {
            (h << 32) | (!h & 0xFFFF_FFFF)
        };
        let mut stop = hooks.stop.take();
        let mut stopped = || stop.as_mut().is_some_and(|f| f());
        let (id, value, failed) = self.internal_agree(start, None, &mut stopped)?;
        debug_assert_eq!(id, start_id);
        let mut node = node?;
        if let Some(&r) = failed.first() {
            return Err(GroupError::Dead(r));
        }
        if value != start {
            return Err(GroupError::BadStream(
                "the members called the stream with different settings (agreements, warm-up, duration, kills, stalls, ERA's, timeout), or one could not run it".into(),
            ));
        }
        node.tap = Some(Vec::with_capacity(BATCH));
        let mut latency = hist();
        let flush_every = hooks.tap.as_ref().map(|_| Duration::from_millis(FLUSH_MS));
        let mut to_tap = hooks.tap.take();
        let mut drain = |node: &mut Node| {
            if let Some(tap) = node.tap.as_mut() {
                if let Some(f) = to_tap.as_mut()
                    && !tap.is_empty()
                {
                    f(tap);
                }
                for (id, r) in tap.drain(..) {
                    if id >= warmup {
                        record(&mut latency, &r);
                    }
                }
            }
        };
        // More members' threads than cores (this process's other threads, the other
        // members): yield the core after an empty pass instead of spinning it away.
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let share_cores = self.n as usize + 1 > cores;
        let idle = || {
            if share_cores {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        };
        let started = Instant::now();
        node.set_deadline(b.duration.map(|d| started + d));
        node.start(&sh, started);
        let mut last_progress = started;
        let mut last_flush = started;
        let (mut last_return, mut returned) = (started, 0);
        loop {
            let progress = node.step(&sh);
            let now = Instant::now();
            if progress {
                last_progress = now;
            }
            if node.returned > returned {
                (last_return, returned) = (now, node.returned);
            }
            let fenced = node.drv.fenced_by().is_some();
            let timed_out = now.saturating_duration_since(last_progress) > b.op_timeout;
            let stop = !(node.finished || node.dead || fenced || timed_out) && stopped();
            if node.finished || node.dead || fenced || timed_out || stop {
                if stop {
                    // Its launcher is gone: it enters no agreement of its own any more (its
                    // next says stop, as at the stream's deadline, and ends the others'
                    // streams too, whose launcher is gone as well). Stepped on below with
                    // its peers gone, it would decide each agreement alone at once, within
                    // one step, until the stream's end.
                    node.set_deadline(Some(now));
                }
                node.record_returns(&sh, Fold::Wait);
                drain(&mut node);
                break;
            }
            // (A launcher's tap gets a batch at least every `FLUSH_MS`: its window merges
            // the members' returns as they come.)
            if node.tap.as_ref().is_some_and(|t| {
                t.len() >= BATCH
                    || flush_every.is_some_and(|f| !t.is_empty() && now.saturating_duration_since(last_flush) >= f)
            }) {
                drain(&mut node);
                last_flush = now;
            }
            if !progress {
                idle();
            }
        }
        let killed_ns = sh.kill_ns();
        if killed_ns.is_some() {
            // Killed: its endpoint closed (the node's transport is gone); so does the
            // member's copy of the socket, and the port with them.
            self.streams.as_mut().expect("checked above").sock = None;
        }
        // What the stream measured, as it ended here: what the node sees while it waits for
        // the others below (a peer that finished first and stopped answering, suspected) is
        // not the stream's.
        let finished = node.finished && !node.dead;
        let mut report = MemberStream {
            returned: node.returned,
            finished,
            invalid: node.invalid,
            killed_ns,
            fenced_by: node.drv.fenced_by(),
            suspected: node.suspected.clone(),
            first_suspect_ns: node.first_suspect_ns,
            latency,
            messages: node.drv.messages,
            heartbeats: node.drv.heartbeats,
            probes: node.drv.probes,
            transport: node.drv.tp.stats(),
            drops: node.drv.drops,
            digests: node.digests.clone(),
            failed: node.last_failed.clone(),
            max_stored: node.max_stored,
            all_finished: false,
            closing_failed: Vec::new(),
            seconds: last_return.saturating_duration_since(started).as_secs_f64(),
        };
        if let Some(f) = hooks.on_done.take() {
            f(&report);
        }
        // The end: every live member is done with the stream. Meanwhile this one answers its
        // peers, which may still need its messages. A member that died where the kills said
        // did its part.
        let done = finished || killed_ns.is_some();
        let mine = if done && node.invalid == 0 { FINISHED } else { 0 };
        let closing = if node.dead {
            self.internal_agree(mine, None, &mut stopped)
        } else {
            self.internal_agree(
                mine,
                Some(&mut || {
                    if !node.step(&sh) {
                        idle();
                    }
                }),
                &mut stopped,
            )
        };
        if !node.dead {
            // What it sent is acknowledged before its endpoint closes (at most `linger`).
            node.drv.leave();
            let end = Instant::now().checked_add(linger);
            while !node.drv.flushed_to_mark() && end.is_none_or(|e| Instant::now() < e) {
                if !node.step(&sh) {
                    idle();
                }
            }
        }
        let (_, value, failed) = closing?;
        report.all_finished = value & FINISHED != 0;
        report.closing_failed = failed;
        Ok(report)
    }

    /// Enters one of the group's agreements for the stream's own use with `value` and waits
    /// for its return, as a collective call does (it returns once every live member entered
    /// it, or with the failed ones agreed on), running `meanwhile` between looks: its id,
    /// value and failed set. Other events are kept for [`Member::next_event`]; this
    /// agreement's return is never handed out. `stop` (a launcher's [`StreamHooks::stop`])
    /// gives the wait up.
    fn internal_agree(
        &mut self,
        value: u64,
        mut meanwhile: Option<&mut dyn FnMut()>,
        stop: &mut dyn FnMut() -> bool,
    ) -> Result<(u64, u64, Vec<u32>), GroupError> {
        let id = self.agree(value)?;
        loop {
            let ev = match meanwhile.as_deref_mut() {
                Some(f) => {
                    f();
                    self.events.try_recv()
                }
                None => self
                    .events
                    .recv_timeout(Duration::from_millis(10))
                    .map_err(|e| match e {
                        std::sync::mpsc::RecvTimeoutError::Timeout => std::sync::mpsc::TryRecvError::Empty,
                        std::sync::mpsc::RecvTimeoutError::Disconnected => std::sync::mpsc::TryRecvError::Disconnected,
                    }),
            };
            match ev {
                Ok(Event::Agreed {
                    id: got, value, failed, ..
                }) if got == id => return Ok((id, value, failed)),
                Ok(ev) => self.pending.push_back(ev),
                Err(_) if self.fenced_by().is_some() => {}
                Err(std::sync::mpsc::TryRecvError::Empty) => {}
                Err(std::sync::mpsc::TryRecvError::Disconnected) => return Err(GroupError::Closed),
            }
            // (A fenced member's thread stops and its channel closes: fenced, not closed.)
            if let Some(by) = self.fenced_by() {
                return Err(GroupError::Fenced { rank: self.rank, by });
            }
            if stop() {
                return Err(GroupError::BadStream("its launcher stopped the stream".into()));
            }
        }
    }
}

/// One return's entry-to-return time into `h` (at least 1 ns, the histogram's floor).
fn record(h: &mut Histogram<u64>, r: &Rec) {
    h.saturating_record(r.ret.saturating_sub(r.entry).max(1));
}

/// A 32-bit fingerprint of what every member of a stream must have the same (FNV-1a over its
/// settings as printed: the same build prints the same).
fn settings_fingerprint(s: &AgreeStream) -> u64 {
    let h = crate::wire::codec::fnv1a(format!("{s:?}").bytes());
    (h ^ (h >> 32)) & 0xFFFF_FFFF
}

#[cfg(test)]
mod tests;
