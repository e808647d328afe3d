//! The header's `kind` byte: one value per message type (`docs/architecture.md`, decision
//! 9).
//!
//! Fixed-size messages have one value each. Messages generic over a correction capacity `C`
//! (`TreeMsg<C>`, `GossipMsg<C>`, `CorrMsg<C>`) carry `C` in the low nibble of their family's
//! value, so that `C = 0` and `C = 4` never decode as each other. 0 is never a kind. A new
//! message type takes a free value here and is added to [`is_known`].

/// `BigMsg`.
pub const BIG: u8 = 0x01;
/// `TreeAckMsg`.
pub const TREE_ACK: u8 = 0x02;
/// `BfbMsg`.
pub const BFB: u8 = 0x03;
/// `EraMsg<And32>` (ERA agreement on a 32-bit AND).
pub const ERA_AND32: u8 = 0x05;
/// `EraMsg<And64>`.
pub const ERA_AND64: u8 = 0x06;
/// `EraMsg<RankSet>` (set union).
pub const ERA_UNION: u8 = 0x07;
/// `Heartbeat` (ERA's failure detector).
pub const HEARTBEAT: u8 = 0x08;
/// `OverlayMsg` (the BMG overlay's Algorithms 1 and 2).
pub const BMG_OVERLAY: u8 = 0x04;
/// `HfMsg` (Han–Finkel dissemination).
pub const HAN_FINKEL: u8 = 0x09;
/// `BootMsg` (the runtime bootstrap's envelope of the overlay and the all-gather).
pub const BOOTSTRAP: u8 = 0x0A;
/// `WatchMsg` (a booted node's heartbeats, overlay repair and failure notices).
pub const WATCH: u8 = 0x0B;
/// `TreeMsg<C>` is `CORRECTED_TREE | C`.
pub const CORRECTED_TREE: u8 = 0x10;
/// `GossipMsg<C>` is `CORRECTED_GOSSIP | C`.
pub const CORRECTED_GOSSIP: u8 = 0x20;
/// `CorrMsg<C>` on its own is `CORRECTION | C`.
pub const CORRECTION: u8 = 0x30;
/// The largest capacity `C` a kind can name.
pub const MAX_CAP: usize = 0x0F;

/// `family | c`; evaluated in constants only, where `c > MAX_CAP` fails the build.
pub(crate) const fn with_cap(family: u8, c: usize) -> u8 {
    assert!(c <= MAX_CAP, "correction capacity too large for the wire's kind byte");
    family | c as u8
}

/// Is `k` the kind of some message type (whatever its capacity)?
pub fn is_known(k: u8) -> bool {
    matches!(
        k,
        BIG | TREE_ACK
            | BFB
            | ERA_AND32
            | ERA_AND64
            | ERA_UNION
            | HEARTBEAT
            | BMG_OVERLAY
            | HAN_FINKEL
            | BOOTSTRAP
            | WATCH
    ) || matches!(k & 0xF0, CORRECTED_TREE | CORRECTED_GOSSIP | CORRECTION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_kinds() {
        let known: Vec<u8> = (0..=u8::MAX).filter(|&k| is_known(k)).collect();
        assert_eq!(known.len(), 11 + 3 * 16);
        assert!(!is_known(0));
        assert!(!is_known(0x0C) && !is_known(0x40) && !is_known(0xFF));
        assert_eq!(with_cap(CORRECTION, 4), 0x34);
    }
}
