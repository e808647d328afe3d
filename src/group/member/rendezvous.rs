//! A group of processes' rendezvous through rank 0 ([`super::Member::join`]): rank 0 serves
//! the address table and the run's parameters at the coordinator's address, and every member
//! joins it with its data sockets' addresses.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Flags, MemberSpec};
use crate::runtime::board::Control;
use crate::runtime::control::ParentAgent;
use crate::runtime::control::child::{Joined, join_with_socket};
use crate::runtime::join::JobParams;

/// Rank 0's rendezvous: binds the coordinator's address and answers joins until `stop`.
pub(super) fn serve_rendezvous(spec: &MemberSpec, job: u64, flags: Arc<Flags>) -> Result<JoinHandle<()>, String> {
    let n = table_len(spec);
    let mut agent = ParentAgent::bind(spec.coordinator, job, n)
        .map_err(|e| format!("cannot bind the coordinator at {}: {e}", spec.coordinator))?;
    agent.set_key(spec.key.clone());
    let (epoch, epoch_unix_ns) = (Instant::now(), crate::runtime::procs::unix_ns());
    let ns = |d: Duration| crate::group::nanos(d).max(1);
    agent
        .launch(JobParams {
            o_ns: ns(spec.logp.0),
            l_ns: ns(spec.logp.1),
            epoch_unix_ns,
            run: crate::transport::ids::run_nonce()?,
        })
        .map_err(|e| format!("cannot draw the coordinator's nonce: {e}"))?;
    std::thread::Builder::new()
        .name("ftcoll-rendezvous".into())
        .spawn(move || {
            let ctl = Control::new(n);
            let now_ns = || epoch.elapsed().as_nanos() as u64;
            while !flags.stop.load(Ordering::Acquire) {
                agent.serve(&ctl, &now_ns);
                agent.wait(Duration::from_millis(5));
            }
            // Members still joining (rank 0 leaves as soon as its own join returned, or its
            // join failed) get the table once more, or are told that none will come.
            agent.farewell();
        })
        .map_err(|e| format!("cannot start the rendezvous thread: {e}"))
}

/// Entries of the rendezvous table: each member's agreement socket, then (with broadcasts)
/// each member's broadcast socket, as ranks `n..2n`.
fn table_len(spec: &MemberSpec) -> u32 {
    if spec.broadcasts { 2 * spec.n } else { spec.n }
}

/// Joins rank 0's rendezvous with this member's agreement socket (as rank `r`) and, with
/// broadcasts, its broadcast socket (as rank `n + r`) at once: each join waits for the whole
/// table.
pub(super) fn join_both(spec: &MemberSpec, job: u64) -> Result<(Joined, Option<Joined>), String> {
    let n = table_len(spec);
    let join = |r| join_with_socket(spec.coordinator, spec.bind, job, r, n, spec.key.clone(), spec.timeout);
    if !spec.broadcasts {
        return Ok((join(spec.rank)?, None));
    }
    std::thread::scope(|s| {
        let b = s.spawn(|| join(spec.n + spec.rank));
        let a = join(spec.rank);
        let b = b
            .join()
            .map_err(|_| "the broadcast socket's join panicked".to_string())?;
        Ok((a?, Some(b?)))
    })
}
