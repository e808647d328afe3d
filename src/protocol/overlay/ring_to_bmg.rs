//! BMG paper Algorithm 2 (§3.2, §3.4): a binomial graph from a ring of known size `N`.
//!
//! Inputs `Pred`, `Succ` (Algorithm 1's outputs), `N`, `Id`; outputs the finger tables `CW`
//! and `CCW`, where `CW[k]` is the process `2^k` steps clockwise on the ring. Rule 1 (guard
//! `⊥`: always enabled) introduces a process's two ring neighbours to each other; rules 2 and
//! 3 store the neighbour at distance `2^k` and introduce the two processes `2^(k+1)` apart,
//! with their bounds as written (rule 2 goes on while `2^(k+1) < N`, rule 3 while
//! `2^(k+1) <= N`, so for a power-of-two `N` rule 3 also fills level `log2 N`, the process
//! itself, which is why §4 sizes the tables `0..=log2 N`).
//!
//! Two readings of the text, both needed for the figures the paper reports:
//! - Rules 2 and 3 introduce only when "newly informed" (§3.4.2): when the reception changed
//!   the table. Taken literally, each of rules 2 and 3 sends the same introduction, so every
//!   level doubles the copies of the one below and a process that runs rule 1 again sets off
//!   about `N` messages, where §4 reports `2 log2 N` per process.
//! - Rule 1 therefore re-introduces, besides the ring neighbours (level 0, rule 1 as
//!   written), the pair of one more level the process holds, a different one each time in
//!   turn. Without that a wrong entry above level 0 would never be rewritten once the levels
//!   below it are right, and convergence from any state (Lemma A.9's induction on levels)
//!   would be lost. One level per run keeps a run at four messages, so that a process
//!   consuming one message per phase (§4's asynchronous scheduler) keeps up with its
//!   neighbours' refreshes.

use super::Outbox;
use super::tree_to_ring::assign;
use crate::protocol::Rank;

/// The messages of Algorithm 2: `(UP | DN, ident, nb_hop)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BmgMsg {
    /// `ident` is `2^hop` steps counterclockwise of the receiver.
    Up { ident: Rank, hop: u8 },
    /// `ident` is `2^hop` steps clockwise of the receiver.
    Dn { ident: Rank, hop: u8 },
}

/// The BMG's levels for `n` processes: the `k` with `2^k < n`, i.e. `ceil(log2 n)`.
pub fn levels(n: u32) -> usize {
    if n <= 1 {
        0
    } else {
        (u32::BITS - (n - 1).leading_zeros()) as usize
    }
}

/// Finger-table entries a process holds: the BMG's levels plus the one rule 3 fills for a
/// power-of-two `n` (at least one, for level 0).
pub fn table_len(n: u32) -> usize {
    levels(n) + 1
}

/// `2^(hop+1)` compared with `n` without overflow.
fn pow2_next(hop: u8) -> u64 {
    1u64.checked_shl(u32::from(hop) + 1).unwrap_or(u64::MAX)
}

/// One process of Algorithm 2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingToBmg {
    pub n: u32,
    /// Clockwise links: `cw[k]` should be `2^k` steps along `Succ`.
    pub cw: Vec<Option<Rank>>,
    /// Counterclockwise links: `ccw[k]` should be `2^k` steps along `Pred`.
    pub ccw: Vec<Option<Rank>>,
    /// The level rule 1 re-introduces next (taken modulo the levels: any value is valid).
    pub turn: usize,
}

impl RingToBmg {
    /// Empty tables (`⊥`) for a ring of `n` processes.
    pub fn new(n: u32) -> Self {
        Self {
            n,
            cw: vec![None; table_len(n)],
            ccw: vec![None; table_len(n)],
            turn: 0,
        }
    }

    /// The BMG's levels for this ring ([`levels`]).
    pub fn levels(&self) -> usize {
        levels(self.n)
    }

    /// Rule 1: `CW[0] = Succ; CCW[0] = Pred; Send (UP, CCW[0], 1) to Succ; Send (DN, CW[0], 1)
    /// to Pred`, then the same introduction of `CCW[k]` and `CW[k]` at level `k + 1` for the
    /// next level `k >= 1` in turn with `2^(k+1) < N`, if both entries are set. Nothing is
    /// sent to or about an unset entry (`⊥` names no process). Returns whether a set entry
    /// changed.
    pub fn spontaneous(&mut self, pred: Option<Rank>, succ: Option<Rank>, out: &mut Outbox<BmgMsg>) -> bool {
        let changed = matches!((self.cw[0], succ), (Some(a), Some(b)) if a != b)
            || matches!((self.ccw[0], pred), (Some(a), Some(b)) if a != b);
        self.cw[0] = succ;
        self.ccw[0] = pred;
        self.introduce(0, out);
        // Levels k >= 1 whose next level is in the BMG: 2^(k+1) < N.
        let upper = (1..self.cw.len())
            .take_while(|&k| pow2_next(k as u8) < u64::from(self.n))
            .count();
        if upper > 0 {
            self.turn %= upper;
            self.introduce(1 + self.turn, out);
            self.turn += 1;
        }
        changed
    }

    /// Introduces `CCW[k]` and `CW[k]` to each other at level `k + 1`, if both are set.
    fn introduce(&self, k: usize, out: &mut Outbox<BmgMsg>) {
        if let (Some(ccw), Some(cw)) = (self.ccw[k], self.cw[k]) {
            let hop = k as u8 + 1;
            out.push((cw, BmgMsg::Up { ident: ccw, hop }));
            out.push((ccw, BmgMsg::Dn { ident: cw, hop }));
        }
    }

    /// Rules 2 and 3. The caller has checked `ident < n` and `hop < table_len(n)`. The
    /// introduction is sent when the reception changed the table and the other entry of the
    /// level is set. Returns whether a set entry was overwritten with another value.
    pub fn on_message(&mut self, msg: BmgMsg, out: &mut Outbox<BmgMsg>) -> bool {
        match msg {
            // Rule 2: CCW[h] = ident; if 2^(h+1) < N, introduce ident and CW[h].
            BmgMsg::Up { ident, hop } => {
                let h = usize::from(hop);
                let news = self.ccw[h] != Some(ident);
                let changed = assign(&mut self.ccw[h], ident);
                if news
                    && pow2_next(hop) < u64::from(self.n)
                    && let Some(cw) = self.cw[h]
                {
                    out.push((cw, BmgMsg::Up { ident, hop: hop + 1 }));
                    out.push((
                        ident,
                        BmgMsg::Dn {
                            ident: cw,
                            hop: hop + 1,
                        },
                    ));
                }
                changed
            }
            // Rule 3: CW[h] = ident; if 2^(h+1) <= N, introduce ident and CCW[h].
            BmgMsg::Dn { ident, hop } => {
                let h = usize::from(hop);
                let news = self.cw[h] != Some(ident);
                let changed = assign(&mut self.cw[h], ident);
                if news
                    && pow2_next(hop) <= u64::from(self.n)
                    && let Some(ccw) = self.ccw[h]
                {
                    out.push((ccw, BmgMsg::Dn { ident, hop: hop + 1 }));
                    out.push((
                        ident,
                        BmgMsg::Up {
                            ident: ccw,
                            hop: hop + 1,
                        },
                    ));
                }
                changed
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_sizes() {
        assert_eq!((levels(1), levels(2), levels(3), levels(4), levels(5)), (0, 1, 2, 2, 3));
        assert_eq!(levels(1 << 20), 20);
        assert_eq!(levels(u32::MAX), 32);
        assert_eq!(table_len(1), 1);
    }

    #[test]
    fn rules_introduce_neighbours() {
        // Ring of 8 by identity: process 4 with Pred 3, Succ 5.
        let mut p = RingToBmg::new(8);
        let mut out = Vec::new();
        assert!(!p.spontaneous(Some(3), Some(5), &mut out));
        assert_eq!(
            out,
            [
                (5, BmgMsg::Up { ident: 3, hop: 1 }),
                (3, BmgMsg::Dn { ident: 5, hop: 1 })
            ]
        );
        out.clear();
        // UP before the matching DN: stored, nothing to introduce yet.
        p.on_message(BmgMsg::Up { ident: 2, hop: 1 }, &mut out);
        assert_eq!(p.ccw[1], Some(2));
        assert!(out.is_empty());
        p.on_message(BmgMsg::Dn { ident: 6, hop: 1 }, &mut out);
        assert_eq!(p.cw[1], Some(6));
        assert_eq!(
            out,
            [
                (2, BmgMsg::Dn { ident: 6, hop: 2 }),
                (6, BmgMsg::Up { ident: 2, hop: 2 })
            ]
        );
        out.clear();
        // The same information again is not news: nothing is sent.
        assert!(!p.on_message(BmgMsg::Dn { ident: 6, hop: 1 }, &mut out));
        assert!(out.is_empty());
        // Level 2 (distance 4 = N/2): rule 2 stops (4·2 ≥ 8), rule 3 fills level 3 (itself).
        p.on_message(BmgMsg::Up { ident: 0, hop: 2 }, &mut out);
        assert!(out.is_empty());
        p.on_message(BmgMsg::Dn { ident: 0, hop: 2 }, &mut out);
        assert_eq!(
            out,
            [
                (0, BmgMsg::Dn { ident: 0, hop: 3 }),
                (0, BmgMsg::Up { ident: 0, hop: 3 })
            ]
        );
        out.clear();
        // Rule 1 re-introduces level 0 and level 1 (2^2 < 8), never level 2.
        p.spontaneous(Some(3), Some(5), &mut out);
        assert_eq!(out.len(), 4);
        out.clear();
        p.spontaneous(Some(3), Some(5), &mut out);
        assert_eq!(
            out,
            [
                (5, BmgMsg::Up { ident: 3, hop: 1 }),
                (3, BmgMsg::Dn { ident: 5, hop: 1 }),
                (6, BmgMsg::Up { ident: 2, hop: 2 }),
                (2, BmgMsg::Dn { ident: 6, hop: 2 }),
            ]
        );
        out.clear();
        // Overwriting a set entry is reported, and is news.
        assert!(p.on_message(BmgMsg::Dn { ident: 7, hop: 1 }, &mut out));
        assert_eq!(out.len(), 2);
        out.clear();
        assert!(!p.spontaneous(None, Some(5), &mut out));
        assert!(out.iter().all(|m| m.0 != 3));
    }
}
