//! The returns a node process streams to the process that classifies them (`agree --procs`,
//! `agree --join`): compact batches of [`Rec`]s, one text line each.
//!
//! A line is [`PREFIX`] and the base64 (standard alphabet, no padding) of: first id (varint),
//! then per record the id step `(id − previous id) << 1 | ok` (varint; the first record's
//! step is from the first id), entry − previous return (zigzag varint; the first from 0),
//! return − entry (varint) and the outcome fingerprint (8 bytes, little-endian). Each line
//! stands alone, so a bad one is dropped and counted without spoiling the next: about 14
//! bytes a return.

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD as B64;

use super::DecodeError;
use super::codec::{Reader, Writer};
use crate::protocol::agree::AgreeId;

/// The prefix of a batch line.
pub const PREFIX: &str = "recs ";

/// Bytes of one record at most: three varints and the fingerprint.
const MAX_REC: usize = 10 + 10 + 10 + 8;

/// One node's return of one agreement; times in ns on the run's clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rec {
    pub entry: u64,
    pub ret: u64,
    /// Fingerprint of the outcome (value, failed set, unacknowledged set).
    pub fp: u64,
    pub ok: bool,
}

/// One line for `recs` (ids ascending, as a node returns them); empty input, empty line.
pub fn encode(recs: &[(AgreeId, Rec)]) -> String {
    let Some(&(first, _)) = recs.first() else {
        return String::new();
    };
    let mut b = vec![0u8; 10 + MAX_REC * recs.len()];
    let mut w = Writer::new(&mut b);
    w.varint(first);
    let (mut id, mut t) = (first, 0u64);
    for &(i, r) in recs {
        w.varint((i.wrapping_sub(id)) << 1 | u64::from(r.ok));
        let d = r.entry.wrapping_sub(t) as i64;
        w.varint(((d << 1) ^ (d >> 63)) as u64);
        w.varint(r.ret.saturating_sub(r.entry));
        w.u64(r.fp);
        (id, t) = (i, r.ret.max(r.entry));
    }
    let len = w.len();
    b.truncate(len);
    let mut s = String::with_capacity(PREFIX.len() + b.len() * 4 / 3 + 4);
    s.push_str(PREFIX);
    B64.encode_string(&b, &mut s);
    s
}

fn varint(r: &mut Reader<'_>) -> Result<u64, String> {
    r.varint().map_err(|e| match e {
        DecodeError::LengthMismatch => "truncated record".into(),
        _ => "varint overflows 64 bits".into(),
    })
}

/// The returns of one line (without its prefix); an error names what is wrong with it.
pub fn decode(body: &str) -> Result<Vec<(AgreeId, Rec)>, String> {
    let b = B64.decode(body.trim()).map_err(|e| format!("not base64: {e}"))?;
    let mut r = Reader::new(&b);
    let mut id = varint(&mut r)?;
    let mut t = 0u64;
    let mut out = Vec::new();
    while !r.is_empty() {
        let step = varint(&mut r)?;
        if !out.is_empty() && step >> 1 == 0 {
            return Err("ids not ascending".into());
        }
        id = id.checked_add(step >> 1).ok_or("id overflows")?;
        let z = varint(&mut r)?;
        let d = ((z >> 1) as i64) ^ -((z & 1) as i64);
        let entry = t.wrapping_add(d as u64);
        let ret = entry.checked_add(varint(&mut r)?).ok_or("time overflows")?;
        let fp = r.u64().map_err(|_| "truncated fingerprint")?;
        out.push((
            id,
            Rec {
                entry,
                ret,
                fp,
                ok: step & 1 == 1,
            },
        ));
        t = ret;
    }
    if out.is_empty() {
        return Err("no records".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Returns per line in the node processes (`runtime::agree_stream::BATCH`).
    const BATCH: usize = 512;

    fn rec(entry: u64, ret: u64, fp: u64, ok: bool) -> Rec {
        Rec { entry, ret, fp, ok }
    }

    #[test]
    fn lines_round_trip_and_stay_compact() {
        let recs: Vec<(AgreeId, Rec)> = (0..BATCH as u64)
            .map(|i| {
                let e = 1_000_000 + i * 40_000;
                (7 + i, rec(e, e + 31_000 + i, 0x1234_5678_9ABC_DEF1 ^ i, i % 5 != 0))
            })
            .collect();
        let line = encode(&recs);
        let body = line.strip_prefix(PREFIX).unwrap();
        assert_eq!(decode(body).unwrap(), recs);
        assert!(line.len() < 22 * BATCH, "{} bytes", line.len());
        // A gap (a node killed in between never happens, but ids may skip) and an entry
        // before the previous return.
        let odd = vec![(0, rec(50, 60, 1, true)), (9, rec(40, 45, 2, false))];
        assert_eq!(decode(&encode(&odd)[PREFIX.len()..]).unwrap(), odd);
        assert_eq!(encode(&[]), "");
    }

    #[test]
    fn bad_lines_are_refused_by_name() {
        let good = encode(&[(3, rec(5, 9, 77, true)), (4, rec(9, 12, 77, true))]);
        let body = &good[PREFIX.len()..];
        let bytes = B64.decode(body).unwrap();
        assert!(decode("***").unwrap_err().contains("base64"));
        assert!(decode("").is_err());
        let cut = B64.encode(&bytes[..bytes.len() - 3]);
        assert!(decode(&cut).unwrap_err().contains("truncated"));
        let mut twice = bytes.clone();
        // The second record's step: id + 0.
        let second = 1 + 1 + 1 + 1 + 8;
        twice[second] = 1;
        assert!(decode(&B64.encode(&twice)).unwrap_err().contains("ascending"));
        let overflow = B64.encode([0xFFu8; 11]);
        assert!(decode(&overflow).unwrap_err().contains("overflows"));
        // No mutation panics.
        for i in 0..bytes.len() {
            for x in [0u8, 0x7F, 0x80, 0xFF] {
                let mut m = bytes.clone();
                m[i] = x;
                let _ = decode(&B64.encode(&m));
            }
        }
    }

    const GOLDEN: &str = "recs AwEKBE0AAAAAAAAA0gQNCggHBgUEAwIB";

    /// The bytes as this format has always put them.
    #[test]
    fn golden_line() {
        let recs = [
            (3, rec(5, 9, 77, true)),
            (300, rec(2, 12, 0x0102_0304_0506_0708, false)),
        ];
        assert_eq!(encode(&recs), GOLDEN);
        assert_eq!(decode(&GOLDEN[PREFIX.len()..]).unwrap(), recs);
    }
}
