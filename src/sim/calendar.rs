//! A calendar (bucket) queue for integer virtual time: O(1) insert and pop for events within
//! a window of the current time, a binary heap for the rare far-future ones (timers, long
//! receive queues). No allocation once the buckets have grown to their working size.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::model::Time;

/// Two classes of events at the same instant: `Early` ones (receives, timers) are handed out
/// before `Late` ones (sender polls), so a process that receives at time t can act on it in
/// the send slot that starts at t. Late events have their own, usually smaller, type `L`
/// (the simulator's polls are just a rank), which keeps the hot buckets small.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item<E, L> {
    Early(E),
    Late(L),
}

struct Far<E, L> {
    time: Time,
    seq: u64,
    item: Item<E, L>,
}

impl<E, L> PartialEq for Far<E, L> {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl<E, L> Eq for Far<E, L> {}
impl<E, L> PartialOrd for Far<E, L> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E, L> Ord for Far<E, L> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Min-heap on (time, seq).
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

/// The event queue of one simulation.
pub struct Calendar<E, L = E> {
    now: Time,
    mask: Time,
    early: Vec<Vec<E>>,
    late: Vec<Vec<L>>,
    /// Read positions inside the current buckets.
    early_pos: usize,
    late_pos: usize,
    in_ring: usize,
    far: BinaryHeap<Far<E, L>>,
    seq: u64,
}

impl<E: Copy, L: Copy> Calendar<E, L> {
    /// A queue whose ring covers at least `window` time units ahead.
    pub fn new(window: Time) -> Self {
        let size = (window + 1).next_power_of_two().max(16) as usize;
        Self {
            now: 0,
            mask: size as Time - 1,
            early: (0..size).map(|_| Vec::new()).collect(),
            late: (0..size).map(|_| Vec::new()).collect(),
            early_pos: 0,
            late_pos: 0,
            in_ring: 0,
            far: BinaryHeap::new(),
            seq: 0,
        }
    }

    /// Empties the queue and rewinds time to 0, keeping the buckets' capacity.
    pub fn reset(&mut self) {
        self.early.iter_mut().for_each(Vec::clear);
        self.late.iter_mut().for_each(Vec::clear);
        self.far.clear();
        self.now = 0;
        self.early_pos = 0;
        self.late_pos = 0;
        self.in_ring = 0;
        self.seq = 0;
    }

    /// The time of the event most recently handed out.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Schedules an early event at `time` (never before `now`).
    pub fn push(&mut self, time: Time, ev: E) {
        self.push_item(time, Item::Early(ev));
    }

    /// Schedules a late event at `time` (never before `now`).
    pub fn push_late(&mut self, time: Time, ev: L) {
        self.push_item(time, Item::Late(ev));
    }

    fn push_item(&mut self, time: Time, item: Item<E, L>) {
        debug_assert!(time >= self.now);
        let time = time.max(self.now);
        if time - self.now <= self.mask {
            let b = (time & self.mask) as usize;
            match item {
                Item::Early(e) => self.early[b].push(e),
                Item::Late(l) => self.late[b].push(l),
            }
            self.in_ring += 1;
        } else {
            self.seq += 1;
            self.far.push(Far {
                time,
                seq: self.seq,
                item,
            });
        }
    }

    /// The next event in (time, class, insertion) order, with its time.
    pub fn pop(&mut self) -> Option<(Time, Item<E, L>)> {
        loop {
            let b = (self.now & self.mask) as usize;
            if self.early_pos < self.early[b].len() {
                let ev = self.early[b][self.early_pos];
                self.early_pos += 1;
                self.in_ring -= 1;
                return Some((self.now, Item::Early(ev)));
            }
            if self.late_pos < self.late[b].len() {
                let ev = self.late[b][self.late_pos];
                self.late_pos += 1;
                self.in_ring -= 1;
                return Some((self.now, Item::Late(ev)));
            }
            // The current instant is exhausted: advance.
            self.early[b].clear();
            self.late[b].clear();
            self.early_pos = 0;
            self.late_pos = 0;
            if self.in_ring == 0 {
                let far = self.far.peek()?;
                self.now = far.time;
            } else {
                self.now += 1;
            }
            // Move far events that now fall inside the window into the ring.
            while let Some(f) = self.far.peek() {
                if f.time - self.now > self.mask {
                    break;
                }
                let f = self.far.pop().expect("peeked");
                let b = (f.time & self.mask) as usize;
                match f.item {
                    Item::Early(e) => self.early[b].push(e),
                    Item::Late(l) => self.late[b].push(l),
                }
                self.in_ring += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_then_class_then_insertion_order() {
        let mut c: Calendar<char> = Calendar::new(4);
        c.push_late(3, 'a');
        c.push(3, 'b');
        c.push_late(1, 'c');
        c.push(1000, 'd');
        c.push(3, 'e');
        c.push_late(40, 'f');
        let got: Vec<_> = std::iter::from_fn(|| c.pop()).collect();
        use Item::{Early as E, Late as L};
        assert_eq!(
            got,
            vec![
                (1, L('c')),
                (3, E('b')),
                (3, E('e')),
                (3, L('a')),
                (40, L('f')),
                (1000, E('d'))
            ]
        );
    }

    #[test]
    fn events_pushed_at_the_current_instant_are_seen() {
        let mut c: Calendar<i32> = Calendar::new(4);
        c.push(2, 1);
        assert_eq!(c.pop(), Some((2, Item::Early(1))));
        c.push_late(2, 2);
        c.push(2, 3);
        assert_eq!(c.pop(), Some((2, Item::Early(3))));
        assert_eq!(c.pop(), Some((2, Item::Late(2))));
        assert_eq!(c.pop(), None);
    }
}
