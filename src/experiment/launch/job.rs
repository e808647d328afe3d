//! Job ids: every datagram and control message carries its job's id, and a node drops what
//! belongs to another job (two runs on one host, a stale process of an earlier run). Every
//! experiment derives its id here, from what all its processes know alike.

/// A broadcast benchmark (`bench`, `node`): every node derives it from the run's seed.
pub fn bench(seed: u64) -> u64 {
    0xF7C0_0000_0000_0000 ^ seed
}

/// A launched agreement run (`agree --join`): control plane and data, from the seed.
pub fn agree(seed: u64) -> u64 {
    0xA6EE_0000_0000_0000 ^ seed
}

/// A bootstrap on this machine: the launching process's id and the node count (two
/// bootstraps at once differ by their launcher).
pub fn bootstrap(launcher_pid: u32, nodes: u32) -> u64 {
    u64::from(launcher_pid) << 20 | u64::from(nodes)
}

/// `logp --between` (two hosts measuring one link; one pair at a time).
pub const LOGP_BETWEEN: u64 = 0x10_6f_5e;
