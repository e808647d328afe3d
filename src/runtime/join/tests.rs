use super::*;

use std::io::{BufRead, BufReader};

const JOB: u64 = 77;

fn gate(key: &AuthKey, handshake: Duration) -> (TcpListener, Gate) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let g = Gate {
        job: JOB,
        n: 2,
        key: Some(key.clone()),
        run: crate::transport::udp::auth::fresh_nonce().unwrap(),
        timeout: Duration::from_secs(20),
        handshake,
        cap: 16,
    };
    (l, g)
}

/// A raw connection that has read rank 0's challenge.
fn challenged(to: SocketAddr) -> (TcpStream, Nonces) {
    let s = TcpStream::connect(to).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut l = String::new();
    r.read_line(&mut l).unwrap();
    (s, join_line::parse_challenge(&l).expect("a challenge"))
}

/// Waits until rank 0 closes `s` (what a refused peer sees).
fn until_closed(mut s: TcpStream) {
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut b = [0u8; 64];
    while matches!(s.read(&mut b), Ok(k) if k > 0) {}
}

fn good_nodes(to: SocketAddr, key: &AuthKey) -> Vec<std::thread::JoinHandle<(SealedReader, SealedWriter<Sender>)>> {
    (0..2)
        .map(|r| {
            let key = key.clone();
            std::thread::spawn(move || {
                let (rd, wr, _) = connect(to, Duration::from_secs(20), Some(&key), JOB, r).unwrap();
                (rd, wr)
            })
        })
        .collect()
}

#[test]
fn bad_handshakes_are_refused_and_counted_and_the_run_still_joins() {
    let key = AuthKey::from_bytes([3; 16]);
    // A hello recorded in an earlier run with the same key.
    let (l0, g0) = gate(&key, Duration::from_secs(5));
    let to0 = l0.local_addr().unwrap();
    let spy = std::thread::spawn(move || {
        let (mut s, n) = challenged(to0);
        let h = join_line::hello(Some(&key), JOB, 1, &n);
        writeln!(s, "{h}").unwrap();
        let (_, _, _) = connect(to0, Duration::from_secs(20), Some(&key), JOB, 0).unwrap();
        h
    });
    let (old, _) = accept(&l0, &g0).unwrap();
    assert_eq!(old.len(), 2);
    let recorded = spy.join().unwrap();

    let key = AuthKey::from_bytes([3; 16]);
    let (l, g) = gate(&key, Duration::from_secs(5));
    let to = l.local_addr().unwrap();
    let attackers = std::thread::spawn(move || {
        // An oversized line.
        let (mut s, _) = challenged(to);
        let _ = s.write_all(&[b'x'; 4 * MAX_HANDSHAKE_LINE]);
        until_closed(s);
        // A hello under the wrong key.
        let (mut s, n) = challenged(to);
        writeln!(
            s,
            "{}",
            join_line::hello(Some(&AuthKey::from_bytes([4; 16])), JOB, 0, &n)
        )
        .unwrap();
        until_closed(s);
        // The replayed hello.
        let (mut s, _) = challenged(to);
        writeln!(s, "{recorded}").unwrap();
        until_closed(s);
        // Not our protocol at all, then a peer that leaves mid-line.
        let (mut s, _) = challenged(to);
        s.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        until_closed(s);
        let (mut s, _) = challenged(to);
        s.write_all(b"hello 1 ").unwrap();
        drop(s);
    });
    let gatekeeper = std::thread::spawn(move || accept(&l, &g).map(|(s, r)| (s.len(), r)));
    attackers.join().unwrap();
    let nodes = good_nodes(to, &key);
    let (joined, refused) = gatekeeper.join().unwrap().unwrap();
    assert_eq!(joined, 2);
    for n in nodes {
        n.join().unwrap();
    }
    assert_eq!(refused.too_long, 1, "{refused}");
    assert_eq!(refused.bad_hello, 3, "{refused}");
    // The last one is closed, or (if its close is seen after the good nodes joined) cut.
    assert_eq!(refused.closed + refused.too_slow, 1, "{refused}");
    assert_eq!(refused.total(), 5, "{refused}");
}

#[test]
fn a_slow_loris_does_not_hold_up_the_others_and_is_cut_off() {
    let key = AuthKey::from_bytes([3; 16]);
    // Every node must join within 20 s; a handshake may take far longer: served one at a
    // time, the good nodes would never get in.
    let (l, mut g) = gate(&key, Duration::from_secs(600));
    g.timeout = Duration::from_secs(20);
    let to = l.local_addr().unwrap();
    let gatekeeper = std::thread::spawn(move || accept(&l, &g));
    let (mut slow, _) = challenged(to);
    slow.write_all(b"hello 0 0123").unwrap(); // ... and never the rest.
    let silent = TcpStream::connect(to).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let nodes = good_nodes(to, &key);
    let (streams, refused) = gatekeeper.join().unwrap().unwrap();
    let mut ends: Vec<_> = nodes.into_iter().map(|n| n.join().unwrap()).collect();
    assert_eq!(refused.too_slow, 2, "{refused}");
    assert_eq!(refused.total(), 2, "{refused}");
    until_closed(slow);
    until_closed(silent);

    // The sealed lines both ways; rank 0 reads a line whose seal fails as one bad (empty)
    // line, then the end.
    let mut by_rank: Vec<Stream> = streams;
    by_rank.sort_by_key(|s| s.rank);
    let (node0_rd, node0_wr) = &mut ends[0];
    let mut st0 = by_rank.remove(0);
    assert_eq!(st0.rank, 0);
    writeln!(node0_wr, "ready").unwrap();
    writeln!(st0.send, "go").unwrap();
    let mut got = String::new();
    BufReader::new(&mut *node0_rd).read_line(&mut got).unwrap();
    assert_eq!(got, "go\n");
    node0_wr.inner.0.write_all(b"ready\n").unwrap(); // Unsealed.
    let mut all = String::new();
    st0.lines.read_to_string(&mut all).unwrap();
    assert_eq!(all, "ready\n\n");
}

#[test]
fn lines_are_bounded() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    let mut r = LineReader::new(s);
    c.write_all(b"short\nlonger line\n").unwrap();
    assert_eq!(r.line(8, None), Ok("short\n".into()));
    assert_eq!(r.line(8, None), Err(LineError::TooLong));
    let mut r2 = {
        let mut c2 = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        c2.write_all(b"no end").unwrap();
        c = c2;
        LineReader::new(s)
    };
    let soon = Instant::now() + Duration::from_millis(50);
    assert_eq!(r2.line(64, Some(soon)), Err(LineError::TooSlow));
    drop(c);
    assert_eq!(r2.line(64, None), Err(LineError::Closed));
}
