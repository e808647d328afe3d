//! A calendar (bucket) queue for integer virtual time: O(1) insert and pop for events within
//! a window of the current time, a binary heap for the rare far-future ones (timers, long
//! receive queues). No allocation once the buckets have grown to their working size.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::model::Time;

/// Two classes of events at the same instant: `Early` ones (receives, timers) are handed out
/// before `Late` ones (sender polls), so a process that receives at time t can act on it in
/// the send slot that starts at t.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Early,
    Late,
}

struct Far<E> {
    time: Time,
    seq: u64,
    class: Class,
    ev: E,
}

impl<E> PartialEq for Far<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl<E> Eq for Far<E> {}
impl<E> PartialOrd for Far<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Far<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Min-heap on (time, seq).
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

/// The event queue of one simulation.
pub struct Calendar<E> {
    now: Time,
    mask: Time,
    early: Vec<Vec<E>>,
    late: Vec<Vec<E>>,
    /// Read positions inside the current buckets.
    early_pos: usize,
    late_pos: usize,
    in_ring: usize,
    far: BinaryHeap<Far<E>>,
    seq: u64,
}

impl<E> Calendar<E> {
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
        for b in self.early.iter_mut().chain(self.late.iter_mut()) {
            b.clear();
        }
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

    /// Schedules `ev` at `time` (never before `now`).
    pub fn push(&mut self, time: Time, class: Class, ev: E) {
        debug_assert!(time >= self.now);
        let time = time.max(self.now);
        if time - self.now <= self.mask {
            let b = (time & self.mask) as usize;
            match class {
                Class::Early => self.early[b].push(ev),
                Class::Late => self.late[b].push(ev),
            }
            self.in_ring += 1;
        } else {
            self.seq += 1;
            self.far.push(Far {
                time,
                seq: self.seq,
                class,
                ev,
            });
        }
    }

    /// The next event in (time, class, insertion) order, with its time.
    pub fn pop(&mut self) -> Option<(Time, E)>
    where
        E: Copy,
    {
        loop {
            let b = (self.now & self.mask) as usize;
            if self.early_pos < self.early[b].len() {
                let ev = self.early[b][self.early_pos];
                self.early_pos += 1;
                self.in_ring -= 1;
                return Some((self.now, ev));
            }
            if self.late_pos < self.late[b].len() {
                let ev = self.late[b][self.late_pos];
                self.late_pos += 1;
                self.in_ring -= 1;
                return Some((self.now, ev));
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
                match f.class {
                    Class::Early => self.early[b].push(f.ev),
                    Class::Late => self.late[b].push(f.ev),
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
        let mut c = Calendar::new(4);
        c.push(3, Class::Late, 'a');
        c.push(3, Class::Early, 'b');
        c.push(1, Class::Late, 'c');
        c.push(1000, Class::Early, 'd');
        c.push(3, Class::Early, 'e');
        c.push(40, Class::Late, 'f');
        let got: Vec<_> = std::iter::from_fn(|| c.pop()).collect();
        assert_eq!(
            got,
            vec![(1, 'c'), (3, 'b'), (3, 'e'), (3, 'a'), (40, 'f'), (1000, 'd')]
        );
    }

    #[test]
    fn events_pushed_at_the_current_instant_are_seen() {
        let mut c = Calendar::new(4);
        c.push(2, Class::Early, 1);
        assert_eq!(c.pop(), Some((2, 1)));
        c.push(2, Class::Late, 2);
        c.push(2, Class::Early, 3);
        assert_eq!(c.pop(), Some((2, 3)));
        assert_eq!(c.pop(), Some((2, 2)));
        assert_eq!(c.pop(), None);
    }
}
