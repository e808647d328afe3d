//! The returns a node process streams to the process that classifies them (`agree --procs`,
//! `agree --join`): batches of [`Rec`]s, one line ([`crate::wire::stream`]'s format) per
//! [`BATCH`] returns or [`FLUSH_MS`], and the in-order merge of every node's stream into one
//! [`Window`] (ERA §5.1's classes per agreement).
//!
//! The merge: a node returns agreements in id order, so once every node still reporting has
//! sent some id `w`, nothing below `w` can come any more and the returns up to `w` go to the
//! window in id order (its ring then never sees a return more than one id late). Queues hold
//! what the slowest stream has not reached: a batch or two, or at most [`MAX_QUEUED`] returns
//! (a node that stopped reporting without saying so is then left behind as `late`).

use std::collections::VecDeque;

use crate::protocol::Rank;
use crate::protocol::agree::AgreeId;
use crate::runtime::agree_window::{Rec, Window};
pub use crate::wire::stream::{PREFIX, decode, encode};
/// Returns per line at most (a line is also sent after [`FLUSH_MS`] with fewer).
pub const BATCH: usize = 512;
/// The longest a return waits in a node before it is sent, ms.
pub const FLUSH_MS: u64 = 20;
/// Returns the merge holds at most before it gives up waiting for the slowest stream.
pub const MAX_QUEUED: usize = 1 << 16;

/// Every node's stream merged into one [`Window`], in id order.
pub struct Merge {
    queues: Vec<VecDeque<(AgreeId, Rec)>>,
    /// Streams that may still send (not finished, killed or gone).
    open: Vec<bool>,
    /// The last id each stream sent.
    reached: Vec<Option<AgreeId>>,
    queued: usize,
    pub window: Window,
}

impl Merge {
    pub fn new(n: u32, window: Window) -> Self {
        Self {
            queues: (0..n).map(|_| VecDeque::new()).collect(),
            open: vec![true; n as usize],
            reached: vec![None; n as usize],
            queued: 0,
            window,
        }
    }

    /// Takes a batch of `rank`'s returns and passes on what is complete; `dead(r, i)`: node
    /// `r`'s return of agreement `i` does not count ([`Window`]).
    pub fn push(&mut self, rank: Rank, recs: Vec<(AgreeId, Rec)>, dead: &dyn Fn(Rank, AgreeId) -> bool) {
        let r = rank as usize;
        if let Some(&(last, _)) = recs.last() {
            self.reached[r] = Some(self.reached[r].map_or(last, |x| x.max(last)));
        }
        self.queued += recs.len();
        self.queues[r].extend(recs);
        self.release(dead);
    }

    /// `rank` sends no more (it reported, was killed or its stream ended).
    pub fn close(&mut self, rank: Rank, dead: &dyn Fn(Rank, AgreeId) -> bool) {
        self.open[rank as usize] = false;
        self.release(dead);
    }

    /// Passes everything on and finalizes the window (the end of the run).
    pub fn finish(&mut self, dead: &dyn Fn(Rank, AgreeId) -> bool) {
        self.open.iter_mut().for_each(|o| *o = false);
        self.release(dead);
        self.window.flush(dead);
    }

    fn release(&mut self, dead: &dyn Fn(Rank, AgreeId) -> bool) {
        // Everything up to the smallest id every open stream reached is complete (nothing
        // while an open stream has sent nothing yet).
        let mut upto = Some(AgreeId::MAX);
        for (r, _) in self.open.iter().enumerate().filter(|(_, o)| **o) {
            upto = upto.zip(self.reached[r]).map(|(u, x)| u.min(x));
        }
        loop {
            let next = (0..self.queues.len())
                .filter_map(|r| self.queues[r].front().map(|f| (f.0, r)))
                .min();
            let Some((id, r)) = next else { break };
            if upto.is_none_or(|u| id > u) && self.queued <= MAX_QUEUED {
                break;
            }
            let (id, rec) = self.queues[r].pop_front().expect("a front");
            self.queued -= 1;
            self.window.record(r as Rank, id, rec, dead);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::agree_window::tests::rec;

    #[test]
    fn streams_merge_in_id_order_whatever_their_batching() {
        // Three nodes return 2000 agreements in step, each sending batches of its own size:
        // nothing is late, every agreement is classed once, queues stay within the batches.
        let n = 3u32;
        let mut m = Merge::new(n, Window::new(0, None));
        let rec_of = |r: u32, i: u64| (i, rec(i * 100, i * 100 + 50 + u64::from(r), 9, true));
        let sizes = [7usize, 256, 31];
        let mut pending: Vec<Vec<(AgreeId, Rec)>> = vec![Vec::new(); 3];
        let mut most = 0;
        for i in 0..2000u64 {
            for r in 0..n as usize {
                pending[r].push(rec_of(r as u32, i));
                if pending[r].len() == sizes[r] {
                    m.push(r as u32, std::mem::take(&mut pending[r]), &|_, _| false);
                    most = most.max(m.queued);
                }
            }
        }
        for (r, p) in pending.into_iter().enumerate() {
            m.push(r as u32, p, &|_, _| false);
        }
        m.finish(&|_, _| false);
        assert_eq!(
            (m.window.agreements, m.window.late, m.window.disagreements),
            (2000, 0, 0)
        );
        assert_eq!(m.window.classes[0].agreement.len(), 2000);
        assert_eq!(m.window.classes[0].node.len(), 6000);
        assert_eq!(m.window.classes[0].agreement.max(), 52);
        assert!(most <= 3 * 256, "queued {most}");
    }

    #[test]
    fn a_closed_stream_is_not_waited_for_and_a_silent_one_only_up_to_the_cap() {
        let mut m = Merge::new(2, Window::new(0, None));
        let one = |i: u64| vec![(i, rec(i, i + 1, 1, true))];
        m.push(0, one(0), &|_, _| false);
        assert_eq!(m.queued, 1, "node 1 has not spoken yet");
        m.close(1, &|_, _| false);
        assert_eq!(m.queued, 0);
        // Node 1 of a new merge says something once, then falls silent without closing.
        let mut m = Merge::new(2, Window::new(0, None));
        m.push(1, one(0), &|_, _| false);
        for i in 0..(MAX_QUEUED as u64 + 10) {
            m.push(0, one(i), &|_, _| false);
        }
        assert!(m.queued <= MAX_QUEUED, "{}", m.queued);
    }
}
