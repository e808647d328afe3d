//! Test harness shared by the transports: ranks on threads exchanging numbered messages.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::{Delivery, SendError, Transport, TransportStats};

/// What one rank saw.
#[derive(Debug)]
pub struct Outcome {
    pub rank: u32,
    /// Messages received per sender (in order: anything else is in `order_errors`).
    pub received: Vec<u32>,
    /// Messages out of order, duplicated or corrupted.
    pub order_errors: u32,
    /// Peers reported suspected, in order of report.
    pub suspects: Vec<u32>,
    /// A live peer refused as suspected.
    pub refused_live: u32,
    /// The peer that fenced this rank (it suspected this rank), if one did.
    pub fenced_by: Option<u32>,
    pub stats: TransportStats,
    /// When this rank had everything (received all, all acknowledged).
    pub finished_after: Option<Duration>,
}

/// Every endpoint sends `m` messages of `len` bytes (at least 8) to every other endpoint given,
/// and as many to each rank of `silent` (which never answers) until told it is suspected; each
/// checks what it receives is exactly once and in order. Stops when all are done or `limit`.
pub fn exchange<T: Transport + 'static>(
    eps: Vec<T>,
    m: u32,
    len: usize,
    silent: &[u32],
    limit: Duration,
) -> Vec<Outcome> {
    let live: Vec<u32> = eps.iter().map(|t| t.rank()).collect();
    let finished = Arc::new(AtomicU32::new(0));
    let start = Instant::now();
    let handles: Vec<_> = eps
        .into_iter()
        .map(|mut t| {
            let live = live.clone();
            let silent = silent.to_vec();
            let finished = Arc::clone(&finished);
            std::thread::spawn(move || {
                let me = t.rank();
                let n = t.size() as usize;
                let targets: Vec<u32> = live.iter().chain(silent.iter()).copied().filter(|&r| r != me).collect();
                let mut next = vec![0u32; n];
                let mut out = Outcome {
                    rank: me,
                    received: vec![0; n],
                    order_errors: 0,
                    suspects: Vec::new(),
                    refused_live: 0,
                    fenced_by: None,
                    stats: TransportStats::default(),
                    finished_after: None,
                };
                let expected = m * (live.len() as u32 - 1);
                let mut got = 0u32;
                let mut buf = vec![0u8; len.max(8)];
                let deadline = start + limit;
                let mut done = false;
                while Instant::now() < deadline {
                    let mut progress = false;
                    for &to in &targets {
                        let i = to as usize;
                        if next[i] >= m || out.suspects.contains(&to) {
                            continue;
                        }
                        buf[..4].copy_from_slice(&me.to_le_bytes());
                        buf[4..8].copy_from_slice(&next[i].to_le_bytes());
                        match t.send(to, &buf, Instant::now()) {
                            Ok(()) => {
                                next[i] += 1;
                                progress = true;
                            }
                            Err(SendError::WindowFull) => {}
                            Err(SendError::Suspected) if !silent.contains(&to) => {
                                out.refused_live += 1;
                                next[i] = m;
                            }
                            Err(_) => next[i] = m,
                        }
                    }
                    let k = t
                        .poll(Instant::now(), &mut |d| match d {
                            Delivery::Message { from, bytes } => {
                                let f = from as usize;
                                let ok = bytes.len() == len.max(8)
                                    && bytes[..4] == from.to_le_bytes()
                                    && f < out.received.len()
                                    && bytes[4..8] == out.received[f].to_le_bytes();
                                if ok {
                                    out.received[f] += 1;
                                    got += 1;
                                } else {
                                    out.order_errors += 1;
                                }
                            }
                            Delivery::Suspect { peer } => out.suspects.push(peer),
                            Delivery::Fenced { by } => out.fenced_by = Some(by),
                        })
                        .unwrap_or(0);
                    progress |= k > 0;
                    let sent_all = targets
                        .iter()
                        .all(|&r| next[r as usize] >= m || out.suspects.contains(&r));
                    if !done && got >= expected && sent_all && t.unacked() == 0 {
                        done = true;
                        out.finished_after = Some(start.elapsed());
                        finished.fetch_add(1, Ordering::AcqRel);
                    }
                    // Keep serving (acknowledging) the others until everyone is done.
                    if done && finished.load(Ordering::Acquire) as usize == live.len() {
                        break;
                    }
                    if !progress {
                        let _ = t.wait(Duration::from_micros(100));
                    }
                }
                out.stats = t.stats();
                out
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("exchange thread panicked"))
        .collect()
}

/// Asserts that every endpoint got exactly `m` messages, in order, from every other one.
pub fn assert_complete(outcomes: &[Outcome], m: u32) {
    let live: Vec<u32> = outcomes.iter().map(|o| o.rank).collect();
    for o in outcomes {
        assert_eq!(o.order_errors, 0, "rank {}: {o:?}", o.rank);
        assert_eq!(o.refused_live, 0, "rank {}: {o:?}", o.rank);
        assert_eq!(o.fenced_by, None, "rank {} was fenced: {o:?}", o.rank);
        assert!(o.finished_after.is_some(), "rank {} unfinished: {o:?}", o.rank);
        for &r in &live {
            if r != o.rank {
                assert_eq!(o.received[r as usize], m, "rank {} from {r}: {o:?}", o.rank);
            }
        }
        assert!(
            o.suspects.iter().all(|s| !live.contains(s)),
            "rank {} suspected a live peer: {o:?}",
            o.rank
        );
    }
}
