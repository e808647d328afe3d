//! The message trace of a run (cargo feature `trace`; without it every note is an empty inline
//! function, a node carries nothing and its code is unchanged): for each operation, when its
//! root started it, when each node chose each message to send (`send`, to whom, the message's
//! label) and took each message it received (`recv`, from whom), when each node delivered
//! (`deliver`) and when a node began a counted wait (`wait`). `ftcoll bench --trace FILE`
//! writes it as CSV, `op,time_ns,node,event,peer,label`, times in ns since the operation's start
//! at its root: the columns of `ftcoll sim --trace` (whose times are in the model's units)
//! with the operation in front, so a measured run and the model's run of the same protocol can
//! be read side by side message by message (`docs/usage.md`, "Tracing a run").
//!
//! Each node keeps its own rows (no sharing between workers' cores while the run goes on) and
//! publishes them when it is dropped. A note costs one clock read (about 20 ns) and a push.
//! A node keeps at most [`MAX_ROWS_PER_NODE`] rows and the process at most [`MAX_ROWS`] until
//! they are taken; what was not kept is counted ([`take`] returns the count), never dropped
//! silently.

/// One traced event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// The run's job id (runs side by side in one process, as tests are, publish to one
    /// place).
    pub job: u64,
    /// The operation.
    pub seq: u64,
    /// Nanoseconds since the run's epoch.
    pub ns: u64,
    /// The node (physical rank).
    pub node: u32,
    /// `start`, `send`, `recv`, `deliver` or `wait`.
    pub event: &'static str,
    /// To whom (`send`), from whom (`recv`), the root (`start`, `deliver`), the node (`wait`).
    pub peer: u32,
    /// The message's label (`send`, `recv`), else empty.
    pub label: &'static str,
}

/// The most rows one node keeps (4 MB).
pub const MAX_ROWS_PER_NODE: usize = 1 << 16;

/// The most rows kept in the process until [`take`] (128 MB).
pub const MAX_ROWS: usize = 1 << 21;

/// Whether this build traces (cargo feature `trace`).
pub const ENABLED: bool = cfg!(feature = "trace");

/// A node's rows; published to [`take`] when the node is dropped.
#[derive(Debug, Default)]
pub struct Tracer {
    #[cfg(feature = "trace")]
    rows: Vec<Row>,
    #[cfg(feature = "trace")]
    lost: u64,
}

#[cfg(feature = "trace")]
static ALL: std::sync::Mutex<(Vec<Row>, u64)> = std::sync::Mutex::new((Vec::new(), 0));

/// Now, in ns since `epoch`, for a note (0 without the feature: no clock is read).
#[inline(always)]
pub fn now(_epoch: std::time::Instant) -> u64 {
    #[cfg(feature = "trace")]
    return std::time::Instant::now().saturating_duration_since(_epoch).as_nanos() as u64;
    #[cfg(not(feature = "trace"))]
    0
}

impl Tracer {
    /// Notes `event` of operation `seq` of job `job` at `node`, at `_ns` (ns since the run's
    /// epoch: [`now`], or a time the node read anyway).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn note(
        &mut self,
        _job: u64,
        _node: u32,
        _seq: u64,
        _event: &'static str,
        _peer: u32,
        _label: &'static str,
        _ns: u64,
    ) {
        #[cfg(feature = "trace")]
        {
            if self.rows.len() >= MAX_ROWS_PER_NODE {
                self.lost += 1;
                return;
            }
            self.rows.push(Row {
                job: _job,
                seq: _seq,
                ns: _ns,
                node: _node,
                event: _event,
                peer: _peer,
                label: _label,
            });
        }
    }
}

#[cfg(feature = "trace")]
impl Drop for Tracer {
    fn drop(&mut self) {
        let mut rows = std::mem::take(&mut self.rows);
        let mut all = ALL.lock().unwrap_or_else(|e| e.into_inner());
        let room = MAX_ROWS.saturating_sub(all.0.len());
        let over = rows.len().saturating_sub(room);
        rows.truncate(room);
        all.0.extend(rows);
        all.1 += self.lost + over as u64;
    }
}

/// Every row published so far (by dropped nodes), emptied, and how many rows nodes could not
/// keep; nothing without the feature.
pub fn take() -> (Vec<Row>, u64) {
    #[cfg(feature = "trace")]
    return std::mem::take(&mut *ALL.lock().unwrap_or_else(|e| e.into_inner()));
    #[cfg(not(feature = "trace"))]
    (Vec::new(), 0)
}

/// Writes `rows` of the operations `from..` as CSV (`op,time_ns,node,event,peer,label`),
/// ordered by operation, time and node, each time counted from its operation's `start` row;
/// an operation without one (its root's rows were not kept) is left out. Returns the
/// operations written.
pub fn write_csv(rows: &[Row], from: u64, out: &mut dyn std::io::Write) -> std::io::Result<u64> {
    use std::collections::BTreeMap;
    let mut start: BTreeMap<u64, u64> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.event == "start" && r.seq >= from) {
        let s = start.entry(r.seq).or_insert(r.ns);
        *s = (*s).min(r.ns);
    }
    let mut kept: Vec<(u64, i128, &Row)> = rows
        .iter()
        .filter_map(|r| {
            let s = *start.get(&r.seq)?;
            Some((r.seq, i128::from(r.ns) - i128::from(s), r))
        })
        .collect();
    kept.sort_by_key(|&(seq, t, r)| (seq, t, r.node));
    writeln!(out, "op,time_ns,node,event,peer,label")?;
    for (seq, t, r) in kept {
        writeln!(out, "{seq},{t},{},{},{},{}", r.node, r.event, r.peer, r.label)?;
    }
    Ok(start.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: u64, ns: u64, node: u32, event: &'static str, peer: u32) -> Row {
        Row {
            job: 1,
            seq,
            ns,
            node,
            event,
            peer,
            label: if event == "send" || event == "recv" { "tree" } else { "" },
        }
    }

    #[test]
    fn the_csv_counts_each_operations_times_from_its_start_and_leaves_out_what_has_none() {
        let rows = [
            row(2, 1500, 1, "recv", 0),
            row(2, 1000, 0, "start", 0),
            row(2, 1100, 0, "send", 1),
            row(1, 50, 0, "start", 0),
            row(1, 90, 1, "deliver", 0),
            // An operation whose start was not kept, and one before `from`.
            row(3, 7000, 1, "recv", 0),
            row(0, 1, 0, "start", 0),
        ];
        let mut out = Vec::new();
        let ops = write_csv(&rows, 1, &mut out).unwrap();
        assert_eq!(ops, 2);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "op,time_ns,node,event,peer,label\n\
             1,0,0,start,0,\n\
             1,40,1,deliver,0,\n\
             2,0,0,start,0,\n\
             2,100,0,send,1,tree\n\
             2,500,1,recv,0,tree\n"
        );
    }

    /// Without the feature a node carries no tracer and a note keeps nothing.
    #[cfg(not(feature = "trace"))]
    #[test]
    fn without_the_feature_nothing_is_kept() {
        assert_eq!(size_of::<Tracer>(), 0);
        let mut t = Tracer::default();
        t.note(1, 0, 1, "send", 1, "tree", now(std::time::Instant::now()));
        assert_eq!(now(std::time::Instant::now()), 0, "no clock is read");
        assert_eq!(take(), (Vec::new(), 0));
    }
}
