//! Where a job's key comes from (`docs/security.md`): the environment variable [`KEY_ENV`], a
//! file (32 hex digits, the first line), or the kernel's generator for a launcher's children.
//! The key, the MAC and the sealing of datagrams are [`crate::wire::mac`]'s.

use std::io::Read;

pub use crate::wire::mac::{AuthKey, KEY_LEN, TAG_LEN};

/// The environment variable a launcher passes the job's key in (hex).
pub const KEY_ENV: &str = "FTCOLL_KEY";

/// Says on stderr, loudly, that this process's packets are not authenticated.
pub fn warn_unauthenticated() {
    eprintln!(
        "ftcoll: WARNING: packets are NOT authenticated (--auth off, or no {KEY_ENV} / --key-file): any host that reaches these ports can inject messages"
    );
}

/// A fresh 128-bit nonce from the kernel (`/dev/urandom`).
pub fn fresh_nonce() -> std::io::Result<[u8; 16]> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b)
}

impl AuthKey {
    /// A fresh random key from the kernel (`/dev/urandom`).
    pub fn generate() -> std::io::Result<Self> {
        let mut b = [0u8; KEY_LEN];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
        Ok(AuthKey::from_bytes(b))
    }

    /// The session key of one run: `MAC(self, "ftcoll run" ‖ nonce)` under this long-term key,
    /// the nonce fresh per run ([`fresh_nonce`]). Everything the run seals is sealed with it,
    /// so a datagram recorded in one run does not verify in another with the same key.
    pub fn session(&self, nonce: &[u8; 16]) -> AuthKey {
        AuthKey::from_bytes(self.tag(&[b"ftcoll run", nonce]))
    }

    /// Reads the key from the first line of `path`.
    pub fn from_file(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("key file {}: {e}", path.display()))?;
        let line = text.lines().next().unwrap_or("");
        Self::from_hex(line).map_err(|e| format!("key file {}: {e}", path.display()))
    }

    /// The key in [`KEY_ENV`], if set.
    pub fn from_env() -> Result<Option<Self>, String> {
        match std::env::var(KEY_ENV) {
            Ok(v) => Self::from_hex(&v).map(Some).map_err(|e| format!("{KEY_ENV}: {e}")),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!("{KEY_ENV}: a key is hex digits only")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_differ_and_round_trip_through_hex() {
        let k = AuthKey::generate().unwrap();
        assert_ne!(k, AuthKey::generate().unwrap());
        assert_eq!(AuthKey::from_hex(&format!(" {}\n", k.to_hex())), Ok(k.clone()));
    }

    #[test]
    fn session_keys_differ_per_run_and_from_the_long_term_key() {
        let k = AuthKey::from_bytes([1; 16]);
        let (a, b) = (fresh_nonce().unwrap(), fresh_nonce().unwrap());
        assert_ne!(a, b);
        assert_eq!(k.session(&a), k.session(&a), "the same run: the same key at every node");
        assert_ne!(k.session(&a), k.session(&b));
        assert_ne!(k.session(&a), k);
        assert_ne!(k.session(&a), AuthKey::from_bytes([2; 16]).session(&a));
    }
}
