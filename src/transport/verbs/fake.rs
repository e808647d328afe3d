//! Unit tests only: a software model of an HCA behind the verbs calls the endpoint makes, so
//! the data path (credits, receive re-posting, signaled-every-N, staging, wr ids, failure
//! handling) runs without a device. Objects it did not create go to rdma-sys unchanged.
//!
//! The model follows the RC rules the endpoint relies on: the QP state machine with the
//! attribute masks the IB spec requires per transition, PSNs that must match, a SEND consumes
//! the head receive of the peer QP (none posted: RNR, reported at once, as an exhausted RNR
//! retry), an RDMA WRITE needs the peer MR's rkey and range, a peer QP gone or not ready fails
//! the sender with RETRY_EXC_ERR, an error moves the QP to ERR and flushes what is posted, the
//! send queue holds `max_send_wr` WRs until a signaled completion covering them is polled, and
//! inline data is limited to [`MAX_INLINE`].

#![allow(clippy::missing_safety_doc)]

use std::collections::{HashMap, VecDeque};
use std::os::raw::{c_int, c_void};
use std::sync::{Arc, Mutex};

pub use rdma_sys::*;

use super::completion::status;
use super::device::Device;
use super::qp_attr::mask;
use super::select::PortInfo;

/// The model's inline limit (below perftest's 236, so both send paths are exercised).
pub const MAX_INLINE: u32 = 64;

const EINVAL: c_int = 22;
const ENOMEM: c_int = 12;
const EBUSY: c_int = 16;

struct Wc {
    wr_id: u64,
    status: u32,
    byte_len: u32,
    qp: usize,
    /// A send completion (frees send-queue entries when polled).
    send: bool,
}

struct Qp {
    qpn: u32,
    state: u32,
    send_cq: usize,
    recv_cq: usize,
    max_send: usize,
    max_recv: usize,
    max_inline: u32,
    dest: u32,
    sq_psn: u32,
    rq_psn: u32,
    recvs: VecDeque<(u64, u64, u32)>,
    /// Posted send WRs not yet freed: (wr_id, signaled).
    sq: VecDeque<(u64, bool)>,
}

struct Mr {
    addr: u64,
    len: u64,
    rkey: u32,
}

/// A CQ's completion-event state: the channel it reports to, armed by `ibv_req_notify_cq`
/// for the next completion only, and the events handed out and acknowledged.
struct Notify {
    channel: usize,
    cq_context: usize,
    armed: bool,
    got: u32,
    acked: u32,
}

/// A completion channel: a non-blocking pipe whose read end is the channel's fd (one byte per
/// event) and the CQs whose events are pending, in order.
struct Channel {
    write_fd: c_int,
    pending: VecDeque<usize>,
}

#[derive(Default)]
struct Hca {
    handles: HashMap<usize, ()>,
    notify: HashMap<usize, Notify>,
    channels: HashMap<usize, Channel>,
    qps: HashMap<usize, Qp>,
    by_qpn: HashMap<u32, usize>,
    cqs: HashMap<usize, VecDeque<Wc>>,
    mrs: HashMap<usize, Mr>,
    next: u32,
}

static HCA: Mutex<Option<Hca>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut Hca) -> R) -> R {
    let mut g = HCA.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(Hca::default))
}

fn is_fake(p: usize) -> bool {
    with(|h| h.handles.contains_key(&p) || h.qps.contains_key(&p) || h.cqs.contains_key(&p) || h.mrs.contains_key(&p))
}

fn leak<T>(v: T) -> usize {
    Box::into_raw(Box::new(v)) as usize
}

/// A device of the model: one active InfiniBand port (LID 1, MTU 4096), no GID.
pub fn device() -> Arc<Device> {
    // SAFETY: plain C structs; all-zero is valid (no provider ops are ever called on them).
    let (ctx, pd) = unsafe {
        (
            leak(std::mem::zeroed::<ibv_context>()),
            leak(std::mem::zeroed::<ibv_pd>()),
        )
    };
    with(|h| {
        h.handles.insert(ctx, ());
        h.handles.insert(pd, ());
    });
    Arc::new(Device {
        ctx: ctx as *mut ibv_context,
        pd: pd as *mut ibv_pd,
        name: "fake0".into(),
        port: PortInfo {
            num: 1,
            active: true,
            ethernet: false,
            lid: 1,
            gid_tbl_len: 1,
            active_mtu: 5,
        },
        gid: None,
    })
}

pub unsafe fn ibv_close_device(ctx: *mut ibv_context) -> c_int {
    if !is_fake(ctx as usize) {
        return unsafe { rdma_sys::ibv_close_device(ctx) };
    }
    0
}

pub unsafe fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    if !is_fake(pd as usize) {
        return unsafe { rdma_sys::ibv_dealloc_pd(pd) };
    }
    0
}

pub unsafe fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    if !is_fake(ctx as usize) {
        return unsafe { rdma_sys::ibv_create_cq(ctx, cqe, cq_context, channel, comp_vector) };
    }
    // SAFETY: plain C struct; all-zero is valid.
    let cq = leak(unsafe { std::mem::zeroed::<ibv_cq>() });
    with(|h| {
        h.cqs.insert(cq, VecDeque::new());
        if !channel.is_null() {
            h.notify.insert(
                cq,
                Notify {
                    channel: channel as usize,
                    cq_context: cq_context as usize,
                    armed: false,
                    got: 0,
                    acked: 0,
                },
            );
        }
    });
    cq as *mut ibv_cq
}

pub unsafe fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
    if !is_fake(ctx as usize) {
        return unsafe { rdma_sys::ibv_create_comp_channel(ctx) };
    }
    let mut fds = [0 as c_int; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: plain C struct; all-zero is valid.
    let mut c: ibv_comp_channel = unsafe { std::mem::zeroed() };
    c.context = ctx;
    c.fd = fds[0];
    let ch = leak(c);
    with(|h| {
        h.handles.insert(ch, ());
        h.channels.insert(
            ch,
            Channel {
                write_fd: fds[1],
                pending: VecDeque::new(),
            },
        );
    });
    ch as *mut ibv_comp_channel
}

pub unsafe fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    if !is_fake(ch as usize) {
        return unsafe { rdma_sys::ibv_destroy_comp_channel(ch) };
    }
    with(|h| {
        if h.notify.values().any(|n| n.channel == ch as usize) {
            return EBUSY;
        }
        let Some(c) = h.channels.remove(&(ch as usize)) else {
            return EINVAL;
        };
        h.handles.remove(&(ch as usize));
        // SAFETY: both descriptors were made by pipe2 for this channel and are closed once.
        unsafe {
            libc::close(c.write_fd);
            libc::close((*ch).fd);
        }
        0
    })
}

pub unsafe fn ibv_req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    if !is_fake(cq as usize) {
        return unsafe { rdma_sys::ibv_req_notify_cq(cq, solicited_only) };
    }
    with(|h| match h.notify.get_mut(&(cq as usize)) {
        Some(n) => {
            n.armed = true;
            0
        }
        None => EINVAL,
    })
}

pub unsafe fn ibv_get_cq_event(ch: *mut ibv_comp_channel, cq: *mut *mut ibv_cq, cq_context: *mut *mut c_void) -> c_int {
    if !is_fake(ch as usize) {
        return unsafe { rdma_sys::ibv_get_cq_event(ch, cq, cq_context) };
    }
    let mut b = [0u8; 1];
    // SAFETY: reads one byte into b from the channel's pipe (non-blocking).
    if unsafe { libc::read((*ch).fd, b.as_mut_ptr().cast(), 1) } != 1 {
        return -1;
    }
    with(|h| {
        let Some(c) = h.channels.get_mut(&(ch as usize)).and_then(|c| c.pending.pop_front()) else {
            return -1;
        };
        let n = h.notify.get_mut(&c).expect("a pending CQ reports to this channel");
        n.got += 1;
        // SAFETY: the caller passes valid out-pointers.
        unsafe {
            *cq = c as *mut ibv_cq;
            *cq_context = n.cq_context as *mut c_void;
        }
        0
    })
}

pub unsafe fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: u32) {
    if !is_fake(cq as usize) {
        return unsafe { rdma_sys::ibv_ack_cq_events(cq, nevents) };
    }
    with(|h| {
        if let Some(n) = h.notify.get_mut(&(cq as usize)) {
            n.acked += nevents;
        }
    })
}

/// Events handed out by `ibv_get_cq_event` for `cq` and not acknowledged (libibverbs'
/// `ibv_destroy_cq` would hang on such a CQ; the model refuses it with EBUSY).
pub fn unacked_events(cq: usize) -> u32 {
    with(|h| h.notify.get(&cq).map(|n| n.got - n.acked.min(n.got)).unwrap_or(0))
}

/// Does the model still hold `cq` (not destroyed, or destroy refused)?
pub fn cq_alive(cq: usize) -> bool {
    with(|h| h.cqs.contains_key(&cq))
}

pub unsafe fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    if !is_fake(cq as usize) {
        return unsafe { rdma_sys::ibv_destroy_cq(cq) };
    }
    let c = cq as usize;
    with(|h| {
        if h.qps.values().any(|q| q.send_cq == c || q.recv_cq == c) {
            return EBUSY;
        }
        if h.notify.get(&c).is_some_and(|n| n.acked != n.got) {
            return EBUSY; // libibverbs would wait for the missing acknowledgements forever.
        }
        h.cqs.remove(&c);
        h.notify.remove(&c);
        0
    })
}

pub unsafe fn ibv_reg_mr(pd: *mut ibv_pd, addr: *mut c_void, length: usize, access: c_int) -> *mut ibv_mr {
    if !is_fake(pd as usize) {
        return unsafe { rdma_sys::ibv_reg_mr(pd, addr, length, access) };
    }
    with(|h| {
        h.next += 1;
        let key = 0x1000 + h.next;
        // SAFETY: plain C struct; all-zero is valid.
        let mut mr: ibv_mr = unsafe { std::mem::zeroed() };
        mr.lkey = key;
        mr.rkey = key;
        let p = leak(mr);
        h.mrs.insert(
            p,
            Mr {
                addr: addr as u64,
                len: length as u64,
                rkey: key,
            },
        );
        p as *mut ibv_mr
    })
}

pub unsafe fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    if !is_fake(mr as usize) {
        return unsafe { rdma_sys::ibv_dereg_mr(mr) };
    }
    with(|h| h.mrs.remove(&(mr as usize)));
    0
}

pub unsafe fn ibv_create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    if !is_fake(pd as usize) {
        return unsafe { rdma_sys::ibv_create_qp(pd, attr) };
    }
    // SAFETY: the caller passes an initialized attribute struct.
    let a = unsafe { &mut *attr };
    if a.qp_type != ibv_qp_type::IBV_QPT_RC || a.cap.max_send_sge < 1 || a.cap.max_recv_sge < 1 || a.sq_sig_all != 0 {
        return std::ptr::null_mut();
    }
    a.cap.max_inline_data = a.cap.max_inline_data.min(MAX_INLINE);
    with(|h| {
        h.next += 1;
        let qpn = 0x100 + h.next;
        // SAFETY: plain C struct; all-zero is valid.
        let mut qp: ibv_qp = unsafe { std::mem::zeroed() };
        qp.qp_num = qpn;
        let p = leak(qp);
        h.qps.insert(
            p,
            Qp {
                qpn,
                state: ibv_qp_state::IBV_QPS_RESET,
                send_cq: a.send_cq as usize,
                recv_cq: a.recv_cq as usize,
                max_send: a.cap.max_send_wr as usize,
                max_recv: a.cap.max_recv_wr as usize,
                max_inline: a.cap.max_inline_data,
                dest: 0,
                sq_psn: 0,
                rq_psn: 0,
                recvs: VecDeque::new(),
                sq: VecDeque::new(),
            },
        );
        h.by_qpn.insert(qpn, p);
        p as *mut ibv_qp
    })
}

pub unsafe fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    if !is_fake(qp as usize) {
        return unsafe { rdma_sys::ibv_destroy_qp(qp) };
    }
    with(|h| {
        if let Some(q) = h.qps.remove(&(qp as usize)) {
            h.by_qpn.remove(&q.qpn);
        }
    });
    0
}

/// Moves `q` to ERR: every posted receive and unfinished send completes with a flush error.
fn fail(h: &mut Hca, q: usize) {
    let Some(qp) = h.qps.get_mut(&q) else { return };
    qp.state = ibv_qp_state::IBV_QPS_ERR;
    let recvs: Vec<_> = qp.recvs.drain(..).collect();
    let rcq = qp.recv_cq;
    for (wr_id, _, _) in recvs {
        push(h, rcq, wr_id, status::WR_FLUSH_ERR, 0, q, false);
    }
}

fn push(h: &mut Hca, cq: usize, wr_id: u64, st: u32, byte_len: u32, qp: usize, send: bool) {
    if let Some(c) = h.cqs.get_mut(&cq) {
        c.push_back(Wc {
            wr_id,
            status: st,
            byte_len,
            qp,
            send,
        });
    }
    // An armed CQ raises one event for its next completion, then is disarmed.
    if let Some(n) = h.notify.get_mut(&cq)
        && n.armed
    {
        n.armed = false;
        if let Some(ch) = h.channels.get_mut(&n.channel) {
            ch.pending.push_back(cq);
            // SAFETY: writes one byte from a live buffer to the channel's pipe.
            let _ = unsafe { libc::write(ch.write_fd, [1u8].as_ptr().cast(), 1) };
        }
    }
}

pub unsafe fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, m: c_int) -> c_int {
    if !is_fake(qp as usize) {
        return unsafe { rdma_sys::ibv_modify_qp(qp, attr, m) };
    }
    // SAFETY: the caller passes an initialized attribute struct.
    let a = unsafe { &*attr };
    let m = m as u32;
    let q = qp as usize;
    with(|h| {
        let Some(cur) = h.qps.get(&q).map(|x| x.state) else {
            return EINVAL;
        };
        use ibv_qp_state::*;
        let required = match (cur, a.qp_state) {
            (_, IBV_QPS_ERR) => mask::STATE,
            (IBV_QPS_RESET, IBV_QPS_INIT) => mask::STATE | mask::PKEY_INDEX | mask::PORT | mask::ACCESS_FLAGS,
            (IBV_QPS_INIT, IBV_QPS_RTR) => {
                mask::STATE
                    | mask::AV
                    | mask::PATH_MTU
                    | mask::DEST_QPN
                    | mask::RQ_PSN
                    | mask::MAX_DEST_RD_ATOMIC
                    | mask::MIN_RNR_TIMER
            }
            (IBV_QPS_RTR, IBV_QPS_RTS) => {
                mask::STATE | mask::SQ_PSN | mask::TIMEOUT | mask::RETRY_CNT | mask::RNR_RETRY | mask::MAX_QP_RD_ATOMIC
            }
            _ => return EINVAL,
        };
        if m & required != required {
            return EINVAL;
        }
        if a.qp_state == IBV_QPS_ERR {
            fail(h, q);
            return 0;
        }
        let x = h.qps.get_mut(&q).expect("checked");
        match a.qp_state {
            IBV_QPS_INIT if a.port_num != 1 || a.qp_access_flags & 2 == 0 => return EINVAL,
            IBV_QPS_RTR => {
                if a.path_mtu == 0 || a.path_mtu > 5 || a.rq_psn >= 1 << 24 {
                    return EINVAL;
                }
                x.dest = a.dest_qp_num;
                x.rq_psn = a.rq_psn;
            }
            IBV_QPS_RTS => x.sq_psn = a.sq_psn,
            _ => {}
        }
        x.state = a.qp_state;
        0
    })
}

pub unsafe fn ibv_post_recv(qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
    if !is_fake(qp as usize) {
        return unsafe { rdma_sys::ibv_post_recv(qp, wr, bad) };
    }
    let q = qp as usize;
    with(|h| {
        let Some(x) = h.qps.get_mut(&q) else { return EINVAL };
        if x.state == ibv_qp_state::IBV_QPS_RESET {
            return EINVAL;
        }
        let mut w = wr;
        while !w.is_null() {
            // SAFETY: the caller's chain of initialized WRs with one SGE each.
            let (id, sge, n, next) = unsafe { ((*w).wr_id, (*w).sg_list, (*w).num_sge, (*w).next) };
            if n != 1 || x.recvs.len() >= x.max_recv {
                return ENOMEM;
            }
            // SAFETY: num_sge is 1: one valid SGE.
            let s = unsafe { *sge };
            x.recvs.push_back((id, s.addr, s.length));
            w = next;
        }
        0
    })
}

fn mr_covers(h: &Hca, key: u32, addr: u64, len: u64) -> bool {
    h.mrs
        .values()
        .any(|m| m.rkey == key && addr >= m.addr && addr + len <= m.addr + m.len)
}

pub unsafe fn ibv_post_send(qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad: *mut *mut ibv_send_wr) -> c_int {
    if !is_fake(qp as usize) {
        return unsafe { rdma_sys::ibv_post_send(qp, wr, bad) };
    }
    let q = qp as usize;
    with(|h| {
        let mut w = wr;
        while !w.is_null() {
            // SAFETY: the caller's chain of initialized WRs.
            let r = unsafe { &*w };
            w = r.next;
            let Some(x) = h.qps.get(&q) else { return EINVAL };
            let (state, scq, max_inline, dest, psn) = (x.state, x.send_cq, x.max_inline, x.dest, x.sq_psn);
            let signaled = r.send_flags & ibv_send_flags::IBV_SEND_SIGNALED.0 != 0;
            let inline = r.send_flags & ibv_send_flags::IBV_SEND_INLINE.0 != 0;
            if state != ibv_qp_state::IBV_QPS_RTS && state != ibv_qp_state::IBV_QPS_ERR {
                return EINVAL;
            }
            if x.sq.len() >= x.max_send {
                return ENOMEM;
            }
            h.qps.get_mut(&q).expect("checked").sq.push_back((r.wr_id, signaled));
            if state == ibv_qp_state::IBV_QPS_ERR {
                push(h, scq, r.wr_id, status::WR_FLUSH_ERR, 0, q, true);
                continue;
            }
            // SAFETY: num_sge is 0 or 1 with a valid SGE.
            let (addr, len, lkey) = match r.num_sge {
                0 => (0, 0u32, 0),
                1 => unsafe { ((*r.sg_list).addr, (*r.sg_list).length, (*r.sg_list).lkey) },
                _ => return EINVAL,
            };
            if inline && len > max_inline {
                return EINVAL;
            }
            if !inline && len > 0 && !mr_covers(h, lkey, addr, u64::from(len)) {
                push(h, scq, r.wr_id, status::LOC_PROT_ERR, 0, q, true);
                fail(h, q);
                continue;
            }
            let target = h.by_qpn.get(&dest).copied();
            let ready = target.and_then(|t| h.qps.get(&t)).is_some_and(|t| {
                (t.state == ibv_qp_state::IBV_QPS_RTR || t.state == ibv_qp_state::IBV_QPS_RTS) && t.rq_psn == psn
            });
            let Some(t) = target.filter(|_| ready) else {
                push(h, scq, r.wr_id, status::RETRY_EXC_ERR, 0, q, true);
                fail(h, q);
                continue;
            };
            let outcome = if r.opcode == ibv_wr_opcode::IBV_WR_SEND {
                let tq = h.qps.get_mut(&t).expect("ready");
                match tq.recvs.pop_front() {
                    None => Err(status::RNR_RETRY_EXC_ERR),
                    Some((rid, raddr, rlen)) if rlen >= len => {
                        // SAFETY: both ranges are inside registered memory of live endpoints
                        // (checked for the source; the receive buffer was posted by its owner).
                        unsafe { std::ptr::copy(addr as *const u8, raddr as *mut u8, len as usize) };
                        let rcq = tq.recv_cq;
                        push(h, rcq, rid, status::SUCCESS, len, t, false);
                        Ok(())
                    }
                    Some(_) => Err(status::REM_INV_REQ_ERR),
                }
            } else if r.opcode == ibv_wr_opcode::IBV_WR_RDMA_WRITE {
                // SAFETY: the opcode says the rdma member is the one written.
                let (raddr, rkey) = unsafe { (r.wr.rdma.remote_addr, r.wr.rdma.rkey) };
                if mr_covers(h, rkey, raddr, u64::from(len)) {
                    // SAFETY: the target range is inside the peer's registered region.
                    unsafe { std::ptr::copy(addr as *const u8, raddr as *mut u8, len as usize) };
                    Ok(())
                } else {
                    Err(status::REM_ACCESS_ERR)
                }
            } else {
                Err(status::REM_INV_REQ_ERR)
            };
            match outcome {
                Ok(()) if signaled => push(h, scq, r.wr_id, status::SUCCESS, 0, q, true),
                Ok(()) => {}
                Err(st) => {
                    push(h, scq, r.wr_id, st, 0, q, true);
                    fail(h, q);
                }
            }
        }
        let _ = bad;
        0
    })
}

pub unsafe fn ibv_poll_cq(cq: *mut ibv_cq, n: i32, wc: *mut ibv_wc) -> c_int {
    if !is_fake(cq as usize) {
        return unsafe { rdma_sys::ibv_poll_cq(cq, n, wc) };
    }
    with(|h| {
        let mut k = 0;
        while k < n.max(0) as usize {
            let Some(c) = h.cqs.get_mut(&(cq as usize)).and_then(|c| c.pop_front()) else {
                break;
            };
            // Polling a send completion (signaled, or an error) frees its WR and every earlier one.
            if let Some(q) = h.qps.get_mut(&c.qp)
                && c.send
                && let Some(i) = q.sq.iter().position(|&(id, _)| id == c.wr_id)
            {
                q.sq.drain(..=i);
            }
            let qpn = h.qps.get(&c.qp).map(|q| q.qpn).unwrap_or(0);
            // SAFETY: the caller gives room for n completions; k < n.
            unsafe {
                let out = &mut *wc.add(k);
                out.wr_id = c.wr_id;
                out.status = c.status;
                out.byte_len = c.byte_len;
                out.qp_num = qpn;
            }
            k += 1;
        }
        k as c_int
    })
}
