use super::*;
use crate::protocol::ProtoRng;
use crate::topology::launch_tree::LaunchShape;

/// Synchronous rounds: every machine's phase, then every message sent in it delivered.
/// Messages to `dead` vanish. Returns the outputs per process.
fn rounds(ms: &mut [WatchMachine], dead: Option<Rank>, from: Time, count: Time) -> Vec<Vec<Learned>> {
    let mut outputs = vec![Vec::new(); ms.len()];
    for now in from..from + count {
        let mut flight = Vec::new();
        for (i, m) in ms.iter_mut().enumerate() {
            if Some(i as Rank) == dead {
                continue;
            }
            assert_eq!(m.poll_timeout(), Some(now), "one phase per unit");
            m.handle(now, Event::Timer).unwrap();
            while let Some((to, msg)) = m.poll_transmit(now) {
                flight.push((i as Rank, to, msg));
            }
        }
        for (from, to, msg) in flight {
            if Some(to) != dead {
                ms[to as usize].handle(now, Event::Message { from, msg }).unwrap();
            }
        }
        for (i, m) in ms.iter_mut().enumerate() {
            outputs[i].extend(std::iter::from_fn(|| m.poll_output()));
        }
    }
    outputs
}

#[test]
fn the_watch_builds_the_bmg_then_learns_a_death_everywhere_and_repairs_the_overlay() {
    let tree = LaunchTree::build(LaunchShape::Binomial { depth: 4 }, 16, &mut ProtoRng::new(4)).unwrap();
    let n = tree.len();
    let mut ms: Vec<WatchMachine> = (0..n)
        .map(|r| WatchMachine::new(r, n, &tree, BmgOverlay::from_tree(&tree, r, 8), 1, 0))
        .collect();
    let quiet = rounds(&mut ms, None, 0, 400);
    assert!(quiet.iter().all(Vec::is_empty), "no death yet");
    assert!(ms.iter().all(WatchMachine::legitimate), "the BMG is built");
    let dead = 5;
    let mut nb = Vec::new();
    let mut detectors = Vec::new();
    for (r, m) in ms.iter_mut().enumerate() {
        m.neighbours(&mut nb);
        if r as Rank != dead && nb.contains(&dead) {
            m.handle(400, Event::Suspect(dead)).unwrap();
            detectors.push(r as Rank);
        }
    }
    assert!(!detectors.is_empty());
    let mut learned: Vec<Vec<Learned>> = ms
        .iter_mut()
        .map(|m| std::iter::from_fn(|| m.poll_output()).collect())
        .collect();
    for (r, l) in rounds(&mut ms, Some(dead), 400, 400).into_iter().enumerate() {
        learned[r].extend(l);
    }
    for (r, m) in ms.iter().enumerate() {
        if r as Rank == dead {
            continue;
        }
        let detected = detectors.contains(&(r as Rank));
        assert_eq!(learned[r], [Learned { dead, detected }], "rank {r}");
        assert!(m.legitimate(), "rank {r} repaired");
        assert_eq!(m.mended().survivors(), n - 1);
        m.neighbours(&mut nb);
        assert!(!nb.contains(&dead));
    }
}
