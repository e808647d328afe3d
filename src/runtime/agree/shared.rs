//! What the nodes of one process share in an agreement run (`ftcoll agree`): the run's clock
//! base, who is dead and from which agreement on their returns do not count, the returns
//! handed over and the online window that classes them (none in a node process, which streams
//! its returns to the process that classes them), and a node process's reports of its crash
//! and of the returns left out.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::protocol::Rank;
use crate::protocol::agree::AgreeId;
use crate::runtime::agree_window::{Rec, Window};
use crate::transport::inproc::InprocNet;

/// One node's returns, handed over at once.
type Batch = (Rank, Vec<(AgreeId, Rec)>);

/// What the nodes of one process share.
pub(crate) struct Shared {
    pub(super) base: Instant,
    pub(super) dead: Vec<AtomicBool>,
    pub(super) finished: AtomicU64,
    pub(super) live: AtomicU64,
    pub(super) last_return: AtomicU64,
    pub(super) abort: AtomicBool,
    pub(super) kill_ns: AtomicU64,
    pub(super) inproc: Option<InprocNet>,
    /// Per node: the first agreement whose return of it does not count ([`Window`]): the one
    /// before its death (its decision may not have spread), `u64::MAX` while it lives.
    pub(super) dead_from: Vec<AtomicU64>,
    /// Batches of returns handed over and not yet folded into `window`, in order.
    pub(super) handoff: Mutex<VecDeque<Batch>>,
    /// `None` in a node process ([`Shared::streaming`]) until its first use, which does not
    /// come: the process streams its returns to the one that classes them.
    pub(super) window: Mutex<Option<Window>>,
    /// [`Window::new`]'s warm-up and kill.
    pub(super) window_of: (u64, Option<AgreeId>),
    /// A node process (`--procs`, `--join`): a kill is a real SIGKILL of the process, first
    /// announced (with its time) by this, which may wait for the SIGKILL or return to have the
    /// process kill itself.
    pub(crate) on_crash: Option<CrashReport>,
    /// A node process: every [`Shared::mark_dead`] is also told to the process that classes
    /// the returns (whose window leaves them out as this process's would).
    pub(crate) on_left_out: Option<LeftOutReport>,
    /// Each worker's timed passes, handed over when its share ends
    /// ([`super::AgreeWorker`]): what a visit of an idle node costs.
    pub(super) idle: Mutex<Vec<crate::runtime::cluster::IdlePasses>>,
}

/// The run's [`Window`], locked ([`Shared::window`]).
pub(crate) struct WindowGuard<'a>(MutexGuard<'a, Option<Window>>);

impl std::ops::Deref for WindowGuard<'_> {
    type Target = Window;
    fn deref(&self) -> &Window {
        self.0.as_ref().expect("built by Shared::built")
    }
}

impl std::ops::DerefMut for WindowGuard<'_> {
    fn deref_mut(&mut self) -> &mut Window {
        self.0.as_mut().expect("built by Shared::built")
    }
}

/// How a node process tells that node `r`'s returns from agreement `from` on do not count.
pub(crate) type LeftOutReport = Box<dyn Fn(Rank, AgreeId) + Send + Sync>;

/// How a node process announces its injected crash: `(rank, time ns, its returns not yet
/// reported but the last)`.
pub(crate) type CrashReport = Box<dyn Fn(Rank, u64, &[(AgreeId, Rec)]) + Send + Sync>;

impl Shared {
    pub(crate) fn new(base: Instant, n: u32, warmup: u64, kill_id: Option<AgreeId>) -> Self {
        Self::with_window(base, n, (warmup, kill_id), Some(Window::new(warmup, kill_id)))
    }

    /// A node process's (`--procs`, `--join`): its returns go to the process that classes
    /// them ([`crate::runtime::agree_stream`]), so it holds no [`Window`] (built if it is ever
    /// asked for). The window's eight histograms (2 MiB, zeroed page by page) would be most of
    /// the process's private memory, which its SIGKILL unmaps before the kernel closes its
    /// socket, the moment its peers can notice the crash (docs/measurements.md, "A lean node
    /// process dies sooner").
    pub(crate) fn streaming(base: Instant, n: u32, warmup: u64, kill_id: Option<AgreeId>) -> Self {
        Self::with_window(base, n, (warmup, kill_id), None)
    }

    fn with_window(base: Instant, n: u32, window_of: (u64, Option<AgreeId>), window: Option<Window>) -> Self {
        Self {
            base,
            dead: (0..n).map(|_| AtomicBool::new(false)).collect(),
            finished: AtomicU64::new(0),
            live: AtomicU64::new(u64::from(n)),
            last_return: AtomicU64::new(0),
            abort: AtomicBool::new(false),
            kill_ns: AtomicU64::new(u64::MAX),
            inproc: None,
            dead_from: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
            handoff: Mutex::new(VecDeque::new()),
            window: Mutex::new(window),
            idle: Mutex::new(Vec::new()),
            window_of,
            on_crash: None,
            on_left_out: None,
        }
    }

    /// When this process's node died where the run's kills said, if one did.
    pub(crate) fn kill_ns(&self) -> Option<u64> {
        let k = self.kill_ns.load(Ordering::Acquire);
        (k != u64::MAX).then_some(k)
    }

    pub(crate) fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.base).as_nanos() as u64
    }

    pub(crate) fn window(&self) -> WindowGuard<'_> {
        self.built(self.window.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn built<'a>(&self, mut g: MutexGuard<'a, Option<Window>>) -> WindowGuard<'a> {
        if g.is_none() {
            *g = Some(Window::new(self.window_of.0, self.window_of.1));
        }
        WindowGuard(g)
    }

    /// Node `r` is dead; its returns from agreement `from` on do not count.
    pub(super) fn mark_dead(&self, r: Rank, from: AgreeId) {
        let before = self.dead_from[r as usize].fetch_min(from, Ordering::AcqRel);
        if from < before
            && let Some(tell) = &self.on_left_out
        {
            tell(r, from);
        }
    }

    /// Whether node `r`'s return of agreement `id` counts ([`Window`]'s `dead`).
    pub(super) fn left_out(&self, r: Rank, id: AgreeId) -> bool {
        id >= self.dead_from[r as usize].load(Ordering::Acquire)
    }

    /// Folds the batches handed over so far, unless another node is at it (`wait`: wait for
    /// it, then fold what is left).
    pub(super) fn fold(&self, wait: bool) {
        let mut w = if wait {
            self.window()
        } else {
            match self.window.try_lock() {
                Ok(w) => self.built(w),
                Err(std::sync::TryLockError::Poisoned(e)) => self.built(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => return,
            }
        };
        loop {
            let next = self.handoff.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
            let Some((rank, batch)) = next else { break };
            for (id, rec) in batch {
                w.record(rank, id, rec, &|r, i| self.left_out(r, i));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn a_node_process_tells_each_earlier_cutoff_once() {
        let told = Arc::new(Mutex::new(Vec::new()));
        let mut sh = Shared::new(Instant::now(), 4, 0, None);
        let t = told.clone();
        sh.on_left_out = Some(Box::new(move |r, from| t.lock().unwrap().push((r, from))));
        sh.mark_dead(2, 5);
        sh.mark_dead(2, 7);
        sh.mark_dead(2, 5);
        sh.mark_dead(2, 3);
        sh.mark_dead(1, 9);
        assert_eq!(*told.lock().unwrap(), [(2, 5), (2, 3), (1, 9)]);
        assert!(sh.left_out(2, 3) && !sh.left_out(2, 2) && !sh.left_out(0, 100));
    }
}
