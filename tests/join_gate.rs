//! `agree --join`: rank 0's gate for the nodes' TCP streams, end to end. Peers that send an
//! oversized line, never finish their hello (a slow loris), answer with a wrong MAC or replay
//! a hello of an earlier run are refused and counted while the real nodes join, and the run
//! completes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{ALONE, free_port};
use ftcoll::transport::udp::auth::AuthKey;
use ftcoll::wire::join_line::{self, Nonces};

const KEY: &str = "000102030405060708090a0b0c0d0e0f";

fn node(join: &str, rank: u32) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ftcoll"));
    c.args([
        "agree",
        "--join",
        join,
        "--nodes",
        "2",
        "--warmup",
        "5",
        "--agreements",
        "50",
        "--seed",
        "7",
    ])
    .args(["--join-timeout-ms", "30000", "--rank", &rank.to_string()])
    .env("FTCOLL_KEY", KEY);
    c
}

/// A connection to rank 0 that has read its challenge (retried until rank 0 listens).
fn challenged(to: SocketAddr) -> (TcpStream, Nonces) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let s = loop {
        match TcpStream::connect(to) {
            Ok(s) => break s,
            Err(e) if Instant::now() > deadline => panic!("rank 0 never listened: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let mut l = String::new();
    if let Err(e) = BufReader::new(s.try_clone().unwrap()).read_line(&mut l) {
        panic!(
            "no challenge from {to} ({:?} -> {:?}): {e}",
            s.local_addr(),
            s.peer_addr()
        );
    }
    let n = join_line::parse_challenge(&l).unwrap_or_else(|| panic!("not a challenge: {l:?}"));
    (s, n)
}

fn until_closed(mut s: TcpStream) {
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut b = [0u8; 64];
    while matches!(s.read(&mut b), Ok(k) if k > 0) {}
}

/// Run alone: beside the other test of this file, the first connection to rank 0's gate was
/// reset before its challenge in about 1 run in 30-50 (rank 0 alive, nothing on its stderr),
/// never in 30 runs alone; the cause is not found (see docs/testing.md).
#[test]
fn bad_peers_are_refused_and_counted_and_the_run_completes() {
    let _alone = ALONE.write().unwrap_or_else(|e| e.into_inner());
    let join = format!("127.0.0.1:{}", free_port());
    let to: SocketAddr = join.parse().unwrap();
    let root = node(&join, 0)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let key = AuthKey::from_hex(KEY).unwrap();
    // The run's job id (from its seed): the forged hellos below are right in all but their MAC.
    let job = ftcoll::experiment::launch::job::agree(7);
    // An oversized first line.
    let (mut s, _) = challenged(to);
    let _ = s.write_all(&vec![b'x'; 1 << 20]);
    until_closed(s);
    // A wrong MAC.
    let (mut s, n) = challenged(to);
    writeln!(
        s,
        "{}",
        join_line::hello(Some(&AuthKey::from_bytes([9; 16])), job, 1, &n)
    )
    .unwrap();
    until_closed(s);
    // A hello sealed with the right key for another run's challenge (as recorded there).
    let (mut s, n) = challenged(to);
    let earlier = Nonces {
        conn: [1; 16],
        run: n.run,
    };
    writeln!(s, "{}", join_line::hello(Some(&key), job, 1, &earlier)).unwrap();
    until_closed(s);
    // A slow loris: half a hello, then nothing, while the real node joins.
    let (mut slow, _) = challenged(to);
    slow.write_all(b"hello 1 0001").unwrap();
    let mut other = node(&join, 1)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = root.wait_with_output().unwrap();
    let _ = other.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["agreements"], 55, "{v}");
    assert_eq!(v["disagreements"], 0, "{v}");
    assert_eq!(v["refused_streams"], 4, "{v}");
    let line = err
        .lines()
        .find(|l| l.contains("rank 0's streams"))
        .unwrap_or_else(|| panic!("no refusals said: {err}"));
    assert!(line.contains("4 refused"), "{line}");
    assert!(
        line.contains("bad hello 2") && line.contains("too long 1") && line.contains("too slow 1"),
        "{line}"
    );
    until_closed(slow);
}

#[test]
fn a_keyed_bench_join_run_seals_its_datagrams_with_the_session_from_rank_0s_table() {
    let _alone = ALONE.write().unwrap_or_else(|e| e.into_inner());
    let join = format!("127.0.0.1:{}", free_port());
    let common = |rank: u32| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ftcoll"));
        c.args(["bench", "--join", &join, "--rank", &rank.to_string(), "--nodes", "3"])
            .args([
                "--iterations",
                "100",
                "--warmup",
                "10",
                "--poll",
                "blocking",
                "--no-model",
            ])
            .args(["--o-ns", "1000", "--L-ns", "2000", "--join-timeout-ms", "20000"])
            .env("FTCOLL_KEY", KEY);
        c
    };
    let others: Vec<_> = (1..3)
        .map(|r| common(r).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap())
        .collect();
    let out = common(0).arg("--json").output().unwrap();
    for c in others {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("NOT authenticated"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["measured_ops"], 100, "{v}");
    assert_eq!(v["violations"], 0, "{v}");
    assert_eq!(v["timeouts"], 0, "{v}");
}
