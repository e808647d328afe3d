//! Whether this host can hold a bench run: its memory and file descriptors against what the
//! run's endpoints and nodes allocate, checked before anything is built.

use crate::experiment::limits;
use crate::runtime::TransportKind;
use crate::runtime::node::NodeStats;
use crate::transport::inproc::InprocNet;
use crate::transport::udp::UdpConfig;
use crate::transport::udp::reliable::Reliable;

use super::BenchSpec;

/// Peers an endpoint exchanges data with in a broadcast tree with its corrections, at most
/// as counted here (parent, children, correction ring): the others' buffers stay uncommitted.
pub const TALKING: u64 = 8;
/// Descriptors a run holds besides its endpoints (stdio, the control plane, the key file).
pub const FD_RESERVE: u64 = 64;
/// Descriptors one UDP endpoint holds: its socket and its poller.
pub const FDS_PER_UDP_ENDPOINT: u64 = 2;
/// The in-process ring a pair gets on its first message (as the runtime asks for it).
pub const INPROC_RING_SLOTS: usize = 256;

/// Bytes one node holds besides its endpoint: its delivery-latency histogram (built here to
/// count its buckets), two counters per rank in its driver's outbox, and its payload buffers.
fn driver_footprint(n: u64) -> u64 {
    let histogram = NodeStats::default().delivery_ns.distinct_values() as u64 * size_of::<u64>() as u64;
    n.saturating_mul((size_of::<u32>() + size_of::<u64>()) as u64)
        .saturating_add(histogram)
        .saturating_add(2 * crate::transport::MAX_PAYLOAD as u64)
}

/// Bytes one UDP node of a run of `n` commits: its reliability core and its driver.
fn udp_node(n: u64) -> u64 {
    let window = UdpConfig::default().window as u64;
    Reliable::footprint(n, window, TALKING).saturating_add(driver_footprint(n))
}

/// Refuses `--nodes` when the run's endpoints would not fit this host's memory or file
/// descriptors: a local cluster holds every endpoint in this process, `--procs` one per child
/// (and a pipe per child here), a launched run (`--join`) one.
pub fn check(a: &BenchSpec) -> Result<(), String> {
    let n = u64::from(a.nodes);
    if a.join.is_some() {
        return limits::check_memory("--nodes", n, udp_node(n), "this node's UDP endpoint");
    }
    if a.procs {
        limits::check_fds("--nodes", n, n.saturating_add(FD_RESERVE), "a pipe per node process")?;
        return limits::check_memory(
            "--nodes",
            n,
            n.saturating_mul(udp_node(n)),
            "the node processes' UDP endpoints",
        );
    }
    match a.transport {
        TransportKind::Udp => {
            let fds = n.saturating_mul(FDS_PER_UDP_ENDPOINT).saturating_add(FD_RESERVE);
            limits::check_fds("--nodes", n, fds, "a UDP socket and a poller per node")?;
            limits::check_memory("--nodes", n, n.saturating_mul(udp_node(n)), "the UDP endpoints")
        }
        TransportKind::Inproc => {
            let need = InprocNet::footprint(a.nodes, INPROC_RING_SLOTS, TALKING)
                .saturating_add(n.saturating_mul(driver_footprint(n)));
            limits::check_memory("--nodes", n, need, "the in-process endpoints")
        }
        _ => Ok(()),
    }
}
