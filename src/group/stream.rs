//! A closed-loop stream of broadcasts ([`Group::stream`]): the group runs `warmup + ops`
//! broadcasts back to back, at most `window` in flight, their payloads made and checked by a
//! [`Payloads`] source per member and delivered to it (no [`Event`] per delivery), and
//! returns what the coordinator measured: the same run, numbers and checks as `ftcoll bench`
//! (which is such a stream).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use super::{Event, Group, GroupError};
use crate::runtime::board::{Control, WINDOW};
use crate::runtime::cluster::{ClusterResult, Coordinator};
use crate::runtime::node::{Generated, Payloads};

/// A closed-loop stream of broadcasts; see [`Group::stream`].
pub struct Stream<'a> {
    /// Measured operations.
    pub ops: u64,
    /// Operations run first and not measured.
    pub warmup: u64,
    /// Operations in flight at once (1..=32).
    pub window: u64,
    /// Operation `i` of the stream (warmup included) is rooted at `roots[i % roots.len()]`.
    pub roots: Vec<u32>,
    /// Stop once this many operations in a row timed out, or at once when the next one's root
    /// is dead (the rest count as not run); `None`: run every operation.
    pub give_up_after: Option<u32>,
    /// Each member's payloads, by rank: the root's source, every receiver's check, and the
    /// sink of its deliveries.
    pub payloads: Box<dyn FnMut(u32) -> Box<dyn Payloads> + 'a>,
    /// Hears the operations over so far (warmup included) about every 100 ms.
    pub progress: Option<&'a (dyn Fn(u64) + Sync)>,
}

impl Stream<'_> {
    /// `ops` operations rooted at member 0, one in flight, no warmup, carrying `len` bytes
    /// made up from their sequence numbers and checked byte for byte at every receiver
    /// ([`Generated`], a benchmark's payloads).
    pub fn generated(ops: u64, len: usize) -> Self {
        Stream {
            ops,
            warmup: 0,
            window: 1,
            roots: vec![0],
            give_up_after: None,
            payloads: Box::new(move |_| Box::new(Generated::new(len))),
            progress: None,
        }
    }
}

/// A member's slot for a stream's payloads and the operations they serve, filled by the
/// lead before the stream's first operation is allowed.
pub(super) type Offer = Arc<Mutex<Option<(Range<u64>, Box<dyn Payloads>)>>>;

/// A stream as the lead gets it.
pub(super) struct StreamReq {
    /// Its first operation's sequence number.
    pub(super) first: u64,
    pub(super) ops: u64,
    pub(super) warmup: u64,
    pub(super) window: u64,
    pub(super) roots: Vec<u32>,
    pub(super) give_up_after: Option<u32>,
    pub(super) payloads: Vec<Box<dyn Payloads>>,
    pub(super) reply: mpsc::Sender<Reply>,
}

/// What the caller of a stream hears: the coordinator's result, then each worker's counters.
pub(super) enum Reply {
    Coordinator(ClusterResult),
    Part(ClusterResult),
}

/// A stream the lead runs.
pub(super) struct Streaming {
    pub(super) coord: Coordinator,
    roots: Vec<u32>,
    first: u64,
    /// Operations from here on have no root named yet.
    next_root: u64,
    started: Instant,
    pub(super) reply: mpsc::Sender<Reply>,
}

impl Streaming {
    pub(super) fn new(req: StreamReq, coord: Coordinator) -> Self {
        Streaming {
            coord,
            roots: req.roots,
            first: req.first,
            next_root: req.first,
            started: Instant::now(),
            reply: req.reply,
        }
    }

    /// Names the root of every operation the coordinator may allow next.
    #[inline]
    pub(super) fn name_roots(&mut self, ctl: &Control) {
        let until = (self.coord.retired() + self.coord.window()).min(self.coord.end());
        while self.next_root < until {
            let i = (self.next_root - self.first) % self.roots.len() as u64;
            let root = self.roots[i as usize];
            // Written only when it changes: every receiver reads it per datagram, and a
            // one-root stream then never moves the line between cores.
            if ctl.root_of(self.next_root) != root {
                ctl.set_root(self.next_root, root);
            }
            self.next_root += 1;
        }
    }

    /// Hands the coordinator's result to the caller.
    pub(super) fn finish(self) {
        let mut res = self.coord.into_result();
        res.wall = self.started.elapsed();
        let _ = self.reply.send(Reply::Coordinator(res));
    }
}

/// Payloads waiting for their root to start them, by sequence number.
pub(super) type Pending = Arc<Mutex<HashMap<u64, Vec<u8>>>>;

/// One member's payloads: the caller's bytes at the root, any bytes admitted (they are the
/// root's, the transport delivers them intact), deliveries reported as events; a stream's
/// operations go to the stream's payloads instead.
pub(super) struct Member {
    pub(super) rank: u32,
    pub(super) max: usize,
    pub(super) pending: Pending,
    pub(super) events: mpsc::Sender<Event>,
    pub(super) offer: Offer,
    stream: Option<(Range<u64>, Box<dyn Payloads>)>,
}

impl Member {
    pub(super) fn new(rank: u32, max: usize, pending: Pending, events: mpsc::Sender<Event>, offer: Offer) -> Self {
        Member {
            rank,
            max,
            pending,
            events,
            offer,
            stream: None,
        }
    }

    /// The stream's payloads if operation `seq` is a stream's.
    #[inline]
    fn streamed(&mut self, seq: u64) -> Option<&mut dyn Payloads> {
        let ours = match &self.stream {
            Some((ops, _)) if ops.contains(&seq) => true,
            _ => self.take_offer(seq),
        };
        if ours {
            self.stream.as_mut().map(|(_, p)| &mut **p as &mut dyn Payloads)
        } else {
            None
        }
    }

    /// Drops a stream that is over, takes the one offered if any; whether `seq` is its.
    #[cold]
    fn take_offer(&mut self, seq: u64) -> bool {
        if self.stream.as_ref().is_some_and(|(ops, _)| seq >= ops.end) {
            self.stream = None;
        }
        if let Some(s) = self.offer.lock().expect("not poisoned").take() {
            self.stream = Some(s);
        }
        self.stream.as_ref().is_some_and(|(ops, _)| ops.contains(&seq))
    }
}

impl Payloads for Member {
    fn source(&mut self, seq: u64, out: &mut Vec<u8>) {
        if let Some(p) = self.streamed(seq) {
            p.source(seq, out);
        } else if let Some(b) = self.pending.lock().expect("not poisoned").remove(&seq) {
            out.extend_from_slice(&b);
        }
    }

    fn admit(&mut self, seq: u64, bytes: &[u8]) -> bool {
        match self.streamed(seq) {
            Some(p) => p.admit(seq, bytes),
            None => bytes.len() <= self.max,
        }
    }

    fn deliver(&mut self, root: u32, seq: u64, bytes: &[u8]) {
        match self.streamed(seq) {
            Some(p) => p.deliver(root, seq, bytes),
            None => {
                let _ = self.events.send(Event::Delivered {
                    member: self.rank,
                    root,
                    seq,
                    bytes: bytes.to_vec(),
                });
            }
        }
    }
}

impl Group {
    /// Runs a closed-loop stream of `s.warmup + s.ops` broadcasts after those asked before,
    /// and returns what was measured: coloring latency (root's start to the last live
    /// member's delivery) and messages per measured operation, violations (a live member that
    /// did not deliver exactly once, intact), timeouts, and the members' counters (since the
    /// group was built). Their sequence numbers follow the broadcasts asked before; their
    /// deliveries go to `s.payloads`, not to [`Group::next_event`] (crashes still do).
    /// Payloads longer than [`Group::max_payload`] ([`Payloads::max_len`]) are refused with
    /// [`GroupError::TooLarge`], as [`Group::broadcast`] refuses them; those of a [`Payloads`]
    /// that states no length are checked as its source writes them, and the stream then ends
    /// with that error (their operations time out: the bytes are not sent).
    ///
    /// ```
    /// use ftcoll::group::{Group, Stream};
    ///
    /// let mut group = Group::local(4)?;
    /// let res = group.stream(Stream { warmup: 10, window: 4, ..Stream::generated(100, 64) })?;
    /// assert_eq!((res.measured, res.violations, res.timeouts), (100, 0, 0));
    /// # Ok::<(), ftcoll::group::GroupError>(())
    /// ```
    pub fn stream(&mut self, mut s: Stream<'_>) -> Result<ClusterResult, GroupError> {
        if !self.bcasts {
            return Err(GroupError::NoBroadcasts);
        }
        if s.ops == 0 {
            return Err(GroupError::BadStream("no operations".into()));
        }
        if s.window == 0 || s.window > WINDOW as u64 / 2 {
            return Err(GroupError::BadStream(format!(
                "a window of {}, not in 1..={}",
                s.window,
                WINDOW / 2
            )));
        }
        if s.roots.is_empty() {
            return Err(GroupError::BadStream("no roots".into()));
        }
        if let Some(&r) = s.roots.iter().find(|&&r| r >= self.n) {
            return Err(GroupError::NoSuchMember(r));
        }
        let total = s
            .warmup
            .checked_add(s.ops)
            .filter(|t| t.checked_add(self.next_seq).is_some_and(|e| e < u64::MAX / 2))
            .ok_or_else(|| GroupError::BadStream("too many operations".into()))?;
        // Every member's payloads, made before anything starts: one that says it writes more
        // than a datagram carries is refused as `broadcast` refuses those bytes (they would
        // not be sent, and every operation would time out).
        let payloads: Vec<Box<dyn Payloads>> = (0..self.n).map(&mut s.payloads).collect();
        if let Some(len) = payloads
            .iter()
            .filter_map(|p| p.max_len())
            .find(|&len| len > self.max_payload)
        {
            return Err(GroupError::TooLarge {
                len,
                max: self.max_payload,
            });
        }
        // One that states no length is checked as it writes: the stream then says so.
        let longest = Arc::new(AtomicUsize::new(0));
        let payloads = payloads
            .into_iter()
            .map(|inner| {
                Box::new(Bounded {
                    inner,
                    max: self.max_payload,
                    longest: longest.clone(),
                }) as Box<dyn Payloads>
            })
            .collect();
        let first = self.next_seq;
        let (tx, rx) = mpsc::channel();
        self.request(super::driver::Request::Stream(StreamReq {
            first,
            ops: s.ops,
            warmup: s.warmup,
            window: s.window,
            roots: std::mem::take(&mut s.roots),
            give_up_after: s.give_up_after,
            payloads,
            reply: tx,
        }))?;
        self.next_seq += total;
        let done = |ctl: &Control| {
            ctl.retired
                .load(std::sync::atomic::Ordering::Relaxed)
                .saturating_sub(first)
        };
        let (mut res, mut parts) = (None, Vec::new());
        while res.is_none() || parts.len() < self.workers {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(Reply::Coordinator(r)) => res = Some(r),
                Ok(Reply::Part(p)) => parts.push(p),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(p) = s.progress {
                        p(done(&self.ctl).min(total));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(GroupError::Closed),
            }
        }
        if let Some(p) = s.progress {
            p(done(&self.ctl).min(total));
        }
        let mut res = res.expect("the coordinator's result");
        for p in parts {
            res.add_counters(p);
        }
        match longest.load(Ordering::Acquire) {
            0 => Ok(res),
            len => Err(GroupError::TooLarge {
                len,
                max: self.max_payload,
            }),
        }
    }
}

/// A member's payloads whose source wrote more than a broadcast carries, noted in `longest`
/// (the longest such, 0: none): a [`Payloads`] that states no [`Payloads::max_len`] cannot be
/// refused before the stream starts, and its bytes would not be sent (the operation times out
/// with only a drop counted), so the stream's caller is told at its end, as
/// [`Group::broadcast`] refuses those bytes.
struct Bounded {
    inner: Box<dyn Payloads>,
    max: usize,
    longest: Arc<AtomicUsize>,
}

impl Payloads for Bounded {
    fn source(&mut self, seq: u64, out: &mut Vec<u8>) {
        self.inner.source(seq, out);
        if out.len() > self.max {
            self.longest.fetch_max(out.len(), Ordering::AcqRel);
        }
    }

    fn admit(&mut self, seq: u64, bytes: &[u8]) -> bool {
        self.inner.admit(seq, bytes)
    }

    fn deliver(&mut self, root: u32, seq: u64, bytes: &[u8]) {
        self.inner.deliver(root, seq, bytes);
    }

    fn max_len(&self) -> Option<usize> {
        self.inner.max_len()
    }

    fn wrong_root(&mut self, seq: u64, named: u32, heard: u32) {
        self.inner.wrong_root(seq, named, heard);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of `len` at the root, no length stated up front.
    struct Unstated(usize);

    impl Payloads for Unstated {
        fn source(&mut self, _: u64, out: &mut Vec<u8>) {
            out.resize(self.0, 7);
        }
        fn admit(&mut self, _: u64, _: &[u8]) -> bool {
            true
        }
        fn deliver(&mut self, _: u32, _: u64, _: &[u8]) {}
    }

    /// A stream whose payloads state no length and write more than a broadcast carries ends
    /// with the error a broadcast of those bytes gets (it returned a result of timeouts, the
    /// bytes never sent); within the limit it runs cleanly.
    #[test]
    fn a_stream_of_unstated_payloads_longer_than_a_broadcast_carries_is_refused() {
        let mut g = Group::builder(4)
            .agreements(false)
            .op_timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let max = g.max_payload();
        let stream = |len: usize| Stream {
            payloads: Box::new(move |_| Box::new(Unstated(len))),
            ..Stream::generated(3, 0)
        };
        assert_eq!(
            g.stream(stream(100_000)).unwrap_err(),
            GroupError::TooLarge { len: 100_000, max }
        );
        let res = g.stream(stream(max)).unwrap();
        assert_eq!((res.measured, res.violations, res.timeouts), (3, 0, 0));
    }
}
