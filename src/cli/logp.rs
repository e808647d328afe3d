//! `ftcoll logp`: LogP parameters of a transport between two nodes, by Netgauge's PRTT
//! method and by the direct method (send and receive call times, round trip) as a cross-check.

use clap::Args;

use crate::cli::flags::{WALL_MAX_NS, WALL_MAX_S};
use crate::cli::values::{PollArg, TransportArg};
use crate::experiment::logp::{self, LogpSpec};

#[derive(Args, Debug, Clone)]
pub struct LogpArgs {
    /// Transport to measure.
    #[arg(long, value_enum, default_value = "udp")]
    pub transport: TransportArg,
    /// Message size in bytes.
    #[arg(long, default_value_t = 8)]
    pub size: usize,
    /// Messages per PRTT burst (Netgauge uses about 10–16).
    #[arg(long, default_value_t = 16)]
    pub n: usize,
    /// Repetitions per measurement (medians are reported); the direct method takes at least
    /// this many round trips and at least 50 ms of them, leaving out those the thread was
    /// preempted in.
    #[arg(long, default_value_t = 2000)]
    pub reps: usize,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Write the calibration (o_s, o_r, L with 95% intervals, g, G, and the measured
    /// distributions) to FILE, for `bench --params FILE` and `sim --noise FILE` (this
    /// process's two endpoints only).
    #[arg(long, value_name = "FILE")]
    pub save: Option<std::path::PathBuf>,
    /// Measure between two hosts instead of two endpoints of this process: `IP_A,IP_B`; run
    /// it on both with `--rank 0` (measures, prints) and `--rank 1` (echoes).
    #[arg(long, value_name = "IP_A,IP_B", requires = "rank", conflicts_with = "rendezvous")]
    pub between: Option<String>,
    /// With --between: the UDP port on both hosts.
    #[arg(long = "udp-port", default_value_t = 47100)]
    pub udp_port: u16,
    /// Emulated one-way link delay in ns, held in the UDP transport on receive (for kernels
    /// without `netem`; the netns script passes it) [default: 0, off].
    #[arg(long = "emulate-delay-ns", default_value_t = 0, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_NS))]
    pub emulate_delay_ns: u64,
    /// Uniform jitter added to --emulate-delay-ns, ns.
    #[arg(long = "emulate-jitter-ns", default_value_t = 0, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_NS))]
    pub emulate_jitter_ns: u64,
    /// With --between: how both hosts wait for datagrams (`blocking` sleeps in the kernel, as
    /// `bench --poll blocking` nodes do, and the wake-up then counts in L; every other mode
    /// spins, which two hosts on two cores can).
    #[arg(long, value_enum, default_value = "busy")]
    pub poll: PollArg,
    /// The L you expect (e.g. an emulated link's netem delay), ns: the ratio is printed.
    #[arg(long = "expected-L-ns", value_parser = clap::value_parser!(u64).range(1..=WALL_MAX_NS))]
    pub expected_l_ns: Option<u64>,
    /// Between processes (hosts): exchange addresses or QP data through this directory; rank 0
    /// measures every other rank, the others answer.
    #[arg(long)]
    pub rendezvous: Option<std::path::PathBuf>,
    /// With --rendezvous or --between: this process's rank [default with --rendezvous: from the
    /// launcher's environment].
    #[arg(long)]
    pub rank: Option<u32>,
    /// With --rendezvous: processes taking part [default: from the launcher's environment].
    #[arg(long, requires = "rendezvous")]
    pub nodes: Option<u32>,
    /// With --rendezvous and UDP: the IP address to bind and publish.
    #[arg(long, default_value = "127.0.0.1", requires = "rendezvous")]
    pub bind: std::net::IpAddr,
    /// With --rendezvous: how long to wait for the other processes, in seconds.
    #[arg(long = "rendezvous-timeout", default_value_t = 60, requires = "rendezvous", value_parser = clap::value_parser!(u64).range(..=WALL_MAX_S))]
    pub rendezvous_timeout: u64,
    #[command(flatten)]
    pub verbs: crate::cli::verbs::VerbsArgs,
    /// `logp`'s datagrams carry no MAC: `on` keeps them on loopback (a non-loopback address
    /// given to --between or --bind is refused); `off` allows them anywhere, with a warning.
    #[arg(long, value_enum, default_value = "on")]
    pub auth: crate::cli::auth::AuthMode,
}

/// The addresses a UDP `logp` of `a` sends and listens on beyond this process's own
/// loopback endpoints (unparsable ones are left to the measurement's own error).
fn udp_ips(a: &LogpArgs) -> Vec<std::net::IpAddr> {
    if a.transport.kind() != crate::runtime::TransportKind::Udp {
        return Vec::new();
    }
    let mut ips: Vec<std::net::IpAddr> = a
        .between
        .iter()
        .flat_map(|b| b.split(','))
        .filter_map(|h| h.trim().parse().ok())
        .collect();
    if a.rendezvous.is_some() {
        ips.push(a.bind);
    }
    ips
}

/// Runs `ftcoll logp`.
pub fn run(a: &LogpArgs) -> Result<(), String> {
    crate::cli::auth::unauthenticated_on("logp", &udp_ips(a), a.auth)?;
    a.verbs.apply(a.transport.kind())?;
    logp::run(&LogpSpec {
        transport: a.transport.kind(),
        size: a.size,
        n: a.n,
        reps: a.reps,
        json: a.json,
        save: a.save.clone(),
        between: a.between.clone(),
        udp_port: a.udp_port,
        emulate_delay_ns: a.emulate_delay_ns,
        emulate_jitter_ns: a.emulate_jitter_ns,
        blocking: a.poll == PollArg::Blocking,
        expected_l_ns: a.expected_l_ns,
        rendezvous: a.rendezvous.clone(),
        rank: a.rank,
        nodes: a.nodes,
        bind: a.bind,
        rendezvous_timeout: a.rendezvous_timeout,
    })
}
