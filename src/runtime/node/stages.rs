//! Time stamps of the stages of a node's forwarding path, per operation (cargo feature
//! `stages`; without it every stamp is an empty inline function and the node's code is
//! unchanged). `cargo bench --bench stages --features stages` runs a 2-node broadcast and
//! prints the median time between consecutive stages (`docs/measurements.md`).
//!
//! A stamp is nanoseconds since the cluster's epoch (`Instant::now`, one vDSO clock read,
//! about 20 ns: the stamps add their own cost, measured by the same bench).

/// A point on the path of one operation, in path order: the root's stages, then a
/// receiver's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Stage {
    /// The root's step began (the worker's clock read before it).
    RootStep,
    /// The root saw the start signal (`allowed`) and stamped the operation's start.
    Started,
    /// The root's protocol instance is built and started, its payload sourced.
    RootOpened,
    /// The root's protocol chose its first message and the datagram is encoded.
    Encoded,
    /// The transport took the first datagram (board counters, outbox, transport send).
    Sent,
    /// A receiver's poll handed it the operation's first datagram.
    Polled,
    /// The datagram is checked, admitted and decoded, its payload checked.
    Decoded,
    /// The receiver's protocol instance is built and started.
    Opened,
    /// The receiver's protocol took the message.
    Stepped,
    /// The receiver delivered (board stamps).
    Delivered,
}

impl Stage {
    pub const ALL: [Stage; STAGES] = [
        Stage::RootStep,
        Stage::Started,
        Stage::RootOpened,
        Stage::Encoded,
        Stage::Sent,
        Stage::Polled,
        Stage::Decoded,
        Stage::Opened,
        Stage::Stepped,
        Stage::Delivered,
    ];

    /// Is this one of the root's stages (else a receiver's)?
    pub fn at_root(self) -> bool {
        self <= Stage::Sent
    }

    /// What the interval ending at this stage holds.
    pub fn what(self) -> &'static str {
        match self {
            Stage::RootStep => "root: step begins",
            Stage::Started => "root: retire, read the start signal, stamp the start",
            Stage::RootOpened => "root: protocol instance (new + start), payload source, board claim",
            Stage::Encoded => "root: poll_send + encode (its own delivery follows its sends)",
            Stage::Sent => "root: board counters + outbox + transport send",
            Stage::Polled => "wire + receiver's poll (to the callback)",
            Stage::Decoded => "recv: open_datagram, admit, decode, payload check",
            Stage::Opened => "recv: protocol instance (new + start), payload copy, board claim",
            Stage::Stepped => "recv: on_message",
            Stage::Delivered => "recv: board touch + delivery (clock, board stamps)",
        }
    }
}

/// Stages on the path.
pub const STAGES: usize = 10;

/// Does this build stamp the path (feature `stages`)? Its broadcasts are slower by the clock
/// reads (about 0.3 µs at N = 2): `bench` says so, and `--version` ends in `+stages`.
pub const ON: bool = cfg!(feature = "stages");

/// One stamp: which node, which operation, which stage, when (ns since the epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub rank: u32,
    pub seq: u64,
    pub stage: Stage,
    pub ns: u64,
}

/// A node's stamps; published to [`take`] when the node is dropped.
#[derive(Debug, Default)]
pub struct Recorder {
    #[cfg(feature = "stages")]
    rows: Vec<Stamp>,
}

#[cfg(feature = "stages")]
static ALL: std::sync::Mutex<Vec<Stamp>> = std::sync::Mutex::new(Vec::new());

impl Recorder {
    /// Stamps `stage` of operation `seq` at `rank`, now.
    #[inline(always)]
    pub fn mark(&mut self, _rank: u32, _seq: u64, _stage: Stage, _epoch: std::time::Instant) {
        #[cfg(feature = "stages")]
        self.rows.push(Stamp {
            rank: _rank,
            seq: _seq,
            stage: _stage,
            ns: std::time::Instant::now().saturating_duration_since(_epoch).as_nanos() as u64,
        });
    }

    /// Now, in ns since `epoch` (0 without the feature: no clock is read).
    #[inline(always)]
    pub fn now(&self, _epoch: std::time::Instant) -> u64 {
        #[cfg(feature = "stages")]
        return std::time::Instant::now().saturating_duration_since(_epoch).as_nanos() as u64;
        #[cfg(not(feature = "stages"))]
        0
    }

    /// Stamps `stage` at a time already read.
    #[inline(always)]
    pub fn mark_at(&mut self, _rank: u32, _seq: u64, _stage: Stage, _ns: u64) {
        #[cfg(feature = "stages")]
        self.rows.push(Stamp {
            rank: _rank,
            seq: _seq,
            stage: _stage,
            ns: _ns,
        });
    }
}

#[cfg(feature = "stages")]
impl Drop for Recorder {
    fn drop(&mut self) {
        let rows = std::mem::take(&mut self.rows);
        ALL.lock().unwrap_or_else(|e| e.into_inner()).extend(rows);
    }
}

/// Every stamp published so far (by dropped nodes), emptied; nothing without the feature.
pub fn take() -> Vec<Stamp> {
    #[cfg(feature = "stages")]
    return std::mem::take(&mut *ALL.lock().unwrap_or_else(|e| e.into_inner()));
    #[cfg(not(feature = "stages"))]
    Vec::new()
}

/// Per operation `seq >= from` whose every stage was stamped: the time from each stage to the
/// next (ns), in [`Stage::ALL`] order (the first interval, ending at `Started`, is index 0).
/// The root's stages come from `root`, a receiver's from `receiver`; each stage's first
/// stamp counts (a node stamps `Encoded` at every send, the first is the forwarding path).
pub fn intervals(stamps: &[Stamp], root: u32, receiver: u32, from: u64) -> Vec<[u64; STAGES - 1]> {
    use std::collections::BTreeMap;
    let mut first: BTreeMap<u64, [u64; STAGES]> = BTreeMap::new();
    for s in stamps {
        let who = if s.stage.at_root() { root } else { receiver };
        if s.rank != who || s.seq < from {
            continue;
        }
        let row = first.entry(s.seq).or_insert([u64::MAX; STAGES]);
        let i = s.stage as usize;
        row[i] = row[i].min(s.ns);
    }
    first
        .values()
        .filter(|r| r.iter().all(|&v| v != u64::MAX))
        .map(|r| std::array::from_fn(|i| r[i + 1].saturating_sub(r[i])))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_take_each_stage_first_stamp_from_its_side() {
        let mut v = Vec::new();
        for (i, st) in Stage::ALL.iter().enumerate() {
            let rank = if st.at_root() { 0 } else { 1 };
            v.push(Stamp {
                rank,
                seq: 7,
                stage: *st,
                ns: 100 + 10 * i as u64 * i as u64,
            });
        }
        // A later send by the root and a stamp of the wrong side do not count.
        v.push(Stamp {
            rank: 0,
            seq: 7,
            stage: Stage::Encoded,
            ns: 5000,
        });
        v.push(Stamp {
            rank: 0,
            seq: 7,
            stage: Stage::Delivered,
            ns: 1,
        });
        // An incomplete operation and one before `from` are left out.
        v.push(Stamp {
            rank: 0,
            seq: 8,
            stage: Stage::RootStep,
            ns: 1,
        });
        v.push(Stamp {
            rank: 0,
            seq: 3,
            stage: Stage::RootStep,
            ns: 1,
        });
        let iv = intervals(&v, 0, 1, 5);
        assert_eq!(iv.len(), 1);
        let want: [u64; STAGES - 1] = std::array::from_fn(|i| 10 * ((i as u64 + 1).pow(2) - (i as u64).pow(2)));
        assert_eq!(iv[0], want);
    }

    /// Without the feature a node carries no recorder and a stamp reads no clock.
    #[cfg(not(feature = "stages"))]
    #[test]
    fn without_the_feature_nothing_is_kept() {
        assert_eq!(size_of::<Recorder>(), 0);
        let mut r = Recorder::default();
        let epoch = std::time::Instant::now();
        r.mark(0, 1, Stage::Sent, epoch);
        assert_eq!(r.now(epoch), 0);
        assert!(take().is_empty());
    }
}
