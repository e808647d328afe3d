//! The datagram link under the reliability core: what the driver reads datagrams from and
//! sends them to. [`super::socket::SocketLink`] is the UDP socket; [`super::impair::Impaired`]
//! wraps any link to lose, reorder and delay what it receives, so that injected faults stay
//! below the reliability layer and are repaired by it like real ones.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

/// What one read of a link gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recv {
    /// A datagram of `len` bytes from `src` is in the buffer; `arrived` is when it reached
    /// the host, when the link knows.
    Datagram {
        len: usize,
        src: SocketAddr,
        arrived: Option<Instant>,
    },
    /// Something was read but there is nothing to process (an error to read past, a datagram
    /// the impairment dropped or held back).
    Consumed,
    /// Nothing to read now.
    Empty,
}

/// A bidirectional datagram link of one endpoint.
pub trait Link {
    /// Reads at most one datagram into `buf` (one byte longer than the largest valid datagram,
    /// so that truncation shows).
    fn recv(&mut self, buf: &mut [u8], now: Instant) -> io::Result<Recv>;

    /// Puts `d` on the wire to `to`. Failures are losses: the retransmission repairs them.
    fn send(&mut self, d: &[u8], to: SocketAddr);

    /// A datagram held back earlier and released now into `buf`: right after the datagram
    /// that [`Link::recv`] just returned (reordering), or at the end of a poll.
    fn take_held(&mut self, _buf: &mut [u8]) -> Option<(usize, SocketAddr)> {
        None
    }

    /// A delayed datagram due at `now`, into `buf`, oldest first.
    fn take_due(&mut self, _buf: &mut [u8], _now: Instant) -> Option<(usize, SocketAddr)> {
        None
    }

    /// When [`Link::take_due`] will next have a datagram, if it holds any.
    fn next_due(&self) -> Option<Instant> {
        None
    }

    /// Datagrams the link dropped on purpose (loss injection, a full delay line).
    fn injected_losses(&self) -> u64 {
        0
    }
}
