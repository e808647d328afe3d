//! Flag values that mirror enums below the CLI (`clap` stays in `src/cli/`): each converts
//! into the typed value the experiment layer takes.

use crate::report::plot::scaling::Metric;
use crate::runtime::TransportKind;
use crate::runtime::cluster::PollMode;

/// Which transport the local cluster uses (`--transport`; [`TransportKind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TransportArg {
    /// One UDP socket per node on 127.0.0.1, made reliable by ftcoll.
    Udp,
    /// Lock-free queues between threads of this process.
    Inproc,
    /// ibverbs RC QPs on this host's InfiniBand/RoCE device (cargo feature `rdma`).
    Verbs,
}

impl From<TransportArg> for TransportKind {
    fn from(t: TransportArg) -> TransportKind {
        match t {
            TransportArg::Udp => TransportKind::Udp,
            TransportArg::Inproc => TransportKind::Inproc,
            TransportArg::Verbs => TransportKind::Verbs,
        }
    }
}

impl TransportArg {
    /// The transport this value names.
    pub fn kind(self) -> TransportKind {
        self.into()
    }
}

/// How workers wait when there is nothing to do (`--poll`; [`PollMode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PollArg {
    /// Spin on the endpoints (lowest latency; needs a core per worker).
    Busy,
    /// Spin, then yield the core after each pass without progress (never sleeps).
    Adaptive,
    /// Yield the core after every pass (Open MPI's `mpi_yield_when_idle`), also after one that
    /// did work, and send at most one message per pass: for more nodes than cores when the
    /// kernel's wake-up latency would dominate a hop. The cores stay busy, but a message is seen
    /// as soon as its receiver is next scheduled, and a node with a burst of sends (a
    /// correction phase) gives the core back after each one instead of holding it for the
    /// whole burst while a receiver on the same core waits (LogP's `o` per message).
    Yield,
    /// Sleep between polls when idle (for machines with fewer cores than workers).
    Blocking,
}

impl From<PollArg> for PollMode {
    fn from(p: PollArg) -> PollMode {
        match p {
            PollArg::Busy => PollMode::Busy,
            PollArg::Adaptive => PollMode::Adaptive,
            PollArg::Yield => PollMode::Yield,
            PollArg::Blocking => PollMode::Blocking,
        }
    }
}

/// Which latency of the simulator's report (`plot scaling --metric`; [`Metric`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricArg {
    /// Root's start to the last live process's delivery.
    Coloring,
    /// To the last send or receive of the operation.
    Quiescence,
}

impl From<MetricArg> for Metric {
    fn from(m: MetricArg) -> Metric {
        match m {
            MetricArg::Coloring => Metric::Coloring,
            MetricArg::Quiescence => Metric::Quiescence,
        }
    }
}

/// The flag value naming `p` (what a child process is handed as `--poll`).
pub fn poll_name(p: PollMode) -> &'static str {
    match p {
        PollMode::Busy => "busy",
        PollMode::Adaptive => "adaptive",
        PollMode::Yield => "yield",
        PollMode::Blocking => "blocking",
    }
}
