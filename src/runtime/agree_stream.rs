//! The returns a node process streams to the process that classifies them (`agree --procs`,
//! `agree --join`): compact batches of [`Rec`]s, one text line each, and the in-order merge
//! of every node's stream into one [`Window`] (ERA §5.1's classes per agreement).
//!
//! A line is `recs ` and the base64 of: first id (varint), then per record the id step
//! `(id − previous id) << 1 | ok` (varint; the first record's step is from the first id),
//! entry − previous return (zigzag varint; the first from 0), return − entry (varint) and the
//! outcome fingerprint (8 bytes). Each line stands alone, so a bad one is dropped and counted
//! without spoiling the next: about 14 bytes a return, one write per [`BATCH`] returns.
//!
//! The merge: a node returns agreements in id order, so once every node still reporting has
//! sent some id `w`, nothing below `w` can come any more and the returns up to `w` go to the
//! window in id order (its ring then never sees a return more than one id late). Queues hold
//! what the slowest stream has not reached: a batch or two, or at most [`MAX_QUEUED`] returns
//! (a node that stopped reporting without saying so is then left behind as `late`).

use std::collections::VecDeque;

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD as B64;

use crate::protocol::Rank;
use crate::protocol::agree::AgreeId;
use crate::runtime::agree_window::{Rec, Window};

/// The prefix of a batch line.
pub const PREFIX: &str = "recs ";
/// Returns per line at most (a line is also sent after [`FLUSH_MS`] with fewer).
pub const BATCH: usize = 512;
/// The longest a return waits in a node before it is sent, ms.
pub const FLUSH_MS: u64 = 20;
/// Returns the merge holds at most before it gives up waiting for the slowest stream.
pub const MAX_QUEUED: usize = 1 << 16;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at).ok_or("truncated record")?;
        *at += 1;
        if shift == 63 && byte > 1 {
            return Err("varint overflows 64 bits".into());
        }
        v |= u64::from(byte & 0x7F) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint overflows 64 bits".into())
}

/// One line for `recs` (ids ascending, as a node returns them); empty input, empty line.
pub fn encode(recs: &[(AgreeId, Rec)]) -> String {
    let Some(&(first, _)) = recs.first() else {
        return String::new();
    };
    let mut b = Vec::with_capacity(8 + 14 * recs.len());
    put_varint(&mut b, first);
    let (mut id, mut t) = (first, 0u64);
    for &(i, r) in recs {
        put_varint(&mut b, (i.wrapping_sub(id)) << 1 | u64::from(r.ok));
        let d = r.entry.wrapping_sub(t) as i64;
        put_varint(&mut b, ((d << 1) ^ (d >> 63)) as u64);
        put_varint(&mut b, r.ret.saturating_sub(r.entry));
        b.extend_from_slice(&r.fp.to_le_bytes());
        (id, t) = (i, r.ret.max(r.entry));
    }
    let mut s = String::with_capacity(PREFIX.len() + b.len() * 4 / 3 + 4);
    s.push_str(PREFIX);
    B64.encode_string(&b, &mut s);
    s
}

/// The returns of one line (without its prefix); an error names what is wrong with it.
pub fn decode(body: &str) -> Result<Vec<(AgreeId, Rec)>, String> {
    let b = B64.decode(body.trim()).map_err(|e| format!("not base64: {e}"))?;
    let mut at = 0;
    let mut id = get_varint(&b, &mut at)?;
    let mut t = 0u64;
    let mut out = Vec::new();
    while at < b.len() {
        let step = get_varint(&b, &mut at)?;
        if !out.is_empty() && step >> 1 == 0 {
            return Err("ids not ascending".into());
        }
        id = id.checked_add(step >> 1).ok_or("id overflows")?;
        let z = get_varint(&b, &mut at)?;
        let d = ((z >> 1) as i64) ^ -((z & 1) as i64);
        let entry = t.wrapping_add(d as u64);
        let ret = entry.checked_add(get_varint(&b, &mut at)?).ok_or("time overflows")?;
        let fp = b.get(at..at + 8).ok_or("truncated fingerprint")?;
        at += 8;
        let fp = u64::from_le_bytes(fp.try_into().expect("8 bytes"));
        out.push((
            id,
            Rec {
                entry,
                ret,
                fp,
                ok: step & 1 == 1,
            },
        ));
        t = ret;
    }
    if out.is_empty() {
        return Err("no records".into());
    }
    Ok(out)
}

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

    /// Takes a batch of `rank`'s returns and passes on what is complete; `dead`: the nodes
    /// known dead now (their returns do not count, [`Window`]).
    pub fn push(&mut self, rank: Rank, recs: Vec<(AgreeId, Rec)>, dead: &dyn Fn(Rank) -> bool) {
        let r = rank as usize;
        if let Some(&(last, _)) = recs.last() {
            self.reached[r] = Some(self.reached[r].map_or(last, |x| x.max(last)));
        }
        self.queued += recs.len();
        self.queues[r].extend(recs);
        self.release(dead);
    }

    /// `rank` sends no more (it reported, was killed or its stream ended).
    pub fn close(&mut self, rank: Rank, dead: &dyn Fn(Rank) -> bool) {
        self.open[rank as usize] = false;
        self.release(dead);
    }

    /// Passes everything on and finalizes the window (the end of the run).
    pub fn finish(&mut self, dead: &dyn Fn(Rank) -> bool) {
        self.open.iter_mut().for_each(|o| *o = false);
        self.release(dead);
        self.window.flush(&|r, _| dead(r));
    }

    fn release(&mut self, dead: &dyn Fn(Rank) -> bool) {
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
            self.window.record(r as Rank, id, rec, &|r, _| dead(r));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::agree_window::tests::rec;

    #[test]
    fn lines_round_trip_and_stay_compact() {
        let recs: Vec<(AgreeId, Rec)> = (0..BATCH as u64)
            .map(|i| {
                let e = 1_000_000 + i * 40_000;
                (7 + i, rec(e, e + 31_000 + i, 0x1234_5678_9ABC_DEF1 ^ i, i % 5 != 0))
            })
            .collect();
        let line = encode(&recs);
        let body = line.strip_prefix(PREFIX).unwrap();
        assert_eq!(decode(body).unwrap(), recs);
        assert!(line.len() < 22 * BATCH, "{} bytes", line.len());
        // A gap (a node killed in between never happens, but ids may skip) and an entry
        // before the previous return.
        let odd = vec![(0, rec(50, 60, 1, true)), (9, rec(40, 45, 2, false))];
        assert_eq!(decode(&encode(&odd)[PREFIX.len()..]).unwrap(), odd);
        assert_eq!(encode(&[]), "");
    }

    #[test]
    fn bad_lines_are_refused_by_name() {
        let good = encode(&[(3, rec(5, 9, 77, true)), (4, rec(9, 12, 77, true))]);
        let body = &good[PREFIX.len()..];
        let bytes = B64.decode(body).unwrap();
        assert!(decode("***").unwrap_err().contains("base64"));
        assert!(decode("").is_err());
        let cut = B64.encode(&bytes[..bytes.len() - 3]);
        assert!(decode(&cut).unwrap_err().contains("truncated"));
        let mut twice = bytes.clone();
        // The second record's step: id + 0.
        let second = 1 + 1 + 1 + 1 + 8;
        twice[second] = 1;
        assert!(decode(&B64.encode(&twice)).unwrap_err().contains("ascending"));
        let overflow = B64.encode([0xFFu8; 11]);
        assert!(decode(&overflow).unwrap_err().contains("overflows"));
        // No mutation panics.
        for i in 0..bytes.len() {
            for x in [0u8, 0x7F, 0x80, 0xFF] {
                let mut m = bytes.clone();
                m[i] = x;
                let _ = decode(&B64.encode(&m));
            }
        }
    }

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
                    m.push(r as u32, std::mem::take(&mut pending[r]), &|_| false);
                    most = most.max(m.queued);
                }
            }
        }
        for (r, p) in pending.into_iter().enumerate() {
            m.push(r as u32, p, &|_| false);
        }
        m.finish(&|_| false);
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
        m.push(0, one(0), &|_| false);
        assert_eq!(m.queued, 1, "node 1 has not spoken yet");
        m.close(1, &|_| false);
        assert_eq!(m.queued, 0);
        // Node 1 of a new merge says something once, then falls silent without closing.
        let mut m = Merge::new(2, Window::new(0, None));
        m.push(1, one(0), &|_| false);
        for i in 0..(MAX_QUEUED as u64 + 10) {
            m.push(0, one(i), &|_| false);
        }
        assert!(m.queued <= MAX_QUEUED, "{}", m.queued);
    }
}
