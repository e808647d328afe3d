//! `verbs`: the InfiniBand/RoCE transport over ibverbs (`rdma-sys`, cargo feature `rdma`).
//!
//! One Reliable Connected QP per peer, connected at start (all pairs: the protocols' correction
//! rings, gossip and BFB may address any rank, and a lazy connect would need a side channel and
//! a round trip inside a measured operation). Connection data goes through the rendezvous
//! directory ([`bootstrap`]), or in a launched run through rank 0's coordinator
//! ([`crate::runtime::conn_relay`]). Data path after perftest's low-latency pattern:
//! one pre-registered buffer (two MRs: the credit words, the only memory peers may RDMA
//! WRITE, and the rings and staging, local write only), pre-posted per-peer receive rings recycled as soon as a message
//! is handed over (re-posted in one `ibv_post_recv` per peer per poll), SEND with inline data
//! up to the QP's inline limit (staged in registered memory above it), unsignaled sends with a
//! signaled one every `signal_every`, CQs busy-polled by the owning worker, no allocation and
//! no syscall on the path. Back-pressure: credits for the peer's ring, returned by an inline
//! RDMA WRITE of a cumulative counter (no receive consumed), `WindowFull` when out of credits.
//!
//! Failure: the first error completion on a peer's QP (IBV_WC_RETRY_EXC_ERR when the peer's
//! HCA stops acknowledging, and the other remote errors; see [`completion`]) suspects the
//! peer, reported once as [`crate::transport::Delivery::Suspect`] like the UDP transport's. The
//! QP is then left in the error state (its posted WRs flush and are counted, nothing more is
//! posted, sends are refused with `Suspected`) and destroyed with the endpoint; it is never
//! reconnected, as suspicion is final in the runtime. Other peers' QPs are independent.
//!
//! The device-independent parts (attributes, connection data, credits, send-queue policy,
//! ring layout, completion mapping, device selection) build and are tested without the feature;
//! with it, unit tests also run the endpoint over a software HCA model (`fake.rs`).

pub mod bootstrap;
pub mod completion;
pub mod conn;
pub mod credits;
pub mod qp_attr;
pub mod ring;
pub mod select;
pub mod send_queue;

#[cfg(feature = "rdma")]
pub mod device;
#[cfg(feature = "rdma")]
pub mod endpoint;
#[cfg(all(test, feature = "rdma"))]
mod fake;
#[cfg(feature = "rdma")]
mod ibv;
#[cfg(all(test, feature = "rdma"))]
mod tests;

use std::sync::Mutex;

use crate::transport::Transport;
use qp_attr::RcParams;

/// Everything a user can set for the verbs transport (CLI flags of `bench` and `logp`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerbsConfig {
    /// Device name (`ibv_devices`); default the first.
    pub device: Option<String>,
    /// Port; default the first ACTIVE one.
    pub port: Option<u8>,
    /// GID index (RoCE; InfiniBand across subnets); default LID routing on IB, first
    /// non-empty GID on RoCE.
    pub gid_index: Option<u8>,
    pub rc: RcParams,
    /// Receive slots pre-posted per peer (perftest DEF_RX_SEND 512).
    pub rx_depth: u32,
    /// Send WRs outstanding per QP (perftest DEF_TX_BW 128).
    pub tx_depth: u32,
    /// One signaled send per this many (perftest DEF_CQ_MOD 100, clamped to `tx_depth`).
    pub signal_every: u32,
    /// Inline limit asked of the QP (perftest DEF_INLINE_SEND_RC_UC 236).
    pub max_inline: u32,
}

impl Default for VerbsConfig {
    fn default() -> Self {
        VerbsConfig {
            device: None,
            port: None,
            gid_index: None,
            rc: RcParams::default(),
            rx_depth: 512,
            tx_depth: 128,
            signal_every: 100,
            max_inline: 236,
        }
    }
}

impl VerbsConfig {
    pub fn validate(&self) -> Result<(), String> {
        self.rc.validate()?;
        if !(1..=16384).contains(&self.rx_depth) {
            return Err(format!("--rx-depth must be in 1..=16384, got {}", self.rx_depth));
        }
        if !(1..=16384).contains(&self.tx_depth) {
            return Err(format!("--tx-depth must be in 1..=16384, got {}", self.tx_depth));
        }
        if self.signal_every == 0 {
            return Err("--signal-every must be at least 1".into());
        }
        if self.max_inline > MAX_INLINE {
            return Err(format!(
                "--inline-size must be at most {MAX_INLINE} (perftest's MAX_INLINE), got {}",
                self.max_inline
            ));
        }
        if self.port == Some(0) {
            return Err("--port must be at least 1 (ports are numbered from 1)".into());
        }
        Ok(())
    }
}

/// The largest inline size accepted (perftest's MAX_INLINE; providers grant less or refuse).
pub const MAX_INLINE: u32 = 912;

/// The configuration `endpoints(TransportKind::Verbs, ..)` uses. Set once by the CLI before a
/// run: the transport choice stays a plain `Copy` enum shared by every driver.
static CONFIG: Mutex<Option<VerbsConfig>> = Mutex::new(None);

/// Sets the configuration of later verbs endpoints.
pub fn configure(c: VerbsConfig) {
    *CONFIG.lock().unwrap_or_else(|e| e.into_inner()) = Some(c);
}

/// The configuration of verbs endpoints (defaults unless [`configure`]d).
pub fn config() -> VerbsConfig {
    CONFIG
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .unwrap_or_default()
}

/// The error of a build without the `rdma` feature.
pub const NOT_BUILT: &str = "the verbs transport is not in this build: rebuild with `cargo build --release --features rdma` (needs libibverbs-dev, librdmacm-dev and libclang-dev), or use --transport udp";

/// Endpoints with the action that emulates their process's death (QPs to the error state).
pub type Endpoints = Vec<(Box<dyn Transport>, Option<Box<dyn FnMut() + Send>>)>;

/// `n` endpoints of one job on this host's RDMA device, connected pairwise through it.
#[cfg(feature = "rdma")]
pub fn local_endpoints(n: u32, job: u64, seed: u64) -> Result<Endpoints, String> {
    Ok(endpoint::local(n, &config(), job, seed)?
        .into_iter()
        .map(|t| {
            let kill = t
                .kill_switch()
                .map(|k| Box::new(move || k.fire()) as Box<dyn FnMut() + Send>);
            (Box::new(t) as Box<dyn Transport>, kill)
        })
        .collect())
}

/// Without the `rdma` feature: the one-line error saying how to get it.
#[cfg(not(feature = "rdma"))]
pub fn local_endpoints(_n: u32, _job: u64, _seed: u64) -> Result<Endpoints, String> {
    Err(NOT_BUILT.to_string())
}

/// Hands this rank's connection records (one per peer) to the other ranks and returns theirs
/// for it, indexed by rank (`None` at this rank): the rendezvous directory ([`bootstrap`]) or
/// the coordinator's relay ([`crate::runtime::conn_relay`]).
pub type Exchange<'a> = dyn FnMut(&[conn::ConnInfo]) -> Result<Vec<Option<conn::ConnInfo>>, String> + 'a;

/// Fails with the one-line device error (no device, no active port, bad GID index) before a
/// launched run starts its rendezvous, so that no rank waits for one that cannot take part.
#[cfg(feature = "rdma")]
pub fn probe() -> Result<(), String> {
    device::Device::open(&config()).map(|_| ())
}

/// Without the `rdma` feature: the one-line error saying how to get it.
#[cfg(not(feature = "rdma"))]
pub fn probe() -> Result<(), String> {
    Err(NOT_BUILT.to_string())
}

/// This rank's endpoint of a multi-process job: created on this host's device, its
/// connection data swapped by `exchange`, every QP connected (RTR and RTS). The caller still
/// needs a barrier before the first SEND (a QP must be in RTR on both sides, or the sender's
/// HCA retries into the void).
#[cfg(feature = "rdma")]
pub fn connected_endpoint(
    rank: u32,
    n: u32,
    job: u64,
    seed: u64,
    exchange: &mut Exchange<'_>,
) -> Result<Box<dyn Transport>, String> {
    let cfg = config();
    let dev = device::Device::open(&cfg)?;
    let mut t = endpoint::VerbsTransport::create(dev, rank, n, job, &cfg, seed)?;
    connect_through(&mut t, exchange)?;
    Ok(Box::new(t))
}

/// Connects every QP of `t` with the records `exchange` returns for `t`'s own.
#[cfg(feature = "rdma")]
pub fn connect_through(t: &mut endpoint::VerbsTransport, exchange: &mut Exchange<'_>) -> Result<(), String> {
    let (rank, n) = (t.rank(), t.size());
    let mine: Vec<conn::ConnInfo> = (0..n).filter(|&to| to != rank).map(|to| t.conn_info(to)).collect();
    let theirs = exchange(&mine)?;
    if theirs.len() != n as usize || theirs.iter().flatten().count() != n as usize - 1 {
        return Err("verbs rendezvous returned an incomplete set of connection data".into());
    }
    for c in theirs.iter().flatten() {
        t.connect(c)?;
    }
    Ok(())
}

/// Without the `rdma` feature: the one-line error saying how to get it.
#[cfg(not(feature = "rdma"))]
pub fn connected_endpoint(
    _rank: u32,
    _n: u32,
    _job: u64,
    _seed: u64,
    _exchange: &mut Exchange<'_>,
) -> Result<Box<dyn Transport>, String> {
    Err(NOT_BUILT.to_string())
}

/// [`connected_endpoint`] through the rendezvous directory `dir` ([`bootstrap`]), with its
/// barrier.
pub fn node_endpoint(
    rank: u32,
    n: u32,
    job: u64,
    seed: u64,
    dir: &std::path::Path,
    timeout: std::time::Duration,
) -> Result<Box<dyn Transport>, String> {
    let t = connected_endpoint(rank, n, job, seed, &mut |mine| {
        bootstrap::publish(dir, rank, mine)?;
        bootstrap::collect(dir, rank, n, job, crate::transport::MAX_PAYLOAD as u32, timeout)
    })?;
    bootstrap::barrier(dir, "verbs-connected", rank, n, timeout)?;
    Ok(t)
}

#[cfg(test)]
mod config_tests {
    use super::*;

    #[test]
    fn defaults_are_perftest_and_valid() {
        let c = VerbsConfig::default();
        assert_eq!(
            (c.rx_depth, c.tx_depth, c.signal_every, c.max_inline),
            (512, 128, 100, 236)
        );
        c.validate().unwrap();
    }

    #[test]
    fn invalid_settings_are_one_line_errors() {
        for c in [
            VerbsConfig {
                rx_depth: 0,
                ..VerbsConfig::default()
            },
            VerbsConfig {
                tx_depth: 20000,
                ..VerbsConfig::default()
            },
            VerbsConfig {
                signal_every: 0,
                ..VerbsConfig::default()
            },
            VerbsConfig {
                port: Some(0),
                ..VerbsConfig::default()
            },
            VerbsConfig {
                max_inline: 913,
                ..VerbsConfig::default()
            },
        ] {
            let e = c.validate().unwrap_err();
            assert!(e.starts_with("--") && !e.contains('\n'), "{e}");
        }
    }

    #[cfg(not(feature = "rdma"))]
    #[test]
    fn without_the_feature_endpoints_say_how_to_rebuild() {
        for r in [
            local_endpoints(2, 1, 1).map(|_| ()),
            node_endpoint(
                0,
                2,
                1,
                1,
                std::path::Path::new("/nonexistent"),
                std::time::Duration::ZERO,
            )
            .map(|_| ()),
        ] {
            let e = r.unwrap_err();
            assert!(e.contains("--features rdma") && e.contains("--transport udp"), "{e}");
        }
    }
}
