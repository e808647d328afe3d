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

/// `logp --rendezvous` (rank 0 measuring every other process of a launched run).
pub const LOGP_RENDEZVOUS: u64 = 0x10_6f_5e;

/// `logp --between` on `port` (two hosts measuring one link).
pub fn logp_between(port: u16) -> u64 {
    0x106f_0000 ^ u64::from(port)
}

/// The node-hop calibration before a bench run (`experiment::node_hop`): a 2-node run of its
/// own, on ports of its own, which no datagram of the measured run may reach.
pub fn node_hop() -> u64 {
    0x40B0_0000_0000_0000
}
