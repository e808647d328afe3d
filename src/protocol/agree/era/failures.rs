//! ERA Part 4, failures ([`Era::on_dead`]), the neighbourhood the failure detector watches
//! ([`Era::neighbours`], §2), and the processes it should probe at once ([`Era::poll_doubt`]).

use super::{Era, EraMsg, Slot, Status};
use crate::protocol::Rank;
use crate::protocol::agree::slots::AgreeId;
use crate::protocol::agree::value::Value;

impl<V: Value> Era<V> {
    /// ERA Part 4: process `q` is discovered dead (failure detector, or a RESULT_REQUEST).
    pub fn on_dead(&mut self, q: Rank) {
        if q as usize >= self.dead.len() || self.dead[q as usize] || q == self.me {
            return;
        }
        // Evaluate the old view S'_p first.
        let ids: Vec<AgreeId> = self
            .slots
            .iter()
            .filter_map(|(&id, s)| match s {
                Slot::Pending(p) if p.status != Status::NotContributed => Some(id),
                _ => None,
            })
            .collect();
        let mut lost_parent = Vec::new();
        let mut grandkids = Vec::new();
        for &id in &ids {
            let Some(Slot::Pending(p)) = self.slots.get(&id) else {
                continue;
            };
            let status = p.status;
            let old_parent = self.parent(id);
            if status == Status::Broadcasting && old_parent == Some(q) {
                lost_parent.push(id);
            }
            if status == Status::Gathering && old_parent.is_none() && self.children(id, self.me).contains(&q) {
                grandkids.push((id, self.children(id, q)));
            }
        }
        self.dead[q as usize] = true;
        self.known.insert(q);
        self.doubts.retain(|&d| d != q);
        self.version += 1;
        for id in lost_parent {
            match self.parent(id) {
                None => {
                    let kids = self.children(id, self.me);
                    if let Some(Slot::Pending(p)) = self.slots.get_mut(&id) {
                        p.contributed.clear();
                        p.contributed.insert(self.me);
                        p.status = Status::Gathering;
                    }
                    for n in kids {
                        self.request(id, n);
                    }
                }
                Some(par) => {
                    if let Some(Slot::Pending(p)) = self.slots.get(&id) {
                        let ballot = p.current.clone();
                        self.send(par, EraMsg::Up { id, ballot });
                    }
                }
            }
        }
        for (id, kids) in grandkids {
            for n in kids {
                self.request(id, n);
            }
        }
        for id in ids {
            self.spontaneous(id);
        }
    }

    /// The processes this one's failure detector must watch: its parent and children in
    /// every agreement it has entered and not decided, and in the latest tree (§2: "the
    /// local failure detector monitors only the processes appearing in its neighborhood").
    pub fn neighbours(&mut self, out: &mut Vec<Rank>) {
        out.clear();
        // Each epoch (the ids from its first to the next epoch's first; the first epoch also
        // below) that the next agreement or one in progress here uses: no allocation, this
        // runs at every check of the failure detector.
        for e in 0..self.epochs.len() {
            let from = if e == 0 { 0 } else { self.epochs[e].0 };
            let until = self.epochs.get(e + 1).map_or(AgreeId::MAX, |&(f, _)| f);
            let ours = |id: AgreeId| from <= id && id < until;
            let used = ours(self.next_id)
                || self
                    .slots
                    .iter()
                    .any(|(&id, s)| ours(id) && matches!(s, Slot::Pending(p) if p.status != Status::NotContributed));
            if !used {
                continue;
            }
            let t = &self.epochs[e].1;
            out.extend(t.parent(&self.dead, self.me));
            t.children(&self.dead, self.me, &mut self.kids);
            out.extend_from_slice(&self.kids);
        }
        out.sort_unstable();
        out.dedup();
    }

    /// An UP for agreement `id` came from `q`, unasked: if `q` is not a child of this process
    /// in its view, `q` sent it here because its own view has this process for its parent,
    /// i.e. `q` knows dead the processes between them: `Parent(S_p, q)` in this view and its
    /// ancestors up to this process, alive here still. ERA waits for the contribution of this
    /// process's child among them until its own failure detector finds it (Part 4; §2: "the
    /// local failure detector monitors only the processes appearing in its neighborhood"),
    /// which a heartbeat detector does only after a timeout: each of them is doubted
    /// ([`Era::poll_doubt`]), for the detector to probe now. Where the walk up does not come
    /// to this process, `q` takes it for the root (every process above it in the tree dead,
    /// §2's `Parent`): its own ancestors are doubted too. §5.1 ("Impact of Failures") finds
    /// the failure-detecting agreement's cost "strongly correlated to the network layer
    /// timeout and the propagation latency of failure information in the failure detector
    /// infrastructure": here failure information travels with the agreement's own messages.
    /// A doubt is no suspicion: the rules and `S_p` are as they were until the detector
    /// reports one, and a doubted live process only gets a heartbeat (so may one after a
    /// rebalancing that `q` made before this process did, whose trees differ for a while).
    pub(super) fn doubt_around(&mut self, id: AgreeId, q: Rank) {
        self.refresh_view(id);
        if self.view.kids.binary_search(&q).is_ok() {
            return;
        }
        if !self.doubt_up(id, q) {
            let me = self.me;
            self.doubt_up(id, me);
        }
    }

    /// Doubts every process above `from` in agreement `id`'s tree, up to this process or the
    /// root; whether the walk came to this process. Bounded by the tree's height (and,
    /// whatever the shape, by its size).
    fn doubt_up(&mut self, id: AgreeId, from: Rank) -> bool {
        let size = self.tree_for(id).members().len();
        let mut at = from;
        for _ in 0..size {
            let Some(a) = self.tree_for(id).parent(&self.dead, at) else {
                return false;
            };
            if a == self.me {
                return true;
            }
            self.doubt(a);
            at = a;
        }
        false
    }

    /// Doubts `a` unless it is known dead or already doubted.
    fn doubt(&mut self, a: Rank) {
        if a != self.me && !self.dead[a as usize] && !self.doubts.contains(&a) {
            self.doubts.push(a);
            self.counters.doubts += 1;
        }
    }

    /// The next process doubted (an UP came around it, unasked) and not marked dead since,
    /// if any: the driver's failure detector probes it ([`crate::protocol::Detector::probe`]);
    /// nothing changes here until the detector reports it ([`Era::on_dead`]).
    pub fn poll_doubt(&mut self) -> Option<Rank> {
        self.doubts.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::agree::{And64, EraConfig};

    /// A leaf `g` under a child `c` of the root 0 in the default tree of `n` processes.
    fn grandchild(n: Rank) -> (Rank, Rank) {
        let era: Era<And64> = Era::new(0, n, EraConfig::default()).unwrap();
        let (tree, alive) = (era.tree(), vec![false; n as usize]);
        let mut kids = Vec::new();
        (1..n)
            .find_map(|g| {
                tree.children(&alive, g, &mut kids);
                let c = tree.parent(&alive, g)?;
                (kids.is_empty() && c != 0 && tree.parent(&alive, c) == Some(0)).then_some((c, g))
            })
            .expect("a grandchild of the root")
    }

    /// An UP that came around a child (its sender knows the child dead, the root does not)
    /// makes the root doubt that child, once per doubt polled, and changes nothing else: the
    /// root still waits for the child. A child's own UP is no doubt, nor is the grandchild's
    /// once the root's detector reported the child dead (it is the root's child then).
    #[test]
    fn an_up_that_came_around_a_child_makes_the_root_doubt_it() {
        let n = 8;
        let (c, g) = grandchild(n);
        let mut root: Era<And64> = Era::new(0, n, EraConfig::default()).unwrap();
        let mut leaf: Era<And64> = Era::new(g, n, EraConfig::default()).unwrap();
        leaf.on_dead(c);
        leaf.agree(And64(!0)).unwrap();
        let (to, up) = leaf.poll_send().expect("the leaf's UP");
        assert_eq!(to, 0, "the leaf's UP goes around its dead parent {c}");
        root.agree(And64(!0)).unwrap();
        while root.poll_send().is_some() {}
        root.on_message(g, up.clone());
        assert_eq!(root.poll_doubt(), Some(c));
        assert_eq!(root.poll_doubt(), None);
        assert_eq!(root.counters.doubts, 1);
        assert!(!root.known_dead().contains(c), "a doubt is no suspicion");
        assert!(
            root.poll_outcome().is_none() && root.poll_send().is_none(),
            "the root waits for {c}"
        );

        // A child's own UP.
        let mut child: Era<And64> = Era::new(c, n, EraConfig::default()).unwrap();
        child.on_message(g, up.clone());
        assert_eq!(child.poll_doubt(), None, "{g} is {c}'s child");

        // The detector reports the child: the grandchild is the root's child, and a doubt
        // raised before the report is withdrawn.
        let mut told: Era<And64> = Era::new(0, n, EraConfig::default()).unwrap();
        told.agree(And64(!0)).unwrap();
        told.on_message(g, up.clone());
        told.on_dead(c);
        assert_eq!(told.poll_doubt(), None, "withdrawn once {c} is known dead");
        root.on_dead(c);
        root.on_message(g, up);
        assert_eq!(root.poll_doubt(), None);
        assert_eq!(root.counters.doubts, 1);
    }

    /// Every process an UP came around is doubted, not only the nearest to its sender: on a
    /// string 0-1-2-3, the root hears 3 (which knows 1 and 2 dead) and doubts both, its own
    /// child 1 among them. On the binary tree of 8, process 1 hears 5, which knows 2 and 0
    /// dead and takes 1 for the new root: 1 doubts 2 and 0, whose deaths make it root.
    #[test]
    fn an_up_around_several_processes_doubts_each() {
        let drain = |e: &mut Era<And64>| {
            let mut d: Vec<Rank> = std::iter::from_fn(|| e.poll_doubt()).collect();
            d.sort_unstable();
            d
        };
        let string = EraConfig {
            shape: "string".parse().unwrap(),
            ..EraConfig::default()
        };
        let mut q: Era<And64> = Era::new(3, 4, string).unwrap();
        q.on_dead(2);
        q.on_dead(1);
        q.agree(And64(!0)).unwrap();
        let (to, up) = q.poll_send().expect("an UP");
        assert_eq!(to, 0);
        let mut root: Era<And64> = Era::new(0, 4, string).unwrap();
        root.agree(And64(!0)).unwrap();
        root.on_message(3, up);
        assert_eq!(drain(&mut root), [1, 2]);

        let bin = EraConfig::default();
        let mut q: Era<And64> = Era::new(5, 8, bin).unwrap();
        q.on_dead(2);
        q.on_dead(0);
        q.agree(And64(!0)).unwrap();
        let (to, up) = q.poll_send().expect("an UP");
        assert_eq!(to, 1, "1 is the new root in 5's view");
        let mut one: Era<And64> = Era::new(1, 8, bin).unwrap();
        one.on_message(5, up);
        assert_eq!(drain(&mut one), [0, 2]);
        assert_eq!(one.counters.doubts, 2);
    }
}
