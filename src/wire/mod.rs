//! Every byte format ftcoll puts on a wire, and the MAC (`docs/architecture.md`, decisions 5
//! and 9). All of them read and write through [`codec`]'s one little-endian [`codec::Reader`]
//! and [`codec::Writer`]; decoding checks every field and every length and never panics,
//! whatever the bytes.
//!
//! - Protocol datagrams: a fixed [`Header`] (magic, version, kind, job, operation id `(root,
//!   seq)`, sender, lengths), a protocol message body ([`WireMessage`]: [`bcast`], [`agree`],
//!   [`overlay`], [`bootstrap`], [`watch`]) and an opaque payload. What fails is reported as a
//!   [`DecodeError`], which the caller drops and counts in [`DropCounters`]. Ranks in the
//!   header are physical; ranks inside bodies are virtual (the root is 0). Both must be below
//!   the job's size `n`. [`dispatch`] maps a broadcast algorithm to its protocol type and
//!   codec.
//! - The control plane of multi-process runs: [`control`] datagrams, the [`join`] address
//!   table (with [`addr`]esses), a group's [`shape`] (what its members must share, and rank
//!   0's refusal of a member that differs), verbs connection records ([`conn`]) and their relay chunks
//!   ([`conn_relay`]), the agreement return stream ([`stream`]), LogP probes ([`probe`]), and
//!   the sealed lines of `agree --join`'s TCP streams ([`join_line`]).
//! - [`mac`]: the job key, the keyed MAC and the one sealing of datagrams (a tag slot that
//!   covers every other byte); [`hex`]: the one hex codec (keys, rendezvous files).

pub mod addr;
pub mod agree;
pub mod bcast;
pub mod bootstrap;
pub mod codec;
pub mod conn;
pub mod conn_relay;
pub mod control;
pub mod dispatch;
pub mod header;
pub mod hex;
pub mod join;
pub mod join_line;
pub mod kind;
pub mod mac;
pub mod overlay;
pub mod probe;
pub mod shape;
pub mod stream;
pub mod watch;

pub use header::{HEADER_LEN, Header, MAGIC, VERSION};

use serde::Serialize;

/// Why a datagram was dropped (each reason counted separately).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecodeError {
    /// Shorter than the header.
    TooShort,
    /// Not ours: the magic is wrong.
    BadMagic,
    /// A wire version this build does not speak.
    BadVersion,
    /// Another job's datagram.
    ForeignJob,
    /// No message type has this kind, or not the one expected.
    UnknownKind,
    /// Reserved flag bits set.
    BadFlags,
    /// A rank (header or body) not below the job's size.
    RankOutOfRange,
    /// The lengths do not add up: truncated, or trailing bytes.
    LengthMismatch,
    /// A body field with an invalid value (unknown tag, bad list, ...), named.
    BadField(&'static str),
    /// Encoding: does not fit the buffer or the length fields. Decoding: a body longer than
    /// its type's maximum.
    TooLarge,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::TooShort => f.write_str("datagram shorter than the header"),
            DecodeError::BadMagic => f.write_str("bad magic"),
            DecodeError::BadVersion => f.write_str("unsupported wire version"),
            DecodeError::ForeignJob => f.write_str("datagram of another job"),
            DecodeError::UnknownKind => f.write_str("unknown message kind"),
            DecodeError::BadFlags => f.write_str("reserved flags set"),
            DecodeError::RankOutOfRange => f.write_str("rank out of range"),
            DecodeError::LengthMismatch => f.write_str("length mismatch"),
            DecodeError::BadField(name) => write!(f, "invalid field {name}"),
            DecodeError::TooLarge => f.write_str("too large"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Per-reason drop counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct DropCounters {
    pub too_short: u64,
    pub bad_magic: u64,
    pub bad_version: u64,
    pub foreign_job: u64,
    pub unknown_kind: u64,
    pub bad_flags: u64,
    pub rank_out_of_range: u64,
    pub length_mismatch: u64,
    pub bad_field: u64,
    pub too_large: u64,
}

impl DropCounters {
    /// Counts one datagram dropped for `e`.
    pub fn count(&mut self, e: DecodeError) {
        let c = match e {
            DecodeError::TooShort => &mut self.too_short,
            DecodeError::BadMagic => &mut self.bad_magic,
            DecodeError::BadVersion => &mut self.bad_version,
            DecodeError::ForeignJob => &mut self.foreign_job,
            DecodeError::UnknownKind => &mut self.unknown_kind,
            DecodeError::BadFlags => &mut self.bad_flags,
            DecodeError::RankOutOfRange => &mut self.rank_out_of_range,
            DecodeError::LengthMismatch => &mut self.length_mismatch,
            DecodeError::BadField(_) => &mut self.bad_field,
            DecodeError::TooLarge => &mut self.too_large,
        };
        *c = c.saturating_add(1);
    }

    /// All drops, whatever the reason.
    pub fn total(&self) -> u64 {
        [
            self.too_short,
            self.bad_magic,
            self.bad_version,
            self.foreign_job,
            self.unknown_kind,
            self.bad_flags,
            self.rank_out_of_range,
            self.length_mismatch,
            self.bad_field,
            self.too_large,
        ]
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// Adds another node's counters (merging at the end of a run).
    pub fn merge(&mut self, o: &DropCounters) {
        self.too_short = self.too_short.saturating_add(o.too_short);
        self.bad_magic = self.bad_magic.saturating_add(o.bad_magic);
        self.bad_version = self.bad_version.saturating_add(o.bad_version);
        self.foreign_job = self.foreign_job.saturating_add(o.foreign_job);
        self.unknown_kind = self.unknown_kind.saturating_add(o.unknown_kind);
        self.bad_flags = self.bad_flags.saturating_add(o.bad_flags);
        self.rank_out_of_range = self.rank_out_of_range.saturating_add(o.rank_out_of_range);
        self.length_mismatch = self.length_mismatch.saturating_add(o.length_mismatch);
        self.bad_field = self.bad_field.saturating_add(o.bad_field);
        self.too_large = self.too_large.saturating_add(o.too_large);
    }
}

/// A protocol message the wire can carry.
pub trait WireMessage: Sized {
    /// Protocol family carried in the header's `kind` byte (distinct per message type; see
    /// [`kind`]).
    const KIND: u8;
    /// Upper bound of `encode`'s output.
    const MAX_BODY: usize;
    /// Writes the body into `out` (len >= MAX_BODY), returns bytes written. A shorter `out`
    /// gets a truncated body (which will not decode), never a panic.
    fn encode(&self, out: &mut [u8]) -> usize;
    /// Parses and validates a body for a job of `n` ranks: every rank < n, every enum tag
    /// known, every list length within bounds; exact length.
    fn decode(body: &[u8], n: u32) -> Result<Self, DecodeError>;
    /// Writes the body of a datagram whose header carries the operation sequence `seq`
    /// (default: [`WireMessage::encode`]). A type may leave out of the body what the header
    /// already says (ERA's compact form, [`agree`]); [`WireMessage::decode_in`] reads it back.
    #[inline]
    fn encode_in(&self, seq: u64, out: &mut [u8]) -> usize {
        _ = seq;
        self.encode(out)
    }
    /// Parses a body behind the checked header `h` (default: [`WireMessage::decode`], the
    /// header unused). Accepts everything `decode` accepts, and what `encode_in` writes.
    #[inline]
    fn decode_in(h: &Header, body: &[u8], n: u32) -> Result<Self, DecodeError> {
        _ = h;
        Self::decode(body, n)
    }
}

/// Encodes header + message body + payload into `out`, returns the length. `out` must hold
/// `HEADER_LEN + M::MAX_BODY` bytes and the whole datagram, and body and payload must each fit
/// a `u16`; otherwise [`DecodeError::TooLarge`] (`out`'s contents then unspecified).
pub fn encode_datagram<M: WireMessage>(
    out: &mut [u8],
    job: u64,
    root: u32,
    seq: u64,
    sender: u32,
    msg: &M,
    payload: &[u8],
) -> Result<usize, DecodeError> {
    let body_room = HEADER_LEN.checked_add(M::MAX_BODY).ok_or(DecodeError::TooLarge)?;
    let body_out = out.get_mut(HEADER_LEN..body_room).ok_or(DecodeError::TooLarge)?;
    let body_len = msg.encode_in(seq, body_out).min(M::MAX_BODY);
    let payload_at = HEADER_LEN + body_len;
    let end = payload_at.checked_add(payload.len()).ok_or(DecodeError::TooLarge)?;
    out.get_mut(payload_at..end)
        .ok_or(DecodeError::TooLarge)?
        .copy_from_slice(payload);
    let h = Header {
        kind: M::KIND,
        job,
        root,
        seq,
        sender,
        body_len: u16::try_from(body_len).map_err(|_| DecodeError::TooLarge)?,
        payload_len: u16::try_from(payload.len()).map_err(|_| DecodeError::TooLarge)?,
    };
    if h.encode(out) != HEADER_LEN {
        return Err(DecodeError::TooLarge);
    }
    Ok(end)
}

/// Decodes a whole datagram expected to carry an `M` ([`Header::decode`], then
/// [`DecodeError::UnknownKind`] if the kind is not `M::KIND`, then [`WireMessage::decode_in`]).
/// Returns the header, the message and the payload.
pub fn decode_datagram<M: WireMessage>(
    datagram: &[u8],
    expected_job: u64,
    n: u32,
) -> Result<(Header, M, &[u8]), DecodeError> {
    let (h, body, payload) = Header::decode(datagram, expected_job, n)?;
    if h.kind != M::KIND {
        return Err(DecodeError::UnknownKind);
    }
    if body.len() > M::MAX_BODY {
        return Err(DecodeError::TooLarge);
    }
    let m = M::decode_in(&h, body, n)?;
    Ok((h, m, payload))
}

#[cfg(test)]
mod tests;
