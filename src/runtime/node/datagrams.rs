//! The broadcast family's datagrams for the generic node loop: header, the message's body,
//! the operation's payload (codecs in [`crate::wire`]).

use std::marker::PhantomData;

use crate::protocol::Rank;
use crate::runtime::driver::{Decoded, Framing};
use crate::transport::MAX_PAYLOAD;
use crate::wire::{DecodeError, Header, WireMessage, encode_datagram};

/// A broadcast message with the operation it belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op<M> {
    /// The operation's root (physical rank).
    pub root: u32,
    pub seq: u64,
    pub msg: M,
}

/// The broadcast family's datagrams: header, `M`'s body, the operation's payload. The
/// node's machine writes the payload ([`Endpoint::encode`](crate::runtime::driver::Endpoint::encode)); [`Framing::encode`] alone
/// writes a datagram with none.
pub struct Datagrams<M>(PhantomData<fn() -> M>);

impl<M: WireMessage> Framing for Datagrams<M> {
    type Msg = Op<M>;
    const MAX_DATAGRAM: usize = MAX_PAYLOAD;
    const HEARTBEATS: bool = false;

    /// (The operation is in the header: a body alone is refused, see
    /// [`Framing::decode_datagram`].)
    fn decode(_: u8, _: &[u8], _: u32) -> Result<Decoded<Op<M>>, DecodeError> {
        Err(DecodeError::UnknownKind)
    }

    fn decode_datagram(h: &Header, body: &[u8], n: u32) -> Result<Decoded<Op<M>>, DecodeError> {
        if h.kind != M::KIND {
            return Err(DecodeError::UnknownKind);
        }
        M::decode(body, n).map(|msg| {
            Decoded::Msg(Op {
                root: h.root,
                seq: h.seq,
                msg,
            })
        })
    }

    fn encode(op: &Op<M>, job: u64, rank: Rank, buf: &mut [u8]) -> Option<usize> {
        encode_datagram(buf, job, op.root, op.seq, rank, &op.msg, &[]).ok()
    }

    fn heartbeat(_: u64, _: Rank, _: &mut [u8]) -> Option<usize> {
        None
    }
}
