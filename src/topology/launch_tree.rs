//! Launch trees: the spanning tree a launcher deploys processes along, which the BMG
//! overlay starts from (BMG paper §3: every process knows its parent and its ordered list of
//! children). §4 simulates binary and binomial trees (fully balanced, by depth) and random
//! trees (by depth and maximal degree).

use super::tree::{Order, Tree, TreeKind};
use crate::model::LogP;

/// A source of uniform draws for random launch trees (the protocols' seeded generator
/// implements it, so a run's trees follow from its seed).
pub trait UniformBelow {
    /// A uniform value in `0..bound`; `bound > 0`.
    fn below(&mut self, bound: u32) -> u32;
}

/// A rooted tree over ids `0..n` with ordered children (the order Algorithm 1 follows).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchTree {
    parent: Vec<Option<u32>>,
    children: Vec<Vec<u32>>,
    root: u32,
}

/// The launch-tree shapes of BMG paper §4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchShape {
    /// Fully balanced binary tree of the given depth: `2^(depth+1) - 1` processes.
    Binary { depth: u32 },
    /// Binomial tree of the given depth (`2^depth` processes), children largest subtree first.
    Binomial { depth: u32 },
    /// Random tree: every process above `depth` has 1 to `degree` children, uniformly.
    Random { depth: u32, degree: u32 },
}

impl std::fmt::Display for LaunchShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaunchShape::Binary { .. } => f.write_str("binary"),
            LaunchShape::Binomial { .. } => f.write_str("binomial"),
            LaunchShape::Random { degree, .. } => write!(f, "random(deg<={degree})"),
        }
    }
}

impl LaunchTree {
    /// Builds a tree of `shape`; random trees draw from `rng`. Errors (one line) when the tree
    /// would exceed `max_nodes` processes or the depth is too large for `u32` ids.
    pub fn build(shape: LaunchShape, max_nodes: u32, rng: &mut impl UniformBelow) -> Result<LaunchTree, String> {
        let too_big = || format!("a {shape} launch tree of that depth exceeds {max_nodes} processes");
        match shape {
            LaunchShape::Binary { depth } => {
                let n = 1u64
                    .checked_shl(depth + 1)
                    .map(|x| x - 1)
                    .filter(|&n| n <= u64::from(max_nodes));
                Self::from_topology(TreeKind::Kary(2), n.ok_or_else(too_big)? as u32)
            }
            LaunchShape::Binomial { depth } => {
                let n = 1u64.checked_shl(depth).filter(|&n| n <= u64::from(max_nodes));
                Self::from_topology(TreeKind::Binomial, n.ok_or_else(too_big)? as u32)
            }
            LaunchShape::Random { depth, degree } => {
                if degree == 0 {
                    return Err("a random launch tree needs a maximal degree of at least 1".into());
                }
                let mut parent = vec![None];
                let mut level = vec![0u32];
                let mut at = 0;
                while at < parent.len() {
                    if level[at] < depth {
                        for _ in 0..=rng.below(degree) {
                            if parent.len() >= max_nodes as usize {
                                return Err(too_big());
                            }
                            parent.push(Some(at as u32));
                            level.push(level[at] + 1);
                        }
                    }
                    at += 1;
                }
                Self::from_parents(parent)
            }
        }
    }

    /// The k-ary or binomial tree of [`crate::topology::tree`], children in its send order.
    fn from_topology(kind: TreeKind, n: u32) -> Result<LaunchTree, String> {
        Ok(Self::from_tree(&Tree::build(
            kind,
            Order::Interleaved,
            n,
            LogP::new(0, 1)?,
        )?))
    }

    /// The launch tree of a topology tree rooted at 0 (the runtime bootstrap's), children in
    /// its send order.
    pub fn from_tree(t: &Tree) -> LaunchTree {
        let n = t.len();
        LaunchTree {
            parent: (0..n).map(|r| t.parent(r)).collect(),
            children: (0..n).map(|r| t.children(r).to_vec()).collect(),
            root: 0,
        }
    }

    /// A tree from each id's parent (`None` for the single root); children are ordered by id.
    /// Errors unless the parents form one tree over all ids.
    pub fn from_parents(parent: Vec<Option<u32>>) -> Result<LaunchTree, String> {
        let n = parent.len();
        let mut children = vec![Vec::new(); n];
        let mut root = None;
        for (c, p) in parent.iter().enumerate() {
            match *p {
                None if root.is_some() => return Err("a launch tree has exactly one root".into()),
                None => root = Some(c as u32),
                Some(p) if p as usize >= n || p as usize == c => {
                    return Err(format!("process {c} has an invalid parent {p}"));
                }
                Some(p) => children[p as usize].push(c as u32),
            }
        }
        let root = root.ok_or("a launch tree needs a root")?;
        let t = LaunchTree { parent, children, root };
        if t.ring_order().len() != n {
            return Err("the parents do not form a single tree (a cycle)".into());
        }
        Ok(t)
    }

    /// The tree once process `dead` has crashed and been excised, as ERA mends its tree: its
    /// children take its place, in order, in its parent's list (a dead root's first child
    /// becomes the root and adopts its siblings). The ring (the preorder) is then the old one
    /// without `dead`. Identifiers keep their meaning: [`LaunchTree::len`] stays the same and
    /// `dead` is in no ring. Errors if `dead` is not in the tree or is the last process.
    pub fn without(&self, dead: u32) -> Result<LaunchTree, String> {
        let mut t = self.clone();
        let d = dead as usize;
        if d >= t.parent.len() || !self.ring_order().contains(&dead) {
            return Err(format!("process {dead} is not in the tree"));
        }
        let orphans = std::mem::take(&mut t.children[d]);
        match t.parent[d].take() {
            Some(p) => {
                for &o in &orphans {
                    t.parent[o as usize] = Some(p);
                }
                let list = &mut t.children[p as usize];
                let at = list.iter().position(|&c| c == dead).ok_or("inconsistent tree")?;
                list.splice(at..=at, orphans);
            }
            None => {
                let (&root, rest) = orphans.split_first().ok_or("the last process cannot be removed")?;
                t.parent[root as usize] = None;
                for &o in rest {
                    t.parent[o as usize] = Some(root);
                }
                t.children[root as usize].extend_from_slice(rest);
                t.root = root;
            }
        }
        Ok(t)
    }

    /// Identifiers `0..len()` (a crashed process keeps its identifier, out of the tree).
    #[allow(clippy::len_without_is_empty)] // a tree always has its root
    pub fn len(&self) -> u32 {
        self.parent.len() as u32
    }

    /// The root (the process without a parent).
    pub fn root(&self) -> u32 {
        self.root
    }

    /// Parent of `p`, `None` for the root.
    pub fn parent(&self, p: u32) -> Option<u32> {
        self.parent[p as usize]
    }

    /// Ordered children of `p`.
    pub fn children(&self, p: u32) -> &[u32] {
        &self.children[p as usize]
    }

    /// Largest depth of a process.
    pub fn depth(&self) -> u32 {
        let mut d = vec![0u32; self.parent.len()];
        let mut best = 0;
        for p in self.ring_order() {
            if let Some(q) = self.parent[p as usize] {
                d[p as usize] = d[q as usize] + 1;
                best = best.max(d[p as usize]);
            }
        }
        best
    }

    /// Largest number of children of a process.
    pub fn max_degree(&self) -> u32 {
        self.children.iter().map(|c| c.len() as u32).max().unwrap_or(0)
    }

    /// The ring Algorithm 1 builds: the depth-first preorder of the tree, children in order
    /// (BMG paper Lemma A.3: `SU_p = T_p`, a parent's successor is its first child and the
    /// rightmost leaf of a child's subtree is followed by the next child). Only the ids
    /// reachable from the root appear.
    pub fn ring_order(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.parent.len());
        let mut stack = vec![self.root];
        while let Some(p) = stack.pop() {
            if out.len() > self.parent.len() {
                break;
            }
            out.push(p);
            stack.extend(self.children[p as usize].iter().rev());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ProtoRng;

    fn build(shape: LaunchShape) -> LaunchTree {
        LaunchTree::build(shape, 1 << 20, &mut ProtoRng::new(7)).unwrap()
    }

    #[test]
    fn balanced_shapes_have_their_sizes_and_depths() {
        for depth in 0..10 {
            let b = build(LaunchShape::Binary { depth });
            assert_eq!(b.len(), (1 << (depth + 1)) - 1);
            assert_eq!(b.depth(), depth);
            assert!(b.max_degree() <= 2);
            let m = build(LaunchShape::Binomial { depth });
            assert_eq!(m.len(), 1 << depth);
            assert_eq!(m.depth(), depth);
            assert_eq!(m.max_degree(), depth);
            // Binomial children come largest subtree first: the last child is a leaf.
            for p in 0..m.len() {
                if let Some(&last) = m.children(p).last() {
                    assert!(m.children(last).is_empty());
                }
            }
        }
    }

    #[test]
    fn random_trees_respect_depth_and_degree() {
        let mut rng = ProtoRng::new(3);
        for _ in 0..50 {
            let t = LaunchTree::build(LaunchShape::Random { depth: 5, degree: 3 }, 1 << 20, &mut rng).unwrap();
            assert_eq!(t.depth(), 5);
            assert!(t.max_degree() <= 3);
            assert_eq!(t.ring_order().len() as u32, t.len());
        }
        let err = LaunchTree::build(LaunchShape::Random { depth: 30, degree: 4 }, 1000, &mut rng);
        assert!(err.is_err());
        assert!(LaunchTree::build(LaunchShape::Binary { depth: 40 }, u32::MAX, &mut rng).is_err());
    }

    #[test]
    fn a_crashed_process_leaves_the_ring_and_nothing_else() {
        let t = build(LaunchShape::Binomial { depth: 5 });
        for dead in 0..t.len() {
            let m = t.without(dead).unwrap();
            let mut want = t.ring_order();
            want.retain(|&p| p != dead);
            assert_eq!(m.ring_order(), want, "dead {dead}");
            for p in m.ring_order() {
                for &c in m.children(p) {
                    assert_eq!(m.parent(c), Some(p));
                }
            }
            assert!(m.without(dead).is_err());
        }
        let two = LaunchTree::from_parents(vec![None, Some(0)]).unwrap();
        assert!(two.without(0).unwrap().without(1).is_err());
    }

    #[test]
    fn ring_order_is_preorder_and_parents_are_checked() {
        let t = LaunchTree::from_parents(vec![None, Some(0), Some(0), Some(1), Some(1), Some(2)]).unwrap();
        assert_eq!(t.ring_order(), [0, 1, 3, 4, 2, 5]);
        assert!(LaunchTree::from_parents(vec![None, None]).is_err());
        assert!(LaunchTree::from_parents(vec![None, Some(2), Some(1)]).is_err());
        assert!(LaunchTree::from_parents(vec![None, Some(9)]).is_err());
        assert!(LaunchTree::from_parents(vec![Some(1), Some(0)]).is_err());
    }
}
