//! The loop between a link and the reliability core: read datagrams, hand them to the core,
//! put what it queued on the link. Generic over the [`Link`], so the UDP endpoint and the
//! in-memory tests of the core run the same code.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use super::link::{Link, Recv};
use super::reliable::Reliable;
use crate::transport::Delivery;

/// Datagrams read per poll at most, so that timers and ACKs are served under a flood (a poll
/// also returns after the first datagram that delivered something).
const RECV_BUDGET: usize = 256;

/// Puts on `link` every datagram `core` queued.
#[inline]
pub(crate) fn transmit(core: &mut Reliable, link: &mut impl Link) {
    while let Some(t) = core.poll_transmit() {
        link.send(t.bytes, t.to);
    }
}

/// Hands the datagram in `rbuf[..len]` to `core` and sends what it answers.
#[inline]
fn process(
    core: &mut Reliable,
    link: &mut impl Link,
    rbuf: &[u8],
    (len, src): (usize, SocketAddr),
    now: Instant,
    sink: &mut dyn FnMut(Delivery<'_>),
) -> usize {
    let delivered = core.on_datagram(&rbuf[..len], src, now, sink);
    transmit(core, link);
    delivered
}

/// The receive half of a poll: reads `link` into `rbuf` and feeds `core` until the link is
/// empty, [`RECV_BUDGET`] reads were made, or a datagram delivered something; then what the
/// link held back and is due. Returns the deliveries, whether the link may hold more, and
/// whether the budget ran out (a flood or a long burst: the core is told, see
/// [`Reliable::set_backlog`]).
#[inline]
pub(crate) fn receive(
    core: &mut Reliable,
    link: &mut impl Link,
    rbuf: &mut [u8],
    now: Instant,
    sink: &mut dyn FnMut(Delivery<'_>),
) -> io::Result<(usize, bool, bool)> {
    let mut delivered = 0;
    let mut backlog = false;
    let mut exhausted = false;
    let mut reads = 0;
    loop {
        if reads == RECV_BUDGET {
            backlog = true;
            exhausted = true;
            break;
        }
        reads += 1;
        let got = match link.recv(rbuf, now)? {
            Recv::Empty => break,
            Recv::Consumed => continue,
            Recv::Datagram { len, src, .. } => (len, src),
        };
        delivered += process(core, link, rbuf, got, now, sink);
        // A datagram the reorder injection held back comes right after this one.
        if let Some(held) = link.take_held(rbuf) {
            delivered += process(core, link, rbuf, held, now, sink);
        }
        if delivered > 0 {
            // Hand the messages over now: the runtime's reply or forward goes out before the
            // read that would find the socket empty (a syscall off the critical path).
            backlog = true;
            break;
        }
    }
    if let Some(held) = link.take_held(rbuf) {
        delivered += process(core, link, rbuf, held, now, sink);
    }
    while let Some(due) = link.take_due(rbuf, now) {
        delivered += process(core, link, rbuf, due, now, sink);
    }
    core.set_backlog(exhausted);
    Ok((delivered, backlog, exhausted))
}
