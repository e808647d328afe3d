//! Test hooks: what a misbehaving peer could post on this endpoint's QPs, and where this
//! endpoint's receive slots lie.

use std::time::Instant;

use super::VerbsTransport;

impl VerbsTransport {
    /// Posts, on the QP to `to`, the inline RDMA WRITE of an 8-byte `value` that a credit
    /// return would post, but to `addr` with `rkey`; false if the post itself was refused.
    pub(crate) fn write_remote(&mut self, to: u32, addr: u64, rkey: u32, value: u64) -> bool {
        let t = to as usize;
        let saved = (self.peers[t].credit_addr, self.peers[t].credit_rkey);
        (self.peers[t].credit_addr, self.peers[t].credit_rkey) = (addr, rkey);
        let ok = self.post_send(t, &[], Some(value), true, Instant::now()).is_ok();
        (self.peers[t].credit_addr, self.peers[t].credit_rkey) = saved;
        ok
    }

    /// The address of receive slot `slot` of the ring for `peer`.
    pub(crate) fn rx_slot_addr(&self, peer: u32, slot: u32) -> u64 {
        self.region.ptr as u64 + self.layout.rx(peer as usize, slot as usize) as u64
    }
}
