//! Starting and coordinating node processes on this machine (`bench --procs`, `agree
//! --procs`, `stress agree --procs`, `bootstrap`) and coordinating launched ones (`--join`):
//! the parent's side of a multi-process run. Every process this one starts is killed when the
//! run ends, also on errors and panics (`Children`). Job ids: [`job`].

pub mod agree;
pub mod agree_join;
pub mod bcast;
pub mod boot;
pub mod job;
pub mod joined;

use std::net::{SocketAddr, UdpSocket};
use std::process::Child;

/// Kills every child still running when dropped (also on errors and panics).
pub(crate) struct Children(pub(crate) Vec<Option<Child>>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in self.0.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `n` free ports on 127.0.0.1 (bound, read, released: a short race with other programs).
pub(crate) fn free_ports(n: u32) -> Result<Vec<SocketAddr>, String> {
    let socks: Vec<UdpSocket> = (0..n)
        .map(|_| UdpSocket::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot open UDP sockets on 127.0.0.1: {e}"))?;
    socks
        .iter()
        .map(|s| s.local_addr().map_err(|e| e.to_string()))
        .collect()
}
