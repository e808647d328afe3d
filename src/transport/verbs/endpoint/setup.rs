//! Building an endpoint (CQs, completion channel, memory registration, QPs to INIT with their
//! receive rings posted), connecting its QPs to the peers' (RTR, RTS), tearing it down, and
//! whole local jobs on one device.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use super::super::VerbsConfig;
use super::super::completion::PeerHealth;
use super::super::conn::ConnInfo;
use super::super::credits::{RecvCredits, SendCredits};
use super::super::device::Device;
use super::super::ibv::*;
use super::super::qp_attr::{self, Remote};
use super::super::ring::{Layout, Reposts, slot_len};
use super::super::select::HINT;
use super::super::send_queue::SendQueue;
use super::qp::{QpSet, Region, ibv_init, ibv_rtr, ibv_rts, qp_to_error};
use super::{POLL_BATCH, Peer, VerbsCounters, VerbsTransport};
use crate::transport::{MAX_PAYLOAD, TransportStats};

fn os_err(what: &str, dev: &str) -> String {
    format!(
        "{what} on RDMA device {dev} failed: {}; {HINT}",
        io::Error::last_os_error()
    )
}

/// splitmix64: the random initial PSNs (perftest: `lrand48() & 0xffffff`).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl VerbsTransport {
    /// Creates the endpoint of `rank`: CQs, buffer, one QP per peer moved to INIT with its
    /// receive ring pre-posted. Connect each peer with [`VerbsTransport::connect`].
    pub fn create(dev: Arc<Device>, rank: u32, n: u32, job: u64, cfg: &VerbsConfig, seed: u64) -> Result<Self, String> {
        cfg.validate()?;
        if n < 2 || rank >= n {
            return Err(format!("rank {rank} of {n} is invalid"));
        }
        let peers_n = n as usize;
        let layout = Layout {
            peers: peers_n,
            rx_slots: cfg.rx_depth as usize,
            tx_slots: cfg.tx_depth as usize,
            slot: slot_len(MAX_PAYLOAD),
        };
        let region = Region::new(layout.len())?;
        let name = dev.name.clone();
        let cqe = |d: u32| (u64::from(d) * u64::from(n - 1)).min(i32::MAX as u64) as i32;
        // SAFETY: dev.ctx is open.
        let channel = unsafe { ibv_create_comp_channel(dev.ctx) };
        if channel.is_null() {
            return Err(os_err("ibv_create_comp_channel", &name));
        }
        // Non-blocking, so that `wait` takes every pending event and stops (rdma-core's
        // documented use of the channel fd with poll).
        // SAFETY: the channel's fd is open; F_GETFL/F_SETFL only change its status flags.
        let nonblocking = unsafe {
            let fd = (*channel).fd;
            let fl = libc::fcntl(fd, libc::F_GETFL);
            fl >= 0 && libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) == 0
        };
        if !nonblocking {
            // SAFETY: created above, used by nothing.
            unsafe { ibv_destroy_comp_channel(channel) };
            return Err(os_err("making the completion channel non-blocking", &name));
        }
        // SAFETY: dev.ctx is open; the channel is valid and outlives the CQ (destroyed after
        // it in Drop).
        let send_cq = unsafe { ibv_create_cq(dev.ctx, cqe(cfg.tx_depth), std::ptr::null_mut(), channel, 0) };
        if send_cq.is_null() {
            // SAFETY: created above, used by nothing.
            unsafe { ibv_destroy_comp_channel(channel) };
            return Err(os_err("ibv_create_cq (send)", &name));
        }
        // SAFETY: as above.
        let recv_cq = unsafe { ibv_create_cq(dev.ctx, cqe(cfg.rx_depth), std::ptr::null_mut(), channel, 0) };
        let mut t = VerbsTransport {
            rank,
            n,
            job,
            dev,
            cfg: cfg.clone(),
            layout,
            inline_max: 0,
            region,
            mr: std::ptr::null_mut(),
            credit_mr: std::ptr::null_mut(),
            send_cq,
            recv_cq,
            channel,
            unacked_events: (0, 0),
            stashed: 0,
            peers: Vec::with_capacity(peers_n),
            qps: None,
            unreported: 0,
            reposts: Reposts::default(),
            // SAFETY: plain C structs; all-zero is valid.
            wc: unsafe { std::mem::zeroed() },
            // SAFETY: as above.
            send_wc: unsafe { std::mem::zeroed() },
            stats: TransportStats::default(),
            counters: VerbsCounters::default(),
        };
        if recv_cq.is_null() {
            return Err(os_err("ibv_create_cq (receive)", &name));
        }
        // Two registrations of the one region: peers get the rkey of the credit words' pages
        // only (remote write); the rings and staging take local writes alone, so an RDMA
        // WRITE aimed at them is refused by the HCA (remote access error) instead of
        // overwriting a message under the runtime.
        let local_only = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 as i32;
        let remote = (ibv_access_flags::IBV_ACCESS_LOCAL_WRITE | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE).0 as i32;
        let data = t.layout.data_start();
        // SAFETY: data..len() and 0..credits_len() are inside the region (page-aligned, valid
        // for layout.len() bytes), which outlives both MRs (deregistered first in Drop).
        t.mr = unsafe {
            ibv_reg_mr(
                t.dev.pd,
                t.region.ptr.add(data).cast(),
                t.layout.len() - data,
                local_only,
            )
        };
        if t.mr.is_null() {
            return Err(os_err("ibv_reg_mr (rings)", &name));
        }
        // SAFETY: as above.
        t.credit_mr = unsafe { ibv_reg_mr(t.dev.pd, t.region.ptr.cast(), t.layout.credits_len(), remote) };
        if t.credit_mr.is_null() {
            return Err(os_err("ibv_reg_mr (credit words)", &name));
        }
        let mut inline_max = cfg.max_inline;
        for r in 0..n {
            let mut p = Peer {
                qp: std::ptr::null_mut(),
                psn: (mix(seed ^ job ^ (u64::from(rank) << 32) ^ u64::from(r)) & 0xff_ffff) as u32,
                connected: false,
                sq: SendQueue::new(cfg.tx_depth, cfg.signal_every),
                tx: SendCredits::new(0),
                rx: RecvCredits::new(cfg.rx_depth),
                health: PeerHealth::default(),
                reported: true,
                credit_addr: 0,
                credit_rkey: 0,
                last_post: Instant::now(),
            };
            if r != rank {
                // SAFETY: plain C struct; all-zero is valid.
                let mut ia: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
                ia.send_cq = t.send_cq;
                ia.recv_cq = t.recv_cq;
                ia.cap.max_send_wr = cfg.tx_depth;
                ia.cap.max_recv_wr = cfg.rx_depth;
                ia.cap.max_send_sge = 1;
                ia.cap.max_recv_sge = 1;
                ia.cap.max_inline_data = cfg.max_inline;
                ia.qp_type = ibv_qp_type::IBV_QPT_RC;
                ia.sq_sig_all = 0;
                // SAFETY: pd and CQs are valid; ia is initialized.
                p.qp = unsafe { ibv_create_qp(t.dev.pd, &mut ia) };
                if p.qp.is_null() && ia.cap.max_inline_data > 0 {
                    // Some providers refuse an inline size they cannot give instead of
                    // lowering it: then every send is staged in registered memory.
                    ia.cap.max_inline_data = 0;
                    // SAFETY: as above.
                    p.qp = unsafe { ibv_create_qp(t.dev.pd, &mut ia) };
                }
                if p.qp.is_null() {
                    t.peers.push(p);
                    return Err(os_err("ibv_create_qp (RC)", &name));
                }
                // The provider reports the inline limit it actually gives.
                inline_max = inline_max.min(ia.cap.max_inline_data);
                let (mut a, m) = ibv_init(&qp_attr::init(&cfg.rc, t.dev.port.num));
                // SAFETY: qp is a valid QP in RESET; a is initialized for the mask.
                if unsafe { ibv_modify_qp(p.qp, &mut a, m) } != 0 {
                    t.peers.push(p);
                    return Err(os_err("ibv_modify_qp RESET->INIT", &name));
                }
            }
            t.peers.push(p);
        }
        t.inline_max = inline_max as usize;
        for r in 0..n {
            if r != rank {
                let slots: Vec<u32> = (0..cfg.rx_depth).collect();
                for chunk in slots.chunks(POLL_BATCH) {
                    t.post_recvs(r, chunk)
                        .map_err(|e| format!("ibv_post_recv on {name} failed: {e}; {HINT}"))?;
                }
            }
        }
        t.qps = Some(Arc::new(QpSet {
            qps: t.peers.iter().map(|p| p.qp).collect(),
            _dev: Arc::clone(&t.dev),
        }));
        Ok(t)
    }

    /// What peer `to` needs to connect its QP to ours.
    pub fn conn_info(&self, to: u32) -> ConnInfo {
        let p = &self.peers[to as usize];
        // SAFETY: qp and mr are valid for the endpoint's life (to != rank has a QP).
        let (qpn, rkey) = unsafe { ((*p.qp).qp_num, (*self.credit_mr).rkey) };
        ConnInfo {
            job: self.job,
            from: self.rank,
            to,
            qpn,
            psn: p.psn,
            lid: self.dev.port.lid,
            gid: self.dev.gid.map(|g| g.1).unwrap_or([0; 16]),
            mtu: self.dev.port.active_mtu,
            credit_addr: self.region.ptr as u64 + self.layout.credit(to as usize) as u64,
            credit_rkey: rkey,
            ring_slots: self.cfg.rx_depth,
            slot_len: self.layout.slot as u32,
        }
    }

    /// Moves our QP for `c.from` to RTR and RTS against the peer's data (already validated by
    /// [`ConnInfo::decode`] for this job and rank).
    pub fn connect(&mut self, c: &ConnInfo) -> Result<(), String> {
        let name = self.dev.name.clone();
        if c.to != self.rank || c.from >= self.n || c.from == self.rank || c.job != self.job {
            return Err("connection data not meant for this endpoint".into());
        }
        let port = self.dev.port.num;
        let mtu = self.dev.port.active_mtu.min(c.mtu);
        let gid_index = self.dev.gid.map(|g| g.0);
        let rc = self.cfg.rc;
        let p = &mut self.peers[c.from as usize];
        if p.connected {
            return Err(format!("rank {} connected twice", c.from));
        }
        let remote = Remote {
            qpn: c.qpn,
            psn: c.psn,
            lid: c.lid,
            gid: c.gid,
        };
        let (mut a, m) = ibv_rtr(&qp_attr::rtr(&rc, port, mtu, gid_index, &remote));
        // SAFETY: p.qp is a valid QP in INIT; a is initialized for the mask.
        if unsafe { ibv_modify_qp(p.qp, &mut a, m) } != 0 {
            return Err(os_err(&format!("ibv_modify_qp INIT->RTR (to rank {})", c.from), &name));
        }
        let (mut a, m) = ibv_rts(&qp_attr::rts(&rc, p.psn));
        // SAFETY: as above, QP in RTR.
        if unsafe { ibv_modify_qp(p.qp, &mut a, m) } != 0 {
            return Err(os_err(&format!("ibv_modify_qp RTR->RTS (to rank {})", c.from), &name));
        }
        p.tx = SendCredits::new(c.ring_slots);
        p.credit_addr = c.credit_addr;
        p.credit_rkey = c.credit_rkey;
        p.connected = true;
        Ok(())
    }
}

impl Drop for VerbsTransport {
    fn drop(&mut self) {
        // Every QP to ERR first: the HCA stops writing into the region (posted receives are
        // flushed) even if a KillSwitch keeps a QP alive past this endpoint.
        for p in &self.peers {
            qp_to_error(p.qp);
        }
        match self.qps.take() {
            Some(set) => drop(set),
            None => {
                for p in &self.peers {
                    if !p.qp.is_null() {
                        // SAFETY: construction failed before the QPs went into a set: they
                        // are owned here alone and destroyed once.
                        unsafe { ibv_destroy_qp(p.qp) };
                    }
                }
            }
        }
        // ibv_destroy_cq waits for every event taken from it to be acknowledged.
        self.ack_events(1);
        // SAFETY: each object was created by this endpoint and is destroyed once, after its QPs
        // (a CQ still used by a QP a KillSwitch holds is refused with EBUSY and leaked), the MR
        // before its memory (the Region field drops after this), the channel after its CQs (a
        // channel whose CQ leaked is refused with EBUSY and leaked too).
        unsafe {
            if !self.mr.is_null() {
                ibv_dereg_mr(self.mr);
            }
            if !self.credit_mr.is_null() {
                ibv_dereg_mr(self.credit_mr);
            }
            if !self.send_cq.is_null() {
                ibv_destroy_cq(self.send_cq);
            }
            if !self.recv_cq.is_null() {
                ibv_destroy_cq(self.recv_cq);
            }
            if !self.channel.is_null() {
                ibv_destroy_comp_channel(self.channel);
            }
        }
    }
}

/// `n` endpoints on this host's device, connected pairwise through it; their connection data
/// goes through [`ConnInfo`]'s encoding exactly as over the bootstrap.
pub fn local(n: u32, cfg: &VerbsConfig, job: u64, seed: u64) -> Result<Vec<VerbsTransport>, String> {
    cfg.validate()?;
    local_on(Device::open(cfg)?, n, cfg, job, seed)
}

/// [`local`] on an open device.
pub(crate) fn local_on(
    dev: Arc<Device>,
    n: u32,
    cfg: &VerbsConfig,
    job: u64,
    seed: u64,
) -> Result<Vec<VerbsTransport>, String> {
    let mut eps = (0..n)
        .map(|r| VerbsTransport::create(Arc::clone(&dev), r, n, job, cfg, seed))
        .collect::<Result<Vec<_>, _>>()?;
    let wires: Vec<Vec<[u8; super::super::conn::LEN]>> = eps
        .iter()
        .map(|e| {
            (0..n)
                .map(|to| {
                    if to == e.rank {
                        [0; super::super::conn::LEN]
                    } else {
                        e.conn_info(to).encode()
                    }
                })
                .collect()
        })
        .collect();
    for (from, w) in wires.iter().enumerate() {
        for (to, bytes) in w.iter().enumerate() {
            if from == to {
                continue;
            }
            let c = ConnInfo::decode(bytes, job, to as u32, n, MAX_PAYLOAD as u32)
                .map_err(|e| format!("connection data of rank {from}: {e}"))?;
            eps[to].connect(&c)?;
        }
    }
    Ok(eps)
}
