//! ERA's trees (§2, Figure 1, and §4 "Topologies"): the `Parent(S, p)` and `Children(S, p)`
//! functions over a membership, for binary, star and string trees and hierarchical X/Y trees
//! (groups of co-located ranks organised by a Y tree inside, their leaders by an X tree).
//!
//! Positions are the members in increasing rank order, so every initial ancestor of a member
//! has a smaller rank than it. `Parent` is the nearest live initial ancestor (`max Anc` in the
//! paper's binary numbering), else the smallest live elder, else `⊥` (the member is root);
//! `Children(S, p) = {q : Parent(S, q) = p}`, computed by descending through dead members.

use crate::protocol::Rank;

const NONE: u32 = u32::MAX;

/// A flat tree shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flat {
    /// Heap-numbered binary tree: the parent of position `p` is `(p - 1) / 2`.
    Binary,
    /// Every position is a child of position 0.
    Star,
    /// A chain: the parent of `p` is `p - 1`.
    String,
}

impl Flat {
    fn parent(self, p: u32) -> u32 {
        match self {
            _ if p == 0 => NONE,
            Flat::Binary => (p - 1) / 2,
            Flat::Star => 0,
            Flat::String => p - 1,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Flat::Binary => "bin",
            Flat::Star => "star",
            Flat::String => "string",
        }
    }

    fn parse(s: &str) -> Option<Flat> {
        match s {
            "bin" | "binary" => Some(Flat::Binary),
            "star" => Some(Flat::Star),
            "string" => Some(Flat::String),
            _ => None,
        }
    }
}

/// An ERA tree shape: flat, or hierarchical X/Y over groups of `group` consecutive ranks
/// (rank / group = the host; §4's "bin/star", "bin/bin").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Flat(Flat),
    Hier { outer: Flat, inner: Flat, group: u32 },
}

impl std::str::FromStr for Shape {
    type Err = String;

    /// `bin` (or `binary`), `star`, `string`, or `X/Y:G` such as `bin/star:8`.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("bad ERA tree '{s}': expected bin, star, string or X/Y:G (e.g. bin/bin:8)");
        if let Some(f) = Flat::parse(s) {
            return Ok(Shape::Flat(f));
        }
        let (xy, g) = s.split_once(':').ok_or_else(bad)?;
        let (x, y) = xy.split_once('/').ok_or_else(bad)?;
        let group: u32 = g.parse().map_err(|_| bad())?;
        if group == 0 {
            return Err(format!("bad ERA tree '{s}': the group size must be at least 1"));
        }
        Ok(Shape::Hier {
            outer: Flat::parse(x).ok_or_else(bad)?,
            inner: Flat::parse(y).ok_or_else(bad)?,
            group,
        })
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shape::Flat(x) => f.write_str(x.name()),
            Shape::Hier { outer, inner, group } => write!(f, "{}/{}:{group}", outer.name(), inner.name()),
        }
    }
}

/// One ERA tree over a membership (the initial tree, with no process marked dead).
#[derive(Clone, Debug)]
pub struct EraTree {
    shape: Shape,
    members: Vec<Rank>,
    /// rank → position (or NONE), over ranks `0..n`.
    pos: Vec<u32>,
    parent: Vec<u32>,
    child_start: Vec<u32>,
    child_list: Vec<u32>,
}

impl EraTree {
    /// The tree of `shape` over `members` (distinct ranks below `n`; sorted here).
    pub fn new(shape: Shape, mut members: Vec<Rank>, n: Rank) -> Self {
        members.sort_unstable();
        members.dedup();
        members.retain(|&r| r < n);
        let m = members.len() as u32;
        let mut pos = vec![NONE; n as usize];
        for (i, &r) in members.iter().enumerate() {
            pos[r as usize] = i as u32;
        }
        let parent: Vec<u32> = match shape {
            Shape::Flat(f) => (0..m).map(|p| f.parent(p)).collect(),
            Shape::Hier { outer, inner, group } => {
                // Group index and local index of every position; first position of each group.
                let mut gi = Vec::with_capacity(m as usize);
                let mut li = Vec::with_capacity(m as usize);
                let mut first = Vec::new();
                for (i, &r) in members.iter().enumerate() {
                    let host = r / group;
                    let new_group = i == 0 || members[i - 1] / group != host;
                    if new_group {
                        first.push(i as u32);
                    }
                    let g = first.len() as u32 - 1;
                    gi.push(g);
                    li.push(i as u32 - first[g as usize]);
                }
                (0..m as usize)
                    .map(|p| {
                        let (g, l) = (gi[p], li[p]);
                        if l > 0 {
                            first[g as usize] + inner.parent(l)
                        } else if g > 0 {
                            first[outer.parent(g) as usize]
                        } else {
                            NONE
                        }
                    })
                    .collect()
            }
        };
        let mut count = vec![0u32; m as usize + 1];
        for &p in &parent {
            if p != NONE {
                count[p as usize + 1] += 1;
            }
        }
        for i in 1..count.len() {
            count[i] += count[i - 1];
        }
        let child_start = count.clone();
        let mut child_list = vec![0u32; count[m as usize] as usize];
        for (c, &p) in parent.iter().enumerate() {
            if p != NONE {
                child_list[count[p as usize] as usize] = c as u32;
                count[p as usize] += 1;
            }
        }
        Self {
            shape,
            members,
            pos,
            parent,
            child_start,
            child_list,
        }
    }

    /// The tree over every rank `0..n`.
    pub fn full(shape: Shape, n: Rank) -> Self {
        Self::new(shape, (0..n).collect(), n)
    }

    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The members, in increasing rank order.
    pub fn members(&self) -> &[Rank] {
        &self.members
    }

    pub fn is_member(&self, r: Rank) -> bool {
        self.pos.get(r as usize).is_some_and(|&p| p != NONE)
    }

    fn init_children(&self, p: u32) -> &[u32] {
        let (a, b) = (self.child_start[p as usize], self.child_start[p as usize + 1]);
        &self.child_list[a as usize..b as usize]
    }

    fn alive(&self, dead: &[bool], p: u32) -> bool {
        !dead.get(self.members[p as usize] as usize).copied().unwrap_or(true)
    }

    /// `Parent(S, r)`: `dead` is `S` indexed by rank; `None` is `⊥` (r is root). `r` must be
    /// a member.
    pub fn parent(&self, dead: &[bool], r: Rank) -> Option<Rank> {
        let p = *self.pos.get(r as usize)?;
        if p == NONE {
            return None;
        }
        let mut a = self.parent[p as usize];
        while a != NONE {
            if self.alive(dead, a) {
                return Some(self.members[a as usize]);
            }
            a = self.parent[a as usize];
        }
        (0..p).find(|&q| self.alive(dead, q)).map(|q| self.members[q as usize])
    }

    /// `Children(S, r)` into `out` (cleared first).
    pub fn children(&self, dead: &[bool], r: Rank, out: &mut Vec<Rank>) {
        out.clear();
        let Some(&p) = self.pos.get(r as usize) else {
            return;
        };
        if p == NONE {
            return;
        }
        let root = self.parent(dead, r).is_none();
        // `out` is the work list (positions) and then the result (ranks): a position that is
        // `r` itself or dead is replaced by its children, a live one stays. No allocation
        // once `out` has grown (the failure detector asks at every check).
        if root {
            out.push(0);
        } else {
            out.extend_from_slice(self.init_children(p));
        }
        let mut i = 0;
        while let Some(&x) = out.get(i) {
            if x == p || !self.alive(dead, x) {
                out.swap_remove(i);
                out.extend_from_slice(self.init_children(x));
            } else {
                i += 1;
            }
        }
        for x in out.iter_mut() {
            *x = self.members[*x as usize];
        }
        out.sort_unstable();
    }

    /// Height and largest fan-out of the tree as mended for `dead` (the common view used to
    /// decide rebalancing, §4 "Topology Deterioration Mitigation").
    pub fn mended_shape(&self, dead: &[bool]) -> (u32, u32) {
        let mut kids = Vec::new();
        let Some(root) = self.members.iter().copied().find(|&r| !dead[r as usize]) else {
            return (0, 0);
        };
        let (mut height, mut fanout) = (0, 0);
        let mut level = vec![root];
        while !level.is_empty() {
            let mut next = Vec::new();
            for &r in &level {
                self.children(dead, r, &mut kids);
                fanout = fanout.max(kids.len() as u32);
                next.extend_from_slice(&kids);
            }
            if !next.is_empty() {
                height += 1;
            }
            level = next;
        }
        (height, fanout)
    }

    /// Height and fan-out of the initial tree.
    pub fn shape_stats(&self) -> (u32, u32) {
        self.mended_shape(&vec![false; self.pos.len()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ProtoRng;

    fn shapes() -> Vec<Shape> {
        [
            "bin",
            "star",
            "string",
            "bin/bin:4",
            "bin/star:3",
            "star/bin:5",
            "string/bin:2",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect()
    }

    #[test]
    fn figure_1_mended_trees() {
        // Figure 1b: binary tree of 7 with 1 dead: 0's children are 2, 3, 4.
        let t = EraTree::full(Shape::Flat(Flat::Binary), 7);
        let mut dead = vec![false; 7];
        dead[1] = true;
        let mut c = Vec::new();
        t.children(&dead, 0, &mut c);
        assert_eq!(c, vec![2, 3, 4]);
        assert_eq!(t.parent(&dead, 3), Some(0));
        // Figure 1a: star of 4 with 1 dead.
        let s = EraTree::full(Shape::Flat(Flat::Star), 4);
        let mut dead = vec![false; 4];
        dead[1] = true;
        s.children(&dead, 0, &mut c);
        assert_eq!(c, vec![2, 3]);
        // Root dead: the smallest live elder becomes everybody's parent.
        dead[0] = true;
        assert_eq!(s.parent(&dead, 2), None);
        assert_eq!(s.parent(&dead, 3), Some(2));
    }

    #[test]
    fn children_match_the_definition_for_random_dead_sets() {
        let mut rng = ProtoRng::new(3);
        let mut c = Vec::new();
        for shape in shapes() {
            for n in [1u32, 2, 7, 16, 23] {
                let members: Vec<Rank> = (0..n + 3).filter(|_| rng.below(5) != 0).collect();
                let t = EraTree::new(shape, members.clone(), n + 3);
                for _ in 0..20 {
                    let dead: Vec<bool> = (0..n + 3).map(|_| rng.below(3) == 0).collect();
                    for &p in &members {
                        if dead[p as usize] {
                            continue;
                        }
                        t.children(&dead, p, &mut c);
                        let want: Vec<Rank> = members
                            .iter()
                            .copied()
                            .filter(|&q| q != p && !dead[q as usize] && t.parent(&dead, q) == Some(p))
                            .collect();
                        assert_eq!(c, want, "{shape} n={n} p={p}");
                    }
                    // Exactly one live root: the smallest live member.
                    let roots: Vec<Rank> = members
                        .iter()
                        .copied()
                        .filter(|&q| !dead[q as usize] && t.parent(&dead, q).is_none())
                        .collect();
                    let min = members.iter().copied().find(|&q| !dead[q as usize]);
                    assert_eq!(roots, min.into_iter().collect::<Vec<_>>());
                }
            }
        }
    }

    #[test]
    fn hierarchical_trees_link_group_leaders() {
        // bin/star:4 over 12 ranks: hosts {0..3}, {4..7}, {8..11}; leaders 0, 4, 8 in a binary
        // tree, the others children of their leader.
        let t = EraTree::full("bin/star:4".parse().unwrap(), 12);
        let none = vec![false; 12];
        let mut c = Vec::new();
        t.children(&none, 0, &mut c);
        assert_eq!(c, vec![1, 2, 3, 4, 8]);
        t.children(&none, 4, &mut c);
        assert_eq!(c, vec![5, 6, 7]);
        assert_eq!(t.parent(&none, 9), Some(8));
        assert_eq!(t.shape_stats(), (2, 5));
        let b = EraTree::full("bin/bin:8".parse().unwrap(), 64);
        assert_eq!(b.shape_stats(), (6, 4));
        assert_eq!(EraTree::full(Shape::Flat(Flat::Binary), 15).shape_stats(), (3, 2));
        assert_eq!(EraTree::full(Shape::Flat(Flat::String), 5).shape_stats(), (4, 1));
    }

    #[test]
    fn shapes_parse_and_print() {
        for s in ["bin", "star", "string", "bin/star:16", "bin/bin:8"] {
            assert_eq!(s.parse::<Shape>().unwrap().to_string(), s);
        }
        for bad in ["", "tree", "bin/bin", "bin/bin:0", "bin/x:2", "bin/bin:-1"] {
            assert!(bad.parse::<Shape>().is_err(), "{bad}");
        }
    }
}
