//! Starting and coordinating node processes on this machine (`bench --procs`, `agree
//! --procs`, `stress agree --procs`, `bootstrap`) and coordinating launched ones (`--join`):
//! the parent's side of a multi-process run. Every process this one starts is killed when the
//! run ends, also on errors and panics (`Children`). Job ids: [`job`].

pub mod agree;
pub mod agree_join;
pub mod bcast;
pub mod boot;
pub mod job;
pub mod joined;

use std::net::{SocketAddr, UdpSocket};
use std::process::Child;

/// Kills every child still running when dropped (also on errors and panics).
pub(crate) struct Children(pub(crate) Vec<Option<Child>>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in self.0.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A fresh directory for one run's files (the hostfile, the job's key file), readable only by
/// this user: `$TMPDIR/NAME-PID-RANDOM`, created exclusively with mode 0700. A directory that
/// already exists is never reused (someone else could have made it, and swapped the key file
/// in it); the name is drawn again, a few times, then the run fails with one line.
pub(crate) fn private_dir(name: &str) -> Result<std::path::PathBuf, String> {
    use std::hash::{BuildHasher, Hasher};
    use std::os::unix::fs::DirBuilderExt;
    let mut last = String::new();
    for attempt in 0..8u32 {
        // RandomState is seeded from the OS per process; mixed with the time and the attempt.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.write_u32(attempt);
        let dir = std::env::temp_dir().join(format!("{name}-{}-{:016x}", std::process::id(), h.finish()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) => last = format!("cannot create a private directory {}: {e}", dir.display()),
        }
    }
    Err(last)
}

/// `n` free ports on 127.0.0.1 (bound, read, released: a short race with other programs).
pub(crate) fn free_ports(n: u32) -> Result<Vec<SocketAddr>, String> {
    let socks: Vec<UdpSocket> = (0..n)
        .map(|_| UdpSocket::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot open UDP sockets on 127.0.0.1: {e}"))?;
    socks
        .iter()
        .map(|s| s.local_addr().map_err(|e| e.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_run_directory_is_fresh_and_private() {
        let a = super::private_dir("ftcoll-test-private").expect("created");
        let b = super::private_dir("ftcoll-test-private").expect("created");
        assert_ne!(a, b, "every run gets a directory of its own");
        let mode = std::fs::metadata(&a).expect("exists").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}: mode {mode:o}", a.display());
        // The name is not the bare pid any more (predictable, and reused across runs).
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.len() > format!("ftcoll-test-private-{}", std::process::id()).len() + 8,
            "{name}"
        );
        std::fs::remove_dir(&a).unwrap();
        std::fs::remove_dir(&b).unwrap();
    }
}
