//! Little-endian cursors over byte slices that never panic: the writer skips what does not
//! fit, the reader reports it as [`DecodeError::LengthMismatch`]. Public for value codecs
//! such as [`super::agree::WireValue`].

use super::DecodeError;

/// Appends little-endian fields to a buffer; a field that does not fit is not written.
pub struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    pub fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.pos
    }

    /// Nothing written yet?
    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }

    pub fn bytes(&mut self, b: &[u8]) {
        let Some(end) = self.pos.checked_add(b.len()) else {
            return;
        };
        if let Some(dst) = self.buf.get_mut(self.pos..end) {
            dst.copy_from_slice(b);
            self.pos = end;
        }
    }

    pub fn u8(&mut self, v: u8) {
        self.bytes(&[v]);
    }

    pub fn u16(&mut self, v: u16) {
        self.bytes(&v.to_le_bytes());
    }

    pub fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }

    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    /// `v` as an unsigned LEB128 varint (1 to 10 bytes), written whole or not at all.
    pub fn varint(&mut self, mut v: u64) {
        let mut b = [0u8; 10];
        let mut len = 0;
        while v >= 0x80 {
            b[len] = v as u8 | 0x80;
            v >>= 7;
            len += 1;
        }
        b[len] = v as u8;
        self.bytes(&b[..=len]);
    }
}

/// Reads little-endian fields from a byte slice, front to back.
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let (head, rest) = self.buf.split_first_chunk::<N>().ok_or(DecodeError::LengthMismatch)?;
        self.buf = rest;
        Ok(*head)
    }

    /// The next `N` bytes as they are.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        self.take()
    }

    /// Is every byte read?
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// An unsigned LEB128 varint (7 bits a byte, low first) of at most 64 bits; a varint
    /// running past 64 bits is [`DecodeError::TooLarge`].
    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8()?;
            if shift == 63 && byte > 1 {
                return Err(DecodeError::TooLarge);
            }
            v |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::TooLarge)
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        self.take().map(u16::from_le_bytes)
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        self.take().map(u32::from_le_bytes)
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        self.take().map(u64::from_le_bytes)
    }

    /// A rank, which must be below `n`.
    pub fn rank(&mut self, n: u32) -> Result<u32, DecodeError> {
        let r = self.u32()?;
        if r < n { Ok(r) } else { Err(DecodeError::RankOutOfRange) }
    }

    /// Succeeds only if every byte was read (trailing bytes are a length mismatch).
    pub fn finish(self) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::LengthMismatch)
        }
    }
}

/// FNV-1a, 64 bits, over `bytes`: a fingerprint two processes of one build compute alike
/// (not a MAC: see [`super::mac`] for what must resist forgery).
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_skips_what_does_not_fit() {
        let mut buf = [0u8; 5];
        let mut w = Writer::new(&mut buf);
        w.u32(0x0403_0201);
        w.u32(7);
        w.u8(9);
        assert_eq!(w.len(), 5);
        assert_eq!(buf, [1, 2, 3, 4, 9]);
    }

    #[test]
    fn reader_reads_back_and_rejects_short_and_trailing() {
        let mut buf = [0u8; 15];
        let mut w = Writer::new(&mut buf);
        w.u8(1);
        w.u16(0x0302);
        w.u32(5);
        w.u64(u64::MAX);
        assert_eq!(w.len(), 15);
        let mut r = Reader::new(&buf);
        assert_eq!(r.u8(), Ok(1));
        assert_eq!(r.u16(), Ok(0x0302));
        assert_eq!(r.rank(5), Err(DecodeError::RankOutOfRange));
        assert_eq!(r.u64(), Ok(u64::MAX));
        assert_eq!(r.u8(), Err(DecodeError::LengthMismatch));
        assert_eq!(r.finish(), Ok(()));
        let r = Reader::new(&buf[..1]);
        assert_eq!(r.finish(), Err(DecodeError::LengthMismatch));
    }

    #[test]
    fn varints_round_trip_and_overflow_is_refused() {
        let vals = [0u64, 1, 0x7F, 0x80, 300, u64::from(u32::MAX), u64::MAX - 1, u64::MAX];
        let mut buf = [0u8; 80];
        let mut w = Writer::new(&mut buf);
        vals.iter().for_each(|&v| w.varint(v));
        let len = w.len();
        assert_eq!(len, 1 + 1 + 1 + 2 + 2 + 5 + 10 + 10);
        let mut r = Reader::new(&buf[..len]);
        for &v in &vals {
            assert_eq!(r.varint(), Ok(v));
        }
        assert!(r.is_empty());
        assert_eq!(Reader::new(&[0x80, 0x80]).varint(), Err(DecodeError::LengthMismatch));
        let mut over = [0xFFu8; 10];
        over[9] = 0x02;
        assert_eq!(Reader::new(&over).varint(), Err(DecodeError::TooLarge));
        assert_eq!(Reader::new(&[0xFF; 11]).varint(), Err(DecodeError::TooLarge));
        let mut tiny = [0u8; 1];
        let mut w = Writer::new(&mut tiny);
        w.varint(300);
        assert!(w.is_empty(), "a varint that does not fit is not written");
    }
}
