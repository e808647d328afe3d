//! Tests of the device code: the UDP transport's conformance harness over the HCA model of
//! [`super::fake`] (always), the no-device path (where there is none), and with
//! `FTCOLL_TEST_RDMA=1` on a machine with an active port the same harness over the device.

use std::time::Duration;

use super::endpoint::{ibv_init, ibv_rtr, ibv_rts, local, local_on};
use super::fake;
use super::qp_attr::{self, RcParams, Remote};
use super::{VerbsConfig, completion, select};
use crate::transport::Transport;
use crate::transport::testutil::{assert_complete, exchange};
use rdma_sys::*;

mod memory_access;

fn with_device() -> bool {
    std::env::var("FTCOLL_TEST_RDMA").is_ok_and(|v| v == "1")
}

/// Whether libibverbs would find a device (it lists `/sys/class/infiniband_verbs`).
fn device_present() -> bool {
    std::fs::read_dir("/sys/class/infiniband_verbs").is_ok_and(|mut d| d.next().is_some())
}

#[test]
fn our_abi_constants_match_rdma_sys() {
    use qp_attr::mask;
    let m = |x: ibv_qp_attr_mask| x.0;
    assert_eq!(mask::STATE, m(ibv_qp_attr_mask::IBV_QP_STATE));
    assert_eq!(mask::ACCESS_FLAGS, m(ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS));
    assert_eq!(mask::PKEY_INDEX, m(ibv_qp_attr_mask::IBV_QP_PKEY_INDEX));
    assert_eq!(mask::PORT, m(ibv_qp_attr_mask::IBV_QP_PORT));
    assert_eq!(mask::AV, m(ibv_qp_attr_mask::IBV_QP_AV));
    assert_eq!(mask::PATH_MTU, m(ibv_qp_attr_mask::IBV_QP_PATH_MTU));
    assert_eq!(mask::TIMEOUT, m(ibv_qp_attr_mask::IBV_QP_TIMEOUT));
    assert_eq!(mask::RETRY_CNT, m(ibv_qp_attr_mask::IBV_QP_RETRY_CNT));
    assert_eq!(mask::RNR_RETRY, m(ibv_qp_attr_mask::IBV_QP_RNR_RETRY));
    assert_eq!(mask::RQ_PSN, m(ibv_qp_attr_mask::IBV_QP_RQ_PSN));
    assert_eq!(mask::MAX_QP_RD_ATOMIC, m(ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC));
    assert_eq!(mask::MIN_RNR_TIMER, m(ibv_qp_attr_mask::IBV_QP_MIN_RNR_TIMER));
    assert_eq!(mask::SQ_PSN, m(ibv_qp_attr_mask::IBV_QP_SQ_PSN));
    assert_eq!(mask::MAX_DEST_RD_ATOMIC, m(ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC));
    assert_eq!(mask::DEST_QPN, m(ibv_qp_attr_mask::IBV_QP_DEST_QPN));
    assert_eq!(qp_attr::ACCESS_LOCAL_WRITE, ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0);
    assert_eq!(
        qp_attr::ACCESS_REMOTE_WRITE,
        ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
    );
    use completion::status as s;
    use ibv_wc_status as w;
    for (ours, theirs) in [
        (s::SUCCESS, w::IBV_WC_SUCCESS),
        (s::LOC_LEN_ERR, w::IBV_WC_LOC_LEN_ERR),
        (s::LOC_QP_OP_ERR, w::IBV_WC_LOC_QP_OP_ERR),
        (s::LOC_PROT_ERR, w::IBV_WC_LOC_PROT_ERR),
        (s::WR_FLUSH_ERR, w::IBV_WC_WR_FLUSH_ERR),
        (s::BAD_RESP_ERR, w::IBV_WC_BAD_RESP_ERR),
        (s::LOC_ACCESS_ERR, w::IBV_WC_LOC_ACCESS_ERR),
        (s::REM_INV_REQ_ERR, w::IBV_WC_REM_INV_REQ_ERR),
        (s::REM_ACCESS_ERR, w::IBV_WC_REM_ACCESS_ERR),
        (s::REM_OP_ERR, w::IBV_WC_REM_OP_ERR),
        (s::RETRY_EXC_ERR, w::IBV_WC_RETRY_EXC_ERR),
        (s::RNR_RETRY_EXC_ERR, w::IBV_WC_RNR_RETRY_EXC_ERR),
        (s::REM_ABORT_ERR, w::IBV_WC_REM_ABORT_ERR),
        (s::FATAL_ERR, w::IBV_WC_FATAL_ERR),
        (s::RESP_TIMEOUT_ERR, w::IBV_WC_RESP_TIMEOUT_ERR),
        (s::GENERAL_ERR, w::IBV_WC_GENERAL_ERR),
    ] {
        assert_eq!(ours, theirs);
    }
}

#[test]
fn ibv_qp_attr_carries_the_perftest_attributes() {
    let p = RcParams::default();
    let (a, m) = ibv_init(&qp_attr::init(&p, 1));
    assert_eq!((a.qp_state, a.port_num, a.pkey_index, a.qp_access_flags), (1, 1, 0, 3));
    assert_eq!(m, 0b11_1001);
    let r = Remote {
        qpn: 0x1234,
        psn: 0x56,
        lid: 9,
        gid: [7; 16],
    };
    let (a, _) = ibv_rtr(&qp_attr::rtr(&p, 1, 5, Some(3), &r));
    assert_eq!(
        (a.qp_state, a.path_mtu, a.dest_qp_num, a.rq_psn),
        (ibv_qp_state::IBV_QPS_RTR, 5, 0x1234, 0x56)
    );
    assert_eq!(
        (
            a.min_rnr_timer,
            a.max_dest_rd_atomic,
            a.ah_attr.dlid,
            a.ah_attr.port_num
        ),
        (12, 1, 9, 1)
    );
    assert_eq!(
        (a.ah_attr.is_global, a.ah_attr.grh.sgid_index, a.ah_attr.grh.hop_limit),
        (1, 3, 0xFF)
    );
    // SAFETY: the union was written as raw bytes.
    assert_eq!(unsafe { a.ah_attr.grh.dgid.raw }, [7; 16]);
    let (a, _) = ibv_rtr(&qp_attr::rtr(&p, 1, 5, None, &r));
    assert_eq!(a.ah_attr.is_global, 0);
    let (a, m) = ibv_rts(&qp_attr::rts(&p, 0xabc));
    assert_eq!(
        (
            a.qp_state,
            a.sq_psn,
            a.timeout,
            a.retry_cnt,
            a.rnr_retry,
            a.max_rd_atomic
        ),
        (3, 0xabc, 14, 7, 7, 1)
    );
    assert_eq!(m as u32, qp_attr::rts(&p, 0).mask);
}

#[test]
fn without_a_device_opening_fails_with_one_line_naming_it() {
    if with_device() || device_present() {
        return;
    }
    let e = match local(2, &VerbsConfig::default(), 1, 1) {
        Ok(_) => panic!("a device opened although /sys/class/infiniband_verbs is empty"),
        Err(e) => e,
    };
    assert!(e.starts_with("no RDMA device"), "{e}");
    assert!(e.ends_with(select::HINT), "{e}");
    assert!(!e.contains('\n'));
}

#[test]
fn conformance_all_to_all_exactly_once_in_order() {
    if !with_device() {
        return;
    }
    let eps = local(4, &VerbsConfig::default(), 7, 1).expect("FTCOLL_TEST_RDMA=1 needs a device");
    // More messages than a ring holds: exercises credits and back-pressure.
    let out = exchange(eps, 2000, 64, &[], Duration::from_secs(20));
    assert_complete(&out, 2000);
}

#[test]
fn conformance_large_messages_are_staged_not_inlined() {
    if !with_device() {
        return;
    }
    let eps = local(2, &VerbsConfig::default(), 8, 1).expect("device");
    assert!(eps[0].inline_max() < 1000);
    let out = exchange(eps, 500, 1000, &[], Duration::from_secs(20));
    assert_complete(&out, 500);
}

#[test]
fn conformance_a_destroyed_peer_is_suspected_while_others_go_on() {
    if !with_device() {
        return;
    }
    let cfg = VerbsConfig {
        rc: RcParams {
            timeout: 10,
            retry_cnt: 2,
            ..RcParams::default()
        },
        ..VerbsConfig::default()
    };
    let mut eps = local(4, &cfg, 9, 1).expect("device");
    // Rank 3's QPs are destroyed: the HCAs stop acknowledging, RETRY_EXC_ERR follows.
    drop(eps.pop());
    let out = exchange(eps, 200, 16, &[3], Duration::from_secs(20));
    assert_complete(&out, 200);
    for o in &out {
        assert_eq!(o.suspects, vec![3], "rank {}: {o:?}", o.rank);
    }
}

#[test]
fn conformance_send_refusals() {
    if !with_device() {
        return;
    }
    let mut eps = local(2, &VerbsConfig::default(), 10, 1).expect("device");
    let now = std::time::Instant::now();
    use crate::transport::SendError;
    assert_eq!(eps[0].send(0, b"x", now), Err(SendError::BadPeer));
    assert_eq!(eps[0].send(2, b"x", now), Err(SendError::BadPeer));
    let big = vec![0u8; crate::transport::MAX_PAYLOAD + 1];
    assert_eq!(eps[0].send(1, &big, now), Err(SendError::TooLarge));
}

#[test]
fn conformance_a_killed_endpoint_is_suspected_like_a_dead_process() {
    if !with_device() {
        return;
    }
    let cfg = VerbsConfig {
        rc: RcParams {
            timeout: 10,
            retry_cnt: 2,
            ..RcParams::default()
        },
        ..VerbsConfig::default()
    };
    let mut eps = local(3, &cfg, 11, 1).expect("device");
    let dead = eps.pop().unwrap();
    // The endpoint stays alive (as a killed node's thread does) but its QPs are in ERR.
    dead.kill_switch().expect("connected endpoint").fire();
    let out = exchange(eps, 100, 16, &[2], Duration::from_secs(20));
    assert_complete(&out, 100);
    for o in &out {
        assert_eq!(o.suspects, vec![2], "rank {}: {o:?}", o.rank);
    }
    drop(dead);
}

// --- The same harness over the HCA model (no device needed). ---

fn model(n: u32, cfg: &VerbsConfig) -> Vec<super::endpoint::VerbsTransport> {
    local_on(fake::device(), n, cfg, 0x5eed, 1).expect("model endpoints")
}

#[test]
fn model_all_to_all_exactly_once_in_order_beyond_the_ring() {
    // 1500 messages per pair through rings of 512: credits must come back, or RNR fails it.
    let out = exchange(
        model(4, &VerbsConfig::default()),
        1500,
        16,
        &[],
        Duration::from_secs(60),
    );
    assert_complete(&out, 1500);
    for o in &out {
        assert_eq!(o.stats.sent, 3 * 1500, "{o:?}");
        assert_eq!(o.stats.received, 3 * 1500, "{o:?}");
        assert_eq!(o.stats.malformed, 0, "{o:?}");
    }
}

#[test]
fn model_messages_above_the_inline_limit_are_staged() {
    let mut eps = model(2, &VerbsConfig::default());
    assert_eq!(eps[0].inline_max(), fake::MAX_INLINE as usize);
    let now = std::time::Instant::now();
    eps[0].send(1, &[7u8; 200], now).unwrap();
    eps[0].send(1, &[8u8; 10], now).unwrap();
    let c = eps[0].counters();
    assert_eq!((c.staged_sends, c.inline_sends), (1, 1));
    let out = exchange(eps, 400, 300, &[], Duration::from_secs(60));
    // The two extra messages above arrive first and break the harness's numbering: only the
    // other direction is exact.
    assert_eq!(out[0].received[1], 400);
    assert_eq!(out[0].order_errors, 0);
}

#[test]
fn model_tiny_rings_and_queues_push_back_without_loss() {
    let cfg = VerbsConfig {
        rx_depth: 4,
        tx_depth: 3,
        signal_every: 2,
        ..VerbsConfig::default()
    };
    let out = exchange(model(3, &cfg), 500, 32, &[], Duration::from_secs(60));
    assert_complete(&out, 500);
    assert!(
        out.iter().any(|o| o.stats.window_full > 0),
        "back-pressure never hit: {out:?}"
    );
}

#[test]
fn model_signals_every_n_and_flushes_the_idle_tail() {
    let cfg = VerbsConfig {
        signal_every: 8,
        ..VerbsConfig::default()
    };
    let mut eps = model(2, &cfg);
    let now = std::time::Instant::now();
    for _ in 0..20 {
        eps[0].send(1, b"12345678", now).unwrap();
    }
    assert_eq!(eps[0].counters().signaled, 2, "WRs 8 and 16 of 20");
    assert_eq!(eps[0].unacked(), 20);
    eps[0].poll(now, &mut |_| {}).unwrap();
    assert_eq!(eps[0].unacked(), 4, "the two signaled completions retired 16");
    // Idle for longer than the flush delay: one signaled credit write retires the tail.
    let later = now + Duration::from_millis(1);
    eps[0].poll(later, &mut |_| {}).unwrap();
    eps[0].poll(later, &mut |_| {}).unwrap();
    assert_eq!(eps[0].unacked(), 0);
    let mut got = 0;
    eps[1]
        .poll(later, &mut |d| {
            if let crate::transport::Delivery::Message { from: 0, bytes } = d {
                assert_eq!(bytes, b"12345678");
                got += 1;
            }
        })
        .unwrap();
    assert_eq!(got, 20);
}

#[test]
fn model_a_killed_endpoint_is_suspected_while_the_others_finish() {
    let mut eps = model(4, &VerbsConfig::default());
    let dead = eps.pop().unwrap();
    dead.kill_switch().expect("connected").fire();
    let out = exchange(eps, 300, 16, &[3], Duration::from_secs(60));
    assert_complete(&out, 300);
    for o in &out {
        assert_eq!(o.suspects, vec![3], "rank {}: {o:?}", o.rank);
        assert_eq!(o.stats.suspected, 1);
    }
    drop(dead);
}

#[test]
fn model_a_destroyed_endpoint_is_suspected_and_sends_to_it_are_refused() {
    let mut eps = model(3, &VerbsConfig::default());
    drop(eps.pop());
    let now = std::time::Instant::now();
    eps[0].send(2, b"lost", now).unwrap();
    let mut suspects = Vec::new();
    eps[0]
        .poll(now, &mut |d| {
            if let crate::transport::Delivery::Suspect { peer } = d {
                suspects.push(peer);
            }
        })
        .unwrap();
    assert_eq!(suspects, vec![2]);
    assert_eq!(eps[0].send(2, b"x", now), Err(crate::transport::SendError::Suspected));
    assert!(eps[0].counters().peer_lost >= 1);
    // Reported once only.
    let mut again = 0;
    eps[0].poll(now, &mut |_| again += 1).unwrap();
    assert_eq!(again, 0);
    assert_eq!(eps[0].send(1, b"still fine", now), Ok(()));
}

#[test]
fn model_connection_data_must_match_or_the_peer_is_suspected() {
    let dev = fake::device();
    let cfg = VerbsConfig::default();
    let mut a = super::endpoint::VerbsTransport::create(std::sync::Arc::clone(&dev), 0, 2, 3, &cfg, 1).unwrap();
    let mut b = super::endpoint::VerbsTransport::create(dev, 1, 2, 3, &cfg, 1).unwrap();
    let mut to_b = a.conn_info(1);
    to_b.psn ^= 1; // b expects a PSN a does not use
    b.connect(&to_b).unwrap();
    a.connect(&b.conn_info(0)).unwrap();
    assert!(a.connect(&b.conn_info(0)).is_err(), "connected twice");
    let now = std::time::Instant::now();
    a.send(1, b"x", now).unwrap();
    let mut suspects = Vec::new();
    a.poll(now, &mut |d| {
        if let crate::transport::Delivery::Suspect { peer } = d {
            suspects.push(peer);
        }
    })
    .unwrap();
    assert_eq!(suspects, vec![1]);
}

#[test]
fn model_a_credit_word_that_cannot_be_true_is_refused_and_counted() {
    let cfg = VerbsConfig {
        rx_depth: 4,
        ..VerbsConfig::default()
    };
    let mut eps = model(2, &cfg);
    let now = std::time::Instant::now();
    for _ in 0..4 {
        eps[0].send(1, b"m", now).unwrap();
    }
    assert_eq!(eps[0].send(1, b"m", now), Err(crate::transport::SendError::WindowFull));
    // A forged credit word: more returned than was ever sent.
    let word = eps[0].conn_info(1).credit_addr as *mut u64;
    // SAFETY: the address is endpoint 0's credit word for rank 1, inside its live region.
    unsafe { std::ptr::write_volatile(word, 1_000_000u64.to_le()) };
    assert_eq!(eps[0].send(1, b"m", now), Err(crate::transport::SendError::WindowFull));
    assert_eq!(eps[0].counters().bogus_credits, 1);
    assert_eq!(eps[0].stats().malformed, 1);
    // The true word (the receiver's) restores the flow.
    let mut got = 0;
    eps[1].poll(now, &mut |_| got += 1).unwrap();
    assert_eq!(got, 4);
    eps[1].poll(now + Duration::from_millis(1), &mut |_| {}).unwrap();
    assert_eq!(eps[0].send(1, b"m", now), Ok(()));
}

/// The launched-run path end to end over the model: each rank's endpoint swaps its connection
/// data through a coordinator on loopback ([`crate::runtime::conn_relay`], sealed with the job
/// key), connects, and the conformance exchange then runs over the QPs so connected.
#[test]
fn model_endpoints_connected_through_the_coordinator_relay_exchange_everything() {
    use crate::runtime::board::Control;
    use crate::runtime::control::{ChildAgent, ParentAgent};
    use crate::transport::udp::auth::AuthKey;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let (n, job) = (4u32, 0x5eed_u64);
    let key = AuthKey::from_bytes([9; 16]);
    let dev = fake::device();
    let mut parent = ParentAgent::bind("127.0.0.1:0".parse().unwrap(), job, n).unwrap();
    parent.set_key(Some(key.clone()));
    let addr = parent.addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let coord = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let ctl = Control::new(n);
            while !stop.load(Ordering::Acquire) {
                parent.pump(&ctl, &|| 0);
                parent.wait(Duration::from_millis(1));
            }
            parent.conns_complete()
        })
    };
    let ranks: Vec<_> = (0..n)
        .map(|r| {
            let (dev, key) = (Arc::clone(&dev), key.clone());
            std::thread::spawn(move || {
                let cfg = VerbsConfig::default();
                let mut t = super::endpoint::VerbsTransport::create(dev, r, n, job, &cfg, 1).unwrap();
                let mut agent = ChildAgent::new(addr, job, r, n).unwrap();
                agent.set_key(Some(key));
                let max = crate::transport::MAX_PAYLOAD as u32;
                super::connect_through(&mut t, &mut |mine| {
                    agent.exchange_conns(mine, max, Duration::from_secs(10))
                })
                .unwrap();
                t
            })
        })
        .collect();
    let eps: Vec<_> = ranks.into_iter().map(|h| h.join().unwrap()).collect();
    stop.store(true, Ordering::Release);
    assert_eq!(coord.join().unwrap(), n as usize);
    let out = exchange(eps, 600, 100, &[], Duration::from_secs(60));
    assert_complete(&out, 600);
    for o in &out {
        assert_eq!(o.stats.received, 3 * 600, "{o:?}");
    }
}

/// The booted-run path end to end over the model: each rank swaps its connection data with
/// every peer directly on a loopback socket ([`crate::runtime::conn_peers`], sealed with the
/// job key, every 5th datagram lost), connects, and the conformance exchange then runs.
#[test]
fn model_endpoints_connected_peer_to_peer_exchange_everything() {
    use crate::runtime::conn_peers::{PeerConfig, exchange as swap};
    use crate::transport::udp::auth::AuthKey;
    use std::net::UdpSocket;
    use std::sync::Arc;
    let (n, job) = (5u32, 0x5eed_u64);
    let dev = fake::device();
    let socks: Vec<UdpSocket> = (0..n).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
    let addrs: Vec<_> = socks.iter().map(|s| s.local_addr().unwrap()).collect();
    let ranks: Vec<_> = socks
        .into_iter()
        .enumerate()
        .map(|(r, sock)| {
            let (dev, addrs) = (Arc::clone(&dev), addrs.clone());
            std::thread::spawn(move || {
                let vcfg = VerbsConfig::default();
                let mut t = super::endpoint::VerbsTransport::create(dev, r as u32, n, job, &vcfg, 1).unwrap();
                let cfg = PeerConfig {
                    rank: r as u32,
                    n,
                    job,
                    max_msg: crate::transport::MAX_PAYLOAD as u32,
                    timeout: Duration::from_secs(10),
                    linger: Duration::from_millis(300),
                    drop_every: 5,
                    key: Some(AuthKey::from_bytes([9; 16])),
                };
                super::connect_through(&mut t, &mut |mine| swap(&sock, &addrs, mine, &cfg).map(|r| r.theirs)).unwrap();
                t
            })
        })
        .collect();
    let eps: Vec<_> = ranks.into_iter().map(|h| h.join().unwrap()).collect();
    let out = exchange(eps, 600, 100, &[], Duration::from_secs(60));
    assert_complete(&out, 600);
    for o in &out {
        assert_eq!(o.stats.received, u64::from(n - 1) * 600, "{o:?}");
    }
}

/// Blocking wait (perftest's event mode): a message sent while the receiver sleeps on the
/// completion channel wakes it through one event, and poll then delivers it.
#[test]
fn model_wait_wakes_on_a_completion_event() {
    let mut eps = model(2, &VerbsConfig::default());
    let mut b = eps.pop().unwrap();
    let mut a = eps.pop().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        a.wait(Duration::from_secs(3600)).unwrap();
        let woke = a.counters().cq_events;
        let mut got = Vec::new();
        a.poll(std::time::Instant::now(), &mut |d| {
            if let crate::transport::Delivery::Message { bytes, .. } = d {
                got.push(bytes.to_vec());
            }
        })
        .unwrap();
        tx.send((woke, got)).unwrap();
        a
    });
    // The receiver is asleep (or about to be: then the re-poll finds the message instead).
    std::thread::sleep(Duration::from_millis(20));
    b.send(0, b"wake", std::time::Instant::now()).unwrap();
    let (woke, got) = rx.recv_timeout(Duration::from_secs(60)).expect("wait never returned");
    assert_eq!(got, vec![b"wake".to_vec()]);
    assert!(woke <= 1, "{woke}");
    let a = h.join().unwrap();
    let (s, r) = a.cq_handles();
    drop(a);
    assert!(!fake::cq_alive(s) && !fake::cq_alive(r), "events left unacknowledged");
}

/// The race perftest's event loop closes: a completion that arrived before the CQ was armed
/// raises no event, so wait must find it by polling again after arming, not sleep on it.
#[test]
fn model_wait_finds_a_completion_that_came_before_arming() {
    let mut eps = model(2, &VerbsConfig::default());
    let mut b = eps.pop().unwrap();
    let mut a = eps.pop().unwrap();
    b.send(0, b"early", std::time::Instant::now()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        a.wait(Duration::from_secs(3600)).unwrap();
        let mut got = Vec::new();
        a.poll(std::time::Instant::now(), &mut |d| {
            if let crate::transport::Delivery::Message { bytes, .. } = d {
                got.push(bytes.to_vec());
            }
        })
        .unwrap();
        tx.send((a.counters().cq_events, got)).unwrap();
    });
    let (events, got) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("wait slept on a completion it had");
    assert_eq!(events, 0, "no event for a completion before arming");
    assert_eq!(got, vec![b"early".to_vec()]);
    h.join().unwrap();
}

/// Many wake-ups: at most a batch of events waits to be acknowledged, and all are before
/// the CQs are destroyed.
#[test]
fn model_events_are_acknowledged_in_batches_and_before_destruction() {
    let mut eps = model(2, &VerbsConfig::default());
    let mut b = eps.pop().unwrap();
    let mut a = eps.pop().unwrap();
    let (_, r) = a.cq_handles();
    let rounds = 40u64;
    let mut delivered = 0;
    for i in 0..rounds {
        // Arm, then let a completion raise the event, then take it.
        a.wait(Duration::ZERO).unwrap();
        b.send(0, &i.to_le_bytes(), std::time::Instant::now()).unwrap();
        a.wait(Duration::from_secs(60)).unwrap();
        delivered += a.poll(std::time::Instant::now(), &mut |_| {}).unwrap();
        b.poll(std::time::Instant::now(), &mut |_| {}).unwrap();
    }
    assert_eq!(delivered as u64, rounds);
    // An event whose completion the re-poll already found stays in the channel until the
    // next wait takes it (an early wake-up at worst): the last one may still be there.
    assert!(a.counters().cq_events >= rounds - 1, "{:?}", a.counters());
    assert!(fake::unacked_events(r) < 16, "at most one batch of events is pending");
    drop(a);
    assert!(!fake::cq_alive(r), "events left unacknowledged at destruction");
}
