//! The death boards of `agree --procs` and `stress agree --procs`
//! ([`crate::transport::death_watch`]): one file per generation in a private directory, its
//! path in every process's spec.

use crate::runtime::agree_procs::ChildSpec;

/// The death boards of a local launch ([`crate::transport::death_watch`]): one file per
/// generation in a private directory, removed with it. `None` where the group is larger
/// than a board holds (the ICMP refusals and heartbeats still tell deaths).
pub(super) struct DeathBoards {
    dir: std::path::PathBuf,
    n: u32,
}

/// Set to `off`, launches make no death board (A/B runs against the closed port's ICMP).
pub(super) const DEATH_BOARD_ENV: &str = "FTCOLL_DEATH_BOARD";

impl DeathBoards {
    /// The boards of a launch of `n` processes; `None` where there are none, said on stderr
    /// when it is not asked for (the run goes on: deaths are then seen from the closed port).
    pub(super) fn new(n: u32) -> Option<Self> {
        if n > crate::transport::death_watch::MAX_RANKS || std::env::var(DEATH_BOARD_ENV).is_ok_and(|v| v == "off") {
            return None;
        }
        match super::private_dir("ftcoll-deaths") {
            Ok(dir) => Some(Self { dir, n }),
            Err(e) => {
                eprintln!("ftcoll: warning: no death board ({e}): deaths are seen from the closed port");
                None
            }
        }
    }

    /// The board of generation `g`, created now (`None`, said on stderr, if it cannot be).
    pub(super) fn board(&self, g: u64) -> Option<String> {
        let path = self.dir.join(format!("generation-{g}"));
        match crate::transport::death_watch::DeathBoard::create(&path, self.n) {
            Ok(()) => Some(path.to_string_lossy().into_owned()),
            Err(e) => {
                eprintln!(
                    "ftcoll: warning: no death board ({}: {e}): deaths are seen from the closed port",
                    path.display()
                );
                None
            }
        }
    }
}

impl Drop for DeathBoards {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `spec` with generation `g`'s death board, if there are boards.
pub(super) fn with_board(mut spec: ChildSpec, board: &Option<String>) -> ChildSpec {
    spec.death_board = board.clone();
    spec
}

/// Once every process of a generation is ready (each has mapped its board), the board's file
/// goes: the mappings stay, and no file per generation piles up in a long stress run.
pub(super) fn unlink_board(board: &Option<String>) {
    if let Some(path) = board {
        let _ = std::fs::remove_file(path);
    }
}
