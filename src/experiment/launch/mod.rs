//! Starting and coordinating node processes on this machine (`bench --procs`, `agree
//! --procs`, `stress agree --procs`, `bootstrap`, `reproduce`'s sub-runs) and coordinating
//! launched ones (`--join`): the parent's side of a multi-process run. Every process is
//! started, watched, killed and reaped by the one launcher, [`spawn`]; every process this one
//! starts is killed when the run ends, also on errors and panics. Job ids, run ids and
//! session keys: [`job`] ([`crate::transport::ids`]).

pub mod agree;
pub mod agree_join;
pub mod agree_node;
pub mod bcast;
pub mod boot;
mod death_boards;
pub mod job;
pub mod joined;
pub mod spawn;

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

/// The key a run seals with when it gives its processes their key itself: a fresh session
/// key under the job's long-term one ([`crate::transport::ids::fresh_session`], where every
/// run's ids and keys are derived). The processes it starts get this key (their key file),
/// launched ones the nonce (rank 0's table or challenge).
pub use crate::transport::ids::fresh_session as run_key;

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::time::{Duration, Instant};

    use crate::transport::Transport;
    use crate::transport::udp::auth::AuthKey;
    use crate::transport::udp::{UdpConfig, UdpTransport};

    #[test]
    fn a_datagram_of_one_run_is_a_bad_mac_in_the_next_with_the_same_key() {
        let long_term = AuthKey::from_bytes([7; 16]);
        let (a, b) = (
            super::run_key(Some(long_term.clone())).unwrap(),
            super::run_key(Some(long_term)).unwrap(),
        );
        assert_eq!(super::run_key(None), Ok(None));
        let socks: Vec<_> = (0..2)
            .map(|_| UdpTransport::bind_socket("127.0.0.1:0".parse().unwrap()).unwrap())
            .collect();
        let peers: Vec<_> = socks.iter().map(|s| s.local_addr().unwrap()).collect();
        let cfg = |auth| UdpConfig {
            job: 5,
            auth,
            ..UdpConfig::default()
        };
        // Run A's rank 0 talks to the address where run B's rank 1 now listens, with the
        // same job id and sequence numbers from 0, as a replay of run A would.
        let mut socks = socks.into_iter();
        let mut sender = UdpTransport::from_socket(0, socks.next().unwrap(), &peers, cfg(a)).unwrap();
        let mut receiver = UdpTransport::from_socket(1, socks.next().unwrap(), &peers, cfg(b)).unwrap();
        sender.send(1, b"from run A", Instant::now()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut delivered = 0;
        while receiver.stats().bad_mac == 0 && Instant::now() < deadline {
            let _ = sender.poll(Instant::now(), &mut |_| {});
            let _ = receiver.poll(Instant::now(), &mut |d| {
                if matches!(d, crate::transport::Delivery::Message { .. }) {
                    delivered += 1;
                }
            });
            let _ = receiver.wait(Duration::from_millis(5));
        }
        assert!(receiver.stats().bad_mac > 0, "{:?}", receiver.stats());
        assert_eq!(delivered, 0);
    }

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
