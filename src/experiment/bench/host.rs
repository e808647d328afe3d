//! Whether this host can hold a bench run: its memory and file descriptors against what the
//! run's endpoints and nodes allocate ([`crate::runtime::host`]), checked before anything is
//! built.

pub use crate::runtime::host::*;
use crate::runtime::limits;

use super::BenchSpec;

/// Refuses `--nodes` when the run's endpoints would not fit this host's memory or file
/// descriptors: a local cluster holds every endpoint in this process, `--procs` one per child
/// (and a pipe per child here), a launched run (`--join`) one.
pub fn check(a: &BenchSpec) -> Result<(), String> {
    let layout = if a.join.is_some() {
        Layout::Joined
    } else if a.procs {
        Layout::Procs
    } else {
        Layout::Local(a.transport)
    };
    check_against(a.nodes, layout, limits::memory(), limits::fds())
}
