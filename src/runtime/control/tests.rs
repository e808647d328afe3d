//! The control agents over loopback.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::child::{REPORT_EVERY, report_due};
use super::{ChildAgent, ParentAgent};
use crate::runtime::board::Control;
use crate::wire::conn::{ConnInfo, sample as conn};
use crate::wire::control::Msg;
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
