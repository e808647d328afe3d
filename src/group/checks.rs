//! What a [`GroupBuilder`] refuses before anything is built: a value out of range is an
//! error, never clamped into range nor ignored; and how a caller's durations convert.

use std::time::Duration;

use super::{GroupBuilder, GroupError, driver};
use crate::model::LogP;
use crate::protocol::bcast::algo::Algo;
use crate::protocol::{Protocol, SharedInfo};
use crate::runtime::board::WINDOW;
use crate::wire::WireMessage;
use crate::wire::dispatch::{Dispatch, Visit};

impl GroupBuilder {
    /// Refuses settings the group cannot run as asked, before anything is built: a value out
    /// of range is an error, never clamped into range nor ignored (a caller who asked for a
    /// window of 1000 would otherwise measure another run than the one asked for).
    pub(super) fn check(&self) -> Result<(), GroupError> {
        let n = self.n;
        let setup = |e: String| Err(GroupError::Setup(e));
        if n < 2 {
            return setup(format!("a group needs at least 2 members, not {n}"));
        }
        if let Err(e) = self.algo.check() {
            return setup(format!("the broadcast algorithm: {e}"));
        }
        // The protocols add and multiply these (as the simulator does): bounded as `--L`
        // and `--o` are, so that no sum of them wraps around.
        let m = self.model;
        for (what, v) in [("L", m.l), ("o_s", m.os), ("o_r", m.or), ("g", m.g), ("G·(k-1)", m.gk)] {
            if v > LogP::MAX {
                return setup(format!(
                    "the model's {what} is {v} units, at most {} (LogP::MAX) are allowed",
                    LogP::MAX
                ));
            }
        }
        if m.os == 0 || m.or == 0 {
            return setup("the model's overheads o_s and o_r must be at least 1 unit".into());
        }
        if self.tick_ns > nanos(MAX_WALL) {
            return setup(format!(
                "the model's unit of {:?} is longer than {MAX_WALL:?}",
                Duration::from_nanos(self.tick_ns)
            ));
        }
        let max_window = WINDOW as u64 / 2;
        if self.window == 0 || self.window > max_window {
            return setup(format!("a window of {}, not in 1..={max_window}", self.window));
        }
        if self.workers == 0 {
            return setup("a group needs at least 1 worker thread, not 0".into());
        }
        // ERA's messages name up to `n - 1` failed ranks and must fit one datagram.
        let max = driver::MAX_AGREE_MEMBERS;
        if n > max && !self.broadcasts {
            return setup(format!(
                "a group without broadcasts only agrees, and agreements need at most {max} members, not {n}"
            ));
        }
        self.check_kills()?;
        // The broadcast endpoints and nodes the group allocates, against what this host offers
        // (a group of u32::MAX members aborted the process on a failed allocation).
        if self.endpoints.is_none() && self.broadcasts {
            use crate::runtime::host::{Layout, check_named};
            use crate::runtime::limits;
            let layout = Layout::Local(self.transport);
            check_named("Group::builder(n) with n =", n, layout, limits::memory(), limits::fds())
                .map_err(GroupError::Setup)?;
        }
        Ok(())
    }

    /// Refuses a kill no member would carry out: of a rank out of range, a second of one
    /// member (only the first would happen), or a real `SIGKILL` (for processes only).
    fn check_kills(&self) -> Result<(), GroupError> {
        let mut seen = std::collections::HashSet::new();
        for k in &self.kills {
            let r = k.rank;
            if r >= self.n {
                return Err(GroupError::NoSuchMember(r));
            }
            if !seen.insert(r) {
                return Err(GroupError::Setup(format!("member {r} is killed twice")));
            }
            if matches!(k.point, crate::runtime::kill::KillPoint::SigKill { .. }) {
                return Err(GroupError::Setup(format!(
                    "member {r}'s kill is a SIGKILL, which needs a process of its own (a group's members are threads)"
                )));
            }
        }
        Ok(())
    }
}

/// The longest wall-clock unit of the model a group takes: a year, as the command line's
/// wall-clock flags (`cli::flags::WALL_MAX_S`); no protocol waits that long per step.
pub const MAX_WALL: Duration = Duration::from_secs(365 * 24 * 3600);

/// `d` in nanoseconds, `u64::MAX` beyond (about 584 years): a caller's duration is never
/// truncated (`as_nanos() as u64` made a timeout of 2^64 ns and a bit last 1.2 ms).
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The longest payload a broadcast of `algo` among `n` members carries, whatever its
/// messages name (a group's [`super::Group::max_payload`], before a group is built): what is
/// left of one datagram beside the header and the algorithm's longest message body. An
/// impossible algorithm for `n` is an error.
pub fn max_payload_of(algo: &Algo, n: u32) -> Result<usize, String> {
    // The bound depends on the message type only; the model just lets the algorithm build.
    algo.dispatch(n, LogP { l: 2, o: 1 }, MaxPayload)
}

/// The longest payload an algorithm's datagrams carry.
pub(super) struct MaxPayload;

impl Visit for MaxPayload {
    type Out = usize;
    fn visit<P>(self, _: &P::Shared) -> usize
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        super::max_payload::<P::Msg>()
    }
}
