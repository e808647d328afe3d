//! A process group for programs that embed ftcoll: broadcast the caller's bytes from any
//! member to every live member, crash members, and hear what happened as [`Event`]s.
//!
//! A [`Group`] runs its members (one runtime node each, over the in-process or loopback UDP
//! transport) on worker threads ([`GroupBuilder::workers`], one by default) with the same
//! worker loop, node loop and coordinator as `ftcoll bench`, whose local run is a group's
//! [`Group::stream`] (`docs/library.md`): operations are numbered in one sequence over all roots
//! (Corrected Gossip Claim 1), each disseminated by the chosen broadcast algorithm (the
//! default is a binomial corrected tree with checked correction, Corrected Trees §3), and
//! one is over once every live member delivered it (or its timeout passed). Members also
//! agree on a 64-bit AND and on who failed ([`Group::agree`], ERA, Herault et al. SC 2015),
//! or run a closed loop of agreements on the group's workers ([`Group::agree_stream`], which
//! `ftcoll agree`'s local run is); a group built without broadcasts
//! ([`GroupBuilder::broadcasts`]) only agrees.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use ftcoll::group::{Event, Group};
//!
//! let mut group = Group::local(4)?;
//! group.kill(3)?; // member 3 crashes; the others still deliver
//! let seq = group.broadcast(1, b"hello")?;
//! let mut members = Vec::new();
//! while let Some(ev) = group.next_event(Duration::from_secs(10)) {
//!     match ev {
//!         Event::Delivered { member, bytes, .. } => {
//!             assert_eq!(bytes, b"hello");
//!             members.push(member);
//!         }
//!         Event::Completed { seq: s, .. } if s == seq => break,
//!         _ => {}
//!     }
//! }
//! members.sort();
//! assert_eq!(members, [0, 1, 2]);
//! # Ok::<(), ftcoll::group::GroupError>(())
//! ```

mod agree;
mod agree_stream;
mod checks;
mod driver;
mod error;
mod event;
mod lead;
mod member;
mod shared;
mod stream;
#[cfg(test)]
mod tests;

pub use agree_stream::AgreeStream;
pub(crate) use checks::nanos;
pub use checks::{MAX_WALL, max_payload_of};
pub use error::GroupError;
pub use event::Event;
pub use member::{Left, Member, MemberCounters, MemberSpec, MemberStream};
pub(crate) use member::{Rendezvous, StreamHooks};
pub use stream::Stream;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::model::{LogGP, LogP};
use crate::protocol::bcast::Start;
use crate::protocol::bcast::algo::Algo;
use crate::protocol::bcast::correction::Correction;
use crate::runtime::board::Control;
use crate::runtime::cluster::PollMode;
use crate::runtime::kill::Kill;
use crate::runtime::{Endpoints, TransportKind};
use crate::topology::{Order, TreeKind};
use crate::transport::udp::auth::AuthKey;

/// How to build a [`Group`]; from [`Group::builder`].
pub struct GroupBuilder {
    n: u32,
    algo: Algo,
    transport: TransportKind,
    /// The protocols' LogGP, in units of `tick_ns` nanoseconds.
    model: LogGP,
    tick_ns: u64,
    window: u64,
    op_timeout: Duration,
    seed: u64,
    job: Option<u64>,
    auth: Option<AuthKey>,
    workers: usize,
    pin: bool,
    poll: PollMode,
    agreements: bool,
    broadcasts: bool,
    kills: Vec<Kill>,
    /// The agreements' failure detector: heartbeat period (`None`: by the members per core,
    /// [`GroupBuilder::failure_detector`]) and suspicion floor.
    heartbeat: Option<Duration>,
    suspect_after: Duration,
    /// The members' broadcast endpoints, if the caller built them.
    endpoints: Option<Endpoints>,
    /// Tests: wraps each member's broadcast endpoint (to stall one, say).
    #[cfg(test)]
    wrap: Option<Wrap>,
    /// Tests: a member whose agreements stop being driven.
    #[cfg(test)]
    hang_agree: Vec<agree::Hang>,
}

/// A test's wrapper of member `rank`'s broadcast endpoint.
#[cfg(test)]
type Wrap = Box<dyn FnMut(u32, Box<dyn crate::transport::Transport>) -> Box<dyn crate::transport::Transport>>;

/// Who fenced each member (`NOT_FENCED`: no one), written by the group's thread before it
/// reports the member failed.
pub(crate) struct FencedBy(Vec<AtomicU32>);

const NOT_FENCED: u32 = u32::MAX;

impl FencedBy {
    fn new(n: u32) -> Self {
        FencedBy((0..n).map(|_| AtomicU32::new(NOT_FENCED)).collect())
    }

    fn set(&self, rank: u32, by: u32) {
        self.0[rank as usize].store(by, Ordering::Release);
    }

    fn get(&self, rank: u32) -> Option<u32> {
        let by = self.0.get(rank as usize)?.load(Ordering::Acquire);
        (by != NOT_FENCED).then_some(by)
    }
}

impl GroupBuilder {
    /// The broadcast algorithm (default: binomial corrected tree, interleaved, checked
    /// correction, synchronized start).
    pub fn algo(mut self, algo: Algo) -> Self {
        self.algo = algo;
        self
    }

    /// The transport between members (default: in-process queues).
    pub fn transport(mut self, kind: TransportKind) -> Self {
        self.transport = kind;
        self
    }

    /// The LogP overhead `o` and latency `L` the protocols count their waits in (default
    /// 1 µs and 2 µs): `o` is the unit, `L` rounded to units of it. [`GroupBuilder::build`]
    /// refuses an `o` beyond [`MAX_WALL`] and an `L` beyond [`LogP::MAX`] units (arithmetic
    /// here saturates, so that absurd values reach that check instead of overflowing).
    pub fn logp(mut self, o: Duration, l: Duration) -> Self {
        let o_ns = nanos(o).max(1);
        let l_ns = nanos(l);
        self.tick_ns = o_ns;
        self.model = LogP {
            l: l_ns.saturating_add(o_ns / 2) / o_ns,
            o: 1,
        }
        .into();
        self
    }

    /// The protocols' LogGP parameters `model`, counted in units of `unit` (at least 1 ns) of
    /// real time: [`GroupBuilder::logp`] with separate send and receive overheads, as a
    /// benchmark models its transport (`docs/architecture.md`, model time). Each time at most
    /// [`LogP::MAX`] units and the unit at most [`MAX_WALL`], or [`GroupBuilder::build`] refuses.
    pub fn loggp(mut self, model: LogGP, unit: Duration) -> Self {
        self.model = model;
        self.tick_ns = nanos(unit).max(1);
        self
    }

    /// Worker threads the members are spread over, member `r` on worker `r % k` (default 1,
    /// at least 1, or [`GroupBuilder::build`] refuses; at most one per member is started),
    /// its broadcast node and its agreements alike. Worker 0 also
    /// starts and retires the broadcasts and hands each member's agreement values to its
    /// worker. An agreement then runs on all `k` workers at once: busy-polling workers
    /// ([`PollMode::Busy`]) and a caller spinning on [`Group::poll`] need `k + 1` cores.
    pub fn workers(mut self, k: usize) -> Self {
        self.workers = k;
        self
    }

    /// Pin worker `w` to core `w` (default: not pinned).
    pub fn pin(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// How idle workers wait (default [`PollMode::Blocking`]: they yield a while, then sleep
    /// briefly, so an idle group costs little; a [`Stream`] wants `Busy` on a core per worker).
    pub fn poll(mut self, poll: PollMode) -> Self {
        self.poll = poll;
        self
    }

    /// Set up agreements ([`Group::agree`]; default true). Without them the group opens no
    /// second endpoint per member.
    pub fn agreements(mut self, on: bool) -> Self {
        self.agreements = on;
        self
    }

    /// Set up broadcasts ([`Group::broadcast`], [`Group::stream`]; default true). Without
    /// them the group builds no broadcast node and opens no broadcast endpoint: an
    /// agreements-only group ([`Group::agree`], [`Group::agree_stream`]), whose workers step
    /// only agreements.
    pub fn broadcasts(mut self, on: bool) -> Self {
        self.broadcasts = on;
        self
    }

    /// Crashes injected at given operations (fault injection, as `bench --kill`): each member
    /// named dies where its [`Kill`] says, counted from the group's first broadcast. Each
    /// member at most once, and no [`KillPoint::SigKill`](crate::runtime::kill::KillPoint)
    /// (a thread cannot be killed as a process is), or [`GroupBuilder::build`] refuses.
    pub fn kills(mut self, kills: Vec<Kill>) -> Self {
        self.kills = kills;
        self
    }

    /// The job id the members' datagrams carry (default: derived from the seed).
    pub fn job(mut self, job: u64) -> Self {
        self.job = Some(job);
        self
    }

    /// The members' broadcast endpoints, one per rank in rank order, instead of ones the
    /// group opens on its transport: to know their addresses, say, or to wrap them (an
    /// endpoint that loses or stalls). [`GroupBuilder::transport`] then names only the
    /// agreements' transport, and [`GroupBuilder::auth`] is the caller's to apply.
    pub fn endpoints(mut self, eps: Endpoints) -> Self {
        self.endpoints = Some(eps);
        self
    }

    /// UDP: authenticate every datagram with this key (default: none).
    pub fn auth(mut self, key: Option<AuthKey>) -> Self {
        self.auth = key;
        self
    }

    /// Broadcasts in flight at once (default 8; 1 to 32, as a [`Stream`]'s, or
    /// [`GroupBuilder::build`] refuses).
    pub fn window(mut self, k: u64) -> Self {
        self.window = k;
        self
    }

    /// A broadcast not delivered everywhere after this is reported timed out (default 10 s;
    /// one beyond `u64::MAX` ns, 584 years, is never).
    pub fn op_timeout(mut self, t: Duration) -> Self {
        self.op_timeout = t;
        self
    }

    /// The seed of the protocols' random choices and of the job id.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The agreements' failure detector: each member sends a heartbeat every `heartbeat` to
    /// its ERA tree neighbours that nothing else was sent to, and suspects one silent for
    /// `suspect_after`; a suspected member is stopped ([`Event::Failed`]). Default, as
    /// `ftcoll agree`: 100 ms, and a heartbeat every 50 µs times the members per core (the
    /// members per worker, with at most as many workers as the machine has cores: one
    /// member per core, 50 µs; 16 members on one worker, 800 µs), so a core sends about as
    /// many heartbeats as one member with a core of its own does
    /// ([`crate::runtime::agree::shared_heartbeat`]).
    pub fn failure_detector(mut self, heartbeat: Duration, suspect_after: Duration) -> Self {
        self.heartbeat = Some(heartbeat);
        self.suspect_after = suspect_after;
        self
    }

    /// The agreements' heartbeat period: the caller's ([`GroupBuilder::failure_detector`]),
    /// else 50 µs times the members per core (the members per worker, with at most as many
    /// workers as members and as the machine's cores).
    fn heartbeat_period(&self) -> Duration {
        self.heartbeat.unwrap_or_else(|| {
            let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
            let units = self.workers.clamp(1, self.n.max(1) as usize).min(cores);
            crate::runtime::agree::shared_heartbeat(self.n.div_ceil(units as u32))
        })
    }

    /// Tests: member `hang.0`'s agreements stop being driven once `hang.1` says so.
    #[cfg(test)]
    pub(crate) fn hang_agree(mut self, hang: agree::Hang) -> Self {
        self.hang_agree.push(hang);
        self
    }

    /// Tests: `f` wraps each member's broadcast endpoint.
    #[cfg(test)]
    pub(crate) fn wrap(mut self, f: Wrap) -> Self {
        self.wrap = Some(f);
        self
    }

    /// Starts the group's thread and its members, once `GroupBuilder::check` (`checks.rs`)
    /// found the settings possible.
    pub fn build(self) -> Result<Group, GroupError> {
        self.check()?;
        driver::start(self)
    }
}

/// A group of `n` members in this process; see the [module documentation](self).
pub struct Group {
    n: u32,
    next_seq: u64,
    /// Agreements each member entered so far.
    agreements: Vec<u64>,
    /// Agreements were set up.
    agrees: bool,
    /// Broadcasts were set up.
    bcasts: bool,
    /// What an agreement stream takes from the group ([`Group::agree_stream`]).
    agree_cfg: agree_stream::Settings,
    /// Worker threads running the members.
    workers: usize,
    max_payload: usize,
    ctl: Arc<Control>,
    shared: Arc<shared::Shared>,
    requests: Option<mpsc::Sender<driver::Request>>,
    events: mpsc::Receiver<Event>,
    thread: Option<JoinHandle<()>>,
}

/// The longest payload a broadcast datagram of message type `M` carries (one datagram, no
/// fragmentation).
pub(crate) fn max_payload<M: crate::wire::WireMessage>() -> usize {
    crate::transport::MAX_PAYLOAD.saturating_sub(crate::wire::HEADER_LEN + M::MAX_BODY)
}

/// The broadcast algorithm of a group or member not told another: a binomial corrected tree,
/// interleaved, with checked correction and a synchronized start (Corrected Trees §3).
pub(crate) fn default_algo() -> Algo {
    Algo::CorrectedTree {
        tree: TreeKind::Binomial,
        order: Order::Interleaved,
        correction: Correction::Checked,
        start: Start::Synchronized,
    }
}

impl Group {
    /// A builder for a group of `n` members (at least 2).
    pub fn builder(n: u32) -> GroupBuilder {
        GroupBuilder {
            n,
            algo: default_algo(),
            transport: TransportKind::Inproc,
            model: LogP { l: 2, o: 1 }.into(),
            tick_ns: 1_000,
            window: 8,
            op_timeout: Duration::from_secs(10),
            seed: 1,
            job: None,
            auth: None,
            workers: 1,
            pin: false,
            poll: PollMode::Blocking,
            agreements: true,
            broadcasts: true,
            kills: Vec::new(),
            heartbeat: None,
            suspect_after: crate::runtime::agree::DEFAULT_SUSPECT_AFTER,
            endpoints: None,
            #[cfg(test)]
            wrap: None,
            #[cfg(test)]
            hang_agree: Vec::new(),
        }
    }

    /// A group of `n` members over in-process queues, with the defaults of
    /// [`Group::builder`].
    pub fn local(n: u32) -> Result<Group, GroupError> {
        Self::builder(n).build()
    }

    /// Members in the group, dead ones included.
    pub fn size(&self) -> u32 {
        self.n
    }

    /// The longest payload one broadcast carries, [`Group::broadcast`]'s and
    /// [`Group::stream`]'s alike: what is left of a datagram beside the header and the
    /// algorithm's longest message body. A few bytes more still fit beside the shorter bodies
    /// of some messages (a small run's, with small counted times), so a stream of them may
    /// run cleanly; but the messages whose bodies are longest (a later time, a correction that
    /// names failed ranks) could not be sent, so both refuse it.
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// Has member `rank` crashed?
    pub fn is_dead(&self, rank: u32) -> bool {
        self.ctl
            .boards
            .get(rank as usize)
            .is_some_and(|b| b.dead.load(Ordering::Acquire))
    }

    /// The member whose transport or failure detector suspected member `rank` and fenced it,
    /// once the group's thread has seen `rank` stop for that reason (it then reports
    /// [`Event::Failed`]).
    pub fn fenced_by(&self, rank: u32) -> Option<u32> {
        self.shared.fenced.get(rank)
    }

    fn member(&self, rank: u32) -> Result<(), GroupError> {
        if rank >= self.n {
            return Err(GroupError::NoSuchMember(rank));
        }
        if let Some(by) = self.fenced_by(rank) {
            return Err(GroupError::Fenced { rank, by });
        }
        if self.is_dead(rank) {
            return Err(GroupError::Dead(rank));
        }
        Ok(())
    }

    fn request(&self, r: driver::Request) -> Result<(), GroupError> {
        let tx = self.requests.as_ref().ok_or(GroupError::Closed)?;
        tx.send(r).map_err(|_| GroupError::Closed)
    }

    /// Member `root` broadcasts `bytes` to the group; returns the broadcast's sequence
    /// number. Broadcasts start in the order asked, at most the window at once.
    pub fn broadcast(&mut self, root: u32, bytes: &[u8]) -> Result<u64, GroupError> {
        self.member(root)?;
        if !self.bcasts {
            return Err(GroupError::NoBroadcasts);
        }
        if bytes.len() > self.max_payload {
            return Err(GroupError::TooLarge {
                len: bytes.len(),
                max: self.max_payload,
            });
        }
        let seq = self.next_seq;
        self.request(driver::Request::Broadcast {
            seq,
            root,
            bytes: bytes.to_vec(),
        })?;
        self.next_seq += 1;
        Ok(seq)
    }

    /// Member `member` enters its next agreement, contributing `value`; returns the
    /// agreement's id. An agreement returns ([`Event::Agreed`]) once every live member has
    /// entered it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ftcoll::group::{Event, Group};
    ///
    /// let mut group = Group::local(3)?;
    /// group.kill(2)?;
    /// group.agree(0, 0b110)?;
    /// group.agree(1, 0b011)?;
    /// for _ in 0..2 {
    ///     let ev = group.next_event(Duration::from_secs(10));
    ///     if let Some(Event::Agreed { value, failed, .. }) = ev {
    ///         assert_eq!((value, failed), (0b010, vec![2]));
    ///     } else if !matches!(ev, Some(Event::Failed { rank: 2 })) {
    ///         panic!("{ev:?}");
    ///     }
    /// }
    /// # Ok::<(), ftcoll::group::GroupError>(())
    /// ```
    pub fn agree(&mut self, member: u32, value: u64) -> Result<u64, GroupError> {
        self.member(member)?;
        // Above the limit a group builds its broadcasts only (asked for agreements or not):
        // the caller hears why, not that they were turned off.
        if self.n > driver::MAX_AGREE_MEMBERS {
            return Err(GroupError::TooManyToAgree {
                max: driver::MAX_AGREE_MEMBERS,
            });
        }
        if !self.agrees {
            return Err(GroupError::NoAgreements);
        }
        self.request(driver::Request::Agree { member, value })?;
        let id = &mut self.agreements[member as usize];
        *id += 1;
        Ok(*id - 1)
    }

    /// Crashes member `rank` now (fault injection: crash-stop, as a process that dies).
    pub fn kill(&mut self, rank: u32) -> Result<(), GroupError> {
        self.member(rank)?;
        self.request(driver::Request::Kill(rank))
    }

    /// The next event, waiting at most `timeout` (`None`: nothing happened in time, or the
    /// group's thread is gone).
    pub fn next_event(&mut self, timeout: Duration) -> Option<Event> {
        self.events.recv_timeout(timeout).ok()
    }

    /// The next event if one is waiting.
    pub fn poll(&mut self) -> Option<Event> {
        self.events.try_recv().ok()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // Closing the request channel stops the thread.
        self.requests = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
