//! Fault injection for the simulator: processes dead before the operation and processes dying
//! at a given time during it (Corrected Trees §2.1, Corrected Gossip §IV.A).

use serde::Serialize;

use crate::model::Time;
use crate::protocol::{ProtoRng, Rank};

/// How many processes are dead before the operation starts. The root never is (both papers
/// assume a live root).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum DeadBefore {
    /// A fixed number, chosen uniformly at random per run.
    Count(u32),
    /// A fraction of the processes, rounded to the nearest count.
    Fraction(f64),
    /// Exactly these ranks (root = 0 excluded).
    List(Vec<Rank>),
}

/// The fault plan of one experiment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Faults {
    /// Processes dead from the start.
    pub before: DeadBefore,
    /// This many random live non-root processes die at a uniform random time in
    /// `(0, online_horizon]` during each run: never at 0, which would make them dead before
    /// the operation (a death at time 0 is "dead before": the process never starts).
    pub online: u32,
    /// The window for random online failures (normally the fault-free quiescence latency).
    pub online_horizon: Time,
    /// Specific online failures: `(rank, time)`.
    pub online_list: Vec<(Rank, Time)>,
    /// Modeled failure detector: a process that sent to a dead process, or that had sent to a
    /// process that dies, suspects it this long after (used by BFB).
    pub detect_delay: Time,
    /// The senders know the processes dead before the start: their transport has suspected
    /// them and refuses a send to one at once (ftcoll's transports do, from the first
    /// operation after a crash on), so such a send costs its sender nothing and takes no send
    /// slot (see [`crate::sim::Engine`]). `false`, the papers' LogP (Corrected Trees §2.2,
    /// "a message to a dead process costs the sender its send"): it costs a send as any other.
    pub known_dead: bool,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            before: DeadBefore::Count(0),
            online: 0,
            online_horizon: 1,
            online_list: Vec::new(),
            detect_delay: 10,
            known_dead: false,
        }
    }
}

impl Faults {
    /// Checks the plan against `n` processes: one-line errors, never panics.
    pub fn validate(&self, n: u32) -> Result<(), String> {
        let dead = match &self.before {
            DeadBefore::Count(c) => *c,
            DeadBefore::Fraction(f) => {
                if !(0.0..1.0).contains(f) || f.is_nan() {
                    return Err(format!("fault fraction must be in [0, 1), got {f}"));
                }
                Self::fraction_count(*f, n)
            }
            DeadBefore::List(l) => {
                for &r in l {
                    if r == 0 {
                        return Err("the root (rank 0) cannot be dead".into());
                    }
                    if r >= n {
                        return Err(format!("fault rank {r} is out of range for {n} nodes"));
                    }
                }
                l.len() as u32
            }
        };
        if u64::from(dead) + u64::from(self.online) + self.online_list.len() as u64 > u64::from(n.saturating_sub(1)) {
            return Err(format!(
                "more faults ({}) than non-root nodes ({})",
                u64::from(dead) + u64::from(self.online) + self.online_list.len() as u64,
                n.saturating_sub(1)
            ));
        }
        for &(r, _) in &self.online_list {
            if r == 0 || r >= n {
                return Err(format!("online fault rank {r} must be in 1..{n}"));
            }
        }
        Ok(())
    }

    /// The number of dead processes for a fraction (rounded to nearest).
    pub fn fraction_count(f: f64, n: u32) -> u32 {
        ((f * f64::from(n)).round() as u32).min(n.saturating_sub(1))
    }

    /// Fills `death[r]` with each process's death time for one run (`Time::MAX`: never;
    /// `0`: dead before the start). `scratch` is reused to avoid allocation.
    pub fn draw(&self, n: u32, rng: &mut ProtoRng, death: &mut [Time], scratch: &mut Vec<Rank>) {
        death.fill(Time::MAX);
        let count = match &self.before {
            DeadBefore::Count(c) => *c,
            DeadBefore::Fraction(f) => Self::fraction_count(*f, n),
            DeadBefore::List(l) => {
                for &r in l {
                    death[r as usize] = 0;
                }
                0
            }
        };
        pick(n, count, rng, death, scratch, |_| 0);
        let h = self.online_horizon.max(1);
        pick(n, self.online, rng, death, scratch, |rng| 1 + rng.next_u64() % h);
        for &(r, t) in &self.online_list {
            death[r as usize] = death[r as usize].min(t);
        }
    }
}

/// Marks `count` distinct live non-root processes dead at `when(rng)`.
fn pick(
    n: u32,
    count: u32,
    rng: &mut ProtoRng,
    death: &mut [Time],
    scratch: &mut Vec<Rank>,
    mut when: impl FnMut(&mut ProtoRng) -> Time,
) {
    if count == 0 || n < 2 {
        return;
    }
    if u64::from(count) * 8 < u64::from(n) {
        // Sparse: rejection sampling.
        let mut left = count;
        while left > 0 {
            let r = 1 + rng.below(n - 1);
            if death[r as usize] == Time::MAX {
                death[r as usize] = when(rng);
                left -= 1;
            }
        }
    } else {
        // Dense: partial Fisher–Yates over the live non-root processes.
        scratch.clear();
        scratch.extend((1..n).filter(|&r| death[r as usize] == Time::MAX));
        let k = (count as usize).min(scratch.len());
        for i in 0..k {
            let j = i + rng.below((scratch.len() - i) as u32) as usize;
            scratch.swap(i, j);
            death[scratch[i] as usize] = when(rng);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_exactly_the_requested_number_and_never_the_root() {
        for (n, c) in [(100u32, 3u32), (100, 60), (10, 9)] {
            let f = Faults {
                before: DeadBefore::Count(c),
                ..Faults::default()
            };
            let mut death = vec![0; n as usize];
            let mut s = Vec::new();
            let mut rng = ProtoRng::new(n.into());
            f.draw(n, &mut rng, &mut death, &mut s);
            assert_eq!(death.iter().filter(|&&d| d == 0).count(), c as usize);
            assert_eq!(death[0], Time::MAX);
        }
    }

    /// Online failures are drawn from `(0, T]`, never at 0 (dead before), and
    /// cover the whole window, its end included.
    #[test]
    fn online_failures_never_die_before_the_start() {
        let n = 64;
        for h in [1u64, 2, 5] {
            let f = Faults {
                before: DeadBefore::Count(3),
                online: 20,
                online_horizon: h,
                ..Faults::default()
            };
            let mut seen = std::collections::BTreeSet::new();
            for seed in 0..200 {
                let mut death = vec![0; n];
                let mut rng = ProtoRng::new(seed);
                f.draw(n as u32, &mut rng, &mut death, &mut Vec::new());
                assert_eq!(death.iter().filter(|&&d| d == 0).count(), 3, "h={h} seed={seed}");
                let online: Vec<Time> = death.iter().copied().filter(|&d| d != 0 && d != Time::MAX).collect();
                assert_eq!(online.len(), 20, "h={h} seed={seed}");
                assert!(online.iter().all(|&d| (1..=h).contains(&d)), "h={h}: {online:?}");
                seen.extend(online);
            }
            assert_eq!(seen, (1..=h).collect(), "h={h}: every time of (0, T] is drawn");
        }
    }

    #[test]
    fn validation_rejects_impossible_plans() {
        let f = |b| Faults {
            before: b,
            ..Faults::default()
        };
        assert!(f(DeadBefore::Fraction(1.0)).validate(10).is_err());
        assert!(f(DeadBefore::Fraction(-0.1)).validate(10).is_err());
        assert!(f(DeadBefore::Count(10)).validate(10).is_err());
        assert!(f(DeadBefore::List(vec![0])).validate(10).is_err());
        assert!(f(DeadBefore::List(vec![10])).validate(10).is_err());
        assert!(f(DeadBefore::Count(9)).validate(10).is_ok());
    }
}
