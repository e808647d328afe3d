//! The verbs objects an endpoint owns beyond its QPs' life cycle: the registered memory, the
//! QP attribute structs built from [`super::super::qp_attr`], and the shared set of QPs that a
//! [`KillSwitch`] moves to the error state.

use std::sync::Arc;

use super::super::device::Device;
use super::super::ibv::*;
use super::super::qp_attr::{InitAttr, RtrAttr, RtsAttr};

/// Page-aligned zeroed memory for registration.
pub(super) struct Region {
    pub(super) ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Region {
    pub(super) fn new(len: usize) -> Result<Region, String> {
        let layout = std::alloc::Layout::from_size_align(len.max(64), 4096).map_err(|e| e.to_string())?;
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(format!("cannot allocate {len} bytes for the verbs buffers"));
        }
        Ok(Region { ptr, layout })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: allocated in Region::new with this layout, freed once (after the MR that
        // covers it was deregistered: the endpoint drops its MR first).
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

/// `ibv_qp_attr` for RESET→INIT.
pub(crate) fn ibv_init(a: &InitAttr) -> (ibv_qp_attr, i32) {
    // SAFETY: plain C struct; all-zero is valid.
    let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
    x.qp_state = ibv_qp_state::IBV_QPS_INIT;
    x.pkey_index = a.pkey_index;
    x.port_num = a.port;
    x.qp_access_flags = a.access;
    (x, a.mask as i32)
}

/// `ibv_qp_attr` for INIT→RTR.
pub(crate) fn ibv_rtr(a: &RtrAttr) -> (ibv_qp_attr, i32) {
    // SAFETY: plain C struct; all-zero is valid.
    let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
    x.qp_state = ibv_qp_state::IBV_QPS_RTR;
    x.path_mtu = u32::from(a.path_mtu);
    x.dest_qp_num = a.dest_qpn;
    x.rq_psn = a.rq_psn;
    x.max_dest_rd_atomic = a.max_dest_rd_atomic;
    x.min_rnr_timer = a.min_rnr_timer;
    x.ah_attr.dlid = a.dlid;
    x.ah_attr.sl = a.sl;
    x.ah_attr.src_path_bits = 0;
    x.ah_attr.port_num = a.port;
    if let Some(g) = a.grh {
        x.ah_attr.is_global = 1;
        x.ah_attr.grh.dgid = ibv_gid { raw: g.dgid };
        x.ah_attr.grh.sgid_index = g.sgid_index;
        x.ah_attr.grh.hop_limit = g.hop_limit;
        x.ah_attr.grh.traffic_class = g.traffic_class;
    }
    (x, a.mask as i32)
}

/// `ibv_qp_attr` for RTR→RTS.
pub(crate) fn ibv_rts(a: &RtsAttr) -> (ibv_qp_attr, i32) {
    // SAFETY: plain C struct; all-zero is valid.
    let mut x: ibv_qp_attr = unsafe { std::mem::zeroed() };
    x.qp_state = ibv_qp_state::IBV_QPS_RTS;
    x.sq_psn = a.sq_psn;
    x.timeout = a.timeout;
    x.retry_cnt = a.retry_cnt;
    x.rnr_retry = a.rnr_retry;
    x.max_rd_atomic = a.max_rd_atomic;
    (x, a.mask as i32)
}

/// The QPs of one endpoint; destroyed when the endpoint and every [`KillSwitch`] are gone.
pub(super) struct QpSet {
    pub(super) qps: Vec<*mut ibv_qp>,
    pub(super) _dev: Arc<Device>,
}

// SAFETY: QP handles may be used from any thread (verbs calls are thread-safe); the set only
// changes QP state and destroys them once, in Drop.
unsafe impl Send for QpSet {}
// SAFETY: as above.
unsafe impl Sync for QpSet {}

pub(super) fn qp_to_error(qp: *mut ibv_qp) {
    if qp.is_null() {
        return;
    }
    // SAFETY: plain C struct; all-zero is valid.
    let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
    a.qp_state = ibv_qp_state::IBV_QPS_ERR;
    // SAFETY: qp is a live QP (owned by a QpSet or an endpoint being built); any state may
    // move to ERR.
    unsafe { ibv_modify_qp(qp, &mut a, ibv_qp_attr_mask::IBV_QP_STATE.0 as i32) };
}

impl Drop for QpSet {
    fn drop(&mut self) {
        for &qp in &self.qps {
            if !qp.is_null() {
                // SAFETY: created by the endpoint, destroyed once here.
                unsafe { ibv_destroy_qp(qp) };
            }
        }
    }
}

/// Moves an endpoint's QPs to the error state (see [`VerbsTransport::kill_switch`](super::VerbsTransport::kill_switch)).
pub struct KillSwitch(pub(super) Arc<QpSet>);

impl KillSwitch {
    pub fn fire(&self) {
        for &qp in &self.0.qps {
            qp_to_error(qp);
        }
    }
}
