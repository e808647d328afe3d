use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use super::*;
use crate::transport::udp::{UdpConfig, UdpTransport};
use crate::transport::{Delivery, Transport};

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ftcoll-rundir-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn run_ids_are_checked_and_name_distinct_directories() {
    assert!(RunId::new("").unwrap_err().contains("--run-id"));
    assert!(RunId::new(&"x".repeat(RUN_ID_MAX + 1)).is_err());
    assert!(RunId::new("a\nb").unwrap_err().contains("control"));
    let plain = RunId::new("slurm-42.0").unwrap();
    assert_eq!(plain.dir_name(), "run-slurm-42.0");
    // Replaced bytes: a hash of the whole id tells apart ids that clean up alike.
    let (a, b) = (RunId::new("a/b").unwrap(), RunId::new("a_b").unwrap());
    assert_ne!(a.dir_name(), b.dir_name());
    assert!(!a.dir_name().contains('/'), "{}", a.dir_name());
    for id in ["..", "../x", "."] {
        let d = RunId::new(id).unwrap().dir_name();
        assert!(d.starts_with("run-") && !d.contains('/'), "{d}");
    }
    let long = RunId::new(&"y".repeat(200)).unwrap().dir_name();
    assert!(long.len() < 100, "{long}");
}

#[test]
fn the_run_directory_is_private_and_a_foreign_one_is_refused() {
    let base = tmpdir("private");
    let run = RunId::new("r").unwrap();
    let d = RunDir::open(&base, &run, None).unwrap();
    let mode = std::fs::metadata(d.path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "mode {mode:o}");
    // Opened again by another process of the run: the same directory.
    RunDir::open(&base, &run, None).unwrap();
    // A directory others may write, or a symlink planted in its place, is refused.
    let open_to_all = RunId::new("open").unwrap();
    let p = base.join(open_to_all.dir_name());
    std::fs::create_dir(&p).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = RunDir::open(&base, &open_to_all, None).unwrap_err();
    assert!(e.contains("not a private directory") && !e.contains('\n'), "{e}");
    let planted = RunId::new("planted").unwrap();
    std::os::unix::fs::symlink(d.path(), base.join(planted.dir_name())).unwrap();
    let e = RunDir::open(&base, &planted, None).unwrap_err();
    assert!(e.contains("not a private directory"), "{e}");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn files_are_sealed_and_bound_to_their_run_rank_and_name() {
    let base = tmpdir("sealed");
    let key = AuthKey::from_bytes([5; 16]);
    let run = RunId::new("r").unwrap();
    let d = RunDir::open(&base, &run, Some(key.clone())).unwrap();
    d.publish("x-1.f", 1, "hello\n").unwrap();
    assert_eq!(d.read("x-1.f", 1), Found::Body("hello\n".into()));
    assert_eq!(d.read("x-2.f", 2), Found::Missing);
    // Claimed for another rank, or moved to another name: the tag does not verify.
    assert!(matches!(d.read("x-1.f", 2), Found::Bad(e) if e.contains("bad tag")));
    std::fs::copy(d.path().join("x-1.f"), d.path().join("x-3.f")).unwrap();
    assert!(matches!(d.read("x-3.f", 1), Found::Bad(e) if e.contains("x-3.f: bad tag")));
    // An altered body.
    let text = std::fs::read_to_string(d.path().join("x-1.f")).unwrap();
    std::fs::write(d.path().join("x-1.f"), text.replace("hello", "hallo")).unwrap();
    assert!(matches!(d.read("x-1.f", 1), Found::Bad(e) if e.contains("bad tag")));
    // Without a key nothing is tagged and the body is read as is.
    let plain = RunDir::open(&base, &RunId::new("p").unwrap(), None).unwrap();
    plain.publish("y-0.f", 0, "a\n").unwrap();
    assert_eq!(std::fs::read_to_string(plain.path().join("y-0.f")).unwrap(), "a\n");
    assert_eq!(plain.read("y-0.f", 0), Found::Body("a\n".into()));
    // A symlink in place of a file is not followed.
    std::os::unix::fs::symlink("/etc/hostname", plain.path().join("z-0.f")).unwrap();
    assert!(matches!(plain.read("z-0.f", 0), Found::Bad(_)));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn the_launchers_run_id_is_read_from_slurm_or_pmix() {
    // Read only; the test process's own environment decides which, if any, applies.
    let slurm = std::env::var("SLURM_JOB_ID").is_ok() && std::env::var("SLURM_STEP_ID").is_ok();
    let pmix = std::env::var("PMIX_NAMESPACE").is_ok();
    match RunId::from_env() {
        Some(r) if slurm => assert!(r.as_str().starts_with("Slurm:"), "{r:?}"),
        Some(r) if pmix => assert!(r.as_str().starts_with("PMIx:"), "{r:?}"),
        Some(r) => assert_eq!(r.source(), "Open MPI"),
        None => {
            assert!(!slurm && !pmix);
            let e = RunId::resolve(None, true, "node --rendezvous").unwrap_err();
            assert!(e.contains("--run-id") && !e.contains('\n'), "{e}");
            assert_eq!(RunId::resolve(None, false, "x").unwrap(), RunId::default_unkeyed());
        }
    }
    assert_eq!(RunId::resolve(Some("given"), true, "x").unwrap().as_str(), "given");
}

/// Two launches with the same key and job but different run ids: a datagram recorded in one
/// is a bad MAC in the other; in its own run it is delivered.
#[test]
fn a_datagram_replayed_into_another_run_fails_its_mac() {
    let key = AuthKey::from_bytes(*b"long-term job ke");
    let (a, b) = (RunId::new("launch-A").unwrap(), RunId::new("launch-B").unwrap());
    assert_ne!(a.session_key(&key), b.session_key(&key));
    assert_eq!(a.session_key(&key), RunId::new("launch-A").unwrap().session_key(&key));
    let cfg = |run: &RunId| UdpConfig {
        job: 9,
        auth: Some(run.session_key(&key)),
        ..UdpConfig::default()
    };
    // Rank 1's address is a plain socket: it records what rank 0 of run A sends.
    let recorder = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let zero = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let peers: Vec<SocketAddr> = vec![zero.local_addr().unwrap(), recorder.local_addr().unwrap()];
    let mut sender = UdpTransport::from_bound(0, &peers, cfg(&a), zero).unwrap();
    let now = Instant::now();
    sender.send(1, b"run A's message", now).unwrap();
    sender.poll(now, &mut |_| {}).unwrap();
    recorder.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 2048];
    let (len, _) = recorder.recv_from(&mut buf).unwrap();
    let recorded = &buf[..len];
    let replay = |run: &RunId| {
        let at = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let peers = vec![peers[0], at.local_addr().unwrap()];
        let mut t = UdpTransport::from_bound(1, &peers, cfg(run), at).unwrap();
        let mut got = Vec::new();
        t.receive_datagram(recorded, peers[0], Instant::now(), &mut |d| {
            if let Delivery::Message { bytes, .. } = d {
                got.push(bytes.to_vec());
            }
        });
        (got, t.stats().bad_mac)
    };
    assert_eq!(replay(&a), (vec![b"run A's message".to_vec()], 0));
    assert_eq!(replay(&b), (vec![], 1));
}

#[test]
fn from_bound_refuses_a_socket_bound_elsewhere() {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let other: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let e = UdpTransport::from_bound(0, &[other, other], UdpConfig::default(), s).unwrap_err();
    assert!(e.to_string().contains("not bound"), "{e}");
}
