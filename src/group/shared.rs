//! What a group's workers and its caller share ([`Shared`]): who is stopped and who fenced
//! whom, the crashes asked for, each worker's inbox of agreement values, and the hand-over of
//! a stream's counters and an agreement stream's shares.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, mpsc};

use super::FencedBy;
use super::agree::Stops;
use super::stream::Reply;
use crate::runtime::agree::{AgreeWorker, Node as AgreeNode};

/// What the workers and the caller share.
pub(super) struct Shared {
    /// Who fenced each member.
    pub(super) fenced: FencedBy,
    /// Crashes asked for (by rank), done by the member's worker.
    pub(super) crash: Vec<AtomicBool>,
    /// Bumped whenever a crash is asked for (a worker looks at `crash` only then).
    pub(super) crash_asks: AtomicU64,
    /// Each worker's inbox for its agreement members: the caller's values, in the order they
    /// came (a member that stops is closed by its worker on seeing `stopped`).
    pub(super) inboxes: Vec<Inbox>,
    /// The group has broadcast nodes; without them a member is stopped where its suspicion
    /// is seen, not by its broadcast node's worker.
    pub(super) bcasts: bool,
    /// Members stopped (suspected, fenced, killed, failed), claimed under `claims` (see
    /// [`Stops`]).
    pub(super) stopped: Vec<AtomicBool>,
    pub(super) claims: Mutex<()>,
    /// Bumped when a stream is over: every worker then sends its members' counters to
    /// `reply`.
    pub(super) collect: AtomicU64,
    pub(super) reply: Mutex<Option<mpsc::Sender<Reply>>>,
    /// A stream is running (idle workers wait as the pool's poll mode says, not as an idle
    /// group's).
    pub(super) streaming: AtomicBool,
    /// An agreement stream's shares, by worker: each worker takes its own when
    /// `agree_asks` moves.
    pub(super) agree_shares: Mutex<Vec<Option<AgreeShare>>>,
    pub(super) agree_asks: AtomicU64,
    /// Tests: which ranks each worker stepped, per agreement stream.
    #[cfg(test)]
    pub(super) placed: Mutex<Vec<(usize, Vec<u32>)>>,
    /// Tests: which agreement members each worker steps (recorded at its first pass).
    #[cfg(test)]
    pub(super) placed_agree: Mutex<Vec<(usize, Vec<u32>)>>,
}

impl Stops for Shared {
    fn is_stopped(&self, r: u32) -> bool {
        self.stopped[r as usize].load(Ordering::Acquire)
    }

    fn claim(&self, r: u32, by: Option<u32>) -> bool {
        let _one_at_a_time = self.claims.lock().expect("not poisoned");
        if by.is_some_and(|b| self.is_stopped(b)) {
            return false;
        }
        !self.stopped[r as usize].swap(true, Ordering::AcqRel)
    }
}

/// One worker's inbox (see [`Shared::inboxes`]).
#[derive(Default)]
pub(super) struct Inbox {
    /// `(member, value)`: the member enters its next agreement with the value.
    items: Mutex<Vec<(u32, u64)>>,
    /// Set after each push, cleared by the worker before it takes the items.
    any: AtomicBool,
}

/// One worker's share of an agreement stream, and where its nodes go back once it is over.
pub(super) struct AgreeShare {
    pub(super) worker: AgreeWorker,
    pub(super) back: mpsc::Sender<Vec<AgreeNode>>,
}

impl Shared {
    /// For `n` members on `workers` workers, with broadcast nodes or not.
    pub(super) fn new(n: u32, workers: usize, bcasts: bool) -> Self {
        Shared {
            fenced: FencedBy::new(n),
            crash: (0..n).map(|_| AtomicBool::new(false)).collect(),
            crash_asks: AtomicU64::new(0),
            inboxes: (0..workers.max(1)).map(|_| Inbox::default()).collect(),
            bcasts,
            stopped: (0..n).map(|_| AtomicBool::new(false)).collect(),
            claims: Mutex::new(()),
            collect: AtomicU64::new(0),
            reply: Mutex::new(None),
            streaming: AtomicBool::new(false),
            agree_shares: Mutex::new(Vec::new()),
            agree_asks: AtomicU64::new(0),
            #[cfg(test)]
            placed: Mutex::new(Vec::new()),
            #[cfg(test)]
            placed_agree: Mutex::new(Vec::new()),
        }
    }

    /// Asks member `r`'s worker to crash it.
    pub(super) fn ask_crash(&self, r: u32) {
        self.crash[r as usize].store(true, Ordering::Release);
        self.crash_asks.fetch_add(1, Ordering::AcqRel);
    }

    /// Hands `value` to member `r`'s worker.
    pub(super) fn tell(&self, r: u32, value: u64) {
        let inbox = &self.inboxes[r as usize % self.inboxes.len()];
        inbox.items.lock().expect("not poisoned").push((r, value));
        inbox.any.store(true, Ordering::Release);
    }

    /// Stops member `r` for good whatever stopped it (a kill, a failure): its worker closes
    /// its agreement endpoint before its next step, and no suspicion of it stops or fences
    /// it after this.
    pub(super) fn stop(&self, r: u32) {
        self.claim(r, None);
    }

    /// Worker `w`'s items, if any, in the order they came.
    pub(super) fn take(&self, w: usize, into: &mut Vec<(u32, u64)>) {
        let inbox = &self.inboxes[w];
        if inbox.any.load(Ordering::Relaxed) && inbox.any.swap(false, Ordering::AcqRel) {
            into.append(&mut inbox.items.lock().expect("not poisoned"));
        }
    }
}

#[cfg(test)]
mod tests;
