use super::*;

fn nonces(c: u8, r: u8) -> Nonces {
    Nonces {
        conn: [c; NONCE_LEN],
        run: [r; NONCE_LEN],
    }
}

#[test]
fn a_hello_answers_only_its_own_challenge() {
    let key = AuthKey::from_bytes([5; 16]);
    let n = nonces(1, 2);
    assert_eq!(parse_challenge(&challenge(&n)), Some(n));
    let h = hello(Some(&key), 9, 3, &n);
    assert!(h.len() < MAX_HANDSHAKE_LINE);
    assert_eq!(check_hello(&h, Some(&key), 9, 4, &n), Some(3));
    assert_eq!(check_hello(&format!("{h}\n"), Some(&key), 9, 4, &n), Some(3));
    assert_eq!(
        check_hello(&h, Some(&key), 9, 4, &nonces(7, 2)),
        None,
        "another connection"
    );
    assert_eq!(check_hello(&h, Some(&key), 9, 4, &nonces(1, 7)), None, "another run");
    assert_eq!(check_hello(&h, Some(&key), 8, 4, &n), None, "another job");
    assert_eq!(check_hello(&h, Some(&key), 9, 3, &n), None, "rank out of range");
    assert_eq!(check_hello(&h, Some(&AuthKey::from_bytes([6; 16])), 9, 4, &n), None);
    assert_eq!(
        check_hello(&h.replace(" 3 ", " 2 "), Some(&key), 9, 4, &n),
        None,
        "a forged rank"
    );
    assert_eq!(check_hello(&h.replace(" 3 ", " 03 "), Some(&key), 9, 4, &n), None);
    assert_eq!(check_hello(&h, None, 9, 4, &n), None, "keyed, at an unkeyed rank 0");
    assert_eq!(
        check_hello(&hello(None, 9, 1, &n), Some(&key), 9, 4, &n),
        None,
        "unkeyed, at a keyed rank 0"
    );
    assert_eq!(check_hello(&hello(None, 9, 1, &n), None, 9, 4, &n), Some(1));
    for bad in [
        "",
        "hello",
        "hello 1",
        "hello x -",
        "hello 1 - extra",
        "ready",
        "challenge 00 00",
    ] {
        assert_eq!(check_hello(bad, None, 9, 4, &n), None, "{bad:?}");
        assert_eq!(parse_challenge(bad), None, "{bad:?}");
    }
}

#[test]
fn sealed_lines_open_once_in_order_one_way_on_one_stream() {
    let key = AuthKey::from_bytes([5; 16]);
    let n = nonces(1, 2);
    let mut tx = LineSeal::new(Some(key.clone()), n, Direction::ToRoot);
    let lines: Vec<String> = ["ready", "recs 1 2 3", r#"{"rank":1,"finished":true}"#]
        .iter()
        .map(|b| tx.seal(b))
        .collect();
    let mut rx = LineSeal::new(Some(key.clone()), n, Direction::ToRoot);
    assert_eq!(rx.open(&lines[0]), Some("ready"));
    assert_eq!(rx.clone().open(&lines[0]), None, "a replayed line");
    assert_eq!(rx.clone().open(&lines[2]), None, "out of order");
    let mut forged = lines[1].clone();
    forged.push('4');
    assert_eq!(rx.clone().open(&forged), None, "an altered body");
    assert_eq!(rx.open(&format!("{}\r\n", lines[1])), Some("recs 1 2 3"));
    assert_eq!(rx.open(&lines[2]), Some(r#"{"rank":1,"finished":true}"#));
    let first = &lines[0];
    for (name, mut other) in [
        ("reflected", LineSeal::new(Some(key.clone()), n, Direction::FromRoot)),
        (
            "another connection",
            LineSeal::new(Some(key.clone()), nonces(3, 2), Direction::ToRoot),
        ),
        (
            "another run",
            LineSeal::new(Some(key.clone()), nonces(1, 3), Direction::ToRoot),
        ),
        (
            "another key",
            LineSeal::new(Some(AuthKey::from_bytes([6; 16])), n, Direction::ToRoot),
        ),
        ("unkeyed", LineSeal::new(None, n, Direction::ToRoot)),
    ] {
        assert_eq!(other.open(first), None, "{name}");
    }
    let mut plain = LineSeal::new(None, n, Direction::FromRoot);
    let go = plain.seal("go");
    assert_eq!(go, "- go");
    assert_eq!(LineSeal::new(None, n, Direction::FromRoot).open(&go), Some("go"));
    assert_eq!(LineSeal::new(Some(key), n, Direction::FromRoot).open(&go), None);
    for bad in ["", "go", "-", "zz go"] {
        assert_eq!(
            LineSeal::new(Some(AuthKey::from_bytes([5; 16])), n, Direction::FromRoot).open(bad),
            None
        );
    }
}
