//! A hashed timer wheel of one timer per key (the retransmission timer of each peer).

use std::time::{Duration, Instant};

const NIL: u32 = u32::MAX;

/// A hashed timer wheel of one timer per key (peer), intrusive lists, no allocation after
/// construction. A timer never fires before its deadline, and at most one tick after it once
/// `expire` is called.
#[derive(Debug)]
pub(crate) struct TimerWheel {
    start: Instant,
    tick_ns: u64,
    mask: u64,
    /// Last tick processed.
    cur: u64,
    heads: Vec<u32>,
    next: Vec<u32>,
    prev: Vec<u32>,
    /// Slot of each key, NIL when disarmed.
    slot: Vec<u32>,
    deadline: Vec<Instant>,
    armed: usize,
}

impl TimerWheel {
    pub fn new(keys: usize, start: Instant, tick: Duration, horizon: Duration) -> Self {
        let tick_ns = (tick.as_nanos() as u64).max(1);
        let slots = (horizon.as_nanos() as u64 / tick_ns + 2)
            .next_power_of_two()
            .clamp(64, 1 << 16);
        TimerWheel {
            start,
            tick_ns,
            mask: slots - 1,
            cur: 0,
            heads: vec![NIL; slots as usize],
            next: vec![NIL; keys],
            prev: vec![NIL; keys],
            slot: vec![NIL; keys],
            deadline: vec![start; keys],
            armed: 0,
        }
    }

    /// Whole ticks from the start to `t`, rounded down (or up).
    #[inline]
    fn ticks(&self, t: Instant, up: bool) -> u64 {
        let ns = t.saturating_duration_since(self.start).as_nanos();
        let ns = u64::try_from(ns).unwrap_or(u64::MAX);
        if up {
            ns.div_ceil(self.tick_ns)
        } else {
            ns / self.tick_ns
        }
    }

    #[inline]
    pub fn is_armed(&self, key: u32) -> bool {
        self.slot[key as usize] != NIL
    }

    /// When `key` is due, if it is armed.
    #[inline]
    pub fn deadline(&self, key: u32) -> Option<Instant> {
        self.is_armed(key).then(|| self.deadline[key as usize])
    }

    #[inline]
    pub fn cancel(&mut self, key: u32) {
        let k = key as usize;
        let s = self.slot[k];
        if s == NIL {
            return;
        }
        let (p, n) = (self.prev[k], self.next[k]);
        if p == NIL {
            self.heads[s as usize] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        }
        self.slot[k] = NIL;
        self.armed -= 1;
    }

    /// Arms (or re-arms) `key` for `at`.
    #[inline]
    pub fn schedule(&mut self, key: u32, at: Instant) {
        self.cancel(key);
        // The first tick starting at or after `at`: it is processed once now >= at.
        let mut t = self.ticks(at, true);
        t = t.max(self.cur + 1).min(self.cur + self.mask);
        let s = (t & self.mask) as u32;
        let k = key as usize;
        let head = self.heads[s as usize];
        self.next[k] = head;
        self.prev[k] = NIL;
        if head != NIL {
            self.prev[head as usize] = key;
        }
        self.heads[s as usize] = key;
        self.slot[k] = s;
        self.deadline[k] = at;
        self.armed += 1;
    }

    /// Appends to `out` (capacity: the number of keys) the keys due at `now`, disarmed.
    #[inline]
    pub fn expire(&mut self, now: Instant, out: &mut Vec<u32>) {
        let target = self.ticks(now, false);
        if target <= self.cur {
            return;
        }
        let first = out.len();
        let steps = (target - self.cur).min(self.mask + 1);
        for i in 1..=steps {
            let s = ((self.cur + i) & self.mask) as usize;
            let mut k = std::mem::replace(&mut self.heads[s], NIL);
            while k != NIL {
                let next = self.next[k as usize];
                self.slot[k as usize] = NIL;
                self.armed -= 1;
                out.push(k);
                k = next;
            }
        }
        self.cur = target;
        // Keys parked at the horizon and not yet due go back in.
        let mut i = first;
        while i < out.len() {
            let k = out[i];
            if self.deadline[k as usize] <= now {
                i += 1;
            } else {
                let at = self.deadline[k as usize];
                self.schedule(k, at);
                out.swap_remove(i);
            }
        }
    }

    /// When the next armed timer may be due (the start of its tick), if any.
    #[inline]
    pub fn next_due(&self) -> Option<Instant> {
        if self.armed == 0 {
            return None;
        }
        (1..=self.mask + 1)
            .map(|i| self.cur + i)
            .find(|t| self.heads[(t & self.mask) as usize] != NIL)
            .map(|t| self.start + Duration::from_nanos(t.saturating_mul(self.tick_ns)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn timer_wheel_never_fires_early() {
        let t0 = Instant::now();
        let tick = Duration::from_micros(25);
        let mut w = TimerWheel::new(4, t0, tick, MS(10));
        let mut out = Vec::with_capacity(4);
        w.schedule(0, t0 + Duration::from_micros(100));
        w.schedule(1, t0 + Duration::from_micros(30));
        // Far beyond the horizon: parked, then re-armed until due.
        w.schedule(2, t0 + MS(50));
        w.schedule(3, t0 + MS(1));
        w.cancel(3);
        assert!(!w.is_armed(3));
        assert!(w.next_due().unwrap() >= t0 + Duration::from_micros(30));
        w.expire(t0 + Duration::from_micros(29), &mut out);
        assert!(out.is_empty());
        w.expire(t0 + Duration::from_micros(60), &mut out);
        assert_eq!(out, vec![1]);
        out.clear();
        // Re-arming moves a timer.
        w.schedule(0, t0 + MS(2));
        w.expire(t0 + MS(1), &mut out);
        assert!(out.is_empty());
        w.expire(t0 + MS(30), &mut out);
        assert_eq!(out, vec![0]);
        out.clear();
        assert!(w.is_armed(2));
        w.expire(t0 + MS(49), &mut out);
        assert!(out.is_empty());
        // A long pause (more than a whole turn of the wheel) is handled in one call.
        w.expire(t0 + MS(500), &mut out);
        assert_eq!(out, vec![2]);
        assert_eq!(w.next_due(), None);
    }
}
