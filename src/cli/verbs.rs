//! Flags of the verbs transport (`--transport verbs`), shared by `bench`, `logp` and `node`.

use clap::Args;

use crate::runtime::TransportKind;
use crate::transport::verbs::qp_attr::RcParams;
use crate::transport::verbs::{self, VerbsConfig};

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "verbs transport (--transport verbs)")]
pub struct VerbsArgs {
    /// RDMA device (see `ibv_devices`) [default: the first].
    #[arg(long)]
    pub device: Option<String>,
    /// Device port [default: the first active one].
    #[arg(long)]
    pub port: Option<u8>,
    /// GID index (RoCE; InfiniBand across subnets) [default: LID routing on InfiniBand, the
    /// first non-empty GID on RoCE].
    #[arg(long = "gid-index")]
    pub gid_index: Option<u8>,
    /// Local ACK timeout exponent, 4.096 µs·2^N per try [default: perftest's 14].
    #[arg(long = "qp-timeout")]
    pub qp_timeout: Option<u8>,
    /// Transport retries before a peer's QP fails [default: perftest's 7].
    #[arg(long = "retry-count")]
    pub retry_count: Option<u8>,
    /// RNR retries, 7 = forever [default: perftest's 7].
    #[arg(long = "rnr-retry")]
    pub rnr_retry: Option<u8>,
    /// Receive slots pre-posted per peer [default: perftest's 512].
    #[arg(long = "rx-depth")]
    pub rx_depth: Option<u32>,
    /// Send work requests outstanding per peer [default: perftest's 128].
    #[arg(long = "tx-depth")]
    pub tx_depth: Option<u32>,
    /// One signaled send per N [default: perftest's cq_mod 100, at most --tx-depth].
    #[arg(long = "signal-every")]
    pub signal_every: Option<u32>,
    /// Inline data asked of each QP, bytes; larger sends are staged in registered memory
    /// (the provider may grant less) [default: perftest's 236].
    #[arg(long = "inline-size")]
    pub inline_size: Option<u32>,
}

impl VerbsArgs {
    fn given(&self) -> Option<&'static str> {
        [
            (self.device.is_some(), "--device"),
            (self.port.is_some(), "--port"),
            (self.gid_index.is_some(), "--gid-index"),
            (self.qp_timeout.is_some(), "--qp-timeout"),
            (self.retry_count.is_some(), "--retry-count"),
            (self.rnr_retry.is_some(), "--rnr-retry"),
            (self.rx_depth.is_some(), "--rx-depth"),
            (self.tx_depth.is_some(), "--tx-depth"),
            (self.signal_every.is_some(), "--signal-every"),
            (self.inline_size.is_some(), "--inline-size"),
        ]
        .into_iter()
        .find(|x| x.0)
        .map(|x| x.1)
    }

    /// The flags that reproduce these settings (to start `ftcoll node` processes).
    pub fn to_args(&self) -> Vec<String> {
        let mut v = Vec::new();
        let mut opt = |flag: &str, x: Option<String>| {
            if let Some(x) = x {
                v.push(flag.to_string());
                v.push(x);
            }
        };
        opt("--device", self.device.clone());
        opt("--port", self.port.map(|x| x.to_string()));
        opt("--gid-index", self.gid_index.map(|x| x.to_string()));
        opt("--qp-timeout", self.qp_timeout.map(|x| x.to_string()));
        opt("--retry-count", self.retry_count.map(|x| x.to_string()));
        opt("--rnr-retry", self.rnr_retry.map(|x| x.to_string()));
        opt("--rx-depth", self.rx_depth.map(|x| x.to_string()));
        opt("--tx-depth", self.tx_depth.map(|x| x.to_string()));
        opt("--signal-every", self.signal_every.map(|x| x.to_string()));
        opt("--inline-size", self.inline_size.map(|x| x.to_string()));
        v
    }

    /// The validated configuration.
    pub fn config(&self) -> Result<VerbsConfig, String> {
        let d = VerbsConfig::default();
        let r = RcParams::default();
        let c = VerbsConfig {
            device: self.device.clone(),
            port: self.port,
            gid_index: self.gid_index,
            rc: RcParams {
                timeout: self.qp_timeout.unwrap_or(r.timeout),
                retry_cnt: self.retry_count.unwrap_or(r.retry_cnt),
                rnr_retry: self.rnr_retry.unwrap_or(r.rnr_retry),
                ..r
            },
            rx_depth: self.rx_depth.unwrap_or(d.rx_depth),
            tx_depth: self.tx_depth.unwrap_or(d.tx_depth),
            signal_every: self.signal_every.unwrap_or(d.signal_every),
            max_inline: self.inline_size.unwrap_or(d.max_inline),
        };
        c.validate()?;
        Ok(c)
    }

    /// Refuses verbs flags with another transport; configures the verbs endpoints otherwise.
    pub fn apply(&self, transport: TransportKind) -> Result<(), String> {
        if transport != TransportKind::Verbs {
            return match self.given() {
                Some(f) => Err(format!("{f} applies to --transport verbs only")),
                None => Ok(()),
            };
        }
        verbs::configure(self.config()?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_map_onto_the_config_and_are_validated() {
        let a = VerbsArgs {
            device: Some("mlx5_0".into()),
            gid_index: Some(3),
            qp_timeout: Some(10),
            retry_count: Some(2),
            signal_every: Some(16),
            ..VerbsArgs::default()
        };
        let c = a.config().unwrap();
        assert_eq!(c.device.as_deref(), Some("mlx5_0"));
        assert_eq!(
            (c.gid_index, c.rc.timeout, c.rc.retry_cnt, c.rc.rnr_retry),
            (Some(3), 10, 2, 7)
        );
        assert_eq!((c.signal_every, c.rx_depth), (16, 512));
        let bad = VerbsArgs {
            retry_count: Some(8),
            ..VerbsArgs::default()
        };
        assert!(bad.config().unwrap_err().contains("--retry-count"));
    }

    #[test]
    fn to_args_roundtrips_through_the_parser() {
        use clap::Parser;
        #[derive(Parser)]
        struct P {
            #[command(flatten)]
            v: VerbsArgs,
        }
        let a = VerbsArgs {
            device: Some("mlx5_1".into()),
            port: Some(2),
            gid_index: Some(3),
            qp_timeout: Some(12),
            retry_count: Some(3),
            rnr_retry: Some(6),
            rx_depth: Some(64),
            tx_depth: Some(32),
            signal_every: Some(8),
            inline_size: Some(64),
        };
        let argv = std::iter::once("p".to_string()).chain(a.to_args());
        let b = P::try_parse_from(argv).unwrap().v;
        assert_eq!(b.config().unwrap(), a.config().unwrap());
        assert!(VerbsArgs::default().to_args().is_empty());
    }

    #[test]
    fn verbs_flags_with_another_transport_are_refused() {
        let a = VerbsArgs {
            gid_index: Some(1),
            ..VerbsArgs::default()
        };
        assert_eq!(
            a.apply(TransportKind::Udp).unwrap_err(),
            "--gid-index applies to --transport verbs only"
        );
        VerbsArgs::default().apply(TransportKind::Inproc).unwrap();
    }
}
