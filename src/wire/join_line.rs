//! The text lines of a launched node's TCP stream to rank 0 (`agree --join`), authenticated
//! with the job key before anything else is read, then sealed one by one.
//!
//! The handshake is a challenge–response: rank 0 opens with [`challenge`], a fresh
//! per-connection nonce and the run's nonce (which keys the run's session,
//! [`AuthKey::session`](crate::wire::mac::AuthKey)); the node answers [`hello`], its rank and
//! `MAC(key, "ftcoll join hello" ‖ connection nonce ‖ run nonce ‖ job ‖ rank)`. A hello
//! recorded on another connection or in another run does not verify here (its nonces differ).
//! Every later line, both ways, is `TAG BODY` ([`LineSeal`]): the tag is
//! `MAC(key, "ftcoll join line" ‖ connection nonce ‖ run nonce ‖ direction ‖ line number ‖
//! BODY)`, so a line cannot be altered, reordered, reflected back, or replayed into another
//! connection. Without a key the tags are `-` (an unauthenticated run, announced loudly).
//!
//! Lengths: a handshake line is at most [`MAX_HANDSHAKE_LINE`] bytes, any other at most
//! [`MAX_LINE`]; the reader ([`crate::runtime::join`]) stops at the bound.

use super::hex;
use super::mac::{AuthKey, TAG_LEN};

/// Bytes of a nonce.
pub const NONCE_LEN: usize = 16;
/// The longest challenge or hello line, in bytes (the newline included).
pub const MAX_HANDSHAKE_LINE: usize = 256;
/// The longest sealed line, in bytes (a node's result carries one digest per 4096
/// agreements: a billion agreements fit).
pub const MAX_LINE: usize = 8 << 20;

/// A connection's nonces: rank 0's fresh one for this stream, and the run's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nonces {
    pub conn: [u8; NONCE_LEN],
    pub run: [u8; NONCE_LEN],
}

/// Rank 0's first line on a stream.
pub fn challenge(n: &Nonces) -> String {
    format!("challenge {} {}", hex::encode(&n.conn), hex::encode(&n.run))
}

/// The nonces of a [`challenge`] line; `None` for anything else.
pub fn parse_challenge(line: &str) -> Option<Nonces> {
    let mut w = line.trim_end_matches(['\r', '\n']).split(' ');
    let (Some("challenge"), Some(c), Some(r), None) = (w.next(), w.next(), w.next(), w.next()) else {
        return None;
    };
    Some(Nonces {
        conn: hex::decode(c).ok()?,
        run: hex::decode(r).ok()?,
    })
}

fn hello_tag(key: Option<&AuthKey>, job: u64, rank: u32, n: &Nonces) -> String {
    key.map_or_else(
        || "-".to_string(),
        |k| {
            hex::encode(&k.tag(&[
                b"ftcoll join hello",
                &n.conn,
                &n.run,
                &job.to_le_bytes(),
                &rank.to_le_bytes(),
            ]))
        },
    )
}

/// A node's answer to the challenge `n`: its rank, sealed with the job key.
pub fn hello(key: Option<&AuthKey>, job: u64, rank: u32, n: &Nonces) -> String {
    format!("hello {rank} {}", hello_tag(key, job, rank, n))
}

/// The rank a [`hello`] names, if it answers the challenge `n` of `job`'s `nodes`-rank run
/// under `key`.
pub fn check_hello(line: &str, key: Option<&AuthKey>, job: u64, nodes: u32, n: &Nonces) -> Option<u32> {
    let mut w = line.trim_end_matches(['\r', '\n']).split(' ');
    let (Some("hello"), Some(r), Some(tag), None) = (w.next(), w.next(), w.next(), w.next()) else {
        return None;
    };
    let rank: u32 = r.parse().ok().filter(|&x: &u32| x < nodes && x.to_string() == r)?;
    let ok = match key {
        Some(k) => {
            let t: [u8; TAG_LEN] = hex::decode(tag).ok()?;
            k.verify(
                &[
                    b"ftcoll join hello",
                    &n.conn,
                    &n.run,
                    &job.to_le_bytes(),
                    &rank.to_le_bytes(),
                ],
                &t,
            )
        }
        None => tag == "-",
    };
    ok.then_some(rank)
}

/// Which way a line travels (a line cannot be reflected back to its sender).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From a node to rank 0's coordinator.
    ToRoot = 1,
    /// From the coordinator to a node.
    FromRoot = 2,
}

/// The sealing of one direction of one stream: numbers its lines from 0.
#[derive(Clone, Debug)]
pub struct LineSeal {
    key: Option<AuthKey>,
    nonces: Nonces,
    dir: Direction,
    next: u64,
}

impl LineSeal {
    pub fn new(key: Option<AuthKey>, nonces: Nonces, dir: Direction) -> Self {
        Self {
            key,
            nonces,
            dir,
            next: 0,
        }
    }

    /// The MAC's input for `body` as the next line.
    fn check(&self, body: &str, tag: Option<&[u8; TAG_LEN]>) -> Option<[u8; TAG_LEN]> {
        let k = self.key.as_ref()?;
        let parts: [&[u8]; 6] = [
            b"ftcoll join line",
            &self.nonces.conn,
            &self.nonces.run,
            &[self.dir as u8],
            &self.next.to_le_bytes(),
            body.as_bytes(),
        ];
        match tag {
            // Constant-time comparison: the MAC's own.
            Some(t) => k.verify(&parts, t).then_some(*t),
            None => Some(k.tag(&parts)),
        }
    }

    /// `TAG BODY` for the next line (`body` holds no newline).
    pub fn seal(&mut self, body: &str) -> String {
        debug_assert!(!body.contains('\n'));
        let tag = self
            .check(body, None)
            .map_or_else(|| "-".to_string(), |t| hex::encode(&t));
        self.next += 1;
        format!("{tag} {body}")
    }

    /// The body of the next line if its tag checks; `None` for anything else (the stream is
    /// then not to be trusted any further).
    pub fn open<'a>(&mut self, line: &'a str) -> Option<&'a str> {
        let line = line.trim_end_matches(['\r', '\n']);
        let (tag, body) = line.split_once(' ')?;
        let ok = match self.key {
            Some(_) => hex::decode::<TAG_LEN>(tag).is_ok_and(|t| self.check(body, Some(&t)).is_some()),
            None => tag == "-",
        };
        if !ok {
            return None;
        }
        self.next += 1;
        Some(body)
    }
}

#[cfg(test)]
mod tests;
