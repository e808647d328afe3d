//! Whether this host can hold a run's nodes: its memory and file descriptors against what the
//! run's endpoints and nodes allocate, checked before anything is built (a bench run's spec,
//! `experiment::bench::host`, and a library group's build, `group::GroupBuilder`).

use crate::runtime::TransportKind;
use crate::runtime::limits;
use crate::runtime::node::NodeStats;
use crate::transport::inproc::InprocNet;
use crate::transport::udp::UdpConfig;
use crate::transport::udp::reliable::Reliable;

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

/// How a run's nodes are laid out on this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Every node a thread group of this process, over this transport.
    Local(TransportKind),
    /// One child process per node (`--procs`), a pipe to each here.
    Procs,
    /// This process is one node of a launched run (`--join`, `--boot`).
    Joined,
}

/// `experiment::bench::host::check` against the given memory (bytes, source) and descriptor limits.
pub fn check_against(
    nodes: u32,
    layout: Layout,
    memory: Option<(u64, &'static str)>,
    fds: Option<u64>,
) -> Result<(), String> {
    check_named("--nodes", nodes, layout, memory, fds)
}

/// [`check_against`], its errors naming the count of nodes `flag` (a library's caller gave
/// no `--nodes`: `Group::build` checks its members this way).
pub fn check_named(
    flag: &str,
    nodes: u32,
    layout: Layout,
    memory: Option<(u64, &'static str)>,
    fds: Option<u64>,
) -> Result<(), String> {
    let n = u64::from(nodes);
    let mem = |need: u64, what: &str| limits::check_memory_against(flag, n, need, what, memory);
    let fd = |need: u64, what: &str| limits::check_fds_against(flag, n, need, what, fds);
    match layout {
        Layout::Joined => mem(udp_node(n), "this node's UDP endpoint"),
        Layout::Procs => {
            fd(n.saturating_add(FD_RESERVE), "a pipe per node process")?;
            mem(n.saturating_mul(udp_node(n)), "the node processes' UDP endpoints")
        }
        Layout::Local(TransportKind::Udp) => {
            let need = n.saturating_mul(FDS_PER_UDP_ENDPOINT).saturating_add(FD_RESERVE);
            fd(need, "a UDP socket and a poller per node")?;
            mem(n.saturating_mul(udp_node(n)), "the UDP endpoints")
        }
        Layout::Local(TransportKind::Inproc) => {
            let need = InprocNet::footprint(nodes, INPROC_RING_SLOTS, TALKING)
                .saturating_add(n.saturating_mul(driver_footprint(n)));
            mem(need, "the in-process endpoints")
        }
        Layout::Local(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;
    const HOST: Option<(u64, &str)> = Some((16 * GIB, "MemAvailable"));

    #[test]
    fn ordinary_runs_fit_an_ordinary_host() {
        for layout in [
            Layout::Local(TransportKind::Udp),
            Layout::Local(TransportKind::Inproc),
            Layout::Procs,
            Layout::Joined,
        ] {
            assert_eq!(check_against(64, layout, HOST, Some(1024)), Ok(()), "{layout:?}");
        }
        // A launched run's node holds one endpoint: a million ranks fit.
        assert_eq!(check_against(1_000_000, Layout::Joined, HOST, Some(1024)), Ok(()));
    }

    #[test]
    fn each_layout_names_its_own_limit() {
        let udp = check_against(1000, Layout::Local(TransportKind::Udp), HOST, Some(1024)).unwrap_err();
        assert!(
            udp.starts_with("--nodes 1000 needs about 2064 file descriptors"),
            "{udp}"
        );
        let procs = check_against(1000, Layout::Procs, HOST, Some(1024)).unwrap_err();
        assert!(
            procs.contains("1064 file descriptors (a pipe per node process)"),
            "{procs}"
        );
        // Enough descriptors: memory is what runs out (every endpoint knows every peer).
        let mem = check_against(5000, Layout::Local(TransportKind::Udp), HOST, Some(1 << 20)).unwrap_err();
        assert!(
            mem.contains("for the UDP endpoints, this machine has 16.0 GiB (MemAvailable)"),
            "{mem}"
        );
        let inproc = check_against(100_000, Layout::Local(TransportKind::Inproc), HOST, None).unwrap_err();
        assert!(inproc.contains("for the in-process endpoints"), "{inproc}");
        let joined = check_against(u32::MAX, Layout::Joined, Some((GIB, "ulimit -v")), None).unwrap_err();
        assert!(joined.contains("this node's UDP endpoint"), "{joined}");
        // Unknown limits refuse nothing.
        assert_eq!(check_against(u32::MAX, Layout::Procs, None, None), Ok(()));
    }

    #[test]
    fn inproc_grows_about_linearly_and_udp_quadratically() {
        let inproc = |n: u32| {
            InprocNet::footprint(n, INPROC_RING_SLOTS, TALKING) as f64
                + f64::from(n) * driver_footprint(u64::from(n)) as f64
        };
        let udp = |n: u32| f64::from(n) * udp_node(u64::from(n)) as f64;
        // Doubling the nodes: inproc a little over 2x (the per-pair doorbell bits), UDP about 4x.
        let ri = inproc(4000) / inproc(2000);
        let ru = udp(4000) / udp(2000);
        assert!((2.0..2.5).contains(&ri), "{ri}");
        assert!((3.0..4.1).contains(&ru), "{ru}");
    }
}
