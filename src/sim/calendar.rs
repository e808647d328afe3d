//! A calendar (bucket) queue for integer virtual time: O(1) insert and pop for events within
//! a window of the current time; events further ahead (timers, the synchronized start of a
//! correction, long receive queues) wait in a list per instant (`calendar/far.rs`) and enter the ring
//! as it reaches them. No allocation once the buckets and lists have grown to their working
//! size.

use crate::model::Time;

mod far;
use far::Far;
#[cfg(test)]
pub(crate) use far::reference;

/// Two classes of events at the same instant: `Early` ones (receives, timers) are handed out
/// before `Late` ones (sender polls), so a process that receives at time t can act on it in
/// the send slot that starts at t. A late event is just a rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item<E> {
    Early(E),
    Late(u32),
}

/// The event queue of one simulation.
///
/// Early events of an instant come out in insertion order. Late events of an instant form a
/// *set* of ranks, kept as a bitmap per bucket and handed out in ascending rank order: the
/// sender polls of one instant then sweep the per-process state sequentially instead of in
/// the order dissemination happened to wake the processes (at P = 65536 the state is larger
/// than L2, and a random sweep per instant made the simulator memory-bound). The order among
/// different processes at one instant is arbitrary in LogP; fixing it by rank keeps runs
/// deterministic.
pub struct Calendar<E> {
    now: Time,
    mask: Time,
    early: Vec<Vec<E>>,
    /// Read position inside the current early bucket.
    early_pos: usize,
    /// `buckets × words` bitmap words: bit r of bucket b is a late event for rank r.
    late: Vec<u64>,
    words: usize,
    /// Set bits per bucket.
    late_count: Vec<u32>,
    /// Scan position (word) in the current bucket: every bit below it is clear.
    late_word: usize,
    in_ring: usize,
    /// Events beyond the ring, by instant.
    far: Far<E>,
    /// Emptied buckets' vectors, kept for their capacity: a bucket that gets its first event
    /// takes one, and an instant that is over gives its bucket's back. Only the buckets that
    /// hold events then own memory (a broadcast's receives fill the few instants of one hop,
    /// and the ring's other buckets would otherwise each grow to that size in turn: hundreds
    /// of megabytes of fresh pages at 2^20 processes).
    spare: Vec<Vec<E>>,
    /// The ranks late events may have (see [`Calendar::new`]).
    ranks: usize,
}

impl<E: Copy> Calendar<E> {
    /// The most buckets of the ring.
    pub const MAX_RING: Time = 1 << 12;
    /// A bucket this full grows to hold one event per rank at once.
    const GROW_TO_RANKS: usize = 1 << 12;

    /// A queue whose ring covers at least `window` time units ahead, for late events of ranks
    /// below `ranks`. The ring never exceeds [`Calendar::MAX_RING`] buckets (events further ahead wait in
    /// the heap), so a huge `window` (a large LogP `L`) costs no memory.
    pub fn new(window: Time, ranks: u32) -> Self {
        let size = window.saturating_add(1).min(Self::MAX_RING).next_power_of_two().max(16) as usize;
        let words = (ranks as usize).div_ceil(64).max(1);
        Self {
            now: 0,
            mask: size as Time - 1,
            early: (0..size).map(|_| Vec::new()).collect(),
            early_pos: 0,
            late: vec![0; size * words],
            words,
            late_count: vec![0; size],
            late_word: 0,
            in_ring: 0,
            far: Far::new(),
            spare: Vec::new(),
            ranks: ranks as usize,
        }
    }

    /// Bytes [`Calendar::new`] allocates for `window` and `ranks`: the ring's buckets, its
    /// late-event bitmaps (one bit per rank and bucket) and their counts.
    pub fn footprint(window: Time, ranks: u32) -> u64 {
        let size = window.saturating_add(1).min(Self::MAX_RING).next_power_of_two().max(16);
        let words = u64::from(ranks).div_ceil(64).max(1);
        let per_bucket = (size_of::<Vec<E>>() + size_of::<u32>()) as u64 + 8 * words;
        size.saturating_mul(per_bucket)
    }

    /// Empties the queue and rewinds time to 0, keeping the buckets' capacity.
    pub fn reset(&mut self) {
        self.early.iter_mut().for_each(Vec::clear);
        for (b, count) in self.late_count.iter_mut().enumerate() {
            if *count != 0 {
                self.late[b * self.words..(b + 1) * self.words].fill(0);
                *count = 0;
            }
        }
        self.far.clear();
        self.now = 0;
        self.early_pos = 0;
        self.late_word = 0;
        self.in_ring = 0;
    }

    /// The time of the event most recently handed out.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Schedules an early event at `time` (never before `now`).
    pub fn push(&mut self, time: Time, ev: E) {
        self.push_item(time, Item::Early(ev));
    }

    /// Schedules a late event for `rank` at `time` (never before `now`); a second one for
    /// the same rank and instant is the same event.
    pub fn push_late(&mut self, time: Time, rank: u32) {
        self.push_item(time, Item::Late(rank));
    }

    fn push_item(&mut self, time: Time, item: Item<E>) {
        debug_assert!(time >= self.now);
        let time = time.max(self.now);
        if time - self.now > self.mask {
            self.far.push(time, item);
            return;
        }
        let b = (time & self.mask) as usize;
        match item {
            Item::Early(e) => self.push_early(b, e),
            Item::Late(r) => self.set_late(b, r, time == self.now),
        }
    }

    #[inline]
    fn push_early(&mut self, b: usize, e: E) {
        let bucket = &mut self.early[b];
        if bucket.len() == bucket.capacity() {
            if bucket.is_empty()
                && let Some(v) = self.spare.pop()
            {
                *bucket = v;
            } else if bucket.len() >= Self::GROW_TO_RANKS && bucket.len() < self.ranks {
                // An instant with thousands of events (a broadcast's receives) may get one per
                // process: grow there at once rather than by doubling and copying.
                bucket.reserve_exact(self.ranks - bucket.len());
            }
        }
        bucket.push(e);
        self.in_ring += 1;
    }

    fn set_late(&mut self, b: usize, r: u32, current: bool) {
        let w = r as usize / 64;
        assert!(w < self.words, "late event for rank {r} beyond the calendar's ranks");
        let word = &mut self.late[b * self.words + w];
        let bit = 1u64 << (r % 64);
        if *word & bit == 0 {
            *word |= bit;
            self.late_count[b] += 1;
            self.in_ring += 1;
            if current && w < self.late_word {
                self.late_word = w;
            }
        }
    }

    /// The next event in (time, class, order within the class) order, with its time.
    pub fn pop(&mut self) -> Option<(Time, Item<E>)> {
        loop {
            let b = (self.now & self.mask) as usize;
            if self.early_pos < self.early[b].len() {
                let ev = self.early[b][self.early_pos];
                self.early_pos += 1;
                self.in_ring -= 1;
                return Some((self.now, Item::Early(ev)));
            }
            if self.late_count[b] != 0 {
                let base = b * self.words;
                let mut w = self.late_word;
                while self.late[base + w] == 0 {
                    w += 1;
                }
                let word = &mut self.late[base + w];
                let bit = word.trailing_zeros();
                *word &= *word - 1;
                self.late_word = w;
                self.late_count[b] -= 1;
                self.in_ring -= 1;
                return Some((self.now, Item::Late((w * 64) as u32 + bit)));
            }
            // The current instant is exhausted: advance.
            if self.early[b].capacity() != 0 {
                let mut v = std::mem::take(&mut self.early[b]);
                v.clear();
                self.spare.push(v);
            }
            self.early_pos = 0;
            self.late_word = 0;
            if self.in_ring == 0 {
                self.now = self.far.first_time()?;
            } else {
                self.now += 1;
            }
            // Move far events that now fall inside the window into the ring, in (time,
            // insertion) order.
            let limit = self.now.saturating_add(self.mask);
            if self.far.first_time().is_some_and(|t| t <= limit) {
                let mut far = std::mem::take(&mut self.far);
                far.drain_until(limit, |time, item| {
                    let b = (time & self.mask) as usize;
                    match item {
                        Item::Early(e) => self.push_early(b, e),
                        Item::Late(r) => self.set_late(b, r, false),
                    }
                });
                self.far = far;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footprint_is_what_new_allocates() {
        for (window, ranks) in [(0, 1), (10, 100), (5000, 65_536), (1 << 20, 1_000_000)] {
            let c = Calendar::<u64>::new(window, ranks);
            let held = c.early.capacity() * size_of::<Vec<u64>>()
                + c.late.capacity() * size_of::<u64>()
                + c.late_count.capacity() * size_of::<u32>();
            assert_eq!(
                Calendar::<u64>::footprint(window, ranks),
                held as u64,
                "{window} {ranks}"
            );
        }
    }

    #[test]
    fn pops_in_time_then_class_then_insertion_order() {
        let mut c: Calendar<char> = Calendar::new(4, 200);
        c.push_late(3, 7);
        c.push(3, 'b');
        c.push_late(1, 9);
        c.push(1000, 'd');
        c.push(3, 'e');
        c.push_late(40, 150);
        c.push_late(3, 2);
        c.push_late(3, 130);
        c.push_late(3, 7);
        let got: Vec<_> = std::iter::from_fn(|| c.pop()).collect();
        use Item::{Early as E, Late as L};
        assert_eq!(
            got,
            vec![
                (1, L(9)),
                (3, E('b')),
                (3, E('e')),
                (3, L(2)),
                (3, L(7)),
                (3, L(130)),
                (40, L(150)),
                (1000, E('d'))
            ]
        );
    }

    #[test]
    fn events_pushed_at_the_current_instant_are_seen() {
        let mut c: Calendar<i32> = Calendar::new(4, 128);
        c.push(2, 1);
        assert_eq!(c.pop(), Some((2, Item::Early(1))));
        c.push_late(2, 100);
        c.push(2, 3);
        assert_eq!(c.pop(), Some((2, Item::Early(3))));
        assert_eq!(c.pop(), Some((2, Item::Late(100))));
        // A late event pushed at the current instant below the scan position is still seen.
        c.push_late(2, 5);
        assert_eq!(c.pop(), Some((2, Item::Late(5))));
        assert_eq!(c.pop(), None);
    }

    #[test]
    fn far_late_events_enter_the_ring_and_reset_empties_it() {
        let mut c: Calendar<i32> = Calendar::new(4, 64);
        c.push_late(100, 63);
        c.push_late(100, 0);
        c.push(50, 1);
        assert_eq!(c.pop(), Some((50, Item::Early(1))));
        assert_eq!(c.pop(), Some((100, Item::Late(0))));
        c.push_late(101, 3);
        c.reset();
        assert_eq!(c.pop(), None);
        c.push_late(0, 3);
        assert_eq!(c.pop(), Some((0, Item::Late(3))));
        assert_eq!(c.pop(), None);
    }

    /// Instants filled one after the other: the emptied buckets' vectors go to the next
    /// instant's bucket, so only the instants holding events own memory, and a bucket with
    /// thousands of events holds one per rank at once.
    #[test]
    fn emptied_buckets_lend_their_vectors_to_the_next() {
        let ranks = 10_000u32;
        let mut c: Calendar<u32> = Calendar::new(64, ranks);
        for t in 0..40 {
            for k in 0..500 {
                c.push(t + 1, k);
            }
            for k in 0..500 {
                assert_eq!(c.pop(), Some((t + 1, Item::Early(k))));
            }
        }
        let owning = c.early.iter().filter(|b| b.capacity() != 0).count() + c.spare.len();
        assert!(owning <= 3, "{owning} vectors own memory");
        for k in 0..5000 {
            c.push(100, k);
        }
        let big = c.early.iter().map(Vec::capacity).max().unwrap_or(0);
        assert!((ranks as usize..2 * ranks as usize).contains(&big), "{big}");
    }

    /// A window far larger than the ring (a huge LogP `L`): the ring stays at
    /// [`Calendar::MAX_RING`] buckets and events far apart still come out in order.
    #[test]
    fn a_huge_window_keeps_a_bounded_ring_and_the_order() {
        let big = 1u64 << 40;
        let mut c: Calendar<u64> = Calendar::new(4 * big, 64);
        assert_eq!(c.early.len() as Time, Calendar::<u64>::MAX_RING);
        for t in [3 * big, 5, big, big + 1, 2 * big, big] {
            c.push(t, t);
        }
        c.push_late(big, 1);
        let got: Vec<_> = std::iter::from_fn(|| c.pop()).collect();
        let e = Item::Early;
        assert_eq!(
            got,
            vec![
                (5, e(5)),
                (big, e(big)),
                (big, e(big)),
                (big, Item::Late(1)),
                (big + 1, e(big + 1)),
                (2 * big, e(2 * big)),
                (3 * big, e(3 * big)),
            ]
        );
    }
}
