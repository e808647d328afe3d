//! BMG paper Algorithm 1 (§3.2, §3.3): an oriented ring from any tree.
//!
//! Constants `Parent`, `Children`, `Id`; outputs `Pred`, `Succ`. Rules 1 and 3 are
//! spontaneous (a parent introduces itself to its first child; a leaf sends `Info` up to find
//! its successor), rules 2, 4, 5 and 6 consume messages. The ring is the tree's depth-first
//! preorder (Lemma A.3) closed by the root and the rightmost leaf (Lemma A.5).

use super::Outbox;
use crate::protocol::Rank;

/// The messages of Algorithm 1; each carries a process identifier `I`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingMsg {
    /// `(F_Connect, Id)`: a parent to its first child (rule 1 → rule 2).
    FConnect(Rank),
    /// `(Info, I)`: leaf `I` looks for its successor, going up the tree (rules 3, 4).
    Info(Rank),
    /// `(Ask_Connect, I)`: a parent asks the next child to take leaf `I` as predecessor.
    AskConnect(Rank),
    /// `(B_Connect, Id)`: "I am your successor" (rules 4, 5 → rule 6).
    BConnect(Rank),
}

impl RingMsg {
    /// The identifier the message carries.
    pub fn ident(&self) -> Rank {
        match *self {
            RingMsg::FConnect(i) | RingMsg::Info(i) | RingMsg::AskConnect(i) | RingMsg::BConnect(i) => i,
        }
    }
}

/// Which outputs a rule assigned, and whether it overwrote a set value with another one (an
/// inconsistency: the process wakes up).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Assigned {
    pub succ: bool,
    pub pred: bool,
    pub changed: bool,
}

/// One process of Algorithm 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeToRing {
    pub id: Rank,
    pub parent: Option<Rank>,
    pub children: Vec<Rank>,
    pub pred: Option<Rank>,
    pub succ: Option<Rank>,
}

/// `x = v`, reporting whether a set value was replaced by a different one.
pub(crate) fn assign(x: &mut Option<Rank>, v: Rank) -> bool {
    let changed = matches!(*x, Some(old) if old != v);
    *x = Some(v);
    changed
}

impl TreeToRing {
    /// A process with its tree constants and unset outputs (`⊥`, as §4 starts).
    pub fn new(id: Rank, parent: Option<Rank>, children: Vec<Rank>) -> Self {
        Self {
            id,
            parent,
            children,
            pred: None,
            succ: None,
        }
    }

    /// Rules 1 and 3, the spontaneous ones (exactly one applies to a process with a parent or
    /// a child). Rule 1: `Children ≠ ∅ → Succ = First(Children); Send (F_Connect, Id) to
    /// Succ`. Rule 3: `Children = ∅ → Send (Info, Id) to Parent`.
    pub fn spontaneous(&mut self, out: &mut Outbox<RingMsg>) -> Assigned {
        if let Some(&first) = self.children.first() {
            let changed = assign(&mut self.succ, first);
            out.push((first, RingMsg::FConnect(self.id)));
            Assigned {
                succ: true,
                changed,
                ..Assigned::default()
            }
        } else {
            if let Some(p) = self.parent {
                out.push((p, RingMsg::Info(self.id)));
            }
            Assigned::default()
        }
    }

    /// Rules 2, 4, 5 and 6: `msg` received from `p`.
    pub fn on_message(&mut self, p: Rank, msg: RingMsg, out: &mut Outbox<RingMsg>) -> Assigned {
        let mut a = Assigned::default();
        match msg {
            // Rule 2: if p = Parent then Pred = I.
            RingMsg::FConnect(i) => {
                if Some(p) == self.parent {
                    a.changed = assign(&mut self.pred, i);
                    a.pred = true;
                }
            }
            // Rule 4: if p ∈ Children, hand leaf I to the next child, or up, or (the root)
            // take it as predecessor.
            RingMsg::Info(i) => {
                if let Some(at) = self.children.iter().position(|&c| c == p) {
                    if let Some(&q) = self.children.get(at + 1) {
                        out.push((q, RingMsg::AskConnect(i)));
                    } else if let Some(parent) = self.parent {
                        out.push((parent, RingMsg::Info(i)));
                    } else {
                        a.changed = assign(&mut self.pred, i);
                        a.pred = true;
                        out.push((i, RingMsg::BConnect(self.id)));
                    }
                }
            }
            // Rule 5: Pred = I; Send (B_Connect, Id) to I.
            RingMsg::AskConnect(i) => {
                a.changed = assign(&mut self.pred, i);
                a.pred = true;
                out.push((i, RingMsg::BConnect(self.id)));
            }
            // Rule 6: Succ = I.
            RingMsg::BConnect(i) => {
                a.changed = assign(&mut self.succ, i);
                a.succ = true;
            }
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_act_as_written() {
        // Root 0 with children [1, 2]; 1 has the leaf child 3.
        let mut root = TreeToRing::new(0, None, vec![1, 2]);
        let mut out = Vec::new();
        let a = root.spontaneous(&mut out);
        assert!(a.succ && !a.changed);
        assert_eq!(root.succ, Some(1));
        assert_eq!(out, [(1, RingMsg::FConnect(0))]);
        out.clear();
        // Info from a non-last child goes to the next child as Ask_Connect.
        root.on_message(1, RingMsg::Info(3), &mut out);
        assert_eq!(out, [(2, RingMsg::AskConnect(3))]);
        out.clear();
        // From the last child, the root takes the leaf as predecessor.
        let a = root.on_message(2, RingMsg::Info(2), &mut out);
        assert!(a.pred);
        assert_eq!(root.pred, Some(2));
        assert_eq!(out, [(2, RingMsg::BConnect(0))]);
        out.clear();
        // Info from a non-child is ignored.
        root.on_message(3, RingMsg::Info(3), &mut out);
        assert!(out.is_empty());

        let mut leaf = TreeToRing::new(3, Some(1), vec![]);
        leaf.spontaneous(&mut out);
        assert_eq!(out, [(1, RingMsg::Info(3))]);
        out.clear();
        // F_Connect only counts from the parent.
        assert_eq!(leaf.on_message(0, RingMsg::FConnect(0), &mut out), Assigned::default());
        assert_eq!(leaf.pred, None);
        leaf.on_message(1, RingMsg::FConnect(1), &mut out);
        assert_eq!(leaf.pred, Some(1));
        leaf.on_message(2, RingMsg::BConnect(2), &mut out);
        assert_eq!(leaf.succ, Some(2));
        let a = leaf.on_message(0, RingMsg::BConnect(0), &mut out);
        assert!(a.changed && a.succ);
        assert!(out.is_empty());

        let mut mid = TreeToRing::new(1, Some(0), vec![3]);
        mid.on_message(3, RingMsg::Info(3), &mut out);
        assert_eq!(out, [(0, RingMsg::Info(3))]);
        out.clear();
        mid.on_message(0, RingMsg::AskConnect(7), &mut out);
        assert_eq!(mid.pred, Some(7));
        assert_eq!(out, [(7, RingMsg::BConnect(1))]);
    }
}
