use super::*;
use crate::model::LogP;
use crate::topology::ring::longest_circular_run;

/// The papers' default LogP parameters (L = 2, o = 1).
const DEFAULT: LogP = LogP { l: 2, o: 1 };

fn lp(l: Time, o: Time) -> LogP {
    LogP { l, o }
}

fn build(kind: TreeKind, order: Order, n: u32) -> Tree {
    Tree::build(kind, order, n, DEFAULT).unwrap()
}

fn kids(t: &Tree, r: u32) -> Vec<u32> {
    t.children(r).to_vec()
}

/// Ranks of the subtree rooted at `v`, sorted.
fn subtree(t: &Tree, v: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut stack = vec![v];
    while let Some(x) = stack.pop() {
        out.push(x);
        stack.extend_from_slice(t.children(x));
    }
    out.sort_unstable();
    out
}

/// Structural invariants every built tree must satisfy.
fn assert_consistent(t: &Tree) {
    let n = t.len();
    assert_eq!(t.parent(0), None);
    assert_eq!(t.depth(0), 0);
    let mut height = 0;
    let mut seen = 0u64;
    for r in 0..n {
        let ch = t.children(r);
        seen += ch.len() as u64;
        assert!(ch.windows(2).all(|w| w[0] < w[1]), "children of {r} not increasing");
        for &c in ch {
            assert!(c > r && c < n);
            assert_eq!(t.parent(c), Some(r));
            assert_eq!(t.depth(c), t.depth(r) + 1);
        }
        if r > 0 {
            let p = t.parent(r).unwrap();
            assert!(t.children(p).contains(&r));
        }
        height = height.max(t.depth(r));
    }
    assert_eq!(seen, u64::from(n) - 1);
    assert_eq!(t.height(), height);
    assert_eq!(t.parent(n), None);
    assert!(t.children(n).is_empty());
}

/// Definition 1 verbatim: every subtree, every adjacent pair of its ring, via explicit LCA.
fn naive_interleaved(t: &Tree) -> bool {
    let lca = |mut a: u32, mut b: u32| {
        while t.depth(a) > t.depth(b) {
            a = t.parent(a).unwrap();
        }
        while t.depth(b) > t.depth(a) {
            b = t.parent(b).unwrap();
        }
        while a != b {
            a = t.parent(a).unwrap();
            b = t.parent(b).unwrap();
        }
        a
    };
    for v in 0..t.len() {
        let ring = subtree(t, v);
        let m = ring.len();
        for i in 0..m {
            let (a, b) = (ring[i], ring[(i + 1) % m]);
            if a == b {
                continue;
            }
            let l = lca(a, b);
            if l != a && l != b && l != v {
                return false;
            }
        }
    }
    true
}

/// Every interleaved kind the brief lists, with the LogP parameters it is built for.
fn interleaved_kinds() -> Vec<(TreeKind, LogP)> {
    vec![
        (TreeKind::Kary(2), DEFAULT),
        (TreeKind::Kary(3), DEFAULT),
        (TreeKind::Kary(4), DEFAULT),
        (TreeKind::Binomial, DEFAULT),
        (TreeKind::Lame(2), DEFAULT),
        (TreeKind::Lame(3), DEFAULT),
        (TreeKind::Optimal, lp(1, 1)),
        (TreeKind::Optimal, lp(2, 1)),
        (TreeKind::Optimal, lp(4, 2)),
    ]
}

/// Minimal xorshift generator, so the tests need no RNG crate.
struct Rng(u64);
impl Rng {
    fn below(&mut self, m: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % m
    }
}

// ---- build errors and basics ---------------------------------------------------------------

#[test]
fn build_rejects_bad_input() {
    let err = |kind, n, logp| Tree::build(kind, Order::Interleaved, n, logp).is_err();
    assert!(err(TreeKind::Binomial, 0, DEFAULT));
    assert!(err(TreeKind::Kary(0), 5, DEFAULT));
    assert!(err(TreeKind::Lame(0), 5, DEFAULT));
    assert!(err(TreeKind::Optimal, 5, lp(1, 0)));
    assert!(err(TreeKind::Kary(2), 5, lp(1, 0)));
    assert!(err(TreeKind::Optimal, 5, lp(Time::MAX, 1)));
    assert!(err(TreeKind::Optimal, 5, lp(1, Time::MAX / 2 + 1)));
    // Huge but representable parameters work.
    assert!(!err(TreeKind::Optimal, 5, lp(Time::MAX / 8, 1)));
    assert!(!err(TreeKind::Optimal, 5, lp(Time::MAX - 10, 1)));
    assert!(!err(TreeKind::Kary(u32::MAX), 5, DEFAULT));
    assert!(!err(TreeKind::Lame(u32::MAX), 5, DEFAULT));
}

#[test]
fn single_process_and_small_trees() {
    for (kind, logp) in interleaved_kinds() {
        for order in [Order::Interleaved, Order::InOrder] {
            let t = Tree::build(kind, order, 1, logp).unwrap();
            assert_eq!((t.len(), t.height(), t.kind(), t.order()), (1, 0, kind, order));
            assert!(t.children(0).is_empty());
            assert_eq!(t.arrival_times(logp), vec![0]);
            assert_eq!(t.dissemination_latency(logp), 0);
            assert!(t.is_interleaved());
            let t = Tree::build(kind, order, 2, logp).unwrap();
            assert_eq!(kids(&t, 0), vec![1]);
            assert_eq!(t.dissemination_latency(logp), logp.hop());
        }
    }
}

#[test]
fn built_trees_are_consistent() {
    let mut kinds = interleaved_kinds();
    kinds.extend([
        (TreeKind::Kary(1), DEFAULT),
        (TreeKind::Kary(7), DEFAULT),
        (TreeKind::Lame(1), DEFAULT),
        (TreeKind::Lame(5), DEFAULT),
        (TreeKind::Lame(40), DEFAULT),
        (TreeKind::Optimal, lp(0, 1)),
        (TreeKind::Optimal, lp(7, 3)),
        (TreeKind::Optimal, lp(100, 1)),
    ]);
    for (kind, logp) in kinds {
        for order in [Order::Interleaved, Order::InOrder] {
            for n in (1..=300).chain([1000, 1023, 1024, 1025]) {
                assert_consistent(&Tree::build(kind, order, n, logp).unwrap());
            }
        }
    }
}

#[test]
fn binomial_is_lame_1_and_kary_1_is_a_chain() {
    for n in 1..=600 {
        let b = build(TreeKind::Binomial, Order::Interleaved, n);
        let l = build(TreeKind::Lame(1), Order::Interleaved, n);
        assert_eq!((&b.parent, &b.children), (&l.parent, &l.children));
        let chain = build(TreeKind::Kary(1), Order::Interleaved, n);
        assert_eq!(chain.height(), n - 1);
        assert!((1..n).all(|r| chain.parent(r) == Some(r - 1)));
        assert!(chain.is_interleaved());
        let chain_in_order = build(TreeKind::Kary(1), Order::InOrder, n);
        assert_eq!(chain.parent, chain_in_order.parent);
    }
}

// ---- the paper's figures --------------------------------------------------------------------

#[test]
fn figure_3_binary_tree_n7() {
    let t = build(TreeKind::Kary(2), Order::Interleaved, 7);
    assert_eq!(kids(&t, 0), [1, 2]);
    assert_eq!(kids(&t, 1), [3, 5]);
    assert_eq!(kids(&t, 2), [4, 6]);
    assert!((3..7).all(|r| t.children(r).is_empty()));
    assert!(t.is_interleaved());
    // Process 2 fails: its children 4 and 6 are uncolored, two gaps of size 1.
    let lost = subtree(&t, 2);
    assert_eq!(lost, [2, 4, 6]);
    assert_eq!(longest_circular_run(|r| lost.contains(&r) && r != 2, 7), 1);

    let t = build(TreeKind::Kary(2), Order::InOrder, 7);
    assert_eq!(kids(&t, 0), [1, 4]);
    assert_eq!(kids(&t, 1), [2, 3]);
    assert_eq!(kids(&t, 4), [5, 6]);
    assert!([2, 3, 5, 6].iter().all(|&r| t.children(r).is_empty()));
    assert!(!t.is_interleaved());
    // Process 4 fails: 4, 5, 6 uncolored, so the live 5 and 6 form a gap of size 2 (plus 4).
    let lost = subtree(&t, 4);
    assert_eq!(lost, [4, 5, 6]);
    assert_eq!(longest_circular_run(|r| lost.contains(&r) && r != 4, 7), 2);
}

#[test]
fn figure_4_binomial_tree_n8() {
    let t = build(TreeKind::Binomial, Order::Interleaved, 8);
    assert_eq!(kids(&t, 0), [1, 2, 4]);
    assert_eq!(kids(&t, 1), [3, 5]);
    assert_eq!(kids(&t, 2), [6]);
    assert_eq!(kids(&t, 3), [7]);
    assert!([4, 5, 6, 7].iter().all(|&r| t.children(r).is_empty()));
    assert_eq!(subtree(&t, 1), [1, 3, 5, 7]);
    assert_eq!(subtree(&t, 2), [2, 6]);
    assert_eq!(t.height(), 3);
    assert!(t.is_interleaved());

    // Same shape, depth-first numbering, largest subtree first.
    let t = build(TreeKind::Binomial, Order::InOrder, 8);
    assert_eq!(kids(&t, 0), [1, 5, 7]);
    assert_eq!(kids(&t, 1), [2, 4]);
    assert_eq!(kids(&t, 2), [3]);
    assert_eq!(kids(&t, 5), [6]);
    assert_eq!(subtree(&t, 1), [1, 2, 3, 4]);
    assert!(!t.is_interleaved());
}

#[test]
fn figure_5_lame_3_n9_timeline() {
    let t = build(TreeKind::Lame(3), Order::Interleaved, 9);
    assert_eq!(kids(&t, 0), [1, 2, 3, 4, 6]);
    assert_eq!(kids(&t, 1), [5, 7]);
    assert_eq!(kids(&t, 2), [8]);
    assert!((3..9).all(|r| t.children(r).is_empty()));
    assert!(t.is_interleaved());

    let logp = lp(1, 1);
    let arrival = t.arrival_times(logp);
    assert_eq!(arrival, [0, 3, 4, 5, 6, 6, 7, 7, 7]);
    assert_eq!(t.dissemination_latency(logp), 7);
    // Sending intervals [s, s + o) of the timeline: 0 sends at 0..=4, 1 at 3 and 4, 2 at 4.
    let sends = |r: u32| -> Vec<Time> {
        (0..t.children(r).len() as Time)
            .map(|i| arrival[r as usize] + i * logp.o)
            .collect()
    };
    assert_eq!(sends(0), [0, 1, 2, 3, 4]);
    assert_eq!(sends(1), [3, 4]);
    assert_eq!(sends(2), [4]);
    // Receiving intervals [a - o, a): everybody but the root receives exactly once.
    let mut receiving: Vec<Time> = arrival[1..].iter().map(|a| a - logp.o).collect();
    receiving.sort_unstable();
    assert_eq!(receiving, [2, 3, 4, 5, 5, 6, 6, 6]);
    // The optimal tree for L = o = 1 is this very tree (Figure 5's remark).
    let opt = Tree::build(TreeKind::Optimal, Order::Interleaved, 9, logp).unwrap();
    assert_eq!(opt.children, t.children);
    assert_eq!(opt.child_start, t.child_start);
}

// ---- the construction formulas --------------------------------------------------------------

#[test]
fn kary_children_follow_section_3_2_1() {
    for k in 1..=5u64 {
        for n in [1u32, 2, 10, 40, 121, 364, 1000] {
            let t = build(TreeKind::Kary(k as u32), Order::Interleaved, n);
            // Level ℓ starts at rank (k^ℓ - 1) / (k - 1) (ℓ for k = 1).
            let level = |r: u64| {
                let (mut l, mut start, mut width) = (0u32, 0u64, 1u64);
                while start + width <= r {
                    start += width;
                    width *= k;
                    l += 1;
                }
                l
            };
            for r in 0..n {
                let stride = k.pow(level(u64::from(r)));
                let want: Vec<u32> = (1..=k)
                    .map(|i| u64::from(r) + i * stride)
                    .filter(|&c| c < u64::from(n))
                    .map(|c| c as u32)
                    .collect();
                assert_eq!(kids(&t, r), want, "k={k} n={n} r={r}");
                assert_eq!(t.depth(r), level(u64::from(r)));
                // The subtree of a level-ℓ process is every k^ℓ-th rank from it on.
                if k > 1 {
                    let sub: Vec<u32> = (u64::from(r)..u64::from(n))
                        .step_by(stride as usize)
                        .map(|c| c as u32)
                        .collect();
                    assert_eq!(subtree(&t, r), sub);
                }
            }
        }
    }
    let t = build(TreeKind::Kary(3), Order::Interleaved, 40);
    assert_eq!(kids(&t, 1), [4, 7, 10]);
    assert_eq!(kids(&t, 4), [13, 22, 31]);
    assert_eq!(kids(&t, 12), [21, 30, 39]);
}

/// Eq. (1)–(2) for ready-to-send numbers advancing one iteration per send:
/// `R(t) = 1` for `0 <= t < hop`, `R(t) = R(t - 1) + R(t - hop)` after, and the children of
/// `r` are `r + R(i + hop - 1)` for `i >= s'`, `R(s') > r`. Lamé of order k is `hop = k`; the
/// §3.2.3 optimal tree with `o = 1` is `hop = 2 + L` (children `r + R(i + o + L)`).
fn equation_2_children(n: u32, hop: usize) -> Vec<Vec<u32>> {
    let mut ready: Vec<u64> = Vec::new();
    let mut r_at = |t: usize| -> u64 {
        while ready.len() <= t {
            let i = ready.len();
            let v = if i < hop { 1 } else { ready[i - 1] + ready[i - hop] };
            ready.push(v.min(u64::from(u32::MAX) * 4));
        }
        ready[t]
    };
    let mut out = vec![Vec::new(); n as usize];
    for r in 0..n {
        let mut s = 0;
        while r_at(s) <= u64::from(r) {
            s += 1;
        }
        for i in s.. {
            let c = u64::from(r) + r_at(i + hop - 1);
            if c >= u64::from(n) {
                break;
            }
            out[r as usize].push(c as u32);
        }
    }
    out
}

#[test]
fn lame_and_binomial_follow_equation_2() {
    for k in 1..=6u32 {
        for n in (1..=130).chain([500, 1000, 2047, 2048, 2049]) {
            let t = build(TreeKind::Lame(k), Order::Interleaved, n);
            let want = equation_2_children(n, k as usize);
            for r in 0..n {
                assert_eq!(t.children(r), want[r as usize], "k={k} n={n} r={r}");
            }
        }
    }
    // Binomial, simplified: children r + 2^i, i >= s', 2^s' > r.
    for n in 1..=1100u32 {
        let t = build(TreeKind::Binomial, Order::Interleaved, n);
        for r in 0..n {
            let s = (0..).find(|&s| 1u64 << s > u64::from(r)).unwrap();
            let want: Vec<u32> = (s..33)
                .map(|i| u64::from(r) + (1u64 << i))
                .take_while(|&c| c < u64::from(n))
                .map(|c| c as u32)
                .collect();
            assert_eq!(t.children(r), want, "n={n} r={r}");
        }
    }
}

#[test]
fn optimal_tree_with_o_1_follows_equation_2_and_is_lame_2_plus_l() {
    for l in 0..=6u64 {
        let logp = lp(l, 1);
        for n in (1..=150).chain([777, 2000]) {
            let t = Tree::build(TreeKind::Optimal, Order::Interleaved, n, logp).unwrap();
            let want = equation_2_children(n, 2 + l as usize);
            for r in 0..n {
                assert_eq!(t.children(r), want[r as usize], "L={l} n={n} r={r}");
            }
            let lame = build(TreeKind::Lame(2 + l as u32), Order::Interleaved, n);
            assert_eq!(t.children, lame.children);
        }
    }
    // Figure 5's remark: L = o = 1 gives the Lamé tree of order 3.
    for n in 1..=3000 {
        let t = Tree::build(TreeKind::Optimal, Order::Interleaved, n, lp(1, 1)).unwrap();
        let lame = build(TreeKind::Lame(3), Order::Interleaved, n);
        assert_eq!((t.parent, t.children), (lame.parent, lame.children));
    }
}

#[test]
fn optimal_tree_is_the_greedy_logp_schedule() {
    for (l, o) in [(0, 1), (2, 1), (4, 2), (1, 3), (7, 3), (0, 5), (13, 4)] {
        let logp = lp(l, o);
        let (parent, colored) = ready_to_send(3000, o, 2 * o + l).unwrap();
        let t = Tree::build(TreeKind::Optimal, Order::Interleaved, 3000, logp).unwrap();
        assert_eq!(t.parent, parent);
        // The construction's coloring times are the LogP arrival times, in rank order.
        let arrival = t.arrival_times(logp);
        assert_eq!(arrival, colored);
        assert!(arrival.windows(2).all(|w| w[0] <= w[1]));
        // Greedy: at any time, a colored process is either still sending or has been idle only
        // because nobody is left: the i-th child of r is sent at arrival[r] + i·o.
        for r in 0..t.len() {
            for (i, &c) in t.children(r).iter().enumerate() {
                assert_eq!(arrival[c as usize], arrival[r as usize] + i as Time * o + 2 * o + l);
            }
        }
        // Ties at one coloring time are broken by parent rank.
        for c in 2..t.len() as usize {
            if arrival[c - 1] == arrival[c] {
                assert!(t.parent[c - 1] < t.parent[c]);
            }
        }
    }
}

// ---- brute-force optimum --------------------------------------------------------------------

/// Minimal LogP broadcast latency over all trees of each size, by splitting a tree into the
/// root's first child's subtree (colored at 2o + L) and the rest (root free again at o).
fn dp_optimum(n: usize, logp: LogP) -> Vec<Time> {
    let mut best = vec![0; n + 1];
    for m in 2..=n {
        best[m] = (1..m)
            .map(|a| (logp.hop() + best[a]).max(logp.o + best[m - a]))
            .min()
            .unwrap();
    }
    best
}

/// Latencies of every ordered tree (children in send order) of every size up to `n`.
fn all_ordered_tree_latencies(n: usize, logp: LogP) -> Vec<Vec<Time>> {
    let mut all: Vec<Vec<Time>> = vec![Vec::new(), vec![0]];
    for m in 2..=n {
        let mut v = Vec::new();
        for a in 1..m {
            for &x in &all[a] {
                for &y in &all[m - a] {
                    v.push((logp.hop() + x).max(logp.o + y));
                }
            }
        }
        all.push(v);
    }
    all
}

/// Minimal latency over every parent array with `parent[c] < c`, children sent in rank order:
/// every ordered tree has such a labelling (its preorder), so this covers all trees.
fn min_over_labelled_trees(n: usize, logp: LogP) -> Time {
    fn go(c: usize, n: usize, logp: LogP, arrival: &mut [Time], sent: &mut [Time], worst: Time) -> Time {
        if c == n {
            return worst;
        }
        let mut best = Time::MAX;
        for p in 0..c {
            arrival[c] = arrival[p] + sent[p] * logp.o + logp.hop();
            sent[p] += 1;
            best = best.min(go(c + 1, n, logp, arrival, sent, worst.max(arrival[c])));
            sent[p] -= 1;
        }
        best
    }
    go(1, n, logp, &mut vec![0; n], &mut vec![0; n], 0)
}

#[test]
fn optimal_tree_matches_brute_force_optimum() {
    let params = [
        (0, 1),
        (1, 1),
        (2, 1),
        (3, 1),
        (1, 2),
        (4, 2),
        (2, 3),
        (5, 3),
        (10, 1),
        (1, 4),
    ];
    for (l, o) in params {
        let logp = lp(l, o);
        let best = dp_optimum(300, logp);
        let all = all_ordered_tree_latencies(12, logp);
        for n in 1..=300usize {
            let t = Tree::build(TreeKind::Optimal, Order::Interleaved, n as u32, logp).unwrap();
            assert_eq!(t.dissemination_latency(logp), best[n], "L={l} o={o} n={n}");
            // The in-order numbering has the same shape and the same latency.
            let t = Tree::build(TreeKind::Optimal, Order::InOrder, n as u32, logp).unwrap();
            assert_eq!(t.dissemination_latency(logp), best[n]);
            if n <= 12 {
                assert_eq!(*all[n].iter().min().unwrap(), best[n], "L={l} o={o} n={n}");
            }
            if n <= 10 {
                assert_eq!(min_over_labelled_trees(n, logp), best[n], "L={l} o={o} n={n}");
            }
        }
    }
}

#[test]
fn no_tree_kind_beats_the_optimal_tree() {
    let others = [
        TreeKind::Kary(1),
        TreeKind::Kary(2),
        TreeKind::Kary(3),
        TreeKind::Kary(4),
        TreeKind::Binomial,
        TreeKind::Lame(2),
        TreeKind::Lame(3),
        TreeKind::Lame(4),
        TreeKind::Lame(5),
    ];
    for logp in [lp(2, 1), lp(1, 1), lp(4, 2), lp(0, 3), lp(9, 1)] {
        for n in 1..=400 {
            let opt = Tree::build(TreeKind::Optimal, Order::Interleaved, n, logp).unwrap();
            let best = opt.dissemination_latency(logp);
            for kind in others {
                let t = Tree::build(kind, Order::Interleaved, n, logp).unwrap();
                assert!(t.dissemination_latency(logp) >= best, "{kind:?} n={n}");
            }
        }
    }
}

// ---- numbering ------------------------------------------------------------------------------

#[test]
fn in_order_numbering_is_the_same_shape_in_preorder() {
    let mut kinds = interleaved_kinds();
    kinds.push((TreeKind::Optimal, lp(7, 3)));
    for (kind, logp) in kinds {
        for n in [1u32, 2, 3, 7, 8, 9, 100, 257, 1000] {
            let inter = Tree::build(kind, Order::Interleaved, n, logp).unwrap();
            let ord = Tree::build(kind, Order::InOrder, n, logp).unwrap();
            // Preorder: every subtree is a contiguous block starting at its root, and the
            // children's blocks follow each other in send order.
            for r in 0..n {
                let sub = subtree(&ord, r);
                assert_eq!(sub, (r..r + sub.len() as u32).collect::<Vec<_>>());
                let mut next = r + 1;
                for &c in ord.children(r) {
                    assert_eq!(c, next);
                    next += subtree(&ord, c).len() as u32;
                }
            }
            // Same shape: map interleaved ranks to preorder positions and compare.
            let (pre, _) = inter.preorder();
            for r in 0..n {
                let mapped: Vec<u32> = inter.children(r).iter().map(|&c| pre[c as usize]).collect();
                assert_eq!(ord.children(pre[r as usize]), mapped);
            }
            assert_eq!(ord.height(), inter.height());
            let mut a = inter.arrival_times(logp);
            let mut b = ord.arrival_times(logp);
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b);
        }
    }
}

// ---- Definition 1 ---------------------------------------------------------------------------

fn assert_interleaved_for_every_n(kind: TreeKind, logp: LogP) {
    for n in 1..=4096 {
        let t = Tree::build(kind, Order::Interleaved, n, logp).unwrap();
        assert!(t.is_interleaved(), "{kind:?} {logp:?} n={n} is not interleaved");
    }
}

#[test]
fn definition_1_holds_for_kary_trees_for_every_n() {
    for k in [2, 3, 4] {
        assert_interleaved_for_every_n(TreeKind::Kary(k), DEFAULT);
    }
}

#[test]
fn definition_1_holds_for_binomial_and_lame_trees_for_every_n() {
    assert_interleaved_for_every_n(TreeKind::Binomial, DEFAULT);
    assert_interleaved_for_every_n(TreeKind::Lame(2), DEFAULT);
    assert_interleaved_for_every_n(TreeKind::Lame(3), DEFAULT);
}

#[test]
fn definition_1_holds_for_optimal_trees_for_every_n() {
    for logp in [lp(1, 1), lp(2, 1), lp(4, 2)] {
        assert_interleaved_for_every_n(TreeKind::Optimal, logp);
    }
}

#[test]
fn optimal_tree_is_interleaved_iff_o_divides_l() {
    // Lemma 1 needs the processes sending at one instant to be a prefix of the ranks. With the
    // greedy schedule that holds iff every event lies on the o-grid, i.e. iff o | 2o + L.
    for o in 1..=4 {
        for l in 0..=8 {
            let always = (1..=300).all(|n| {
                Tree::build(TreeKind::Optimal, Order::Interleaved, n, lp(l, o))
                    .unwrap()
                    .is_interleaved()
            });
            assert_eq!(always, l % o == 0, "L={l} o={o}");
        }
    }
    // Smallest case: L = 1, o = 2, n = 15. Ranks 13 (below 4) and 14 (a child of 1) are ring
    // neighbours, both below the root's child 1, and neither descends from the other.
    let t = Tree::build(TreeKind::Optimal, Order::Interleaved, 15, lp(1, 2)).unwrap();
    assert_eq!((t.parent(13), t.parent(4), t.parent(14)), (Some(4), Some(1), Some(1)));
    assert!(!t.is_interleaved() && !naive_interleaved(&t));
    assert!(
        Tree::build(TreeKind::Optimal, Order::Interleaved, 14, lp(1, 2))
            .unwrap()
            .is_interleaved()
    );
}

#[test]
fn in_order_trees_are_interleaved_only_when_no_inner_node_branches() {
    // In preorder the last rank below one child of w and the next child of w are ring
    // neighbours in every subtree containing w, so any branching non-root node breaks
    // Definition 1 (Figure 3 left: 2 and 3 below 1); without one the tree is a star of chains.
    let mut kinds = interleaved_kinds();
    kinds.extend([(TreeKind::Kary(1), DEFAULT), (TreeKind::Lame(40), DEFAULT)]);
    for (kind, logp) in kinds {
        for n in 1..=400 {
            let t = Tree::build(kind, Order::InOrder, n, logp).unwrap();
            let branching = (1..n).any(|r| t.children(r).len() >= 2);
            assert_eq!(t.is_interleaved(), !branching, "{kind:?} n={n}");
        }
    }
    assert!(!build(TreeKind::Kary(2), Order::InOrder, 7).is_interleaved());
    assert!(!build(TreeKind::Binomial, Order::InOrder, 8).is_interleaved());
    assert!(!build(TreeKind::Lame(3), Order::InOrder, 9).is_interleaved());
}

#[test]
fn is_interleaved_agrees_with_definition_1_verbatim() {
    let mut kinds = interleaved_kinds();
    kinds.extend([(TreeKind::Kary(1), DEFAULT), (TreeKind::Optimal, lp(7, 3))]);
    for (kind, logp) in kinds {
        for order in [Order::Interleaved, Order::InOrder] {
            for n in 1..=70 {
                let t = Tree::build(kind, order, n, logp).unwrap();
                assert_eq!(t.is_interleaved(), naive_interleaved(&t), "{kind:?} {order:?} n={n}");
            }
        }
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut outcomes = [0u32; 2];
    for _ in 0..3000 {
        let n = 1 + rng.below(30) as usize;
        let case = rng.below(3);
        let parent = match case {
            // Uniform random recursive tree.
            0 => (0..n)
                .map(|c| if c == 0 { NONE } else { rng.below(c as u64) as u32 })
                .collect(),
            // A ready-to-send schedule whose hop is a multiple of its step is interleaved
            // (Lemma 1) ...
            1 => {
                let step = 1 + rng.below(4);
                ready_to_send(n as u32, step, step * (1 + rng.below(5))).unwrap().0
            }
            // ... and moving one process elsewhere often breaks it.
            _ => {
                let mut p = ready_to_send(n as u32, 1 + rng.below(3), 1 + rng.below(6)).unwrap().0;
                if n > 2 {
                    let c = 2 + rng.below(n as u64 - 2) as usize;
                    p[c] = rng.below(c as u64) as u32;
                }
                p
            }
        };
        let t = Tree::from_parents(TreeKind::Binomial, Order::Interleaved, parent);
        let fast = t.is_interleaved();
        assert_eq!(fast, naive_interleaved(&t), "{:?}", t.parent);
        assert!(fast || case != 1, "{:?}", t.parent);
        outcomes[usize::from(fast)] += 1;
    }
    assert!(outcomes.iter().all(|&k| k > 300), "{outcomes:?}");
}

// ---- scale ----------------------------------------------------------------------------------

#[test]
fn builds_a_million_processes() {
    let n = 1 << 20;
    let mut kinds = interleaved_kinds();
    kinds.push((TreeKind::Kary(1), DEFAULT));
    for (kind, logp) in kinds {
        for order in [Order::Interleaved, Order::InOrder] {
            let t = Tree::build(kind, order, n, logp).unwrap();
            assert_eq!(t.len(), n);
            assert!(t.dissemination_latency(logp) > 0);
        }
    }
    let t = build(TreeKind::Binomial, Order::Interleaved, n);
    assert_eq!((t.height(), kids(&t, 0).len()), (20, 20));
    assert!(t.is_interleaved());
    assert!(build(TreeKind::Kary(1), Order::Interleaved, n).is_interleaved());
}
