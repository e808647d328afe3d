//! Dissemination trees of Corrected Trees §3.2: k-ary (§3.2.1), binomial and Lamé (§3.2.2,
//! eqs. (1)–(2)) and the LogP-optimal tree (§3.2.3), numbered either interleaved
//! (Definition 1, so that a failed subtree leaves small gaps on the correction ring) or in
//! order (depth-first, Figure 3 left).
//!
//! Every tree for `n` processes is the first `n` ranks of an infinite construction, rooted at
//! rank 0, and every child outranks its parent; both numberings keep that invariant.

use serde::Serialize;

use crate::model::{LogGP, Time};

/// "No process": the parent of the root.
const NONE: u32 = u32::MAX;

/// The shape of a dissemination tree (Corrected Trees §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum TreeKind {
    /// k-ary tree (§3.2.1); `Kary(1)` is a chain.
    Kary(u32),
    /// Binomial tree `T_t = T_{t-1} • T_{t-1}`: the Lamé tree of order 1 (§3.2.2).
    Binomial,
    /// Lamé tree of order k, `T_t = T_{t-1} • T_{t-k}` (§3.2.2, eqs. (1)–(2)); optimal when
    /// `2o + L = k` and `o = 1` (§3.2.3, Figure 5).
    Lame(u32),
    /// Latency-optimal tree for the given LogP parameters, `T_t = T_{t-o} • T_{t-2o-L}`
    /// (§3.2.3), built as the greedy LogP schedule: every colored process sends every `o`
    /// from the moment it is colored (LogGP: every send slot, children colored a hop later).
    /// For `o = 1` it is `Lame(2 + L)`. Its interleaved
    /// numbering satisfies Definition 1 iff `o` divides `L`.
    Optimal,
}

/// How the processes of a tree are numbered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Order {
    /// Interleaved numbering (§3.2, Definition 1): subtrees are spread across the ring, so a
    /// failed subtree leaves many small gaps instead of one large one.
    Interleaved,
    /// Depth-first preorder numbering, children visited in send order (Figure 3, left): each
    /// subtree is a contiguous block of ranks.
    InOrder,
}

/// A rooted dissemination tree over ranks `0..len()`, root 0, stored as CSR adjacency with
/// children in send order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    kind: TreeKind,
    order: Order,
    /// `parent[r]`, `NONE` for the root.
    parent: Vec<u32>,
    /// Children of `r` are `children[child_start[r]..child_start[r + 1]]`.
    child_start: Vec<u32>,
    children: Vec<u32>,
    depth: Vec<u32>,
    height: u32,
}

impl Tree {
    /// Builds the `kind` tree over `n >= 1` processes, root rank 0, numbered by `order`.
    ///
    /// Only [`TreeKind::Optimal`] depends on `logp`. Runs in O(n) time and memory. Errors
    /// (never panics) on `n == 0`, `Kary(0)`, `Lame(0)`, `logp.o == 0`, or LogP times that
    /// overflow [`Time`].
    pub fn build(kind: TreeKind, order: Order, n: u32, logp: impl Into<LogGP>) -> Result<Tree, String> {
        let logp: LogGP = logp.into();
        if n == 0 {
            return Err("a tree needs at least one process (n >= 1)".into());
        }
        if logp.os == 0 || logp.or == 0 {
            return Err("LogP o must be at least 1".into());
        }
        let parent = match kind {
            TreeKind::Kary(0) => return Err("a k-ary tree needs k >= 1".into()),
            TreeKind::Kary(k) => kary_parents(k, n),
            TreeKind::Binomial => ready_to_send(n, 1, 1)?.0,
            TreeKind::Lame(0) => return Err("a Lamé tree needs order k >= 1".into()),
            TreeKind::Lame(k) => ready_to_send(n, 1, Time::from(k))?.0,
            TreeKind::Optimal => {
                let hop = logp
                    .os
                    .checked_add(logp.gk)
                    .and_then(|x| x.checked_add(logp.l))
                    .and_then(|x| x.checked_add(logp.or))
                    .ok_or("LogP 2o + L overflows")?;
                ready_to_send(n, logp.slot(), hop)?.0
            }
        };
        let tree = Tree::from_parents(kind, Order::Interleaved, parent);
        Ok(match order {
            Order::Interleaved => tree,
            Order::InOrder => tree.renumbered_in_order(),
        })
    }

    /// Number of processes `n`.
    #[allow(clippy::len_without_is_empty)] // a tree always has its root
    pub fn len(&self) -> u32 {
        self.parent.len() as u32
    }

    /// The shape this tree was built as.
    pub fn kind(&self) -> TreeKind {
        self.kind
    }

    /// The numbering this tree was built with.
    pub fn order(&self) -> Order {
        self.order
    }

    /// Parent of `r`; `None` for the root and for ranks out of range.
    pub fn parent(&self, r: u32) -> Option<u32> {
        self.parent.get(r as usize).copied().filter(|&p| p != NONE)
    }

    /// Children of `r` in send order: the first child is sent to first (for k-ary trees in
    /// order of `i`, for binomial/Lamé/optimal trees the child with the largest subtree
    /// first, as eq. (2) creates them). Empty for leaves and for ranks out of range.
    pub fn children(&self, r: u32) -> &[u32] {
        let r = r as usize;
        if r >= self.parent.len() {
            return &[];
        }
        &self.children[self.child_start[r] as usize..self.child_start[r + 1] as usize]
    }

    /// Depth of `r` (the root has depth 0). Panics if `r >= len()`.
    pub fn depth(&self, r: u32) -> u32 {
        self.depth[r as usize]
    }

    /// Largest depth of any process.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// Fault-free LogP time at which each process is colored (§2.2): the root at 0, and the
    /// `i`-th child (0-based) of `r` at `arrival[r] + i·o + 2o + L`, since a process sends to
    /// its children one per `o` starting when it is colored. In LogGP `o` is the send
    /// slot `max(o_s + G(k−1), g)` and `2o + L` the hop `o_s + G(k−1) + L + o_r`. Saturates
    /// instead of overflowing.
    pub fn arrival_times(&self, logp: impl Into<LogGP>) -> Vec<Time> {
        let logp: LogGP = logp.into();
        let (hop, slot) = (logp.hop(), logp.slot());
        let mut arrival: Vec<Time> = vec![0; self.parent.len()];
        // Children outrank their parents, so a parent's time is final before its children's.
        for r in 0..self.len() {
            let start = arrival[r as usize];
            let mut at = start.saturating_add(hop);
            for &c in self.children(r) {
                arrival[c as usize] = at;
                at = at.saturating_add(slot);
            }
        }
        arrival
    }

    /// The dissemination latency of the tree: the largest of [`Tree::arrival_times`].
    pub fn dissemination_latency(&self, logp: impl Into<LogGP>) -> Time {
        self.arrival_times(logp).into_iter().max().unwrap_or(0)
    }

    /// True iff the tree is interleaved (§3.2, Definition 1): for every subtree `T_s` and every
    /// pair of distinct nodes adjacent on the ring `R_s` of its ranks, one descends from the
    /// other or their only common ancestor in `T_s` is `root(T_s)`.
    ///
    /// Scans the ranks in increasing order and, for each ancestor `p` of a rank `r`, compares
    /// `r` with its predecessor on `R_p` (the last rank of `p`'s subtree seen so far): the pair
    /// violates Definition 1 iff both lie below the same child of `p` and neither descends from
    /// the other. The wrap-around pair of `R_p` always involves `p` itself (the smallest rank of
    /// its subtree) and is fine. Time O(Σ depth) = O(n·height), i.e. O(n log n) for every kind
    /// but the chain `Kary(1)`, which is answered in O(1); memory O(n).
    pub fn is_interleaved(&self) -> bool {
        let n = self.parent.len();
        if self.height as usize + 1 >= n {
            // A chain: every pair descends from each other.
            return true;
        }
        let (pre, size) = self.preorder();
        // `a` is an ancestor of (or equal to) `b`.
        let is_ancestor = |a: usize, b: usize| {
            let (pa, pb) = (pre[a], pre[b]);
            pa <= pb && pb < pa + size[a]
        };
        // For each p: the largest rank of p's subtree seen so far, and the child of p below
        // which it lies (p itself when it is p).
        let mut last: Vec<u32> = (0..n as u32).collect();
        let mut last_child = last.clone();
        for r in 1..n as u32 {
            let mut child = r;
            let mut p = self.parent[r as usize];
            loop {
                let pi = p as usize;
                if last_child[pi] == child && !is_ancestor(last[pi] as usize, r as usize) {
                    return false;
                }
                last[pi] = r;
                last_child[pi] = child;
                if p == 0 {
                    break;
                }
                child = p;
                p = self.parent[pi];
            }
        }
        true
    }

    /// Builds the CSR tree from a parent array with `parent[0] == NONE` and
    /// `parent[c] < c` for every other `c`; children come out in increasing rank order.
    fn from_parents(kind: TreeKind, order: Order, parent: Vec<u32>) -> Tree {
        let n = parent.len();
        debug_assert!(n >= 1 && parent[0] == NONE);
        debug_assert!((1..n).all(|c| (parent[c] as usize) < c));
        let mut child_start = vec![0u32; n + 1];
        for &p in &parent[1..] {
            child_start[p as usize + 1] += 1;
        }
        for r in 0..n {
            child_start[r + 1] += child_start[r];
        }
        let mut fill = child_start.clone();
        let mut children = vec![0u32; n - 1];
        let mut depth = vec![0u32; n];
        let mut height = 0;
        for c in 1..n {
            let p = parent[c] as usize;
            children[fill[p] as usize] = c as u32;
            fill[p] += 1;
            depth[c] = depth[p] + 1;
            height = height.max(depth[c]);
        }
        Tree {
            kind,
            order,
            parent,
            child_start,
            children,
            depth,
            height,
        }
    }

    /// Depth-first preorder index of every rank (children visited in send order) and the
    /// size of every subtree.
    fn preorder(&self) -> (Vec<u32>, Vec<u32>) {
        let n = self.parent.len();
        let mut size = vec![1u32; n];
        for c in (1..n).rev() {
            size[self.parent[c] as usize] += size[c];
        }
        let mut pre = vec![0u32; n];
        for r in 0..n {
            let mut next = pre[r] + 1;
            for &c in self.children(r as u32) {
                pre[c as usize] = next;
                next += size[c as usize];
            }
        }
        (pre, size)
    }

    /// The same shape renumbered by depth-first preorder (Figure 3 left, Figure 4 left).
    fn renumbered_in_order(&self) -> Tree {
        let (pre, _) = self.preorder();
        let mut parent = vec![NONE; self.parent.len()];
        for c in 1..self.parent.len() {
            parent[pre[c] as usize] = pre[self.parent[c] as usize];
        }
        Tree::from_parents(self.kind, Order::InOrder, parent)
    }
}

/// Interleaved k-ary tree (§3.2.1): process `r` on level `ℓ` has the children
/// `r + i·k^ℓ` for `0 < i ≤ k`, `r + i·k^ℓ < n`.
fn kary_parents(k: u32, n: u32) -> Vec<u32> {
    let mut parent = vec![NONE; n as usize];
    let mut level = vec![0u32; n as usize];
    for r in 0..n {
        let Some(stride) = u64::from(k).checked_pow(level[r as usize]) else {
            continue;
        };
        if stride >= u64::from(n) {
            continue;
        }
        for i in 1..=u64::from(k) {
            // stride < n <= 2^32 and i <= k < 2^32: no overflow.
            let c = u64::from(r) + i * stride;
            if c >= u64::from(n) {
                break;
            }
            parent[c as usize] = r;
            level[c as usize] = level[r as usize] + 1;
        }
    }
    parent
}

/// The generic "ready to send" construction behind binomial, Lamé and optimal trees (§3.2.2,
/// §3.2.3): a colored process sends to a new process every `step` time units starting when it
/// is colored, and each new process is colored `hop` after that send starts. Ranks are given in
/// order of (coloring time, parent rank), so new processes of one instant are numbered in the
/// order of their parents. When `hop` is a multiple of `step` the senders of each instant are a
/// prefix of the ranks and the tree is interleaved (Lemma 1); otherwise (the optimal tree with
/// `o ∤ L`) Definition 1 can fail, e.g. for L = 1, o = 2, n = 15.
///
/// Binomial is `(1, 1)`, Lamé of order k is `(1, k)` (eq. (1)–(2): children
/// `r + R(i + k - 1)`), the optimal tree is `(o, 2o + L)` (the greedy LogP schedule, which
/// is eq. (2) with the §3.2.3 `R(t)` when `o = 1`).
///
/// Sends are produced in (time, sender) order by merging two already sorted streams, so the
/// construction is O(n): the first sends of processes in rank order (process `c` at its coloring
/// time), and the repeated sends (the send that created process `c`, shifted by `step`).
///
/// Returns the parent array and the coloring times.
fn ready_to_send(n: u32, step: Time, hop: Time) -> Result<(Vec<u32>, Vec<Time>), String> {
    const OVERFLOW: &str = "LogP times overflow";
    let n = n as usize;
    let mut parent = vec![NONE; n];
    let mut colored: Vec<Time> = vec![0; n];
    // Next process whose first send is pending, and next created process whose creating
    // send's successor (same sender, `step` later) is pending.
    let (mut first, mut repeat) = (0usize, 1usize);
    for next in 1..n {
        // `first < next` always holds; `repeat < next` iff a repeated send is pending.
        let first_send = (colored[first], first as u32);
        let (send, sender) = if repeat < next {
            let repeat_send = (
                (colored[repeat] - hop).checked_add(step).ok_or(OVERFLOW)?,
                parent[repeat],
            );
            if repeat_send < first_send {
                repeat += 1;
                repeat_send
            } else {
                first += 1;
                first_send
            }
        } else {
            first += 1;
            first_send
        };
        parent[next] = sender;
        colored[next] = send.checked_add(hop).ok_or(OVERFLOW)?;
    }
    Ok((parent, colored))
}

#[cfg(test)]
mod tests;
