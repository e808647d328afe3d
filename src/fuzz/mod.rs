//! Fuzzing every decoder that reads untrusted bytes (`docs/security.md`): the target bodies, shared by
//! the libFuzzer targets of the `fuzz/` crate (`cargo fuzz run NAME`) and by [`stable`], a
//! harness that runs the same bodies on the stable toolchain (corpus plus mutated inputs for a
//! bounded time; what `.ci/run` uses).

pub mod stable;
pub mod targets;

/// One fuzz target: a decoder and the inputs it starts from.
#[derive(Clone, Copy)]
pub struct Target {
    /// The name, as in `fuzz/fuzz_targets/NAME.rs` and `fuzz/corpus/NAME/`.
    pub name: &'static str,
    /// Runs one input; panics on a bug. Returns the branch reached (coarse coverage).
    pub run: fn(&[u8]) -> u64,
    /// Valid inputs to start mutating from.
    pub seeds: fn() -> Vec<Vec<u8>>,
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "wire_header",
        run: targets::wire_header,
        seeds: seeds::wire_header,
    },
    Target {
        name: "wire_tree",
        run: targets::wire_tree,
        seeds: seeds::wire_tree,
    },
    Target {
        name: "wire_gossip",
        run: targets::wire_gossip,
        // Gossip and tree bodies share one layout (tag · vt | tag · correction).
        seeds: seeds::wire_tree,
    },
    Target {
        name: "wire_corr",
        run: targets::wire_corr,
        seeds: seeds::wire_corr,
    },
    Target {
        name: "wire_bfb",
        run: targets::wire_bfb,
        seeds: seeds::wire_bfb,
    },
    Target {
        name: "wire_small",
        run: targets::wire_small,
        seeds: seeds::wire_small,
    },
    Target {
        name: "wire_era",
        run: targets::wire_era,
        seeds: seeds::wire_era,
    },
    Target {
        name: "wire_overlay",
        run: targets::wire_overlay,
        seeds: seeds::wire_overlay,
    },
    Target {
        name: "wire_watch",
        run: targets::wire_watch,
        seeds: seeds::wire_watch,
    },
    Target {
        name: "wire_bootstrap",
        run: targets::wire_bootstrap,
        seeds: seeds::wire_bootstrap,
    },
    Target {
        name: "udp_datagram",
        run: targets::udp_datagram,
        seeds: seeds::udp_datagram,
    },
    Target {
        name: "control",
        run: targets::control,
        seeds: seeds::control,
    },
    Target {
        name: "join",
        run: targets::join,
        seeds: seeds::join,
    },
    Target {
        name: "refusal",
        run: targets::refusal,
        seeds: seeds::refusal,
    },
    Target {
        name: "conn_relay",
        run: targets::conn_relay,
        seeds: seeds::conn_relay,
    },
    Target {
        name: "conn_record",
        run: targets::conn_record,
        seeds: seeds::conn_record,
    },
    Target {
        name: "agree_stream",
        run: targets::agree_stream,
        seeds: seeds::agree_stream,
    },
    Target {
        name: "join_line",
        run: targets::join_line,
        seeds: seeds::join_line,
    },
    Target {
        name: "hostfile",
        run: targets::hostfile,
        seeds: seeds::hostfile,
    },
    Target {
        name: "key_file",
        run: targets::key_file,
        seeds: seeds::key_file,
    },
    Target {
        name: "kills",
        run: targets::kills,
        seeds: seeds::kills,
    },
];

/// The target named `name`.
pub fn find(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

mod seeds;
