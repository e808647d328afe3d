//! How a process joins its group of processes: [`MemberSpec`].

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::group::GroupError;
use crate::protocol::bcast::algo::Algo;
use crate::runtime::agree::{DEDICATED_HEARTBEAT, DEFAULT_SUSPECT_AFTER};
use crate::transport::udp::UdpConfig;
use crate::transport::udp::auth::AuthKey;

/// How a process joins its group: [`crate::group::Member::join`].
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
    /// `suspect_after` bounds the member's transports too: they retransmit to a silent peer
    /// for at least that long before they suspect it ([`MemberSpec::transport_retries`]), so
    /// that a longer bound (a loaded host, whose processes stall) is not undercut by theirs.
    pub heartbeat: Duration,
    pub suspect_after: Duration,
    /// The heartbeat period while this member has no agreement in flight, and how long its
    /// thread then sleeps between passes at most (a datagram on either socket, a timer of its
    /// transports or a call wakes it sooner) [default: `suspect_after / 8`, at least
    /// `heartbeat`; at most `suspect_after / 4`, so a peer beats at least four times in the
    /// silence that gets it suspected].
    pub idle_heartbeat: Option<Duration>,
    /// Broadcasts among the members ([`crate::group::Member::broadcast`]) on a second socket of
    /// each member's [default: on; every member must have the same]. Off: agreements only.
    pub broadcasts: bool,
    /// Agreement streams among the members ([`crate::group::Member::agree_stream`]: a
    /// closed loop of agreements, as `ftcoll agree` runs) on a socket of each member's own
    /// [default: off; every member must have the same].
    pub streams: bool,
    /// The broadcast algorithm [default: as a [`crate::group::Group`]'s, a binomial corrected
    /// tree with checked correction; every member must have the same].
    pub algo: Algo,
    /// The LogP overhead `o` and latency `L` the broadcast protocols count their waits in
    /// [default: 1 µs and 2 µs, as a group's]: rank 0's, which every member is given at the
    /// rendezvous.
    pub logp: (Duration, Duration),
    /// A broadcast that has not delivered and finished here after this is over here, timed
    /// out (its root failed before any copy reached this member, say) [default: 10 s].
    pub op_timeout: Duration,
    /// How long a member that leaves (dropped, as a process that exits) goes on sending until
    /// every message it sent has been acknowledged: an agreement's decision it returned is
    /// then known to its children too, as MPI's finalize lets queued messages out [default:
    /// 1 s, an upper bound: it ends as soon as nothing is left; zero leaves at once].
    pub linger: Duration,
    /// Probability that a datagram this member receives is dropped (loss injection on both
    /// of its sockets, to see its group recover by retransmission) [default: 0].
    pub loss: f64,
}

impl MemberSpec {
    /// The retransmissions of one datagram without an answer after which the member's
    /// transports may suspect the peer ([`UdpConfig::retries_for`] `suspect_after`):
    /// [`UdpConfig`]'s default (8, a suspicion after about 104 ms), or as many more as it
    /// takes for [`UdpConfig::suspicion_time`] from the smallest RTO to reach `suspect_after`.
    pub fn transport_retries(&self) -> u32 {
        UdpConfig::default().retries_for(self.suspect_after)
    }

    /// The idle heartbeat period: [`MemberSpec::idle_heartbeat`] or its default.
    pub fn idle_period(&self) -> Duration {
        self.idle_heartbeat
            .unwrap_or((self.suspect_after / 8).max(self.heartbeat))
    }

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
            idle_heartbeat: None,
            broadcasts: true,
            streams: false,
            algo: crate::group::default_algo(),
            logp: (Duration::from_micros(1), Duration::from_micros(2)),
            op_timeout: Duration::from_secs(10),
            linger: Duration::from_secs(1),
            loss: 0.0,
        }
    }
}
