//! The messages of a LogP measurement between processes (`ftcoll logp` over a transport):
//! the burst size (u16, little-endian) in the first [`HDR`] bytes, then filler up to the
//! measured size. The answering side replies once per completed burst; burst 0 ends the
//! session; [`KEEPALIVE`] only says the measuring rank is alive.

use super::codec::{Reader, Writer};

/// Bytes of the burst header (and of the smallest message).
pub const HDR: usize = 2;
/// Burst value of a keep-alive (no reply).
pub const KEEPALIVE: u16 = u16::MAX;
/// The filler after the header.
const FILL: u8 = 0x5a;

/// A message of `size` bytes (at least [`HDR`]) announcing a burst of `burst`.
pub fn message(size: usize, burst: u16) -> Vec<u8> {
    let mut m = vec![FILL; size.max(HDR)];
    Writer::new(&mut m).u16(burst);
    m
}

/// The burst a message announces; `None` when it is shorter than [`HDR`].
pub fn burst(bytes: &[u8]) -> Option<u16> {
    Reader::new(bytes).u16().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_their_burst_and_size() {
        assert_eq!(message(0, KEEPALIVE), vec![0xff, 0xff]);
        let m = message(8, 3);
        assert_eq!(m, [3, 0, FILL, FILL, FILL, FILL, FILL, FILL]);
        assert_eq!(burst(&m), Some(3));
        assert_eq!(burst(&message(HDR, 0)), Some(0));
        assert_eq!(burst(&[1]), None);
    }
}
