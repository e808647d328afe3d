//! Helpers shared by the end-to-end tests: run the built `ftcoll` binary.

#![allow(dead_code)] // Each test crate uses its own subset.

use std::process::Command;

/// Runs `c` to its end: (exit code, stdout, stderr).
pub fn output(c: &mut Command) -> (i32, String, String) {
    let out = c.output().unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `ftcoll args…`: (exit code, stdout, stderr).
pub fn ftcoll(args: &[&str]) -> (i32, String, String) {
    output(Command::new(env!("CARGO_BIN_EXE_ftcoll")).args(args))
}

/// Runs `ftcoll args…`, which must succeed and print one JSON value.
pub fn json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = ftcoll(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out}"))
}

/// A loopback port free for both TCP and UDP, for a child process to bind. It is drawn below
/// the kernel's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`), which `bind` to
/// port 0 and outgoing connections never take, so no other test's kernel-chosen port can land
/// on it between this check and the child's bind; distinct calls in one process get distinct
/// ports, and processes start at different places (by pid), each port checked free.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    // Ports [base, low) outside the ephemeral range, above the well-known and common ones.
    let base = 20000u32.min(low.saturating_sub(2000));
    let span = low.saturating_sub(base).max(1);
    let start = std::process::id().wrapping_mul(7919);
    loop {
        let i = NEXT.fetch_add(1, Ordering::Relaxed);
        let p = (base + start.wrapping_add(i.wrapping_mul(13)) % span) as u16;
        if p > 1024
            && std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()
            && std::net::UdpSocket::bind(("127.0.0.1", p)).is_ok()
        {
            return p;
        }
        if i > 100_000 {
            // No room below the ephemeral range: a kernel-chosen port (racy, as it was).
            let t = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let p = t.local_addr().unwrap().port();
            if std::net::UdpSocket::bind(("127.0.0.1", p)).is_ok() {
                return p;
            }
        }
    }
}

/// Tests that need their node processes to get the cores (a stall that must be suspected: a
/// watcher starved of its core does not, by design, count others' silence against them) take
/// this for writing and run alone in their binary; the other tests there take it for reading.
pub static ALONE: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// The pids of `parent`'s children whose command line (its arguments NUL-separated, as
/// `/proc/PID/cmdline` holds them) contains `word`.
pub fn children_with(parent: u32, word: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // ppid is the 2nd field after the parenthesized command name.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if ppid == Some(parent) && String::from_utf8_lossy(&cmd).contains(word) {
            out.push(pid);
        }
    }
    out
}
