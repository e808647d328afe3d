//! Reliable Connected QP attributes as perftest sets them (`perftest_parameters.h` defaults,
//! `ctx_modify_qp_to_init/rtr/rts` in `perftest_resources.c`), as plain data: the state
//! machine RESET→INIT→RTR→RTS is decided here and only copied into `ibv_qp_attr` by the
//! device code, so it is testable without a device.

use std::time::Duration;

/// `ibv_access_flags` bits (verbs ABI values).
pub const ACCESS_LOCAL_WRITE: u32 = 1;
pub const ACCESS_REMOTE_WRITE: u32 = 1 << 1;

/// `ibv_qp_attr_mask` bits (verbs ABI values).
pub mod mask {
    pub const STATE: u32 = 1;
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    pub const PKEY_INDEX: u32 = 1 << 4;
    pub const PORT: u32 = 1 << 5;
    pub const AV: u32 = 1 << 7;
    pub const PATH_MTU: u32 = 1 << 8;
    pub const TIMEOUT: u32 = 1 << 9;
    pub const RETRY_CNT: u32 = 1 << 10;
    pub const RNR_RETRY: u32 = 1 << 11;
    pub const RQ_PSN: u32 = 1 << 12;
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    pub const SQ_PSN: u32 = 1 << 16;
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    pub const DEST_QPN: u32 = 1 << 20;
}

/// The RC parameters a user may change, with perftest's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RcParams {
    /// Local ACK timeout exponent: 4.096 µs · 2^timeout per try (perftest `-u`, DEF_QP_TIME 14).
    pub timeout: u8,
    /// Transport retries before IBV_WC_RETRY_EXC_ERR (perftest: 7).
    pub retry_cnt: u8,
    /// RNR retries before IBV_WC_RNR_RETRY_EXC_ERR; 7 means forever (perftest: 7).
    pub rnr_retry: u8,
    /// RNR NAK timer code (perftest MIN_RNR_TIMER 12 = 0.64 ms).
    pub min_rnr_timer: u8,
    /// Service level (perftest DEF_SL 0).
    pub sl: u8,
    /// P_Key index (perftest default 0).
    pub pkey_index: u16,
    /// GRH hop limit (perftest 0xFF) and traffic class (perftest 0).
    pub hop_limit: u8,
    pub traffic_class: u8,
    /// Outstanding RDMA reads/atomics: perftest uses 1 for SEND tests.
    pub out_reads: u8,
}

impl Default for RcParams {
    fn default() -> Self {
        RcParams {
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            sl: 0,
            pkey_index: 0,
            hop_limit: 0xFF,
            traffic_class: 0,
            out_reads: 1,
        }
    }
}

impl RcParams {
    /// Checks the ranges the verbs ABI allows (5-bit timeout, 3-bit retry counts).
    pub fn validate(&self) -> Result<(), String> {
        if self.timeout > 31 {
            return Err(format!("--qp-timeout must be in 0..=31, got {}", self.timeout));
        }
        if self.retry_cnt > 7 {
            return Err(format!("--retry-count must be in 0..=7, got {}", self.retry_cnt));
        }
        if self.rnr_retry > 7 {
            return Err(format!(
                "--rnr-retry must be in 0..=7 (7 = forever), got {}",
                self.rnr_retry
            ));
        }
        if self.min_rnr_timer > 31 {
            return Err(format!("min RNR timer must be in 0..=31, got {}", self.min_rnr_timer));
        }
        Ok(())
    }

    /// One try of the local ACK timeout (timeout 0 means infinite in the spec).
    pub fn ack_timeout(&self) -> Option<Duration> {
        (self.timeout > 0).then(|| Duration::from_nanos(4096u64 << self.timeout))
    }
}

/// The GRH of an address vector (RoCE always; InfiniBand across subnets or with a GID index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grh {
    pub dgid: [u8; 16],
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// RESET→INIT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitAttr {
    pub port: u8,
    pub pkey_index: u16,
    pub access: u32,
    pub mask: u32,
}

/// INIT→RTR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtrAttr {
    /// `ibv_mtu` code (1 = 256 B … 5 = 4096 B).
    pub path_mtu: u8,
    pub dest_qpn: u32,
    pub rq_psn: u32,
    pub dlid: u16,
    pub sl: u8,
    pub port: u8,
    pub grh: Option<Grh>,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub mask: u32,
}

/// RTR→RTS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtsAttr {
    pub sq_psn: u32,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub max_rd_atomic: u8,
    pub mask: u32,
}

/// What the remote side tells us (from its connection info).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remote {
    pub qpn: u32,
    pub psn: u32,
    pub lid: u16,
    pub gid: [u8; 16],
}

/// INIT as perftest does for SEND tests: local and remote write access (our credit words are
/// written remotely), P_Key index, port.
pub fn init(p: &RcParams, port: u8) -> InitAttr {
    InitAttr {
        port,
        pkey_index: p.pkey_index,
        access: ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE,
        mask: mask::STATE | mask::PKEY_INDEX | mask::PORT | mask::ACCESS_FLAGS,
    }
}

/// RTR: the path to the remote QP at the port's active MTU; a GRH when a GID index is used
/// (always on RoCE), exactly as perftest decides it.
pub fn rtr(p: &RcParams, port: u8, mtu: u8, gid_index: Option<u8>, r: &Remote) -> RtrAttr {
    RtrAttr {
        path_mtu: mtu,
        dest_qpn: r.qpn,
        rq_psn: r.psn,
        dlid: r.lid,
        sl: p.sl,
        port,
        grh: gid_index.map(|i| Grh {
            dgid: r.gid,
            sgid_index: i,
            hop_limit: p.hop_limit,
            traffic_class: p.traffic_class,
        }),
        max_dest_rd_atomic: p.out_reads,
        min_rnr_timer: p.min_rnr_timer,
        mask: mask::STATE
            | mask::AV
            | mask::PATH_MTU
            | mask::DEST_QPN
            | mask::RQ_PSN
            | mask::MIN_RNR_TIMER
            | mask::MAX_DEST_RD_ATOMIC,
    }
}

/// RTS: our send PSN and the retry policy that decides how fast a dead peer is noticed.
pub fn rts(p: &RcParams, my_psn: u32) -> RtsAttr {
    RtsAttr {
        sq_psn: my_psn,
        timeout: p.timeout,
        retry_cnt: p.retry_cnt,
        rnr_retry: p.rnr_retry,
        max_rd_atomic: p.out_reads,
        mask: mask::STATE | mask::SQ_PSN | mask::TIMEOUT | mask::RETRY_CNT | mask::RNR_RETRY | mask::MAX_QP_RD_ATOMIC,
    }
}

/// Bytes of an `ibv_mtu` code, `None` if the code is not one.
pub fn mtu_bytes(code: u8) -> Option<u32> {
    (1..=5).contains(&code).then(|| 128u32 << code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote() -> Remote {
        Remote {
            qpn: 0x12_3456,
            psn: 0xab_cdef,
            lid: 7,
            gid: [0xfe; 16],
        }
    }

    #[test]
    fn perftest_defaults() {
        let p = RcParams::default();
        assert_eq!((p.timeout, p.retry_cnt, p.rnr_retry, p.min_rnr_timer), (14, 7, 7, 12));
        assert_eq!((p.sl, p.pkey_index, p.hop_limit, p.out_reads), (0, 0, 0xFF, 1));
        p.validate().unwrap();
        // 4.096 µs · 2^14 ≈ 67 ms per try; (retry count + 1) = 8 tries ≈ 537 ms before
        // RETRY_EXC_ERR.
        assert_eq!(p.ack_timeout(), Some(Duration::from_nanos(67_108_864)));
    }

    #[test]
    fn init_sets_port_pkey_and_access() {
        let a = init(&RcParams::default(), 2);
        assert_eq!(a.port, 2);
        assert_eq!(a.access, 3);
        assert_eq!(a.mask, 1 | 8 | 16 | 32);
    }

    #[test]
    fn rtr_without_gid_has_no_grh_and_perftest_mask() {
        let a = rtr(&RcParams::default(), 1, 5, None, &remote());
        assert_eq!((a.dest_qpn, a.rq_psn, a.dlid, a.path_mtu), (0x12_3456, 0xab_cdef, 7, 5));
        assert!(a.grh.is_none());
        assert_eq!((a.max_dest_rd_atomic, a.min_rnr_timer), (1, 12));
        assert_eq!(
            a.mask,
            1 | (1 << 7) | (1 << 8) | (1 << 20) | (1 << 12) | (1 << 15) | (1 << 17)
        );
    }

    #[test]
    fn rtr_with_gid_index_carries_the_remote_gid() {
        let a = rtr(&RcParams::default(), 1, 3, Some(3), &remote());
        let g = a.grh.unwrap();
        assert_eq!(
            (g.dgid, g.sgid_index, g.hop_limit, g.traffic_class),
            ([0xfe; 16], 3, 0xFF, 0)
        );
    }

    #[test]
    fn rts_uses_my_psn_and_the_retry_policy() {
        let p = RcParams {
            timeout: 10,
            retry_cnt: 3,
            rnr_retry: 2,
            ..RcParams::default()
        };
        let a = rts(&p, 42);
        assert_eq!(
            (a.sq_psn, a.timeout, a.retry_cnt, a.rnr_retry, a.max_rd_atomic),
            (42, 10, 3, 2, 1)
        );
        assert_eq!(a.mask, 1 | (1 << 16) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 13));
    }

    #[test]
    fn out_of_range_parameters_are_refused() {
        for p in [
            RcParams {
                timeout: 32,
                ..RcParams::default()
            },
            RcParams {
                retry_cnt: 8,
                ..RcParams::default()
            },
            RcParams {
                rnr_retry: 9,
                ..RcParams::default()
            },
        ] {
            assert!(p.validate().is_err(), "{p:?}");
        }
        assert_eq!(
            RcParams {
                timeout: 0,
                ..RcParams::default()
            }
            .ack_timeout(),
            None
        );
    }

    #[test]
    fn mtu_codes() {
        assert_eq!(mtu_bytes(1), Some(256));
        assert_eq!(mtu_bytes(5), Some(4096));
        assert_eq!(mtu_bytes(0), None);
        assert_eq!(mtu_bytes(6), None);
    }
}
