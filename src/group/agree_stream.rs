//! A closed loop of agreements ([`Group::agree_stream`]): every member enters its next
//! agreement the moment its last one returned, contributing a word made from the seed, its
//! rank and the agreement's id (`runtime::agree::contribution`, whose continue bit ends a
//! timed stream at every member alike), as ULFM's `benchagree` does; the members die where
//! the stream's kills say, and every return is classed online into the §5.1 window
//! (failure-free, failure-detecting, stabilizing, post-failure). The same run, numbers and
//! checks as `ftcoll agree` (whose local run is such a stream).
//!
//! The stream's members are `runtime::agree`'s nodes — ERA on the generic node loop with the
//! heartbeat failure detector over ERA's tree neighbours — over endpoints of their own,
//! opened per stream on the group's transport, so its agreements are numbered from 0 and
//! never meet the group's own ([`Group::agree`]). Member `r` is stepped by the group's worker
//! `r % W`, started together with the others behind a barrier, its buffers settled in its
//! worker's memory; while a stream runs its workers do the group's own work only once every
//! few passes and never sleep.

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use super::shared::AgreeShare;
use super::{Group, GroupBuilder, GroupError};
use crate::protocol::Rank;
use crate::protocol::agree::EraConfig;
use crate::runtime::TransportKind;
use crate::runtime::agree::{AgreeBench, AgreeBenchReport, AgreeTransport, Stall};

/// A closed loop of agreements among all of the group's members; see
/// [`Group::agree_stream`].
#[derive(Clone, Debug)]
pub struct AgreeStream {
    /// Measured agreements (ignored with `duration`); the report counts the warmup too.
    pub agreements: u64,
    /// Agreements run first and not measured.
    pub warmup: u64,
    /// Run until this much time is up instead of for `agreements`.
    pub duration: Option<Duration>,
    /// `(rank, i)`: the member dies instead of entering measured agreement `i`.
    pub kills: Vec<(Rank, u64)>,
    /// Live members that stop for a while.
    pub stalls: Vec<Stall>,
    /// ERA's settings (tree, window of agreements in flight).
    pub era: EraConfig,
    /// The stream is abandoned when no agreement returns anywhere for this long.
    pub op_timeout: Duration,
}

impl AgreeStream {
    /// `agreements` agreements, no warmup, no failures, ERA's defaults, abandoned after 30 s
    /// without a return.
    pub fn new(agreements: u64) -> Self {
        AgreeStream {
            agreements,
            warmup: 0,
            duration: None,
            kills: Vec::new(),
            stalls: Vec::new(),
            era: EraConfig::default(),
            op_timeout: Duration::from_secs(30),
        }
    }
}

/// What a stream takes from the group's settings.
#[derive(Clone, Copy, Debug)]
pub(super) struct Settings {
    transport: AgreeTransport,
    pin: bool,
    seed: u64,
    heartbeat: Duration,
    suspect_after: Duration,
}

impl Settings {
    pub(super) fn of(b: &GroupBuilder) -> Self {
        Settings {
            transport: match b.transport {
                TransportKind::Inproc => AgreeTransport::Inproc,
                TransportKind::Udp => AgreeTransport::Udp,
                TransportKind::Verbs => AgreeTransport::Verbs,
            },
            pin: b.pin,
            seed: b.seed,
            heartbeat: b.heartbeat_period(),
            suspect_after: b.suspect_after,
        }
    }
}

impl Group {
    /// Runs a closed loop of agreements among the group's members on its workers, with its
    /// transport, seed and failure detector, and returns what was measured: each class's
    /// latencies (entry to return, per member and to the last live member's return),
    /// disagreements and invalid values (both must be 0), suspicions and false ones, from a
    /// kill to the first suspicion and to the first successful agreement after it, messages
    /// per agreement, and the stream's transport and drop counters. Every member must be
    /// alive. The caller's own agreements ([`Group::agree`]) cannot be asked for while a
    /// stream runs (it holds the group), and those in flight go on beside it.
    ///
    /// ```
    /// use ftcoll::group::{AgreeStream, Group};
    ///
    /// let mut group = Group::builder(4).broadcasts(false).agreements(false).build()?;
    /// let r = group.agree_stream(AgreeStream { warmup: 10, ..AgreeStream::new(100) })?;
    /// assert_eq!((r.agreements, r.disagreements, r.invalid, r.unfinished), (110, 0, 0, 0));
    /// # Ok::<(), ftcoll::group::GroupError>(())
    /// ```
    pub fn agree_stream(&mut self, s: AgreeStream) -> Result<AgreeBenchReport, GroupError> {
        if let Some(r) = (0..self.n).find(|&r| self.is_dead(r)) {
            return Err(self.member(r).err().unwrap_or(GroupError::Dead(r)));
        }
        // As a `Stream` of no operations is refused: such a stream waited `op_timeout` for an
        // agreement that never came and returned nothing measured.
        if s.agreements == 0 && s.duration.is_none() {
            return Err(GroupError::BadStream("no agreements".into()));
        }
        let c = self.agree_cfg;
        let b = AgreeBench {
            n: self.n,
            era: s.era,
            transport: c.transport,
            workers: self.workers,
            pin: c.pin,
            warmup: s.warmup,
            iterations: s.agreements,
            duration: s.duration,
            kills: s.kills,
            stalls: s.stalls,
            heartbeat: c.heartbeat,
            suspect_after: c.suspect_after,
            op_timeout: s.op_timeout,
            seed: c.seed,
        };
        let run = crate::runtime::agree::prepare(&b).map_err(GroupError::BadStream)?;
        let (shares, finish) = run.split(self.workers);
        let mut parts = shares.len();
        let (tx, rx) = mpsc::channel();
        *self.shared.agree_shares.lock().expect("not poisoned") = shares
            .into_iter()
            .map(|worker| {
                Some(AgreeShare {
                    worker,
                    back: tx.clone(),
                })
            })
            .collect();
        drop(tx);
        self.shared.agree_asks.fetch_add(1, Ordering::AcqRel);
        let mut nodes = Vec::with_capacity(self.n as usize);
        while parts > 0 {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(share) => {
                    nodes.extend(share);
                    parts -= 1;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(GroupError::Closed),
                // (Shares not taken hold senders: a group whose thread is gone may never
                // disconnect.)
                Err(_) if self.thread.as_ref().is_none_or(|t| t.is_finished()) => return Err(GroupError::Closed),
                Err(_) => {}
            }
        }
        Ok(finish.finish(nodes))
    }
}

#[cfg(test)]
mod tests;
