//! The runtime: the same protocol state machines as the simulator, on a real network
//! (`docs/architecture.md`, decisions 6–9). A local cluster runs every node as a thread of this process
//! over the `udp` (loopback) or `inproc` transport; operations run back to back and every one
//! is checked for consistency.
//!
//! Model time: the protocols count in units of `o` (LogP with `o = 1` and `L = L/o`), and one
//! unit lasts `o` nanoseconds of real time, so counted waits (synchronized correction, gossip
//! rounds, delayed correction) keep their meaning on the wire.

pub mod agree;
pub mod agree_procs;
pub mod agree_stream;
pub mod agree_window;
pub mod board;
pub mod bootstrap;
pub mod cluster;
pub mod conn_peers;
pub mod conn_relay;
pub mod control;
pub mod driver;
pub mod flood;
pub mod host;
pub mod join;
pub mod kill;
pub mod limits;
pub mod logp;
pub mod logp_remote;
pub mod node;
pub mod procs;
pub mod ring_poll;
pub mod thread_switches;
pub mod watch;

use serde::Serialize;

use crate::model::LogGP;
use crate::protocol::bcast::algo::Algo;
use crate::transport::Transport;
use crate::transport::inproc::InprocNet;
use crate::transport::udp::auth::AuthKey;
use crate::transport::udp::{UdpConfig, UdpTransport};
use cluster::ClusterConfig;
use kill::Kill;

/// Which transport the local cluster uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// One UDP socket per node on 127.0.0.1, made reliable by ftcoll.
    Udp,
    /// Lock-free queues between threads of this process.
    Inproc,
    /// ibverbs RC QPs on this host's InfiniBand/RoCE device (cargo feature `rdma`).
    Verbs,
}

impl TransportKind {
    /// The name JSON gives it (`udp`, `inproc`, `verbs`), as a saved calibration records it.
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Udp => "udp",
            TransportKind::Inproc => "inproc",
            TransportKind::Verbs => "verbs",
        }
    }
}

/// A benchmark to run on a local cluster (by `experiment::bench::local`, a group's stream).
#[derive(Clone, Debug, Serialize)]
pub struct Bench {
    pub algo: Algo,
    pub cluster: ClusterConfig,
    pub transport: TransportKind,
    pub kills: Vec<Kill>,
    /// The protocols' LogGP, in the model's time unit (`cluster.tick_ns` ns; see
    /// [`crate::model::BenchModel`]).
    pub model: LogGP,
    /// UDP only: fraction of the datagrams each transport drops on receive (`bench --loss`),
    /// repaired by its retransmissions.
    pub loss: f64,
    /// UDP only: the job's key; every datagram is authenticated with it (`None`: not).
    #[serde(skip)]
    pub auth: Option<AuthKey>,
}

/// One transport per rank, with what to call when the rank is killed (inproc).
pub type Endpoints = Vec<(Box<dyn Transport>, Option<Box<dyn FnMut() + Send>>)>;

/// Endpoints for every rank of a local cluster.
pub fn endpoints(kind: TransportKind, n: u32, job: u64, seed: u64, loss: f64) -> Result<Endpoints, String> {
    endpoints_bounded(kind, n, job, seed, loss, None, None)
}

/// [`endpoints`] (UDP: each endpoint drops `loss` of the datagrams it receives), with UDP
/// datagrams authenticated by `auth` when given, for members whose
/// failure detector suspects a silent peer after `suspect_after` (when given): their UDP
/// transports retransmit to a silent peer at least that long before they suspect it
/// ([`UdpConfig::retries_for`]), so a detector's longer bound is not undercut by theirs.
pub fn endpoints_bounded(
    kind: TransportKind,
    n: u32,
    job: u64,
    seed: u64,
    loss: f64,
    auth: Option<AuthKey>,
    suspect_after: Option<std::time::Duration>,
) -> Result<Endpoints, String> {
    Ok(match kind {
        TransportKind::Inproc => {
            let (net, ts) = InprocNet::new(n, 256);
            ts.into_iter()
                .enumerate()
                .map(|(r, t)| {
                    let net = net.clone();
                    let kill: Box<dyn FnMut() + Send> = Box::new(move || net.kill(r as u32));
                    (Box::new(t) as Box<dyn Transport>, Some(kill))
                })
                .collect()
        }
        TransportKind::Verbs => crate::transport::verbs::local_endpoints(n, job, seed)?,
        TransportKind::Udp => {
            let cfg = UdpConfig {
                job,
                seed,
                loss,
                auth,
                max_retries: suspect_after.map_or(UdpConfig::default().max_retries, |b| {
                    UdpConfig::default().retries_for(b)
                }),
                // Every port is bound here before any node starts: a node dead from the
                // start refuses its first datagram, and its senders suspect it then instead
                // of filling their windows to it until the retries run out.
                bound_at_start: true,
                ..UdpConfig::default()
            };
            let (_, ts) = UdpTransport::bind_ephemeral_local(n, cfg)
                .map_err(|e| format!("cannot open UDP sockets on 127.0.0.1: {e}"))?;
            ts.into_iter()
                .map(|t| (Box::new(t) as Box<dyn Transport>, None))
                .collect()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::TransportKind;

    /// A calibration records the name JSON gives the transport, and `bench --params` compares
    /// it with [`TransportKind::name`]: the two must agree.
    #[test]
    fn the_transports_name_is_its_json_name() {
        for t in [TransportKind::Udp, TransportKind::Inproc, TransportKind::Verbs] {
            assert_eq!(serde_json::to_value(t).unwrap(), t.name());
        }
    }
}
