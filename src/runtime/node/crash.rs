//! Crash injection: a node given an injector asks it, at the three points a crash spec can
//! name (before the first operation, on admitting a message, after a send), whether it dies
//! there; what a spec means is decided here, not in the node loop. A node built without an
//! injector (every node outside tests and benchmarks) never asks.
//!
//! The points are the node's own events (a message that passed every check, a message the
//! protocol emitted), which a transport wrapper cannot see: it would count a refused or
//! deferred send differently and could not stop the node before its next send.

use crate::runtime::kill::{Kill, KillPoint};

/// Where a node may be made to crash (crash-stop: it closes its transport and acts no more).
pub trait Faults: Send {
    /// Is the node dead before the first operation?
    fn dead_at_start(&self) -> bool {
        false
    }
    /// The node admitted a valid message of operation `seq` and would now act on it: does
    /// it crash instead?
    fn crash_on_receive(&mut self, _seq: u64) -> bool {
        false
    }
    /// The node has just sent its `sent`-th message of operation `seq`: does it crash now?
    fn crash_after_send(&mut self, _seq: u64, _sent: u32) -> bool {
        false
    }
}

/// A `--kill` spec for this node: dead from the start, on the first message of an iteration,
/// or after its `k`-th send in one. (`SigKill` is a real signal, sent by the launcher.)
impl Faults for Kill {
    fn dead_at_start(&self) -> bool {
        self.point == KillPoint::Start
    }

    fn crash_on_receive(&mut self, seq: u64) -> bool {
        self.point == KillPoint::OnReceive { iter: seq }
    }

    fn crash_after_send(&mut self, seq: u64, sent: u32) -> bool {
        matches!(self.point, KillPoint::AfterSends { iter, k } if iter == seq && sent >= k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kill_spec_crashes_at_its_point_only() {
        let k = |point| Kill { rank: 1, point };
        assert!(k(KillPoint::Start).dead_at_start());
        assert!(!k(KillPoint::OnReceive { iter: 2 }).dead_at_start());
        let mut r = k(KillPoint::OnReceive { iter: 2 });
        assert!(!r.crash_on_receive(1) && r.crash_on_receive(2) && !r.crash_after_send(2, 9));
        let mut s = k(KillPoint::AfterSends { iter: 3, k: 2 });
        assert!(!s.crash_after_send(3, 1) && s.crash_after_send(3, 2) && !s.crash_after_send(4, 2));
        assert!(!s.crash_on_receive(3));
        let mut sig = k(KillPoint::SigKill { iter: 0 });
        assert!(!sig.dead_at_start() && !sig.crash_on_receive(0) && !sig.crash_after_send(0, 1));
    }
}
