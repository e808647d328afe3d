//! Socket addresses on the wire: an IPv6 address (IPv4-mapped for v4) in two little-endian
//! halves, the family (4 or 6) and the port. The join table stores them as 19 bytes
//! ([`to_bytes`]); a control `Join` spreads the same fields over its value slots ([`split`],
//! [`join`]).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use super::codec::{Reader, Writer};

/// Bytes of an address in a table.
pub const LEN: usize = 19;

/// `(high half, low half, family)` of `a`'s IP (v4 as IPv4-mapped IPv6).
pub fn split(a: &SocketAddr) -> (u64, u64, u32) {
    let (b, fam) = match a.ip() {
        IpAddr::V4(v4) => (v4.to_ipv6_mapped().octets(), 4),
        IpAddr::V6(v6) => (v6.octets(), 6),
    };
    let [h0, h1, h2, h3, h4, h5, h6, h7, l0, l1, l2, l3, l4, l5, l6, l7] = b;
    (
        u64::from_le_bytes([h0, h1, h2, h3, h4, h5, h6, h7]),
        u64::from_le_bytes([l0, l1, l2, l3, l4, l5, l6, l7]),
        fam,
    )
}

/// The inverse of [`split`] with a port; `None` for an unknown family, a v4 that is not
/// mapped, or a port above 16 bits.
pub fn join(hi: u64, lo: u64, fam: u32, port: u64) -> Option<SocketAddr> {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&hi.to_le_bytes());
    b[8..].copy_from_slice(&lo.to_le_bytes());
    let v6 = Ipv6Addr::from(b);
    let ip = match fam {
        4 => IpAddr::V4(v6.to_ipv4_mapped()?),
        6 => IpAddr::V6(v6),
        _ => return None,
    };
    Some(SocketAddr::new(ip, u16::try_from(port).ok()?))
}

/// Writes `a` as [`LEN`] bytes: family, 16 bytes of IPv6, port.
pub fn write(w: &mut Writer<'_>, a: &SocketAddr) {
    let (hi, lo, fam) = split(a);
    w.u8(fam as u8);
    w.u64(hi);
    w.u64(lo);
    w.u16(a.port());
}

/// Reads what [`write`](fn@write) wrote; `None` when short or invalid.
pub fn read(r: &mut Reader<'_>) -> Option<SocketAddr> {
    let fam = r.u8().ok()?;
    let (hi, lo, port) = (r.u64().ok()?, r.u64().ok()?, r.u16().ok()?);
    join(hi, lo, u32::from(fam), u64::from(port))
}

/// An address as [`LEN`] bytes.
pub fn to_bytes(a: &SocketAddr) -> [u8; LEN] {
    let mut o = [0u8; LEN];
    write(&mut Writer::new(&mut o), a);
    o
}

/// The inverse of [`to_bytes`]; `None` for an unknown family or a v4 that is not mapped.
pub fn from_bytes(b: &[u8; LEN]) -> Option<SocketAddr> {
    read(&mut Reader::new(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_and_bad_families_are_refused() {
        for s in ["10.0.0.1:5000", "[fe80::1]:7", "0.0.0.0:0", "[::ffff:1.2.3.4]:65535"] {
            let a: SocketAddr = s.parse().unwrap();
            let b = to_bytes(&a);
            let back = from_bytes(&b).unwrap();
            // An IPv4-mapped v6 address comes back as its v4 address (family 4 is stored).
            assert_eq!(back.port(), a.port());
            assert_eq!(to_bytes(&back), b, "{s}");
            let (hi, lo, fam) = split(&a);
            assert_eq!(join(hi, lo, fam, u64::from(a.port())), Some(back));
        }
        let v4 = to_bytes(&"10.0.0.1:5000".parse().unwrap());
        assert_eq!(v4[0], 4);
        assert_eq!(&v4[17..], &5000u16.to_le_bytes());
        let mut bad = v4;
        bad[0] = 9;
        assert_eq!(from_bytes(&bad), None);
        let mut unmapped = v4;
        unmapped[0] = 4;
        unmapped[11] = 0;
        assert_eq!(from_bytes(&unmapped), None, "a v4 that is not mapped");
        assert_eq!(join(0, 0, 6, 1 << 16), None);
    }
}
