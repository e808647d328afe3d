//! What a group tells its user: [`Event`]s, in the order the group's thread saw them.

/// What happened in the group, in the order the group's thread saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// `member` delivered broadcast `seq` of `root`, whose payload is `bytes` (once per
    /// member and broadcast; the root delivers its own).
    Delivered {
        member: u32,
        root: u32,
        seq: u64,
        bytes: Vec<u8>,
    },
    /// Broadcast `seq` of `root` is over: every live member delivered it, or it timed out
    /// (`timed_out`) before some did.
    Completed { root: u32, seq: u64, timed_out: bool },
    /// Member `rank` crashed (crash-stop: it sends and delivers nothing more): killed by
    /// [`Group::kill`](super::Group::kill), or fenced because a peer's transport or failure detector suspected
    /// it (fail-stop enforcement: see [`Group::fenced_by`](super::Group::fenced_by)). Reported once per member.
    Failed { rank: u32 },
    /// `member` returned from agreement `id` (its `id`-th [`Group::agree`](super::Group::agree), from 0): the AND
    /// of the live members' values, and the failed members agreed on (the same at every
    /// member that returns).
    Agreed {
        member: u32,
        id: u64,
        value: u64,
        failed: Vec<u32>,
    },
    /// A group of processes' `member` called broadcast `seq` naming `root`, and heard it
    /// from `heard`: the members named different roots for one collective broadcast (an
    /// error, as in MPI). Reported once per operation, at each member that hears the other
    /// root (its datagrams are dropped, counted in `MemberCounters::root_mismatch`); a
    /// member that heard `heard` first delivered its bytes before its call named `root`.
    /// The operation is over as usual ([`Event::Completed`]: timed out where nothing of the
    /// root followed came). Never reported within one process ([`Group::broadcast`](super::Group::broadcast) names
    /// its root once for all).
    RootMismatch {
        member: u32,
        seq: u64,
        root: u32,
        heard: u32,
    },
}
