//! The broadcast machine's datagram side ([`Endpoint`] of [`Pass`]): a datagram admitted in
//! the order the wire and the window want (header, duplicate filter, window, root, body,
//! payload; what fails is dropped and counted), a message encoded with its operation, and the
//! transport's verdict on each send.

use super::*;

impl<P: Protocol> Endpoint<Datagrams<P::Msg>> for Pass<'_, '_, P>
where
    P::Msg: WireMessage,
{
    /// Admits one datagram in the order header, duplicate filter, window, root, body,
    /// payload (a late copy is stale whatever root its slot names now); an injected crash on
    /// receipt strikes before the protocol sees it.
    fn datagram(&mut self, _: Time, from: Rank, bytes: &[u8], job: u64, n: u32, _: &mut DropCounters) -> Got {
        let (rank, epoch) = (self.ops.rank, self.p.epoch);
        let polled = self.ops.stages.now(epoch);
        let stats = &mut *self.stats;
        let (h, body, payload) = match open_datagram(bytes, job, n, from, Some(P::Msg::KIND)) {
            Ok(x) => x,
            Err(r) => {
                match r {
                    Reject::Invalid(e) => stats.drops.count(e),
                    Reject::WrongKind => stats.wrong_kind += 1,
                    Reject::Spoofed => stats.spoofed += 1,
                }
                return Got::Dropped;
            }
        };
        match self.ops.filter.admit(OpId { root: 0, seq: h.seq }) {
            Admission::Live => {}
            Admission::Stale => {
                // Over here: where roots are learned, one that differs from the root it was
                // over with (still in its slot) is the callers' disagreement, not a late copy.
                let s = &self.ops.slots[slot_index(h.seq)];
                if self.ctl.learn_roots && s.seq == h.seq && s.root != h.root && P::Msg::decode(body, n).is_ok() {
                    stats.wrong_root += 1;
                    self.ops.payloads.wrong_root(h.seq, s.root, h.root);
                    return Got::Dropped;
                }
                stats.stale += 1;
                return Got::Dropped;
            }
            Admission::TooFarAhead => {
                stats.too_far += 1;
                return Got::Dropped;
            }
        }
        if h.seq >= self.ops.retired + WINDOW as u64 {
            stats.too_far += 1;
            return Got::Dropped;
        }
        let named = match self.p.root {
            Some(r) => Some(r),
            // Not yet called here: the datagram names its root (written to the slot once its
            // body and payload are admitted, below), which is never this node (only its own
            // call makes it a root), unless an earlier datagram of the operation named it
            // already: that one holds (the operation's instance here is that root's).
            None if self.ctl.learn_roots && h.seq >= self.ctl.allowed.load(Ordering::Acquire) => {
                let s = &self.ops.slots[slot_index(h.seq)];
                (s.seq == h.seq && s.proto.is_some()).then_some(s.root)
            }
            None => Some(self.ctl.root_of(h.seq)),
        };
        let wrong = named.map_or(h.root == rank, |r| r != h.root);
        // Where roots are learned, a root that differs from the one known is the callers'
        // disagreement, told apart from a bad datagram once the body decodes.
        let disagree = wrong && self.ctl.learn_roots && named.is_some();
        if wrong && !disagree {
            stats.drops.count(DecodeError::BadField("root"));
            return Got::Dropped;
        }
        let msg = match P::Msg::decode(body, n) {
            Ok(m) => m,
            Err(e) => {
                stats.drops.count(e);
                return Got::Dropped;
            }
        };
        if let Some(r) = named.filter(|_| disagree) {
            stats.wrong_root += 1;
            self.ops.payloads.wrong_root(h.seq, r, h.root);
            return Got::Dropped;
        }
        if !self.ops.payloads.admit(h.seq, payload) {
            if let Some(b) = self.board.get(h.seq) {
                b.bad_payload.fetch_add(1, Ordering::Relaxed);
            }
            stats.drops.count(DecodeError::BadField("payload"));
            return Got::Dropped;
        }
        if named.is_none() {
            self.ctl.set_root(h.seq, h.root);
        }
        self.ops.stages.mark_at(rank, h.seq, Stage::Polled, polled);
        self.ops.stages.mark(rank, h.seq, Stage::Decoded, epoch);
        if let Some(f) = self.ops.faults.as_mut()
            && f.crash_on_receive(h.seq)
        {
            self.ops.dying = Some(h.seq);
            return Got::Other;
        }
        self.open((h.root, h.seq), Some(payload));
        let op = Op {
            root: h.root,
            seq: h.seq,
            msg,
        };
        self.on_message(from, &op);
        Got::Msg
    }

    /// The datagram carries the operation's payload; the operation counts the send.
    #[inline]
    fn encode(&mut self, op: &Op<P::Msg>, job: u64, rank: Rank, buf: &mut [u8]) -> Option<usize> {
        let i = slot_index(op.seq);
        let len = match encode_datagram(buf, job, op.root, op.seq, rank, &op.msg, &self.ops.slots[i].payload) {
            Ok(len) => len,
            Err(e) => {
                self.stats.drops.count(e);
                return None;
            }
        };
        self.ops.stages.mark(rank, op.seq, Stage::Encoded, self.p.epoch);
        self.ops.slots[i].sent += 1;
        let ns = self.ns(self.now);
        self.note_activity(op.seq, 1, ns);
        Some(len)
    }

    /// A datagram dropped (queue full, bad destination) fails its operation; a suspected
    /// peer is owed nothing (crash-stop). An injected crash after a send strikes here.
    #[inline]
    fn sent(&mut self, _: Rank, r: Sent) {
        let stats = &mut *self.stats;
        let ok = match r {
            Sent::Sent => true,
            Sent::Queued => {
                stats.backpressure += 1;
                true
            }
            Sent::Overflow => {
                stats.backpressure += 1;
                stats.deferred_overflow += 1;
                false
            }
            Sent::Refused(SendError::Suspected) => {
                stats.to_suspected += 1;
                true
            }
            Sent::Refused(_) => {
                stats.drops.count(DecodeError::BadField("destination"));
                false
            }
        };
        let seq = self.ops.cursor;
        if !ok {
            self.board.claim(seq).send_drops.fetch_add(1, Ordering::Relaxed);
        }
        let rank = self.ops.rank;
        self.ops.stages.mark(rank, seq, Stage::Sent, self.p.epoch);
        let sent = self.ops.slots[slot_index(seq)].sent;
        if let Some(f) = self.ops.faults.as_mut()
            && f.crash_after_send(seq, sent)
        {
            self.ops.dying = Some(seq);
        }
    }

    fn flushed(&mut self, _: Rank, r: Result<(), SendError>) {
        if r == Err(SendError::Suspected) {
            self.stats.to_suspected += 1;
        }
    }
}
