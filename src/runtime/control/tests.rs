//! The control agents over loopback.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::child::{REPORT_EVERY, report_due};
use super::{ChildAgent, ParentAgent};
use crate::runtime::board::Control;
use crate::runtime::join::JobParams;
use crate::wire::conn::{ConnInfo, sample as conn};
use crate::wire::control::{Msg, encode};
use crate::wire::mac::AuthKey;

/// n ranks (more than one datagram's worth of peers) exchange connection data through a
/// coordinator on loopback, sealed with the job key; a node with another key is shut out.
#[test]
fn connection_data_is_relayed_all_to_all_through_the_coordinator() {
    let (job, n) = (0xF7C0_0000_0000_0042u64, 20u32);
    let key = AuthKey::from_bytes([3; 16]);
    let mut parent = ParentAgent::bind("127.0.0.1:0".parse().unwrap(), job, n).unwrap();
    parent.set_key(Some(key.clone()));
    let addr = parent.addr().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let coord = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let ctl = Control::new(n);
            while !stop.load(Ordering::Acquire) {
                parent.pump(&ctl, &|| 0);
                parent.wait(Duration::from_millis(1));
            }
            (parent.conns_complete(), parent.invalid)
        })
    };
    let nodes: Vec<_> = (0..n)
        .map(|r| {
            let key = key.clone();
            std::thread::spawn(move || {
                let mut a = ChildAgent::new(addr, job, r, n).unwrap();
                a.set_key(Some(key));
                let mine: Vec<ConnInfo> = (0..n).filter(|&t| t != r).map(|t| conn(job, r, t)).collect();
                a.exchange_conns(&mine, crate::transport::MAX_PAYLOAD as u32, Duration::from_secs(10))
            })
        })
        .collect();
    // An outsider with the wrong key is never answered and changes nothing.
    let mut stranger = ChildAgent::new(addr, job, 1, n).unwrap();
    stranger.set_key(Some(AuthKey::from_bytes([4; 16])));
    let forged: Vec<ConnInfo> = (0..n)
        .filter(|&t| t != 1)
        .map(|t| ConnInfo {
            qpn: 9,
            ..conn(job, 1, t)
        })
        .collect();
    let e = stranger
        .exchange_conns(
            &forged,
            crate::transport::MAX_PAYLOAD as u32,
            Duration::from_millis(200),
        )
        .unwrap_err();
    assert!(e.contains("peers missing"), "{e}");
    for (me, h) in nodes.into_iter().enumerate() {
        let got = h.join().unwrap().unwrap();
        for (from, c) in got.iter().enumerate() {
            if from == me {
                assert!(c.is_none());
            } else {
                assert_eq!(*c, Some(conn(job, from as u32, me as u32)));
            }
        }
    }
    stop.store(true, Ordering::Release);
    let (done, invalid) = coord.join().unwrap();
    assert_eq!(done, n as usize);
    assert!(invalid > 0, "the stranger's datagrams were counted");
}

#[test]
fn changed_reports_go_out_at_most_every_report_every() {
    let report = |last_ns| Msg::Report {
        seq: 3,
        delivered_ns: 10,
        last_ns,
        started_ns: 0,
        sent: 1,
        deliveries: 1,
        bad: 0,
        finished: false,
        dropped: false,
    };
    let seen = Instant::now();
    assert!(
        !report_due(None, seen, &report(5), seen),
        "not while the operation is young"
    );
    let t0 = seen + REPORT_EVERY;
    assert!(report_due(None, seen, &report(5), t0), "then the slot's first report");
    let last = Some((report(5), t0));
    assert!(
        !report_due(last, seen, &report(5), t0 + REPORT_EVERY * 10),
        "unchanged: never"
    );
    assert!(
        !report_due(last, seen, &report(6), t0 + REPORT_EVERY / 2),
        "changed, too soon"
    );
    assert!(report_due(last, seen, &report(6), t0 + REPORT_EVERY), "changed, due");
}

/// A coordinator of a launched run on loopback, pumped in a thread until `stop`; returns the
/// agent and its board when stopped.
fn launched_coordinator(
    job: u64,
    n: u32,
    key: &AuthKey,
    run: [u8; 16],
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<(ParentAgent, Control)>,
) {
    let mut parent = ParentAgent::bind("127.0.0.1:0".parse().unwrap(), job, n).unwrap();
    parent.set_key(Some(key.clone()));
    parent
        .launch(JobParams {
            o_ns: 1000,
            l_ns: 2000,
            epoch_unix_ns: 1,
            run,
        })
        .unwrap();
    let addr = parent.addr().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = stop.clone();
    let h = std::thread::spawn(move || {
        let ctl = Control::new(n);
        while !s.load(Ordering::Acquire) {
            parent.pump(&ctl, &|| 0);
            parent.wait(Duration::from_millis(1));
        }
        (parent, ctl)
    });
    (addr, stop, h)
}

/// Forwards between a node and its coordinator, keeping a copy of every datagram the node
/// sends (what an eavesdropper on the path records), until `stop`. Returns its address (the
/// node's coordinator) and a handle on its node-side socket, to send to the node from there.
fn recording_relay(
    to: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (
    std::net::SocketAddr,
    std::net::UdpSocket,
    std::thread::JoinHandle<Vec<Vec<u8>>>,
) {
    let near = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let far = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    near.set_nonblocking(true).unwrap();
    far.set_nonblocking(true).unwrap();
    let addr = near.local_addr().unwrap();
    let inject = near.try_clone().unwrap();
    let h = std::thread::spawn(move || {
        let (mut node, mut seen) = (None, Vec::new());
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Acquire) {
            while let Ok((len, from)) = near.recv_from(&mut buf) {
                node = Some(from);
                seen.push(buf[..len].to_vec());
                let _ = far.send_to(&buf[..len], to);
            }
            while let Ok((len, _)) = far.recv_from(&mut buf) {
                if let Some(a) = node {
                    let _ = near.send_to(&buf[..len], a);
                }
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        seen
    });
    (addr, inject, h)
}

/// Everything a node of run A sent its coordinator (knocks, hellos), recorded on the path and
/// replayed into run B's coordinator (same job key, job id and size), registers nothing: the
/// hellos are refused and counted, the knocks only draw challenges.
#[test]
fn a_hello_recorded_in_one_run_is_refused_by_the_next() {
    let (job, n) = (0xF7C0_0000_0000_0077u64, 2u32);
    let key = AuthKey::from_bytes([5; 16]);
    // Run A: rank 1 joins through the recording relay (rank 0 never does: the table stays
    // incomplete and rank 1 keeps sending its hello until the timeout).
    let (coord_a, stop_a, a) = launched_coordinator(job, n, &key, [0xA; 16]);
    let (relay, _, recorded) = recording_relay(coord_a, stop_a.clone());
    let mut node = ChildAgent::new(relay, job, 1, n).unwrap();
    node.set_key(Some(key.clone()));
    let e = node
        .join("10.9.9.9:4000".parse().unwrap(), Duration::from_millis(300))
        .unwrap_err();
    assert!(e.contains("addresses missing"), "the challenge was answered: {e}");
    stop_a.store(true, Ordering::Release);
    let (a, _) = a.join().unwrap();
    let recorded = recorded.join().unwrap();
    assert_eq!(a.addresses_known(), 1, "run A took the hello");
    assert!(recorded.len() > 2, "knocks and hellos recorded");
    // Run B: a new run nonce; the recording is replayed from another socket.
    let (coord_b, stop_b, b) = launched_coordinator(job, n, &key, [0xB; 16]);
    let replayer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for d in &recorded {
        replayer.send_to(d, coord_b).unwrap();
        std::thread::sleep(Duration::from_micros(100));
    }
    std::thread::sleep(Duration::from_millis(50));
    stop_b.store(true, Ordering::Release);
    let (b, _) = b.join().unwrap();
    assert_eq!(b.addresses_known(), 0, "a replayed hello registered an address");
    assert_eq!(b.joined(), 0, "a replayed datagram pinned a rank's control address");
    assert!(b.refused_hellos > 0, "refused hellos are counted: {}", b.refused_hellos);
}

/// Once joined, a node and its coordinator seal with the run's session key: a control datagram
/// sealed with another run's session key, or with the bare job key (as every control
/// datagram of a launched run was), is dropped and counted on either side and changes
/// nothing; the same datagram under this run's key is taken.
#[test]
fn a_control_message_sealed_with_another_runs_session_key_is_dropped() {
    let (job, n) = (0xF7C0_0000_0000_0078u64, 1u32);
    let key = AuthKey::from_bytes([6; 16]);
    let run = [0xC; 16];
    let (coord, stop, h) = launched_coordinator(job, n, &key, run);
    let (relay, inject, relayed) = recording_relay(coord, stop.clone());
    let mut node = ChildAgent::new(relay, job, 0, n).unwrap();
    node.set_key(Some(key.clone()));
    let me: std::net::SocketAddr = "10.1.1.1:5000".parse().unwrap();
    let (table, p) = node.join(me, Duration::from_secs(10)).unwrap();
    assert_eq!((table, p.run), (vec![me], run));
    let (this, other) = (key.session(&run), key.session(&[0xD; 16]));
    let seal = |k: &AuthKey, m: &Msg| crate::wire::mac::sealed(Some(k), &encode(job, 0, m));
    // To the node, from its coordinator's address: a Stop of another run, then under the job
    // key, then this run's.
    let ctl = Control::new(n);
    let to_node = node.sock.local_addr().unwrap();
    let before = node.invalid;
    for k in [&other, &key] {
        inject.send_to(&seal(k, &Msg::Stop), to_node).unwrap();
    }
    std::thread::sleep(Duration::from_millis(20));
    assert!(!node.pump(&ctl, false), "a Stop of another run stopped the node");
    assert_eq!(node.invalid, before + 2, "dropped and counted at the node");
    inject.send_to(&seal(&this, &Msg::Stop), to_node).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(node.pump(&ctl, false), "this run's Stop is taken");
    // To the coordinator, through the relay (the control address it pinned): a death report
    // of another run and one under the job key; then this run's clock report.
    for k in [&other, &key] {
        node.sock.send_to(&seal(k, &Msg::Dead { iter: 3 }), relay).unwrap();
    }
    let clock = Msg::Clock {
        offset: 7,
        uncertainty: 1,
    };
    node.sock.send_to(&seal(&this, &clock), relay).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Release);
    let (parent, pctl) = h.join().unwrap();
    let _ = relayed.join();
    assert_eq!(parent.clocks[0], Some((7, 1)), "this run's report is taken");
    assert!(
        !pctl.boards[0].dead.load(Ordering::Acquire),
        "a foreign death report was taken"
    );
    assert_eq!(parent.invalid, 2, "both foreign reports counted");
}

/// A node that has heard from its parent but has no operation in flight (nothing to report)
/// still says it is alive at least every `KEEPALIVE`: a parent that counts a node crashed after
/// 300 ms of silence (`bench --join`) counted live idle nodes crashed.
#[test]
fn an_idle_node_that_joined_keeps_its_parent_hearing_from_it() {
    use super::child::KEEPALIVE;
    let parent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    parent.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
    let job = 0x51;
    let mut child = ChildAgent::new(parent.local_addr().unwrap(), job, 0, 1).unwrap();
    let ctl = Control::new(1);
    // The child says hello until answered; the parent answers to the address it came from.
    let mut buf = [0u8; 2048];
    let t = Instant::now();
    let child_addr = loop {
        child.pump(&ctl, false);
        if let Ok((_, a)) = parent.recv_from(&mut buf) {
            break a;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "no hello from the child");
    };
    let allow = encode(job, 0, &Msg::Allow { allowed: 0 });
    parent
        .send_to(&crate::wire::mac::sealed(None, &allow), child_addr)
        .unwrap();
    let t = Instant::now();
    while !child.heard() {
        child.pump(&ctl, false);
        assert!(t.elapsed() < Duration::from_secs(5), "the parent's answer was not read");
    }
    while parent.recv_from(&mut buf).is_ok() {}
    let start = Instant::now();
    let mut words = 0;
    while start.elapsed() < KEEPALIVE * 5 {
        child.pump(&ctl, false);
        while parent.recv_from(&mut buf).is_ok() {
            words += 1;
        }
    }
    // About one word per KEEPALIVE once heard.
    assert!((3..=6).contains(&words), "{words} datagrams in {:?}", KEEPALIVE * 5);
}

/// A loopback socket standing in for a child's control socket (reads time out after 2 s).
fn raw_child() -> std::net::UdpSocket {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s
}

/// The coordinator serves what came until `done` says so (at most 5 s).
fn serve_until(parent: &mut ParentAgent, ctl: &Control, done: impl Fn(&ParentAgent) -> bool) {
    let t = Instant::now();
    while !done(parent) {
        assert!(t.elapsed() < Duration::from_secs(5), "the coordinator heard nothing");
        parent.wait(Duration::from_millis(5));
        parent.serve(ctl, &|| 0);
    }
}

/// Where asked to ([`ParentAgent::set_table_to_all`]: a group's rendezvous), the address that
/// completes the table sends it to every child that joined, not only to the one whose address
/// it was: the others had it only at their next hello, and never when the coordinator stopped
/// serving meanwhile (a group's rank 0 that leaves as soon as it joined). Not asked (bench's
/// coordinator), only the last child gets it, as before: no burst of children × chunks.
#[test]
fn the_last_address_sends_the_table_to_every_child_that_joined() {
    for to_all in [true, false] {
        last_address_sends_the_table(to_all);
    }
}

/// A loopback coordinator of `job` for `n` children with parameters (no launch), sending the
/// table to all at the last address where `to_all`; its address.
fn table_server(job: u64, n: u32, to_all: bool) -> (ParentAgent, std::net::SocketAddr) {
    let mut parent = ParentAgent::bind("127.0.0.1:0".parse().unwrap(), job, n).unwrap();
    parent.set_table_to_all(to_all);
    parent.set_params(JobParams {
        o_ns: 1000,
        l_ns: 2000,
        epoch_unix_ns: 1,
        run: [5; 16],
    });
    let at = parent.addr().unwrap();
    (parent, at)
}

fn last_address_sends_the_table(to_all: bool) {
    let (job, n) = (0x7AB1E, 2u32);
    let (mut parent, at) = table_server(job, n, to_all);
    let ctl = Control::new(n);
    let kids = [raw_child(), raw_child()];
    let hello = |r: u32| {
        let me = kids[r as usize].local_addr().unwrap();
        let m = crate::wire::mac::sealed(None, &encode(job, r, &Msg::Join { addr: me, shape: 0 }));
        kids[r as usize].send_to(&m, at).unwrap();
    };
    hello(0);
    serve_until(&mut parent, &ctl, |p| p.joined() == 1);
    hello(1);
    serve_until(&mut parent, &ctl, |p| p.joined() == 2);
    let want: Vec<_> = kids.iter().map(|k| k.local_addr().unwrap()).collect();
    for (r, kid) in kids.iter().enumerate() {
        // Child 0 said hello once, before the table was complete, and never again.
        let mut buf = [0u8; 2048];
        if r == 0 && !to_all {
            kid.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
            assert!(kid.recv(&mut buf).is_err(), "a table to child 0 unasked");
            continue;
        }
        let len = kid
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("child {r}: no table: {e}"));
        let body = crate::wire::mac::opened(None, &buf[..len]).unwrap();
        let (first, addrs, _) = crate::wire::join::decode(body, job, n).unwrap();
        assert_eq!((first, addrs), (0, want.clone()), "child {r}");
    }
}

/// A coordinator that stops serving says so: a child still waiting for the table fails at once
/// and says why, not at its timeout (here 30 s); a child timing its clock stops probing.
#[test]
fn a_coordinator_that_stops_serving_says_so_to_its_children() {
    let (job, n) = (0xFA2E, 3u32);
    let mut parent = ParentAgent::bind("127.0.0.1:0".parse().unwrap(), job, n).unwrap();
    parent
        .launch(JobParams {
            o_ns: 1000,
            l_ns: 2000,
            epoch_unix_ns: 1,
            run: [6; 16],
        })
        .unwrap();
    let at = parent.addr().unwrap();
    let ctl = Control::new(n);
    let joining = std::thread::spawn(move || {
        let mut a = ChildAgent::new(at, job, 1, n).unwrap();
        let t = Instant::now();
        let e = a.join("127.0.0.1:9".parse().unwrap(), Duration::from_secs(30));
        (e.map(|_| ()), t.elapsed())
    });
    // Rank 1 joined; 0 and 2 never do.
    serve_until(&mut parent, &ctl, |p| p.joined() == 1);
    parent.farewell();
    let (e, took) = joining.join().unwrap();
    let e = e.unwrap_err();
    assert!(e.contains("stopped serving") && e.contains("3 of 3 addresses"), "{e}");
    assert!(took < Duration::from_secs(20), "failed after {took:?}");
    // A child timing its clock against a coordinator that says farewell after the first
    // probe sends no more probes (it sent ten, 20 ms apart, before giving up on silence),
    // and no clock report to a coordinator that is gone.
    let coord = raw_child();
    let mut child = ChildAgent::new(coord.local_addr().unwrap(), job, 1, n).unwrap();
    let timing = std::thread::spawn(move || child.sync_clock(&|| 0, 100));
    let mut buf = [0u8; 2048];
    let (_, from) = coord.recv_from(&mut buf).unwrap();
    let stop = crate::wire::mac::sealed(None, &encode(job, 0, &Msg::Stop));
    coord.send_to(&stop, from).unwrap();
    assert_eq!(timing.join().unwrap(), (0, u64::MAX / 2));
    // Probes sent before the STOP came (20 ms apart: a loaded machine may take longer to
    // deliver it) are fine; a clock report is not.
    coord.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    while let Ok(len) = coord.recv(&mut buf) {
        let m = crate::wire::mac::opened(None, &buf[..len]).and_then(|b| crate::wire::control::decode(b, job, n));
        assert!(matches!(m, Some((1, Msg::Ping { .. }))), "after the farewell: {m:?}");
    }
}

/// A farewell sends the complete table several times, then the STOP several times: a child
/// whose copy was lost gets one before any STOP, and a child that has the whole table succeeds
/// however many STOPs follow.
#[test]
fn a_farewell_repeats_the_table_before_its_stops_and_a_child_with_the_table_succeeds() {
    let (job, n) = (0xFA2E, 2u32);
    let (mut parent, at) = table_server(job, n, true);
    let ctl = Control::new(n);
    let raw = raw_child();
    let me = raw.local_addr().unwrap();
    let m = crate::wire::mac::sealed(None, &encode(job, 0, &Msg::Join { addr: me, shape: 0 }));
    raw.send_to(&m, at).unwrap();
    serve_until(&mut parent, &ctl, |p| p.joined() == 1);
    let mut child = ChildAgent::new(at, job, 1, n).unwrap();
    let joining = std::thread::spawn(move || child.rendezvous("127.0.0.1:9".parse().unwrap(), Duration::from_secs(30)));
    serve_until(&mut parent, &ctl, |p| p.joined() == 2);
    let mut buf = [0u8; 2048];
    // The raw child's copy from the last address is "lost".
    let _ = raw.recv(&mut buf).unwrap();
    parent.farewell();
    let (addrs, _) = joining.join().unwrap().expect("a child with the whole table succeeds");
    assert_eq!(addrs.len(), 2);
    let (mut tables, mut stops) = (0, 0);
    raw.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    while let Ok(len) = raw.recv(&mut buf) {
        let body = crate::wire::mac::opened(None, &buf[..len]).unwrap();
        if crate::wire::join::decode(body, job, n).is_some() {
            assert_eq!(stops, 0, "a table after a STOP");
            tables += 1;
        } else {
            assert!(matches!(
                crate::wire::control::decode(body, job, n),
                Some((0, Msg::Stop))
            ));
            stops += 1;
        }
    }
    assert!(tables >= 2 && stops >= 2, "{tables} tables, {stops} stops");
}

/// A coordinator on this host (a loopback address) shares the node's clocks: a probe whose
/// interval holds 0 moves nothing (its midpoint is the two ways' asymmetry, not an offset),
/// and the uncertainty is still the probe's half round trip; an interval that does not hold
/// 0 (a wall clock stepped between the two alignments) is applied. The coordinator here
/// stamps its answers at the probe's own send time (the interval's edge: it holds 0), and
/// 10 s after or before it.
#[test]
fn a_coordinator_on_this_host_moves_the_clock_only_when_the_interval_excludes_0() {
    let (job, n) = (0xC10C, 2u32);
    const S10: i64 = 10_000_000_000;
    let base = Instant::now();
    // The node's clock, 20 s in (so that 10 s before a stamp is still a time).
    let clock = move || 2 * S10 as u64 + base.elapsed().as_nanos() as u64;
    for shift in [0i64, S10, -S10] {
        let coord = raw_child();
        let mut child = ChildAgent::new(coord.local_addr().unwrap(), job, 1, n).unwrap();
        let answering = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            // Every probe answered, until the clock report comes.
            loop {
                let (len, from) = coord.recv_from(&mut buf).unwrap();
                let m =
                    crate::wire::mac::opened(None, &buf[..len]).and_then(|b| crate::wire::control::decode(b, job, n));
                match m {
                    Some((1, Msg::Ping { t1 })) => {
                        let t2 = t1.checked_add_signed(shift).unwrap();
                        let pong = crate::wire::mac::sealed(None, &encode(job, 0, &Msg::Pong { t1, t2 }));
                        coord.send_to(&pong, from).unwrap();
                    }
                    Some((1, Msg::Clock { offset, uncertainty })) => return (offset, uncertainty),
                    m => panic!("{m:?}"),
                }
            }
        });
        let (offset, unc) = child.sync_clock(&clock, 5);
        assert_eq!(
            answering.join().unwrap(),
            (offset, unc),
            "the report is what was applied"
        );
        assert!(unc < 1_000_000_000, "answered: {unc}");
        if shift == 0 {
            assert_eq!(offset, 0, "the interval holds 0");
        } else {
            // The midpoint: the shift less half the round trip (to a nanosecond of rounding).
            let want = shift - unc as i64;
            assert!(
                (offset - want).abs() <= 1,
                "shift {shift}: offset {offset}, want {want}"
            );
        }
    }
}

/// Loopback addresses, v4, v6 and v4-mapped, are this host's; an address of the documentation
/// range (no host has it) is not.
#[test]
fn a_loopback_or_bindable_address_is_this_hosts() {
    use super::clock::on_this_host;
    for ip in ["127.0.0.1", "127.3.4.5", "::1", "::ffff:127.0.0.1"] {
        assert!(on_this_host(ip.parse().unwrap()), "{ip}");
    }
    assert!(!on_this_host("192.0.2.7".parse().unwrap()));
}
