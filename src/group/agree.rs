//! The group's agreements: one ERA instance per member (Herault et al., SC 2015) on a 64-bit
//! AND (`MPIX_Comm_agree`'s flag), each driven by the generic node loop
//! ([`crate::runtime::driver::Driver`]) with the framing of `ftcoll agree`'s nodes
//! ([`EraFraming`]) over endpoints of their own: the same codec, send queue and heartbeat
//! failure detector over ERA's tree neighbours (ERA §2).
//!
//! Members learn of a failure only as `ftcoll agree`'s nodes do: from their transport (a
//! send to a closed endpoint, retries exhausted, a port unreachable) or from their detector
//! (a neighbour silent for `suspect_after`). A crash ([`super::Group::kill`]) closes the
//! member's endpoint and nothing more. A suspicion is final: the group stops the suspected
//! member (fail-stop enforcement, as ULFM's runtime removes a process it suspects), so ERA's
//! detector stays accurate in the sense it needs (only dead processes are marked dead), and
//! ERA then agrees on the failed set as well as on the value (§3).
//!
//! The members are spread over the group's workers as its broadcast nodes are, member `r` on
//! worker `r % k` ([`Agreements::split`]): each worker steps its own members' ERA instances,
//! so an agreement's hops run in parallel on a machine with a core per worker, as ERA's
//! processes do (§4). The caller's values and the crashes reach a member's worker through
//! that worker's inbox ([`super::shared::Shared`]).

use std::collections::VecDeque;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::Event;
use crate::protocol::agree::{And64, Era, EraConfig};
use crate::protocol::{DetectorConfig, Event as Input, Machine, Rank};
use crate::runtime::Endpoints;
use crate::runtime::agree::EraFraming;
use crate::runtime::driver::Driver;

/// One member's side: its ERA and the node loop that drives it.
struct Member {
    era: Era<And64>,
    drv: Driver<EraFraming>,
    on_death: Option<Box<dyn FnMut() + Send>>,
    /// Values the user contributed that ERA's window has not taken yet.
    queued: VecDeque<u64>,
    /// Agreements ERA took from this member and has not returned yet.
    open: u32,
    /// Beating at the idle period ([`Agreements::idle_heartbeat`]) now.
    slow: bool,
}

/// Every member's ERA (`None`: stopped).
pub(super) struct Agreements {
    members: Vec<Option<Member>>,
    /// `(in flight, idle)`: a member with no agreement in flight heartbeats at the second
    /// period ([`Agreements::idle_heartbeat`]); `None`: always at the first.
    periods: Option<(Duration, Duration)>,
    #[cfg(test)]
    hang: Vec<Hang>,
}

/// Who is stopped, shared by every worker's members ([`super::shared::Shared`]): a member
/// stops at most once, and only a member that is not stopped itself can stop another, so two
/// members that suspect each other on different workers never both stop (the first claim
/// wins, as when one thread stepped them all).
pub(super) trait Stops {
    /// Is member `r` stopped (suspected, fenced, killed or failed)?
    fn is_stopped(&self, r: u32) -> bool;
    /// Stops `r` on `by`'s suspicion (`None`: on its own transport's fence, a kill or a
    /// failure); true if this call stopped it (not before, and `by` is not stopped).
    fn claim(&self, r: u32, by: Option<u32>) -> bool;
}

/// Tests: member `.0` stops being driven behind the group's back once `.1` is [`HUNG`] (its
/// endpoint stays open: a hung process) or [`CLOSED`] (its endpoint closes too: a process
/// that died without [`super::Group::kill`]).
#[cfg(test)]
pub(crate) type Hang = (u32, std::sync::Arc<std::sync::atomic::AtomicU8>);
#[cfg(test)]
pub(crate) const HUNG: u8 = 1;
#[cfg(test)]
pub(crate) const CLOSED: u8 = 2;

impl Agreements {
    /// Members over `eps` (job `job`), each with a heartbeat every `heartbeat` to its ERA tree
    /// neighbours, suspecting one silent for `suspect_after`.
    pub(super) fn new(
        eps: Endpoints,
        n: u32,
        job: u64,
        heartbeat: Duration,
        suspect_after: Duration,
    ) -> Result<Self, String> {
        let det = detector(heartbeat, suspect_after)?;
        let base = Instant::now();
        let members = eps
            .into_iter()
            .enumerate()
            .map(|(r, (tp, on_death))| Member::new(r as u32, n, tp, on_death, job, det, base).map(Some))
            .collect::<Result<_, String>>()?;
        Ok(Self {
            members,
            periods: None,
            #[cfg(test)]
            hang: Vec::new(),
        })
    }

    /// Member `rank` of `n` alone, over `tp` (one process's member of a group of processes,
    /// [`super::member`]); the other slots stay empty.
    pub(super) fn one(
        rank: u32,
        n: u32,
        tp: Box<dyn crate::transport::Transport>,
        job: u64,
        heartbeat: Duration,
        suspect_after: Duration,
    ) -> Result<Self, String> {
        let det = detector(heartbeat, suspect_after)?;
        let mut members: Vec<Option<Member>> = (0..n).map(|_| None).collect();
        members[rank as usize] = Some(Member::new(rank, n, tp, None, job, det, Instant::now())?);
        Ok(Self {
            members,
            periods: None,
            #[cfg(test)]
            hang: Vec::new(),
        })
    }

    /// Tests: see [`Hang`].
    #[cfg(test)]
    pub(super) fn with_hang(mut self, hang: Vec<Hang>) -> Self {
        self.hang = hang;
        self
    }

    /// The members of worker `w` of `k`, member `r` on worker `r % k` (the broadcast nodes'
    /// placement, [`crate::runtime::cluster::run_workers`]): one part per worker, each
    /// holding its members' slots (the others empty).
    pub(super) fn split(self, k: usize) -> Vec<Agreements> {
        let k = k.max(1);
        let n = self.members.len();
        let mut parts: Vec<Agreements> = (0..k)
            .map(|_| Agreements {
                members: (0..n).map(|_| None).collect(),
                periods: self.periods,
                #[cfg(test)]
                hang: self.hang.clone(),
            })
            .collect();
        for (r, m) in self.members.into_iter().enumerate() {
            parts[r % k].members[r] = m;
        }
        parts
    }

    /// The members this part steps (live or not), in rank order.
    #[cfg(test)]
    pub(super) fn ranks(&self) -> Vec<u32> {
        (0..self.members.len() as u32)
            .filter(|&r| self.members[r as usize].is_some())
            .collect()
    }

    /// Does a member of this part have an agreement in flight (asked for and not returned)?
    /// Its worker then waits for the other workers' members' messages without sleeping.
    pub(super) fn active(&self) -> bool {
        self.members
            .iter()
            .flatten()
            .any(|m| m.open > 0 || !m.queued.is_empty())
    }

    /// Member `r` learned elsewhere that `peer` failed (an agreement decided it): its
    /// transport enforces it (fail-stop) and its ERA hears it, as of its own suspicions.
    pub(super) fn suspect(&mut self, r: u32, peer: u32, now: Instant) {
        if let Some(m) = self.members[r as usize].as_mut() {
            m.drv.suspect(peer, now);
        }
    }

    /// The members are leaving (a process about to close its endpoints): from now on what
    /// their ERA sends is marked by their drivers ([`Driver::leave`]), to be waited for
    /// ([`Agreements::flushed`]); they go on
    /// receiving, answering and heartbeating (a member that leaves is alive until it closes:
    /// its parent's silence must not make a child that still waits for its DOWN suspect it).
    pub(super) fn leave(&mut self) {
        for m in self.members.iter_mut().flatten() {
            m.drv.leave();
        }
    }

    /// Every live member's ERA messages were acknowledged (or their peers suspected) and none
    /// waits to be sent (heartbeats sent since are not waited for).
    pub(super) fn flushed(&self) -> bool {
        self.members.iter().flatten().all(|m| m.drv.flushed_to_mark())
    }

    /// A member with no agreement in flight heartbeats every `idle` instead of every
    /// `heartbeat` (a process that embeds a member and does not agree for a while should not
    /// spend a core on its detector: its neighbours suspect it only after `suspect_after`
    /// anyway, which `idle` must stay well below); back at `heartbeat` from its next call.
    pub(super) fn idle_heartbeat(mut self, heartbeat: Duration, idle: Duration) -> Self {
        self.periods = Some((heartbeat, idle));
        self
    }

    /// The members' peers start independently of them (processes, each starting its member
    /// when it has the group's table) within `within` from now: until then a member's
    /// detector does not suspect a neighbour it has not heard from yet, which may still be
    /// starting ([`Driver::expect_starts`]); one that went silent after it spoke is
    /// suspected as ever.
    pub(super) fn expecting_starts(mut self, within: Duration) -> Self {
        let now = Instant::now();
        for m in self.members.iter_mut().flatten() {
            m.drv.expect_starts(now, within);
        }
        self
    }

    /// For a thread that waits on its single member's endpoint beside others: its descriptor
    /// and when its timers are due ([`crate::transport::Transport::readiness`]).
    pub(super) fn readiness(&self) -> Option<(std::os::fd::BorrowedFd<'_>, Option<Instant>)> {
        self.members.iter().flatten().next().and_then(|m| m.drv.tp.readiness())
    }

    /// Member `r`'s transport's counters (zero once it stopped).
    pub(super) fn transport_stats(&self, r: u32) -> crate::transport::TransportStats {
        self.members[r as usize]
            .as_ref()
            .map(|m| m.drv.tp.stats())
            .unwrap_or_default()
    }

    /// Member `r` enters its next agreement with `value`.
    pub(super) fn agree(&mut self, r: u32, value: u64) {
        if let Some(m) = self.members[r as usize].as_mut() {
            m.queued.push_back(value);
        }
    }

    /// One pass of every live member: receive, suspicions to ERA, heartbeats, send, report
    /// what returned; true if anything happened (heartbeats alone do not count). A member
    /// this pass stops (`stops.claim`) is added to `stop` with the member that made it stop:
    /// one whose endpoint was fenced by a peer's transport, and one that a member's transport
    /// or detector suspected (the caller reports it and stops it in the broadcasts). A
    /// stopped member, whoever stopped it, is closed before its next step; it neither sends
    /// nor returns once stopped.
    pub(super) fn step(
        &mut self,
        now: Instant,
        events: &mpsc::Sender<Event>,
        stops: &dyn Stops,
        stop: &mut Vec<(u32, Option<u32>)>,
    ) -> bool {
        let mut progress = false;
        for (r, slot) in self.members.iter_mut().enumerate() {
            let r = r as Rank;
            #[cfg(test)]
            if let Some((_, mode)) = self.hang.iter().find(|(h, _)| *h == r) {
                match mode.load(std::sync::atomic::Ordering::Acquire) {
                    HUNG => continue,
                    CLOSED => *slot = None,
                    _ => {}
                }
            }
            if slot.is_some() && stops.is_stopped(r) {
                // Stopped (killed, failed, or suspected here or on another worker): its
                // endpoint closes now, and the others' transports or detectors notice, as
                // they would a process that died.
                if let Some(mut m) = slot.take()
                    && let Some(f) = m.on_death.as_mut()
                {
                    f();
                }
                continue;
            }
            let Some(m) = slot.as_mut() else { continue };
            while let Some(&v) = m.queued.front() {
                if m.era.handle(0, Input::Input(And64(v))).is_err() {
                    break;
                }
                m.queued.pop_front();
                m.open += 1;
                progress = true;
            }
            progress |= m.drv.receive(&mut m.era, now);
            if let Some(by) = m.drv.fenced_by() {
                // A peer's transport suspected this member and fenced it: it crashes.
                if stops.claim(r, None) {
                    stop.push((r, Some(by)));
                }
                continue;
            }
            suspicions(m, r, stops, stop);
            if let Some((busy, idle)) = self.periods {
                let slow = m.open == 0 && m.queued.is_empty();
                if slow != m.slow {
                    m.slow = slow;
                    m.drv.set_heartbeat(if slow { idle } else { busy });
                }
            }
            let era = &mut m.era;
            m.drv.detect(now, |nb| era.neighbours(nb));
            progress |= suspicions(m, r, stops, stop);
            progress |= m.drv.transmit(&mut m.era, now, || !stops.is_stopped(r));
            while let Some(o) = m.era.poll_output() {
                progress = true;
                m.open = m.open.saturating_sub(1);
                if stops.is_stopped(r) {
                    // Stopped meanwhile by a member on another worker: it returns nothing more.
                    continue;
                }
                let _ = events.send(Event::Agreed {
                    member: r,
                    id: o.id,
                    value: o.value.0,
                    failed: o.failed.as_slice().to_vec(),
                });
            }
        }
        progress
    }
}

/// The failure detector of every member: a heartbeat every `heartbeat`, suspicion after
/// `suspect_after` of silence.
fn detector(heartbeat: Duration, suspect_after: Duration) -> Result<DetectorConfig, String> {
    if heartbeat.is_zero() || suspect_after <= heartbeat {
        return Err(format!(
            "the failure detector's heartbeat ({heartbeat:?}) must be positive and below suspect_after ({suspect_after:?})"
        ));
    }
    Ok(DetectorConfig {
        heartbeat: super::nanos(heartbeat),
        suspect_after: super::nanos(suspect_after),
    })
}

impl Member {
    fn new(
        r: u32,
        n: u32,
        tp: Box<dyn crate::transport::Transport>,
        on_death: Option<Box<dyn FnMut() + Send>>,
        job: u64,
        det: DetectorConfig,
        base: Instant,
    ) -> Result<Self, String> {
        Ok(Member {
            era: Era::new(r, n, EraConfig::default())?,
            drv: Driver::new(tp, job, det, base),
            on_death,
            queued: VecDeque::new(),
            open: 0,
            slow: false,
        })
    }
}

/// Hands member `r`'s suspicions to its ERA and stops each suspect (unless it is stopped
/// already, or `r` is: then `r`'s suspicion stops no one); whether there were any.
fn suspicions(m: &mut Member, r: Rank, stops: &dyn Stops, stop: &mut Vec<(u32, Option<u32>)>) -> bool {
    let mut any = false;
    while let Some((peer, _)) = m.drv.poll_suspect() {
        any = true;
        _ = m.era.handle(0, Input::Suspect(peer));
        if stops.claim(peer, Some(r)) {
            stop.push((peer, Some(r)));
        }
    }
    any
}
