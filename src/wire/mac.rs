//! Packet authentication (`docs/security.md`): a job's secret key, the keyed MAC, and the one
//! framing every sealed datagram uses: a [`TAG_LEN`]-byte tag slot at a fixed offset, the tag
//! covering every other byte of the datagram ([`seal_at`], [`verify_at`]). The UDP transport
//! keeps its slot at the end of its header; control, table and bootstrap datagrams keep it at
//! the very end ([`sealed`], [`opened`]).
//!
//! The MAC is SipHash-2-4 with a 128-bit key and a 128-bit output (the `siphasher` crate): a
//! PRF designed for short inputs, a few tens of ns for a small datagram, so it fits the
//! latency path (`cargo bench --bench mac_cost` prints the cost per packet). The tag is
//! checked before any field of the datagram is trusted. Comparison is constant-time
//! (`Hash128`'s `PartialEq`). The key is never printed (`Debug` shows `AuthKey(..)`); where it
//! comes from (environment, file, generated) is the transport's business.

use std::hash::Hasher;

use siphasher::sip128::{Hasher128, SipHasher24};

use super::hex;

/// Bytes of a key.
pub const KEY_LEN: usize = 16;
/// Bytes of a tag.
pub const TAG_LEN: usize = 16;

/// A job's secret key.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthKey([u8; KEY_LEN]);

impl std::fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthKey(..)")
    }
}

impl AuthKey {
    /// A key from raw bytes.
    pub fn from_bytes(b: [u8; KEY_LEN]) -> Self {
        AuthKey(b)
    }

    /// Parses 32 hex digits (surrounding whitespace ignored). The error never quotes the input.
    pub fn from_hex(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.len() != 2 * KEY_LEN || !s.is_ascii() {
            return Err(format!("a key is {} hex digits", 2 * KEY_LEN));
        }
        // A sign ("+f") is refused too: found by fuzzing the former from_str_radix parser.
        hex::decode(s)
            .map(AuthKey)
            .map_err(|_| "a key is hex digits only".to_string())
    }

    /// The key as hex, to hand to a child process (never print it).
    pub fn to_hex(&self) -> String {
        hex::encode(&self.0)
    }

    /// The tag of a datagram made of `parts` (concatenated).
    pub fn tag(&self, parts: &[&[u8]]) -> [u8; TAG_LEN] {
        let mut h = SipHasher24::new_with_key(&self.0);
        for p in parts {
            h.write(p);
        }
        u128::from(h.finish128()).to_le_bytes()
    }

    /// Whether `tag` is the tag of `parts`, compared in constant time.
    pub fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        let Ok(t) = <[u8; TAG_LEN]>::try_from(tag) else {
            return false;
        };
        let mut h = SipHasher24::new_with_key(&self.0);
        for p in parts {
            h.write(p);
        }
        h.finish128() == siphasher::sip128::Hash128::from(u128::from_le_bytes(t))
    }
}

/// Writes into `d[at..at + TAG_LEN]` the tag of the rest of `d` (zeros without a key). `d`
/// must hold the slot.
pub fn seal_at(key: Option<&AuthKey>, d: &mut [u8], at: usize) {
    let end = at + TAG_LEN;
    let tag = match key {
        Some(k) => k.tag(&[&d[..at], &d[end..]]),
        None => [0; TAG_LEN],
    };
    d[at..end].copy_from_slice(&tag);
}

/// Whether `d[at..at + TAG_LEN]` is the tag of the rest of `d` under `key`; `false` when `d`
/// is too short to hold the slot.
pub fn verify_at(key: &AuthKey, d: &[u8], at: usize) -> bool {
    let Some(tag) = at.checked_add(TAG_LEN).and_then(|end| d.get(at..end)) else {
        return false;
    };
    key.verify(&[&d[..at], &d[at + TAG_LEN..]], tag)
}

/// `body ‖ tag`, the tag over `body` under `key` (all zeros without a key): every control and
/// table datagram travels so, checked before anything in it is read.
pub fn sealed(key: Option<&AuthKey>, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + TAG_LEN);
    out.extend_from_slice(body);
    out.extend_from_slice(&[0; TAG_LEN]);
    seal_at(key, &mut out, body.len());
    out
}

/// The body of a [`sealed`] datagram whose tag checks under `key` (without a key: a zero tag);
/// `None` for anything else.
pub fn opened<'a>(key: Option<&AuthKey>, d: &'a [u8]) -> Option<&'a [u8]> {
    let at = d.len().checked_sub(TAG_LEN)?;
    let ok = match key {
        Some(k) => verify_at(k, d, at),
        None => d[at..].iter().all(|&b| b == 0),
    };
    ok.then_some(&d[..at])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_depends_on_every_byte_and_the_key() {
        let k = AuthKey::from_bytes(*b"0123456789abcdef");
        let msg = b"header and payload".to_vec();
        let t = k.tag(&[&msg[..6], &msg[6..]]);
        assert_eq!(t, k.tag(&[&msg]), "parts are concatenated");
        assert!(k.verify(&[&msg], &t));
        for i in 0..msg.len() {
            let mut m = msg.clone();
            m[i] ^= 1;
            assert!(!k.verify(&[&m], &t), "byte {i}");
        }
        let other = AuthKey::from_bytes(*b"0123456789abcdeF");
        assert!(!other.verify(&[&msg], &t));
        assert!(!k.verify(&[&msg], &t[..15]));
    }

    #[test]
    fn hex_round_trip_and_errors_never_quote_the_key() {
        let k = AuthKey::from_bytes(*b"0123456789abcdef");
        assert_eq!(k.to_hex(), "30313233343536373839616263646566");
        assert_eq!(AuthKey::from_hex(&format!(" {}\n", k.to_hex())), Ok(k.clone()));
        assert_eq!(format!("{k:?}"), "AuthKey(..)");
        let signed = format!("+{}", &"0".repeat(31));
        for bad in ["", "00", &"g".repeat(32), &"é".repeat(16), &"0".repeat(33), &signed] {
            let e = AuthKey::from_hex(bad).unwrap_err();
            assert!(bad.is_empty() || !e.contains(bad), "{e}");
        }
    }

    #[test]
    fn a_slot_anywhere_covers_the_rest() {
        let k = AuthKey::from_bytes([7; KEY_LEN]);
        let mut d = vec![0u8; 40];
        d.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
        seal_at(Some(&k), &mut d, 10);
        assert_eq!(
            &d[10..26],
            &k.tag(&[&(0u8..10).collect::<Vec<_>>(), &(26u8..40).collect::<Vec<_>>()])
        );
        assert!(verify_at(&k, &d, 10));
        for i in (0..40).filter(|i| !(10..26).contains(i)) {
            let mut m = d.clone();
            m[i] ^= 1;
            assert!(!verify_at(&k, &m, 10), "byte {i}");
        }
        assert!(!verify_at(&k, &d[..25], 10), "no room for the slot");
        seal_at(None, &mut d, 10);
        assert_eq!(&d[10..26], &[0; TAG_LEN]);
    }

    #[test]
    fn sealed_datagrams_open_only_under_their_key() {
        let key = AuthKey::from_bytes([1; KEY_LEN]);
        let other = AuthKey::from_bytes([2; KEY_LEN]);
        let body = b"a control body".to_vec();
        let d = sealed(Some(&key), &body);
        assert_eq!(&d[body.len()..], &key.tag(&[&body]));
        assert_eq!(opened(Some(&key), &d), Some(&body[..]));
        assert_eq!(opened(Some(&other), &d), None, "another job's key");
        assert_eq!(opened(None, &d), None, "a keyed datagram at an unkeyed agent");
        let mut forged = d.clone();
        forged[0] ^= 1;
        assert_eq!(opened(Some(&key), &forged), None, "a changed body");
        let plain = sealed(None, &body);
        assert_eq!(opened(None, &plain), Some(&body[..]));
        assert_eq!(opened(Some(&key), &plain), None, "an unkeyed datagram at a keyed agent");
        assert_eq!(opened(Some(&key), &d[..TAG_LEN - 1]), None, "shorter than a tag");
    }
}
