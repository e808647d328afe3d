//! What a work completion's status means for the peer of its QP. Any error completion moves
//! an RC QP to the error state, after which it delivers nothing and flushes every posted WR:
//! the peer is unreachable and is reported suspected, the same signal as the UDP transport's
//! exhausted retries. The class only decides which counter says why.

/// `ibv_wc_status` values (verbs ABI).
pub mod status {
    pub const SUCCESS: u32 = 0;
    pub const LOC_LEN_ERR: u32 = 1;
    pub const LOC_QP_OP_ERR: u32 = 2;
    pub const LOC_PROT_ERR: u32 = 4;
    pub const WR_FLUSH_ERR: u32 = 5;
    pub const BAD_RESP_ERR: u32 = 7;
    pub const LOC_ACCESS_ERR: u32 = 8;
    pub const REM_INV_REQ_ERR: u32 = 9;
    pub const REM_ACCESS_ERR: u32 = 10;
    pub const REM_OP_ERR: u32 = 11;
    pub const RETRY_EXC_ERR: u32 = 12;
    pub const RNR_RETRY_EXC_ERR: u32 = 13;
    pub const REM_ABORT_ERR: u32 = 16;
    pub const FATAL_ERR: u32 = 19;
    pub const RESP_TIMEOUT_ERR: u32 = 20;
    pub const GENERAL_ERR: u32 = 21;
}

/// The meaning of a completion for its peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcClass {
    Ok,
    /// The peer (or the path to it) failed: no ACK after the retries, no receive posted after
    /// the RNR retries, the remote aborted or refused.
    PeerLost,
    /// The QP was already in error: a WR flushed after the first failure.
    Flushed,
    /// A local fault (our WR, our memory, the HCA): the QP is in error all the same.
    Local,
}

/// Classifies an `ibv_wc_status`.
pub fn classify(s: u32) -> WcClass {
    use status::*;
    match s {
        SUCCESS => WcClass::Ok,
        WR_FLUSH_ERR => WcClass::Flushed,
        RETRY_EXC_ERR | RNR_RETRY_EXC_ERR | REM_ABORT_ERR | REM_INV_REQ_ERR | REM_ACCESS_ERR | REM_OP_ERR
        | BAD_RESP_ERR | RESP_TIMEOUT_ERR => WcClass::PeerLost,
        _ => WcClass::Local,
    }
}

/// Per-peer state of the failure path: the first error suspects, the rest are counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerHealth {
    suspected: bool,
}

impl PeerHealth {
    /// Applies a completion status; true exactly once, when the peer becomes suspected.
    pub fn on_status(&mut self, s: u32) -> bool {
        if classify(s) == WcClass::Ok || self.suspected {
            return false;
        }
        self.suspected = true;
        true
    }

    /// Suspected without an error completion (a post refused because the QP is in error).
    pub fn suspect(&mut self) -> bool {
        !std::mem::replace(&mut self.suspected, true)
    }

    pub fn is_suspected(&self) -> bool {
        self.suspected
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(classify(status::SUCCESS), WcClass::Ok);
        assert_eq!(classify(status::RETRY_EXC_ERR), WcClass::PeerLost);
        assert_eq!(classify(status::RNR_RETRY_EXC_ERR), WcClass::PeerLost);
        assert_eq!(classify(status::REM_ACCESS_ERR), WcClass::PeerLost);
        assert_eq!(classify(status::WR_FLUSH_ERR), WcClass::Flushed);
        assert_eq!(classify(status::LOC_LEN_ERR), WcClass::Local);
        assert_eq!(classify(status::FATAL_ERR), WcClass::Local);
        assert_eq!(classify(999), WcClass::Local, "unknown codes are errors");
    }

    #[test]
    fn suspected_once_then_counted() {
        let mut h = PeerHealth::default();
        assert!(!h.on_status(status::SUCCESS));
        assert!(!h.is_suspected());
        assert!(h.on_status(status::RETRY_EXC_ERR));
        assert!(!h.on_status(status::WR_FLUSH_ERR));
        assert!(!h.suspect());
        assert!(h.is_suspected());
        let mut h = PeerHealth::default();
        assert!(
            h.on_status(status::WR_FLUSH_ERR),
            "a flush alone also means the QP is gone"
        );
    }
}
