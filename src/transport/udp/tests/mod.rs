//! Tests of the UDP endpoint over loopback sockets, by topic; the sans-IO core has its own
//! tests over an in-memory link (`reliable/tests.rs`).

use super::*;
use crate::transport::MAX_PAYLOAD;
use std::net::UdpSocket as StdSocket;

mod endpoints;
mod hostile;
mod latency;

pub(super) const MS: fn(u64) -> Duration = Duration::from_millis;

pub(super) fn collect(t: &mut UdpTransport, out: &mut Vec<(u32, Vec<u8>)>) -> usize {
    t.poll(Instant::now(), &mut |d| match d {
        Delivery::Message { from, bytes } => out.push((from, bytes.to_vec())),
        Delivery::Suspect { peer } => out.push((peer, b"SUSPECT".to_vec())),
        Delivery::Fenced { by } => out.push((by, b"FENCED".to_vec())),
    })
    .unwrap()
}

/// Polls all of `eps` until `done` holds or `limit` passes; returns whether it held.
pub(super) fn pump(
    eps: &mut [&mut UdpTransport],
    got: &mut [Vec<(u32, Vec<u8>)>],
    limit: Duration,
    done: impl Fn(&[&mut UdpTransport], &[Vec<(u32, Vec<u8>)>]) -> bool,
) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        for (t, g) in eps.iter_mut().zip(got.iter_mut()) {
            collect(t, g);
        }
        if done(eps, got) {
            return true;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    false
}

pub(super) fn local(n: u32, cfg: UdpConfig) -> Vec<UdpTransport> {
    UdpTransport::bind_ephemeral_local(n, cfg).unwrap().1
}
