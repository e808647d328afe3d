//! A node's clock offset to its coordinator, by ping-pong over the control channel.

use std::time::{Duration, Instant};

use super::{ChildAgent, recv_within};
use crate::wire::control::{Msg, decode};
use crate::wire::mac::opened;

/// How long a clock probe waits for its answer.
const PROBE_WAIT: Duration = Duration::from_millis(20);
/// Probes in a row without an answer after which [`ChildAgent::sync_clock`] gives up.
const SILENT_PROBES: u32 = 10;
/// The longest [`ChildAgent::sync_clock`] waits on a coordinator that stopped answering
/// (gone without its farewell, a crash): its silent probes' waits.
pub const SYNC_GIVE_UP: Duration = PROBE_WAIT.saturating_mul(SILENT_PROBES);

impl ChildAgent {
    /// Estimates this process's clock offset to the parent by ping-pong (Cristian's method:
    /// the probe with the smallest round trip wins; the uncertainty is half of it), tells the
    /// parent, and returns `(offset, uncertainty)`: the offset to apply, 0 for a parent on
    /// this host whose interval holds 0 (see below). `now_ns` is this process's clock.
    pub fn sync_clock(&mut self, now_ns: &dyn Fn() -> u64, probes: usize) -> (i64, u64) {
        let mut best: Option<(u64, i64)> = None;
        let mut buf = [0u8; 128];
        let mut silent = 0;
        let mut stopped = false;
        for _ in 0..probes {
            if silent >= SILENT_PROBES || stopped {
                break; // Nobody answers (yet): the main loop's timeout decides.
            }
            silent += 1;
            let t1 = now_ns();
            self.send(&Msg::Ping { t1 });
            let deadline = Instant::now() + PROBE_WAIT;
            while Instant::now() < deadline {
                // Sleep in the kernel until the answer comes: spinning here would compete for
                // the core with the very processes whose answers we time.
                let Ok((len, from)) = recv_within(&self.sock, &mut buf, deadline) else {
                    continue;
                };
                if from == self.parent && self.stopped(&buf[..len]) {
                    // The coordinator stopped serving (`ParentAgent::farewell`): no answer
                    // will come; what was measured stands.
                    stopped = true;
                    break;
                }
                let body = opened(self.key.as_ref(), &buf[..len]);
                let (true, Some(body)) = (from == self.parent, body) else {
                    self.invalid += 1;
                    continue;
                };
                if let Some((_, Msg::Pong { t1: e, t2 })) = decode(body, self.job, self.n.max(1)) {
                    if e != t1 {
                        continue;
                    }
                    let t3 = now_ns();
                    let rtt = t3.saturating_sub(t1);
                    let offset = t2 as i64 - ((t1 / 2 + t3 / 2) as i64);
                    if best.is_none_or(|(r, _)| rtt < r) {
                        best = Some((rtt, offset));
                    }
                    silent = 0;
                    break;
                }
            }
        }
        let (rtt, measured) = best.unwrap_or((u64::MAX, 0));
        let unc = rtt / 2;
        let offset = if on_this_host(self.parent.ip()) && measured.unsigned_abs() <= unc {
            // A coordinator on this host (reached over loopback, or at an address of this
            // host: rank 0's own node of a launched run) reads the same clocks: the
            // common wall-clock epoch aligned this process to it within two clock reads, and
            // the probe's midpoint would only add the asymmetry of its two ways (the way in
            // is the longer: the coordinator's receive, MAC and decode come before its stamp,
            // and every node probes it at once), several µs on a hop of a few
            // (docs/measurements.md, "One host, one clock"). The interval, which holds 0, still
            // bounds the error and is reported; one that does not hold 0 (a wall clock stepped
            // between the two alignments) is applied.
            0
        } else {
            measured
        };
        for _ in 0..if stopped { 0 } else { 3 } {
            self.send(&Msg::Clock {
                offset,
                uncertainty: unc,
            });
        }
        (offset, unc)
    }
}

/// Whether `ip` is an address of this host (in this network namespace): a loopback address,
/// or one a socket can bind. A coordinator in another namespace of the same machine (the
/// emulated cluster's) is not told apart from one on another host.
pub(super) fn on_this_host(ip: std::net::IpAddr) -> bool {
    ip.to_canonical().is_loopback() || std::net::UdpSocket::bind((ip, 0)).is_ok()
}
