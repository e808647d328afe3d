//! One member of a group whose members are processes ([`Member`]): each process joins with its
//! rank, and the members agree with one another over UDP (ERA, Herault et al. SC 2015) and hear
//! of each other's failures, as [`super::Group`]'s members do within one process.
//!
//! Rendezvous goes through rank 0, as `ftcoll agree --join`'s does ([`crate::runtime::control`]):
//! rank 0 serves the address table and the run's nonce at the coordinator's address (a thread
//! of its process, for as long as its member lives), every member (rank 0's too) joins there
//! with its data socket's address, authenticated by the challenge–response of the control
//! plane when a key is given, and seals its datagrams with the run's session key. After that
//! rank 0 has no part: ERA is fully distributed (§2), so an agreement needs no coordinator and
//! survives rank 0's death like any other member's.
//!
//! Each member runs its ERA instance on a thread of its own with the group's driver
//! ([`super::agree`]: the same codec, send queue and heartbeat failure detector over ERA's
//! tree neighbours). A member learns of a failure from its transport (retries exhausted, a
//! closed port) or its detector (a neighbour silent too long), and from the failed set of an
//! agreement; a suspicion is enforced where the suspect runs by the transport's FENCE
//! (fail-stop: a fenced member stops, and its own calls then say so).
//!
//! Broadcasts are not offered across processes: a broadcast's operations are numbered in one
//! sequence over all roots (Corrected Gossip Claim 1), which within a process the group's
//! lead does; across processes that needs rank 0's coordinator to number them and to tell
//! every member each operation's root before its first message (`ftcoll bench --join` runs
//! from rank 0 only, for that reason).

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::agree::{Agreements, Stops};
use super::{Event, GroupError, NOT_FENCED};
use crate::runtime::agree::{DEDICATED_HEARTBEAT, DEFAULT_SUSPECT_AFTER, MAX_NODES as MAX_AGREE_NODES};
use crate::runtime::board::Control;
use crate::runtime::control::child::{Joined, join_with_socket};
use crate::runtime::control::{ChildAgent, ParentAgent};
use crate::runtime::join::JobParams;
use crate::transport::Transport;
use crate::transport::udp::auth::AuthKey;
use crate::transport::udp::{UdpConfig, UdpTransport};

/// How a process joins its group: [`Member::join`].
#[derive(Clone, Debug)]
pub struct MemberSpec {
    /// This member's rank, `0..n`; rank 0 also serves the rendezvous at `coordinator`.
    pub rank: u32,
    /// The group's size.
    pub n: u32,
    /// Rank 0's address for the rendezvous (rank 0 binds it; the others send to it).
    pub coordinator: SocketAddr,
    /// The IP this member's data socket binds and publishes [default: the interface toward
    /// the coordinator].
    pub bind: Option<IpAddr>,
    /// The group's long-term key (`None`: unauthenticated; every member must have the same).
    pub key: Option<AuthKey>,
    /// How long to wait for every member to join.
    pub timeout: Duration,
    /// Tells this group from another on the same hosts (every member must have the same).
    pub seed: u64,
    /// The failure detector's heartbeat period to ERA tree neighbours and its suspicion
    /// floor [default: 50 µs, a core per member, and 100 ms, as `ftcoll agree --join`].
    pub heartbeat: Duration,
    pub suspect_after: Duration,
}

impl MemberSpec {
    /// This process's member as its launcher started it: rank and size from the launcher's
    /// environment (Slurm `SLURM_PROCID`/`SLURM_NTASKS`, Open MPI
    /// `OMPI_COMM_WORLD_RANK`/`OMPI_COMM_WORLD_SIZE`, MPICH/PMI `PMI_RANK`/`PMI_SIZE`, as
    /// `ftcoll node` reads them), otherwise as [`MemberSpec::new`].
    pub fn from_launcher(coordinator: SocketAddr) -> Result<Self, GroupError> {
        let (rank, n) = crate::runtime::procs::rank_and_size(None, None, "members").map_err(GroupError::Setup)?;
        Ok(MemberSpec::new(rank, n, coordinator))
    }

    /// Member `rank` of `n`, rendezvous at `coordinator`, unauthenticated, the defaults above,
    /// a 30 s join timeout.
    pub fn new(rank: u32, n: u32, coordinator: SocketAddr) -> Self {
        MemberSpec {
            rank,
            n,
            coordinator,
            bind: None,
            key: None,
            timeout: Duration::from_secs(30),
            seed: 1,
            heartbeat: DEDICATED_HEARTBEAT,
            suspect_after: DEFAULT_SUSPECT_AFTER,
        }
    }
}

/// One process's member of a group of processes: agreements with the others, and their
/// failures, as [`Event`]s.
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
///             m.agree(!(1u64 << rank)).unwrap();
///             loop {
///                 match m.next_event(Duration::from_secs(10)) {
///                     Some(Event::Agreed { value, failed, .. }) => break (value, failed),
///                     Some(_) => {}
///                     None => panic!("no agreement in 10 s"),
///                 }
///             }
///         })
///     })
///     .collect();
/// for m in members {
///     assert_eq!(m.join().unwrap(), (!0b111, vec![]));
/// }
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Member {
    rank: u32,
    n: u32,
    requests: mpsc::Sender<u64>,
    events: mpsc::Receiver<Event>,
    flags: Arc<Flags>,
    thread: Option<JoinHandle<()>>,
    /// Rank 0: the rendezvous service, answering members that missed the table.
    coordinator: Option<JoinHandle<()>>,
    next_id: u64,
}

impl Member {
    /// Joins the group: on rank 0 starts the rendezvous at `spec.coordinator`; binds this
    /// member's data socket, sends its address to rank 0 until the whole table comes back (or
    /// `spec.timeout` passes), and starts the member's thread.
    pub fn join(spec: MemberSpec) -> Result<Member, GroupError> {
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
        let job = crate::transport::ids::members(spec.seed);
        let flags = Arc::new(Flags {
            fenced_by: AtomicU32::new(NOT_FENCED),
            stop: AtomicBool::new(false),
        });
        let coordinator = if rank == 0 {
            Some(serve_rendezvous(&spec, job, flags.clone()).map_err(setup)?)
        } else {
            None
        };
        let joined = (|| {
            let Joined {
                sock,
                agent,
                peers,
                params: p,
            } = join_with_socket(
                spec.coordinator,
                spec.bind,
                job,
                rank,
                n,
                spec.key.clone(),
                spec.timeout,
            )?;
            let cfg = UdpConfig {
                job,
                seed: spec.seed,
                // The run's datagrams are sealed with its session key, from rank 0's nonce.
                auth: spec.key.as_ref().map(|k| k.session(&p.run)),
                ..UdpConfig::default()
            };
            let tp: Box<dyn Transport> = Box::new(
                UdpTransport::from_socket(rank, sock, &peers, cfg)
                    .map_err(|e| format!("cannot open this member's endpoint: {e}"))?,
            );
            let a = Agreements::one(rank, n, tp, job, spec.heartbeat, spec.suspect_after)?;
            Ok::<_, String>((a, agent))
        })();
        let (agreements, agent) = match joined {
            Ok(j) => j,
            Err(e) => {
                flags.stop.store(true, Ordering::Release);
                if let Some(c) = coordinator {
                    let _ = c.join();
                }
                return Err(setup(e));
            }
        };
        let (requests, rx) = mpsc::channel();
        let (tx, events) = mpsc::channel();
        let run = Run {
            rank,
            n,
            agreements,
            requests: rx,
            events: tx,
            flags: flags.clone(),
            _agent: agent,
        };
        let thread = match std::thread::Builder::new()
            .name("ftcoll-member".into())
            .spawn(move || run.run())
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
            events,
            flags,
            thread: Some(thread),
            coordinator,
            next_id: 0,
        })
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
        self.requests.send(value).map_err(|_| GroupError::Closed)?;
        self.next_id += 1;
        Ok(self.next_id - 1)
    }

    /// The next event, waiting up to `timeout`: this member's [`Event::Agreed`] returns, and
    /// [`Event::Failed`] once per member this member learned has failed (suspected by its
    /// transport or detector, or in an agreement's failed set; itself, when fenced). `None`:
    /// nothing came in time, or this member stopped (fenced: [`Member::fenced_by`] says by
    /// whom) and nothing more will come.
    pub fn next_event(&mut self, timeout: Duration) -> Option<Event> {
        self.events.recv_timeout(timeout).ok()
    }

    /// The next event if there is one, without waiting.
    pub fn poll(&mut self) -> Option<Event> {
        self.events.try_recv().ok()
    }
}

impl Drop for Member {
    /// Leaves the group: the member's endpoint closes (the others suspect it as they would a
    /// process that died) and, on rank 0, the rendezvous service ends.
    fn drop(&mut self) {
        self.flags.stop.store(true, Ordering::Release);
        for t in [self.thread.take(), self.coordinator.take()].into_iter().flatten() {
            let _ = t.join();
        }
    }
}

/// Rank 0's rendezvous: binds the coordinator's address and answers joins until `stop`.
fn serve_rendezvous(spec: &MemberSpec, job: u64, flags: Arc<Flags>) -> Result<JoinHandle<()>, String> {
    let mut agent = ParentAgent::bind(spec.coordinator, job, spec.n)
        .map_err(|e| format!("cannot bind the coordinator at {}: {e}", spec.coordinator))?;
    agent.set_key(spec.key.clone());
    agent
        .launch(JobParams {
            o_ns: 1,
            l_ns: 1,
            epoch_unix_ns: crate::runtime::procs::unix_ns(),
            run: crate::transport::ids::run_nonce()?,
        })
        .map_err(|e| format!("cannot draw the coordinator's nonce: {e}"))?;
    let n = spec.n;
    std::thread::Builder::new()
        .name("ftcoll-rendezvous".into())
        .spawn(move || {
            let ctl = Control::new(n);
            let epoch = Instant::now();
            let now_ns = || epoch.elapsed().as_nanos() as u64;
            while !flags.stop.load(Ordering::Acquire) {
                agent.serve(&ctl, &now_ns);
                agent.wait(Duration::from_millis(5));
            }
        })
        .map_err(|e| format!("cannot start the rendezvous thread: {e}"))
}

/// What a member's caller and its threads share.
struct Flags {
    /// Who fenced this member (`NOT_FENCED`: no one), set by its thread before it reports
    /// itself failed.
    fenced_by: AtomicU32,
    /// The member leaves: its thread and rank 0's rendezvous end.
    stop: AtomicBool,
}

/// A member's thread: its ERA instance, stepped until the member leaves.
struct Run {
    rank: u32,
    n: u32,
    agreements: Agreements,
    requests: mpsc::Receiver<u64>,
    events: mpsc::Sender<Event>,
    flags: Arc<Flags>,
    /// Kept open: a control datagram to a closed socket would draw an ICMP error that spends
    /// this host's ICMP rate limit toward rank 0 (`src/transport/udp/icmp.rs`).
    _agent: ChildAgent,
}

/// What one process knows has failed ([`Stops`] for its single member): each rank stops once.
struct Failed(Vec<std::cell::Cell<bool>>);

impl Stops for Failed {
    fn is_stopped(&self, r: u32) -> bool {
        self.0[r as usize].get()
    }

    fn claim(&self, r: u32, by: Option<u32>) -> bool {
        if by.is_some_and(|b| self.is_stopped(b)) {
            return false;
        }
        !self.0[r as usize].replace(true)
    }
}

/// How long an idle member waits for a request between passes (its heartbeats and the
/// others' messages are served at least this often).
const IDLE_WAIT: Duration = Duration::from_micros(100);

impl Run {
    fn run(mut self) {
        let failed = Failed((0..self.n).map(|_| std::cell::Cell::new(false)).collect());
        let mut reported = vec![false; self.n as usize];
        let mut stops = Vec::new();
        let (tx, rx) = mpsc::channel();
        while !self.flags.stop.load(Ordering::Acquire) {
            while let Ok(v) = self.requests.try_recv() {
                self.agreements.agree(self.rank, v);
            }
            let progress = self.agreements.step(Instant::now(), &tx, &failed, &mut stops);
            for (r, by) in stops.drain(..) {
                if r == self.rank {
                    self.flags.fenced_by.store(by.unwrap_or(self.rank), Ordering::Release);
                }
                report(&mut reported, r, &self.events);
            }
            for ev in rx.try_iter() {
                if let Event::Agreed { failed: f, .. } = &ev {
                    if f.contains(&self.rank) {
                        // The group agreed this member failed (a peer suspected it, and the
                        // decision came before the peer's FENCE): it stops as if fenced, and
                        // the decision is not its to return.
                        self.flags
                            .fenced_by
                            .compare_exchange(NOT_FENCED, self.rank, Ordering::AcqRel, Ordering::Acquire)
                            .ok();
                        failed.claim(self.rank, None);
                        report(&mut reported, self.rank, &self.events);
                        break;
                    }
                    // ERA agreed these failed: every member that returns reports them.
                    for &r in f {
                        failed.claim(r, None);
                        report(&mut reported, r, &self.events);
                    }
                }
                let _ = self.events.send(ev);
            }
            if failed.is_stopped(self.rank) {
                // Fenced: its endpoint closed in the step; nothing more to do.
                break;
            }
            if !progress {
                if self.agreements.active() {
                    std::thread::yield_now();
                } else if let Ok(v) = self.requests.recv_timeout(IDLE_WAIT) {
                    self.agreements.agree(self.rank, v);
                }
            }
        }
    }
}

/// Reports rank `r` failed once.
fn report(reported: &mut [bool], r: u32, events: &mpsc::Sender<Event>) {
    if !std::mem::replace(&mut reported[r as usize], true) {
        let _ = events.send(Event::Failed { rank: r });
    }
}

#[cfg(test)]
mod tests;
