//! The rendezvous directory of `ftcoll node --rendezvous`: per-run files, tags, kept sockets.

use std::net::IpAddr;
use std::time::Duration;

use super::rendezvous;
use crate::transport::run_dir::{RunDir, RunId};
use crate::wire::mac::AuthKey;

fn base(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ftcoll-rdv-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

const IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

fn run(base: &std::path::Path, id: &str, key: Option<AuthKey>) -> RunDir {
    RunDir::open(base, &RunId::new(id).unwrap(), key).unwrap()
}

#[test]
fn a_leftover_address_of_another_run_is_not_used() {
    let b = base("leftover");
    let key = AuthKey::from_bytes([1; 16]);
    // Run A's rank 1 published, then ended; its port is free again.
    let a = run(&b, "A", Some(key.clone()));
    drop(rendezvous(&a, 1, 2, IP, Duration::ZERO).unwrap_err());
    assert!(a.path().join("node-1.addr").exists());
    // The old layout, straight in DIR, is not read either.
    std::fs::write(b.join("node-1.addr"), "127.0.0.1:9\n").unwrap();
    let e = rendezvous(&run(&b, "B", Some(key)), 0, 2, IP, Duration::from_millis(50)).unwrap_err();
    assert!(e.contains("1 of 2 nodes did not publish"), "{e}");
    let _ = std::fs::remove_dir_all(&b);
}

#[test]
fn an_address_with_a_bad_tag_is_not_used_and_the_timeout_names_it() {
    let b = base("badtag");
    let d = run(&b, "R", Some(AuthKey::from_bytes([1; 16])));
    // Rank 1's file sealed with another key, then one with no tag at all.
    let forger = run(&b, "R", Some(AuthKey::from_bytes([2; 16])));
    forger.publish("node-1.addr", 1, "127.0.0.1:9\n").unwrap();
    let e = rendezvous(&d, 0, 2, IP, Duration::from_millis(50)).unwrap_err();
    assert!(e.contains("1 of 2") && e.contains("node-1.addr: bad tag"), "{e}");
    std::fs::write(d.path().join("node-1.addr"), "127.0.0.1:9\n").unwrap();
    let e = rendezvous(&d, 0, 2, IP, Duration::from_millis(50)).unwrap_err();
    assert!(e.contains("node-1.addr: no tag"), "{e}");
    // A sealed file that does not parse is waited on too, and named.
    d.publish("node-1.addr", 1, "not an address\n").unwrap();
    let e = rendezvous(&d, 0, 2, IP, Duration::from_millis(50)).unwrap_err();
    assert!(e.contains("not IP:port"), "{e}");
    let _ = std::fs::remove_dir_all(&b);
}

#[test]
fn the_published_port_stays_bound_until_the_transport_uses_it() {
    let b = base("kept");
    let d = run(&b, "K", Some(AuthKey::from_bytes([1; 16])));
    let (sock, peers) = std::thread::scope(|s| {
        let other = s.spawn(|| rendezvous(&d, 1, 2, IP, Duration::from_secs(5)).unwrap());
        let mine = rendezvous(&d, 0, 2, IP, Duration::from_secs(5)).unwrap();
        drop(other.join().unwrap());
        mine
    });
    // The address published is the socket's, and nobody else can bind it meanwhile.
    assert_eq!(sock.local_addr().unwrap(), peers[0]);
    assert!(std::net::UdpSocket::bind(peers[0]).is_err(), "{} was free", peers[0]);
    let cfg = crate::transport::udp::UdpConfig::default();
    let t = crate::transport::udp::UdpTransport::from_bound(0, &peers, cfg, sock).unwrap();
    assert_eq!(t.local_addr().unwrap(), peers[0]);
    assert!(std::net::UdpSocket::bind(peers[0]).is_err());
    let _ = std::fs::remove_dir_all(&b);
}
