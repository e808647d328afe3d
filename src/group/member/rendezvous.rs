//! A group of processes' rendezvous through rank 0 ([`super::Member::join`]): rank 0 serves
//! the address table and the run's parameters at the coordinator's address, and every member
//! joins it with its data sockets' addresses and the fingerprint of what it must share with
//! the others ([`GroupShape`]): rank 0 refuses a member with another, which then fails at
//! once naming both (admitted, it would decode none of the others' broadcasts, and only time
//! out).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Flags, MemberSpec};
use crate::runtime::board::Control;
use crate::runtime::control::ParentAgent;
use crate::runtime::control::child::{JoinAs, Joined};
use crate::runtime::join::JobParams;
use crate::wire::shape::GroupShape;

/// What every member of `spec`'s group must have the same: how many members (one started
/// with another count would join in another's place), whether it broadcasts, with which
/// algorithm, how many broadcasts in flight and payloads up to what (the one checked build of
/// the algorithm for `n` members: an impossible one is an error). Rank 0's LogP is not part
/// of it: every member is given rank 0's ([`MemberSpec::logp`]).
pub(super) fn shape_of(spec: &MemberSpec) -> Result<GroupShape, String> {
    if !spec.broadcasts {
        return Ok(GroupShape {
            members: spec.n,
            algo: None,
            in_flight: 0,
            max_payload: 0,
            streams: spec.streams,
        });
    }
    let max = crate::group::checks::max_payload_of(&spec.algo, spec.n)?;
    Ok(GroupShape {
        members: spec.n,
        algo: Some(spec.algo.clone()),
        in_flight: super::bcast::IN_FLIGHT as u32,
        max_payload: u32::try_from(max).unwrap_or(u32::MAX),
        streams: spec.streams,
    })
}

/// Rank 0's rendezvous: binds the coordinator's address and answers joins until `stop`;
/// refuses one that states another `shape` (the last refused rank goes to `flags.refused`),
/// and then has rank 0's own join give up (`flags.give_up`): the group cannot form, and rank
/// 0 fails at once naming the refused member instead of waiting for its timeout. With a key,
/// only a key holder's hello reaches the shape check (the control plane's challenge–response
/// comes first); without one, a forged hello with another shape now stops rank 0's join, as
/// a forged one with the same shape could already take a member's place (an unauthenticated
/// group trusts its network).
/// The rendezvous binds `at` (its port may be 0: the kernel's choice, returned with the
/// thread) and times its clock probes from `epoch`, which is `epoch_unix_ns` on the wall
/// clock: the group's common clock.
pub(super) fn serve_rendezvous(
    spec: &MemberSpec,
    shape: &GroupShape,
    job: u64,
    flags: Arc<Flags>,
    (at, epoch, epoch_unix_ns): (SocketAddr, Instant, u64),
) -> Result<(JoinHandle<Served>, SocketAddr), String> {
    let n = table_len(spec);
    let mut agent = ParentAgent::bind(at, job, n).map_err(|e| format!("cannot bind the coordinator at {at}: {e}"))?;
    let bound = agent
        .addr()
        .map_err(|e| format!("cannot read the coordinator's address: {e}"))?;
    agent.set_key(spec.key.clone());
    agent.set_shape(Some(shape.clone()));
    // Rank 0 may leave as soon as its own join returned: the others get the table at once.
    agent.set_table_to_all(true);
    let ns = |d: Duration| crate::group::nanos(d).max(1);
    agent
        .launch(JobParams {
            o_ns: ns(spec.logp.0),
            l_ns: ns(spec.logp.1),
            epoch_unix_ns,
            run: crate::transport::ids::run_nonce()?,
        })
        .map_err(|e| format!("cannot draw the coordinator's nonce: {e}"))?;
    let members = spec.n;
    std::thread::Builder::new()
        .name("ftcoll-rendezvous".into())
        .spawn(move || {
            let ctl = Control::new(n);
            let now_ns = || epoch.elapsed().as_nanos() as u64;
            while !flags.stop.load(Ordering::Acquire) {
                agent.serve(&ctl, &now_ns);
                if let Some(r) = agent.last_refused {
                    // A broadcast or stream socket joins as `k n + r`.
                    flags.refused.store(r % members, Ordering::Release);
                    flags.give_up.store(true, Ordering::Release);
                }
                agent.wait(Duration::from_millis(5));
            }
            // Members still joining (rank 0 leaves as soon as its own join returned, or its
            // join failed) get the table once more, or are told that none will come.
            agent.farewell();
            Served {
                clock_uncertainty_ns: agent.clocks.iter().flatten().map(|&(_, u)| u).max(),
                refused_hellos: agent.refused_hellos,
            }
        })
        .map(|t| (t, bound))
        .map_err(|e| format!("cannot start the rendezvous thread: {e}"))
}

/// Entries of the rendezvous table: each member's agreement socket, then (with broadcasts)
/// each member's broadcast socket, as ranks `n..2n`, then (with streams) each member's
/// stream socket, as the next `n` ranks ([`stream_base`]).
fn table_len(spec: &MemberSpec) -> u32 {
    stream_base(spec) + if spec.streams { spec.n } else { 0 }
}

/// Where the stream sockets' entries start in the rendezvous table.
pub(super) fn stream_base(spec: &MemberSpec) -> u32 {
    if spec.broadcasts { 2 * spec.n } else { spec.n }
}

/// What a join given up (the other socket's failed) says: the other's error is the one told.
const GIVEN_UP: &str = "given up";

/// This member's sockets, joined: agreements, broadcasts (with them), streams (with them).
pub(super) type JoinedAll = (Joined, Option<Joined>, Option<Joined>);

/// Joins rank 0's rendezvous with this member's agreement socket (as rank `r`) and, with
/// broadcasts, its broadcast socket (as rank `n + r`), with streams its stream socket (as
/// rank [`stream_base`]` + r`), at once: each join waits for the whole table, and all give up
/// as soon as one fails (rank 0 refused this member's `shape`) or `cancel` is set (rank 0's
/// rendezvous refused another member).
pub(super) fn join_all(
    spec: &MemberSpec,
    shape: &GroupShape,
    job: u64,
    cancel: Arc<AtomicBool>,
) -> Result<JoinedAll, String> {
    let n = table_len(spec);
    let how = JoinAs {
        coordinator: spec.coordinator,
        bind: spec.bind,
        job,
        key: spec.key.clone(),
        timeout: spec.timeout,
        shape: Some(shape.clone()),
        cancel: Some(cancel.clone()),
    };
    let join = |r| {
        let j = how.join(r, n);
        if j.is_err() {
            cancel.store(true, Ordering::Release);
        }
        j
    };
    if !spec.broadcasts && !spec.streams {
        return Ok((join(spec.rank)?, None, None));
    }
    let others = [
        spec.broadcasts.then_some(spec.n + spec.rank),
        spec.streams.then_some(stream_base(spec) + spec.rank),
    ];
    std::thread::scope(|s| {
        let others = others.map(|r| r.map(|r| s.spawn(move || join(r))));
        let a = join(spec.rank);
        let [b, c] =
            others.map(|h| h.map(|h| h.join().unwrap_or_else(|_| Err("a socket's join panicked".to_string()))));
        // The first error that is not another's giving up is the one told.
        let errors = [
            a.as_ref().err(),
            b.as_ref().and_then(|b| b.as_ref().err()),
            c.as_ref().and_then(|c| c.as_ref().err()),
        ];
        if let Some(e) = errors
            .iter()
            .flatten()
            .find(|e| !e.ends_with(GIVEN_UP))
            .or_else(|| errors.iter().flatten().next())
        {
            return Err((*e).clone());
        }
        Ok((a?, b.transpose()?, c.transpose()?))
    })
}

/// A rendezvous served by a process that is not a member (a launcher: `ftcoll agree
/// --procs`'s parent, whose node processes join it with [`super::Member::join_served`]), for
/// the group `spec` describes (its `n`, seed, key, shape and LogP; its rank and coordinator
/// are not used), at `at` (port 0: the kernel's choice, [`Rendezvous::addr`]), with the
/// common clock `epoch`, which is `epoch_unix_ns` on the wall clock. It serves until dropped,
/// then says farewell, as rank 0's does.
pub(crate) struct Rendezvous {
    addr: SocketAddr,
    flags: Arc<Flags>,
    thread: Option<JoinHandle<Served>>,
}

/// What a rendezvous saw, once it stopped serving.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Served {
    /// The largest uncertainty of a member's clock offset to the rendezvous's clock, ns
    /// (`None`: no member timed its clock).
    pub(crate) clock_uncertainty_ns: Option<u64>,
    /// Hellos refused as not sealed for this run (replayed or forged).
    pub(crate) refused_hellos: u64,
}

impl Rendezvous {
    pub(crate) fn start(spec: &MemberSpec, at: SocketAddr, epoch: Instant, epoch_unix_ns: u64) -> Result<Self, String> {
        let shape = shape_of(spec)?;
        let job = crate::transport::ids::members(spec.seed);
        let flags = Arc::new(Flags::new());
        let (thread, addr) = serve_rendezvous(spec, &shape, job, flags.clone(), (at, epoch, epoch_unix_ns))?;
        Ok(Rendezvous {
            addr,
            flags,
            thread: Some(thread),
        })
    }

    /// Where the members join.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving (after the farewell) and says what it saw.
    pub(crate) fn finish(mut self) -> Served {
        self.flags.stop.store(true, Ordering::Release);
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

impl Drop for Rendezvous {
    fn drop(&mut self) {
        self.flags.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
