//! What [`super::Driver`] hands a machine beyond the sans-IO contract: the datagram itself
//! (header, body and payload, for a family whose admission needs more than the decoded
//! message: the broadcast's operation window, duplicate filter and payload check), the
//! encoding of its messages (the broadcast's datagrams carry the operation's payload, which
//! the machine holds), and what became of each send. A machine that needs none of these is
//! driven through [`Plain`], whose defaults are the family's [`Framing`] as it is.

use crate::protocol::{Event, Machine, Rank, Time};
use crate::transport::SendError;
use crate::wire::{DecodeError, DropCounters};

use super::{Decoded, Framing, Reject, Sent, open_datagram};

/// What became of one datagram handed to [`Endpoint::datagram`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Got {
    /// A message for the machine (it has it).
    Msg,
    /// A heartbeat: the sender watches this node.
    Heartbeat,
    /// A valid datagram with nothing for the machine.
    Other,
    /// Dropped (and counted).
    Dropped,
}

/// A [`Machine`] of family `F` as the driver sees it; every method has the default a plain
/// machine wants.
pub trait Endpoint<F: Framing>: Machine<Msg = F::Msg> {
    /// Checks, decodes and hands on one datagram from `from` (the transport's sender) at
    /// `now`; what fails is counted in `drops`.
    #[inline]
    fn datagram(&mut self, now: Time, from: Rank, bytes: &[u8], job: u64, n: u32, drops: &mut DropCounters) -> Got {
        let r = match open_datagram(bytes, job, n, from, None) {
            Err(Reject::Invalid(e)) => Err(e),
            Err(_) => Err(DecodeError::RankOutOfRange),
            Ok((h, body, _)) => F::decode_datagram(&h, body, n),
        };
        match r {
            Ok(Decoded::Msg(msg)) => {
                _ = self.handle(now, Event::Message { from, msg });
                Got::Msg
            }
            Ok(Decoded::Heartbeat) => Got::Heartbeat,
            Ok(Decoded::Other) => Got::Other,
            Err(e) => {
                drops.count(e);
                Got::Dropped
            }
        }
    }

    /// Encodes `msg` from `rank` as a whole datagram into `buf`; its length (`None`: not
    /// sent).
    #[inline]
    fn encode(&mut self, msg: &F::Msg, job: u64, rank: Rank, buf: &mut [u8]) -> Option<usize> {
        F::encode(msg, job, rank, buf)
    }

    /// The datagram of the message last polled went to `to` with this result.
    #[inline]
    fn sent(&mut self, _to: Rank, _r: Sent) {}

    /// A datagram queued for `to` left the queue with this result.
    #[inline]
    fn flushed(&mut self, _to: Rank, _r: Result<(), SendError>) {}
}

/// A machine with the family's framing as it is.
pub struct Plain<'a, M>(pub &'a mut M);

impl<M: Machine> Machine for Plain<'_, M> {
    type Msg = M::Msg;
    type Input = M::Input;
    type Output = M::Output;
    type Error = M::Error;
    const TIMED: bool = M::TIMED;

    #[inline]
    fn handle(&mut self, now: Time, ev: Event<M::Msg, M::Input>) -> Result<(), M::Error> {
        self.0.handle(now, ev)
    }
    #[inline]
    fn poll_transmit(&mut self, now: Time) -> Option<(Rank, M::Msg)> {
        self.0.poll_transmit(now)
    }
    #[inline]
    fn poll_timeout(&self) -> Option<Time> {
        self.0.poll_timeout()
    }
    #[inline]
    fn poll_output(&mut self) -> Option<M::Output> {
        self.0.poll_output()
    }
    #[inline]
    fn poll_doubt(&mut self) -> Option<Rank> {
        self.0.poll_doubt()
    }
}

impl<F: Framing, M: Machine<Msg = F::Msg>> Endpoint<F> for Plain<'_, M> {}
