//! Unit tests only: a software model of an HCA behind the verbs calls the endpoint makes, so
//! the data path (credits, receive re-posting, signaled-every-N, staging, wr ids, failure
//! handling) runs without a device. Objects it did not create go to rdma-sys unchanged.
//!
//! The model follows the RC rules the endpoint relies on: the QP state machine with the
//! attribute masks the IB spec requires per transition, PSNs that must match, a SEND consumes
//! the head receive of the peer QP (none posted: RNR, reported at once, as an exhausted RNR
//! retry), an RDMA WRITE needs a peer MR with its rkey, covering the whole target range and
//! registered with remote write (else a remote access error: the writer's QP and, as an HCA's
//! responder does, the target's QP go to ERR and nothing is written), a SEND lands only in a
//! receive buffer covered by the lkey's MR with local write, a peer QP gone or not ready fails
//! the sender with RETRY_EXC_ERR, an error moves the QP to ERR and flushes what is posted, the
//! send queue holds `max_send_wr` WRs until a signaled completion covering them is polled, and
//! inline data is limited to [`MAX_INLINE`].

#![allow(clippy::missing_safety_doc)]

use std::collections::{HashMap, VecDeque};
use std::os::raw::{c_int, c_void};
use std::sync::{Arc, Mutex};

pub use rdma_sys::*;

mod qp;
pub use qp::{ibv_create_qp, ibv_destroy_qp, ibv_modify_qp, ibv_poll_cq, ibv_post_recv, ibv_post_send};

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
    /// Posted receives: (wr_id, addr, length, lkey).
    recvs: VecDeque<(u64, u64, u32, u32)>,
    /// Posted send WRs not yet freed: (wr_id, signaled).
    sq: VecDeque<(u64, bool)>,
}

struct Mr {
    addr: u64,
    len: u64,
    lkey: u32,
    rkey: u32,
    /// `ibv_access_flags` bits it was registered with.
    access: u32,
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
    let access = access as u32;
    let (local_write, remote_write) = (
        ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0,
        ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0,
    );
    // As libibverbs: remote write without local write is invalid.
    if addr.is_null() || access & remote_write != 0 && access & local_write == 0 {
        return std::ptr::null_mut();
    }
    with(|h| {
        h.next += 1;
        // Distinct lkey and rkey, as an HCA gives: one is never valid where the other is asked.
        let key = 0x1000 + h.next;
        // SAFETY: plain C struct; all-zero is valid.
        let mut mr: ibv_mr = unsafe { std::mem::zeroed() };
        mr.lkey = key;
        mr.rkey = key | 0x8000_0000;
        mr.addr = addr;
        mr.length = length;
        let p = leak(mr);
        h.mrs.insert(
            p,
            Mr {
                addr: addr as u64,
                len: length as u64,
                lkey: key,
                rkey: key | 0x8000_0000,
                access,
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
