//! The modelled QPs: creation, the state machine with its required attribute masks, posting
//! receives and sends (SEND, RDMA WRITE, inline), failures, and completions.

use std::os::raw::c_int;

use super::*;

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
    for (wr_id, ..) in recvs {
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
            x.recvs.push_back((id, s.addr, s.length, s.lkey));
            w = next;
        }
        0
    })
}

/// Whether an MR with local key `key` covers `addr..addr + len` (and, with `write`, allows
/// local writes: what a receive buffer needs).
fn local_covers(h: &Hca, key: u32, addr: u64, len: u64, write: bool) -> bool {
    let w = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0;
    h.mrs.values().any(|m| {
        m.lkey == key && addr >= m.addr && addr.saturating_add(len) <= m.addr + m.len && (!write || m.access & w != 0)
    })
}

/// Whether an MR with remote key `key` covers `addr..addr + len` for RDMA WRITE: the whole
/// range inside it, registered with remote write.
fn remote_writable(h: &Hca, key: u32, addr: u64, len: u64) -> bool {
    let w = ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
    h.mrs
        .values()
        .any(|m| m.rkey == key && addr >= m.addr && addr.saturating_add(len) <= m.addr + m.len && m.access & w != 0)
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
            if !inline && len > 0 && !local_covers(h, lkey, addr, u64::from(len), false) {
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
            // Err((requester's status, the responder's QP fails too)).
            let outcome = if r.opcode == ibv_wr_opcode::IBV_WR_SEND {
                let head = h.qps.get_mut(&t).expect("ready").recvs.pop_front();
                match head {
                    None => Err((status::RNR_RETRY_EXC_ERR, false)),
                    Some((rid, raddr, rlen, rkey)) if rlen >= len => {
                        let rcq = h.qps[&t].recv_cq;
                        if local_covers(h, rkey, raddr, u64::from(len), true) {
                            // SAFETY: both ranges are inside registered memory of live
                            // endpoints (checked for the source; the receive buffer is
                            // covered by its owner's MR with local write).
                            unsafe { std::ptr::copy(addr as *const u8, raddr as *mut u8, len as usize) };
                            push(h, rcq, rid, status::SUCCESS, len, t, false);
                            Ok(())
                        } else {
                            // The responder's local protection error; the requester sees a
                            // remote operational error.
                            push(h, rcq, rid, status::LOC_PROT_ERR, 0, t, false);
                            Err((status::REM_OP_ERR, true))
                        }
                    }
                    Some(_) => Err((status::REM_INV_REQ_ERR, true)),
                }
            } else if r.opcode == ibv_wr_opcode::IBV_WR_RDMA_WRITE {
                // SAFETY: the opcode says the rdma member is the one written.
                let (raddr, rkey) = unsafe { (r.wr.rdma.remote_addr, r.wr.rdma.rkey) };
                if remote_writable(h, rkey, raddr, u64::from(len)) {
                    // SAFETY: the target range is inside the peer's remote-writable region.
                    unsafe { std::ptr::copy(addr as *const u8, raddr as *mut u8, len as usize) };
                    Ok(())
                } else {
                    // A bad rkey, a range outside the MR, or an MR without remote write: the
                    // responder NAKs (remote access error) and its QP goes to ERR as well.
                    Err((status::REM_ACCESS_ERR, true))
                }
            } else {
                Err((status::REM_INV_REQ_ERR, true))
            };
            match outcome {
                Ok(()) if signaled => push(h, scq, r.wr_id, status::SUCCESS, 0, q, true),
                Ok(()) => {}
                Err((st, responder)) => {
                    push(h, scq, r.wr_id, st, 0, q, true);
                    fail(h, q);
                    if responder {
                        fail(h, t);
                    }
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
