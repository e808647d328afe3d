//! BFB: Buntinas' fault-tolerant broadcast (Corrected Gossip §IV.B.2), the restarting baseline.
//!
//! The root disseminates along a binomial tree over its current *live view*: the ranks not in
//! its excluded set, numbered by position. Tree messages carry the epoch, the excluded set and
//! the range of positions the receiver is responsible for ("each message contains the
//! information about the children in the next levels"), so every receiver computes its own
//! children. Leaves acknowledge to their parent, inner nodes once all their children have; the
//! root is done when all its children have acknowledged. A process whose child is suspected by
//! the failure detector sends NACK(epoch, dead rank) toward the root at once (inner processes
//! forward it); the root, on a NACK of its current epoch, excludes the dead rank, increments
//! the epoch and restarts the whole operation on the smaller tree. Messages of older epochs are
//! ignored; a process delivers on its first tree message of any epoch and re-forwards in every
//! newer epoch.
//!
//! The tree over positions `[lo, hi)` is the in-order binomial tree: the process at `lo` sends
//! to `mid = lo + ⌈(hi − lo)/2⌉` (responsible for `[mid, hi)`), then halves `[lo, mid)` the
//! same way, so its first child has the largest subtree. Fault-free with `N = 2^k`, the last
//! process is colored at `k(2o + L)` and the root has every acknowledgment at
//! `T_BFB = 2(2o + L)·k` ([`BfbShared::t_bfb`]); `2(N − 1)` messages for any `N`.
//!
//! **Any number of failures** ("this algorithm supports an arbitrary number of failures",
//! §IV.B.2): the excluded set grows up to `N − 1` ranks. Messages have a fixed size (they are
//! `Copy` and fit a datagram), so the set travels as a *log*: the root appends the ranks of
//! each restart (sorted within the restart) to an append-only log, and every process holds a
//! prefix of it. A tree message carries the log's length and a window of at most [`WINDOW`]
//! consecutive entries — normally the last ones, which is all a process one or two epochs
//! behind lacks. A receiver whose prefix does not reach the window delivers the payload (it is
//! in the message), leaves its old epoch (the root has restarted: that epoch's acknowledgments
//! are ignored anyway) and asks its parent with `Gap(epoch, have)`; the parent answers with a
//! tree message whose window starts at `have`, until the receiver holds the whole log and
//! joins the epoch. The parent has the whole log: it joined the epoch. In LogP a message costs
//! `o` whatever its size, so a catch-up round trip is the price of fixed-size messages, paid
//! only by a process that missed more than [`WINDOW`] exclusions.

use std::fmt;

use crate::model::{LogP, Time};
use crate::protocol::{Action, Ctx, Message, Phase, ProtoRng, Protocol, Rank, SharedInfo};

/// The most excluded-log entries one tree message carries.
pub const WINDOW: usize = 32;

/// Configuration shared by all processes of a BFB broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BfbShared {
    /// Number of processes `N`.
    pub n: u32,
    /// LogP parameters, for the closed form [`BfbShared::t_bfb`].
    pub logp: LogP,
}

impl BfbShared {
    /// A BFB broadcast over `n` processes.
    pub fn new(n: u32, logp: LogP) -> Self {
        Self { n, logp }
    }

    /// §IV.B.2's minimal latency `T_BFB = 2(2o + L)·⌈log2 N⌉`: down the binomial tree and back
    /// up. Exactly the fault-free completion time at the root when `N` is a power of two; an
    /// upper bound otherwise.
    pub fn t_bfb(&self) -> Time {
        2 * self.logp.hop() * Time::from(ceil_log2(self.n))
    }
}

impl SharedInfo for BfbShared {
    fn uses_failure_detector(&self) -> bool {
        true
    }
}

/// `⌈log2 s⌉`: the number of children of a process responsible for `s` positions.
fn ceil_log2(s: u32) -> u32 {
    if s <= 1 { 0 } else { u32::BITS - (s - 1).leading_zeros() }
}

/// A window of the root's exclusion log: entries `[start, start + len)` of a log of `total`
/// entries (ranks known dead, in the order the root excluded them, each once, never the root).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Excluded {
    total: u32,
    start: u32,
    len: u8,
    ranks: [Rank; WINDOW],
}

impl Excluded {
    /// The empty log (epoch 0).
    pub const EMPTY: Excluded = Excluded {
        total: 0,
        start: 0,
        len: 0,
        ranks: [0; WINDOW],
    };

    /// The window's entries.
    pub fn as_slice(&self) -> &[Rank] {
        &self.ranks[..usize::from(self.len).min(WINDOW)]
    }

    /// The whole log's length.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// The log index of the window's first entry.
    pub fn start(&self) -> u32 {
        self.start
    }

    /// The window of `log` from `start` (at most [`WINDOW`] entries); `None` if `start` is past
    /// the end.
    pub fn window(log: &[Rank], start: usize) -> Option<Self> {
        let rest = log.get(start..)?;
        let part = &rest[..rest.len().min(WINDOW)];
        let mut e = Self::EMPTY;
        e.ranks[..part.len()].copy_from_slice(part);
        e.len = part.len() as u8;
        e.start = start as u32;
        e.total = log.len() as u32;
        Some(e)
    }

    /// A window from its parts; `None` if `ranks` is longer than [`WINDOW`].
    pub fn from_parts(total: u32, start: u32, ranks: &[Rank]) -> Option<Self> {
        let mut e = Self::EMPTY;
        e.ranks.get_mut(..ranks.len())?.copy_from_slice(ranks);
        e.len = ranks.len() as u8;
        e.total = total;
        e.start = start;
        Some(e)
    }

    /// A whole log of at most [`WINDOW`] entries (`None` if longer).
    pub fn from_slice(ranks: &[Rank]) -> Option<Self> {
        Self::from_parts(ranks.len() as u32, 0, ranks)
    }

    /// Well formed for `n` processes: in capacity, inside a log shorter than `n`, entries
    /// distinct, never the root, all below `n`.
    pub fn is_valid(&self, n: u32) -> bool {
        let s = self.as_slice();
        usize::from(self.len) <= WINDOW
            && u64::from(self.start) + s.len() as u64 <= u64::from(self.total)
            && self.total < n.max(1)
            && s.iter().all(|&r| r > 0 && r < n)
            && s.iter().enumerate().all(|(i, r)| !s[..i].contains(r))
    }
}

impl fmt::Debug for Excluded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "log[{}..{} of {}]",
            self.start,
            u64::from(self.start) + u64::from(self.len),
            self.total
        )?;
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// A BFB message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BfbMsg {
    /// The payload in `epoch`; the receiver sits at position `lo` of the live view (all ranks
    /// but the `excluded.total()` logged ones) and is responsible for positions `[lo, hi)`.
    Tree {
        epoch: u32,
        lo: u32,
        hi: u32,
        excluded: Excluded,
    },
    /// The sender's whole subtree of `epoch` has the payload.
    Ack { epoch: u32 },
    /// `dead` is dead and was part of `epoch`'s tree: restart without it.
    Nack { epoch: u32, dead: Rank },
    /// The sender holds only the first `have` log entries of `epoch`: resend the tree message
    /// with the window from there.
    Gap { epoch: u32, have: u32 },
}

impl Message for BfbMsg {
    fn phase(&self) -> Phase {
        match self {
            BfbMsg::Tree { .. } => Phase::Dissemination,
            BfbMsg::Ack { .. } | BfbMsg::Nack { .. } | BfbMsg::Gap { .. } => Phase::Control,
        }
    }
    fn label(&self) -> &'static str {
        match self {
            BfbMsg::Tree { .. } => "tree",
            BfbMsg::Ack { .. } => "ack",
            BfbMsg::Nack { .. } => "nack",
            BfbMsg::Gap { .. } => "gap",
        }
    }
}

/// One process of a BFB broadcast.
#[derive(Clone, Debug)]
pub struct Bfb {
    /// The payload has arrived (or this is the root).
    delivered: bool,
    /// Taking part in `epoch` (the root from the start).
    joined: bool,
    epoch: u32,
    /// Who sent this epoch's tree message (unused at the root).
    parent: Rank,
    /// This process's range of positions in the current epoch.
    lo: u32,
    hi: u32,
    /// Children not yet sent to are the halvings of `[lo, next_hi)`.
    next_hi: u32,
    /// Bit `i`: the `i`-th child (in send order) has acknowledged this epoch.
    acked: u64,
    ack_sent: bool,
    /// A NACK of the current epoch waiting to be sent, and whether one was queued at all
    /// (one per epoch reaches the root unless a process on the way dies, which its own parent
    /// then reports).
    nack: Option<Rank>,
    nacked: bool,
    /// The prefix of the root's exclusion log this process holds.
    log: Vec<Rank>,
    /// The same ranks, increasing (the live view of the current epoch once joined).
    excluded: Vec<Rank>,
    /// Catching up on `epoch`'s log before joining it: (parent, lo, hi) of its tree message,
    /// and whether a `Gap` request is waiting to be sent.
    catchup: Option<(Rank, u32, u32)>,
    gap_owed: bool,
    /// Children of the current epoch asking for the log from an index.
    resend: Vec<(Rank, u32)>,
    /// Ranks the failure detector suspects (all dead: the modeled detector is perfect).
    suspected: Vec<Rank>,
    /// Root only: every child of the current epoch has acknowledged.
    complete: bool,
}

impl Bfb {
    /// The current epoch (the root's number of restarts).
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Root: has every live process of the current epoch acknowledged? (`false` elsewhere.)
    pub fn complete(&self) -> bool {
        self.complete
    }

    /// The current epoch's excluded ranks, increasing.
    pub fn excluded(&self) -> &[Rank] {
        &self.excluded
    }

    /// The rank at `pos` of the live view (`pos` below `n − |excluded|`).
    fn rank_at(&self, pos: u32) -> Rank {
        let mut r = pos;
        for &e in &self.excluded {
            if e <= r {
                r += 1;
            } else {
                break;
            }
        }
        r
    }

    /// The position of `rank` in the live view; `None` if it is excluded.
    fn pos_of(&self, rank: Rank) -> Option<u32> {
        let below = self.excluded.partition_point(|&e| e < rank);
        (self.excluded.get(below) != Some(&rank)).then(|| rank - below as u32)
    }

    /// Number of children in the current epoch.
    fn children(&self) -> u32 {
        ceil_log2(self.hi - self.lo)
    }

    /// Index (in send order) and range of the child at position `pos`, if it is one.
    fn child_at(&self, pos: u32) -> Option<(u32, u32)> {
        let (lo, mut hi) = (self.lo, self.hi);
        let mut i = 0;
        while hi - lo > 1 {
            let mid = lo + (hi - lo).div_ceil(2);
            if mid == pos {
                return Some((i, hi));
            }
            hi = mid;
            i += 1;
        }
        None
    }

    /// Index of `rank` among the current children, if it is one.
    fn child_index_of(&self, rank: Rank) -> Option<u32> {
        self.pos_of(rank).and_then(|p| self.child_at(p)).map(|c| c.0)
    }

    /// Children already sent to (or skipped as known dead) this epoch.
    fn handled(&self) -> u32 {
        self.children() - ceil_log2(self.next_hi - self.lo)
    }

    fn all_acked(&self) -> bool {
        let k = self.children();
        self.next_hi - self.lo <= 1 && self.acked == (1u64 << k) - 1
    }

    fn is_root(&self, cx: &Ctx<'_, BfbShared>) -> bool {
        cx.rank == 0
    }

    /// Takes part in `epoch` for positions `[lo, hi)` of the view without the logged ranks.
    fn join(&mut self, cx: &Ctx<'_, BfbShared>, epoch: u32, parent: Rank, lo: u32, hi: u32) {
        self.joined = true;
        self.epoch = epoch;
        self.parent = parent;
        (self.lo, self.hi, self.next_hi) = (lo, hi, hi);
        self.acked = 0;
        self.ack_sent = false;
        self.nack = None;
        self.nacked = false;
        self.catchup = None;
        self.gap_owed = false;
        self.resend.clear();
        // A child already known dead: report it now (it will not be sent to). The root
        // excludes every rank it suspects when it restarts, so this is never the root.
        let known_dead = self
            .suspected
            .iter()
            .copied()
            .find(|&s| self.child_index_of(s).is_some());
        if let Some(d) = known_dead
            && !self.is_root(cx)
        {
            self.queue_nack(d);
        }
        if self.is_root(cx) && self.children() == 0 {
            self.complete = true;
        }
    }

    fn queue_nack(&mut self, dead: Rank) {
        if !self.nacked {
            self.nacked = true;
            self.nack = Some(dead);
        }
    }

    /// Appends `r` to the log (and the sorted set); `false` if it is there already.
    fn log_push(&mut self, r: Rank) -> bool {
        match self.excluded.binary_search(&r) {
            Ok(_) => false,
            Err(i) => {
                self.excluded.insert(i, r);
                self.log.push(r);
                true
            }
        }
    }

    /// Root: exclude `dead` (and every other rank it suspects) and start a new epoch. The
    /// log holds at most the `n − 1` other ranks, so the live view never becomes empty.
    fn restart(&mut self, cx: &Ctx<'_, BfbShared>, dead: Rank) {
        let mut add: Vec<Rank> = self.suspected.clone();
        add.push(dead);
        add.sort_unstable();
        add.dedup();
        for r in add {
            self.log_push(r);
        }
        let m = cx.n - self.excluded.len() as u32;
        self.join(cx, self.epoch + 1, 0, 0, m);
    }

    /// A child that has not acknowledged this epoch is dead: report or restart.
    fn child_dead(&mut self, cx: &Ctx<'_, BfbShared>, dead: Rank) {
        let Some(i) = self.child_index_of(dead) else {
            return;
        };
        if self.acked >> i & 1 == 1 {
            return;
        }
        if self.is_root(cx) {
            if !self.complete {
                self.restart(cx, dead);
            }
        } else {
            self.queue_nack(dead);
        }
    }

    /// A tree message of an epoch newer than the joined one (or the catch-up of the epoch
    /// being caught up on): extend the log with the window, then join if it is complete, else
    /// ask `from` for the rest.
    fn on_tree(&mut self, cx: &Ctx<'_, BfbShared>, from: Rank, epoch: u32, lo: u32, hi: u32, ex: &Excluded) {
        let win = ex.as_slice();
        let have = self.log.len() as u32;
        // The window must agree with the prefix held and bring nothing logged twice.
        let start = ex.start();
        if start <= have {
            let skip = (have - start) as usize;
            let known = &self.log[start as usize..];
            if win.iter().zip(known).any(|(a, b)| a != b)
                || win
                    .get(skip..)
                    .unwrap_or(&[])
                    .iter()
                    .any(|r| self.excluded.binary_search(r).is_ok())
            {
                return;
            }
        }
        // Complete now: the position must be `lo`, checked before anything changes.
        let fresh = win.get((have.saturating_sub(start)) as usize..).unwrap_or(&[]);
        if start <= have && have as usize + fresh.len() == ex.total() as usize {
            let below =
                self.excluded.partition_point(|&e| e < cx.rank) + fresh.iter().filter(|&&r| r < cx.rank).count();
            if self.excluded.binary_search(&cx.rank).is_ok() || cx.rank - below as u32 != lo {
                return;
            }
        }
        // Valid: the payload is delivered, and the old epoch abandoned (the root restarted).
        self.delivered = true;
        self.joined = false;
        self.epoch = epoch;
        self.resend.clear();
        self.nack = None;
        if start <= have {
            let skip = (have - start) as usize;
            for &r in win.get(skip..).unwrap_or(&[]) {
                self.log_push(r);
            }
        }
        if (self.log.len() as u32) < ex.total() {
            self.catchup = Some((from, lo, hi));
            self.gap_owed = true;
            return;
        }
        // The whole log of `epoch` (the position was checked above, or is checked here after
        // a catch-up; `hi` against the live view's size on receipt).
        if self.pos_of(cx.rank) != Some(lo) {
            self.catchup = None;
            self.gap_owed = false;
            return;
        }
        self.join(cx, epoch, from, lo, hi);
    }
}

impl Protocol for Bfb {
    type Shared = BfbShared;
    type Msg = BfbMsg;

    fn new(_cx: &Ctx<'_, BfbShared>) -> Self {
        Self {
            delivered: false,
            joined: false,
            epoch: 0,
            parent: 0,
            lo: 0,
            hi: 0,
            next_hi: 0,
            acked: 0,
            ack_sent: false,
            nack: None,
            nacked: false,
            log: Vec::new(),
            excluded: Vec::new(),
            catchup: None,
            gap_owed: false,
            resend: Vec::new(),
            suspected: Vec::new(),
            complete: false,
        }
    }

    fn start(&mut self, cx: &Ctx<'_, BfbShared>) {
        if self.is_root(cx) && !self.joined {
            self.delivered = true;
            self.join(cx, 0, 0, 0, cx.n);
        }
    }

    fn on_message(&mut self, cx: &Ctx<'_, BfbShared>, from: Rank, msg: &BfbMsg) {
        if from >= cx.n || from == cx.rank {
            return;
        }
        match *msg {
            BfbMsg::Tree {
                epoch,
                lo,
                hi,
                excluded,
            } => {
                // The root is nobody's child; older epochs and duplicates change nothing (a
                // joined process has delivered already); during a catch-up only its parent's
                // answers of that epoch count.
                let newer = epoch > self.epoch || !self.delivered;
                let answer = self.catchup.is_some_and(|c| c.0 == from) && epoch == self.epoch;
                if self.is_root(cx) || !(newer || answer) || !excluded.is_valid(cx.n) {
                    return;
                }
                // A valid log is shorter than `n`. This process is at position `lo`: not
                // logged, and at most `total` logged ranks below it.
                let total = excluded.total();
                if lo >= hi
                    || hi > cx.n - total
                    || lo > cx.rank
                    || cx.rank - lo > total
                    || excluded.as_slice().contains(&cx.rank)
                {
                    return;
                }
                self.on_tree(cx, from, epoch, lo, hi, &excluded);
            }
            BfbMsg::Ack { epoch } => {
                if !self.joined || epoch != self.epoch {
                    return;
                }
                let Some(i) = self.child_index_of(from) else {
                    return;
                };
                if i >= self.handled() {
                    // Not sent to yet: not a genuine acknowledgment.
                    return;
                }
                self.acked |= 1 << i;
                if self.is_root(cx) && self.all_acked() {
                    self.complete = true;
                }
            }
            BfbMsg::Nack { epoch, dead } => {
                if !self.joined || epoch != self.epoch || dead == 0 || dead >= cx.n || dead == cx.rank {
                    return;
                }
                if self.is_root(cx) {
                    if !self.complete && self.excluded.binary_search(&dead).is_err() {
                        self.restart(cx, dead);
                    }
                } else {
                    self.queue_nack(dead);
                }
            }
            BfbMsg::Gap { epoch, have } => {
                // Only from a child already sent to in the current epoch, for entries it lacks.
                if !self.joined || epoch != self.epoch || have as usize >= self.log.len() {
                    return;
                }
                match self.child_index_of(from) {
                    Some(i) if i < self.handled() => {}
                    _ => return,
                }
                if !self.resend.iter().any(|&(c, h)| c == from && h == have) {
                    self.resend.push((from, have));
                }
            }
        }
    }

    fn poll_send(&mut self, cx: &Ctx<'_, BfbShared>, _rng: &mut ProtoRng) -> Action<BfbMsg> {
        if let Some((parent, _, _)) = self.catchup
            && self.gap_owed
        {
            self.gap_owed = false;
            return Action::Send {
                to: parent,
                msg: BfbMsg::Gap {
                    epoch: self.epoch,
                    have: self.log.len() as u32,
                },
            };
        }
        if !self.joined {
            return Action::Wait;
        }
        if let Some(dead) = self.nack.take() {
            return Action::Send {
                to: self.parent,
                msg: BfbMsg::Nack {
                    epoch: self.epoch,
                    dead,
                },
            };
        }
        while let Some((to, have)) = self.resend.pop() {
            let Some((_, hi)) = self.pos_of(to).and_then(|p| self.child_at(p)) else {
                continue;
            };
            let (Some(lo), Some(excluded)) = (self.pos_of(to), Excluded::window(&self.log, have as usize)) else {
                continue;
            };
            return Action::Send {
                to,
                msg: BfbMsg::Tree {
                    epoch: self.epoch,
                    lo,
                    hi,
                    excluded,
                },
            };
        }
        while self.next_hi - self.lo > 1 {
            let hi = self.next_hi;
            let mid = self.lo + (hi - self.lo).div_ceil(2);
            self.next_hi = mid;
            let to = self.rank_at(mid);
            if self.suspected.contains(&to) {
                // Known dead: already reported at `join`; never acknowledges.
                continue;
            }
            let from = self.log.len().saturating_sub(WINDOW);
            let excluded = Excluded::window(&self.log, from).unwrap_or(Excluded::EMPTY);
            return Action::Send {
                to,
                msg: BfbMsg::Tree {
                    epoch: self.epoch,
                    lo: mid,
                    hi,
                    excluded,
                },
            };
        }
        if !self.is_root(cx) && !self.ack_sent && self.all_acked() {
            self.ack_sent = true;
            return Action::Send {
                to: self.parent,
                msg: BfbMsg::Ack { epoch: self.epoch },
            };
        }
        Action::Wait
    }

    fn on_suspect(&mut self, cx: &Ctx<'_, BfbShared>, peer: Rank) {
        if peer >= cx.n || peer == cx.rank || peer == 0 {
            return;
        }
        if !self.suspected.contains(&peer) {
            self.suspected.push(peer);
        }
        if self.joined {
            self.child_dead(cx, peer);
        }
    }

    fn delivered(&self) -> bool {
        self.delivered
    }

    fn colored_by_dissemination(&self) -> bool {
        self.delivered
    }

    /// The root is finished once complete. Any other process may be asked to re-forward by a
    /// later epoch and never knows the root is done, so it never reports finished.
    fn finished(&self, cx: &Ctx<'_, BfbShared>) -> bool {
        self.is_root(cx) && self.complete
    }
}

#[cfg(test)]
mod tests;
