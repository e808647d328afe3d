//! ERA Part 4, failures ([`Era::on_dead`]), and the neighbourhood the failure detector watches
//! ([`Era::neighbours`], §2).

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
}
