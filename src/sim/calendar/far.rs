//! The calendar's store for events beyond its ring: per instant, its early events in insertion
//! order and its late events (ranks), the instants in a search tree. A broadcast puts many
//! events at the same far instant (every process of a synchronized correction sleeps until its
//! start), so lists per instant append and drain them sequentially where a binary heap sifted
//! each through `log n` scattered levels. Early and late events of an instant need no common
//! order: the ring keeps early ones in a list and late ones as a set. The lists are recycled
//! across instants and runs: no allocation once they have grown to their working size.

use std::collections::BTreeMap;

use crate::model::Time;
use crate::sim::calendar::Item;

/// The far events of one instant.
struct Instant<E> {
    /// Early events, in insertion order.
    early: Vec<E>,
    /// Late events' ranks.
    late: Vec<u32>,
}

impl<E> Default for Instant<E> {
    fn default() -> Self {
        Self {
            early: Vec::new(),
            late: Vec::new(),
        }
    }
}

/// Far events by instant, each instant's early ones in insertion order.
pub(super) struct Far<E> {
    by_time: BTreeMap<Time, Instant<E>>,
    /// Emptied lists, kept for their capacity.
    spare: Vec<Instant<E>>,
    /// The test build's reference: the binary heap this store replaced (see
    /// [`reference::use_heap`]).
    #[cfg(test)]
    heap: Option<reference::Heap<E>>,
}

/// An empty store that allocates nothing (what the calendar leaves in its place while it
/// drains the store into the ring).
impl<E> Default for Far<E> {
    fn default() -> Self {
        Self {
            by_time: BTreeMap::new(),
            spare: Vec::new(),
            #[cfg(test)]
            heap: None,
        }
    }
}

impl<E: Copy> Far<E> {
    pub(super) fn new() -> Self {
        Self {
            by_time: BTreeMap::new(),
            spare: Vec::new(),
            #[cfg(test)]
            heap: reference::heap_chosen().then(reference::Heap::default),
        }
    }

    /// Empties the store, keeping the lists.
    pub(super) fn clear(&mut self) {
        #[cfg(test)]
        if let Some(h) = &mut self.heap {
            h.clear();
        }
        while let Some((_, mut at)) = self.by_time.pop_first() {
            at.early.clear();
            at.late.clear();
            self.spare.push(at);
        }
    }

    /// Adds `item` at `time`, after every early event already at `time`.
    #[inline]
    pub(super) fn push(&mut self, time: Time, item: Item<E>) {
        #[cfg(test)]
        if let Some(h) = &mut self.heap {
            return h.push(time, item);
        }
        let spare = &mut self.spare;
        let at = self
            .by_time
            .entry(time)
            .or_insert_with(|| spare.pop().unwrap_or_default());
        match item {
            Item::Early(e) => at.early.push(e),
            Item::Late(r) => at.late.push(r),
        }
    }

    /// The earliest instant held.
    #[inline]
    pub(super) fn first_time(&self) -> Option<Time> {
        #[cfg(test)]
        if let Some(h) = &self.heap {
            return h.first_time();
        }
        self.by_time.first_key_value().map(|(&t, _)| t)
    }

    /// Hands every event at or before `limit` to `place` and forgets them: instant by
    /// instant, each instant's early events in insertion order, then its late ones.
    #[inline]
    pub(super) fn drain_until(&mut self, limit: Time, mut place: impl FnMut(Time, Item<E>)) {
        #[cfg(test)]
        if let Some(h) = &mut self.heap {
            return h.drain_until(limit, place);
        }
        while let Some(entry) = self.by_time.first_entry() {
            if *entry.key() > limit {
                break;
            }
            let (time, mut at) = entry.remove_entry();
            for &e in &at.early {
                place(time, Item::Early(e));
            }
            for &r in &at.late {
                place(time, Item::Late(r));
            }
            at.early.clear();
            at.late.clear();
            self.spare.push(at);
        }
    }
}

/// The binary heap on (time, insertion number) that held far events before [`Far`]: kept in
/// the test build as the reference the differential tests compare the event order against.
#[cfg(test)]
pub(crate) mod reference {
    use std::cell::Cell;
    use std::cmp::Ordering;
    use std::collections::BinaryHeap;

    use crate::model::Time;
    use crate::sim::calendar::Item;

    thread_local! {
        static HEAP: Cell<bool> = const { Cell::new(false) };
    }

    /// Runs `f` with every calendar created in it (on this thread) keeping far events in the
    /// reference heap.
    pub(crate) fn use_heap<R>(f: impl FnOnce() -> R) -> R {
        HEAP.with(|h| h.set(true));
        let out = f();
        HEAP.with(|h| h.set(false));
        out
    }

    pub(super) fn heap_chosen() -> bool {
        HEAP.with(Cell::get)
    }

    struct Entry<E> {
        time: Time,
        seq: u64,
        item: Item<E>,
    }

    impl<E> PartialEq for Entry<E> {
        fn eq(&self, other: &Self) -> bool {
            (self.time, self.seq) == (other.time, other.seq)
        }
    }
    impl<E> Eq for Entry<E> {}
    impl<E> PartialOrd for Entry<E> {
        fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
            Some(self.cmp(other))
        }
    }
    impl<E> Ord for Entry<E> {
        fn cmp(&self, other: &Self) -> Ordering {
            // Min-heap on (time, seq).
            (other.time, other.seq).cmp(&(self.time, self.seq))
        }
    }

    pub(crate) struct Heap<E> {
        heap: BinaryHeap<Entry<E>>,
        seq: u64,
    }

    impl<E> Default for Heap<E> {
        fn default() -> Self {
            Self {
                heap: BinaryHeap::new(),
                seq: 0,
            }
        }
    }

    impl<E: Copy> Heap<E> {
        pub(super) fn clear(&mut self) {
            self.heap.clear();
            self.seq = 0;
        }

        pub(super) fn push(&mut self, time: Time, item: Item<E>) {
            self.seq += 1;
            self.heap.push(Entry {
                time,
                seq: self.seq,
                item,
            });
        }

        pub(super) fn first_time(&self) -> Option<Time> {
            self.heap.peek().map(|e| e.time)
        }

        pub(super) fn drain_until(&mut self, limit: Time, mut place: impl FnMut(Time, Item<E>)) {
            while let Some(e) = self.heap.peek() {
                if e.time > limit {
                    break;
                }
                let e = self.heap.pop().expect("peeked");
                place(e.time, e.item);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model::Time;
    use crate::protocol::ProtoRng;
    use crate::sim::calendar::{Calendar, Item};

    use super::reference;

    /// Random pushes (early and late, at the current instant, inside the ring and far beyond
    /// it, many at one instant) interleaved with pops and resets: the calendar hands out the
    /// same events in the same order with the far store as with the reference heap.
    #[test]
    fn random_schedules_pop_as_with_the_heap() {
        for seed in 0..40u64 {
            let window = [0, 3, 20, 100, 5000][seed as usize % 5];
            let ranks = 1 + (seed as u32 * 37) % 300;
            let mut new: Calendar<u32> = Calendar::new(window, ranks);
            let mut old: Calendar<u32> = reference::use_heap(|| Calendar::new(window, ranks));
            let mut rng = ProtoRng::new(seed);
            let mut label = 0u32;
            let mut popped = 0;
            for step in 0..4000 {
                let now = new.now();
                let delta: Time = match rng.below(6) {
                    0 => 0,
                    1 => rng.below(8).into(),
                    2 => rng.below(200).into(),
                    3 => 70_000 + Time::from(rng.below(4)),
                    4 => Time::from(rng.below(3)) << 33,
                    _ => rng.below(10_000).into(),
                };
                match rng.below(5) {
                    0 | 1 => {
                        label += 1;
                        new.push(now + delta, label);
                        old.push(now + delta, label);
                    }
                    2 => {
                        let r = rng.below(ranks);
                        new.push_late(now + delta, r);
                        old.push_late(now + delta, r);
                    }
                    _ => {
                        let a = new.pop();
                        assert_eq!(a, old.pop(), "seed {seed} step {step}");
                        popped += usize::from(a.is_some());
                    }
                }
                if step % 1500 == 1499 && seed % 2 == 0 {
                    new.reset();
                    old.reset();
                }
            }
            // Drain what is left.
            loop {
                let a = new.pop();
                assert_eq!(a, old.pop(), "seed {seed} drain");
                match a {
                    Some((_, Item::Early(_) | Item::Late(_))) => popped += 1,
                    None => break,
                }
            }
            assert!(popped > 1000, "seed {seed}: {popped} pops");
        }
    }
}
