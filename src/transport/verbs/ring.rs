//! Layout of an endpoint's one buffer (credit words, per-peer receive rings, per-peer send
//! staging) and of its two registrations: the credit words' page(s), which peers may RDMA
//! WRITE, and the rings and staging, which only the local HCA writes, the 64-bit work-request ids that name a peer and a slot, and the
//! per-poll batch of receives to re-post (one `ibv_post_recv` per peer per poll).

/// Cache-line-aligned slot size for messages of up to `max_msg` bytes.
pub fn slot_len(max_msg: usize) -> usize {
    max_msg.div_ceil(64) * 64
}

/// Offsets in the registered buffer of an endpoint with `peers` QPs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub peers: usize,
    pub rx_slots: usize,
    pub tx_slots: usize,
    pub slot: usize,
}

impl Layout {
    /// Credit words: one u64 per rank, padded to a cache line each (no false sharing between
    /// the HCA's writes for different peers).
    pub const CREDIT_STRIDE: usize = 64;

    /// Registrations start and end on page boundaries, so the remote-writable one shares no
    /// page with the rings.
    pub const PAGE: usize = 4096;

    pub fn credit(&self, peer: usize) -> usize {
        peer * Self::CREDIT_STRIDE
    }

    /// Bytes of the credit area at offset 0: the credit words, padded to whole pages. The
    /// only range registered with remote write.
    pub fn credits_len(&self) -> usize {
        (self.peers * Self::CREDIT_STRIDE).div_ceil(Self::PAGE) * Self::PAGE
    }

    /// Offset of the data area (receive rings, then send staging), registered for local
    /// access only; it runs to [`Layout::len`].
    pub fn data_start(&self) -> usize {
        self.credits_len()
    }

    fn rx_base(&self) -> usize {
        self.data_start()
    }

    pub fn rx(&self, peer: usize, slot: usize) -> usize {
        self.rx_base() + (peer * self.rx_slots + slot) * self.slot
    }

    fn tx_base(&self) -> usize {
        self.rx_base() + self.peers * self.rx_slots * self.slot
    }

    pub fn tx(&self, peer: usize, slot: usize) -> usize {
        self.tx_base() + (peer * self.tx_slots + slot) * self.slot
    }

    /// Total bytes to register.
    pub fn len(&self) -> usize {
        self.tx_base() + self.peers * self.tx_slots * self.slot
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Work-request ids: peer index in the high 24 bits, slot or WR index in the low 40.
pub mod wr_id {
    const SHIFT: u32 = 40;
    const LOW: u64 = (1 << SHIFT) - 1;

    pub fn encode(peer: usize, low: u64) -> u64 {
        ((peer as u64) << SHIFT) | (low & LOW)
    }

    /// `(peer, low)` if `peer < peers`.
    pub fn decode(id: u64, peers: usize) -> Option<(usize, u64)> {
        let p = (id >> SHIFT) as usize;
        (p < peers).then_some((p, id & LOW))
    }

    /// Reconstructs a full WR index from its low bits near `reference` (the oldest
    /// outstanding index): indices in flight are within 2^40 of it.
    pub fn widen(low: u64, reference: u64) -> u64 {
        let base = reference & !LOW;
        let c = base | low;
        if c < reference { c + (1 << SHIFT) } else { c }
    }
}

/// Receives to re-post, gathered while a batch of completions is handled.
#[derive(Debug)]
pub struct Reposts<const N: usize> {
    items: [(u32, u32); N],
    len: usize,
}

impl<const N: usize> Default for Reposts<N> {
    fn default() -> Self {
        Reposts {
            items: [(0, 0); N],
            len: 0,
        }
    }
}

impl<const N: usize> Reposts<N> {
    /// Adds (peer, slot); false if full (the caller flushes first).
    pub fn push(&mut self, peer: u32, slot: u32) -> bool {
        if self.len == N {
            return false;
        }
        self.items[self.len] = (peer, slot);
        self.len += 1;
        true
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Hands each peer's slots (in completion order) to `f` once, then empties the batch.
    pub fn drain_by_peer(&mut self, mut f: impl FnMut(u32, &[u32])) {
        let mut slots = [0u32; N];
        let mut done = [false; N];
        for i in 0..self.len {
            if done[i] {
                continue;
            }
            let peer = self.items[i].0;
            let mut k = 0;
            for (d, &(p, s)) in done[i..self.len].iter_mut().zip(&self.items[i..self.len]) {
                if !*d && p == peer {
                    slots[k] = s;
                    k += 1;
                    *d = true;
                }
            }
            f(peer, &slots[..k]);
        }
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_regions_do_not_overlap() {
        let l = Layout {
            peers: 3,
            rx_slots: 4,
            tx_slots: 2,
            slot: slot_len(1200),
        };
        assert_eq!(l.slot, 1216);
        let mut spans: Vec<(usize, usize)> = (0..3).map(|p| (l.credit(p), 8)).collect();
        for p in 0..3 {
            spans.extend((0..4).map(|s| (l.rx(p, s), l.slot)));
            spans.extend((0..2).map(|s| (l.tx(p, s), l.slot)));
        }
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "{w:?}");
        }
        let last = spans.last().unwrap();
        assert_eq!(last.0 + last.1, l.len());
        assert!(l.rx(0, 0).is_multiple_of(64) && l.tx(0, 0).is_multiple_of(64));
    }

    #[test]
    fn credit_words_and_rings_lie_in_separate_pages() {
        for peers in [1, 2, 64, 65, 1000] {
            let l = Layout {
                peers,
                rx_slots: 4,
                tx_slots: 2,
                slot: slot_len(1200),
            };
            let last_credit = l.credit(peers - 1) + 8;
            assert!(last_credit <= l.credits_len(), "{peers}");
            assert!(l.credits_len().is_multiple_of(Layout::PAGE));
            assert_eq!(l.data_start(), l.credits_len());
            assert!(l.rx(0, 0) >= l.data_start() && l.tx(0, 0) > l.rx(peers - 1, 3));
            assert!(
                l.credits_len() - last_credit < Layout::PAGE,
                "no more than a page of padding"
            );
        }
    }

    #[test]
    fn wr_ids_roundtrip_and_foreign_peers_are_refused() {
        let id = wr_id::encode(5, 123_456);
        assert_eq!(wr_id::decode(id, 6), Some((5, 123_456)));
        assert_eq!(wr_id::decode(id, 5), None);
        assert_eq!(wr_id::decode(u64::MAX, 1000), None);
        let big = (1u64 << 40) + 7;
        let (_, low) = wr_id::decode(wr_id::encode(1, big), 2).unwrap();
        assert_eq!(low, 7);
        assert_eq!(wr_id::widen(low, (1 << 40) - 3), big);
        assert_eq!(wr_id::widen(low, 5), 7);
    }

    #[test]
    fn reposts_group_by_peer_in_order() {
        let mut r = Reposts::<4>::default();
        assert!(r.push(2, 10) && r.push(1, 3) && r.push(2, 11) && r.push(1, 4));
        assert!(!r.push(0, 0), "full");
        let mut got = Vec::new();
        r.drain_by_peer(|p, s| got.push((p, s.to_vec())));
        assert_eq!(got, vec![(2, vec![10, 11]), (1, vec![3, 4])]);
        assert!(r.is_empty());
    }
}
