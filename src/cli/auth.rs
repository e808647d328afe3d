//! `--auth` and `--key-file`: where a run's job key comes from (`docs/security.md`). The key is never
//! printed; a run without one says so on stderr, loudly, once.

use std::path::{Path, PathBuf};

use crate::transport::udp::auth::AuthKey;
pub use crate::transport::udp::auth::warn_unauthenticated;

/// Whether UDP datagrams are authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AuthMode {
    /// A keyed MAC on every datagram (SipHash-2-4, 128-bit).
    On,
    /// No MAC (benchmarks of the bare transport): anyone who can reach the port can inject.
    Off,
}

/// The key of a run: `--key-file`, else [`KEY_ENV`](crate::transport::udp::auth::KEY_ENV), else a fresh one when `generate` (a
/// launcher for its children), else none. `--auth off`: none. A run without a key says so
/// loudly when it starts ([`warn_unauthenticated`]), not here: a failing run prints its error
/// only.
pub fn job_key(mode: AuthMode, key_file: Option<&Path>, generate: bool) -> Result<Option<AuthKey>, String> {
    if mode == AuthMode::Off {
        if key_file.is_some() {
            return Err("--key-file needs --auth on".into());
        }
        return Ok(None);
    }
    if let Some(f) = key_file {
        return AuthKey::from_file(f).map(Some);
    }
    if let Some(k) = AuthKey::from_env()? {
        return Ok(Some(k));
    }
    if generate {
        return AuthKey::generate()
            .map(Some)
            .map_err(|e| format!("cannot generate a job key: {e}"));
    }
    Ok(None)
}

/// Whether a process whose datagrams carry no MAC may use the addresses `ips`: on loopback
/// always (only this host reaches them); on any other address, the wildcard included, only
/// when `--auth off` was said explicitly, and then with one warning line on stderr. `what`
/// names the command in the messages.
pub fn unauthenticated_on(what: &str, ips: &[std::net::IpAddr], mode: AuthMode) -> Result<(), String> {
    let Some(open) = ips.iter().find(|ip| !ip.is_loopback()) else {
        return Ok(());
    };
    match mode {
        AuthMode::Off => {
            eprintln!(
                "ftcoll: WARNING: {what}: datagrams on {open} are NOT authenticated (--auth off): any host that reaches it can inject messages"
            );
            Ok(())
        }
        AuthMode::On => Err(format!(
            "{what} would send unauthenticated datagrams on the non-loopback address {open}: give --auth off to run so anyway"
        )),
    }
}

/// Writes `key` to `dir/job.key`, readable by this user only, for child processes'
/// `--key-file` (never on a command line, where `ps` shows it).
pub fn write_key_file(dir: &Path, key: &AuthKey) -> Result<PathBuf, String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("job.key");
    let _ = std::fs::remove_file(&path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| writeln!(f, "{}", key.to_hex()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unauthenticated_datagrams_stay_on_loopback_unless_auth_is_off() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        for lo in [vec![], vec![ip("127.0.0.1")], vec![ip("127.0.0.2"), ip("::1")]] {
            assert_eq!(unauthenticated_on("logp", &lo, AuthMode::On), Ok(()), "{lo:?}");
        }
        for open in [
            vec![ip("10.0.0.1")],
            vec![ip("127.0.0.1"), ip("0.0.0.0")],
            vec![ip("fe80::1")],
        ] {
            let e = unauthenticated_on("logp", &open, AuthMode::On).unwrap_err();
            assert!(e.starts_with("logp ") && e.contains("--auth off"), "{e}");
            assert_eq!(unauthenticated_on("logp", &open, AuthMode::Off), Ok(()), "{open:?}");
        }
    }

    #[test]
    fn key_file_round_trip_is_private_and_off_refuses_a_key() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("ftcoll-auth-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let k = AuthKey::generate().unwrap();
        let p = write_key_file(&dir, &k).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(job_key(AuthMode::On, Some(&p), false), Ok(Some(k)));
        assert_eq!(job_key(AuthMode::Off, None, true), Ok(None));
        assert!(job_key(AuthMode::Off, Some(&p), true).is_err());
        std::fs::write(&p, "not a key\n").unwrap();
        let e = job_key(AuthMode::On, Some(&p), false).unwrap_err();
        assert!(e.contains("key file") && !e.contains("not a key"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
