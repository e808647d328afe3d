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

impl AuthKey {
    /// A fresh random key from the kernel (`/dev/urandom`).
    pub fn generate() -> std::io::Result<Self> {
        let mut b = [0u8; KEY_LEN];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
        Ok(AuthKey::from_bytes(b))
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
}
