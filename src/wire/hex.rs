//! The one hex codec: lower-case digits out; exactly two ASCII hex digits per byte in (no
//! sign, no prefix, no whitespace: callers trim first).

/// Why a hex text was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HexError {
    /// Not two digits per byte of the expected length.
    Length,
    /// A character that is not a hex digit.
    Digit,
}

/// `bytes` as lower-case hex.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(2 * bytes.len());
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xF)]));
    }
    s
}

fn nibble(c: u8) -> Result<u8, HexError> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err(HexError::Digit),
    }
}

/// Fills `out` from `s`, which must hold exactly `2 * out.len()` hex digits (either case).
pub fn decode_into(s: &str, out: &mut [u8]) -> Result<(), HexError> {
    let b = s.as_bytes();
    if Some(b.len()) != out.len().checked_mul(2) {
        return Err(HexError::Length);
    }
    for (o, pair) in out.iter_mut().zip(b.chunks_exact(2)) {
        *o = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Ok(())
}

/// `N` bytes from exactly `2 * N` hex digits.
pub fn decode<const N: usize>(s: &str) -> Result<[u8; N], HexError> {
    let mut out = [0u8; N];
    decode_into(s, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        let h = encode(&all);
        assert_eq!(h.len(), 512);
        assert!(h.starts_with("000102") && h.ends_with("fdfeff"));
        let mut back = vec![0u8; 256];
        decode_into(&h, &mut back).unwrap();
        assert_eq!(back, all);
        assert_eq!(decode::<2>("aBcD"), Ok([0xab, 0xcd]));
    }

    #[test]
    fn refuses_signs_odd_lengths_and_non_ascii() {
        assert_eq!(decode::<1>("+f"), Err(HexError::Digit));
        assert_eq!(decode::<1>("-0"), Err(HexError::Digit));
        assert_eq!(decode::<1>(" f"), Err(HexError::Digit));
        assert_eq!(decode::<1>("abc"), Err(HexError::Length));
        assert_eq!(decode::<1>(""), Err(HexError::Length));
        assert_eq!(decode::<1>("é"), Err(HexError::Digit));
        assert_eq!(decode::<2>("éé"), Err(HexError::Digit));
        assert_eq!(decode::<0>(""), Ok([]));
    }
}
