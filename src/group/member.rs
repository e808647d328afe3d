//! One member of a group whose members are processes ([`Member`]): each process joins with its
//! rank, and the members broadcast to one another, agree with one another over UDP (ERA,
//! Herault et al. SC 2015) and hear of each other's failures, as [`super::Group`]'s members do
//! within one process.
//!
//! Rendezvous goes through rank 0, as `ftcoll agree --join`'s does ([`crate::runtime::control`]):
//! rank 0 serves the address table and the run's nonce at the coordinator's address (a thread
//! of its process, for as long as its member lives), every member (rank 0's too) joins there
//! with its data sockets' addresses (one for agreements, one for broadcasts: it joins as rank
//! `r` and `n + r` of a table of `2n`), authenticated by the challenge–response of the control
//! plane when a key is given, and seals its datagrams with the run's session key. The last
//! address sends the table to every member at once, and when rank 0 leaves its rendezvous
//! says farewell (the table once more, then STOP: [`crate::runtime::control::ParentAgent::farewell`]),
//! so that a member still joining neither waits for its timeout nor for its clock probes to
//! go unanswered. After that rank 0 has no part: ERA is fully distributed (§2), so an
//! agreement needs no coordinator and survives rank 0's death like any other member's; so do
//! broadcasts.
//!
//! Each member runs its ERA instance on a thread of its own with the group's driver
//! ([`super::agree`]: the same codec, send queue and heartbeat failure detector over ERA's
//! tree neighbours). A member learns of a failure from its transport (retries exhausted, a
//! closed port) or its detector (a neighbour silent too long), and from the failed set of an
//! agreement; a suspicion is enforced where the suspect runs by the transport's FENCE
//! (fail-stop: a fenced member stops, and its own calls then say so). The members start
//! independently, so a neighbour not heard from yet is given a start window before the
//! detector suspects it ([`start_window`]; ERA §2's detector suspects only dead processes).
//!
//! Broadcasts are collective, as MPI's are ([`Member::broadcast`]): every member calls them in
//! the same order with the same root, so a member's `k`-th call is operation `k` of one
//! sequence over all roots (Corrected Gossip Claim 1) with nobody to number them; the same
//! thread steps the member's broadcast node ([`bcast`]), which forwards what it hears before
//! its own call comes, and reports a call that names another root than the one heard
//! ([`Event::RootMismatch`]). A member that joins with another broadcast algorithm, window or
//! payload limit than rank 0's is refused at the rendezvous ([`rendezvous`]).
//!
//! With [`MemberSpec::streams`] each member joins a third socket (rank `2n + r`, `n + r`
//! without broadcasts), on which [`Member::agree_stream`] runs `ftcoll agree`'s closed loop
//! of agreements among the members ([`stream`]).

use std::os::unix::net::UnixDatagram;
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod bcast;
mod flags;
mod rendezvous;
mod run;
mod spec;
mod stream;

pub use bcast::MemberCounters;
use bcast::{BcastSetup, rank0_model};
pub use spec::MemberSpec;
pub use stream::MemberStream;
pub(crate) use stream::StreamHooks;

use super::agree::Agreements;
use super::checks::MaxPayload;
use super::{Event, GroupError, MAX_WALL, NOT_FENCED, nanos};
use crate::model::LogP;
use crate::protocol::detector::GAP_CEILING;
use crate::runtime::agree::MAX_NODES as MAX_AGREE_NODES;
use crate::runtime::control::child::Joined;
use crate::runtime::control::clock::SYNC_GIVE_UP;
use crate::transport::Transport;
use crate::transport::udp::{UdpConfig, UdpTransport};
use crate::wire::dispatch::Dispatch;
use flags::{Flags, LEFT_FLUSHED, NONE_REFUSED};
pub(crate) use rendezvous::Rendezvous;
use rendezvous::{join_all, serve_rendezvous, shape_of, stream_base};
use run::Run;

/// One process's member of a group of processes: broadcasts and agreements with the others,
/// and their failures, as [`Event`]s.
///
/// ```
/// use std::time::Duration;
/// use ftcoll::group::{Event, Member, MemberSpec};
///
/// // Three processes would each run one of these; here three threads do.
/// let port = std::net::UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port();
/// let at: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
/// let members: Vec<_> = (0..3)
///     .map(|rank| {
///         std::thread::spawn(move || {
///             let mut m = Member::join(MemberSpec::new(rank, 3, at)).unwrap();
///             // Every member calls each broadcast, naming its root (1 here).
///             m.broadcast(1, b"from 1").unwrap();
///             m.agree(!(1u64 << rank)).unwrap();
///             let (mut got, mut agreed) = (None, None);
///             while got.is_none() || agreed.is_none() {
///                 match m.next_event(Duration::from_secs(10)) {
///                     Some(Event::Delivered { root, bytes, .. }) => got = Some((root, bytes)),
///                     Some(Event::Agreed { value, failed, .. }) => agreed = Some((value, failed)),
///                     Some(_) => {}
///                     None => panic!("no delivery or agreement in 10 s"),
///                 }
///             }
///             // Dropping `m` leaves the group once what it sent is acknowledged
///             // (`MemberSpec::linger`), as a process that exits; one that left before the
///             // others' calls were over would be failed there. It stays until all are done.
///             ((got.unwrap(), agreed.unwrap()), m)
///         })
///     })
///     .collect();
/// let done: Vec<_> = members.into_iter().map(|m| m.join().unwrap()).collect();
/// for (outcome, _member) in &done {
///     assert_eq!(*outcome, ((1, b"from 1".to_vec()), (!0b111, vec![])));
/// }
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Member {
    rank: u32,
    n: u32,
    requests: mpsc::Sender<Request>,
    /// Rung after each request: wakes the member's thread from its wait on its socket.
    bell: UnixDatagram,
    events: mpsc::Receiver<Event>,
    flags: Arc<Flags>,
    thread: Option<JoinHandle<()>>,
    /// Rank 0: the rendezvous service, answering members that missed the table.
    coordinator: Option<JoinHandle<rendezvous::Served>>,
    next_id: u64,
    /// The next broadcast's operation; `None`: built without broadcasts.
    next_seq: Option<u64>,
    /// The longest payload a broadcast carries.
    max_payload: usize,
    /// The stream socket and what a stream needs; `None`: built without streams.
    streams: Option<stream::Streams>,
    /// Events that came while a stream waited for its own agreements' returns, handed out
    /// first by [`Member::next_event`] and [`Member::poll`].
    pending: std::collections::VecDeque<Event>,
}

/// What the caller asks of the member's thread.
enum Request {
    Agree(u64),
    /// `bytes`: `None` at a root whose call was refused (the operation is used up).
    Broadcast {
        seq: u64,
        root: u32,
        bytes: Option<Vec<u8>>,
    },
    Counters(mpsc::Sender<MemberCounters>),
    /// Tests: the member's thread stops for this long (a process descheduled or stopped).
    #[cfg(test)]
    Stall(Duration),
    /// Tests: the member's thread handles this event as if its agreements had returned it.
    #[cfg(test)]
    Inject(Event),
}

impl Member {
    /// Joins the group: on rank 0 starts the rendezvous at `spec.coordinator`; binds this
    /// member's data sockets, sends their addresses to rank 0 until the whole table comes back
    /// (or `spec.timeout` passes), and starts the member's thread.
    pub fn join(spec: MemberSpec) -> Result<Member, GroupError> {
        Self::join_as(spec, true, false)
    }

    /// Joins a group whose rendezvous a process that is not a member serves at
    /// `spec.coordinator` ([`Rendezvous`]): as [`Member::join`], but rank 0 serves nothing.
    /// `same_host`: the rendezvous runs on this host, so the group's common clock is its
    /// epoch on this host's clock as it stands (node processes of one launcher, as `agree
    /// --procs`'s always were), not shifted by the offset that clock probes measure across
    /// hosts (on one host the true offset is 0, and a measured one only adds its error).
    pub(crate) fn join_served(spec: MemberSpec, same_host: bool) -> Result<Member, GroupError> {
        Self::join_as(spec, false, same_host)
    }

    fn join_as(spec: MemberSpec, rank0_serves: bool, same_host: bool) -> Result<Member, GroupError> {
        let setup = GroupError::Setup;
        let MemberSpec { rank, n, .. } = spec;
        if n < 2 || rank >= n {
            return Err(setup(format!("rank {rank} of {n} members (at least 2 members)")));
        }
        if n > MAX_AGREE_NODES {
            return Err(GroupError::TooManyToAgree { max: MAX_AGREE_NODES });
        }
        if spec.coordinator.ip().is_unspecified() || spec.coordinator.port() == 0 {
            return Err(setup(format!(
                "the coordinator's address {} is not one the members can send to (give rank 0's IP and port)",
                spec.coordinator
            )));
        }
        if spec.heartbeat.is_zero() || spec.suspect_after <= spec.heartbeat {
            return Err(setup(format!(
                "the failure detector's heartbeat ({:?}) must be positive and below suspect_after ({:?})",
                spec.heartbeat, spec.suspect_after
            )));
        }
        let idle = spec.idle_period();
        if idle < spec.heartbeat || idle > spec.suspect_after / 4 {
            return Err(setup(format!(
                "the idle heartbeat ({idle:?}) must be at least the heartbeat ({:?}) and at most a quarter of suspect_after ({:?})",
                spec.heartbeat, spec.suspect_after
            )));
        }
        if spec.broadcasts && (spec.logp.0.is_zero() || spec.op_timeout.is_zero()) {
            return Err(setup(format!(
                "the broadcasts' overhead o ({:?}) and timeout ({:?}) must be positive",
                spec.logp.0, spec.op_timeout
            )));
        }
        if spec.broadcasts {
            // As a group's builder: the algorithm with the command line's limits, and a model
            // whose times the protocols can add up (`GroupBuilder::logp`'s bounds).
            spec.algo
                .check()
                .map_err(|e| setup(format!("the broadcast algorithm: {e}")))?;
            let (o, l) = spec.logp;
            let l_units = nanos(l).saturating_add(nanos(o) / 2) / nanos(o).max(1);
            if o > MAX_WALL || l_units > LogP::MAX {
                return Err(setup(format!(
                    "the broadcasts' overhead o ({o:?}) must be at most {MAX_WALL:?} and their latency L ({l:?}) at most {} times o (LogP::MAX)",
                    LogP::MAX
                )));
            }
        }
        if spec.broadcasts && spec.algo == crate::protocol::bcast::algo::Algo::Bfb {
            // A member decides alone when an operation is over for it: delivered and its
            // protocol finished. BFB's finishes only at the root (a coordinator that sees
            // every member quiet ends it elsewhere).
            return Err(setup(
                "BFB is not offered among processes: its members other than the root never finish an operation on their own".into(),
            ));
        }
        if !(0.0..1.0).contains(&spec.loss) {
            return Err(setup(format!(
                "the injected loss ({}) must be a probability below 1",
                spec.loss
            )));
        }
        let job = crate::transport::ids::members(spec.seed);
        // What every member must have the same (an impossible algorithm for `n` is refused).
        let shape = shape_of(&spec).map_err(|e| setup(format!("the broadcast algorithm: {e}")))?;
        let flags = Arc::new(Flags::new());
        let coordinator = if rank == 0 && rank0_serves {
            let epoch = (spec.coordinator, Instant::now(), crate::runtime::procs::unix_ns());
            Some(
                serve_rendezvous(&spec, &shape, job, flags.clone(), epoch)
                    .map_err(setup)?
                    .0,
            )
        } else {
            None
        };
        let joined = (|| {
            let (agreeing, broadcasting, streaming) = join_all(&spec, &shape, job, flags.give_up.clone()).map_err(|e| {
                // Rank 0 says whom it refused (its join gave up then: the group cannot form).
                match flags.refused.load(Ordering::Acquire) {
                    NONE_REFUSED => e,
                    r => format!(
                        "{e} (rank 0 refused member {r}: it joined with other group parameters than this group's, {})",
                        shape.summary()
                    ),
                }
            })?;
            let Joined {
                sock,
                mut agent,
                peers,
                params: p,
            } = agreeing;
            let cfg = |job| UdpConfig {
                job,
                seed: spec.seed,
                // The run's datagrams are sealed with its session key, from rank 0's nonce.
                auth: spec.key.as_ref().map(|k| k.session(&p.run)),
                loss: spec.loss,
                max_retries: spec.transport_retries(),
                // Every member bound its sockets before it sent their addresses to rank 0: a
                // port unreachable from a peer not heard from yet means it closed them (it
                // left or died before it started), not that it has yet to bind them, and the
                // detector waits for peers that may still be starting (`start_window`).
                bound_at_start: true,
                ..UdpConfig::default()
            };
            let open = |sock, peers: &[std::net::SocketAddr], job| {
                UdpTransport::from_socket(rank, sock, peers, cfg(job))
                    .map(|t| Box::new(t) as Box<dyn Transport>)
                    .map_err(|e| format!("cannot open this member's endpoint: {e}"))
            };
            let tp = open(sock, &peers[..n as usize], job)?;
            // The group's common clock (rank 0's epoch on this host's clock), for broadcasts'
            // and streams' times.
            let epoch = (spec.broadcasts || spec.streams).then(|| {
                if same_host {
                    crate::runtime::procs::aligned_epoch(p.epoch_unix_ns)
                } else {
                    crate::runtime::procs::coordinator_epoch(&mut agent, p.epoch_unix_ns)
                }
            });
            let a = Agreements::one(rank, n, tp, job, spec.heartbeat, spec.suspect_after)?
                .idle_heartbeat(spec.heartbeat, idle)
                .expecting_starts(start_window(spec.suspect_after));
            let b = match broadcasting {
                Some(j) => {
                    let bjob = crate::transport::ids::member_broadcasts(spec.seed);
                    // Rank 0's model, on the coordinator's clock (as a joined benchmark's).
                    let (model, tick_ns) = rank0_model(p.o_ns, p.l_ns)?;
                    // The algorithm builds for this many members with this model (an
                    // impossible tree is refused here, so the thread's build cannot fail),
                    // and bounds the payload.
                    let max = spec.algo.dispatch(n, model, MaxPayload)?;
                    Some(BcastSetup {
                        transport: open(j.sock, &peers[n as usize..2 * n as usize], bjob)?,
                        job: bjob,
                        algo: spec.algo.clone(),
                        model,
                        tick_ns,
                        seed: spec.seed,
                        op_timeout: spec.op_timeout,
                        max,
                        epoch: epoch.unwrap_or_else(Instant::now),
                        _agent: j.agent,
                    })
                }
                None => None,
            };
            let streams = streaming.map(|j| {
                let base = stream_base(&spec) as usize;
                stream::Streams {
                    sock: Some(j.sock),
                    peers: peers[base..base + n as usize].to_vec(),
                    cfg: cfg(0),
                    epoch: epoch.unwrap_or_else(Instant::now),
                    seed: spec.seed,
                    heartbeat: spec.heartbeat,
                    suspect_after: spec.suspect_after,
                    linger: spec.linger,
                    _agent: j.agent,
                }
            });
            Ok::<_, String>((a, b, streams, agent))
        })();
        let (agreements, bcasts, streams, agent) = match joined {
            Ok(j) => j,
            Err(e) => {
                flags.stop.store(true, Ordering::Release);
                if let Some(c) = coordinator {
                    let _ = c.join();
                }
                return Err(setup(e));
            }
        };
        let max_payload = bcasts.as_ref().map_or(0, |b| b.max);
        let (requests, rx) = mpsc::channel();
        let (tx, events) = mpsc::channel();
        let (bell, rung) = UnixDatagram::pair()
            .and_then(|(a, b)| {
                a.set_nonblocking(true)?;
                b.set_nonblocking(true)?;
                Ok((a, b))
            })
            .map_err(|e| setup(format!("cannot open the member's doorbell: {e}")))?;
        let run = Run {
            rung,
            idle_wait: idle,
            linger: spec.linger,
            rank,
            n,
            agreements,
            requests: rx,
            events: tx,
            flags: flags.clone(),
            _agent: agent,
        };
        #[cfg(test)]
        std::thread::sleep(START_LATE.get());
        let thread = match std::thread::Builder::new()
            .name("ftcoll-member".into())
            .spawn(move || run.start(bcasts))
        {
            Ok(t) => t,
            Err(e) => {
                flags.stop.store(true, Ordering::Release);
                if let Some(c) = coordinator {
                    let _ = c.join();
                }
                return Err(setup(format!("cannot start the member's thread: {e}")));
            }
        };
        Ok(Member {
            rank,
            n,
            requests,
            bell,
            events,
            flags,
            thread: Some(thread),
            coordinator,
            next_id: 0,
            next_seq: spec.broadcasts.then_some(0),
            max_payload,
            streams,
            pending: std::collections::VecDeque::new(),
        })
    }

    /// Hands `r` to the member's thread and rings its doorbell (a full one rings already).
    fn request(&self, r: Request) -> Result<(), GroupError> {
        self.requests.send(r).map_err(|_| GroupError::Closed)?;
        let _ = self.bell.send(&[1]);
        Ok(())
    }

    /// Tests: the member's thread stops for `d` (see [`Request::Stall`]).
    #[cfg(test)]
    pub(crate) fn stall(&self, d: Duration) {
        self.request(Request::Stall(d)).unwrap();
    }

    /// Tests: the member's thread handles `ev` as its agreements' own ([`Request::Inject`]).
    #[cfg(test)]
    pub(crate) fn inject(&self, ev: Event) {
        self.request(Request::Inject(ev)).unwrap();
    }

    /// This member's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The group's size.
    pub fn size(&self) -> u32 {
        self.n
    }

    /// Who fenced this member, if one did: that member's transport or detector suspected it
    /// (silent too long), so it stopped, as fail-stop enforcement requires. Its own rank: the
    /// group agreed it had failed (a peer's suspicion reached it in an agreement's failed set
    /// before that peer's FENCE did), and it stopped as well.
    pub fn fenced_by(&self) -> Option<u32> {
        let by = self.flags.fenced_by.load(Ordering::Acquire);
        (by != NOT_FENCED).then_some(by)
    }

    /// Enters this member's next agreement with `value` (a 64-bit AND over the live members'
    /// values; the failed members are agreed on too) and returns its id (0, 1, ... per
    /// member): [`Event::Agreed`] with this id reports its return. Agreements are entered in
    /// the order asked, one after the other.
    pub fn agree(&mut self, value: u64) -> Result<u64, GroupError> {
        if let Some(by) = self.fenced_by() {
            return Err(GroupError::Fenced { rank: self.rank, by });
        }
        self.request(Request::Agree(value))?;
        self.next_id += 1;
        Ok(self.next_id - 1)
    }

    /// Calls this member's next broadcast, rooted at `root`, and returns its operation (0, 1,
    /// ... the same at every member): at the root it sends `bytes`; elsewhere `bytes` is not
    /// used and [`Event::Delivered`] hands over the root's. Broadcasts are collective, as
    /// MPI's are: every member calls each one, in the same order, naming the same root. A
    /// member whose call names another root than the one the operation's datagrams come from
    /// reports it once, [`Event::RootMismatch`] (the callers' error: the other root's datagrams
    /// are dropped and counted, `MemberCounters::root_mismatch`; heard before the call, that
    /// root was followed and delivered).
    ///
    /// A member forwards and delivers what it hears before its own call comes; its
    /// [`Event::Completed`] says when the operation is over here (delivered and this member's
    /// part of the protocol done, or `op_timeout` passed first: `timed_out` when it did not
    /// deliver, as when its root failed before any copy got out). At most 32 of a member's
    /// calls are in flight past the oldest one not over here; later ones wait in order.
    ///
    /// A root's payload longer than a datagram carries is refused (`TooLarge`), and its
    /// operation is used up all the same (the others call it too): it is over at once here,
    /// timed out, and times out at the others.
    pub fn broadcast(&mut self, root: u32, bytes: &[u8]) -> Result<u64, GroupError> {
        let Some(seq) = self.next_seq else {
            return Err(GroupError::NoBroadcasts);
        };
        if let Some(by) = self.fenced_by() {
            return Err(GroupError::Fenced { rank: self.rank, by });
        }
        if root >= self.n {
            return Err(GroupError::NoSuchMember(root));
        }
        if root == self.rank && bytes.len() > self.max_payload {
            // The others call this operation too: it is used up here, and times out there.
            self.request(Request::Broadcast { seq, root, bytes: None })?;
            self.next_seq = Some(seq + 1);
            return Err(GroupError::TooLarge {
                len: bytes.len(),
                max: self.max_payload,
            });
        }
        let bytes = (root == self.rank).then(|| bytes.to_vec());
        self.request(Request::Broadcast { seq, root, bytes })?;
        self.next_seq = Some(seq + 1);
        Ok(seq)
    }

    /// What this member counted since it joined: both transports' counters, the broadcast
    /// datagrams it dropped (and why), and its broadcasts that timed out. `Closed` once it
    /// stopped.
    pub fn counters(&self) -> Result<MemberCounters, GroupError> {
        let (tx, rx) = mpsc::channel();
        self.request(Request::Counters(tx))?;
        rx.recv_timeout(Duration::from_secs(10)).map_err(|_| GroupError::Closed)
    }

    /// The next event, waiting up to `timeout`: this member's [`Event::Delivered`] and
    /// [`Event::Completed`] of broadcasts, its [`Event::Agreed`] returns, and
    /// [`Event::Failed`] once per member this member learned has failed (suspected by its
    /// transport or detector, or in an agreement's failed set; itself, when fenced). `None`:
    /// nothing came in time, or this member stopped (fenced: [`Member::fenced_by`] says by
    /// whom) and nothing more will come.
    pub fn next_event(&mut self, timeout: Duration) -> Option<Event> {
        self.pending
            .pop_front()
            .or_else(|| self.events.recv_timeout(timeout).ok())
    }

    /// The next event if there is one, without waiting.
    pub fn poll(&mut self) -> Option<Event> {
        self.pending.pop_front().or_else(|| self.events.try_recv().ok())
    }

    /// Leaves the group, as MPI's finalize does, and says how it went: the member takes no
    /// more calls but goes on receiving, answering, heartbeating and retransmitting until
    /// what its protocols sent has been acknowledged (at most [`MemberSpec::linger`], so
    /// that a decision it returned reaches the members it owes it to); then its endpoints
    /// close (the others suspect it as they would a process that died) and, on rank 0, the
    /// rendezvous service ends. Dropping the member does the same.
    pub fn leave(mut self) -> Left {
        self.stop();
        if let Some(by) = self.fenced_by() {
            Left::Fenced { by }
        } else if self.flags.left.load(Ordering::Acquire) == LEFT_FLUSHED {
            Left::Flushed
        } else {
            Left::Unacknowledged
        }
    }

    /// Ends the member's thread (after its linger) and rank 0's rendezvous.
    fn stop(&mut self) {
        self.flags.stop.store(true, Ordering::Release);
        // Rung as a request is: an idle thread sleeps up to its idle heartbeat period
        // (`suspect_after / 8` by default: seconds, or years) and would only then see `stop`.
        let _ = self.bell.send(&[1]);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(t) = self.coordinator.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Member {
    /// Leaves the group as [`Member::leave`] does, without saying how it went.
    fn drop(&mut self) {
        self.stop();
    }
}

/// How a member left its group ([`Member::leave`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Left {
    /// Everything its protocols sent had been acknowledged (or given up with a peer that
    /// was suspected): nothing it said is lost with it.
    Flushed,
    /// [`MemberSpec::linger`] passed first: what was still unacknowledged may be lost (an
    /// agreement's decision it returned may not reach a child, which may then decide without
    /// it: ERA's non-uniform case).
    Unacknowledged,
    /// It had been fenced, before or while it left: a peer suspected it (`by`; its own rank:
    /// the group agreed it had failed), so it counted as failed and owed nothing more.
    Fenced { by: u32 },
}

/// How long after a member got the group's table its detector gives a neighbour it has not
/// heard from yet to start ([`Agreements::expecting_starts`]): the detector's ceiling
/// ([`GAP_CEILING`] × `suspect_after`, the longest it lets any peer be silent: a member that
/// never starts is suspected no later than a slow one would be) *after* the longest a peer
/// may take to start once it has the table, [`SYNC_GIVE_UP`] (timing its clock against a rank
/// 0 that is gone: it left as soon as it joined). The sum, not the larger: the window counts
/// from this member's table, and a peer may get its own later (a lost copy, asked for again)
/// and only then spend up to [`SYNC_GIVE_UP`] before it heartbeats.
pub(super) fn start_window(suspect_after: Duration) -> Duration {
    let ceiling = u32::try_from(GAP_CEILING).unwrap_or(u32::MAX);
    SYNC_GIVE_UP.saturating_add(suspect_after.saturating_mul(ceiling))
}

#[cfg(test)]
mod mismatch_tests;
#[cfg(test)]
thread_local! {
    /// Tests: how long [`Member::join`] on this thread waits, once it has the table, before
    /// it starts the member's thread (a process slow to start: descheduled, or timing its
    /// clock against a rank 0 that is gone).
    pub(crate) static START_LATE: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
}

#[cfg(test)]
mod join_tests;
#[cfg(test)]
mod tests;
