//! What a member's caller and its threads share ([`Flags`]): who fenced it, whether it
//! leaves, how it left, and (rank 0) whom its rendezvous refused, and when its join gives up.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32};

use crate::group::NOT_FENCED;

/// [`Flags::left`]: not yet left, or left unacknowledged.
pub(super) const LEFT_UNACKNOWLEDGED: u8 = 0;
/// [`Flags::left`]: left with everything acknowledged.
pub(super) const LEFT_FLUSHED: u8 = 1;

/// What a member's caller and its threads share.
pub(super) struct Flags {
    /// Who fenced this member (`NOT_FENCED`: no one), set by its thread before it reports
    /// itself failed.
    pub(super) fenced_by: AtomicU32,
    /// The member leaves: its thread and rank 0's rendezvous end.
    pub(super) stop: AtomicBool,
    /// How it left: [`LEFT_FLUSHED`] once its thread left with everything acknowledged.
    pub(super) left: AtomicU8,
    /// Rank 0: the last member its rendezvous refused (another shape), or [`NONE_REFUSED`].
    pub(super) refused: AtomicU32,
    /// The member's join gives up: set by rank 0's rendezvous when it refused a member (the
    /// group cannot form), or by one of the member's two joins when the other failed.
    pub(super) give_up: Arc<AtomicBool>,
}

impl Flags {
    /// Not fenced, not stopping, not left, no member refused.
    pub(super) fn new() -> Self {
        Flags {
            fenced_by: AtomicU32::new(NOT_FENCED),
            stop: AtomicBool::new(false),
            left: AtomicU8::new(LEFT_UNACKNOWLEDGED),
            refused: AtomicU32::new(NONE_REFUSED),
            give_up: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// [`Flags::refused`]: no member refused.
pub(super) const NONE_REFUSED: u32 = u32::MAX;
