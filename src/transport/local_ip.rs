//! Which local address a host uses toward a peer.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

/// The local IP this host uses to reach `dst` (no packet is sent: a connected UDP socket).
pub fn local_ip_toward(dst: SocketAddr) -> std::io::Result<IpAddr> {
    let any: IpAddr = if dst.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let s = UdpSocket::bind((any, 0))?;
    s.connect(dst)?;
    Ok(s.local_addr()?.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_reached_from_loopback() {
        let ip = local_ip_toward("127.0.0.1:9".parse().unwrap()).unwrap();
        assert!(ip.is_loopback(), "{ip}");
    }
}
