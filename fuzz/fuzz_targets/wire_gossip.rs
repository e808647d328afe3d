//! libFuzzer target `wire_gossip`: the body is `ftcoll::fuzz::targets::wire_gossip`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::wire_gossip(data);
});
