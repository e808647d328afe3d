//! Helpers shared by the end-to-end tests: run the built `ftcoll` binary.

#![allow(dead_code)] // Each test crate uses its own subset.

use std::process::Command;

/// Runs `ftcoll args…`: (exit code, stdout, stderr).
pub fn ftcoll(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ftcoll"))
        .args(args)
        .output()
        .expect("run ftcoll");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `ftcoll args…`, which must succeed and print one JSON value.
pub fn json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = ftcoll(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out}"))
}

/// A loopback port free for both TCP and UDP just now (another process may still take it
/// before the caller binds it).
pub fn free_port() -> u16 {
    loop {
        let t = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = t.local_addr().unwrap().port();
        if std::net::UdpSocket::bind(("127.0.0.1", p)).is_ok() {
            return p;
        }
    }
}
