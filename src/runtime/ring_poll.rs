//! What an in-process poll costs per ring ([`per_ring_ns`]): the in-process transport gives
//! each (sender, receiver) pair a ring at the pair's first message and keeps it, and a
//! receiver's every poll reads the head of each ring it has (below `DIRECT_MAX` ranks,
//! `transport::inproc`). A node of a checked correction hears from its ring neighbours too,
//! so it polls several rings where a node of the 2-node calibration polls one, and where
//! nodes share a core every visit pays the difference: the model charges it per sender
//! beyond the first (`sim::timing::Timing::set_poll_per_source`).

use std::time::Instant;

use crate::transport::inproc::InprocNet;
use crate::transport::{Delivery, Transport};

/// Polls timed per clock read: a clock read costs as much as a few idle polls.
const BATCH: usize = 64;

/// The median of `v` (0 for none).
fn median(mut v: Vec<u64>) -> f64 {
    v.sort_unstable();
    v.get(v.len() / 2).map_or(0.0, |&m| m as f64)
}

/// An in-process endpoint with `rings` rings (as many peers each sent it one message, which
/// it drained): the median cost of its idle poll and of a poll that receives one 8-byte
/// message its last peer sent just before, ns, over `rounds` polls of each, on this thread
/// (the rings' lines in its cache, as for nodes that share a core).
pub fn polls_by_rings(rings: u32, rounds: usize) -> Result<(f64, f64), String> {
    polls(rings, rounds, true)
}

/// [`polls_by_rings`]; the polls that receive only when `receiving` (else their cost is 0).
fn polls(rings: u32, rounds: usize, receiving: bool) -> Result<(f64, f64), String> {
    let rings = rings.max(1);
    let (_net, mut eps) = InprocNet::new(rings + 1, 256);
    let now = Instant::now();
    let mut rx = eps.remove(0);
    let fail = |e: &dyn std::fmt::Debug| format!("the ring poll measurement: {e:?}");
    for ep in eps.iter_mut() {
        ep.send(0, &[7u8; 8], now).map_err(|e| fail(&e))?;
    }
    let mut got = 0usize;
    while got < rings as usize {
        rx.poll(now, &mut |d| got += usize::from(matches!(d, Delivery::Message { .. })))
            .map_err(|e| fail(&e))?;
    }
    let last = eps.last_mut().ok_or("the ring poll measurement: no peer")?;
    let mut idle = Vec::with_capacity(rounds / BATCH + 1);
    let mut one = Vec::with_capacity(rounds / BATCH + 1);
    for _ in 0..rounds.div_ceil(BATCH) {
        let t = Instant::now();
        for _ in 0..BATCH {
            if rx.poll(now, &mut |_| {}).map_err(|e| fail(&e))? != 0 {
                return Err("the ring poll measurement: an idle poll delivered".into());
            }
        }
        idle.push(t.elapsed().as_nanos() as u64);
        if !receiving {
            continue;
        }
        let mut ns = 0u64;
        for _ in 0..BATCH {
            last.send(0, &[7u8; 8], now).map_err(|e| fail(&e))?;
            let t = Instant::now();
            let mut n = 0;
            rx.poll(now, &mut |d| n += usize::from(matches!(d, Delivery::Message { .. })))
                .map_err(|e| fail(&e))?;
            ns += t.elapsed().as_nanos() as u64;
            if n != 1 {
                return Err(format!(
                    "the ring poll measurement: a poll received {n} messages, not 1"
                ));
            }
        }
        one.push(ns);
    }
    Ok((median(idle) / BATCH as f64, median(one) / BATCH as f64))
}

/// What each ring beyond the first adds to an idle poll, ns, measured with `most` rings (at
/// least 2) against one: the median of three alternations of 20 000 polls each, at least 0.
pub fn per_ring_ns(most: u32) -> Result<f64, String> {
    let most = most.max(2);
    let mut per = Vec::with_capacity(3);
    for _ in 0..3 {
        // Idle polls only: the receiving half of the measurement is not used here.
        let (one, _) = polls(1, 20_000, false)?;
        let (many, _) = polls(most, 20_000, false)?;
        per.push(((many - one) / f64::from(most - 1)).max(0.0));
    }
    per.sort_by(f64::total_cmp);
    Ok(per[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_rings_make_an_idle_poll_dearer_and_the_per_ring_figure_says_by_how_much() {
        // Reading 31 ring heads is more work than reading one on any machine (a loaded one
        // too: the medians of thousands of batches).
        let (one, with_one) = polls_by_rings(1, 4096).unwrap();
        let (many, _) = polls_by_rings(31, 4096).unwrap();
        assert!(one > 0.0 && with_one > 0.0, "{one} {with_one}");
        assert!(many > one, "31 rings {many} ns against 1 ring {one} ns");
        let per = per_ring_ns(31).unwrap();
        assert!(per > 0.0 && per < 1000.0, "{per} ns a ring");
    }
}
