//! Ranks as threads of one process: one bounded lock-free MPSC queue per destination.
//!
//! Every destination owns `queue_capacity` pre-allocated packet buffers. A sender takes a free
//! buffer of the destination (none free: [`SendError::WindowFull`], the backpressure), copies
//! the payload in and pushes the buffer onto the destination's inbox; the receiver hands the
//! bytes to its sink and returns the buffer. Only pointers move through the queues and nothing
//! is allocated after [`InprocNet::new`].
//!
//! [`InprocNet::kill`] makes an endpoint dead: it delivers nothing more, what is sent to it
//! vanishes, and an endpoint that sends to it is told [`Delivery::Suspect`] on its next poll
//! (like a socket whose peer is gone), after which sends to it return
//! [`SendError::Suspected`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;

use super::{Delivery, MAX_PAYLOAD, SendError, Transport, TransportStats};

/// One pre-allocated packet buffer.
struct Packet {
    from: u32,
    len: u16,
    data: [u8; MAX_PAYLOAD],
}

/// The queues and liveness flags all endpoints share.
struct Shared {
    /// Per destination: packets waiting to be delivered (many producers, one consumer).
    inbox: Vec<ArrayQueue<Box<Packet>>>,
    /// Per destination: its free buffers (the receiver returns them, senders take them).
    free: Vec<ArrayQueue<Box<Packet>>>,
    dead: Vec<AtomicBool>,
}

/// The handle on an in-process network: kills endpoints. Cheap to clone, `Send + Sync`.
#[derive(Clone)]
pub struct InprocNet {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for InprocNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InprocNet").field("size", &self.size()).finish()
    }
}

impl InprocNet {
    /// A network of ranks `0..n` with `queue_capacity` buffers (at least 1) per destination,
    /// and its `n` endpoints, in rank order. Memory: `n * queue_capacity * ~1.2 KB`.
    pub fn new(n: u32, queue_capacity: usize) -> (InprocNet, Vec<InprocTransport>) {
        let cap = queue_capacity.max(1);
        let mut inbox = Vec::with_capacity(n as usize);
        let mut free = Vec::with_capacity(n as usize);
        let mut dead = Vec::with_capacity(n as usize);
        for _ in 0..n {
            inbox.push(ArrayQueue::new(cap));
            let pool = ArrayQueue::new(cap);
            for _ in 0..cap {
                // Cannot fail: exactly `cap` buffers go into a queue of capacity `cap`.
                let _ = pool.push(Box::new(Packet {
                    from: 0,
                    len: 0,
                    data: [0; MAX_PAYLOAD],
                }));
            }
            free.push(pool);
            dead.push(AtomicBool::new(false));
        }
        let shared = Arc::new(Shared { inbox, free, dead });
        let endpoints = (0..n)
            .map(|rank| InprocTransport {
                rank,
                size: n,
                shared: Arc::clone(&shared),
                batch: cap,
                to_report: Vec::with_capacity(n as usize),
                reported: vec![false; n as usize],
                suspected: vec![false; n as usize],
                stats: TransportStats::default(),
            })
            .collect();
        (InprocNet { shared }, endpoints)
    }

    /// Ranks in the network.
    pub fn size(&self) -> u32 {
        self.shared.dead.len() as u32
    }

    /// Makes `rank` dead (idempotent; out-of-range ranks are ignored).
    pub fn kill(&self, rank: u32) {
        if let Some(flag) = self.shared.dead.get(rank as usize) {
            flag.store(true, Ordering::Release);
        }
    }

    /// Whether `rank` was killed.
    pub fn is_dead(&self, rank: u32) -> bool {
        self.shared
            .dead
            .get(rank as usize)
            .is_some_and(|d| d.load(Ordering::Acquire))
    }
}

/// The endpoint of one rank of an [`InprocNet`].
pub struct InprocTransport {
    rank: u32,
    size: u32,
    shared: Arc<Shared>,
    /// At most this many messages are delivered per poll (the queue capacity).
    batch: usize,
    /// Dead peers this endpoint sent to, to report on the next poll.
    to_report: Vec<u32>,
    reported: Vec<bool>,
    suspected: Vec<bool>,
    stats: TransportStats,
}

impl std::fmt::Debug for InprocTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InprocTransport")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

impl InprocTransport {
    fn is_dead(&self, rank: u32) -> bool {
        self.shared.dead[rank as usize].load(Ordering::Acquire)
    }

    /// Whether a message may be waiting (used by `wait`).
    fn has_work(&self) -> bool {
        !self.to_report.is_empty() || !self.shared.inbox[self.rank as usize].is_empty()
    }
}

impl Transport for InprocTransport {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn send(&mut self, to: u32, bytes: &[u8], _now: Instant) -> Result<(), SendError> {
        if to >= self.size || to == self.rank {
            return Err(SendError::BadPeer);
        }
        if bytes.len() > MAX_PAYLOAD {
            return Err(SendError::TooLarge);
        }
        if self.suspected[to as usize] {
            return Err(SendError::Suspected);
        }
        if self.is_dead(self.rank) {
            // A dead endpoint is passive: what it sends vanishes.
            return Ok(());
        }
        if self.is_dead(to) {
            if !self.reported[to as usize] {
                self.reported[to as usize] = true;
                self.to_report.push(to);
            }
            self.stats.sent += 1;
            return Ok(());
        }
        let Some(mut packet) = self.shared.free[to as usize].pop() else {
            self.stats.window_full += 1;
            return Err(SendError::WindowFull);
        };
        packet.from = self.rank;
        packet.len = bytes.len() as u16;
        packet.data[..bytes.len()].copy_from_slice(bytes);
        // Cannot fail: the inbox has room for every buffer of its destination.
        let _ = self.shared.inbox[to as usize].push(packet);
        self.stats.sent += 1;
        Ok(())
    }

    fn poll(&mut self, _now: Instant, sink: &mut dyn FnMut(Delivery<'_>)) -> std::io::Result<usize> {
        if self.is_dead(self.rank) {
            return Ok(0);
        }
        let mut delivered = 0;
        for peer in self.to_report.drain(..) {
            self.suspected[peer as usize] = true;
            self.stats.suspected += 1;
            sink(Delivery::Suspect { peer });
            delivered += 1;
        }
        let me = self.rank as usize;
        for _ in 0..self.batch {
            let Some(packet) = self.shared.inbox[me].pop() else {
                break;
            };
            sink(Delivery::Message {
                from: packet.from,
                bytes: &packet.data[..usize::from(packet.len)],
            });
            let _ = self.shared.free[me].push(packet);
            self.stats.received += 1;
            delivered += 1;
        }
        Ok(delivered)
    }

    fn wait(&mut self, timeout: Duration) -> std::io::Result<()> {
        let start = Instant::now();
        let mut spins = 0u32;
        while !self.has_work() && start.elapsed() < timeout {
            if spins < 64 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    fn stats(&self) -> TransportStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(t: &mut InprocTransport) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        t.poll(Instant::now(), &mut |d| match d {
            Delivery::Message { from, bytes } => out.push((from, bytes.to_vec())),
            Delivery::Suspect { peer } => out.push((peer, b"SUSPECT".to_vec())),
        })
        .unwrap();
        out
    }

    #[test]
    fn inproc_delivers_in_order_per_sender() {
        let (_net, mut ep) = InprocNet::new(3, 64);
        let now = Instant::now();
        for i in 0u8..20 {
            ep[0].send(2, &[0, i], now).unwrap();
            ep[1].send(2, &[1, i], now).unwrap();
        }
        let got = collect(&mut ep[2]);
        assert_eq!(got.len(), 40);
        for sender in 0..2u32 {
            let seq: Vec<u8> = got
                .iter()
                .filter(|(f, _)| *f == sender)
                .map(|(_, b)| {
                    assert_eq!(u32::from(b[0]), sender);
                    b[1]
                })
                .collect();
            assert_eq!(seq, (0u8..20).collect::<Vec<_>>());
        }
        assert_eq!(ep[2].stats().received, 40);
        assert_eq!(ep[0].stats().sent, 20);
        assert!(collect(&mut ep[0]).is_empty());
    }

    #[test]
    fn inproc_rejects_bad_sends() {
        let (_net, mut ep) = InprocNet::new(2, 4);
        let now = Instant::now();
        assert_eq!(ep[0].send(0, b"x", now), Err(SendError::BadPeer));
        assert_eq!(ep[0].send(2, b"x", now), Err(SendError::BadPeer));
        let big = [0u8; MAX_PAYLOAD + 1];
        assert_eq!(ep[0].send(1, &big, now), Err(SendError::TooLarge));
        ep[0].send(1, &big[..MAX_PAYLOAD], now).unwrap();
        ep[0].send(1, &[], now).unwrap();
        let got = collect(&mut ep[1]);
        assert_eq!(got[0].1.len(), MAX_PAYLOAD);
        assert!(got[1].1.is_empty());
    }

    #[test]
    fn inproc_backpressure_when_queue_full() {
        let (_net, mut ep) = InprocNet::new(2, 4);
        let now = Instant::now();
        for i in 0..4u8 {
            ep[0].send(1, &[i], now).unwrap();
        }
        assert_eq!(ep[0].send(1, &[9], now), Err(SendError::WindowFull));
        assert_eq!(ep[0].stats().window_full, 1);
        assert_eq!(collect(&mut ep[1]).len(), 4);
        // The buffers came back: sending works again.
        ep[0].send(1, &[4], now).unwrap();
        assert_eq!(collect(&mut ep[1]), vec![(0, vec![4])]);
    }

    #[test]
    fn inproc_kill_makes_senders_suspect() {
        let (net, mut ep) = InprocNet::new(3, 8);
        let now = Instant::now();
        ep[0].send(1, b"before", now).unwrap();
        net.kill(1);
        assert!(net.is_dead(1));
        // The dead endpoint delivers nothing more, even what was queued.
        assert!(collect(&mut ep[1]).is_empty());
        // A send to it vanishes; the sender learns on its next poll, once.
        ep[0].send(1, b"lost", now).unwrap();
        ep[0].send(1, b"lost", now).unwrap();
        assert_eq!(collect(&mut ep[0]), vec![(1, b"SUSPECT".to_vec())]);
        assert!(collect(&mut ep[0]).is_empty());
        assert_eq!(ep[0].send(1, b"x", now), Err(SendError::Suspected));
        assert_eq!(ep[0].stats().suspected, 1);
        // Rank 2 never sent to it: not told; traffic among the living goes on.
        ep[2].send(0, b"hi", now).unwrap();
        assert_eq!(collect(&mut ep[0]), vec![(2, b"hi".to_vec())]);
        assert!(collect(&mut ep[2]).is_empty());
        // What the dead endpoint sends vanishes.
        ep[1].send(2, b"ghost", now).unwrap();
        assert!(collect(&mut ep[2]).is_empty());
    }

    #[test]
    fn inproc_threads_exchange_everything_in_order() {
        let (_net, ep) = InprocNet::new(4, 32);
        let out = crate::transport::testutil::exchange(ep, 5_000, 16, &[], Duration::from_secs(60));
        crate::transport::testutil::assert_complete(&out, 5_000);
        for o in &out {
            assert_eq!(o.stats.sent, 3 * 5_000);
            assert_eq!(o.stats.received, 3 * 5_000);
        }
    }

    #[test]
    fn inproc_killed_peer_never_blocks_the_others() {
        let (net, mut ep) = InprocNet::new(4, 16);
        net.kill(3);
        let _dead = ep.pop();
        let out = crate::transport::testutil::exchange(ep, 1_000, 8, &[3], Duration::from_secs(60));
        crate::transport::testutil::assert_complete(&out, 1_000);
        for o in &out {
            assert_eq!(o.suspects, vec![3]);
        }
    }

    #[test]
    #[ignore = "measurement: cargo test --release --lib transport -- --ignored --nocapture"]
    fn inproc_latency_and_rate() {
        const ROUNDS: usize = 200_000;
        let (_net, mut ep) = InprocNet::new(2, 256);
        let mut b = ep.pop().unwrap();
        let mut a = ep.pop().unwrap();
        let echo = std::thread::spawn(move || {
            let mut n = 0;
            while n < ROUNDS {
                let mut got = 0;
                b.poll(Instant::now(), &mut |_| got += 1).unwrap();
                for _ in 0..got {
                    while b.send(0, &[2u8; 8], Instant::now()).is_err() {}
                }
                n += got;
            }
            b
        });
        let mut rtt = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let t = Instant::now();
            a.send(1, &[1u8; 8], t).unwrap();
            let mut got = false;
            while !got {
                a.poll(t, &mut |_| got = true).unwrap();
            }
            rtt.push(t.elapsed());
        }
        rtt.sort_unstable();
        let half = rtt[ROUNDS / 2] / 2;
        let mut b = echo.join().unwrap();
        let sink = std::thread::spawn(move || {
            let mut n = 0;
            while n < 10 * ROUNDS {
                n += b.poll(Instant::now(), &mut |_| {}).unwrap();
            }
        });
        let t = Instant::now();
        let mut sent = 0;
        while sent < 10 * ROUNDS {
            if a.send(1, &[3u8; 8], t).is_ok() {
                sent += 1;
            }
        }
        sink.join().unwrap();
        let rate = (10 * ROUNDS) as f64 / t.elapsed().as_secs_f64();
        println!(
            "inproc one-way (half ping-pong, 8 B, median of {ROUNDS}): {:.0} ns; stream rate {rate:.0} msg/s",
            half.as_nanos()
        );
    }
}
